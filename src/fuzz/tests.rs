//! The stable fuzzing engine CI runs (`cargo test`): every target on
//! proptest-generated arbitrary bytes and on random mutations of its
//! seeds (bit flips, byte overwrites with interesting values, truncation,
//! insertion, splices between seeds). A failure prints the failing input
//! (shrunk) and proptest records its seed in `proptest-regressions/`.
//! Also: sanity checks that the harness reaches what it means to (the
//! images open, the seeds decode) and the writer of the seed corpora.

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;

use super::image::{self, DB_DIR};
use super::{TARGETS, seeds};
use crate::db::Db;

/// One change to a seed.
#[derive(Clone, Debug)]
enum Mutation {
    /// Flip one bit.
    Flip { at: usize, bit: u8 },
    /// Overwrite with bytes.
    Set { at: usize, bytes: Vec<u8> },
    /// Overwrite with a boundary value of some width, little-endian.
    Value { at: usize, width: usize, value: u64 },
    /// Cut the input.
    Truncate { at: usize },
    /// Insert bytes.
    Insert { at: usize, bytes: Vec<u8> },
    /// Copy a piece of another seed over this one.
    Splice {
        at: usize,
        seed: usize,
        from: usize,
        len: usize,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    let boundary = prop_oneof![
        Just(0u64),
        Just(1),
        Just(0x7F),
        Just(0x80),
        Just(0xFF),
        Just(0xFFFF),
        Just(0x1_0000),
        Just(u64::from(u32::MAX)),
        Just(u64::MAX),
        Just(1 << 63),
        Just(4096),
        any::<u64>(),
    ];
    prop_oneof![
        4 => (at, 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        2 => (at, proptest::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Set { at, bytes }),
        3 => (at, prop_oneof![Just(1usize), Just(2), Just(4), Just(8)], boundary)
            .prop_map(|(at, width, value)| Mutation::Value { at, width, value }),
        1 => at.prop_map(|at| Mutation::Truncate { at }),
        1 => (at, proptest::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        1 => (at, any::<usize>(), any::<usize>(), 1usize..64)
            .prop_map(|(at, seed, from, len)| Mutation::Splice { at, seed, from, len }),
    ]
}

fn apply(seeds: &[Vec<u8>], seed: usize, muts: &[Mutation]) -> Vec<u8> {
    let mut v = seeds
        .get(seed % seeds.len().max(1))
        .cloned()
        .unwrap_or_default();
    for m in muts {
        let len = v.len().max(1);
        match m {
            Mutation::Flip { at, bit } => {
                if let Some(b) = v.get_mut(at % len) {
                    *b ^= 1 << bit;
                }
            }
            Mutation::Set { at, bytes } => {
                let at = at % len;
                for (i, b) in bytes.iter().enumerate() {
                    if let Some(d) = v.get_mut(at + i) {
                        *d = *b;
                    }
                }
            }
            Mutation::Value { at, width, value } => {
                let at = at % len;
                for (i, b) in value.to_le_bytes().iter().take(*width).enumerate() {
                    if let Some(d) = v.get_mut(at + i) {
                        *d = *b;
                    }
                }
            }
            Mutation::Truncate { at } => v.truncate(at % len),
            Mutation::Insert { at, bytes } => {
                let at = at % (v.len() + 1);
                v.splice(at..at, bytes.iter().copied());
            }
            Mutation::Splice {
                at,
                seed,
                from,
                len: n,
            } => {
                let Some(src) = seeds.get(seed % seeds.len().max(1)) else {
                    continue;
                };
                let from = from % src.len().max(1);
                let piece: Vec<u8> = src.iter().skip(from).take(*n).copied().collect();
                let at = at % len;
                for (i, b) in piece.into_iter().enumerate() {
                    if let Some(d) = v.get_mut(at + i) {
                        *d = b;
                    }
                }
            }
        }
    }
    v
}

/// For each target: `arbitrary` cases of random bytes up to `max_len`,
/// `mutated` cases of mutated seeds.
macro_rules! engine {
    ($($name:ident: $arbitrary:expr, $mutated:expr, $max_len:expr;)*) => {$(
        mod $name {
            use super::*;

            fn seeds() -> &'static [Vec<u8>] {
                static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
                SEEDS.get_or_init(|| super::seeds(stringify!($name)))
            }

            proptest! {
                #![proptest_config(ProptestConfig::with_cases($arbitrary))]
                #[test]
                fn arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..$max_len)) {
                    crate::fuzz::$name(&data);
                }
            }

            proptest! {
                #![proptest_config(ProptestConfig::with_cases($mutated))]
                #[test]
                fn mutated_seeds(
                    seed in any::<usize>(),
                    muts in proptest::collection::vec(mutation(), 1..6),
                ) {
                    let input = apply(seeds(), seed, &muts);
                    crate::fuzz::$name(&input);
                }
            }
        }
    )*};
}

engine! {
    log_file_header: 200, 200, 4200;
    checkpoint_slot: 200, 200, 4200;
    log_record_stream: 100, 200, 40_000;
    redo_record: 200, 200, 2000;
    page: 40, 100, 20_000;
    superblock: 40, 60, 4200;
    doublewrite: 30, 60, 20_000;
    catalog_entry: 300, 200, 2000;
    row_and_key: 500, 500, 300;
    undo_record: 300, 150, 600;
    stats_files: 60, 100, 3000;
    open_mutated_db: 30, 60, 200;
}

#[test]
fn every_target_has_seeds_that_it_accepts() {
    for (name, target) in TARGETS {
        let s = seeds(name);
        assert!(!s.is_empty(), "{name} has no seeds");
        for input in &s {
            target(input);
        }
    }
}

/// The crashed image recovers: the open transaction is rolled back and
/// the database checks clean (so mutations start from a database that
/// works, not from one that fails to open anyway).
#[test]
fn crashed_image_recovers_clean() {
    let vfs = image::materialize(image::crashed_db_image()).unwrap();
    let db = Db::open_with(vfs, Path::new(DB_DIR), image::db_options()).unwrap();
    let rec = db.stats().recovery.unwrap();
    assert_eq!(rec.rolled_back.len(), 1, "{rec:?}");
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert!(report.live_rows > 250, "{report:?}");
    let store = db.store().stats();
    let recovery = store.recovery.unwrap();
    assert!(recovery.records_applied > 0, "{recovery:?}");
    db.close().unwrap();
}

/// Building an image twice gives the same bytes once normalised, so
/// failures reproduce in the next process and written corpora stay valid.
#[test]
fn images_are_deterministic() {
    let mut a = image::build_crashed_db().unwrap();
    let mut b = image::build_crashed_db().unwrap();
    image::normalize(&mut a);
    image::normalize(&mut b);
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (path, bytes) in &a {
        assert!(b.get(path) == Some(bytes), "{} differs", path.display());
    }
    assert_eq!(seeds("page"), seeds("page"));
}

/// The first seeds of the page and log stream targets reach what they
/// are for: a whole B+tree, every record.
#[test]
fn seeds_reach_the_tree_and_the_records() {
    let page_seed = &seeds("page")[0];
    let pages: Vec<Vec<u8>> = page_seed[1..]
        .chunks(super::PAGE)
        .map(<[u8]>::to_vec)
        .collect();
    let store = super::tree_store(&pages).unwrap();
    let check = crate::btree::Tree::open(&store, crate::page::PageId(1))
        .verify()
        .unwrap();
    assert_eq!(check.entries, 120);
    assert!(
        check.overflow_pages >= 3 && check.internal == 1,
        "{check:?}"
    );
    drop(store);
    for (i, s) in seeds("log_record_stream").iter().enumerate() {
        let vfs = image::materialize(&super::stream_image(s)).unwrap();
        let info = crate::log::inspect(vfs.as_ref(), Path::new(image::LOG_DIR)).unwrap();
        assert!(info.records_after_checkpoint >= 2, "seed {i}: {info:?}");
    }
}

/// The seeds reach the decoders' success paths.
#[test]
fn seeds_decode() {
    for s in seeds("catalog_entry") {
        crate::catalog::schema::decode_entry(Path::new("c"), b"t", &s).unwrap();
    }
    for s in seeds("undo_record") {
        crate::txn::UndoRecord::decode(&s[1..]).unwrap();
        // Stored and rolled back by recovery, version 1 records included.
        crate::fuzz::undo_record(&s);
    }
    // Header and slot seeds are blocks without their trailing zeros.
    let block = |s: &[u8]| {
        let mut b = s[1..].to_vec();
        b.resize(crate::log::format::BLOCK as usize, 0);
        b
    };
    for s in seeds("log_file_header").iter().take(2) {
        crate::log::format::FileHeader::decode(&block(s)).unwrap();
    }
    for s in seeds("checkpoint_slot") {
        crate::log::format::CheckpointSlot::decode(&block(&s)).unwrap();
    }
    for s in seeds("redo_record") {
        for op in crate::mtr::redo::decode(&s) {
            op.unwrap();
        }
    }
    let columns = image::items_table().columns;
    let rows = seeds("row_and_key");
    crate::catalog::decode_row(&columns, &rows[0]).unwrap();
    for s in seeds("stats_files") {
        assert!(serde_json::from_slice::<serde_json::Value>(&s).is_ok());
    }
}

/// Write every target's seeds to `fuzz/seeds/<target>/seed-<n>`:
/// `cargo test --lib fuzz::tests::write_seed_corpora -- --ignored`.
#[test]
#[ignore = "writes the seeds of the cargo-fuzz project"]
fn write_seed_corpora() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    for (name, _) in TARGETS {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for (i, s) in seeds(name).iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}")), s).unwrap();
        }
    }
}

/// A finding: its name, its target, its input.
type Finding = (&'static str, fn(&[u8]), &'static [u8]);

/// Inputs the 10-minute libFuzzer runs found (`fuzz/regressions/`), each
/// through its target: they must end, within a minute, without a panic.
/// * `page-3690eaed`: a page whose checksum matches but whose LSN lies far
///   beyond the end of the log; its next change asserted page-LSN order
///   (buffer B4). Now refused when read (buffer B10).
/// * `redo_record-2f8b4f95`: a redo record naming a page id whose offset
///   overflowed when the page's end was computed. Now a `LimitExceeded`.
/// * `superblock-64f6ef5d`: a superblock whose checksum matches but whose
///   LSN lies past the log's end, which recovery then wrote under. Now
///   refused at open (buffer B10 against the end recovery found).
/// * `page-2844d37c`: an internal node naming itself as its child; an
///   insert latched the child for writing while it held the node for
///   reading, and waited for itself forever. Now `CorruptPage`.
#[test]
fn libfuzzer_findings() {
    let cases: [Finding; 4] = [
        (
            "page-3690eaed",
            crate::fuzz::page,
            include_bytes!("../../fuzz/regressions/page-3690eaed"),
        ),
        (
            "redo_record-2f8b4f95",
            crate::fuzz::redo_record,
            include_bytes!("../../fuzz/regressions/redo_record-2f8b4f95"),
        ),
        (
            "superblock-64f6ef5d",
            crate::fuzz::superblock,
            include_bytes!("../../fuzz/regressions/superblock-64f6ef5d"),
        ),
        (
            "page-2844d37c",
            crate::fuzz::page,
            include_bytes!("../../fuzz/regressions/page-2844d37c"),
        ),
    ];
    for (name, target, input) in cases {
        eprintln!("{name}");
        // On a thread, so a hang fails the test instead of stalling it
        // (the thread is left behind; the test process ends with it).
        let (done, ended) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            target(input);
            let _ = done.send(());
        });
        match ended.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(()) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("fuzz finding {name} did not end within 60 s")
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                panic!("fuzz finding {name} panicked")
            }
        }
    }
}
