//! `quill bench scan`: range scans over a tree larger than the buffer
//! pool, with read-ahead on and off in one run.
//!
//! A tree of `rows` entries (8-byte keys in order, `value_bytes` random
//! bytes each) is loaded once with a large pool and closed. Then, for
//! each round, each mode (read-ahead on, off; the order alternates from
//! round to round so a slow stretch of the host falls on both) and each
//! test, the store is opened afresh with a pool of `pool_bytes` (data
//! pages are read with direct I/O, so nothing is cached at open) and
//! timed:
//!
//! * `forward` / `backward`: the whole tree in key order / reverse.
//! * `ranges`: `ranges` forward reads of the `range_rows` keys from a key
//!   chosen at random (a bounded range, as `WHERE id BETWEEN a AND b`;
//!   the same keys in every round and mode).
//! * `cached`: the whole tree forward from a pool that holds it, after an
//!   untimed scan has read it in: what a scan costs with no read at all,
//!   the ceiling the cold scans approach.
//!
//! Reported per mode and test: the median over rounds of the time, rows
//! per second, and megabytes of pages read per second (demand reads plus
//! pages read ahead, times the page size), with the pool's counters of
//! the median round.

use std::ops::Bound;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use rand::{Rng, RngExt, SeedableRng, rngs::SmallRng};
use serde::Serialize;

use quill::btree::{Direction, Tree};
use quill::io::{RealFs, Vfs};
use quill::log::{Durability, LogOptions};
use quill::page::PageId;
use quill::store::{Store, StoreOptions};
use quill::{Error, Result};

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct ScanConfig {
    /// Directory for the database (emptied first).
    pub dir: PathBuf,
    /// Entries in the tree.
    pub rows: u64,
    /// Value bytes per entry (keys are 8 bytes).
    pub value_bytes: usize,
    /// Page size.
    pub page_size: usize,
    /// Buffer pool of the timed opens (smaller than the tree).
    pub pool_bytes: u64,
    /// Rounds (each runs every mode and test once).
    pub rounds: usize,
    /// Range reads in `ranges`.
    pub ranges: usize,
    /// Entries per range read.
    pub range_rows: u64,
}

impl Default for ScanConfig {
    fn default() -> Self {
        ScanConfig {
            dir: PathBuf::from("quill-bench/scan"),
            rows: 2_000_000,
            value_bytes: 120,
            page_size: quill::page::DEFAULT_PAGE_SIZE,
            pool_bytes: 64 << 20,
            rounds: 3,
            ranges: 300,
            range_rows: 1000,
        }
    }
}

/// One test in one mode: the median round.
#[derive(Clone, Debug, Serialize)]
pub struct ScanRow {
    /// `forward`, `backward` or `ranges`.
    pub test: String,
    /// Read-ahead on.
    pub read_ahead: bool,
    /// Entries read.
    pub rows: u64,
    /// Median seconds over the rounds.
    pub seconds: f64,
    /// Each round's seconds, in round order.
    pub round_seconds: Vec<f64>,
    /// Entries per second (median round).
    pub rows_per_s: f64,
    /// Megabytes (10^6 bytes) of pages read per second (median round).
    pub mb_per_s: f64,
    /// Pages a reader waited for (pool misses; median round).
    pub demand_reads: u64,
    /// Pages read ahead (median round).
    pub read_ahead_pages: u64,
    /// Read requests to the data file, demand and ahead (median round):
    /// a read of several adjacent pages is one.
    pub read_requests: u64,
    /// Descents that waited for a busy page, such as one being read
    /// ahead (median round).
    pub busy_waits: u64,
}

/// One timed scan.
struct Sample {
    seconds: f64,
    rows: u64,
    misses: u64,
    read_ahead: u64,
    read_requests: u64,
    busy_waits: u64,
}

const TESTS: [&str; 4] = ["forward", "backward", "ranges", "cached"];

/// Load the tree, then run every round; `progress` gets (stage, fraction).
pub fn run(cfg: &ScanConfig, progress: &dyn Fn(&str, f64)) -> Result<Vec<ScanRow>> {
    if cfg.rows == 0 || cfg.rounds == 0 || cfg.range_rows == 0 {
        return Err(Error::InvalidArgument {
            what: "scan benchmark",
            reason: "needs at least one row, one round and one row per range".into(),
        });
    }
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs::new());
    super::claim_dir(vfs.as_ref(), &cfg.dir)?;
    let dir = cfg.dir.join("db");
    vfs.remove_dir_all(&dir)?;
    let root = load(cfg, &vfs, &dir, progress)?;
    let mut rng = SmallRng::seed_from_u64(5);
    let starts: Vec<u64> = (0..cfg.ranges)
        .map(|_| rng.random_range(0..cfg.rows))
        .collect();
    // samples[mode][test]: mode 0 is read-ahead on.
    let mut samples: Vec<Vec<Vec<Sample>>> = (0..2)
        .map(|_| (0..TESTS.len()).map(|_| Vec::new()).collect())
        .collect();
    let steps = (cfg.rounds * 2 * TESTS.len()) as f64;
    let mut done = 0.0;
    for round in 0..cfg.rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for mode in order {
            for (t, test) in TESTS.iter().enumerate() {
                progress(test, done / steps);
                let s = timed(cfg, &vfs, &dir, root, mode == 0, test, &starts)?;
                if let Some(v) = samples.get_mut(mode).and_then(|m| m.get_mut(t)) {
                    v.push(s);
                }
                done += 1.0;
            }
        }
    }
    let mut rows = Vec::new();
    for (mode, per_test) in samples.into_iter().enumerate() {
        for (test, mut v) in TESTS.iter().zip(per_test) {
            let round_seconds: Vec<f64> = v.iter().map(|s| s.seconds).collect();
            v.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
            let Some(m) = v.get(v.len() / 2) else {
                continue;
            };
            let pages = (m.misses + m.read_ahead) as f64;
            rows.push(ScanRow {
                test: test.to_string(),
                read_ahead: mode == 0,
                rows: m.rows,
                seconds: m.seconds,
                round_seconds,
                rows_per_s: m.rows as f64 / m.seconds.max(1e-9),
                mb_per_s: pages * cfg.page_size as f64 / 1e6 / m.seconds.max(1e-9),
                demand_reads: m.misses,
                read_ahead_pages: m.read_ahead,
                read_requests: m.read_requests,
                busy_waits: m.busy_waits,
            });
        }
    }
    Ok(rows)
}

fn options(cfg: &ScanConfig, pool: u64, read_ahead: bool) -> StoreOptions {
    StoreOptions {
        page_size: cfg.page_size,
        pool_bytes: pool,
        read_ahead,
        log: LogOptions {
            file_size: 64 << 20,
            file_count: 4,
            ..LogOptions::default()
        },
        ..StoreOptions::default()
    }
}

/// A pool that holds the whole tree.
fn whole_pool(cfg: &ScanConfig) -> u64 {
    (cfg.rows * (cfg.value_bytes as u64 + 40)).max(64 << 20) * 2
}

fn load(
    cfg: &ScanConfig,
    vfs: &Arc<dyn Vfs>,
    dir: &std::path::Path,
    progress: &dyn Fn(&str, f64),
) -> Result<PageId> {
    let store = Store::create(vfs.clone(), dir, options(cfg, whole_pool(cfg), true))?;
    let tree = Tree::create(&store)?;
    let mut rng = SmallRng::seed_from_u64(42);
    let mut v = vec![0u8; cfg.value_bytes];
    for i in 0..cfg.rows {
        rng.fill_bytes(&mut v);
        let lsn = tree.put(&i.to_be_bytes(), &v)?;
        if (i + 1) % 10_000 == 0 || i + 1 == cfg.rows {
            store.commit(lsn, Durability::Sync)?;
            progress("load", (i + 1) as f64 / cfg.rows as f64);
        }
    }
    let root = tree.root();
    store.close()?;
    Ok(root)
}

fn timed(
    cfg: &ScanConfig,
    vfs: &Arc<dyn Vfs>,
    dir: &std::path::Path,
    root: PageId,
    read_ahead: bool,
    test: &str,
    starts: &[u64],
) -> Result<Sample> {
    let pool = if test == "cached" {
        whole_pool(cfg)
    } else {
        cfg.pool_bytes
    };
    let store = Store::open(vfs.clone(), dir, options(cfg, pool, read_ahead))?;
    let tree = Tree::open(&store, root);
    let mut bytes = 0usize;
    // Entries read from `lo` to `hi`.
    let mut read = |lo: Bound<&[u8]>, hi: Bound<&[u8]>, dir: Direction| -> Result<u64> {
        let mut c = tree.range(lo, hi, dir);
        let mut rows = 0u64;
        while let Some(e) = c.next_entry() {
            let (k, v) = e?;
            bytes = bytes.wrapping_add(k.len() + v.len());
            rows += 1;
        }
        Ok(rows)
    };
    if test == "cached" {
        // Untimed: read the tree into the pool.
        read(Bound::Unbounded, Bound::Unbounded, Direction::Forward)?;
    }
    let before = store.stats().pool;
    let t = Instant::now();
    let mut rows = 0u64;
    match test {
        "forward" | "cached" => {
            rows += read(Bound::Unbounded, Bound::Unbounded, Direction::Forward)?
        }
        "backward" => rows += read(Bound::Unbounded, Bound::Unbounded, Direction::Backward)?,
        _ => {
            for &s in starts {
                let end = s.saturating_add(cfg.range_rows);
                rows += read(
                    Bound::Included(&s.to_be_bytes()),
                    Bound::Excluded(&end.to_be_bytes()),
                    Direction::Forward,
                )?;
            }
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    std::hint::black_box(bytes);
    let after = store.stats().pool;
    store.close()?;
    Ok(Sample {
        seconds,
        rows,
        misses: after.misses - before.misses,
        read_ahead: after.read_ahead - before.read_ahead,
        read_requests: after.data_io.read_requests - before.data_io.read_requests,
        busy_waits: after.busy_waits - before.busy_waits,
    })
}

/// Header of the printed table.
pub fn table_header() -> String {
    format!(
        "{:<9} {:<10} {:>10} {:>9} {:>11} {:>8} {:>10} {:>10} {:>9} {:>8}",
        "test",
        "read-ahead",
        "rows",
        "seconds",
        "rows/s",
        "MB/s",
        "demand",
        "ahead",
        "requests",
        "waits"
    )
}

/// One printed line.
pub fn table_line(r: &ScanRow) -> String {
    format!(
        "{:<9} {:<10} {:>10} {:>9.3} {:>11.0} {:>8.1} {:>10} {:>10} {:>9} {:>8}",
        r.test,
        if r.read_ahead { "on" } else { "off" },
        r.rows,
        r.seconds,
        r.rows_per_s,
        r.mb_per_s,
        r.demand_reads,
        r.read_ahead_pages,
        r.read_requests,
        r.busy_waits
    )
}
