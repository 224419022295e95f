//! Statements attempted with waits refused (`Session::try_execute_*`, the
//! server's event-loop path): a statement that meets a held row lock is
//! undone and leaves the session as it was (NA.1), so running it again
//! where it may wait applies it exactly once.

use std::sync::Arc;

use quill::catalog::Value;
use quill::{Db, Options};
use quill_sql::{Deferred, Output, Parsed, Session, SqlResult, TxnStatus};

fn db() -> (tempfile::TempDir, Arc<Db>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    let mut s = Session::new(Arc::clone(&db));
    for r in s.execute(
        "CREATE TABLE t(id INT PRIMARY KEY, v INT NOT NULL); \
         INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)",
    ) {
        r.unwrap();
    }
    (dir, db)
}

fn ok(r: Option<SqlResult<Deferred>>) -> Output {
    let d = r.expect("attempted").unwrap();
    if let Some(tx) = d.commit {
        tx.commit().unwrap();
    }
    d.output
}

/// A session holding row 2's lock in an open block.
fn holder_of_row_2(db: &Arc<Db>) -> Session {
    let mut holder = Session::new(Arc::clone(db));
    for sql in ["BEGIN", "UPDATE t SET v = 200 WHERE id = 2"] {
        holder.execute(sql).remove(0).unwrap();
    }
    holder
}

/// Runs the statement on a thread that may wait: the parsed text a
/// refused attempt hands back, exactly as the server does.
fn rerun(s: &mut Session, parsed: Parsed) -> Deferred {
    s.execute_parsed_deferred(parsed).remove(0).unwrap()
}

fn values(s: &mut Session) -> Vec<Value> {
    let out = s.execute("SELECT v FROM t ORDER BY id").remove(0).unwrap();
    out.rows.into_iter().map(|mut r| r.remove(0)).collect()
}

fn ints(v: &[i32]) -> Vec<Value> {
    v.iter().map(|&x| Value::Int32(x)).collect()
}

#[test]
fn a_free_statement_runs_in_its_attempt() {
    let (_d, db) = db();
    let mut s = Session::new(db);
    let out = ok(s
        .try_execute_deferred("UPDATE t SET v = v + 1 WHERE id = 1")
        .ok());
    assert_eq!(out.tag, "UPDATE 1");
    let p = s.prepare("SELECT v FROM t WHERE id = $1", &[None]).unwrap();
    let out = ok(s.try_execute_prepared_deferred(&p, &[Value::Int32(1)]));
    assert_eq!(out.rows, vec![ints(&[11])]);
    assert_eq!(values(&mut s), ints(&[11, 20, 30]));
}

#[test]
fn a_statement_that_meets_a_lock_is_undone_and_runs_once_after() {
    let (_d, db) = db();
    let mut holder = holder_of_row_2(&db);
    let mut s = Session::new(Arc::clone(&db));

    // In a block: an earlier statement's change stays, the attempted one
    // (row 1 changed, then row 2 locked) is undone, the block is intact.
    s.execute("BEGIN").remove(0).unwrap();
    s.execute("UPDATE t SET v = v + 3 WHERE id = 3")
        .remove(0)
        .unwrap();
    let both = "UPDATE t SET v = v + 1 WHERE id IN (1, 2)";
    let parsed = s.try_execute_deferred(both).expect_err("refused");
    assert_eq!(s.status(), TxnStatus::InBlock, "not failed");
    let p = s.prepare(both, &[]).unwrap();
    assert!(s.try_execute_prepared_deferred(&p, &[]).is_none());
    assert_eq!(s.status(), TxnStatus::InBlock);

    // Autocommit: the attempt's own transaction is rolled back whole.
    let mut auto = Session::new(Arc::clone(&db));
    let auto_parsed = auto.try_execute_deferred(both).expect_err("refused");
    assert_eq!(auto.status(), TxnStatus::Idle);

    holder.execute("COMMIT").remove(0).unwrap();
    // Run again where waiting is allowed: applied exactly once.
    assert_eq!(rerun(&mut s, parsed).output.tag, "UPDATE 2");
    s.execute("COMMIT").remove(0).unwrap();
    assert_eq!(values(&mut s), ints(&[11, 201, 33]));
    let r = rerun(&mut auto, auto_parsed);
    r.commit.unwrap().commit().unwrap();
    assert_eq!(values(&mut s), ints(&[12, 202, 33]));
}

#[test]
fn only_plain_statements_of_a_healthy_session_are_attempted() {
    let (_d, db) = db();
    let mut s = Session::new(Arc::clone(&db));
    let many: Vec<String> = (10..=10 + quill_sql::MAX_ATTEMPTED_INSERT_ROWS)
        .map(|k| format!("({k}, 0)"))
        .collect();
    let many = format!("INSERT INTO t VALUES {}", many.join(", "));
    assert!(s.try_execute_deferred(&many).is_err(), "a large INSERT");
    let few = ok(s
        .try_execute_deferred("INSERT INTO t VALUES (4, 40), (5, 50)")
        .ok());
    assert_eq!(few.tag, "INSERT 0 2");
    for text in [
        "CREATE TABLE u(a INT PRIMARY KEY)",
        "BEGIN",
        "COMMIT",
        "ROLLBACK",
        "SET quill.durability = 'lazy'",
        "CHECKPOINT",
        "SELECT 1; SELECT 2",
    ] {
        assert!(s.try_execute_deferred(text).is_err(), "{text}");
    }
    assert!(
        s.execute("SELECT * FROM u").remove(0).is_err(),
        "CREATE TABLE did not run"
    );
    // A failed block refuses every statement but ROLLBACK; not attempted.
    s.execute("BEGIN").remove(0).unwrap();
    assert!(s.execute("SELECT nope FROM t").remove(0).is_err());
    assert!(s.try_execute_deferred("SELECT 1").is_err());
    assert_eq!(s.status(), TxnStatus::Failed);
    // A syntax error is the attempt's answer (nothing can wait).
    let mut fresh = Session::new(db);
    assert!(matches!(fresh.try_execute_deferred("SELEC 1"), Ok(Err(_))));
}

#[test]
fn a_cancel_during_a_refused_attempt_stops_the_rerun() {
    let (_d, db) = db();
    let mut holder = holder_of_row_2(&db);
    let mut s = Session::new(Arc::clone(&db));
    let both = "UPDATE t SET v = v + 1 WHERE id IN (1, 2)";
    let parsed = s.try_execute_deferred(both).expect_err("refused");
    // The client's CancelRequest lands between the attempt and the rerun:
    // the rerun stops at the lock instead of waiting out its timeout.
    s.cancel_handle().cancel();
    let started = std::time::Instant::now();
    let Err(err) = s.execute_parsed_deferred(parsed).remove(0) else {
        panic!("the rerun was not canceled");
    };
    assert_eq!(err.state, quill_sql::SqlState::QUERY_CANCELED, "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    holder.execute("ROLLBACK").remove(0).unwrap();
    // The next statement starts with the flag cleared.
    let out = s.execute_deferred(both).remove(0).unwrap();
    assert_eq!(out.output.tag, "UPDATE 2");
}

/// A Parse (prepare) of a statement on a table that a plain CREATE INDEX
/// holds for its build is refused on the thread that must not block,
/// never waited for there; once the build is done it prepares.
#[test]
fn preparing_on_a_table_under_ddl_is_refused_not_waited_for() {
    let (_d, db) = db();
    let mut s = Session::new(Arc::clone(&db));
    s.execute("CREATE TABLE big(id INT PRIMARY KEY, v INT NOT NULL)")
        .remove(0)
        .unwrap();
    // Enough rows that the build takes far longer than one attempt.
    for chunk in 0..40 {
        let rows: Vec<String> = (0..5000)
            .map(|i| {
                let id = chunk * 5000 + i;
                format!("({id}, {})", id % 977)
            })
            .collect();
        s.execute(&format!("INSERT INTO big VALUES {}", rows.join(",")))
            .remove(0)
            .unwrap();
    }
    let sql = "UPDATE big SET v = $1 WHERE id = $2";
    let ddl = std::thread::spawn({
        let db = Arc::clone(&db);
        move || {
            let mut s = Session::new(db);
            s.execute("CREATE INDEX big_v ON big (v)")
                .remove(0)
                .unwrap();
        }
    });
    let mut refused = 0;
    let mut prepared = 0;
    while !ddl.is_finished() {
        match s.try_prepare(sql, &[]) {
            None => refused += 1,
            Some(r) => {
                r.unwrap();
                prepared += 1;
            }
        }
    }
    ddl.join().unwrap();
    // Before the build took the table, and after, it prepares; while the
    // build held it, every attempt came back refused at once (a waiting
    // prepare would have returned only after the build).
    assert!(
        refused > 0,
        "never refused ({prepared} prepared during the build)"
    );
    let p = s.try_prepare(sql, &[]).expect("not refused").unwrap();
    assert_eq!(p.param_types().len(), 2);
}

/// A one-row INSERT into a `bigserial` table refused after it drew its
/// key (its pages are on disk) draws the same key when it runs again:
/// a fresh server's first `RETURNING id` is 1, not 2 (engine wait W5).
#[test]
fn a_refused_insert_returns_the_key_its_attempt_drew() {
    let (_d, db) = db();
    let mut s = Session::new(Arc::clone(&db));
    s.execute("CREATE TABLE b(id BIGSERIAL PRIMARY KEY, v INT)")
        .remove(0)
        .unwrap();
    let insert = "INSERT INTO b (v) VALUES (1) RETURNING id";
    for want in [1, 2] {
        db.store().flush_all().unwrap();
        let pool = db.store().pool();
        assert!(
            (1..1_000)
                .filter(|&p| pool.evict(quill::page::PageId(p)))
                .count()
                > 0
        );
        // The table's one page back in the pool, as on a fresh server: the
        // insert loads its key counter from it and draws, then meets a
        // page it must read.
        s.execute("SELECT count(*) FROM b").remove(0).unwrap();
        let parsed = s.try_execute_deferred(insert).expect_err("refused");
        let out = rerun(&mut s, parsed);
        out.commit.unwrap().commit().unwrap();
        assert_eq!(out.output.rows, vec![vec![Value::Int64(want)]]);
    }
}
