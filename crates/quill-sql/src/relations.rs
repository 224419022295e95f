//! Queries over several relations (`FROM a, b`, `[LEFT] JOIN ... ON`)
//! and over the generated catalogs: each relation's rows are read
//! whole (a catalog's generated rows, or a scan of a table) and joined
//! by nested loops, with `LEFT JOIN` padding unmatched rows with NULLs.
//! This is the path of catalog queries (psql's `\d`), not of OLTP
//! statements, which read one table through an access path; a join that
//! would hold more than [`MAX_JOIN_ROWS`] rows is refused.
//!
//! Names resolve as `alias.column` or, unqualified, to the first
//! relation that has the column. A scalar subquery over catalogs may
//! refer to the enclosing query's columns (correlated): it is planned
//! once and run per row with those columns' values.

use std::sync::Arc;

use quill::catalog::{ColumnType, Value};
use quill::{Db, OwnedTxn, Table};
use sqlparser::ast;

use crate::error::{SqlError, SqlResult, SqlState};
use crate::expr::{self, Ctx, Expr, Scope, SubqueryRef};
use crate::pg_catalog;
use crate::session::SessionInfo;

/// The most rows a join may produce.
pub const MAX_JOIN_ROWS: usize = 1_000_000;

/// One relation of a FROM list, as names see it.
#[derive(Clone, Debug)]
pub struct RelInfo {
    /// The name it is referred to by (its alias, or its table name).
    pub alias: String,
    /// Its columns' names and types.
    pub columns: Vec<(String, ColumnType)>,
    /// The position of its first column in the joined row.
    pub offset: usize,
}

/// Where a relation's rows come from.
#[derive(Clone)]
pub enum RelData {
    /// Rows generated when the query was planned (a catalog).
    Rows(Arc<Vec<Vec<Value>>>),
    /// A table, read whole in the statement's transaction.
    Table(Table),
}

/// How a relation joins the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinKind {
    /// Every pair (`,`, `CROSS JOIN`, `JOIN ... ON` keeps the pairs its
    /// condition selects).
    Inner,
    /// `LEFT JOIN`: pairs the condition selects, and each left row that
    /// has none, padded with NULLs.
    Left,
}

/// A relation in a join.
#[derive(Clone)]
pub struct Rel {
    /// Its rows.
    pub data: RelData,
    /// How it joins.
    pub kind: JoinKind,
    /// Its `ON` condition (over the joined row so far).
    pub on: Option<Expr>,
    /// Its number of columns.
    pub width: usize,
}

impl Rel {
    /// Whether this relation, inner-joined, has no rows (so the join has
    /// none).
    pub fn empties_join(&self) -> bool {
        self.kind == JoinKind::Inner && matches!(&self.data, RelData::Rows(r) if r.is_empty())
    }
}

/// Resolve one FROM item: a catalog (qualified by `pg_catalog` or
/// `information_schema`, or a `pg_` name that is no user table) or a
/// table.
pub fn resolve(
    db: &Db,
    info: &SessionInfo,
    factor: &ast::TableFactor,
    offset: usize,
) -> SqlResult<(RelInfo, RelData)> {
    let ast::TableFactor::Table { name, alias, .. } = factor else {
        return Err(SqlError::unsupported(format!("FROM {factor}")));
    };
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => Ok(expr::name_of(i)),
            other => Err(SqlError::unsupported(format!("the name {other}"))),
        })
        .collect::<SqlResult<_>>()?;
    let (schema, table) = match parts.as_slice() {
        [t] => (None, t.clone()),
        [s, t] => (Some(s.clone()), t.clone()),
        _ => return Err(crate::ddl::no_table(&name.to_string())),
    };
    let alias = alias
        .as_ref()
        .map_or_else(|| table.clone(), |a| expr::name_of(&a.name));
    let user = match schema.as_deref() {
        None | Some("public") => db.table(&table).ok(),
        _ => None,
    };
    if let Some(t) = user {
        let s = t.try_schema()?;
        let columns = s
            .def
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.ty))
            .collect();
        return Ok((
            RelInfo {
                alias,
                columns,
                offset,
            },
            RelData::Table(t),
        ));
    }
    let catalog = match schema.as_deref() {
        Some(s) if pg_catalog::is_catalog_schema(s) => pg_catalog::table(db, info, s, &table),
        None => pg_catalog::table(db, info, "pg_catalog", &table),
        _ => None,
    };
    match catalog {
        Some(v) => Ok((
            RelInfo {
                alias,
                columns: v.columns,
                offset,
            },
            RelData::Rows(Arc::new(v.rows)),
        )),
        None => Err(crate::ddl::no_table(&name.to_string())),
    }
}

/// The scope of a query over relations.
pub struct RelScope<'a> {
    /// The relations, in FROM order.
    pub rels: Vec<RelInfo>,
    /// Parameters and session.
    pub ctx: Ctx<'a>,
    /// The catalogs' database.
    pub db: &'a Db,
    /// The enclosing query's scope, for a correlated subquery.
    pub outer: Option<&'a dyn Scope>,
}

impl RelScope<'_> {
    /// The types of the joined row's columns.
    pub fn types(&self) -> Vec<ColumnType> {
        self.rels
            .iter()
            .flat_map(|r| r.columns.iter().map(|(_, t)| *t))
            .collect()
    }

    /// The joined row's columns, `*` order.
    pub fn names(&self) -> Vec<String> {
        self.rels
            .iter()
            .flat_map(|r| r.columns.iter().map(|(n, _)| n.clone()))
            .collect()
    }
}

impl Scope for RelScope<'_> {
    fn column(&self, name: &str) -> Option<usize> {
        self.rels.iter().find_map(|r| {
            r.columns
                .iter()
                .position(|(n, _)| n == name)
                .map(|i| r.offset + i)
        })
    }
    fn qualified(&self, qualifier: &str, name: &str) -> Option<usize> {
        let r = self.rels.iter().find(|r| r.alias == qualifier)?;
        r.columns
            .iter()
            .position(|(n, _)| n == name)
            .map(|i| r.offset + i)
    }
    fn outer(&self, qualifier: Option<&str>, name: &str) -> Option<usize> {
        let o = self.outer?;
        match qualifier {
            None => o.column(name),
            Some(q) => o.qualified(q, name),
        }
    }
    fn ctx(&self) -> Ctx<'_> {
        self.ctx
    }
    fn db(&self) -> Option<&Db> {
        Some(self.db)
    }
    fn intercept(&self, e: &ast::Expr) -> Option<SqlResult<Expr>> {
        match e {
            ast::Expr::Subquery(q) => Some(self.scalar_subquery(q)),
            ast::Expr::In {
                expr: left,
                target: ast::InTarget::Subquery(q),
                negated,
                ..
            } => Some((|| {
                let left = expr::bind(left, self)?;
                let plan = crate::select::plan_in(self.db, q, self.ctx, None, None)?;
                if !plan.is_generated() {
                    return Err(SqlError::unsupported(
                        "IN (SELECT ...) over a table inside a catalog query",
                    ));
                }
                let out = crate::select::run_generated(&plan)?;
                Ok(Expr::InList(
                    Box::new(left),
                    out.rows
                        .into_iter()
                        .filter_map(|mut r| r.pop())
                        .map(Expr::Const)
                        .collect(),
                    *negated,
                ))
            })()),
            _ => None,
        }
    }
}

impl RelScope<'_> {
    /// A scalar subquery over catalogs, correlated or not: planned once
    /// with this scope as its outer scope, run per row.
    fn scalar_subquery(&self, q: &ast::Query) -> SqlResult<Expr> {
        let plan = crate::select::plan_in(self.db, q, self.ctx, None, Some(self))?;
        if !plan.is_generated() {
            return Err(SqlError::unsupported(
                "a scalar subquery over a table inside a catalog query",
            ));
        }
        if plan.columns.len() != 1 {
            return Err(SqlError::new(
                SqlState::SYNTAX_ERROR,
                "subquery must return only one column",
            ));
        }
        let plan = Arc::new(plan);
        Ok(Expr::Subquery(SubqueryRef(Arc::new(
            move |row: &[Value]| {
                let bound = plan.with_outer(row);
                let mut out = crate::select::run_generated(&bound)?;
                if out.rows.len() > 1 {
                    return Err(SqlError::new(
                        SqlState::CARDINALITY_VIOLATION,
                        "more than one row returned by a subquery used as an expression",
                    ));
                }
                Ok(out
                    .rows
                    .pop()
                    .and_then(|mut r| r.pop())
                    .unwrap_or(Value::Null))
            },
        ))))
    }
}

/// Join `rels` (nested loops) and keep the rows `filter` selects.
pub fn join(
    rels: &[Rel],
    filter: Option<&Expr>,
    mut tx: Option<&mut OwnedTxn>,
    ctx: Ctx<'_>,
) -> SqlResult<Vec<Vec<Value>>> {
    let mut acc: Vec<Vec<Value>> = vec![Vec::new()];
    for rel in rels {
        let owned;
        let rows: &[Vec<Value>] = match &rel.data {
            RelData::Rows(r) => r,
            RelData::Table(t) => {
                let Some(tx) = tx.as_deref_mut() else {
                    return Err(SqlError::new(
                        SqlState::INTERNAL_ERROR,
                        "a table in a join read without a transaction",
                    ));
                };
                let mut v = Vec::new();
                for row in tx.scan(
                    t,
                    std::ops::Bound::Unbounded,
                    std::ops::Bound::Unbounded,
                    quill::btree::Direction::Forward,
                )? {
                    ctx.check_cancel()?;
                    v.push(row?);
                    if v.len() > MAX_JOIN_ROWS {
                        return Err(too_big());
                    }
                }
                owned = v;
                &owned
            }
        };
        let mut next = Vec::new();
        for l in &acc {
            ctx.check_cancel()?;
            let mut matched = false;
            for r in rows {
                let mut row = Vec::with_capacity(l.len() + r.len());
                row.extend_from_slice(l);
                row.extend_from_slice(r);
                if match &rel.on {
                    Some(e) => e.selects(&row)?,
                    None => true,
                } {
                    next.push(row);
                    matched = true;
                    if next.len() > MAX_JOIN_ROWS {
                        return Err(too_big());
                    }
                }
            }
            if !matched && rel.kind == JoinKind::Left {
                let mut row = l.clone();
                row.resize(l.len() + rel.width, Value::Null);
                next.push(row);
            }
        }
        acc = next;
    }
    match filter {
        None => Ok(acc),
        Some(f) => {
            let mut kept = Vec::with_capacity(acc.len());
            for r in acc {
                if f.selects(&r)? {
                    kept.push(r);
                }
            }
            Ok(kept)
        }
    }
}

fn too_big() -> SqlError {
    SqlError::new(
        SqlState::PROGRAM_LIMIT_EXCEEDED,
        format!("the join would hold more than {MAX_JOIN_ROWS} rows"),
    )
}
