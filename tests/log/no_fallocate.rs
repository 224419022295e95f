//! Issue 13 item 6: on a file system without `fallocate` (FUSE, some
//! network file systems answer `EOPNOTSUPP`) the log is still created, by
//! extending and zero-filling its files, and behaves as anywhere else.
//! The whole suite also runs with `QUILL_SIMFS_REFUSE_ALLOCATE=1`
//! (`.ci/run`).

use quill::io::{CrashMode, SimFs};
use quill::log::{Durability, Log};

use crate::common::*;

#[test]
fn log_is_created_and_recovered_without_fallocate() {
    let fs = SimFs::new(61);
    fs.refuse_allocate(true);
    let opts = small_opts();
    let log = Log::create(vfs(&fs), dir(), opts.clone())
        .unwrap_or_else(|e| panic!("creating a log without fallocate: {e}"));
    for i in 0..opts.file_count {
        let path = dir().join(format!("log.{i:03}"));
        let img = fs.current_bytes(&path).unwrap();
        assert_eq!(img.len() as u64, opts.file_size, "{}", path.display());
    }
    // Enough records to move from file 0 into file 1.
    let mut expect = Vec::new();
    for i in 0..100u64 {
        let p = payload(i, 1000);
        let end = log.append(7, &p).unwrap();
        expect.push(Rec {
            end: end.0,
            rtype: 7,
            payload: p,
        });
    }
    log.commit(log.end_lsn(), Durability::Sync).unwrap();
    log.append(7, b"never committed").unwrap();
    let after = fs.crash(CrashMode::DropUnsynced);
    drop(log);
    let (_log, recs, _) = open_collect(&after, opts).unwrap();
    assert_eq!(recs, expect);
}
