//! DROP TABLE: the table disappears at once; its pages are freed later,
//! by the purge thread, once no transaction that could still be using
//! them is running.
//!
//! A drop is DDL, not part of a transaction (as in MySQL): it commits on
//! its own and is durable when [`drop_table`] returns. Its steps:
//!
//! 1. Under the DDL lock and the table's schema write lock (so no write
//!    statement is half done on it), mark the table dropped.
//! 2. Take a transaction id `N` (a registry slot begun and released).
//! 3. List each of the table's trees as a pending drop with `N`, durably
//!    (`store::drops` DR1), raising the table id floor past the table.
//! 4. Delete the table's catalog entry, durably: the commit point.
//! 5. Forget the table's name in memory. Its id stays mapped until its
//!    last tree is freed: a transaction older than the drop may still
//!    roll back in it, and a scan older than the drop may still follow
//!    those rollbacks' versions.
//!
//! Then, once the purge bound passes `N`, the purge thread empties each
//! tree by ordinary B+tree deletes, a batch at a time, and frees its root
//! with its entry (DR3).
//!
//! Invariants:
//! * DROP1. No statement starts on a table after it is marked dropped:
//!   write statements check the mark holding the schema's read lock,
//!   which the drop holds for writing while it sets the mark; reads check
//!   it after taking the schema. The mark is set (SeqCst) before `N` is
//!   taken, so every transaction with an id above `N` sees it and never
//!   touches the table's trees.
//! * DROP2. A tree is emptied only when nothing can be using it:
//!   - the purge bound is above `N`, so every transaction with a slot
//!     that may have written it or may still roll back in it (ids up to
//!     `N`) has ended;
//!   - no statement still holds the schema the table had when it was
//!     dropped (its `Arc` is referenced by the drop's own copy alone).
//!     Every statement and scan on a table holds the schema `Arc` it took
//!     from the table's lock while it runs; the drop replaces the `Arc`
//!     under the write lock, so a statement that took the old one may
//!     have passed the DROP1 check and is waited for, and one that takes
//!     the new one fails that check. This covers reads that hold no
//!     registry slot (the READ COMMITTED fast path of `get`);
//!   - every undo partition's purge lock is held, so no purger is in the
//!     middle of a record of the table (purge skips records of a table
//!     marked dropped: nothing below the bound needs what it would
//!     remove, and the trees go whole). Rollback still works in a dropped
//!     table until it is freed (a scan older than the drop may read the
//!     versions it restores); after a restart the table is unknown and
//!     recovery skips its undo (no reader is left).
//! * DROP3. A pending drop whose table is still in the catalog is not
//!   worked on: the drop failed before its commit point. At open such
//!   entries are discarded; while open they wait (the failure left the
//!   catalog in memory unsure, and the next open decides from the disk).
//! * DROP4. `DbInner::pending_drops` is the length of the superblock's
//!   list: set from it at open, raised after [`drop_table`] lists trees,
//!   lowered after [`step`] frees one. While it is 0 the purge thread's
//!   [`step`] returns at once, reading nothing; otherwise it reads the
//!   list itself, under the purge locks, and acts on that.

use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

use crate::store::drops::{self, PendingDrop};
use crate::{Error, Result};

use super::DbInner;

/// Drop table `name` (steps 1-5 above); durable when this returns.
pub(crate) fn drop_table(db: &DbInner, name: &str) -> Result<()> {
    db.check_writable("dropping a table")?;
    let _ddl = db.ddl.lock();
    let Some(st) = db.tables.read().get(name).cloned() else {
        return Err(Error::NoSuchTable {
            name: name.to_string(),
        });
    };
    let mut guard = st.schema.write();
    let schema = guard.clone();
    st.dropped.store(true, Ordering::SeqCst);
    // From here on nobody clones `schema` (DROP2): the table's handles
    // hand out a copy, and the id map forgets it below.
    db.dropped.lock().insert(schema.id, schema.clone());
    *guard = Arc::new((*schema).clone());
    let n = {
        let slot = db.begin_slot()?;
        let id = slot.id();
        db.registry.release(slot);
        id
    };
    let trees = std::iter::once(schema.clustered_root).chain(schema.index_roots.iter().copied());
    let pending: Vec<PendingDrop> = trees
        .map(|root| PendingDrop {
            root: crate::page::PageId(root),
            table: schema.id,
            trx: n,
        })
        .collect();
    if let Err(e) = drops::add(&db.store, &pending) {
        // Nothing reached the catalog: the table stays (DROP3 discards any
        // entry that did reach the disk at the next open).
        st.dropped.store(false, Ordering::SeqCst);
        db.dropped.lock().remove(&schema.id);
        return Err(e);
    }
    db.pending_drops.fetch_add(pending.len(), Ordering::Relaxed);
    // An error here leaves the table marked dropped and its entries
    // listed; whether the catalog entry is gone is decided at the next
    // open (DROP3).
    db.catalog.drop_table(&db.store, name)?;
    drop(guard);
    db.tables.write().remove(name);
    tracing::info!(
        table = name,
        id = schema.id,
        trees = pending.len(),
        "table dropped"
    );
    let (m, cv) = &db.purge_wake;
    *m.lock() = true;
    cv.notify_all();
    Ok(())
}

/// At open: discard pending drops whose table is still in the catalog
/// (DROP3; a read-only open only leaves them out of its count, and its
/// purge never runs) and count the rest (DROP4).
pub(crate) fn at_open(db: &DbInner) -> Result<()> {
    let live = |d: &PendingDrop| db.catalog.has_table_id(d.table);
    if !db.read_only {
        let n = drops::discard(&db.store, live)?;
        if n > 0 {
            tracing::warn!(
                trees = n,
                "a table drop did not reach its commit point before the database closed; the table stays"
            );
        }
    }
    let left = drops::pending(&db.store)?
        .iter()
        .filter(|d| !live(d))
        .count();
    db.pending_drops.store(left, Ordering::Relaxed);
    Ok(())
}

/// Work on the oldest pending drop that may be worked on (DROP2, DROP3):
/// delete up to `max` of its tree's entries, or free its emptied root.
/// Returns the entries deleted plus trees freed (0: nothing to do).
pub(crate) fn step(db: &DbInner, max: usize) -> Result<usize> {
    if db.pending_drops.load(Ordering::Relaxed) == 0 {
        return Ok(0);
    }
    // The list is read again under every purge lock: two callers (the
    // purge thread and `Db::purge_now`) are serialised here, and the
    // second must not work on a tree the first has just freed.
    let _purgers: Vec<_> = db.purge_locks.iter().map(|l| l.lock()).collect();
    let list = drops::pending(&db.store)?;
    let bound = db.purge_bound();
    let in_use = |table: u64| {
        db.dropped
            .lock()
            .get(&table)
            .is_some_and(|s| Arc::strong_count(s) > 1)
    };
    let Some(d) = list
        .iter()
        .find(|d| d.trx < bound && !db.catalog.has_table_id(d.table) && !in_use(d.table))
    else {
        return Ok(0);
    };
    // Pairs with the release of the last statement's schema reference:
    // whatever it read of the tree happened before what follows.
    fence(Ordering::Acquire);
    let n = drops::empty_step(&db.store, d.root, max)?;
    if n > 0 {
        return Ok(n);
    }
    drops::finish(&db.store, d.root)?;
    db.pending_drops.fetch_sub(1, Ordering::Relaxed);
    if !list.iter().any(|x| x.table == d.table && x.root != d.root) {
        db.dropped.lock().remove(&d.table);
        db.by_id.write().remove(&d.table);
    }
    tracing::debug!(root = d.root.0, table = d.table, "dropped tree freed");
    Ok(1)
}

/// Finish every pending drop that may be worked on now; returns the
/// entries deleted plus trees freed.
pub(crate) fn run_all(db: &DbInner) -> Result<usize> {
    let mut total = 0;
    loop {
        let n = step(db, 1024)?;
        if n == 0 {
            return Ok(total);
        }
        total += n;
    }
}
