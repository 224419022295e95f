//! A session: one client's connection state (its open transaction and
//! whether that transaction failed) and the entry point that runs SQL
//! text, statement by statement, as PostgreSQL's simple query protocol
//! does.
//!
//! Transactions follow PostgreSQL: a statement outside `BEGIN` runs in a
//! transaction of its own (committed when it succeeds, rolled back when it
//! fails); inside a block, a failed statement fails the whole block, whose
//! later statements get 25P02 until `ROLLBACK` (or `COMMIT`, which then
//! rolls back and says so).

use std::sync::Arc;

use quill::catalog::{ColumnType, Value};
use quill::{Db, Isolation, OwnedTxn, TxnOptions};
use sqlparser::ast::{self, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::error::{SqlError, SqlResult, SqlState};
use crate::prepared::Prepared;
use crate::{ddl, dml, select};

/// A result column: its name and type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnDesc {
    /// The column's name as the client sees it.
    pub name: String,
    /// Its type.
    pub ty: ColumnType,
}

/// What a statement returned: a command tag (`INSERT 0 3`, `SELECT 2`,
/// `BEGIN`), and for a query its columns and rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Output {
    /// The command tag PostgreSQL sends in CommandComplete.
    pub tag: String,
    /// Result columns (empty for statements that return no rows).
    pub columns: Vec<ColumnDesc>,
    /// Result rows, one value per column.
    pub rows: Vec<Vec<Value>>,
}

impl Output {
    /// An output with only a command tag.
    pub fn tag(tag: impl Into<String>) -> Output {
        Output {
            tag: tag.into(),
            ..Output::default()
        }
    }
}

/// Where the session's transaction stands (PostgreSQL's ReadyForQuery
/// status: idle, in a block, in a failed block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    /// No transaction block (`I`).
    Idle,
    /// In a transaction block (`T`).
    InBlock,
    /// In a failed transaction block (`E`): only ROLLBACK helps.
    Failed,
}

/// The longest SQL text one call accepts, in bytes.
pub const MAX_SQL_LEN: usize = 16 << 20;

/// Cancels the statement a session is running (PostgreSQL's
/// CancelRequest), from any thread.
#[derive(Clone, Debug)]
pub struct CancelHandle(Arc<std::sync::atomic::AtomicBool>);

impl CancelHandle {
    /// Ask the running statement, if any, to stop with 57014; a
    /// statement that starts later is not affected.
    pub fn cancel(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Who a session is, as functions such as `pg_backend_pid()` and
/// `current_database()` report it.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    /// The process id the client was given in BackendKeyData (a
    /// connection number: sessions are tasks, not processes).
    pub backend_pid: i32,
    /// The database the client named at startup (one data directory is
    /// one database, whatever its name).
    pub database: String,
    /// The user the client authenticated as.
    pub user: String,
}

impl Default for SessionInfo {
    fn default() -> Self {
        SessionInfo {
            backend_pid: 0,
            database: "quill".into(),
            user: "quill".into(),
        }
    }
}

/// One client's session over a database.
pub struct Session {
    db: Arc<Db>,
    txn: Option<OwnedTxn>,
    failed: bool,
    isolation: Isolation,
    info: SessionInfo,
    /// Set by [`CancelHandle::cancel`]; the running statement stops
    /// with 57014 at its next check.
    cancel: Arc<std::sync::atomic::AtomicBool>,
    /// SQL-level prepared statements (PREPARE name AS ...).
    prepared: std::collections::HashMap<String, Prepared>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("status", &self.status())
            .field("isolation", &self.isolation)
            .finish()
    }
}

/// Parse SQL text into statements (PostgreSQL dialect).
pub fn parse(sql: &str) -> SqlResult<Vec<Statement>> {
    if sql.len() > MAX_SQL_LEN {
        return Err(SqlError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            format!(
                "the statement text is {} bytes, over the limit of {MAX_SQL_LEN}",
                sql.len()
            ),
        ));
    }
    Parser::parse_sql(&PostgreSqlDialect {}, sql)
        .map_err(|e| SqlError::new(SqlState::SYNTAX_ERROR, e.to_string()))
}

impl Session {
    /// A session over `db`, idle.
    pub fn new(db: Arc<Db>) -> Session {
        Session::with_info(db, SessionInfo::default())
    }

    /// A session over `db` for the client `info` describes, idle.
    pub fn with_info(db: Arc<Db>, info: SessionInfo) -> Session {
        Session {
            db,
            txn: None,
            failed: false,
            isolation: Isolation::ReadCommitted,
            info,
            cancel: Arc::default(),
            prepared: std::collections::HashMap::new(),
        }
    }

    /// A handle that cancels this session's running statement.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle(Arc::clone(&self.cancel))
    }

    /// Who this session is.
    pub fn info(&self) -> &SessionInfo {
        &self.info
    }

    /// Where the session's transaction stands.
    pub fn status(&self) -> TxnStatus {
        match (&self.txn, self.failed) {
            (_, true) => TxnStatus::Failed,
            (Some(_), false) => TxnStatus::InBlock,
            (None, false) => TxnStatus::Idle,
        }
    }

    /// Run every statement of `sql` in order and return each one's
    /// output; the first error ends the list (the statements after it do
    /// not run), as in PostgreSQL's simple query protocol.
    pub fn execute(&mut self, sql: &str) -> Vec<SqlResult<Output>> {
        let stmts = match parse(sql) {
            Ok(s) => s,
            Err(e) => return vec![Err(e)],
        };
        let mut out = Vec::with_capacity(stmts.len());
        for s in &stmts {
            let r = self.run(s);
            let stop = r.is_err();
            out.push(r);
            if stop {
                break;
            }
        }
        out
    }

    /// Parse `sql` (one statement, or none) for running many times:
    /// `given` holds the client's type for each parameter (`None` where
    /// it left the type to the server, as OID 0 does).
    pub fn prepare(&mut self, sql: &str, given: &[Option<ColumnType>]) -> SqlResult<Prepared> {
        let mut stmts = parse(sql)?;
        if stmts.len() > 1 {
            return Err(SqlError::new(
                SqlState::SYNTAX_ERROR,
                "cannot insert multiple commands into a prepared statement",
            ));
        }
        let stmt = stmts.pop();
        let param_types = given
            .iter()
            .map(|t| t.unwrap_or(ColumnType::Text { max_len: crate::types::MAX_VARLEN }))
            .collect();
        Ok(Prepared {
            sql: sql.to_string(),
            tag: stmt.as_ref().map_or("", command_of),
            stmt,
            param_types,
            columns: None,
        })
    }

    /// Run a prepared statement with one value per parameter (each of
    /// its parameter's type, or NULL).
    pub fn execute_prepared(&mut self, p: &Prepared, params: &[Value]) -> SqlResult<Output> {
        if params.len() != p.param_types.len() {
            return Err(SqlError::new(
                SqlState::PROTOCOL_VIOLATION,
                format!(
                    "bind message supplies {} parameters, but prepared statement requires {}",
                    params.len(),
                    p.param_types.len()
                ),
            ));
        }
        match &p.stmt {
            None => Ok(Output::tag("")),
            Some(s) => self.run(s),
        }
    }

    /// Run one parsed statement.
    pub fn run(&mut self, stmt: &Statement) -> SqlResult<Output> {
        match stmt {
            Statement::StartTransaction { modes, .. } => return self.begin(modes),
            Statement::Commit { .. } => return self.commit(),
            Statement::Rollback {
                savepoint: None, ..
            } => return self.rollback(),
            _ => {}
        }
        if self.failed {
            return Err(SqlError::new(
                SqlState::IN_FAILED_SQL_TRANSACTION,
                "current transaction is aborted, commands ignored until end of transaction block",
            ));
        }
        match stmt {
            Statement::CreateTable(c) => ddl::create_table(&self.db, c),
            Statement::Drop {
                object_type: ast::ObjectType::Table,
                if_exists,
                names,
                ..
            } => ddl::drop_tables(&self.db, names, *if_exists),
            Statement::CreateIndex(c) => ddl::create_index(&self.db, c),
            Statement::Insert(i) => self.in_txn(|db, tx| dml::insert(db, tx, i)),
            Statement::Update(u) => self.in_txn(|db, tx| dml::update(db, tx, u)),
            Statement::Delete(d) => self.in_txn(|db, tx| dml::delete(db, tx, d)),
            Statement::Query(q) => self.in_txn(|db, tx| select::query(db, tx, q)),
            other => Err(SqlError::unsupported(format!(
                "the statement {}",
                first_words(&other.to_string())
            ))),
        }
    }

    fn begin(&mut self, modes: &[ast::TransactionMode]) -> SqlResult<Output> {
        let mut isolation = self.isolation;
        for m in modes {
            match m {
                ast::TransactionMode::IsolationLevel(
                    ast::TransactionIsolationLevel::ReadCommitted,
                ) => {
                    isolation = Isolation::ReadCommitted;
                }
                ast::TransactionMode::IsolationLevel(
                    ast::TransactionIsolationLevel::RepeatableRead,
                ) => isolation = Isolation::RepeatableRead,
                ast::TransactionMode::AccessMode(_) => {}
                other => {
                    return Err(SqlError::unsupported(format!(
                        "the transaction mode {other}"
                    )));
                }
            }
        }
        if self.txn.is_some() || self.failed {
            // PostgreSQL warns and carries on.
            return Ok(Output::tag("BEGIN"));
        }
        self.txn = Some(self.db.begin_owned_with(TxnOptions {
            isolation,
            ..TxnOptions::default()
        })?);
        Ok(Output::tag("BEGIN"))
    }

    fn commit(&mut self) -> SqlResult<Output> {
        let failed = std::mem::take(&mut self.failed);
        match self.txn.take() {
            None => Ok(Output::tag(if failed { "ROLLBACK" } else { "COMMIT" })),
            Some(tx) if failed => {
                tx.rollback()?;
                Ok(Output::tag("ROLLBACK"))
            }
            Some(tx) => {
                tx.commit()?;
                Ok(Output::tag("COMMIT"))
            }
        }
    }

    fn rollback(&mut self) -> SqlResult<Output> {
        self.failed = false;
        if let Some(tx) = self.txn.take() {
            tx.rollback()?;
        }
        Ok(Output::tag("ROLLBACK"))
    }

    /// Run `f` in the block's transaction (failing the block if it fails)
    /// or in one of its own (committed on success).
    fn in_txn(
        &mut self,
        f: impl FnOnce(&Db, &mut OwnedTxn) -> SqlResult<Output>,
    ) -> SqlResult<Output> {
        match self.txn.as_mut() {
            Some(tx) => {
                let r = f(&self.db, tx);
                if r.is_err() {
                    self.failed = true;
                }
                r
            }
            None => {
                let mut tx = self.db.begin_owned_with(TxnOptions {
                    isolation: self.isolation,
                    ..TxnOptions::default()
                })?;
                match f(&self.db, &mut tx) {
                    Ok(out) => {
                        tx.commit()?;
                        Ok(out)
                    }
                    Err(e) => {
                        // The statement's error is what the client needs;
                        // a rollback failure is logged by the engine.
                        let _ = tx.rollback();
                        Err(e)
                    }
                }
            }
        }
    }
}

/// The command tag's first word for a statement.
fn command_of(s: &Statement) -> &'static str {
    match s {
        Statement::Query(_) => "SELECT",
        Statement::Insert(_) => "INSERT",
        Statement::Update(_) => "UPDATE",
        Statement::Delete(_) => "DELETE",
        Statement::StartTransaction { .. } => "BEGIN",
        Statement::Commit { .. } => "COMMIT",
        Statement::Rollback { .. } => "ROLLBACK",
        Statement::CreateTable(_) => "CREATE TABLE",
        Statement::CreateIndex(_) => "CREATE INDEX",
        Statement::Drop { .. } => "DROP",
        _ => "",
    }
}

/// The first words of a statement, for messages.
fn first_words(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}
