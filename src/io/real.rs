//! The real file system, through `rustix` system calls.
//!
//! `O_DIRECT` is requested when asked; if the file system refuses it
//! (`EINVAL`, as tmpfs on older kernels does), the file is reopened buffered
//! and a warning is logged once per path. An optional delay after every sync
//! (`--fsync-delay-ms` in the benchmarks) stands in for a slow device.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{FallocateFlags, Mode, OFlags};
use rustix::io::{Errno, ReadWriteFlags};

use super::{
    DirLock, File, IoError, IoResult, LOCK_FILE, LockKind, OpenOptions, Vfs, check_aligned,
};

/// The operating system's file system.
#[derive(Clone, Debug, Default)]
pub struct RealFs {
    sync_delay: Duration,
}

impl RealFs {
    /// The real file system with no injected delay.
    pub fn new() -> Self {
        RealFs::default()
    }

    /// The real file system, sleeping `delay` after every sync (and after
    /// every `O_DSYNC`/`RWF_DSYNC` write) to imitate a slow device.
    pub fn with_sync_delay(delay: Duration) -> Self {
        RealFs { sync_delay: delay }
    }
}

fn os(op: &'static str, path: &Path, errno: Errno) -> IoError {
    IoError::Os {
        op,
        path: path.to_path_buf(),
        error: std::io::Error::from(errno),
    }
}

fn os_std(op: &'static str, path: &Path, error: std::io::Error) -> IoError {
    IoError::Os {
        op,
        path: path.to_path_buf(),
        error,
    }
}

impl Vfs for RealFs {
    fn open(&self, path: &Path, options: OpenOptions) -> IoResult<Box<dyn File>> {
        let mut flags = OFlags::CLOEXEC;
        flags |= if options.write {
            OFlags::RDWR
        } else {
            OFlags::RDONLY
        };
        if options.create_new {
            flags |= OFlags::CREATE | OFlags::EXCL;
        } else if options.create {
            flags |= OFlags::CREATE;
        }
        if options.dsync {
            flags |= OFlags::DSYNC;
        }
        let mode = Mode::from_raw_mode(0o644);
        let mut direct = options.direct;
        let refused = |direct: &mut bool| {
            tracing::warn!(
                path = %path.display(),
                "file system refuses O_DIRECT; falling back to buffered I/O"
            );
            *direct = false;
        };
        let fd = if direct && options.create_new {
            // A file system that refuses O_DIRECT creates the file before
            // refusing (ramfs, tmpfs before Linux 6.6), so an O_EXCL retry
            // would fail with EEXIST. Create buffered first (O_EXCL holds),
            // then reopen the new file with O_DIRECT.
            let created = rustix::fs::open(path, flags, mode).map_err(|e| os("open", path, e))?;
            let reopen = flags & !(OFlags::CREATE | OFlags::EXCL);
            match rustix::fs::open(path, reopen | OFlags::DIRECT, mode) {
                Ok(fd) => fd,
                Err(Errno::INVAL) => {
                    refused(&mut direct);
                    created
                }
                Err(e) => return Err(os("open", path, e)),
            }
        } else if direct {
            match rustix::fs::open(path, flags | OFlags::DIRECT, mode) {
                Ok(fd) => fd,
                Err(Errno::INVAL) => {
                    refused(&mut direct);
                    rustix::fs::open(path, flags, mode).map_err(|e| os("open", path, e))?
                }
                Err(e) => return Err(os("open", path, e)),
            }
        } else {
            rustix::fs::open(path, flags, mode).map_err(|e| os("open", path, e))?
        };
        Ok(Box::new(RealFile {
            fd,
            path: path.to_path_buf(),
            direct,
            sync_delay: self.sync_delay,
        }))
    }

    fn exists(&self, path: &Path) -> IoResult<bool> {
        match std::fs::symlink_metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(os_std("stat", path, e)),
        }
    }

    fn create_dir_all(&self, path: &Path) -> IoResult<()> {
        std::fs::create_dir_all(path).map_err(|e| os_std("mkdir", path, e))
    }

    fn remove_file(&self, path: &Path) -> IoResult<()> {
        std::fs::remove_file(path).map_err(|e| os_std("unlink", path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> IoResult<()> {
        std::fs::rename(from, to).map_err(|e| os_std("rename", from, e))
    }

    fn sync_dir(&self, path: &Path) -> IoResult<()> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| os("open dir", path, e))?;
        rustix::fs::fsync(&fd).map_err(|e| os("fsync dir", path, e))
    }

    fn remove_dir_all(&self, path: &Path) -> IoResult<()> {
        match std::fs::remove_dir_all(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(os_std("rm -r", path, e)),
            _ => Ok(()),
        }
    }

    fn lock_dir(&self, dir: &Path, kind: LockKind) -> IoResult<DirLock> {
        let path = dir.join(LOCK_FILE);
        let rw = OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC;
        let ro = OFlags::RDONLY | OFlags::CLOEXEC;
        let opened = match kind {
            // A writer creates the lock file (and names itself in it).
            LockKind::Exclusive => rustix::fs::open(&path, rw, Mode::from_raw_mode(0o644)),
            // A reader writes nothing if the file exists; if it does not,
            // it creates it so a writer that comes later sees the lock,
            // unless nothing can be created here (a read-only file system
            // or directory), where nobody can be writing.
            LockKind::Shared => match rustix::fs::open(&path, ro, Mode::empty()) {
                Err(Errno::NOENT) => {
                    match rustix::fs::open(&path, rw, Mode::from_raw_mode(0o644)) {
                        Err(Errno::ROFS | Errno::ACCESS | Errno::PERM) => {
                            return Ok(DirLock::new(Box::new(())));
                        }
                        other => other,
                    }
                }
                other => other,
            },
        };
        let fd = opened.map_err(|e| os("open", &path, e))?;
        let op = match kind {
            LockKind::Exclusive => rustix::fs::FlockOperation::NonBlockingLockExclusive,
            LockKind::Shared => rustix::fs::FlockOperation::NonBlockingLockShared,
        };
        // A lock can be held for an instant by nobody who uses the
        // database: a process that forks (to spawn a program) copies the
        // lock's descriptor into its child until the child's exec closes
        // it (CLOEXEC), so a close and reopen in a process that also
        // spawns can find its own lock still held. Retry for up to about
        // 100 ms before reporting the directory locked.
        let mut wait = std::time::Duration::from_millis(1);
        let mut waited = std::time::Duration::ZERO;
        loop {
            match rustix::fs::flock(&fd, op) {
                Ok(()) => break,
                Err(Errno::INTR) => {}
                Err(Errno::WOULDBLOCK) if waited < LOCK_RETRY => {
                    std::thread::sleep(wait);
                    waited += wait;
                    wait = (wait * 2).min(std::time::Duration::from_millis(20));
                }
                Err(Errno::WOULDBLOCK) => {
                    return Err(IoError::Locked {
                        dir: dir.to_path_buf(),
                        holder: read_pid(&fd),
                    });
                }
                Err(e) => return Err(os("flock", &path, e)),
            }
        }
        if kind == LockKind::Exclusive {
            // Name the holder for whoever finds the lock taken; best
            // effort, the lock itself is the flock.
            let pid = format!("{}\n", std::process::id());
            if rustix::fs::ftruncate(&fd, 0).is_ok() {
                let _ = rustix::io::pwrite(&fd, pid.as_bytes(), 0);
            }
        }
        Ok(DirLock::new(Box::new(HeldLock(fd))))
    }

    fn list_dir(&self, path: &Path) -> IoResult<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| os_std("readdir", path, e))? {
            let entry = entry.map_err(|e| os_std("readdir", path, e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
}

/// How long [`RealFs::lock_dir`] retries a lock that is taken.
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// An open lock file; closing it releases its `flock`.
#[derive(Debug)]
struct HeldLock(#[allow(dead_code)] OwnedFd);

/// The process id an exclusive holder wrote into its lock file.
fn read_pid(fd: &OwnedFd) -> Option<u32> {
    let mut buf = [0u8; 16];
    let n = rustix::io::pread(fd, &mut buf, 0).ok()?;
    std::str::from_utf8(buf.get(..n)?).ok()?.trim().parse().ok()
}

/// A file of the real file system.
#[derive(Debug)]
struct RealFile {
    fd: OwnedFd,
    path: PathBuf,
    direct: bool,
    sync_delay: Duration,
}

impl RealFile {
    fn delay(&self) {
        if !self.sync_delay.is_zero() {
            std::thread::sleep(self.sync_delay);
        }
    }

    fn write_loop(&self, op: &'static str, buf: &[u8], offset: u64, dsync: bool) -> IoResult<()> {
        if self.direct {
            check_aligned(op, &self.path, buf.as_ptr(), offset, buf.len())?;
        }
        let mut done = 0usize;
        while let Some(rest) = buf.get(done..).filter(|r| !r.is_empty()) {
            let at = offset + done as u64;
            let n = if dsync {
                rustix::io::pwritev2(&self.fd, &[IoSlice::new(rest)], at, ReadWriteFlags::DSYNC)
            } else {
                rustix::io::pwrite(&self.fd, rest, at)
            };
            match n {
                Ok(0) => {
                    return Err(os_std(op, &self.path, std::io::ErrorKind::WriteZero.into()));
                }
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(e) => return Err(os(op, &self.path, e)),
            }
        }
        Ok(())
    }
}

impl File for RealFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> IoResult<()> {
        if self.direct {
            check_aligned("read", &self.path, buf.as_ptr(), offset, buf.len())?;
        }
        let len = buf.len();
        let mut done = 0usize;
        while let Some(rest) = buf.get_mut(done..).filter(|r| !r.is_empty()) {
            match rustix::io::pread(&self.fd, rest, offset + done as u64) {
                Ok(0) => {
                    return Err(IoError::ShortRead {
                        op: "read",
                        path: self.path.clone(),
                        offset,
                        len,
                    });
                }
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(e) => return Err(os("read", &self.path, e)),
            }
        }
        Ok(())
    }

    fn read_vectored_exact_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> IoResult<()> {
        let mut at = offset;
        let mut total = 0usize;
        for buf in bufs.iter() {
            if self.direct {
                check_aligned("read", &self.path, buf.as_ptr(), at, buf.len())?;
            }
            at += buf.len() as u64;
            total += buf.len();
        }
        let done = {
            let mut slices: Vec<IoSliceMut<'_>> =
                bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            loop {
                match rustix::io::preadv(&self.fd, &mut slices, offset) {
                    Ok(n) => break n,
                    Err(Errno::INTR) => {}
                    Err(e) => return Err(os("read", &self.path, e)),
                }
            }
        };
        if done == total {
            return Ok(());
        }
        // A short read (the end of the file, or a request the kernel cut):
        // read again, one buffer at a time, from the first not filled
        // whole (from its start, so that a direct read stays aligned).
        let mut at = offset;
        let mut filled = 0usize;
        for buf in bufs.iter_mut() {
            let len = buf.len();
            if filled + len > done {
                self.read_exact_at(buf, at)?;
            }
            filled += len;
            at += len as u64;
        }
        Ok(())
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> IoResult<()> {
        self.write_loop("write", buf, offset, false)?;
        Ok(())
    }

    fn write_all_at_dsync(&self, buf: &[u8], offset: u64) -> IoResult<()> {
        self.write_loop("write (RWF_DSYNC)", buf, offset, true)?;
        self.delay();
        Ok(())
    }

    fn sync_data(&self) -> IoResult<()> {
        rustix::fs::fdatasync(&self.fd).map_err(|e| os("fdatasync", &self.path, e))?;
        self.delay();
        Ok(())
    }

    fn sync_all(&self) -> IoResult<()> {
        rustix::fs::fsync(&self.fd).map_err(|e| os("fsync", &self.path, e))?;
        self.delay();
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64) -> IoResult<()> {
        rustix::fs::fallocate(&self.fd, FallocateFlags::empty(), offset, len)
            .map_err(|e| os("fallocate", &self.path, e))
    }

    fn size(&self) -> IoResult<u64> {
        let st = rustix::fs::fstat(&self.fd).map_err(|e| os("fstat", &self.path, e))?;
        u64::try_from(st.st_size).map_err(|_| {
            os_std(
                "fstat",
                &self.path,
                std::io::Error::other(format!("negative file size {}", st.st_size)),
            )
        })
    }

    fn set_len(&self, len: u64) -> IoResult<()> {
        rustix::fs::ftruncate(&self.fd, len).map_err(|e| os("ftruncate", &self.path, e))
    }

    fn is_direct(&self) -> bool {
        self.direct
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::AlignedBuf;

    /// A vectored read fills its buffers in order from the offset, with
    /// direct I/O where the file system has it; one that runs past the
    /// end of the file is a short read, as `read_exact_at`'s is.
    #[test]
    fn vectored_reads_fill_their_buffers_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFs::default();
        let path = dir.path().join("f");
        let page = 4096;
        let f = fs
            .open(
                &path,
                OpenOptions {
                    create: true,
                    ..OpenOptions::read_write()
                }
                .with_direct(true),
            )
            .unwrap();
        let mut data = AlignedBuf::new(3 * page);
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i / page) as u8 + 1;
        }
        f.write_all_at(&data, 0).unwrap();
        let mut bufs: Vec<AlignedBuf> = (0..3).map(|_| AlignedBuf::new(page)).collect();
        {
            let mut refs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
            f.read_vectored_exact_at(&mut refs[..2], page as u64)
                .unwrap();
        }
        assert!(bufs[0].iter().all(|&b| b == 2));
        assert!(bufs[1].iter().all(|&b| b == 3));
        let mut refs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
        f.read_vectored_exact_at(&mut refs, 0).unwrap();
        let err = f
            .read_vectored_exact_at(&mut refs, page as u64)
            .unwrap_err();
        assert!(matches!(err, IoError::ShortRead { .. }), "{err:?}");
        assert!(bufs[0].iter().all(|&b| b == 2), "refilled from offset 4096");
        assert!(bufs[1].iter().all(|&b| b == 3));
        // A file that ends inside the last buffer: an error too (a short
        // read, or the kernel's refusal of the unaligned rest), never a
        // buffer left half filled as if whole.
        let plain = fs.open(&path, OpenOptions::read_write()).unwrap();
        plain.write_all_at(&[9; 100], 3 * page as u64).unwrap();
        let mut refs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
        f.read_vectored_exact_at(&mut refs, 2 * page as u64)
            .unwrap_err();
        f.read_vectored_exact_at(&mut refs[..1], 2 * page as u64)
            .unwrap();
        assert!(bufs[0].iter().all(|&b| b == 3));
    }

    /// A lock released and taken again at once is not reported as held
    /// while another thread of the process spawns programs (each fork
    /// copies the lock's descriptor until its exec).
    #[test]
    fn relocking_while_the_process_spawns() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFs::default();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spawner = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::process::Command::new("true").status();
                }
            })
        };
        for _ in 0..300 {
            let lock = fs.lock_dir(dir.path(), LockKind::Exclusive).unwrap();
            drop(lock);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spawner.join().unwrap();
    }
}
