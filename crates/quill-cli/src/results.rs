//! Result files: every benchmark's `--json` output starts with what
//! identifies the run (tool, command line, date, commit, machine).

use std::path::Path;

use anyhow::{Context, Result};
use quill_bench::Machine;

/// The command line as typed, for result files.
fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// The commit this binary was built from (`build.rs`), not the working
/// directory's: an A/B runs a baseline binary from this tree.
fn git_commit() -> &'static str {
    env!("QUILL_BUILD_COMMIT")
}

/// UTC timestamp like 2026-11-21T23:22:18Z.
fn utc_now() -> String {
    let secs = quill_bench::unix_now();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Write a benchmark's results to `path` (if given) as JSON: `fields`
/// after what identifies the run (tool, command line, date, commit,
/// machine).
pub fn save_json(
    path: Option<&Path>,
    tool: &str,
    machine: &Machine,
    fields: serde_json::Value,
) -> Result<()> {
    let Some(path) = path else {
        return Ok(());
    };
    let mut v = serde_json::json!({
        "tool": tool,
        "command": command_line(),
        "date": utc_now(),
        "git_commit": git_commit(),
        "machine": machine,
    });
    if let (Some(head), serde_json::Value::Object(rest)) = (v.as_object_mut(), fields) {
        head.extend(rest);
    }
    let text = serde_json::to_string_pretty(&v)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
