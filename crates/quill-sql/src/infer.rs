//! Parameter types a client left to the server (OID 0, or a Parse with
//! no types, as tokio-postgres sends), inferred as PostgreSQL does for
//! the common forms: a parameter compared with a column (`id = $1`,
//! `BETWEEN $1 AND $2`, `IN ($1, $2)`), stored into one (`VALUES ($1)`,
//! `SET c = $1`) or combined with one by arithmetic (`k + $1`) or in
//! `coalesce($1, k)` takes that column's type, in WHERE, the select list,
//! GROUP BY, HAVING and RETURNING of a statement over one table; one
//! combined with a number (`$1 + 1`, also with no FROM) takes the
//! number's type; one under AND, OR or NOT is boolean; one cast
//! (`$1::bigint`) takes the cast's type; one in LIMIT or OFFSET is a bigint. Others stay unknown
//! (the caller makes them text, which coerces on use).
//!
//! The types matter beyond decoding the values: a result column computed
//! from a parameter is described with the parameter's type, and a
//! binary-format client decodes the column by that description.

use quill::Db;
use quill::catalog::ColumnType;
use quill::catalog::schema::TableSchema;
use sqlparser::ast::{self, Expr as E, SetExpr, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

use crate::ddl::table_name;
use crate::expr;

/// The highest `$n` in `sql` (0 without parameters, or if it does not
/// tokenize: the parse reports that).
pub fn param_count(sql: &str) -> usize {
    let Ok(tokens) = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize() else {
        return 0;
    };
    tokens
        .iter()
        .filter_map(|t| match t {
            Token::Placeholder(p) => p.strip_prefix('$')?.parse::<usize>().ok(),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// The inferred type of each of `n` parameters of `s`.
pub fn param_types(db: &Db, s: &Statement, n: usize) -> Vec<Option<ColumnType>> {
    let mut out = vec![None; n];
    let mut w = Walker { out: &mut out };
    match s {
        Statement::Query(q) => w.query(db, q),
        Statement::Insert(i) => {
            let ast::TableObject::TableName(name) = &i.table else {
                return out;
            };
            let Some(schema) = schema_of(db, name) else {
                return out;
            };
            let targets: Vec<Option<ColumnType>> = if i.columns.is_empty() {
                schema.def.columns.iter().map(|c| Some(c.ty)).collect()
            } else {
                i.columns
                    .iter()
                    .map(|c| {
                        let n = expr::column_name(c).ok()?;
                        column(&schema, &n)
                    })
                    .collect()
            };
            if let Some(src) = &i.source
                && let SetExpr::Values(v) = src.body.as_ref()
            {
                for row in &v.rows {
                    for (e, ty) in row.iter().zip(&targets) {
                        if let Some(ty) = ty {
                            w.expect(e, *ty);
                        }
                    }
                }
            }
            if let Some(r) = &i.returning {
                w.items(&schema, r);
            }
        }
        Statement::Update(u) => {
            if let ast::TableFactor::Table { name, .. } = &u.table.relation
                && let Some(schema) = schema_of(db, name)
            {
                for a in &u.assignments {
                    if let ast::AssignmentTarget::ColumnName(c) = &a.target
                        && let Ok(n) = expr::column_name(c)
                        && let Some(ty) = column(&schema, &n)
                    {
                        w.expect(&a.value, ty);
                    }
                    w.expr(&schema, &a.value);
                }
                if let Some(sel) = &u.selection {
                    w.expr(&schema, sel);
                }
                if let Some(r) = &u.returning {
                    w.items(&schema, r);
                }
            }
        }
        Statement::Delete(d) => {
            let from = match &d.from {
                ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
            };
            if let [t] = from.as_slice()
                && let ast::TableFactor::Table { name, .. } = &t.relation
                && let Some(schema) = schema_of(db, name)
            {
                if let Some(sel) = &d.selection {
                    w.expr(&schema, sel);
                    w.subqueries(db, sel);
                }
                if let Some(r) = &d.returning {
                    w.items(&schema, r);
                }
            }
        }
        _ => {}
    }
    out
}

/// The schema of table `name`, if it exists. Inside
/// [`quill::wait::without_waiting`] a table under DDL is refused, not
/// waited for (the refusal voids the whole attempt, so `None` here is
/// never taken for "no such table").
fn schema_of(db: &Db, name: &ast::ObjectName) -> Option<std::sync::Arc<TableSchema>> {
    db.table(&table_name(name).ok()?).ok()?.try_schema().ok()
}

fn column(schema: &TableSchema, name: &str) -> Option<ColumnType> {
    schema
        .def
        .columns
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.ty)
}

/// The parameter number (0-based) `e` is, if it is one.
fn param_of(e: &ast::Expr) -> Option<usize> {
    match e {
        E::Value(v) => match &v.value {
            ast::Value::Placeholder(p) => {
                p.strip_prefix('$')?.parse::<usize>().ok()?.checked_sub(1)
            }
            _ => None,
        },
        E::Nested(x) => param_of(x),
        _ => None,
    }
}

struct Walker<'a> {
    out: &'a mut Vec<Option<ColumnType>>,
}

impl Walker<'_> {
    /// `e` is used as a value of type `ty`: if it is a parameter with no
    /// type yet, that is its type.
    fn expect(&mut self, e: &ast::Expr, ty: ColumnType) {
        if let Some(i) = param_of(e)
            && let Some(slot) = self.out.get_mut(i)
            && slot.is_none()
        {
            *slot = Some(ty);
        }
    }

    /// The type `e` has over `schema`, when it is a column or a
    /// column's arithmetic.
    fn type_of(schema: &TableSchema, e: &ast::Expr) -> Option<ColumnType> {
        match e {
            E::Identifier(i) => column(schema, &expr::name_of(i)),
            E::CompoundIdentifier(p) => column(schema, &expr::name_of(p.last()?)),
            E::Nested(x) => Self::type_of(schema, x),
            // A number: `$1 + 1` makes `$1` an integer, as in PostgreSQL.
            E::Value(v) => match &v.value {
                ast::Value::Number(n, _) if n.parse::<i32>().is_ok() => Some(ColumnType::Int32),
                ast::Value::Number(n, _) if n.parse::<i64>().is_ok() => Some(ColumnType::Int64),
                ast::Value::Number(..) => Some(ColumnType::Float64),
                _ => None,
            },
            E::BinaryOp { left, op, right } if arithmetic(op) => {
                Self::type_of(schema, left).or_else(|| Self::type_of(schema, right))
            }
            E::BinaryOp { op, .. } if comparison(op) || logical(op) => Some(ColumnType::Bool),
            _ => None,
        }
    }

    fn expr(&mut self, schema: &TableSchema, e: &ast::Expr) {
        match e {
            E::BinaryOp { left, op, right } => {
                // Both sides of `+` or `=` are of one type; of `AND` both
                // are boolean; of `||` and the rest, nothing is implied.
                if arithmetic(op) || comparison(op) {
                    if let Some(t) = Self::type_of(schema, left) {
                        self.expect(right, t);
                    }
                    if let Some(t) = Self::type_of(schema, right) {
                        self.expect(left, t);
                    }
                } else if logical(op) {
                    self.expect(left, ColumnType::Bool);
                    self.expect(right, ColumnType::Bool);
                }
                self.expr(schema, left);
                self.expr(schema, right);
            }
            E::Between {
                expr: x, low, high, ..
            } => {
                if let Some(t) = Self::type_of(schema, x) {
                    self.expect(low, t);
                    self.expect(high, t);
                }
            }
            E::In {
                expr: x,
                target: ast::InTarget::List(list),
                ..
            } => {
                if let Some(t) = Self::type_of(schema, x) {
                    for l in list {
                        self.expect(l, t);
                    }
                }
            }
            E::UnaryOp {
                op: ast::UnaryOperator::Not,
                expr: x,
            } => {
                self.expect(x, ColumnType::Bool);
                self.expr(schema, x);
            }
            E::Nested(x) | E::UnaryOp { expr: x, .. } => self.expr(schema, x),
            // `$1::bigint` is a bigint, as in PostgreSQL.
            E::Cast {
                expr: x, data_type, ..
            } => {
                if let Ok(t) = crate::types::column_type(data_type) {
                    self.expect(x, t.stored);
                }
                self.expr(schema, x);
            }
            E::Function(f) => {
                let args = function_args(f);
                // Its arguments are all of one type.
                let name = f.name.to_string().to_lowercase();
                if name == "coalesce"
                    && let Some(t) = args.iter().find_map(|a| Self::type_of(schema, a))
                {
                    for a in &args {
                        self.expect(a, t);
                    }
                }
                for a in args {
                    self.expr(schema, a);
                }
            }
            _ => {}
        }
    }

    /// The output expressions of a select list or RETURNING.
    fn items(&mut self, schema: &TableSchema, items: &[ast::SelectItem]) {
        for i in items {
            if let ast::SelectItem::UnnamedExpr(e)
            | ast::SelectItem::ExprWithAlias { expr: e, .. } = i
            {
                self.expr(schema, e);
            }
        }
    }

    /// Subqueries inside a WHERE (`IN (SELECT ...)`).
    fn subqueries(&mut self, db: &Db, e: &ast::Expr) {
        match e {
            E::In {
                target: ast::InTarget::Subquery(subquery),
                ..
            } => self.query(db, subquery),
            E::Subquery(q) => self.query(db, q),
            E::BinaryOp { left, right, .. } => {
                self.subqueries(db, left);
                self.subqueries(db, right);
            }
            E::Nested(x) | E::UnaryOp { expr: x, .. } => self.subqueries(db, x),
            _ => {}
        }
    }

    fn query(&mut self, db: &Db, q: &ast::Query) {
        if let Some(ast::LimitClause::LimitOffset { limit, offset, .. }) = &q.limit_clause {
            if let Some(l) = limit {
                self.expect(l, ColumnType::Int64);
            }
            if let Some(o) = offset {
                self.expect(&o.value, ColumnType::Int64);
            }
        }
        let SetExpr::Select(sel) = q.body.as_ref() else {
            return;
        };
        if sel.from.is_empty() {
            // `SELECT $1 + 1`: only literals to go by.
            self.items(&crate::select::no_columns(), &sel.projection);
            return;
        }
        let [from] = sel.from.as_slice() else {
            return;
        };
        let ast::TableFactor::Table { name, .. } = &from.relation else {
            return;
        };
        let Some(schema) = schema_of(db, name) else {
            return;
        };
        if let Some(w) = &sel.selection {
            self.expr(&schema, w);
            self.subqueries(db, w);
        }
        self.items(&schema, &sel.projection);
        if let ast::GroupByExpr::Expressions(groups, _) = &sel.group_by {
            for g in groups {
                self.expr(&schema, g);
            }
        }
        if let Some(h) = &sel.having {
            self.expr(&schema, h);
        }
    }
}

/// The plain arguments of a function call (`f(a, b)`; none for `f(*)`).
fn function_args(f: &ast::Function) -> Vec<&ast::Expr> {
    match &f.args {
        ast::FunctionArguments::List(l) => l
            .args
            .iter()
            .filter_map(|a| match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// `+ - * / %`: both sides and the result are of one type.
fn arithmetic(op: &ast::BinaryOperator) -> bool {
    use ast::BinaryOperator as B;
    matches!(op, B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo)
}

/// `= <> < <= > >=`: both sides are of one type; the result is boolean.
fn comparison(op: &ast::BinaryOperator) -> bool {
    use ast::BinaryOperator as B;
    matches!(op, B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq)
}

/// `AND`, `OR`: boolean on both sides and in the result.
fn logical(op: &ast::BinaryOperator) -> bool {
    matches!(op, ast::BinaryOperator::And | ast::BinaryOperator::Or)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_parameters_by_their_highest_number() {
        assert_eq!(param_count("select 1"), 0);
        assert_eq!(param_count("select $2, $1 where x = '$9'"), 2);
        assert_eq!(param_count("select $10"), 10);
    }
}
