//! Byte-string comparisons of the write path, eight bytes at a time: an
//! update's undo delta (`txn::undo::RowDelta`) and its redo patch
//! (`mtr::redo::cell_patch`) both look for what two versions of a row
//! share.

/// Bytes at the start of `a` and `b` that are equal, compared eight at a
/// time (an undo delta and a redo patch are computed on every update).
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let words = a
        .chunks_exact(8)
        .zip(b.chunks_exact(8))
        .take_while(|(x, y)| word(x) == word(y))
        .count();
    let at = words * 8;
    let rest = a.get(at..).unwrap_or_default();
    let other = b.get(at..).unwrap_or_default();
    at + rest.iter().zip(other).take_while(|(x, y)| x == y).count()
}

/// Bytes at the end of `a` and `b` that are equal, compared eight at a
/// time.
pub(crate) fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let words = a
        .rchunks_exact(8)
        .zip(b.rchunks_exact(8))
        .take_while(|(x, y)| word(x) == word(y))
        .count();
    let at = words * 8;
    let rest = a.get(..a.len() - at).unwrap_or_default();
    let other = b.get(..b.len() - at).unwrap_or_default();
    at + rest
        .iter()
        .rev()
        .zip(other.iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// An eight-byte chunk as a word (`chunks_exact(8)` gives only those).
fn word(c: &[u8]) -> u64 {
    <[u8; 8]>::try_from(c).map_or(0, u64::from_ne_bytes)
}
