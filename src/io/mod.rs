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
    ///
    /// The OS message is part of this error's own text and deliberately not
    /// exposed as [`std::error::Error::source`]: a caller that prints the
    /// chain (`anyhow`'s `{:#}`) would otherwise print it twice.
    #[error("{op} {}: {error}", path.display())]
    Os {
        /// The operation (`open`, `write`, `fdatasync`, ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
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
        matches!(self, IoError::Os { error, .. } if error.kind() == std::io::ErrorKind::NotFound)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 13 item 9: the CLI prints errors with anyhow's `{:#}` (the
    /// whole `source()` chain); the OS message must appear once, and a
    /// caller printing only `Display` must still see it.
    #[test]
    fn os_error_message_printed_once() {
        let os = std::io::Error::from_raw_os_error(30); // EROFS
        let msg = os.to_string();
        assert!(msg.contains("os error 30"), "{msg}");
        let e = crate::Error::Io(IoError::Os {
            op: "open",
            path: PathBuf::from("/ro/log/log.000"),
            error: os,
        });
        assert_eq!(e.to_string(), format!("open /ro/log/log.000: {msg}"));
        let chain = format!("{:#}", anyhow::Error::new(e));
        assert_eq!(chain.matches(&msg).count(), 1, "{chain}");
        assert_eq!(chain, format!("open /ro/log/log.000: {msg}"));
        let context = format!(
            "{:#}",
            anyhow::Error::new(crate::Error::Io(IoError::Os {
                op: "fdatasync",
                path: PathBuf::from("/d/f"),
                error: std::io::Error::from_raw_os_error(30),
            }))
            .context("opening the database")
        );
        assert_eq!(context.matches("os error 30").count(), 1, "{context}");
    }
}
