//! SQLite as a peer engine (cargo feature `peers`): the bundled library
//! through `rusqlite`, WAL journal, `synchronous=FULL` (every commit syncs
//! the WAL), one connection per client, tables and secondary indexes in
//! SQL. Statements are prepared once per connection (`prepare_cached`).
//!
//! Mapping: `Int32`/`Int64`/`Timestamp` are `INTEGER`, `Bool` is `INTEGER`
//! 0/1, `Float64` is `REAL`, `Text` is `TEXT`, `Bytes` is `BLOB`; a single
//! `Int64` primary key is `INTEGER PRIMARY KEY` (SQLite's row id, which a
//! NULL insert assigns automatically, as Quill does). A transaction that
//! writes is `BEGIN IMMEDIATE` ... `COMMIT` (it takes SQLite's one write
//! lock first, so two writers never deadlock upgrading a read lock); one
//! that only reads is a deferred `BEGIN`, which in WAL mode never waits
//! for a writer. Either is retried when SQLite reports the database busy
//! or locked; waits are SQLite's own busy handler (`busy_timeout`, 10 s).
//!
//! Given what Quill is given ([`SqliteOptions`]): the cache budget as a
//! memory map of the database (`mmap_size`, shared by every connection
//! through the OS page cache) and, split evenly over the clients, as each
//! connection's own page cache (`cache_size`), instead of SQLite's
//! default 2 MB per connection.
//!
//! Log syncs are not counted: SQLite syncs its WAL through its VFS, which
//! `rusqlite` does not let a caller wrap without a C shim, so reports say
//! "n/a" ([`Engine::syncs_note`]). With `synchronous=FULL` it makes one
//! WAL sync per commit, and more at checkpoints.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ErrorCode, ToSql, params_from_iter};

use super::engine::{Engine, Ops, RowSum, Session};
use quill::catalog::schema::{IndexDef, TableDef};
use quill::catalog::{ColumnType, Value};
use quill::{Error, Result};

const ENGINE: &str = "sqlite";

fn err(e: rusqlite::Error) -> Error {
    let retryable = matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    );
    Error::Peer {
        engine: ENGINE,
        reason: e.to_string(),
        retryable,
    }
}

/// A value bound as a statement parameter.
struct Param<'a>(&'a Value);

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0 {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Bool(b) => ToSqlOutput::Owned(rusqlite::types::Value::Integer(i64::from(*b))),
            Value::Int32(x) => ToSqlOutput::Owned(rusqlite::types::Value::Integer(i64::from(*x))),
            Value::Int64(x) | Value::Timestamp(x) => {
                ToSqlOutput::Owned(rusqlite::types::Value::Integer(*x))
            }
            Value::Float64(x) => ToSqlOutput::Owned(rusqlite::types::Value::Real(*x)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::Bytes(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

fn column_sql(ty: &ColumnType) -> &'static str {
    match ty {
        ColumnType::Bool | ColumnType::Int32 | ColumnType::Int64 | ColumnType::Timestamp => {
            "INTEGER"
        }
        ColumnType::Float64 => "REAL",
        ColumnType::Text { .. } => "TEXT",
        ColumnType::Bytes { .. } => "BLOB",
    }
}

fn from_sql(ty: &ColumnType, v: ValueRef<'_>) -> Value {
    match (ty, v) {
        (_, ValueRef::Null) => Value::Null,
        (ColumnType::Bool, ValueRef::Integer(x)) => Value::Bool(x != 0),
        (ColumnType::Int32, ValueRef::Integer(x)) => Value::Int32(x as i32),
        (ColumnType::Timestamp, ValueRef::Integer(x)) => Value::Timestamp(x),
        (_, ValueRef::Integer(x)) => Value::Int64(x),
        (_, ValueRef::Real(x)) => Value::Float64(x),
        (_, ValueRef::Text(t)) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        (_, ValueRef::Blob(b)) => Value::Bytes(b.to_vec()),
    }
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// What SQLite is given ([`super::engine::Setup`]).
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// Bytes of the database file mapped into memory (`mmap_size`); the
    /// same bytes split over `max_clients` connections' page caches.
    pub cache_bytes: u64,
    /// Most connections open at once.
    pub max_clients: usize,
}

/// SQLite's default page cache per connection, in KiB (`cache_size=-2000`).
const DEFAULT_CACHE_KIB: u64 = 2000;

/// SQLite with one connection per session.
pub struct SqliteEngine {
    path: PathBuf,
    options: SqliteOptions,
    /// What a connection got, read back from SQLite (which caps
    /// `mmap_size` at its compile-time limit): page cache KiB, map bytes.
    effective: (i64, i64),
    /// Shared by `Arc`: looking a table up is on every operation's path.
    tables: RwLock<HashMap<String, Arc<TableDef>>>,
}

impl SqliteEngine {
    /// Create (or open) the database file `dir/sqlite.db`.
    pub fn open(dir: &Path, options: &SqliteOptions) -> Result<SqliteEngine> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Peer {
            engine: ENGINE,
            reason: format!("creating {}: {e}", dir.display()),
            retryable: false,
        })?;
        let mut e = SqliteEngine {
            path: dir.join("sqlite.db"),
            options: options.clone(),
            effective: (0, 0),
            tables: RwLock::new(HashMap::new()),
        };
        let c = e.connect()?;
        let pragma = |name: &str| -> Result<i64> {
            c.pragma_query_value(None, name, |r| r.get(0)).map_err(err)
        };
        e.effective = (-pragma("cache_size")?, pragma("mmap_size")?);
        drop(c);
        Ok(e)
    }

    fn connect(&self) -> Result<Connection> {
        let c = Connection::open(&self.path).map_err(err)?;
        c.busy_timeout(Duration::from_secs(10)).map_err(err)?;
        c.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
        c.pragma_update(None, "synchronous", "FULL").map_err(err)?;
        // Negative: KiB. Never below SQLite's own default.
        let per_connection = self.options.cache_bytes / self.options.max_clients.max(1) as u64;
        let kib = (per_connection / 1024).max(DEFAULT_CACHE_KIB);
        c.pragma_update(None, "cache_size", -i64::try_from(kib).unwrap_or(i64::MAX))
            .map_err(err)?;
        // SQLite caps this at its compile-time SQLITE_MAX_MMAP_SIZE.
        c.pragma_update(
            None,
            "mmap_size",
            i64::try_from(self.options.cache_bytes).unwrap_or(i64::MAX),
        )
        .map_err(err)?;
        c.set_prepared_statement_cache_capacity(64);
        Ok(c)
    }

    fn def(&self, table: &str) -> Result<Arc<TableDef>> {
        super::engine::lookup(&self.tables, table)
    }

    fn index_sql(def: &TableDef, index: &IndexDef) -> String {
        let cols: Vec<String> = index
            .columns
            .iter()
            .filter_map(|&c| def.columns.get(c).map(|c| quote(&c.name)))
            .collect();
        format!(
            "CREATE {}INDEX {} ON {} ({})",
            if index.unique { "UNIQUE " } else { "" },
            quote(&format!("{}_{}", def.name, index.name)),
            quote(&def.name),
            cols.join(", ")
        )
    }
}

impl Engine for SqliteEngine {
    fn name(&self) -> &'static str {
        ENGINE
    }

    fn create_table(&self, def: &TableDef) -> Result<()> {
        let rowid = def.primary_key.len() == 1
            && def
                .primary_key
                .first()
                .and_then(|&c| def.columns.get(c))
                .is_some_and(|c| c.ty == ColumnType::Int64);
        let mut cols: Vec<String> = def
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut s = format!("{} {}", quote(&c.name), column_sql(&c.ty));
                if rowid && def.primary_key.first() == Some(&i) {
                    s.push_str(" PRIMARY KEY");
                } else if !c.nullable {
                    s.push_str(" NOT NULL");
                }
                s
            })
            .collect();
        if !rowid && !def.primary_key.is_empty() {
            let pk: Vec<String> = def
                .primary_key
                .iter()
                .filter_map(|&c| def.columns.get(c).map(|c| quote(&c.name)))
                .collect();
            cols.push(format!("PRIMARY KEY ({})", pk.join(", ")));
        }
        let c = self.connect()?;
        c.execute_batch(&format!(
            "CREATE TABLE {} ({})",
            quote(&def.name),
            cols.join(", ")
        ))
        .map_err(err)?;
        for index in &def.indexes {
            c.execute_batch(&Self::index_sql(def, index)).map_err(err)?;
        }
        self.tables
            .write()
            .insert(def.name.clone(), Arc::new(def.clone()));
        Ok(())
    }

    fn create_index(&self, table: &str, index: &IndexDef) -> Result<()> {
        let mut def = TableDef::clone(self.def(table)?.as_ref());
        let c = self.connect()?;
        c.execute_batch(&Self::index_sql(&def, index))
            .map_err(err)?;
        def.indexes.push(index.clone());
        self.tables.write().insert(table.to_string(), Arc::new(def));
        Ok(())
    }

    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(SqliteSession {
            engine: self,
            conn: self.connect()?,
        }))
    }

    fn log_syncs(&self) -> Option<u64> {
        None
    }

    fn settings(&self) -> String {
        let (cache_kib, map) = self.effective;
        format!(
            "WAL, synchronous=FULL, mmap_size {} MiB, cache_size {} KiB per connection ({} connections), \
             BEGIN IMMEDIATE for writers and a deferred BEGIN for readers, \
             busy_timeout 10 s (SQLite's own busy handler, which sleeps 1 to 100 ms between tries)",
            map >> 20,
            cache_kib,
            self.options.max_clients
        )
    }

    fn syncs_note(&self) -> &'static str {
        "n/a: SQLite syncs through its VFS, which rusqlite cannot wrap without a C shim"
    }

    fn fsync_delay(&self) -> std::result::Result<f64, &'static str> {
        Err("not applied to SQLite: it syncs through its VFS, which rusqlite cannot wrap")
    }
}

struct SqliteSession<'e> {
    engine: &'e SqliteEngine,
    conn: Connection,
}

impl Session for SqliteSession<'_> {
    fn transaction(&mut self, f: &mut dyn FnMut(&mut dyn Ops) -> Result<()>) -> Result<u64> {
        self.run("BEGIN IMMEDIATE", f)
    }

    fn read_transaction(&mut self, f: &mut dyn FnMut(&mut dyn Ops) -> Result<()>) -> Result<u64> {
        self.run("BEGIN", f)
    }
}

impl SqliteSession<'_> {
    /// Run `f` between `begin` and `COMMIT`, again after a busy or locked
    /// database; how many attempts were rolled back.
    fn run(&mut self, begin: &str, f: &mut dyn FnMut(&mut dyn Ops) -> Result<()>) -> Result<u64> {
        let mut retries = 0;
        loop {
            let r = (|| {
                self.conn.execute_batch(begin).map_err(err)?;
                let mut ops = SqliteOps {
                    engine: self.engine,
                    conn: &self.conn,
                };
                match f(&mut ops) {
                    Ok(()) => self.conn.execute_batch("COMMIT").map_err(err),
                    Err(e) => Err(e),
                }
            })();
            match r {
                Ok(()) => return Ok(retries),
                Err(e) => {
                    if !self.conn.is_autocommit() {
                        let _ = self.conn.execute_batch("ROLLBACK");
                    }
                    if e.is_retryable() {
                        retries += 1;
                    } else {
                        return Err(e);
                    }
                }
            }
        }
    }
}

struct SqliteOps<'a> {
    engine: &'a SqliteEngine,
    conn: &'a Connection,
}

impl SqliteOps<'_> {
    fn names(def: &TableDef, cols: &[usize]) -> Vec<String> {
        cols.iter()
            .filter_map(|&c| def.columns.get(c).map(|c| quote(&c.name)))
            .collect()
    }

    fn pk_where(def: &TableDef) -> String {
        Self::names(def, &def.primary_key)
            .iter()
            .map(|n| format!("{n} = ?"))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// Read up to `limit` rows ordered by `cols`, from prefix `from`.
    fn range(&self, def: &TableDef, cols: &[usize], from: &[Value], limit: usize) -> Result<usize> {
        let names = Self::names(def, cols);
        let order = names.join(", ");
        let prefix: Vec<&String> = names.iter().take(from.len()).collect();
        let cond = if prefix.is_empty() {
            String::new()
        } else {
            format!(
                "WHERE ({}) >= ({}) ",
                prefix
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                vec!["?"; prefix.len()].join(", ")
            )
        };
        // SQLite's LIMIT is a signed 64-bit integer.
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let sql = format!(
            "SELECT * FROM {} {cond}ORDER BY {order} LIMIT {limit}",
            quote(&def.name)
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(err)?;
        let mut rows = st
            .query(params_from_iter(from.iter().map(Param)))
            .map_err(err)?;
        // Every column of every row, as Quill's scans decode whole rows.
        let ncols = def.columns.len();
        let mut n = 0;
        while let Some(r) = rows.next().map_err(err)? {
            let mut sum = RowSum::default();
            for i in 0..ncols {
                fold_value(&mut sum, r.get_ref(i).map_err(err)?);
            }
            sum.finish();
            n += 1;
        }
        Ok(n)
    }
}

/// One value of a row SQLite returns into the row's [`RowSum`], as
/// Quill's and RocksDB's range reads fold theirs (`engine::row_sum`):
/// SQLite keeps bools and 32-bit integers as 64-bit integers, whose
/// bits are the same.
fn fold_value(sum: &mut RowSum, v: ValueRef<'_>) {
    match v {
        ValueRef::Null => {}
        ValueRef::Integer(x) => sum.number(x as u64),
        ValueRef::Real(x) => sum.number(x.to_bits()),
        ValueRef::Text(b) | ValueRef::Blob(b) => sum.bytes(b),
    }
}

impl Ops for SqliteOps<'_> {
    fn insert(&mut self, table: &str, row: &[Value]) -> Result<Vec<Value>> {
        let def = self.engine.def(table)?;
        let sql = format!(
            "INSERT INTO {} VALUES ({})",
            quote(table),
            vec!["?"; def.columns.len()].join(", ")
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(err)?;
        st.execute(params_from_iter(row.iter().map(Param)))
            .map_err(err)?;
        let rowid = self.conn.last_insert_rowid();
        Ok(def
            .primary_key
            .iter()
            .map(|&c| match row.get(c) {
                Some(Value::Null) | None => Value::Int64(rowid),
                Some(v) => v.clone(),
            })
            .collect())
    }

    fn get(&mut self, table: &str, pk: &[Value]) -> Result<Option<Vec<Value>>> {
        let def = self.engine.def(table)?;
        let sql = format!(
            "SELECT * FROM {} WHERE {}",
            quote(table),
            Self::pk_where(&def)
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(err)?;
        let mut rows = st
            .query(params_from_iter(pk.iter().map(Param)))
            .map_err(err)?;
        match rows.next().map_err(err)? {
            None => Ok(None),
            Some(r) => {
                let mut out = Vec::with_capacity(def.columns.len());
                for (i, c) in def.columns.iter().enumerate() {
                    out.push(from_sql(&c.ty, r.get_ref(i).map_err(err)?));
                }
                Ok(Some(out))
            }
        }
    }

    fn update(&mut self, table: &str, pk: &[Value], changes: &[(usize, Value)]) -> Result<bool> {
        let def = self.engine.def(table)?;
        let sets: Vec<String> = changes
            .iter()
            .filter_map(|(c, _)| {
                def.columns
                    .get(*c)
                    .map(|c| format!("{} = ?", quote(&c.name)))
            })
            .collect();
        let sql = format!(
            "UPDATE {} SET {} WHERE {}",
            quote(table),
            sets.join(", "),
            Self::pk_where(&def)
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(err)?;
        let params = changes
            .iter()
            .map(|(_, v)| Param(v))
            .chain(pk.iter().map(Param));
        Ok(st.execute(params_from_iter(params)).map_err(err)? > 0)
    }

    fn delete(&mut self, table: &str, pk: &[Value]) -> Result<bool> {
        let def = self.engine.def(table)?;
        let sql = format!(
            "DELETE FROM {} WHERE {}",
            quote(table),
            Self::pk_where(&def)
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(err)?;
        Ok(st
            .execute(params_from_iter(pk.iter().map(Param)))
            .map_err(err)?
            > 0)
    }

    fn index_range(
        &mut self,
        table: &str,
        index: &str,
        from: &[Value],
        limit: usize,
    ) -> Result<usize> {
        let def = self.engine.def(table)?;
        let cols = def
            .indexes
            .iter()
            .find(|x| x.name == index)
            .map(|x| x.columns.clone())
            .ok_or_else(|| Error::InvalidArgument {
                what: "index",
                reason: format!("table {table} has no index named {index}"),
            })?;
        self.range(&def, &cols, from, limit)
    }

    fn pk_range(&mut self, table: &str, from: &[Value], limit: usize) -> Result<usize> {
        let def = self.engine.def(table)?;
        let cols = def.primary_key.clone();
        self.range(&def, &cols, from, limit)
    }

    fn delete_first(&mut self, table: &str, from: &[Value], n: usize) -> Result<usize> {
        let def = self.engine.def(table)?;
        if def.primary_key.is_empty() {
            return Err(Error::InvalidArgument {
                what: "delete_first",
                reason: format!("table {table} has no primary key columns"),
            });
        }
        let names = Self::names(&def, &def.primary_key);
        let order = names.join(", ");
        let prefix: Vec<&str> = names.iter().take(from.len()).map(|s| s.as_str()).collect();
        let cond = if prefix.is_empty() {
            String::new()
        } else {
            format!(
                "WHERE ({}) >= ({}) ",
                prefix.join(", "),
                vec!["?"; prefix.len()].join(", ")
            )
        };
        let sql = format!(
            "DELETE FROM {t} WHERE rowid IN (SELECT rowid FROM {t} {cond}ORDER BY {order} LIMIT {limit})",
            t = quote(table),
            limit = i64::try_from(n).unwrap_or(i64::MAX)
        );
        let mut st = self.conn.prepare_cached(&sql).map_err(err)?;
        st.execute(params_from_iter(from.iter().map(Param)))
            .map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::conformance;
    use crate::oltp::run_every_shape;

    /// A 64 MiB budget over 4 clients.
    fn small() -> SqliteOptions {
        SqliteOptions {
            cache_bytes: 64 << 20,
            max_clients: 4,
        }
    }

    /// The range reads' consumer folds SQLite's values as it folds
    /// Quill's and RocksDB's: rows stored in SQLite (columns declared as
    /// the harness declares them) and read back fold to the same sums as
    /// Quill's in-place reads of the same rows, for every column type,
    /// and every column changes the sum (so none is skipped).
    #[test]
    fn sqlite_rows_fold_as_quill_rows_do() {
        use quill::catalog::{Column, RowRef, encode_row};
        let columns = vec![
            Column::new("a", ColumnType::Int64, false),
            Column::new("b", ColumnType::Int32, false),
            Column::new("c", ColumnType::Text { max_len: 200 }, true),
            Column::new("d", ColumnType::Bytes { max_len: 200 }, true),
            Column::new("e", ColumnType::Float64, true),
            Column::new("f", ColumnType::Bool, true),
            Column::new("g", ColumnType::Timestamp, true),
        ];
        let rows = [
            vec![
                Value::Int64(-7),
                Value::Int32(-3),
                Value::Text("héllo".into()),
                Value::Bytes(vec![0, 255, 3]),
                Value::Float64(1.5),
                Value::Bool(true),
                Value::Timestamp(1_700_000_000_000_000),
            ],
            vec![
                Value::Int64(i64::MAX),
                Value::Int32(i32::MIN),
                Value::Null,
                Value::Bytes(Vec::new()),
                Value::Null,
                Value::Bool(false),
                Value::Null,
            ],
        ];
        // Every column of the first row changed in turn: each must
        // change the sum.
        let mut rows = rows.to_vec();
        for i in 0..columns.len() {
            let mut changed = rows[0].clone();
            changed[i] = match &changed[i] {
                Value::Int64(x) => Value::Int64(x + 1),
                Value::Int32(x) => Value::Int32(x + 1),
                Value::Text(t) => Value::Text(format!("{t}!")),
                Value::Bytes(b) => Value::Bytes([b.as_slice(), &[1]].concat()),
                Value::Float64(x) => Value::Float64(x * 2.0),
                Value::Bool(b) => Value::Bool(!b),
                Value::Timestamp(x) => Value::Timestamp(x + 1),
                Value::Null => unreachable!("the first row has no NULL"),
            };
            rows.push(changed);
        }
        let c = Connection::open_in_memory().unwrap();
        let declared: Vec<String> = columns
            .iter()
            .map(|col| format!("{} {}", col.name, column_sql(&col.ty)))
            .collect();
        c.execute_batch(&format!("CREATE TABLE t ({})", declared.join(", ")))
            .unwrap();
        for row in &rows {
            c.execute(
                "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?)",
                params_from_iter(row.iter().map(Param)),
            )
            .unwrap();
        }
        // Quill's sums: each row encoded and read in place.
        let sums: Vec<u64> = rows
            .iter()
            .map(|row| {
                let bytes = encode_row(&columns, row).unwrap();
                crate::engine::row_sum(RowRef::new(&columns, &bytes).unwrap()).unwrap()
            })
            .collect();
        let mut st = c.prepare("SELECT * FROM t ORDER BY rowid").unwrap();
        let mut read = st.query([]).unwrap();
        let mut seen = 0;
        while let Some(r) = read.next().unwrap() {
            let mut sum = RowSum::default();
            for i in 0..columns.len() {
                fold_value(&mut sum, r.get_ref(i).unwrap());
            }
            assert_eq!(sum.0, sums[seen], "row {seen}");
            seen += 1;
        }
        assert_eq!(seen, rows.len());
        assert_ne!(sums[0], sums[1]);
        for (i, sum) in sums[2..].iter().enumerate() {
            assert_ne!(*sum, sums[0], "column {i} does not change the sum");
        }
    }

    #[test]
    fn each_connection_gets_its_share_of_the_cache_and_the_map() {
        let tmp = tempfile::tempdir().unwrap();
        let e = SqliteEngine::open(tmp.path(), &small()).unwrap();
        let c = e.connect().unwrap();
        let pragma =
            |name: &str| -> i64 { c.pragma_query_value(None, name, |r| r.get(0)).unwrap() };
        assert_eq!(pragma("cache_size"), -16 * 1024, "16 MiB each, in KiB");
        assert_eq!(pragma("mmap_size"), 64 << 20);
        // Never below SQLite's default.
        let many = SqliteEngine::open(
            tmp.path(),
            &SqliteOptions {
                cache_bytes: 1 << 20,
                max_clients: 64,
            },
        )
        .unwrap();
        let c = many.connect().unwrap();
        let size: i64 = c
            .pragma_query_value(None, "cache_size", |r| r.get(0))
            .unwrap();
        assert_eq!(size, -2000);
    }

    #[test]
    fn a_reader_does_not_wait_for_a_writer() {
        let tmp = tempfile::tempdir().unwrap();
        let e = SqliteEngine::open(tmp.path(), &small()).unwrap();
        let def = crate::window::sbtest(1);
        e.create_table(&def).unwrap();
        let name = def.name.clone();
        let row = |id: i64| -> Vec<Value> {
            vec![
                Value::Int64(id),
                Value::Int32(0),
                Value::Text("c".into()),
                Value::Text("pad".into()),
            ]
        };
        e.session()
            .unwrap()
            .transaction(&mut |ops| ops.insert(&name, &row(1)).map(drop))
            .unwrap();
        // A writer holds SQLite's write lock, with a row written, for 3 s.
        let writer = e.connect().unwrap();
        let table = quote(&name);
        let (locked, is_locked) = std::sync::mpsc::channel();
        let holder = std::thread::spawn(move || {
            writer.execute_batch("BEGIN IMMEDIATE").unwrap();
            writer
                .execute(&format!("UPDATE {table} SET k = 1 WHERE id = 1"), [])
                .unwrap();
            locked.send(()).unwrap();
            std::thread::sleep(Duration::from_secs(3));
            writer.execute_batch("COMMIT").unwrap();
        });
        is_locked.recv().unwrap();
        let mut s = e.session().unwrap();
        let started = std::time::Instant::now();
        let mut seen = None;
        s.read_transaction(&mut |ops| {
            seen = ops.get(&name, &[Value::Int64(1)])?;
            Ok(())
        })
        .unwrap();
        let read = started.elapsed();
        // A writing transaction waits for the lock (SQLite's busy handler).
        s.transaction(&mut |ops| ops.insert(&name, &row(2)).map(drop))
            .unwrap();
        let write = started.elapsed();
        holder.join().unwrap();
        assert!(
            read < Duration::from_secs(2),
            "a read-only transaction waited {read:?} for the write lock"
        );
        // It read the row as committed before the writer's change.
        assert_eq!(seen.unwrap()[1], Value::Int32(0));
        assert!(
            write >= Duration::from_secs(2),
            "the writer did not wait: {write:?}"
        );
    }

    #[test]
    fn every_operation_the_workloads_use() {
        let tmp = tempfile::tempdir().unwrap();
        conformance::every_operation(&SqliteEngine::open(tmp.path(), &small()).unwrap());
    }

    #[test]
    fn every_insert_benchmark_step_runs() {
        let tmp = tempfile::tempdir().unwrap();
        crate::insert::run_every_step(&SqliteEngine::open(tmp.path(), &small()).unwrap());
    }

    #[test]
    fn conflicts_are_retried_and_failures_change_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        conformance::retries_and_failures(&SqliteEngine::open(tmp.path(), &small()).unwrap());
    }

    #[test]
    fn every_oltp_shape_runs_on_sqlite() {
        let tmp = tempfile::tempdir().unwrap();
        let e = SqliteEngine::open(tmp.path(), &small()).unwrap();
        for r in &run_every_shape(&e) {
            assert!(
                r.costs.fsyncs_per_commit.is_none(),
                "SQLite's syncs are not counted"
            );
        }
    }
}
