//! The engine interface the workload benchmarks drive (issue 5: the Insert
//! Benchmark and sysbench's OLTP shapes), and Quill's implementation of
//! it. Peer engines (SQLite, RocksDB) implement the same traits behind the
//! `peers` cargo feature.
//!
//! The shape follows what both workloads need and what every engine can
//! do the same way:
//! * tables are described once with Quill's own [`TableDef`] (typed
//!   columns, a primary key, secondary indexes), so every engine stores the
//!   same rows and maintains the same indexes;
//! * each benchmark client opens its own [`Session`] (SQLite: one
//!   connection per client);
//! * a transaction is a closure run by [`Session::transaction`] over
//!   [`Ops`], committed durably when it returns `Ok`, and run again from the
//!   start when the engine reports a retryable conflict (deadlock,
//!   serialization failure), so workloads never handle engine-specific
//!   retry rules.
//!
//! Invariants:
//! * E1. `Session::transaction` commits all of the closure's changes or
//!   none; after `Ok` they are durable (each engine's own notion of a
//!   durable commit: a synced log write).
//! * E2. [`Engine::log_syncs`] counts the syncs the engine's commit path
//!   made since it was opened, or is `None` when the engine cannot count
//!   them honestly (then reports say "n/a" with [`Engine::syncs_note`]).

use std::collections::HashMap;
use std::ops::Bound;
use std::path::Path;

use parking_lot::RwLock;

use quill::btree::Direction;
use quill::catalog::Value;
use quill::catalog::schema::{IndexDef, TableDef};
use quill::db::{Db, Options, Table};
use quill::{Error, Result};

/// One engine under test, shared by all clients.
pub trait Engine: Send + Sync {
    /// Short name for reports (`quill`, `sqlite`, `rocksdb`).
    fn name(&self) -> &'static str;
    /// Create a table (with its secondary indexes).
    fn create_table(&self, def: &TableDef) -> Result<()>;
    /// Add a secondary index to a populated table (the Insert Benchmark's
    /// `l.x` step).
    fn create_index(&self, table: &str, index: &IndexDef) -> Result<()>;
    /// A new session for one client.
    fn session(&self) -> Result<Box<dyn Session + '_>>;
    /// Log syncs made since open (E2), if the engine can count them.
    fn log_syncs(&self) -> Option<u64>;
    /// Why [`Engine::log_syncs`] is `None`, or how it is counted.
    fn syncs_note(&self) -> &'static str;
    /// Bytes written since open, by kind, if the engine counts them.
    fn write_split(&self) -> Option<WriteSplit> {
        None
    }
    /// Work the engine has deferred and not yet done, if it keeps such a
    /// backlog: Quill's history length (`DbStats::history_length`: the
    /// committed transactions' undo that purge has not yet removed). A
    /// report shows it after each measured window, read once its clients
    /// have stopped (so it can understate the backlog while they ran), so
    /// that a throughput bought by letting the backlog grow is seen.
    fn backlog(&self) -> Option<i64> {
        None
    }
    /// Undo segments started since open, if the engine keeps undo that
    /// way: `(on cached pages, on newly allocated pages)` (Quill's
    /// `DbStats::undo_segments_on_cached_pages` and `_on_new_pages`). A
    /// segment on a new page costs a page allocation and a directory
    /// write that a cached one does not (`txn::undo_seg` US6).
    fn undo_segments(&self) -> Option<(u64, u64)> {
        None
    }
    /// How the engine's commits waited since open, if it counts it
    /// (Quill's `LogStats`); `None` for peers, whose statistics do not
    /// say.
    fn group_commit(&self) -> Option<GroupCommit> {
        None
    }
    /// What a peer was given that a report should say (cache, the
    /// settings its documentation recommends for this workload); empty
    /// for Quill, whose setup the reports state.
    fn settings(&self) -> String {
        String::new()
    }
    /// The injected sync delay this engine runs with (ms), or why it
    /// cannot have one.
    fn fsync_delay(&self) -> std::result::Result<f64, &'static str>;
    /// Finish the work a load or a measured window deferred (RocksDB's
    /// flushes and compactions, Quill's purge and dirty pages), so it does
    /// not run inside the next measurement, which may be another engine's.
    /// Engines without such work (SQLite checkpoints in the committing
    /// thread) return at once.
    fn quiesce(&self) -> Result<()> {
        Ok(())
    }
    /// Shut the engine down cleanly (Quill: a final checkpoint).
    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// How the workload benchmarks open an engine.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Cache bytes: Quill's buffer pool, RocksDB's block cache; SQLite's
    /// memory map, with this split evenly over `max_clients` connections'
    /// page caches (SQLite's page cache is per connection).
    pub cache_bytes: u64,
    /// Most clients that will run at once.
    pub max_clients: usize,
    /// Delay added to every sync, where the engine allows one (Quill).
    pub fsync_delay_ms: f64,
    /// RocksDB: queue deletes of at least this many rows use a range
    /// tombstone (`RocksOptions::range_delete_min_rows`).
    pub rocksdb_range_delete_min_rows: usize,
}

/// Default of [`Setup::rocksdb_range_delete_min_rows`]: RocksDB 7.8
/// re-fragments memtable range tombstones on every read after a new one,
/// so small queue deletes go row by row (`bench/results/insert.md`).
pub const ROCKSDB_RANGE_DELETE_MIN_ROWS: usize = 100;

/// Longest Quill's [`Engine::quiesce`] waits for purge: a history that
/// outlasts it is left to run on (and shows as the next window's backlog).
const QUIESCE_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Engine names [`open`] knows (peers only with the `peers` feature).
pub const ENGINES: &[&str] = &["quill", "sqlite", "rocksdb"];

/// Open engine `name` on a new, empty directory `dir`.
pub fn open(name: &str, dir: &Path, setup: &Setup) -> Result<Box<dyn Engine>> {
    match name {
        "quill" => {
            let opts = Options {
                store: quill::store::StoreOptions {
                    pool_bytes: setup.cache_bytes,
                    log: quill::log::LogOptions {
                        file_size: 1 << 30,
                        ..quill::log::LogOptions::default()
                    },
                    ..quill::store::StoreOptions::default()
                },
                max_transactions: setup.max_clients.saturating_mul(2).saturating_add(64),
                ..Options::default()
            };
            let delay = std::time::Duration::from_secs_f64(setup.fsync_delay_ms.max(0.0) / 1000.0);
            let vfs = std::sync::Arc::new(quill::io::RealFs::with_sync_delay(delay));
            let db = Db::open_with(vfs, dir, opts)?;
            Ok(Box::new(QuillEngine::new(db, setup.fsync_delay_ms)?))
        }
        #[cfg(feature = "peers")]
        "sqlite" => Ok(Box::new(super::sqlite::SqliteEngine::open(
            dir,
            &super::sqlite::SqliteOptions {
                cache_bytes: setup.cache_bytes,
                max_clients: setup.max_clients,
            },
        )?)),
        #[cfg(feature = "peers")]
        "rocksdb" => Ok(Box::new(super::rocks::RocksEngine::open(
            dir,
            &super::rocks::RocksOptions {
                cache_bytes: usize::try_from(setup.cache_bytes).unwrap_or(usize::MAX),
                range_delete_min_rows: setup.rocksdb_range_delete_min_rows,
            },
        )?)),
        #[cfg(not(feature = "peers"))]
        "sqlite" | "rocksdb" => Err(Error::InvalidArgument {
            what: "engine",
            reason: format!(
                "{name} is a peer engine: build quill with `--features peers` (see the README)"
            ),
        }),
        other => Err(Error::InvalidArgument {
            what: "engine",
            reason: format!(
                "unknown engine {other:?}; expected one of {}",
                ENGINES.join(", ")
            ),
        }),
    }
}

/// Bytes an engine wrote since open, by what they were for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteSplit {
    /// Log (Quill's redo log, RocksDB's WAL): bytes written to its files.
    pub log: u64,
    /// Of what the log holds, the records' payload: Quill's redo records
    /// before framing and before the padding of whole 4 KiB blocks that
    /// its writes carry; RocksDB's write batches as its WAL counts them
    /// (`rocksdb.wal.bytes`, the same figure as `log`: its WAL appends
    /// records unpadded).
    pub log_payload: u64,
    /// Data: Quill's data pages; RocksDB's flushed and compacted tables.
    pub data: u64,
    /// Quill's doublewrite buffer (0 for engines without one).
    pub doublewrite: u64,
    /// Write calls to the log's files (`None` when the engine does not
    /// count them: RocksDB's statistics count WAL bytes and syncs only).
    pub log_writes: Option<u64>,
}

/// How commits waited for their syncs since open (Quill's group commit,
/// `quill::log::LogStats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupCommit {
    /// Times a sync's leader yielded its core before writing so that
    /// runnable committers could join it (`LogStats::leader_yields`).
    pub leader_yields: u64,
    /// Times a completing leader handed the next sync to a waiting
    /// thread, parked or spinning, and woke it (`LogStats::leader_handoffs`).
    pub leader_handoffs: u64,
    /// Waits for the log that parked their thread: commits' waits and the
    /// log's own (`make_durable`, the write group; `LogStats::parks`).
    pub parks: u64,
}

/// One client's connection to an engine.
pub trait Session {
    /// Run `f` as one durable transaction (E1), again from the start after
    /// a retryable conflict. Returns how many attempts were rolled back.
    fn transaction(&mut self, f: &mut dyn FnMut(&mut dyn Ops) -> Result<()>) -> Result<u64>;

    /// Run `f`, which only reads, as one transaction, as [`Session::transaction`]
    /// does. An engine whose readers can start without taking its write
    /// lock starts them so (SQLite: a deferred `BEGIN` instead of
    /// `BEGIN IMMEDIATE`); the others run it as any transaction.
    fn read_transaction(&mut self, f: &mut dyn FnMut(&mut dyn Ops) -> Result<()>) -> Result<u64> {
        self.transaction(f)
    }
}

/// The operations a workload transaction performs, by table name and
/// column position (as in the table's [`TableDef`]).
pub trait Ops {
    /// Insert a row (values in column order; a NULL single int64 primary
    /// key gets the next automatic value). Returns the primary key.
    fn insert(&mut self, table: &str, row: &[Value]) -> Result<Vec<Value>>;
    /// The row with primary key `pk`.
    fn get(&mut self, table: &str, pk: &[Value]) -> Result<Option<Vec<Value>>>;
    /// Set columns of the row with primary key `pk`; whether it existed.
    fn update(&mut self, table: &str, pk: &[Value], changes: &[(usize, Value)]) -> Result<bool>;
    /// Delete the row with primary key `pk`; whether it existed.
    fn delete(&mut self, table: &str, pk: &[Value]) -> Result<bool>;
    /// Read up to `limit` rows in the order of secondary index `index`
    /// (by name), starting at index key prefix `from`, and every column
    /// of each, in place where the engine allows (Quill `Rows::next_ref`,
    /// SQLite `get_ref`, RocksDB value slices through `RowRef`). Returns
    /// rows read.
    fn index_range(
        &mut self,
        table: &str,
        index: &str,
        from: &[Value],
        limit: usize,
    ) -> Result<usize>;
    /// Read up to `limit` rows in primary key order from `from` (a key
    /// prefix), every column of each, as `index_range` does. Returns rows
    /// read.
    fn pk_range(&mut self, table: &str, from: &[Value], limit: usize) -> Result<usize>;
    /// Delete the `n` rows with the smallest primary keys at or after
    /// `from` (a key prefix; the Insert Benchmark's queue deletes, which
    /// start from the oldest id they know is left, as its `transactionid
    /// >= ?` predicate does). Returns rows deleted.
    fn delete_first(&mut self, table: &str, from: &[Value], n: usize) -> Result<usize>;
}

/// The entry for table `name` in an engine's own table map.
pub(crate) fn lookup<T: Clone>(tables: &RwLock<HashMap<String, T>>, name: &str) -> Result<T> {
    tables
        .read()
        .get(name)
        .cloned()
        .ok_or_else(|| Error::InvalidArgument {
            what: "table",
            reason: format!("no table named {name}"),
        })
}

/// Quill through its embedded API.
pub struct QuillEngine {
    db: Db,
    tables: RwLock<HashMap<String, Table>>,
    fsync_delay_ms: f64,
}

impl QuillEngine {
    /// Open (or create) a Quill database in `dir`.
    pub fn open(dir: &Path, opts: Options) -> Result<QuillEngine> {
        QuillEngine::new(Db::open(dir, opts)?, 0.0)
    }

    /// Wrap an open database whose files sync with `fsync_delay_ms` added.
    pub fn new(db: Db, fsync_delay_ms: f64) -> Result<QuillEngine> {
        let tables = db
            .tables()
            .iter()
            .map(|s| db.table(&s.def.name).map(|t| (s.def.name.clone(), t)))
            .collect::<Result<HashMap<_, _>>>()?;
        Ok(QuillEngine {
            db,
            tables: RwLock::new(tables),
            fsync_delay_ms,
        })
    }

    /// The database underneath (statistics, close).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Close the database cleanly.
    pub fn close(self) -> Result<()> {
        self.db.close()
    }

    fn table(&self, name: &str) -> Result<Table> {
        lookup(&self.tables, name)
    }
}

impl Engine for QuillEngine {
    fn name(&self) -> &'static str {
        "quill"
    }

    fn create_table(&self, def: &TableDef) -> Result<()> {
        let t = self.db.create_table(def.clone())?;
        self.tables.write().insert(def.name.clone(), t);
        Ok(())
    }

    fn create_index(&self, table: &str, index: &IndexDef) -> Result<()> {
        self.db.create_index(table, index.clone())?;
        // The handle sees the new index; refresh it anyway in case the
        // catalog handed out a new one.
        let t = self.db.table(table)?;
        self.tables.write().insert(table.to_string(), t);
        Ok(())
    }

    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(QuillSession { engine: self }))
    }

    fn log_syncs(&self) -> Option<u64> {
        let s = self.db.store().log().stats();
        Some(s.syncs + s.checkpoint_syncs)
    }

    fn syncs_note(&self) -> &'static str {
        "the redo log's own counters: commit syncs, write-ahead syncs and checkpoint-slot syncs"
    }

    fn write_split(&self) -> Option<WriteSplit> {
        let s = self.db.store().stats();
        Some(WriteSplit {
            log: s.log.write_bytes,
            log_payload: s.log.append_payload_bytes,
            data: s.pool.data_io.write_bytes,
            doublewrite: s.pool.doublewrite_io.map_or(0, |d| d.write_bytes),
            log_writes: Some(s.log.writes),
        })
    }

    fn backlog(&self) -> Option<i64> {
        Some(self.db.stats().history_length)
    }

    /// Wait for purge to empty the history (the purge thread runs at the
    /// lowest priority, so it catches up once the clients stop; at most
    /// 30 s, `QUIESCE_LIMIT`), then write every dirty page: the page
    /// cleaner would otherwise trickle them out while the log is idle,
    /// which is during the other engines' windows.
    fn quiesce(&self) -> Result<()> {
        let until = std::time::Instant::now() + QUIESCE_LIMIT;
        loop {
            let stats = self.db.stats();
            if let Some(e) = stats.purge_error {
                return Err(Error::InvalidArgument {
                    what: "purge",
                    reason: format!("the purge thread failed: {e}"),
                });
            }
            if stats.history_length == 0 {
                break;
            }
            if std::time::Instant::now() >= until {
                tracing::warn!(
                    history = stats.history_length,
                    "purge did not empty the history within {QUIESCE_LIMIT:?}; going on"
                );
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        self.db.store().flush_all()?;
        Ok(())
    }

    fn undo_segments(&self) -> Option<(u64, u64)> {
        let s = self.db.stats();
        Some((
            s.undo_segments_on_cached_pages,
            s.undo_segments_on_new_pages,
        ))
    }

    fn group_commit(&self) -> Option<GroupCommit> {
        let s = self.db.store().log().stats();
        Some(GroupCommit {
            leader_yields: s.leader_yields,
            leader_handoffs: s.leader_handoffs,
            parks: s.parks,
        })
    }

    fn fsync_delay(&self) -> std::result::Result<f64, &'static str> {
        Ok(self.fsync_delay_ms)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.close()
    }
}

struct QuillSession<'e> {
    engine: &'e QuillEngine,
}

impl Session for QuillSession<'_> {
    fn transaction(&mut self, f: &mut dyn FnMut(&mut dyn Ops) -> Result<()>) -> Result<u64> {
        let mut retries = 0;
        loop {
            let mut ops = QuillOps {
                engine: self.engine,
                tx: self.engine.db.begin()?,
            };
            let r = f(&mut ops);
            let r = r.and_then(|()| ops.tx.commit());
            match r {
                Ok(()) => return Ok(retries),
                Err(e) if e.is_retryable() => retries += 1,
                Err(e) => return Err(e),
            }
        }
    }
}

/// What every engine's range reads do with each value of a row they
/// return, the same for all: fold it into a running sum the compiler
/// cannot drop (a number as its bits, text or bytes as their length and
/// first byte, NULL as nothing), then hand the row's sum to
/// [`std::hint::black_box`]. A client uses each value; forcing every
/// value through memory on its own (`black_box` per value, as the
/// harness once did) costs a store-forwarding stall per value that
/// depends on how the value type is laid out, not on the engine
/// (`bench/results/oltp.md`, "Range reads' consumer"). The sysbench
/// shapes' ranges and the Insert Benchmark's query steps both read
/// through it, so their rates before and after the change do not
/// compare.
#[derive(Default)]
pub(crate) struct RowSum(pub(crate) u64);

impl RowSum {
    /// A number's bits.
    #[inline(always)]
    pub(crate) fn number(&mut self, bits: u64) {
        self.0 = self.0.rotate_left(7) ^ bits;
    }

    /// Text or bytes: the length and the first byte.
    #[inline(always)]
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.number(b.len() as u64 ^ (u64::from(b.first().copied().unwrap_or(0)) << 32));
    }

    /// The row's sum, past the optimizer.
    #[inline(always)]
    pub(crate) fn finish(self) {
        std::hint::black_box(self.0);
    }
}

/// A row's [`RowSum`]: every column read in place.
pub(crate) fn row_sum(row: quill::catalog::RowRef<'_>) -> Result<u64> {
    use quill::catalog::ValueRef;
    let mut sum = RowSum::default();
    for v in row.iter() {
        match v? {
            ValueRef::Null => {}
            ValueRef::Bool(b) => sum.number(u64::from(b)),
            ValueRef::Int32(x) => sum.number(i64::from(x) as u64),
            ValueRef::Int64(x) | ValueRef::Timestamp(x) => sum.number(x as u64),
            ValueRef::Float64(x) => sum.number(x.to_bits()),
            ValueRef::Text(t) => sum.bytes(t.as_bytes()),
            ValueRef::Bytes(b) => sum.bytes(b),
        }
    }
    Ok(sum.0)
}

/// Read every column of a row in place (what each engine's range reads
/// do with a row they return; [`RowSum`]).
pub(crate) fn read_columns(row: quill::catalog::RowRef<'_>) -> Result<()> {
    RowSum(row_sum(row)?).finish();
    Ok(())
}

/// Read up to `limit` rows, every column of each, in place (as the SQLite
/// engine reads its rows with `get_ref`, and RocksDB its values as
/// slices).
fn read_rows(mut rows: quill::db::Rows<'_>, limit: usize) -> Result<usize> {
    let mut n = 0;
    while n < limit {
        let Some(row) = rows.next_ref() else {
            break;
        };
        read_columns(row?)?;
        n += 1;
    }
    Ok(n)
}

struct QuillOps<'e> {
    engine: &'e QuillEngine,
    tx: quill::Txn<'e>,
}

impl Ops for QuillOps<'_> {
    fn insert(&mut self, table: &str, row: &[Value]) -> Result<Vec<Value>> {
        let t = self.engine.table(table)?;
        self.tx.insert(&t, row)
    }

    fn get(&mut self, table: &str, pk: &[Value]) -> Result<Option<Vec<Value>>> {
        let t = self.engine.table(table)?;
        self.tx.get(&t, pk)
    }

    fn update(&mut self, table: &str, pk: &[Value], changes: &[(usize, Value)]) -> Result<bool> {
        let t = self.engine.table(table)?;
        self.tx.update(&t, pk, changes)
    }

    fn delete(&mut self, table: &str, pk: &[Value]) -> Result<bool> {
        let t = self.engine.table(table)?;
        self.tx.delete(&t, pk)
    }

    fn index_range(
        &mut self,
        table: &str,
        index: &str,
        from: &[Value],
        limit: usize,
    ) -> Result<usize> {
        let t = self.engine.table(table)?;
        let rows = self
            .tx
            .index_scan(
                &t,
                index,
                Bound::Included(from),
                Bound::Unbounded,
                Direction::Forward,
            )?
            .expect_rows(limit);
        read_rows(rows, limit)
    }

    fn pk_range(&mut self, table: &str, from: &[Value], limit: usize) -> Result<usize> {
        let t = self.engine.table(table)?;
        let rows = self
            .tx
            .scan(
                &t,
                Bound::Included(from),
                Bound::Unbounded,
                Direction::Forward,
            )?
            .expect_rows(limit);
        read_rows(rows, limit)
    }

    fn delete_first(&mut self, table: &str, from: &[Value], n: usize) -> Result<usize> {
        let t = self.engine.table(table)?;
        let pk_cols = t.schema().def.primary_key.clone();
        if pk_cols.is_empty() {
            return Err(Error::InvalidArgument {
                what: "delete_first",
                reason: format!("table {table} has no primary key columns"),
            });
        }
        let rows = self.tx.scan(
            &t,
            Bound::Included(from),
            Bound::Unbounded,
            Direction::Forward,
        )?;
        let mut keys = Vec::with_capacity(n);
        for row in rows.take(n) {
            let row = row?;
            let key: Vec<Value> = pk_cols
                .iter()
                .filter_map(|&c| row.get(c).cloned())
                .collect();
            keys.push(key);
        }
        let mut deleted = 0;
        for k in keys {
            if self.tx.delete(&t, &k)? {
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}

/// Checks every engine must pass, shared by the engines' unit tests.
#[cfg(test)]
pub(crate) mod conformance {
    use super::*;
    use quill::catalog::{Column, ColumnType};

    /// A small table `t(id int64 pk, k int32, c text)` with index `by_k`.
    pub(crate) fn def() -> TableDef {
        TableDef {
            name: "t".into(),
            columns: vec![
                Column::new("id", ColumnType::Int64, false),
                Column::new("k", ColumnType::Int32, false),
                Column::new("c", ColumnType::Text { max_len: 32 }, false),
            ],
            primary_key: vec![0],
            indexes: vec![IndexDef {
                name: "by_k".into(),
                columns: vec![1],
                unique: false,
            }],
        }
    }

    /// Every [`Ops`] method against known answers, and an index added to a
    /// populated table.
    pub(crate) fn every_operation(e: &dyn Engine) {
        e.create_table(&def()).unwrap();
        let mut s = e.session().unwrap();
        s.transaction(&mut |ops| {
            for i in 0..100 {
                let pk = ops.insert(
                    "t",
                    &[
                        Value::Null,
                        Value::Int32(i % 10),
                        Value::Text(format!("r{i}")),
                    ],
                )?;
                assert_eq!(pk, vec![Value::Int64(i64::from(i) + 1)], "automatic ids");
            }
            Ok(())
        })
        .unwrap();
        s.transaction(&mut |ops| {
            assert_eq!(
                ops.get("t", &[Value::Int64(5)])?.map(|r| r[2].clone()),
                Some(Value::Text("r4".into()))
            );
            assert!(ops.update("t", &[Value::Int64(5)], &[(2, Value::Text("x".into()))])?);
            assert_eq!(
                ops.get("t", &[Value::Int64(5)])?.map(|r| r[2].clone()),
                Some(Value::Text("x".into())),
                "a transaction reads its own update"
            );
            assert!(!ops.update("t", &[Value::Int64(500)], &[(2, Value::Text("x".into()))])?);
            assert_eq!(ops.index_range("t", "by_k", &[Value::Int32(3)], 15)?, 15);
            assert_eq!(ops.index_range("t", "by_k", &[Value::Int32(9)], 15)?, 10);
            assert_eq!(ops.pk_range("t", &[Value::Int64(95)], 10)?, 6);
            assert_eq!(ops.delete_first("t", &[Value::Int64(3)], 2)?, 2);
            assert_eq!(ops.get("t", &[Value::Int64(3)])?, None);
            assert_eq!(ops.delete_first("t", &[], 8)?, 8);
            assert!(ops.get("t", &[Value::Int64(12)])?.is_some());
            assert!(ops.delete("t", &[Value::Int64(50)])?);
            assert_eq!(
                ops.get("t", &[Value::Int64(50)])?,
                None,
                "reads its own delete"
            );
            assert!(!ops.delete("t", &[Value::Int64(50)])?);
            Ok(())
        })
        .unwrap();
        s.transaction(&mut |ops| {
            assert_eq!(ops.get("t", &[Value::Int64(10)])?, None);
            assert_eq!(ops.pk_range("t", &[], 1000)?, 89);
            assert_eq!(ops.index_range("t", "by_k", &[], 1000)?, 89);
            // An index update moves the entry: k of row 20 from 9 to 100.
            assert!(ops.update("t", &[Value::Int64(20)], &[(1, Value::Int32(100))])?);
            Ok(())
        })
        .unwrap();
        s.transaction(&mut |ops| {
            assert_eq!(ops.index_range("t", "by_k", &[Value::Int32(100)], 10)?, 1);
            assert_eq!(
                ops.index_range("t", "by_k", &[], 1000)?,
                89,
                "no stale entry"
            );
            // The next automatic id follows the largest explicit one.
            ops.insert(
                "t",
                &[Value::Int64(1000), Value::Int32(1), Value::Text("e".into())],
            )?;
            let pk = ops.insert(
                "t",
                &[Value::Null, Value::Int32(1), Value::Text("a".into())],
            )?;
            assert!(
                matches!(pk.first(), Some(Value::Int64(x)) if *x > 1000),
                "{pk:?}"
            );
            Ok(())
        })
        .unwrap();
        // A populated table gets a new index.
        e.create_index(
            "t",
            &IndexDef {
                name: "by_c".into(),
                columns: vec![2],
                unique: false,
            },
        )
        .unwrap();
        s.transaction(&mut |ops| {
            assert_eq!(ops.index_range("t", "by_c", &[], 1000)?, 91);
            assert_eq!(
                ops.index_range("t", "by_c", &[Value::Text("r99".into())], 1000)?,
                1
            );
            assert!(ops.index_range("t", "nope", &[], 1).is_err());
            assert!(ops.delete_first("nope", &[], 1).is_err());
            Ok(())
        })
        .unwrap();
    }

    /// A retryable error runs the closure again; any other error rolls the
    /// transaction back.
    pub(crate) fn retries_and_failures(e: &dyn Engine) {
        e.create_table(&def()).unwrap();
        let mut s = e.session().unwrap();
        let mut attempts = 0;
        let retries = s
            .transaction(&mut |ops| {
                attempts += 1;
                ops.insert(
                    "t",
                    &[Value::Null, Value::Int32(1), Value::Text("a".into())],
                )?;
                if attempts == 1 {
                    return Err(Error::Deadlock { trx: 0 });
                }
                Ok(())
            })
            .unwrap();
        assert_eq!((retries, attempts), (1, 2));
        let r = s.transaction(&mut |ops| {
            ops.insert(
                "t",
                &[Value::Null, Value::Int32(2), Value::Text("b".into())],
            )?;
            Err(Error::InvalidArgument {
                what: "test",
                reason: "fails".into(),
            })
        });
        assert!(r.is_err());
        s.transaction(&mut |ops| {
            assert_eq!(ops.pk_range("t", &[], 10)?, 1, "only the committed row");
            assert_eq!(ops.index_range("t", "by_k", &[], 10)?, 1);
            Ok(())
        })
        .unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(dir: &Path) -> QuillEngine {
        let opts = Options {
            store: crate::test_store_options(),
            ..Options::default()
        };
        QuillEngine::open(dir, opts).unwrap()
    }

    #[test]
    fn every_operation_the_workloads_use() {
        let tmp = tempfile::tempdir().unwrap();
        let e = engine(tmp.path());
        let syncs = e.log_syncs().unwrap();
        conformance::every_operation(&e);
        assert!(e.log_syncs().unwrap() > syncs, "durable commits sync");
        e.close().unwrap();
    }

    #[test]
    fn conflicts_are_retried_and_failures_change_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        conformance::retries_and_failures(&engine(tmp.path()));
    }
}
