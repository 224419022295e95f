//! `quill bench storage`: the storage layer over the B+tree API.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use quill_bench::{self as bench, Machine};

use crate::results::save_json;
use crate::ui::{StageBar, parse_size, say};

/// Arguments of `quill bench storage`.
#[derive(Args)]
pub struct StorageArgs {
    /// Directory for the databases (one subdirectory per workload; each
    /// run starts fresh).
    #[arg(long, default_value = "quill-bench/storage")]
    dir: PathBuf,
    /// Workloads, comma-separated: inorder, random, recovery, stall.
    #[arg(long, value_delimiter = ',', default_value = "inorder,random")]
    workload: Vec<bench::storage::Workload>,
    /// Rows for `inorder`.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Rows for `random`.
    #[arg(long, default_value_t = 2_000_000)]
    random_rows: u64,
    /// Value bytes per row (keys are 8 bytes).
    #[arg(long, default_value_t = 120)]
    value_bytes: usize,
    /// Rows per durable commit.
    #[arg(long, default_value_t = 100)]
    rows_per_commit: u64,
    /// Page size (4K to 64K).
    #[arg(long, default_value = "16K", value_parser = parse_size)]
    page_size: u64,
    /// Buffer pool for inorder, recovery and stall (stall uses an eighth).
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    pool: u64,
    /// Buffer pool for random (small, so the tree outgrows it 10x).
    #[arg(long, default_value = "32M", value_parser = parse_size)]
    random_pool: u64,
    /// Log to replay in `recovery`.
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    recovery_log: u64,
    /// Duration of `stall`, seconds.
    #[arg(long, default_value_t = 600.0)]
    stall_seconds: f64,
    /// Log capacity in `stall`.
    #[arg(long, default_value = "32M", value_parser = parse_size)]
    stall_log: u64,
    /// Keys `stall` upserts over.
    #[arg(long, default_value_t = 1_000_000)]
    stall_keys: u64,
    /// Turn the doublewrite area off.
    #[arg(long)]
    no_doublewrite: bool,
    /// Write results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Run `quill bench storage`.
pub fn run(a: StorageArgs) -> Result<()> {
    let cfg = bench::storage::StorageConfig {
        dir: a.dir.clone(),
        workloads: a.workload,
        rows: a.rows,
        random_rows: a.random_rows,
        value_bytes: a.value_bytes,
        rows_per_commit: a.rows_per_commit.max(1),
        page_size: usize::try_from(a.page_size).context("page size")?,
        pool_bytes: a.pool,
        random_pool_bytes: a.random_pool,
        recovery_log_bytes: a.recovery_log,
        stall_seconds: a.stall_seconds,
        stall_log_bytes: a.stall_log,
        stall_keys: a.stall_keys,
        doublewrite: !a.no_doublewrite,
    };
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let machine = Machine::describe(&a.dir);
    outln!(
        "quill bench storage: workloads {:?}; {}-byte values, 8-byte keys, a durable commit every {} rows; {}-byte pages; doublewrite {}; {}",
        cfg.workloads,
        cfg.value_bytes,
        cfg.rows_per_commit,
        cfg.page_size,
        if cfg.doublewrite { "on" } else { "off" },
        machine.place(&a.dir)
    );
    let bar = StageBar::new();
    let pb = &bar.pb;
    let tick = |w: bench::storage::Workload, f: f64| bar.tick(w.name(), f);
    say(pb, bench::storage::table_header());
    let mut on_row = |r: &bench::storage::StorageRow| {
        say(pb, bench::storage::table_line(r));
    };
    let rows = bench::storage::run(&cfg, &tick, &mut on_row).context("storage benchmark")?;
    pb.finish_and_clear();
    outln!(
        "pgw/1k: data-page writes per 1000 rows (pages flushed at close included); log/dw B/row: redo log and doublewrite bytes per row; reads/row: page reads per row over the last quarter of the rows; p50/p99/max: one commit = {} puts + a durable commit; urgent: flush rounds with the log over 3/4 full",
        cfg.rows_per_commit
    );
    save_json(
        a.json.as_deref(),
        "quill bench storage",
        &machine,
        serde_json::json!({ "config": cfg, "rows": rows }),
    )?;
    Ok(())
}
