//! `quill check`: verify every table's indexes against each other.
//!
//! Checked, per table: the B+tree structure of the clustered index and of
//! every secondary index; every live row (newest version not
//! delete-marked) has its entry in every secondary index; every secondary
//! entry belongs to a version of its row that still exists (the newest, one
//! reachable through undo, or one whose undo record awaits purge: an entry
//! purge has not reached yet is allowed, TB1); no
//! two live rows share a key of a unique index. Also the undo tree's
//! structure. Meant for a quiescent database (no concurrent writers).

use std::collections::HashSet;
use std::ops::Bound;

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::btree::Direction;

use super::{DbInner, table};
use crate::txn::OldVersion;

/// What [`crate::db::Db::check`] found.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CheckReport {
    /// Tables checked.
    pub tables: u64,
    /// Clustered records (live or delete-marked).
    pub records: u64,
    /// Live rows.
    pub live_rows: u64,
    /// Secondary index entries.
    pub index_entries: u64,
    /// Every inconsistency found, in words (empty: all good).
    pub problems: Vec<String>,
}

impl CheckReport {
    /// Whether nothing was wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

pub(crate) fn check(db: &DbInner) -> Result<CheckReport> {
    let mut r = CheckReport::default();
    let store = &db.store;
    // Purge changes entries and records between the two passes; pause it.
    let _no_purge: Vec<_> = db.purge_locks.iter().map(|l| l.lock()).collect();
    db.undo.verify(store)?;
    let bound = db.purge_bound();
    // Entries of versions whose undo awaits purge: purge works through
    // transactions in any order, so such a version may no longer be
    // reachable from its row while its entry still waits for purge.
    let mut pending: HashSet<(u64, usize, Vec<u8>)> = HashSet::new();
    let mut in_segments = Vec::new();
    for seg in db.segs.existing(store)? {
        in_segments.extend(
            db.segs
                .chain_records(store, seg.first, seg.trx)?
                .into_iter()
                .map(|r| Ok(r.rec)),
        );
    }
    for rec in db.undo.all_records(store).chain(in_segments) {
        let rec = rec?;
        let (Some(old), Some(t)) = (&rec.old, db.table_by_id(rec.table)) else {
            continue;
        };
        let schema = t.schema.read().clone();
        match old {
            OldVersion::Whole(old) => {
                let (_, row) = table::split_rec(old)?;
                let values = table::decode(&schema, &row)?;
                for i in schema.live_indexes() {
                    let k = table::sec_key_of(&schema, i, &values);
                    pending.insert((schema.id, i, table::entry_key(&k, &rec.key)));
                }
            }
            // A delta's replaced version shares every other key with the
            // version that replaced it, which is checked from its row or
            // its own record (undo U9).
            OldVersion::Delta(_) => {
                for (i, k) in rec.delta_keys() {
                    pending.insert((schema.id, i, table::entry_key(k, &rec.key)));
                }
            }
        }
    }
    for schema in db.catalog.tables() {
        r.tables += 1;
        let name = &schema.def.name;
        let ctree = table::clustered(store, &schema);
        ctree.verify()?;
        for item in ctree.range(Bound::Unbounded, Bound::Unbounded, Direction::Forward) {
            let (pk, v) = item?;
            r.records += 1;
            let (h, row) = table::split_rec(&v)?;
            if h.deleted {
                continue;
            }
            r.live_rows += 1;
            let values = table::decode(&schema, &row)?;
            for (i, ix) in schema.def.indexes.iter().enumerate() {
                // Dropped indexes (catalog C5) have no tree to check; one
                // being built (C6) is not complete yet.
                if !schema.index_is_ready(i) {
                    continue;
                }
                let Some(t) = table::secondary(store, &schema, i) else {
                    continue;
                };
                let k = table::sec_key_of(&schema, i, &values);
                if t.get(&table::entry_key(&k, &pk))?.is_none() {
                    r.problems.push(format!(
                        "table {name}: row {pk:02x?} has no entry in index {}",
                        ix.name
                    ));
                }
            }
        }
        for (i, ix) in schema.def.indexes.iter().enumerate() {
            if !schema.index_is_ready(i) {
                continue;
            }
            let Some(t) = table::secondary(store, &schema, i) else {
                r.problems
                    .push(format!("table {name}: index {} has no tree", ix.name));
                continue;
            };
            t.verify()?;
            let mut prev_live: Option<Vec<u8>> = None;
            for item in t.range(Bound::Unbounded, Bound::Unbounded, Direction::Forward) {
                let (k, _) = item?;
                r.index_entries += 1;
                let (sec, pk) = match table::split_entry(&schema, i, &k) {
                    Ok(x) => x,
                    Err(e) => {
                        r.problems
                            .push(format!("table {name}: index {}: bad entry: {e}", ix.name));
                        continue;
                    }
                };
                let cur = table::read_rec(store, &schema, pk)?;
                if !pending.contains(&(schema.id, i, k.clone()))
                    && !table::needed_has_key(db, &schema, i, sec, cur.clone(), bound, true)?
                {
                    let newest = cur
                        .as_ref()
                        .map(|(h, _)| format!("{h:?}"))
                        .unwrap_or_else(|| "no record".into());
                    r.problems.push(format!(
                        "table {name}: index {} entry {k:02x?} matches no version of its row (newest version: {newest})",
                        ix.name
                    ));
                    continue;
                }
                // Uniqueness among live rows whose newest version has this key.
                if ix.unique
                    && let Some((h, row)) = &cur
                    && !h.deleted
                {
                    let values = table::decode(&schema, row)?;
                    if table::sec_key_of(&schema, i, &values) == sec
                        && !table::sec_key_has_null(&schema, i, &values)
                    {
                        if prev_live.as_deref() == Some(sec) {
                            r.problems.push(format!(
                                "table {name}: unique index {} has two live rows with key {sec:02x?}",
                                ix.name
                            ));
                        }
                        prev_live = Some(sec.to_vec());
                    }
                }
            }
        }
    }
    Ok(r)
}
