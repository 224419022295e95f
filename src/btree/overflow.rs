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

/// Read a chain of `len` bytes starting at `first`.
pub fn read(pool: &BufferPool, first: u64, len: u32) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len as usize);
    let mut at = first;
    let per = payload_per_page(pool.page_size());
    while out.len() < len as usize {
        if at == 0 {
            return Err(corrupt(pool, first, "overflow chain ends early"));
        }
        let p = pool.fetch_read(PageId(at))?;
        if page::page_type(&p) != Some(PageType::Overflow) {
            return Err(corrupt(pool, at, "expected an overflow page"));
        }
        let next = get_u64(&p, PAGE_HEADER);
        let here = get_u32(&p, PAGE_HEADER + 8) as usize;
        let data = p
            .get(BODY..BODY + here)
            .filter(|_| here <= per && out.len() + here <= len as usize)
            .ok_or_else(|| corrupt(pool, at, "overflow page length out of range"))?;
        if here != per && out.len() + here != len as usize {
            return Err(corrupt(
                pool,
                at,
                format!(
                    "overflow page holds {here} of {per} bytes but is not the chain's last (O1)"
                ),
            ));
        }
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
    let n = pages_for(len as usize, mtr.pool().page_size());
    let mut at = first;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        if at == 0 {
            return Err(corrupt(mtr.pool(), first, "overflow chain ends early"));
        }
        let h = mtr.latch(PageId(at), Load::Verify)?;
        let next = {
            let p = mtr.page(h)?;
            if page::page_type(p) != Some(PageType::Overflow) {
                return Err(corrupt(mtr.pool(), at, "expected an overflow page"));
            }
            get_u64(p, PAGE_HEADER)
        };
        out.push(h);
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
    use crate::io::SimFs;
    use crate::store::{Store, test_options};

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
