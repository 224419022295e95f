//! Prepared statements through the API the wire protocol uses: parameter
//! types given or inferred, result descriptions before running, values
//! bound per execution.

use std::sync::Arc;

use quill::catalog::{ColumnType, Value};
use quill::{Db, Options};
use quill_sql::{Session, SqlState, TxnStatus};

fn session() -> (tempfile::TempDir, Session) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    let mut s = Session::new(db);
    for r in s.execute(
        "CREATE TABLE sbtest1(id SERIAL, k INTEGER DEFAULT '0' NOT NULL, \
         c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id)); \
         INSERT INTO sbtest1(k, c, pad) VALUES (10, 'c1', 'p1'), (20, 'c2', 'p2'), (30, 'c3', 'p3')",
    ) {
        r.unwrap();
    }
    (dir, s)
}

const TEXT: ColumnType = ColumnType::Text { max_len: 65_535 };

#[test]
fn sysbench_statements_with_client_types() {
    let (_d, mut s) = session();
    let p = s
        .prepare(
            "SELECT c FROM sbtest1 WHERE id=$1",
            &[Some(ColumnType::Int64)],
        )
        .unwrap();
    assert_eq!(p.param_types(), &[ColumnType::Int64]);
    let cols = p.columns().unwrap();
    assert_eq!(cols.len(), 1);
    assert_eq!(cols[0].name, "c");
    let out = s.execute_prepared(&p, &[Value::Int64(2)]).unwrap();
    assert_eq!(out.rows, vec![vec![Value::Text("c2".into())]]);
    assert_eq!(out.tag, "SELECT 1");

    let sum = s
        .prepare(
            "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN $1 AND $2",
            &[Some(ColumnType::Int64), Some(ColumnType::Int64)],
        )
        .unwrap();
    assert_eq!(sum.columns().unwrap()[0].ty, ColumnType::Int64);
    let out = s
        .execute_prepared(&sum, &[Value::Int64(1), Value::Int64(2)])
        .unwrap();
    assert_eq!(out.rows, vec![vec![Value::Int64(30)]]);

    let begin = s.prepare("BEGIN", &[]).unwrap();
    assert!(begin.columns().is_none());
    let upd = s
        .prepare(
            "UPDATE sbtest1 SET c=$1 WHERE id=$2",
            &[Some(TEXT), Some(ColumnType::Int64)],
        )
        .unwrap();
    assert!(upd.columns().is_none());
    let commit = s.prepare("COMMIT", &[]).unwrap();
    s.execute_prepared(&begin, &[]).unwrap();
    assert_eq!(s.status(), TxnStatus::InBlock);
    let out = s
        .execute_prepared(&upd, &[Value::Text("new".into()), Value::Int64(3)])
        .unwrap();
    assert_eq!(out.tag, "UPDATE 1");
    s.execute_prepared(&commit, &[]).unwrap();
    assert_eq!(s.status(), TxnStatus::Idle);
    let out = s.execute_prepared(&p, &[Value::Int64(3)]).unwrap();
    assert_eq!(out.rows, vec![vec![Value::Text("new".into())]]);

    let err = s.execute_prepared(&p, &[]).unwrap_err();
    assert_eq!(err.state, SqlState::PROTOCOL_VIOLATION);
}

#[test]
fn parameter_types_are_inferred_when_the_client_leaves_them_open() {
    let (_d, mut s) = session();
    let ins = s
        .prepare(
            "INSERT INTO sbtest1 (id, k, c, pad) VALUES ($1, $2, $3, $4)",
            &[],
        )
        .unwrap();
    assert_eq!(
        ins.param_types(),
        &[
            ColumnType::Int64,
            ColumnType::Int32,
            ColumnType::Text { max_len: 480 },
            ColumnType::Text { max_len: 240 },
        ]
    );
    s.execute_prepared(
        &ins,
        &[
            Value::Int64(7),
            Value::Int32(70),
            Value::Text("c7".into()),
            Value::Null,
        ],
    )
    .unwrap_err(); // pad is NOT NULL
    s.execute_prepared(
        &ins,
        &[
            Value::Int64(7),
            Value::Int32(70),
            Value::Text("c7".into()),
            Value::Text("p7".into()),
        ],
    )
    .unwrap();

    let q = s
        .prepare(
            "SELECT id, k + 1 AS k1 FROM sbtest1 WHERE k > $1 ORDER BY id LIMIT $2",
            &[None, None],
        )
        .unwrap();
    assert_eq!(q.param_types(), &[ColumnType::Int32, ColumnType::Int64]);
    let cols = q.columns().unwrap();
    assert_eq!(
        cols.iter()
            .map(|c| (c.name.as_str(), c.ty))
            .collect::<Vec<_>>(),
        vec![("id", ColumnType::Int64), ("k1", ColumnType::Int32)]
    );
    let out = s
        .execute_prepared(&q, &[Value::Int32(15), Value::Int64(2)])
        .unwrap();
    assert_eq!(
        out.rows,
        vec![
            vec![Value::Int64(2), Value::Int32(21)],
            vec![Value::Int64(3), Value::Int32(31)]
        ]
    );

    let upd = s
        .prepare("UPDATE sbtest1 SET k=k+$1 WHERE id=$2", &[])
        .unwrap();
    assert_eq!(upd.param_types(), &[ColumnType::Int32, ColumnType::Int64]);

    let del = s
        .prepare(
            "DELETE FROM sbtest1 WHERE id IN (SELECT id FROM sbtest1 WHERE id >= $1 ORDER BY id LIMIT $2)",
            &[],
        )
        .unwrap();
    assert_eq!(del.param_types(), &[ColumnType::Int64, ColumnType::Int64]);
    let out = s
        .execute_prepared(&del, &[Value::Int64(2), Value::Int64(2)])
        .unwrap();
    assert_eq!(out.tag, "DELETE 2");

    // A parameter nothing constrains is text.
    let p = s.prepare("SELECT $1", &[]).unwrap();
    assert_eq!(p.param_types(), &[TEXT]);
    let out = s.execute_prepared(&p, &[Value::Text("hi".into())]).unwrap();
    assert_eq!(out.rows, vec![vec![Value::Text("hi".into())]]);

    // Empty and several statements.
    assert!(s.prepare("", &[]).unwrap().is_empty());
    assert_eq!(
        s.prepare("SELECT 1; SELECT 2", &[]).unwrap_err().state,
        SqlState::SYNTAX_ERROR
    );
    // A prepared statement over a table that is gone fails cleanly.
    s.execute("DROP TABLE sbtest1").pop().unwrap().unwrap();
    let q2 = s.prepare("SELECT 1", &[]).unwrap();
    s.execute_prepared(&q2, &[]).unwrap();
    assert_eq!(
        s.execute_prepared(&q, &[Value::Int32(1), Value::Int64(1)])
            .unwrap_err()
            .state,
        SqlState::UNDEFINED_TABLE
    );
}

#[test]
fn show_quill_status_reports_the_engine_live() {
    let (_d, mut s) = session();
    let out = s.execute("SHOW quill.status").pop().unwrap().unwrap();
    assert_eq!(out.columns.len(), 2);
    let get = |name: &str| {
        out.rows
            .iter()
            .find(|r| r[0] == Value::Text(name.into()))
            .map(|r| r[1].clone())
    };
    assert!(get("log.syncs_per_commit").is_some());
    match get("store.log.commits_sync") {
        Some(Value::Text(n)) => assert!(n.parse::<u64>().unwrap() >= 1, "{n}"),
        other => panic!("no commit count: {other:?}"),
    }
    assert!(get("txn.active_transactions").is_some());
}

#[test]
fn deferred_executions_hand_over_their_commit() {
    let (_d, mut s) = session();
    let upd = s
        .prepare(
            "UPDATE sbtest1 SET k=k+1 WHERE id=$1",
            &[Some(ColumnType::Int64)],
        )
        .unwrap();
    let d = s
        .execute_prepared_deferred(&upd, &[Value::Int64(1)])
        .unwrap();
    assert_eq!(d.output.tag, "UPDATE 1");
    assert_eq!(s.status(), TxnStatus::Idle);
    d.commit
        .expect("an autocommit statement's commit")
        .commit()
        .unwrap();
    let sel = s
        .prepare("SELECT k FROM sbtest1 WHERE id=$1", &[None])
        .unwrap();
    let d = s
        .execute_prepared_deferred(&sel, &[Value::Int64(1)])
        .unwrap();
    assert_eq!(d.output.rows, vec![vec![Value::Int32(11)]]);
    // A read-only statement's transaction commits too (it is cheap: no
    // changes, no log).
    d.commit.unwrap().commit().unwrap();
    // Inside a block, only COMMIT hands one over.
    let mut out = s.execute_deferred("BEGIN");
    assert!(out.pop().unwrap().unwrap().commit.is_none());
    let d = s
        .execute_prepared_deferred(&upd, &[Value::Int64(2)])
        .unwrap();
    assert!(d.commit.is_none());
    assert_eq!(s.status(), TxnStatus::InBlock);
    let d = s.execute_deferred("COMMIT").pop().unwrap().unwrap();
    assert_eq!(d.output.tag, "COMMIT");
    d.commit.expect("COMMIT's transaction").commit().unwrap();
    let out = s
        .execute("SELECT k FROM sbtest1 WHERE id = 2")
        .pop()
        .unwrap()
        .unwrap();
    assert_eq!(out.rows, vec![vec![Value::Int32(21)]]);
    // Several statements in one text commit as they go.
    let outs = s.execute_deferred(
        "UPDATE sbtest1 SET k = 0 WHERE id = 3; SELECT k FROM sbtest1 WHERE id = 3",
    );
    assert_eq!(outs.len(), 2);
    for o in &outs {
        assert!(o.as_ref().unwrap().commit.is_none());
    }
    assert_eq!(
        outs[1].as_ref().unwrap().output.rows,
        vec![vec![Value::Int32(0)]]
    );
}

/// sysbench's queries run from a generic plan (planned once, bound per
/// execution) and give the same rows as planning each time; CREATE INDEX
/// makes the next execution plan again (and use the index); a plan kept
/// by a statement does not keep a dropped table's pages from being freed.
#[test]
fn generic_plans_follow_the_schema_and_do_not_hold_dropped_tables() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    let mut s = Session::new(db.clone());
    for r in s.execute(
        "CREATE TABLE sbtest1(id SERIAL, k INTEGER DEFAULT '0' NOT NULL, \
         c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id)); \
         INSERT INTO sbtest1(k, c, pad) VALUES (10, 'c1', 'p1'), (20, 'c2', 'p2'), (30, 'c3', 'p3')",
    ) {
        r.unwrap();
    }
    let queries = [
        ("SELECT c FROM sbtest1 WHERE id=$1", vec![Value::Int32(2)]),
        (
            "SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2",
            vec![Value::Int32(1), Value::Int32(2)],
        ),
        (
            "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN $1 AND $2",
            vec![Value::Int32(1), Value::Int32(3)],
        ),
        (
            "SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2 ORDER BY c",
            vec![Value::Int32(1), Value::Int32(3)],
        ),
        (
            "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN $1 AND $2 ORDER BY c",
            vec![Value::Int32(1), Value::Int32(3)],
        ),
        (
            "SELECT id FROM sbtest1 WHERE k = $1",
            vec![Value::Int32(20)],
        ),
        ("SELECT id FROM sbtest1 WHERE id = $1", vec![Value::Null]),
    ];
    let mut prepared = Vec::new();
    for (sql, params) in &queries {
        let p = s.prepare(sql, &[]).unwrap();
        let literal = sql
            .replace("$1", &params.first().map_or("NULL".into(), lit))
            .replace("$2", &params.get(1).map_or("NULL".into(), lit));
        let want = s.execute(&literal).pop().unwrap().unwrap().rows;
        for _ in 0..3 {
            assert_eq!(s.execute_prepared(&p, params).unwrap().rows, want, "{sql}");
        }
        assert!(p.has_generic_plan(), "{sql}");
        prepared.push(p);
    }
    // A subquery is read when the statement runs, so such a statement
    // keeps no generic plan (planned without a transaction, its subquery
    // would read as empty).
    let sub = s
        .prepare(
            "SELECT id FROM sbtest1 WHERE id IN (SELECT id FROM sbtest1 WHERE k >= $1)",
            &[],
        )
        .unwrap();
    for _ in 0..2 {
        let rows = s.execute_prepared(&sub, &[Value::Int32(20)]).unwrap().rows;
        assert_eq!(rows, vec![vec![Value::Int64(2)], vec![Value::Int64(3)]]);
    }
    assert!(!sub.has_generic_plan());
    // A cast of a parameter fails as it would planned with the value,
    // even when no row is read (review finding).
    let cast = s
        .prepare("SELECT c FROM sbtest1 WHERE id = 99 AND k = $1::int4", &[])
        .unwrap();
    for _ in 0..2 {
        let e = s
            .execute_prepared(&cast, &[Value::Text("abc".into())])
            .unwrap_err();
        assert_eq!(e.state.0, "22P02", "{e:?}");
    }
    // now() is read at each execution: no generic plan (review finding).
    let clock = s
        .prepare("SELECT now() FROM sbtest1 WHERE id = $1", &[])
        .unwrap();
    let first = s.execute_prepared(&clock, &[Value::Int32(1)]).unwrap().rows;
    std::thread::sleep(std::time::Duration::from_millis(5));
    let second = s.execute_prepared(&clock, &[Value::Int32(1)]).unwrap().rows;
    assert_ne!(first, second);
    assert!(!clock.has_generic_plan());
    // An index on k: the statement plans again and takes it.
    s.execute("CREATE INDEX k_1 ON sbtest1 (k)")
        .pop()
        .unwrap()
        .unwrap();
    let (sql, params) = &queries[5];
    assert_eq!(
        s.execute_prepared(&prepared[5], params).unwrap().rows,
        vec![vec![Value::Int64(2)]],
        "{sql}"
    );
    // The table goes; the statements stay. Its pages are freed.
    s.execute("DROP TABLE sbtest1").pop().unwrap().unwrap();
    db.purge_now().unwrap();
    assert_eq!(
        db.stats().pending_drops,
        0,
        "a kept plan held the dropped table"
    );
    let e = s.execute_prepared(&prepared[0], &queries[0].1).unwrap_err();
    assert_eq!(e.state.0, "42P01");
    drop(prepared);
}

fn lit(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Int32(i) => i.to_string(),
        other => panic!("{other:?}"),
    }
}

/// Whether `v` is a value of type `ty` (NULL is of every type).
fn of_type(v: &Value, ty: ColumnType) -> bool {
    matches!(
        (v, ty),
        (Value::Null, _)
            | (Value::Bool(_), ColumnType::Bool)
            | (Value::Int32(_), ColumnType::Int32)
            | (Value::Int64(_), ColumnType::Int64)
            | (Value::Float64(_), ColumnType::Float64)
            | (Value::Text(_), ColumnType::Text { .. })
            | (Value::Bytes(_), ColumnType::Bytes { .. })
            | (Value::Timestamp(_), ColumnType::Timestamp)
    )
}

/// A binary-format client decodes each value by the type the statement's
/// description gave its column, so the values an execution returns must
/// be of exactly those types, also where an output is computed from a
/// parameter (`k + $1`, `$1` alone, `coalesce($1, k)`): a description
/// that called `k + $1` bigint while the rows held 4-byte integers broke
/// such clients.
#[test]
fn results_have_the_described_types_with_parameters() {
    let (_d, mut s) = session();
    let int4 = Some(ColumnType::Int32);
    let int8 = Some(ColumnType::Int64);
    let float8 = Some(ColumnType::Float64);
    /// A statement, the parameter types the client gives, the values.
    type Case = (&'static str, Vec<Option<ColumnType>>, Vec<Value>);
    let cases: Vec<Case> = vec![
        (
            "SELECT k + $1 FROM sbtest1",
            vec![None],
            vec![Value::Int32(1)],
        ),
        (
            "SELECT k + $1 FROM sbtest1",
            vec![int4],
            vec![Value::Int32(1)],
        ),
        (
            "SELECT k + $1 FROM sbtest1",
            vec![int8],
            vec![Value::Int64(1)],
        ),
        (
            "SELECT k * $1 FROM sbtest1",
            vec![float8],
            vec![Value::Float64(0.5)],
        ),
        ("SELECT $1 FROM sbtest1", vec![int4], vec![Value::Int32(7)]),
        (
            "SELECT $1 FROM sbtest1",
            vec![None],
            vec![Value::Text("x".into())],
        ),
        (
            "SELECT $1 + 1 FROM sbtest1",
            vec![None],
            vec![Value::Int32(2)],
        ),
        (
            "SELECT k FROM sbtest1 WHERE k > $1 + 1",
            vec![None],
            vec![Value::Int32(2)],
        ),
        (
            "SELECT $1, k FROM sbtest1",
            vec![int8],
            vec![Value::Int64(7)],
        ),
        ("SELECT -$1 FROM sbtest1", vec![int8], vec![Value::Int64(7)]),
        (
            "SELECT coalesce($1, k) FROM sbtest1",
            vec![int4],
            vec![Value::Null],
        ),
        (
            "SELECT k, sum(k + $1) FROM sbtest1 GROUP BY k",
            vec![int4],
            vec![Value::Int32(1)],
        ),
        (
            "SELECT k + $1 FROM sbtest1 GROUP BY k + $1",
            vec![int8],
            vec![Value::Int64(1)],
        ),
        (
            "UPDATE sbtest1 SET k = k + 1 WHERE id = $1 RETURNING k + $2",
            vec![int8, int8],
            vec![Value::Int64(1), Value::Int64(5)],
        ),
        (
            "INSERT INTO sbtest1(k) VALUES ($1) RETURNING id, k * $2",
            vec![int4, int8],
            vec![Value::Int32(4), Value::Int64(3)],
        ),
    ];
    for (sql, given, values) in cases {
        let p = s.prepare(sql, &given).unwrap();
        // The values are of the parameters' types, given or inferred.
        for (v, ty) in values.iter().zip(p.param_types()) {
            assert!(of_type(v, *ty), "{sql}: ${ty:?} inferred, test gives {v:?}");
        }
        let cols = p.columns().unwrap();
        // Twice: the second execution may run a kept plan.
        for _ in 0..2 {
            let out = s.execute_prepared(&p, &values).unwrap();
            assert!(!out.rows.is_empty(), "{sql}: no rows");
            for row in &out.rows {
                assert_eq!(row.len(), cols.len(), "{sql}");
                for (v, c) in row.iter().zip(cols) {
                    assert!(
                        of_type(v, c.ty),
                        "{sql} with {given:?}: column {} described as {:?} returned {v:?}",
                        c.name,
                        c.ty
                    );
                }
            }
        }
    }
}

/// A prepared INSERT is planned once (sysbench's oltp_insert): each
/// execution binds its values into the kept plan, with DEFAULT, several
/// rows, columns in any order, and every check a planned INSERT makes
/// (type, length, NOT NULL, unique key); a changed table is planned again.
#[test]
fn prepared_inserts_keep_a_generic_plan() {
    let (_d, mut s) = session();
    let ins = s
        .prepare(
            "INSERT INTO sbtest1 (pad, id, k, c) VALUES ($1, $2, $3, $4)",
            &[],
        )
        .unwrap();
    assert_eq!(
        ins.param_types(),
        &[
            // Lengths in bytes (four per character); SERIAL is stored as
            // a bigint.
            ColumnType::Text { max_len: 240 },
            ColumnType::Int64,
            ColumnType::Int32,
            ColumnType::Text { max_len: 480 }
        ]
    );
    let text = |s: &str| Value::Text(s.into());
    for id in 10..13 {
        let out = s
            .execute_prepared(
                &ins,
                &[
                    text("p"),
                    Value::Int64(id),
                    Value::Int32(id as i32 * 2),
                    text("c"),
                ],
            )
            .unwrap();
        assert_eq!(out.tag, "INSERT 0 1");
    }
    assert!(ins.has_generic_plan());
    let rows = s
        .execute("SELECT id, k, c, pad FROM sbtest1 WHERE id >= 10 ORDER BY id")
        .pop()
        .unwrap()
        .unwrap()
        .rows;
    assert_eq!(rows.len(), 3);
    assert_eq!(
        rows[2],
        vec![Value::Int64(12), Value::Int32(24), text("c"), text("p")]
    );

    // The checks of a planned INSERT, at each execution.
    let state = |s: &mut Session, p: &quill_sql::Prepared, v: &[Value]| {
        s.execute_prepared(p, v).unwrap_err().state
    };
    let v = [text("p"), Value::Int64(10), Value::Int32(1), text("c")];
    assert_eq!(state(&mut s, &ins, &v), SqlState::UNIQUE_VIOLATION);
    let v = [text("p"), Value::Int64(20), Value::Null, text("c")];
    assert_eq!(state(&mut s, &ins, &v), SqlState::NOT_NULL_VIOLATION);
    let v = [
        text("p"),
        Value::Int64(20),
        Value::Int32(1),
        text(&"x".repeat(121)),
    ];
    assert_eq!(
        state(&mut s, &ins, &v),
        SqlState::STRING_DATA_RIGHT_TRUNCATION
    );

    // DEFAULT, several rows, a cast of a parameter.
    let many = s
        .prepare(
            "INSERT INTO sbtest1 (id, k, c) VALUES ($1, DEFAULT, $2), ($3::int + 1, $4, DEFAULT)",
            &[],
        )
        .unwrap();
    for base in [30, 40] {
        let out = s
            .execute_prepared(
                &many,
                &[
                    Value::Int64(base),
                    text("m"),
                    Value::Int32(base as i32),
                    Value::Int32(7),
                ],
            )
            .unwrap();
        assert_eq!(out.tag, "INSERT 0 2");
    }
    assert!(many.has_generic_plan());
    let rows = s
        .execute("SELECT id, k, c FROM sbtest1 WHERE id >= 30 ORDER BY id")
        .pop()
        .unwrap()
        .unwrap()
        .rows;
    assert_eq!(
        rows,
        vec![
            vec![Value::Int64(30), Value::Int32(0), text("m")],
            vec![Value::Int64(31), Value::Int32(7), text("")],
            vec![Value::Int64(40), Value::Int32(0), text("m")],
            vec![Value::Int64(41), Value::Int32(7), text("")],
        ]
    );

    // The table dropped and made again with another column order: the
    // kept plan is for the old table, so the next execution plans anew.
    for r in s.execute(
        "DROP TABLE sbtest1; CREATE TABLE sbtest1 (c CHAR(120), pad CHAR(60), \
         k INTEGER DEFAULT '0' NOT NULL, id INTEGER PRIMARY KEY)",
    ) {
        r.unwrap();
    }
    s.execute_prepared(
        &ins,
        &[text("p2"), Value::Int64(1), Value::Int32(5), text("c2")],
    )
    .unwrap();
    let rows = s
        .execute("SELECT id, k, c, pad FROM sbtest1")
        .pop()
        .unwrap()
        .unwrap()
        .rows;
    assert_eq!(
        rows,
        vec![vec![
            Value::Int32(1),
            Value::Int32(5),
            text("c2"),
            text("p2")
        ]]
    );
}

/// Inference follows the operator: arithmetic and comparison give a
/// parameter the other side's type (a number's too, with no FROM), AND,
/// OR and NOT make it boolean, `||` implies nothing (text).
#[test]
fn parameter_types_follow_the_operator() {
    let (_d, mut s) = session();
    let types = |s: &mut Session, sql: &str| s.prepare(sql, &[]).unwrap().param_types().to_vec();
    assert_eq!(types(&mut s, "SELECT $1 + 1"), vec![ColumnType::Int32]);
    assert_eq!(types(&mut s, "SELECT $1 || 1 FROM sbtest1")[0], TEXT_PARAM);
    assert_eq!(
        types(&mut s, "SELECT id FROM sbtest1 WHERE $1 OR k > $2"),
        vec![ColumnType::Bool, ColumnType::Int32]
    );
    assert_eq!(
        types(&mut s, "SELECT id FROM sbtest1 WHERE NOT $1"),
        vec![ColumnType::Bool]
    );
    let p = s.prepare("SELECT $1 + 1", &[]).unwrap();
    let out = s.execute_prepared(&p, &[Value::Int32(41)]).unwrap();
    assert_eq!(out.rows, vec![vec![Value::Int32(42)]]);
    assert_eq!(p.columns().unwrap()[0].ty, ColumnType::Int32);
}

/// The type of a parameter left as text.
const TEXT_PARAM: ColumnType = ColumnType::Text {
    max_len: quill_sql::types::MAX_VARLEN,
};

/// The statements a server may run without handing its thread off:
/// BEGIN, and COMMIT of a block that has not failed (its commit is
/// deferred); never a failed block's COMMIT (a rollback), a second
/// statement in the text, or anything that reads or writes.
#[test]
fn only_begin_and_a_good_commit_never_wait() {
    let (_d, mut s) = session();
    for text in [
        "BEGIN",
        "begin;",
        "  Begin Transaction ; ",
        "START TRANSACTION",
        "BEGIN WORK",
        "COMMIT",
        "commit work",
        "END",
        "end transaction;",
    ] {
        assert!(s.text_never_waits(text), "{text}");
    }
    for text in [
        "BEGIN; UPDATE sbtest1 SET k = 1",
        "COMMIT; COMMIT",
        "ROLLBACK",
        "BEGIN ISOLATION LEVEL REPEATABLE READ",
        "/* c */ BEGIN",
        "SELECT 1",
        "COMMIT AND CHAIN",
        "",
        "BEGINX",
        "START",
    ] {
        assert!(!s.text_never_waits(text), "{text}");
    }
    let begin = s.prepare("BEGIN", &[]).unwrap();
    let commit = s.prepare("COMMIT", &[]).unwrap();
    let update = s
        .prepare("UPDATE sbtest1 SET k = k + 1 WHERE id = 1", &[])
        .unwrap();
    let rollback = s.prepare("ROLLBACK", &[]).unwrap();
    assert!(s.never_waits(&begin));
    assert!(!s.never_waits(&update));
    assert!(!s.never_waits(&rollback));
    // A failed block's COMMIT rolls back: it may wait.
    s.execute_prepared(&begin, &[]).unwrap();
    assert!(s.never_waits(&commit));
    s.execute("SELECT * FROM nowhere")
        .pop()
        .unwrap()
        .unwrap_err();
    assert!(!s.never_waits(&commit));
    assert!(!s.text_never_waits("COMMIT"));
    let out = s.execute_prepared(&commit, &[]).unwrap();
    assert_eq!(out.tag, "ROLLBACK");
    assert!(s.never_waits(&commit));
    // Run inline, BEGIN and COMMIT still give their results.
    let d = s.execute_deferred("BEGIN");
    assert_eq!(d.len(), 1);
    s.execute_prepared(&update, &[]).unwrap();
    let mut d = s.execute_deferred("COMMIT");
    let d = d.pop().unwrap().unwrap();
    assert_eq!(d.output.tag, "COMMIT");
    d.commit.expect("deferred commit").commit().unwrap();
}
