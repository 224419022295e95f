//! COPY's data formats: PostgreSQL's text format (the default) and CSV,
//! decoded incrementally from whatever chunks a client sends and encoded
//! one row per line.
//!
//! Text format: one row per line, fields split by the delimiter (tab by
//! default), `\N` for NULL, backslash escapes (`\b \f \n \r \t \v \\`,
//! octal `\ooo`, hex `\xhh`, and `\c` for any other character `c`); a
//! line `\.` ends the data. CSV: fields split by the delimiter (a comma),
//! quoted with `"` when they hold the delimiter, a quote or a line break
//! (a quote inside doubled, or escaped by the ESCAPE character), an
//! unquoted empty field is NULL, and HEADER skips (or writes) one line of
//! column names.
//!
//! Invariants:
//! * CP1. A row is decoded only once its whole line has arrived: the
//!   decoder keeps the bytes after the last line break it has seen (and,
//!   for CSV, whether that point is inside quotes) and never splits a
//!   field across chunks.
//! * CP2. A line longer than [`MAX_LINE`] is an error, so a client cannot
//!   grow the buffer without bound.

use sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption};

use crate::error::{SqlError, SqlResult, SqlState};

/// The longest line (one row) COPY accepts, in bytes.
pub const MAX_LINE: usize = 64 << 20;

/// How COPY's data is laid out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyFormat {
    /// CSV rather than text.
    pub csv: bool,
    /// The field delimiter.
    pub delimiter: u8,
    /// The string that stands for NULL.
    pub null: String,
    /// CSV: one header line (skipped on input, written on output).
    pub header: bool,
    /// CSV: the quote character.
    pub quote: u8,
    /// CSV: the character that escapes a quote inside a quoted field.
    pub escape: u8,
}

impl CopyFormat {
    /// Text format with PostgreSQL's defaults.
    pub fn text() -> CopyFormat {
        CopyFormat {
            csv: false,
            delimiter: b'\t',
            null: "\\N".into(),
            header: false,
            quote: b'"',
            escape: b'"',
        }
    }

    /// The format COPY's options ask for (PostgreSQL 9.0's `WITH (...)`
    /// list and the older keywords).
    pub fn from_options(options: &[CopyOption], legacy: &[CopyLegacyOption]) -> SqlResult<Self> {
        let mut f = CopyFormat::text();
        let mut delimiter = None;
        let mut null = None;
        let mut quote = None;
        let mut escape = None;
        let ascii = |c: char, what: &str| -> SqlResult<u8> {
            u8::try_from(u32::from(c))
                .ok()
                .filter(|b| b.is_ascii() && *b != b'\n' && *b != b'\r')
                .ok_or_else(|| {
                    SqlError::new(
                        SqlState::FEATURE_NOT_SUPPORTED,
                        format!("COPY {what} must be a single one-byte character"),
                    )
                })
        };
        for o in options {
            match o {
                CopyOption::Format(name) => match name.value.to_lowercase().as_str() {
                    "text" => f.csv = false,
                    "csv" => f.csv = true,
                    "binary" => return Err(SqlError::unsupported("COPY in binary format")),
                    other => {
                        return Err(SqlError::new(
                            SqlState::INVALID_PARAMETER_VALUE,
                            format!("COPY format \"{other}\" not recognized"),
                        ));
                    }
                },
                CopyOption::Delimiter(c) => delimiter = Some(ascii(*c, "delimiter")?),
                CopyOption::Null(s) => null = Some(s.clone()),
                CopyOption::Header(h) => f.header = *h,
                CopyOption::Quote(c) => quote = Some(ascii(*c, "quote")?),
                CopyOption::Escape(c) => escape = Some(ascii(*c, "escape")?),
                CopyOption::Freeze(_) => {}
                CopyOption::Encoding(e) => {
                    let e = e.to_uppercase().replace(['-', '_'], "");
                    if e != "UTF8" {
                        return Err(SqlError::unsupported(format!("COPY in encoding {e}")));
                    }
                }
                other => return Err(SqlError::unsupported(format!("COPY option {other}"))),
            }
        }
        for o in legacy {
            match o {
                CopyLegacyOption::Binary => {
                    return Err(SqlError::unsupported("COPY in binary format"));
                }
                CopyLegacyOption::Delimiter(c) => delimiter = Some(ascii(*c, "delimiter")?),
                CopyLegacyOption::Null(s) => null = Some(s.clone()),
                CopyLegacyOption::Csv(opts) => {
                    f.csv = true;
                    for c in opts {
                        match c {
                            CopyLegacyCsvOption::Header => f.header = true,
                            CopyLegacyCsvOption::Quote(q) => quote = Some(ascii(*q, "quote")?),
                            CopyLegacyCsvOption::Escape(e) => escape = Some(ascii(*e, "escape")?),
                            other => {
                                return Err(SqlError::unsupported(format!("COPY option {other}")));
                            }
                        }
                    }
                }
                other => return Err(SqlError::unsupported(format!("COPY option {other}"))),
            }
        }
        if f.csv {
            f.delimiter = delimiter.unwrap_or(b',');
            f.null = null.unwrap_or_default();
            f.quote = quote.unwrap_or(b'"');
            f.escape = escape.unwrap_or(f.quote);
            if f.delimiter == f.quote {
                return Err(SqlError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    "COPY delimiter and quote must be different",
                ));
            }
        } else {
            if quote.is_some() || escape.is_some() {
                return Err(SqlError::new(
                    SqlState::FEATURE_NOT_SUPPORTED,
                    "COPY quote and escape are available only in CSV mode",
                ));
            }
            if f.header {
                return Err(SqlError::unsupported("COPY HEADER in text format"));
            }
            f.delimiter = delimiter.unwrap_or(b'\t');
            if f.delimiter == b'\\' {
                return Err(SqlError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    "COPY delimiter cannot be backslash",
                ));
            }
            f.null = null.unwrap_or_else(|| "\\N".into());
        }
        Ok(f)
    }
}

fn bad_copy(line: u64, msg: impl std::fmt::Display) -> SqlError {
    SqlError::new(
        SqlState::BAD_COPY_FILE_FORMAT,
        format!("{msg} (COPY data, line {line})"),
    )
}

/// One decoded row: a field per column, `None` for NULL.
pub type Fields = Vec<Option<String>>;

/// Decodes COPY data fed in chunks (CP1).
#[derive(Debug)]
pub struct Decoder {
    format: CopyFormat,
    buf: Vec<u8>,
    /// How far `buf` has been scanned for a line end.
    scanned: usize,
    /// CSV: whether `scanned` is inside quotes; text: after a backslash.
    state: bool,
    /// Lines decoded so far (for messages).
    line: u64,
    /// The header line is still to be skipped.
    header: bool,
    /// `\.` was seen: everything after it is ignored.
    ended: bool,
}

impl Decoder {
    /// A decoder for `format`.
    pub fn new(format: CopyFormat) -> Decoder {
        Decoder {
            header: format.header,
            format,
            buf: Vec::new(),
            scanned: 0,
            state: false,
            line: 0,
            ended: false,
        }
    }

    /// The line number of the last row handed out.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Decode the rows that `data` completes, handing each to `row`.
    pub fn feed(
        &mut self,
        data: &[u8],
        row: &mut dyn FnMut(Fields) -> SqlResult<()>,
    ) -> SqlResult<()> {
        if self.ended {
            return Ok(());
        }
        self.buf.extend_from_slice(data);
        let mut start = 0;
        let mut i = self.scanned;
        while i < self.buf.len() {
            let b = self.buf[i];
            if self.format.csv {
                let (q, e) = (self.format.quote, self.format.escape);
                if !self.state {
                    if b == q {
                        self.state = true;
                    }
                } else if b == e || b == q {
                    // Inside quotes, the escape before a quote or an escape
                    // takes it literally (a doubled quote by default); a
                    // quote alone closes. Wait for the next byte to tell.
                    match self.buf.get(i + 1) {
                        Some(&n) if b == e && (n == q || n == e) => i += 1,
                        None if b == e => break,
                        _ if b == q => self.state = false,
                        _ => {}
                    }
                }
            } else if self.state {
                self.state = false;
            } else if b == b'\\' {
                self.state = true;
            }
            if b == b'\n' && !self.state {
                let end = if i > start && self.buf[i - 1] == b'\r' {
                    i - 1
                } else {
                    i
                };
                let line = self.buf[start..end].to_vec();
                start = i + 1;
                if self.decode_line(&line, row)? {
                    self.ended = true;
                    self.buf.clear();
                    self.scanned = 0;
                    return Ok(());
                }
            }
            i += 1;
        }
        self.buf.drain(..start);
        self.scanned = i - start;
        if self.buf.len() > MAX_LINE {
            return Err(bad_copy(
                self.line + 1,
                format!("a line longer than {} MiB", MAX_LINE >> 20),
            ));
        }
        Ok(())
    }

    /// The data is complete: decode a last line that has no line break.
    pub fn finish(&mut self, row: &mut dyn FnMut(Fields) -> SqlResult<()>) -> SqlResult<()> {
        if self.ended || self.buf.is_empty() {
            return Ok(());
        }
        let mut line = std::mem::take(&mut self.buf);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        self.decode_line(&line, row)?;
        Ok(())
    }

    /// Decode one line; `true` at the end-of-data marker.
    fn decode_line(
        &mut self,
        line: &[u8],
        row: &mut dyn FnMut(Fields) -> SqlResult<()>,
    ) -> SqlResult<bool> {
        self.line += 1;
        if line == b"\\." {
            return Ok(true);
        }
        if self.header {
            self.header = false;
            return Ok(false);
        }
        let fields = if self.format.csv {
            csv_fields(&self.format, line, self.line)?
        } else {
            text_fields(&self.format, line, self.line)?
        };
        row(fields)?;
        Ok(false)
    }
}

fn utf8(bytes: Vec<u8>, line: u64) -> SqlResult<String> {
    String::from_utf8(bytes).map_err(|_| {
        SqlError::new(
            SqlState::CHARACTER_NOT_IN_REPERTOIRE,
            format!("invalid byte sequence for encoding \"UTF8\" (COPY data, line {line})"),
        )
    })
}

fn text_fields(f: &CopyFormat, line: &[u8], n: u64) -> SqlResult<Fields> {
    let mut out = Vec::new();
    let mut raw_start = 0;
    let mut i = 0;
    let mut field = Vec::new();
    loop {
        let at_end = i >= line.len();
        if at_end || line[i] == f.delimiter {
            let raw = &line[raw_start..i.min(line.len())];
            if raw == f.null.as_bytes() {
                out.push(None);
            } else {
                out.push(Some(utf8(std::mem::take(&mut field), n)?));
            }
            field.clear();
            if at_end {
                return Ok(out);
            }
            i += 1;
            raw_start = i;
            continue;
        }
        let b = line[i];
        if b != b'\\' {
            field.push(b);
            i += 1;
            continue;
        }
        // A backslash escape.
        let Some(&c) = line.get(i + 1) else {
            return Err(bad_copy(n, "a backslash at the end of a line"));
        };
        i += 2;
        match c {
            b'b' => field.push(8),
            b'f' => field.push(12),
            b'n' => field.push(b'\n'),
            b'r' => field.push(b'\r'),
            b't' => field.push(b'\t'),
            b'v' => field.push(11),
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                for _ in 0..2 {
                    match line.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                field.push((v & 0xff) as u8);
            }
            b'x' if line.get(i).is_some_and(u8::is_ascii_hexdigit) => {
                let mut v = 0u8;
                for _ in 0..2 {
                    match line.get(i).and_then(|d| (*d as char).to_digit(16)) {
                        Some(d) => {
                            v = v * 16 + d as u8;
                            i += 1;
                        }
                        None => break,
                    }
                }
                field.push(v);
            }
            other => field.push(other),
        }
    }
}

fn csv_fields(f: &CopyFormat, line: &[u8], n: u64) -> SqlResult<Fields> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        let mut field = Vec::new();
        let mut quoted = false;
        let mut in_quotes = false;
        while i < line.len() {
            let b = line[i];
            if in_quotes {
                if b == f.escape
                    && let Some(&next) = line.get(i + 1)
                    && (next == f.quote || next == f.escape)
                {
                    field.push(next);
                    i += 2;
                    continue;
                }
                if b == f.quote {
                    in_quotes = false;
                    i += 1;
                    continue;
                }
                field.push(b);
                i += 1;
                continue;
            }
            if b == f.delimiter {
                break;
            }
            if b == f.quote {
                in_quotes = true;
                quoted = true;
                i += 1;
                continue;
            }
            field.push(b);
            i += 1;
        }
        if in_quotes {
            return Err(bad_copy(n, "unterminated CSV quoted field"));
        }
        // Unquoted and equal to the NULL string: NULL.
        if !quoted && field == f.null.as_bytes() {
            out.push(None);
        } else {
            out.push(Some(utf8(field, n)?));
        }
        if i >= line.len() {
            return Ok(out);
        }
        i += 1; // the delimiter
    }
}

/// Every row of `chunks` of `format` data, fed in that order (for tests
/// and fuzzing: a COPY inserts each row as its line arrives).
pub fn decode(format: &CopyFormat, chunks: &[&[u8]]) -> SqlResult<Vec<Fields>> {
    let mut d = Decoder::new(format.clone());
    let mut rows = Vec::new();
    for c in chunks {
        d.feed(c, &mut |r| {
            rows.push(r);
            Ok(())
        })?;
    }
    d.finish(&mut |r| {
        rows.push(r);
        Ok(())
    })?;
    Ok(rows)
}

/// Encode one row as a line of `format` (with its line break).
pub fn encode_row(format: &CopyFormat, fields: &[Option<String>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, field) in fields.iter().enumerate() {
        if k > 0 {
            out.push(format.delimiter);
        }
        match field {
            // NULL is the NULL string, unquoted, in both formats.
            None => out.extend_from_slice(format.null.as_bytes()),
            Some(s) if format.csv => csv_field(format, s, &mut out),
            Some(s) => text_field(format, s, &mut out),
        }
    }
    out.push(b'\n');
    out
}

fn text_field(f: &CopyFormat, s: &str, out: &mut Vec<u8>) {
    for &b in s.as_bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' if f.delimiter == b'\t' => out.extend_from_slice(b"\\t"),
            b if b == f.delimiter => {
                out.push(b'\\');
                out.push(b);
            }
            b => out.push(b),
        }
    }
}

fn csv_field(f: &CopyFormat, s: &str, out: &mut Vec<u8>) {
    let bytes = s.as_bytes();
    let needs = s == f.null
        || bytes.iter().any(|&b| {
            b == f.delimiter || b == f.quote || b == f.escape || b == b'\n' || b == b'\r'
        })
        || s == "\\.";
    if !needs {
        out.extend_from_slice(bytes);
        return;
    }
    out.push(f.quote);
    for &b in bytes {
        if b == f.quote || b == f.escape {
            out.push(f.escape);
        }
        out.push(b);
    }
    out.push(f.quote);
}

/// Where COPY FROM puts rows: a table, the columns the data holds (in
/// order), and what the others get (their defaults, NULL without one).
#[derive(Debug)]
pub struct Target {
    /// The table.
    pub table: quill::Table,
    schema: std::sync::Arc<quill::catalog::schema::TableSchema>,
    columns: Vec<(usize, quill::catalog::ColumnType)>,
    defaults: Vec<quill::catalog::Value>,
    domains: Vec<crate::types::Domain>,
}

impl Target {
    /// The target for `COPY table [(columns)] FROM ...`.
    pub fn open(
        db: &quill::Db,
        table: &sqlparser::ast::ObjectName,
        columns: &[sqlparser::ast::Ident],
    ) -> SqlResult<Target> {
        let (t, schema) = crate::access::open(db, &crate::ddl::table_name(table)?)?;
        let columns = if columns.is_empty() {
            schema
                .def
                .columns
                .iter()
                .map(|c| c.ty)
                .enumerate()
                .collect()
        } else {
            columns
                .iter()
                .map(|c| {
                    crate::dml::column_of(
                        &schema,
                        &sqlparser::ast::ObjectName::from(vec![c.clone()]),
                    )
                })
                .collect::<SqlResult<_>>()?
        };
        Ok(Target {
            table: t,
            defaults: crate::dml::column_defaults(&schema),
            domains: crate::dml::column_domains(&schema),
            schema,
            columns,
        })
    }

    /// How many fields each line holds.
    pub fn width(&self) -> usize {
        self.columns.len()
    }

    /// The full row for one line's fields (line `line`, for messages).
    pub fn row(&self, fields: Fields, line: u64) -> SqlResult<Vec<quill::catalog::Value>> {
        if fields.len() > self.columns.len() {
            return Err(bad_copy(line, "extra data after last expected column"));
        }
        if let Some(&(col, _)) = self.columns.get(fields.len()) {
            let name = self
                .schema
                .def
                .columns
                .get(col)
                .map_or("?", |c| c.name.as_str());
            return Err(bad_copy(
                line,
                format!("missing data for column \"{name}\""),
            ));
        }
        let mut full = self.defaults.clone();
        for (field, &(col, ty)) in fields.into_iter().zip(&self.columns) {
            let v = field.map_or(quill::catalog::Value::Null, quill::catalog::Value::Text);
            let dom = self
                .domains
                .get(col)
                .copied()
                .unwrap_or(crate::types::Domain::Plain);
            let slot = full.get_mut(col).ok_or_else(|| {
                SqlError::new(
                    SqlState::INTERNAL_ERROR,
                    format!("column {col} is beyond the row"),
                )
            })?;
            *slot = crate::types::store_as(v, ty, dom).map_err(|e| SqlError {
                message: format!("{} (COPY data, line {line})", e.message),
                ..e
            })?;
        }
        Ok(full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use super::decode as decode_all;

    fn s(x: &str) -> Option<String> {
        Some(x.to_string())
    }

    #[test]
    fn text_format_escapes_nulls_and_the_end_marker() {
        let f = CopyFormat::text();
        let rows = decode_all(
            &f,
            &[
                b"1\ta\\tb\t\\N\n2\t\\\\x\\101\\x41\t\r\n",
                b"3\t\t\n\\.\nignored\n",
            ],
        )
        .unwrap();
        assert_eq!(
            rows,
            vec![
                vec![s("1"), s("a\tb"), None],
                vec![s("2"), s("\\xAA"), s("")],
                vec![s("3"), s(""), s("")],
            ]
        );
    }

    #[test]
    fn csv_quotes_line_breaks_header_and_null() {
        let mut f = CopyFormat::text();
        f.csv = true;
        f.delimiter = b',';
        f.null = String::new();
        f.header = true;
        let rows = decode_all(&f, &[b"id,name\n1,\"a,\"\"b\"\"\nc\",\n2,\"\",x", b"y\n"]).unwrap();
        assert_eq!(
            rows,
            vec![
                vec![s("1"), s("a,\"b\"\nc"), None],
                vec![s("2"), s(""), s("xy")]
            ]
        );
        let e = decode_all(&f, &[b"h\n1,\"open\n"]).unwrap_err();
        assert_eq!(e.state, SqlState::BAD_COPY_FILE_FORMAT, "{e:?}");
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let f = CopyFormat::text();
        assert!(decode_all(&f, &[b"a\\"]).is_err());
        let e = decode_all(&f, &[b"\xff\xfe\n"]).unwrap_err();
        assert_eq!(e.state, SqlState::CHARACTER_NOT_IN_REPERTOIRE);
    }

    fn format() -> impl Strategy<Value = CopyFormat> {
        (
            any::<bool>(),
            prop::sample::select(vec![b'\t', b',', b'|', b';']),
        )
            .prop_map(|(csv, d)| {
                let mut f = CopyFormat::text();
                f.csv = csv;
                f.delimiter = d;
                if csv {
                    f.null = String::new();
                }
                f
            })
    }

    proptest! {
        /// Encoding then decoding, in any chunking, gives the rows back.
        #[test]
        fn encode_then_decode_round_trips(
            f in format(),
            rows in prop::collection::vec(
                prop::collection::vec(prop::option::of("[a-z\\\\\t\n\r,|;\" .N]{0,8}"), 1..4), 0..6),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        ) {
            let width = rows.first().map_or(1, Vec::len);
            let rows: Vec<Fields> = rows.into_iter().map(|mut r| { r.resize(width, None); r }).collect();
            let data: Vec<u8> = rows.iter().flat_map(|r| encode_row(&f, r)).collect();
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(data.len() + 1)).collect();
            at.sort_unstable();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut prev = 0;
            for a in at { chunks.push(&data[prev..a]); prev = a; }
            chunks.push(&data[prev..]);
            let back = decode_all(&f, &chunks).unwrap();
            prop_assert_eq!(back, rows);
        }

        /// Any bytes in any chunking: rows or an error, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(
            f in format(),
            data in prop::collection::vec(any::<u8>(), 0..200),
            cut in any::<prop::sample::Index>(),
        ) {
            let c = cut.index(data.len() + 1);
            let _ = decode_all(&f, &[&data[..c], &data[c..]]);
        }
    }
}
