//! RocksDB as a peer engine (cargo feature `peers`): the `rocksdb` crate
//! against the system `librocksdb` (Debian's `librocksdb-dev`; build with
//! `ROCKSDB_LIB_DIR`, which `.cargo/config.toml` sets).
//!
//! How tables map onto one key space (the default column family, as
//! MyRocks lays out its indexes):
//! * every table and every secondary index gets a 4-byte object id; a key
//!   starts with its object's id, big-endian, so each object's keys are one
//!   contiguous range;
//! * a row is stored at `table id ++ encode_key(primary key)` with Quill's
//!   own row encoding as the value;
//! * a secondary index entry is `index id ++ encode_key(index columns ++
//!   primary key)` with an empty value, so entries are unique and an index
//!   range read is a seek and a scan, then a point read of each row;
//! * a NULL single int64 primary key gets the table's next automatic id
//!   (an in-memory counter, as the tables are created by the run); such an
//!   insert looks for an existing row only once the table has stored an
//!   explicit key (checked under the row lock, as Quill's TB3 does).
//!
//! A transaction is one `WriteBatch` written with `sync = true`: the rows
//! and their secondary index entries commit together, and durably (the
//! WAL is synced before the write returns; RocksDB groups concurrent
//! writers into one WAL write and sync). Reads are plain reads of the
//! latest committed data, plus the transaction's own pending row writes
//! for point reads. Rows a transaction writes are locked from its first
//! read of them until its batch is written (striped row locks, waited for
//! up to [`LOCK_WAIT`], then the transaction is retried), so concurrent
//! read-modify-writes of one row cannot lose an update or strand an index
//! entry. The queue deletes (`delete_first`) read the first rows from
//! their lower bound (an iterator lower bound, so the tombstones of
//! earlier deletes are not walked) and delete them, with their index
//! entries: a batch of [`RocksOptions::range_delete_min_rows`] rows or
//! more with one range tombstone, a smaller one row by row. Small range
//! deletes are slow in this RocksDB (7.8): every new range tombstone
//! invalidates the memtable's fragmented-tombstone cache, so the next read
//! re-fragments all of them (facebook/rocksdb#4808; Oxia falls back to
//! point deletes below 100 keys for the same reason, oxia-db/oxia#644).
//! Measured in `bench/results/insert.md`.
//!
//! Limits, stated rather than hidden: the table catalog lives in memory, so
//! the engine opens only an empty directory; unique secondary indexes are
//! not supported; range reads do not see the transaction's own writes.
//!
//! Log syncs are counted by RocksDB's statistics (`rocksdb.wal.synced`,
//! one per WAL sync). There is no way to inject an fsync delay: the crate
//! does not let a caller supply its own `Env`/`FileSystem`.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use rocksdb::{BlockBasedOptions, Cache, DB, Options, ReadOptions, WriteBatch, WriteOptions};

use super::engine::{Engine, Ops, Session, WriteSplit, read_columns};
use quill::catalog::schema::{IndexDef, TableDef};
use quill::catalog::{ColumnType, RowRef, Value, decode_key, decode_row, encode_key, encode_row};
use quill::{Error, Result};

const ENGINE: &str = "rocksdb";

/// How long a transaction waits for a row lock before it is rolled back
/// and retried (a deadlock between two transactions ends this way).
pub const LOCK_WAIT: Duration = Duration::from_millis(100);

/// Longest [`Engine::quiesce`] waits for flushes and compactions.
const QUIESCE_LIMIT: Duration = Duration::from_secs(120);

/// Row lock stripes (a power of two).
const STRIPES: usize = 1 << 16;

fn err(e: rocksdb::Error) -> Error {
    let retryable = matches!(
        e.kind(),
        rocksdb::ErrorKind::Busy | rocksdb::ErrorKind::TryAgain | rocksdb::ErrorKind::TimedOut
    );
    Error::Peer {
        engine: ENGINE,
        reason: e.into_string(),
        retryable,
    }
}

fn invalid(reason: String) -> Error {
    Error::Peer {
        engine: ENGINE,
        reason,
        retryable: false,
    }
}

/// Engine options.
#[derive(Clone, Debug)]
pub struct RocksOptions {
    /// Block cache bytes (the counterpart of Quill's buffer pool).
    pub cache_bytes: usize,
    /// Queue deletes of at least this many rows use one range tombstone;
    /// smaller ones delete each row (see the module doc for why).
    pub range_delete_min_rows: usize,
}

impl Default for RocksOptions {
    fn default() -> Self {
        RocksOptions {
            cache_bytes: 1 << 30,
            range_delete_min_rows: super::engine::ROCKSDB_RANGE_DELETE_MIN_ROWS,
        }
    }
}

/// A table and the object ids of its keys (shared by `Arc`: looking a
/// table up is on every operation's path).
#[derive(Clone)]
struct TableInfo {
    def: TableDef,
    id: u32,
    /// Object id of each entry of `def.indexes`, in order.
    index_ids: Vec<u32>,
    /// Whether the primary key is one int64 column (automatic ids).
    auto: bool,
    ids: Arc<AutoIds>,
}

/// A table's automatic ids, as Quill keeps them (its table invariant
/// TB3): an automatic insert looks for an existing row only once an
/// explicit key was stored, checked after taking the row lock.
#[derive(Default)]
struct AutoIds {
    next: AtomicI64,
    /// An explicit key was stored; set before that insert's row lock.
    explicit: AtomicBool,
}

/// RocksDB with one session per client.
pub struct RocksEngine {
    db: DB,
    /// The options the database was opened with: they hold the statistics.
    opts: Options,
    tables: RwLock<HashMap<String, Arc<TableInfo>>>,
    next_object: AtomicU32,
    next_session: AtomicU64,
    range_delete_min_rows: usize,
    /// Block cache bytes (for the reports).
    cache_bytes: usize,
    /// Row lock stripes: 0 when free, else the owning session's id.
    locks: Box<[AtomicU64]>,
    hasher: std::collections::hash_map::RandomState,
}

impl RocksEngine {
    /// Create a database in `dir` (which must not hold one yet).
    pub fn open(dir: &Path, options: &RocksOptions) -> Result<RocksEngine> {
        if dir.join("CURRENT").exists() {
            return Err(invalid(format!(
                "{} already holds a RocksDB database; the peer keeps its catalog in memory and needs an empty directory",
                dir.display()
            )));
        }
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.increase_parallelism(2);
        opts.set_max_background_jobs(2);
        opts.set_bytes_per_sync(1 << 20);
        // From RocksDB's tuning guides, for many small synced writes:
        // pipeline the WAL and memtable writes of concurrent writers, and
        // keep up to four memtables so a flush does not stall writers.
        // (WAL recycling, also recommended there, is not available: RocksDB
        // turns it off under point-in-time recovery, its default, and the
        // one mode that keeps it may drop committed writes at recovery.)
        opts.set_enable_pipelined_write(true);
        opts.set_max_write_buffer_number(4);
        opts.set_level_compaction_dynamic_level_bytes(true);
        opts.enable_statistics();
        let cache = Cache::new_lru_cache(options.cache_bytes).map_err(err)?;
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(10.0, false);
        table.set_cache_index_and_filter_blocks(true);
        table.set_pin_l0_filter_and_index_blocks_in_cache(true);
        opts.set_block_based_table_factory(&table);
        let db = DB::open(&opts, dir).map_err(err)?;
        Ok(RocksEngine {
            db,
            opts,
            tables: RwLock::new(HashMap::new()),
            next_object: AtomicU32::new(1),
            next_session: AtomicU64::new(1),
            range_delete_min_rows: options.range_delete_min_rows,
            cache_bytes: options.cache_bytes,
            locks: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            hasher: std::collections::hash_map::RandomState::new(),
        })
    }

    fn info(&self, table: &str) -> Result<Arc<TableInfo>> {
        super::engine::lookup(&self.tables, table)
    }

    /// A ticker from RocksDB's statistics dump.
    fn ticker(&self, name: &str) -> Option<u64> {
        let dump = self.opts.get_statistics()?;
        dump.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(" COUNT : ")?;
            rest.trim().parse().ok()
        })
    }

    fn stripe(&self, key: &[u8]) -> usize {
        (self.hasher.hash_one(key) as usize) & (STRIPES - 1)
    }

    /// Fill one index's entries for the table's existing rows.
    fn build_index(&self, info: &TableInfo, index: &IndexDef, index_id: u32) -> Result<()> {
        let mut it = self.db.raw_iterator_opt(range_opts(info.id));
        it.seek(info.id.to_be_bytes());
        let mut batch = WriteBatch::default();
        while it.valid() {
            let (Some(_), Some(value)) = (it.key(), it.value()) else {
                break;
            };
            let row = decode_row(&info.def.columns, value)?;
            batch.put(index_key(index_id, &info.def, index, &row), []);
            if batch.len() >= 10_000 {
                self.db.write(std::mem::take(&mut batch)).map_err(err)?;
            }
            it.next();
        }
        it.status().map_err(err)?;
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(batch, &wo).map_err(err)
    }
}

/// Read options bounded to object `id`'s keys.
fn range_opts(id: u32) -> ReadOptions {
    let mut ro = ReadOptions::default();
    ro.set_iterate_upper_bound(id.saturating_add(1).to_be_bytes().to_vec());
    ro
}

fn pk_values(def: &TableDef, row: &[Value]) -> Vec<Value> {
    def.primary_key
        .iter()
        .filter_map(|&c| row.get(c).cloned())
        .collect()
}

fn row_key(id: u32, pk: &[Value]) -> Vec<u8> {
    let mut k = id.to_be_bytes().to_vec();
    encode_key(pk, &mut k);
    k
}

fn index_key(id: u32, def: &TableDef, index: &IndexDef, row: &[Value]) -> Vec<u8> {
    let mut k = id.to_be_bytes().to_vec();
    let cols: Vec<Value> = index
        .columns
        .iter()
        .chain(def.primary_key.iter())
        .filter_map(|&c| row.get(c).cloned())
        .collect();
    encode_key(&cols, &mut k);
    k
}

impl Engine for RocksEngine {
    fn name(&self) -> &'static str {
        ENGINE
    }

    fn create_table(&self, def: &TableDef) -> Result<()> {
        if def.primary_key.is_empty() {
            return Err(invalid(format!("table {} has no primary key", def.name)));
        }
        if let Some(ix) = def.indexes.iter().find(|i| i.unique) {
            return Err(invalid(format!(
                "index {}: unique secondary indexes are not supported by the RocksDB peer",
                ix.name
            )));
        }
        let mut tables = self.tables.write();
        if tables.contains_key(&def.name) {
            return Err(invalid(format!("table {} already exists", def.name)));
        }
        let id = self.next_object.fetch_add(1, Ordering::Relaxed);
        let index_ids = def
            .indexes
            .iter()
            .map(|_| self.next_object.fetch_add(1, Ordering::Relaxed))
            .collect();
        let auto = def.primary_key.len() == 1
            && def
                .primary_key
                .first()
                .and_then(|&c| def.columns.get(c))
                .is_some_and(|c| c.ty == ColumnType::Int64);
        let ids = Arc::new(AutoIds {
            next: AtomicI64::new(1),
            explicit: AtomicBool::new(false),
        });
        tables.insert(
            def.name.clone(),
            Arc::new(TableInfo {
                def: def.clone(),
                id,
                index_ids,
                auto,
                ids,
            }),
        );
        Ok(())
    }

    fn create_index(&self, table: &str, index: &IndexDef) -> Result<()> {
        if index.unique {
            return Err(invalid(format!(
                "index {}: unique secondary indexes are not supported by the RocksDB peer",
                index.name
            )));
        }
        let info = self.info(table)?;
        if info.def.indexes.iter().any(|i| i.name == index.name) {
            return Err(invalid(format!(
                "table {table} already has an index named {}",
                index.name
            )));
        }
        let index_id = self.next_object.fetch_add(1, Ordering::Relaxed);
        self.build_index(&info, index, index_id)?;
        let mut tables = self.tables.write();
        if let Some(t) = tables.get_mut(table) {
            let mut grown = TableInfo::clone(t);
            grown.def.indexes.push(index.clone());
            grown.index_ids.push(index_id);
            *t = Arc::new(grown);
        }
        Ok(())
    }

    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(RocksSession {
            engine: self,
            id: self.next_session.fetch_add(1, Ordering::Relaxed),
            held: Vec::new(),
            pending: HashMap::new(),
            batch: WriteBatch::default(),
        }))
    }

    fn log_syncs(&self) -> Option<u64> {
        self.ticker("rocksdb.wal.synced")
    }

    fn settings(&self) -> String {
        format!(
            "block cache {} MiB (bloom filters; index and filter blocks cached, level 0's pinned), \
             synced WriteBatch per transaction, pipelined writes, 4 memtables; no WAL recycling \
             (RocksDB disables it under point-in-time recovery)",
            self.cache_bytes >> 20
        )
    }

    fn syncs_note(&self) -> &'static str {
        "RocksDB's statistics: rocksdb.wal.synced (WAL syncs)"
    }

    fn quiesce(&self) -> Result<()> {
        let busy = |name: &str| -> Result<bool> {
            Ok(self.db.property_int_value(name).map_err(err)?.unwrap_or(0) > 0)
        };
        let until = Instant::now() + QUIESCE_LIMIT;
        while busy("rocksdb.num-running-flushes")?
            || busy("rocksdb.num-running-compactions")?
            || busy("rocksdb.compaction-pending")?
            || busy("rocksdb.mem-table-flush-pending")?
        {
            if Instant::now() >= until {
                tracing::warn!(
                    "RocksDB's flushes and compactions went on past {QUIESCE_LIMIT:?}; going on"
                );
                break;
            }
            // As often as Quill's wait looks, so settle times compare.
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    fn fsync_delay(&self) -> std::result::Result<f64, &'static str> {
        Err(
            "not applied to RocksDB: the rocksdb crate does not let a caller supply its own Env or FileSystem",
        )
    }

    fn write_split(&self) -> Option<WriteSplit> {
        let wal = self.ticker("rocksdb.wal.bytes")?;
        Some(WriteSplit {
            log: wal,
            log_payload: wal,
            data: self.ticker("rocksdb.flush.write.bytes")?
                + self.ticker("rocksdb.compact.write.bytes")?,
            doublewrite: 0,
            log_writes: None,
        })
    }
}

struct RocksSession<'e> {
    engine: &'e RocksEngine,
    /// This session's lock owner id (never 0).
    id: u64,
    /// Stripes this session holds.
    held: Vec<usize>,
    /// Row writes of the open transaction: key to new value (None: deleted).
    pending: HashMap<Vec<u8>, Option<Vec<u8>>>,
    batch: WriteBatch,
}

impl RocksSession<'_> {
    fn release(&mut self) {
        for s in self.held.drain(..) {
            if let Some(l) = self.engine.locks.get(s) {
                l.store(0, Ordering::Release);
            }
        }
        self.pending.clear();
        self.batch.clear();
    }
}

impl Session for RocksSession<'_> {
    fn transaction(&mut self, f: &mut dyn FnMut(&mut dyn Ops) -> Result<()>) -> Result<u64> {
        let mut retries = 0;
        loop {
            let r = f(self).and_then(|()| {
                if self.batch.is_empty() {
                    // A read-only transaction writes nothing (and so
                    // syncs nothing), as in the other engines.
                    return Ok(());
                }
                let mut wo = WriteOptions::default();
                wo.set_sync(true);
                let batch = std::mem::take(&mut self.batch);
                self.engine.db.write_opt(batch, &wo).map_err(err)
            });
            self.release();
            match r {
                Ok(()) => return Ok(retries),
                Err(e) if e.is_retryable() => retries += 1,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for RocksSession<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

impl RocksSession<'_> {
    /// Lock the row at `key` until the transaction ends.
    fn lock(&mut self, key: &[u8]) -> Result<()> {
        let s = self.engine.stripe(key);
        let Some(l) = self.engine.locks.get(s) else {
            return Ok(());
        };
        if l.load(Ordering::Relaxed) == self.id {
            return Ok(());
        }
        let deadline = Instant::now() + LOCK_WAIT;
        let mut spins = 0u32;
        loop {
            if l.compare_exchange(0, self.id, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                self.held.push(s);
                return Ok(());
            }
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else if Instant::now() >= deadline {
                return Err(Error::Peer {
                    engine: ENGINE,
                    reason: format!("row lock wait exceeded {LOCK_WAIT:?}"),
                    retryable: true,
                });
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// The row at `key` as this transaction sees it.
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.pending.get(key) {
            return Ok(v.clone());
        }
        self.engine.db.get(key).map_err(err)
    }

    fn put_row(&mut self, info: &TableInfo, key: Vec<u8>, row: &[Value]) -> Result<()> {
        let bytes = encode_row(&info.def.columns, row)?;
        for (ix, &id) in info.def.indexes.iter().zip(&info.index_ids) {
            self.batch.put(index_key(id, &info.def, ix, row), []);
        }
        self.batch.put(&key, &bytes);
        self.pending.insert(key, Some(bytes));
        Ok(())
    }

    fn delete_row(&mut self, info: &TableInfo, key: Vec<u8>, row: &[Value]) {
        for (ix, &id) in info.def.indexes.iter().zip(&info.index_ids) {
            self.batch.delete(index_key(id, &info.def, ix, row));
        }
        self.batch.delete(&key);
        self.pending.insert(key, None);
    }

    /// Read and decode up to `limit` rows in primary key order from
    /// `start` (a full row key or a prefix of one).
    fn scan_rows(&self, info: &TableInfo, start: &[u8], limit: usize) -> Result<usize> {
        let mut it = self.engine.db.raw_iterator_opt(range_opts(info.id));
        it.seek(start);
        let mut n = 0;
        while n < limit && it.valid() {
            let Some(value) = it.value() else { break };
            read_columns(RowRef::new(&info.def.columns, value)?)?;
            n += 1;
            it.next();
        }
        it.status().map_err(err)?;
        Ok(n)
    }

    /// Read up to `limit` rows in the order of index `ix` (object `id`)
    /// from `start`: each entry's primary key, then the row.
    fn scan_index(
        &self,
        info: &TableInfo,
        ix: &IndexDef,
        id: u32,
        start: &[u8],
        limit: usize,
    ) -> Result<usize> {
        let types: Vec<ColumnType> = ix
            .columns
            .iter()
            .chain(info.def.primary_key.iter())
            .filter_map(|&c| info.def.columns.get(c).map(|c| c.ty))
            .collect();
        let mut it = self.engine.db.raw_iterator_opt(range_opts(id));
        it.seek(start);
        let mut n = 0;
        while n < limit && it.valid() {
            let Some(entry) = it.key() else { break };
            let values = decode_key(entry.get(4..).unwrap_or_default(), &types)?;
            let pk = values.get(ix.columns.len()..).unwrap_or_default();
            let row = self
                .engine
                .db
                .get_pinned(row_key(info.id, pk))
                .map_err(err)?;
            if let Some(row) = row {
                read_columns(RowRef::new(&info.def.columns, &row)?)?;
                n += 1;
            }
            it.next();
        }
        it.status().map_err(err)?;
        Ok(n)
    }
}

impl Ops for RocksSession<'_> {
    fn insert(&mut self, table: &str, row: &[Value]) -> Result<Vec<Value>> {
        let info = self.engine.info(table)?;
        let mut row = row.to_vec();
        let pk_col = info.def.primary_key.first().copied().unwrap_or(0);
        let automatic = info.auto && matches!(row.get(pk_col), Some(Value::Null));
        if automatic {
            let id = info.ids.next.fetch_add(1, Ordering::Relaxed);
            if let Some(v) = row.get_mut(pk_col) {
                *v = Value::Int64(id);
            }
        } else if info.auto
            && let Some(Value::Int64(x)) = row.get(pk_col)
        {
            // Keep later automatic ids above explicit ones.
            info.ids.explicit.store(true, Ordering::SeqCst);
            info.ids
                .next
                .fetch_max(x.saturating_add(1), Ordering::Relaxed);
        }
        let pk = pk_values(&info.def, &row);
        let key = row_key(info.id, &pk);
        self.lock(&key)?;
        if (!automatic || info.ids.explicit.load(Ordering::SeqCst)) && self.read(&key)?.is_some() {
            return Err(invalid(format!(
                "duplicate primary key {pk:?} in table {table}"
            )));
        }
        self.put_row(&info, key, &row)?;
        Ok(pk)
    }

    fn get(&mut self, table: &str, pk: &[Value]) -> Result<Option<Vec<Value>>> {
        let info = self.engine.info(table)?;
        match self.read(&row_key(info.id, pk))? {
            None => Ok(None),
            Some(bytes) => Ok(Some(decode_row(&info.def.columns, &bytes)?)),
        }
    }

    fn update(&mut self, table: &str, pk: &[Value], changes: &[(usize, Value)]) -> Result<bool> {
        let info = self.engine.info(table)?;
        let key = row_key(info.id, pk);
        self.lock(&key)?;
        let Some(bytes) = self.read(&key)? else {
            return Ok(false);
        };
        let old = decode_row(&info.def.columns, &bytes)?;
        let mut new = old.clone();
        for (c, v) in changes {
            if info.def.primary_key.contains(c) {
                return Err(invalid(format!(
                    "the RocksDB peer does not update primary key columns (table {table})"
                )));
            }
            match new.get_mut(*c) {
                Some(slot) => *slot = v.clone(),
                None => return Err(invalid(format!("table {table} has no column {c}"))),
            }
        }
        for (ix, &id) in info.def.indexes.iter().zip(&info.index_ids) {
            if ix.columns.iter().any(|c| old.get(*c) != new.get(*c)) {
                self.batch.delete(index_key(id, &info.def, ix, &old));
            }
        }
        let bytes = encode_row(&info.def.columns, &new)?;
        for (ix, &id) in info.def.indexes.iter().zip(&info.index_ids) {
            if ix.columns.iter().any(|c| old.get(*c) != new.get(*c)) {
                self.batch.put(index_key(id, &info.def, ix, &new), []);
            }
        }
        self.batch.put(&key, &bytes);
        self.pending.insert(key, Some(bytes));
        Ok(true)
    }

    fn delete(&mut self, table: &str, pk: &[Value]) -> Result<bool> {
        let info = self.engine.info(table)?;
        let key = row_key(info.id, pk);
        self.lock(&key)?;
        let Some(bytes) = self.read(&key)? else {
            return Ok(false);
        };
        let old = decode_row(&info.def.columns, &bytes)?;
        self.delete_row(&info, key, &old);
        Ok(true)
    }

    fn index_range(
        &mut self,
        table: &str,
        index: &str,
        from: &[Value],
        limit: usize,
    ) -> Result<usize> {
        let info = self.engine.info(table)?;
        let (ix, id) = info
            .def
            .indexes
            .iter()
            .zip(&info.index_ids)
            .find(|(ix, _)| ix.name == index)
            .ok_or_else(|| Error::InvalidArgument {
                what: "index",
                reason: format!("table {table} has no index named {index}"),
            })?;
        let mut start = id.to_be_bytes().to_vec();
        encode_key(from, &mut start);
        self.scan_index(&info, ix, *id, &start, limit)
    }

    fn pk_range(&mut self, table: &str, from: &[Value], limit: usize) -> Result<usize> {
        let info = self.engine.info(table)?;
        self.scan_rows(&info, &row_key(info.id, from), limit)
    }

    fn delete_first(&mut self, table: &str, from: &[Value], n: usize) -> Result<usize> {
        let info = self.engine.info(table)?;
        let start = row_key(info.id, from);
        let mut ro = range_opts(info.id);
        ro.set_iterate_lower_bound(start.clone());
        let mut it = self.engine.db.raw_iterator_opt(ro);
        it.seek(&start);
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut deleted = 0;
        while deleted < n && it.valid() {
            let (Some(key), Some(value)) = (it.key(), it.value()) else {
                break;
            };
            if matches!(self.pending.get(key), Some(None)) {
                // Deleted earlier in this transaction.
                it.next();
                continue;
            }
            let row = decode_row(&info.def.columns, value)?;
            for (ix, &id) in info.def.indexes.iter().zip(&info.index_ids) {
                self.batch.delete(index_key(id, &info.def, ix, &row));
            }
            keys.push(key.to_vec());
            self.pending.insert(key.to_vec(), None);
            deleted += 1;
            it.next();
        }
        it.status().map_err(err)?;
        if keys.len() >= self.engine.range_delete_min_rows.max(1) {
            if let (Some(first), Some(last)) = (keys.first(), keys.last()) {
                // The smallest key after `last`: one range tombstone
                // covers exactly the rows read.
                let mut end = last.clone();
                end.push(0);
                self.batch.delete_range(first, &end);
            }
        } else {
            for k in &keys {
                self.batch.delete(k);
            }
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::conformance;
    use crate::oltp::run_every_shape;

    fn open(dir: &Path) -> RocksEngine {
        RocksEngine::open(
            dir,
            &RocksOptions {
                cache_bytes: 8 << 20,
                // Range tombstones for every queue delete, so the tests
                // cover them.
                range_delete_min_rows: 1,
            },
        )
        .unwrap()
    }

    #[test]
    fn every_operation_the_workloads_use() {
        let tmp = tempfile::tempdir().unwrap();
        let e = open(tmp.path());
        let syncs = e.log_syncs().unwrap();
        conformance::every_operation(&e);
        assert!(
            e.log_syncs().unwrap() > syncs,
            "durable commits sync the WAL"
        );
    }

    #[test]
    fn every_insert_benchmark_step_runs() {
        let tmp = tempfile::tempdir().unwrap();
        crate::insert::run_every_step(&open(tmp.path()));
    }

    #[test]
    fn conflicts_are_retried_and_failures_change_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        conformance::retries_and_failures(&open(tmp.path()));
    }

    #[test]
    fn every_oltp_shape_runs_on_rocksdb() {
        let tmp = tempfile::tempdir().unwrap();
        let e = open(tmp.path());
        for r in &run_every_shape(&e) {
            let f = r.costs.fsyncs_per_commit.expect("RocksDB counts WAL syncs");
            assert_eq!(r.costs.backlog_at_end, None, "RocksDB reports no backlog");
            assert_eq!(r.costs.undo_new_pages_per_commit, None, "nor undo segments");
            if r.shape == "point-select" || r.shape == "read-only" {
                assert_eq!(f, 0.0, "{}: reads do not sync", r.shape);
            } else {
                assert!(f > 0.0 && f <= 1.0, "{}: {f} syncs per commit", r.shape);
            }
        }
        assert!(RocksEngine::open(tmp.path(), &RocksOptions::default()).is_err());
    }
}
