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
//!   at keys `>= f`, and `f` is above every key of the batch's descent, so
//!   each batch moves strictly forward (backward likewise with lower
//!   fences). That holds for keys in order; in a damaged tree (keys out of
//!   order, repeated separators) a fence can lead back to a leaf already
//!   read, so every move of the resume bound is checked, in release, to go
//!   strictly onward, and one that does not is an `Error::CorruptPage`
//!   (else the scan would return the same entries forever).

use std::collections::VecDeque;
use std::ops::Bound;

use super::{Tree, node};
use crate::Result;
use crate::page::PageId;

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

/// A bound as a point between keys: `(key, 0)` just below the key,
/// `(key, 1)` just above it; `None` for the open end.
fn point(b: &Bound<Vec<u8>>, forward: bool) -> Option<(&[u8], u8)> {
    match b {
        Bound::Included(k) => Some((k.as_slice(), u8::from(!forward))),
        Bound::Excluded(k) => Some((k.as_slice(), u8::from(forward))),
        Bound::Unbounded => None,
    }
}

/// Whether moving a scan's resume bound from `old` to `new` moves it
/// strictly onwards: upwards for a forward scan's lower bound, downwards
/// for a backward scan's upper bound.
fn advances(old: &Bound<Vec<u8>>, new: &Bound<Vec<u8>>, forward: bool) -> bool {
    match (point(old, forward), point(new, forward)) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(o), Some(n)) => {
            if forward {
                n > o
            } else {
                n < o
            }
        }
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

    /// Continue the scan from `next` (a new lower bound when forward, a
    /// new upper bound when backward), which must lie strictly onwards.
    fn resume(&mut self, leaf: PageId, next: Bound<Vec<u8>>) -> Result<()> {
        let forward = self.dir == Direction::Forward;
        let bound = if forward { &mut self.lo } else { &mut self.hi };
        if !advances(bound, &next, forward) {
            return Err(self.tree.corrupt(
                leaf.0,
                "a range scan would go back to keys it has passed (keys out of order)",
            ));
        }
        *bound = next;
        Ok(())
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
                    return self.resume(id, Bound::Excluded(k.to_vec()));
                }
            }
            if !self.done {
                match fence {
                    Some(f) if below_hi(&self.hi, &f) => self.resume(id, Bound::Included(f))?,
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
                    return self.resume(id, Bound::Excluded(k.to_vec()));
                }
            }
            if !self.done {
                // Keys below the fence remain; some may be in range.
                let more = |f: &Vec<u8>| match &self.lo {
                    Bound::Unbounded => true,
                    Bound::Included(l) | Bound::Excluded(l) => l < f,
                };
                match fence {
                    Some(f) if more(&f) => self.resume(id, Bound::Excluded(f))?,
                    _ => self.done = true,
                }
            }
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use std::ops::Bound::Unbounded;
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::buffer::Load;
    use crate::io::SimFs;
    use crate::mtr::Op;
    use crate::store::{Store, test_options};

    /// A root whose separators repeat (damage with a valid checksum) used
    /// to send a backward scan back to the same leaf forever, returning
    /// its entries again and again; now the scan stops with an error.
    #[test]
    fn repeated_separators_end_the_scan() {
        let store =
            Store::create(Arc::new(SimFs::new(1)), Path::new("/db"), test_options()).unwrap();
        let tree = Tree::create(&store).unwrap();
        let n = 300;
        for i in 0..n {
            tree.put(format!("key-{i:04}").as_bytes(), &[1u8; 60])
                .unwrap();
        }
        let root = store.pool().fetch_read(tree.root()).unwrap();
        assert_eq!(node::level(&root), 1, "the test wants a root above leaves");
        assert!(node::nslots(&root) >= 3);
        let (k1, c2) = (
            node::key(&root, 1).unwrap().to_vec(),
            node::child(&root, 2).unwrap(),
        );
        drop(root);
        let cell = node::encode_internal(&k1, c2).unwrap();
        let mut mtr = store.mtr().unwrap();
        let h = mtr.latch(tree.root(), Load::Verify).unwrap();
        mtr.apply(
            h,
            &Op::NodeReplace {
                slot: 2,
                cell: &cell,
            },
        )
        .unwrap();
        mtr.commit().unwrap();
        for dir in [Direction::Forward, Direction::Backward] {
            let items: Vec<_> = tree.range(Unbounded, Unbounded, dir).take(3 * n).collect();
            assert!(items.len() <= n + 1, "{dir:?}: {} items", items.len());
        }
    }
}
