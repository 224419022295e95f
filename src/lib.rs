//! Quill: an embedded, crash-safe, transactional storage engine in the
//! InnoDB family: B+tree tables and secondary indexes in a buffer pool, a
//! redo log with group commit, undo-based MVCC transactions, checkpoints
//! and crash recovery.
//!
//! Start at [`Db`]: open a directory, create tables, run transactions.
//!
//! ```no_run
//! use quill::catalog::{Column, ColumnType, Value};
//! use quill::catalog::schema::TableDef;
//! use quill::db::{Db, Options};
//!
//! # fn main() -> quill::Result<()> {
//! let db = Db::open("my-data", Options::default())?; // creates or recovers
//! let t = db.create_table(TableDef {
//!     name: "kv".into(),
//!     columns: vec![
//!         Column::new("k", ColumnType::Int64, false),
//!         Column::new("v", ColumnType::Text { max_len: 100 }, true),
//!     ],
//!     primary_key: vec![0],
//!     indexes: vec![],
//! })?;
//! let mut tx = db.begin()?;
//! tx.insert(&t, &[Value::Int64(1), Value::Text("one".into())])?;
//! tx.commit()?; // durable when this returns
//! db.close()?;
//! # Ok(()) }
//! ```
//!
//! # Layers, bottom up
//! Each module states its invariants in its own documentation; the
//! on-disk formats are also described in `docs/` of the source repository
//! (`log-format.md`, `storage-format.md`, `transactions.md`).
//!
//! * [`io`]: the only code that touches files: real files (`pread`,
//!   `pwrite`, `fdatasync`, `fallocate`, `O_DIRECT`, the directory lock) and
//!   a simulated disk that loses, keeps or tears unsynced writes at a
//!   simulated power loss and injects failures.
//! * [`log`]: the redo log: appends without a mutex on the copy path,
//!   group commit with no dedicated thread, durability levels, async
//!   commit, checkpoint slots, and the recovery scan that tells a torn end
//!   from damage.
//! * [`page`] and [`buffer`]: the page format, the B+tree node layout
//!   within a page ([`page::node`]) and the tablespace file; the buffer pool (page hash, LRU, flush list, write-ahead rule) and the
//!   doublewrite area.
//! * [`mtr`]: mini-transactions: page latches held and redo collected,
//!   committed atomically.
//! * [`btree`]: B+trees over byte-string keys: search, insert, delete,
//!   splits and merges, range scans, bulk build.
//! * [`store`]: the storage engine below transactions: a database
//!   directory, its recovery, checkpoints and page cleaner.
//! * [`catalog`]: column types, the key and row encodings, table schemas.
//! * `txn` (inside the crate): transaction ids and the registry, read
//!   views, row locks, undo records and the undo log.
//! * [`db`]: the embedded database: [`Db`], [`Txn`], tables, purge,
//!   recovery rollback, read-only opens and `check`.
//! * [`stats`]: counters and latency histograms, kept per subsystem.
//! * [`wait`] (beside every layer, like [`Error`]): whether the running
//!   thread may wait; inside [`wait::without_waiting`] a row lock or page
//!   read that would block fails instead, so a server can run a statement
//!   on its event loop's thread and hand it off only when it must wait.
//!
//! Layers point down only: a module uses the ones before it in this list,
//! never one after it. (The node layout lives with the page format, below
//! [`mtr`], because recovery replays node changes without a B+tree.)
//!
//! # Errors
//! Every fallible call returns [`Error`]; [`Error::is_retryable`] marks
//! deadlocks, lock-wait timeouts and serialization failures, after which
//! a transaction may be retried.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]
#![warn(missing_docs)]
// An `ok_or(format!(..))` builds its error on every call, found or not: one
// in the undo segment decoder cost a `format!` per record purged.
#![warn(clippy::or_fun_call)]

pub mod btree;
pub mod buffer;
mod bytes;
pub mod catalog;
pub mod db;
mod error;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzz;
pub mod io;
pub mod log;
pub mod mtr;
pub mod page;
pub mod stats;
pub mod store;
mod txn;
pub mod varint;
pub mod wait;

pub use db::{Db, Isolation, Options, OwnedTxn, Table, Txn, TxnOptions};
pub use error::{Error, Result};
pub use log::{CommitMode, Durability, Log, LogOptions, Lsn};
