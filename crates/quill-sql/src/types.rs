//! SQL types and how they are stored: each SQL type maps to one engine
//! [`ColumnType`], and values are coerced to a column's type (with range
//! and length checks) before the engine sees them.
//!
//! | SQL | stored as |
//! | --- | --- |
//! | `smallint`, `int`, `integer` | `Int32` (smallint's range checked on store, [`store`]) |
//! | `bigint`, `serial`, `bigserial` | `Int64` (serial columns take automatic keys) |
//! | `boolean` | `Bool` |
//! | `real`, `double precision`, `float8` | `Float64` |
//! | `numeric(p,s)`, `decimal(p,s)`, `numeric` | `Float64`, rounded to `s` places on store and refused beyond `p` digits: exact to 15 significant digits, not numeric's 131,072; results go to clients as `double precision` |
//! | `char(n)`, `varchar(n)` | `Text` of at most `4n` bytes (n characters of up to 4 UTF-8 bytes); n characters checked here ([`char_limit`]); spaces past n are cut, as in PostgreSQL; `char(n)` is stored without its trailing blanks (so `length`, `=` and `\|\|` agree with PostgreSQL) and printed without them (PostgreSQL pads) |
//! | `text`, `varchar` | `Text` of at most 65,535 bytes |
//! | `bytea` | `Bytes` of at most 65,535 bytes |
//! | `timestamp` (without time zone) | `Timestamp`, microseconds since 1970-01-01 00:00:00 |

use chrono::{DateTime, NaiveDate, NaiveDateTime};
use quill::catalog::{ColumnType, Value};
use sqlparser::ast::{CharacterLength, DataType, ExactNumberInfo, ObjectName};

use crate::error::{SqlError, SqlResult, SqlState};

/// The longest `text`, unbounded `varchar` or `bytea` value, in bytes.
pub const MAX_VARLEN: u32 = 65_535;

/// A SQL column type as declared, and what it is stored as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqlType {
    /// The engine's type.
    pub stored: ColumnType,
    /// A serial column (automatic values when none is given).
    pub serial: bool,
}

fn chars(len: &Option<CharacterLength>) -> SqlResult<u32> {
    match len {
        None | Some(CharacterLength::Max) => Ok(MAX_VARLEN),
        Some(CharacterLength::IntegerLength { length, .. }) => {
            let n = u32::try_from(*length)
                .ok()
                .and_then(|n| n.checked_mul(4))
                .filter(|&b| b > 0 && b <= MAX_VARLEN * 4)
                .ok_or_else(|| {
                    SqlError::new(
                        SqlState::INVALID_PARAMETER_VALUE,
                        format!("length {length} is out of range (1 to {})", MAX_VARLEN),
                    )
                })?;
            Ok(n)
        }
    }
}

fn custom_name(name: &ObjectName) -> String {
    name.to_string().to_ascii_lowercase()
}

/// The type a column declared as `dt` has.
pub fn column_type(dt: &DataType) -> SqlResult<SqlType> {
    let plain = |stored| {
        Ok(SqlType {
            stored,
            serial: false,
        })
    };
    match dt {
        DataType::SmallInt(_)
        | DataType::Int2(_)
        | DataType::Int(_)
        | DataType::Integer(_)
        | DataType::Int4(_) => plain(ColumnType::Int32),
        DataType::BigInt(_) | DataType::Int8(_) => plain(ColumnType::Int64),
        DataType::Bool | DataType::Boolean => plain(ColumnType::Bool),
        DataType::Real
        | DataType::Float4
        | DataType::Float8
        | DataType::DoublePrecision
        | DataType::Float(_) => plain(ColumnType::Float64),
        DataType::Char(n) | DataType::Character(n) => plain(ColumnType::Text {
            max_len: chars(&(*n).or(Some(CharacterLength::IntegerLength {
                length: 1,
                unit: None,
            })))?,
        }),
        DataType::Varchar(n) | DataType::CharacterVarying(n) => {
            plain(ColumnType::Text { max_len: chars(n)? })
        }
        DataType::Text => plain(ColumnType::Text {
            max_len: MAX_VARLEN,
        }),
        DataType::Bytea => plain(ColumnType::Bytes {
            max_len: MAX_VARLEN,
        }),
        DataType::Numeric(info) | DataType::Decimal(info) | DataType::Dec(info) => {
            numeric_precision(info)?;
            plain(ColumnType::Float64)
        }
        DataType::Timestamp(
            _,
            sqlparser::ast::TimezoneInfo::None | sqlparser::ast::TimezoneInfo::WithoutTimeZone,
        ) => plain(ColumnType::Timestamp),
        DataType::Custom(name, mods) if mods.is_empty() => match custom_name(name).as_str() {
            "serial" | "serial4" | "bigserial" | "serial8" => Ok(SqlType {
                stored: ColumnType::Int64,
                serial: true,
            }),
            "int2" | "int4" => plain(ColumnType::Int32),
            "int8" => plain(ColumnType::Int64),
            other => Err(SqlError::new(
                SqlState::UNDEFINED_OBJECT,
                format!("type \"{other}\" does not exist"),
            )),
        },
        other => Err(SqlError::unsupported(format!("type {other}"))),
    }
}

/// numeric's precision and scale, checked as PostgreSQL does (precision
/// 1 to 1000, scale 0 to the precision here).
fn numeric_precision(info: &ExactNumberInfo) -> SqlResult<Option<(u32, u32)>> {
    let (p, s) = match *info {
        ExactNumberInfo::None => return Ok(None),
        ExactNumberInfo::Precision(p) => (p, 0),
        ExactNumberInfo::PrecisionAndScale(p, s) => (p, u64::try_from(s).unwrap_or(u64::MAX)),
    };
    if !(1..=1000).contains(&p) {
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("NUMERIC precision {p} must be between 1 and 1000"),
        ));
    }
    if s > p {
        return Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("NUMERIC scale {s} must be between 0 and precision {p}"),
        ));
    }
    Ok(Some((p as u32, s as u32)))
}

/// What a column's declared SQL type adds to its stored type's checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// Nothing beyond the stored type.
    Plain,
    /// `smallint`: -32768 to 32767.
    SmallInt,
    /// `char(n)`: at most n characters, trailing blanks not kept.
    Char(usize),
    /// `varchar(n)`: at most n characters.
    Varchar(usize),
    /// `numeric(p, s)` (`Some((p, s))`): rounded to s places, fewer than
    /// p - s digits before the point; plain `numeric` (`None`): as given.
    Numeric(Option<(u32, u32)>),
}

/// The domain of a column from its declared type (as `CREATE TABLE`
/// recorded it, lowercase). Columns without one are plain.
pub fn domain(declared: Option<&str>, ty: ColumnType) -> Domain {
    let Some(d) = declared else {
        return Domain::Plain;
    };
    let args = |d: &str| -> Vec<u32> {
        d.split_once('(')
            .and_then(|(_, r)| r.strip_suffix(')'))
            .map(|a| a.split(',').filter_map(|x| x.trim().parse().ok()).collect())
            .unwrap_or_default()
    };
    let chars = || match ty {
        ColumnType::Text { max_len } => char_limit(max_len),
        _ => None,
    };
    if d == "smallint" || d == "int2" {
        Domain::SmallInt
    } else if d.starts_with("char") && !d.starts_with("character varying") {
        chars().map_or(Domain::Plain, Domain::Char)
    } else if d.starts_with("varchar") || d.starts_with("character varying") {
        chars().map_or(Domain::Plain, Domain::Varchar)
    } else if d.starts_with("numeric") || d.starts_with("dec") {
        Domain::Numeric(match args(d)[..] {
            [p] => Some((p, 0)),
            [p, s] => Some((p, s)),
            _ => None,
        })
    } else {
        Domain::Plain
    }
}

/// `v` as the value to store in column `col`: [`coerce`] to its stored
/// type, then its declared type's rules ([`Domain`]).
pub fn store(v: Value, col: &quill::catalog::Column) -> SqlResult<Value> {
    store_as(v, col.ty, domain(col.declared_type.as_deref(), col.ty))
}

/// [`store`] with the column's domain worked out once per statement.
pub fn store_as(v: Value, ty: ColumnType, dom: Domain) -> SqlResult<Value> {
    // Text into char(n)/varchar(n) is checked here, under the type's own
    // name; `coerce` would only count the characters again.
    match (v, dom) {
        (Value::Text(s), Domain::Char(n)) => {
            let mut s = fit_chars(s, n, "character")?;
            s.truncate(s.trim_end_matches(' ').len());
            Ok(Value::Text(s))
        }
        (Value::Text(s), Domain::Varchar(n)) => {
            Ok(Value::Text(fit_chars(s, n, "character varying")?))
        }
        (v, dom) => store_coerced(coerce(v, ty)?, dom),
    }
}

/// A value already of the column's stored type, under its domain.
fn store_coerced(v: Value, dom: Domain) -> SqlResult<Value> {
    Ok(match (v, dom) {
        (Value::Int32(x), Domain::SmallInt) if i16::try_from(x).is_err() => {
            return Err(SqlError::new(
                SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
                "smallint out of range",
            ));
        }
        (Value::Float64(f), Domain::Numeric(Some((precision, scale)))) => {
            Value::Float64(round_numeric(f, precision, scale)?)
        }
        (v, _) => v,
    })
}

/// `s` cut to `n` characters if what is past them is spaces; an error
/// naming `ty(n)` if anything else is.
fn fit_chars(s: String, n: usize, ty: &str) -> SqlResult<String> {
    // No more bytes than characters allowed: nothing to count (the
    // common case, on every insert and update of such a column).
    if s.len() <= n {
        return Ok(s);
    }
    let Some((cut, _)) = s.char_indices().nth(n) else {
        return Ok(s);
    };
    if s[cut..].bytes().all(|b| b == b' ') {
        let mut s = s;
        s.truncate(cut);
        return Ok(s);
    }
    Err(SqlError::new(
        SqlState::STRING_DATA_RIGHT_TRUNCATION,
        format!("value too long for type {ty}({n})"),
    ))
}

/// `f` rounded to `scale` places (halves away from zero, as numeric
/// rounds), refused if it needs more than `precision - scale` digits
/// before the point.
fn round_numeric(f: f64, precision: u32, scale: u32) -> SqlResult<f64> {
    if !f.is_finite() {
        return Err(SqlError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "numeric field overflow: only finite values fit a numeric with a precision",
        ));
    }
    let m = 10f64.powi(scale as i32);
    let r = if m.is_finite() {
        (f * m).round() / m
    } else {
        f
    };
    let limit = 10f64.powi((precision - scale) as i32);
    if r.abs() >= limit {
        return Err(SqlError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            format!(
                "numeric field overflow: a field with precision {precision}, scale {scale} must round to an absolute value less than 10^{}",
                precision - scale
            ),
        ));
    }
    Ok(r)
}

fn out_of_range(ty: &str) -> SqlError {
    SqlError::new(
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
        format!("value out of range for type {ty}"),
    )
}

/// A number's text (not `inf` or `nan`) as a double: `Err(None)` when it
/// is no number, `Err(Some(22003))` when it is one a double cannot hold
/// (its magnitude rounds to infinity, or to zero from a non-zero value),
/// as PostgreSQL refuses it rather than store infinity or zero.
pub fn parse_finite(t: &str) -> Result<f64, Option<SqlError>> {
    let v: f64 = t.parse().map_err(|_| None)?;
    let mantissa = t.split(['e', 'E']).next().unwrap_or(t);
    let nonzero = mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    let word = t
        .bytes()
        .any(|b| b.is_ascii_alphabetic() && !matches!(b, b'e' | b'E'));
    if word {
        // (`inf`, `nan` and their kin: the caller's to accept by name)
        return Err(None);
    }
    if v.is_infinite() || (v == 0.0 && nonzero) {
        return Err(Some(SqlError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("\"{t}\" is out of range for type double precision"),
        )));
    }
    Ok(v)
}

fn bad_text(ty: &str, s: &str) -> SqlError {
    SqlError::new(
        SqlState::INVALID_TEXT_REPRESENTATION,
        format!("invalid input syntax for type {ty}: \"{s}\""),
    )
}

/// The character limit of a `char(n)`/`varchar(n)` column stored as
/// `Text { max_len: 4n }` (a multiple of 4 marks one; text's 65,535 is
/// not), checked here since the engine counts bytes.
pub fn char_limit(max_len: u32) -> Option<usize> {
    max_len.is_multiple_of(4).then_some(max_len as usize / 4)
}

/// `v` as a value of type `ty` (for storing it in a column of that type,
/// or comparing it with one): numbers convert with range checks, text
/// parses. NULL stays NULL.
pub fn coerce(v: Value, ty: ColumnType) -> SqlResult<Value> {
    use ColumnType as T;
    Ok(match (v, ty) {
        (Value::Null, _) => Value::Null,
        (Value::Int32(x), T::Int32) => Value::Int32(x),
        (Value::Int64(x), T::Int32) => {
            Value::Int32(i32::try_from(x).map_err(|_| out_of_range("integer"))?)
        }
        (Value::Int32(x), T::Int64) => Value::Int64(i64::from(x)),
        (Value::Int64(x), T::Int64) => Value::Int64(x),
        (Value::Float64(f), T::Int32 | T::Int64) => {
            let r = f.round_ties_even();
            if !r.is_finite() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&r)
            {
                return Err(out_of_range("bigint"));
            }
            coerce(Value::Int64(r as i64), ty)?
        }
        (Value::Int32(x), T::Float64) => Value::Float64(f64::from(x)),
        (Value::Int64(x), T::Float64) => Value::Float64(x as f64),
        (Value::Float64(f), T::Float64) => Value::Float64(f),
        (Value::Bool(b), T::Bool) => Value::Bool(b),
        (Value::Text(s), T::Text { max_len }) => match char_limit(max_len) {
            Some(n) => Value::Text(fit_chars(s, n, "character varying")?),
            None => Value::Text(s),
        },
        (Value::Bytes(b), T::Bytes { .. }) => Value::Bytes(b),
        (Value::Timestamp(t), T::Timestamp) => Value::Timestamp(t),
        (Value::Text(s), _) => parse_text(&s, ty)?,
        (v, ty) => {
            return Err(SqlError::new(
                SqlState::DATATYPE_MISMATCH,
                format!(
                    "a {} value cannot be used as {}",
                    v.type_name(),
                    type_name(ty)
                ),
            ));
        }
    })
}

/// Parse text as a value of type `ty` (PostgreSQL's text input forms).
pub fn parse_text(s: &str, ty: ColumnType) -> SqlResult<Value> {
    use ColumnType as T;
    let t = s.trim();
    Ok(match ty {
        T::Int32 => Value::Int32(t.parse().map_err(|_| bad_text("integer", s))?),
        T::Int64 => Value::Int64(t.parse().map_err(|_| bad_text("bigint", s))?),
        T::Float64 => Value::Float64(match t.to_ascii_lowercase().as_str() {
            "nan" => f64::NAN,
            "infinity" | "inf" | "+infinity" | "+inf" => f64::INFINITY,
            "-infinity" | "-inf" => f64::NEG_INFINITY,
            _ => {
                parse_finite(t).map_err(|e| e.unwrap_or_else(|| bad_text("double precision", s)))?
            }
        }),
        T::Bool => Value::Bool(match t.to_ascii_lowercase().as_str() {
            "t" | "true" | "y" | "yes" | "on" | "1" => true,
            "f" | "false" | "n" | "no" | "off" | "0" => false,
            _ => return Err(bad_text("boolean", s)),
        }),
        T::Text { .. } => Value::Text(s.to_string()),
        T::Bytes { .. } => Value::Bytes(parse_bytea(s)?),
        T::Timestamp => Value::Timestamp(parse_timestamp(s)?),
    })
}

fn parse_bytea(s: &str) -> SqlResult<Vec<u8>> {
    let Some(hex) = s.strip_prefix("\\x") else {
        return Ok(s.as_bytes().to_vec());
    };
    if hex.len() % 2 != 0 {
        return Err(bad_text("bytea", s));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| bad_text("bytea", s))
        })
        .collect()
}

/// The text forms a timestamp is read from (PostgreSQL's ISO forms).
const TIMESTAMP_FORMATS: [&str; 4] = [
    "%Y-%m-%d %H:%M:%S%.f",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%dT%H:%M",
];

/// `t` without a trailing time zone (`+00`, `-08:00`, `Z`, ` UTC`),
/// which a `timestamp without time zone` ignores, as in PostgreSQL
/// (JDBC sends one with every timestamp).
fn strip_zone(t: &str) -> &str {
    if let Some(x) = t.strip_suffix('Z').or_else(|| t.strip_suffix(" UTC")) {
        return x.trim_end();
    }
    // A sign after the time part: `...:SS+HH[:MM]`.
    if let Some(i) = t.rfind(['+', '-'])
        && t[..i].contains(':')
        && t[i + 1..].chars().all(|c| c.is_ascii_digit() || c == ':')
        && (2..=5).contains(&(t.len() - i - 1))
    {
        return t[..i].trim_end();
    }
    t
}

/// `YYYY-MM-DD[ HH:MM[:SS[.ffffff]]]` (or `T` between) as microseconds
/// since the epoch; a trailing time zone is ignored.
pub fn parse_timestamp(s: &str) -> SqlResult<i64> {
    let t = strip_zone(s.trim());
    TIMESTAMP_FORMATS
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
        .or_else(|| {
            NaiveDate::parse_from_str(t, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
        .map(|dt| dt.and_utc().timestamp_micros())
        .ok_or_else(|| bad_text("timestamp", s))
}

/// Microseconds since the epoch as PostgreSQL prints a timestamp
/// (fraction without trailing zeros); a value beyond the calendar's range
/// (only the Rust API can store one) prints as its microsecond count.
pub fn format_timestamp(us: i64) -> String {
    let Some(dt) = DateTime::from_timestamp_micros(us) else {
        return format!("{us} microseconds since 1970-01-01");
    };
    let mut out = dt.naive_utc().format("%Y-%m-%d %H:%M:%S").to_string();
    let micros = us.rem_euclid(1_000_000);
    if micros != 0 {
        let f = format!("{micros:06}");
        out.push('.');
        out.push_str(f.trim_end_matches('0'));
    }
    out
}

/// The SQL name of a stored type, for messages and result metadata.
pub fn type_name(ty: ColumnType) -> &'static str {
    match ty {
        ColumnType::Bool => "boolean",
        ColumnType::Int32 => "integer",
        ColumnType::Int64 => "bigint",
        ColumnType::Float64 => "double precision",
        ColumnType::Text { .. } => "text",
        ColumnType::Bytes { .. } => "bytea",
        ColumnType::Timestamp => "timestamp without time zone",
    }
}

/// A value in PostgreSQL's text output format (NULL is `None`).
pub fn to_text(v: &Value) -> Option<String> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => if *b { "t" } else { "f" }.to_string(),
        Value::Int32(x) => x.to_string(),
        Value::Int64(x) => x.to_string(),
        Value::Float64(f) => format_float(*f),
        Value::Text(s) => s.clone(),
        Value::Bytes(b) => {
            let mut s = String::with_capacity(2 + 2 * b.len());
            s.push_str("\\x");
            for x in b {
                s.push_str(&format!("{x:02x}"));
            }
            s
        }
        Value::Timestamp(t) => format_timestamp(*t),
    })
}

fn format_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f == f64::INFINITY {
        "Infinity".into()
    } else if f == f64::NEG_INFINITY {
        "-Infinity".into()
    } else {
        // The shortest digits that read back as the same double, as
        // PostgreSQL 12+ prints them (extra_float_digits = 1): in
        // exponent form when the decimal exponent is below -4 or at
        // least 15 (DBL_DIG), with a sign and at least two digits
        // (`1e+16`, `1e-05`), else plainly.
        let sci = format!("{f:e}");
        let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
        match exp.parse::<i32>() {
            Ok(e) if !(-4..15).contains(&e) => {
                let sign = if e < 0 { '-' } else { '+' };
                format!("{mantissa}e{sign}{:02}", e.unsigned_abs())
            }
            _ => format!("{f}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Doubles print as PostgreSQL 15 prints them (its outputs), and
    /// read back as themselves.
    #[test]
    fn doubles_print_as_postgresql_prints_them() {
        for (f, text) in [
            (1e16, "1e+16"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (1e-310, "1e-310"),
            (0.00001, "1e-05"),
            (0.0001, "0.0001"),
            (123456789012345.0, "123456789012345"),
            (1234567890123456.0, "1.234567890123456e+15"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-2.5e-7, "-2.5e-07"),
            (-0.0, "-0"),
            (0.0, "0"),
            (100.0, "100"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(format_float(f), text, "{f:?}");
            if f.is_finite() {
                assert_eq!(
                    text.parse::<f64>().unwrap().to_bits(),
                    f.to_bits(),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn timestamps_round_trip_and_bad_dates_are_refused() {
        for s in [
            "1970-01-01 00:00:00",
            "2026-11-24 13:05:59.5",
            "1900-02-28 23:59:59.000001",
            "2000-02-29 12:00:00",
        ] {
            let us = parse_timestamp(s).unwrap();
            assert_eq!(format_timestamp(us), s);
        }
        assert_eq!(parse_timestamp("1970-01-02").unwrap(), 86_400_000_000);
        for zoned in [
            "1970-01-02 00:00:00+00",
            "1970-01-02 00:00:00-08:00",
            "1970-01-02 00:00:00Z",
            "1970-01-02 00:00:00 UTC",
        ] {
            assert_eq!(parse_timestamp(zoned).unwrap(), 86_400_000_000, "{zoned}");
        }
        assert_eq!(parse_timestamp("1970-01-01T00:01").unwrap(), 60_000_000);
        assert!(format_timestamp(i64::MAX).contains("microseconds"));
        for s in [
            "2021-02-30",
            "2021-13-01",
            "x",
            "2021-01-01 25:00",
            "2021-01-01 1:2:3.x",
        ] {
            let e = parse_timestamp(s).unwrap_err();
            assert_eq!(e.state, SqlState::INVALID_TEXT_REPRESENTATION, "{s}");
        }
    }

    #[test]
    fn declared_types_add_their_rules() {
        use quill::catalog::Column;
        let col = |ty, declared: &str| Column::new("c", ty, true).with_declared_type(declared);
        let small = col(ColumnType::Int32, "smallint");
        assert_eq!(
            store(Value::Int32(32767), &small).unwrap(),
            Value::Int32(32767)
        );
        for x in [32768, -32769] {
            let e = store(Value::Int64(x), &small).unwrap_err();
            assert_eq!(e.state, SqlState::NUMERIC_VALUE_OUT_OF_RANGE);
            assert_eq!(e.message, "smallint out of range");
        }
        let ch = col(ColumnType::Text { max_len: 20 }, "char(5)");
        let text = |s: &str| Value::Text(s.into());
        assert_eq!(store(text("ab  "), &ch).unwrap(), text("ab"));
        assert_eq!(store(text("abcde   "), &ch).unwrap(), text("abcde"));
        let e = store(text("abcdef"), &ch).unwrap_err();
        assert_eq!(e.message, "value too long for type character(5)");
        let vc = col(ColumnType::Text { max_len: 12 }, "varchar(3)");
        assert_eq!(store(text("ab "), &vc).unwrap(), text("ab "));
        assert_eq!(store(text("abc   "), &vc).unwrap(), text("abc"));
        assert_eq!(store(text("ééé"), &vc).unwrap(), text("ééé"));
        assert!(
            store(text("abcd"), &vc)
                .unwrap_err()
                .message
                .contains("varying(3)")
        );
        let num = col(ColumnType::Float64, "numeric(5,2)");
        assert_eq!(
            store(Value::Float64(12.345), &num).unwrap(),
            Value::Float64(12.35)
        );
        assert_eq!(
            store(Value::Float64(-0.005), &num).unwrap(),
            Value::Float64(-0.01)
        );
        assert_eq!(
            store(text("999.994"), &num).unwrap(),
            Value::Float64(999.99)
        );
        for bad in [999.995, 1e3, f64::NAN, f64::INFINITY] {
            let e = store(Value::Float64(bad), &num).unwrap_err();
            assert_eq!(e.state, SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "{bad}");
        }
        let whole = col(ColumnType::Float64, "numeric(3)");
        assert_eq!(store(Value::Int32(7), &whole).unwrap(), Value::Float64(7.0));
        assert_eq!(
            store(Value::Float64(2.5), &whole).unwrap(),
            Value::Float64(3.0)
        );
        let free = col(ColumnType::Float64, "numeric");
        assert_eq!(
            store(Value::Float64(1.0 / 3.0), &free).unwrap(),
            Value::Float64(1.0 / 3.0)
        );
        for bad in ["numeric(0)", "numeric(1001)", "numeric(3,4)"] {
            let dt = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
                .try_with_sql(bad)
                .unwrap()
                .parse_data_type()
                .unwrap();
            assert_eq!(
                column_type(&dt).unwrap_err().state,
                SqlState::INVALID_PARAMETER_VALUE,
                "{bad}"
            );
        }
    }

    #[test]
    fn coercion_checks_ranges() {
        assert_eq!(
            coerce(Value::Int64(5), ColumnType::Int32).unwrap(),
            Value::Int32(5)
        );
        assert_eq!(
            coerce(Value::Int64(1 << 40), ColumnType::Int32)
                .unwrap_err()
                .state,
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE
        );
        assert_eq!(
            coerce(Value::Float64(124.0), ColumnType::Int32).unwrap(),
            Value::Int32(124)
        );
        assert_eq!(
            coerce(
                Value::Text("\\x0aff".into()),
                ColumnType::Bytes { max_len: 9 }
            )
            .unwrap(),
            Value::Bytes(vec![10, 255])
        );
        assert_eq!(
            coerce(Value::Bool(true), ColumnType::Int64)
                .unwrap_err()
                .state,
            SqlState::DATATYPE_MISMATCH
        );
    }
}
