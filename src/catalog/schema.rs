//! Table schemas and the catalog that stores them durably in a B+tree.
//!
//! The catalog is itself a B+tree (its root in the store's root slot 0),
//! keyed by table name, whose values are versioned JSON schemas: table id,
//! columns, primary key, the root pages of the clustered index and of
//! each secondary index. It is loaded into memory at open.
//!
//! Invariants:
//! * C1. A schema is validated before it is stored: a non-empty name of
//!   at most 128 bytes, at least one column, column names unique, primary
//!   key columns exist and are NOT NULL (no primary key: a hidden int64
//!   row id is the key), index names unique, index columns exist.
//! * C2. A table's B+trees are created (and durable) before its catalog
//!   entry is written, and the entry is durable before `create_table`
//!   returns. A crash in between leaves unreachable pages, never a catalog
//!   entry naming a tree that does not exist.
//! * C3. Table ids are unique and never reused: the next id is one above
//!   the highest stored, and at least the table id floor, which every
//!   dropped table's id is below (`store::drops` DR2).
//! * C4. Keys fit the B+tree (BT3): for every key a table writes, the
//!   primary key, and each secondary key followed by the primary key, the
//!   longest encoding its column types allow
//!   ([`crate::catalog::keycode::max_encoded_len`]: a text or bytes column
//!   of `max_len` bytes takes up to `3 + 2 * max_len`, since zero bytes
//!   are escaped) is at most the tree's key limit (a sixteenth of a page:
//!   1,019 bytes on 16 KiB pages, 251 on 4 KiB pages). `create_table`
//!   and `add_index` refuse a definition that breaks it, so no statement
//!   can build a key that does not fit. Tables created by builds before
//!   this rule keep working: statements also check the keys they build
//!   before writing anything (`db::txn`).
//! * C5. A dropped secondary index keeps its position in `def.indexes`
//!   and `index_roots` for the table's life (undo records name indexes by
//!   position) and is listed in `dropped_indexes`; nothing reads or
//!   writes it after the schema that drops it is installed, its name is
//!   free for a new index, and its root may be freed and reused, so code
//!   reaches secondary trees only through live positions
//!   (`TableSchema::live_indexes`, `db::table::secondary`).
//! * C6. An index being built online (`db::online_index`) is listed in
//!   `building_indexes`: writers, rollback and purge keep its entries like
//!   any live index's, but no reader, planner, uniqueness check or `check`
//!   uses it until the build removes it from the list. Its entry is
//!   written with version [`SCHEMA_VERSION_BUILDING`], so a build of
//!   Quill that knows nothing of half-built indexes refuses the database
//!   instead of reading one as complete; an entry with that version and
//!   no building index, or the other way round, is corrupt. A database
//!   opened after a crash drops every index still listed (its build died
//!   with the process).

use std::collections::BTreeMap;
use std::ops::Bound::Unbounded;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::types::{Column, ColumnType, check_value};
use crate::btree::{Direction, Tree};
use crate::log::Durability;
use crate::page::PageId;
use crate::store::Store;
use crate::{Error, Result};

/// Root slot of the catalog tree.
pub const CATALOG_ROOT_SLOT: usize = 0;
/// Schema format version.
pub const SCHEMA_VERSION: u32 = 1;
/// Format version of an entry that lists an index being built (C6).
pub const SCHEMA_VERSION_BUILDING: u32 = 2;
/// Most secondary indexes on one table (the undo record's changed-index
/// mask has room for this many, see `txn::undo`).
pub const MAX_INDEXES: usize = 48;
/// The longest [`Column::declared_type`], in bytes.
pub const MAX_DECLARED_TYPE_LEN: usize = 64;

/// A secondary index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexDef {
    /// Index name (unique within the table).
    pub name: String,
    /// Indexed columns, by position in the table.
    pub columns: Vec<usize>,
    /// At most one row per key.
    pub unique: bool,
}

/// What `create_table` is asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableDef {
    /// Table name.
    pub name: String,
    /// Columns.
    pub columns: Vec<Column>,
    /// Primary key columns by position; empty for a hidden int64 row id.
    pub primary_key: Vec<usize>,
    /// Secondary indexes.
    pub indexes: Vec<IndexDef>,
}

/// A stored table: its definition, id and index roots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableSchema {
    /// Format version of this record.
    pub version: u32,
    /// Unique, never reused (C3).
    pub id: u64,
    /// The definition.
    pub def: TableDef,
    /// Root page of the clustered index.
    pub clustered_root: u64,
    /// Root pages of the secondary indexes, in `def.indexes` order.
    pub index_roots: Vec<u64>,
    /// Positions in `def.indexes` of indexes that were dropped (C5):
    /// they keep their place, so that positions recorded in undo records
    /// keep naming the same index, but nothing reads or writes them, their
    /// names are free, and their trees are freed (or listed to be) by the
    /// store's pending drops. Absent from records written before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_indexes: Vec<usize>,
    /// Positions in `def.indexes` of live indexes still being built
    /// online (C6): maintained by every write, used by no read. Absent
    /// from records with none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub building_indexes: Vec<usize>,
}

impl TableSchema {
    /// The format version this schema is stored with (C6).
    pub fn format_version(&self) -> u32 {
        if self.building_indexes.is_empty() {
            SCHEMA_VERSION
        } else {
            SCHEMA_VERSION_BUILDING
        }
    }

    /// Whether secondary index `i` exists and was not dropped.
    pub fn index_is_live(&self, i: usize) -> bool {
        i < self.def.indexes.len() && !self.dropped_indexes.contains(&i)
    }

    /// The positions of the indexes that were not dropped: every index a
    /// write must keep, including those being built (C6).
    pub fn live_indexes(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.def.indexes.len()).filter(|&i| !self.dropped_indexes.contains(&i))
    }

    /// Whether secondary index `i` is live and built (C6): readers,
    /// planners and uniqueness checks use only such indexes.
    pub fn index_is_ready(&self, i: usize) -> bool {
        self.index_is_live(i) && !self.building_indexes.contains(&i)
    }

    /// The positions of the indexes that are live and built (C6).
    pub fn ready_indexes(&self) -> impl Iterator<Item = usize> + '_ {
        self.live_indexes()
            .filter(|i| !self.building_indexes.contains(i))
    }

    /// The position of the live index named `name` (built or not: its
    /// name is taken either way).
    pub fn index_position(&self, name: &str) -> Option<usize> {
        self.live_indexes()
            .find(|&i| self.def.indexes.get(i).is_some_and(|ix| ix.name == name))
    }
}

fn invalid(reason: String) -> Error {
    Error::InvalidArgument {
        what: "table definition",
        reason,
    }
}

impl TableDef {
    /// Check the definition (C1).
    pub fn validate(&self) -> Result<()> {
        self.validate_except(&[])
    }

    /// Check the definition (C1), leaving out the indexes at positions
    /// `dropped` (their names are free, C5).
    pub fn validate_except(&self, dropped: &[usize]) -> Result<()> {
        if self.name.is_empty() || self.name.len() > 128 {
            return Err(invalid(format!(
                "table name {:?} must be 1 to 128 bytes",
                self.name
            )));
        }
        if self.columns.is_empty() {
            return Err(invalid(format!("table {} has no columns", self.name)));
        }
        let mut names = std::collections::HashSet::new();
        for c in &self.columns {
            if c.name.is_empty() || !names.insert(c.name.as_str()) {
                return Err(invalid(format!(
                    "column name {:?} is empty or repeated",
                    c.name
                )));
            }
            if let Some(d) = &c.default {
                check_value(c, d).map_err(|e| invalid(format!("the default of {e}")))?;
            }
            if let Some(t) = &c.declared_type
                && (t.is_empty() || t.len() > MAX_DECLARED_TYPE_LEN)
            {
                return Err(invalid(format!(
                    "column {}: declared type {t:?} must be 1 to {MAX_DECLARED_TYPE_LEN} bytes",
                    c.name
                )));
            }
        }
        for &k in &self.primary_key {
            let c = self
                .columns
                .get(k)
                .ok_or_else(|| invalid(format!("primary key column {k} does not exist")))?;
            if c.nullable {
                return Err(invalid(format!(
                    "primary key column {} must be NOT NULL",
                    c.name
                )));
            }
        }
        let mut pk = self.primary_key.clone();
        pk.sort_unstable();
        pk.dedup();
        if pk.len() != self.primary_key.len() {
            return Err(invalid("a primary key column is repeated".to_string()));
        }
        if self.indexes.len() > MAX_INDEXES {
            return Err(invalid(format!(
                "{} secondary indexes; at most {MAX_INDEXES}",
                self.indexes.len()
            )));
        }
        let mut inames = std::collections::HashSet::new();
        for (_, ix) in self
            .indexes
            .iter()
            .enumerate()
            .filter(|(i, _)| !dropped.contains(i))
        {
            if ix.name.is_empty() || !inames.insert(ix.name.as_str()) {
                return Err(invalid(format!(
                    "index name {:?} is empty or repeated",
                    ix.name
                )));
            }
            if ix.columns.is_empty() {
                return Err(invalid(format!("index {} has no columns", ix.name)));
            }
            if let Some(k) = ix.columns.iter().find(|&&k| k >= self.columns.len()) {
                return Err(invalid(format!(
                    "index {} names column {k}, which does not exist",
                    ix.name
                )));
            }
        }
        Ok(())
    }

    /// Check invariant C4: every key this table can write fits in
    /// `max_key_len` bytes (the B+tree limit of the store's page size).
    pub fn check_key_lengths(&self, max_key_len: usize) -> Result<()> {
        self.check_key_lengths_except(max_key_len, &[])
    }

    /// [`TableDef::check_key_lengths`] for the indexes not at positions
    /// `dropped`.
    pub fn check_key_lengths_except(&self, max_key_len: usize, dropped: &[usize]) -> Result<()> {
        let limit = max_key_len as u64;
        // The longest encoding of `cols` (of only their fixed-size ones,
        // for the advice on how long a variable one may be).
        let worst = |cols: &[usize], fixed_only: bool| -> u64 {
            cols.iter()
                .filter_map(|&k| self.columns.get(k))
                .filter(|c| !fixed_only || c.ty.fixed_size().is_some())
                .map(|c| super::keycode::max_encoded_len(&c.ty))
                .sum()
        };
        let describe = |cols: &[usize]| -> String {
            cols.iter()
                .filter_map(|&k| self.columns.get(k))
                .map(|c| format!("{} {}", c.name, c.ty))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let pk_len = if self.primary_key.is_empty() {
            super::keycode::max_encoded_len(&ColumnType::Int64)
        } else {
            worst(&self.primary_key, false)
        };
        let pk_desc = if self.primary_key.is_empty() {
            "the hidden row id".to_string()
        } else {
            format!("({})", describe(&self.primary_key))
        };
        let advice = |fixed: u64| -> String {
            let room = limit.saturating_sub(fixed).saturating_sub(3) / 2;
            format!(
                "keys escape zero bytes, so a text or bytes value can take 3 + twice its length; \
                 with the other key columns as they are, one text or bytes column here may be \
                 declared at most {room} bytes long (or index fewer or shorter columns)"
            )
        };
        if pk_len > limit {
            let fixed = worst(&self.primary_key, true);
            return Err(invalid(format!(
                "table {}: its primary key {pk_desc} can take up to {pk_len} bytes, over the \
                 key limit of {limit} bytes for this database's page size; {}",
                self.name,
                advice(fixed)
            )));
        }
        for (_, ix) in self
            .indexes
            .iter()
            .enumerate()
            .filter(|(i, _)| !dropped.contains(i))
        {
            let len = worst(&ix.columns, false) + pk_len;
            if len > limit {
                let fixed = worst(&ix.columns, true) + pk_len;
                return Err(invalid(format!(
                    "table {}: index {} on ({}) has entries of up to {len} bytes (its key, then \
                     the primary key {pk_desc}), over the key limit of {limit} bytes for this \
                     database's page size; {}",
                    self.name,
                    ix.name,
                    describe(&ix.columns),
                    advice(fixed)
                )));
            }
        }
        Ok(())
    }

    /// Types of the primary key columns (a hidden row id is one int64).
    pub fn key_types(&self) -> Vec<ColumnType> {
        if self.primary_key.is_empty() {
            return vec![ColumnType::Int64];
        }
        self.primary_key
            .iter()
            .filter_map(|&k| self.columns.get(k).map(|c| c.ty))
            .collect()
    }
}

/// Decode the catalog entry stored under `key` (the value `Catalog::open`
/// reads from the catalog tree of tablespace `file`).
pub(crate) fn decode_entry(
    file: &std::path::Path,
    key: &[u8],
    value: &[u8],
) -> Result<TableSchema> {
    let schema: TableSchema = serde_json::from_slice(value).map_err(|e| Error::Corrupt {
        file: file.to_path_buf(),
        offset: 0,
        reason: format!("catalog entry {:?}: {e}", String::from_utf8_lossy(key)),
    })?;
    if schema.version != SCHEMA_VERSION && schema.version != SCHEMA_VERSION_BUILDING {
        return Err(Error::UnsupportedVersion {
            file: file.to_path_buf(),
            found: schema.version,
            supported: SCHEMA_VERSION_BUILDING,
        });
    }
    let n = schema.def.indexes.len();
    let distinct = |list: &[usize]| {
        let mut l = list.to_vec();
        l.sort_unstable();
        l.dedup();
        l.len() == list.len() && l.iter().all(|&i| i < n)
    };
    let building_ok = (schema.version == SCHEMA_VERSION_BUILDING)
        != schema.building_indexes.is_empty()
        && distinct(&schema.building_indexes)
        && !schema
            .building_indexes
            .iter()
            .any(|i| schema.dropped_indexes.contains(i));
    if schema.index_roots.len() != n || !distinct(&schema.dropped_indexes) || !building_ok {
        return Err(Error::Corrupt {
            file: file.to_path_buf(),
            offset: 0,
            reason: format!(
                "catalog entry {:?} (version {}): {} indexes, {} index roots, dropped positions {:?}, building positions {:?}",
                String::from_utf8_lossy(key),
                schema.version,
                n,
                schema.index_roots.len(),
                schema.dropped_indexes,
                schema.building_indexes
            ),
        });
    }
    Ok(schema)
}

/// The catalog of one store.
#[derive(Debug)]
pub struct Catalog {
    root: PageId,
    tables: Mutex<BTreeMap<String, Arc<TableSchema>>>,
}

impl Catalog {
    /// Open the catalog of `store`, creating its tree on first use. Every
    /// later call must pass the same store.
    pub fn open(store: &Store) -> Result<Catalog> {
        let root = match store.root(CATALOG_ROOT_SLOT)? {
            PageId(0) if store.is_read_only() => {
                return Err(Error::NeedsRecovery {
                    dir: store.dir().to_path_buf(),
                    reason: "it has no catalog yet (it was never opened as a database)".into(),
                });
            }
            PageId(0) => {
                let t = Tree::create(store)?;
                let mut mtr = store.mtr()?;
                store.set_root(&mut mtr, CATALOG_ROOT_SLOT, t.root())?;
                if let Some(lsn) = mtr.commit()? {
                    store.commit(lsn, Durability::Sync)?;
                }
                t.root()
            }
            r => r,
        };
        let tree = Tree::open(store, root);
        let mut tables = BTreeMap::new();
        for item in tree.range(Unbounded, Unbounded, Direction::Forward) {
            let (k, v) = item?;
            let schema = decode_entry(store.pool().file().path(), &k, &v)?;
            tables.insert(schema.def.name.clone(), Arc::new(schema));
        }
        Ok(Catalog {
            root,
            tables: Mutex::new(tables),
        })
    }

    /// The schema of table `name`.
    pub fn table(&self, name: &str) -> Option<Arc<TableSchema>> {
        self.tables.lock().get(name).cloned()
    }

    /// Every table, by name.
    pub fn tables(&self) -> Vec<Arc<TableSchema>> {
        self.tables.lock().values().cloned().collect()
    }

    /// Create a table (C1, C2, C3); durable when this returns.
    pub fn create_table(&self, store: &Store, def: TableDef) -> Result<Arc<TableSchema>> {
        def.validate()?;
        def.check_key_lengths(Tree::open(store, self.root).max_key_len())?;
        self.create_validated(store, def)
    }

    /// Create a table as builds before invariant C4 did: without the key
    /// length check (tests of how such tables are handled).
    #[cfg(test)]
    pub(crate) fn create_table_before_c4(
        &self,
        store: &Store,
        def: TableDef,
    ) -> Result<Arc<TableSchema>> {
        def.validate()?;
        self.create_validated(store, def)
    }

    fn create_validated(&self, store: &Store, def: TableDef) -> Result<Arc<TableSchema>> {
        let mut tables = self.tables.lock();
        if tables.contains_key(&def.name) {
            return Err(Error::TableExists { name: def.name });
        }
        let floor = crate::store::drops::table_id_floor(store)?;
        let id = (tables.values().map(|t| t.id).max().unwrap_or(0) + 1).max(floor);
        let clustered_root = Tree::create(store)?.root().0;
        let mut index_roots = Vec::with_capacity(def.indexes.len());
        for _ in &def.indexes {
            index_roots.push(Tree::create(store)?.root().0);
        }
        let schema = TableSchema {
            version: SCHEMA_VERSION,
            id,
            def,
            clustered_root,
            index_roots,
            dropped_indexes: Vec::new(),
            building_indexes: Vec::new(),
        };
        let schema = Arc::new(schema);
        self.store_entry(store, &schema)?;
        tables.insert(schema.def.name.clone(), schema.clone());
        Ok(schema)
    }

    /// Write `schema`'s catalog entry and make it durable.
    fn store_entry(&self, store: &Store, schema: &TableSchema) -> Result<()> {
        let tree = Tree::open(store, self.root);
        let json = serde_json::to_vec(schema).map_err(|e| invalid(e.to_string()))?;
        if json.len() > tree.max_value_len() {
            return Err(Error::LimitExceeded {
                what: "table definition size",
                actual: json.len() as u64,
                max: tree.max_value_len() as u64,
            });
        }
        let lsn = tree.put(schema.def.name.as_bytes(), &json)?;
        store.commit(lsn, Durability::Sync)
    }

    /// Remove table `name`'s entry, durably: the commit point of a drop
    /// (its trees were listed as pending drops first, `store::drops` DR1).
    pub fn drop_table(&self, store: &Store, name: &str) -> Result<()> {
        let mut tables = self.tables.lock();
        if !tables.contains_key(name) {
            return Err(Error::NoSuchTable {
                name: name.to_string(),
            });
        }
        let tree = Tree::open(store, self.root);
        if let Some(lsn) = tree.delete(name.as_bytes())? {
            store.commit(lsn, Durability::Sync)?;
        }
        tables.remove(name);
        Ok(())
    }

    /// Mark secondary index `i` of table `name` dropped (C5); durable
    /// when this returns. Returns the new schema.
    pub fn drop_index(&self, store: &Store, name: &str, i: usize) -> Result<Arc<TableSchema>> {
        self.change(store, name, |schema| {
            assert!(
                schema.index_is_live(i),
                "catalog C5: dropping index {i} of {name}, which is not a live index"
            );
            schema.dropped_indexes.push(i);
            schema.building_indexes.retain(|&b| b != i);
            Ok(())
        })
    }

    /// Whether `root` is a tree in use (the clustered tree or a live
    /// index) of the table with id `table`, which is in the catalog.
    pub fn tree_is_live(&self, table: u64, root: u64) -> bool {
        self.tables.lock().values().any(|t| {
            t.id == table
                && (t.clustered_root == root
                    || t.live_indexes()
                        .any(|i| t.index_roots.get(i) == Some(&root)))
        })
    }

    /// Whether a table with id `id` is in the catalog.
    pub fn has_table_id(&self, id: u64) -> bool {
        self.tables.lock().values().any(|t| t.id == id)
    }

    /// Add secondary index `index`, whose tree (already built and durable,
    /// C2, or empty and `building`, C6) has root `root`, to table `name`;
    /// durable when this returns.
    pub fn add_index(
        &self,
        store: &Store,
        name: &str,
        index: IndexDef,
        root: PageId,
        building: bool,
    ) -> Result<Arc<TableSchema>> {
        let max_key_len = Tree::open(store, self.root).max_key_len();
        self.change(store, name, |schema| {
            schema.def.indexes.push(index);
            schema.index_roots.push(root.0);
            if building {
                schema.building_indexes.push(schema.def.indexes.len() - 1);
            }
            schema.def.validate_except(&schema.dropped_indexes)?;
            schema
                .def
                .check_key_lengths_except(max_key_len, &schema.dropped_indexes)
        })
    }

    /// Mark index `i` of table `name`, built online, ready (C6): from the
    /// returned schema on, readers may use it. Durable when this returns.
    pub fn finish_index(&self, store: &Store, name: &str, i: usize) -> Result<Arc<TableSchema>> {
        self.change(store, name, |schema| {
            assert!(
                schema.index_is_live(i) && schema.building_indexes.contains(&i),
                "catalog C6: finishing index {i} of {name}, which is not being built"
            );
            schema.building_indexes.retain(|&b| b != i);
            Ok(())
        })
    }

    /// Change table `name`'s schema with `f` and store it (its format
    /// version set to what it now holds, C6); durable when this returns.
    /// Returns the new schema.
    fn change(
        &self,
        store: &Store,
        name: &str,
        f: impl FnOnce(&mut TableSchema) -> Result<()>,
    ) -> Result<Arc<TableSchema>> {
        let mut tables = self.tables.lock();
        let old = tables.get(name).ok_or_else(|| Error::NoSuchTable {
            name: name.to_string(),
        })?;
        let mut schema = (**old).clone();
        f(&mut schema)?;
        schema.version = schema.format_version();
        let schema = Arc::new(schema);
        self.store_entry(store, &schema)?;
        tables.insert(name.to_string(), schema.clone());
        Ok(schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{CrashMode, SimFs};
    use std::path::Path;

    use crate::store::test_options as opts;

    fn def(name: &str) -> TableDef {
        TableDef {
            name: name.into(),
            columns: vec![
                Column::new("id", ColumnType::Int64, false),
                Column::new("name", ColumnType::Text { max_len: 100 }, true),
                Column::new("score", ColumnType::Float64, true),
            ],
            primary_key: vec![0],
            indexes: vec![IndexDef {
                name: "by_name".into(),
                columns: vec![1],
                unique: false,
            }],
        }
    }

    #[test]
    fn tables_survive_reopen_and_crash() {
        let fs = SimFs::new(1);
        let dir = Path::new("/db");
        let store = Store::create(Arc::new(fs.clone()), dir, opts()).unwrap();
        {
            let cat = Catalog::open(&store).unwrap();
            let a = cat.create_table(&store, def("a")).unwrap();
            let b = cat.create_table(&store, def("b")).unwrap();
            assert_ne!(a.id, b.id);
            assert_ne!(a.clustered_root, b.clustered_root);
            assert!(matches!(
                cat.create_table(&store, def("a")),
                Err(Error::TableExists { .. })
            ));
        }
        // Power loss right after: both tables were made durable.
        let fs2 = fs.crash(CrashMode::DropUnsynced);
        drop(store);
        let store = Store::open(Arc::new(fs2), dir, opts()).unwrap();
        let cat = Catalog::open(&store).unwrap();
        let names: Vec<_> = cat.tables().iter().map(|t| t.def.name.clone()).collect();
        assert_eq!(names, vec!["a", "b"]);
        assert_eq!(cat.table("a").unwrap().def, def("a"));
        let c = cat.create_table(&store, def("c")).unwrap();
        assert_eq!(c.id, 3, "ids are never reused");
    }

    #[test]
    fn bad_definitions_are_rejected() {
        let mut d = def("t");
        d.primary_key = vec![1]; // nullable
        assert!(d.validate().is_err());
        let mut d = def("t");
        d.columns.push(Column::new("id", ColumnType::Bool, false));
        assert!(d.validate().is_err());
        let mut d = def("t");
        d.indexes[0].columns = vec![7];
        assert!(d.validate().is_err());
        let mut d = def("");
        d.primary_key.clear();
        assert!(d.validate().is_err());
        let mut d = def("t");
        d.primary_key.clear();
        assert!(d.validate().is_ok());
        assert_eq!(d.key_types(), vec![ColumnType::Int64]);
    }

    #[test]
    fn entries_with_inconsistent_index_positions_are_corrupt() {
        let good = TableSchema {
            version: SCHEMA_VERSION,
            id: 7,
            def: def("t"),
            clustered_root: 3,
            index_roots: vec![4],
            dropped_indexes: vec![],
            building_indexes: vec![],
        };
        let path = Path::new("f");
        let ok = serde_json::to_vec(&good).unwrap();
        assert_eq!(decode_entry(path, b"t", &ok).unwrap(), good);
        // Written before dropped indexes existed: the field is absent.
        assert!(!String::from_utf8_lossy(&ok).contains("dropped_indexes"));
        let mut dropped = good.clone();
        dropped.dropped_indexes = vec![0];
        let bytes = serde_json::to_vec(&dropped).unwrap();
        assert_eq!(decode_entry(path, b"t", &bytes).unwrap(), dropped);
        assert!(!String::from_utf8_lossy(&ok).contains("building_indexes"));
        let building = TableSchema {
            version: SCHEMA_VERSION_BUILDING,
            building_indexes: vec![0],
            ..good.clone()
        };
        let bytes = serde_json::to_vec(&building).unwrap();
        assert_eq!(decode_entry(path, b"t", &bytes).unwrap(), building);
        // A version this build does not know.
        let future = TableSchema {
            version: 3,
            ..good.clone()
        };
        let bytes = serde_json::to_vec(&future).unwrap();
        assert!(matches!(
            decode_entry(path, b"t", &bytes),
            Err(Error::UnsupportedVersion { found: 3, .. })
        ));
        for bad in [
            // Building index listed under the old version (C6).
            TableSchema {
                building_indexes: vec![0],
                ..good.clone()
            },
            // The building version with nothing being built.
            TableSchema {
                version: SCHEMA_VERSION_BUILDING,
                ..good.clone()
            },
            TableSchema {
                version: SCHEMA_VERSION_BUILDING,
                building_indexes: vec![1],
                ..good.clone()
            },
            TableSchema {
                version: SCHEMA_VERSION_BUILDING,
                building_indexes: vec![0],
                dropped_indexes: vec![0],
                ..good.clone()
            },
            TableSchema {
                index_roots: vec![],
                ..good.clone()
            },
            TableSchema {
                dropped_indexes: vec![1],
                ..good.clone()
            },
            TableSchema {
                dropped_indexes: vec![0, 0],
                ..good.clone()
            },
        ] {
            let bytes = serde_json::to_vec(&bad).unwrap();
            assert!(
                matches!(decode_entry(path, b"t", &bytes), Err(Error::Corrupt { .. })),
                "{bad:?}"
            );
        }
    }
}
