//! Tables as the transaction layer sees them: the per-table state the
//! database keeps in memory, how rows, primary keys and secondary keys are
//! encoded, and the version chain of a clustered record.
//!
//! A clustered entry is `encoded primary key -> RecHeader | row`; a
//! secondary entry is `encoded secondary key | encoded primary key ->
//! empty`. Secondary entries carry no version of their own: a reader
//! follows one to the clustered record, takes the version its view sees,
//! and keeps the entry only if that version's secondary key is the
//! entry's (so an entry left by an older version is skipped, and a row
//! with versions A, B, A is returned once).
//!
//! Invariants:
//! * TB1. Every version of a row that some view may still read (the
//!   current version and older ones down to the first version visible to
//!   every view, `TrxRegistry::purge_bound`) has its entry in every
//!   secondary index. Entries are added with the version that needs them
//!   and removed only by purge or rollback after `needed_has_key` finds
//!   no such version with that key.
//! * TB2. A record's header names the undo record that holds its previous
//!   version (`roll`, within the writer `trx`), so the chain can be walked
//!   back while undo exists; purge removes undo only below the bound.
//! * TB3. An automatic key drawn while the table has stored no explicit
//!   key since its counter was loaded is absent from
//!   the clustered tree, and stays so until its inserter writes it, unless
//!   an explicit insert of the same key comes first: the counter starts
//!   above the largest key the tree holds (live or delete-marked) and only
//!   grows, keys never change, and every other key written since is
//!   another draw. The one step back: an insert refused without waiting
//!   (wait W5) gives back the key it drew (`give_back_auto`) after its
//!   statement removed the record and released the key's row lock, and
//!   only while that key is still the last drawn and no explicit key was
//!   stored, so the key is again absent and above every stored key. So such an insert skips the duplicate-key lookup if,
//!   after taking the key's row lock, the table has still stored no
//!   explicit key (`TableState::no_explicit_keys`). The check after the
//!   lock closes the race with an explicit insert of the same key: an
//!   explicit insert marks the table before it takes its row lock, so
//!   either it holds the lock first (and the mark is visible once the
//!   lock passes to the automatic insert, which then looks and finds the
//!   row) or the automatic insert holds it first (and the explicit insert
//!   finds its row). The first explicit key ends freshness for the life of
//!   the counter.

use std::borrow::Cow;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use crate::btree::{Direction, LeafHint, Tree};
use crate::catalog::schema::TableSchema;
use crate::catalog::{ColumnType, FilledRow, Value, decode_key, decode_row, keycode};
use crate::catalog::{RowRef, ValueRef};
use crate::page::PageId;
use crate::store::Store;
use crate::txn::lock::{INLINE_KEY, KeyBytes};
use crate::txn::{ReadView, RecHeader, RollPtr, TrxId, UndoKind, UndoRecord};
use crate::{Error, Result};

use super::DbInner;

/// An open table: a cheap handle (clone freely) naming one table of a
/// [`crate::Db`].
#[derive(Clone, Debug)]
pub struct Table {
    pub(crate) state: Arc<TableState>,
}

impl Table {
    /// The table's name.
    ///
    /// Never waits: it reads the copy of the schema kept beside its lock
    /// (a name does not change under DDL), so formatting a statement that
    /// names the table cannot wait out an index build.
    pub fn name(&self) -> String {
        self.state.latest().def.name.clone()
    }

    /// The table's current schema (waits while a DDL statement holds
    /// the table).
    pub fn schema(&self) -> Arc<TableSchema> {
        self.state.schema.read().clone()
    }

    /// [`Table::schema`], except that inside
    /// [`crate::wait::without_waiting`] a table a DDL statement holds (or
    /// waits for) gives [`Error::WouldWait`] instead of a wait.
    pub fn try_schema(&self) -> Result<Arc<TableSchema>> {
        Ok(self.state.schema_read()?.clone())
    }

    /// Whether the table was dropped ([`crate::Db::drop_table`]): every
    /// statement on it fails with [`Error::NoSuchTable`].
    pub fn is_dropped(&self) -> bool {
        self.state.dropped.load(Ordering::SeqCst)
    }

    /// The schema, or `NoSuchTable` once the table is dropped (the check
    /// of every read statement; DROP1 in `db::drop`).
    pub(crate) fn live_schema(&self) -> Result<Arc<TableSchema>> {
        let schema = self.try_schema()?;
        self.state.check_live(&schema)?;
        Ok(schema)
    }

    /// Position of column `name`, if the table has one.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.state
            .schema
            .read()
            .def
            .columns
            .iter()
            .position(|c| c.name == name)
    }
}

/// What the database keeps per table.
#[derive(Debug)]
pub(crate) struct TableState {
    /// The schema. Write statements hold the read lock for their duration;
    /// adding an index takes the write lock, so it sees no statement half
    /// done.
    pub(crate) schema: RwLock<Arc<TableSchema>>,
    /// Next automatic key (hidden row id or NULL int64 key), loaded on
    /// first use from the largest key stored.
    autoinc: Mutex<Option<i64>>,
    /// An explicit key was stored since the counter was loaded (TB3); set
    /// before that insert takes its row lock, never cleared.
    explicit: AtomicBool,
    /// Set (under the schema's write lock) when the table is dropped;
    /// never cleared once the drop reached its commit point (DROP1).
    pub(crate) dropped: AtomicBool,
    /// The schema the lock holds, readable without it (`latest`).
    latest: Mutex<Arc<TableSchema>>,
    /// Positions of indexes whose online build is running
    /// (`online_index` OI5): DROP INDEX refuses them.
    pub(crate) builds: Mutex<Vec<usize>>,
}

impl TableState {
    /// The schema's read lock. A DDL statement holds the write lock for as
    /// long as it takes (a plain CREATE INDEX: its whole build), so a
    /// thread that must not block gets [`Error::WouldWait`] instead of
    /// queueing behind it (wait W1: taken before any change).
    pub(crate) fn schema_read(&self) -> Result<RwLockReadGuard<'_, Arc<TableSchema>>> {
        if let Some(g) = self.schema.try_read() {
            return Ok(g);
        }
        crate::wait::check("a table's schema lock (a DDL statement holds it)")?;
        Ok(self.schema.read())
    }

    pub(crate) fn new(schema: Arc<TableSchema>) -> TableState {
        TableState {
            latest: Mutex::new(schema.clone()),
            schema: RwLock::new(schema),
            autoinc: Mutex::new(None),
            explicit: AtomicBool::new(false),
            dropped: AtomicBool::new(false),
            builds: Mutex::new(Vec::new()),
        }
    }

    /// Replace the schema, holding its write lock as `guard`.
    pub(crate) fn install(
        &self,
        guard: &mut parking_lot::RwLockWriteGuard<'_, Arc<TableSchema>>,
        new: Arc<TableSchema>,
    ) {
        *self.latest.lock() = new.clone();
        **guard = new;
    }

    /// The schema as last installed, without the schema lock: for purge
    /// and rollback, which read it holding row locks. Taking the lock
    /// there could wait behind a DDL that waits for a statement that
    /// waits for one of those row locks.
    pub(crate) fn latest(&self) -> Arc<TableSchema> {
        self.latest.lock().clone()
    }

    /// `NoSuchTable` once the table is dropped (DROP1): write statements
    /// call this holding the schema's read lock, reads after taking the
    /// schema.
    pub(crate) fn check_live(&self, schema: &TableSchema) -> Result<()> {
        if self.dropped.load(Ordering::SeqCst) {
            return Err(Error::NoSuchTable {
                name: schema.def.name.clone(),
            });
        }
        Ok(())
    }

    /// Whether `schema` takes automatic keys: no primary key (hidden row
    /// id) or a single int64 primary key column (filled when NULL).
    pub(crate) fn auto_key_column(schema: &TableSchema) -> Option<Option<usize>> {
        match schema.def.primary_key.as_slice() {
            [] => Some(None),
            [k] if schema.def.columns.get(*k).map(|c| c.ty) == Some(ColumnType::Int64) => {
                Some(Some(*k))
            }
            _ => None,
        }
    }

    fn load_autoinc(&self, store: &Store, schema: &TableSchema) -> Result<i64> {
        let tree = Tree::open(store, PageId(schema.clustered_root));
        let mut c = tree.range(Bound::Unbounded, Bound::Unbounded, Direction::Backward);
        Ok(match c.next() {
            None => 1,
            Some(item) => {
                let (k, _) = item?;
                match decode_key(&k, &[ColumnType::Int64])?.first() {
                    Some(Value::Int64(v)) => v.saturating_add(1).max(1),
                    _ => 1,
                }
            }
        })
    }

    /// Draw the next automatic key.
    pub(crate) fn next_auto(&self, store: &Store, schema: &TableSchema) -> Result<i64> {
        let mut a = self.autoinc.lock();
        let next = match *a {
            Some(n) => n,
            None => self.load_autoinc(store, schema)?,
        };
        // `next` saturates at i64::MAX (a key above the largest taken
        // does not fit): the keys are used up, and the next would be one
        // past the largest.
        if next == i64::MAX {
            return Err(Error::LimitExceeded {
                what: "the next automatic key",
                actual: (i64::MAX as u64) + 1,
                max: i64::MAX as u64,
            });
        }
        *a = Some(next + 1);
        Ok(next)
    }

    /// Give back automatic key `k`, drawn by an insert that was refused
    /// and undone with its new locks released (wait W5): the next draw
    /// returns it again, unless a later key was drawn or an explicit key
    /// stored since (TB3). Otherwise it is a gap, as any undone insert's
    /// key is.
    pub(crate) fn give_back_auto(&self, k: i64) {
        let mut a = self.autoinc.lock();
        // `explicit` is read under the counter's lock: `saw_key` sets it
        // before it takes the lock, so an explicit key either stops this
        // or is applied to the counter after it.
        if *a == k.checked_add(1) && !self.explicit.load(Ordering::SeqCst) {
            *a = Some(k);
        }
    }

    /// An explicit key `v` is being stored (called before its row lock):
    /// automatic keys continue above it and are no longer fresh (TB3).
    pub(crate) fn saw_key(&self, store: &Store, schema: &TableSchema, v: i64) -> Result<()> {
        self.explicit.store(true, Ordering::SeqCst);
        let mut a = self.autoinc.lock();
        let next = match *a {
            Some(n) => n,
            None => self.load_autoinc(store, schema)?,
        };
        *a = Some(next.max(v.saturating_add(1)));
        Ok(())
    }

    /// No explicit key has been stored since the counter was loaded (TB3).
    pub(crate) fn no_explicit_keys(&self) -> bool {
        !self.explicit.load(Ordering::SeqCst)
    }
}

/// The clustered tree of `schema`.
pub(crate) fn clustered<'s>(store: &'s Store, schema: &TableSchema) -> Tree<'s> {
    Tree::open(store, PageId(schema.clustered_root))
}

/// Secondary tree `i` of `schema`; `None` for a dropped index (catalog
/// C5: its root may already be freed).
pub(crate) fn secondary<'s>(store: &'s Store, schema: &TableSchema, i: usize) -> Option<Tree<'s>> {
    if !schema.index_is_live(i) {
        return None;
    }
    schema
        .index_roots
        .get(i)
        .map(|&r| Tree::open(store, PageId(r)))
}

/// Encoded primary key of a row (not for hidden keys). `values` has one
/// value per column (checked at insert, produced so by `decode`).
pub(crate) fn pk_of<'v>(schema: &TableSchema, values: impl Into<FilledRow<'v>>) -> Vec<u8> {
    let values = values.into();
    debug_assert_eq!(
        values.len(),
        schema.def.columns.len(),
        "a row has one value per column"
    );
    let mut out = Vec::with_capacity(16);
    keycode::encode_key_refs(
        schema
            .def
            .primary_key
            .iter()
            .map(|&k| column_ref(&values, k)),
        &mut out,
    );
    out
}

/// Column `k` of a row of one value per column, borrowed.
fn column_ref<'v>(values: &FilledRow<'v>, k: usize) -> ValueRef<'v> {
    values.get(k).map_or(ValueRef::Null, ValueRef::from)
}

/// Encoded key of secondary index `i` (a position in the schema's
/// indexes) for a row of one value per column.
pub(crate) fn sec_key_of<'v>(
    schema: &TableSchema,
    i: usize,
    values: impl Into<FilledRow<'v>>,
) -> Vec<u8> {
    let values = values.into();
    debug_assert_eq!(
        values.len(),
        schema.def.columns.len(),
        "a row has one value per column"
    );
    let mut out = Vec::with_capacity(32);
    let key = sec_key_with(schema, i, &mut out, |k| {
        Ok::<_, std::convert::Infallible>(column_ref(&values, k))
    });
    match key {
        Ok(()) => out,
        Err(never) => match never {},
    }
}

/// [`sec_key_of`] for a row read in place, into `out` (cleared first):
/// only the index's columns are decoded, and nothing is allocated once
/// `out` has grown to a key's length.
pub(crate) fn sec_key_of_ref(
    schema: &TableSchema,
    i: usize,
    row: &RowRef<'_>,
    out: &mut Vec<u8>,
) -> Result<()> {
    out.clear();
    sec_key_with(schema, i, out, |k| Ok::<_, Error>(row.get(k)?))
}

/// Whether `sec`, the secondary part of an entry of index `i`, is the
/// key of `row` (as `sec_key_of_ref` then `==` answers, without building
/// the row's key: its columns are compared with `sec` one at a time, and
/// the first that differs ends the check). `scratch` is for text and
/// bytes columns. A damaged column after the first that differs is not
/// read, so it is no error here: the row is skipped for this entry
/// anyway, and `Db::check` reports the damage.
pub(crate) fn sec_key_is(
    schema: &TableSchema,
    i: usize,
    row: &RowRef<'_>,
    sec: &[u8],
    scratch: &mut Vec<u8>,
) -> Result<bool> {
    let Some(ix) = schema.def.indexes.get(i) else {
        debug_assert!(false, "an index position of the schema");
        return Ok(false);
    };
    let mut rest = sec;
    for &k in &ix.columns {
        match keycode::strip_encoded(row.get(k)?, rest, scratch) {
            Some(r) => rest = r,
            None => return Ok(false),
        }
    }
    Ok(rest.is_empty())
}

/// Append the encoded key of index `i` of a row whose column `k` is
/// `column(k)` to `out`.
fn sec_key_with<'v, E>(
    schema: &TableSchema,
    i: usize,
    out: &mut Vec<u8>,
    mut column: impl FnMut(usize) -> std::result::Result<ValueRef<'v>, E>,
) -> std::result::Result<(), E> {
    debug_assert!(
        i < schema.def.indexes.len(),
        "an index position of the schema"
    );
    let mut failed = None;
    if let Some(ix) = schema.def.indexes.get(i) {
        let values = ix.columns.iter().map_while(|&k| match column(k) {
            Ok(v) => Some(v),
            Err(e) => {
                failed = Some(e);
                None
            }
        });
        keycode::encode_key_refs(values, out);
    }
    match failed {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// Whether a secondary key has a NULL column (not checked for uniqueness).
pub(crate) fn sec_key_has_null<'v>(
    schema: &TableSchema,
    i: usize,
    values: impl Into<FilledRow<'v>>,
) -> bool {
    let values = values.into();
    schema.def.indexes.get(i).is_some_and(|ix| {
        ix.columns
            .iter()
            .any(|&k| values.get(k).is_none_or(Value::is_null))
    })
}

/// [`sec_key_has_null`] for a row read in place: only the index's
/// columns are read.
pub(crate) fn sec_key_has_null_ref(
    schema: &TableSchema,
    i: usize,
    row: &RowRef<'_>,
) -> Result<bool> {
    let Some(ix) = schema.def.indexes.get(i) else {
        return Ok(false);
    };
    for &k in &ix.columns {
        if matches!(row.get(k)?, ValueRef::Null) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `sec key | pk`.
pub(crate) fn entry_key(sec: &[u8], pk: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(sec.len() + pk.len());
    k.extend_from_slice(sec);
    k.extend_from_slice(pk);
    k
}

/// Split a secondary entry key into its secondary key and primary key
/// (the secondary key's values are checked, not decoded).
pub(crate) fn split_entry<'a>(
    schema: &TableSchema,
    i: usize,
    key: &'a [u8],
) -> Result<(&'a [u8], &'a [u8])> {
    debug_assert!(
        i < schema.def.indexes.len(),
        "an index position of the schema"
    );
    let columns = &schema.def.columns;
    let types = schema.def.indexes.get(i).into_iter().flat_map(|ix| {
        ix.columns
            .iter()
            .filter_map(|&k| columns.get(k).map(|c| &c.ty))
    });
    let at = keycode::key_prefix_len(key, types)?;
    Ok(key.split_at(at))
}

/// Row values from row bytes.
pub(crate) fn decode(schema: &TableSchema, row: &[u8]) -> Result<Vec<Value>> {
    Ok(decode_row(&schema.def.columns, row)?)
}

/// The lock name of a row: `table id | 0 | pk` (inline, no allocation,
/// for keys up to `lock::INLINE_KEY` bytes).
pub(crate) fn row_lock(table: u64, pk: &[u8]) -> KeyBytes {
    lock_name(table, 0, pk)
}

/// The lock name of a unique secondary key: `table id | 1 + index | key`.
pub(crate) fn unique_lock(table: u64, i: usize, sec: &[u8]) -> KeyBytes {
    lock_name(table, u8::try_from(i + 1).unwrap_or(u8::MAX), sec)
}

fn lock_name(table: u64, kind: u8, key: &[u8]) -> KeyBytes {
    let n = 9 + key.len();
    if n > INLINE_KEY {
        let mut k = Vec::with_capacity(n);
        k.extend_from_slice(&table.to_be_bytes());
        k.push(kind);
        k.extend_from_slice(key);
        return KeyBytes::from_vec(k);
    }
    // Built in place: SmallVec's element-wise extend costs several times
    // a copy.
    let mut buf = [0u8; INLINE_KEY];
    // In bounds: `n <= INLINE_KEY`, checked above.
    #[allow(clippy::indexing_slicing)]
    {
        buf[..8].copy_from_slice(&table.to_be_bytes());
        buf[8] = kind;
        buf[9..n].copy_from_slice(key);
    }
    KeyBytes::from_buf_and_len(buf, n)
}

/// A clustered record: header and row bytes.
pub(crate) type Rec = (RecHeader, Vec<u8>);

/// Read the newest version of the record with primary key `pk`.
pub(crate) fn read_rec(store: &Store, schema: &TableSchema, pk: &[u8]) -> Result<Option<Rec>> {
    match clustered(store, schema).get(pk)? {
        None => Ok(None),
        Some(v) => split_rec_owned(v).map(Some),
    }
}

/// [`read_rec`], and where the record was found: a write of the same
/// row passes that on ([`crate::btree::Tree::put_at`], B+tree LH1).
pub(crate) fn read_rec_at(
    store: &Store,
    schema: &TableSchema,
    pk: &[u8],
) -> Result<Option<(Rec, LeafHint)>> {
    match clustered(store, schema).get_with_leaf(pk)? {
        None => Ok(None),
        Some((v, at)) => Ok(Some((split_rec_owned(v)?, at))),
    }
}

/// Split a clustered value.
pub(crate) fn split_rec(value: &[u8]) -> Result<Rec> {
    let (h, row) = RecHeader::decode(value)?;
    Ok((h, row.to_vec()))
}

/// Split a clustered value, keeping its buffer for the row.
pub(crate) fn split_rec_owned(mut value: Vec<u8>) -> Result<Rec> {
    let (h, row) = RecHeader::decode(&value)?;
    let header_len = value.len() - row.len();
    value.drain(..header_len);
    Ok((h, value))
}

fn missing_undo(db: &DbInner, trx: TrxId, roll: RollPtr) -> Error {
    Error::Corrupt {
        file: db.store.pool().file().path().to_path_buf(),
        offset: 0,
        reason: format!(
            "undo record {roll} of transaction {trx} is missing but a read view needs it"
        ),
    }
}

/// A walk down one row's version chain. A sound chain only goes to older
/// versions, so it never names one undo record twice; a damaged one (an
/// undo record whose old value names itself or a later record) would be
/// followed forever. The walk remembers one version and compares every
/// later one with it, moving the mark ahead at powers of two (Brent's
/// cycle detection): no memory, and a cycle is found within a few times
/// its length.
#[derive(Debug, Default)]
pub(crate) struct VersionWalk {
    mark: Option<(TrxId, RollPtr)>,
    steps: u64,
    power: u64,
}

impl VersionWalk {
    /// Record that the walk is at the version whose header is `h`; an
    /// error if it was there before.
    fn visit(&mut self, db: &DbInner, h: &RecHeader) -> Result<()> {
        let here = (h.trx, h.roll);
        if self.mark == Some(here) {
            return Err(Error::Corrupt {
                file: db.store.pool().file().path().to_path_buf(),
                offset: 0,
                reason: format!(
                    "the version chain comes back to undo record {} of transaction {}",
                    h.roll, h.trx
                ),
            });
        }
        self.steps += 1;
        if self.steps >= self.power {
            self.mark = Some(here);
            self.power = self.power.saturating_mul(2).max(1);
            self.steps = 0;
        }
        Ok(())
    }
}

/// The previous version of `rec`: `Ok(None)` when it has none (inserted
/// by its writer, or history no longer kept). `walk` is the chain walk
/// `rec` belongs to (an error if the chain loops).
pub(crate) fn previous(
    db: &DbInner,
    rec: &Rec,
    walk: &mut VersionWalk,
) -> Result<Option<Option<Rec>>> {
    Ok(previous_step(db, rec, walk)?.map(|p| p.map(|(prev, _)| prev)))
}

/// [`previous`], with the undo record the previous version was rebuilt
/// from (which a walk that needs to know what the record describes
/// reads: `online_index` OI6).
pub(crate) fn previous_step(
    db: &DbInner,
    rec: &Rec,
    walk: &mut VersionWalk,
) -> Result<Option<Option<(Rec, UndoRecord)>>> {
    let (h, row) = rec;
    if h.roll == RollPtr::NONE {
        return Ok(None);
    }
    if h.roll.is_insert() {
        // Inserted, its undo in a segment no reader reads (undo U6).
        return Ok(Some(None));
    }
    walk.visit(db, h)?;
    let undo = if h.roll.is_segment() {
        db.segs.read_at(&db.store, h.trx, h.roll)?
    } else {
        db.undo.get(&db.store, h.trx, h.roll.0)?
    };
    match undo {
        None => Ok(None),
        Some(u) if u.kind == UndoKind::Insert => Ok(Some(None)),
        // A delta is rebuilt from the version it replaced: `rec` (undo U9).
        Some(u) => {
            let prev = u.previous_version(row)?;
            Ok(Some(prev.map(|prev| (prev, u))))
        }
    }
}

/// The row bytes of the version of `rec` (the record of `pk`) that `view`
/// sees, or `None` if the row does not exist for it (TB2). An undo record
/// can vanish under a reader only when its writer rolled back and restored
/// the record first; the reader then starts again from the record.
pub(crate) fn visible(
    db: &DbInner,
    view: &ReadView,
    schema: &TableSchema,
    pk: &[u8],
    rec: Rec,
) -> Result<Option<Vec<u8>>> {
    let mut cur = rec;
    let mut retries = 0;
    let mut walk = VersionWalk::default();
    loop {
        if view.sees(cur.0.trx) {
            return Ok(if cur.0.deleted { None } else { Some(cur.1) });
        }
        let h = &cur.0;
        match previous(db, &cur, &mut walk)? {
            Some(Some(prev)) => cur = prev,
            Some(None) => return Ok(None),
            None if retries < 100 => {
                retries += 1;
                walk = VersionWalk::default();
                match read_rec(&db.store, schema, pk)? {
                    Some(r) => cur = r,
                    None => return Ok(None),
                }
            }
            None => return Err(missing_undo(db, h.trx, h.roll)),
        }
    }
}

/// [`visible`] for a clustered value read in place (`value`, the record
/// of `pk`): the row is borrowed from `value` when the view sees the
/// current version (no copy), and copied only to walk to an older one.
#[inline]
pub(crate) fn visible_in_place<'v>(
    db: &DbInner,
    view: &ReadView,
    schema: &TableSchema,
    pk: &[u8],
    value: &'v [u8],
) -> Result<Option<Cow<'v, [u8]>>> {
    let (h, row) = RecHeader::decode(value)?;
    if view.sees(h.trx) {
        return Ok((!h.deleted).then_some(Cow::Borrowed(row)));
    }
    Ok(visible(db, view, schema, pk, (h, row.to_vec()))?.map(Cow::Owned))
}

/// Whether a version of the row some view may still read (the current
/// version `cur` and older ones down to the first visible to all views,
/// below `bound`) has secondary key `key` in index `i` (TB1). With
/// `all_history`, follow the chain while undo exists instead (what
/// `check` accepts: entries purge has not reached yet).
pub(crate) fn needed_has_key(
    db: &DbInner,
    schema: &TableSchema,
    i: usize,
    key: &[u8],
    cur: Option<Rec>,
    bound: TrxId,
    all_history: bool,
) -> Result<bool> {
    let mut v = cur;
    let mut walk = VersionWalk::default();
    while let Some(rec) = v {
        let values = decode(schema, &rec.1)?;
        if sec_key_of(schema, i, &values) == key {
            return Ok(true);
        }
        if !all_history && rec.0.trx < bound {
            return Ok(false);
        }
        v = previous(db, &rec, &mut walk)?.flatten();
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::catalog::Column;
    use crate::catalog::schema::{IndexDef, TableDef};
    use crate::db::{Db, Options};
    use crate::io::{SimFs, Vfs};
    use crate::log::Durability;
    use crate::txn::UndoRecord;
    use crate::txn::undo_log::UndoLog;

    fn options() -> Options {
        Options {
            store: crate::store::test_options(),
            purge: false,
            ..Options::default()
        }
    }

    /// Lock names are `table id (big-endian) | kind | key`, built inline
    /// or on the heap by length, with the same bytes either way.
    #[test]
    fn lock_names_are_table_kind_and_key() {
        for len in [0, INLINE_KEY - 9, INLINE_KEY - 8, 200] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for (name, kind) in [
                (row_lock(0x0102, &key), 0u8),
                (unique_lock(0x0102, 4, &key), 5),
            ] {
                let mut want = 0x0102u64.to_be_bytes().to_vec();
                want.push(kind);
                want.extend_from_slice(&key);
                assert_eq!(&name[..], &want[..], "{len}-byte key");
                assert_eq!(name.spilled(), want.len() > INLINE_KEY);
            }
        }
    }

    /// A row whose undo record's old value names that same undo record
    /// (damage with valid checksums): the version chain loops. Following
    /// it used to hang a read that needs an older version and the
    /// rollback at open; now both are errors.
    #[test]
    fn version_chain_cycle_is_an_error_not_a_loop() {
        for committed in [true, false] {
            let fs = SimFs::new(1);
            let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
            let dir = Path::new("/db");
            let db = Db::open_with(vfs.clone(), dir, options()).unwrap();
            let t = db
                .create_table(TableDef {
                    name: "t".into(),
                    columns: vec![
                        Column::new("k", ColumnType::Int64, false),
                        Column::new("v", ColumnType::Int64, false),
                    ],
                    primary_key: vec![0],
                    indexes: vec![IndexDef {
                        name: "by_v".into(),
                        columns: vec![1],
                        unique: false,
                    }],
                })
                .unwrap();
            let mut tx = db.begin().unwrap();
            tx.insert(&t, &[Value::Int64(1), Value::Int64(10)]).unwrap();
            tx.commit().unwrap();
            // A transaction id no view sees yet, whose record names itself.
            let trx = 1 << 40;
            let schema = t.schema();
            let store = db.store();
            let pk = pk_of(&schema, &[Value::Int64(1), Value::Int64(20)]);
            let row = crate::catalog::encode_row(
                &schema.def.columns,
                &[Value::Int64(1), Value::Int64(20)],
            )
            .unwrap();
            let looped = RecHeader {
                trx,
                roll: RollPtr(1),
                deleted: false,
            }
            .encode(&row);
            let (undo, _) = UndoLog::open(store).unwrap();
            let rec = UndoRecord {
                kind: UndoKind::Update,
                undo_no: 1,
                table: schema.id,
                trx,
                prev_trx: trx,
                prev_roll: RollPtr(1),
                key: pk.clone(),
                old: Some(crate::txn::OldVersion::Whole(looped.clone())),
                changed: UndoRecord::changed_mask(1, [0]),
            };
            undo.put(store, trx, 1, &rec).unwrap();
            // The newest version: another secondary key, so a rollback
            // walks the chain for the old one.
            let newest = crate::catalog::encode_row(
                &schema.def.columns,
                &[Value::Int64(1), Value::Int64(30)],
            )
            .unwrap();
            let newest = RecHeader {
                trx,
                roll: RollPtr(1),
                deleted: false,
            }
            .encode(&newest);
            clustered(store, &schema).put(&pk, &newest).unwrap();
            let lsn = if committed {
                undo.mark_committed(store, trx).unwrap()
            } else {
                store.log().end_lsn()
            };
            store.commit(lsn, Durability::Sync).unwrap();
            drop(t);
            drop(db);
            match Db::open_with(vfs, dir, options()) {
                Ok(db) => {
                    assert!(committed, "the rollback at open followed the loop");
                    let t = db.table("t").unwrap();
                    let mut tx = db.begin().unwrap();
                    assert!(matches!(
                        tx.get(&t, &[Value::Int64(1)]),
                        Err(Error::Corrupt { .. })
                    ));
                }
                Err(e) => {
                    assert!(!committed, "{e}");
                    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
                }
            }
        }
    }
}
