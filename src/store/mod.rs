//! The storage engine below transactions: a tablespace file in a buffer
//! pool, made crash-safe by the redo log, with page allocation, fuzzy
//! checkpoints, a page cleaner, the doublewrite area and crash recovery.
//!
//! A database directory holds `data.qdb` (the tablespace), `doublewrite`
//! (unless turned off), `log/` (the redo log) and `LOCK` (the directory
//! lock, io invariant 4).
//!
//! ```no_run
//! # fn main() -> quill::Result<()> {
//! use std::sync::Arc;
//! use quill::btree::Tree;
//! use quill::store::{Store, StoreOptions};
//! use quill::Durability;
//! let vfs = Arc::new(quill::io::RealFs::new());
//! let store = Store::create(vfs, "db".as_ref(), StoreOptions::default())?;
//! let tree = Tree::create(&store)?; // named by tree.root() from now on
//! let lsn = tree.put(b"key", b"value")?; // one mini-transaction
//! store.commit(lsn, Durability::Sync)?; // durable when this returns
//! assert_eq!(tree.get(b"key")?, Some(b"value".to_vec()));
//! store.close()?;
//! # Ok(()) }
//! ```
//!
//! Invariants:
//! * T1. Recovery order at open: repair torn pages from the doublewrite
//!   area, then replay every mtr record after the checkpoint (mtr M3),
//!   then let writes start. The log's own open makes the replayed records
//!   durable before it hands them over, so pages written during recovery
//!   never run ahead of the log.
//! * T2. A checkpoint at LSN `c` is written only when every change below
//!   `c` is on a durable page: `c` = min(durable LSN, read first; oldest
//!   dirty page's lower bound, read second), and the data file is synced
//!   before the log's checkpoint slot is written (mtr M2, buffer B4).
//! * T3. Structure changes (page allocation and freeing, B+tree splits and
//!   merges) latch the superblock exclusively before any tree page, so
//!   they are serialised and the latch order superblock -> tree pages (top
//!   down) holds everywhere. Operations that change one leaf and allocate
//!   nothing never take it.
//! * T4. Writers are throttled, before they latch anything, while the
//!   log's used space (checkpoint to end, `Log::used_bytes`) is over 3/4
//!   of its capacity; the page cleaner
//!   then flushes urgently. Structure changes (the only large mtrs: splits
//!   and overflow values, at most an eighth of the log) check again after
//!   latching the superblock, which serialises them, and back off to
//!   throttle if needed; so past the limit at most one large mtr and the
//!   small leaf-only ones of the other threads (a quarter page each) use
//!   the last quarter of the log, and a writer holding latches does not
//!   wait for log space that only the cleaner could free. A store refuses
//!   a log whose records cannot hold 16 pages.
//! * T5. One open at a time: an open store holds its directory's lock
//!   exclusively (io invariant 4) from before it reads anything until
//!   everything is closed.
//! * T6. Creation is all or nothing: [`CREATING_FILE`] is made durable
//!   before any database file exists and removed (durably) only after
//!   every file is; a directory holding it is an interrupted creation,
//!   whose files are removed and created again (nothing was ever
//!   acknowledged in it). So a tablespace without its log, or a log
//!   without its tablespace, is never a creation cut short but damage,
//!   and is reported as such.
//! * T7. A tablespace is opened only with its own log: the superblock's
//!   database id (space S4) equals the log's id, checked before the
//!   doublewrite area or the log touches a page. A format 1 tablespace
//!   (no id) is bound to its log at its first open by this build.

mod alloc;
mod cleaner;
pub(crate) mod drops;
pub mod read_ahead;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use serde::{Deserialize, Serialize};

use crate::buffer::{BufferPool, DOUBLEWRITE_FILE, Doublewrite, PoolStats, frames_for};
use crate::io::{DirLock, LockKind, Vfs};
use crate::log::{Durability, Log, LogOptions, LogStats, Lsn, RecoveryReport};
use crate::mtr::{self, Mtr};
use crate::page::space::{DataFile, ROOT_SLOTS, SB_ROOTS};
use crate::page::{DEFAULT_PAGE_SIZE, PageId};
use crate::stats::Counter;
use crate::{Error, Result};

pub use alloc::{alloc_page, free_page};

/// Name of the tablespace file in a database directory.
pub const DATA_FILE: &str = "data.qdb";
/// Name of the log directory in a database directory.
pub const LOG_DIR: &str = "log";
/// Name of the file holding the statistics of the last clean close.
pub const STORE_STATS_FILE: &str = "store-stats.json";
/// Name of the file that marks a creation that has not finished (T6).
pub const CREATING_FILE: &str = "CREATING";

/// What a directory holds, as a store sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// No database files.
    Empty,
    /// An interrupted creation (T6).
    Creating,
    /// A tablespace and a log.
    Complete,
    /// A tablespace without a log.
    DataOnly,
    /// A log without a tablespace.
    LogOnly,
}

fn layout(vfs: &dyn Vfs, dir: &Path) -> Result<Layout> {
    if vfs.exists(&dir.join(CREATING_FILE))? {
        return Ok(Layout::Creating);
    }
    let data = vfs.exists(&dir.join(DATA_FILE))?;
    let log = vfs.exists(&crate::log::first_file(&dir.join(LOG_DIR)))?;
    Ok(match (data, log) {
        (false, false) => Layout::Empty,
        (true, true) => Layout::Complete,
        (true, false) => Layout::DataOnly,
        (false, true) => Layout::LogOnly,
    })
}

/// The error for a directory holding only part of a database (T6).
fn incomplete(dir: &Path, layout: Layout) -> Error {
    let (missing, advice) = match layout {
        Layout::DataOnly => (
            crate::log::first_file(&dir.join(LOG_DIR)),
            format!(
                "{} cannot be opened without the redo log it was written with: restore {}/ \
                 from where it was moved or from a backup",
                dir.join(DATA_FILE).display(),
                dir.join(LOG_DIR).display()
            ),
        ),
        _ => (
            dir.join(DATA_FILE),
            format!(
                "{}/ holds the redo log of a database whose tablespace is gone: restore {} \
                 from where it was moved or from a backup; only if the data is not wanted, \
                 remove {}/ to start an empty database",
                dir.join(LOG_DIR).display(),
                dir.join(DATA_FILE).display(),
                dir.join(LOG_DIR).display()
            ),
        ),
    };
    Error::Incomplete {
        dir: dir.to_path_buf(),
        missing,
        advice,
    }
}

/// Options for creating or opening a store.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Page size, used at creation only (default 16 KiB; 4 to 64 KiB).
    pub page_size: usize,
    /// Buffer pool size in bytes (default 128 MiB; at least 32 pages).
    pub pool_bytes: u64,
    /// Torn-page protection through the doublewrite area (default on).
    pub doublewrite: bool,
    /// Bypass the page cache for data pages (default on; falls back with
    /// a warning where the file system refuses).
    pub direct_io: bool,
    /// Run the page cleaner thread (default on). Off only for tests that
    /// flush by hand.
    pub cleaner: bool,
    /// Read ahead for long scans (default on): a range scan past its
    /// first leaf, or bounded where it goes, has the next leaves read on
    /// background threads, several at a time ([`read_ahead`]).
    pub read_ahead: bool,
    /// Redo log options.
    pub log: LogOptions,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            page_size: DEFAULT_PAGE_SIZE,
            pool_bytes: 128 << 20,
            doublewrite: true,
            direct_io: true,
            cleaner: true,
            read_ahead: true,
            log: LogOptions::default(),
        }
    }
}

/// Options for unit tests: 4 KiB pages, a 1 MiB pool and a small log
/// (3 x 256 KiB), so eviction, checkpoints and log reuse happen soon.
#[cfg(test)]
pub(crate) fn test_options() -> StoreOptions {
    StoreOptions {
        page_size: 4096,
        pool_bytes: 1 << 20,
        log: crate::log::LogOptions {
            file_size: 256 << 10,
            file_count: 3,
            buffer_size: 64 << 10,
            ..crate::log::LogOptions::default()
        },
        ..StoreOptions::default()
    }
}

/// What recovery did at open.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoreRecovery {
    /// The log scan.
    pub log: RecoveryReport,
    /// Mtr records replayed.
    pub records_applied: u64,
    /// Page changes applied (pages whose LSN was behind a record).
    pub page_changes: u64,
    /// Pages repaired from the doublewrite area.
    pub pages_repaired: Vec<u64>,
    /// Time recovery took, in total.
    pub duration: Duration,
}

#[derive(Debug, Default)]
struct StoreCounters {
    checkpoints: Counter,
    throttled: Counter,
    throttle_wait_ns: Counter,
    urgent_flushes: Counter,
    hot_page_syncs: Counter,
}

/// A snapshot of the store's state and counters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoreStats {
    /// Buffer pool and data-page/doublewrite I/O.
    pub pool: PoolStats,
    /// Redo log.
    pub log: LogStats,
    /// End LSN minus checkpoint LSN, bytes.
    pub checkpoint_age: u64,
    /// Log bytes the files hold.
    pub log_capacity: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Writers that waited for the cleaner because the log nearly filled.
    pub throttled: u64,
    /// Total time writers waited so, in nanoseconds.
    pub throttle_wait_ns: u64,
    /// Cleaner rounds that flushed urgently (age over 3/4 of capacity).
    pub urgent_flushes: u64,
    /// Log syncs a routine cleaner round made because its oldest pages
    /// stayed hot and no commit's sync covered them within 20 ms.
    #[serde(default)]
    pub hot_page_syncs: u64,
    /// Read-ahead requests (pages read ahead are `pool.read_ahead`).
    #[serde(default)]
    pub read_ahead: read_ahead::ReadAheadStats,
    /// What recovery did at the last open, if this process opened it.
    pub recovery: Option<StoreRecovery>,
}

pub(crate) struct Shared {
    pub(crate) pool: BufferPool,
    pub(crate) log: Arc<Log>,
    counters: StoreCounters,
    stop: AtomicBool,
    /// Wakes the cleaner (urgent work) and throttled writers (progress).
    bell: Mutex<u64>,
    bell_cv: Condvar,
    checkpoint_lock: Mutex<()>,
    /// Where each tree's last append went (`btree` AH1-AH3).
    append_hints: crate::btree::AppendHints,
    /// Pages scans will read next (RA1-RA4); `None` when turned off.
    read_ahead: Option<read_ahead::ReadAhead>,
}

/// An open store. All methods take `&self`; it is `Send + Sync`.
pub struct Store {
    shared: Arc<Shared>,
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    cleaner: Option<JoinHandle<()>>,
    recovery: Option<StoreRecovery>,
    closed: bool,
    /// Opened read-only: no mtr may start, nothing is written at close.
    read_only: bool,
    /// The directory lock (T5); declared last, so released last.
    _lock: DirLock,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.dir).finish()
    }
}

impl Store {
    /// Create a new, empty store in `dir` (created if missing). Fails with
    /// [`Error::AlreadyExists`] if the directory holds a database (or part
    /// of one); an interrupted creation is started again (T6).
    pub fn create(vfs: Arc<dyn Vfs>, dir: &Path, opts: StoreOptions) -> Result<Store> {
        vfs.create_dir_all(dir)?;
        let lock = vfs.lock_dir(dir, LockKind::Exclusive)?;
        match layout(vfs.as_ref(), dir)? {
            Layout::Empty => {}
            Layout::Creating => Self::remove_interrupted(vfs.as_ref(), dir)?,
            Layout::Complete | Layout::DataOnly => {
                return Err(Error::AlreadyExists {
                    path: dir.join(DATA_FILE),
                });
            }
            Layout::LogOnly => {
                return Err(Error::AlreadyExists {
                    path: crate::log::first_file(&dir.join(LOG_DIR)),
                });
            }
        }
        Self::create_locked(vfs, dir, opts, lock)
    }

    /// Open the store in `dir`, or create one if the directory (created if
    /// missing) holds no database, under one hold of the directory lock.
    pub fn open_or_create(vfs: Arc<dyn Vfs>, dir: &Path, opts: StoreOptions) -> Result<Store> {
        vfs.create_dir_all(dir)?;
        let lock = vfs.lock_dir(dir, LockKind::Exclusive)?;
        match layout(vfs.as_ref(), dir)? {
            Layout::Complete => Self::open_locked(vfs, dir, opts, lock),
            Layout::Empty => Self::create_locked(vfs, dir, opts, lock),
            Layout::Creating => {
                Self::remove_interrupted(vfs.as_ref(), dir)?;
                Self::create_locked(vfs, dir, opts, lock)
            }
            other => Err(incomplete(dir, other)),
        }
    }

    /// Remove the files of an interrupted creation (T6); the marker stays
    /// until the next creation completes.
    fn remove_interrupted(vfs: &dyn Vfs, dir: &Path) -> Result<()> {
        tracing::warn!(dir = %dir.display(), "removing the files of a database creation that did not finish");
        for name in [DATA_FILE, DOUBLEWRITE_FILE] {
            let path = dir.join(name);
            if vfs.exists(&path)? {
                vfs.remove_file(&path)?;
            }
        }
        vfs.remove_dir_all(&dir.join(LOG_DIR))?;
        vfs.sync_dir(dir)?;
        Ok(())
    }

    /// Create the database files in `dir`, whose lock is held (T5), as
    /// one step (T6): the marker, the log (which fixes the database id),
    /// the tablespace bound to it (T7), the doublewrite area, then the
    /// marker's removal.
    fn create_locked(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        opts: StoreOptions,
        lock: DirLock,
    ) -> Result<Store> {
        let marker = dir.join(CREATING_FILE);
        {
            let f = vfs.open(
                &marker,
                crate::io::OpenOptions {
                    create: true,
                    write: true,
                    ..crate::io::OpenOptions::default()
                },
            )?;
            f.set_len(0)?;
            f.write_all_at(b"a Quill database is being created here\n", 0)?;
            f.sync_all()?;
        }
        vfs.sync_dir(dir)?;
        let id = rand::random::<u128>() | 1;
        let log = Log::create_with_id(vfs.clone(), &dir.join(LOG_DIR), opts.log.clone(), id)?;
        let data = DataFile::create(
            vfs.as_ref(),
            &dir.join(DATA_FILE),
            opts.page_size,
            opts.direct_io,
            id,
        )?;
        let dw = Self::doublewrite(vfs.as_ref(), dir, &data, &opts)?;
        vfs.remove_file(&marker)?;
        vfs.sync_dir(dir)?;
        let pool = BufferPool::new(
            Arc::new(data),
            frames_for(opts.pool_bytes, opts.page_size),
            dw,
        );
        Self::start(vfs, dir, pool, log, opts, None, lock)
    }

    fn doublewrite(
        vfs: &dyn Vfs,
        dir: &Path,
        data: &DataFile,
        opts: &StoreOptions,
    ) -> Result<Option<Doublewrite>> {
        let path = dir.join(DOUBLEWRITE_FILE);
        if opts.doublewrite || vfs.exists(&path)? {
            Ok(Some(Doublewrite::open(
                vfs,
                &path,
                data.page_size(),
                opts.direct_io,
            )?))
        } else {
            Ok(None)
        }
    }

    /// Open an existing store and recover it (T1).
    pub fn open(vfs: Arc<dyn Vfs>, dir: &Path, opts: StoreOptions) -> Result<Store> {
        let lock = Self::lock_existing(vfs.as_ref(), dir, LockKind::Exclusive)?;
        Self::open_locked(vfs, dir, opts, lock)
    }

    /// Lock the directory `dir` (T5) and check that it holds a whole
    /// database (T6): `NoDatabase` for none, `Incomplete` for part of one
    /// or a creation that did not finish.
    fn lock_existing(vfs: &dyn Vfs, dir: &Path, kind: LockKind) -> Result<DirLock> {
        if !vfs.exists(dir)? {
            return Err(Error::NoDatabase {
                dir: dir.to_path_buf(),
            });
        }
        let lock = vfs.lock_dir(dir, kind)?;
        match layout(vfs, dir)? {
            Layout::Complete => Ok(lock),
            Layout::Empty => Err(Error::NoDatabase {
                dir: dir.to_path_buf(),
            }),
            Layout::Creating => Err(Error::Incomplete {
                dir: dir.to_path_buf(),
                missing: dir.join(DATA_FILE),
                advice: format!(
                    "its creation did not finish ({} is still there) and nothing was ever \
                     stored in it; open it with create_if_missing (Db::open's default) to \
                     create it again",
                    dir.join(CREATING_FILE).display()
                ),
            }),
            other => Err(incomplete(dir, other)),
        }
    }

    /// Open the store in `dir`, whose lock is held (T5), checking that its
    /// tablespace and log belong together (T7), and recover it (T1).
    fn open_locked(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        opts: StoreOptions,
        lock: DirLock,
    ) -> Result<Store> {
        let started = Instant::now();
        let data = DataFile::open(vfs.as_ref(), &dir.join(DATA_FILE), opts.direct_io, true)?;
        let page_size = data.page_size();
        let header = Self::check_identity(vfs.as_ref(), dir, &data)?;
        let old_format = data.version();
        let dw = Self::doublewrite(vfs.as_ref(), dir, &data, &opts)?;
        let checkpoint = header.checkpoint_lsn;
        let repaired = match &dw {
            Some(dw) => dw.repair(&data, checkpoint.0)?,
            None => Vec::new(),
        };
        if !repaired.is_empty() {
            tracing::warn!(pages = ?repaired, "repaired torn pages from the doublewrite area");
        }
        // Doublewrite stays in use only if asked for; an area left from
        // earlier runs is removed once it has served recovery, so its
        // images can never be mistaken for current ones (D4).
        let dw = if opts.doublewrite {
            dw
        } else {
            if dw.is_some() {
                drop(dw);
                if !repaired.is_empty() {
                    data.sync()?;
                }
                vfs.remove_file(&dir.join(DOUBLEWRITE_FILE))?;
                vfs.sync_dir(dir)?;
            }
            None
        };
        let pool = BufferPool::new(Arc::new(data), frames_for(opts.pool_bytes, page_size), dw);
        // B10: nothing recovery can replay goes past one lap of the log.
        pool.set_lsn_ceiling(checkpoint.0.saturating_add(header.capacity_bytes));
        let mut applied = 0u64;
        let mut changes = 0u64;
        let (log, report) = Log::open(vfs.clone(), &dir.join(LOG_DIR), opts.log.clone(), |rec| {
            if rec.rtype != mtr::RTYPE_MTR {
                return Err(Error::corrupt(
                    dir.join(LOG_DIR),
                    rec.lsn.0,
                    format!("log record of unknown type {}", rec.rtype),
                ));
            }
            changes += mtr::replay(&pool, rec.lsn, rec.end, rec.payload)?;
            applied += 1;
            Ok(())
        })?;
        // The superblock must be readable now (repaired or rebuilt).
        drop(pool.fetch_read(PageId(0))?);
        // B10 against the end recovery found, for what it read meanwhile.
        pool.check_lsns_below(report.end_lsn.0)?;
        let recovery = StoreRecovery {
            log: report,
            records_applied: applied,
            page_changes: changes,
            pages_repaired: repaired.iter().map(|p| p.0).collect(),
            duration: started.elapsed(),
        };
        tracing::info!(
            records = applied,
            page_changes = changes,
            repaired = repaired.len(),
            ms = recovery.duration.as_millis() as u64,
            "recovery done"
        );
        let store = Self::start(vfs, dir, pool, log, opts, Some(recovery), lock)?;
        if old_format < crate::page::space::SPACE_FORMAT_VERSION {
            store.migrate(old_format)?;
        }
        Ok(store)
    }

    /// T7: the log in `dir` is the one `data` belongs to. Returns what its
    /// files say.
    fn check_identity(vfs: &dyn Vfs, dir: &Path, data: &DataFile) -> Result<crate::log::LogHeader> {
        let header = crate::log::peek(vfs, &dir.join(LOG_DIR))?;
        if data.version() >= 2 && data.db_id() != header.id {
            return Err(Error::ForeignLog {
                log_dir: dir.join(LOG_DIR),
                log_id: header.id,
                data_file: dir.join(DATA_FILE),
                data_id: data.db_id(),
            });
        }
        Ok(header)
    }

    /// Open the store in `dir` without writing anything, ever: the
    /// directory's lock is shared (other readers may open it too, a writer
    /// may not, T5), the files are opened read-only, and nothing is
    /// repaired, recovered, flushed, checkpointed or saved. A store that
    /// needs recovery (records after the log's checkpoint) is refused with
    /// [`Error::NeedsRecovery`]; write operations fail with
    /// [`Error::ReadOnly`]. For tools (`quill check`, `status`, `dump`)
    /// and read-only file systems.
    pub fn open_read_only(vfs: Arc<dyn Vfs>, dir: &Path, opts: StoreOptions) -> Result<Store> {
        let lock = Self::lock_existing(vfs.as_ref(), dir, LockKind::Shared)?;
        let data = DataFile::open(vfs.as_ref(), &dir.join(DATA_FILE), false, false)?;
        Self::check_identity(vfs.as_ref(), dir, &data)?;
        let page_size = data.page_size();
        let (log, report) = Log::open_read_only(vfs.clone(), &dir.join(LOG_DIR), opts.log.clone())?;
        // No doublewrite area: nothing is written, and a clean log means
        // no page write can be torn (every page write precedes the
        // checkpoint that covers it, T2).
        let pool = BufferPool::new(Arc::new(data), frames_for(opts.pool_bytes, page_size), None);
        drop(pool.fetch_read(PageId(0))?);
        let recovery = StoreRecovery {
            log: report,
            records_applied: 0,
            page_changes: 0,
            pages_repaired: Vec::new(),
            duration: Duration::ZERO,
        };
        let opts = StoreOptions {
            cleaner: false,
            ..opts
        };
        let mut store = Self::start(vfs, dir, pool, log, opts, Some(recovery), lock)?;
        store.read_only = true;
        Ok(store)
    }

    /// Whether the store was opened read-only ([`Store::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Migrate a superblock of format `from` to this build's, durable on
    /// return: a format 1 one records the log's id as the database id (T7,
    /// space S4); formats 1 and 2 hold zeros where format 3 keeps its
    /// table id floor and pending drops (space S5), which read as none,
    /// so only the version changes; format 4 reads every undo record
    /// format 3 wrote (undo U5), so from 3 only the version changes too;
    /// format 5 adds the insert undo directory in root slot 2, which the
    /// database layer creates at open when the slot is empty
    /// (`txn::undo_seg`), so from 4 the version alone changes as well;
    /// format 6 lets a directory entry hold a cached page (US6), which a
    /// format 5 directory has none of, so from 5 too; format 7 lets a
    /// segment hold update undo that a row's roll pointer names by place
    /// (US7, undo U8), which a format 6 database has none of, so from 6
    /// as well; format 8 writes undo records of version 3 (undo U9) and
    /// still reads a format 7 database's version 2 ones, so from 7 too.
    fn migrate(&self, from: u32) -> Result<()> {
        use crate::page::space::{SB_DB_ID, SB_VERSION, SPACE_FORMAT_VERSION};
        let id = self.log().id();
        let mut mtr = self.mtr()?;
        let sb = mtr.latch(PageId(0), crate::buffer::Load::Verify)?;
        mtr.apply(
            sb,
            &mtr::Op::Write {
                offset: SB_VERSION as u32,
                bytes: &SPACE_FORMAT_VERSION.to_le_bytes(),
            },
        )?;
        if from < 2 {
            mtr.apply(
                sb,
                &mtr::Op::Write {
                    offset: SB_DB_ID as u32,
                    bytes: &id.to_le_bytes(),
                },
            )?;
        }
        if let Some(lsn) = mtr.commit()? {
            self.commit(lsn, Durability::Sync)?;
        }
        tracing::info!(dir = %self.dir.display(), from, to = SPACE_FORMAT_VERSION, id = %format!("{id:032x}"), "tablespace format migrated");
        Ok(())
    }

    fn start(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        pool: BufferPool,
        log: Log,
        opts: StoreOptions,
        recovery: Option<StoreRecovery>,
        lock: DirLock,
    ) -> Result<Store> {
        // One mtr (a split cascade, an overflow value) must fit one log
        // record with room to spare, and the quarter of the log kept free
        // by throttling (T4) must hold many of them.
        let need = 16 * pool.page_size() as u64;
        if log.max_record_bytes() < need {
            return Err(Error::InvalidArgument {
                what: "log size",
                reason: format!(
                    "a log of {} bytes is too small for {}-byte pages; give it at least {} bytes",
                    log.capacity_bytes(),
                    pool.page_size(),
                    need * 4
                ),
            });
        }
        let log = Arc::new(log);
        pool.set_log(log.clone());
        let shared = Arc::new(Shared {
            pool,
            log,
            counters: StoreCounters::default(),
            stop: AtomicBool::new(false),
            bell: Mutex::new(0),
            bell_cv: Condvar::new(),
            checkpoint_lock: Mutex::new(()),
            append_hints: Default::default(),
            read_ahead: opts.read_ahead.then(read_ahead::ReadAhead::default),
        });
        let cleaner = if opts.cleaner {
            let s = shared.clone();
            Some(
                std::thread::Builder::new()
                    .name("quill-cleaner".into())
                    .spawn(move || cleaner::run(&s))
                    .map_err(|e| {
                        Error::Io(crate::io::IoError::Os {
                            op: "spawn page cleaner",
                            path: PathBuf::new(),
                            error: e,
                        })
                    })?,
            )
        } else {
            None
        };
        Ok(Store {
            shared,
            vfs,
            dir: dir.to_path_buf(),
            cleaner,
            recovery,
            closed: false,
            read_only: false,
            _lock: lock,
        })
    }

    /// The buffer pool.
    pub fn pool(&self) -> &BufferPool {
        &self.shared.pool
    }

    /// The B+tree append hints of this store's trees.
    pub(crate) fn append_hints(&self) -> &crate::btree::AppendHints {
        &self.shared.append_hints
    }

    /// The redo log.
    pub fn log(&self) -> &Log {
        &self.shared.log
    }

    /// The database directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Start a mini-transaction (after throttling if the log is nearly
    /// full, T4).
    pub fn mtr(&self) -> Result<Mtr<'_>> {
        if self.read_only {
            return Err(Error::ReadOnly {
                dir: self.dir.clone(),
                what: "a change",
            });
        }
        self.shared.pool.check_poisoned()?;
        self.throttle()?;
        Ok(Mtr::new(&self.shared.pool, &self.shared.log))
    }

    /// Wait until `lsn` (an mtr's commit LSN) is durable to `durability`.
    pub fn commit(&self, lsn: Lsn, durability: Durability) -> Result<()> {
        self.shared.log.commit(lsn, durability)
    }

    /// The page id in root slot `slot` (0 when unset).
    pub fn root(&self, slot: usize) -> Result<PageId> {
        if slot >= ROOT_SLOTS {
            return Err(Error::InvalidArgument {
                what: "root slot",
                reason: format!("{slot} is not below {ROOT_SLOTS}"),
            });
        }
        let sb = self.shared.pool.fetch_read(PageId(0))?;
        Ok(PageId(crate::page::get_u64(&sb, SB_ROOTS + 8 * slot)))
    }

    /// Set root slot `slot` to `page` in `mtr`.
    pub fn set_root(&self, mtr: &mut Mtr<'_>, slot: usize, page: PageId) -> Result<()> {
        if slot >= ROOT_SLOTS {
            return Err(Error::InvalidArgument {
                what: "root slot",
                reason: format!("{slot} is not below {ROOT_SLOTS}"),
            });
        }
        let sb = mtr.latch(PageId(0), crate::buffer::Load::Verify)?;
        mtr.apply(
            sb,
            &mtr::Op::Write {
                offset: (SB_ROOTS + 8 * slot) as u32,
                bytes: &page.0.to_le_bytes(),
            },
        )
    }

    /// Whether the checkpoint age is over the throttling limit (T4).
    /// Checked on every mtr, so lock-free (`Log::used_bytes`).
    pub(crate) fn log_nearly_full(&self) -> bool {
        let log = &self.shared.log;
        log.used_bytes() > log.capacity_bytes() / 4 * 3
    }

    fn throttle(&self) -> Result<()> {
        if !self.log_nearly_full() {
            return Ok(());
        }
        // W1: before the mtr exists, so nothing has changed.
        crate::wait::check("log space (the page cleaner must free some)")?;
        let s = &self.shared;
        let t = Instant::now();
        s.counters.throttled.incr();
        while self.log_nearly_full() {
            if s.log.is_failed() {
                return Err(Error::Poisoned {
                    cause: "the redo log failed".into(),
                });
            }
            s.pool.check_poisoned()?;
            if self.cleaner.is_none() {
                // No cleaner: do its work here.
                cleaner::flush_round(s, true, false)?;
                continue;
            }
            let mut b = s.bell.lock();
            *b += 1;
            s.bell_cv.notify_all();
            s.bell_cv.wait_for(&mut b, Duration::from_millis(10));
        }
        s.counters
            .throttle_wait_ns
            .add(t.elapsed().as_nanos() as u64);
        Ok(())
    }

    /// Write a fuzzy checkpoint now (T2), durable on return. Returns its LSN.
    pub fn checkpoint(&self) -> Result<Lsn> {
        cleaner::checkpoint(&self.shared, true)
    }

    /// Write a fuzzy checkpoint (T2) as the page cleaner does every
    /// second: its slot becomes durable with the next commit's sync (no
    /// sync of its own) and takes effect only then. Returns the LSN recovery
    /// will start at once it is durable.
    pub fn checkpoint_deferred(&self) -> Result<Lsn> {
        cleaner::checkpoint(&self.shared, false)
    }

    /// Write every dirty page, then checkpoint (durable on return).
    pub fn flush_all(&self) -> Result<Lsn> {
        self.shared.pool.flush_all()?;
        cleaner::checkpoint(&self.shared, true)
    }

    /// Read every page of the tablespace from disk (bypassing the pool)
    /// and check it: each must be valid or never written. Returns the
    /// number of pages checked; the first bad page is an error naming it.
    /// Pages whose latest version is only in memory are checked as they
    /// are on disk (an older, valid version).
    pub fn scrub(&self) -> Result<u64> {
        let count = {
            let sb = self.shared.pool.fetch_read(PageId(0))?;
            crate::page::get_u64(&sb, crate::page::space::SB_PAGE_COUNT)
        };
        let file = self.shared.pool.file();
        let mut buf = crate::io::AlignedBuf::new(file.page_size());
        for id in 0..count {
            file.read_page(PageId(id), &mut buf)?;
            if let crate::page::PageCheck::Corrupt(reason) = file.check(PageId(id), &buf)? {
                return Err(Error::CorruptPage {
                    file: file.path().to_path_buf(),
                    page: id,
                    reason,
                });
            }
        }
        Ok(count)
    }

    /// A snapshot of the store's state and counters.
    pub fn stats(&self) -> StoreStats {
        let s = &self.shared;
        let log = s.log.stats();
        StoreStats {
            pool: s.pool.stats(),
            checkpoint_age: log.end_lsn.saturating_sub(log.checkpoint_lsn),
            log_capacity: log.capacity_bytes,
            log,
            checkpoints: s.counters.checkpoints.get(),
            throttled: s.counters.throttled.get(),
            throttle_wait_ns: s.counters.throttle_wait_ns.get(),
            urgent_flushes: s.counters.urgent_flushes.get(),
            hot_page_syncs: s.counters.hot_page_syncs.get(),
            read_ahead: s.read_ahead.as_ref().map(|r| r.stats()).unwrap_or_default(),
            recovery: self.recovery.clone(),
        }
    }

    /// What recovery did when this store was opened (`None` if created).
    pub fn recovery(&self) -> Option<&StoreRecovery> {
        self.recovery.as_ref()
    }

    /// Flush everything, checkpoint, stop the cleaner and read-ahead, save
    /// statistics for `quill status`, and close the log.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.stop_threads();
        if self.read_only {
            return Ok(());
        }
        let s = &self.shared;
        let mut result = Ok(());
        if !s.log.is_failed() && s.pool.check_poisoned().is_ok() {
            result = self.flush_all().map(|_| ());
        }
        let stats = self.stats();
        if let Ok(json) = serde_json::to_vec_pretty(&stats) {
            let path = self.dir.join(STORE_STATS_FILE);
            if let Err(e) = crate::io::write_small_file(self.vfs.as_ref(), &path, &json) {
                tracing::warn!(error = %e, "could not save store statistics");
            }
        }
        result
    }

    /// Ask for pages a scan will read soon to be read into the pool in
    /// the background ([`read_ahead`]; a hint: never blocks, never fails).
    pub(crate) fn read_ahead(&self, ids: &[PageId]) {
        if let Some(r) = &self.shared.read_ahead {
            r.request(&self.shared, ids);
        }
    }

    fn stop_threads(&mut self) {
        // RA3: read-ahead stops first, before anything is flushed.
        if let Some(r) = &self.shared.read_ahead {
            r.stop();
        }
        self.shared.stop.store(true, Ordering::Release);
        {
            let mut b = self.shared.bell.lock();
            *b += 1;
            self.shared.bell_cv.notify_all();
        }
        if let Some(h) = self.cleaner.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if !self.closed {
            // Without close: stop the threads but write nothing more, like
            // a process that exits (the log's own drop saves what it can).
            self.closed = true;
            self.stop_threads();
        }
    }
}

fn io_line(
    f: &mut std::fmt::Formatter<'_>,
    what: &str,
    io: &crate::page::space::IoStats,
) -> std::fmt::Result {
    writeln!(
        f,
        "  {what}: {} writes, {} bytes (write p50 {:.1} us, p99 {:.1} us); {} syncs (p50 {:.1} us, p99 {:.1} us); {} reads in {} requests",
        io.writes,
        io.write_bytes,
        io.write_latency.p50 as f64 / 1e3,
        io.write_latency.p99 as f64 / 1e3,
        io.syncs,
        io.sync_latency.p50 as f64 / 1e3,
        io.sync_latency.p99 as f64 / 1e3,
        io.reads,
        io.read_requests
    )
}

impl std::fmt::Display for StoreStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = &self.pool;
        writeln!(
            f,
            "  buffer pool: {} frames of {} bytes ({:.1} MiB); hit ratio {:.2}% ({} hits, {} misses); {} dirty; {} evictions; {} pages written by LRU flushing, {} in all ({} left for the log to catch up); {} descents waited for a busy page",
            p.frames,
            p.page_size,
            p.frames as f64 * p.page_size as f64 / 1048576.0,
            p.hit_ratio() * 100.0,
            p.hits,
            p.misses,
            p.dirty,
            p.evictions,
            p.lru_flushes,
            p.pages_flushed,
            p.flushes_deferred,
            p.busy_waits
        )?;
        writeln!(
            f,
            "  checkpoint age: {} bytes of {} bytes of log ({:.1}%); {} checkpoints; {} urgent flush rounds; {} log syncs for hot pages; {} writers throttled ({:.1} ms waiting)",
            self.checkpoint_age,
            self.log_capacity,
            self.checkpoint_age as f64 * 100.0 / self.log_capacity.max(1) as f64,
            self.checkpoints,
            self.urgent_flushes,
            self.hot_page_syncs,
            self.throttled,
            self.throttle_wait_ns as f64 / 1e6
        )?;
        let r = &self.read_ahead;
        writeln!(
            f,
            "  read-ahead: {} pages read for scans ({} asked for, {} dropped with the queue full, {} failed to read)",
            p.read_ahead, r.requested, r.dropped, r.failed
        )?;
        io_line(f, "data pages", &p.data_io)?;
        match &p.doublewrite_io {
            Some(d) => io_line(f, "doublewrite", d)?,
            None => writeln!(f, "  doublewrite: off")?,
        }
        if let Some(r) = &self.recovery {
            writeln!(
                f,
                "  recovery at open: {} records replayed ({} page changes) from LSN {} to {} in {:.1} ms; {} pages repaired from the doublewrite area",
                r.records_applied,
                r.page_changes,
                r.log.checkpoint_lsn,
                r.log.end_lsn,
                r.duration.as_secs_f64() * 1e3,
                r.pages_repaired.len()
            )?;
        }
        Ok(())
    }
}

/// A read-only description of a store on disk (for `quill status`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoreInfo {
    /// Page size.
    pub page_size: u64,
    /// Pages in the tablespace (in use or free).
    pub page_count: u64,
    /// Pages on the free list.
    pub free_pages: u64,
    /// Tablespace file size in bytes.
    pub file_bytes: u64,
    /// Root slots that are set: (slot, page).
    pub roots: Vec<(usize, u64)>,
    /// Statistics of the last clean close, if saved.
    pub last_close: Option<StoreStats>,
}

/// Describe the store in `dir` without changing it. The superblock is
/// read as it is on disk (changes still only in the log are not seen).
pub fn inspect(vfs: &dyn Vfs, dir: &Path) -> Result<StoreInfo> {
    use crate::page::space::{SB_FREE_COUNT, SB_PAGE_COUNT, SB_PAGE_SIZE};
    use crate::page::{get_u32, get_u64};
    let path = dir.join(DATA_FILE);
    if !vfs.exists(&path)? {
        return Err(Error::NotFound { path });
    }
    // Check magic and version the way open does.
    let data = DataFile::open(vfs, &path, false, false)?;
    let mut sb = crate::io::AlignedBuf::new(data.page_size());
    data.read_page(PageId(0), &mut sb)?;
    let file_bytes = vfs
        .open(&path, crate::io::OpenOptions::read_only())?
        .size()?;
    let roots = (0..ROOT_SLOTS)
        .map(|i| (i, get_u64(&sb, SB_ROOTS + 8 * i)))
        .filter(|&(_, p)| p != 0)
        .collect();
    let last_close = vfs
        .open(
            &dir.join(STORE_STATS_FILE),
            crate::io::OpenOptions::read_only(),
        )
        .ok()
        .and_then(|f| {
            let n = f.size().ok()? as usize;
            let mut buf = vec![0u8; n];
            f.read_exact_at(&mut buf, 0).ok()?;
            serde_json::from_slice(&buf).ok()
        });
    Ok(StoreInfo {
        page_size: u64::from(get_u32(&sb, SB_PAGE_SIZE)),
        page_count: get_u64(&sb, SB_PAGE_COUNT),
        free_pages: get_u64(&sb, SB_FREE_COUNT),
        file_bytes,
        roots,
        last_close,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Statistics come back from `store-stats.json`, which may hold any
    /// numbers: printing them must not overflow.
    #[test]
    fn saved_stats_with_extreme_counters_print() {
        let json = serde_json::to_value(StoreStats {
            pool: PoolStats {
                frames: u64::MAX,
                page_size: u64::MAX,
                hits: u64::MAX,
                misses: u64::MAX,
                ..PoolStats::default()
            },
            log: LogStats::default(),
            checkpoint_age: u64::MAX,
            log_capacity: 0,
            checkpoints: 0,
            throttled: 0,
            throttle_wait_ns: u64::MAX,
            urgent_flushes: 0,
            hot_page_syncs: 0,
            read_ahead: read_ahead::ReadAheadStats {
                requested: u64::MAX,
                ..Default::default()
            },
            recovery: None,
        })
        .unwrap();
        let stats: StoreStats = serde_json::from_value(json).unwrap();
        let text = stats.to_string();
        assert!(text.contains("hit ratio 50.00%"), "{text}");
    }
}
