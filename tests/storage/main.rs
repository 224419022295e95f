//! Storage-layer tests: B+tree against a model, crash recovery on the
//! simulated disk, torn pages and the doublewrite area, small pools.

mod common;
mod concurrency;
mod crash;
mod identity;
mod model;
mod no_fallocate;
mod open_errors;
mod pool;
