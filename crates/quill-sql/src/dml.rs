//! INSERT, UPDATE and DELETE.
//!
//! UPDATE and DELETE find candidate rows through the access path, then
//! lock each one (`get_for_update`: the newest version, locked) and check
//! the WHERE again on what they locked, as PostgreSQL rechecks a row that
//! changed under it, so a concurrent change is never lost or applied to a
//! row that no longer qualifies.

use quill::catalog::schema::TableSchema;
use quill::catalog::{ColumnType, Value};
use quill::{Db, OwnedTxn};
use sqlparser::ast::{self, SetExpr};

use crate::access::{self, TableScope};
use crate::ddl::table_name;
use crate::error::{SqlError, SqlResult, SqlState};
use crate::expr::{self, Ctx, Expr};
use crate::select;
use crate::select::WhereScope;
use crate::session::{ColumnDesc, Output};
use crate::types::{self, Domain};

/// A column position beyond the row: the engine returns one value per
/// column (catalog RF1), so this is a bug, reported, not a panic.
fn out_of_row(col: usize) -> SqlError {
    SqlError::new(
        SqlState::INTERNAL_ERROR,
        format!("column {col} is beyond the row"),
    )
}

/// The position and type of the column `name` names in `schema`, or
/// 42703.
pub(crate) fn column_of(
    schema: &TableSchema,
    name: &ast::ObjectName,
) -> SqlResult<(usize, ColumnType)> {
    let n = expr::column_name(name)?;
    schema
        .def
        .columns
        .iter()
        .enumerate()
        .find(|(_, c)| c.name == n)
        .map(|(i, c)| (i, c.ty))
        .ok_or_else(|| {
            SqlError::new(
                SqlState::UNDEFINED_COLUMN,
                format!(
                    "column \"{n}\" of relation \"{}\" does not exist",
                    schema.def.name
                ),
            )
        })
}

/// A RETURNING list, bound to the table's row.
pub struct Returning {
    outputs: Vec<Expr>,
    /// The columns it returns.
    pub columns: Vec<ColumnDesc>,
}

impl Returning {
    /// Add the RETURNING row for the written `row` to `out` (54000 past
    /// [`select::MAX_RESULT_ROWS`]).
    fn push(&self, out: &mut Vec<Vec<Value>>, row: &[Value]) -> SqlResult<()> {
        if out.len() >= select::MAX_RESULT_ROWS {
            return Err(select::too_many_rows());
        }
        out.push(
            self.outputs
                .iter()
                .map(|e| e.eval(row))
                .collect::<SqlResult<_>>()?,
        );
        Ok(())
    }

    fn output(ret: Option<Returning>, tag: String, rows: Vec<Vec<Value>>) -> Output {
        match ret {
            None => Output::tag(tag),
            Some(r) => Output {
                tag,
                columns: r.columns,
                rows,
                copy: None,
            },
        }
    }
}

/// Bind a RETURNING list (`None` without one).
pub fn returning(
    schema: &TableSchema,
    items: Option<&[ast::SelectItem]>,
    ctx: Ctx<'_>,
) -> SqlResult<Option<Returning>> {
    let Some(items) = items else {
        return Ok(None);
    };
    let scope = TableScope(schema, ctx);
    let types: Vec<ColumnType> = schema.def.columns.iter().map(|c| c.ty).collect();
    let mut outputs = Vec::new();
    let mut columns = Vec::new();
    for item in items {
        let (name, e) = match item {
            ast::SelectItem::Wildcard(_) => {
                for (i, c) in schema.def.columns.iter().enumerate() {
                    outputs.push(Expr::Column(i));
                    columns.push(ColumnDesc {
                        name: c.name.clone(),
                        ty: c.ty,
                    });
                }
                continue;
            }
            ast::SelectItem::UnnamedExpr(e) => (select::output_name(e), e),
            ast::SelectItem::ExprWithAlias { expr, alias } => (expr::name_of(alias), expr),
            other => return Err(SqlError::unsupported(format!("RETURNING {other}"))),
        };
        let b = expr::bind(e, &scope)?;
        columns.push(ColumnDesc {
            name,
            ty: select::type_of(&b, &types, ctx.param_types),
        });
        outputs.push(b);
    }
    Ok(Some(Returning { outputs, columns }))
}

/// The table an INSERT, UPDATE or DELETE writes, and its RETURNING
/// columns (`None` without RETURNING), for Describe.
pub fn describe(
    db: &Db,
    stmt: &ast::Statement,
    ctx: Ctx<'_>,
) -> SqlResult<Option<Vec<ColumnDesc>>> {
    let (name, items) = match stmt {
        ast::Statement::Insert(i) => match &i.table {
            ast::TableObject::TableName(n) => (n, i.returning.as_deref()),
            _ => return Ok(None),
        },
        ast::Statement::Update(u) => match &u.table.relation {
            ast::TableFactor::Table { name, .. } => (name, u.returning.as_deref()),
            _ => return Ok(None),
        },
        ast::Statement::Delete(d) => {
            let from = match &d.from {
                ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
            };
            match from.as_slice() {
                [
                    ast::TableWithJoins {
                        relation: ast::TableFactor::Table { name, .. },
                        ..
                    },
                ] => (name, d.returning.as_deref()),
                _ => return Ok(None),
            }
        }
        _ => return Ok(None),
    };
    if items.is_none() {
        return Ok(None);
    }
    let (_, schema) = access::open(db, &table_name(name)?)?;
    Ok(returning(&schema, items, ctx)?.map(|r| r.columns))
}

/// What each column of `schema` takes when a row omits it: its
/// default, NULL without one.
pub(crate) fn column_defaults(schema: &TableSchema) -> Vec<Value> {
    schema
        .def
        .columns
        .iter()
        .map(|c| c.default.clone().unwrap_or(Value::Null))
        .collect()
}

/// The declared-type rules of each column of `schema`.
pub(crate) fn column_domains(schema: &TableSchema) -> Vec<Domain> {
    schema
        .def
        .columns
        .iter()
        .map(|c| types::domain(c.declared_type.as_deref(), c.ty))
        .collect()
}

/// INSERT INTO t [(cols)] VALUES (...), ...
pub fn insert(db: &Db, tx: &mut OwnedTxn, i: &ast::Insert, ctx: Ctx<'_>) -> SqlResult<Output> {
    let (t, schema, cols, values) = insert_target(db, i)?;
    let ret = returning(&schema, i.returning.as_deref(), ctx)?;
    apply_insert(ctx, tx, &t, &schema, &cols, Rows::Ast(&values.rows), ret)
}

/// What an INSERT writes: the table, its schema, its columns and the
/// VALUES.
type InsertTarget<'i> = (
    quill::Table,
    std::sync::Arc<TableSchema>,
    InsertColumns,
    &'i ast::Values,
);

/// The columns an INSERT fills, derived from the table's schema once per
/// plan (a generic plan keeps them across executions).
struct InsertColumns {
    /// Position and type of each target column, in the statement's order.
    targets: Vec<(usize, ColumnType)>,
    /// Every column's default (NULL without one): a row's starting point.
    defaults: Vec<Value>,
    /// Every column's declared-type rules.
    domains: Vec<Domain>,
}

/// The table an INSERT writes, its target columns and its VALUES.
fn insert_target<'i>(db: &Db, i: &'i ast::Insert) -> SqlResult<InsertTarget<'i>> {
    let ast::TableObject::TableName(name) = &i.table else {
        return Err(SqlError::unsupported("INSERT into a table function"));
    };
    if i.on.is_some() {
        return Err(SqlError::unsupported("ON CONFLICT"));
    }
    let (t, schema) = access::open(db, &table_name(name)?)?;
    let targets: Vec<(usize, ColumnType)> = if i.columns.is_empty() {
        schema
            .def
            .columns
            .iter()
            .map(|c| c.ty)
            .enumerate()
            .collect()
    } else {
        i.columns
            .iter()
            .map(|c| column_of(&schema, c))
            .collect::<SqlResult<_>>()?
    };
    let Some(source) = &i.source else {
        return Err(SqlError::unsupported("INSERT without VALUES"));
    };
    let SetExpr::Values(values) = source.body.as_ref() else {
        return Err(SqlError::unsupported("INSERT ... SELECT"));
    };
    if values.rows.iter().any(|r| r.len() > targets.len()) {
        return Err(SqlError::new(
            SqlState::SYNTAX_ERROR,
            "INSERT has more expressions than target columns",
        ));
    }
    let cols = InsertColumns {
        targets,
        defaults: column_defaults(&schema),
        domains: column_domains(&schema),
    };
    Ok((t, schema, cols, values))
}

/// Whether a VALUES item is the keyword DEFAULT.
fn is_default(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Identifier(id)
        if id.value.eq_ignore_ascii_case("default") && id.quote_style.is_none())
}

/// Where an INSERT's values come from.
enum Rows<'a> {
    /// The statement's VALUES, each bound as its row is inserted (with the
    /// execution's parameters as constants).
    Ast(&'a [ast::Parens<Vec<ast::Expr>>]),
    /// A generic plan's VALUES, bound once (`None`: DEFAULT), and this
    /// execution's parameters.
    Bound(&'a [Vec<Option<Expr>>], &'a [Value]),
}

/// Insert the rows of `rows` into `t`, each target column its value and
/// every other its default.
fn apply_insert(
    ctx: Ctx<'_>,
    tx: &mut OwnedTxn,
    t: &quill::Table,
    schema: &TableSchema,
    cols: &InsertColumns,
    rows: Rows<'_>,
    ret: Option<Returning>,
) -> SqlResult<Output> {
    let InsertColumns {
        targets,
        defaults,
        domains,
    } = cols;
    let ncols = schema.def.columns.len();
    let nrows = match rows {
        Rows::Ast(r) => r.len(),
        Rows::Bound(r, _) => r.len(),
    };
    let mut out = Vec::new();
    let mut n = 0u64;
    for r in 0..nrows {
        let mut full = defaults.clone();
        debug_assert_eq!(full.len(), ncols);
        for (k, &(col, ty)) in targets.iter().enumerate() {
            let given = match rows {
                Rows::Ast(rows) => match rows[r].get(k) {
                    None => break,
                    Some(e) if is_default(e) => None,
                    Some(e) => Some(expr::bind(e, &expr::NoColumns(ctx))?.eval(&[])?),
                },
                Rows::Bound(rows, params) => match rows[r].get(k) {
                    None => break,
                    Some(None) => None,
                    Some(Some(e)) => Some(e.with_params(params)?.eval(&[])?),
                },
            };
            let v = match given {
                Some(v) => v,
                None => defaults.get(col).cloned().ok_or_else(|| out_of_row(col))?,
            };
            let dom = *domains.get(col).ok_or_else(|| out_of_row(col))?;
            let slot = full.get_mut(col).ok_or_else(|| out_of_row(col))?;
            *slot = types::store_as(v, ty, dom)?;
        }
        ctx.check_cancel()?;
        let key = tx.insert(t, &full)?;
        n += 1;
        if let Some(ret) = &ret {
            // The key as stored (an automatic one filled in).
            for (&k, v) in schema.def.primary_key.iter().zip(key) {
                if let Some(slot) = full.get_mut(k) {
                    *slot = v;
                }
            }
            ret.push(&mut out, &full)?;
        }
    }
    Ok(Returning::output(ret, format!("INSERT 0 {n}"), out))
}

/// The table and WHERE of an UPDATE or DELETE (`tx`: for a subquery
/// in WHERE; without one, such a WHERE is an error).
fn target(
    db: &Db,
    tx: Option<&mut OwnedTxn>,
    relation: &ast::TableFactor,
    selection: Option<&ast::Expr>,
    ctx: Ctx<'_>,
) -> SqlResult<(quill::Table, std::sync::Arc<TableSchema>, Option<Expr>)> {
    let ast::TableFactor::Table { name, .. } = relation else {
        return Err(SqlError::unsupported(format!("the target {relation}")));
    };
    let (t, schema) = access::open(db, &table_name(name)?)?;
    if schema.def.primary_key.is_empty() {
        return Err(SqlError::unsupported(
            "UPDATE or DELETE on a table without a primary key",
        ));
    }
    let scope = WhereScope {
        table: TableScope(&schema, ctx),
        db,
        tx: std::cell::RefCell::new(tx),
    };
    let filter = selection.map(|e| expr::bind(e, &scope)).transpose()?;
    Ok((t, schema, filter))
}

/// Call `f` with each row the access path finds for `filter`, locked
/// and read at its newest version (`get_for_update`) and checked against
/// `filter` again, and its primary key; returns how many calls said the
/// row changed.
fn for_each_locked(
    ctx: Ctx<'_>,
    tx: &mut OwnedTxn,
    t: &quill::Table,
    schema: &TableSchema,
    filter: Option<&Expr>,
    mut f: impl FnMut(&mut OwnedTxn, &[Value], &[Value]) -> SqlResult<bool>,
) -> SqlResult<u64> {
    let path = access::choose(schema, filter, &[]);
    // The first pass reads the primary key and what the filter reads.
    let needed = access::columns_read(schema.def.columns.len(), &schema.def.primary_key, filter);
    let mut keys: Vec<Vec<Value>> = Vec::new();
    access::for_each(tx, t, &path, filter, needed.as_deref(), |row| {
        ctx.check_cancel()?;
        keys.push(
            schema
                .def
                .primary_key
                .iter()
                .map(|&k| row.get(k).cloned().ok_or_else(|| out_of_row(k)))
                .collect::<SqlResult<_>>()?,
        );
        Ok(true)
    })?;
    let mut n = 0;
    for key in keys {
        ctx.check_cancel()?;
        let Some(row) = tx.get_for_update(t, &key)? else {
            continue;
        };
        if let Some(e) = filter
            && !e.selects(&row)?
        {
            continue;
        }
        if f(tx, &key, &row)? {
            n += 1;
        }
    }
    Ok(n)
}

/// UPDATE t SET c = expr, ... [WHERE ...]
pub fn update(db: &Db, tx: &mut OwnedTxn, u: &ast::Update, ctx: Ctx<'_>) -> SqlResult<Output> {
    if u.from.is_some() {
        return Err(SqlError::unsupported("UPDATE ... FROM"));
    }
    if !u.table.joins.is_empty() {
        return Err(SqlError::unsupported("UPDATE with JOIN"));
    }
    let (t, schema, filter) = target(
        db,
        Some(&mut *tx),
        &u.table.relation,
        u.selection.as_ref(),
        ctx,
    )?;
    let sets = bind_sets(&schema, &u.assignments, ctx)?;
    let ret = returning(&schema, u.returning.as_deref(), ctx)?;
    apply_update(ctx, tx, &t, &schema, filter.as_ref(), &sets, ret)
}

/// One `SET column = expr` of an UPDATE: the column, its type and
/// domain, and the bound expression.
type Set = (usize, ColumnType, Domain, Expr);

fn bind_sets(
    schema: &TableSchema,
    assignments: &[ast::Assignment],
    ctx: Ctx<'_>,
) -> SqlResult<Vec<Set>> {
    let scope = TableScope(schema, ctx);
    let mut sets: Vec<Set> = Vec::new();
    for a in assignments {
        let ast::AssignmentTarget::ColumnName(c) = &a.target else {
            return Err(SqlError::unsupported("a tuple assignment"));
        };
        let (col, ty) = column_of(schema, c)?;
        if schema.def.primary_key.contains(&col) {
            return Err(SqlError::unsupported("updating a primary key column"));
        }
        let dom = schema.def.columns.get(col).map_or(Domain::Plain, |c| {
            types::domain(c.declared_type.as_deref(), c.ty)
        });
        sets.push((col, ty, dom, expr::bind(&a.value, &scope)?));
    }
    Ok(sets)
}

fn apply_update(
    ctx: Ctx<'_>,
    tx: &mut OwnedTxn,
    t: &quill::Table,
    schema: &TableSchema,
    filter: Option<&Expr>,
    sets: &[Set],
    ret: Option<Returning>,
) -> SqlResult<Output> {
    let mut out = Vec::new();
    let n = for_each_locked(ctx, tx, t, schema, filter, |tx, key, row| {
        let changes = sets
            .iter()
            .map(|(col, ty, dom, e)| Ok((*col, types::store_as(e.eval(row)?, *ty, *dom)?)))
            .collect::<SqlResult<Vec<_>>>()?;
        let changed = tx.update(t, key, &changes)?;
        if changed && let Some(ret) = &ret {
            let mut new = row.to_vec();
            for (col, v) in changes {
                if let Some(slot) = new.get_mut(col) {
                    *slot = v;
                }
            }
            ret.push(&mut out, &new)?;
        }
        Ok(changed)
    })?;
    Ok(Returning::output(ret, format!("UPDATE {n}"), out))
}

/// DELETE FROM t [WHERE ...]
pub fn delete(db: &Db, tx: &mut OwnedTxn, d: &ast::Delete, ctx: Ctx<'_>) -> SqlResult<Output> {
    if d.using.is_some() {
        return Err(SqlError::unsupported("DELETE ... USING"));
    }
    let from = match &d.from {
        ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
    };
    let [from] = from.as_slice() else {
        return Err(SqlError::unsupported("DELETE from several tables"));
    };
    let (t, schema, filter) = target(
        db,
        Some(&mut *tx),
        &from.relation,
        d.selection.as_ref(),
        ctx,
    )?;
    let ret = returning(&schema, d.returning.as_deref(), ctx)?;
    apply_delete(ctx, tx, &t, &schema, filter.as_ref(), ret)
}

fn apply_delete(
    ctx: Ctx<'_>,
    tx: &mut OwnedTxn,
    t: &quill::Table,
    schema: &TableSchema,
    filter: Option<&Expr>,
    ret: Option<Returning>,
) -> SqlResult<Output> {
    let mut out = Vec::new();
    let n = for_each_locked(ctx, tx, t, schema, filter, |tx, key, row| {
        let gone = tx.delete(t, key)?;
        if gone && let Some(ret) = &ret {
            ret.push(&mut out, row)?;
        }
        Ok(gone)
    })?;
    Ok(Returning::output(ret, format!("DELETE {n}"), out))
}

/// An INSERT, UPDATE or DELETE without RETURNING planned once with its
/// parameters as [`Expr::Param`] leaves, as [`crate::select::Generic`]
/// plans a query: each execution binds the values (and an UPDATE or
/// DELETE finds its rows through the access path they give). Holds no
/// strong reference to the table's schema (a dropped table's pages must
/// be freed).
pub struct GenericWrite {
    table: quill::Table,
    schema: std::sync::Weak<TableSchema>,
    kind: WriteKind,
}

/// What a [`GenericWrite`] does.
enum WriteKind {
    Insert {
        cols: InsertColumns,
        /// Each row's value per target (`None`: DEFAULT).
        rows: Vec<Vec<Option<Expr>>>,
    },
    Update {
        filter: Option<Expr>,
        sets: Vec<Set>,
    },
    Delete {
        filter: Option<Expr>,
    },
}

impl std::fmt::Debug for GenericWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            WriteKind::Insert { .. } => "INSERT",
            WriteKind::Update { .. } => "UPDATE",
            WriteKind::Delete { .. } => "DELETE",
        };
        f.debug_struct("GenericWrite")
            .field("table", &self.table.name())
            .field("kind", &kind)
            .finish()
    }
}

impl GenericWrite {
    /// The generic plan of `stmt` if it is an INSERT ... VALUES, UPDATE
    /// or DELETE of one table with no RETURNING and nothing in it a
    /// generic plan cannot keep (a subquery, a regular expression, a
    /// catalog lookup, the clock); `ctx` carries no parameter values.
    pub fn new(db: &Db, stmt: &ast::Statement, ctx: Ctx<'_>) -> Option<GenericWrite> {
        // Without a transaction a subquery reads as empty (see
        // `select::Generic::new`): none here.
        let text = stmt.to_string();
        if select::selects_in(&text) > 0 || select::reads_the_clock(&text) {
            return None;
        }
        let (t, schema, kind) = match stmt {
            ast::Statement::Insert(i) if i.returning.is_none() => {
                let (t, schema, cols, values) = insert_target(db, i).ok()?;
                let rows = values
                    .rows
                    .iter()
                    .map(|row| {
                        row.iter()
                            .map(|e| {
                                (!is_default(e))
                                    .then(|| expr::bind(e, &expr::NoColumns(ctx)))
                                    .transpose()
                            })
                            .collect::<SqlResult<Vec<_>>>()
                    })
                    .collect::<SqlResult<Vec<_>>>()
                    .ok()?;
                (t, schema, WriteKind::Insert { cols, rows })
            }
            ast::Statement::Update(u)
                if u.from.is_none() && u.table.joins.is_empty() && u.returning.is_none() =>
            {
                let (t, schema, filter) =
                    target(db, None, &u.table.relation, u.selection.as_ref(), ctx).ok()?;
                let sets = bind_sets(&schema, &u.assignments, ctx).ok()?;
                (t, schema, WriteKind::Update { filter, sets })
            }
            ast::Statement::Delete(d) if d.using.is_none() && d.returning.is_none() => {
                let from = match &d.from {
                    ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
                };
                let [from] = from.as_slice() else {
                    return None;
                };
                let (t, schema, filter) =
                    target(db, None, &from.relation, d.selection.as_ref(), ctx).ok()?;
                (t, schema, WriteKind::Delete { filter })
            }
            _ => return None,
        };
        let opaque = |e: &Expr| {
            matches!(
                e,
                Expr::Subquery(_) | Expr::Regex(..) | Expr::Lookup(..) | Expr::Outer(_)
            )
        };
        let exprs: Vec<&Expr> = match &kind {
            WriteKind::Insert { rows, .. } => rows.iter().flatten().flatten().collect(),
            WriteKind::Update { filter, sets } => filter
                .iter()
                .chain(sets.iter().map(|(_, _, _, e)| e))
                .collect(),
            WriteKind::Delete { filter } => filter.iter().collect(),
        };
        if exprs.into_iter().any(|e| e.any(&opaque)) {
            return None;
        }
        Some(GenericWrite {
            table: t,
            schema: std::sync::Arc::downgrade(&schema),
            kind,
        })
    }

    /// Run it with `params` in `tx`; `None` when the table's schema is no
    /// longer the one it was planned against (plan it again).
    pub fn run(
        &self,
        tx: &mut OwnedTxn,
        params: &[Value],
        ctx: Ctx<'_>,
    ) -> Option<SqlResult<Output>> {
        let current = match self.table.try_schema() {
            Ok(s) => s,
            Err(e) => return Some(Err(e.into())),
        };
        if self.table.is_dropped()
            || !std::sync::Weak::ptr_eq(&self.schema, &std::sync::Arc::downgrade(&current))
        {
            return None;
        }
        let bind =
            |filter: &Option<Expr>| filter.as_ref().map(|e| e.with_params(params)).transpose();
        let mut run = || match &self.kind {
            WriteKind::Insert { cols, rows } => apply_insert(
                ctx,
                tx,
                &self.table,
                &current,
                cols,
                Rows::Bound(rows, params),
                None,
            ),
            WriteKind::Update { filter, sets } => {
                let filter = bind(filter)?;
                let sets = sets
                    .iter()
                    .map(|(c, ty, dom, e)| Ok((*c, *ty, *dom, e.with_params(params)?)))
                    .collect::<SqlResult<Vec<Set>>>()?;
                apply_update(ctx, tx, &self.table, &current, filter.as_ref(), &sets, None)
            }
            WriteKind::Delete { filter } => {
                let filter = bind(filter)?;
                apply_delete(ctx, tx, &self.table, &current, filter.as_ref(), None)
            }
        };
        Some(run())
    }
}
