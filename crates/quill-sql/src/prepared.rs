//! Prepared statements: SQL text parsed once, with its parameter types
//! (given by the client, or inferred from where each `$n` stands) and
//! the shape of its result, executed many times with parameter values.
//! This is what the extended query protocol's Parse/Describe/Bind/Execute
//! and SQL-level PREPARE/EXECUTE use.

use std::sync::{Arc, Mutex, PoisonError};

use quill::catalog::{ColumnType, Value};

use crate::dml::GenericWrite;
use crate::error::SqlResult;
use crate::expr::Ctx;
use crate::select::{Generic, Plan};
use crate::session::{ColumnDesc, Stmt};

/// A statement ready to run with parameters.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub(crate) sql: String,
    /// `None` for the empty statement.
    pub(crate) stmt: Option<Stmt>,
    pub(crate) param_types: Vec<ColumnType>,
    pub(crate) columns: Option<Vec<ColumnDesc>>,
    pub(crate) tag: &'static str,
    /// A query's generic plan, made at its first execution (shared by
    /// the copies of this statement).
    pub(crate) generic: Arc<GenericCache>,
}

/// The generic plan of a prepared query, once made.
#[derive(Debug, Default)]
pub(crate) struct GenericCache(Mutex<GenericSlot>);

/// Where a prepared query's generic plan stands.
#[derive(Debug, Default)]
pub(crate) enum GenericSlot {
    /// Not tried yet, or the table's schema changed since.
    #[default]
    Untried,
    /// The statement is not one a generic plan is kept for.
    No,
    /// A query's plan.
    Query(Arc<Generic>),
    /// An INSERT's, UPDATE's or DELETE's plan.
    Write(Arc<GenericWrite>),
}

impl GenericCache {
    /// The plan of this query for `params`: its generic plan bound to
    /// them, made first if there is none or the table's schema changed
    /// (`None`: the query is planned at each execution instead). `ctx`
    /// carries no parameter values.
    pub(crate) fn generic_plan(
        &self,
        db: &quill::Db,
        q: &sqlparser::ast::Query,
        params: &[Value],
        ctx: Ctx<'_>,
    ) -> Option<SqlResult<Plan>> {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match &*slot {
            GenericSlot::Query(g) => {
                if let Some(plan) = g.bind(params) {
                    return Some(plan);
                }
            }
            GenericSlot::No => return None,
            GenericSlot::Untried | GenericSlot::Write(_) => {}
        }
        // First use, or the table's schema changed: plan again.
        match Generic::new(db, q, ctx) {
            Some(g) => {
                let plan = g.bind(params);
                *slot = GenericSlot::Query(Arc::new(g));
                plan
            }
            None => {
                *slot = GenericSlot::No;
                None
            }
        }
    }

    /// The generic plan of an INSERT, UPDATE or DELETE, made first if there is
    /// none (`None`: the statement is planned at each execution).
    /// `stale` says the one kept last time no longer matches the table's
    /// schema. `ctx` carries no parameter values.
    pub(crate) fn write_plan(
        &self,
        db: &quill::Db,
        stmt: &sqlparser::ast::Statement,
        ctx: Ctx<'_>,
        stale: bool,
    ) -> Option<Arc<GenericWrite>> {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match &*slot {
            GenericSlot::Write(g) if !stale => return Some(Arc::clone(g)),
            GenericSlot::No => return None,
            _ => {}
        }
        match GenericWrite::new(db, stmt, ctx) {
            Some(g) => {
                let g = Arc::new(g);
                *slot = GenericSlot::Write(Arc::clone(&g));
                Some(g)
            }
            None => {
                *slot = GenericSlot::No;
                None
            }
        }
    }
}

impl Prepared {
    /// Whether this statement runs from a generic plan (a query, INSERT, UPDATE
    /// or DELETE over one table, executed at least once): each execution
    /// binds its parameters to that plan instead of planning again.
    pub fn has_generic_plan(&self) -> bool {
        matches!(
            *self
                .generic
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
            GenericSlot::Query(_) | GenericSlot::Write(_)
        )
    }
}

impl Prepared {
    /// The statement's text as the client sent it.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// The type of each parameter `$1..$n`: the client's, or inferred
    /// from the column it is compared with or stored into, or text.
    pub fn param_types(&self) -> &[ColumnType] {
        &self.param_types
    }

    /// The result's columns, or `None` when the statement returns no
    /// rows (the protocol's NoData).
    pub fn columns(&self) -> Option<&[ColumnDesc]> {
        self.columns.as_deref()
    }

    /// Whether this is the empty statement (`""` or `;`).
    pub fn is_empty(&self) -> bool {
        self.stmt.is_none()
    }

    /// The first word of the command tag the statement completes with
    /// (`SELECT`, `INSERT`, `BEGIN`), for protocol decisions before it
    /// runs.
    pub fn command(&self) -> &'static str {
        self.tag
    }
}
