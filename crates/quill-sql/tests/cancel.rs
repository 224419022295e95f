//! CancelRequest's effect: a statement waiting for a row lock another
//! session holds stops with 57014 when its session's cancel handle fires,
//! the statement has no effect, and both sessions go on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quill::catalog::Value;
use quill::{Db, Options};
use quill_sql::{Session, SqlState, TxnStatus};

/// Two sessions over a fresh database; the first has run `setup`.
fn two_sessions(setup: &str) -> (tempfile::TempDir, Arc<Db>, Session, Session) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    let mut a = Session::new(db.clone());
    for r in a.execute(setup) {
        r.unwrap();
    }
    let b = Session::new(db.clone());
    (dir, db, a, b)
}

/// `sql` (its last statement) fails with `state` after waiting at least
/// `ms` milliseconds, and well before the database's own lock wait
/// timeout; the error.
fn fails_waiting(s: &mut Session, sql: &str, state: SqlState, ms: u64) -> quill_sql::SqlError {
    let started = Instant::now();
    let e = s.execute(sql).pop().unwrap().unwrap_err();
    let waited = started.elapsed();
    assert_eq!(e.state, state, "{sql}: {e:?}");
    assert!(waited >= Duration::from_millis(ms), "{sql}: {waited:?}");
    assert!(waited < Duration::from_secs(5), "{sql}: {waited:?}");
    e
}

#[test]
fn cancel_stops_a_statement_waiting_for_a_row_lock() {
    let (_dir, _db, mut a, mut b) = two_sessions(
        "CREATE TABLE t (k int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 0); \
         BEGIN; UPDATE t SET v = 1 WHERE k = 1",
    );
    let cancel = b.cancel_handle();
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let r = b.execute("UPDATE t SET v = 2 WHERE k = 1").pop().unwrap();
        (b, r, started.elapsed())
    });
    // Let it queue on the lock, then cancel.
    std::thread::sleep(Duration::from_millis(200));
    cancel.cancel();
    let (mut b, r, waited) = waiter.join().unwrap();
    assert_eq!(r.unwrap_err().state, SqlState::QUERY_CANCELED);
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    assert_eq!(b.status(), TxnStatus::Idle);
    a.execute("COMMIT").pop().unwrap().unwrap();
    // A later statement is not canceled by the old request.
    let out = b
        .execute("SELECT v FROM t WHERE k = 1")
        .pop()
        .unwrap()
        .unwrap();
    assert_eq!(out.rows, vec![vec![Value::Int32(1)]]);
}

/// CREATE INDEX CONCURRENTLY waits for an older transaction, here one
/// holding a row lock (as PostgreSQL's waits for older transactions:
/// the engine's online index OI6); a cancel ends it with
/// 57014 and leaves no index, its name free; once the holder is gone
/// the same build succeeds.
#[test]
fn cancel_stops_a_concurrent_index_build_waiting_for_a_row_lock() {
    let (_dir, db, mut a, mut b) = two_sessions(
        "CREATE TABLE t (k int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 0), (2, 5); \
         BEGIN; UPDATE t SET v = 1 WHERE k = 1",
    );
    let cancel = b.cancel_handle();
    let builder = std::thread::spawn(move || {
        let r = b
            .execute("CREATE INDEX CONCURRENTLY t_v ON t (v)")
            .pop()
            .unwrap();
        (b, r)
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !builder.is_finished(),
        "the build waits for the row's writer"
    );
    cancel.cancel();
    let (mut b, r) = builder.join().unwrap();
    assert_eq!(r.unwrap_err().state, SqlState::QUERY_CANCELED);
    assert!(
        db.table("t")
            .unwrap()
            .schema()
            .index_position("t_v")
            .is_none()
    );
    a.execute("COMMIT").pop().unwrap().unwrap();
    b.execute("CREATE INDEX CONCURRENTLY t_v ON t (v)")
        .pop()
        .unwrap()
        .unwrap();
    let out = b
        .execute("SELECT k FROM t WHERE v = 1")
        .pop()
        .unwrap()
        .unwrap();
    assert_eq!(out.rows, vec![vec![Value::Int32(1)]]);
}

/// A statement waiting for a row lock stops at its `statement_timeout`
/// (57014, said as a timeout), not at the 10-second lock wait timeout,
/// with no effect; the session's next statement gets a limit of its own.
#[test]
fn statement_timeout_stops_a_row_lock_wait() {
    let (_dir, _db, mut a, mut b) = two_sessions(
        "CREATE TABLE t (k int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 0); \
         BEGIN; SELECT v FROM t WHERE k = 1 FOR UPDATE",
    );
    for sql in [
        "UPDATE t SET v = 2 WHERE k = 1",
        "BEGIN; SELECT v FROM t WHERE k = 1 FOR UPDATE",
    ] {
        b.execute("SET statement_timeout = 300")
            .pop()
            .unwrap()
            .unwrap();
        let e = fails_waiting(&mut b, sql, SqlState::QUERY_CANCELED, 300);
        assert!(e.message.contains("statement timeout"), "{e:?}");
        b.execute("ROLLBACK").pop().unwrap().unwrap();
    }
    a.execute("COMMIT").pop().unwrap().unwrap();
    let out = b
        .execute("SELECT v FROM t WHERE k = 1")
        .pop()
        .unwrap()
        .unwrap();
    assert_eq!(out.rows, vec![vec![Value::Int32(0)]]);
}

/// `lock_timeout` ends a row lock wait that lasts longer with 55P03, as
/// PostgreSQL says it, where the database's own lock wait timeout (10 s
/// here) would have gone on; inside a block the block is then failed, as
/// there. Other waits and statements are not limited by it.
#[test]
fn lock_timeout_ends_a_row_lock_wait() {
    let (_dir, _db, mut a, mut b) = two_sessions(
        "CREATE TABLE t (k int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 0), (2, 0); \
         BEGIN; SELECT v FROM t WHERE k = 1 FOR UPDATE",
    );
    b.execute("SET lock_timeout = '150ms'")
        .pop()
        .unwrap()
        .unwrap();
    for sql in [
        "UPDATE t SET v = 2 WHERE k = 1",
        "BEGIN; UPDATE t SET v = 2 WHERE k = 2; SELECT v FROM t WHERE k = 1 FOR SHARE",
    ] {
        let e = fails_waiting(&mut b, sql, SqlState::LOCK_NOT_AVAILABLE, 150);
        assert_eq!(e.message, "canceling statement due to lock timeout");
    }
    // The block is failed (and its update of row 2 goes with it).
    let e = b.execute("SELECT 1").pop().unwrap().unwrap_err();
    assert_eq!(e.state, SqlState::IN_FAILED_SQL_TRANSACTION);
    b.execute("ROLLBACK").pop().unwrap().unwrap();
    a.execute("COMMIT").pop().unwrap().unwrap();
    let out = b
        .execute("UPDATE t SET v = 3 WHERE k = 1; SELECT v FROM t ORDER BY k")
        .pop()
        .unwrap()
        .unwrap();
    assert_eq!(out.rows, vec![vec![Value::Int32(3)], vec![Value::Int32(0)]]);
}
