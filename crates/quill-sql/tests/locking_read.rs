//! SELECT ... FOR UPDATE / FOR SHARE: the rows a query returns are locked
//! until its transaction ends, read at their newest version and checked
//! against WHERE again (PostgreSQL's READ COMMITTED), so two transactions
//! that each decide from what they read under the lock are serialized:
//! the write skew REPEATABLE READ alone lets through (and SERIALIZABLE,
//! which is refused, would prevent) does not happen.

use std::sync::Arc;
use std::time::Duration;

use quill::catalog::Value;
use quill::{Db, Options};
use quill_sql::{Session, SqlState};

fn run(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    let mut last = Vec::new();
    for r in s.execute(sql) {
        last = r.unwrap_or_else(|e| panic!("{sql}: {e}")).rows;
    }
    last
}

/// A fresh database and a session on it that has run `setup`.
fn db_with(setup: &str) -> (tempfile::TempDir, Arc<Db>, Session) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    let mut a = Session::new(db.clone());
    run(&mut a, setup);
    (dir, db, a)
}

/// `b` runs `sql` on a thread of its own, which must still be waiting
/// (for a row lock) 200 ms later; join it for the session and the last
/// statement's rows.
fn waiting(mut b: Session, sql: &str) -> std::thread::JoinHandle<(Session, Vec<Vec<Value>>)> {
    let waiter = std::thread::spawn({
        let sql = sql.to_string();
        move || {
            let rows = run(&mut b, &sql);
            (b, rows)
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(!waiter.is_finished(), "{sql}: does not wait for a row lock");
    waiter
}

/// Two doctors on call; each goes off call only if the other stays. With
/// the rows read FOR UPDATE the second waits for the first, then sees
/// the first off call and stays: one is always on call. Through every
/// access path the plan may take (full scan, primary-key points and
/// range, a secondary index).
#[test]
fn locked_reads_serialize_a_read_then_write_decision() {
    for (name_read, repeatable) in [
        (
            "full scan",
            "SELECT id FROM oncall WHERE on_call FOR UPDATE",
        ),
        (
            "points",
            "SELECT id FROM oncall WHERE id IN (1, 2) AND on_call FOR UPDATE",
        ),
        (
            "range",
            "SELECT id FROM oncall WHERE id >= 1 AND id <= 2 AND on_call FOR UPDATE",
        ),
        (
            "index",
            "SELECT id FROM oncall WHERE shift = 7 AND on_call FOR UPDATE",
        ),
    ]
    .into_iter()
    .flat_map(|p| [(p, false), (p, true)])
    {
        let ((name, read), repeatable) = (name_read, repeatable);
        let (_dir, db, mut a) = db_with(
            "CREATE TABLE oncall (id int PRIMARY KEY, shift int, on_call bool); \
             CREATE INDEX by_shift ON oncall (shift); \
             INSERT INTO oncall VALUES (1, 7, true), (2, 7, true)",
        );
        let mut b = Session::new(db);
        for s in [&mut a, &mut b] {
            run(
                s,
                if repeatable {
                    "BEGIN ISOLATION LEVEL REPEATABLE READ"
                } else {
                    "BEGIN"
                },
            );
        }
        assert_eq!(run(&mut a, read).len(), 2, "{name}");
        let waiter = std::thread::spawn({
            let read = read.to_string();
            move || {
                let r = b.execute(&read).pop().unwrap();
                (b, r)
            }
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(!waiter.is_finished(), "{name}: b waits for a's locks");
        run(
            &mut a,
            "UPDATE oncall SET on_call = false WHERE id = 1; COMMIT",
        );
        let (mut b, r) = waiter.join().unwrap();
        if repeatable {
            // b's locked read finds row 1 changed since its snapshot: a
            // serialization failure (retry), never a stale decision.
            assert_eq!(
                r.map(|o| o.rows).unwrap_err().state,
                SqlState::SERIALIZATION_FAILURE,
                "{name}"
            );
        } else {
            // b sees row 1 off call now: only the other on call, so b
            // stays.
            assert_eq!(r.unwrap().rows, vec![vec![Value::Int32(2)]], "{name}");
        }
        run(&mut b, "ROLLBACK");
        let on = run(&mut b, "SELECT count(*) FROM oncall WHERE on_call");
        assert_eq!(on, vec![vec![Value::Int64(1)]], "{name}");
    }
}

/// Under READ COMMITTED a locked read waits, then returns the newest
/// version of each row, checked against WHERE again: a row the holder
/// took out of the WHERE is not returned.
#[test]
fn a_locked_read_returns_newest_versions_that_still_match() {
    let (_dir, db, mut a) = db_with(
        "CREATE TABLE acct (id int PRIMARY KEY, bal int); \
         INSERT INTO acct VALUES (1, 100), (2, 100), (3, 5)",
    );
    let b = Session::new(db);
    run(
        &mut a,
        "BEGIN; SELECT id FROM acct WHERE bal >= 50 FOR UPDATE; \
         UPDATE acct SET bal = 10 WHERE id = 1; UPDATE acct SET bal = 200 WHERE id = 2",
    );
    let waiter = waiting(
        b,
        "BEGIN; SELECT id, bal FROM acct WHERE bal >= 50 ORDER BY id FOR UPDATE",
    );
    run(&mut a, "COMMIT");
    let (mut b, rows) = waiter.join().unwrap();
    assert_eq!(rows, vec![vec![Value::Int32(2), Value::Int32(200)]]);
    // b holds row 2's lock now: a waits for it in turn (and times out
    // only if b never ends; here b commits).
    let holder = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        run(
            &mut b,
            "UPDATE acct SET bal = bal - 50 WHERE id = 2; COMMIT",
        );
    });
    run(&mut a, "UPDATE acct SET bal = bal + 1 WHERE id = 2");
    holder.join().unwrap();
    assert_eq!(
        run(&mut a, "SELECT bal FROM acct WHERE id = 2"),
        vec![vec![Value::Int32(151)]]
    );
}

/// What a locking read cannot lock is refused, never run unlocked; a
/// read-only block refuses it (25006).
#[test]
fn locking_reads_it_cannot_lock_are_refused() {
    let (_dir, _db, mut a) =
        db_with("CREATE TABLE t (k int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 1)");
    for sql in [
        "SELECT count(*) FROM t FOR UPDATE",
        "SELECT DISTINCT v FROM t FOR UPDATE",
        "SELECT v FROM t GROUP BY v FOR UPDATE",
        "SELECT a.k FROM t a, t b FOR UPDATE",
        "SELECT k FROM t FOR UPDATE NOWAIT",
        "SELECT k FROM t FOR UPDATE SKIP LOCKED",
        "(SELECT k FROM t FOR UPDATE) UNION SELECT 2",
        "SELECT 2 UNION ALL (SELECT k FROM t WHERE k = 1 FOR SHARE)",
    ] {
        let e = a.execute(sql).pop().unwrap().unwrap_err();
        assert_eq!(e.state, SqlState::FEATURE_NOT_SUPPORTED, "{sql}: {e}");
    }
    let e = a
        .execute("BEGIN READ ONLY; SELECT k FROM t FOR SHARE")
        .pop()
        .unwrap()
        .unwrap_err();
    assert_eq!(e.state, SqlState::READ_ONLY_SQL_TRANSACTION);
    run(&mut a, "ROLLBACK");
    assert_eq!(
        run(&mut a, "SELECT k FROM t WHERE k = 1 FOR UPDATE"),
        vec![vec![Value::Int32(1)]]
    );
}

/// FOR SHARE locks are shared: two readers hold one row at once, a writer
/// waits for both, and a holder's own UPDATE takes the lock exclusive
/// once the other has gone.
#[test]
fn for_share_readers_share_and_writers_wait() {
    let (_dir, db, mut a) =
        db_with("CREATE TABLE t (k int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 10)");
    let mut b = Session::new(db.clone());
    let mut w = Session::new(db.clone());
    let read = "BEGIN; SELECT v FROM t WHERE k = 1 FOR SHARE";
    assert_eq!(run(&mut a, read), vec![vec![Value::Int32(10)]]);
    // b is not blocked by a's shared lock.
    let reader = std::thread::spawn(move || {
        let rows = run(&mut b, read);
        (b, rows)
    });
    let (mut b, rows) = reader.join().unwrap();
    assert_eq!(rows, vec![vec![Value::Int32(10)]]);
    // A writer waits for both.
    let writer = std::thread::spawn(move || {
        run(&mut w, "UPDATE t SET v = 30 WHERE k = 1");
        w
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !writer.is_finished(),
        "the writer waits for the shared locks"
    );
    run(&mut b, "COMMIT");
    std::thread::sleep(Duration::from_millis(100));
    assert!(!writer.is_finished(), "the writer still waits for a's lock");
    // a, the last holder, changes the row it read (its lock made
    // exclusive), ahead of the queued writer.
    run(&mut a, "UPDATE t SET v = v + 1 WHERE k = 1; COMMIT");
    let mut w = writer.join().unwrap();
    assert_eq!(
        run(&mut w, "SELECT v FROM t WHERE k = 1"),
        vec![vec![Value::Int32(30)]]
    );
}

/// Whether `s` can update row `id` of `jobs` at once (not waiting on a
/// row lock another transaction holds): the statement times out when it
/// would wait.
fn can_update_now(s: &mut Session, id: i32) -> bool {
    let sql =
        format!("SET statement_timeout = 200; UPDATE jobs SET state = 'taken' WHERE id = {id}");
    let r = s.execute(&sql).pop().unwrap();
    match r {
        Ok(_) => true,
        Err(e) if e.state == SqlState::QUERY_CANCELED => false,
        Err(e) => panic!("{sql}: {e}"),
    }
}

/// A queue worker's `... LIMIT 1 FOR UPDATE` locks the row it returns and
/// no other (as PostgreSQL does), in the scan's order and in an ORDER BY
/// the scan does not give; rows OFFSET skips are locked too, as there.
/// Another worker can take any other row meanwhile.
#[test]
fn a_limit_locks_only_the_rows_it_returns() {
    for (read, locked, returned) in [
        (
            "SELECT id FROM jobs WHERE state = 'new' ORDER BY id LIMIT 1 FOR UPDATE",
            vec![1],
            1,
        ),
        (
            "SELECT id FROM jobs WHERE state = 'new' ORDER BY prio DESC LIMIT 1 FOR UPDATE",
            vec![3],
            3,
        ),
        (
            "SELECT id FROM jobs WHERE state = 'new' ORDER BY prio LIMIT 1 OFFSET 1 FOR UPDATE",
            vec![2, 4],
            4,
        ),
        (
            "SELECT id FROM jobs WHERE state = 'new' AND prio > 0 ORDER BY prio DESC LIMIT 1 FOR SHARE",
            vec![3],
            3,
        ),
    ] {
        let (_dir, db, mut a) = db_with(
            "CREATE TABLE jobs (id int PRIMARY KEY, prio int, state text); \
             INSERT INTO jobs VALUES (1, 5, 'new'), (2, 1, 'new'), (3, 9, 'new'), (4, 2, 'new')",
        );
        run(&mut a, "BEGIN");
        assert_eq!(
            run(&mut a, read),
            vec![vec![Value::Int32(returned)]],
            "{read}"
        );
        for id in 1..=4 {
            let mut b = Session::new(db.clone());
            run(&mut b, "BEGIN");
            assert_eq!(
                can_update_now(&mut b, id),
                !locked.contains(&id),
                "{read}: row {id}"
            );
            run(&mut b, "ROLLBACK");
        }
    }
}

/// In an ORDER BY the scan does not give, a row taken out of WHERE by
/// the transaction whose lock the reader waited for is skipped and the
/// next in order returned (READ COMMITTED), not an empty result.
#[test]
fn a_sorted_limit_skips_a_row_taken_while_it_waited() {
    let (_dir, db, mut a) = db_with(
        "CREATE TABLE jobs (id int PRIMARY KEY, prio int, state text); \
         INSERT INTO jobs VALUES (1, 5, 'new'), (2, 1, 'new'), (3, 9, 'new')",
    );
    let take = "SELECT id FROM jobs WHERE state = 'new' ORDER BY prio DESC LIMIT 1 FOR UPDATE";
    run(&mut a, "BEGIN");
    assert_eq!(run(&mut a, take), vec![vec![Value::Int32(3)]]);
    let waiter = waiting(Session::new(db), &format!("BEGIN; {take}"));
    run(
        &mut a,
        "UPDATE jobs SET state = 'taken' WHERE id = 3; COMMIT",
    );
    let (mut b, rows) = waiter.join().unwrap();
    assert_eq!(rows, vec![vec![Value::Int32(1)]]);
    run(&mut b, "COMMIT");
}

/// `FOR UPDATE OF` names a table of FROM as written there (its alias if
/// it has one): anything else is 42P01, a qualified name 42601, as
/// PostgreSQL answers.
#[test]
fn for_update_of_names_a_table_of_from() {
    let (_dir, _db, mut a) =
        db_with("CREATE TABLE t (k int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 1)");
    for sql in [
        "SELECT k FROM t FOR UPDATE OF t",
        "SELECT x.k FROM t AS x FOR SHARE OF x",
        "SELECT k FROM public.t FOR UPDATE OF T",
    ] {
        assert_eq!(run(&mut a, sql), vec![vec![Value::Int32(1)]], "{sql}");
    }
    for (sql, state, message) in [
        (
            "SELECT k FROM t FOR UPDATE OF nope",
            SqlState::UNDEFINED_TABLE,
            "relation \"nope\" in FOR UPDATE clause not found in FROM clause",
        ),
        (
            "SELECT x.k FROM t AS x FOR UPDATE OF t",
            SqlState::UNDEFINED_TABLE,
            "relation \"t\" in FOR UPDATE clause not found in FROM clause",
        ),
        (
            "SELECT k FROM t FOR SHARE OF public.t",
            SqlState::SYNTAX_ERROR,
            "FOR SHARE must specify unqualified relation names",
        ),
    ] {
        let e = a.execute(sql).pop().unwrap().unwrap_err();
        assert_eq!((e.state, e.message.as_str()), (state, message), "{sql}");
    }
}

/// PostgreSQL's weaker row locks are taken as the stronger ones: `FOR NO
/// KEY UPDATE` locks like `FOR UPDATE`, `FOR KEY SHARE` like `FOR SHARE`
/// (a writer waits for either). The words keep their meaning elsewhere:
/// in a string, or as a column named `key`.
#[test]
fn key_lock_strengths_are_taken_stronger() {
    for (read, returned) in [
        ("SELECT id FROM jobs WHERE id = 2 FOR NO KEY UPDATE", 2),
        ("SELECT id FROM jobs WHERE id = 2 for  key\nshare", 2),
        (
            "SELECT id FROM jobs WHERE state = 'new' ORDER BY prio DESC LIMIT 1 FOR NO KEY UPDATE",
            3,
        ),
    ] {
        let (_dir, db, mut a) = db_with(
            "CREATE TABLE jobs (id int PRIMARY KEY, prio int, state text); \
             INSERT INTO jobs VALUES (1, 5, 'new'), (2, 1, 'new'), (3, 9, 'new')",
        );
        run(&mut a, "BEGIN");
        assert_eq!(
            run(&mut a, read),
            vec![vec![Value::Int32(returned)]],
            "{read}"
        );
        let mut b = Session::new(db);
        run(&mut b, "BEGIN");
        assert!(!can_update_now(&mut b, returned), "{read}");
        run(&mut b, "ROLLBACK");
        assert!(can_update_now(&mut b, 1), "{read}");
    }
    let (_dir, _db, mut a) = db_with(
        "CREATE TABLE kv (key varchar(40) PRIMARY KEY, v int); INSERT INTO kv VALUES ('for no key update', 1)",
    );
    assert_eq!(
        run(
            &mut a,
            "SELECT key AS no FROM kv WHERE key = 'for no key update'"
        ),
        vec![vec![Value::Text("for no key update".into())]]
    );
    // A tokenizer's error is worded as without the words.
    for sql in ["SELECT 'key", "SELECT 'abc"] {
        let e = a.execute(sql).pop().unwrap().unwrap_err();
        assert!(e.message.starts_with("sql parser error: "), "{sql}: {e}");
    }
    let e = a
        .execute("(SELECT key FROM kv) UNION (SELECT key FROM kv) FOR UPDATE OF kv")
        .pop()
        .unwrap()
        .unwrap_err();
    assert_eq!(e.state, SqlState::FEATURE_NOT_SUPPORTED, "{e}");
    assert_eq!(
        run(&mut a, "(SELECT v FROM kv) FOR UPDATE OF kv"),
        vec![vec![Value::Int32(1)]]
    );
}

/// LIMIT 0 reads and locks nothing; a sorted locking read keeps the
/// snapshot's order after a row it waited for changed its sort key, and
/// OFFSET skips in that order (PostgreSQL's LockRows sits above its Sort,
/// below its Limit).
#[test]
fn a_sorted_locking_read_keeps_its_snapshot_order() {
    let (_dir, db, mut a) = db_with(
        "CREATE TABLE jobs (id int PRIMARY KEY, prio int, state text); \
         INSERT INTO jobs VALUES (1, 5, 'new'), (2, 1, 'new'), (3, 9, 'new'), (4, 2, 'new')",
    );
    run(&mut a, "BEGIN");
    for read in [
        "SELECT id FROM jobs ORDER BY prio LIMIT 0 FOR UPDATE",
        "SELECT id FROM jobs ORDER BY id LIMIT 0 OFFSET 2 FOR UPDATE",
    ] {
        assert!(run(&mut a, read).is_empty(), "{read}");
    }
    let mut b = Session::new(db.clone());
    run(&mut b, "BEGIN");
    for id in 1..=4 {
        assert!(can_update_now(&mut b, id), "row {id}");
    }
    run(&mut b, "ROLLBACK");
    // a holds row 3 (the highest priority) and lowers it while b waits.
    run(&mut a, "SELECT id FROM jobs WHERE id = 3 FOR UPDATE");
    let waiter = waiting(
        b,
        "BEGIN; SELECT id, prio FROM jobs ORDER BY prio DESC LIMIT 2 OFFSET 1 FOR UPDATE",
    );
    run(&mut a, "UPDATE jobs SET prio = 0 WHERE id = 3; COMMIT");
    let (mut b, rows) = waiter.join().unwrap();
    // Snapshot order 3, 1, 4, 2: OFFSET 1 skips row 3 (now prio 0), then
    // rows 1 and 4, as they were ordered when chosen.
    assert_eq!(
        rows,
        vec![
            vec![Value::Int32(1), Value::Int32(5)],
            vec![Value::Int32(4), Value::Int32(2)]
        ]
    );
    run(&mut b, "COMMIT");
}
