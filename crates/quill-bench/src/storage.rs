//! `quill bench storage`: the storage layer's acceptance workloads over
//! the B+tree API on the real file system.
//!
//! * `inorder`: N rows in key order (u64 big-endian keys, random values),
//!   a durable commit every `rows_per_commit` rows.
//! * `random`: N rows at random keys into a tree that grows to many times
//!   the buffer pool; page reads per insert are measured over the last
//!   quarter of the rows, when the tree is largest.
//! * `recovery`: write about `recovery_log_bytes` of log with checkpoints
//!   held back (no cleaner), stop without flushing (as a killed process
//!   would), reopen, and time recovery.
//! * `stall`: random upserts over a fixed key space for `stall_seconds`
//!   with a small log, so checkpoints are constant; reports the longest
//!   commit (put batch + durable commit) and the flushing counters.
//!
//! Every workload starts from a fresh database in `dir/<workload>`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, RngExt, SeedableRng, rngs::SmallRng};
use serde::Serialize;

use quill::btree::Tree;
use quill::io::{RealFs, Vfs};
use quill::log::{Durability, LogOptions};
use quill::store::{Store, StoreOptions, StoreStats};
use quill::{Error, Result};

/// One workload of the storage benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Inserts in key order.
    Inorder,
    /// Inserts at random keys into a tree larger than the pool.
    Random,
    /// Recovery time after a crash with a long log to replay.
    Recovery,
    /// A long run with a small log: commit stalls and urgent flushes.
    Stall,
}

impl Workload {
    /// The lower-case name used on the command line, in directory names
    /// and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Inorder => "inorder",
            Workload::Random => "random",
            Workload::Recovery => "recovery",
            Workload::Stall => "stall",
        }
    }
}

impl std::str::FromStr for Workload {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "inorder" => Workload::Inorder,
            "random" => Workload::Random,
            "recovery" => Workload::Recovery,
            "stall" => Workload::Stall,
            other => {
                return Err(Error::InvalidArgument {
                    what: "workload",
                    reason: format!(
                        "unknown workload {other:?}; expected inorder, random, recovery or stall"
                    ),
                });
            }
        })
    }
}

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct StorageConfig {
    /// Directory for the databases (one subdirectory per workload).
    pub dir: PathBuf,
    /// Workloads, in order.
    pub workloads: Vec<Workload>,
    /// Rows for `inorder`.
    pub rows: u64,
    /// Rows for `random`.
    pub random_rows: u64,
    /// Value bytes per row (keys are 8 bytes).
    pub value_bytes: usize,
    /// Rows per durable commit.
    pub rows_per_commit: u64,
    /// Page size.
    pub page_size: usize,
    /// Buffer pool for `inorder`, `stall` and `recovery`.
    pub pool_bytes: u64,
    /// Buffer pool for `random` (small, so the tree outgrows it).
    pub random_pool_bytes: u64,
    /// Log to replay in `recovery`.
    pub recovery_log_bytes: u64,
    /// Duration of `stall`.
    pub stall_seconds: f64,
    /// Log capacity for `stall` (small, so checkpoints are constant).
    pub stall_log_bytes: u64,
    /// Keys `stall` upserts over.
    pub stall_keys: u64,
    /// Doublewrite on.
    pub doublewrite: bool,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            dir: PathBuf::from("quill-bench/storage"),
            workloads: vec![Workload::Inorder, Workload::Random],
            rows: 1_000_000,
            random_rows: 2_000_000,
            value_bytes: 120,
            rows_per_commit: 100,
            page_size: quill::page::DEFAULT_PAGE_SIZE,
            pool_bytes: 1 << 30,
            random_pool_bytes: 32 << 20,
            recovery_log_bytes: 1 << 30,
            stall_seconds: 600.0,
            stall_log_bytes: 32 << 20,
            stall_keys: 1_000_000,
            doublewrite: true,
        }
    }
}

/// What one workload measured.
#[derive(Clone, Debug, Serialize)]
pub struct StorageRow {
    /// Which workload.
    pub workload: Workload,
    /// Rows written.
    pub rows: u64,
    /// Bytes of key + value per row.
    pub row_bytes: u64,
    /// Wall time of the writes, seconds.
    pub seconds: f64,
    /// Rows per second.
    pub rows_per_s: f64,
    /// Data-page writes per 1000 rows (including pages flushed at close).
    pub page_writes_per_1000_rows: f64,
    /// Redo log bytes per row.
    pub log_bytes_per_row: f64,
    /// Doublewrite bytes per row.
    pub doublewrite_bytes_per_row: f64,
    /// Data-page bytes per row.
    pub data_bytes_per_row: f64,
    /// Page reads (pool misses) per row over the measured window.
    pub page_reads_per_row: f64,
    /// Rows in that window.
    pub read_window_rows: u64,
    /// Commit latency (a batch of puts + its durable commit), microseconds.
    pub commit_p50_us: f64,
    /// 99th percentile.
    pub commit_p99_us: f64,
    /// Longest.
    pub commit_max_us: f64,
    /// Durable commits made.
    pub commits: u64,
    /// Urgent flush rounds (log over 3/4 full).
    pub urgent_flushes: u64,
    /// Writers throttled for log space.
    pub throttled: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Recovery figures (`recovery` only).
    pub recovery: Option<RecoveryFigures>,
    /// Store statistics at the end of the run.
    pub stats: StoreStats,
}

/// Recovery time and volume.
#[derive(Clone, Debug, Serialize)]
pub struct RecoveryFigures {
    /// Log bytes between checkpoint and end at the crash.
    pub log_bytes: u64,
    /// Records replayed.
    pub records: u64,
    /// Page changes applied.
    pub page_changes: u64,
    /// Seconds recovery took (log scan, replay, doublewrite check).
    pub seconds: f64,
    /// Records replayed per second.
    pub records_per_s: f64,
    /// Log megabytes replayed per second.
    pub mb_per_s: f64,
}

fn fresh_dir(cfg: &StorageConfig, w: Workload) -> Result<PathBuf> {
    let vfs = RealFs::new();
    super::claim_dir(&vfs, &cfg.dir)?;
    let dir = cfg.dir.join(w.name());
    vfs.remove_dir_all(&dir)?;
    Ok(dir)
}

fn store_opts(cfg: &StorageConfig, pool: u64, log_bytes: u64, cleaner: bool) -> StoreOptions {
    let files = 4u32;
    let file_size = (log_bytes / u64::from(files))
        .max(1 << 20)
        .next_multiple_of(1 << 20);
    StoreOptions {
        page_size: cfg.page_size,
        pool_bytes: pool,
        doublewrite: cfg.doublewrite,
        cleaner,
        log: LogOptions {
            file_size,
            file_count: files,
            ..LogOptions::default()
        },
        ..StoreOptions::default()
    }
}

/// Latency samples in microseconds, summarised.
#[derive(Default)]
struct Lat(Vec<u64>);

impl Lat {
    fn push(&mut self, since: Instant) {
        self.0.push(since.elapsed().as_micros() as u64);
    }
    fn q(&self, q: f64) -> f64 {
        let mut v = self.0.clone();
        v.sort_unstable();
        super::quantile(&v, q) as f64
    }
    fn max(&self) -> f64 {
        self.0.iter().copied().max().unwrap_or(0) as f64
    }
}

struct Counts {
    log_bytes: u64,
    dw_bytes: u64,
    data_bytes: u64,
    data_writes: u64,
}

fn counts(s: &StoreStats) -> Counts {
    Counts {
        log_bytes: s.log.end_lsn,
        dw_bytes: s.pool.doublewrite_io.as_ref().map_or(0, |d| d.write_bytes),
        data_bytes: s.pool.data_io.write_bytes,
        data_writes: s.pool.data_io.writes,
    }
}

/// Run the configured workloads; `progress` gets (workload, fraction done).
pub fn run(
    cfg: &StorageConfig,
    progress: &dyn Fn(Workload, f64),
    on_row: &mut dyn FnMut(&StorageRow),
) -> Result<Vec<StorageRow>> {
    let mut rows = Vec::new();
    for &w in &cfg.workloads {
        let row = match w {
            Workload::Inorder | Workload::Random => inserts(cfg, w, progress)?,
            Workload::Recovery => recovery(cfg, progress)?,
            Workload::Stall => stall(cfg, progress)?,
        };
        on_row(&row);
        rows.push(row);
    }
    Ok(rows)
}

fn value(rng: &mut SmallRng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill_bytes(&mut v);
    v
}

#[allow(clippy::too_many_arguments)]
fn finish_row(
    w: Workload,
    rows: u64,
    cfg: &StorageConfig,
    seconds: f64,
    store: Store,
    start: &Counts,
    window: (u64, u64),
    lat: &Lat,
    recovery: Option<RecoveryFigures>,
) -> Result<StorageRow> {
    let before_close = store.stats();
    store.close()?;
    // Close flushed the rest; the saved statistics include it.
    let stats = read_saved(&cfg.dir.join(w.name())).unwrap_or(before_close);
    let end = counts(&stats);
    let r = rows.max(1) as f64;
    Ok(StorageRow {
        workload: w,
        rows,
        row_bytes: 8 + cfg.value_bytes as u64,
        seconds,
        rows_per_s: rows as f64 / seconds.max(1e-9),
        page_writes_per_1000_rows: (end.data_writes - start.data_writes) as f64 * 1000.0 / r,
        log_bytes_per_row: (end.log_bytes - start.log_bytes) as f64 / r,
        doublewrite_bytes_per_row: (end.dw_bytes - start.dw_bytes) as f64 / r,
        data_bytes_per_row: (end.data_bytes - start.data_bytes) as f64 / r,
        page_reads_per_row: window.0 as f64 / window.1.max(1) as f64,
        read_window_rows: window.1,
        commit_p50_us: lat.q(0.5),
        commit_p99_us: lat.q(0.99),
        commit_max_us: lat.max(),
        commits: lat.0.len() as u64,
        urgent_flushes: stats.urgent_flushes,
        throttled: stats.throttled,
        checkpoints: stats.checkpoints,
        recovery,
        stats,
    })
}

fn read_saved(dir: &std::path::Path) -> Option<StoreStats> {
    let text = std::fs::read(dir.join(quill::store::STORE_STATS_FILE)).ok()?;
    serde_json::from_slice(&text).ok()
}

fn inserts(
    cfg: &StorageConfig,
    w: Workload,
    progress: &dyn Fn(Workload, f64),
) -> Result<StorageRow> {
    let dir = fresh_dir(cfg, w)?;
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs::new());
    let (n, pool) = match w {
        Workload::Inorder => (cfg.rows, cfg.pool_bytes),
        _ => (cfg.random_rows, cfg.random_pool_bytes),
    };
    let store = Store::create(vfs, &dir, store_opts(cfg, pool, 1 << 30, true))?;
    let tree = Tree::create(&store)?;
    let mut rng = SmallRng::seed_from_u64(42);
    let start = counts(&store.stats());
    let mut lat = Lat::default();
    let window_from = n - n / 4;
    let mut window_misses = 0;
    let t0 = Instant::now();
    let mut batch_start = Instant::now();
    for i in 0..n {
        if i == window_from {
            window_misses = store.stats().pool.misses;
        }
        let key = match w {
            Workload::Inorder => i.to_be_bytes(),
            _ => rng.random::<u64>().to_be_bytes(),
        };
        let v = value(&mut rng, cfg.value_bytes);
        let lsn = tree.put(&key, &v)?;
        if (i + 1) % cfg.rows_per_commit == 0 || i + 1 == n {
            store.commit(lsn, Durability::Sync)?;
            lat.push(batch_start);
            batch_start = Instant::now();
            if (i + 1) % 10_000 == 0 {
                progress(w, (i + 1) as f64 / n as f64);
            }
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let window = (store.stats().pool.misses - window_misses, n - window_from);
    finish_row(w, n, cfg, seconds, store, &start, window, &lat, None)
}

fn recovery(cfg: &StorageConfig, progress: &dyn Fn(Workload, f64)) -> Result<StorageRow> {
    let w = Workload::Recovery;
    let dir = fresh_dir(cfg, w)?;
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs::new());
    // Capacity a third above the target so the writer is never throttled
    // (throttling would checkpoint).
    let log_bytes = cfg.recovery_log_bytes / 3 * 4 + (64 << 20);
    let opts = store_opts(cfg, cfg.pool_bytes, log_bytes, false);
    let store = Store::create(vfs.clone(), &dir, opts.clone())?;
    let tree = Tree::create(&store)?;
    let root = tree.root();
    store.flush_all()?; // checkpoint after creation: replay starts here
    let start = counts(&store.stats());
    let cp = store.log().checkpoint_lsn().0;
    let mut rng = SmallRng::seed_from_u64(7);
    let t0 = Instant::now();
    let mut rows = 0u64;
    let mut lat = Lat::default();
    let mut batch_start = Instant::now();
    while store.log().end_lsn().0 - cp < cfg.recovery_log_bytes {
        let mut last = None;
        for _ in 0..cfg.rows_per_commit {
            // Mostly in order, some updates of earlier keys.
            let k = if rows > 0 && rng.random_bool(0.2) {
                rng.random_range(0..rows)
            } else {
                rows
            };
            let v = value(&mut rng, cfg.value_bytes);
            last = Some(tree.put(&k.to_be_bytes(), &v)?);
            rows += 1;
        }
        if let Some(lsn) = last {
            store.commit(lsn, Durability::Sync)?;
        }
        lat.push(batch_start);
        batch_start = Instant::now();
        progress(
            w,
            (store.log().end_lsn().0 - cp) as f64 / cfg.recovery_log_bytes as f64,
        );
    }
    let seconds = t0.elapsed().as_secs_f64();
    let log_span = store.log().end_lsn().0 - store.log().checkpoint_lsn().0;
    // The crash: stop without flushing pages or checkpointing (every
    // commit above is durable in the log already).
    drop(store);
    let t = Instant::now();
    let store = Store::open(vfs, &dir, opts)?;
    let secs = t.elapsed().as_secs_f64();
    let rec = store.recovery().cloned().ok_or(Error::InvalidArgument {
        what: "recovery",
        reason: "reopen reported no recovery".into(),
    })?;
    let check = Tree::open(&store, root).verify()?;
    tracing::info!(entries = check.entries, "recovered tree verified");
    let figures = RecoveryFigures {
        log_bytes: log_span,
        records: rec.records_applied,
        page_changes: rec.page_changes,
        seconds: secs,
        records_per_s: rec.records_applied as f64 / secs.max(1e-9),
        mb_per_s: log_span as f64 / 1e6 / secs.max(1e-9),
    };
    finish_row(
        w,
        rows,
        cfg,
        seconds,
        store,
        &start,
        (0, 0),
        &lat,
        Some(figures),
    )
}

fn stall(cfg: &StorageConfig, progress: &dyn Fn(Workload, f64)) -> Result<StorageRow> {
    let w = Workload::Stall;
    let dir = fresh_dir(cfg, w)?;
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs::new());
    let store = Store::create(
        vfs,
        &dir,
        store_opts(cfg, cfg.pool_bytes / 8, cfg.stall_log_bytes, true),
    )?;
    let tree = Tree::create(&store)?;
    let mut rng = SmallRng::seed_from_u64(9);
    let start = counts(&store.stats());
    let mut lat = Lat::default();
    let t0 = Instant::now();
    let limit = Duration::from_secs_f64(cfg.stall_seconds);
    let mut rows = 0u64;
    while t0.elapsed() < limit {
        let b = Instant::now();
        let mut last = None;
        for _ in 0..cfg.rows_per_commit {
            let k = rng.random_range(0..cfg.stall_keys);
            let v = value(&mut rng, cfg.value_bytes);
            last = Some(tree.put(&k.to_be_bytes(), &v)?);
            rows += 1;
        }
        if let Some(lsn) = last {
            store.commit(lsn, Durability::Sync)?;
        }
        lat.push(b);
        if lat.0.len() % 100 == 0 {
            progress(w, t0.elapsed().as_secs_f64() / cfg.stall_seconds);
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    finish_row(w, rows, cfg, seconds, store, &start, (0, 0), &lat, None)
}

/// Header of the printed table.
pub fn table_header() -> String {
    format!(
        "{:<9} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "workload",
        "rows",
        "rows/s",
        "pgw/1k",
        "log B/row",
        "dw B/row",
        "reads/row",
        "p50 us",
        "p99 us",
        "max us",
        "urgent",
        "ckpts"
    )
}

/// One printed line.
pub fn table_line(r: &StorageRow) -> String {
    let mut s = format!(
        "{:<9} {:>9} {:>10.0} {:>9.2} {:>9.1} {:>9.1} {:>9.3} {:>9.0} {:>9.0} {:>9.0} {:>8} {:>8}",
        r.workload.name(),
        r.rows,
        r.rows_per_s,
        r.page_writes_per_1000_rows,
        r.log_bytes_per_row,
        r.doublewrite_bytes_per_row,
        r.page_reads_per_row,
        r.commit_p50_us,
        r.commit_p99_us,
        r.commit_max_us,
        r.urgent_flushes,
        r.checkpoints
    );
    if let Some(rec) = &r.recovery {
        s.push_str(&format!(
            "\n          recovery: {:.1} MB of log, {} records, {} page changes in {:.2} s ({:.0} records/s, {:.0} MB/s)",
            rec.log_bytes as f64 / 1e6,
            rec.records,
            rec.page_changes,
            rec.seconds,
            rec.records_per_s,
            rec.mb_per_s
        ));
    }
    s
}
