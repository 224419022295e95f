//! COPY FROM STDIN and TO STDOUT through a session: text and CSV, column
//! lists and defaults, errors with line numbers, all or nothing, blocks,
//! CopyFail, and a round trip between two tables.

use std::sync::Arc;

use quill::catalog::Value;
use quill::{Db, Options};
use quill_sql::{CopyStream, Output, Session, SqlState, TxnStatus};

fn session() -> (tempfile::TempDir, Session) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    let mut s = Session::new(db);
    for r in s.execute(
        "CREATE TABLE t (id bigserial PRIMARY KEY, name varchar(20) NOT NULL, score int, note text DEFAULT 'none')",
    ) {
        r.unwrap();
    }
    (dir, s)
}

fn one(s: &mut Session, sql: &str) -> Output {
    s.execute(sql).pop().unwrap().unwrap()
}

fn rows(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    one(s, sql).rows
}

fn text(x: &str) -> Value {
    Value::Text(x.into())
}

fn copy_in(s: &mut Session, sql: &str, chunks: &[&[u8]]) -> Result<Output, quill_sql::SqlError> {
    let out = one(s, sql);
    assert!(matches!(out.copy, Some(CopyStream::In { .. })), "{out:?}");
    for c in chunks {
        s.copy_data(c).unwrap();
    }
    s.copy_done()
}

#[test]
fn text_and_csv_in_with_column_lists_and_defaults() {
    let (_d, mut s) = session();
    let out = one(&mut s, "COPY t (name, score) FROM STDIN");
    assert_eq!(out.copy, Some(CopyStream::In { columns: 2 }));
    s.copy_data(b"ann\t10\nbo").unwrap();
    s.copy_data(b"b\t\\N\ncarl\\twith tab\t3\n").unwrap();
    assert_eq!(s.copy_done().unwrap().tag, "COPY 3");
    let out = copy_in(
        &mut s,
        "COPY t (name, score, note) FROM STDIN WITH (FORMAT csv, HEADER true)",
        &[b"name,score,note\n\"dee, \"\"d\"\"\",4,\"two\nlines\"\r\neve,,\n"],
    )
    .unwrap();
    assert_eq!(out.tag, "COPY 2");
    assert_eq!(
        rows(&mut s, "SELECT id, name, score, note FROM t ORDER BY id"),
        vec![
            vec![Value::Int64(1), text("ann"), Value::Int32(10), text("none")],
            vec![Value::Int64(2), text("bob"), Value::Null, text("none")],
            vec![
                Value::Int64(3),
                text("carl\twith tab"),
                Value::Int32(3),
                text("none")
            ],
            vec![
                Value::Int64(4),
                text("dee, \"d\""),
                Value::Int32(4),
                text("two\nlines")
            ],
            vec![Value::Int64(5), text("eve"), Value::Null, Value::Null],
        ]
    );
}

#[test]
fn bad_data_fails_the_whole_copy_with_its_line() {
    let (_d, mut s) = session();
    let e = copy_in(
        &mut s,
        "COPY t (name, score) FROM STDIN",
        &[b"a\t1\nb\t2\nc\tlots\nd\t4\n"],
    )
    .unwrap_err();
    assert_eq!(e.state, SqlState::INVALID_TEXT_REPRESENTATION, "{e:?}");
    assert!(e.message.contains("line 3"), "{}", e.message);
    let e = copy_in(&mut s, "COPY t (name, score) FROM STDIN", &[b"a\t1\t9\n"]).unwrap_err();
    assert_eq!(e.state, SqlState::BAD_COPY_FILE_FORMAT);
    assert!(e.message.contains("extra data"), "{}", e.message);
    let e = copy_in(&mut s, "COPY t (name, score) FROM STDIN", &[b"a\n"]).unwrap_err();
    assert!(
        e.message.contains("missing data for column \"score\""),
        "{}",
        e.message
    );
    let e = copy_in(&mut s, "COPY t (name, score) FROM STDIN", &[b"\\N\t1\n"]).unwrap_err();
    assert_eq!(e.state, SqlState::NOT_NULL_VIOLATION);
    let e = copy_in(
        &mut s,
        "COPY t (name) FROM STDIN",
        &[b"a name longer than twenty characters\n"],
    )
    .unwrap_err();
    assert_eq!(e.state.0, "22001");
    // All or nothing: none of the good lines before an error stayed.
    assert!(rows(&mut s, "SELECT * FROM t").is_empty());
    assert_eq!(s.status(), TxnStatus::Idle);
}

#[test]
fn copy_in_a_block_and_copy_fail() {
    let (_d, mut s) = session();
    one(&mut s, "BEGIN");
    copy_in(&mut s, "COPY t (name) FROM STDIN", &[b"x\ny\n"]).unwrap();
    assert_eq!(
        rows(&mut s, "SELECT count(*) FROM t"),
        vec![vec![Value::Int64(2)]]
    );
    one(&mut s, "ROLLBACK");
    assert_eq!(
        rows(&mut s, "SELECT count(*) FROM t"),
        vec![vec![Value::Int64(0)]]
    );
    // An error inside a block fails the block.
    one(&mut s, "BEGIN");
    copy_in(&mut s, "COPY t (name, score) FROM STDIN", &[b"x\tnope\n"]).unwrap_err();
    assert_eq!(s.status(), TxnStatus::Failed);
    one(&mut s, "ROLLBACK");
    // CopyFail: the client gave up.
    one(&mut s, "COPY t (name) FROM STDIN");
    s.copy_data(b"p\nq\n").unwrap();
    assert_eq!(s.status(), TxnStatus::InBlock);
    let e = s.copy_fail("user hit ^C");
    assert_eq!(e.state, SqlState::QUERY_CANCELED);
    assert!(e.message.contains("user hit ^C"));
    assert_eq!(s.status(), TxnStatus::Idle);
    assert_eq!(
        rows(&mut s, "SELECT count(*) FROM t"),
        vec![vec![Value::Int64(0)]]
    );
}

#[test]
fn copy_out_and_back_round_trips() {
    let (_d, mut s) = session();
    copy_in(
        &mut s,
        "COPY t (name, score, note) FROM STDIN",
        &[b"a\t1\tback\\\\slash\nb\t\\N\ttab\\there\nc\t3\t\\N\n"],
    )
    .unwrap();
    for (format, header) in [("text", false), ("csv", true)] {
        let opts = if header {
            format!("(FORMAT {format}, HEADER)")
        } else {
            format!("(FORMAT {format})")
        };
        let out = one(&mut s, &format!("COPY t TO STDOUT WITH {opts}"));
        assert_eq!(out.tag, "COPY 3");
        let Some(CopyStream::Out { columns, lines }) = out.copy else {
            panic!("{out:?}")
        };
        assert_eq!((columns, lines.len()), (4, 3));
        let data: Vec<u8> = lines.concat();
        let name = format!("u_{format}");
        one(
            &mut s,
            &format!(
                "CREATE TABLE {name} (id bigint PRIMARY KEY, name varchar(20) NOT NULL, score int, note text)"
            ),
        );
        copy_in(
            &mut s,
            &format!("COPY {name} FROM STDIN WITH {opts}"),
            &[&data],
        )
        .unwrap();
        assert_eq!(
            rows(&mut s, &format!("SELECT * FROM {name} ORDER BY id")),
            rows(&mut s, "SELECT * FROM t ORDER BY id")
        );
    }
    let out = one(
        &mut s,
        "COPY (SELECT name FROM t WHERE score > 1) TO STDOUT",
    );
    assert_eq!(
        out.copy,
        Some(CopyStream::Out {
            columns: 1,
            lines: vec![b"c\n".to_vec()]
        })
    );
}

#[test]
fn files_programs_and_binary_are_refused() {
    let (_d, mut s) = session();
    for sql in [
        "COPY t FROM '/etc/passwd'",
        "COPY t TO '/tmp/x'",
        "COPY t FROM PROGRAM 'ls'",
        "COPY t FROM STDOUT",
    ] {
        let e = s.execute(sql).pop().unwrap().unwrap_err();
        assert_eq!(e.state.0, "42501", "{sql}: {e:?}");
    }
    let e = s
        .execute("COPY t FROM STDIN WITH (FORMAT binary)")
        .pop()
        .unwrap()
        .unwrap_err();
    assert_eq!(e.state, SqlState::FEATURE_NOT_SUPPORTED);
    let e = s
        .execute("COPY nosuch FROM STDIN")
        .pop()
        .unwrap()
        .unwrap_err();
    assert_eq!(e.state.0, "42P01");
}

#[test]
fn data_inline_after_the_statement() {
    let (_d, mut s) = session();
    let out = s
        .execute("COPY t (name, score) FROM stdin;\nx\t1\ny\t2\n\\.\n")
        .pop()
        .unwrap()
        .unwrap();
    assert_eq!(out.tag, "COPY 2");
    assert_eq!(
        rows(&mut s, "SELECT count(*) FROM t"),
        vec![vec![Value::Int64(2)]]
    );
}

/// COPY FROM STDIN's data comes after its statement: a copy still taking
/// data when its `statement_timeout` runs out stops with 57014 and
/// inserts nothing, and the next statement gets a timeout of its own.
#[test]
fn a_copy_past_its_statement_timeout_stops() {
    let (_d, mut s) = session();
    one(&mut s, "SET statement_timeout = 100");
    let out = one(&mut s, "COPY t (name) FROM STDIN");
    assert!(matches!(out.copy, Some(CopyStream::In { .. })));
    s.copy_data(b"early\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    s.copy_data(b"late\n").unwrap();
    let e = s.copy_done().unwrap_err();
    assert_eq!(e.state, SqlState::QUERY_CANCELED);
    assert!(e.message.contains("statement timeout"), "{e:?}");
    assert_eq!(s.status(), TxnStatus::Idle);
    assert!(rows(&mut s, "SELECT name FROM t").is_empty());
    let out = copy_in(&mut s, "COPY t (name) FROM STDIN", &[b"in time\n"]).unwrap();
    assert_eq!(out.tag, "COPY 1");
}
