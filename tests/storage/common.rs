use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use quill::io::{SimFs, Vfs};
use quill::log::LogOptions;
use quill::store::{Store, StoreOptions};

pub fn dir() -> &'static Path {
    Path::new("/db")
}

pub fn vfs(fs: &SimFs) -> Arc<dyn Vfs> {
    Arc::new(fs.clone())
}

/// 4 KiB pages, a pool of `frames` pages, a small log (3 x 256 KiB) so
/// checkpoints and log reuse happen within a test.
pub fn opts(frames: u64) -> StoreOptions {
    StoreOptions {
        page_size: 4096,
        pool_bytes: frames * 4096,
        log: LogOptions {
            file_size: 256 << 10,
            file_count: 3,
            buffer_size: 64 << 10,
            ..LogOptions::default()
        },
        ..StoreOptions::default()
    }
}

#[path = "../support/testdata.rs"]
mod testdata;
/// Deterministic bytes for item `i` of length `len`.
pub use testdata::bytes;

/// Everything in the tree, in order, checked against a forward and a
/// backward scan and the structural verify.
pub fn contents(store: &Store, root: quill::page::PageId) -> BTreeMap<Vec<u8>, Vec<u8>> {
    use quill::btree::{Direction, Tree};
    use std::ops::Bound::Unbounded;
    let t = Tree::open(store, root);
    let check = t.verify().unwrap();
    let fwd: Vec<_> = t
        .range(Unbounded, Unbounded, Direction::Forward)
        .collect::<quill::Result<_>>()
        .unwrap();
    let mut bwd: Vec<_> = t
        .range(Unbounded, Unbounded, Direction::Backward)
        .collect::<quill::Result<_>>()
        .unwrap();
    bwd.reverse();
    assert_eq!(fwd, bwd, "forward and backward scans disagree");
    assert_eq!(check.entries as usize, fwd.len());
    fwd.into_iter().collect()
}

pub fn create(fs: &SimFs, o: StoreOptions) -> Store {
    Store::create(vfs(fs), dir(), o).unwrap()
}

pub fn open(fs: &SimFs, o: StoreOptions) -> Store {
    Store::open(vfs(fs), dir(), o).unwrap()
}
