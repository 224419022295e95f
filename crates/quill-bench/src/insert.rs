//! `quill bench insert`: the Insert Benchmark (Mark Callaghan's iibench
//! descendant) over the [`Engine`] interface.
//!
//! Each client owns one table `purchases_index_N` (transactionid int64
//! automatic primary key, dateandtime timestamp, cashregisterid int32,
//! customerid int32, productid int32, price int32, data text of 10 to 20
//! bytes, half random) and runs the steps in order:
//!
//! | step | what runs | throughput |
//! | --- | --- | --- |
//! | `l.i0` | one connection per client loads `rows` rows in key order, no secondary indexes, `rows_per_commit` rows per commit (100 big, 10 small) | rows inserted per second |
//! | `l.x` | one connection per client creates the three secondary indexes on its table | rows indexed per second (table rows / time) |
//! | `l.i1` | per client an inserter (50 rows per commit big, 5 small) and a deleter that removes the oldest rows at the same rate (an inserter more than 4 batches ahead of its deleter waits) | rows inserted per second |
//! | `l.i2` | as `l.i1` with 5 rows per commit | rows inserted per second |
//! | `qrN` / `qpN` | per client a query thread (`qr`: a 10-row range read of a random secondary index from a random value; `qp`: point lookups of 10 random ids in one transaction) as fast as it can, while an inserter and a deleter run at `N` rows per second each, paced | queries per second, and whether the insert rate was sustained (at least 95% of `N`) |
//!
//! The secondary indexes: `marketsegment (productid, customerid, price)`,
//! `registersegment (cashregisterid, customerid, price)`, `pdc (price,
//! dateandtime, customerid)`. `l.i0` and `l.x` are fixed work, timed from
//! start to the last client's end; the other steps are measured windows
//! ([`super::window`], quiet edges) of `seconds` after a warm-up.
//!
//! Every commit is durable. Reported per engine, transaction size, client
//! count and step: throughput; latency percentiles by operation (insert
//! commit, delete commit, query); and [`Costs`] per row inserted (per
//! query for the query steps, per row indexed for `l.x`), with log syncs
//! per write commit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::commit::new_hist;
use super::costs::{Costs, Snapshot, or_na};
use super::engine::{Engine, Session};
use super::window::{self, Latencies, Plan, Rng};
use quill::catalog::schema::{IndexDef, TableDef};
use quill::catalog::{Column, ColumnType, Value};
use quill::{Error, Result};

/// One step of the benchmark (serialised as its name, `l.i0` or `qr100`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Initial load in key order, no secondary indexes.
    Load,
    /// Create the secondary indexes.
    CreateIndexes,
    /// Inserts and matching deletes, big batches.
    InsertDelete1,
    /// Inserts and matching deletes, 5 rows per commit.
    InsertDelete2,
    /// Range queries while inserts and deletes run at this many rows/s.
    RangeQueries(u32),
    /// Point queries while inserts and deletes run at this many rows/s.
    PointQueries(u32),
}

impl Serialize for Step {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl Step {
    /// Every step the benchmark defines, in order.
    pub const ALL: &'static [Step] = &[
        Step::Load,
        Step::CreateIndexes,
        Step::InsertDelete1,
        Step::InsertDelete2,
        Step::RangeQueries(100),
        Step::PointQueries(100),
        Step::RangeQueries(500),
        Step::PointQueries(500),
        Step::RangeQueries(1000),
        Step::PointQueries(1000),
    ];

    /// The benchmark's name for the step (`l.i0`, `qr100`, ...).
    pub fn name(self) -> String {
        match self {
            Step::Load => "l.i0".into(),
            Step::CreateIndexes => "l.x".into(),
            Step::InsertDelete1 => "l.i1".into(),
            Step::InsertDelete2 => "l.i2".into(),
            Step::RangeQueries(r) => format!("qr{r}"),
            Step::PointQueries(r) => format!("qp{r}"),
        }
    }

    /// Whether the step is write-heavy (the steps the goal compares).
    pub fn write_heavy(self) -> bool {
        matches!(self, Step::Load | Step::InsertDelete1 | Step::InsertDelete2)
    }
}

impl std::str::FromStr for Step {
    type Err = Error;
    fn from_str(s: &str) -> Result<Step> {
        let rate = |r: &str| r.parse::<u32>().ok().filter(|&r| r > 0);
        match s {
            "l.i0" => Ok(Step::Load),
            "l.x" => Ok(Step::CreateIndexes),
            "l.i1" => Ok(Step::InsertDelete1),
            "l.i2" => Ok(Step::InsertDelete2),
            _ => {
                if let Some(r) = s.strip_prefix("qr").and_then(rate) {
                    Ok(Step::RangeQueries(r))
                } else if let Some(r) = s.strip_prefix("qp").and_then(rate) {
                    Ok(Step::PointQueries(r))
                } else {
                    Err(Error::InvalidArgument {
                        what: "insert benchmark step",
                        reason: format!(
                            "unknown step {s:?}; expected l.i0, l.x, l.i1, l.i2, qrN or qpN (N rows per second, e.g. qr100)"
                        ),
                    })
                }
            }
        }
    }
}

/// Transaction sizes: the seeds' "big" (the benchmark as-is) and "small".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TxnSize {
    /// 100 rows per commit in `l.i0`, 50 in `l.i1`, 5 in `l.i2`.
    Big,
    /// 10 rows per commit in `l.i0`, 5 in `l.i1` and `l.i2`.
    Small,
}

impl TxnSize {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            TxnSize::Big => "big",
            TxnSize::Small => "small",
        }
    }

    /// Rows per commit of `step`'s inserts (and deletes).
    pub fn rows_per_commit(self, step: Step) -> u64 {
        match (self, step) {
            (TxnSize::Big, Step::Load) => 100,
            (TxnSize::Small, Step::Load) => 10,
            (_, Step::InsertDelete2) | (TxnSize::Small, _) => 5,
            (TxnSize::Big, _) => 50,
        }
    }
}

impl std::str::FromStr for TxnSize {
    type Err = Error;
    fn from_str(s: &str) -> Result<TxnSize> {
        match s {
            "big" => Ok(TxnSize::Big),
            "small" => Ok(TxnSize::Small),
            _ => Err(Error::InvalidArgument {
                what: "transaction size",
                reason: format!("unknown size {s:?}; expected big or small"),
            }),
        }
    }
}

/// What to run on one engine at one client count and transaction size.
#[derive(Clone, Debug, Serialize)]
pub struct InsertConfig {
    /// Clients (one table each).
    pub clients: usize,
    /// Rows each table gets in `l.i0`.
    pub rows: u64,
    /// Steps, in order.
    pub steps: Vec<Step>,
    /// Transaction size.
    pub txn_size: TxnSize,
    /// Overrides the rows per commit of every insert step.
    pub rows_per_commit: Option<u64>,
    /// Measured seconds of each windowed step.
    pub seconds: f64,
    /// Warm-up seconds of each windowed step.
    pub warmup: f64,
}

impl InsertConfig {
    fn batch(&self, step: Step) -> u64 {
        self.rows_per_commit
            .unwrap_or_else(|| self.txn_size.rows_per_commit(step))
            .max(1)
    }
}

/// Latency of one kind of operation, microseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct OpLatency {
    /// Operation: `insert`, `delete`, `query` or `create-index`.
    pub op: String,
    /// Operations measured.
    pub count: u64,
    /// Median.
    pub p50_us: f64,
    /// 95th percentile.
    pub p95_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Maximum.
    pub max_us: f64,
}

impl OpLatency {
    fn of(op: &str, h: &Latencies, count: u64) -> OpLatency {
        OpLatency {
            op: op.into(),
            count,
            p50_us: h.value_at_quantile(0.50) as f64,
            p95_us: h.value_at_quantile(0.95) as f64,
            p99_us: h.value_at_quantile(0.99) as f64,
            max_us: h.max() as f64,
        }
    }
}

/// One measured step.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InsertRow {
    /// Engine name.
    pub engine: String,
    /// `big` or `small`.
    pub txn_size: String,
    /// Clients.
    pub clients: usize,
    /// Step name.
    pub step: String,
    /// Whether the step is write-heavy.
    pub write_heavy: bool,
    /// Rows per commit of the step's inserts and deletes (0: none).
    pub rows_per_commit: u64,
    /// Measured seconds.
    pub seconds: f64,
    /// Rows inserted per second (rows indexed per second for `l.x`).
    pub rows_per_sec: f64,
    /// Rows deleted per second.
    pub deletes_per_sec: f64,
    /// Queries per second (query steps).
    pub queries_per_sec: f64,
    /// Target insert rate of a query step, rows/s over all clients.
    pub target_rows_per_sec: Option<f64>,
    /// The inserts reached at least 95% of the target.
    pub rate_sustained: Option<bool>,
    /// Latency by operation.
    pub latency: Vec<OpLatency>,
    /// Costs per row inserted (per query in query steps, per row indexed
    /// in `l.x`), log syncs per write commit.
    #[serde(flatten)]
    pub costs: Costs,
    /// Transactions run again after a retryable conflict.
    pub retries: u64,
}

/// The table of client `n` (1-based).
pub fn purchases_index(n: usize) -> TableDef {
    TableDef {
        name: format!("purchases_index_{n}"),
        columns: vec![
            Column::new("transactionid", ColumnType::Int64, false),
            Column::new("dateandtime", ColumnType::Timestamp, false),
            Column::new("cashregisterid", ColumnType::Int32, false),
            Column::new("customerid", ColumnType::Int32, false),
            Column::new("productid", ColumnType::Int32, false),
            Column::new("price", ColumnType::Int32, false),
            Column::new("data", ColumnType::Text { max_len: 20 }, false),
        ],
        primary_key: vec![0],
        indexes: Vec::new(),
    }
}

/// The three secondary indexes `l.x` creates.
pub fn secondary_indexes() -> Vec<IndexDef> {
    let ix = |name: &str, columns: Vec<usize>| IndexDef {
        name: name.into(),
        columns,
        unique: false,
    };
    vec![
        ix("marketsegment", vec![4, 3, 5]),
        ix("registersegment", vec![2, 3, 5]),
        ix("pdc", vec![5, 1, 3]),
    ]
}

const CASH_REGISTERS: u64 = 1_000;
const CUSTOMERS: u64 = 100_000;
const PRODUCTS: u64 = 10_000;
const PRICES: u64 = 500;

/// One new row (automatic id).
fn new_row(rng: &mut Rng) -> Vec<Value> {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64);
    let len = 10 + rng.below(11) as usize;
    let random = len / 2;
    let mut data = String::with_capacity(len);
    for _ in 0..random {
        data.push(char::from(b'a' + rng.below(26) as u8));
    }
    while data.len() < len {
        data.push('x');
    }
    vec![
        Value::Null,
        Value::Timestamp(micros),
        Value::Int32(rng.below(CASH_REGISTERS) as i32),
        Value::Int32(rng.below(CUSTOMERS) as i32),
        Value::Int32(rng.below(PRODUCTS) as i32),
        Value::Int32(rng.below(PRICES) as i32),
        Value::Text(data),
    ]
}

/// Operation kinds of the windowed steps.
const INSERT: usize = 0;
const DELETE: usize = 1;
const QUERY: usize = 2;
const KIND_NAMES: [&str; 3] = ["insert", "delete", "query"];

/// Batches an inserter may run ahead of its deleter.
const MAX_AHEAD: u64 = 4;

/// Per-table progress shared by its inserter and deleter.
#[derive(Default)]
struct TableCounters {
    inserted: AtomicU64,
    deleted: AtomicU64,
    /// Largest id inserted so far (for point queries).
    max_id: AtomicU64,
}

impl TableCounters {
    /// Rows the table holds.
    fn live(&self) -> u64 {
        self.inserted
            .load(Ordering::Relaxed)
            .saturating_sub(self.deleted.load(Ordering::Relaxed))
    }

    /// A lower bound of the smallest id left: ids start at 1 and the
    /// deleter removes the oldest rows (ids an engine skipped, for
    /// example after a retry, only make the bound lower).
    fn lowest_id(&self) -> u64 {
        1 + self.deleted.load(Ordering::Relaxed)
    }

    fn inserted_up_to(&self, rows: u64, last_id: u64) {
        self.inserted.fetch_add(rows, Ordering::Relaxed);
        self.max_id.fetch_max(last_id, Ordering::Relaxed);
    }
}

/// Insert `n` new rows into `table` as one transaction. Returns the
/// largest id inserted and the attempts rolled back.
fn insert_rows(
    session: &mut dyn Session,
    table: &str,
    rng: &mut Rng,
    n: u64,
) -> Result<(u64, u64)> {
    let mut last = 0;
    let retries = session.transaction(&mut |ops| {
        for _ in 0..n {
            if let Some(Value::Int64(id)) = ops.insert(table, &new_row(rng))?.first() {
                last = *id as u64;
            }
        }
        Ok(())
    })?;
    Ok((last, retries))
}

/// Run `cfg.steps` on `engine` (empty tables are created by `l.i0`, or
/// first by whichever step runs first). `on_row` sees each result.
pub fn run(
    engine: &dyn Engine,
    cfg: &InsertConfig,
    tick: &dyn Fn(&str, f64),
    on_row: &mut dyn FnMut(&InsertRow),
) -> Result<Vec<InsertRow>> {
    if cfg.clients == 0 {
        return Err(Error::InvalidArgument {
            what: "insert benchmark",
            reason: "needs at least one client".into(),
        });
    }
    for c in 1..=cfg.clients {
        engine.create_table(&purchases_index(c))?;
    }
    let counters: Vec<TableCounters> = (0..cfg.clients).map(|_| TableCounters::default()).collect();
    let mut rows = Vec::new();
    let mut indexed = false;
    for &step in &cfg.steps {
        let r = match step {
            Step::Load => load(engine, cfg, &counters, tick)?,
            Step::CreateIndexes => {
                indexed = true;
                create_indexes(engine, cfg, &counters, tick)?
            }
            _ => {
                if matches!(step, Step::RangeQueries(_)) && !indexed {
                    return Err(Error::InvalidArgument {
                        what: "insert benchmark",
                        reason: format!(
                            "{} reads the secondary indexes: run l.x before it",
                            step.name()
                        ),
                    });
                }
                windowed(engine, cfg, step, &counters, tick)?
            }
        };
        on_row(&r);
        rows.push(r);
    }
    Ok(rows)
}

fn row_base(engine: &dyn Engine, cfg: &InsertConfig, step: Step, batch: u64) -> InsertRow {
    InsertRow {
        engine: engine.name().into(),
        txn_size: cfg.txn_size.name().into(),
        clients: cfg.clients,
        step: step.name(),
        write_heavy: step.write_heavy(),
        rows_per_commit: batch,
        seconds: 0.0,
        rows_per_sec: 0.0,
        deletes_per_sec: 0.0,
        queries_per_sec: 0.0,
        target_rows_per_sec: None,
        rate_sustained: None,
        latency: Vec::new(),
        costs: Costs::default(),
        retries: 0,
    }
}

/// Join scoped client threads, turning a panic into an error.
fn join<T>(handles: Vec<std::thread::ScopedJoinHandle<'_, Result<T>>>) -> Result<Vec<T>> {
    handles
        .into_iter()
        .map(|h| {
            h.join().map_err(|_| Error::InvalidArgument {
                what: "benchmark client",
                reason: "panicked".into(),
            })?
        })
        .collect()
}

/// `l.i0`: every client loads its table, `batch` rows per commit.
fn load(
    engine: &dyn Engine,
    cfg: &InsertConfig,
    counters: &[TableCounters],
    tick: &dyn Fn(&str, f64),
) -> Result<InsertRow> {
    let step = Step::Load;
    let batch = cfg.batch(step);
    let label = format!(
        "{} {} x{} l.i0",
        engine.name(),
        cfg.txn_size.name(),
        cfg.clients
    );
    let done = AtomicU64::new(0);
    let total = (cfg.rows * cfg.clients as u64).max(1);
    let start = Snapshot::take(engine);
    let started = Instant::now();
    let results = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (c, counter) in counters.iter().enumerate() {
            let done = &done;
            handles.push(s.spawn(move || -> Result<(Latencies, u64, u64)> {
                let table = purchases_index(c + 1).name;
                let mut session = engine.session()?;
                let mut rng = Rng(0x1B_0000 + c as u64 * 7919);
                let mut hist = new_hist();
                let (mut commits, mut retries) = (0u64, 0u64);
                let mut left = cfg.rows;
                while left > 0 {
                    let n = left.min(batch);
                    let t = Instant::now();
                    let (last, r) = insert_rows(session.as_mut(), &table, &mut rng, n)?;
                    let _ = hist.record(t.elapsed().as_micros().max(1) as u64);
                    retries += r;
                    commits += 1;
                    left -= n;
                    counter.inserted_up_to(n, last);
                    done.fetch_add(n, Ordering::Relaxed);
                }
                Ok((hist, commits, retries))
            }));
        }
        let handles_done = || handles.iter().all(|h| h.is_finished());
        while !handles_done() {
            std::thread::sleep(Duration::from_millis(100));
            tick(&label, done.load(Ordering::Relaxed) as f64 / total as f64);
        }
        join(handles)
    })?;
    let secs = started.elapsed().as_secs_f64();
    let mut hist = new_hist();
    let (mut commits, mut retries) = (0, 0);
    for (h, c, r) in &results {
        let _ = hist.add(h);
        commits += c;
        retries += r;
    }
    let rows = cfg.rows * cfg.clients as u64;
    let mut r = row_base(engine, cfg, step, batch);
    r.seconds = secs;
    r.rows_per_sec = rows as f64 / secs;
    r.latency = vec![OpLatency::of("insert", &hist, commits)];
    r.costs = Snapshot::take(engine).since(&start, commits, rows);
    r.retries = retries;
    Ok(r)
}

/// `l.x`: every client creates the three indexes on its table.
fn create_indexes(
    engine: &dyn Engine,
    cfg: &InsertConfig,
    counters: &[TableCounters],
    tick: &dyn Fn(&str, f64),
) -> Result<InsertRow> {
    let step = Step::CreateIndexes;
    let label = format!(
        "{} {} x{} l.x",
        engine.name(),
        cfg.txn_size.name(),
        cfg.clients
    );
    let indexes = secondary_indexes();
    let built = AtomicU64::new(0);
    let total = (indexes.len() * cfg.clients) as f64;
    let start = Snapshot::take(engine);
    let started = Instant::now();
    let hists = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for c in 0..cfg.clients {
            let (indexes, built) = (&indexes, &built);
            handles.push(s.spawn(move || -> Result<Latencies> {
                let table = purchases_index(c + 1).name;
                let mut hist = new_hist();
                for ix in indexes {
                    let t = Instant::now();
                    engine.create_index(&table, ix)?;
                    let _ = hist.record(t.elapsed().as_micros().max(1) as u64);
                    built.fetch_add(1, Ordering::Relaxed);
                }
                Ok(hist)
            }));
        }
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(100));
            tick(&label, built.load(Ordering::Relaxed) as f64 / total);
        }
        join(handles)
    })?;
    let secs = started.elapsed().as_secs_f64();
    let mut hist = new_hist();
    for h in &hists {
        let _ = hist.add(h);
    }
    let rows: u64 = counters.iter().map(TableCounters::live).sum();
    let mut r = row_base(engine, cfg, step, 0);
    r.seconds = secs;
    r.rows_per_sec = rows as f64 / secs;
    r.latency = vec![OpLatency::of("create-index", &hist, hist.len())];
    r.costs = Snapshot::take(engine).since(&start, hist.len(), rows);
    Ok(r)
}

/// Paces a thread to `rate` operations of `batch` rows per second.
struct Pacer {
    next: Instant,
    every: Option<Duration>,
}

impl Pacer {
    fn new(rows_per_sec: Option<u32>, batch: u64) -> Pacer {
        Pacer {
            next: Instant::now(),
            every: rows_per_sec
                .map(|r| Duration::from_secs_f64(batch as f64 / f64::from(r.max(1)))),
        }
    }

    /// Whether the next slot is still ahead: then it sleeps towards it
    /// (at most 10 ms) and the caller returns without an operation, so
    /// pacing is never timed as latency. When the slot has come it is
    /// claimed. Never waits when unpaced; a thread that fell more than a
    /// second behind does not burst to catch up.
    fn wait(&mut self) -> bool {
        let Some(every) = self.every else {
            return false;
        };
        let now = Instant::now();
        if self.next > now {
            std::thread::sleep((self.next - now).min(Duration::from_millis(10)));
            return true;
        }
        if now - self.next > Duration::from_secs(1) {
            self.next = now;
        }
        self.next += every;
        false
    }
}

/// `l.i1`, `l.i2` and the query steps: measured windows.
fn windowed(
    engine: &dyn Engine,
    cfg: &InsertConfig,
    step: Step,
    counters: &[TableCounters],
    tick: &dyn Fn(&str, f64),
) -> Result<InsertRow> {
    let batch = cfg.batch(step);
    let (rate, query) = match step {
        Step::RangeQueries(r) => (Some(r), Some(false)),
        Step::PointQueries(r) => (Some(r), Some(true)),
        _ => (None, None),
    };
    let roles = if query.is_some() { 3 } else { 2 };
    let label = format!(
        "{} {} x{} {}",
        engine.name(),
        cfg.txn_size.name(),
        cfg.clients,
        step.name()
    );
    let retries = AtomicU64::new(0);
    let indexes = secondary_indexes();
    let client = |thread: usize| -> Result<_> {
        let (c, role) = (thread / roles, thread % roles);
        let counter = counters.get(c).ok_or_else(|| Error::InvalidArgument {
            what: "client",
            reason: format!("no table for client {c}"),
        })?;
        let table = purchases_index(c + 1).name;
        let mut session = engine.session()?;
        let mut rng = Rng(0x1B_1000 + thread as u64 * 104_729);
        let mut pacer = Pacer::new(rate, batch);
        let (retries, indexes) = (&retries, &indexes);
        Ok(move || -> Result<Option<usize>> {
            match role {
                0 => {
                    // Inserts and deletes run at the same rate: an inserter
                    // more than a few batches ahead of its deleter waits
                    // (SQLite's single writer lock would otherwise let the
                    // inserter starve the deleter and grow the table).
                    if counter.live().saturating_sub(cfg.rows) > MAX_AHEAD * batch {
                        std::thread::sleep(Duration::from_micros(100));
                        return Ok(None);
                    }
                    if pacer.wait() {
                        return Ok(None);
                    }
                    let (last, r) = insert_rows(session.as_mut(), &table, &mut rng, batch)?;
                    retries.fetch_add(r, Ordering::Relaxed);
                    counter.inserted_up_to(batch, last);
                    Ok(Some(INSERT))
                }
                1 => {
                    // Delete the oldest rows at the inserter's rate: only
                    // once it is a batch ahead.
                    if counter.live().saturating_sub(cfg.rows) < batch {
                        std::thread::sleep(Duration::from_micros(200));
                        return Ok(None);
                    }
                    let mut n = 0;
                    let from = [Value::Int64(counter.lowest_id() as i64)];
                    retries.fetch_add(
                        session.transaction(&mut |ops| {
                            n = ops.delete_first(&table, &from, batch as usize)? as u64;
                            Ok(())
                        })?,
                        Ordering::Relaxed,
                    );
                    counter.deleted.fetch_add(n, Ordering::Relaxed);
                    Ok(Some(DELETE))
                }
                _ => {
                    let point = query == Some(true);
                    retries.fetch_add(
                        session.read_transaction(&mut |ops| {
                            if point {
                                let lo = counter.lowest_id();
                                let hi = counter.max_id.load(Ordering::Relaxed).max(lo);
                                for _ in 0..10 {
                                    let id = lo + rng.below(hi - lo + 1);
                                    std::hint::black_box(
                                        ops.get(&table, &[Value::Int64(id as i64)])?,
                                    );
                                }
                            } else {
                                let ix = indexes
                                    .get(rng.below(indexes.len() as u64) as usize)
                                    .map_or("pdc", |ix| ix.name.as_str());
                                let from = match ix {
                                    "marketsegment" => rng.below(PRODUCTS),
                                    "registersegment" => rng.below(CASH_REGISTERS),
                                    _ => rng.below(PRICES),
                                };
                                std::hint::black_box(ops.index_range(
                                    &table,
                                    ix,
                                    &[Value::Int32(from as i32)],
                                    10,
                                )?);
                            }
                            Ok(())
                        })?,
                        Ordering::Relaxed,
                    );
                    Ok(Some(QUERY))
                }
            }
        })
    };
    let plan = Plan {
        clients: cfg.clients * roles,
        warmup: cfg.warmup,
        seconds: cfg.seconds,
        label: &label,
    };
    let m = window::run(&plan, tick, &client, || {
        (
            Snapshot::take(engine),
            retries.load(Ordering::Relaxed),
            total(counters, |c| &c.inserted),
            total(counters, |c| &c.deleted),
        )
    })?;
    let (start, r0, i0, d0) = m.start;
    let secs = m.seconds;
    let inserted = total(counters, |c| &c.inserted).saturating_sub(i0);
    let deleted = total(counters, |c| &c.deleted).saturating_sub(d0);
    let count = |k: usize| m.kinds.get(k).map_or(0, |(_, c)| *c);
    let queries = count(QUERY);
    let commits = count(INSERT) + count(DELETE);
    let mut r = row_base(engine, cfg, step, batch);
    r.seconds = secs;
    r.rows_per_sec = inserted as f64 / secs;
    r.deletes_per_sec = deleted as f64 / secs;
    r.queries_per_sec = queries as f64 / secs;
    r.latency = m
        .kinds
        .iter()
        .enumerate()
        .filter(|(_, (_, c))| *c > 0)
        .map(|(k, (h, c))| OpLatency::of(KIND_NAMES.get(k).copied().unwrap_or("other"), h, *c))
        .collect();
    let per = if query.is_some() { queries } else { inserted };
    r.costs = Snapshot::take(engine).since(&start, commits, per);
    if let Some(rate) = rate {
        let target = f64::from(rate) * cfg.clients as f64;
        r.target_rows_per_sec = Some(target);
        r.rate_sustained = Some(r.rows_per_sec >= 0.95 * target);
    }
    r.retries = retries.load(Ordering::Relaxed).saturating_sub(r0);
    Ok(r)
}

/// One counter summed over every table.
fn total(counters: &[TableCounters], field: fn(&TableCounters) -> &AtomicU64) -> u64 {
    counters
        .iter()
        .map(|c| field(c).load(Ordering::Relaxed))
        .sum()
}

/// Column headings for [`table_line`].
pub fn table_header() -> String {
    format!(
        "{:<7} {:<5} {:>3} {:<7} {:>5} {:>10} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>7} {:>9} {:>8} {:>9} {:>8} {:>8} {:>8}",
        "engine",
        "txn",
        "cl",
        "step",
        "r/c",
        "rows/s",
        "q/s",
        "fsync/c",
        "ins p50",
        "ins p99",
        "q p99",
        "cpu us/op",
        "csw/op",
        "wbytes/op",
        "log B/op",
        "redo B/op",
        "data B/op",
        "dblw B/op",
        "yield/c",
    )
}

/// One result as a table line.
pub fn table_line(r: &InsertRow) -> String {
    let lat = |op: &str, f: fn(&OpLatency) -> f64| {
        r.latency
            .iter()
            .find(|l| l.op == op)
            .map_or("-".to_string(), |l| format!("{:.0}", f(l)))
    };
    let qps = match (r.queries_per_sec, r.rate_sustained) {
        (q, Some(ok)) => format!("{q:.0}{}", if ok { "" } else { "!" }),
        _ => "-".into(),
    };
    format!(
        "{:<7} {:<5} {:>3} {:<7} {:>5} {:>10.0} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9.1} {:>7.2} {:>9} {:>8} {:>9} {:>8} {:>8} {:>8}",
        r.engine,
        r.txn_size,
        r.clients,
        r.step,
        r.rows_per_commit,
        r.rows_per_sec,
        qps,
        or_na(r.costs.fsyncs_per_commit, 4),
        lat(
            if r.step == "l.x" {
                "create-index"
            } else {
                "insert"
            },
            |l| l.p50_us
        ),
        lat(
            if r.step == "l.x" {
                "create-index"
            } else {
                "insert"
            },
            |l| l.p99_us
        ),
        lat("query", |l| l.p99_us),
        r.costs.cpu_us_per_op,
        r.costs.switches_per_op,
        or_na(r.costs.write_bytes_per_op, 0),
        or_na(r.costs.log_bytes_per_op, 0),
        or_na(r.costs.redo_bytes_per_op, 0),
        or_na(r.costs.data_bytes_per_op, 0),
        or_na(r.costs.doublewrite_bytes_per_op, 0),
        or_na(r.costs.leader_yields_per_commit, 3),
    )
}

/// Run every step briefly at 2 clients on `engine` and check the tables
/// kept their size (shared by the engines' tests).
#[cfg(test)]
pub(crate) fn run_every_step(engine: &dyn Engine) -> Vec<InsertRow> {
    let cfg = InsertConfig {
        clients: 2,
        rows: 500,
        steps: vec![
            Step::Load,
            Step::CreateIndexes,
            Step::InsertDelete1,
            Step::InsertDelete2,
            Step::RangeQueries(100),
            Step::PointQueries(100),
        ],
        txn_size: TxnSize::Big,
        rows_per_commit: None,
        seconds: 0.3,
        warmup: 0.1,
    };
    let noop = |_: &str, _: f64| {};
    let mut seen = 0;
    let rows = run(engine, &cfg, &noop, &mut |_| seen += 1).unwrap();
    assert_eq!(rows.len(), cfg.steps.len());
    assert_eq!(seen, rows.len());
    for r in &rows {
        assert!(
            r.rows_per_sec > 0.0 || r.queries_per_sec > 0.0,
            "{} did nothing",
            r.step
        );
    }
    let q = rows.iter().find(|r| r.step == "qp100").unwrap();
    assert!(q.queries_per_sec > 0.0 && q.target_rows_per_sec == Some(200.0));
    // The deleter keeps each table at its loaded size (within a batch or
    // two in flight), and every row has one entry in each index.
    let mut s = engine.session().unwrap();
    s.transaction(&mut |ops| {
        for c in 1..=cfg.clients {
            let t = purchases_index(c).name;
            let n = ops.pk_range(&t, &[], usize::MAX)?;
            assert!((500..=800).contains(&n), "{t}: {n} rows");
            for ix in secondary_indexes() {
                assert_eq!(
                    ops.index_range(&t, &ix.name, &[], usize::MAX)?,
                    n,
                    "{t} {}",
                    ix.name
                );
            }
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

    #[test]
    fn every_step_runs_on_quill() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = quill::db::Options {
            store: crate::test_store_options(),
            ..quill::db::Options::default()
        };
        let e = QuillEngine::open(tmp.path(), opts).unwrap();
        for r in run_every_step(&e) {
            assert!(r.costs.log_bytes_per_op.is_some());
            let yields = r.costs.leader_yields_per_commit;
            assert!(
                yields.is_some(),
                "{}: Quill counts its leader's yields",
                r.step
            );
            let line = table_line(&r);
            assert_eq!(
                line.split_whitespace().last(),
                Some(or_na(yields, 3).as_str()),
                "the yield column: {line}"
            );
            if r.write_heavy {
                assert!(r.costs.fsyncs_per_commit.unwrap() > 0.0, "{}", r.step);
                // Redo payload is there, and never more than the log
                // writes that carried it (framing and padding on top).
                let (log, redo) = (
                    r.costs.log_bytes_per_op.unwrap(),
                    r.costs.redo_bytes_per_op.unwrap(),
                );
                assert!(
                    redo > 0.0 && redo <= log,
                    "{}: redo {redo} log {log}",
                    r.step
                );
            }
        }
        e.db().check().unwrap();
    }

    #[test]
    fn step_and_size_names_parse_and_bad_ones_are_errors() {
        for s in Step::ALL {
            assert_eq!(s.name().parse::<Step>().unwrap(), *s);
        }
        for bad in ["l.i3", "qr", "qr0", "qx100", ""] {
            assert!(bad.parse::<Step>().is_err(), "{bad}");
        }
        assert_eq!("small".parse::<TxnSize>().unwrap(), TxnSize::Small);
        assert!("medium".parse::<TxnSize>().is_err());
        assert_eq!(TxnSize::Big.rows_per_commit(Step::Load), 100);
        assert_eq!(TxnSize::Big.rows_per_commit(Step::InsertDelete1), 50);
        assert_eq!(TxnSize::Big.rows_per_commit(Step::InsertDelete2), 5);
        assert_eq!(TxnSize::Small.rows_per_commit(Step::Load), 10);
        assert_eq!(TxnSize::Small.rows_per_commit(Step::InsertDelete1), 5);
    }
}
