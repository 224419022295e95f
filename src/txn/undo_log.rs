//! The undo log: where undo records, commit marks and the transaction id
//! reservation live, in one redo-logged B+tree (root slot
//! [`UNDO_ROOT_SLOT`]). Since tablespace format 5 most insert undo
//! records go to undo segments instead (`txn::undo_seg`), and since
//! format 7 most update and delete-mark records too; the tree keeps the
//! rest (transactions that found no idle segment entry, records longer
//! than a page, and what older formats wrote). Undo pages are ordinary B+tree pages, so undo
//! writes are mini-transactions like any other page change: crash-safe
//! through redo with no recovery code of their own, and evicted from the
//! buffer pool like any page (transactions larger than the pool work).
//!
//! Keys (big-endian numbers, so keys sort by partition, transaction, then
//! sequence; the partition is `trx % UNDO_PARTITIONS`, so concurrent
//! transactions append at different leaves instead of all at one):
//! * `'U' | partition u8 | trx u64 | seq u64` -> an [`UndoRecord`]: the
//!   `seq`th change of transaction `trx` (sequence numbers start at 1; the
//!   roll pointer of the version that change wrote is `seq`).
//! * `'U' | partition u8 | trx u64 | u64::MAX` -> `[version]`: the commit
//!   mark of `trx`. It sorts right after the transaction's records, so it
//!   is written to the leaf its records went to, and purge deletes a
//!   transaction's records and mark as one run of neighbouring keys.
//! * `'M'` -> `version u8 | reserved trx id u64 (LE)`: ids below it may
//!   have been used; the next run starts there. Format version 1 kept
//!   commit marks apart, under `'C' | partition u8 | trx u64`; `open`
//!   moves them (each mark written anew before the old one is deleted, so
//!   a crash part way only repeats the move) and then writes version 2.
//!
//! Invariants recovery relies on:
//! * UL1. A change's undo record is logged before the change (an earlier
//!   mini-transaction), so after a crash every change in the redo log has
//!   its undo record.
//! * UL2. A transaction that has undo-tree records at commit (or a long
//!   insert undo segment) is committed iff its commit mark exists; the
//!   mark is logged after every change of the transaction. (One whose
//!   remaining undo is all in a short insert undo segment commits by
//!   freeing it instead, `undo_seg` US3; one whose undo is all in a
//!   segment that holds update or delete-mark records, by setting the
//!   segment's committed bit, US7.)
//!   After recovery, a transaction with undo records and no mark never
//!   committed and is rolled back.
//! * UL3. Rollback deletes a transaction's undo records only after the
//!   changes they undo are reverted; purge deletes a committed
//!   transaction's undo records first and its mark last. A crash part way
//!   leaves records that the next rollback or purge handles again (both
//!   are idempotent: they act only where the record's header still names
//!   the undo record).
//! * UL4. No transaction id at or above the reservation appears in any
//!   logged record: the reservation is raised (and logged) before an id
//!   reaches it.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::btree::{Cursor, Direction, Tree};
use crate::log::Lsn;
use crate::page::PageId;
use crate::store::Store;
use crate::{Error, Result};

use super::registry::TrxId;
use super::undo::UndoRecord;

/// Root slot of the undo tree.
pub const UNDO_ROOT_SLOT: usize = 1;
/// Format version of the commit mark and the reservation record.
const UNDO_LOG_VERSION: u8 = 2;
/// The format with commit marks under `'C'` keys (migrated at open).
const UNDO_LOG_VERSION_SEPARATE_MARKS: u8 = 1;
/// The sequence number of a transaction's commit mark (no undo record has
/// it: sequence numbers count up from 1 per transaction).
const MARK_SEQ: u64 = u64::MAX;
/// Ids reserved at a time.
pub const TRX_ID_BATCH: u64 = 1 << 16;

const META_KEY: &[u8] = b"M";

/// Partitions of the undo and commit-mark key spaces: transactions append
/// at this many places, so their undo writes do not all queue for the
/// latch of one leaf.
pub const UNDO_PARTITIONS: u8 = 16;

fn partition(trx: TrxId) -> u8 {
    (trx % u64::from(UNDO_PARTITIONS)) as u8
}

/// Key of undo record `seq` of `trx`.
pub fn undo_key(trx: TrxId, seq: u64) -> [u8; 18] {
    let mut k = [0u8; 18];
    k[0] = b'U';
    k[1] = partition(trx);
    k[2..10].copy_from_slice(&trx.to_be_bytes());
    k[10..18].copy_from_slice(&seq.to_be_bytes());
    k
}

fn commit_key(trx: TrxId) -> [u8; 18] {
    undo_key(trx, MARK_SEQ)
}

/// Where format version 1 kept `trx`'s commit mark.
fn legacy_commit_key(trx: TrxId) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[0] = b'C';
    k[1] = partition(trx);
    k[2..10].copy_from_slice(&trx.to_be_bytes());
    k
}

fn trx_of(key: &[u8]) -> Option<TrxId> {
    let b: [u8; 8] = key.get(2..10)?.try_into().ok()?;
    Some(u64::from_be_bytes(b))
}

fn seq_of(key: &[u8]) -> Option<u64> {
    let b: [u8; 8] = key.get(10..18)?.try_into().ok()?;
    Some(u64::from_be_bytes(b))
}

/// A transaction purge works on: its id and its undo records (sequence
/// number, record) in order.
#[derive(Debug)]
pub struct PurgeItem {
    /// The transaction.
    pub trx: TrxId,
    /// Its undo records, oldest first.
    pub records: Vec<(u64, UndoRecord)>,
    /// Whether its commit mark was found.
    pub committed: bool,
}

/// The first key of partition `part` at or after transaction `from`.
fn partition_key(part: u8, from: TrxId) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[0] = b'U';
    k[1] = part;
    k[2..10].copy_from_slice(&from.to_be_bytes());
    k
}

/// The undo log of a store: its root page, and what purge knows of each
/// partition's emptiness.
///
/// Invariant UL5 (what lets purge skip a partition without reading it):
/// `written[p]` counts the writes to partition `p` (undo records and
/// commit marks) that have returned, each counted after its tree write
/// and whether or not it succeeded; `empty_at[p]` is a value `written[p]`
/// had when a scan that found the partition holding no key at all started
/// (`u64::MAX`, never a count, until then). While the two are equal, no
/// write has returned since that scan started, so the partition holds at
/// most keys of writes still in progress: records and marks of
/// transactions that have not committed yet (a write returns before its
/// transaction commits), which purge must not touch anyway. Purge
/// therefore finds nothing to do there without a descent. Deletes only
/// empty a partition and are not counted. The counts are this instance's:
/// the database's one `UndoLog` is the only writer of its undo tree (a
/// test or fuzz target that opens a second one on a live database must
/// not rely on purge seeing its writes).
#[derive(Debug)]
pub struct UndoLog {
    root: PageId,
    written: Box<[CachePadded<AtomicU64>]>,
    empty_at: Box<[CachePadded<AtomicU64>]>,
}

impl UndoLog {
    /// Open the undo log of `store`, creating its tree on first use, and
    /// return it with the reserved transaction id (UL4).
    pub fn open(store: &Store) -> Result<(UndoLog, TrxId)> {
        let root = match store.root(UNDO_ROOT_SLOT)? {
            PageId(0) if store.is_read_only() => {
                return Err(Error::NeedsRecovery {
                    dir: store.dir().to_path_buf(),
                    reason: "it has no undo log yet (it was never opened as a database)".into(),
                });
            }
            PageId(0) => {
                let t = Tree::create(store)?;
                let mut mtr = store.mtr()?;
                store.set_root(&mut mtr, UNDO_ROOT_SLOT, t.root())?;
                if let Some(lsn) = mtr.commit()? {
                    store.commit(lsn, crate::Durability::Sync)?;
                }
                t.root()
            }
            r => r,
        };
        let per_partition = |v: u64| {
            (0..UNDO_PARTITIONS)
                .map(|_| CachePadded::new(AtomicU64::new(v)))
                .collect()
        };
        let log = UndoLog {
            root,
            written: per_partition(0),
            empty_at: per_partition(u64::MAX),
        };
        let reserved = match log.tree(store).get(META_KEY)? {
            None => 0,
            Some(v) => match v.as_slice() {
                [UNDO_LOG_VERSION, rest @ ..] if rest.len() == 8 => crate::page::get_u64(rest, 0),
                [UNDO_LOG_VERSION_SEPARATE_MARKS, ..] if store.is_read_only() => {
                    return Err(Error::NeedsRecovery {
                        dir: store.dir().to_path_buf(),
                        reason: "its undo log is of format 1, which a read-write open migrates"
                            .into(),
                    });
                }
                [UNDO_LOG_VERSION_SEPARATE_MARKS, rest @ ..] if rest.len() == 8 => {
                    let reserved = crate::page::get_u64(rest, 0);
                    log.migrate_marks(store)?;
                    let lsn = log.reserve(store, reserved)?;
                    store.commit(lsn, crate::Durability::Sync)?;
                    reserved
                }
                [version, ..] => {
                    return Err(log.malformed(
                        store,
                        &format!("reservation record (format version {version})"),
                    ));
                }
                [] => return Err(log.malformed(store, "reservation record")),
            },
        };
        Ok((log, reserved))
    }

    /// Move format version 1's commit marks to their place after the
    /// transaction's records (see the module docs).
    fn migrate_marks(&self, store: &Store) -> Result<()> {
        let lo = [b'C'];
        let hi = [b'C' + 1];
        let old: Vec<Vec<u8>> = self
            .tree(store)
            .range(
                Bound::Included(&lo),
                Bound::Excluded(&hi),
                Direction::Forward,
            )
            .map(|item| item.map(|(k, _)| k))
            .collect::<Result<_>>()?;
        for k in old {
            let Some(trx) = trx_of(&k) else {
                return Err(self.malformed(store, "commit mark key"));
            };
            self.mark_committed(store, trx)?;
            self.tree(store).delete(&legacy_commit_key(trx))?;
        }
        Ok(())
    }

    fn tree<'s>(&self, store: &'s Store) -> Tree<'s> {
        Tree::open(store, self.root)
    }

    /// The keys in `[from, to)`, in order, read `limit` at a time.
    fn scan<'s>(&self, store: &'s Store, from: &[u8], to: &[u8], limit: usize) -> Cursor<'s> {
        self.tree(store)
            .range(
                Bound::Included(from),
                Bound::Excluded(to),
                Direction::Forward,
            )
            .batch_limit(limit)
    }

    /// Count a write to `trx`'s partition that has returned (UL5).
    fn wrote<T>(&self, trx: TrxId, r: Result<T>) -> Result<T> {
        if let Some(w) = self.written.get(usize::from(partition(trx))) {
            w.fetch_add(1, Ordering::AcqRel);
        }
        r
    }

    /// Record that ids below `upto` may be used (UL4).
    pub fn reserve(&self, store: &Store, upto: TrxId) -> Result<Lsn> {
        let mut v = vec![UNDO_LOG_VERSION];
        v.extend_from_slice(&upto.to_le_bytes());
        self.tree(store).put(META_KEY, &v)
    }

    /// Store undo record `seq` of `trx` (UL1).
    pub fn put(&self, store: &Store, trx: TrxId, seq: u64, rec: &UndoRecord) -> Result<Lsn> {
        self.wrote(
            trx,
            self.tree(store).put(&undo_key(trx, seq), &rec.encode()),
        )
    }

    /// Store `bytes` as undo record `seq` of `trx` as they are: for the
    /// fuzz target that puts records of either version (undo U5) where
    /// recovery rolls them back.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn put_raw(&self, store: &Store, trx: TrxId, seq: u64, bytes: &[u8]) -> Result<Lsn> {
        self.wrote(trx, self.tree(store).put(&undo_key(trx, seq), bytes))
    }

    /// Undo record `seq` of `trx`, if it still exists.
    pub fn get(&self, store: &Store, trx: TrxId, seq: u64) -> Result<Option<UndoRecord>> {
        match self.tree(store).get(&undo_key(trx, seq))? {
            None => Ok(None),
            Some(v) => UndoRecord::decode(&v).map(Some),
        }
    }

    /// Delete undo record `seq` of `trx`.
    pub fn delete(&self, store: &Store, trx: TrxId, seq: u64) -> Result<()> {
        self.tree(store).delete(&undo_key(trx, seq))?;
        Ok(())
    }

    /// Write `trx`'s commit mark (UL2); its LSN is the commit LSN.
    pub fn mark_committed(&self, store: &Store, trx: TrxId) -> Result<Lsn> {
        self.wrote(
            trx,
            self.tree(store).put(&commit_key(trx), &[UNDO_LOG_VERSION]),
        )
    }

    /// Whether `trx` has a commit mark.
    pub fn is_committed(&self, store: &Store, trx: TrxId) -> Result<bool> {
        Ok(self.tree(store).get(&commit_key(trx))?.is_some())
    }

    /// `trx`'s undo records with sequence numbers `>= from`, in `dir`
    /// order, as `(seq, record)`.
    pub fn records<'s>(
        &self,
        store: &'s Store,
        trx: TrxId,
        from: u64,
        dir: Direction,
    ) -> impl Iterator<Item = Result<(u64, UndoRecord)>> + 's {
        let lo = undo_key(trx, from);
        let hi = commit_key(trx);
        self.tree(store)
            .range(Bound::Included(&lo), Bound::Excluded(&hi), dir)
            .map(move |item| {
                let (k, v) = item?;
                let seq = seq_of(&k).ok_or_else(|| Error::CorruptPage {
                    file: store.pool().file().path().to_path_buf(),
                    page: 0,
                    reason: format!("undo log key {k:02x?} is not an undo record's key"),
                })?;
                let rec = UndoRecord::decode(&v)?;
                if rec.kind == super::undo::UndoKind::InsertRun {
                    // Runs live in insert undo segments only (undo U7).
                    return Err(Error::CorruptPage {
                        file: store.pool().file().path().to_path_buf(),
                        page: 0,
                        reason: format!(
                            "an insert-run undo record in the undo tree (trx {trx}, {seq})"
                        ),
                    });
                }
                Ok((seq, rec))
            })
    }

    /// The oldest transactions of partition `part` below `bound` that
    /// have undo records or a commit mark, at most `max` of them, each
    /// with its records in sequence order and whether it is marked
    /// committed: one scan for what purge works on next. A partition that
    /// no write has reached since a scan found it empty is not read at all
    /// (UL5).
    pub fn oldest(
        &self,
        store: &Store,
        part: u8,
        bound: TrxId,
        max: usize,
    ) -> Result<Vec<PurgeItem>> {
        let (Some(written), Some(empty_at)) = (
            self.written.get(usize::from(part)),
            self.empty_at.get(usize::from(part)),
        ) else {
            return Err(Error::InvalidArgument {
                what: "undo partition",
                reason: format!("{part} is not below {UNDO_PARTITIONS}"),
            });
        };
        // Read before the scan starts (UL5): a write that returns later
        // moves it on, and the next call scans again.
        let seen = written.load(Ordering::Acquire);
        if empty_at.load(Ordering::Acquire) == seen {
            return Ok(Vec::new());
        }
        let lo = partition_key(part, 0);
        let hi = partition_key(part, bound);
        let mut out: Vec<PurgeItem> = Vec::new();
        for item in self.scan(store, &lo, &hi, 4 * max) {
            let (k, v) = item?;
            let (Some(trx), Some(seq)) = (trx_of(&k), seq_of(&k)) else {
                return Err(self.malformed(store, "undo key"));
            };
            // Purge deletes the keys it rebuilds from (trx, seq): a key that
            // is not exactly that (filed under another partition, extra
            // bytes) would never be deleted and come back in every batch.
            if k.as_slice() != undo_key(trx, seq) {
                return Err(self.malformed(store, "undo key"));
            }
            if out.last().is_none_or(|last| last.trx != trx) {
                if out.len() == max {
                    break;
                }
                out.push(PurgeItem {
                    trx,
                    records: Vec::new(),
                    committed: false,
                });
            }
            if let Some(last) = out.last_mut() {
                if seq == MARK_SEQ {
                    last.committed = true;
                } else {
                    last.records.push((seq, UndoRecord::decode(&v)?));
                }
            }
        }
        // Nothing below the bound: known empty if nothing is at or above
        // it either (one entry read at most; what is there is not parsed,
        // as before, until the bound passes it).
        if out.is_empty() {
            let end = [b'U', part.wrapping_add(1)];
            let above = self.scan(store, &hi, &end, 1).next().transpose()?;
            if above.is_none() {
                empty_at.store(seen, Ordering::Release);
            }
        }
        Ok(out)
    }

    /// Delete the undo records and commit marks of `done` (as
    /// [`UndoLog::oldest`] returned them, so in key order: each
    /// transaction's mark after its records, UL3), each run of
    /// neighbouring keys in one mini-transaction.
    /// Every key must still be there (purge holds the partition): one that
    /// is not is damage, reported rather than left to come back forever.
    pub fn delete_purged(&self, store: &Store, done: &[PurgeItem]) -> Result<()> {
        let keys: Vec<[u8; 18]> = done
            .iter()
            .flat_map(|p| {
                let mark = p.committed.then(|| commit_key(p.trx));
                p.records
                    .iter()
                    .map(|(seq, _)| undo_key(p.trx, *seq))
                    .chain(mark)
            })
            .collect();
        let deleted = self.tree(store).delete_sorted(&keys)?;
        if deleted != keys.len() as u64 {
            return Err(Error::Corrupt {
                file: store.pool().file().path().to_path_buf(),
                offset: 0,
                reason: format!(
                    "purge found {} undo records and commit marks but could delete only {deleted}",
                    keys.len()
                ),
            });
        }
        Ok(())
    }

    fn malformed(&self, store: &Store, what: &str) -> Error {
        Error::Corrupt {
            file: store.pool().file().path().to_path_buf(),
            offset: 0,
            reason: format!("{what} in the undo log is malformed"),
        }
    }

    /// The smallest transaction id `>= from` in partition `part` that has
    /// undo records or a commit mark.
    pub fn next_trx_with_undo(
        &self,
        store: &Store,
        part: u8,
        from: TrxId,
    ) -> Result<Option<TrxId>> {
        let lo = partition_key(part, from);
        let hi = [b'U', part.saturating_add(1)];
        match self.scan(store, &lo, &hi, 1).next() {
            None => Ok(None),
            Some(item) => Ok(trx_of(&item?.0)),
        }
    }

    /// Every transaction with undo records or a commit mark, in id order
    /// (one descent per transaction, not a scan of every record).
    pub fn trxs_with_undo(&self, store: &Store) -> Result<Vec<TrxId>> {
        let mut out = Vec::new();
        for part in 0..UNDO_PARTITIONS {
            let mut from = 0;
            while let Some(t) = self.next_trx_with_undo(store, part, from)? {
                out.push(t);
                match t.checked_add(1) {
                    Some(n) => from = n,
                    None => break,
                }
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Every undo record of every transaction (for `check`).
    pub fn all_records<'s>(
        &self,
        store: &'s Store,
    ) -> impl Iterator<Item = Result<UndoRecord>> + 's {
        let lo = [b'U'];
        let hi = [b'U' + 1];
        self.tree(store)
            .range(
                Bound::Included(&lo),
                Bound::Excluded(&hi),
                Direction::Forward,
            )
            .filter_map(|item| match item {
                Ok((k, _)) if seq_of(&k) == Some(MARK_SEQ) => None,
                Ok((_, v)) => Some(UndoRecord::decode(&v)),
                Err(e) => Some(Err(e)),
            })
    }

    /// Check the undo tree's structure.
    pub fn verify(&self, store: &Store) -> Result<crate::btree::TreeCheck> {
        self.tree(store).verify()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{CrashMode, SimFs};
    use crate::txn::undo::UndoKind;
    use std::path::Path;
    use std::sync::Arc;

    use crate::store::test_options as opts;

    fn rec(trx: TrxId, seq: u64) -> UndoRecord {
        UndoRecord {
            kind: UndoKind::Insert,
            undo_no: seq,
            table: 1,
            trx,
            prev_trx: 0,
            prev_roll: crate::txn::RollPtr::NONE,
            key: vec![1, 2, 3],
            old: None,
            changed: 0,
        }
    }

    /// Marks sit after their records and are not records; purge's scan
    /// sees both; deleting a batch leaves nothing.
    #[test]
    fn marks_follow_records_and_purge_removes_both() {
        let fs = SimFs::new(1);
        let store = Store::create(Arc::new(fs.clone()), Path::new("/db"), opts()).unwrap();
        let (log, _) = UndoLog::open(&store).unwrap();
        let part = partition(100);
        for t in [100u64, 116, 132] {
            for seq in 1..=3 {
                log.put(&store, t, seq, &rec(t, seq)).unwrap();
            }
        }
        log.mark_committed(&store, 100).unwrap();
        log.mark_committed(&store, 116).unwrap();
        assert!(log.is_committed(&store, 100).unwrap());
        assert!(!log.is_committed(&store, 132).unwrap());
        let seqs: Vec<u64> = log
            .records(&store, 100, 1, Direction::Backward)
            .map(|r| r.unwrap().0)
            .collect();
        assert_eq!(seqs, [3, 2, 1]);
        assert_eq!(log.all_records(&store).count(), 9);
        let items = log.oldest(&store, part, 1000, 2).unwrap();
        let got: Vec<_> = items
            .iter()
            .map(|i| (i.trx, i.records.len(), i.committed))
            .collect();
        assert_eq!(got, [(100, 3, true), (116, 3, true)]);
        log.delete_purged(&store, &items).unwrap();
        assert_eq!(log.trxs_with_undo(&store).unwrap(), [132]);
        assert!(!log.is_committed(&store, 100).unwrap());
        // A mark whose records are gone (a crash between purge's deletes)
        // is still found and purged.
        log.mark_committed(&store, 148).unwrap();
        let items = log.oldest(&store, part, 1000, 8).unwrap();
        let got: Vec<_> = items
            .iter()
            .map(|i| (i.trx, i.records.len(), i.committed))
            .collect();
        assert_eq!(got, [(132, 3, false), (148, 0, true)]);
    }

    /// UL5: once a scan finds a partition empty, purge skips it until a
    /// write to it returns; a partition holding only transactions at or
    /// above the bound is scanned every time (not known empty) and
    /// returns nothing.
    #[test]
    fn an_empty_partition_is_skipped_until_written() {
        let fs = SimFs::new(1);
        let store = Store::create(Arc::new(fs.clone()), Path::new("/db"), opts()).unwrap();
        let (log, _) = UndoLog::open(&store).unwrap();
        let part = partition(100);
        let p = usize::from(part);
        let known_empty = |log: &UndoLog| {
            log.empty_at[p].load(Ordering::Acquire) == log.written[p].load(Ordering::Acquire)
        };
        assert!(!known_empty(&log), "nothing is known before a scan");
        assert!(log.oldest(&store, part, 1000, 8).unwrap().is_empty());
        assert!(known_empty(&log));
        // Another partition's write does not make this one scanned again.
        log.put(&store, 101, 1, &rec(101, 1)).unwrap();
        assert!(known_empty(&log));
        log.put(&store, 100, 1, &rec(100, 1)).unwrap();
        log.mark_committed(&store, 100).unwrap();
        assert!(!known_empty(&log));
        let items = log.oldest(&store, part, 1000, 8).unwrap();
        assert_eq!(items.len(), 1);
        assert!(items[0].committed);
        log.delete_purged(&store, &items).unwrap();
        // A transaction above the bound: not returned, not empty.
        log.put(&store, 2004, 1, &rec(2004, 1)).unwrap();
        assert!(log.oldest(&store, part, 1000, 8).unwrap().is_empty());
        assert!(!known_empty(&log));
        let items = log.oldest(&store, part, 3000, 8).unwrap();
        assert_eq!(items.len(), 1);
        assert!(!items[0].committed);
        log.delete(&store, 2004, 1).unwrap();
        assert!(log.oldest(&store, part, 3000, 8).unwrap().is_empty());
        assert!(known_empty(&log));
        // A commit mark alone counts as a write.
        log.mark_committed(&store, 116).unwrap();
        let items = log.oldest(&store, part, 3000, 8).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!((items[0].trx, items[0].committed), (116, true));
        assert!(log.oldest(&store, UNDO_PARTITIONS, 3000, 8).is_err());
    }

    /// A format 1 undo log (marks under 'C') is migrated at open, across
    /// a power loss after the migration.
    #[test]
    fn separate_marks_are_migrated() {
        let fs = SimFs::new(2);
        let store = Store::create(Arc::new(fs.clone()), Path::new("/db"), opts()).unwrap();
        let (log, _) = UndoLog::open(&store).unwrap();
        // Write what version 1 wrote.
        let mut meta = vec![UNDO_LOG_VERSION_SEPARATE_MARKS];
        meta.extend_from_slice(&5000u64.to_le_bytes());
        log.tree(&store).put(META_KEY, &meta).unwrap();
        for t in [7u64, 8, 9] {
            log.put(&store, t, 1, &rec(t, 1)).unwrap();
        }
        for t in [7u64, 9] {
            let lsn = log
                .tree(&store)
                .put(&legacy_commit_key(t), &[UNDO_LOG_VERSION_SEPARATE_MARKS])
                .unwrap();
            store.commit(lsn, crate::Durability::Sync).unwrap();
        }
        let fs2 = fs.crash(CrashMode::DropUnsynced);
        drop(store);
        let store = Store::open(Arc::new(fs2.clone()), Path::new("/db"), opts()).unwrap();
        let (log, reserved) = UndoLog::open(&store).unwrap();
        assert_eq!(reserved, 5000);
        let marks: Vec<bool> = [7u64, 8, 9]
            .iter()
            .map(|&t| log.is_committed(&store, t).unwrap())
            .collect();
        assert_eq!(marks, [true, false, true]);
        let legacy = log
            .tree(&store)
            .range(
                Bound::Included(&[b'C'][..]),
                Bound::Excluded(&[b'D'][..]),
                Direction::Forward,
            )
            .count();
        assert_eq!(legacy, 0);
        // Durable: another power loss right after the open changes nothing.
        let fs3 = fs2.crash(CrashMode::DropUnsynced);
        drop(store);
        let store = Store::open(Arc::new(fs3), Path::new("/db"), opts()).unwrap();
        let (log, reserved) = UndoLog::open(&store).unwrap();
        assert_eq!(reserved, 5000);
        assert!(log.is_committed(&store, 9).unwrap());
    }

    /// An undo record and commit mark filed under the wrong partition
    /// (damage with valid checksums) used to make purge find the
    /// transaction in every batch without ever deleting it, so the purge
    /// thread spun forever; now the scan reports the key. Deleting records
    /// that are not there is an error too.
    #[test]
    fn misfiled_undo_keys_are_refused_by_purge() {
        let fs = SimFs::new(4);
        let store = Store::create(Arc::new(fs), Path::new("/db"), opts()).unwrap();
        let (log, _) = UndoLog::open(&store).unwrap();
        let trx = 5u64;
        let wrong = partition(trx) + 1;
        for seq in [1, MARK_SEQ] {
            let mut k = undo_key(trx, seq);
            k[1] = wrong;
            let v = if seq == MARK_SEQ {
                vec![UNDO_LOG_VERSION]
            } else {
                rec(trx, seq).encode()
            };
            log.tree(&store).put(&k, &v).unwrap();
        }
        assert!(matches!(
            log.oldest(&store, wrong, 1000, 8),
            Err(Error::Corrupt { .. })
        ));
        let gone = PurgeItem {
            trx: 9,
            records: vec![(1, rec(9, 1))],
            committed: true,
        };
        assert!(matches!(
            log.delete_purged(&store, &[gone]),
            Err(Error::Corrupt { .. })
        ));
    }

    /// A reservation record of an unknown format is an error, not a panic.
    #[test]
    fn unknown_format_is_refused() {
        let fs = SimFs::new(3);
        let store = Store::create(Arc::new(fs), Path::new("/db"), opts()).unwrap();
        let (log, _) = UndoLog::open(&store).unwrap();
        for bad in [&[9u8, 0, 0, 0, 0, 0, 0, 0, 0][..], &[2, 1, 2], &[]] {
            log.tree(&store).put(META_KEY, bad).unwrap();
            assert!(matches!(UndoLog::open(&store), Err(Error::Corrupt { .. })));
        }
    }
}
