//! The `quill` command line as a new user meets it (issue 13): output into
//! a closed pipe, inspection tools that write nothing, a database in use by
//! another process, benchmarks pointed at a database, and errors that say
//! what is wrong and where.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use quill::catalog::schema::{IndexDef, TableDef};
use quill::catalog::{Column, ColumnType, Value};
use quill::db::{Db, Options};

fn quill(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quill"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A small database with one table and an index, closed cleanly.
fn database(dir: &Path) {
    let db = Db::open(dir, small()).unwrap();
    let t = db
        .create_table(TableDef {
            name: "items".into(),
            columns: vec![
                Column::new("id", ColumnType::Int64, false),
                Column::new("name", ColumnType::Text { max_len: 50 }, false),
            ],
            primary_key: vec![0],
            indexes: vec![IndexDef {
                name: "by_name".into(),
                columns: vec![1],
                unique: false,
            }],
        })
        .unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..200 {
        tx.insert(&t, &[Value::Int64(i), Value::Text(format!("item {i}"))])
            .unwrap();
    }
    tx.commit().unwrap();
    db.close().unwrap();
}

fn small() -> Options {
    let mut o = Options::default();
    o.store.pool_bytes = 8 << 20;
    o.store.log.file_size = 8 << 20;
    o.store.log.buffer_size = 1 << 20;
    o
}

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

/// Run `quill args` with its stdout a pipe whose reading end is closed at
/// once; it must end quietly (status 0, no panic).
fn into_closed_pipe(args: &[&str]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_quill"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(out.status.success(), "{args:?}: {:?} {err}", out.status);
}

/// A new log in `dir` with 8 MiB files, on the real file system.
fn small_log(dir: &std::path::Path) -> quill::log::Log {
    quill::log::Log::create(
        std::sync::Arc::new(quill::io::RealFs::new()),
        dir,
        quill::log::LogOptions {
            file_size: 8 << 20,
            buffer_size: 1 << 20,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Item 7: `quill status | head` and `quill dump | head` panicked on the
/// closed pipe.
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    database(&dir);
    // A log with records after its checkpoint, so dump has lines to print.
    let logdir = tmp.path().join("log");
    let log = small_log(&logdir);
    let mut end = log.end_lsn();
    for i in 0..5000u32 {
        end = log.append(1, &i.to_le_bytes()).unwrap();
    }
    log.commit(end, quill::Durability::Sync).unwrap();
    drop(log);
    let d = dir.to_str().unwrap();
    let l = logdir.to_str().unwrap();
    for _ in 0..3 {
        into_closed_pipe(&["status", d]);
        into_closed_pipe(&["dump", l, "--limit", "5000"]);
        into_closed_pipe(&["check", d]);
        into_closed_pipe(&["--help"]);
    }
}

/// `quill dump --summary` counts records per type and redo operations per
/// kind, with the bytes each took, and says when a record's operations
/// do not decode.
#[test]
fn dump_summary_adds_up_records_and_operations() {
    use quill::mtr::redo::{self, Op};
    let tmp = tempfile::tempdir().unwrap();
    let logdir = tmp.path().join("log");
    let log = small_log(&logdir);
    let cell = quill::page::node::encode_leaf_inline(b"key", &[7; 50]).unwrap();
    let mut op_bytes = 0;
    for i in 0..10u64 {
        let mut rec = Vec::new();
        redo::encode(
            &mut rec,
            quill::page::PageId(i + 3),
            &Op::NodeInsert {
                slot: 0,
                cell: &cell,
            },
        );
        redo::encode(&mut rec, quill::page::PageId(i + 3), &Op::NodeDelete(1));
        op_bytes += rec.len();
        log.append(quill::mtr::RTYPE_MTR, &rec).unwrap();
    }
    for _ in 0..3 {
        log.append(7, b"not a mini-transaction").unwrap();
    }
    let end = log.append(quill::mtr::RTYPE_MTR, &[0xee; 5]).unwrap();
    log.commit(end, quill::Durability::Sync).unwrap();
    drop(log);
    let out = quill(&["dump", logdir.to_str().unwrap(), "--summary"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let count = |name: &str| -> u64 {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in:\n{stdout}"));
        line.trim_start()[name.len()..]
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count after {name} in:\n{stdout}"))
    };
    assert_eq!(count("mini-transaction"), 11, "{stdout}");
    assert_eq!(count("type 7"), 3, "{stdout}");
    assert_eq!(count("NodeInsert"), 10, "{stdout}");
    assert_eq!(count("NodeDelete"), 10, "{stdout}");
    assert!(
        stdout.contains(&format!("redo operations {op_bytes}")),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 mini-transaction records did not decode"),
        "{stdout}"
    );
}

/// Item 5 and 2: `quill check` and `quill status` write nothing (check ran
/// recovery, appended to the log, took a checkpoint and rewrote saved
/// statistics), and `check` refuses a database another process has open
/// (it used to run recovery under it).
#[test]
fn inspection_writes_nothing_and_respects_a_live_database() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    database(&dir);
    let d = dir.to_str().unwrap();
    let before = files(&dir);
    let out = quill(&["check", d]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("200 live rows"),
        "{}",
        text(&out.stdout)
    );
    assert!(quill(&["status", d]).status.success());
    assert!(quill(&["dump", d]).status.success());
    assert!(quill(&["check", "--json", d]).status.success());
    assert_eq!(files(&dir), before, "an inspection tool changed a file");

    let live = Db::open(&dir, small()).unwrap();
    let pid = std::process::id().to_string();
    let out = quill(&["check", d]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains(&format!("in use by process {pid}")), "{err}");
    let out = quill(&["check", "--repair", d]);
    assert_eq!(out.status.code(), Some(1));
    // Status reads on, and says the files may lag.
    let out = quill(&["status", d]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("in use by process"),
        "{}",
        text(&out.stderr)
    );
    live.close().unwrap();
}

/// `status`, `check` and `dump` take the directory as `quill serve` does
/// too (`--dir DIR`), with the same output as the positional `DIR`; both at
/// once is an error that says so.
#[test]
fn inspection_tools_take_dir_as_serve_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    database(&dir);
    let d = dir.to_str().unwrap();
    // Status says how long ago the statistics were saved ("(1 s ago)"),
    // which two runs a second apart print differently.
    let stable = |out: &Output| {
        text(&out.stdout)
            .lines()
            .filter(|l| !l.contains(" s ago)"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for cmd in ["status", "check", "dump"] {
        let positional = quill(&[cmd, d]);
        let flag = quill(&[cmd, "--dir", d]);
        assert!(flag.status.success(), "{cmd} --dir: {}", text(&flag.stderr));
        assert_eq!(stable(&flag), stable(&positional), "{cmd}");
        let both = quill(&[cmd, "--dir", d, d]);
        assert_eq!(both.status.code(), Some(2), "{cmd} with both");
        assert!(
            text(&both.stderr).contains("cannot be used with"),
            "{cmd}: {}",
            text(&both.stderr)
        );
    }
}

/// A database that needs recovery: check says so and how (--repair), and
/// `check --repair` recovers it, then checks.
#[test]
fn check_repair_recovers_what_check_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    database(&dir);
    {
        // Leave records after the checkpoint: a commit, then no close (a
        // dropped Db writes nothing more, like a process that exits).
        let db = Db::open(&dir, small()).unwrap();
        let t = db.table("items").unwrap();
        let mut tx = db.begin().unwrap();
        tx.insert(&t, &[Value::Int64(1000), Value::Text("late".into())])
            .unwrap();
        tx.commit().unwrap();
        drop(t);
        drop(db);
    }
    let d = dir.to_str().unwrap();
    let before = files(&dir);
    let out = quill(&["check", d]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not closed cleanly") && err.contains("--repair"),
        "{err}"
    );
    assert_eq!(files(&dir), before, "a refused check changed a file");
    // With --json the refusal is JSON on standard output too.
    let out = quill(&["check", "--json", d]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = v["error"].as_str().unwrap_or_default();
    assert!(e.contains("--repair"), "{v}");
    assert!(text(&out.stderr).contains("--repair"));
    let out = quill(&["check", "--repair", d]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("201 live rows"),
        "{}",
        text(&out.stdout)
    );
    let out = quill(&["check", d]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Item 4: `quill bench commit --dir <a database>` recreated its log, and
/// the database was gone. Benchmarks refuse a directory they did not make.
#[test]
fn benchmarks_refuse_a_database_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    database(&dir);
    let before = files(&dir);
    let d = dir.to_str().unwrap();
    for args in [
        vec![
            "bench",
            "commit",
            "--dir",
            d,
            "--clients",
            "1",
            "--seconds",
            "0.1",
        ],
        vec!["bench", "storage", "--dir", d, "--rows", "10"],
        vec![
            "bench",
            "txn",
            "--dir",
            d,
            "--table-size",
            "10",
            "--threads",
            "1",
        ],
        vec!["torture", "--dir", d, "--seconds", "0.1"],
    ] {
        let out = quill(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("holds a database"), "{args:?}: {err}");
    }
    assert_eq!(
        files(&dir),
        before,
        "a refused benchmark changed the database"
    );
    Db::open(&dir, small()).unwrap().close().unwrap();
}

/// A record the log cannot take is refused before any client runs, at
/// any client count (with 4 clients and a short window it was reported as
/// a row of 0 commits a second and exit 0).
#[test]
fn a_commit_benchmark_record_over_the_log_limit_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("bc");
    for clients in ["1", "4"] {
        let out = quill(&[
            "bench",
            "commit",
            "--dir",
            d.to_str().unwrap(),
            "--clients",
            clients,
            "--seconds",
            "0.1",
            "--warmup",
            "0",
            "--record-bytes",
            "100000000",
        ]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{clients} clients: {err}");
        assert!(err.contains("--record-bytes"), "{err}");
    }
    // A bad count is refused before the header, and the directory is not
    // made.
    let d = tmp.path().join("bc0");
    let out = quill(&[
        "bench",
        "commit",
        "--dir",
        d.to_str().unwrap(),
        "--clients",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("clients"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "");
    assert!(!d.exists());
}

/// Item 9: errors name what is wrong, where, and what to do, once each.
#[test]
fn errors_say_what_where_and_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let out = quill(&["check", tmp.path().join("nowhere").to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(err.contains("holds no Quill database"), "{err}");
    // A missing tablespace is named as missing (it was "log.000 already
    // exists"), and nothing is recreated.
    let dir = tmp.path().join("db");
    database(&dir);
    std::fs::rename(dir.join("data.qdb"), tmp.path().join("moved.qdb")).unwrap();
    let out = quill(&["check", "--repair", dir.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(err.contains("data.qdb is missing"), "{err}");
    assert!(!dir.join("data.qdb").exists());
    match Db::open(&dir, small()) {
        Err(e @ quill::Error::Incomplete { .. }) => assert!(e.to_string().contains("restore")),
        other => panic!("expected Incomplete, got {other:?}"),
    }
    std::fs::rename(tmp.path().join("moved.qdb"), dir.join("data.qdb")).unwrap();
    // An OS error appears once, not twice.
    let data = dir.join("data.qdb");
    std::fs::rename(&data, tmp.path().join("moved.qdb")).unwrap();
    std::fs::create_dir(&data).unwrap();
    for args in [vec!["check", "--repair"], vec!["check"]] {
        let mut args = args.clone();
        args.push(dir.to_str().unwrap());
        let out = quill(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("data.qdb"), "{err}");
        assert_eq!(err.matches("(os error").count(), 1, "printed twice: {err}");
    }
}

/// The binary lives in package `quill-cli` but is the `quill` command:
/// `--version` and `--help` must say so, and list every command.
#[test]
fn version_and_help_name_the_quill_command() {
    let v = quill(&["--version"]);
    assert!(v.status.success());
    assert!(text(&v.stdout).starts_with("quill "), "{}", text(&v.stdout));
    let h = quill(&["--help"]);
    assert!(h.status.success());
    let help = text(&h.stdout);
    assert!(help.contains("Usage: quill <COMMAND>"), "{help}");
    for cmd in [
        "bench", "serve", "passwd", "status", "torture", "check", "dump",
    ] {
        assert!(
            help.contains(&format!("\n  {cmd} ")),
            "{cmd} missing from\n{help}"
        );
    }
    let b = text(&quill(&["bench", "--help"]).stdout);
    for cmd in [
        "fsync", "commit", "storage", "txn", "oltp", "insert", "report",
    ] {
        assert!(
            b.contains(&format!("\n  {cmd} ")),
            "bench {cmd} missing from\n{b}"
        );
    }
}

/// `quill passwd` writes verifiers, not passwords; `quill serve` refuses
/// an open network address without users, and an empty users file.
#[test]
fn users_for_serve() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let users = tmp.path().join("users");
    let users_arg = users.to_str().unwrap();
    let passwd = |args: &[&str], stdin: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_quill"))
            .arg("passwd")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        c.wait_with_output().unwrap()
    };
    let out = passwd(&["--users", users_arg, "alice"], "correct horse\n");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = std::fs::read_to_string(&users).unwrap();
    assert!(file.contains("\nalice:SCRAM-SHA-256$4096:"), "{file}");
    assert!(!file.contains("correct horse"), "{file}");
    let out = passwd(&["--users", users_arg, "bob"], "\n");
    assert!(text(&out.stderr).contains("empty password"));
    let out = passwd(&["--users", users_arg, "a:b"], "pw\n");
    assert!(
        text(&out.stderr).contains("invalid user name"),
        "{}",
        text(&out.stderr)
    );

    let dir = tmp.path().join("db");
    let dir_arg = dir.to_str().unwrap();
    let out = quill(&["serve", "--dir", dir_arg, "--listen", "0.0.0.0:0"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("quill passwd --users"), "{err}");
    assert!(!dir.exists(), "a refused serve created {dir:?}");

    // A pool too small or larger than the machine is refused before
    // anything is created, with what to give instead.
    for (pool, says) in [("1M", "at least 8 MiB"), ("1000000G", "machine's memory")] {
        let out = quill(&["serve", "--dir", dir_arg, "--pool", pool]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(says), "{pool}: {err}");
        assert!(!dir.exists(), "a refused serve created {dir:?}");
    }
    let out = quill(&["serve", "--dir", dir_arg, "--pool", "lots"]);
    assert!(text(&out.stderr).contains("is not a size"));
    let out = quill(&["serve", "--dir", dir_arg, "--max-connections", "0"]);
    assert!(text(&out.stderr).contains("--max-connections"));
    assert!(!dir.exists(), "a refused serve created {dir:?}");
    // A users file that is not there: said once.
    let missing = tmp.path().join("no-such-users");
    let out = quill(&[
        "serve",
        "--dir",
        dir_arg,
        "--users",
        missing.to_str().unwrap(),
    ]);
    let err = text(&out.stderr);
    assert_eq!(err.matches("(os error").count(), 1, "printed twice: {err}");
    assert!(!dir.exists(), "a refused serve created {dir:?}");

    // A directory of other files is not made a database.
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    let out = quill(&["serve", "--dir", other.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("holds files but no Quill database"), "{err}");
    assert!(!other.join("data.qdb").exists() && !other.join("log").exists());

    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = quill(&["serve", "--dir", file.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(err.contains("is a file, not a directory"), "{err}");

    // A port in use fails before the database is opened: a new directory
    // is not created, and an existing database stays closed cleanly.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().to_string();
    let out = quill(&["serve", "--dir", dir_arg, "--listen", &port]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("listening on"), "{err}");
    assert!(
        !dir.exists(),
        "a serve that could not listen created {dir:?}"
    );
    database(&dir);
    let out = quill(&["serve", "--dir", dir_arg, "--listen", &port]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let out = quill(&["check", dir_arg]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::remove_dir_all(&dir).unwrap();

    let out = passwd(&["--users", users_arg, "--delete", "alice"], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = quill(&["serve", "--dir", dir_arg, "--users", users_arg]);
    let err = text(&out.stderr);
    assert!(err.contains("has no users"), "{err}");
    std::fs::write(&users, "alice:md5deadbeef\n").unwrap();
    let out = quill(&["serve", "--dir", dir_arg, "--users", users_arg]);
    let err = text(&out.stderr);
    assert!(err.contains("line 1"), "{err}");
}
