//! DROP INDEX (`Db::drop_index`, issue 14): the index is gone at once and
//! durably (its name free, uniqueness no longer enforced), the other
//! indexes and the rows are untouched, undo written before the drop still
//! rolls back and purges, the index's pages are freed once no older
//! transaction is left, and a crash at any point leaves either the index
//! or its freed space.

use std::ops::Bound::Unbounded;

use quill::btree::Direction;
use quill::catalog::Value;
use quill::catalog::schema::IndexDef;
use quill::io::{CrashMode, SimFs};
use quill::store::inspect;
use quill::{Error, Result};

use super::common::*;

fn used_pages(fs: &SimFs) -> u64 {
    let info = inspect(vfs(fs).as_ref(), dir()).unwrap();
    info.page_count - info.free_pages
}

fn fill(db: &quill::db::Db, t: &quill::db::Table, from: i64, n: i64) -> Result<()> {
    for chunk in (from..from + n).collect::<Vec<_>>().chunks(200) {
        let mut tx = db.begin()?;
        for &i in chunk {
            tx.insert(t, &acct(i, &format!("owner-{i}"), i % 97))?;
        }
        tx.commit()?;
    }
    Ok(())
}

fn by_balance(db: &quill::db::Db, t: &quill::db::Table) -> Result<usize> {
    let mut tx = db.begin()?;
    let n = tx
        .index_scan(t, "by_balance", Unbounded, Unbounded, Direction::Forward)?
        .count();
    tx.commit()?;
    Ok(n)
}

#[test]
fn a_dropped_index_is_gone_and_the_table_works_without_it() -> Result<()> {
    let fs = SimFs::new(61);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts())?;
    fill(&db, &t, 0, 300)?;
    db.drop_index("accounts", "by_owner")?;
    assert!(matches!(
        db.drop_index("accounts", "by_owner"),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        db.drop_index("nope", "by_owner"),
        Err(Error::NoSuchTable { .. })
    ));
    let mut tx = db.begin()?;
    assert!(
        tx.index_scan(&t, "by_owner", Unbounded, Unbounded, Direction::Forward)
            .is_err()
    );
    // Uniqueness on owner is gone with the index; the other index works.
    tx.insert(&t, &acct(1000, "owner-1", 5))?;
    tx.update(
        &t,
        &[Value::Int64(2)],
        &[(1, Value::Text("owner-1".into()))],
    )?;
    tx.delete(&t, &[Value::Int64(3)])?;
    tx.commit()?;
    assert_eq!(by_balance(&db, &t)?, 300);
    // The name is free: a new index of that name is a new index.
    db.create_index(
        "accounts",
        IndexDef {
            name: "by_owner".into(),
            columns: vec![1],
            unique: false,
        },
    )?;
    let mut tx = db.begin()?;
    let n = tx
        .index_scan(
            &t,
            "by_owner",
            std::ops::Bound::Included(&[Value::Text("owner-1".into())][..]),
            std::ops::Bound::Included(&[Value::Text("owner-1".into())][..]),
            Direction::Forward,
        )?
        .count();
    assert_eq!(n, 3);
    tx.commit()?;
    db.purge_now()?;
    assert_eq!(db.stats().pending_drops, 0);
    db.check()?;
    db.close()?;
    // And it all survives a reopen.
    let db = open(&fs, opts(256));
    let t = db.table("accounts")?;
    assert_eq!(by_balance(&db, &t)?, 300);
    let s = t.schema();
    assert_eq!(s.dropped_indexes, vec![1]);
    assert_eq!(s.index_position("by_owner"), Some(2));
    db.check()?;
    db.close()
}

#[test]
fn undo_from_before_the_drop_rolls_back_and_the_pages_come_back() -> Result<()> {
    let fs = SimFs::new(62);
    let db = open(&fs, opts(256));
    db.close()?;
    let empty = used_pages(&fs);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts())?;
    fill(&db, &t, 0, 1500)?;
    // An older writer changes owners (the dropped index's column) and is
    // still open across the drop; an older reader scans across it.
    let mut writer = db.begin()?;
    for i in 0..50 {
        writer.update(
            &t,
            &[Value::Int64(i)],
            &[(1, Value::Text(format!("new-{i}")))],
        )?;
    }
    db.drop_index("accounts", "by_owner")?;
    // The tree waits for the writer (purge bound below the drop).
    db.purge_now()?;
    assert_eq!(db.stats().pending_drops, 1);
    writer.rollback()?;
    db.purge_now()?;
    assert_eq!(db.stats().pending_drops, 0);
    db.check()?;
    let mut tx = db.begin()?;
    assert_eq!(tx.get(&t, &[Value::Int64(7)])?, Some(acct(7, "owner-7", 7)));
    tx.commit()?;
    db.drop_table("accounts")?;
    db.purge_now()?;
    assert_eq!(db.stats().pending_drops, 0);
    assert_eq!(db.stats().history_length, 0);
    db.close()?;
    // The writer's 50 updates went to its undo segment (undo_seg US7),
    // which its rollback freed: the undo tree never grew, and the pages
    // in use are the fresh database's.
    assert_eq!(
        used_pages(&fs),
        empty,
        "every page of the table and both indexes came back"
    );
    Ok(())
}

/// A power cut at seed-chosen moments around and during an index drop:
/// the next open has the index either whole or gone (and then its pages
/// are freed), and `check` passes.
#[test]
fn a_crash_during_an_index_drop_leaves_the_index_or_its_space() -> Result<()> {
    let seeds: u64 = std::env::var("QUILL_DROP_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    for seed in 0..seeds {
        let fs = SimFs::new(70 + seed);
        let db = open(&fs, opts(256));
        let t = db.create_table(accounts())?;
        fill(&db, &t, 0, 1500)?;
        let dropped = db.drop_index("accounts", "by_owner").is_ok();
        std::thread::sleep(std::time::Duration::from_millis(seed % 8 * 10));
        let crashed = fs.crash(if seed % 2 == 0 {
            CrashMode::DropUnsynced
        } else {
            CrashMode::Random
        });
        std::mem::forget(db);
        let db = open(&crashed, opts(256));
        let t = db.table("accounts")?;
        let s = t.schema();
        // drop_index returned: durable, so gone.
        if dropped {
            assert_eq!(s.index_position("by_owner"), None, "seed {seed}");
        }
        if let Err(e) = db.purge_now() {
            panic!("seed {seed}: purge: {e}");
        }
        assert_eq!(db.stats().pending_drops, 0, "seed {seed}");
        db.check()?;
        assert_eq!(by_balance(&db, &t)?, 1500, "seed {seed}");
        db.close()?;
    }
    Ok(())
}
