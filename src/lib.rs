//! Quill: an embedded, crash-safe, transactional storage engine.
//!
//! Today the crate holds the bottom of the stack (see `ARCHITECTURE.md` in the
//! steering repository and `docs/` here):
//!
//! * [`io`]: the only code that touches files. A real implementation over
//!   `pwrite`/`pread`/`fdatasync`/`fallocate` with `O_DIRECT`, and a simulated
//!   disk that models power loss (dropped, kept and torn unsynced writes) and
//!   injected failures.
//! * [`log`]: the redo log. Concurrent appends without a mutex on the copy path,
//!   leader-based group commit with no dedicated threads, durability levels,
//!   async commit, checkpoint slots and the recovery scan.
//! * [`stats`]: counters and latency histograms that the log (and later layers)
//!   report through, kept per subsystem so log, data-page and doublewrite I/O
//!   never mix.
//! * [`bench`]: the benchmarks behind `quill bench`.
//!
//! Layers point down only: `bench` uses `log` and `io`; `log` uses `io` and
//! `stats`; `io` and `stats` use nothing else of Quill.
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

pub mod bench;
pub mod btree;
pub mod buffer;
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
pub mod txn;

pub use db::{Db, Isolation, Options, Table, Txn, TxnOptions};
pub use error::{Error, Result};
pub use log::{CommitMode, Durability, Log, LogOptions, Lsn};
