//! Random concurrent transactions checked against a serial history: each
//! transaction reads and rewrites a few random rows under row locks
//! (locking reads, so conflicting transactions serialize), inserts and
//! deletes some, and takes a ticket while it still holds all its locks.
//! Replaying the committed transactions one by one in ticket order on a
//! `BTreeMap` must reproduce every value each transaction read and the
//! final contents, by primary key and through the secondary index. The
//! seed is printed on failure (`QUILL_SERIAL_SEED` replays one).

use std::collections::BTreeMap;
use std::ops::Bound::Unbounded;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use quill::btree::Direction;
use quill::catalog::Value;
use quill::db::Db;
use quill::io::SimFs;
use rand::{RngExt, SeedableRng, rngs::SmallRng};

use crate::common::*;

const KEYS: i64 = 24;

#[derive(Clone, Debug)]
enum Op {
    /// Read the balance (None: no row), then write f(balance).
    Rmw(i64, Option<i64>, i64),
    /// Delete (if present).
    Del(i64),
    /// Insert with a balance (if absent).
    Ins(i64, i64),
}

struct Done {
    ticket: u64,
    ops: Vec<Op>,
}

fn one_txn(db: &Db, rng: &mut SmallRng, tickets: &AtomicU64) -> quill::Result<Done> {
    let t = db.table("accounts")?;
    let mut tx = db.begin()?;
    let mut ops = Vec::new();
    for _ in 0..rng.random_range(1..4) {
        let k = rng.random_range(0..KEYS);
        let row = tx.get_for_update(&t, &[Value::Int64(k)])?;
        let cur = row.map(|r| int(&r[2]));
        match (rng.random_range(0..6), cur) {
            (0, Some(_)) => {
                tx.delete(&t, &[Value::Int64(k)])?;
                ops.push(Op::Del(k));
            }
            (1, None) => {
                let b = rng.random_range(0..1000);
                tx.insert(&t, &acct(k, &format!("o{k}-{b}"), b))?;
                ops.push(Op::Ins(k, b));
            }
            (_, Some(v)) => {
                let nv = (v * 31 + 7) % 1009;
                tx.update(&t, &[Value::Int64(k)], &[(2, Value::Int64(nv))])?;
                ops.push(Op::Rmw(k, Some(v), nv));
            }
            (_, None) => ops.push(Op::Rmw(k, None, 0)),
        }
    }
    let ticket = tickets.fetch_add(1, Ordering::SeqCst);
    tx.commit()?;
    Ok(Done { ticket, ops })
}

fn run(seed: u64) {
    let fs = SimFs::new(seed);
    let db = open(&fs, opts(200));
    let mut def = accounts();
    def.indexes.truncate(1); // by_balance only: owners repeat here
    let t = db.create_table(def).unwrap();
    let mut model: BTreeMap<i64, i64> = BTreeMap::new();
    let mut tx = db.begin().unwrap();
    for k in (0..KEYS).step_by(2) {
        tx.insert(&t, &acct(k, &format!("o{k}"), k * 10)).unwrap();
        model.insert(k, k * 10);
    }
    tx.commit().unwrap();
    let tickets = AtomicU64::new(0);
    let done = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for w in 0..4u64 {
            let (db, tickets, done) = (&db, &tickets, &done);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed * 1000 + w);
                for _ in 0..150 {
                    match one_txn(db, &mut rng, tickets) {
                        Ok(d) => done.lock().unwrap().push(d),
                        Err(e) if e.is_retryable() => {}
                        Err(e) => panic!("seed {seed}: {e}"),
                    }
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by_key(|d| d.ticket);
    for d in &done {
        for op in &d.ops {
            match op {
                Op::Rmw(k, read, nv) => {
                    assert_eq!(
                        model.get(k).copied(),
                        *read,
                        "seed {seed}: ticket {} read key {k}",
                        d.ticket
                    );
                    if read.is_some() {
                        model.insert(*k, *nv);
                    }
                }
                Op::Del(k) => {
                    assert!(
                        model.remove(k).is_some(),
                        "seed {seed}: ticket {} deleted a missing key {k}",
                        d.ticket
                    );
                }
                Op::Ins(k, b) => {
                    assert!(
                        model.insert(*k, *b).is_none(),
                        "seed {seed}: ticket {} inserted over key {k}",
                        d.ticket
                    );
                }
            }
        }
    }
    let mut tx = db.begin().unwrap();
    let got: BTreeMap<i64, i64> = tx
        .scan(&t, Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (int(&r[0]), int(&r[2]))
        })
        .collect();
    assert_eq!(
        got, model,
        "seed {seed}: final contents differ from the serial history"
    );
    let mut by_index: Vec<(i64, i64)> = tx
        .index_scan(&t, "by_balance", Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (int(&r[0]), int(&r[2]))
        })
        .collect();
    by_index.sort_unstable();
    assert_eq!(
        by_index,
        model.into_iter().collect::<Vec<_>>(),
        "seed {seed}: index differs"
    );
    tx.commit().unwrap();
    db.purge_now().unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "seed {seed}: {:?}", report.problems);
}

#[test]
fn concurrent_transactions_match_a_serial_history() {
    if let Some(seed) = std::env::var("QUILL_SERIAL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run(seed);
        return;
    }
    let cases = std::env::var("QUILL_CRASH_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4u64);
    for seed in 1..=cases {
        run(seed);
    }
}
