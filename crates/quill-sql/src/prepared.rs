//! Prepared statements: SQL text parsed once, with its parameter types
//! (given by the client, or inferred from where each `$n` stands) and
//! the shape of its result, executed many times with parameter values.
//! This is what the extended query protocol's Parse/Describe/Bind/Execute
//! and SQL-level PREPARE/EXECUTE use.

use quill::catalog::ColumnType;

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
