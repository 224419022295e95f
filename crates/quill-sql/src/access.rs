//! Access paths: how a statement's WHERE reaches its rows. Equality on
//! every primary key column (or an IN list on a one-column key) is a
//! point lookup per key; equality on a prefix, or a range on the first
//! column after it, is a range scan; the same on a secondary index's
//! columns is a scan of that index; an ORDER BY that an index's order
//! gives reads that index; anything else scans the table. The whole WHERE is still checked on every row found,
//! so the path only has to find a superset of the rows.

use std::ops::Bound;
use std::sync::Arc;

use quill::btree::Direction;
use quill::catalog::Value;
use quill::catalog::schema::TableSchema;
use quill::{OwnedTxn, Table};

use crate::error::{SqlError, SqlResult, SqlState};
use crate::expr::{Cmp, Ctx, Expr, Scope};
use crate::types::coerce;

/// A table's columns as a binding scope.
pub struct TableScope<'a>(pub &'a TableSchema, pub Ctx<'a>);

impl Scope for TableScope<'_> {
    fn column(&self, name: &str) -> Option<usize> {
        self.0.def.columns.iter().position(|c| c.name == name)
    }
    fn ctx(&self) -> Ctx<'_> {
        self.1
    }
}

/// How rows are found.
#[derive(Clone, Debug, PartialEq)]
pub enum Path {
    /// Point lookups of these full primary keys.
    Points(Vec<Vec<Value>>),
    /// A scan of primary keys between these bounds (prefixes).
    Range(Bound<Vec<Value>>, Bound<Vec<Value>>),
    /// A scan of secondary index `name` between these bounds (prefixes
    /// of its key); rows come in index key order, ties by primary key.
    Index {
        /// The index's name.
        name: String,
        /// Its columns, by position in the table.
        columns: Vec<usize>,
        /// Lower bound.
        lo: Bound<Vec<Value>>,
        /// Upper bound.
        hi: Bound<Vec<Value>>,
    },
    /// Every row.
    Full,
}

impl Path {
    /// The columns rows come ordered by (ascending): the index's for an
    /// index scan, else the primary key's (points are looked up in key
    /// order).
    pub fn order<'a>(&'a self, schema: &'a TableSchema) -> &'a [usize] {
        match self {
            Path::Index { columns, .. } => columns,
            _ => &schema.def.primary_key,
        }
    }
}

/// `Some((op, value))` when `e` compares column `col` with a constant
/// (in either order), the constant coerced to the column's type.
fn bound_of(e: &Expr, col: usize, schema: &TableSchema) -> Option<(Cmp, Value)> {
    let ty = schema.def.columns.get(col)?.ty;
    let (op, v) = match e {
        Expr::Cmp(op, a, b) => match (a.as_ref(), b.as_ref()) {
            (Expr::Column(c), Expr::Const(v)) if *c == col => (*op, v),
            (Expr::Const(v), Expr::Column(c)) if *c == col => (op.flip(), v),
            _ => return None,
        },
        _ => return None,
    };
    if v.is_null() || op == Cmp::Ne {
        return None;
    }
    coerce(v.clone(), ty).ok().map(|v| (op, v))
}

/// What the conjuncts say about a key over `cols`: values for an
/// equality prefix, then bounds on the next column.
struct KeyRange {
    prefix: Vec<Value>,
    lo: Bound<Vec<Value>>,
    hi: Bound<Vec<Value>>,
    /// Whether the next column has a bound.
    ranged: bool,
}

fn key_range(cols: &[usize], conj: &[&Expr], schema: &TableSchema) -> KeyRange {
    let mut prefix = Vec::new();
    for &col in cols {
        match conj
            .iter()
            .find_map(|c| bound_of(c, col, schema).filter(|(op, _)| *op == Cmp::Eq))
        {
            Some((_, v)) => prefix.push(v),
            None => break,
        }
    }
    let mut lo = Bound::Included(prefix.clone());
    let mut hi = Bound::Included(prefix.clone());
    let mut ranged = false;
    if let Some(&col) = cols.get(prefix.len()) {
        for c in conj {
            let bounds: Vec<(Cmp, Value)> = match c {
                Expr::Between(a, l, h, false) if matches!(a.as_ref(), Expr::Column(x) if *x == col) =>
                {
                    let ge = Expr::Cmp(Cmp::Ge, a.clone(), l.clone());
                    let le = Expr::Cmp(Cmp::Le, a.clone(), h.clone());
                    [bound_of(&ge, col, schema), bound_of(&le, col, schema)]
                        .into_iter()
                        .flatten()
                        .collect()
                }
                c => bound_of(c, col, schema).into_iter().collect(),
            };
            for (op, v) in bounds {
                let mut key = prefix.clone();
                key.push(v);
                ranged = true;
                match op {
                    Cmp::Gt => lo = Bound::Excluded(key),
                    Cmp::Ge => lo = Bound::Included(key),
                    Cmp::Lt => hi = Bound::Excluded(key),
                    Cmp::Le => hi = Bound::Included(key),
                    Cmp::Eq | Cmp::Ne => {}
                }
            }
        }
    }
    KeyRange {
        prefix,
        lo: fix_empty(lo),
        hi: fix_empty(hi),
        ranged,
    }
}

/// Choose the path for `filter` over `schema`: the primary key when the
/// filter pins or bounds it, else the secondary index whose key the
/// filter pins longest (a bound on the next column counting half a
/// column), else, when the query wants rows ordered by a prefix of some
/// index's columns (`order`), that index, else a full scan.
pub fn choose(schema: &TableSchema, filter: Option<&Expr>, order: &[usize]) -> Path {
    let pk = &schema.def.primary_key;
    let conj = filter.map(Expr::conjuncts).unwrap_or_default();
    if !pk.is_empty() && !conj.is_empty() {
        // IN list on a one-column key.
        if let [col] = pk.as_slice() {
            for c in &conj {
                if let Expr::InList(a, list, false) = c
                    && matches!(a.as_ref(), Expr::Column(x) if x == col)
                    && let Some(ty) = schema.def.columns.get(*col).map(|c| c.ty)
                {
                    let keys: Option<Vec<Vec<Value>>> = list
                        .iter()
                        .map(|x| match x {
                            Expr::Const(v) if !v.is_null() => {
                                coerce(v.clone(), ty).ok().map(|v| vec![v])
                            }
                            _ => None,
                        })
                        .collect();
                    if let Some(mut keys) = keys {
                        // In key order, as a scan would return them: by
                        // the key encoding, whose byte order is the key
                        // order (keycode KC1).
                        keys.sort_by_cached_key(|k| {
                            let mut b = Vec::new();
                            quill::catalog::encode_key(k, &mut b);
                            b
                        });
                        keys.dedup();
                        return Path::Points(keys);
                    }
                }
            }
        }
        let r = key_range(pk, &conj, schema);
        if r.prefix.len() == pk.len() {
            return Path::Points(vec![r.prefix]);
        }
        if !r.prefix.is_empty() || r.ranged {
            return Path::Range(r.lo, r.hi);
        }
    }
    let mut best: Option<(usize, Path)> = None;
    let live = || {
        schema
            .ready_indexes()
            .filter_map(|i| schema.def.indexes.get(i))
    };
    for ix in live() {
        let r = key_range(&ix.columns, &conj, schema);
        let score = 2 * r.prefix.len() + usize::from(r.ranged);
        if score > 0 && best.as_ref().is_none_or(|(s, _)| score > *s) {
            best = Some((
                score,
                Path::Index {
                    name: ix.name.clone(),
                    columns: ix.columns.clone(),
                    lo: r.lo,
                    hi: r.hi,
                },
            ));
        }
    }
    if let Some((_, p)) = best {
        return p;
    }
    if !order.is_empty() && !pk.starts_with(order) {
        for ix in live() {
            if ix.columns.starts_with(order) {
                return Path::Index {
                    name: ix.name.clone(),
                    columns: ix.columns.clone(),
                    lo: Bound::Unbounded,
                    hi: Bound::Unbounded,
                };
            }
        }
    }
    Path::Full
}

fn fix_empty(b: Bound<Vec<Value>>) -> Bound<Vec<Value>> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) if k.is_empty() => Bound::Unbounded,
        b => b,
    }
}

fn as_ref(b: &Bound<Vec<Value>>) -> Bound<&[Value]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Which of a table's `ncols` columns a statement reads: the columns
/// `cols` and those `exprs` read; `None` when that is all of them or not
/// known (an expression that may read any column, `Expr::mark_columns`).
/// What [`for_each`] takes as `needed`.
pub fn columns_read<'e>(
    ncols: usize,
    cols: &[usize],
    exprs: impl IntoIterator<Item = &'e Expr>,
) -> Option<Vec<bool>> {
    let mut used = vec![false; ncols];
    for &c in cols {
        *used.get_mut(c)? = true;
    }
    let known = exprs.into_iter().all(|e| e.mark_columns(&mut used));
    (known && used.contains(&false)).then_some(used)
}

/// Whether `filter` (none: every row) selects `row`.
fn selects(filter: Option<&Expr>, row: &[Value]) -> SqlResult<bool> {
    match filter {
        Some(e) => e.selects(row),
        None => Ok(true),
    }
}

/// Call `f` on every row the path finds that `filter` selects, in
/// primary key order, until it returns false. With `needed`, a scanned
/// row has only the columns it marks decoded and the others NULL (they
/// must cover every column `filter` and the caller read); point lookups
/// decode whole rows.
pub fn for_each(
    tx: &mut OwnedTxn,
    t: &Table,
    path: &Path,
    filter: Option<&Expr>,
    needed: Option<&[bool]>,
    mut f: impl FnMut(&mut Vec<Value>) -> SqlResult<bool>,
) -> SqlResult<()> {
    let keep = |row: &[Value]| selects(filter, row);
    // One vector for every scanned row (`f` may take it).
    let mut row = Vec::new();
    let mut scan = |mut rows: quill::db::Rows<'_>| -> SqlResult<()> {
        while let Some(r) = rows.next_ref() {
            r?.values_into(needed, &mut row)
                .map_err(quill::Error::from)?;
            if keep(&row)? && !f(&mut row)? {
                break;
            }
        }
        Ok(())
    };
    match path {
        Path::Points(keys) => {
            for k in keys {
                if let Some(mut row) = tx.get(t, k)?
                    && keep(&row)?
                    && !f(&mut row)?
                {
                    return Ok(());
                }
            }
        }
        Path::Range(lo, hi) => scan(tx.scan(t, as_ref(lo), as_ref(hi), Direction::Forward)?)?,
        Path::Index { name, lo, hi, .. } => {
            scan(tx.index_scan(t, name, as_ref(lo), as_ref(hi), Direction::Forward)?)?
        }
        Path::Full => scan(tx.scan(t, Bound::Unbounded, Bound::Unbounded, Direction::Forward)?)?,
    }
    Ok(())
}

/// How a locking read locks its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowLock {
    /// FOR SHARE: shared (other FOR SHARE readers too; no writer).
    Share,
    /// FOR UPDATE: exclusive.
    Update,
}

/// [`for_each`] for a locking read (FOR UPDATE / FOR SHARE): each row
/// is locked as `lock` says and read at its newest version
/// (`get_for_update`, `get_for_share`) and
/// `filter` checked on that version before `f` sees it, as PostgreSQL's
/// READ COMMITTED does; under REPEATABLE READ a row changed since the
/// snapshot fails the statement (40001). Point lookups lock their keys; a
/// scan first collects the primary keys (columns `pk`) of the rows
/// `filter` selects in its snapshot ([`selected_keys`]), then locks them
/// in that order until `f` returns false ([`lock_each`]): a LIMIT in
/// the scan's order locks the rows it returns (and those OFFSET skips)
/// and no more. `interrupt` is asked after each row of the first pass
/// whether to go on (a cancel, a statement's timeout).
#[allow(clippy::too_many_arguments)]
pub fn for_each_locked(
    tx: &mut OwnedTxn,
    t: &Table,
    path: &Path,
    filter: Option<&Expr>,
    pk: &[usize],
    lock: RowLock,
    interrupt: impl Fn() -> SqlResult<()>,
    f: impl FnMut(&mut Vec<Value>) -> SqlResult<bool>,
) -> SqlResult<()> {
    let keys = match path {
        Path::Points(k) => k.clone(),
        _ => selected_keys(tx, t, path, filter, pk, |_| interrupt())?
            .into_iter()
            .map(|(k, ())| k)
            .collect(),
    };
    lock_each(tx, t, &keys, filter, lock, f)
}

/// The primary keys (columns `pk`) of the rows a scan of `path` finds
/// that `filter` selects in the transaction's snapshot, in the scan's
/// order, each with what `extra` makes of its row (a sort key, say);
/// nothing is locked. Point lookups (`Path::Points`) read their keys'
/// rows in the snapshot the same way.
pub fn selected_keys<T>(
    tx: &mut OwnedTxn,
    t: &Table,
    path: &Path,
    filter: Option<&Expr>,
    pk: &[usize],
    mut extra: impl FnMut(&[Value]) -> SqlResult<T>,
) -> SqlResult<Vec<(Vec<Value>, T)>> {
    let mut keys = Vec::new();
    for_each(tx, t, path, filter, None, |row| {
        let key = pk
            .iter()
            .map(|&c| {
                row.get(c).cloned().ok_or_else(|| {
                    SqlError::new(
                        SqlState::INTERNAL_ERROR,
                        format!("primary key column {c} past the row's end"),
                    )
                })
            })
            .collect::<SqlResult<Vec<_>>>()?;
        keys.push((key, extra(row)?));
        Ok(true)
    })?;
    Ok(keys)
}

/// Lock the rows of `keys` in turn as `lock` says, each read at its
/// newest version and checked against `filter` again before `f` sees it
/// (a row gone or no longer selected is skipped), until `f` returns
/// false: the rows after that stay unlocked.
pub fn lock_each(
    tx: &mut OwnedTxn,
    t: &Table,
    keys: &[Vec<Value>],
    filter: Option<&Expr>,
    lock: RowLock,
    mut f: impl FnMut(&mut Vec<Value>) -> SqlResult<bool>,
) -> SqlResult<()> {
    for k in keys {
        let row = match lock {
            RowLock::Share => tx.get_for_share(t, k)?,
            RowLock::Update => tx.get_for_update(t, k)?,
        };
        if let Some(mut row) = row
            && selects(filter, &row)?
            && !f(&mut row)?
        {
            break;
        }
    }
    Ok(())
}

/// The schema and handle of table `name`, or 42P01.
pub fn open(db: &quill::Db, name: &str) -> SqlResult<(Table, Arc<TableSchema>)> {
    let t = db.table(name).map_err(|_| crate::ddl::no_table(name))?;
    let s = t.try_schema()?;
    Ok((t, s))
}
