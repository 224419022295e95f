//! Purge: removes what no read view needs any more. Transactions are
//! purged in id order while their id is below the purge bound (registry
//! R4: visible to every view, present and future, so no reader follows a
//! roll pointer into their undo). For each undo record of such a
//! transaction, oldest first:
//!
//! * insert: nothing to do (the row stays; its undo served rollback only);
//! * delete-mark: under the row's lock, if the record is still the
//!   delete-marked version this very change wrote, remove it and its
//!   secondary entries;
//! * update: for each index whose key the update changed (a bit in the
//!   undo record), under the row's lock, remove the replaced version's
//!   entry unless a version a view may read still has that key (TB1). An
//!   update that changed no key costs purge nothing but deleting its undo
//!   record.
//!
//! Then the undo records go, then the commit mark (UL3). Records in a
//! committed transaction's undo segment (`undo_seg` US7) are purged the
//! same way, from the segments queued for the partition whose
//! transactions are below the bound, and the segment is then ended
//! whole (cached or freed). Every step acts
//! only where the record still says so, so a crash part way is harmless:
//! the next purge does the rest. A transaction is never purged while an
//! older one is still running or visible to some view, because the bound
//! is below both.
//!
//! The thread sleeps (10 ms) only when there is nothing to purge, so it
//! catches up at once when load drops. Under sustained load with many
//! more clients than cores the thread alone gets too little CPU, so
//! committing writers help while the history is long (`help`).
//!
//! **The purge thread runs at the lowest CPU priority** (nice
//! `PURGE_NICE` = 19): it takes the cores when clients leave them idle (while
//! their commits wait for a sync) instead of preempting a committer or a
//! commit leader that has work ready. Its work is not lost when cores are
//! scarce: past `HELP_ABOVE` (2048) transactions of history the committers
//! purge in their own time, at their own priority. Measured on 2 vCPUs at
//! 16 sysbench write-only threads (`bench/results/oltp-20261128-nice-ab/`):
//! the purge thread took a fifth of the CPU samples while a fifth of the
//! CPU sat idle; at the lowest priority throughput rose by 5% to 22%
//! (medians of three A/Bs) and the history stayed short.
//!
//! What the low priority can cost: while descheduled, the purge thread
//! may hold a row lock, leaf latches, a log reservation it has not filled
//! yet (log writers wait at that hole), or, when it must write back a
//! dirty page for a free frame, the sync role. Whoever needs one of those
//! waits until it runs again. Where clients are the load they then park
//! and free the cores, so the wait is short; a load that keeps the cores
//! busy with other work (readers, other processes) can stretch it. Beside
//! one nice-19 busy loop per CPU, at one client
//! (`bench/results/oltp-20261203-purge-nice/`), windows with millisecond
//! tails came with this thread at nice 19 and at nice 0 alike, and the
//! engine's counters put them in the durable log write, with few waits on
//! log holes or busy pages and none on row locks. Tail latency of mixed
//! loads with more threads than cores is still to be measured.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::txn::undo_log::UNDO_PARTITIONS;
use crate::txn::{LockMode, OldVersion, RollPtr, TrxId, UndoKind, UndoRecord};
use crate::{Error, Result};

use super::{DbInner, table};

/// The lock-table identity of partition 0's purger; partition `p` uses
/// `PURGE_TRX - p` (never transaction ids).
const PURGE_TRX: TrxId = u64::MAX - 1;

/// The purge thread's nice value: the lowest priority (see the module
/// docs). Raising one's own nice value needs no privilege.
pub(crate) const PURGE_NICE: i32 = 19;

/// Start the purge thread.
pub(crate) fn start(db: Arc<DbInner>) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("quill-purge".into())
        .spawn(move || {
            lower_priority();
            run(&db)
        })
        .map_err(|e| Error::InvalidArgument {
            what: "purge thread",
            reason: e.to_string(),
        })
}

/// Give the calling thread (only it: on Linux a thread id names one
/// thread to `setpriority`) the nice value [`PURGE_NICE`]. A failure costs
/// only throughput, so it is reported and purge runs on. The value is
/// one-way (raising it back needs a privilege) and is inherited: a thread
/// spawned from the purge thread would start at nice 19 too, so none is.
fn lower_priority() {
    let tid = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(tid), PURGE_NICE) {
        tracing::warn!(error = %e, "purge thread keeps its priority");
    }
}

fn run(db: &DbInner) {
    while !db.purge_stop.load(Ordering::Acquire) {
        match purge_batch(db, 64).and_then(|n| Ok(n + super::drop_table::step(db, 512)? as u64)) {
            Ok(0) => {
                let (m, cv) = &db.purge_wake;
                let mut woken = m.lock();
                if !*woken {
                    cv.wait_for(&mut woken, Duration::from_millis(10));
                }
                *woken = false;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::error!(error = %e, "purge stopped");
                *db.purge_error.lock() = Some(e.to_string());
                return;
            }
        }
    }
}

/// Purge up to `max` transactions; returns how many were purged. Each
/// undo partition is worked from its oldest transaction, under that
/// partition's purge lock, so purgers on different partitions run in
/// parallel; the order across partitions does not matter, since every step
/// is decided by the record's current state and the bound alone.
pub(crate) fn purge_batch(db: &DbInner, max: usize) -> Result<u64> {
    let bound = db.purge_bound();
    let per = max.div_ceil(usize::from(UNDO_PARTITIONS)).max(1);
    let mut n = 0;
    for part in 0..UNDO_PARTITIONS {
        if let Some(lock) = db.purge_locks.get(usize::from(part)) {
            let _g = lock.lock();
            n += purge_partition(db, part, per, bound)?;
        }
    }
    Ok(n)
}

/// History length above which committing writers help purge.
pub(crate) const HELP_ABOVE: i64 = 2048;

/// Called by a writer after its commit: when the history is long (the
/// purge thread is not keeping up, typically because many more client
/// threads than cores share the CPU with it), purge a transaction of one
/// partition in the committer's own time, unless someone is purging that
/// partition already. This keeps the history bounded under any load with
/// no tuning: the more writers, the more helpers, up to one per partition.
pub(crate) fn help(db: &DbInner, hint: u64) -> Result<()> {
    let history = db.history.load(Ordering::Relaxed);
    if history <= HELP_ABOVE {
        return Ok(());
    }
    // The longer the history, the more a helper takes at once: its deletes
    // share leaves (one descent per leaf), and with many more threads than
    // cores a helper may be descheduled holding its partition, so each
    // hold should do more.
    let max = usize::try_from(history / HELP_ABOVE).map_or(32, |x| x.saturating_mul(4).min(32));
    for k in 0..u64::from(UNDO_PARTITIONS) {
        let part = ((hint + k) % u64::from(UNDO_PARTITIONS)) as u8;
        if let Some(lock) = db.purge_locks.get(usize::from(part))
            && let Some(_g) = lock.try_lock()
        {
            // The last bound anyone computed is still a bound (R4: it only
            // grows); computing a fresh one scans every slot, so a helper
            // does that only when the old one leaves it nothing to do.
            if purge_partition(db, part, max, db.registry.purged_upto())? == 0 {
                purge_partition(db, part, max, db.purge_bound())?;
            }
            return Ok(());
        }
    }
    Ok(())
}

/// Purge up to `max` transactions below `bound` from partition `part`, the
/// oldest first; the caller holds the partition's purge lock. Their rows
/// first, then their undo records and marks in key order (each mark after
/// its transaction's records, UL3), the deletes batched by leaf. A mark
/// whose records a crash already took is purged the same way.
fn purge_partition(db: &DbInner, part: u8, max: usize, bound: TrxId) -> Result<u64> {
    let n = purge_segments(db, part, max, bound)?;
    Ok(n + purge_tree(db, part, max, bound)?)
}

/// Purge up to `max` committed undo segments (undo_seg US7) of partition
/// `part` whose transactions are below `bound`: each one's records, then
/// the segment ends (cached or freed). If one fails, those after it go
/// back on the queue, and it does too unless it failed while being ended
/// (then the next open finds what is left of it).
fn purge_segments(db: &DbInner, part: u8, max: usize, bound: TrxId) -> Result<u64> {
    let batch = db.segs.committed_below(usize::from(part), bound, max);
    let mut n = 0;
    let mut records = 0;
    let mut ending = false;
    let r = batch.iter().try_for_each(|f| {
        let recs = db.segs.chain_records(&db.store, f.first, f.trx)?;
        for r in &recs {
            purge_record(db, r.roll, &r.rec, bound, part)?;
        }
        ending = true;
        db.segs.end_purged(&db.store, f)?;
        ending = false;
        n += 1;
        records += recs.len() as u64;
        Ok::<(), Error>(())
    });
    if r.is_err() {
        // Those not reached are queued again. The one that failed is too,
        // unless it failed while being ended: part of it may be freed
        // then, and the next open finds what is left in the directory
        // (still committed: US7).
        let failed = usize::from(ending);
        for f in batch.iter().skip(n as usize + failed) {
            db.segs.queue(*f);
        }
    }
    db.counters.purged_records.add(records);
    db.counters.purged_trx.add(n);
    db.history.fetch_sub(n as i64, Ordering::Relaxed);
    r.map(|()| n)
}

/// Purge up to `max` transactions of undo-tree partition `part` below
/// `bound` (see [`purge_partition`]).
fn purge_tree(db: &DbInner, part: u8, max: usize, bound: TrxId) -> Result<u64> {
    let mut batch = db.undo.oldest(&db.store, part, bound, max)?;
    // Below the bound every transaction is over, so one with undo and no
    // mark can only be one whose rollback failed part way: recovery rolls
    // it back at the next open; purge leaves it alone.
    batch.retain(|item| item.committed);
    if batch.is_empty() {
        return Ok(0);
    }
    for item in &batch {
        for (seq, rec) in &item.records {
            purge_record(db, RollPtr(*seq), rec, bound, part)?;
        }
    }
    db.undo.delete_purged(&db.store, &batch)?;
    let records: usize = batch.iter().map(|b| b.records.len()).sum();
    db.counters.purged_records.add(records as u64);
    db.counters.purged_trx.add(batch.len() as u64);
    db.history.fetch_sub(batch.len() as i64, Ordering::Relaxed);
    Ok(batch.len() as u64)
}

fn purge_record(
    db: &DbInner,
    roll: RollPtr,
    rec: &UndoRecord,
    bound: TrxId,
    part: u8,
) -> Result<()> {
    if !rec.kind.has_old_value() {
        return Ok(()); // an insert or a run of them
    }
    let Some(t) = db.table_by_id(rec.table) else {
        return Ok(());
    };
    let schema = {
        let guard = t.schema.read();
        // Read under the schema lock: a DROP TABLE sets the mark, and sets
        // it back if it fails before its commit point (`drop_table`), both
        // under the write lock, so a failed drop's passing mark is never
        // seen here (a record skipped on it would never be purged).
        if t.dropped.load(Ordering::SeqCst) {
            // Its trees are freed whole (drop_table DROP2); no view below
            // the bound needs what purge would remove.
            return Ok(());
        }
        guard.clone()
    };
    // An update that changed no secondary key leaves nothing to purge (the
    // old and new versions share their entries); only the purge of the
    // update that changed a key away from `k` can find `k` unneeded.
    if rec.kind == UndoKind::Update && !schema.live_indexes().any(|i| rec.may_have_changed(i)) {
        return Ok(());
    }
    // Each partition's purger locks rows under its own identity.
    let me = PURGE_TRX - u64::from(part);
    let lock = db.locks.key(table::row_lock(schema.id, &rec.key));
    db.locks.lock(me, &lock, LockMode::Exclusive)?;
    // The schema again, under the row's lock: an index whose online build
    // started since may hold entries of this row (`online_index` OI3).
    let schema = t.latest();
    let r = purge_row(db, &schema, roll, rec, bound);
    db.locks.release(me, std::slice::from_ref(&lock));
    r
}

fn purge_row(
    db: &DbInner,
    schema: &crate::catalog::schema::TableSchema,
    roll: RollPtr,
    rec: &UndoRecord,
    bound: TrxId,
) -> Result<()> {
    let store = &db.store;
    let mut cur = table::read_rec(store, schema, &rec.key)?;
    if let Some((h, row)) = &cur
        && h.deleted
        && h.trx == rec.trx
        && h.roll == roll
    {
        let values = table::decode(schema, row)?;
        for i in schema.live_indexes() {
            if let Some(tree) = table::secondary(store, schema, i) {
                let k = table::sec_key_of(schema, i, &values);
                tree.delete(&table::entry_key(&k, &rec.key))?;
            }
        }
        table::clustered(store, schema).delete(&rec.key)?;
        db.counters.purged_rows.incr();
        cur = None;
    }
    if rec.kind != UndoKind::Update {
        return Ok(());
    }
    // The replaced keys: computed from a whole old value, or carried by a
    // delta for the indexes whose key the change changed. A delta says
    // nothing of an index created after it, and needs not: no such
    // index has an entry of the version it replaced (undo U9,
    // `online_index` OI6).
    let whole = match &rec.old {
        Some(OldVersion::Whole(old)) => {
            let (_, old_row) = table::split_rec(old)?;
            Some(table::decode(schema, &old_row)?)
        }
        _ => None,
    };
    for i in schema.live_indexes().filter(|&i| rec.may_have_changed(i)) {
        let k = match &whole {
            Some(old_values) => table::sec_key_of(schema, i, old_values),
            None => match rec.delta_key(i) {
                Some(k) => k.to_vec(),
                None => continue,
            },
        };
        if !table::needed_has_key(db, schema, i, &k, cur.clone(), bound, false)?
            && let Some(tree) = table::secondary(store, schema, i)
        {
            tree.delete(&table::entry_key(&k, &rec.key))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::PURGE_NICE;
    use crate::db::{Db, Options};
    use crate::io::SimFs;

    /// The nice values of this process's threads named `quill-purge`
    /// (field 19 of `/proc/self/task/<tid>/stat`).
    fn purge_thread_nices() -> Vec<i32> {
        let mut out = Vec::new();
        for t in std::fs::read_dir("/proc/self/task").unwrap() {
            let dir = t.unwrap().path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if comm.trim_end() != "quill-purge" {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
                continue; // the thread ended meanwhile
            };
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            out.push(after.split_whitespace().nth(16).unwrap().parse().unwrap());
        }
        out
    }

    /// The purge thread lowers its own priority to nice 19 (and only its
    /// own: the test thread keeps its nice value). Other tests may start
    /// purge threads meanwhile, so the check waits until each thread seen
    /// has lowered itself.
    #[test]
    fn the_purge_thread_runs_at_the_lowest_priority() {
        let before = rustix::process::getpriority_process(None).unwrap();
        let fs = SimFs::new(0x9e37);
        let opts = Options {
            store: crate::store::test_options(),
            ..Options::default()
        };
        assert!(opts.purge, "purge runs by default");
        let db = Db::open_with(Arc::new(fs.clone()), Path::new("/db"), opts).unwrap();
        let t0 = Instant::now();
        loop {
            let nices = purge_thread_nices();
            if !nices.is_empty() && nices.iter().all(|&n| n == PURGE_NICE) {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "purge threads' nice values: {nices:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let tid = rustix::thread::gettid();
        assert_eq!(
            rustix::process::getpriority_process(Some(tid)).unwrap(),
            before
        );
        db.close().unwrap();
    }
}
