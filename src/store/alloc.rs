//! Page allocation and freeing through the superblock's free list
//! (space S3), inside the caller's mini-transaction.
//!
//! Both take the superblock's exclusive latch, which by store T3 must be
//! the caller's first latch in a structure change. `alloc_page` reads
//! (the free-list head) before it changes anything, and a caller
//! allocates every page it needs before its first change (mtr M4).

use crate::buffer::Load;
use crate::mtr::{Mtr, Op, PageHandle};
use crate::page::space::{FREE_NEXT, SB_FREE_COUNT, SB_FREE_HEAD, SB_PAGE_COUNT};
use crate::page::{self, PageId, PageType, get_u64};
use crate::{Error, Result};

fn write_u64(mtr: &mut Mtr<'_>, h: PageHandle, offset: usize, v: u64) -> Result<()> {
    mtr.apply(
        h,
        &Op::Write {
            offset: offset as u32,
            bytes: &v.to_le_bytes(),
        },
    )
}

/// Allocate a page: reuse the free-list head, else grow the space by one.
/// The page comes back latched and unchanged; the caller's first change
/// to it must be `Op::Init`.
pub fn alloc_page(mtr: &mut Mtr<'_>) -> Result<PageHandle> {
    let sb = mtr.latch(PageId(0), Load::Verify)?;
    let (head, free, count) = {
        let p = mtr.page(sb)?;
        (
            get_u64(p, SB_FREE_HEAD),
            get_u64(p, SB_FREE_COUNT),
            get_u64(p, SB_PAGE_COUNT),
        )
    };
    if head != 0 {
        if head >= count {
            return Err(corrupt(
                mtr,
                0,
                format!("free-list head {head} beyond page count {count}"),
            ));
        }
        let h = mtr.latch(PageId(head), Load::Verify)?;
        let next = {
            let p = mtr.page(h)?;
            if page::page_type(p) != Some(PageType::Free) {
                return Err(corrupt(
                    mtr,
                    head,
                    "on the free list but not a free page".into(),
                ));
            }
            get_u64(p, FREE_NEXT)
        };
        write_u64(mtr, sb, SB_FREE_HEAD, next)?;
        write_u64(mtr, sb, SB_FREE_COUNT, free.saturating_sub(1))?;
        return Ok(h);
    }
    let max = u64::MAX / mtr.pool().page_size() as u64;
    if count >= max {
        return Err(Error::LimitExceeded {
            what: "pages in the tablespace",
            actual: count,
            max,
        });
    }
    let h = mtr.latch(PageId(count), Load::Fresh)?;
    write_u64(mtr, sb, SB_PAGE_COUNT, count + 1)?;
    Ok(h)
}

/// Put a page on the free list (its content is discarded).
pub fn free_page(mtr: &mut Mtr<'_>, h: PageHandle) -> Result<()> {
    let sb = mtr.latch(PageId(0), Load::Verify)?;
    let id = mtr.id(h)?;
    if id.0 == 0 {
        return Err(Error::InvalidArgument {
            what: "page to free",
            reason: "the superblock cannot be freed".into(),
        });
    }
    let (head, free) = {
        let p = mtr.page(sb)?;
        (get_u64(p, SB_FREE_HEAD), get_u64(p, SB_FREE_COUNT))
    };
    if page::page_type(mtr.page(h)?) == Some(PageType::BtreeNode) {
        // Buffer B11: counted while this mtr holds the node latched,
        // before it changes.
        mtr.pool().note_tree_change();
    }
    mtr.apply(h, &Op::Init(PageType::Free))?;
    write_u64(mtr, h, FREE_NEXT, head)?;
    write_u64(mtr, sb, SB_FREE_HEAD, id.0)?;
    write_u64(mtr, sb, SB_FREE_COUNT, free + 1)
}

fn corrupt(mtr: &Mtr<'_>, page: u64, reason: String) -> Error {
    Error::CorruptPage {
        file: mtr.pool().file().path().to_path_buf(),
        page,
        reason,
    }
}
