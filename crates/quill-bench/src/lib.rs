//! Benchmarks behind `quill bench`: each prints what it measured and how,
//! and returns rows that serialise to JSON for scripts to check.
//!
//! * [`fsync`]: latency of one aligned 4 KiB write made durable, for every
//!   sync method and every way of preparing the file: the physical limit of
//!   one committer on this file system.
//! * [`commit`]: append + commit loops over the redo log for every
//!   combination of clients, commit mode, durability, async and injected
//!   sync delay.
//! * [`storage`]: the storage layer over the B+tree API.
//! * [`scan`]: range scans over a tree larger than the buffer pool,
//!   read-ahead on and off.
//! * [`txn`]: transactions through the embedded API in sysbench's shapes.
//! * [`engine`]: the engine interface the workload benchmarks drive, and
//!   Quill's implementation of it.
//! * [`oltp`]: sysbench's OLTP shapes over that interface.
//! * [`insert`]: the Insert Benchmark over that interface.
//! * [`report`]: markdown reports and charts from their JSON.
//! * `sqlite` and `rocks` (cargo feature `peers`): SQLite and RocksDB as
//!   peer engines.
//! * [`costs`]: CPU, context switches, syncs and bytes written per
//!   operation, read the same way for every engine.
//! * [`window`]: the measured window, table and filler both client
//!   benchmarks share.
//! * [`chart`]: PNG charts of throughput against client count.

pub mod chart;
pub mod commit;
pub mod costs;
pub mod engine;
pub mod fsync;
pub mod insert;
pub mod oltp;
pub mod report;
#[cfg(feature = "peers")]
pub mod rocks;
pub mod scan;
#[cfg(feature = "peers")]
pub mod sqlite;
pub mod storage;
pub mod txn;
pub mod window;

use std::path::Path;

use serde::Serialize;

use quill::io::{OpenOptions, Vfs};
use quill::{Error, Result};

/// Name of the file that marks a directory as a benchmark's own: a
/// benchmark deletes what is in its directory, so it works only in a new
/// or empty directory, or one a benchmark marked.
pub const BENCH_MARKER: &str = ".quill-bench";

/// Check that a benchmark may use `dir` (it does not exist, is empty, or
/// holds [`BENCH_MARKER`]) and mark it, creating it if needed; refuse a
/// directory holding anything else (a database, say), whose files the
/// benchmark would delete.
pub fn claim_dir(vfs: &dyn Vfs, dir: &Path) -> Result<()> {
    if vfs.exists(dir)? {
        let names = vfs.list_dir(dir)?;
        if !names.is_empty() && !names.iter().any(|n| n == BENCH_MARKER) {
            let database = names
                .iter()
                .any(|n| n == quill::store::DATA_FILE || n == "log");
            return Err(Error::InvalidArgument {
                what: "benchmark directory",
                reason: format!(
                    "{} holds {} that no Quill benchmark created ({}); a benchmark deletes \
                     what is in its directory, so give --dir a new or empty directory",
                    dir.display(),
                    if database { "a database" } else { "files" },
                    names.join(", ")
                ),
            });
        }
    } else {
        vfs.create_dir_all(dir)?;
    }
    let marker = vfs.open(
        &dir.join(BENCH_MARKER),
        OpenOptions {
            create: true,
            write: true,
            ..OpenOptions::default()
        },
    )?;
    marker.set_len(0)?;
    marker.write_all_at(
        b"This directory belongs to Quill's benchmarks, which delete what is in it.\n",
        0,
    )?;
    Ok(())
}

/// [`claim_dir`], then empty `dir` (keeping the mark): a fresh directory
/// for a benchmark run.
pub fn fresh_dir(vfs: &dyn Vfs, dir: &Path) -> Result<()> {
    claim_dir(vfs, dir)?;
    for name in vfs.list_dir(dir)? {
        if name != BENCH_MARKER {
            let path = dir.join(&name);
            if vfs.list_dir(&path).is_ok() {
                vfs.remove_dir_all(&path)?;
            } else {
                vfs.remove_file(&path)?;
            }
        }
    }
    Ok(())
}

/// Where and when a benchmark ran, recorded beside every result.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// `nproc`.
    pub nproc: usize,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// File system type and backing device of the benchmark directory.
    pub filesystem: String,
    /// Total memory in GiB.
    pub mem_gib: f64,
    /// Host name.
    pub hostname: String,
}

/// This machine's memory (`MemTotal` of `/proc/meminfo`), if it can tell.
pub fn memory_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

impl Machine {
    /// Where a benchmark ran, as its first line ends: `in DIR (file
    /// system; N cores; kernel K)`.
    pub fn place(&self, dir: &std::path::Path) -> String {
        format!(
            "in {} ({}; {} cores; kernel {})",
            dir.display(),
            self.filesystem,
            self.nproc,
            self.kernel
        )
    }

    /// Describe this machine, and the file system holding `dir`.
    pub fn describe(dir: &std::path::Path) -> Machine {
        let nproc = std::thread::available_parallelism().map_or(1, |n| n.get());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let mem_gib = memory_bytes().map_or(0.0, |b| b as f64 / f64::from(1u32 << 30));
        Machine {
            nproc,
            kernel,
            filesystem: filesystem_of(dir),
            mem_gib,
            hostname,
        }
    }
}

/// "ext4 on /dev/vda (/)" for the mount that holds `dir`, from /proc/mounts.
fn filesystem_of(dir: &std::path::Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(dev), Some(mnt), Some(fs)) = (f.first(), f.get(1), f.get(2)) else {
            continue;
        };
        if dir.starts_with(mnt) && best.as_ref().is_none_or(|(len, _)| mnt.len() > *len) {
            best = Some((mnt.len(), format!("{fs} on {dev} ({mnt})")));
        }
    }
    best.map(|(_, s)| s).unwrap_or_else(|| "unknown".into())
}

/// Seconds since the Unix epoch, for result files.
pub use quill::stats::unix_now;

/// The value at quantile `q` (0..=1) of `sorted`, nearest rank.
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted.get(rank - 1).copied().unwrap_or(0)
}

/// Median of unsorted values.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mid = n / 2;
    if n % 2 == 1 {
        v.get(mid).copied().unwrap_or(0.0)
    } else {
        (v.get(mid - 1).copied().unwrap_or(0.0) + v.get(mid).copied().unwrap_or(0.0)) / 2.0
    }
}

/// Store options for the benchmarks' unit tests: 4 KiB pages, a 1 MiB pool
/// and a small log (3 x 256 KiB), so eviction, checkpoints and log reuse
/// happen within a short run.
#[cfg(test)]
pub(crate) fn test_store_options() -> quill::store::StoreOptions {
    quill::store::StoreOptions {
        page_size: 4096,
        pool_bytes: 1 << 20,
        log: quill::log::LogOptions {
            file_size: 256 << 10,
            file_count: 3,
            buffer_size: 64 << 10,
            ..quill::log::LogOptions::default()
        },
        ..quill::store::StoreOptions::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_medians() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), 50);
        assert_eq!(quantile(&v, 0.99), 99);
        assert_eq!(quantile(&v, 1.0), 100);
        assert_eq!(quantile(&[], 0.5), 0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
