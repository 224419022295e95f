//! Appending records: no mutex on the copy path.
//!
//! An append (1) computes each fragment's length and the LSN-independent
//! part of its CRC, (2) reserves the LSN range of the whole logical record
//! with one `fetch_add` on `reserved`, (3) for each fragment waits until the
//! ring slot is free (almost always already true: two atomic loads), copies
//! the fragment in and publishes it (`ring.rs` I2). Whoever writes later
//! finds the contiguous complete prefix by following published markers, so
//! no thread has to track it.
//!
//! A record larger than one fragment (at most a quarter of the ring) is
//! split, so a record larger than the whole ring works: each fragment is
//! written out before the ring slot it needs is reused. Space waits never
//! deadlock: the lowest unpublished fragment's slot is always free once
//! everything before it is written (fragments are at most a quarter of the
//! ring), and writers never hold the writer lock while waiting for a
//! fragment (see `writer.rs`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::core::Core;
use super::format::{self, FragmentKind, RECORD_HEADER};
use crate::{Error, Result};

/// How long an append waits for a checkpoint to free log space before the
/// log fails (a checkpoint that never comes is a bug in the log's owner).
const LOG_FULL_TIMEOUT: Duration = Duration::from_secs(60);

impl Core {
    /// Append one logical record; returns the LSN just past it (the value to
    /// pass to `commit`).
    pub(crate) fn append(&self, rtype: u8, payload: &[u8]) -> Result<u64> {
        self.check_failed()?;
        self.check_writable("appending a record")?;
        let len = payload.len() as u64;
        if len > self.record_max {
            return Err(Error::LimitExceeded {
                what: "log record size",
                actual: len,
                max: self.record_max,
            });
        }
        self.metrics.appends.incr();
        self.metrics.append_payload_bytes.add(len);
        if payload.len() <= self.frag_max {
            let tail = format::header_tail(len as u32, self.epoch, FragmentKind::Full, rtype);
            let digest = format::crc_begin(&tail, payload);
            let size = format::fragment_size(len);
            let start = self.reserved.fetch_add(size, Ordering::Relaxed);
            self.metrics.fragments.incr();
            self.put_fragment(start, size, &tail, digest, payload)?;
            return Ok(start + size);
        }
        let chunks = payload.chunks(self.frag_max);
        let count = chunks.len();
        let total: u64 = payload
            .chunks(self.frag_max)
            .map(|c| format::fragment_size(c.len() as u64))
            .sum();
        let start = self.reserved.fetch_add(total, Ordering::Relaxed);
        self.metrics.fragments.add(count as u64);
        let mut at = start;
        for (i, chunk) in chunks.enumerate() {
            let kind = match i {
                0 => FragmentKind::First,
                i if i + 1 == count => FragmentKind::Last,
                _ => FragmentKind::Middle,
            };
            let clen = chunk.len() as u64;
            let tail = format::header_tail(clen as u32, self.epoch, kind, rtype);
            let digest = format::crc_begin(&tail, chunk);
            let size = format::fragment_size(clen);
            self.put_fragment(at, size, &tail, digest, chunk)?;
            at += size;
        }
        debug_assert_eq!(at, start + total);
        Ok(start + total)
    }

    /// Copy one fragment into the ring at `lsn` and publish it.
    fn put_fragment(
        &self,
        lsn: u64,
        size: u64,
        tail: &[u8; 12],
        digest: crc_fast::Digest,
        payload: &[u8],
    ) -> Result<()> {
        let end = lsn + size;
        if end > self.ring_limit.load(Ordering::Acquire)
            || end > self.capacity_limit.load(Ordering::Acquire)
        {
            self.wait_for_room(end)?;
        }
        // The hint claims the durable *record boundary*, not `durable`,
        // which may stop inside a record split into fragments (writer I4).
        // Recovery drops the fragments of a record it cannot complete and
        // the next generation rewrites them, even those that were durable;
        // a claim reaching into them would later read as damage once they
        // are rewritten (the log crash test's case of seed
        // 5080021526876846965). Any value the boundary had is a true claim
        // (it only grows), so a relaxed load is enough.
        let hint = format::durability_hint(lsn, self.durable_boundary.load(Ordering::Relaxed));
        let crc = format::crc_finish(digest, lsn, hint);
        let mut head = [0u8; RECORD_HEADER - 8];
        head[..4].copy_from_slice(&crc.to_le_bytes());
        head[4..].copy_from_slice(tail);
        head[14..].copy_from_slice(&hint.to_le_bytes());
        // SAFETY: ring I1: this thread reserved [lsn, end) with the fetch_add,
        // and observed ring_limit >= end (Acquire) above or in wait_for_room,
        // so the previous lap's bytes are zeroed and nobody else touches them.
        // The marker word [lsn, lsn+8) is left for `publish`. Padding bytes
        // are already zero (ring I2).
        unsafe {
            self.ring.write(lsn + 8, &head);
            self.ring.write(lsn + RECORD_HEADER as u64, payload);
        }
        self.ring.publish(lsn);
        if self.hole_wait.load(Ordering::SeqCst) {
            self.wake_hole_waiters();
        }
        #[cfg(test)]
        if let Some(hook) = self.after_fragment.get() {
            (hook.lock())(self, lsn);
        }
        Ok(())
    }

    /// Slow path: wait until `[.., end)` may be copied into the ring (older
    /// bytes written out) and written to the files (checkpoint far enough).
    fn wait_for_room(&self, end: u64) -> Result<()> {
        loop {
            self.check_failed()?;
            if end > self.capacity_limit.load(Ordering::Acquire) {
                self.wait_for_checkpoint(end)?;
                continue;
            }
            if end > self.ring_limit.load(Ordering::Acquire) {
                self.metrics.space_waits.incr();
                // ring_limit >= end once block_floor(written) >= end - size.
                let need = format::block_ceil(end.saturating_sub(self.ring.size()));
                self.write_up_to(need)?;
                continue;
            }
            return Ok(());
        }
    }

    fn wait_for_checkpoint(&self, end: u64) -> Result<()> {
        self.metrics.log_full_waits.incr();
        let started = Instant::now();
        // The owner can only checkpoint durable LSNs: make everything
        // published durable now rather than at the next timed sync (`Lazy`
        // and `Write` commits would otherwise stall here for up to a
        // second). This sync bypasses the sync role (group I1): the role's
        // holder may itself be waiting for our unpublished range, so waiting
        // for the role here would deadlock (found by the commit benchmark;
        // test `full_log_with_lazy_and_sync_commits_never_deadlocks`).
        self.sync_written()?;
        let mut ck = self.checkpoint.lock();
        while end > self.capacity_limit.load(Ordering::Acquire) {
            self.check_failed()?;
            if started.elapsed() > LOG_FULL_TIMEOUT {
                drop(ck);
                // The reserved range can never be filled now; fail the log so
                // that nothing waits on it forever (core I4).
                return Err(self.fail(Error::LogFull {
                    waited_ms: started.elapsed().as_millis() as u64,
                }));
            }
            self.checkpoint_cv
                .wait_for(&mut ck, Duration::from_millis(100));
        }
        Ok(())
    }
}
