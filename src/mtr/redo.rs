//! Redo operations: their encoding inside an mtr record, and the one
//! function that applies them to a page, in normal operation and in
//! recovery alike.
//!
//! Encoding of one operation (little-endian):
//! `op u8 | page id u64 | body length u32 | body`. Bodies:
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
//! * RO1. [`encode`] writes exactly the body length it announces (the
//!   header's u32), and that length fits a u32: a body is at most a page.
//!   Asserted on every encode (one compare), since [`decode`] trusts it to
//!   find the next operation.
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

/// Bytes of an operation's header in a record: code, page id, body length.
pub const OP_HEADER: usize = 1 + 8 + 4;

/// Append the encoding of `op` on page `id` to `out`.
pub fn encode(out: &mut Vec<u8>, id: PageId, op: &Op<'_>) {
    let payload = op.body_len();
    // One allocation for the record instead of a doubling per push.
    out.reserve(OP_HEADER + payload);
    out.push(op.code());
    out.extend_from_slice(&id.0.to_le_bytes());
    let len_at = out.len();
    out.extend_from_slice(&[0; 4]);
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
    let body_len = out.len() - len_at - 4;
    assert!(
        body_len == payload && u32::try_from(body_len).is_ok(),
        "redo RO1: op {} announced {payload} body bytes and wrote {body_len}",
        op.code()
    );
    // In bounds: the 4 placeholder bytes were pushed at `len_at` above.
    #[allow(clippy::indexing_slicing)]
    out[len_at..len_at + 4].copy_from_slice(&(body_len as u32).to_le_bytes());
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
pub fn decode(mut rec: &[u8]) -> impl Iterator<Item = Result<(PageId, Op<'_>)>> {
    std::iter::from_fn(move || {
        if rec.is_empty() {
            return None;
        }
        let item = (|| {
            let (head, rest) = rec
                .split_first_chunk::<OP_HEADER>()
                .ok_or_else(|| malformed("truncated operation header"))?;
            let [code, ..] = *head;
            // In bounds (page P4): `head` is 13 bytes.
            let id = PageId(page::get_u64(head, 1));
            let len = page::get_u32(head, 9) as usize;
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
            rec = rest;
            Ok((id, op))
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
