//! Standard output that a closed pipe ends quietly (`quill status | head`).
//!
//! Every line the command line prints goes through [`emit`]. Once writing
//! to stdout fails (EPIPE when the reader went away, or any other error),
//! nothing more is written and [`closed`] says so: commands that only
//! print stop early, and benchmarks carry on with their work, whose JSON
//! file and exit status still matter, without printing. Nothing panics on
//! a closed stdout (Rust's `println!` does).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Write `text` to stdout, unless stdout has failed before.
pub fn emit(text: &str) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("warning: standard output failed ({e}); printing no more");
        }
    }
}

/// Whether stdout has failed (its reader went away).
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// `println!` through [`emit`].
macro_rules! outln {
    () => {
        $crate::out::emit("\n")
    };
    ($($arg:tt)*) => {
        $crate::out::emit(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` through [`emit`].
macro_rules! outp {
    ($($arg:tt)*) => {
        $crate::out::emit(&format!($($arg)*))
    };
}
