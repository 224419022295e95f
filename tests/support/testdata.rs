//! Deterministic test data shared by the test crates (included with
//! `#[path]`, since each file under `tests/` is its own crate).

/// Deterministic pseudo-random bytes for item `i`, `len` long (xorshift).
pub fn bytes(i: u64, len: usize) -> Vec<u8> {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
