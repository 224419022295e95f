//! `quill bench commit`: the commit path under load.
//!
//! The run creates one log (files allocated and zero-filled once) and every
//! row reopens it, as a long-running database reuses its recycled files. For
//! every combination of commit mode, durability, client count, async and
//! injected sync delay (each `repeat` times, combinations interleaved so
//! that machine noise spreads over all of them), each client (a thread, or a
//! tokio task with `async`) loops: append one record of `record_bytes`,
//! commit it. After a warm-up, the run measures
//! for `seconds`:
//!
//! * `commits_per_s` and latency of append + commit (p50, p99, max);
//! * `fsyncs_per_commit` from the log's own counters (syncs made for a
//!   checkpoint slot alone included);
//! * `cpu_us_per_commit` and `cs_per_commit` (voluntary + involuntary context
//!   switches) from `getrusage(RUSAGE_SELF)` deltas, so they include every
//!   thread of the process;
//! * `bytes_written_per_commit`: log bytes written (whole 4 KiB blocks).
//!
//! A checkpoint thread keeps the circle from filling (at half capacity it
//! checkpoints at the durable LSN), as the storage layer's page cleaner will.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use quill::io::{RealFs, Vfs};
use quill::log::{CommitMode, Durability, Log, LogOptions, LogStats};
use quill::{Error, Result};

/// Parameters of a commit benchmark run.
#[derive(Clone, Debug, Serialize)]
pub struct CommitConfig {
    /// The log's directory (a benchmark's own, `bench::claim_dir`): the log
    /// is created there at the start of the run, reopened by every row,
    /// and left for `quill status DIR`.
    pub dir: PathBuf,
    /// Client counts.
    pub clients: Vec<usize>,
    /// Measured seconds per row.
    pub seconds: f64,
    /// Warm-up seconds per row (not measured).
    pub warmup: f64,
    /// Commit modes.
    pub modes: Vec<CommitMode>,
    /// Durability levels.
    pub durabilities: Vec<Durability>,
    /// Whether clients are tokio tasks awaiting `commit_async`.
    pub asyncs: Vec<bool>,
    /// Injected delay after every sync, milliseconds (stands for a slow device).
    pub fsync_delays_ms: Vec<f64>,
    /// Payload bytes per record.
    pub record_bytes: usize,
    /// Times each combination runs (interleaved).
    pub repeat: usize,
    /// Log file size, bytes.
    pub file_size: u64,
    /// Log files.
    pub file_count: u32,
    /// Log buffer bytes.
    pub buffer_size: usize,
}

/// One combination's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Combo {
    /// Commit mode.
    pub mode: CommitMode,
    /// Clients.
    pub clients: usize,
    /// Durability level.
    pub durability: Durability,
    /// Tokio tasks with `commit_async`.
    #[serde(rename = "async")]
    pub is_async: bool,
    /// Injected sync delay, milliseconds.
    pub fsync_delay_ms: f64,
}

/// One measured row.
#[derive(Clone, Debug, Serialize)]
pub struct CommitRow {
    /// What ran.
    #[serde(flatten)]
    pub combo: Combo,
    /// Which repetition (0-based).
    pub repeat: usize,
    /// Commits completed in the measured window.
    pub commits: u64,
    /// Length of the measured window, seconds.
    pub seconds: f64,
    /// Commits per second.
    pub commits_per_s: f64,
    /// Log syncs (plus checkpoint syncs) per commit.
    pub fsyncs_per_commit: f64,
    /// Median append + commit latency, microseconds.
    pub p50_us: f64,
    /// 99th percentile, microseconds.
    pub p99_us: f64,
    /// Largest, microseconds.
    pub max_us: f64,
    /// Process CPU time (user + system) per commit, microseconds.
    pub cpu_us_per_commit: f64,
    /// Context switches (voluntary + involuntary) per commit.
    pub cs_per_commit: f64,
    /// Log bytes written per commit.
    pub bytes_written_per_commit: f64,
    /// Mean commits made durable per sync.
    pub group_size_mean: f64,
    /// The log's statistics at the end of the row (whole row, warm-up included).
    pub log: LogStats,
}

/// Median over repetitions of one combination.
#[derive(Clone, Debug, Serialize)]
pub struct CommitSummary {
    /// What ran.
    #[serde(flatten)]
    pub combo: Combo,
    /// Repetitions.
    pub runs: usize,
    /// Median commits per second.
    pub commits_per_s: f64,
    /// Median syncs per commit.
    pub fsyncs_per_commit: f64,
    /// Median p50 latency, microseconds.
    pub p50_us: f64,
    /// Median p99 latency, microseconds.
    pub p99_us: f64,
    /// Median CPU per commit, microseconds.
    pub cpu_us_per_commit: f64,
    /// Median context switches per commit.
    pub cs_per_commit: f64,
    /// Median log bytes written per commit.
    pub bytes_written_per_commit: f64,
}

impl CommitConfig {
    /// Every combination, in the order one repetition runs them: variants of
    /// one client count (modes, then sync/async) run back to back, so that
    /// the ratios between them see the same machine conditions.
    pub fn combos(&self) -> Vec<Combo> {
        let mut out = Vec::new();
        for &fsync_delay_ms in &self.fsync_delays_ms {
            for &durability in &self.durabilities {
                for &clients in &self.clients {
                    for &is_async in &self.asyncs {
                        for &mode in &self.modes {
                            out.push(Combo {
                                mode,
                                clients,
                                durability,
                                is_async,
                                fsync_delay_ms,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// Refuse a configuration [`run`] would refuse (it checks this
    /// first), so a caller can say so before it prints anything.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &'static str, reason: &str| {
            Err(Error::InvalidArgument {
                what,
                reason: reason.into(),
            })
        };
        if self.clients.is_empty() || self.clients.iter().any(|&c| c == 0 || c > 10_000) {
            return bad("clients", "each count must be in 1..=10000");
        }
        let positive = self.seconds.is_finite() && self.seconds > 0.0;
        if !positive || !self.warmup.is_finite() || self.warmup < 0.0 {
            return bad("seconds", "must be positive (warm-up may be zero)");
        }
        if self.modes.is_empty() || self.durabilities.is_empty() || self.asyncs.is_empty() {
            return bad("mode/durability", "at least one value each");
        }
        if self
            .fsync_delays_ms
            .iter()
            .any(|d| !(*d >= 0.0 && *d < 10_000.0))
        {
            return bad("fsync-delay-ms", "must be in 0..10000");
        }
        if self.repeat == 0 {
            return bad("repeat", "must be at least 1");
        }
        LogOptions {
            file_size: self.file_size,
            file_count: self.file_count,
            buffer_size: self.buffer_size,
            ..LogOptions::default()
        }
        .validate()
    }

    /// Seconds the whole run will take (for a progress bar).
    pub fn total_seconds(&self) -> f64 {
        self.combos().len() as f64 * self.repeat as f64 * (self.seconds + self.warmup)
    }
}

/// Process resource usage at one instant.
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    /// User and system CPU time of every thread, microseconds.
    pub(crate) cpu_us: f64,
    /// The user-mode part of `cpu_us`: the engine's (and the harness's)
    /// own code, without the kernel's I/O, scheduling and wake-ups.
    pub(crate) user_us: f64,
    pub(crate) switches: f64,
}

pub(crate) fn usage() -> Usage {
    match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e6 + t.tv_usec() as f64;
            Usage {
                cpu_us: tv(u.user_time()) + tv(u.system_time()),
                user_us: tv(u.user_time()),
                switches: (u.voluntary_context_switches() + u.involuntary_context_switches())
                    as f64,
            }
        }
        Err(_) => Usage {
            cpu_us: f64::NAN,
            user_us: f64::NAN,
            switches: f64::NAN,
        },
    }
}

const PHASE_WARMUP: u8 = 0;
const PHASE_MEASURE: u8 = 1;
const PHASE_STOP: u8 = 2;

pub(crate) fn new_hist() -> hdrhistogram::Histogram<u64> {
    #[allow(clippy::expect_used)]
    hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("constant bounds")
}

/// What one client brings back.
struct ClientResult {
    latency_ns: hdrhistogram::Histogram<u64>,
    error: Option<Error>,
}

fn record(len: usize, client: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    for (i, b) in p.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31) ^ client as u8;
    }
    p
}

/// One client's loop state, shared by the thread and the task versions:
/// `next` starts an iteration (or says stop), `done` records its outcome.
struct Client {
    latency_ns: hdrhistogram::Histogram<u64>,
    payload: Vec<u8>,
    n: u64,
    phase: u8,
    t0: Instant,
}

impl Client {
    fn new(payload: Vec<u8>) -> Self {
        Client {
            latency_ns: new_hist(),
            payload,
            n: 0,
            phase: PHASE_WARMUP,
            t0: Instant::now(),
        }
    }

    /// Stamp the next record; false once the run is stopping.
    fn next(&mut self, phase: &AtomicU8) -> bool {
        self.phase = phase.load(Ordering::Relaxed);
        if self.phase == PHASE_STOP {
            return false;
        }
        self.n += 1;
        for (d, s) in self.payload.iter_mut().zip(self.n.to_le_bytes()) {
            *d = s;
        }
        self.t0 = Instant::now();
        true
    }

    /// Record the iteration's latency (measured phase only); false on error.
    fn done(&mut self, r: &Result<()>) -> bool {
        if r.is_err() {
            return false;
        }
        if self.phase == PHASE_MEASURE {
            self.latency_ns
                .saturating_record(self.t0.elapsed().as_nanos() as u64);
        }
        true
    }

    fn finish(self, error: Option<Error>) -> ClientResult {
        ClientResult {
            latency_ns: self.latency_ns,
            error,
        }
    }
}

fn client_loop(
    log: &Log,
    phase: &AtomicU8,
    durability: Durability,
    payload: Vec<u8>,
) -> ClientResult {
    let mut c = Client::new(payload);
    while c.next(phase) {
        let r = log
            .append(1, &c.payload)
            .and_then(|lsn| log.commit(lsn, durability));
        if !c.done(&r) {
            return c.finish(r.err());
        }
    }
    c.finish(None)
}

async fn task_loop(
    log: Arc<Log>,
    phase: Arc<AtomicU8>,
    durability: Durability,
    payload: Vec<u8>,
) -> ClientResult {
    let mut c = Client::new(payload);
    while c.next(&phase) {
        let r = match log.append(1, &c.payload) {
            Ok(lsn) => log.commit_async(lsn, durability).await,
            Err(e) => Err(e),
        };
        if !c.done(&r) {
            return c.finish(r.err());
        }
    }
    c.finish(None)
}

/// Drive the phases: warm up, snapshot, measure, snapshot, stop. `tick`
/// receives elapsed seconds for progress.
struct Window {
    seconds: f64,
    before: (LogStats, Usage),
    after: (LogStats, Usage),
}

fn drive(log: &Log, phase: &AtomicU8, cfg: &CommitConfig, tick: &dyn Fn(f64)) -> Window {
    let sleep_in_steps = |secs: f64| {
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let mut last = Instant::now();
        while Instant::now() < end {
            std::thread::sleep(
                Duration::from_millis(50).min(end.saturating_duration_since(Instant::now())),
            );
            let now = Instant::now();
            tick((now - last).as_secs_f64());
            last = now;
        }
    };
    sleep_in_steps(cfg.warmup);
    let before = (log.stats(), usage());
    let t0 = Instant::now();
    phase.store(PHASE_MEASURE, Ordering::Relaxed);
    sleep_in_steps(cfg.seconds);
    let after = (log.stats(), usage());
    let seconds = t0.elapsed().as_secs_f64();
    phase.store(PHASE_STOP, Ordering::Relaxed);
    Window {
        seconds,
        before,
        after,
    }
}

fn spawn_checkpointer(log: Arc<Log>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Result<()>> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let age = log.end_lsn().0.saturating_sub(log.checkpoint_lsn().0);
            if age > log.capacity_bytes() / 2 {
                // As the store's cleaner does: the slot rides on the next
                // commit's sync.
                log.checkpoint_deferred(log.durable_lsn())?;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    })
}

/// Create the run's log (once: every row reopens it, so rows measure a log
/// whose files are already allocated and recycled, not one being created).
fn create_log(cfg: &CommitConfig) -> Result<()> {
    let vfs = RealFs::new();
    super::fresh_dir(&vfs, &cfg.dir)?;
    let dir = cfg.dir.clone();
    let log = Log::create(Arc::new(vfs), &dir, log_options(cfg, CommitMode::Leader))?;
    log.close()
}

fn log_options(cfg: &CommitConfig, mode: CommitMode) -> LogOptions {
    LogOptions {
        file_size: cfg.file_size,
        file_count: cfg.file_count,
        buffer_size: cfg.buffer_size,
        mode,
        direct_io: true,
    }
}

/// Run one combination once, on the log `create_log` made.
pub fn run_row(
    cfg: &CommitConfig,
    combo: Combo,
    repeat: usize,
    tick: &dyn Fn(f64),
) -> Result<CommitRow> {
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs::with_sync_delay(Duration::from_secs_f64(
        combo.fsync_delay_ms / 1000.0,
    )));
    let dir = cfg.dir.clone();
    let (log, _) = Log::open(vfs, &dir, log_options(cfg, combo.mode), |_| Ok(()))?;
    // A record the log cannot take fails every append: refused here, not
    // left to clients that may not start before a short window ends (a
    // row of 0 commits reported as a result).
    if u64::try_from(cfg.record_bytes).map_or(true, |b| b > log.max_record_bytes()) {
        return Err(Error::InvalidArgument {
            what: "--record-bytes",
            reason: format!(
                "{} bytes, over the log's largest record of {} bytes",
                cfg.record_bytes,
                log.max_record_bytes()
            ),
        });
    }
    let log = Arc::new(log);
    let stop_ck = Arc::new(AtomicBool::new(false));
    let ck = spawn_checkpointer(log.clone(), stop_ck.clone());
    let phase = Arc::new(AtomicU8::new(PHASE_WARMUP));

    let (window, results) = if combo.is_async {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()))
            .build()
            .map_err(|e| Error::InvalidArgument {
                what: "tokio runtime",
                reason: e.to_string(),
            })?;
        let handles: Vec<_> = (0..combo.clients)
            .map(|c| {
                rt.spawn(task_loop(
                    log.clone(),
                    phase.clone(),
                    combo.durability,
                    record(cfg.record_bytes, c),
                ))
            })
            .collect();
        let window = drive(&log, &phase, cfg, tick);
        let results: Vec<ClientResult> = rt.block_on(async {
            let mut out = Vec::new();
            for h in handles {
                out.push(h.await.unwrap_or_else(|e| ClientResult {
                    latency_ns: new_hist(),
                    error: Some(Error::InvalidArgument {
                        what: "client task",
                        reason: e.to_string(),
                    }),
                }));
            }
            out
        });
        (window, results)
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..combo.clients)
                .map(|c| {
                    let log = &log;
                    let phase = &phase;
                    std::thread::Builder::new()
                        .stack_size(256 << 10)
                        .spawn_scoped(s, move || {
                            client_loop(log, phase, combo.durability, record(cfg.record_bytes, c))
                        })
                })
                .collect();
            let window = drive(&log, &phase, cfg, tick);
            let results: Vec<ClientResult> = handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h.join().unwrap_or_else(|_| ClientResult {
                        latency_ns: new_hist(),
                        error: Some(Error::InvalidArgument {
                            what: "client thread",
                            reason: "panicked".into(),
                        }),
                    }),
                    Err(e) => ClientResult {
                        latency_ns: new_hist(),
                        error: Some(Error::InvalidArgument {
                            what: "client thread",
                            reason: e.to_string(),
                        }),
                    },
                })
                .collect();
            (window, results)
        })
    };
    stop_ck.store(true, Ordering::Relaxed);
    let ck_result = ck.join();
    // Leave nothing for the next row's recovery to scan.
    log.checkpoint(log.durable_lsn())?;
    let final_stats = log.stats();
    match Arc::try_unwrap(log) {
        Ok(log) => log.close()?,
        Err(_) => {
            return Err(Error::InvalidArgument {
                what: "benchmark",
                reason: "log still shared after the run".into(),
            });
        }
    }
    let mut latency = new_hist();
    for r in results {
        if let Some(e) = r.error {
            return Err(e);
        }
        let _ = latency.add(&r.latency_ns);
    }
    match ck_result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(Error::InvalidArgument {
                what: "checkpoint thread",
                reason: "panicked".into(),
            });
        }
    }
    let (b, a) = (&window.before, &window.after);
    let commits_of = |s: &LogStats| s.commits_sync + s.commits_write + s.commits_lazy;
    let commits = commits_of(&a.0) - commits_of(&b.0);
    let per = |x: f64| x / commits.max(1) as f64;
    let syncs = (a.0.syncs + a.0.checkpoint_syncs) - (b.0.syncs + b.0.checkpoint_syncs);
    let us = |ns: u64| ns as f64 / 1000.0;
    Ok(CommitRow {
        combo,
        repeat,
        commits,
        seconds: window.seconds,
        commits_per_s: commits as f64 / window.seconds,
        fsyncs_per_commit: per(syncs as f64),
        p50_us: us(latency.value_at_quantile(0.5)),
        p99_us: us(latency.value_at_quantile(0.99)),
        max_us: us(latency.max()),
        cpu_us_per_commit: per(a.1.cpu_us - b.1.cpu_us),
        cs_per_commit: per(a.1.switches - b.1.switches),
        bytes_written_per_commit: per((a.0.write_bytes - b.0.write_bytes) as f64),
        group_size_mean: final_stats.group_size.mean,
        log: final_stats,
    })
}

/// Run every combination `repeat` times, interleaved.
pub fn run(
    cfg: &CommitConfig,
    tick: &dyn Fn(f64),
    on_row: &mut dyn FnMut(&CommitRow),
) -> Result<Vec<CommitRow>> {
    cfg.validate()?;
    create_log(cfg)?;
    let mut rows = Vec::new();
    for repeat in 0..cfg.repeat {
        for combo in cfg.combos() {
            let row = run_row(cfg, combo, repeat, tick)?;
            on_row(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Medians over repetitions, one per combination.
pub fn summarize(cfg: &CommitConfig, rows: &[CommitRow]) -> Vec<CommitSummary> {
    cfg.combos()
        .into_iter()
        .map(|combo| {
            let rs: Vec<&CommitRow> = rows.iter().filter(|r| r.combo == combo).collect();
            let m = |f: fn(&CommitRow) -> f64| {
                super::median(&rs.iter().map(|r| f(r)).collect::<Vec<f64>>())
            };
            CommitSummary {
                combo,
                runs: rs.len(),
                commits_per_s: m(|r| r.commits_per_s),
                fsyncs_per_commit: m(|r| r.fsyncs_per_commit),
                p50_us: m(|r| r.p50_us),
                p99_us: m(|r| r.p99_us),
                cpu_us_per_commit: m(|r| r.cpu_us_per_commit),
                cs_per_commit: m(|r| r.cs_per_commit),
                bytes_written_per_commit: m(|r| r.bytes_written_per_commit),
            }
        })
        .collect()
}

/// The header line of the results table.
pub fn table_header() -> String {
    format!(
        "{:<8} {:<6} {:<5} {:>7} {:>6} {:>11} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9}",
        "mode",
        "dur",
        "async",
        "clients",
        "delay",
        "commits/s",
        "fsync/c",
        "p50_us",
        "p99_us",
        "cpu_us/c",
        "cs/c",
        "bytes/c"
    )
}

/// One table line.
pub fn table_line(s: &CommitSummary) -> String {
    let c = &s.combo;
    format!(
        "{:<8} {:<6} {:<5} {:>7} {:>6} {:>11.0} {:>9.4} {:>9.1} {:>9.1} {:>8.1} {:>8.2} {:>9.0}",
        c.mode.name(),
        c.durability.name(),
        if c.is_async { "yes" } else { "no" },
        c.clients,
        c.fsync_delay_ms,
        s.commits_per_s,
        s.fsyncs_per_commit,
        s.p50_us,
        s.p99_us,
        s.cpu_us_per_commit,
        s.cs_per_commit,
        s.bytes_written_per_commit
    )
}

impl CommitRow {
    /// This row's figures in the summary shape (one run).
    pub fn figures(&self) -> CommitSummary {
        CommitSummary {
            combo: self.combo,
            runs: 1,
            commits_per_s: self.commits_per_s,
            fsyncs_per_commit: self.fsyncs_per_commit,
            p50_us: self.p50_us,
            p99_us: self.p99_us,
            cpu_us_per_commit: self.cpu_us_per_commit,
            cs_per_commit: self.cs_per_commit,
            bytes_written_per_commit: self.bytes_written_per_commit,
        }
    }
}
