use std::ops::Bound::Unbounded;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use quill::btree::Direction;
use quill::catalog::Value;
use quill::db::{Db, TxnOptions};
use quill::io::SimFs;
use quill::{Durability, Error};

use crate::common::*;

fn setup(db: &Db, n: i64, balance: i64) -> quill::Table {
    let t = db.create_table(accounts()).unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..n {
        tx.insert(&t, &acct(i, &format!("o{i}"), balance)).unwrap();
    }
    tx.commit().unwrap();
    t
}

fn sum(db: &Db, t: &quill::Table, opts: TxnOptions) -> (i64, usize) {
    let mut tx = db.begin_with(opts).unwrap();
    let rows: Vec<_> = tx
        .scan(t, Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    tx.commit().unwrap();
    (rows.iter().map(|r| int(&r[2])).sum(), rows.len())
}

/// Concurrent transfers (locking reads, random lock order, so deadlocks
/// happen and are retried) keep the total; snapshot readers under both
/// levels always see it, by primary key and through the index.
#[test]
fn bank_transfers_keep_the_total() {
    let fs = SimFs::new(11);
    let db = open(&fs, opts(300));
    let n = 50;
    let t = setup(&db, n, 1000);
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let retried = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..4u64 {
            let (db, t, stop, done, retried) = (&db, &t, &stop, &done, &retried);
            s.spawn(move || {
                let mut rng = w + 1;
                let mut next = || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                while !stop.load(Ordering::Relaxed) {
                    // Moderate load (this is a debug build): every transfer
                    // changes an indexed column, and the index scans below
                    // pay for each entry purge has not removed yet.
                    std::thread::sleep(Duration::from_millis(1));
                    let a = (next() % n as u64) as i64;
                    let b = (next() % n as u64) as i64;
                    if a == b {
                        continue;
                    }
                    let amount = (next() % 50) as i64;
                    let opts = if w % 2 == 0 {
                        RR
                    } else {
                        TxnOptions::default()
                    };
                    let r = (|| -> quill::Result<()> {
                        let mut tx = db.begin_with(opts)?;
                        let ra = tx.get_for_update(t, &[Value::Int64(a)])?.unwrap();
                        let rb = tx.get_for_update(t, &[Value::Int64(b)])?.unwrap();
                        tx.update(
                            t,
                            &[Value::Int64(a)],
                            &[(2, Value::Int64(int(&ra[2]) - amount))],
                        )?;
                        tx.update(
                            t,
                            &[Value::Int64(b)],
                            &[(2, Value::Int64(int(&rb[2]) + amount))],
                        )?;
                        tx.commit()
                    })();
                    match r {
                        Ok(()) => {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if e.is_retryable() => {
                            retried.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("transfer failed: {e}"),
                    }
                }
            });
        }
        // Stop the writers even if an assertion below fails.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = StopOnDrop(&stop);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            assert_eq!(sum(&db, &t, TxnOptions::default()), (n * 1000, n as usize));
            assert_eq!(sum(&db, &t, RR).0, n * 1000);
            let mut tx = db.begin_with(RR).unwrap();
            let mut by_index: Vec<Vec<Value>> = tx
                .index_scan(&t, "by_balance", Unbounded, Unbounded, Direction::Backward)
                .unwrap()
                .collect::<quill::Result<_>>()
                .unwrap();
            let rows: Vec<Vec<Value>> = tx
                .scan(&t, Unbounded, Unbounded, Direction::Forward)
                .unwrap()
                .collect::<quill::Result<_>>()
                .unwrap();
            by_index.sort_by_key(|r| int(&r[0]));
            assert_eq!(
                by_index, rows,
                "the index and the primary key disagree in one snapshot"
            );
            let by_index: i64 = by_index.iter().map(|r| int(&r[2])).sum();
            let again: i64 = rows.iter().map(|r| int(&r[2])).sum();
            assert_eq!((by_index, again), (n * 1000, n * 1000));
            tx.commit().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(done.load(Ordering::Relaxed) > 50, "too few transfers");
    eprintln!(
        "transfers: {} committed, {} retried; {:?}",
        done.load(Ordering::Relaxed),
        retried.load(Ordering::Relaxed),
        db.stats().locks
    );
    db.purge_now().unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// A REPEATABLE READ snapshot never changes while others commit; READ
/// COMMITTED sees each commit at the next statement; nobody sees
/// uncommitted changes.
#[test]
fn snapshots_and_no_dirty_reads() {
    let fs = SimFs::new(12);
    let db = open(&fs, opts(200));
    let t = setup(&db, 10, 100);
    let mut rr = db.begin_with(RR).unwrap();
    let mut rc = db.begin().unwrap();
    let first = rr.get(&t, &[Value::Int64(3)]).unwrap();
    assert_eq!(rc.get(&t, &[Value::Int64(3)]).unwrap(), first);

    let mut w = db.begin().unwrap();
    w.update(&t, &[Value::Int64(3)], &[(2, Value::Int64(1))])
        .unwrap();
    w.insert(&t, &acct(50, "new", 5)).unwrap();
    w.delete(&t, &[Value::Int64(4)]).unwrap();
    // Uncommitted: invisible to both.
    assert_eq!(rr.get(&t, &[Value::Int64(3)]).unwrap(), first);
    assert_eq!(rc.get(&t, &[Value::Int64(3)]).unwrap(), first);
    assert_eq!(rc.get(&t, &[Value::Int64(50)]).unwrap(), None);
    assert!(rc.get(&t, &[Value::Int64(4)]).unwrap().is_some());
    w.commit().unwrap();
    // Committed: the RC statement sees it, the RR snapshot does not.
    assert_eq!(
        rc.get(&t, &[Value::Int64(3)]).unwrap(),
        Some(acct(3, "o3", 1))
    );
    assert_eq!(rc.get(&t, &[Value::Int64(4)]).unwrap(), None);
    assert_eq!(rr.get(&t, &[Value::Int64(3)]).unwrap(), first);
    assert!(rr.get(&t, &[Value::Int64(4)]).unwrap().is_some());
    assert_eq!(rr.get(&t, &[Value::Int64(50)]).unwrap(), None);
    let rows: Vec<_> = rr
        .index_scan(&t, "by_balance", Unbounded, Unbounded, Direction::Forward)
        .unwrap()
        .collect::<quill::Result<_>>()
        .unwrap();
    assert_eq!(rows.len(), 10);
    assert!(rows.iter().all(|r| int(&r[2]) == 100));
    // Purge may not take what the snapshot needs.
    db.purge_now().unwrap();
    assert_eq!(rr.get(&t, &[Value::Int64(3)]).unwrap(), first);
    assert!(rr.get(&t, &[Value::Int64(4)]).unwrap().is_some());
    // Writing a row changed after the snapshot is a serialization failure
    // that rolls the transaction back.
    let e = rr
        .update(&t, &[Value::Int64(3)], &[(2, Value::Int64(7))])
        .unwrap_err();
    assert!(
        matches!(e, Error::Serialization { .. }) && e.is_retryable(),
        "{e}"
    );
    assert!(
        rr.get(&t, &[Value::Int64(3)]).is_err(),
        "the failed transaction is over"
    );
    drop(rr);
    rc.commit().unwrap();
    assert_eq!(db.stats().serialization_failures, 1);
    db.purge_now().unwrap();
    assert_eq!(db.stats().history_length, 0);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// Concurrent read-modify-write increments under REPEATABLE READ (retried
/// on serialization failures) lose no update.
#[test]
fn no_lost_updates() {
    let fs = SimFs::new(13);
    let db = open(&fs, opts(200));
    let t = setup(&db, 2, 0);
    let per = 150;
    std::thread::scope(|s| {
        for _ in 0..4 {
            let (db, t) = (&db, &t);
            s.spawn(move || {
                let mut ok = 0;
                while ok < per {
                    let r = (|| -> quill::Result<()> {
                        let mut tx = db.begin_with(RR)?;
                        let row = tx.get(t, &[Value::Int64(1)])?.unwrap();
                        // Let another increment in between, so conflicts
                        // happen however fast the machine is.
                        std::thread::sleep(std::time::Duration::from_micros(20));
                        tx.update(
                            t,
                            &[Value::Int64(1)],
                            &[(2, Value::Int64(int(&row[2]) + 1))],
                        )?;
                        tx.commit()
                    })();
                    match r {
                        Ok(()) => ok += 1,
                        Err(e) if e.is_retryable() => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
    });
    let mut tx = db.begin().unwrap();
    assert_eq!(
        int(&tx.get(&t, &[Value::Int64(1)]).unwrap().unwrap()[2]),
        4 * per
    );
    tx.commit().unwrap();
    assert!(
        db.stats().serialization_failures > 0,
        "no conflict was exercised"
    );
}

/// Deadlocks pick a victim with a retryable error; a lock wait times out.
#[test]
fn deadlock_and_lock_wait_timeout() {
    let fs = SimFs::new(14);
    let mut o = opts(200);
    o.lock_wait_timeout = Duration::from_millis(300);
    let db = open(&fs, o);
    let t = setup(&db, 4, 10);
    let barrier = Barrier::new(2);
    let results: Vec<quill::Result<()>> = std::thread::scope(|s| {
        let hs: Vec<_> = [(0i64, 1i64), (1, 0)]
            .into_iter()
            .map(|(a, b)| {
                let (db, t, barrier) = (&db, &t, &barrier);
                s.spawn(move || {
                    let mut tx = db.begin()?;
                    tx.update(t, &[Value::Int64(a)], &[(2, Value::Int64(1))])?;
                    barrier.wait();
                    tx.update(t, &[Value::Int64(b)], &[(2, Value::Int64(2))])?;
                    std::thread::sleep(Duration::from_millis(50));
                    tx.commit()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let victims = results
        .iter()
        .filter(|r| matches!(r, Err(Error::Deadlock { .. })))
        .count();
    assert_eq!(victims, 1, "{results:?}");
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert_eq!(db.stats().locks.deadlocks, 1);

    let mut holder = db.begin().unwrap();
    holder
        .update(&t, &[Value::Int64(2)], &[(2, Value::Int64(5))])
        .unwrap();
    let started = Instant::now();
    let e = std::thread::scope(|s| {
        s.spawn(|| {
            let mut tx = db.begin().unwrap();
            let e = tx.delete(&t, &[Value::Int64(2)]).unwrap_err();
            // The statement failed; the transaction may go on.
            assert!(
                tx.update(&t, &[Value::Int64(3)], &[(2, Value::Int64(6))])
                    .unwrap()
            );
            tx.commit().unwrap();
            e
        })
        .join()
        .unwrap()
    });
    assert!(
        matches!(e, Error::LockTimeout { .. }) && e.is_retryable(),
        "{e}"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    holder.commit().unwrap();
    let mut tx = db.begin().unwrap();
    assert_eq!(int(&tx.get(&t, &[Value::Int64(2)]).unwrap().unwrap()[2]), 5);
    assert_eq!(int(&tx.get(&t, &[Value::Int64(3)]).unwrap().unwrap()[2]), 6);
    tx.commit().unwrap();
}

/// In scope `s`, update column 2 of row `id` to `value` and commit it
/// with `Sync` durability on another thread, and return once its records
/// are in the log (plus 20 ms, enough for its commit record and lock
/// release); with a slow simulated sync its commit is then still waiting
/// for durability. `done` is set when the commit returns.
fn pending_sync_update<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    db: &'s Db,
    t: &'s quill::Table,
    id: i64,
    value: i64,
    done: &'s AtomicBool,
) {
    let log = db.store().log();
    let before = log.end_lsn();
    s.spawn(move || {
        let mut tx = db.begin().unwrap();
        tx.update(t, &[Value::Int64(id)], &[(2, Value::Int64(value))])
            .unwrap();
        tx.commit().unwrap();
        done.store(true, Ordering::SeqCst);
    });
    while log.end_lsn() == before {
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(20));
}

/// With slow syncs: a `Sync` commit is invisible to readers until durable,
/// yet its row lock is free as soon as the commit record is logged (early
/// lock release); a `Write` commit is visible at once.
#[test]
fn sync_commits_visible_only_when_durable_with_early_lock_release() {
    let fs = SimFs::new(15);
    let db = open(&fs, opts(200));
    let t = setup(&db, 4, 10);
    fs.set_sync_latency(Duration::from_millis(300));
    let log = db.store().log();
    let before = log.end_lsn();
    let committed = AtomicBool::new(false);
    std::thread::scope(|s| {
        pending_sync_update(s, &db, &t, 1, 111, &committed);
        let t0 = Instant::now();
        let mut w = db
            .begin_with(TxnOptions {
                durability: Durability::Write,
                ..Default::default()
            })
            .unwrap();
        // The lock is free while the first commit waits for its sync.
        assert!(
            w.update(&t, &[Value::Int64(1)], &[(1, Value::Text("w".into()))])
                .unwrap()
        );
        assert!(
            !committed.load(Ordering::SeqCst),
            "lock was held across the sync"
        );
        assert!(t0.elapsed() < Duration::from_millis(250));
        // A locking read returns the newest version, but only once its
        // commit is durable (a read never sees a commit a crash could
        // take away).
        let mut l = db.begin().unwrap();
        let row = l.get_for_update(&t, &[Value::Int64(0)]).unwrap().unwrap();
        assert_eq!(int(&row[2]), 10);
        l.commit().unwrap();
        while !committed.load(Ordering::SeqCst) {
            let mut r = db.begin().unwrap();
            let v = int(&r.get(&t, &[Value::Int64(1)]).unwrap().unwrap()[2]);
            r.commit().unwrap();
            if v == 111 {
                assert!(
                    log.durable_lsn() > before,
                    "saw a Sync commit before it was durable"
                );
            }
        }
        w.update(&t, &[Value::Int64(2)], &[(2, Value::Int64(222))])
            .unwrap();
        w.commit().unwrap();
    });
    // A locking read of a row whose newest version is a Sync commit still
    // waiting for its sync returns only once that commit is durable.
    let before = log.end_lsn();
    let second = AtomicBool::new(false);
    std::thread::scope(|s| {
        pending_sync_update(s, &db, &t, 3, 333, &second);
        let mut l = db.begin().unwrap();
        let row = l.get_for_update(&t, &[Value::Int64(3)]).unwrap().unwrap();
        assert_eq!(int(&row[2]), 333, "a locking read sees the newest version");
        assert!(
            log.durable_lsn() > before,
            "a locking read returned a Sync commit before it was durable"
        );
        l.commit().unwrap();
    });
    // Write durability: visible at once, before any sync.
    let mut r = db.begin().unwrap();
    assert_eq!(
        int(&r.get(&t, &[Value::Int64(2)]).unwrap().unwrap()[2]),
        222
    );
    r.commit().unwrap();
    fs.set_sync_latency(Duration::ZERO);
}

/// Registry R7: a `Write` or `Lazy` commit that changed a row whose newest
/// version comes from a `Sync` commit not yet durable is not visible
/// before that commit is durable (its row version carries the `Sync`
/// commit's change); unrelated `Lazy` commits stay visible at once.
#[test]
fn lazy_commits_built_on_a_pending_sync_commit_wait_for_it() {
    for durability in [Durability::Write, Durability::Lazy] {
        let fs = SimFs::new(17);
        let db = open(&fs, opts(200));
        let t = setup(&db, 4, 10);
        fs.set_sync_latency(Duration::from_millis(300));
        let log = db.store().log();
        let before = log.end_lsn();
        let lazy = TxnOptions {
            durability,
            ..Default::default()
        };
        let first = AtomicBool::new(false);
        std::thread::scope(|s| {
            pending_sync_update(s, &db, &t, 1, 111, &first);
            if durability == Durability::Lazy {
                // Unrelated: visible at once although the sync is pending.
                // (A `Write` commit writes, so it queues behind the
                // durable write in flight.)
                let mut u = db.begin_with(lazy).unwrap();
                u.update(&t, &[Value::Int64(3)], &[(1, Value::Text("u".into()))])
                    .unwrap();
                u.commit().unwrap();
                let mut r = db.begin().unwrap();
                let row = r.get(&t, &[Value::Int64(3)]).unwrap().unwrap();
                r.commit().unwrap();
                assert_eq!(row[1], Value::Text("u".into()));
                assert!(
                    log.durable_lsn() <= before,
                    "the first sync is still pending"
                );
            }
            // Dependent: another column of the row the pending commit changed.
            s.spawn(|| {
                let mut w = db.begin_with(lazy).unwrap();
                w.update(&t, &[Value::Int64(1)], &[(1, Value::Text("w".into()))])
                    .unwrap();
                w.commit().unwrap();
            });
            let mut seen = false;
            while !seen {
                let mut r = db.begin().unwrap();
                let row = r.get(&t, &[Value::Int64(1)]).unwrap().unwrap();
                r.commit().unwrap();
                if row[1] == Value::Text("w".into()) {
                    assert!(
                        log.durable_lsn() > before,
                        "{durability:?}: saw a change built on a Sync commit before it was durable"
                    );
                    assert_eq!(int(&row[2]), 111);
                    seen = true;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        fs.set_sync_latency(Duration::ZERO);
    }
}

/// A Sync commit whose sync fails is never visible.
#[test]
fn failed_sync_commit_is_never_visible() {
    let fs = SimFs::new(16);
    let db = open(&fs, opts(200));
    let t = setup(&db, 4, 10);
    fs.fail_sync_after(0, true);
    let mut tx = db.begin().unwrap();
    tx.update(&t, &[Value::Int64(1)], &[(2, Value::Int64(99))])
        .unwrap();
    assert!(tx.commit().is_err());
    // Reads still work from the buffer pool after the log failed.
    let mut r = db.begin().unwrap();
    let row = r.get(&t, &[Value::Int64(1)]).unwrap().unwrap();
    assert_eq!(int(&row[2]), 10, "a failed Sync commit became visible");
}

/// `commit_async` resolves once durable.
#[test]
fn async_commit() {
    let fs = SimFs::new(17);
    let db = open(&fs, opts(200));
    let t = setup(&db, 4, 10);
    let mut tx = db.begin().unwrap();
    tx.update(&t, &[Value::Int64(1)], &[(2, Value::Int64(5))])
        .unwrap();
    let before = db.store().log().end_lsn();
    let fut = tx.commit_async();
    futures_lite_block_on(fut).unwrap();
    assert!(
        db.store().log().durable_lsn() > before,
        "resolved before the commit mark was durable"
    );
    let mut r = db.begin().unwrap();
    assert_eq!(int(&r.get(&t, &[Value::Int64(1)]).unwrap().unwrap()[2]), 5);
    r.commit().unwrap();
}

fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park_timeout(Duration::from_millis(10)),
        }
    }
}

/// Every row of `rows`, read in place with `Rows::next_ref`.
fn in_place(mut rows: quill::db::Rows<'_>) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    while let Some(row) = rows.next_ref() {
        let row = row.unwrap();
        let values: Vec<Value> = row.iter().map(|v| v.unwrap().to_owned()).collect();
        assert_eq!(values, row.to_values().unwrap());
        out.push(values);
    }
    out
}

/// Rows read in place (`Rows::next_ref`: borrowed from the scan's batch
/// when the snapshot sees the newest version, else the older version it
/// sees) are the rows the owned iterator returns and the snapshot's rows,
/// by primary key and through an index, in both directions, with enough
/// rows for several batches and leaves, while newer versions (updates,
/// deletes, inserts, some committed and some not) sit on top.
#[test]
fn rows_read_in_place_are_the_snapshots_rows() {
    let fs = SimFs::new(13);
    let db = open(&fs, opts(200));
    let n = 600;
    let t = setup(&db, n, 100);
    let mut rr = db.begin_with(RR).unwrap();
    // The snapshot's rows, read before anything changes.
    let want: Vec<Vec<Value>> = (0..n).map(|i| acct(i, &format!("o{i}"), 100)).collect();
    let _ = rr.get(&t, &[Value::Int64(0)]).unwrap();
    let mut w = db.begin().unwrap();
    for i in (0..n).step_by(3) {
        w.update(&t, &[Value::Int64(i)], &[(2, Value::Int64(7))])
            .unwrap();
    }
    for i in (1..n).step_by(7) {
        w.delete(&t, &[Value::Int64(i)]).unwrap();
    }
    w.insert(&t, &acct(n + 1, "late", 5)).unwrap();
    w.commit().unwrap();
    let mut open_writer = db.begin().unwrap();
    open_writer
        .update(&t, &[Value::Int64(5)], &[(1, Value::Text("dirty".into()))])
        .unwrap();
    for dir in [Direction::Forward, Direction::Backward] {
        let by_pk = in_place(rr.scan(&t, Unbounded, Unbounded, dir).unwrap());
        let owned: Vec<Vec<Value>> = rr
            .scan(&t, Unbounded, Unbounded, dir)
            .unwrap()
            .collect::<quill::Result<_>>()
            .unwrap();
        assert_eq!(by_pk, owned, "{dir:?}: in place vs owned");
        let mut expect = want.clone();
        if dir == Direction::Backward {
            expect.reverse();
        }
        assert_eq!(by_pk, expect, "{dir:?}: the snapshot's rows");
        let mut by_index = in_place(
            rr.index_scan(&t, "by_balance", Unbounded, Unbounded, dir)
                .unwrap(),
        );
        let owned: Vec<Vec<Value>> = rr
            .index_scan(&t, "by_balance", Unbounded, Unbounded, dir)
            .unwrap()
            .collect::<quill::Result<_>>()
            .unwrap();
        assert_eq!(
            by_index, owned,
            "{dir:?}: through the index, in place vs owned"
        );
        by_index.sort_by_key(|r| int(&r[0]));
        assert_eq!(by_index, want, "{dir:?}: through the index");
    }
    // A newer snapshot sees the committed changes, not the open ones.
    let mut now = db.begin_with(RR).unwrap();
    let rows = in_place(
        now.scan(&t, Unbounded, Unbounded, Direction::Forward)
            .unwrap(),
    );
    let expect: Vec<Vec<Value>> = (0..n)
        .filter(|i| (i - 1) % 7 != 0 || *i == 0)
        .map(|i| acct(i, &format!("o{i}"), if i % 3 == 0 { 7 } else { 100 }))
        .chain([acct(n + 1, "late", 5)])
        .collect();
    assert_eq!(rows, expect);
    now.commit().unwrap();
    open_writer.rollback().unwrap();
    rr.commit().unwrap();
}
