//! `quill serve`: Quill over PostgreSQL's wire protocol (version 3), so
//! psql, libpq-based tools such as sysbench, psycopg, JDBC and
//! tokio-postgres reach it unmodified.
//!
//! The protocol is the `pgwire` crate's; this crate maps it onto
//! [`quill_sql::Session`] and never touches storage itself:
//! * [`conn`]: a connection's startup, simple and extended query
//!   protocols, cancel requests, and how statements run (on the blocking
//!   pool, admitted by active transactions, commits awaited without a
//!   thread; see its docs).
//! * [`wire`]: types, parameters and values on the wire.
//!
//! * [`auth`]: SCRAM-SHA-256 against a users file.
//! * [`socket`]: the connection's message loop, over a stream that lets
//!   only whole, consistent frames reach pgwire's decoders.
//!
//! One data directory is one database: a client may name any database
//! at startup. Authentication is trust unless a users file is given
//! ([`ServerConfig::users`]), then SCRAM-SHA-256 for every connection;
//! SSL and GSSAPI requests are answered `N`.

pub mod auth;
pub mod conn;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod socket;
pub mod wire;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quill::Db;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// The most transactions active at once: 16 per core, at least 64, and
/// below tokio's 512 blocking threads (each active statement takes one).
pub fn default_admission() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (16 * cores).clamp(64, 480)
}

/// How many Parses at once may wait on tokio's blocking pool for a table
/// a DDL statement holds ([`conn`]); more queue as tasks, holding no
/// thread. With [`default_admission`]'s 480 it keeps the pool (512
/// threads) from filling, so a statement that must block still gets one.
pub const SLOW_PARSES: usize = 16;

/// How a server listens and what it admits.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The address to listen on (`127.0.0.1:5433` by default).
    pub listen: SocketAddr,
    /// Connections beyond this are refused with 53300.
    pub max_connections: usize,
    /// The most transactions active at once ([`default_admission`]).
    pub max_active: usize,
    /// Who may connect, by SCRAM-SHA-256; `None` trusts every client
    /// (the CLI allows that on loopback addresses only).
    pub users: Option<Arc<auth::Users>>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 5433)),
            max_connections: 2000,
            max_active: default_admission(),
            users: None,
        }
    }
}

/// What every connection of a server shares.
pub(crate) struct Shared {
    pub(crate) db: Arc<Db>,
    /// Permits for active transactions ([`conn`]'s execution model).
    pub(crate) admission: Arc<Semaphore>,
    /// Permits for Parses waiting on the blocking pool ([`SLOW_PARSES`]).
    pub(crate) slow_parses: Arc<Semaphore>,
    pub(crate) connections: AtomicUsize,
    pub(crate) max_connections: usize,
    pub(crate) next_pid: AtomicI32,
    pub(crate) cancels: Mutex<HashMap<i32, conn::CancelEntry>>,
    pub(crate) users: Option<Arc<auth::Users>>,
}

/// A server bound to its address, not yet accepting.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl Server {
    /// Bind to `config.listen` (port 0 picks a free one). Must be called
    /// within tokio's multi-thread runtime.
    pub async fn bind(db: Arc<Db>, config: &ServerConfig) -> std::io::Result<Server> {
        Server::check_runtime()?;
        let listener = TcpListener::bind(config.listen).await?;
        Ok(Server::on(db, listener, config))
    }

    /// Serve on `listener`, bound already (`config.listen` is not used):
    /// a caller that binds before opening the database fails on a port in
    /// use before it creates or recovers anything. Must be called within
    /// tokio's multi-thread runtime.
    pub fn from_listener(
        db: Arc<Db>,
        listener: std::net::TcpListener,
        config: &ServerConfig,
    ) -> std::io::Result<Server> {
        Server::check_runtime()?;
        listener.set_nonblocking(true)?;
        Ok(Server::on(db, TcpListener::from_std(listener)?, config))
    }

    /// Statements run in `block_in_place` ([`conn`]), which needs the
    /// multi-thread runtime.
    fn check_runtime() -> std::io::Result<()> {
        if tokio::runtime::Handle::current().runtime_flavor()
            != tokio::runtime::RuntimeFlavor::MultiThread
        {
            return Err(std::io::Error::other(
                "quill-server needs tokio's multi-thread runtime",
            ));
        }
        Ok(())
    }

    fn on(db: Arc<Db>, listener: TcpListener, config: &ServerConfig) -> Server {
        Server {
            listener,
            shared: Arc::new(Shared {
                db,
                admission: Arc::new(Semaphore::new(config.max_active.max(1))),
                slow_parses: Arc::new(Semaphore::new(SLOW_PARSES)),
                connections: AtomicUsize::new(0),
                max_connections: config.max_connections,
                next_pid: AtomicI32::new(1),
                cancels: Mutex::new(HashMap::new()),
                users: config.users.clone(),
            }),
        }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accept connections until `shutdown` completes; each runs as a task
    /// of its own. Connections open at shutdown are left to finish with
    /// the runtime.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                _ = &mut shutdown => return Ok(()),
                a = self.listener.accept() => a,
            };
            let socket = match accepted {
                Ok((socket, _)) => socket,
                Err(e) => {
                    // Out of descriptors and the like: not the server's end.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = socket.set_nodelay(true);
            self.shared.connections.fetch_add(1, Ordering::Relaxed);
            let c = conn::Conn::new(self.shared.clone());
            tokio::spawn(async move {
                if let Err(e) = socket::serve(socket, conn::Handlers(c)).await {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
            });
        }
    }
}
