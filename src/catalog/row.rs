//! The row format stored as the value of a clustered-index record
//! (invariant RF1 of [`crate::catalog`]).
//!
//! Layout, for a table of `n` columns:
//!
//! 1. One byte: the format version, [`ROW_FORMAT_VERSION`].
//! 2. The null bitmap: `ceil(n / 8)` bytes; bit `i % 8` (least significant
//!    first) of byte `i / 8` is set when column `i` is NULL. Bits past `n`
//!    are zero.
//! 3. For each non-NULL column, in column order, its field:
//!    * bool: one byte, 0 or 1;
//!    * int32: 4 bytes little-endian; int64 and timestamp: 8 bytes
//!      little-endian;
//!    * float64: the 8 bytes of [`f64::to_bits`] little-endian, exactly
//!      (`-0.0` and NaN payloads are kept);
//!    * text and bytes: the length in bytes as an unsigned LEB128 varint
//!      (minimal, at most 5 bytes, at most `u32::MAX`), then the bytes.
//!
//! NULL fields take no space. The row does not store its column count: a
//! decoder needs the table's columns, and a future format (for example
//! one supporting added columns) would get a new version byte.
//!
//! Invariants (besides RF1 of [`crate::catalog`]):
//! * RF2. The null bitmap has a bit for every column: [`encode_row`] sets
//!   bits only after [`check_row`](super::check_row) matched one value
//!   per column, and
//!   [`decode_row`] reads bits only for the columns it took the bitmap for,
//!   so bitmap bytes are indexed directly (a miss would silently drop a
//!   NULL, or read a value as NULL).
//! * RF3. A text or bytes length fits a u32 (CT1 bounds it by a u32
//!   `max_len`), so its varint is at most 5 bytes, which the decoder
//!   insists on. Asserted by the encoder.
//! * RF4. [`RowRef::new`] first walks a row with `quick_spans`, which
//!   accepts exactly the rows `checked_spans` accepts, with the same
//!   field positions (checked on every row the property tests and the
//!   fuzz targets try, `fuzz::check_row_ref`); only a row it refuses is
//!   walked again, for the error.

use super::types::check_filled_row;
use super::{CatalogError, Column, ColumnType, FilledRow, Reader, Value};

/// The format version byte that starts every row this build writes.
pub const ROW_FORMAT_VERSION: u8 = 1;

/// Encodes one row of `columns`. The values are checked first
/// ([`check_row`](super::check_row)): one per column, matching types,
/// NULL only where allowed, text and bytes within their limits.
pub fn encode_row(columns: &[Column], values: &[Value]) -> Result<Vec<u8>, CatalogError> {
    encode_filled_row(columns, FilledRow::new(values), 0)
}

/// [`encode_row`] for a row with a value filled in (an automatic key):
/// the same bytes as for the row with that value in place, after `room`
/// zero bytes (where a caller writes a header in front of the row, in the
/// same buffer).
pub(crate) fn encode_filled_row(
    columns: &[Column],
    values: FilledRow<'_>,
    room: usize,
) -> Result<Vec<u8>, CatalogError> {
    check_filled_row(columns, values)?;
    let var_len: usize = values.iter().map(field_room).fold(0, usize::saturating_add);
    Ok(encode_checked(
        columns,
        values.iter().map(ValueRef::from),
        room,
        var_len,
    ))
}

/// The row `old` becomes with `changes` (column, new value; the last one
/// for a column counts) applied: the bytes [`encode_filled_row`] writes
/// for the old row's values with the changes in place, after `room`
/// bytes, without making owned values of the columns that stay. Only the
/// new values are checked ([`check_value`](super::check_value)); the
/// others are the old row's, read as [`RowRef::iter`] reads them (text
/// checked to be UTF-8: a damaged column is an error here, not copied
/// into the new version).
pub(crate) fn encode_updated_row(
    old: &RowRef<'_>,
    changes: &[(usize, Value)],
    room: usize,
) -> Result<Vec<u8>, CatalogError> {
    let columns = old.columns;
    for (k, (c, v)) in changes.iter().enumerate() {
        let column = columns.get(*c).ok_or_else(|| CatalogError::ColumnCount {
            expected: columns.len(),
            found: c.saturating_add(1),
        })?;
        // Only the value a column ends with is checked, as a whole row's
        // check would (one replaced by a later change is never written).
        let last = changes
            .get(k + 1..)
            .is_none_or(|rest| rest.iter().all(|(d, _)| d != c));
        if last {
            super::check_value(column, v)?;
        }
    }
    let mut values: smallvec::SmallVec<[ValueRef<'_>; 16]> =
        smallvec::SmallVec::with_capacity(columns.len());
    for (i, v) in old.iter().enumerate() {
        values.push(match changes.iter().rev().find(|(c, _)| *c == i) {
            Some((_, new)) => ValueRef::from(new),
            None => v?,
        });
    }
    let var_len = changes
        .iter()
        .map(|(_, v)| field_room(v))
        .fold(old.bytes.len(), usize::saturating_add);
    Ok(encode_checked(columns, values.into_iter(), room, var_len))
}

/// At most the bytes `v`'s field takes (a varint length of up to 5 bytes
/// and the bytes, or 8): room to reserve for it.
fn field_room(v: &Value) -> usize {
    match v {
        Value::Text(s) => s.len().saturating_add(5),
        Value::Bytes(b) => b.len().saturating_add(5),
        _ => 8,
    }
}

/// Encode `values`, one per column and checked against `columns`, after
/// `room` zero bytes; `var_len` is about the fields' length (for the
/// buffer's capacity).
fn encode_checked<'v>(
    columns: &[Column],
    values: impl Iterator<Item = ValueRef<'v>>,
    room: usize,
    var_len: usize,
) -> Vec<u8> {
    let bitmap_len = columns.len().div_ceil(8);
    let mut out = Vec::with_capacity(
        room.saturating_add(bitmap_len)
            .saturating_add(1)
            .saturating_add(var_len),
    );
    out.resize(room, 0);
    out.push(ROW_FORMAT_VERSION);
    out.resize(room.saturating_add(bitmap_len).saturating_add(1), 0);
    let mut n = 0;
    for (i, value) in values.enumerate() {
        n += 1;
        match value {
            ValueRef::Null => {
                // RF2: `i < columns.len()` (checked by the callers) and
                // the bitmap's `div_ceil(columns.len(), 8)` bytes follow
                // the room and the version.
                #[allow(clippy::indexing_slicing)]
                {
                    out[room + 1 + i / 8] |= 1 << (i % 8);
                }
            }
            ValueRef::Bool(b) => out.push(u8::from(b)),
            ValueRef::Int32(v) => out.extend_from_slice(&v.to_le_bytes()),
            ValueRef::Int64(v) | ValueRef::Timestamp(v) => out.extend_from_slice(&v.to_le_bytes()),
            ValueRef::Float64(f) => out.extend_from_slice(&f.to_bits().to_le_bytes()),
            ValueRef::Text(s) => put_var(&mut out, s.as_bytes()),
            ValueRef::Bytes(b) => put_var(&mut out, b),
        }
    }
    assert_eq!(
        n,
        columns.len(),
        "catalog RF2: a row of {n} values for {} columns was encoded",
        columns.len()
    );
    debug_assert!(
        out.get(room..)
            .is_some_and(|row| decode_row(columns, row).is_ok()),
        "catalog RF1: decode_row rejects what encode_row wrote"
    );
    out
}

fn put_var(out: &mut Vec<u8>, bytes: &[u8]) {
    // RF3: check_row bounded the length by a u32 max_len.
    assert!(
        u32::try_from(bytes.len()).is_ok(),
        "catalog RF3: a field of {} bytes passed check_row",
        bytes.len()
    );
    let mut len = bytes.len() as u64;
    loop {
        let low = (len & 0x7F) as u8;
        len >>= 7;
        if len == 0 {
            out.push(low);
            break;
        }
        out.push(low | 0x80);
    }
    out.extend_from_slice(bytes);
}

/// Decodes a row of `columns` written by [`encode_row`].
///
/// Anything [`encode_row`] could not have produced for these columns is an
/// error, never a panic: an unknown version, truncation, trailing bytes,
/// set bitmap bits past the last column, NULL in a NOT NULL column, a bool
/// other than 0/1, a non-minimal or oversized length, text or bytes over
/// the column's limit, invalid UTF-8.
pub fn decode_row(columns: &[Column], bytes: &[u8]) -> Result<Vec<Value>, CatalogError> {
    let Fields { bitmap, mut r } = Fields::new(columns, bytes)?;
    let mut values = Vec::with_capacity(columns.len());
    for (i, column) in columns.iter().enumerate() {
        // RF2: `bitmap` has `div_ceil(columns.len(), 8)` bytes.
        #[allow(clippy::indexing_slicing)]
        let null = bitmap[i / 8] & (1 << (i % 8)) != 0;
        if null {
            if !column.nullable {
                return Err(r.error(format!("NULL in NOT NULL column {}", column.name)));
            }
            values.push(Value::Null);
            continue;
        }
        let value = match column.ty {
            ColumnType::Bool => match r.u8("bool")? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                other => {
                    return Err(r.error(format!(
                        "bool byte {other:#04x} in column {} is not 0 or 1",
                        column.name
                    )));
                }
            },
            ColumnType::Int32 => Value::Int32(i32::from_le_bytes(r.array("int32")?)),
            ColumnType::Int64 => Value::Int64(i64::from_le_bytes(r.array("int64")?)),
            ColumnType::Timestamp => Value::Timestamp(i64::from_le_bytes(r.array("timestamp")?)),
            ColumnType::Float64 => {
                Value::Float64(f64::from_bits(u64::from_le_bytes(r.array("float64")?)))
            }
            ColumnType::Text { max_len } => {
                let start = r.pos();
                let raw = take_var(&mut r, column, max_len)?;
                let text = utf8(raw).map_err(|e| CatalogError::Malformed {
                    offset: start,
                    reason: format!("text in column {} is not UTF-8: {e}", column.name),
                })?;
                Value::Text(text.to_owned())
            }
            ColumnType::Bytes { max_len } => {
                Value::Bytes(take_var(&mut r, column, max_len)?.to_vec())
            }
        };
        values.push(value);
    }
    if !r.is_empty() {
        return Err(r.error(format!("{} trailing bytes after the row", r.rest().len())));
    }
    Ok(values)
}

/// `raw` as text, checked to be UTF-8. Range reads check two or more
/// text columns per row, and `std::str::from_utf8` was 15% of sysbench's
/// read-only instructions at 1 thread: its ASCII path goes byte by byte
/// up to an aligned word and again over the tail, which for the short
/// strings of a row is most of them. So ASCII, the common case, is found
/// first by or-ing the bytes eight at a time; anything else goes to
/// `std`, which also gives the error's position. Callgrind counts about
/// 80 instructions per string of that shape's rows (60 and 120 bytes)
/// against 140 (`bench/results/oltp-20261128-utf8/`).
pub(crate) fn utf8(raw: &[u8]) -> Result<&str, std::str::Utf8Error> {
    // Four words a step (a row's text is often a few dozen bytes or
    // more), then the words and bytes left.
    let (blocks, rest) = raw.as_chunks::<32>();
    let mut high = 0u64;
    for b in blocks {
        let (w, _) = b.as_chunks::<8>();
        for w in w {
            high |= u64::from_ne_bytes(*w);
        }
    }
    let (words, tail) = rest.as_chunks::<8>();
    for w in words {
        high |= u64::from_ne_bytes(*w);
    }
    match raw.last_chunk::<8>() {
        // The last 8 bytes cover the tail (some of them again).
        Some(last) if !tail.is_empty() => high |= u64::from_ne_bytes(*last),
        _ => {
            for &b in tail {
                high |= u64::from(b);
            }
        }
    }
    if high & 0x8080_8080_8080_8080 == 0 {
        // SAFETY: no byte of `raw` has its high bit set (every byte was
        // or-ed into `high`, and the high bit of each of its bytes is
        // clear), so `raw` is ASCII, and ASCII is valid UTF-8.
        return Ok(unsafe { std::str::from_utf8_unchecked(raw) });
    }
    std::str::from_utf8(raw)
}

/// A column's value borrowed from a row's bytes ([`Value`] without the
/// copy).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueRef<'a> {
    /// SQL NULL.
    Null,
    /// A bool.
    Bool(bool),
    /// An int32.
    Int32(i32),
    /// An int64.
    Int64(i64),
    /// A float64.
    Float64(f64),
    /// Text, checked to be UTF-8.
    Text(&'a str),
    /// Bytes.
    Bytes(&'a [u8]),
    /// A timestamp (microseconds since the Unix epoch, UTC).
    Timestamp(i64),
}

impl ValueRef<'_> {
    /// The owned value.
    pub fn to_owned(&self) -> Value {
        match *self {
            ValueRef::Null => Value::Null,
            ValueRef::Bool(b) => Value::Bool(b),
            ValueRef::Int32(v) => Value::Int32(v),
            ValueRef::Int64(v) => Value::Int64(v),
            ValueRef::Float64(v) => Value::Float64(v),
            ValueRef::Text(t) => Value::Text(t.to_owned()),
            ValueRef::Bytes(b) => Value::Bytes(b.to_vec()),
            ValueRef::Timestamp(v) => Value::Timestamp(v),
        }
    }

    /// Make `slot` this value, reusing the buffer of text or bytes it
    /// already holds if that is at most twice (plus 64 bytes) as large as
    /// the value: a reader that decodes row after row into the same
    /// values allocates only when a value outgrows its slot, and a value
    /// a caller keeps holds no more memory than a copy grown by doubling
    /// would (not the largest value the slot ever held).
    #[inline]
    pub fn assign_to(&self, slot: &mut Value) {
        let fits = |capacity: usize, len: usize| capacity <= len.saturating_mul(2) + 64;
        match (*self, slot) {
            (ValueRef::Text(t), Value::Text(s)) if fits(s.capacity(), t.len()) => {
                s.clear();
                s.push_str(t);
            }
            (ValueRef::Bytes(b), Value::Bytes(v)) if fits(v.capacity(), b.len()) => {
                v.clear();
                v.extend_from_slice(b);
            }
            (v, slot) => *slot = v.to_owned(),
        }
    }
}

impl<'a> From<&'a Value> for ValueRef<'a> {
    fn from(v: &'a Value) -> ValueRef<'a> {
        match v {
            Value::Null => ValueRef::Null,
            Value::Bool(b) => ValueRef::Bool(*b),
            Value::Int32(v) => ValueRef::Int32(*v),
            Value::Int64(v) => ValueRef::Int64(*v),
            Value::Float64(v) => ValueRef::Float64(*v),
            Value::Text(t) => ValueRef::Text(t),
            Value::Bytes(b) => ValueRef::Bytes(b),
            Value::Timestamp(v) => ValueRef::Timestamp(*v),
        }
    }
}

/// The field positions [`RowRef::new`] found in a row it checked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowLayout([(u32, u32); SPAN_COLUMNS]);

/// Columns whose field positions a [`RowRef`] keeps (later columns are
/// found by walking from the last one kept).
pub(crate) const SPAN_COLUMNS: usize = 8;

/// A kept field position meaning NULL.
const NULL_SPAN: (u32, u32) = (u32::MAX, u32::MAX);

/// A row read in place, its columns decoded only when asked for.
/// [`RowRef::new`] checks the row's layout as [`decode_row`] does (version,
/// null bitmap, NOT NULL, bool bytes, lengths within their limits, no
/// trailing bytes) in one pass that copies and allocates nothing, and
/// keeps where each field is; text is checked to be UTF-8 when
/// [`RowRef::get`] or [`RowRef::iter`] returns it. So a damaged row gives
/// an error, never a wrong value.
#[derive(Clone, Copy, Debug)]
pub struct RowRef<'a> {
    columns: &'a [Column],
    bytes: &'a [u8],
    /// Where the fields of the first `SPAN_COLUMNS` columns are: the
    /// payload's start and end in `bytes` (`NULL_SPAN` for NULL).
    spans: [(u32, u32); SPAN_COLUMNS],
}

impl<'a> RowRef<'a> {
    /// `bytes` as a row of `columns`, its layout checked; nothing is
    /// copied or decoded.
    ///
    /// Always inlined, so the field positions the walk finds are built
    /// where the caller keeps the row: called, the function returned
    /// them through memory, and the caller's 16-byte reload of the
    /// positions just stored 4 bytes at a time stalled on store
    /// forwarding for every row (read-only at 1 thread 8.6% faster
    /// inlined, with `Rows::next_ref`; bench/results/oltp.md, "Rows
    /// read inlined").
    #[inline(always)]
    pub fn new(columns: &'a [Column], bytes: &'a [u8]) -> Result<RowRef<'a>, CatalogError> {
        let spans = match quick_spans(columns, bytes) {
            Some(spans) => spans,
            // Something is off: the checked walk says what.
            None => checked_spans(columns, bytes)?,
        };
        Ok(RowRef {
            columns,
            bytes,
            spans,
        })
    }

    /// What [`RowRef::new`] found: to read the same bytes as a row of the
    /// same columns again without checking them again
    /// ([`RowRef::with_layout`]).
    pub(crate) fn layout(&self) -> RowLayout {
        RowLayout(self.spans)
    }

    /// The row `RowRef::new(columns, bytes)` gave, whose
    /// [`RowRef::layout`] is `layout`, without checking `bytes` again.
    /// The caller keeps the bytes, the columns and the layout together
    /// (asserted in debug builds): with other bytes a read could give an
    /// error or a wrong value.
    pub(crate) fn with_layout(
        columns: &'a [Column],
        bytes: &'a [u8],
        layout: RowLayout,
    ) -> RowRef<'a> {
        debug_assert!(
            RowRef::new(columns, bytes).is_ok_and(|r| r.spans == layout.0),
            "RowRef::with_layout: a layout of other bytes"
        );
        RowRef {
            columns,
            bytes,
            spans: layout.0,
        }
    }

    /// The row's columns, in order.
    pub fn iter(&self) -> impl Iterator<Item = Result<ValueRef<'a>, CatalogError>> + use<'a> {
        let row = *self;
        // Columns and kept positions in step: no lookup of the column by
        // index. Past the kept positions one walk goes on from field to
        // field (`get` would walk from the first field for each).
        let mut walk: Option<Fields<'a>> = None;
        self.columns
            .iter()
            .enumerate()
            .map(move |(i, column)| match row.spans.get(i) {
                Some(&span) => row.kept(column, span),
                None => {
                    let fields = row.walk_at(&mut walk, i)?;
                    match fields.span(i, column)? {
                        None => Ok(ValueRef::Null),
                        Some((a, b)) => row.field(column, a, b),
                    }
                }
            })
    }

    /// Column `i` (as the table's columns number them).
    pub fn get(&self, i: usize) -> Result<ValueRef<'a>, CatalogError> {
        let Some(column) = self.columns.get(i) else {
            return Err(CatalogError::Malformed {
                offset: 0,
                reason: format!("column {i} of a row of {} columns", self.columns.len()),
            });
        };
        let span = match self.spans.get(i) {
            Some(&span) => return self.kept(column, span),
            None => {
                // Past the kept positions: walk the fields (checked by
                // `new`, so this does not fail).
                let mut fields = Fields::new(self.columns, self.bytes)?;
                let mut span = None;
                for (j, c) in self.columns.iter().enumerate().take(i + 1) {
                    span = fields.span(j, c)?;
                }
                span
            }
        };
        match span {
            None => Ok(ValueRef::Null),
            Some((a, b)) => self.field(column, a, b),
        }
    }

    /// The walk over the fields past the kept positions, at column `i`:
    /// `walk` as it is, or a new one stepped over the fields before `i`
    /// (a reader of columns in order walks the row once).
    fn walk_at<'w>(
        &self,
        walk: &'w mut Option<Fields<'a>>,
        i: usize,
    ) -> Result<&'w mut Fields<'a>, CatalogError> {
        if let Some(f) = walk {
            return Ok(f);
        }
        let mut f = Fields::new(self.columns, self.bytes)?;
        for (j, c) in self.columns.iter().enumerate().take(i) {
            f.span(j, c)?;
        }
        Ok(walk.insert(f))
    }

    /// The value of `column` from its kept position `span`.
    #[inline(always)]
    fn kept(&self, column: &Column, span: (u32, u32)) -> Result<ValueRef<'a>, CatalogError> {
        if span == NULL_SPAN {
            return Ok(ValueRef::Null);
        }
        self.field(column, span.0 as usize, span.1 as usize)
    }

    /// The value of `column` from its field's payload at `a..b`.
    #[inline(always)]
    fn field(&self, column: &Column, a: usize, b: usize) -> Result<ValueRef<'a>, CatalogError> {
        match self.bytes.get(a..b) {
            Some(payload) => value_of(column, payload, a),
            None => Err(past_the_end(column, a)),
        }
    }

    /// Every column as an owned value.
    pub fn to_values(&self) -> Result<Vec<Value>, CatalogError> {
        let mut out = Vec::new();
        self.values_into(None, &mut out)?;
        Ok(out)
    }

    /// The columns `needed` marks as owned values and the others as NULL,
    /// not decoded (a column past the end of `needed` is not needed):
    /// what a statement that reads some of the columns takes from a row.
    /// The row's layout was checked by [`RowRef::new`]; a needed column's
    /// value is checked as [`RowRef::get`] checks it, and a column not
    /// needed is not looked at (invalid UTF-8 in a text column nobody
    /// reads is not an error here: no value of it is returned).
    pub fn to_values_where(&self, needed: &[bool]) -> Result<Vec<Value>, CatalogError> {
        let mut out = Vec::new();
        self.values_into(Some(needed), &mut out)?;
        Ok(out)
    }

    /// [`RowRef::to_values_where`] (every column without `needed`) into
    /// `out`, whose values it replaces: a reader of many rows reuses one
    /// vector, and the text and bytes buffers in it
    /// ([`ValueRef::assign_to`]). On an error `out` holds no row (some
    /// of its values may be this row's, others the last one's).
    pub fn values_into(
        &self,
        needed: Option<&[bool]>,
        out: &mut Vec<Value>,
    ) -> Result<(), CatalogError> {
        // One slot per column; a slot's old value is replaced, its text
        // or bytes buffer reused.
        out.resize(self.columns.len(), Value::Null);
        // Columns from `end` on are not needed.
        let end = match needed {
            None => self.columns.len(),
            Some(n) => n.iter().rposition(|&b| b).map_or(0, |l| l + 1),
        };
        // Walks the fields past the kept positions, from the first.
        let mut walk: Option<Fields<'a>> = None;
        for (i, (column, slot)) in self.columns.iter().zip(out.iter_mut()).enumerate() {
            let want = i < end && needed.is_none_or(|n| n.get(i).copied().unwrap_or(false));
            let value = if let Some(&span) = self.spans.get(i) {
                if want {
                    Some(self.kept(column, span)?)
                } else {
                    None
                }
            } else if i >= end {
                None
            } else {
                // Past the kept positions the walk visits every field up
                // to the last needed one, needed or not.
                let fields = self.walk_at(&mut walk, i)?;
                match (want, fields.span(i, column)?) {
                    (true, Some((a, b))) => Some(self.field(column, a, b)?),
                    _ => None,
                }
            };
            match value {
                Some(v) => v.assign_to(slot),
                None if matches!(slot, Value::Null) => {}
                None => *slot = Value::Null,
            }
        }
        debug_assert_eq!(out.len(), self.columns.len());
        Ok(())
    }

    /// The row's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// The field positions of a row of `columns` (the first
/// `SPAN_COLUMNS`), found by one walk that checks everything
/// [`decode_row`] checks but UTF-8, with an error saying what is wrong.
pub(crate) fn checked_spans(
    columns: &[Column],
    bytes: &[u8],
) -> Result<[(u32, u32); SPAN_COLUMNS], CatalogError> {
    let mut fields = Fields::new(columns, bytes)?;
    if u32::try_from(bytes.len()).is_err() {
        return Err(CatalogError::Malformed {
            offset: 0,
            reason: "a row of 4 GiB or more".into(),
        });
    }
    let mut spans = [NULL_SPAN; SPAN_COLUMNS];
    for (i, column) in columns.iter().enumerate() {
        let span = fields.span(i, column)?;
        if let (Some(slot), Some((a, b))) = (spans.get_mut(i), span) {
            // Offsets within `bytes`, whose length fits a u32 (above).
            *slot = (a as u32, b as u32);
        }
    }
    fields.finish()?;
    Ok(spans)
}

/// What [`checked_spans`] returns for a row it accepts, and `None` for
/// every row it refuses (RF4): the same checks in a tight loop that
/// builds no error, so reading a well-formed row costs a few
/// instructions per column. The caller runs [`checked_spans`] on `None`
/// for the error.
#[inline]
pub(crate) fn quick_spans(columns: &[Column], bytes: &[u8]) -> Option<[(u32, u32); SPAN_COLUMNS]> {
    let n = columns.len();
    u32::try_from(bytes.len()).ok()?;
    let (&version, rest) = bytes.split_first()?;
    let bitmap = rest.get(..n.div_ceil(8))?;
    if version != ROW_FORMAT_VERSION {
        return None;
    }
    let used_bits = n % 8;
    if used_bits != 0 && bitmap.last().is_some_and(|last| last >> used_bits != 0) {
        return None;
    }
    let mut pos = 1 + bitmap.len();
    let mut spans = [NULL_SPAN; SPAN_COLUMNS];
    // A row without NULLs (the common case) skips the per-column bit.
    let any_null = bitmap.iter().any(|&b| b != 0);
    for (i, column) in columns.iter().enumerate() {
        if any_null && bitmap.get(i / 8)? & (1 << (i % 8)) != 0 {
            if !column.nullable {
                return None;
            }
            continue; // NULL: its kept span stays NULL_SPAN
        }
        let (start, end) = match column.ty {
            ColumnType::Bool => {
                if *bytes.get(pos)? > 1 {
                    return None;
                }
                (pos, pos + 1)
            }
            ColumnType::Int32 => (pos, pos + 4),
            ColumnType::Int64 | ColumnType::Timestamp | ColumnType::Float64 => (pos, pos + 8),
            ColumnType::Text { max_len } | ColumnType::Bytes { max_len } => {
                // A minimal LEB128 length of at most 5 bytes (RF3); most
                // are one byte (under 128).
                let mut len: u64 = 0;
                let mut at = pos;
                let mut shift = 0;
                let first = *bytes.get(pos)?;
                if first < 0x80 {
                    len = u64::from(first);
                    at += 1;
                } else {
                    loop {
                        let byte = *bytes.get(at)?;
                        at += 1;
                        len |= u64::from(byte & 0x7F) << shift;
                        if byte & 0x80 == 0 {
                            if byte == 0 && at - pos > 1 {
                                return None;
                            }
                            break;
                        }
                        shift += 7;
                        if shift == 35 {
                            return None;
                        }
                    }
                }
                if len > u64::from(max_len) {
                    return None;
                }
                (at, at.checked_add(usize::try_from(len).ok()?)?)
            }
        };
        if end > bytes.len() {
            return None;
        }
        if let Some(slot) = spans.get_mut(i) {
            // Within `bytes`, whose length fits a u32 (above).
            *slot = (start as u32, end as u32);
        }
        pos = end;
    }
    (pos == bytes.len()).then_some(spans)
}

/// The value of `column` from its field's payload (`Fields::span`),
/// which starts at offset `at` of its row (for errors). Inlined into
/// every reader of a column; the errors are built out of line
/// ([`field_error`]), so the path of a well-formed field stays short.
#[inline(always)]
fn value_of<'a>(
    column: &Column,
    payload: &'a [u8],
    at: usize,
) -> Result<ValueRef<'a>, CatalogError> {
    Ok(match column.ty {
        ColumnType::Bool => match payload {
            [0] => ValueRef::Bool(false),
            [1] => ValueRef::Bool(true),
            _ => return Err(field_error(column, payload, at)),
        },
        ColumnType::Int32 => match payload.first_chunk::<4>() {
            Some(b) if payload.len() == 4 => ValueRef::Int32(i32::from_le_bytes(*b)),
            _ => return Err(field_error(column, payload, at)),
        },
        ColumnType::Int64 | ColumnType::Timestamp | ColumnType::Float64 => {
            let Some(b) = payload.first_chunk::<8>().filter(|_| payload.len() == 8) else {
                return Err(field_error(column, payload, at));
            };
            match column.ty {
                ColumnType::Int64 => ValueRef::Int64(i64::from_le_bytes(*b)),
                ColumnType::Timestamp => ValueRef::Timestamp(i64::from_le_bytes(*b)),
                _ => ValueRef::Float64(f64::from_bits(u64::from_le_bytes(*b))),
            }
        }
        ColumnType::Text { .. } => match utf8(payload) {
            Ok(t) => ValueRef::Text(t),
            Err(_) => return Err(field_error(column, payload, at)),
        },
        ColumnType::Bytes { .. } => ValueRef::Bytes(payload),
    })
}

/// Why [`value_of`] refused `payload` as a field of `column` (out of
/// line: only a damaged row gets here).
#[cold]
#[inline(never)]
fn field_error(column: &Column, payload: &[u8], at: usize) -> CatalogError {
    let reason = match column.ty {
        ColumnType::Bool => format!(
            "bool field {payload:?} in column {} is not 0 or 1",
            column.name
        ),
        ColumnType::Text { .. } => match std::str::from_utf8(payload) {
            Err(e) => format!("text in column {} is not UTF-8: {e}", column.name),
            Ok(_) => format!("text in column {} could not be read", column.name),
        },
        _ => format!("field of column {} has the wrong length", column.name),
    };
    CatalogError::Malformed { offset: at, reason }
}

/// A field of `column` said to start at `at` runs past its row's end.
#[cold]
#[inline(never)]
fn past_the_end(column: &Column, at: usize) -> CatalogError {
    CatalogError::Malformed {
        offset: at,
        reason: format!("field of column {} past the row's end", column.name),
    }
}

/// One pass over a row's fields in column order, checking them as
/// [`decode_row`] does (`checked_spans`). After the last column,
/// [`Fields::finish`] checks that nothing follows it.
struct Fields<'a> {
    bitmap: &'a [u8],
    r: Reader<'a>,
}

impl<'a> Fields<'a> {
    fn new(columns: &'a [Column], bytes: &'a [u8]) -> Result<Self, CatalogError> {
        let mut r = Reader::new(bytes);
        let version = r.u8("row format version")?;
        if version != ROW_FORMAT_VERSION {
            return Err(CatalogError::Malformed {
                offset: 0,
                reason: format!(
                    "row format version {version}, this build reads version {ROW_FORMAT_VERSION}"
                ),
            });
        }
        let bitmap = r.take(columns.len().div_ceil(8), "null bitmap")?;
        let used_bits = columns.len() % 8;
        if used_bits != 0 && bitmap.last().is_some_and(|last| last >> used_bits != 0) {
            return Err(CatalogError::Malformed {
                offset: bitmap.len(),
                reason: "null bitmap has bits set past the last column".into(),
            });
        }
        Ok(Fields { bitmap, r })
    }

    /// After every column: no bytes may follow.
    fn finish(&self) -> Result<(), CatalogError> {
        if !self.r.is_empty() {
            return Err(self.r.error(format!(
                "{} trailing bytes after the row",
                self.r.rest().len()
            )));
        }
        Ok(())
    }

    /// Step over column `i`'s field, checking everything but UTF-8:
    /// where its payload is (`None` for NULL).
    #[inline]
    fn span(&mut self, i: usize, column: &Column) -> Result<Option<(usize, usize)>, CatalogError> {
        let r = &mut self.r;
        // RF2: `bitmap` has `div_ceil(columns.len(), 8)` bytes and `i`
        // is a column's position.
        #[allow(clippy::indexing_slicing)]
        let null = self.bitmap[i / 8] & (1 << (i % 8)) != 0;
        if null {
            if !column.nullable {
                return Err(r.error(format!("NULL in NOT NULL column {}", column.name)));
            }
            return Ok(None);
        }
        let start = r.pos();
        let fixed = match column.ty {
            ColumnType::Bool => {
                let b = r.u8("bool")?;
                if b > 1 {
                    return Err(r.error(format!(
                        "bool byte {b:#04x} in column {} is not 0 or 1",
                        column.name
                    )));
                }
                return Ok(Some((start, start + 1)));
            }
            ColumnType::Int32 => 4,
            ColumnType::Int64 | ColumnType::Timestamp | ColumnType::Float64 => 8,
            ColumnType::Text { max_len } | ColumnType::Bytes { max_len } => {
                let payload = take_var(r, column, max_len)?;
                let end = r.pos();
                return Ok(Some((end - payload.len(), end)));
            }
        };
        r.take(fixed, "fixed-size field")?;
        Ok(Some((start, start + fixed)))
    }
}

/// Reads a varint length and that many bytes, checked against `max_len`
/// before anything is allocated.
fn take_var<'a>(
    r: &mut Reader<'a>,
    column: &Column,
    max_len: u32,
) -> Result<&'a [u8], CatalogError> {
    let start = r.pos();
    let mut len: u64 = 0;
    for i in 0..5u32 {
        let byte = r.u8("length")?;
        len |= u64::from(byte & 0x7F) << (7 * i);
        if byte & 0x80 == 0 {
            if byte == 0 && i > 0 {
                return Err(r.error("length varint is not minimal"));
            }
            if len > u64::from(max_len) {
                return Err(CatalogError::Malformed {
                    offset: start,
                    reason: format!(
                        "length {len} in column {} exceeds its limit {max_len}",
                        column.name
                    ),
                });
            }
            let len = usize::try_from(len).map_err(|_| r.error("length does not fit usize"))?;
            return r.take(len, "text/bytes field");
        }
    }
    Err(r.error("length varint longer than 5 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::types::tests::{
        arb_column, arb_schema_and_row, arb_schema_and_rows, same_bits,
    };
    use crate::fuzz::check_row_ref;
    use proptest::prelude::*;

    fn schema() -> Vec<Column> {
        vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("ok", ColumnType::Bool, true),
            Column::new("name", ColumnType::Text { max_len: 300 }, true),
            Column::new("n", ColumnType::Int32, true),
            Column::new("f", ColumnType::Float64, false),
            Column::new("b", ColumnType::Bytes { max_len: 4 }, true),
            Column::new("at", ColumnType::Timestamp, false),
            Column::new("x", ColumnType::Bool, true),
            Column::new("y", ColumnType::Bool, true),
        ]
    }

    /// A slot's buffer is reused for a value of about its size, and not
    /// kept for a much smaller one (a row a caller keeps must not hold
    /// the memory of the largest value read before it).
    #[test]
    fn assign_to_reuses_buffers_of_about_the_size() {
        let mut slot = Value::Text(String::with_capacity(100));
        ValueRef::Text("sixty bytes of text, give or take some; reused: fits in 100")
            .assign_to(&mut slot);
        let Value::Text(s) = &slot else {
            panic!("{slot:?}")
        };
        assert_eq!(s.capacity(), 100);
        let mut slot = Value::Text("x".repeat(1 << 20));
        ValueRef::Text("y").assign_to(&mut slot);
        assert!(
            matches!(&slot, Value::Text(s) if s == "y" && s.capacity() < 100),
            "{slot:?}"
        );
        let mut slot = Value::Bytes(vec![1; 1 << 20]);
        ValueRef::Bytes(&[2]).assign_to(&mut slot);
        assert!(matches!(&slot, Value::Bytes(b) if b == &[2] && b.capacity() < 100));
        let mut slot = Value::Int64(3);
        ValueRef::Text("z").assign_to(&mut slot);
        assert_eq!(slot, Value::Text("z".into()));
        ValueRef::Null.assign_to(&mut slot);
        assert_eq!(slot, Value::Null);
    }

    #[test]
    fn golden_row() {
        let values = vec![
            Value::Int64(-2),
            Value::Null,
            Value::Text("h\u{e9}".into()),
            Value::Int32(258),
            Value::Float64(-0.0),
            Value::Null,
            Value::Timestamp(1),
            Value::Bool(true),
            Value::Null,
        ];
        let bytes = encode_row(&schema(), &values).unwrap();
        let mut expected = vec![ROW_FORMAT_VERSION, 0b0010_0010, 0b0000_0001];
        expected.extend_from_slice(&(-2i64).to_le_bytes());
        expected.extend_from_slice(&[3, b'h', 0xC3, 0xA9]);
        expected.extend_from_slice(&[2, 1, 0, 0]);
        expected.extend_from_slice(&(-0.0f64).to_bits().to_le_bytes());
        expected.extend_from_slice(&1i64.to_le_bytes());
        expected.push(1);
        assert_eq!(bytes, expected);
        let back = decode_row(&schema(), &bytes).unwrap();
        assert!(same_bits(&back, &values));
    }

    #[test]
    fn long_text_uses_a_two_byte_length() {
        let columns = [Column::new("t", ColumnType::Text { max_len: 300 }, false)];
        let text = "z".repeat(200);
        let bytes = encode_row(&columns, &[Value::Text(text.clone())]).unwrap();
        assert_eq!(&bytes[..4], &[ROW_FORMAT_VERSION, 0, 0xC8, 0x01]);
        assert_eq!(decode_row(&columns, &bytes).unwrap(), [Value::Text(text)]);
        // The same length written non-minimally is rejected.
        let mut padded = vec![ROW_FORMAT_VERSION, 0, 0x81, 0x00];
        padded.push(b'z');
        assert!(decode_row(&columns, &padded).is_err());
    }

    #[test]
    fn encode_row_enforces_rules() {
        let columns = schema();
        let mut values = vec![
            Value::Int64(1),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Float64(1.0),
            Value::Bytes(vec![1, 2, 3, 4]),
            Value::Timestamp(0),
            Value::Null,
            Value::Null,
        ];
        assert!(encode_row(&columns, &values).is_ok());
        values[5] = Value::Bytes(vec![1, 2, 3, 4, 5]);
        assert!(matches!(
            encode_row(&columns, &values),
            Err(CatalogError::TooLong {
                len: 5,
                max_len: 4,
                ..
            })
        ));
        values[5] = Value::Null;
        values[0] = Value::Null;
        assert_eq!(
            encode_row(&columns, &values),
            Err(CatalogError::NullNotAllowed {
                column: "id".into()
            })
        );
        values[0] = Value::Int32(1);
        assert!(matches!(
            encode_row(&columns, &values),
            Err(CatalogError::TypeMismatch { found: "INT32", .. })
        ));
        assert!(matches!(
            encode_row(&columns, &values[..3]),
            Err(CatalogError::ColumnCount {
                expected: 9,
                found: 3
            })
        ));
    }

    #[test]
    fn decode_row_rejects_what_encode_cannot_produce() {
        let bool_col = [Column::new("a", ColumnType::Bool, false)];
        let malformed = |columns: &[Column], bytes: &[u8]| {
            matches!(
                decode_row(columns, bytes),
                Err(CatalogError::Malformed { .. })
            )
        };
        assert!(!malformed(&bool_col, &[ROW_FORMAT_VERSION, 0, 1]));
        assert!(malformed(&bool_col, &[]));
        assert!(malformed(&bool_col, &[2, 0, 1]));
        assert!(malformed(&bool_col, &[ROW_FORMAT_VERSION, 0, 2]));
        assert!(malformed(&bool_col, &[ROW_FORMAT_VERSION, 0, 1, 0]));
        assert!(malformed(&bool_col, &[ROW_FORMAT_VERSION, 0]));
        // NULL in a NOT NULL column, and a bitmap bit past the last column.
        assert!(malformed(&bool_col, &[ROW_FORMAT_VERSION, 1]));
        assert!(malformed(&bool_col, &[ROW_FORMAT_VERSION, 2, 1]));
        let text = [Column::new("t", ColumnType::Text { max_len: 2 }, false)];
        assert!(malformed(
            &text,
            &[ROW_FORMAT_VERSION, 0, 3, b'a', b'b', b'c']
        ));
        assert!(malformed(&text, &[ROW_FORMAT_VERSION, 0, 2, 0xC3, 0x28]));
        assert!(malformed(&text, &[ROW_FORMAT_VERSION, 0, 2, b'a']));
        // A huge declared length fails the limit check, allocating nothing.
        let bytes = [Column::new(
            "b",
            ColumnType::Bytes { max_len: u32::MAX },
            false,
        )];
        assert!(malformed(
            &bytes,
            &[ROW_FORMAT_VERSION, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]
        ));
        assert!(malformed(
            &bytes,
            &[ROW_FORMAT_VERSION, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x1F]
        ));
        assert!(malformed(
            &bytes,
            &[ROW_FORMAT_VERSION, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0]
        ));
    }

    #[test]
    fn empty_schema() {
        let bytes = encode_row(&[], &[]).unwrap();
        assert_eq!(bytes, [ROW_FORMAT_VERSION]);
        assert_eq!(decode_row(&[], &bytes), Ok(vec![]));
    }

    #[test]
    fn utf8_agrees_with_std_at_every_length_and_offset() {
        // A high byte at each position of each length up to 40 (so in a
        // word and in the tail), and valid multi-byte text.
        for len in 0..40usize {
            let ascii = vec![b'a'; len];
            assert_eq!(utf8(&ascii), std::str::from_utf8(&ascii));
            for at in 0..len {
                for high in [0x80u8, 0xC3, 0xFF] {
                    let mut b = ascii.clone();
                    b[at] = high;
                    assert_eq!(utf8(&b), std::str::from_utf8(&b), "len {len} at {at}");
                }
            }
        }
        let text = "déjà vu, 東京, \u{1F600}".repeat(3);
        assert_eq!(utf8(text.as_bytes()), Ok(text.as_str()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A row with one value filled in checks and encodes exactly as
        /// the row with that value in place: the same bytes, or the same
        /// error (a NULL filled into a NOT NULL column, a value of another
        /// column's type).
        #[test]
        fn a_filled_row_is_the_row_with_the_value_in_place(
            (columns, rows) in arb_schema_and_rows(6, 2..3),
            at in any::<prop::sample::Index>(),
            null in any::<bool>(),
            shift in any::<bool>(),
        ) {
            let (a, b) = (&rows[0], &rows[1]);
            let at = at.index(columns.len());
            // Usually the other row's value of that column; sometimes a
            // NULL, or the value of the next column (maybe the wrong type).
            let value = if null {
                Value::Null
            } else if shift {
                b[(at + 1) % b.len()].clone()
            } else {
                b[at].clone()
            };
            let filled = FilledRow::with(a, at, &value);
            let mut whole = a.clone();
            whole[at] = value.clone();
            let read: Vec<Value> = filled.iter().cloned().collect();
            prop_assert!(same_bits(&read, &whole));
            prop_assert_eq!(filled.len(), whole.len());
            prop_assert_eq!(
                encode_filled_row(&columns, filled, 0),
                encode_row(&columns, &whole)
            );
            // With room in front: the same row after it.
            let roomy = encode_filled_row(&columns, FilledRow::new(a), 3);
            let row = encode_row(&columns, a);
            prop_assert_eq!(roomy.is_ok(), row.is_ok());
            if let (Ok(roomy), Ok(row)) = (roomy, row) {
                prop_assert_eq!(&roomy[..3], &[0u8; 3][..]);
                prop_assert_eq!(&roomy[3..], row.as_slice());
            }
        }

        /// `iter` reads every column as `get` does, past the kept
        /// positions too (one walk instead of one per column).
        #[test]
        fn iter_reads_each_column_as_get_does((columns, values) in arb_schema_and_row(24)) {
            if let Ok(bytes) = encode_row(&columns, &values) {
                let row = RowRef::new(&columns, &bytes).unwrap();
                let all: Vec<_> = row.iter().collect();
                prop_assert_eq!(all.len(), columns.len());
                for (i, v) in all.into_iter().enumerate() {
                    // (Compared bit for bit: a NaN is not equal to itself.)
                    let (got, want) = (v.unwrap().to_owned(), row.get(i).unwrap().to_owned());
                    prop_assert!(same_bits(&[got], &[want]), "column {}", i);
                }
            }
        }

        /// An updated row encodes as the old row's values with the
        /// changes in place (the last change of a column counts): the
        /// same bytes, or an error exactly when the whole row with the
        /// changes would be refused. Rows of up to 12 columns, so some
        /// columns are past the kept positions.
        #[test]
        fn an_updated_row_is_the_old_row_with_the_changes_in_place(
            (columns, rows) in arb_schema_and_rows(12, 2..3),
            picks in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..4), 0..5),
            room in 0usize..20,
        ) {
            let (a, b) = (&rows[0], &rows[1]);
            let Ok(old_bytes) = encode_row(&columns, a) else {
                return Ok(());
            };
            let old = RowRef::new(&columns, &old_bytes).unwrap();
            // Mostly the other row's value of that column; sometimes a
            // NULL, or the value of the next column (maybe the wrong type).
            let changes: Vec<(usize, Value)> = picks
                .iter()
                .map(|(at, how)| {
                    let at = at.index(columns.len());
                    let v = match how {
                        0 => Value::Null,
                        1 => b[(at + 1) % b.len()].clone(),
                        _ => b[at].clone(),
                    };
                    (at, v)
                })
                .collect();
            let mut whole = a.clone();
            for (c, v) in &changes {
                whole[*c] = v.clone();
            }
            let updated = encode_updated_row(&old, &changes, room);
            // As the whole row with the changes in place: a value a later
            // change of its column replaces is not checked.
            match encode_row(&columns, &whole) {
                Ok(want) => {
                    let got = updated.unwrap();
                    prop_assert_eq!(&got[..room], &vec![0u8; room][..]);
                    prop_assert_eq!(&got[room..], want.as_slice());
                }
                _ => prop_assert!(updated.is_err()),
            }
        }

        #[test]
        fn utf8_is_std_from_utf8(bytes in proptest::collection::vec(
            prop_oneof![4 => 0u8..0x80, 1 => any::<u8>()], 0..80,
        )) {
            prop_assert_eq!(utf8(&bytes), std::str::from_utf8(&bytes));
        }

        #[test]
        fn row_round_trip((columns, values) in arb_schema_and_row(24)) {
            let bytes = encode_row(&columns, &values).unwrap();
            let back = decode_row(&columns, &bytes).unwrap();
            prop_assert!(same_bits(&back, &values), "{back:?} vs {values:?}");
            // Trailing bytes and truncation are errors.
            let mut longer = bytes.clone();
            longer.push(0);
            prop_assert!(decode_row(&columns, &longer).is_err());
            prop_assert!(decode_row(&columns, &bytes[..bytes.len() - 1]).is_err());
            // Read in place, the same row, and the same refusals.
            check_row_ref(&columns, &bytes, Some(back));
            check_row_ref(&columns, &longer, None);
            check_row_ref(&columns, &bytes[..bytes.len() - 1], None);
            let row = RowRef::new(&columns, &bytes).unwrap();
            for (i, v) in values.iter().enumerate() {
                let got = row.get(i).unwrap().to_owned();
                prop_assert!(same_bits(&[got], std::slice::from_ref(v)));
            }
            prop_assert!(row.get(values.len()).is_err(), "a column past the last");
        }

        /// `to_values_where` gives the needed columns as `get` does, and
        /// NULL for the others (past the kept positions too: schemas of
        /// up to 24 columns).
        #[test]
        fn to_values_where_takes_the_needed_columns(
            (columns, values) in arb_schema_and_row(24),
            needed in proptest::collection::vec(any::<bool>(), 0..26),
        ) {
            let bytes = encode_row(&columns, &values).unwrap();
            let row = RowRef::new(&columns, &bytes).unwrap();
            let got = row.to_values_where(&needed).unwrap();
            prop_assert_eq!(got.len(), values.len());
            for (i, (g, v)) in got.iter().zip(&values).enumerate() {
                if needed.get(i).copied().unwrap_or(false) {
                    prop_assert!(same_bits(std::slice::from_ref(g), std::slice::from_ref(v)));
                } else {
                    prop_assert_eq!(g, &Value::Null);
                }
            }
        }

        /// One vector reused row after row (as a scan reuses it) holds
        /// each row's needed columns and NULL for the others, whatever
        /// the rows before it left in it.
        #[test]
        fn values_into_reuses_one_vector(
            (columns, rows) in arb_schema_and_rows(24, 1..6),
            masks in proptest::collection::vec(
                proptest::option::of(proptest::collection::vec(any::<bool>(), 0..26)), 6),
        ) {
            let mut into = Vec::new();
            for (values, needed) in rows.iter().zip(&masks) {
                let bytes = encode_row(&columns, values).unwrap();
                let row = RowRef::new(&columns, &bytes).unwrap();
                row.values_into(needed.as_deref(), &mut into).unwrap();
                prop_assert_eq!(into.len(), values.len());
                for (i, (g, v)) in into.iter().zip(values).enumerate() {
                    if needed.as_ref().is_none_or(|n| n.get(i).copied().unwrap_or(false)) {
                        prop_assert!(same_bits(std::slice::from_ref(g), std::slice::from_ref(v)));
                    } else {
                        prop_assert_eq!(g, &Value::Null);
                    }
                }
            }
        }

        /// Garbage never panics, and whatever decodes re-encodes to the
        /// same bytes (RF1: only what encode_row produces is accepted).
        #[test]
        fn decode_row_garbage_never_panics(
            columns in proptest::collection::vec(arb_column(), 0..10),
            tail in proptest::collection::vec(
                prop_oneof![Just(0u8), Just(1), Just(0x80), Just(0xFF), any::<u8>()], 0..48),
            versioned in any::<bool>(),
        ) {
            let mut bytes = Vec::new();
            if versioned {
                bytes.push(ROW_FORMAT_VERSION);
            }
            bytes.extend_from_slice(&tail);
            let decoded = decode_row(&columns, &bytes).ok();
            if let Some(values) = &decoded {
                prop_assert_eq!(&encode_row(&columns, values).unwrap(), &bytes);
            }
            check_row_ref(&columns, &bytes, decoded);
        }

        /// Byte-flipped valid rows never panic, and are either rejected or
        /// canonical.
        #[test]
        fn decode_row_mutated_never_panics(
            (columns, values) in arb_schema_and_row(8),
            flip in any::<prop::sample::Index>(),
            with in any::<u8>(),
        ) {
            let mut bytes = encode_row(&columns, &values).unwrap();
            let at = flip.index(bytes.len());
            bytes[at] = with;
            let decoded = decode_row(&columns, &bytes).ok();
            if let Some(back) = &decoded {
                prop_assert_eq!(&encode_row(&columns, back).unwrap(), &bytes);
            }
            check_row_ref(&columns, &bytes, decoded);
        }
    }
}
