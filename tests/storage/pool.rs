//! Buffer pool behaviour: torn pages and the doublewrite area, corrupt
//! pages, small pools with large working sets, scan resistance.

use std::collections::BTreeMap;
use std::ops::Bound::Unbounded;

use quill::btree::{Direction, Tree};
use quill::io::{CrashMode, SimFs};
use quill::page::PageId;
use quill::{Durability, Error};

use crate::common::*;

/// Fill a tree, flush, then change one leaf and flush it again; returns
/// (store, root, key on the changed leaf).
fn prepared(fs: &SimFs, doublewrite: bool) -> (quill::store::Store, PageId) {
    let mut o = opts(400);
    o.doublewrite = doublewrite;
    o.cleaner = false;
    let store = create(fs, o);
    let t = Tree::create(&store).unwrap();
    for i in 0..300u32 {
        t.put(&i.to_be_bytes(), &bytes(u64::from(i), 100)).unwrap();
    }
    store.flush_all().unwrap();
    let root = t.root();
    (store, root)
}

/// The page holding `key`'s leaf: found by corrupting nothing, just by
/// the page the root points to for it (a two-level tree here).
fn leaf_of(fs: &SimFs, store: &quill::store::Store, root: PageId, key: &[u8]) -> PageId {
    let _ = fs;
    let pool = store.pool();
    let p = pool.fetch_read(root).unwrap();
    assert_eq!(
        quill::page::node::level(&p),
        1,
        "test expects a two-level tree"
    );
    let i = quill::page::node::search_internal(&p, key).unwrap();
    PageId(quill::page::node::child(&p, i).unwrap())
}

fn tear(fs: &SimFs, page: PageId) {
    // Garbage over the second half of the page: a write torn at 2 KiB.
    let off = page.0 * 4096 + 2048;
    assert!(fs.corrupt(&dir().join("data.qdb"), off, &[0xA5; 2048]));
}

#[test]
fn torn_page_comes_back_from_doublewrite() {
    let fs = SimFs::new(11);
    let (store, root) = prepared(&fs, true);
    let key = 150u32.to_be_bytes();
    let leaf = leaf_of(&fs, &store, root, &key);
    // Change the leaf, write it (through the doublewrite area), then tear
    // its home copy as a crash during the home write would.
    let t = Tree::open(&store, root);
    let lsn = t.put(&key, b"new value").unwrap();
    store.commit(lsn, Durability::Sync).unwrap();
    store.flush_all().unwrap();
    tear(&fs, leaf);
    let fs2 = fs.crash(CrashMode::DropUnsynced);
    drop(store);
    let mut o = opts(400);
    o.cleaner = false;
    let store = open(&fs2, o);
    let rec = store.recovery().unwrap();
    assert_eq!(rec.pages_repaired, vec![leaf.0], "repaired pages reported");
    let t = Tree::open(&store, root);
    assert_eq!(t.get(&key).unwrap().as_deref(), Some(&b"new value"[..]));
    assert_eq!(t.verify().unwrap().entries, 300);
}

#[test]
fn unrepairable_page_is_an_error_naming_it() {
    let fs = SimFs::new(12);
    let (store, root) = prepared(&fs, false);
    let key = 150u32.to_be_bytes();
    let leaf = leaf_of(&fs, &store, root, &key);
    store.close().unwrap();
    tear(&fs, leaf);
    let mut o = opts(400);
    o.doublewrite = false;
    let store = open(&fs, o);
    let t = Tree::open(&store, root);
    match t.get(&key) {
        Err(Error::CorruptPage { page, .. }) => assert_eq!(page, leaf.0),
        other => panic!("expected a corrupt-page error, got {other:?}"),
    }
    // Other leaves still read.
    assert!(t.get(&0u32.to_be_bytes()).unwrap().is_some());
}

/// The same workload on a pool of 100 pages and one of 20000: the
/// working set (~1500 pages) is 10x+ the small pool. Results identical.
#[test]
fn small_pool_matches_large_pool() {
    type Outcome = (BTreeMap<Vec<u8>, Vec<u8>>, Vec<Option<Vec<u8>>>, u64);
    fn workload(frames: u64) -> Outcome {
        let fs = SimFs::new(3);
        let store = create(&fs, opts(frames));
        let t = Tree::create(&store).unwrap();
        let mut gets = Vec::new();
        for i in 0..6000u64 {
            let k = (i * 7919 % 6000).to_be_bytes();
            t.put(&k, &bytes(i, 200 + (i % 700) as usize)).unwrap();
            if i % 5 == 0 {
                t.delete(&((i * 31) % 6000).to_be_bytes()).unwrap();
            }
            if i % 3 == 0 {
                gets.push(t.get(&((i * 13) % 6000).to_be_bytes()).unwrap());
            }
        }
        let evictions = store.stats().pool.evictions;
        let root = t.root();
        store.close().unwrap();
        let store = open(&fs, opts(frames));
        let c = contents(&store, root);
        (c, gets, evictions)
    }
    let (small, small_gets, small_evictions) = workload(100);
    let (large, large_gets, large_evictions) = workload(20_000);
    assert!(
        small_evictions > 5_000,
        "small pool evicted {small_evictions}"
    );
    assert_eq!(large_evictions, 0);
    assert_eq!(small_gets, large_gets);
    assert!(small == large);
}

/// A hot set read repeatedly survives a scan of a table 10x the pool.
#[test]
fn scan_does_not_flush_out_the_working_set() {
    let fs = SimFs::new(4);
    let store = create(&fs, opts(200));
    let hot = Tree::create(&store).unwrap();
    let big = Tree::create(&store).unwrap();
    for i in 0..200u32 {
        hot.put(&i.to_be_bytes(), &bytes(u64::from(i), 100))
            .unwrap();
    }
    for i in 0..8000u32 {
        big.put(&i.to_be_bytes(), &bytes(u64::from(i), 900))
            .unwrap();
    }
    store.flush_all().unwrap();
    // Touch the hot set a few times (second and later touches mark it).
    for _ in 0..3 {
        for i in 0..200u32 {
            hot.get(&i.to_be_bytes()).unwrap();
        }
    }
    let n = big.range(Unbounded, Unbounded, Direction::Forward).count();
    assert_eq!(n, 8000);
    let before = store.stats().pool.misses;
    for i in 0..200u32 {
        hot.get(&i.to_be_bytes()).unwrap();
    }
    let misses = store.stats().pool.misses - before;
    assert_eq!(misses, 0, "the scan evicted {misses} hot pages");
}

/// Doublewrite turned off after running with it on: the old area is
/// removed at open, so a later torn page is reported, never "repaired"
/// from a stale image.
#[test]
fn old_doublewrite_area_is_never_used_after_turning_it_off() {
    let fs = SimFs::new(13);
    let (store, root) = prepared(&fs, true);
    let key = 150u32.to_be_bytes();
    let leaf = leaf_of(&fs, &store, root, &key);
    store.close().unwrap();
    assert!(fs.current_bytes(&dir().join("doublewrite")).is_some());
    let mut o = opts(400);
    o.doublewrite = false;
    let store = open(&fs, o.clone());
    assert!(
        fs.current_bytes(&dir().join("doublewrite")).is_none(),
        "the unused area is removed"
    );
    let t = Tree::open(&store, root);
    t.put(&key, b"newer").unwrap();
    store.close().unwrap();
    tear(&fs, leaf);
    let store = open(&fs, o);
    match Tree::open(&store, root).get(&key) {
        Err(Error::CorruptPage { page, .. }) => assert_eq!(page, leaf.0),
        other => panic!("expected a corrupt-page error, got {other:?}"),
    }
}

/// Many threads reading a corrupt page at once all get the error, and no
/// frame is lost to the failed loads (a small pool keeps working).
#[test]
fn failed_loads_do_not_leak_frames() {
    let fs = SimFs::new(14);
    let (store, root) = prepared(&fs, false);
    let key = 150u32.to_be_bytes();
    let leaf = leaf_of(&fs, &store, root, &key);
    store.close().unwrap();
    tear(&fs, leaf);
    let mut o = opts(32);
    o.doublewrite = false;
    let store = std::sync::Arc::new(open(&fs, o));
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                let t = Tree::open(&store, root);
                for _ in 0..200 {
                    assert!(matches!(t.get(&key), Err(Error::CorruptPage { .. })));
                }
            })
        })
        .collect();
    for h in threads {
        h.join().unwrap();
    }
    // Every other key still reads through the 32-frame pool, many times.
    let t = Tree::open(&store, root);
    for round in 0..5 {
        for i in (0..300u32).filter(|i| leaf_of(&fs, &store, root, &i.to_be_bytes()) != leaf) {
            assert!(
                t.get(&i.to_be_bytes()).unwrap().is_some(),
                "round {round} key {i}"
            );
        }
    }
}

/// A failed page write poisons the pool: later operations fail cleanly,
/// and reopening recovers every acknowledged change.
#[test]
fn failed_page_write_poisons_until_reopen() {
    let fs = SimFs::new(15);
    let (store, root) = prepared(&fs, true);
    let t = Tree::open(&store, root);
    let lsn = t.put(b"acked", b"yes").unwrap();
    store.commit(lsn, Durability::Sync).unwrap();
    fs.fail_write_after(0, true);
    assert!(store.flush_all().is_err());
    assert!(
        t.put(b"later", b"no").is_err(),
        "writes fail after a failed page write"
    );
    let fs2 = fs.crash(CrashMode::DropUnsynced);
    drop(store);
    let mut o = opts(400);
    o.cleaner = false;
    let store = open(&fs2, o);
    let t = Tree::open(&store, root);
    assert_eq!(t.get(b"acked").unwrap().as_deref(), Some(&b"yes"[..]));
    assert_eq!(t.verify().unwrap().entries, 301);
}
