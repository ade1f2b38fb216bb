//! Fuzz target `ws_message`: the input goes to `openagents_hardening::oracles::ws_message`, which panics when
//! an invariant breaks (see tests/hardening/src/oracles.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| openagents_hardening::oracles::ws_message(data));
