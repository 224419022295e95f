//! No SQL text panics the SQL layer or leaves a session unusable: random
//! strings and random sequences of SQL-like tokens against a table with
//! rows end in a result or an error, and the session still answers a
//! query afterwards. (Failures print proptest's seed, so a run replays.)

mod common;

use std::cell::RefCell;
use std::sync::Arc;

use proptest::prelude::*;
use quill::Db;
use quill_sql::Session;

/// One database for all cases of a test (opening one per case costs most
/// of the run); each case starts from the same table, recreated if a case
/// dropped or emptied it. Per test thread, so the directory is removed
/// when the test ends (a `static` is never dropped).
fn with_session(f: impl FnOnce(&mut Session)) {
    thread_local! {
        static SESSION: RefCell<Option<(Session, tempfile::TempDir)>> = const { RefCell::new(None) };
    }
    SESSION.with(|cell| {
        let mut g = cell.borrow_mut();
        let (s, _) = g.get_or_insert_with(|| {
            let dir = tempfile::tempdir().unwrap();
            let db = Arc::new(Db::open(dir.path(), quill::Options::default()).unwrap());
            (Session::new(db), dir)
        });
        with_table(s, f)
    })
}

fn with_table(s: &mut Session, f: impl FnOnce(&mut Session)) {
    common::setup(
        s,
        "DROP TABLE IF EXISTS t, u;
         CREATE TABLE t (k int PRIMARY KEY, v varchar(8), n bigint, b boolean, ts timestamp);
         INSERT INTO t VALUES (1, 'a', 10, true, '2020-01-01'), (2, NULL, NULL, NULL, NULL)",
    );
    f(s);
}

const TOKENS: &[&str] = &[
    "SELECT",
    "INSERT",
    "INTO",
    "UPDATE",
    "DELETE",
    "FROM",
    "WHERE",
    "SET",
    "VALUES",
    "t",
    "k",
    "v",
    "n",
    "b",
    "ts",
    "*",
    "(",
    ")",
    ",",
    "=",
    "<",
    ">=",
    "+",
    "-",
    "/",
    "%",
    "AND",
    "OR",
    "NOT",
    "IS",
    "NULL",
    "IN",
    "BETWEEN",
    "ORDER",
    "BY",
    "LIMIT",
    "OFFSET",
    "DESC",
    "1",
    "0",
    "-9223372036854775808",
    "2147483648",
    "1e308",
    "'x'",
    "'2020-02-30'",
    "true",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    ";",
    "CREATE",
    "TABLE",
    "INDEX",
    "ON",
    "DROP",
    "u",
    "int",
    "text",
    "PRIMARY",
    "KEY",
    "UNIQUE",
    "$1",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let mut ok = false;
        with_session(|s| {
            let _ = s.execute(&text);
            let _ = s.execute("ROLLBACK");
            ok = s.execute("SELECT 1").iter().all(|r| r.is_ok());
        });
        prop_assert!(ok);
    }

    #[test]
    fn token_soup_never_panics(words in proptest::collection::vec(proptest::sample::select(TOKENS), 1..30)) {
        let mut ok = false;
        with_session(|s| {
            let _ = s.execute(&words.join(" "));
            let _ = s.execute("ROLLBACK");
            ok = s.execute("SELECT 1").iter().all(|r| r.is_ok());
        });
        prop_assert!(ok);
    }
}
