//! Transactions: reads through read views, writes under row locks with
//! undo, commit through the log's group commit, rollback from undo.
//!
//! A write statement, in order: take the row's exclusive lock; read the
//! newest version; under REPEATABLE READ fail with
//! [`Error::Serialization`] if the view does not see that version's
//! writer; check unique keys; write the undo record (its own
//! mini-transaction, logged first, UL1); write the clustered record
//! (header naming the undo record); add the secondary entries the new
//! version needs (TB1). A statement that fails part way is rolled back to
//! where it began (its undo records, newest first), so a statement is
//! all or nothing; a deadlock or serialization failure rolls back the
//! whole transaction.
//!
//! Commit: the commit mark's mini-transaction gives the commit LSN; row
//! locks are released at once (early lock release: a hot row's lock hold
//! time excludes the sync); then durability: a `Sync` commit waits for the
//! group commit and only then leaves the registry (becomes visible to new
//! views), `Write` and `Lazy` commits leave it first. If a `Sync` commit's
//! wait fails, the transaction never becomes visible in this process.

use std::borrow::Cow;
use std::future::Future;
use std::ops::{Bound, Deref};
use std::sync::Arc;

use crate::btree::{Cursor, Direction, LeafHint};
use crate::catalog::row::RowLayout;
use crate::catalog::row::{encode_filled_row, encode_updated_row};
use crate::catalog::schema::TableSchema;
use crate::catalog::{FilledRow, RowRef, Value, encode_key, keycode};
use crate::log::Durability;
use crate::txn::lock::KeyBytes;
use crate::txn::undo::REC_HEADER;
use crate::txn::undo_seg::{Segment, UndoSegments};
use crate::txn::{
    Acquired, LockMode, OldVersion, ReadView, RecHeader, RollPtr, SlotToken, TrxId, UndoKind,
    UndoRecord,
};
use crate::{Error, Result};

use super::table::{self, Rec, Table};
use super::{DbInner, Isolation, TxnOptions};

/// How a transaction reaches its database: `&DbInner` for [`Txn`] (a
/// borrow of the [`super::Db`]), `Arc<DbInner>` for [`OwnedTxn`] (no
/// lifetime: it may live across client messages and `.await` points).
pub(crate) trait DbHandle: Deref<Target = DbInner> + Clone {}

impl<T: Deref<Target = DbInner> + Clone> DbHandle for T {}

/// A transaction's state and code, whichever way it holds its database;
/// [`Txn`] and [`OwnedTxn`] are its two public faces.
///
/// Invariant T1 (the registry slot): `slot` is `Some` from the
/// transaction's first id (its first write, lock or snapshot) until it
/// ends; every way out hands the token back exactly once: released
/// ([`crate::txn::TrxRegistry::release`]: its changes may become visible)
/// or abandoned (a commit whose sync failed, a rollback that could not
/// finish: they never may in this process). `Drop` rolls back and
/// releases what is left. The type enforces "once": release and abandon
/// consume the token, and a token dropped any other way is reported by
/// its own `Drop` (registry R9; a panic in debug builds).
#[derive(Debug)]
pub(crate) struct TxnCore<H: DbHandle> {
    db: H,
    st: TxnState,
}

/// Everything a transaction keeps but its database handle.
#[derive(Debug)]
pub(crate) struct TxnState {
    slot: Option<SlotToken>,
    id: TrxId,
    opts: TxnOptions,
    /// REPEATABLE READ: the transaction's view; READ COMMITTED: the
    /// current statement's.
    view: Option<ReadView>,
    /// Last undo sequence number used (0: none yet).
    seq: u64,
    /// Undo-tree records of this transaction that exist (statement
    /// rollbacks delete theirs): a transaction with none left and no
    /// large insert undo segment commits without a mark or a place in
    /// the history.
    live: u64,
    /// The transaction's insert undo segment, once it inserted a row
    /// (`txn::undo_seg`): ended (freed, or its page cached) when it ends.
    seg: Option<Segment>,
    /// Its runs of inserts with automatic keys (undo U7), oldest first:
    /// what a rollback removes besides its undo records.
    runs: Vec<RunSpan>,
    locks: Vec<crate::txn::lock::LockKey>,
    done: bool,
    /// Why a transaction that is `done` before `commit` or `rollback` was
    /// called ended (reported to later calls).
    ended: &'static str,
    /// `Write`/`Lazy` only: the highest commit LSN of a not yet durable
    /// `Sync` commit this transaction built on (registry R7); 0: none.
    after: u64,
    /// Set by a client to stop a statement waiting for a row lock.
    cancel: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// When the running statement's time is up: a row lock wait stops
    /// then (a server's `statement_timeout`).
    stop_at: Option<std::time::Instant>,
    /// How long a row lock wait may last, in place of the database's
    /// lock wait timeout (a server's `lock_timeout`).
    lock_timeout: Option<std::time::Duration>,
}

/// A transaction at work for one call: its database, borrowed from the
/// handle for the call, and its state. The transaction's code lives here,
/// on a plain reference, so a reference into the database (a tree, the
/// store) may be held while the state changes, whichever handle the
/// transaction owns.
struct Ctx<'a> {
    db: &'a DbInner,
    st: &'a mut TxnState,
}

impl Deref for Ctx<'_> {
    type Target = TxnState;

    fn deref(&self) -> &TxnState {
        self.st
    }
}

impl std::ops::DerefMut for Ctx<'_> {
    fn deref_mut(&mut self) -> &mut TxnState {
        self.st
    }
}

/// A run of inserts with automatic keys sharing one `InsertRun` undo
/// record (undo U7), as the transaction that wrote it keeps it.
#[derive(Debug)]
pub(crate) struct RunSpan {
    /// The table.
    pub(crate) table: u64,
    /// Sequence numbers of its rows: `first..=last` (`first` is its
    /// record's).
    pub(crate) first: u64,
    pub(crate) last: u64,
    /// The first row's key: every row of the run has a key at or above.
    pub(crate) key: Vec<u8>,
    /// The last row's key: every row of the run has a key at or below.
    pub(crate) last_key: Vec<u8>,
}

/// A point in a transaction's changes ([`Txn::savepoint`]): the changes
/// made after it can be undone alone ([`Txn::rollback_to_savepoint`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Savepoint(u64);

/// A transaction that borrows its [`super::Db`]: the embedded API's
/// form. Dropping it without [`Txn::commit`] rolls it back.
#[derive(Debug)]
pub struct Txn<'db>(TxnCore<&'db DbInner>);

/// A transaction that holds its database by a reference count instead of
/// a borrow ([`super::Db::begin_owned`]): it has no lifetime, is `Send`,
/// and its [`OwnedTxn::commit_async`] future is `'static`, so it can live
/// across client messages and `.await` points (a server's session). It
/// behaves exactly as [`Txn`]; it costs one reference-count increment at
/// begin and at an async commit. [`super::Db::close`] refuses to close
/// while one is alive. Dropping it without [`OwnedTxn::commit`] rolls it
/// back.
#[derive(Debug)]
pub struct OwnedTxn(TxnCore<Arc<DbInner>>);

impl<'db> Txn<'db> {
    pub(crate) fn new(db: &'db DbInner, opts: TxnOptions) -> Result<Txn<'db>> {
        TxnCore::new(db, opts).map(Txn)
    }

    /// Commit without blocking on the sync: the commit mark is written
    /// and the locks released now; the returned future resolves when the
    /// commit is as durable as the transaction's durability asks (and, for
    /// `Sync`, makes it visible then). A `Write`/`Lazy` transaction that
    /// built on a `Sync` commit not yet durable resolves, and becomes
    /// visible, once durable (registry R7). Nothing is spent on it unless
    /// it is called. Dropping the future before it resolves leaves the
    /// commit to the log but stops waiting for it.
    pub fn commit_async(self) -> impl Future<Output = Result<()>> + 'db {
        self.0.commit_async()
    }
}

impl OwnedTxn {
    pub(crate) fn new(db: Arc<DbInner>, opts: TxnOptions) -> Result<OwnedTxn> {
        TxnCore::new(db, opts).map(OwnedTxn)
    }

    /// [`Txn::commit_async`], as a `'static` future that may be sent to
    /// another thread.
    pub fn commit_async(self) -> impl Future<Output = Result<()>> + Send + 'static {
        self.0.commit_async()
    }
}

/// The methods [`Txn`] and [`OwnedTxn`] share, each delegating to
/// [`TxnCore`].
macro_rules! txn_api {
    ($t:ty) => {
        impl $t {
            /// This transaction's id: 0 until it first needs one (its first
            /// write, row lock or snapshot). A transaction that only reads
            /// rows every view already sees never takes an id or a registry
            /// slot, so point reads share nothing with other transactions.
            #[inline]
            pub fn id(&self) -> TrxId {
                self.0.id()
            }

            /// Its isolation level.
            #[inline]
            pub fn isolation(&self) -> Isolation {
                self.0.isolation()
            }

            /// Insert a row (values in column order). A table without a
            /// primary key gets a hidden row id; a single int64 primary key
            /// column given as NULL gets the next automatic value. Returns
            /// the primary key. Fails with [`Error::DuplicateKey`] if the
            /// key (or a unique index key) exists.
            #[inline]
            pub fn insert(&mut self, t: &Table, values: &[Value]) -> Result<Vec<Value>> {
                self.0.insert(t, values)
            }

            /// Change columns of the row with primary key `key`: `changes`
            /// are `(column position, new value)`. Returns false if there is
            /// no such row. Primary key columns cannot change.
            #[inline]
            pub fn update(
                &mut self,
                t: &Table,
                key: &[Value],
                changes: &[(usize, Value)],
            ) -> Result<bool> {
                self.0.update(t, key, changes)
            }

            /// Delete the row with primary key `key`; false if there is none.
            #[inline]
            pub fn delete(&mut self, t: &Table, key: &[Value]) -> Result<bool> {
                self.0.delete(t, key)
            }

            /// The row with primary key `key` as this transaction's view
            /// sees it.
            #[inline]
            pub fn get(&mut self, t: &Table, key: &[Value]) -> Result<Option<Vec<Value>>> {
                self.0.get(t, key)
            }

            /// The newest committed version of the row with primary key
            /// `key`, locked exclusively until the transaction ends (a
            /// locking read, for read-modify-write). Under REPEATABLE READ
            /// it fails with [`Error::Serialization`] if that version is
            /// newer than the view.
            #[inline]
            pub fn get_for_update(
                &mut self,
                t: &Table,
                key: &[Value],
            ) -> Result<Option<Vec<Value>>> {
                self.0.get_locked(t, key, LockMode::Exclusive)
            }

            /// [`Self::get_for_update`] with the row locked shared: other
            /// transactions may lock it shared too (SQL's `FOR SHARE`),
            /// but none may change it until this one ends; a change by
            /// this transaction takes the lock exclusive.
            #[inline]
            pub fn get_for_share(
                &mut self,
                t: &Table,
                key: &[Value],
            ) -> Result<Option<Vec<Value>>> {
                self.0.get_locked(t, key, LockMode::Shared)
            }

            /// Rows whose primary key lies within the bounds (prefixes of
            /// the key, see [`KeyBound`]), in `dir` order, as this
            /// transaction's view sees them. The rows borrow the
            /// transaction, so it cannot end (and its view cannot be
            /// withdrawn, letting purge remove versions they need) while
            /// they are read.
            #[inline]
            pub fn scan(
                &mut self,
                t: &Table,
                lo: KeyBound<'_>,
                hi: KeyBound<'_>,
                dir: Direction,
            ) -> Result<Rows<'_>> {
                self.0.scan(t, lo, hi, dir)
            }

            /// Rows by secondary index `index`: entries whose index key lies
            /// within the bounds (prefixes of the index key), in `dir` order
            /// (ties by primary key), as this transaction's view sees them;
            /// they borrow the transaction, as [`Self::scan`]'s do.
            #[inline]
            pub fn index_scan(
                &mut self,
                t: &Table,
                index: &str,
                lo: KeyBound<'_>,
                hi: KeyBound<'_>,
                dir: Direction,
            ) -> Result<Rows<'_>> {
                self.0.index_scan(t, index, lo, hi, dir)
            }

            /// From now on, a statement of this transaction that waits
            /// for a row lock stops with [`Error::Canceled`] (and no
            /// effect) soon after `flag` is set; `None` makes waits
            /// uncancelable again. A server sets its session's cancel
            /// flag here, for PostgreSQL's CancelRequest.
            #[inline]
            pub fn set_cancel(&mut self, flag: Option<Arc<std::sync::atomic::AtomicBool>>) {
                self.0.st.cancel = flag;
            }

            /// From now on, a statement of this transaction that waits for
            /// a row lock stops with [`Error::Canceled`] (and no effect)
            /// once `at` has passed, if the lock wait timeout has not
            /// ended the wait first; `None`: no such limit. A server sets
            /// each statement's `statement_timeout` here.
            #[inline]
            pub fn set_stop_at(&mut self, at: Option<std::time::Instant>) {
                self.0.st.stop_at = at;
            }

            /// From now on, a row lock wait of this transaction lasts at
            /// most `limit` and then fails the statement with
            /// [`Error::LockWaitLimit`] (no effect; the transaction goes
            /// on), in place of the database's lock wait timeout
            /// ([`Options::lock_wait_timeout`](crate::Options), which
            /// fails it with [`Error::LockTimeout`]); `None`: that
            /// timeout. A server sets its `lock_timeout` here.
            #[inline]
            pub fn set_lock_timeout(&mut self, limit: Option<std::time::Duration>) {
                self.0.st.lock_timeout = limit;
            }

            /// Undo every change of this transaction.
            #[inline]
            pub fn rollback(self) -> Result<()> {
                self.0.rollback()
            }

            /// A mark of this transaction's changes so far, for
            /// [`Self::rollback_to_savepoint`].
            #[inline]
            pub fn savepoint(&self) -> Savepoint {
                self.0.savepoint()
            }

            /// Undo the changes made since `sp`, newest first; the
            /// transaction goes on with its row locks and its view, as
            /// after a failed statement. If the undo itself fails (an I/O
            /// error) the transaction ends, rolled back as far as it could
            /// be, and the error is returned.
            #[inline]
            pub fn rollback_to_savepoint(&mut self, sp: Savepoint) -> Result<()> {
                self.0.rollback_to_savepoint(sp)
            }

            /// Commit; with `Sync` durability (the default) the commit is
            /// durable when this returns, and only then visible to other
            /// transactions.
            #[inline]
            pub fn commit(self) -> Result<()> {
                self.0.commit()
            }
        }
    };
}

txn_api!(Txn<'_>);
txn_api!(OwnedTxn);

#[cfg(test)]
impl Txn<'_> {
    /// Write one version as a statement does, for tests that leave the
    /// database as a failed statement of older code did.
    pub(crate) fn write_version(
        &mut self,
        schema: &TableSchema,
        pk: &[u8],
        kind: UndoKind,
        cur: Option<&Rec>,
        changed: u64,
        row: &[u8],
    ) -> Result<()> {
        // The replaced keys the mask names, as a statement computes them.
        let keys = match cur {
            Some((_, old)) => {
                let values = table::decode(schema, old)?;
                (0..56)
                    .filter(|i| changed & (1 << i) != 0)
                    .map(|i| table::sec_key_of(schema, i, &values))
                    .collect()
            }
            None => Vec::new(),
        };
        self.0.ctx().write_version(
            schema,
            pk,
            kind,
            cur,
            changed,
            keys,
            &mut Record::of_row(row),
            None,
        )
    }

    /// Write the commit mark and nothing else: what a crash between a
    /// marked commit's mark and the end of its insert undo segment
    /// leaves (undo_seg US3). Returns the mark's LSN.
    pub(crate) fn mark_only(&mut self) -> Result<crate::Lsn> {
        let ctx = self.0.ctx();
        ctx.db.undo.mark_committed(&ctx.db.store, ctx.id)
    }
}

/// A clustered record being written: room for its [`RecHeader`] (the
/// first `REC_HEADER` bytes), then the row. The row is encoded after the
/// room and the header written over it once the version's undo is known,
/// so a record is built in one buffer, not copied behind its header.
struct Record(Vec<u8>);

impl Record {
    /// A record of the row `values` of `columns`, checked and encoded
    /// after room for the header ([`encode_filled_row`]).
    fn encode(columns: &[crate::catalog::Column], values: FilledRow<'_>) -> Result<Record> {
        Ok(Record(encode_filled_row(columns, values, REC_HEADER)?))
    }

    /// A record of the row `old` becomes with `changes` applied
    /// ([`encode_updated_row`]: only the new values are checked).
    fn encode_updated(old: &RowRef<'_>, changes: &[(usize, Value)]) -> Result<Record> {
        Ok(Record(encode_updated_row(old, changes, REC_HEADER)?))
    }

    /// A record of a copy of `row` (a row not encoded for it).
    fn of_row(row: &[u8]) -> Record {
        let mut buf = Vec::with_capacity(REC_HEADER + row.len());
        buf.resize(REC_HEADER, 0);
        buf.extend_from_slice(row);
        Record(buf)
    }

    /// The row.
    fn row(&self) -> &[u8] {
        debug_assert!(
            self.0.len() >= REC_HEADER,
            "a record has room for its header"
        );
        self.0.get(REC_HEADER..).unwrap_or_default()
    }

    /// The record value with `hdr` in front of the row.
    fn with_header(&mut self, hdr: RecHeader) -> &[u8] {
        hdr.write_to(&mut self.0);
        debug_assert!(
            RecHeader::decode(&self.0).is_ok_and(|(h, _)| h == hdr),
            "a record's header reads back as written"
        );
        &self.0
    }
}

/// Which rows a scan covers: bounds on a key prefix. `Included(p)` as a
/// lower bound starts at the first key beginning with `p`, as an upper
/// bound ends after the last key beginning with `p`; `Excluded(p)` skips
/// every key beginning with `p`.
pub type KeyBound<'a> = Bound<&'a [Value]>;

/// The keys a version of `values` needs in the live indexes whose key
/// differs from the replaced version's `old` (every live index when there
/// is none), and the replaced keys of those indexes, in index order
/// (undo U9). The old version is read in place: only its index columns
/// are decoded.
type ChangedKeys = (Vec<(usize, Vec<u8>)>, Vec<Vec<u8>>);
fn changed_keys<'v>(
    schema: &TableSchema,
    old: Option<&RowRef<'_>>,
    values: impl Into<FilledRow<'v>>,
) -> Result<ChangedKeys> {
    let values = values.into();
    let mut new_keys = Vec::new();
    let mut old_keys = Vec::new();
    let mut was = Vec::new();
    for i in schema.live_indexes() {
        let k = table::sec_key_of(schema, i, values);
        if let Some(old) = old {
            table::sec_key_of_ref(schema, i, old, &mut was)?;
            if was == k {
                continue;
            }
            old_keys.push(std::mem::take(&mut was));
        }
        new_keys.push((i, k));
    }
    Ok((new_keys, old_keys))
}

/// Whether index `i` of `schema` has a column that `changes` (column,
/// value) sets: if not, an update leaves its key as it was.
fn index_reads_any(schema: &TableSchema, i: usize, changes: &[(usize, Value)]) -> bool {
    schema.def.indexes.get(i).is_none_or(|ix| {
        ix.columns
            .iter()
            .any(|c| changes.iter().any(|(x, _)| x == c))
    })
}

fn encode(vals: &[Value]) -> Vec<u8> {
    // One allocation for the common keys (a BIGINT is 9 bytes).
    let mut out = Vec::with_capacity(16 * vals.len());
    encode_key(vals, &mut out);
    out
}

fn lower(b: KeyBound<'_>) -> Bound<Vec<u8>> {
    match b {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(p) => Bound::Included(encode(p)),
        Bound::Excluded(p) => match keycode::prefix_end(&encode(p)) {
            Some(e) => Bound::Included(e),
            None => Bound::Excluded(vec![0xFF; 1]),
        },
    }
}

fn upper(b: KeyBound<'_>) -> Bound<Vec<u8>> {
    match b {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Excluded(p) => Bound::Excluded(encode(p)),
        Bound::Included(p) => match keycode::prefix_end(&encode(p)) {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        },
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
    }
}

impl<H: DbHandle> TxnCore<H> {
    pub(crate) fn new(db: H, opts: TxnOptions) -> Result<TxnCore<H>> {
        Ok(TxnCore {
            db,
            st: TxnState {
                id: 0,
                slot: None,
                opts,
                view: None,
                seq: 0,
                live: 0,
                seg: None,
                runs: Vec::new(),
                locks: Vec::new(),
                done: false,
                ended: "",
                after: 0,
                cancel: None,
                stop_at: None,
                lock_timeout: None,
            },
        })
    }

    #[inline]
    fn ctx(&mut self) -> Ctx<'_> {
        Ctx {
            db: &self.db,
            st: &mut self.st,
        }
    }

    #[inline]
    pub(crate) fn id(&self) -> TrxId {
        self.st.id
    }

    #[inline]
    pub(crate) fn isolation(&self) -> Isolation {
        self.st.opts.isolation
    }

    #[inline]
    pub(crate) fn insert(&mut self, t: &Table, values: &[Value]) -> Result<Vec<Value>> {
        self.ctx().insert(t, values)
    }

    #[inline]
    pub(crate) fn update(
        &mut self,
        t: &Table,
        key: &[Value],
        changes: &[(usize, Value)],
    ) -> Result<bool> {
        self.ctx().update(t, key, changes)
    }

    #[inline]
    pub(crate) fn delete(&mut self, t: &Table, key: &[Value]) -> Result<bool> {
        self.ctx().delete(t, key)
    }

    #[inline]
    pub(crate) fn get(&mut self, t: &Table, key: &[Value]) -> Result<Option<Vec<Value>>> {
        self.ctx().get(t, key)
    }

    #[inline]
    pub(crate) fn get_locked(
        &mut self,
        t: &Table,
        key: &[Value],
        mode: LockMode,
    ) -> Result<Option<Vec<Value>>> {
        self.ctx().get_locked(t, key, mode)
    }

    #[inline]
    pub(crate) fn scan(
        &mut self,
        t: &Table,
        lo: KeyBound<'_>,
        hi: KeyBound<'_>,
        dir: Direction,
    ) -> Result<Rows<'_>> {
        self.ctx().scan(t, lo, hi, dir)
    }

    #[inline]
    pub(crate) fn index_scan(
        &mut self,
        t: &Table,
        index: &str,
        lo: KeyBound<'_>,
        hi: KeyBound<'_>,
        dir: Direction,
    ) -> Result<Rows<'_>> {
        self.ctx().index_scan(t, index, lo, hi, dir)
    }

    #[inline]
    pub(crate) fn rollback(mut self) -> Result<()> {
        self.ctx().rollback_inner()
    }

    #[inline]
    pub(crate) fn savepoint(&self) -> Savepoint {
        Savepoint(self.st.seq)
    }

    pub(crate) fn rollback_to_savepoint(&mut self, sp: Savepoint) -> Result<()> {
        let mut cx = self.ctx();
        cx.check_open()?;
        if let Err(undo) = cx.rollback_to(sp.0) {
            // As for a failed statement that cannot be undone: the
            // transaction ends here, never committable.
            tracing::error!(trx = cx.id, rollback = %undo, "a rollback to a savepoint failed; the transaction ends");
            cx.ended = "a rollback to a savepoint could not be finished";
            let _ = cx.rollback_inner();
            return Err(undo);
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn commit(mut self) -> Result<()> {
        self.ctx().commit()
    }

    pub(crate) fn commit_async(mut self) -> impl Future<Output = Result<()>> + use<H> {
        let started = self.ctx().commit_start(false);
        let held = HeldSlot {
            db: self.db.clone(),
            token: self.st.slot.take(),
        };
        let durability = self.st.opts.durability;
        drop(self); // finished (`done`): dropping it rolls nothing back
        async move {
            let mut held = held;
            let (lsn, late) = started?; // `held` releases the slot
            let Some(lsn) = lsn else {
                return Ok(());
            };
            // A commit made visible only once durable keeps its slot until
            // then (a `Write`/`Lazy` one too when it built on a pending
            // `Sync` commit, registry R7).
            let durability = if durability == Durability::Sync || late {
                Durability::Sync
            } else {
                held.release();
                durability
            };
            match held.db.store.log().commit_async(lsn, durability).await {
                Ok(()) => {
                    held.release();
                    Ok(())
                }
                Err(e) => {
                    held.abandon();
                    Err(e)
                }
            }
        }
    }
}

impl<'a> Ctx<'a> {
    /// Take a registry slot and an id if this transaction has none yet.
    fn ensure_id(&mut self) -> Result<()> {
        if self.slot.is_none() {
            self.check_open()?;
            let slot = self.db.begin_slot()?;
            self.id = slot.id();
            self.slot = Some(slot);
        }
        Ok(())
    }

    fn check_open(&self) -> Result<()> {
        if self.done {
            return Err(Error::InvalidArgument {
                what: "transaction",
                reason: format!("it was rolled back ({}); begin a new one", self.ended),
            });
        }
        Ok(())
    }

    /// Start a statement: a fresh view under READ COMMITTED, the
    /// transaction's (made once) under REPEATABLE READ.
    fn statement_view(&mut self) -> Result<&ReadView> {
        self.check_open()?;
        self.ensure_id()?;
        let fresh = self.opts.isolation == Isolation::ReadCommitted || self.view.is_none();
        if fresh {
            let slot = self.slot.as_ref().ok_or_else(|| Error::InvalidArgument {
                what: "transaction",
                reason: "already finished".into(),
            })?;
            self.view = Some(self.db.open_view(slot));
        }
        self.view.as_ref().ok_or_else(|| Error::InvalidArgument {
            what: "transaction",
            reason: "no read view".into(),
        })
    }

    /// Run write statement `f` atomically: on failure undo what it did
    /// (or the whole transaction for a deadlock or serialization failure).
    fn statement<R>(&mut self, f: impl FnOnce(&mut Self) -> Result<R>) -> Result<R> {
        // READ COMMITTED writes act on the newest version and need no
        // view; REPEATABLE READ takes its snapshot at the first statement.
        self.check_open()?;
        self.db.check_writable("a write statement")?;
        self.ensure_id()?;
        if self.opts.isolation == Isolation::RepeatableRead && self.view.is_none() {
            self.statement_view()?;
        }
        let save = self.seq;
        let locks_before = self.locks.len();
        // W4: a write is a row boundary (nothing of this call done yet).
        crate::wait::step()?;
        match f(self) {
            Ok(r) => Ok(r),
            Err(e) => {
                if matches!(e, Error::Deadlock { .. } | Error::Serialization { .. }) {
                    if matches!(e, Error::Serialization { .. }) {
                        self.db.counters.serialization_failures.incr();
                    }
                    self.ended = "after a deadlock or serialization failure";
                    self.rollback_inner()?;
                } else if let Err(undo) = self.rollback_to(save) {
                    // The statement's changes could not all be undone, so
                    // the transaction cannot be left as it was before the
                    // statement: it ends here, rolled back as far as the
                    // failure allows and never committable (recovery at
                    // the next open rolls back the rest).
                    tracing::error!(trx = self.id, statement = %e, rollback = %undo, "a failed statement could not be rolled back; the transaction ends");
                    self.ended = "a failed statement could not be undone";
                    let _ = self.rollback_inner();
                    return Err(undo);
                } else if matches!(e, Error::WouldWait { .. }) {
                    // W5: refused and undone, so nothing holds the keys
                    // this call locked newly (`lock` lists only those):
                    // the transaction lets them go rather than keep
                    // others waiting while its statement moves threads.
                    debug_assert!(
                        locks_before <= self.locks.len(),
                        "a write call released locks"
                    );
                    let from = locks_before.min(self.locks.len());
                    let taken = self.locks.split_off(from);
                    self.db.locks.release(self.id, &taken);
                }
                Err(e)
            }
        }
    }

    /// Lock `key` for this transaction until it ends (or until the call
    /// that took it is refused, W5). `locks` lists each key once, when
    /// it is first locked, so its tail past a point is exactly what was
    /// locked newly since.
    fn lock(&mut self, key: KeyBytes, mode: LockMode) -> Result<Acquired> {
        let key = self.db.locks.key(key);
        let acquired = self.db.locks.lock_cancelable(
            self.id,
            &key,
            mode,
            crate::txn::WaitLimits {
                cancel: self.st.cancel.as_deref(),
                stop_at: self.st.stop_at,
                timeout: self.st.lock_timeout,
            },
        )?;
        if acquired == Acquired::New {
            self.locks.push(key);
        }
        Ok(acquired)
    }

    /// A write or locking read builds on `rec`, the row's newest version:
    /// under REPEATABLE READ it must be one the view sees; and see
    /// [`Txn::note_dependency`].
    fn builds_on(&mut self, rec: &Rec) -> Result<()> {
        self.check_view(rec)?;
        self.note_dependency(rec);
        Ok(())
    }

    /// Under REPEATABLE READ, `rec` (a row's newest version) must be one
    /// the view sees.
    fn check_view(&self, rec: &Rec) -> Result<()> {
        if self.opts.isolation == Isolation::RepeatableRead
            && let Some(v) = &self.view
            && !v.sees(rec.0.trx)
        {
            return Err(Error::Serialization { trx: self.id });
        }
        Ok(())
    }

    /// A `Write`/`Lazy` transaction notes the commit of a `Sync`
    /// transaction that made `rec` and is not durable yet (registry R7).
    fn note_dependency(&mut self, rec: &Rec) {
        if self.opts.durability != Durability::Sync && rec.0.trx != self.id {
            let lsn = self.undurable_commit(rec);
            self.after = self.after.max(lsn);
        }
    }

    /// The commit LSN of the `Sync` commit that made `rec`, if it is not
    /// durable yet, else 0 (scans the registry's slots, so only for rows
    /// written recently: below the purge bound every commit is durable).
    fn undurable_commit(&self, rec: &Rec) -> u64 {
        if rec.0.trx < self.db.registry.purged_upto() {
            return 0;
        }
        let durable = self.db.store.log().durable_lsn().0;
        self.db.registry.undurable_commit(rec.0.trx, durable)
    }

    /// Write the change's undo record (logged first, UL1: `kind`, the
    /// replaced version `cur`, the `changed` index mask and `old_keys`,
    /// the replaced keys of those indexes in index order, undo U9), then
    /// the new clustered version in `version` naming it (delete-marked for a
    /// delete).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_version(
        &mut self,
        schema: &TableSchema,
        pk: &[u8],
        kind: UndoKind,
        cur: Option<&Rec>,
        changed: u64,
        old_keys: Vec<Vec<u8>>,
        version: &mut Record,
        at: Option<LeafHint>,
    ) -> Result<()> {
        let seq = self.seq + 1;
        let (prev_trx, prev_roll) = cur.map_or((0, RollPtr::NONE), |(h, _)| (h.trx, h.roll));
        let rec = UndoRecord {
            kind,
            undo_no: seq,
            table: schema.id,
            trx: self.id,
            prev_trx,
            prev_roll,
            key: pk.to_vec(),
            old: cur.map(|(h, r)| OldVersion::for_change(h, r, version.row(), old_keys)),
            changed,
        };
        let roll = match self.append_undo(&rec)? {
            Some(roll) => roll,
            None => {
                // A tree pointer must stay below the segment and insert
                // bits (undo U1, U8).
                if seq >= RollPtr::SEGMENT_BIT {
                    return Err(Error::InvalidArgument {
                        what: "transaction",
                        reason: format!("{seq} changes are more than a transaction can make"),
                    });
                }
                self.db.undo.put(&self.db.store, self.id, seq, &rec)?;
                self.live += 1;
                RollPtr(seq)
            }
        };
        self.seq = seq;
        self.put_version(schema, pk, roll, kind == UndoKind::DeleteMark, version, at)
    }

    /// Put the clustered version in `rec` of `pk` written by this
    /// transaction, naming its undo by `roll` (its header is written in
    /// front of the row, in the same buffer).
    fn put_version(
        &self,
        schema: &TableSchema,
        pk: &[u8],
        roll: RollPtr,
        deleted: bool,
        rec: &mut Record,
        at: Option<LeafHint>,
    ) -> Result<()> {
        let hdr = RecHeader {
            trx: self.id,
            roll,
            deleted,
        };
        table::clustered(&self.db.store, schema).put_at(pk, rec.with_header(hdr), at)?;
        Ok(())
    }

    /// Write an insert whose automatic key `pk` was just drawn in a run
    /// (undo U7): the first opens it with one `InsertRun` undo record,
    /// each later one, while the transaction wrote nothing else since,
    /// joins it without writing undo at all. `false` if the row cannot go
    /// into a run (no insert undo segment for this transaction): the
    /// caller writes it as any insert.
    fn write_insert_in_run(
        &mut self,
        schema: &TableSchema,
        pk: &[u8],
        rec: &mut Record,
    ) -> Result<bool> {
        let seq = self.seq + 1;
        let joins = self
            .runs
            .last()
            .is_some_and(|r| r.table == schema.id && r.last == self.seq);
        if joins {
            if let Some(r) = self.runs.last_mut() {
                r.last = seq;
                r.last_key.clear();
                r.last_key.extend_from_slice(pk);
            }
        } else {
            let undo = UndoRecord {
                kind: UndoKind::InsertRun,
                undo_no: seq,
                table: schema.id,
                trx: self.id,
                prev_trx: 0,
                prev_roll: RollPtr::NONE,
                key: pk.to_vec(),
                old: None,
                changed: UndoRecord::changed_mask(schema.def.indexes.len(), []),
            };
            if self.append_undo(&undo)?.is_none() {
                return Ok(false);
            }
            self.runs.push(RunSpan {
                table: schema.id,
                first: seq,
                last: seq,
                last_key: undo.key.clone(),
                key: undo.key,
            });
        }
        self.seq = seq;
        self.put_version(schema, pk, RollPtr::insert(seq), false, rec, None)?;
        Ok(true)
    }

    /// Append undo record `rec` to this transaction's
    /// undo segment (`txn::undo_seg`), creating it on the first; the roll
    /// pointer of the version it is for (undo U6, U8), or `None` if it
    /// cannot go there (no idle directory entry, or a record longer than
    /// a page holds), and the caller puts it in the undo tree.
    fn append_undo(&mut self, rec: &UndoRecord) -> Result<Option<RollPtr>> {
        let Some(slot) = self.slot.as_ref().map(|s| s.index()) else {
            return Ok(None);
        };
        let db = self.db;
        Ok(db
            .segs
            .append(&db.store, &mut self.seg, slot, rec)?
            .map(|(_, roll)| roll))
    }

    /// Fail before a statement writes anything if a key or value it would
    /// write does not fit the store (catalog C4, B+tree BT3): the primary
    /// key, each secondary entry in `sec_keys` (secondary key then primary
    /// key), the new clustered value (`row_len` row bytes, if the statement
    /// writes one) and the undo record (with an `old_len`-byte old value
    /// unless it is an insert's). Tables defined under C4 pass the key
    /// checks by construction; tables of older builds may not, and a
    /// value can always be too large.
    fn check_fits(
        &self,
        schema: &TableSchema,
        pk: &[u8],
        sec_keys: &[(usize, Vec<u8>)],
        row_len: Option<usize>,
        old_len: Option<usize>,
    ) -> Result<()> {
        let tree = table::clustered(&self.db.store, schema);
        let max_key = tree.max_key_len();
        let too_long = |index: &str, len: usize| Error::KeyTooLong {
            table: schema.def.name.clone(),
            index: index.to_string(),
            len: len as u64,
            max: max_key as u64,
        };
        if pk.len() > max_key {
            return Err(too_long("PRIMARY", pk.len()));
        }
        for (i, k) in sec_keys {
            let len = k.len() + pk.len();
            if len > max_key {
                let name = schema.def.indexes.get(*i).map_or("?", |x| x.name.as_str());
                return Err(too_long(name, len));
            }
        }
        let max_value = tree.max_value_len();
        let undo = UndoRecord::max_encoded_len(pk.len(), old_len);
        for (what, len) in [
            ("record value length", row_len.map(|n| n + REC_HEADER)),
            ("undo record length", Some(undo)),
        ] {
            if let Some(len) = len
                && len > max_value
            {
                return Err(Error::LimitExceeded {
                    what,
                    actual: len as u64,
                    max: max_value as u64,
                });
            }
        }
        Ok(())
    }

    /// Fail with [`Error::DuplicateKey`] if another live row has `values`'
    /// key in unique index `i`.
    fn check_unique<'v>(
        &mut self,
        schema: &TableSchema,
        i: usize,
        values: impl Into<FilledRow<'v>>,
        pk: &[u8],
    ) -> Result<()> {
        let values = values.into();
        if table::sec_key_has_null(schema, i, values) {
            return Ok(());
        }
        let sec = table::sec_key_of(schema, i, values);
        self.lock(table::unique_lock(schema.id, i, &sec), LockMode::Exclusive)?;
        let Some(tree) = table::secondary(&self.db.store, schema, i) else {
            return Ok(());
        };
        let end = keycode::prefix_end(&sec);
        let hi = match &end {
            Some(e) => Bound::Excluded(e.as_slice()),
            None => Bound::Unbounded,
        };
        let mut others = Vec::new();
        for item in tree.range(Bound::Included(&sec), hi, Direction::Forward) {
            let (k, _) = item?;
            let (s, other) = table::split_entry(schema, i, &k)?;
            if s == sec.as_slice() && other != pk {
                others.push(other.to_vec());
            }
        }
        for other in others {
            // Wait for a writer of that row to finish, then look at its
            // newest version.
            self.lock(table::row_lock(schema.id, &other), LockMode::Shared)?;
            let rec = table::read_rec(&self.db.store, schema, &other)?;
            if let Some(rec) = &rec {
                // The key is free only as of that version (R7).
                self.note_dependency(rec);
            }
            if let Some((h, row)) = rec
                && !h.deleted
                && table::sec_key_of(schema, i, &table::decode(schema, &row)?) == sec
            {
                return Err(Error::DuplicateKey {
                    table: schema.def.name.clone(),
                    index: schema
                        .def
                        .indexes
                        .get(i)
                        .map(|x| x.name.clone())
                        .unwrap_or_default(),
                });
            }
        }
        Ok(())
    }

    pub(crate) fn insert(&mut self, t: &Table, values: &[Value]) -> Result<Vec<Value>> {
        let mut drawn = None;
        let r = self.statement(|tx| tx.insert_inner(t, values, &mut drawn));
        if let (Err(Error::WouldWait { .. }), Some(key)) = (&r, drawn) {
            // W5: the call is undone and its new locks released, so the
            // key it drew is nobody's: the statement's run outside draws
            // it again unless another key was drawn meanwhile (TB3).
            t.state.give_back_auto(key);
        }
        r
    }

    /// [`Self::insert`]'s statement; `drawn_out` is set to the automatic
    /// key it draws once it has taken that key's row lock newly.
    fn insert_inner(
        &mut self,
        t: &Table,
        values: &[Value],
        drawn_out: &mut Option<i64>,
    ) -> Result<Vec<Value>> {
        let guard = t.state.schema_read()?;
        t.state.check_live(&guard)?;
        let schema: &TableSchema = &guard;
        let store = &self.db.store;
        // An automatic key drawn for a NULL is read in its column's place
        // (`FilledRow`): the row is not copied to change one value.
        let drawn_key: Value;
        let mut drew = None;
        if values.len() != schema.def.columns.len() {
            return Err(Error::InvalidArgument {
                what: "row",
                reason: format!(
                    "{} values for {} columns of table {}",
                    values.len(),
                    schema.def.columns.len(),
                    schema.def.name
                ),
            });
        }
        let (pk_vals, pk, drawn, values) = match table::TableState::auto_key_column(schema) {
            Some(None) => {
                let k = t.state.next_auto(store, schema)?;
                drew = Some(k);
                let v = vec![Value::Int64(k)];
                let pk = encode(&v);
                (v, pk, true, FilledRow::new(values))
            }
            Some(Some(col)) => {
                let (filled, drawn) = match values.get(col) {
                    Some(Value::Null) => {
                        let k = t.state.next_auto(store, schema)?;
                        drew = Some(k);
                        drawn_key = Value::Int64(k);
                        (FilledRow::with(values, col, &drawn_key), true)
                    }
                    Some(Value::Int64(v)) => {
                        t.state.saw_key(store, schema, *v)?;
                        (FilledRow::new(values), false)
                    }
                    _ => (FilledRow::new(values), false),
                };
                let v: Vec<Value> = filled.get(col).cloned().into_iter().collect();
                (v, table::pk_of(schema, filled), drawn, filled)
            }
            None => {
                let v = schema
                    .def
                    .primary_key
                    .iter()
                    .filter_map(|&k| values.get(k).cloned())
                    .collect();
                (
                    v,
                    table::pk_of(schema, values),
                    false,
                    FilledRow::new(values),
                )
            }
        };
        // `Record::encode` checks the values first (`check_filled_row`).
        let mut rec = Record::encode(&schema.def.columns, values)?;
        if self.lock(table::row_lock(schema.id, &pk), LockMode::Exclusive)? == Acquired::New {
            // A refusal from here on releases the lock with the key (W5).
            // Not so for a key locked by an earlier statement (a locking
            // read of it before it existed), nor for one refused at its
            // lock (another transaction holds it): a rerun drawing it
            // again would wait.
            *drawn_out = drew;
        }
        // A fresh automatic key has no record if, with its row lock held,
        // the table has still stored no explicit key (TB3): no lookup.
        // Debug builds look anyway and check.
        let fresh = drawn && t.state.no_explicit_keys();
        let cur = if fresh && !cfg!(debug_assertions) {
            None
        } else {
            table::read_rec(store, schema, &pk)?
        };
        if fresh && cur.is_some() {
            return Err(Error::InvalidArgument {
                what: "automatic key",
                reason: format!(
                    "table {}: a fresh automatic key already has a record (invariant TB3 broken)",
                    schema.def.name
                ),
            });
        }
        let old_row = match &cur {
            Some((h, _)) if !h.deleted => {
                return Err(Error::DuplicateKey {
                    table: schema.def.name.clone(),
                    index: "PRIMARY".into(),
                });
            }
            // Over a delete-marked record: an update of it. Its row is
            // checked whole (every column read, text as UTF-8, as a
            // decode would) without copying it: damage is an error here,
            // not bytes carried into the undo record.
            Some(rec) => {
                self.builds_on(rec)?;
                let old = RowRef::new(&schema.def.columns, &rec.1)?;
                for v in old.iter() {
                    v?;
                }
                Some(old)
            }
            None => None,
        };
        // The entries the new version needs: every index's, except where
        // the delete-marked version's entry has the same key (still there).
        let n = schema.def.indexes.len();
        let (new_keys, old_keys) = changed_keys(schema, old_row.as_ref(), values)?;
        let old_len = cur.as_ref().map(|(_, r)| REC_HEADER + r.len());
        self.check_fits(schema, &pk, &new_keys, Some(rec.row().len()), old_len)?;
        // An index being built checks uniqueness when it is finished
        // (catalog C6, `online_index` OI4).
        for (i, ix) in schema.def.indexes.iter().enumerate() {
            if ix.unique && schema.index_is_ready(i) {
                self.check_unique(schema, i, values, &pk)?;
            }
        }
        let (kind, changed) = match &old_row {
            None => (UndoKind::Insert, UndoRecord::changed_mask(n, [])),
            Some(_) => (
                UndoKind::Update,
                UndoRecord::changed_mask(n, new_keys.iter().map(|(i, _)| *i)),
            ),
        };
        // A fresh automatic key is above every key this transaction drew
        // before, so the row can join a run (undo U7).
        let in_run = kind == UndoKind::Insert
            && drawn
            && cur.is_none()
            && self.write_insert_in_run(schema, &pk, &mut rec)?;
        if !in_run {
            self.write_version(
                schema,
                &pk,
                kind,
                cur.as_ref(),
                changed,
                old_keys,
                &mut rec,
                None,
            )?;
        }
        for (i, k) in &new_keys {
            if let Some(tree) = table::secondary(store, schema, *i) {
                tree.put(&table::entry_key(k, &pk), &[])?;
            }
        }
        Ok(pk_vals)
    }

    fn key_of(&self, schema: &TableSchema, key: &[Value]) -> Result<Vec<u8>> {
        let def = &schema.def;
        let columns = def.primary_key.len().max(1);
        if key.len() != columns {
            return Err(Error::InvalidArgument {
                what: "primary key",
                reason: format!(
                    "{} values for a key of {columns} columns in table {}",
                    key.len(),
                    def.name
                ),
            });
        }
        if def.primary_key.is_empty() {
            // The hidden automatic key: one BIGINT (the rare path; the
            // column is built only here).
            for v in key {
                let col =
                    crate::catalog::Column::new("key", crate::catalog::ColumnType::Int64, false);
                crate::catalog::check_value(&col, v)?;
            }
        } else {
            for (v, &k) in key.iter().zip(&def.primary_key) {
                let Some(col) = def.columns.get(k) else {
                    return Err(Error::InvalidArgument {
                        what: "primary key",
                        reason: format!("table {}: key column {k} does not exist", def.name),
                    });
                };
                // A key value is never NULL. `TableDef::validate` makes key
                // columns NOT NULL, but a table read from a damaged catalog
                // may not have been through it (the catalog fuzz target
                // finds such entries), so this does not rely on the flag.
                if matches!(v, Value::Null) {
                    return Err(crate::catalog::CatalogError::NullNotAllowed {
                        column: col.name.clone(),
                    }
                    .into());
                }
                crate::catalog::check_value(col, v)?;
            }
        }
        Ok(encode(key))
    }

    pub(crate) fn update(
        &mut self,
        t: &Table,
        key: &[Value],
        changes: &[(usize, Value)],
    ) -> Result<bool> {
        self.statement(|tx| tx.update_inner(t, key, changes))
    }

    fn update_inner(
        &mut self,
        t: &Table,
        key: &[Value],
        changes: &[(usize, Value)],
    ) -> Result<bool> {
        let guard = t.state.schema_read()?;
        t.state.check_live(&guard)?;
        let schema: &TableSchema = &guard;
        let store = &self.db.store;
        let pk = self.key_of(schema, key)?;
        for (c, _) in changes {
            if *c >= schema.def.columns.len() || schema.def.primary_key.contains(c) {
                return Err(Error::InvalidArgument {
                    what: "update",
                    reason: format!(
                        "column {c} of table {} does not exist or is part of the primary key",
                        schema.def.name
                    ),
                });
            }
        }
        self.lock(table::row_lock(schema.id, &pk), LockMode::Exclusive)?;
        // Where the row is: the write goes straight there (B+tree LH1).
        let Some((cur, at)) = table::read_rec_at(store, schema, &pk)? else {
            return Ok(false);
        };
        if cur.0.deleted {
            self.builds_on(&cur)?;
            return Ok(false);
        }
        self.builds_on(&cur)?;
        // The old version's layout is checked once: its values become
        // the new version's, and its index keys are read in place.
        let old_row = RowRef::new(&schema.def.columns, &cur.1)?;
        let old_len = Some(REC_HEADER + cur.1.len());
        if !schema
            .live_indexes()
            .any(|i| index_reads_any(schema, i, changes))
        {
            // No index has a changed column, so every entry stays and no
            // uniqueness is at stake: the new row is the old one with the
            // changes in place, encoded without owned values of the rest.
            let mut rec = Record::encode_updated(&old_row, changes)?;
            self.check_fits(schema, &pk, &[], Some(rec.row().len()), old_len)?;
            let unchanged = UndoRecord::changed_mask(schema.def.indexes.len(), []);
            self.write_version(
                schema,
                &pk,
                UndoKind::Update,
                Some(&cur),
                unchanged,
                Vec::new(),
                &mut rec,
                Some(at),
            )?;
            return Ok(true);
        }
        let mut values = old_row.to_values()?;
        for (c, v) in changes {
            if let Some(slot) = values.get_mut(*c) {
                *slot = v.clone();
            }
        }
        // `Record::encode` checks the values first (`check_filled_row`).
        let mut rec = Record::encode(&schema.def.columns, FilledRow::new(&values))?;
        let (changed, old_keys) = changed_keys(schema, Some(&old_row), &values)?;
        self.check_fits(schema, &pk, &changed, Some(rec.row().len()), old_len)?;
        for (i, _) in &changed {
            if schema.def.indexes.get(*i).is_some_and(|x| x.unique) && schema.index_is_ready(*i) {
                self.check_unique(schema, *i, &values, &pk)?;
            }
        }
        let mask =
            UndoRecord::changed_mask(schema.def.indexes.len(), changed.iter().map(|(i, _)| *i));
        self.write_version(
            schema,
            &pk,
            UndoKind::Update,
            Some(&cur),
            mask,
            old_keys,
            &mut rec,
            Some(at),
        )?;
        for (i, k) in changed {
            if let Some(tree) = table::secondary(store, schema, i) {
                tree.put(&table::entry_key(&k, &pk), &[])?;
            }
        }
        Ok(true)
    }

    pub(crate) fn delete(&mut self, t: &Table, key: &[Value]) -> Result<bool> {
        self.statement(|tx| tx.delete_inner(t, key))
    }

    fn delete_inner(&mut self, t: &Table, key: &[Value]) -> Result<bool> {
        let guard = t.state.schema_read()?;
        t.state.check_live(&guard)?;
        let schema: &TableSchema = &guard;
        let store = &self.db.store;
        let pk = self.key_of(schema, key)?;
        self.lock(table::row_lock(schema.id, &pk), LockMode::Exclusive)?;
        let Some((cur, at)) = table::read_rec_at(store, schema, &pk)? else {
            return Ok(false);
        };
        self.builds_on(&cur)?;
        if cur.0.deleted {
            return Ok(false);
        }
        let old_len = Some(REC_HEADER + cur.1.len());
        self.check_fits(schema, &pk, &[], Some(cur.1.len()), old_len)?;
        let mask = UndoRecord::changed_mask(schema.def.indexes.len(), []);
        self.write_version(
            schema,
            &pk,
            UndoKind::DeleteMark,
            Some(&cur),
            mask,
            Vec::new(),
            &mut Record::of_row(&cur.1),
            Some(at),
        )?;
        Ok(true)
    }

    pub(crate) fn get(&mut self, t: &Table, key: &[Value]) -> Result<Option<Vec<Value>>> {
        let schema = t.live_schema()?;
        let pk = self.key_of(&schema, key)?;
        self.check_open()?;
        // A record must be read after the view it is judged by exists
        // (else a change committed in between is in the view but not in
        // the record read). REPEATABLE READ: the snapshot first.
        let rc = self.opts.isolation == Isolation::ReadCommitted;
        if !rc && self.view.is_none() {
            self.statement_view()?;
        }
        let Some(mut rec) = table::read_rec(&self.db.store, &schema, &pk)? else {
            return Ok(None);
        };
        if rc {
            // Fast path: a version whose writer is below the last purge
            // bound is visible to every view, present and future, so the
            // statement needs no view of its own to read it.
            if rec.0.trx < self.db.registry.purged_upto() {
                return if rec.0.deleted {
                    Ok(None)
                } else {
                    table::decode(&schema, &rec.1).map(Some)
                };
            }
            self.statement_view()?;
            match table::read_rec(&self.db.store, &schema, &pk)? {
                Some(r) => rec = r,
                None => return Ok(None),
            }
        }
        let view = self.view.as_ref().ok_or_else(|| Error::InvalidArgument {
            what: "transaction",
            reason: "no read view".into(),
        })?;
        match table::visible(self.db, view, &schema, &pk, rec)? {
            None => Ok(None),
            Some(row) => table::decode(&schema, &row).map(Some),
        }
    }

    /// The newest committed version of the row with primary key `key`,
    /// locked in `mode` until the transaction ends (a locking read).
    pub(crate) fn get_locked(
        &mut self,
        t: &Table,
        key: &[Value],
        mode: LockMode,
    ) -> Result<Option<Vec<Value>>> {
        self.statement(|tx| {
            let schema = t.live_schema()?;
            let pk = tx.key_of(&schema, key)?;
            tx.lock(table::row_lock(schema.id, &pk), mode)?;
            let Some(cur) = table::read_rec(&tx.db.store, &schema, &pk)? else {
                return Ok(None);
            };
            tx.check_view(&cur)?;
            // A read never returns a `Sync` commit a crash could take away
            // (registry R5): wait for the newest version's commit to be
            // durable (at most one group commit; only for rows whose
            // commit is still in flight). Once it is, nothing is left for
            // registry R7 to note.
            let pending = tx.undurable_commit(&cur);
            if pending > 0 {
                // W1: only the row's lock is taken; `statement` lets it
                // go if this call took it (W5).
                crate::wait::check("a log sync (the row's last commit is not yet durable)")?;
                tx.db.store.log().make_durable(crate::Lsn(pending))?;
            }
            if cur.0.deleted {
                return Ok(None);
            }
            table::decode(&schema, &cur.1).map(Some)
        })
    }

    pub(crate) fn scan(
        &mut self,
        t: &Table,
        lo: KeyBound<'_>,
        hi: KeyBound<'_>,
        dir: Direction,
    ) -> Result<Rows<'a>> {
        let schema = t.live_schema()?;
        let view = self.statement_view()?.clone();
        let (lo, hi) = (lower(lo), upper(hi));
        let cursor = table::clustered(&self.db.store, &schema).range(as_ref(&lo), as_ref(&hi), dir);
        Ok(Rows {
            db: self.db,
            schema,
            view,
            cursor,
            owned: Vec::new(),
            key: Vec::new(),
            place: Place::None,
            index: None,
        })
    }

    pub(crate) fn index_scan(
        &mut self,
        t: &Table,
        index: &str,
        lo: KeyBound<'_>,
        hi: KeyBound<'_>,
        dir: Direction,
    ) -> Result<Rows<'a>> {
        let schema = t.live_schema()?;
        let i = schema
            .index_position(index)
            .ok_or_else(|| Error::InvalidArgument {
                what: "index",
                reason: format!("table {} has no index named {index}", schema.def.name),
            })?;
        if !schema.index_is_ready(i) {
            return Err(Error::InvalidArgument {
                what: "index",
                reason: format!(
                    "index {index} of table {} is still being built",
                    schema.def.name
                ),
            });
        }
        let tree =
            table::secondary(&self.db.store, &schema, i).ok_or_else(|| Error::InvalidArgument {
                what: "index",
                reason: format!("index {index} has no tree"),
            })?;
        let view = self.statement_view()?.clone();
        let (lo, hi) = (lower(lo), upper(hi));
        let cursor = tree.range(as_ref(&lo), as_ref(&hi), dir);
        Ok(Rows {
            db: self.db,
            schema,
            view,
            cursor,
            owned: Vec::new(),
            key: Vec::new(),
            place: Place::None,
            index: Some(i),
        })
    }

    /// Undo this transaction's changes with sequence numbers above `save`,
    /// newest first, deleting their undo records (UL3).
    fn rollback_to(&mut self, save: u64) -> Result<()> {
        if self.seq <= save {
            return Ok(());
        }
        // A rollback runs to the end, waiting for pages if it must (W2).
        let _may_wait = crate::wait::MayWait::new();
        let save = save.min(self.seq);
        let db = self.db;
        let mut recs: Vec<_> = db
            .undo
            .records(&db.store, self.id, save + 1, Direction::Forward)
            .map(|r| r.map(|(seq, rec)| (seq, rec, None)))
            .collect::<Result<_>>()?;
        let in_tree = recs.len() as u64;
        if let Some(seg) = &self.seg {
            // Segment records stay where they are once undone: the
            // version no longer names them (undo U6, U8; a reader that
            // read the pointer before finds the record and walks on to
            // the version it restored), and the segment is ended whole
            // when the transaction ends, or left to purge, which finds
            // the row no longer naming the record. Runs are undone from
            // `self.runs`, which knows where each ends.
            recs.extend(
                db.segs
                    .records_after(&db.store, seg, self.id, save)?
                    .into_iter()
                    .filter(|r| r.rec.kind != UndoKind::InsertRun)
                    .map(|r| (r.seq, r.rec, Some(r.roll))),
            );
        }
        // Runs are in number order: those reaching past `save` are last.
        let spans = self
            .runs
            .iter()
            .rev()
            .take_while(|r| r.last > save)
            .map(|r| super::Span {
                lo: r.first.max(save + 1),
                hi: r.last,
                first: r.first,
                table: r.table,
                key: r.key.clone(),
                end: std::ops::Bound::Included(r.last_key.clone()),
            })
            .collect();
        super::undo_all(db, self.id, recs, spans)?;
        self.live = self.live.saturating_sub(in_tree);
        // What is left of the runs ends at `save`, so no later insert
        // joins one across the rollback.
        let keep = self.runs.partition_point(|r| r.first <= save);
        self.runs.truncate(keep);
        if let Some(r) = self.runs.last_mut() {
            // Its last key stays: still above every row left in it.
            r.last = r.last.min(save);
        }
        // `self.seq` stays: sequence numbers are never reused, so a reader
        // that read a roll pointer before this rollback can never find a
        // different change's undo record under it.
        Ok(())
    }

    fn rollback_inner(&mut self) -> Result<()> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let r = self.rollback_to(0).and_then(|()| self.end_segment());
        self.finish_locks();
        self.db.counters.rollbacks.incr();
        match r {
            Ok(()) => {
                self.release_slot();
                Ok(())
            }
            Err(e) => {
                // The changes may still be there: never let others see
                // them as committed (the store is poisoned or the undo
                // unreadable; recovery at reopen rolls back again).
                self.abandon_slot();
                Err(e)
            }
        }
    }

    /// End the insert undo segment, if any: free it or cache its page
    /// (undo_seg US1, US6).
    fn end_segment(&mut self) -> Result<()> {
        self.end_segment_lsn(false).map(drop)
    }

    /// End the insert undo segment, if any, in one mini-transaction if
    /// `in_one` (an insert-only commit, undo_seg US3); the LSN of the
    /// change that ended it. The segment stays the transaction's until
    /// it is ended, so a rollback after a failed end still reads its
    /// records.
    fn end_segment_lsn(&mut self, in_one: bool) -> Result<Option<crate::Lsn>> {
        let Some(seg) = &self.seg else {
            return Ok(None);
        };
        // A free ends a commit or a rollback, which must finish: on a
        // thread that must not block it waits as they do (wait W2), so
        // it is never refused half way through a transaction's end.
        let _may_wait = crate::wait::MayWait::new();
        let lsn = self.db.segs.end(&self.db.store, seg, self.id, in_one)?;
        self.seg = None;
        Ok(Some(lsn))
    }

    fn finish_locks(&mut self) {
        if let Some(s) = &self.slot {
            self.db.registry.publish_view_low(s.index(), 0);
        }
        self.view = None;
        let locks = std::mem::take(&mut self.locks);
        self.db.locks.release(self.id, &locks);
    }

    /// Write the commit mark and release the locks; the commit LSN if the
    /// transaction changed anything, and whether its visibility waits for
    /// durability like a `Sync` commit's.
    ///
    /// A `Write`/`Lazy` transaction that built on a `Sync` commit not yet
    /// durable (registry R7) waits here for it when `block` is set
    /// (`commit`); otherwise (`commit_async`, which must not block) it is
    /// published as a `Sync` commit is, visible once its own commit is
    /// durable, and the caller keeps its slot until then.
    fn commit_start(&mut self, block: bool) -> Result<(Option<crate::Lsn>, bool)> {
        self.check_open()?;
        self.done = true;
        let mut late = false;
        // undo_seg US3: an insert-only transaction with a small segment
        // commits by ending it; one whose segment holds history by
        // setting its committed bit (US7, after its mark if it has
        // undo-tree records too); any other writes its mark first.
        let history = self.seg.as_ref().is_some_and(|s| s.has_history());
        let marked = self.live > 0
            || self
                .seg
                .as_ref()
                .is_some_and(|s| s.page_count() > UndoSegments::free_batch(&self.db.store));
        let written = if history {
            match self.commit_history(self.live > 0) {
                Ok(l) => Ok(Some(l)),
                Err((e, true)) => {
                    // Committed by its mark in the log, its segment not
                    // queued: as for a failed end below.
                    self.abandon_slot();
                    self.finish_locks();
                    return Err(e);
                }
                Err((e, false)) => Err(e),
            }
        } else if marked {
            match self.db.undo.mark_committed(&self.db.store, self.id) {
                Ok(l) => {
                    if let Err(e) = self.end_segment() {
                        // Committed in the log, its segment not ended:
                        // never made visible in this process (the slot is
                        // abandoned, not released; it holds the purge
                        // bound until the database is reopened, and its
                        // directory entry stays held, US2); recovery
                        // finds the mark and frees the rest. An end
                        // fails only on an I/O error or a damaged page.
                        self.abandon_slot();
                        self.finish_locks();
                        return Err(e);
                    }
                    Ok(Some(l))
                }
                Err(e) => Err(e),
            }
        } else {
            self.end_segment_lsn(true)
        };
        let lsn = match written {
            Ok(None) => None,
            Ok(Some(l)) => {
                {
                    let mut immediate = self.opts.durability != Durability::Sync;
                    let pending = immediate && self.after > self.db.store.log().durable_lsn().0;
                    if pending && !block {
                        immediate = false;
                        late = true;
                    } else if pending
                        && let Err(e) = self.db.store.log().make_durable(crate::Lsn(self.after))
                    {
                        // R7 could not be kept because the log failed: like
                        // a failed `Sync` commit, never made visible.
                        self.abandon_slot();
                        self.finish_locks();
                        return Err(e);
                    }
                    // Before the locks go (registry R5): whoever builds on
                    // this commit commits later and is never visible first.
                    if let Some(s) = &self.slot {
                        self.db.registry.set_committed(s, l.0, immediate);
                    }
                    Some(l)
                }
            }
            Err(e) => {
                self.done = false;
                let _ = self.rollback_inner();
                return Err(e);
            }
        };
        self.finish_locks();
        if lsn.is_some() {
            self.db.counters.commits.incr();
        }
        // One for each thing purge works through and counts off: the
        // transaction's undo-tree records and mark, and its segment.
        let tree = if history { self.live > 0 } else { marked };
        let queued = i64::from(tree) + i64::from(history);
        if queued > 0 {
            self.db
                .history
                .fetch_add(queued, std::sync::atomic::Ordering::Relaxed);
        }
        Ok((lsn, late))
    }

    /// Commit a transaction whose segment holds history (undo_seg US7):
    /// its commit mark first if `marked` (it has undo-tree records), then
    /// the segment's committed bit, which queues it for purge. Returns the
    /// LSN of the last change; on failure the error, and whether the mark
    /// was written (then the transaction is committed in the log).
    fn commit_history(&mut self, marked: bool) -> std::result::Result<crate::Lsn, (Error, bool)> {
        let db = self.db;
        if marked {
            db.undo
                .mark_committed(&db.store, self.id)
                .map_err(|e| (e, false))?;
        }
        let Some(seg) = &self.seg else {
            return Err((
                Error::InvalidArgument {
                    what: "commit",
                    reason: "a transaction with history in a segment has no segment".into(),
                },
                marked,
            ));
        };
        // The commit point must be reached once begun (wait W2).
        let _may_wait = crate::wait::MayWait::new();
        let lsn = db
            .segs
            .commit(&db.store, seg, self.id)
            .map_err(|e| (e, marked))?;
        self.seg = None;
        Ok(lsn)
    }

    fn commit(&mut self) -> Result<()> {
        let (lsn, _) = self.commit_start(true)?;
        let Some(lsn) = lsn else {
            self.release_slot();
            return Ok(());
        };
        match self.opts.durability {
            Durability::Sync => match self.db.store.commit(lsn, Durability::Sync) {
                Ok(()) => {
                    self.release_slot();
                    super::purge::help(self.db, self.id)
                }
                Err(e) => {
                    self.abandon_slot();
                    Err(e)
                }
            },
            d => {
                self.release_slot();
                self.db.store.commit(lsn, d)?;
                super::purge::help(self.db, self.id)
            }
        }
    }

    /// Release the registry slot, if held (T1): the transaction's changes
    /// may be seen by views created from now on.
    fn release_slot(&mut self) {
        if let Some(s) = self.slot.take() {
            self.db.registry.release(s);
        }
    }

    /// Abandon the registry slot, if held (T1): the transaction's changes
    /// are never seen in this process.
    fn abandon_slot(&mut self) {
        if let Some(s) = self.slot.take() {
            s.abandon();
        }
    }
}

/// The slot of a commit still finishing (an async commit waiting for its
/// sync): released when dropped, so a future dropped before it resolves
/// still hands its slot back (T1).
struct HeldSlot<H: DbHandle> {
    db: H,
    token: Option<SlotToken>,
}

impl<H: DbHandle> HeldSlot<H> {
    fn release(&mut self) {
        if let Some(t) = self.token.take() {
            self.db.registry.release(t);
        }
    }

    fn abandon(&mut self) {
        if let Some(t) = self.token.take() {
            t.abandon();
        }
    }
}

impl<H: DbHandle> Drop for HeldSlot<H> {
    fn drop(&mut self) {
        self.release();
    }
}

impl<H: DbHandle> Drop for TxnCore<H> {
    fn drop(&mut self) {
        let mut c = self.ctx();
        if !c.done
            && let Err(e) = c.rollback_inner()
        {
            tracing::error!(trx = c.id, error = %e, "rollback of a dropped transaction failed");
        }
        // A transaction that ended by an error before it could hand its
        // slot back (T1): it changed nothing others may not see.
        c.release_slot();
    }
}

/// Rows of a scan, decoded, as the scan's read view sees them.
///
/// As an `Iterator` each row comes as owned values; [`Rows::next_ref`]
/// lends each row instead (columns decoded when asked for; a primary key
/// scan's rows not copied at all), for callers that use a row before
/// taking the next.
#[derive(Debug)]
pub struct Rows<'db> {
    db: &'db DbInner,
    schema: Arc<TableSchema>,
    view: ReadView,
    cursor: Cursor<'db>,
    index: Option<usize>,
    /// The current row when it is not the cursor's entry as it stands: an
    /// older version, or a row found through a secondary index (read with
    /// its record's header; `Place::Owned`'s `start` says where the row
    /// starts). Reused from row to row.
    owned: Vec<u8>,
    /// Scratch for checking a row found through an index against its
    /// entry's key (`table::sec_key_is`: text and bytes columns are
    /// encoded here), reused from row to row.
    key: Vec<u8>,
    place: Place,
}

/// Where the current row of [`Rows`] is.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// No current row.
    None,
    /// Bytes `start..end` of the cursor's current value, in its batch.
    Batch { start: usize, end: usize },
    /// Bytes `start..` of `Rows::owned`; `layout` is what `RowRef::new`
    /// found when `seek` checked them, if it did.
    Owned {
        start: usize,
        layout: Option<RowLayout>,
    },
}

impl Rows<'_> {
    /// The caller expects to read about `n` rows (a `LIMIT`): the scan's
    /// first visit of a leaf copies about that many entries, not a few
    /// then more (`btree::cursor`'s batches), so reading `n` rows
    /// descends the tree once per leaf it reads. Only a hint: the scan
    /// goes on past `n` rows if asked. Call it before the first row.
    #[must_use]
    pub fn expect_rows(mut self, n: usize) -> Self {
        self.cursor = self.cursor.expect(n);
        self
    }

    /// The next row the view sees, read in place: in a primary key scan,
    /// borrowed from the scan's batch when the view sees the row's newest
    /// version (most rows), so nothing is copied or allocated for it; a
    /// row found through a secondary index, or an older version, is
    /// copied once into a buffer the scan reuses. Its columns are decoded
    /// when [`RowRef::get`] or [`RowRef::iter`] asks for them.
    ///
    /// Inline, so a reader's loop builds the row in its own frame
    /// instead of copying it back out of a returned
    /// `Option<Result<RowRef>>` (see [`RowRef::new`]).
    #[inline]
    pub fn next_ref(&mut self) -> Option<Result<RowRef<'_>>> {
        if let Err(e) = crate::wait::step() {
            return Some(Err(e));
        }
        loop {
            match self.seek() {
                Err(e) => return Some(Err(e)),
                Ok(false) => return None,
                Ok(true) => {}
            }
            if !matches!(self.place, Place::None) {
                break;
            }
        }
        let columns = &self.schema.def.columns;
        let bytes = match self.place {
            Place::None => return None,
            Place::Owned { start, layout } => match (self.owned.get(start..), layout) {
                (Some(row), Some(layout)) => {
                    // `seek` checked these bytes and nothing changed them.
                    return Some(Ok(RowRef::with_layout(columns, row, layout)));
                }
                (Some(row), None) => row,
                (None, _) => {
                    debug_assert!(false, "Rows: the row seek placed is gone");
                    return None;
                }
            },
            Place::Batch { start, end } => {
                match self.cursor.current().and_then(|(_, v)| v.get(start..end)) {
                    Some(row) => row,
                    None => {
                        debug_assert!(false, "Rows: the entry seek placed is gone");
                        return None;
                    }
                }
            }
        };
        Some(RowRef::new(columns, bytes).map_err(Error::from))
    }

    /// Move to the next index entry; `false` at the end. `place` says
    /// where the row is, or `Place::None` if the view does not see one
    /// for this entry (the caller moves on).
    fn seek(&mut self) -> Result<bool> {
        self.place = Place::None;
        let Some(item) = self.cursor.next_entry() else {
            return Ok(false);
        };
        let (k, v) = item?;
        let schema = &self.schema;
        match self.index {
            None => match table::visible_in_place(self.db, &self.view, schema, k, v)? {
                None => {}
                Some(Cow::Borrowed(row)) => {
                    // `row` is a suffix of `v` (the record header first).
                    let start = v.len() - row.len();
                    self.place = Place::Batch {
                        start,
                        end: v.len(),
                    };
                }
                Some(Cow::Owned(row)) => {
                    self.owned = row;
                    self.place = Place::Owned {
                        start: 0,
                        layout: None,
                    };
                }
            },
            Some(i) => {
                let (sec, pk) = table::split_entry(schema, i, k)?;
                // The record is read into `owned` (its buffer reused from
                // row to row); the row is the part after the header when
                // the view sees the newest version, else the older
                // version the walk rebuilt.
                if !table::clustered(&self.db.store, schema).get_into(pk, &mut self.owned)? {
                    return Ok(true);
                }
                let found =
                    match table::visible_in_place(self.db, &self.view, schema, pk, &self.owned)? {
                        None => return Ok(true),
                        Some(Cow::Borrowed(row)) => Err(self.owned.len() - row.len()),
                        Some(Cow::Owned(row)) => Ok(row),
                    };
                let start = match found {
                    Err(start) => start,
                    Ok(row) => {
                        self.owned = row;
                        0
                    }
                };
                let Some(row) = self.owned.get(start..) else {
                    debug_assert!(false, "Rows: the row is a suffix of the record");
                    return Ok(true);
                };
                let row_ref = RowRef::new(&schema.def.columns, row)?;
                // Keep the entry only if the version has its key (else it
                // is an entry of another version).
                if table::sec_key_is(schema, i, &row_ref, sec, &mut self.key)? {
                    self.place = Place::Owned {
                        start,
                        layout: Some(row_ref.layout()),
                    };
                }
            }
        }
        Ok(true)
    }
}

impl Iterator for Rows<'_> {
    type Item = Result<Vec<Value>>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.next_ref()?.and_then(|row| Ok(row.to_values()?)))
    }
}
