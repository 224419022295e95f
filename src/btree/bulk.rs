//! Bulk build: a B+tree from a sorted stream (for `CREATE INDEX` on a
//! populated table), bottom-up, without a single split.
//!
//! Leaves are filled to 15/16 of a node in stream order; each finished
//! node becomes a page in its own logged mini-transaction; the separators
//! of one level are the cells of the next. The last level that fits one
//! node is written into the root page, in one final mini-transaction, so
//! the tree appears whole or (before that) empty. A crash before the end
//! leaves the pages built so far unreachable; they are not reclaimed (a
//! caller rebuilding the index starts over).
//!
//! Invariants:
//! * BK1. Every node built holds at most `fill` (15/16 of a node) bytes of
//!   cells and slots: a node is closed before a cell would take it past
//!   `fill`, and a lone first cell is under a third of a node (BT3), so
//!   every node fits its page and its inserts cannot fail for room.
//! * BK2. The internal levels shrink: a level of `m > 1` nodes yields a
//!   level of fewer nodes (each internal node takes at least two
//!   children, a child's cell being under a sixth of `fill`), so the
//!   loop ends with one node, the root.

use super::{Tree, node, overflow, short_separator};
use crate::page::PageId;
use crate::store::{Store, alloc_page};
use crate::{Error, Result};

use node::SLOT_SIZE;

impl<'s> Tree<'s> {
    /// Build a new tree holding `entries`, which must come in strictly
    /// ascending key order (an error otherwise).
    pub fn bulk_build<I, K, V>(store: &'s Store, entries: I) -> Result<Tree<'s>>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let tree = Tree::create(store)?;
        let fill = tree.capacity() / 16 * 15;
        let mut level: Vec<(Vec<u8>, PageId)> = Vec::new(); // (separator, page)
        let mut cells: Vec<Vec<u8>> = Vec::new();
        let mut used = 0usize;
        let mut first_key: Vec<u8> = Vec::new();
        let mut prev: Option<Vec<u8>> = None;
        let mut prev_leaf_last: Option<Vec<u8>> = None;
        for (k, v) in entries {
            let (k, v) = (k.as_ref(), v.as_ref());
            tree.check_sizes(k, Some(v))?;
            if prev.as_ref().is_some_and(|p| p.as_slice() >= k) {
                return Err(Error::InvalidArgument {
                    what: "bulk build input",
                    reason: "keys must be strictly ascending".into(),
                });
            }
            let cell = if v.len() <= tree.max_inline_value() {
                node::encode_leaf_inline(k, v).map_err(tree.ne(tree.root))?
            } else {
                let mut mtr = store.mtr()?;
                let first = overflow::write(&mut mtr, v)?;
                mtr.commit()?;
                node::encode_leaf_overflow(k, v.len() as u32, first.0)
                    .map_err(tree.ne(tree.root))?
            };
            tree.assert_cell_size(&cell);
            if !cells.is_empty() && used + cell.len() + SLOT_SIZE > fill {
                let page = tree.built_node(0, &cells)?;
                let sep = match &prev_leaf_last {
                    Some(last) => short_separator(last, &first_key),
                    None => Vec::new(),
                };
                level.push((sep, page));
                prev_leaf_last = prev.clone();
                cells.clear();
                used = 0;
            }
            if cells.is_empty() {
                first_key.clear();
                first_key.extend_from_slice(k);
            }
            used += cell.len() + SLOT_SIZE;
            assert!(
                used <= fill,
                "btree BK1: a leaf of {used} bytes passes the fill {fill}"
            );
            cells.push(cell);
            // The previous key's buffer is reused (the input may be
            // borrowed keys, as `SortKeys` gives).
            match &mut prev {
                Some(p) => {
                    p.clear();
                    p.extend_from_slice(k);
                }
                None => prev = Some(k.to_vec()),
            }
        }
        if level.is_empty() {
            // Everything fits the root leaf.
            tree.write_root(0, &cells)?;
            return Ok(tree);
        }
        let page = tree.built_node(0, &cells)?;
        let sep = match &prev_leaf_last {
            Some(last) => short_separator(last, &first_key),
            None => Vec::new(),
        };
        level.push((sep, page));
        // Internal levels until one node holds them all.
        let mut height = 1u8;
        loop {
            let mut nodes: Vec<Vec<Vec<u8>>> = vec![Vec::new()];
            let mut seps: Vec<Vec<u8>> = vec![Vec::new()];
            let mut used = 0usize;
            for (sep, child) in &level {
                let full_len = node::internal_size(sep.len()) + SLOT_SIZE;
                let current_empty = nodes.last().is_none_or(Vec::is_empty);
                if !current_empty && used + full_len > fill {
                    nodes.push(Vec::new());
                    seps.push(sep.clone());
                    used = 0;
                }
                let cur = nodes.last_mut().ok_or_else(|| tree.corrupt(0, "no node"))?;
                // Slot 0 of every node is minus infinity.
                let key: &[u8] = if cur.is_empty() { b"" } else { sep };
                cur.push(node::encode_internal(key, child.0).map_err(tree.ne(tree.root))?);
                used += node::internal_size(key.len()) + SLOT_SIZE;
                assert!(
                    used <= fill,
                    "btree BK1: an internal node of {used} bytes passes the fill {fill}"
                );
            }
            if let [cells] = nodes.as_slice() {
                tree.write_root(height, cells)?;
                return Ok(tree);
            }
            assert!(
                nodes.len() < level.len(),
                "btree BK2: {} children made {} internal nodes",
                level.len(),
                nodes.len()
            );
            let mut next = Vec::with_capacity(nodes.len());
            for (cells, sep) in nodes.iter().zip(seps) {
                next.push((sep, tree.built_node(height, cells)?));
            }
            level = next;
            height = height
                .checked_add(1)
                .ok_or_else(|| tree.corrupt(0, "tree too tall"))?;
        }
    }

    /// A new page holding `cells` at `level`, in its own mtr.
    fn built_node(&self, level: u8, cells: &[Vec<u8>]) -> Result<PageId> {
        let mut mtr = self.store.mtr()?;
        mtr.latch(PageId(0), crate::buffer::Load::Verify)?; // store T3
        let h = alloc_page(&mut mtr)?;
        self.write_node(&mut mtr, h, level, cells)?;
        let id = mtr.id(h)?;
        mtr.commit()?;
        Ok(id)
    }

    /// Replace the (empty) root's content with `cells` at `level`.
    fn write_root(&self, level: u8, cells: &[Vec<u8>]) -> Result<()> {
        let mut mtr = self.store.mtr()?;
        let h = mtr.latch(self.root, crate::buffer::Load::Verify)?;
        // Buffer B11 (append hint AH1): the root's content is replaced.
        // An empty root leaf never had a hint (one needs an append after
        // a key); counted all the same, so AH1 does not depend on it.
        self.store.pool().note_tree_change();
        self.write_node(&mut mtr, h, level, cells)?;
        mtr.commit()?;
        Ok(())
    }
}
