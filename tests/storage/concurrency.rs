//! Concurrent readers and writers on one tree: writers own disjoint key
//! sets (so each has an exact model), readers scan and read everything;
//! splits and merges happen under all of them; a small pool forces
//! evictions and the cleaner flushes meanwhile.

use std::collections::BTreeMap;
use std::ops::Bound::Unbounded;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use quill::btree::{Direction, Tree};
use quill::io::SimFs;
use rand::{RngExt, SeedableRng, rngs::SmallRng};

use crate::common::*;

#[test]
fn writers_and_readers_on_one_tree() {
    let fs = SimFs::new(21);
    // 60 frames: evictions and LRU flushes race with every operation.
    let store = Arc::new(create(&fs, opts(60)));
    let root = Tree::create(&store).unwrap().root();
    let stop = Arc::new(AtomicBool::new(false));
    let writers = 6u32;
    let mut handles = Vec::new();
    for w in 0..writers {
        let store = store.clone();
        handles.push(std::thread::spawn(move || {
            let t = Tree::open(&store, root);
            let mut rng = SmallRng::seed_from_u64(u64::from(w));
            let mut model = BTreeMap::new();
            for n in 0..3000u64 {
                // Keys interleave across writers: k * writers + w.
                let k = (rng.random_range(0..500u32) * writers + w)
                    .to_be_bytes()
                    .to_vec();
                if rng.random_bool(0.3) {
                    let had = model.remove(&k).is_some();
                    assert_eq!(t.delete(&k).unwrap().is_some(), had);
                } else {
                    let len = if rng.random_bool(0.05) {
                        3000
                    } else {
                        rng.random_range(0..400)
                    };
                    let v = bytes(n * 64 + u64::from(w), len);
                    t.put(&k, &v).unwrap();
                    model.insert(k.clone(), v);
                }
                if rng.random_bool(0.1) {
                    let k = (rng.random_range(0..500u32) * writers + w)
                        .to_be_bytes()
                        .to_vec();
                    assert_eq!(t.get(&k).unwrap(), model.get(&k).cloned());
                }
            }
            model
        }));
    }
    let mut readers = Vec::new();
    for r in 0..2 {
        let store = store.clone();
        let stop = stop.clone();
        readers.push(std::thread::spawn(move || {
            let t = Tree::open(&store, root);
            let mut scans = 0;
            while !stop.load(Ordering::Acquire) {
                let dir = if r == 0 {
                    Direction::Forward
                } else {
                    Direction::Backward
                };
                let keys: Vec<Vec<u8>> = t
                    .range(Unbounded, Unbounded, dir)
                    .map(|x| x.unwrap().0)
                    .collect();
                let mut sorted = keys.clone();
                sorted.sort();
                if dir == Direction::Backward {
                    sorted.reverse();
                }
                assert_eq!(keys, sorted, "a scan returned keys out of order");
                sorted.dedup();
                assert_eq!(keys.len(), sorted.len(), "a scan returned a key twice");
                scans += 1;
            }
            scans
        }));
    }
    let mut all = BTreeMap::new();
    for h in handles {
        all.extend(h.join().unwrap());
    }
    stop.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(contents(&store, root), all);
    let store = Arc::into_inner(store).unwrap();
    store.close().unwrap();
    let store = open(&fs, opts(60));
    assert_eq!(contents(&store, root), all);
}

/// BT5: a reader that finds its leaf latched by another thread lets go of
/// the parent while it waits, so a structure change (which needs the
/// parent exclusively) is not stalled behind it; when the leaf is free the
/// reader starts again and finds its key. The same for a writer.
#[test]
fn descents_wait_for_a_busy_leaf_without_holding_the_parent() {
    use quill::buffer::Load;
    use quill::page::PageId;
    use std::time::{Duration, Instant};

    let fs = SimFs::new(5);
    let store = Arc::new(create(&fs, opts(200)));
    let tree = Tree::create(&store).unwrap();
    let root = tree.root();
    for i in 0..2000u32 {
        tree.put(&i.to_be_bytes(), &bytes(u64::from(i), 40))
            .unwrap();
    }
    let key = 1000u32.to_be_bytes();
    // The leaf for `key` (the tree has two levels at this size).
    let leaf = {
        let r = store.pool().fetch_read(root).unwrap();
        assert_eq!(quill::page::node::level(&r), 1, "expected a two-level tree");
        let i = quill::page::node::search_internal(&r, &key).unwrap();
        PageId(quill::page::node::child(&r, i).unwrap())
    };
    let wait_for_busy_waits = |n: u64| {
        let t0 = Instant::now();
        while store.pool().stats().busy_waits < n {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the descent never waited"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    for write in [false, true] {
        let before = store.pool().stats().busy_waits;
        let held = store.pool().fetch_write(leaf, Load::Verify).unwrap();
        let h = {
            let store = store.clone();
            std::thread::spawn(move || {
                let t = Tree::open(&store, root);
                if write {
                    t.put(&key, b"new").unwrap();
                    t.get(&key).unwrap()
                } else {
                    t.get(&key).unwrap()
                }
            })
        };
        wait_for_busy_waits(before + 1);
        // The waiting thread holds no latch on the root: it can be taken
        // exclusively (as a split would) while the leaf is still held.
        let root_x = store.pool().try_fetch_write(root, Load::Verify).unwrap();
        assert!(
            root_x.is_some(),
            "the root is latched by the waiting descent"
        );
        drop(root_x);
        drop(held);
        let got = h.join().unwrap();
        let want = if write {
            b"new".to_vec()
        } else {
            bytes(1000, 40)
        };
        assert_eq!(got, Some(want));
    }
}
