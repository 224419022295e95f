//! The `quill` command line: benchmarks, status and inspection tools.

#[macro_use]
mod out;
mod torture;
mod torture_txn;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use quill::bench::{self, Machine, commit, fsync};
use quill::io::{RealFs, Vfs};
use quill::log::{self, CommitMode, Durability};

/// The binary's allocator. The library leaves the choice to the program
/// that embeds it; the `quill` tools use mimalloc, whose per-thread heaps
/// keep hundreds of benchmark client threads off shared allocator locks
/// (glibc's arenas are shared once threads outnumber them).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Quill: an embedded, crash-safe, transactional storage engine.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a benchmark (prints a table; --json writes results for scripts).
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Print the state of a database: log layout, checkpoint, end of log,
    /// and the log statistics saved at its last clean close.
    Status {
        /// Database directory (holding `log/`), or a log directory.
        #[arg(default_value = DEFAULT_DIR)]
        dir: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Real-process crash test: a child process loads and updates a tree
    /// and is killed with SIGKILL at random moments; after each kill the
    /// database is recovered and checked (every acknowledged operation
    /// present, nothing beyond a prefix of what the child did, every page
    /// valid). Runs until --seconds have passed.
    Torture {
        /// Directory for the test's database (emptied first; refused if it
        /// holds anything a Quill benchmark or test did not create).
        #[arg(long, default_value = "quill-bench/torture")]
        dir: PathBuf,
        /// How long to keep killing and recovering.
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
        /// Seed for the operations and the kill times (random if absent).
        #[arg(long)]
        seed: Option<u64>,
        /// Torture transactions instead of the bare tree: concurrent
        /// writers move money between accounts, bump a counter and log a
        /// history row per transaction; after each kill the money must all
        /// be there, every acknowledged commit present in every table and
        /// index, nothing of an unacknowledged one half there, and `check`
        /// clean.
        #[arg(long)]
        txn: bool,
    },
    /// The child process of `quill torture` (not for direct use).
    #[command(hide = true)]
    TortureChild {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        round: u64,
        #[arg(long)]
        txn: bool,
    },
    /// Check every table of a database: B+tree structure, every live row
    /// in every secondary index, every index entry backed by a version of
    /// its row, unique indexes unique. Opens the database read-only and
    /// writes nothing; a database that was not closed cleanly needs
    /// recovery first (--repair). Exits with status 1 if anything is wrong.
    Check {
        /// Database directory.
        #[arg(default_value = DEFAULT_DIR)]
        dir: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Open the database read-write, recovering it if it needs it
        /// (redo, then rollback of transactions that never committed),
        /// before checking.
        #[arg(long)]
        repair: bool,
    },
    /// List the records of a log from its checkpoint to its end.
    Dump {
        /// Database directory (holding `log/`), or a log directory.
        #[arg(default_value = DEFAULT_DIR)]
        dir: PathBuf,
        /// Print at most this many records.
        #[arg(long, default_value_t = 100)]
        limit: u64,
    },
}

/// Default database directory (relative to the working directory).
const DEFAULT_DIR: &str = "quill-data";

#[derive(Subcommand)]
enum BenchCmd {
    /// Latency of one aligned 4 KiB write made durable, for each sync method
    /// (fdatasync, O_DSYNC, RWF_DSYNC) and each way of preparing the file
    /// (append, fallocate, overwrite of a zero-filled file, rewrite of one
    /// block), with O_DIRECT.
    Fsync(FsyncArgs),
    /// Append + commit loops over the redo log: every combination of
    /// --clients, --mode, --durability, --async and --fsync-delay-ms.
    Commit(CommitArgs),
    /// The storage layer over the B+tree API: in-order and random inserts,
    /// recovery time with a long log, and commit stalls with a small log.
    Storage(StorageArgs),
    /// Transactions through the embedded API in sysbench's shapes
    /// (update-non-index, point-select) on 8 tables of 100k rows, at each
    /// client count, durable commits.
    Txn(TxnArgs),
    /// sysbench's OLTP shapes (point-select, read-only, read-write,
    /// write-only, update-index, update-non-index, insert, delete) through
    /// the engine interface the peer comparisons use, on `sbtestN` tables,
    /// at each thread count, durable commits.
    Oltp(OltpArgs),
    /// The Insert Benchmark: per client a table purchases_index_N with
    /// three secondary indexes; steps l.i0 (load in key order), l.x
    /// (create the indexes), l.i1/l.i2 (inserts with matching deletes, 50
    /// and 5 rows per commit) and qrN/qpN (range or point queries while
    /// inserts and deletes run at N rows/s per client), durable commits;
    /// for each engine, transaction size and client count.
    Insert(InsertArgs),
    /// A markdown report and a PNG chart of throughput against client
    /// count from the JSON of `bench oltp` or `bench insert`, with the
    /// goal (Quill ahead of every peer on write-heavy work, at most one
    /// log sync per commit) checked row by row.
    Report(ReportArgs),
}

#[derive(Args)]
struct ReportArgs {
    /// JSON written by `quill bench oltp --json` or `quill bench insert --json`.
    json: PathBuf,
    /// Markdown output (default: the JSON's path with `.md`).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// PNG chart output (default: the JSON's path with `.png`).
    #[arg(long)]
    png: Option<PathBuf>,
}

#[derive(Args)]
struct InsertArgs {
    /// Database directory (emptied first; each engine and configuration
    /// gets a subdirectory, removed after its run).
    #[arg(long, default_value = "quill-bench/insert")]
    dir: PathBuf,
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
    /// Cache: Quill's buffer pool, RocksDB's block cache.
    #[arg(long, default_value = "2G", value_parser = parse_size)]
    pool: u64,
    /// Write results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The engines a workload benchmark runs and how they are opened.
#[derive(Args)]
struct PeerArgs {
    /// Engines, comma-separated: quill, and sqlite and rocksdb when built
    /// with `--features peers`. Each gets its own subdirectory of --dir.
    #[arg(long, value_delimiter = ',', default_value = "quill")]
    engines: Vec<String>,
    /// Milliseconds added to every sync (slow storage), for engines that
    /// allow it (Quill); the report says which did not.
    #[arg(long, default_value_t = 0.0)]
    fsync_delay_ms: f64,
    /// RocksDB: queue deletes of at least this many rows use one range
    /// tombstone, smaller ones delete row by row (small range deletes are
    /// slow in RocksDB 7.8; see bench/results/insert.md).
    #[arg(long, default_value_t = bench::engine::ROCKSDB_RANGE_DELETE_MIN_ROWS)]
    rocksdb_range_delete_min_rows: usize,
}

impl PeerArgs {
    fn setup(&self, cache_bytes: u64, max_clients: usize) -> bench::engine::Setup {
        bench::engine::Setup {
            cache_bytes,
            max_clients,
            fsync_delay_ms: self.fsync_delay_ms,
            rocksdb_range_delete_min_rows: self.rocksdb_range_delete_min_rows,
        }
    }
}

#[derive(Args)]
struct OltpArgs {
    /// Database directory (emptied first).
    #[arg(long, default_value = "quill-bench/oltp")]
    dir: PathBuf,
    /// Tables `sbtestN`.
    #[arg(long, default_value_t = 8)]
    tables: usize,
    /// Rows per table.
    #[arg(long, default_value_t = 100_000)]
    table_size: u64,
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
    /// Cache: Quill's buffer pool, RocksDB's block cache.
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    pool: u64,
    #[command(flatten)]
    peers: PeerArgs,
    /// Write results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct TxnArgs {
    /// Database directory (emptied first).
    #[arg(long, default_value = "quill-bench/txn")]
    dir: PathBuf,
    /// Tables `sbtestN`.
    #[arg(long, default_value_t = 8)]
    tables: usize,
    /// Rows per table.
    #[arg(long, default_value_t = 100_000)]
    table_size: u64,
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
    /// Write results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct StorageArgs {
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

#[derive(Args)]
struct FsyncArgs {
    /// Directory on the file system to measure (its test files are
    /// created and removed there).
    #[arg(long, default_value = "quill-bench/fsync")]
    dir: PathBuf,
    /// Timed writes per combination and round.
    #[arg(long, default_value_t = 500)]
    iterations: usize,
    /// Rounds (combinations interleaved within each).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Also measure buffered I/O (without O_DIRECT).
    #[arg(long)]
    buffered: bool,
    /// Only these preparations (append, fallocate, overwrite, rewrite), comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_preparation)]
    preparations: Vec<fsync::Preparation>,
    /// Only these sync methods (fdatasync, o_dsync, rwf_dsync), comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_method)]
    methods: Vec<fsync::Method>,
    /// Write results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct CommitArgs {
    /// Directory for the benchmark's log (emptied first; refused if it
    /// holds anything a Quill benchmark did not create, such as a
    /// database). Each row reopens the log created at the start.
    #[arg(long, default_value = "quill-bench/commit")]
    dir: PathBuf,
    /// Client counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    clients: Vec<usize>,
    /// Measured seconds per row.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Unmeasured warm-up seconds per row.
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
    /// Commit modes, comma-separated: leader, flusher, naive.
    #[arg(long, value_delimiter = ',', default_value = "leader")]
    mode: Vec<CommitMode>,
    /// Durability levels, comma-separated: sync, write, lazy.
    #[arg(long, value_delimiter = ',', default_value = "sync")]
    durability: Vec<Durability>,
    /// Clients are tokio tasks awaiting commit_async. Give `false,true` to
    /// run both.
    #[arg(long = "async", value_delimiter = ',', num_args = 0..=1, default_missing_value = "true")]
    is_async: Vec<bool>,
    /// Payload bytes per record.
    #[arg(long, default_value_t = 200)]
    record_bytes: usize,
    /// Delay added after every sync (ms, comma-separated) to stand for a
    /// slow device.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    fsync_delay_ms: Vec<f64>,
    /// Run every combination this many times, interleaved; the table shows
    /// medians.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Log file size (accepts K/M/G suffixes); the default is the
    /// engine's.
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    log_file_size: u64,
    /// Number of log files; the default is the engine's.
    #[arg(long, default_value_t = 1)]
    log_files: u32,
    /// Log buffer size, a power of two (accepts K/M/G suffixes).
    #[arg(long, default_value = "16M", value_parser = parse_size)]
    log_buffer: u64,
    /// Write rows and medians as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn parse_preparation(s: &str) -> std::result::Result<fsync::Preparation, String> {
    fsync::Preparation::parse(s)
        .ok_or_else(|| format!("{s:?}: expected append, fallocate or overwrite"))
}

fn parse_method(s: &str) -> std::result::Result<fsync::Method, String> {
    fsync::Method::parse(s)
        .ok_or_else(|| format!("{s:?}: expected fdatasync, o_dsync or rwf_dsync"))
}

fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.trim_end_matches('b').trim_end_matches('i');
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{s:?} is not a size (examples: 4096, 64K, 16M, 1G)"))
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run(Cli::parse()) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Bench(BenchCmd::Fsync(a)) => bench_fsync(a),
        Cmd::Bench(BenchCmd::Commit(a)) => bench_commit(a),
        Cmd::Bench(BenchCmd::Storage(a)) => bench_storage(a),
        Cmd::Bench(BenchCmd::Txn(a)) => bench_txn(a),
        Cmd::Bench(BenchCmd::Oltp(a)) => bench_oltp(a),
        Cmd::Bench(BenchCmd::Insert(a)) => bench_insert(a),
        Cmd::Bench(BenchCmd::Report(a)) => bench_report(a),
        Cmd::Check { dir, json, repair } => check(&dir, json, repair),
        Cmd::Status { dir, json } => status(&dir, json),
        Cmd::Dump { dir, limit } => dump(&dir, limit),
        Cmd::Torture {
            dir,
            seconds,
            seed,
            txn,
        } => {
            let seed = seed.unwrap_or_else(rand::random);
            let name = if txn {
                "quill torture --txn"
            } else {
                "quill torture"
            };
            outln!(
                "{name}: seed {seed}, {seconds} s, in {} (rerun with --seed {seed})",
                dir.display()
            );
            let say = |l: String| outln!("{l}");
            if txn {
                let out = torture_txn::run(&dir, seconds, seed, &say)?;
                outln!(
                    "passed: {} rounds of kill -9 and recovery, {} transactions acknowledged, {} rolled back by recovery",
                    out.rounds,
                    out.acked,
                    out.rolled_back
                );
            } else {
                let out = torture::run(&dir, seconds, seed, &say)?;
                outln!(
                    "passed: {} rounds of kill -9 and recovery, {} operations acknowledged, {} entries at the end",
                    out.rounds,
                    out.acked,
                    out.entries
                );
            }
            Ok(())
        }
        Cmd::TortureChild {
            dir,
            seed,
            round,
            txn,
        } => {
            if txn {
                torture_txn::child(&dir, seed, round)
            } else {
                torture::child(&dir, seed, round)
            }
        }
    }
}

fn progress(total: u64, unit: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(total);
    let template =
        format!("{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit} (eta {{eta}}) {{msg}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

/// Print a line above the progress bar (or plainly when it is hidden).
fn say(pb: &ProgressBar, line: String) {
    if pb.is_hidden() {
        outln!("{line}");
    } else {
        pb.println(line);
    }
}

/// A per-mille progress bar for benchmarks that run in named stages: a
/// new stage name restarts the bar.
struct StageBar {
    pb: ProgressBar,
    current: std::cell::RefCell<String>,
}

impl StageBar {
    fn new() -> StageBar {
        StageBar {
            pb: progress(1000, "permille"),
            current: std::cell::RefCell::new(String::new()),
        }
    }

    /// Stage `stage` is `f` (0 to 1) done.
    fn tick(&self, stage: &str, f: f64) {
        if *self.current.borrow() != stage {
            self.pb.set_position(0);
            self.pb.set_message(stage.to_string());
            *self.current.borrow_mut() = stage.to_string();
        }
        self.pb.set_position((f.clamp(0.0, 1.0) * 1000.0) as u64);
    }
}

/// The command line as typed, for result files.
fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// UTC timestamp like 2026-11-21T23:22:18Z.
fn utc_now() -> String {
    let secs = bench::unix_now();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A result file: what ran, when, at which commit, on which machine, then
/// the benchmark's own fields.
/// Write a benchmark's results to `path` (if given) as JSON: `fields`
/// after what identifies the run (tool, command line, date, commit,
/// machine).
fn save_json(
    path: Option<&Path>,
    tool: &str,
    machine: &Machine,
    fields: serde_json::Value,
) -> Result<()> {
    let Some(path) = path else {
        return Ok(());
    };
    let mut v = serde_json::json!({
        "tool": tool,
        "command": command_line(),
        "date": utc_now(),
        "git_commit": git_commit(),
        "machine": machine,
    });
    if let (Some(head), serde_json::Value::Object(rest)) = (v.as_object_mut(), fields) {
        head.extend(rest);
    }
    let text = serde_json::to_string_pretty(&v)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn bench_fsync(a: FsyncArgs) -> Result<()> {
    let cfg = fsync::FsyncConfig {
        dir: a.dir.clone(),
        iterations: a.iterations,
        rounds: a.rounds,
        buffered: a.buffered,
        preparations: a.preparations,
        methods: a.methods,
    };
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let machine = Machine::describe(&a.dir);
    outln!(
        "quill bench fsync: {} rounds x {} aligned 4 KiB write+sync per combination in {} ({}; {} cores; kernel {})",
        a.rounds,
        a.iterations,
        a.dir.display(),
        machine.filesystem,
        machine.nproc,
        machine.kernel
    );
    let pb = progress(fsync::total_writes(&cfg), "writes");
    let report = fsync::run(&RealFs::new(), &cfg, &|| pb.inc(1)).context("fsync benchmark")?;
    pb.finish_and_clear();
    outp!("{}", fsync::table(&report));
    save_json(
        a.json.as_deref(),
        "quill bench fsync",
        &machine,
        serde_json::json!({
            "iterations": a.iterations,
            "rounds": a.rounds,
            "rows": report.rows,
            "fastest": report.fastest,
            "fallocate_unsupported": report.fallocate_unsupported,
        }),
    )?;
    Ok(())
}

fn bench_commit(a: CommitArgs) -> Result<()> {
    let cfg = commit::CommitConfig {
        dir: a.dir.clone(),
        clients: a.clients,
        seconds: a.seconds,
        warmup: a.warmup,
        modes: a.mode,
        durabilities: a.durability,
        asyncs: if a.is_async.is_empty() {
            vec![false]
        } else {
            a.is_async
        },
        fsync_delays_ms: a.fsync_delay_ms,
        record_bytes: a.record_bytes,
        repeat: a.repeat,
        file_size: a.log_file_size,
        file_count: a.log_files,
        buffer_size: usize::try_from(a.log_buffer).context("log buffer size")?,
    };
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let machine = Machine::describe(&a.dir);
    let combos = cfg.combos().len();
    outln!(
        "quill bench commit: {combos} combinations x {} repeats, {:.1}s warm-up + {:.1}s measured each, {}-byte records, log {} x {} bytes in {} ({}; {} cores; kernel {})",
        cfg.repeat,
        cfg.warmup,
        cfg.seconds,
        cfg.record_bytes,
        cfg.file_count,
        cfg.file_size,
        a.dir.display(),
        machine.filesystem,
        machine.nproc,
        machine.kernel
    );
    outln!("each client loops: append one record, commit it; latency is append + commit");
    let pb = progress((cfg.total_seconds() * 10.0).ceil() as u64, "x0.1s");
    let step = std::cell::Cell::new(0.0f64);
    let tick = |dt: f64| {
        let t = step.get() + dt * 10.0;
        let whole = t.floor();
        step.set(t - whole);
        pb.inc(whole as u64);
    };
    say(&pb, commit::table_header());
    let mut on_row = |r: &commit::CommitRow| {
        say(&pb, commit::table_line(&r.figures()));
    };
    let rows = commit::run(&cfg, &tick, &mut on_row).context("commit benchmark")?;
    pb.finish_and_clear();
    let summary = commit::summarize(&cfg, &rows);
    if cfg.repeat > 1 {
        outln!("\nmedians over {} repeats:", cfg.repeat);
        outln!("{}", commit::table_header());
        for s in &summary {
            outln!("{}", commit::table_line(s));
        }
    }
    if let Some(last) = rows.last() {
        outln!(
            "\nlog statistics of the last row ({} clients, {}):",
            last.combo.clients,
            last.combo.mode
        );
        outln!("{}", last.log);
    }
    save_json(
        a.json.as_deref(),
        "quill bench commit",
        &machine,
        serde_json::json!({
            "config": cfg,
            "rows": rows,
            "summary": summary,
        }),
    )?;
    Ok(())
}

fn bench_storage(a: StorageArgs) -> Result<()> {
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
        "quill bench storage: workloads {:?}; {}-byte values, 8-byte keys, a durable commit every {} rows; {}-byte pages; doublewrite {}; in {} ({}; {} cores; kernel {})",
        cfg.workloads,
        cfg.value_bytes,
        cfg.rows_per_commit,
        cfg.page_size,
        if cfg.doublewrite { "on" } else { "off" },
        a.dir.display(),
        machine.filesystem,
        machine.nproc,
        machine.kernel
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

fn bench_report(a: ReportArgs) -> Result<()> {
    let md = a.markdown.unwrap_or_else(|| a.json.with_extension("md"));
    let png = a.png.unwrap_or_else(|| a.json.with_extension("png"));
    let misses = bench::report::write(&a.json, &md, &png)
        .with_context(|| format!("reporting on {}", a.json.display()))?;
    outln!(
        "wrote {} and {}; goal {}",
        md.display(),
        png.display(),
        if misses == 0 {
            "met on every row".to_string()
        } else {
            format!("missed on {misses} rows (listed in the report)")
        }
    );
    Ok(())
}

fn bench_insert(a: InsertArgs) -> Result<()> {
    if a.clients.is_empty() || a.clients.contains(&0) {
        anyhow::bail!("--clients: each count must be at least 1");
    }
    bench::fresh_dir(&RealFs::new(), &a.dir)?;
    let machine = Machine::describe(&a.dir);
    outln!(
        "quill bench insert: steps {:?} on {:?}; {:?} clients; {} rows per table; transactions {:?}; durable commits; {:.0} s windows after {:.0} s warm-up; in {} ({}; {} cores; kernel {})",
        a.steps.iter().map(|s| s.name()).collect::<Vec<_>>(),
        a.peers.engines,
        a.clients,
        a.rows_per_table
            .map_or(format!("{} / clients", a.total_rows), |r| r.to_string()),
        a.txn_sizes.iter().map(|t| t.name()).collect::<Vec<_>>(),
        a.seconds,
        a.warmup,
        a.dir.display(),
        machine.filesystem,
        machine.nproc,
        machine.kernel
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
                if engines.len() < a.peers.engines.len() {
                    let info = engine_info(engine.as_ref(), &setup);
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
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("removing {}", dir.display()))?;
            }
            configs.push(cfg);
        }
    }
    pb.finish_and_clear();
    outln!(
        "rows/s: rows inserted per second (l.x: rows indexed per second); q/s: queries per second (! = the background inserts missed 95% of their target rate); fsync/c: log syncs per write commit; ins p50/p99: insert commit latency in us (l.x: per index); q p99: query latency in us; per op: per row inserted (l.x: per row indexed; query steps: per query); cpu and csw: getrusage of the process; wbytes: bytes written to storage (/proc/self/io); log/data/dblw: the engine's own counts"
    );
    save_json(
        a.json.as_deref(),
        "quill bench insert",
        &machine,
        serde_json::json!({ "configs": configs, "engines": engines, "rows": rows }),
    )?;
    Ok(())
}

/// What a report says about an engine: how its syncs are counted and
/// whether the injected sync delay applies to it.
fn engine_info(
    engine: &dyn bench::engine::Engine,
    setup: &bench::engine::Setup,
) -> serde_json::Value {
    let delay = engine.fsync_delay();
    let delay_note = match &delay {
        Ok(ms) => format!("sync delay {ms} ms"),
        Err(why) if setup.fsync_delay_ms > 0.0 => format!("sync delay {why}"),
        Err(_) => "no sync delay".to_string(),
    };
    serde_json::json!({
        "name": engine.name(),
        "syncs": engine.syncs_note(),
        "fsync_delay_ms": delay.ok(),
        "note": format!("syncs counted by {}; {delay_note}", engine.syncs_note()),
    })
}

fn bench_txn(a: TxnArgs) -> Result<()> {
    let durability = match a.durability.as_str() {
        "sync" => quill::Durability::Sync,
        "write" => quill::Durability::Write,
        "lazy" => quill::Durability::Lazy,
        other => anyhow::bail!("--durability must be sync, write or lazy, not {other}"),
    };
    let cfg = bench::txn::TxnBenchConfig {
        dir: a.dir.clone(),
        tables: a.tables,
        table_size: a.table_size,
        threads: a.threads,
        workloads: a.workload,
        seconds: a.seconds,
        warmup: a.warmup,
        durability,
        pool_bytes: a.pool,
        fsync_delay_ms: a.fsync_delay_ms,
    };
    if let Some(parent) = a.dir.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let machine = Machine::describe(a.dir.parent().unwrap_or(Path::new(".")));
    outln!(
        "quill bench txn: {:?} at {:?} clients; {} tables x {} rows; {:?} commits; {:.0} s measured after {:.0} s warm-up; sync delay {} ms; in {} ({}; {} cores; kernel {})",
        cfg.workloads.iter().map(|w| w.name()).collect::<Vec<_>>(),
        cfg.threads,
        cfg.tables,
        cfg.table_size,
        cfg.durability,
        cfg.seconds,
        cfg.warmup,
        cfg.fsync_delay_ms,
        a.dir.display(),
        machine.filesystem,
        machine.nproc,
        machine.kernel
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

fn bench_oltp(a: OltpArgs) -> Result<()> {
    let cfg = bench::oltp::OltpConfig {
        tables: a.tables,
        table_size: a.table_size,
        threads: a.threads,
        shapes: a.shapes,
        seconds: a.seconds,
        warmup: a.warmup,
    };
    bench::fresh_dir(&RealFs::new(), &a.dir)?;
    let machine = Machine::describe(&a.dir);
    outln!(
        "quill bench oltp: {:?} on {:?} at {:?} threads; {} tables x {} rows; durable commits; {:.0} s measured after {:.0} s warm-up; in {} ({}; {} cores; kernel {})",
        cfg.shapes.iter().map(|w| w.name()).collect::<Vec<_>>(),
        a.peers.engines,
        cfg.threads,
        cfg.tables,
        cfg.table_size,
        cfg.seconds,
        cfg.warmup,
        a.dir.display(),
        machine.filesystem,
        machine.nproc,
        machine.kernel
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
        "tps/qps: transactions/statements per second; fsync/c: the engine's log syncs per transaction (n/a: the engine cannot count them; SQLite syncs through its VFS); p50/p95/p99: whole transaction; cpu us/tx and csw/tx: getrusage deltas of the process; wbytes/tx: bytes the process wrote to storage (/proc/self/io)"
    );
    save_json(
        a.json.as_deref(),
        "quill bench oltp",
        &machine,
        serde_json::json!({ "config": cfg, "engines": engines, "rows": rows }),
    )?;
    Ok(())
}

/// `DIR/log` if it exists, else `DIR`.
fn log_dir(dir: &Path) -> PathBuf {
    let sub = dir.join("log");
    if sub.join("log.000").exists() {
        sub
    } else {
        dir.to_path_buf()
    }
}

fn check(dir: &Path, json: bool, repair: bool) -> Result<()> {
    let opts = quill::db::Options {
        create_if_missing: false,
        purge: false,
        ..quill::db::Options::default()
    };
    let db = if repair {
        quill::db::Db::open(dir, opts).with_context(|| {
            format!("opening (and recovering) the database in {}", dir.display())
        })?
    } else {
        quill::db::Db::open_read_only(dir, opts)
            .with_context(|| format!("opening the database in {} read-only", dir.display()))?
    };
    let report = db.check().context("checking")?;
    let recovery = db.stats().recovery;
    db.close().context("closing")?;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "report": report, "recovery": recovery })
            )?
        );
    } else {
        if let Some(r) = &recovery
            && !r.rolled_back.is_empty()
        {
            outln!(
                "recovery rolled back {} transactions that never committed ({} undo records, {:.1} ms)",
                r.rolled_back.len(),
                r.undo_records,
                r.duration.as_secs_f64() * 1e3
            );
        }
        outln!(
            "checked {} tables: {} records ({} live rows), {} index entries",
            report.tables,
            report.records,
            report.live_rows,
            report.index_entries
        );
        for p in &report.problems {
            outln!("PROBLEM: {p}");
        }
        if report.is_ok() {
            outln!("no problems found");
        }
    }
    if !report.is_ok() {
        std::process::exit(1);
    }
    Ok(())
}

/// Take a shared lock on `dir` for reading it, if its lock is free; when a
/// writer holds it, say so (the files on disk may lag the live database)
/// and read anyway: status and dump only read.
fn read_lock(vfs: &dyn Vfs, dir: &Path) -> Option<quill::io::DirLock> {
    match vfs.lock_dir(dir, quill::io::LockKind::Shared) {
        Ok(lock) => Some(lock),
        Err(quill::io::IoError::Locked { holder, .. }) => {
            eprintln!(
                "note: {} is in use by {}; showing its files as they are on disk now (the live database may be ahead of them)",
                dir.display(),
                holder.map_or_else(|| "another process".to_string(), |p| format!("process {p}"))
            );
            None
        }
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            eprintln!(
                "note: could not lock {} for reading ({e}); reading anyway",
                dir.display()
            );
            None
        }
    }
}

fn status(dir: &Path, json: bool) -> Result<()> {
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs::new());
    if !dir.exists() {
        anyhow::bail!("{} does not exist", dir.display());
    }
    let _lock = read_lock(vfs.as_ref(), dir);
    let ld = log_dir(dir);
    let info = log::inspect(vfs.as_ref(), &ld)
        .with_context(|| format!("reading the log in {}", ld.display()))?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&info)?);
        return Ok(());
    }
    outln!("database {}", dir.display());
    outln!(
        "redo log {}: {} files x {} bytes = {} bytes of log (id {})",
        info.dir.display(),
        info.file_count,
        info.file_size,
        info.capacity_bytes,
        info.log_id
    );
    outln!(
        "  checkpoint LSN {} (slot seq {}, epoch {}); end LSN {} ({} records, {} bytes after the checkpoint; scan stopped: {:?})",
        info.checkpoint_lsn,
        info.checkpoint_seq,
        info.epoch,
        info.end_lsn,
        info.records_after_checkpoint,
        info.end_lsn.0.saturating_sub(info.checkpoint_lsn.0),
        info.stop
    );
    match &info.last_close {
        Some(saved) => {
            let age = bench::unix_now().saturating_sub(saved.saved_unix);
            outln!("statistics saved at the last clean close ({age} s ago):");
            outln!("{}", saved.stats);
        }
        None => outln!("no statistics saved (the log was never closed cleanly)"),
    }
    match quill::store::inspect(vfs.as_ref(), dir) {
        Ok(st) => {
            outln!(
                "tablespace {}: {}-byte pages, {} pages ({} free), {} bytes on disk; trees at root slots {:?}",
                dir.join(quill::store::DATA_FILE).display(),
                st.page_size,
                st.page_count,
                st.free_pages,
                st.file_bytes,
                st.roots
            );
            match &st.last_close {
                Some(s) => {
                    outln!("storage statistics saved at the last clean close:");
                    outp!("{s}");
                }
                None => outln!("no storage statistics saved (never closed cleanly)"),
            }
        }
        Err(quill::Error::NotFound { .. }) => {
            outln!("no tablespace in {} (a log only)", dir.display())
        }
        Err(e) => return Err(e).context("reading the tablespace"),
    }
    match quill::db::saved_stats(vfs.as_ref(), dir) {
        Some(s) => {
            outln!("transaction statistics saved at the last clean close:");
            outp!("{s}");
        }
        None => outln!("no transaction statistics saved (no tables, or never closed cleanly)"),
    }
    Ok(())
}

fn dump(dir: &Path, limit: u64) -> Result<()> {
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs::new());
    if !dir.exists() {
        anyhow::bail!("{} does not exist", dir.display());
    }
    let _lock = read_lock(vfs.as_ref(), dir);
    let ld = log_dir(dir);
    let info = log::inspect(vfs.as_ref(), &ld)
        .with_context(|| format!("reading the log in {}", ld.display()))?;
    outln!(
        "log {}: checkpoint {} end {} ({} records; scan stopped: {:?})",
        ld.display(),
        info.checkpoint_lsn,
        info.end_lsn,
        info.records_after_checkpoint,
        info.stop
    );
    let mut shown = 0u64;
    let scanned = log::scan_read_only(vfs.as_ref(), &ld, &mut |r| {
        if out::closed() {
            // Nobody reads any more: end the scan (the error is ours).
            return Err(quill::Error::InvalidArgument {
                what: "output",
                reason: "standard output closed".into(),
            });
        }
        if shown < limit {
            outln!(
                "lsn {:>14} end {:>14} type {:>3} bytes {}",
                r.lsn,
                r.end,
                r.rtype,
                r.payload.len()
            );
        }
        shown += 1;
        Ok(())
    });
    if out::closed() {
        return Ok(());
    }
    scanned?;
    if shown > limit {
        outln!("... {} more", shown - limit);
    }
    Ok(())
}
