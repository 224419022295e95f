//! `quill torture --txn`: real-process crash testing of transactions. A
//! child process (`quill torture-child --txn`) runs concurrent writers,
//! each committing transactions (durable) that move money between two
//! accounts, bump the writer's counter row and log a history row (a table
//! with a hidden row id and a secondary index), printing `ack W N` once
//! writer W's commit that set its counter to N has returned. The parent
//! kills it with SIGKILL at a random moment, reopens the database (redo,
//! then rollback of transactions that never committed) and checks: the
//! money is all there (transfers are atomic), each counter is at least
//! its last acknowledged value, each counter equals the number of the
//! writer's history rows found through the index (a transaction is all or
//! nothing across tables and indexes), and `check` finds every index
//! consistent. Then again, from the recovered state, until time is up.

use std::collections::HashMap;
use std::ops::Bound::{Included, Unbounded};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use quill::btree::Direction;
use quill::catalog::schema::{IndexDef, TableDef};
use quill::catalog::{Column, ColumnType, Value};
use quill::db::{Db, Options, Table};
use rand::{RngExt, SeedableRng, rngs::SmallRng};

const WRITERS: i64 = 4;
const ACCOUNTS: i64 = 20;
const OPENING: i64 = 1000;

fn options() -> Options {
    Options {
        store: super::tree::options(),
        ..Options::default()
    }
}

fn int(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Int64(x)) => *x,
        _ => 0,
    }
}

fn tables(db: &Db) -> Result<(Table, Table)> {
    if db.table("accounts").is_err() {
        let acc = db.create_table(TableDef {
            name: "accounts".into(),
            columns: vec![
                Column::new("id", ColumnType::Int64, false),
                Column::new("balance", ColumnType::Int64, false),
            ],
            primary_key: vec![0],
            indexes: vec![IndexDef {
                name: "by_balance".into(),
                columns: vec![1],
                unique: false,
            }],
        })?;
        db.create_table(TableDef {
            name: "history".into(),
            columns: vec![
                Column::new("writer", ColumnType::Int64, false),
                Column::new("seq", ColumnType::Int64, false),
                Column::new("note", ColumnType::Text { max_len: 300 }, false),
            ],
            primary_key: vec![],
            indexes: vec![IndexDef {
                name: "by_writer".into(),
                columns: vec![0, 1],
                unique: true,
            }],
        })?;
        let mut tx = db.begin()?;
        for id in 0..ACCOUNTS {
            tx.insert(&acc, &[Value::Int64(id), Value::Int64(OPENING)])?;
        }
        for w in 0..WRITERS {
            tx.insert(&acc, &[Value::Int64(1000 + w), Value::Int64(0)])?;
        }
        tx.commit()?;
    }
    Ok((db.table("accounts")?, db.table("history")?))
}

/// The child: writers run until killed.
pub fn child(dir: &Path, seed: u64, round: u64) -> Result<()> {
    let db = Db::open(dir, options())?;
    let (acc, his) = tables(&db)?;
    println!("ready");
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (db, acc, his) = (&db, &acc, &his);
            s.spawn(move || -> Result<()> {
                let mut rng = SmallRng::seed_from_u64(seed ^ (round << 8) ^ w as u64);
                loop {
                    let a = rng.random_range(0..ACCOUNTS);
                    let b = rng.random_range(0..ACCOUNTS);
                    let amount = rng.random_range(1..100);
                    let note = "n".repeat(rng.random_range(0..300));
                    let r = (|| -> quill::Result<i64> {
                        let mut tx = db.begin()?;
                        if a != b {
                            let ra = tx.get_for_update(acc, &[Value::Int64(a)])?;
                            let rb = tx.get_for_update(acc, &[Value::Int64(b)])?;
                            let (ba, bb) = (
                                int(ra.as_ref().and_then(|r| r.get(1))),
                                int(rb.as_ref().and_then(|r| r.get(1))),
                            );
                            tx.update(acc, &[Value::Int64(a)], &[(1, Value::Int64(ba - amount))])?;
                            tx.update(acc, &[Value::Int64(b)], &[(1, Value::Int64(bb + amount))])?;
                        }
                        let c = tx.get_for_update(acc, &[Value::Int64(1000 + w)])?;
                        let n = int(c.as_ref().and_then(|r| r.get(1))) + 1;
                        tx.update(acc, &[Value::Int64(1000 + w)], &[(1, Value::Int64(n))])?;
                        tx.insert(his, &[Value::Int64(w), Value::Int64(n), Value::Text(note)])?;
                        tx.commit()?;
                        Ok(n)
                    })();
                    match r {
                        Ok(n) => println!("ack {w} {n}"),
                        Err(e) if e.is_retryable() => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            });
        }
    });
    Ok(())
}

/// What a transactional torture run did.
pub struct Outcome {
    /// Kill-and-recover rounds.
    pub rounds: u64,
    /// Transactions acknowledged in total.
    pub acked: u64,
    /// Transactions rolled back by recovery in total.
    pub rolled_back: u64,
}

fn verify(db: &Db, acked: &HashMap<i64, i64>, round: u64) -> Result<i64> {
    let (acc, his) = tables(db)?;
    let mut tx = db.begin()?;
    let rows: Vec<Vec<Value>> = tx
        .scan(&acc, Unbounded, Unbounded, Direction::Forward)?
        .collect::<quill::Result<_>>()?;
    let money: i64 = rows
        .iter()
        .filter(|r| int(r.first()) < 1000)
        .map(|r| int(r.get(1)))
        .sum();
    if money != ACCOUNTS * OPENING {
        bail!(
            "round {round}: the accounts hold {money}, not {} (a transfer was torn)",
            ACCOUNTS * OPENING
        );
    }
    let mut total = 0;
    for w in 0..WRITERS {
        let counter = rows
            .iter()
            .find(|r| int(r.first()) == 1000 + w)
            .map(|r| int(r.get(1)))
            .unwrap_or(-1);
        let logged = tx
            .index_scan(
                &his,
                "by_writer",
                Included(&[Value::Int64(w)]),
                Included(&[Value::Int64(w)]),
                Direction::Forward,
            )?
            .count() as i64;
        if counter != logged {
            bail!(
                "round {round}: writer {w}'s counter is {counter} but it has {logged} history rows"
            );
        }
        let need = acked.get(&w).copied().unwrap_or(0);
        if counter < need {
            bail!(
                "round {round}: writer {w}'s counter is {counter}, below the acknowledged {need}"
            );
        }
        total += counter;
    }
    tx.commit()?;
    let report = db.check()?;
    if !report.is_ok() {
        bail!("round {round}: check found {:?}", report.problems);
    }
    Ok(total)
}

/// The parent: rounds of run, kill, recover, check, for `seconds`.
pub fn run(dir: &Path, seconds: f64, seed: u64, say: &dyn Fn(String)) -> Result<Outcome> {
    let exe = super::tree::prepare(dir)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let started = Instant::now();
    let (mut rounds, mut total_acked, mut rolled_back) = (0u64, 0u64, 0u64);
    let mut before = 0i64;
    while started.elapsed().as_secs_f64() < seconds || rounds == 0 {
        let round = rounds;
        let (lines, run_for) = super::tree::kill_round(&exe, dir, seed, round, true, &mut rng)?;
        let mut acked: HashMap<i64, i64> = HashMap::new();
        let mut n_acked = 0u64;
        for l in &lines {
            let mut parts = l.split_whitespace();
            if parts.next() == Some("ack")
                && let (Some(w), Some(n)) = (parts.next(), parts.next())
                && let (Ok(w), Ok(n)) = (w.parse::<i64>(), n.parse::<i64>())
            {
                let e = acked.entry(w).or_insert(0);
                *e = (*e).max(n);
                n_acked += 1;
            }
        }
        let db =
            Db::open(dir, options()).with_context(|| format!("round {round}: recovery failed"))?;
        let total = verify(&db, &acked, round)?;
        let rec = db.stats().recovery.unwrap_or_default();
        db.close()?;
        if total < before {
            bail!(
                "round {round}: {total} transactions survive, fewer than the {before} before this round"
            );
        }
        say(format!(
            "round {round}: killed after {} ms, {n_acked} transactions acknowledged, {} in the database, {} rolled back by recovery in {:.1} ms",
            run_for.as_millis(),
            total,
            rec.rolled_back.len(),
            rec.duration.as_secs_f64() * 1e3
        ));
        before = total;
        total_acked += n_acked;
        rolled_back += rec.rolled_back.len() as u64;
        rounds += 1;
    }
    Ok(Outcome {
        rounds,
        acked: total_acked,
        rolled_back,
    })
}
