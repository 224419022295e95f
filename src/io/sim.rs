//! A simulated disk for crash and fault tests.
//!
//! Model (the crash model of `ARCHITECTURE.md`):
//! * Every file (inode) keeps `durable` bytes, what survives a power loss, and
//!   `current` bytes, what reads see. A write changes `current` and is queued
//!   as pending; `sync_data`/`sync_all` make every pending change of that file
//!   durable, in order; an `RWF_DSYNC` write makes only itself durable.
//! * Directory entries (create, rename, remove) are durable only after
//!   `sync_dir` of the parent directory. Directories themselves are created
//!   durable (a simplification: Quill creates them before anything else).
//! * [`SimFs::crash`] builds the disk a reboot would see: for each pending
//!   write, the [`CrashMode`] and the seed choose to drop it, keep it, or tear
//!   it (keep a random subset of its 512-byte sectors); each unsynced
//!   directory change is kept or lost. Handles from before the crash fail with
//!   [`IoError::Crashed`] from then on.
//! * Faults: the n-th write or sync from now can fail (once, or from then on),
//!   and every sync can take extra time. A dsync write counts as a write and
//!   a sync for faults, statistics and latency.
//! * A file system without `fallocate`: after [`SimFs::refuse_allocate`],
//!   every `allocate` fails with `EOPNOTSUPP`, as FUSE and some network file
//!   systems answer, so [`File::preallocate`](super::File::preallocate)
//!   takes its zero-filling fallback. The refusal survives [`SimFs::crash`]
//!   (it is a property of the file system). Setting the environment variable
//!   `QUILL_SIMFS_REFUSE_ALLOCATE=1` makes every new disk refuse from the
//!   start, so a whole test suite can run that way:
//!   `QUILL_SIMFS_REFUSE_ALLOCATE=1 cargo test --test log --test storage --test txn`
//!   (`.ci/run` does).
//!
//! Invariants:
//! 1. `durable` only changes by sync (of everything pending, in order) or by a
//!    dsync write; a crash never invents bytes that no write produced.
//! 2. Within one crash, pending writes are applied in their original order,
//!    so a kept later write wins over a kept earlier one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::{DirLock, File, IoError, IoResult, LockKind, OpenOptions, Vfs, check_aligned};

const SECTOR: u64 = 512;

/// What a simulated power loss does to writes no completed sync covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Each unsynced write is dropped, kept, or torn at 512-byte sector
    /// boundaries, chosen by the seed; each unsynced directory change is kept
    /// or lost likewise.
    Random,
    /// Every unsynced write and directory change is lost.
    DropUnsynced,
    /// Every unsynced write and directory change survives (a process crash).
    KeepUnsynced,
}

/// Operation counts of a simulated disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Writes (including dsync writes).
    pub writes: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Syncs (`sync_data` and `sync_all`).
    pub syncs: u64,
    /// Reads.
    pub reads: u64,
}

#[derive(Debug)]
enum Pending {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Default)]
struct Inode {
    current: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
}

#[derive(Debug, Default)]
struct Fault {
    /// Operations of this kind still to succeed before one fails.
    after: Option<u64>,
    /// Keep failing once triggered.
    sticky: bool,
    triggered: bool,
}

impl Fault {
    /// A fault that fires after `n` more operations succeed (and on every
    /// later one, with `sticky`).
    fn armed(n: u64, sticky: bool) -> Fault {
        Fault {
            after: Some(n),
            sticky,
            triggered: false,
        }
    }

    /// Count one operation; true if it must fail.
    fn fire(&mut self) -> bool {
        if self.triggered && self.sticky {
            return true;
        }
        match self.after {
            Some(0) => {
                self.after = None;
                self.triggered = true;
                true
            }
            Some(n) => {
                self.after = Some(n - 1);
                false
            }
            None => false,
        }
    }
}

#[derive(Debug)]
struct State {
    crashed: bool,
    names: BTreeMap<PathBuf, u64>,
    durable_names: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    inodes: HashMap<u64, Inode>,
    next_inode: u64,
    rng: SmallRng,
    write_fault: Fault,
    sync_fault: Fault,
    read_fault: Fault,
    sync_latency: Duration,
    stats: SimStats,
    /// Directory locks held: (exclusive, shared holders). A crash
    /// releases them all, as the death of every process does.
    locks: HashMap<PathBuf, (bool, u32)>,
    /// Mounted read-only: every change fails with `EROFS`.
    read_only: bool,
    /// `allocate` fails with `EOPNOTSUPP`.
    refuse_allocate: bool,
}

/// The simulated disk. Cloning gives another handle to the same disk.
#[derive(Clone, Debug)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
    seed: u64,
}

impl SimFs {
    /// Environment variable that, set to `1`, makes [`SimFs::new`] refuse
    /// `allocate` (see the module documentation).
    pub const REFUSE_ALLOCATE_ENV: &str = "QUILL_SIMFS_REFUSE_ALLOCATE";

    /// An empty disk whose random choices (tears, faults) follow `seed`.
    /// It refuses `allocate` if the environment variable
    /// `QUILL_SIMFS_REFUSE_ALLOCATE` is `1` ([`SimFs::REFUSE_ALLOCATE_ENV`]).
    pub fn new(seed: u64) -> Self {
        let refuse_allocate = std::env::var_os(Self::REFUSE_ALLOCATE_ENV).is_some_and(|v| v == "1");
        let mut dirs = BTreeSet::new();
        dirs.insert(PathBuf::from("/"));
        SimFs {
            state: Arc::new(Mutex::new(State {
                crashed: false,
                names: BTreeMap::new(),
                durable_names: BTreeMap::new(),
                dirs,
                inodes: HashMap::new(),
                next_inode: 1,
                rng: SmallRng::seed_from_u64(seed),
                write_fault: Fault::default(),
                sync_fault: Fault::default(),
                read_fault: Fault::default(),
                sync_latency: Duration::ZERO,
                stats: SimStats::default(),
                locks: HashMap::new(),
                read_only: false,
                refuse_allocate,
            })),
            seed,
        }
    }

    /// With `refuse` set, every `allocate` from now on fails with
    /// `EOPNOTSUPP`, like a file system without `fallocate`; unset, it
    /// works again.
    pub fn refuse_allocate(&self, refuse: bool) {
        self.state.lock().refuse_allocate = refuse;
    }

    /// The seed this disk was created with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Fail the write that comes after `n` more successful writes; with
    /// `sticky`, every write after it fails too.
    pub fn fail_write_after(&self, n: u64, sticky: bool) {
        let mut st = self.state.lock();
        st.write_fault = Fault::armed(n, sticky);
    }

    /// Fail the read that comes after `n` more successful reads (a
    /// vectored read is one); with `sticky`, every read after it fails
    /// too.
    pub fn fail_read_after(&self, n: u64, sticky: bool) {
        let mut st = self.state.lock();
        st.read_fault = Fault::armed(n, sticky);
    }

    /// Fail the sync that comes after `n` more successful syncs; with
    /// `sticky`, every sync after it fails too.
    pub fn fail_sync_after(&self, n: u64, sticky: bool) {
        let mut st = self.state.lock();
        st.sync_fault = Fault::armed(n, sticky);
    }

    /// Mount the disk read-only (or read-write again): from now on every
    /// open for writing, write, sync, allocation, length change and
    /// directory change fails as a read-only file system's does (`EROFS`).
    pub fn set_read_only(&self, read_only: bool) {
        self.state.lock().read_only = read_only;
    }

    /// Make every sync take `latency` longer.
    pub fn set_sync_latency(&self, latency: Duration) {
        self.state.lock().sync_latency = latency;
    }

    /// Operation counts so far.
    pub fn stats(&self) -> SimStats {
        self.state.lock().stats
    }

    /// What reads of `path` would return now, if it exists.
    pub fn current_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state.lock();
        let ino = st.names.get(path)?;
        st.inodes.get(ino).map(|i| i.current.clone())
    }

    /// Overwrite bytes of `path` in place, in both the current and durable
    /// images (models media corruption). Returns false if out of range.
    pub fn corrupt(&self, path: &Path, offset: u64, bytes: &[u8]) -> bool {
        let mut st = self.state.lock();
        let Some(&ino) = st.names.get(path) else {
            return false;
        };
        let Some(inode) = st.inodes.get_mut(&ino) else {
            return false;
        };
        let start = offset as usize;
        let end = start + bytes.len();
        let mut ok = false;
        for img in [&mut inode.current, &mut inode.durable] {
            if let Some(dst) = img.get_mut(start..end) {
                dst.copy_from_slice(bytes);
                ok = true;
            }
        }
        ok
    }

    /// Simulate a power loss: this disk (and every handle on it) is dead from
    /// now on, and the returned disk holds what a reboot would find.
    pub fn crash(&self, mode: CrashMode) -> SimFs {
        let mut st = self.state.lock();
        st.crashed = true;
        let mut rng = st.rng.clone();
        let crash_seed: u64 = rng.random();

        // Directory entries.
        let mut names = BTreeMap::new();
        let all: BTreeSet<PathBuf> = st
            .names
            .keys()
            .chain(st.durable_names.keys())
            .cloned()
            .collect();
        for path in all {
            let cur = st.names.get(&path).copied();
            let dur = st.durable_names.get(&path).copied();
            let pick = if cur == dur {
                cur
            } else {
                match mode {
                    CrashMode::KeepUnsynced => cur,
                    CrashMode::DropUnsynced => dur,
                    CrashMode::Random => {
                        if rng.random_bool(0.5) {
                            cur
                        } else {
                            dur
                        }
                    }
                }
            };
            if let Some(ino) = pick {
                names.insert(path, ino);
            }
        }

        // File contents.
        let mut inodes = HashMap::new();
        for ino in names.values().copied().collect::<BTreeSet<u64>>() {
            let Some(old) = st.inodes.get(&ino) else {
                continue;
            };
            let mut img = old.durable.clone();
            for p in &old.pending {
                match p {
                    Pending::Write { offset, data } => {
                        let fate = match mode {
                            CrashMode::KeepUnsynced => 1,
                            CrashMode::DropUnsynced => 0,
                            CrashMode::Random => rng.random_range(0..3u8),
                        };
                        match fate {
                            0 => {}
                            1 => apply_write(&mut img, *offset, data),
                            _ => apply_torn(&mut img, *offset, data, &mut rng),
                        }
                    }
                    Pending::SetLen(len) => {
                        let keep = match mode {
                            CrashMode::KeepUnsynced => true,
                            CrashMode::DropUnsynced => false,
                            CrashMode::Random => rng.random_bool(0.5),
                        };
                        if keep {
                            img.resize(*len as usize, 0);
                        }
                    }
                }
            }
            inodes.insert(
                ino,
                Inode {
                    current: img.clone(),
                    durable: img,
                    pending: Vec::new(),
                },
            );
        }

        SimFs {
            state: Arc::new(Mutex::new(State {
                crashed: false,
                durable_names: names.clone(),
                names,
                dirs: st.dirs.clone(),
                inodes,
                next_inode: st.next_inode,
                rng: SmallRng::seed_from_u64(crash_seed),
                write_fault: Fault::default(),
                sync_fault: Fault::default(),
                read_fault: Fault::default(),
                sync_latency: Duration::ZERO,
                stats: SimStats::default(),
                locks: HashMap::new(),
                read_only: false,
                refuse_allocate: st.refuse_allocate,
            })),
            seed: crash_seed,
        }
    }
}

fn apply_write(img: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    let end = start + data.len();
    if img.len() < end {
        img.resize(end, 0);
    }
    if let Some(dst) = img.get_mut(start..end) {
        dst.copy_from_slice(data);
    }
}

/// A random subset of the write's 512-byte sectors (aligned to file
/// offsets), each with its offset: what survives when the write tears.
fn torn_sectors<'a>(offset: u64, data: &'a [u8], rng: &mut SmallRng) -> Vec<(u64, &'a [u8])> {
    let end = offset + data.len() as u64;
    let mut out = Vec::new();
    let mut at = offset;
    while at < end {
        let next = ((at / SECTOR) + 1) * SECTOR;
        let piece_end = next.min(end);
        if rng.random_bool(0.5) {
            let lo = (at - offset) as usize;
            let hi = (piece_end - offset) as usize;
            if let Some(piece) = data.get(lo..hi) {
                out.push((at, piece));
            }
        }
        at = piece_end;
    }
    out
}

/// Keep a random subset of the write's 512-byte sectors (aligned to file
/// offsets), so the write tears at sector boundaries.
fn apply_torn(img: &mut Vec<u8>, offset: u64, data: &[u8], rng: &mut SmallRng) {
    for (at, piece) in torn_sectors(offset, data, rng) {
        apply_write(img, at, piece);
    }
}

fn parent_of(path: &Path) -> PathBuf {
    path.parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"))
}

fn crashed(op: &'static str, path: &Path) -> IoError {
    IoError::Crashed {
        op,
        path: path.to_path_buf(),
    }
}

/// The error of a change on a read-only disk.
fn read_only(op: &'static str, path: &Path) -> IoError {
    IoError::Os {
        op,
        path: path.to_path_buf(),
        error: std::io::Error::from_raw_os_error(30), // EROFS
    }
}

fn not_found(op: &'static str, path: &Path) -> IoError {
    IoError::Os {
        op,
        path: path.to_path_buf(),
        error: std::io::ErrorKind::NotFound.into(),
    }
}

impl Vfs for SimFs {
    fn open(&self, path: &Path, options: OpenOptions) -> IoResult<Box<dyn File>> {
        let mut st = self.state.lock();
        if st.crashed {
            return Err(crashed("open", path));
        }
        if st.read_only && (options.write || options.create || options.create_new) {
            return Err(read_only("open", path));
        }
        let existing = st.names.get(path).copied();
        let ino = match existing {
            Some(_) if options.create_new => {
                return Err(IoError::Os {
                    op: "open",
                    path: path.to_path_buf(),
                    error: std::io::ErrorKind::AlreadyExists.into(),
                });
            }
            Some(ino) => ino,
            None if options.create || options.create_new => {
                if !st.dirs.contains(&parent_of(path)) {
                    return Err(not_found("open", path));
                }
                let ino = st.next_inode;
                st.next_inode += 1;
                st.inodes.insert(ino, Inode::default());
                st.names.insert(path.to_path_buf(), ino);
                ino
            }
            None => return Err(not_found("open", path)),
        };
        Ok(Box::new(SimFile {
            fs: self.clone(),
            ino,
            path: path.to_path_buf(),
            direct: options.direct,
            dsync: options.dsync,
        }))
    }

    fn exists(&self, path: &Path) -> IoResult<bool> {
        let st = self.state.lock();
        if st.crashed {
            return Err(crashed("stat", path));
        }
        Ok(st.names.contains_key(path) || st.dirs.contains(path))
    }

    fn create_dir_all(&self, path: &Path) -> IoResult<()> {
        let mut st = self.state.lock();
        if st.crashed {
            return Err(crashed("mkdir", path));
        }
        if st.read_only && !st.dirs.contains(path) {
            return Err(read_only("mkdir", path));
        }
        for anc in path.ancestors() {
            st.dirs.insert(anc.to_path_buf());
        }
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> IoResult<()> {
        let mut st = self.state.lock();
        if st.crashed {
            return Err(crashed("unlink", path));
        }
        if st.read_only {
            return Err(read_only("unlink", path));
        }
        st.names
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found("unlink", path))
    }

    fn rename(&self, from: &Path, to: &Path) -> IoResult<()> {
        let mut st = self.state.lock();
        if st.crashed {
            return Err(crashed("rename", from));
        }
        if st.read_only {
            return Err(read_only("rename", from));
        }
        let ino = st
            .names
            .remove(from)
            .ok_or_else(|| not_found("rename", from))?;
        st.names.insert(to.to_path_buf(), ino);
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> IoResult<()> {
        let mut st = self.state.lock();
        if st.crashed {
            return Err(crashed("fsync dir", path));
        }
        if !st.dirs.contains(path) {
            return Err(not_found("fsync dir", path));
        }
        let in_dir = |p: &Path| p.parent() == Some(path);
        st.durable_names.retain(|p, _| !in_dir(p));
        let current: Vec<(PathBuf, u64)> = st
            .names
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        st.durable_names.extend(current);
        st.stats.syncs += 1;
        Ok(())
    }

    fn remove_dir_all(&self, path: &Path) -> IoResult<()> {
        let mut st = self.state.lock();
        if st.crashed {
            return Err(crashed("rm -r", path));
        }
        if st.read_only {
            return Err(read_only("rm -r", path));
        }
        st.names.retain(|p, _| !p.starts_with(path));
        st.dirs.retain(|p| !p.starts_with(path));
        Ok(())
    }

    fn lock_dir(&self, dir: &Path, kind: LockKind) -> IoResult<DirLock> {
        let mut st = self.state.lock();
        if st.crashed {
            return Err(crashed("lock", dir));
        }
        if st.read_only && kind == LockKind::Exclusive {
            // The lock file cannot be opened for writing.
            return Err(read_only("open", &dir.join(super::LOCK_FILE)));
        }
        let entry = st.locks.entry(dir.to_path_buf()).or_insert((false, 0));
        let free = match kind {
            LockKind::Exclusive => !entry.0 && entry.1 == 0,
            LockKind::Shared => !entry.0,
        };
        if !free {
            return Err(IoError::Locked {
                dir: dir.to_path_buf(),
                holder: None,
            });
        }
        match kind {
            LockKind::Exclusive => entry.0 = true,
            LockKind::Shared => entry.1 += 1,
        }
        Ok(DirLock::new(Box::new(SimLock {
            state: self.state.clone(),
            dir: dir.to_path_buf(),
            kind,
        })))
    }

    fn list_dir(&self, path: &Path) -> IoResult<Vec<String>> {
        let st = self.state.lock();
        if st.crashed {
            return Err(crashed("readdir", path));
        }
        if !st.dirs.contains(path) {
            return Err(not_found("readdir", path));
        }
        let mut names: Vec<String> = st
            .names
            .keys()
            .chain(st.dirs.iter())
            .filter(|p| p.parent() == Some(path))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }
}

/// A held directory lock of the simulated disk.
#[derive(Debug)]
struct SimLock {
    state: Arc<Mutex<State>>,
    dir: PathBuf,
    kind: LockKind,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        if let Some(entry) = st.locks.get_mut(&self.dir) {
            match self.kind {
                LockKind::Exclusive => entry.0 = false,
                LockKind::Shared => entry.1 = entry.1.saturating_sub(1),
            }
        }
    }
}

/// A handle on a simulated file.
#[derive(Debug)]
struct SimFile {
    fs: SimFs,
    ino: u64,
    path: PathBuf,
    direct: bool,
    dsync: bool,
}

impl SimFile {
    fn write(&self, op: &'static str, buf: &[u8], offset: u64, durable: bool) -> IoResult<()> {
        if self.direct {
            check_aligned(op, &self.path, buf.as_ptr(), offset, buf.len())?;
        }
        let mut guard = self.fs.state.lock();
        let st = &mut *guard;
        if st.crashed {
            return Err(crashed(op, &self.path));
        }
        if st.read_only {
            return Err(read_only(op, &self.path));
        }
        // A durable write includes a flush, so sync faults apply to it too.
        let fail = st.write_fault.fire() | (durable && st.sync_fault.fire());
        st.stats.writes += 1;
        if durable {
            st.stats.syncs += 1;
        }
        st.stats.bytes_written += buf.len() as u64;
        let inode = st
            .inodes
            .get_mut(&self.ino)
            .ok_or_else(|| not_found(op, &self.path))?;
        if fail {
            // A failed write may still have changed some sectors; those are
            // unsynced writes like any other (a crash may keep them).
            for (at, piece) in torn_sectors(offset, buf, &mut st.rng) {
                apply_write(&mut inode.current, at, piece);
                inode.pending.push(Pending::Write {
                    offset: at,
                    data: piece.to_vec(),
                });
            }
            return Err(IoError::Injected {
                op,
                path: self.path.clone(),
            });
        }
        apply_write(&mut inode.current, offset, buf);
        if durable {
            // Only this write becomes durable: trim it out of earlier pending
            // writes so a crash cannot replay older bytes over it (invariant 2).
            trim_pending(&mut inode.pending, offset, buf.len() as u64);
            apply_write(&mut inode.durable, offset, buf);
        } else {
            inode.pending.push(Pending::Write {
                offset,
                data: buf.to_vec(),
            });
        }
        let latency = if durable {
            st.sync_latency
        } else {
            Duration::ZERO
        };
        drop(guard);
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        Ok(())
    }

    fn sync(&self, op: &'static str) -> IoResult<()> {
        let latency = {
            let mut st = self.fs.state.lock();
            if st.crashed {
                return Err(crashed(op, &self.path));
            }
            st.stats.syncs += 1;
            if st.sync_fault.fire() {
                return Err(IoError::Injected {
                    op,
                    path: self.path.clone(),
                });
            }
            let inode = st
                .inodes
                .get_mut(&self.ino)
                .ok_or_else(|| not_found(op, &self.path))?;
            for p in inode.pending.drain(..) {
                match p {
                    Pending::Write { offset, data } => {
                        apply_write(&mut inode.durable, offset, &data)
                    }
                    Pending::SetLen(len) => inode.durable.resize(len as usize, 0),
                }
            }
            st.sync_latency
        };
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        Ok(())
    }
}

/// Remove `[offset, offset+len)` from every pending write.
fn trim_pending(pending: &mut Vec<Pending>, offset: u64, len: u64) {
    let end = offset + len;
    let mut out = Vec::with_capacity(pending.len());
    for p in pending.drain(..) {
        match p {
            Pending::Write { offset: o, data } => {
                let e = o + data.len() as u64;
                if e <= offset || o >= end {
                    out.push(Pending::Write { offset: o, data });
                    continue;
                }
                if o < offset {
                    let keep = (offset - o) as usize;
                    if let Some(head) = data.get(..keep) {
                        out.push(Pending::Write {
                            offset: o,
                            data: head.to_vec(),
                        });
                    }
                }
                if e > end {
                    let skip = (end - o) as usize;
                    if let Some(tail) = data.get(skip..) {
                        out.push(Pending::Write {
                            offset: end,
                            data: tail.to_vec(),
                        });
                    }
                }
            }
            other => out.push(other),
        }
    }
    *pending = out;
}

impl File for SimFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> IoResult<()> {
        self.read_vectored_exact_at(&mut [buf], offset)
    }

    fn read_vectored_exact_at(&self, bufs: &mut [&mut [u8]], offset: u64) -> IoResult<()> {
        let mut at = offset;
        if self.direct {
            for buf in bufs.iter() {
                check_aligned("read", &self.path, buf.as_ptr(), at, buf.len())?;
                at += buf.len() as u64;
            }
        }
        let mut st = self.fs.state.lock();
        if st.crashed {
            return Err(crashed("read", &self.path));
        }
        st.stats.reads += 1;
        if st.read_fault.fire() {
            return Err(IoError::Injected {
                op: "read",
                path: self.path.clone(),
            });
        }
        let inode = st
            .inodes
            .get(&self.ino)
            .ok_or_else(|| not_found("read", &self.path))?;
        let mut at = offset;
        for buf in bufs.iter_mut() {
            let start = at as usize;
            let src =
                inode
                    .current
                    .get(start..start + buf.len())
                    .ok_or_else(|| IoError::ShortRead {
                        op: "read",
                        path: self.path.clone(),
                        offset: at,
                        len: buf.len(),
                    })?;
            buf.copy_from_slice(src);
            at += buf.len() as u64;
        }
        Ok(())
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> IoResult<()> {
        self.write("write", buf, offset, self.dsync)
    }

    fn write_all_at_dsync(&self, buf: &[u8], offset: u64) -> IoResult<()> {
        self.write("write (RWF_DSYNC)", buf, offset, true)
    }

    fn sync_data(&self) -> IoResult<()> {
        self.sync("fdatasync")
    }

    fn sync_all(&self) -> IoResult<()> {
        self.sync("fsync")
    }

    fn allocate(&self, offset: u64, len: u64) -> IoResult<()> {
        let mut st = self.fs.state.lock();
        if st.crashed {
            return Err(crashed("fallocate", &self.path));
        }
        if st.read_only {
            return Err(read_only("fallocate", &self.path));
        }
        if st.refuse_allocate {
            return Err(IoError::Os {
                op: "fallocate",
                path: self.path.clone(),
                error: std::io::Error::from_raw_os_error(
                    rustix::io::Errno::OPNOTSUPP.raw_os_error(),
                ),
            });
        }
        let inode = st
            .inodes
            .get_mut(&self.ino)
            .ok_or_else(|| not_found("fallocate", &self.path))?;
        let want = offset + len;
        if (inode.current.len() as u64) < want {
            inode.current.resize(want as usize, 0);
            inode.pending.push(Pending::SetLen(want));
        }
        Ok(())
    }

    fn size(&self) -> IoResult<u64> {
        let st = self.fs.state.lock();
        if st.crashed {
            return Err(crashed("fstat", &self.path));
        }
        st.inodes
            .get(&self.ino)
            .map(|i| i.current.len() as u64)
            .ok_or_else(|| not_found("fstat", &self.path))
    }

    fn set_len(&self, len: u64) -> IoResult<()> {
        let mut st = self.fs.state.lock();
        if st.crashed {
            return Err(crashed("ftruncate", &self.path));
        }
        if st.read_only {
            return Err(read_only("ftruncate", &self.path));
        }
        let inode = st
            .inodes
            .get_mut(&self.ino)
            .ok_or_else(|| not_found("ftruncate", &self.path))?;
        inode.current.resize(len as usize, 0);
        inode.pending.push(Pending::SetLen(len));
        Ok(())
    }

    fn is_direct(&self) -> bool {
        self.direct
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_rw(fs: &SimFs, p: &str) -> Box<dyn File> {
        fs.open(
            Path::new(p),
            OpenOptions {
                create: true,
                write: true,
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn synced_writes_survive_unsynced_are_dropped() {
        let fs = SimFs::new(1);
        fs.create_dir_all(Path::new("/d")).unwrap();
        let f = open_rw(&fs, "/d/a");
        f.write_all_at(b"hello", 0).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        f.write_all_at(b"HELLO", 0).unwrap();
        let after = fs.crash(CrashMode::DropUnsynced);
        assert_eq!(after.current_bytes(Path::new("/d/a")).unwrap(), b"hello");
        assert!(matches!(f.sync_data(), Err(IoError::Crashed { .. })));
    }

    #[test]
    fn unsynced_dir_entry_can_vanish() {
        let fs = SimFs::new(2);
        fs.create_dir_all(Path::new("/d")).unwrap();
        let f = open_rw(&fs, "/d/a");
        f.write_all_at(b"x", 0).unwrap();
        f.sync_data().unwrap();
        let after = fs.crash(CrashMode::DropUnsynced);
        assert!(!after.exists(Path::new("/d/a")).unwrap());
    }

    #[test]
    fn torn_write_keeps_only_whole_sectors() {
        for seed in 0..50 {
            let fs = SimFs::new(seed);
            fs.create_dir_all(Path::new("/d")).unwrap();
            let f = open_rw(&fs, "/d/a");
            f.write_all_at(&vec![0u8; 4096], 0).unwrap();
            f.sync_data().unwrap();
            fs.sync_dir(Path::new("/d")).unwrap();
            f.write_all_at(&vec![0xAB; 4096], 0).unwrap();
            let after = fs.crash(CrashMode::Random);
            let img = after.current_bytes(Path::new("/d/a")).unwrap();
            for sector in img.chunks(512) {
                assert!(sector.iter().all(|&b| b == 0) || sector.iter().all(|&b| b == 0xAB));
            }
        }
    }

    #[test]
    fn dsync_write_is_durable_and_not_overwritten_by_older_pending() {
        let fs = SimFs::new(3);
        fs.create_dir_all(Path::new("/d")).unwrap();
        let f = open_rw(&fs, "/d/a");
        f.sync_data().unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        f.write_all_at(b"old-old", 0).unwrap();
        f.write_all_at_dsync(b"NEW", 2).unwrap();
        let after = fs.crash(CrashMode::KeepUnsynced);
        assert_eq!(after.current_bytes(Path::new("/d/a")).unwrap(), b"olNEWld");
        let fs2 = SimFs::new(3);
        fs2.create_dir_all(Path::new("/d")).unwrap();
        let g = open_rw(&fs2, "/d/a");
        g.sync_data().unwrap();
        fs2.sync_dir(Path::new("/d")).unwrap();
        g.write_all_at(b"old-old", 0).unwrap();
        g.write_all_at_dsync(b"NEW", 2).unwrap();
        let after = fs2.crash(CrashMode::DropUnsynced);
        assert_eq!(after.current_bytes(Path::new("/d/a")).unwrap(), b"\0\0NEW");
    }

    #[test]
    fn injected_faults_fire_once_or_stick() {
        let fs = SimFs::new(4);
        fs.create_dir_all(Path::new("/d")).unwrap();
        let f = open_rw(&fs, "/d/a");
        fs.fail_sync_after(1, false);
        f.sync_data().unwrap();
        assert!(matches!(f.sync_data(), Err(IoError::Injected { .. })));
        f.sync_data().unwrap();
        fs.fail_write_after(0, true);
        assert!(f.write_all_at(b"a", 0).is_err());
        assert!(f.write_all_at(b"a", 0).is_err());
    }

    #[test]
    fn directory_locks_exclude_writers_until_dropped_or_crashed() {
        let fs = SimFs::new(6);
        let d = Path::new("/d");
        fs.create_dir_all(d).unwrap();
        let w = fs.lock_dir(d, LockKind::Exclusive).unwrap();
        assert!(matches!(
            fs.lock_dir(d, LockKind::Exclusive),
            Err(IoError::Locked { .. })
        ));
        assert!(fs.lock_dir(d, LockKind::Shared).is_err());
        drop(w);
        let r1 = fs.lock_dir(d, LockKind::Shared).unwrap();
        let _r2 = fs.lock_dir(d, LockKind::Shared).unwrap();
        assert!(fs.lock_dir(d, LockKind::Exclusive).is_err());
        drop(r1);
        let _w = fs
            .lock_dir(Path::new("/other"), LockKind::Exclusive)
            .unwrap();
        // Power loss ends every holder.
        let after = fs.crash(CrashMode::DropUnsynced);
        after.lock_dir(d, LockKind::Exclusive).unwrap();
    }

    #[test]
    fn direct_handles_reject_unaligned_io() {
        let fs = SimFs::new(5);
        fs.create_dir_all(Path::new("/d")).unwrap();
        let f = fs
            .open(
                Path::new("/d/a"),
                OpenOptions {
                    create: true,
                    write: true,
                    direct: true,
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(matches!(
            f.write_all_at(&[0u8; 100], 0),
            Err(IoError::Unaligned { .. })
        ));
        let buf = crate::io::AlignedBuf::new(4096);
        f.write_all_at(&buf, 4096).unwrap();
    }
}
