//! The only code in Quill that touches files.
//!
//! Every file operation of the engine goes through the [`Vfs`] and [`File`]
//! traits. Two implementations exist:
//!
//! * [`RealFs`]: `pread`/`pwrite` at offsets, `fdatasync`, `fallocate`,
//!   `O_DIRECT` with 4 KiB-aligned buffers (falling back to buffered I/O with a
//!   logged warning where the file system refuses `O_DIRECT`), `O_DSYNC` and
//!   per-write `RWF_DSYNC`. An optional injected delay after every sync stands
//!   in for a slow device.
//! * [`SimFs`]: an in-memory disk for tests that keeps durable and
//!   not-yet-synced bytes apart and, driven by a seed, can drop, keep or tear
//!   (at 512-byte boundaries) every unsynced write at a simulated power loss,
//!   add latency to syncs, and fail a chosen write or sync.
//!
//! # Invariants
//! 1. Nothing outside this module opens a file, writes, reads, or syncs.
//! 2. A file opened with `direct` accepts only I/O whose buffer address, offset
//!    and length are multiples of [`DIRECT_IO_ALIGN`]; anything else is an
//!    [`IoError::Unaligned`] (our bug), never silently bounced.
//! 3. An error from `sync_data` means nothing about which earlier writes are
//!    durable; callers must treat it as sticky (see `log`).
//! 4. A directory holding a database is locked for as long as it is open
//!    ([`Vfs::lock_dir`]): exclusively by a writer, shared by readers, so
//!    two processes (or two opens in one process) never write one database,
//!    and a reader never reads one that a writer holds.

mod aligned;
mod real;
mod sim;

use std::fmt::Debug;
use std::path::{Path, PathBuf};

pub use aligned::AlignedBuf;
pub use real::RealFs;
pub use sim::{CrashMode, SimFs, SimStats};

/// Alignment, in bytes, of buffers, offsets and lengths for direct I/O.
pub const DIRECT_IO_ALIGN: usize = 4096;

/// An error from the `io` layer. Each variant names the operation and path.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// The operating system refused or failed the operation.
    #[error("{op} {}: {source}", path.display())]
    Os {
        /// The operation (`open`, `write`, `fdatasync`, ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Direct I/O with a misaligned buffer, offset or length (a Quill bug).
    #[error("{op} {}: direct I/O needs {align}-byte alignment (offset {offset}, length {len})", path.display(), align = DIRECT_IO_ALIGN)]
    Unaligned {
        /// The operation.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// File offset requested.
        offset: u64,
        /// Length requested.
        len: usize,
    },
    /// A read ran past the end of the file.
    #[error("{op} {}: end of file at offset {offset} (wanted {len} bytes)", path.display())]
    ShortRead {
        /// The operation.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// Offset at which the read started.
        offset: u64,
        /// Bytes wanted.
        len: usize,
    },
    /// A fault injected by the simulated disk.
    #[error("{op} {}: injected I/O fault", path.display())]
    Injected {
        /// The operation that was failed.
        op: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// Another open holds the directory's lock (invariant 4).
    #[error(
        "{} is in use by {}: it holds {}; close that first (two processes writing one database would lose data)",
        dir.display(),
        holder.map_or_else(|| "another open in this or another process".to_string(), |p| format!("process {p}")),
        dir.join(LOCK_FILE).display()
    )]
    Locked {
        /// The locked directory.
        dir: PathBuf,
        /// The process id the lock file names, when it names one.
        holder: Option<u32>,
    },
    /// The simulated machine lost power; handles from before the crash are dead.
    #[error("{op} {}: the simulated machine has crashed", path.display())]
    Crashed {
        /// The operation attempted.
        op: &'static str,
        /// The file.
        path: PathBuf,
    },
}

impl IoError {
    /// True if the error means "no such file or directory".
    pub fn is_not_found(&self) -> bool {
        matches!(self, IoError::Os { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Name of the lock file [`Vfs::lock_dir`] uses in a directory.
pub const LOCK_FILE: &str = "LOCK";

/// How a directory lock is held ([`Vfs::lock_dir`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// One holder, who may write; no other holder of either kind.
    Exclusive,
    /// Any number of holders, who only read; no exclusive holder.
    Shared,
}

/// A held directory lock; dropping it releases the lock.
#[derive(Debug)]
pub struct DirLock {
    _held: Box<dyn std::fmt::Debug + Send + Sync>,
}

impl DirLock {
    /// A lock released when `held` is dropped.
    pub(crate) fn new(held: Box<dyn std::fmt::Debug + Send + Sync>) -> Self {
        DirLock { _held: held }
    }
}

/// Result alias for the `io` layer.
pub type IoResult<T> = std::result::Result<T, IoError>;

/// How to open a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Fail if the file exists (implies `create`).
    pub create_new: bool,
    /// Open for writing as well as reading.
    pub write: bool,
    /// Bypass the page cache (`O_DIRECT`). Falls back to buffered I/O, with a
    /// warning, where the file system refuses it; see [`File::is_direct`].
    pub direct: bool,
    /// Every write is durable when it returns (`O_DSYNC`).
    pub dsync: bool,
}

impl OpenOptions {
    /// Read-only, buffered.
    pub fn read_only() -> Self {
        OpenOptions::default()
    }

    /// Read-write, buffered, existing file.
    pub fn read_write() -> Self {
        OpenOptions {
            write: true,
            ..OpenOptions::default()
        }
    }

    /// Same options with `direct` set as given.
    pub fn with_direct(self, direct: bool) -> Self {
        OpenOptions { direct, ..self }
    }
}

/// A file system: the real one or the simulated disk.
pub trait Vfs: Send + Sync + Debug + 'static {
    /// Open (and perhaps create) a file.
    fn open(&self, path: &Path, options: OpenOptions) -> IoResult<Box<dyn File>>;
    /// Whether a file or directory exists at `path`.
    fn exists(&self, path: &Path) -> IoResult<bool>;
    /// Create a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> IoResult<()>;
    /// Remove a file.
    fn remove_file(&self, path: &Path) -> IoResult<()>;
    /// Rename a file, replacing the target.
    fn rename(&self, from: &Path, to: &Path) -> IoResult<()>;
    /// Make the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, path: &Path) -> IoResult<()>;
    /// Names of the entries in a directory, sorted.
    fn list_dir(&self, path: &Path) -> IoResult<Vec<String>>;
    /// Remove a directory and everything in it (no error if it is missing).
    fn remove_dir_all(&self, path: &Path) -> IoResult<()>;
    /// Lock the directory `dir` (invariant 4) through its [`LOCK_FILE`],
    /// without waiting: [`IoError::Locked`] if a conflicting holder exists
    /// (naming its process where the lock file records one). The lock is
    /// held until the returned guard is dropped or the process ends.
    fn lock_dir(&self, dir: &Path, kind: LockKind) -> IoResult<DirLock>;
}

/// An open file. All I/O is positional; there is no file cursor.
pub trait File: Send + Sync + Debug {
    /// The path this file was opened with.
    fn path(&self) -> &Path;
    /// Read exactly `buf.len()` bytes at `offset`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> IoResult<()>;
    /// Write all of `buf` at `offset`.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> IoResult<()>;
    /// Write all of `buf` at `offset`, durable on return (`RWF_DSYNC`).
    fn write_all_at_dsync(&self, buf: &[u8], offset: u64) -> IoResult<()>;
    /// Make all completed writes durable (`fdatasync`).
    fn sync_data(&self) -> IoResult<()>;
    /// Make the full file durable including metadata (`fsync`).
    fn sync_all(&self) -> IoResult<()>;
    /// Reserve blocks for `[offset, offset + len)` without writing them
    /// (`fallocate`); the file grows if needed.
    fn allocate(&self, offset: u64, len: u64) -> IoResult<()>;
    /// Current size in bytes.
    fn size(&self) -> IoResult<u64>;
    /// Truncate or extend to `len` bytes.
    fn set_len(&self, len: u64) -> IoResult<()>;
    /// Whether I/O on this handle bypasses the page cache.
    fn is_direct(&self) -> bool;
}

/// Replace the contents of a small, non-critical file (statistics):
/// buffered, not synced.
pub fn write_small_file(vfs: &dyn Vfs, path: &Path, bytes: &[u8]) -> IoResult<()> {
    let f = vfs.open(
        path,
        OpenOptions {
            create: true,
            write: true,
            ..OpenOptions::default()
        },
    )?;
    f.set_len(0)?;
    f.write_all_at(bytes, 0)
}

/// Check the direct-I/O alignment rule (invariant 2).
pub(crate) fn check_aligned(
    op: &'static str,
    path: &Path,
    ptr: *const u8,
    offset: u64,
    len: usize,
) -> IoResult<()> {
    let align = DIRECT_IO_ALIGN as u64;
    if !offset.is_multiple_of(align)
        || !(len as u64).is_multiple_of(align)
        || !(ptr as usize).is_multiple_of(DIRECT_IO_ALIGN)
    {
        return Err(IoError::Unaligned {
            op,
            path: path.to_path_buf(),
            offset,
            len,
        });
    }
    Ok(())
}
