//! The bounded fuzz run of the wire protocol, in every `cargo test`: random
//! sequences of frontend messages (well framed with odd contents, badly
//! framed, truncated, or raw bytes in place of the startup packet) sent
//! to a running server. No input may panic a server task, hang a
//! connection or leave the server unable to answer a new one (the
//! `wire` cargo-fuzz target runs the same harness unbounded). Failures
//! print proptest's seed, so a run replays; PROPTEST_CASES runs more.

use proptest::prelude::*;
use quill_server::fuzzing::{harness, message, query, startup};

const SQL: &[&str] = &[
    "SELECT 1",
    "SELECT * FROM t WHERE k = $1",
    "SELECT v, n FROM t WHERE k BETWEEN $1 AND $2 ORDER BY k LIMIT 5",
    "INSERT INTO t (k, v) VALUES ($1, $2)",
    "UPDATE t SET n = n + 1 WHERE k = $1",
    "DELETE FROM t WHERE k = $1",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SELECT $1::int + $2",
    "SHOW quill.status",
    "SELECT count(*) FROM pg_catalog.pg_class",
    "",
    ";;",
    "SELEC",
    "SELECT * FROM nowhere",
    "INSERT INTO t VALUES (1, 'dup', 1)",
    "COPY t FROM STDIN",
    "COPY t (k, v) FROM STDIN WITH (FORMAT csv, HEADER)",
    "COPY t TO STDOUT",
    "COPY (SELECT k FROM t) TO STDOUT WITH (FORMAT csv)",
];

/// COPY data lines: good rows, bad ones, escapes, the end marker.
const COPY_DATA: &[&str] = &[
    "7\tseven\t7\n",
    "8,eight\n",
    "9\t\\N\t\\N\n",
    "bad\tline\n",
    "10\t\\x41\\101\t1",
    "\\.\n",
    "\"open quote\n",
];

fn cstring(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

fn sql() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(SQL).prop_map(str::to_string),
        1 => "[ -~]{0,40}",
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(&["", "s1", "p1", "unknown"][..]).prop_map(str::to_string)
}

fn oid() -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => prop::sample::select(&[0u32, 16, 17, 20, 21, 23, 25, 701, 1043, 1114][..]),
        1 => any::<u32>(),
    ]
}

/// A parameter value: NULL (-1), bytes, or a length that lies.
fn param() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => Just((-1i32).to_be_bytes().to_vec()),
        4 => prop::collection::vec(any::<u8>(), 0..9).prop_map(|b| {
            let mut v = (b.len() as i32).to_be_bytes().to_vec();
            v.extend_from_slice(&b);
            v
        }),
        2 => prop::sample::select(&["1", "2", "-7", "abc", "t", "2026-11-25 10:00:00", "99999999999"][..])
            .prop_map(|s| {
                let mut v = (s.len() as i32).to_be_bytes().to_vec();
                v.extend_from_slice(s.as_bytes());
                v
            }),
        1 => (any::<i32>(), prop::collection::vec(any::<u8>(), 0..4)).prop_map(|(n, b)| {
            let mut v = n.to_be_bytes().to_vec();
            v.extend_from_slice(&b);
            v
        }),
    ]
}

fn small_i16() -> impl Strategy<Value = i16> {
    prop_oneof![4 => 0i16..4, 1 => any::<i16>()]
}

/// A Describe or Close (`kind`) of a statement, a portal, or `odd`.
fn describe_or_close(kind: u8, odd: u8) -> impl Strategy<Value = Vec<u8>> {
    (prop::sample::select(vec![b'S', b'P', odd]), name()).prop_map(move |(k, n)| {
        let mut b = vec![k];
        b.extend(cstring(&n));
        message(kind, &b)
    })
}

/// One frontend message after startup.
fn frontend() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => sql().prop_map(|s| query(&s)),
        3 => (name(), sql(), small_i16(), prop::collection::vec(oid(), 0..4)).prop_map(
            |(n, s, count, oids)| {
                let mut b = cstring(&n);
                b.extend(cstring(&s));
                b.extend(count.to_be_bytes());
                for o in oids {
                    b.extend(o.to_be_bytes());
                }
                message(b'P', &b)
            }
        ),
        3 => (
            name(),
            name(),
            small_i16(),
            prop::collection::vec(small_i16(), 0..3),
            small_i16(),
            prop::collection::vec(param(), 0..4),
            prop::collection::vec(small_i16(), 0..3),
        )
            .prop_map(|(portal, stmt, nfmt, fmts, nparams, params, results)| {
                let mut b = cstring(&portal);
                b.extend(cstring(&stmt));
                b.extend(nfmt.to_be_bytes());
                for f in fmts {
                    b.extend(f.to_be_bytes());
                }
                b.extend(nparams.to_be_bytes());
                for p in params {
                    b.extend(p);
                }
                b.extend((results.len() as i16).to_be_bytes());
                for r in results {
                    b.extend(r.to_be_bytes());
                }
                message(b'B', &b)
            }),
        2 => describe_or_close(b'D', b'x'),
        // Row limits: none, small, past any result, negative.
        2 => (name(), prop_oneof![Just(0i32), Just(1), Just(i32::MAX), Just(-1), any::<i32>()]).prop_map(|(n, rows)| {
            let mut b = cstring(&n);
            b.extend(rows.to_be_bytes());
            message(b'E', &b)
        }),
        1 => describe_or_close(b'C', b'?'),
        3 => Just(message(b'S', &[])),
        1 => Just(message(b'H', &[])),
        // The COPY sub-protocol: CopyData, CopyDone, CopyFail.
        2 => prop_oneof![
            prop::sample::select(COPY_DATA).prop_map(|d| d.as_bytes().to_vec()),
            prop::collection::vec(any::<u8>(), 0..24),
        ]
        .prop_map(|d| message(b'd', &d)),
        1 => Just(message(b'c', &[])),
        1 => "[ -~]{0,12}".prop_map(|m| message(b'f', &cstring(&m))),
        1 => Just(message(b'X', &[])),
        // Any type byte, any body; or a length that lies.
        1 => (any::<u8>(), prop::collection::vec(any::<u8>(), 0..16))
            .prop_map(|(k, b)| message(k, &b)),
        1 => (any::<u8>(), any::<i32>(), prop::collection::vec(any::<u8>(), 0..8)).prop_map(
            |(k, len, b)| {
                let mut v = vec![k];
                v.extend(len.to_be_bytes());
                v.extend(b);
                v
            }
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Message sequences after a good startup, sometimes cut short.
    #[test]
    fn messages_after_startup(
        msgs in prop::collection::vec(frontend(), 1..12),
        cut in any::<prop::sample::Index>(),
        truncate in prop::bool::weighted(0.2),
    ) {
        let mut bytes: Vec<u8> = msgs.concat();
        if truncate && !bytes.is_empty() {
            bytes.truncate(cut.index(bytes.len()));
        }
        harness().run(&bytes, false);
    }

    /// Bytes in place of the startup packet: random, or a startup,
    /// SSL or cancel request with garbage in it.
    #[test]
    fn raw_connections(
        head in prop_oneof![
            Just(startup("raw")),
            Just(vec![0, 0, 0, 8, 4, 210, 22, 47]),
            Just(vec![0, 0, 0, 16, 4, 210, 22, 46, 0, 0, 0, 1, 0, 0, 0, 0]),
            prop::collection::vec(any::<u8>(), 0..12),
        ],
        flip in any::<prop::sample::Index>(),
        xor in any::<u8>(),
        tail in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = head;
        if !bytes.is_empty() {
            let i = flip.index(bytes.len());
            bytes[i] ^= xor;
        }
        bytes.extend(tail);
        harness().run(&bytes, true);
    }
}

/// The fuzz target's committed seeds and regressions replay here, in the
/// target's own encoding (first byte: odd for raw).
#[test]
fn committed_seeds_and_regressions() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut files: Vec<_> = std::fs::read_dir(root.join("seeds/wire"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.extend(
        std::fs::read_dir(root.join("regressions"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("wire-")
            }),
    );
    assert!(files.len() >= 8, "{files:?}");
    for f in files {
        let data = std::fs::read(&f).unwrap();
        let Some((&mode, rest)) = data.split_first() else {
            continue;
        };
        eprintln!("{}", f.display());
        harness().run(rest, mode & 1 == 1);
    }
}

/// `scratch_dir` removes only directories of its own form whose process
/// has exited: not a live process's, not a name with other parts.
#[test]
fn scratch_dir_removes_only_its_own_leftovers() {
    let prefix = format!("quill-scratch-test-{}", std::process::id());
    let tmp = std::env::temp_dir();
    // Above Linux's largest pid_max (4,194,304): no such process.
    let dead = 4_194_399u32;
    let me = std::process::id();
    let names = [
        (format!("{prefix}-{dead}-17"), false),
        (format!("{prefix}-{dead}"), false),
        (format!("{prefix}-{me}-18"), true),
        (format!("{prefix}-{dead}-19-crash"), true),
        (format!("{prefix}-notes"), true),
        (format!("{prefix}-{dead}-x1"), true),
    ];
    for (n, _) in &names {
        std::fs::create_dir_all(tmp.join(n)).unwrap();
    }
    let fresh = quill_server::fuzzing::scratch_dir(&prefix);
    assert!(
        fresh
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&format!("{prefix}-{me}-"))
    );
    for (n, kept) in &names {
        let p = tmp.join(n);
        assert_eq!(
            p.exists(),
            *kept || !std::path::Path::new("/proc/self").exists(),
            "{n}"
        );
        let _ = std::fs::remove_dir_all(p);
    }
}
