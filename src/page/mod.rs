//! Page format: the header every data page carries, its checksum, and the
//! page-size rules. The tablespace file and its superblock live in
//! [`space`]; the layout of a B+tree node inside a page in [`node`] (here,
//! below the mini-transaction layer, because recovery replays node changes
//! on pages without a B+tree above them).
//!
//! Every page starts with a 48-byte header (little-endian):
//!
//! | bytes  | field |
//! | ------ | ----- |
//! | 0..4   | CRC-32C of bytes 4..page size |
//! | 4..6   | page format version ([`PAGE_FORMAT_VERSION`]) |
//! | 6      | page type ([`PageType`]) |
//! | 7      | reserved (0) |
//! | 8..16  | page id (its index in the file) |
//! | 16..24 | page LSN: end LSN of the last mini-transaction that changed it |
//! | 24..32 | space id: random per database, rejects pages of another file |
//! | 32..48 | reserved (0) |
//!
//! Invariants:
//! * P1. The checksum is computed when a page is written and checked when
//!   it is read; in memory it is stale and nobody reads it.
//! * P2. A page of all zero bytes is a page that was never written (the file
//!   was extended past it); it is not corrupt, it has no content.
//! * P3. A page's LSN only grows; recovery applies a redo record to a page
//!   only if the page's LSN is below the record's end LSN. ([`set_lsn`]
//!   asserts it; [`init`] resets it to 0 inside a mini-transaction whose
//!   commit then sets the record's end LSN.)
//! * P4. The header helpers ([`lsn`], [`id`], [`page_type`], `get_u*`,
//!   `put`, ...) are only handed whole pages, or buffers whose length the
//!   caller checked, with offsets fixed by a format: their bounds hold by
//!   construction, so they assert them instead of reading zeros (a bug
//!   stops loudly). Bytes from disk are checked by [`verify`] and by the
//!   decoders of each format, never by a silent default here.

pub mod node;
pub mod space;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::log::format::crc32c;

/// Bytes of the common page header.
pub const PAGE_HEADER: usize = 48;
/// The page format this build writes and reads.
pub const PAGE_FORMAT_VERSION: u16 = 1;
/// Smallest page size a database may use.
pub const MIN_PAGE_SIZE: usize = 4096;
/// Largest page size a database may use.
pub const MAX_PAGE_SIZE: usize = 65536;
/// Default page size.
pub const DEFAULT_PAGE_SIZE: usize = 16384;

const OFF_CRC: usize = 0;
const OFF_VERSION: usize = 4;
const OFF_TYPE: usize = 6;
const OFF_ID: usize = 8;
const OFF_LSN: usize = 16;
const OFF_SPACE: usize = 24;

/// The index of a page in the tablespace file (page 0 is the superblock).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct PageId(pub u64);

impl fmt::Display for PageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "page {}", self.0)
    }
}

/// What a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum PageType {
    /// Never written (all zeros).
    Unused = 0,
    /// Page 0: the file's superblock (see [`space`]).
    Superblock = 1,
    /// On the free list, waiting for reuse.
    Free = 2,
    /// A B+tree node (leaf or internal).
    BtreeNode = 3,
    /// Part of a chain holding one large value.
    Overflow = 4,
    /// A page of a transaction's insert undo segment (`txn::undo_seg`,
    /// tablespace format 5).
    Undo = 5,
    /// A page of the insert undo directory (`txn::undo_seg`, format 5).
    UndoDir = 6,
}

impl PageType {
    /// Decode a type byte.
    pub fn from_u8(v: u8) -> Option<PageType> {
        Some(match v {
            0 => PageType::Unused,
            1 => PageType::Superblock,
            2 => PageType::Free,
            3 => PageType::BtreeNode,
            4 => PageType::Overflow,
            5 => PageType::Undo,
            6 => PageType::UndoDir,
            _ => return None,
        })
    }
}

/// Whether `size` is an allowed page size (a power of two, 4 to 64 KiB).
pub fn valid_page_size(size: usize) -> bool {
    size.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&size)
}

/// `N` bytes at `off` (P4: in bounds by construction).
#[track_caller]
fn get_array<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    match b.get(off..).and_then(<[u8]>::first_chunk::<N>) {
        Some(a) => *a,
        #[allow(clippy::panic)] // P4: a caller bug, not a damaged page
        None => panic!(
            "page P4: read of {N} bytes at offset {off} past a buffer of {} bytes",
            b.len()
        ),
    }
}

#[track_caller]
pub(crate) fn get_u16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(get_array(b, off))
}

#[track_caller]
pub(crate) fn get_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(get_array(b, off))
}

#[track_caller]
pub(crate) fn get_u64(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(get_array(b, off))
}

#[track_caller]
pub(crate) fn put(b: &mut [u8], off: usize, bytes: &[u8]) {
    let len = b.len();
    match b.get_mut(off..).and_then(|d| d.get_mut(..bytes.len())) {
        Some(d) => d.copy_from_slice(bytes),
        #[allow(clippy::panic)] // P4: a caller bug; never write short
        None => panic!(
            "page P4: write of {} bytes at offset {off} past a buffer of {len} bytes",
            bytes.len()
        ),
    }
}

/// The page's LSN (header bytes 16..24).
pub fn lsn(page: &[u8]) -> u64 {
    get_u64(page, OFF_LSN)
}

/// Set the page's LSN. It never goes down (P3): a lower LSN would let
/// recovery replay an older record over a newer change.
pub fn set_lsn(page: &mut [u8], lsn: u64) {
    let old = get_u64(page, OFF_LSN);
    assert!(
        lsn >= old,
        "page P3: page {} LSN would go down from {old} to {lsn}",
        get_u64(page, OFF_ID)
    );
    put(page, OFF_LSN, &lsn.to_le_bytes());
}

/// The page id stored in the header.
pub fn id(page: &[u8]) -> PageId {
    PageId(get_u64(page, OFF_ID))
}

/// The page type stored in the header (`None` for an unknown byte).
pub fn page_type(page: &[u8]) -> Option<PageType> {
    PageType::from_u8(get_array::<1>(page, OFF_TYPE)[0])
}

/// The space id stored in the header.
pub fn space_id(page: &[u8]) -> u64 {
    get_u64(page, OFF_SPACE)
}

/// Reset `page` to an empty page of type `ptype`: zero everything, then
/// write the header (LSN 0; the caller's mini-transaction sets it).
pub fn init(page: &mut [u8], id: PageId, ptype: PageType, space_id: u64) {
    page.fill(0);
    put(page, OFF_VERSION, &PAGE_FORMAT_VERSION.to_le_bytes());
    put(page, OFF_TYPE, &[ptype as u8]);
    put(page, OFF_ID, &id.0.to_le_bytes());
    put(page, OFF_SPACE, &space_id.to_le_bytes());
}

/// The bytes the checksum covers: everything after it (P1, P4).
fn body_for_crc(page: &[u8]) -> &[u8] {
    assert!(
        page.len() >= PAGE_HEADER,
        "page P4: a page of {} bytes is shorter than its header",
        page.len()
    );
    #[allow(clippy::indexing_slicing)] // just asserted: 4 < PAGE_HEADER <= len
    &page[OFF_CRC + 4..]
}

/// Compute and store the checksum (just before a write; P1).
pub fn seal(page: &mut [u8]) {
    let crc = crc32c(body_for_crc(page));
    put(page, OFF_CRC, &crc.to_le_bytes());
}

/// What a page read from disk turned out to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageCheck {
    /// Checksum, version, id and space all match.
    Valid,
    /// All zeros: never written (P2).
    Zero,
    /// Damaged or foreign; the reason says which check failed.
    Corrupt(String),
}

/// Check a page read from disk at position `expect` of space `space`.
pub fn verify(page: &[u8], expect: PageId, space: u64) -> PageCheck {
    if page.iter().all(|&b| b == 0) {
        return PageCheck::Zero;
    }
    let stored = get_u32(page, OFF_CRC);
    let actual = crc32c(body_for_crc(page));
    if stored != actual {
        return PageCheck::Corrupt(format!(
            "checksum mismatch (stored {stored:#010x}, computed {actual:#010x}): torn or damaged write"
        ));
    }
    let version = get_u16(page, OFF_VERSION);
    if version != PAGE_FORMAT_VERSION {
        return PageCheck::Corrupt(format!(
            "page format version {version}, this build reads {PAGE_FORMAT_VERSION}"
        ));
    }
    if page_type(page).is_none() {
        return PageCheck::Corrupt(format!(
            "unknown page type {}",
            get_array::<1>(page, OFF_TYPE)[0]
        ));
    }
    let found = id(page);
    if found != expect {
        return PageCheck::Corrupt(format!(
            "header names {found}: a misdirected write or a copied file"
        ));
    }
    if space_id(page) != space {
        return PageCheck::Corrupt(format!(
            "belongs to space {:#x}, not {space:#x}",
            space_id(page)
        ));
    }
    PageCheck::Valid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_verify() {
        let mut p = vec![0u8; 4096];
        init(&mut p, PageId(7), PageType::BtreeNode, 42);
        set_lsn(&mut p, 99);
        seal(&mut p);
        assert_eq!(verify(&p, PageId(7), 42), PageCheck::Valid);
        assert!(matches!(verify(&p, PageId(8), 42), PageCheck::Corrupt(_)));
        assert!(matches!(verify(&p, PageId(7), 43), PageCheck::Corrupt(_)));
        p[100] ^= 1;
        assert!(matches!(verify(&p, PageId(7), 42), PageCheck::Corrupt(_)));
        assert_eq!(verify(&[0u8; 4096], PageId(1), 42), PageCheck::Zero);
    }

    #[test]
    #[should_panic(expected = "page P3")]
    fn lsn_never_goes_down() {
        let mut p = vec![0u8; 4096];
        init(&mut p, PageId(7), PageType::BtreeNode, 42);
        set_lsn(&mut p, 99);
        set_lsn(&mut p, 98);
    }

    #[test]
    #[should_panic(expected = "page P4")]
    fn short_buffers_are_a_bug_not_zeros() {
        let _ = get_u64(&[0u8; 7], 0);
    }

    proptest::proptest! {
        #[test]
        fn garbage_never_verifies(bytes in proptest::collection::vec(proptest::num::u8::ANY, 4096)) {
            // Random bytes pass the CRC with probability 2^-32; treat a pass
            // as impossible for the test's purposes.
            proptest::prop_assert!(verify(&bytes, PageId(0), 1) != PageCheck::Valid);
        }
    }
}
