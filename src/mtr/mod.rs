//! Mini-transactions: the unit of atomic, logged page change.
//!
//! A mini-transaction (mtr) latches the pages it changes exclusively,
//! applies each change to the page *and* appends its redo description to a
//! private buffer, then commits: the whole buffer becomes one log record,
//! so recovery replays all of an mtr or none of it (the log hands only
//! complete records to recovery).
//!
//! Redo records are **physiological**: each names one page and a logical
//! operation on it (insert this cell at this slot, delete slot 3, ...),
//! applied by the same function ([`redo::apply`]) in normal operation and
//! in recovery. Reasons: a B+tree insert into the middle of a slotted page
//! shifts the slot array, which a physical (byte-range) record would have
//! to log whole, while the logical record is the cell plus a slot number;
//! and one function for do and redo cannot drift apart. Pages built whole
//! (the new half of a split, a collapsed root) are logged as one page
//! image, which is as small as the sum of their cells.
//!
//! Invariants:
//! * M1. Every page an mtr changed stays exclusively latched until its log
//!   record is appended and the page LSN is set to the record's end LSN,
//!   so no page image on disk ever holds part of an mtr, and page LSNs
//!   order changes (page P3).
//! * M2. At commit, the pages are marked dirty with `lb`, the log's end
//!   LSN read *before* the record's LSN is reserved (`lb` <= the record's
//!   start), and only then is the record appended. A checkpoint takes
//!   the durable LSN first and the flush list's minimum second, so it
//!   never passes a change whose page is not yet on disk (buffer B4).
//! * M3. Recovery applies a record's operations to a page only if the
//!   page's LSN is below the record's end LSN, decided once per page per
//!   record; a page that fails its checksum may be rebuilt only by a
//!   record whose first operation on it initialises it whole.
//! * M4. An mtr latches and reads what it needs before its first change
//!   where it can; a split cascade allocates (and may read the free-list
//!   head) after changing the level below. An mtr that fails after a
//!   change is dropped with unlogged changes in memory, so the drop
//!   poisons the buffer pool: no page is written again, every later
//!   operation fails, and reopening recovers the state before that mtr.
//! * M5. A changed page stays held: [`Mtr::release`] refuses a modified
//!   page, so at commit every modified entry still has its latch, and is
//!   marked dirty and stamped (a modified entry without its page would
//!   be a change that is never flushed: asserted, not skipped).
//! * M6. The record's end LSN is above `lb` (M2) and becomes the page
//!   LSN of every page the mtr changed, which never goes down (page P3).

pub mod redo;

use std::cell::Cell;
use std::collections::HashMap;

use smallvec::SmallVec;

use crate::buffer::{BufferPool, Load, PageWrite};
use crate::log::{Log, Lsn};
use crate::page::{self, PageId};
use crate::{Error, Result};

pub use redo::Op;

/// Log record type of a mini-transaction (the log's caller tag).
pub const RTYPE_MTR: u8 = 1;

/// Pages an mtr holds without allocating: a row write latches a leaf,
/// and an undo append a page or two; a split holds a few more.
const INLINE_HELD: usize = 4;

/// The largest redo buffer a thread keeps for its next mtr; a bigger one
/// (a bulk build's page images) is freed.
const SPARE_REDO_MAX: usize = 64 << 10;

thread_local! {
    /// This thread's redo buffer between mtrs: an mtr takes it when it
    /// starts and gives it back, empty, when it ends, so most mtrs do not
    /// allocate (and grow) a redo buffer of their own. An mtr that starts
    /// while another of its thread is open finds the slot empty and
    /// allocates as it would without it.
    static SPARE_REDO: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Handle of a page latched by an [`Mtr`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHandle(usize);

#[derive(Debug)]
struct Held<'a> {
    page: Option<PageWrite<'a>>,
    modified: bool,
}

/// A mini-transaction in progress. Dropping it without [`Mtr::commit`]
/// is only allowed if nothing was changed (it returns an error otherwise
/// at commit time; changed pages must never be released unlogged).
#[derive(Debug)]
pub struct Mtr<'a> {
    pool: &'a BufferPool,
    log: &'a Log,
    space_id: u64,
    held: SmallVec<[Held<'a>; INLINE_HELD]>,
    /// Taken from [`SPARE_REDO`] (empty) and given back by `Drop`.
    redo: Vec<u8>,
    /// From the first change to commit: this thread may wait (wait W2).
    may_wait: Option<crate::wait::MayWait>,
}

impl<'a> Mtr<'a> {
    /// Start a mini-transaction over `pool`, logging to `log`.
    pub fn new(pool: &'a BufferPool, log: &'a Log) -> Self {
        Mtr {
            pool,
            log,
            space_id: pool.file().space_id(),
            held: SmallVec::new(),
            redo: SPARE_REDO.try_with(Cell::take).unwrap_or_default(),
            may_wait: None,
        }
    }

    /// The buffer pool.
    pub fn pool(&self) -> &'a BufferPool {
        self.pool
    }

    /// Latch page `id` exclusively for this mtr (or return the handle it
    /// already has).
    pub fn latch(&mut self, id: PageId, how: Load) -> Result<PageHandle> {
        if let Some(h) = self.handle_of(id) {
            return Ok(h);
        }
        let w = self.pool.fetch_write(id, how)?;
        Ok(self.adopt(w))
    }

    /// Take over a page the caller latched exclusively.
    pub fn adopt(&mut self, w: PageWrite<'a>) -> PageHandle {
        self.held.push(Held {
            page: Some(w),
            modified: false,
        });
        PageHandle(self.held.len() - 1)
    }

    /// The handle of `id` if this mtr holds it (an mtr holds a handful of
    /// pages, so a scan beats a map it would have to allocate).
    pub fn handle_of(&self, id: PageId) -> Option<PageHandle> {
        self.held
            .iter()
            .position(|h| h.page.as_ref().is_some_and(|p| p.id() == id))
            .map(PageHandle)
    }

    fn held(&self, h: PageHandle) -> Result<&PageWrite<'a>> {
        self.held
            .get(h.0)
            .and_then(|x| x.page.as_ref())
            .ok_or_else(released)
    }

    /// The page's bytes.
    pub fn page(&self, h: PageHandle) -> Result<&[u8]> {
        Ok(&**self.held(h)?)
    }

    /// The page's id.
    pub fn id(&self, h: PageHandle) -> Result<PageId> {
        Ok(self.held(h)?.id())
    }

    /// Apply `op` to the page and log it.
    pub fn apply(&mut self, h: PageHandle, op: &Op<'_>) -> Result<()> {
        let space = self.space_id;
        let held = self.held.get_mut(h.0).ok_or_else(released)?;
        let page = held.page.as_mut().ok_or_else(released)?;
        let id = page.id();
        if self.may_wait.is_none() {
            // W2: from here on the mtr cannot be abandoned, so a page it
            // reads later is read, waiting, even on a no-wait thread.
            self.may_wait = Some(crate::wait::MayWait::new());
        }
        redo::apply(page, id, space, op)?;
        held.modified = true;
        redo::encode(&mut self.redo, id, op);
        Ok(())
    }

    /// Release a page this mtr did not change (latch coupling).
    pub fn release(&mut self, h: PageHandle) -> Result<()> {
        let held = self.held.get_mut(h.0).ok_or_else(released)?;
        if held.modified {
            return Err(Error::InvalidArgument {
                what: "mini-transaction release",
                reason: "a changed page must stay latched until commit (M1)".into(),
            });
        }
        held.page = None;
        Ok(())
    }

    /// Whether anything was changed.
    pub fn is_empty(&self) -> bool {
        self.redo.is_empty()
    }

    /// Bytes of redo collected so far.
    pub fn redo_len(&self) -> usize {
        self.redo.len()
    }

    /// Commit: one log record for everything (M1, M2). Returns the end
    /// LSN of the record (wait on it with [`Log::commit`] for durability),
    /// or `None` if nothing changed.
    pub fn commit(mut self) -> Result<Option<Lsn>> {
        if self.redo.is_empty() {
            return Ok(None);
        }
        let lb = self.log.end_lsn().0;
        for h in self.held.iter().filter(|h| h.modified) {
            p_of(h).mark_dirty(lb);
        }
        let end = self.log.append(RTYPE_MTR, &self.redo)?;
        // M2/M6: the record starts at or after `lb` and is not empty.
        assert!(end.0 > lb, "mtr M2: record end {} not above lb {lb}", end.0);
        for h in self.held.iter_mut().filter(|h| h.modified) {
            page::set_lsn(p_of_mut(h), end.0);
        }
        self.held.clear();
        self.redo.clear();
        self.may_wait = None;
        Ok(Some(end))
    }
}

impl Drop for Mtr<'_> {
    fn drop(&mut self) {
        // M4: an mtr makes every fallible read before its first change; if
        // it is dropped with changes anyway (a bug or a corrupt page found
        // half-way), its pages hold changes no log record describes, so
        // the pool refuses to write any page until the database reopens.
        if !self.redo.is_empty() && !self.held.is_empty() {
            self.pool
                .poison("a mini-transaction was abandoned after changing pages");
        }
        let mut redo = std::mem::take(&mut self.redo);
        if redo.capacity() > 0 && redo.capacity() <= SPARE_REDO_MAX {
            redo.clear();
            // At thread exit the slot may be gone: the buffer is freed.
            let _ = SPARE_REDO.try_with(|spare| spare.set(redo));
        }
    }
}

/// The page of a modified entry (M5: a modified page is never released).
#[track_caller]
fn p_of<'h, 'a>(h: &'h Held<'a>) -> &'h PageWrite<'a> {
    match &h.page {
        Some(p) => p,
        None => m5_broken(),
    }
}

/// [`p_of`], mutably.
#[track_caller]
fn p_of_mut<'h, 'a>(h: &'h mut Held<'a>) -> &'h mut PageWrite<'a> {
    match &mut h.page {
        Some(p) => p,
        None => m5_broken(),
    }
}

#[cold]
#[track_caller]
fn m5_broken() -> ! {
    #[allow(clippy::panic)] // `release` refuses modified pages
    {
        panic!("mtr M5: a modified page was released before commit")
    }
}

fn released() -> Error {
    Error::InvalidArgument {
        what: "page handle",
        reason: "the page is not latched by this mini-transaction".into(),
    }
}

/// Replay one mtr record (recovery, M3): `start` and `end` are the
/// record's LSNs. Returns the number of pages changed.
pub fn replay(pool: &BufferPool, start: Lsn, end: Lsn, payload: &[u8]) -> Result<u64> {
    let space = pool.file().space_id();
    let mut pages: HashMap<PageId, (PageWrite<'_>, bool)> = HashMap::new();
    for item in redo::decode(payload) {
        let (id, op) = item?;
        let (w, apply) = match pages.entry(id) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let mut w = pool.fetch_write(id, Load::AllowCorrupt)?;
                let apply = if w.was_corrupt() {
                    if !op.initialises() {
                        return Err(Error::CorruptPage {
                            file: pool.file().path().to_path_buf(),
                            page: id.0,
                            reason: "fails its checksum, is not in the doublewrite area, and the \
                                 log does not rebuild it"
                                .into(),
                        });
                    }
                    w.clear_corrupt();
                    true
                } else {
                    page::lsn(&w) < end.0
                };
                e.insert((w, apply))
            }
        };
        if *apply {
            redo::apply(w, id, space, &op)?;
        }
    }
    let mut changed = 0;
    for (id, (mut w, apply)) in pages {
        if apply {
            // M3: applied only below the record's end; the record ends a
            // span that no other record overlaps, so the page (if not
            // rebuilt from 0) was stamped at or before `start`.
            debug_assert!(
                page::lsn(&w) <= start.0,
                "mtr M3: {id} at LSN {} replayed from a record at {}..{}",
                page::lsn(&w),
                start.0,
                end.0
            );
            w.mark_dirty(start.0);
            page::set_lsn(&mut w, end.0);
            changed += 1;
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::io::SimFs;
    use crate::page::{PAGE_HEADER, PageType};
    use crate::store::{Store, alloc_page, test_options};

    /// A fresh page of type `Undo` (free-form bytes after its header).
    fn fresh_page(store: &Store) -> Result<PageId> {
        let mut mtr = store.mtr()?;
        let h = alloc_page(&mut mtr)?;
        mtr.apply(h, &Op::Init(PageType::Undo))?;
        let id = mtr.id(h)?;
        mtr.commit()?;
        Ok(id)
    }

    /// The redo bytes of `op` on `id` alone.
    fn redo_of(id: PageId, op: &Op<'_>) -> usize {
        let mut v = Vec::new();
        redo::encode(&mut v, id, op);
        v.len()
    }

    /// An mtr logs only its own changes: the thread's spare redo buffer
    /// comes back empty after a commit, and an mtr opened while another is
    /// open on the same thread gets a buffer of its own.
    #[test]
    fn an_mtr_logs_only_its_own_changes() -> Result<()> {
        let fs = Arc::new(SimFs::new(5));
        let store = Store::create(fs, Path::new("/db"), test_options())?;
        let (p, q) = (fresh_page(&store)?, fresh_page(&store)?);
        let first = Op::Write {
            offset: PAGE_HEADER as u32 + 8,
            bytes: b"the outer mtr's bytes",
        };
        let second = Op::Write {
            offset: PAGE_HEADER as u32 + 64,
            bytes: b"inner",
        };
        let mut outer = store.mtr()?;
        assert!(outer.is_empty(), "a committed mtr's redo was left behind");
        let h = outer.latch(p, Load::Verify)?;
        outer.apply(h, &first)?;
        let mut inner = store.mtr()?;
        assert!(inner.is_empty(), "a nested mtr shares its parent's redo");
        let g = inner.latch(q, Load::Verify)?;
        inner.apply(g, &second)?;
        assert_eq!(inner.redo_len(), redo_of(q, &second));
        inner.commit()?;
        assert_eq!(outer.redo_len(), redo_of(p, &first));
        outer.commit()?;
        let next = store.mtr()?;
        assert!(next.is_empty(), "the spare buffer came back with bytes");
        drop(next);
        // Both changes are on their pages.
        let page = store.pool().fetch_read(p)?;
        assert_eq!(&page[PAGE_HEADER + 8..][..21], b"the outer mtr's bytes");
        drop(page);
        let page = store.pool().fetch_read(q)?;
        assert_eq!(&page[PAGE_HEADER + 64..][..5], b"inner");
        Ok(())
    }
}
