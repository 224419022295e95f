//! `quill check`: every table's structure and indexes, read only unless
//! `--repair`.

use anyhow::{Context, Result};

use crate::inspect::DbDir;

/// Check every table of a database: B+tree structure, every live row in
/// every secondary index, every index entry backed by a version of its
/// row, unique indexes unique. Opens the database read-only and writes
/// nothing; a database that was not closed cleanly needs recovery first
/// (--repair). Exits with status 1 if anything is wrong.
#[derive(clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    db: DbDir,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Open the database read-write, recovering it if it needs it (redo,
    /// then rollback of transactions that never committed), before
    /// checking.
    #[arg(long)]
    repair: bool,
}

/// Run `quill check`; exits the process with status 1 when it finds a
/// problem. With `--json`, a database that cannot be checked (missing,
/// in use, needing recovery) is reported as JSON too, `{"error": ...}`
/// on standard output, as well as on standard error.
pub fn run(a: CheckArgs) -> Result<()> {
    let json = a.json;
    match check(a) {
        Err(e) if json => {
            outln!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({ "error": format!("{e:#}") }))?
            );
            Err(e)
        }
        r => r,
    }
}

fn check(a: CheckArgs) -> Result<()> {
    let db = a.db.path();
    let (dir, json, repair) = (db.as_path(), a.json, a.repair);
    let opts = quill::db::Options {
        create_if_missing: false,
        purge: false,
        ..quill::db::Options::default()
    };
    let db = if repair {
        quill::db::Db::open(dir, opts).with_context(|| {
            format!("opening (and recovering) the database in {}", dir.display())
        })?
    } else {
        quill::db::Db::open_read_only(dir, opts)
            .with_context(|| format!("opening the database in {} read-only", dir.display()))?
    };
    let report = db.check().context("checking")?;
    let recovery = db.stats().recovery;
    db.close().context("closing")?;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "report": report, "recovery": recovery })
            )?
        );
    } else {
        if let Some(r) = &recovery
            && !r.rolled_back.is_empty()
        {
            outln!(
                "recovery rolled back {} transactions that never committed ({} undo records, {:.1} ms)",
                r.rolled_back.len(),
                r.undo_records,
                r.duration.as_secs_f64() * 1e3
            );
        }
        outln!(
            "checked {} tables: {} records ({} live rows), {} index entries",
            report.tables,
            report.records,
            report.live_rows,
            report.index_entries
        );
        for p in &report.problems {
            outln!("PROBLEM: {p}");
        }
        if report.is_ok() {
            outln!("no problems found");
        }
    }
    if !report.is_ok() {
        std::process::exit(1);
    }
    Ok(())
}
