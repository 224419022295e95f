//! Keys gathered to be sorted for a bulk build ([`Tree::bulk_build`], as
//! `CREATE INDEX` does): one byte arena instead of an allocation per key,
//! and a sort that mostly compares integers.
//!
//! A key is stored as its bytes appended to the arena and an entry
//! saying where they are. The sort first finds the prefix every key
//! shares (an index on a small integer column: the tag byte and the
//! integer's high zero bytes), then gives each entry the sixteen bytes
//! that follow it as a big-endian integer (zero-padded), orders entries by
//! that integer, and compares the bytes only between keys whose sixteen
//! bytes are equal. With a `Vec<u8>` per key (how `CREATE INDEX` gathered
//! them before), two million keys took two million allocations, and every
//! comparison followed two pointers to memory in no order and called
//! `memcmp`: `perf` put the sort's `memcmp` at 19% and page faults of the
//! growing heap at 33% of the build (Insert Benchmark l.x, 2M rows,
//! 2026-11-28). Eight bytes from the start instead of sixteen after the
//! shared prefix still left `memcmp` at 22%: those indexes begin with
//! 4-byte integers of a few thousand values.
//!
//! Invariants:
//! * KS1. Every entry's range lies inside the arena: it is the range its
//!   own `push` appended, and the arena only grows.
//! * KS2. Every key begins with the `shared` bytes found by `sort` (so
//!   no key is shorter), and `a.prefix < b.prefix` implies `a < b` (byte
//!   order), so ordering by the prefix first and the bytes second is byte
//!   order: at the first byte where the zero-padded prefixes differ,
//!   either both keys have a real byte there (so the keys differ there the
//!   same way) or the smaller one has ended, making it a proper prefix of
//!   the other.
//!
//! [`Tree::bulk_build`]: super::Tree::bulk_build

use std::cmp::Ordering;

/// Where one key is, and its bytes that decide most comparisons.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The sixteen bytes after the prefix all keys share, big-endian,
    /// zero-padded (KS2); set by `sort`.
    prefix: u128,
    /// Start of its bytes in the arena.
    at: usize,
    /// Its length.
    len: usize,
}

/// Byte-string keys in one arena, to be sorted and read back in order.
#[derive(Debug, Default)]
pub struct SortKeys {
    bytes: Vec<u8>,
    entries: Vec<Entry>,
}

impl SortKeys {
    /// No keys.
    pub fn new() -> SortKeys {
        SortKeys::default()
    }

    /// Add the key made of `parts`, concatenated.
    pub fn push(&mut self, parts: &[&[u8]]) {
        let at = self.bytes.len();
        for p in parts {
            self.bytes.extend_from_slice(p);
        }
        let len = self.bytes.len() - at;
        self.entries.push(Entry { prefix: 0, at, len });
    }

    fn key(&self, e: &Entry) -> &[u8] {
        let key = self.bytes.get(e.at..e.at + e.len);
        assert!(key.is_some(), "key_sort KS1: a key outside the arena");
        key.unwrap_or_default()
    }

    fn compare(&self, a: &Entry, b: &Entry) -> Ordering {
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| self.key(a).cmp(self.key(b)))
    }

    /// Sort the keys into ascending byte order (KS2).
    pub fn sort(&mut self) {
        let mut entries = std::mem::take(&mut self.entries);
        let shared = match entries.first() {
            Some(first) => {
                let first = self.key(first);
                entries.iter().fold(first.len(), |shared, e| {
                    let key = self.key(e);
                    first
                        .iter()
                        .zip(key)
                        .take(shared)
                        .take_while(|(a, b)| a == b)
                        .count()
                })
            }
            None => 0,
        };
        for e in &mut entries {
            let key = self.key(e);
            assert!(key.len() >= shared, "key_sort KS2: the shared prefix");
            let mut head = [0u8; 16];
            for (dst, src) in head.iter_mut().zip(key.iter().skip(shared)) {
                *dst = *src;
            }
            e.prefix = u128::from_be_bytes(head);
        }
        entries.sort_unstable_by(|a, b| self.compare(a, b));
        self.entries = entries;
    }

    /// After [`SortKeys::sort`]: whether two keys are equal.
    pub fn has_duplicate(&self) -> bool {
        self.entries
            .windows(2)
            .any(|w| matches!(w, [a, b] if self.compare(a, b) == Ordering::Equal))
    }

    /// After [`SortKeys::sort`]: keep one of each run of equal keys.
    pub fn dedup(&mut self) {
        let mut entries = std::mem::take(&mut self.entries);
        entries.dedup_by(|b, a| self.compare(a, b) == Ordering::Equal);
        self.entries = entries;
    }

    /// The keys, in their current order. After a sort that order jumps
    /// about the arena (which is in the order of `push`), so each key is a
    /// cache miss unless it was asked for early: the keys
    /// [`PREFETCH_AHEAD`] places ahead are prefetched.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.entries.iter().enumerate().map(|(i, e)| {
            if let Some(ahead) = self.entries.get(i + PREFETCH_AHEAD) {
                prefetch(self.key(ahead));
            }
            self.key(e)
        })
    }
}

/// How many keys ahead [`SortKeys::iter`] prefetches: enough to cover a
/// memory load's latency with the work done per key of a bulk build (a
/// cell encoded and copied into a page).
const PREFETCH_AHEAD: usize = 16;

/// Ask the CPU to start loading `bytes` into the cache.
#[inline]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of the x86_64 baseline, and a prefetch is a
    // hint: it changes no memory the program sees and never faults.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(bytes.as_ptr().cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys_from(v: &[Vec<u8>]) -> SortKeys {
        let mut s = SortKeys::new();
        for k in v {
            // Split each key in two parts, as CREATE INDEX pushes
            // `secondary key | primary key`.
            let (a, b) = k.split_at(k.len() / 2);
            s.push(&[a, b]);
        }
        s
    }

    #[test]
    fn prefixes_and_short_keys_sort_in_byte_order() {
        let v: Vec<Vec<u8>> = vec![
            b"abcdefgh2".to_vec(),
            b"abcdefgh1".to_vec(),
            b"ab".to_vec(),
            b"ab\0".to_vec(),
            b"ab\0\0\0\0\0\0\0".to_vec(),
            b"".to_vec(),
            vec![0xff; 3],
            b"abcdefgh".to_vec(),
            b"ab".to_vec(),
        ];
        let mut s = keys_from(&v);
        s.sort();
        let mut want = v.clone();
        want.sort();
        assert_eq!(s.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), want);
        assert!(s.has_duplicate());
        s.dedup();
        want.dedup();
        assert_eq!(s.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), want);
        assert!(!s.has_duplicate());
        assert_eq!(s.iter().count(), want.len());
    }

    proptest! {
        /// Against the model: a `Vec<Vec<u8>>` sorted and deduplicated.
        /// Short keys over a small alphabet, so that equal prefixes,
        /// keys that are prefixes of others and duplicates are common.
        /// Some runs give every key one common beginning (the prefix
        /// `sort` skips), and keys run past the sixteen bytes it compares
        /// as an integer.
        #[test]
        fn sorts_and_dedups_like_the_model(
            common in proptest::collection::vec(any::<u8>(), 0..12),
            v in proptest::collection::vec(
                proptest::collection::vec(0u8..3, 0..24), 0..200)
        ) {
            let v: Vec<Vec<u8>> = v
                .into_iter()
                .map(|k| common.iter().copied().chain(k).collect())
                .collect();
            let mut s = keys_from(&v);
            prop_assert_eq!(s.iter().count(), v.len());
            s.sort();
            let mut want = v.clone();
            want.sort();
            prop_assert_eq!(s.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), want.clone());
            let dup = want.windows(2).any(|w| w[0] == w[1]);
            prop_assert_eq!(s.has_duplicate(), dup);
            s.dedup();
            want.dedup();
            prop_assert_eq!(s.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), want);
        }
    }
}
