//! Append hints: for each tree that is being loaded in key order (an
//! automatic key, a time-ordered key, the next undo record), the leaf the
//! last append went to, so that the next key above every key in the tree
//! goes straight to that leaf instead of descending from the root. This is
//! PostgreSQL's "fastpath" for the rightmost leaf (nbtinsert.c), adapted to
//! trees that share one tablespace.
//!
//! A hint is only a guess; the insert that uses it checks it with the leaf
//! latched exclusively and falls back to a descent when any check fails
//! (and drops the hint: a tree written in random order would otherwise
//! latch its rightmost leaf on every insert):
//!
//! * AH1. **The leaf is still the tree's rightmost leaf.** A hint is
//!   recorded only by an insert that reached the leaf by the last child
//!   at every level (with latch coupling, so the path was the tree's at
//!   that moment) and holds it latched, together with the buffer pool's
//!   tree epoch read then ([`BufferPool::tree_epoch`]: it counts every
//!   node split and every node page freed, before the node changes,
//!   buffer B11). A leaf stops being the rightmost leaf of its tree only
//!   by splitting or by being freed (a merge, a drop); splits of its
//!   ancestors leave its key range as it was. So when the leaf is latched
//!   again and the epoch has not moved, it is still its tree's rightmost
//!   leaf, and it cannot belong to another tree (pages of all trees come
//!   from one free list, and a page is freed before it is reused). Any
//!   split anywhere makes every hint stale: that costs one descent per
//!   tree that appends, against the fifty or more appends a leaf takes.
//! * AH2. **The key belongs in it.** The leaf has at least one key and
//!   the new key is at or above its first key: the rightmost leaf holds
//!   every key from its lower fence up, and its first key is at or above
//!   that fence. (So keys drawn in order but put slightly out of order by
//!   concurrent clients, and replacements of recent keys, still use it.)
//! * AH3. **A hint is read whole.** Each slot is a sequence lock over
//!   (root, leaf, epoch): a reader that overlapped a writer retries or
//!   gives up, so it never pairs one tree's root with another tree's leaf.
//!   Writers never wait: one that finds the slot being written skips its
//!   update (the hint is only a guess).
//!
//! Hints live only in memory and start empty at every open.
//!
//! [`BufferPool::tree_epoch`]: crate::buffer::BufferPool::tree_epoch

use std::sync::atomic::{AtomicU64, Ordering, fence};

use crossbeam_utils::CachePadded;

use crate::page::PageId;

/// Slots in the table (a power of two). Trees share a slot when their
/// roots hash alike; they then only take turns holding it.
const SLOTS: usize = 1024;
const _: () = assert!(SLOTS.is_power_of_two() && SLOTS > 1);

/// A tree's hint: its rightmost leaf as of `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hint {
    /// The leaf the last append went to.
    pub leaf: PageId,
    /// The tree epoch read while it was latched as the rightmost leaf
    /// (AH1).
    pub epoch: u64,
}

#[derive(Default)]
struct Slot {
    /// Even when the slot is stable, odd while a writer changes it (AH3).
    seq: AtomicU64,
    /// The tree's root page id; 0 (the superblock, never a root) when the
    /// slot is empty.
    root: AtomicU64,
    leaf: AtomicU64,
    epoch: AtomicU64,
}

impl Slot {
    /// The slot's contents, or `None` while a writer is changing them.
    fn read(&self) -> Option<(u64, Hint)> {
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 & 1 == 1 {
            return None;
        }
        let root = self.root.load(Ordering::Relaxed);
        let leaf = self.leaf.load(Ordering::Relaxed);
        let epoch = self.epoch.load(Ordering::Relaxed);
        // Orders the loads above before the second load of `seq`.
        fence(Ordering::Acquire);
        let s2 = self.seq.load(Ordering::Relaxed);
        (s1 == s2).then_some((
            root,
            Hint {
                leaf: PageId(leaf),
                epoch,
            },
        ))
    }

    /// Run `change` on the slot's contents under the write side of the
    /// sequence lock, unless another writer holds it (then nothing).
    fn write(&self, change: impl FnOnce(u64, Hint) -> Option<(u64, Hint)>) {
        let s = self.seq.load(Ordering::Relaxed);
        if s & 1 == 1
            || self
                .seq
                .compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        // Orders the odd `seq` before the stores below, for a reader that
        // sees any of them (AH3).
        fence(Ordering::Release);
        let cur = Hint {
            leaf: PageId(self.leaf.load(Ordering::Relaxed)),
            epoch: self.epoch.load(Ordering::Relaxed),
        };
        if let Some((root, h)) = change(self.root.load(Ordering::Relaxed), cur) {
            self.root.store(root, Ordering::Relaxed);
            self.leaf.store(h.leaf.0, Ordering::Relaxed);
            self.epoch.store(h.epoch, Ordering::Relaxed);
        }
        self.seq.store(s + 2, Ordering::Release);
    }
}

/// The append hints of one store's trees.
pub(crate) struct AppendHints {
    slots: Box<[CachePadded<Slot>]>,
}

impl Default for AppendHints {
    fn default() -> Self {
        AppendHints {
            slots: (0..SLOTS)
                .map(|_| CachePadded::new(Slot::default()))
                .collect(),
        }
    }
}

impl std::fmt::Debug for AppendHints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppendHints").finish_non_exhaustive()
    }
}

impl AppendHints {
    fn slot(&self, root: PageId) -> Option<&Slot> {
        // Fibonacci hashing: the top log2(SLOTS) bits of the product
        // spread consecutive page ids over the table.
        let i =
            (root.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize;
        self.slots.get(i).map(|s| &**s)
    }

    /// The hint of the tree rooted at `root`, if it has one.
    pub(crate) fn get(&self, root: PageId) -> Option<Hint> {
        let (r, h) = self.slot(root)?.read()?;
        (r == root.0 && r != 0).then_some(h)
    }

    /// Record `hint` for the tree rooted at `root` (unless it is already
    /// there, which costs a read only).
    pub(crate) fn set(&self, root: PageId, hint: Hint) {
        let Some(slot) = self.slot(root) else {
            return;
        };
        if slot.read() == Some((root.0, hint)) {
            return;
        }
        slot.write(|_, _| Some((root.0, hint)));
    }

    /// Forget `hint` for the tree rooted at `root`, if the slot still
    /// holds it (another thread may have put a fresher one there).
    pub(crate) fn clear(&self, root: PageId, hint: Hint) {
        let Some(slot) = self.slot(root) else {
            return;
        };
        slot.write(|r, cur| {
            (r == root.0 && cur == hint).then_some((
                0,
                Hint {
                    leaf: PageId(0),
                    epoch: 0,
                },
            ))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_is_found_for_its_own_tree_only() {
        let hints = AppendHints::default();
        let h = Hint {
            leaf: PageId(9),
            epoch: 3,
        };
        assert_eq!(hints.get(PageId(5)), None);
        hints.set(PageId(5), h);
        assert_eq!(hints.get(PageId(5)), Some(h));
        // Another root in the same slot takes it over; the first tree then
        // finds nothing rather than the other's leaf.
        let other = (6..100_000u64)
            .map(PageId)
            .find(|&r| std::ptr::eq(hints.slot(r).unwrap(), hints.slot(PageId(5)).unwrap()))
            .expect("some root shares slot with 5");
        let h2 = Hint {
            leaf: PageId(77),
            epoch: 3,
        };
        hints.set(other, h2);
        assert_eq!(hints.get(PageId(5)), None);
        assert_eq!(hints.get(other), Some(h2));
        // Clearing a hint that was replaced leaves the replacement.
        hints.clear(other, h);
        assert_eq!(hints.get(other), Some(h2));
        hints.clear(other, h2);
        assert_eq!(hints.get(other), None);
    }

    #[test]
    fn readers_never_see_a_root_paired_with_another_roots_leaf() {
        // Two writers alternate one slot between two trees whose leaves
        // encode their root; readers check every pair they are given.
        let hints = AppendHints::default();
        let a = PageId(5);
        let b = (6..100_000u64)
            .map(PageId)
            .find(|&r| std::ptr::eq(hints.slot(r).unwrap(), hints.slot(a).unwrap()))
            .expect("some root shares slot with 5");
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for root in [a, b] {
                let (hints, stop) = (&hints, &stop);
                s.spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        i += 1;
                        hints.set(
                            root,
                            Hint {
                                leaf: PageId(root.0 * 1_000_000 + i % 1000),
                                epoch: i,
                            },
                        );
                    }
                });
            }
            // Stops the writers however the reader ends, so a failed
            // assertion fails the test instead of hanging it.
            struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
            impl Drop for StopOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let _stop = StopOnDrop(&stop);
            // Read until each tree's hint was seen whole many times. A
            // writer preempted inside its write keeps the slot odd for a
            // whole time slice, and every read then gives up (that is AH3
            // working), so a fixed number of reads can see nothing on a
            // loaded machine; only a slot that never becomes readable again
            // within the deadline is a failure.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            let (mut reads, mut seen) = (0u64, [0u64; 2]);
            while reads < 200_000 || seen.iter().any(|&n| n < 1_000) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "after {reads} reads the hints of the two trees were seen {seen:?} times"
                );
                for (i, root) in [a, b].into_iter().enumerate() {
                    reads += 1;
                    if let Some(h) = hints.get(root) {
                        assert_eq!(h.leaf.0 / 1_000_000, root.0, "a torn hint");
                        seen[i] += 1;
                    }
                }
            }
        });
    }
}
