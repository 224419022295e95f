//! The page cleaner and checkpoints.
//!
//! Every 100 ms (or at once when a throttled writer rings) the cleaner:
//! 1. flushes, oldest first, every page whose oldest change is older than
//!    half the log's capacity behind its end (age-driven flushing; when
//!    the age passes 3/4 of capacity the round is counted as urgent);
//! 2. when the pool is nearly full (fewer than 1/16 of its frames free),
//!    flushes dirty pages at the cold end of the LRU, so evictions find
//!    clean victims instead of writing pages themselves;
//! 3. flushes a batch when more than half of the pool is dirty;
//! 4. otherwise, when the log has not grown since the last round (an idle
//!    database), trickles one small batch, so it reaches a clean state and
//!    recovery stays short.
//!
//! Steps 2 and 4 wait for need: a cached database under load writes pages
//! only as the log's age demands (step 1), so page and doublewrite writes
//! and their syncs do not compete with commits' log syncs for the device
//! (measured: in a 40k-row update-index run, 2.1 KB of data pages and 2.1
//! KB of doublewrite per 1-row transaction before this rule).
//!
//! And every round:
//! 5. writes a checkpoint (store T2) at most once a second, or at once
//!    after urgent flushing.
//!
//! Routine rounds add no log sync of their own, so that a database under
//! `Sync` commits makes at most one log sync per commit, even with one
//! client: they write only pages whose changes are durable already (no
//! write-ahead sync, buffer B2), and their checkpoint slot is made durable
//! by the next commit's sync (`Log::checkpoint_deferred`). When every one
//! of the oldest pages is hot (changed again after the durable LSN), a
//! round waits up to 20 ms for commits' syncs to cover them, and syncs the
//! log itself only if none does (counted as `hot_page_syncs`), so hot
//! pages cannot hold the checkpoint back until writers are throttled. Urgent rounds
//! (log space running out, or a throttled writer doing the cleaner's work)
//! sync whatever they need.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Shared;
use crate::Result;
use crate::buffer::WalRule;
use crate::log::Lsn;

const BATCH: usize = 64;
/// How long a routine round waits for commits to make hot old pages
/// durable before it syncs the log for them itself.
const HOT_PAGE_WAIT: Duration = Duration::from_millis(20);

pub(super) fn run(s: &Shared) {
    let mut last_checkpoint = Instant::now();
    let mut last_end = s.log.end_lsn();
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
        let end = s.log.end_lsn();
        let idle = end == last_end;
        last_end = end;
        let urgent = match flush_round(s, false, idle) {
            Ok(u) => u,
            Err(e) => {
                tracing::error!(error = %e, "page cleaner: flush failed");
                continue;
            }
        };
        if urgent || last_checkpoint.elapsed() >= Duration::from_secs(1) {
            if let Err(e) = checkpoint(s, urgent) {
                tracing::error!(error = %e, "page cleaner: checkpoint failed");
            }
            last_checkpoint = Instant::now();
        }
        s.bell_cv.notify_all();
    }
}

/// One round of flushing. Returns whether it was urgent. `force` makes
/// it urgent (a throttled writer doing the cleaner's work) and
/// checkpoints at the end; `idle` says the log did not grow since the
/// last round (step 4 may trickle).
pub(super) fn flush_round(s: &Shared, force: bool, idle: bool) -> Result<bool> {
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
    // Routine rounds write only pages already durable in the log.
    let wal = if urgent {
        WalRule::Sync
    } else {
        WalRule::DurableOnly
    };
    let mut flushed = 0;
    let mut waited = false;
    while s.pool.oldest_dirty_lsn().is_some_and(|o| o < below) {
        let n = s.pool.flush_oldest(BATCH, below, wal)?;
        flushed += n;
        if n == 0 {
            if waited || wal == WalRule::Sync {
                break;
            }
            // The oldest pages were all changed after the durable LSN (hot
            // pages): left alone they would hold the checkpoint back until
            // the log is 3/4 full. Let the commits' syncs cover them,
            // briefly, and sync the log only if none comes (an idle log,
            // or `Write`/`Lazy` commits).
            waited = true;
            wait_durable(s, s.log.end_lsn())?;
        }
    }
    // 2. The cold end of the LRU: keep clean victims for evictions, once
    // evictions are near.
    if s.pool.free_frames() < s.pool.frames() / 16 {
        for _ in 0..8 {
            let n = s.pool.flush_lru_tail(BATCH, wal)?;
            flushed += n;
            if n < BATCH / 2 {
                break;
            }
        }
    }
    // 3. Dirty ratio, 4. trickle.
    if s.pool.dirty_pages() > s.pool.frames() / 2 {
        s.pool.flush_oldest(BATCH * 4, u64::MAX, wal)?;
    } else if idle && flushed == 0 && s.pool.dirty_pages() > 0 {
        s.pool.flush_oldest(BATCH / 4, u64::MAX, wal)?;
    }
    if force {
        checkpoint(s, true)?;
    }
    Ok(urgent)
}

/// Wait up to [`HOT_PAGE_WAIT`] for the log to be durable to `lsn`
/// without asking for a sync; then make it durable.
fn wait_durable(s: &Shared, lsn: Lsn) -> Result<()> {
    let until = Instant::now() + HOT_PAGE_WAIT;
    while s.log.durable_lsn() < lsn {
        if Instant::now() >= until {
            s.counters.hot_page_syncs.incr();
            return s.log.make_durable(lsn);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

/// Write a checkpoint (store T2). Returns the LSN it will start recovery
/// at once durable. With `now`, the checkpoint is durable on return and
/// first makes everything written durable (so a database written only with
/// `Write`/`Lazy` commits, or by one long transaction, moves its checkpoint
/// at once); otherwise the slot waits for the next commit's sync, and
/// `Write`/`Lazy` commits become durable through the log's timer.
pub(super) fn checkpoint(s: &Shared, now: bool) -> Result<Lsn> {
    let _one = s.checkpoint_lock.lock();
    let written = s.log.written_lsn();
    if now && s.log.durable_lsn() < written {
        s.log.make_durable(written)?;
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
    if now {
        s.log.checkpoint(Lsn(cp))?;
    } else {
        s.log.checkpoint_deferred(Lsn(cp))?;
    }
    s.counters.checkpoints.incr();
    Ok(Lsn(cp))
}
