//! A small bank on Quill's embedded API: a table with a primary key and
//! two secondary indexes, concurrent transfers that retry on deadlocks,
//! a REPEATABLE READ snapshot, and range scans over the primary key and
//! an index.
//!
//! Run: `cargo run --release --example bank [DIR]`. Without `DIR` the
//! bank lives in a temporary directory removed at the end; a `DIR` given
//! must be new or empty, and keeps the database for `quill status DIR`.

use std::ops::Bound::{Included, Unbounded};

use quill::btree::Direction;
use quill::catalog::schema::{IndexDef, TableDef};
use quill::catalog::{Column, ColumnType, Value};
use quill::db::{Db, Isolation, Options, Table, TxnOptions};

fn balance(row: &[Value]) -> i64 {
    match row.get(2) {
        Some(Value::Int64(b)) => *b,
        _ => 0,
    }
}

/// Move `amount` from account `from` to account `to` in one transaction,
/// retrying when it is chosen as a deadlock victim.
fn transfer(db: &Db, accounts: &Table, from: i64, to: i64, amount: i64) -> quill::Result<()> {
    loop {
        let attempt = (|| {
            let mut tx = db.begin()?;
            // Locking reads: nobody changes these rows until we commit.
            let a = tx.get_for_update(accounts, &[Value::Int64(from)])?;
            let b = tx.get_for_update(accounts, &[Value::Int64(to)])?;
            let (Some(a), Some(b)) = (a, b) else {
                return tx.rollback();
            };
            tx.update(
                accounts,
                &[Value::Int64(from)],
                &[(2, Value::Int64(balance(&a) - amount))],
            )?;
            tx.update(
                accounts,
                &[Value::Int64(to)],
                &[(2, Value::Int64(balance(&b) + amount))],
            )?;
            tx.commit() // durable when it returns
        })();
        match attempt {
            Err(e) if e.is_retryable() => continue,
            other => return other,
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_temporary, dir) = match std::env::args_os().nth(1) {
        Some(dir) => {
            let dir = std::path::PathBuf::from(dir);
            if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
                return Err(format!("{} is not empty: give a new directory", dir.display()).into());
            }
            (None, dir)
        }
        None => {
            let t = tempfile::tempdir()?;
            let dir = t.path().to_path_buf();
            (Some(t), dir)
        }
    };
    let db = Db::open(&dir, Options::default())?;
    let accounts = db.create_table(TableDef {
        name: "accounts".into(),
        columns: vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("owner", ColumnType::Text { max_len: 100 }, false),
            Column::new("balance", ColumnType::Int64, false),
        ],
        primary_key: vec![0],
        indexes: vec![
            IndexDef {
                name: "by_owner".into(),
                columns: vec![1],
                unique: true,
            },
            IndexDef {
                name: "by_balance".into(),
                columns: vec![2],
                unique: false,
            },
        ],
    })?;

    let mut tx = db.begin()?;
    for id in 0..100 {
        tx.insert(
            &accounts,
            &[
                Value::Int64(id),
                Value::Text(format!("owner-{id:03}")),
                Value::Int64(1_000),
            ],
        )?;
    }
    tx.commit()?;

    // A snapshot taken now keeps seeing the opening balances.
    let mut snapshot = db.begin_with(TxnOptions {
        isolation: Isolation::RepeatableRead,
        ..TxnOptions::default()
    })?;
    let opening: i64 = snapshot
        .scan(&accounts, Unbounded, Unbounded, Direction::Forward)?
        .map(|r| r.map(|row| balance(&row)))
        .sum::<quill::Result<i64>>()?;

    std::thread::scope(|s| {
        for worker in 0..4i64 {
            let (db, accounts) = (&db, &accounts);
            s.spawn(move || {
                for i in 0..250i64 {
                    let from = (worker * 37 + i * 13) % 100;
                    let to = (worker * 11 + i * 7 + 1) % 100;
                    if from != to
                        && let Err(e) = transfer(db, accounts, from, to, 1 + i % 50)
                    {
                        eprintln!("transfer failed: {e}");
                    }
                }
            });
        }
    });

    let mut now = db.begin()?;
    let total: i64 = now
        .scan(&accounts, Unbounded, Unbounded, Direction::Forward)?
        .map(|r| r.map(|row| balance(&row)))
        .sum::<quill::Result<i64>>()?;
    let still: i64 = snapshot
        .scan(&accounts, Unbounded, Unbounded, Direction::Forward)?
        .map(|r| r.map(|row| balance(&row)))
        .sum::<quill::Result<i64>>()?;
    println!(
        "total before {opening}, after 1000 transfers {total}, seen by the old snapshot {still}"
    );

    println!("the five richest accounts:");
    for row in now
        .index_scan(
            &accounts,
            "by_balance",
            Unbounded,
            Unbounded,
            Direction::Backward,
        )?
        .take(5)
    {
        println!("  {:?}", row?);
    }
    let who = [Value::Text("owner-042".into())];
    let found: Vec<_> = now
        .index_scan(
            &accounts,
            "by_owner",
            Included(&who),
            Included(&who),
            Direction::Forward,
        )?
        .collect::<quill::Result<_>>()?;
    println!("owner-042: {found:?}");
    now.commit()?;
    snapshot.commit()?;
    println!("{}", db.stats());
    db.close()?;
    Ok(())
}
