//! Session settings: what `SET`, `SHOW` and `RESET` read and write.
//! The variables clients set or read at connect (`application_name`,
//! `DateStyle`, `extra_float_digits`, ...) are kept and echoed back, as
//! PostgreSQL does; the ones that change Quill's behaviour are checked:
//! `quill.durability` (how a commit waits for the log) and
//! `transaction_isolation` / `default_transaction_isolation`.

use std::collections::BTreeMap;

use quill::{Durability, Isolation};

use crate::error::{SqlError, SqlResult, SqlState};

/// The settings PostgreSQL 15 reports, with the values Quill has (the
/// read-only ones cannot be SET).
const DEFAULTS: [(&str, &str, bool); 18] = [
    ("application_name", "", false),
    ("client_encoding", "UTF8", false),
    ("datestyle", "ISO, MDY", false),
    ("default_transaction_isolation", "read committed", false),
    ("default_transaction_read_only", "off", false),
    ("extra_float_digits", "1", false),
    ("integer_datetimes", "on", true),
    ("intervalstyle", "postgres", false),
    ("is_superuser", "on", true),
    ("lock_timeout", "0", false),
    ("quill.durability", "sync", false),
    ("search_path", "\"$user\", public", false),
    ("server_encoding", "UTF8", true),
    ("server_version", "15.18", true),
    ("server_version_num", "150018", true),
    ("standard_conforming_strings", "on", false),
    ("statement_timeout", "0", false),
    ("timezone", "Etc/UTC", false),
];

/// A session's settings.
///
/// SET.1: `durability`, `isolation` and `read_only` are the parsed values
/// of the `quill.durability`, `default_transaction_isolation` and
/// `default_transaction_read_only` entries of `values`, kept in step by
/// every change ([`Settings::set`], [`Settings::reset`]). Every
/// transaction reads them, and a lookup in the
/// map walks a dozen separately allocated strings: with a thousand
/// connections each session's map is cold when its statement runs.
#[derive(Clone, Debug)]
pub struct Settings {
    values: BTreeMap<String, String>,
    durability: Durability,
    isolation: Isolation,
    read_only: bool,
    statement_timeout: Option<std::time::Duration>,
    lock_timeout: Option<std::time::Duration>,
}

impl Default for Settings {
    fn default() -> Self {
        let mut s = Settings {
            values: DEFAULTS
                .iter()
                .map(|(k, v, _)| (k.to_string(), v.to_string()))
                .collect(),
            durability: Durability::Sync,
            isolation: Isolation::ReadCommitted,
            read_only: false,
            statement_timeout: None,
            lock_timeout: None,
        };
        s.refresh();
        s
    }
}

fn default_of(name: &str) -> Option<(&'static str, bool)> {
    DEFAULTS
        .iter()
        .find(|(k, _, _)| *k == name)
        .map(|(_, v, ro)| (*v, *ro))
}

/// The isolation level a setting's text names.
pub fn parse_isolation(name: &str, v: &str) -> SqlResult<Isolation> {
    // Without allocating: every transaction reads its default.
    let is = |s: &str| v.eq_ignore_ascii_case(s);
    if is("read committed") || is("read uncommitted") {
        Ok(Isolation::ReadCommitted)
    } else if is("repeatable read") {
        Ok(Isolation::RepeatableRead)
    } else if is("serializable") {
        Err(serializable_refused())
    } else {
        Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!(
                "invalid value for parameter \"{name}\": \"{}\"",
                v.to_ascii_lowercase()
            ),
        ))
    }
}

/// SERIALIZABLE is refused, not run as a weaker level: REPEATABLE READ
/// (snapshot isolation) lets two transactions that each read what the
/// other writes both commit (write skew), which a client asking for
/// SERIALIZABLE relies on not happening.
pub fn serializable_refused() -> SqlError {
    SqlError::new(
        SqlState::FEATURE_NOT_SUPPORTED,
        "isolation level SERIALIZABLE is not supported: Quill's strongest level is REPEATABLE READ \
         (snapshot isolation, which allows write skew); use REPEATABLE READ, and SELECT ... FOR \
         UPDATE on the rows a decision reads",
    )
}

/// A timeout's value (setting `name`: `statement_timeout`,
/// `lock_timeout`) as PostgreSQL reads it: a number of milliseconds, or a
/// number with a unit (`us`, `ms`, `s`, `min`, `h`, `d`); 0 is no limit
/// (`None`). 22023 for anything else.
pub fn parse_timeout(name: &str, v: &str) -> SqlResult<Option<std::time::Duration>> {
    let bad = || {
        SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!(
                "invalid value for parameter \"{name}\": \"{v}\" (milliseconds, or a number with a unit: us, ms, s, min, h, d)"
            ),
        )
    };
    let t = v.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let ms_per = match unit.trim() {
        "" | "ms" => 1.0,
        "us" => 0.001,
        "s" => 1_000.0,
        "min" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => return Err(bad()),
    };
    // Whole milliseconds, as PostgreSQL keeps it: rounded to the nearest
    // (under half a millisecond is 0, no limit).
    let ms = n * ms_per;
    // PostgreSQL's limit: INT_MAX milliseconds.
    if !ms.is_finite() || !(0.0..=f64::from(i32::MAX)).contains(&ms) {
        return Err(bad());
    }
    let ms = ms.round();
    Ok((ms >= 1.0).then(|| std::time::Duration::from_millis(ms as u64)))
}

/// `ms` milliseconds as PostgreSQL shows a time setting: in the largest
/// unit that holds it exactly (`1500ms`, `2s`, `1min`), `0` for none.
pub fn timeout_text(ms: u128) -> String {
    if ms == 0 {
        return "0".into();
    }
    for (unit, per) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("min", 60_000),
        ("s", 1_000),
    ] {
        if ms.is_multiple_of(per) {
            return format!("{}{unit}", ms / per);
        }
    }
    format!("{ms}ms")
}

/// A boolean setting's value as PostgreSQL reads it (on/off, true/false,
/// yes/no, 1/0), or 22023 naming `name`.
pub fn parse_bool(name: &str, v: &str) -> SqlResult<bool> {
    let v = v.trim().to_ascii_lowercase();
    match v.as_str() {
        "on" | "true" | "yes" | "1" | "t" | "y" => Ok(true),
        "off" | "false" | "no" | "0" | "f" | "n" => Ok(false),
        _ => Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("parameter \"{name}\" requires a Boolean value"),
        )),
    }
}

/// The text of an isolation level.
pub fn isolation_name(i: Isolation) -> &'static str {
    match i {
        Isolation::ReadCommitted => "read committed",
        Isolation::RepeatableRead => "repeatable read",
    }
}

/// The durability a `quill.durability` value names.
pub fn parse_durability(v: &str) -> SqlResult<Durability> {
    // Without allocating: every transaction reads its durability.
    let is = |s: &str| v.eq_ignore_ascii_case(s);
    if is("sync") {
        Ok(Durability::Sync)
    } else if is("write") {
        Ok(Durability::Write)
    } else if is("lazy") {
        Ok(Durability::Lazy)
    } else {
        Err(SqlError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!(
                "invalid value for parameter \"quill.durability\": \"{}\" (sync, write or lazy)",
                v.to_ascii_lowercase()
            ),
        ))
    }
}

impl Settings {
    /// Set `name` (folded to lower case) to `value`.
    pub fn set(&mut self, name: &str, value: &str) -> SqlResult<()> {
        let name = name.to_ascii_lowercase();
        match default_of(&name) {
            Some((_, true)) => {
                return Err(SqlError::new(
                    SqlState::CANT_CHANGE_RUNTIME_PARAM,
                    format!("parameter \"{name}\" cannot be changed"),
                ));
            }
            Some(_) => {}
            // Unknown names are kept if they are qualified (custom
            // options, as PostgreSQL allows `a.b`), refused otherwise.
            None if name.contains('.') && !name.starts_with("quill.") => {}
            None => {
                return Err(SqlError::new(
                    SqlState::UNDEFINED_OBJECT,
                    format!("unrecognized configuration parameter \"{name}\""),
                ));
            }
        }
        match name.as_str() {
            "quill.durability" => {
                parse_durability(value)?;
            }
            "default_transaction_isolation" => {
                parse_isolation(&name, value)?;
            }
            "default_transaction_read_only" => {
                parse_bool(&name, value)?;
            }
            "statement_timeout" | "lock_timeout" => {
                // Kept as PostgreSQL shows it: whole milliseconds, in
                // the largest unit that holds them exactly.
                let ms = parse_timeout(&name, value)?.map_or(0, |d| d.as_millis());
                self.values.insert(name, timeout_text(ms));
                self.refresh();
                return Ok(());
            }
            "client_encoding" if !value.eq_ignore_ascii_case("utf8") => {
                return Err(SqlError::unsupported(format!(
                    "client_encoding {value} (Quill speaks UTF8)"
                )));
            }
            _ => {}
        }
        self.values.insert(name, value.to_string());
        self.refresh();
        Ok(())
    }

    /// Parse the typed copies from the map again (SET.1). A value that
    /// does not parse cannot be there: `set` checks it and the defaults
    /// are valid.
    fn refresh(&mut self) {
        let durability = self
            .values
            .get("quill.durability")
            .map(|v| parse_durability(v));
        let isolation = self
            .values
            .get("default_transaction_isolation")
            .map(|v| parse_isolation("default_transaction_isolation", v));
        let read_only = self
            .values
            .get("default_transaction_read_only")
            .map(|v| parse_bool("default_transaction_read_only", v));
        debug_assert!(
            matches!(durability, Some(Ok(_)))
                && matches!(isolation, Some(Ok(_)))
                && matches!(read_only, Some(Ok(_))),
            "SET.1: the defaults and every value set are valid"
        );
        self.read_only = read_only.and_then(Result::ok).unwrap_or(false);
        let timeout = |name: &str| {
            let t = self.values.get(name).map(|v| parse_timeout(name, v));
            debug_assert!(
                matches!(t, Some(Ok(_))),
                "SET.1: the defaults and every value set are valid"
            );
            t.and_then(Result::ok).flatten()
        };
        self.statement_timeout = timeout("statement_timeout");
        self.lock_timeout = timeout("lock_timeout");
        self.durability = durability.and_then(Result::ok).unwrap_or(Durability::Sync);
        self.isolation = isolation
            .and_then(Result::ok)
            .unwrap_or(Isolation::ReadCommitted);
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> SqlResult<&str> {
        let name = name.to_ascii_lowercase();
        self.values.get(&name).map(String::as_str).ok_or_else(|| {
            SqlError::new(
                SqlState::UNDEFINED_OBJECT,
                format!("unrecognized configuration parameter \"{name}\""),
            )
        })
    }

    /// Back to the default (or forget a custom option).
    pub fn reset(&mut self, name: &str) -> SqlResult<()> {
        let name = name.to_ascii_lowercase();
        match default_of(&name) {
            Some((v, _)) => {
                self.values.insert(name, v.to_string());
            }
            // A custom option (a dotted name) is forgotten; the block's
            // own settings (kept by the session) reset to nothing here;
            // an unknown plain name is refused, as SET refuses it.
            None if name.contains('.') && !name.starts_with("quill.") => {
                self.values.remove(&name);
            }
            None if matches!(
                name.as_str(),
                "transaction_isolation" | "transaction_read_only"
            ) => {}
            None => {
                return Err(SqlError::new(
                    SqlState::UNDEFINED_OBJECT,
                    format!("unrecognized configuration parameter \"{name}\""),
                ));
            }
        }
        self.refresh();
        Ok(())
    }

    /// Every setting back to its default.
    pub fn reset_all(&mut self) {
        *self = Settings::default();
    }

    /// Every setting, by name.
    pub fn all(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The durability commits in this session use.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The isolation level a `BEGIN` without one uses.
    pub fn default_isolation(&self) -> Isolation {
        self.isolation
    }

    /// How long a statement may run (`statement_timeout`; `None` for 0,
    /// no limit).
    pub fn statement_timeout(&self) -> Option<std::time::Duration> {
        self.statement_timeout
    }

    /// How long a statement may wait for one row lock (`lock_timeout`;
    /// `None` for 0: the database's lock wait timeout, which fails the
    /// wait with the retryable 40001 instead of 55P03).
    pub fn lock_timeout(&self) -> Option<std::time::Duration> {
        self.lock_timeout
    }

    /// Whether a block begun without an access mode, and a statement
    /// outside a block, run read-only.
    pub fn default_read_only(&self) -> bool {
        self.read_only
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_checks_values_and_read_only_names() {
        let mut s = Settings::default();
        s.set("application_name", "psql").unwrap();
        assert_eq!(s.get("APPLICATION_NAME").unwrap(), "psql");
        assert_eq!(
            s.set("server_version", "16").unwrap_err().state,
            SqlState::CANT_CHANGE_RUNTIME_PARAM
        );
        assert_eq!(
            s.set("no_such", "1").unwrap_err().state,
            SqlState::UNDEFINED_OBJECT
        );
        s.set("myapp.flag", "x").unwrap();
        assert!(s.set("quill.durability", "maybe").is_err());
        s.set("quill.durability", "lazy").unwrap();
        assert_eq!(s.durability(), Durability::Lazy);
        s.set("Default_Transaction_Isolation", "REPEATABLE READ")
            .unwrap();
        assert_eq!(s.default_isolation(), Isolation::RepeatableRead);
        assert!(s.set("default_transaction_isolation", "chaos").is_err());
        assert_eq!(s.default_isolation(), Isolation::RepeatableRead);
        s.reset("default_transaction_isolation").unwrap();
        assert_eq!(s.default_isolation(), Isolation::ReadCommitted);
        assert_eq!(s.durability(), Durability::Lazy);
        s.reset_all();
        assert_eq!(s.durability(), Durability::Sync);
        assert!(s.get("myapp.flag").is_err());
    }
}
