//! Scalar expressions bound to one table's columns, and their evaluation
//! over a row with SQL's three-valued logic (NULL is unknown: a
//! comparison with NULL is NULL, `NULL AND false` is false, a WHERE that
//! is NULL does not select the row).

use std::cmp::Ordering;

use quill::catalog::Value;
use sqlparser::ast::{self, BinaryOperator, UnaryOperator};

use crate::error::{SqlError, SqlResult, SqlState};
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
}

/// What names resolve to while binding: the columns of one table.
pub trait Scope {
    /// The position of column `name`, if there is one.
    fn column(&self, name: &str) -> Option<usize>;
}

/// A scope with no columns (constant expressions).
pub struct NoColumns;

impl Scope for NoColumns {
    fn column(&self, _: &str) -> Option<usize> {
        None
    }
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

/// A literal's value: integers that fit are `Int64`, other numbers
/// `Float64`, strings `Text`.
pub fn literal(v: &ast::Value) -> SqlResult<Value> {
    Ok(match v {
        ast::Value::Number(s, _) => match s.parse::<i64>() {
            Ok(i) => Value::Int64(i),
            Err(_) => Value::Float64(s.parse().map_err(|_| {
                SqlError::new(
                    SqlState::INVALID_TEXT_REPRESENTATION,
                    format!("invalid number {s}"),
                )
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

fn column_ref(scope: &dyn Scope, name: &str) -> SqlResult<Expr> {
    scope.column(name).map(Expr::Column).ok_or_else(|| {
        SqlError::new(
            SqlState::UNDEFINED_COLUMN,
            format!("column \"{name}\" does not exist"),
        )
    })
}

/// Bind `e` to the columns of `scope`.
pub fn bind(e: &ast::Expr, scope: &dyn Scope) -> SqlResult<Expr> {
    use ast::Expr as E;
    let b = |x: &ast::Expr| bind(x, scope).map(Box::new);
    Ok(match e {
        E::Identifier(i) => column_ref(scope, &ident_name(i))?,
        E::CompoundIdentifier(parts) => match parts.last() {
            Some(i) => column_ref(scope, &ident_name(i))?,
            None => return Err(SqlError::new(SqlState::SYNTAX_ERROR, "empty name")),
        },
        E::Value(v) => Expr::Const(literal(&v.value)?),
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
                BinaryOperator::Or => Expr::Or(l, r),
                other => return Err(SqlError::unsupported(format!("the operator {other}"))),
            }
        }
        E::UnaryOp { op, expr } => match op {
            UnaryOperator::Not => Expr::Not(b(expr)?),
            UnaryOperator::Minus => match bind(expr, scope)? {
                Expr::Const(Value::Int64(i)) => Expr::Const(Value::Int64(-i)),
                Expr::Const(Value::Float64(f)) => Expr::Const(Value::Float64(-f)),
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
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => x.total_cmp(&y),
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
            Ok(V::Float64(match op {
                Arith::Add => x + y,
                Arith::Sub => x - y,
                Arith::Mul => x * y,
                Arith::Div => x / y,
                Arith::Mod => x % y,
            }))
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
    /// Evaluate over `row` (one value per column of the scope).
    pub fn eval(&self, row: &[Value]) -> SqlResult<Value> {
        Ok(match self {
            Expr::Column(i) => row.get(*i).cloned().ok_or_else(|| {
                SqlError::new(
                    SqlState::INTERNAL_ERROR,
                    format!("column {i} is not in the row"),
                )
            })?,
            Expr::Const(v) => v.clone(),
            Expr::Cmp(op, a, b) => {
                let (a, b) = (a.eval(row)?, b.eval(row)?);
                if a.is_null() || b.is_null() {
                    Value::Null
                } else {
                    Value::Bool(op.holds(compare(&a, &b)?))
                }
            }
            Expr::Arith(op, a, b) => {
                let (a, b) = (a.eval(row)?, b.eval(row)?);
                if a.is_null() || b.is_null() {
                    Value::Null
                } else {
                    arith(*op, &a, &b)?
                }
            }
            Expr::Neg(a) => match a.eval(row)? {
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
            },
            Expr::And(a, b) => {
                let (a, b) = (truth(&a.eval(row)?)?, truth(&b.eval(row)?)?);
                bool_value(match (a, b) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                })
            }
            Expr::Or(a, b) => {
                let (a, b) = (truth(&a.eval(row)?)?, truth(&b.eval(row)?)?);
                bool_value(match (a, b) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                })
            }
            Expr::Not(a) => bool_value(truth(&a.eval(row)?)?.map(|b| !b)),
            Expr::IsNull(a, negated) => Value::Bool(a.eval(row)?.is_null() != *negated),
            Expr::InList(a, list, negated) => {
                let a = a.eval(row)?;
                if a.is_null() {
                    return Ok(Value::Null);
                }
                let mut saw_null = false;
                for x in list {
                    let x = x.eval(row)?;
                    if x.is_null() {
                        saw_null = true;
                    } else if compare(&a, &x)? == Ordering::Equal {
                        return Ok(Value::Bool(!negated));
                    }
                }
                if saw_null {
                    Value::Null
                } else {
                    Value::Bool(*negated)
                }
            }
            Expr::Between(a, lo, hi, negated) => {
                let ge = Expr::Cmp(Cmp::Ge, a.clone(), lo.clone());
                let le = Expr::Cmp(Cmp::Le, a.clone(), hi.clone());
                let both = Expr::And(Box::new(ge), Box::new(le));
                let v = both.eval(row)?;
                if *negated {
                    bool_value(truth(&v)?.map(|b| !b))
                } else {
                    v
                }
            }
        })
    }

    /// Whether the row satisfies this condition (NULL does not).
    pub fn selects(&self, row: &[Value]) -> SqlResult<bool> {
        Ok(truth(&self.eval(row)?)? == Some(true))
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
