//! On-disk layout of the redo log: file header, checkpoint slots, records.
//! Pure functions over byte slices; no I/O. The same tables are in
//! `docs/log-format.md`. Every field below was introduced in format version 1,
//! except the durability hint (bytes 22..24 of a record, version 3);
//! version 2 changed only where checkpoint slots may live (see below).
//!
//! # Files
//! The log is `file_count` files `log.000`, `log.001`, ... of `file_size`
//! bytes each, created full-size and zero-filled once, then overwritten in a
//! circle and never grown. Each starts with a header area of
//! [`HEADER_AREA`] bytes:
//!
//! | block | meaning                                                   |
//! |-------|-----------------------------------------------------------|
//! | 0     | file header ([`FileHeader`])                              |
//! | 1     | checkpoint slot A ([`CheckpointSlot`], even sequence)     |
//! | 2     | checkpoint slot B (odd sequence)                          |
//! | 3     | reserved, zero                                            |
//!
//! In format version 1 only file 0 held checkpoint slots. From version 2 a
//! slot may be written into any file (the one the log is appending to, so
//! that the sync of a commit's write also makes the slot durable), and
//! open takes the valid slot with the highest sequence number over every
//! file. A version 1 log is upgraded when it is opened for writing: every
//! file header is rewritten with version 2 and synced before any slot is
//! written outside file 0, so a build that reads only version 1 refuses
//! the log instead of missing its newest checkpoint.
//!
//! Log data fills the rest. LSNs are byte positions in one endless stream;
//! with `cap = file_size - HEADER_AREA`, byte `lsn` lives in file
//! `(lsn / cap) % file_count` at offset `HEADER_AREA + lsn % cap`. Records
//! cross block and file boundaries freely.
//!
//! # Records
//! Records start at 8-byte-aligned LSNs and are padded with zeros to a
//! multiple of 8 bytes:
//!
//! | offset | size | field                                               |
//! |--------|------|-----------------------------------------------------|
//! | 0      | 8    | LSN of this record (u64 LE)                         |
//! | 8      | 4    | CRC-32C of bytes 12..24, the payload, then the LSN  |
//! | 12     | 4    | payload length in bytes (<= [`MAX_FRAGMENT_PAYLOAD`]) |
//! | 16     | 4    | epoch: the open generation that wrote the record    |
//! | 20     | 1    | fragment kind ([`FragmentKind`])                    |
//! | 21     | 1    | record type, chosen by the caller                   |
//! | 22     | 2    | durability hint ([`durability_hint`]; version 3, zero before) |
//! | 24     | len  | payload                                             |
//!
//! A logical record larger than one fragment is a `First`, any number of
//! `Middle`s and a `Last`, at consecutive LSNs.
//!
//! There are no 4 KiB block headers. Every record checks itself (CRC and its
//! own LSN, which also rejects stale records left from the previous lap of
//! the circle), so a block header would add bytes and a sequence/LSN
//! translation (as InnoDB's 512-byte block framing does) without detecting
//! anything more; MariaDB dropped its block headers for the same reason.
//! The epoch rejects the one case the LSN cannot: a record that a crash
//! left beyond the recovered end, from before a reopen, whose position a
//! later generation happens to reach again (see `recovery.rs`).
//!
//! The CRC covers the LSN last, so the expensive part (header fields and
//! payload) is computed before the LSN is reserved and the LSN is folded in
//! after, for the cost of 8 more bytes. The durability hint depends on the
//! LSN too, so it is folded in last (after the LSN, and only when it is
//! nonzero, which keeps the CRC of a version 1 or 2 record unchanged); in
//! the part computed first, its two bytes count as zero.
//!
//! # The durability hint: a torn tail and damage told apart
//! A record's hint says that every byte of the log below a point was
//! durable (covered by a completed sync) when the record was appended. The
//! point is at or below the end of a complete durable record, never inside
//! a record past it: a fragment of a record still being appended may be
//! durable, but recovery drops a record it cannot complete and the next
//! generation rewrites it, so no claim reaches into one (`recovery.rs`,
//! recovery I1). It
//! encodes the distance back from the record's own LSN in 14 bits with a
//! 2-bit scale, rounded up so the claim never passes what was durable:
//! `0` claims nothing (a version 1 or 2 record, or the durable end was
//! more than [`HINT_REACH`] bytes back); otherwise bits 14..16 are the
//! scale `s` (0 to 2) and bits 0..14 are `m + 1`, claiming
//! `lsn - m * (8 << 6s)`: exact to 8 bytes within 128 KiB, to 512 bytes
//! within 8 MiB, to 32 KiB beyond. A crash can only damage writes
//! that no completed sync covers, so when recovery stops at a fragment
//! that fails its checks and some valid fragment after it claims a point
//! beyond the stop, the stop is damage to durable data (acknowledged
//! commits follow), not the torn end of a crash: open fails instead of
//! dropping them (`recovery.rs`).

use crate::Lsn;

/// I/O block size: every log write is whole blocks at block-aligned offsets.
pub const BLOCK: u64 = 4096;
/// Bytes at the start of every log file before log data.
pub const HEADER_AREA: u64 = 4 * BLOCK;
/// Bytes of a record header.
pub const RECORD_HEADER: usize = 24;
/// Largest payload of one fragment the format allows.
pub const MAX_FRAGMENT_PAYLOAD: u32 = 1 << 20;
/// Current format version: what this build writes. Version 3 added the
/// durability hint; version 2 let checkpoint slots live in any file.
pub const FORMAT_VERSION: u32 = 3;
/// Oldest format version this build reads (and upgrades when it writes).
pub const MIN_FORMAT_VERSION: u32 = 1;
/// First LSN of a new log. Nonzero so that a zeroed word never looks like a
/// published record (see `ring.rs`).
pub const INITIAL_LSN: Lsn = Lsn(BLOCK);

/// How far back from its own LSN a record's durability hint reaches: a
/// record appended while the durable end was further back claims nothing,
/// so recovery looks this far past a failed fragment for a record whose
/// hint proves it was durable, and no further.
pub const HINT_REACH: u64 = 16 << 20;
/// Largest mantissa of a durability hint (14 bits, less the 0 that means
/// "no claim").
const HINT_MANTISSA_MAX: u64 = (1 << 14) - 2;
/// Largest scale of a durability hint: units of 8, 512 and 32 KiB bytes.
const HINT_SCALE_MAX: u16 = 2;

/// The unit of distance of hint scale `s`.
const fn hint_unit(s: u16) -> u64 {
    8 << (6 * s)
}

/// Largest LSN, and largest sequence number, a valid checkpoint slot
/// holds. 2^63 bytes of log (29 years at 10 GB/s) are never written, and
/// below it arithmetic on LSNs (adding at most a log's capacity, under
/// 2^50 bytes) cannot overflow; a slot beyond it is damage that happens
/// to pass the CRC, or a crafted file.
pub const MAX_LSN: u64 = 1 << 63;

/// Magic bytes of a log file header.
pub const FILE_MAGIC: [u8; 8] = *b"QUILLOG\0";
/// Magic bytes of a checkpoint slot.
pub const CHECKPOINT_MAGIC: [u8; 8] = *b"QLCKPT\0\0";

/// Bytes covered by the file header CRC.
const FILE_HEADER_LEN: usize = 60;
/// Bytes covered by the checkpoint CRC.
const CHECKPOINT_LEN: usize = 64;

/// CRC-32C (Castagnoli).
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(bytes)
}

/// Round `x` up to a multiple of 8.
pub const fn align8(x: u64) -> u64 {
    (x + 7) & !7
}

/// Round down to a block boundary.
pub const fn block_floor(x: u64) -> u64 {
    x & !(BLOCK - 1)
}

/// Round up to a block boundary.
pub const fn block_ceil(x: u64) -> u64 {
    (x + BLOCK - 1) & !(BLOCK - 1)
}

/// Bytes a fragment with `payload_len` payload bytes occupies in the log.
pub const fn fragment_size(payload_len: u64) -> u64 {
    align8(RECORD_HEADER as u64 + payload_len)
}

/// Bytes at the start of a file header or checkpoint slot block that hold
/// its fields (invariant F1: every offset the encoders write and the
/// decoders read lies below this; a decoder checks its input is at least
/// this long before it reads a field, so the accessors below index
/// directly, and a wrong offset is a bug that stops loudly).
const FIELDS_LEN: usize = 72;

/// `Err` unless `b` holds every field (F1).
fn check_fields(b: &[u8]) -> Result<(), DecodeError> {
    if b.len() < FIELDS_LEN {
        return Err(DecodeError::Field("block length"));
    }
    Ok(())
}

#[allow(clippy::indexing_slicing)] // F1: in bounds, checked at entry
fn get_u32(b: &[u8], at: usize) -> u32 {
    debug_assert!(at + 4 <= FIELDS_LEN, "log format F1");
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[allow(clippy::indexing_slicing)] // F1: in bounds, checked at entry
fn get_u64(b: &[u8], at: usize) -> u64 {
    debug_assert!(at + 8 <= FIELDS_LEN, "log format F1");
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[allow(clippy::indexing_slicing)] // F1: in bounds, checked at entry
fn get_u128(b: &[u8], at: usize) -> u128 {
    debug_assert!(at + 16 <= FIELDS_LEN, "log format F1");
    let mut w = [0u8; 16];
    w.copy_from_slice(&b[at..at + 16]);
    u128::from_le_bytes(w)
}

#[allow(clippy::indexing_slicing)] // F1: the encoders' blocks are BLOCK long
fn put(b: &mut [u8; BLOCK as usize], at: usize, v: &[u8]) {
    assert!(at + v.len() <= FIELDS_LEN, "log format F1");
    b[at..at + v.len()].copy_from_slice(v);
}

#[allow(clippy::indexing_slicing)] // F1: in bounds, checked at entry
fn crc_of_fields(b: &[u8], len: usize) -> u32 {
    assert!(len <= FIELDS_LEN, "log format F1");
    crc32c(&b[..len])
}

/// Why a header or slot failed to decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The magic bytes are not ours: a foreign file.
    Magic(Vec<u8>),
    /// A version this build does not read.
    Version(u32),
    /// Checksum mismatch.
    Checksum {
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// A field holds an impossible value.
    Field(&'static str),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Magic(m) => write!(f, "bad magic {m:02x?}"),
            DecodeError::Version(v) => write!(f, "unsupported version {v}"),
            DecodeError::Checksum { stored, computed } => {
                write!(
                    f,
                    "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
                )
            }
            DecodeError::Field(what) => write!(f, "impossible value in {what}"),
        }
    }
}

/// Block 0 of every log file.
///
/// | offset | size | field                                |
/// |--------|------|--------------------------------------|
/// | 0      | 8    | magic `QUILLOG\0`                    |
/// | 8      | 4    | format version                       |
/// | 12     | 4    | bytes covered by the CRC (60)        |
/// | 16     | 16   | log id, random, same in every file   |
/// | 32     | 4    | this file's index                    |
/// | 36     | 4    | number of files                      |
/// | 40     | 8    | file size in bytes                   |
/// | 48     | 4    | block size (4096)                    |
/// | 52     | 8    | creation time, Unix seconds          |
/// | 60     | 4    | CRC-32C of bytes 0..60               |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// Format version of this file ([`MIN_FORMAT_VERSION`] to
    /// [`FORMAT_VERSION`]); new files get [`FORMAT_VERSION`].
    pub version: u32,
    /// Random identity shared by all files of one log.
    pub log_id: u128,
    /// Index of this file in the circle.
    pub file_index: u32,
    /// Files in the circle.
    pub file_count: u32,
    /// Size of every file in bytes.
    pub file_size: u64,
    /// Creation time, Unix seconds.
    pub created_unix: u64,
}

impl FileHeader {
    /// Encode into a block.
    pub fn encode(&self) -> [u8; BLOCK as usize] {
        let mut b = [0u8; BLOCK as usize];
        put(&mut b, 0, &FILE_MAGIC);
        put(&mut b, 8, &self.version.to_le_bytes());
        put(&mut b, 12, &(FILE_HEADER_LEN as u32).to_le_bytes());
        put(&mut b, 16, &self.log_id.to_le_bytes());
        put(&mut b, 32, &self.file_index.to_le_bytes());
        put(&mut b, 36, &self.file_count.to_le_bytes());
        put(&mut b, 40, &self.file_size.to_le_bytes());
        put(&mut b, 48, &(BLOCK as u32).to_le_bytes());
        put(&mut b, 52, &self.created_unix.to_le_bytes());
        let crc = crc_of_fields(&b, FILE_HEADER_LEN);
        put(&mut b, FILE_HEADER_LEN, &crc.to_le_bytes());
        b
    }

    /// Decode and verify a block.
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let magic = b.get(..8).unwrap_or(b);
        if magic != FILE_MAGIC {
            return Err(DecodeError::Magic(magic.to_vec()));
        }
        check_fields(b)?;
        let version = get_u32(b, 8);
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(DecodeError::Version(version));
        }
        if get_u32(b, 12) as usize != FILE_HEADER_LEN {
            return Err(DecodeError::Field("header length"));
        }
        let stored = get_u32(b, FILE_HEADER_LEN);
        let computed = crc_of_fields(b, FILE_HEADER_LEN);
        if stored != computed {
            return Err(DecodeError::Checksum { stored, computed });
        }
        if get_u32(b, 48) as u64 != BLOCK {
            return Err(DecodeError::Field("block size"));
        }
        let h = FileHeader {
            version,
            log_id: get_u128(b, 16),
            file_index: get_u32(b, 32),
            file_count: get_u32(b, 36),
            file_size: get_u64(b, 40),
            created_unix: get_u64(b, 52),
        };
        if h.file_count == 0 || h.file_index >= h.file_count {
            return Err(DecodeError::Field("file index/count"));
        }
        if h.file_size <= HEADER_AREA || !h.file_size.is_multiple_of(BLOCK) {
            return Err(DecodeError::Field("file size"));
        }
        Ok(h)
    }
}

/// A checkpoint slot (block 1 or 2 of a file, by the parity of its sequence
/// number; the valid slot with the highest sequence number in any file
/// wins). Slots are always written with [`FORMAT_VERSION`]; version 1 slots
/// are read.
///
/// | offset | size | field                                         |
/// |--------|------|-----------------------------------------------|
/// | 0      | 8    | magic `QLCKPT\0\0`                            |
/// | 8      | 4    | format version                                |
/// | 12     | 4    | reserved, zero                                |
/// | 16     | 16   | log id                                        |
/// | 32     | 8    | sequence number                               |
/// | 40     | 8    | checkpoint LSN: recovery scans from here      |
/// | 48     | 4    | epoch: generation of the open that wrote it   |
/// | 52     | 4    | reserved, zero                                |
/// | 56     | 8    | durable LSN when written (informative)        |
/// | 64     | 4    | CRC-32C of bytes 0..64                        |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointSlot {
    /// Log identity; a slot of another log is rejected.
    pub log_id: u128,
    /// Increases by one with every slot written.
    pub seq: u64,
    /// Where recovery starts scanning.
    pub checkpoint_lsn: Lsn,
    /// Generation: bumped (and made durable) by every open before it writes.
    pub epoch: u32,
    /// Durable LSN at the time of writing.
    pub durable_lsn: Lsn,
}

impl CheckpointSlot {
    /// Encode into a block.
    pub fn encode(&self) -> [u8; BLOCK as usize] {
        let mut b = [0u8; BLOCK as usize];
        put(&mut b, 0, &CHECKPOINT_MAGIC);
        put(&mut b, 8, &FORMAT_VERSION.to_le_bytes());
        put(&mut b, 16, &self.log_id.to_le_bytes());
        put(&mut b, 32, &self.seq.to_le_bytes());
        put(&mut b, 40, &self.checkpoint_lsn.0.to_le_bytes());
        put(&mut b, 48, &self.epoch.to_le_bytes());
        put(&mut b, 56, &self.durable_lsn.0.to_le_bytes());
        let crc = crc_of_fields(&b, CHECKPOINT_LEN);
        put(&mut b, CHECKPOINT_LEN, &crc.to_le_bytes());
        b
    }

    /// Decode and verify a block.
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let magic = b.get(..8).unwrap_or(b);
        if magic != CHECKPOINT_MAGIC {
            return Err(DecodeError::Magic(magic.to_vec()));
        }
        check_fields(b)?;
        let version = get_u32(b, 8);
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(DecodeError::Version(version));
        }
        let stored = get_u32(b, CHECKPOINT_LEN);
        let computed = crc_of_fields(b, CHECKPOINT_LEN);
        if stored != computed {
            return Err(DecodeError::Checksum { stored, computed });
        }
        let s = CheckpointSlot {
            log_id: get_u128(b, 16),
            seq: get_u64(b, 32),
            checkpoint_lsn: Lsn(get_u64(b, 40)),
            epoch: get_u32(b, 48),
            durable_lsn: Lsn(get_u64(b, 56)),
        };
        if !s.checkpoint_lsn.0.is_multiple_of(8) || s.checkpoint_lsn < INITIAL_LSN {
            return Err(DecodeError::Field("checkpoint LSN"));
        }
        if s.durable_lsn < s.checkpoint_lsn || s.durable_lsn.0 > MAX_LSN {
            return Err(DecodeError::Field("durable LSN"));
        }
        if s.seq > MAX_LSN {
            return Err(DecodeError::Field("sequence number"));
        }
        Ok(s)
    }
}

/// Position of a fragment within its logical record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FragmentKind {
    /// A whole logical record.
    Full = 1,
    /// First fragment of a larger record.
    First = 2,
    /// A middle fragment.
    Middle = 3,
    /// Last fragment.
    Last = 4,
}

impl FragmentKind {
    /// Decode the kind byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            1 => Some(FragmentKind::Full),
            2 => Some(FragmentKind::First),
            3 => Some(FragmentKind::Middle),
            4 => Some(FragmentKind::Last),
            _ => None,
        }
    }
}

/// A decoded record header (the first 24 bytes of a fragment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// The fragment's LSN as stored.
    pub lsn: u64,
    /// Stored CRC.
    pub crc: u32,
    /// Payload bytes.
    pub len: u32,
    /// Generation that wrote it.
    pub epoch: u32,
    /// Fragment kind byte (validated by [`RecordHeader::kind`]).
    pub kind: u8,
    /// Caller's record type.
    pub rtype: u8,
    /// Durability hint ([`durability_hint`]); zero before version 3.
    pub hint: u16,
}

impl RecordHeader {
    /// Decode the header fields (no validation).
    pub fn decode(b: &[u8; RECORD_HEADER]) -> Self {
        RecordHeader {
            lsn: get_u64(b, 0),
            crc: get_u32(b, 8),
            len: get_u32(b, 12),
            epoch: get_u32(b, 16),
            kind: b[20],
            rtype: b[21],
            hint: u16::from_le_bytes([b[22], b[23]]),
        }
    }

    /// The fragment kind, if valid.
    pub fn kind(&self) -> Option<FragmentKind> {
        FragmentKind::from_u8(self.kind)
    }

    /// Whether the fields other than CRC and LSN are structurally possible.
    pub fn plausible(&self) -> bool {
        self.kind().is_some()
            && self.len <= MAX_FRAGMENT_PAYLOAD
            && (self.hint == 0 || self.hint >> 14 <= HINT_SCALE_MAX)
    }

    /// What the record's durability hint claims, for a record at `lsn`.
    pub fn claim(&self, lsn: u64) -> Option<u64> {
        hint_claim(lsn, self.hint)
    }

    /// Bytes this fragment occupies, padding included.
    pub fn size(&self) -> u64 {
        fragment_size(self.len as u64)
    }
}

/// The durability hint of a record at `lsn` appended when the log was
/// durable below `durable` (see the module docs): the distance back,
/// rounded up, in the smallest scale it fits; 0 (no claim) beyond
/// [`HINT_REACH`].
pub fn durability_hint(lsn: u64, durable: u64) -> u16 {
    debug_assert!(
        durable <= lsn,
        "log: a record is never durable before it is appended"
    );
    let back = lsn - durable.min(lsn);
    if back > HINT_REACH {
        return 0;
    }
    let mut s = 0;
    loop {
        let m = back.div_ceil(hint_unit(s));
        if m <= HINT_MANTISSA_MAX {
            return (s << 14) | (m as u16 + 1);
        }
        if s == HINT_SCALE_MAX {
            return 0;
        }
        s += 1;
    }
}

/// The LSN below which a record at `lsn` with hint `hint` says the log was
/// durable when it was appended, if it says anything.
pub fn hint_claim(lsn: u64, hint: u16) -> Option<u64> {
    let s = hint >> 14;
    let m = u64::from(hint & 0x3FFF).checked_sub(1)?;
    if s > HINT_SCALE_MAX {
        return None;
    }
    lsn.checked_sub(m * hint_unit(s))
}

/// Bytes 12..24 of a record header: the CRC-covered fields before the payload.
pub fn header_tail(len: u32, epoch: u32, kind: FragmentKind, rtype: u8) -> [u8; 12] {
    let mut t = [0u8; 12];
    t[..4].copy_from_slice(&len.to_le_bytes());
    t[4..8].copy_from_slice(&epoch.to_le_bytes());
    t[8] = kind as u8;
    t[9] = rtype;
    t
}

/// The LSN-independent part of a record CRC: header tail, then payload.
pub fn crc_begin(tail: &[u8; 12], payload: &[u8]) -> crc_fast::Digest {
    let mut d = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    d.update(tail);
    d.update(payload);
    d
}

/// Fold the LSN and the durability hint into a CRC begun with
/// [`crc_begin`] (whose header tail had the hint's bytes zero). A zero
/// hint is not folded in, so records without one check as before.
pub fn crc_finish(mut d: crc_fast::Digest, lsn: u64, hint: u16) -> u32 {
    let mut tail = [0u8; 10];
    let (l, h) = tail.split_at_mut(8);
    l.copy_from_slice(&lsn.to_le_bytes());
    h.copy_from_slice(&hint.to_le_bytes());
    // One update of 8 or 10 bytes (the hint only when nonzero).
    d.update(if hint == 0 { l } else { &tail });
    d.finalize() as u32
}

/// Encode a complete fragment (header, payload, zero padding) into `out`,
/// for tests and tools; the log itself writes fragments in place.
pub fn encode_fragment(
    out: &mut Vec<u8>,
    lsn: u64,
    epoch: u32,
    kind: FragmentKind,
    rtype: u8,
    payload: &[u8],
) {
    encode_fragment_hinted(out, lsn, epoch, kind, rtype, 0, payload);
}

/// [`encode_fragment`] with a durability hint.
pub fn encode_fragment_hinted(
    out: &mut Vec<u8>,
    lsn: u64,
    epoch: u32,
    kind: FragmentKind,
    rtype: u8,
    hint: u16,
    payload: &[u8],
) {
    let len = payload.len() as u32;
    let mut tail = header_tail(len, epoch, kind, rtype);
    let crc = crc_finish(crc_begin(&tail, payload), lsn, hint);
    tail[10..12].copy_from_slice(&hint.to_le_bytes());
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&tail);
    out.extend_from_slice(payload);
    let padded = fragment_size(payload.len() as u64) as usize - RECORD_HEADER - payload.len();
    out.extend(std::iter::repeat_n(0u8, padded));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn file_header_round_trip() {
        let h = FileHeader {
            version: FORMAT_VERSION,
            log_id: 0x1234_5678_9abc_def0_1122_3344_5566_7788,
            file_index: 2,
            file_count: 4,
            file_size: 1 << 20,
            created_unix: 1_700_000_000,
        };
        assert_eq!(FileHeader::decode(&h.encode()).unwrap(), h);
        // Version 1 headers are still read (and upgraded by a writer).
        let old = FileHeader { version: 1, ..h };
        assert_eq!(FileHeader::decode(&old.encode()).unwrap(), old);
    }

    #[test]
    fn checkpoint_round_trip_and_bit_flips_fail() {
        let s = CheckpointSlot {
            log_id: 7,
            seq: 9,
            checkpoint_lsn: Lsn(8192),
            epoch: 3,
            durable_lsn: Lsn(9000),
        };
        let b = s.encode();
        assert_eq!(CheckpointSlot::decode(&b).unwrap(), s);
        for i in 0..68 {
            let mut c = b;
            c[i] ^= 0x10;
            assert!(CheckpointSlot::decode(&c).is_err(), "flip at {i} accepted");
        }
    }

    /// A slot whose LSNs or sequence number lie beyond anything a log
    /// reaches is refused: recovery would add the log's capacity to its
    /// LSN, and open one to its sequence number, past `u64::MAX`.
    #[test]
    fn slots_beyond_the_lsn_range_are_rejected() {
        let ok = CheckpointSlot {
            log_id: 7,
            seq: 9,
            checkpoint_lsn: Lsn(8192),
            epoch: 3,
            durable_lsn: Lsn(9000),
        };
        let top = Lsn(u64::MAX - 7);
        for bad in [
            CheckpointSlot {
                checkpoint_lsn: top,
                durable_lsn: top,
                ..ok
            },
            CheckpointSlot {
                durable_lsn: top,
                ..ok
            },
            CheckpointSlot {
                seq: u64::MAX,
                ..ok
            },
        ] {
            assert!(CheckpointSlot::decode(&bad.encode()).is_err(), "{bad:?}");
        }
        let edge = CheckpointSlot {
            seq: MAX_LSN,
            checkpoint_lsn: Lsn(MAX_LSN),
            durable_lsn: Lsn(MAX_LSN),
            ..ok
        };
        assert_eq!(CheckpointSlot::decode(&edge.encode()), Ok(edge));
    }

    #[test]
    fn foreign_and_future_files_are_named() {
        let mut b = [0u8; 4096];
        b[..8].copy_from_slice(b"SQLite f");
        assert!(matches!(FileHeader::decode(&b), Err(DecodeError::Magic(_))));
        let h = FileHeader {
            version: FORMAT_VERSION,
            log_id: 1,
            file_index: 0,
            file_count: 1,
            file_size: 1 << 20,
            created_unix: 0,
        };
        let mut b = h.encode();
        b[8] = 99;
        assert_eq!(FileHeader::decode(&b), Err(DecodeError::Version(99)));
        b[8] = 0;
        assert_eq!(FileHeader::decode(&b), Err(DecodeError::Version(0)));
    }

    #[test]
    fn fragment_crc_covers_lsn() {
        let mut a = Vec::new();
        encode_fragment(&mut a, 4096, 1, FragmentKind::Full, 7, b"payload");
        assert_eq!(a.len() % 8, 0);
        let hdr = RecordHeader::decode(a[..24].try_into().unwrap());
        assert!(hdr.plausible());
        let tail: [u8; 12] = a[12..24].try_into().unwrap();
        let good = crc_finish(crc_begin(&tail, b"payload"), 4096, 0);
        assert_eq!(hdr.crc, good);
        assert_ne!(crc_finish(crc_begin(&tail, b"payload"), 4104, 0), good);
        assert_ne!(crc_finish(crc_begin(&tail, b"payload"), 4096, 1), good);
    }

    proptest! {
        /// A hint never claims more than was durable, gives away less than
        /// one unit of its scale (a 64th of the distance, or 8 bytes), and
        /// claims something whenever the distance is within reach.
        #[test]
        fn hints_claim_no_more_than_was_durable(lsn8 in 512u64..(1 << 40), back8 in prop_oneof![0u64..64, 0u64..(1 << 15), 0u64..(1 << 22)]) {
            let (lsn, durable) = (lsn8 * 8, (lsn8 * 8).saturating_sub(back8 * 8).max(4096));
            let hint = durability_hint(lsn, durable);
            let h = RecordHeader { hint, lsn, crc: 0, len: 0, epoch: 1, kind: 1, rtype: 0 };
            prop_assert!(h.plausible());
            match hint_claim(lsn, hint) {
                Some(c) => {
                    prop_assert!(c <= durable, "claim {} past durable {}", c, durable);
                    let slack = durable - c;
                    prop_assert!(slack < 8 || slack * 64 <= (lsn - durable).max(8) * 2, "slack {} for distance {}", slack, lsn - durable);
                }
                None => prop_assert!(lsn - durable > HINT_REACH),
            }
        }
    }

    #[test]
    fn hint_zero_claims_nothing_and_exact_distances_are_exact() {
        assert_eq!(hint_claim(12288, 0), None);
        assert_eq!(hint_claim(8200, durability_hint(8200, 8192)), Some(8192));
        assert_eq!(hint_claim(8192, durability_hint(8192, 8192)), Some(8192));
        assert_eq!(durability_hint(HINT_REACH + 8192 + 8, 8192), 0);
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = FileHeader::decode(&bytes);
            let _ = CheckpointSlot::decode(&bytes);
            let mut h = [0u8; 24];
            for (d, s) in h.iter_mut().zip(bytes.iter()) { *d = *s; }
            let _ = RecordHeader::decode(&h).plausible();
        }
    }
}
