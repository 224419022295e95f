//! The undo log: where undo records, commit marks and the transaction id
//! reservation live, in one redo-logged B+tree (root slot
//! [`UNDO_ROOT_SLOT`]). Undo pages are ordinary B+tree pages, so undo
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
//! * `'C' | partition u8 | trx u64` -> `[version]`: transaction `trx`
//!   committed.
//! * `'M'` -> `version u8 | reserved trx id u64 (LE)`: ids below it may
//!   have been used; the next run starts there.
//!
//! Invariants recovery relies on:
//! * UL1. A change's undo record is logged before the change (an earlier
//!   mini-transaction), so after a crash every change in the redo log has
//!   its undo record.
//! * UL2. A transaction that wrote undo is committed iff its `'C'` mark
//!   exists; the mark is logged after every change of the transaction.
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

use crate::btree::{Direction, Tree};
use crate::log::Lsn;
use crate::page::PageId;
use crate::store::Store;
use crate::{Error, Result};

use super::registry::TrxId;
use super::undo::UndoRecord;

/// Root slot of the undo tree.
pub const UNDO_ROOT_SLOT: usize = 1;
/// Format version of the commit mark and the reservation record.
const UNDO_LOG_VERSION: u8 = 1;
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
pub fn undo_key(trx: TrxId, seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(18);
    k.push(b'U');
    k.push(partition(trx));
    k.extend_from_slice(&trx.to_be_bytes());
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

fn commit_key(trx: TrxId) -> Vec<u8> {
    let mut k = Vec::with_capacity(10);
    k.push(b'C');
    k.push(partition(trx));
    k.extend_from_slice(&trx.to_be_bytes());
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
}

/// The first key of `kind` (`'U'` or `'C'`) in partition `part` at or
/// after transaction `from`, and the end of that partition.
fn partition_range(kind: u8, part: u8, from: TrxId) -> (Vec<u8>, Vec<u8>) {
    let mut lo = vec![kind, part];
    lo.extend_from_slice(&from.to_be_bytes());
    let hi = vec![kind, part.saturating_add(1)];
    (lo, hi)
}

/// The undo log of a store (stateless apart from its root page).
#[derive(Clone, Copy, Debug)]
pub struct UndoLog {
    root: PageId,
}

impl UndoLog {
    /// Open the undo log of `store`, creating its tree on first use, and
    /// return it with the reserved transaction id (UL4).
    pub fn open(store: &Store) -> Result<(UndoLog, TrxId)> {
        let root = match store.root(UNDO_ROOT_SLOT)? {
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
        let log = UndoLog { root };
        let reserved = match log.tree(store).get(META_KEY)? {
            None => 0,
            Some(v) => match v.as_slice() {
                [UNDO_LOG_VERSION, rest @ ..] if rest.len() == 8 => crate::page::get_u64(rest, 0),
                _ => {
                    return Err(Error::Corrupt {
                        file: store.pool().file().path().to_path_buf(),
                        offset: 0,
                        reason: "undo log reservation record is malformed".into(),
                    });
                }
            },
        };
        Ok((log, reserved))
    }

    fn tree<'s>(&self, store: &'s Store) -> Tree<'s> {
        Tree::open(store, self.root)
    }

    /// Record that ids below `upto` may be used (UL4).
    pub fn reserve(&self, store: &Store, upto: TrxId) -> Result<Lsn> {
        let mut v = vec![UNDO_LOG_VERSION];
        v.extend_from_slice(&upto.to_le_bytes());
        self.tree(store).put(META_KEY, &v)
    }

    /// Store undo record `seq` of `trx` (UL1).
    pub fn put(&self, store: &Store, trx: TrxId, seq: u64, rec: &UndoRecord) -> Result<Lsn> {
        self.tree(store).put(&undo_key(trx, seq), &rec.encode())
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
        self.tree(store).put(&commit_key(trx), &[UNDO_LOG_VERSION])
    }

    /// Whether `trx` has a commit mark.
    pub fn is_committed(&self, store: &Store, trx: TrxId) -> Result<bool> {
        Ok(self.tree(store).get(&commit_key(trx))?.is_some())
    }

    /// Delete `trx`'s commit mark (purge, after its undo records).
    pub fn delete_mark(&self, store: &Store, trx: TrxId) -> Result<()> {
        self.tree(store).delete(&commit_key(trx))?;
        Ok(())
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
        let hi = undo_key(trx, u64::MAX);
        self.tree(store)
            .range(Bound::Included(&lo), Bound::Included(&hi), dir)
            .map(|item| {
                let (k, v) = item?;
                let seq = seq_of(&k).unwrap_or(0);
                Ok((seq, UndoRecord::decode(&v)?))
            })
    }

    /// The oldest transactions of partition `part` below `bound` that
    /// have undo records, at most `max` of them, each with its records in
    /// sequence order: one scan for what purge works on next.
    pub fn oldest(
        &self,
        store: &Store,
        part: u8,
        bound: TrxId,
        max: usize,
    ) -> Result<Vec<PurgeItem>> {
        let (lo, _) = partition_range(b'U', part, 0);
        let (hi, _) = partition_range(b'U', part, bound);
        let mut out: Vec<PurgeItem> = Vec::new();
        let cursor = self
            .tree(store)
            .range(
                Bound::Included(&lo),
                Bound::Excluded(&hi),
                Direction::Forward,
            )
            .batch_limit(4 * max);
        for item in cursor {
            let (k, v) = item?;
            let (Some(trx), Some(seq)) = (trx_of(&k), seq_of(&k)) else {
                return Err(self.malformed(store, "undo key"));
            };
            if out.last().is_none_or(|last| last.trx != trx) {
                if out.len() == max {
                    break;
                }
                out.push(PurgeItem {
                    trx,
                    records: Vec::new(),
                });
            }
            if let Some(last) = out.last_mut() {
                last.records.push((seq, UndoRecord::decode(&v)?));
            }
        }
        Ok(out)
    }

    /// Delete the undo records of `done`, then their commit marks (UL3:
    /// marks last), each run of neighbouring keys in one mini-transaction.
    pub fn delete_purged(&self, store: &Store, done: &[PurgeItem]) -> Result<()> {
        let mut undo: Vec<Vec<u8>> = done
            .iter()
            .flat_map(|p| p.records.iter().map(|(seq, _)| undo_key(p.trx, *seq)))
            .collect();
        undo.sort_unstable();
        self.tree(store).delete_sorted(&undo)?;
        let mut marks: Vec<Vec<u8>> = done.iter().map(|p| commit_key(p.trx)).collect();
        marks.sort_unstable();
        self.tree(store).delete_sorted(&marks)?;
        Ok(())
    }

    fn malformed(&self, store: &Store, what: &str) -> Error {
        Error::Corrupt {
            file: store.pool().file().path().to_path_buf(),
            offset: 0,
            reason: format!("{what} in the undo log is malformed"),
        }
    }

    /// The first key of `kind` in partition `part` at or after `from`.
    fn first_in(&self, store: &Store, kind: u8, part: u8, from: TrxId) -> Result<Option<TrxId>> {
        let (lo, hi) = partition_range(kind, part, from);
        let mut c = self
            .tree(store)
            .range(
                Bound::Included(&lo),
                Bound::Excluded(&hi),
                Direction::Forward,
            )
            .batch_limit(1);
        match c.next() {
            None => Ok(None),
            Some(item) => Ok(trx_of(&item?.0)),
        }
    }

    /// The smallest transaction id `>= from` in partition `part` that has
    /// undo records.
    pub fn next_trx_with_undo(
        &self,
        store: &Store,
        part: u8,
        from: TrxId,
    ) -> Result<Option<TrxId>> {
        self.first_in(store, b'U', part, from)
    }

    /// The smallest transaction id in partition `part` with a commit mark.
    pub fn first_mark(&self, store: &Store, part: u8) -> Result<Option<TrxId>> {
        self.first_in(store, b'C', part, 0)
    }

    /// Every transaction with undo records, in id order (one descent per
    /// transaction, not a scan of every record).
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
            .map(|item| UndoRecord::decode(&item?.1))
    }

    /// Check the undo tree's structure.
    pub fn verify(&self, store: &Store) -> Result<crate::btree::TreeCheck> {
        self.tree(store).verify()
    }
}
