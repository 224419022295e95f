//! Overflow chains: a value larger than a quarter page lives in a chain of
//! `Overflow` pages, and the leaf cell holds its length and first page.
//!
//! Overflow page body: `next page id u64 (0 = last) | bytes here u32 |
//! data`. Chains are written, read and freed whole inside the caller's
//! mini-transaction; a chain belongs to exactly one leaf cell.
//!
//! Invariants:
//! * O1. The chain of a value of `len` bytes is exactly
//!   [`pages_for`]`(len)` pages: every page but the last is full
//!   ([`payload_per_page`] bytes), the last holds the rest and has next
//!   page 0. [`latch_chain`] (and so [`free`]) counts a chain's pages by
//!   its length alone, so [`write`] asserts it, and [`read`] and
//!   [`latch_chain`] check it on pages from disk (a partly filled page in
//!   the middle, or a chain longer than its value, is corrupt; without the
//!   check an empty page pointing at itself made [`read`] loop forever).

use std::collections::HashSet;

use crate::buffer::{BufferPool, Load};
use crate::mtr::{Mtr, Op, PageHandle};
use crate::page::{self, PAGE_HEADER, PageId, PageType, get_u32, get_u64};
use crate::store::{alloc_page, free_page};
use crate::{Error, Result};

const BODY: usize = PAGE_HEADER + 12;

/// Value bytes one overflow page holds.
pub fn payload_per_page(page_size: usize) -> usize {
    page_size - BODY
}

/// Pages a value of `len` bytes needs.
pub fn pages_for(len: usize, page_size: usize) -> usize {
    len.div_ceil(payload_per_page(page_size))
}

fn corrupt(pool: &BufferPool, page: u64, reason: impl Into<String>) -> Error {
    Error::CorruptPage {
        file: pool.file().path().to_path_buf(),
        page,
        reason: reason.into(),
    }
}

/// Write `value` into a new chain; returns the first page's id.
pub fn write(mtr: &mut Mtr<'_>, value: &[u8]) -> Result<PageId> {
    let per = payload_per_page(mtr.pool().page_size());
    let n = pages_for(value.len(), mtr.pool().page_size());
    let mut pages = Vec::with_capacity(n);
    for _ in 0..n {
        pages.push(alloc_page(mtr)?);
    }
    // O1: one page per chunk, so the zip below drops no bytes.
    assert_eq!(
        n,
        value.chunks(per).count(),
        "overflow O1: chain length for {} bytes",
        value.len()
    );
    let mut body = Vec::with_capacity(per + 12);
    for (i, (&h, chunk)) in pages.iter().zip(value.chunks(per)).enumerate() {
        let next = match pages.get(i + 1) {
            Some(&nh) => mtr.id(nh)?.0,
            None => 0,
        };
        body.clear();
        body.extend_from_slice(&next.to_le_bytes());
        body.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
        body.extend_from_slice(chunk);
        mtr.apply(h, &Op::Init(PageType::Overflow))?;
        mtr.apply(
            h,
            &Op::Write {
                offset: PAGE_HEADER as u32,
                bytes: &body,
            },
        )?;
    }
    let first = pages.first().ok_or_else(|| Error::InvalidArgument {
        what: "overflow value",
        reason: "an empty value is stored inline".into(),
    })?;
    mtr.id(*first)
}

/// The link of overflow page `at` (`p`) when `remaining` bytes of the
/// value are still to come: its next page and how many bytes it holds.
/// The writer fills every page but the last, which holds the rest, and a
/// chain never comes back to a page (`seen`): anything else is damage,
/// and checking it bounds a walk by the value's length and the file's
/// pages whatever the chain's bytes say.
fn link(
    pool: &BufferPool,
    at: u64,
    p: &[u8],
    remaining: usize,
    seen: &mut HashSet<u64>,
) -> Result<(u64, usize)> {
    if page::page_type(p) != Some(PageType::Overflow) {
        return Err(corrupt(pool, at, "expected an overflow page"));
    }
    if !seen.insert(at) {
        return Err(corrupt(pool, at, "overflow chain comes back to this page"));
    }
    let next = get_u64(p, PAGE_HEADER);
    let here = get_u32(p, PAGE_HEADER + 8) as usize;
    let want = remaining.min(payload_per_page(pool.page_size()));
    if here != want {
        return Err(corrupt(
            pool,
            at,
            format!("overflow page holds {here} bytes where the chain needs {want}"),
        ));
    }
    Ok((next, here))
}

/// Read a chain of `len` bytes starting at `first`.
pub fn read(pool: &BufferPool, first: u64, len: u32) -> Result<Vec<u8>> {
    let len = len as usize;
    // Grown page by page: a damaged length must not allocate up front.
    let mut out = Vec::with_capacity(len.min(1 << 20));
    let mut seen = HashSet::new();
    let mut at = first;
    while out.len() < len {
        if at == 0 {
            return Err(corrupt(pool, first, "overflow chain ends early"));
        }
        let p = pool.fetch_read(PageId(at))?;
        let (next, here) = link(pool, at, &p, len - out.len(), &mut seen)?;
        let data = p
            .get(BODY..BODY + here)
            .ok_or_else(|| corrupt(pool, at, "overflow page length out of range"))?;
        out.extend_from_slice(data);
        at = next;
    }
    if at != 0 {
        return Err(corrupt(
            pool,
            first,
            "overflow chain longer than its value (O1)",
        ));
    }
    Ok(out)
}

/// Latch every page of the chain starting at `first` (reading them), so
/// that freeing them later does no I/O.
pub fn latch_chain(mtr: &mut Mtr<'_>, first: u64, len: u32) -> Result<Vec<PageHandle>> {
    let mut remaining = len as usize;
    let mut seen = HashSet::new();
    let mut at = first;
    let mut out = Vec::new();
    while remaining > 0 {
        if at == 0 {
            return Err(corrupt(mtr.pool(), first, "overflow chain ends early"));
        }
        let h = mtr.latch(PageId(at), Load::Verify)?;
        let (next, here) = link(mtr.pool(), at, mtr.page(h)?, remaining, &mut seen)?;
        out.push(h);
        remaining -= here;
        at = next;
    }
    if at != 0 {
        // Freeing only the first pages would leak the rest.
        return Err(corrupt(
            mtr.pool(),
            first,
            "overflow chain longer than its value (O1)",
        ));
    }
    Ok(out)
}

/// Free every page of the chain starting at `first`.
pub fn free(mtr: &mut Mtr<'_>, first: u64, len: u32) -> Result<()> {
    for h in latch_chain(mtr, first, len)? {
        free_page(mtr, h)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::btree::Tree;
    use crate::io::SimFs;
    use crate::page::node::{self, LeafValue};
    use crate::store::{Store, test_options};

    /// A value in a chain of three pages; returns the store, the tree's
    /// root and the chain's page ids.
    fn chain() -> (Store, PageId, Vec<u64>) {
        let store =
            Store::create(Arc::new(SimFs::new(1)), Path::new("/db"), test_options()).unwrap();
        let tree = Tree::create(&store).unwrap();
        let per = payload_per_page(store.pool().page_size());
        tree.put(b"k", &vec![7u8; 3 * per - 10]).unwrap();
        let root = store.pool().fetch_read(tree.root()).unwrap();
        let LeafValue::Overflow { first_page, .. } =
            node::decode_leaf(node::cell(&root, 0).unwrap())
                .unwrap()
                .value
        else {
            panic!("value stored inline");
        };
        drop(root);
        let mut pages = vec![first_page];
        for _ in 0..2 {
            let p = store
                .pool()
                .fetch_read(PageId(*pages.last().unwrap()))
                .unwrap();
            pages.push(get_u64(&p, PAGE_HEADER));
        }
        let id = tree.root();
        (store, id, pages)
    }

    /// Rewrite the link (next page, bytes held) of overflow page `page`.
    fn relink(store: &Store, page: u64, next: u64, here: u32) {
        let mut mtr = store.mtr().unwrap();
        let h = mtr.latch(PageId(page), Load::Verify).unwrap();
        let bytes = [next.to_le_bytes().as_slice(), &here.to_le_bytes()].concat();
        mtr.apply(
            h,
            &Op::Write {
                offset: PAGE_HEADER as u32,
                bytes: &bytes,
            },
        )
        .unwrap();
        mtr.commit().unwrap();
    }

    /// Damaged chains (with valid checksums) are errors when read,
    /// verified or freed: a page that links to itself holding nothing used
    /// to make `read` loop forever, and a chain that comes back to a page
    /// used to be read (or freed) twice.
    /// `Tree::get_into` clears the buffer it is handed and reads inline
    /// and overflow values into it as `get` returns them, also into a
    /// buffer that held a longer value before.
    #[test]
    fn get_into_reuses_its_buffer() {
        let store =
            Store::create(Arc::new(SimFs::new(5)), Path::new("/db"), test_options()).unwrap();
        let tree = Tree::create(&store).unwrap();
        let big: Vec<u8> = (0..3 * payload_per_page(4096)).map(|i| i as u8).collect();
        tree.put(b"big", &big).unwrap();
        tree.put(b"small", b"abc").unwrap();
        let mut buf = vec![9u8; 7];
        assert!(!tree.get_into(b"absent", &mut buf).unwrap());
        assert!(buf.is_empty(), "an absent key leaves the buffer empty");
        for _ in 0..2 {
            for key in [&b"big"[..], b"small", b"big"] {
                assert!(tree.get_into(key, &mut buf).unwrap());
                assert_eq!(Some(&buf), tree.get(key).unwrap().as_ref(), "{key:?}");
            }
        }
        assert_eq!(buf, big);
    }

    #[test]
    fn damaged_chains_are_errors_not_loops() {
        let per = payload_per_page(4096) as u32;
        for damage in 0..3 {
            let (store, root, pages) = chain();
            match damage {
                0 => relink(&store, pages[0], pages[0], 0),
                1 => relink(&store, pages[1], pages[0], per),
                _ => relink(&store, pages[0], pages[1], per - 1),
            }
            let tree = Tree::open(&store, root);
            assert!(tree.get(b"k").is_err(), "damage {damage}: read");
            assert!(tree.verify().is_err(), "damage {damage}: verify");
            assert!(tree.delete(b"k").is_err(), "damage {damage}: free");
        }
    }

    /// A chain page with next `next` and `here` bytes, in its own mtr.
    fn chain_page(store: &Store, next: Option<u64>, here: u32) -> PageId {
        let mut mtr = store.mtr().unwrap();
        let h = alloc_page(&mut mtr).unwrap();
        let id = mtr.id(h).unwrap();
        mtr.apply(h, &Op::Init(PageType::Overflow)).unwrap();
        let mut body = next.unwrap_or(id.0).to_le_bytes().to_vec();
        body.extend_from_slice(&here.to_le_bytes());
        body.resize(12 + here as usize, 7);
        let op = Op::Write {
            offset: PAGE_HEADER as u32,
            bytes: &body,
        };
        mtr.apply(h, &op).unwrap();
        mtr.commit().unwrap();
        id
    }

    /// O1: an empty page naming itself as next used to make `read` loop
    /// forever; now it is a corrupt page.
    #[test]
    fn self_loop_of_empty_pages_is_corrupt_not_a_hang() {
        let store =
            Store::create(Arc::new(SimFs::new(3)), Path::new("/db"), test_options()).unwrap();
        let id = chain_page(&store, None, 0);
        let r = read(store.pool(), id.0, 10_000);
        assert!(matches!(r, Err(Error::CorruptPage { .. })), "{r:?}");
    }

    /// O1: a chain longer than its value would leak its tail when freed.
    #[test]
    fn chain_longer_than_its_value_is_corrupt() {
        let store =
            Store::create(Arc::new(SimFs::new(4)), Path::new("/db"), test_options()).unwrap();
        let per = payload_per_page(store.pool().page_size()) as u32;
        let tail = chain_page(&store, Some(0), 5);
        let head = chain_page(&store, Some(tail.0), per);
        // Read as a one-page value: the second page is left over.
        let r = read(store.pool(), head.0, per);
        assert!(matches!(r, Err(Error::CorruptPage { .. })), "{r:?}");
        let mut mtr = store.mtr().unwrap();
        let r = latch_chain(&mut mtr, head.0, per);
        assert!(matches!(r, Err(Error::CorruptPage { .. })), "{r:?}");
        drop(mtr);
        // The whole chain reads.
        assert_eq!(
            read(store.pool(), head.0, per + 5).unwrap().len(),
            (per + 5) as usize
        );
    }
}
