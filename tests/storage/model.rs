//! B+tree against a `BTreeMap` model: random puts, deletes (one key, or a
//! sorted batch with `delete_sorted`), gets and range scans with keys and values of random sizes (splits, merges,
//! overflow values), across clean reopens; puts of a key at the leaf an
//! earlier get found it in (`put_at`, LH1), with any steps between.

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;
use quill::btree::{Direction, Tree};
use quill::io::SimFs;

use crate::common::*;

#[derive(Clone, Debug)]
enum Step {
    Put {
        key: u16,
        klen: u8,
        vlen: u32,
    },
    Delete {
        key: u16,
    },
    DeleteSorted {
        from: u16,
        len: u16,
        every: u16,
    },
    Get {
        key: u16,
    },
    /// A put at where the last get of the key found it (a plain put if
    /// none did).
    PutAt {
        key: u16,
        vlen: u32,
    },
    Scan {
        lo: u16,
        hi: u16,
        back: bool,
    },
    Reopen,
}

fn key_bytes(k: u16, klen: u8) -> Vec<u8> {
    // Order-preserving prefix from k, then filler of varying length.
    let mut v = k.to_be_bytes().to_vec();
    v.extend(bytes(u64::from(k), usize::from(klen)));
    v
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (0u16..600, 0u8..200, prop_oneof![6 => 0u32..300, 2 => 300u32..1100, 1 => 1100u32..9000])
            .prop_map(|(key, klen, vlen)| Step::Put { key, klen, vlen }),
        4 => (0u16..600).prop_map(|key| Step::Delete { key }),
        1 => (0u16..600, 1u16..200, 1u16..4).prop_map(|(from, len, every)| Step::DeleteSorted { from, len, every }),
        2 => (0u16..600).prop_map(|key| Step::Get { key }),
        2 => (0u16..600, prop_oneof![6 => 0u32..300, 1 => 300u32..1100, 1 => 1100u32..9000])
            .prop_map(|(key, vlen)| Step::PutAt { key, vlen }),
        1 => (0u16..600, 0u16..600, any::<bool>()).prop_map(|(lo, hi, back)| Step::Scan { lo, hi, back }),
        1 => Just(Step::Reopen),
    ]
}

fn run(steps: &[Step], seed: u64) {
    let fs = SimFs::new(seed);
    let o = opts(64);
    let mut store = create(&fs, o.clone());
    let root = Tree::create(&store).unwrap().root();
    // Key prefix -> full key (a key id has one length at a time).
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut full: BTreeMap<u16, Vec<u8>> = BTreeMap::new();
    // Key id -> where its last get found it (kept across every step,
    // reopens included: a stale one must be turned away).
    let mut found: BTreeMap<u16, quill::btree::LeafHint> = BTreeMap::new();
    for (n, s) in steps.iter().enumerate() {
        let t = Tree::open(&store, root);
        match *s {
            Step::Put { key, klen, vlen } => {
                if let Some(old) = full.remove(&key) {
                    model.remove(&old);
                    t.delete(&old).unwrap();
                }
                let k = key_bytes(key, klen.min(t.max_key_len() as u8 - 2));
                let v = bytes(n as u64, vlen as usize);
                t.put(&k, &v).unwrap();
                full.insert(key, k.clone());
                model.insert(k, v);
            }
            Step::Delete { key } => {
                let was = full.remove(&key);
                let k = was.clone().unwrap_or_else(|| key_bytes(key, 1));
                let r = t.delete(&k).unwrap();
                assert_eq!(r.is_some(), was.is_some(), "step {n}: delete result");
                model.remove(&k);
            }
            Step::DeleteSorted { from, len, every } => {
                // Every `every`th key id of a run, present or not (absent
                // ones by a key that is not in the tree).
                let mut keys = Vec::new();
                let mut present = 0;
                for key in (from..from.saturating_add(len)).step_by(usize::from(every)) {
                    match full.remove(&key) {
                        Some(k) => {
                            model.remove(&k);
                            present += 1;
                            keys.push(k);
                        }
                        None => keys.push(key_bytes(key, 1)),
                    }
                }
                keys.sort();
                keys.dedup();
                assert_eq!(
                    t.delete_sorted(&keys).unwrap(),
                    present,
                    "step {n}: deleted"
                );
            }
            Step::Get { key } => {
                let k = full.get(&key).cloned().unwrap_or_else(|| key_bytes(key, 3));
                let got = t.get_with_leaf(&k).unwrap();
                if let Some((_, at)) = got {
                    found.insert(key, at);
                }
                assert_eq!(got.map(|(v, _)| v), model.get(&k).cloned(), "step {n}: get");
            }
            Step::PutAt { key, vlen } => {
                // The key as it is (or a new one of length 5).
                let k = full.get(&key).cloned().unwrap_or_else(|| key_bytes(key, 3));
                let v = bytes(n as u64, vlen as usize);
                t.put_at(&k, &v, found.get(&key).copied()).unwrap();
                full.insert(key, k.clone());
                model.insert(k, v);
            }
            Step::Scan { lo, hi, back } => {
                let lo_k = lo.to_be_bytes().to_vec();
                let hi_k = hi.to_be_bytes().to_vec();
                let lb = Bound::Included(lo_k.as_slice());
                let hb = Bound::Excluded(hi_k.as_slice());
                let dir = if back {
                    Direction::Backward
                } else {
                    Direction::Forward
                };
                let got: Vec<_> = t.range(lb, hb, dir).collect::<quill::Result<_>>().unwrap();
                let mut want: Vec<_> = if lo_k < hi_k {
                    model
                        .range::<[u8], _>((lb, hb))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                } else {
                    Vec::new()
                };
                if back {
                    want.reverse();
                }
                assert_eq!(got.len(), want.len(), "step {n}: scan length");
                assert!(got == want, "step {n}: scan contents");
            }
            Step::Reopen => {
                store.close().unwrap();
                store = open(&fs, o.clone());
            }
        }
    }
    assert_eq!(contents(&store, root), model);
    store.close().unwrap();
    let store = open(&fs, o);
    assert_eq!(contents(&store, root), model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn btree_matches_model(steps in proptest::collection::vec(step(), 1..400), seed in any::<u64>()) {
        run(&steps, seed);
    }
}

/// Many sequential inserts then deletes of everything: deep splits, then
/// merges all the way back to a root and its one leaf (BT1: a root of
/// level 1 keeps its leaf).
#[test]
fn grow_and_shrink() {
    let fs = SimFs::new(7);
    let store = create(&fs, opts(256));
    let t = Tree::create(&store).unwrap();
    let n = 5000u64;
    for i in 0..n {
        t.put(&i.to_be_bytes(), &bytes(i, 150 + (i % 200) as usize))
            .unwrap();
    }
    let c = t.verify().unwrap();
    assert_eq!(c.entries, n);
    assert!(c.height >= 3, "height {}", c.height);
    for i in (0..n).step_by(2) {
        assert!(t.delete(&i.to_be_bytes()).unwrap().is_some());
    }
    for i in (1..n).rev().step_by(2) {
        assert!(t.delete(&i.to_be_bytes()).unwrap().is_some());
    }
    let c = t.verify().unwrap();
    assert_eq!(c.entries, 0);
    assert_eq!(
        c.height, 2,
        "merges collapse the tree to a root and one leaf"
    );
    store.close().unwrap();
}

/// A tree used as a queue (appends at the right, everything deleted from
/// the left, again and again: the undo log under purge) stays at a root
/// and one leaf between bursts (BT1) and logs about the bytes it
/// inserts: it used to collapse to its root at each drain (logging a
/// whole page image) and split the root again a page later (logging
/// every cell once more).
#[test]
fn a_queue_does_not_collapse_and_split_its_root() {
    let fs = SimFs::new(8);
    let store = create(&fs, opts(256));
    let t = Tree::create(&store).unwrap();
    let value = |i: u64| bytes(i, 100);
    let burst = 100u64; // 11 KB of cells: past a 4 KiB page
    let mut next = 0u64;
    let mut logged = Vec::new();
    for _ in 0..6 {
        let before = store.log().end_lsn().0;
        for _ in 0..burst {
            t.put(&next.to_be_bytes(), &value(next)).unwrap();
            next += 1;
        }
        for i in next - burst..next {
            assert!(t.delete(&i.to_be_bytes()).unwrap().is_some());
        }
        logged.push(store.log().end_lsn().0 - before);
        let c = t.verify().unwrap();
        assert_eq!((c.entries, c.height), (0, 2), "after a drain");
    }
    let cells = burst * (8 + 100);
    // The first burst grows the tree; every later one logs its cells,
    // their deletes and the framing of 200 mini-transactions, well
    // under twice the cells (a collapse and a root split logged 3x).
    for (i, &n) in logged.iter().enumerate().skip(1) {
        assert!(
            n < 2 * cells,
            "burst {i} logged {n} bytes for {cells} bytes of cells"
        );
    }
    store.close().unwrap();
}

/// Bulk build from a sorted stream equals the model, at every size
/// (empty, one root leaf, several levels, overflow values), survives a
/// crash once built, and the tree then takes ordinary changes.
#[test]
fn bulk_build_matches_model() {
    for (n, seed) in [(0u64, 1u64), (1, 2), (30, 3), (3000, 4), (40_000, 5)] {
        let fs = SimFs::new(seed);
        let store = create(&fs, opts(256));
        let model: BTreeMap<Vec<u8>, Vec<u8>> = (0..n)
            .map(|i| {
                let len = if i % 500 == 7 {
                    5000
                } else {
                    (i % 150) as usize
                };
                ((i * 3).to_be_bytes().to_vec(), bytes(i, len))
            })
            .collect();
        let t = Tree::bulk_build(&store, model.clone()).unwrap();
        let root = t.root();
        assert_eq!(contents(&store, root), model, "n={n}");
        if n >= 3000 {
            assert!(t.verify().unwrap().height >= 2);
        }
        store
            .commit(store.log().end_lsn(), quill::Durability::Sync)
            .unwrap();
        let fs2 = fs.crash(quill::io::CrashMode::DropUnsynced);
        drop(store);
        let store = open(&fs2, opts(256));
        assert_eq!(contents(&store, root), model, "n={n} after a crash");
        let t = Tree::open(&store, root);
        let mut m = model.clone();
        for i in 0..200u64 {
            let k = (i * 7 + 1).to_be_bytes().to_vec();
            t.put(&k, b"x").unwrap();
            m.insert(k, b"x".to_vec());
        }
        assert_eq!(contents(&store, root), m);
        store.close().unwrap();
    }
}

#[test]
fn bulk_build_rejects_unsorted_input() {
    let fs = SimFs::new(9);
    let store = create(&fs, opts(64));
    let input = vec![(b"b".to_vec(), vec![]), (b"a".to_vec(), vec![])];
    assert!(matches!(
        Tree::bulk_build(&store, input),
        Err(quill::Error::InvalidArgument { .. })
    ));
}

/// `delete_sorted` refuses keys that are not strictly ascending (a
/// duplicate would otherwise delete a neighbour) and deletes nothing.
#[test]
fn delete_sorted_rejects_unsorted_or_repeated_keys() {
    let fs = SimFs::new(9);
    let store = create(&fs, opts(64));
    let t = Tree::create(&store).unwrap();
    for i in 0..10u8 {
        t.put(&[i], b"v").unwrap();
    }
    for bad in [vec![vec![3u8], vec![3]], vec![vec![5u8], vec![4]]] {
        let e = t.delete_sorted(&bad).unwrap_err();
        assert!(matches!(e, quill::Error::InvalidArgument { .. }), "{e}");
    }
    assert_eq!(contents(&store, t.root()).len(), 10);
    assert_eq!(
        t.delete_sorted(&[vec![3u8], vec![4], vec![200]]).unwrap(),
        2
    );
    assert_eq!(contents(&store, t.root()).len(), 8);
}

/// A tree used as a queue, as the undo log is: appends at the right end,
/// batches deleted from the left end with `delete_sorted`. Leftmost leaves
/// drain and merge (into their right sibling, the smaller side moving);
/// the tree matches the model throughout and across a reopen.
#[test]
fn queue_appends_right_and_drains_left() {
    let fs = SimFs::new(11);
    let o = opts(64);
    let mut store = create(&fs, o.clone());
    let root = Tree::create(&store).unwrap().root();
    let mut model = BTreeMap::new();
    let (mut head, mut tail) = (0u64, 0u64);
    for round in 0..60u64 {
        let t = Tree::open(&store, root);
        for _ in 0..(50 + round % 7 * 10) {
            let k = tail.to_be_bytes().to_vec();
            let v = bytes(tail, 40 + (tail % 5) as usize * 30);
            t.put(&k, &v).unwrap();
            model.insert(k, v);
            tail += 1;
        }
        let n = (40 + round % 5 * 15).min(tail - head);
        let keys: Vec<Vec<u8>> = (head..head + n).map(|k| k.to_be_bytes().to_vec()).collect();
        assert_eq!(t.delete_sorted(&keys).unwrap(), n);
        for k in &keys {
            model.remove(k);
        }
        head += n;
        if round % 20 == 19 {
            store.close().unwrap();
            store = open(&fs, o.clone());
        }
    }
    assert_eq!(contents(&store, root), model);
}

#[derive(Clone, Debug)]
enum QueueStep {
    /// Append `n` keys above every key of tree `t` (the append hint).
    Append { t: usize, n: u16, vlen: u16 },
    /// Delete tree `t`'s `n` lowest keys (merges free its leaves, which
    /// the other tree's splits then reuse).
    DeleteLowest { t: usize, n: u16 },
    /// Put a key inside tree `t`'s range (splits that leave the
    /// rightmost leaf where the hint had it).
    PutInside { t: usize, at: u16 },
}

fn queue_step() -> impl Strategy<Value = QueueStep> {
    prop_oneof![
        4 => (0usize..2, 1u16..120, 10u16..400).prop_map(|(t, n, vlen)| QueueStep::Append { t, n, vlen }),
        2 => (0usize..2, 1u16..200).prop_map(|(t, n)| QueueStep::DeleteLowest { t, n }),
        2 => (0usize..2, any::<u16>()).prop_map(|(t, at)| QueueStep::PutInside { t, at }),
    ]
}

/// Two trees used as queues over one free list, with inserts inside
/// their ranges: appends go through each tree's append hint while the
/// other tree's splits and merges reuse freed leaves (btree AH1, AH2);
/// each tree must match its model.
fn run_queues(steps: &[QueueStep], seed: u64) {
    let fs = SimFs::new(seed);
    let store = create(&fs, opts(64));
    let roots = [
        Tree::create(&store).unwrap().root(),
        Tree::create(&store).unwrap().root(),
    ];
    let mut models: [BTreeMap<Vec<u8>, Vec<u8>>; 2] = Default::default();
    let mut next = [0u64; 2];
    for (n, s) in steps.iter().enumerate() {
        match *s {
            QueueStep::Append { t, n: count, vlen } => {
                let tree = Tree::open(&store, roots[t]);
                for _ in 0..count {
                    let k = (next[t] * 4).to_be_bytes().to_vec();
                    let v = bytes(next[t], usize::from(vlen));
                    tree.put(&k, &v).unwrap();
                    models[t].insert(k, v);
                    next[t] += 1;
                }
            }
            QueueStep::DeleteLowest { t, n: count } => {
                let tree = Tree::open(&store, roots[t]);
                let keys: Vec<Vec<u8>> =
                    models[t].keys().take(usize::from(count)).cloned().collect();
                for k in keys {
                    assert!(tree.delete(&k).unwrap().is_some(), "step {n}: delete");
                    models[t].remove(&k);
                }
            }
            QueueStep::PutInside { t, at } => {
                if next[t] == 0 {
                    continue;
                }
                let tree = Tree::open(&store, roots[t]);
                // Between two appended keys (they are multiples of 4).
                let k = ((u64::from(at) % next[t]) * 4 + 1).to_be_bytes().to_vec();
                let v = bytes(u64::from(at), 150);
                tree.put(&k, &v).unwrap();
                models[t].insert(k, v);
            }
        }
    }
    for t in 0..2 {
        assert_eq!(contents(&store, roots[t]), models[t], "tree {t}");
    }
    store.close().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn two_queues_sharing_pages_match_their_models(
        steps in proptest::collection::vec(queue_step(), 1..120),
        seed in any::<u64>(),
    ) {
        run_queues(&steps, seed);
    }
}
