//! Read-only opens (issue 13 item 5): inspection writes nothing, works on a
//! read-only file system, shares the directory with other readers but not
//! with a writer, and refuses a database that needs recovery instead of
//! recovering it.

use std::collections::BTreeMap;
use std::ops::Bound::Unbounded;
use std::path::{Path, PathBuf};

use quill::Error;
use quill::btree::Direction;
use quill::catalog::Value;
use quill::catalog::schema::IndexDef;
use quill::db::Db;
use quill::io::{CrashMode, IoError, SimFs, Vfs};

use crate::common::*;

/// Every file under `d` with its bytes.
fn image(fs: &SimFs, d: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for name in fs.list_dir(d).unwrap() {
        let p = d.join(&name);
        match fs.current_bytes(&p) {
            Some(b) => {
                out.insert(p, b);
            }
            None => out.extend(image(fs, &p)),
        }
    }
    out
}

fn made(fs: &SimFs) {
    let db = open(fs, opts(200));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..300 {
        tx.insert(&t, &acct(i, &format!("o{i}"), i % 7)).unwrap();
    }
    tx.commit().unwrap();
    let mut tx = db.begin().unwrap();
    tx.delete(&t, &[Value::Int64(5)]).unwrap();
    tx.commit().unwrap();
    db.close().unwrap();
}

fn read_only(fs: &SimFs) -> quill::Result<Db> {
    Db::open_read_only_with(vfs(fs), dir(), opts(200))
}

#[test]
fn a_read_only_open_reads_everything_and_writes_nothing() {
    let fs = SimFs::new(60);
    made(&fs);
    let before = image(&fs, dir());
    let writes = fs.stats().writes;
    let db = read_only(&fs).unwrap();
    assert!(db.is_read_only());
    let t = db.table("accounts").unwrap();
    let mut tx = db.begin().unwrap();
    assert_eq!(
        tx.scan(&t, Unbounded, Unbounded, Direction::Forward)
            .unwrap()
            .count(),
        299
    );
    assert_eq!(
        tx.index_scan(&t, "by_owner", Unbounded, Unbounded, Direction::Forward)
            .unwrap()
            .count(),
        299
    );
    assert_eq!(
        tx.get(&t, &[Value::Int64(7)]).unwrap(),
        Some(acct(7, "o7", 0))
    );
    // Every kind of change is refused, with the reason.
    let refused = |r: quill::Result<()>| match r {
        Err(Error::ReadOnly { .. }) => {}
        other => panic!("expected ReadOnly, got {other:?}"),
    };
    refused(tx.insert(&t, &acct(1000, "x", 1)).map(drop));
    refused(
        tx.update(&t, &[Value::Int64(7)], &[(2, Value::Int64(1))])
            .map(drop),
    );
    refused(tx.delete(&t, &[Value::Int64(7)]).map(drop));
    refused(tx.get_for_update(&t, &[Value::Int64(7)]).map(drop));
    tx.commit().unwrap();
    refused(db.create_table(accounts()).map(drop));
    refused(db.create_index(
        "accounts",
        IndexDef {
            name: "x".into(),
            columns: vec![2],
            unique: false,
        },
    ));
    refused(db.purge_now().map(drop));
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    // Readers share the directory; a writer may not join them.
    let second = read_only(&fs).unwrap();
    match Db::open_with(vfs(&fs), dir(), opts(200)) {
        Err(Error::Io(IoError::Locked { .. })) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
    second.close().unwrap();
    db.close().unwrap();
    assert_eq!(fs.stats().writes, writes, "a read-only open wrote");
    assert_eq!(image(&fs, dir()), before, "a read-only open changed a file");
    // And a writer holding it keeps readers out.
    let w = open(&fs, opts(200));
    assert!(matches!(
        read_only(&fs),
        Err(Error::Io(IoError::Locked { .. }))
    ));
    w.close().unwrap();
}

/// A database that needs recovery is refused, untouched, with what
/// recovery would do; a read-write open recovers it, and then a read-only
/// open works.
#[test]
fn a_database_needing_recovery_is_refused_not_recovered() {
    let fs = SimFs::new(61);
    made(&fs);
    let db = open(&fs, opts(200));
    let t = db.table("accounts").unwrap();
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &acct(500, "late", 1)).unwrap();
    let crashed = fs.crash(CrashMode::KeepUnsynced);
    std::mem::forget(tx);
    drop(t);
    drop(db);
    let before = image(&crashed, dir());
    match read_only(&crashed) {
        Err(e @ Error::NeedsRecovery { .. }) => {
            assert!(e.to_string().contains("--repair"), "{e}")
        }
        other => panic!("expected NeedsRecovery, got {other:?}"),
    }
    assert_eq!(image(&crashed, dir()), before, "the refusal changed a file");
    open(&crashed, opts(200)).close().unwrap();
    let db = read_only(&crashed).unwrap();
    let t = db.table("accounts").unwrap();
    let mut tx = db.begin().unwrap();
    assert_eq!(tx.get(&t, &[Value::Int64(500)]).unwrap(), None);
    tx.commit().unwrap();
    db.close().unwrap();
}

/// On a read-only file system a read-only open works and a read-write
/// open fails with the file system's error, not a panic.
#[test]
fn a_read_only_file_system_can_be_inspected() {
    let fs = SimFs::new(62);
    made(&fs);
    fs.set_read_only(true);
    let db = read_only(&fs).unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.live_rows, 299);
    db.close().unwrap();
    let err = Db::open_with(vfs(&fs), dir(), opts(200)).unwrap_err();
    assert!(err.to_string().contains("Read-only file system"), "{err}");
    // Status-style inspection reads on, too.
    quill::log::inspect(&fs, &dir().join("log")).unwrap();
    quill::store::inspect(&fs, dir()).unwrap();
}
