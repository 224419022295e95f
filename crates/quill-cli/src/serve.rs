//! `quill serve`: the database in a directory, served over PostgreSQL's
//! wire protocol until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};

use crate::inspect::DEFAULT_DIR;

/// Serve a database over PostgreSQL's wire protocol: psql, sysbench,
/// psycopg, JDBC and other PostgreSQL clients connect to it unmodified.
/// The directory is created on first use; one directory is one database
/// (clients may name any database). Stops cleanly on Ctrl-C or SIGTERM.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Database directory.
    #[arg(long, default_value = DEFAULT_DIR)]
    dir: PathBuf,
    /// Address to listen on. Without --users connections are trusted (no
    /// password), so a non-loopback address needs --users (or
    /// --trust-all).
    #[arg(long, default_value = "127.0.0.1:5433")]
    listen: SocketAddr,
    /// Authenticate every connection by SCRAM-SHA-256 against this users
    /// file (`name:SCRAM-SHA-256$...` lines, PostgreSQL's verifier form;
    /// make one with `quill passwd --users FILE NAME`).
    #[arg(long, value_name = "FILE")]
    users: Option<PathBuf>,
    /// Refuse connections beyond this many (SQLSTATE 53300); at least 1.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Buffer pool: memory for cached pages (examples: 512M, 4G). Scans
    /// of tables larger than this read from disk, with read-ahead.
    #[arg(long, default_value = "128M", value_name = "SIZE", value_parser = crate::ui::parse_size)]
    pool: u64,
    /// Accept connections on a non-loopback address without
    /// authentication (anyone who reaches the port has full access).
    #[arg(long, conflicts_with = "users")]
    trust_all: bool,
    /// Sleep this many milliseconds after every log and data sync, to
    /// stand in for a slow device (benchmarks of the commit path; the
    /// data stays as durable as without it).
    #[arg(long, default_value_t = 0.0, value_name = "MS", hide_short_help = true)]
    fsync_delay_ms: f64,
}

impl ServeArgs {
    /// `--max-connections` as a count.
    fn max_connections(&self) -> usize {
        usize::try_from(self.max_connections).unwrap_or(usize::MAX)
    }
}

/// The smallest `--pool`: a few hundred pages of the default size.
const MIN_POOL: u64 = 8 << 20;

/// Refuse to create a database in a directory that holds other files:
/// a mistyped `--dir` (a home or project directory) would otherwise get a
/// database's files among its own. An empty or missing directory, or one
/// that holds a database, is served.
fn check_dir(dir: &std::path::Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!(
            "{} is a file, not a directory: give --dir a new or empty directory (or the \
             directory of an existing database)",
            dir.display()
        );
    }
    let Ok(mut entries) = std::fs::read_dir(dir) else {
        // Missing (created at open), or unreadable: the open says why.
        return Ok(());
    };
    let has_database =
        dir.join(quill::store::DATA_FILE).exists() || dir.join(quill::store::LOG_DIR).exists();
    if !has_database && entries.next().is_some() {
        bail!(
            "{} holds files but no Quill database: give --dir a new or empty directory \
             (or the directory of an existing database)",
            dir.display()
        );
    }
    Ok(())
}

/// Refuse a pool below [`MIN_POOL`] or above this machine's memory, before
/// anything is created: the pool is allocated whole at open.
fn check_pool(pool: u64) -> Result<()> {
    if pool < MIN_POOL {
        bail!(
            "--pool {pool} bytes ({:.1} MiB) is too small: give it at least {} MiB (examples: 64M, 1G)",
            pool as f64 / f64::from(1u32 << 20),
            MIN_POOL >> 20
        );
    }
    if let Some(memory) = quill_bench::memory_bytes()
        && pool > memory
    {
        bail!(
            "--pool {} MiB is more than this machine's memory ({} MiB): give it at most that, \
             and leave room for the rest of the system",
            pool >> 20,
            memory >> 20
        );
    }
    Ok(())
}

/// Run `quill serve`.
pub fn run(a: ServeArgs) -> Result<()> {
    let users = match &a.users {
        Some(path) => {
            let users = quill_server::auth::Users::load(path)?;
            if users.is_empty() {
                bail!(
                    "{} has no users: nobody could connect. Add one with: quill passwd --users {} NAME",
                    path.display(),
                    path.display()
                );
            }
            Some(Arc::new(users))
        }
        None => None,
    };
    if !a.listen.ip().is_loopback() && users.is_none() && !a.trust_all {
        bail!(
            "{} is not a loopback address and no --users file was given: anyone who reaches the \
             port could read and change every table. Create users with `quill passwd --users \
             FILE NAME` and pass --users FILE (SCRAM-SHA-256), listen on 127.0.0.1 (the \
             default), or pass --trust-all if the network is yours alone",
            a.listen
        );
    }
    if !(a.fsync_delay_ms.is_finite() && (0.0..=10_000.0).contains(&a.fsync_delay_ms)) {
        bail!(
            "--fsync-delay-ms must be between 0 and 10000, not {}",
            a.fsync_delay_ms
        );
    }
    check_pool(a.pool)?;
    check_dir(&a.dir)?;
    let vfs = Arc::new(quill::io::RealFs::with_sync_delay(
        std::time::Duration::from_secs_f64(a.fsync_delay_ms / 1000.0),
    ));
    // Every connection may hold a transaction open (a block, or a commit
    // waiting to be durable, which keeps its registry slot until then):
    // room for all of them, with headroom.
    let options = quill::Options {
        max_transactions: quill::Options::default()
            .max_transactions
            .max(a.max_connections().saturating_mul(2).saturating_add(64)),
        store: quill::store::StoreOptions {
            pool_bytes: a.pool,
            ..quill::store::StoreOptions::default()
        },
        ..quill::Options::default()
    };
    // The port first: a port in use fails before the database is opened
    // (or created), so it leaves nothing to recover.
    let listener = std::net::TcpListener::bind(a.listen)
        .with_context(|| format!("listening on {}", a.listen))?;
    let db = quill::Db::open_with(vfs, &a.dir, options)
        .with_context(|| format!("opening the database in {}", a.dir.display()))?;
    let db = Arc::new(db);
    let served = serve_on(&a, listener, users, &db);
    // Whatever ended the serving, the database is closed: cleanly when no
    // connection holds it any more.
    let closed = match Arc::try_unwrap(db) {
        Ok(db) => db.close().context("closing the database"),
        Err(_) => {
            eprintln!(
                "quill: connections were still open at shutdown; the database closes without a final checkpoint (recovery at the next open replays the log)"
            );
            Ok(())
        }
    };
    match (served, closed) {
        // The serving's error is the one to report; a close that failed
        // after it is said too.
        (Err(e), Err(c)) => {
            eprintln!("quill: {c:#}");
            Err(e)
        }
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        (Ok(()), Ok(())) => Ok(()),
    }
}

/// Serve `db` on `listener` until Ctrl-C or SIGTERM, then let the
/// connections end (their sessions roll back what is open).
fn serve_on(
    a: &ServeArgs,
    listener: std::net::TcpListener,
    users: Option<Arc<quill_server::auth::Users>>,
    db: &Arc<quill::Db>,
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("quill-serve")
        .build()
        .context("starting the async runtime")?;
    let config = quill_server::ServerConfig {
        listen: a.listen,
        max_connections: a.max_connections(),
        users,
        ..quill_server::ServerConfig::default()
    };
    let served = runtime.block_on(async {
        let server = quill_server::Server::from_listener(db.clone(), listener, &config)
            .with_context(|| format!("listening on {}", a.listen))?;
        let addr = server.local_addr()?;
        let auth = match &a.users {
            Some(f) => format!("SCRAM-SHA-256 passwords from {}", f.display()),
            None => "trust: no passwords".to_string(),
        };
        eprintln!(
            "quill: serving {} on {addr} ({auth}); connect with: psql -h {} -p {}",
            a.dir.display(),
            addr.ip(),
            addr.port()
        );
        server.run(shutdown_signal()).await?;
        eprintln!("quill: shutting down");
        anyhow::Ok(())
    });
    // Let connection tasks end (their sessions roll back what is open).
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    served
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
