//! Faulting in the buffer arena's memory ahead of use, on a thread of its
//! own, so that the kernel's zeroing of fresh memory is not paid by the
//! thread that loads a page.
//!
//! The arena is an anonymous mapping, zero until first written; the first
//! write to a page faults, and the kernel zeroes it on the writer's
//! thread, 2 MiB at a time with transparent huge pages. In a 1-client
//! Insert Benchmark load that zeroing (`clear_page_erms`) was 10.8% of the
//! client thread's samples (bench/results/insert.md). Frames never used
//! are handed out in index order (the free list starts sorted), so the
//! memory needed next is known in advance: the pool reports the end of
//! each frame it hands out ([`Prefaulter::note_used`]), and when that comes
//! within half the lead of what was asked for, the thread is asked to
//! populate up to the lead ([`lead_for`]: a sixteenth of the pool, from
//! 2 to 16 MiB) past it with
//! `madvise(MADV_POPULATE_WRITE)`, which faults pages in as a write would
//! and changes no byte.
//!
//! Invariants:
//! * PF1. The thread never reads or writes the arena's memory. It only
//!   asks the kernel to back it, which leaves every byte as it was (zero
//!   where never written; a frame owner's bytes where written, even while
//!   the owner writes), so the arena's FA1 (one owner per piece) holds.
//! * PF2. The thread is stopped and joined before the mapping is
//!   unmapped (the arena drops its `Prefaulter` first), so it never
//!   advises memory that is no longer the arena's.
//! * PF3. The thread populates at most the lead (at most [`MAX_LEAD`]
//!   bytes) past the end of the highest frame handed out, rounded up to a
//!   whole [`CHUNK`]: a pool larger than its data still costs about its
//!   data.
//!
//! Only a speed-up: where the kernel refuses (`MADV_POPULATE_WRITE` is
//! Linux 5.14 and later) or the thread cannot start, frames are faulted in
//! by their first write, as before.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

/// The most the thread keeps populated past the highest frame handed out.
/// At the 1-client load rate (about 40 MB of new pages a second) 16 MiB
/// is 0.4 s of pages; populating it takes a few milliseconds.
pub(super) const MAX_LEAD: usize = 16 << 20;

/// Bytes populated per system call: one huge page, so a stop request waits
/// for at most one page's zeroing.
pub(super) const CHUNK: usize = 2 << 20;

/// The lead for a mapping of `len` bytes: a sixteenth of it, in whole
/// [`CHUNK`]s, from one chunk to [`MAX_LEAD`], so a small pool (the
/// default is 128 MiB) is not populated far past its data.
pub(super) fn lead_for(len: usize) -> usize {
    (len / 16)
        .div_ceil(CHUNK)
        .saturating_mul(CHUNK)
        .clamp(CHUNK, MAX_LEAD)
}

/// The arena's prefault thread, started at the first frame handed out.
#[derive(Debug)]
pub(super) struct Prefaulter {
    shared: Arc<Shared>,
    /// Started by the first [`Prefaulter::note_used`]; `None` when it
    /// could not start.
    thread: OnceLock<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    /// The mapping's start (PF2: valid until the thread is joined).
    base: usize,
    len: usize,
    /// How far past the highest frame handed out to populate
    /// ([`lead_for`]); the thread is woken when that frame ends within
    /// half of it of the last request.
    lead: usize,
    /// Bytes from `base` the thread is asked to populate. Set to `len`
    /// when the thread gives up, which stops further requests.
    target: AtomicUsize,
    /// Bytes from `base` the thread has populated.
    populated: AtomicUsize,
    /// The thread could not start, or the kernel refused.
    gave_up: AtomicBool,
    stop: AtomicBool,
}

impl Prefaulter {
    /// A prefaulter for the `len` bytes of the anonymous mapping at
    /// `base`, which the caller keeps mapped until this is dropped (PF2).
    pub(super) fn new(base: *mut u8, len: usize) -> Prefaulter {
        Prefaulter {
            shared: Arc::new(Shared {
                base: base as usize,
                len,
                lead: lead_for(len),
                target: AtomicUsize::new(0),
                populated: AtomicUsize::new(0),
                gave_up: AtomicBool::new(false),
                stop: AtomicBool::new(false),
            }),
            thread: OnceLock::new(),
        }
    }

    /// A frame ending `end` bytes into the mapping was handed out: ask the
    /// thread for the lead past it if it is within half the lead of the
    /// end of its last request. One atomic load when it is not.
    #[inline]
    pub(super) fn note_used(&self, end: usize) {
        let s = &*self.shared;
        let target = s.target.load(Ordering::Relaxed);
        if target >= s.len || end.saturating_add(s.lead / 2) <= target {
            return;
        }
        // Whole chunks (2 MiB, a multiple of any kernel page size), so
        // every call starts page-aligned whatever the page size.
        let want = end
            .saturating_add(s.lead)
            .div_ceil(CHUNK)
            .saturating_mul(CHUNK)
            .min(s.len);
        if s.target.fetch_max(want, Ordering::AcqRel) >= want {
            return;
        }
        let thread = self.thread.get_or_init(|| {
            let shared = Arc::clone(&self.shared);
            std::thread::Builder::new()
                .name("quill-prefault".into())
                .spawn(move || shared.run())
                .inspect_err(|e| {
                    tracing::debug!(error = %e, "buffer arena: no prefault thread");
                    self.shared.give_up();
                })
                .ok()
        });
        if let Some(h) = thread {
            h.thread().unpark();
        }
    }

    /// How far past the highest frame handed out it populates.
    #[cfg(test)]
    pub(super) fn lead(&self) -> usize {
        self.shared.lead
    }

    /// Bytes from the mapping's start the thread has populated.
    #[cfg(test)]
    pub(super) fn populated(&self) -> usize {
        self.shared.populated.load(Ordering::Acquire)
    }

    /// Whether the thread gave up (the kernel refused) or never started.
    #[cfg(test)]
    pub(super) fn gave_up(&self) -> bool {
        self.shared.gave_up.load(Ordering::Acquire)
    }
}

impl Shared {
    /// No more requests: first touches fault frames in, as without this.
    fn give_up(&self) {
        self.target.store(self.len, Ordering::Release);
        self.gave_up.store(true, Ordering::Release);
    }

    /// The thread: populate up to `target` in [`CHUNK`]s, sleep until
    /// asked for more or told to stop.
    fn run(&self) {
        let mut done = 0usize;
        loop {
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            let target = self.target.load(Ordering::Acquire).min(self.len);
            if done >= target {
                std::thread::park();
                continue;
            }
            let n = (target - done).min(CHUNK);
            if let Err(e) = populate(self.base + done, n) {
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                ) {
                    continue; // a signal, or a page briefly locked: again
                }
                tracing::debug!(error = %e, "buffer arena: prefault stopped");
                self.give_up();
                return;
            }
            done += n;
            self.populated.store(done, Ordering::Release);
        }
    }
}

/// Fault in `len` bytes at `addr` as a write would, changing none (PF1).
fn populate(addr: usize, len: usize) -> std::io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use rustix::mm::{Advice, madvise};
        // SAFETY: PF2: `addr..addr + len` lies inside the arena's mapping,
        // which stays mapped while this thread runs; PF1: populating
        // changes no byte of it.
        unsafe {
            madvise(
                addr as *mut std::ffi::c_void,
                len,
                Advice::LinuxPopulateWrite,
            )
        }
        .map_err(std::io::Error::from)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = (addr, len);
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

impl Drop for Prefaulter {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(Some(h)) = self.thread.take() {
            h.thread().unpark();
            // PF2: the mapping is unmapped only after this returns. The
            // thread cannot panic (it only calls madvise and parks).
            let _ = h.join();
        }
    }
}
