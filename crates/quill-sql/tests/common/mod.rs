//! Helpers shared by the SQL layer's integration tests.

use quill_sql::Session;

/// Run `sql`, a setup batch that drops and recreates tables, after ending
/// any transaction a failed case left open; every statement must succeed.
/// The tests that call this drop a table in every case. A drop that finds
/// 128 dropped trees still waiting to be freed frees some itself, so a
/// purge thread that falls behind on a loaded machine does not fail it
/// (the engine's drop_table DROP6).
pub fn setup(s: &mut Session, sql: &str) {
    let _ = s.execute("ROLLBACK");
    if let Some(err) = s.execute(sql).into_iter().find_map(Result::err) {
        panic!("setup {sql:?} failed: {err}");
    }
}
