#![no_main]
//! Arbitrary bytes as COPY FROM STDIN data, in text and CSV formats and
//! cut into two chunks at an arbitrary point: the decoder returns rows or
//! an error, never panics, and (CP1) decodes the same rows however the
//! data is cut.

use libfuzzer_sys::fuzz_target;
use quill_sql::copy::{CopyFormat, Fields};

fn decode(format: &CopyFormat, chunks: &[&[u8]]) -> Result<Vec<Fields>, String> {
    quill_sql::copy::decode(format, chunks).map_err(|e| e.message)
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    let mut format = CopyFormat::text();
    if flags & 1 == 1 {
        format.csv = true;
        format.delimiter = b',';
        format.null = String::new();
        format.header = flags & 2 == 2;
    }
    let cut = usize::from(flags >> 2).min(body.len());
    let whole = decode(&format, &[body]);
    let split = decode(&format, &[&body[..cut], &body[cut..]]);
    if let (Ok(a), Ok(b)) = (&whole, &split) {
        assert_eq!(a, b, "rows depend on how the data was cut");
    }
});
