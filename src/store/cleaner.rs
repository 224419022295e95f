//! The page cleaner and checkpoints.
//!
//! Every 100 ms (or at once when a throttled writer rings) the cleaner:
//! 1. flushes, oldest first, every page whose oldest change is older than
//!    half the log's capacity behind its end (age-driven flushing; when
//!    the age passes 3/4 of capacity the round is counted as urgent);
//! 2. flushes dirty pages at the cold end of the LRU, so evictions find
//!    clean victims instead of writing pages themselves;
//! 3. flushes a batch when more than half of the pool is dirty;
//! 4. otherwise trickles one small batch, so an idle database reaches a
//!    clean state and recovery stays short;
//! 5. writes a checkpoint (store T2) at most once a second, or at once
//!    after urgent flushing.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Shared;
use crate::Result;
use crate::log::{Durability, Lsn};

const BATCH: usize = 64;

pub(super) fn run(s: &Shared) {
    let mut last_checkpoint = Instant::now();
    loop {
        {
            let mut b = s.bell.lock();
            if s.stop.load(Ordering::Acquire) {
                return;
            }
            s.bell_cv.wait_for(&mut b, Duration::from_millis(100));
        }
        if s.stop.load(Ordering::Acquire) {
            return;
        }
        if s.log.is_failed() || s.pool.check_poisoned().is_err() {
            continue;
        }
        let urgent = match flush_round(s, false) {
            Ok(u) => u,
            Err(e) => {
                tracing::error!(error = %e, "page cleaner: flush failed");
                continue;
            }
        };
        if urgent || last_checkpoint.elapsed() >= Duration::from_secs(1) {
            if let Err(e) = checkpoint(s) {
                tracing::error!(error = %e, "page cleaner: checkpoint failed");
            }
            last_checkpoint = Instant::now();
        }
        s.bell_cv.notify_all();
    }
}

/// One round of flushing. Returns whether it was urgent. `force` makes
/// it urgent (a throttled writer doing the cleaner's work) and
/// checkpoints at the end.
pub(super) fn flush_round(s: &Shared, force: bool) -> Result<bool> {
    let cap = s.log.capacity_bytes();
    let end = s.log.end_lsn().0;
    let urgent = force || s.log.used_bytes() > cap / 4 * 3;
    if urgent {
        s.counters.urgent_flushes.incr();
    }
    // 1. Age: nothing older than half the capacity stays dirty.
    let below = if urgent {
        end.saturating_sub(cap / 4)
    } else {
        end.saturating_sub(cap / 2)
    };
    let mut flushed = 0;
    while s.pool.oldest_dirty_lsn().is_some_and(|o| o < below) {
        let n = s.pool.flush_oldest(BATCH, below)?;
        flushed += n;
        if n == 0 {
            break;
        }
    }
    // 2. The cold end of the LRU: keep clean victims for evictions.
    for _ in 0..8 {
        let n = s.pool.flush_lru_tail(BATCH)?;
        flushed += n;
        if n < BATCH / 2 {
            break;
        }
    }
    // 3. Dirty ratio, 4. trickle.
    if s.pool.dirty_pages() > s.pool.frames() / 2 {
        s.pool.flush_oldest(BATCH * 4, u64::MAX)?;
    } else if flushed == 0 && s.pool.dirty_pages() > 0 {
        s.pool.flush_oldest(BATCH / 4, u64::MAX)?;
    }
    if force {
        checkpoint(s)?;
    }
    Ok(urgent)
}

/// Write a checkpoint (store T2). Returns the checkpoint LSN.
pub(super) fn checkpoint(s: &Shared) -> Result<Lsn> {
    let _one = s.checkpoint_lock.lock();
    // Make what is written durable, so a database written only with
    // `Write`/`Lazy` commits still moves its checkpoint.
    let written = s.log.written_lsn();
    if s.log.durable_lsn() < written {
        s.log.commit(written, Durability::Sync)?;
    }
    let durable = s.log.durable_lsn().0;
    let cp = match s.pool.oldest_dirty_lsn() {
        Some(oldest) => oldest.min(durable),
        None => durable,
    };
    let current = s.log.checkpoint_lsn();
    if cp <= current.0 {
        return Ok(current);
    }
    s.pool.file().sync()?;
    s.log.checkpoint(Lsn(cp))?;
    s.counters.checkpoints.incr();
    Ok(Lsn(cp))
}
