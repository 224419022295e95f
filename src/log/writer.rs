//! Writing the log buffer to the files, and syncing.
//!
//! The writer lock (`Core::writer`) serialises writes; it is held while
//! scanning for published fragments, copying them to the aligned staging
//! buffer and issuing the write, and never while waiting for an appender or
//! for a sync. Syncs run outside it, so the next group's write overlaps the
//! current group's sync.
//!
//! Every write covers whole 4 KiB blocks at 4 KiB-aligned offsets (the
//! partial tail block is copied from memory with zero padding and rewritten
//! by the next write), so no write makes the kernel read a block first, and
//! with `O_DIRECT` the staging buffer goes straight to the device.
//!
//! Durability uses one `pwritev2(RWF_DSYNC)` when everything written before
//! is already durable (the common case at low concurrency: one system call
//! and one wait instead of two; `quill bench fsync` measured it 5-10%
//! faster than `pwrite` + `fdatasync` here), and otherwise a plain write and
//! `fdatasync` (after the heir's pre-write, a `Write` commit or a buffer-full
//! write, which left non-durable bytes behind).
//!
//! Invariants (writer In):
//! 1. `filled` is always the start of a fragment; everything below it is
//!    published.
//! 2. `block_floor(written)` onwards is still in the ring (the tail block);
//!    every ring block wholly below it has been zeroed (ring I2).
//! 3. An `RWF_DSYNC` write is issued only when `durable >= written` before
//!    it and no checkpoint slot is pending: such a write (FUA) makes only
//!    its own bytes durable, so it must not be trusted for earlier plain
//!    writes still in a device cache, nor for a slot (checkpoint C3).
//! 4. `boundary` is the end of the last complete logical record (a `Full` or
//!    `Last` fragment) at or below `filled`. `written`, `filled` and
//!    `durable` move a fragment (or a write chunk) at a time and may stop in
//!    the middle of a multi-fragment record; only boundaries may be handed
//!    out as checkpoint LSNs (a checkpoint inside a record would cut it)
//!    or claimed by durability hints (recovery I1).
//! 5. A failed write marks the log failed before the writer lock is let
//!    go. The write zeroed the ring blocks it covered before issuing it
//!    (handing them to appenders early), so after a failure I2 no longer
//!    holds: the next holder of the lock would rewrite those blocks from
//!    zeros, sync them and publish them as durable, and acknowledged
//!    commits would be lost. With the flag set first, it finds the log
//!    failed instead (`tests/log/failure.rs` hit this about once in 300
//!    runs: a dsync write failing in its sync, and another committer
//!    taking the lock before the failure was published;
//!    `log::tests::a_failed_write_is_marked_before_the_writer_lock_goes`
//!    takes the lock in that window every time).

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::core::Core;
use super::format::{self, FragmentKind, RECORD_HEADER};
use crate::io::AlignedBuf;
use crate::{Error, Result};

/// Spins (each a CPU pause hint) a writer makes waiting for an unpublished
/// fragment before it parks; about a microsecond, the length of a copy.
const HOLE_SPINS: u32 = 200;

/// What a write left behind.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Written {
    /// Bytes below this are in the files.
    pub(crate) written: u64,
    /// The last logical-record boundary at or below `written` (writer I4).
    pub(crate) boundary: u64,
    /// The last write was durable (`RWF_DSYNC`): bytes below `written` are
    /// durable without a separate sync.
    pub(crate) synced: bool,
}

/// State owned by the writer-lock holder.
#[derive(Debug)]
pub(crate) struct Writer {
    /// Scanned complete prefix (writer I1).
    filled: u64,
    /// The last logical-record boundary at or below `filled` (writer I4).
    boundary: u64,
    /// Bytes below this are in the files.
    written: u64,
    staging: AlignedBuf,
}

impl Writer {
    pub(crate) fn new(end: u64, max_write: usize) -> Writer {
        Writer {
            filled: end,
            boundary: end,
            written: end,
            staging: AlignedBuf::new(max_write + format::BLOCK as usize),
        }
    }

    /// Advance `filled` over published fragments.
    fn scan(&mut self, core: &Core) -> u64 {
        let reserved = core.reserved.load(Ordering::Acquire);
        let limit = core.ring_limit.load(Ordering::Relaxed);
        let mut p = self.filled;
        while p < reserved && p < limit && core.ring.is_published(p) {
            let mut head = [0u8; RECORD_HEADER];
            // SAFETY: ring I3: the fragment at p is published, so its bytes
            // are complete and no one writes them until we zero them.
            unsafe { core.ring.read(p, &mut head) };
            let len = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
            debug_assert!(len as usize <= core.frag_max, "writer I1: fragment length");
            p += format::fragment_size(len as u64);
            if matches!(
                FragmentKind::from_u8(head[20]),
                Some(FragmentKind::Full | FragmentKind::Last)
            ) {
                self.boundary = p;
            }
        }
        debug_assert!(
            self.boundary <= p && p <= reserved.max(self.filled),
            "writer I1/I4: the scanned prefix stays within what was reserved"
        );
        self.filled = p;
        core.filled.store(p, Ordering::Release);
        p
    }

    /// Whether writing up to `filled` takes one write call: one staging
    /// buffer, one file. Only then is `RWF_DSYNC` used (writer I3): two
    /// durable writes would be two syncs where a plain write per piece and
    /// one `fdatasync` per file is never more, and is one at the wrap of a
    /// single-file log.
    fn one_write(&self, core: &Core, filled: u64) -> bool {
        let from = format::block_floor(self.written);
        let to = format::block_ceil(filled);
        let max = (self.staging.len() - format::BLOCK as usize) as u64;
        to - from <= max && from / core.files.cap == (to - 1) / core.files.cap
    }

    /// Write every byte below `filled` (the caller's fresh `scan`) not yet
    /// written; with `dsync`, each write is durable on return (`RWF_DSYNC`).
    fn write_available(&mut self, core: &Core, filled: u64, dsync: bool) -> Result<()> {
        let max = self.staging.len() - format::BLOCK as usize;
        while self.written < filled {
            let from = format::block_floor(self.written);
            let to = filled.min(from + max as u64);
            assert!(
                from <= self.written && self.written < to && to <= filled,
                "writer I2: a write starts at the tail block and moves forward"
            );
            let len = (to - from) as usize;
            let blocks = (format::block_ceil(to) - from) as usize;
            let Some(buf) = self.staging.get_mut(..blocks) else {
                return Err(Error::InvalidArgument {
                    what: "log write",
                    reason: format!("{blocks} bytes exceed the staging buffer"),
                });
            };
            let (data, pad) = buf.split_at_mut(len);
            // SAFETY: ring I3: [from, to) lies below `filled`; bytes
            // [from, written) are the tail block kept by writer I2.
            unsafe { core.ring.read(from, data) };
            pad.fill(0);
            // Blocks wholly below `to` are final: zero them and hand the
            // slots to appenders (ring I1/I2, core I2).
            let done = format::block_floor(to);
            if done > from {
                // SAFETY: we hold the writer lock, and [from, done) is
                // below `filled` with its next lap not yet handed out
                // (`ring_limit` is stored just below).
                unsafe { core.ring.zero(from, done) };
                core.ring_limit
                    .store(done + core.ring.size(), Ordering::Release);
            }
            let t0 = Instant::now();
            let calls = core.files.write(from, buf, dsync)?;
            let d = t0.elapsed();
            if dsync {
                // A durable write is both a write and a sync (writer I3).
                core.metrics.sync_latency.record_duration(d);
                core.metrics.sync_ewma.update(d);
                core.metrics.syncs.add(calls);
                core.metrics.dsync_writes.add(calls);
            } else {
                core.metrics.write_latency.record_duration(d);
            }
            core.metrics.writes.add(calls);
            core.metrics.write_bytes.add(blocks as u64);
            self.written = to;
            core.written.store(to, Ordering::Release);
        }
        Ok(())
    }
}

impl Core {
    /// Write (not sync) everything published, and keep going until at least
    /// `need` is written. Returns the written LSN. Waits for unpublished
    /// fragments below `need` without holding the writer lock.
    pub(crate) fn write_up_to(&self, need: u64) -> Result<u64> {
        self.write_to(need, false).map(|w| w.written)
    }

    /// Like `write_up_to`; with `sync`, the final write is made durable by
    /// `RWF_DSYNC` when that is safe (writer I3), and `synced` says so. The
    /// caller syncs with `sync_range` when it is false.
    pub(crate) fn write_to(&self, need: u64, sync: bool) -> Result<Written> {
        loop {
            let mut w = self.writer.lock();
            self.check_failed()?;
            let filled = w.scan(self);
            // Writer I3: a durable write covers only its own bytes (a FUA
            // write does not flush earlier writes from the device cache), so
            // use it only if everything written before is durable already.
            let dsync = sync
                && filled >= need
                && filled > w.written
                && self.durable.load(Ordering::Acquire) >= w.written
                && self.pending_slot.load(Ordering::Acquire) == 0
                && w.one_write(self, filled);
            if let Err(e) = w.write_available(self, filled, dsync) {
                // Writer I5: failed before the lock goes.
                self.mark_failed(&e);
                drop(w);
                #[cfg(test)]
                if let Some(hook) = self.after_failed_write.lock().take() {
                    hook(self);
                }
                return Err(self.fail(e));
            }
            if w.written >= need {
                debug_assert_eq!(
                    w.written, w.filled,
                    "writer: a write ends at the scanned prefix"
                );
                return Ok(Written {
                    written: w.written,
                    boundary: w.boundary,
                    synced: dsync,
                });
            }
            // An earlier append has reserved but not yet published the
            // fragment at `filled`. Spin briefly (a copy takes about a
            // microsecond), then park until a publisher wakes us.
            self.metrics.hole_waits.incr();
            let at = w.filled;
            let mut ready = false;
            for _ in 0..HOLE_SPINS {
                if self.ring.is_published(at) {
                    ready = true;
                    break;
                }
                std::hint::spin_loop();
            }
            if ready {
                continue;
            }
            self.hole_waiters.lock().push(std::thread::current());
            self.hole_wait.store(true, Ordering::SeqCst);
            // Re-check after announcing ourselves: the publisher stores its
            // marker (SeqCst) before loading `hole_wait` (SeqCst), so either
            // it sees us or we see its marker. The fragment's owner may also
            // have given up because the log failed (it never publishes then);
            // `fail` sets `failed` before emptying the waiter list, so either
            // it wakes us or we see `failed` here.
            let ready = self.ring.is_published(at) || self.failed.load(Ordering::SeqCst);
            drop(w);
            if ready {
                let me = std::thread::current().id();
                self.hole_waiters.lock().retain(|t| t.id() != me);
            } else {
                std::thread::park();
            }
        }
    }

    /// Write everything published and make it durable, without the sync role
    /// and without waiting for any unpublished fragment. Concurrent syncs are
    /// harmless: `durable` only moves forward (`fetch_max`) and every sync
    /// covers all writes completed before it.
    pub(crate) fn sync_written(&self) -> Result<()> {
        let w = self.write_to(0, false)?;
        let durable = self.durable.load(Ordering::Acquire);
        if w.written > durable {
            self.sync_range(durable, w.written)?;
            self.mark_durable(&w);
        }
        Ok(())
    }

    /// Publish that everything `w` wrote is durable (core I1, writer I4).
    pub(crate) fn mark_durable(&self, w: &Written) {
        debug_assert!(
            w.boundary <= w.written && w.written <= self.written.load(Ordering::Acquire),
            "core I1: durable <= written"
        );
        // The boundary first: whoever sees `durable` cover a record's end
        // (a committer woken by it) then also sees `durable_lsn()` cover
        // it, since that end is at or below `w.boundary` (writer I4).
        self.durable_boundary
            .fetch_max(w.boundary, Ordering::AcqRel);
        self.durable.fetch_max(w.written, Ordering::AcqRel);
    }

    /// Sync the files holding `[from, to)`; timed and counted as log syncs.
    /// A pending checkpoint slot in one of them becomes durable with it
    /// (checkpoint C3).
    pub(crate) fn sync_range(&self, from: u64, to: u64) -> Result<()> {
        for fi in self.files.files_between(from, to) {
            let slot = self.pending_slot.load(Ordering::Acquire);
            let t0 = Instant::now();
            if let Err(e) = self.files.sync(fi) {
                return Err(self.fail(e));
            }
            let d = t0.elapsed();
            self.metrics.sync_latency.record_duration(d);
            self.metrics.sync_ewma.update(d);
            self.metrics.syncs.incr();
            if slot != 0 {
                self.slot_synced(slot, fi);
            }
        }
        Ok(())
    }
}
