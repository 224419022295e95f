//! Issue 13 item 6: the tablespace grows on a file system without
//! `fallocate` (FUSE, some network file systems answer `EOPNOTSUPP`) by
//! extending and zero-filling the file, and what was committed survives a
//! power loss. The whole suite also runs with
//! `QUILL_SIMFS_REFUSE_ALLOCATE=1` (`.ci/run`).

use std::collections::BTreeMap;

use quill::Durability;
use quill::btree::Tree;
use quill::io::{CrashMode, SimFs};
use quill::store::{DATA_FILE, Store};

use crate::common::*;

/// `refuse_from_create`: the disk refuses `allocate` from the start (log
/// creation included); otherwise only once the store exists, so only the
/// tablespace's growth meets the refusal.
fn run(seed: u64, refuse_from_create: bool) {
    let fs = SimFs::new(seed);
    fs.refuse_allocate(refuse_from_create);
    let o = opts(40);
    let store = Store::create(vfs(&fs), dir(), o.clone())
        .unwrap_or_else(|e| panic!("creating a store without fallocate: {e}"));
    fs.refuse_allocate(true);
    let data = dir().join(DATA_FILE);
    let initial = fs.current_bytes(&data).unwrap().len();
    let t = Tree::create(&store).unwrap();
    let root = t.root();
    let mut model = BTreeMap::new();
    for i in 0..1500u64 {
        let k = (i * 7919 % 1500).to_be_bytes().to_vec();
        let v = bytes(i, 400);
        let lsn = t.put(&k, &v).unwrap();
        model.insert(k, v);
        if i % 100 == 99 {
            store.commit(lsn, Durability::Sync).unwrap();
        }
    }
    store.flush_all().unwrap();
    let grown = fs.current_bytes(&data).unwrap();
    // Well past the first extension (64 pages), so it grew several times.
    assert!(
        grown.len() > initial + 2 * 64 * 4096,
        "data file {} bytes, {initial} at creation",
        grown.len()
    );
    // Zero-filling the extensions overwrote no page written before them.
    assert_eq!(contents(&store, root), model);
    store.scrub().unwrap();
    let lsn = t.put(b"last", b"committed").unwrap();
    store.commit(lsn, Durability::Sync).unwrap();
    model.insert(b"last".to_vec(), b"committed".to_vec());
    let after = fs.crash(CrashMode::Random);
    drop(store);
    let store = Store::open(vfs(&after), dir(), o)
        .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
    assert_eq!(contents(&store, root), model, "seed {seed}");
    store.scrub().unwrap();
    store.close().unwrap();
}

#[test]
fn tablespace_grows_without_fallocate() {
    for seed in 0..3 {
        run(seed, false);
    }
}

#[test]
fn store_is_created_and_recovered_without_fallocate() {
    for seed in 10..13 {
        run(seed, true);
    }
}
