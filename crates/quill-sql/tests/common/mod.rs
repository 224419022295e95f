//! Helpers shared by the SQL layer's integration tests.

use std::time::{Duration, Instant};

use quill_sql::{Session, SqlState};

/// Run `sql`, a setup batch that drops and recreates tables, until every
/// statement in it succeeds. The tests that call this drop a table in
/// every case, and the engine refuses a drop (54000) while 128 dropped
/// trees wait for purge to free them; on a loaded machine (CI runs many
/// test threads on two cores) purge can fall that far behind. The engine
/// says to retry once purge has freed some, so this does, for up to a
/// minute; any other error, or a backlog that never drains, fails the
/// test.
pub fn setup(s: &mut Session, sql: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let _ = s.execute("ROLLBACK");
        let Some(err) = s.execute(sql).into_iter().find_map(Result::err) else {
            return;
        };
        let backlog = err.state == SqlState::PROGRAM_LIMIT_EXCEEDED
            && err.message.contains("waiting to be freed");
        assert!(
            backlog && Instant::now() < deadline,
            "setup {sql:?} failed: {err}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
