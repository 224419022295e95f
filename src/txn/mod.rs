//! Transactions (issue 4). This first part is the transaction system's
//! core: transaction ids, the registry of transactions that are not yet
//! visible to others, and read views (MVCC snapshots).
//!
//! * [`registry`]: [`TrxRegistry`], ids and the slot array of
//!   not-yet-visible transactions, scanned without any lock.
//! * [`view`]: [`ReadView`] and its visibility rule.
//! * [`undo`]: the clustered record header ([`RecHeader`]) and undo
//!   records ([`UndoRecord`]), the formats rollback and MVCC read.
//! * [`lock`]: [`LockTable`], row locks with deadlock detection and a
//!   lock-wait timeout.
//! * [`undo_log`]: [`undo_log::UndoLog`], where undo records and commit
//!   marks are stored (a redo-logged B+tree).
//! * [`undo_seg`]: [`undo_seg::UndoSegments`], insert undo appended to a
//!   transaction's own undo pages, freed (or a single page cached for
//!   reuse) when it ends.

pub mod lock;
pub mod registry;
pub mod undo;
pub mod undo_log;
pub mod undo_seg;
pub mod view;

pub use lock::{Acquired, LockMode, LockStats, LockTable, WaitLimits};
pub use registry::{SlotToken, TrxId, TrxRegistry};
pub use undo::{OldVersion, RecHeader, RollPtr, UndoKind, UndoRecord};
pub use view::ReadView;
