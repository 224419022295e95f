//! Tests that need the inside of the transaction layer: tables defined the
//! way builds before catalog invariant C4 allowed (keys that may not fit a
//! B+tree), and on-disk states such builds could leave behind.

use std::path::Path;
use std::sync::Arc;

use crate::catalog::schema::{IndexDef, TableDef};
use crate::catalog::{Column, ColumnType, Value};
use crate::db::{Db, Options};
use crate::io::{CrashMode, SimFs};
use crate::{Error, Result};

fn opts() -> Options {
    Options {
        store: crate::store::test_options(),
        purge: false,
        ..Options::default()
    }
}

fn open(fs: &SimFs) -> Db {
    Db::open_with(Arc::new(fs.clone()), Path::new("/db"), opts()).unwrap()
}

/// `notes(id int64 pk, body text(100000))` indexed on `body`: keys of up
/// to 200,012 bytes, which C4 refuses and older builds accepted.
fn notes() -> TableDef {
    TableDef {
        name: "notes".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("body", ColumnType::Text { max_len: 100_000 }, true),
        ],
        primary_key: vec![0],
        indexes: vec![IndexDef {
            name: "by_body".into(),
            columns: vec![1],
            unique: false,
        }],
    }
}

/// Create `notes` as a build before C4 would have.
fn create_notes_before_c4(db: &Db) -> crate::Table {
    let schema = db
        .inner
        .catalog
        .create_table_before_c4(&db.inner.store, notes())
        .unwrap();
    let st = Arc::new(super::table::TableState::new(schema.clone()));
    db.inner
        .tables
        .write()
        .insert(schema.def.name.clone(), st.clone());
    db.inner.by_id.write().insert(schema.id, st.clone());
    crate::Table { state: st }
}

/// `notes` without its index (the tests of insert undo need no index).
fn create_plain_notes(db: &Db) -> crate::Table {
    db.create_table(TableDef {
        indexes: vec![],
        ..notes()
    })
    .unwrap()
}

fn note(id: i64, len: usize) -> Vec<Value> {
    vec![Value::Int64(id), Value::Text("n".repeat(len))]
}

fn rows(db: &Db) -> Vec<i64> {
    let t = db.table("notes").unwrap();
    let mut tx = db.begin().unwrap();
    let out = tx
        .scan(
            &t,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            crate::btree::Direction::Forward,
        )
        .unwrap()
        .map(|r| match r.unwrap().first() {
            Some(Value::Int64(id)) => *id,
            other => panic!("bad row {other:?}"),
        })
        .collect();
    tx.commit().unwrap();
    out
}

fn assert_clean(db: &Db) {
    let report = db.check().unwrap();
    assert!(report.is_ok(), "check found {:?}", report.problems);
}

#[test]
fn c4_refuses_the_table_older_builds_accepted() {
    let fs = SimFs::new(70);
    let db = open(&fs);
    match db.create_table(notes()) {
        Err(Error::InvalidArgument { reason, .. }) => {
            assert!(reason.contains("by_body"), "{reason}");
            assert!(reason.contains(&db.max_key_len().to_string()), "{reason}");
        }
        other => panic!("expected the definition to be refused, got {other:?}"),
    }
    assert!(
        db.tables().is_empty(),
        "nothing of the refused table is left"
    );
}

/// Issue 13 item 1: an over-long indexed value left its row behind (the
/// statement's rollback failed on the same key), and the database could
/// not be opened again. Now the statement fails before writing anything.
#[test]
fn an_over_long_key_of_an_old_table_fails_its_statement_and_nothing_else() {
    let max_key = {
        let fs = SimFs::new(71);
        open(&fs).max_key_len()
    };
    // Commit, roll back, drop, and crash after the failed statement: every
    // way leaves exactly the rows of the statements that succeeded.
    for ending in ["commit", "rollback", "drop", "crash"] {
        let fs = SimFs::new(72);
        let db = open(&fs);
        let t = create_notes_before_c4(&db);
        let mut tx = db.begin().unwrap();
        tx.insert(&t, &note(1, 10)).unwrap();
        match tx.insert(&t, &note(2, max_key + 100)) {
            Err(Error::KeyTooLong {
                index, len, max, ..
            }) => {
                assert_eq!(index, "by_body");
                assert!(len > max, "{len} <= {max}");
            }
            other => panic!("expected KeyTooLong, got {other:?}"),
        }
        assert_eq!(tx.get(&t, &[Value::Int64(2)]).unwrap(), None);
        // The transaction goes on as before the failed statement.
        tx.insert(&t, &note(3, 20)).unwrap();
        tx.update(
            &t,
            &[Value::Int64(3)],
            &[(1, Value::Text("x".repeat(max_key + 1)))],
        )
        .unwrap_err();
        assert_eq!(tx.get(&t, &[Value::Int64(3)]).unwrap(), Some(note(3, 20)));
        let expect: Vec<i64> = match ending {
            "commit" => {
                tx.commit().unwrap();
                vec![1, 3]
            }
            "rollback" => {
                tx.rollback().unwrap();
                vec![]
            }
            "drop" => {
                drop(tx);
                vec![]
            }
            _ => {
                std::mem::forget(tx);
                vec![]
            }
        };
        let db = if ending == "crash" {
            let after = fs.crash(CrashMode::KeepUnsynced);
            drop(db);
            open(&after)
        } else {
            db.close().unwrap();
            open(&fs)
        };
        assert_eq!(rows(&db), expect, "after {ending}");
        assert_clean(&db);
        db.close().unwrap();
    }
}

/// The state older builds left on disk: a row whose index entry was never
/// written (the entry's key did not fit) and whose transaction never
/// committed. Recovery rolls it back; the undo of the entry that was never
/// written is a no-op, not an error that makes the database unopenable.
#[test]
fn recovery_rolls_back_a_change_whose_index_entry_was_never_written() {
    let fs = SimFs::new(73);
    let db = open(&fs);
    let t = create_notes_before_c4(&db);
    let long = note(1, db.max_key_len() + 100);
    let schema = t.schema();
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &note(2, 5)).unwrap();
    // What the old insert did before its secondary put failed: the undo
    // record and the clustered record, no index entry.
    let row = crate::catalog::encode_row(&schema.def.columns, &long).unwrap();
    let pk = super::table::pk_of(&schema, &long);
    tx.write_version(&schema, &pk, crate::txn::UndoKind::Insert, None, 0, &row)
        .unwrap();
    let lsn = db.inner.store.log().end_lsn();
    db.inner.store.commit(lsn, crate::Durability::Sync).unwrap();
    std::mem::forget(tx);
    let after = fs.crash(CrashMode::DropUnsynced);
    drop(db);
    let db = open(&after);
    let recovery = db.stats().recovery.unwrap();
    assert_eq!(recovery.rolled_back.len(), 1);
    assert_eq!(rows(&db), Vec::<i64>::new());
    assert_clean(&db);
    db.close().unwrap();
}

/// A value larger than a record can hold fails its statement only.
#[test]
fn a_value_too_large_for_a_record_fails_its_statement_only() -> Result<()> {
    let fs = SimFs::new(74);
    let db = open(&fs);
    let t = db.create_table(TableDef {
        name: "blobs".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("data", ColumnType::Bytes { max_len: u32::MAX }, true),
        ],
        primary_key: vec![0],
        indexes: vec![],
    })?;
    let max = super::table::clustered(&db.inner.store, &t.schema()).max_value_len();
    let mut tx = db.begin()?;
    tx.insert(&t, &[Value::Int64(1), Value::Bytes(vec![1; 100])])?;
    let err = tx
        .insert(&t, &[Value::Int64(2), Value::Bytes(vec![2; max + 1])])
        .unwrap_err();
    assert!(matches!(err, Error::LimitExceeded { .. }), "{err}");
    let err = tx
        .update(
            &t,
            &[Value::Int64(1)],
            &[(1, Value::Bytes(vec![3; max + 1]))],
        )
        .unwrap_err();
    assert!(matches!(err, Error::LimitExceeded { .. }), "{err}");
    assert_eq!(tx.get(&t, &[Value::Int64(2)])?, None);
    assert_eq!(
        tx.get(&t, &[Value::Int64(1)])?,
        Some(vec![Value::Int64(1), Value::Bytes(vec![1; 100])])
    );
    tx.commit()?;
    assert_clean(&db);
    db.close()
}

/// DROP3: a drop that listed its trees but crashed before deleting the
/// catalog entry leaves the table, whole; the next open discards the
/// entries instead of freeing a live table's pages.
#[test]
fn a_drop_cut_short_before_its_commit_point_leaves_the_table() -> Result<()> {
    use crate::store::drops::{self, PendingDrop};
    let fs = SimFs::new(61);
    let db = open(&fs);
    let mut def = notes();
    def.columns[1].ty = ColumnType::Text { max_len: 100 };
    let t = db.create_table(def)?;
    let mut tx = db.begin()?;
    for i in 0..300 {
        tx.insert(&t, &[Value::Int64(i), Value::Text(format!("n{i}"))])?;
    }
    tx.commit()?;
    let s = t.schema();
    let pending: Vec<PendingDrop> = std::iter::once(s.clustered_root)
        .chain(s.index_roots.iter().copied())
        .map(|root| PendingDrop {
            root: crate::page::PageId(root),
            table: s.id,
            trx: 1,
        })
        .collect();
    drops::add(&db.inner.store, &pending)?;
    // The catalog entry is still there: nothing may work on these trees.
    assert_eq!(super::drop_table::step(&db.inner, 100)?, 0);
    let crashed = fs.crash(CrashMode::DropUnsynced);
    std::mem::forget(db);
    let db = open(&crashed);
    assert_eq!(db.stats().pending_drops, 0);
    let t = db.table("notes")?;
    let mut tx = db.begin()?;
    assert_eq!(
        tx.get(&t, &[Value::Int64(299)])?,
        Some(vec![Value::Int64(299), Value::Text("n299".into())])
    );
    tx.commit()?;
    assert_eq!(db.check()?.tables, 1);
    db.close()
}

/// A DROP TABLE that cannot take its transaction id (every slot busy)
/// fails before its commit point and leaves the table as it was: not
/// marked dropped, so statements and purge go on using it (a mark left
/// behind would fail every statement and make purge skip the table's
/// records for good).
#[test]
fn a_drop_without_a_free_transaction_slot_leaves_the_table() -> Result<()> {
    let fs = SimFs::new(62);
    let db = Db::open_with(
        Arc::new(fs.clone()),
        Path::new("/db"),
        Options {
            max_transactions: 3,
            ..opts()
        },
    )?;
    let t = create_plain_notes(&db);
    let mut tx = db.begin()?;
    tx.insert(&t, &[Value::Int64(1), Value::Text("a".into())])?;
    tx.commit()?;
    // Transactions take their slot at their first write: hold them all.
    let mut held = Vec::new();
    let err = loop {
        let id = 100 + held.len() as i64;
        let mut tx = db.begin()?;
        match tx.insert(&t, &[Value::Int64(id), Value::Text("held".into())]) {
            Ok(_) => held.push(tx),
            Err(e) => break e,
        }
    };
    assert_eq!(held.len(), 3);
    assert!(matches!(err, Error::LimitExceeded { .. }), "{err}");
    let err = db.drop_table("notes").unwrap_err();
    assert!(matches!(err, Error::LimitExceeded { .. }), "{err}");
    assert!(!t.is_dropped(), "a failed drop leaves no mark");
    for tx in held {
        tx.commit()?;
    }
    let mut tx = db.begin()?;
    tx.insert(&t, &[Value::Int64(2), Value::Text("b".into())])?;
    tx.commit()?;
    assert_eq!(db.check()?.tables, 1);
    db.drop_table("notes")?;
    assert!(t.is_dropped());
    db.close()
}

#[test]
fn a_table_held_by_ddl_is_refused_without_waiting() {
    let fs = SimFs::new(31);
    let db = open(&fs);
    let t = db
        .create_table(TableDef {
            name: "t".into(),
            columns: vec![Column::new("id", ColumnType::Int64, false)],
            primary_key: vec![0],
            indexes: vec![],
        })
        .unwrap();
    let mut tx = db.begin_owned().unwrap();
    // As a plain CREATE INDEX holds it for its whole build.
    let ddl = t.state.schema.write();
    let (r, refused) = crate::wait::without_waiting(|| t.try_schema().map(|_| ()));
    assert!(
        refused && matches!(r, Err(Error::WouldWait { .. })),
        "{r:?}"
    );
    let (r, refused) = crate::wait::without_waiting(|| tx.insert(&t, &[Value::Int64(1)]));
    assert!(
        refused && matches!(r, Err(Error::WouldWait { .. })),
        "{r:?}"
    );
    drop(ddl);
    tx.insert(&t, &[Value::Int64(1)]).unwrap();
    tx.commit().unwrap();
    assert_clean(&db);
}

/// A crash after a commit mark and before the transaction's insert undo
/// segment was freed (undo_seg US3): recovery keeps the inserts (the
/// mark says committed) and queues the segment for purge, which frees it
/// (US7); a crash before the mark
/// rolls them back. Either way the segment's pages go back to the free
/// list.
#[test]
fn recovery_frees_the_segment_of_a_committed_transaction() {
    for marked in [true, false] {
        let fs = SimFs::new(77);
        let db = open(&fs);
        let t = create_plain_notes(&db);
        let mut tx = db.begin().unwrap();
        for i in 0..2000 {
            tx.insert(&t, &note(i, 10)).unwrap();
        }
        let lsn = if marked {
            tx.mark_only().unwrap()
        } else {
            db.inner.store.log().end_lsn()
        };
        db.inner.store.commit(lsn, crate::Durability::Sync).unwrap();
        std::mem::forget(tx);
        let after = fs.crash(CrashMode::DropUnsynced);
        drop(db);
        let db = open(&after);
        let recovery = db.stats().recovery.unwrap();
        assert_eq!(
            recovery.rolled_back.len(),
            usize::from(!marked),
            "marked {marked}"
        );
        let want: Vec<i64> = if marked {
            (0..2000).collect()
        } else {
            Vec::new()
        };
        assert_eq!(rows(&db), want, "marked {marked}");
        // A committed transaction's segment is left to purge (US7), with
        // the committed bit set, since purge may delete the mark first.
        let found = db.inner.segs.existing(&db.inner.store).unwrap();
        assert_eq!(
            found.iter().map(|f| f.committed).collect::<Vec<_>>(),
            if marked { vec![true] } else { vec![] }
        );
        db.purge_now().unwrap();
        assert!(db.inner.segs.existing(&db.inner.store).unwrap().is_empty());
        assert_clean(&db);
        db.close().unwrap();
        let free_after = crate::store::inspect(&after, Path::new("/db"))
            .unwrap()
            .free_pages;
        // 2,000 insert undo records of about 24 bytes fill 11 or more
        // 4 KiB pages, and nothing else in this test frees a page.
        assert!(free_after >= 11, "marked {marked}: {free_after} free pages");
    }
}

/// Inserts with automatic keys write one undo record per run (undo U7):
/// 500 of them in a row leave a single `InsertRun` record in the
/// transaction's segment; an explicit key writes its own record and the
/// next automatic key opens a new run.
#[test]
fn automatic_keys_write_one_undo_record_per_run() {
    let fs = SimFs::new(78);
    let db = open(&fs);
    let t = create_plain_notes(&db);
    let mut tx = db.begin().unwrap();
    for _ in 0..500 {
        tx.insert(&t, &[Value::Null, Value::Text("x".into())])
            .unwrap();
    }
    let records = |db: &Db| {
        let found = db.inner.segs.existing(&db.inner.store).unwrap();
        assert_eq!(found.len(), 1);
        db.inner
            .segs
            .chain_records(&db.inner.store, found[0].first, found[0].trx)
            .unwrap()
            .into_iter()
            .map(|r| r.rec.kind)
            .collect::<Vec<_>>()
    };
    use crate::txn::UndoKind::{Insert, InsertRun};
    assert_eq!(records(&db), vec![InsertRun]);
    tx.insert(&t, &[Value::Int64(1_000_000), Value::Text("y".into())])
        .unwrap();
    tx.insert(&t, &[Value::Null, Value::Text("z".into())])
        .unwrap();
    assert_eq!(records(&db), vec![InsertRun, Insert, InsertRun]);
    tx.commit().unwrap();
    assert!(db.inner.segs.existing(&db.inner.store).unwrap().is_empty());
    assert_eq!(rows(&db).len(), 502);
}

/// `kv(id int64 pk, v text(40))` indexed on `v`.
fn create_kv(db: &Db) -> crate::Table {
    db.create_table(TableDef {
        name: "kv".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("v", ColumnType::Text { max_len: 40 }, true),
        ],
        primary_key: vec![0],
        indexes: vec![IndexDef {
            name: "by_v".into(),
            columns: vec![1],
            unique: false,
        }],
    })
    .unwrap()
}

/// Every `(id, v)` of `kv` a transaction of `opts`-less `tx` reads.
fn kv_rows(tx: &mut crate::Txn<'_>, t: &crate::Table) -> Vec<(i64, String)> {
    tx.scan(
        t,
        std::ops::Bound::Unbounded,
        std::ops::Bound::Unbounded,
        crate::btree::Direction::Forward,
    )
    .unwrap()
    .map(|r| match r.unwrap().as_slice() {
        [Value::Int64(id), Value::Text(v)] => (*id, v.clone()),
        other => panic!("bad row {other:?}"),
    })
    .collect()
}

/// Update and delete-mark undo goes to the writer's undo segment
/// (undo_seg US7, undo U8): an older reader rebuilds the old versions
/// through roll pointers by place; a savepoint rollback undoes segment
/// records; the committed segment waits for purge and survives a power
/// loss (recovery queues it again) while an unfinished writer's segment
/// is rolled back; purge then removes the deleted rows and the replaced
/// index entries and ends the segment.
#[test]
fn update_undo_in_segments_serves_readers_rollback_recovery_and_purge() {
    use crate::{Isolation, TxnOptions};
    let fs = SimFs::new(91);
    let db = open(&fs);
    let t = create_kv(&db);
    let orig = |i: i64| format!("orig-{i}");
    let mut tx = db.begin().unwrap();
    for i in 0..100 {
        tx.insert(&t, &[Value::Int64(i), Value::Text(orig(i))])
            .unwrap();
    }
    tx.commit().unwrap();
    let before: Vec<(i64, String)> = (0..100).map(|i| (i, orig(i))).collect();
    let mut old = db
        .begin_with(TxnOptions {
            isolation: Isolation::RepeatableRead,
            ..TxnOptions::default()
        })
        .unwrap();
    assert_eq!(kv_rows(&mut old, &t), before);
    let mut tx = db.begin().unwrap();
    for i in 0..50 {
        tx.update(
            &t,
            &[Value::Int64(i)],
            &[(1, Value::Text(format!("new-{i}")))],
        )
        .unwrap();
    }
    for i in 50..60 {
        assert!(tx.delete(&t, &[Value::Int64(i)]).unwrap());
    }
    let sp = tx.savepoint();
    for i in 60..70 {
        assert!(tx.delete(&t, &[Value::Int64(i)]).unwrap());
        tx.update(
            &t,
            &[Value::Int64(i - 60)],
            &[(1, Value::Text("gone".into()))],
        )
        .unwrap();
    }
    tx.rollback_to_savepoint(sp).unwrap();
    tx.commit().unwrap();
    let after: Vec<(i64, String)> = (0..100)
        .filter(|i| !(50..60).contains(i))
        .map(|i| (i, if i < 50 { format!("new-{i}") } else { orig(i) }))
        .collect();
    // One segment waits for purge; no undo went to the undo tree.
    assert_eq!(db.stats().history_segments, 1);
    assert_eq!(db.inner.undo.all_records(&db.inner.store).count(), 0);
    assert_eq!(kv_rows(&mut old, &t), before, "the old view");
    old.commit().unwrap();
    let mut now = db.begin().unwrap();
    assert_eq!(kv_rows(&mut now, &t), after);
    now.commit().unwrap();
    assert_clean(&db);
    // A writer that never commits, its changes durable.
    let mut w = db.begin().unwrap();
    for i in 0..10 {
        w.update(&t, &[Value::Int64(i)], &[(1, Value::Text("lost".into()))])
            .unwrap();
    }
    assert!(w.delete(&t, &[Value::Int64(99)]).unwrap());
    let lsn = db.inner.store.log().end_lsn();
    db.inner.store.commit(lsn, crate::Durability::Sync).unwrap();
    std::mem::forget(w);
    let crashed = fs.crash(CrashMode::DropUnsynced);
    drop(db);
    let db = open(&crashed);
    let recovery = db.stats().recovery.unwrap();
    assert_eq!(recovery.rolled_back.len(), 1);
    assert_eq!(db.stats().history_segments, 1, "queued again at open");
    let t = db.table("kv").unwrap();
    let mut now = db.begin().unwrap();
    assert_eq!(kv_rows(&mut now, &t), after);
    now.commit().unwrap();
    assert_clean(&db);
    db.purge_now().unwrap();
    assert_eq!(db.stats().history_segments, 0);
    assert!(db.inner.segs.existing(&db.inner.store).unwrap().is_empty());
    assert_clean(&db);
    // Purge removed the delete-marked rows and the replaced entries.
    let mut now = db.begin().unwrap();
    assert_eq!(kv_rows(&mut now, &t), after);
    let entries = now
        .index_scan(
            &t,
            "by_v",
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            crate::btree::Direction::Forward,
        )
        .unwrap()
        .count();
    assert_eq!(entries, after.len());
    now.commit().unwrap();
    let check = db.check().unwrap();
    assert_eq!(
        check.records,
        after.len() as u64,
        "no delete-marked record left"
    );
    assert_eq!(
        check.index_entries,
        after.len() as u64,
        "no replaced entry left"
    );
    db.close().unwrap();
}

/// A transaction whose undo is split between its segment (a short row's
/// update) and the undo tree (an old row longer than a segment page
/// holds) commits by its mark and then the segment's bit (undo_seg US7):
/// after a power loss both halves count as committed, and purge then
/// clears both and the history to zero.
#[test]
fn undo_split_between_segment_and_tree_commits_as_one() {
    let fs = SimFs::new(93);
    let db = open(&fs);
    let t = create_plain_notes(&db);
    let page = db.inner.store.pool().page_size();
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &note(1, 10)).unwrap();
    tx.insert(&t, &note(2, page + 100)).unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin().unwrap();
    tx.update(&t, &[Value::Int64(1)], &[(1, Value::Text("short".into()))])
        .unwrap();
    tx.update(&t, &[Value::Int64(2)], &[(1, Value::Text("long".into()))])
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(db.stats().history_segments, 1);
    assert_eq!(db.inner.undo.all_records(&db.inner.store).count(), 1);
    assert_eq!(
        db.stats().history_length,
        2,
        "the tree half and the segment"
    );
    let crashed = fs.crash(CrashMode::DropUnsynced);
    drop(db);
    let db = open(&crashed);
    assert!(db.stats().recovery.unwrap().rolled_back.is_empty());
    assert_eq!(db.stats().history_length, 2);
    let t = db.table("notes").unwrap();
    let mut tx = db.begin().unwrap();
    let body = |tx: &mut crate::Txn<'_>, id: i64| match tx.get(&t, &[Value::Int64(id)]).unwrap() {
        Some(r) => r[1].clone(),
        None => panic!("row {id} gone"),
    };
    assert_eq!(body(&mut tx, 1), Value::Text("short".into()));
    assert_eq!(body(&mut tx, 2), Value::Text("long".into()));
    tx.commit().unwrap();
    db.purge_now().unwrap();
    assert_eq!(db.stats().history_length, 0);
    assert_eq!(db.stats().history_segments, 0);
    assert_eq!(db.inner.undo.all_records(&db.inner.store).count(), 0);
    assert_clean(&db);
    db.close().unwrap();
}

/// `wide(id int64 pk, v int64, pad text(200))` with no index yet.
fn create_wide(db: &Db) -> crate::Table {
    db.create_table(TableDef {
        name: "wide".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("v", ColumnType::Int64, true),
            Column::new("pad", ColumnType::Text { max_len: 200 }, true),
        ],
        primary_key: vec![0],
        indexes: vec![],
    })
    .unwrap()
}

fn wide_row(id: i64, v: i64) -> Vec<Value> {
    vec![
        Value::Int64(id),
        Value::Int64(v),
        Value::Text(format!("{id:0>150}")),
    ]
}

/// The update and delete-mark undo records in the undo segments.
fn segment_records(db: &Db) -> Vec<crate::txn::UndoRecord> {
    let store = &db.inner.store;
    let mut out = Vec::new();
    for seg in db.inner.segs.existing(store).unwrap() {
        for r in db
            .inner
            .segs
            .chain_records(store, seg.first, seg.trx)
            .unwrap()
        {
            if r.rec.kind.has_old_value() {
                out.push(r.rec);
            }
        }
    }
    out
}

/// Undo U9: an update's record holds the replaced version as a delta (its
/// changed bytes, not the 150-byte pad it kept) and a delete-mark's holds
/// no row bytes; an old view, a rollback to a savepoint and recovery's
/// rollback all rebuild the old rows from them.
#[test]
fn update_undo_holds_only_what_changed() {
    use crate::txn::OldVersion;
    use crate::{Isolation, TxnOptions};
    let fs = SimFs::new(95);
    let db = open(&fs);
    let t = create_wide(&db);
    let mut tx = db.begin().unwrap();
    for id in 0..20 {
        tx.insert(&t, &wide_row(id, id)).unwrap();
    }
    tx.commit().unwrap();
    let mut old = db
        .begin_with(TxnOptions {
            isolation: Isolation::RepeatableRead,
            ..TxnOptions::default()
        })
        .unwrap();
    let all = |tx: &mut crate::Txn<'_>| -> Vec<Vec<Value>> {
        tx.scan(
            &t,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            crate::btree::Direction::Forward,
        )
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
    };
    let before = all(&mut old);
    let mut tx = db.begin().unwrap();
    for id in 0..10 {
        tx.update(&t, &[Value::Int64(id)], &[(1, Value::Int64(1000 + id))])
            .unwrap();
    }
    assert!(tx.delete(&t, &[Value::Int64(15)]).unwrap());
    let sp = tx.savepoint();
    for id in 0..5 {
        tx.update(&t, &[Value::Int64(id)], &[(1, Value::Int64(-1))])
            .unwrap();
    }
    assert!(tx.delete(&t, &[Value::Int64(16)]).unwrap());
    tx.rollback_to_savepoint(sp).unwrap();
    tx.commit().unwrap();
    let recs = segment_records(&db);
    assert_eq!(recs.len(), 17);
    for r in &recs {
        let Some(OldVersion::Delta(d)) = &r.old else {
            panic!("a whole old value: {r:?}");
        };
        assert!(d.middle.len() <= 8, "{d:?}");
        assert!(d.keys.is_empty());
        // The whole old value alone would be over 170 bytes.
        assert!(r.encode().len() < 48, "{} bytes", r.encode().len());
    }
    assert_eq!(all(&mut old), before, "the old view, through deltas");
    old.commit().unwrap();
    let mut now = db.begin().unwrap();
    let after = all(&mut now);
    now.commit().unwrap();
    assert_eq!(after.len(), 19);
    assert!(after.iter().all(|r| match r.as_slice() {
        [Value::Int64(id), Value::Int64(v), _] => *v == if *id < 10 { 1000 + id } else { *id },
        _ => false,
    }));
    // A writer that never commits, its changes durable: recovery rolls
    // its deltas back.
    let mut w = db.begin().unwrap();
    for id in 0..20 {
        let _ = w
            .update(&t, &[Value::Int64(id)], &[(2, Value::Text("x".into()))])
            .unwrap();
    }
    let lsn = db.inner.store.log().end_lsn();
    db.inner.store.commit(lsn, crate::Durability::Sync).unwrap();
    std::mem::forget(w);
    let crashed = fs.crash(CrashMode::DropUnsynced);
    drop(db);
    let db = open(&crashed);
    let t = db.table("wide").unwrap();
    let mut now = db.begin().unwrap();
    let again: Vec<Vec<Value>> = now
        .scan(
            &t,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            crate::btree::Direction::Forward,
        )
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    now.commit().unwrap();
    assert_eq!(again, after);
    db.purge_now().unwrap();
    assert_clean(&db);
    db.close().unwrap();
}

/// Undo U9 and `online_index` OI6: deltas carry no key of an index
/// created after them, so a plain CREATE INDEX while a transaction older
/// than it is open builds online and waits for it; once built, purge of
/// the older deltas and of newer ones (which carry the index's keys)
/// leaves an index that `check` finds complete and exact. With nothing
/// open the build is the bulk one.
#[test]
fn an_index_created_after_delta_updates_stays_exact_through_purge() {
    let fs = SimFs::new(97);
    let db = Arc::new(open(&fs));
    let t = create_wide(&db);
    let mut tx = db.begin().unwrap();
    for id in 0..200 {
        tx.insert(&t, &wide_row(id, id % 7)).unwrap();
    }
    tx.commit().unwrap();
    // Older deltas: the indexed column changes, rows go, and one writer
    // is still open when the build starts.
    let mut tx = db.begin().unwrap();
    for id in 0..60 {
        tx.update(&t, &[Value::Int64(id)], &[(1, Value::Int64(100 + id))])
            .unwrap();
    }
    for id in 60..70 {
        assert!(tx.delete(&t, &[Value::Int64(id)]).unwrap());
    }
    tx.commit().unwrap();
    let mut open_writer = db.begin().unwrap();
    open_writer
        .update(&t, &[Value::Int64(100)], &[(1, Value::Int64(555))])
        .unwrap();
    let by_v = IndexDef {
        name: "by_v".into(),
        columns: vec![1],
        unique: false,
    };
    let builder = {
        let (db, by_v) = (db.clone(), by_v.clone());
        std::thread::spawn(move || db.create_index("wide", by_v))
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        !builder.is_finished(),
        "the build waits for the older writer"
    );
    // Its rollback restores a version the build must index: built before
    // the rollback, the index would miss it.
    open_writer.rollback().unwrap();
    builder.join().unwrap().unwrap();
    assert_clean(&db);
    // Newer changes, whose deltas carry the index's keys.
    let mut tx = db.begin().unwrap();
    for id in 0..30 {
        tx.update(&t, &[Value::Int64(id)], &[(1, Value::Int64(7))])
            .unwrap();
    }
    for id in 190..200 {
        assert!(tx.delete(&t, &[Value::Int64(id)]).unwrap());
    }
    tx.commit().unwrap();
    db.purge_now().unwrap();
    assert_clean(&db);
    let check = db.check().unwrap();
    assert_eq!(check.live_rows, 180);
    assert_eq!(check.records, 180, "purged the delete-marked rows");
    assert_eq!(check.index_entries, 180, "one entry per row, none stale");
    // Nothing open: the bulk build, then the same again.
    db.create_index(
        "wide",
        IndexDef {
            name: "by_v_id".into(),
            columns: vec![1, 0],
            unique: false,
        },
    )
    .unwrap();
    let mut tx = db.begin().unwrap();
    for id in 100..150 {
        tx.update(&t, &[Value::Int64(id)], &[(1, Value::Int64(-id))])
            .unwrap();
    }
    tx.commit().unwrap();
    db.purge_now().unwrap();
    assert_clean(&db);
    assert_eq!(db.check().unwrap().index_entries, 360);
    let db = Arc::try_unwrap(db).unwrap_or_else(|_| panic!("still shared"));
    db.close().unwrap();
}

/// A bulk `CREATE INDEX` holds only its own table's schema lock while it
/// builds: with the build on table `a` stalled in its scan (`a`'s only
/// leaf latched here), `CREATE INDEX` on table `b` runs to its end.
#[test]
fn a_bulk_index_build_does_not_hold_up_ddl_on_other_tables() {
    use crate::buffer::Load;
    use crate::page::PageId;
    use std::time::{Duration, Instant};
    let fs = SimFs::new(90);
    let db = Arc::new(open(&fs));
    let def = |name: &str| TableDef {
        name: name.into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("v", ColumnType::Int64, false),
        ],
        primary_key: vec![0],
        indexes: vec![],
    };
    let a = db.create_table(def("a")).unwrap();
    let b = db.create_table(def("b")).unwrap();
    let mut tx = db.begin().unwrap();
    for id in 0..10 {
        for t in [&a, &b] {
            tx.insert(t, &[Value::Int64(id), Value::Int64(-id)])
                .unwrap();
        }
    }
    tx.commit().unwrap();
    let by_v = IndexDef {
        name: "by_v".into(),
        columns: vec![1],
        unique: false,
    };
    let root = PageId(a.state.schema.read().clustered_root);
    let latch = db
        .inner
        .store
        .pool()
        .fetch_write(root, Load::Verify)
        .unwrap();
    let build_a = {
        let (db, by_v) = (db.clone(), by_v.clone());
        std::thread::spawn(move || db.create_index("a", by_v))
    };
    // Wait until a's build holds a's schema lock (it then stalls on the
    // latch, in its scan).
    let start = Instant::now();
    while a.state.schema.try_write().is_some() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "a's build never began"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let (done, finished) = std::sync::mpsc::channel();
    {
        let db = db.clone();
        std::thread::spawn(move || done.send(db.create_index("b", by_v)));
    }
    let b_result = finished.recv_timeout(Duration::from_secs(20));
    assert!(
        !build_a.is_finished(),
        "a's build did not wait for the latch"
    );
    drop(latch);
    b_result
        .expect("CREATE INDEX on b waited for the build on a")
        .unwrap();
    build_a.join().unwrap().unwrap();
    let check = db.check().unwrap();
    assert_eq!(check.index_entries, 20);
    assert_clean(&db);
}

/// A drawn key goes back to the counter only while it is the last one
/// drawn and no explicit key has been stored (table TB3): otherwise the
/// next draw could meet a key already written, or skip the lookup over it.
#[test]
fn a_key_is_given_back_only_while_it_is_the_last_drawn() {
    let fs = SimFs::new(33);
    let db = open(&fs);
    let t = create_plain_notes(&db);
    let (st, store) = (&t.state, &db.inner.store);
    let schema = st.latest();
    let next = || st.next_auto(store, &schema).unwrap();
    let k = next();
    st.give_back_auto(k);
    assert_eq!(next(), k, "the last key drawn goes back");
    let later = next();
    st.give_back_auto(k);
    assert_eq!(next(), later + 1, "a key drawn before another stays drawn");
    st.give_back_auto(later - 5);
    assert_eq!(next(), later + 2);
    st.saw_key(store, &schema, later + 10).unwrap();
    let k = next();
    assert_eq!(k, later + 11);
    st.give_back_auto(k);
    assert_eq!(
        next(),
        k + 1,
        "after an explicit key no key goes back (freshness is over)"
    );
}
