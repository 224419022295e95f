//! `quill torture`: real processes killed with SIGKILL at random moments,
//! the database recovered and checked after each kill. [`tree`] tortures
//! the bare B+tree and log, [`txn`] transactions.

pub mod tree;
pub mod txn;

use std::path::PathBuf;

use anyhow::Result;

/// Real-process crash test: a child process loads and updates a tree and
/// is killed with SIGKILL at random moments; after each kill the database
/// is recovered and checked (every acknowledged operation present,
/// nothing beyond a prefix of what the child did, every page valid). Runs
/// until --seconds have passed.
#[derive(clap::Args)]
pub struct TortureArgs {
    /// Directory for the test's database (emptied first; refused if it
    /// holds anything a Quill benchmark or test did not create).
    #[arg(long, default_value = "quill-bench/torture")]
    dir: PathBuf,
    /// How long to keep killing and recovering.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Seed for the operations and the kill times (random if absent).
    #[arg(long)]
    seed: Option<u64>,
    /// Torture transactions instead of the bare tree: concurrent
    /// writers move money between accounts, bump a counter and log a
    /// history row per transaction; after each kill the money must all
    /// be there, every acknowledged commit present in every table and
    /// index, nothing of an unacknowledged one half there, and `check`
    /// clean.
    #[arg(long)]
    txn: bool,
}

/// The child process of `quill torture` (not for direct use).
#[derive(clap::Args)]
pub struct ChildArgs {
    #[arg(long)]
    dir: PathBuf,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    round: u64,
    #[arg(long)]
    txn: bool,
}

/// Run `quill torture`.
pub fn run(a: TortureArgs) -> Result<()> {
    let TortureArgs {
        dir,
        seconds,
        seed,
        txn,
    } = a;
    let seed = seed.unwrap_or_else(rand::random);
    let name = if txn {
        "quill torture --txn"
    } else {
        "quill torture"
    };
    outln!(
        "{name}: seed {seed}, {seconds} s, in {} (rerun with --seed {seed})",
        dir.display()
    );
    let say = |l: String| outln!("{l}");
    if txn {
        let out = txn::run(&dir, seconds, seed, &say)?;
        outln!(
            "passed: {} rounds of kill -9 and recovery, {} transactions acknowledged, {} rolled back by recovery",
            out.rounds,
            out.acked,
            out.rolled_back
        );
    } else {
        let out = tree::run(&dir, seconds, seed, &say)?;
        outln!(
            "passed: {} rounds of kill -9 and recovery, {} operations acknowledged, {} entries at the end",
            out.rounds,
            out.acked,
            out.entries
        );
    }
    Ok(())
}

/// Run one child of `quill torture` until it is killed.
pub fn child(a: ChildArgs) -> Result<()> {
    if a.txn {
        txn::child(&a.dir, a.seed, a.round)
    } else {
        tree::child(&a.dir, a.seed, a.round)
    }
}
