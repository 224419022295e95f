//! Quill's SQL layer: PostgreSQL-dialect SQL text parsed with `sqlparser`,
//! bound to the catalog, and executed over the engine's public API (no
//! sockets, no async runtime; the server crate drives a [`Session`] per
//! connection).
//!
//! * [`session`]: a connection's state and the entry point,
//!   [`Session::execute`]; transaction blocks as PostgreSQL has them.
//! * [`ddl`]: CREATE TABLE, DROP TABLE, CREATE INDEX.
//! * [`dml`]: INSERT, UPDATE, DELETE.
//! * [`select`]: queries over one table.
//! * [`relations`]: joins and queries over the catalogs.
//! * [`access`]: how a WHERE reaches rows through the primary key.
//! * [`prepared`]: statements parsed once and run with parameters.
//! * [`infer`]: parameter types the client left to the server.
//! * [`pg_catalog`]: the system catalogs, generated from Quill's.
//! * [`settings`]: SET, SHOW and RESET.
//! * [`status`]: `SHOW quill.status`.
//! * [`expr`]: bound scalar expressions and three-valued evaluation.
//! * [`types`]: SQL types, how they are stored, coercion and text forms.
//! * [`error`]: [`SqlError`] with its SQLSTATE.
//!
//! Work in progress (issue 14): secondary index access paths, cached
//! plans for prepared statements, RETURNING, the `pg_catalog` views.

pub mod access;
pub mod copy;
pub mod ddl;
pub mod dml;
pub mod error;
pub mod expr;
pub mod infer;
pub mod pg_catalog;
pub mod prepared;
pub mod relations;
pub mod select;
pub mod session;
pub mod settings;
pub mod status;
pub mod types;

pub use error::{SqlError, SqlResult, SqlState};
pub use prepared::Prepared;
pub use session::{
    CancelHandle, ColumnDesc, CopyStream, Deferred, MAX_ATTEMPTED_INSERT_ROWS, Output, Parsed,
    Session, SessionInfo, TxnStatus,
};
