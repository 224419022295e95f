//! One client connection: its session, startup, the simple and extended
//! query protocols, and how its statements run.
//!
//! Execution model:
//! * A connection is a tokio task (pgwire's `process_socket`); an idle
//!   one costs a task and its buffers, so thousands are cheap.
//! * A statement runs first on the connection's task, with waits refused
//!   ([`quill::wait`], [`Session::try_execute_prepared_deferred`]): an
//!   INSERT, UPDATE, DELETE or SELECT that finds its rows unlocked and its
//!   pages cached (nearly all of them) finishes there with no hand-off
//!   between threads. One that meets a wait (a row lock another
//!   transaction holds, a page on disk, a table under DDL) is undone and
//!   runs again in `tokio::task::block_in_place`, as every other
//!   statement does: tokio hands that worker's other tasks to another
//!   thread first, so a waiting statement never stalls other
//!   connections. (The hand-off per statement cost two context switches
//!   and three futex calls; see `bench/results/serve.md`.) A statement
//!   holds the session's mutex, and its commit does not hold a thread:
//!   the session hands the committed-but-not-yet-durable transaction
//!   back ([`quill_sql::Deferred`]) and the task awaits
//!   [`quill::OwnedTxn::commit_async`], so a thread never sleeps on the
//!   log's sync. BEGIN, and COMMIT of a block that has not failed, touch
//!   no row and cannot wait ([`quill_sql::Session::never_waits`]), so
//!   they run on the task without an attempt.
//! * Replies to a pipeline (Bind, Describe, Execute, Sync) leave in one
//!   write ([`crate::socket`], CORK.1 and CORK.2).
//! * Admission is by active transactions ([`crate::default_admission`]):
//!   a connection takes a permit when it starts a statement with no
//!   transaction open and gives it back when its session is idle again,
//!   so at most that many transactions (and so statements, and threads
//!   they block) are active, however many connections there are. (A Parse
//!   that must wait for a table under DDL holds no permit: it waits on
//!   tokio's blocking pool, at most [`crate::SLOW_PARSES`] at once, the
//!   others as queued tasks, so it strands no worker.) The bound
//!   is derived from the machine's cores and stays below tokio's 512
//!   blocking threads, so a statement waiting for a lock always has a
//!   thread, and the holder of that lock can always run its COMMIT (it
//!   holds a permit already). No setting to tune.
//!   ADM.1: a transaction keeps its permit until its commit is durable,
//!   although it holds no row lock and no thread while it waits. A
//!   `Sync` commit keeps its registry slot until then, and every read
//!   view scans the slots: giving the permit back at the commit mark let
//!   1,024 connections keep ~1,000 slots claimed, and the server ran 50%
//!   more instructions per transaction than at 64 (registry scans and a
//!   purge held back by the waiting commits; callgrind, see
//!   `bench/results/serve.md`), against the same count with the permit
//!   held.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::{Sink, SinkExt, stream};
use pgwire::api::auth::sasl::SCRAM_SHA_256_METHOD;
use pgwire::api::auth::sasl::scram::{ScramServerAuth, ScramServerAuthWaitingForClientFinal};
use pgwire::api::auth::{
    ServerParameterProvider, StartupHandler, finish_authentication, protocol_negotiation,
    save_startup_parameters_to_metadata,
};
use pgwire::api::cancel::CancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler, send_describe_response};
use pgwire::api::results::{
    CopyResponse, DataRowEncoder, DescribePortalResponse, DescribeStatementResponse, FieldInfo,
    QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{
    ClientInfo, ClientPortalStore, DEFAULT_NAME, METADATA_DATABASE, METADATA_USER,
    PgWireConnectionState, PgWireServerHandlers, Type,
};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage as Backend;
use pgwire::messages::cancel::CancelRequest;
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::data::ParameterDescription;
use pgwire::messages::extendedquery::{Describe, Execute};
use pgwire::messages::startup::{Authentication, PasswordMessageFamily, SecretKey};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use quill::catalog::Value;
use quill_sql::select::MAX_RESULT_ROWS;
use quill_sql::{
    CancelHandle, ColumnDesc, CopyStream, Deferred, Output, Prepared, Session, SessionInfo,
    SqlError, SqlResult, SqlState, TxnStatus,
};
use tokio::sync::OwnedSemaphorePermit;

use crate::socket::fatal;
use crate::wire::{self, Cell};
use crate::{Shared, auth};

/// The most bytes of parameters one Bind may carry.
pub const MAX_BIND_BYTES: usize = 16 << 20;

/// What CancelRequest needs of a connection: its secret and its
/// session's cancel handle.
pub(crate) type CancelEntry = (SecretKey, CancelHandle);

type SessionSlot = Arc<Mutex<Option<Session>>>;

/// A connection's state.
pub(crate) struct Conn {
    shared: Arc<Shared>,
    pid: i32,
    session: SessionSlot,
    permit: tokio::sync::Mutex<Option<OwnedSemaphorePermit>>,
    parser: Arc<Parser>,
    auth: Mutex<AuthStep>,
}

impl Conn {
    pub(crate) fn new(shared: Arc<Shared>) -> Arc<Conn> {
        let pid = shared.next_pid.fetch_add(1, Ordering::Relaxed);
        let session: SessionSlot = Arc::default();
        let slow = Arc::clone(&shared.slow_parses);
        Arc::new(Conn {
            shared,
            pid,
            parser: Arc::new(Parser {
                session: session.clone(),
                slow,
            }),
            session,
            permit: tokio::sync::Mutex::new(None),
            auth: Mutex::new(AuthStep::Done),
        })
    }

    /// Run a statement on the session under admission (a permit while a
    /// transaction is open), then finish a deferred commit without holding
    /// a thread. `inline` is called first, here on the connection's task:
    /// it runs the statement if it cannot wait (BEGIN, COMMIT:
    /// [`Session::never_waits`]) or if its attempt with waits refused met
    /// none ([`Session::try_execute_prepared_deferred`]); otherwise it
    /// returns what the rerun needs (a parsed text, or nothing), having
    /// changed nothing (session NA.1), and `blocking` runs the statement
    /// with it in `block_in_place` (tokio first hands this worker's other
    /// tasks to another thread, so it may block).
    async fn run<T: Send, R: Send>(
        &self,
        inline: impl FnOnce(&mut Session) -> Result<T, R> + Send,
        blocking: impl FnOnce(&mut Session, R) -> T + Send,
        commits: impl FnOnce(&mut T) -> Vec<quill::OwnedTxn> + Send,
    ) -> PgWireResult<(T, Vec<SqlResult<()>>)> {
        let mut permit = self.permit.lock().await;
        if permit.is_none() {
            let p = Arc::clone(&self.shared.admission)
                .acquire_owned()
                .await
                .map_err(|_| internal("the server is shutting down"))?;
            *permit = Some(p);
        }
        let lock = || self.session.lock().unwrap_or_else(PoisonError::into_inner);
        // One lock when the statement runs here; one more on the thread
        // that may block when it must go there.
        let (mut out, status) = {
            let mut g = lock();
            let s = session_of(&mut g)?;
            match inline(s) {
                Ok(out) => (out, s.status()),
                Err(rest) => {
                    drop(g);
                    tokio::task::block_in_place(|| {
                        let mut g = lock();
                        let s = session_of(&mut g)?;
                        let out = blocking(s, rest);
                        Ok::<_, PgWireError>((out, s.status()))
                    })?
                }
            }
        };
        // The permit is held until the commit is durable (ADM.1).
        let mut done = Vec::new();
        for tx in commits(&mut out) {
            done.push(tx.commit_async().await.map_err(SqlError::from));
        }
        if status == TxnStatus::Idle {
            *permit = None;
        }
        Ok((out, done))
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.shared.connections.fetch_sub(1, Ordering::Relaxed);
        self.shared
            .cancels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.pid);
        // An open transaction rolls back when its session is dropped;
        // that may write, so not on a tokio worker.
        let session = self
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(s) = session {
            match tokio::runtime::Handle::try_current() {
                Ok(h) => {
                    h.spawn_blocking(move || drop(s));
                }
                Err(_) => drop(s),
            }
        }
    }
}

/// The session of a connection whose startup finished.
fn session_of(g: &mut Option<Session>) -> PgWireResult<&mut Session> {
    g.as_mut()
        .ok_or_else(|| internal("no session: startup did not finish"))
}

/// [`Conn::run`]'s `inline` for what never runs on the connection's task
/// (COPY's data and end may roll its rows back).
fn not_inline<T>(_: &mut Session) -> Result<T, ()> {
    Err(())
}

fn internal(msg: impl Into<String>) -> PgWireError {
    wire::user_error(&SqlError::new(SqlState::INTERNAL_ERROR, msg.into()))
}

/// The tag's command word(s) without its row count (pgwire appends the
/// count of rows it sends).
fn command_of(tag: &str) -> String {
    match tag.rsplit_once(' ') {
        Some((head, n)) if n.parse::<u64>().is_ok() => head.to_string(),
        _ => tag.to_string(),
    }
}

/// The DataRows of `rows` under `fields`.
fn encode_rows(
    fields: &Arc<Vec<FieldInfo>>,
    rows: &[Vec<Value>],
) -> PgWireResult<Vec<PgWireResult<pgwire::messages::data::DataRow>>> {
    let mut enc = DataRowEncoder::new(fields.clone());
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        for v in r {
            enc.encode_field(&Cell(v))?;
        }
        out.push(Ok(enc.take_row()));
    }
    Ok(out)
}

/// An Output as pgwire's response (`columns`: how the client asked for
/// them, for a statement that returns rows).
fn response(out: Output, format: &Format, returns_rows: bool) -> PgWireResult<Response> {
    match out.copy {
        // Text format on the wire, for every column.
        Some(CopyStream::In { columns }) => {
            return Ok(Response::CopyIn(CopyResponse::new(
                0,
                columns,
                stream::empty(),
            )));
        }
        Some(CopyStream::Out { columns, lines }) => {
            let data = lines
                .into_iter()
                .map(|l| Ok(CopyData::new(bytes::Bytes::from(l))));
            return Ok(Response::CopyOut(CopyResponse::new(
                0,
                columns,
                stream::iter(data),
            )));
        }
        None => {}
    }
    if returns_rows || !out.columns.is_empty() {
        let fields = Arc::new(wire::fields(&out.columns, format));
        let rows = encode_rows(&fields, &out.rows)?;
        let mut q = QueryResponse::new(fields, stream::iter(rows));
        q.set_command_tag(&command_of(&out.tag));
        return Ok(Response::Query(q));
    }
    let tag = Tag::new(&out.tag);
    Ok(match out.tag.as_str() {
        "BEGIN" | "START TRANSACTION" => Response::TransactionStart(tag),
        "COMMIT" | "ROLLBACK" => Response::TransactionEnd(tag),
        "" => Response::EmptyQuery,
        _ => Response::Execution(tag),
    })
}

/// The row limit of an Execute as pgwire should apply it. As in
/// PostgreSQL, zero or less means every row. pgwire reserves room for the
/// limit before fetching, so a client's `i32::MAX` (or a negative limit,
/// which wraps to a huge `usize`) aborted the whole server on a failed
/// allocation (found by the bounded libFuzzer run, `fuzz/bounded.sh`). No
/// result holds more than [`MAX_RESULT_ROWS`] rows, so a limit above that
/// is the same as none.
pub(crate) fn row_limit(max_rows: i32) -> i32 {
    match usize::try_from(max_rows) {
        Ok(n) if n <= MAX_RESULT_ROWS => max_rows,
        _ => 0,
    }
}

/// The commit a statement left to the caller, if it left one.
fn deferred_commit(r: &mut SqlResult<Deferred>) -> Vec<quill::OwnedTxn> {
    r.as_mut()
        .ok()
        .and_then(|d| d.commit.take())
        .into_iter()
        .collect()
}

/// The outcome of a statement whose commit may have been deferred.
fn settle(r: SqlResult<Deferred>, commit: Option<SqlResult<()>>) -> SqlResult<Output> {
    let d = r?;
    if let Some(c) = commit {
        c?;
    }
    Ok(d.output)
}

#[async_trait]
impl SimpleQueryHandler for Conn {
    async fn do_query<C>(&self, _client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let (results, commits) = self
            .run(
                |s| {
                    if s.text_never_waits(query) {
                        Ok(s.execute_deferred(query))
                    } else {
                        s.try_execute_deferred(query).map(|r| vec![r])
                    }
                },
                Session::execute_parsed_deferred,
                |results: &mut Vec<SqlResult<Deferred>>| {
                    results
                        .iter_mut()
                        .filter_map(|r| r.as_mut().ok().and_then(|d| d.commit.take()))
                        .collect()
                },
            )
            .await?;
        // Only a one-statement text defers its commit.
        let single = results.len() == 1;
        let mut commits = commits.into_iter();
        let mut out = Vec::with_capacity(results.len());
        for r in results {
            let commit = if single { commits.next() } else { None };
            match settle(r, commit) {
                Ok(o) => out.push(response(o, &Format::UnifiedText, false)?),
                Err(e) => out.push(Response::Error(Box::new(wire::error_info(&e)))),
            }
        }
        Ok(out)
    }
}

/// COPY FROM STDIN's data, in the session that ran the COPY (which
/// inserts rows as their lines arrive and keeps the first error for
/// CopyDone).
#[async_trait]
impl CopyHandler for Conn {
    async fn on_copy_data<C>(&self, _client: &mut C, data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<Backend> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<Backend>>::Error>,
    {
        let bytes = data.data;
        let (r, _) = self
            .run(not_inline, |s, ()| s.copy_data(&bytes), |_| Vec::new())
            .await?;
        r.map_err(|e| wire::user_error(&e))
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<Backend> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<Backend>>::Error>,
    {
        let (r, commits) = self
            .run(not_inline, |s, ()| s.copy_done_deferred(), deferred_commit)
            .await?;
        let out = settle(r, commits.into_iter().next()).map_err(|e| wire::user_error(&e))?;
        client
            .send(Backend::CommandComplete(Tag::new(&out.tag).into()))
            .await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<Backend> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<Backend>>::Error>,
    {
        let message = fail.message;
        match self
            .run(not_inline, |s, ()| s.copy_fail(&message), |_| Vec::new())
            .await
        {
            Ok((e, _)) => wire::user_error(&e),
            Err(e) => e,
        }
    }
}

/// Parses statements for the extended protocol (Parse), with the
/// connection's session (it knows the catalog and the session's SQL-level
/// prepared statements).
pub(crate) struct Parser {
    session: SessionSlot,
    /// Permits to wait on the blocking pool ([`crate::SLOW_PARSES`]).
    slow: Arc<tokio::sync::Semaphore>,
}

#[async_trait]
impl QueryParser for Parser {
    type Statement = Arc<Prepared>;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Self::Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let given: Vec<_> = types
            .iter()
            .map(|t| t.as_ref().and_then(wire::column_type))
            .collect();
        // Parsing and binding read the catalog only: done here unless a
        // table is held by DDL (a plain CREATE INDEX holds it for its whole
        // build). Then on tokio's blocking pool, awaited: unlike a
        // statement, a Parse holds no admission permit, so any number of
        // connections may be here at once. At most SLOW_PARSES of them
        // hold a blocking thread; the rest wait as tasks, stranding no
        // worker and leaving the pool's threads to statements.
        let tried = session_of(&mut self.session.lock().unwrap_or_else(PoisonError::into_inner))?
            .try_prepare(sql, &given);
        let p = match tried {
            Some(r) => r,
            None => {
                let permit = Arc::clone(&self.slow)
                    .acquire_owned()
                    .await
                    .map_err(|_| internal("the server is shutting down"))?;
                let slot = Arc::clone(&self.session);
                let sql = sql.to_owned();
                tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    let mut g = slot.lock().unwrap_or_else(PoisonError::into_inner);
                    session_of(&mut g).map(|s| s.prepare(&sql, &given))
                })
                .await
                .map_err(|e| internal(format!("preparing the statement failed: {e}")))??
            }
        }
        .map_err(|e| wire::user_error(&e))?;
        Ok((!p.is_empty()).then(|| Arc::new(p)))
    }

    fn get_parameter_types(&self, stmt: &Self::Statement) -> PgWireResult<Vec<Type>> {
        Ok(stmt
            .param_types()
            .iter()
            .map(|t| wire::pg_type(*t))
            .collect())
    }

    fn get_result_schema(
        &self,
        stmt: &Self::Statement,
        column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        let cols: &[ColumnDesc] = stmt.columns().unwrap_or(&[]);
        let format = column_format.cloned().unwrap_or(Format::UnifiedText);
        wire::check_formats(&format, cols.len(), "result")?;
        Ok(wire::fields(cols, &format))
    }
}

/// The parameter values of a portal, decoded to their resolved types.
fn params(portal: &Portal<Arc<Prepared>>) -> PgWireResult<Vec<Value>> {
    let stmt = &portal.statement;
    let p = &stmt.statement;
    let want = p.param_types();
    if portal.parameters.len() != want.len() {
        return Err(wire::protocol_error(format!(
            "bind message supplies {} parameters, but prepared statement requires {}",
            portal.parameters.len(),
            want.len()
        )));
    }
    wire::check_formats(&portal.parameter_format, want.len(), "parameter")?;
    let total: usize = portal
        .parameters
        .iter()
        .map(|b| b.as_ref().map_or(0, |b| b.len()))
        .sum();
    if total > MAX_BIND_BYTES {
        return Err(wire::user_error(&SqlError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            format!("the parameters are {total} bytes, over the limit of {MAX_BIND_BYTES}"),
        )));
    }
    portal
        .parameters
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let ty = want
                .get(i)
                .copied()
                .ok_or_else(|| internal("parameter count"))?;
            let wire_ty = stmt
                .parameter_types
                .get(i)
                .cloned()
                .flatten()
                .unwrap_or_else(|| wire::pg_type(ty));
            wire::decode_param(
                i,
                b.as_deref(),
                portal.parameter_format.is_binary(i),
                &wire_ty,
                ty,
            )
        })
        .collect()
}

#[async_trait]
impl ExtendedQueryHandler for Conn {
    type Statement = Arc<Prepared>;
    type QueryParser = Parser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    async fn on_execute<C>(&self, client: &mut C, mut message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        message.max_rows = row_limit(message.max_rows);
        self._on_execute(client, message).await
    }

    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // As PostgreSQL: a statement is described by ParameterDescription
        // then RowDescription or NoData; a portal by the latter alone.
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        let (params, fields): (Option<Vec<Type>>, Vec<FieldInfo>) = match message.target_type {
            b'S' => match client.portal_store().get_statement(name) {
                Some(Entry::Value(stmt)) => {
                    let server = self.parser.get_parameter_types(&stmt.statement)?;
                    let types = (0..server.len().max(stmt.parameter_types.len()))
                        .map(|i| {
                            stmt.parameter_types
                                .get(i)
                                .cloned()
                                .flatten()
                                .or_else(|| server.get(i).cloned())
                                .unwrap_or(Type::UNKNOWN)
                        })
                        .collect();
                    let fields = self.parser.get_result_schema(&stmt.statement, None)?;
                    (Some(types), fields)
                }
                Some(Entry::Empty) => (Some(Vec::new()), Vec::new()),
                None => return Err(PgWireError::StatementNotFound(name.to_owned())),
            },
            b'P' => match client.portal_store().get_portal(name) {
                Some(Entry::Value(portal)) => {
                    let fields = self.parser.get_result_schema(
                        &portal.statement.statement,
                        Some(&portal.result_column_format),
                    )?;
                    (None, fields)
                }
                Some(Entry::Empty) => (None, Vec::new()),
                None => return Err(PgWireError::PortalNotFound(name.to_owned())),
            },
            other => return Err(PgWireError::InvalidTargetType(other)),
        };
        if let Some(types) = params {
            client
                .feed(PgWireBackendMessage::ParameterDescription(
                    ParameterDescription::new(types.iter().map(|t| t.oid()).collect()),
                ))
                .await?;
        }
        // A portal's response: RowDescription, or NoData without fields.
        send_describe_response(client, &DescribePortalResponse::new(fields)).await
    }

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        target: &StoredStatement<Self::Statement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let types = self.parser.get_parameter_types(&target.statement)?;
        let fields = self.parser.get_result_schema(&target.statement, None)?;
        Ok(DescribeStatementResponse::new(types, fields))
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        target: &Portal<Self::Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let fields = self.parser.get_result_schema(
            &target.statement.statement,
            Some(&target.result_column_format),
        )?;
        Ok(DescribePortalResponse::new(fields))
    }

    async fn do_query<C>(
        &self,
        _client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let values = params(portal)?;
        let p = portal.statement.statement.clone();
        let returns_rows = p.columns().is_some();
        let format = portal.result_column_format.clone();
        if let Some(cols) = p.columns() {
            wire::check_formats(&format, cols.len(), "result")?;
        }
        let (r, mut commits) = self
            .run(
                |s| {
                    if s.never_waits(&p) {
                        Ok(s.execute_prepared_deferred(&p, &values))
                    } else {
                        s.try_execute_prepared_deferred(&p, &values).ok_or(())
                    }
                },
                |s, ()| s.execute_prepared_deferred(&p, &values),
                deferred_commit,
            )
            .await?;
        // An error goes back as an Err: pgwire sends it, marks a block
        // failed and discards messages until Sync.
        let out = settle(r, commits.pop()).map_err(|e| wire::user_error(&e))?;
        response(out, &format, returns_rows)
    }
}

#[async_trait]
impl StartupHandler for Conn {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                protocol_negotiation(client, startup).await?;
                save_startup_parameters_to_metadata(client, startup);
                if self.shared.connections.load(Ordering::Relaxed) > self.shared.max_connections {
                    return Err(fatal(
                        SqlState::TOO_MANY_CONNECTIONS,
                        format!(
                            "sorry, too many clients already (this server admits {}; see quill serve --max-connections)",
                            self.shared.max_connections
                        ),
                    ));
                }
                if self.shared.users.is_none() {
                    return self.admit(client).await;
                }
                *self.auth.lock().unwrap_or_else(PoisonError::into_inner) = AuthStep::ClientFirst;
                client.set_state(PgWireConnectionState::AuthenticationInProgress);
                client
                    .send(PgWireBackendMessage::Authentication(Authentication::SASL(
                        vec![SCRAM_SHA_256_METHOD.to_string()],
                    )))
                    .await?;
                Ok(())
            }
            PgWireFrontendMessage::PasswordMessageFamily(m) => {
                let step = std::mem::replace(
                    &mut *self.auth.lock().unwrap_or_else(PoisonError::into_inner),
                    AuthStep::Done,
                );
                let user = client
                    .metadata()
                    .get(METADATA_USER)
                    .cloned()
                    .unwrap_or_default();
                match step {
                    AuthStep::ClientFirst => {
                        // pgwire's decoder trusts the length inside.
                        if let PasswordMessageFamily::Raw(body) = &m {
                            crate::socket::check_sasl_initial(body)
                                .map_err(|why| crate::socket::protocol_violation(&why))?;
                        }
                        let first = m.into_sasl_initial_response()?;
                        if first.auth_method != SCRAM_SHA_256_METHOD {
                            return Err(PgWireError::UnsupportedSASLAuthMethod(first.auth_method));
                        }
                        let data = first.data.ok_or_else(|| {
                            PgWireError::InvalidScramMessage("empty client-first message".into())
                        })?;
                        // A user that does not exist fails later, at the
                        // proof, like a wrong password.
                        let verifier = self
                            .shared
                            .users
                            .as_ref()
                            .and_then(|u| u.get(&user).cloned())
                            .unwrap_or_else(auth::Verifier::impossible);
                        let (server_first, waiting) = ScramServerAuth::new()
                            .on_client_first_message_with_secret(&data, verifier.secret())?;
                        *self.auth.lock().unwrap_or_else(PoisonError::into_inner) =
                            AuthStep::ClientFinal(Box::new(waiting));
                        client
                            .send(PgWireBackendMessage::Authentication(
                                Authentication::SASLContinue(server_first.into()),
                            ))
                            .await?;
                        Ok(())
                    }
                    AuthStep::ClientFinal(waiting) => {
                        let last = m.into_sasl_response()?;
                        let server_final =
                            waiting
                                .on_client_final_message(&last.data)
                                .map_err(|e| match e {
                                    PgWireError::InvalidPassword(_) => fatal(
                                        SqlState::INVALID_PASSWORD,
                                        format!(
                                            "password authentication failed for user \"{user}\""
                                        ),
                                    ),
                                    other => other,
                                })?;
                        client
                            .send(PgWireBackendMessage::Authentication(
                                Authentication::SASLFinal(server_final.into()),
                            ))
                            .await?;
                        self.admit(client).await
                    }
                    AuthStep::Done => Err(PgWireError::NoAuthenticationInProgress),
                }
            }
            _ if !matches!(
                *self.auth.lock().unwrap_or_else(PoisonError::into_inner),
                AuthStep::Done
            ) =>
            {
                Err(fatal(
                    SqlState::PROTOCOL_VIOLATION,
                    "expected a SASL response during authentication".into(),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// Where a connection's SCRAM exchange stands.
pub(crate) enum AuthStep {
    /// The server offered SCRAM-SHA-256 and waits for client-first.
    ClientFirst,
    /// Server-first sent; client-final carries the proof.
    ClientFinal(Box<ScramServerAuthWaitingForClientFinal>),
    /// No exchange running (trust, or it finished).
    Done,
}

impl Conn {
    /// The client is who it says (trust, or SCRAM succeeded): open its
    /// session and finish startup (AuthenticationOk, ParameterStatus,
    /// BackendKeyData, ReadyForQuery).
    async fn admit<C>(&self, client: &mut C) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let user = client
            .metadata()
            .get(METADATA_USER)
            .cloned()
            .unwrap_or_else(|| "quill".into());
        let database = client
            .metadata()
            .get(METADATA_DATABASE)
            .cloned()
            .unwrap_or_else(|| user.clone());
        let secret = SecretKey::I32(rand::random());
        client.set_pid_and_secret_key(self.pid, secret.clone());
        let session = Session::with_info(
            self.shared.db.clone(),
            SessionInfo {
                backend_pid: self.pid,
                database,
                user: user.clone(),
            },
        );
        self.shared
            .cancels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(self.pid, (secret, session.cancel_handle()));
        *self.session.lock().unwrap_or_else(PoisonError::into_inner) = Some(session);
        let app = client
            .metadata()
            .get("application_name")
            .cloned()
            .unwrap_or_default();
        finish_authentication(client, &Params { user, app }).await
    }
}

/// ParameterStatus at startup, as PostgreSQL 15 sends it.
struct Params {
    user: String,
    app: String,
}

impl ServerParameterProvider for Params {
    fn server_parameters<C>(&self, _client: &C) -> Option<HashMap<String, String>>
    where
        C: ClientInfo,
    {
        let v = |s: &str| s.to_string();
        Some(HashMap::from([
            (v("application_name"), self.app.clone()),
            (v("client_encoding"), v("UTF8")),
            (v("DateStyle"), v("ISO, MDY")),
            (v("default_transaction_read_only"), v("off")),
            (v("in_hot_standby"), v("off")),
            (v("integer_datetimes"), v("on")),
            (v("IntervalStyle"), v("postgres")),
            (v("is_superuser"), v("on")),
            (v("server_encoding"), v("UTF8")),
            (
                v("server_version"),
                format!("15.18 (Quill {})", env!("CARGO_PKG_VERSION")),
            ),
            (v("session_authorization"), self.user.clone()),
            (v("standard_conforming_strings"), v("on")),
            (v("TimeZone"), v("Etc/UTC")),
        ]))
    }
}

/// CancelRequest: cancel the statement of the connection with that pid,
/// if the secret matches.
pub(crate) struct Canceler(pub(crate) Arc<Shared>);

#[async_trait]
impl CancelHandler for Canceler {
    async fn on_cancel_request(&self, req: CancelRequest) {
        let cancels = self
            .0
            .cancels
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((secret, handle)) = cancels.get(&req.pid)
            && key_bytes(secret) == key_bytes(&req.secret_key)
        {
            handle.cancel();
        }
    }
}

/// A secret key's bytes (a CancelRequest carries them as sent; pgwire
/// reads a 3.0 client's four as bytes).
fn key_bytes(k: &SecretKey) -> Vec<u8> {
    match k {
        SecretKey::I32(x) => x.to_be_bytes().to_vec(),
        SecretKey::Bytes(b) => b.to_vec(),
    }
}

/// The handlers pgwire calls for one connection.
pub(crate) struct Handlers(pub(crate) Arc<Conn>);

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.0.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.0.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.0.clone()
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        Arc::new(Canceler(self.0.shared.clone()))
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        self.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_limits_above_any_result_or_below_one_mean_every_row() {
        assert_eq!(row_limit(0), 0);
        assert_eq!(row_limit(1), 1);
        assert_eq!(row_limit(100), 100);
        let most = i32::try_from(MAX_RESULT_ROWS).unwrap();
        assert_eq!(row_limit(most), most);
        assert_eq!(row_limit(most + 1), 0);
        assert_eq!(row_limit(i32::MAX), 0);
        assert_eq!(row_limit(-1), 0);
        assert_eq!(row_limit(i32::MIN), 0);
    }
}
