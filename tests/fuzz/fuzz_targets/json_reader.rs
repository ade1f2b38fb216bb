//! Fuzz target `json_reader`: the input goes to `openagents_hardening::oracles::json_reader`, which panics when
//! the runtime's own JSON reader accepts what serde_json refuses or reads a value differently (see
//! tests/hardening/src/oracles.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| openagents_hardening::oracles::json_reader(data));
