//! Scalar expressions bound to one table's columns, and their evaluation
//! over a row with SQL's three-valued logic (NULL is unknown: a
//! comparison with NULL is NULL, `NULL AND false` is false, a WHERE that
//! is NULL does not select the row).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use quill::catalog::{ColumnType, Value};
use sqlparser::ast::{self, BinaryOperator, UnaryOperator};

use crate::error::{SqlError, SqlResult, SqlState};
use crate::session::SessionInfo;
use crate::types;

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `=`
    Eq,
    /// `<>` or `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Cmp {
    fn holds(self, o: Ordering) -> bool {
        match self {
            Cmp::Eq => o == Ordering::Equal,
            Cmp::Ne => o != Ordering::Equal,
            Cmp::Lt => o == Ordering::Less,
            Cmp::Le => o != Ordering::Greater,
            Cmp::Gt => o == Ordering::Greater,
            Cmp::Ge => o != Ordering::Less,
        }
    }

    /// The operator with its operands swapped (`a < b` is `b > a`).
    pub fn flip(self) -> Cmp {
        match self {
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
            Cmp::Gt => Cmp::Lt,
            Cmp::Ge => Cmp::Le,
            c => c,
        }
    }
}

/// An arithmetic operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
}

/// A bound expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A column of the row, by position.
    Column(usize),
    /// A constant.
    Const(Value),
    /// A comparison.
    Cmp(Cmp, Box<Expr>, Box<Expr>),
    /// Arithmetic.
    Arith(Arith, Box<Expr>, Box<Expr>),
    /// Unary minus.
    Neg(Box<Expr>),
    /// `AND` of the operands.
    And(Box<Expr>, Box<Expr>),
    /// `OR` of the operands.
    Or(Box<Expr>, Box<Expr>),
    /// `NOT`.
    Not(Box<Expr>),
    /// `IS [NOT] NULL` (true: `IS NOT NULL`).
    IsNull(Box<Expr>, bool),
    /// `e [NOT] IN (list)` (true: `NOT IN`).
    InList(Box<Expr>, Vec<Expr>, bool),
    /// `e [NOT] BETWEEN lo AND hi` (true: `NOT BETWEEN`).
    Between(Box<Expr>, Box<Expr>, Box<Expr>, bool),
    /// A column of the enclosing query's row (in a correlated subquery,
    /// replaced by its value before the subquery runs).
    Outer(usize),
    /// `CASE [operand] WHEN .. THEN .. [ELSE ..] END`.
    Case(Option<Box<Expr>>, Vec<(Expr, Expr)>, Option<Box<Expr>>),
    /// `text ~ pattern` (true: `!~`), the pattern compiled once.
    Regex(Box<Expr>, RegexRef, bool),
    /// A value looked up by key in a table built at bind time (OID to
    /// name for `::regclass`, index OID to definition, ...).
    Lookup(Box<Expr>, LookupRef),
    /// A scalar subquery evaluated per row (correlated, over catalogs).
    Subquery(SubqueryRef),
    /// A scalar function over its arguments (`lower`, `upper`,
    /// `length`, `coalesce`).
    Func(String, Vec<Expr>),
    /// Parameter `$n+1` of a statement being described (its value is
    /// not known yet; binding with values makes it a constant).
    Param(usize),
    /// `e::type`: the value coerced to a stored type.
    Cast(Box<Expr>, ColumnType),
}

/// A compiled regular expression (compared by pattern).
#[derive(Clone, Debug)]
pub struct RegexRef(pub std::sync::Arc<regex::Regex>);

impl PartialEq for RegexRef {
    fn eq(&self, o: &Self) -> bool {
        self.0.as_str() == o.0.as_str()
    }
}

/// A lookup table for [`Expr::Lookup`].
#[derive(Clone, Debug, PartialEq)]
pub struct LookupRef(pub std::sync::Arc<std::collections::HashMap<i64, Value>>);

/// Evaluates a scalar subquery over the enclosing query's row.
pub type SubqueryFn = dyn Fn(&[Value]) -> SqlResult<Value> + Send + Sync;

/// A scalar subquery's evaluation over the enclosing row.
#[derive(Clone)]
pub struct SubqueryRef(pub std::sync::Arc<SubqueryFn>);

impl std::fmt::Debug for SubqueryRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SubqueryRef")
    }
}

impl PartialEq for SubqueryRef {
    fn eq(&self, o: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &o.0)
    }
}

/// The catalog type a cast names (`regclass`, `regtype`, `oid`, ...),
/// if it is one.
fn catalog_cast(dt: &ast::DataType) -> Option<&'static str> {
    let name = match dt {
        ast::DataType::Custom(n, m) if m.is_empty() => match n.0.last() {
            Some(ast::ObjectNamePart::Identifier(i)) => i.value.to_lowercase(),
            _ => return None,
        },
        ast::DataType::Text => return Some("text"),
        ast::DataType::Regclass => return Some("regclass"),
        _ => return None,
    };
    [
        "regclass",
        "regtype",
        "regnamespace",
        "regproc",
        "oid",
        "name",
        "text",
        "int2[]",
    ]
    .into_iter()
    .find(|x| *x == name)
}

/// A cast to a catalog type: `oid::regclass` names the relation, text
/// `'t'::regclass` finds its OID, `::regtype` names a type, `::text` and
/// `::name` make text.
fn cast_catalog(e: Expr, to: &str, scope: &dyn Scope) -> SqlResult<Expr> {
    Ok(match to {
        "text" | "name" => Expr::Func("text".into(), vec![e]),
        "oid" => Expr::Cast(Box::new(e), ColumnType::Int64),
        "regclass" => {
            let Some(db) = scope.db() else {
                return Err(SqlError::unsupported("regclass outside catalog queries"));
            };
            let names = crate::pg_catalog::relation_names(db);
            if let Expr::Const(Value::Text(s)) = &e {
                let s = s.trim_start_matches("public.");
                let oid = names
                    .iter()
                    .find(|(_, n)| n.as_str() == s)
                    .map(|(o, _)| *o)
                    .ok_or_else(|| {
                        SqlError::new(
                            SqlState::UNDEFINED_TABLE,
                            format!("relation \"{s}\" does not exist"),
                        )
                    })?;
                return Ok(Expr::Const(Value::Int64(oid)));
            }
            let map = names
                .into_iter()
                .map(|(k, v)| (k, Value::Text(v)))
                .collect();
            Expr::Lookup(Box::new(e), LookupRef(std::sync::Arc::new(map)))
        }
        "regtype" => {
            let map = crate::pg_catalog::TYPES
                .iter()
                .filter_map(|(oid, _, _)| {
                    crate::pg_catalog::format_type(*oid, -1).map(|n| (*oid, Value::Text(n)))
                })
                .collect();
            Expr::Lookup(Box::new(e), LookupRef(std::sync::Arc::new(map)))
        }
        "regnamespace" => {
            let map = [
                (crate::pg_catalog::PG_CATALOG_NS, "pg_catalog"),
                (crate::pg_catalog::PUBLIC_NS, "public"),
                (
                    crate::pg_catalog::INFORMATION_SCHEMA_NS,
                    "information_schema",
                ),
            ]
            .into_iter()
            .map(|(k, v)| (k, Value::Text(v.into())))
            .collect();
            Expr::Lookup(Box::new(e), LookupRef(std::sync::Arc::new(map)))
        }
        other => return Err(SqlError::unsupported(format!("a cast to {other}"))),
    })
}

/// `l ~ r` with a constant pattern.
fn regex(l: Expr, r: Expr, negated: bool, insensitive: bool) -> SqlResult<Expr> {
    let Expr::Const(Value::Text(p)) = r else {
        return Err(SqlError::unsupported(
            "a regular expression that is not a constant",
        ));
    };
    let re = regex::RegexBuilder::new(&p)
        .case_insensitive(insensitive)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| {
            SqlError::new(
                SqlState::INVALID_REGULAR_EXPRESSION,
                format!("invalid regular expression: {e}"),
            )
        })?;
    Ok(Expr::Regex(
        Box::new(l),
        RegexRef(std::sync::Arc::new(re)),
        negated,
    ))
}

/// What binding needs besides the columns: the statement's parameter
/// values and who the session is.
#[derive(Clone, Copy, Debug)]
pub struct Ctx<'a> {
    /// The values of `$1..$n`, or `None` while a prepared statement is
    /// being described (parameters then bind to [`Expr::Param`]).
    pub params: Option<&'a [Value]>,
    /// While describing (`params` is `None`): the types of `$1..$n`, which
    /// give [`Expr::Param`] its type in a result's column description (a
    /// parameter past the end is text). Empty when running.
    pub param_types: &'a [ColumnType],
    /// The session, for `current_database()` and the like.
    pub info: &'a SessionInfo,
    /// Set when the client asked to cancel the running statement.
    pub cancel: &'a AtomicBool,
    /// When the running statement's `statement_timeout` runs out (`None`:
    /// no timeout, and no clock read per check).
    pub deadline: Option<std::time::Instant>,
}

/// A cancel flag that is never set (for constant folding at DDL time).
pub static NEVER_CANCELED: AtomicBool = AtomicBool::new(false);

/// Whether `deadline` (none: never) has passed.
pub fn past(deadline: Option<std::time::Instant>) -> bool {
    deadline.is_some_and(|d| std::time::Instant::now() >= d)
}

/// 57014, as PostgreSQL words it for a statement its `statement_timeout`
/// stopped, or one its client canceled.
pub fn canceled(by_timeout: bool) -> SqlError {
    SqlError::new(
        SqlState::QUERY_CANCELED,
        if by_timeout {
            "canceling statement due to statement timeout"
        } else {
            "canceling statement due to user request"
        },
    )
}

/// Why a statement stops now, if it does: its client set `cancel`, or
/// its `deadline` passed.
pub fn interrupted(cancel: &AtomicBool, deadline: Option<std::time::Instant>) -> Option<SqlError> {
    if cancel.load(AtomicOrdering::Acquire) {
        Some(canceled(false))
    } else if past(deadline) {
        Some(canceled(true))
    } else {
        None
    }
}

impl Ctx<'_> {
    /// 57014 if the client asked to cancel the running statement; long
    /// loops call this once per row.
    /// A statement past its `statement_timeout` stops likewise, at its
    /// next check (a row lock wait stops at it in the engine: `set_stop_at`).
    pub fn check_cancel(&self) -> SqlResult<()> {
        match interrupted(self.cancel, self.deadline) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// What names resolve to while binding: the columns of one table.
pub trait Scope {
    /// The position of column `name`, if there is one.
    fn column(&self, name: &str) -> Option<usize>;
    /// Parameters and session.
    fn ctx(&self) -> Ctx<'_>;
    /// A binding for `e` that replaces the ordinary one (aggregates and
    /// grouped columns bind to positions of the grouped row), or `None`.
    fn intercept(&self, _e: &ast::Expr) -> Option<SqlResult<Expr>> {
        None
    }
    /// The position of column `name` of the relation `qualifier` names
    /// (`t.c`); a one-table scope ignores the qualifier.
    fn qualified(&self, _qualifier: &str, name: &str) -> Option<usize> {
        self.column(name)
    }
    /// The position, in the enclosing query's row, of a column this
    /// scope does not have (a correlated subquery's outer reference).
    fn outer(&self, _qualifier: Option<&str>, _name: &str) -> Option<usize> {
        None
    }
    /// The database, where the scope reads catalogs (for functions such
    /// as `pg_get_indexdef` and casts to `regclass`).
    fn db(&self) -> Option<&quill::Db> {
        None
    }
}

/// A scope with no columns (constant expressions).
pub struct NoColumns<'a>(pub Ctx<'a>);

impl Scope for NoColumns<'_> {
    fn column(&self, _: &str) -> Option<usize> {
        None
    }
    fn ctx(&self) -> Ctx<'_> {
        self.0
    }
}

/// The value of parameter `$n` (`p` is its text, `$1`), or an
/// [`Expr::Param`] while describing.
fn param(p: &str, ctx: Ctx<'_>) -> SqlResult<Expr> {
    let n = p
        .strip_prefix('$')
        .and_then(|d| d.parse::<usize>().ok())
        .filter(|&n| n >= 1)
        .ok_or_else(|| {
            SqlError::new(
                SqlState::SYNTAX_ERROR,
                format!("{p} is not a parameter ($1, $2, ...)"),
            )
        })?;
    match ctx.params {
        None => Ok(Expr::Param(n - 1)),
        Some(values) => values.get(n - 1).cloned().map(Expr::Const).ok_or_else(|| {
            SqlError::new(
                SqlState::UNDEFINED_PARAMETER,
                format!("there is no parameter ${n}"),
            )
        }),
    }
}

/// The name a function call names (its last part, folded).
pub fn function_name(f: &ast::Function) -> String {
    match f.name.0.last() {
        Some(ast::ObjectNamePart::Identifier(i)) => ident_name(i),
        _ => f.name.to_string().to_lowercase(),
    }
}

/// The arguments of a plain call `f(a, b)`, or 0A000.
pub fn function_args(f: &ast::Function) -> SqlResult<Vec<&ast::Expr>> {
    match &f.args {
        ast::FunctionArguments::None => Ok(vec![]),
        ast::FunctionArguments::List(l) => {
            if l.duplicate_treatment.is_some() || !l.clauses.is_empty() {
                return Err(SqlError::unsupported(format!("the call {f}")));
            }
            l.args
                .iter()
                .map(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Ok(e),
                    other => Err(SqlError::unsupported(format!("the argument {other}"))),
                })
                .collect()
        }
        ast::FunctionArguments::Subquery(_) => Err(SqlError::unsupported(format!("the call {f}"))),
    }
}

/// The aggregate functions.
pub const AGGREGATES: [&str; 5] = ["count", "sum", "min", "max", "avg"];

/// The PostgreSQL version string `version()` returns.
pub fn version_string() -> String {
    format!(
        "PostgreSQL 15.18 (Quill {}) on {}-linux, compiled by rustc",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH
    )
}

/// A scalar function call.
fn function(f: &ast::Function, scope: &dyn Scope) -> SqlResult<Expr> {
    let name = function_name(f);
    let args = function_args(f)?;
    if AGGREGATES.contains(&name.as_str()) {
        return Err(SqlError::new(
            SqlState::GROUPING_ERROR,
            format!("aggregate function {name} is not allowed here"),
        ));
    }
    let ctx = scope.ctx();
    let v = match (name.as_str(), args.as_slice()) {
        ("version", []) => Value::Text(version_string()),
        ("current_schema", []) => Value::Text("public".into()),
        ("current_database", []) => Value::Text(ctx.info.database.clone()),
        ("current_user" | "session_user" | "user", []) => Value::Text(ctx.info.user.clone()),
        ("pg_backend_pid", []) => Value::Int32(ctx.info.backend_pid),
        ("now" | "current_timestamp" | "localtimestamp", []) => Value::Timestamp(now_micros()),
        ("lower" | "upper" | "length" | "octet_length", [a]) => {
            let a = Box::new(bind(a, scope)?);
            return Ok(Expr::Func(name, vec![*a]));
        }
        ("repeat", [a, n]) => {
            return Ok(Expr::Func(name, vec![bind(a, scope)?, bind(n, scope)?]));
        }
        ("pg_get_userbyid", [_]) => Value::Text(ctx.info.user.clone()),
        ("pg_table_is_visible" | "pg_relation_is_publishable", [_]) => Value::Bool(true),
        ("pg_encoding_to_char", [_]) => Value::Text("UTF8".into()),
        ("obj_description" | "col_description" | "shobj_description", _) => Value::Null,
        ("array_to_string", [a, _]) => {
            // Quill's catalogs have no arrays: every ACL is NULL.
            let _ = bind(a, scope)?;
            Value::Null
        }
        ("pg_get_expr", [a, ..]) => return bind(a, scope),
        ("format_type", [t, m]) => {
            return Ok(Expr::Func(
                "format_type".into(),
                vec![bind(t, scope)?, bind(m, scope)?],
            ));
        }
        ("pg_get_indexdef" | "pg_get_constraintdef", [a, ..]) => {
            let Some(db) = scope.db() else {
                return Err(SqlError::unsupported(format!(
                    "{name} outside catalog queries"
                )));
            };
            let defs = if name == "pg_get_indexdef" {
                crate::pg_catalog::index_defs(db)
            } else {
                crate::pg_catalog::constraint_defs(db)
            };
            let map = defs.into_iter().map(|(k, v)| (k, Value::Text(v))).collect();
            return Ok(Expr::Lookup(
                Box::new(bind(a, scope)?),
                LookupRef(std::sync::Arc::new(map)),
            ));
        }
        ("concat", args) => {
            let args = args
                .iter()
                .map(|a| bind(a, scope))
                .collect::<SqlResult<_>>()?;
            return Ok(Expr::Func(name, args));
        }
        ("coalesce", args) if !args.is_empty() => {
            let args = args
                .iter()
                .map(|a| bind(a, scope))
                .collect::<SqlResult<_>>()?;
            return Ok(Expr::Func(name, args));
        }
        _ => {
            return Err(SqlError::new(
                SqlState::UNDEFINED_FUNCTION,
                format!(
                    "function {name} with {} arguments does not exist",
                    args.len()
                ),
            ));
        }
    };
    Ok(Expr::Const(v))
}

/// Microseconds since the epoch, now.
fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// The column an object name in a column position names (`c`, or the
/// last part of `t.c`), folded as identifiers are.
pub fn column_name(name: &ast::ObjectName) -> SqlResult<String> {
    match name.0.last() {
        Some(ast::ObjectNamePart::Identifier(i)) => Ok(ident_name(i)),
        _ => Err(SqlError::new(
            SqlState::SYNTAX_ERROR,
            format!("\"{name}\" is not a column name"),
        )),
    }
}

/// A literal's value: integers are `Int32` or `Int64` (the narrowest
/// that holds them), other numbers `Float64`, strings `Text`.
pub fn literal(v: &ast::Value) -> SqlResult<Value> {
    Ok(match v {
        // As in PostgreSQL: an integer literal is an int4 if it fits,
        // else an int8, else a number with a fraction (a double here).
        ast::Value::Number(s, _) => match s.parse::<i64>() {
            Ok(i) => i32::try_from(i).map_or(Value::Int64(i), Value::Int32),
            Err(_) => Value::Float64(crate::types::parse_finite(s).map_err(|e| {
                e.unwrap_or_else(|| {
                    SqlError::new(
                        SqlState::INVALID_TEXT_REPRESENTATION,
                        format!("invalid number {s}"),
                    )
                })
            })?),
        },
        ast::Value::SingleQuotedString(s)
        | ast::Value::EscapedStringLiteral(s)
        | ast::Value::DoubleQuotedString(s) => Value::Text(s.clone()),
        ast::Value::Boolean(b) => Value::Bool(*b),
        ast::Value::Null => Value::Null,
        ast::Value::Placeholder(p) => {
            return Err(SqlError::new(
                SqlState::SYNTAX_ERROR,
                format!("there is no parameter {p}"),
            ));
        }
        other => return Err(SqlError::unsupported(format!("the literal {other}"))),
    })
}

fn ident_name(i: &ast::Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

/// The name an identifier stands for (unquoted ones fold to lower case,
/// as in PostgreSQL).
pub fn name_of(i: &ast::Ident) -> String {
    ident_name(i)
}

fn column_ref(scope: &dyn Scope, qualifier: Option<&str>, name: &str) -> SqlResult<Expr> {
    let local = match qualifier {
        None => scope.column(name),
        Some(q) => scope.qualified(q, name),
    };
    local
        .map(Expr::Column)
        .or_else(|| scope.outer(qualifier, name).map(Expr::Outer))
        .ok_or_else(|| {
            SqlError::new(
                SqlState::UNDEFINED_COLUMN,
                match qualifier {
                    None => format!("column \"{name}\" does not exist"),
                    Some(q) => format!("column {q}.{name} does not exist"),
                },
            )
        })
}

/// Bind `e` to the columns of `scope`.
pub fn bind(e: &ast::Expr, scope: &dyn Scope) -> SqlResult<Expr> {
    use ast::Expr as E;
    if let Some(r) = scope.intercept(e) {
        return r;
    }
    let b = |x: &ast::Expr| bind(x, scope).map(Box::new);
    Ok(match e {
        E::Identifier(i) => column_ref(scope, None, &ident_name(i))?,
        E::CompoundIdentifier(parts) => match parts.as_slice() {
            [.., q, i] => column_ref(scope, Some(&ident_name(q)), &ident_name(i))?,
            [i] => column_ref(scope, None, &ident_name(i))?,
            [] => return Err(SqlError::new(SqlState::SYNTAX_ERROR, "empty name")),
        },
        E::Case {
            operand,
            conditions,
            else_result,
            ..
        } => Expr::Case(
            operand
                .as_deref()
                .map(|o| bind(o, scope))
                .transpose()?
                .map(Box::new),
            conditions
                .iter()
                .map(|w| Ok((bind(&w.condition, scope)?, bind(&w.result, scope)?)))
                .collect::<SqlResult<_>>()?,
            else_result
                .as_deref()
                .map(|e| bind(e, scope))
                .transpose()?
                .map(Box::new),
        ),
        E::Collate { expr, .. } => bind(expr, scope)?,
        E::TypedString(ts) => {
            let ty = types::column_type(&ts.data_type)?.stored;
            Expr::Const(types::coerce(literal(&ts.value.value)?, ty)?)
        }
        E::Value(ast::ValueWithSpan {
            value: ast::Value::Placeholder(p),
            ..
        }) => param(p, scope.ctx())?,
        E::Value(v) => Expr::Const(literal(&v.value)?),
        E::Function(f) => function(f, scope)?,
        E::Cast {
            expr, data_type, ..
        } if catalog_cast(data_type).is_some() => {
            let inner = bind(expr, scope)?;
            cast_catalog(inner, catalog_cast(data_type).unwrap_or_default(), scope)?
        }
        E::Cast {
            expr, data_type, ..
        } => {
            let ty = types::column_type(data_type)?.stored;
            match bind(expr, scope)? {
                Expr::Const(v) => Expr::Const(types::coerce(v, ty)?),
                x => Expr::Cast(Box::new(x), ty),
            }
        }
        E::Nested(x) => bind(x, scope)?,
        E::BinaryOp { left, op, right } => {
            let (l, r) = (b(left)?, b(right)?);
            match op {
                BinaryOperator::Eq => Expr::Cmp(Cmp::Eq, l, r),
                BinaryOperator::NotEq => Expr::Cmp(Cmp::Ne, l, r),
                BinaryOperator::Lt => Expr::Cmp(Cmp::Lt, l, r),
                BinaryOperator::LtEq => Expr::Cmp(Cmp::Le, l, r),
                BinaryOperator::Gt => Expr::Cmp(Cmp::Gt, l, r),
                BinaryOperator::GtEq => Expr::Cmp(Cmp::Ge, l, r),
                BinaryOperator::Plus => Expr::Arith(Arith::Add, l, r),
                BinaryOperator::Minus => Expr::Arith(Arith::Sub, l, r),
                BinaryOperator::Multiply => Expr::Arith(Arith::Mul, l, r),
                BinaryOperator::Divide => Expr::Arith(Arith::Div, l, r),
                BinaryOperator::Modulo => Expr::Arith(Arith::Mod, l, r),
                BinaryOperator::And => Expr::And(l, r),
                BinaryOperator::PGRegexMatch => regex(*l, *r, false, false)?,
                BinaryOperator::PGRegexIMatch => regex(*l, *r, false, true)?,
                BinaryOperator::PGRegexNotMatch => regex(*l, *r, true, false)?,
                BinaryOperator::PGRegexNotIMatch => regex(*l, *r, true, true)?,
                BinaryOperator::PGCustomBinaryOperator(parts)
                    if matches!(parts.last().map(String::as_str), Some("~" | "!~")) =>
                {
                    regex(*l, *r, parts.last().is_some_and(|p| p == "!~"), false)?
                }
                BinaryOperator::StringConcat => Expr::Func("concat".into(), vec![*l, *r]),
                BinaryOperator::Or => Expr::Or(l, r),
                other => return Err(SqlError::unsupported(format!("the operator {other}"))),
            }
        }
        E::UnaryOp { op, expr } => match op {
            UnaryOperator::Not => Expr::Not(b(expr)?),
            UnaryOperator::Minus => match bind(expr, scope)? {
                Expr::Const(Value::Int64(i)) if i == i64::from(i32::MAX) + 1 => {
                    Expr::Const(Value::Int32(i32::MIN))
                }
                Expr::Const(v) => Expr::Const(negate(&v)?),
                x => Expr::Neg(Box::new(x)),
            },
            UnaryOperator::Plus => bind(expr, scope)?,
            other => return Err(SqlError::unsupported(format!("the operator {other}"))),
        },
        E::IsNull(x) => Expr::IsNull(b(x)?, false),
        E::IsNotNull(x) => Expr::IsNull(b(x)?, true),
        E::In {
            expr,
            target: ast::InTarget::List(list),
            negated,
            ..
        } => Expr::InList(
            b(expr)?,
            list.iter()
                .map(|x| bind(x, scope))
                .collect::<SqlResult<_>>()?,
            *negated,
        ),
        E::Between {
            expr,
            negated,
            low,
            high,
        } => Expr::Between(b(expr)?, b(low)?, b(high)?, *negated),
        other => return Err(SqlError::unsupported(format!("the expression {other}"))),
    })
}

/// Doubles ordered as PostgreSQL orders them: -0 equals 0 (the key
/// encoding, and so a primary key, DISTINCT and GROUP BY, already hold
/// them equal), and NaN equals NaN and sorts above every other value.
fn float_order(x: f64, y: f64) -> Ordering {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        // (neither is NaN, so partial_cmp answers)
        _ => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
    }
}

/// Compare two non-NULL values: numbers numerically across integer and
/// float types, others within their own type.
pub fn compare(a: &Value, b: &Value) -> SqlResult<Ordering> {
    use Value as V;
    let num = |v: &Value| match v {
        V::Int32(x) => Some(f64::from(*x)),
        V::Int64(x) => Some(*x as f64),
        V::Float64(x) => Some(*x),
        _ => None,
    };
    Ok(match (a, b) {
        (V::Int32(x), V::Int32(y)) => x.cmp(y),
        (V::Int64(x), V::Int64(y)) => x.cmp(y),
        (V::Int32(x), V::Int64(y)) => i64::from(*x).cmp(y),
        (V::Int64(x), V::Int32(y)) => x.cmp(&i64::from(*y)),
        (V::Bool(x), V::Bool(y)) => x.cmp(y),
        (V::Text(x), V::Text(y)) => x.cmp(y),
        (V::Bytes(x), V::Bytes(y)) => x.cmp(y),
        (V::Timestamp(x), V::Timestamp(y)) => x.cmp(y),
        (V::Timestamp(_), V::Text(s)) => {
            return compare(a, &V::Timestamp(types::parse_timestamp(s)?));
        }
        (V::Text(s), V::Timestamp(_)) => {
            return compare(&V::Timestamp(types::parse_timestamp(s)?), b);
        }
        // A string compared with a number reads as that number's type
        // (PostgreSQL resolves an untyped literal this way).
        (V::Int32(_) | V::Int64(_) | V::Float64(_) | V::Bool(_), V::Text(s)) => {
            return compare(a, &types::parse_text(s, text_peer(a))?);
        }
        (V::Text(s), V::Int32(_) | V::Int64(_) | V::Float64(_) | V::Bool(_)) => {
            return compare(&types::parse_text(s, text_peer(b))?, b);
        }
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => float_order(x, y),
            _ => {
                return Err(SqlError::new(
                    SqlState::UNDEFINED_FUNCTION,
                    format!(
                        "operator does not exist: {} compared with {}",
                        a.type_name(),
                        b.type_name()
                    ),
                ));
            }
        },
    })
}

/// The type a string compared with `v` is read as.
fn text_peer(v: &Value) -> ColumnType {
    match v {
        Value::Int32(_) | Value::Int64(_) => ColumnType::Int64,
        Value::Bool(_) => ColumnType::Bool,
        _ => ColumnType::Float64,
    }
}

/// A scalar function's value (`args` borrowed where they were columns
/// or constants).
fn scalar(name: &str, mut args: Vec<Cow<'_, Value>>) -> SqlResult<Value> {
    match name {
        "coalesce" => {
            return Ok(args
                .into_iter()
                .find(|v| !v.is_null())
                .map_or(Value::Null, Cow::into_owned));
        }
        // `||`: NULL if either side is.
        "concat" => {
            if args.iter().any(|v| v.is_null()) {
                return Ok(Value::Null);
            }
            return Ok(Value::Text(
                args.iter()
                    .filter_map(|v| types::to_text(v))
                    .collect::<String>(),
            ));
        }
        "repeat" => {
            let [s, n] = args.as_slice() else {
                return Err(SqlError::new(
                    SqlState::UNDEFINED_FUNCTION,
                    "repeat takes a string and a count",
                ));
            };
            if s.is_null() || n.is_null() {
                return Ok(Value::Null);
            }
            let s = types::to_text(s).unwrap_or_default();
            let n = match types::coerce(n.clone().into_owned(), ColumnType::Int64)? {
                Value::Int64(n) => usize::try_from(n).unwrap_or(0),
                _ => 0,
            };
            let len = s.len().saturating_mul(n);
            if len > crate::session::MAX_SQL_LEN {
                return Err(SqlError::new(
                    SqlState::PROGRAM_LIMIT_EXCEEDED,
                    format!(
                        "repeat would make {len} bytes; the limit for a computed string is {} MiB",
                        crate::session::MAX_SQL_LEN >> 20
                    ),
                ));
            }
            return Ok(Value::Text(s.repeat(n)));
        }
        "format_type" => {
            let n = |v: Option<&Cow<'_, Value>>| match v.map(|v| &**v) {
                Some(Value::Int64(x)) => Some(*x),
                Some(Value::Int32(x)) => Some(i64::from(*x)),
                _ => None,
            };
            return Ok(match n(args.first()) {
                None => Value::Null,
                Some(oid) => crate::pg_catalog::format_type(oid, n(args.get(1)).unwrap_or(-1))
                    .map_or(Value::Null, Value::Text),
            });
        }
        _ => {}
    }
    let Some(a) = args.pop() else {
        return Err(SqlError::new(
            SqlState::UNDEFINED_FUNCTION,
            format!("function {name} needs an argument"),
        ));
    };
    Ok(match (name, &*a) {
        (_, Value::Null) => Value::Null,
        ("text", v) => Value::Text(types::to_text(v).unwrap_or_default()),
        ("lower", Value::Text(s)) => Value::Text(s.to_lowercase()),
        ("upper", Value::Text(s)) => Value::Text(s.to_uppercase()),
        ("length", Value::Text(s)) => {
            Value::Int32(i32::try_from(s.chars().count()).unwrap_or(i32::MAX))
        }
        ("length" | "octet_length", Value::Bytes(b)) => {
            Value::Int32(i32::try_from(b.len()).unwrap_or(i32::MAX))
        }
        ("octet_length", Value::Text(s)) => {
            Value::Int32(i32::try_from(s.len()).unwrap_or(i32::MAX))
        }
        (name, other) => {
            return Err(SqlError::new(
                SqlState::UNDEFINED_FUNCTION,
                format!("function {name}({}) does not exist", other.type_name()),
            ));
        }
    })
}

fn truth(v: &Value) -> SqlResult<Option<bool>> {
    match v {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(*b)),
        other => Err(SqlError::new(
            SqlState::DATATYPE_MISMATCH,
            format!("argument must be boolean, not {}", other.type_name()),
        )),
    }
}

fn bool_value(b: Option<bool>) -> Value {
    b.map_or(Value::Null, Value::Bool)
}

fn overflow() -> SqlError {
    SqlError::new(SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
}

/// `a + b` with the arithmetic's overflow checks (for `sum`).
pub fn add(a: &Value, b: &Value) -> SqlResult<Value> {
    arith(Arith::Add, a, b)
}

/// A number as a double, or `None` for other values.
pub fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int32(x) => Some(f64::from(*x)),
        Value::Int64(x) => Some(*x as f64),
        Value::Float64(x) => Some(*x),
        _ => None,
    }
}

fn arith(op: Arith, a: &Value, b: &Value) -> SqlResult<Value> {
    use Value as V;
    let ints = match (a, b) {
        (V::Int32(x), V::Int32(y)) => Some((i64::from(*x), i64::from(*y), true)),
        (V::Int32(x), V::Int64(y)) => Some((i64::from(*x), *y, false)),
        (V::Int64(x), V::Int32(y)) => Some((*x, i64::from(*y), false)),
        (V::Int64(x), V::Int64(y)) => Some((*x, *y, false)),
        _ => None,
    };
    if let Some((x, y, narrow)) = ints {
        if matches!(op, Arith::Div | Arith::Mod) && y == 0 {
            return Err(SqlError::new(
                SqlState::DIVISION_BY_ZERO,
                "division by zero",
            ));
        }
        let r = match op {
            Arith::Add => x.checked_add(y),
            Arith::Sub => x.checked_sub(y),
            Arith::Mul => x.checked_mul(y),
            Arith::Div => x.checked_div(y),
            Arith::Mod => x.checked_rem(y),
        }
        .ok_or_else(overflow)?;
        return Ok(if narrow {
            V::Int32(i32::try_from(r).map_err(|_| overflow())?)
        } else {
            V::Int64(r)
        });
    }
    let f = |v: &Value| match v {
        V::Int32(x) => Some(f64::from(*x)),
        V::Int64(x) => Some(*x as f64),
        V::Float64(x) => Some(*x),
        _ => None,
    };
    match (f(a), f(b)) {
        (Some(x), Some(y)) => {
            if matches!(op, Arith::Div | Arith::Mod) && y == 0.0 {
                return Err(SqlError::new(
                    SqlState::DIVISION_BY_ZERO,
                    "division by zero",
                ));
            }
            let r = match op {
                Arith::Add => x + y,
                Arith::Sub => x - y,
                Arith::Mul => x * y,
                Arith::Div => x / y,
                Arith::Mod => x % y,
            };
            // As PostgreSQL's float8 operators: an infinity from finite
            // operands is an overflow, a zero from a product or quotient
            // of non-zero (finite divisor) operands an underflow.
            let out_of_range = |what| {
                SqlError::new(
                    SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
                    format!("value out of range: {what}"),
                )
            };
            if r.is_infinite() && x.is_finite() && y.is_finite() {
                return Err(out_of_range("overflow"));
            }
            let underflow = match op {
                Arith::Mul => x != 0.0 && y != 0.0,
                Arith::Div => x != 0.0 && y.is_finite(),
                _ => false,
            };
            if r == 0.0 && underflow {
                return Err(out_of_range("underflow"));
            }
            Ok(V::Float64(r))
        }
        _ => Err(SqlError::new(
            SqlState::UNDEFINED_FUNCTION,
            format!(
                "operator does not exist: {} {op:?} {}",
                a.type_name(),
                b.type_name()
            ),
        )),
    }
}

impl Expr {
    /// Mark in `used` the columns of the row this expression reads.
    /// `false` when it may read columns it cannot name (a scalar
    /// subquery takes the whole row; a column outside `used`): the caller
    /// then decodes every column.
    pub fn mark_columns(&self, used: &mut [bool]) -> bool {
        fn all<'e>(es: impl IntoIterator<Item = &'e Expr>, used: &mut [bool]) -> bool {
            es.into_iter().all(|e| e.mark_columns(used))
        }
        match self {
            Expr::Column(i) => match used.get_mut(*i) {
                Some(u) => {
                    *u = true;
                    true
                }
                None => false,
            },
            Expr::Const(_) | Expr::Param(_) => true,
            Expr::Outer(_) | Expr::Subquery(_) => false,
            Expr::Cmp(_, a, b) | Expr::Arith(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
                a.mark_columns(used) && b.mark_columns(used)
            }
            Expr::Neg(e)
            | Expr::Not(e)
            | Expr::IsNull(e, _)
            | Expr::Regex(e, _, _)
            | Expr::Lookup(e, _)
            | Expr::Cast(e, _) => e.mark_columns(used),
            Expr::InList(e, list, _) => e.mark_columns(used) && all(list, used),
            Expr::Between(e, lo, hi, _) => {
                e.mark_columns(used) && lo.mark_columns(used) && hi.mark_columns(used)
            }
            Expr::Case(op, whens, other) => {
                op.as_deref().is_none_or(|e| e.mark_columns(used))
                    && all(whens.iter().flat_map(|(w, t)| [w, t]), used)
                    && other.as_deref().is_none_or(|e| e.mark_columns(used))
            }
            Expr::Func(_, args) => all(args, used),
        }
    }

    /// Evaluate over `row` (one value per column of the scope).
    pub fn eval(&self, row: &[Value]) -> SqlResult<Value> {
        self.eval_ref(row).map(Cow::into_owned)
    }

    /// [`Expr::eval`] without copying what it need not: a column or a
    /// constant is borrowed (from `row` or the expression), and operands
    /// are compared, measured or tested where they are. Only computed
    /// values are owned.
    pub fn eval_ref<'a>(&'a self, row: &'a [Value]) -> SqlResult<Cow<'a, Value>> {
        Ok(Cow::Owned(match self {
            Expr::Column(i) => {
                return row.get(*i).map(Cow::Borrowed).ok_or_else(|| {
                    SqlError::new(
                        SqlState::INTERNAL_ERROR,
                        format!("column {i} is not in the row"),
                    )
                });
            }
            Expr::Const(v) => return Ok(Cow::Borrowed(v)),
            Expr::Cmp(op, a, b) => {
                let (a, b) = (a.eval_ref(row)?, b.eval_ref(row)?);
                if a.is_null() || b.is_null() {
                    Value::Null
                } else {
                    Value::Bool(op.holds(compare(&a, &b)?))
                }
            }
            Expr::Arith(op, a, b) => {
                let (a, b) = (a.eval_ref(row)?, b.eval_ref(row)?);
                if a.is_null() || b.is_null() {
                    Value::Null
                } else {
                    arith(*op, &a, &b)?
                }
            }
            Expr::Neg(a) => negate(&*a.eval_ref(row)?)?,
            Expr::And(a, b) => {
                let (a, b) = (a.truth(row)?, b.truth(row)?);
                bool_value(match (a, b) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                })
            }
            Expr::Or(a, b) => {
                let (a, b) = (a.truth(row)?, b.truth(row)?);
                bool_value(match (a, b) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                })
            }
            Expr::Not(a) => bool_value(a.truth(row)?.map(|b| !b)),
            Expr::IsNull(a, negated) => Value::Bool(a.eval_ref(row)?.is_null() != *negated),
            Expr::InList(a, list, negated) => {
                let a = a.eval_ref(row)?;
                if a.is_null() {
                    return Ok(Cow::Owned(Value::Null));
                }
                let mut saw_null = false;
                for x in list {
                    let x = x.eval_ref(row)?;
                    if x.is_null() {
                        saw_null = true;
                    } else if compare(&a, &x)? == Ordering::Equal {
                        return Ok(Cow::Owned(Value::Bool(!negated)));
                    }
                }
                if saw_null {
                    Value::Null
                } else {
                    Value::Bool(*negated)
                }
            }
            Expr::Param(n) => {
                return Err(SqlError::new(
                    SqlState::INTERNAL_ERROR,
                    format!("parameter ${} has no value", n + 1),
                ));
            }
            Expr::Cast(a, ty) => types::coerce(a.eval(row)?, *ty)?,
            Expr::Outer(i) => {
                return Err(SqlError::new(
                    SqlState::INTERNAL_ERROR,
                    format!("outer column {i} was not replaced by its value"),
                ));
            }
            Expr::Case(operand, whens, otherwise) => {
                let op = operand.as_ref().map(|o| o.eval_ref(row)).transpose()?;
                for (cond, result) in whens {
                    let hit = match &op {
                        Some(v) => {
                            let c = cond.eval_ref(row)?;
                            !v.is_null() && !c.is_null() && compare(v, &c)? == Ordering::Equal
                        }
                        None => cond.truth(row)? == Some(true),
                    };
                    if hit {
                        return result.eval_ref(row);
                    }
                }
                match otherwise {
                    Some(e) => return e.eval_ref(row),
                    None => Value::Null,
                }
            }
            Expr::Regex(a, re, negated) => match &*a.eval_ref(row)? {
                Value::Null => Value::Null,
                Value::Text(s) => Value::Bool(re.0.is_match(s) != *negated),
                other => {
                    return Err(SqlError::new(
                        SqlState::UNDEFINED_FUNCTION,
                        format!("operator does not exist: {} ~ text", other.type_name()),
                    ));
                }
            },
            Expr::Lookup(a, map) => {
                let k = match &*a.eval_ref(row)? {
                    Value::Null => return Ok(Cow::Owned(Value::Null)),
                    Value::Int32(x) => i64::from(*x),
                    Value::Int64(x) => *x,
                    other => types::to_text(other)
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(-1),
                };
                map.0
                    .get(&k)
                    .cloned()
                    .unwrap_or_else(|| Value::Text(k.to_string()))
            }
            Expr::Subquery(f) => (f.0)(row)?,
            Expr::Func(name, args) => {
                let vals = args
                    .iter()
                    .map(|a| a.eval_ref(row))
                    .collect::<SqlResult<Vec<_>>>()?;
                scalar(name, vals)?
            }
            Expr::Between(a, lo, hi, negated) => {
                // a >= lo AND a <= hi, three-valued.
                let (a, lo, hi) = (a.eval_ref(row)?, lo.eval_ref(row)?, hi.eval_ref(row)?);
                let cmp = |x: &Value, y: &Value, op: Cmp| -> SqlResult<Option<bool>> {
                    if x.is_null() || y.is_null() {
                        Ok(None)
                    } else {
                        Ok(Some(op.holds(compare(x, y)?)))
                    }
                };
                let both = match (cmp(&a, &lo, Cmp::Ge)?, cmp(&a, &hi, Cmp::Le)?) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                };
                bool_value(if *negated { both.map(|b| !b) } else { both })
            }
        }))
    }

    /// This condition's truth over `row`: `None` for NULL, an error for
    /// a value that is not a boolean.
    fn truth(&self, row: &[Value]) -> SqlResult<Option<bool>> {
        truth(&*self.eval_ref(row)?)
    }

    /// This expression with `outer`'s values in place of
    /// [`Expr::Outer`] references.
    pub fn with_outer(&self, outer: &[Value]) -> Expr {
        self.map_leaves(&|e| match e {
            Expr::Outer(i) => Some(Expr::Const(outer.get(*i).cloned().unwrap_or(Value::Null))),
            _ => None,
        })
    }

    /// This expression with parameter values in place of
    /// [`Expr::Param`] leaves (a parameter with no value stays), a cast
    /// or negation of a parameter folded as [`bind`] folds one of a
    /// constant: its error (`'abc'::int`) is the statement's, and the
    /// result is a constant an access path can use.
    pub fn with_params(&self, params: &[Value]) -> SqlResult<Expr> {
        let error = std::cell::Cell::new(None);
        let folded = |r: SqlResult<Value>| match r {
            Ok(v) => Some(Expr::Const(v)),
            Err(e) => {
                error.set(Some(e));
                Some(Expr::Const(Value::Null))
            }
        };
        let out = self.map_leaves(&|e| match e {
            Expr::Param(n) => params.get(*n).cloned().map(Expr::Const),
            Expr::Cast(x, ty) => match x.as_ref() {
                Expr::Param(n) => params
                    .get(*n)
                    .and_then(|v| folded(types::coerce(v.clone(), *ty))),
                _ => None,
            },
            Expr::Neg(x) => match x.as_ref() {
                Expr::Param(n) => params.get(*n).and_then(|v| folded(negate(v))),
                _ => None,
            },
            _ => None,
        });
        match error.take() {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Whether any node of this expression satisfies `f`.
    pub fn any(&self, f: &dyn Fn(&Expr) -> bool) -> bool {
        let found = std::cell::Cell::new(false);
        self.map_leaves(&|e| {
            if f(e) {
                found.set(true);
            }
            None
        });
        found.get()
    }

    /// This expression with each leaf (or opaque node) that `leaf` maps
    /// replaced by what it returns.
    fn map_leaves(&self, leaf: &dyn Fn(&Expr) -> Option<Expr>) -> Expr {
        if let Some(e) = leaf(self) {
            return e;
        }
        let b = |e: &Expr| Box::new(e.map_leaves(leaf));
        match self {
            Expr::Outer(_)
            | Expr::Column(_)
            | Expr::Const(_)
            | Expr::Param(_)
            | Expr::Subquery(_) => self.clone(),
            Expr::Cmp(op, x, y) => Expr::Cmp(*op, b(x), b(y)),
            Expr::Arith(op, x, y) => Expr::Arith(*op, b(x), b(y)),
            Expr::Neg(x) => Expr::Neg(b(x)),
            Expr::And(x, y) => Expr::And(b(x), b(y)),
            Expr::Or(x, y) => Expr::Or(b(x), b(y)),
            Expr::Not(x) => Expr::Not(b(x)),
            Expr::IsNull(x, n) => Expr::IsNull(b(x), *n),
            Expr::InList(x, l, n) => {
                Expr::InList(b(x), l.iter().map(|e| e.map_leaves(leaf)).collect(), *n)
            }
            Expr::Between(x, lo, hi, n) => Expr::Between(b(x), b(lo), b(hi), *n),
            Expr::Cast(x, t) => Expr::Cast(b(x), *t),
            Expr::Func(name, args) => Expr::Func(
                name.clone(),
                args.iter().map(|e| e.map_leaves(leaf)).collect(),
            ),
            Expr::Case(op, whens, other) => Expr::Case(
                op.as_deref().map(b),
                whens
                    .iter()
                    .map(|(c, r)| (c.map_leaves(leaf), r.map_leaves(leaf)))
                    .collect(),
                other.as_deref().map(b),
            ),
            Expr::Regex(x, re, n) => Expr::Regex(b(x), re.clone(), *n),
            Expr::Lookup(x, m) => Expr::Lookup(b(x), m.clone()),
        }
    }

    /// Whether the row satisfies this condition (NULL does not).
    pub fn selects(&self, row: &[Value]) -> SqlResult<bool> {
        Ok(self.truth(row)? == Some(true))
    }

    /// The conjuncts of an `AND` tree.
    pub fn conjuncts(&self) -> Vec<&Expr> {
        match self {
            Expr::And(a, b) => {
                let mut v = a.conjuncts();
                v.extend(b.conjuncts());
                v
            }
            e => vec![e],
        }
    }
}

/// `-v`: an integer with no negation (the smallest of its type) is out
/// of range, as in PostgreSQL.
fn negate(v: &Value) -> SqlResult<Value> {
    Ok(match v {
        Value::Null => Value::Null,
        Value::Int32(x) => Value::Int32(x.checked_neg().ok_or_else(overflow)?),
        Value::Int64(x) => Value::Int64(x.checked_neg().ok_or_else(overflow)?),
        Value::Float64(x) => Value::Float64(-x),
        other => {
            return Err(SqlError::new(
                SqlState::UNDEFINED_FUNCTION,
                format!("operator does not exist: - {}", other.type_name()),
            ));
        }
    })
}
