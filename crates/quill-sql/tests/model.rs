//! SQL results against a model: random single-table histories (inserts,
//! updates, deletes, duplicate keys) and random queries (WHERE trees with
//! comparisons, BETWEEN, IN, IS NULL, AND/OR/NOT over nullable columns;
//! ORDER BY with LIMIT/OFFSET; aggregates; GROUP BY) run through a
//! `Session` and through a `BTreeMap` of rows with SQL's three-valued
//! logic. Every answer must match. The table has a primary key and two
//! secondary indexes (one on two columns), so equality and range
//! predicates take index paths as well as full scans. Every query also
//! runs as a prepared statement with its literals as parameters, twice
//! (the generic plan is made, then reused; the statements live across
//! cases, so a plan made for an earlier case's table must be replaced),
//! and every other insert, update and delete runs prepared.
//! Failures print proptest's seed and the statement, so a run replays.

mod common;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use quill::catalog::{ColumnType, Value};
use quill::{Db, Options};
use quill_sql::{Prepared, Session, SqlState};

/// A row of `m (k int PRIMARY KEY, a int, b varchar(40), c bigint)`.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    a: Option<i64>,
    b: Option<String>,
    c: Option<i64>,
}

#[derive(Clone, Copy, Debug)]
enum Col {
    K,
    A,
    B,
    C,
}

/// A scalar in the model: integers and text, or NULL.
#[derive(Clone, Debug, PartialEq, PartialOrd)]
enum V {
    Null,
    I(i64),
    T(String),
}

impl Col {
    fn name(self) -> &'static str {
        match self {
            Col::K => "k",
            Col::A => "a",
            Col::B => "b",
            Col::C => "c",
        }
    }

    fn get(self, k: i64, r: &Row) -> V {
        match self {
            Col::K => V::I(k),
            Col::A => r.a.map_or(V::Null, V::I),
            Col::B => r.b.clone().map_or(V::Null, V::T),
            Col::C => r.c.map_or(V::Null, V::I),
        }
    }
}

fn lit(v: &V) -> String {
    match v {
        V::Null => "NULL".into(),
        V::I(i) => i.to_string(),
        V::T(s) => format!("'{s}'"),
    }
}

#[derive(Clone, Debug)]
enum Pred {
    Cmp(Col, &'static str, V),
    Between(Col, V, V),
    In(Col, Vec<V>),
    IsNull(Col, bool),
    And(Box<Pred>, Box<Pred>),
    Or(Box<Pred>, Box<Pred>),
    Not(Box<Pred>),
}

impl Pred {
    fn sql(&self) -> String {
        self.sql_with(&mut |v| lit(v))
    }

    /// The SQL with each value written by `value` (a literal, or a
    /// parameter it records).
    fn sql_with(&self, value: &mut dyn FnMut(&V) -> String) -> String {
        match self {
            Pred::Cmp(c, op, v) => format!("{} {op} {}", c.name(), value(v)),
            Pred::Between(c, lo, hi) => {
                let lo = value(lo);
                format!("{} BETWEEN {lo} AND {}", c.name(), value(hi))
            }
            Pred::In(c, vs) => format!(
                "{} IN ({})",
                c.name(),
                vs.iter().map(&mut *value).collect::<Vec<_>>().join(", ")
            ),
            Pred::IsNull(c, true) => format!("{} IS NULL", c.name()),
            Pred::IsNull(c, false) => format!("{} IS NOT NULL", c.name()),
            Pred::And(x, y) => {
                let x = x.sql_with(value);
                format!("({x} AND {})", y.sql_with(value))
            }
            Pred::Or(x, y) => {
                let x = x.sql_with(value);
                format!("({x} OR {})", y.sql_with(value))
            }
            Pred::Not(x) => format!("NOT ({})", x.sql_with(value)),
        }
    }

    /// Three-valued: `None` is unknown.
    fn eval(&self, k: i64, r: &Row) -> Option<bool> {
        let cmp = |a: &V, b: &V| -> Option<std::cmp::Ordering> {
            match (a, b) {
                (V::Null, _) | (_, V::Null) => None,
                _ => a.partial_cmp(b),
            }
        };
        match self {
            Pred::Cmp(c, op, v) => {
                let o = cmp(&c.get(k, r), v)?;
                Some(match *op {
                    "=" => o.is_eq(),
                    "<>" => o.is_ne(),
                    "<" => o.is_lt(),
                    "<=" => o.is_le(),
                    ">" => o.is_gt(),
                    ">=" => o.is_ge(),
                    _ => unreachable!(),
                })
            }
            Pred::Between(c, lo, hi) => {
                let x = c.get(k, r);
                let ge = cmp(&x, lo).map(|o| o.is_ge());
                let le = cmp(&x, hi).map(|o| o.is_le());
                and(ge, le)
            }
            Pred::In(c, vs) => {
                let x = c.get(k, r);
                let mut out = Some(false);
                for v in vs {
                    out = or(out, cmp(&x, v).map(|o| o.is_eq()));
                }
                out
            }
            Pred::IsNull(c, is) => Some((c.get(k, r) == V::Null) == *is),
            Pred::And(x, y) => and(x.eval(k, r), y.eval(k, r)),
            Pred::Or(x, y) => or(x.eval(k, r), y.eval(k, r)),
            Pred::Not(x) => x.eval(k, r).map(|b| !b),
        }
    }
}

fn and(x: Option<bool>, y: Option<bool>) -> Option<bool> {
    match (x, y) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn or(x: Option<bool>, y: Option<bool>) -> Option<bool> {
    match (x, y) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

fn int_value() -> impl Strategy<Value = V> + Clone {
    prop_oneof![8 => (-3i64..12).prop_map(V::I), 1 => Just(V::Null)]
}

fn text_value() -> impl Strategy<Value = V> + Clone {
    prop_oneof![
        8 => prop::sample::select(&["", "x", "xy", "y", "z"][..]).prop_map(|s| V::T(s.into())),
        1 => Just(V::Null),
    ]
}

fn col_and_value() -> impl Strategy<Value = (Col, V)> + Clone {
    prop_oneof![
        (Just(Col::K), (-2i64..40).prop_map(V::I)),
        (Just(Col::A), int_value()),
        (Just(Col::B), text_value()),
        (Just(Col::C), int_value()),
    ]
}

fn leaf() -> impl Strategy<Value = Pred> + Clone {
    let ops = prop::sample::select(&["=", "=", "<>", "<", "<=", ">", ">="][..]);
    prop_oneof![
        4 => (col_and_value(), ops).prop_map(|((c, v), op)| Pred::Cmp(c, op, v)),
        1 => (col_and_value(), col_and_value()).prop_filter_map("same kind", |((c, lo), (c2, hi))| {
            let same = matches!((c, c2), (Col::B, Col::B)) || !matches!(c, Col::B) && !matches!(c2, Col::B);
            same.then_some(Pred::Between(c, lo, hi))
        }),
        1 => (prop_oneof![Just(Col::K), Just(Col::A), Just(Col::C)], prop::collection::vec(int_value(), 1..4))
            .prop_map(|(c, vs)| Pred::In(c, vs)),
        1 => prop::collection::vec(text_value(), 1..3).prop_map(|vs| Pred::In(Col::B, vs)),
        1 => (prop_oneof![Just(Col::A), Just(Col::B), Just(Col::C)], any::<bool>())
            .prop_map(|(c, is)| Pred::IsNull(c, is)),
    ]
}

fn pred() -> impl Strategy<Value = Pred> + Clone {
    leaf().prop_recursive(3, 8, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(x, y)| Pred::And(Box::new(x), Box::new(y))),
            (inner.clone(), inner.clone()).prop_map(|(x, y)| Pred::Or(Box::new(x), Box::new(y))),
            inner.prop_map(|x| Pred::Not(Box::new(x))),
        ]
    })
}

#[derive(Clone, Debug)]
enum Op {
    Insert(i64, Row),
    Update(i64, Option<Pred>),
    Delete(Pred),
    Select(Option<Pred>, Option<usize>, usize),
    Aggregate(Option<Pred>),
    Group(Option<Pred>),
}

fn row() -> impl Strategy<Value = Row> {
    (int_value(), text_value(), int_value()).prop_map(|(a, b, c)| Row {
        a: match a {
            V::I(i) => Some(i),
            _ => None,
        },
        b: match b {
            V::T(s) => Some(s),
            _ => None,
        },
        c: match c {
            V::I(i) => Some(i),
            _ => None,
        },
    })
}

fn op() -> impl Strategy<Value = Op> {
    let opt_pred = prop::option::weighted(0.85, pred());
    prop_oneof![
        6 => (0i64..40, row()).prop_map(|(k, r)| Op::Insert(k, r)),
        1 => (-1i64..3, opt_pred.clone()).prop_map(|(d, p)| Op::Update(d, p)),
        1 => pred().prop_map(Op::Delete),
        5 => (opt_pred.clone(), prop::option::of(0usize..6), 0usize..3)
            .prop_map(|(p, l, o)| Op::Select(p, l, o)),
        2 => opt_pred.clone().prop_map(Op::Aggregate),
        2 => opt_pred.prop_map(Op::Group),
    ]
}

fn where_sql(p: &Option<Pred>) -> String {
    p.as_ref()
        .map(|p| format!(" WHERE {}", p.sql()))
        .unwrap_or_default()
}

/// The WHERE clause with `$n` for each value, and the values.
fn where_params(p: &Option<Pred>) -> (String, Vec<V>) {
    let mut values = Vec::new();
    let sql = p
        .as_ref()
        .map(|p| {
            let w = p.sql_with(&mut |v| {
                values.push(v.clone());
                format!("${}", values.len())
            });
            format!(" WHERE {w}")
        })
        .unwrap_or_default();
    (sql, values)
}

/// Run `template` (a query with `$n` parameters) prepared, with
/// `values`, twice: the first execution makes the generic plan, the
/// second binds to it. Statements are kept by text across cases.
fn run_prepared(s: &mut Session, template: &str, values: &[V]) -> Result<Vec<Vec<V>>, SqlState> {
    run_prepared_n(s, template, values, 2)
}

/// [`run_prepared`] executing `times` times (once for a write).
fn run_prepared_n(
    s: &mut Session,
    template: &str,
    values: &[V],
    times: usize,
) -> Result<Vec<Vec<V>>, SqlState> {
    // Per test thread, as the database they were prepared on.
    thread_local! {
        static PREPARED: RefCell<std::collections::HashMap<String, Prepared>> = RefCell::default();
    }
    let p = PREPARED.with(|cell| {
        let mut m = cell.borrow_mut();
        match m.get(template) {
            Some(p) => Ok(p.clone()),
            None => {
                let p = s.prepare(template, &[]).map_err(|e| e.state)?;
                m.insert(template.to_string(), p.clone());
                Ok(p)
            }
        }
    })?;
    let params: Vec<Value> = values
        .iter()
        .zip(p.param_types())
        .map(|(v, ty)| match (v, ty) {
            (V::Null, _) => Value::Null,
            (V::I(i), ColumnType::Int32) => Value::Int32(i32::try_from(*i).expect("int")),
            (V::I(i), ColumnType::Int64) => Value::Int64(*i),
            (V::I(i), _) => Value::Text(i.to_string()),
            (V::T(t), _) => Value::Text(t.clone()),
        })
        .collect();
    let mut last = None;
    for _ in 0..times {
        let out = s.execute_prepared(&p, &params).map_err(|e| e.state)?;
        let rows: Vec<Vec<V>> = out
            .rows
            .iter()
            .map(|r| r.iter().map(cell).collect())
            .collect();
        if let Some(prev) = &last {
            assert_eq!(prev, &rows, "{template}: the second execution differs");
        }
        last = Some(rows);
    }
    assert!(p.has_generic_plan(), "{template}: no generic plan");
    Ok(last.unwrap_or_default())
}

fn matches(p: &Option<Pred>, k: i64, r: &Row) -> bool {
    p.as_ref().is_none_or(|p| p.eval(k, r) == Some(true))
}

/// A result cell in the model's terms.
fn cell(v: &Value) -> V {
    match v {
        Value::Null => V::Null,
        Value::Int32(i) => V::I(*i as i64),
        Value::Int64(i) => V::I(*i),
        Value::Text(s) => V::T(s.clone()),
        other => panic!("unexpected value {other:?}"),
    }
}

fn run(s: &mut Session, sql: &str) -> Result<Vec<Vec<V>>, SqlState> {
    let mut out = s.execute(sql);
    assert_eq!(out.len(), 1, "{sql}");
    match out.remove(0) {
        Ok(o) => Ok(o
            .rows
            .iter()
            .map(|r| r.iter().map(cell).collect())
            .collect()),
        Err(e) => Err(e.state),
    }
}

fn check(ops: Vec<Op>) {
    // One database for every case of a test (opening one costs most of a
    // case); each case starts from a new, empty table. Per test thread, so
    // the directory is removed when the test ends (a `static` is never
    // dropped, and left a database behind in /tmp on every run).
    thread_local! {
        static SESSION: RefCell<Option<(Session, tempfile::TempDir)>> = const { RefCell::new(None) };
    }
    SESSION.with(|cell| {
        let mut g = cell.borrow_mut();
        let (s, _) = g.get_or_insert_with(|| {
            let dir = tempfile::tempdir().unwrap();
            let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
            (Session::new(db), dir)
        });
        check_in(s, ops)
    })
}

fn check_in(s: &mut Session, ops: Vec<Op>) {
    common::setup(
        s,
        "DROP TABLE IF EXISTS m; CREATE TABLE m (k int PRIMARY KEY, a int, b varchar(40), c bigint); \
         CREATE INDEX m_a ON m (a); CREATE INDEX m_bc ON m (b, c)",
    );
    let mut model: BTreeMap<i64, Row> = BTreeMap::new();
    // Writes alternate between literal SQL and prepared statements.
    let mut prepared_write = false;
    for op in ops {
        match op {
            Op::Insert(k, r) => {
                prepared_write = !prepared_write;
                let values = [Col::K, Col::A, Col::B, Col::C].map(|c| c.get(k, &r));
                let (sql, got) = if prepared_write {
                    // Columns named in another order than the table's.
                    let sql = "INSERT INTO m (b, k, c, a) VALUES ($3, $1, $4, $2)".to_string();
                    let got = run_prepared_n(s, &sql, &values, 1);
                    (sql, got)
                } else {
                    let sql = format!(
                        "INSERT INTO m VALUES ({})",
                        values.iter().map(lit).collect::<Vec<_>>().join(", ")
                    );
                    let got = run(s, &sql);
                    (sql, got)
                };
                match model.entry(k) {
                    std::collections::btree_map::Entry::Occupied(_) => {
                        assert_eq!(got, Err(SqlState::UNIQUE_VIOLATION), "{sql}");
                    }
                    std::collections::btree_map::Entry::Vacant(e) => {
                        assert_eq!(got, Ok(vec![]), "{sql}");
                        e.insert(r);
                    }
                }
            }
            Op::Update(d, p) => {
                prepared_write = !prepared_write;
                if prepared_write {
                    let (w, mut values) = where_params(&p);
                    values.push(V::I(d));
                    let n = values.len();
                    let template = format!("UPDATE m SET a = a + ${n}, c = c - 1{w}");
                    run_prepared_n(s, &template, &values, 1)
                        .unwrap_or_else(|e| panic!("{template} {values:?}: {e:?}"));
                } else {
                    let sql = format!("UPDATE m SET a = a + {d}, c = c - 1{}", where_sql(&p));
                    run(s, &sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
                }
                for (k, r) in model.iter_mut() {
                    if matches(&p, *k, r) {
                        r.a = r.a.map(|a| a + d);
                        r.c = r.c.map(|c| c - 1);
                    }
                }
            }
            Op::Delete(p) => {
                prepared_write = !prepared_write;
                if prepared_write {
                    let (w, values) = where_params(&Some(p.clone()));
                    let template = format!("DELETE FROM m{w}");
                    run_prepared_n(s, &template, &values, 1)
                        .unwrap_or_else(|e| panic!("{template} {values:?}: {e:?}"));
                } else {
                    let sql = format!("DELETE FROM m WHERE {}", p.sql());
                    run(s, &sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
                }
                model.retain(|k, r| p.eval(*k, r) != Some(true));
            }
            Op::Select(p, limit, offset) => {
                let mut sql = format!("SELECT k, a, b, c FROM m{} ORDER BY k", where_sql(&p));
                if let Some(l) = limit {
                    sql.push_str(&format!(" LIMIT {l}"));
                }
                if offset > 0 {
                    sql.push_str(&format!(" OFFSET {offset}"));
                }
                let want: Vec<Vec<V>> = model
                    .iter()
                    .filter(|(k, r)| matches(&p, **k, r))
                    .skip(offset)
                    .take(limit.unwrap_or(usize::MAX))
                    .map(|(k, r)| {
                        [Col::K, Col::A, Col::B, Col::C]
                            .map(|c| c.get(*k, r))
                            .to_vec()
                    })
                    .collect();
                assert_eq!(run(s, &sql), Ok(want.clone()), "{sql}");
                let (w, values) = where_params(&p);
                let mut template = format!("SELECT k, a, b, c FROM m{w} ORDER BY k");
                if let Some(l) = limit {
                    template.push_str(&format!(" LIMIT {l}"));
                }
                if offset > 0 {
                    template.push_str(&format!(" OFFSET {offset}"));
                }
                assert_eq!(
                    run_prepared(s, &template, &values),
                    Ok(want),
                    "{template} {values:?}"
                );
            }
            Op::Aggregate(p) => {
                let sql = format!(
                    "SELECT count(*), count(a), sum(a), min(c), max(c), min(b), max(b) FROM m{}",
                    where_sql(&p)
                );
                let rows: Vec<(i64, &Row)> = model
                    .iter()
                    .filter(|(k, r)| matches(&p, **k, r))
                    .map(|(k, r)| (*k, r))
                    .collect();
                let some = |vals: Vec<V>, f: fn(V, V) -> V| {
                    vals.into_iter()
                        .filter(|v| *v != V::Null)
                        .reduce(f)
                        .unwrap_or(V::Null)
                };
                let col = |c: Col| rows.iter().map(|(k, r)| c.get(*k, r)).collect::<Vec<_>>();
                let min = |x: V, y: V| if y < x { y } else { x };
                let max = |x: V, y: V| if y > x { y } else { x };
                let sum = |x: V, y: V| match (x, y) {
                    (V::I(x), V::I(y)) => V::I(x + y),
                    _ => unreachable!(),
                };
                let want = vec![vec![
                    V::I(rows.len() as i64),
                    V::I(col(Col::A).iter().filter(|v| **v != V::Null).count() as i64),
                    some(col(Col::A), sum),
                    some(col(Col::C), min),
                    some(col(Col::C), max),
                    some(col(Col::B), min),
                    some(col(Col::B), max),
                ]];
                assert_eq!(run(s, &sql), Ok(want.clone()), "{sql}");
                let (w, values) = where_params(&p);
                let template = format!(
                    "SELECT count(*), count(a), sum(a), min(c), max(c), min(b), max(b) FROM m{w}"
                );
                assert_eq!(
                    run_prepared(s, &template, &values),
                    Ok(want),
                    "{template} {values:?}"
                );
            }
            Op::Group(p) => {
                let sql = format!(
                    "SELECT a, count(*), max(k) FROM m{} GROUP BY a ORDER BY a",
                    where_sql(&p)
                );
                let mut groups: BTreeMap<Option<i64>, (i64, i64)> = BTreeMap::new();
                for (k, r) in model.iter().filter(|(k, r)| matches(&p, **k, r)) {
                    let g = groups.entry(r.a).or_insert((0, i64::MIN));
                    g.0 += 1;
                    g.1 = g.1.max(*k);
                }
                // ORDER BY puts NULL last, as PostgreSQL does ascending.
                let mut want: Vec<Vec<V>> = groups
                    .iter()
                    .filter(|(a, _)| a.is_some())
                    .map(|(a, (n, m))| vec![V::I(a.unwrap()), V::I(*n), V::I(*m)])
                    .collect();
                if let Some((n, m)) = groups.get(&None) {
                    want.push(vec![V::Null, V::I(*n), V::I(*m)]);
                }
                assert_eq!(run(s, &sql), Ok(want.clone()), "{sql}");
                let (w, values) = where_params(&p);
                let template =
                    format!("SELECT a, count(*), max(k) FROM m{w} GROUP BY a ORDER BY a");
                assert_eq!(
                    run_prepared(s, &template, &values),
                    Ok(want),
                    "{template} {values:?}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn single_table_sql_matches_a_model(ops in prop::collection::vec(op(), 1..60)) {
        check(ops);
    }
}
