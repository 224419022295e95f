//! Formats the transaction layer stores in pages: the header of every
//! clustered-index record value (which transaction wrote this version and
//! where its previous version is), and undo records (what rollback and
//! MVCC reads need to rebuild the previous version).
//!
//! Clustered record value: `version u8 | flags u8 (bit 0: delete-marked)
//! | trx id u64 | roll pointer u64 | row bytes` (the row format of
//! `catalog::row`). Undo record, version 3 (written since tablespace
//! format 8): `version u8 (3) | kind u8 | undo no | table id | trx id |
//! previous trx id | previous roll pointer | indexes u8 | changed-index
//! bits | key length | key | [old version]`, every unnamed width an
//! unsigned LEB128 varint of at most 10 bytes, minimal (no trailing zero
//! groups); the old version is there exactly when the kind is `Update` or
//! `DeleteMark`: either `0 u8 | old value length | old value` (the whole
//! replaced record value, header included) or a delta (U9): `1 u8 | flags
//! u8 (bit 0: the replaced version was delete-marked) | prefix | suffix |
//! length | bytes | per set changed-index bit, in index order: key length
//! | key`. Version 2 (tablespace formats 4 to 7; still read, never
//! written) is version 3 with only the whole form and no tag: `[old value
//! length | old value]`. An insert's undo record is about 12 bytes plus
//! its key where version 1 took 55 plus its key, and an insert writes one
//! per row. Version 1 (still read, never written): `version u8 (1) | kind
//! u8 | undo no u64 | table id u64 | trx id u64 | previous trx id u64 |
//! previous roll pointer u64 | changed indexes u64 | key length u32 | key
//! | old row present u8 | [old row length u32 | old row]`. Little-endian
//! throughout.
//!
//! Invariants:
//! * U1. A roll pointer names one undo record: together with the
//!   version's writer (`trx`) it is the record's key in the undo log
//!   (`txn::undo_log`), unless a bit says it is in a segment (U6, U8);
//!   0 means "no previous version".
//! * U2. An update or delete-mark undo record holds the previous
//!   version: whole (its record value, header included), or as a delta
//!   to the version that replaced it (U9), which the reader holds when it
//!   follows that version's roll pointer. So following roll pointers
//!   from the newest version rebuilds every older version without
//!   reading anything else.
//! * U3. Decoding rejects anything the encoder cannot produce: unknown
//!   version or kind, lengths past the end, trailing bytes.
//! * U4. Key and old-value lengths fit a u32 (version 1's fields; version
//!   2 writes them as varints but keeps the bound): keys are bounded by
//!   the B+tree's key limit (BT3) and old values by its value limit (at
//!   most `u32::MAX`), so a length past it would be our bug. Asserted on
//!   encode.
//! * U5. An undo record's first byte is its version: 1, 2 or 3. A
//!   database whose undo may hold version 2 has tablespace format 4 or
//!   later, version 3 format 8 or later (a format 7 build refuses it at
//!   open as a newer format).
//!   A format 3 build refuses such a database at open, though with the
//!   wrong words: it reports the superblock as damaged (its check took
//!   any unknown version of an intact file for damage; this build says
//!   "unsupported version"). If this build crashed while migrating a
//!   format 3 database, before the new superblock reached the data file,
//!   a format 3 build finds format 3 and fails in recovery on the first
//!   compact redo operation: an error either way, never a misread record.
//! * U7. An `InsertRun` record (kind 4, versions 2 and 3, written only to
//!   insert undo segments) with sequence number `s`, table `t` and key
//!   `k` stands for every insert of its transaction into `t` with a
//!   freshly drawn automatic key whose sequence number is at least `s`
//!   and below the transaction's next undo record's: each such row
//!   carries the roll pointer `RollPtr::insert(its own number)` and has a
//!   key at or above `k` (automatic keys only grow, but for a key
//!   given back by a refused insert, table TB3, whose statement's
//!   rollback ended the run), and no record was
//!   written for it. Rollback removes the rows of `t` from `k` on whose
//!   header names the transaction with an insert pointer in that range.
//! * U6. A roll pointer with [`RollPtr::INSERT_BIT`] set names an insert
//!   undo record, or a row of an insert run (U7), in its writer's insert
//!   undo segment (`txn::undo_seg`):
//!   the version was inserted and had no previous version, so readers
//!   and purge never look the record up (it is freed when the writer
//!   ends), and rollback acts on a record only while the version still
//!   carries exactly this pointer. Sequence numbers stay below the bit.
//!   Written only since tablespace format 5 (a format 4 build refuses
//!   such a database at open).
//! * U8. A roll pointer with [`RollPtr::SEGMENT_BIT`] set (and the insert
//!   bit clear) names an update or delete-mark undo record in its
//!   writer's undo segment by place: the segment page in bits 16..62 and
//!   the offset of the record's length prefix on that page in bits
//!   0..16 (`txn::undo_seg` US7). The page is the writer's until purge
//!   frees it, so a reader that finds there a page of another owner, or
//!   no segment page at all, knows that the writer rolled the change back
//!   and restored the record first; one that finds its writer's page
//!   must find a record of that writer there. Tree pointers (neither
//!   bit) stay below both bits. Written only since tablespace format 7
//!   (a format 6 build refuses such a database at open).
//! * U9. A delta (record version 3, tablespace format 8) rebuilds the
//!   replaced row from the row of the version that replaced it (the
//!   version whose roll pointer names the record): that row's first
//!   `prefix` bytes, the delta's bytes, its last `suffix` bytes; the
//!   replaced header is `previous trx id`, `previous roll pointer` and
//!   the delta's delete flag. Rollback applies it to the record's current
//!   row, which is that version (it acts only while the header names the
//!   record); an MVCC reader to the version it just read. Purge has no
//!   newer version in hand (a newer record may be purged already), so a
//!   delta carries the replaced key of every index whose key the change
//!   changed, which is all purge needs of it. It carries nothing for an
//!   index created after it; none needs anything: an index build waits
//!   until every transaction older than its announcement has ended and
//!   no older view is left before it adds an entry of any version but a
//!   newest (`online_index` OI6, `Db::create_index`), so no index holds
//!   an entry of a version that a record older than the index replaced.
//!   A table has at most 48 secondary indexes (asserted below 56, the
//!   changed bits), so the bits name every index a delta must carry;
//!   and a delta is written only when it is shorter than the whole
//!   value, so `max_encoded_len` bounds both. A format 7 build refuses a format 8 database at open.

use crate::Result;
use crate::bytes::{common_prefix, common_suffix};
use crate::catalog::CatalogError;
use crate::varint::{len as varint_len, put as put_varint};

use super::registry::TrxId;

/// Format version of clustered record headers.
pub const UNDO_FORMAT_VERSION: u8 = 1;
/// Version of the undo records this build writes (U5).
pub const UNDO_RECORD_VERSION: u8 = 3;
/// The fixed-width undo record version, still read (U5).
const UNDO_RECORD_V1: u8 = 1;
/// The compact version that holds old values whole, still read (U5).
const UNDO_RECORD_V2: u8 = 2;
/// Version 3's tag of an old version held whole.
const OLD_WHOLE: u8 = 0;
/// Version 3's tag of an old version held as a delta (U9).
const OLD_DELTA: u8 = 1;
/// The longest varint.
const VARINT_MAX: usize = crate::varint::MAX_LEN;
/// Bytes of the clustered record header.
pub const REC_HEADER: usize = 18;
// `RecHeader::write_to` lays out version, flags and two u64s.
const _: () = assert!(REC_HEADER == 1 + 1 + 8 + 8);

/// Where an undo record lives: its sequence number within the
/// transaction that wrote the version (the record header's `trx`), so the
/// pair `(trx, roll)` is the undo record's key in the undo log. 0 is
/// "none" (U1); a transaction numbers its undo records from 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RollPtr(pub u64);

impl RollPtr {
    /// No previous version.
    pub const NONE: RollPtr = RollPtr(0);
    /// The bit that marks a version written by an insert whose undo
    /// record is in an insert undo segment (`txn::undo_seg`, format 5):
    /// the version had no previous one, so no reader follows it (U6).
    pub const INSERT_BIT: u64 = 1 << 63;

    /// The roll pointer of a version inserted with undo record `seq` in
    /// its writer's insert undo segment (U6).
    pub fn insert(seq: u64) -> RollPtr {
        debug_assert!(
            seq & Self::INSERT_BIT == 0,
            "undo U6: sequence {seq} too large"
        );
        RollPtr(seq | Self::INSERT_BIT)
    }

    /// Whether the version was written by an insert whose undo is in a
    /// segment: it has no previous version (U6).
    pub fn is_insert(self) -> bool {
        self.0 & Self::INSERT_BIT != 0
    }

    /// The undo record's (or, in a run, the row's) sequence number in its
    /// transaction, without the insert bit.
    pub fn seq(self) -> u64 {
        self.0 & !Self::INSERT_BIT
    }

    /// The bit that marks a pointer to an undo record in a segment by
    /// place (U8).
    pub const SEGMENT_BIT: u64 = 1 << 62;
    /// Bits of a segment pointer that hold the offset (U8).
    const OFFSET_BITS: u32 = 16;
    /// Largest page id a segment pointer holds (U8).
    pub const MAX_SEGMENT_PAGE: u64 = (1 << (62 - Self::OFFSET_BITS)) - 1;

    /// The roll pointer of a version whose undo record starts (its length
    /// prefix) at `offset` on segment page `page` (U8); `None` if either
    /// does not fit.
    pub fn segment(page: u64, offset: usize) -> Option<RollPtr> {
        let off = u16::try_from(offset).ok()?;
        (page <= Self::MAX_SEGMENT_PAGE)
            .then(|| RollPtr(Self::SEGMENT_BIT | page << Self::OFFSET_BITS | u64::from(off)))
    }

    /// Whether the pointer names a segment record by place (U8).
    pub fn is_segment(self) -> bool {
        self.0 & (Self::SEGMENT_BIT | Self::INSERT_BIT) == Self::SEGMENT_BIT
    }

    /// The page and offset of a segment pointer (U8).
    pub fn place(self) -> (u64, usize) {
        let bits = self.0 & !Self::SEGMENT_BIT;
        (
            bits >> Self::OFFSET_BITS,
            (bits & ((1 << Self::OFFSET_BITS) - 1)) as usize,
        )
    }
}

impl std::fmt::Display for RollPtr {
    /// What the pointer names, in words, for messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_insert() {
            write!(f, "insert {}", self.seq())
        } else if self.is_segment() {
            let (page, at) = self.place();
            write!(f, "segment page {page} offset {at}")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// The header in front of every clustered-index record value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecHeader {
    /// Transaction that wrote this version.
    pub trx: TrxId,
    /// Its undo record (the previous version), or none.
    pub roll: RollPtr,
    /// The row is deleted (awaiting purge) as of this version.
    pub deleted: bool,
}

fn malformed(offset: usize, reason: &str) -> crate::Error {
    crate::Error::Catalog(CatalogError::Malformed {
        offset,
        reason: reason.to_string(),
    })
}

impl RecHeader {
    /// `header | row` as one record value.
    pub fn encode(&self, row: &[u8]) -> Vec<u8> {
        let mut v = vec![0; REC_HEADER];
        v.extend_from_slice(row);
        self.write_to(&mut v);
        v
    }

    /// Write the header over the first [`REC_HEADER`] bytes of `record`
    /// (room left in front of the row, so that a record is built in one
    /// buffer). `record` must be at least that long.
    pub fn write_to(&self, record: &mut [u8]) {
        let Some(h) = record.first_chunk_mut::<REC_HEADER>() else {
            debug_assert!(
                false,
                "RecHeader::write_to: a record shorter than its header"
            );
            return;
        };
        let [version, flags, rest @ ..] = h;
        *version = UNDO_FORMAT_VERSION;
        *flags = u8::from(self.deleted);
        let (trx, roll) = rest.split_at_mut(8);
        trx.copy_from_slice(&self.trx.to_le_bytes());
        roll.copy_from_slice(&self.roll.0.to_le_bytes());
    }

    /// Split a record value into its header and row bytes.
    #[inline]
    pub fn decode(value: &[u8]) -> Result<(RecHeader, &[u8])> {
        let (h, row) = value
            .split_first_chunk::<REC_HEADER>()
            .ok_or_else(|| malformed(0, "record shorter than its header"))?;
        let [version, flags, ..] = *h;
        if version != UNDO_FORMAT_VERSION {
            return Err(malformed(0, "unknown record header version"));
        }
        if flags > 1 {
            return Err(malformed(1, "unknown record flags"));
        }
        Ok((
            RecHeader {
                deleted: flags == 1,
                // In bounds (page P4): `h` is REC_HEADER = 18 bytes.
                trx: crate::page::get_u64(h, 2),
                roll: RollPtr(crate::page::get_u64(h, 10)),
            },
            row,
        ))
    }
}

/// What an undo record undoes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum UndoKind {
    /// A fresh insert: rollback removes the record.
    Insert = 1,
    /// An update in place: rollback restores the old value.
    Update = 2,
    /// A delete (the record is delete-marked): rollback clears the mark.
    DeleteMark = 3,
    /// A run of inserts with automatic keys (U7), only ever in an insert
    /// undo segment: rollback removes the transaction's rows of the run.
    InsertRun = 4,
}

impl UndoKind {
    /// Whether a record of this kind holds the previous value (U2): not
    /// for the inserts, whose rows had none.
    pub fn has_old_value(self) -> bool {
        !matches!(self, UndoKind::Insert | UndoKind::InsertRun)
    }
}

/// The bits of [`UndoRecord::changed`] that name indexes (the top byte
/// holds the index count).
const CHANGED_BITS: u64 = (1 << 56) - 1;

// U9: the changed bits name every index a table may have, so a delta
// carries the replaced key of every index whose key changed.
const _: () = assert!(crate::catalog::schema::MAX_INDEXES <= 56);

/// The version an update or delete-mark replaced, as its undo record
/// holds it (U2, U9).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OldVersion {
    /// The whole replaced record value, header included: what record
    /// versions 1 and 2 hold, and version 3 where a delta would not be
    /// shorter.
    Whole(Vec<u8>),
    /// The replaced version as a change to the version that replaced it,
    /// with the replaced keys of the indexes whose key it changed (U9).
    Delta(RowDelta),
}

/// A replaced version told apart from the version that replaced it (its
/// "newer" version): the row bytes both share at the start and at the
/// end, the replaced version's bytes between them, and what purge needs
/// without the newer version: the replaced keys (U9).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowDelta {
    /// The replaced version was delete-marked (an insert over a
    /// delete-marked row replaces it).
    pub deleted: bool,
    /// Row bytes at the start that the two versions share.
    pub prefix: usize,
    /// Row bytes at the end that the two versions share.
    pub suffix: usize,
    /// The replaced version's row bytes between `prefix` and `suffix`.
    pub middle: Vec<u8>,
    /// The replaced version's key in each secondary index whose key the
    /// change changed (a bit of [`UndoRecord::changed`]), in index order.
    pub keys: Vec<Vec<u8>>,
}

impl RowDelta {
    /// The delta that rebuilds `old` (a row, delete-marked or not) from
    /// `new`, carrying `keys`.
    pub fn between(old: &[u8], new: &[u8], deleted: bool, keys: Vec<Vec<u8>>) -> RowDelta {
        let prefix = common_prefix(old, new);
        // Counted over what follows the prefix, so the two never overlap
        // and bytes the prefix took are not compared again.
        let suffix = common_suffix(
            old.get(prefix..).unwrap_or_default(),
            new.get(prefix..).unwrap_or_default(),
        );
        RowDelta {
            deleted,
            prefix,
            suffix,
            middle: old
                .get(prefix..old.len() - suffix)
                .unwrap_or_default()
                .to_vec(),
            keys,
        }
    }

    /// The replaced row rebuilt from `newer`, the row of the version that
    /// replaced it; `None` if `newer` is shorter than the shared bytes (so
    /// it is not that version: damage).
    pub fn apply(&self, newer: &[u8]) -> Option<Vec<u8>> {
        let tail = newer.len().checked_sub(self.suffix)?;
        let head = newer.get(..self.prefix)?;
        if self.prefix > tail {
            return None;
        }
        let mut row = Vec::with_capacity(self.prefix + self.middle.len() + self.suffix);
        row.extend_from_slice(head);
        row.extend_from_slice(&self.middle);
        row.extend_from_slice(newer.get(tail..)?);
        Some(row)
    }

    /// Bytes of its encoding in a version 3 record (after the tag).
    fn encoded_len(&self) -> usize {
        1 + varint_len(self.prefix as u64)
            + varint_len(self.suffix as u64)
            + varint_len(self.middle.len() as u64)
            + self.middle.len()
            + self
                .keys
                .iter()
                .map(|k| varint_len(k.len() as u64) + k.len())
                .sum::<usize>()
    }
}

impl OldVersion {
    /// The old version to record for a change that replaces the version
    /// `h`, `old` (its header and row) by a version of row `new`: the
    /// delta when it is shorter than the whole value (U9). `keys` are the
    /// replaced keys of the indexes whose key changed, in index order.
    pub fn for_change(h: &RecHeader, old: &[u8], new: &[u8], keys: Vec<Vec<u8>>) -> OldVersion {
        let d = RowDelta::between(old, new, h.deleted, keys);
        let whole = REC_HEADER + old.len();
        if d.encoded_len() < varint_len(whole as u64) + whole {
            OldVersion::Delta(d)
        } else {
            OldVersion::Whole(h.encode(old))
        }
    }

    /// Bytes of its encoding in a version 3 record (tag included).
    fn encoded_len(&self) -> usize {
        1 + match self {
            OldVersion::Whole(v) => varint_len(v.len() as u64) + v.len(),
            OldVersion::Delta(d) => d.encoded_len(),
        }
    }
}

/// One undo record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndoRecord {
    /// Kind.
    pub kind: UndoKind,
    /// Sequence number within the transaction (rollback goes backwards).
    pub undo_no: u64,
    /// Table (clustered index) the record belongs to.
    pub table: u64,
    /// Transaction that made the change.
    pub trx: TrxId,
    /// Writer of the version this change replaced (0 for an insert).
    pub prev_trx: TrxId,
    /// That version's own undo (its roll pointer), for older versions.
    pub prev_roll: RollPtr,
    /// The record's key (encoded primary key).
    pub key: Vec<u8>,
    /// The version the change replaced (U2); `None` for inserts.
    pub old: Option<OldVersion>,
    /// Bit `i` (`i < 56`) set: the change gave secondary index `i` a
    /// different key (so purge needs to look at that index's old entry).
    /// Bits 56..64 hold how many secondary indexes the table had when the
    /// change was made: indexes added later are always looked at. See
    /// [`UndoRecord::changed_mask`] and [`UndoRecord::may_have_changed`].
    pub changed: u64,
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let s = self
            .b
            .get(self.at..self.at.saturating_add(n))
            .ok_or_else(|| malformed(self.at, what))?;
        self.at += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let a = *self
            .b
            .get(self.at..)
            .and_then(<[u8]>::first_chunk::<N>)
            .ok_or_else(|| malformed(self.at, what))?;
        self.at += N;
        Ok(a)
    }
    fn u8(&mut self, what: &str) -> Result<u8> {
        self.array(what).map(u8::from_le_bytes)
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }
    /// A varint ([`crate::varint`] V1: exactly what the encoder writes).
    fn varint(&mut self, what: &str) -> Result<u64> {
        let rest = self.b.get(self.at..).unwrap_or_default();
        let (v, n) = crate::varint::read(rest)
            .map_err(|e| malformed(self.at, &format!("{what}: {}", e.reason())))?;
        self.at += n;
        Ok(v)
    }
    /// A varint length, as a usize.
    fn len(&mut self, what: &str) -> Result<usize> {
        let at = self.at;
        usize::try_from(self.varint(what)?).map_err(|_| malformed(at, what))
    }
    /// A varint length the encoder writes as a u32 (U4).
    fn len_u32(&mut self, what: &str) -> Result<usize> {
        let at = self.at;
        let n = self.varint(what)?;
        u32::try_from(n)
            .map(|n| n as usize)
            .map_err(|_| malformed(at, &format!("{what} past u32")))
    }
}

/// A length for a u32 field of the encoding (U4).
#[track_caller]
fn len_u32(len: usize, what: &str) -> u32 {
    match u32::try_from(len) {
        Ok(n) => n,
        #[allow(clippy::panic)] // U4: the B+tree limits keep it in range
        Err(_) => panic!("undo U4: {what} of {len} bytes does not fit its u32 length"),
    }
}

impl UndoRecord {
    /// The `changed` field for a table with `indexes` secondary indexes
    /// whose keys in `changed` differ between the old and new version.
    pub fn changed_mask(indexes: usize, changed: impl IntoIterator<Item = usize>) -> u64 {
        let mut m = (indexes.min(255) as u64) << 56;
        for i in changed {
            if i < 56 {
                m |= 1 << i;
            }
        }
        m
    }

    /// Whether the change may have given secondary index `i` a different
    /// key (true for indexes created after the change).
    pub fn may_have_changed(&self, i: usize) -> bool {
        let known = (self.changed >> 56) as usize;
        i >= known || i >= 56 || self.changed & (1 << i) != 0
    }

    /// Whether the record can tell purge secondary index `i`'s key in the
    /// version it replaced: always for a whole old value; for a delta only
    /// for the indexes the table had when the change was made (U9).
    pub fn describes_index(&self, i: usize) -> bool {
        match &self.old {
            Some(OldVersion::Delta(_)) => i < (self.changed >> 56) as usize,
            _ => true,
        }
    }

    /// The replaced version's key in secondary index `i`, if the record
    /// is a delta and the change changed that key (U9).
    pub fn delta_key(&self, i: usize) -> Option<&[u8]> {
        let Some(OldVersion::Delta(d)) = &self.old else {
            return None;
        };
        if i >= 56 || self.changed & (1 << i) == 0 || !self.describes_index(i) {
            return None;
        }
        let rank = (self.changed & CHANGED_BITS & ((1 << i) - 1)).count_ones() as usize;
        d.keys.get(rank).map(Vec::as_slice)
    }

    /// The secondary index positions and replaced keys a delta carries.
    pub fn delta_keys(&self) -> impl Iterator<Item = (usize, &[u8])> {
        (0..56usize).filter_map(move |i| self.delta_key(i).map(|k| (i, k)))
    }

    /// The version this change replaced, rebuilt from `newer`, the row of
    /// the version it wrote (which a delta needs; a whole old value
    /// ignores it): its header and row. `None` for an insert.
    pub fn previous_version(&self, newer: &[u8]) -> Result<Option<(RecHeader, Vec<u8>)>> {
        match &self.old {
            None => Ok(None),
            Some(OldVersion::Whole(v)) => {
                let (h, row) = RecHeader::decode(v)?;
                Ok(Some((h, row.to_vec())))
            }
            Some(OldVersion::Delta(d)) => {
                let row = d.apply(newer).ok_or_else(|| {
                    malformed(
                        0,
                        "an undo delta shares more bytes than the version it is applied to has",
                    )
                })?;
                let h = RecHeader {
                    trx: self.prev_trx,
                    roll: self.prev_roll,
                    deleted: d.deleted,
                };
                Ok(Some((h, row)))
            }
        }
    }

    /// The most bytes [`UndoRecord::encode`] writes for a record with a
    /// `key_len`-byte key and, unless it is an insert's, an old version of
    /// `old_len` bytes (header included) written whole or as a shorter
    /// delta (every varint counted at its longest).
    pub const fn max_encoded_len(key_len: usize, old_len: Option<usize>) -> usize {
        // version, kind, indexes; five u64 varints, the changed bits and
        // the key length.
        let fixed = 3 + 7 * VARINT_MAX;
        match old_len {
            None => fixed + key_len,
            // The tag, the length and the value.
            Some(n) => fixed + key_len + 1 + VARINT_MAX + n,
        }
    }

    /// The record's bytes, in version [`UNDO_RECORD_VERSION`].
    pub fn encode(&self) -> Vec<u8> {
        let old_len = self.old.as_ref().map_or(0, OldVersion::encoded_len);
        let mut v = Vec::with_capacity(
            3 + varint_len(self.undo_no)
                + varint_len(self.table)
                + varint_len(self.trx)
                + varint_len(self.prev_trx)
                + varint_len(self.prev_roll.0)
                + VARINT_MAX
                + varint_len(self.key.len() as u64)
                + self.key.len()
                + old_len,
        );
        v.push(UNDO_RECORD_VERSION);
        v.push(self.kind as u8);
        for x in [
            self.undo_no,
            self.table,
            self.trx,
            self.prev_trx,
            self.prev_roll.0,
        ] {
            put_varint(&mut v, x);
        }
        v.push((self.changed >> 56) as u8);
        put_varint(&mut v, self.changed & CHANGED_BITS);
        // U4 for a varint: a length the B+tree accepts fits a u32.
        put_varint(&mut v, u64::from(len_u32(self.key.len(), "key")));
        v.extend_from_slice(&self.key);
        // The kind says whether an old version follows; an insert's record
        // carrying one (or another kind's lacking one) is our bug.
        assert_eq!(
            !self.kind.has_old_value(),
            self.old.is_none(),
            "undo U2: a {:?} record with old version {:?}",
            self.kind,
            self.old.as_ref().map(OldVersion::encoded_len)
        );
        match &self.old {
            None => {}
            Some(OldVersion::Whole(old)) => {
                v.push(OLD_WHOLE);
                put_varint(&mut v, u64::from(len_u32(old.len(), "old value")));
                v.extend_from_slice(old);
            }
            Some(OldVersion::Delta(d)) => {
                // U9: the keys are those `changed` names, one each.
                assert_eq!(
                    d.keys.len(),
                    (self.changed & CHANGED_BITS).count_ones() as usize,
                    "undo U9: a delta carries one key per changed index"
                );
                v.push(OLD_DELTA);
                v.push(u8::from(d.deleted));
                put_varint(&mut v, u64::from(len_u32(d.prefix, "delta prefix")));
                put_varint(&mut v, u64::from(len_u32(d.suffix, "delta suffix")));
                put_varint(&mut v, u64::from(len_u32(d.middle.len(), "delta bytes")));
                v.extend_from_slice(&d.middle);
                for k in &d.keys {
                    put_varint(&mut v, u64::from(len_u32(k.len(), "replaced key")));
                    v.extend_from_slice(k);
                }
            }
        }
        debug_assert!(
            v.len() <= Self::max_encoded_len(self.key.len(), None) + old_len,
            "max_encoded_len bounds encode"
        );
        v
    }

    /// Decode one record of any version (U3, U5).
    pub fn decode(bytes: &[u8]) -> Result<UndoRecord> {
        let mut r = Reader { b: bytes, at: 0 };
        let version = r.u8("version")?;
        if !matches!(
            version,
            UNDO_RECORD_V1 | UNDO_RECORD_V2 | UNDO_RECORD_VERSION
        ) {
            return Err(malformed(0, "unknown undo record version"));
        }
        let kind = match r.u8("kind")? {
            1 => UndoKind::Insert,
            2 => UndoKind::Update,
            3 => UndoKind::DeleteMark,
            // Runs exist since version 2 (U7).
            4 if version != UNDO_RECORD_V1 => UndoKind::InsertRun,
            _ => return Err(malformed(1, "unknown undo record kind")),
        };
        let rec = if version == UNDO_RECORD_V1 {
            Self::decode_v1(&mut r, kind)?
        } else {
            let undo_no = r.varint("undo number")?;
            let table = r.varint("table")?;
            let trx = r.varint("trx")?;
            let prev_trx = r.varint("previous trx")?;
            let prev_roll = RollPtr(r.varint("previous roll pointer")?);
            let indexes = r.u8("index count")?;
            let at = r.at;
            let bits = r.varint("changed indexes")?;
            if bits & !CHANGED_BITS != 0 {
                return Err(malformed(at, "changed-index bits past bit 55"));
            }
            let klen = r.len("key length")?;
            let key = r.take(klen, "key")?.to_vec();
            let old = if !kind.has_old_value() {
                None
            } else if version == UNDO_RECORD_V2 {
                let n = r.len("old value length")?;
                Some(OldVersion::Whole(r.take(n, "old value")?.to_vec()))
            } else {
                Some(Self::decode_old(&mut r, bits)?)
            };
            UndoRecord {
                kind,
                undo_no,
                table,
                trx,
                prev_trx,
                prev_roll,
                key,
                old,
                changed: (u64::from(indexes) << 56) | bits,
            }
        };
        if r.at != bytes.len() {
            return Err(malformed(r.at, "trailing bytes after the undo record"));
        }
        Ok(rec)
    }

    /// A version 3 record's old version: its tag, then a whole value or a
    /// delta with one key per bit of `bits` (U9).
    fn decode_old(r: &mut Reader<'_>, bits: u64) -> Result<OldVersion> {
        let at = r.at;
        match r.u8("old version tag")? {
            OLD_WHOLE => {
                let n = r.len("old value length")?;
                Ok(OldVersion::Whole(r.take(n, "old value")?.to_vec()))
            }
            OLD_DELTA => {
                let at = r.at;
                let deleted = match r.u8("delta flags")? {
                    0 => false,
                    1 => true,
                    _ => return Err(malformed(at, "unknown delta flags")),
                };
                // U4: the encoder writes each of these as a u32.
                let prefix = r.len_u32("delta prefix")?;
                let suffix = r.len_u32("delta suffix")?;
                let n = r.len_u32("delta length")?;
                let middle = r.take(n, "delta bytes")?.to_vec();
                let keys = (0..bits.count_ones())
                    .map(|_| {
                        let n = r.len_u32("replaced key length")?;
                        Ok(r.take(n, "replaced key")?.to_vec())
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(OldVersion::Delta(RowDelta {
                    deleted,
                    prefix,
                    suffix,
                    middle,
                    keys,
                }))
            }
            _ => Err(malformed(at, "unknown old version tag")),
        }
    }

    /// The record as version 1 wrote it, field by field: what older
    /// databases hold, for the tests and fuzz seeds that check it is
    /// still read (U5). This build never writes it.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn encode_v1(&self) -> Vec<u8> {
        let mut v = vec![UNDO_RECORD_V1, self.kind as u8];
        for x in [
            self.undo_no,
            self.table,
            self.trx,
            self.prev_trx,
            self.prev_roll.0,
            self.changed,
        ] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&len_u32(self.key.len(), "key").to_le_bytes());
        v.extend_from_slice(&self.key);
        match &self.old {
            None => v.push(0),
            // Version 1 had no deltas; the tests and seeds never ask.
            Some(OldVersion::Delta(_)) => return self.encode(),
            Some(OldVersion::Whole(old)) => {
                v.push(1);
                v.extend_from_slice(&len_u32(old.len(), "old value").to_le_bytes());
                v.extend_from_slice(old);
            }
        }
        v
    }

    /// The rest of a version 1 record, after its version and kind.
    fn decode_v1(r: &mut Reader<'_>, kind: UndoKind) -> Result<UndoRecord> {
        let undo_no = r.u64("undo number")?;
        let table = r.u64("table")?;
        let trx = r.u64("trx")?;
        let prev_trx = r.u64("previous trx")?;
        let prev_roll = RollPtr(r.u64("previous roll pointer")?);
        let changed = r.u64("changed indexes")?;
        let klen = r.u32("key length")? as usize;
        let key = r.take(klen, "key")?.to_vec();
        let old = match r.u8("old value flag")? {
            0 => None,
            1 => {
                let n = r.u32("old value length")? as usize;
                Some(OldVersion::Whole(r.take(n, "old value")?.to_vec()))
            }
            _ => return Err(malformed(r.at - 1, "bad old value flag")),
        };
        if (kind == UndoKind::Insert) != old.is_none() {
            return Err(malformed(
                1,
                "insert undo carries an old value, or another kind lacks one",
            ));
        }
        Ok(UndoRecord {
            kind,
            undo_no,
            table,
            trx,
            prev_trx,
            prev_roll,
            key,
            old,
            changed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A record header's bytes (format version, flags, trx and roll
    /// pointer little-endian), written in front of a row and read back;
    /// a record shorter than its header is refused.
    #[test]
    fn record_header_golden_bytes() {
        let hdr = RecHeader {
            trx: 0x0102_0304_0506_0708,
            roll: RollPtr(0x1112_1314_1516_1718),
            deleted: true,
        };
        let rec = hdr.encode(b"row");
        let mut want = vec![UNDO_FORMAT_VERSION, 1];
        want.extend_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        want.extend_from_slice(&0x1112_1314_1516_1718u64.to_le_bytes());
        want.extend_from_slice(b"row");
        assert_eq!(rec, want);
        let mut roomy = vec![0xEE; REC_HEADER + 3];
        roomy[REC_HEADER..].copy_from_slice(b"row");
        hdr.write_to(&mut roomy);
        assert_eq!(roomy, want);
        assert_eq!(RecHeader::decode(&rec).unwrap(), (hdr, &b"row"[..]));
        assert!(RecHeader::decode(&rec[..REC_HEADER - 1]).is_err());
    }

    /// An insert run's record (U7) round-trips in version 2, carries no
    /// old value, and does not exist in version 1.
    #[test]
    fn insert_run_records_are_version_2_only() {
        let rec = UndoRecord {
            kind: UndoKind::InsertRun,
            undo_no: 7,
            table: 3,
            trx: 99,
            prev_trx: 0,
            prev_roll: RollPtr::NONE,
            key: vec![1, 2, 3],
            old: None,
            changed: 0,
        };
        assert_eq!(UndoRecord::decode(&rec.encode()).unwrap(), rec);
        assert!(!UndoKind::InsertRun.has_old_value());
        let mut v1 = rec.encode_v1();
        assert!(UndoRecord::decode(&v1).is_err());
        v1[1] = 1;
        assert!(UndoRecord::decode(&v1).is_ok());
    }

    /// Records of every kind; `whole` keeps old versions whole (what
    /// version 1 can hold).
    fn record_with(whole: bool) -> impl Strategy<Value = UndoRecord> {
        (
            1u8..4,
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::collection::vec(any::<u8>(), 0..100),
            (any::<bool>(), 0usize..300, 0usize..300, any::<u16>()),
        )
            .prop_map(
                move |(k, undo_no, table, trx, prev_trx, roll, key, old, (d, pre, suf, bits))| {
                    let kind = match k {
                        1 => UndoKind::Insert,
                        2 => UndoKind::Update,
                        _ => UndoKind::DeleteMark,
                    };
                    let mut changed = undo_no.rotate_left(7);
                    let old = if whole || d {
                        OldVersion::Whole(old)
                    } else {
                        changed = (changed & !CHANGED_BITS) | u64::from(bits);
                        let keys = (0..bits.count_ones())
                            .map(|i| old.iter().take(i as usize).copied().collect())
                            .collect();
                        OldVersion::Delta(RowDelta {
                            deleted: pre % 2 == 1,
                            prefix: pre,
                            suffix: suf,
                            middle: old,
                            keys,
                        })
                    };
                    UndoRecord {
                        kind,
                        undo_no,
                        table,
                        trx,
                        prev_trx,
                        prev_roll: RollPtr(roll),
                        key,
                        old: (kind != UndoKind::Insert).then_some(old),
                        changed,
                    }
                },
            )
    }

    fn record() -> impl Strategy<Value = UndoRecord> {
        record_with(false)
    }

    fn insert_undo() -> UndoRecord {
        UndoRecord {
            kind: UndoKind::Insert,
            undo_no: 57,
            table: 3,
            trx: 1_234_567,
            prev_trx: 0,
            prev_roll: RollPtr::NONE,
            key: vec![0x02; 9],
            old: None,
            changed: UndoRecord::changed_mask(3, []),
        }
    }

    #[test]
    fn an_insert_undo_record_is_small() {
        let r = insert_undo();
        let b = r.encode();
        // version, kind, undo no, table, trx (3 bytes), previous trx and
        // roll, index count, changed bits, key length: 12 bytes and the key.
        assert_eq!(b.len(), 12 + 9, "{b:02x?}");
        assert!(b.len() <= UndoRecord::max_encoded_len(9, None));
        assert_eq!(r.encode_v1().len(), 55 + 9);
    }

    /// U9: a delta names the replaced key of each index its change changed,
    /// by the index's place among the changed bits; nothing for an index
    /// the table did not have; and a newer row shorter than the bytes it
    /// shares is refused, never misread.
    #[test]
    fn a_delta_names_the_keys_of_the_indexes_it_changed() {
        let mut rec = insert_undo();
        rec.kind = UndoKind::Update;
        rec.changed = UndoRecord::changed_mask(4, [1, 3]);
        rec.old = Some(OldVersion::Delta(RowDelta {
            deleted: false,
            prefix: 2,
            suffix: 1,
            middle: b"old".to_vec(),
            keys: vec![b"k1".to_vec(), b"k3".to_vec()],
        }));
        let rec = UndoRecord::decode(&rec.encode()).unwrap();
        assert_eq!(rec.delta_key(0), None, "unchanged");
        assert_eq!(rec.delta_key(1), Some(&b"k1"[..]));
        assert_eq!(rec.delta_key(2), None, "unchanged");
        assert_eq!(rec.delta_key(3), Some(&b"k3"[..]));
        assert!(rec.describes_index(3));
        assert!(!rec.describes_index(4), "created after the change");
        assert_eq!(rec.delta_keys().count(), 2);
        let (h, row) = rec.previous_version(b"ABnewZ").unwrap().unwrap();
        assert_eq!(row, b"ABoldZ");
        assert_eq!((h.trx, h.roll, h.deleted), (0, RollPtr::NONE, false));
        assert!(rec.previous_version(b"AB").is_err());
        // One key too few for the changed bits is refused at decode.
        let mut bytes = rec.encode();
        bytes.truncate(bytes.len() - 3);
        assert!(UndoRecord::decode(&bytes).is_err());
    }

    #[test]
    fn version_1_records_still_decode() {
        let mut update = insert_undo();
        update.kind = UndoKind::Update;
        update.prev_trx = 99;
        update.prev_roll = RollPtr(4);
        update.old = Some(OldVersion::Whole(b"old".to_vec()));
        update.changed = UndoRecord::changed_mask(3, [1]);
        for r in [insert_undo(), update] {
            assert_eq!(UndoRecord::decode(&r.encode_v1()).unwrap(), r);
        }
    }

    #[test]
    fn varints_the_encoder_cannot_write_are_refused() {
        let good = insert_undo().encode();
        // The undo number (57) at byte 2, written with a needless zero
        // continuation group.
        assert_eq!(good[2], 57);
        let mut long = good[..2].to_vec();
        long.extend_from_slice(&[57 | 0x80, 0]);
        long.extend_from_slice(&good[3..]);
        assert!(UndoRecord::decode(&long).is_err(), "non-minimal varint");
        // Ten bytes whose last carries more than the u64's top bit.
        let mut over = good[..2].to_vec();
        over.extend_from_slice(&[0xff; 9]);
        over.push(0x02);
        over.extend_from_slice(&good[3..]);
        assert!(UndoRecord::decode(&over).is_err(), "varint past u64");
        // The largest u64 is fine.
        let mut max = insert_undo();
        max.undo_no = u64::MAX;
        max.trx = u64::MAX;
        assert_eq!(UndoRecord::decode(&max.encode()).unwrap(), max);
        assert!(max.encode().len() <= UndoRecord::max_encoded_len(9, None));
    }

    proptest! {
        #[test]
        fn undo_round_trip(r in record()) {
            let b = r.encode();
            prop_assert_eq!(UndoRecord::decode(&b).unwrap(), r);
        }

        #[test]
        fn whole_records_round_trip_in_every_version(r in record_with(true)) {
            let b = r.encode();
            let whole = match &r.old {
                Some(OldVersion::Whole(v)) => Some(v.len()),
                _ => None,
            };
            prop_assert!(b.len() <= UndoRecord::max_encoded_len(r.key.len(), whole));
            prop_assert_eq!(UndoRecord::decode(&r.encode_v1()).unwrap(), r.clone());
            prop_assert_eq!(UndoRecord::decode(&b).unwrap(), r);
        }

        /// The word-at-a-time scans agree with a byte-at-a-time one.
        #[test]
        fn shared_bytes_are_counted_exactly(
            a in proptest::collection::vec(0u8..3, 0..70),
            b in proptest::collection::vec(0u8..3, 0..70),
        ) {
            let pre = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            let suf = a.iter().rev().zip(b.iter().rev()).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(common_prefix(&a, &b), pre);
            prop_assert_eq!(common_suffix(&a, &b), suf);
            // Long shared runs, as an update of one column leaves.
            let mut c = a.clone();
            c.splice(a.len() / 3..a.len() / 2, b.iter().copied());
            let pre = a.iter().zip(&c).take_while(|(x, y)| x == y).count();
            let suf = a.iter().rev().zip(c.iter().rev()).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(common_prefix(&a, &c), pre);
            prop_assert_eq!(common_suffix(&a, &c), suf);
            let d = RowDelta::between(&a, &c, false, Vec::new());
            prop_assert_eq!(d.apply(&c), Some(a.clone()));
        }

        /// U9: a delta rebuilds the replaced row from the newer one, and
        /// is chosen only when shorter than the whole value, so records
        /// stay within `max_encoded_len`.
        #[test]
        fn deltas_rebuild_the_replaced_row(
            old in proptest::collection::vec(0u8..4, 0..200),
            new in proptest::collection::vec(0u8..4, 0..200),
            deleted in any::<bool>(),
        ) {
            let h = RecHeader { trx: 7, roll: RollPtr(9), deleted };
            let value = h.encode(&old);
            let d = RowDelta::between(&old, &new, deleted, Vec::new());
            prop_assert_eq!(d.apply(&new), Some(old.clone()));
            let rec = UndoRecord {
                kind: UndoKind::Update,
                undo_no: 3,
                table: 1,
                trx: 8,
                prev_trx: 7,
                prev_roll: RollPtr(9),
                key: vec![1],
                old: Some(OldVersion::for_change(&h, &old, &new, Vec::new())),
                changed: UndoRecord::changed_mask(0, []),
            };
            let b = rec.encode();
            prop_assert!(b.len() <= UndoRecord::max_encoded_len(1, Some(value.len())));
            let back = UndoRecord::decode(&b).unwrap();
            prop_assert_eq!(back.previous_version(&new).unwrap(), Some((h, old)));
        }

        #[test]
        fn undo_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = UndoRecord::decode(&bytes);
            let _ = RecHeader::decode(&bytes);
        }

        #[test]
        fn undo_truncation_is_an_error(r in record(), cut in 1usize..20) {
            let b = r.encode();
            let keep = b.len().saturating_sub(cut);
            prop_assert!(UndoRecord::decode(&b[..keep]).is_err());
        }

        #[test]
        fn header_round_trip(trx in any::<u64>(), roll in any::<u64>(), deleted in any::<bool>(), row in proptest::collection::vec(any::<u8>(), 0..50)) {
            let h = RecHeader { trx, roll: RollPtr(roll), deleted };
            let v = h.encode(&row);
            let (h2, row2) = RecHeader::decode(&v).unwrap();
            prop_assert_eq!(h2, h);
            prop_assert_eq!(row2, &row[..]);
        }
    }
}
