//! `quill bench oltp`: sysbench's OLTP shapes, Quill beside its peers.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use quill_bench::{self as bench, Machine};

use crate::results::save_json;
use crate::ui::{StageBar, parse_size, say};
use quill::io::RealFs;

use super::{PeerArgs, SysbenchTables, engine_info};

/// Arguments of `quill bench oltp`.
#[derive(Args)]
pub struct OltpArgs {
    /// Database directory (emptied first).
    #[arg(long, default_value = "quill-bench/oltp")]
    dir: PathBuf,
    #[command(flatten)]
    sysbench: SysbenchTables,
    /// Client thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    threads: Vec<usize>,
    /// Shapes, comma-separated (default: all eight).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "point-select,read-only,read-write,write-only,update-index,update-non-index,insert,delete"
    )]
    shapes: Vec<bench::oltp::Shape>,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Warm-up seconds per run.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Cache: Quill's buffer pool, RocksDB's block cache, SQLite's memory
    /// map (and, split over the clients, its connections' page caches).
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    pool: u64,
    #[command(flatten)]
    peers: PeerArgs,
    /// Write results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Run `quill bench oltp`.
pub fn run(a: OltpArgs) -> Result<()> {
    let cfg = bench::oltp::OltpConfig {
        tables: a.sysbench.tables,
        table_size: a.sysbench.table_size,
        threads: a.threads,
        shapes: a.shapes,
        seconds: a.seconds,
        warmup: a.warmup,
    };
    bench::fresh_dir(&RealFs::new(), &a.dir)?;
    let machine = Machine::describe(&a.dir);
    outln!(
        "quill bench oltp: {:?} on {:?} at {:?} threads; {} tables x {} rows; durable commits; {} s measured after {} s warm-up; {}",
        cfg.shapes.iter().map(|w| w.name()).collect::<Vec<_>>(),
        a.peers.engines,
        cfg.threads,
        cfg.tables,
        cfg.table_size,
        cfg.seconds,
        cfg.warmup,
        machine.place(&a.dir)
    );
    let bar = StageBar::new();
    let pb = &bar.pb;
    let tick = |stage: &str, f: f64| bar.tick(stage, f);
    say(pb, bench::oltp::table_header());
    let setup = a
        .peers
        .setup(a.pool, cfg.threads.iter().copied().max().unwrap_or(1));
    // Every engine is loaded first, then each shape and thread count runs
    // on every engine in turn, so a noisy stretch of a shared host falls
    // on all engines alike instead of on whichever ran then.
    let mut engines = Vec::new();
    let mut opened = Vec::new();
    for name in &a.peers.engines {
        let dir = a.dir.join(name);
        let engine = bench::engine::open(name, &dir, &setup)
            .with_context(|| format!("opening {name} in {}", dir.display()))?;
        let info = engine_info(engine.as_ref(), &setup);
        say(
            pb,
            format!("{name}: {}", info["note"].as_str().unwrap_or_default()),
        );
        engines.push(info);
        bench::oltp::prepare(engine.as_ref(), &cfg, &tick)
            .with_context(|| format!("{name}: loading the tables"))?;
        opened.push(engine);
    }
    for engine in &opened {
        tick(
            &format!("{}: background work after loading", engine.name()),
            0.0,
        );
        engine
            .quiesce()
            .with_context(|| format!("{}: settling", engine.name()))?;
    }
    let mut rows = Vec::new();
    let mut on_row = |r: &bench::oltp::OltpRow| say(pb, bench::oltp::table_line(r));
    for &shape in &cfg.shapes {
        for &t in &cfg.threads {
            let one = bench::oltp::OltpConfig {
                shapes: vec![shape],
                threads: vec![t],
                ..cfg.clone()
            };
            for engine in &opened {
                rows.extend(
                    bench::oltp::run(engine.as_ref(), &one, &tick, &mut on_row)
                        .with_context(|| engine.name().to_string())?,
                );
            }
        }
    }
    for engine in opened {
        let name = engine.name();
        engine.close().with_context(|| format!("closing {name}"))?;
    }
    pb.finish_and_clear();
    outln!(
        "tps/qps: transactions/statements per second; fsync/c: the engine's log syncs per transaction (n/a: the engine cannot count them; SQLite syncs through its VFS); logw/c: write calls to the log's files per transaction (n/a: the engine does not count them); hist: the engine's backlog after the window, once its clients stopped (Quill: its history length, undo of committed transactions that purge has not yet removed; n/a: the engine keeps none); p50/p95/p99: whole transaction; cpu us/tx and csw/tx: getrusage deltas of the process; wbytes/tx: bytes the process wrote to storage (/proc/self/io); log/data/dblw B/tx: the engine's own counts of bytes written to its log, data and doublewrite files; redo B/tx: the log records' payload, before framing and the padding of whole 4 KiB log blocks (RocksDB: its WAL bytes; SQLite: n/a); undo pg/c: undo segments started on a newly allocated page per transaction (Quill; 0 when every transaction reuses a cached undo page; n/a: the engine keeps no undo segments); settle ms, settle cpu, settle wB: the engine's deferred work (RocksDB's flushes and compactions, Quill's purge and dirty pages), finished after the window and outside every window so that it does not run inside the next engine's: its time, and the process's CPU us and bytes written while it ran, per transaction of the window; yield/c: times the group-commit leader yielded its core before its log write so that runnable committers could join the sync, per transaction (Quill: only while recent syncs were shared, so 0 at one client unless one of the log's own waits shared a commit's sync; n/a: the engine does not count it)"
    );
    save_json(
        a.json.as_deref(),
        "quill bench oltp",
        &machine,
        serde_json::json!({ "config": cfg, "engines": engines, "rows": rows }),
    )?;
    Ok(())
}
