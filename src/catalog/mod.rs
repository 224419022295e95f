//! The catalog: column types and values, the order-preserving key
//! encoding that B+tree keys are made of, the compact row format stored in
//! a table's clustered index, and the durable catalog of table schemas.
//!
//! Apart from [`schema::Catalog`], nothing here touches pages or the log:
//! these are functions from values to bytes and back, which the table
//! layer (clustered and secondary indexes) builds on.
//!
//! * [`types`]: [`ColumnType`], [`Value`], [`Column`], [`check_value`] and
//!   the error type [`CatalogError`].
//! * [`keycode`]: [`encode_key`] / [`decode_key`], a memcmp-ordered,
//!   self-delimiting encoding of value tuples, used for index keys.
//! * [`schema`]: table definitions and the [`schema::Catalog`] that
//!   stores them durably in a B+tree (root slot 0), loaded at open.
//! * [`row`]: [`encode_row`] / [`decode_row`], the versioned row format
//!   (null bitmap, fixed-size fields, length-prefixed variable fields).
//!
//! Invariants:
//! * CT1. A value stored in a row or a key has been checked against its
//!   column with [`check_value`]: its type matches, it is NULL only in a
//!   nullable column, and text/bytes are at most `max_len` **bytes** (not
//!   characters). [`encode_row`] checks this itself; [`encode_key`] is
//!   infallible and does not, so callers check first.
//! * KC1. Order: for two tuples of values of the same column types,
//!   comparing their [`encode_key`] encodings with memcmp gives the tuple
//!   order: lexicographic by column; within a column NULL first, `false <
//!   true`, integers and timestamps numerically, floats in IEEE total order
//!   except that `-0.0` equals `+0.0` and every NaN equals every other NaN
//!   and sorts after `+inf`, text and bytes bytewise.
//! * KC2. Prefixes: the encoding of the first `k` values of a tuple is a
//!   byte prefix of the encoding of the whole tuple, and a full encoding
//!   starts with a prefix encoding exactly when its first `k` values equal
//!   (in the KC1 sense) the prefix's values. So a scan over "first `k`
//!   columns equal to these" is the byte range
//!   `[prefix, keycode::prefix_end(prefix))`.
//! * KC3. Canonical: [`decode_key`] accepts exactly the byte strings
//!   [`encode_key`] can produce (floats are normalised, so `-0.0` decodes
//!   as `+0.0` and any NaN as one canonical quiet NaN), and re-encoding a
//!   decoded key gives back the same bytes.
//! * RF1. [`decode_row`] accepts exactly the byte strings [`encode_row`]
//!   produces for the given columns (including the CT1 checks), and returns
//!   an error, never a panic, for anything else. Rows keep floats bit for
//!   bit (no normalisation: that is only for keys).
//! * RD1. A `Reader`'s position never passes the end of its bytes: it
//!   only advances over bytes it has just taken. So `Reader::rest` is
//!   always a valid suffix (indexed directly, not defaulted to empty,
//!   which would make a decoder silently accept a truncated tail).

pub mod keycode;
pub mod row;
pub mod schema;
pub mod types;

pub use keycode::{decode_key, encode_key, encode_key_refs};
pub use row::{RowRef, ValueRef, decode_row, encode_row};
pub(crate) use types::FilledRow;
pub use types::{CatalogError, Column, ColumnType, Value, check_row, check_value};

/// A bounds-checked cursor over encoded bytes, shared by the decoders so
/// that no decoder indexes a slice directly.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes not yet consumed.
    pub(crate) fn rest(&self) -> &'a [u8] {
        debug_assert!(
            self.pos <= self.bytes.len(),
            "catalog RD1: position {} past {} bytes",
            self.pos,
            self.bytes.len()
        );
        #[allow(clippy::indexing_slicing)] // RD1
        &self.bytes[self.pos..]
    }

    /// Whether every byte has been consumed.
    pub(crate) fn is_empty(&self) -> bool {
        self.rest().is_empty()
    }

    /// A malformed-encoding error at the current position.
    #[cold]
    pub(crate) fn error(&self, reason: impl Into<String>) -> CatalogError {
        CatalogError::Malformed {
            offset: self.pos,
            reason: reason.into(),
        }
    }

    /// The next `n` bytes; `what` names them in the error if too few are
    /// left.
    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], CatalogError> {
        let rest = self.rest();
        match rest.get(..n) {
            Some(taken) => {
                self.pos += n; // RD1: `n <= rest.len()`
                Ok(taken)
            }
            None => Err(self.truncated(n, what)),
        }
    }

    #[cold]
    fn truncated(&self, n: usize, what: &str) -> CatalogError {
        self.error(format!(
            "truncated {what}: need {n} bytes, {} left",
            self.rest().len()
        ))
    }

    /// The next byte.
    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, CatalogError> {
        let [b] = self.array::<1>(what)?;
        Ok(b)
    }

    /// The next `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], CatalogError> {
        match self.rest().first_chunk::<N>() {
            Some(a) => {
                self.pos += N; // RD1
                Ok(*a)
            }
            None => Err(self.truncated(N, what)),
        }
    }
}
