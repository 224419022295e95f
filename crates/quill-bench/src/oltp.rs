//! `quill bench oltp`: sysbench's OLTP shapes over the [`Engine`]
//! interface, so every engine runs the same transactions.
//!
//! Tables [`sbtest`]`N(id int64 primary key, k int32, c text(120), pad
//! text(60))` with a secondary index `k_N` on `k`, `table_size` rows each,
//! ids 1..=table_size chosen uniformly. One transaction per event:
//!
//! | shape | transaction |
//! | --- | --- |
//! | `point-select` | 1 `SELECT c WHERE id = ?` |
//! | `read-only` | 10 point selects, then 4 range reads of 100 rows by id (sysbench's simple, sum, order and distinct ranges: the sorting and aggregation are SQL work, so each is a read of the 100 rows) |
//! | `read-write` | `read-only`, then the 4 writes of `write-only` |
//! | `write-only` | `UPDATE SET k = k + 1`, `UPDATE SET c = ?`, `DELETE` and `INSERT` of the same id |
//! | `update-index` | 1 `UPDATE SET k = k + 1 WHERE id = ?` (reads the row, then writes it and its index entry) |
//! | `update-non-index` | 1 `UPDATE SET c = ? WHERE id = ?` |
//! | `insert` | 1 `INSERT` with the next automatic id |
//! | `delete` | 1 `DELETE WHERE id = ?` and the `INSERT` of the same row, so the table keeps its size (sysbench's `oltp_delete` deletes only; without the insert, later events would find nothing) |
//!
//! Every transaction commits durably. The window starts and ends with no
//! transaction in flight ([`super::window`]), so the counters read at its
//! edges cover whole transactions. Reported per shape and thread
//! count: transactions and queries per second; latency percentiles of the
//! whole transaction; log syncs per commit (the engine's own count, or
//! "n/a"); CPU microseconds and context switches per transaction
//! (`getrusage`); bytes the process wrote to storage per transaction
//! (`/proc/self/io` `write_bytes`, the same measure for every engine).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::costs::{Costs, Snapshot, or_na};
use super::engine::{Engine, Ops};
use super::window::{self, Plan, Rng, sbtest};
use quill::catalog::Value;
use quill::{Error, Result};

/// One of sysbench's OLTP shapes (see the module table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// One point select.
    PointSelect,
    /// Ten point selects and four range reads.
    ReadOnly,
    /// `ReadOnly` plus `WriteOnly`.
    ReadWrite,
    /// Two updates, a delete and an insert.
    WriteOnly,
    /// One update of the indexed column.
    UpdateIndex,
    /// One update of a column without an index.
    UpdateNonIndex,
    /// One insert.
    Insert,
    /// One delete (and the insert that puts the row back).
    Delete,
}

impl Shape {
    /// Whether its transactions only read.
    pub fn read_only(self) -> bool {
        matches!(self, Shape::PointSelect | Shape::ReadOnly)
    }

    /// Every shape, in sysbench's order.
    pub const ALL: &'static [Shape] = &[
        Shape::PointSelect,
        Shape::ReadOnly,
        Shape::ReadWrite,
        Shape::WriteOnly,
        Shape::UpdateIndex,
        Shape::UpdateNonIndex,
        Shape::Insert,
        Shape::Delete,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Shape::PointSelect => "point-select",
            Shape::ReadOnly => "read-only",
            Shape::ReadWrite => "read-write",
            Shape::WriteOnly => "write-only",
            Shape::UpdateIndex => "update-index",
            Shape::UpdateNonIndex => "update-non-index",
            Shape::Insert => "insert",
            Shape::Delete => "delete",
        }
    }

    /// Statements per transaction (for queries per second).
    pub fn queries(self) -> u64 {
        match self {
            Shape::ReadOnly => 14,
            Shape::ReadWrite => 18,
            Shape::WriteOnly => 4,
            Shape::Delete => 2,
            _ => 1,
        }
    }
}

impl std::str::FromStr for Shape {
    type Err = Error;
    fn from_str(s: &str) -> Result<Shape> {
        Shape::ALL
            .iter()
            .copied()
            .find(|w| w.name() == s)
            .ok_or_else(|| Error::InvalidArgument {
                what: "oltp shape",
                reason: format!(
                    "unknown shape {s:?}; expected one of: {}",
                    Shape::ALL
                        .iter()
                        .map(|w| w.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }
}

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct OltpConfig {
    /// Tables `sbtest1..=tables`.
    pub tables: usize,
    /// Rows per table.
    pub table_size: u64,
    /// Client thread counts.
    pub threads: Vec<usize>,
    /// Shapes, each at every thread count.
    pub shapes: Vec<Shape>,
    /// Measured seconds per run.
    pub seconds: f64,
    /// Warm-up seconds per run.
    pub warmup: f64,
}

/// One measured run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OltpRow {
    /// Engine name.
    pub engine: String,
    /// Shape name.
    pub shape: String,
    /// Client threads.
    pub threads: usize,
    /// Measured seconds.
    pub seconds: f64,
    /// Transactions committed.
    pub transactions: u64,
    /// Transactions per second.
    pub tps: f64,
    /// Statements per second.
    pub qps: f64,
    /// Latency of a whole transaction, microseconds: median.
    pub p50_us: f64,
    /// 95th percentile.
    pub p95_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Maximum.
    pub max_us: f64,
    /// Costs per transaction (an operation here is one transaction).
    #[serde(flatten)]
    pub costs: Costs,
    /// Transactions run again after a retryable conflict.
    pub retries: u64,
    /// Milliseconds the engine's deferred work (RocksDB's flushes and
    /// compactions, Quill's purge and dirty pages) took after the window
    /// before the next run began ([`Engine::quiesce`]): debt the window
    /// left, paid outside every window so that it does not run inside the
    /// next engine's (`None` in results recorded before it was measured).
    #[serde(default)]
    pub settle_ms: Option<f64>,
    /// The process's CPU microseconds while settling, per transaction of
    /// the window: the deferred work's CPU, charged to the engine that
    /// deferred it.
    #[serde(default)]
    pub settle_cpu_us_per_op: Option<f64>,
    /// Bytes the process wrote to storage while settling
    /// (`/proc/self/io`), per transaction of the window.
    #[serde(default)]
    pub settle_write_bytes_per_op: Option<f64>,
}

fn row(rng: &mut Rng, id: Value, size: u64) -> Vec<Value> {
    vec![
        id,
        Value::Int32(rng.below(size) as i32),
        Value::Text(rng.text(119)),
        Value::Text(rng.text(59)),
    ]
}

/// Create and fill the tables (1,000 rows per transaction).
pub fn prepare(engine: &dyn Engine, cfg: &OltpConfig, tick: &dyn Fn(&str, f64)) -> Result<()> {
    let mut s = engine.session()?;
    let mut rng = Rng(0x5EED_0001);
    let total = (cfg.tables as u64 * cfg.table_size).max(1);
    let mut done = 0u64;
    for n in 1..=cfg.tables {
        let def = sbtest(n);
        engine.create_table(&def)?;
        let mut id = 1u64;
        while id <= cfg.table_size {
            let end = (id + 1000).min(cfg.table_size + 1);
            s.transaction(&mut |ops| {
                for i in id..end {
                    ops.insert(
                        &def.name,
                        &row(&mut rng, Value::Int64(i as i64), cfg.table_size),
                    )?;
                }
                Ok(())
            })?;
            done += end - id;
            id = end;
            tick("prepare", done as f64 / total as f64);
        }
    }
    Ok(())
}

fn int(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Int32(x)) => i64::from(*x),
        Some(Value::Int64(x)) => *x,
        _ => 0,
    }
}

/// One transaction's statements (the closure body for `shape`).
fn event(
    ops: &mut dyn Ops,
    shape: Shape,
    table: &str,
    id: i64,
    rng: &mut Rng,
    size: u64,
) -> Result<()> {
    let key = [Value::Int64(id)];
    let reads = |ops: &mut dyn Ops, rng: &mut Rng| -> Result<()> {
        for _ in 0..10 {
            let id = rng.below(size) as i64 + 1;
            std::hint::black_box(ops.get(table, &[Value::Int64(id)])?);
        }
        for _ in 0..4 {
            let from = rng.below(size.saturating_sub(99).max(1)) as i64 + 1;
            std::hint::black_box(ops.pk_range(table, &[Value::Int64(from)], 100)?);
        }
        Ok(())
    };
    let writes = |ops: &mut dyn Ops, rng: &mut Rng| -> Result<()> {
        let w = [Value::Int64(rng.below(size) as i64 + 1)];
        if let Some(r) = ops.get(table, &w)? {
            ops.update(table, &w, &[(1, Value::Int32((int(r.get(1)) + 1) as i32))])?;
        }
        let w = [Value::Int64(rng.below(size) as i64 + 1)];
        ops.update(table, &w, &[(2, Value::Text(rng.text(119)))])?;
        let w = Value::Int64(rng.below(size) as i64 + 1);
        ops.delete(table, std::slice::from_ref(&w))?;
        ops.insert(table, &row(rng, w, size))?;
        Ok(())
    };
    match shape {
        Shape::PointSelect => {
            std::hint::black_box(ops.get(table, &key)?);
        }
        Shape::ReadOnly => reads(ops, rng)?,
        Shape::ReadWrite => {
            reads(ops, rng)?;
            writes(ops, rng)?;
        }
        Shape::WriteOnly => writes(ops, rng)?,
        Shape::UpdateIndex => {
            if let Some(r) = ops.get(table, &key)? {
                ops.update(
                    table,
                    &key,
                    &[(1, Value::Int32((int(r.get(1)) + 1) as i32))],
                )?;
            }
        }
        Shape::UpdateNonIndex => {
            ops.update(table, &key, &[(2, Value::Text(rng.text(119)))])?;
        }
        Shape::Insert => {
            ops.insert(table, &row(rng, Value::Null, size))?;
        }
        Shape::Delete => {
            if ops.delete(table, &key)? {
                ops.insert(table, &row(rng, Value::Int64(id), size))?;
            }
        }
    }
    Ok(())
}

/// Run every shape at every thread count on a prepared engine;
/// `on_row` sees each result as it is measured.
pub fn run(
    engine: &dyn Engine,
    cfg: &OltpConfig,
    tick: &dyn Fn(&str, f64),
    on_row: &mut dyn FnMut(&OltpRow),
) -> Result<Vec<OltpRow>> {
    if cfg.tables == 0 || cfg.table_size == 0 || cfg.threads.contains(&0) {
        return Err(Error::InvalidArgument {
            what: "oltp benchmark",
            reason: "needs at least one table, one row and one client per run".into(),
        });
    }
    let mut rows = Vec::new();
    for &shape in &cfg.shapes {
        for &n in &cfg.threads {
            let r = run_one(engine, cfg, shape, n, tick)?;
            on_row(&r);
            rows.push(r);
        }
    }
    Ok(rows)
}

/// The random seed of client `c` in the run of `shape` at `threads`:
/// distinct for every run and client. A client seeded as the same client
/// of an earlier run would replay that run's keys and values, and an
/// update that writes the bytes a row already holds is one SQLite skips
/// (no page written, so its commit makes no sync) while Quill and
/// RocksDB write it: seeded by client number alone, a quarter of SQLite's
/// update-non-index commits at 4 threads replayed the 1-thread run's and
/// made no sync (`bench/results/oltp-20261128k/sqlite-fsync-check.md`).
fn client_seed(shape: Shape, threads: usize, c: usize) -> u64 {
    let mut h = 0x9E37_79B9_7F4A_7C15u64 ^ ((c as u64 + 1) << 17);
    for part in [shape as u64 + 1, threads as u64] {
        // SplitMix64's mixing step: a different `part` changes every bit.
        h = (h ^ part).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 31;
    }
    h
}

fn run_one(
    engine: &dyn Engine,
    cfg: &OltpConfig,
    shape: Shape,
    n: usize,
    tick: &dyn Fn(&str, f64),
) -> Result<OltpRow> {
    let retries = AtomicU64::new(0);
    let label = format!("{} {} x{n}", engine.name(), shape.name());
    let tables: Vec<String> = (1..=cfg.tables).map(|i| format!("sbtest{i}")).collect();
    let client = |c: usize| -> Result<_> {
        let mut session = engine.session()?;
        let mut rng = Rng(client_seed(shape, n, c));
        let (retries, tables) = (&retries, &tables);
        Ok(move || -> Result<Option<usize>> {
            let table = tables
                .get(rng.below(tables.len() as u64) as usize)
                .ok_or_else(|| Error::InvalidArgument {
                    what: "table",
                    reason: "none".into(),
                })?;
            let id = rng.below(cfg.table_size) as i64 + 1;
            let mut run =
                |ops: &mut dyn Ops| event(ops, shape, table, id, &mut rng, cfg.table_size);
            let r = if shape.read_only() {
                session.read_transaction(&mut run)?
            } else {
                session.transaction(&mut run)?
            };
            retries.fetch_add(r, Ordering::Relaxed);
            Ok(Some(0))
        })
    };
    let plan = Plan {
        clients: n,
        warmup: cfg.warmup,
        seconds: cfg.seconds,
        label: &label,
    };
    let m = window::run(&plan, tick, &client, || {
        (Snapshot::take(engine), retries.load(Ordering::Relaxed))
    })?;
    let (start, r0) = m.start;
    let end = Snapshot::take(engine);
    let costs = end.since(&start, m.count, m.count);
    let (count, secs) = (m.count, m.seconds);
    // Engines take turns per shape and thread count: work this window
    // deferred must not run inside the next one, which is another
    // engine's (RocksDB's compactions after a write window ran inside
    // Quill's next window and doubled its CPU per transaction there, and
    // Quill's page cleaner wrote inside its peers' windows:
    // `bench/results/oltp.md`, runs 35-37). It is paid here, timed and
    // costed per transaction of this window.
    tick(&format!("{label}: deferred work after the window"), 0.0);
    let settle = std::time::Instant::now();
    engine.quiesce()?;
    let settle_ms = settle.elapsed().as_secs_f64() * 1e3;
    let settled = Snapshot::take(engine).since(&end, m.count, m.count);
    Ok(OltpRow {
        engine: engine.name().to_string(),
        shape: shape.name().to_string(),
        threads: n,
        seconds: secs,
        transactions: count,
        tps: count as f64 / secs,
        qps: (count * shape.queries()) as f64 / secs,
        p50_us: m.hist.value_at_quantile(0.50) as f64,
        p95_us: m.hist.value_at_quantile(0.95) as f64,
        p99_us: m.hist.value_at_quantile(0.99) as f64,
        max_us: m.hist.max() as f64,
        costs,
        retries: retries.load(Ordering::Relaxed).saturating_sub(r0),
        settle_ms: Some(settle_ms),
        settle_cpu_us_per_op: Some(settled.cpu_us_per_op),
        settle_write_bytes_per_op: settled.write_bytes_per_op,
    })
}

/// Column headings for [`table_line`].
pub fn table_header() -> String {
    format!(
        "{:<7} {:<17} {:>7} {:>10} {:>10} {:>9} {:>7} {:>6} {:>8} {:>8} {:>8} {:>9} {:>7} {:>9} {:>8} {:>9} {:>8} {:>8} {:>9} {:>9} {:>10} {:>10} {:>8}",
        "engine",
        "shape",
        "threads",
        "tps",
        "qps",
        "fsync/c",
        "logw/c",
        "hist",
        "p50 us",
        "p95 us",
        "p99 us",
        "cpu us/tx",
        "csw/tx",
        "wbytes/tx",
        "log B/tx",
        "redo B/tx",
        "data B/tx",
        "dblw B/tx",
        "undo pg/c",
        "settle ms",
        "settle cpu",
        "settle wB",
        "yield/c"
    )
}

/// One result as a table line.
pub fn table_line(r: &OltpRow) -> String {
    format!(
        "{:<7} {:<17} {:>7} {:>10.0} {:>10.0} {:>9} {:>7} {:>6} {:>8.0} {:>8.0} {:>8.0} {:>9.1} {:>7.2} {:>9} {:>8} {:>9} {:>8} {:>8} {:>9} {:>9} {:>10} {:>10} {:>8}",
        r.engine,
        r.shape,
        r.threads,
        r.tps,
        r.qps,
        or_na(r.costs.fsyncs_per_commit, 4),
        or_na(r.costs.log_writes_per_commit, 2),
        r.costs
            .backlog_at_end
            .map_or("n/a".to_string(), |h| h.to_string()),
        r.p50_us,
        r.p95_us,
        r.p99_us,
        r.costs.cpu_us_per_op,
        r.costs.switches_per_op,
        or_na(r.costs.write_bytes_per_op, 0),
        or_na(r.costs.log_bytes_per_op, 0),
        or_na(r.costs.redo_bytes_per_op, 0),
        or_na(r.costs.data_bytes_per_op, 0),
        or_na(r.costs.doublewrite_bytes_per_op, 0),
        or_na(r.costs.undo_new_pages_per_commit, 3),
        or_na(r.settle_ms, 0),
        or_na(r.settle_cpu_us_per_op, 1),
        or_na(r.settle_write_bytes_per_op, 0),
        or_na(r.costs.leader_yields_per_commit, 3),
    )
}

/// Prepare two small tables on `engine`, run every shape at 1 and 3
/// threads briefly, and check that every run completed transactions
/// (shared by the engines' tests).
#[cfg(test)]
pub(crate) fn run_every_shape(engine: &dyn Engine) -> Vec<OltpRow> {
    let cfg = OltpConfig {
        tables: 2,
        table_size: 300,
        threads: vec![1, 3],
        shapes: Shape::ALL.to_vec(),
        seconds: 0.15,
        warmup: 0.05,
    };
    let noop = |_: &str, _: f64| {};
    prepare(engine, &cfg, &noop).unwrap();
    let mut seen = 0;
    let rows = run(engine, &cfg, &noop, &mut |_| seen += 1).unwrap();
    assert_eq!(rows.len(), Shape::ALL.len() * 2);
    assert_eq!(seen, rows.len());
    for r in &rows {
        assert!(r.transactions > 0, "{} x{} ran nothing", r.shape, r.threads);
    }
    // Deletes put their rows back and inserts only add; every row has
    // exactly one index entry after concurrent index updates.
    let mut s = engine.session().unwrap();
    s.transaction(&mut |ops| {
        for n in 1..=cfg.tables {
            let t = format!("sbtest{n}");
            let rows = ops.pk_range(&t, &[], usize::MAX)?;
            assert!(rows >= 300, "{t} lost rows: {rows}");
            let entries = ops.index_range(&t, &format!("k_{n}"), &[], usize::MAX)?;
            assert_eq!(entries, rows, "{t}: index entries vs rows");
        }
        Ok(())
    })
    .unwrap();
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::QuillEngine;
    use quill::db::Options;

    #[test]
    fn every_shape_runs_and_keeps_the_tables_whole() {
        let tmp = tempfile::tempdir().unwrap();
        // No page cleaner: its background checkpoints would add syncs to
        // the read-only windows (writers flush when the log runs short).
        let opts = Options {
            store: quill::store::StoreOptions {
                cleaner: false,
                ..crate::test_store_options()
            },
            ..Options::default()
        };
        let e = QuillEngine::open(tmp.path(), opts).unwrap();
        let rows = run_every_shape(&e);
        // Each window is followed by Quill's deferred work (purge, then
        // its dirty pages), so the last one, a write shape, left neither
        // history nor page writes behind for whatever runs next.
        assert_eq!(e.backlog(), Some(0), "history after the last window");
        assert_eq!(
            e.db().store().stats().pool.dirty,
            0,
            "dirty pages after the last window"
        );
        for r in &rows {
            let f = r.costs.fsyncs_per_commit.unwrap();
            let hist = r.costs.backlog_at_end.expect("Quill reports its history");
            assert!(hist >= 0, "{} x{}: history {hist}", r.shape, r.threads);
            assert!(
                table_line(r).split_whitespace().nth(7) == Some(hist.to_string().as_str()),
                "the hist column: {}",
                table_line(r)
            );
            // The user-mode part of the CPU time, from the same readings.
            let user = r.costs.user_cpu_us_per_op.expect("getrusage works here");
            assert!(
                (0.0..=r.costs.cpu_us_per_op).contains(&user),
                "{} x{}: {user} user us of {} in all",
                r.shape,
                r.threads,
                r.costs.cpu_us_per_op
            );
            let new = r.costs.undo_new_pages_per_commit;
            let cached = r.costs.undo_cached_pages_per_commit;
            let (Some(new), Some(cached)) = (new, cached) else {
                panic!("Quill reports its undo segments: {:?}", r.costs);
            };
            let line = table_line(r);
            let mut back = line.split_whitespace().rev();
            let yields = r
                .costs
                .leader_yields_per_commit
                .expect("Quill counts its leader's yields");
            assert_eq!(
                back.next(),
                Some(format!("{yields:.3}").as_str()),
                "the yield column: {line}"
            );
            // A lead yields at most once and then syncs (the window's
            // edges can split the two).
            assert!(
                (0.0..=f + 0.05).contains(&yields),
                "{} x{}: {yields} yields per commit, {f} syncs",
                r.shape,
                r.threads
            );
            let settle: Vec<&str> = back.by_ref().take(3).collect();
            assert_eq!(
                back.next(),
                Some(format!("{new:.3}").as_str()),
                "the undo column: {line}"
            );
            let settle_ms = r.settle_ms.expect("settling is timed");
            assert_eq!(
                settle.last(),
                Some(&format!("{settle_ms:.0}").as_str()),
                "the settle column: {line}"
            );
            let cpu = r.settle_cpu_us_per_op.expect("settling is costed");
            assert!(cpu.is_finite() && cpu >= 0.0, "settle cpu {cpu}: {line}");
            if r.shape == "insert" {
                // Every insert transaction starts an insert undo segment
                // (about one per commit; the window's edges blur it).
                assert!(
                    new + cached > 0.5,
                    "{} x{}: {new} + {cached}",
                    r.shape,
                    r.threads
                );
            }
            if r.shape == "point-select" || r.shape == "read-only" {
                assert_eq!(f, 0.0, "{}: reads do not sync", r.shape);
                assert_eq!(new + cached, 0.0, "{}: reads start no undo", r.shape);
            } else {
                // The tiny test pool and log make evictions and urgent
                // flushes sync too: no bound of 1 here (that is a benchmark
                // figure, not a unit test's).
                assert!(f > 0.0, "{} x{}: writes made no sync", r.shape, r.threads);
            }
        }
        e.db().check().unwrap();
    }

    /// Every client of every run of an acceptance grid draws its own
    /// sequence (`client_seed`): no run replays another's updates.
    #[test]
    fn every_run_and_client_has_its_own_seed() {
        let mut seen = std::collections::HashSet::new();
        for &shape in Shape::ALL {
            for threads in [1, 4, 16, 64] {
                for c in 0..threads {
                    assert!(
                        seen.insert(client_seed(shape, threads, c)),
                        "{shape:?} x{threads} client {c}"
                    );
                }
            }
        }
    }

    #[test]
    fn shape_names_round_trip_and_bad_ones_are_errors() {
        for s in Shape::ALL {
            assert_eq!(s.name().parse::<Shape>().unwrap(), *s);
        }
        assert!("update".parse::<Shape>().is_err());
    }
}
