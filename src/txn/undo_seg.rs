//! Insert undo segments (tablespace format 5): a transaction's insert
//! undo records are appended to a chain of undo pages of its own, one
//! redo operation per record, instead of one undo B+tree insert each, and
//! the pages are freed whole when the transaction ends. This is InnoDB's
//! insert undo.
//!
//! Why it is sound: an insert's undo record serves rollback alone. A
//! version written by an insert carries a roll pointer with the insert
//! bit ([`RollPtr::insert`]): it had no previous version, so a reader
//! that does not see its writer knows the row did not exist without
//! reading undo, and purge has nothing to do for it. The records need a
//! place that survives a crash until their transaction ends, no more.
//!
//! Layout. Root slot [`UNDO_DIR_ROOT_SLOT`] names the directory's root
//! page; it lists [`DIR_PARTS`] partition pages, whose entries each name
//! the first page of one segment (0: free). Both are `UndoDir` pages:
//! `version u8 | kind u8 (0 root, 1 partition) | count u16 | count page
//! ids u64`. A segment is a chain of `Undo` pages: `version u8 | trx u64
//! | next page u64 (0: last) | records`, each record `length u16 (not 0)
//! | an undo record` (`txn::undo`, kind insert or insert run, of that
//! transaction);
//! a zero length, or the end of the page, ends a page's records.
//! Little-endian throughout; every page carries its checksum (page P1).
//!
//! Invariants (recovery relies on each):
//! * US1. A directory entry is the only reference to a segment. It is set
//!   in the mini-transaction that allocates the segment's first page, and
//!   pages leave a segment only in a mini-transaction that frees them and
//!   moves the entry past them (to the next page, or 0 after the last):
//!   after a crash every segment page is reachable from exactly one entry
//!   or free, never freed twice.
//! * US2. Entry `i` of partition `p` belongs to the registry slot
//!   `i * DIR_PARTS + p` ([`UndoSegments::entry_for`]): no two live
//!   transactions share an entry, and a transaction finds its entry
//!   without a search. Recovery empties every entry before any
//!   transaction begins.
//! * US3. A transaction with a segment and no commit mark never
//!   committed: recovery rolls it back with the segment's records and its
//!   undo-tree records together, newest first. An insert-only transaction
//!   whose segment has at most [`UndoSegments::free_batch`] pages commits by emptying
//!   its entry and freeing its pages in one mini-transaction (the commit
//!   LSN is that one's; no mark, nothing for purge). Any other commits
//!   with its commit mark first (UL2) and frees its segment after.
//! * US4. UL1 holds for segment records: a record's append commits before
//!   the change it undoes.
//! * US5. A page read from a segment must be an `Undo` page of this
//!   version and transaction, and its records must decode (undo U3) as
//!   insert or insert-run records (undo U7) of that transaction, with
//!   sequence numbers above 0 and below the insert bit; anything else is
//!   reported as a
//!   corrupt page, never skipped. A chain that comes back to a page is
//!   corrupt too.

use std::collections::HashSet;

use crate::buffer::Load;
use crate::log::Lsn;
use crate::mtr::{Mtr, Op, PageHandle};
use crate::page::{self, PAGE_HEADER, PageId, PageType, get_u16, get_u64};
use crate::store::{Store, alloc_page, free_page};
use crate::{Error, Result};

use super::registry::TrxId;
use super::undo::{RollPtr, UndoKind, UndoRecord};

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
}

impl Segment {
    /// Pages in the segment.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Its directory entry and first page (what [`UndoSegments::free`]
    /// takes).
    pub fn head(&self) -> (Entry, PageId) {
        let first = self.pages.first().map_or(PageId(0), |p| p.0);
        (self.entry, first)
    }
}

/// A segment found in the directory at open (recovery).
#[derive(Clone, Copy, Debug)]
pub struct Found {
    /// Its entry.
    pub entry: Entry,
    /// Its first page.
    pub first: PageId,
    /// The transaction that wrote it.
    pub trx: TrxId,
}

/// The insert undo directory of a store.
#[derive(Clone, Debug)]
pub struct UndoSegments {
    /// The partition pages; empty when the store has no directory (a
    /// read-only open of a store this build never wrote).
    parts: Vec<PageId>,
    /// Entries per partition page.
    per_part: usize,
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
                    per_part,
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
        Ok(UndoSegments { parts, per_part })
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

    /// The entry of the transaction in registry slot `slot` (US2), if
    /// the directory has one for it (else its insert undo goes to the
    /// undo tree).
    pub fn entry_for(&self, slot: usize) -> Option<Entry> {
        let entry = Entry {
            part: slot % DIR_PARTS,
            index: slot / DIR_PARTS,
        };
        (entry.index < self.per_part && entry.part < self.parts.len()).then_some(entry)
    }

    fn part_page(&self, entry: Entry) -> Result<PageId> {
        self.parts
            .get(entry.part)
            .copied()
            .ok_or(Error::InvalidArgument {
                what: "undo directory entry",
                reason: format!("partition {} does not exist", entry.part),
            })
    }

    /// Room for records on a segment page.
    fn fits(store: &Store, at: usize, len: usize) -> bool {
        at + 2 + len <= store.pool().page_size()
    }

    /// Append insert undo record `seq` of `trx`, encoded as `rec`, to the
    /// transaction's segment, creating it in `entry` on the first record
    /// (US1, US4). Returns the append's LSN; `Ok(None)` if the record
    /// cannot go into a segment (longer than a page holds: the caller
    /// puts it in the undo tree).
    pub fn append(
        &self,
        store: &Store,
        seg: &mut Option<Segment>,
        entry: Entry,
        trx: TrxId,
        seq: u64,
        rec: &[u8],
    ) -> Result<Option<Lsn>> {
        if !Self::fits(store, SEG_RECORDS, rec.len()) || rec.len() > usize::from(u16::MAX) {
            return Ok(None);
        }
        let mut bytes = Vec::with_capacity(2 + rec.len());
        bytes.extend_from_slice(&(rec.len() as u16).to_le_bytes());
        bytes.extend_from_slice(rec);
        let mut mtr = store.mtr()?;
        match seg {
            Some(s) if Self::fits(store, s.end, rec.len()) => {
                let last = s.pages.last().map_or(PageId(0), |p| p.0);
                let h = mtr.latch(last, Load::Verify)?;
                write(&mut mtr, h, s.end, &bytes)?;
                let lsn = commit(mtr)?;
                s.end += bytes.len();
                Ok(Some(lsn))
            }
            Some(s) => {
                // The superblock first (store T3), then the old last page,
                // and only then the allocation, which is the first change:
                // nothing that can fail comes after it but the writes
                // (mtr M4; a failure after a change poisons the pool).
                mtr.latch(PageId(0), Load::Verify)?;
                let last = s.pages.last().map_or(PageId(0), |p| p.0);
                let old = mtr.latch(last, Load::Verify)?;
                seg_page_trx(store, last, mtr.page(old)?, trx)?;
                let h = alloc_page(&mut mtr)?;
                let id = mtr.id(h)?;
                init_page(&mut mtr, h, trx, &bytes)?;
                write(&mut mtr, old, SEG_NEXT, &id.0.to_le_bytes())?;
                let lsn = commit(mtr)?;
                s.pages.push((id, seq));
                s.end = SEG_RECORDS + bytes.len();
                Ok(Some(lsn))
            }
            None => {
                // As above: superblock, then the directory page and its
                // checks, then the allocation (T3, M4).
                mtr.latch(PageId(0), Load::Verify)?;
                let dir = mtr.latch(self.part_page(entry)?, Load::Verify)?;
                let at = DIR_ENTRIES + 8 * entry.index;
                let present = {
                    let p = mtr.page(dir)?;
                    dir_entries(store, self.part_page(entry)?, p, DIR_PART)?;
                    get_u64(p, at)
                };
                if present != 0 {
                    return Err(corrupt(
                        store,
                        self.part_page(entry)?.0,
                        format!(
                            "undo directory entry {} holds segment {present} of another transaction (US2)",
                            entry.index
                        ),
                    ));
                }
                let h = alloc_page(&mut mtr)?;
                let id = mtr.id(h)?;
                init_page(&mut mtr, h, trx, &bytes)?;
                write(&mut mtr, dir, at, &id.0.to_le_bytes())?;
                let lsn = commit(mtr)?;
                *seg = Some(Segment {
                    entry,
                    pages: vec![(id, seq)],
                    end: SEG_RECORDS + bytes.len(),
                });
                Ok(Some(lsn))
            }
        }
    }

    /// The records of `seg` (of `trx`) with sequence numbers above
    /// `after`, oldest first; reads only the pages that may hold them.
    pub fn records_after(
        &self,
        store: &Store,
        seg: &Segment,
        trx: TrxId,
        after: u64,
    ) -> Result<Vec<(u64, UndoRecord)>> {
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
        out.retain(|(seq, _)| *seq > after);
        Ok(out)
    }

    /// Every segment in the directory (recovery, US3).
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
                let trx = seg_page_owner(store, PageId(first), &fp)?;
                out.push(Found {
                    entry: Entry { part, index },
                    first: PageId(first),
                    trx,
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
    ) -> Result<Vec<(u64, UndoRecord)>> {
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

    /// Free the segment of `trx` that starts at `first` in `entry`, up
    /// to [`UndoSegments::free_batch`] pages per mini-transaction, each
    /// moving the entry past the pages it frees (US1). Returns the LSN of
    /// the last one, which empties the entry. With `in_one`, a segment
    /// longer than one batch is refused before anything changes (an
    /// insert-only commit must be one mini-transaction, US3).
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
        let dir_id = self.part_page(entry)?;
        let at = DIR_ENTRIES + 8 * entry.index;
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
        // The superblock first (store T3), then the directory, then
        // every page to free, all before the first change (mtr M4).
        mtr.latch(PageId(0), Load::Verify)?;
        let dir = mtr.latch(dir_id, Load::Verify)?;
        let present = {
            let p = mtr.page(dir)?;
            dir_entries(store, dir_id, p, DIR_PART)?;
            get_u64(p, at)
        };
        if present != head.0 {
            return Err(corrupt(
                store,
                dir_id.0,
                format!(
                    "undo directory entry {} names page {present}, not the segment's page {} (US1)",
                    entry.index, head.0
                ),
            ));
        }
        let mut batch = Vec::new();
        let mut next = head;
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
            next = PageId(get_u64(p, SEG_NEXT));
            batch.push(h);
        }
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
        Ok((next, commit(mtr)?))
    }
}

fn commit(mtr: Mtr<'_>) -> Result<Lsn> {
    mtr.commit()?.ok_or(Error::InvalidArgument {
        what: "undo segment change",
        reason: "a mini-transaction that changed pages logged nothing".into(),
    })
}

/// Make `h` an empty segment page of `trx` holding `first_record` (a
/// length-prefixed record).
fn init_page(mtr: &mut Mtr<'_>, h: PageHandle, trx: TrxId, first_record: &[u8]) -> Result<()> {
    mtr.apply(h, &Op::Init(PageType::Undo))?;
    let mut body = Vec::with_capacity(17 + first_record.len());
    body.push(SEG_VERSION);
    body.extend_from_slice(&trx.to_le_bytes());
    body.extend_from_slice(&0u64.to_le_bytes());
    body.extend_from_slice(first_record);
    write(mtr, h, PAGE_HEADER, &body)
}

/// Check that `p` is a segment page of transaction `trx` (US5).
fn seg_page_trx(store: &Store, id: PageId, p: &[u8], trx: TrxId) -> Result<()> {
    let owner = seg_page_owner(store, id, p)?;
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
    out: &mut Vec<(u64, UndoRecord)>,
) -> Result<()> {
    seg_page_trx(store, id, p, trx)?;
    parse_records(p, trx, out).map_err(|(at, reason)| {
        corrupt(
            store,
            id.0,
            format!("undo segment record at {at}: {reason}"),
        )
    })
}

/// The records of segment page `p` of `trx` (US5): the decoder recovery
/// and rollback use, and the fuzz target's.
pub(crate) fn parse_records(
    p: &[u8],
    trx: TrxId,
    out: &mut Vec<(u64, UndoRecord)>,
) -> std::result::Result<(), (usize, String)> {
    let mut at = SEG_RECORDS;
    while let Some(&[lo, hi]) = p.get(at..at + 2) {
        let len = usize::from(u16::from_le_bytes([lo, hi]));
        if len == 0 {
            break;
        }
        let bytes = p
            .get(at + 2..at + 2 + len)
            .ok_or((at, format!("length {len} runs past the page")))?;
        let rec = UndoRecord::decode(bytes).map_err(|e| (at, e.to_string()))?;
        if rec.undo_no == 0 || rec.undo_no & RollPtr::INSERT_BIT != 0 {
            return Err((at, format!("sequence number {} out of range", rec.undo_no)));
        }
        if !matches!(rec.kind, UndoKind::Insert | UndoKind::InsertRun) || rec.trx != trx {
            return Err((
                at,
                format!(
                    "a {:?} record of transaction {} in an insert segment of {trx}",
                    rec.kind, rec.trx
                ),
            ));
        }
        out.push((rec.undo_no, rec));
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
            old_value: None,
            changed: 0,
        }
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
        let entry = segs.entry_for(37).unwrap();
        assert_eq!(entry, Entry { part: 5, index: 2 });
        let mut seg = None;
        let n = 20_000u64;
        for seq in 1..=n {
            let r = rec(42, seq, 20);
            assert!(
                segs.append(&store, &mut seg, entry, 42, seq, &r.encode())
                    .unwrap()
                    .is_some()
            );
        }
        let seg = seg.unwrap();
        assert!(
            seg.page_count() > UndoSegments::free_batch(&store),
            "{} pages: the free below should take more than one batch",
            seg.page_count()
        );
        let all = segs.records_after(&store, &seg, 42, 0).unwrap();
        assert_eq!(all.len() as u64, n);
        assert!(
            all.iter()
                .enumerate()
                .all(|(i, (s, r))| *s == i as u64 + 1 && *r == rec(42, *s, 20))
        );
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
        segs.append(&store, &mut again, entry, 43, 1, &rec(43, 1, 3).encode())
            .unwrap();
        assert_eq!(segs.existing(&store).unwrap()[0].trx, 43);
    }

    /// A power loss after some of a segment's free batches leaves the
    /// entry at the first page not freed: the rest of the chain is intact
    /// and is freed after reopening, and every page is freed once (US1).
    #[test]
    fn a_crash_part_way_through_a_free_leaves_the_rest_to_free() {
        let fs = SimFs::new(3);
        let store = Store::create(Arc::new(fs.clone()), Path::new("/db"), test_options()).unwrap();
        let segs = UndoSegments::open(&store).unwrap();
        let entry = segs.entry_for(5).unwrap();
        let mut seg = None;
        let n = 8_000u64;
        for seq in 1..=n {
            segs.append(&store, &mut seg, entry, 7, seq, &rec(7, seq, 20).encode())
                .unwrap();
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
        assert!(!rest.is_empty() && rest.last().unwrap().0 == n);
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
        let e = segs.entry_for(0).unwrap();
        segs.append(&store, &mut seg, e, 9, 1, &rec(9, 1, 4).encode())
            .unwrap();
        let root = store.root(UNDO_DIR_ROOT_SLOT).unwrap();
        store.close().unwrap();
        let store = Store::open(Arc::new(fs), Path::new("/db"), test_options()).unwrap();
        assert_eq!(store.root(UNDO_DIR_ROOT_SLOT).unwrap(), root);
        let segs = UndoSegments::open(&store).unwrap();
        let found = segs.existing(&store).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(
            segs.chain_records(&store, found[0].first, 9).unwrap(),
            vec![(1, rec(9, 1, 4))]
        );
        // Slots past the directory's capacity have no entry (US2): their
        // inserts use the undo tree.
        let cap = DIR_PARTS * entries_per_page(store.pool().page_size());
        assert!(segs.entry_for(cap - 1).is_some());
        assert!(segs.entry_for(cap).is_none());
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
        let mut upd = rec(5, 2, 8);
        upd.kind = UndoKind::Update;
        upd.old_value = Some(vec![0; 20]);
        assert!(parse_records(&page_image(4096, 5, &[upd.encode()]), 5, &mut Vec::new()).is_err());
        let mut cut = good.clone();
        cut.pop();
        assert!(parse_records(&page_image(4096, 5, &[cut]), 5, &mut Vec::new()).is_err());
        let mut p = page_image(4096, 5, &[good]);
        p[SEG_RECORDS..SEG_RECORDS + 2].copy_from_slice(&5000u16.to_le_bytes());
        assert!(parse_records(&p, 5, &mut Vec::new()).is_err());
    }

    proptest! {
        /// Garbage after a page's header never panics, and whatever it
        /// accepts decodes as insert records of the page's transaction.
        #[test]
        fn garbage_pages_never_panic(body in proptest::collection::vec(any::<u8>(), 0..600), trx in 0u64..4) {
            let mut p = page_image(1024, trx, &[]);
            let end = (SEG_RECORDS + body.len()).min(p.len());
            p[SEG_RECORDS..end].copy_from_slice(&body[..end - SEG_RECORDS]);
            let mut out = Vec::new();
            if parse_records(&p, trx, &mut out).is_ok() {
                prop_assert!(out.iter().all(|(s, r)| !r.kind.has_old_value() && r.trx == trx && *s == r.undo_no));
            }
        }
    }
}
