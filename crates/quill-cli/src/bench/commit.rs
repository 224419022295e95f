//! `quill bench commit`: append + commit loops over the redo log.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use quill_bench::Machine;

use crate::results::save_json;
use crate::ui::{parse_size, progress, say};
use quill::log::{CommitMode, Durability};
use quill_bench::commit;

/// Arguments of `quill bench commit`.
#[derive(Args)]
pub struct CommitArgs {
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

/// Run `quill bench commit`.
pub fn run(a: CommitArgs) -> Result<()> {
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
    // (bad arguments refused before the header, and before the
    // directory is made)
    cfg.validate().context("commit benchmark")?;
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let machine = Machine::describe(&a.dir);
    let combos = cfg.combos().len();
    outln!(
        "quill bench commit: {combos} combinations x {} repeats, {:.1}s warm-up + {:.1}s measured each, {}-byte records, log {} x {} bytes {}",
        cfg.repeat,
        cfg.warmup,
        cfg.seconds,
        cfg.record_bytes,
        cfg.file_count,
        cfg.file_size,
        machine.place(&a.dir)
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
