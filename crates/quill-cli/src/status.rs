//! `quill status`: the state of a database from its files, read only.

use std::sync::Arc;

use anyhow::{Context, Result};
use quill::io::{RealFs, Vfs};
use quill::log;

use crate::inspect::{DbDir, log_dir, read_lock};

/// Print the state of a database: log layout, checkpoint, end of log,
/// and the statistics saved at its last clean close.
#[derive(clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    db: DbDir,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Run `quill status`.
pub fn run(a: StatusArgs) -> Result<()> {
    let db = a.db.path();
    let (dir, json) = (db.as_path(), a.json);
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs::new());
    if !dir.exists() {
        anyhow::bail!("{} does not exist", dir.display());
    }
    let _lock = read_lock(vfs.as_ref(), dir);
    let ld = log_dir(dir);
    let info = log::inspect(vfs.as_ref(), &ld)
        .with_context(|| format!("reading the log in {}", ld.display()))?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&info)?);
        return Ok(());
    }
    outln!("database {}", dir.display());
    outln!(
        "redo log {}: {} files x {} bytes = {} bytes of log (id {})",
        info.dir.display(),
        info.file_count,
        info.file_size,
        info.capacity_bytes,
        info.log_id
    );
    outln!(
        "  checkpoint LSN {} (slot seq {}, epoch {}); end LSN {} ({} records, {} bytes after the checkpoint; scan stopped: {:?})",
        info.checkpoint_lsn,
        info.checkpoint_seq,
        info.epoch,
        info.end_lsn,
        info.records_after_checkpoint,
        info.end_lsn.0.saturating_sub(info.checkpoint_lsn.0),
        info.stop
    );
    match &info.last_close {
        Some(saved) => {
            let age = quill_bench::unix_now().saturating_sub(saved.saved_unix);
            outln!("statistics saved at the last clean close ({age} s ago):");
            outln!("{}", saved.stats);
        }
        None => outln!("no statistics saved (the log was never closed cleanly)"),
    }
    match quill::store::inspect(vfs.as_ref(), dir) {
        Ok(st) => {
            outln!(
                "tablespace {}: {}-byte pages, {} pages ({} free), {} bytes on disk; trees at root slots {:?}",
                dir.join(quill::store::DATA_FILE).display(),
                st.page_size,
                st.page_count,
                st.free_pages,
                st.file_bytes,
                st.roots
            );
            match &st.last_close {
                Some(s) => {
                    outln!("storage statistics saved at the last clean close:");
                    outp!("{s}");
                }
                None => outln!("no storage statistics saved (never closed cleanly)"),
            }
        }
        Err(quill::Error::NotFound { .. }) => {
            outln!("no tablespace in {} (a log only)", dir.display())
        }
        Err(e) => return Err(e).context("reading the tablespace"),
    }
    match quill::db::saved_stats(vfs.as_ref(), dir) {
        Some(s) => {
            outln!("transaction statistics saved at the last clean close:");
            outp!("{s}");
        }
        None => outln!("no transaction statistics saved (no tables, or never closed cleanly)"),
    }
    Ok(())
}
