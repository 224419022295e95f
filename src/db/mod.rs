//! The embedded database: tables with typed columns, secondary indexes,
//! and transactions (READ COMMITTED by default, or REPEATABLE READ) over
//! the storage layer.
//!
//! ```no_run
//! use quill::catalog::{Column, ColumnType, Value};
//! use quill::catalog::schema::{IndexDef, TableDef};
//! use quill::db::{Db, Options};
//!
//! # fn main() -> quill::Result<()> {
//! let db = Db::open("my-data", Options::default())?;
//! let users = db.create_table(TableDef {
//!     name: "users".into(),
//!     columns: vec![
//!         Column::new("id", ColumnType::Int64, false),
//!         Column::new("email", ColumnType::Text { max_len: 200 }, false),
//!     ],
//!     primary_key: vec![0],
//!     indexes: vec![IndexDef { name: "by_email".into(), columns: vec![1], unique: true }],
//! })?;
//! let mut txn = db.begin()?;
//! txn.insert(&users, &[Value::Int64(1), Value::Text("ada@example.org".into())])?;
//! txn.commit()?;
//! # Ok(()) }
//! ```
//!
//! Pieces: [`table`] (row and key encoding, version chains), [`txn`]
//! ([`Txn`]: statements, commit, rollback), [`purge`] (the background
//! purge thread), [`check`] (`quill check`). Open order: the store
//! recovers (redo); the catalog and the undo log are loaded; transaction
//! ids continue above the reservation (UL4); transactions that never
//! committed are rolled back from undo (UL2), before anything else runs;
//! then purge starts.

pub mod check;
mod drop_table;
pub mod online_index;
pub mod purge;
pub mod table;
#[cfg(test)]
mod tests;
pub mod txn;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::btree::{Direction, SortKeys, Tree};
use crate::catalog::RowRef;
use crate::catalog::schema::{Catalog, IndexDef, TableDef, TableSchema};
use crate::io::{RealFs, Vfs};
use crate::log::Durability;
use crate::page::PageId;
use crate::stats::Counter;
use crate::store::{Store, StoreOptions, StoreStats};
pub use crate::txn::LockStats;
use crate::txn::undo_log::{TRX_ID_BATCH, UndoLog};
use crate::txn::undo_seg::UndoSegments;
use crate::txn::{
    LockTable, RecHeader, RollPtr, SlotToken, TrxId, TrxRegistry, UndoKind, UndoRecord,
};
use crate::{Error, Result};

pub use check::CheckReport;
pub use table::Table;
pub use txn::{KeyBound, OwnedTxn, Rows, Savepoint, Txn};

/// Isolation level of a transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Isolation {
    /// Each statement reads a snapshot taken when it starts; writes act on
    /// the newest committed version (the default, as in PostgreSQL).
    #[default]
    ReadCommitted,
    /// Every read sees the snapshot taken at the first statement; writing
    /// a row another transaction changed after it fails with
    /// [`Error::Serialization`] (retry the transaction).
    RepeatableRead,
}

/// Per-transaction options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxnOptions {
    /// Isolation level.
    pub isolation: Isolation,
    /// When `commit` returns, and when others see the commit.
    pub durability: Durability,
}

/// Options for [`Db::open`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Create the database if the directory holds none (default true).
    pub create_if_missing: bool,
    /// Storage options: page size, buffer pool, log.
    pub store: StoreOptions,
    /// Defaults for [`Db::begin`].
    pub txn: TxnOptions,
    /// How long a statement waits for a row lock (default 10 s).
    pub lock_wait_timeout: Duration,
    /// Most transactions open at once (default 4096).
    pub max_transactions: usize,
    /// Run the background purge thread (default true).
    pub purge: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            store: StoreOptions::default(),
            txn: TxnOptions::default(),
            lock_wait_timeout: Duration::from_secs(10),
            max_transactions: 4096,
            purge: true,
        }
    }
}

/// What recovery did at open beyond redo.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TxnRecovery {
    /// Transactions found without a commit mark and rolled back.
    pub rolled_back: Vec<TrxId>,
    /// Undo records applied.
    pub undo_records: u64,
    /// Committed transactions whose undo awaits purge.
    pub history: u64,
    /// Time taken.
    pub duration: Duration,
}

/// Counters of the transaction layer.
#[derive(Debug, Default)]
pub(crate) struct DbCounters {
    pub(crate) commits: Counter,
    pub(crate) rollbacks: Counter,
    pub(crate) serialization_failures: Counter,
    pub(crate) purged_trx: Counter,
    pub(crate) purged_records: Counter,
    pub(crate) purged_rows: Counter,
}

/// What [`Db::stats`] reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DbStats {
    /// Transactions open now (or committed and waiting to be durable).
    pub active_transactions: usize,
    /// Committed transactions whose undo is not purged yet.
    pub history_length: i64,
    /// Transactions committed (that changed something).
    pub commits: u64,
    /// Transactions rolled back.
    pub rollbacks: u64,
    /// Serialization failures (REPEATABLE READ write conflicts).
    pub serialization_failures: u64,
    /// Row locks: waits, deadlocks, timeouts.
    pub locks: LockStats,
    /// Transactions purged.
    pub purged_transactions: u64,
    /// Undo records purged.
    pub purged_undo_records: u64,
    /// Delete-marked rows removed by purge.
    pub purged_rows: u64,
    /// Oldest transaction id some view may not see (the purge bound).
    pub purge_bound: TrxId,
    /// What recovery did at the last open.
    pub recovery: Option<TxnRecovery>,
    /// Why the purge thread stopped, if it did (an I/O failure; the
    /// database needs reopening).
    pub purge_error: Option<String>,
    /// Trees of dropped tables whose pages are not freed yet.
    #[serde(default)]
    pub pending_drops: usize,
    /// Undo segment pages kept for reuse by the next transactions
    /// (`txn::undo_seg` US6; none after a clean close).
    #[serde(default)]
    pub cached_undo_pages: usize,
    /// Committed transactions' undo segments that purge has not ended yet
    /// (`txn::undo_seg` US7).
    #[serde(default)]
    pub history_segments: usize,
    /// Undo segments started since open on a cached page (US6: no page
    /// allocation, no directory write).
    #[serde(default)]
    pub undo_segments_on_cached_pages: u64,
    /// Undo segments started since open on a newly allocated page.
    #[serde(default)]
    pub undo_segments_on_new_pages: u64,
}

/// Name of the file holding the transaction statistics of the last clean
/// close (read by `quill status`).
pub const TXN_STATS_FILE: &str = "txn-stats.json";

impl std::fmt::Display for DbStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "  transactions: {} active; {} committed, {} rolled back, {} serialization failures",
            self.active_transactions, self.commits, self.rollbacks, self.serialization_failures
        )?;
        writeln!(
            f,
            "  row locks: {} waits, {} deadlocks, {} lock-wait timeouts",
            self.locks.waits, self.locks.deadlocks, self.locks.timeouts
        )?;
        writeln!(
            f,
            "  purge: history length {} (committed transactions not purged yet); purged {} transactions, {} undo records, {} deleted rows; bound {}{}",
            self.history_length,
            self.purged_transactions,
            self.purged_undo_records,
            self.purged_rows,
            self.purge_bound,
            self.purge_error
                .as_ref()
                .map(|e| format!("; STOPPED: {e}"))
                .unwrap_or_default()
        )?;
        if self.pending_drops > 0 {
            writeln!(
                f,
                "  dropped tables: {} trees waiting to be freed (once the transactions older than their drop end)",
                self.pending_drops
            )?;
        }
        if let Some(r) = &self.recovery {
            writeln!(
                f,
                "  recovery at open: {} transactions rolled back ({} undo records) in {:.1} ms; {} committed transactions awaited purge",
                r.rolled_back.len(),
                r.undo_records,
                r.duration.as_secs_f64() * 1e3,
                r.history
            )?;
        }
        Ok(())
    }
}

/// The transaction statistics saved at the last clean close of the
/// database in `dir`, if any.
pub fn saved_stats(vfs: &dyn Vfs, dir: &Path) -> Option<DbStats> {
    let f = vfs
        .open(
            &dir.join(TXN_STATS_FILE),
            crate::io::OpenOptions::read_only(),
        )
        .ok()?;
    let n = usize::try_from(f.size().ok()?).ok()?;
    let mut buf = vec![0u8; n];
    f.read_exact_at(&mut buf, 0).ok()?;
    serde_json::from_slice(&buf).ok()
}

/// Shared state of an open database.
#[derive(Debug)]
pub struct DbInner {
    pub(crate) store: Store,
    pub(crate) catalog: Catalog,
    pub(crate) undo: UndoLog,
    /// Insert undo segments (`txn::undo_seg`).
    pub(crate) segs: UndoSegments,
    pub(crate) registry: TrxRegistry,
    pub(crate) locks: LockTable,
    tables: RwLock<HashMap<String, Arc<table::TableState>>>,
    by_id: RwLock<HashMap<u64, Arc<table::TableState>>>,
    /// Ids below this may be used (UL4).
    reserved: AtomicU64,
    reserve_lock: Mutex<()>,
    pub(crate) counters: DbCounters,
    pub(crate) history: AtomicI64,
    pub(crate) purge_stop: AtomicBool,
    pub(crate) purge_wake: (Mutex<bool>, Condvar),
    pub(crate) purge_error: Mutex<Option<String>>,
    /// One purger per undo partition at a time (the thread, a helping
    /// committer, or [`Db::purge_now`]).
    pub(crate) purge_locks: Vec<Mutex<()>>,
    recovery: Option<TxnRecovery>,
    opts: Options,
    /// DDL's lock. Every DDL statement takes it before its table's schema
    /// lock (never the other way round). CREATE/DROP TABLE and DROP INDEX
    /// hold it to the end: their steps on the catalog and the superblock's
    /// list of trees to free (`drop_table` DROP5) must not interleave. An
    /// index build (bulk, or an online build's finishing check) lets go of
    /// it once it holds its table's schema lock, which alone keeps other
    /// DDL off that table, so builds on different tables run at once. A
    /// DDL statement on a table being built still waits for that build
    /// while holding this lock, and so holds up DDL on other tables.
    ddl: Mutex<()>,
    /// By tree root: the schema its table had when the tree was dropped
    /// (a table or an index drop while open), until the tree is freed
    /// (drop_table DROP2, DROP5).
    dropped: Mutex<HashMap<u64, Arc<TableSchema>>>,
    /// How many trees the superblock lists as pending drops: raised after
    /// a drop lists its trees, lowered after one is freed (drop_table
    /// DROP4), so the purge thread's loop and `stats` need not read the
    /// superblock.
    pending_drops: AtomicUsize,
    vfs: Arc<dyn Vfs>,
    dir: std::path::PathBuf,
    /// Opened read-only: nothing is written, ever.
    pub(crate) read_only: bool,
}

impl DbInner {
    /// The state of table `name`, or `Err(NoSuchTable)`.
    pub(crate) fn table_state(&self, name: &str) -> Result<Arc<table::TableState>> {
        self.tables
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NoSuchTable {
                name: name.to_string(),
            })
    }

    /// `Err(ReadOnly)` for a change asked of a read-only database.
    pub(crate) fn check_writable(&self, what: &'static str) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly {
                dir: self.dir.clone(),
                what,
            });
        }
        Ok(())
    }
}

/// An open database. Share it between threads by reference (it is
/// `Sync`); each thread runs its own [`Txn`].
#[derive(Debug)]
pub struct Db {
    inner: Arc<DbInner>,
    purge: PurgeGuard,
}

/// Stops and joins the purge thread when dropped.
#[derive(Debug)]
struct PurgeGuard {
    inner: Arc<DbInner>,
    handle: Option<JoinHandle<()>>,
}

impl Drop for PurgeGuard {
    fn drop(&mut self) {
        self.inner.purge_stop.store(true, Ordering::Release);
        {
            let (m, cv) = &self.inner.purge_wake;
            *m.lock() = true;
            cv.notify_all();
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The tables of `catalog`, by name and by id.
type TableMaps = (
    HashMap<String, Arc<table::TableState>>,
    HashMap<u64, Arc<table::TableState>>,
);

fn table_maps(catalog: &Catalog) -> TableMaps {
    let mut by_name = HashMap::new();
    let mut by_id = HashMap::new();
    for s in catalog.tables() {
        let st = Arc::new(table::TableState::new(s.clone()));
        by_name.insert(s.def.name.clone(), st.clone());
        by_id.insert(s.id, st);
    }
    (by_name, by_id)
}

impl DbInner {
    /// A registry slot and id, raising the id reservation first when the
    /// id reaches it (UL4); the caller releases the slot
    /// ([`TrxRegistry::release`]) or abandons it.
    pub(crate) fn begin_slot(&self) -> Result<SlotToken> {
        let slot = self.registry.begin()?;
        let id = slot.id();
        if id >= self.reserved.load(Ordering::Acquire) {
            let _g = self.reserve_lock.lock();
            let mut r = self.reserved.load(Ordering::Acquire);
            if id >= r {
                while id >= r {
                    r += TRX_ID_BATCH;
                }
                self.undo.reserve(&self.store, r)?; // drops (releases) the slot on failure
                self.reserved.store(r, Ordering::Release);
            }
        }
        Ok(slot.detach())
    }

    /// Transactions below this id are visible to every view, present and
    /// future (registry R4).
    pub(crate) fn purge_bound(&self) -> TrxId {
        self.registry.purge_bound()
    }

    /// A read view for the transaction in `slot`.
    pub(crate) fn open_view(&self, slot: &SlotToken) -> crate::txn::ReadView {
        let log = self.store.log();
        crate::txn::ReadView::open(&self.registry, slot, &|| log.durable_lsn().0)
    }

    pub(crate) fn table_by_id(&self, id: u64) -> Option<Arc<table::TableState>> {
        self.by_id.read().get(&id).cloned()
    }

    fn stats(&self) -> DbStats {
        let c = &self.counters;
        let starts = self.segs.starts();
        DbStats {
            active_transactions: self.registry.active(),
            history_length: self.history.load(Ordering::Relaxed),
            commits: c.commits.get(),
            rollbacks: c.rollbacks.get(),
            serialization_failures: c.serialization_failures.get(),
            locks: self.locks.stats(),
            purged_transactions: c.purged_trx.get(),
            purged_undo_records: c.purged_records.get(),
            purged_rows: c.purged_rows.get(),
            purge_bound: self.registry.purged_upto(),
            recovery: self.recovery.clone(),
            purge_error: self.purge_error.lock().clone(),
            pending_drops: self.pending_drops.load(Ordering::Relaxed),
            cached_undo_pages: self.segs.cached_pages(),
            history_segments: self.segs.history_len(),
            undo_segments_on_cached_pages: starts.reused,
            undo_segments_on_new_pages: starts.allocated,
        }
    }
}

/// Revert the change undo record `rec` describes, if the record's header
/// still names it by `roll` (its sequence number, with the insert bit if
/// the record is in an insert undo segment: UL3, undo U6): restore the
/// previous version, or remove an inserted record, and remove secondary
/// entries no version still needs (TB1). The caller holds the row's lock
/// or runs alone (recovery), or the change is one already undone whose
/// lock a refused call released (wait W5; a rollback to a savepoint reads
/// a segment's undone records again): then the header no longer names
/// the record, whoever has written the row since, and nothing is done.
pub(crate) fn undo_change(db: &DbInner, rec: &UndoRecord, roll: RollPtr) -> Result<()> {
    let Some(t) = db.table_by_id(rec.table) else {
        return Ok(());
    };
    // Not through the schema lock: the caller holds row locks
    // (`TableState::latest`).
    let schema = t.latest();
    let store = &db.store;
    let Some((h, row)) = table::read_rec(store, &schema, &rec.key)? else {
        return Ok(());
    };
    if h.trx != rec.trx || h.roll != roll {
        return Ok(()); // the change never reached the record
    }
    let values = table::decode(&schema, &row)?;
    // A delta is rebuilt from `row`, the version this change wrote (U9).
    let restored = match rec.kind {
        UndoKind::Insert | UndoKind::InsertRun => None,
        UndoKind::Update | UndoKind::DeleteMark => rec.previous_version(&row)?,
    };
    match restored {
        None => {
            for i in schema.live_indexes() {
                if let Some(tree) = table::secondary(store, &schema, i) {
                    let k = table::sec_key_of(&schema, i, &values);
                    tree.delete(&table::entry_key(&k, &rec.key))?;
                }
            }
            table::clustered(store, &schema).delete(&rec.key)?;
        }
        Some(restored) => {
            table::clustered(store, &schema).put(&rec.key, &restored.0.encode(&restored.1))?;
            if rec.kind == UndoKind::Update && schema.live_indexes().next().is_some() {
                let old_values = table::decode(&schema, &restored.1)?;
                let bound = db.purge_bound();
                for i in schema.live_indexes() {
                    let k = table::sec_key_of(&schema, i, &values);
                    if k == table::sec_key_of(&schema, i, &old_values) {
                        continue;
                    }
                    let cur = Some(restored.clone());
                    if !table::needed_has_key(db, &schema, i, &k, cur, bound, false)?
                        && let Some(tree) = table::secondary(store, &schema, i)
                    {
                        tree.delete(&table::entry_key(&k, &rec.key))?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The rows of a run of inserts to undo (undo U7): those of `table` at
/// or after `key` whose insert roll pointer's number is in `lo..=hi`.
#[derive(Debug)]
pub(crate) struct Span {
    pub(crate) lo: u64,
    pub(crate) hi: u64,
    /// The run's first number: a row of the transaction numbered in
    /// `first..lo` belongs to the run and was drawn before every row to
    /// undo, so its key is below theirs and the search stops there.
    pub(crate) first: u64,
    pub(crate) table: u64,
    pub(crate) key: Vec<u8>,
    /// Above every row of the run: its last row's key (included), known
    /// to the transaction, or the first key of the transaction's next run
    /// in the table (excluded), whose keys were drawn later.
    pub(crate) end: std::ops::Bound<Vec<u8>>,
}

/// The runs among `recs` (all the undo records of a transaction, any
/// order), each ending before the next record (undo U7), and the other
/// records: what recovery rolls back.
/// An undo record to undo: its sequence number, the record, and the roll
/// pointer naming it if it is in a segment (`None`: in the undo tree,
/// named by its sequence number).
pub(crate) type ToUndo = (u64, UndoRecord, Option<RollPtr>);

pub(crate) fn runs_of(mut recs: Vec<ToUndo>) -> (Vec<ToUndo>, Vec<Span>) {
    recs.sort_unstable_by_key(|r| r.0);
    let mut spans = Vec::new();
    for (i, (seq, rec, _)) in recs.iter().enumerate() {
        if rec.kind == UndoKind::InsertRun {
            let hi = recs
                .get(i + 1)
                .map_or(RollPtr::INSERT_BIT - 1, |next| next.0.saturating_sub(1));
            let end = recs
                .iter()
                .skip(i + 1)
                .find(|r| r.1.kind == UndoKind::InsertRun && r.1.table == rec.table)
                .map_or(std::ops::Bound::Unbounded, |r| {
                    std::ops::Bound::Excluded(r.1.key.clone())
                });
            spans.push(Span {
                lo: *seq,
                hi,
                first: *seq,
                table: rec.table,
                key: rec.key.clone(),
                end,
            });
        }
    }
    recs.retain(|r| r.1.kind != UndoKind::InsertRun);
    (recs, spans)
}

/// Undo `recs` and `spans`, newest first: undo-tree records (no roll
/// pointer given: theirs is their number; deleted once undone, UL3),
/// segment records (with the roll pointer naming them, `undo_seg`; freed
/// with their segment by the caller) and runs of inserts (undo U7) of one
/// transaction. No record lies inside a run, so a run is undone in its
/// place in that order. Returns how many records and rows it undid.
pub(crate) fn undo_all(
    db: &DbInner,
    trx: TrxId,
    mut recs: Vec<ToUndo>,
    mut spans: Vec<Span>,
) -> Result<u64> {
    recs.sort_unstable_by_key(|r| std::cmp::Reverse(r.0));
    spans.sort_unstable_by_key(|s| std::cmp::Reverse(s.lo));
    let mut spans = spans.into_iter().peekable();
    let mut n = 0;
    for (seq, rec, roll) in recs {
        while let Some(span) = spans.next_if(|s| s.lo > seq) {
            n += undo_span(db, trx, &span)?;
        }
        match roll {
            None => {
                undo_change(db, &rec, RollPtr(seq))?;
                db.undo.delete(&db.store, trx, seq)?;
            }
            Some(roll) => undo_change(db, &rec, roll)?,
        }
        n += 1;
    }
    for span in spans {
        n += undo_span(db, trx, &span)?;
    }
    Ok(n)
}

/// Remove the rows of a run (undo U7): every record of the span's table
/// from its key on whose header names `trx` with an insert roll pointer
/// numbered in the span, newest first, each as its own insert's undo
/// would. The search goes down from the span's end (the run's last key,
/// or the next run's first key in the table, or the table's end; other
/// transactions' rows drawn meanwhile are read too) and stops at the
/// span's key, or earlier at a row of the same run drawn before the
/// span (a statement rolled back inside a run).
fn undo_span(db: &DbInner, trx: TrxId, span: &Span) -> Result<u64> {
    let Some(t) = db.table_by_id(span.table) else {
        return Ok(0);
    };
    let schema = t.latest();
    let mut doomed = Vec::new();
    let tree = table::clustered(&db.store, &schema);
    let end = match &span.end {
        std::ops::Bound::Included(k) => std::ops::Bound::Included(k.as_slice()),
        std::ops::Bound::Excluded(k) => std::ops::Bound::Excluded(k.as_slice()),
        std::ops::Bound::Unbounded => std::ops::Bound::Unbounded,
    };
    for item in tree.range(
        std::ops::Bound::Included(span.key.as_slice()),
        end,
        Direction::Backward,
    ) {
        let (pk, v) = item?;
        let (h, _) = crate::txn::RecHeader::decode(&v)?;
        if h.trx != trx || !h.roll.is_insert() {
            continue;
        }
        let seq = h.roll.seq();
        if (span.lo..=span.hi).contains(&seq) {
            doomed.push((pk, h.roll));
        } else if (span.first..span.lo).contains(&seq) {
            break;
        }
    }
    let n = doomed.len() as u64;
    for (pk, roll) in doomed {
        let rec = UndoRecord {
            kind: UndoKind::Insert,
            undo_no: roll.seq(),
            table: span.table,
            trx,
            prev_trx: 0,
            prev_roll: RollPtr::NONE,
            key: pk,
            old: None,
            changed: 0,
        };
        undo_change(db, &rec, roll)?;
    }
    Ok(n)
}

/// Roll back every transaction that has undo but no commit mark (UL2,
/// undo_seg US3, US7): first those with an undo segment (with their
/// undo-tree records), freeing their segments, then the rest. A committed
/// transaction's segment is queued for purge (US7), which works through
/// any history it holds and then ends it.
fn recover(db: &DbInner) -> Result<TxnRecovery> {
    let started = Instant::now();
    let mut report = TxnRecovery::default();
    for seg in db.segs.existing(&db.store)? {
        let committed = seg.committed || db.undo.is_committed(&db.store, seg.trx)?;
        if db.read_only {
            if committed {
                continue; // pages to purge, nothing a reader needs
            }
            return Err(Error::NeedsRecovery {
                dir: db.dir.clone(),
                reason: format!(
                    "transaction {} never committed and must be rolled back",
                    seg.trx
                ),
            });
        }
        if !committed {
            let mut recs: Vec<_> = db
                .undo
                .records(&db.store, seg.trx, 1, Direction::Forward)
                .map(|r| r.map(|(seq, rec)| (seq, rec, None)))
                .collect::<Result<_>>()?;
            recs.extend(
                db.segs
                    .chain_records(&db.store, seg.first, seg.trx)?
                    .into_iter()
                    .map(|r| (r.seq, r.rec, Some(r.roll))),
            );
            let (recs, spans) = runs_of(recs);
            report.undo_records += undo_all(db, seg.trx, recs, spans)?;
            report.rolled_back.push(seg.trx);
            db.segs
                .free(&db.store, seg.entry, seg.first, seg.trx, false)?;
        } else {
            // Purge ends it, after its history if it holds any (US7). One
            // committed by its mark alone gets the bit first: purge may
            // delete the mark before it ends the segment.
            if !seg.committed {
                UndoSegments::set_committed(&db.store, seg.first, seg.trx)?;
            }
            db.segs.queue(crate::txn::undo_seg::Found {
                committed: true,
                ..seg
            });
            report.history += 1;
        }
    }
    for t in db.undo.trxs_with_undo(&db.store)? {
        if db.undo.is_committed(&db.store, t)? {
            report.history += 1;
            continue;
        }
        if db.read_only {
            return Err(Error::NeedsRecovery {
                dir: db.dir.clone(),
                reason: format!("transaction {t} never committed and must be rolled back"),
            });
        }
        let recs: Vec<_> = db
            .undo
            .records(&db.store, t, 1, Direction::Backward)
            .collect::<Result<_>>()?;
        let recs = recs
            .into_iter()
            .map(|(seq, rec)| (seq, rec, None))
            .collect();
        report.undo_records += undo_all(db, t, recs, Vec::new())?;
        report.rolled_back.push(t);
    }
    report.duration = started.elapsed();
    Ok(report)
}

impl Db {
    /// Open the database in directory `path` (creating it if missing and
    /// `opts.create_if_missing`), recovering from a crash if needed.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        Db::open_with(Arc::new(RealFs::new()), path.as_ref(), opts)
    }

    /// [`Db::open`] on a given file system (the simulated disk in tests).
    pub fn open_with(vfs: Arc<dyn Vfs>, path: &Path, opts: Options) -> Result<Db> {
        let store = if opts.create_if_missing {
            Store::open_or_create(vfs.clone(), path, opts.store.clone())?
        } else {
            Store::open(vfs.clone(), path, opts.store.clone())?
        };
        Db::start(vfs, path, store, opts)
    }

    /// Open the database in directory `path` without writing to it, ever
    /// (for inspection tools, and for databases on read-only file systems
    /// or media): see [`Store::open_read_only`]. Reads and read-only
    /// transactions work; anything that would write fails with
    /// [`Error::ReadOnly`]. A database that was not closed cleanly (redo
    /// to apply, or a transaction to roll back) is refused with
    /// [`Error::NeedsRecovery`]. Other read-only opens may share the
    /// directory; a writer may not.
    pub fn open_read_only(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        Db::open_read_only_with(Arc::new(RealFs::new()), path.as_ref(), opts)
    }

    /// [`Db::open_read_only`] on a given file system.
    pub fn open_read_only_with(vfs: Arc<dyn Vfs>, path: &Path, opts: Options) -> Result<Db> {
        let store = Store::open_read_only(vfs.clone(), path, opts.store.clone())?;
        Db::start(
            vfs,
            path,
            store,
            Options {
                purge: false,
                ..opts
            },
        )
    }

    /// Load the catalog and the undo log of an open store, recover
    /// transactions (or, read-only, check that none needs it) and start
    /// purge.
    fn start(vfs: Arc<dyn Vfs>, path: &Path, store: Store, opts: Options) -> Result<Db> {
        let read_only = store.is_read_only();
        let catalog = Catalog::open(&store)?;
        let (undo, reserved) = UndoLog::open(&store)?;
        let segs = UndoSegments::open(&store)?;
        let (by_name, by_id) = table_maps(&catalog);
        let mut inner = DbInner {
            registry: TrxRegistry::new(opts.max_transactions, reserved),
            locks: LockTable::new(opts.lock_wait_timeout),
            store,
            catalog,
            undo,
            segs,
            tables: RwLock::new(by_name),
            by_id: RwLock::new(by_id),
            reserved: AtomicU64::new(reserved),
            reserve_lock: Mutex::new(()),
            counters: DbCounters::default(),
            history: AtomicI64::new(0),
            purge_stop: AtomicBool::new(false),
            purge_wake: (Mutex::new(false), Condvar::new()),
            purge_error: Mutex::new(None),
            purge_locks: (0..crate::txn::undo_log::UNDO_PARTITIONS)
                .map(|_| Mutex::new(()))
                .collect(),
            recovery: None,
            opts,
            ddl: Mutex::new(()),
            dropped: Mutex::new(HashMap::new()),
            pending_drops: AtomicUsize::new(0),
            vfs,
            dir: path.to_path_buf(),
            read_only,
        };
        if read_only {
            // Ids of read-only transactions are never logged (UL4 holds
            // trivially): no reservation is written.
            inner.reserved.store(u64::MAX, Ordering::Release);
        } else {
            let next = reserved + 1 + TRX_ID_BATCH;
            let lsn = inner.undo.reserve(&inner.store, next)?;
            inner.store.commit(lsn, Durability::Sync)?;
            inner.reserved.store(next, Ordering::Release);
        }
        let report = recover(&inner)?;
        if !report.rolled_back.is_empty() {
            tracing::info!(
                transactions = report.rolled_back.len(),
                undo_records = report.undo_records,
                ms = report.duration.as_millis() as u64,
                "rolled back transactions that never committed"
            );
        }
        inner
            .history
            .store(report.history as i64, Ordering::Relaxed);
        inner.recovery = Some(report);
        // Stale drop entries of live trees go first (DROP3), then the
        // unfinished index builds are dropped (catalog C6).
        drop_table::at_open(&inner)?;
        online_index::at_open(&inner)?;
        let inner = Arc::new(inner);
        let handle = if inner.opts.purge {
            Some(purge::start(inner.clone())?)
        } else {
            None
        };
        Ok(Db {
            purge: PurgeGuard {
                inner: inner.clone(),
                handle,
            },
            inner,
        })
    }

    /// Whether the database was opened read-only ([`Db::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// Create a table; durable when this returns.
    pub fn create_table(&self, def: TableDef) -> Result<Table> {
        self.inner.check_writable("creating a table")?;
        let _ddl = self.inner.ddl.lock();
        let schema = self.inner.catalog.create_table(&self.inner.store, def)?;
        let st = Arc::new(table::TableState::new(schema.clone()));
        self.inner
            .tables
            .write()
            .insert(schema.def.name.clone(), st.clone());
        self.inner.by_id.write().insert(schema.id, st.clone());
        Ok(Table { state: st })
    }

    /// The table named `name`.
    pub fn table(&self, name: &str) -> Result<Table> {
        self.inner.table_state(name).map(|state| Table { state })
    }

    /// Drop table `name`: it is gone when this returns (durably), and
    /// every statement on it fails with [`Error::NoSuchTable`], also in
    /// transactions that began before (a drop is DDL and commits on its
    /// own, as in MySQL). Its pages are freed for reuse in the background
    /// once every transaction that began before the drop has ended.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        drop_table::drop_table(&self.inner, name)
    }

    /// The longest key this database's B+trees hold, in bytes (a
    /// sixteenth of a page: 1,019 on 16 KiB pages). Every key a table
    /// writes must fit (catalog invariant C4): its primary key, and each
    /// secondary index key followed by the primary key, where a text or
    /// bytes column of `max_len` bytes counts as `3 + 2 * max_len`.
    pub fn max_key_len(&self) -> usize {
        Tree::open(&self.inner.store, PageId(0)).max_key_len()
    }

    /// Every table's schema.
    pub fn tables(&self) -> Vec<Arc<TableSchema>> {
        self.inner.catalog.tables()
    }

    /// Add a secondary index to a table, built in bulk from the rows while
    /// write statements on the table wait. That needs no transaction
    /// older than the build to be open, nor any view older than it (undo
    /// U9: no older undo record describes the new index, so no older
    /// version may need an entry in it): when one is, the build first
    /// waits for them to end, and if others keep starting meanwhile it
    /// builds as [`Db::create_index_online`] does, letting writers go on.
    /// So do not call it while a transaction of this thread is open (it
    /// would wait for it for ever), and know that a transaction left
    /// holding its slot after a failed rollback (until the database is
    /// reopened) keeps it waiting too: [`Db::create_index_cancelable`]
    /// can be stopped. Fails with [`Error::DuplicateKey`] if `index` is
    /// unique and two live rows share a key.
    pub fn create_index(&self, table: &str, index: IndexDef) -> Result<()> {
        self.create_index_cancelable(table, index, None)
    }

    /// [`Db::create_index`], ended with [`Error::Canceled`] once `cancel`
    /// is set while it waits or builds online (the index is dropped).
    pub fn create_index_cancelable(
        &self,
        table: &str,
        index: IndexDef,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<()> {
        if self.create_index_quiet(table, &index)? {
            return Ok(());
        }
        // Wait for the older ones before listing anything, then try the
        // bulk build again: a build that fails once listed (a duplicate,
        // a cancel) keeps its index's place for good (catalog C5), and a
        // table has 48 places.
        online_index::wait_for_older(&self.inner, cancel)?;
        if self.create_index_quiet(table, &index)? {
            return Ok(());
        }
        tracing::info!(
            table,
            index = %index.name,
            "CREATE INDEX builds online: other transactions keep starting"
        );
        online_index::create_index(&self.inner, table, index, cancel, &mut |_| Ok(())).map(|_| ())
    }

    /// [`Db::create_index`] in bulk under the table's schema lock, if no
    /// transaction or view older than the build is left; `false` (and
    /// nothing done) if one is.
    fn create_index_quiet(&self, table: &str, index: &IndexDef) -> Result<bool> {
        self.inner.check_writable("creating an index")?;
        let ddl = self.inner.ddl.lock();
        let t = self.table(table)?;
        let mut guard = t.state.schema.write();
        // With its schema lock held no other DDL can change or drop the
        // table, so the build lets DDL on other tables go on (their bulk
        // builds run in parallel).
        drop(ddl);
        t.state.check_live(&guard)?;
        let schema = guard.clone();
        let mut trial = (*schema).clone();
        trial.def.indexes.push(index.clone());
        trial.def.validate_except(&trial.dropped_indexes)?;
        let db = &*self.inner;
        trial.def.check_key_lengths_except(
            table::clustered(&db.store, &trial).max_key_len(),
            &trial.dropped_indexes,
        )?;
        let i = trial.def.indexes.len() - 1;
        // No statement runs on the table (its schema lock is held), and
        // every transaction that could have written it has an id below
        // `limit`: with the bound there, every version's writer is visible
        // to every view, present and future, so the newest versions are all
        // a view can read, and their rollback is over (U9).
        let limit = db.registry.id_limit();
        if db.purge_bound() < limit {
            return Ok(false);
        }
        // Every key in one arena, sorted there (`btree::key_sort`).
        let mut entries = SortKeys::new();
        let mut live = SortKeys::new();
        let mut sec = Vec::new();
        let tree = table::clustered(&db.store, &trial);
        let mut rows = tree.range(
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            Direction::Forward,
        );
        // Read in place: neither the batch nor a row is copied, and only
        // the index's columns are decoded (so, unlike `decode_row`, text in
        // other columns is not checked to be UTF-8 here; a read of such a
        // row still finds it).
        while let Some(item) = rows.next_entry() {
            let (pk, v) = item?;
            let (h, row) = RecHeader::decode(v)?;
            let row = RowRef::new(&trial.def.columns, row)?;
            table::sec_key_of_ref(&trial, i, &row, &mut sec)?;
            if index.unique && !h.deleted && !table::sec_key_has_null_ref(&trial, i, &row)? {
                live.push(&[&sec]);
            }
            // A delete-marked row keeps its entry until purge removes both.
            entries.push(&[&sec, pk]);
        }
        if index.unique {
            live.sort();
            if live.has_duplicate() {
                return Err(Error::DuplicateKey {
                    table: table.to_string(),
                    index: index.name.clone(),
                });
            }
        }
        drop(live);
        entries.sort();
        entries.dedup();
        let built = Tree::bulk_build(&db.store, entries.iter().map(|k| (k, [0u8; 0])))?;
        let lsn = db.store.log().end_lsn();
        db.store.commit(lsn, Durability::Sync)?;
        let new = db
            .catalog
            .add_index(&db.store, table, index.clone(), built.root(), false)?;
        t.state.install(&mut guard, new);
        Ok(true)
    }

    /// Add a secondary index to a table while other transactions keep
    /// writing it (PostgreSQL's CREATE INDEX CONCURRENTLY; the steps and
    /// their invariants are in [`online_index`]). Writers wait only for
    /// two short catalog changes, at the start and at the end; the build
    /// waits for each transaction that holds a row lock on a row it
    /// visits. Fails with [`Error::DuplicateKey`] if `index` is unique and
    /// two rows hold one key (counting a row that an uncommitted change
    /// would give that key back by rolling back), with
    /// [`Error::Canceled`] once `cancel` is set; the index is then
    /// dropped. It first waits until every transaction and view older than
    /// the index has ended (`online_index` OI6, as PostgreSQL's waits for
    /// older snapshots), so do not call it from a thread whose own
    /// transaction is open: the build would wait for it until canceled.
    pub fn create_index_online(
        &self,
        table: &str,
        index: IndexDef,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<online_index::IndexBuildReport> {
        online_index::create_index(&self.inner, table, index, cancel, &mut |_| Ok(()))
    }

    /// Drop secondary index `index` of table `table` (DDL: it commits on
    /// its own and is durable when this returns). Statements that start
    /// afterwards no longer see the index; its name is free at once and
    /// its pages are freed by the purge thread once no transaction or
    /// statement that could be using them is left.
    pub fn drop_index(&self, table: &str, index: &str) -> Result<()> {
        drop_table::drop_index(&self.inner, table, index)
    }

    /// Begin a transaction with the default options.
    pub fn begin(&self) -> Result<Txn<'_>> {
        Txn::new(&self.inner, self.inner.opts.txn)
    }

    /// Begin a transaction with `opts`.
    pub fn begin_with(&self, opts: TxnOptions) -> Result<Txn<'_>> {
        Txn::new(&self.inner, opts)
    }

    /// Begin a transaction that does not borrow the database
    /// ([`OwnedTxn`]), with the default options.
    pub fn begin_owned(&self) -> Result<OwnedTxn> {
        OwnedTxn::new(self.inner.clone(), self.inner.opts.txn)
    }

    /// Begin an [`OwnedTxn`] with `opts`.
    pub fn begin_owned_with(&self, opts: TxnOptions) -> Result<OwnedTxn> {
        OwnedTxn::new(self.inner.clone(), opts)
    }

    /// Counters of the transaction layer.
    pub fn stats(&self) -> DbStats {
        self.inner.stats()
    }

    /// Counters of the storage layer (buffer pool, pages, checkpoints).
    pub fn store_stats(&self) -> StoreStats {
        self.inner.store.stats()
    }

    /// The storage layer underneath (log statistics, checkpoints).
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Check every table: B+tree structure, every live row present in
    /// every secondary index, every secondary entry backed by a version of
    /// its row, unique indexes unique. Meant for a quiescent database.
    pub fn check(&self) -> Result<CheckReport> {
        check::check(&self.inner)
    }

    /// Run purge until the history is empty or nothing more can be purged
    /// now (for tests and tools; the purge thread does this on its own).
    pub fn purge_now(&self) -> Result<u64> {
        self.inner.check_writable("purge")?;
        let mut total = 0;
        loop {
            let n = purge::purge_batch(&self.inner, 1000)?;
            total += n;
            if n == 0 {
                drop_table::run_all(&self.inner)?;
                return Ok(total);
            }
        }
    }

    /// Stop purge, write every dirty page and close the store cleanly.
    pub fn close(self) -> Result<()> {
        let Db { inner, purge } = self;
        drop(purge);
        match Arc::try_unwrap(inner) {
            Ok(inner) if inner.read_only => inner.store.close(),
            Ok(inner) => {
                // No transaction runs: leave no cached undo page behind
                // (undo_seg US6). A failure leaves them cached on disk,
                // where the next open finds them; the close goes on.
                let released = match inner.store.pool().check_poisoned() {
                    Ok(()) => inner.segs.release_cached(&inner.store),
                    Err(_) => Ok(()),
                };
                if let Err(e) = &released {
                    tracing::warn!(error = %e, "could not free the cached undo pages");
                }
                let stats = inner.stats();
                if let Ok(json) = serde_json::to_vec_pretty(&stats) {
                    let path = inner.dir.join(TXN_STATS_FILE);
                    if let Err(e) = crate::io::write_small_file(inner.vfs.as_ref(), &path, &json) {
                        tracing::warn!(error = %e, "could not save transaction statistics");
                    }
                }
                inner.store.close().and(released)
            }
            Err(_) => Err(Error::InvalidArgument {
                what: "close",
                reason: "the database is still in use (an OwnedTxn is alive); end every transaction first".into(),
            }),
        }
    }
}
