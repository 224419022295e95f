//! What the log counts and times, and the snapshot it reports.
//!
//! Log I/O only: data-page and doublewrite I/O get their own counters in the
//! layers that do them, so that no figure mixes the two (the field report in
//! `seeds/004` is what happens otherwise).

use serde::{Deserialize, Serialize};

use crate::stats::{Counter, Ewma, Histogram, HistogramSnapshot};

/// Live counters and histograms of one open log. Latencies in nanoseconds.
#[derive(Debug, Default)]
pub(crate) struct LogMetrics {
    pub appends: Counter,
    pub append_payload_bytes: Counter,
    pub fragments: Counter,
    pub writes: Counter,
    pub write_bytes: Counter,
    pub write_latency: Histogram,
    pub syncs: Counter,
    pub dsync_writes: Counter,
    pub sync_latency: Histogram,
    pub sync_ewma: Ewma,
    pub wake_ewma: Ewma,
    pub group_ewma: Ewma,
    pub commits_sync: Counter,
    pub commits_write: Counter,
    pub commits_lazy: Counter,
    pub commits_already_durable: Counter,
    pub commit_wait: Histogram,
    pub group_size: Histogram,
    pub leader_handoffs: Counter,
    pub leader_yields: Counter,
    pub flusher_leads: Counter,
    pub inline_leads: Counter,
    pub prewrites: Counter,
    pub spin_waits: Counter,
    pub parks: Counter,
    pub hole_waits: Counter,
    pub space_waits: Counter,
    pub log_full_waits: Counter,
    pub checkpoints: Counter,
    pub checkpoint_syncs: Counter,
    pub slots_absorbed: Counter,
}

/// A snapshot of a log's metrics, as `quill status` prints it and the
/// benchmarks record it. Latencies are in nanoseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LogStats {
    /// `append` calls.
    pub appends: u64,
    /// Payload bytes appended.
    pub append_payload_bytes: u64,
    /// Fragments (records larger than a fragment are split).
    pub fragments: u64,
    /// LSN bytes consumed (headers, payload and padding) since open.
    pub lsn_bytes: u64,
    /// Write calls to log files.
    pub writes: u64,
    /// Bytes written to log files (whole 4 KiB blocks; the partial tail
    /// block is rewritten, so this exceeds `lsn_bytes` for small commits).
    pub write_bytes: u64,
    /// Latency of each log write call.
    pub write_latency: HistogramSnapshot,
    /// Durable I/Os on log files: `fdatasync` calls plus `RWF_DSYNC` writes
    /// (checkpoint syncs excluded).
    pub syncs: u64,
    /// Of `syncs`, writes made durable by `RWF_DSYNC` (each is also counted
    /// in `writes`).
    pub dsync_writes: u64,
    /// Latency of each log sync.
    pub sync_latency: HistogramSnapshot,
    /// Commits that asked for durability `Sync`.
    pub commits_sync: u64,
    /// Commits with durability `Write`.
    pub commits_write: u64,
    /// Commits with durability `Lazy`.
    pub commits_lazy: u64,
    /// `Sync` commits that found their LSN durable already (no wait).
    pub commits_already_durable: u64,
    /// Time spent in `commit` / awaiting `commit_async`.
    pub commit_wait: HistogramSnapshot,
    /// Commits made durable by each sync (group size).
    pub group_size: HistogramSnapshot,
    /// Times a completing leader handed leadership to a waiting thread.
    pub leader_handoffs: u64,
    /// Times a leader yielded its core before writing so that runnable
    /// committers could join its sync: only while one of the last 32 syncs
    /// completed more than one waiter (commits, `make_durable`), so rarely
    /// with one client.
    #[serde(default)]
    pub leader_yields: u64,
    /// Syncs led by the flush thread.
    pub flusher_leads: u64,
    /// Syncs an async committer led on its own thread (fast devices only).
    pub inline_leads: u64,
    /// Writes done by a waiter while the previous group's sync ran.
    pub prewrites: u64,
    /// Waits that spun instead of parking (adaptive; zero on slow devices).
    pub spin_waits: u64,
    /// Waits that parked the thread.
    pub parks: u64,
    /// Times a writer waited for an earlier append's copy to finish.
    pub hole_waits: u64,
    /// Appends that waited for space in the log buffer.
    pub space_waits: u64,
    /// Appends that waited for a checkpoint to free log space.
    pub log_full_waits: u64,
    /// Checkpoint slots written.
    pub checkpoints: u64,
    /// Syncs made for a checkpoint slot alone: a slot that no sync of log
    /// data made durable first (urgent checkpoints, an idle log).
    pub checkpoint_syncs: u64,
    /// Slots made durable by a sync of log data (a commit's) at no cost.
    pub slots_absorbed: u64,
    /// Log syncs per commit, all durability levels: `syncs` plus
    /// `checkpoint_syncs`, over commits.
    pub fsyncs_per_commit: f64,
    /// Log bytes written per commit.
    pub write_bytes_per_commit: f64,
    /// Next LSN to be reserved (end of the log).
    pub end_lsn: u64,
    /// Everything below this LSN is durable.
    pub durable_lsn: u64,
    /// Recovery would start here.
    pub checkpoint_lsn: u64,
    /// Bytes of log the circle holds.
    pub capacity_bytes: u64,
    /// Generation of this open.
    pub epoch: u32,
}

impl LogMetrics {
    /// Snapshot counters and histograms (LSN fields are filled by the caller).
    pub(crate) fn snapshot(&self) -> LogStats {
        let commits_sync = self.commits_sync.get();
        let commits_write = self.commits_write.get();
        let commits_lazy = self.commits_lazy.get();
        let commits = (commits_sync + commits_write + commits_lazy).max(1) as f64;
        let syncs = self.syncs.get();
        let checkpoint_syncs = self.checkpoint_syncs.get();
        let write_bytes = self.write_bytes.get();
        LogStats {
            appends: self.appends.get(),
            append_payload_bytes: self.append_payload_bytes.get(),
            fragments: self.fragments.get(),
            writes: self.writes.get(),
            write_bytes,
            write_latency: self.write_latency.snapshot(),
            syncs,
            dsync_writes: self.dsync_writes.get(),
            sync_latency: self.sync_latency.snapshot(),
            commits_sync,
            commits_write,
            commits_lazy,
            commits_already_durable: self.commits_already_durable.get(),
            commit_wait: self.commit_wait.snapshot(),
            group_size: self.group_size.snapshot(),
            leader_handoffs: self.leader_handoffs.get(),
            leader_yields: self.leader_yields.get(),
            flusher_leads: self.flusher_leads.get(),
            inline_leads: self.inline_leads.get(),
            prewrites: self.prewrites.get(),
            spin_waits: self.spin_waits.get(),
            parks: self.parks.get(),
            hole_waits: self.hole_waits.get(),
            space_waits: self.space_waits.get(),
            log_full_waits: self.log_full_waits.get(),
            checkpoints: self.checkpoints.get(),
            checkpoint_syncs,
            slots_absorbed: self.slots_absorbed.get(),
            fsyncs_per_commit: (syncs + checkpoint_syncs) as f64 / commits,
            write_bytes_per_commit: write_bytes as f64 / commits,
            ..LogStats::default()
        }
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn hist_line(
    f: &mut std::fmt::Formatter<'_>,
    name: &str,
    h: &HistogramSnapshot,
    unit_us: bool,
) -> std::fmt::Result {
    if h.count == 0 {
        return writeln!(f, "  {name:<22} (none)");
    }
    if unit_us {
        writeln!(
            f,
            "  {name:<22} n={} mean={:.1}us p50={:.1}us p99={:.1}us p99.9={:.1}us max={:.1}us",
            h.count,
            h.mean / 1000.0,
            us(h.p50),
            us(h.p99),
            us(h.p999),
            us(h.max)
        )
    } else {
        writeln!(
            f,
            "  {name:<22} n={} mean={:.2} p50={} p99={} max={}",
            h.count, h.mean, h.p50, h.p99, h.max
        )
    }
}

impl std::fmt::Display for LogStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Saved statistics are read back from a file: any values at all.
        let commits = self
            .commits_sync
            .saturating_add(self.commits_write)
            .saturating_add(self.commits_lazy);
        writeln!(f, "redo log")?;
        writeln!(
            f,
            "  LSN end={} durable={} checkpoint={} (checkpoint age {} of {} bytes), epoch {}",
            self.end_lsn,
            self.durable_lsn,
            self.checkpoint_lsn,
            self.end_lsn.saturating_sub(self.checkpoint_lsn),
            self.capacity_bytes,
            self.epoch
        )?;
        writeln!(
            f,
            "  appends {} ({} payload bytes, {} fragments, {} LSN bytes)",
            self.appends, self.append_payload_bytes, self.fragments, self.lsn_bytes
        )?;
        writeln!(
            f,
            "  commits {} (sync {}, write {}, lazy {}; already durable {})",
            commits,
            self.commits_sync,
            self.commits_write,
            self.commits_lazy,
            self.commits_already_durable
        )?;
        writeln!(
            f,
            "  log writes {} ({} bytes, {:.0} bytes/commit); durable I/Os {} ({} RWF_DSYNC writes + {} fdatasync) + {} checkpoint syncs = {:.4} per commit",
            self.writes,
            self.write_bytes,
            self.write_bytes_per_commit,
            self.syncs,
            self.dsync_writes,
            self.syncs.saturating_sub(self.dsync_writes),
            self.checkpoint_syncs,
            self.fsyncs_per_commit,
        )?;
        writeln!(
            f,
            "  checkpoint slots {} ({} made durable by a commit's sync, {} synced on their own)",
            self.checkpoints, self.slots_absorbed, self.checkpoint_syncs
        )?;
        hist_line(f, "plain write latency", &self.write_latency, true)?;
        hist_line(f, "durable I/O latency", &self.sync_latency, true)?;
        hist_line(f, "commit wait", &self.commit_wait, true)?;
        hist_line(f, "commits per sync", &self.group_size, false)?;
        writeln!(
            f,
            "  leader handoffs {}, leader yields {}, flusher leads {}, async inline leads {}, pre-writes {}, waits parked {} / spun {}",
            self.leader_handoffs,
            self.leader_yields,
            self.flusher_leads,
            self.inline_leads,
            self.prewrites,
            self.parks,
            self.spin_waits
        )?;
        write!(
            f,
            "  stalls: hole waits {}, buffer-full waits {}, log-full waits {}",
            self.hole_waits, self.space_waits, self.log_full_waits
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Statistics come back from `log-stats.json`, which may hold any
    /// numbers: printing them must not overflow.
    #[test]
    fn saved_stats_with_extreme_counters_print() {
        let s = LogStats {
            commits_sync: u64::MAX,
            commits_write: u64::MAX,
            commits_lazy: 1,
            ..LogStats::default()
        };
        assert!(s.to_string().contains("commits 18446744073709551615"));
    }
}
