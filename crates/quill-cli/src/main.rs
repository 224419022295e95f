//! The `quill` command line: benchmarks, crash torture and inspection
//! tools. One module per command; [`ui`], [`results`] and [`out`] are
//! what they share.

#[macro_use]
mod out;
mod bench;
mod check;
mod dump;
mod inspect;
mod passwd;
mod results;
mod serve;
mod status;
mod torture;
mod ui;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// The binary's allocator. The library leaves the choice to the program
/// that embeds it; the `quill` tools use mimalloc, whose per-thread heaps
/// keep hundreds of benchmark client threads off shared allocator locks
/// (glibc's arenas are shared once threads outnumber them).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Quill: an embedded, crash-safe, transactional storage engine.
#[derive(Parser)]
#[command(name = "quill", version, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a benchmark (prints a table; --json writes results for scripts).
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// Serve a database over PostgreSQL's wire protocol (psql, sysbench,
    /// drivers): `quill serve`, then `psql -h 127.0.0.1 -p 5433`.
    Serve(serve::ServeArgs),
    /// Set or remove a user's password in a users file for
    /// `quill serve --users` (SCRAM-SHA-256 verifiers, never passwords).
    ///
    /// The file is created if missing. The password is read from the
    /// terminal (twice), or as the first line of standard input when it
    /// is a pipe: `echo "$PW" | quill passwd --users users alice`. The
    /// file keeps PostgreSQL's SCRAM-SHA-256 verifier, never the
    /// password, and is written readable by its owner only.
    Passwd(passwd::PasswdArgs),
    /// Print the state of a database: log layout, checkpoint, end of log,
    /// and the log statistics saved at its last clean close.
    Status(status::StatusArgs),
    /// Real-process crash test: a child process loads and updates a tree
    /// and is killed with SIGKILL at random moments; after each kill the
    /// database is recovered and checked (every acknowledged operation
    /// present, nothing beyond a prefix of what the child did, every page
    /// valid). Runs until --seconds have passed.
    Torture(torture::TortureArgs),
    /// The child process of `quill torture` (not for direct use).
    #[command(hide = true)]
    TortureChild(torture::ChildArgs),
    /// Check every table of a database: B+tree structure, every live row
    /// in every secondary index, every index entry backed by a version of
    /// its row, unique indexes unique. Opens the database read-only and
    /// writes nothing; a database that was not closed cleanly needs
    /// recovery first (--repair). Exits with status 1 if anything is wrong.
    Check(check::CheckArgs),
    /// List the records of a log from its checkpoint to its end.
    Dump(dump::DumpArgs),
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run(Cli::parse()) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Bench(cmd) => bench::run(cmd),
        Cmd::Check(a) => check::run(a),
        Cmd::Serve(a) => serve::run(a),
        Cmd::Passwd(a) => passwd::run(a),
        Cmd::Status(a) => status::run(a),
        Cmd::Dump(a) => dump::run(a),
        Cmd::Torture(a) => torture::run(a),
        Cmd::TortureChild(a) => torture::child(a),
    }
}
