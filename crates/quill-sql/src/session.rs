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
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::error::{SqlError, SqlResult, SqlState};
use crate::expr::{self, Ctx};
use crate::prepared::Prepared;
use crate::settings::{self, Settings};
use crate::{copy, ddl, dml, infer, select, status, types};

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
    /// COPY's data, for COPY FROM STDIN and COPY TO STDOUT.
    pub copy: Option<CopyStream>,
}

/// What a COPY statement asks of the client connection.
#[derive(Clone, Debug, PartialEq)]
pub enum CopyStream {
    /// COPY FROM STDIN began: the client sends `columns` columns of data
    /// (text format on the wire), which go to [`Session::copy_data`],
    /// then [`Session::copy_done`] or [`Session::copy_fail`].
    In {
        /// Columns per line.
        columns: usize,
    },
    /// COPY TO STDOUT: the lines to send, one CopyData each (the tag
    /// counts the rows).
    Out {
        /// Columns per line.
        columns: usize,
        /// Encoded lines, each with its line break.
        lines: Vec<Vec<u8>>,
    },
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

/// A statement's output and, when its commit was deferred, the
/// transaction the caller must commit before reporting the output.
#[derive(Debug)]
pub struct Deferred {
    /// What the statement returned.
    pub output: Output,
    /// Commit this first (`None`: nothing to commit).
    pub commit: Option<OwnedTxn>,
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

/// A query text parsed into its statements
/// ([`Session::try_execute_deferred`] hands it back when the text must run
/// where the thread may block).
#[derive(Debug)]
pub struct Parsed(Vec<Stmt>);

/// The most rows an INSERT may have to be attempted on a thread that must
/// not block ([`Session::try_execute_prepared_deferred`]).
pub const MAX_ATTEMPTED_INSERT_ROWS: usize = 16;

/// One client's session over a database.
pub struct Session {
    db: Arc<Db>,
    txn: Option<OwnedTxn>,
    failed: bool,
    isolation: Isolation,
    info: SessionInfo,
    settings: Settings,
    /// Whether the open block has run a statement (SET TRANSACTION must
    /// come first).
    block_ran: bool,
    /// Whether the open block is READ ONLY (`BEGIN READ ONLY`, `SET
    /// TRANSACTION READ ONLY`, or `default_transaction_read_only` when it
    /// began): its writes are refused with 25006 ([`Session::check_writable`]).
    read_only: bool,
    /// Whether commits are handed to the caller ([`Session::execute_deferred`]).
    defer_commit: bool,
    /// The transaction a deferred execution left to commit.
    pending_commit: Option<OwnedTxn>,
    /// Set by [`CancelHandle::cancel`]; the running statement stops
    /// with 57014 at its next check.
    cancel: Arc<std::sync::atomic::AtomicBool>,
    /// SQL-level prepared statements (PREPARE name AS ...).
    prepared: std::collections::HashMap<String, Prepared>,
    /// A COPY FROM STDIN waiting for its data.
    copy: Option<CopyIn>,
    /// The prepared statement running now, whose generic plan a query
    /// uses (`Prepared::generic_plan`).
    current: Option<Arc<crate::prepared::GenericCache>>,
    /// When the running statement's `statement_timeout` runs out, set as
    /// it starts ([`Session::run_stmt`]).
    deadline: Option<std::time::Instant>,
    /// The settings as the open block began, and as its commit leaves
    /// them, kept from its first SET on ([`Session::change_settings`]):
    /// PostgreSQL undoes a block's SETs when it rolls back, and its SET
    /// LOCALs when it ends either way.
    block_settings: Option<Box<(Settings, Settings)>>,
    /// Set when an attempt was refused ([`Session::attempt`]): the rerun
    /// that follows keeps the cancel flag, so a cancel that arrived
    /// during the attempt or the hand-off still stops the statement.
    keep_cancel: bool,
}

/// A COPY FROM STDIN in progress: rows are inserted as their lines
/// arrive, into the session's block or the copy's own transaction (all
/// or nothing, as in PostgreSQL). The first error stops the inserts; it
/// is reported when the data ends.
struct CopyIn {
    target: copy::Target,
    decoder: copy::Decoder,
    /// The copy's own transaction, when no block is open.
    txn: Option<OwnedTxn>,
    rows: u64,
    error: Option<SqlError>,
}

impl CopyIn {
    /// Insert the rows `data` completes (`None`: the data ended, insert
    /// the last line), in the copy's own transaction or the session's
    /// `block`; the first error (or a cancel) is kept, and after it the
    /// data is dropped.
    fn take(
        &mut self,
        block: Option<&mut OwnedTxn>,
        data: Option<&[u8]>,
        stopped: Option<SqlError>,
        deadline: Option<std::time::Instant>,
    ) {
        if self.error.is_some() {
            return;
        }
        if let Some(e) = stopped {
            self.error = Some(e);
            return;
        }
        let CopyIn {
            target,
            decoder,
            txn,
            rows,
            error,
        } = self;
        let Some(tx) = txn.as_mut().or(block) else {
            *error = Some(SqlError::new(
                SqlState::INTERNAL_ERROR,
                "COPY lost its transaction",
            ));
            return;
        };
        let mut line = decoder.line();
        let mut insert = |fields| {
            // A large chunk may take long: the timeout is checked per row.
            if expr::past(deadline) {
                return Err(expr::canceled(true));
            }
            line += 1;
            let row = target.row(fields, line)?;
            tx.insert(&target.table, &row)?;
            *rows += 1;
            Ok(())
        };
        let r = match data {
            Some(d) => decoder.feed(d, &mut insert),
            None => decoder.finish(&mut insert),
        };
        if let Err(e) = r {
            *error = Some(e);
        }
    }
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
    let syntax = |e: &dyn std::fmt::Display| SqlError::new(SqlState::SYNTAX_ERROR, e.to_string());
    let dialect = PostgreSqlDialect {};
    // (the token pass below only where it can matter)
    if !sql
        .as_bytes()
        .windows(3)
        .any(|w| w.eq_ignore_ascii_case(b"key"))
    {
        return Parser::parse_sql(&dialect, sql).map_err(|e| syntax(&e));
    }
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        // (worded as the parser words a tokenizer's error)
        .map_err(|e| syntax(&ParserError::TokenizerError(e.to_string())))?;
    Parser::new(&dialect)
        .with_tokens_with_locations(strengthen_key_locks(tokens))
        .parse_statements()
        .map_err(|e| syntax(&e))
}

/// PostgreSQL's weaker row locks as the stronger ones Quill takes: `FOR
/// NO KEY UPDATE` as `FOR UPDATE` and `FOR KEY SHARE` as `FOR SHARE`
/// (the parser knows only those). A stronger lock makes more writers
/// wait, never fewer: what the weaker one guarantees still holds.
fn strengthen_key_locks(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let word = |t: &TokenWithSpan, k: Keyword| matches!(&t.token, Token::Word(w) if w.keyword == k && w.quote_style.is_none());
    // Positions of the tokens that are not white space, in order.
    let solid: Vec<usize> = tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t.token, Token::Whitespace(_)))
        .map(|(i, _)| i)
        .collect();
    let at = |n: usize| solid.get(n).and_then(|&i| tokens.get(i));
    let mut drop = Vec::new();
    for n in 0..solid.len() {
        if !at(n).is_some_and(|t| word(t, Keyword::FOR)) {
            continue;
        }
        let is = |m: usize, k| at(n + m).is_some_and(|t| word(t, k));
        if is(1, Keyword::NO) && is(2, Keyword::KEY) && is(3, Keyword::UPDATE) {
            drop.extend(solid.get(n + 1..n + 3).into_iter().flatten().copied());
        } else if is(1, Keyword::KEY) && is(2, Keyword::SHARE) {
            drop.extend(solid.get(n + 1).copied());
        }
    }
    for i in drop.into_iter().rev() {
        tokens.remove(i);
    }
    tokens
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
            settings: Settings::default(),
            block_ran: false,
            read_only: false,
            defer_commit: false,
            pending_commit: None,
            cancel: Arc::default(),
            prepared: std::collections::HashMap::new(),
            copy: None,
            current: None,
            keep_cancel: false,
            deadline: None,
            block_settings: None,
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

    /// Where the session's transaction stands (a COPY FROM STDIN that
    /// runs in its own transaction counts as in a block until it ends).
    pub fn status(&self) -> TxnStatus {
        let copying = self.copy.as_ref().is_some_and(|c| c.txn.is_some());
        match (&self.txn, self.failed) {
            (_, true) => TxnStatus::Failed,
            (Some(_), false) => TxnStatus::InBlock,
            (None, false) if copying => TxnStatus::InBlock,
            (None, false) => TxnStatus::Idle,
        }
    }

    /// Whether running `p` now, with its commit deferred
    /// ([`Session::execute_prepared_deferred`]), does nothing that can
    /// wait: no row read or written, no rollback, no sync. True for BEGIN
    /// (a transaction takes its id and snapshot lazily) and for COMMIT of
    /// a block that has not failed (the commit is handed to the caller).
    /// A server runs such a statement on its event loop's thread rather
    /// than handing that thread's other work off first, as it must for a
    /// statement that may block (two hand-offs fewer per transaction
    /// block: sysbench's oltp_read_write sends BEGIN, 18 statements,
    /// COMMIT).
    pub fn never_waits(&self, p: &Prepared) -> bool {
        match &p.stmt {
            Some(Stmt::Sql(s)) => match s.as_ref() {
                Statement::StartTransaction { .. } => self.never_waits_for(Quick::Begin),
                Statement::Commit { chain: false, .. } => self.never_waits_for(Quick::Commit),
                _ => false,
            },
            _ => false,
        }
    }

    /// [`Session::never_waits`] for a query text run by
    /// [`Session::execute_deferred`]: true only for a text that is exactly
    /// one BEGIN, START TRANSACTION, COMMIT or END (any case, optional
    /// TRANSACTION or WORK, optional semicolon), which it recognises
    /// without parsing; anything else (a comment, a second statement, an
    /// isolation level) is false, which is always safe.
    pub fn text_never_waits(&self, sql: &str) -> bool {
        let text = sql.trim().trim_end_matches(';');
        let mut words = text.split_ascii_whitespace();
        let (first, second) = (words.next().unwrap_or(""), words.next());
        if words.next().is_some() {
            return false;
        }
        let is = |w: &str, k: &str| w.eq_ignore_ascii_case(k);
        let noise = second.is_none_or(|w| is(w, "transaction") || is(w, "work"));
        let kind = if (is(first, "begin") && noise)
            || (is(first, "start") && second.is_some_and(|w| is(w, "transaction")))
        {
            Quick::Begin
        } else if (is(first, "commit") || is(first, "end")) && noise {
            Quick::Commit
        } else {
            return false;
        };
        self.never_waits_for(kind)
    }

    fn never_waits_for(&self, kind: Quick) -> bool {
        // A statement during COPY FROM STDIN ends the COPY first, which
        // may roll its rows back.
        self.copy.is_none()
            && match kind {
                Quick::Begin => true,
                // COMMIT of a failed block is a rollback.
                Quick::Commit => !self.failed,
            }
    }

    /// Whether a COPY FROM STDIN is waiting for data.
    pub fn in_copy(&self) -> bool {
        self.copy.is_some()
    }

    /// Data of the running COPY FROM STDIN, in chunks of any size: the
    /// rows it completes are inserted. An error (bad data, a constraint,
    /// a cancel) is kept and returned by [`Session::copy_done`]; the data
    /// after it is read and dropped.
    pub fn copy_data(&mut self, data: &[u8]) -> SqlResult<()> {
        let stopped = self.copy_stopped();
        let Some(c) = self.copy.as_mut() else {
            return Err(SqlError::new(
                SqlState::PROTOCOL_VIOLATION,
                "COPY data arrived with no COPY FROM STDIN running",
            ));
        };
        c.take(self.txn.as_mut(), Some(data), stopped, self.deadline);
        Ok(())
    }

    /// The running COPY FROM STDIN's data is complete: insert its last
    /// line, and commit (its own transaction) or stay in the block.
    /// Returns the tag `COPY n`, or the first error (a block is then
    /// failed; the copy's own transaction is rolled back).
    pub fn copy_done(&mut self) -> SqlResult<Output> {
        let r = self.copy_done_deferred()?;
        if let Some(tx) = r.commit {
            tx.commit()?;
        }
        Ok(r.output)
    }

    /// [`Session::copy_done`] with the commit of the copy's own
    /// transaction left to the caller, as
    /// [`Session::execute_prepared_deferred`] leaves one.
    pub fn copy_done_deferred(&mut self) -> SqlResult<Deferred> {
        let stopped = self.copy_stopped();
        let Some(mut c) = self.copy.take() else {
            return Err(SqlError::new(
                SqlState::PROTOCOL_VIOLATION,
                "COPY done with no COPY FROM STDIN running",
            ));
        };
        c.take(self.txn.as_mut(), None, stopped, self.deadline);
        if let Some(e) = c.error {
            self.end_failed_copy(c.txn);
            return Err(e);
        }
        let output = Output::tag(format!("COPY {}", c.rows));
        Ok(Deferred {
            output,
            commit: c.txn,
        })
    }

    /// Why the running COPY FROM STDIN stops, if it does: a cancel, or
    /// the COPY statement's `statement_timeout` run out (its deadline was
    /// set when the statement started; the data comes after).
    fn copy_stopped(&self) -> Option<SqlError> {
        expr::interrupted(&self.cancel, self.deadline)
    }

    /// The client gave up the running COPY FROM STDIN (CopyFail): its
    /// rows are undone (its own transaction rolls back; a block fails).
    /// Returns the error to report.
    pub fn copy_fail(&mut self, message: &str) -> SqlError {
        if let Some(c) = self.copy.take() {
            self.end_failed_copy(c.txn);
        }
        SqlError::new(
            SqlState::QUERY_CANCELED,
            format!("COPY from stdin failed: {message}"),
        )
    }

    fn end_failed_copy(&mut self, own: Option<OwnedTxn>) {
        match own {
            // The error is what the client needs; a rollback failure is
            // logged by the engine.
            Some(tx) => {
                let _ = tx.rollback();
            }
            None => self.failed = self.txn.is_some(),
        }
    }

    /// Run every statement of `sql` in order and return each one's
    /// output; the first error ends the list (the statements after it do
    /// not run), as in PostgreSQL's simple query protocol.
    pub fn execute(&mut self, sql: &str) -> Vec<SqlResult<Output>> {
        let stmts = match parse_statements(sql) {
            Ok(s) => s,
            Err(e) => return vec![Err(e)],
        };
        let mut out = Vec::with_capacity(stmts.len());
        for s in &stmts {
            let r = self.run_stmt(s, &[]);
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
    /// it left the type to the server, as OID 0 does). Parameter types
    /// the client left open are inferred from where the parameter stands
    /// (compared with or stored into a column: that column's type; LIMIT:
    /// bigint; elsewhere: text).
    pub fn prepare(&mut self, sql: &str, given: &[Option<ColumnType>]) -> SqlResult<Prepared> {
        let mut stmts = parse_statements(sql)?;
        if stmts.len() > 1 {
            return Err(SqlError::new(
                SqlState::SYNTAX_ERROR,
                "cannot insert multiple commands into a prepared statement",
            ));
        }
        let stmt = stmts.pop();
        let (param_types, columns) = match &stmt {
            Some(Stmt::Sql(s)) => {
                let n = infer::param_count(sql).max(given.len());
                let inferred = infer::param_types(&self.db, s, n);
                let types: Vec<ColumnType> = (0..n)
                    .map(|i| {
                        given
                            .get(i)
                            .copied()
                            .flatten()
                            .or(inferred.get(i).copied().flatten())
                            .unwrap_or(ColumnType::Text {
                                max_len: crate::types::MAX_VARLEN,
                            })
                    })
                    .collect();
                let columns = self.describe(s, &types)?;
                (types, columns)
            }
            _ => (Vec::new(), None),
        };
        Ok(Prepared {
            sql: sql.to_string(),
            tag: stmt.as_ref().map_or("", command_of),
            stmt,
            param_types,
            columns,
            generic: Arc::default(),
        })
    }

    /// [`Session::prepare`] on a thread that must not block (a server's
    /// event loop): `None` when it would have waited, for a table a DDL
    /// statement holds (a plain CREATE INDEX holds its table for the whole
    /// build), and the caller prepares again on a thread that may block.
    /// Preparing reads the catalog only and changes nothing, so a refused
    /// attempt leaves nothing to undo.
    pub fn try_prepare(
        &mut self,
        sql: &str,
        given: &[Option<ColumnType>],
    ) -> Option<SqlResult<Prepared>> {
        let (r, refused) = quill::wait::without_waiting(|| self.prepare(sql, given));
        (!refused).then_some(r)
    }

    /// The result columns `s` returns (`None`: it returns no rows), with
    /// `param_types` the types of its parameters.
    fn describe(
        &self,
        s: &Statement,
        param_types: &[ColumnType],
    ) -> SqlResult<Option<Vec<ColumnDesc>>> {
        let ctx = Ctx {
            params: None,
            param_types,
            info: &self.info,
            cancel: &self.cancel,
            deadline: None,
        };
        Ok(match s {
            Statement::Query(q) => Some(select::describe(&self.db, q, ctx)?),
            Statement::Explain { .. } => Some(vec![ColumnDesc {
                name: "QUERY PLAN".into(),
                ty: TEXT,
            }]),
            Statement::ShowVariable { variable } => Some(vec![ColumnDesc {
                name: show_column(variable),
                ty: TEXT,
            }]),
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => {
                dml::describe(&self.db, s, ctx)?
            }
            Statement::Execute { name: Some(n), .. } => {
                let n = n.to_string().to_lowercase();
                self.prepared.get(&n).and_then(|p| p.columns.clone())
            }
            _ => None,
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
            Some(s) => {
                self.current = Some(Arc::clone(&p.generic));
                let r = self.run_stmt(s, params);
                self.current = None;
                r
            }
        }
    }

    /// [`Session::execute_prepared`], except that a commit the statement
    /// makes (COMMIT, or the end of a statement outside a block) is not
    /// waited for: its transaction comes back in [`Deferred::commit`],
    /// with its changes made and its locks still held, for the caller to
    /// commit (with [`OwnedTxn::commit_async`], so that a server's thread
    /// does not wait on the log's sync) before it reports the output. The
    /// caller must do so before the session runs another statement.
    pub fn execute_prepared_deferred(
        &mut self,
        p: &Prepared,
        params: &[Value],
    ) -> SqlResult<Deferred> {
        self.deferred(|s| s.execute_prepared(p, params))
    }

    /// Run `f` with the commit it makes handed back instead of waited for.
    fn deferred(
        &mut self,
        f: impl FnOnce(&mut Session) -> SqlResult<Output>,
    ) -> SqlResult<Deferred> {
        self.defer_commit = true;
        let r = f(self);
        self.defer_commit = false;
        let commit = self.pending_commit.take();
        r.map(|output| Deferred { output, commit })
    }

    /// [`Session::execute`] for a text of one statement, with its commit
    /// deferred as [`Session::execute_prepared_deferred`] does; a text of
    /// several statements runs as `execute` does (each commit waited
    /// for, so each statement sees the ones before it).
    pub fn execute_deferred(&mut self, sql: &str) -> Vec<SqlResult<Deferred>> {
        match parse_statements(sql) {
            Ok(stmts) => self.execute_parsed_deferred(Parsed(stmts)),
            Err(e) => vec![Err(e)],
        }
    }

    /// [`Session::execute_deferred`] for a text already parsed (what a
    /// refused [`Session::try_execute_deferred`] hands back).
    pub fn execute_parsed_deferred(&mut self, parsed: Parsed) -> Vec<SqlResult<Deferred>> {
        let stmts = parsed.0;
        if let [one] = stmts.as_slice() {
            return vec![self.deferred(|s| s.run_stmt(one, &[]))];
        }
        let mut out = Vec::with_capacity(stmts.len());
        for s in &stmts {
            let r = self.run_stmt(s, &[]);
            let stop = r.is_err();
            out.push(r.map(|output| Deferred {
                output,
                commit: None,
            }));
            if stop {
                break;
            }
        }
        out
    }

    /// [`Session::execute_prepared_deferred`] on a thread that must not
    /// block (a server's event loop), for the statements that usually
    /// wait for nothing: INSERT, UPDATE, DELETE and SELECT. `None` when the
    /// statement is another kind, or met a wait (a row lock another
    /// transaction holds, a page on disk, a table under DDL:
    /// [`quill::wait`]) and was undone: the session is then as before the
    /// call (NA.1) and the caller runs the statement again with
    /// [`Session::execute_prepared_deferred`] on a thread that may block.
    pub fn try_execute_prepared_deferred(
        &mut self,
        p: &Prepared,
        params: &[Value],
    ) -> Option<SqlResult<Deferred>> {
        if !self.may_attempt(p.stmt.as_ref()) {
            return None;
        }
        self.attempt(|s| s.execute_prepared_deferred(p, params))
    }

    /// [`Session::try_execute_prepared_deferred`] for a query text:
    /// attempted only when it is one INSERT, UPDATE, DELETE or SELECT (a
    /// text that does not parse is answered here). Otherwise the parsed
    /// text comes back, for [`Session::execute_parsed_deferred`] on a
    /// thread that may block, so the text is parsed once either way.
    pub fn try_execute_deferred(&mut self, sql: &str) -> Result<SqlResult<Deferred>, Parsed> {
        let stmts = match parse_statements(sql) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        if let [one] = stmts.as_slice()
            && self.may_attempt(Some(one))
            && let Some(r) = self.attempt(|s| s.deferred(|s| s.run_stmt(one, &[])))
        {
            return Ok(r);
        }
        Err(Parsed(stmts))
    }

    /// Whether `stmt` may be attempted without waiting: a plain DML or
    /// query statement in a session that is not copying and whose block
    /// has not failed (anything else may roll back, sync or change the
    /// session in ways an attempt could not undo). An INSERT only with at
    /// most [`MAX_ATTEMPTED_INSERT_ROWS`] rows: a larger one amortises
    /// the hand-off anyway, and would run into the attempt's time budget
    /// after drawing automatic keys that a refusal cannot give back.
    fn may_attempt(&self, stmt: Option<&Stmt>) -> bool {
        let Some(Stmt::Sql(s)) = stmt else {
            return false;
        };
        let kind = match s.as_ref() {
            Statement::Insert(i) => i.source.as_deref().is_some_and(|q| {
                matches!(q.body.as_ref(), ast::SetExpr::Values(v) if v.rows.len() <= MAX_ATTEMPTED_INSERT_ROWS)
            }),
            Statement::Update(_) | Statement::Delete(_) | Statement::Query(_) => true,
            _ => false,
        };
        kind && self.copy.is_none() && !self.failed && self.pending_commit.is_none()
    }

    /// Run `f` with waits refused; if one was refused, undo what `f` did
    /// and return `None`, else its result.
    ///
    /// NA.1: after `None`, the session's transaction holds exactly the
    /// changes it held before (the attempt's are rolled back to a
    /// savepoint; an autocommit statement's own transaction is rolled
    /// back whole, whether `f` ended it with an error or handed it back
    /// to commit), its block is not marked failed, and nothing was sent
    /// or committed, so running the statement again is the same as
    /// running it once, but for two traces PostgreSQL's rollbacks leave
    /// too: automatic keys drawn by the attempt's rows before the refused
    /// one are not given back (a gap), and row locks those rows took stay
    /// held until the block ends (as after any failed statement; the
    /// rerun normally takes the same ones). The refused row's own call
    /// leaves neither (engine wait W5): it releases the locks it took
    /// and gives back its key, so a one-row INSERT's rerun draws the key
    /// the attempt drew. If that
    /// undo itself fails, the block is failed and the undo's error is the
    /// statement's result. A refused autocommit write is rolled back here,
    /// on the caller's thread (W2 lets that rollback read pages).
    ///
    /// The cancel flag is cleared once per statement, not per attempt: a
    /// refused attempt leaves it for the rerun.
    fn attempt(
        &mut self,
        f: impl FnOnce(&mut Session) -> SqlResult<Deferred>,
    ) -> Option<SqlResult<Deferred>> {
        let save = self.txn.as_ref().map(OwnedTxn::savepoint);
        let (block_ran, failed) = (self.block_ran, self.failed);
        let (r, refused) = quill::wait::without_waiting(|| f(self));
        if !refused {
            return Some(r);
        }
        // An autocommit statement that went on without what it could not
        // read, and handed its transaction back: it must not commit.
        if let Ok(Deferred {
            commit: Some(tx), ..
        }) = r
            && let Err(e) = tx.rollback()
        {
            return Some(Err(e.into()));
        }
        match (self.txn.as_mut(), save) {
            (Some(tx), Some(sp)) => {
                if let Err(e) = tx.rollback_to_savepoint(sp) {
                    self.failed = true;
                    return Some(Err(e.into()));
                }
            }
            (None, None) => {}
            // An attempted statement never opens or ends a block.
            (Some(_), None) | (None, Some(_)) => {
                self.failed = self.txn.is_some();
                return Some(Err(SqlError::new(
                    SqlState::INTERNAL_ERROR,
                    "a statement attempted without waiting opened or ended its block",
                )));
            }
        }
        self.block_ran = block_ran;
        self.failed = failed;
        self.keep_cancel = true;
        None
    }

    /// Run one parsed statement (without parameters).
    pub fn run(&mut self, stmt: &Statement) -> SqlResult<Output> {
        self.run_stmt(&Stmt::Sql(Box::new(stmt.clone())), &[])
    }

    fn run_stmt(&mut self, stmt: &Stmt, params: &[Value]) -> SqlResult<Output> {
        if !std::mem::take(&mut self.keep_cancel) {
            self.cancel
                .store(false, std::sync::atomic::Ordering::Release);
            // The timeout counts from the statement's start (a refused
            // attempt's rerun keeps it, as it keeps the cancel flag).
            self.deadline = self
                .settings
                .statement_timeout()
                .map(|t| std::time::Instant::now() + t);
            if let Some(tx) = self.txn.as_mut() {
                tx.set_stop_at(self.deadline);
                tx.set_lock_timeout(self.settings.lock_timeout());
            }
        }
        if self.copy.is_some() {
            // A statement instead of the COPY's data: the COPY is over.
            let _ = self.copy_fail("a statement arrived instead of its data");
        }
        let stmt = match stmt {
            Stmt::Utility(u) => {
                if self.failed {
                    return Err(aborted());
                }
                return self.utility(u);
            }
            Stmt::Sql(s) => s.as_ref(),
        };
        match stmt {
            Statement::StartTransaction { modes, .. } => return self.begin(modes),
            Statement::Commit { .. } => return self.commit(),
            Statement::Rollback {
                savepoint: None, ..
            } => return self.rollback(),
            _ => {}
        }
        if self.failed {
            return Err(aborted());
        }
        let r = self.run_sql(stmt, params).map_err(|e| self.timed_out(e));
        if r.is_err() && self.txn.is_some() {
            self.failed = true;
        }
        r
    }

    fn run_sql(&mut self, stmt: &Statement, params: &[Value]) -> SqlResult<Output> {
        self.check_writable(stmt)?;
        let info = self.info.clone();
        let cancel = Arc::clone(&self.cancel);
        let ctx = Ctx {
            params: Some(params),
            param_types: &[],
            info: &info,
            cancel: &cancel,
            deadline: self.deadline,
        };
        match stmt {
            Statement::CreateTable(c) => ddl::create_table(&self.db, c),
            Statement::Drop {
                object_type: ast::ObjectType::Table,
                if_exists,
                names,
                ..
            } => ddl::drop_tables(&self.db, names, *if_exists),
            Statement::Copy {
                source,
                to,
                target,
                options,
                legacy_options,
                payload,
            } => self.copy_stmt(
                source,
                *to,
                target,
                options,
                legacy_options,
                payload.as_ref(),
                ctx,
            ),
            Statement::CreateIndex(c) if c.concurrently && self.txn.is_some() => {
                Err(SqlError::new(
                    SqlState::ACTIVE_SQL_TRANSACTION,
                    "CREATE INDEX CONCURRENTLY cannot run inside a transaction block",
                ))
            }
            // A build waits for every transaction older than it (the
            // engine's undo U9), so not inside a block whose transaction
            // has begun: it would wait for itself.
            Statement::CreateIndex(_) if self.txn.as_ref().is_some_and(|t| t.id() != 0) => {
                Err(SqlError::new(
                    SqlState::ACTIVE_SQL_TRANSACTION,
                    "CREATE INDEX cannot run inside a transaction block that has already read or written; run it before the block's first query or outside the block",
                ))
            }
            Statement::CreateIndex(c) => ddl::create_index(&self.db, c, &cancel),
            Statement::Drop {
                object_type: ast::ObjectType::Index,
                if_exists,
                names,
                ..
            } => ddl::drop_indexes(&self.db, names, *if_exists),
            Statement::Insert(i) => {
                self.write_stmt(stmt, params, ctx, |db, tx| dml::insert(db, tx, i, ctx))
            }
            Statement::Update(u) => {
                self.write_stmt(stmt, params, ctx, |db, tx| dml::update(db, tx, u, ctx))
            }
            Statement::Delete(d) => {
                self.write_stmt(stmt, params, ctx, |db, tx| dml::delete(db, tx, d, ctx))
            }
            Statement::Query(q) => {
                let generic = self.current.take().and_then(|cache| {
                    let describe = Ctx {
                        params: None,
                        ..ctx
                    };
                    cache.generic_plan(&self.db, q, params, describe)
                });
                self.in_txn(|db, tx| {
                    let plan = match generic {
                        Some(plan) => plan?,
                        None => select::plan(db, q, ctx, Some(&mut *tx))?,
                    };
                    select::run(&plan, Some(tx), ctx)
                })
            }
            Statement::Explain { statement, .. } => {
                let Statement::Query(q) = statement.as_ref() else {
                    return Err(SqlError::unsupported(
                        "EXPLAIN of a statement other than SELECT",
                    ));
                };
                let plan = select::plan(&self.db, q, ctx, None)?;
                let rows: Vec<Vec<Value>> = select::explain(&plan)
                    .into_iter()
                    .map(|l| vec![Value::Text(l)])
                    .collect();
                Ok(Output {
                    tag: format!("EXPLAIN {}", rows.len()),
                    columns: vec![ColumnDesc {
                        name: "QUERY PLAN".into(),
                        ty: TEXT,
                    }],
                    rows,
                    copy: None,
                })
            }
            Statement::Set(set) => self.set(set, ctx),
            Statement::ShowVariable { variable } => self.show(variable),
            Statement::Reset(r) => {
                match &r.reset {
                    ast::Reset::ALL => self.change_settings(false, |s| {
                        s.reset_all();
                        Ok(())
                    })?,
                    ast::Reset::ConfigurationParameter(n) => {
                        let n = n.to_string();
                        self.change_settings(false, |s| s.reset(&n))?;
                    }
                    ast::Reset::SessionAuthorization => {}
                }
                Ok(Output::tag("RESET"))
            }
            Statement::Discard { .. } => {
                if self.txn.is_some() {
                    return Err(SqlError::new(
                        SqlState::ACTIVE_SQL_TRANSACTION,
                        "DISCARD ALL cannot run inside a transaction block",
                    ));
                }
                self.settings.reset_all();
                self.prepared.clear();
                Ok(Output::tag("DISCARD ALL"))
            }
            Statement::Prepare {
                name,
                data_types,
                statement,
            } => {
                let key = expr::name_of(name);
                if self.prepared.contains_key(&key) {
                    return Err(SqlError::new(
                        SqlState::DUPLICATE_PREPARED_STATEMENT,
                        format!("prepared statement \"{key}\" already exists"),
                    ));
                }
                let given = data_types
                    .iter()
                    .map(|t| types::column_type(t).map(|t| Some(t.stored)))
                    .collect::<SqlResult<Vec<_>>>()?;
                let mut p = self.prepare(&statement.to_string(), &given)?;
                p.sql = stmt.to_string();
                self.prepared.insert(key, p);
                Ok(Output::tag("PREPARE"))
            }
            Statement::Execute {
                name: Some(name),
                parameters,
                ..
            } => {
                let key = name.to_string().to_lowercase();
                let p = self.prepared.get(&key).cloned().ok_or_else(|| {
                    SqlError::new(
                        SqlState::INVALID_SQL_STATEMENT_NAME,
                        format!("prepared statement \"{key}\" does not exist"),
                    )
                })?;
                if matches!(p.stmt, Some(Stmt::Sql(_))) && parameters.len() != p.param_types.len() {
                    // Counted before any value is converted to its
                    // parameter's type, as PostgreSQL reports it.
                    return Err(SqlError::new(
                        SqlState::SYNTAX_ERROR,
                        format!(
                            "wrong number of parameters for prepared statement \"{key}\": expected {}, got {}",
                            p.param_types.len(),
                            parameters.len()
                        ),
                    ));
                }
                let values = parameters
                    .iter()
                    .zip(p.param_types.iter().chain(std::iter::repeat(&TEXT)))
                    .map(|(e, ty)| {
                        let v = expr::bind(e, &expr::NoColumns(ctx))?.eval(&[])?;
                        types::coerce(v, *ty)
                    })
                    .collect::<SqlResult<Vec<_>>>()?;
                match &p.stmt {
                    None => Ok(Output::tag("")),
                    Some(Stmt::Sql(s)) => {
                        self.current = Some(Arc::clone(&p.generic));
                        let r = self.run_sql(s, &values);
                        self.current = None;
                        r
                    }
                    Some(u @ Stmt::Utility(_)) => self.run_stmt(u, &[]),
                }
            }
            Statement::Deallocate { name, .. } => {
                let key = expr::name_of(name);
                if key == "all" {
                    self.prepared.clear();
                    return Ok(Output::tag("DEALLOCATE ALL"));
                }
                if self.prepared.remove(&key).is_none() {
                    return Err(SqlError::new(
                        SqlState::INVALID_SQL_STATEMENT_NAME,
                        format!("prepared statement \"{key}\" does not exist"),
                    ));
                }
                Ok(Output::tag("DEALLOCATE"))
            }
            Statement::Analyze(_) => Ok(Output::tag("ANALYZE")),
            Statement::Vacuum(_) => self.utility(&Utility::Vacuum),
            Statement::CreateDatabase { .. } => Ok(Output::tag("CREATE DATABASE")),
            other => Err(SqlError::unsupported(format!(
                "the statement {}",
                first_words(&other.to_string())
            ))),
        }
    }

    /// A statement sqlparser does not parse, recognised by its words.
    fn utility(&mut self, u: &Utility) -> SqlResult<Output> {
        match u {
            Utility::Checkpoint => {
                self.db.store().checkpoint()?;
                Ok(Output::tag("CHECKPOINT"))
            }
            Utility::Vacuum => {
                if self.txn.is_some() {
                    return Err(SqlError::new(
                        SqlState::ACTIVE_SQL_TRANSACTION,
                        "VACUUM cannot run inside a transaction block",
                    ));
                }
                self.db.purge_now()?;
                Ok(Output::tag("VACUUM"))
            }
            Utility::AlterSequence => Ok(Output::tag("ALTER SEQUENCE")),
        }
    }

    fn set(&mut self, set: &ast::Set, ctx: Ctx<'_>) -> SqlResult<Output> {
        match set {
            ast::Set::SingleAssignment {
                variable,
                values,
                scope,
                ..
            } => {
                let local = matches!(scope, Some(ast::ContextModifier::Local));
                let name = variable.to_string();
                let value = values
                    .iter()
                    .map(|v| setting_text(v, ctx))
                    .collect::<SqlResult<Vec<_>>>()?
                    .join(", ");
                let per_block = name.eq_ignore_ascii_case("transaction_isolation")
                    || name.eq_ignore_ascii_case("transaction_read_only");
                if per_block && value.eq_ignore_ascii_case("default") {
                    // The block keeps what it began with (its defaults
                    // apply to the next one).
                } else if name.eq_ignore_ascii_case("transaction_isolation") {
                    self.set_isolation(settings::parse_isolation(
                        "transaction_isolation",
                        &value,
                    )?)?;
                } else if name.eq_ignore_ascii_case("transaction_read_only") {
                    self.set_read_only(settings::parse_bool("transaction_read_only", &value)?)?;
                } else if value.eq_ignore_ascii_case("default") {
                    self.change_settings(local, |s| s.reset(&name))?;
                } else {
                    self.change_settings(local, |s| s.set(&name, &value))?;
                }
            }
            ast::Set::SetTimeZone { value, local } => {
                let v = setting_text(value, ctx)?;
                self.change_settings(*local, |s| s.set("timezone", &v))?;
            }
            ast::Set::SetNames { charset_name, .. } => {
                let v = expr::name_of(charset_name);
                self.change_settings(false, |s| s.set("client_encoding", &v))?;
            }
            ast::Set::SetTransaction { modes, session, .. } => {
                // Every mode is checked before any is applied: a refused
                // one (SERIALIZABLE) leaves the others unapplied too.
                let (mut isolation, mut read_only) = (None, None);
                for m in modes {
                    match m {
                        ast::TransactionMode::IsolationLevel(l) => {
                            isolation = Some(isolation_of(l)?)
                        }
                        ast::TransactionMode::AccessMode(a) => {
                            read_only = Some(matches!(a, ast::TransactionAccessMode::ReadOnly));
                        }
                    }
                }
                if *session {
                    self.change_settings(false, |s| {
                        if let Some(i) = isolation {
                            s.set("default_transaction_isolation", settings::isolation_name(i))?;
                        }
                        if let Some(ro) = read_only {
                            s.set(
                                "default_transaction_read_only",
                                if ro { "on" } else { "off" },
                            )?;
                        }
                        Ok(())
                    })?;
                } else {
                    if let Some(ro) = read_only {
                        // Checked first: it may refuse (25001), and
                        // `set_isolation` begins the block again.
                        self.check_access_mode(ro)?;
                    }
                    if let Some(i) = isolation {
                        self.set_isolation(i)?;
                    }
                    if let Some(ro) = read_only {
                        self.set_read_only(ro)?;
                    }
                }
            }
            other => return Err(SqlError::unsupported(format!("{other}"))),
        }
        Ok(Output::tag("SET"))
    }

    /// `SET TRANSACTION ISOLATION LEVEL`: for the open block, which has
    /// run nothing yet (its transaction is begun again at that level).
    fn set_isolation(&mut self, i: Isolation) -> SqlResult<()> {
        if self.txn.is_none() {
            // PostgreSQL warns that it has no effect outside a block.
            return Ok(());
        }
        if self.block_ran {
            return Err(SqlError::new(
                SqlState::ACTIVE_SQL_TRANSACTION,
                "SET TRANSACTION ISOLATION LEVEL must be called before any query",
            ));
        }
        if let Some(tx) = self.txn.take() {
            tx.rollback()?;
        }
        self.isolation = i;
        self.txn = Some(self.begin_txn(i)?);
        Ok(())
    }

    /// Change the session's settings by `f`: at once, and, inside a
    /// block, as the block's commit leaves them unless `local` (SET
    /// LOCAL: until the block ends; outside a block it does nothing, as
    /// in PostgreSQL, which warns). The block's end applies what it keeps
    /// ([`Session::end_block_settings`]).
    fn change_settings(
        &mut self,
        local: bool,
        f: impl Fn(&mut Settings) -> SqlResult<()>,
    ) -> SqlResult<()> {
        if self.txn.is_none() {
            if local {
                return Ok(());
            }
            return f(&mut self.settings);
        }
        let kept = self
            .block_settings
            .get_or_insert_with(|| Box::new((self.settings.clone(), self.settings.clone())));
        if !local {
            f(&mut kept.1)?;
        }
        f(&mut self.settings)
    }

    /// The open block ended (`committed` or not): its SET LOCALs end, and
    /// a rolled-back block's SETs are undone.
    fn end_block_settings(&mut self, committed: bool) {
        if let Some(kept) = self.block_settings.take() {
            let (at_begin, after_commit) = *kept;
            self.settings = if committed { after_commit } else { at_begin };
        }
    }

    /// `SET TRANSACTION READ ONLY` / `READ WRITE`: for the open block (no
    /// effect outside one, as PostgreSQL, which warns). A block may turn
    /// read-only at any time, but read-write only before its first query
    /// (25001, as PostgreSQL).
    fn set_read_only(&mut self, ro: bool) -> SqlResult<()> {
        self.check_access_mode(ro)?;
        if self.txn.is_some() {
            self.read_only = ro;
        }
        Ok(())
    }

    /// 25001 if the open block may not take access mode `ro` now: a
    /// read-only block that ran a query cannot turn read-write.
    fn check_access_mode(&self, ro: bool) -> SqlResult<()> {
        if !ro && self.txn.is_some() && self.read_only && self.block_ran {
            return Err(SqlError::new(
                SqlState::ACTIVE_SQL_TRANSACTION,
                "transaction read-write mode must be set before any query",
            ));
        }
        Ok(())
    }

    /// Whether a statement run now runs read-only: the open block's mode,
    /// or `default_transaction_read_only` for a statement outside a block.
    fn runs_read_only(&self) -> bool {
        if self.txn.is_some() {
            self.read_only
        } else {
            self.settings.default_read_only()
        }
    }

    /// 25006 for a statement that writes (DML, COPY FROM, DDL, a locking
    /// SELECT) when it would run read-only, as PostgreSQL refuses it.
    fn check_writable(&self, stmt: &Statement) -> SqlResult<()> {
        if !self.runs_read_only() {
            return Ok(());
        }
        let what = match stmt {
            Statement::Insert(_) => "INSERT",
            Statement::Update(_) => "UPDATE",
            Statement::Delete(_) => "DELETE",
            Statement::Copy { to: false, .. } => "COPY FROM",
            Statement::CreateTable(_) => "CREATE TABLE",
            Statement::CreateIndex(_) => "CREATE INDEX",
            Statement::Drop {
                object_type: ast::ObjectType::Table,
                ..
            } => "DROP TABLE",
            Statement::Drop {
                object_type: ast::ObjectType::Index,
                ..
            } => "DROP INDEX",
            Statement::Drop { .. } => "DROP",
            Statement::Query(q) => match q.locks.first().map(|l| &l.lock_type) {
                None => return Ok(()),
                Some(ast::LockType::Share) => "SELECT FOR SHARE",
                Some(_) => "SELECT FOR UPDATE",
            },
            _ => return Ok(()),
        };
        Err(SqlError::new(
            SqlState::READ_ONLY_SQL_TRANSACTION,
            format!("cannot execute {what} in a read-only transaction"),
        ))
    }

    fn show(&self, variable: &[ast::Ident]) -> SqlResult<Output> {
        let column = show_column(variable);
        let name = column.as_str();
        let text = |v: String| Output {
            tag: "SHOW".into(),
            columns: vec![ColumnDesc {
                name: column.clone(),
                ty: TEXT,
            }],
            rows: vec![vec![Value::Text(v)]],
            copy: None,
        };
        // The transaction's own, not kept among the settings.
        let isolation = settings::isolation_name(if self.txn.is_some() {
            self.isolation
        } else {
            self.settings.default_isolation()
        });
        let read_only = if self.runs_read_only() { "on" } else { "off" };
        match name {
            "transaction_isolation" => Ok(text(isolation.into())),
            "transaction_read_only" => Ok(text(read_only.into())),
            "quill.status" => Ok(status::show(&self.db)),
            "all" => Ok(Output {
                tag: "SHOW".into(),
                columns: vec![
                    ColumnDesc {
                        name: "name".into(),
                        ty: TEXT,
                    },
                    ColumnDesc {
                        name: "setting".into(),
                        ty: TEXT,
                    },
                ],
                rows: {
                    let mut all: Vec<(&str, &str)> = self.settings.all().collect();
                    all.extend([
                        ("transaction_isolation", isolation),
                        ("transaction_read_only", read_only),
                    ]);
                    all.sort_unstable();
                    all.into_iter()
                        .map(|(k, v)| vec![Value::Text(k.into()), Value::Text(v.into())])
                        .collect()
                },
                copy: None,
            }),
            _ => Ok(text(self.settings.get(name)?.to_string())),
        }
    }

    /// A transaction whose lock waits this session's cancel flag, its
    /// statement's deadline and its `lock_timeout` end.
    fn begin_txn(&self, isolation: Isolation) -> SqlResult<OwnedTxn> {
        let mut tx = self.db.begin_owned_with(self.txn_options(isolation))?;
        tx.set_cancel(Some(Arc::clone(&self.cancel)));
        tx.set_stop_at(self.deadline);
        tx.set_lock_timeout(self.settings.lock_timeout());
        Ok(tx)
    }

    /// A cancel (57014) that the statement's `statement_timeout` caused,
    /// not the client (a row lock wait stopped at the deadline, which the
    /// engine reports as canceled), said as PostgreSQL says it.
    fn timed_out(&self, e: SqlError) -> SqlError {
        let by_client = self.cancel.load(std::sync::atomic::Ordering::Acquire);
        if e.state == SqlState::QUERY_CANCELED && !by_client && expr::past(self.deadline) {
            expr::canceled(true)
        } else {
            e
        }
    }

    fn txn_options(&self, isolation: Isolation) -> TxnOptions {
        TxnOptions {
            isolation,
            durability: self.settings.durability(),
        }
    }

    fn begin(&mut self, modes: &[ast::TransactionMode]) -> SqlResult<Output> {
        let mut isolation = self.settings.default_isolation();
        let mut read_only = self.settings.default_read_only();
        for m in modes {
            match m {
                ast::TransactionMode::IsolationLevel(l) => isolation = isolation_of(l)?,
                ast::TransactionMode::AccessMode(a) => {
                    read_only = matches!(a, ast::TransactionAccessMode::ReadOnly);
                }
            }
        }
        if self.txn.is_some() || self.failed {
            // PostgreSQL warns and carries on.
            return Ok(Output::tag("BEGIN"));
        }
        debug_assert!(
            self.block_settings.is_none(),
            "a block's kept settings outlived it"
        );
        self.isolation = isolation;
        self.read_only = read_only;
        self.block_ran = false;
        self.txn = Some(self.begin_txn(isolation)?);
        Ok(Output::tag("BEGIN"))
    }

    fn commit(&mut self) -> SqlResult<Output> {
        let failed = std::mem::take(&mut self.failed);
        match self.txn.take() {
            None => Ok(Output::tag(if failed { "ROLLBACK" } else { "COMMIT" })),
            Some(tx) if failed => {
                self.end_block_settings(false);
                tx.rollback()?;
                Ok(Output::tag("ROLLBACK"))
            }
            Some(tx) => {
                let r = self.finish(tx);
                self.end_block_settings(r.is_ok());
                r?;
                Ok(Output::tag("COMMIT"))
            }
        }
    }

    /// Commit `tx` now, or hand it to the caller of a deferred execution
    /// (which commits it, without blocking, before it reports the
    /// statement's result).
    fn finish(&mut self, tx: OwnedTxn) -> SqlResult<()> {
        if self.defer_commit {
            debug_assert!(self.pending_commit.is_none(), "one commit per statement");
            self.pending_commit = Some(tx);
        } else {
            tx.commit()?;
        }
        Ok(())
    }

    fn rollback(&mut self) -> SqlResult<Output> {
        self.failed = false;
        if let Some(tx) = self.txn.take() {
            self.end_block_settings(false);
            tx.rollback()?;
        }
        Ok(Output::tag("ROLLBACK"))
    }

    /// Run `f` in the block's transaction (failing the block if it fails)
    /// or in one of its own (committed on success).
    /// COPY FROM STDIN (data inline after the statement, or from the
    /// client next: [`CopyStream::In`]) or TO STDOUT, in text or CSV
    /// format. Files and programs are the server's filesystem, which a
    /// client has no business reaching: refused.
    #[allow(clippy::too_many_arguments)]
    fn copy_stmt(
        &mut self,
        source: &ast::CopySource,
        to: bool,
        target: &ast::CopyTarget,
        options: &[ast::CopyOption],
        legacy: &[ast::CopyLegacyOption],
        payload: Option<&ast::CopyPayload>,
        ctx: Ctx<'_>,
    ) -> SqlResult<Output> {
        let format = copy::CopyFormat::from_options(options, legacy)?;
        match (target, to) {
            (ast::CopyTarget::Stdin, false) | (ast::CopyTarget::Stdout, true) => {}
            _ => {
                return Err(SqlError::new(
                    SqlState::INSUFFICIENT_PRIVILEGE,
                    "COPY to or from a file or program is not allowed; use STDIN or STDOUT (psql's \\copy reads and writes the client's files)",
                ));
            }
        }
        if to {
            let query = match source {
                ast::CopySource::Query(q) => (**q).clone(),
                ast::CopySource::Table {
                    table_name,
                    columns,
                } => {
                    let cols = if columns.is_empty() {
                        "*".to_string()
                    } else {
                        columns
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    let sql = format!("SELECT {cols} FROM {table_name}");
                    match parse_statements(&sql)?.pop() {
                        Some(Stmt::Sql(st)) => match *st {
                            Statement::Query(q) => *q,
                            _ => return Err(SqlError::unsupported("COPY of this source")),
                        },
                        _ => return Err(SqlError::unsupported("COPY of this source")),
                    }
                }
            };
            let out = self.in_txn(|db, tx| {
                let plan = select::plan(db, &query, ctx, Some(&mut *tx))?;
                select::run(&plan, Some(tx), ctx)
            })?;
            let columns = out.columns.len();
            let mut lines = Vec::with_capacity(out.rows.len() + 1);
            if format.header {
                let names: Vec<Option<String>> =
                    out.columns.iter().map(|c| Some(c.name.clone())).collect();
                lines.push(copy::encode_row(&format, &names));
            }
            for r in &out.rows {
                let fields: Vec<Option<String>> = r.iter().map(types::to_text).collect();
                lines.push(copy::encode_row(&format, &fields));
            }
            if format.header && !lines.is_empty() {
                // One CopyData per row: the header rides with the first.
                let header = lines.remove(0);
                match lines.first_mut() {
                    Some(first) => {
                        let mut l = header;
                        l.append(first);
                        *first = l;
                    }
                    None => lines.push(header),
                }
            }
            return Ok(Output {
                tag: format!("COPY {}", out.rows.len()),
                copy: Some(CopyStream::Out { columns, lines }),
                ..Output::default()
            });
        }
        let ast::CopySource::Table {
            table_name,
            columns,
        } = source
        else {
            return Err(SqlError::new(
                SqlState::SYNTAX_ERROR,
                "COPY FROM takes a table, not a query",
            ));
        };
        let target = copy::Target::open(&self.db, table_name, columns)?;
        let width = target.width();
        self.block_ran = true;
        let own = match self.txn {
            Some(_) => None,
            None => Some(self.begin_txn(self.settings.default_isolation())?),
        };
        self.copy = Some(CopyIn {
            target,
            decoder: copy::Decoder::new(format),
            txn: own,
            rows: 0,
            error: None,
        });
        if let Some(p) = payload {
            // The data came inline (a script with COPY ... FROM stdin;
            // followed by its lines).
            self.copy_data(p.data.as_bytes())?;
            let d = self.copy_done_deferred()?;
            if let Some(tx) = d.commit {
                self.finish(tx)?;
            }
            return Ok(d.output);
        }
        Ok(Output {
            tag: "COPY".into(),
            copy: Some(CopyStream::In { columns: width }),
            ..Output::default()
        })
    }

    /// An INSERT, UPDATE or DELETE: from the running prepared statement's generic
    /// plan when it has one, else planned now by `plan_and_run`.
    fn write_stmt(
        &mut self,
        stmt: &Statement,
        params: &[Value],
        ctx: Ctx<'_>,
        plan_and_run: impl FnOnce(&Db, &mut OwnedTxn) -> SqlResult<Output>,
    ) -> SqlResult<Output> {
        let cache = self.current.take();
        self.in_txn(|db, tx| {
            if let Some(cache) = cache {
                let describe = Ctx {
                    params: None,
                    ..ctx
                };
                let mut stale = false;
                while let Some(g) = cache.write_plan(db, stmt, describe, stale) {
                    match g.run(tx, params, ctx) {
                        Some(r) => return r,
                        // Planned against an older schema: once more.
                        None if !stale => stale = true,
                        None => break,
                    }
                }
            }
            plan_and_run(db, tx)
        })
    }

    fn in_txn(
        &mut self,
        f: impl FnOnce(&Db, &mut OwnedTxn) -> SqlResult<Output>,
    ) -> SqlResult<Output> {
        self.block_ran = true;
        match self.txn.as_mut() {
            Some(tx) => f(&self.db, tx),
            None => {
                let mut tx = self.begin_txn(self.settings.default_isolation())?;
                match f(&self.db, &mut tx) {
                    Ok(out) => {
                        self.finish(tx)?;
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

/// The text type of SHOW's column.
const TEXT: ColumnType = ColumnType::Text {
    max_len: crate::types::MAX_VARLEN,
};

fn aborted() -> SqlError {
    SqlError::new(
        SqlState::IN_FAILED_SQL_TRANSACTION,
        "current transaction is aborted, commands ignored until end of transaction block",
    )
}

fn isolation_of(l: &ast::TransactionIsolationLevel) -> SqlResult<Isolation> {
    match l {
        ast::TransactionIsolationLevel::ReadCommitted
        | ast::TransactionIsolationLevel::ReadUncommitted => Ok(Isolation::ReadCommitted),
        ast::TransactionIsolationLevel::RepeatableRead => Ok(Isolation::RepeatableRead),
        ast::TransactionIsolationLevel::Serializable => Err(settings::serializable_refused()),
        other => Err(SqlError::unsupported(format!("isolation level {other}"))),
    }
}

/// The setting SHOW names, which is also its column's name: the words
/// of a dotted name (`quill.status`) come apart in the parse, and join
/// again with dots; `TRANSACTION ISOLATION LEVEL` and `TIME ZONE` are
/// the multi-word forms.
fn show_column(variable: &[ast::Ident]) -> String {
    let words: Vec<String> = variable.iter().map(|i| i.value.to_lowercase()).collect();
    match words.join(" ").as_str() {
        "transaction isolation level" => "transaction_isolation".into(),
        "time zone" => "timezone".into(),
        _ => words.join("."),
    }
}

/// A SET value as text (`'x'`, `x`, `1`, `DEFAULT`).
fn setting_text(e: &ast::Expr, ctx: Ctx<'_>) -> SqlResult<String> {
    match e {
        ast::Expr::Identifier(i) => Ok(i.value.clone()),
        ast::Expr::CompoundIdentifier(p) => Ok(p
            .iter()
            .map(|i| i.value.as_str())
            .collect::<Vec<_>>()
            .join(".")),
        e => {
            let v = expr::bind(e, &expr::NoColumns(ctx))?.eval(&[])?;
            Ok(types::to_text(&v).unwrap_or_default())
        }
    }
}

/// A statement: SQL sqlparser parsed, or a utility command it does not
/// parse.
#[derive(Clone, Debug)]
pub(crate) enum Stmt {
    Sql(Box<Statement>),
    Utility(Utility),
}

/// Commands recognised by their first words: `CHECKPOINT`, `VACUUM
/// (options) t` (PostgreSQL's parenthesised form), `ALTER SEQUENCE`
/// (accepted; Quill's automatic keys have no cache to size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Utility {
    Checkpoint,
    Vacuum,
    AlterSequence,
}

/// Parse `sql` into statements, recognising the utility commands.
fn parse_statements(sql: &str) -> SqlResult<Vec<Stmt>> {
    let words: Vec<String> = sql
        .split_whitespace()
        .take(2)
        .map(|w| w.trim_end_matches(';').to_ascii_lowercase())
        .collect();
    let single = sql.trim().trim_end_matches(';').find(';').is_none();
    let utility = match words
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["checkpoint"] => Some(Utility::Checkpoint),
        ["vacuum", ..] => Some(Utility::Vacuum),
        ["alter", "sequence"] => Some(Utility::AlterSequence),
        _ => None,
    };
    if let Some(u) = utility
        && single
    {
        return Ok(vec![Stmt::Utility(u)]);
    }
    Ok(parse(sql)?
        .into_iter()
        .map(|s| Stmt::Sql(Box::new(s)))
        .collect())
}

/// The statements [`Session::never_waits`] knows.
#[derive(Clone, Copy)]
enum Quick {
    Begin,
    Commit,
}

/// The command tag's first word for a statement.
fn command_of(s: &Stmt) -> &'static str {
    let s = match s {
        Stmt::Utility(Utility::Checkpoint) => return "CHECKPOINT",
        Stmt::Utility(Utility::Vacuum) => return "VACUUM",
        Stmt::Utility(Utility::AlterSequence) => return "ALTER SEQUENCE",
        Stmt::Sql(s) => s.as_ref(),
    };
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
        Statement::Set(_) => "SET",
        Statement::ShowVariable { .. } => "SHOW",
        Statement::Prepare { .. } => "PREPARE",
        Statement::Execute { .. } => "EXECUTE",
        _ => "",
    }
}

/// The first words of a statement, for messages.
fn first_words(s: &str) -> String {
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}
