//! Garbage on disk is a clear error at open (or, in the doublewrite area,
//! ignored as not-a-page), never a panic.

use proptest::prelude::*;
use quill::Error;
use quill::io::{OpenOptions, SimFs, Vfs};
use quill::store::Store;

use crate::common::*;

fn made(fs: &SimFs) {
    let s = create(fs, opts(64));
    let t = quill::btree::Tree::create(&s).unwrap();
    for i in 0..200u32 {
        t.put(&i.to_be_bytes(), &bytes(u64::from(i), 50)).unwrap();
    }
    s.close().unwrap();
}

#[test]
fn foreign_and_short_files_are_errors() {
    let fs = SimFs::new(1);
    made(&fs);
    let data = dir().join("data.qdb");
    // Damaged magic in an otherwise Quill file: a damaged superblock (item
    // 9: it was reported as "not a Quill tablespace file").
    assert!(fs.corrupt(&data, 48, b"NOTQUILL"));
    match Store::open(vfs(&fs), dir(), opts(64)) {
        Err(e @ Error::CorruptPage { page: 0, .. }) => {
            assert!(e.to_string().contains("superblock is damaged"), "{e}")
        }
        other => panic!("expected CorruptPage, got {other:?}"),
    }
    // A foreign file in its place.
    let fs = SimFs::new(5);
    made(&fs);
    let mut sqlite = b"SQLite format 3\0".to_vec();
    sqlite.resize(64 << 10, 7);
    assert!(fs.corrupt(&data, 0, &sqlite));
    match Store::open(vfs(&fs), dir(), opts(64)) {
        Err(Error::Foreign { .. }) => {}
        other => panic!("expected Foreign, got {other:?}"),
    }
    // Short file.
    let fs = SimFs::new(2);
    made(&fs);
    let f = fs.open(&data, OpenOptions::read_write()).unwrap();
    f.set_len(100).unwrap();
    drop(f);
    assert!(matches!(
        Store::open(vfs(&fs), dir(), opts(64)),
        Err(Error::Corrupt { .. })
    ));
    // Missing.
    let fs = SimFs::new(3);
    assert!(matches!(
        Store::open(vfs(&fs), dir(), opts(64)),
        Err(Error::NoDatabase { .. })
    ));
    // A doublewrite file of the wrong size.
    let fs = SimFs::new(4);
    made(&fs);
    let f = fs
        .open(&dir().join("doublewrite"), OpenOptions::read_write())
        .unwrap();
    f.set_len(4096).unwrap();
    drop(f);
    assert!(matches!(
        Store::open(vfs(&fs), dir(), opts(64)),
        Err(Error::Corrupt { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    /// Random bytes over the superblock's version/page-size fields, over a
    /// random data page, or over the doublewrite area: open and a full
    /// read either work or fail with an error; nothing panics.
    #[test]
    fn garbage_never_panics(where_ in 0u8..3, off in 0u64..4096, junk in proptest::collection::vec(any::<u8>(), 1..64), seed in any::<u64>()) {
        let fs = SimFs::new(seed);
        made(&fs);
        let (path, base) = match where_ {
            0 => (dir().join("data.qdb"), 0u64),
            1 => (dir().join("data.qdb"), 4096 * (1 + seed % 6)),
            _ => (dir().join("doublewrite"), 4096 * (seed % 64)),
        };
        fs.corrupt(&path, base + off.min(4096 - junk.len() as u64), &junk);
        if let Ok(s) = Store::open(vfs(&fs), dir(), opts(64)) {
            if let Ok(root) = s.root(0) {
                let _ = root;
            }
            let t = quill::btree::Tree::open(&s, quill::page::PageId(1));
            let _ = t.verify();
            let _ = t.range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, quill::btree::Direction::Forward).count();
        }
    }
}
