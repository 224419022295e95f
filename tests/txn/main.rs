//! Transaction layer tests: tables, secondary indexes, isolation,
//! rollback, purge, locking and crash recovery through the `Db` API.

mod basic;
mod common;
mod crash;
mod drop;
mod drop_index;
mod isolation;
mod no_fallocate;
mod no_wait;
mod owned;
mod read_only;
mod serial;
