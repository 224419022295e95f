//! B+tree indexes over byte-string keys, on pages in the buffer pool,
//! every change made through a logged mini-transaction.
//!
//! * `node`: the slotted node layout (pure functions on a page).
//! * `overflow`: chains of pages for values over a quarter page.
//! * `cursor`: forward and backward range scans.
//! * `key_sort`: keys gathered in one arena and sorted for a bulk build.
//!
//! **Concurrency: latch coupling with an optimistic first try**, as in
//! InnoDB. Readers descend holding a shared latch on a node until the
//! child's latch is taken (so they never follow a pointer into a page
//! that a merge freed). Writers first descend the same way and latch only
//! the leaf exclusively: if the change fits the leaf (no split, no merge,
//! no page to allocate or free), that is the whole operation, and nothing
//! tree-wide was touched. Otherwise they restart pessimistically: latch
//! the superblock (store T3: it serialises structure changes), then
//! descend from the root with exclusive latches, releasing the ancestors
//! whenever the node just latched is *safe* (it can absorb the change
//! below it without splitting or underflowing), and split or merge on the
//! way back up. Latch coupling was chosen over optimistic lock coupling
//! with version counters because it needs no retry logic on readers and
//! its deadlock-freedom argument is short: latches are taken top-down;
//! sideways (a sibling in a merge) only under the parent's exclusive
//! latch, which no other descent can pass; scans hold one leaf at a time
//! and re-descend by key instead of following sibling pointers.
//!
//! **Appends skip the descent.** A put whose key is above every key of
//! the tree (an automatic key, a time-ordered key) goes straight to the
//! rightmost leaf when the tree's append hint names it (`append_hint`,
//! AH1-AH3): one exclusive latch instead of a shared latch per level and
//! a search of each internal node. The hint is checked with the leaf
//! latched and dropped when it no longer fits.
//!
//! Invariants:
//! * BT1. The root page never moves: a root split moves the root's cells
//!   into two new children; a root of level 2 or more with one child
//!   takes the child's content. A tree is named by its root page id. A
//!   root of level 1 keeps its one leaf: a tree that has grown past one
//!   page stays at height 2 at least. A tree used as a queue (the undo
//!   log: appends at the right, purge deletes at the left) otherwise
//!   collapsed whenever purge drained it and split its root again a page
//!   of entries later, each time logging a page's worth of cells twice
//!   (a third of the redo of a sysbench update-non-index transaction:
//!   936 bytes before, 619 after, `bench/results/oltp.md`);
//!   the price is one page and one level of descent for a tree that has
//!   shrunk to one leaf.
//! * BT2. In an internal node, child `i` holds keys `k` with
//!   `key_i <= k < key_{i+1}` (slot 0 is minus infinity), at level one
//!   below. `Tree::verify` checks this with fences over the whole tree.
//! * BT3. Keys are at most [`Tree::max_key_len`] bytes and inline values
//!   at most a quarter page, so a leaf cell is under a third of a node and
//!   any node of three cells can split. (Asserted where a leaf cell is
//!   built: `Tree::max_cell`.)
//! * BT4. A non-root node below a quarter full after a delete merges with
//!   a sibling under the same parent when both fit one page.
//! * BT5. A descent does not queue for a busy child latch while it holds
//!   the parent: it tries the child, and when another thread has it, lets
//!   go of everything, waits for the child with nothing latched and
//!   starts again from the root (after [`BUSY_CHILD_RETRIES`] tries it
//!   waits holding the parent, so it cannot starve). A parent held during
//!   a wait would stall every structure change queued for the parent,
//!   and behind that (latches are fair) every descent through it; with
//!   more threads than cores, a descheduled leaf holder then stops the
//!   whole tree. The pessimistic descent does the same on its way down
//!   below the superblock, so the structure-change latch (T3) is not held
//!   while waiting for a node on the path (it still is while a merge
//!   latches a sibling, an overflow chain is latched or a page is
//!   allocated, and after the retries).
//!
//! Assertions cite these, and the node module's N1-N8. Node bytes come
//! from disk, so a broken node invariant found while reading is
//! [`Error::CorruptPage`]; what this module computes itself (separators,
//! cell sizes, the held path) is asserted.

mod append_hint;
mod bulk;
mod cursor;
mod key_sort;
use crate::page::node;
mod overflow;

use std::ops::Bound;

pub(crate) use append_hint::AppendHints;
pub use cursor::{Cursor, Direction};
pub(crate) use key_sort::SortKeys;

use crate::buffer::{Load, PageRead, PageWrite};
use crate::log::Lsn;
use crate::mtr::{Mtr, Op, PageHandle};
use crate::page::{self, PageId, PageType};
use crate::store::{Store, alloc_page, free_page};
use crate::{Error, Result};

use node::{LeafValue, NodeError, SLOT_SIZE};

/// How many times a descent lets go and waits for a busy child with
/// nothing latched before it waits holding the parent (BT5).
pub const BUSY_CHILD_RETRIES: u32 = 4;

/// How the pessimistic descent ended. Returned once per descent and
/// never stored, so the large variant (an mtr keeps its first pages
/// inline) is not boxed: that would put back the allocation it saves.
#[allow(clippy::large_enum_variant)]
enum Descent<'s> {
    /// The superblock and the path are latched.
    Latched(Mtr<'s>, Vec<(PageHandle, usize)>),
    /// The log is nearly full: throttle and start again.
    Throttle,
    /// This page was busy: everything was let go; wait for it and start
    /// again (BT5).
    Busy(PageId),
}

/// Where a read found a key ([`Tree::get_with_leaf`]), for a write of
/// the same key that follows it ([`Tree::put_at`]).
///
/// LH1. The leaf the read found the key in, and the buffer pool's tree
/// epoch read while that leaf was latched (buffer B11: it counts every
/// node split and every node page freed, before the node changes). A
/// leaf's key range changes only when it splits or merges (a merge frees
/// a page), and its page leaves the tree only when freed; so when the
/// leaf is latched again and the epoch has not moved, it is still a leaf
/// of the same tree and still the leaf for that key (present or not by
/// then), as for an append hint (`append_hint` AH1). Any split or free
/// anywhere makes a hint stale: the write then descends as any write.
/// A hint speaks only for the key read: `put_at` of another key writes
/// at the hinted leaf only if the leaf holds it or it falls between two
/// of the leaf's keys (then it is in the leaf's range too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafHint {
    /// The tree's root (a hint of another tree is not used).
    root: PageId,
    leaf: PageId,
    /// The key's slot in the leaf then (tried first, checked).
    slot: usize,
    epoch: u64,
}

/// A B+tree in a store, named by its root page.
#[derive(Debug, Clone, Copy)]
pub struct Tree<'s> {
    store: &'s Store,
    root: PageId,
}

/// What [`Tree::verify`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeCheck {
    /// Key/value entries.
    pub entries: u64,
    /// Leaf pages.
    pub leaves: u64,
    /// Internal pages.
    pub internal: u64,
    /// Overflow pages.
    pub overflow_pages: u64,
    /// Levels (1 for a lone root leaf).
    pub height: u32,
}

#[derive(Clone, Copy, Debug)]
enum Intent {
    Insert { leaf_need: usize },
    Delete,
}

impl<'s> Tree<'s> {
    /// Create an empty tree; its root page id names it from now on.
    pub fn create(store: &'s Store) -> Result<Tree<'s>> {
        let mut mtr = store.mtr()?;
        let h = alloc_page(&mut mtr)?;
        mtr.apply(h, &Op::Init(PageType::BtreeNode))?;
        mtr.apply(h, &Op::NodeInit(0))?;
        let root = mtr.id(h)?;
        mtr.commit()?;
        Ok(Tree { store, root })
    }

    /// The tree whose root is `root` (checked on first use).
    pub fn open(store: &'s Store, root: PageId) -> Tree<'s> {
        Tree { store, root }
    }

    /// The root page id.
    pub fn root(&self) -> PageId {
        self.root
    }

    fn page_size(&self) -> usize {
        self.store.pool().page_size()
    }

    fn capacity(&self) -> usize {
        node::capacity(self.page_size())
    }

    /// Longest key accepted: a sixteenth of a node.
    pub fn max_key_len(&self) -> usize {
        self.capacity() / 16
    }

    /// Longest value stored inline in a leaf (a quarter page).
    pub fn max_inline_value(&self) -> usize {
        self.page_size() / 4
    }

    /// Longest value accepted: its overflow chain must fit a quarter of
    /// the buffer pool, and half of one log record less room for a split
    /// cascade in the same mtr.
    pub fn max_value_len(&self) -> usize {
        let per = overflow::payload_per_page(self.page_size());
        let by_pool = per * (self.store.pool().frames() / 4).max(1);
        let by_log = ((self.store.log().max_record_bytes() / 2) as usize)
            .saturating_sub(8 * self.page_size());
        by_pool.min(by_log).min(u32::MAX as usize)
    }

    fn corrupt(&self, page: u64, reason: impl Into<String>) -> Error {
        Error::CorruptPage {
            file: self.store.pool().file().path().to_path_buf(),
            page,
            reason: reason.into(),
        }
    }

    fn ne(&self, page: PageId) -> impl Fn(NodeError) -> Error + '_ {
        move |e| self.corrupt(page.0, e.to_string())
    }

    /// Free bytes of node `id`; a corrupt header (node N1) is an error, not
    /// a node that looks full.
    fn free_space(&self, id: PageId, p: &[u8]) -> Result<usize> {
        node::free_space_checked(p).map_err(self.ne(id))
    }

    /// Used bytes of node `id`; a corrupt header (node N1) is an error, not
    /// a node that looks empty (and would be merged into a sibling).
    fn used_bytes(&self, id: PageId, p: &[u8]) -> Result<usize> {
        node::used_bytes_checked(p).map_err(self.ne(id))
    }

    /// `used` bytes of node `id` less one live cell of `cell_len` bytes and
    /// its slot. A live cell larger than the node's used bytes breaks node
    /// N2 (damage, not our arithmetic): an error, not a silent 0.
    fn used_without(&self, id: PageId, used: usize, cell_len: usize) -> Result<usize> {
        used.checked_sub(cell_len + SLOT_SIZE).ok_or_else(|| {
            self.corrupt(
                id.0,
                format!("a live cell of {cell_len} bytes exceeds the node's {used} used bytes"),
            )
        })
    }

    /// The largest leaf or internal cell this tree makes, with its slot:
    /// under a third of a node (BT3), so that any node holding three cells
    /// can split into two halves that each take one more.
    fn max_cell(&self) -> usize {
        let leaf = node::leaf_inline_size(self.max_key_len(), self.max_inline_value())
            .max(node::leaf_overflow_size(self.max_key_len()));
        let internal = node::internal_size(self.max_key_len());
        let max = leaf.max(internal) + SLOT_SIZE;
        debug_assert!(
            3 * max <= self.capacity(),
            "btree BT3: the largest cell ({max} bytes with its slot) is over a third of a node"
        );
        max
    }

    /// BT3 for a cell this tree is about to store.
    #[track_caller]
    fn assert_cell_size(&self, cell: &[u8]) {
        assert!(
            cell.len() + SLOT_SIZE <= self.max_cell(),
            "btree BT3: a cell of {} bytes exceeds the limit {}",
            cell.len(),
            self.max_cell()
        );
    }

    fn check_node(&self, id: PageId, p: &[u8], level: Option<u8>) -> Result<()> {
        if page::page_type(p) != Some(PageType::BtreeNode) {
            return Err(self.corrupt(id.0, "expected a B+tree node"));
        }
        if let Some(l) = level
            && node::level(p) != l
        {
            return Err(self.corrupt(
                id.0,
                format!(
                    "node at level {} where level {l} was expected",
                    node::level(p)
                ),
            ));
        }
        Ok(())
    }

    fn check_sizes(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if key.len() > self.max_key_len() {
            return Err(Error::LimitExceeded {
                what: "key length",
                actual: key.len() as u64,
                max: self.max_key_len() as u64,
            });
        }
        if let Some(v) = value
            && v.len() > self.max_value_len()
        {
            return Err(Error::LimitExceeded {
                what: "value length",
                actual: v.len() as u64,
                max: self.max_value_len() as u64,
            });
        }
        Ok(())
    }

    /// Whether `key` is too long to be in any tree of this store (BT3):
    /// such a key was never written, so lookups and deletes of it find
    /// nothing instead of failing. Undo and rollback of a change that
    /// never reached the tree rely on this.
    fn cannot_hold(&self, key: &[u8]) -> bool {
        key.len() > self.max_key_len()
    }

    /// The value of `key`, if present (`None` for a key longer than
    /// [`Tree::max_key_len`], which no tree holds).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut value = Vec::new();
        Ok(self.get_into(key, &mut value)?.then_some(value))
    }

    /// [`Tree::get`] into `value` (cleared first): whether `key` is
    /// present. A caller that reads many keys reuses one buffer instead
    /// of allocating a value per read.
    pub fn get_into(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        Ok(self.get_noting(key, value)?.is_some())
    }

    /// [`Tree::get`], and where the value was found: a caller that writes
    /// the key next passes that to [`Tree::put_at`], which then goes
    /// straight to the leaf if no node split or was freed since (LH1).
    pub fn get_with_leaf(&self, key: &[u8]) -> Result<Option<(Vec<u8>, LeafHint)>> {
        let mut value = Vec::new();
        Ok(self.get_noting(key, &mut value)?.map(|at| (value, at)))
    }

    /// [`Tree::get_into`], returning where `key` was found (`None`: not
    /// present).
    fn get_noting(&self, key: &[u8], value: &mut Vec<u8>) -> Result<Option<LeafHint>> {
        value.clear();
        if self.cannot_hold(key) {
            return Ok(None);
        }
        let pool = self.store.pool();
        let mut tries = 0;
        'descent: loop {
            let mut cur = pool.fetch_read(self.root)?;
            self.check_node(self.root, &cur, None)?;
            // Where the key falls in the current node's range, as its
            // parent's separators tell (the leaf search starts there).
            let mut hint = None;
            loop {
                let id = cur.id();
                let level = node::level(&cur);
                if level == 0 {
                    return match node::search_leaf_with_hint(&cur, key, hint)
                        .map_err(self.ne(id))?
                    {
                        Ok(i) => {
                            self.value_into(&cur, i, value)?;
                            // LH1: read with the leaf latched.
                            let epoch = pool.tree_epoch();
                            Ok(Some(LeafHint {
                                root: self.root,
                                leaf: id,
                                slot: i,
                                epoch,
                            }))
                        }
                        Err(_) => Ok(None),
                    };
                }
                // Only the leaf search uses a hint: the levels above are
                // cached, and their searches start from their end keys.
                let child = if level == 1 {
                    let (child, child_hint) =
                        node::child_with_hint(&cur, key).map_err(self.ne(id))?;
                    hint = child_hint;
                    child
                } else {
                    node::child_for(&cur, key).map_err(self.ne(id))?
                };
                let Some(next) = self.step_read(cur, PageId(child), level - 1, &mut tries)? else {
                    continue 'descent;
                };
                cur = next;
            }
        }
    }

    /// Step from `parent` (latched shared) to its `child` at `level`,
    /// shared: the child, with the parent let go; or `None` when the child
    /// was busy, after letting go of the parent and waiting for the child
    /// with nothing latched: the caller starts again from the root (BT5).
    fn step_read(
        &self,
        parent: PageRead<'s>,
        child: PageId,
        level: u8,
        tries: &mut u32,
    ) -> Result<Option<PageRead<'s>>> {
        let pool = self.store.pool();
        self.step(parent, child, level, tries, false, |wait| {
            pool.latch_read(child, wait)
        })
    }

    /// [`Tree::step_read`] to a leaf latched exclusively.
    fn step_write(
        &self,
        parent: PageRead<'s>,
        child: PageId,
        tries: &mut u32,
    ) -> Result<Option<PageWrite<'s>>> {
        let pool = self.store.pool();
        self.step(parent, child, 0, tries, true, |wait| {
            pool.latch_write(child, Load::Verify, wait)
        })
    }

    /// The two steps: `latch(wait)` latches the child, waiting only after
    /// [`BUSY_CHILD_RETRIES`] tries.
    fn step<P: std::ops::Deref<Target = [u8]>>(
        &self,
        parent: PageRead<'s>,
        child: PageId,
        level: u8,
        tries: &mut u32,
        exclusive: bool,
        latch: impl FnOnce(bool) -> Result<Option<P>>,
    ) -> Result<Option<P>> {
        if child == parent.id() {
            // A node naming itself as its child: latching it again (for
            // writing, or after a writer queued) would wait for ourselves.
            // Levels fall by one per step (checked below), so the parent
            // is the only page held that the child could be.
            return Err(self.corrupt(child.0, "a child pointer names its own node"));
        }
        let Some(next) = latch(*tries >= BUSY_CHILD_RETRIES)? else {
            drop(parent);
            *tries += 1;
            self.store.pool().wait_for_latch(child, exclusive)?;
            return Ok(None);
        };
        drop(parent);
        self.check_node(child, &next, Some(level))?;
        Ok(Some(next))
    }

    /// Append the value in leaf slot `i` of `leaf` (following an overflow
    /// chain) to `value`.
    fn value_into(&self, leaf: &PageRead<'_>, i: usize, value: &mut Vec<u8>) -> Result<()> {
        let id = leaf.id();
        let c = node::cell(leaf, i).map_err(self.ne(id))?;
        match node::decode_leaf(c).map_err(self.ne(id))?.value {
            LeafValue::Inline(v) => value.extend_from_slice(v),
            LeafValue::Overflow { len, first_page } => {
                let whole = overflow::read(self.store.pool(), first_page, len)?;
                if value.is_empty() {
                    *value = whole; // no second copy of a large value
                } else {
                    value.extend_from_slice(&whole);
                }
            }
        }
        Ok(())
    }

    /// Descend with shared latches and latch the leaf for `key`
    /// exclusively (the optimistic path); with whether the descent took
    /// the last child at every level (the leaf is the tree's rightmost,
    /// append hint AH1).
    fn leaf_for_write(&self, key: &[u8]) -> Result<(PageWrite<'s>, bool)> {
        let pool = self.store.pool();
        let mut tries = 0;
        'descent: loop {
            let root = pool.fetch_read(self.root)?;
            self.check_node(self.root, &root, None)?;
            if node::level(&root) == 0 {
                drop(root);
                let w = pool.fetch_write(self.root, Load::Verify)?;
                self.check_node(self.root, &w, None)?;
                if node::level(&w) == 0 {
                    return Ok((w, true));
                }
                continue; // the root split in between
            }
            let mut cur = root;
            let mut rightmost = true;
            loop {
                let id = cur.id();
                let level = node::level(&cur);
                let (child, last) = node::child_for_edge(&cur, key).map_err(self.ne(id))?;
                let child = PageId(child);
                rightmost &= last;
                if level == 1 {
                    match self.step_write(cur, child, &mut tries)? {
                        Some(w) => return Ok((w, rightmost)),
                        None => continue 'descent,
                    }
                }
                let Some(next) = self.step_read(cur, child, level - 1, &mut tries)? else {
                    continue 'descent;
                };
                cur = next;
            }
        }
    }

    /// Insert or replace `key`'s value. Returns the commit LSN of the
    /// change (hand it to [`Store::commit`] to wait for durability).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<Lsn> {
        self.put_at(key, value, None)
    }

    /// [`Tree::put`] of a key a read of this tree found at `at`
    /// ([`Tree::get_with_leaf`]): straight to that leaf, latched
    /// exclusively, without a descent, if no node of any tree split or
    /// was freed since (LH1); otherwise as `put`.
    pub fn put_at(&self, key: &[u8], value: &[u8], at: Option<LeafHint>) -> Result<Lsn> {
        self.check_sizes(key, Some(value))?;
        if value.len() <= self.max_inline_value()
            && let Some(lsn) = self.put_optimistic(key, value, at)?
        {
            return Ok(lsn);
        }
        self.put_pessimistic(key, value)
    }

    /// The leaf a read found a key in, latched exclusively, if the tree
    /// epoch read now with it latched is the one read then (LH1): it is
    /// then still a leaf of this tree and still holds the key's range.
    fn leaf_of_read(&self, at: LeafHint) -> Result<Option<PageWrite<'s>>> {
        let pool = self.store.pool();
        // Checked before the page is touched (it may be any page by now)
        // and again with it latched, the check LH1 rests on.
        if at.root != self.root || pool.tree_epoch() != at.epoch {
            return Ok(None);
        }
        let leaf = pool.fetch_write(at.leaf, Load::Verify)?;
        if pool.tree_epoch() != at.epoch {
            return Ok(None);
        }
        self.check_node(at.leaf, &leaf, Some(0))?;
        Ok(Some(leaf))
    }

    /// The tree's rightmost leaf, latched exclusively, if its append hint
    /// names it and `key` is at or above its first key (AH1, AH2). A
    /// hint that fails a check, or whose leaf cannot be read, is
    /// forgotten.
    fn hinted_leaf(&self, key: &[u8]) -> Result<Option<PageWrite<'s>>> {
        let hints = self.store.append_hints();
        let Some(hint) = hints.get(self.root) else {
            return Ok(None);
        };
        let pool = self.store.pool();
        // A hint the epoch has passed is dropped before its page is
        // touched (it may be any page by now); checked again below, with
        // the leaf latched, which is the check AH1 rests on.
        if pool.tree_epoch() != hint.epoch {
            hints.clear(self.root, hint);
            return Ok(None);
        }
        let checked = pool.fetch_write(hint.leaf, Load::Verify).and_then(|leaf| {
            // AH1: the epoch read with the leaf latched. Unchanged, the
            // page is still this tree's rightmost leaf, so its bytes are
            // checked as any node's (damage is an error, as on a descent).
            if pool.tree_epoch() != hint.epoch {
                return Ok(None);
            }
            self.check_node(hint.leaf, &leaf, Some(0))?;
            // AH2: the rightmost leaf holds every key from its lower fence
            // up, and its first key is at or above that fence.
            let fits = node::nslots(&leaf) > 0
                && key >= node::key(&leaf, 0).map_err(self.ne(hint.leaf))?;
            Ok(fits.then_some(leaf))
        });
        match checked {
            Ok(Some(leaf)) => Ok(Some(leaf)),
            Ok(None) => {
                hints.clear(self.root, hint);
                Ok(None)
            }
            Err(e) => {
                hints.clear(self.root, hint);
                Err(e)
            }
        }
    }

    /// After an append at the end of `leaf`, reached by the last child at
    /// every level and still latched: make it the tree's append hint
    /// (AH1).
    fn note_append(&self, leaf: &PageWrite<'s>) {
        let epoch = self.store.pool().tree_epoch();
        self.store.append_hints().set(
            self.root,
            append_hint::Hint {
                leaf: leaf.id(),
                epoch,
            },
        );
    }

    fn put_optimistic(
        &self,
        key: &[u8],
        value: &[u8],
        at: Option<LeafHint>,
    ) -> Result<Option<Lsn>> {
        let mut mtr = self.store.mtr()?;
        let of_read = match at {
            Some(at) => self.leaf_of_read(at)?,
            None => None,
        };
        // (A leaf of a read is not known to be the rightmost: no append
        // hint is noted from it.)
        let guess = of_read.as_ref().and(at).map(|at| at.slot);
        let (leaf, hinted, rightmost) = match of_read {
            Some(leaf) => (leaf, true, false),
            None => match self.hinted_leaf(key)? {
                Some(leaf) => (leaf, true, true),
                None => {
                    let (leaf, rightmost) = self.leaf_for_write(key)?;
                    (leaf, false, rightmost)
                }
            },
        };
        let id = leaf.id();
        let cell = node::encode_leaf_inline(key, value).map_err(self.ne(id))?;
        self.assert_cell_size(&cell);
        let free = self.free_space(id, &leaf)?;
        let patch;
        let found = match guess {
            Some(slot) => node::search_leaf_from_guess(&leaf, key, slot),
            None => node::search_leaf_for_insert(&leaf, key),
        };
        let op = match found.map_err(self.ne(id))? {
            Ok(i) => {
                let old = node::cell(&leaf, i).map_err(self.ne(id))?;
                let was_overflow = matches!(
                    node::decode_leaf(old).map_err(self.ne(id))?.value,
                    LeafValue::Overflow { .. }
                );
                if was_overflow || free + old.len() < cell.len() {
                    return Ok(None);
                }
                // A same-length replacement logs only the bytes that
                // changed (an update's header and columns).
                patch = crate::mtr::redo::cell_patch(old, &cell);
                match &patch {
                    Some(patches) => Op::NodePatch {
                        slot: i as u16,
                        patches,
                    },
                    None => Op::NodeReplace {
                        slot: i as u16,
                        cell: &cell,
                    },
                }
            }
            Err(i) => {
                if free < cell.len() + SLOT_SIZE {
                    return Ok(None);
                }
                // At a read's leaf, a key it does not hold goes there only
                // between two of its keys, which proves it is in the
                // leaf's range whatever key the read was of (LH1 speaks
                // for that key only); otherwise a descent decides.
                if guess.is_some() && !(i > 0 && i < node::nslots(&leaf)) {
                    return Ok(None);
                }
                if rightmost && !hinted && i > 0 && i == node::nslots(&leaf) {
                    self.note_append(&leaf);
                }
                Op::NodeInsert {
                    slot: i as u16,
                    cell: &cell,
                }
            }
        };
        let h = mtr.adopt(leaf);
        mtr.apply(h, &op)?;
        mtr.commit()
    }

    /// Latch the superblock, then descend with exclusive latches,
    /// releasing ancestors above each safe node. Returns the mtr and the
    /// held path: (node, child index taken), the leaf last.
    ///
    /// `Throttle` when the log is nearly full and `Busy` when a tree page
    /// was latched by another thread (BT5): the mtr is dropped (nothing
    /// changed yet) and the caller starts over, which throttles (store
    /// T4) or first waits for the busy page.
    fn descend_x(&self, key: &[u8], intent: Intent, tries: u32) -> Result<Descent<'s>> {
        let mut mtr = self.store.mtr()?;
        mtr.latch(PageId(0), Load::Verify)?; // store T3
        if self.store.log_nearly_full() {
            return Ok(Descent::Throttle);
        }
        let pool = self.store.pool();
        let mut path: Vec<(PageHandle, usize)> = Vec::new();
        let mut id = self.root;
        let mut expect = None;
        loop {
            if mtr.handle_of(id).is_some() {
                // A child pointer naming the superblock or a page already
                // on the path: waiting for it would wait for ourselves.
                return Err(self.corrupt(id.0, "a child pointer names a page on its own path"));
            }
            let Some(w) = pool.latch_write(id, Load::Verify, tries >= BUSY_CHILD_RETRIES)? else {
                return Ok(Descent::Busy(id)); // BT5: the mtr lets go of all
            };
            let h = mtr.adopt(w);
            let (level, safe, next) = {
                let p = mtr.page(h)?;
                self.check_node(id, p, expect)?;
                let level = node::level(p);
                let next = if level == 0 {
                    None
                } else {
                    let i = node::search_internal(p, key).map_err(self.ne(id))?;
                    Some((i, PageId(node::child(p, i).map_err(self.ne(id))?)))
                };
                (level, self.is_safe(id, p, intent)?, next)
            };
            if safe {
                for (a, _) in path.drain(..) {
                    mtr.release(a)?;
                }
            }
            let Some((i, child)) = next else {
                path.push((h, 0));
                return Ok(Descent::Latched(mtr, path));
            };
            path.push((h, i));
            id = child;
            expect = Some(level - 1);
        }
    }

    fn is_safe(&self, id: PageId, p: &[u8], intent: Intent) -> Result<bool> {
        let max_internal = node::internal_size(self.max_key_len()) + SLOT_SIZE;
        let leaf = node::level(p) == 0;
        Ok(match intent {
            Intent::Insert { leaf_need } => {
                let need = if leaf { leaf_need } else { max_internal };
                self.free_space(id, p)? >= need
            }
            Intent::Delete => {
                let max_cell = if leaf {
                    node::leaf_inline_size(self.max_key_len(), self.max_inline_value()) + SLOT_SIZE
                } else {
                    max_internal
                };
                self.used_bytes(id, p)? >= self.capacity() / 4 + max_cell
            }
        })
    }

    /// A fresh mtr with the superblock and the path for `key` latched
    /// exclusively (see `descend_x`), throttling first as often as needed.
    fn pessimistic(
        &self,
        key: &[u8],
        intent: Intent,
    ) -> Result<(Mtr<'s>, Vec<(PageHandle, usize)>)> {
        let mut tries = 0;
        loop {
            match self.descend_x(key, intent, tries)? {
                Descent::Latched(mtr, path) => return Ok((mtr, path)),
                Descent::Throttle => {}
                Descent::Busy(id) => {
                    tries += 1;
                    self.store.pool().wait_for_latch(id, true)?;
                }
            }
        }
    }

    fn put_pessimistic(&self, key: &[u8], value: &[u8]) -> Result<Lsn> {
        let inline = value.len() <= self.max_inline_value();
        let leaf_need = if inline {
            node::leaf_inline_size(key.len(), value.len())
        } else {
            node::leaf_overflow_size(key.len())
        } + SLOT_SIZE;
        let (mut mtr, mut path) = self.pessimistic(key, Intent::Insert { leaf_need })?;
        let Some(&(leaf, _)) = path.last() else {
            unreachable_path();
        };
        let depth = path.len() - 1;
        let leaf_id = mtr.id(leaf)?;
        let found = node::search_leaf_for_insert(mtr.page(leaf)?, key).map_err(self.ne(leaf_id))?;
        // Latch (read) the old chain before the first change (mtr M4).
        let mut old_chain = Vec::new();
        if let Ok(i) = found {
            let old = node::cell(mtr.page(leaf)?, i).map_err(self.ne(leaf_id))?;
            if let LeafValue::Overflow { len, first_page } =
                node::decode_leaf(old).map_err(self.ne(leaf_id))?.value
            {
                old_chain = overflow::latch_chain(&mut mtr, first_page, len)?;
            }
        }
        let cell = if inline {
            node::encode_leaf_inline(key, value).map_err(self.ne(leaf_id))?
        } else {
            let first = overflow::write(&mut mtr, value)?;
            node::encode_leaf_overflow(key, value.len() as u32, first.0)
                .map_err(self.ne(leaf_id))?
        };
        self.assert_cell_size(&cell);
        for h in old_chain {
            free_page(&mut mtr, h)?;
        }
        let pos = match found {
            Ok(i) => {
                mtr.apply(leaf, &Op::NodeDelete(i as u16))?;
                i
            }
            Err(i) => i,
        };
        self.insert_at(&mut mtr, &mut path, depth, pos, &cell)?;
        mtr.commit()?
            .ok_or_else(|| self.corrupt(leaf_id.0, "a put changed nothing"))
    }

    /// Insert `cell` at slot `pos` of the node at `path[depth]`, splitting
    /// it (and its ancestors) as needed.
    fn insert_at(
        &self,
        mtr: &mut Mtr<'s>,
        path: &mut Vec<(PageHandle, usize)>,
        depth: usize,
        pos: usize,
        cell: &[u8],
    ) -> Result<()> {
        let (h, _) = *path
            .get(depth)
            .ok_or_else(|| self.corrupt(self.root.0, "split above the held path"))?;
        let id = mtr.id(h)?;
        let p = mtr.page(h)?;
        if self.free_space(id, p)? >= cell.len() + SLOT_SIZE {
            return mtr.apply(
                h,
                &Op::NodeInsert {
                    slot: pos as u16,
                    cell,
                },
            );
        }
        let level = node::level(p);
        let mut cells: Vec<Vec<u8>> = node::cells(p)
            .map_err(self.ne(id))?
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect();
        let n_old = cells.len();
        if pos > n_old {
            return Err(self.corrupt(id.0, "insert position past the node's end"));
        }
        cells.insert(pos, cell.to_vec());
        // Sequential inserts (at a node's end, or its start) split off
        // just the new cell, so ascending or descending loads fill pages
        // instead of leaving them half empty; otherwise halve by bytes.
        let s = if pos == n_old && n_old >= 2 {
            n_old
        } else if pos == 0 && n_old >= 2 {
            1
        } else {
            self.split_index(id, &cells)?
        };
        let (left, right) = cells.split_at(s);
        let (sep, right_cells) = self.separator(id, level, left, right)?;
        // Buffer B11 (append hint AH1): counted with the node latched,
        // before it changes.
        self.store.pool().note_tree_change();
        if id == self.root {
            let a = alloc_page(mtr)?;
            let b = alloc_page(mtr)?;
            let (a_id, b_id) = (mtr.id(a)?, mtr.id(b)?);
            self.write_node(mtr, a, level, left)?;
            self.write_node(mtr, b, level, &right_cells)?;
            let c0 = node::encode_internal(b"", a_id.0).map_err(self.ne(id))?;
            let c1 = node::encode_internal(&sep, b_id.0).map_err(self.ne(id))?;
            mtr.apply(h, &Op::NodeInit(level + 1))?;
            mtr.apply(h, &Op::NodeInsert { slot: 0, cell: &c0 })?;
            mtr.apply(h, &Op::NodeInsert { slot: 1, cell: &c1 })?;
            return Ok(());
        }
        // A node is released as safe only if the change below it fits
        // (`is_safe`), so a split reaches a released parent only by our
        // bug; in release it is still an error, not a split that skips
        // the parent.
        debug_assert!(
            depth > 0,
            "btree: node {id} needs a split but its parent was released as safe"
        );
        if depth == 0 {
            return Err(self.corrupt(id.0, "a node to split was released as safe"));
        }
        let n = alloc_page(mtr)?;
        let n_id = mtr.id(n)?;
        if s <= pos {
            mtr.apply(h, &Op::NodeTruncate(s as u16))?;
        } else {
            mtr.apply(h, &Op::NodeTruncate((s - 1) as u16))?;
            mtr.apply(
                h,
                &Op::NodeInsert {
                    slot: pos as u16,
                    cell,
                },
            )?;
        }
        self.write_node(mtr, n, level, &right_cells)?;
        let (_, pidx) = *path
            .get(depth - 1)
            .ok_or_else(|| self.corrupt(id.0, "missing parent"))?;
        let sep_cell = node::encode_internal(&sep, n_id.0).map_err(self.ne(id))?;
        self.insert_at(mtr, path, depth - 1, pidx + 1, &sep_cell)
    }

    /// The split index: both halves non-empty, bytes as even as possible.
    fn split_index(&self, id: PageId, cells: &[Vec<u8>]) -> Result<usize> {
        let total: usize = cells.iter().map(|c| c.len() + SLOT_SIZE).sum();
        let mut best = (usize::MAX, 0);
        let mut left = 0usize;
        for (i, c) in cells.iter().enumerate().take(cells.len().saturating_sub(1)) {
            left += c.len() + SLOT_SIZE;
            let diff = (2 * left).abs_diff(total);
            if diff < best.0 {
                best = (diff, i + 1);
            }
        }
        let s = best.1;
        let cap = self.capacity();
        let left_bytes: usize = cells.iter().take(s).map(|c| c.len() + SLOT_SIZE).sum();
        if s == 0 || left_bytes > cap || total - left_bytes > cap {
            return Err(self.corrupt(id.0, "node cannot be split into two pages"));
        }
        Ok(s)
    }

    /// The separator key for a split between `left` and `right`, and the
    /// right node's cells (an internal right node's first key becomes
    /// minus infinity; its old key moves up).
    fn separator(
        &self,
        id: PageId,
        level: u8,
        left: &[Vec<u8>],
        right: &[Vec<u8>],
    ) -> Result<(Vec<u8>, Vec<Vec<u8>>)> {
        let first = right
            .first()
            .ok_or_else(|| self.corrupt(id.0, "empty right half"))?;
        if level == 0 {
            let rk = node::decode_leaf(first).map_err(self.ne(id))?.key;
            let lk = match left.last() {
                Some(c) => node::decode_leaf(c).map_err(self.ne(id))?.key,
                None => b"",
            };
            // A damaged leaf may hold keys out of order; BT2's separator
            // exists only between ordered keys.
            if lk >= rk {
                return Err(self.corrupt(id.0, "leaf keys out of order at a split"));
            }
            return Ok((short_separator(lk, rk), right.to_vec()));
        }
        let (rk, child) = node::decode_internal(first).map_err(self.ne(id))?;
        let mut cells = right.to_vec();
        if let Some(c) = cells.first_mut() {
            *c = node::encode_internal(b"", child).map_err(self.ne(id))?;
        }
        Ok((rk.to_vec(), cells))
    }

    /// Make `h` a fresh node holding `cells`, logged as an init and one
    /// insert per cell: as many log bytes as the cells themselves, where a
    /// page image would log the whole page however empty.
    fn write_node(
        &self,
        mtr: &mut Mtr<'s>,
        h: PageHandle,
        level: u8,
        cells: &[Vec<u8>],
    ) -> Result<()> {
        mtr.apply(h, &Op::Init(PageType::BtreeNode))?;
        mtr.apply(h, &Op::NodeInit(level))?;
        for (i, c) in cells.iter().enumerate() {
            mtr.apply(
                h,
                &Op::NodeInsert {
                    slot: i as u16,
                    cell: c,
                },
            )?;
        }
        Ok(())
    }

    /// Delete `key`. Returns the commit LSN, or `None` if it was absent
    /// (as a key longer than [`Tree::max_key_len`] always is).
    pub fn delete(&self, key: &[u8]) -> Result<Option<Lsn>> {
        if self.cannot_hold(key) {
            return Ok(None);
        }
        {
            let mut mtr = self.store.mtr()?;
            let (leaf, _) = self.leaf_for_write(key)?;
            let id = leaf.id();
            let i = match node::search_leaf(&leaf, key).map_err(self.ne(id))? {
                Ok(i) => i,
                Err(_) => return Ok(None),
            };
            let c = node::cell(&leaf, i).map_err(self.ne(id))?;
            let overflow = matches!(
                node::decode_leaf(c).map_err(self.ne(id))?.value,
                LeafValue::Overflow { .. }
            );
            let after = self.used_without(id, self.used_bytes(id, &leaf)?, c.len())?;
            if !overflow && (id == self.root || after >= self.capacity() / 4) {
                let h = mtr.adopt(leaf);
                mtr.apply(h, &Op::NodeDelete(i as u16))?;
                return mtr.commit();
            }
        }
        let (mut mtr, path) = self.pessimistic(key, Intent::Delete)?;
        let Some(&(leaf, _)) = path.last() else {
            unreachable_path();
        };
        let depth = path.len() - 1;
        let leaf_id = mtr.id(leaf)?;
        let i = match node::search_leaf(mtr.page(leaf)?, key).map_err(self.ne(leaf_id))? {
            Ok(i) => i,
            Err(_) => return Ok(None),
        };
        let c = node::cell(mtr.page(leaf)?, i).map_err(self.ne(leaf_id))?;
        if let LeafValue::Overflow { len, first_page } =
            node::decode_leaf(c).map_err(self.ne(leaf_id))?.value
        {
            overflow::free(&mut mtr, first_page, len)?;
        }
        mtr.apply(leaf, &Op::NodeDelete(i as u16))?;
        self.rebalance(&mut mtr, &path, depth)?;
        mtr.commit()
    }

    /// Delete every present key of `keys` (sorted ascending, no
    /// duplicates); returns how many were present. Neighbouring keys that
    /// share a leaf go in one mini-transaction, so removing a run of
    /// adjacent keys (purge) costs one descent per leaf, not per key. Each
    /// mini-transaction is atomic, the batch as a whole is not.
    pub fn delete_sorted<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<u64> {
        if keys
            .windows(2)
            .any(|w| matches!(w, [a, b] if a.as_ref() >= b.as_ref()))
        {
            return Err(Error::InvalidArgument {
                what: "keys to delete",
                reason: "not strictly ascending".into(),
            });
        }
        let mut deleted = 0;
        let mut rest = keys;
        while let Some(first) = rest.first().map(AsRef::as_ref) {
            if self.cannot_hold(first) {
                #[allow(clippy::indexing_slicing)] // `rest` has a first element
                {
                    rest = &rest[1..];
                }
                continue;
            }
            let consumed = match self.delete_run(rest)? {
                (0, _) => {
                    // The first key needs a merge or frees pages.
                    deleted += u64::from(self.delete(first)?.is_some());
                    1
                }
                (n, d) => {
                    deleted += d;
                    n
                }
            };
            // Progress: each round deals with at least the first key, and
            // never with more keys than it was given.
            assert!(
                (1..=rest.len()).contains(&consumed),
                "btree: a delete run consumed {consumed} of {} keys",
                rest.len()
            );
            #[allow(clippy::indexing_slicing)] // asserted just above
            {
                rest = &rest[consumed..];
            }
        }
        Ok(deleted)
    }

    /// The optimistic part of [`Tree::delete_sorted`]: in one mtr on the
    /// leaf of `keys[0]`, delete the leading keys that belong to that leaf
    /// while no delete needs a merge or frees an overflow chain. Returns
    /// (keys dealt with, keys deleted); `(0, 0)` when the first key needs
    /// the pessimistic path.
    fn delete_run<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<(usize, u64)> {
        let Some(first) = keys.first().map(AsRef::as_ref) else {
            return Ok((0, 0));
        };
        let mut mtr = self.store.mtr()?;
        let (leaf, _) = self.leaf_for_write(first)?;
        let id = leaf.id();
        let n = node::nslots(&leaf);
        let mut used = self.used_bytes(id, &leaf)?;
        let mut slots = Vec::new();
        let mut consumed = 0;
        for k in keys {
            match node::search_leaf(&leaf, k.as_ref()).map_err(self.ne(id))? {
                Ok(i) => {
                    let c = node::cell(&leaf, i).map_err(self.ne(id))?;
                    let overflow = matches!(
                        node::decode_leaf(c).map_err(self.ne(id))?.value,
                        LeafValue::Overflow { .. }
                    );
                    let after = self.used_without(id, used, c.len())?;
                    if overflow || (id != self.root && after < self.capacity() / 4) {
                        break;
                    }
                    used = after;
                    slots.push(i);
                }
                // Absent: this leaf holds the first key's range, and a key
                // below one of its own keys (keys ascend, so the range).
                Err(i) if consumed == 0 || i < n => {}
                // Past this leaf's last key: maybe in a later leaf.
                Err(_) => break,
            }
            consumed += 1;
        }
        if slots.is_empty() {
            return Ok((consumed, 0));
        }
        let h = mtr.adopt(leaf);
        // Highest slot first, so the lower slot numbers stay valid.
        for &i in slots.iter().rev() {
            mtr.apply(h, &Op::NodeDelete(i as u16))?;
        }
        mtr.commit()?;
        Ok((consumed, slots.len() as u64))
    }

    /// After a delete below `path[depth]`: merge an underfull node into a
    /// sibling (BT4), and collapse a root of level 2 or more with one
    /// child (BT1).
    fn rebalance(
        &self,
        mtr: &mut Mtr<'s>,
        path: &[(PageHandle, usize)],
        depth: usize,
    ) -> Result<()> {
        let (h, _) = *path
            .get(depth)
            .ok_or_else(|| self.corrupt(self.root.0, "merge above the held path"))?;
        let id = mtr.id(h)?;
        if id == self.root {
            loop {
                let p = mtr.page(h)?;
                let root_level = node::level(p);
                if root_level <= 1 || node::nslots(p) != 1 {
                    return Ok(());
                }
                let child = PageId(node::child(p, 0).map_err(self.ne(id))?);
                let ch = mtr.latch(child, Load::Verify)?;
                // BT1: the root takes its only child's content, which must
                // be a node one level down (not whatever the pointer names).
                self.check_node(child, mtr.page(ch)?, Some(root_level - 1))?;
                // Logged as its cells, not as a page image: as many bytes
                // as the child holds.
                let cells: Vec<Vec<u8>> = node::cells(mtr.page(ch)?)
                    .map_err(self.ne(child))?
                    .into_iter()
                    .map(<[u8]>::to_vec)
                    .collect();
                self.write_node(mtr, h, root_level - 1, &cells)?;
                free_page(mtr, ch)?;
            }
        }
        let cap = self.capacity();
        let p = mtr.page(h)?;
        let used = self.used_bytes(id, p)?;
        let level = node::level(p);
        if used >= cap / 4 || depth == 0 {
            return Ok(());
        }
        let (ph, pidx) = *path
            .get(depth - 1)
            .ok_or_else(|| self.corrupt(id.0, "missing parent"))?;
        let parent_id = mtr.id(ph)?;
        let pp = mtr.page(ph)?;
        let pn = node::nslots(pp);
        // Merge right into left: (left handle, right handle, right's index in parent).
        let (lh, rh, ridx) = if pidx + 1 < pn {
            let rid = PageId(node::child(pp, pidx + 1).map_err(self.ne(parent_id))?);
            (h, mtr.latch(rid, Load::Verify)?, pidx + 1)
        } else if pidx > 0 {
            let lid = PageId(node::child(pp, pidx - 1).map_err(self.ne(parent_id))?);
            (mtr.latch(lid, Load::Verify)?, h, pidx)
        } else {
            return Ok(());
        };
        let (l_id, r_id) = (mtr.id(lh)?, mtr.id(rh)?);
        if lh == rh {
            // Two child pointers of one parent name the same page.
            return Err(self.corrupt(l_id.0, "a node is its own sibling"));
        }
        self.check_node(l_id, mtr.page(lh)?, Some(level))?;
        self.check_node(r_id, mtr.page(rh)?, Some(level))?;
        if level == 0 && lh == h {
            // A leaf merges into its right sibling when that moves fewer
            // cells: a tree used as a queue (appends at the right, deletes
            // at the left: undo, purge) drains its leftmost leaf, and
            // pulling the full right sibling into it would copy nearly
            // every entry once more before it is deleted.
            let l_used = self.used_bytes(l_id, mtr.page(lh)?)?;
            let r_used = self.used_bytes(r_id, mtr.page(rh)?)?;
            if l_used < r_used {
                return self.merge_leaf_right(mtr, path, depth, (ph, pidx), (lh, rh));
            }
        }
        let sep = node::key(mtr.page(ph)?, ridx)
            .map_err(self.ne(parent_id))?
            .to_vec();
        let mut moving: Vec<Vec<u8>> = node::cells(mtr.page(rh)?)
            .map_err(self.ne(r_id))?
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect();
        if level > 0
            && let Some(first) = moving.first_mut()
        {
            let (_, child) = node::decode_internal(first).map_err(self.ne(r_id))?;
            *first = node::encode_internal(&sep, child).map_err(self.ne(r_id))?;
        }
        let need: usize = moving.iter().map(|c| c.len() + SLOT_SIZE).sum();
        let l_used = self.used_bytes(l_id, mtr.page(lh)?)?;
        if l_used + need > cap {
            // Too full to merge; an unchanged sibling is released.
            if rh != h {
                mtr.release(rh)?;
            } else {
                mtr.release(lh)?;
            }
            return Ok(());
        }
        let base = node::nslots(mtr.page(lh)?);
        for (k, c) in moving.iter().enumerate() {
            mtr.apply(
                lh,
                &Op::NodeInsert {
                    slot: (base + k) as u16,
                    cell: c,
                },
            )?;
        }
        // BT4: the merged node holds both, within one node.
        debug_assert_eq!(
            self.used_bytes(l_id, mtr.page(lh)?)?,
            l_used + need,
            "btree BT4: a merge moves exactly the right node's cells"
        );
        free_page(mtr, rh)?;
        mtr.apply(ph, &Op::NodeDelete(ridx as u16))?;
        self.rebalance(mtr, path, depth - 1)
    }

    /// [`Tree::rebalance`] for an underfull leaf `l` (slot `lidx` of parent
    /// `ph`) with fewer bytes than its right sibling `r`: move `l`'s cells
    /// to the front of `r` if they fit, give `r` `l`'s place in the parent
    /// (its separator key, so `r` now covers `l`'s range too, BT2), and
    /// free `l`.
    fn merge_leaf_right(
        &self,
        mtr: &mut Mtr<'s>,
        path: &[(PageHandle, usize)],
        depth: usize,
        (ph, lidx): (PageHandle, usize),
        (lh, rh): (PageHandle, PageHandle),
    ) -> Result<()> {
        let (l_id, r_id, parent_id) = (mtr.id(lh)?, mtr.id(rh)?, mtr.id(ph)?);
        let moving: Vec<Vec<u8>> = node::cells(mtr.page(lh)?)
            .map_err(self.ne(l_id))?
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect();
        let need: usize = moving.iter().map(|c| c.len() + SLOT_SIZE).sum();
        let r_used = self.used_bytes(r_id, mtr.page(rh)?)?;
        if r_used + need > self.capacity() {
            mtr.release(rh)?; // too full to merge; unchanged
            return Ok(());
        }
        let sep = node::key(mtr.page(ph)?, lidx)
            .map_err(self.ne(parent_id))?
            .to_vec();
        let cell = node::encode_internal(&sep, r_id.0).map_err(self.ne(parent_id))?;
        for (k, c) in moving.iter().enumerate() {
            mtr.apply(
                rh,
                &Op::NodeInsert {
                    slot: k as u16,
                    cell: c,
                },
            )?;
        }
        mtr.apply(
            ph,
            &Op::NodeReplace {
                slot: lidx as u16,
                cell: &cell,
            },
        )?;
        debug_assert_eq!(
            self.used_bytes(r_id, mtr.page(rh)?)?,
            r_used + need,
            "btree BT4: a merge moves exactly the left leaf's cells"
        );
        mtr.apply(ph, &Op::NodeDelete((lidx + 1) as u16))?;
        free_page(mtr, lh)?;
        self.rebalance(mtr, path, depth - 1)
    }

    /// Entries with keys in `(lo, hi)` bounds, in `dir` order.
    pub fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>, dir: Direction) -> Cursor<'s> {
        Cursor::new(*self, lo, hi, dir)
    }

    /// Walk the whole tree and check every node and the key order with
    /// fences (BT2); read every overflow chain.
    pub fn verify(&self) -> Result<TreeCheck> {
        let mut check = TreeCheck::default();
        let height = self.verify_node(self.root, None, None, None, &mut check)?;
        check.height = height;
        Ok(check)
    }

    fn verify_node(
        &self,
        id: PageId,
        level: Option<u8>,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        check: &mut TreeCheck,
    ) -> Result<u32> {
        let p = self.store.pool().fetch_read(id)?;
        self.check_node(id, &p, level)?;
        node::validate(&p).map_err(self.ne(id))?;
        let lvl = node::level(&p);
        let n = node::nslots(&p);
        let within = |k: &[u8]| lo.is_none_or(|l| k >= l) && hi.is_none_or(|h| k < h);
        if lvl == 0 {
            check.leaves += 1;
            for i in 0..n {
                let c = node::cell(&p, i).map_err(self.ne(id))?;
                let leaf = node::decode_leaf(c).map_err(self.ne(id))?;
                if !within(leaf.key) {
                    return Err(
                        self.corrupt(id.0, format!("key {:?} outside its fences", leaf.key))
                    );
                }
                if let LeafValue::Overflow { len, first_page } = leaf.value {
                    let v = overflow::read(self.store.pool(), first_page, len)?;
                    check.overflow_pages += overflow::pages_for(v.len(), self.page_size()) as u64;
                }
                check.entries += 1;
            }
            return Ok(1);
        }
        check.internal += 1;
        let mut keys = Vec::with_capacity(n);
        let mut children = Vec::with_capacity(n);
        for i in 0..n {
            let c = node::cell(&p, i).map_err(self.ne(id))?;
            let (k, child) = node::decode_internal(c).map_err(self.ne(id))?;
            if i > 0 && !within(k) {
                return Err(self.corrupt(id.0, format!("separator {k:?} outside its fences")));
            }
            keys.push(k.to_vec());
            children.push(PageId(child));
        }
        drop(p);
        let mut height = None;
        for (i, (key, &child)) in keys.iter().zip(&children).enumerate() {
            // Slot 0's key is minus infinity: the parent's fence bounds it.
            let clo = if i == 0 { lo } else { Some(key.as_slice()) };
            let chi = keys.get(i + 1).map(Vec::as_slice).or(hi);
            let h = self.verify_node(child, Some(lvl - 1), clo, chi, check)?;
            if height.is_some_and(|x| x != h) {
                return Err(self.corrupt(id.0, "children of unequal height"));
            }
            height = Some(h);
        }
        let height = height.ok_or_else(|| self.corrupt(id.0, "internal node without children"))?;
        Ok(height + 1)
    }
}

/// The shortest prefix of `right` that is above `left` (`left < right`):
/// a separator for a leaf split (suffix truncation keeps internal nodes
/// small).
fn short_separator(left: &[u8], right: &[u8]) -> Vec<u8> {
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    #[allow(clippy::indexing_slicing)] // the `min` keeps the end in bounds
    let sep = right[..(common + 1).min(right.len())].to_vec();
    // BT2: the separator goes above every key of the left node and at or
    // below every key of the right one. It holds for any `left < right`.
    assert!(
        left < sep.as_slice() && sep.as_slice() <= right,
        "btree BT2: separator {sep:?} does not divide {left:?} from {right:?}"
    );
    sep
}

/// A latched pessimistic descent always ends at a leaf, which it holds
/// (`descend_x` pushes the leaf before returning the path).
#[cold]
#[track_caller]
fn unreachable_path() -> ! {
    #[allow(clippy::panic)] // an invariant of `descend_x`, not damage
    {
        panic!("btree: a latched descent returned an empty path")
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::io::SimFs;
    use crate::store::test_options;

    fn page_type_of(store: &Store, id: PageId) -> Option<PageType> {
        page::page_type(&store.pool().fetch_read(id).expect("page"))
    }

    /// A fresh store on a simulated disk seeded with `seed`, and a tree.
    fn store_and_tree(seed: u64) -> Result<(Store, PageId)> {
        let fs = Arc::new(SimFs::new(seed));
        let store = Store::create(fs, Path::new("/db"), test_options())?;
        let root = Tree::create(&store)?.root();
        Ok((store, root))
    }

    /// The last key of leaf `id`.
    fn last_key(t: &Tree<'_>, id: PageId) -> Result<Vec<u8>> {
        let leaf = t.store.pool().fetch_read(id)?;
        let n = node::nslots(&leaf);
        assert!(n > 0, "leaf {id} is empty");
        Ok(node::key(&leaf, n - 1).map_err(t.ne(id))?.to_vec())
    }

    /// A put at where a read found its key (LH1) lands in the right leaf
    /// whatever happened since: straight there while no node split or was
    /// freed, by a descent once one did (here, splits that moved half of
    /// the keys read to new leaves, then merges that freed leaves), and
    /// never in another tree's leaf.
    #[test]
    fn a_put_at_a_leaf_a_read_found_lands_in_the_right_leaf() -> Result<()> {
        let (store, root) = store_and_tree(12)?;
        let t = Tree::open(&store, root);
        let key = |i: u64| (i * 10).to_be_bytes();
        let value = [1u8; 60];
        for i in 0..600 {
            t.put(&key(i), &value)?;
        }
        let found = |t: &Tree<'_>| -> Result<Vec<(u64, LeafHint)>> {
            (0..600)
                .step_by(7)
                .map(|i| Ok((i, t.get_with_leaf(&key(i))?.expect("present").1)))
                .collect()
        };
        // Fresh hints: every put goes straight to its leaf.
        let hints = found(&t)?;
        for &(i, at) in &hints {
            t.put_at(&key(i), &[2u8; 60], Some(at))?;
        }
        // Stale hints: keys between the old ones split every leaf.
        let hints = found(&t)?;
        for i in 0..600u64 {
            t.put(&(i * 10 + 5).to_be_bytes(), &value)?;
        }
        for &(i, at) in &hints {
            t.put_at(&key(i), &[3u8; 60], Some(at))?;
        }
        // Stale again: merges free leaves.
        let hints = found(&t)?;
        for i in 0..600u64 {
            if i % 7 != 0 {
                t.delete(&key(i))?;
                t.delete(&(i * 10 + 5).to_be_bytes())?;
            }
        }
        for &(i, at) in &hints {
            t.put_at(&key(i), &[4u8; 60], Some(at))?;
        }
        // A hint of one key used for others (fresh: no split since): a
        // key past the read leaf's keys is not put there.
        let first = t.get_with_leaf(&key(0))?.expect("present").1;
        for k in [1u64, 99_999, 5_995] {
            t.put_at(&k.to_be_bytes(), &[6u8; 60], Some(first))?;
            assert_eq!(t.get(&k.to_be_bytes())?.as_deref(), Some(&[6u8; 60][..]));
            t.verify()?;
            assert!(t.delete(&k.to_be_bytes())?.is_some());
        }
        // Another tree's put with this tree's hints goes to its own tree.
        let other = Tree::create(&store)?;
        for &(i, at) in &found(&t)? {
            other.put_at(&key(i), &[5u8; 60], Some(at))?;
        }
        t.verify()?;
        other.verify()?;
        for i in (0..600).step_by(7) {
            assert_eq!(t.get(&key(i))?.as_deref(), Some(&[4u8; 60][..]), "key {i}");
            assert_eq!(
                other.get(&key(i))?.as_deref(),
                Some(&[5u8; 60][..]),
                "key {i}"
            );
        }
        // The keys read, and the keys between them that were not deleted.
        assert_eq!(
            t.range(Bound::Unbounded, Bound::Unbounded, Direction::Forward)
                .count(),
            2 * 86
        );
        Ok(())
    }

    /// Appends find the rightmost leaf through the hint (AH2); when that
    /// leaf is freed and handed to another tree, where the stale hint
    /// would pass every check of AH2, the reuse epoch turns the next
    /// append away (AH1) and it lands in its own tree.
    #[test]
    fn an_append_never_follows_a_hint_to_a_leaf_another_tree_reused() -> Result<()> {
        let (store, root) = store_and_tree(11)?;
        let a = Tree::open(&store, root);
        let value = [7u8; 100];
        let n = 400u64;
        for i in 0..n {
            a.put(&i.to_be_bytes(), &value)?;
        }
        let hint = store
            .append_hints()
            .get(a.root())
            .expect("appends set a hint");
        assert!(node::is_leaf(&store.pool().fetch_read(hint.leaf)?));
        assert_eq!(last_key(&a, hint.leaf)?, (n - 1).to_be_bytes());
        assert_ne!(hint.leaf, a.root(), "the tree has grown past its root");
        // The next append goes through the hint and keeps it.
        a.put(&n.to_be_bytes(), &value)?;
        assert_eq!(store.append_hints().get(a.root()), Some(hint));
        // Empty the rightmost leaf from the top: a merge frees it.
        let mut top = n;
        while page_type_of(&store, hint.leaf) != Some(PageType::Free) {
            assert!(a.delete(&top.to_be_bytes())?.is_some());
            top = top
                .checked_sub(1)
                .expect("the leaf was freed before the tree emptied");
        }
        // The free list hands the leaf out again: to the new tree's root
        // (the last page freed is the first reused), a lone leaf with
        // keys below the next append of `a`.
        let b = Tree::create(&store)?;
        assert_eq!(b.root(), hint.leaf, "the freed leaf became b's root");
        b.put(&[0, 0, 0, 0, 0, 0, 0, 1], b"b")?;
        assert_eq!(
            store.append_hints().get(a.root()),
            Some(hint),
            "a's stale hint is still there to be tried"
        );
        let key = 100_000u64.to_be_bytes();
        a.put(&key, &value)?;
        assert_eq!(b.get(&key)?, None, "an append of a landed in b");
        assert_eq!(b.verify()?.entries, 1);
        assert_eq!(a.get(&key)?.as_deref(), Some(&value[..]));
        assert_eq!(a.verify()?.entries, top + 2);
        store.close()
    }

    /// A hinted leaf that splits (by an insert that did not use the hint)
    /// keeps its lower keys: an append must then go to the new right
    /// half, not after the old leaf's new last key (AH1).
    #[test]
    fn an_append_after_the_hinted_leaf_split_goes_to_the_new_rightmost_leaf() -> Result<()> {
        let (store, root) = store_and_tree(13)?;
        let t = Tree::open(&store, root);
        let value = [3u8; 60];
        let mut n = 0u64;
        // Past the root and a few appends into the current rightmost leaf.
        while n < 200 || store.append_hints().get(t.root()).is_none() {
            t.put(&(n * 100).to_be_bytes(), &value)?;
            n += 1;
        }
        let hint = store.append_hints().get(t.root()).expect("a hint");
        assert_ne!(hint.leaf, t.root());
        let epoch = store.pool().tree_epoch();
        // Fill the hinted leaf from inside its range until it splits.
        let mut k = (n - 1) * 100 - 1;
        while store.pool().tree_epoch() == epoch {
            t.put(&k.to_be_bytes(), &value)?;
            k -= 1;
        }
        let last_in_old = last_key(&t, hint.leaf)?;
        assert!(
            last_in_old < ((n - 1) * 100).to_be_bytes().to_vec(),
            "the old leaf kept the lower half"
        );
        // Above the old leaf's last key and below the new half's keys.
        let key = u64::from_be_bytes(last_in_old.try_into().expect("8 bytes")) + 1;
        t.put(&key.to_be_bytes(), &value)?;
        t.put(&(n * 100).to_be_bytes(), &value)?;
        let check = t.verify()?;
        assert_eq!(check.entries, n + ((n - 1) * 100 - 1 - k) + 2);
        store.close()
    }

    /// A hint that fails its checks (a key below the leaf's last one) is
    /// forgotten, so a tree written in random order does not latch its
    /// rightmost leaf on every insert; the next append sets it again.
    #[test]
    fn a_hint_that_does_not_fit_is_forgotten() -> Result<()> {
        let (store, root) = store_and_tree(12)?;
        let t = Tree::open(&store, root);
        for i in (0..600u64).map(|i| i * 2) {
            t.put(&i.to_be_bytes(), &[1u8; 50])?;
        }
        assert!(store.append_hints().get(t.root()).is_some());
        t.put(&5u64.to_be_bytes(), b"x")?;
        assert_eq!(store.append_hints().get(t.root()), None);
        t.put(&2_000u64.to_be_bytes(), b"y")?;
        assert!(store.append_hints().get(t.root()).is_some());
        assert_eq!(t.verify()?.entries, 602);
        store.close()
    }
}
