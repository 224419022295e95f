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
//! * DROP3. A pending drop whose tree the catalog still uses (the
//!   table's clustered tree, or a live index's) is not worked on: the
//!   drop failed before its commit point. At open such
//!   entries are discarded; while open they wait (the failure left the
//!   catalog in memory unsure, and the next open decides from the disk).
//! * DROP5. DROP INDEX ([`drop_index`]) frees one tree the same way:
//!   under the DDL lock and the table's schema write lock (no write
//!   statement half done), the tree is listed with a fresh `N` (DR1),
//!   then the catalog marks the index dropped (its commit point, catalog
//!   C5) and the new schema is installed. Transactions above `N` and
//!   every statement that takes the new schema never touch the tree;
//!   rollback and purge reach only live indexes. The tree is emptied
//!   under DROP2's conditions, with "the schema" being the one the table
//!   had before the drop (`DbInner::dropped` holds it by root).
//! * DROP4. `DbInner::pending_drops` is the length of the superblock's
//!   list: set from it at open, raised after [`drop_table`] lists trees,
//!   lowered after [`step`] frees one. While it is 0 the purge thread's
//!   [`step`] returns at once, reading nothing; otherwise it reads the
//!   list itself, under the purge locks, and acts on that.
//! * DROP6. A drop never fails only because the purge thread is behind.
//!   When the superblock's list has no room for its trees, the drop frees
//!   earlier drops' trees itself ([`ddl_with_room`]: the purge thread's
//!   [`step`], with no other lock held, and only when every purge lock is
//!   free at once: a purger may be waiting for a row lock of the
//!   dropper's own transaction, so waiting for its purge lock could wait
//!   for ever). It goes on while that frees entries, and fails with
//!   `LimitExceeded`, having changed nothing, only once no entry could be
//!   freed for the lock wait timeout (a transaction or statement older
//!   than the earlier drops still runs, perhaps the dropper's own). The
//!   room is checked again under the DDL lock, which every addition to
//!   the list holds, so a concurrent drop cannot take it in between.

use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use crate::page::space::DROP_SLOTS;
use crate::store::drops::{self, PendingDrop};
use crate::{Error, Result};

use super::DbInner;
use super::table::TableState;

/// Drop table `name` (steps 1-5 above); durable when this returns.
pub(crate) fn drop_table(db: &DbInner, name: &str) -> Result<()> {
    db.check_writable("dropping a table")?;
    // The trees the drop will list, counted before any lock is taken
    // (DROP6): a CREATE INDEX in between only makes `drops::add` refuse.
    let trees = 1 + db.table_state(name)?.schema.read().live_indexes().count();
    let _ddl = ddl_with_room(db, trees)?;
    let st = db.table_state(name)?;
    let mut guard = st.schema.write();
    let schema = guard.clone();
    st.dropped.store(true, Ordering::SeqCst);
    // From here on nobody clones `schema` (DROP2): the table's handles
    // hand out a copy, and the id map forgets it below.
    let trees: Vec<u64> = std::iter::once(schema.clustered_root)
        .chain(
            schema
                .live_indexes()
                .filter_map(|i| schema.index_roots.get(i).copied()),
        )
        .collect();
    {
        let mut held = db.dropped.lock();
        for &root in &trees {
            held.insert(root, schema.clone());
        }
    }
    st.install(&mut guard, Arc::new((*schema).clone()));
    // Steps 2 and 3; a failure in either leaves the table as it was.
    let listed = db
        .begin_slot()
        .map(|slot| {
            let id = slot.id();
            db.registry.release(slot);
            id
        })
        .and_then(|n| {
            let pending: Vec<PendingDrop> = trees
                .iter()
                .map(|&root| PendingDrop {
                    root: crate::page::PageId(root),
                    table: schema.id,
                    trx: n,
                })
                .collect();
            drops::add(&db.store, &pending).map(|()| pending)
        });
    let pending = match listed {
        Ok(pending) => pending,
        Err(e) => {
            // Nothing reached the catalog: the table stays (DROP3 discards
            // any entry that did reach the disk at the next open). The mark
            // goes under the schema's write lock, which purge reads it under
            // (a record purge skipped on a passing mark would never be
            // purged).
            st.dropped.store(false, Ordering::SeqCst);
            let mut held = db.dropped.lock();
            for root in &trees {
                held.remove(root);
            }
            return Err(e);
        }
    };
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

/// Drop secondary index `index` of table `table`: the index disappears
/// at once (catalog C5) and its tree is freed later, as a dropped
/// table's are (DROP5); durable when this returns.
pub(crate) fn drop_index(db: &DbInner, table: &str, index: &str) -> Result<()> {
    db.check_writable("dropping an index")?;
    let find = |schema: &crate::catalog::schema::TableSchema| {
        schema
            .index_position(index)
            .ok_or_else(|| Error::InvalidArgument {
                what: "index",
                reason: format!("table {table} has no index named {index}"),
            })
    };
    // A name that does not exist fails before any wait for room (DROP6).
    find(&db.table_state(table)?.schema.read())?;
    let _ddl = ddl_with_room(db, 1)?;
    let st = db.table_state(table)?;
    let mut guard = st.schema.write();
    st.check_live(&guard)?;
    let schema = guard.clone();
    let i = find(&schema)?;
    if st.builds.lock().contains(&i) {
        return Err(Error::InvalidArgument {
            what: "index",
            reason: format!(
                "index {index} of table {table} is still being built; cancel its CREATE INDEX instead"
            ),
        });
    }
    drop_position(db, table, &st, &mut guard, i)
}

/// Drop secondary index `i` of `table`, whose schema's write lock the
/// caller holds as `guard` (and the DDL lock): DROP5's steps from the
/// listing of its tree on. Also ends an online build (catalog C6).
pub(crate) fn drop_position(
    db: &DbInner,
    table: &str,
    st: &TableState,
    guard: &mut parking_lot::RwLockWriteGuard<'_, Arc<crate::catalog::schema::TableSchema>>,
    i: usize,
) -> Result<()> {
    let schema: Arc<crate::catalog::schema::TableSchema> = (**guard).clone();
    let index = schema
        .def
        .indexes
        .get(i)
        .map(|x| x.name.clone())
        .unwrap_or_default();
    // Catalog: a schema has one root per index (checked when loaded).
    let Some(&root) = schema.index_roots.get(i) else {
        return Err(Error::InvalidArgument {
            what: "index",
            reason: format!("table {table}: index {index} has no root"),
        });
    };
    // A drop of this index that failed before its commit point may have
    // listed the tree already (its entry waits while the catalog uses the
    // tree, DROP3) with an older `N`: that entry goes, so the tree is
    // listed once, with an `N` above every transaction that may write it.
    if drops::pending(&db.store)?.iter().any(|d| d.root.0 == root) {
        let gone = drops::discard(&db.store, |d| d.root.0 == root)?;
        db.pending_drops.fetch_sub(gone, Ordering::Relaxed);
    }
    // DROP5: statements that took `schema` may still read the tree.
    db.dropped.lock().insert(root, schema.clone());
    let n = {
        let slot = db.begin_slot()?;
        let id = slot.id();
        db.registry.release(slot);
        id
    };
    let entry = PendingDrop {
        root: crate::page::PageId(root),
        table: schema.id,
        trx: n,
    };
    if let Err(e) = drops::add(&db.store, &[entry]) {
        db.dropped.lock().remove(&root);
        return Err(e);
    }
    db.pending_drops.fetch_add(1, Ordering::Relaxed);
    // The commit point. An error leaves the index live in memory, so its
    // entry waits (DROP3), and the next open decides from the disk.
    let new = db.catalog.drop_index(&db.store, table, i)?;
    st.install(guard, new);
    tracing::info!(table, index, root, "index dropped");
    let (m, cv) = &db.purge_wake;
    *m.lock() = true;
    cv.notify_all();
    Ok(())
}

/// The DDL lock, taken when the superblock's list of pending drops has
/// room for `trees` more (DROP6): until then this thread frees earlier
/// drops' trees, with no lock held but the purge locks ([`try_step`]),
/// and waits while none can be freed, for up to the lock wait timeout
/// counted from the last entry freed. The room is checked again under
/// the DDL lock, which every addition to the list holds, so it is still
/// there when the caller lists its trees.
fn ddl_with_room(db: &DbInner, trees: usize) -> Result<parking_lot::MutexGuard<'_, ()>> {
    let timeout = db.opts.lock_wait_timeout;
    let mut deadline = Instant::now() + timeout;
    let mut nap = Duration::from_millis(1);
    let mut last = usize::MAX;
    loop {
        let listed = drops::pending(&db.store)?.len();
        if listed + trees <= DROP_SLOTS {
            let ddl = db.ddl.lock();
            if drops::pending(&db.store)?.len() + trees <= DROP_SLOTS {
                return Ok(ddl);
            }
            // Another drop took the room first: free more.
            continue;
        }
        let freed = try_step(db, 1024)?.unwrap_or(0);
        // Progress: entries this thread deleted, or a tree freed since the
        // last look (by this thread, the purge thread or another drop).
        if freed > 0 || listed < last {
            deadline = Instant::now() + timeout;
            nap = Duration::from_millis(1);
        }
        last = listed;
        if freed > 0 {
            continue;
        }
        // Nothing can be freed now: an older transaction or statement
        // holds every listed tree, or a purger holds a purge lock.
        let now = Instant::now();
        if now >= deadline {
            tracing::warn!(
                listed,
                trees,
                "a drop found no room among the trees waiting to be freed, and none could be freed"
            );
            return Err(Error::LimitExceeded {
                what: "trees waiting to be freed after a drop (none could be freed for the lock wait timeout: a transaction or statement older than the earlier drops still runs, perhaps this session's own; retry once it ends)",
                actual: (listed + trees) as u64,
                max: DROP_SLOTS as u64,
            });
        }
        crate::wait::check("room among the trees waiting to be freed after a drop")?;
        std::thread::sleep(nap.min(deadline - now));
        nap = (nap * 2).min(Duration::from_millis(50));
    }
}

/// At open: discard pending drops whose tree is still in use by the
/// catalog (DROP3; a read-only open only leaves them out of its count,
/// and its purge never runs) and count the rest (DROP4).
pub(crate) fn at_open(db: &DbInner) -> Result<()> {
    let live = |d: &PendingDrop| db.catalog.tree_is_live(d.table, d.root.0);
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
    let purgers: Vec<_> = db.purge_locks.iter().map(|l| l.lock()).collect();
    step_locked(db, max, &purgers)
}

/// [`step`] if every purge lock is free now; `None` if one is held (for a
/// drop, whose own transaction may hold a row lock a purger waits for:
/// DROP6).
fn try_step(db: &DbInner, max: usize) -> Result<Option<usize>> {
    if db.pending_drops.load(Ordering::Relaxed) == 0 {
        return Ok(Some(0));
    }
    let Some(purgers) = db
        .purge_locks
        .iter()
        .map(|l| l.try_lock())
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    step_locked(db, max, &purgers).map(Some)
}

/// [`step`]'s work, with every purge lock held (`_purgers`).
fn step_locked(
    db: &DbInner,
    max: usize,
    _purgers: &[parking_lot::MutexGuard<'_, ()>],
) -> Result<usize> {
    let list = drops::pending(&db.store)?;
    let bound = db.purge_bound();
    // In use: referenced beyond the map's own copies (a table's trees
    // share one schema `Arc`, one copy per tree).
    let in_use = |root: u64| {
        let held = db.dropped.lock();
        held.get(&root).is_some_and(|s| {
            Arc::strong_count(s) > held.values().filter(|x| Arc::ptr_eq(x, s)).count()
        })
    };
    let Some(d) = list.iter().find(|d| {
        d.trx < bound && !db.catalog.tree_is_live(d.table, d.root.0) && !in_use(d.root.0)
    }) else {
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
    db.dropped.lock().remove(&d.root.0);
    if !db.catalog.has_table_id(d.table)
        && !list.iter().any(|x| x.table == d.table && x.root != d.root)
    {
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
