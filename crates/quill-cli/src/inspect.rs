//! What `status` and `dump` share: where a database's log is, and a
//! shared lock taken only if nobody writes.

use std::path::{Path, PathBuf};

use quill::io::Vfs;

/// Default database directory of the inspection tools (relative to the
/// working directory); the benchmarks default to `quill-bench/<name>`.
pub const DEFAULT_DIR: &str = "quill-data";

/// The database directory argument `status`, `check` and `dump` share.
#[derive(clap::Args)]
pub struct DbDir {
    /// Database directory (holding `data.qdb` and `log/`); `status` and
    /// `dump` also take a log directory.
    #[arg(default_value = DEFAULT_DIR)]
    pub dir: PathBuf,
}

/// `DIR/log` if it exists, else `DIR`.
pub fn log_dir(dir: &Path) -> PathBuf {
    let sub = dir.join("log");
    if sub.join("log.000").exists() {
        sub
    } else {
        dir.to_path_buf()
    }
}

/// Take a shared lock on `dir` for reading it, if its lock is free; when a
/// writer holds it, say so (the files on disk may lag the live database)
/// and read anyway: status and dump only read.
pub fn read_lock(vfs: &dyn Vfs, dir: &Path) -> Option<quill::io::DirLock> {
    match vfs.lock_dir(dir, quill::io::LockKind::Shared) {
        Ok(lock) => Some(lock),
        Err(quill::io::IoError::Locked { holder, .. }) => {
            eprintln!(
                "note: {} is in use by {}; showing its files as they are on disk now (the live database may be ahead of them; for a running `quill serve`, its live counters are `SHOW quill.status` over SQL)",
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
