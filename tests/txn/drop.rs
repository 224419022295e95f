//! DROP TABLE (`Db::drop_table`, issue 14): the table is gone at once and
//! durably, statements on it fail with `NoSuchTable` (also in
//! transactions that began before), its pages are freed for reuse once
//! the transactions older than the drop have ended, ids are never reused,
//! and a crash at any point leaves either the table or its freed space.

use std::ops::Bound::Unbounded;

use quill::btree::Direction;
use quill::catalog::Value;
use quill::io::{CrashMode, SimFs};
use quill::store::inspect;
use quill::{Error, Result};

use super::common::*;

/// Pages in use (neither free nor past the end) in the closed database
/// of `fs`.
fn used_pages(fs: &SimFs) -> u64 {
    let info = inspect(vfs(fs).as_ref(), dir()).unwrap();
    info.page_count - info.free_pages
}

fn fill(db: &quill::db::Db, t: &quill::db::Table, from: i64, n: i64) -> Result<()> {
    for chunk in (from..from + n).collect::<Vec<_>>().chunks(200) {
        let mut tx = db.begin()?;
        for &i in chunk {
            tx.insert(t, &acct(i, &format!("owner-{i}"), i % 97))?;
        }
        tx.commit()?;
    }
    Ok(())
}

#[test]
fn a_dropped_table_is_gone_and_its_name_free() -> Result<()> {
    let fs = SimFs::new(31);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts())?;
    fill(&db, &t, 0, 50)?;
    let old_id = t.schema().id;
    db.drop_table("accounts")?;
    assert!(t.is_dropped());
    assert!(matches!(
        db.table("accounts"),
        Err(Error::NoSuchTable { .. })
    ));
    assert!(db.tables().is_empty());
    assert!(matches!(
        db.drop_table("accounts"),
        Err(Error::NoSuchTable { .. })
    ));
    // The old handle refuses every statement.
    let mut tx = db.begin()?;
    assert!(matches!(
        tx.get(&t, &[Value::Int64(1)]),
        Err(Error::NoSuchTable { .. })
    ));
    assert!(matches!(
        tx.insert(&t, &acct(1000, "x", 1)),
        Err(Error::NoSuchTable { .. })
    ));
    tx.rollback()?;
    // A new table of the same name starts empty, with a new id.
    let t2 = db.create_table(accounts())?;
    assert!(t2.schema().id > old_id);
    assert_eq!(db.begin()?.get(&t2, &[Value::Int64(1)])?, None);
    db.close()?;
    let db = open(&fs, opts(256));
    assert_eq!(db.tables().len(), 1);
    assert_eq!(db.table("accounts")?.schema().id, t2.schema().id);
    db.close()
}

/// C3 / DR2: dropping the table with the highest id does not let the next
/// table take that id, even across a reopen (undo records name tables by
/// id and may outlive them).
#[test]
fn the_highest_id_is_not_reused_after_a_drop() -> Result<()> {
    let fs = SimFs::new(32);
    let db = open(&fs, opts(256));
    let mut a = accounts();
    a.name = "a".into();
    db.create_table(a.clone())?;
    let mut b = accounts();
    b.name = "b".into();
    let b_id = db.create_table(b)?.schema().id;
    db.drop_table("b")?;
    db.close()?;
    let db = open(&fs, opts(256));
    let mut c = accounts();
    c.name = "c".into();
    assert!(db.create_table(c)?.schema().id > b_id);
    db.close()
}

/// Space comes back: after a drop and purge the tablespace has no more
/// pages in use than before the table was filled, and refilling a new
/// table reuses the freed pages instead of growing the file.
#[test]
fn a_drop_gives_its_pages_back_for_reuse() -> Result<()> {
    let fs = SimFs::new(33);
    let db = open(&fs, opts(256));
    db.close()?;
    let empty = used_pages(&fs);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts())?;
    fill(&db, &t, 0, 3000)?;
    db.purge_now()?;
    db.close()?;
    let full = inspect(vfs(&fs).as_ref(), dir())?;
    assert!(full.page_count - full.free_pages > empty + 50);
    let db = open(&fs, opts(256));
    db.drop_table("accounts")?;
    db.purge_now()?;
    assert_eq!(db.stats().pending_drops, 0);
    db.close()?;
    assert_eq!(used_pages(&fs), empty);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts())?;
    fill(&db, &t, 0, 3000)?;
    db.purge_now()?;
    db.check()?;
    db.close()?;
    let again = inspect(vfs(&fs).as_ref(), dir())?;
    assert!(
        again.page_count <= full.page_count + 8,
        "refilling grew the file from {} to {} pages",
        full.page_count,
        again.page_count
    );
    Ok(())
}

/// DROP2: a transaction that began before the drop keeps its writes
/// (commit or rollback both work), a scan open across the drop reads on
/// to its end, and the trees wait for both.
#[test]
fn transactions_and_scans_older_than_the_drop_finish_and_the_trees_wait() -> Result<()> {
    let fs = SimFs::new(34);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts())?;
    fill(&db, &t, 0, 500)?;
    let mut writer = db.begin()?;
    writer.insert(&t, &acct(9000, "w", 1))?;
    writer.update(&t, &[Value::Int64(3)], &[(2, Value::Int64(5))])?;
    let mut reader = db.begin()?;
    let mut rows = reader.scan(&t, Unbounded, Unbounded, Direction::Forward)?;
    let mut seen = 0;
    for r in rows.by_ref().take(10) {
        r?;
        seen += 1;
    }
    db.drop_table("accounts")?;
    db.purge_now()?;
    assert_eq!(db.stats().pending_drops, 3, "clustered and two indexes");
    // The writer's next statement on the table fails; ending it works.
    assert!(matches!(
        writer.update(&t, &[Value::Int64(5)], &[(2, Value::Int64(5))]),
        Err(Error::NoSuchTable { .. })
    ));
    writer.rollback()?;
    db.purge_now()?;
    assert_eq!(db.stats().pending_drops, 3, "the scan is still open");
    for r in rows {
        r?;
        seen += 1;
    }
    assert_eq!(seen, 500);
    assert!(matches!(
        reader.get(&t, &[Value::Int64(4)]),
        Err(Error::NoSuchTable { .. })
    ));
    reader.commit()?;
    db.purge_now()?;
    assert_eq!(db.stats().pending_drops, 0);
    db.check()?;
    db.close()
}

/// A committed transaction's undo for a dropped table is purged (skipped)
/// without error, and recovery rolls back an uncommitted one that wrote to
/// a table dropped before the crash.
#[test]
fn undo_that_names_a_dropped_table_is_skipped() -> Result<()> {
    let fs = SimFs::new(35);
    let db = open(&fs, opts(256));
    let t = db.create_table(accounts())?;
    let keep = {
        let mut k = accounts();
        k.name = "keep".into();
        db.create_table(k)?
    };
    fill(&db, &t, 0, 300)?;
    let mut tx = db.begin()?;
    for i in 0..100 {
        tx.delete(&t, &[Value::Int64(i)])?;
    }
    tx.commit()?;
    // An uncommitted writer, made durable by another commit, then a drop.
    let mut open_tx = db.begin()?;
    open_tx.update(&t, &[Value::Int64(200)], &[(2, Value::Int64(1))])?;
    let mut other = db.begin()?;
    other.insert(&keep, &acct(1, "k", 1))?;
    other.commit()?;
    db.drop_table("accounts")?;
    std::mem::forget(open_tx);
    let crashed = fs.crash(CrashMode::DropUnsynced);
    std::mem::forget(db);
    let db = open(&crashed, opts(256));
    assert!(matches!(
        db.table("accounts"),
        Err(Error::NoSuchTable { .. })
    ));
    let r = db.stats().recovery.expect("recovery ran");
    assert_eq!(r.rolled_back.len(), 1);
    db.purge_now()?;
    assert_eq!(db.stats().pending_drops, 0);
    assert_eq!(db.stats().history_length, 0);
    db.check()?;
    let keep = db.table("keep")?;
    assert!(db.begin()?.get(&keep, &[Value::Int64(1)])?.is_some());
    db.close()
}

/// A crash part way through freeing: the next open finishes the drop and
/// every page comes back; `check` passes at every stage.
#[test]
fn a_crash_while_freeing_resumes_at_the_next_open() -> Result<()> {
    // QUILL_DROP_SEEDS=n runs more seeds (and moments of the power cut).
    let seeds: u64 = std::env::var("QUILL_DROP_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    for seed in 0..seeds {
        let fs = SimFs::new(40 + seed);
        let db = open(&fs, opts(256));
        db.close()?;
        let empty = used_pages(&fs);
        let mut o = opts(256);
        o.purge = false;
        let db = open(&fs, o.clone());
        let t = db.create_table(accounts())?;
        fill(&db, &t, 0, 2000)?;
        db.drop_table("accounts")?;
        // Let the purge thread of a second open start freeing, then cut
        // the power at a seed-chosen moment.
        db.close()?;
        let db = open(&fs, opts(256));
        std::thread::sleep(std::time::Duration::from_millis(seed % 8 * 15));
        let crashed = fs.crash(if seed % 2 == 0 {
            CrashMode::DropUnsynced
        } else {
            CrashMode::Random
        });
        std::mem::forget(db);
        let db = open(&crashed, opts(256));
        assert!(db.tables().is_empty(), "seed {seed}");
        if let Err(e) = db.purge_now() {
            panic!("seed {seed}: purge: {e}");
        }
        assert_eq!(db.stats().pending_drops, 0, "seed {seed}");
        db.check()?;
        db.close()?;
        assert_eq!(used_pages(&crashed), empty, "seed {seed}");
    }
    Ok(())
}

/// DROP6: a drop that finds the superblock's list of trees to free full
/// (128 trees) frees earlier drops' trees itself instead of failing, here
/// with the purge thread off. While a transaction older than every listed
/// drop still reads, no tree can be freed: the drop waits the lock wait
/// timeout, then fails with `LimitExceeded`, changing nothing, and goes
/// through once that transaction ends.
#[test]
fn a_drop_past_the_lists_room_frees_earlier_trees_or_waits_for_them() -> Result<()> {
    use std::time::{Duration, Instant};
    let fs = SimFs::new(38);
    let timeout = Duration::from_millis(300);
    let db = open(
        &fs,
        quill::db::Options {
            purge: false,
            lock_wait_timeout: timeout,
            ..opts(256)
        },
    );
    // Three trees a table: 60 drops list 180, more than there is room for.
    for round in 0..60 {
        let t = db.create_table(accounts())?;
        fill(&db, &t, round * 10, 10)?;
        db.drop_table("accounts")?;
        assert!(db.stats().pending_drops <= 128, "round {round}");
    }
    assert!(db.stats().pending_drops > 100);
    db.purge_now()?;
    assert_eq!(db.stats().pending_drops, 0);

    // A reader begun before the next drops holds every tree they list.
    let reader_table = db.create_table(quill::catalog::schema::TableDef {
        name: "other".into(),
        ..accounts()
    })?;
    fill(&db, &reader_table, 0, 5)?;
    let mut reader = db.begin_with(RR)?;
    assert!(reader.get(&reader_table, &[Value::Int64(1)])?.is_some());
    for round in 0..42 {
        let t = db.create_table(accounts())?;
        fill(&db, &t, round * 10, 10)?;
        db.drop_table("accounts")?;
    }
    assert_eq!(db.stats().pending_drops, 126);
    let t = db.create_table(accounts())?;
    fill(&db, &t, 0, 10)?;
    let started = Instant::now();
    let refused = db.drop_table("accounts");
    assert!(
        matches!(refused, Err(Error::LimitExceeded { .. })),
        "{refused:?}"
    );
    assert!(started.elapsed() >= timeout);
    // Nothing changed: the table is there with its rows.
    assert_eq!(db.stats().pending_drops, 126);
    let mut tx = db.begin()?;
    assert!(
        tx.get(&db.table("accounts")?, &[Value::Int64(3)])?
            .is_some()
    );
    tx.commit()?;

    // Once the reader ends, the drop frees the earlier trees and goes on.
    reader.commit()?;
    db.drop_table("accounts")?;
    assert!(db.stats().pending_drops <= 128);
    assert!(matches!(
        db.table("accounts"),
        Err(Error::NoSuchTable { .. })
    ));
    db.purge_now()?;
    assert_eq!(db.stats().pending_drops, 0);
    assert!(db.check()?.is_ok());
    db.close()
}

/// DROP6 with drops racing for the last places in the list: four threads
/// each create and drop 30 tables of three trees at once, with the purge
/// thread off, so every drop past the first 42 finds the list full and
/// frees trees itself, and the room one frees may be taken by another.
/// Every drop succeeds and the database checks clean.
#[test]
fn concurrent_drops_at_a_full_list_all_succeed() -> Result<()> {
    let fs = SimFs::new(39);
    let db = open(
        &fs,
        quill::db::Options {
            purge: false,
            ..opts(512)
        },
    );
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let db = &db;
                s.spawn(move || -> Result<()> {
                    for round in 0..30 {
                        let name = format!("t{w}_{round}");
                        let t = db.create_table(quill::catalog::schema::TableDef {
                            name: name.clone(),
                            ..accounts()
                        })?;
                        fill(db, &t, 0, 5)?;
                        db.drop_table(&name)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join().expect("a dropping thread panicked")?;
        }
        Ok::<(), quill::Error>(())
    })?;
    assert!(db.tables().is_empty());
    assert!(db.stats().pending_drops <= 128);
    db.purge_now()?;
    assert_eq!(db.stats().pending_drops, 0);
    assert!(db.check()?.is_ok());
    db.close()
}
