//! The log's two optional threads, both started on first need and stopped
//! by `Log::close` (or drop):
//!
//! * the **flush thread** (`run_flusher` in `group.rs`): leads syncs in
//!   `flusher` mode, and in `leader` mode for async committers when no
//!   committing thread can lead. It sleeps until rung; it never syncs
//!   unless a commit waits.
//! * the **timer thread**: makes `Write` and `Lazy` commits durable within
//!   about a second (checking every half second), by committing the highest
//!   such LSN through the normal group-commit path. It syncs only when such
//!   a commit is not yet durable.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::core::Core;
use crate::{Error, Result};

/// How often the timer thread checks for `Write`/`Lazy` commits to sync.
/// Half the one-second promise, so a commit made just after a check is
/// still durable within a second plus one sync.
pub(crate) const TIMER_PERIOD: Duration = Duration::from_millis(500);

impl Core {
    /// Start the flush thread if it is not running.
    pub(crate) fn ensure_flusher(self: &Arc<Self>) -> Result<()> {
        self.ensure_thread(Thread::Flusher)
    }

    /// Start the timer thread if it is not running.
    pub(crate) fn ensure_timer(self: &Arc<Self>) -> Result<()> {
        self.ensure_thread(Thread::Timer)
    }

    fn ensure_thread(self: &Arc<Self>, which: Thread) -> Result<()> {
        let bell = match which {
            Thread::Flusher => &self.flusher,
            Thread::Timer => &self.timer,
        };
        if bell.thread.get().is_some() {
            return Ok(());
        }
        let mut threads = self.threads.lock();
        if bell.thread.get().is_some() {
            return Ok(());
        }
        let core = self.clone();
        let h = match which {
            Thread::Flusher => spawn("quill-log-flush", move || core.run_flusher())?,
            Thread::Timer => spawn("quill-log-timer", move || core.run_timer())?,
        };
        let _ = bell.thread.set(h.thread().clone());
        threads.push(h);
        // A ring before the thread existed may have been missed.
        bell.ring();
        Ok(())
    }

    fn run_timer(&self) {
        loop {
            std::thread::park_timeout(TIMER_PERIOD);
            if self.shutdown.load(Ordering::Acquire) || self.failed.load(Ordering::Acquire) {
                return;
            }
            let lazy = self.lazy_lsn.load(Ordering::Acquire);
            if lazy > self.durable.load(Ordering::Acquire) && self.sync_to(lazy, false).is_err() {
                return;
            }
        }
    }

    /// Stop both threads and wait for them.
    pub(crate) fn stop_threads(&self) {
        self.shutdown.store(true, Ordering::Release);
        self.flusher.ring();
        self.timer.ring();
        let handles = std::mem::take(&mut *self.threads.lock());
        for h in handles {
            let _ = h.join();
        }
    }
}

/// The log's background threads.
#[derive(Clone, Copy)]
enum Thread {
    Flusher,
    Timer,
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(256 << 10)
        .spawn(f)
        .map_err(|e| {
            Error::Io(crate::io::IoError::Os {
                op: "spawn thread",
                path: name.into(),
                error: e,
            })
        })
}
