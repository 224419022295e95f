//! `quill bench fsync`: what one durable 4 KiB log write costs here.
//!
//! For every way of preparing the file and every sync method, with and
//! without `O_DIRECT`, write 4 KiB blocks at consecutive aligned offsets and
//! make each durable before the next, timing each write + sync:
//!
//! * preparation `append`: the file starts empty and grows with each write;
//! * `fallocate`: the file is `fallocate`d to full size first (unwritten
//!   extents, so each first write converts one);
//! * `overwrite`: the file was zero-filled and synced once, then overwritten
//!   (what Quill's preallocated, recycled log files do);
//! * `rewrite`: as `overwrite`, but every write hits the same block (a log's
//!   partial tail block, rewritten by every commit of a single client).
//!
//! Sync methods: `fdatasync` after a plain write; `O_DSYNC` on open; and
//! `RWF_DSYNC` on each `pwritev2`. On ext4 the first two preparations make
//! each sync commit a journal transaction (size or extent changes), which is
//! what the `overwrite` rows avoid.
//!
//! Where the file system has no `fallocate` (FUSE, some network file
//! systems), the `fallocate` rows are left out and the report says so
//! ([`FsyncReport::fallocate_unsupported`]); the other rows still run.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use quill::io::{AlignedBuf, File, OpenOptions, Vfs};
use quill::{Error, Result};

/// How the file is prepared before the timed writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Preparation {
    /// Grow the file with every write.
    Append,
    /// `fallocate` the whole file first.
    Fallocate,
    /// Zero-fill and sync the whole file once, then overwrite.
    Overwrite,
    /// Like `overwrite`, but every write goes to the same block: what a log
    /// does at one client, rewriting its partial tail block per commit.
    Rewrite,
}

/// How each write is made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// `pwrite` then `fdatasync`.
    Fdatasync,
    /// File opened `O_DSYNC`; `pwrite` alone.
    ODsync,
    /// `pwritev2(..., RWF_DSYNC)`.
    RwfDsync,
}

impl Method {
    /// Every method.
    pub const ALL: [Method; 3] = [Method::Fdatasync, Method::ODsync, Method::RwfDsync];

    /// Parse a command-line name (`fdatasync`, `o_dsync`, `rwf_dsync`).
    pub fn parse(s: &str) -> Option<Method> {
        match s.to_ascii_lowercase().as_str() {
            "fdatasync" => Some(Method::Fdatasync),
            "o_dsync" | "odsync" => Some(Method::ODsync),
            "rwf_dsync" | "rwfdsync" => Some(Method::RwfDsync),
            _ => None,
        }
    }

    /// Name as printed.
    pub fn name(self) -> &'static str {
        match self {
            Method::Fdatasync => "fdatasync",
            Method::ODsync => "O_DSYNC",
            Method::RwfDsync => "RWF_DSYNC",
        }
    }
}

impl Preparation {
    /// Every preparation.
    pub const ALL: [Preparation; 4] = [
        Preparation::Append,
        Preparation::Fallocate,
        Preparation::Overwrite,
        Preparation::Rewrite,
    ];

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Option<Preparation> {
        match s.to_ascii_lowercase().as_str() {
            "append" => Some(Preparation::Append),
            "fallocate" => Some(Preparation::Fallocate),
            "overwrite" => Some(Preparation::Overwrite),
            "rewrite" => Some(Preparation::Rewrite),
            _ => None,
        }
    }

    /// Name as printed.
    pub fn name(self) -> &'static str {
        match self {
            Preparation::Append => "append",
            Preparation::Fallocate => "fallocate",
            Preparation::Overwrite => "overwrite",
            Preparation::Rewrite => "rewrite",
        }
    }
}

/// Parameters of a run.
#[derive(Clone, Debug)]
pub struct FsyncConfig {
    /// Directory on the file system under test.
    pub dir: PathBuf,
    /// Timed writes per combination and round.
    pub iterations: usize,
    /// Rounds; combinations are interleaved within each round.
    pub rounds: usize,
    /// Also run with buffered I/O (no `O_DIRECT`).
    pub buffered: bool,
    /// Preparations to measure (all when empty).
    pub preparations: Vec<Preparation>,
    /// Sync methods to measure (all when empty).
    pub methods: Vec<Method>,
}

/// One measured combination.
#[derive(Clone, Debug, Serialize)]
pub struct FsyncRow {
    /// File preparation.
    pub preparation: Preparation,
    /// Sync method.
    pub method: Method,
    /// Whether `O_DIRECT` was in effect.
    pub direct: bool,
    /// Timed writes (all rounds).
    pub samples: usize,
    /// Median latency of write + sync, microseconds.
    pub p50_us: f64,
    /// 99th percentile, microseconds.
    pub p99_us: f64,
    /// Mean, microseconds.
    pub mean_us: f64,
    /// Largest, microseconds.
    pub max_us: f64,
    /// Median of the write call alone (fdatasync method only), microseconds.
    pub write_p50_us: Option<f64>,
    /// Median of the per-round medians, microseconds (noise check).
    pub round_p50s_us: Vec<f64>,
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct FsyncReport {
    /// Rows in run order of the first round.
    pub rows: Vec<FsyncRow>,
    /// The row with the lowest median.
    pub fastest: Option<FsyncRow>,
    /// The file system does not support `fallocate`: the `fallocate` rows
    /// could not run and are missing from `rows`.
    pub fallocate_unsupported: bool,
}

/// One (preparation, method, direct) combination.
#[derive(Clone, Copy, Debug)]
struct Combo {
    prep: Preparation,
    method: Method,
    direct: bool,
}

fn combos(cfg: &FsyncConfig) -> Vec<Combo> {
    let mut out = Vec::new();
    for direct in [true, false] {
        if !direct && !cfg.buffered {
            continue;
        }
        for prep in Preparation::ALL {
            if !cfg.preparations.is_empty() && !cfg.preparations.contains(&prep) {
                continue;
            }
            for method in Method::ALL {
                if !cfg.methods.is_empty() && !cfg.methods.contains(&method) {
                    continue;
                }
                out.push(Combo {
                    prep,
                    method,
                    direct,
                });
            }
        }
    }
    out
}

struct Samples {
    total_ns: Vec<u64>,
    write_ns: Vec<u64>,
    round_p50_ns: Vec<u64>,
    direct: bool,
}

fn prepare(
    vfs: &dyn Vfs,
    path: &Path,
    prep: Preparation,
    size: u64,
    direct: bool,
    method: Method,
) -> Result<Box<dyn File>> {
    if vfs.exists(path)? {
        vfs.remove_file(path)?;
    }
    let opts = OpenOptions {
        create: true,
        write: true,
        direct,
        dsync: method == Method::ODsync,
        ..OpenOptions::default()
    };
    // Prepare with a plain handle (zero-fill must not pay O_DSYNC per chunk).
    {
        let f = vfs.open(
            path,
            OpenOptions {
                dsync: false,
                ..opts
            },
        )?;
        match prep {
            Preparation::Append => {}
            Preparation::Fallocate => f.allocate(0, size)?,
            Preparation::Overwrite | Preparation::Rewrite => {
                let zeros = AlignedBuf::new(1 << 20);
                let mut at = 0;
                while at < size {
                    let n = (size - at).min(zeros.len() as u64) as usize;
                    f.write_all_at(zeros.get(..n).unwrap_or_default(), at)?;
                    at += n as u64;
                }
            }
        }
        f.sync_all()?;
    }
    if let Some(parent) = path.parent() {
        vfs.sync_dir(parent)?;
    }
    Ok(vfs.open(path, opts)?)
}

fn run_one(
    vfs: &dyn Vfs,
    path: &Path,
    combo: Combo,
    n: usize,
    out: &mut Samples,
    tick: &dyn Fn(),
) -> Result<()> {
    let Combo {
        prep,
        method,
        direct,
    } = combo;
    let size = n as u64 * 4096;
    let f = prepare(vfs, path, prep, size, direct, method)?;
    out.direct = f.is_direct();
    let mut block = AlignedBuf::new(4096);
    let mut round = Vec::with_capacity(n);
    for i in 0..n {
        // Different bytes every time, so nothing can be skipped as unchanged.
        let stamp = (i as u64 + 1).to_le_bytes();
        for chunk in block.chunks_mut(8) {
            chunk.copy_from_slice(&stamp);
        }
        let at = if prep == Preparation::Rewrite {
            0
        } else {
            i as u64 * 4096
        };
        let t0 = Instant::now();
        match method {
            Method::Fdatasync => {
                f.write_all_at(&block, at)?;
                let t1 = Instant::now();
                f.sync_data()?;
                out.write_ns.push((t1 - t0).as_nanos() as u64);
            }
            Method::ODsync => f.write_all_at(&block, at)?,
            Method::RwfDsync => f.write_all_at_dsync(&block, at)?,
        }
        let ns = t0.elapsed().as_nanos() as u64;
        round.push(ns);
        out.total_ns.push(ns);
        tick();
    }
    drop(f);
    vfs.remove_file(path)?;
    round.sort_unstable();
    out.round_p50_ns.push(super::quantile(&round, 0.5));
    Ok(())
}

/// Run the benchmark. `tick` is called after every timed write (progress).
pub fn run(vfs: &dyn Vfs, cfg: &FsyncConfig, tick: &dyn Fn()) -> Result<FsyncReport> {
    if cfg.iterations == 0 || cfg.rounds == 0 {
        return Err(Error::InvalidArgument {
            what: "iterations/rounds",
            reason: "must be at least 1".into(),
        });
    }
    vfs.create_dir_all(&cfg.dir)?;
    let path = cfg.dir.join("quill-fsync-bench.tmp");
    let list = combos(cfg);
    let mut samples: Vec<Samples> = list
        .iter()
        .map(|_| Samples {
            total_ns: Vec::new(),
            write_ns: Vec::new(),
            round_p50_ns: Vec::new(),
            direct: false,
        })
        .collect();
    let mut fallocate_unsupported = false;
    for _ in 0..cfg.rounds {
        for (&combo, s) in list.iter().zip(samples.iter_mut()) {
            if combo.prep == Preparation::Fallocate && fallocate_unsupported {
                continue;
            }
            match run_one(vfs, &path, combo, cfg.iterations, s, tick) {
                Err(Error::Io(e)) if combo.prep == Preparation::Fallocate && e.is_unsupported() => {
                    fallocate_unsupported = true;
                }
                other => other?,
            }
        }
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    let rows: Vec<FsyncRow> = list
        .iter()
        .zip(samples.iter_mut())
        .filter(|(_, s)| !s.total_ns.is_empty())
        .map(|(combo, s)| {
            s.total_ns.sort_unstable();
            s.write_ns.sort_unstable();
            let mean = s.total_ns.iter().sum::<u64>() as f64 / s.total_ns.len().max(1) as f64;
            FsyncRow {
                preparation: combo.prep,
                method: combo.method,
                direct: s.direct,
                samples: s.total_ns.len(),
                p50_us: us(super::quantile(&s.total_ns, 0.5)),
                p99_us: us(super::quantile(&s.total_ns, 0.99)),
                mean_us: mean / 1000.0,
                max_us: us(s.total_ns.last().copied().unwrap_or(0)),
                write_p50_us: (!s.write_ns.is_empty())
                    .then(|| us(super::quantile(&s.write_ns, 0.5))),
                round_p50s_us: s.round_p50_ns.iter().map(|&n| us(n)).collect(),
            }
        })
        .collect();
    let fastest = rows
        .iter()
        .min_by(|a, b| a.p50_us.total_cmp(&b.p50_us))
        .cloned();
    Ok(FsyncReport {
        rows,
        fastest,
        fallocate_unsupported,
    })
}

/// Total timed writes a config performs (for a progress bar).
pub fn total_writes(cfg: &FsyncConfig) -> u64 {
    (combos(cfg).len() * cfg.iterations * cfg.rounds) as u64
}

/// The report as a table, one line per row, and the fastest combination.
pub fn table(report: &FsyncReport) -> String {
    use std::fmt::Write as _;
    let mut out = format!(
        "{:<10} {:<10} {:<8} {:>8} {:>10} {:>10} {:>10} {:>12}\n",
        "prep", "method", "direct", "samples", "p50_us", "p99_us", "max_us", "write_p50_us"
    );
    for r in &report.rows {
        let _ = writeln!(
            out,
            "{:<10} {:<10} {:<8} {:>8} {:>10.1} {:>10.1} {:>10.1} {:>12}",
            r.preparation.name(),
            r.method.name(),
            if r.direct { "yes" } else { "no" },
            r.samples,
            r.p50_us,
            r.p99_us,
            r.max_us,
            r.write_p50_us.map_or("-".into(), |w| format!("{w:.1}")),
        );
    }
    if report.fallocate_unsupported {
        println!("fallocate: not supported by this file system (its rows were skipped)");
    }
    if let Some(f) = &report.fastest {
        let _ = writeln!(
            out,
            "fastest: {} + {} (direct: {}), median {:.1} us => at most {:.0} durable commits/s for one client",
            f.preparation.name(),
            f.method.name(),
            f.direct,
            f.p50_us,
            1e6 / f.p50_us.max(0.001)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use quill::io::SimFs;

    /// Without `fallocate` the benchmark still runs every other row and
    /// says why the `fallocate` rows are missing.
    #[test]
    fn unsupported_fallocate_skips_its_rows_only() {
        let fs = SimFs::new(7);
        fs.refuse_allocate(true);
        let cfg = FsyncConfig {
            dir: PathBuf::from("/bench"),
            iterations: 3,
            rounds: 2,
            buffered: false,
            preparations: Vec::new(),
            methods: Vec::new(),
        };
        let report = run(&fs, &cfg, &|| {}).unwrap();
        assert!(report.fallocate_unsupported);
        assert_eq!(report.rows.len(), 9);
        assert!(
            report
                .rows
                .iter()
                .all(|r| r.preparation != Preparation::Fallocate && r.samples == 6)
        );
        fs.refuse_allocate(false);
        let report = run(&fs, &cfg, &|| {}).unwrap();
        assert!(!report.fallocate_unsupported);
        assert_eq!(report.rows.len(), 12);
    }
}
