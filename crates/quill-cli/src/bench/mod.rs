//! `quill bench`: one module per benchmark, each its arguments and the
//! code that runs it, prints its table and writes its JSON; the argument
//! groups several share are here.

pub mod commit;
pub mod fsync;
pub mod insert;
pub mod oltp;
pub mod report;
pub mod scan;
pub mod storage;
pub mod txn;

use clap::{Args, Subcommand};
use quill_bench as bench;

/// The benchmarks.
#[derive(Subcommand)]
pub enum BenchCmd {
    /// Latency of one aligned 4 KiB write made durable, for each sync method
    /// (fdatasync, O_DSYNC, RWF_DSYNC) and each way of preparing the file
    /// (append, fallocate, overwrite of a zero-filled file, rewrite of one
    /// block), with O_DIRECT.
    Fsync(fsync::FsyncArgs),
    /// Append + commit loops over the redo log: every combination of
    /// --clients, --mode, --durability, --async and --fsync-delay-ms.
    Commit(commit::CommitArgs),
    /// The storage layer over the B+tree API: in-order and random inserts,
    /// recovery time with a long log, and commit stalls with a small log.
    Storage(storage::StorageArgs),
    /// Range scans over a tree larger than the buffer pool, each from a
    /// cold pool, with read-ahead on and off in one run: whole-tree scans
    /// both ways and range reads from random keys, beside a scan of the
    /// tree cached whole (the ceiling).
    Scan(scan::ScanArgs),
    /// Transactions through the embedded API in sysbench's shapes
    /// (update-non-index, point-select) on 8 tables of 100k rows, at each
    /// client count, durable commits.
    Txn(txn::TxnArgs),
    /// sysbench's OLTP shapes (point-select, read-only, read-write,
    /// write-only, update-index, update-non-index, insert, delete) through
    /// the engine interface the peer comparisons use, on `sbtestN` tables,
    /// at each thread count, durable commits.
    Oltp(oltp::OltpArgs),
    /// The Insert Benchmark: per client a table purchases_index_N with
    /// three secondary indexes; steps l.i0 (load in key order), l.x
    /// (create the indexes), l.i1/l.i2 (inserts with matching deletes, 50
    /// and 5 rows per commit) and qrN/qpN (range or point queries while
    /// inserts and deletes run at N rows/s per client), durable commits;
    /// for each engine, transaction size and client count.
    Insert(insert::InsertArgs),
    /// A markdown report and a PNG chart of throughput against client
    /// count from the JSON of `bench oltp` or `bench insert`, with the
    /// goal (Quill ahead of every peer on write-heavy work, at most one
    /// log sync per commit) checked row by row.
    Report(report::ReportArgs),
}

/// Run one benchmark.
pub fn run(cmd: BenchCmd) -> anyhow::Result<()> {
    match cmd {
        BenchCmd::Fsync(a) => fsync::run(a),
        BenchCmd::Commit(a) => commit::run(a),
        BenchCmd::Storage(a) => storage::run(a),
        BenchCmd::Scan(a) => scan::run(a),
        BenchCmd::Txn(a) => txn::run(a),
        BenchCmd::Oltp(a) => oltp::run(a),
        BenchCmd::Insert(a) => insert::run(a),
        BenchCmd::Report(a) => report::run(a),
    }
}

/// The sysbench tables `bench oltp` and `bench txn` load.
#[derive(Args)]
pub struct SysbenchTables {
    /// Tables `sbtestN`.
    #[arg(long, default_value_t = 8)]
    pub tables: usize,
    /// Rows per table.
    #[arg(long, default_value_t = 100_000)]
    pub table_size: u64,
}

/// The engines a workload benchmark runs and how they are opened.
#[derive(Args)]
pub struct PeerArgs {
    /// Engines, comma-separated: quill, and sqlite and rocksdb when built
    /// with `--features peers`. Each gets its own subdirectory of --dir.
    #[arg(long, value_delimiter = ',', default_value = "quill")]
    pub engines: Vec<String>,
    /// Milliseconds added to every sync (slow storage), for engines that
    /// allow it (Quill); the report says which did not.
    #[arg(long, default_value_t = 0.0)]
    pub fsync_delay_ms: f64,
    /// RocksDB: queue deletes of at least this many rows use one range
    /// tombstone, smaller ones delete row by row (small range deletes are
    /// slow in RocksDB 7.8; see bench/results/insert.md).
    #[arg(long, default_value_t = bench::engine::ROCKSDB_RANGE_DELETE_MIN_ROWS)]
    pub rocksdb_range_delete_min_rows: usize,
}

impl PeerArgs {
    /// The engine set-up these arguments and the benchmark ask for.
    pub fn setup(&self, cache_bytes: u64, max_clients: usize) -> bench::engine::Setup {
        bench::engine::Setup {
            cache_bytes,
            max_clients,
            fsync_delay_ms: self.fsync_delay_ms,
            rocksdb_range_delete_min_rows: self.rocksdb_range_delete_min_rows,
        }
    }
}

/// What a report says about an engine: how its syncs are counted and
/// whether the injected sync delay applies to it.
pub fn engine_info(
    engine: &dyn bench::engine::Engine,
    setup: &bench::engine::Setup,
) -> serde_json::Value {
    let delay = engine.fsync_delay();
    let delay_note = match &delay {
        Ok(ms) => format!("sync delay {ms} ms"),
        Err(why) if setup.fsync_delay_ms > 0.0 => format!("sync delay {why}"),
        Err(_) => "no sync delay".to_string(),
    };
    let settings = engine.settings();
    let given = if settings.is_empty() {
        String::new()
    } else {
        format!("; given: {settings}")
    };
    serde_json::json!({
        "name": engine.name(),
        "syncs": engine.syncs_note(),
        "fsync_delay_ms": delay.ok(),
        "settings": settings,
        "note": format!("syncs counted by {}; {delay_note}{given}", engine.syncs_note()),
    })
}
