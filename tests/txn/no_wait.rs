//! Statements on a thread that must not block (`quill::wait`): inside
//! `without_waiting` a held row lock or a page read fails with
//! `WouldWait` having changed nothing (W1), a savepoint undoes the rest of
//! the statement, and the same statement run again outside completes.
//! The pool is never poisoned by an attempt (W2).

use quill::catalog::Value;
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
        db.store().flush_all().unwrap();
        let pool = db.store().pool();
        let evicted = (1..1_000).filter(|&p| pool.evict(PageId(p))).count();
        assert!(evicted > 0, "nothing evicted");
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
