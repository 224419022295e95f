//! SELECT over one table: projection of columns and expressions, WHERE
//! through an access path, ORDER BY the primary key (the order rows come
//! in) or a sort, LIMIT and OFFSET. Aggregates, GROUP BY and joins come
//! later.

use quill::catalog::{ColumnType, Value};
use quill::{Db, OwnedTxn};
use sqlparser::ast::{self, SelectItem, SetExpr};

use crate::access::{self, TableScope};
use crate::ddl::table_name;
use crate::error::{SqlError, SqlResult, SqlState};
use crate::expr::{self, Expr};
use crate::session::{ColumnDesc, Output};

fn count(e: &ast::Expr) -> SqlResult<usize> {
    match expr::bind(e, &expr::NoColumns)? {
        Expr::Const(Value::Int64(n)) if n >= 0 => Ok(n as usize),
        Expr::Const(v) => Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("LIMIT and OFFSET must be non-negative integers, not {v:?}"),
        )),
        _ => Err(SqlError::unsupported(
            "a LIMIT or OFFSET that is not a constant",
        )),
    }
}

/// The static type of a bound expression over `cols` (for the result's
/// column description).
fn type_of(e: &Expr, cols: &[quill::catalog::Column]) -> ColumnType {
    match e {
        Expr::Column(i) => cols.get(*i).map_or(ColumnType::Int64, |c| c.ty),
        Expr::Const(Value::Int32(_)) => ColumnType::Int32,
        Expr::Const(Value::Float64(_)) => ColumnType::Float64,
        Expr::Const(Value::Text(_)) => ColumnType::Text { max_len: u32::MAX },
        Expr::Const(Value::Bool(_)) => ColumnType::Bool,
        Expr::Const(_) => ColumnType::Int64,
        Expr::Arith(_, a, b) => match (type_of(a, cols), type_of(b, cols)) {
            (ColumnType::Float64, _) | (_, ColumnType::Float64) => ColumnType::Float64,
            (ColumnType::Int32, ColumnType::Int32) => ColumnType::Int32,
            _ => ColumnType::Int64,
        },
        Expr::Neg(a) => type_of(a, cols),
        _ => ColumnType::Bool,
    }
}

/// Run a query.
pub fn query(db: &Db, tx: &mut OwnedTxn, q: &ast::Query) -> SqlResult<Output> {
    if q.with.is_some() {
        return Err(SqlError::unsupported("WITH"));
    }
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return Err(SqlError::unsupported(format!("the query {}", q.body)));
    };
    let (limit, offset) = match &q.limit_clause {
        None => (None, 0),
        Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => (
            limit.as_ref().map(count).transpose()?,
            offset
                .as_ref()
                .map(|o| count(&o.value))
                .transpose()?
                .unwrap_or(0),
        ),
        Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => {
            (Some(count(limit)?), count(offset)?)
        }
    };
    if sel.having.is_some() || sel.distinct.is_some() {
        return Err(SqlError::unsupported("DISTINCT and HAVING"));
    }
    if !matches!(&sel.group_by, ast::GroupByExpr::Expressions(g, _) if g.is_empty()) {
        return Err(SqlError::unsupported("GROUP BY"));
    }
    let [from] = sel.from.as_slice() else {
        if sel.from.is_empty() {
            return constant_select(sel);
        }
        return Err(SqlError::unsupported("a query over more than one table"));
    };
    if !from.joins.is_empty() {
        return Err(SqlError::unsupported("JOIN"));
    }
    let ast::TableFactor::Table { name, .. } = &from.relation else {
        return Err(SqlError::unsupported(format!("FROM {}", from.relation)));
    };
    let (t, schema) = access::open(db, &table_name(name)?)?;
    let scope = TableScope(&schema);
    let filter = sel
        .selection
        .as_ref()
        .map(|e| expr::bind(e, &scope))
        .transpose()?;
    let mut outputs: Vec<(String, Expr)> = Vec::new();
    for item in &sel.projection {
        match item {
            SelectItem::Wildcard(_) => {
                for (i, c) in schema.def.columns.iter().enumerate() {
                    outputs.push((c.name.clone(), Expr::Column(i)));
                }
            }
            SelectItem::UnnamedExpr(e) => {
                let name = match e {
                    ast::Expr::Identifier(i) => expr::name_of(i),
                    ast::Expr::CompoundIdentifier(p) => {
                        p.last().map(expr::name_of).unwrap_or_default()
                    }
                    _ => "?column?".to_string(),
                };
                outputs.push((name, expr::bind(e, &scope)?));
            }
            SelectItem::ExprWithAlias { expr: e, alias } => {
                outputs.push((expr::name_of(alias), expr::bind(e, &scope)?));
            }
            other => return Err(SqlError::unsupported(format!("the select item {other}"))),
        }
    }
    // ORDER BY: the primary key order rows come in, or a sort.
    let mut sort: Vec<(Expr, bool)> = Vec::new();
    if let Some(ob) = &q.order_by {
        let ast::OrderByKind::Expressions(list) = &ob.kind else {
            return Err(SqlError::unsupported("ORDER BY ALL"));
        };
        for o in list {
            let e = match &o.expr {
                ast::Expr::Value(v) => match expr::literal(&v.value)? {
                    Value::Int64(n) if n >= 1 && (n as usize) <= outputs.len() => outputs
                        .get(n as usize - 1)
                        .map(|(_, e)| e.clone())
                        .ok_or_else(|| {
                            SqlError::new(
                                SqlState::INVALID_COLUMN_REFERENCE,
                                "bad ORDER BY position",
                            )
                        })?,
                    _ => {
                        return Err(SqlError::new(
                            SqlState::INVALID_COLUMN_REFERENCE,
                            format!("ORDER BY position {} is not in select list", v.value),
                        ));
                    }
                },
                e => expr::bind(e, &scope)?,
            };
            match o.options.sort {
                None | Some(ast::OrderBySort::Asc) => sort.push((e, true)),
                Some(ast::OrderBySort::Desc) => sort.push((e, false)),
                Some(_) => return Err(SqlError::unsupported("ORDER BY ... USING")),
            }
        }
    }
    let pk_order = sort.is_empty()
        || (sort.iter().all(|(_, asc)| *asc)
            && sort.len() <= schema.def.primary_key.len()
            && sort
                .iter()
                .zip(&schema.def.primary_key)
                .all(|((e, _), &k)| *e == Expr::Column(k)));
    let path = access::choose(&schema, filter.as_ref());
    let mut rows: Vec<Vec<Value>> = Vec::new();
    let stop_at = if pk_order {
        limit.map(|l| l.saturating_add(offset))
    } else {
        None
    };
    access::for_each(tx, &t, &path, filter.as_ref(), |row| {
        rows.push(row);
        Ok(stop_at.is_none_or(|n| rows.len() < n))
    })?;
    if !pk_order {
        let mut keyed: Vec<(Vec<Value>, Vec<Value>)> = rows
            .into_iter()
            .map(|r| {
                let k = sort
                    .iter()
                    .map(|(e, _)| e.eval(&r))
                    .collect::<SqlResult<Vec<_>>>()?;
                Ok((k, r))
            })
            .collect::<SqlResult<_>>()?;
        let mut err = None;
        keyed.sort_by(|(a, _), (b, _)| {
            for ((x, y), (_, asc)) in a.iter().zip(b).zip(&sort) {
                // NULLs sort last ascending, first descending (PostgreSQL).
                let o = match (x.is_null(), y.is_null()) {
                    (true, true) => std::cmp::Ordering::Equal,
                    (true, false) => std::cmp::Ordering::Greater,
                    (false, true) => std::cmp::Ordering::Less,
                    _ => expr::compare(x, y).unwrap_or_else(|e| {
                        err.get_or_insert(e);
                        std::cmp::Ordering::Equal
                    }),
                };
                let o = if *asc { o } else { o.reverse() };
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            std::cmp::Ordering::Equal
        });
        if let Some(e) = err {
            return Err(e);
        }
        rows = keyed.into_iter().map(|(_, r)| r).collect();
    }
    let rows: Vec<Vec<Value>> = rows
        .into_iter()
        .skip(offset)
        .take(limit.unwrap_or(usize::MAX))
        .map(|r| outputs.iter().map(|(_, e)| e.eval(&r)).collect())
        .collect::<SqlResult<_>>()?;
    let columns = outputs
        .iter()
        .map(|(n, e)| ColumnDesc {
            name: n.clone(),
            ty: type_of(e, &schema.def.columns),
        })
        .collect();
    Ok(Output {
        tag: format!("SELECT {}", rows.len()),
        columns,
        rows,
    })
}

/// SELECT without FROM: one row of constant expressions.
fn constant_select(sel: &ast::Select) -> SqlResult<Output> {
    let mut columns = Vec::new();
    let mut row = Vec::new();
    for item in &sel.projection {
        let (name, e) = match item {
            SelectItem::UnnamedExpr(e) => ("?column?".to_string(), e),
            SelectItem::ExprWithAlias { expr: e, alias } => (expr::name_of(alias), e),
            other => return Err(SqlError::unsupported(format!("the select item {other}"))),
        };
        let b = expr::bind(e, &expr::NoColumns)?;
        columns.push(ColumnDesc {
            name,
            ty: type_of(&b, &[]),
        });
        row.push(b.eval(&[])?);
    }
    Ok(Output {
        tag: "SELECT 1".into(),
        columns,
        rows: vec![row],
    })
}
