//! `quill torture`: real-process crash testing. A child process
//! (`quill torture-child`) loads and updates a tree through the real file
//! system, printing `ack N` after each durable commit covering its first
//! N operations; the parent kills it with SIGKILL at a random moment,
//! reopens the database (recovery), and checks that the tree holds exactly
//! the effects of a prefix of the child's operations that includes every
//! acknowledged one, and passes its structural check. Then again, from the
//! recovered state, until the time is up.
//!
//! The operations are a pure function of (seed, round), so the parent
//! regenerates what the child did without being told.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::ops::Bound::Unbounded;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use quill::Durability;
use quill::btree::{Direction, Tree};
use quill::io::{RealFs, Vfs};
use quill::log::LogOptions;
use quill::page::PageId;
use quill::store::{Store, StoreOptions};
use rand::{Rng, RngExt, SeedableRng, rngs::SmallRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Small pages, pool and log, so splits, evictions, checkpoints and log
/// reuse all happen within a round.
pub fn options() -> StoreOptions {
    StoreOptions {
        page_size: 4096,
        pool_bytes: 1 << 20,
        log: LogOptions {
            file_size: 1 << 20,
            file_count: 4,
            buffer_size: 256 << 10,
            ..LogOptions::default()
        },
        ..StoreOptions::default()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
}

/// The operation stream of one round.
struct Ops(SmallRng);

impl Ops {
    fn new(seed: u64, round: u64) -> Ops {
        Ops(SmallRng::seed_from_u64(
            seed ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        ))
    }
    fn next_op(&mut self) -> Op {
        let r = &mut self.0;
        let key = r.random_range(0..3000u32).to_be_bytes().to_vec();
        if r.random_bool(0.25) {
            return Op::Del(key);
        }
        let len = match r.random_range(0..20) {
            0 => r.random_range(1100..9000),
            1..=4 => r.random_range(200..1000),
            _ => r.random_range(0..200),
        };
        let mut v = vec![0u8; len];
        r.fill_bytes(&mut v);
        Op::Put(key, v)
    }
    /// Operations in the next batch (one durable commit each).
    fn batch_len(&mut self) -> usize {
        self.0.random_range(1..20)
    }
}

fn apply(m: &mut Model, op: &Op) {
    match op {
        Op::Put(k, v) => {
            m.insert(k.clone(), v.clone());
        }
        Op::Del(k) => {
            m.remove(k);
        }
    }
}

/// The child: run round `round`'s operations until killed.
pub fn child(dir: &Path, seed: u64, round: u64) -> Result<()> {
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs::new());
    let store = if dir.join(quill::store::DATA_FILE).exists() {
        Store::open(vfs, dir, options())?
    } else {
        Store::create(vfs, dir, options())?
    };
    let root = match store.root(0)? {
        PageId(0) => {
            let t = Tree::create(&store)?;
            let mut mtr = store.mtr()?;
            store.set_root(&mut mtr, 0, t.root())?;
            if let Some(lsn) = mtr.commit()? {
                store.commit(lsn, Durability::Sync)?;
            }
            t.root()
        }
        r => r,
    };
    let tree = Tree::open(&store, root);
    let mut ops = Ops::new(seed, round);
    println!("ready");
    let mut done = 0u64;
    loop {
        let n = ops.batch_len();
        let mut last = None;
        for _ in 0..n {
            match ops.next_op() {
                Op::Put(k, v) => last = Some(tree.put(&k, &v)?),
                Op::Del(k) => {
                    if let Some(l) = tree.delete(&k)? {
                        last = Some(l);
                    }
                }
            }
            done += 1;
        }
        match last {
            Some(lsn) => store.commit(lsn, Durability::Sync)?,
            None => store.commit(store.log().end_lsn(), Durability::Sync)?,
        }
        println!("ack {done}");
    }
}

fn contents(store: &Store, root: PageId) -> Result<Model> {
    let t = Tree::open(store, root);
    let check = t.verify()?;
    let mut m = Model::new();
    for item in t.range(Unbounded, Unbounded, Direction::Forward) {
        let (k, v) = item?;
        m.insert(k, v);
    }
    if m.len() as u64 != check.entries {
        bail!("scan found {} entries, verify {}", m.len(), check.entries);
    }
    Ok(m)
}

/// One round: start `quill torture-child` (`--txn` for the transaction
/// child), wait for its "ready", let it run for 20 to 800 ms, kill it with
/// SIGKILL; returns the lines it printed and how long it ran.
pub fn kill_round(
    exe: &Path,
    dir: &Path,
    seed: u64,
    round: u64,
    txn: bool,
    rng: &mut SmallRng,
) -> Result<(Vec<String>, Duration)> {
    let mut cmd = Command::new(exe);
    cmd.arg("torture-child");
    if txn {
        cmd.arg("--txn");
    }
    let mut child = cmd
        .arg("--dir")
        .arg(dir)
        .args(["--seed", &seed.to_string(), "--round", &round.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the child process")?;
    let stdout = child.stdout.take().context("child stdout")?;
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(l) if l == "ready" => {}
        other => {
            let _ = child.kill();
            bail!("round {round}: child did not start: {other:?}");
        }
    }
    let run_for = Duration::from_millis(rng.random_range(20..800));
    std::thread::sleep(run_for);
    child.kill().context("SIGKILL")?;
    let status = child.wait()?;
    let _ = reader.join();
    if status.success() {
        bail!("round {round}: the child exited on its own (it should run until killed)");
    }
    Ok((rx.try_iter().collect(), run_for))
}

/// What a torture run did.
pub struct Outcome {
    /// Kill-and-recover rounds.
    pub rounds: u64,
    /// Operations acknowledged in total.
    pub acked: u64,
    /// Entries in the tree at the end.
    pub entries: usize,
}

/// A torture parent's start: the binary its children run, and `dir`
/// emptied for the first round.
pub fn prepare(dir: &Path) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the quill binary")?;
    quill_bench::fresh_dir(&RealFs::new(), dir)?;
    Ok(exe)
}

/// The parent: rounds of run, kill, recover, check, for `seconds`.
pub fn run(dir: &Path, seconds: f64, seed: u64, say: &dyn Fn(String)) -> Result<Outcome> {
    let exe = prepare(dir)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut model = Model::new();
    let mut root = None;
    let mut rounds = 0u64;
    let mut total_acked = 0u64;
    while started.elapsed().as_secs_f64() < seconds || rounds == 0 {
        let round = rounds;
        let (lines, run_for) = kill_round(&exe, dir, seed, round, false, &mut rng)?;
        let acked = lines
            .iter()
            .filter_map(|l| l.strip_prefix("ack ").and_then(|n| n.parse::<u64>().ok()))
            .max()
            .unwrap_or(0);
        // Recover and check.
        let vfs: Arc<dyn Vfs> = Arc::new(RealFs::new());
        let store = Store::open(vfs, dir, options())
            .with_context(|| format!("round {round}: recovery failed"))?;
        let r = match root {
            Some(r) => r,
            None => {
                let r = store.root(0)?;
                if r == PageId(0) {
                    bail!("round {round}: the tree's root slot is empty after \"ready\"");
                }
                root = Some(r);
                r
            }
        };
        let got =
            contents(&store, r).with_context(|| format!("round {round}: checking the tree"))?;
        let mut ops = Ops::new(seed, round);
        let mut m = model.clone();
        let mut n = 0u64;
        // Replay the acknowledged prefix, then look a few batches beyond.
        let mut found = None;
        'batches: loop {
            if n >= acked && got == m {
                found = Some(n);
                break;
            }
            if n > acked + 200 {
                break;
            }
            let b = ops.batch_len();
            for _ in 0..b {
                apply(&mut m, &ops.next_op());
                n += 1;
                if n > acked && got == m {
                    found = Some(n);
                    break 'batches;
                }
            }
        }
        let Some(k) = found else {
            bail!(
                "round {round} (seed {seed}): the recovered tree ({} entries) is not the state after \
                 any prefix of the child's operations that includes the {acked} acknowledged",
                got.len()
            );
        };
        let rec = store.recovery().cloned();
        store.close()?;
        model = got;
        total_acked += acked;
        rounds += 1;
        say(format!(
            "round {round}: killed after {} ms, {acked} operations acknowledged, recovered {k} ({} entries; replayed {} records in {:.1} ms, {} pages repaired)",
            run_for.as_millis(),
            model.len(),
            rec.as_ref().map_or(0, |r| r.records_applied),
            rec.as_ref()
                .map_or(0.0, |r| r.duration.as_secs_f64() * 1000.0),
            rec.as_ref().map_or(0, |r| r.pages_repaired.len()),
        ));
    }
    Ok(Outcome {
        rounds,
        acked: total_acked,
        entries: model.len(),
    })
}
