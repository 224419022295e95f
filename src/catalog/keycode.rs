//! The order-preserving key encoding (invariants KC1 to KC3 of
//! [`crate::catalog`]): index keys are tuples of values encoded so that
//! memcmp on the bytes is the tuple order, and each value is
//! self-delimiting so tuples concatenate (a secondary index entry's key is
//! the secondary key columns followed by the primary key columns).
//!
//! Layout of one value: a tag byte, then (for non-NULL) the payload.
//!
//! | value     | bytes                                                    |
//! |-----------|----------------------------------------------------------|
//! | NULL      | [`TAG_NULL`] (`0x01`)                                    |
//! | bool      | [`TAG_VALUE`] (`0x02`), `0x00` (false) or `0x01` (true)  |
//! | int32     | tag, 4 bytes big-endian of the value with its sign bit flipped |
//! | int64, timestamp | tag, 8 bytes big-endian, sign bit flipped         |
//! | float64   | tag, 8 bytes big-endian of the sign-flip transform: for a non-negative float the bits with the sign bit set, for a negative one all bits inverted |
//! | text, bytes | tag, the bytes with each `0x00` written `0x00 0xFF`, then the terminator `0x00 0x00` |
//!
//! Floats are normalised first: `-0.0` becomes `+0.0` and every NaN (any
//! sign, any payload) becomes the positive quiet NaN `0x7FF8_0000_0000_0000`,
//! which the transform puts after `+inf`. So in keys `-0.0 == +0.0`, all
//! NaNs are equal and sort last, and decoding gives back the normalised
//! value. Tags `0x00` and `0xFF` are never produced: they are free for
//! bounds that sort before or after every value of a column.
//!
//! The escape keeps order: `0x00 0xFF` sorts after the terminator
//! `0x00 0x00`, so a string sorts after every proper prefix of it, and
//! before any string that is bytewise greater. Nothing here checks types
//! or length limits: check values with [`crate::catalog::check_value`]
//! before encoding, and decode with the same column types they were
//! encoded with.

use super::{CatalogError, ColumnType, Reader, Value, ValueRef};

/// Tag byte of a NULL value (lower than [`TAG_VALUE`], so NULL sorts first).
pub const TAG_NULL: u8 = 0x01;
/// Tag byte of a non-NULL value.
pub const TAG_VALUE: u8 = 0x02;

const SIGN32: u32 = 1 << 31;
const SIGN64: u64 = 1 << 63;
/// The one NaN that keys hold.
const CANONICAL_NAN: u64 = 0x7FF8_0000_0000_0000;
const NEG_ZERO: u64 = 1 << 63;

/// Appends the encoding of the tuple `values` to `out`.
///
/// Encoding a prefix of a tuple (its first `k` values) gives a byte prefix
/// of the full tuple's encoding; use it with [`prefix_end`] to scan all
/// keys whose first `k` columns equal those values (KC2).
pub fn encode_key(values: &[Value], out: &mut Vec<u8>) {
    encode_key_refs(values.iter().map(ValueRef::from), out);
}

/// [`encode_key`] for borrowed values (columns read in place, a row's key
/// columns picked out of it): the same bytes, nothing cloned.
pub fn encode_key_refs<'v>(values: impl IntoIterator<Item = ValueRef<'v>>, out: &mut Vec<u8>) {
    #[cfg(debug_assertions)]
    let (start, mut seen) = (out.len(), Vec::new());
    for value in values {
        #[cfg(debug_assertions)]
        seen.push(value.to_owned());
        encode_value(value, out);
    }
    #[cfg(debug_assertions)]
    #[allow(clippy::indexing_slicing)] // `start` was `out.len()`; `out` only grew
    debug_check_canonical(&seen, &out[start..]);
}

/// KC3 in debug builds: the encoding decodes (with the values' own types)
/// and re-encodes to the same bytes.
#[cfg(debug_assertions)]
fn debug_check_canonical(values: &[Value], bytes: &[u8]) {
    let types: Vec<ColumnType> = values
        .iter()
        .map(|v| match v {
            // NULL decodes the same for every type.
            Value::Null | Value::Bool(_) => ColumnType::Bool,
            Value::Int32(_) => ColumnType::Int32,
            Value::Int64(_) => ColumnType::Int64,
            Value::Timestamp(_) => ColumnType::Timestamp,
            Value::Float64(_) => ColumnType::Float64,
            Value::Text(_) => ColumnType::Text { max_len: u32::MAX },
            Value::Bytes(_) => ColumnType::Bytes { max_len: u32::MAX },
        })
        .collect();
    let again = decode_key(bytes, &types).map(|back| {
        let mut out = Vec::with_capacity(bytes.len());
        for value in &back {
            encode_value(value.into(), &mut out);
        }
        out
    });
    debug_assert!(
        again.as_deref() == Ok(bytes),
        "catalog KC3: key {bytes:02x?} of {values:?} does not round-trip: {again:?}"
    );
}

/// Appends the encoding of one value, borrowed (a column read in place,
/// [`crate::catalog::RowRef::get`]): a tuple encoded value by value is
/// what [`encode_key`] gives for the owned values.
#[inline]
fn encode_value(value: ValueRef<'_>, out: &mut Vec<u8>) {
    if let Some(fixed) = fixed_encoding(value) {
        out.extend_from_slice(fixed.as_slice());
        return;
    }
    out.push(TAG_VALUE);
    match value {
        ValueRef::Text(s) => encode_escaped(s.as_bytes(), out),
        ValueRef::Bytes(b) => encode_escaped(b, out),
        // Every other value has a fixed encoding (above).
        _ => debug_assert!(false, "keycode: {value:?} has no fixed encoding"),
    }
}

/// The encoding of a value of fixed length (NULL, bool, integers,
/// timestamps, floats), on the stack; `None` for text and bytes.
#[inline]
fn fixed_encoding(value: ValueRef<'_>) -> Option<FixedKey> {
    let mut b = [TAG_VALUE; 9];
    let len = match value {
        ValueRef::Null => {
            b[0] = TAG_NULL;
            1
        }
        ValueRef::Bool(v) => {
            b[1] = u8::from(v);
            2
        }
        ValueRef::Int32(v) => {
            b[1..5].copy_from_slice(&(v.cast_unsigned() ^ SIGN32).to_be_bytes());
            5
        }
        ValueRef::Int64(v) | ValueRef::Timestamp(v) => {
            b[1..9].copy_from_slice(&(v.cast_unsigned() ^ SIGN64).to_be_bytes());
            9
        }
        ValueRef::Float64(f) => {
            b[1..9].copy_from_slice(&float_to_key(f).to_be_bytes());
            9
        }
        ValueRef::Text(_) | ValueRef::Bytes(_) => return None,
    };
    Some(FixedKey { b, len })
}

/// A value's encoding of at most 9 bytes (a tag and 8 bytes).
struct FixedKey {
    b: [u8; 9],
    len: usize,
}

impl FixedKey {
    #[inline]
    fn as_slice(&self) -> &[u8] {
        self.b.get(..self.len).unwrap_or(&self.b)
    }
}

/// `key` after the encoding of `value`, if `key` starts with it (as
/// `key.strip_prefix` of [`encode_key_refs`]'s bytes for `value` answers):
/// how a reader checks that an index entry's key holds a row's values, one
/// column at a time, without building the row's key. Values of fixed
/// length are compared from the stack ([`fixed_encoding`]); text and
/// bytes are encoded into `scratch` (cleared first).
pub(crate) fn strip_encoded<'k>(
    value: ValueRef<'_>,
    key: &'k [u8],
    scratch: &mut Vec<u8>,
) -> Option<&'k [u8]> {
    match fixed_encoding(value) {
        Some(fixed) => key.strip_prefix(fixed.as_slice()),
        None => {
            scratch.clear();
            encode_value(value, scratch);
            key.strip_prefix(scratch.as_slice())
        }
    }
}

fn float_to_key(f: f64) -> u64 {
    let bits = if f.is_nan() {
        CANONICAL_NAN
    } else if f == 0.0 {
        0 // both zeros become +0.0
    } else {
        f.to_bits()
    };
    if bits & SIGN64 != 0 {
        !bits
    } else {
        bits | SIGN64
    }
}

fn encode_escaped(bytes: &[u8], out: &mut Vec<u8>) {
    // Every 0x00 ends a chunk: write it escaped before the next chunk.
    for (i, chunk) in bytes.split(|&b| b == 0).enumerate() {
        if i > 0 {
            out.extend_from_slice(&[0x00, 0xFF]);
        }
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&[0x00, 0x00]);
}

/// Decodes a whole key of the given column types. Every byte must be used;
/// see [`decode_key_prefix`] to decode leading columns only.
///
/// Accepts exactly what [`encode_key`] produces (KC3): wrong tags,
/// truncation, bools other than 0/1, non-canonical floats (`-0.0`, other
/// NaNs), bad escapes, invalid UTF-8 in text and trailing bytes are
/// [`CatalogError::Malformed`]. Length limits are not checked.
pub fn decode_key(bytes: &[u8], types: &[ColumnType]) -> Result<Vec<Value>, CatalogError> {
    let (values, rest) = decode_key_prefix(bytes, types)?;
    if rest.is_empty() {
        Ok(values)
    } else {
        Err(CatalogError::Malformed {
            offset: bytes.len().saturating_sub(rest.len()),
            reason: format!("{} trailing bytes after the key", rest.len()),
        })
    }
}

/// Decodes one value per entry of `types` from the start of `bytes` and
/// returns them with the bytes that follow (for example, the primary key
/// columns after a secondary key's columns).
pub fn decode_key_prefix<'a>(
    bytes: &'a [u8],
    types: &[ColumnType],
) -> Result<(Vec<Value>, &'a [u8]), CatalogError> {
    let mut r = Reader::new(bytes);
    let mut values = Vec::with_capacity(types.len());
    let mut buf = Vec::new();
    for ty in types {
        values.push(read_value(&mut r, ty, &mut buf)?.to_owned());
    }
    Ok((values, r.rest()))
}

/// The length of the leading values of `bytes`, one per entry of `types`,
/// checked as [`decode_key_prefix`] checks them but not kept: where a
/// secondary index entry's primary key starts. Allocates nothing unless a
/// text or bytes value has an escaped zero byte.
pub fn key_prefix_len<'t>(
    bytes: &[u8],
    types: impl IntoIterator<Item = &'t ColumnType>,
) -> Result<usize, CatalogError> {
    let mut r = Reader::new(bytes);
    let mut buf = Vec::new();
    for ty in types {
        // An integer or timestamp with its value tag, whole: every payload
        // of that width is valid, so it is stepped over (a secondary
        // key's columns are mostly these). Anything else, and any damage,
        // is read as `decode_key_prefix` reads it.
        let width = match ty {
            ColumnType::Int32 => 4,
            ColumnType::Int64 | ColumnType::Timestamp => 8,
            _ => 0,
        };
        if width > 0 && r.rest().first() == Some(&TAG_VALUE) && r.rest().len() > width {
            r.take(1 + width, "key value")?;
            continue;
        }
        read_value(&mut r, ty, &mut buf)?;
    }
    Ok(r.pos())
}

/// Read one value of type `ty`, checked (KC3). Text and bytes are
/// borrowed from `r`'s bytes when they hold no escaped zero, and
/// unescaped into `buf` (cleared first) when they do.
fn read_value<'a: 'v, 'b: 'v, 'v>(
    r: &mut Reader<'a>,
    ty: &ColumnType,
    buf: &'b mut Vec<u8>,
) -> Result<ValueRef<'v>, CatalogError> {
    match r.u8("key tag")? {
        TAG_NULL => return Ok(ValueRef::Null),
        TAG_VALUE => {}
        tag => {
            return Err(CatalogError::Malformed {
                offset: r.pos() - 1, // the tag byte was just read
                reason: format!("key tag {tag:#04x} is neither NULL nor value"),
            });
        }
    }
    Ok(match ty {
        ColumnType::Bool => match r.u8("bool")? {
            0 => ValueRef::Bool(false),
            1 => ValueRef::Bool(true),
            other => return Err(r.error(format!("bool byte {other:#04x} is not 0 or 1"))),
        },
        ColumnType::Int32 => {
            ValueRef::Int32((u32::from_be_bytes(r.array("int32")?) ^ SIGN32).cast_signed())
        }
        ColumnType::Int64 => {
            ValueRef::Int64((u64::from_be_bytes(r.array("int64")?) ^ SIGN64).cast_signed())
        }
        ColumnType::Timestamp => {
            ValueRef::Timestamp((u64::from_be_bytes(r.array("timestamp")?) ^ SIGN64).cast_signed())
        }
        ColumnType::Float64 => {
            let key = u64::from_be_bytes(r.array("float64")?);
            let bits = if key & SIGN64 != 0 {
                key ^ SIGN64
            } else {
                !key
            };
            let f = f64::from_bits(bits);
            if bits == NEG_ZERO || (f.is_nan() && bits != CANONICAL_NAN) {
                return Err(r.error(format!("float64 bits {bits:#018x} are not normalised")));
            }
            ValueRef::Float64(f)
        }
        ColumnType::Text { .. } => {
            let start = r.pos();
            let raw = read_escaped(r, buf)?;
            let text = super::row::utf8(raw).map_err(|e| CatalogError::Malformed {
                offset: start,
                reason: format!("text is not UTF-8: {e}"),
            })?;
            ValueRef::Text(text)
        }
        ColumnType::Bytes { .. } => ValueRef::Bytes(read_escaped(r, buf)?),
    })
}

/// An escaped text/bytes payload and its terminator: borrowed when it
/// has no escape, else unescaped into `buf`.
fn read_escaped<'a: 'v, 'b: 'v, 'v>(
    r: &mut Reader<'a>,
    buf: &'b mut Vec<u8>,
) -> Result<&'v [u8], CatalogError> {
    let mut copied = false;
    loop {
        let Some(zero) = r.rest().iter().position(|&b| b == 0) else {
            return Err(r.error("text/bytes value has no terminator"));
        };
        let chunk = r.take(zero, "text/bytes")?;
        let [_, escape] = r.array::<2>("text/bytes escape")?;
        match escape {
            0x00 if !copied => return Ok(chunk),
            0x00 => {
                buf.extend_from_slice(chunk);
                return Ok(buf);
            }
            0xFF => {
                if !copied {
                    buf.clear();
                    copied = true;
                }
                buf.extend_from_slice(chunk);
                buf.push(0);
            }
            other => {
                return Err(r.error(format!(
                    "byte {other:#04x} after 0x00 is neither 0xFF (escape) nor 0x00 (end)"
                )));
            }
        }
    }
}

/// The smallest byte string greater than every string that starts with
/// `prefix`, or `None` if there is none (`prefix` is empty or all `0xFF`).
/// Keys starting with `prefix` are exactly the range
/// `[prefix, prefix_end(prefix))`.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xFF)?;
    // In bounds: `rposition` found index `keep` in `prefix`, and that byte
    // is not 0xFF, so adding one cannot overflow.
    #[allow(clippy::indexing_slicing)]
    let end = {
        let mut end = prefix[..=keep].to_vec();
        end[keep] += 1;
        end
    };
    // KC2: the end is above `prefix` and is no prefix of anything that
    // starts with it.
    debug_assert!(end.as_slice() > prefix && !end.starts_with(prefix));
    Some(end)
}

/// The longest encoding [`encode_key`] can give a value of type `ty`
/// that passed [`crate::catalog::check_value`]: the tag and the payload;
/// for text and bytes every byte escaped (a string of `0x00` bytes) plus
/// the terminator, `3 + 2 * max_len`. Schemas are checked against this
/// bound (catalog invariant C4), so no key a statement can build exceeds
/// the B+tree's key limit.
pub fn max_encoded_len(ty: &ColumnType) -> u64 {
    match ty {
        ColumnType::Bool => 2,
        ColumnType::Int32 => 5,
        ColumnType::Int64 | ColumnType::Timestamp | ColumnType::Float64 => 9,
        ColumnType::Text { max_len } | ColumnType::Bytes { max_len } => 3 + 2 * u64::from(*max_len),
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use super::*;
    use crate::catalog::types::tests::{arb_non_null, arb_type};
    use proptest::prelude::*;

    proptest! {
        /// Every checked value encodes within `max_encoded_len` of its
        /// type (the bound schemas are checked against, C4).
        #[test]
        fn encodings_stay_within_the_bound((ty, v) in arb_type().prop_flat_map(|ty| (Just(ty), arb_non_null(ty)))) {
            prop_assert!(key(std::slice::from_ref(&v)).len() as u64 <= max_encoded_len(&ty), "{v:?} of {ty}");
        }
    }

    #[test]
    fn the_worst_text_meets_the_bound() {
        let ty = ColumnType::Text { max_len: 5 };
        let v = Value::Text("\0\0\0\0\0".into());
        assert_eq!(key(&[v]).len() as u64, max_encoded_len(&ty));
    }

    fn key(values: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_key(values, &mut out);
        out
    }

    /// The model order on one column, written independently of the
    /// encoding: NULL first, then by value; floats by `partial_cmp` (so
    /// `-0.0 == 0.0`) with all NaNs equal and after everything else.
    fn model_cmp_value(a: &Value, b: &Value) -> Ordering {
        match (a, b) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Less,
            (_, Value::Null) => Ordering::Greater,
            (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
            (Value::Int32(x), Value::Int32(y)) => x.cmp(y),
            (Value::Int64(x), Value::Int64(y)) => x.cmp(y),
            (Value::Timestamp(x), Value::Timestamp(y)) => x.cmp(y),
            (Value::Float64(x), Value::Float64(y)) => match (x.is_nan(), y.is_nan()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => x.partial_cmp(y).unwrap(),
            },
            (Value::Text(x), Value::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
            (Value::Bytes(x), Value::Bytes(y)) => x.cmp(y),
            _ => panic!("model compares values of different types: {a:?} {b:?}"),
        }
    }

    /// Lexicographic tuple order over `model_cmp_value`.
    fn model_cmp(a: &[Value], b: &[Value]) -> Ordering {
        for (x, y) in a.iter().zip(b) {
            let ord = model_cmp_value(x, y);
            if ord != Ordering::Equal {
                return ord;
            }
        }
        a.len().cmp(&b.len())
    }

    /// What decoding a key gives back: floats normalised.
    fn normalised(values: &[Value]) -> Vec<Value> {
        values
            .iter()
            .map(|v| match v {
                Value::Float64(f) if f.is_nan() => Value::Float64(f64::from_bits(CANONICAL_NAN)),
                Value::Float64(f) if *f == 0.0 => Value::Float64(0.0),
                v => v.clone(),
            })
            .collect()
    }

    fn arb_maybe_null(ty: ColumnType) -> BoxedStrategy<Value> {
        prop_oneof![1 => Just(Value::Null), 5 => arb_non_null(ty)].boxed()
    }

    fn arb_tuple(types: &[ColumnType]) -> Vec<BoxedStrategy<Value>> {
        types.iter().map(|ty| arb_maybe_null(*ty)).collect()
    }

    /// Column types and one tuple of them.
    fn arb_typed_tuple() -> impl Strategy<Value = (Vec<ColumnType>, Vec<Value>)> {
        proptest::collection::vec(arb_type(), 1..6)
            .prop_flat_map(|types| (arb_tuple(&types), Just(types)))
            .prop_map(|(values, types)| (types, values))
    }

    /// Column types and two tuples of them. The second tuple copies a
    /// random-length prefix of the first half of the time, so ties on
    /// leading columns (decided by later ones) are common.
    fn arb_typed_pair() -> impl Strategy<Value = (Vec<ColumnType>, Vec<Value>, Vec<Value>)> {
        proptest::collection::vec(arb_type(), 1..6)
            .prop_flat_map(|types| {
                let n = types.len();
                (
                    arb_tuple(&types),
                    arb_tuple(&types),
                    0..=n,
                    any::<bool>(),
                    Just(types),
                )
            })
            .prop_map(|(a, mut b, k, share, types)| {
                if share {
                    for (bv, av) in b.iter_mut().zip(&a).take(k) {
                        *bv = av.clone();
                    }
                }
                (types, a, b)
            })
    }

    fn same_bits(a: &[Value], b: &[Value]) -> bool {
        crate::catalog::types::tests::same_bits(a, b)
    }

    #[test]
    fn golden_encodings() {
        assert_eq!(key(&[Value::Null]), [TAG_NULL]);
        assert_eq!(key(&[Value::Bool(true)]), [TAG_VALUE, 1]);
        assert_eq!(key(&[Value::Int32(1)]), [TAG_VALUE, 0x80, 0, 0, 1]);
        assert_eq!(
            key(&[Value::Int32(-1)]),
            [TAG_VALUE, 0x7F, 0xFF, 0xFF, 0xFF]
        );
        assert_eq!(
            key(&[Value::Int64(i64::MIN)]),
            [TAG_VALUE, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            key(&[Value::Float64(1.0)]),
            [TAG_VALUE, 0xBF, 0xF0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(key(&[Value::Float64(-0.0)]), key(&[Value::Float64(0.0)]));
        assert_eq!(
            key(&[Value::Float64(-f64::NAN)]),
            [TAG_VALUE, 0xFF, 0xF8, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            key(&[Value::Text("a\0".into()), Value::Bytes(vec![])]),
            [
                TAG_VALUE, b'a', 0x00, 0xFF, 0x00, 0x00, TAG_VALUE, 0x00, 0x00
            ]
        );
    }

    #[test]
    fn float_order_edges() {
        let order = [
            f64::NEG_INFINITY,
            f64::MIN,
            -1.0,
            -f64::MIN_POSITIVE,
            -f64::from_bits(1), // largest negative subnormal
            0.0,
            f64::from_bits(1),
            f64::MIN_POSITIVE,
            1.0,
            f64::MAX,
            f64::INFINITY,
            f64::NAN,
        ];
        for pair in order.windows(2) {
            assert!(
                key(&[Value::Float64(pair[0])]) < key(&[Value::Float64(pair[1])]),
                "{} < {}",
                pair[0],
                pair[1]
            );
        }
        let nan_payload = f64::from_bits(0xFFF0_0000_0000_0001);
        assert!(nan_payload.is_nan());
        assert_eq!(
            key(&[Value::Float64(nan_payload)]),
            key(&[Value::Float64(f64::NAN)])
        );
    }

    #[test]
    fn decode_rejects_malformed() {
        let malformed = |bytes: &[u8], types: &[ColumnType]| {
            matches!(
                decode_key(bytes, types),
                Err(CatalogError::Malformed { .. })
            )
        };
        let text = ColumnType::Text { max_len: 10 };
        assert!(malformed(&[], &[ColumnType::Bool]));
        assert!(malformed(&[0x03, 0], &[ColumnType::Bool]));
        assert!(malformed(&[TAG_VALUE, 2], &[ColumnType::Bool]));
        assert!(malformed(&[TAG_VALUE, 0x80, 0, 0], &[ColumnType::Int32]));
        assert!(malformed(
            &[TAG_VALUE, 0x80, 0, 0, 0, 0],
            &[ColumnType::Int32]
        ));
        assert!(malformed(&[TAG_VALUE, b'a'], &[text]));
        assert!(malformed(&[TAG_VALUE, b'a', 0], &[text]));
        assert!(malformed(&[TAG_VALUE, b'a', 0, 1], &[text]));
        assert!(malformed(&[TAG_VALUE, 0xC3, 0, 0], &[text]));
        // -0.0 and a NaN other than the canonical one.
        assert!(malformed(&key_bits(NEG_ZERO), &[ColumnType::Float64]));
        assert!(malformed(
            &key_bits(0x7FF8_0000_0000_0001),
            &[ColumnType::Float64]
        ));
        assert!(malformed(
            &key_bits(0xFFF8_0000_0000_0000),
            &[ColumnType::Float64]
        ));
        // Invalid UTF-8 is fine for bytes.
        assert_eq!(
            decode_key(
                &[TAG_VALUE, 0xC3, 0, 0],
                &[ColumnType::Bytes { max_len: 1 }]
            ),
            Ok(vec![Value::Bytes(vec![0xC3])])
        );
        // Length limits are the caller's business, not the decoder's.
        assert_eq!(
            decode_key(
                &[TAG_VALUE, b'a', b'b', 0, 0],
                &[ColumnType::Text { max_len: 1 }]
            ),
            Ok(vec![Value::Text("ab".into())])
        );
    }

    /// A Float64 key holding raw bits (bypassing normalisation).
    fn key_bits(bits: u64) -> Vec<u8> {
        let k = if bits & SIGN64 != 0 {
            !bits
        } else {
            bits | SIGN64
        };
        let mut out = vec![TAG_VALUE];
        out.extend_from_slice(&k.to_be_bytes());
        out
    }

    #[test]
    fn prefix_end_cases() {
        assert_eq!(prefix_end(&[]), None);
        assert_eq!(prefix_end(&[0xFF, 0xFF]), None);
        assert_eq!(prefix_end(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn key_round_trip((types, values) in arb_typed_tuple()) {
            let bytes = key(&values);
            let back = decode_key(&bytes, &types).unwrap();
            prop_assert!(same_bits(&back, &normalised(&values)), "{back:?} vs {values:?}");
            // Canonical: re-encoding the decoded key gives the same bytes.
            prop_assert_eq!(key(&back), bytes.clone());
            // Self-delimiting: decoding with trailing bytes leaves them.
            let mut longer = bytes.clone();
            longer.extend_from_slice(&[0, 0xFF, 7]);
            let (back2, rest) = decode_key_prefix(&longer, &types).unwrap();
            prop_assert!(same_bits(&back2, &back));
            prop_assert_eq!(rest, &[0u8, 0xFF, 7][..]);
            prop_assert!(decode_key(&longer, &types).is_err());
        }

        #[test]
        fn key_order_matches_model((_types, a, b) in arb_typed_pair()) {
            prop_assert_eq!(key(&a).cmp(&key(&b)), model_cmp(&a, &b), "{:?} vs {:?}", a, b);
        }

        /// KC2: a prefix encoding is a byte prefix of the full encoding, and
        /// a full encoding starts with a prefix encoding (equivalently lies
        /// in `[prefix, prefix_end(prefix))`) exactly when the leading
        /// values are equal in the model.
        #[test]
        fn key_prefix_property((types, a, b) in arb_typed_pair(), k in 0usize..6) {
            let k = k.min(types.len());
            let prefix = key(&a[..k]);
            let full_a = key(&a);
            prop_assert!(full_a.starts_with(&prefix));
            let full_b = key(&b);
            let equal_leading = model_cmp(&a[..k], &b[..k]) == Ordering::Equal;
            prop_assert_eq!(full_b.starts_with(&prefix), equal_leading);
            let in_range = prefix <= full_b
                && prefix_end(&prefix).is_none_or(|end| full_b < end);
            prop_assert_eq!(in_range, equal_leading);
            let (lead, _) = decode_key_prefix(&full_b, &types[..k]).unwrap();
            prop_assert_eq!(lead.len(), k);
        }

        /// Garbage never panics, and whatever decodes re-encodes to the
        /// same bytes (only canonical encodings are accepted). The prefix
        /// length agrees with the prefix decoder on every input.
        #[test]
        fn decode_garbage_never_panics(
            types in proptest::collection::vec(arb_type(), 0..5),
            bytes in proptest::collection::vec(
                prop_oneof![Just(0u8), Just(1), Just(2), Just(0xFF), any::<u8>()], 0..40),
        ) {
            if let Ok(values) = decode_key(&bytes, &types) {
                prop_assert_eq!(key(&values), bytes.clone());
            }
            check_prefix_len(&bytes, &types)?;
        }

        /// Values encoded one at a time, borrowed, are the tuple's
        /// encoding; the prefix length of a key with bytes after it is
        /// where those bytes start.
        #[test]
        fn borrowed_encoding_and_prefix_len((types, values) in arb_typed_tuple(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
            let mut one_by_one = Vec::new();
            for v in &values {
                encode_key_refs([v.into()], &mut one_by_one);
            }
            let bytes = key(&values);
            prop_assert_eq!(&one_by_one, &bytes);
            let mut longer = bytes.clone();
            longer.extend_from_slice(&tail);
            prop_assert_eq!(key_prefix_len(&longer, &types).ok(), Some(bytes.len()));
            check_prefix_len(&longer, &types)?;
        }

        /// Mutated (truncated or byte-flipped) valid keys never panic and
        /// are either rejected or canonical.
        #[test]
        fn decode_mutated_never_panics(
            (types, values) in arb_typed_tuple(),
            cut in any::<prop::sample::Index>(),
            flip in any::<prop::sample::Index>(),
            with in any::<u8>(),
        ) {
            let bytes = key(&values);
            let truncated = &bytes[..cut.index(bytes.len())];
            prop_assert!(decode_key(truncated, &types).is_err());
            let mut flipped = bytes.clone();
            flipped[flip.index(bytes.len())] = with;
            if let Ok(back) = decode_key(&flipped, &types) {
                prop_assert_eq!(key(&back), flipped.clone());
            }
            check_prefix_len(truncated, &types)?;
            check_prefix_len(&flipped, &types)?;
        }
    }

    proptest! {
        /// `strip_encoded` answers as `strip_prefix` of the value's
        /// encoding, on keys that start with it and on keys that do not
        /// (another tuple's, cut short, or garbage).
        #[test]
        fn strip_encoded_is_strip_prefix_of_the_encoding(
            (types, values) in arb_typed_tuple(),
            (_, others) in arb_typed_tuple(),
            garbage in proptest::collection::vec(any::<u8>(), 0..12),
            cut in any::<prop::sample::Index>(),
        ) {
            let whole = key(&values);
            let mut scratch = vec![7u8; 3];
            for (i, v) in values.iter().enumerate() {
                let at = key_prefix_len(&whole, &types[..i]).unwrap();
                let tail = &whole[at..];
                let mut enc = Vec::new();
                encode_key_refs([v.into()], &mut enc);
                for k in [tail, &tail[..cut.index(tail.len() + 1)], &key(&others), &garbage[..]] {
                    prop_assert_eq!(
                        strip_encoded(v.into(), k, &mut scratch),
                        k.strip_prefix(enc.as_slice()),
                        "{:?} in {:02x?}", v, k
                    );
                }
            }
        }
    }

    /// `key_prefix_len` accepts exactly what `decode_key_prefix` accepts,
    /// and ends where its rest starts.
    fn check_prefix_len(bytes: &[u8], types: &[ColumnType]) -> Result<(), TestCaseError> {
        let decoded = decode_key_prefix(bytes, types).map(|(_, rest)| bytes.len() - rest.len());
        prop_assert_eq!(
            key_prefix_len(bytes, types).ok(),
            decoded.ok(),
            "{:02x?} as {:?}",
            bytes,
            types
        );
        Ok(())
    }
}
