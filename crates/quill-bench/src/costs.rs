//! What a measured window cost, read the same way for every engine:
//! counters are snapshotted at the window's quiet edges
//! ([`super::window`]) and the differences divided by the work done.
//!
//! * CPU time and context switches: `getrusage(RUSAGE_SELF)`, so an
//!   engine's background threads (Quill's page cleaner, RocksDB's flushes
//!   and compactions) count too; the user-mode part apart as well (the
//!   code's own work, without the kernel's I/O, scheduling and wake-ups).
//! * Bytes written to storage: `/proc/self/io` `write_bytes`, the kernel's
//!   count of what the process sent to the block layer.
//! * Log syncs: the engine's own counter ([`Engine::log_syncs`]), or none.
//! * Written bytes by kind ([`Engine::write_split`]): log, data and
//!   doublewrite, where the engine counts them; and the log's payload
//!   (redo records without framing and block padding) apart from the
//!   bytes its writes carried.
//! * The engine's backlog after the window ([`Engine::backlog`]):
//!   deferred work (Quill's undo history) the window's figures do not
//!   include.
//! * Undo segments started on newly allocated pages per commit
//!   ([`Engine::undo_segments`]): 0 when every transaction reuses a
//!   cached undo page, as it should in steady state.
//! * How commits waited ([`Engine::group_commit`]): the group-commit
//!   leader's yields, hand-offs and parked waits per commit, where the
//!   engine counts them.

use serde::{Deserialize, Serialize};

use super::commit::{Usage, usage};
use super::engine::{Engine, GroupCommit, WriteSplit};

/// Counters at one instant.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot {
    usage: Usage,
    syncs: Option<u64>,
    write_bytes: Option<u64>,
    split: Option<WriteSplit>,
    backlog: Option<i64>,
    undo_segments: Option<(u64, u64)>,
    group: Option<GroupCommit>,
}

/// Bytes this process caused to be written to storage, if the kernel
/// reports it.
fn write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

impl Snapshot {
    /// Read every counter now.
    pub fn take(engine: &dyn Engine) -> Snapshot {
        Snapshot {
            usage: usage(),
            syncs: engine.log_syncs(),
            write_bytes: write_bytes(),
            split: engine.write_split(),
            backlog: engine.backlog(),
            undo_segments: engine.undo_segments(),
            group: engine.group_commit(),
        }
    }

    /// The costs of the work between `start` and this snapshot: `commits`
    /// transactions carrying `ops` operations (rows, or transactions when
    /// each counts as one).
    pub fn since(&self, start: &Snapshot, commits: u64, ops: u64) -> Costs {
        let per_commit = |a: u64, b: u64| b.saturating_sub(a) as f64 / commits.max(1) as f64;
        let ops = ops.max(1) as f64;
        let per_op = |a: u64, b: u64| b.saturating_sub(a) as f64 / ops;
        let split = start.split.zip(self.split);
        let group = start.group.zip(self.group);
        let group_per_commit =
            |f: fn(&GroupCommit) -> u64| group.map(|(a, b)| per_commit(f(&a), f(&b)));
        Costs {
            fsyncs_per_commit: start.syncs.zip(self.syncs).map(|(a, b)| per_commit(a, b)),
            log_writes_per_commit: split
                .and_then(|(a, b)| a.log_writes.zip(b.log_writes))
                .map(|(a, b)| per_commit(a, b)),
            cpu_us_per_op: (self.usage.cpu_us - start.usage.cpu_us) / ops,
            user_cpu_us_per_op: Some((self.usage.user_us - start.usage.user_us) / ops)
                .filter(|v| v.is_finite()),
            switches_per_op: (self.usage.switches - start.usage.switches) / ops,
            write_bytes_per_op: start
                .write_bytes
                .zip(self.write_bytes)
                .map(|(a, b)| per_op(a, b)),
            log_bytes_per_op: split.map(|(a, b)| per_op(a.log, b.log)),
            redo_bytes_per_op: split.map(|(a, b)| per_op(a.log_payload, b.log_payload)),
            data_bytes_per_op: split.map(|(a, b)| per_op(a.data, b.data)),
            doublewrite_bytes_per_op: split.map(|(a, b)| per_op(a.doublewrite, b.doublewrite)),
            backlog_at_end: self.backlog,
            undo_new_pages_per_commit: start
                .undo_segments
                .zip(self.undo_segments)
                .map(|((_, a), (_, b))| per_commit(a, b)),
            undo_cached_pages_per_commit: start
                .undo_segments
                .zip(self.undo_segments)
                .map(|((a, _), (b, _))| per_commit(a, b)),
            leader_yields_per_commit: group_per_commit(|g| g.leader_yields),
            leader_handoffs_per_commit: group_per_commit(|g| g.leader_handoffs),
            parks_per_commit: group_per_commit(|g| g.parks),
        }
    }
}

/// Costs of a measured window (see the module doc for the sources).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Costs {
    /// Log syncs per commit, if the engine counts them.
    pub fsyncs_per_commit: Option<f64>,
    /// Write calls to the log's files per commit, if the engine counts
    /// them. Absent from results recorded before it was measured.
    #[serde(default)]
    pub log_writes_per_commit: Option<f64>,
    /// Process CPU microseconds per operation.
    pub cpu_us_per_op: f64,
    /// The user-mode part of `cpu_us_per_op` (`None` if `getrusage`
    /// failed). Absent from results recorded before it was measured.
    #[serde(default)]
    pub user_cpu_us_per_op: Option<f64>,
    /// Context switches per operation.
    pub switches_per_op: f64,
    /// Bytes written to storage per operation (`/proc/self/io`).
    pub write_bytes_per_op: Option<f64>,
    /// Log bytes the engine wrote per operation.
    pub log_bytes_per_op: Option<f64>,
    /// Log payload per operation: the redo (WAL) records themselves,
    /// without framing or block padding ([`WriteSplit::log_payload`]).
    /// Absent from results recorded before it was measured.
    #[serde(default)]
    pub redo_bytes_per_op: Option<f64>,
    /// Data bytes (pages, or flushed and compacted tables) per operation.
    pub data_bytes_per_op: Option<f64>,
    /// Doublewrite bytes per operation.
    pub doublewrite_bytes_per_op: Option<f64>,
    /// The engine's backlog after the window, once its clients stopped
    /// ([`Engine::backlog`]),
    /// if it keeps one. Absent from results recorded before it was
    /// measured.
    #[serde(default)]
    pub backlog_at_end: Option<i64>,
    /// Undo segments started on newly allocated pages per commit
    /// ([`Engine::undo_segments`]), if the engine keeps undo that way.
    /// Absent from results recorded before it was measured.
    #[serde(default)]
    pub undo_new_pages_per_commit: Option<f64>,
    /// Undo segments started on cached pages per commit (US6: no page
    /// allocation). Absent from results recorded before it was measured.
    #[serde(default)]
    pub undo_cached_pages_per_commit: Option<f64>,
    /// Group-commit leader yields per commit ([`GroupCommit::leader_yields`]),
    /// if the engine counts them: 0 at one client unless a sync was
    /// shared. Absent from results recorded before it was measured.
    #[serde(default)]
    pub leader_yields_per_commit: Option<f64>,
    /// Leader hand-offs per commit ([`GroupCommit::leader_handoffs`]).
    /// Absent from results recorded before it was measured.
    #[serde(default)]
    pub leader_handoffs_per_commit: Option<f64>,
    /// Waits for the log that parked their thread, per commit
    /// ([`GroupCommit::parks`]). Absent from results recorded before it
    /// was measured.
    #[serde(default)]
    pub parks_per_commit: Option<f64>,
}

/// `x` with no decimals, or "n/a".
pub fn or_na(x: Option<f64>, decimals: usize) -> String {
    x.map_or("n/a".to_string(), |v| format!("{v:.decimals$}"))
}
