//! Fuzz target `sse_resume`: the input goes to `openagents_hardening::oracles::sse_resume`, which panics when
//! an invariant breaks (see tests/hardening/src/oracles.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| openagents_hardening::oracles::sse_resume(data));
