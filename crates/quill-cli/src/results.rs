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
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
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
