//! Undo segments: a transaction's undo records are appended to a chain
//! of undo pages of its own, one redo operation per record, instead of
//! one undo B+tree insert each. This is InnoDB's insert and update undo.
//! Since tablespace format 5 a segment holds insert records, and its pages
//! are freed whole when the transaction ends; since format 7 it holds
//! update and delete-mark records too, and a segment that has any is
//! kept at commit for purge, which frees it whole (US7).
//!
//! Why insert records need so little: an insert's undo record serves
//! rollback alone. A version written by an insert carries a roll pointer
//! with the insert bit ([`RollPtr::insert`]): it had no previous version,
//! so a reader that does not see its writer knows the row did not exist
//! without reading undo, and purge has nothing to do for it. The records
//! need a place that survives a crash until their transaction ends, no
//! more. An update's or delete-mark's record is read by MVCC readers and
//! purge too: the version it replaced names it by place (undo U8), and
//! the segment lives until purge is done with it.
//!
//! Layout. Root slot [`UNDO_DIR_ROOT_SLOT`] names the directory's root
//! page; it lists [`DIR_PARTS`] partition pages, whose entries each name
//! the first page of one segment (0: free), or a cached page kept for
//! reuse (US6). Both are `UndoDir` pages:
//! `version u8 | kind u8 (0 root, 1 partition) | count u16 | count page
//! ids u64`. A segment is a chain of `Undo` pages: `version u8 | owner
//! u64 | next page u64 (0: last) | records`. The owner is the
//! transaction's id, with bit 63 ([`COMMITTED`], first page only) set
//! once the transaction committed with the segment kept for purge (US7);
//! transaction 0 marks a cached page, whose records mean nothing. Each
//! record is `length u16 (not 0) | an undo record` (`txn::undo`, of that
//! transaction); a zero length, or the end of the page, ends a page's
//! records (US8). Little-endian throughout; every page carries its checksum
//! (page P1).
//!
//! Invariants (recovery relies on each):
//! * US1. A directory entry is the only reference to a segment. It is set
//!   in the mini-transaction that allocates the segment's first page, and
//!   pages leave a segment only in a mini-transaction that frees them and
//!   moves the entry past them (to the next page, or 0 after the last):
//!   after a crash every segment page is reachable from exactly one entry
//!   or free, never freed twice.
//! * US2. No two live transactions share an entry. The directory keeps
//!   in memory which entries are empty and which hold a cached page, one
//!   list of each per partition; a transaction takes an entry from them
//!   at its first record (its registry slot names the partition it tries
//!   first, so transactions spread over the partitions) and the entry
//!   goes back only after the mini-transaction that emptied it or cached
//!   its page committed, or when starting a segment in it failed having
//!   changed nothing (unless the entry or its page is damaged: then it
//!   stays out of the lists). Recovery frees every transaction's segment
//!   before any transaction begins.
//! * US3. A transaction with a segment, no commit mark and no
//!   [`COMMITTED`] bit never committed: recovery rolls it back with the
//!   segment's records and its undo-tree records together, newest first.
//!   A transaction whose segment holds an update or delete-mark record
//!   commits as US7 says. An insert-only transaction
//!   whose segment has at most [`UndoSegments::free_batch`] pages commits
//!   in one mini-transaction that ends its segment: it empties the entry
//!   and frees the pages, or (US6) caches the one page (the commit LSN
//!   is that one's; no mark, nothing for purge). Any other commits with
//!   its commit mark first (UL2) and ends its segment after.
//! * US4. UL1 holds for segment records: a record's append commits before
//!   the change it undoes.
//! * US5. A page read from a segment must be an `Undo` page of this
//!   version and transaction, and its records must decode (undo U3) as
//!   records of that transaction, with sequence numbers above 0 and below
//!   the segment bit (undo U8); anything else is reported as a corrupt
//!   page, never skipped. A chain that comes back to a page is corrupt
//!   too. The one exception is an MVCC reader following a roll pointer
//!   by place (undo U8): a page that is not its writer's any more means
//!   the writer rolled the change back, and the reader reads the record
//!   again ([`UndoSegments::read_at`]).
//! * US6. A cached segment is an entry naming a segment page of
//!   transaction 0: no records, no next page, nobody's undo. A
//!   transaction whose segment is one page ends it by writing 0 over the
//!   page's transaction, keeping page and entry, while its partition
//!   caches fewer than [`CACHE_PER_PART`] pages (a bound that concurrent
//!   ends may pass by one each); the next transaction to take the entry
//!   starts its segment by rewriting the page's header and first record
//!   (US8), with no page allocation and no directory write. Recovery leaves cached
//!   segments alone, and a clean close frees them
//!   ([`UndoSegments::release_cached`]), so a closed database holds no
//!   page it does not use.
//! * US7. A transaction whose segment holds an update or delete-mark
//!   record commits by setting the [`COMMITTED`] bit in its first page's
//!   owner (after its commit mark, if it has undo-tree records too: then
//!   the mark is the commit point, UL2, and recovery takes either for
//!   committed). The segment stays: its entry is held, and the segment
//!   is queued in memory for purge ([`UndoSegments::committed_below`];
//!   recovery queues every committed segment it finds). Purge works
//!   through its records once the transaction is below the purge bound
//!   (registry R4: no reader follows a pointer into it any more), then
//!   ends it as a transaction ends an insert segment (cache or free,
//!   US6), which makes the entry idle. A crash part way leaves the
//!   segment committed and queued again at the next open; purge acts on
//!   a record only where the row still says so, so doing it twice is
//!   harmless.
//! * US8. Every record is written with a zero length after it when the
//!   page has room, in the same write, and the next record overwrites
//!   that zero: a page's records end at the first zero length. A page
//!   new to a chain is zeroed whole ([`Op::Init`]); a cached page reused
//!   (US6) is not, and its previous owner's bytes past the new records
//!   are never read: the parser stops at the zero length, and a roll
//!   pointer by place of another transaction finds the page's owner
//!   changed first (undo U8).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

use crate::buffer::Load;
use crate::log::Lsn;
use crate::mtr::{Mtr, Op, PageHandle};
use crate::page::{self, PAGE_HEADER, PageId, PageType, get_u16, get_u64};
use crate::store::{Store, alloc_page, free_page};
use crate::{Error, Result};

use super::registry::TrxId;
use super::undo::{RollPtr, UndoRecord};

/// Root slot of the insert undo directory.
pub const UNDO_DIR_ROOT_SLOT: usize = 2;
/// Partition pages of the directory: a transaction's entry is on one of
/// these, so registering and freeing segments spreads over this many
/// pages (both also take the superblock's latch, as every page
/// allocation does).
pub const DIR_PARTS: usize = 16;
/// Most pages freed in one mini-transaction (fewer in a small pool:
/// [`UndoSegments::free_batch`]); an insert-only transaction with a
/// longer segment commits with a mark (US3).
pub const FREE_BATCH: usize = 32;
/// Committed segments are queued per directory partition and purged by
/// the purger of the undo partition of the same number (US7).
const _: () = assert!(DIR_PARTS == super::undo_log::UNDO_PARTITIONS as usize);
/// One-page segments each directory partition keeps for reuse (US6):
/// 1,024 pages in all, 4 MiB of 4 KiB pages. Since update undo waits in
/// its segment for purge (US7), the segments in flight are the running
/// transactions plus purge's backlog, which swings by hundreds under
/// concurrent updates; with 8 per partition more than half of the
/// segments at 16 and 64 threads started on a new page and were freed
/// again, each under the superblock's latch, and with 64 fewer than 1 in
/// 400 (`DbStats::undo_segments_on_new_pages`).
pub const CACHE_PER_PART: usize = 64;

const DIR_VERSION: u8 = 1;
const DIR_ROOT: u8 = 0;
const DIR_PART: u8 = 1;
/// `version | kind | count`, then the entries.
const DIR_ENTRIES: usize = PAGE_HEADER + 4;

const SEG_VERSION: u8 = 1;
const SEG_TRX: usize = PAGE_HEADER + 1;
const SEG_NEXT: usize = PAGE_HEADER + 9;
/// Where a segment page's records start.
const SEG_RECORDS: usize = PAGE_HEADER + 17;
/// The bit of a first page's owner that says its transaction committed
/// and left the segment to purge (US7).
pub const COMMITTED: u64 = 1 << 63;

/// A directory entry: partition and index (US2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    part: usize,
    index: usize,
}

/// A transaction's segment, as the transaction keeps it in memory.
#[derive(Debug)]
pub struct Segment {
    entry: Entry,
    /// Its pages, first to last, each with the sequence number of the
    /// first record on it.
    pages: Vec<(PageId, u64)>,
    /// Where the next record goes on the last page.
    end: usize,
    /// Whether it holds an update or delete-mark record (US7).
    history: bool,
}

impl Segment {
    /// Pages in the segment.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Whether it holds an update or delete-mark record, so that commit
    /// leaves it to purge (US7).
    pub fn has_history(&self) -> bool {
        self.history
    }

    /// Its directory entry and first page (what [`UndoSegments::free`]
    /// takes).
    pub fn head(&self) -> (Entry, PageId) {
        let first = self.pages.first().map_or(PageId(0), |p| p.0);
        (self.entry, first)
    }
}

/// A segment found in the directory at open (recovery), or queued for
/// purge (US7).
#[derive(Clone, Copy, Debug)]
pub struct Found {
    /// Its entry.
    pub entry: Entry,
    /// Its first page.
    pub first: PageId,
    /// The transaction that wrote it.
    pub trx: TrxId,
    /// Whether its first page carries the [`COMMITTED`] bit (US7).
    pub committed: bool,
}

/// A record read from a segment.
#[derive(Clone, Debug, PartialEq)]
pub struct SegRecord {
    /// Its sequence number in its transaction.
    pub seq: u64,
    /// The record.
    pub rec: UndoRecord,
    /// The roll pointer of the version it replaced: by place for an
    /// update or delete-mark (undo U8), with the insert bit for an
    /// insert (undo U6).
    pub roll: RollPtr,
}

/// The entries of one partition that no transaction holds (US2).
#[derive(Debug, Default)]
struct Idle {
    /// Empty entries, by index.
    empty: Vec<usize>,
    /// Entries holding a cached page (US6), with the page.
    cached: Vec<(usize, PageId)>,
}

/// [`Idle`] behind its lock, with the number of cached pages readable
/// without it, on a cache line of its own.
#[derive(Debug, Default)]
struct PartIdle {
    idle: Mutex<Idle>,
    cached: AtomicUsize,
    /// Segments started on a cached page, and on a new one (counted
    /// under `idle`'s lock, when the entry is taken).
    reused: AtomicU64,
    allocated: AtomicU64,
}

/// How segments started since open: on a cached page (US6) or on a newly
/// allocated one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentStarts {
    /// On a cached page: no allocation, no directory write.
    pub reused: u64,
    /// On a new page, taken from the free list under the superblock's
    /// latch.
    pub allocated: u64,
}

/// The insert undo directory of a store.
#[derive(Debug)]
pub struct UndoSegments {
    /// The partition pages; empty when the store has no directory (a
    /// read-only open of a store this build never wrote).
    parts: Vec<PageId>,
    /// Per partition, the entries no transaction holds (US2).
    idle: Box<[CachePadded<PartIdle>]>,
    /// Per partition, the committed segments purge has not ended yet
    /// (US7).
    history: Box<[CachePadded<Mutex<Vec<Found>>>]>,
}

fn corrupt(store: &Store, page: u64, reason: impl Into<String>) -> Error {
    Error::CorruptPage {
        file: store.pool().file().path().to_path_buf(),
        page,
        reason: reason.into(),
    }
}

fn write(mtr: &mut Mtr<'_>, h: PageHandle, offset: usize, bytes: &[u8]) -> Result<()> {
    mtr.apply(
        h,
        &Op::Write {
            offset: offset as u32,
            bytes,
        },
    )
}

/// Entries a directory page holds.
fn entries_per_page(page_size: usize) -> usize {
    (page_size - DIR_ENTRIES) / 8
}

/// Check a directory page of `kind` and return its entries (US5).
fn dir_entries(store: &Store, id: PageId, p: &[u8], kind: u8) -> Result<Vec<u64>> {
    if page::page_type(p) != Some(PageType::UndoDir) {
        return Err(corrupt(store, id.0, "expected an undo directory page"));
    }
    let (version, k, count) = (
        p.get(PAGE_HEADER).copied(),
        p.get(PAGE_HEADER + 1).copied(),
        get_u16(p, PAGE_HEADER + 2) as usize,
    );
    if version != Some(DIR_VERSION) {
        return Err(corrupt(
            store,
            id.0,
            format!("undo directory page of unknown version {version:?}"),
        ));
    }
    if k != Some(kind) {
        return Err(corrupt(
            store,
            id.0,
            format!("undo directory page of kind {k:?} where {kind} belongs"),
        ));
    }
    if count > entries_per_page(p.len()) {
        return Err(corrupt(
            store,
            id.0,
            format!("undo directory page claims {count} entries"),
        ));
    }
    Ok((0..count)
        .map(|i| get_u64(p, DIR_ENTRIES + 8 * i))
        .collect())
}

fn dir_header(kind: u8, count: usize) -> [u8; 4] {
    let c = (count as u16).to_le_bytes();
    [DIR_VERSION, kind, c[0], c[1]]
}

impl UndoSegments {
    /// Open the directory of `store`, creating it on first use (a new
    /// database, or one of format 4 or older: their insert undo is in the
    /// undo tree, which stays readable).
    pub fn open(store: &Store) -> Result<UndoSegments> {
        let page_size = store.pool().page_size();
        let per_part = entries_per_page(page_size);
        let root = match store.root(UNDO_DIR_ROOT_SLOT)? {
            PageId(0) if store.is_read_only() => {
                return Ok(UndoSegments {
                    parts: Vec::new(),
                    idle: Box::new([]),
                    history: Box::new([]),
                });
            }
            PageId(0) => Self::create(store, per_part)?,
            r => r,
        };
        let p = store.pool().fetch_read(root)?;
        let parts: Vec<PageId> = dir_entries(store, root, &p, DIR_ROOT)?
            .into_iter()
            .map(PageId)
            .collect();
        drop(p);
        if parts.len() != DIR_PARTS || parts.iter().any(|p| p.0 == 0) {
            return Err(corrupt(
                store,
                root.0,
                format!("undo directory root lists {} partitions", parts.len()),
            ));
        }
        // Which entries are idle (US2): empty ones, and those whose page
        // is cached (US6). The others are transactions' segments, which
        // recovery ends, putting their entries here.
        let mut idle = Vec::with_capacity(DIR_PARTS);
        for &pid in &parts {
            let p = store.pool().fetch_read(pid)?;
            let entries = dir_entries(store, pid, &p, DIR_PART)?;
            drop(p);
            let mut part = Idle::default();
            for (index, first) in entries.into_iter().enumerate().rev() {
                if first == 0 {
                    part.empty.push(index);
                } else {
                    let fp = store.pool().fetch_read(PageId(first))?;
                    if seg_page_owner(store, PageId(first), &fp)? == 0 {
                        if get_u64(&fp, SEG_NEXT) != 0 {
                            return Err(corrupt(
                                store,
                                first,
                                "cached undo segment page with a next page (US6)",
                            ));
                        }
                        part.cached.push((index, PageId(first)));
                    }
                }
            }
            idle.push(CachePadded::new(PartIdle {
                cached: AtomicUsize::new(part.cached.len()),
                idle: Mutex::new(part),
                ..PartIdle::default()
            }));
        }
        Ok(UndoSegments {
            parts,
            idle: idle.into_boxed_slice(),
            history: (0..DIR_PARTS).map(|_| CachePadded::default()).collect(),
        })
    }

    fn create(store: &Store, per_part: usize) -> Result<PageId> {
        let mut mtr = store.mtr()?;
        let root = alloc_page(&mut mtr)?;
        let mut parts = Vec::with_capacity(DIR_PARTS);
        for _ in 0..DIR_PARTS {
            parts.push(alloc_page(&mut mtr)?);
        }
        let mut body = dir_header(DIR_ROOT, DIR_PARTS).to_vec();
        for &h in &parts {
            mtr.apply(h, &Op::Init(PageType::UndoDir))?;
            write(&mut mtr, h, PAGE_HEADER, &dir_header(DIR_PART, per_part))?;
            body.extend_from_slice(&mtr.id(h)?.0.to_le_bytes());
        }
        mtr.apply(root, &Op::Init(PageType::UndoDir))?;
        write(&mut mtr, root, PAGE_HEADER, &body)?;
        let id = mtr.id(root)?;
        store.set_root(&mut mtr, UNDO_DIR_ROOT_SLOT, id)?;
        if let Some(lsn) = mtr.commit()? {
            store.commit(lsn, crate::Durability::Sync)?;
        }
        Ok(id)
    }

    /// Pages freed per mini-transaction in `store`: [`FREE_BATCH`], or an
    /// eighth of a small pool's frames, since the freeing mini-transaction
    /// holds every page it frees (at least 1).
    pub fn free_batch(store: &Store) -> usize {
        FREE_BATCH.min(store.pool().frames() / 8).max(1)
    }

    /// Take an idle entry for a transaction in registry slot `slot`
    /// (US2): a cached page if any partition has one (US6), else an empty
    /// entry, trying the slot's partition first, with its cached page if
    /// it has one; `None` if every entry is held (the transaction's insert
    /// undo then goes to the undo tree).
    fn take(&self, slot: usize) -> Option<(Entry, Option<PageId>)> {
        let n = self.idle.len();
        let order = (0..n).map(|i| (slot + i) % n);
        for p in order.clone() {
            let part = self.idle.get(p)?;
            if part.cached.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut idle = part.idle.lock();
            if let Some((index, page)) = idle.cached.pop() {
                part.cached.store(idle.cached.len(), Ordering::Relaxed);
                part.reused.fetch_add(1, Ordering::Relaxed);
                return Some((Entry { part: p, index }, Some(page)));
            }
        }
        for p in order {
            let part = self.idle.get(p)?;
            if let Some(index) = part.idle.lock().empty.pop() {
                part.allocated.fetch_add(1, Ordering::Relaxed);
                return Some((Entry { part: p, index }, None));
            }
        }
        None
    }

    /// Give back an entry no transaction holds any more: empty, or
    /// holding cached page `cached` (US2, US6).
    fn give_back(&self, entry: Entry, cached: Option<PageId>) {
        let Some(part) = self.idle.get(entry.part) else {
            return; // not a partition of this directory: nothing to keep
        };
        let mut idle = part.idle.lock();
        match cached {
            Some(page) => {
                idle.cached.push((entry.index, page));
                part.cached.store(idle.cached.len(), Ordering::Relaxed);
            }
            None => idle.empty.push(entry.index),
        }
    }

    /// Whether the partition of `entry` has room for another cached page
    /// (US6).
    fn cache_has_room(&self, entry: Entry) -> bool {
        self.idle
            .get(entry.part)
            .is_some_and(|p| p.cached.load(Ordering::Relaxed) < CACHE_PER_PART)
    }

    /// Cached pages in the directory (US6).
    pub fn cached_pages(&self) -> usize {
        self.idle
            .iter()
            .map(|p| p.cached.load(Ordering::Relaxed))
            .sum()
    }

    /// How segments started since open.
    pub fn starts(&self) -> SegmentStarts {
        self.idle
            .iter()
            .fold(SegmentStarts::default(), |s, p| SegmentStarts {
                reused: s.reused + p.reused.load(Ordering::Relaxed),
                allocated: s.allocated + p.allocated.load(Ordering::Relaxed),
            })
    }

    fn part_page(&self, entry: Entry) -> Result<PageId> {
        self.parts
            .get(entry.part)
            .copied()
            .ok_or_else(|| Error::InvalidArgument {
                what: "undo directory entry",
                reason: format!("partition {} does not exist", entry.part),
            })
    }

    /// Room for records on a segment page.
    fn fits(store: &Store, at: usize, len: usize) -> bool {
        at + 2 + len <= store.pool().page_size()
    }

    /// Append undo record `undo` (number `undo.undo_no` of transaction
    /// `undo.trx`) to the transaction's segment, starting it on the first
    /// record in an entry taken for registry slot `slot` (US1, US2, US4,
    /// US6). Returns the append's LSN and the roll pointer of the version
    /// the record is for (undo U6, U8); `Ok(None)` if the record cannot go
    /// into a segment (longer than a page holds, or every entry held: the
    /// caller puts it in the undo tree).
    pub fn append(
        &self,
        store: &Store,
        seg: &mut Option<Segment>,
        slot: usize,
        undo: &UndoRecord,
    ) -> Result<Option<(Lsn, RollPtr)>> {
        let (trx, seq) = (undo.trx, undo.undo_no);
        let encoded = undo.encode();
        let rec = encoded.as_slice();
        if !Self::fits(store, SEG_RECORDS, rec.len()) || rec.len() > usize::from(u16::MAX) {
            return Ok(None);
        }
        let history = undo.kind.has_old_value();
        let roll = |page: PageId, at: usize| -> Result<RollPtr> {
            if !history {
                return Ok(RollPtr::insert(seq));
            }
            RollPtr::segment(page.0, at).ok_or_else(|| {
                corrupt(
                    store,
                    page.0,
                    format!(
                        "an undo segment record at {at} cannot be named by a roll pointer (undo U8)"
                    ),
                )
            })
        };
        let Some(s) = seg.as_mut() else {
            let Some((entry, cached)) = self.take(slot) else {
                return Ok(None);
            };
            return match self.start(store, entry, cached, trx, rec) {
                Ok((lsn, first, end)) => {
                    *seg = Some(Segment {
                        entry,
                        pages: vec![(first, seq)],
                        end,
                        history,
                    });
                    Ok(Some((lsn, roll(first, SEG_RECORDS)?)))
                }
                Err(e) => {
                    // Nothing changed, or the pool is poisoned and
                    // recovery decides (mtr M4): the entry is as it was,
                    // and idle again unless it is damaged (then no
                    // transaction of this process takes it again).
                    if matches!(e, Error::CorruptPage { .. }) {
                        tracing::error!(part = entry.part, index = entry.index, error = %e, "undo directory entry set aside");
                    } else {
                        self.give_back(entry, cached);
                    }
                    Err(e)
                }
            };
        };
        let page_size = store.pool().page_size();
        let mut mtr = store.mtr()?;
        let last = s.pages.last().map_or(PageId(0), |p| p.0);
        if Self::fits(store, s.end, rec.len()) {
            let at = s.end;
            let r = roll(last, at)?;
            let h = mtr.latch(last, Load::Verify)?;
            write(&mut mtr, h, at, &ended(rec, at, page_size))?;
            let lsn = commit(mtr)?;
            s.end += 2 + rec.len();
            s.history |= history;
            return Ok(Some((lsn, r)));
        }
        // The superblock first (store T3), then the old last page, and
        // only then the allocation, which is the first change: nothing
        // that can fail comes after it but the writes (mtr M4; a failure
        // after a change poisons the pool).
        mtr.latch(PageId(0), Load::Verify)?;
        let old = mtr.latch(last, Load::Verify)?;
        seg_page_trx(store, last, mtr.page(old)?, trx)?;
        let h = alloc_page(&mut mtr)?;
        let id = mtr.id(h)?;
        let r = roll(id, SEG_RECORDS)?;
        init_page(&mut mtr, h, trx, rec, true)?;
        write(&mut mtr, old, SEG_NEXT, &id.0.to_le_bytes())?;
        let lsn = commit(mtr)?;
        s.pages.push((id, seq));
        s.end = SEG_RECORDS + 2 + rec.len();
        s.history |= history;
        Ok(Some((lsn, r)))
    }

    /// Latch the superblock (store T3) and then `entry`'s directory page
    /// in `mtr`, and check that the entry names page `expect` (0: empty;
    /// US1, US2). Returns the directory page's handle and the entry's
    /// offset in it, for the write that changes it.
    fn latch_entry(
        &self,
        store: &Store,
        mtr: &mut Mtr<'_>,
        entry: Entry,
        expect: PageId,
    ) -> Result<(PageHandle, usize)> {
        mtr.latch(PageId(0), Load::Verify)?;
        let dir_id = self.part_page(entry)?;
        let dir = mtr.latch(dir_id, Load::Verify)?;
        let at = DIR_ENTRIES + 8 * entry.index;
        let present = {
            let p = mtr.page(dir)?;
            dir_entries(store, dir_id, p, DIR_PART)?;
            get_u64(p, at)
        };
        if present != expect.0 {
            return Err(corrupt(
                store,
                dir_id.0,
                format!(
                    "undo directory entry {} names page {present} where page {} belongs (US1, US2)",
                    entry.index, expect.0
                ),
            ));
        }
        Ok((dir, at))
    }

    /// Start a segment of `trx` in `entry` holding `rec` (length-prefixed
    /// there): on its cached page if it has one (US6), else on a new page
    /// the entry is set to (US1). Returns the LSN, the first page and
    /// where the next record goes.
    fn start(
        &self,
        store: &Store,
        entry: Entry,
        cached: Option<PageId>,
        trx: TrxId,
        rec: &[u8],
    ) -> Result<(Lsn, PageId, usize)> {
        let end = SEG_RECORDS + 2 + rec.len();
        let mut mtr = store.mtr()?;
        if let Some(page) = cached {
            let h = mtr.latch(page, Load::Verify)?;
            seg_page_trx(store, page, mtr.page(h)?, 0)?;
            init_page(&mut mtr, h, trx, rec, false)?;
            return Ok((commit(mtr)?, page, end));
        }
        // The superblock and the directory page and its checks, then the
        // allocation, which is the first change: nothing that can fail
        // comes after it but the writes (mtr M4; a failure after a change
        // poisons the pool).
        let (dir, at) = self.latch_entry(store, &mut mtr, entry, PageId(0))?;
        let h = alloc_page(&mut mtr)?;
        let id = mtr.id(h)?;
        init_page(&mut mtr, h, trx, rec, true)?;
        write(&mut mtr, dir, at, &id.0.to_le_bytes())?;
        Ok((commit(mtr)?, id, end))
    }

    /// The records of `seg` (of `trx`) with sequence numbers above
    /// `after`, oldest first; reads only the pages that may hold them.
    pub fn records_after(
        &self,
        store: &Store,
        seg: &Segment,
        trx: TrxId,
        after: u64,
    ) -> Result<Vec<SegRecord>> {
        // The last page whose first record is at or below `after` may
        // still hold later ones; every page after it does.
        let start = seg
            .pages
            .iter()
            .rposition(|&(_, first)| first <= after)
            .unwrap_or(0);
        let mut out = Vec::new();
        for &(id, _) in seg.pages.get(start..).unwrap_or(&[]) {
            let p = store.pool().fetch_read(id)?;
            page_records(store, id, &p, trx, &mut out)?;
        }
        out.retain(|r| r.seq > after);
        Ok(out)
    }

    /// Every transaction's segment in the directory (recovery, US3);
    /// cached pages (US6) are nobody's.
    pub fn existing(&self, store: &Store) -> Result<Vec<Found>> {
        let mut out = Vec::new();
        for (part, &pid) in self.parts.iter().enumerate() {
            let p = store.pool().fetch_read(pid)?;
            let entries = dir_entries(store, pid, &p, DIR_PART)?;
            drop(p);
            for (index, first) in entries.into_iter().enumerate() {
                if first == 0 {
                    continue;
                }
                let fp = store.pool().fetch_read(PageId(first))?;
                let owner = seg_page_owner(store, PageId(first), &fp)?;
                if owner == 0 {
                    continue;
                }
                out.push(Found {
                    entry: Entry { part, index },
                    first: PageId(first),
                    trx: owner & !COMMITTED,
                    committed: owner & COMMITTED != 0,
                });
            }
        }
        Ok(out)
    }

    /// Every record of the chain starting at `first` (of `trx`), oldest
    /// first (recovery).
    pub fn chain_records(
        &self,
        store: &Store,
        first: PageId,
        trx: TrxId,
    ) -> Result<Vec<SegRecord>> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut at = first;
        while at.0 != 0 {
            if !seen.insert(at.0) {
                return Err(corrupt(store, at.0, "undo segment comes back to this page"));
            }
            let p = store.pool().fetch_read(at)?;
            page_records(store, at, &p, trx, &mut out)?;
            at = PageId(get_u64(&p, SEG_NEXT));
        }
        Ok(out)
    }

    /// End the segment `seg` of `trx` as its transaction ends: cache its
    /// page if it has one page and its partition has room (US6), else
    /// free it ([`UndoSegments::free`]). The entry is idle after (US2).
    /// Returns the LSN of the change that ended the segment (with
    /// `in_one`, of the one change: US3).
    pub fn end(&self, store: &Store, seg: &Segment, trx: TrxId, in_one: bool) -> Result<Lsn> {
        let (entry, first) = seg.head();
        if seg.pages.len() != 1 || !self.cache_has_room(entry) {
            return self.free(store, entry, first, trx, in_one);
        }
        self.cache(store, entry, first, trx)
    }

    /// Cache the one-page segment of `trx` at `first` in `entry` (US6).
    fn cache(&self, store: &Store, entry: Entry, first: PageId, trx: TrxId) -> Result<Lsn> {
        let mut mtr = store.mtr()?;
        let h = mtr.latch(first, Load::Verify)?;
        let next = {
            let p = mtr.page(h)?;
            seg_page_trx(store, first, p, trx)?;
            get_u64(p, SEG_NEXT)
        };
        if next != 0 {
            return Err(corrupt(
                store,
                first.0,
                format!("one-page undo segment of transaction {trx} names a next page {next}"),
            ));
        }
        write(&mut mtr, h, SEG_TRX, &0u64.to_le_bytes())?;
        let lsn = commit(mtr)?;
        self.give_back(entry, Some(first));
        Ok(lsn)
    }

    /// Commit `trx`, whose segment `seg` holds history (US7): set the
    /// [`COMMITTED`] bit in its first page's owner and queue it for
    /// purge. Returns the LSN of that change (the commit LSN, unless the
    /// transaction's commit mark came first). The caller drops `seg` on
    /// success; on failure nothing changed, or the pool is poisoned (mtr
    /// M4), and the transaction still holds its segment.
    pub fn commit(&self, store: &Store, seg: &Segment, trx: TrxId) -> Result<Lsn> {
        let (entry, first) = seg.head();
        let lsn = Self::set_committed(store, first, trx)?;
        self.queue(Found {
            entry,
            first,
            trx,
            committed: true,
        });
        Ok(lsn)
    }

    /// Set the [`COMMITTED`] bit in the owner of `trx`'s segment page
    /// `first` (US7); recovery does it for a segment whose transaction
    /// committed by its mark alone before queuing it, since purge may
    /// delete the mark before it ends the segment.
    pub fn set_committed(store: &Store, first: PageId, trx: TrxId) -> Result<Lsn> {
        let mut mtr = store.mtr()?;
        let h = mtr.latch(first, Load::Verify)?;
        let owner = seg_page_owner(store, first, mtr.page(h)?)?;
        if owner & !COMMITTED != trx {
            return Err(corrupt(
                store,
                first.0,
                format!("first page of transaction {trx}'s undo segment has owner {owner:#x}"),
            ));
        }
        write(&mut mtr, h, SEG_TRX, &(trx | COMMITTED).to_le_bytes())?;
        commit(mtr)
    }

    /// Queue committed segment `f` for purge (US7): at commit, and for
    /// what recovery finds.
    pub fn queue(&self, f: Found) {
        if let Some(q) = self.history.get(f.entry.part) {
            q.lock().push(f);
        }
    }

    /// Take up to `max` committed segments of partition `part` whose
    /// transactions are below `bound` off the purge queue (US7), oldest
    /// commits first. The caller ends each ([`UndoSegments::end_purged`])
    /// or, if it cannot, puts it back ([`UndoSegments::queue`]).
    pub fn committed_below(&self, part: usize, bound: TrxId, max: usize) -> Vec<Found> {
        let Some(q) = self.history.get(part) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        q.lock().retain(|f| {
            let take = out.len() < max && f.trx < bound;
            if take {
                out.push(*f);
            }
            !take
        });
        out
    }

    /// Committed segments queued for purge (US7).
    pub fn history_len(&self) -> usize {
        self.history.iter().map(|q| q.lock().len()).sum()
    }

    /// End committed segment `f` once purge is done with its records
    /// (US7): cache its page if it is one page and its partition has
    /// room (US6), else free it. The entry is idle after (US2).
    pub fn end_purged(&self, store: &Store, f: &Found) -> Result<Lsn> {
        let next = {
            let p = store.pool().fetch_read(f.first)?;
            seg_page_trx(store, f.first, &p, f.trx)?;
            get_u64(&p, SEG_NEXT)
        };
        if next != 0 || !self.cache_has_room(f.entry) {
            return self.free(store, f.entry, f.first, f.trx, false);
        }
        self.cache(store, f.entry, f.first, f.trx)
    }

    /// The undo record of `trx` that roll pointer `roll` names by place
    /// (undo U8), for an MVCC reader; `Ok(None)` if the page there is not
    /// `trx`'s segment page any more (the writer rolled the change back
    /// and ended its segment: the reader reads the row again). A page of
    /// `trx` without such a record there is corrupt (US5).
    pub fn read_at(&self, store: &Store, trx: TrxId, roll: RollPtr) -> Result<Option<UndoRecord>> {
        let (page, at) = roll.place();
        let id = PageId(page);
        let p = store.pool().fetch_read(id)?;
        if page::page_type(&p) != Some(PageType::Undo)
            || p.get(PAGE_HEADER).copied() != Some(SEG_VERSION)
            || get_u64(&p, SEG_TRX) & !COMMITTED != trx
        {
            return Ok(None);
        }
        let bad = |reason: String| {
            corrupt(
                store,
                page,
                format!("undo segment record at {at}: {reason}"),
            )
        };
        if at < SEG_RECORDS {
            return Err(bad("a roll pointer names the page header (undo U8)".into()));
        }
        let len = match p.get(at..at + 2) {
            Some(&[lo, hi]) => usize::from(u16::from_le_bytes([lo, hi])),
            _ => return Err(bad("past the page".into())),
        };
        let bytes = p
            .get(at + 2..at + 2 + len)
            .filter(|_| len > 0)
            .ok_or_else(|| bad(format!("length {len} runs past the page or is 0")))?;
        let rec = UndoRecord::decode(bytes).map_err(|e| bad(e.to_string()))?;
        if rec.trx != trx || !rec.kind.has_old_value() {
            return Err(bad(format!(
                "a {:?} record of transaction {} where a roll pointer of {trx} points",
                rec.kind, rec.trx
            )));
        }
        Ok(Some(rec))
    }

    /// Free every cached page (US6), emptying their entries: a clean
    /// close leaves no page the database does not use. Only while no
    /// transaction runs.
    pub fn release_cached(&self, store: &Store) -> Result<()> {
        for (part, p) in self.idle.iter().enumerate() {
            let cached = {
                let mut idle = p.idle.lock();
                p.cached.store(0, Ordering::Relaxed);
                std::mem::take(&mut idle.cached)
            };
            for (index, page) in cached {
                self.free(store, Entry { part, index }, page, 0, true)?;
            }
        }
        Ok(())
    }

    /// Free the segment of `trx` that starts at `first` in `entry`, up
    /// to [`UndoSegments::free_batch`] pages per mini-transaction, each
    /// moving the entry past the pages it frees (US1). Returns the LSN of
    /// the last one, which empties the entry; the entry is idle after
    /// (US2). With `in_one`, a segment longer than one batch is refused
    /// before anything changes (an insert-only commit must be one
    /// mini-transaction, US3).
    pub fn free(
        &self,
        store: &Store,
        entry: Entry,
        first: PageId,
        trx: TrxId,
        in_one: bool,
    ) -> Result<Lsn> {
        let mut head = first;
        let mut seen = HashSet::new();
        loop {
            let (next, lsn) = self.free_batch_once(store, entry, head, trx, in_one, &mut seen)?;
            if next.0 == 0 {
                self.give_back(entry, None);
                return Ok(lsn);
            }
            head = next;
        }
    }

    /// One batch of [`UndoSegments::free`]: frees up to a batch of pages
    /// from `head` and moves the entry to the page after them; returns
    /// that page (0: the segment is gone) and the LSN.
    fn free_batch_once(
        &self,
        store: &Store,
        entry: Entry,
        head: PageId,
        trx: TrxId,
        in_one: bool,
        seen: &mut HashSet<u64>,
    ) -> Result<(PageId, Lsn)> {
        let batch_max = Self::free_batch(store);
        // Read the batch's pages first, with nothing latched, so the
        // mini-transaction below (which holds the superblock) rarely
        // waits for a read.
        let mut warm = head;
        for _ in 0..batch_max {
            if warm.0 == 0 {
                break;
            }
            let p = store.pool().fetch_read(warm)?;
            warm = match page::page_type(&p) {
                Some(PageType::Undo) => PageId(get_u64(&p, SEG_NEXT)),
                _ => PageId(0), // reported below, under the latches
            };
        }
        let mut mtr = store.mtr()?;
        // The superblock, then the directory, then every page to free,
        // all before the first change (mtr M4).
        let (dir, at) = self.latch_entry(store, &mut mtr, entry, head)?;
        let mut batch = Vec::new();
        let mut next = head;
        let mut committed = false;
        while next.0 != 0 && batch.len() < batch_max {
            if !seen.insert(next.0) {
                return Err(corrupt(
                    store,
                    next.0,
                    "undo segment comes back to this page",
                ));
            }
            let h = mtr.latch(next, Load::Verify)?;
            let p = mtr.page(h)?;
            seg_page_trx(store, next, p, trx)?;
            if batch.is_empty() {
                committed = get_u64(p, SEG_TRX) & COMMITTED != 0;
            }
            next = PageId(get_u64(p, SEG_NEXT));
            batch.push(h);
        }
        // A committed segment's new first page carries the bit on (US7):
        // a crash before the rest is freed must leave it committed.
        let new_head = if committed && next.0 != 0 {
            let h = mtr.latch(next, Load::Verify)?;
            seg_page_trx(store, next, mtr.page(h)?, trx)?;
            Some(h)
        } else {
            None
        };
        if in_one && next.0 != 0 {
            return Err(Error::InvalidArgument {
                what: "undo segment",
                reason: format!(
                    "longer than {batch_max} pages, so it cannot be freed in one mini-transaction"
                ),
            });
        }
        for h in batch {
            free_page(&mut mtr, h)?;
        }
        write(&mut mtr, dir, at, &next.0.to_le_bytes())?;
        if let Some(h) = new_head {
            write(&mut mtr, h, SEG_TRX, &(trx | COMMITTED).to_le_bytes())?;
        }
        Ok((next, commit(mtr)?))
    }
}

/// `rec` behind its length, as a segment page holds it at `at`, and a
/// zero length after it if the page has room (US8: a reused page holds
/// old bytes past its records). The caller checked that the length fits
/// a `u16` and the record the page.
fn ended(rec: &[u8], at: usize, page_size: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4 + rec.len());
    bytes.extend_from_slice(&(rec.len() as u16).to_le_bytes());
    bytes.extend_from_slice(rec);
    if at + bytes.len() + 2 <= page_size {
        bytes.extend_from_slice(&[0, 0]);
    }
    bytes
}

fn commit(mtr: Mtr<'_>) -> Result<Lsn> {
    mtr.commit()?.ok_or_else(|| Error::InvalidArgument {
        what: "undo segment change",
        reason: "a mini-transaction that changed pages logged nothing".into(),
    })
}

/// Make `h` a segment page of `trx` holding `first_record` alone: a
/// `fresh` page (new to the segment chain) is initialized whole first;
/// a cached one (US6, US8), already a segment page of this version, gets
/// its header and the record with a zero length after it, and its old
/// bytes past that stay, never read (zeroing the whole page cost a write
/// of every byte of it per transaction).
fn init_page(
    mtr: &mut Mtr<'_>,
    h: PageHandle,
    trx: TrxId,
    first_record: &[u8],
    fresh: bool,
) -> Result<()> {
    if fresh {
        mtr.apply(h, &Op::Init(PageType::Undo))?;
    }
    let page_size = mtr.page(h)?.len();
    let mut body = Vec::with_capacity(21 + first_record.len());
    body.push(SEG_VERSION);
    body.extend_from_slice(&trx.to_le_bytes());
    body.extend_from_slice(&0u64.to_le_bytes());
    body.extend_from_slice(&ended(first_record, SEG_RECORDS, page_size));
    write(mtr, h, PAGE_HEADER, &body)
}

/// Check that `p` is a segment page of transaction `trx` (US5).
fn seg_page_trx(store: &Store, id: PageId, p: &[u8], trx: TrxId) -> Result<()> {
    let owner = seg_page_owner(store, id, p)? & !COMMITTED;
    if owner != trx {
        return Err(corrupt(
            store,
            id.0,
            format!("undo segment page of transaction {owner} in transaction {trx}'s segment"),
        ));
    }
    Ok(())
}

/// Check that `p` is a segment page (US5) and return its transaction.
fn seg_page_owner(store: &Store, id: PageId, p: &[u8]) -> Result<TrxId> {
    if page::page_type(p) != Some(PageType::Undo) {
        return Err(corrupt(store, id.0, "expected an undo segment page"));
    }
    let version = p.get(PAGE_HEADER).copied();
    if version != Some(SEG_VERSION) {
        return Err(corrupt(
            store,
            id.0,
            format!("undo segment page of unknown version {version:?}"),
        ));
    }
    Ok(get_u64(p, SEG_TRX))
}

/// Append the records of segment page `p` to `out`, checking them (US5).
fn page_records(
    store: &Store,
    id: PageId,
    p: &[u8],
    trx: TrxId,
    out: &mut Vec<SegRecord>,
) -> Result<()> {
    seg_page_trx(store, id, p, trx)?;
    let mut found = Vec::new();
    parse_records(p, trx, &mut found).map_err(|(at, reason)| {
        corrupt(
            store,
            id.0,
            format!("undo segment record at {at}: {reason}"),
        )
    })?;
    for (at, rec) in found {
        let roll = if rec.kind.has_old_value() {
            RollPtr::segment(id.0, at)
                .ok_or_else(|| corrupt(store, id.0, "a page no roll pointer can name (undo U8)"))?
        } else {
            RollPtr::insert(rec.undo_no)
        };
        out.push(SegRecord {
            seq: rec.undo_no,
            rec,
            roll,
        });
    }
    Ok(())
}

/// The records of segment page `p` of `trx` (US5), each with the offset
/// of its length prefix: the decoder recovery, rollback and purge use,
/// and the fuzz target's.
pub(crate) fn parse_records(
    p: &[u8],
    trx: TrxId,
    out: &mut Vec<(usize, UndoRecord)>,
) -> std::result::Result<(), (usize, String)> {
    let mut at = SEG_RECORDS;
    while let Some(&[lo, hi]) = p.get(at..at + 2) {
        let len = usize::from(u16::from_le_bytes([lo, hi]));
        if len == 0 {
            break;
        }
        let bytes = p
            .get(at + 2..at + 2 + len)
            .ok_or_else(|| (at, format!("length {len} runs past the page")))?;
        let rec = UndoRecord::decode(bytes).map_err(|e| (at, e.to_string()))?;
        if rec.undo_no == 0 || rec.undo_no >= RollPtr::SEGMENT_BIT {
            return Err((at, format!("sequence number {} out of range", rec.undo_no)));
        }
        if rec.trx != trx {
            return Err((
                at,
                format!(
                    "a {:?} record of transaction {} in a segment of {trx}",
                    rec.kind, rec.trx
                ),
            ));
        }
        out.push((at, rec));
        at += 2 + len;
    }
    Ok(())
}

/// A page image for tests and the fuzz target: a segment page of `trx`
/// of `page_size` bytes holding `records` (encoded undo records).
#[cfg(test)]
pub(crate) fn page_image(page_size: usize, trx: TrxId, records: &[Vec<u8>]) -> Vec<u8> {
    let mut raw = Vec::new();
    for r in records {
        raw.extend_from_slice(&(r.len() as u16).to_le_bytes());
        raw.extend_from_slice(r);
    }
    raw_page_image(page_size, trx, &raw)
}

/// A segment page of `trx` whose record area starts with `raw` (cut at
/// the page's end): the fuzz target's input as a page.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn raw_page_image(page_size: usize, trx: TrxId, raw: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; page_size];
    page::init(&mut p, PageId(1), PageType::Undo, 0);
    let mut body = vec![SEG_VERSION];
    body.extend_from_slice(&trx.to_le_bytes());
    body.extend_from_slice(&0u64.to_le_bytes());
    body.extend_from_slice(raw);
    let end = (PAGE_HEADER + body.len()).min(page_size);
    if let (Some(dst), Some(src)) = (p.get_mut(PAGE_HEADER..end), body.get(..end - PAGE_HEADER)) {
        dst.copy_from_slice(src);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::SimFs;
    use crate::page::space::SB_FREE_COUNT;
    use crate::store::test_options;
    use crate::txn::undo::UndoKind;
    use proptest::prelude::*;
    use std::path::Path;
    use std::sync::Arc;

    fn rec(trx: TrxId, seq: u64, key_len: usize) -> UndoRecord {
        UndoRecord {
            kind: UndoKind::Insert,
            undo_no: seq,
            table: 7,
            trx,
            prev_trx: 0,
            prev_roll: crate::txn::RollPtr::NONE,
            key: vec![seq as u8; key_len],
            old: None,
            changed: 0,
        }
    }

    fn pairs(recs: Vec<SegRecord>) -> Vec<(u64, UndoRecord)> {
        recs.into_iter().map(|r| (r.seq, r.rec)).collect()
    }

    fn free_pages(store: &Store) -> u64 {
        get_u64(&store.pool().fetch_read(PageId(0)).unwrap(), SB_FREE_COUNT)
    }

    /// A segment grows page by page, reads back in order from any point,
    /// is found by recovery's scan, and is freed whole, in batches of
    /// FREE_BATCH pages, back to the free list (US1); its entry is then
    /// empty and reusable.
    #[test]
    fn append_read_find_and_free() {
        let store =
            Store::create(Arc::new(SimFs::new(1)), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        assert!(segs.existing(&store).unwrap().is_empty());
        let mut seg = None;
        let n = 20_000u64;
        for seq in 1..=n {
            let r = rec(42, seq, 20);
            assert!(segs.append(&store, &mut seg, 37, &r).unwrap().is_some());
        }
        let seg = seg.unwrap();
        // Slot 37's partition first, its lowest entry (US2).
        let entry = seg.head().0;
        assert_eq!(entry, Entry { part: 5, index: 0 });
        assert!(
            seg.page_count() > UndoSegments::free_batch(&store),
            "{} pages: the free below should take more than one batch",
            seg.page_count()
        );
        let all = segs.records_after(&store, &seg, 42, 0).unwrap();
        assert_eq!(all.len() as u64, n);
        assert!(all.iter().enumerate().all(|(i, r)| r.seq == i as u64 + 1
            && r.rec == rec(42, r.seq, 20)
            && r.roll == RollPtr::insert(r.seq)));
        for after in [1, 500, n - 1, n] {
            let tail = segs.records_after(&store, &seg, 42, after).unwrap();
            assert_eq!(tail.len() as u64, n - after, "after {after}");
        }
        let found = segs.existing(&store).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].entry, found[0].trx), (entry, 42));
        assert_eq!(found[0].first, seg.head().1);
        assert_eq!(segs.chain_records(&store, found[0].first, 42).unwrap(), all);
        // Another transaction's records are refused (US5).
        assert!(matches!(
            segs.chain_records(&store, found[0].first, 43),
            Err(Error::CorruptPage { .. })
        ));
        let before = free_pages(&store);
        let (e, first) = seg.head();
        // In one mini-transaction: refused before anything changes.
        assert!(segs.free(&store, e, first, 42, true).is_err());
        // Another transaction's segment: refused (US5).
        assert!(segs.free(&store, e, first, 41, false).is_err());
        assert_eq!(free_pages(&store), before);
        segs.free(&store, e, first, 42, false).unwrap();
        assert_eq!(free_pages(&store) - before, seg.page_count() as u64);
        assert!(segs.existing(&store).unwrap().is_empty());
        // Freeing it again finds the entry empty: an error, not a double
        // free.
        assert!(segs.free(&store, e, first, 42, false).is_err());
        let mut again = None;
        segs.append(&store, &mut again, 37, &rec(43, 1, 3)).unwrap();
        let found = segs.existing(&store).unwrap();
        assert_eq!((found[0].entry, found[0].trx), (entry, 43));
    }

    /// A power loss after some of a segment's free batches leaves the
    /// entry at the first page not freed: the rest of the chain is intact
    /// and is freed after reopening, and every page is freed once (US1).
    #[test]
    fn a_crash_part_way_through_a_free_leaves_the_rest_to_free() {
        let fs = SimFs::new(3);
        let store = Store::create(Arc::new(fs.clone()), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        let mut seg = None;
        let n = 8_000u64;
        for seq in 1..=n {
            segs.append(&store, &mut seg, 5, &rec(7, seq, 20)).unwrap();
        }
        let seg = seg.unwrap();
        let pages = seg.page_count() as u64;
        let batch = UndoSegments::free_batch(&store) as u64;
        assert!(pages > batch);
        let before = free_pages(&store);
        let (e, first) = seg.head();
        let (next, lsn) = segs
            .free_batch_once(&store, e, first, 7, false, &mut HashSet::new())
            .unwrap();
        store.commit(lsn, crate::Durability::Sync).unwrap();
        let crashed = fs.crash(crate::io::CrashMode::DropUnsynced);
        drop(store);
        let store = Store::open(Arc::new(crashed), Path::new("/db"), test_options()).unwrap();
        assert_eq!(free_pages(&store) - before, batch);
        let segs = UndoSegments::open(&store).unwrap();
        let found = segs.existing(&store).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].first, found[0].trx), (next, 7));
        let rest = segs.chain_records(&store, next, 7).unwrap();
        assert!(!rest.is_empty() && rest.last().unwrap().seq == n);
        segs.free(&store, found[0].entry, next, 7, false).unwrap();
        assert_eq!(free_pages(&store) - before, pages);
        assert!(segs.existing(&store).unwrap().is_empty());
    }

    /// The directory survives a clean reopen, and a second open does not
    /// create another.
    #[test]
    fn the_directory_is_created_once() {
        let fs = SimFs::new(2);
        let store = Store::create(Arc::new(fs.clone()), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        let mut seg = None;
        segs.append(&store, &mut seg, 0, &rec(9, 1, 4)).unwrap();
        let root = store.root(UNDO_DIR_ROOT_SLOT).unwrap();
        store.close().unwrap();
        let store = Store::open(Arc::new(fs), Path::new("/db"), test_options()).unwrap();
        assert_eq!(store.root(UNDO_DIR_ROOT_SLOT).unwrap(), root);
        let segs = UndoSegments::open(&store).unwrap();
        let found = segs.existing(&store).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(
            pairs(segs.chain_records(&store, found[0].first, 9).unwrap()),
            vec![(1, rec(9, 1, 4))]
        );
        // Every idle entry can be taken once, the held one not at all;
        // then there is none (US2): inserts use the undo tree.
        let cap = DIR_PARTS * entries_per_page(store.pool().page_size());
        let mut taken = HashSet::new();
        for i in 0..cap - 1 {
            match segs.take(i) {
                Some((e, None)) => assert!(taken.insert((e.part, e.index))),
                _ => panic!("entry {i} of {cap} not taken"),
            }
        }
        assert!(!taken.contains(&(found[0].entry.part, found[0].entry.index)));
        assert!(segs.take(0).is_none());
    }

    /// A one-page segment is cached as its transaction ends (US6): no
    /// page goes back to the free list, recovery's scan does not see it,
    /// and the next transaction, whatever its slot, starts on that page
    /// with no allocation; a reopen finds it cached, and
    /// `release_cached` frees it.
    #[test]
    fn a_one_page_segment_is_cached_and_reused() {
        let fs = SimFs::new(4);
        let store = Store::create(Arc::new(fs.clone()), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        let mut seg = None;
        for seq in 1..=3 {
            segs.append(&store, &mut seg, 3, &rec(11, seq, 8)).unwrap();
        }
        let seg = seg.unwrap();
        let page = seg.head().1;
        let free = free_pages(&store);
        // Not its segment: refused, nothing cached.
        assert!(segs.end(&store, &seg, 12, true).is_err());
        assert_eq!(segs.cached_pages(), 0);
        segs.end(&store, &seg, 11, true).unwrap();
        assert_eq!((free_pages(&store), segs.cached_pages()), (free, 1));
        assert!(segs.existing(&store).unwrap().is_empty());
        // Another slot, another partition first: it takes the cached page.
        let mut next = None;
        segs.append(&store, &mut next, 10, &rec(12, 1, 5)).unwrap();
        let next = next.unwrap();
        assert_eq!(next.head(), seg.head());
        assert_eq!((free_pages(&store), segs.cached_pages()), (free, 0));
        // The page holds the new transaction's record alone.
        assert_eq!(
            pairs(segs.chain_records(&store, page, 12).unwrap()),
            vec![(1, rec(12, 1, 5))]
        );
        segs.end(&store, &next, 12, false).unwrap();
        store.close().unwrap();
        let store = Store::open(Arc::new(fs), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        assert_eq!(segs.cached_pages(), 1);
        assert!(segs.existing(&store).unwrap().is_empty());
        let free = free_pages(&store);
        segs.release_cached(&store).unwrap();
        assert_eq!((free_pages(&store), segs.cached_pages()), (free + 1, 0));
    }

    /// A partition caches at most CACHE_PER_PART pages; segments ending
    /// past that, and segments of more than one page, are freed (US6).
    #[test]
    fn the_cache_is_bounded_and_long_segments_are_freed() {
        let store =
            Store::create(Arc::new(SimFs::new(5)), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        let mut held = Vec::new();
        for trx in 1..=(CACHE_PER_PART as u64 + 3) {
            let mut seg = None;
            // Slots of one partition.
            segs.append(&store, &mut seg, 0, &rec(trx, 1, 8)).unwrap();
            held.push((trx, seg.unwrap()));
        }
        assert!(held.iter().all(|(_, s)| s.head().0.part == 0));
        let free = free_pages(&store);
        for (trx, seg) in &held {
            segs.end(&store, seg, *trx, true).unwrap();
        }
        assert_eq!(segs.cached_pages(), CACHE_PER_PART);
        assert_eq!(free_pages(&store), free + 3);
        segs.release_cached(&store).unwrap();
        let mut seg = None;
        for seq in 1..=600 {
            segs.append(&store, &mut seg, 1, &rec(99, seq, 20)).unwrap();
        }
        let seg = seg.unwrap();
        assert!(seg.page_count() > 1);
        let free = free_pages(&store);
        segs.end(&store, &seg, 99, false).unwrap();
        assert_eq!(free_pages(&store), free + seg.page_count() as u64);
        assert_eq!(segs.cached_pages(), 0);
    }

    /// Power loss: a cached page stays cached, a reused one is its new
    /// transaction's segment with only that transaction's records (US3,
    /// US6), and a cached page that names a next page is corrupt.
    #[test]
    fn cached_pages_survive_a_crash() {
        let fs = SimFs::new(6);
        let store = Store::create(Arc::new(fs.clone()), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        let mut a = None;
        let mut b = None;
        for seq in 1..=4 {
            segs.append(&store, &mut a, 0, &rec(21, seq, 30)).unwrap();
        }
        segs.append(&store, &mut b, 1, &rec(22, 1, 9)).unwrap();
        let (a, b) = (a.unwrap(), b.unwrap());
        segs.end(&store, &a, 21, true).unwrap();
        let lsn = segs.end(&store, &b, 22, true).unwrap();
        store.commit(lsn, crate::Durability::Sync).unwrap();
        // A third transaction reuses one of them, durably, and the power
        // goes before it ends.
        let mut c = None;
        let (lsn, _) = segs
            .append(&store, &mut c, 0, &rec(23, 1, 2))
            .unwrap()
            .unwrap();
        store.commit(lsn, crate::Durability::Sync).unwrap();
        let c = c.unwrap();
        let crashed = fs.crash(crate::io::CrashMode::DropUnsynced);
        drop(store);
        let store =
            Store::open(Arc::new(crashed.clone()), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        assert_eq!(segs.cached_pages(), 1);
        let found = segs.existing(&store).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].first, found[0].trx), (c.head().1, 23));
        assert_eq!(
            pairs(segs.chain_records(&store, found[0].first, 23).unwrap()),
            vec![(1, rec(23, 1, 2))]
        );
        // Damage: the cached page names a next page.
        let cached = segs
            .idle
            .iter()
            .find_map(|p| p.idle.lock().cached.first().map(|c| c.1))
            .unwrap();
        let mut mtr = store.mtr().unwrap();
        let h = mtr.latch(cached, Load::Verify).unwrap();
        write(&mut mtr, h, SEG_NEXT, &77u64.to_le_bytes()).unwrap();
        let lsn = commit(mtr).unwrap();
        store.commit(lsn, crate::Durability::Sync).unwrap();
        assert!(matches!(
            UndoSegments::open(&store),
            Err(Error::CorruptPage { .. })
        ));
    }

    fn upd(trx: TrxId, seq: u64, old_len: usize) -> UndoRecord {
        UndoRecord {
            kind: UndoKind::Update,
            old: Some(crate::txn::OldVersion::Whole(vec![seq as u8; old_len])),
            changed: 1,
            ..rec(trx, seq, 6)
        }
    }

    /// Update records are named by place (undo U8) and read back there;
    /// committing sets the bit and queues the segment (US7), which purge
    /// takes only below its bound and then caches; a pointer into a page
    /// that is not its writer's any more reads as gone, and one into its
    /// writer's page at a place holding no record of it is corrupt.
    #[test]
    fn update_records_by_place_commit_and_purge() {
        let store =
            Store::create(Arc::new(SimFs::new(5)), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        let mut seg = None;
        let mut rolls = Vec::new();
        for seq in 1..=40u64 {
            let r = if seq % 3 == 0 {
                rec(50, seq, 9)
            } else {
                upd(50, seq, 300)
            };
            let (_, roll) = segs.append(&store, &mut seg, 2, &r).unwrap().unwrap();
            assert_eq!(roll.is_segment(), seq % 3 != 0);
            assert_eq!(roll.is_insert(), seq % 3 == 0);
            rolls.push((roll, r));
        }
        let seg = seg.unwrap();
        assert!(seg.has_history() && seg.page_count() > 1);
        for (roll, r) in rolls.iter().filter(|(roll, _)| roll.is_segment()) {
            assert_eq!(segs.read_at(&store, 50, *roll).unwrap().as_ref(), Some(r));
            // Another transaction's pointer into this page: not its page.
            assert_eq!(segs.read_at(&store, 51, *roll).unwrap(), None);
        }
        let (first_roll, _) = rolls[0];
        let (page, at) = first_roll.place();
        let wrong = RollPtr::segment(page, at + 1).unwrap();
        assert!(matches!(
            segs.read_at(&store, 50, wrong),
            Err(Error::CorruptPage { .. })
        ));
        let header = RollPtr::segment(page, 3).unwrap();
        assert!(segs.read_at(&store, 50, header).is_err());
        // The records come back with the pointers they were appended with.
        let all = segs.chain_records(&store, seg.head().1, 50).unwrap();
        let want: Vec<_> = rolls.iter().map(|(roll, r)| (*roll, r.clone())).collect();
        let got: Vec<_> = all.iter().map(|r| (r.roll, r.rec.clone())).collect();
        assert_eq!(got, want);
        segs.commit(&store, &seg, 50).unwrap();
        let found = segs.existing(&store).unwrap();
        assert_eq!(found.len(), 1);
        assert!(found[0].committed && found[0].trx == 50);
        assert_eq!(segs.history_len(), 1);
        let part = seg.head().0.part;
        assert!(
            segs.committed_below(part, 50, 8).is_empty(),
            "bound not past it"
        );
        assert_eq!(segs.history_len(), 1);
        let mut taken = segs.committed_below(part, 51, 8);
        assert_eq!(taken.len(), 1);
        let f = taken.pop().unwrap();
        // Still readable until purge ends it.
        assert!(segs.read_at(&store, 50, first_roll).unwrap().is_some());
        let free_before = free_pages(&store);
        segs.end_purged(&store, &f).unwrap();
        assert!(segs.existing(&store).unwrap().is_empty());
        assert_eq!(segs.history_len(), 0);
        // Many pages: freed, not cached.
        assert_eq!(free_pages(&store) - free_before, seg.page_count() as u64);
        assert_eq!(segs.read_at(&store, 50, first_roll).unwrap(), None);
        // A one-page committed segment is cached, and its page is then no
        // longer its writer's.
        let mut one = None;
        let (_, roll) = segs
            .append(&store, &mut one, 2, &upd(60, 1, 10))
            .unwrap()
            .unwrap();
        let one = one.unwrap();
        segs.commit(&store, &one, 60).unwrap();
        let f = segs
            .committed_below(one.head().0.part, 61, 8)
            .pop()
            .unwrap();
        let cached = segs.cached_pages();
        segs.end_purged(&store, &f).unwrap();
        assert_eq!(segs.cached_pages(), cached + 1);
        assert_eq!(segs.read_at(&store, 60, roll).unwrap(), None);
    }

    /// A committed segment longer than one free batch keeps its committed
    /// bit on its first page while purge frees it batch by batch (US7): a
    /// crash between two batches leaves the rest committed, not a
    /// transaction to roll back.
    #[test]
    fn a_committed_segment_freed_in_batches_stays_committed() {
        let fs = SimFs::new(6);
        let store = Store::create(Arc::new(fs.clone()), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        let batch = UndoSegments::free_batch(&store);
        let mut seg = None;
        let mut seq = 0;
        while seg
            .as_ref()
            .is_none_or(|s: &Segment| s.page_count() <= 2 * batch)
        {
            seq += 1;
            segs.append(&store, &mut seg, 4, &upd(70, seq, 900))
                .unwrap()
                .unwrap();
        }
        let seg = seg.unwrap();
        segs.commit(&store, &seg, 70).unwrap();
        let (entry, first) = seg.head();
        let mut seen = HashSet::new();
        let (second, lsn) = segs
            .free_batch_once(&store, entry, first, 70, false, &mut seen)
            .unwrap();
        assert!(second.0 != 0);
        store.commit(lsn, crate::Durability::Sync).unwrap();
        let crashed = fs.crash(crate::io::CrashMode::DropUnsynced);
        drop(store);
        let store = Store::open(Arc::new(crashed), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        let found = segs.existing(&store).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].first, found[0].trx, found[0].committed),
            (second, 70, true)
        );
        let rest = segs.chain_records(&store, second, 70).unwrap();
        assert_eq!(rest.last().map(|r| r.seq), Some(seq));
        segs.end_purged(&store, &found[0]).unwrap();
        assert!(segs.existing(&store).unwrap().is_empty());
    }

    /// A cached page is reused without zeroing it (US8): the old owner's
    /// longer records stay past the new one's zero length and are never
    /// read, before and after a power loss.
    #[test]
    fn a_reused_page_reads_only_its_new_records() {
        let fs = SimFs::new(8);
        let store = Store::create(Arc::new(fs.clone()), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        let mut old = None;
        for seq in 1..=6 {
            segs.append(&store, &mut old, 0, &upd(80, seq, 200))
                .unwrap()
                .unwrap();
        }
        let old = old.unwrap();
        assert_eq!(old.page_count(), 1);
        segs.end(&store, &old, 80, true).unwrap();
        let mut new = None;
        segs.append(&store, &mut new, 0, &rec(81, 1, 3))
            .unwrap()
            .unwrap();
        let (lsn, _) = segs
            .append(&store, &mut new, 0, &rec(81, 2, 4))
            .unwrap()
            .unwrap();
        let new = new.unwrap();
        assert_eq!(new.head().1, old.head().1, "the cached page was reused");
        let want = vec![(1, rec(81, 1, 3)), (2, rec(81, 2, 4))];
        assert_eq!(
            pairs(segs.records_after(&store, &new, 81, 0).unwrap()),
            want
        );
        store.commit(lsn, crate::Durability::Sync).unwrap();
        let crashed = fs.crash(crate::io::CrashMode::DropUnsynced);
        drop(store);
        let store = Store::open(Arc::new(crashed), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        let found = segs.existing(&store).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(
            pairs(segs.chain_records(&store, found[0].first, 81).unwrap()),
            want
        );
    }

    /// Records of the wrong kind or transaction, lengths past the page and
    /// damaged records are reported, never skipped (US5).
    #[test]
    fn bad_records_are_refused() {
        let good = rec(5, 1, 8).encode();
        let mut out = Vec::new();
        parse_records(
            &page_image(4096, 5, &[good.clone(), good.clone()]),
            5,
            &mut out,
        )
        .unwrap();
        assert_eq!(out.len(), 2);
        assert!(
            parse_records(
                &page_image(4096, 6, std::slice::from_ref(&good)),
                6,
                &mut Vec::new()
            )
            .is_err()
        );
        let mut upd = rec(6, 2, 8);
        upd.kind = UndoKind::Update;
        upd.old = Some(crate::txn::OldVersion::Whole(vec![0; 20]));
        assert!(parse_records(&page_image(4096, 5, &[upd.encode()]), 5, &mut Vec::new()).is_err());
        let mut huge = rec(5, RollPtr::SEGMENT_BIT, 8);
        huge.kind = UndoKind::Update;
        huge.old = Some(crate::txn::OldVersion::Whole(vec![0; 20]));
        assert!(parse_records(&page_image(4096, 5, &[huge.encode()]), 5, &mut Vec::new()).is_err());
        let mut cut = good.clone();
        cut.pop();
        assert!(parse_records(&page_image(4096, 5, &[cut]), 5, &mut Vec::new()).is_err());
        let mut p = page_image(4096, 5, &[good]);
        p[SEG_RECORDS..SEG_RECORDS + 2].copy_from_slice(&5000u16.to_le_bytes());
        assert!(parse_records(&p, 5, &mut Vec::new()).is_err());
    }

    proptest! {
        /// Garbage after a page's header never panics, and whatever it
        /// accepts decodes as records of the page's transaction, each at
        /// the offset given.
        #[test]
        fn garbage_pages_never_panic(body in proptest::collection::vec(any::<u8>(), 0..600), trx in 0u64..4) {
            let mut p = page_image(1024, trx, &[]);
            let end = (SEG_RECORDS + body.len()).min(p.len());
            p[SEG_RECORDS..end].copy_from_slice(&body[..end - SEG_RECORDS]);
            let mut out = Vec::new();
            if parse_records(&p, trx, &mut out).is_ok() {
                for (at, r) in &out {
                    let len = usize::from(get_u16(&p, *at));
                    prop_assert_eq!(r.trx, trx);
                    prop_assert_eq!(&UndoRecord::decode(&p[at + 2..at + 2 + len]).unwrap(), r);
                }
            }
        }
    }
}
