//! SHOW ALL lists every setting SHOW answers, the running transaction's
//! own (`transaction_isolation`, `transaction_read_only`) among them, in
//! name order, as PostgreSQL's does.

use std::sync::Arc;

use quill::catalog::Value;
use quill::{Db, Options};
use quill_sql::Session;

/// `SHOW ALL` as (name, setting) pairs, after `setup`.
fn show_all(s: &mut Session, setup: &str) -> Vec<(String, String)> {
    let out = s
        .execute(&format!("{setup}; SHOW ALL"))
        .pop()
        .unwrap()
        .unwrap();
    out.rows
        .into_iter()
        .map(|r| match r.as_slice() {
            [Value::Text(k), Value::Text(v)] => (k.clone(), v.clone()),
            other => panic!("a SHOW ALL row {other:?}"),
        })
        .collect()
}

#[test]
fn show_all_lists_the_transactions_own_settings() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    let mut s = Session::new(db);
    let setting = |all: &[(String, String)], name: &str| {
        all.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{name} missing from SHOW ALL"))
    };
    let all = show_all(&mut s, "SET lock_timeout = '1s'");
    assert_eq!(setting(&all, "transaction_isolation"), "read committed");
    assert_eq!(setting(&all, "transaction_read_only"), "off");
    assert_eq!(setting(&all, "lock_timeout"), "1s");
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "{all:?}");
    let all = show_all(&mut s, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    assert_eq!(setting(&all, "transaction_isolation"), "repeatable read");
    assert_eq!(setting(&all, "transaction_read_only"), "on");
    // Each agrees with SHOW of the one name.
    for (name, value) in &all {
        let out = s.execute(&format!("SHOW {name}")).pop().unwrap().unwrap();
        assert_eq!(out.rows, vec![vec![Value::Text(value.clone())]], "{name}");
    }
}
