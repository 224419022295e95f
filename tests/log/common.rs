use std::path::Path;
use std::sync::Arc;

use quill::io::{SimFs, Vfs};
use quill::log::{Log, LogOptions, RecoveryReport};

/// A small log: 3 files of 64 KiB, a 16 KiB buffer (4 KiB fragments), so
/// tests wrap the circle and split records quickly.
pub fn small_opts() -> LogOptions {
    LogOptions {
        file_size: 64 << 10,
        file_count: 3,
        buffer_size: 16 << 10,
        ..LogOptions::default()
    }
}

/// A record as the test appended or recovery returned it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    pub end: u64,
    pub rtype: u8,
    pub payload: Vec<u8>,
}

pub fn dir() -> &'static Path {
    Path::new("/db/log")
}

pub fn vfs(fs: &SimFs) -> Arc<dyn Vfs> {
    Arc::new(fs.clone())
}

/// Open the log in `dir()` on `fs`, collecting every recovered record.
pub fn open_collect(
    fs: &SimFs,
    opts: LogOptions,
) -> quill::Result<(Log, Vec<Rec>, RecoveryReport)> {
    let mut recs = Vec::new();
    let (log, report) = Log::open(vfs(fs), dir(), opts, |r| {
        recs.push(Rec {
            end: r.end.0,
            rtype: r.rtype,
            payload: r.payload.to_vec(),
        });
        Ok(())
    })?;
    Ok((log, recs, report))
}

#[path = "../support/testdata.rs"]
mod testdata;
/// Deterministic bytes for item `i` of length `len`.
pub use testdata::bytes as payload;

/// A thread that checkpoints at the durable LSN whenever more than `frac`
/// of the log is in use, checking every `every`, until the returned flag is
/// set. Stands in for the storage layer's page cleaner.
pub fn spawn_checkpointer(
    log: std::sync::Arc<Log>,
    frac: u64,
    every: std::time::Duration,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<()>,
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let h = std::thread::spawn(move || {
        while !flag.load(Ordering::Acquire) {
            if log.end_lsn().0 - log.checkpoint_lsn().0 > log.capacity_bytes() / frac {
                log.checkpoint(log.durable_lsn()).unwrap();
            }
            std::thread::sleep(every);
        }
    });
    (stop, h)
}
