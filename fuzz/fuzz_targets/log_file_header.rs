#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| quill::fuzz::log_file_header(data));
