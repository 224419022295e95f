#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| quill::fuzz::checkpoint_slot(data));
