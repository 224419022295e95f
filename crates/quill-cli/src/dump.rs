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
    /// Instead of listing records, sum them up: records and bytes per
    /// record type and, for mini-transactions, per redo operation (where
    /// a workload's log bytes go).
    #[arg(long)]
    summary: bool,
}

/// Counts and bytes of one kind of record or operation.
#[derive(Default)]
struct Tally {
    count: u64,
    bytes: u64,
}

impl Tally {
    fn add(&mut self, bytes: usize) {
        self.count += 1;
        self.bytes += bytes as u64;
    }
}

/// What `--summary` adds up over a scan.
#[derive(Default)]
struct Summary {
    /// Per record type: records and bytes of log (framing included).
    records: std::collections::BTreeMap<u8, Tally>,
    /// Payload bytes over all records.
    payload: u64,
    /// Per redo operation of mini-transaction records: operations and
    /// bytes (operation header included).
    ops: std::collections::BTreeMap<&'static str, Tally>,
    /// Mini-transaction records whose operations did not decode.
    undecodable: u64,
}

impl Summary {
    fn add(&mut self, r: &log::RecoveredRecord<'_>) {
        self.records
            .entry(r.rtype)
            .or_default()
            .add((r.end.0 - r.lsn.0) as usize);
        self.payload += r.payload.len() as u64;
        if r.rtype != quill::mtr::RTYPE_MTR {
            return;
        }
        for op in quill::mtr::redo::decode_sized(r.payload) {
            match op {
                Ok((_, op, size)) => self.ops.entry(op.name()).or_default().add(size),
                Err(_) => {
                    self.undecodable += 1;
                    break;
                }
            }
        }
    }

    fn print(&self) {
        let log_bytes: u64 = self.records.values().map(|t| t.bytes).sum();
        let share = |b: u64| 100.0 * b as f64 / log_bytes.max(1) as f64;
        outln!(
            "{:<22} {:>12} {:>14} {:>7} {:>10}",
            "record type / op",
            "count",
            "bytes",
            "share",
            "bytes/each"
        );
        for (rtype, t) in &self.records {
            let name = match *rtype {
                quill::mtr::RTYPE_MTR => "mini-transaction".to_string(),
                other => format!("type {other}"),
            };
            outln!(
                "{name:<22} {:>12} {:>14} {:>6.1}% {:>10.1}",
                t.count,
                t.bytes,
                share(t.bytes),
                t.bytes as f64 / t.count.max(1) as f64
            );
        }
        let mut ops: Vec<_> = self.ops.iter().collect();
        ops.sort_by_key(|(_, t)| std::cmp::Reverse(t.bytes));
        for (name, t) in ops {
            outln!(
                "  {name:<20} {:>12} {:>14} {:>6.1}% {:>10.1}",
                t.count,
                t.bytes,
                share(t.bytes),
                t.bytes as f64 / t.count.max(1) as f64
            );
        }
        let op_bytes: u64 = self.ops.values().map(|t| t.bytes).sum();
        outln!(
            "log bytes {log_bytes} = payload {} + record framing {}; of the payload, redo operations {op_bytes}",
            self.payload,
            log_bytes.saturating_sub(self.payload)
        );
        if self.undecodable > 0 {
            outln!(
                "{} mini-transaction records did not decode past some operation",
                self.undecodable
            );
        }
    }
}

/// Run `quill dump`.
pub fn run(a: DumpArgs) -> Result<()> {
    let db = a.db.path();
    let (dir, limit) = (db.as_path(), a.limit);
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
    let mut summary = a.summary.then(Summary::default);
    let scanned = log::scan_read_only(vfs.as_ref(), &ld, &mut |r| {
        if out::closed() {
            // Nobody reads any more: end the scan (the error is ours).
            return Err(quill::Error::InvalidArgument {
                what: "output",
                reason: "standard output closed".into(),
            });
        }
        if let Some(s) = summary.as_mut() {
            s.add(r);
        } else if shown < limit {
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
    if let Some(s) = summary {
        s.print();
    } else if shown > limit {
        outln!("... {} more", shown - limit);
    }
    Ok(())
}
