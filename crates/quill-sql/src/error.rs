//! SQL errors: every error a statement can end in carries the SQLSTATE a
//! PostgreSQL client expects for it (clients branch on the code: sysbench
//! retries 40001 and 40P01 and aborts on anything else), and a message a
//! user can act on.

use std::fmt;

/// A five-character SQLSTATE code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SqlState(pub &'static str);

impl SqlState {
    /// 0A000: the statement is valid SQL that Quill does not support.
    pub const FEATURE_NOT_SUPPORTED: SqlState = SqlState("0A000");
    /// 22003: a number out of its type's range.
    pub const NUMERIC_VALUE_OUT_OF_RANGE: SqlState = SqlState("22003");
    /// 22001: a string longer than its column allows.
    pub const STRING_DATA_RIGHT_TRUNCATION: SqlState = SqlState("22001");
    /// 22P02: text that is not a value of the type it must become.
    pub const INVALID_TEXT_REPRESENTATION: SqlState = SqlState("22P02");
    /// 22012: division by zero.
    pub const DIVISION_BY_ZERO: SqlState = SqlState("22012");
    /// 22023: an invalid parameter value (e.g. a negative LIMIT).
    pub const INVALID_PARAMETER_VALUE: SqlState = SqlState("22023");
    /// 23502: NULL into a NOT NULL column.
    pub const NOT_NULL_VIOLATION: SqlState = SqlState("23502");
    /// 23505: a duplicate key in a unique index or primary key.
    pub const UNIQUE_VIOLATION: SqlState = SqlState("23505");
    /// 25001: BEGIN inside a transaction block (a warning in PostgreSQL).
    pub const ACTIVE_SQL_TRANSACTION: SqlState = SqlState("25001");
    /// 42501: an action the server does not allow a client.
    pub const INSUFFICIENT_PRIVILEGE: SqlState = SqlState("42501");
    /// 22P04: COPY data that does not parse.
    pub const BAD_COPY_FILE_FORMAT: SqlState = SqlState("22P04");
    /// 22021: bytes that are not UTF-8.
    pub const CHARACTER_NOT_IN_REPERTOIRE: SqlState = SqlState("22021");
    /// 25P02: a statement in a transaction that already failed.
    pub const IN_FAILED_SQL_TRANSACTION: SqlState = SqlState("25P02");
    /// 40001: a serialization failure or lock-wait timeout; retry.
    pub const SERIALIZATION_FAILURE: SqlState = SqlState("40001");
    /// 40P01: the transaction was a deadlock's victim; retry.
    pub const DEADLOCK_DETECTED: SqlState = SqlState("40P01");
    /// 08P01: a message that breaks the protocol (a wrong parameter count).
    pub const PROTOCOL_VIOLATION: SqlState = SqlState("08P01");
    /// 57014: the statement was canceled at the client's request.
    pub const QUERY_CANCELED: SqlState = SqlState("57014");
    /// 55P03: a row lock was not granted within the session's
    /// `lock_timeout`.
    pub const LOCK_NOT_AVAILABLE: SqlState = SqlState("55P03");
    /// 28P01: the password (SCRAM proof) is wrong, or the user unknown.
    pub const INVALID_PASSWORD: SqlState = SqlState("28P01");
    /// 53300: too many connections.
    pub const TOO_MANY_CONNECTIONS: SqlState = SqlState("53300");
    /// 42P02: a parameter the statement does not have.
    pub const UNDEFINED_PARAMETER: SqlState = SqlState("42P02");
    /// 42803: an aggregate or ungrouped column where it cannot be.
    pub const GROUPING_ERROR: SqlState = SqlState("42803");
    /// 26000: no prepared statement of that name.
    pub const INVALID_SQL_STATEMENT_NAME: SqlState = SqlState("26000");
    /// 42P05: a prepared statement of that name exists.
    pub const DUPLICATE_PREPARED_STATEMENT: SqlState = SqlState("42P05");
    /// 21000: a scalar subquery returned more than one row.
    pub const CARDINALITY_VIOLATION: SqlState = SqlState("21000");
    /// 55P02: a setting that cannot change while the server runs.
    pub const CANT_CHANGE_RUNTIME_PARAM: SqlState = SqlState("55P02");
    /// 2201B: an invalid regular expression.
    pub const INVALID_REGULAR_EXPRESSION: SqlState = SqlState("2201B");
    /// 42702: a column name more than one relation has.
    pub const AMBIGUOUS_COLUMN: SqlState = SqlState("42702");
    /// 2BP01: an object others depend on (a primary key's index).
    pub const DEPENDENT_OBJECTS_STILL_EXIST: SqlState = SqlState("2BP01");
    /// 42601: a syntax error.
    pub const SYNTAX_ERROR: SqlState = SqlState("42601");
    /// 42P01: no such table.
    pub const UNDEFINED_TABLE: SqlState = SqlState("42P01");
    /// 42703: no such column.
    pub const UNDEFINED_COLUMN: SqlState = SqlState("42703");
    /// 42704: no such object (an index, a type).
    pub const UNDEFINED_OBJECT: SqlState = SqlState("42704");
    /// 42P07: the relation exists already.
    pub const DUPLICATE_TABLE: SqlState = SqlState("42P07");
    /// 42701: a column named twice.
    pub const DUPLICATE_COLUMN: SqlState = SqlState("42701");
    /// 42804: an expression of the wrong type.
    pub const DATATYPE_MISMATCH: SqlState = SqlState("42804");
    /// 42883: no such function or operator for these types.
    pub const UNDEFINED_FUNCTION: SqlState = SqlState("42883");
    /// 42P10: an invalid column reference (e.g. a bad primary key).
    pub const INVALID_COLUMN_REFERENCE: SqlState = SqlState("42P10");
    /// 54000: a program limit exceeded (a key or row too long).
    pub const PROGRAM_LIMIT_EXCEEDED: SqlState = SqlState("54000");
    /// 25006: a write in a read-only database.
    pub const READ_ONLY_SQL_TRANSACTION: SqlState = SqlState("25006");
    /// 58030: an I/O error.
    pub const IO_ERROR: SqlState = SqlState("58030");
    /// XX001: damaged data.
    pub const DATA_CORRUPTED: SqlState = SqlState("XX001");
    /// XX000: an internal error.
    pub const INTERNAL_ERROR: SqlState = SqlState("XX000");

    /// The code's five characters.
    pub fn code(self) -> &'static str {
        self.0
    }

    /// Whether a client should retry the transaction (class 40).
    pub fn is_retryable(self) -> bool {
        self.0.starts_with("40")
    }
}

impl fmt::Display for SqlState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// An error a statement ended in.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SqlError {
    /// The SQLSTATE.
    pub state: SqlState,
    /// What went wrong, for the user.
    pub message: String,
}

impl SqlError {
    /// An error with this code and message.
    pub fn new(state: SqlState, message: impl Into<String>) -> SqlError {
        SqlError {
            state,
            message: message.into(),
        }
    }

    /// 0A000 for `what`, which Quill does not support (yet).
    pub fn unsupported(what: impl fmt::Display) -> SqlError {
        SqlError::new(
            SqlState::FEATURE_NOT_SUPPORTED,
            format!("{what} is not supported"),
        )
    }
}

impl From<quill::Error> for SqlError {
    fn from(e: quill::Error) -> SqlError {
        use quill::Error as E;
        let state = match &e {
            E::Deadlock { .. } => SqlState::DEADLOCK_DETECTED,
            E::LockTimeout { .. } | E::Serialization { .. } => SqlState::SERIALIZATION_FAILURE,
            E::Canceled { .. } => SqlState::QUERY_CANCELED,
            E::LockWaitLimit { .. } => {
                // As PostgreSQL says it.
                return SqlError::new(
                    SqlState::LOCK_NOT_AVAILABLE,
                    "canceling statement due to lock timeout",
                );
            }
            E::DuplicateKey { .. } => SqlState::UNIQUE_VIOLATION,
            E::NoSuchTable { .. } => SqlState::UNDEFINED_TABLE,
            E::TableExists { .. } => SqlState::DUPLICATE_TABLE,
            E::Catalog(c) => return catalog_error(c),
            E::KeyTooLong { .. } | E::LimitExceeded { .. } => SqlState::PROGRAM_LIMIT_EXCEEDED,
            E::ReadOnly { .. } => SqlState::READ_ONLY_SQL_TRANSACTION,
            E::Io(_) | E::LogFull { .. } | E::Poisoned { .. } => SqlState::IO_ERROR,
            E::Corrupt { .. } | E::CorruptPage { .. } => SqlState::DATA_CORRUPTED,
            E::InvalidArgument { .. } => SqlState::INVALID_PARAMETER_VALUE,
            _ => SqlState::INTERNAL_ERROR,
        };
        SqlError::new(state, e.to_string())
    }
}

fn catalog_error(c: &quill::catalog::CatalogError) -> SqlError {
    use quill::catalog::CatalogError as C;
    let state = match c {
        C::NullNotAllowed { .. } => SqlState::NOT_NULL_VIOLATION,
        C::TooLong { .. } => SqlState::STRING_DATA_RIGHT_TRUNCATION,
        C::TypeMismatch { .. } | C::ColumnCount { .. } => SqlState::DATATYPE_MISMATCH,
        _ => SqlState::DATA_CORRUPTED,
    };
    SqlError::new(state, c.to_string())
}

/// A statement's result or error.
pub type SqlResult<T> = std::result::Result<T, SqlError>;
