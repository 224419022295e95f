use std::ops::Bound::{Excluded, Included, Unbounded};

use quill::Error;
use quill::btree::Direction;
use quill::catalog::schema::{IndexDef, TableDef};
use quill::catalog::{Column, ColumnType, Value};
use quill::db::Db;
use quill::io::SimFs;

use crate::common::*;

type Rows = Vec<Vec<Value>>;

/// Every row by primary key and by each index, as a new transaction sees it.
fn snapshot(db: &Db) -> (Rows, Rows, Rows) {
    let t = db.table("accounts").unwrap();
    let mut tx = db.begin().unwrap();
    let all: Rows = tx
        .scan(&t, Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    let by_balance: Rows = tx
        .index_scan(&t, "by_balance", Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    let by_owner: Rows = tx
        .index_scan(&t, "by_owner", Unbounded, Unbounded, Direction::Backward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    tx.commit().unwrap();
    (all, by_balance, by_owner)
}

#[test]
fn insert_get_update_delete_and_scans() {
    let fs = SimFs::new(1);
    let db = open(&fs, opts(200));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..300 {
        tx.insert(&t, &acct(i, &format!("owner{i:04}"), 1000 - i))
            .unwrap();
    }
    tx.commit().unwrap();

    let mut tx = db.begin().unwrap();
    assert_eq!(
        tx.get(&t, &[Value::Int64(7)]).unwrap(),
        Some(acct(7, "owner0007", 993))
    );
    assert_eq!(tx.get(&t, &[Value::Int64(7000)]).unwrap(), None);
    assert!(
        tx.update(&t, &[Value::Int64(7)], &[(2, Value::Int64(5))])
            .unwrap()
    );
    assert!(
        !tx.update(&t, &[Value::Int64(7000)], &[(2, Value::Int64(5))])
            .unwrap()
    );
    assert!(tx.delete(&t, &[Value::Int64(8)]).unwrap());
    assert!(!tx.delete(&t, &[Value::Int64(8)]).unwrap());
    // The transaction sees its own changes.
    assert_eq!(tx.get(&t, &[Value::Int64(8)]).unwrap(), None);
    assert_eq!(
        tx.get(&t, &[Value::Int64(7)]).unwrap(),
        Some(acct(7, "owner0007", 5))
    );
    tx.commit().unwrap();

    let (all, by_balance, by_owner) = snapshot(&db);
    assert_eq!(all.len(), 299);
    assert!(all.windows(2).all(|w| int(&w[0][0]) < int(&w[1][0])));
    let bal: Vec<i64> = by_balance.iter().map(|r| int(&r[2])).collect();
    assert!(bal.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(by_balance[0], acct(7, "owner0007", 5));
    assert_eq!(by_owner.len(), 299);
    assert_eq!(by_owner[0], acct(299, "owner0299", 701));

    // Bounded scans, both directions, prefix semantics.
    let mut tx = db.begin().unwrap();
    let lo = [Value::Int64(10)];
    let hi = [Value::Int64(20)];
    let ids = |rows: Rows| rows.iter().map(|r| int(&r[0])).collect::<Vec<_>>();
    let fwd: Rows = tx
        .scan(&t, Included(&lo), Excluded(&hi), Direction::Forward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    assert_eq!(ids(fwd), (10..20).collect::<Vec<_>>());
    let bwd: Rows = tx
        .scan(&t, Excluded(&lo), Included(&hi), Direction::Backward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    assert_eq!(ids(bwd), (11..=20).rev().collect::<Vec<_>>());
    let rich: Rows = tx
        .index_scan(
            &t,
            "by_balance",
            Included(&[Value::Int64(990)]),
            Unbounded,
            Direction::Forward,
        )
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    assert_eq!(
        ids(rich),
        (0..=10)
            .rev()
            .filter(|&i| i != 7 && i != 8)
            .collect::<Vec<_>>()
    );
    tx.commit().unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// A row found through an index entry of another of its versions is
/// skipped: entries are not versioned, and an update that changes a key
/// (or a delete and a new insert of the same primary key) leaves the old
/// entry until purge. An older snapshot, which keeps purge from removing
/// anything, sees the old keys and not the new ones; a new one the
/// reverse. Both indexes: `by_owner` (text, a unique index whose NULLs
/// are kept apart) and `by_balance` (int64).
#[test]
fn entries_of_other_versions_are_skipped() {
    let fs = SimFs::new(1);
    let db = open(&fs, opts(200));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin().unwrap();
    for (id, owner, balance) in [(1, "a", 10), (2, "b", 20), (3, "c", 30)] {
        tx.insert(&t, &acct(id, owner, balance)).unwrap();
    }
    tx.commit().unwrap();
    // A snapshot from its first statement on (read committed would take
    // one per statement).
    let mut old = db.begin_with(RR).unwrap();
    assert!(old.get(&t, &[Value::Int64(1)]).unwrap().is_some());

    let mut tx = db.begin().unwrap();
    assert!(
        tx.update(
            &t,
            &[Value::Int64(2)],
            &[(1, Value::Text("z".into())), (2, Value::Int64(25))]
        )
        .unwrap()
    );
    assert!(tx.delete(&t, &[Value::Int64(3)]).unwrap());
    tx.commit().unwrap();
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &acct(3, "y", 5)).unwrap();
    tx.commit().unwrap();

    let index =
        |tx: &mut quill::Txn<'_>, name: &str| index_rows(tx, &t, name, Unbounded, Unbounded);
    let mut new = db.begin().unwrap();
    assert_eq!(
        index(&mut new, "by_owner"),
        vec![acct(1, "a", 10), acct(3, "y", 5), acct(2, "z", 25)]
    );
    assert_eq!(
        index(&mut new, "by_balance"),
        vec![acct(3, "y", 5), acct(1, "a", 10), acct(2, "z", 25)]
    );
    let before = vec![acct(1, "a", 10), acct(2, "b", 20), acct(3, "c", 30)];
    assert_eq!(index(&mut old, "by_owner"), before);
    assert_eq!(index(&mut old, "by_balance"), before);
    new.commit().unwrap();
    old.commit().unwrap();
}

#[test]
fn duplicate_keys_leave_no_trace() {
    let fs = SimFs::new(2);
    let db = open(&fs, opts(200));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &acct(1, "ada", 10)).unwrap();
    tx.insert(&t, &acct(2, "bob", 20)).unwrap();
    let e = tx.insert(&t, &acct(1, "cyd", 30)).unwrap_err();
    assert!(
        matches!(e, Error::DuplicateKey { ref index, .. } if index == "PRIMARY"),
        "{e}"
    );
    let e = tx.insert(&t, &acct(3, "ada", 30)).unwrap_err();
    assert!(
        matches!(e, Error::DuplicateKey { ref index, .. } if index == "by_owner"),
        "{e}"
    );
    let e = tx
        .update(&t, &[Value::Int64(2)], &[(1, Value::Text("ada".into()))])
        .unwrap_err();
    assert!(matches!(e, Error::DuplicateKey { .. }), "{e}");
    // NULLs never collide in a unique index.
    tx.insert(&t, &[Value::Int64(4), Value::Null, Value::Int64(1)])
        .unwrap();
    tx.insert(&t, &[Value::Int64(5), Value::Null, Value::Int64(1)])
        .unwrap();
    // The failed statements changed nothing; the transaction goes on.
    assert_eq!(tx.get(&t, &[Value::Int64(3)]).unwrap(), None);
    assert_eq!(
        tx.get(&t, &[Value::Int64(2)]).unwrap(),
        Some(acct(2, "bob", 20))
    );
    tx.commit().unwrap();
    // A key freed by a committed delete can be taken again.
    let mut tx = db.begin().unwrap();
    assert!(tx.delete(&t, &[Value::Int64(1)]).unwrap());
    tx.insert(&t, &acct(6, "ada", 60)).unwrap();
    tx.insert(&t, &acct(1, "ada2", 11)).unwrap();
    tx.commit().unwrap();
    let (all, _, _) = snapshot(&db);
    assert_eq!(all.len(), 5);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    db.purge_now().unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(db.stats().history_length, 0);
    // A transaction whose writes all failed changed nothing: it commits
    // without leaving history behind.
    let mut tx = db.begin().unwrap();
    let e = tx.insert(&t, &acct(3, "ada", 30)).unwrap_err();
    assert!(matches!(e, Error::DuplicateKey { .. }), "{e}");
    let e = tx
        .update(&t, &[Value::Int64(2)], &[(1, Value::Text("ada".into()))])
        .unwrap_err();
    assert!(matches!(e, Error::DuplicateKey { .. }), "{e}");
    tx.commit().unwrap();
    db.purge_now().unwrap();
    assert_eq!(db.stats().history_length, 0);
}

#[test]
fn rollback_restores_rows_and_every_index_exactly() {
    let fs = SimFs::new(3);
    let db = open(&fs, opts(200));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..200 {
        tx.insert(&t, &acct(i, &format!("o{i}"), i % 17)).unwrap();
    }
    tx.commit().unwrap();
    db.purge_now().unwrap();
    let before = snapshot(&db);
    let entries_before = db.check().unwrap().index_entries;

    let mut rng = 12345u64;
    let mut next = || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        rng >> 33
    };
    let mut tx = db.begin().unwrap();
    for _ in 0..2000 {
        let id = (next() % 260) as i64;
        match next() % 4 {
            0 => {
                let _ = tx.insert(
                    &t,
                    &acct(id, &format!("n{}", next() % 300), (next() % 50) as i64),
                );
            }
            1 => {
                let _ = tx.delete(&t, &[Value::Int64(id)]).unwrap();
            }
            2 => {
                let _ = tx.update(
                    &t,
                    &[Value::Int64(id)],
                    &[(2, Value::Int64((next() % 50) as i64))],
                );
            }
            _ => {
                let _ = tx.update(
                    &t,
                    &[Value::Int64(id)],
                    &[(1, Value::Text(format!("u{}", next() % 300)))],
                );
            }
        }
    }
    tx.rollback().unwrap();
    assert_eq!(snapshot(&db), before);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(
        report.index_entries, entries_before,
        "rollback left index entries behind"
    );
    assert_eq!(db.stats().history_length, 0);
}

#[test]
fn hidden_row_ids_and_automatic_keys() {
    let fs = SimFs::new(4);
    let log_def = TableDef {
        name: "events".into(),
        columns: vec![Column::new("what", ColumnType::Text { max_len: 20 }, false)],
        primary_key: vec![],
        indexes: vec![],
    };
    let auto_def = TableDef {
        name: "orders".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("qty", ColumnType::Int32, false),
        ],
        primary_key: vec![0],
        indexes: vec![],
    };
    {
        let db = open(&fs, opts(200));
        let ev = db.create_table(log_def).unwrap();
        let or = db.create_table(auto_def).unwrap();
        let mut tx = db.begin().unwrap();
        for i in 0..10 {
            let k = tx.insert(&ev, &[Value::Text(format!("e{i}"))]).unwrap();
            assert_eq!(k, vec![Value::Int64(i + 1)]);
        }
        assert_eq!(
            tx.insert(&or, &[Value::Null, Value::Int32(1)]).unwrap(),
            vec![Value::Int64(1)]
        );
        tx.insert(&or, &[Value::Int64(100), Value::Int32(2)])
            .unwrap();
        assert_eq!(
            tx.insert(&or, &[Value::Null, Value::Int32(3)]).unwrap(),
            vec![Value::Int64(101)]
        );
        tx.commit().unwrap();
        db.close().unwrap();
    }
    let db = open(&fs, opts(200));
    let ev = db.table("events").unwrap();
    let or = db.table("orders").unwrap();
    let mut tx = db.begin().unwrap();
    assert_eq!(
        tx.insert(&ev, &[Value::Text("later".into())]).unwrap(),
        vec![Value::Int64(11)]
    );
    assert_eq!(
        tx.insert(&or, &[Value::Null, Value::Int32(4)]).unwrap(),
        vec![Value::Int64(102)]
    );
    assert_eq!(
        tx.get(&ev, &[Value::Int64(3)]).unwrap(),
        Some(vec![Value::Text("e2".into())])
    );
    tx.commit().unwrap();
}

/// An automatic key drawn for a NULL is the key everywhere the row goes:
/// the returned key, the row, the primary key, and secondary and unique
/// index keys that include the key column (the insert reads the drawn key
/// in the column's place instead of copying the row). A second insert of
/// the same unique key with another drawn id is a duplicate.
#[test]
fn a_drawn_key_is_in_every_index_that_has_its_column() {
    let fs = SimFs::new(5);
    let db = open(&fs, opts(200));
    let def = TableDef {
        name: "orders".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("qty", ColumnType::Int32, false),
            Column::new("note", ColumnType::Text { max_len: 20 }, true),
        ],
        primary_key: vec![0],
        indexes: vec![
            IndexDef {
                name: "by_qty_id".into(),
                columns: vec![1, 0],
                unique: true,
            },
            IndexDef {
                name: "by_id".into(),
                columns: vec![0],
                unique: true,
            },
            IndexDef {
                name: "by_note".into(),
                columns: vec![2],
                unique: false,
            },
        ],
    };
    let t = db.create_table(def).unwrap();
    let mut tx = db.begin().unwrap();
    let mut keys = Vec::new();
    for (qty, note) in [(5, "b"), (3, "a"), (5, "c")] {
        let k = tx
            .insert(
                &t,
                &[Value::Null, Value::Int32(qty), Value::Text(note.into())],
            )
            .unwrap();
        keys.push(int(&k[0]));
    }
    tx.commit().unwrap();
    assert_eq!(keys, vec![1, 2, 3]);
    let row = |id: i64, qty: i32, note: &str| {
        vec![
            Value::Int64(id),
            Value::Int32(qty),
            Value::Text(note.into()),
        ]
    };
    let mut tx = db.begin().unwrap();
    let scan = |tx: &mut quill::Txn<'_>, name: &str| index_rows(tx, &t, name, Unbounded, Unbounded);
    assert_eq!(
        scan(&mut tx, "by_qty_id"),
        vec![row(2, 3, "a"), row(1, 5, "b"), row(3, 5, "c")]
    );
    assert_eq!(
        scan(&mut tx, "by_id"),
        vec![row(1, 5, "b"), row(2, 3, "a"), row(3, 5, "c")]
    );
    assert_eq!(
        scan(&mut tx, "by_note"),
        vec![row(2, 3, "a"), row(1, 5, "b"), row(3, 5, "c")]
    );
    // Point reads through each unique index by a key holding the id.
    let by = |tx: &mut quill::Txn<'_>, name: &str, key: &[Value]| {
        index_rows(tx, &t, name, Included(key), Included(key))
    };
    assert_eq!(
        by(&mut tx, "by_qty_id", &[Value::Int32(5), Value::Int64(3)]),
        vec![row(3, 5, "c")]
    );
    assert_eq!(
        by(&mut tx, "by_id", &[Value::Int64(2)]),
        vec![row(2, 3, "a")]
    );
    assert_eq!(
        tx.get(&t, &[Value::Int64(3)]).unwrap(),
        Some(row(3, 5, "c"))
    );
    // An explicit key equal to a drawn one is a duplicate of it.
    assert!(matches!(
        tx.insert(&t, &row(2, 9, "z")),
        Err(Error::DuplicateKey { .. })
    ));
    tx.commit().unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// Automatic keys skip the duplicate-key lookup only while no explicit key
/// was stored (TB3). The race that rule must survive: an automatic insert
/// draws key 1 while the table has no explicit key, then waits for key 1's
/// row lock; meanwhile an explicit insert of key 1 commits. The automatic
/// insert must then find key 1 taken (a duplicate), never overwrite it
/// (debug builds look anyway and fail on a broken TB3).
#[test]
fn an_explicit_key_taken_while_an_automatic_insert_waits_is_a_duplicate() {
    let fs = SimFs::new(9);
    let db = open(&fs, opts(400));
    let t = db
        .create_table(TableDef {
            name: "race".into(),
            columns: vec![
                Column::new("id", ColumnType::Int64, false),
                Column::new("who", ColumnType::Int32, false),
            ],
            primary_key: vec![0],
            indexes: vec![],
        })
        .unwrap();
    let mut explicit = db.begin().unwrap();
    // Hold key 1's row lock (the key does not exist yet).
    assert_eq!(
        explicit.get_for_update(&t, &[Value::Int64(1)]).unwrap(),
        None
    );
    let automatic = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut tx = db.begin().unwrap();
            match tx.insert(&t, &[Value::Null, Value::Int32(0)]) {
                Ok(k) => {
                    tx.commit().unwrap();
                    Ok(k)
                }
                Err(e) => {
                    tx.rollback().unwrap();
                    Err(e)
                }
            }
        });
        // Let the automatic insert draw key 1 and wait for its lock.
        std::thread::sleep(std::time::Duration::from_millis(100));
        explicit
            .insert(&t, &[Value::Int64(1), Value::Int32(1)])
            .unwrap();
        explicit.commit().unwrap();
        h.join().unwrap()
    });
    match automatic {
        Err(Error::DuplicateKey { .. }) => {}
        other => panic!("the automatic insert of key 1 should be a duplicate: {other:?}"),
    }
    let mut tx = db.begin().unwrap();
    assert_eq!(
        tx.get(&t, &[Value::Int64(1)]).unwrap(),
        Some(vec![Value::Int64(1), Value::Int32(1)]),
        "the explicit row stands"
    );
    // Later automatic keys continue above it.
    assert_eq!(
        tx.insert(&t, &[Value::Null, Value::Int32(2)]).unwrap(),
        vec![Value::Int64(2)]
    );
    tx.commit().unwrap();
}

#[test]
fn create_index_on_a_populated_table() {
    let fs = SimFs::new(5);
    let db = open(&fs, opts(300));
    let mut def = accounts();
    def.indexes.clear();
    let t = db.create_table(def).unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..3000 {
        tx.insert(&t, &acct(i, &format!("o{}", i % 2900), i % 100))
            .unwrap();
    }
    tx.commit().unwrap();
    // An older snapshot: the build waits for it (undo U9: the update's
    // undo record cannot name a key of an index created after it, so no
    // version older than the index may need an entry in it).
    let mut reader = db.begin_with(RR).unwrap();
    assert!(reader.get(&t, &[Value::Int64(5)]).unwrap().is_some());
    let mut tx = db.begin().unwrap();
    tx.update(&t, &[Value::Int64(5)], &[(2, Value::Int64(777))])
        .unwrap();
    tx.commit().unwrap();

    let e = std::thread::scope(|s| {
        let build = s.spawn(|| {
            db.create_index(
                "accounts",
                IndexDef {
                    name: "by_owner".into(),
                    columns: vec![1],
                    unique: true,
                },
            )
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            !build.is_finished(),
            "the build waits for the older snapshot"
        );
        assert!(reader.get(&t, &[Value::Int64(5)]).unwrap().is_some());
        reader.commit().unwrap();
        build.join().unwrap().unwrap_err()
    });
    assert!(matches!(e, Error::DuplicateKey { .. }), "{e}");
    assert!(
        t.schema().index_position("by_owner").is_none(),
        "the failed build left no index"
    );
    db.create_index(
        "accounts",
        IndexDef {
            name: "by_balance".into(),
            columns: vec![2],
            unique: false,
        },
    )
    .unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    let mut tx = db.begin().unwrap();
    let new: Vec<_> = tx
        .index_scan(
            &t,
            "by_balance",
            Included(&[Value::Int64(777)]),
            Included(&[Value::Int64(777)]),
            Direction::Forward,
        )
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    assert_eq!(new, vec![acct(5, "o5", 777)]);
    tx.insert(&t, &acct(5000, "x", 777)).unwrap();
    tx.commit().unwrap();
    drop(t);
    db.close().unwrap();
    let db = open(&fs, opts(300));
    // The failed online build's index keeps its place, dropped (catalog C5).
    let schema = db.table("accounts").unwrap().schema();
    assert!(schema.index_position("by_owner").is_none());
    assert!(schema.index_position("by_balance").is_some());
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// A unique build counts neither NULL keys nor a deleted row as
/// duplicates, finds a duplicate among keys whose first seventeen bytes
/// tie, and its entries come out in key order where keys share long
/// beginnings (the build sorts them in one arena, by the sixteen bytes
/// after the prefix all keys share, then by whole keys:
/// `btree::key_sort`).
#[test]
fn create_unique_index_skips_nulls_and_deleted_rows_and_sorts_shared_prefixes() {
    let fs = SimFs::new(6);
    // No purge: the deleted row stays delete-marked through the build.
    let db = open(
        &fs,
        quill::db::Options {
            purge: false,
            ..opts(300)
        },
    );
    let mut def = accounts();
    def.indexes.clear();
    let t = db.create_table(def).unwrap();
    // Owners zero-padded to 16 digits (at least twelve leading zeros in
    // common); every seventh NULL. 7919 is prime to 2000, so the rest are
    // distinct.
    let owner = |i: i64| format!("{:0>16}", (i * 7919) % 2000);
    let mut tx = db.begin().unwrap();
    for i in 0..2000 {
        let o = if i % 7 == 0 {
            Value::Null
        } else {
            Value::Text(owner(i))
        };
        tx.insert(&t, &[Value::Int64(i), o, Value::Int64(i)])
            .unwrap();
    }
    // A row holding owner(1) again, deleted before the build.
    tx.insert(&t, &acct(5000, &owner(1), 0)).unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin().unwrap();
    tx.delete(&t, &[Value::Int64(5000)]).unwrap();
    tx.commit().unwrap();
    let unique = |name: &str, unique: bool| IndexDef {
        name: name.into(),
        columns: vec![1],
        unique,
    };
    db.create_index("accounts", unique("by_owner", true))
        .unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    let mut tx = db.begin().unwrap();
    let by_owner: Rows = tx
        .index_scan(&t, "by_owner", Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    assert_eq!(by_owner.len(), 2000);
    let owners: Vec<&str> = by_owner
        .iter()
        .filter_map(|r| match &r[1] {
            Value::Text(s) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(owners.len(), 2000 - 2000_usize.div_ceil(7));
    assert!(owners.windows(2).all(|w| w[0] < w[1]), "in key order");
    let err = tx.insert(&t, &acct(6000, &owner(2), 0)).unwrap_err();
    assert!(matches!(err, Error::DuplicateKey { .. }), "{err}");
    tx.rollback().unwrap();

    // No NULLs: the keys share only their tag byte, and the sixteen bytes
    // after it (a first digit 0 or 1, then a 24-digit number's leading
    // zeros) tie for half of them each, so the sort compares whole keys.
    // Row 9001 repeats row 1's owner.
    let mut def = accounts();
    def.name = "ledger".into();
    def.indexes.clear();
    let l = db.create_table(def).unwrap();
    let long = |i: i64| format!("{}{:0>24}", i % 2, (i * 7919) % 2000);
    let mut tx = db.begin().unwrap();
    for i in 0..2000 {
        tx.insert(&l, &acct(i, &long(i), i)).unwrap();
    }
    tx.insert(&l, &acct(9001, &long(1), 0)).unwrap();
    tx.commit().unwrap();
    let err = db
        .create_index("ledger", unique("by_owner", true))
        .unwrap_err();
    assert!(matches!(err, Error::DuplicateKey { .. }), "{err}");
    db.create_index("ledger", unique("by_owner_all", false))
        .unwrap();
    let mut tx = db.begin().unwrap();
    let got: Vec<(String, i64)> = tx
        .index_scan(&l, "by_owner_all", Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .map(|r| match r.unwrap().as_slice() {
            [Value::Int64(id), Value::Text(o), _] => (o.clone(), *id),
            other => panic!("{other:?}"),
        })
        .collect();
    let mut want: Vec<(String, i64)> = (0..2000).map(|i| (long(i), i)).collect();
    want.push((long(1), 9001));
    want.sort();
    assert_eq!(got, want, "(key, primary key) order");
    tx.commit().unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

#[test]
fn purge_removes_deleted_rows_and_stale_entries() {
    let fs = SimFs::new(6);
    let mut o = opts(200);
    o.purge = false;
    let db = open(&fs, o);
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..500 {
        tx.insert(&t, &acct(i, &format!("o{i}"), i)).unwrap();
    }
    tx.commit().unwrap();
    for i in 0..500 {
        let mut tx = db.begin().unwrap();
        if i % 2 == 0 {
            tx.delete(&t, &[Value::Int64(i)]).unwrap();
        } else {
            tx.update(&t, &[Value::Int64(i)], &[(2, Value::Int64(i + 1000))])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    // The insert-only load commits without a mark (its undo was in an
    // insert undo segment, freed at commit): no history, nothing to purge.
    assert_eq!(db.stats().history_length, 500);
    let before = db.check().unwrap();
    assert!(before.is_ok(), "{:?}", before.problems);
    assert_eq!(before.records, 500);
    db.purge_now().unwrap();
    let s = db.stats();
    assert_eq!(s.history_length, 0);
    assert_eq!(s.purged_rows, 250);
    let after = db.check().unwrap();
    assert!(after.is_ok(), "{:?}", after.problems);
    assert_eq!((after.records, after.live_rows), (250, 250));
    assert_eq!(after.index_entries, 500, "one entry per live row and index");
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let fs = SimFs::new(7);
    let db = open(&fs, opts(200));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin().unwrap();
    assert!(tx.insert(&t, &[Value::Int64(1)]).is_err());
    assert!(
        tx.insert(&t, &[Value::Text("x".into()), Value::Null, Value::Int64(1)])
            .is_err()
    );
    assert!(tx.insert(&t, &acct(1, &"x".repeat(65), 1)).is_err());
    assert!(
        tx.insert(&t, &[Value::Int64(1), Value::Null, Value::Null])
            .is_err()
    );
    assert!(tx.get(&t, &[Value::Text("1".into())]).is_err());
    assert!(tx.get(&t, &[]).is_err());
    assert!(
        tx.update(&t, &[Value::Int64(1)], &[(0, Value::Int64(2))])
            .is_err()
    );
    assert!(
        tx.update(&t, &[Value::Int64(1)], &[(9, Value::Int64(2))])
            .is_err()
    );
    assert!(
        tx.index_scan(&t, "nope", Unbounded, Unbounded, Direction::Forward)
            .is_err()
    );
    assert!(db.table("nope").is_err());
    assert!(db.create_table(accounts()).is_err());
    tx.insert(&t, &acct(1, "a", 1)).unwrap();
    assert!(
        tx.update(&t, &[Value::Int64(1)], &[(2, Value::Null)])
            .is_err()
    );
    tx.commit().unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// Issue 13 item 1: a table may not declare keys that cannot fit a B+tree
/// (catalog C4). The longest column a key may have works, with its worst
/// encoding (every byte a zero, which keys escape to two bytes); one byte
/// more is refused when the table or index is defined, not when a row
/// arrives.
#[test]
fn keys_at_the_limit_fit_and_longer_key_columns_are_refused() {
    let fs = SimFs::new(75);
    let db = open(&fs, opts(200));
    let limit = db.max_key_len();
    // Entry = tag + escaped text + terminator, then the int64 primary key.
    let widest = ((limit - 9 - 3) / 2) as u32;
    let def = |name: &str, max_len: u32| TableDef {
        name: name.into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("body", ColumnType::Text { max_len }, false),
        ],
        primary_key: vec![0],
        indexes: vec![IndexDef {
            name: "by_body".into(),
            columns: vec![1],
            unique: true,
        }],
    };
    for max_len in [widest + 1, 100_000, u32::MAX] {
        let err = db.create_table(def("wide", max_len)).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument { reason, .. }
                if reason.contains("by_body") && reason.contains(&format!("at most {widest} bytes"))),
            "{err}"
        );
    }
    let mut pk = def("wide_pk", ((limit - 3) / 2 + 1) as u32);
    pk.primary_key = vec![1];
    pk.indexes.clear();
    assert!(db.create_table(pk).is_err());
    assert!(db.tables().is_empty());

    let t = db.create_table(def("notes", widest)).unwrap();
    let worst = "\0".repeat(widest as usize);
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &[Value::Int64(1), Value::Text(worst.clone())])
        .unwrap();
    tx.insert(
        &t,
        &[Value::Int64(2), Value::Text("a".repeat(widest as usize))],
    )
    .unwrap();
    tx.commit().unwrap();
    // An index added later is held to the same rule, before it is built.
    let mut extra = TableDef {
        name: "other".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("long", ColumnType::Bytes { max_len: 1 << 20 }, true),
        ],
        primary_key: vec![0],
        indexes: vec![],
    };
    let other = db.create_table(extra.clone()).unwrap();
    let mut tx = db.begin().unwrap();
    tx.insert(&other, &[Value::Int64(1), Value::Bytes(vec![7; 5000])])
        .unwrap();
    tx.commit().unwrap();
    let ix = IndexDef {
        name: "by_long".into(),
        columns: vec![1],
        unique: false,
    };
    assert!(db.create_index("other", ix.clone()).is_err());
    extra.indexes.push(ix);
    assert!(db.table("other").unwrap().schema().def.indexes.is_empty());
    let mut tx = db.begin().unwrap();
    let found: Vec<_> = tx
        .index_scan(&t, "by_body", Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0][1], Value::Text(worst));
    tx.commit().unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    db.close().unwrap();
    open(&fs, opts(200)).close().unwrap();
}

/// `blobs(id int64 pk, body bytes, tag int64)` with an index on tag: rows
/// of about a kilobyte, so a few thousand of them dwarf a small pool.
fn blobs() -> TableDef {
    TableDef {
        name: "blobs".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("body", ColumnType::Bytes { max_len: 4000 }, false),
            Column::new("tag", ColumnType::Int64, false),
        ],
        primary_key: vec![0],
        indexes: vec![IndexDef {
            name: "by_tag".into(),
            columns: vec![2],
            unique: false,
        }],
    }
}

fn blob(id: i64, round: u64) -> Vec<Value> {
    let body: Vec<u8> = (0..1000u64)
        .map(|i| (i.wrapping_mul(31) ^ (id as u64) ^ round) as u8)
        .collect();
    vec![Value::Int64(id), Value::Bytes(body), Value::Int64(id % 7)]
}

fn blob_rows(db: &Db, t: &quill::db::Table) -> Vec<Vec<Value>> {
    let mut tx = db.begin().unwrap();
    let rows: Rows = tx
        .scan(t, Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    let mut by_tag: Rows = tx
        .index_scan(t, "by_tag", Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    tx.commit().unwrap();
    by_tag.sort_by_key(|r| int(&r[0]));
    assert_eq!(by_tag, rows, "the index and the table disagree");
    rows
}

/// Transactions whose changes and undo are many times the buffer pool (a
/// 256 KiB pool, about 3 MiB of rows plus their undo, more redo than the
/// log holds) commit, roll back exactly, and after a power loss part way
/// through are rolled back by recovery.
#[test]
fn transactions_larger_than_the_buffer_pool() {
    const N: i64 = 3000;
    let fs = SimFs::new(40);
    let db = open(&fs, opts(64));
    let t = db.create_table(blobs()).unwrap();
    // Rolled back: nothing stays.
    let mut tx = db.begin().unwrap();
    for id in 0..N {
        tx.insert(&t, &blob(id, 0)).unwrap();
    }
    tx.rollback().unwrap();
    assert!(blob_rows(&db, &t).is_empty());
    // Committed: everything is there, through the index too.
    let mut tx = db.begin().unwrap();
    for id in 0..N {
        tx.insert(&t, &blob(id, 1)).unwrap();
    }
    tx.commit().unwrap();
    let want: Vec<_> = (0..N).map(|id| blob(id, 1)).collect();
    assert_eq!(blob_rows(&db, &t), want);
    // A big update rolled back restores every row.
    let mut tx = db.begin().unwrap();
    for id in 0..N {
        tx.update(&t, &[Value::Int64(id)], &[(1, blob(id, 2)[1].clone())])
            .unwrap();
    }
    tx.rollback().unwrap();
    assert_eq!(blob_rows(&db, &t), want);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert!(
        db.store_stats().pool.evictions > 0,
        "the transactions did not outgrow the pool"
    );
    // Power loss in the middle of a big update: recovery rolls it back.
    let mut tx = db.begin().unwrap();
    for id in 0..N {
        tx.update(&t, &[Value::Int64(id)], &[(1, blob(id, 3)[1].clone())])
            .unwrap();
    }
    let crashed = fs.crash(quill::io::CrashMode::Random);
    drop(tx);
    drop(db);
    let db = open(&crashed, opts(64));
    assert_eq!(blob_rows(&db, &t2(&db)), want);
    let rec = db.stats().recovery.expect("recovery ran");
    assert_eq!(rec.rolled_back.len(), 1, "{rec:?}");
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

fn t2(db: &Db) -> quill::db::Table {
    db.table("blobs").unwrap()
}

fn account_ids(db: &Db) -> Vec<i64> {
    let t = db.table("accounts").unwrap();
    let mut tx = db.begin().unwrap();
    let ids: Vec<i64> = tx
        .scan(&t, Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .map(|r| int(&r.unwrap()[0]))
        .collect();
    let by_owner = tx
        .index_scan(&t, "by_owner", Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .count();
    assert_eq!(
        by_owner,
        ids.len(),
        "the unique index has one entry per row"
    );
    tx.commit().unwrap();
    ids
}

/// Insert undo segments (tablespace format 5): a large insert-only
/// transaction (its segment longer than one free batch) that never
/// committed is rolled back by recovery after a power loss, with its
/// index entries; one that committed (with a mark, since its segment is
/// long) stays whole; the segments are freed, so their pages are reused.
#[test]
fn large_insert_transactions_survive_power_loss() {
    const N: i64 = 12_000;
    let fs = SimFs::new(41);
    let db = open(&fs, opts(64));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..N {
        tx.insert(&t, &acct(i, &format!("c{i}"), i)).unwrap();
    }
    tx.commit().unwrap();
    assert_eq!(
        db.stats().history_length,
        1,
        "a long segment commits with a mark"
    );
    let mut tx = db.begin().unwrap();
    for i in N..2 * N {
        tx.insert(&t, &acct(i, &format!("u{i}"), i)).unwrap();
    }
    // Another transaction's commit makes the log durable past the
    // uncommitted inserts, so recovery finds them.
    let mut other = db.begin().unwrap();
    other
        .update(&t, &[Value::Int64(0)], &[(2, Value::Int64(-1))])
        .unwrap();
    other.commit().unwrap();
    let crashed = fs.crash(quill::io::CrashMode::Random);
    drop(tx);
    drop(t);
    drop(db);
    let db = open(&crashed, opts(64));
    let rec = db.stats().recovery.expect("recovery ran");
    assert_eq!(rec.rolled_back.len(), 1, "{rec:?}");
    assert_eq!(account_ids(&db), (0..N).collect::<Vec<_>>());
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    db.close().unwrap();
    // The segment's pages went back to the free list.
    let info = quill::store::inspect(&crashed, dir()).unwrap();
    assert!(info.free_pages >= 64, "{} free pages", info.free_pages);
    let db = open(&crashed, opts(64));
    let t = db.table("accounts").unwrap();
    let mut tx = db.begin().unwrap();
    for i in N..2 * N {
        tx.insert(&t, &acct(i, &format!("u{i}"), i)).unwrap();
    }
    tx.commit().unwrap();
    drop(t);
    db.close().unwrap();
    let db = open(&crashed, opts(64));
    assert_eq!(account_ids(&db), (0..2 * N).collect::<Vec<_>>());
}

/// Inserts undone by a savepoint rollback stay undone when the
/// transaction commits, and inserts after it commit; an insert followed
/// by an update and a delete of other rows in one transaction rolls back
/// whole (segment and undo-tree records undone together, newest first).
#[test]
fn insert_undo_with_savepoints_and_mixed_changes() {
    let fs = SimFs::new(42);
    let db = open(&fs, opts(200));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..10 {
        tx.insert(&t, &acct(i, &format!("o{i}"), i)).unwrap();
    }
    let sp = tx.savepoint();
    for i in 10..20 {
        tx.insert(&t, &acct(i, &format!("o{i}"), i)).unwrap();
    }
    tx.update(&t, &[Value::Int64(3)], &[(2, Value::Int64(33))])
        .unwrap();
    tx.rollback_to_savepoint(sp).unwrap();
    // The same keys again, after the rollback: new records, new undo.
    for i in 15..25 {
        tx.insert(&t, &acct(i, &format!("o{i}"), i)).unwrap();
    }
    tx.commit().unwrap();
    let want: Vec<i64> = (0..10).chain(15..25).collect();
    assert_eq!(account_ids(&db), want);
    // Mixed: inserts, an update of an inserted row, a delete of an old
    // one, all rolled back.
    let mut tx = db.begin().unwrap();
    for i in 100..110 {
        tx.insert(&t, &acct(i, &format!("o{i}"), i)).unwrap();
    }
    tx.update(
        &t,
        &[Value::Int64(105)],
        &[(1, Value::Text("moved".into()))],
    )
    .unwrap();
    tx.delete(&t, &[Value::Int64(0)]).unwrap();
    tx.insert(&t, &acct(0, "o0-again", 0)).unwrap();
    tx.rollback().unwrap();
    assert_eq!(account_ids(&db), want);
    let mut tx = db.begin().unwrap();
    assert_eq!(
        tx.get(&t, &[Value::Int64(0)]).unwrap(),
        Some(acct(0, "o0", 0))
    );
    tx.commit().unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    // A reader whose snapshot predates an insert does not see it, and
    // reads no undo to know it.
    let mut old = db.begin_with(RR).unwrap();
    assert_eq!(old.get(&t, &[Value::Int64(500)]).unwrap(), None);
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &acct(500, "o500", 500)).unwrap();
    tx.commit().unwrap();
    assert_eq!(old.get(&t, &[Value::Int64(500)]).unwrap(), None);
    old.commit().unwrap();
}

fn auto_acct(owner: &str, balance: i64) -> Vec<Value> {
    vec![
        Value::Null,
        Value::Text(owner.into()),
        Value::Int64(balance),
    ]
}

/// Inserts with automatic keys share one undo record per run (undo U7).
/// A savepoint rollback inside a run removes exactly the rows after it;
/// an explicit key or an update between inserts starts a new run; two
/// transactions drawing keys in turn from one table roll back only their
/// own rows; a whole rollback removes every run.
#[test]
fn automatic_key_runs_roll_back_exactly() {
    let fs = SimFs::new(43);
    let db = open(&fs, opts(200));
    let t = db.create_table(accounts()).unwrap();
    let id = |v: Vec<Value>| int(&v[0]);
    let mut kept = Vec::new();
    let mut tx = db.begin().unwrap();
    for i in 0..100 {
        kept.push(id(tx.insert(&t, &auto_acct(&format!("a{i}"), i)).unwrap()));
    }
    let sp = tx.savepoint();
    for i in 100..200 {
        tx.insert(&t, &auto_acct(&format!("a{i}"), i)).unwrap();
    }
    tx.rollback_to_savepoint(sp).unwrap();
    // A failed statement inside a new run: a duplicate unique owner.
    kept.push(id(tx.insert(&t, &auto_acct("b0", 0)).unwrap()));
    assert!(tx.insert(&t, &auto_acct("a5", 0)).is_err());
    kept.push(id(tx.insert(&t, &auto_acct("b1", 0)).unwrap()));
    // An explicit key and an update close the run; new runs follow.
    tx.insert(&t, &acct(1_000_000, "x", 0)).unwrap();
    kept.push(1_000_000);
    kept.push(id(tx.insert(&t, &auto_acct("c0", 0)).unwrap()));
    tx.update(&t, &[Value::Int64(kept[3])], &[(2, Value::Int64(-3))])
        .unwrap();
    for i in 0..50 {
        kept.push(id(tx.insert(&t, &auto_acct(&format!("d{i}"), i)).unwrap()));
    }
    tx.commit().unwrap();
    kept.sort_unstable();
    assert_eq!(account_ids(&db), kept);
    // Two transactions draw keys in turn; one rolls back.
    let mut a = db.begin().unwrap();
    let mut b = db.begin().unwrap();
    for i in 0..60 {
        a.insert(&t, &auto_acct(&format!("ea{i}"), i)).unwrap();
        kept.push(id(b.insert(&t, &auto_acct(&format!("eb{i}"), i)).unwrap()));
    }
    a.rollback().unwrap();
    b.commit().unwrap();
    kept.sort_unstable();
    assert_eq!(account_ids(&db), kept);
    // A whole rollback of several runs and an update of a run's row.
    let mut tx = db.begin().unwrap();
    for i in 0..30 {
        let k = id(tx.insert(&t, &auto_acct(&format!("f{i}"), i)).unwrap());
        if i % 10 == 0 {
            tx.update(&t, &[Value::Int64(k)], &[(2, Value::Int64(7))])
                .unwrap();
        }
    }
    tx.rollback().unwrap();
    assert_eq!(account_ids(&db), kept);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// Recovery rolls back a run it finds only through its one undo record
/// (undo U7), leaving another transaction's committed rows drawn in
/// between.
#[test]
fn automatic_key_runs_are_rolled_back_after_power_loss() {
    let fs = SimFs::new(44);
    let db = open(&fs, opts(64));
    let t = db.create_table(accounts()).unwrap();
    let mut a = db.begin().unwrap();
    let mut b = db.begin().unwrap();
    let mut kept = Vec::new();
    for i in 0..3000 {
        a.insert(&t, &auto_acct(&format!("a{i}"), i)).unwrap();
        if i % 100 == 0 {
            kept.push(int(
                &b.insert(&t, &auto_acct(&format!("b{i}"), i)).unwrap()[0]
            ));
        }
        if i == 1000 {
            // A savepoint rolled back inside the run, then an explicit
            // key and a new run: recovery sees the first run's record and
            // takes it to end before the explicit key's (a stale record
            // whose last rows are gone already).
            let sp = a.savepoint();
            for j in 0..200 {
                a.insert(&t, &auto_acct(&format!("s{j}"), j)).unwrap();
            }
            a.rollback_to_savepoint(sp).unwrap();
            a.insert(&t, &acct(9_000_000, "explicit", 0)).unwrap();
        }
    }
    b.commit().unwrap();
    let crashed = fs.crash(quill::io::CrashMode::Random);
    drop(a);
    drop(t);
    drop(db);
    let db = open(&crashed, opts(64));
    let rec = db.stats().recovery.expect("recovery ran");
    assert_eq!(rec.rolled_back.len(), 1, "{rec:?}");
    assert_eq!(account_ids(&db), kept);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}
