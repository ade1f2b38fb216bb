//! Fuzz target `runner_events`: the input goes to `openagents_hardening::oracles::runner_events`, which panics when
//! an invariant breaks (see tests/hardening/src/oracles.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| openagents_hardening::oracles::runner_events(data));
