//! `quill bench insert`: the Insert Benchmark, Quill beside its peers.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use quill_bench::{self as bench, Machine};

use crate::results::save_json;
use crate::ui::{StageBar, parse_size, say};
use quill::io::RealFs;

use super::{PeerArgs, engine_info};

/// Arguments of `quill bench insert`.
#[derive(Args)]
pub struct InsertArgs {
    /// Database directory (emptied first; each engine and configuration
    /// gets a subdirectory, removed after its run unless --keep).
    #[arg(long, default_value = "quill-bench/insert")]
    dir: PathBuf,
    /// Keep each engine's database after its run, for `quill status`,
    /// `quill dump --summary` or `quill check` (Quill's) to look at.
    #[arg(long)]
    keep: bool,
    #[command(flatten)]
    peers: PeerArgs,
    /// Client counts, comma-separated (one table per client).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    clients: Vec<usize>,
    /// Rows all tables hold together after l.i0: each table gets this
    /// divided by the client count (the seeds' cached database: 2M at 1
    /// client, 500k per table at 4).
    #[arg(long, default_value_t = 2_000_000)]
    total_rows: u64,
    /// Rows per table instead of --total-rows.
    #[arg(long)]
    rows_per_table: Option<u64>,
    /// Steps, comma-separated: l.i0, l.x, l.i1, l.i2, qrN, qpN (N rows/s of
    /// background inserts per client).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "l.i0,l.x,l.i1,l.i2,qr100,qp100"
    )]
    steps: Vec<bench::insert::Step>,
    /// Transaction sizes, comma-separated: big (100 rows per commit in
    /// l.i0, 50 in l.i1, 5 in l.i2) and small (10, 5, 5).
    #[arg(long, value_delimiter = ',', default_value = "big")]
    txn_sizes: Vec<bench::insert::TxnSize>,
    /// Rows per commit of every insert step, overriding --txn-sizes.
    #[arg(long)]
    rows_per_commit: Option<u64>,
    /// Measured seconds of l.i1, l.i2 and each query step.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Warm-up seconds before each measured window.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Cache: Quill's buffer pool, RocksDB's block cache, SQLite's memory
    /// map (and, split over the clients, its connections' page caches).
    #[arg(long, default_value = "2G", value_parser = parse_size)]
    pool: u64,
    /// Write results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Run `quill bench insert`.
pub fn run(a: InsertArgs) -> Result<()> {
    if a.clients.is_empty() || a.clients.contains(&0) {
        anyhow::bail!("--clients: each count must be at least 1");
    }
    bench::fresh_dir(&RealFs::new(), &a.dir)?;
    let machine = Machine::describe(&a.dir);
    outln!(
        "quill bench insert: steps {:?} on {:?}; {:?} clients; {} rows per table; transactions {:?}; durable commits; {} s windows after {} s warm-up; {}",
        a.steps.iter().map(|s| s.name()).collect::<Vec<_>>(),
        a.peers.engines,
        a.clients,
        a.rows_per_table
            .map_or(format!("{} / clients", a.total_rows), |r| r.to_string()),
        a.txn_sizes.iter().map(|t| t.name()).collect::<Vec<_>>(),
        a.seconds,
        a.warmup,
        machine.place(&a.dir)
    );
    let bar = StageBar::new();
    let pb = &bar.pb;
    let tick = |stage: &str, f: f64| bar.tick(stage, f);
    say(pb, bench::insert::table_header());
    let mut rows = Vec::new();
    let mut engines = Vec::new();
    let mut configs = Vec::new();
    for &txn_size in &a.txn_sizes {
        for &clients in &a.clients {
            let cfg = bench::insert::InsertConfig {
                clients,
                rows: a
                    .rows_per_table
                    .unwrap_or(a.total_rows / clients as u64)
                    .max(1),
                steps: a.steps.clone(),
                txn_size,
                rows_per_commit: a.rows_per_commit,
                seconds: a.seconds,
                warmup: a.warmup,
            };
            let setup = a.peers.setup(a.pool, clients * 3);
            for name in &a.peers.engines {
                let dir = a.dir.join(format!("{name}-{}-{clients}", txn_size.name()));
                let engine = bench::engine::open(name, &dir, &setup)
                    .with_context(|| format!("opening {name} in {}", dir.display()))?;
                // Once per engine and setup: a peer's settings depend on
                // the number of clients (SQLite's page cache per connection).
                let info = engine_info(engine.as_ref(), &setup);
                if !engines.contains(&info) {
                    say(
                        pb,
                        format!("{name}: {}", info["note"].as_str().unwrap_or_default()),
                    );
                    engines.push(info);
                }
                let mut on_row =
                    |r: &bench::insert::InsertRow| say(pb, bench::insert::table_line(r));
                rows.extend(
                    bench::insert::run(engine.as_ref(), &cfg, &tick, &mut on_row).with_context(
                        || {
                            format!(
                                "{name}, {} transactions, {clients} clients",
                                txn_size.name()
                            )
                        },
                    )?,
                );
                engine.close().with_context(|| format!("closing {name}"))?;
                if !a.keep {
                    std::fs::remove_dir_all(&dir)
                        .with_context(|| format!("removing {}", dir.display()))?;
                }
            }
            configs.push(cfg);
        }
    }
    pb.finish_and_clear();
    outln!(
        "rows/s: rows inserted per second (l.x: rows indexed per second); q/s: queries per second (! = the background inserts missed 95% of their target rate); fsync/c: log syncs per write commit; ins p50/p99: insert commit latency in us (l.x: per index); q p99: query latency in us; per op: per row inserted (l.x: per row indexed; query steps: per query); cpu and csw: getrusage of the process; wbytes: bytes written to storage (/proc/self/io); log/data/dblw: the engine's own counts of bytes written to its log, data and doublewrite files; redo: the log records' payload, before framing and the padding of whole 4 KiB log blocks (RocksDB: its WAL bytes; SQLite: n/a); yield/c: times the group-commit leader yielded its core before its log write so that runnable committers could join the sync, per write commit (Quill; n/a: the engine does not count it)"
    );
    save_json(
        a.json.as_deref(),
        "quill bench insert",
        &machine,
        serde_json::json!({ "configs": configs, "engines": engines, "rows": rows }),
    )?;
    Ok(())
}
