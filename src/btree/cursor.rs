//! Range scans. A cursor reads one leaf at a time under a shared latch,
//! copies entries in range into a batch, and releases the latch; the next
//! batch descends again from the root, starting after the batch's last key
//! (or at the leaf's fence, the separator that bounded it, when the batch
//! took the rest of the leaf), so no latch is held between calls and no
//! sibling pointer is ever followed (see the deadlock argument in the
//! module above). Each batch is a consistent state of part of one leaf; a
//! leaf may be read in several batches, and the scan as a whole sees
//! concurrent changes the way a reader without a snapshot does
//! (transaction snapshots come from the layer above).
//!
//! A batch is one buffer, read in place by [`Cursor::next_entry`] (no
//! allocation per entry; the `Iterator` implementation copies each entry
//! out for callers that keep them): the entries' keys and values back to
//! back, or, when the batch takes the rest of a leaf and at least half of
//! it, a copy of the leaf's page in which the entries are found where
//! they lie (C3), so a long scan copies a page per leaf, not each row.
//! The first batch stops after [`FIRST_BATCH`] entries and each
//! later one after four times as many, unless at most twice that many
//! are left in the leaf (then it takes them: a descent costs more than
//! copying a few dozen entries): a scan that stops after a few rows (a
//! `LIMIT 10`) copies a few entries, not a leaf, and a long scan soon
//! copies whole leaves per descent.
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
//! * C2. A batch's entry offsets lie within its buffer: `push` records
//!   them as it appends (and `take` within the page it appended, C3),
//!   and the buffer and the offsets are only cleared together.
//! * C3. A visit that takes the rest of a leaf's entries in range, at
//!   least half of them and a quarter of the page's bytes, appends the
//!   leaf's page whole to the buffer, and records each inline entry where
//!   that copy holds it: the copy's start plus the offset
//!   `LeafView::cell_at_offset` checked within the page (asserted in
//!   debug builds). Values in overflow pages are appended after the
//!   copy. So a long scan copies a page per leaf, not each entry.
//!
//! **Read-ahead.** A long scan asks the store to read the leaves it will
//! need next into the pool in the background (`store::read_ahead`). A
//! scan is taken for long once it has read a leaf to its end, or from its
//! first descent when it is bounded where it goes and has neither an
//! `expect` hint nor a batch limit (read to its end, it reads every leaf
//! up to that bound). Each of its descents then asks, at the leaf's
//! parent, for the next [`READ_AHEAD_LEAVES`] children in scan order
//! (fewer in a small pool), topping the window up when at most half of it
//! is left: a scan over leaves that are not cached then rarely waits for
//! a read. Only children whose key range meets the scan's are asked for,
//! and under an [`Cursor::expect`] hint only as many leaves past the one
//! descended to as the expected entries fill. A window that reaches the
//! parent's last child goes on under the next parent under the same
//! grandparent (found by the descent): once the descent's latches are
//! released, the scan reads that parent (which it reads anyway if it
//! gets there) and asks for the rest of the window from its first
//! children, so the first leaf under a parent is not read on demand
//! (but at a grandparent's end, and on a thread that must not wait when
//! the parent is not cached). The requests are hints (the store's RA2):
//! planning them reads only the parents the scan is under or about to
//! be, a damaged cell or a parent that is no longer one stops the
//! planning and nothing else, and whether a page was read ahead changes
//! no entry the scan returns.

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

/// Entries after which the first batch of a scan stops, if more than
/// twice as many are left in its leaf; each later batch stops after four
/// times as many as the one before.
pub const FIRST_BATCH: usize = 16;

/// How many cells ahead of the one it copies a batch asks the CPU to load
/// (`LeafView::prefetch`).
const PREFETCH_AHEAD: usize = 4;

/// Leaves a long scan asks to have read ahead of the one it descends to
/// (see "Read-ahead" above), at most a sixteenth of the pool's frames:
/// 1 MiB of 16 KiB leaves, as InnoDB's linear read-ahead reads 64-page
/// extents. On the measured host a window of 64 keeps about four 128 KiB
/// reads in flight and a cold scan near the device's bandwidth; one of
/// 32 scanned 10-30% slower.
pub const READ_AHEAD_LEAVES: usize = 64;

/// An iterator over `(key, value)` pairs of a range.
#[derive(Debug)]
pub struct Cursor<'s> {
    tree: Tree<'s>,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    dir: Direction,
    /// The batch: its entries' keys and values back to back, or a copy of
    /// the leaf's page followed by the entries whose values were in
    /// overflow pages (C3).
    buf: Vec<u8>,
    /// Per entry of the batch: where its key starts, where its value
    /// starts (the key's end) and where the value ends, in `buf`.
    ents: Vec<(usize, usize, usize)>,
    /// One past the current entry of `ents` (0: none yet).
    pos: usize,
    done: bool,
    /// The most entries one batch copies (`batch_limit`).
    limit: usize,
    /// Entries after which the next batch stops (grows from `FIRST_BATCH`).
    want: usize,
    /// Entries the caller still expects to read (`expect`; `usize::MAX`
    /// without a hint or once that many were copied): a batch stops there.
    expected: usize,
    /// Leaves read to their end so far (read-ahead starts after one).
    leaves_done: u32,
    /// Entries of the last leaf read to its end (sizes the read-ahead
    /// window under an `expect` hint).
    per_leaf: usize,
    /// Read-ahead asked for so far: the leaves' parent and, forward, the
    /// first child index not asked for; backward, the lowest one asked
    /// for.
    ahead: Option<(PageId, usize)>,
    /// The pages of one read-ahead request (reused).
    ahead_ids: Vec<PageId>,
    /// The parent after the one this descent goes through, in scan
    /// order, under the same grandparent (found at level 2; `None` in a
    /// tree of two levels, at the grandparent's end, or past the range).
    next_parent: Option<PageId>,
    /// Read-ahead asked for under a parent the scan has not reached yet:
    /// the parent and how many of its first children in scan order.
    ahead_next: Option<(PageId, usize)>,
    /// Read-ahead to ask for under the next parent once the descent's
    /// latches are released: its children `from..to` in scan order.
    cross: Option<(PageId, usize, usize)>,
    /// A next parent `cross_to` could not use (not readable now, or no
    /// longer a parent): not tried again, so a damaged page costs one
    /// read, not one per descent.
    cross_failed: Option<PageId>,
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

/// Whether some key below `upper` may lie in a range starting at `lo`.
fn above_lo_strict(lo: &Bound<Vec<u8>>, upper: &[u8]) -> bool {
    match lo {
        Bound::Unbounded => true,
        Bound::Included(l) | Bound::Excluded(l) => l.as_slice() < upper,
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
            buf: Vec::new(),
            ents: Vec::new(),
            pos: 0,
            done: false,
            limit: usize::MAX,
            want: FIRST_BATCH,
            expected: usize::MAX,
            leaves_done: 0,
            per_leaf: 0,
            ahead: None,
            ahead_ids: Vec::new(),
            next_parent: None,
            ahead_next: None,
            cross: None,
            cross_failed: None,
        }
    }

    /// The next entry, read in place from the cursor's batch: no copy and
    /// no allocation per entry. `None` at the end of the range; after an
    /// error the scan ends.
    pub fn next_entry(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        match self.advance()? {
            Ok(()) => self.current().map(Ok),
            Err(e) => Some(Err(e)),
        }
    }

    /// Move to the next entry ([`Self::current`] then returns it). `None`
    /// at the end of the range; after an error the scan ends.
    pub fn advance(&mut self) -> Option<Result<()>> {
        self.pos += 1;
        while self.pos > self.ents.len() {
            if self.done {
                self.pos = self.ents.len() + 1; // past the end: no current entry
                return None;
            }
            self.buf.clear();
            self.ents.clear();
            self.pos = 1;
            if self.buf.capacity() == 0 {
                self.buf.reserve(self.tree.store.pool().page_size());
            }
            let filled = self.fill();
            if filled.is_ok()
                && let Some((parent, from, to)) = self.cross.take()
            {
                self.cross_to(parent, from, to);
            }
            if self.expected != usize::MAX {
                // The hint is used up once that many entries were copied;
                // more batches start small again.
                self.expected = self.expected.saturating_sub(self.ents.len());
                if self.expected == 0 {
                    self.expected = usize::MAX;
                    self.want = FIRST_BATCH;
                }
            }
            if let Err(e) = filled {
                self.done = true;
                self.buf.clear();
                self.ents.clear();
                self.pos = 0;
                return Some(Err(e));
            }
        }
        Some(Ok(()))
    }

    /// The entry [`Self::advance`] moved to, in place in the batch; `None`
    /// before the first `advance` and after the end.
    pub fn current(&self) -> Option<(&[u8], &[u8])> {
        let &(k, v, e) = self.pos.checked_sub(1).and_then(|i| self.ents.get(i))?;
        // C2: offsets `push` recorded within `buf`.
        #[allow(clippy::indexing_slicing)]
        Some((&self.buf[k..v], &self.buf[v..e]))
    }

    /// Copy one entry into the batch.
    fn push(&mut self, key: &[u8], value: node::LeafValue<'_>) -> Result<()> {
        let k = self.buf.len();
        self.buf.extend_from_slice(key);
        let v = self.buf.len();
        match value {
            node::LeafValue::Inline(b) => self.buf.extend_from_slice(b),
            node::LeafValue::Overflow { len, first_page } => {
                let b = super::overflow::read(self.tree.store.pool(), first_page, len)?;
                self.buf.extend_from_slice(&b);
            }
        }
        self.ents.push((k, v, self.buf.len()));
        Ok(())
    }

    /// Whether this visit copies the whole leaf `page` into the batch
    /// (C3) rather than entry by entry, and if so where in the buffer the
    /// copy starts: when the batch takes all `in_range` entries the scan
    /// wants from it (`stops(t)`: it would stop after taking `t`), they
    /// are at least half of its entries, and they hold at least a quarter
    /// of the page's bytes (as the leaf's cells do on average). Then one
    /// copy of the page costs less than copying each entry; a batch that
    /// takes a few entries (a `LIMIT`, a lookup) or a leaf that is mostly
    /// free space still copies only the entries. `in_range` is `None`
    /// when the far bound's search failed: then the entries are copied,
    /// and the walk reports the damage if it reaches it.
    fn copies_leaf(
        &mut self,
        page: &[u8],
        leaf: &node::LeafView<'_>,
        in_range: Option<usize>,
        stops: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let (n, in_range) = (leaf.nslots(), in_range?);
        // The in-range entries' share of the cell bytes, as a share of
        // the page.
        let bytes = leaf.cell_bytes().saturating_mul(in_range) / n.max(1);
        if in_range == 0
            || in_range * 2 < n
            || bytes.saturating_mul(4) < page.len()
            || (1..in_range).any(stops)
        {
            return None;
        }
        let base = self.buf.len();
        self.buf.extend_from_slice(page);
        Some(base)
    }

    /// Take one entry of the leaf into the batch, its key at `at` in the
    /// page: with the page copied whole at `base` (`copy`), an inline
    /// entry is recorded where the copy holds it; otherwise (or for a
    /// value in overflow pages) it is copied.
    #[inline]
    fn take(&mut self, copy: Option<usize>, c: node::LeafCell<'_>, at: usize) -> Result<()> {
        match (copy, c.value) {
            (Some(base), node::LeafValue::Inline(b)) => {
                let k = base + at;
                let v = k + c.key.len();
                debug_assert!(
                    self.buf.get(k..v) == Some(c.key) && self.buf.get(v..v + b.len()) == Some(b),
                    "cursor C3: the entry is not where the copy holds it"
                );
                self.ents.push((k, v, v + b.len()));
                Ok(())
            }
            (_, value) => self.push(c.key, value),
        }
    }

    /// Copy at most `n` entries per leaf visit (at least 1): for callers
    /// that want only the first few entries of a range, so a visit does
    /// not copy the rest of the leaf.
    pub fn batch_limit(mut self, n: usize) -> Self {
        self.limit = n.max(1);
        self
    }

    /// The caller expects to read about `n` entries (a `LIMIT`): batches
    /// take up to the rest of a leaf until `n` entries are copied and
    /// stop there, so a scan that takes `n` rows descends once per leaf
    /// it reads and copies no entry past the `n`th. Only a hint: asked
    /// for more, the scan goes on, in batches that start at
    /// `FIRST_BATCH` (16) again.
    pub fn expect(mut self, n: usize) -> Self {
        debug_assert!(
            self.ents.is_empty() && self.pos == 0,
            "Cursor::expect after the scan began"
        );
        // `usize::MAX` means "no hint" in `expected`.
        self.expected = n.clamp(1, usize::MAX - 1);
        self.want = usize::MAX;
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

    /// The scan read a leaf of `n` entries to its end and goes on.
    fn leaf_done(&mut self, n: usize) {
        self.leaves_done = self.leaves_done.saturating_add(1);
        self.per_leaf = n;
    }

    /// Whether this descent asks for read-ahead: once a leaf was read to
    /// its end, or from the first descent when the scan is bounded where
    /// it goes and has neither an `expect` hint nor a batch limit (it
    /// reads every leaf up to that bound, if it is read to its end; a
    /// lookup of one entry sets a limit of one).
    fn plans_read_ahead(&self) -> bool {
        let far = match self.dir {
            Direction::Forward => &self.hi,
            Direction::Backward => &self.lo,
        };
        self.leaves_done > 0
            || (self.expected == usize::MAX
                && self.limit == usize::MAX
                && !matches!(far, Bound::Unbounded))
    }

    /// At `parent` (page `pid`, latched shared by the descent), which
    /// leads to the leaf at child `i` of its `n`: ask for the next leaves
    /// in scan order to be read ahead (see "Read-ahead" above), unless
    /// more than half the window is asked for already. A window that
    /// runs past the parent's last child goes on under the next parent
    /// (`cross_to`, once the latches are released).
    fn read_ahead(&mut self, parent: &[u8], pid: PageId, i: usize, n: usize) {
        // Never more than a sixteenth of the pool per scan, so that pages
        // read ahead are still there when the scan comes to them.
        let most = READ_AHEAD_LEAVES.min(self.tree.store.pool().frames() / 16);
        let window = if self.expected == usize::MAX {
            most
        } else {
            // The leaf descended to holds about `per_leaf` of them.
            (self.expected.saturating_sub(1) / self.per_leaf.max(1)).min(most)
        };
        self.ahead_ids.clear();
        if window == 0 {
            return;
        }
        let forward = self.dir == Direction::Forward;
        // Arriving under the parent a window crossed into: what was asked
        // there counts.
        if let Some((p, k)) = self.ahead_next
            && p == pid
            && self.ahead.is_none_or(|(q, _)| q != pid)
        {
            self.ahead = Some((pid, if forward { k } else { n.saturating_sub(k) }));
            self.ahead_next = None;
        }
        // Asked for under the next parent already.
        let next_asked = match (self.next_parent, self.ahead_next) {
            (Some(np), Some((p, k))) if p == np => k,
            _ => 0,
        };
        if forward {
            let start = match self.ahead {
                Some((p, next)) if p == pid && next > i + 1 => next,
                _ => i + 1,
            };
            let asked = start - (i + 1) + if start >= n { next_asked } else { 0 };
            if asked > window / 2 {
                return;
            }
            for j in start..(i + 1 + window).min(n) {
                match self.child_in_range(parent, j, n) {
                    Some(c) => self.ahead_ids.push(c),
                    None => break,
                }
            }
            let end = start + self.ahead_ids.len();
            self.ahead = Some((pid, end));
            self.plan_cross(end >= n, (i + 1 + window).saturating_sub(n), next_asked);
        } else {
            let start = match self.ahead {
                Some((p, low)) if p == pid && low < i => low,
                _ => i,
            };
            let asked = i - start + if start == 0 { next_asked } else { 0 };
            if asked > window / 2 {
                return;
            }
            for j in (i.saturating_sub(window)..start).rev() {
                match self.child_in_range(parent, j, n) {
                    Some(c) => self.ahead_ids.push(c),
                    None => break,
                }
            }
            let low = start - self.ahead_ids.len();
            self.ahead = Some((pid, low));
            self.plan_cross(low == 0, window.saturating_sub(i), next_asked);
        }
        if !self.ahead_ids.is_empty() {
            self.tree.store.read_ahead(&self.ahead_ids);
        }
    }

    /// Child `j` of `parent` (a node of `n` children), if some of its
    /// keys may be in the scan's range on the side the scan goes to:
    /// forward, child `j` holds the keys from its separator on (the first
    /// child's lower bound is not in the node: the caller found it in
    /// range); backward, the keys below the next separator (the last
    /// child's upper bound likewise). `None` also for a damaged cell.
    fn child_in_range(&self, parent: &[u8], j: usize, n: usize) -> Option<PageId> {
        let in_range = match self.dir {
            Direction::Forward => {
                j == 0 || matches!(node::key(parent, j), Ok(sep) if below_hi(&self.hi, sep))
            }
            Direction::Backward => {
                j + 1 == n
                    || matches!(node::key(parent, j + 1), Ok(upper) if above_lo_strict(&self.lo, upper))
            }
        };
        node::child(parent, j).ok().filter(|_| in_range).map(PageId)
    }

    /// A window that `reached_end` of its parent (asked up to the last
    /// child in scan order, each in range) and wants `want` leaves under
    /// the next parent, of which `next_asked` were asked for: plan the
    /// rest for `cross_to`, if there is a next parent it may still use.
    fn plan_cross(&mut self, reached_end: bool, want: usize, next_asked: usize) {
        if reached_end
            && want > next_asked
            && let Some(np) = self.next_parent
            && self.cross_failed != Some(np)
        {
            self.cross = Some((np, next_asked, want));
        }
    }

    /// Ask for children `from..to` (in scan order) of `parent`, the
    /// parent after the one the scan is under, to be read ahead: a window
    /// that reached the end of one parent goes on under the next. Called
    /// with no latch held; only a hint (RA2): `parent` is read (the scan
    /// reads it when it gets there) and used only if it is still a node
    /// just above the leaves (it may have changed since the descent saw
    /// its id). If it cannot be used, nothing is asked for, it is not
    /// tried again, and any error is left to the descent, if it comes.
    /// A thread that must not wait (`wait`) uses it only if it is cached
    /// and not latched exclusively (a hint is not worth refusing the
    /// statement for, W1). Its first child in scan order was found in
    /// range at level 2 (its separator there); the others are checked
    /// against the range as in [`Cursor::read_ahead`].
    fn cross_to(&mut self, parent: PageId, from: usize, to: usize) {
        let pool = self.tree.store.pool();
        let page = if crate::wait::may_wait() {
            pool.fetch_read(parent).ok()
        } else if pool.is_cached(parent) {
            // Try-latched: no wait, and no read if it was evicted
            // meanwhile.
            pool.try_fetch_read_cached(parent)
        } else {
            None
        };
        let Some(page) =
            page.filter(|p| self.tree.check_node(parent, p, None).is_ok() && node::level(p) == 1)
        else {
            self.cross_failed = Some(parent);
            return;
        };
        let n = node::nslots(&page);
        self.ahead_ids.clear();
        for k in from..to.min(n) {
            let j = match self.dir {
                Direction::Forward => k,
                Direction::Backward => n - 1 - k,
            };
            match self.child_in_range(&page, j, n) {
                Some(c) => self.ahead_ids.push(c),
                None => break,
            }
        }
        drop(page);
        self.ahead_next = Some((parent, from + self.ahead_ids.len()));
        if !self.ahead_ids.is_empty() {
            self.tree.store.read_ahead(&self.ahead_ids);
        }
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
            self.next_parent = None;
            self.cross = None;
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
                if level == 2 && self.plans_read_ahead() {
                    // The next parent, if any of its keys is in range:
                    // forward, child `i + 1` (keys from `fence` on);
                    // backward, child `i - 1` (keys below `fence`).
                    let next = if forward { i + 1 } else { i.wrapping_sub(1) };
                    let in_range = fence.as_deref().is_some_and(|f| {
                        if forward {
                            below_hi(&self.hi, f)
                        } else {
                            above_lo_strict(&self.lo, f)
                        }
                    });
                    self.next_parent = if in_range && next < n {
                        node::child(&cur, next).ok().map(PageId)
                    } else {
                        None
                    };
                }
                if level == 1 && self.plans_read_ahead() {
                    self.read_ahead(&cur, id, i, n);
                }
                let Some(next) = t.step_read(cur, child, level - 1, &mut tries)? else {
                    continue 'descent; // BT5
                };
                cur = next;
            }
            break (cur, fence);
        };
        let id = cur.id();
        let leaf = node::LeafView::new(&cur).map_err(t.ne(id))?;
        let n = leaf.nslots();
        let want = self.want;
        self.want = want.saturating_mul(4);
        // Whether to stop the batch here with `left` entries of the leaf
        // still to read.
        let limit = self.limit;
        let expected = self.expected;
        let stop = move |taken: usize, left: usize| {
            left > 0
                && (taken >= limit
                    || taken >= expected
                    || (taken >= want && left > want.saturating_mul(2)))
        };
        // The first slot from `lo` on, and the first from `hi` up.
        let from_lo = |lo: &Bound<Vec<u8>>| -> std::result::Result<usize, node::NodeError> {
            Ok(match lo {
                Bound::Unbounded => 0,
                Bound::Included(k) => leaf.search(k)?.unwrap_or_else(|i| i),
                Bound::Excluded(k) => match leaf.search(k)? {
                    Ok(i) => i + 1,
                    Err(i) => i,
                },
            })
        };
        let below = |hi: &Bound<Vec<u8>>| -> std::result::Result<usize, node::NodeError> {
            Ok(match hi {
                Bound::Unbounded => n,
                Bound::Included(k) => match leaf.search(k)? {
                    Ok(i) => i + 1,
                    Err(i) => i,
                },
                Bound::Excluded(k) => leaf.search(k)?.unwrap_or_else(|i| i),
            })
        };
        if forward {
            let start = from_lo(&self.lo).map_err(t.ne(id))?;
            // Only to choose how to copy: a search the walk below would
            // not make fails nothing (the walk reports damage it meets).
            let in_range = below(&self.hi).ok().map(|e| e.saturating_sub(start));
            let copy = self.copies_leaf(&cur, &leaf, in_range, |t| stop(t, n - start - t));
            for j in start..n {
                if copy.is_none() {
                    leaf.prefetch(j + PREFETCH_AHEAD);
                }
                let (c, at) = leaf.cell_at_offset(j).map_err(t.ne(id))?;
                if !below_hi(&self.hi, c.key) {
                    self.done = true;
                    break;
                }
                self.take(copy, c, at)?;
                if stop(self.ents.len(), n - (j + 1)) {
                    return self.resume(id, Bound::Excluded(c.key.to_vec()));
                }
            }
            if !self.done {
                match fence {
                    Some(f) if below_hi(&self.hi, &f) => {
                        self.leaf_done(n);
                        self.resume(id, Bound::Included(f))?;
                    }
                    _ => self.done = true,
                }
            }
        } else {
            let end = below(&self.hi).map_err(t.ne(id))?;
            let in_range = from_lo(&self.lo).ok().map(|s| end.saturating_sub(s));
            let copy = self.copies_leaf(&cur, &leaf, in_range, |t| stop(t, end - t));
            for j in (0..end).rev() {
                if copy.is_none()
                    && let Some(ahead) = j.checked_sub(PREFETCH_AHEAD)
                {
                    leaf.prefetch(ahead);
                }
                let (c, at) = leaf.cell_at_offset(j).map_err(t.ne(id))?;
                if !above_lo(&self.lo, c.key) {
                    self.done = true;
                    break;
                }
                self.take(copy, c, at)?;
                if stop(self.ents.len(), j) {
                    return self.resume(id, Bound::Excluded(c.key.to_vec()));
                }
            }
            if !self.done {
                // Keys below the fence remain; some may be in range.
                match fence {
                    Some(f) if above_lo_strict(&self.lo, &f) => {
                        self.leaf_done(n);
                        self.resume(id, Bound::Excluded(f))?;
                    }
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
        self.next_entry()
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
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

    /// A scan's first batch stops after `FIRST_BATCH` entries and each
    /// later one after four times more (unless little of the leaf is
    /// left), and the scan reads in place exactly the tree's entries, in
    /// order, in both directions.
    #[test]
    fn batches_start_small_and_grow() {
        let store =
            Store::create(Arc::new(SimFs::new(2)), Path::new("/db"), test_options()).unwrap();
        let tree = Tree::create(&store).unwrap();
        let n = 3000;
        let key = |i: usize| format!("key-{i:05}").into_bytes();
        // Out of order, so leaves are not filled by sequential splits only.
        for i in (0..n).step_by(2).chain((1..n).step_by(2)) {
            tree.put(&key(i), &[7u8; 12]).unwrap();
        }
        for dir in [Direction::Forward, Direction::Backward] {
            let mut c = tree.range(Unbounded, Unbounded, dir);
            let mut sizes = Vec::new();
            let mut keys = Vec::new();
            while let Some(e) = c.next_entry() {
                let (k, v) = e.unwrap();
                assert_eq!(v, &[7u8; 12]);
                keys.push(k.to_vec());
                if c.pos == 1 {
                    sizes.push(c.ents.len());
                }
            }
            assert!(c.next_entry().is_none() && c.current().is_none());
            let mut want: Vec<Vec<u8>> = (0..n).map(key).collect();
            if dir == Direction::Backward {
                want.reverse();
            }
            assert_eq!(keys, want, "{dir:?}");
            assert_eq!(sizes.iter().sum::<usize>(), n);
            // A batch stops at its cap unless at most twice the cap is
            // left in the leaf.
            let mut cap = FIRST_BATCH;
            for (b, &size) in sizes.iter().enumerate() {
                assert!(
                    size <= cap.saturating_mul(3),
                    "{dir:?}: batch {b} of {size}: {sizes:?}"
                );
                cap = cap.saturating_mul(4);
            }
            if dir == Direction::Forward {
                assert_eq!(sizes[0], FIRST_BATCH, "the first leaf is full: {sizes:?}");
            }
            assert!(sizes.iter().any(|&s| s > FIRST_BATCH), "{dir:?}: {sizes:?}");
        }
    }

    /// With `expect(n)`, reading `n` entries copies exactly `n` (batches
    /// end at leaf ends or at the `n`th), and reading on after them
    /// starts small again; the entries are the tree's, in order, both
    /// ways.
    #[test]
    fn an_expected_count_is_copied_and_no_more() {
        let store =
            Store::create(Arc::new(SimFs::new(3)), Path::new("/db"), test_options()).unwrap();
        let tree = Tree::create(&store).unwrap();
        let n = 3000;
        let key = |i: usize| format!("key-{i:05}").into_bytes();
        for i in 0..n {
            tree.put(&key(i), &[3u8; 40]).unwrap();
        }
        for dir in [Direction::Forward, Direction::Backward] {
            for expect in [1, 7, 100, 250] {
                let mut c = tree.range(Unbounded, Unbounded, dir).expect(expect);
                let mut sizes = Vec::new();
                let mut keys = Vec::new();
                while let Some(e) = c.next_entry() {
                    let (k, v) = e.unwrap();
                    assert_eq!(v, &[3u8; 40]);
                    keys.push(k.to_vec());
                    if c.pos == 1 {
                        sizes.push(c.ents.len());
                    }
                    if keys.len() == expect {
                        let copied: usize = sizes.iter().sum();
                        assert_eq!(copied, expect, "{dir:?} expect {expect}: {sizes:?}");
                    }
                }
                let mut want: Vec<Vec<u8>> = (0..n).map(key).collect();
                if dir == Direction::Backward {
                    want.reverse();
                }
                assert_eq!(keys, want, "{dir:?} expect {expect}");
                // The first batch after the expected ones starts small.
                let mut copied = 0;
                let after = sizes.iter().position(|&s| {
                    copied += s;
                    copied > expect
                });
                let after = after.expect("more batches after the expected entries");
                assert!(
                    sizes[after] <= 3 * FIRST_BATCH,
                    "{dir:?} expect {expect}: {sizes:?}"
                );
            }
        }
    }

    /// C3: a visit that takes a leaf's entries to its end copies the
    /// page once (the batch's buffer holds the page and only the values
    /// in overflow pages after it), one that takes a few (a batch limit)
    /// copies only those; both read the tree's entries, inline and in
    /// overflow pages, in order, both ways and within bounds.
    #[test]
    fn a_leaf_read_to_its_end_is_copied_once() {
        use std::ops::RangeBounds;
        let store =
            Store::create(Arc::new(SimFs::new(4)), Path::new("/db"), test_options()).unwrap();
        let page = store.pool().page_size();
        let tree = Tree::create(&store).unwrap();
        let key = |i: usize| format!("key-{i:04}").into_bytes();
        // Every tenth value is too long to stay in its cell.
        let value = |i: usize| vec![i as u8; if i % 10 == 3 { page } else { 30 }];
        let n = 2000;
        for i in 0..n {
            tree.put(&key(i), &value(i)).unwrap();
        }
        let bounds = [
            (Unbounded, Unbounded),
            (Bound::Included(key(17)), Bound::Excluded(key(1500))),
            (Bound::Excluded(key(17)), Bound::Included(key(40))),
        ];
        for (lo, hi) in bounds {
            let (lo, hi) = (
                lo.as_ref().map(|k| k.as_slice()),
                hi.as_ref().map(|k| k.as_slice()),
            );
            for dir in [Direction::Forward, Direction::Backward] {
                for limit in [usize::MAX, 3] {
                    let mut c = tree.range(lo, hi, dir).batch_limit(limit);
                    let mut got = Vec::new();
                    let mut whole = 0;
                    while let Some(e) = c.next_entry() {
                        let (k, v) = e.unwrap();
                        got.push((k.to_vec(), v.to_vec()));
                        if c.pos == 1 {
                            // Copied entry by entry, the buffer is the
                            // entries; copied whole, it is the page and
                            // then the entries with values in overflow
                            // pages.
                            let all: usize = c.ents.iter().map(|&(k, _, e)| e - k).sum();
                            if c.buf.len() != all {
                                whole += 1;
                                let after: usize = c
                                    .ents
                                    .iter()
                                    .filter(|&&(k, _, _)| k >= page)
                                    .map(|&(k, _, e)| e - k)
                                    .sum();
                                assert_eq!(c.buf.len(), page + after, "{dir:?}");
                            }
                        }
                    }
                    let mut want: Vec<_> = (0..n)
                        .map(|i| (key(i), value(i)))
                        .filter(|(k, _)| RangeBounds::contains(&(lo, hi), &k.as_slice()))
                        .collect();
                    if dir == Direction::Backward {
                        want.reverse();
                    }
                    assert!(got == want, "{dir:?} {lo:?}..{hi:?} limit {limit}");
                    if limit == usize::MAX && want.len() > 100 {
                        assert!(whole > 0, "{dir:?}: no leaf was copied whole");
                    } else if limit == 3 {
                        assert_eq!(whole, 0, "{dir:?}: a batch of 3 copied its leaf");
                    }
                }
            }
        }
        // A scan expecting a few entries copies those: its first batch
        // is the entries, not the page.
        for dir in [Direction::Forward, Direction::Backward] {
            let mut c = tree.range(Unbounded, Unbounded, dir).expect(7);
            c.next_entry().unwrap().unwrap();
            let copied: usize = c.ents.iter().map(|&(k, _, e)| e - k).sum();
            assert_eq!((c.ents.len(), c.buf.len()), (7, copied), "{dir:?}");
        }
        // A leaf that is mostly free space is not copied whole: a tree of
        // one small entry.
        let small = Tree::create(&store).unwrap();
        small.put(b"k", b"v").unwrap();
        let mut c = small.range(Unbounded, Unbounded, Direction::Forward);
        assert_eq!(c.next_entry().unwrap().unwrap(), (&b"k"[..], &b"v"[..]));
        assert_eq!(c.buf.len(), 2);
    }

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
