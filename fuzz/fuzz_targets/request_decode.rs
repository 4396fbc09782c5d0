//! libFuzzer entry of `shardlog::fuzzing::TARGETS`' "request_decode" (its body and invariants are in
//! the library, so `cargo test` runs them too).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shardlog::fuzzing::request_frame::check(data));
