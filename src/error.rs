//! The crate-wide error type. Each layer has its own error enum (for example
//! [`crate::io::IoError`]); they fold into [`Error`] with `From`, and every
//! variant says where and what went wrong so a caller can report it without
//! guessing.

use std::path::PathBuf;

/// Result alias used across Quill.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Quill.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file operation failed (or a simulated fault fired).
    #[error(transparent)]
    Io(#[from] crate::io::IoError),

    /// The transaction was chosen as the victim of a deadlock; it should
    /// roll back and retry.
    #[error("deadlock: transaction {trx} was chosen as the victim; roll back and retry")]
    Deadlock {
        /// The victim.
        trx: u64,
    },

    /// A row lock was not granted within the lock-wait timeout; the
    /// transaction may retry the statement or roll back.
    #[error("lock wait timeout: transaction {trx} waited {waited_ms} ms for a row lock")]
    LockTimeout {
        /// The waiting transaction.
        trx: u64,
        /// How long it waited.
        waited_ms: u64,
    },

    /// A row lock was not granted within the limit the transaction set
    /// for its lock waits ([`crate::OwnedTxn::set_lock_timeout`], a
    /// server's `lock_timeout`). The statement had no effect; the
    /// transaction goes on.
    #[error("lock timeout: transaction {trx} waited {waited_ms} ms for a row lock, its set limit")]
    LockWaitLimit {
        /// The waiting transaction.
        trx: u64,
        /// How long it waited.
        waited_ms: u64,
    },

    /// The statement was canceled (its transaction's cancel flag was set,
    /// [`crate::OwnedTxn::set_cancel`]) while it waited for a row lock,
    /// or an online index build's cancel flag was set
    /// ([`crate::Db::create_index_online`]). The statement had no effect;
    /// the transaction goes on.
    #[error("canceled at the client's request (lock-table identity {trx})")]
    Canceled {
        /// The waiting transaction (or index build: its lock-table identity, 0 between rows).
        trx: u64,
    },

    /// Inside [`crate::wait::without_waiting`], the call would have waited
    /// (for a row lock, a page read, a table under DDL, a log sync or log
    /// space) or ran past the attempt's time budget (wait W1, W4). It
    /// changed nothing; undo the rest
    /// of the statement ([`crate::OwnedTxn::rollback_to_savepoint`]) and
    /// run it again where the thread may block.
    #[error("the statement would wait for {what} on a thread that must not block")]
    WouldWait {
        /// What it would have waited for.
        what: &'static str,
    },

    /// Under REPEATABLE READ, a row this transaction writes was changed by
    /// a transaction its snapshot does not see. The transaction was rolled
    /// back; retry it.
    #[error(
        "serialization failure: transaction {trx} tried to change a row changed after its snapshot; it was rolled back, retry it"
    )]
    Serialization {
        /// The failed transaction.
        trx: u64,
    },

    /// An insert or update would give two rows the same primary key or
    /// the same key of a unique index. The statement had no effect.
    #[error("duplicate key in table {table}, index {index}")]
    DuplicateKey {
        /// The table.
        table: String,
        /// The index (`PRIMARY` for the primary key).
        index: String,
    },

    /// A value does not fit its column, or a key or row encoding is
    /// malformed.
    #[error(transparent)]
    Catalog(#[from] crate::catalog::CatalogError),

    /// A file holds bytes that fail a checksum or a structural check.
    #[error("corrupt {}: at offset {offset}: {reason}", file.display())]
    Corrupt {
        /// The file in which the damage was found.
        file: PathBuf,
        /// Byte offset within that file.
        offset: u64,
        /// What check failed.
        reason: String,
    },

    /// A file is not a Quill file of the expected kind (wrong magic bytes).
    #[error("{} is not a Quill {expected} (found magic {found:02x?})", file.display())]
    Foreign {
        /// The offending file.
        file: PathBuf,
        /// The kind of file that was expected.
        expected: &'static str,
        /// The first bytes found instead of the magic.
        found: Vec<u8>,
    },

    /// A data page fails its checks and could not be repaired (from the
    /// doublewrite area or the log).
    #[error("corrupt page {page} in {}: {reason}", file.display())]
    CorruptPage {
        /// The tablespace file.
        file: PathBuf,
        /// The page's id.
        page: u64,
        /// What check failed.
        reason: String,
    },

    /// A Quill file of a format version this build does not read.
    #[error("{} has format version {found}; this build reads version {supported}", file.display())]
    UnsupportedVersion {
        /// The offending file.
        file: PathBuf,
        /// Version found in the file.
        found: u32,
        /// Version this build supports.
        supported: u32,
    },

    /// The component failed earlier (a write or sync error) and refuses all
    /// further work until it is reopened, which runs recovery. Nothing was
    /// acknowledged after the failure.
    #[error("the database failed earlier and accepts no more work until reopened: {cause}")]
    Poisoned {
        /// The first failure, as text.
        cause: String,
    },

    /// A statement would write a key longer than the B+tree holds (a
    /// sixteenth of a page). Tables defined since invariant C4 of the
    /// catalog cannot produce one; tables of older builds can. The
    /// statement had no effect.
    #[error(
        "table {table}, index {index}: a key of {len} bytes is over the limit of {max} bytes for this database's page size; the statement had no effect"
    )]
    KeyTooLong {
        /// The table.
        table: String,
        /// The index (`PRIMARY` for the primary key).
        index: String,
        /// The key's length in bytes (for a secondary index, with the
        /// primary key that follows it).
        len: u64,
        /// The limit.
        max: u64,
    },

    /// A request exceeded a stated maximum.
    #[error("{what} is {actual}, over the maximum of {max}")]
    LimitExceeded {
        /// What was too large.
        what: &'static str,
        /// The size requested.
        actual: u64,
        /// The largest size allowed.
        max: u64,
    },

    /// The redo log has no free space because the checkpoint did not advance.
    #[error("redo log full: no checkpoint freed space within {waited_ms} ms")]
    LogFull {
        /// How long the append waited.
        waited_ms: u64,
    },

    /// A peer engine under benchmark (SQLite, RocksDB) reported an error.
    #[error("{engine}: {reason}")]
    Peer {
        /// Which engine.
        engine: &'static str,
        /// Its message.
        reason: String,
        /// The engine said retrying may succeed (busy, conflict).
        retryable: bool,
    },
    /// A caller passed a value that cannot be used.
    #[error("invalid {what}: {reason}")]
    InvalidArgument {
        /// Which argument or option.
        what: &'static str,
        /// Why it is rejected.
        reason: String,
    },

    /// No table has this name (never created, or dropped).
    #[error("table {name} does not exist")]
    NoSuchTable {
        /// The name asked for.
        name: String,
    },

    /// A table of this name exists already.
    #[error("table {name} already exists")]
    TableExists {
        /// The name asked for.
        name: String,
    },

    /// Tried to create something that already exists.
    #[error(
        "{} already exists: something is there already (a database, or part of one); open it instead, or create the new one in another directory",
        path.display()
    )]
    AlreadyExists {
        /// The existing path.
        path: PathBuf,
    },

    /// A change was asked of a database or log opened read-only.
    #[error("{} is open read-only: {what} needs a read-write open", dir.display())]
    ReadOnly {
        /// The database or log directory.
        dir: PathBuf,
        /// What was refused.
        what: &'static str,
    },

    /// A read-only open found that recovery must first write to the
    /// database (it was not closed cleanly).
    #[error(
        "{} was not closed cleanly: {reason}. Recovery writes, so a read-only open cannot show it; open it read-write once (`quill check --repair` recovers it, then checks)",
        dir.display()
    )]
    NeedsRecovery {
        /// The database or log directory.
        dir: PathBuf,
        /// What recovery would have to do.
        reason: String,
    },

    /// A directory opened as a database holds none.
    #[error(
        "{} holds no Quill database (no data.qdb, no log/): is the path right?",
        dir.display()
    )]
    NoDatabase {
        /// The directory.
        dir: PathBuf,
    },

    /// A database directory lacks a file the database needs.
    #[error("{} is an incomplete Quill database: {} is missing; {advice}", dir.display(), missing.display())]
    Incomplete {
        /// The database directory.
        dir: PathBuf,
        /// The missing file.
        missing: PathBuf,
        /// What it means and what the user can do.
        advice: String,
    },

    /// A tablespace and a log of two different databases.
    #[error(
        "{} belongs to another database (id {log_id:032x}) than {} (id {data_id:032x}); put back this database's own log: a log from another database or another copy cannot recover it",
        log_dir.display(),
        data_file.display()
    )]
    ForeignLog {
        /// The log directory.
        log_dir: PathBuf,
        /// The id in its file headers.
        log_id: u128,
        /// The tablespace file.
        data_file: PathBuf,
        /// The id in its superblock.
        data_id: u128,
    },

    /// Tried to open something that does not exist.
    #[error("{} does not exist: check the path", path.display())]
    NotFound {
        /// The missing path.
        path: PathBuf,
    },
}

impl Error {
    /// A `Corrupt` error for `file` at `offset`.
    pub(crate) fn corrupt(
        file: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corrupt {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True for errors after which retrying the transaction may succeed
    /// (deadlock victim, lock-wait timeout, serialization failure).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Deadlock { .. }
                | Error::LockTimeout { .. }
                | Error::Serialization { .. }
                | Error::Peer {
                    retryable: true,
                    ..
                }
        )
    }

    /// True for errors a caller may retry after reopening (I/O failures and
    /// the poisoned state they leave behind).
    pub fn is_io_failure(&self) -> bool {
        matches!(self, Error::Io(_) | Error::Poisoned { .. })
    }
}
