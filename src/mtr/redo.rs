//! Redo operations: their encoding inside an mtr record, and the one
//! function that applies them to a page, in normal operation and in
//! recovery alike.
//!
//! Encoding of one operation: `op u8 | page id | body length | body`.
//! Since tablespace format 4 the op byte has bit 7 set and the page id
//! and body length are varints (`crate::varint`): 3 to 8 bytes of header
//! (a page id below 2^21, the first 32 GiB of 16 KiB pages, takes 3 or
//! fewer; a cell's body length 1 or 2), where format 3
//! and older wrote `page id u64 | body length u32` (13 bytes of header
//! per operation; a row insert logs two or three operations). Both are
//! read; only the compact form is written. Bodies (little-endian):
//!
//! | op | name | body |
//! | -- | ---- | ---- |
//! | 1 | `Init` | page type u8 |
//! | 2 | `Write` | offset u32, bytes |
//! | 3 | `NodeInit` | level u8 |
//! | 4 | `NodeInsert` | slot u16, cell |
//! | 5 | `NodeDelete` | slot u16 |
//! | 6 | `NodeReplace` | slot u16, cell |
//! | 7 | `NodeTruncate` | first removed slot u16 |
//! | 8 | `Image` | page bytes from the end of the header on |
//! | 9 | `NodePatch` | slot u16, then per changed range: gap varint (bytes since the previous range's end, or the cell's start), length varint, bytes |
//!
//! `NodePatch` (format 4 on) rewrites byte ranges of a cell in place, for
//! a replacement of the same length: an update logs the bytes that
//! changed (the record header's writer and undo pointer, the changed
//! columns), not the whole row. It applies to leaf cells only and never
//! changes a cell's length, its header or its key ([`apply`] checks, on
//! a copy, before changing the page: RO2).
//!
//! A record is a sequence of operations; decoding stops with an error at
//! the first malformed one (the log's CRC makes that a bug, not damage).
//!
//! Invariants:
//! * RO1. [`encode`] writes exactly the body length it announces, and
//!   that length fits a u32: a body is at most a page. Asserted on every
//!   encode (one compare), since [`decode`] trusts it to find the next
//!   operation.
//! * RO2. [`apply`] is the only function that changes a page for a redo
//!   operation, in normal operation and recovery alike; input it cannot
//!   apply is an error (recovery reads it from the log), never a partial
//!   or skipped change.
//! * RO3. A compact header's varints are exactly what the encoder writes
//!   (varint V1), and a fixed header is accepted only for the operations
//!   that existed when fixed headers were written (1 to 8), so a record
//!   decodes only as bytes some build's encoder made.

use crate::bytes::{common_prefix, common_suffix, equal_run};
use crate::page::node;
use crate::page::{self, PAGE_HEADER, PageId, PageType};
use crate::{Error, Result};

/// One logged change to one page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op<'b> {
    /// Reset the page to an empty page of this type (header only).
    Init(PageType),
    /// Overwrite bytes at an offset past the header.
    Write {
        /// Offset in the page (at least [`PAGE_HEADER`]).
        offset: u32,
        /// The new bytes.
        bytes: &'b [u8],
    },
    /// Make the page an empty B+tree node of this level.
    NodeInit(u8),
    /// Insert a cell at a slot.
    NodeInsert {
        /// Slot position.
        slot: u16,
        /// Encoded cell.
        cell: &'b [u8],
    },
    /// Delete the cell at a slot.
    NodeDelete(u16),
    /// Replace the cell at a slot.
    NodeReplace {
        /// Slot position.
        slot: u16,
        /// Encoded cell.
        cell: &'b [u8],
    },
    /// Remove every slot from this one on.
    NodeTruncate(u16),
    /// Overwrite everything after the header.
    Image(&'b [u8]),
    /// Rewrite byte ranges of the cell at a slot, keeping its length.
    NodePatch {
        /// Slot position.
        slot: u16,
        /// The ranges: per range, gap varint, length varint, bytes.
        patches: &'b [u8],
    },
}

impl Op<'_> {
    /// Whether the operation rebuilds the page without reading it, so it
    /// may start from a page that failed its checksum (mtr M3).
    pub fn initialises(&self) -> bool {
        matches!(self, Op::Init(_))
    }

    /// The operation's name, as the module's table gives it.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Init(_) => "Init",
            Op::Write { .. } => "Write",
            Op::NodeInit(_) => "NodeInit",
            Op::NodeInsert { .. } => "NodeInsert",
            Op::NodeDelete(_) => "NodeDelete",
            Op::NodeReplace { .. } => "NodeReplace",
            Op::NodeTruncate(_) => "NodeTruncate",
            Op::Image(_) => "Image",
            Op::NodePatch { .. } => "NodePatch",
        }
    }

    /// Bytes of the operation's body in a record (after the operation's
    /// header).
    pub fn body_len(&self) -> usize {
        match self {
            Op::Init(_) | Op::NodeInit(_) => 1,
            Op::Write { bytes, .. } => 4 + bytes.len(),
            Op::NodeInsert { cell, .. } | Op::NodeReplace { cell, .. } => 2 + cell.len(),
            Op::NodeDelete(_) | Op::NodeTruncate(_) => 2,
            Op::Image(body) => body.len(),
            Op::NodePatch { patches, .. } => 2 + patches.len(),
        }
    }

    fn code(&self) -> u8 {
        match self {
            Op::Init(_) => 1,
            Op::Write { .. } => 2,
            Op::NodeInit(_) => 3,
            Op::NodeInsert { .. } => 4,
            Op::NodeDelete(_) => 5,
            Op::NodeReplace { .. } => 6,
            Op::NodeTruncate(_) => 7,
            Op::Image(_) => 8,
            Op::NodePatch { .. } => 9,
        }
    }
}

/// Bytes of an operation's header in the fixed form format 3 and older
/// wrote: code, page id u64, body length u32.
pub const OP_HEADER: usize = 1 + 8 + 4;

/// Set in the op byte of an operation with a compact header.
const COMPACT: u8 = 0x80;

/// Bytes of the compact header [`encode`] writes for `op` on page `id`.
pub fn header_len(id: PageId, op: &Op<'_>) -> usize {
    1 + crate::varint::len(id.0) + crate::varint::len(op.body_len() as u64)
}

/// Append the encoding of `op` on page `id` to `out`, with a compact
/// header.
pub fn encode(out: &mut Vec<u8>, id: PageId, op: &Op<'_>) {
    let payload = op.body_len();
    // RO1: a body is at most a page, so its length fits a u32.
    assert!(
        u32::try_from(payload).is_ok(),
        "redo RO1: op {} has a body of {payload} bytes",
        op.code()
    );
    // One allocation for the record instead of a doubling per push.
    out.reserve(header_len(id, op) + payload);
    out.push(op.code() | COMPACT);
    crate::varint::put(out, id.0);
    crate::varint::put(out, payload as u64);
    let body_at = out.len();
    match op {
        Op::Init(t) => out.push(*t as u8),
        Op::Write { offset, bytes } => {
            out.extend_from_slice(&offset.to_le_bytes());
            out.extend_from_slice(bytes);
        }
        Op::NodeInit(level) => out.push(*level),
        Op::NodeInsert { slot, cell } | Op::NodeReplace { slot, cell } => {
            out.extend_from_slice(&slot.to_le_bytes());
            out.extend_from_slice(cell);
        }
        Op::NodePatch { slot, patches } => {
            out.extend_from_slice(&slot.to_le_bytes());
            out.extend_from_slice(patches);
        }
        Op::NodeDelete(slot) | Op::NodeTruncate(slot) => out.extend_from_slice(&slot.to_le_bytes()),
        Op::Image(body) => out.extend_from_slice(body),
    }
    let body_len = out.len() - body_at;
    assert!(
        body_len == payload,
        "redo RO1: op {} announced {payload} body bytes and wrote {body_len}",
        op.code()
    );
}

/// The header at the start of `rec`: op code (without [`COMPACT`]), page
/// id, body length, and the rest of the record after the header.
fn header(rec: &[u8]) -> Result<(u8, PageId, usize, &[u8])> {
    let (&code, rest) = rec
        .split_first()
        .ok_or_else(|| malformed("truncated operation header"))?;
    if code & COMPACT == 0 {
        // RO3: no build wrote a later operation with a fixed header.
        if !(1..=8).contains(&code) {
            return Err(malformed(&format!("unknown operation {code}")));
        }
        let (head, rest) = rest
            .split_first_chunk::<{ OP_HEADER - 1 }>()
            .ok_or_else(|| malformed("truncated operation header"))?;
        // In bounds (page P4): `head` is 12 bytes.
        let id = PageId(page::get_u64(head, 0));
        let len = page::get_u32(head, 8) as usize;
        return Ok((code, id, len, rest));
    }
    let varint = |b: &[u8], what: &str| {
        crate::varint::read(b).map_err(|e| malformed(&format!("{what}: {}", e.reason())))
    };
    let (id, n) = varint(rest, "page id")?;
    let rest = rest.get(n..).unwrap_or_default();
    let (len, n) = varint(rest, "body length")?;
    let rest = rest.get(n..).unwrap_or_default();
    let len = u32::try_from(len).map_err(|_| malformed("body length past a u32"))? as usize;
    Ok((code & !COMPACT, PageId(id), len, rest))
}

/// Ranges at most this far apart are logged as one: a range's gap and
/// length varints cost about as much as the bytes between them.
const MERGE_GAP: usize = 3;

/// The `NodePatch` ranges that turn cell `old` into `new`, if the two
/// have the same length and the patch is shorter than the whole cell
/// (else the caller logs `NodeReplace`).
pub fn cell_patch(old: &[u8], new: &[u8]) -> Option<Vec<u8>> {
    if old.len() != new.len() {
        return None;
    }
    // A patch is used only while shorter than the cell: it outgrows this
    // only on its last range, the one that makes it not worth using.
    let mut out = Vec::with_capacity(new.len());
    let n = new.len();
    let mut prev_end = 0usize;
    let mut i = 0usize;
    // The next differing byte, then the end of its range: a run of
    // differences that swallows gaps of fewer than `MERGE_GAP` + 1 equal
    // bytes (both searches eight bytes at a time).
    while let Some(start) = first_difference(old, new, i) {
        // The range ends where `MERGE_GAP + 1` equal bytes start, or after
        // its last difference if no such run follows.
        let end = match equal_run::<{ MERGE_GAP + 1 }>(old, new, start + 1) {
            Some(end) => end,
            None => n - common_suffix(old.get(start + 1..)?, new.get(start + 1..)?),
        };
        crate::varint::put(&mut out, (start - prev_end) as u64);
        crate::varint::put(&mut out, (end - start) as u64);
        out.extend_from_slice(new.get(start..end)?);
        if out.len() >= n {
            return None;
        }
        prev_end = end;
        i = end;
    }
    Some(out)
}

/// The first `j >= from` where `a` and `b` (of equal length) differ
/// ([`common_prefix`], eight bytes at a time: an update's cell is mostly
/// unchanged, and a byte-by-byte search cost about ten instructions a
/// byte).
fn first_difference(a: &[u8], b: &[u8], from: usize) -> Option<usize> {
    let (a, b) = (a.get(from..)?, b.get(from..)?);
    let same = common_prefix(a, b);
    (same < a.len()).then_some(from + same)
}

/// Apply `NodePatch` ranges to `cell` (a copy). Ranges must lie in the
/// cell, in order, each non-empty (what [`cell_patch`] writes).
fn apply_patches(cell: &mut [u8], mut patches: &[u8]) -> std::result::Result<(), String> {
    let mut at = 0usize;
    let read = |b: &mut &[u8], what: &str| -> std::result::Result<usize, String> {
        let (v, n) = crate::varint::read(b).map_err(|e| format!("patch {what}: {}", e.reason()))?;
        *b = b.get(n..).unwrap_or_default();
        usize::try_from(v).map_err(|_| format!("patch {what} past usize"))
    };
    while !patches.is_empty() {
        let gap = read(&mut patches, "gap")?;
        let len = read(&mut patches, "length")?;
        if len == 0 {
            return Err("empty patch range".into());
        }
        let start = at.checked_add(gap).ok_or("patch offset overflows")?;
        let end = start.checked_add(len).ok_or("patch offset overflows")?;
        let (bytes, rest) = patches
            .split_at_checked(len)
            .ok_or("patch bytes past the record's end")?;
        cell.get_mut(start..end)
            .ok_or("patch range past the cell's end")?
            .copy_from_slice(bytes);
        patches = rest;
        at = end;
    }
    Ok(())
}

fn malformed(why: &str) -> Error {
    Error::InvalidArgument {
        what: "redo record",
        reason: why.to_string(),
    }
}

fn u16_at(b: &[u8]) -> Result<(u16, &[u8])> {
    let (h, t) = b
        .split_at_checked(2)
        .ok_or_else(|| malformed("short u16"))?;
    Ok((page::get_u16(h, 0), t))
}

/// Decode the operations of one record, in order.
pub fn decode(rec: &[u8]) -> impl Iterator<Item = Result<(PageId, Op<'_>)>> {
    decode_sized(rec).map(|r| r.map(|(id, op, _)| (id, op)))
}

/// [`decode`], with the bytes each operation took in the record (header
/// and body), for tools that say where a log's bytes go.
pub fn decode_sized(mut rec: &[u8]) -> impl Iterator<Item = Result<(PageId, Op<'_>, usize)>> {
    std::iter::from_fn(move || {
        if rec.is_empty() {
            return None;
        }
        let item = (|| {
            let (code, id, len, rest) = header(rec)?;
            let (body, rest) = rest
                .split_at_checked(len)
                .ok_or_else(|| malformed("operation body past the record's end"))?;
            let op = match code {
                1 => Op::Init(
                    body.first()
                        .and_then(|&t| PageType::from_u8(t))
                        .ok_or_else(|| malformed("bad page type"))?,
                ),
                2 => {
                    let (o, bytes) = body
                        .split_at_checked(4)
                        .ok_or_else(|| malformed("short write"))?;
                    Op::Write {
                        offset: page::get_u32(o, 0),
                        bytes,
                    }
                }
                3 => Op::NodeInit(*body.first().ok_or_else(|| malformed("short node init"))?),
                4 => {
                    let (slot, cell) = u16_at(body)?;
                    Op::NodeInsert { slot, cell }
                }
                5 => Op::NodeDelete(u16_at(body)?.0),
                6 => {
                    let (slot, cell) = u16_at(body)?;
                    Op::NodeReplace { slot, cell }
                }
                7 => Op::NodeTruncate(u16_at(body)?.0),
                8 => Op::Image(body),
                9 => {
                    let (slot, patches) = u16_at(body)?;
                    Op::NodePatch { slot, patches }
                }
                other => return Err(malformed(&format!("unknown operation {other}"))),
            };
            let size = rec.len() - rest.len();
            rec = rest;
            Ok((id, op, size))
        })();
        if item.is_err() {
            rec = &[];
        }
        Some(item)
    })
}

fn node_err(id: PageId, e: node::NodeError) -> Error {
    Error::CorruptPage {
        file: std::path::PathBuf::from("(buffer pool)"),
        page: id.0,
        reason: e.to_string(),
    }
}

fn no_room(id: PageId) -> Error {
    Error::CorruptPage {
        file: std::path::PathBuf::from("(buffer pool)"),
        page: id.0,
        reason: "a logged cell does not fit the node".into(),
    }
}

/// Apply `op` to `page` (page `id` of space `space`).
pub fn apply(page: &mut [u8], id: PageId, space: u64, op: &Op<'_>) -> Result<()> {
    match op {
        Op::Init(t) => page::init(page, id, *t, space),
        Op::Write { offset, bytes } => {
            let off = *offset as usize;
            let dst = page
                .get_mut(off..off + bytes.len())
                .filter(|_| off >= PAGE_HEADER)
                .ok_or_else(|| malformed("write outside the page body"))?;
            dst.copy_from_slice(bytes);
        }
        Op::NodeInit(level) => node::init(page, *level).map_err(|e| node_err(id, e))?,
        Op::NodeInsert { slot, cell } => {
            if !node::insert_cell(page, *slot as usize, cell).map_err(|e| node_err(id, e))? {
                return Err(no_room(id));
            }
        }
        Op::NodeDelete(slot) => {
            node::delete_cell(page, *slot as usize).map_err(|e| node_err(id, e))?
        }
        Op::NodeReplace { slot, cell } => {
            if !node::replace_cell(page, *slot as usize, cell).map_err(|e| node_err(id, e))? {
                return Err(no_room(id));
            }
        }
        Op::NodeTruncate(from) => {
            node::truncate(page, *from as usize).map_err(|e| node_err(id, e))?
        }
        Op::NodePatch { slot, patches } => {
            node::patch_cell(page, *slot as usize, |cell| apply_patches(cell, patches))
                .map_err(|e| node_err(id, e))?
        }
        Op::Image(body) => {
            let dst = page
                .get_mut(PAGE_HEADER..)
                .filter(|d| d.len() == body.len())
                .ok_or_else(|| malformed("image of the wrong size"))?;
            dst.copy_from_slice(body);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        let ops = [
            Op::Init(PageType::BtreeNode),
            Op::NodeInit(2),
            Op::Write {
                offset: 60,
                bytes: b"abc",
            },
            Op::NodeInsert {
                slot: 3,
                cell: b"cell",
            },
            Op::NodeDelete(7),
            Op::NodeReplace { slot: 1, cell: b"" },
            Op::NodeTruncate(4),
            Op::Image(&[1, 2, 3]),
        ];
        let mut buf = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            encode(&mut buf, PageId(i as u64), op);
        }
        let back: Vec<_> = decode(&buf).collect::<Result<_>>().unwrap();
        assert_eq!(back.len(), ops.len());
        for (i, (id, op)) in back.iter().enumerate() {
            assert_eq!(id.0, i as u64);
            assert_eq!(op, &ops[i]);
        }
    }

    /// An operation as format 3 and older wrote it: fixed header.
    fn fixed(out: &mut Vec<u8>, id: PageId, op: &Op<'_>) {
        let mut compact = Vec::new();
        encode(&mut compact, id, op);
        let body = &compact[header_len(id, op)..];
        out.push(op.code());
        out.extend_from_slice(&id.0.to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(body);
    }

    #[test]
    fn fixed_headers_of_older_logs_still_decode_beside_compact_ones() {
        let cell = [7u8; 40];
        let ops = [
            (
                PageId(3),
                Op::NodeInsert {
                    slot: 9,
                    cell: &cell,
                },
            ),
            (PageId(1 << 40), Op::NodeDelete(2)),
            (PageId(u64::MAX), Op::Image(&[5; 300])),
        ];
        let mut rec = Vec::new();
        let mut sizes = Vec::new();
        for (i, (id, op)) in ops.iter().enumerate() {
            let before = rec.len();
            if i % 2 == 0 {
                fixed(&mut rec, *id, op);
                assert_eq!(rec.len() - before, OP_HEADER + op.body_len());
            } else {
                encode(&mut rec, *id, op);
                assert_eq!(rec.len() - before, header_len(*id, op) + op.body_len());
            }
            sizes.push(rec.len() - before);
        }
        let back: Vec<_> = decode_sized(&rec).collect::<Result<_>>().unwrap();
        for (i, (id, op, size)) in back.iter().enumerate() {
            assert_eq!((*id, op), (ops[i].0, &ops[i].1));
            assert_eq!(*size, sizes[i]);
        }
    }

    #[test]
    fn a_compact_header_is_a_few_bytes() {
        let op = Op::NodeInsert {
            slot: 9,
            cell: &[1; 100],
        };
        // Op byte, page 70,000 in 3 varint bytes, body length 102 in 1.
        assert_eq!(header_len(PageId(70_000), &op), 5);
        let mut out = Vec::new();
        encode(&mut out, PageId(70_000), &op);
        assert_eq!(out.len(), 5 + 102);
        // A non-minimal page id is refused (RO3).
        let mut bad = vec![out[0]];
        bad.extend_from_slice(&[0x80 | 5, 0x00]);
        bad.extend_from_slice(&out[4..]);
        assert!(decode(&bad).next().unwrap().is_err());
    }

    /// A leaf page holding cells `a`, `b`, `c` (keys 1, 2, 3), the middle
    /// one with `value`.
    fn leaf_page(value: &[u8]) -> Vec<u8> {
        let mut page = vec![0u8; 4096];
        page::init(&mut page, PageId(7), PageType::BtreeNode, 1);
        node::init(&mut page, 0).unwrap();
        for (i, (k, v)) in [(b"1", &b"left"[..]), (b"2", value), (b"3", b"right")]
            .iter()
            .enumerate()
        {
            let cell = node::encode_leaf_inline(&k[..], v).unwrap();
            assert!(node::insert_cell(&mut page, i, &cell).unwrap());
        }
        page
    }

    #[test]
    fn a_patch_logs_only_what_changed() {
        let old = node::encode_leaf_inline(b"k", &[0u8; 200]).unwrap();
        let mut value = vec![0u8; 200];
        value[10] = 1;
        value[100..120].fill(2);
        let new = node::encode_leaf_inline(b"k", &value).unwrap();
        let p = cell_patch(&old, &new).unwrap();
        // Two ranges: 1 byte and 20 bytes, a gap and a length varint each.
        assert_eq!(p.len(), 2 + 1 + 2 + 20);
        // A whole new value still leaves the cell's header and key out.
        let all = node::encode_leaf_inline(b"k", &[9u8; 200]).unwrap();
        assert_eq!(cell_patch(&old, &all).unwrap().len(), 3 + 200);
        // Cells of different lengths are replaced, not patched.
        assert_eq!(cell_patch(&old, &old[..old.len() - 1]), None);
    }

    #[test]
    fn a_patch_of_a_cells_header_or_key_leaves_the_page_alone() {
        let mut page = leaf_page(b"value");
        let before = page.clone();
        // Rewrite the cell's first byte (its key length).
        let patches = [0u8, 1, 0x7f];
        let op = Op::NodePatch {
            slot: 1,
            patches: &patches,
        };
        assert!(apply(&mut page, PageId(7), 1, &op).is_err());
        assert_eq!(page, before);
        // A change to the key (byte 7: after the 7-byte cell header), a
        // range past the cell's end, and an empty range.
        for patches in [&[7u8, 1, b'9'][..], &[0u8, 100, 1][..], &[0u8, 0][..]] {
            let op = Op::NodePatch { slot: 1, patches };
            assert!(apply(&mut page, PageId(7), 1, &op).is_err());
            assert_eq!(page, before);
        }
    }

    /// The byte-at-a-time `cell_patch` the word-wise one replaced: both
    /// must write the same patch.
    fn reference_patch(old: &[u8], new: &[u8]) -> Option<Vec<u8>> {
        if old.len() != new.len() {
            return None;
        }
        let mut out = Vec::new();
        let (mut prev_end, mut i, n) = (0usize, 0usize, new.len());
        while i < n {
            let Some(start) = (i..n).find(|&j| old[j] != new[j]) else {
                break;
            };
            let (mut end, mut j) = (start + 1, start + 1);
            while j < n {
                if old[j] != new[j] {
                    end = j + 1;
                } else if j - end >= MERGE_GAP {
                    break;
                }
                j += 1;
            }
            crate::varint::put(&mut out, (start - prev_end) as u64);
            crate::varint::put(&mut out, (end - start) as u64);
            out.extend_from_slice(&new[start..end]);
            if out.len() >= n {
                return None;
            }
            prev_end = end;
            i = end;
        }
        Some(out)
    }

    proptest::proptest! {
        /// The word-wise search writes the patch the byte-wise one did.
        #[test]
        fn a_patch_is_the_byte_wise_patch(
            old in proptest::collection::vec(0u8..3, 0..120),
            changes in proptest::collection::vec((0usize..120, 0u8..3), 0..30),
        ) {
            let mut new = old.clone();
            for (at, b) in changes {
                if let Some(n) = std::num::NonZeroUsize::new(new.len()) {
                    new[at % n.get()] = b;
                }
            }
            proptest::prop_assert_eq!(cell_patch(&old, &new), reference_patch(&old, &new));
        }

        /// Patching a cell gives the page a replacement gives.
        #[test]
        fn a_patch_equals_a_replacement(
            old in proptest::collection::vec(proptest::num::u8::ANY, 1..300),
            changes in proptest::collection::vec((0usize..300, proptest::num::u8::ANY), 0..20),
        ) {
            let mut value = old.clone();
            for (at, b) in changes {
                let n = value.len();
                value[at % n] = b;
            }
            let old_cell = node::encode_leaf_inline(b"2", &old).unwrap();
            let new_cell = node::encode_leaf_inline(b"2", &value).unwrap();
            let mut replaced = leaf_page(&old);
            apply(&mut replaced, PageId(7), 1, &Op::NodeReplace { slot: 1, cell: &new_cell }).unwrap();
            if let Some(patches) = cell_patch(&old_cell, &new_cell) {
                proptest::prop_assert!(patches.len() < new_cell.len());
                let mut patched = leaf_page(&old);
                let op = Op::NodePatch { slot: 1, patches: &patches };
                let mut rec = Vec::new();
                encode(&mut rec, PageId(7), &op);
                let (_, back) = decode(&rec).next().unwrap().unwrap();
                apply(&mut patched, PageId(7), 1, &back).unwrap();
                proptest::prop_assert_eq!(patched, replaced);
            }
        }

        #[test]
        fn garbage_records_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            for (id, op) in decode(&bytes).flatten() {
                let mut page = vec![0u8; 4096];
                let _ = apply(&mut page, id, 1, &op);
            }
        }
    }
}
