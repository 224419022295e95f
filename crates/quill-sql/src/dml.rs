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
use crate::select::WhereScope;
use crate::session::Output;
use crate::types::coerce;

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
fn column_of(schema: &TableSchema, name: &ast::ObjectName) -> SqlResult<(usize, ColumnType)> {
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

/// INSERT INTO t [(cols)] VALUES (...), ...
pub fn insert(db: &Db, tx: &mut OwnedTxn, i: &ast::Insert, ctx: Ctx<'_>) -> SqlResult<Output> {
    let ast::TableObject::TableName(name) = &i.table else {
        return Err(SqlError::unsupported("INSERT into a table function"));
    };
    if i.returning.is_some() {
        return Err(SqlError::unsupported("RETURNING"));
    }
    if i.on.is_some() {
        return Err(SqlError::unsupported("ON CONFLICT"));
    }
    let (t, schema) = access::open(db, &table_name(name)?)?;
    let ncols = schema.def.columns.len();
    // Omitted columns take their defaults (NULL without one).
    let defaults: Vec<Value> = schema
        .def
        .columns
        .iter()
        .map(|c| c.default.clone().unwrap_or(Value::Null))
        .collect();
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
    let mut n = 0u64;
    for row in &values.rows {
        if row.len() > targets.len() {
            return Err(SqlError::new(
                SqlState::SYNTAX_ERROR,
                "INSERT has more expressions than target columns",
            ));
        }
        let mut full = defaults.clone();
        debug_assert_eq!(full.len(), ncols);
        for (e, &(col, ty)) in row.iter().zip(&targets) {
            let v = match e {
                ast::Expr::Identifier(id)
                    if id.value.eq_ignore_ascii_case("default") && id.quote_style.is_none() =>
                {
                    defaults.get(col).cloned().ok_or_else(|| out_of_row(col))?
                }
                e => expr::bind(e, &expr::NoColumns(ctx))?.eval(&[])?,
            };
            let slot = full.get_mut(col).ok_or_else(|| out_of_row(col))?;
            *slot = coerce(v, ty)?;
        }
        tx.insert(&t, &full)?;
        n += 1;
    }
    Ok(Output::tag(format!("INSERT 0 {n}")))
}

/// The table and WHERE of an UPDATE or DELETE.
fn target(
    db: &Db,
    tx: &mut OwnedTxn,
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
        tx: std::cell::RefCell::new(Some(tx)),
    };
    let filter = selection.map(|e| expr::bind(e, &scope)).transpose()?;
    Ok((t, schema, filter))
}

/// Call `f` with each row the access path finds for `filter`, locked
/// and read at its newest version (`get_for_update`) and checked against
/// `filter` again, and its primary key; returns how many calls said the
/// row changed.
fn for_each_locked(
    tx: &mut OwnedTxn,
    t: &quill::Table,
    schema: &TableSchema,
    filter: Option<&Expr>,
    mut f: impl FnMut(&mut OwnedTxn, &[Value], &[Value]) -> SqlResult<bool>,
) -> SqlResult<u64> {
    let path = access::choose(schema, filter, &[]);
    let mut keys: Vec<Vec<Value>> = Vec::new();
    access::for_each(tx, t, &path, filter, |row| {
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
    if u.returning.is_some() || u.from.is_some() {
        return Err(SqlError::unsupported("UPDATE ... FROM or RETURNING"));
    }
    if !u.table.joins.is_empty() {
        return Err(SqlError::unsupported("UPDATE with JOIN"));
    }
    let (t, schema, filter) = target(db, tx, &u.table.relation, u.selection.as_ref(), ctx)?;
    let scope = TableScope(&schema, ctx);
    let mut sets: Vec<(usize, ColumnType, Expr)> = Vec::new();
    for a in &u.assignments {
        let ast::AssignmentTarget::ColumnName(c) = &a.target else {
            return Err(SqlError::unsupported("a tuple assignment"));
        };
        let (col, ty) = column_of(&schema, c)?;
        if schema.def.primary_key.contains(&col) {
            return Err(SqlError::unsupported("updating a primary key column"));
        }
        sets.push((col, ty, expr::bind(&a.value, &scope)?));
    }
    let n = for_each_locked(tx, &t, &schema, filter.as_ref(), |tx, key, row| {
        let changes = sets
            .iter()
            .map(|(col, ty, e)| Ok((*col, coerce(e.eval(row)?, *ty)?)))
            .collect::<SqlResult<Vec<_>>>()?;
        Ok(tx.update(&t, key, &changes)?)
    })?;
    Ok(Output::tag(format!("UPDATE {n}")))
}

/// DELETE FROM t [WHERE ...]
pub fn delete(db: &Db, tx: &mut OwnedTxn, d: &ast::Delete, ctx: Ctx<'_>) -> SqlResult<Output> {
    if d.returning.is_some() || d.using.is_some() {
        return Err(SqlError::unsupported("DELETE ... USING or RETURNING"));
    }
    let from = match &d.from {
        ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
    };
    let [from] = from.as_slice() else {
        return Err(SqlError::unsupported("DELETE from several tables"));
    };
    let (t, schema, filter) = target(db, tx, &from.relation, d.selection.as_ref(), ctx)?;
    let n = for_each_locked(tx, &t, &schema, filter.as_ref(), |tx, key, _| {
        Ok(tx.delete(&t, key)?)
    })?;
    Ok(Output::tag(format!("DELETE {n}")))
}
