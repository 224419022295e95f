//! The shared state of one open log, and its failed state.
//!
//! LSN positions, each in its own cache line, and who moves them:
//!
//! | field            | meaning                                  | advanced by                      |
//! |------------------|------------------------------------------|----------------------------------|
//! | `reserved`       | next LSN to hand out                     | appenders, one `fetch_add` each  |
//! | `filled`         | all fragments below are copied           | writer-lock holder (scan)        |
//! | `written`        | all bytes below are in the files         | writer-lock holder               |
//! | `durable`        | all bytes below are synced               | any syncer, `fetch_max` (group I1) |
//! | `durable_boundary` | last record end at or below `durable`  | with `durable` (writer I4)       |
//! | `ring_limit`     | appenders may copy below this LSN        | writer-lock holder, after zeroing|
//! | `capacity_limit` | appenders may reserve below this LSN     | `checkpoint`, a slot's sync      |
//! | `pending_slot`   | sequence of a slot not yet durable (0: none) | `checkpoint`, a slot's sync  |
//!
//! Invariants (cited by assertions as "core In"):
//! 1. `durable <= written <= filled <= reserved`, and each only grows.
//! 2. `ring_limit <= block_floor(written) + ring size`.
//! 3. `capacity_limit = block_floor(checkpoint) + capacity`, where
//!    `checkpoint` is the newest *durable* slot's: no write can overwrite
//!    log bytes at or after the checkpoint recovery would use. A slot
//!    written but not yet synced moves nothing.
//! 4. Once `failed` is set it stays set; nothing is acknowledged after it,
//!    every waiter is woken with the failure, and only reopening clears it.
//!
//! Lifecycle of the log (the function for each edge):
//!
//! ```text
//!  create()/open() --> Open --(write or sync error: fail())--> Failed
//!                       |                                        |
//!                    close()/drop                           close()/drop
//!                       v                                        v
//!                     Closed <----------------------------------+
//! ```
//! A Failed log is left only by dropping it and opening again (recovery).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread::{JoinHandle, Thread};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};

use super::LogOptions;
use super::files::LogFiles;
use super::format::{self, CheckpointSlot};
use super::group::GroupState;
use super::metrics::LogMetrics;
use super::ring::Ring;
use super::writer::Writer;
use crate::{Error, Result};

/// State of the checkpoint slots (see "Checkpoint slots" in `mod.rs`).
#[derive(Debug)]
pub(crate) struct CheckpointState {
    /// The newest durable slot: the one recovery would use.
    pub(crate) slot: CheckpointSlot,
    /// A newer slot written into file `.1` but not yet synced (at most one).
    pub(crate) pending: Option<(CheckpointSlot, usize)>,
}

/// The background flush thread's doorbell.
#[derive(Debug, Default)]
pub(crate) struct Doorbell {
    pub(crate) rung: AtomicBool,
    pub(crate) thread: std::sync::OnceLock<Thread>,
}

impl Doorbell {
    pub(crate) fn ring(&self) {
        self.rung.store(true, Ordering::Release);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

/// Everything shared by the handles of one open log.
pub(crate) struct Core {
    pub(crate) opts: LogOptions,
    pub(crate) files: LogFiles,
    pub(crate) ring: Ring,
    /// Generation of this open (format: record epoch).
    pub(crate) epoch: u32,
    /// Largest payload of one fragment.
    pub(crate) frag_max: usize,
    /// Largest logical record.
    pub(crate) record_max: u64,
    /// Bytes of log the circle holds.
    pub(crate) capacity: u64,
    /// End of the log when this open began.
    pub(crate) start_lsn: u64,
    /// Opened read-only ([`super::Log::open_read_only`]): appends and
    /// checkpoints are refused, and nothing is ever written or synced.
    pub(crate) read_only: bool,

    pub(crate) reserved: CachePadded<AtomicU64>,
    pub(crate) filled: CachePadded<AtomicU64>,
    pub(crate) written: CachePadded<AtomicU64>,
    pub(crate) durable: CachePadded<AtomicU64>,
    /// The last logical-record boundary at or below `durable` (writer I4):
    /// what `Log::durable_lsn` reports and checkpoints may use.
    pub(crate) durable_boundary: CachePadded<AtomicU64>,
    pub(crate) ring_limit: CachePadded<AtomicU64>,
    pub(crate) capacity_limit: CachePadded<AtomicU64>,
    /// Sequence number of the pending checkpoint slot, 0 if none: read
    /// before every sync (a sync of its file makes it durable) and by the
    /// writer (no `RWF_DSYNC` while a slot waits, writer I3).
    pub(crate) pending_slot: CachePadded<AtomicU64>,
    /// Highest LSN committed with `Write` or `Lazy`, for the timed syncer.
    pub(crate) lazy_lsn: CachePadded<AtomicU64>,

    pub(crate) failed: CachePadded<AtomicBool>,
    failure: Mutex<Option<String>>,

    /// Set while some writer waits for an unpublished fragment.
    pub(crate) hole_wait: CachePadded<AtomicBool>,
    pub(crate) hole_waiters: Mutex<Vec<Thread>>,

    pub(crate) writer: Mutex<Writer>,
    pub(crate) group: Mutex<GroupState>,
    /// The write group, for `Write` durability (same shape, role = writing).
    pub(crate) write_group: Mutex<GroupState>,
    /// One bit per recent sync of `group`, newest in bit 0, set when that
    /// sync completed more than one waiter (commits, and the log's own
    /// waits: `make_durable`, the timed sync). Written by the completing
    /// leader under `group`'s lock, read by the next leader without it: it
    /// only decides whether a leader yields for joiners (a hint, never a
    /// correctness condition; see "The leader yields only while" in
    /// `group.rs`).
    pub(crate) shared_syncs: AtomicU32,
    pub(crate) naive: Mutex<()>,
    pub(crate) checkpoint: Mutex<CheckpointState>,
    pub(crate) checkpoint_cv: Condvar,

    pub(crate) metrics: LogMetrics,
    pub(crate) flusher: Doorbell,
    pub(crate) timer: Doorbell,
    pub(crate) shutdown: AtomicBool,
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    /// Base for timestamps stored in atomics.
    pub(crate) clock_base: Instant,
    /// Run once by the writer right after a failed write let the writer
    /// lock go (tests of writer I5 act in that window).
    #[cfg(test)]
    pub(crate) after_failed_write: Mutex<Option<FailedWriteHook>>,
    /// Run by an appender right after it published a fragment, with the
    /// fragment's LSN (tests act between the fragments of one record).
    /// Set at most once, so an unset hook costs appenders one atomic load
    /// and no lock.
    #[cfg(test)]
    pub(crate) after_fragment: std::sync::OnceLock<Mutex<FragmentHook>>,
}

/// What `Core::after_failed_write` runs.
#[cfg(test)]
pub(crate) type FailedWriteHook = Box<dyn FnOnce(&Core) + Send>;

/// What `Core::after_fragment` runs.
#[cfg(test)]
pub(crate) type FragmentHook = Box<dyn FnMut(&Core, u64) + Send>;

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("dir", &self.files.dir)
            .field("reserved", &self.reserved.load(Ordering::Relaxed))
            .field("durable", &self.durable.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Core {
    /// Build the shared state over opened files, with the log ending at
    /// `end` and `tail` holding bytes `[block_floor(end), end)`.
    pub(crate) fn new(
        opts: LogOptions,
        files: LogFiles,
        slot: CheckpointSlot,
        end: u64,
        tail: &[u8],
        read_only: bool,
    ) -> Arc<Core> {
        let ring = Ring::new(opts.buffer_size);
        let tail_start = format::block_floor(end);
        debug_assert_eq!(tail_start + tail.len() as u64, end);
        // SAFETY: nothing else can see the ring yet; the tail is shorter than
        // one block and the ring holds at least four.
        unsafe { ring.write(tail_start, tail) };
        let capacity = files.capacity();
        let ring_size = ring.size();
        let frag_max = (((ring_size / 4) as usize).saturating_sub(format::RECORD_HEADER + 8) & !7)
            .min(format::MAX_FRAGMENT_PAYLOAD as usize);
        let max_write = (ring_size as usize).min(1 << 20);
        Arc::new(Core {
            frag_max,
            record_max: capacity / 4,
            capacity,
            start_lsn: end,
            read_only,
            epoch: slot.epoch,
            reserved: CachePadded::new(AtomicU64::new(end)),
            filled: CachePadded::new(AtomicU64::new(end)),
            written: CachePadded::new(AtomicU64::new(end)),
            durable: CachePadded::new(AtomicU64::new(end)),
            durable_boundary: CachePadded::new(AtomicU64::new(end)),
            ring_limit: CachePadded::new(AtomicU64::new(tail_start + ring_size)),
            capacity_limit: CachePadded::new(AtomicU64::new(
                format::block_floor(slot.checkpoint_lsn.0) + capacity,
            )),
            pending_slot: CachePadded::new(AtomicU64::new(0)),
            lazy_lsn: CachePadded::new(AtomicU64::new(0)),
            failed: CachePadded::new(AtomicBool::new(false)),
            failure: Mutex::new(None),
            hole_wait: CachePadded::new(AtomicBool::new(false)),
            hole_waiters: Mutex::new(Vec::new()),
            writer: Mutex::new(Writer::new(end, max_write)),
            group: Mutex::new(GroupState::default()),
            write_group: Mutex::new(GroupState::default()),
            shared_syncs: AtomicU32::new(0),
            naive: Mutex::new(()),
            checkpoint: Mutex::new(CheckpointState {
                slot,
                pending: None,
            }),
            checkpoint_cv: Condvar::new(),
            metrics: LogMetrics::default(),
            flusher: Doorbell::default(),
            timer: Doorbell::default(),
            shutdown: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            clock_base: Instant::now(),
            #[cfg(test)]
            after_failed_write: Mutex::new(None),
            #[cfg(test)]
            after_fragment: std::sync::OnceLock::new(),
            ring,
            files,
            opts,
        })
    }

    /// Nanoseconds since `clock_base`.
    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.clock_base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The error every caller gets once the log has failed (invariant 4).
    pub(crate) fn poisoned(&self) -> Error {
        let cause = self.failure.lock().clone().unwrap_or_else(|| {
            if self.shutdown.load(Ordering::Acquire) {
                "log closed".into()
            } else {
                "unknown failure".into()
            }
        });
        Error::Poisoned { cause }
    }

    /// `Err(Poisoned)` if the log has failed or been closed (a commit future
    /// can outlive its `Log`).
    #[inline]
    pub(crate) fn check_failed(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) || self.shutdown.load(Ordering::Acquire) {
            return Err(self.poisoned());
        }
        Ok(())
    }

    /// `Err(ReadOnly)` for a change asked of a read-only log.
    #[inline]
    pub(crate) fn check_writable(&self, what: &'static str) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly {
                dir: self.files.dir.clone(),
                what,
            });
        }
        Ok(())
    }

    /// Enter the failed state (invariant 4): record the first cause, wake
    /// every waiter of every kind, and return `err` for the caller that hit it.
    pub(crate) fn fail(&self, err: Error) -> Error {
        self.mark_failed(&err);
        self.fail_waiters();
        self.wake_hole_waiters();
        self.flusher.ring();
        {
            let _ck = self.checkpoint.lock();
            self.checkpoint_cv.notify_all();
        }
        err
    }

    /// Record `err` as the log's failure and set the failed flag, waking
    /// nobody: it takes only the failure's own lock, so a holder of the
    /// writer lock may call it (writer I5); [`Core::fail`] does the rest.
    pub(crate) fn mark_failed(&self, err: &Error) {
        {
            let mut f = self.failure.lock();
            if f.is_none() {
                tracing::error!(error = %err, dir = %self.files.dir.display(), "redo log failed; reopen to recover");
                *f = Some(err.to_string());
            }
        }
        self.failed.store(true, Ordering::Release);
    }

    /// Wake every thread waiting for an unpublished fragment.
    pub(crate) fn wake_hole_waiters(&self) {
        let waiters = {
            let mut w = self.hole_waiters.lock();
            self.hole_wait.store(false, Ordering::SeqCst);
            std::mem::take(&mut *w)
        };
        for t in waiters {
            t.unpark();
        }
    }
}
