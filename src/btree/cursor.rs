//! Range scans. A cursor reads one leaf at a time under a shared latch,
//! copies the entries in range into a batch, and releases the latch; the
//! next batch descends again from the root, starting at the leaf's fence
//! (the separator that bounded it), so no latch is held between calls and
//! no sibling pointer is ever followed (see the deadlock argument in the
//! module above). Each batch is one leaf's consistent state; the scan as
//! a whole sees concurrent changes the way a reader without a snapshot
//! does (transaction snapshots come from the layer above).
//!
//! Invariants:
//! * C1. Progress: a forward batch that ends at upper fence `f` continues
//!   at keys `>= f`, and `f` is above the key the batch's descent searched
//!   for, so each batch moves strictly forward (backward likewise with
//!   lower fences). The fence comes from node bytes, so it is checked in
//!   release (a damaged node would otherwise make the scan loop forever
//!   over the same leaf): a fence that does not move the bound is
//!   [`crate::Error::CorruptPage`], with a debug assertion beside it.

use std::collections::VecDeque;
use std::ops::Bound;

use super::{Tree, node};
use crate::Result;
use crate::page::PageId;

/// Whether the new bound `next` lies strictly inside the range left by
/// `old` in the scan direction (C1): forward, the new lower bound
/// `Included(f)` excludes everything `old` still admitted below `f`;
/// backward, the new upper bound `Excluded(f)` likewise.
fn advances(old: &Bound<Vec<u8>>, f: &[u8], forward: bool) -> bool {
    match (old, forward) {
        (Bound::Unbounded, _) => true,
        (Bound::Included(k) | Bound::Excluded(k), true) => f > k.as_slice(),
        (Bound::Included(k), false) => f <= k.as_slice(),
        (Bound::Excluded(k), false) => f < k.as_slice(),
    }
}

/// Scan order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Ascending keys.
    Forward,
    /// Descending keys.
    Backward,
}

/// An iterator over `(key, value)` pairs of a range.
#[derive(Debug)]
pub struct Cursor<'s> {
    tree: Tree<'s>,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    dir: Direction,
    batch: VecDeque<(Vec<u8>, Vec<u8>)>,
    done: bool,
    limit: usize,
}

fn owned(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn above_lo(lo: &Bound<Vec<u8>>, k: &[u8]) -> bool {
    match lo {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    }
}

fn below_hi(hi: &Bound<Vec<u8>>, k: &[u8]) -> bool {
    match hi {
        Bound::Included(h) => k <= h.as_slice(),
        Bound::Excluded(h) => k < h.as_slice(),
        Bound::Unbounded => true,
    }
}

impl<'s> Cursor<'s> {
    pub(super) fn new(tree: Tree<'s>, lo: Bound<&[u8]>, hi: Bound<&[u8]>, dir: Direction) -> Self {
        Cursor {
            tree,
            lo: owned(lo),
            hi: owned(hi),
            dir,
            batch: VecDeque::new(),
            done: false,
            limit: usize::MAX,
        }
    }

    /// Copy at most `n` entries per leaf visit (at least 1): for callers
    /// that want only the first few entries of a range, so a visit does
    /// not copy the rest of the leaf.
    pub fn batch_limit(mut self, n: usize) -> Self {
        self.limit = n.max(1);
        self
    }

    fn fill(&mut self) -> Result<()> {
        let t = self.tree;
        let pool = t.store.pool();
        let forward = self.dir == Direction::Forward;
        let bound = if forward { &self.lo } else { &self.hi };
        let (key, strict) = match bound {
            Bound::Included(k) => (Some(k.clone()), false),
            Bound::Excluded(k) => (Some(k.clone()), true),
            Bound::Unbounded => (None, false),
        };
        let mut tries = 0;
        let (cur, fence) = 'descent: loop {
            let mut cur = pool.fetch_read(t.root)?;
            t.check_node(t.root, &cur, None)?;
            let mut fence: Option<Vec<u8>> = None;
            while node::level(&cur) > 0 {
                let id = cur.id();
                let n = node::nslots(&cur);
                let mut i = match &key {
                    None if forward => 0,
                    None => n.saturating_sub(1),
                    Some(k) => node::search_internal(&cur, k).map_err(t.ne(id))?,
                };
                if !forward
                    && strict
                    && i >= 1
                    && let Some(k) = &key
                    && node::key(&cur, i).map_err(t.ne(id))? == k.as_slice()
                {
                    i -= 1;
                }
                if forward {
                    if i + 1 < n {
                        fence = Some(node::key(&cur, i + 1).map_err(t.ne(id))?.to_vec());
                    }
                } else if i >= 1 {
                    fence = Some(node::key(&cur, i).map_err(t.ne(id))?.to_vec());
                }
                let child = PageId(node::child(&cur, i).map_err(t.ne(id))?);
                let level = node::level(&cur);
                let Some(next) = t.step_read(cur, child, level - 1, &mut tries)? else {
                    continue 'descent; // BT5
                };
                cur = next;
            }
            break (cur, fence);
        };
        let id = cur.id();
        let n = node::nslots(&cur);
        if forward {
            let start = match &self.lo {
                Bound::Unbounded => 0,
                Bound::Included(k) => node::search_leaf(&cur, k)
                    .map_err(t.ne(id))?
                    .unwrap_or_else(|i| i),
                Bound::Excluded(k) => match node::search_leaf(&cur, k).map_err(t.ne(id))? {
                    Ok(i) => i + 1,
                    Err(i) => i,
                },
            };
            for j in start..n {
                let k = node::key(&cur, j).map_err(t.ne(id))?;
                if !below_hi(&self.hi, k) {
                    self.done = true;
                    break;
                }
                let v = t.value_at(&cur, j)?;
                self.batch.push_back((k.to_vec(), v));
                if self.batch.len() >= self.limit && j + 1 < n {
                    self.lo = Bound::Excluded(k.to_vec());
                    return Ok(());
                }
            }
            if !self.done {
                match fence {
                    Some(f) if below_hi(&self.hi, &f) => {
                        self.check_progress(id, &self.lo, &f, true)?;
                        self.lo = Bound::Included(f);
                    }
                    _ => self.done = true,
                }
            }
        } else {
            let end = match &self.hi {
                Bound::Unbounded => n,
                Bound::Included(k) => match node::search_leaf(&cur, k).map_err(t.ne(id))? {
                    Ok(i) => i + 1,
                    Err(i) => i,
                },
                Bound::Excluded(k) => node::search_leaf(&cur, k)
                    .map_err(t.ne(id))?
                    .unwrap_or_else(|i| i),
            };
            for j in (0..end).rev() {
                let k = node::key(&cur, j).map_err(t.ne(id))?;
                if !above_lo(&self.lo, k) {
                    self.done = true;
                    break;
                }
                let v = t.value_at(&cur, j)?;
                self.batch.push_back((k.to_vec(), v));
                if self.batch.len() >= self.limit && j > 0 {
                    self.hi = Bound::Excluded(k.to_vec());
                    return Ok(());
                }
            }
            if !self.done {
                // Keys below the fence remain; some may be in range.
                let more = |f: &Vec<u8>| match &self.lo {
                    Bound::Unbounded => true,
                    Bound::Included(l) | Bound::Excluded(l) => l < f,
                };
                match fence {
                    Some(f) if more(&f) => {
                        self.check_progress(id, &self.hi, &f, false)?;
                        self.hi = Bound::Excluded(f);
                    }
                    _ => self.done = true,
                }
            }
        }
        Ok(())
    }
}

impl Cursor<'_> {
    /// C1 for the fence `f` that replaces bound `old`: a fence that does
    /// not move the scan forward comes from a damaged node (the descent
    /// found it above, or below, the key it searched for), and would make
    /// the scan revisit the same leaf forever.
    fn check_progress(
        &self,
        leaf: PageId,
        old: &Bound<Vec<u8>>,
        f: &[u8],
        forward: bool,
    ) -> Result<()> {
        if advances(old, f, forward) {
            return Ok(());
        }
        debug_assert!(false, "cursor C1: fence {f:?} does not move past {old:?}");
        Err(self.tree.corrupt(
            leaf.0,
            format!("a fence above this leaf ({f:?}) does not move the scan past {old:?}"),
        ))
    }
}

impl Iterator for Cursor<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(x) = self.batch.pop_front() {
                return Some(Ok(x));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.fill() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}
