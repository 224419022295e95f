//! Injected write and sync failures: nothing is acknowledged after the
//! failure, every waiting and later commit gets an error, no panic, and
//! everything acknowledged before it survives a crash.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use quill::Error;
use quill::io::{CrashMode, SimFs};
use quill::log::{Durability, Log};

use crate::common::*;

fn run(fail_sync: bool, after: u64, threads: u32) {
    let fs = SimFs::new(after ^ u64::from(threads));
    let log = Arc::new(Log::create(vfs(&fs), dir(), small_opts()).unwrap());
    if fail_sync {
        fs.fail_sync_after(after, false);
    } else {
        fs.fail_write_after(after, false);
    }
    let saw_error = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let log = log.clone();
            let saw_error = saw_error.clone();
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for s in 0..200u32 {
                    let p = payload(u64::from(t) * 1000 + u64::from(s), 50);
                    let lsn = match log.append(1, &p) {
                        Ok(l) => l,
                        Err(e) => {
                            assert!(matches!(e, Error::Poisoned { .. }), "{e}");
                            saw_error.store(true, Ordering::SeqCst);
                            break;
                        }
                    };
                    match log.commit(lsn, Durability::Sync) {
                        Ok(()) => acked.push(p),
                        Err(e) => {
                            assert!(e.is_io_failure(), "unexpected error {e}");
                            saw_error.store(true, Ordering::SeqCst);
                            // Sticky: every later operation fails too.
                            assert!(log.append(1, b"x").is_err());
                            assert!(log.commit(lsn, Durability::Sync).is_err());
                            break;
                        }
                    }
                }
                acked
            })
        })
        .collect();
    let acked: Vec<Vec<u8>> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert!(saw_error.load(Ordering::SeqCst), "the fault never fired");
    assert!(log.is_failed());
    let crashed = fs.crash(CrashMode::Random);
    drop(log);
    let (_log, recs, _) = open_collect(&crashed, small_opts()).unwrap();
    let found: std::collections::HashSet<Vec<u8>> = recs.into_iter().map(|r| r.payload).collect();
    for p in &acked {
        assert!(found.contains(p), "an acknowledged commit was lost");
    }
}

#[test]
fn sync_failure_single_thread() {
    for after in [0, 1, 5, 17] {
        run(true, after, 1);
    }
}

#[test]
fn sync_failure_many_threads() {
    for after in [0, 3, 40] {
        run(true, after, 16);
    }
}

#[test]
fn write_failure_single_and_many_threads() {
    for after in [0, 2, 9] {
        run(false, after, 1);
        run(false, after, 16);
    }
}

#[test]
fn async_commits_fail_too() {
    let fs = SimFs::new(99);
    let log = Log::create(vfs(&fs), dir(), small_opts()).unwrap();
    fs.fail_sync_after(0, true);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let lsn = log.append(1, b"doomed").unwrap();
    let r = rt.block_on(log.commit_async(lsn, Durability::Sync));
    assert!(
        matches!(r, Err(Error::Io(_)) | Err(Error::Poisoned { .. })),
        "{r:?}"
    );
    let lsn2 = log.end_lsn();
    assert!(
        rt.block_on(log.commit_async(lsn2, Durability::Sync))
            .is_err()
    );
}
