//! Black-box tests of the redo log over the simulated disk (and the real
//! file system where noted). Seeds are printed by proptest on failure; a
//! failing seed becomes a named regression test.

mod checkpoint;
mod common;
mod concurrency;
mod crash;
mod failure;
mod no_fallocate;
mod open_errors;
mod review;
mod semantics;
