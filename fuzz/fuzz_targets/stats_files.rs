#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| quill::fuzz::stats_files(data));
