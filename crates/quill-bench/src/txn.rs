//! `quill bench txn`: transactions through the embedded API in sysbench's
//! shapes, on `tables` tables `sbtestN(id int64 primary key, k int32,
//! c char(120), pad char(60))` with a secondary index on `k`, each
//! `table_size` rows.
//!
//! * `update-non-index`: one transaction = `UPDATE sbtestN SET c = ? WHERE
//!   id = ?` for a uniformly random table and id, then a commit with the
//!   configured durability (durable by default).
//! * `point-select`: one transaction = `SELECT c FROM sbtestN WHERE id = ?`
//!   (a read-only transaction: no commit record, no sync).
//!
//! For each workload and client count: a warm-up, then a measured window
//! in which each client runs transactions back to back. The window starts
//! and ends with no transaction in flight (clients pause briefly before it
//! and are joined after it), so the counters read at its edges count whole
//! transactions with all of their syncs. Reported: TPS; transaction
//! latency percentiles (begin to commit return); log syncs per committed
//! transaction (the log's own counters: commit syncs, write-ahead syncs of
//! the page cleaner and syncs made for a checkpoint slot alone; data-file
//! syncs apart); CPU time and context switches per transaction
//! (`getrusage(RUSAGE_SELF)` deltas: every thread of the process,
//! background ones included); the history length at the end of the
//! window. Between runs the benchmark waits (up to 30 s) for purge to
//! empty the history so runs do not inherit each other's backlog.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::commit::usage;
use super::window::{self, Plan, Rng, sbtest};
use quill::catalog::Value;
use quill::db::{Db, Options, Table, TxnOptions};
use quill::log::Durability;
use quill::store::StoreOptions;
use quill::{Error, Result};

/// A transaction shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum TxnWorkload {
    /// Update one row's non-indexed column, commit.
    UpdateNonIndex,
    /// Read one row by primary key.
    PointSelect,
}

impl TxnWorkload {
    /// Its name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            TxnWorkload::UpdateNonIndex => "update-non-index",
            TxnWorkload::PointSelect => "point-select",
        }
    }
}

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct TxnBenchConfig {
    /// Database directory (emptied first).
    pub dir: PathBuf,
    /// Tables.
    pub tables: usize,
    /// Rows per table.
    pub table_size: u64,
    /// Client counts.
    pub threads: Vec<usize>,
    /// Workloads.
    pub workloads: Vec<TxnWorkload>,
    /// Measured seconds per run.
    pub seconds: f64,
    /// Warm-up seconds per run.
    pub warmup: f64,
    /// Durability of the update transactions.
    pub durability: Durability,
    /// Buffer pool bytes.
    pub pool_bytes: u64,
    /// Injected delay per log sync (slow storage), milliseconds.
    pub fsync_delay_ms: f64,
    /// Run every transaction as an [`quill::OwnedTxn`]
    /// (`Db::begin_owned`, what a server's session holds) instead of a
    /// borrowed [`quill::Txn`], to measure what the owned form costs.
    pub owned: bool,
}

/// One measured run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TxnRow {
    /// Workload name.
    pub workload: String,
    /// Client threads.
    pub threads: usize,
    /// Measured seconds.
    pub seconds: f64,
    /// Transactions completed.
    pub transactions: u64,
    /// Transactions per second.
    pub tps: f64,
    /// Log syncs per committed transaction (0 for reads): the commit
    /// path's, the page cleaner's write-ahead syncs and the syncs made for
    /// a checkpoint slot alone.
    pub fsyncs_per_commit: f64,
    /// Of those, syncs of log data (commits and write-ahead syncs).
    pub commit_syncs_per_commit: f64,
    /// Of those, syncs made for a checkpoint slot alone.
    pub checkpoint_syncs_per_commit: f64,
    /// Not log syncs, reported apart: syncs of the data file and the
    /// doublewrite file (page flushing and checkpoints) per commit.
    #[serde(default)]
    pub data_syncs_per_commit: f64,
    /// Latency percentiles, microseconds.
    pub p50_us: f64,
    /// 95th percentile.
    pub p95_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Maximum.
    pub max_us: f64,
    /// Process CPU microseconds per transaction.
    pub cpu_us_per_txn: f64,
    /// Context switches per transaction.
    pub switches_per_txn: f64,
    /// Retryable failures (deadlock, lock timeout), retried.
    pub retries: u64,
    /// History length at the end of the window.
    pub history_at_end: i64,
    /// Transactions purged during the window.
    pub purged: u64,
}

fn load(db: &Db, cfg: &TxnBenchConfig, tick: &dyn Fn(&str, f64)) -> Result<Vec<Table>> {
    let mut tables = Vec::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let total = (cfg.tables as u64 * cfg.table_size).max(1);
    let mut done = 0u64;
    for i in 1..=cfg.tables {
        let t = db.create_table(sbtest(i))?;
        let mut id = 1u64;
        while id <= cfg.table_size {
            let mut tx = db.begin_with(TxnOptions {
                durability: Durability::Lazy,
                ..TxnOptions::default()
            })?;
            let end = (id + 1000).min(cfg.table_size + 1);
            for r in id..end {
                let k = (rng.next() % cfg.table_size.max(1)) as i32;
                tx.insert(
                    &t,
                    &[
                        Value::Int64(r as i64),
                        Value::Int32(k),
                        Value::Text(rng.text(119)),
                        Value::Text(rng.text(59)),
                    ],
                )?;
            }
            tx.commit()?;
            done += end - id;
            id = end;
            tick("load", done as f64 / total as f64);
        }
        tables.push(t);
    }
    let lsn = db.store().log().end_lsn();
    db.store().commit(lsn, Durability::Sync)?;
    Ok(tables)
}

/// Run every workload at every client count; `tick(stage, fraction)`
/// reports progress and `on_row` each result as it is measured.
pub fn run(
    cfg: &TxnBenchConfig,
    tick: &dyn Fn(&str, f64),
    on_row: &mut dyn FnMut(&TxnRow),
) -> Result<Vec<TxnRow>> {
    if cfg.tables == 0 || cfg.table_size == 0 || cfg.threads.is_empty() {
        return Err(Error::InvalidArgument {
            what: "txn benchmark",
            reason: "needs at least one table, one row and one client count".into(),
        });
    }
    super::fresh_dir(&quill::io::RealFs::new(), &cfg.dir)?;
    let vfs: Arc<dyn quill::io::Vfs> = if cfg.fsync_delay_ms > 0.0 {
        Arc::new(quill::io::RealFs::with_sync_delay(Duration::from_secs_f64(
            cfg.fsync_delay_ms / 1000.0,
        )))
    } else {
        Arc::new(quill::io::RealFs::new())
    };
    let opts = Options {
        store: StoreOptions {
            pool_bytes: cfg.pool_bytes,
            log: quill::log::LogOptions {
                file_size: 1 << 30,
                ..quill::log::LogOptions::default()
            },
            ..StoreOptions::default()
        },
        max_transactions: cfg.threads.iter().copied().max().unwrap_or(1) * 2 + 64,
        ..Options::default()
    };
    let db = Db::open_with(vfs, &cfg.dir, opts)?;
    let tables = load(&db, cfg, tick)?;
    let mut rows = Vec::new();
    for &w in &cfg.workloads {
        for &n in &cfg.threads {
            let row = run_one(&db, &tables, cfg, w, n, tick)?;
            on_row(&row);
            rows.push(row);
            drain_purge(&db);
        }
    }
    db.close()?;
    Ok(rows)
}

fn drain_purge(db: &Db) {
    let until = Instant::now() + Duration::from_secs(30);
    while db.stats().history_length > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_one(
    db: &Db,
    tables: &[Table],
    cfg: &TxnBenchConfig,
    w: TxnWorkload,
    n: usize,
    tick: &dyn Fn(&str, f64),
) -> Result<TxnRow> {
    let retries = AtomicU64::new(0);
    let label = format!("{} x{n}", w.name());
    let opts = TxnOptions {
        durability: cfg.durability,
        ..TxnOptions::default()
    };
    let client = |c: usize| -> Result<_> {
        let mut rng = Rng(0x1234_5678_9ABC_DEF1 ^ ((c as u64 + 1) << 20));
        let retries = &retries;
        Ok(move || -> Result<Option<usize>> {
            let t = tables
                .get(rng.below(tables.len() as u64) as usize)
                .ok_or_else(|| Error::InvalidArgument {
                    what: "table",
                    reason: "none".into(),
                })?;
            let id = rng.below(cfg.table_size) as i64 + 1;
            let r = match w {
                TxnWorkload::UpdateNonIndex => {
                    let c = rng.text(119);
                    let key = [Value::Int64(id)];
                    let change = [(2, Value::Text(c))];
                    if cfg.owned {
                        (|| {
                            let mut tx = db.begin_owned_with(opts)?;
                            tx.update(t, &key, &change)?;
                            tx.commit()
                        })()
                    } else {
                        (|| {
                            let mut tx = db.begin_with(opts)?;
                            tx.update(t, &key, &change)?;
                            tx.commit()
                        })()
                    }
                }
                TxnWorkload::PointSelect if cfg.owned => (|| {
                    let mut tx = db.begin_owned_with(opts)?;
                    let row = tx.get(t, &[Value::Int64(id)])?;
                    std::hint::black_box(row);
                    tx.commit()
                })(),
                TxnWorkload::PointSelect => (|| {
                    let mut tx = db.begin_with(opts)?;
                    let row = tx.get(t, &[Value::Int64(id)])?;
                    std::hint::black_box(row);
                    tx.commit()
                })(),
            };
            match r {
                Ok(()) => Ok(Some(0)),
                Err(e) if e.is_retryable() => {
                    retries.fetch_add(1, Ordering::Relaxed);
                    Ok(None)
                }
                Err(e) => Err(e),
            }
        })
    };
    let plan = Plan {
        clients: n,
        warmup: cfg.warmup,
        seconds: cfg.seconds,
        label: &label,
    };
    let m = window::run(&plan, tick, &client, || {
        (
            usage(),
            db.store().log().stats(),
            data_syncs(db),
            db.stats().commits,
            db.stats().purged_transactions,
        )
    })?;
    let (start_usage, start_log, start_data_syncs, start_commits, start_purged) = m.start;
    let (hist, count) = (m.hist, m.count);
    let end_usage = usage();
    let end_log = db.store().log().stats();
    let end_data_syncs = data_syncs(db);
    let end_commits = db.stats().commits;
    let purged = db.stats().purged_transactions.saturating_sub(start_purged);
    if let Some(e) = db.stats().purge_error {
        tracing::error!(error = %e, "purge stopped");
    }
    let secs = m.seconds;
    let txns = count.max(1) as f64;
    let commits = end_commits.saturating_sub(start_commits);
    // Per committed transaction (0 for read-only runs).
    let per_commit = |n: u64| {
        if commits == 0 {
            0.0
        } else {
            n as f64 / commits as f64
        }
    };
    let log_syncs = end_log.syncs.saturating_sub(start_log.syncs);
    let checkpoints = end_log
        .checkpoint_syncs
        .saturating_sub(start_log.checkpoint_syncs);
    Ok(TxnRow {
        workload: w.name().to_string(),
        threads: n,
        seconds: secs,
        transactions: count,
        tps: count as f64 / secs,
        fsyncs_per_commit: per_commit(log_syncs + checkpoints),
        commit_syncs_per_commit: per_commit(log_syncs),
        checkpoint_syncs_per_commit: per_commit(checkpoints),
        data_syncs_per_commit: per_commit(end_data_syncs.saturating_sub(start_data_syncs)),
        p50_us: hist.value_at_quantile(0.50) as f64,
        p95_us: hist.value_at_quantile(0.95) as f64,
        p99_us: hist.value_at_quantile(0.99) as f64,
        max_us: hist.max() as f64,
        cpu_us_per_txn: (end_usage.cpu_us - start_usage.cpu_us) / txns,
        switches_per_txn: (end_usage.switches - start_usage.switches) / txns,
        retries: retries.load(Ordering::Relaxed),
        history_at_end: db.stats().history_length,
        purged,
    })
}

/// Syncs of the data and doublewrite files so far.
fn data_syncs(db: &Db) -> u64 {
    let pool = db.store().stats().pool;
    pool.data_io.syncs + pool.doublewrite_io.map_or(0, |d| d.syncs)
}

/// Column headings for [`table_line`].
pub fn table_header() -> String {
    format!(
        "{:<17} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8} {:>9}",
        "workload",
        "threads",
        "tps",
        "fsync/c",
        "p50 us",
        "p95 us",
        "p99 us",
        "cpu us/tx",
        "csw/tx",
        "history",
        "purged/s"
    )
}

/// One result as a table line.
pub fn table_line(r: &TxnRow) -> String {
    format!(
        "{:<17} {:>7} {:>10.0} {:>9.4} {:>9.0} {:>9.0} {:>9.0} {:>10.1} {:>9.2} {:>8} {:>9.0}",
        r.workload,
        r.threads,
        r.tps,
        r.fsyncs_per_commit,
        r.p50_us,
        r.p95_us,
        r.p99_us,
        r.cpu_us_per_txn,
        r.switches_per_txn,
        r.history_at_end,
        r.purged as f64 / r.seconds.max(1e-9)
    )
}
