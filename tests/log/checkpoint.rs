//! Deferred checkpoint slots (`Log::checkpoint_deferred`, checkpoint
//! C1-C3 in `src/log/mod.rs`): a slot written without its own sync takes
//! effect only once a later sync of its file makes it durable, a crash
//! that loses or tears it falls back to the previous slot with nothing
//! lost, and slots written into files other than `log.000` are found at
//! open. Also the upgrade of a format version 1 log.

use quill::Lsn;
use quill::io::{CrashMode, SimFs};
use quill::log::format::{self, BLOCK, FileHeader};
use quill::log::{Durability, Log};

use crate::common::*;

/// Append `n` records of `len` bytes and commit them durably.
fn fill(log: &Log, first: u64, n: u64, len: usize) -> Lsn {
    let mut end = log.end_lsn();
    for i in 0..n {
        end = log.append(1, &payload(first + i, len)).unwrap();
    }
    log.commit(end, Durability::Sync).unwrap();
    end
}

#[test]
fn a_deferred_slot_rides_on_the_next_commit_sync() {
    let fs = SimFs::new(1);
    let log = Log::create(vfs(&fs), dir(), small_opts()).unwrap();
    let before = log.checkpoint_lsn();
    let d = fill(&log, 0, 20, 300);
    let used = log.used_bytes();
    log.checkpoint_deferred(d).unwrap();
    // C2: not durable yet, so nothing moved and no space was freed.
    assert_eq!(log.checkpoint_lsn(), before);
    assert_eq!(log.used_bytes(), used);
    let s = log.stats();
    assert_eq!(
        (s.checkpoints, s.checkpoint_syncs, s.slots_absorbed),
        (1, 0, 0)
    );
    // The next commit's sync makes it durable at no extra sync.
    let syncs = fs.stats().syncs;
    fill(&log, 100, 1, 50);
    assert_eq!(fs.stats().syncs, syncs + 1, "one sync for commit and slot");
    assert_eq!(log.checkpoint_lsn(), d);
    assert!(log.used_bytes() < used);
    let s = log.stats();
    assert_eq!(
        (s.checkpoints, s.checkpoint_syncs, s.slots_absorbed),
        (1, 0, 1)
    );
    assert_eq!(s.fsyncs_per_commit, 1.0);
}

#[test]
fn a_second_checkpoint_settles_the_pending_slot_first() {
    let fs = SimFs::new(2);
    let log = Log::create(vfs(&fs), dir(), small_opts()).unwrap();
    let a = fill(&log, 0, 10, 300);
    log.checkpoint_deferred(a).unwrap();
    // No commit in between: the next call syncs the pending slot itself.
    log.checkpoint_deferred(a).unwrap();
    assert_eq!(log.checkpoint_lsn(), a);
    let s = log.stats();
    assert_eq!((s.checkpoints, s.checkpoint_syncs), (1, 1));
    // A synchronous checkpoint is durable on return.
    let b = fill(&log, 100, 10, 300);
    log.checkpoint(b).unwrap();
    assert_eq!(log.checkpoint_lsn(), b);
}

/// C1/C2: whatever a crash does to the pending slot, open uses either it
/// or the durable one before it, and every acknowledged commit is found.
#[test]
fn a_lost_or_torn_pending_slot_falls_back_to_the_durable_one() {
    for seed in 0..40u64 {
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepUnsynced,
            CrashMode::Random,
        ] {
            let fs = SimFs::new(seed);
            let log = Log::create(vfs(&fs), dir(), small_opts()).unwrap();
            let a = fill(&log, 0, 30, 500);
            log.checkpoint(a).unwrap();
            let b = fill(&log, 100, 30 + seed % 7, 500);
            log.checkpoint_deferred(b).unwrap();
            // Unacknowledged tail after the pending slot.
            log.append(2, &payload(999, 700)).unwrap();
            let crashed = fs.crash(mode);
            drop(log);
            let (_log, recs, report) = open_collect(&crashed, small_opts()).unwrap();
            let ck = report.checkpoint_lsn;
            assert!(
                ck == a || ck == b,
                "seed {seed} {mode:?}: checkpoint {ck} is neither {a} nor {b}"
            );
            if mode == CrashMode::DropUnsynced {
                assert_eq!(ck, a, "seed {seed}: a lost slot cannot be used");
            }
            if mode == CrashMode::KeepUnsynced {
                assert_eq!(ck, b, "seed {seed}: a kept slot is the newest");
            }
            assert!(
                report.end_lsn >= b,
                "seed {seed} {mode:?}: acknowledged {b} lost (end {})",
                report.end_lsn
            );
            // Every record after the checkpoint used, in order.
            assert!(recs.first().is_some_and(|r| r.end > ck.0) || ck == b);
            assert!(recs.windows(2).all(|w| w[0].end < w[1].end));
        }
    }
}

/// Slots go into the file the log is appending to; open finds the newest
/// in any file, after the circle has wrapped several times.
#[test]
fn slots_in_every_file_are_found_at_open() {
    let fs = SimFs::new(3);
    let opts = small_opts();
    let cap = opts.file_size - format::HEADER_AREA;
    let log = Log::create(vfs(&fs), dir(), opts.clone()).unwrap();
    let mut files_used = std::collections::BTreeSet::new();
    let mut last = Lsn(0);
    for round in 0..40u64 {
        let d = fill(&log, round * 100, 8, 900);
        log.checkpoint_deferred(d).unwrap();
        fill(&log, round * 100 + 50, 1, 10);
        assert_eq!(log.checkpoint_lsn(), d, "round {round}: slot absorbed");
        files_used.insert((d.0 / cap) % u64::from(opts.file_count));
        last = d;
    }
    assert_eq!(files_used.len(), opts.file_count as usize);
    // Power loss right away: the newest durable slot is found wherever it is.
    let crashed = fs.crash(CrashMode::DropUnsynced);
    drop(log);
    let (_log, _recs, report) = open_collect(&crashed, opts).unwrap();
    assert_eq!(report.checkpoint_lsn, last);
}

#[test]
fn close_makes_a_pending_slot_durable() {
    let fs = SimFs::new(4);
    let log = Log::create(vfs(&fs), dir(), small_opts()).unwrap();
    let d = fill(&log, 0, 10, 300);
    log.checkpoint_deferred(d).unwrap();
    log.close().unwrap();
    let crashed = fs.crash(CrashMode::DropUnsynced);
    let (_log, recs, report) = open_collect(&crashed, small_opts()).unwrap();
    assert_eq!(report.checkpoint_lsn, d);
    assert!(recs.is_empty());
}

/// A log written by a build that knew only format version 1 (slots in
/// `log.000` only) opens, and its headers are upgraded to the current
/// version before any slot is written elsewhere.
#[test]
fn a_version_1_log_is_read_and_upgraded() {
    let fs = SimFs::new(5);
    let opts = small_opts();
    let log = Log::create(vfs(&fs), dir(), opts.clone()).unwrap();
    let d = fill(&log, 0, 10, 300);
    log.close().unwrap();
    // Turn the headers back into version 1.
    for i in 0..opts.file_count {
        let path = dir().join(format!("log.{i:03}"));
        let img = fs.current_bytes(&path).unwrap();
        let mut h = FileHeader::decode(&img[..BLOCK as usize]).unwrap();
        assert_eq!(h.version, format::FORMAT_VERSION);
        h.version = 1;
        fs.corrupt(&path, 0, &h.encode());
    }
    let (log, recs, _) = open_collect(&fs, opts.clone()).unwrap();
    assert_eq!(recs.last().map(|r| r.end), Some(d.0));
    for i in 0..opts.file_count {
        let path = dir().join(format!("log.{i:03}"));
        let img = fs.current_bytes(&path).unwrap();
        let h = FileHeader::decode(&img[..BLOCK as usize]).unwrap();
        assert_eq!(h.version, format::FORMAT_VERSION, "file {i} upgraded");
    }
    drop(log);
}
