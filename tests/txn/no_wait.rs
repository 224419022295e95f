//! Statements on a thread that must not block (`quill::wait`): inside
//! `without_waiting` a held row lock or a page read fails with
//! `WouldWait` having changed nothing (W1), a savepoint undoes the rest of
//! the statement, and the same statement run again outside completes.
//! The pool is never poisoned by an attempt (W2).

use quill::catalog::schema::{IndexDef, TableDef};
use quill::catalog::{Column, ColumnType, Value};
use quill::io::SimFs;
use quill::page::PageId;
use quill::wait::without_waiting;
use quill::{Error, Table};

use super::common::*;

fn balance(db: &quill::Db, t: &Table, id: i64) -> i64 {
    let mut r = db.begin().unwrap();
    int(&r.get(t, &[Value::Int64(id)]).unwrap().unwrap()[2])
}

fn set(v: i64) -> Vec<(usize, Value)> {
    vec![(2, Value::Int64(v))]
}

#[test]
fn a_held_row_lock_is_refused_then_waited_for_outside() {
    let fs = SimFs::new(71);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin().unwrap();
    for id in 1..=3 {
        tx.insert(&t, &acct(id, &format!("o{id}"), 100)).unwrap();
    }
    tx.commit().unwrap();

    let mut holder = db.begin_owned().unwrap();
    holder.update(&t, &[Value::Int64(2)], &set(200)).unwrap();
    let waits_before = db.stats().locks.waits;

    // One statement updates rows 1 and 2: row 1 is changed, row 2's lock
    // is held, so the attempt stops there.
    let mut tx = db.begin_owned().unwrap();
    tx.update(&t, &[Value::Int64(3)], &set(300)).unwrap(); // an earlier statement
    let sp = tx.savepoint();
    let (attempt, refused) = without_waiting(|| -> quill::Result<()> {
        tx.update(&t, &[Value::Int64(1)], &set(111))?;
        tx.update(&t, &[Value::Int64(2)], &set(222))?;
        Ok(())
    });
    assert!(refused);
    assert!(
        matches!(attempt, Err(Error::WouldWait { what: "a row lock" })),
        "{attempt:?}"
    );
    assert_eq!(db.stats().locks.waits, waits_before, "nobody queued");
    tx.rollback_to_savepoint(sp).unwrap();

    // The holder commits; the statement runs again where it may wait.
    holder.commit().unwrap();
    tx.update(&t, &[Value::Int64(1)], &set(111)).unwrap();
    tx.update(&t, &[Value::Int64(2)], &set(222)).unwrap();
    tx.commit().unwrap();
    assert_eq!(balance(&db, &t, 1), 111);
    assert_eq!(balance(&db, &t, 2), 222);
    assert_eq!(balance(&db, &t, 3), 300, "the earlier statement stays");
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn a_free_row_and_a_cached_page_never_refuse() {
    let fs = SimFs::new(72);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin_owned().unwrap();
    tx.insert(&t, &acct(1, "a", 1)).unwrap();
    tx.commit().unwrap();
    let ((), refused) = without_waiting(|| {
        let mut tx = db.begin_owned().unwrap();
        tx.update(&t, &[Value::Int64(1)], &set(5)).unwrap();
        tx.insert(&t, &acct(2, "b", 2)).unwrap();
        assert!(tx.get(&t, &[Value::Int64(2)]).unwrap().is_some());
        tx.commit().unwrap();
    });
    assert!(!refused);
    assert_eq!(balance(&db, &t, 1), 5);
}

/// Ending a transaction's insert undo segment reads its page if it must,
/// even on a thread that must not block (wait W2): a commit and a
/// rollback whose segment page was evicted both finish there, and the
/// next open has nothing to roll back (`txn::undo_seg` US3).
#[test]
fn ending_an_undo_segment_reads_its_page_without_refusing() {
    let fs = SimFs::new(74);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts()).unwrap();
    for (id, commit) in [(1, true), (2, false)] {
        let mut tx = db.begin_owned().unwrap();
        tx.insert(&t, &acct(id, &format!("o{id}"), 1)).unwrap();
        evict_all(&db);
        let (r, refused) = without_waiting(|| if commit { tx.commit() } else { tx.rollback() });
        assert!(r.is_ok() && !refused, "row {id}: {r:?}");
    }
    assert_eq!(balance(&db, &t, 1), 1);
    assert!(
        db.begin()
            .unwrap()
            .get(&t, &[Value::Int64(2)])
            .unwrap()
            .is_none()
    );
    db.close().unwrap();
    let db = open(&fs, opts(256));
    let recovery = db.stats().recovery.unwrap();
    assert!(recovery.rolled_back.is_empty(), "{recovery:?}");
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn a_page_read_is_refused_without_a_trace_and_done_outside() {
    let fs = SimFs::new(73);
    let n = 3_000;
    {
        let db = open(&fs, opts(64));
        let t = db.create_table(accounts()).unwrap();
        let mut tx = db.begin().unwrap();
        for id in 0..n {
            tx.insert(&t, &acct(id, &format!("owner-{id:06}"), id))
                .unwrap();
        }
        tx.commit().unwrap();
        db.close().unwrap();
    }
    // Reopened: the pool holds almost nothing, so most leaves are on disk.
    let db = open(&fs, opts(64));
    let t = db.table("accounts").unwrap();
    let mut handed_off = 0;
    for id in (0..n).step_by(97) {
        let mut tx = db.begin_owned().unwrap();
        let sp = tx.savepoint();
        let (attempt, refused) = without_waiting(|| tx.update(&t, &[Value::Int64(id)], &set(-id)));
        assert_eq!(refused, attempt.is_err());
        match attempt {
            Ok(found) => assert!(found),
            Err(Error::WouldWait { .. }) => {
                handed_off += 1;
                tx.rollback_to_savepoint(sp).unwrap();
                assert!(tx.update(&t, &[Value::Int64(id)], &set(-id)).unwrap());
            }
            Err(e) => panic!("row {id}: {e}"),
        }
        tx.commit().unwrap();
    }
    assert!(handed_off > 0, "no attempt needed a page from disk");
    for id in 0..n {
        let want = if id % 97 == 0 { -id } else { id };
        assert_eq!(balance(&db, &t, id), want, "row {id}");
    }
    // No attempt left a half-done change in the pool (W2).
    assert!(db.check().unwrap().is_ok());
    db.close().unwrap();
    let db = open(&fs, opts(64));
    assert!(db.check().unwrap().is_ok());
}

/// `orders(id int64 pk, qty int32)`, its id drawn when NULL, with a
/// unique index on qty.
fn orders() -> TableDef {
    TableDef {
        name: "orders".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("qty", ColumnType::Int32, false),
        ],
        primary_key: vec![0],
        indexes: vec![IndexDef {
            name: "by_qty".into(),
            columns: vec![1],
            unique: true,
        }],
    }
}

fn order(qty: i32) -> Vec<Value> {
    vec![Value::Null, Value::Int32(qty)]
}

/// Create table `def` and commit its first row, `order(0)`, whose drawn
/// key is 1 (the key counter is then loaded).
fn table_with_first_row(db: &quill::Db, def: TableDef) -> Table {
    let t = db.create_table(def).unwrap();
    let mut tx = db.begin().unwrap();
    assert_eq!(tx.insert(&t, &order(0)).unwrap(), vec![Value::Int64(1)]);
    tx.commit().unwrap();
    t
}

/// Write every page and drop them all from the pool, so the next write
/// must read pages.
fn evict_all(db: &quill::Db) {
    db.store().flush_all().unwrap();
    let pool = db.store().pool();
    let evicted = (1..1_000).filter(|&p| pool.evict(PageId(p))).count();
    assert!(evicted > 0, "nothing evicted");
}

/// Waits for row locks end within a test's patience.
fn short_lock_waits() -> quill::Options {
    quill::Options {
        lock_wait_timeout: std::time::Duration::from_millis(200),
        ..opts(64)
    }
}

/// An insert refused after it drew an automatic key (a page to read)
/// leaves no trace (wait W5): another transaction inserts at once with
/// the key the refused one drew, without waiting for its lock, and the
/// refused statement's rerun draws the next. This is a fresh server's
/// first `INSERT ... RETURNING id`, which gave 2.
#[test]
fn a_refused_insert_gives_back_its_key_and_its_lock() {
    let fs = SimFs::new(75);
    let db = open(&fs, short_lock_waits());
    let t = table_with_first_row(&db, orders());

    evict_all(&db);
    let mut a = db.begin_owned().unwrap();
    let sp = a.savepoint();
    let (r, refused) = without_waiting(|| a.insert(&t, &order(7)));
    assert!(
        refused
            && matches!(
                r,
                Err(Error::WouldWait {
                    what: "a page read"
                })
            ),
        "{r:?}"
    );
    a.rollback_to_savepoint(sp).unwrap();

    let waits = db.stats().locks.waits;
    let mut b = db.begin_owned().unwrap();
    assert_eq!(b.insert(&t, &order(8)).unwrap(), vec![Value::Int64(2)]);
    assert_eq!(db.stats().locks.waits, waits, "b waited for a's lock");
    assert_eq!(a.insert(&t, &order(7)).unwrap(), vec![Value::Int64(3)]);
    b.commit().unwrap();
    a.commit().unwrap();

    let mut tx = db.begin().unwrap();
    assert_eq!(tx.insert(&t, &order(9)).unwrap(), vec![Value::Int64(4)]);
    tx.commit().unwrap();
    let mut r = db.begin().unwrap();
    let qty = |r: &mut quill::Txn<'_>, id: i64| {
        r.get(&t, &[Value::Int64(id)]).unwrap().unwrap()[1].clone()
    };
    for (id, q) in [(1, 0), (2, 8), (3, 7), (4, 9)] {
        assert_eq!(qty(&mut r, id), Value::Int32(q), "row {id}");
    }
    drop(r);
    assert!(db.check().unwrap().is_ok());
}

/// A key the transaction had locked before the refused insert drew it
/// (a locking read of a row not there yet) stays locked, so it is not
/// given back: nobody else could insert it without waiting.
#[test]
fn a_key_locked_before_the_refused_insert_is_not_given_back() {
    let fs = SimFs::new(76);
    let db = open(&fs, short_lock_waits());
    let t = table_with_first_row(&db, orders());

    let mut a = db.begin_owned().unwrap();
    assert_eq!(a.get_for_update(&t, &[Value::Int64(2)]).unwrap(), None);
    evict_all(&db);
    let sp = a.savepoint();
    let (r, refused) = without_waiting(|| a.insert(&t, &order(7)));
    assert!(
        refused && matches!(r, Err(Error::WouldWait { .. })),
        "{r:?}"
    );
    a.rollback_to_savepoint(sp).unwrap();

    let mut b = db.begin_owned().unwrap();
    assert_eq!(b.insert(&t, &order(8)).unwrap(), vec![Value::Int64(3)]);
    b.commit().unwrap();
    assert_eq!(a.insert(&t, &order(7)).unwrap(), vec![Value::Int64(4)]);
    // Key 2's lock is still a's.
    let mut c = db.begin_owned().unwrap();
    assert!(matches!(
        c.insert(&t, &[Value::Int64(2), Value::Int32(5)]),
        Err(Error::LockTimeout { .. })
    ));
    a.commit().unwrap();
    assert!(db.check().unwrap().is_ok());
}

/// A refused update lets go of the row lock it took (W5): another
/// transaction updates the row at once; the refused statement's rerun
/// then waits for that one as any later statement would.
#[test]
fn a_refused_update_releases_its_row_lock() {
    let fs = SimFs::new(78);
    let db = open(&fs, short_lock_waits());
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin().unwrap();
    for id in 0..500 {
        tx.insert(&t, &acct(id, &format!("owner-{id:04}"), id))
            .unwrap();
    }
    tx.commit().unwrap();

    evict_all(&db);
    let mut a = db.begin_owned().unwrap();
    let sp = a.savepoint();
    let (r, refused) = without_waiting(|| a.update(&t, &[Value::Int64(250)], &set(1)));
    assert!(
        refused && matches!(r, Err(Error::WouldWait { .. })),
        "{r:?}"
    );
    a.rollback_to_savepoint(sp).unwrap();

    let waits = db.stats().locks.waits;
    let mut b = db.begin_owned().unwrap();
    assert!(b.update(&t, &[Value::Int64(250)], &set(2)).unwrap());
    assert_eq!(db.stats().locks.waits, waits, "b waited for a's lock");
    assert!(matches!(
        a.update(&t, &[Value::Int64(250)], &set(1)),
        Err(Error::LockTimeout { .. })
    ));
    b.commit().unwrap();
    assert_eq!(balance(&db, &t, 250), 2);
    drop(a);
    assert!(db.check().unwrap().is_ok());
}

/// `items(id int64, qty int32)` indexed on qty: `id` is the primary key
/// (drawn when NULL) or, without `pk`, a plain column beside a hidden
/// row id.
fn items(pk: bool) -> TableDef {
    TableDef {
        name: "items".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, !pk),
            Column::new("qty", ColumnType::Int32, false),
        ],
        primary_key: if pk { vec![0] } else { vec![] },
        indexes: vec![IndexDef {
            name: "by_qty".into(),
            columns: vec![1],
            unique: false,
        }],
    }
}

/// Write every page and drop only the secondary index's root (a leaf in
/// these small tables): an insert then writes its clustered record and
/// is refused at its index entry.
fn evict_index_root(db: &quill::Db, t: &Table) {
    db.store().flush_all().unwrap();
    let root = t.schema().index_roots[0];
    assert!(
        db.store().pool().evict(PageId(root)),
        "index root not evicted"
    );
}

/// Attempt an insert of `order(qty)` where waits are refused, expect a
/// refusal, and undo the rest of the statement as a server does.
fn refused_insert(a: &mut quill::OwnedTxn, t: &Table, qty: i32) {
    let sp = a.savepoint();
    let (r, refused) = without_waiting(|| a.insert(t, &order(qty)));
    assert!(
        refused && matches!(r, Err(Error::WouldWait { .. })),
        "{r:?}"
    );
    a.rollback_to_savepoint(sp).unwrap();
}

fn rows(db: &quill::Db, t: &Table) -> usize {
    let mut r = db.begin().unwrap();
    let all = r
        .scan(
            t,
            quill::db::KeyBound::Unbounded,
            quill::db::KeyBound::Unbounded,
            quill::btree::Direction::Forward,
        )
        .unwrap();
    let mut n = 0;
    for row in all {
        row.unwrap();
        n += 1;
    }
    n
}

/// Refused after its clustered record was written (at the index entry):
/// the record is removed with the statement, so the key given back is
/// free for another transaction's insert, with a primary key and with a
/// hidden row id.
#[test]
fn a_key_given_back_after_its_record_was_written_is_free() {
    for pk in [true, false] {
        let fs = SimFs::new(79);
        let db = open(&fs, short_lock_waits());
        let t = table_with_first_row(&db, items(pk));
        evict_index_root(&db, &t);
        let mut a = db.begin_owned().unwrap();
        refused_insert(&mut a, &t, 7);
        let mut b = db.begin_owned().unwrap();
        assert_eq!(
            b.insert(&t, &order(8)).unwrap(),
            vec![Value::Int64(2)],
            "pk {pk}"
        );
        b.commit().unwrap();
        assert_eq!(
            a.insert(&t, &order(7)).unwrap(),
            vec![Value::Int64(3)],
            "pk {pk}"
        );
        a.commit().unwrap();
        assert_eq!(rows(&db, &t), 3, "pk {pk}");
        assert!(db.check().unwrap().is_ok(), "pk {pk}");
    }
}

/// A refused insert that had opened a run of inserts (undo U7) leaves
/// its run record behind in the insert undo segment; the key it gave
/// back is drawn again, by the same transaction or another. A crash
/// before the first transaction ends rolls back all of its rows and none
/// of the other's.
#[test]
fn recovery_after_a_key_given_back_from_a_run() {
    for again_by_a in [true, false] {
        let fs = SimFs::new(80);
        let db = open(&fs, short_lock_waits());
        let t = table_with_first_row(&db, items(true));
        let mut a = db.begin_owned().unwrap();
        assert_eq!(a.insert(&t, &order(1)).unwrap(), vec![Value::Int64(2)]);
        // Ends the run: the next insert opens a new one.
        assert!(
            a.update(&t, &[Value::Int64(2)], &[(1, Value::Int32(100))])
                .unwrap()
        );
        evict_index_root(&db, &t);
        refused_insert(&mut a, &t, 2);
        if again_by_a {
            assert_eq!(a.insert(&t, &order(2)).unwrap(), vec![Value::Int64(3)]);
            assert_eq!(a.insert(&t, &order(3)).unwrap(), vec![Value::Int64(4)]);
        } else {
            let mut b = db.begin_owned().unwrap();
            assert_eq!(b.insert(&t, &order(8)).unwrap(), vec![Value::Int64(3)]);
            b.commit().unwrap();
            assert_eq!(a.insert(&t, &order(2)).unwrap(), vec![Value::Int64(4)]);
        }
        db.store().flush_all().unwrap();
        let crashed = fs.crash(quill::io::CrashMode::KeepUnsynced);
        std::mem::forget(a); // the process is gone: no rollback
        drop(t);
        drop(db);
        let db = open(&crashed, short_lock_waits());
        assert_eq!(db.stats().recovery.unwrap().rolled_back.len(), 1);
        let t = db.table("items").unwrap();
        let want = if again_by_a { 1 } else { 2 };
        assert_eq!(rows(&db, &t), want, "again by a: {again_by_a}");
        assert!(db.check().unwrap().is_ok());
    }
}

/// An insert refused at its drawn key's own row lock (another
/// transaction locked that key before it existed) took no lock and gives
/// back nothing: its rerun draws the next key and does not wait.
#[test]
fn a_key_refused_at_its_own_lock_is_not_given_back() {
    let fs = SimFs::new(81);
    let db = open(&fs, short_lock_waits());
    let t = table_with_first_row(&db, items(true));
    let mut holder = db.begin_owned().unwrap();
    assert_eq!(holder.get_for_update(&t, &[Value::Int64(2)]).unwrap(), None);
    let mut a = db.begin_owned().unwrap();
    let sp = a.savepoint();
    let (r, refused) = without_waiting(|| a.insert(&t, &order(7)));
    assert!(
        refused && matches!(r, Err(Error::WouldWait { what: "a row lock" })),
        "{r:?}"
    );
    a.rollback_to_savepoint(sp).unwrap();
    let waits = db.stats().locks.waits;
    assert_eq!(a.insert(&t, &order(7)).unwrap(), vec![Value::Int64(3)]);
    assert_eq!(db.stats().locks.waits, waits, "the rerun waited");
    a.commit().unwrap();
    drop(holder);
    assert!(db.check().unwrap().is_ok());
}
