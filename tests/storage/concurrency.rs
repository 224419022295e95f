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
