#![no_main]
//! Arbitrary text into the SQL entry point (`Session::execute`) of one
//! session over one database, shared across inputs so that statements
//! meet the tables earlier inputs created: no input may panic, and the
//! session must answer a plain query afterwards.

use std::sync::{Arc, Mutex, OnceLock};

use quill_sql::Session;

struct Fixture {
    _dir: std::path::PathBuf,
    session: Mutex<Session>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = quill_server::fuzzing::scratch_dir("quill-fuzz-sql");
        let db = Arc::new(quill::Db::open(&dir, quill::Options::default()).expect("open"));
        let mut s = Session::new(db);
        for r in s.execute(
            "CREATE TABLE t (k int PRIMARY KEY, v text, n bigint DEFAULT 7); \
             CREATE INDEX t_v ON t (n); INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2)",
        ) {
            r.expect("setup");
        }
        Fixture {
            _dir: dir,
            session: Mutex::new(s),
        }
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let sql = String::from_utf8_lossy(data);
    let f = fixture();
    let mut s = f.session.lock().unwrap_or_else(|e| e.into_inner());
    let _ = s.execute(&sql);
    let _ = s.execute("ROLLBACK");
    let out = s.execute("SELECT 1");
    assert!(matches!(out.as_slice(), [Ok(_)]), "session broken after {sql:?}: {out:?}");
});
