//! Issue 13 item 6: "No fallocate, no database." On a file system without
//! `fallocate` (FUSE, some network file systems answer `EOPNOTSUPP`)
//! `Db::open` creates the database, tables grow, and committed rows survive
//! a power loss. The whole suite also runs with
//! `QUILL_SIMFS_REFUSE_ALLOCATE=1` (`.ci/run`).

use quill::btree::Direction;
use quill::catalog::Value;
use quill::db::Db;
use quill::io::{CrashMode, SimFs};
use quill::store::DATA_FILE;
use std::ops::Bound::Unbounded;

use crate::common::*;

const ROWS: i64 = 4000;

fn owner(i: i64) -> String {
    format!("owner-{i:06}-{}", "x".repeat(40))
}

fn check(db: &Db, rows: i64) {
    let t = db.table("accounts").unwrap();
    let mut tx = db.begin().unwrap();
    let all: Vec<Vec<Value>> = tx
        .scan(&t, Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    assert_eq!(all.len() as i64, rows);
    for (i, row) in all.iter().enumerate() {
        assert_eq!(row, &acct(i as i64, &owner(i as i64), i as i64 * 3));
    }
    tx.commit().unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

#[test]
fn db_opens_grows_and_recovers_without_fallocate() {
    for (seed, mode) in [
        (1, CrashMode::Random),
        (2, CrashMode::DropUnsynced),
        (3, CrashMode::KeepUnsynced),
    ] {
        let fs = SimFs::new(seed);
        fs.refuse_allocate(true);
        let db = Db::open_with(vfs(&fs), dir(), opts(60))
            .unwrap_or_else(|e| panic!("Db::open without fallocate: {e}"));
        let data = dir().join(DATA_FILE);
        let initial = fs.current_bytes(&data).unwrap().len();
        let t = db.create_table(accounts()).unwrap();
        for chunk in 0..ROWS / 500 {
            let mut tx = db.begin().unwrap();
            for i in chunk * 500..(chunk + 1) * 500 {
                tx.insert(&t, &acct(i, &owner(i), i * 3)).unwrap();
            }
            tx.commit().unwrap();
        }
        db.store().flush_all().unwrap();
        let grown = fs.current_bytes(&data).unwrap().len();
        assert!(
            grown > initial + 2 * 64 * 4096,
            "data file {grown} bytes, {initial} at creation"
        );
        check(&db, ROWS);
        // A transaction in flight at the power loss is rolled back.
        let mut tx = db.begin().unwrap();
        tx.insert(&t, &acct(ROWS, "in flight", 0)).unwrap();
        let after = fs.crash(mode);
        drop(tx);
        drop(t);
        drop(db);
        let db = Db::open_with(vfs(&after), dir(), opts(60))
            .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
        check(&db, ROWS);
        db.close().unwrap();
    }
}
