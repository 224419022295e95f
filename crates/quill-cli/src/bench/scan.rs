//! `quill bench scan`: range scans over a tree larger than the buffer
//! pool, read-ahead on and off.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use quill_bench::{self as bench, Machine};

use crate::results::save_json;
use crate::ui::{StageBar, parse_size};

/// Arguments of `quill bench scan`.
#[derive(Args)]
pub struct ScanArgs {
    /// Directory for the database (emptied first).
    #[arg(long, default_value = "quill-bench/scan")]
    dir: PathBuf,
    /// Entries in the tree (8-byte keys in order).
    #[arg(long, default_value_t = 2_000_000)]
    rows: u64,
    /// Value bytes per entry.
    #[arg(long, default_value_t = 120)]
    value_bytes: usize,
    /// Page size (4K to 64K).
    #[arg(long, default_value = "16K", value_parser = parse_size)]
    page_size: u64,
    /// Buffer pool of the timed scans (smaller than the tree, so they
    /// read from disk; the load uses a pool that holds it all).
    #[arg(long, default_value = "64M", value_parser = parse_size)]
    pool: u64,
    /// Rounds: each runs every test with read-ahead on and off.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Range reads in the `ranges` test.
    #[arg(long, default_value_t = 300)]
    ranges: usize,
    /// Entries per range read.
    #[arg(long, default_value_t = 1000)]
    range_rows: u64,
    /// Write results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Run `quill bench scan`.
pub fn run(a: ScanArgs) -> Result<()> {
    let cfg = bench::scan::ScanConfig {
        dir: a.dir.clone(),
        rows: a.rows,
        value_bytes: a.value_bytes,
        page_size: usize::try_from(a.page_size).context("page size")?,
        pool_bytes: a.pool,
        rounds: a.rounds,
        ranges: a.ranges,
        range_rows: a.range_rows,
    };
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let machine = Machine::describe(&a.dir);
    outln!(
        "quill bench scan: {} entries of 8 + {} bytes, {}-byte pages, timed with a {} MiB pool opened cold; {} rounds of forward and backward whole-tree scans, {} reads of {} entries from random keys, and a forward scan of the tree cached in a pool that holds it (cached), read-ahead on and off; {}",
        cfg.rows,
        cfg.value_bytes,
        cfg.page_size,
        cfg.pool_bytes >> 20,
        cfg.rounds,
        cfg.ranges,
        cfg.range_rows,
        machine.place(&a.dir)
    );
    let bar = StageBar::new();
    let pb = &bar.pb;
    let tick = |stage: &str, f: f64| bar.tick(stage, f);
    let rows = bench::scan::run(&cfg, &tick).context("scan benchmark")?;
    pb.finish_and_clear();
    outln!("{}", bench::scan::table_header());
    for r in &rows {
        outln!("{}", bench::scan::table_line(r));
    }
    outln!(
        "seconds: median of {} rounds; MB/s: pages read (demand + ahead) x page size per second; demand: pages a scan waited for (pool misses); ahead: pages read ahead; requests: reads issued to the data file (a read of adjacent pages is one); waits: descents that waited for a busy page (such as one being read ahead)",
        cfg.rounds
    );
    save_json(
        a.json.as_deref(),
        "quill bench scan",
        &machine,
        serde_json::json!({ "config": cfg, "rows": rows }),
    )?;
    Ok(())
}
