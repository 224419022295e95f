//! Redo operations: their encoding inside an mtr record, and the one
//! function that applies them to a page, in normal operation and in
//! recovery alike.
//!
//! Encoding of one operation: `op u8 | page id | body length | body`.
//! Since tablespace format 4 the op byte has bit 7 set and the page id
//! and body length are varints (`crate::varint`): 3 to 6 bytes of header
//! for the pages and bodies of a database up to terabytes, where format 3
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
//!
//! A record is a sequence of operations; decoding stops with an error at
//! the first malformed one (the log's CRC makes that a bug, not damage).
//!
//! Invariants:
//! * RO1. [`encode`] writes exactly the body length it announces, and
//!   that length fits a u32: a body is at most a page. Asserted on every
//!   encode (one compare), since [`decode`] trusts it to find the next
//!   operation.
//! * RO3. A compact header's varints are exactly what the encoder writes
//!   (varint V1), so a record decodes only as the bytes an encoder made.
//! * RO2. [`apply`] is the only function that changes a page for a redo
//!   operation, in normal operation and recovery alike; input it cannot
//!   apply is an error (recovery reads it from the log), never a partial
//!   or skipped change.

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
        }
    }

    /// Bytes of the operation's body in a record (after the 13-byte
    /// operation header).
    pub fn body_len(&self) -> usize {
        match self {
            Op::Init(_) | Op::NodeInit(_) => 1,
            Op::Write { bytes, .. } => 4 + bytes.len(),
            Op::NodeInsert { cell, .. } | Op::NodeReplace { cell, .. } => 2 + cell.len(),
            Op::NodeDelete(_) | Op::NodeTruncate(_) => 2,
            Op::Image(body) => body.len(),
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

    proptest::proptest! {
        #[test]
        fn garbage_records_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            for (id, op) in decode(&bytes).flatten() {
                let mut page = vec![0u8; 4096];
                let _ = apply(&mut page, id, 1, &op);
            }
        }
    }
}
