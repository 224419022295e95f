//! SELECT over one table, planned then run: WHERE through an access path
//! (uncorrelated `IN (SELECT ...)` and scalar subqueries are run first
//! and become constants), aggregates with or without GROUP BY, HAVING,
//! DISTINCT, ORDER BY the primary key (the order rows come in) or a
//! sort, LIMIT and OFFSET.
//!
//! A plan is also what Describe needs: [`describe`] plans without
//! running and returns the result's columns.

use std::cell::RefCell;
use std::collections::HashMap;

use quill::catalog::schema::TableSchema;
use quill::catalog::{ColumnType, Value, ValueRef};
use quill::{Db, OwnedTxn, Table};
use sqlparser::ast::{self, SelectItem, SetExpr};

use crate::access::{self, Path, TableScope};
use crate::ddl::table_name;
use crate::error::{SqlError, SqlResult, SqlState};
use crate::expr::{self, Ctx, Expr, Scope};
use crate::relations::{self, JoinKind, Rel, RelData, RelScope};
use crate::session::{ColumnDesc, Output};

/// Rows a result, a sort or a grouping may hold in memory; a statement
/// that would hold more is refused (54000) rather than exhausting the
/// server's memory. So no result has more rows than this, and a protocol
/// row limit above it is the same as none (the server relies on that).
pub const MAX_RESULT_ROWS: usize = 4_000_000;

fn count(e: &ast::Expr, ctx: Ctx<'_>) -> SqlResult<Option<usize>> {
    match expr::bind(e, &expr::NoColumns(ctx))? {
        Expr::Const(Value::Int64(n)) if n >= 0 => Ok(Some(n as usize)),
        Expr::Const(Value::Int32(n)) if n >= 0 => Ok(Some(n as usize)),
        Expr::Const(Value::Null) => Ok(None),
        // Describing: the value comes with the parameters.
        Expr::Param(_) => Ok(None),
        Expr::Const(v) => Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!(
                "LIMIT and OFFSET must be non-negative integers, not {}",
                crate::types::to_text(&v).unwrap_or_else(|| "NULL".into())
            ),
        )),
        _ => Err(SqlError::unsupported(
            "a LIMIT or OFFSET that is not a constant",
        )),
    }
}

/// The static type of a bound expression over `cols` (for the result's
/// column description), with `params` the types of `$1..$n` while the
/// statement is described. A binary-format client decodes the values by
/// it, so for columns, parameters, constants, arithmetic, negation and
/// casts it is exactly the type of the values the expression gives when
/// run. `coalesce` and CASE take the type of their first argument or
/// branch; a value of another type from a later one is sent as itself
/// (a known gap: PostgreSQL would have resolved one common type).
pub fn type_of(e: &Expr, cols: &[ColumnType], params: &[ColumnType]) -> ColumnType {
    let type_of = |e: &Expr| type_of(e, cols, params);
    match e {
        Expr::Column(i) => cols.get(*i).copied().unwrap_or(ColumnType::Int64),
        Expr::Const(Value::Int32(_)) => ColumnType::Int32,
        Expr::Const(Value::Float64(_)) => ColumnType::Float64,
        Expr::Param(n) => params.get(*n).copied().unwrap_or(TEXT),
        Expr::Const(Value::Text(_)) | Expr::Const(Value::Null) => TEXT,
        Expr::Const(Value::Bytes(_)) => ColumnType::Bytes { max_len: u32::MAX },
        Expr::Const(Value::Timestamp(_)) => ColumnType::Timestamp,
        Expr::Const(Value::Bool(_)) => ColumnType::Bool,
        Expr::Const(_) => ColumnType::Int64,
        Expr::Arith(_, a, b) => match (type_of(a), type_of(b)) {
            (ColumnType::Float64, _) | (_, ColumnType::Float64) => ColumnType::Float64,
            (ColumnType::Int32, ColumnType::Int32) => ColumnType::Int32,
            _ => ColumnType::Int64,
        },
        Expr::Neg(a) => type_of(a),
        Expr::Cast(_, t) => *t,
        Expr::Case(_, whens, other) => whens
            .first()
            .map(|(_, r)| r)
            .or(other.as_deref())
            .map_or(TEXT, type_of),
        Expr::Lookup(..) | Expr::Subquery(_) | Expr::Outer(_) => TEXT,
        Expr::Func(name, args) => match name.as_str() {
            "length" | "octet_length" => ColumnType::Int32,
            "coalesce" => args.first().map_or(ColumnType::Int64, type_of),
            _ => ColumnType::Text { max_len: u32::MAX },
        },
        _ => ColumnType::Bool,
    }
}

/// An aggregate function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AggFn {
    CountStar,
    Count,
    Sum,
    Min,
    Max,
    Avg,
}

/// One aggregate of a grouped query: its function and argument (over
/// the table's row).
#[derive(Clone, Debug)]
struct Agg {
    func: AggFn,
    arg: Option<Expr>,
    ty: ColumnType,
}

/// A running aggregate.
#[derive(Clone, Debug)]
enum Acc {
    Count(i64),
    Sum(Option<Value>),
    Extreme(Option<Value>),
    Avg(f64, i64),
}

impl Acc {
    fn new(f: AggFn) -> Acc {
        match f {
            AggFn::CountStar | AggFn::Count => Acc::Count(0),
            AggFn::Sum => Acc::Sum(None),
            AggFn::Min | AggFn::Max => Acc::Extreme(None),
            AggFn::Avg => Acc::Avg(0.0, 0),
        }
    }

    /// Fold one row's argument in (`None` for `count(*)`, which has
    /// none); a value is copied only when the aggregate keeps it.
    fn add(&mut self, f: AggFn, v: Option<&Value>) -> SqlResult<()> {
        let v = match v {
            None => {
                if let Acc::Count(n) = self {
                    *n += 1;
                }
                return Ok(());
            }
            Some(Value::Null) => return Ok(()),
            Some(v) => v,
        };
        match self {
            Acc::Count(n) => *n += 1,
            Acc::Sum(s) => {
                *s = Some(match s.take() {
                    None => match v {
                        Value::Int32(x) => Value::Int64(i64::from(*x)),
                        v => v.clone(),
                    },
                    Some(acc) => expr::add(&acc, v)?,
                })
            }
            Acc::Extreme(e) => {
                let replace = match e {
                    None => true,
                    Some(cur) => {
                        let o = expr::compare(v, cur)?;
                        if f == AggFn::Min {
                            o.is_lt()
                        } else {
                            o.is_gt()
                        }
                    }
                };
                if replace {
                    match e.as_mut() {
                        Some(cur) => ValueRef::from(v).assign_to(cur),
                        None => *e = Some(v.clone()),
                    }
                }
            }
            Acc::Avg(sum, n) => {
                *sum += expr::as_f64(v).ok_or_else(|| {
                    SqlError::new(
                        SqlState::UNDEFINED_FUNCTION,
                        format!("function avg({}) does not exist", v.type_name()),
                    )
                })?;
                *n += 1;
            }
        }
        Ok(())
    }

    fn finish(self) -> Value {
        match self {
            Acc::Count(n) => Value::Int64(n),
            Acc::Sum(s) | Acc::Extreme(s) => s.unwrap_or(Value::Null),
            Acc::Avg(_, 0) => Value::Null,
            Acc::Avg(s, n) => Value::Float64(s / n as f64),
        }
    }
}

/// Binds a grouped query's expressions to its grouped row: the GROUP BY
/// expressions first, then one position per aggregate (registered as
/// binding meets them).
struct GroupScope<'a> {
    table: &'a dyn Scope,
    group_by: &'a [ast::Expr],
    aggs: RefCell<Vec<(ast::Expr, Agg)>>,
    col_types: Vec<ColumnType>,
}

impl Scope for GroupScope<'_> {
    fn column(&self, _: &str) -> Option<usize> {
        None
    }
    fn ctx(&self) -> Ctx<'_> {
        self.table.ctx()
    }
    fn intercept(&self, e: &ast::Expr) -> Option<SqlResult<Expr>> {
        if let Some(g) = self.group_by.iter().position(|g| g == e) {
            return Some(Ok(Expr::Column(g)));
        }
        match e {
            ast::Expr::Function(f) => {
                let name = expr::function_name(f);
                if !expr::AGGREGATES.contains(&name.as_str()) {
                    return None;
                }
                Some(self.aggregate(e, f, &name))
            }
            ast::Expr::Identifier(i) => Some(Err(ungrouped(&expr::name_of(i)))),
            ast::Expr::CompoundIdentifier(p) => Some(Err(ungrouped(
                &p.last().map(expr::name_of).unwrap_or_default(),
            ))),
            _ => None,
        }
    }
}

fn ungrouped(name: &str) -> SqlError {
    SqlError::new(
        SqlState::GROUPING_ERROR,
        format!(
            "column \"{name}\" must appear in the GROUP BY clause or be used in an aggregate function"
        ),
    )
}

impl GroupScope<'_> {
    fn aggregate(&self, e: &ast::Expr, f: &ast::Function, name: &str) -> SqlResult<Expr> {
        let base = self.group_by.len();
        if let Some(i) = self.aggs.borrow().iter().position(|(x, _)| x == e) {
            return Ok(Expr::Column(base + i));
        }
        let star = matches!(&f.args, ast::FunctionArguments::List(l)
            if matches!(l.args.as_slice(), [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)]));
        if let ast::FunctionArguments::List(l) = &f.args
            && l.duplicate_treatment == Some(ast::DuplicateTreatment::Distinct)
        {
            return Err(SqlError::unsupported(format!("{name}(DISTINCT ...)")));
        }
        let (func, arg) = if star {
            if name != "count" {
                return Err(SqlError::new(
                    SqlState::SYNTAX_ERROR,
                    format!("{name}(*) is not a function; only count(*) is"),
                ));
            }
            (AggFn::CountStar, None)
        } else {
            let args = expr::function_args(f)?;
            let [a] = args.as_slice() else {
                return Err(SqlError::new(
                    SqlState::UNDEFINED_FUNCTION,
                    format!("function {name} takes one argument"),
                ));
            };
            // The argument is over the table's row, not the grouped one.
            let a = expr::bind(a, self.table)?;
            let func = match name {
                "count" => AggFn::Count,
                "sum" => AggFn::Sum,
                "min" => AggFn::Min,
                "max" => AggFn::Max,
                _ => AggFn::Avg,
            };
            (func, Some(a))
        };
        let arg_ty = arg.as_ref().map_or(ColumnType::Int64, |a| {
            type_of(a, &self.col_types, self.table.ctx().param_types)
        });
        let ty = match func {
            AggFn::CountStar | AggFn::Count => ColumnType::Int64,
            AggFn::Avg => ColumnType::Float64,
            AggFn::Sum => match arg_ty {
                ColumnType::Int32 => ColumnType::Int64,
                t => t,
            },
            AggFn::Min | AggFn::Max => arg_ty,
        };
        let mut aggs = self.aggs.borrow_mut();
        aggs.push((e.clone(), Agg { func, arg, ty }));
        Ok(Expr::Column(base + aggs.len() - 1))
    }
}

/// A WHERE's scope: the table's columns, and uncorrelated subqueries run
/// (in the statement's transaction) and replaced by their values.
pub struct WhereScope<'a, 'b> {
    /// The table.
    pub table: TableScope<'a>,
    /// The database the subqueries read.
    pub db: &'a Db,
    /// The transaction they read in; `None` while describing (a
    /// subquery then binds to an empty list).
    pub tx: RefCell<Option<&'b mut OwnedTxn>>,
}

impl Scope for WhereScope<'_, '_> {
    fn column(&self, name: &str) -> Option<usize> {
        self.table.column(name)
    }
    fn ctx(&self) -> Ctx<'_> {
        self.table.ctx()
    }
    fn intercept(&self, e: &ast::Expr) -> Option<SqlResult<Expr>> {
        match e {
            ast::Expr::In {
                expr: left,
                target: ast::InTarget::Subquery(subquery),
                negated,
                ..
            } => Some((|| {
                let left = expr::bind(left, self)?;
                let values = self.subquery(subquery)?;
                Ok(Expr::InList(
                    Box::new(left),
                    values.into_iter().map(Expr::Const).collect(),
                    *negated,
                ))
            })()),
            ast::Expr::Subquery(q) => Some((|| {
                let mut values = self.subquery(q)?;
                if values.len() > 1 {
                    return Err(SqlError::new(
                        SqlState::CARDINALITY_VIOLATION,
                        "more than one row returned by a subquery used as an expression",
                    ));
                }
                Ok(Expr::Const(values.pop().unwrap_or(Value::Null)))
            })()),
            _ => None,
        }
    }
}

impl WhereScope<'_, '_> {
    /// The values of a one-column subquery.
    fn subquery(&self, q: &ast::Query) -> SqlResult<Vec<Value>> {
        let mut tx = self.tx.borrow_mut();
        let Some(tx) = tx.as_deref_mut() else {
            return Ok(Vec::new());
        };
        let out = query(self.db, tx, q, self.table.ctx())?;
        if out.columns.len() != 1 {
            return Err(SqlError::new(
                SqlState::SYNTAX_ERROR,
                "subquery has too many columns",
            ));
        }
        Ok(out.rows.into_iter().filter_map(|mut r| r.pop()).collect())
    }
}

/// Where a plan's rows come from.
#[derive(Clone)]
enum Source {
    /// No FROM: one empty row.
    Nothing,
    /// No rows (an inner join with an empty catalog).
    Empty,
    /// A table, through an access path.
    Table {
        t: Table,
        schema: std::sync::Arc<TableSchema>,
        path: Path,
        filter: Option<Expr>,
    },
    /// Several relations or catalogs, joined.
    Relations {
        rels: Vec<Rel>,
        filter: Option<Expr>,
    },
    /// The rows of several queries (duplicates removed by the plan's
    /// DISTINCT unless `all`).
    Union { parts: Vec<Plan>, all: bool },
}

/// A planned query.
#[derive(Clone)]
pub struct Plan {
    source: Source,
    /// GROUP BY expressions and aggregates (over the table's row), when
    /// the query groups.
    grouping: Option<(Vec<Expr>, Vec<Agg>)>,
    having: Option<Expr>,
    outputs: Vec<Expr>,
    /// The result's columns.
    pub columns: Vec<ColumnDesc>,
    distinct: bool,
    sort: Vec<(Expr, bool)>,
    /// Rows come in the order ORDER BY asks for (primary-key order).
    in_order: bool,
    /// The columns of an ascending ORDER BY of plain columns, all of them
    /// (empty otherwise): a path in this order makes the sort needless.
    order_cols: Vec<usize>,
    limit: Option<usize>,
    offset: usize,
    /// FOR UPDATE / FOR SHARE: the rows read are locked, exclusive or
    /// shared ([`lock_rows`]).
    lock: Option<access::RowLock>,
}

/// The output name of a select item without an alias.
pub fn output_name(e: &ast::Expr) -> String {
    match e {
        ast::Expr::Identifier(i) => expr::name_of(i),
        ast::Expr::CompoundIdentifier(p) => p.last().map(expr::name_of).unwrap_or_default(),
        ast::Expr::Function(f) => expr::function_name(f),
        ast::Expr::Cast { expr, .. } | ast::Expr::Nested(expr) => output_name(expr),
        _ => "?column?".to_string(),
    }
}

/// Plan `q`; `tx` runs its subqueries (`None` while describing).
pub fn plan(db: &Db, q: &ast::Query, ctx: Ctx<'_>, tx: Option<&mut OwnedTxn>) -> SqlResult<Plan> {
    plan_in(db, q, ctx, tx, None)
}

/// Plan `q` inside an enclosing query whose columns it may name
/// (`outer`), as a correlated subquery does.
pub fn plan_in(
    db: &Db,
    q: &ast::Query,
    ctx: Ctx<'_>,
    tx: Option<&mut OwnedTxn>,
    outer: Option<&dyn Scope>,
) -> SqlResult<Plan> {
    if q.with.is_some() {
        return Err(SqlError::unsupported("WITH"));
    }
    let (limit, offset) = match &q.limit_clause {
        None => (None, 0),
        Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => (
            limit.as_ref().map(|l| count(l, ctx)).transpose()?.flatten(),
            offset
                .as_ref()
                .map(|o| count(&o.value, ctx))
                .transpose()?
                .flatten()
                .unwrap_or(0),
        ),
        Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => {
            (count(limit, ctx)?, count(offset, ctx)?.unwrap_or(0))
        }
    };
    let mut plan = plan_body(
        db,
        &q.body,
        q.order_by.as_ref(),
        ctx,
        tx,
        outer,
        limit,
        offset,
    )?;
    if !q.locks.is_empty() {
        // (what cannot be locked at all is refused first, 0A000)
        lock_rows(&mut plan, &q.locks)?;
        check_locked_names(q)?;
    }
    Ok(plan)
}

/// FOR UPDATE / FOR SHARE (the engine's locking reads, `get_for_update`
/// and `get_for_share`): a query over one table with a primary key,
/// without grouping, aggregates or DISTINCT (PostgreSQL refuses those
/// too), locks every row it returns, exclusive or shared, read at its
/// newest version and checked against WHERE again (as PostgreSQL's READ
/// COMMITTED does); a scan locks the rows its WHERE selects in its
/// snapshot, in the result's order, until its LIMIT is met (the rows
/// skipped by OFFSET are locked too, as in PostgreSQL). With several
/// clauses the strongest wins.
/// Anything else is refused (0A000), never run without its locks.
fn lock_rows(plan: &mut Plan, locks: &[ast::LockClause]) -> SqlResult<()> {
    if locks.iter().any(|l| l.nonblock.is_some()) {
        return Err(SqlError::unsupported("NOWAIT and SKIP LOCKED"));
    }
    match &plan.source {
        Source::Nothing => Ok(()),
        Source::Table { schema, .. } if plan.grouping.is_none() && !plan.distinct => {
            if schema.def.primary_key.is_empty() {
                return Err(SqlError::unsupported(
                    "FOR UPDATE or FOR SHARE on a table without a primary key",
                ));
            }
            let share = locks
                .iter()
                .all(|l| matches!(l.lock_type, ast::LockType::Share));
            plan.lock = Some(if share {
                access::RowLock::Share
            } else {
                access::RowLock::Update
            });
            Ok(())
        }
        _ => Err(SqlError::unsupported(
            "FOR UPDATE or FOR SHARE with GROUP BY, aggregates, DISTINCT, joins, UNION or catalogs",
        )),
    }
}

/// The table a locking clause names (`FOR UPDATE OF a`) must be one
/// the query's FROM names, as written there (its alias, if it has one):
/// 42P01 otherwise, and 42601 for a qualified name, as PostgreSQL
/// answers.
fn check_locked_names(q: &ast::Query) -> SqlResult<()> {
    let mut body = &*q.body;
    while let SetExpr::Query(inner) = body {
        body = &*inner.body;
    }
    let from: Vec<String> = match body {
        SetExpr::Select(sel) => sel
            .from
            .iter()
            .flat_map(|f| std::iter::once(&f.relation).chain(f.joins.iter().map(|j| &j.relation)))
            .filter_map(|r| match r {
                ast::TableFactor::Table { alias: Some(a), .. } => Some(expr::name_of(&a.name)),
                ast::TableFactor::Table { name, .. } => match name.0.last() {
                    Some(ast::ObjectNamePart::Identifier(i)) => Some(expr::name_of(i)),
                    _ => None,
                },
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    for l in &q.locks {
        let Some(of) = &l.of else { continue };
        let kind = match l.lock_type {
            ast::LockType::Share => "FOR SHARE",
            ast::LockType::Update => "FOR UPDATE",
        };
        let name = match of.0.as_slice() {
            [ast::ObjectNamePart::Identifier(i)] => expr::name_of(i),
            _ => {
                return Err(SqlError::new(
                    SqlState::SYNTAX_ERROR,
                    format!("{kind} must specify unqualified relation names"),
                ));
            }
        };
        if !from.contains(&name) {
            return Err(SqlError::new(
                SqlState::UNDEFINED_TABLE,
                format!("relation \"{name}\" in {kind} clause not found in FROM clause"),
            ));
        }
    }
    Ok(())
}

/// Plan a query body (a SELECT, or a UNION of them) with its ORDER BY,
/// LIMIT and OFFSET.
#[allow(clippy::too_many_arguments)]
fn plan_body(
    db: &Db,
    body: &SetExpr,
    order_by: Option<&ast::OrderBy>,
    ctx: Ctx<'_>,
    mut tx: Option<&mut OwnedTxn>,
    outer: Option<&dyn Scope>,
    limit: Option<usize>,
    offset: usize,
) -> SqlResult<Plan> {
    let sel = match body {
        SetExpr::Select(sel) => sel,
        SetExpr::Query(q) if order_by.is_none() && limit.is_none() && offset == 0 => {
            return plan_in(db, q, ctx, tx, outer);
        }
        SetExpr::SetOperation {
            op: ast::SetOperator::Union,
            set_quantifier,
            left,
            right,
        } => {
            let all = matches!(set_quantifier, ast::SetQuantifier::All);
            // A locking clause inside a UNION's member is refused as
            // PostgreSQL refuses it (its locks would apply to rows the
            // UNION may drop).
            if [left, right]
                .iter()
                .any(|side| matches!(&***side, SetExpr::Query(q) if !q.locks.is_empty()))
            {
                return Err(SqlError::unsupported("FOR UPDATE or FOR SHARE with UNION"));
            }
            let l = plan_body(db, left, None, ctx, tx.as_deref_mut(), outer, None, 0)?;
            let r = plan_body(db, right, None, ctx, tx, outer, None, 0)?;
            if l.columns.len() != r.columns.len() {
                return Err(SqlError::new(
                    SqlState::SYNTAX_ERROR,
                    "each UNION query must have the same number of columns",
                ));
            }
            return plan_union(vec![l, r], all, order_by, limit, offset);
        }
        other => return Err(SqlError::unsupported(format!("the query {other}"))),
    };
    let distinct = match &sel.distinct {
        None => false,
        Some(ast::Distinct::Distinct) => true,
        Some(other) => return Err(SqlError::unsupported(other.to_string())),
    };
    let group_by: &[ast::Expr] = match &sel.group_by {
        ast::GroupByExpr::Expressions(g, m) if m.is_empty() => g,
        _ => return Err(SqlError::unsupported("GROUP BY ALL or modifiers")),
    };
    // One user table: the OLTP path, through an access path.
    if let [from] = sel.from.as_slice()
        && from.joins.is_empty()
        && outer.is_none()
        && let ast::TableFactor::Table { name, .. } = &from.relation
        && let Ok(tname) = table_name(name)
        && let Ok((t, schema)) = access::open(db, &tname)
    {
        let source = Source::Table {
            t,
            schema,
            path: Path::Full,
            filter: None,
        };
        return plan_over(
            db, order_by, sel, ctx, tx, source, None, group_by, distinct, limit, offset,
        );
    }
    if sel.from.is_empty() {
        return plan_over(
            db,
            order_by,
            sel,
            ctx,
            tx,
            Source::Nothing,
            outer,
            group_by,
            distinct,
            limit,
            offset,
        );
    }
    // Relations: resolve every FROM item and join.
    let mut infos = Vec::new();
    let mut data = Vec::new();
    let mut joins: Vec<JoinKind> = Vec::new();
    let mut width = 0;
    for twj in &sel.from {
        let mut add = |factor: &ast::TableFactor, kind: JoinKind| -> SqlResult<()> {
            let (info, d) = relations::resolve(db, ctx.info, factor, width)?;
            width += info.columns.len();
            infos.push(info);
            data.push(d);
            joins.push(kind);
            Ok(())
        };
        add(&twj.relation, JoinKind::Inner)?;
        for j in &twj.joins {
            let (kind, constraint) = match &j.join_operator {
                ast::JoinOperator::Join(c) | ast::JoinOperator::Inner(c) => (JoinKind::Inner, c),
                ast::JoinOperator::Left(c) | ast::JoinOperator::LeftOuter(c) => (JoinKind::Left, c),
                ast::JoinOperator::CrossJoin(c) => (JoinKind::Inner, c),
                other => return Err(SqlError::unsupported(format!("the join {other:?}"))),
            };
            if !matches!(
                constraint,
                ast::JoinConstraint::On(_) | ast::JoinConstraint::None
            ) {
                return Err(SqlError::unsupported("JOIN ... USING or NATURAL"));
            }
            add(&j.relation, kind)?;
        }
    }
    let scope = RelScope {
        rels: infos,
        ctx,
        db,
        outer,
    };
    let mut rels = Vec::with_capacity(data.len());
    for ((d, kind), info) in data.into_iter().zip(joins).zip(&scope.rels) {
        rels.push(Rel {
            data: d,
            kind,
            on: None,
            width: info.columns.len(),
        });
    }
    let grouped_syntax = has_aggregates(sel) || !group_by.is_empty();
    // An inner join with an empty catalog has no rows: its columns are
    // named, not bound (so catalogs Quill keeps empty, such as
    // `pg_policy`, answer whatever their queries compute).
    if rels.iter().any(Rel::empties_join) && !grouped_syntax {
        let names = scope.names();
        let mut columns = Vec::new();
        for item in &sel.projection {
            match item {
                SelectItem::Wildcard(_) => columns.extend(names.iter().map(|n| ColumnDesc {
                    name: n.clone(),
                    ty: TEXT,
                })),
                SelectItem::UnnamedExpr(e) => columns.push(ColumnDesc {
                    name: output_name(e),
                    ty: TEXT,
                }),
                SelectItem::ExprWithAlias { alias, .. } => columns.push(ColumnDesc {
                    name: expr::name_of(alias),
                    ty: TEXT,
                }),
                _ => {}
            }
        }
        return Ok(Plan {
            source: Source::Empty,
            grouping: None,
            having: None,
            outputs: Vec::new(),
            columns,
            distinct: false,
            sort: Vec::new(),
            in_order: true,
            order_cols: Vec::new(),
            limit,
            offset,
            lock: None,
        });
    }
    let mut ons = Vec::new();
    for twj in &sel.from {
        ons.push(None);
        for j in &twj.joins {
            let c = match &j.join_operator {
                ast::JoinOperator::Join(c)
                | ast::JoinOperator::Inner(c)
                | ast::JoinOperator::Left(c)
                | ast::JoinOperator::LeftOuter(c)
                | ast::JoinOperator::CrossJoin(c) => c,
                _ => continue,
            };
            ons.push(match c {
                ast::JoinConstraint::On(e) => Some(expr::bind(e, &scope)?),
                _ => None,
            });
        }
    }
    for (r, on) in rels.iter_mut().zip(ons) {
        r.on = on;
    }
    let filter = sel
        .selection
        .as_ref()
        .map(|w| expr::bind(w, &scope))
        .transpose()?;
    let source = Source::Relations { rels, filter };
    plan_with_scope(
        order_by,
        sel,
        source,
        &scope,
        scope.types(),
        scope.names(),
        None,
        group_by,
        distinct,
        limit,
        offset,
    )
}

/// A UNION of `parts`' rows (without duplicates unless `all`), ordered
/// by output positions or names.
fn plan_union(
    parts: Vec<Plan>,
    all: bool,
    order_by: Option<&ast::OrderBy>,
    limit: Option<usize>,
    offset: usize,
) -> SqlResult<Plan> {
    let columns = parts.first().map(|p| p.columns.clone()).unwrap_or_default();
    let mut sort = Vec::new();
    if let Some(ob) = order_by {
        let ast::OrderByKind::Expressions(list) = &ob.kind else {
            return Err(SqlError::unsupported("ORDER BY ALL"));
        };
        for o in list {
            let pos = match &o.expr {
                ast::Expr::Value(v) => match expr::literal(&v.value)? {
                    Value::Int32(n) if n >= 1 && (n as usize) <= columns.len() => n as usize - 1,
                    _ => {
                        return Err(SqlError::new(
                            SqlState::INVALID_COLUMN_REFERENCE,
                            format!("ORDER BY position {} is not in select list", v.value),
                        ));
                    }
                },
                ast::Expr::Identifier(i) => columns
                    .iter()
                    .position(|c| c.name == expr::name_of(i))
                    .ok_or_else(|| {
                        SqlError::new(
                            SqlState::UNDEFINED_COLUMN,
                            format!("column \"{}\" does not exist", i.value),
                        )
                    })?,
                other => {
                    return Err(SqlError::unsupported(format!(
                        "ORDER BY {other} over a UNION (name a result column)"
                    )));
                }
            };
            sort.push((
                Expr::Column(pos),
                !matches!(o.options.sort, Some(ast::OrderBySort::Desc)),
            ));
        }
    }
    Ok(Plan {
        outputs: (0..columns.len()).map(Expr::Column).collect(),
        source: Source::Union { parts, all },
        grouping: None,
        having: None,
        columns,
        distinct: !all,
        in_order: sort.is_empty(),
        sort,
        order_cols: Vec::new(),
        limit,
        offset,
        lock: None,
    })
}

/// Whether the select list or HAVING calls an aggregate.
fn has_aggregates(sel: &ast::Select) -> bool {
    sel.having.is_some()
        || sel.projection.iter().any(|i| match i {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                has_aggregate(e)
            }
            _ => false,
        })
}

const TEXT: ColumnType = ColumnType::Text {
    max_len: crate::types::MAX_VARLEN,
};

/// A schema with no columns: the scope of a query without FROM.
pub(crate) fn no_columns() -> TableSchema {
    TableSchema {
        version: 0,
        id: 0,
        def: quill::catalog::schema::TableDef {
            name: String::new(),
            columns: Vec::new(),
            primary_key: Vec::new(),
            indexes: Vec::new(),
        },
        clustered_root: 0,
        index_roots: Vec::new(),
        dropped_indexes: Vec::new(),
        building_indexes: Vec::new(),
    }
}

#[allow(clippy::too_many_arguments)]
fn plan_over(
    db: &Db,
    order_by: Option<&ast::OrderBy>,
    sel: &ast::Select,
    ctx: Ctx<'_>,
    tx: Option<&mut OwnedTxn>,
    mut source: Source,
    outer: Option<&dyn Scope>,
    group_by: &[ast::Expr],
    distinct: bool,
    limit: Option<usize>,
    offset: usize,
) -> SqlResult<Plan> {
    let schema_arc = match &source {
        Source::Table { schema, .. } => std::sync::Arc::clone(schema),
        _ => std::sync::Arc::new(no_columns()),
    };
    let schema: &TableSchema = &schema_arc;
    let table = TableScope(schema, ctx);
    let col_types: Vec<ColumnType> = schema.def.columns.iter().map(|c| c.ty).collect();
    if let (Source::Table { filter, .. }, Some(w)) = (&mut source, &sel.selection) {
        let scope = WhereScope {
            table: TableScope(schema, ctx),
            db,
            tx: RefCell::new(tx),
        };
        *filter = Some(expr::bind(w, &scope)?);
    } else if sel.selection.is_some() {
        return Err(SqlError::unsupported("WHERE without FROM"));
    }
    let names = schema.def.columns.iter().map(|c| c.name.clone()).collect();
    // A query without FROM inside a catalog query may name the outer
    // query's columns.
    let nothing = NothingScope { ctx, outer, db };
    let base: &dyn Scope = if matches!(source, Source::Nothing) {
        &nothing
    } else {
        &table
    };
    plan_with_scope(
        order_by,
        sel,
        source,
        base,
        col_types,
        names,
        Some(schema),
        group_by,
        distinct,
        limit,
        offset,
    )
}

/// The scope of a query without FROM: no columns of its own; inside a
/// catalog query, the enclosing query's.
struct NothingScope<'a> {
    ctx: Ctx<'a>,
    outer: Option<&'a dyn Scope>,
    db: &'a Db,
}

impl Scope for NothingScope<'_> {
    fn column(&self, _: &str) -> Option<usize> {
        None
    }
    fn ctx(&self) -> Ctx<'_> {
        self.ctx
    }
    fn outer(&self, qualifier: Option<&str>, name: &str) -> Option<usize> {
        let o = self.outer?;
        match qualifier {
            None => o.column(name),
            Some(q) => o.qualified(q, name),
        }
    }
    fn db(&self) -> Option<&Db> {
        Some(self.db)
    }
}

/// Bind the select list, HAVING and ORDER BY over `base` and choose the
/// access path (for a table source, whose `schema` is given).
#[allow(clippy::too_many_arguments)]
fn plan_with_scope(
    order_by: Option<&ast::OrderBy>,
    sel: &ast::Select,
    mut source: Source,
    base: &dyn Scope,
    col_types: Vec<ColumnType>,
    names: Vec<String>,
    schema: Option<&TableSchema>,
    group_by: &[ast::Expr],
    distinct: bool,
    limit: Option<usize>,
    offset: usize,
) -> SqlResult<Plan> {
    let param_types = base.ctx().param_types;
    let grouped = !group_by.is_empty()
        || sel.having.is_some()
        || sel.projection.iter().any(|i| match i {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                has_aggregate(e)
            }
            _ => false,
        });
    let gscope = GroupScope {
        table: base,
        group_by,
        aggs: RefCell::new(Vec::new()),
        col_types: col_types.clone(),
    };
    let scope: &dyn Scope = if grouped { &gscope } else { base };
    let mut outputs: Vec<(String, Expr)> = Vec::new();
    for item in &sel.projection {
        match item {
            SelectItem::Wildcard(_) if !grouped => {
                for (i, n) in names.iter().enumerate() {
                    outputs.push((n.clone(), Expr::Column(i)));
                }
            }
            SelectItem::UnnamedExpr(e) => outputs.push((output_name(e), expr::bind(e, scope)?)),
            SelectItem::ExprWithAlias { expr: e, alias } => {
                outputs.push((expr::name_of(alias), expr::bind(e, scope)?));
            }
            other => return Err(SqlError::unsupported(format!("the select item {other}"))),
        }
    }
    let having = sel
        .having
        .as_ref()
        .map(|h| expr::bind(h, scope))
        .transpose()?;
    let mut sort: Vec<(Expr, bool)> = Vec::new();
    if let Some(ob) = order_by {
        let ast::OrderByKind::Expressions(list) = &ob.kind else {
            return Err(SqlError::unsupported("ORDER BY ALL"));
        };
        for o in list {
            let e = match &o.expr {
                ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..)) => {
                    match expr::literal(&v.value)? {
                        Value::Int32(n) if n >= 1 && (n as usize) <= outputs.len() => outputs
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
                    }
                }
                // An output's alias.
                ast::Expr::Identifier(i)
                    if !grouped
                        && base.column(&expr::name_of(i)).is_none()
                        && outputs.iter().any(|(n, _)| *n == expr::name_of(i)) =>
                {
                    let n = expr::name_of(i);
                    outputs
                        .iter()
                        .find(|(name, _)| *name == n)
                        .map(|(_, e)| e.clone())
                        .ok_or_else(|| SqlError::new(SqlState::UNDEFINED_COLUMN, n.clone()))?
                }
                e => expr::bind(e, scope)?,
            };
            if distinct && !outputs.iter().any(|(_, x)| *x == e) {
                return Err(SqlError::new(
                    SqlState::INVALID_COLUMN_REFERENCE,
                    "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
                ));
            }
            match o.options.sort {
                None | Some(ast::OrderBySort::Asc) => sort.push((e, true)),
                Some(ast::OrderBySort::Desc) => sort.push((e, false)),
                Some(_) => return Err(SqlError::unsupported("ORDER BY ... USING")),
            }
        }
    }
    let aggs: Vec<Agg> = gscope
        .aggs
        .into_inner()
        .into_iter()
        .map(|(_, a)| a)
        .collect();
    let grouping = if grouped {
        let groups = group_by
            .iter()
            .map(|g| expr::bind(g, base))
            .collect::<SqlResult<Vec<_>>>()?;
        Some((groups, aggs))
    } else {
        None
    };
    // The types of the row outputs are evaluated over.
    let row_types: Vec<ColumnType> = match &grouping {
        None => col_types,
        Some((groups, aggs)) => groups
            .iter()
            .map(|g| type_of(g, &col_types, param_types))
            .chain(aggs.iter().map(|a| a.ty))
            .collect(),
    };
    // The columns an ascending ORDER BY of plain columns names: an index
    // with them first can give the rows in order (and a LIMIT can stop
    // the scan early).
    let order_cols: Vec<usize> = if grouping.is_none() && sort.iter().all(|(_, asc)| *asc) {
        sort.iter()
            .map_while(|(e, _)| match e {
                Expr::Column(c) => Some(*c),
                _ => None,
            })
            .collect()
    } else {
        Vec::new()
    };
    if let (Source::Table { path, filter, .. }, Some(schema)) = (&mut source, schema) {
        let order = if order_cols.len() == sort.len() {
            order_cols.as_slice()
        } else {
            &[]
        };
        *path = access::choose(schema, filter.as_ref(), order);
    }
    let path_order: &[usize] = match (&source, schema) {
        (Source::Table { path, .. }, Some(schema)) => path.order(schema),
        _ => &[],
    };
    let in_order = grouping.is_none()
        && (sort.is_empty()
            || (order_cols.len() == sort.len() && path_order.starts_with(&order_cols)));
    let order_cols = if order_cols.len() == sort.len() {
        order_cols
    } else {
        Vec::new()
    };
    let columns = outputs
        .iter()
        .map(|(n, e)| ColumnDesc {
            name: n.clone(),
            ty: type_of(e, &row_types, param_types),
        })
        .collect();
    Ok(Plan {
        source,
        grouping,
        having,
        outputs: outputs.into_iter().map(|(_, e)| e).collect(),
        columns,
        distinct,
        sort,
        in_order,
        order_cols,
        limit,
        offset,
        lock: None,
    })
}

/// A query planned once with its parameters as [`Expr::Param`] leaves
/// (a generic plan), for a prepared statement to run many times: each
/// execution puts the values in and chooses the access path from them
/// ([`Generic::bind`]), which is all the planning it does. Only plans
/// over one table with no subquery, regular expression or catalog lookup
/// and no parameter in LIMIT or OFFSET are kept; a plan stays good while
/// the table's schema is the one it was planned against.
///
/// It holds no strong reference to that schema: a dropped table's pages
/// are freed only once no statement holds its schema (`quill::db`'s
/// DROP2), and a prepared statement may outlive the table by far.
pub struct Generic {
    /// The plan, its table source's schema left out (a placeholder).
    plan: Plan,
    schema: std::sync::Weak<TableSchema>,
    table: Table,
}

impl std::fmt::Debug for Generic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generic")
            .field("table", &self.table.name())
            .finish()
    }
}

impl Generic {
    /// The generic plan of `q`, if it is one this keeps (see the type's
    /// docs); `ctx` carries no parameter values.
    pub fn new(db: &Db, q: &ast::Query, ctx: Ctx<'_>) -> Option<Generic> {
        debug_assert!(
            ctx.params.is_none(),
            "a generic plan has no parameter values"
        );
        let params_in_limit = match &q.limit_clause {
            None => false,
            Some(l) => l.to_string().contains('$'),
        };
        // Planned without a transaction, a subquery in WHERE reads as
        // empty (describing needs no rows): no generic plan for a query
        // with one. Counting the keyword may refuse a query whose text
        // merely says SELECT twice; that only costs it the cache.
        let text = q.to_string();
        if params_in_limit || selects_in(&text) > 1 || reads_the_clock(&text) {
            return None;
        }
        let mut plan = plan(db, q, ctx, None).ok()?;
        let Source::Table { t, schema, .. } = &mut plan.source else {
            return None;
        };
        let weak = std::sync::Arc::downgrade(schema);
        let table = t.clone();
        *schema = std::sync::Arc::new(no_columns());
        let opaque = |e: &Expr| {
            matches!(
                e,
                Expr::Subquery(_) | Expr::Regex(..) | Expr::Lookup(..) | Expr::Outer(_)
            )
        };
        if plan.exprs().any(|e| e.any(&opaque)) {
            return None;
        }
        Some(Generic {
            schema: weak,
            table,
            plan,
        })
    }

    /// The plan for one execution with `params` (`None` when the table's
    /// schema is no longer the one the plan was made for), or the error
    /// a parameter's cast gives.
    pub fn bind(&self, params: &[Value]) -> Option<SqlResult<Plan>> {
        let current = match self.table.try_schema() {
            Ok(s) => s,
            Err(e) => return Some(Err(e.into())),
        };
        if self.table.is_dropped()
            || !std::sync::Weak::ptr_eq(&self.schema, &std::sync::Arc::downgrade(&current))
        {
            return None;
        }
        Some(self.bind_to(&current, params))
    }

    fn bind_to(&self, current: &std::sync::Arc<TableSchema>, params: &[Value]) -> SqlResult<Plan> {
        let m = |e: &Expr| e.with_params(params);
        let opt = |e: &Option<Expr>| e.as_ref().map(m).transpose();
        let mut p = self.plan.clone();
        if let Source::Table {
            filter,
            path,
            schema,
            ..
        } = &mut p.source
        {
            *filter = opt(filter)?;
            *path = access::choose(current, filter.as_ref(), &p.order_cols);
            *schema = std::sync::Arc::clone(current);
        }
        if let Some((groups, aggs)) = &mut p.grouping {
            for g in groups.iter_mut() {
                *g = m(g)?;
            }
            for a in aggs.iter_mut() {
                a.arg = opt(&a.arg)?;
            }
        }
        p.having = opt(&p.having)?;
        p.outputs = p.outputs.iter().map(m).collect::<SqlResult<_>>()?;
        p.sort = p
            .sort
            .iter()
            .map(|(e, asc)| Ok((m(e)?, *asc)))
            .collect::<SqlResult<_>>()?;
        // As `plan_body` decides it, for the path chosen now.
        let path_order: &[usize] = match &p.source {
            Source::Table { path, .. } => path.order(current),
            _ => &[],
        };
        p.in_order = p.grouping.is_none()
            && (p.sort.is_empty()
                || (p.order_cols.len() == p.sort.len() && path_order.starts_with(&p.order_cols)));
        Ok(p)
    }
}

/// How many times `sql` says SELECT (a subquery says it again).
pub(crate) fn selects_in(sql: &str) -> usize {
    sql.to_ascii_uppercase().matches("SELECT").count()
}

/// Whether `sql` may call a function whose value binding fixes at plan
/// time and that changes between executions (`now()` and its kin): no
/// generic plan for it. Matching the text may refuse a statement that
/// only names such a word; that costs it the cache, nothing else.
pub(crate) fn reads_the_clock(sql: &str) -> bool {
    let s = sql.to_ascii_uppercase();
    [
        "NOW",
        "CURRENT_TIMESTAMP",
        "LOCALTIMESTAMP",
        "CURRENT_DATE",
        "CURRENT_TIME",
    ]
    .iter()
    .any(|f| s.contains(f))
}

/// Whether `e` calls an aggregate (outside a subquery).
fn has_aggregate(e: &ast::Expr) -> bool {
    use ast::Expr as E;
    match e {
        E::Function(f) => {
            expr::AGGREGATES.contains(&expr::function_name(f).as_str())
                || expr::function_args(f).is_ok_and(|a| a.into_iter().any(has_aggregate))
        }
        E::BinaryOp { left, right, .. } => has_aggregate(left) || has_aggregate(right),
        E::UnaryOp { expr, .. } | E::Nested(expr) | E::Cast { expr, .. } => has_aggregate(expr),
        _ => false,
    }
}

/// 54000: a statement would hold more than [`MAX_RESULT_ROWS`] rows.
pub fn too_many_rows() -> SqlError {
    SqlError::new(
        SqlState::PROGRAM_LIMIT_EXCEEDED,
        format!(
            "the statement would hold more than {MAX_RESULT_ROWS} rows in memory (a result, a sort or a grouping); narrow it with WHERE or LIMIT"
        ),
    )
}

/// Call `f` with each input row of the plan's source (before grouping),
/// until it returns false.
fn for_each_input(
    plan: &Plan,
    tx: Option<&mut OwnedTxn>,
    ctx: Ctx<'_>,
    mut f: impl FnMut(&mut Vec<Value>) -> SqlResult<bool>,
) -> SqlResult<()> {
    match &plan.source {
        Source::Nothing => {
            f(&mut Vec::new())?;
        }
        Source::Empty => {}
        Source::Table {
            t,
            schema,
            path,
            filter,
        } => {
            let Some(tx) = tx else {
                return Err(SqlError::new(
                    SqlState::INTERNAL_ERROR,
                    "a table read without a transaction",
                ));
            };
            let needed = plan.columns_read(schema.def.columns.len(), filter.as_ref());
            let check = |row: &mut Vec<Value>| {
                ctx.check_cancel()?;
                f(row)
            };
            if let Some(lock) = plan.lock {
                let pk = &schema.def.primary_key;
                if plan.locks_in_sort_order() {
                    // As PostgreSQL's LockRows under its Limit: only the
                    // rows returned (and skipped) are locked.
                    let keys = plan.keys_in_sort_order(tx, t, path, filter.as_ref(), pk, ctx)?;
                    access::lock_each(tx, t, &keys, filter.as_ref(), lock, check)?;
                } else {
                    let interrupt = || ctx.check_cancel();
                    access::for_each_locked(
                        tx,
                        t,
                        path,
                        filter.as_ref(),
                        pk,
                        lock,
                        interrupt,
                        check,
                    )?;
                }
            } else {
                access::for_each(tx, t, path, filter.as_ref(), needed.as_deref(), check)?;
            }
        }
        Source::Relations { rels, filter } => {
            for mut row in relations::join(rels, filter.as_ref(), tx, ctx)? {
                if !f(&mut row)? {
                    break;
                }
            }
        }
        Source::Union { parts, .. } => {
            let mut tx = tx;
            for p in parts {
                for mut row in run(p, tx.as_deref_mut(), ctx)?.rows {
                    if !f(&mut row)? {
                        return Ok(());
                    }
                }
            }
        }
    }
    Ok(())
}

/// Run a plan (`tx` may be `None` only for a plan over catalogs).
pub fn run(plan: &Plan, tx: Option<&mut OwnedTxn>, ctx: Ctx<'_>) -> SqlResult<Output> {
    if plan.limit == Some(0) {
        // Nothing is read (nor locked), as PostgreSQL's Limit asks its
        // input for no row.
        return Ok(Output {
            tag: "SELECT 0".into(),
            columns: plan.columns.clone(),
            rows: Vec::new(),
            copy: None,
        });
    }
    // Rows over which outputs and sort keys are evaluated.
    let mut rows: Vec<Vec<Value>> = Vec::new();
    // Rows come in the result's order (the scan's, or a locking read's
    // sort of its snapshot, which is not sorted again after the rows
    // are locked and read at their newest versions, as PostgreSQL's
    // LockRows sits above its Sort): the ones before OFFSET are counted,
    // not kept (so a large OFFSET holds nothing), and the scan stops at
    // LIMIT.
    let sorted_to_lock = plan.locks_in_sort_order();
    let streamed = (plan.in_order && !plan.distinct) || sorted_to_lock;
    let mut to_skip = if streamed { plan.offset } else { 0 };
    let stop_at = if streamed { plan.limit } else { None };
    match &plan.grouping {
        None => for_each_input(plan, tx, ctx, |row| {
            if to_skip > 0 {
                to_skip -= 1;
                return Ok(true);
            }
            if rows.len() >= MAX_RESULT_ROWS {
                return Err(too_many_rows());
            }
            rows.push(std::mem::take(row));
            Ok(stop_at.is_none_or(|n| rows.len() < n))
        })?,
        Some((groups, aggs)) => {
            let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
            let mut keys: Vec<Vec<Value>> = Vec::new();
            let mut accs: Vec<Vec<Acc>> = Vec::new();
            let mut kbuf = Vec::new();
            for_each_input(plan, tx, ctx, |row| {
                let at = if groups.is_empty() {
                    // No GROUP BY: one group, and no key to hash per row.
                    if keys.is_empty() {
                        keys.push(Vec::new());
                        accs.push(aggs.iter().map(|a| Acc::new(a.func)).collect());
                    }
                    0
                } else {
                    // The key is encoded from values where they are; a
                    // new group evaluates it again to keep it (once per
                    // group, not per row; the expressions are pure).
                    kbuf.clear();
                    for g in groups {
                        let v = g.eval_ref(row)?;
                        quill::catalog::encode_key_refs([ValueRef::from(&*v)], &mut kbuf);
                    }
                    match index.get(&kbuf) {
                        Some(&i) => i,
                        None => {
                            if keys.len() >= MAX_RESULT_ROWS {
                                return Err(too_many_rows());
                            }
                            let key = groups
                                .iter()
                                .map(|g| g.eval(row))
                                .collect::<SqlResult<Vec<_>>>()?;
                            index.insert(kbuf.clone(), keys.len());
                            keys.push(key);
                            accs.push(aggs.iter().map(|a| Acc::new(a.func)).collect());
                            keys.len() - 1
                        }
                    }
                };
                let slot = accs
                    .get_mut(at)
                    .ok_or_else(|| SqlError::new(SqlState::INTERNAL_ERROR, "lost a group"))?;
                for (acc, a) in slot.iter_mut().zip(aggs) {
                    let v = a.arg.as_ref().map(|e| e.eval_ref(row)).transpose()?;
                    acc.add(a.func, v.as_deref())?;
                }
                Ok(true)
            })?;
            // No GROUP BY: one row even over no rows.
            if groups.is_empty() && keys.is_empty() {
                keys.push(Vec::new());
                accs.push(aggs.iter().map(|a| Acc::new(a.func)).collect());
            }
            for (mut k, a) in keys.into_iter().zip(accs) {
                k.extend(a.into_iter().map(Acc::finish));
                rows.push(k);
            }
        }
    }
    if let Some(h) = &plan.having {
        let mut kept = Vec::with_capacity(rows.len());
        for r in rows {
            if h.selects(&r)? {
                kept.push(r);
            }
        }
        rows = kept;
    }
    // Outputs with their sort keys.
    let mut out: Vec<(Vec<Value>, Vec<Value>)> = rows
        .iter()
        .map(|r| {
            let o = plan
                .outputs
                .iter()
                .map(|e| e.eval(r))
                .collect::<SqlResult<Vec<_>>>()?;
            let k = if plan.in_order || sorted_to_lock {
                Vec::new()
            } else {
                plan.sort_key(r)?
            };
            Ok((k, o))
        })
        .collect::<SqlResult<_>>()?;
    drop(rows);
    if plan.distinct {
        let mut seen = std::collections::HashSet::new();
        let mut buf = Vec::new();
        out.retain(|(_, o)| {
            buf.clear();
            quill::catalog::encode_key(o, &mut buf);
            seen.insert(buf.clone())
        });
    }
    if !plan.in_order && !sorted_to_lock && !plan.sort.is_empty() {
        let mut err = None;
        out.sort_by(|(a, _), (b, _)| sort_order(a, b, &plan.sort, &mut err));
        if let Some(e) = err {
            return Err(e);
        }
    }
    let rows: Vec<Vec<Value>> = out
        .into_iter()
        .skip(if streamed { 0 } else { plan.offset })
        .take(plan.limit.unwrap_or(usize::MAX))
        .map(|(_, o)| o)
        .collect();
    Ok(Output {
        tag: format!("SELECT {}", rows.len()),
        columns: plan.columns.clone(),
        rows,
        copy: None,
    })
}

/// How sort keys `a` and `b` (values of `sort`'s expressions) order;
/// the first comparison that fails is left in `err` (the caller reports
/// it) and counts as equal.
fn sort_order(
    a: &[Value],
    b: &[Value],
    sort: &[(Expr, bool)],
    err: &mut Option<SqlError>,
) -> std::cmp::Ordering {
    for ((x, y), (_, asc)) in a.iter().zip(b).zip(sort) {
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
}

impl Plan {
    /// A locking read (FOR UPDATE / FOR SHARE) whose ORDER BY the scan
    /// does not give and that has a LIMIT: it picks its rows by sorting
    /// the snapshot's, then locks them in that order until the LIMIT is
    /// met.
    fn locks_in_sort_order(&self) -> bool {
        self.lock.is_some()
            && self.limit.is_some()
            && !self.in_order
            && !self.sort.is_empty()
            && matches!(&self.source, Source::Table { .. })
    }

    /// The sort key of input row `row`: the values of the ORDER BY
    /// expressions.
    fn sort_key(&self, row: &[Value]) -> SqlResult<Vec<Value>> {
        self.sort.iter().map(|(e, _)| e.eval(row)).collect()
    }

    /// For [`Plan::locks_in_sort_order`]: the primary keys (columns
    /// `pk`) of the rows `path` and `filter` select in the snapshot, in
    /// the ORDER BY's order (54000 past [`MAX_RESULT_ROWS`]; the scan
    /// stops on cancel and at the statement's timeout).
    fn keys_in_sort_order(
        &self,
        tx: &mut OwnedTxn,
        t: &Table,
        path: &Path,
        filter: Option<&Expr>,
        pk: &[usize],
        ctx: Ctx<'_>,
    ) -> SqlResult<Vec<Vec<Value>>> {
        let mut seen = 0usize;
        let mut keyed = access::selected_keys(tx, t, path, filter, pk, |row| {
            ctx.check_cancel()?;
            seen += 1;
            if seen > MAX_RESULT_ROWS {
                return Err(too_many_rows());
            }
            self.sort_key(row)
        })?;
        let mut err = None;
        keyed.sort_by(|(_, a), (_, b)| sort_order(a, b, &self.sort, &mut err));
        match err {
            Some(e) => Err(e),
            None => Ok(keyed.into_iter().map(|(k, _)| k).collect()),
        }
    }

    /// The columns of the table's rows this plan reads, of `ncols`, with
    /// the scan's `filter`; `None` when it reads them all or may read
    /// any (a scalar subquery takes the whole row). The other columns of
    /// a scanned row need not be decoded (`access::for_each`). Grouped,
    /// the table's rows feed the GROUP BY keys and the aggregates only
    /// (HAVING, the outputs and ORDER BY read the groups' rows).
    fn columns_read(&self, ncols: usize, filter: Option<&Expr>) -> Option<Vec<bool>> {
        let read: Vec<&Expr> = match &self.grouping {
            Some((groups, aggs)) => groups
                .iter()
                .chain(aggs.iter().filter_map(|a| a.arg.as_ref()))
                .collect(),
            None => self
                .outputs
                .iter()
                .chain(self.sort.iter().map(|(e, _)| e))
                .collect(),
        };
        access::columns_read(ncols, &[], read.into_iter().chain(filter))
    }

    /// Whether the plan reads only generated catalogs (it runs without a
    /// transaction).
    pub fn is_generated(&self) -> bool {
        match &self.source {
            Source::Nothing | Source::Empty => true,
            Source::Table { .. } => false,
            Source::Union { parts, .. } => parts.iter().all(Plan::is_generated),
            Source::Relations { rels, .. } => {
                rels.iter().all(|r| matches!(r.data, RelData::Rows(_)))
            }
        }
    }

    /// Every expression of the plan (not those of a union's parts).
    fn exprs(&self) -> impl Iterator<Item = &Expr> {
        let source: Vec<&Expr> = match &self.source {
            Source::Table { filter, .. } => filter.iter().collect(),
            Source::Relations { rels, filter } => filter
                .iter()
                .chain(rels.iter().filter_map(|r| r.on.as_ref()))
                .collect(),
            Source::Union { .. } | Source::Nothing | Source::Empty => Vec::new(),
        };
        let (groups, aggs) = match &self.grouping {
            Some((g, a)) => (g.as_slice(), a.as_slice()),
            None => (&[][..], &[][..]),
        };
        source
            .into_iter()
            .chain(groups)
            .chain(aggs.iter().filter_map(|a| a.arg.as_ref()))
            .chain(self.having.iter())
            .chain(self.outputs.iter())
            .chain(self.sort.iter().map(|(e, _)| e))
    }

    /// This plan with the enclosing row's values in place of its outer
    /// references.
    pub fn with_outer(&self, outer: &[Value]) -> Plan {
        let m = |e: &Expr| e.with_outer(outer);
        let mut p = self.clone();
        match &mut p.source {
            Source::Table { filter, .. } => *filter = filter.as_ref().map(m),
            Source::Relations { rels, filter } => {
                *filter = filter.as_ref().map(m);
                for r in rels {
                    r.on = r.on.as_ref().map(m);
                }
            }
            Source::Union { parts, .. } => {
                for part in parts.iter_mut() {
                    *part = part.with_outer(outer);
                }
            }
            Source::Nothing | Source::Empty => {}
        }
        if let Some((groups, aggs)) = &mut p.grouping {
            for g in groups.iter_mut() {
                *g = m(g);
            }
            for a in aggs.iter_mut() {
                a.arg = a.arg.as_ref().map(m);
            }
        }
        p.having = p.having.as_ref().map(m);
        p.outputs = p.outputs.iter().map(m).collect();
        p.sort = p.sort.iter().map(|(e, asc)| (m(e), *asc)).collect();
        p
    }
}

/// Run a plan over generated catalogs (no transaction).
pub fn run_generated(plan: &Plan) -> SqlResult<Output> {
    let info = crate::session::SessionInfo::default();
    let ctx = Ctx {
        params: Some(&[]),
        param_types: &[],
        info: &info,
        cancel: &expr::NEVER_CANCELED,
        deadline: None,
    };
    run(plan, None, ctx)
}

/// What a plan does, one step per line, outermost first (EXPLAIN).
pub fn explain(plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(l) = plan.limit {
        out.push(format!("Limit {l}"));
    }
    if plan.offset > 0 {
        out.push(format!("Offset {}", plan.offset));
    }
    if !plan.in_order && !plan.sort.is_empty() {
        out.push(format!("Sort ({} keys)", plan.sort.len()));
    }
    if plan.distinct {
        out.push("Distinct".into());
    }
    if let Some((groups, aggs)) = &plan.grouping {
        out.push(format!(
            "Aggregate ({} groups keys, {} aggregates)",
            groups.len(),
            aggs.len()
        ));
    }
    out.push(match &plan.source {
        Source::Nothing => "Result".into(),
        Source::Empty => "Result (no rows: an inner join with an empty catalog)".into(),
        Source::Relations { rels, .. } => format!("Nested Loop Join ({} relations)", rels.len()),
        Source::Union { parts, all } => format!(
            "Union{} ({} queries)",
            if *all { " All" } else { "" },
            parts.len()
        ),
        Source::Table { path, schema, .. } => {
            let t = &schema.def.name;
            match path {
                Path::Points(k) => format!("Primary Key Lookup on {t} ({} keys)", k.len()),
                Path::Range(..) => format!("Primary Key Range Scan on {t}"),
                Path::Index { name, .. } => format!("Index Scan using {name} on {t}"),
                Path::Full => format!("Seq Scan on {t}"),
            }
        }
    });
    out
}

/// Run a query.
pub fn query(db: &Db, tx: &mut OwnedTxn, q: &ast::Query, ctx: Ctx<'_>) -> SqlResult<Output> {
    let p = plan(db, q, ctx, Some(tx))?;
    run(&p, Some(tx), ctx)
}

/// The columns `q` returns, without running it.
pub fn describe(db: &Db, q: &ast::Query, ctx: Ctx<'_>) -> SqlResult<Vec<ColumnDesc>> {
    Ok(plan(db, q, ctx, None)?.columns)
}
