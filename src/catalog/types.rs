//! Column types, values, column definitions, the check of a value against
//! its column (invariant CT1 of [`crate::catalog`]) and [`CatalogError`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// The type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ColumnType {
    /// `true` or `false`.
    Bool,
    /// A signed 32-bit integer.
    Int32,
    /// A signed 64-bit integer.
    Int64,
    /// An IEEE 754 double.
    Float64,
    /// UTF-8 text of at most `max_len` bytes (not characters).
    Text {
        /// Maximum length in bytes of the UTF-8 encoding.
        max_len: u32,
    },
    /// A byte string of at most `max_len` bytes.
    Bytes {
        /// Maximum length in bytes.
        max_len: u32,
    },
    /// A point in time: signed microseconds since the Unix epoch, UTC.
    Timestamp,
}

impl ColumnType {
    /// The size in bytes of a value of this type in the row format, or
    /// `None` for variable-length types (text and bytes).
    pub fn fixed_size(&self) -> Option<usize> {
        match self {
            ColumnType::Bool => Some(1),
            ColumnType::Int32 => Some(4),
            ColumnType::Int64 | ColumnType::Float64 | ColumnType::Timestamp => Some(8),
            ColumnType::Text { .. } | ColumnType::Bytes { .. } => None,
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnType::Bool => f.write_str("BOOL"),
            ColumnType::Int32 => f.write_str("INT32"),
            ColumnType::Int64 => f.write_str("INT64"),
            ColumnType::Float64 => f.write_str("FLOAT64"),
            ColumnType::Text { max_len } => write!(f, "TEXT({max_len})"),
            ColumnType::Bytes { max_len } => write!(f, "BYTES({max_len})"),
            ColumnType::Timestamp => f.write_str("TIMESTAMP"),
        }
    }
}

/// A value of some column, or NULL.
///
/// `PartialEq` is the derived one, so `Float64(NaN) != Float64(NaN)` and
/// `Float64(-0.0) == Float64(0.0)`; the key order ([`crate::catalog`],
/// KC1) is a different, total order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Value {
    /// SQL NULL: no value.
    Null,
    /// A [`ColumnType::Bool`] value.
    Bool(bool),
    /// A [`ColumnType::Int32`] value.
    Int32(i32),
    /// A [`ColumnType::Int64`] value.
    Int64(i64),
    /// A [`ColumnType::Float64`] value.
    Float64(f64),
    /// A [`ColumnType::Text`] value.
    Text(String),
    /// A [`ColumnType::Bytes`] value.
    Bytes(Vec<u8>),
    /// A [`ColumnType::Timestamp`] value: microseconds since the Unix
    /// epoch, UTC.
    Timestamp(i64),
}

impl Value {
    /// Whether this is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The name of this value's type, as in [`ColumnType`]'s `Display`
    /// without the length (`"NULL"` for NULL).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Bool(_) => "BOOL",
            Value::Int32(_) => "INT32",
            Value::Int64(_) => "INT64",
            Value::Float64(_) => "FLOAT64",
            Value::Text(_) => "TEXT",
            Value::Bytes(_) => "BYTES",
            Value::Timestamp(_) => "TIMESTAMP",
        }
    }
}

/// A column of a table: its name, type and whether it admits NULL, and
/// two attributes a SQL layer declares and the engine only keeps and
/// checks: a default value and the declared SQL type.
///
/// The engine never fills in a default: rows reach it whole. Both
/// attributes are absent from the stored schema when unset, so schemas
/// written before they existed read unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// The column's type.
    pub ty: ColumnType,
    /// Whether the column admits NULL.
    pub nullable: bool,
    /// The value a SQL `INSERT` that omits the column stores
    /// (checked against the column by [`TableDef::validate`](crate::catalog::schema::TableDef::validate)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// The type as its SQL layer declared it (`character(120)`,
    /// `smallint`), when that says more than [`Column::ty`]; at most
    /// 64 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_type: Option<String>,
}

impl Column {
    /// A column definition, with no default and no declared type.
    pub fn new(name: impl Into<String>, ty: ColumnType, nullable: bool) -> Self {
        Self {
            name: name.into(),
            ty,
            nullable,
            default: None,
            declared_type: None,
        }
    }

    /// This column with `value` as its default.
    pub fn with_default(mut self, value: Value) -> Self {
        self.default = Some(value);
        self
    }

    /// This column with `name` as its declared SQL type.
    pub fn with_declared_type(mut self, name: impl Into<String>) -> Self {
        self.declared_type = Some(name.into());
        self
    }
}

/// What can go wrong checking, encoding or decoding values, keys and rows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// A value's type differs from its column's type.
    #[error("column {column}: expected a {expected} value, found {found}")]
    TypeMismatch {
        /// The column's name.
        column: String,
        /// The column's type.
        expected: ColumnType,
        /// The type name of the value given ([`Value::type_name`]).
        found: &'static str,
    },

    /// NULL given for a column declared NOT NULL.
    #[error("column {column} is NOT NULL but the value is NULL")]
    NullNotAllowed {
        /// The column's name.
        column: String,
    },

    /// A text or bytes value longer than its column's limit.
    #[error("column {column}: value is {len} bytes, the limit is {max_len}")]
    TooLong {
        /// The column's name.
        column: String,
        /// The value's length in bytes.
        len: usize,
        /// The column's limit in bytes.
        max_len: u32,
    },

    /// A row has a different number of values than the table has columns.
    #[error("expected {expected} values (one per column), found {found}")]
    ColumnCount {
        /// Number of columns.
        expected: usize,
        /// Number of values given.
        found: usize,
    },

    /// Bytes that are not a valid key or row encoding.
    #[error("malformed encoding at byte {offset}: {reason}")]
    Malformed {
        /// Offset in the input at which the problem was found.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
}

/// Checks `value` against `column` (invariant CT1): the type matches, NULL
/// only if the column is nullable, and text/bytes at most `max_len` bytes
/// (for text, the length of the UTF-8 encoding).
pub fn check_value(column: &Column, value: &Value) -> Result<(), CatalogError> {
    let len_ok = |len: usize, max_len: u32| {
        if u64::try_from(len).is_ok_and(|len| len <= u64::from(max_len)) {
            Ok(())
        } else {
            Err(CatalogError::TooLong {
                column: column.name.clone(),
                len,
                max_len,
            })
        }
    };
    match (&column.ty, value) {
        (_, Value::Null) if column.nullable => Ok(()),
        (_, Value::Null) => Err(CatalogError::NullNotAllowed {
            column: column.name.clone(),
        }),
        (ColumnType::Bool, Value::Bool(_))
        | (ColumnType::Int32, Value::Int32(_))
        | (ColumnType::Int64, Value::Int64(_))
        | (ColumnType::Float64, Value::Float64(_))
        | (ColumnType::Timestamp, Value::Timestamp(_)) => Ok(()),
        (ColumnType::Text { max_len }, Value::Text(s)) => len_ok(s.len(), *max_len),
        (ColumnType::Bytes { max_len }, Value::Bytes(b)) => len_ok(b.len(), *max_len),
        (expected, found) => Err(CatalogError::TypeMismatch {
            column: column.name.clone(),
            expected: *expected,
            found: found.type_name(),
        }),
    }
}

/// Checks a whole row: one value per column, each passing
/// [`check_value`]. Reports the first problem in column order.
pub fn check_row(columns: &[Column], values: &[Value]) -> Result<(), CatalogError> {
    check_filled_row(columns, FilledRow::new(values))
}

/// [`check_row`] for a row with a value filled in.
pub(crate) fn check_filled_row(columns: &[Column], row: FilledRow<'_>) -> Result<(), CatalogError> {
    if columns.len() != row.len() {
        return Err(CatalogError::ColumnCount {
            expected: columns.len(),
            found: row.len(),
        });
    }
    columns
        .iter()
        .zip(row.iter())
        .try_for_each(|(column, value)| check_value(column, value))
}

/// A row's values, one per column, with at most one of them replaced:
/// what an insert writes when it fills an automatic key into a column
/// given as NULL, read in place instead of copying the row to change one
/// value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FilledRow<'v> {
    values: &'v [Value],
    /// The column replaced and its value.
    fill: Option<(usize, &'v Value)>,
}

impl<'v> From<&'v [Value]> for FilledRow<'v> {
    fn from(values: &'v [Value]) -> FilledRow<'v> {
        FilledRow::new(values)
    }
}

impl<'v> From<&'v Vec<Value>> for FilledRow<'v> {
    fn from(values: &'v Vec<Value>) -> FilledRow<'v> {
        FilledRow::new(values)
    }
}

impl<'v, const N: usize> From<&'v [Value; N]> for FilledRow<'v> {
    fn from(values: &'v [Value; N]) -> FilledRow<'v> {
        FilledRow::new(values)
    }
}

impl<'v> FilledRow<'v> {
    /// `values` as they are.
    pub(crate) fn new(values: &'v [Value]) -> FilledRow<'v> {
        FilledRow { values, fill: None }
    }

    /// `values` with column `at` (one of them) read as `value`.
    pub(crate) fn with(values: &'v [Value], at: usize, value: &'v Value) -> FilledRow<'v> {
        debug_assert!(
            at < values.len(),
            "FilledRow: column {at} of {}",
            values.len()
        );
        FilledRow {
            values,
            fill: Some((at, value)),
        }
    }

    /// Values in the row (columns, for a row that passed [`check_row`]).
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// The value of column `k`, `None` past the last.
    #[inline]
    pub(crate) fn get(&self, k: usize) -> Option<&'v Value> {
        match self.fill {
            Some((at, v)) if at == k => Some(v),
            _ => self.values.get(k),
        }
    }

    /// The values in column order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &'v Value> + use<'v> {
        let fill = self.fill;
        self.values
            .iter()
            .enumerate()
            .map(move |(k, v)| match fill {
                Some((at, f)) if at == k => f,
                _ => v,
            })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Any column type, with small length limits so limits get hit.
    pub(crate) fn arb_type() -> impl Strategy<Value = ColumnType> {
        prop_oneof![
            Just(ColumnType::Bool),
            Just(ColumnType::Int32),
            Just(ColumnType::Int64),
            Just(ColumnType::Float64),
            (0u32..12).prop_map(|max_len| ColumnType::Text { max_len }),
            (0u32..12).prop_map(|max_len| ColumnType::Bytes { max_len }),
            Just(ColumnType::Timestamp),
        ]
    }

    /// Any column: type, nullability, a name.
    pub(crate) fn arb_column() -> impl Strategy<Value = Column> {
        (arb_type(), any::<bool>(), "[a-z]{1,6}")
            .prop_map(|(ty, nullable, name)| Column::new(name, ty, nullable))
    }

    fn arb_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(f64::NAN),
            Just(-f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(f64::MIN_POSITIVE),
            Just(-f64::MIN_POSITIVE),
            Just(f64::MAX),
            Just(f64::MIN),
            (-3i8..3).prop_map(f64::from),
            any::<f64>(),
            // Arbitrary bit patterns: subnormals, NaNs with payloads and
            // negative NaNs.
            any::<u64>().prop_map(f64::from_bits),
        ]
    }

    /// A non-NULL value of type `ty` that passes its length limit. Small
    /// domains are weighted in so that equal values (and ties decided by
    /// later columns) are common.
    pub(crate) fn arb_non_null(ty: ColumnType) -> BoxedStrategy<Value> {
        match ty {
            ColumnType::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
            ColumnType::Int32 => prop_oneof![
                -2i32..3,
                Just(i32::MIN),
                Just(i32::MAX),
                Just(-1),
                any::<i32>()
            ]
            .prop_map(Value::Int32)
            .boxed(),
            ColumnType::Int64 | ColumnType::Timestamp => {
                let ints = prop_oneof![
                    -2i64..3,
                    Just(i64::MIN),
                    Just(i64::MAX),
                    Just(i64::from(i32::MIN) - 1),
                    any::<i64>()
                ];
                if ty == ColumnType::Timestamp {
                    ints.prop_map(Value::Timestamp).boxed()
                } else {
                    ints.prop_map(Value::Int64).boxed()
                }
            }
            ColumnType::Float64 => arb_f64().prop_map(Value::Float64).boxed(),
            ColumnType::Text { max_len } => {
                let max = usize::try_from(max_len).unwrap_or(usize::MAX);
                r"[ab\x{0}\x{1}\x{7F}\x{E9}\x{FF}\x{1F600}]{0,12}"
                    .prop_map(move |s| {
                        // Keep whole characters up to the byte limit.
                        let mut out = String::new();
                        for c in s.chars() {
                            if out.len() + c.len_utf8() > max {
                                break;
                            }
                            out.push(c);
                        }
                        Value::Text(out)
                    })
                    .boxed()
            }
            ColumnType::Bytes { max_len } => {
                let max = usize::try_from(max_len).unwrap_or(usize::MAX);
                proptest::collection::vec(
                    prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), Just(b'a'), any::<u8>()],
                    0..=max,
                )
                .prop_map(Value::Bytes)
                .boxed()
            }
        }
    }

    /// A value valid for `column` (NULL sometimes, if nullable).
    pub(crate) fn arb_value(column: &Column) -> BoxedStrategy<Value> {
        let non_null = arb_non_null(column.ty);
        if column.nullable {
            prop_oneof![1 => Just(Value::Null), 4 => non_null].boxed()
        } else {
            non_null
        }
    }

    /// A schema of 1..=max columns and a valid row for it.
    pub(crate) fn arb_schema_and_row(max: usize) -> BoxedStrategy<(Vec<Column>, Vec<Value>)> {
        proptest::collection::vec(arb_column(), 1..=max)
            .prop_flat_map(|columns| {
                let values: Vec<_> = columns.iter().map(arb_value).collect();
                (Just(columns), values)
            })
            .boxed()
    }

    /// A schema of 1..=`max` columns and `rows` rows of it.
    pub(crate) fn arb_schema_and_rows(
        max: usize,
        rows: std::ops::Range<usize>,
    ) -> BoxedStrategy<(Vec<Column>, Vec<Vec<Value>>)> {
        proptest::collection::vec(arb_column(), 1..=max)
            .prop_flat_map(move |columns| {
                let row: Vec<_> = columns.iter().map(arb_value).collect();
                (Just(columns), proptest::collection::vec(row, rows.clone()))
            })
            .boxed()
    }

    /// Equality that treats floats bit for bit (so NaN equals itself and
    /// `-0.0` differs from `0.0`).
    pub(crate) fn same_bits(a: &[Value], b: &[Value]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|pair| match pair {
                (Value::Float64(x), Value::Float64(y)) => x.to_bits() == y.to_bits(),
                (x, y) => x == y,
            })
    }

    #[test]
    fn check_value_enforces_types_nulls_and_byte_lengths() {
        let text = Column::new("t", ColumnType::Text { max_len: 3 }, false);
        assert_eq!(check_value(&text, &Value::Text("abc".into())), Ok(()));
        // "é" is two bytes: "aé" is 3 bytes (fits), "aéb" 4 (does not).
        assert_eq!(check_value(&text, &Value::Text("a\u{e9}".into())), Ok(()));
        assert_eq!(
            check_value(&text, &Value::Text("a\u{e9}b".into())),
            Err(CatalogError::TooLong {
                column: "t".into(),
                len: 4,
                max_len: 3
            })
        );
        assert_eq!(
            check_value(&text, &Value::Null),
            Err(CatalogError::NullNotAllowed { column: "t".into() })
        );
        assert_eq!(
            check_value(&text, &Value::Bytes(b"abc".to_vec())),
            Err(CatalogError::TypeMismatch {
                column: "t".into(),
                expected: ColumnType::Text { max_len: 3 },
                found: "BYTES"
            })
        );

        let bytes = Column::new("b", ColumnType::Bytes { max_len: 0 }, true);
        assert_eq!(check_value(&bytes, &Value::Null), Ok(()));
        assert_eq!(check_value(&bytes, &Value::Bytes(Vec::new())), Ok(()));
        assert!(matches!(
            check_value(&bytes, &Value::Bytes(vec![0])),
            Err(CatalogError::TooLong {
                len: 1,
                max_len: 0,
                ..
            })
        ));

        let ts = Column::new("ts", ColumnType::Timestamp, false);
        assert_eq!(check_value(&ts, &Value::Timestamp(-1)), Ok(()));
        // Timestamps and int64s are distinct types.
        assert!(matches!(
            check_value(&ts, &Value::Int64(1)),
            Err(CatalogError::TypeMismatch { found: "INT64", .. })
        ));
        let i32c = Column::new("i", ColumnType::Int32, false);
        assert!(matches!(
            check_value(&i32c, &Value::Int64(1)),
            Err(CatalogError::TypeMismatch { found: "INT64", .. })
        ));
    }

    #[test]
    fn check_row_counts_columns() {
        let columns = vec![
            Column::new("a", ColumnType::Int32, false),
            Column::new("b", ColumnType::Bool, true),
        ];
        assert_eq!(check_row(&columns, &[Value::Int32(1), Value::Null]), Ok(()));
        assert_eq!(
            check_row(&columns, &[Value::Int32(1)]),
            Err(CatalogError::ColumnCount {
                expected: 2,
                found: 1
            })
        );
        assert!(matches!(
            check_row(&columns, &[Value::Null, Value::Null]),
            Err(CatalogError::NullNotAllowed { .. })
        ));
    }

    #[test]
    fn serde_round_trip() {
        let columns = vec![
            Column::new("id", ColumnType::Int64, false),
            Column::new("name", ColumnType::Text { max_len: 40 }, true),
            Column::new("blob", ColumnType::Bytes { max_len: 9 }, true),
            Column::new("at", ColumnType::Timestamp, false),
        ];
        let json = serde_json::to_string(&columns).unwrap();
        let back: Vec<Column> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, columns);
        let values = vec![
            Value::Null,
            Value::Text("x".into()),
            Value::Bytes(vec![0, 255]),
            Value::Float64(1.5),
        ];
        let json = serde_json::to_string(&values).unwrap();
        let back: Vec<Value> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, values);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Generated rows pass the check (the generators are right), and a
        /// text/bytes value one byte over the limit is rejected.
        #[test]
        fn generated_rows_pass_and_overlong_fails((columns, values) in arb_schema_and_row(6)) {
            prop_assert_eq!(check_row(&columns, &values), Ok(()));
            for column in &columns {
                let over = match column.ty {
                    ColumnType::Text { max_len } => {
                        Value::Text("x".repeat(max_len as usize + 1))
                    }
                    ColumnType::Bytes { max_len } => Value::Bytes(vec![7; max_len as usize + 1]),
                    _ => continue,
                };
                let is_too_long = matches!(
                    check_value(column, &over),
                    Err(CatalogError::TooLong { .. })
                );
                prop_assert!(is_too_long);
            }
        }
    }
}
