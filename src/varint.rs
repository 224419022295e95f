//! Unsigned LEB128 varints, as the compact on-disk records use them (undo
//! records, `txn::undo`; redo operation headers, `mtr::redo`): seven bits
//! per byte, low groups first, the top bit set on every byte but the last.
//!
//! Invariant V1: [`read`] accepts exactly what [`put`] writes: at most
//! [`MAX_LEN`] bytes, no trailing zero groups (minimal), and a value that
//! fits a u64. So a decoder built on it can promise that a record decodes
//! only if re-encoding it gives the same bytes.

/// The longest encoding of a u64.
pub const MAX_LEN: usize = 10;

/// Why bytes are not a varint [`put`] could have written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarintError {
    /// The bytes end before the varint does.
    Truncated,
    /// A needless zero group at the end.
    NotMinimal,
    /// The value does not fit a u64.
    Overflow,
}

impl VarintError {
    /// What went wrong, for error messages.
    pub fn reason(self) -> &'static str {
        match self {
            VarintError::Truncated => "varint runs past the end",
            VarintError::NotMinimal => "varint is not minimal",
            VarintError::Overflow => "varint overflows a u64",
        }
    }
}

/// Append `v`.
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes [`put`] writes for `v`.
pub const fn len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// The varint at the start of `b`, and how many bytes it took (V1).
#[inline]
pub fn read(b: &[u8]) -> Result<(u64, usize), VarintError> {
    // Most fields (kinds, counts, short lengths) take one byte; a byte
    // without its top bit is a whole, minimal varint on its own.
    if let Some(&byte) = b.first()
        && byte < 0x80
    {
        return Ok((u64::from(byte), 1));
    }
    read_long(b)
}

/// [`read`] for a varint of more than one byte (or none).
fn read_long(b: &[u8]) -> Result<(u64, usize), VarintError> {
    let mut v: u64 = 0;
    for i in 0..MAX_LEN {
        let byte = *b.get(i).ok_or(VarintError::Truncated)?;
        if i == MAX_LEN - 1 && byte > 1 {
            return Err(VarintError::Overflow);
        }
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            if byte == 0 && i > 0 {
                return Err(VarintError::NotMinimal);
            }
            return Ok((v, i + 1));
        }
    }
    Err(VarintError::Overflow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn edges() {
        for (v, n) in [
            (0u64, 1),
            (127, 1),
            (128, 2),
            (16_383, 2),
            (16_384, 3),
            (u64::MAX, 10),
        ] {
            let mut b = Vec::new();
            put(&mut b, v);
            assert_eq!((b.len(), len(v)), (n, n), "{v}");
            assert_eq!(read(&b), Ok((v, n)));
        }
        assert_eq!(read(&[]), Err(VarintError::Truncated));
        assert_eq!(read(&[0x80]), Err(VarintError::Truncated));
        assert_eq!(read(&[0x81, 0x00]), Err(VarintError::NotMinimal));
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert_eq!(read(&over), Err(VarintError::Overflow));
        assert_eq!(read(&[0xff; 11]), Err(VarintError::Overflow));
    }

    proptest! {
        #[test]
        fn round_trip(v in any::<u64>(), tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut b = Vec::new();
            put(&mut b, v);
            let n = b.len();
            b.extend_from_slice(&tail);
            prop_assert_eq!(read(&b), Ok((v, n)));
        }

        #[test]
        fn whatever_reads_re_encodes_the_same(b in proptest::collection::vec(any::<u8>(), 0..12)) {
            if let Ok((v, n)) = read(&b) {
                let mut again = Vec::new();
                put(&mut again, v);
                prop_assert_eq!(&again[..], &b[..n]);
            }
        }
    }
}
