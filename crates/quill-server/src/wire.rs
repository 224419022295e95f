//! Values on the wire: Quill's column types as PostgreSQL type OIDs,
//! parameters decoded from their text or binary form, result values
//! encoded in the format the client asked for, and SQL errors as
//! ErrorResponse fields.
//!
//! Binary forms are PostgreSQL's: big-endian integers and floats of the
//! declared width (a client may send an `int2` for any integer), one byte
//! for a boolean, raw bytes for text and bytea, and a timestamp as
//! microseconds since 2000-01-01.

use std::error::Error as StdError;

use bytes::{BufMut, BytesMut};
use pgwire::api::Type;
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::error::{ErrorInfo, PgWireError};
use pgwire::types::ToSqlText;
use pgwire::types::format::FormatOptions;
use postgres_types::{IsNull, ToSql, to_sql_checked};
use quill::catalog::{ColumnType, Value};
use quill_sql::types::{MAX_VARLEN, parse_text, to_text};
use quill_sql::{ColumnDesc, SqlError, SqlState};

/// Microseconds from 1970-01-01 to 2000-01-01 (PostgreSQL's epoch).
const PG_EPOCH_US: i64 = 946_684_800_000_000;

/// The PostgreSQL type a result column of `ty` is described as.
pub fn pg_type(ty: ColumnType) -> Type {
    match ty {
        ColumnType::Bool => Type::BOOL,
        ColumnType::Int32 => Type::INT4,
        ColumnType::Int64 => Type::INT8,
        ColumnType::Float64 => Type::FLOAT8,
        ColumnType::Text { max_len } if quill_sql::types::char_limit(max_len).is_some() => {
            Type::VARCHAR
        }
        ColumnType::Text { .. } => Type::TEXT,
        ColumnType::Bytes { .. } => Type::BYTEA,
        ColumnType::Timestamp => Type::TIMESTAMP,
    }
}

/// The stored type a client's parameter type maps to (`None`: the
/// client left it to the server, or named a type Quill infers instead).
pub fn column_type(t: &Type) -> Option<ColumnType> {
    let text = ColumnType::Text {
        max_len: MAX_VARLEN,
    };
    Some(match *t {
        Type::INT2 | Type::INT4 => ColumnType::Int32,
        Type::INT8 | Type::OID => ColumnType::Int64,
        Type::FLOAT4 | Type::FLOAT8 | Type::NUMERIC => ColumnType::Float64,
        Type::BOOL => ColumnType::Bool,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::CHAR => text,
        Type::BYTEA => ColumnType::Bytes {
            max_len: MAX_VARLEN,
        },
        Type::TIMESTAMP | Type::TIMESTAMPTZ => ColumnType::Timestamp,
        _ => return None,
    })
}

/// A protocol error (08P01) with `message`.
pub fn protocol_error(message: impl Into<String>) -> PgWireError {
    user_error(&SqlError::new(SqlState::PROTOCOL_VIOLATION, message.into()))
}

/// A SQL error as the ErrorResponse a client reads.
pub fn user_error(e: &SqlError) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(e)))
}

/// The fields of an ErrorResponse for `e`.
pub fn error_info(e: &SqlError) -> ErrorInfo {
    ErrorInfo::new("ERROR".into(), e.state.code().into(), e.message.clone())
}

fn bad_param(i: usize, ty: &Type, why: impl std::fmt::Display) -> PgWireError {
    user_error(&SqlError::new(
        SqlState::INVALID_TEXT_REPRESENTATION,
        format!("parameter ${}: invalid {} value: {why}", i + 1, ty.name()),
    ))
}

fn fixed<const N: usize>(i: usize, ty: &Type, b: &[u8]) -> Result<[u8; N], PgWireError> {
    b.try_into()
        .map_err(|_| bad_param(i, ty, format!("{} bytes, expected {N}", b.len())))
}

/// Decode parameter `i` of wire type `ty` (the client's, or the one the
/// server described) into a value of stored type `want`.
pub fn decode_param(
    i: usize,
    bytes: Option<&[u8]>,
    binary: bool,
    ty: &Type,
    want: ColumnType,
) -> Result<Value, PgWireError> {
    let Some(b) = bytes else {
        return Ok(Value::Null);
    };
    if !binary {
        let s = std::str::from_utf8(b).map_err(|e| bad_param(i, ty, e))?;
        return parse_text(s, want).map_err(|e| user_error(&e));
    }
    let v = match *ty {
        Type::BOOL => Value::Bool(fixed::<1>(i, ty, b)?[0] != 0),
        Type::INT2 => Value::Int32(i32::from(i16::from_be_bytes(fixed(i, ty, b)?))),
        Type::INT4 => Value::Int32(i32::from_be_bytes(fixed(i, ty, b)?)),
        Type::INT8 => Value::Int64(i64::from_be_bytes(fixed(i, ty, b)?)),
        Type::OID => Value::Int64(i64::from(u32::from_be_bytes(fixed(i, ty, b)?))),
        Type::FLOAT4 => Value::Float64(f64::from(f32::from_be_bytes(fixed(i, ty, b)?))),
        Type::FLOAT8 => Value::Float64(f64::from_be_bytes(fixed(i, ty, b)?)),
        Type::TIMESTAMP | Type::TIMESTAMPTZ => {
            let us = i64::from_be_bytes(fixed(i, ty, b)?);
            Value::Timestamp(
                us.checked_add(PG_EPOCH_US)
                    .ok_or_else(|| bad_param(i, ty, "out of range"))?,
            )
        }
        Type::BYTEA => Value::Bytes(b.to_vec()),
        _ => {
            // Text-like types (and unknown, which clients send as text
            // bytes) are their UTF-8 bytes.
            let s = std::str::from_utf8(b).map_err(|e| bad_param(i, ty, e))?;
            if matches!(want, ColumnType::Text { .. }) {
                Value::Text(s.to_string())
            } else {
                parse_text(s, want).map_err(|e| user_error(&e))?
            }
        }
    };
    quill_sql::types::coerce(v, want).map_err(|e| user_error(&e))
}

/// Check a Bind's format codes against a count (0, 1 or one per item, as
/// the protocol allows); pgwire indexes them unchecked.
pub fn check_formats(f: &Format, n: usize, what: &str) -> Result<(), PgWireError> {
    if let Format::Individual(v) = f
        && v.len() != n
        && v.len() > 1
    {
        return Err(protocol_error(format!(
            "{} {what} format codes for {n} {what}s",
            v.len()
        )));
    }
    Ok(())
}

/// The row description of `columns` in `format`.
pub fn fields(columns: &[ColumnDesc], format: &Format) -> Vec<FieldInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let f = match format {
                Format::Individual(v) if v.len() == 1 => FieldFormat::from(v[0]),
                _ => format.format_for(i),
            };
            FieldInfo::new(c.name.clone(), None, None, pg_type(c.ty), f)
        })
        .collect()
}

/// One value to encode into a DataRow.
#[derive(Debug)]
pub struct Cell<'a>(pub &'a Value);

impl ToSql for Cell<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self.0 {
            Value::Null => return Ok(IsNull::Yes),
            Value::Bool(b) => out.put_u8(u8::from(*b)),
            Value::Int32(x) => out.put_i32(*x),
            Value::Int64(x) => out.put_i64(*x),
            Value::Float64(x) => out.put_f64(*x),
            Value::Text(s) => out.put_slice(s.as_bytes()),
            Value::Bytes(b) => out.put_slice(b),
            Value::Timestamp(t) => out.put_i64(t.saturating_sub(PG_EPOCH_US)),
        }
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

impl ToSqlText for Cell<'_> {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _format_options: &FormatOptions,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match to_text(self.0) {
            None => Ok(IsNull::Yes),
            Some(s) => {
                out.put_slice(s.as_bytes());
                Ok(IsNull::No)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: ColumnType = ColumnType::Text { max_len: 65_535 };

    #[test]
    fn parameters_decode_from_both_formats() {
        let d = |b: &[u8], bin, ty: &Type, want| decode_param(0, Some(b), bin, ty, want);
        assert_eq!(
            d(&5i16.to_be_bytes(), true, &Type::INT2, ColumnType::Int64).unwrap(),
            Value::Int64(5)
        );
        assert_eq!(
            d(b"42", false, &Type::INT8, ColumnType::Int32).unwrap(),
            Value::Int32(42)
        );
        assert_eq!(
            d(
                &1.5f64.to_be_bytes(),
                true,
                &Type::FLOAT8,
                ColumnType::Float64
            )
            .unwrap(),
            Value::Float64(1.5)
        );
        assert_eq!(
            d(b"abc", true, &Type::UNKNOWN, TEXT).unwrap(),
            Value::Text("abc".into())
        );
        assert_eq!(
            d(
                &0i64.to_be_bytes(),
                true,
                &Type::TIMESTAMP,
                ColumnType::Timestamp
            )
            .unwrap(),
            Value::Timestamp(PG_EPOCH_US)
        );
        assert_eq!(
            decode_param(0, None, true, &Type::INT4, ColumnType::Int32).unwrap(),
            Value::Null
        );
        // Wrong widths and bad text are errors, not panics.
        assert!(d(&[1, 2, 3], true, &Type::INT4, ColumnType::Int32).is_err());
        assert!(d(b"x", false, &Type::INT4, ColumnType::Int32).is_err());
        assert!(d(&[0xff, 0xfe], true, &Type::TEXT, TEXT).is_err());
        assert!(
            d(
                &i64::MAX.to_be_bytes(),
                true,
                &Type::TIMESTAMP,
                ColumnType::Timestamp
            )
            .is_err()
        );
    }

    #[test]
    fn format_code_counts_are_checked() {
        assert!(check_formats(&Format::Individual(vec![1, 0]), 3, "result").is_err());
        assert!(check_formats(&Format::Individual(vec![1]), 3, "result").is_ok());
        assert!(check_formats(&Format::Individual(vec![1, 0, 1]), 3, "result").is_ok());
        assert!(check_formats(&Format::UnifiedText, 3, "result").is_ok());
    }
}
