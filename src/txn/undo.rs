//! Formats the transaction layer stores in pages: the header of every
//! clustered-index record value (which transaction wrote this version and
//! where its previous version is), and undo records (what rollback and
//! MVCC reads need to rebuild the previous version).
//!
//! Clustered record value: `version u8 | flags u8 (bit 0: delete-marked)
//! | trx id u64 | roll pointer u64 | row bytes` (the row format of
//! `catalog::row`). Undo record: `version u8 | kind u8 | undo no u64 |
//! table id u64 | trx id u64 | previous trx id u64 | previous roll
//! pointer u64 | changed indexes u64 | key length u32 | key | old row present u8 | [old row
//! length u32 | old row]`. Little-endian throughout.
//!
//! Invariants:
//! * U1. A roll pointer names one undo record: together with the
//!   version's writer (`trx`) it is the record's key in the undo log
//!   (`txn::undo_log`); 0 means "no previous version".
//! * U2. An update or delete-mark undo record holds the complete previous
//!   record value (its own header included), so following roll pointers
//!   rebuilds every older version without reading anything else.
//! * U3. Decoding rejects anything the encoder cannot produce: unknown
//!   version or kind, lengths past the end, trailing bytes.
//! * U4. The encoder's u32 length fields hold the real lengths: keys are
//!   bounded by the B+tree's key limit (BT3) and old values by its value
//!   limit (at most `u32::MAX`), so a truncating cast would be our bug
//!   (and a record U3 rejects, or worse, one that decodes differently).
//!   Asserted on encode.

use crate::Result;
use crate::catalog::CatalogError;

use super::registry::TrxId;

/// Format version of record headers and undo records.
pub const UNDO_FORMAT_VERSION: u8 = 1;
/// Bytes of the clustered record header.
pub const REC_HEADER: usize = 18;

/// Where an undo record lives: its sequence number within the
/// transaction that wrote the version (the record header's `trx`), so the
/// pair `(trx, roll)` is the undo record's key in the undo log. 0 is
/// "none" (U1); a transaction numbers its undo records from 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RollPtr(pub u64);

impl RollPtr {
    /// No previous version.
    pub const NONE: RollPtr = RollPtr(0);
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
        let mut v = Vec::with_capacity(REC_HEADER + row.len());
        v.push(UNDO_FORMAT_VERSION);
        v.push(u8::from(self.deleted));
        v.extend_from_slice(&self.trx.to_le_bytes());
        v.extend_from_slice(&self.roll.0.to_le_bytes());
        v.extend_from_slice(row);
        v
    }

    /// Split a record value into its header and row bytes.
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
    /// The replaced record value, header included (U2); `None` for inserts.
    pub old_value: Option<Vec<u8>>,
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

    /// Length of [`UndoRecord::encode`] for a record with a `key_len`-byte
    /// key and, unless it is an insert's, an `old_len`-byte old value.
    pub const fn encoded_len(key_len: usize, old_len: Option<usize>) -> usize {
        let fixed = 2 + 6 * 8 + 4 + 1;
        match old_len {
            None => fixed + key_len,
            Some(n) => fixed + key_len + 4 + n,
        }
    }

    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let len = Self::encoded_len(self.key.len(), self.old_value.as_ref().map(Vec::len));
        let mut v = Vec::with_capacity(len);
        v.push(UNDO_FORMAT_VERSION);
        v.push(self.kind as u8);
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
        match &self.old_value {
            None => v.push(0),
            Some(old) => {
                v.push(1);
                v.extend_from_slice(&len_u32(old.len(), "old value").to_le_bytes());
                v.extend_from_slice(old);
            }
        }
        debug_assert_eq!(v.len(), len, "encoded_len matches encode");
        v
    }

    /// Decode one record (U3).
    pub fn decode(bytes: &[u8]) -> Result<UndoRecord> {
        let mut r = Reader { b: bytes, at: 0 };
        if r.u8("version")? != UNDO_FORMAT_VERSION {
            return Err(malformed(0, "unknown undo record version"));
        }
        let kind = match r.u8("kind")? {
            1 => UndoKind::Insert,
            2 => UndoKind::Update,
            3 => UndoKind::DeleteMark,
            _ => return Err(malformed(1, "unknown undo record kind")),
        };
        let undo_no = r.u64("undo number")?;
        let table = r.u64("table")?;
        let trx = r.u64("trx")?;
        let prev_trx = r.u64("previous trx")?;
        let prev_roll = RollPtr(r.u64("previous roll pointer")?);
        let changed = r.u64("changed indexes")?;
        let klen = r.u32("key length")? as usize;
        let key = r.take(klen, "key")?.to_vec();
        let old_value = match r.u8("old value flag")? {
            0 => None,
            1 => {
                let n = r.u32("old value length")? as usize;
                Some(r.take(n, "old value")?.to_vec())
            }
            _ => return Err(malformed(r.at - 1, "bad old value flag")),
        };
        if (kind == UndoKind::Insert) != old_value.is_none() {
            return Err(malformed(
                1,
                "insert undo carries an old value, or another kind lacks one",
            ));
        }
        if r.at != bytes.len() {
            return Err(malformed(r.at, "trailing bytes after the undo record"));
        }
        Ok(UndoRecord {
            kind,
            undo_no,
            table,
            trx,
            prev_trx,
            prev_roll,
            key,
            old_value,
            changed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record() -> impl Strategy<Value = UndoRecord> {
        (
            1u8..4,
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::collection::vec(any::<u8>(), 0..100),
        )
            .prop_map(|(k, undo_no, table, trx, prev_trx, roll, key, old)| {
                let kind = match k {
                    1 => UndoKind::Insert,
                    2 => UndoKind::Update,
                    _ => UndoKind::DeleteMark,
                };
                UndoRecord {
                    kind,
                    undo_no,
                    table,
                    trx,
                    prev_trx,
                    prev_roll: RollPtr(roll),
                    key,
                    old_value: (kind != UndoKind::Insert).then_some(old),
                    changed: undo_no.rotate_left(7),
                }
            })
    }

    proptest! {
        #[test]
        fn undo_round_trip(r in record()) {
            prop_assert_eq!(UndoRecord::decode(&r.encode()).unwrap(), r);
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
