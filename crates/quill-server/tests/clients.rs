//! End to end against a server started on a free local port: the Rust
//! driver tokio-postgres (extended protocol with server-inferred parameter
//! types, binary results, transactions, errors and their SQLSTATEs,
//! CancelRequest), and psql when it is installed.

use std::sync::Arc;
use std::time::Duration;

use quill::{Db, Options};
use quill_server::{Server, ServerConfig};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

struct Running {
    port: u16,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

async fn start() -> Running {
    start_with(ServerConfig::default()).await
}

async fn start_with(config: ServerConfig) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    let config = ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..config
    };
    let server = Server::bind(db, &config).await.unwrap();
    let port = server.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async {
        let _ = rx.await;
    }));
    Running {
        port,
        _dir: dir,
        stop: Some(tx),
    }
}

async fn connect(port: u16) -> Client {
    let (client, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=app dbname=app"),
        NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_round_trips() {
    let srv = start().await;
    let c = connect(srv.port).await;
    c.batch_execute(
        "CREATE TABLE t (id int PRIMARY KEY, name varchar(20) NOT NULL, score double precision, \
         big bigint, at timestamp, ok boolean, raw bytea); \
         INSERT INTO t VALUES (1, 'one', 1.5, 10, '2026-11-24 10:00:00', true, '\\x0102'), \
         (2, 'two', NULL, 20, NULL, false, NULL)",
    )
    .await
    .unwrap();
    // Parameters typed by the server (tokio-postgres sends none).
    let rows = c
        .query(
            "SELECT name, score, big, at, ok, raw FROM t WHERE id = $1",
            &[&1i32],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r.get::<_, String>(0), "one");
    assert_eq!(r.get::<_, Option<f64>>(1), Some(1.5));
    assert_eq!(r.get::<_, i64>(2), 10);
    assert!(r.get::<_, Option<std::time::SystemTime>>(3).is_some());
    assert!(r.get::<_, bool>(4));
    assert_eq!(r.get::<_, Option<Vec<u8>>>(5), Some(vec![1, 2]));
    let n = c
        .execute("UPDATE t SET big = big + $1 WHERE id = $2", &[&5i64, &2i32])
        .await
        .unwrap();
    assert_eq!(n, 1);
    // Result columns computed from a parameter come back in binary, in
    // the type the description gave them (tokio-postgres checks it).
    let row = c
        .query_one(
            "SELECT id + $1, $2::bigint, big * $3, coalesce($4, id) FROM t WHERE id = 1",
            &[&1i32, &7i64, &2i64, &None::<i32>],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 2);
    assert_eq!(row.get::<_, i64>(1), 7);
    assert_eq!(row.get::<_, i64>(2), 20);
    assert_eq!(row.get::<_, i32>(3), 1);
    // Portals with row limits, including ones no result can reach and a
    // negative one (every row, as in PostgreSQL; such a limit once made
    // the server reserve gigabytes and abort).
    {
        let mut c2 = connect(srv.port).await;
        let tx = c2.transaction().await.unwrap();
        let all = tx.prepare("SELECT id FROM t ORDER BY id").await.unwrap();
        for limit in [1, 2, i32::MAX, -1] {
            let portal = tx.bind(&all, &[]).await.unwrap();
            let mut got = Vec::new();
            loop {
                let rows = tx.query_portal(&portal, limit).await.unwrap();
                if rows.is_empty() {
                    break;
                }
                got.extend(rows.iter().map(|r| r.get::<_, i32>(0)));
            }
            assert_eq!(got, vec![1, 2], "row limit {limit}");
        }
        tx.commit().await.unwrap();
    }
    let stmt = c.prepare("SELECT count(*), sum(big) FROM t").await.unwrap();
    let row = c.query_one(&stmt, &[]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 2);
    assert_eq!(row.get::<_, i64>(1), 35);

    // Errors carry their SQLSTATE and leave the connection usable.
    let e = c
        .execute("INSERT INTO t (id, name) VALUES (1, 'dup')", &[])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::UNIQUE_VIOLATION));
    let e = c.query("SELECT * FROM nope", &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::UNDEFINED_TABLE));
    let e = c.query("SELEC 1", &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::SYNTAX_ERROR));

    // A transaction: a failed statement fails the block until ROLLBACK.
    let mut c = c;
    {
        let tx = c.transaction().await.unwrap();
        tx.execute("UPDATE t SET name = 'uno' WHERE id = 1", &[])
            .await
            .unwrap();
        let e = tx
            .execute("INSERT INTO t (id, name) VALUES (2, 'x')", &[])
            .await
            .unwrap_err();
        assert_eq!(e.code(), Some(&SqlState::UNIQUE_VIOLATION));
        let e = tx.query("SELECT 1", &[]).await.unwrap_err();
        assert_eq!(e.code(), Some(&SqlState::IN_FAILED_SQL_TRANSACTION));
        // Dropped: rolled back.
    }
    let row = c
        .query_one("SELECT name FROM t WHERE id = 1", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "one");
    {
        let tx = c.transaction().await.unwrap();
        tx.execute("UPDATE t SET name = 'uno' WHERE id = $1", &[&1i32])
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    let row = c
        .query_one("SELECT name FROM t WHERE id = 1", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "uno");

    // Simple protocol, several statements, the empty query.
    let msgs = c
        .simple_query("SELECT 1; SELECT 'a' AS x; ;")
        .await
        .unwrap();
    assert!(msgs.len() >= 4);
    c.simple_query("").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_request_stops_a_lock_wait() {
    let srv = start().await;
    let a = connect(srv.port).await;
    let b = connect(srv.port).await;
    a.batch_execute("CREATE TABLE l (k int PRIMARY KEY, v int); INSERT INTO l VALUES (1, 0); BEGIN; UPDATE l SET v = 1 WHERE k = 1")
        .await
        .unwrap();
    let token = b.cancel_token();
    let waiter = tokio::spawn(async move {
        let r = b.execute("UPDATE l SET v = 2 WHERE k = 1", &[]).await;
        (b, r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    token.cancel_query(NoTls).await.unwrap();
    let (b, r) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the canceled statement returned")
        .unwrap();
    assert_eq!(r.unwrap_err().code(), Some(&SqlState::QUERY_CANCELED));
    a.batch_execute("COMMIT").await.unwrap();
    let row = b
        .query_one("SELECT v FROM l WHERE k = 1", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_connections_with_open_transactions_do_not_deadlock() {
    let srv = start().await;
    let c = connect(srv.port).await;
    c.batch_execute("CREATE TABLE m (k int PRIMARY KEY, v int NOT NULL)")
        .await
        .unwrap();
    // More connections than admission permits, each in a transaction.
    let n = quill_server::default_admission() + 40;
    let mut tasks = Vec::new();
    for k in 0..n as i32 {
        let port = srv.port;
        tasks.push(tokio::spawn(async move {
            let mut c = connect(port).await;
            let tx = c.transaction().await.unwrap();
            tx.execute("INSERT INTO m VALUES ($1, 0)", &[&k])
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            tx.commit().await.unwrap();
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("no deadlock")
            .unwrap();
    }
    let row = c.query_one("SELECT count(*) FROM m", &[]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), n as i64);
}

/// Admission permits belong to open transactions: whatever a connection
/// did last (a Parse and Describe, an autocommit statement, a statement
/// that failed), once its session is idle it holds no permit. A leak
/// would let idle connections use up admission, and a new statement
/// would never start. (Tried: the variant that took the permit in the
/// message loop when a batch arrived, `bench/results/serve.md`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_keep_no_admission_permit() {
    let srv = start_with(ServerConfig {
        max_active: 2,
        ..ServerConfig::default()
    })
    .await;
    let port = srv.port;
    // A leaked permit shows as a statement that never starts.
    tokio::time::timeout(Duration::from_secs(60), async move {
        let c = connect(port).await;
        c.batch_execute("CREATE TABLE p (k int PRIMARY KEY)")
            .await
            .unwrap();
        // Six connections, two ending on each: a Parse and Describe only,
        // an autocommit statement, a statement that failed.
        let mut idle = Vec::new();
        for k in 0..6 {
            let c = connect(port).await;
            match k % 3 {
                0 => {
                    c.prepare("SELECT k FROM p WHERE k = $1").await.unwrap();
                }
                1 => {
                    c.execute("INSERT INTO p VALUES ($1)", &[&k]).await.unwrap();
                }
                _ => {
                    c.execute("INSERT INTO p VALUES ($1)", &[&k]).await.unwrap();
                    assert!(c.execute("INSERT INTO p VALUES ($1)", &[&k]).await.is_err());
                }
            }
            idle.push(c);
        }
        // One transaction left open holds one of the two permits; the
        // other is free for whoever asks.
        let mut holder = connect(port).await;
        let tx = holder.transaction().await.unwrap();
        tx.execute("INSERT INTO p VALUES (100)", &[]).await.unwrap();
        for c in &idle {
            let row = c.query_one("SELECT count(*) FROM p", &[]).await.unwrap();
            assert_eq!(row.get::<_, i64>(0), 4);
        }
        tx.commit().await.unwrap();
    })
    .await
    .expect("a statement waited for an admission permit that idle connections kept");
}

/// A Parse that must wait for a table under DDL holds no admission
/// permit, so connections waiting on a long CREATE INDEX do not hold up
/// connections with other work (`conn.rs`, the execution model).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parse_waiting_for_ddl_holds_no_admission_permit() {
    let srv = start_with(ServerConfig {
        max_active: 2,
        ..ServerConfig::default()
    })
    .await;
    let port = srv.port;
    tokio::time::timeout(Duration::from_secs(300), async move {
        let c = connect(port).await;
        c.batch_execute("CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL)")
            .await
            .unwrap();
        // Enough rows that the build takes far longer than a statement.
        for chunk in 0..40 {
            let rows: Vec<String> = (0..5000)
                .map(|i| {
                    let id = chunk * 5000 + i;
                    format!("({id}, {})", id % 977)
                })
                .collect();
            c.batch_execute(&format!("INSERT INTO big VALUES {}", rows.join(",")))
                .await
                .unwrap();
        }
        // One permit: the build's.
        let started = std::time::Instant::now();
        let ddl = tokio::spawn(async move {
            let c = connect(port).await;
            c.batch_execute("CREATE INDEX big_v ON big (v)")
                .await
                .unwrap();
            started.elapsed()
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The other stays free while this Parse waits for the table.
        let parse = tokio::spawn(async move {
            let c = connect(port).await;
            c.prepare("UPDATE big SET v = $1 WHERE id = $2")
                .await
                .unwrap();
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let other = connect(port).await;
        let row = other.query_one("SELECT 1", &[]).await.unwrap();
        assert_eq!(row.get::<_, i32>(0), 1);
        let other_done = started.elapsed();
        let build_done = ddl.await.unwrap();
        parse.await.unwrap();
        // Had the Parse held a permit, the statement would have waited
        // for the build to give one back, and ended with it. Only a
        // build long enough to tell the two apart shows anything (about
        // a second in a debug build here; the statement takes a few
        // milliseconds after the 100 ms of sleeps).
        if build_done >= Duration::from_millis(800) {
            assert!(
                other_done + Duration::from_millis(300) < build_done,
                "the statement waited for the build: done at {other_done:?}, the build at {build_done:?}"
            );
        } else {
            eprintln!("the build took {build_done:?}, too short to show the Parse's permit");
        }
    })
    .await
    .expect("a statement waited for an admission permit a waiting Parse held");
}

/// Whether psql is here; if not, says so with what is `skipped`.
fn psql_installed(skipped: &str) -> bool {
    let here = std::process::Command::new("psql")
        .arg("--version")
        .output()
        .is_ok();
    if !here {
        eprintln!("psql is not installed: {skipped} (Debian: apt-get install postgresql-client)");
    }
    here
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_describes_tables() {
    if !psql_installed("skipped") {
        return;
    }
    let srv = start().await;
    let port = srv.port.to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("psql")
            .args(["-X", "-h", "127.0.0.1", "-p", &port, "-U", "me", "-d", "sbtest", "-v", "ON_ERROR_STOP=1"])
            .args(["-c", "CREATE TABLE t1 (id serial PRIMARY KEY, k int NOT NULL DEFAULT 0, c char(120) NOT NULL DEFAULT '')"])
            .args(["-c", "CREATE INDEX k_1 ON t1 (k)"])
            .args(["-c", "\\d"])
            .args(["-c", "\\d t1"])
            .args(["-c", "\\l"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "public | t1        | table    | me",
        "t1_id_seq",
        "nextval('t1_id_seq'::regclass)",
        "character(120)",
        "\"t1_pkey\" PRIMARY KEY, btree (id)",
        "\"k_1\" btree (k)",
        "sbtest",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
}

/// With a users file, every connection authenticates by SCRAM-SHA-256:
/// the right password gets in; a wrong one and an unknown user fail
/// alike with 28P01; a client offering no password fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_sha_256_against_a_users_file() {
    use quill_server::auth::{Users, Verifier};
    let mut users = Users::default();
    users
        .set("alice", Verifier::from_password("pencil"))
        .unwrap();
    // Round trip through the file form, as `quill serve --users` reads it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    users.save(&path).unwrap();
    let users = Users::load(&path).unwrap();
    let srv = start_with(ServerConfig {
        users: Some(Arc::new(users)),
        ..ServerConfig::default()
    })
    .await;
    let try_login = |user: &str, password: Option<&str>| {
        let mut conf = format!("host=127.0.0.1 port={} user={user} dbname=x", srv.port);
        if let Some(p) = password {
            conf.push_str(&format!(" password={p}"));
        }
        async move { tokio_postgres::connect(&conf, NoTls).await }
    };
    let (client, conn) = try_login("alice", Some("pencil")).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let row = client.query_one("SELECT current_user", &[]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "alice");

    for (user, password) in [("alice", "Pencil"), ("mallory", "pencil")] {
        let err = match try_login(user, Some(password)).await {
            Ok(_) => panic!("{user}/{password} got in"),
            Err(e) => e,
        };
        let db = err.as_db_error().unwrap_or_else(|| panic!("{err}"));
        assert_eq!(db.code(), &SqlState::INVALID_PASSWORD, "{user}");
        assert_eq!(
            db.message(),
            format!("password authentication failed for user \"{user}\"")
        );
    }
    // No password: the driver gives up when the server asks for one.
    assert!(try_login("alice", None).await.is_err());
    // The refused connections left nothing behind: a new one works.
    let (client, conn) = try_login("alice", Some("pencil")).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client.simple_query("SELECT 1").await.unwrap();

    // libpq's SCRAM (psql; sysbench and psycopg use the same code).
    if !psql_installed("libpq's SCRAM not tried") {
        return;
    }
    let port = srv.port.to_string();
    let psql = move |password: &str| {
        let port = port.clone();
        let password = password.to_string();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new("psql")
                .args([
                    "-X",
                    "-w",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-U",
                    "alice",
                    "-d",
                    "x",
                ])
                .args(["-tAc", "SELECT current_user"])
                .env("PGPASSWORD", password)
                .output()
                .unwrap()
        })
    };
    let ok = psql("pencil").await.unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&ok.stdout).trim(), "alice");
    let bad = psql("nope").await.unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("password authentication failed for user \"alice\""),
        "{err}"
    );
}

/// COPY over the wire: tokio-postgres's copy_in and copy_out (extended
/// protocol), a bad line failing the whole COPY with its line number and
/// the session going on, and CopyFail when the client drops its sink.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_and_out_with_tokio_postgres() {
    use bytes::Bytes;
    use futures::{SinkExt, StreamExt};
    let srv = start().await;
    let c = connect(srv.port).await;
    c.batch_execute("CREATE TABLE t (id int PRIMARY KEY, name text, score float8)")
        .await
        .unwrap();
    let sink = c.copy_in("COPY t FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    for k in 0..1000 {
        let line = format!("{k}\tname {k}\t{}\n", f64::from(k) / 4.0);
        sink.send(Bytes::from(line)).await.unwrap();
    }
    sink.send(Bytes::from_static(b"1000\t\\N\t\\N\n"))
        .await
        .unwrap();
    assert_eq!(sink.finish().await.unwrap(), 1001);
    let row = c
        .query_one(
            "SELECT count(*), sum(score) FROM t WHERE name IS NOT NULL",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 1000);
    assert_eq!(
        row.get::<_, f64>(1),
        (0..1000).map(|k| f64::from(k) / 4.0).sum::<f64>()
    );
    let out = c
        .copy_out("COPY (SELECT id, name FROM t WHERE id < 3 ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)")
        .await
        .unwrap();
    let chunks: Vec<Bytes> = out.map(|r| r.unwrap()).collect().await;
    assert_eq!(chunks.concat(), b"id,name\n0,name 0\n1,name 1\n2,name 2\n");
    // A bad line: nothing of this COPY stays, the error names the line.
    let sink = c.copy_in("COPY t FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(Bytes::from_static(b"2000\ta\t1\n2001\tb\tnot a number\n"))
        .await
        .unwrap();
    let e = sink.finish().await.unwrap_err();
    let db = e.as_db_error().expect("a server error");
    assert_eq!(db.code(), &SqlState::INVALID_TEXT_REPRESENTATION, "{db:?}");
    assert!(db.message().contains("line 2"), "{}", db.message());
    let n: i64 = c
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1001);
    // The client gives up: CopyFail rolls the rows back.
    {
        let sink = c.copy_in::<_, Bytes>("COPY t FROM STDIN").await.unwrap();
        futures::pin_mut!(sink);
        sink.send(Bytes::from_static(b"3000\tc\t1\n"))
            .await
            .unwrap();
        // Dropped without finish: tokio-postgres sends CopyFail.
    }
    let n: i64 = c
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1001);
}

/// psql's \copy: a CSV file in through stdin and out again, and the
/// server refusing a COPY that names a server-side file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_copies_in_and_out() {
    if !psql_installed("skipped") {
        return;
    }
    let srv = start().await;
    let port = srv.port.to_string();
    let out = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = std::process::Command::new("psql")
            .args([
                "-X",
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "me",
                "-d",
                "copy",
                "-v",
                "ON_ERROR_STOP=1",
            ])
            .args([
                "-c",
                "CREATE TABLE p (id int PRIMARY KEY, body varchar(40))",
            ])
            .args(["-c", "\\copy p FROM STDIN WITH (FORMAT csv, HEADER)"])
            .args(["-c", "\\copy (SELECT * FROM p ORDER BY id) TO STDOUT"])
            .args(["-c", "COPY p TO '/tmp/quill-should-not-write'"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"id,body\n1,plain\n2,\"with, comma\"\n3,\n")
            .unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(text, "1\tplain\n2\twith, comma\n3\t\\N\n", "stderr: {err}");
    assert!(!out.status.success());
    assert!(err.contains("not allowed"), "{err}");
}

/// Read one backend message (type byte and body) from a raw connection.
async fn backend_message(c: &mut tokio::net::TcpStream) -> (u8, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    let mut head = [0u8; 5];
    c.read_exact(&mut head).await.unwrap();
    let len = i32::from_be_bytes(head[1..5].try_into().unwrap()) as usize;
    let mut body = vec![0u8; len - 4];
    c.read_exact(&mut body).await.unwrap();
    (head[0], body)
}

/// The server holds the answers to a pipelined Bind, Describe and
/// Execute until their Sync and sends them together (as PostgreSQL
/// does), in order; and it never holds output while it waits for the
/// client: a Parse with nothing after it is answered at once, though no
/// Sync or Flush asked for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_messages_are_answered_in_order_and_never_held_while_waiting() {
    use quill_server::fuzzing::{message, startup};
    use tokio::io::AsyncWriteExt;
    let srv = start().await;
    let mut c = tokio::net::TcpStream::connect(("127.0.0.1", srv.port))
        .await
        .unwrap();
    c.write_all(&startup("app")).await.unwrap();
    while backend_message(&mut c).await.0 != b'Z' {}
    // A Parse alone: its ParseComplete comes without a Sync.
    c.write_all(&message(b'P', b"s1\0SELECT $1::int + 1\0\0\0"))
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), backend_message(&mut c))
        .await
        .expect("a ParseComplete with no Sync after the Parse (output held while waiting)");
    assert_eq!(got.0, b'1');
    // Bind, Describe, Execute, Sync in one write, twice over.
    let mut bind = b"\0s1\0\0\0\0\x01".to_vec();
    bind.extend(2i32.to_be_bytes());
    bind.extend(b"41");
    bind.extend(0i16.to_be_bytes());
    let mut pipeline = Vec::new();
    for _ in 0..2 {
        pipeline.extend(message(b'B', &bind));
        pipeline.extend(message(b'D', b"P\0"));
        pipeline.extend(message(b'E', b"\0\0\0\0\0"));
        pipeline.extend(message(b'S', b""));
    }
    c.write_all(&pipeline).await.unwrap();
    let mut kinds = Vec::new();
    let mut values = Vec::new();
    while kinds.iter().filter(|&&k| k == b'Z').count() < 2 {
        let (k, body) = backend_message(&mut c).await;
        if k == b'D' {
            values.push(String::from_utf8_lossy(&body[6..]).to_string());
        }
        kinds.push(k);
    }
    assert_eq!(
        kinds,
        b"2TDCZ2TDCZ".to_vec(),
        "{}",
        String::from_utf8_lossy(&kinds)
    );
    assert_eq!(values, vec!["42", "42"]);
    // An INSERT's Parse, Bind and Execute with no Sync: their answers
    // still come (pgwire only buffers an INSERT's CommandComplete; the
    // loop flushes before it waits).
    c.write_all(&quill_server::fuzzing::query(
        "CREATE TABLE pipe (k int PRIMARY KEY)",
    ))
    .await
    .unwrap();
    while backend_message(&mut c).await.0 != b'Z' {}
    let mut tail = message(b'P', b"ins\0INSERT INTO pipe VALUES ($1)\0\0\0");
    let mut bind = b"\0ins\0\0\0\0\x01".to_vec();
    bind.extend(1i32.to_be_bytes());
    bind.extend(b"7");
    bind.extend(0i16.to_be_bytes());
    tail.extend(message(b'B', &bind));
    tail.extend(message(b'E', b"\0\0\0\0\0"));
    c.write_all(&tail).await.unwrap();
    let mut kinds = Vec::new();
    while kinds.last() != Some(&b'C') {
        let (k, _) = tokio::time::timeout(Duration::from_secs(10), backend_message(&mut c))
            .await
            .expect("the answer to an Execute with no Sync after it");
        kinds.push(k);
    }
    assert_eq!(kinds, b"12C".to_vec());
    c.write_all(&message(b'S', b"")).await.unwrap();
    assert_eq!(backend_message(&mut c).await.0, b'Z');
    // A message pgwire cannot decode (a Describe over its size limit):
    // FATAL 08P01, not a silent close.
    let mut name = vec![b'P'];
    name.extend(std::iter::repeat_n(b'x', 20_000));
    name.push(0);
    c.write_all(&message(b'D', &name)).await.unwrap();
    let (k, body) = backend_message(&mut c).await;
    assert_eq!(k, b'E');
    assert!(String::from_utf8_lossy(&body).contains("08P01"), "{body:?}");
}
