//! `quill bench fsync`: what one durable 4 KiB write costs on this file
//! system, per sync method and way of preparing the file.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use quill_bench::Machine;

use crate::results::save_json;
use crate::ui::progress;
use quill::io::RealFs;
use quill_bench::fsync;

/// Arguments of `quill bench fsync`.
#[derive(Args)]
pub struct FsyncArgs {
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

fn parse_preparation(s: &str) -> std::result::Result<fsync::Preparation, String> {
    fsync::Preparation::parse(s)
        .ok_or_else(|| format!("{s:?}: expected append, fallocate or overwrite"))
}

fn parse_method(s: &str) -> std::result::Result<fsync::Method, String> {
    fsync::Method::parse(s)
        .ok_or_else(|| format!("{s:?}: expected fdatasync, o_dsync or rwf_dsync"))
}

/// Run `quill bench fsync`.
pub fn run(a: FsyncArgs) -> Result<()> {
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
        "quill bench fsync: {} rounds x {} aligned 4 KiB write+sync per combination {}",
        a.rounds,
        a.iterations,
        machine.place(&a.dir)
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
