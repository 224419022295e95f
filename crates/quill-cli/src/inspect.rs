//! What `status` and `dump` share: where a database's log is, and a
//! shared lock taken only if nobody writes.

use std::path::{Path, PathBuf};

use quill::io::Vfs;

/// Default database directory of the inspection tools (relative to the
/// working directory); the benchmarks default to `quill-bench/<name>`.
pub const DEFAULT_DIR: &str = "quill-data";

/// The database directory argument `status`, `check` and `dump` share:
/// a positional `DIR`, or `--dir DIR` as `quill serve` and the benchmarks
/// spell it (not both).
#[derive(clap::Args)]
pub struct DbDir {
    /// Database directory (holding `data.qdb` and `log/`); `status` and
    /// `dump` also take a log directory. Default: quill-data.
    #[arg(value_name = "DIR", conflicts_with = "dir_flag")]
    dir_arg: Option<PathBuf>,
    /// The same directory, given as `quill serve --dir` takes it.
    #[arg(long = "dir", value_name = "DIR")]
    dir_flag: Option<PathBuf>,
}

impl DbDir {
    /// The directory given, either way, else [`DEFAULT_DIR`].
    pub fn path(&self) -> PathBuf {
        self.dir_flag
            .clone()
            .or_else(|| self.dir_arg.clone())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR))
    }
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
