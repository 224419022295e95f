//! Pending tree drops and the table id floor, kept in the superblock
//! (space S5).
//!
//! Dropping a table (or an index) cannot free its pages at once: a
//! transaction that began before the drop may still be reading or rolling
//! back in the tree, and a tree of a million pages is not freed in one
//! mini-transaction. So a drop lists each of its trees here, with the id
//! of a transaction that began after the table became unreachable, and
//! the trees are freed later, in steps, once every older transaction has
//! ended (`db::drop`).
//!
//! Invariants (with space S5):
//! * DR1. An entry is written (durably) before the catalog change that
//!   makes its tree unreachable; at open, entries whose table is still in
//!   the catalog (the drop never reached its commit point) are discarded
//!   by the caller ([`discard`]).
//! * DR2. The table id floor only grows, and every dropped table's id is
//!   below it, so an id is never given to a second table (catalog C3)
//!   even when the table with the highest id was dropped: undo records
//!   name tables by id and may outlive their table.
//! * DR3. [`finish`] frees a root only when its tree is one empty leaf,
//!   and frees it in the same mini-transaction that removes the entry.

use crate::buffer::Load;
use crate::log::Durability;
use crate::mtr::{Mtr, Op, PageHandle};
use crate::page::node;
use crate::page::space::{DROP_ENTRY, DROP_SLOTS, SB_DROP_COUNT, SB_DROPS, SB_TABLE_ID_FLOOR};
use crate::page::{PageId, PageType, get_u32, get_u64, page_type};
use crate::{Error, Result};

use super::{Store, free_page};

/// A tree waiting to be freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PendingDrop {
    /// The tree's root page.
    pub root: PageId,
    /// The table the tree belonged to.
    pub table: u64,
    /// A transaction id taken after the tree became unreachable: the tree
    /// may be freed once every transaction below it has ended.
    pub trx: u64,
}

fn corrupt(store: &Store, offset: usize, reason: String) -> Error {
    Error::CorruptPage {
        file: store.pool().file().path().to_path_buf(),
        page: 0,
        reason: format!("superblock byte {offset}: {reason}"),
    }
}

/// The entries in superblock bytes `sb`.
fn decode(store: &Store, sb: &[u8]) -> Result<Vec<PendingDrop>> {
    let n = get_u32(sb, SB_DROP_COUNT) as usize;
    if n > DROP_SLOTS {
        return Err(corrupt(
            store,
            SB_DROP_COUNT,
            format!("{n} pending drops, over the {DROP_SLOTS} there is room for"),
        ));
    }
    let pages = get_u64(sb, crate::page::space::SB_PAGE_COUNT);
    (0..n)
        .map(|i| {
            let at = SB_DROPS + i * DROP_ENTRY;
            let d = PendingDrop {
                root: PageId(get_u64(sb, at)),
                table: get_u64(sb, at + 8),
                trx: get_u64(sb, at + 16),
            };
            if d.root.0 == 0 || d.root.0 >= pages {
                return Err(corrupt(
                    store,
                    at,
                    format!("pending drop names page {} of {pages}", d.root.0),
                ));
            }
            Ok(d)
        })
        .collect()
}

/// Write `list` as the pending drops in the mtr's superblock `sb`.
fn encode(mtr: &mut Mtr<'_>, sb: PageHandle, list: &[PendingDrop]) -> Result<()> {
    assert!(list.len() <= DROP_SLOTS, "DR: callers check the room first");
    let mut bytes = Vec::with_capacity(list.len() * DROP_ENTRY);
    for d in list {
        bytes.extend_from_slice(&d.root.0.to_le_bytes());
        bytes.extend_from_slice(&d.table.to_le_bytes());
        bytes.extend_from_slice(&d.trx.to_le_bytes());
    }
    if !bytes.is_empty() {
        mtr.apply(
            sb,
            &Op::Write {
                offset: SB_DROPS as u32,
                bytes: &bytes,
            },
        )?;
    }
    mtr.apply(
        sb,
        &Op::Write {
            offset: SB_DROP_COUNT as u32,
            bytes: &(list.len() as u32).to_le_bytes(),
        },
    )
}

/// Every pending drop.
pub(crate) fn pending(store: &Store) -> Result<Vec<PendingDrop>> {
    let sb = store.pool().fetch_read(PageId(0))?;
    decode(store, &sb)
}

/// The table id floor (DR2): every table id below it was used.
pub(crate) fn table_id_floor(store: &Store) -> Result<u64> {
    let sb = store.pool().fetch_read(PageId(0))?;
    Ok(get_u64(&sb, SB_TABLE_ID_FLOOR))
}

/// List `drops` (DR1) and raise the table id floor above each of their
/// tables (DR2), durably. Fails with `LimitExceeded`, changing nothing,
/// when the list has no room for them all (the purge thread frees room
/// as it finishes drops).
pub(crate) fn add(store: &Store, drops: &[PendingDrop]) -> Result<()> {
    let mut mtr = store.mtr()?;
    let sb = mtr.latch(PageId(0), Load::Verify)?;
    let (mut list, floor) = {
        let p = mtr.page(sb)?;
        (decode(store, p)?, get_u64(p, SB_TABLE_ID_FLOOR))
    };
    if list.len() + drops.len() > DROP_SLOTS {
        return Err(Error::LimitExceeded {
            what: "trees waiting to be freed after a drop (retry once purge has freed some)",
            actual: (list.len() + drops.len()) as u64,
            max: DROP_SLOTS as u64,
        });
    }
    list.extend_from_slice(drops);
    encode(&mut mtr, sb, &list)?;
    let top = drops.iter().map(|d| d.table + 1).max().unwrap_or(0);
    if top > floor {
        mtr.apply(
            sb,
            &Op::Write {
                offset: SB_TABLE_ID_FLOOR as u32,
                bytes: &top.to_le_bytes(),
            },
        )?;
    }
    if let Some(lsn) = mtr.commit()? {
        store.commit(lsn, Durability::Sync)?;
    }
    Ok(())
}

/// Remove the entries `keep_out` says to (DR1: drops whose table is still
/// in the catalog), durably.
pub(crate) fn discard(store: &Store, keep_out: impl Fn(&PendingDrop) -> bool) -> Result<usize> {
    let mut mtr = store.mtr()?;
    let sb = mtr.latch(PageId(0), Load::Verify)?;
    let list = decode(store, mtr.page(sb)?)?;
    let kept: Vec<_> = list.iter().copied().filter(|d| !keep_out(d)).collect();
    let gone = list.len() - kept.len();
    if gone > 0 {
        encode(&mut mtr, sb, &kept)?;
    }
    if let Some(lsn) = mtr.commit()? {
        store.commit(lsn, Durability::Sync)?;
    }
    Ok(gone)
}

/// Free the root of the pending drop `root`, whose tree must by now be
/// one empty leaf or a root of level 1 over one empty leaf (btree BT1: a
/// tree that grew keeps its leaf), with that leaf, and remove it from
/// the list, in one mini-transaction (DR3). The caller has emptied the
/// tree and nothing else uses it.
pub(crate) fn finish(store: &Store, root: PageId) -> Result<()> {
    let mut mtr = store.mtr()?;
    // Superblock first, then the tree page (store T3).
    let sb = mtr.latch(PageId(0), Load::Verify)?;
    let mut list = decode(store, mtr.page(sb)?)?;
    let Some(at) = list.iter().position(|d| d.root == root) else {
        return Err(Error::InvalidArgument {
            what: "pending drop",
            reason: format!("page {} is not a tree waiting to be freed", root.0),
        });
    };
    let not_empty = |page: PageId| Error::CorruptPage {
        file: store.pool().file().path().to_path_buf(),
        page: page.0,
        reason:
            "a dropped tree's root is not an empty leaf, or a root over one, when it is to be freed"
                .into(),
    };
    let empty_leaf = |p: &[u8]| {
        page_type(p) == Some(PageType::BtreeNode) && node::is_leaf(p) && node::nslots(p) == 0
    };
    let h = mtr.latch(root, Load::Verify)?;
    let child = {
        let p = mtr.page(h)?;
        if empty_leaf(p) {
            None
        } else if page_type(p) == Some(PageType::BtreeNode)
            && node::level(p) == 1
            && node::nslots(p) == 1
        {
            Some(PageId(node::child(p, 0).map_err(|_| not_empty(root))?))
        } else {
            return Err(not_empty(root));
        }
    };
    // Top-down: the root, then its leaf, both before the first change.
    let leaf = match child {
        Some(c) if c == root || c.0 == 0 => return Err(not_empty(root)),
        Some(c) => {
            let ch = mtr.latch(c, Load::Verify)?;
            if !empty_leaf(mtr.page(ch)?) {
                return Err(not_empty(c));
            }
            Some(ch)
        }
        None => None,
    };
    if let Some(ch) = leaf {
        free_page(&mut mtr, ch)?;
    }
    free_page(&mut mtr, h)?;
    list.swap_remove(at);
    encode(&mut mtr, sb, &list)?;
    if let Some(lsn) = mtr.commit()? {
        // Not synced: a crash that loses this mtr loses the free with it,
        // and the drop is finished again (the tree is still an empty leaf).
        store.commit(lsn, Durability::Lazy)?;
    }
    Ok(())
}

/// Delete up to `max` entries of the dropped tree at `root`, the first in
/// key order, in ordinary logged B+tree deletes (so the tree stays valid
/// after each mini-transaction, and their merges free its pages as it
/// shrinks); returns how many were deleted, 0 when the tree is empty. The
/// caller makes sure nothing else uses the tree.
pub(crate) fn empty_step(store: &Store, root: PageId, max: usize) -> Result<usize> {
    let tree = crate::btree::Tree::open(store, root);
    let mut keys = Vec::with_capacity(max);
    for item in tree.range(
        std::ops::Bound::Unbounded,
        std::ops::Bound::Unbounded,
        crate::btree::Direction::Forward,
    ) {
        let (k, _) = item?;
        keys.push(k);
        if keys.len() >= max {
            break;
        }
    }
    if keys.is_empty() {
        return Ok(0);
    }
    let n = tree.delete_sorted(&keys)?;
    assert_eq!(
        n as usize,
        keys.len(),
        "DR: nothing but the dropper changes a dropped tree"
    );
    Ok(keys.len())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::btree::Tree;
    use crate::io::SimFs;
    use crate::store::test_options;

    fn free_count(store: &Store) -> u64 {
        let sb = store.pool().fetch_read(PageId(0)).expect("superblock");
        get_u64(&sb, crate::page::space::SB_FREE_COUNT)
    }

    fn page_count(store: &Store) -> u64 {
        let sb = store.pool().fetch_read(PageId(0)).expect("superblock");
        get_u64(&sb, crate::page::space::SB_PAGE_COUNT)
    }

    /// A tree of small and overflowing values, emptied step by step and
    /// finished, gives back every page it used, and leaves no entry.
    #[test]
    fn an_emptied_tree_gives_back_every_page() -> Result<()> {
        let fs = Arc::new(SimFs::new(1));
        let store = Store::create(fs, Path::new("/db"), test_options())?;
        let tree = Tree::create(&store)?;
        for i in 0u32..3000 {
            let v = if i % 97 == 0 {
                vec![7u8; 9000]
            } else {
                vec![1u8; 40]
            };
            tree.put(format!("key{i:06}").as_bytes(), &v)?;
        }
        let used = page_count(&store) - 1 - free_count(&store);
        assert!(used > 100, "{used} pages");
        add(
            &store,
            &[PendingDrop {
                root: tree.root(),
                table: 5,
                trx: 9,
            }],
        )?;
        assert_eq!(table_id_floor(&store)?, 6);
        let mut steps = 0;
        while empty_step(&store, tree.root(), 256)? > 0 {
            steps += 1;
        }
        assert_eq!(steps, 12);
        finish(&store, tree.root())?;
        assert_eq!(pending(&store)?, vec![]);
        assert_eq!(page_count(&store) - 1 - free_count(&store), 0);
        store.close()
    }

    #[test]
    fn the_list_is_bounded_and_discard_keeps_the_rest() -> Result<()> {
        let fs = Arc::new(SimFs::new(1));
        let store = Store::create(fs, Path::new("/db"), test_options())?;
        let roots: Vec<PageId> = (0..3)
            .map(|_| Tree::create(&store).map(|t| t.root()))
            .collect::<Result<_>>()?;
        let d = |i: usize| PendingDrop {
            root: roots[i],
            table: i as u64 + 1,
            trx: 1,
        };
        add(&store, &[d(0), d(1), d(2)])?;
        assert_eq!(discard(&store, |x| x.table == 2)?, 1);
        assert_eq!(pending(&store)?, vec![d(0), d(2)]);
        let many = vec![d(0); DROP_SLOTS - 1];
        assert!(matches!(
            add(&store, &many),
            Err(Error::LimitExceeded { .. })
        ));
        assert_eq!(pending(&store)?.len(), 2);
        assert_eq!(table_id_floor(&store)?, 4);
        // A root that is not an empty leaf is not freed.
        Tree::open(&store, roots[0]).put(b"k", b"v")?;
        assert!(matches!(
            finish(&store, roots[0]),
            Err(Error::CorruptPage { .. })
        ));
        finish(&store, roots[2])?;
        assert_eq!(pending(&store)?, vec![d(0)]);
        store.close()
    }

    /// Garbage in the drop area (a count past the room, a root that is
    /// the superblock or beyond the file) is a corrupt superblock, never a
    /// panic or a free of the wrong page.
    #[test]
    fn garbage_in_the_drop_area_is_reported() -> Result<()> {
        let fs = Arc::new(SimFs::new(3));
        let store = Store::create(fs, Path::new("/db"), test_options())?;
        let root = Tree::create(&store)?.root();
        let mut sb = store.pool().fetch_read(PageId(0))?.to_vec();
        for (count, entry_root) in [(DROP_SLOTS as u32 + 1, root.0), (1, 0), (1, 1 << 40)] {
            crate::page::put(&mut sb, SB_DROP_COUNT, &count.to_le_bytes());
            crate::page::put(&mut sb, SB_DROPS, &entry_root.to_le_bytes());
            assert!(
                matches!(decode(&store, &sb), Err(Error::CorruptPage { page: 0, .. })),
                "count {count}, root {entry_root}"
            );
        }
        crate::page::put(&mut sb, SB_DROP_COUNT, &1u32.to_le_bytes());
        crate::page::put(&mut sb, SB_DROPS, &root.0.to_le_bytes());
        assert_eq!(decode(&store, &sb)?.len(), 1);
        store.close()
    }
}
