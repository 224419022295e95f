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

/// The first `p >= from` where `a` and `b` (of equal length) have `RUN`
/// equal bytes in a row, `a[p..p + RUN] == b[p..p + RUN]`; `None` if
/// there is none. Eight bytes at a time: each window of eight finds a
/// run that starts in it and ends in it, and the next window starts right
/// after the last differing byte of this one (a redo patch looks for the
/// end of every changed range so, and a byte loop cost about eight
/// instructions a byte).
pub(crate) fn equal_run<const RUN: usize>(a: &[u8], b: &[u8], from: usize) -> Option<usize> {
    const { assert!(RUN >= 1 && RUN <= 8, "a run fits one window") };
    const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let n = a.len().min(b.len());
    if from >= n {
        return None;
    }
    // `p < n` below, so `p + 8` cannot overflow.
    let mut p = from;
    while p + 8 <= n {
        let x = le_word(a.get(p..p + 8)) ^ le_word(b.get(p..p + 8));
        // 0x80 in each byte of `x` that is zero (equal bytes), exactly:
        // no carry crosses a byte, as the high bit is added in last.
        let zero = !(((x & LOW) + LOW) | x | LOW);
        let mut runs = zero;
        for i in 1..RUN {
            runs &= zero >> (8 * i);
        }
        if runs != 0 {
            return Some(p + (runs.trailing_zeros() / 8) as usize);
        }
        // No run starts at or before the window's last differing byte
        // (there is one: `runs` would be set if all eight were equal),
        // so the next window starts right after it: at least `9 - RUN`
        // bytes on, and eight when the window ends in a difference.
        let differ = !zero & !LOW;
        p += (63 - differ.leading_zeros()) as usize / 8 + 1;
    }
    while p + RUN <= n {
        if a.get(p..p + RUN) == b.get(p..p + RUN) {
            return Some(p);
        }
        p += 1;
    }
    None
}

/// Eight bytes as a little-endian word: byte `k` of the slice is bits
/// `8k..8k + 8`.
fn le_word(c: Option<&[u8]>) -> u64 {
    c.and_then(|c| <[u8; 8]>::try_from(c).ok())
        .map_or(0, u64::from_le_bytes)
}

/// An eight-byte chunk as a word (`chunks_exact(8)` gives only those).
fn word(c: &[u8]) -> u64 {
    <[u8; 8]>::try_from(c).map_or(0, u64::from_ne_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte by byte, what `equal_run` answers.
    fn reference<const RUN: usize>(a: &[u8], b: &[u8], from: usize) -> Option<usize> {
        let n = a.len().min(b.len());
        (from..n.saturating_sub(RUN - 1)).find(|&p| a[p..p + RUN] == b[p..p + RUN])
    }

    proptest::proptest! {
        #[test]
        fn an_equal_run_is_found_where_a_byte_loop_finds_it(
            a in proptest::collection::vec(0u8..2, 0..70),
            flips in proptest::collection::vec(0u8..3, 0..70),
            from in 0usize..72,
        ) {
            // Mostly different bytes, with runs of equal ones of any length.
            let b: Vec<u8> = a.iter().zip(flips.iter().chain(std::iter::repeat(&1))).map(|(x, f)| x ^ u8::from(*f != 0)).collect();
            proptest::prop_assert_eq!(equal_run::<1>(&a, &b, from), reference::<1>(&a, &b, from));
            proptest::prop_assert_eq!(equal_run::<3>(&a, &b, from), reference::<3>(&a, &b, from));
            proptest::prop_assert_eq!(equal_run::<4>(&a, &b, from), reference::<4>(&a, &b, from));
            proptest::prop_assert_eq!(equal_run::<8>(&a, &b, from), reference::<8>(&a, &b, from));
        }
    }

    #[test]
    fn equal_runs_at_the_edges() {
        let a = [1u8; 20];
        let mut b = [2u8; 20];
        assert_eq!(equal_run::<4>(&a, &b, 0), None);
        b[16..20].copy_from_slice(&[1; 4]);
        assert_eq!(
            equal_run::<4>(&a, &b, 0),
            Some(16),
            "a run ending at the end"
        );
        assert_eq!(equal_run::<4>(&a, &b, 17), None, "past its start");
        b[5..9].copy_from_slice(&[1; 4]);
        assert_eq!(equal_run::<4>(&a, &b, 0), Some(5), "a run across two words");
        assert_eq!(equal_run::<4>(&a, &b, 30), None, "from past the end");
        assert_eq!(
            equal_run::<4>(&a, &b, usize::MAX),
            None,
            "from far past the end"
        );
        assert_eq!(equal_run::<4>(&a[..2], &b[..2], 0), None);
    }
}
