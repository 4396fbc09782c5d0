//! libFuzzer entry of `shardlog::fuzzing::TARGETS`' "storage_files" (its body and invariants are in
//! the library, so `cargo test` runs them too).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shardlog::fuzzing::storage_files::check(data));
