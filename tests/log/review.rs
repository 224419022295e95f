//! Regressions found by a code review of the log (named `review_*`). Each
//! reproduced its bug (a hang or a lost acknowledged commit) before the fix.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use quill::io::{CrashMode, SimFs};
use quill::log::{CommitMode, Durability, Log, LogOptions};

use crate::common::*;

/// Run `f` on a thread; false if it does not finish within `secs`.
fn finishes_within<F: FnOnce() + Send + 'static>(secs: u64, f: F) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(secs)).is_ok()
}

/// A failed checkpoint-slot write used to re-lock the checkpoint mutex.
#[test]
fn review_checkpoint_write_failure_returns_an_error() {
    let ok = finishes_within(20, || {
        let fs = SimFs::new(1);
        let log = Log::create(vfs(&fs), dir(), small_opts()).unwrap();
        let lsn = log.append(1, b"abc").unwrap();
        log.commit(lsn, Durability::Sync).unwrap();
        fs.fail_write_after(0, true);
        assert!(log.checkpoint(lsn).is_err());
        assert!(log.is_failed());
        assert!(log.commit(lsn, Durability::Sync).is_err());
    });
    assert!(ok, "checkpoint() with a failing slot write hung");
}

/// A commit future first polled after `close` used to ring a dead flush thread.
#[test]
fn review_commit_future_after_close_errors() {
    for (mode, latency) in [
        (CommitMode::Flusher, Duration::ZERO),
        (CommitMode::Leader, Duration::from_millis(1)),
    ] {
        let ok = finishes_within(20, move || {
            let fs = SimFs::new(2);
            fs.set_sync_latency(latency);
            let log = Log::create(
                vfs(&fs),
                dir(),
                LogOptions {
                    mode,
                    ..small_opts()
                },
            )
            .unwrap();
            let l0 = log.append(1, b"x").unwrap();
            log.commit(l0, Durability::Sync).unwrap();
            let lsn = log.append(1, b"abc").unwrap();
            let fut = log.commit_async(lsn, Durability::Sync);
            log.close().unwrap();
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let r = rt.block_on(fut);
            assert!(r.is_err(), "a commit after close must fail: {r:?}");
        });
        assert!(ok, "{mode}: commit future first polled after close hung");
    }
}

/// Futures racing a failure must all finish (none stranded in the heap).
#[test]
fn review_commit_futures_racing_a_failure_all_finish() {
    let ok = finishes_within(30, || {
        for round in 0..20u64 {
            let fs = SimFs::new(100 + round);
            fs.set_sync_latency(Duration::from_micros(150));
            let log = Arc::new(Log::create(vfs(&fs), dir(), small_opts()).unwrap());
            fs.fail_sync_after(round % 5, true);
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .build()
                .unwrap();
            rt.block_on(async {
                let mut tasks = Vec::new();
                for t in 0..16u64 {
                    let log = log.clone();
                    tasks.push(tokio::spawn(async move {
                        for s in 0..20u64 {
                            let Ok(lsn) = log.append(1, &payload(t * 100 + s, 30)) else {
                                return;
                            };
                            if log.commit_async(lsn, Durability::Sync).await.is_err() {
                                return;
                            }
                        }
                    }));
                }
                for t in tasks {
                    t.await.unwrap();
                }
            });
        }
    });
    assert!(ok, "a commit future was stranded by a failure");
}

/// `durable_lsn` advanced a fragment at a time and could stop inside a
/// multi-fragment record; a checkpoint there made recovery drop the rest of
/// an acknowledged record.
#[test]
fn review_durable_lsn_is_always_a_record_end_and_checkpoints_keep_acked_records() {
    let fs = SimFs::new(4);
    let log = Arc::new(Log::create(vfs(&fs), dir(), small_opts()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let ends = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    ends.lock().insert(log.end_lsn().0);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..2u64)
        .map(|t| {
            let (log, stop, ends, acked, seen) = (
                log.clone(),
                stop.clone(),
                ends.clone(),
                acked.clone(),
                seen.clone(),
            );
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Thread 0 writes records of several fragments.
                    let len = if t == 0 { 20_000 } else { 30 };
                    let p = payload(i * 2 + t, len);
                    let end = log.append(1, &p).unwrap();
                    ends.lock().insert(end.0);
                    log.commit(end, Durability::Sync).unwrap();
                    acked.lock().push(end.0);
                    let d = log.durable_lsn();
                    if log.checkpoint(d).is_ok() {
                        seen.lock().push(d.0);
                    }
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    // Every append has recorded its end by now.
    let ends = ends.lock();
    let bad: Vec<u64> = seen
        .lock()
        .iter()
        .copied()
        .filter(|d| !ends.contains(d))
        .collect();
    assert!(
        bad.is_empty(),
        "durable_lsn values that are no record end: {bad:?}"
    );
    let ckpt = log.checkpoint_lsn().0;
    let crashed = fs.crash(CrashMode::DropUnsynced);
    drop(log);
    let (_log, recs, _) = open_collect(&crashed, small_opts()).unwrap();
    let found: std::collections::HashSet<u64> = recs.iter().map(|r| r.end).collect();
    let lost: Vec<u64> = acked
        .lock()
        .iter()
        .copied()
        .filter(|e| *e > ckpt && !found.contains(e))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged records after checkpoint {ckpt} lost: {lost:?}"
    );
}
