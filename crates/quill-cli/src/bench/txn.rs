//! `quill bench txn`: transactions through the embedded API in
//! sysbench's shapes.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use quill_bench::{self as bench, Machine};

use crate::results::save_json;
use crate::ui::{StageBar, parse_size, say};
use std::path::Path;

use super::SysbenchTables;

/// Arguments of `quill bench txn`.
#[derive(Args)]
pub struct TxnArgs {
    /// Database directory (emptied first).
    #[arg(long, default_value = "quill-bench/txn")]
    dir: PathBuf,
    #[command(flatten)]
    sysbench: SysbenchTables,
    /// Client thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64,256")]
    threads: Vec<usize>,
    /// Workloads, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "update-non-index,point-select"
    )]
    workload: Vec<bench::txn::TxnWorkload>,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Warm-up seconds per run.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Commit durability: sync (durable), write or lazy.
    #[arg(long, default_value = "sync")]
    durability: String,
    /// Buffer pool.
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    pool: u64,
    /// Injected delay per log sync, milliseconds (slow storage).
    #[arg(long, default_value_t = 0.0)]
    fsync_delay_ms: f64,
    /// Run each transaction as an owned transaction (`Db::begin_owned`,
    /// what a server's session holds) instead of a borrowed one.
    #[arg(long)]
    owned: bool,
    /// Write results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Run `quill bench txn`.
pub fn run(a: TxnArgs) -> Result<()> {
    let durability = match a.durability.as_str() {
        "sync" => quill::Durability::Sync,
        "write" => quill::Durability::Write,
        "lazy" => quill::Durability::Lazy,
        other => anyhow::bail!("--durability must be sync, write or lazy, not {other}"),
    };
    let cfg = bench::txn::TxnBenchConfig {
        dir: a.dir.clone(),
        tables: a.sysbench.tables,
        table_size: a.sysbench.table_size,
        threads: a.threads,
        workloads: a.workload,
        seconds: a.seconds,
        warmup: a.warmup,
        durability,
        pool_bytes: a.pool,
        fsync_delay_ms: a.fsync_delay_ms,
        owned: a.owned,
    };
    if let Some(parent) = a.dir.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let machine = Machine::describe(a.dir.parent().unwrap_or(Path::new(".")));
    outln!(
        "quill bench txn: {:?} at {:?} clients; {} tables x {} rows; {} transactions, {:?} commits; {} s measured after {} s warm-up; sync delay {} ms; {}",
        cfg.workloads.iter().map(|w| w.name()).collect::<Vec<_>>(),
        cfg.threads,
        cfg.tables,
        cfg.table_size,
        if cfg.owned { "owned" } else { "borrowed" },
        cfg.durability,
        cfg.seconds,
        cfg.warmup,
        cfg.fsync_delay_ms,
        machine.place(&a.dir)
    );
    let bar = StageBar::new();
    let pb = &bar.pb;
    let tick = |stage: &str, f: f64| bar.tick(stage, f);
    say(pb, bench::txn::table_header());
    let mut on_row = |r: &bench::txn::TxnRow| say(pb, bench::txn::table_line(r));
    let rows = bench::txn::run(&cfg, &tick, &mut on_row).context("txn benchmark")?;
    pb.finish_and_clear();
    outln!(
        "tps: transactions per second; fsync/c: log syncs per committed transaction (commits, write-ahead syncs, checkpoint slots; data-file syncs are in the JSON as data_syncs_per_commit); p50/p95/p99: begin to commit return; cpu us/tx and csw/tx: getrusage deltas of the whole process per transaction; history: unpurged transactions at the end of the window"
    );
    save_json(
        a.json.as_deref(),
        "quill bench txn",
        &machine,
        serde_json::json!({ "config": cfg, "rows": rows }),
    )?;
    Ok(())
}
