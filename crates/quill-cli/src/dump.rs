//! `quill dump`: the log's records from its checkpoint to its end.

use std::sync::Arc;

use anyhow::{Context, Result};
use quill::io::{RealFs, Vfs};
use quill::log;

use crate::inspect::{DbDir, log_dir, read_lock};
use crate::out;

/// List the records of a log from its checkpoint to its end.
#[derive(clap::Args)]
pub struct DumpArgs {
    #[command(flatten)]
    db: DbDir,
    /// Print at most this many records.
    #[arg(long, default_value_t = 100)]
    limit: u64,
}

/// Run `quill dump`.
pub fn run(a: DumpArgs) -> Result<()> {
    let (dir, limit) = (a.db.dir.as_path(), a.limit);
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs::new());
    if !dir.exists() {
        anyhow::bail!("{} does not exist", dir.display());
    }
    let _lock = read_lock(vfs.as_ref(), dir);
    let ld = log_dir(dir);
    let info = log::inspect(vfs.as_ref(), &ld)
        .with_context(|| format!("reading the log in {}", ld.display()))?;
    outln!(
        "log {}: checkpoint {} end {} ({} records; scan stopped: {:?})",
        ld.display(),
        info.checkpoint_lsn,
        info.end_lsn,
        info.records_after_checkpoint,
        info.stop
    );
    let mut shown = 0u64;
    let scanned = log::scan_read_only(vfs.as_ref(), &ld, &mut |r| {
        if out::closed() {
            // Nobody reads any more: end the scan (the error is ours).
            return Err(quill::Error::InvalidArgument {
                what: "output",
                reason: "standard output closed".into(),
            });
        }
        if shown < limit {
            outln!(
                "lsn {:>14} end {:>14} type {:>3} bytes {}",
                r.lsn,
                r.end,
                r.rtype,
                r.payload.len()
            );
        }
        shown += 1;
        Ok(())
    });
    if out::closed() {
        return Ok(());
    }
    scanned?;
    if shown > limit {
        outln!("... {} more", shown - limit);
    }
    Ok(())
}
