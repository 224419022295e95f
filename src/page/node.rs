//! B+tree node layout: pure functions over one page held as a byte slice.
//!
//! A node is a whole page (`&[u8]` / `&mut [u8]`, length = page size, a power
//! of two from 4096 to 65536). Bytes `0..PAGE_HEADER` belong to the page
//! module (checksum, page id, LSN); nothing here reads or writes them. All
//! integers are little-endian. After the common header:
//!
//! | bytes  | field |
//! | ------ | ----- |
//! | 48     | level (u8; 0 = leaf) |
//! | 49     | flags (u8; reserved, 0) |
//! | 50..52 | nslots (u16) |
//! | 52..56 | cell_start (u32): lowest offset of the cell area; `page.len()` when empty |
//! | 56..60 | garbage (u32): bytes of dead cells inside the cell area |
//! | 60..68 | left sibling page id (u64; 0 = none) |
//! | 68..76 | right sibling page id (u64; 0 = none) |
//! | 76..80 | reserved (0) |
//! | 80..   | slot array: nslots u16 cell offsets, in key order |
//!
//! Cells grow downward from the page end; the slot array grows upward from
//! [`NODE_HEADER_END`]; the gap between them is free. Free space is that gap
//! plus `garbage` (reclaimed by [`compact`]).
//!
//! Cell formats:
//! * Leaf (level 0): `klen u16 | vkind u8 | vlen u32 | key | value part`. With
//!   `vkind` [`VKIND_INLINE`] the value part is the `vlen` value bytes; with
//!   [`VKIND_OVERFLOW`] it is the u64 id of the first overflow page and
//!   `vlen` is the whole value's length. Other `vkind`s are corrupt.
//! * Internal (level > 0): `klen u16 | child page id u64 | key`. Slot 0's key
//!   is minus infinity whatever its bytes (it is normally stored empty):
//!   child `i` covers keys `k` with `key_i <= k < key_{i+1}`.
//!
//! Keys compare as byte strings (memcmp order, a proper prefix first).
//!
//! Invariants (checked by [`validate`]):
//! * N1. `80 + 2 * nslots <= cell_start <= page.len()` and
//!   `garbage <= page.len() - cell_start`.
//! * N2. Every slot points at a cell that lies wholly inside
//!   `cell_start..page.len()`; live cells do not overlap; live cell bytes plus
//!   `garbage` equal `page.len() - cell_start`.
//! * N3. Keys strictly increase in slot order (in internal nodes from slot 1
//!   on, since slot 0 is minus infinity).
//! * N4. A node with no slots has `cell_start == page.len()` and
//!   `garbage == 0`.
//! * N5. Flags and reserved bytes are zero.
//!
//! Invariants of this module's own code (asserted, not checked as damage):
//! * N6. Every function is handed a whole page: `page.len()` is a valid
//!   page size (the page length is the buffer's, never a byte from disk),
//!   so the node header `48..80` is always in bounds. Functions returning
//!   `Result` reject other lengths as [`NodeError::InvalidArgument`]; the
//!   infallible accessors ([`level`], [`nslots`], [`left`], [`right`])
//!   assert it.
//! * N7. Every header a mutation stores satisfies N1 and N4 (asserted in
//!   `store_header`): each mutation derives it from a header that passed
//!   N1 and from cell spans checked against N2, so a failure is a bug in
//!   this module's arithmetic, not damage.
//! * N8. Once a cell's span passed `cell_span` (or a cell passed
//!   `parse_cell_len`), every offset derived from it is in bounds; reads and
//!   writes at such offsets index directly (`wr` asserts) rather than
//!   turning a bug into a skipped write or a zero.
//!
//! Determinism: the B+tree calls these functions to change a page and crash
//! recovery calls them again to replay the same change from the redo log, so
//! every mutation is a function of the page bytes and its arguments only
//! (same input bytes, same output bytes). Bytes in the free gap are left as
//! they are, except that [`compact`] zeroes the whole gap and removed slot
//! entries are zeroed.
//!
//! Robustness: pages come from disk and may be damaged. Every function that
//! follows an offset read from the page checks it and returns
//! [`NodeError::Corrupt`] instead of panicking; mutations do all their checks
//! before changing any byte, so an `Err` or `Ok(false)` leaves the page as it
//! was. Keys ([`key`], [`LeafView::key`]) and searches check the slot, the
//! key's length and its bounds, not the rest of each cell they compare: a
//! cell whose value part is damaged is reported when it is read ([`cell`],
//! [`LeafView::cell`]) or validated ([`validate`]), so a key can be read
//! from a cell that cannot.
//!
//! Size limits are the caller's job. The assumption this module is built on:
//! a cell is at most about a third of [`capacity`] (larger values go to
//! overflow pages), so any node with three or more cells can be split into
//! two halves that each have room for one more cell.

use std::cmp::Ordering;

/// Bytes of the common page header, owned by the page module.
pub use crate::page::PAGE_HEADER;
/// End of the node header; the slot array starts here.
pub const NODE_HEADER_END: usize = 80;
/// Bytes of a leaf cell before its key: `klen u16 | vkind u8 | vlen u32`.
pub const LEAF_CELL_HEADER: usize = 7;
/// Bytes of an internal cell before its key: `klen u16 | child u64`.
pub const INTERNAL_CELL_HEADER: usize = 10;
/// Leaf value kind: the value is stored inline in the cell.
pub const VKIND_INLINE: u8 = 0;
/// Leaf value kind: the value lives in a chain of overflow pages.
pub const VKIND_OVERFLOW: u8 = 1;
/// Bytes of one slot array entry.
pub const SLOT_SIZE: usize = 2;

const OFF_LEVEL: usize = 48;
const OFF_FLAGS: usize = 49;
const OFF_NSLOTS: usize = 50;
const OFF_CELL_START: usize = 52;
const OFF_GARBAGE: usize = 56;
const OFF_LEFT: usize = 60;
const OFF_RIGHT: usize = 68;
const OFF_RESERVED: usize = 76;
/// Bytes of an overflow leaf cell's value part (the first page id).
const OVERFLOW_REF: usize = 8;

/// An error from node code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// The page's bytes break the node layout or one of its invariants.
    #[error("corrupt B+tree node: {reason}")]
    Corrupt {
        /// Which check failed, with the offending values.
        reason: String,
    },
    /// A slot index past the end of the slot array (a caller bug).
    #[error("slot {index} out of range for a node with {nslots} slots")]
    SlotOutOfRange {
        /// The index asked for.
        index: usize,
        /// The node's slot count.
        nslots: usize,
    },
    /// Some other argument cannot be used: a page of the wrong length, a
    /// malformed cell, a key too long to encode, the wrong kind of node.
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// Why it is rejected.
        reason: String,
    },
}

fn corrupt(reason: impl Into<String>) -> NodeError {
    NodeError::Corrupt {
        reason: reason.into(),
    }
}

fn invalid(reason: impl Into<String>) -> NodeError {
    NodeError::InvalidArgument {
        reason: reason.into(),
    }
}

/// A decoded leaf cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeafCell<'a> {
    /// The key bytes.
    pub key: &'a [u8],
    /// The value, inline or as a reference to overflow pages.
    pub value: LeafValue<'a>,
}

/// The value part of a leaf cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafValue<'a> {
    /// The whole value, stored in the cell.
    Inline(&'a [u8]),
    /// A value stored in a chain of overflow pages.
    Overflow {
        /// Total length of the value in bytes.
        len: u32,
        /// Id of the first overflow page.
        first_page: u64,
    },
}

/// While a binary search over slots `lo..hi` compares the key of slot
/// `mid`, start loading the cells it will compare next either way (the
/// middles of `lo..mid` and `mid + 1..hi`), so the search waits for memory
/// about once per two levels of its tree of probes instead of once per
/// probe. A hint only: slots are read checked, and a bad one is skipped.
#[inline]
fn prefetch_next_probes(page: &[u8], lo: usize, mid: usize, hi: usize) {
    for next in [lo + (mid - lo) / 2, mid + 1 + (hi - mid - 1) / 2] {
        if next != mid
            && next < hi
            && let Some(off) = rd_u16(page, slot_pos(next))
            && let Some(byte) = page.get(usize::from(off))
        {
            prefetch_line(byte);
        }
    }
}

/// Hint that the cache line holding `byte` will be read soon.
#[inline]
fn prefetch_line(byte: &u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program can observe and cannot
    // fault; the pointer comes from a live reference. SSE, which the
    // instruction needs, is part of every x86_64 target.
    #[allow(unsafe_code)]
    unsafe {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(byte).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = byte;
}

// ---------------------------------------------------------------------------
// Byte helpers (never panic; `None` when out of bounds).

fn rd<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..)?.first_chunk::<N>().copied()
}

fn rd_u16(b: &[u8], off: usize) -> Option<u16> {
    rd::<2>(b, off).map(u16::from_le_bytes)
}

fn rd_u32(b: &[u8], off: usize) -> Option<u32> {
    rd::<4>(b, off).map(u32::from_le_bytes)
}

fn rd_u64(b: &[u8], off: usize) -> Option<u64> {
    rd::<8>(b, off).map(u64::from_le_bytes)
}

/// Copy `bytes` to `b[off..]`. Callers check bounds first (N6, N8): a
/// write past the end is a bug in this module's own arithmetic, and stops
/// here instead of being skipped.
#[track_caller]
fn wr(b: &mut [u8], off: usize, bytes: &[u8]) {
    let end = off.checked_add(bytes.len());
    assert!(
        end.is_some_and(|e| e <= b.len()),
        "node N8: write of {} bytes at offset {off} runs past the page end {}",
        bytes.len(),
        b.len()
    );
    #[allow(clippy::indexing_slicing)] // asserted just above
    b[off..off + bytes.len()].copy_from_slice(bytes);
}

/// N6 for the infallible accessors: the header lies inside the buffer.
#[inline]
#[track_caller]
fn assert_whole_page(page: &[u8]) {
    assert!(
        page.len() >= NODE_HEADER_END,
        "node N6: a buffer of {} bytes is not a whole page",
        page.len()
    );
}

fn slot_pos(i: usize) -> usize {
    NODE_HEADER_END + SLOT_SIZE * i
}

fn check_page_len(len: usize) -> Result<(), NodeError> {
    if crate::page::valid_page_size(len) {
        Ok(())
    } else {
        Err(invalid(format!(
            "page length {len} is not a power of two from {} to {}",
            crate::page::MIN_PAGE_SIZE,
            crate::page::MAX_PAGE_SIZE
        )))
    }
}

// ---------------------------------------------------------------------------
// Header.

/// The node header fields, checked against N1.
#[derive(Clone, Copy, Debug)]
struct Header {
    len: usize,
    level: u8,
    n: usize,
    cell_start: usize,
    garbage: usize,
}

impl Header {
    fn slot_end(&self) -> usize {
        slot_pos(self.n)
    }

    /// The contiguous gap between the slot array and the cell area.
    fn gap(&self) -> usize {
        self.cell_start.saturating_sub(self.slot_end())
    }

    /// Gap plus garbage.
    fn free(&self) -> usize {
        self.gap().saturating_add(self.garbage)
    }
}

/// Read the header and check N1 (so later arithmetic cannot underflow).
fn header(page: &[u8]) -> Result<Header, NodeError> {
    check_page_len(page.len())?;
    let len = page.len();
    let short = || corrupt("node header cut off");
    let level = page.get(OFF_LEVEL).copied().ok_or_else(short)?;
    let n = usize::from(rd_u16(page, OFF_NSLOTS).ok_or_else(short)?);
    let cell_start = rd_u32(page, OFF_CELL_START).ok_or_else(short)? as usize;
    let garbage = rd_u32(page, OFF_GARBAGE).ok_or_else(short)? as usize;
    let h = Header {
        len,
        level,
        n,
        cell_start,
        garbage,
    };
    if cell_start > len {
        return Err(corrupt(format!(
            "cell_start {cell_start} is past the page end {len}"
        )));
    }
    if h.slot_end() > cell_start {
        return Err(corrupt(format!(
            "slot array of {n} slots ends at {}, past cell_start {cell_start}",
            h.slot_end()
        )));
    }
    if garbage > len - cell_start {
        return Err(corrupt(format!(
            "garbage {garbage} exceeds the cell area of {} bytes",
            len - cell_start
        )));
    }
    Ok(h)
}

/// Write nslots, cell_start and garbage, after asserting that the new
/// header keeps N1 and N4 (N7: every mutation computes it from checked
/// values, so a violation is our bug).
fn store_header(page: &mut [u8], h: &Header) -> Result<(), NodeError> {
    assert!(
        h.len == page.len()
            && h.slot_end() <= h.cell_start
            && h.cell_start <= h.len
            && h.garbage <= h.len - h.cell_start,
        "node N7 (N1): new header {h:?} for a page of {} bytes",
        page.len()
    );
    assert!(
        h.n > 0 || (h.cell_start == h.len && h.garbage == 0),
        "node N7 (N4): an empty node must be reset, got {h:?}"
    );
    let n = u16::try_from(h.n).map_err(|_| corrupt(format!("{} slots overflow u16", h.n)))?;
    let cs = u32::try_from(h.cell_start)
        .map_err(|_| corrupt(format!("cell_start {} overflows u32", h.cell_start)))?;
    let g = u32::try_from(h.garbage)
        .map_err(|_| corrupt(format!("garbage {} overflows u32", h.garbage)))?;
    wr(page, OFF_NSLOTS, &n.to_le_bytes());
    wr(page, OFF_CELL_START, &cs.to_le_bytes());
    wr(page, OFF_GARBAGE, &g.to_le_bytes());
    Ok(())
}

// ---------------------------------------------------------------------------
// Cells.

/// The length of the cell whose header starts `bytes`, for a node of
/// `level`; `Err` holds the reason the header is malformed. Does not check
/// that `bytes` is that long.
fn parse_cell_len(level: u8, bytes: &[u8]) -> Result<usize, String> {
    let klen = usize::from(rd_u16(bytes, 0).ok_or("cell header cut off")?);
    if level == 0 {
        let vkind = bytes.get(2).copied().ok_or("leaf cell header cut off")?;
        let vlen = rd_u32(bytes, 3).ok_or("leaf cell header cut off")?;
        let value_part = match vkind {
            VKIND_INLINE => usize::try_from(vlen).map_err(|_| "value length overflows usize")?,
            VKIND_OVERFLOW => OVERFLOW_REF,
            k => return Err(format!("unknown value kind {k}")),
        };
        (LEAF_CELL_HEADER + klen)
            .checked_add(value_part)
            .ok_or_else(|| "leaf cell length overflows usize".to_string())
    } else {
        Ok(INTERNAL_CELL_HEADER + klen)
    }
}

/// Check that `cell` is exactly one well-formed cell for a node of `level`.
fn check_cell_arg(level: u8, cell: &[u8]) -> Result<(), NodeError> {
    let want = parse_cell_len(level, cell)
        .map_err(|r| invalid(format!("cell for a level-{level} node: {r}")))?;
    if want != cell.len() {
        return Err(invalid(format!(
            "cell for a level-{level} node is {} bytes but its header says {want}",
            cell.len()
        )));
    }
    Ok(())
}

/// Where cell `i` starts, checked to be inside the cell area.
#[inline]
fn slot_offset(page: &[u8], h: &Header, i: usize) -> Result<usize, NodeError> {
    if i >= h.n {
        return Err(NodeError::SlotOutOfRange {
            index: i,
            nslots: h.n,
        });
    }
    match rd_u16(page, slot_pos(i)) {
        Some(off) if usize::from(off) >= h.cell_start && usize::from(off) < h.len => {
            Ok(usize::from(off))
        }
        off => Err(bad_slot(h, i, off)),
    }
}

#[cold]
#[inline(never)]
fn bad_slot(h: &Header, i: usize, off: Option<u16>) -> NodeError {
    match off {
        None => corrupt(format!("slot {i} cut off")),
        Some(off) => corrupt(format!(
            "slot {i} points at {off}, outside the cell area {}..{}",
            h.cell_start, h.len
        )),
    }
}

/// Offset and length of cell `i`, checked against N2 for that one cell.
fn cell_span(page: &[u8], h: &Header, i: usize) -> Result<(usize, usize), NodeError> {
    let off = slot_offset(page, h, i)?;
    debug_assert_eq!(
        h.len,
        page.len(),
        "node N6: a header describes its own page"
    );
    // In bounds: `off < h.len` was just checked and `h.len == page.len()`.
    #[allow(clippy::indexing_slicing)]
    let rest = &page[off..h.len];
    let len = parse_cell_len(h.level, rest)
        .map_err(|r| corrupt(format!("cell {i} at offset {off}: {r}")))?;
    if len > rest.len() {
        return Err(corrupt(format!(
            "cell {i} at offset {off} is {len} bytes, past the page end {}",
            h.len
        )));
    }
    Ok((off, len))
}

fn cell_at<'a>(page: &'a [u8], h: &Header, i: usize) -> Result<&'a [u8], NodeError> {
    let (off, len) = cell_span(page, h, i)?;
    // N8: `cell_span` checked `off + len <= page.len()`.
    #[allow(clippy::indexing_slicing)]
    Ok(&page[off..off + len])
}

/// Bytes of a cell's header before its key, in a node of `level`.
fn cell_header_len(level: u8) -> usize {
    if level == 0 {
        LEAF_CELL_HEADER
    } else {
        INTERNAL_CELL_HEADER
    }
}

/// The key of a cell already checked by `cell_span`.
fn cell_key(level: u8, cell: &[u8]) -> Result<&[u8], NodeError> {
    let hdr = cell_header_len(level);
    let klen = usize::from(rd_u16(cell, 0).ok_or_else(|| corrupt("cell header cut off"))?);
    cell.get(hdr..hdr + klen)
        .ok_or_else(|| corrupt(format!("key of {klen} bytes runs past its cell")))
}

/// The key of cell `i`: only the slot, the key length and the key's bytes
/// are checked (a damaged offset or length is an error, never a read
/// outside the page), since searches compare many keys and read no
/// values. The rest of the cell (its value kind and length) is checked
/// when the cell is read (`cell_span`) and by `validate`.
#[inline]
fn key_at<'a>(page: &'a [u8], h: &Header, i: usize) -> Result<&'a [u8], NodeError> {
    let off = slot_offset(page, h, i)?;
    let hdr = cell_header_len(h.level);
    let key = rd_u16(page, off).and_then(|klen| {
        let start = off + hdr;
        page.get(start..start + usize::from(klen))
    });
    match key {
        Some(key) => Ok(key),
        None => Err(bad_key(page, h, i, off)),
    }
}

#[cold]
#[inline(never)]
fn bad_key(page: &[u8], h: &Header, i: usize, off: usize) -> NodeError {
    match rd_u16(page, off) {
        None => corrupt(format!("cell {i} at offset {off}: cut off")),
        Some(klen) => corrupt(format!(
            "key of {klen} bytes of cell {i} at offset {off} runs past the page end {}",
            h.len
        )),
    }
}

/// `a.cmp(b)` for keys, as byte strings: the first 8 bytes compared as
/// one big-endian number when both have them (a B+tree search compares
/// about 25 keys per lookup, and keys far apart differ there), then the
/// rest by `memcmp`.
#[inline]
fn cmp_keys(a: &[u8], b: &[u8]) -> Ordering {
    if let (Some((x, ra)), Some((y, rb))) = (a.split_first_chunk::<8>(), b.split_first_chunk::<8>())
    {
        let (x, y) = (u64::from_be_bytes(*x), u64::from_be_bytes(*y));
        return x.cmp(&y).then_with(|| ra.cmp(rb));
    }
    a.cmp(b)
}

/// Sum of live cell lengths, checked against N2's byte count (so a
/// compaction of this page cannot fail).
fn live_bytes(page: &[u8], h: &Header) -> Result<usize, NodeError> {
    let mut sum = 0usize;
    for i in 0..h.n {
        sum = sum.saturating_add(cell_span(page, h, i)?.1);
    }
    if sum.saturating_add(h.garbage) != h.len - h.cell_start {
        return Err(corrupt(format!(
            "live cells ({sum} bytes) plus garbage ({}) do not fill the cell area ({} bytes)",
            h.garbage,
            h.len - h.cell_start
        )));
    }
    Ok(sum)
}

// ---------------------------------------------------------------------------
// Public API: header.

/// Make `page` an empty node of `level`: zero bytes `PAGE_HEADER..` and set
/// `cell_start` to the page length. The common page header is untouched.
pub fn init(page: &mut [u8], level: u8) -> Result<(), NodeError> {
    check_page_len(page.len())?;
    let len = page.len();
    // N6: just checked, and PAGE_HEADER < MIN_PAGE_SIZE.
    #[allow(clippy::indexing_slicing)]
    page[PAGE_HEADER..].fill(0);
    wr(page, OFF_LEVEL, &[level]);
    store_header(
        page,
        &Header {
            len,
            level,
            n: 0,
            cell_start: len,
            garbage: 0,
        },
    )
}

/// The node's level (0 = leaf). Panics if `page` is not a whole page (N6).
pub fn level(page: &[u8]) -> u8 {
    assert_whole_page(page);
    #[allow(clippy::indexing_slicing)] // N6, asserted above
    page[OFF_LEVEL]
}

/// Whether the node is a leaf (level 0).
pub fn is_leaf(page: &[u8]) -> bool {
    level(page) == 0
}

/// The number of slots (cells). Unchecked: a corrupt page may claim more
/// slots than fit; functions returning `Result` check it. Panics if `page`
/// is not a whole page (N6).
pub fn nslots(page: &[u8]) -> usize {
    usize::from(u16::from_le_bytes(header_bytes(page, OFF_NSLOTS)))
}

/// The left sibling's page id (0 = none). Panics if `page` is not a whole
/// page (N6).
pub fn left(page: &[u8]) -> u64 {
    u64::from_le_bytes(header_bytes(page, OFF_LEFT))
}

/// The right sibling's page id (0 = none). Panics if `page` is not a whole
/// page (N6).
pub fn right(page: &[u8]) -> u64 {
    u64::from_le_bytes(header_bytes(page, OFF_RIGHT))
}

/// `N` bytes of the node header at `off` (N6).
fn header_bytes<const N: usize>(page: &[u8], off: usize) -> [u8; N] {
    assert_whole_page(page);
    debug_assert!(
        off + N <= NODE_HEADER_END,
        "node N6: header field past the header"
    );
    #[allow(clippy::indexing_slicing)] // N6, asserted above
    let b = &page[off..off + N];
    let mut a = [0u8; N];
    a.copy_from_slice(b);
    a
}

/// Set the left sibling's page id (0 = none).
pub fn set_left(page: &mut [u8], id: u64) -> Result<(), NodeError> {
    check_page_len(page.len())?;
    wr(page, OFF_LEFT, &id.to_le_bytes());
    Ok(())
}

/// Set the right sibling's page id (0 = none).
pub fn set_right(page: &mut [u8], id: u64) -> Result<(), NodeError> {
    check_page_len(page.len())?;
    wr(page, OFF_RIGHT, &id.to_le_bytes());
    Ok(())
}

/// Bytes available for new cells and their slots: the contiguous gap plus
/// garbage (available after compaction). 0 if the header is corrupt; the
/// engine uses `free_space_checked`, which reports that as an error.
pub fn free_space(page: &[u8]) -> usize {
    free_space_checked(page).unwrap_or(0)
}

/// [`free_space`], with a corrupt header (N1) an error instead of 0.
pub(crate) fn free_space_checked(page: &[u8]) -> Result<usize, NodeError> {
    header(page).map(|h| h.free())
}

/// Bytes in use: the slot array plus live cells. Always
/// `used_bytes + free_space == capacity` on a valid node. 0 if the header is
/// corrupt; the engine uses `used_bytes_checked`, which reports that as an
/// error.
pub fn used_bytes(page: &[u8]) -> usize {
    used_bytes_checked(page).unwrap_or(0)
}

/// [`used_bytes`], with a corrupt header (N1) an error instead of 0.
pub(crate) fn used_bytes_checked(page: &[u8]) -> Result<usize, NodeError> {
    // N1 (checked by `header`) keeps `cell_start + garbage <= len`.
    header(page).map(|h| SLOT_SIZE * h.n + (h.len - h.cell_start - h.garbage))
}

/// Bytes a node on a page of `page_len` bytes has for slots and cells.
pub fn capacity(page_len: usize) -> usize {
    page_len.saturating_sub(NODE_HEADER_END)
}

// ---------------------------------------------------------------------------
// Public API: cell encoding.

/// Bytes of a leaf cell holding `key_len` key bytes and an inline value of
/// `value_len` bytes (excluding its slot).
pub fn leaf_inline_size(key_len: usize, value_len: usize) -> usize {
    LEAF_CELL_HEADER
        .saturating_add(key_len)
        .saturating_add(value_len)
}

/// Bytes of a leaf cell holding `key_len` key bytes and an overflow value
/// reference (excluding its slot).
pub fn leaf_overflow_size(key_len: usize) -> usize {
    LEAF_CELL_HEADER
        .saturating_add(key_len)
        .saturating_add(OVERFLOW_REF)
}

/// Bytes of an internal cell holding `key_len` key bytes (excluding its
/// slot).
pub fn internal_size(key_len: usize) -> usize {
    INTERNAL_CELL_HEADER.saturating_add(key_len)
}

fn klen_u16(key: &[u8]) -> Result<u16, NodeError> {
    u16::try_from(key.len())
        .map_err(|_| invalid(format!("key of {} bytes is longer than 65535", key.len())))
}

/// Encode a leaf cell with an inline value. Fails only if the key is longer
/// than `u16::MAX` or the value longer than `u32::MAX` bytes.
pub fn encode_leaf_inline(key: &[u8], value: &[u8]) -> Result<Vec<u8>, NodeError> {
    let klen = klen_u16(key)?;
    let vlen = u32::try_from(value.len()).map_err(|_| {
        invalid(format!(
            "inline value of {} bytes is longer than u32::MAX",
            value.len()
        ))
    })?;
    let mut out = Vec::with_capacity(leaf_inline_size(key.len(), value.len()));
    out.extend_from_slice(&klen.to_le_bytes());
    out.push(VKIND_INLINE);
    out.extend_from_slice(&vlen.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    Ok(out)
}

/// Encode a leaf cell whose value (of `total_len` bytes) starts at overflow
/// page `first_page`. Fails only if the key is longer than `u16::MAX`.
pub fn encode_leaf_overflow(
    key: &[u8],
    total_len: u32,
    first_page: u64,
) -> Result<Vec<u8>, NodeError> {
    let klen = klen_u16(key)?;
    let mut out = Vec::with_capacity(leaf_overflow_size(key.len()));
    out.extend_from_slice(&klen.to_le_bytes());
    out.push(VKIND_OVERFLOW);
    out.extend_from_slice(&total_len.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&first_page.to_le_bytes());
    Ok(out)
}

/// Decode a leaf cell; `cell` must be exactly one cell (as [`cell`] returns).
pub fn decode_leaf(cell: &[u8]) -> Result<LeafCell<'_>, NodeError> {
    let len = parse_cell_len(0, cell).map_err(|r| corrupt(format!("leaf cell: {r}")))?;
    if len != cell.len() {
        return Err(corrupt(format!(
            "leaf cell is {} bytes but its header says {len}",
            cell.len()
        )));
    }
    leaf_cell_parts(cell)
}

/// Key and value of a leaf cell whose length `parse_cell_len` has checked
/// against the cell's own header.
fn leaf_cell_parts(cell: &[u8]) -> Result<LeafCell<'_>, NodeError> {
    let key = cell_key(0, cell)?;
    // N8: `parse_cell_len` accepted the header and `cell` is as long as it
    // says, so the 7 header bytes and the key are inside `cell`.
    #[allow(clippy::indexing_slicing)]
    let (vkind, vlen, rest) = (
        cell[2],
        u32::from_le_bytes([cell[3], cell[4], cell[5], cell[6]]),
        &cell[LEAF_CELL_HEADER + key.len()..],
    );
    let value = if vkind == VKIND_INLINE {
        LeafValue::Inline(rest)
    } else {
        LeafValue::Overflow {
            len: vlen,
            first_page: rd_u64(rest, 0).ok_or_else(|| corrupt("overflow reference cut off"))?,
        }
    };
    Ok(LeafCell { key, value })
}

/// A leaf read slot by slot with its header parsed and checked once: what
/// a range scan uses, so a visit costs one header check per leaf and one
/// cell parse per entry (the free functions above check the header on
/// every call).
#[derive(Clone, Copy, Debug)]
pub struct LeafView<'a> {
    page: &'a [u8],
    h: Header,
}

impl<'a> LeafView<'a> {
    /// A view of `page`, which must be a leaf (level 0) with a sound
    /// header (N1).
    pub fn new(page: &'a [u8]) -> Result<LeafView<'a>, NodeError> {
        let h = header(page)?;
        if h.level != 0 {
            return Err(invalid(format!("a leaf view of a level-{} node", h.level)));
        }
        Ok(LeafView { page, h })
    }

    /// The number of cells (slots).
    pub fn nslots(&self) -> usize {
        self.h.n
    }

    /// The key of cell `i` (only the key checked, as [`key`]).
    pub fn key(&self, i: usize) -> Result<&'a [u8], NodeError> {
        key_at(self.page, &self.h, i)
    }

    /// Cell `i`, key and value, parsed once.
    pub fn cell(&self, i: usize) -> Result<LeafCell<'a>, NodeError> {
        self.cell_at_offset(i).map(|(cell, _)| cell)
    }

    /// Bytes of the page that live cells take (the cell area less its
    /// garbage).
    pub fn cell_bytes(&self) -> usize {
        self.h
            .len
            .saturating_sub(self.h.cell_start)
            .saturating_sub(self.h.garbage)
    }

    /// [`LeafView::cell`] and where its key starts in the page. A leaf
    /// cell is `klen | vkind | vlen | key | value`, so an inline value
    /// starts `key.len()` bytes after the key. What a reader of a copy of
    /// the page needs to find the cell there.
    #[inline]
    pub fn cell_at_offset(&self, i: usize) -> Result<(LeafCell<'a>, usize), NodeError> {
        // The common cell, an inline value within the page, read in one
        // straight pass; anything else (an overflow value, or damage the
        // checked path reports) goes the checked way.
        if let Some(found) = self.inline_cell(i) {
            return Ok(found);
        }
        self.cell_at_offset_checked(i)
    }

    /// [`LeafView::cell_at_offset`] for a cell with its value inline, or
    /// `None` (for any other cell, or a slot or cell the checks of
    /// [`cell_span`] would refuse). The checks are those of
    /// [`cell_span`] and [`leaf_cell_parts`] for such a cell.
    #[inline]
    fn inline_cell(&self, i: usize) -> Option<(LeafCell<'a>, usize)> {
        if i >= self.h.n {
            return None;
        }
        let off = usize::from(rd_u16(self.page, slot_pos(i))?);
        if off < self.h.cell_start || off >= self.h.len {
            return None;
        }
        let cell = self.page.get(off..self.h.len)?;
        let (head, rest) = cell.split_first_chunk::<LEAF_CELL_HEADER>()?;
        let [k0, k1, vkind, v0, v1, v2, v3] = *head;
        if vkind != VKIND_INLINE {
            return None;
        }
        let klen = usize::from(u16::from_le_bytes([k0, k1]));
        let vlen = usize::try_from(u32::from_le_bytes([v0, v1, v2, v3])).ok()?;
        let key = rest.get(..klen)?;
        let value = rest.get(klen..klen.checked_add(vlen)?)?;
        Some((
            LeafCell {
                key,
                value: LeafValue::Inline(value),
            },
            off + LEAF_CELL_HEADER,
        ))
    }

    /// [`LeafView::cell_at_offset`] with every check and its error.
    fn cell_at_offset_checked(&self, i: usize) -> Result<(LeafCell<'a>, usize), NodeError> {
        let (off, len) = cell_span(self.page, &self.h, i)?;
        // N8: `cell_span` parsed the cell's header (level 0) and checked
        // that the cell is as long as it says and `off + len <= page.len()`.
        #[allow(clippy::indexing_slicing)]
        let cell = leaf_cell_parts(&self.page[off..off + len])?;
        Ok((cell, off + LEAF_CELL_HEADER))
    }

    /// Ask the CPU to start loading cell `i` (its first 256 bytes) into
    /// cache, so that a scan reading cells in order finds the next ones
    /// there instead of waiting for memory at each. A hint only: a slot
    /// out of range, or one pointing outside the page, is ignored.
    #[inline]
    pub fn prefetch(&self, i: usize) {
        if i >= self.h.n {
            return;
        }
        let Some(off) = rd_u16(self.page, slot_pos(i)) else {
            return;
        };
        let off = usize::from(off);
        for line in [off, off + 64, off + 128, off + 192] {
            if let Some(byte) = self.page.get(line) {
                prefetch_line(byte);
            }
        }
    }

    /// [`search_leaf`] on this leaf.
    pub fn search(&self, key: &[u8]) -> Result<Result<usize, usize>, NodeError> {
        search_slots(self.page, &self.h, key)
    }
}

/// Encode an internal cell pointing at `child`. Fails only if the key is
/// longer than `u16::MAX`.
pub fn encode_internal(key: &[u8], child: u64) -> Result<Vec<u8>, NodeError> {
    let klen = klen_u16(key)?;
    let mut out = Vec::with_capacity(internal_size(key.len()));
    out.extend_from_slice(&klen.to_le_bytes());
    out.extend_from_slice(&child.to_le_bytes());
    out.extend_from_slice(key);
    Ok(out)
}

/// Decode an internal cell into (key, child page id); `cell` must be exactly
/// one cell.
pub fn decode_internal(cell: &[u8]) -> Result<(&[u8], u64), NodeError> {
    let len = parse_cell_len(1, cell).map_err(|r| corrupt(format!("internal cell: {r}")))?;
    if len != cell.len() {
        return Err(corrupt(format!(
            "internal cell is {} bytes but its header says {len}",
            cell.len()
        )));
    }
    let child = rd_u64(cell, 2).ok_or_else(|| corrupt("internal cell header cut off"))?;
    Ok((cell_key(1, cell)?, child))
}

// ---------------------------------------------------------------------------
// Public API: reading cells.

/// The exact bytes of cell `i` (its length computed from its header).
pub fn cell(page: &[u8], i: usize) -> Result<&[u8], NodeError> {
    let h = header(page)?;
    cell_at(page, &h, i)
}

/// The key of cell `i`. For internal nodes slot 0's stored key is returned
/// as is, although searches treat it as minus infinity. Only the key is
/// checked (see the module docs): `key(i)` succeeding does not mean
/// `cell(i)` does.
pub fn key(page: &[u8], i: usize) -> Result<&[u8], NodeError> {
    let h = header(page)?;
    key_at(page, &h, i)
}

/// All cells in slot order (for moving cells during splits and merges).
pub fn cells(page: &[u8]) -> Result<Vec<&[u8]>, NodeError> {
    let h = header(page)?;
    (0..h.n).map(|i| cell_at(page, &h, i)).collect()
}

fn check_internal(h: &Header, what: &str) -> Result<(), NodeError> {
    if h.level == 0 {
        Err(invalid(format!("{what} on a leaf node")))
    } else {
        Ok(())
    }
}

/// The child page id in internal cell `i`.
pub fn child(page: &[u8], i: usize) -> Result<u64, NodeError> {
    let h = header(page)?;
    check_internal(&h, "child")?;
    child_in(page, &h, i)
}

/// The child page id in internal cell `i` of a node whose header is `h`.
fn child_in(page: &[u8], h: &Header, i: usize) -> Result<u64, NodeError> {
    let (off, _) = cell_span(page, h, i)?;
    rd_u64(page, off + 2).ok_or_else(|| corrupt(format!("cell {i} header cut off")))
}

/// Overwrite the child page id in internal cell `i` (in place).
pub fn set_child(page: &mut [u8], i: usize, child: u64) -> Result<(), NodeError> {
    let h = header(page)?;
    check_internal(&h, "set_child")?;
    let (off, _) = cell_span(page, &h, i)?;
    // N8: an internal cell's span covers its 10-byte header.
    wr(page, off + 2, &child.to_le_bytes());
    Ok(())
}

/// Search a leaf for `key`, answering as `slice::binary_search` does:
/// `Ok(i)` if slot `i` holds `key`, else `Err(i)` with the slot at which
/// to insert it (the search itself starts from an estimate of where the
/// key falls between the leaf's end keys).
/// (Works on internal nodes too, comparing slot 0's stored key literally.)
pub fn search_leaf(page: &[u8], key: &[u8]) -> Result<Result<usize, usize>, NodeError> {
    search_slots(page, &header(page)?, key)
}

/// [`search_leaf`] for a key about to be written: a key above the last
/// one (an ascending load, an automatic key, a transaction's next undo
/// record) is placed after it, and the last key itself found, with one
/// comparison instead of a binary search; any other key is searched as
/// `search_leaf` does, after that one comparison. On a leaf whose keys
/// are in order (N3) the answer is `search_leaf`'s.
pub fn search_leaf_for_insert(page: &[u8], key: &[u8]) -> Result<Result<usize, usize>, NodeError> {
    let h = header(page)?;
    if let Some(last) = h.n.checked_sub(1) {
        match cmp_keys(key_at(page, &h, last)?, key) {
            Ordering::Less => return Ok(Err(h.n)),
            Ordering::Equal => return Ok(Ok(last)),
            Ordering::Greater => {}
        }
    }
    search_slots(page, &h, key)
}

/// [`search_leaf_for_insert`], trying slot `guess` first (where a read
/// found `key`; slots may have moved since): a key equal to the guess's
/// is the only one (N3), so that answer is the search's.
pub fn search_leaf_from_guess(
    page: &[u8],
    key: &[u8],
    guess: usize,
) -> Result<Result<usize, usize>, NodeError> {
    let h = header(page)?;
    if guess < h.n && key_at(page, &h, guess)? == key {
        return Ok(Ok(guess));
    }
    search_leaf_for_insert(page, key)
}

/// Search of the slots' keys, compared literally, as a binary search
/// answers ([`partition_slots`]; N3 keeps leaf keys strictly increasing).
fn search_slots(page: &[u8], h: &Header, key: &[u8]) -> Result<Result<usize, usize>, NodeError> {
    search_slots_from(page, h, key, None)
}

/// [`search_slots`] starting from `hint` (see [`partition_slots`]).
fn search_slots_from(
    page: &[u8],
    h: &Header,
    key: &[u8],
    hint: Option<u32>,
) -> Result<Result<usize, usize>, NodeError> {
    let i = partition_slots(page, h, 0, h.n, key, false, hint)?;
    if i < h.n && key_at(page, h, i)? == key {
        return Ok(Ok(i));
    }
    Ok(Err(i))
}

/// Slot ranges shorter than this are binary searched outright: the
/// interpolation's two end probes would not pay for themselves. (An
/// internal node's range leaves out slot 0, so there it takes one slot
/// more.)
const INTERPOLATE_MIN_SLOTS: usize = 16;

/// The first slot in `lo..hi` whose key is not below `key`: below means
/// `< key`, or `<= key` with `or_equal`. The keys of `lo..hi` must be in
/// order (N3), so "below" holds for a prefix of them, as for
/// `slice::partition_point`.
///
/// A range of at least [`INTERPOLATE_MIN_SLOTS`] slots is searched from an
/// estimate: the key's place between the keys of `lo` and `hi - 1`, read
/// as numbers from the first byte where those two differ (a node's keys
/// often share a prefix, and integer keys are dense in a leaf), then a
/// gallop from the estimate to a bracket and a binary search in it. On a
/// leaf of consecutive integer keys that is about four probes, mostly of
/// neighbouring cells, where a binary search makes eight probes to cells
/// across the page, each a cache miss on a cold page. The answer is the
/// binary search's whatever the estimate: the estimate only picks where
/// the probes start.
///
/// With `hint` (the key's place in the node's key range as a fraction of
/// 2^32, from the separators in its parent: [`child_with_hint`]), the
/// estimate is taken from it and the end keys are not read: two fewer
/// cells touched on a cold leaf.
fn partition_slots(
    page: &[u8],
    h: &Header,
    lo: usize,
    hi: usize,
    key: &[u8],
    or_equal: bool,
    hint: Option<u32>,
) -> Result<usize, NodeError> {
    let below = |k: &[u8]| match cmp_keys(k, key) {
        Ordering::Less => true,
        Ordering::Equal => or_equal,
        Ordering::Greater => false,
    };
    let is_below = |i: usize| Ok::<_, NodeError>(below(key_at(page, h, i)?));
    // Invariant of every step: slots before `l` are below, slots from `r`
    // on are not; the answer is in `l..=r`.
    let (mut l, mut r) = (lo, hi);
    if hi.saturating_sub(lo) >= INTERPOLATE_MIN_SLOTS {
        let g = if let Some(f) = hint {
            lo + scale(f, hi - 1 - lo)
        } else {
            let (first, last) = (key_at(page, h, lo)?, key_at(page, h, hi - 1)?);
            if !below(first) {
                return Ok(lo);
            }
            if below(last) {
                return Ok(hi);
            }
            (l, r) = (lo + 1, hi - 1);
            lo + fraction_between(first, last, key)
                .map_or((hi - 1 - lo) / 2, |f| scale(f, hi - 1 - lo))
        };
        if l < r {
            let g = g.clamp(l, r - 1);
            if is_below(g)? {
                l = g + 1;
                let mut step = 1;
                while let Some(p) = g.checked_add(step).filter(|&p| p < r) {
                    if is_below(p)? {
                        l = p + 1;
                        step *= 2;
                    } else {
                        r = p;
                        break;
                    }
                }
            } else {
                r = g;
                let mut step = 1;
                while let Some(p) = g.checked_sub(step).filter(|&p| p >= l) {
                    if is_below(p)? {
                        l = p + 1;
                        break;
                    }
                    r = p;
                    step *= 2;
                }
            }
        }
    }
    while l < r {
        let mid = l + (r - l) / 2;
        prefetch_next_probes(page, l, mid, r);
        if is_below(mid)? {
            l = mid + 1;
        } else {
            r = mid;
        }
    }
    Ok(l)
}

/// Where `key` falls between the keys `first` and `last`, as a fraction
/// of 2^32: the 8 bytes of each key after the prefix `first` and `last`
/// share, taken as big-endian numbers. A key between the two shares that
/// prefix, so its number never decreases as keys increase (keys that
/// differ only past those 8 bytes, or by trailing zero bytes, tie); one
/// outside is clamped to an end. `None` when the two numbers tie (no place can be told). A
/// guess only: callers use it where any answer is correct.
fn fraction_between(first: &[u8], last: &[u8], key: &[u8]) -> Option<u32> {
    // The shared prefix, eight bytes at a time: the first byte where two
    // words differ is where the keys differ, unless it lies past the
    // shorter key (its word was padded with zeros), where the prefix ends
    // anyway.
    let short = first.len().min(last.len());
    let mut shared = 0;
    while shared < short {
        let diff = be_word(first, shared) ^ be_word(last, shared);
        if diff != 0 {
            shared += (diff.leading_zeros() / 8) as usize;
            break;
        }
        shared += 8;
    }
    let shared = shared.min(short);
    let (f, l) = (be_word(first, shared), be_word(last, shared));
    if l <= f {
        return None;
    }
    let (num, den) = (be_word(key, shared).clamp(f, l) - f, l - f);
    // Scale both below 2^32 so that num << 32 fits (num <= den).
    let shift = 32u32.saturating_sub(den.leading_zeros());
    let (num, den) = (num >> shift, (den >> shift).max(1));
    Some(u32::try_from((num << 32) / den).unwrap_or(u32::MAX))
}

/// The 8 bytes of `k` from `at` as a big-endian number, bytes past the
/// end of `k` taken as zeros.
#[inline]
fn be_word(k: &[u8], at: usize) -> u64 {
    let Some(tail) = k.get(at..) else {
        return 0;
    };
    if let Some(w) = tail.first_chunk::<8>() {
        return u64::from_be_bytes(*w);
    }
    // Fewer than 8 bytes from `at` (`n`): in a key of 8 bytes or more they
    // are the low bytes of its last word, shifted up (no copy).
    let n = tail.len();
    if n == 0 {
        return 0;
    }
    if let Some(last) = k.last_chunk::<8>() {
        return u64::from_be_bytes(*last) << (8 * (8 - n));
    }
    let mut w = 0u64;
    for (i, &b) in tail.iter().enumerate() {
        w |= u64::from(b) << (8 * (7 - i));
    }
    w
}

/// `fraction` (of 2^32) of `span`, rounded down: below `span` (0 for 0).
fn scale(fraction: u32, span: usize) -> usize {
    ((u64::from(fraction) * span as u64) >> 32) as usize
}

/// The slot of the child to descend into for `key` in an internal node: the
/// largest `i` with `key_i <= key`, slot 0's key being minus infinity. The
/// node must have at least one slot.
pub fn search_internal(page: &[u8], key: &[u8]) -> Result<usize, NodeError> {
    search_internal_in(page, &header(page)?, key)
}

/// The child page to descend into for `key` in an internal node
/// ([`search_internal`] then [`child`], the header read once).
pub fn child_for(page: &[u8], key: &[u8]) -> Result<u64, NodeError> {
    let h = header(page)?;
    let i = search_internal_in(page, &h, key)?;
    child_in(page, &h, i)
}

/// [`child_for`], and whether that child is the node's last one.
pub fn child_for_edge(page: &[u8], key: &[u8]) -> Result<(u64, bool), NodeError> {
    let h = header(page)?;
    let i = search_internal_in(page, &h, key)?;
    Ok((child_in(page, &h, i)?, i + 1 == h.n))
}

/// [`child_for`], with where `key` falls in that child's key range: the
/// fraction (of 2^32) of the way from the child's separator to the next
/// one, for [`search_leaf_with_hint`] to start from. `None` for the first
/// and last children (one of their bounds is not in this node) and where
/// the separators tell no place.
pub fn child_with_hint(page: &[u8], key: &[u8]) -> Result<(u64, Option<u32>), NodeError> {
    let h = header(page)?;
    let i = search_internal_in(page, &h, key)?;
    let child = child_in(page, &h, i)?;
    let hint = if i >= 1 && i + 1 < h.n {
        fraction_between(key_at(page, &h, i)?, key_at(page, &h, i + 1)?, key)
    } else {
        None
    };
    Ok((child, hint))
}

/// [`search_leaf`] starting from `hint` (from [`child_with_hint`]); the
/// same answer whatever the hint.
pub fn search_leaf_with_hint(
    page: &[u8],
    key: &[u8],
    hint: Option<u32>,
) -> Result<Result<usize, usize>, NodeError> {
    search_slots_from(page, &header(page)?, key, hint)
}

fn search_internal_in(page: &[u8], h: &Header, key: &[u8]) -> Result<usize, NodeError> {
    check_internal(h, "search_internal")?;
    if h.n == 0 {
        return Err(corrupt("internal node has no children"));
    }
    // First slot in 1..n whose key is greater than `key`.
    Ok(partition_slots(page, h, 1, h.n, key, true, None)? - 1)
}

// ---------------------------------------------------------------------------
// Public API: changing cells.

/// Insert `cell` (one well-formed cell for this node's level) as slot `i`
/// (`0..=nslots`), shifting later slots up. If the contiguous gap is too
/// small but free space including garbage suffices, the node is compacted
/// first. Returns `Ok(false)`, with the page unchanged, if it does not fit.
/// The caller keeps keys in order (see [`search_leaf`]).
pub fn insert_cell(page: &mut [u8], i: usize, cell: &[u8]) -> Result<bool, NodeError> {
    let mut h = header(page)?;
    if i > h.n {
        return Err(NodeError::SlotOutOfRange {
            index: i,
            nslots: h.n,
        });
    }
    check_cell_arg(h.level, cell)?;
    let need = cell.len().saturating_add(SLOT_SIZE);
    if need > h.free() {
        return Ok(false);
    }
    if need > h.gap() {
        compact(page)?;
        h = header(page)?;
        // Compaction turns all garbage into gap, and `need <= free`.
        assert!(
            need <= h.gap(),
            "node N7: {need} bytes do not fit the gap {} after compaction",
            h.gap()
        );
    }
    let new_start = h.cell_start - cell.len();
    let new_off = u16::try_from(new_start)
        .map_err(|_| corrupt(format!("cell offset {new_start} overflows u16")))?;
    let from = slot_pos(i);
    let end = h.slot_end();
    // N1 after the insert: the grown slot array ends at or below the new
    // cell (`need <= gap`).
    debug_assert!(
        end + SLOT_SIZE <= new_start,
        "node N7: slots reach the new cell"
    );
    wr(page, new_start, cell);
    // In bounds: `end + SLOT_SIZE <= new_start <= page.len()`, and
    // `from <= end` because `i <= n`.
    #[allow(clippy::indexing_slicing)]
    page[from..end + SLOT_SIZE].copy_within(..end - from, SLOT_SIZE);
    wr(page, from, &new_off.to_le_bytes());
    h.n += 1;
    h.cell_start = new_start;
    store_header(page, &h)?;
    Ok(true)
}

/// Remove slot `i`, shifting later slots down. The cell's bytes become
/// garbage, except that a cell at `cell_start` is reclaimed at once by
/// advancing `cell_start`, and removing the last slot resets the node to
/// empty (N4).
pub fn delete_cell(page: &mut [u8], i: usize) -> Result<(), NodeError> {
    let h = header(page)?;
    let (off, len) = cell_span(page, &h, i)?;
    let mut nh = h;
    nh.n -= 1;
    if nh.n == 0 {
        nh.cell_start = h.len;
        nh.garbage = 0;
    } else if off == h.cell_start {
        nh.cell_start += len;
    } else {
        nh.garbage += len;
    }
    if nh.garbage > nh.len - nh.cell_start {
        return Err(corrupt(format!(
            "deleting cell {i} leaves garbage {} larger than the cell area: cells overlap",
            nh.garbage
        )));
    }
    let from = slot_pos(i);
    let end = h.slot_end();
    // In bounds: `i < n` (checked by `cell_span`), so `from + SLOT_SIZE <=
    // end`, and N1 puts `end` at or below `cell_start <= page.len()`.
    #[allow(clippy::indexing_slicing)]
    {
        let slots = &mut page[from..end];
        slots.copy_within(SLOT_SIZE.., 0);
        slots[end - from - SLOT_SIZE..].fill(0);
    }
    store_header(page, &nh)
}

/// Replace cell `i` with `cell` (one well-formed cell for this node's level),
/// keeping its slot position: in place if the length is unchanged, else by
/// delete and insert (compacting if needed). Returns `Ok(false)`, with the
/// page unchanged, if the new cell does not fit.
pub fn replace_cell(page: &mut [u8], i: usize, cell: &[u8]) -> Result<bool, NodeError> {
    let h = header(page)?;
    let (off, old_len) = cell_span(page, &h, i)?;
    check_cell_arg(h.level, cell)?;
    if cell.len() == old_len {
        // N8: the old cell's checked span has the same length.
        wr(page, off, cell);
        return Ok(true);
    }
    if cell.len() > h.free().saturating_add(old_len) {
        return Ok(false);
    }
    // Check everything the delete and a possible compaction will rely on
    // before changing a byte.
    live_bytes(page, &h)?;
    delete_cell(page, i)?;
    // With N2 checked above, the delete freed `old_len` plus a slot, so the
    // insert fits; a miss is our bug (and the page is already changed).
    let fits = insert_cell(page, i, cell)?;
    assert!(
        fits,
        "node N7: a replacement of {} bytes did not fit after removing {old_len}",
        cell.len()
    );
    Ok(true)
}

/// Rewrite leaf cell `i` in place through `f`, which gets a copy of it:
/// the page changes only if `f` succeeds and the result keeps the cell's
/// header and key byte for byte (so its length, its kind and the page's
/// key order stay as they were: a patch changes only an inline value).
pub fn patch_cell(
    page: &mut [u8],
    i: usize,
    f: impl FnOnce(&mut [u8]) -> Result<(), String>,
) -> Result<(), NodeError> {
    let h = header(page)?;
    if h.level != 0 {
        return Err(invalid(format!(
            "a patch of cell {i} of a level-{} node",
            h.level
        )));
    }
    let (off, len) = cell_span(page, &h, i)?;
    // In bounds: `cell_span` checked `off + len <= h.len == page.len()`.
    #[allow(clippy::indexing_slicing)]
    let old = &page[off..off + len];
    let LeafValue::Inline(value) = decode_leaf(old)?.value else {
        return Err(invalid(format!(
            "a patch of cell {i}, whose value overflows"
        )));
    };
    // The header and key come first, the inline value last.
    let fixed = len - value.len();
    let mut copy = old.to_vec();
    f(&mut copy).map_err(|r| invalid(format!("patch of cell {i}: {r}")))?;
    if copy.get(..fixed) != old.get(..fixed) {
        return Err(invalid(format!(
            "a patch of cell {i} changes its header or key"
        )));
    }
    // N8: same span, same length.
    wr(page, off, &copy);
    Ok(())
}

/// Remove slots `from..nslots` (`from <= nslots`); their bytes become
/// garbage. Truncating to zero slots resets the node to empty (N4).
pub fn truncate(page: &mut [u8], from: usize) -> Result<(), NodeError> {
    let h = header(page)?;
    if from > h.n {
        return Err(NodeError::SlotOutOfRange {
            index: from,
            nslots: h.n,
        });
    }
    if from == h.n {
        return Ok(());
    }
    let mut removed = 0usize;
    for i in from..h.n {
        removed = removed.saturating_add(cell_span(page, &h, i)?.1);
    }
    let mut nh = h;
    nh.n = from;
    if from == 0 {
        nh.cell_start = h.len;
        nh.garbage = 0;
    } else {
        nh.garbage = h.garbage.saturating_add(removed);
        if nh.garbage > h.len - h.cell_start {
            return Err(corrupt(format!(
                "truncating to {from} slots leaves garbage {} larger than the cell area: cells overlap",
                nh.garbage
            )));
        }
    }
    // In bounds: `from <= n` and N1 puts the slot array's end below
    // `cell_start <= page.len()`.
    #[allow(clippy::indexing_slicing)]
    page[slot_pos(from)..h.slot_end()].fill(0);
    store_header(page, &nh)
}

/// Rewrite the cell area without garbage: live cells are packed against the
/// page end in slot order (slot 0 lowest), slots are updated, and the free
/// gap is zeroed. Slot order is unchanged.
pub fn compact(page: &mut [u8]) -> Result<(), NodeError> {
    let h = header(page)?;
    let live = live_bytes(page, &h)?;
    let new_start = h.len - live;
    let mut buf = Vec::with_capacity(live);
    let mut offsets = Vec::with_capacity(h.n);
    let mut next = new_start;
    for i in 0..h.n {
        let c = cell_at(page, &h, i)?;
        offsets.push(
            u16::try_from(next)
                .map_err(|_| corrupt(format!("cell offset {next} overflows u16")))?,
        );
        next += c.len();
        buf.extend_from_slice(c);
    }
    debug_assert_eq!(
        next, h.len,
        "node N2: live cells pack exactly to the page end"
    );
    for (i, off) in offsets.iter().enumerate() {
        wr(page, slot_pos(i), &off.to_le_bytes());
    }
    wr(page, new_start, &buf);
    // In bounds: `live_bytes` checked live + garbage == len - cell_start,
    // so `slot_end <= cell_start <= new_start <= len` (N1).
    #[allow(clippy::indexing_slicing)]
    page[h.slot_end()..new_start].fill(0);
    store_header(
        page,
        &Header {
            cell_start: new_start,
            garbage: 0,
            ..h
        },
    )
}

/// A slot `s` (`1 <= s < nslots`) at which to split the node: slots `0..s`
/// stay, `s..` move. Chooses the `s` whose left part's bytes (cells plus
/// slots) are closest to half of [`used_bytes`], the smallest such `s` on a
/// tie. Needs at least two slots.
pub fn split_point(page: &[u8]) -> Result<usize, NodeError> {
    let h = header(page)?;
    if h.n < 2 {
        return Err(invalid(format!("cannot split a node with {} slots", h.n)));
    }
    let mut sizes = Vec::with_capacity(h.n);
    for i in 0..h.n {
        sizes.push(cell_span(page, &h, i)?.1 + SLOT_SIZE);
    }
    let total: usize = sizes.iter().sum();
    let (mut best, mut best_diff, mut left_bytes) = (1, usize::MAX, 0usize);
    for (idx, size) in sizes.iter().take(h.n - 1).enumerate() {
        left_bytes += size;
        let diff = (2 * left_bytes).abs_diff(total);
        if diff < best_diff {
            best = idx + 1;
            best_diff = diff;
        }
    }
    debug_assert!(
        (1..h.n).contains(&best),
        "node: split point {best} leaves a half empty"
    );
    Ok(best)
}

/// Check the node's structure (N1 to N5): for pages read from disk and for
/// tests.
pub fn validate(page: &[u8]) -> Result<(), NodeError> {
    let h = header(page)?;
    // N6: `header` checked the page length.
    #[allow(clippy::indexing_slicing)]
    let flags = page[OFF_FLAGS];
    if flags != 0 {
        return Err(corrupt(format!("flags byte is {flags:#04x}, not 0")));
    }
    let reserved = u32::from_le_bytes(header_bytes(page, OFF_RESERVED));
    if reserved != 0 {
        return Err(corrupt(format!(
            "reserved header bytes are {reserved:#010x}, not 0"
        )));
    }
    if h.n == 0 && (h.cell_start != h.len || h.garbage != 0) {
        return Err(corrupt(format!(
            "empty node has cell_start {} and garbage {}",
            h.cell_start, h.garbage
        )));
    }
    let mut spans = Vec::with_capacity(h.n);
    for i in 0..h.n {
        spans.push(cell_span(page, &h, i)?);
    }
    live_bytes(page, &h)?;
    spans.sort_unstable();
    for pair in spans.windows(2) {
        if let [(a_off, a_len), (b_off, _)] = pair
            && a_off + a_len > *b_off
        {
            return Err(corrupt(format!(
                "cells at offsets {a_off} ({a_len} bytes) and {b_off} overlap"
            )));
        }
    }
    let first = if h.level == 0 { 0 } else { 1 };
    let mut prev: Option<&[u8]> = None;
    for i in first..h.n {
        let k = key_at(page, &h, i)?;
        if let Some(p) = prev
            && p >= k
        {
            return Err(corrupt(format!(
                "key of slot {i} is not greater than the key of slot {}",
                i - 1
            )));
        }
        prev = Some(k);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A fresh node whose common header holds a recognisable pattern, so
    /// tests notice if node code writes to it.
    fn new_page(size: usize, level: u8) -> Vec<u8> {
        let mut p = vec![0xEEu8; size];
        for (i, b) in p.iter_mut().take(PAGE_HEADER).enumerate() {
            *b = 0xA0 ^ i as u8;
        }
        init(&mut p, level).unwrap();
        p
    }

    fn value_bytes(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|j| seed.wrapping_add((j as u8).wrapping_mul(31)))
            .collect()
    }

    type Model = Vec<(Vec<u8>, Vec<u8>)>;

    #[derive(Debug, Clone)]
    enum Op {
        Insert {
            key: Vec<u8>,
            vlen: usize,
            seed: u8,
        },
        InsertOverflow {
            key: Vec<u8>,
            total: u32,
            first: u64,
        },
        Delete(usize),
        Replace {
            at: usize,
            vlen: usize,
            seed: u8,
        },
        ReplaceOverflow {
            at: usize,
            total: u32,
            first: u64,
        },
        Compact,
        Truncate(usize),
    }

    fn key_strategy(ps: usize) -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::collection::vec(0u8..3, 0..4),
            prop::collection::vec(any::<u8>(), 0..ps / 16),
        ]
    }

    fn vlen_strategy(ps: usize) -> impl Strategy<Value = usize> {
        prop_oneof![0..16usize, 0..ps / 4]
    }

    fn op_strategy(ps: usize) -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (key_strategy(ps), vlen_strategy(ps), any::<u8>())
                .prop_map(|(key, vlen, seed)| Op::Insert { key, vlen, seed }),
            1 => (key_strategy(ps), any::<u32>(), any::<u64>())
                .prop_map(|(key, total, first)| Op::InsertOverflow { key, total, first }),
            4 => any::<usize>().prop_map(Op::Delete),
            3 => (any::<usize>(), vlen_strategy(ps), any::<u8>())
                .prop_map(|(at, vlen, seed)| Op::Replace { at, vlen, seed }),
            1 => (any::<usize>(), any::<u32>(), any::<u64>())
                .prop_map(|(at, total, first)| Op::ReplaceOverflow { at, total, first }),
            1 => Just(Op::Compact),
            1 => any::<usize>().prop_map(Op::Truncate),
        ]
    }

    fn ops_strategy() -> impl Strategy<Value = (usize, Vec<Op>)> {
        prop_oneof![Just(4096usize), Just(16384usize)]
            .prop_flat_map(|ps| (Just(ps), prop::collection::vec(op_strategy(ps), 1..120)))
    }

    fn insert_step(
        page: &mut [u8],
        model: &mut Model,
        key: &[u8],
        c: Vec<u8>,
    ) -> Result<(), TestCaseError> {
        let found = search_leaf(page, key).unwrap();
        let expect = model.binary_search_by(|(k, _)| k.as_slice().cmp(key));
        prop_assert_eq!(found, expect);
        prop_assert_eq!(search_leaf_for_insert(page, key).unwrap(), expect);
        if let Err(i) = found {
            let before = page.to_vec();
            let free = free_space(page);
            if insert_cell(page, i, &c).unwrap() {
                prop_assert!(free >= c.len() + SLOT_SIZE);
                model.insert(i, (key.to_vec(), c));
            } else {
                prop_assert!(free < c.len() + SLOT_SIZE);
                prop_assert_eq!(&before[..], &page[..]);
            }
        }
        Ok(())
    }

    fn replace_step(
        page: &mut [u8],
        model: &mut Model,
        at: usize,
        c: Vec<u8>,
    ) -> Result<(), TestCaseError> {
        let i = at % model.len();
        let before = page.to_vec();
        let free = free_space(page);
        let old_len = model[i].1.len();
        if replace_cell(page, i, &c).unwrap() {
            prop_assert!(c.len() <= free + old_len);
            model[i].1 = c;
        } else {
            prop_assert!(c.len() > free + old_len);
            prop_assert_eq!(&before[..], &page[..]);
        }
        Ok(())
    }

    /// Apply `op` to both the page and the model.
    fn apply(page: &mut [u8], model: &mut Model, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Insert { key, vlen, seed } => {
                let c = encode_leaf_inline(key, &value_bytes(*vlen, *seed)).unwrap();
                insert_step(page, model, key, c)?;
            }
            Op::InsertOverflow { key, total, first } => {
                let c = encode_leaf_overflow(key, *total, *first).unwrap();
                insert_step(page, model, key, c)?;
            }
            Op::Delete(at) if !model.is_empty() => {
                let i = at % model.len();
                delete_cell(page, i).unwrap();
                model.remove(i);
            }
            Op::Replace { at, vlen, seed } if !model.is_empty() => {
                let key = model[at % model.len()].0.clone();
                let c = encode_leaf_inline(&key, &value_bytes(*vlen, *seed)).unwrap();
                replace_step(page, model, *at, c)?;
            }
            Op::ReplaceOverflow { at, total, first } if !model.is_empty() => {
                let key = model[at % model.len()].0.clone();
                let c = encode_leaf_overflow(&key, *total, *first).unwrap();
                replace_step(page, model, *at, c)?;
            }
            Op::Compact => {
                let free = free_space(page);
                compact(page).unwrap();
                prop_assert_eq!(free_space(page), free);
                let cs = u32::from_le_bytes(page[52..56].try_into().unwrap()) as usize;
                prop_assert_eq!(cs - slot_pos(model.len()), free);
                prop_assert!(page[slot_pos(model.len())..cs].iter().all(|&b| b == 0));
            }
            Op::Truncate(at) => {
                let from = at % (model.len() + 1);
                truncate(page, from).unwrap();
                model.truncate(from);
            }
            _ => {}
        }
        Ok(())
    }

    fn check(page: &[u8], model: &Model, common: &[u8]) -> Result<(), TestCaseError> {
        prop_assert_eq!(validate(page), Ok(()));
        prop_assert_eq!(&page[..PAGE_HEADER], common);
        prop_assert_eq!(nslots(page), model.len());
        let cs = cells(page).unwrap();
        prop_assert_eq!(cs.len(), model.len());
        for (i, (c, (k, m))) in cs.iter().zip(model).enumerate() {
            prop_assert_eq!(*c, m.as_slice());
            prop_assert_eq!(cell(page, i).unwrap(), m.as_slice());
            prop_assert_eq!(key(page, i).unwrap(), k.as_slice());
            prop_assert_eq!(decode_leaf(c).unwrap().key, k.as_slice());
        }
        let used: usize = model.iter().map(|(_, c)| c.len() + SLOT_SIZE).sum();
        prop_assert_eq!(used_bytes(page), used);
        prop_assert_eq!(used + free_space(page), capacity(page.len()));
        Ok(())
    }

    /// Keys like an integer primary key's (a tag, then 8 big-endian bytes:
    /// neighbours share their first 8 bytes), loaded in ascending order
    /// and in a shuffled one: the insert search places each where the
    /// binary search does, and finds the last key itself.
    #[test]
    fn insert_search_on_integer_keys() {
        let key = |v: u64| {
            let mut k = vec![0x02];
            k.extend_from_slice(&v.to_be_bytes());
            k
        };
        for order in [0u64, 1] {
            let mut page = new_page(4096, 0);
            let mut vals: Vec<u64> = (0..120).map(|i| 250 + i).collect();
            if order == 1 {
                vals.sort_by_key(|v| v.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            }
            for v in vals {
                let k = key(v);
                let at = search_leaf(&page, &k).unwrap();
                assert_eq!(search_leaf_for_insert(&page, &k).unwrap(), at, "{v}");
                let Err(i) = at else { panic!("{v} is new") };
                assert!(insert_cell(&mut page, i, &encode_leaf_inline(&k, b"v").unwrap()).unwrap());
                assert_eq!(
                    search_leaf_for_insert(&page, &k).unwrap(),
                    Ok(i),
                    "{v} again"
                );
            }
            validate(&page).unwrap();
        }
    }

    /// A cell whose value part is damaged is still found by a search (only
    /// its key is read) and reported when it is read.
    #[test]
    fn damaged_value_is_reported_when_read_not_searched() {
        let mut page = new_page(4096, 0);
        for (i, k) in [b"a", b"b", b"c"].iter().enumerate() {
            assert!(insert_cell(&mut page, i, &encode_leaf_inline(*k, b"value").unwrap()).unwrap());
        }
        let h = header(&page).unwrap();
        let off = slot_offset(&page, &h, 1).unwrap();
        page[off + 2] = 7; // no such value kind
        assert_eq!(search_leaf(&page, b"b").unwrap(), Ok(1));
        assert_eq!(key(&page, 1).unwrap(), b"b");
        assert!(matches!(cell(&page, 1), Err(NodeError::Corrupt { .. })));
        assert!(LeafView::new(&page).unwrap().cell(1).is_err());
        assert!(validate(&page).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// The searches' key comparison is the byte-string order,
        /// whatever the lengths and wherever the keys first differ.
        #[test]
        fn key_comparison_is_byte_order(
            a in proptest::collection::vec(prop_oneof![Just(0u8), Just(0xFF), any::<u8>()], 0..20),
            b in proptest::collection::vec(prop_oneof![Just(0u8), Just(0xFF), any::<u8>()], 0..20),
            shared in 0usize..20,
        ) {
            // Often a common prefix, so the first 8 bytes tie.
            let mut b2 = a[..shared.min(a.len())].to_vec();
            b2.extend_from_slice(&b);
            for (x, y) in [(&a, &b), (&a, &b2), (&b2, &a), (&a, &a)] {
                prop_assert_eq!(cmp_keys(x, y), x.as_slice().cmp(y.as_slice()), "{:02x?} vs {:02x?}", x, y);
            }
        }

        #[test]
        fn leaf_ops_match_model((ps, ops) in ops_strategy()) {
            let mut page = new_page(ps, 0);
            let common = page[..PAGE_HEADER].to_vec();
            let mut model = Model::new();
            check(&page, &model, &common)?;
            for op in &ops {
                apply(&mut page, &mut model, op)?;
                check(&page, &model, &common)?;
            }
        }

        #[test]
        fn same_ops_same_bytes((ps, ops) in ops_strategy()) {
            let mut a = new_page(ps, 0);
            let mut b = a.clone();
            let (mut ma, mut mb) = (Model::new(), Model::new());
            for op in &ops {
                // Replay from identical bytes, as recovery does.
                prop_assert_eq!(&a, &b);
                apply(&mut a, &mut ma, op)?;
                apply(&mut b, &mut mb, op)?;
            }
            prop_assert_eq!(&a, &b);
        }

        /// `fraction_between` finds the shared prefix and reads the words
        /// eight bytes at a time; its answer is the byte-by-byte
        /// definition's, for keys of any length, sharing prefixes of any
        /// length (the probe of the search's estimate depends on it).
        #[test]
        fn fraction_between_matches_its_bytewise_definition(
            prefix in prop::collection::vec(0u8..3, 0..20),
            tails in prop::collection::vec(prop::collection::vec(0u8..4, 0..20), 3),
        ) {
            let bytewise = |first: &[u8], last: &[u8], key: &[u8]| -> Option<u32> {
                let shared = first
                    .iter()
                    .zip(last)
                    .position(|(a, b)| a != b)
                    .unwrap_or_else(|| first.len().min(last.len()));
                let word = |k: &[u8]| {
                    let mut b = [0u8; 8];
                    for (d, s) in b.iter_mut().zip(k.iter().skip(shared)) {
                        *d = *s;
                    }
                    u64::from_be_bytes(b)
                };
                let (f, l) = (word(first), word(last));
                if l <= f {
                    return None;
                }
                let (num, den) = (word(key).clamp(f, l) - f, l - f);
                let shift = 32u32.saturating_sub(den.leading_zeros());
                let (num, den) = (num >> shift, (den >> shift).max(1));
                Some(u32::try_from((num << 32) / den).unwrap_or(u32::MAX))
            };
            let k: Vec<Vec<u8>> = tails.iter().map(|t| [prefix.as_slice(), t].concat()).collect();
            for (a, b, c) in [(0, 1, 2), (1, 0, 2), (0, 2, 1), (2, 1, 0), (0, 0, 1)] {
                prop_assert_eq!(
                    fraction_between(&k[a], &k[b], &k[c]),
                    bytewise(&k[a], &k[b], &k[c]),
                    "{:?} {:?} {:?}", &k[a], &k[b], &k[c]
                );
            }
        }

        /// Searches of nodes large enough to be interpolated answer as a
        /// binary search does: leaves as `binary_search`, internal nodes
        /// as `partition_point`, for dense and sparse integer keys, keys
        /// sharing long prefixes, keys that are prefixes of others, and
        /// probes at, between, before and after the keys.
        #[test]
        fn interpolated_searches_match_binary_search(
            shape in 0u8..5,
            raw in prop::collection::btree_set(any::<u64>(), 1..300),
            extra in prop::collection::vec(any::<u64>(), 0..40),
            hint_seed in any::<u32>(),
        ) {
            let key = |v: u64| -> Vec<u8> {
                match shape {
                    // Consecutive integer keys (a tag, then 8 big-endian
                    // bytes, every value of a range: see below): a leaf of
                    // an ascending load, where the estimate lands on the key.
                    0 => [&[0x02][..], &(1_000 + v % 400).to_be_bytes()].concat(),
                    // Integers from a small range.
                    4 => [&[0x02][..], &(v % 5_000).to_be_bytes()].concat(),
                    // Sparse integers over the whole range.
                    1 => [&[0x02][..], &v.to_be_bytes()].concat(),
                    // A long shared prefix, then a short varying tail.
                    2 => [&b"abcdefghij"[..], &v.to_be_bytes()[..(v % 4) as usize]].concat(),
                    // Short keys of a small alphabet: many are prefixes of others.
                    _ => v.to_le_bytes()[..(v % 6) as usize].iter().map(|b| b % 3).collect(),
                }
            };
            let keys: Vec<Vec<u8>> = if shape == 0 {
                (0..raw.len() as u64).map(key).collect()
            } else {
                raw.iter()
                    .map(|&v| key(v))
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect()
            };
            let mut leaf = new_page(16384, 0);
            let mut internal = new_page(16384, 1);
            prop_assert!(insert_cell(&mut internal, 0, &encode_internal(&[0xFF; 3], 7).unwrap()).unwrap());
            for (i, k) in keys.iter().enumerate() {
                prop_assert!(insert_cell(&mut leaf, i, &encode_leaf_inline(k, b"v").unwrap()).unwrap());
                prop_assert!(insert_cell(&mut internal, i + 1, &encode_internal(k, i as u64).unwrap()).unwrap());
            }
            prop_assert_eq!(validate(&leaf), Ok(()));
            prop_assert_eq!(validate(&internal), Ok(()));
            let mut probes: Vec<Vec<u8>> = keys.clone();
            probes.extend(extra.iter().map(|&v| key(v)));
            probes.extend(keys.iter().map(|k| [k.as_slice(), &[0]].concat()));
            probes.extend(keys.iter().filter_map(|k| k.split_last().map(|(_, p)| p.to_vec())));
            probes.extend([vec![], vec![0xFF; 12]]);
            for p in &probes {
                prop_assert_eq!(
                    search_leaf(&leaf, p).unwrap(),
                    keys.binary_search(p),
                    "leaf, probe {:02x?}", p
                );
                for hint in [0, u32::MAX, hint_seed.wrapping_mul(p.len() as u32 + 1)] {
                    prop_assert_eq!(
                        search_leaf_with_hint(&leaf, p, Some(hint)).unwrap(),
                        keys.binary_search(p),
                        "leaf, probe {:02x?}, hint {}", p, hint
                    );
                }
                // A guessed slot: right, off by one, anywhere, past the end.
                let right = keys.binary_search(p).unwrap_or_else(|i| i);
                let anywhere = hint_seed as usize % (keys.len() + 2);
                for guess in [right, right + 1, right.saturating_sub(1), anywhere, usize::MAX] {
                    prop_assert_eq!(
                        search_leaf_from_guess(&leaf, p, guess).unwrap(),
                        keys.binary_search(p),
                        "leaf, probe {:02x?}, guess {}", p, guess
                    );
                }
                // Slot i + 1 of the internal node (child i) covers
                // keys[i]..keys[i + 1]; slot 0 (child 7) what is below.
                let (child, hint) = child_with_hint(&internal, p).unwrap();
                let i = keys.partition_point(|k| k <= p);
                prop_assert_eq!(child, if i == 0 { 7 } else { i as u64 - 1 });
                if i == 0 || i == keys.len() {
                    // The first and last children have a bound outside the node.
                    prop_assert_eq!(hint, None);
                } else if shape == 0 {
                    // Integer separators always tell a place: the start
                    // for a probe equal to the separator.
                    let h = hint.unwrap();
                    if keys[i - 1] == *p {
                        prop_assert_eq!(h, 0);
                    }
                }
                prop_assert_eq!(
                    search_internal(&internal, p).unwrap(),
                    keys.partition_point(|k| k <= p),
                    "internal, probe {:02x?}", p
                );
            }
        }

        /// A leaf cell read on the straight path (an inline value) is
        /// the checked read's cell, on sound pages and on pages with
        /// bytes overwritten anywhere; any other cell goes the checked
        /// way.
        #[test]
        fn inline_cell_read_is_the_checked_read(
            cells in prop::collection::vec((prop::collection::vec(any::<u8>(), 0..12), 0usize..300, any::<bool>()), 0..30),
            damage in prop::collection::vec((0usize..4096, any::<u8>()), 0..6),
        ) {
            let mut page = new_page(4096, 0);
            let mut keys: Vec<Vec<u8>> = cells.iter().map(|c| c.0.clone()).collect();
            keys.sort();
            keys.dedup();
            for (i, (k, (_, vlen, overflow))) in keys.iter().zip(&cells).enumerate() {
                let c = if *overflow {
                    encode_leaf_overflow(k, 5000, 77).unwrap()
                } else {
                    encode_leaf_inline(k, &vec![i as u8; *vlen]).unwrap()
                };
                if !insert_cell(&mut page, i, &c).unwrap() {
                    break;
                }
            }
            for &(at, b) in &damage {
                page[at] = b;
            }
            let Ok(view) = LeafView::new(&page) else {
                return Ok(());
            };
            for i in 0..view.nslots() + 2 {
                let checked = view.cell_at_offset_checked(i);
                if let Some(fast) = view.inline_cell(i) {
                    prop_assert_eq!(checked, Ok(fast), "slot {}", i);
                }
                prop_assert_eq!(view.cell_at_offset(i), view.cell_at_offset_checked(i), "slot {}", i);
            }
        }

        #[test]
        fn internal_search_matches_model(
            keys in prop::collection::btree_set(prop::collection::vec(0u8..4, 0..5), 0..40),
            probes in prop::collection::vec(prop::collection::vec(0u8..5, 0..6), 1..20),
        ) {
            let mut page = new_page(4096, 2);
            // Slot 0 is minus infinity whatever it stores: give it a large key.
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            prop_assert!(insert_cell(&mut page, 0, &encode_internal(&[9, 9, 9], 1000).unwrap()).unwrap());
            for (i, k) in keys.iter().enumerate() {
                let c = encode_internal(k, 1001 + i as u64).unwrap();
                prop_assert!(insert_cell(&mut page, i + 1, &c).unwrap());
            }
            prop_assert_eq!(validate(&page), Ok(()));
            for p in &probes {
                // Children 1.. cover [key_i, key_{i+1}); child 0 covers the rest below.
                let want = keys.partition_point(|k| k.as_slice() <= p.as_slice());
                let got = search_internal(&page, p).unwrap();
                prop_assert_eq!(got, want);
                prop_assert_eq!(child(&page, got).unwrap(), 1000 + want as u64);
            }
        }

        #[test]
        fn split_point_balances_bytes(
            sizes in prop::collection::vec((0usize..40, 0usize..1300), 2..200),
        ) {
            let mut page = new_page(4096, 0);
            let mut n = 0u32;
            for (klen, vlen) in sizes {
                // Keys: 4-byte big-endian counter, padded, so they stay sorted.
                let mut k = n.to_be_bytes().to_vec();
                k.resize(4 + klen, 0);
                let c = encode_leaf_inline(&k, &value_bytes(vlen, 7)).unwrap();
                if !insert_cell(&mut page, n as usize, &c).unwrap() {
                    break;
                }
                n += 1;
            }
            prop_assume!(n >= 2);
            let s = split_point(&page).unwrap();
            prop_assert!(s >= 1 && s < n as usize);
            let per: Vec<usize> = cells(&page).unwrap().iter().map(|c| c.len() + SLOT_SIZE).collect();
            let total: usize = per.iter().sum();
            prop_assert_eq!(total, used_bytes(&page));
            let dist = |t: usize| (2 * per[..t].iter().sum::<usize>()).abs_diff(total);
            for t in 1..n as usize {
                prop_assert!(dist(s) <= dist(t), "s={} t={}", s, t);
            }
            // The left part is within one cell of half.
            let max = per.iter().copied().max().unwrap();
            prop_assert!(dist(s) <= max);
        }

        #[test]
        fn garbage_pages_never_panic(
            mut bytes in prop::collection::vec(any::<u8>(), 4096),
            n in prop_oneof![0u16..64, any::<u16>()],
            cs in prop_oneof![0u32..4200, any::<u32>()],
            garbage in prop_oneof![0u32..4096, any::<u32>()],
            level in prop_oneof![Just(0u8), Just(1u8), any::<u8>()],
            slot_vals in prop::collection::vec(prop_oneof![3000u16..4096, any::<u16>()], 0..64),
            probe in prop::collection::vec(any::<u8>(), 0..8),
            i in 0usize..80,
        ) {
            bytes[OFF_LEVEL] = level;
            bytes[OFF_NSLOTS..OFF_NSLOTS + 2].copy_from_slice(&n.to_le_bytes());
            bytes[OFF_CELL_START..OFF_CELL_START + 4].copy_from_slice(&cs.to_le_bytes());
            bytes[OFF_GARBAGE..OFF_GARBAGE + 4].copy_from_slice(&garbage.to_le_bytes());
            for (j, v) in slot_vals.iter().enumerate() {
                bytes[slot_pos(j)..slot_pos(j) + 2].copy_from_slice(&v.to_le_bytes());
            }
            exercise(&bytes, &probe, i);
        }

        #[test]
        fn damaged_valid_pages_never_panic(
            entries in prop::collection::btree_map(
                prop::collection::vec(any::<u8>(), 0..24), 0usize..300, 1..40),
            flips in prop::collection::vec((PAGE_HEADER..4096usize, any::<u8>()), 1..6),
            probe in prop::collection::vec(any::<u8>(), 0..8),
            i in 0usize..50,
        ) {
            let mut page = new_page(4096, 0);
            for (k, vlen) in &entries {
                let c = encode_leaf_inline(k, &value_bytes(*vlen, 3)).unwrap();
                if let Ok(Err(at)) = search_leaf(&page, k) {
                    let _ = insert_cell(&mut page, at, &c).unwrap();
                }
            }
            for (j, (k, _)) in entries.iter().enumerate() {
                if j % 3 == 1 && let Ok(Ok(at)) = search_leaf(&page, k) {
                    delete_cell(&mut page, at).unwrap();
                }
            }
            for (pos, x) in flips {
                page[pos] ^= x;
            }
            exercise(&page, &probe, i);
        }
    }

    /// A leaf view reads what the free functions read, cell by cell, on
    /// any page: the same cells, keys and search results, and an error
    /// where they give one (never a panic). `prefetch` takes any slot.
    fn check_leaf_view(page: &[u8], probe: &[u8]) {
        let Ok(view) = LeafView::new(page) else {
            assert!(header(page).is_err() || level(page) != 0);
            return;
        };
        assert_eq!(view.nslots(), nslots(page));
        for j in 0..view.nslots().min(100) + 1 {
            view.prefetch(j);
            let free = cell(page, j).and_then(decode_leaf);
            assert_eq!(view.cell(j).ok(), free.ok(), "cell {j}");
            assert_eq!(view.key(j).ok(), key(page, j).ok(), "key {j}");
        }
        view.prefetch(usize::MAX);
        assert_eq!(view.search(probe).ok(), search_leaf(page, probe).ok());
    }

    /// Call every function on `page` (and on copies for mutations); none may
    /// panic. If the page validates, reads succeed and mutations keep it
    /// valid.
    fn exercise(page: &[u8], probe: &[u8], i: usize) {
        let valid = validate(page).is_ok();
        let _ = (level(page), nslots(page), left(page), right(page));
        let _ = (free_space(page), used_bytes(page), is_leaf(page));
        let n = nslots(page);
        for j in 0..n.min(100) + 1 {
            let c = cell(page, j);
            let k = key(page, j);
            if valid && j < n {
                assert!(c.is_ok() && k.is_ok());
            }
            if let Ok(c) = c {
                let _ = decode_leaf(c);
                let _ = decode_internal(c);
            }
            let _ = child(page, j);
        }
        let s = search_leaf(page, probe);
        // On a valid leaf (keys in order) both searches agree; on any
        // page the one for inserts does not panic.
        let for_insert = search_leaf_for_insert(page, probe);
        if valid && is_leaf(page) {
            assert_eq!(for_insert.ok(), s.clone().ok(), "for insert");
        }
        let via_slot = search_internal(page, probe).and_then(|i| child(page, i));
        assert_eq!(child_for(page, probe).ok(), via_slot.ok(), "child_for");
        let _ = split_point(page);
        check_leaf_view(page, probe);
        if valid {
            assert!(cells(page).is_ok() && s.is_ok());
        } else {
            let _ = cells(page);
        }

        let lvl = level(page);
        let new_cell = if lvl == 0 {
            encode_leaf_inline(probe, &[1, 2, 3]).unwrap()
        } else {
            encode_internal(probe, 5).unwrap()
        };
        let at = match s {
            Ok(Err(at)) => at,
            _ => i,
        };
        type Mutation = Box<dyn Fn(&mut [u8]) -> bool>;
        let mut muts: Vec<(&str, Mutation)> = Vec::new();
        let c1 = new_cell.clone();
        muts.push(("insert", Box::new(move |p| insert_cell(p, at, &c1).is_ok())));
        muts.push(("delete", Box::new(move |p| delete_cell(p, i).is_ok())));
        muts.push(("truncate", Box::new(move |p| truncate(p, i).is_ok())));
        muts.push(("compact", Box::new(|p| compact(p).is_ok())));
        muts.push(("set_child", Box::new(move |p| set_child(p, i, 9).is_ok())));
        muts.push((
            "replace",
            Box::new(move |p| {
                // Keep the key so order is preserved.
                let Ok(k) = key(p, i).map(<[u8]>::to_vec) else {
                    return replace_cell(p, i, &[0; 7]).is_ok();
                };
                let c = if level(p) == 0 {
                    encode_leaf_inline(&k, &[7; 40]).unwrap()
                } else {
                    encode_internal(&k, 8).unwrap()
                };
                replace_cell(p, i, &c).is_ok()
            }),
        ));
        for (name, f) in &muts {
            let mut copy = page.to_vec();
            let before = copy.clone();
            let ok = f(&mut copy);
            if !ok {
                assert_eq!(before, copy, "{name} failed but changed the page");
            }
            // An insert keeps keys in order only at the position a leaf
            // search gave.
            let keeps_order = *name != "insert" || (lvl == 0 && matches!(s, Ok(Err(_))));
            if valid && ok && keeps_order {
                assert_eq!(validate(&copy), Ok(()), "{name} broke a valid page");
            }
        }
    }

    #[test]
    fn internal_slot0_is_minus_infinity() {
        let mut p = new_page(4096, 1);
        let entries: [(&[u8], u64); 4] = [(b"zzz", 10), (b"d", 20), (b"m", 30), (b"t", 40)];
        for (i, (k, c)) in entries.iter().enumerate() {
            assert!(insert_cell(&mut p, i, &encode_internal(k, *c).unwrap()).unwrap());
        }
        validate(&p).unwrap();
        let cases: [(&[u8], usize); 10] = [
            (b"", 0),
            (b"a", 0),
            (b"c\xff", 0),
            (b"d", 1),
            (b"d\x00", 1),
            (b"m", 2),
            (b"s", 2),
            (b"t", 3),
            (b"zzz", 3),
            (b"\xff\xff", 3),
        ];
        for (k, want) in cases {
            assert_eq!(search_internal(&p, k).unwrap(), want, "key {k:?}");
        }
        assert_eq!(child(&p, 2).unwrap(), 30);
        set_child(&mut p, 2, 99).unwrap();
        assert_eq!(child(&p, 2).unwrap(), 99);
        assert_eq!(
            decode_internal(cell(&p, 2).unwrap()).unwrap(),
            (&b"m"[..], 99)
        );
        assert_eq!(key(&p, 0).unwrap(), b"zzz");

        let mut one = new_page(4096, 1);
        assert!(matches!(
            search_internal(&one, b"x"),
            Err(NodeError::Corrupt { .. })
        ));
        insert_cell(&mut one, 0, &encode_internal(b"", 7).unwrap()).unwrap();
        assert_eq!(search_internal(&one, b"").unwrap(), 0);
        assert_eq!(search_internal(&one, b"anything").unwrap(), 0);

        let leaf = new_page(4096, 0);
        assert!(matches!(
            search_internal(&leaf, b"x"),
            Err(NodeError::InvalidArgument { .. })
        ));
        assert!(matches!(
            child(&leaf, 0),
            Err(NodeError::InvalidArgument { .. })
        ));
    }

    #[test]
    fn leaf_cells_round_trip() {
        let c = encode_leaf_inline(b"key", b"value").unwrap();
        assert_eq!(c.len(), leaf_inline_size(3, 5));
        assert_eq!(
            decode_leaf(&c).unwrap(),
            LeafCell {
                key: b"key",
                value: LeafValue::Inline(b"value")
            }
        );
        let o = encode_leaf_overflow(b"k", 1 << 20, 77).unwrap();
        assert_eq!(o.len(), leaf_overflow_size(1));
        assert_eq!(
            decode_leaf(&o).unwrap(),
            LeafCell {
                key: b"k",
                value: LeafValue::Overflow {
                    len: 1 << 20,
                    first_page: 77
                }
            }
        );
        let e = encode_leaf_inline(b"", b"").unwrap();
        assert_eq!(decode_leaf(&e).unwrap().value, LeafValue::Inline(b""));
        assert!(decode_leaf(&c[..c.len() - 1]).is_err());
        let mut bad = c.clone();
        bad[2] = 2;
        assert!(decode_leaf(&bad).is_err());
        assert!(encode_leaf_inline(&vec![0; 70000], b"").is_err());
        let i = encode_internal(b"abc", 5).unwrap();
        assert_eq!(i.len(), internal_size(3));
        assert_eq!(decode_internal(&i).unwrap(), (&b"abc"[..], 5));
        assert!(decode_internal(&i[..9]).is_err());
    }

    #[test]
    fn insert_compacts_when_only_garbage_has_room() {
        let mut p = new_page(4096, 0);
        let mut n = 0;
        loop {
            let c = encode_leaf_inline(&[n as u8], &[n as u8; 293]).unwrap();
            if !insert_cell(&mut p, n, &c).unwrap() {
                break;
            }
            n += 1;
        }
        assert!(n >= 10);
        // Delete every other cell not at cell_start: garbage accumulates.
        for i in (1..n - 1).rev().step_by(2) {
            delete_cell(&mut p, i).unwrap();
        }
        validate(&p).unwrap();
        let garbage = u32::from_le_bytes(p[56..60].try_into().unwrap()) as usize;
        assert!(garbage > 0);
        let gap = free_space(&p) - garbage;
        // A cell larger than the gap but within free space.
        let big = encode_leaf_inline(&[200], &vec![1; gap + 10]).unwrap();
        assert!(big.len() + SLOT_SIZE <= free_space(&p));
        let at = search_leaf(&p, &[200]).unwrap().unwrap_err();
        assert!(insert_cell(&mut p, at, &big).unwrap());
        validate(&p).unwrap();
        assert_eq!(u32::from_le_bytes(p[56..60].try_into().unwrap()), 0);
        assert_eq!(cell(&p, at).unwrap(), big.as_slice());
    }

    #[test]
    fn delete_at_cell_start_reclaims_and_empty_resets() {
        let mut p = new_page(4096, 0);
        let a = encode_leaf_inline(b"a", b"1").unwrap();
        let b = encode_leaf_inline(b"b", b"22").unwrap();
        insert_cell(&mut p, 0, &a).unwrap();
        insert_cell(&mut p, 1, &b).unwrap();
        let full = free_space(&p);
        // b is the lowest cell: deleting it advances cell_start.
        delete_cell(&mut p, 1).unwrap();
        assert_eq!(free_space(&p), full + b.len() + SLOT_SIZE);
        assert_eq!(u32::from_le_bytes(p[56..60].try_into().unwrap()), 0);
        delete_cell(&mut p, 0).unwrap();
        let mut fresh = new_page(4096, 0);
        fresh[slot_pos(0)..4096].copy_from_slice(&p[slot_pos(0)..4096]);
        assert_eq!(p, fresh);
        validate(&p).unwrap();
    }

    #[test]
    fn bad_arguments_are_errors() {
        let mut p = new_page(4096, 0);
        let c = encode_leaf_inline(b"a", b"").unwrap();
        assert_eq!(
            insert_cell(&mut p, 1, &c),
            Err(NodeError::SlotOutOfRange {
                index: 1,
                nslots: 0
            })
        );
        assert!(matches!(cell(&p, 0), Err(NodeError::SlotOutOfRange { .. })));
        assert!(matches!(
            delete_cell(&mut p, 0),
            Err(NodeError::SlotOutOfRange { .. })
        ));
        assert!(matches!(
            truncate(&mut p, 1),
            Err(NodeError::SlotOutOfRange { .. })
        ));
        assert!(matches!(
            split_point(&p),
            Err(NodeError::InvalidArgument { .. })
        ));
        // A cell whose header disagrees with its length, or of the wrong level.
        assert!(matches!(
            insert_cell(&mut p, 0, &c[..c.len() - 1]),
            Err(NodeError::InvalidArgument { .. })
        ));
        assert!(matches!(
            insert_cell(&mut p, 0, &encode_internal(b"a", 1).unwrap()),
            Err(NodeError::InvalidArgument { .. })
        ));
        let mut short = vec![0u8; 100];
        assert!(init(&mut short, 0).is_err());
        assert!(validate(&short).is_err());
        let mut odd = vec![0u8; 5000];
        assert!(init(&mut odd, 0).is_err());
        let mut big = vec![0u8; 65536];
        init(&mut big, 0).unwrap();
        assert_eq!(free_space(&big), capacity(65536));
        validate(&big).unwrap();
        set_left(&mut big, 3).unwrap();
        set_right(&mut big, 4).unwrap();
        assert_eq!((left(&big), right(&big)), (3, 4));
        validate(&big).unwrap();
    }
}
