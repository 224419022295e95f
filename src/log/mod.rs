//! The redo log: record format, log buffer, group commit, durability
//! levels, async commit, checkpoint slots, the recovery scan and metrics.
//!
//! ```no_run
//! # fn main() -> quill::Result<()> {
//! use std::sync::Arc;
//! use quill::log::{Durability, Log, LogOptions};
//! let vfs = Arc::new(quill::io::RealFs::new());
//! let log = Log::create(vfs, "db/log".as_ref(), LogOptions::default())?;
//! let lsn = log.append(1, b"hello")?;
//! log.commit(lsn, Durability::Sync)?; // durable when this returns
//! log.close()?;
//! # Ok(()) }
//! ```
//!
//! Module map (each file states its own invariants):
//! * `format.rs`: on-disk layout (file header, checkpoint slots, records).
//! * `files.rs`: the circle of preallocated files and the LSN map.
//! * `ring.rs`: the shared in-memory buffer (all `unsafe` code).
//! * `append.rs`: reserving and copying records without a mutex.
//! * `writer.rs`: aligned block writes and syncs.
//! * `group.rs`: group commit (leader, flusher, naive), async commit.
//! * `background.rs`: the optional flush and timer threads.
//! * `recovery.rs`: the scan at open.
//! * `core.rs`: shared state, LSN positions, the failed state.
//! * `metrics.rs`: counters and histograms.
//!
//! The sync method is `pwrite` of whole aligned blocks followed by
//! `fdatasync`, chosen by measurement: on this project's machines `quill
//! bench fsync` put `O_DSYNC` and `RWF_DSYNC` within noise of it on
//! preallocated files (see `bench/results/commit.md`), and a separate sync
//! is what lets the next group's write overlap the current group's sync.

mod append;
mod background;
mod core;
mod files;
pub mod format;
mod group;
mod metrics;
mod recovery;
mod ring;
mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use group::CommitFuture;
pub use metrics::LogStats;
pub use recovery::{Damage, RecoveredRecord, StopReason};

use self::core::{CheckpointState, Core};
use self::files::LogFiles;
use self::format::{BLOCK, CheckpointSlot, HEADER_AREA};
use crate::io::{AlignedBuf, DirLock, LockKind, OpenOptions, Vfs};
use crate::{Error, Result};

/// A log sequence number: a byte position in the endless log stream.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Lsn(pub u64);

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// When `commit` may return.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Durable on the device before `commit` returns (the default).
    #[default]
    Sync,
    /// Written to the operating system before `commit` returns (survives a
    /// process crash), made durable within about a second.
    Write,
    /// Acknowledged at once; written and made durable within about a second.
    Lazy,
}

/// How durable commits are grouped onto syncs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommitMode {
    /// Committing threads lead syncs in turn; no dedicated thread (default).
    #[default]
    Leader,
    /// A dedicated, demand-driven flush thread leads every sync.
    Flusher,
    /// One mutex around write + sync for every commit (a baseline only).
    Naive,
}

macro_rules! name_enum {
    ($t:ty, $what:literal, $($v:ident => $s:literal),+) => {
        impl $t {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$t] = &[$(<$t>::$v),+];
            /// The lower-case name used on the command line and in JSON.
            pub fn name(self) -> &'static str {
                match self { $(<$t>::$v => $s),+ }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
        impl FromStr for $t {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                match s {
                    $($s => Ok(<$t>::$v),)+
                    other => Err(Error::InvalidArgument {
                        what: $what,
                        reason: format!("unknown value {other:?}; expected one of: {}", [$($s),+].join(", ")),
                    }),
                }
            }
        }
    };
}

name_enum!(Durability, "durability", Sync => "sync", Write => "write", Lazy => "lazy");
name_enum!(CommitMode, "commit mode", Leader => "leader", Flusher => "flusher", Naive => "naive");

/// Options for creating or opening a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogOptions {
    /// Bytes per log file (header area included); used at creation only,
    /// an existing log keeps its own. Default 256 MiB.
    pub file_size: u64,
    /// Files in the circle; creation only. Default 1: a commit whose bytes
    /// cross from one file into the next needs a sync of each, so more
    /// files only add syncs (MariaDB moved to one log file for the same
    /// reason); the circle's wrap inside one file is one sync.
    pub file_count: u32,
    /// Bytes of in-memory log buffer: a power of two, at least 16 KiB and at
    /// most the log capacity. Default 16 MiB.
    pub buffer_size: usize,
    /// How commits are grouped onto syncs. Default [`CommitMode::Leader`].
    pub mode: CommitMode,
    /// Use `O_DIRECT` for log files where the file system allows it.
    /// Default true.
    pub direct_io: bool,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            file_size: 256 << 20,
            file_count: 1,
            buffer_size: 16 << 20,
            mode: CommitMode::Leader,
            direct_io: true,
        }
    }
}

impl LogOptions {
    fn invalid(what: &'static str, reason: String) -> Error {
        Error::InvalidArgument { what, reason }
    }

    /// Check the options for creating a log.
    pub fn validate(&self) -> Result<()> {
        if self.file_count == 0 || self.file_count > 1000 {
            return Err(Self::invalid(
                "file_count",
                format!("{} is not in 1..=1000", self.file_count),
            ));
        }
        let min_file = HEADER_AREA + 4 * BLOCK;
        if !self.file_size.is_multiple_of(BLOCK)
            || self.file_size < min_file
            || self.file_size > 1 << 40
        {
            return Err(Self::invalid(
                "file_size",
                format!(
                    "{} must be a multiple of {BLOCK} between {min_file} and 1 TiB",
                    self.file_size
                ),
            ));
        }
        let capacity = (self.file_size - HEADER_AREA) * u64::from(self.file_count);
        self.validate_buffer(capacity)
    }

    fn validate_buffer(&self, capacity: u64) -> Result<()> {
        let b = self.buffer_size as u64;
        if !b.is_power_of_two() || !(4 * BLOCK..=1 << 30).contains(&b) || b > capacity {
            return Err(Self::invalid(
                "buffer_size",
                format!(
                    "{b} must be a power of two between {} and min(1 GiB, log capacity {capacity})",
                    4 * BLOCK
                ),
            ));
        }
        Ok(())
    }
}

/// What recovery found at open.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecoveryReport {
    /// Where the scan started.
    pub checkpoint_lsn: Lsn,
    /// End of the last complete record: appends continue here.
    pub end_lsn: Lsn,
    /// Complete logical records handed to the callback.
    pub records: u64,
    /// Their payload bytes.
    pub payload_bytes: u64,
    /// Why the scan stopped.
    pub stop: StopReason,
    /// Where the stop was detected.
    pub stop_lsn: Lsn,
    /// Generation of this open.
    pub epoch: u32,
    /// Time the scan and callbacks took.
    pub duration: Duration,
}

/// The redo log of one database. Appends and commits may come from any
/// number of threads at once (`Log` is `Sync`).
#[derive(Debug)]
pub struct Log {
    core: Arc<Core>,
    vfs: Arc<dyn Vfs>,
    closed: bool,
    /// The log directory's lock (io invariant 4), released last.
    _lock: DirLock,
}

/// Name of the file in a log directory holding the statistics of the last
/// clean close (read by `quill status`).
pub const STATS_FILE: &str = "log-stats.json";

impl Log {
    /// Create a new, empty log in `dir` (created if missing; must not hold a
    /// log already). Allocates and zero-fills every file once.
    pub fn create(vfs: Arc<dyn Vfs>, dir: &Path, opts: LogOptions) -> Result<Log> {
        Log::create_with_id(vfs, dir, opts, rand::random::<u128>() | 1)
    }

    /// [`Log::create`] with a given identity, written into every file
    /// header (a store passes the database's id, so that a tablespace and
    /// its log can be matched at open).
    pub fn create_with_id(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        opts: LogOptions,
        log_id: u128,
    ) -> Result<Log> {
        opts.validate()?;
        vfs.create_dir_all(dir)?;
        let lock = vfs.lock_dir(dir, LockKind::Exclusive)?;
        let (files, slot) = LogFiles::create(
            vfs.as_ref(),
            dir,
            opts.file_count,
            opts.file_size,
            opts.direct_io,
            log_id,
        )?;
        let end = slot.checkpoint_lsn.0;
        let core = Core::new(opts, files, slot, end, &[], false);
        Log::start(core, vfs, lock)
    }

    /// Open an existing log: read the newest valid checkpoint slot, scan
    /// forward from it handing every complete record to `on_record`, make a
    /// new generation durable, and continue appending after the last
    /// complete record. A callback error aborts the open.
    pub fn open(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        opts: LogOptions,
        mut on_record: impl FnMut(&RecoveredRecord<'_>) -> Result<()>,
    ) -> Result<(Log, RecoveryReport)> {
        let started = Instant::now();
        if !vfs.exists(&dir.join(files::file_name(0)))? {
            return Err(Error::NotFound {
                path: dir.join(files::file_name(0)),
            });
        }
        let lock = vfs.lock_dir(dir, LockKind::Exclusive)?;
        let (mut files, slot) = LogFiles::open(vfs.as_ref(), dir, opts.direct_io, true)?;
        let mut opts = opts;
        let capacity = files.capacity();
        if opts.validate_buffer(capacity).is_err() {
            let fit = 1usize << (63 - (capacity / 2).max(4 * BLOCK).leading_zeros());
            tracing::debug!(
                requested = opts.buffer_size,
                used = fit,
                "log buffer size adjusted to the log's capacity"
            );
            opts.buffer_size = fit;
            opts.validate_buffer(capacity)?;
        }
        // Recovery I4: after a process crash the log's last records may sit
        // only in the page cache, where a power loss would still take them.
        // Make every file durable *before* the scan hands records over, so
        // nothing the callback builds (pages written from replayed records)
        // can outlive the records it came from, nor can the records
        // appended after them.
        for index in 0..files.count() {
            files.sync(index)?;
        }
        let outcome = recovery::scan(&files, &slot, &mut on_record)?;
        if let Some(damage) = &outcome.damage {
            return Err(damage_error(&files, &outcome, damage));
        }
        let epoch = slot
            .epoch
            .checked_add(1)
            .ok_or_else(|| Error::LimitExceeded {
                what: "log epoch (opens of one log)",
                actual: u64::from(slot.epoch) + 1,
                max: u64::from(u32::MAX),
            })?;
        let new_slot = CheckpointSlot {
            seq: slot.seq + 1,
            epoch,
            durable_lsn: Lsn(outcome.end),
            ..slot
        };
        // Before any slot goes outside file 0 (format.rs).
        files.upgrade()?;
        // Recovery I3: the new epoch is durable before any record carries it.
        let (slot_file, _) = files.locate(outcome.end);
        files.write_slot(&new_slot, slot_file)?;
        files.sync(slot_file)?;
        let report = RecoveryReport {
            checkpoint_lsn: slot.checkpoint_lsn,
            end_lsn: Lsn(outcome.end),
            records: outcome.records,
            payload_bytes: outcome.payload_bytes,
            stop: outcome.stop,
            stop_lsn: Lsn(outcome.stop_lsn),
            epoch,
            duration: started.elapsed(),
        };
        let core = Core::new(opts, files, new_slot, outcome.end, &outcome.tail, false);
        Ok((Log::start(core, vfs, lock)?, report))
    }

    /// Open an existing log without writing to it: the files are opened
    /// read-only, the directory's lock is shared (readers together, never
    /// beside a writer), and nothing is synced, appended, checkpointed or
    /// saved, ever. A log with records after its checkpoint still needs
    /// recovery (their changes may not be on the pages yet), which writes:
    /// that is [`Error::NeedsRecovery`], as is damage (recovery rule 6).
    pub fn open_read_only(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        opts: LogOptions,
    ) -> Result<(Log, RecoveryReport)> {
        let started = Instant::now();
        let first = first_file(dir);
        if !vfs.exists(&first)? {
            return Err(Error::NotFound { path: first });
        }
        let lock = vfs.lock_dir(dir, LockKind::Shared)?;
        let (files, slot) = LogFiles::open(vfs.as_ref(), dir, false, false)?;
        let outcome = recovery::scan(&files, &slot, &mut |_| Ok(()))?;
        if let Some(damage) = &outcome.damage {
            return Err(damage_error(&files, &outcome, damage));
        }
        if outcome.records > 0 {
            return Err(Error::NeedsRecovery {
                dir: dir.to_path_buf(),
                reason: format!(
                    "its redo log holds {} records ({} bytes) after the last checkpoint, which \
                     recovery must apply",
                    outcome.records,
                    outcome.end - slot.checkpoint_lsn.0
                ),
            });
        }
        let report = RecoveryReport {
            checkpoint_lsn: slot.checkpoint_lsn,
            end_lsn: Lsn(outcome.end),
            records: 0,
            payload_bytes: 0,
            stop: outcome.stop,
            stop_lsn: Lsn(outcome.stop_lsn),
            epoch: slot.epoch,
            duration: started.elapsed(),
        };
        // Nothing is appended: the smallest buffer will do.
        let opts = LogOptions {
            buffer_size: 4 * BLOCK as usize,
            mode: CommitMode::Leader,
            ..opts
        };
        let core = Core::new(opts, files, slot, outcome.end, &outcome.tail, true);
        Ok((Log::start(core, vfs, lock)?, report))
    }

    /// Whether the log was opened read-only ([`Log::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.core.read_only
    }

    fn start(core: Arc<Core>, vfs: Arc<dyn Vfs>, lock: DirLock) -> Result<Log> {
        if core.opts.mode == CommitMode::Flusher {
            core.ensure_flusher()?;
        }
        Ok(Log {
            core,
            vfs,
            closed: false,
            _lock: lock,
        })
    }

    /// The log's random identity (in every file header; a store's
    /// database id).
    pub fn id(&self) -> u128 {
        self.core.files.header.log_id
    }

    /// Append one record of type `rtype` (the caller's own tag, returned by
    /// recovery). Returns the LSN just past it: pass it to [`Log::commit`] to
    /// wait for durability. Records of any size up to a quarter of the log's
    /// capacity are accepted.
    pub fn append(&self, rtype: u8, payload: &[u8]) -> Result<Lsn> {
        self.core.append(rtype, payload).map(Lsn)
    }

    /// Return once everything up to `lsn` is durable to `durability`'s level.
    /// On a write or sync failure every waiting and later commit gets an
    /// error (the log must be reopened).
    pub fn commit(&self, lsn: Lsn, durability: Durability) -> Result<()> {
        self.core.commit(lsn.0, durability)
    }

    /// Make the log durable up to `lsn` for the caller's own needs (the
    /// write-ahead rule before a page write, a checkpoint), through the same
    /// group commit as a `Sync` commit, but not counted as a commit: the
    /// syncs it causes show in [`LogStats::syncs`] without a commit to
    /// share them with.
    pub fn make_durable(&self, lsn: Lsn) -> Result<()> {
        self.core.check_failed()?;
        self.core.check_lsn(lsn.0)?;
        self.core.sync_to(lsn.0, false)
    }

    /// Like [`Log::commit`], as a future that never blocks the polling
    /// thread on a sync: usable from async executors such as tokio.
    pub fn commit_async(&self, lsn: Lsn, durability: Durability) -> CommitFuture {
        CommitFuture::new(self.core.clone(), lsn.0, durability)
    }

    /// Write a checkpoint and make it durable before returning: recovery
    /// will start scanning at `lsn`, and log space before it may be reused.
    /// `lsn` must be a record boundary (a value returned by [`Log::append`]
    /// or [`Log::durable_lsn`]) that is already durable: a checkpoint never
    /// waits for group commit, because appenders waiting for log space may be
    /// what group commit waits for. Costs one sync of its own (counted in
    /// [`LogStats::checkpoint_syncs`]).
    pub fn checkpoint(&self, lsn: Lsn) -> Result<()> {
        self.core.checkpoint(lsn.0, false)
    }

    /// Like [`Log::checkpoint`], but the slot is only written, not synced:
    /// the next sync of log data (a commit's) makes it durable at no extra
    /// cost, and only then does it take effect ([`Log::checkpoint_lsn`]
    /// moves and log space is freed). A slot still waiting when the next
    /// checkpoint call comes, or at close, is synced then. Use it for
    /// routine checkpoints; use [`Log::checkpoint`] when appenders wait for
    /// space.
    pub fn checkpoint_deferred(&self, lsn: Lsn) -> Result<()> {
        self.core.checkpoint(lsn.0, true)
    }

    /// The end of the log: the LSN the next append will start at.
    pub fn end_lsn(&self) -> Lsn {
        Lsn(self.core.reserved.load(Ordering::Acquire))
    }

    /// Everything below this LSN has been written to the files (survives a
    /// process crash; a `Write` commit returns once this covers it).
    pub fn written_lsn(&self) -> Lsn {
        Lsn(self.core.written.load(Ordering::Acquire))
    }

    /// Everything below this LSN is durable; it may fall inside a record
    /// (a record larger than a write is made durable a piece at a time).
    /// Durability hints and checkpoint slots claim [`Log::durable_lsn`]
    /// instead (recovery I1).
    pub fn synced_lsn(&self) -> Lsn {
        Lsn(self.core.durable.load(Ordering::Acquire))
    }

    /// Everything below this LSN is durable, and a record ends here: the
    /// durable LSN to hand to [`Log::checkpoint`].
    pub fn durable_lsn(&self) -> Lsn {
        Lsn(self.core.durable_boundary.load(Ordering::Acquire))
    }

    /// Bytes of log in use: from the last checkpoint's block to the end.
    /// Appends wait when this reaches [`Log::capacity_bytes`]. Lock-free
    /// (two atomic loads), for callers that check it on every change.
    pub fn used_bytes(&self) -> u64 {
        let c = &self.core;
        let floor = c
            .capacity_limit
            .load(Ordering::Acquire)
            .saturating_sub(c.capacity);
        c.reserved.load(Ordering::Acquire).saturating_sub(floor)
    }

    /// The LSN of the last durable checkpoint (where recovery would start).
    pub fn checkpoint_lsn(&self) -> Lsn {
        self.core.checkpoint.lock().slot.checkpoint_lsn
    }

    /// Bytes of log the files hold between checkpoint and end.
    pub fn capacity_bytes(&self) -> u64 {
        self.core.capacity
    }

    /// Largest record [`Log::append`] accepts.
    pub fn max_record_bytes(&self) -> u64 {
        self.core.record_max
    }

    /// Whether the log has failed (see [`Error::Poisoned`]).
    pub fn is_failed(&self) -> bool {
        self.core.failed.load(Ordering::Acquire)
    }

    /// A snapshot of the log's counters and histograms.
    pub fn stats(&self) -> LogStats {
        let c = &self.core;
        let mut s = c.metrics.snapshot();
        s.end_lsn = c.reserved.load(Ordering::Acquire);
        s.durable_lsn = c.durable_boundary.load(Ordering::Acquire);
        s.checkpoint_lsn = self.checkpoint_lsn().0;
        s.capacity_bytes = c.capacity;
        s.epoch = c.epoch;
        s.lsn_bytes = s.end_lsn.saturating_sub(c.files_start_lsn());
        s
    }

    /// Make `Write`/`Lazy` commits and pending async commits durable, stop
    /// the log's threads, and save statistics for `quill status`.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        let c = &self.core;
        if c.read_only {
            // Nothing to make durable, and nothing may be written.
            c.shutdown.store(true, Ordering::Release);
            return Ok(());
        }
        let mut result = Ok(());
        if !self.is_failed() {
            let pending = c
                .lazy_lsn
                .load(Ordering::Acquire)
                .max(c.pending_waiter_lsn());
            if pending > c.durable.load(Ordering::Acquire) {
                result = c.sync_to(pending, false);
            }
            // A clean close leaves its newest checkpoint durable.
            let slot = c.sync_pending_slot();
            if result.is_ok() {
                result = slot;
            }
        }
        c.stop_threads();
        // Futures nobody will lead any more: fail them ("log closed"), never
        // hang them. `shutdown` is set, so no waiter can be pushed after this
        // (pushers check it under the group lock).
        c.fail_waiters();
        if let Err(e) = self.save_stats() {
            tracing::warn!(error = %e, "could not save log statistics");
        }
        result
    }

    fn save_stats(&self) -> Result<()> {
        let saved = SavedStats {
            saved_unix: crate::stats::unix_now(),
            stats: self.stats(),
        };
        let json = serde_json::to_vec_pretty(&saved).map_err(|e| Error::InvalidArgument {
            what: "statistics",
            reason: e.to_string(),
        })?;
        let path = self.core.files.dir.join(STATS_FILE);
        Ok(crate::io::write_small_file(
            self.vfs.as_ref(),
            &path,
            &json,
        )?)
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Statistics saved at the last clean close.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SavedStats {
    /// When they were saved, Unix seconds.
    pub saved_unix: u64,
    /// The statistics.
    pub stats: LogStats,
}

/// A read-only description of a log on disk (for `quill status`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LogInfo {
    /// The log directory.
    pub dir: PathBuf,
    /// Random identity of the log.
    pub log_id: String,
    /// Files in the circle.
    pub file_count: u32,
    /// Bytes per file.
    pub file_size: u64,
    /// Bytes of log the circle holds.
    pub capacity_bytes: u64,
    /// Creation time, Unix seconds.
    pub created_unix: u64,
    /// Sequence number of the newest checkpoint slot.
    pub checkpoint_seq: u64,
    /// Where recovery would start.
    pub checkpoint_lsn: Lsn,
    /// Generation of the last open.
    pub epoch: u32,
    /// End of the last complete record on disk.
    pub end_lsn: Lsn,
    /// Records between checkpoint and end.
    pub records_after_checkpoint: u64,
    /// Why the scan stopped.
    pub stop: StopReason,
    /// Set when the stop is damage to durable log, not a torn end
    /// (recovery rule 6): what open would refuse with.
    pub damage: Option<String>,
    /// Statistics of the last clean close, if saved.
    pub last_close: Option<SavedStats>,
}

/// Path of the first file of the log in `dir` (it exists iff a log does).
pub fn first_file(dir: &Path) -> PathBuf {
    dir.join(files::file_name(0))
}

/// What the files of a log say about it before it is opened: its
/// identity and where recovery will start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogHeader {
    /// The log's random identity (every file header holds it).
    pub id: u128,
    /// The checkpoint LSN of the newest valid checkpoint slot.
    pub checkpoint_lsn: Lsn,
    /// Bytes of log the files hold: recovery scans at most this far past
    /// the checkpoint.
    pub capacity_bytes: u64,
}

/// Read the identity and checkpoint of the log in `dir` without scanning
/// or changing anything.
pub fn peek(vfs: &dyn Vfs, dir: &Path) -> Result<LogHeader> {
    let (files, slot) = LogFiles::open(vfs, dir, false, false)?;
    Ok(LogHeader {
        id: files.header.log_id,
        checkpoint_lsn: slot.checkpoint_lsn,
        capacity_bytes: files.capacity(),
    })
}

/// Describe the log in `dir` without changing it.
pub fn inspect(vfs: &dyn Vfs, dir: &Path) -> Result<LogInfo> {
    let (files, slot) = LogFiles::open(vfs, dir, false, false)?;
    let outcome = recovery::scan(&files, &slot, &mut |_| Ok(()))?;
    let last_close = read_saved_stats(vfs, &dir.join(STATS_FILE));
    Ok(LogInfo {
        dir: dir.to_path_buf(),
        log_id: format!("{:032x}", files.header.log_id),
        file_count: files.header.file_count,
        file_size: files.header.file_size,
        capacity_bytes: files.capacity(),
        created_unix: files.header.created_unix,
        checkpoint_seq: slot.seq,
        checkpoint_lsn: slot.checkpoint_lsn,
        epoch: slot.epoch,
        end_lsn: Lsn(outcome.end),
        records_after_checkpoint: outcome.records,
        damage: outcome
            .damage
            .as_ref()
            .map(|d| damage_error(&files, &outcome, d).to_string()),
        stop: outcome.stop,
        last_close,
    })
}

/// The error for a scan that stopped at damage (recovery rule 6): the file
/// and offset of the failed fragment, and what proves the log went on.
fn damage_error(files: &LogFiles, outcome: &recovery::ScanOutcome, damage: &Damage) -> Error {
    let at = outcome.stop_lsn;
    let (fi, offset) = files.locate(at);
    let file = files.files.get(fi).map_or_else(
        || files.dir.join(files::file_name(fi as u32)),
        |f| f.path().to_path_buf(),
    );
    let proof = match damage.claimed_by {
        Some(q) => format!(
            "the record at LSN {q}, appended after it, says the log was durable up to LSN {}",
            damage.durable_lsn
        ),
        None => format!(
            "the checkpoint slot says the log was durable up to LSN {}",
            damage.durable_lsn
        ),
    };
    Error::corrupt(
        file,
        offset,
        format!(
            "the redo log is damaged at LSN {at} ({}), and {proof}: this is not the torn end a \
             crash leaves, and at least {} bytes of acknowledged log after it would be lost. \
             Nothing was changed; restore the database from a backup (`quill dump` lists the \
             records before the damage)",
            outcome.stop,
            damage.durable_lsn.saturating_sub(at)
        ),
    )
}

/// Hand every record after the checkpoint of the log in `dir` to `on_record`
/// without changing the log (for tools such as `quill dump`).
pub fn scan_read_only(
    vfs: &dyn Vfs,
    dir: &Path,
    on_record: &mut dyn FnMut(&RecoveredRecord<'_>) -> Result<()>,
) -> Result<()> {
    let (files, slot) = LogFiles::open(vfs, dir, false, false)?;
    recovery::scan(&files, &slot, on_record)?;
    Ok(())
}

fn read_saved_stats(vfs: &dyn Vfs, path: &Path) -> Option<SavedStats> {
    let f = vfs.open(path, OpenOptions::read_only()).ok()?;
    let len = usize::try_from(f.size().ok()?).ok()?.min(1 << 20);
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, 0).ok()?;
    serde_json::from_slice(&buf).ok()
}

impl Core {
    /// Highest LSN any queued waiter asked for (0 if none).
    pub(crate) fn pending_waiter_lsn(&self) -> u64 {
        self.group.lock().max_lsn_pending()
    }

    /// LSN at which this open started (for `lsn_bytes`).
    pub(crate) fn files_start_lsn(&self) -> u64 {
        self.start_lsn
    }

    /// Write a checkpoint slot for `lsn` (see [`Log::checkpoint`]); with
    /// `defer`, leave it pending for the next sync of log data.
    ///
    /// Checkpoint slots (invariants C1-C3, which recovery relies on):
    /// 1. At most one slot is pending. A new slot is written only once the
    ///    previous one is durable, so the newest durable slot is never
    ///    overwritten (the two alternate by sequence parity) and a torn or
    ///    lost pending slot falls back to it at open.
    /// 2. A pending slot changes nothing in memory: `capacity_limit` and
    ///    `checkpoint_lsn` move only when it is durable (core I3), so the
    ///    log it would let go of is still intact if a crash loses it.
    /// 3. A pending slot is durable after an `fdatasync` of its file that
    ///    started after the slot's write returned; `pending_slot` is set
    ///    after the write and read before each sync (`sync_range`). An
    ///    `RWF_DSYNC` write never counts (writer I3). The slot goes into
    ///    the file holding the durable LSN, which the next commit's sync
    ///    covers.
    pub(crate) fn checkpoint(&self, lsn: u64, defer: bool) -> Result<()> {
        self.check_failed()?;
        self.check_writable("a checkpoint")?;
        let end = self.reserved.load(Ordering::Acquire);
        if !lsn.is_multiple_of(8) || lsn > end {
            return Err(Error::InvalidArgument {
                what: "checkpoint LSN",
                reason: format!("{lsn} is not an LSN of this log (end {end})"),
            });
        }
        let durable = self.durable_boundary.load(Ordering::Acquire);
        if lsn > durable {
            return Err(Error::InvalidArgument {
                what: "checkpoint LSN",
                reason: format!(
                    "{lsn} is not durable yet (durable LSN {durable}); commit it first"
                ),
            });
        }
        let mut ck = self.checkpoint.lock();
        // C1: settle the pending slot first.
        if let Some((_, fi)) = ck.pending {
            ck = self.sync_slot_file(ck, fi)?;
        }
        if lsn <= ck.slot.checkpoint_lsn.0 {
            return Ok(());
        }
        let durable = self.durable.load(Ordering::Acquire);
        if lsn < durable {
            self.check_boundary(lsn)?;
        }
        // The slot claims the durable record boundary, as hints do
        // (recovery I1); it is at least `lsn`, checked above.
        let boundary = self.durable_boundary.load(Ordering::Acquire);
        debug_assert!(boundary >= lsn, "checkpoint: the slot claims its own LSN");
        let slot = CheckpointSlot {
            seq: ck.slot.seq + 1,
            checkpoint_lsn: Lsn(lsn),
            epoch: self.epoch,
            durable_lsn: Lsn(boundary),
            log_id: ck.slot.log_id,
        };
        let (fi, _) = self.files.locate(durable);
        if let Err(e) = self.files.write_slot(&slot, fi) {
            // `fail` takes the checkpoint lock to wake log-full waiters.
            drop(ck);
            return Err(self.fail(e));
        }
        self.metrics.checkpoints.incr();
        ck.pending = Some((slot, fi));
        self.pending_slot.store(slot.seq, Ordering::Release);
        if !defer {
            drop(self.sync_slot_file(ck, fi)?);
        }
        Ok(())
    }

    /// Sync file `fi` for the pending slot alone (a checkpoint sync) and
    /// make the slot take effect.
    fn sync_slot_file<'a>(
        &'a self,
        mut ck: parking_lot::MutexGuard<'a, CheckpointState>,
        fi: usize,
    ) -> Result<parking_lot::MutexGuard<'a, CheckpointState>> {
        let t0 = Instant::now();
        if let Err(e) = self.files.sync(fi) {
            drop(ck);
            return Err(self.fail(e));
        }
        self.metrics.sync_latency.record_duration(t0.elapsed());
        self.metrics.checkpoint_syncs.incr();
        self.promote_slot(&mut ck);
        Ok(ck)
    }

    /// C2: the pending slot is durable; let it take effect.
    fn promote_slot(&self, ck: &mut CheckpointState) {
        let Some((slot, _)) = ck.pending.take() else {
            return;
        };
        self.pending_slot.store(0, Ordering::Release);
        ck.slot = slot;
        self.capacity_limit.store(
            format::block_floor(slot.checkpoint_lsn.0) + self.capacity,
            Ordering::Release,
        );
        self.checkpoint_cv.notify_all();
    }

    /// C3: a sync of file `fi` that began after `pending_slot` read `seq`
    /// has completed; if that slot is still the pending one and lives in
    /// `fi`, it is durable now.
    pub(crate) fn slot_synced(&self, seq: u64, fi: usize) {
        let mut ck = self.checkpoint.lock();
        if ck
            .pending
            .is_some_and(|(slot, file)| slot.seq == seq && file == fi)
        {
            self.metrics.slots_absorbed.incr();
            self.promote_slot(&mut ck);
        }
    }

    /// Sync the pending slot's file if a slot is pending (close).
    pub(crate) fn sync_pending_slot(&self) -> Result<()> {
        let ck = self.checkpoint.lock();
        if let Some((_, fi)) = ck.pending {
            drop(self.sync_slot_file(ck, fi)?);
        }
        Ok(())
    }

    /// Verify that a logical record starts at `lsn` (below `durable`, so on
    /// disk): its header carries `lsn` and is a `Full` or `First` fragment
    /// (writer I4; a checkpoint inside a record would cut it).
    fn check_boundary(&self, lsn: u64) -> Result<()> {
        let from = format::block_floor(lsn);
        let len = format::block_ceil(lsn + format::RECORD_HEADER as u64) - from;
        let mut buf = AlignedBuf::new(len as usize);
        self.files.read(from, &mut buf)?;
        let at = (lsn - from) as usize;
        let found = buf
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes);
        let kind = buf
            .get(at + 20)
            .copied()
            .and_then(format::FragmentKind::from_u8);
        let starts = matches!(
            kind,
            Some(format::FragmentKind::Full | format::FragmentKind::First)
        );
        if found != lsn || !starts {
            return Err(Error::InvalidArgument {
                what: "checkpoint LSN",
                reason: format!("{lsn} is not a record boundary"),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::SimFs;

    /// Log options for tests: files of `file_size` bytes, a 16 KiB buffer
    /// (4 KiB fragments), so records split and the circle wraps quickly.
    fn small_opts(file_size: u64, file_count: u32) -> LogOptions {
        LogOptions {
            file_size,
            file_count,
            buffer_size: 16 << 10,
            ..LogOptions::default()
        }
    }

    /// A checkpoint slot whose CRC passes but whose LSN or sequence
    /// number lies beyond the format's range is ignored at open (the
    /// older slot wins) instead of overflowing the scan or the next
    /// sequence number.
    #[test]
    fn slot_beyond_the_lsn_range_is_ignored_at_open() {
        let fs = SimFs::new(6);
        let dir = Path::new("/log");
        let opts = small_opts(64 << 10, 1);
        let log = Log::create(Arc::new(fs.clone()), dir, opts.clone()).unwrap();
        let log_id = log.core.files.header.log_id;
        log.close().unwrap();
        for (seq, lsn) in [(2, u64::MAX - 7), (u64::MAX, format::INITIAL_LSN.0)] {
            let slot = CheckpointSlot {
                log_id,
                seq,
                checkpoint_lsn: Lsn(lsn),
                epoch: 1,
                durable_lsn: Lsn(lsn),
            };
            assert!(fs.corrupt(&dir.join("log.000"), BLOCK * (1 + seq % 2), &slot.encode()));
            let (log, report) =
                Log::open(Arc::new(fs.clone()), dir, opts.clone(), |_| Ok(())).unwrap();
            assert_eq!(report.checkpoint_lsn, format::INITIAL_LSN);
            log.close().unwrap();
        }
    }

    /// Writer I5, deterministically: in the window after a failed write
    /// let the writer lock go and before its caller has woken anyone,
    /// another writer taking the lock finds the log failed. (Without I5
    /// it would rewrite the blocks the failed write zeroed, sync them and
    /// publish them as durable: `tests/log/failure.rs` hit that about
    /// once in 300 runs.) Nothing is durable past what was before the
    /// failure, and what was acknowledged survives a crash.
    #[test]
    fn a_failed_write_is_marked_before_the_writer_lock_goes() {
        let fs = SimFs::new(8);
        let dir = Path::new("/log");
        let opts = small_opts(256 << 10, 2);
        let log = Log::create(Arc::new(fs.clone()), dir, opts.clone()).unwrap();
        let acked = log.append(9, b"acknowledged").unwrap();
        log.commit(acked, Durability::Sync).unwrap();
        let durable_before = log.core.durable.load(Ordering::Acquire);
        let lost = log.append(9, &[7u8; 3000]).unwrap();
        let saw = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let saw2 = saw.clone();
        *log.core.after_failed_write.lock() = Some(Box::new(move |core: &Core| {
            // Another committer takes the writer lock now.
            let again = core.write_to(lost.0, true);
            assert!(
                again.is_err(),
                "writer I5: the lock went before the failure was marked"
            );
            assert_eq!(core.durable.load(Ordering::Acquire), durable_before);
            saw2.store(true, Ordering::SeqCst);
        }));
        fs.fail_write_after(0, false);
        assert!(log.commit(lost, Durability::Sync).is_err());
        assert!(saw.load(Ordering::SeqCst), "the hook never ran");
        assert!(log.is_failed());
        let crashed = fs.crash(crate::io::CrashMode::Random);
        drop(log);
        let mut found = Vec::new();
        let (log, _) = Log::open(Arc::new(crashed), dir, opts, |r| {
            found.push(r.payload.to_vec());
            Ok(())
        })
        .unwrap();
        assert!(found.iter().any(|p| p == b"acknowledged"), "{found:?}");
        log.close().unwrap();
    }

    /// Recovery I1: a sync that lands between the fragments of one record
    /// makes its first fragments durable, yet a crash before its last
    /// fragment leaves a record recovery cannot complete. The next
    /// generation rewrites those durable fragments, and stale fragments
    /// after them must not then read as proof of damage. (The log crash
    /// test hit this about once in 20 runs on a loaded machine, when the
    /// timer thread's sync came in the middle of a large append.) With
    /// `old_hint`, a stale fragment carries the claim earlier builds wrote,
    /// reaching into the rewritten record: it must prove nothing either,
    /// also when (with `checkpoint`) the scan stops right at the checkpoint
    /// and has accepted no fragment.
    fn durable_fragments_of_a_dropped_record_are_rewritten(old_hint: bool, checkpoint: bool) {
        let fs = SimFs::new(11);
        let dir = Path::new("/log");
        let opts = small_opts(256 << 10, 2);
        let cap = opts.file_size - format::HEADER_AREA;
        let at = |lsn: u64| {
            (
                dir.join(format!(
                    "log.{:03}",
                    (lsn / cap) % u64::from(opts.file_count)
                )),
                format::HEADER_AREA + lsn % cap,
            )
        };
        let log = Log::create(Arc::new(fs.clone()), dir, opts.clone()).unwrap();
        let r1 = log.append(1, b"first").unwrap();
        log.commit(r1, Durability::Sync).unwrap();

        // Fragment 2 of the big record: sync (durable now ends inside the
        // record). Fragment 4: sync again, so fragments 3 and 4, appended
        // after the first sync, are durable; then the power goes.
        let frags = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let mid = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let crashed = Arc::new(parking_lot::Mutex::new(None));
        {
            let (frags, mid, crashed, fs) =
                (frags.clone(), mid.clone(), crashed.clone(), fs.clone());
            let hook: core::FragmentHook = Box::new(move |core: &Core, lsn| {
                let mut f = frags.lock();
                f.push(lsn);
                match f.len() {
                    2 => {
                        core.sync_written().unwrap();
                        mid.store(core.durable.load(Ordering::Acquire), Ordering::Release);
                    }
                    4 => {
                        core.sync_written().unwrap();
                        *crashed.lock() = Some(fs.crash(crate::io::CrashMode::KeepUnsynced));
                    }
                    _ => {}
                }
            });
            assert!(
                log.core
                    .after_fragment
                    .set(parking_lot::Mutex::new(hook))
                    .is_ok()
            );
        }
        let _ = log.append(2, &[0x5a; 40_000]);
        drop(log);
        let fs = crashed.lock().take().expect("the hook crashed the disk");
        let frags = frags.lock().clone();
        let mid = mid.load(Ordering::Acquire);
        assert!(frags.len() >= 4 && frags[0] == r1.0, "{frags:?}");
        assert!(
            mid > frags[1] && mid <= frags[2],
            "durable ends inside the record"
        );

        // What fragments 3 and 4 claim: only the durable record boundary.
        let header = |fs: &SimFs, lsn: u64| {
            let (path, off) = at(lsn);
            let img = fs.current_bytes(&path).unwrap();
            let raw: [u8; format::RECORD_HEADER] = img
                [off as usize..off as usize + format::RECORD_HEADER]
                .try_into()
                .unwrap();
            (format::RecordHeader::decode(&raw), img, path, off)
        };
        for &f in &frags[2..4] {
            let (h, ..) = header(&fs, f);
            assert_eq!(h.lsn, f, "fragment {f} is on disk");
            assert_eq!(h.claim(f), Some(r1.0), "a hint claims a record boundary");
        }
        if old_hint {
            // The claim earlier builds gave fragment 3: durable up to `mid`.
            let f = frags[2];
            let (h, img, path, off) = header(&fs, f);
            let start = off as usize + format::RECORD_HEADER;
            let payload = img[start..start + h.len as usize].to_vec();
            let mut bytes = Vec::new();
            format::encode_fragment_hinted(
                &mut bytes,
                f,
                h.epoch,
                h.kind().unwrap(),
                h.rtype,
                format::durability_hint(f, mid),
                &payload,
            );
            assert!(fs.corrupt(&path, off, &bytes));
            assert_eq!(header(&fs, f).0.claim(f), Some(mid));
        }

        // The next generation drops the incomplete record and writes over
        // its first fragments.
        let mut found = Vec::new();
        let (log, report) = Log::open(Arc::new(fs.clone()), dir, opts.clone(), |r| {
            found.push(r.payload.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(found, vec![b"first".to_vec()]);
        assert_eq!(report.end_lsn, r1);
        let r2 = log.append(3, b"second").unwrap();
        assert!(
            r2.0 < mid,
            "the new record lies inside the dropped one's durable part"
        );
        log.commit(r2, Durability::Sync).unwrap();
        if checkpoint {
            log.checkpoint(r2).unwrap();
        }
        drop(log);
        let fs = fs.crash(crate::io::CrashMode::DropUnsynced);

        // The stale fragments after `second` prove nothing.
        let mut found = Vec::new();
        let (log, report) = Log::open(Arc::new(fs), dir, opts, |r| {
            found.push(r.payload.to_vec());
            Ok(())
        })
        .unwrap_or_else(|e| panic!("recovery I1: {e}"));
        let expected: &[&[u8]] = if checkpoint {
            &[]
        } else {
            &[b"first", b"second"]
        };
        assert_eq!(found, expected);
        assert_eq!(report.end_lsn, r2);
        log.close().unwrap();
    }

    #[test]
    fn durable_fragments_of_a_dropped_record_are_rewritten_safely() {
        durable_fragments_of_a_dropped_record_are_rewritten(false, false);
    }

    #[test]
    fn stale_claims_into_a_rewritten_record_prove_nothing() {
        durable_fragments_of_a_dropped_record_are_rewritten(true, false);
    }

    #[test]
    fn stale_claims_prove_nothing_when_the_scan_stops_at_the_checkpoint() {
        durable_fragments_of_a_dropped_record_are_rewritten(true, true);
    }

    /// Ring I2: a payload from the previous lap that holds, at some slot, the
    /// very LSN the next lap will put a fragment at must not read as a
    /// published marker there (the writer re-zeroes consumed blocks).
    #[test]
    fn stale_payload_never_reads_as_a_published_marker() {
        let fs = SimFs::new(5);
        let opts = small_opts(1 << 20, 2);
        let log = Log::create(Arc::new(fs), Path::new("/log"), opts).unwrap();
        let ring = log.core.ring.size();
        // One lap of payloads whose every word at LSN x holds x + ring size.
        let mut crafted = std::collections::BTreeSet::new();
        while log.end_lsn().0 < 4096 + ring {
            let start = log.end_lsn().0 + format::RECORD_HEADER as u64;
            let words = 400u64;
            let mut p = Vec::with_capacity(words as usize * 8);
            for k in 0..words {
                let x = start + 8 * k;
                p.extend_from_slice(&(x + ring).to_le_bytes());
                crafted.insert(x);
            }
            let end = log.append(9, &p).unwrap();
            log.commit(end, Durability::Sync).unwrap();
        }
        // Advance with small records until the next append position lies on
        // a crafted word one lap back.
        while !crafted.contains(&(log.end_lsn().0 - ring)) {
            let end = log.append(9, &[]).unwrap();
            log.commit(end, Durability::Sync).unwrap();
        }
        let p = log.end_lsn().0;
        assert!(
            !log.core.ring.is_published(p),
            "stale payload word reads as the marker of {p}"
        );
    }
}
