//! Owned transactions (`Db::begin_owned`, issue 14): a transaction with no
//! lifetime that a server's session keeps across client messages and
//! `.await` points, moves between threads, and commits asynchronously on
//! a multi-threaded runtime; it behaves as a borrowed one does.

use std::ops::Bound::Unbounded;

use quill::btree::Direction;
use quill::catalog::Value;
use quill::db::OwnedTxn;
use quill::io::{CrashMode, SimFs};
use quill::{Durability, TxnOptions};

use super::common::*;

fn assert_send_static<T: Send + 'static>(_: &T) {}

#[test]
fn an_owned_transaction_moves_between_threads_and_commits_durably() {
    let fs = SimFs::new(11);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin_owned().unwrap();
    assert_send_static(&tx);
    tx.insert(&t, &acct(1, "ann", 100)).unwrap();
    // The session's next message is served by another worker thread.
    let t2 = t.clone();
    let tx: OwnedTxn = std::thread::spawn(move || {
        tx.insert(&t2, &acct(2, "bob", 50)).unwrap();
        tx
    })
    .join()
    .unwrap();
    // Not visible to others before it commits.
    assert_eq!(
        db.begin().unwrap().get(&t, &[Value::Int64(1)]).unwrap(),
        None
    );
    tx.commit().unwrap();
    let mut r = db.begin().unwrap();
    assert_eq!(int(&r.get(&t, &[Value::Int64(2)]).unwrap().unwrap()[2]), 50);
    drop(r);
    // Durable: survives a power loss right after the commit returned.
    let crashed = fs.crash(CrashMode::DropUnsynced);
    drop(db);
    let db = open(&crashed, opts(256));
    let t = db.table("accounts").unwrap();
    let mut r = db.begin().unwrap();
    let rows: Vec<_> = r
        .scan(&t, Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    assert_eq!(rows.len(), 2);
}

#[test]
fn owned_async_commits_run_as_spawned_tasks() {
    let fs = SimFs::new(12);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let mut handles = Vec::new();
    for id in 0..32i64 {
        let mut tx = db
            .begin_owned_with(TxnOptions {
                durability: if id % 2 == 0 {
                    Durability::Sync
                } else {
                    Durability::Write
                },
                ..TxnOptions::default()
            })
            .unwrap();
        tx.insert(&t, &acct(id, &format!("o{id}"), id)).unwrap();
        let commit = tx.commit_async();
        assert_send_static(&commit);
        handles.push(rt.spawn(commit));
    }
    rt.block_on(async {
        for h in handles {
            h.await.unwrap().unwrap();
        }
    });
    let mut r = db.begin().unwrap();
    for id in 0..32i64 {
        assert!(
            r.get(&t, &[Value::Int64(id)]).unwrap().is_some(),
            "row {id}"
        );
    }
    drop(r);
    assert_eq!(db.stats().active_transactions, 0, "every slot handed back");
}

#[test]
fn a_dropped_owned_transaction_rolls_back_and_a_dropped_async_commit_still_releases() {
    let fs = SimFs::new(13);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin_owned().unwrap();
    tx.insert(&t, &acct(7, "x", 1)).unwrap();
    drop(tx);
    assert_eq!(
        db.begin().unwrap().get(&t, &[Value::Int64(7)]).unwrap(),
        None
    );
    // An async commit whose future is dropped unpolled: the commit mark
    // is written, and the slot is handed back (else purge would stall).
    let mut tx = db.begin_owned().unwrap();
    tx.insert(&t, &acct(8, "y", 2)).unwrap();
    drop(tx.commit_async());
    assert_eq!(db.stats().active_transactions, 0);
    assert!(
        db.begin()
            .unwrap()
            .get(&t, &[Value::Int64(8)])
            .unwrap()
            .is_some()
    );
    db.close().unwrap();
}

#[test]
fn close_refuses_while_an_owned_transaction_lives() {
    let fs = SimFs::new(14);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin_owned().unwrap();
    tx.insert(&t, &acct(1, "a", 1)).unwrap();
    let e = db.close().unwrap_err().to_string();
    assert!(e.contains("OwnedTxn"), "{e}");
    // The transaction still works; its commit is durable.
    tx.commit().unwrap();
}
