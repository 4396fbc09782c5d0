//! libFuzzer entry of `shardlog::fuzzing::TARGETS`' "stored_batches" (its body and invariants are in
//! the library, so `cargo test` runs them too).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shardlog::fuzzing::stored_batches::check(data));
