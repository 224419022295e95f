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
//!   add latency to syncs, fail a chosen write or sync, and refuse
//!   `allocate` like a file system without `fallocate`
//!   ([`SimFs::refuse_allocate`], or for every disk of a test run the
//!   environment variable `QUILL_SIMFS_REFUSE_ALLOCATE=1`).
//!
//! The engine reserves file space with [`File::preallocate`]: `fallocate`
//! where the file system has it, otherwise (FUSE, some network file systems)
//! extending the file and writing zeros, with one logged warning.
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
use std::sync::atomic::{AtomicBool, Ordering};

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
        matches!(self, IoError::Os { error, .. } if error.kind() == std::io::ErrorKind::NotFound)
    }

    /// True if the file system does not support the operation at all, as
    /// opposed to failing it: `EOPNOTSUPP`/`ENOTSUP` or `ENOSYS` from the
    /// OS (what `fallocate` answers on FUSE and some network file systems),
    /// or an error of kind [`std::io::ErrorKind::Unsupported`]. The
    /// simulated disk's refused `allocate` ([`SimFs::refuse_allocate`]) is
    /// such an error. Retrying is pointless; a fallback may exist (see
    /// [`File::preallocate`]).
    pub fn is_unsupported(&self) -> bool {
        let IoError::Os { error, .. } = self else {
            return false;
        };
        if error.kind() == std::io::ErrorKind::Unsupported {
            return true;
        }
        use rustix::io::Errno;
        // ENOTSUP equals EOPNOTSUPP on Linux, not everywhere.
        Errno::from_io_error(error)
            .is_some_and(|e| e == Errno::OPNOTSUPP || e == Errno::NOTSUP || e == Errno::NOSYS)
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
    /// Read the bytes at `offset` into `bufs` in turn, filling each: the
    /// first buffer gets the bytes from `offset`, the next the bytes after
    /// those. One request to the device where the platform has vectored
    /// reads (`preadv`); this default reads each buffer on its own.
    fn read_vectored_exact_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> IoResult<()> {
        let mut at = offset;
        for buf in bufs.iter_mut() {
            self.read_exact_at(buf, at)?;
            at += buf.len() as u64;
        }
        Ok(())
    }
    /// Write all of `buf` at `offset`.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> IoResult<()>;
    /// Write all of `buf` at `offset`, durable on return (`RWF_DSYNC`).
    fn write_all_at_dsync(&self, buf: &[u8], offset: u64) -> IoResult<()>;
    /// Make all completed writes durable (`fdatasync`).
    fn sync_data(&self) -> IoResult<()>;
    /// Make the full file durable including metadata (`fsync`).
    fn sync_all(&self) -> IoResult<()>;
    /// Reserve blocks for `[offset, offset + len)` without writing them
    /// (`fallocate`); the file grows if needed. Fails with an error for
    /// which [`IoError::is_unsupported`] is true where the file system has
    /// no `fallocate`; engine code calls [`File::preallocate`] instead.
    fn allocate(&self, offset: u64, len: u64) -> IoResult<()>;
    /// Make `[offset, offset + len)` part of the file with its blocks
    /// reserved: [`File::allocate`], or where the file system does not
    /// support it (FUSE, some network file systems), extend the file and
    /// write zeros over the added bytes, as InnoDB does. Bytes that existed
    /// before are never changed (as with `fallocate`). The first fallback in
    /// the process logs one warning. Like `allocate`, nothing is durable
    /// before a sync.
    fn preallocate(&self, offset: u64, len: u64) -> IoResult<()> {
        match self.allocate(offset, len) {
            Err(e) if e.is_unsupported() => {
                warn_no_fallocate(self.path());
                zero_extend(self, offset.saturating_add(len))
            }
            other => other,
        }
    }
    /// Current size in bytes.
    fn size(&self) -> IoResult<u64>;
    /// Truncate or extend to `len` bytes.
    fn set_len(&self, len: u64) -> IoResult<()>;
    /// Whether I/O on this handle bypasses the page cache.
    fn is_direct(&self) -> bool;
}

/// Largest zero-filling write of [`File::preallocate`]'s fallback.
const ZERO_FILL_CHUNK: u64 = 1 << 20;

/// Log, once per process, that `fallocate` is unsupported where `path` lives.
fn warn_no_fallocate(path: &Path) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            path = %path.display(),
            "the file system does not support fallocate; files are zero-filled instead \
             (slower to create and grow; logged once)"
        );
    }
}

/// Extend `f` to at least `end` bytes and write zeros over what was added.
///
/// `set_len` first gives the exact size; then zeros are written in aligned
/// blocks of at most [`ZERO_FILL_CHUNK`] from the old size rounded up to
/// [`DIRECT_IO_ALIGN`] (the bytes before that share the old last block,
/// which already exists, and read as zeros after `set_len`), so direct
/// handles accept every write. On a direct handle a partial last block is
/// left to `set_len` alone; on a buffered one it is written too.
fn zero_extend<F: File + ?Sized>(f: &F, end: u64) -> IoResult<()> {
    let old = f.size()?;
    if old >= end {
        return Ok(());
    }
    f.set_len(end)?;
    let align = DIRECT_IO_ALIGN as u64;
    let stop = if f.is_direct() {
        end - end % align
    } else {
        end
    };
    let mut at = old.next_multiple_of(align);
    if at >= stop {
        return Ok(());
    }
    let zeros = AlignedBuf::new((stop - at).min(ZERO_FILL_CHUNK) as usize);
    while at < stop {
        let n = (stop - at).min(zeros.len() as u64) as usize;
        #[allow(clippy::indexing_slicing)] // n <= zeros.len() by the min above
        f.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
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

    fn open(fs: &SimFs, path: &str, direct: bool) -> Box<dyn File> {
        fs.create_dir_all(Path::new("/d")).unwrap();
        fs.open(
            Path::new(path),
            OpenOptions {
                create: true,
                write: true,
                direct,
                ..OpenOptions::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn unsupported_means_not_supported_only() {
        let os = |error: std::io::Error| IoError::Os {
            op: "fallocate",
            path: PathBuf::from("/d/a"),
            error,
        };
        for code in [
            rustix::io::Errno::OPNOTSUPP,
            rustix::io::Errno::NOTSUP,
            rustix::io::Errno::NOSYS,
        ] {
            let e = os(std::io::Error::from_raw_os_error(code.raw_os_error()));
            assert!(e.is_unsupported(), "{e}");
        }
        assert!(os(std::io::ErrorKind::Unsupported.into()).is_unsupported());
        for code in [rustix::io::Errno::NOSPC, rustix::io::Errno::INVAL] {
            let e = os(std::io::Error::from_raw_os_error(code.raw_os_error()));
            assert!(!e.is_unsupported(), "{e}");
        }
        let injected = IoError::Injected {
            op: "fallocate",
            path: PathBuf::from("/d/a"),
        };
        assert!(!injected.is_unsupported());
    }

    #[test]
    fn refused_allocate_is_unsupported() {
        let fs = SimFs::new(1);
        fs.refuse_allocate(true);
        let f = open(&fs, "/d/a", false);
        let e = f.allocate(0, 4096).unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        assert_eq!(f.size().unwrap(), 0);
        fs.refuse_allocate(false);
        f.allocate(0, 4096).unwrap();
        assert_eq!(f.size().unwrap(), 4096);
    }

    /// A refused `allocate` falls back to extending and zero-filling:
    /// the file reaches the size asked for, existing bytes stay, new bytes
    /// are zeros, written (not a hole), and durable after a sync.
    #[test]
    fn preallocate_falls_back_to_zero_fill() {
        let fs = SimFs::new(2);
        fs.refuse_allocate(true);
        let f = open(&fs, "/d/a", false);
        let old: Vec<u8> = (1..=100u8).cycle().take(5000).collect();
        f.write_all_at(&old, 0).unwrap();
        let writes = fs.stats().writes;
        let end = (3 << 20) + 100;
        f.preallocate(0, end).unwrap();
        assert_eq!(f.size().unwrap(), end);
        let img = fs.current_bytes(Path::new("/d/a")).unwrap();
        assert_eq!(img.len() as u64, end);
        assert_eq!(img.get(..old.len()).unwrap(), &old[..]);
        assert!(img.get(old.len()..).unwrap().iter().all(|&b| b == 0));
        // Zeros from 8192 (5000 rounded up) to the end, just under 3 MiB,
        // in 1 MiB chunks: three writes.
        assert_eq!(fs.stats().writes - writes, 3);
        f.sync_all().unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        let after = fs.crash(CrashMode::DropUnsynced);
        assert_eq!(after.current_bytes(Path::new("/d/a")).unwrap(), img);
        // The refusal is a property of the file system: it survives a crash.
        let g = after
            .open(Path::new("/d/a"), OpenOptions::read_write())
            .unwrap();
        assert!(g.allocate(0, end + 4096).unwrap_err().is_unsupported());
    }

    #[test]
    fn preallocate_fallback_on_a_direct_handle() {
        let fs = SimFs::new(3);
        fs.refuse_allocate(true);
        let f = open(&fs, "/d/a", true);
        let mut page = AlignedBuf::new(4096);
        page.fill(0xAB);
        f.write_all_at(&page, 0).unwrap();
        // Past the end, with an unaligned end: every write must stay aligned.
        f.preallocate(8192, (1 << 20) + 8192 + 100).unwrap();
        let end = 8192 + (1 << 20) + 8192 + 100;
        assert_eq!(f.size().unwrap(), end);
        let img = fs.current_bytes(Path::new("/d/a")).unwrap();
        assert!(img.get(..4096).unwrap().iter().all(|&b| b == 0xAB));
        assert!(img.get(4096..).unwrap().iter().all(|&b| b == 0));
        let mut back = AlignedBuf::new(4096);
        f.read_exact_at(&mut back, 4096 * 200).unwrap();
        assert!(back.iter().all(|&b| b == 0));
        f.read_exact_at(&mut back, 0).unwrap();
        assert!(back.iter().all(|&b| b == 0xAB));
        // Growing again from an unaligned size, and a range already inside
        // the file, leave existing bytes alone.
        f.preallocate(0, 4096).unwrap();
        f.preallocate(end - 100, 3 * 4096).unwrap();
        assert_eq!(f.size().unwrap(), end - 100 + 3 * 4096);
        let img2 = fs.current_bytes(Path::new("/d/a")).unwrap();
        assert_eq!(img2.get(..img.len()).unwrap(), &img[..]);
        assert!(img2.get(img.len()..).unwrap().iter().all(|&b| b == 0));
    }

    #[test]
    fn preallocate_uses_allocate_where_supported() {
        let fs = SimFs::new(4);
        fs.refuse_allocate(false);
        let f = open(&fs, "/d/a", true);
        let writes = fs.stats().writes;
        f.preallocate(0, 1 << 20).unwrap();
        assert_eq!(f.size().unwrap(), 1 << 20);
        assert_eq!(fs.stats().writes, writes, "allocate writes nothing");
    }

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
