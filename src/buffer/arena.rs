//! The memory of the buffer pool's frames: one zeroed allocation for all
//! of them, cut into page-sized pieces.
//!
//! Why one allocation: a pool of `n` frames allocated one page at a time
//! makes the allocator carve every page out of its own heaps, which
//! writes to (and so faults in) every byte at open. With a 2 GiB pool that
//! was 7.3 s of system CPU and 2.1 GB resident before the first query.
//! The arena is one anonymous private mapping instead: the kernel's zero
//! pages, faulted in when a page is first loaded into a frame, so a pool
//! larger than the data never costs more than the data, whichever global
//! allocator the program uses (Rust's own zeroes aligned allocations by
//! writing them). Where mapping fails, it falls back to one zeroed
//! allocation. The mapping asks for transparent huge pages (a pool of
//! gigabytes in 4 KiB pages makes nearly every random page access a TLB
//! miss), and the pool prefetches a page's first lines from its frame
//! index before it takes the frame's latch ([`Arena::prefetch`]). A
//! thread faults the mapping in ahead of the frames handed out
//! ([`Arena::note_used`], module `prefault`), so that the kernel's zeroing
//! of fresh memory is not paid by the thread loading a page.
//!
//! Invariants:
//! * FA1. The pieces are disjoint, each `page_size` bytes, aligned to
//!   [`DIRECT_IO_ALIGN`] (the arena is, and `page_size` is a multiple of
//!   it: asserted), and each is handed out exactly once, to one frame.
//!   A [`FrameMem`] is the only way to its bytes, so its `&`/`&mut`
//!   access follows Rust's rules as a `Vec` would (the frame's latch
//!   decides who holds which).
//! * FA2. The [`Arena`] outlives every [`FrameMem`] cut from it: its
//!   owner (the pool) keeps both and drops the frames first.

use std::ptr::NonNull;

use super::prefault::Prefaulter;
use crate::io::{AlignedBuf, DIRECT_IO_ALIGN};

/// The memory of every frame's page. It keeps the memory alive (and
/// unmaps it on drop) and can prefetch a piece; it never reads or writes
/// the memory, whose pieces were handed out when it was made.
#[derive(Debug)]
pub(super) struct Arena {
    backing: Backing,
    /// Frame 0's piece; frame `i`'s starts `i * page_size` bytes on.
    /// Kept only for [`Arena::prefetch`], which reads nothing.
    base: NonNull<u8>,
    frames: usize,
    page_size: usize,
    /// Faults the mapping in ahead of use; `None` for heap memory, and
    /// taken (stopped and joined, prefault PF2) before the mapping goes.
    prefault: Option<Prefaulter>,
}

#[derive(Debug)]
enum Backing {
    /// An anonymous private mapping of `len` bytes.
    Mapped { ptr: NonNull<u8>, len: usize },
    /// The allocator's zeroed memory, where mapping failed.
    Heap { _buf: AlignedBuf },
}

// SAFETY: the arena owns its memory and never reads or writes it; the
// pieces (FrameMem) carry the access rights (FA1).
unsafe impl Send for Arena {}
// SAFETY: as for Send: `&Arena` gives no access to the memory.
unsafe impl Sync for Arena {}

impl Drop for Arena {
    fn drop(&mut self) {
        // Prefault PF2: its thread is joined before the mapping goes.
        drop(self.prefault.take());
        if let Backing::Mapped { ptr, len } = self.backing {
            // SAFETY: FA2: every FrameMem is gone (the pool drops its
            // frames first), and this is the mapping `new` made.
            if let Err(e) = unsafe { rustix::mm::munmap(ptr.as_ptr().cast(), len) } {
                tracing::warn!(error = %e, "buffer arena: munmap failed");
            }
        }
    }
}

/// Zeroed memory of `bytes` bytes, aligned to [`DIRECT_IO_ALIGN`].
fn zeroed(bytes: usize) -> (Backing, *mut u8) {
    use rustix::mm::{MapFlags, ProtFlags, mmap_anonymous};
    // SAFETY: a fresh private anonymous mapping at an address the kernel
    // picks aliases nothing.
    let mapped = unsafe {
        mmap_anonymous(
            std::ptr::null_mut(),
            bytes,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE,
        )
    };
    match mapped.ok().and_then(|p| NonNull::new(p.cast::<u8>())) {
        Some(ptr) if (ptr.as_ptr() as usize).is_multiple_of(DIRECT_IO_ALIGN) => {
            ask_for_huge_pages(ptr, bytes);
            (Backing::Mapped { ptr, len: bytes }, ptr.as_ptr())
        }
        other => {
            if let Some(ptr) = other {
                // Mapped, but not aligned for direct I/O (no such system
                // is known): give it back.
                // SAFETY: the mapping just made, never handed out.
                let _ = unsafe { rustix::mm::munmap(ptr.as_ptr().cast(), bytes) };
            }
            let buf = AlignedBuf::new(bytes);
            let raw = buf.as_raw();
            (Backing::Heap { _buf: buf }, raw)
        }
    }
}

/// Ask the kernel to back the mapping with transparent huge pages where
/// it allows them (Linux's `enabled` set to `always` or `madvise`). A
/// lookup touches a random page of a pool of gigabytes: with 4 KiB pages
/// each such touch is a TLB miss whose page walk itself misses the cache.
/// Under the Insert Benchmark's 10-row secondary-index reads, `perf`
/// charged most of the time to find a page to that walk, and huge pages
/// took a 1-client query from about 19 to 15 us of CPU
/// (bench/results/insert.md, "qr100: the cost of finding a page").
/// Memory is still faulted in only near where frames are used (frames
/// are handed out in order; the prefault thread runs at most
/// `prefault::MAX_LEAD` bytes past the data), and a first touch the thread
/// has not reached may wait while the kernel zeroes, or compacts memory
/// for, a whole huge page. Only a hint: refused (an older kernel, huge
/// pages off) changes nothing but speed.
fn ask_for_huge_pages(ptr: NonNull<u8>, bytes: usize) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use rustix::mm::{Advice, madvise};
        // SAFETY: the advice changes how the kernel backs this private
        // mapping, not its contents (zero until written) or its bounds.
        if let Err(e) = unsafe { madvise(ptr.as_ptr().cast(), bytes, Advice::LinuxHugepage) } {
            tracing::debug!(error = %e, "buffer arena: no transparent huge pages");
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = (ptr, bytes);
}

impl Arena {
    /// Zeroed memory for `frames` pages of `page_size` bytes, and its
    /// pieces, one per frame (FA1: made here and nowhere else, once).
    pub(super) fn new(frames: usize, page_size: usize) -> (Arena, Vec<FrameMem>) {
        assert!(
            page_size > 0 && page_size.is_multiple_of(DIRECT_IO_ALIGN),
            "buffer arena FA1: page size {page_size} is not a multiple of {DIRECT_IO_ALIGN}"
        );
        let bytes = frames.checked_mul(page_size);
        // Frames are a byte budget divided by the page size: the product
        // is at most that budget.
        assert!(
            bytes.is_some(),
            "buffer arena: {frames} frames of {page_size} bytes overflow usize"
        );
        let bytes = bytes.unwrap_or_default();
        let (backing, base) = zeroed(bytes.max(DIRECT_IO_ALIGN));
        let pieces = (0..frames)
            .map(|i| {
                // SAFETY: i < frames, so the offset stays inside the
                // memory of frames * page_size bytes.
                let ptr = unsafe { base.add(i * page_size) };
                FrameMem {
                    // A non-null base plus an in-bounds offset.
                    ptr: NonNull::new(ptr).unwrap_or_else(|| unreachable!()),
                    len: page_size,
                }
            })
            .collect();
        let prefault = match backing {
            Backing::Mapped { ptr, len } => Some(Prefaulter::new(ptr.as_ptr(), len)),
            Backing::Heap { .. } => None,
        };
        let arena = Arena {
            backing,
            base: NonNull::new(base).unwrap_or_else(|| unreachable!()),
            frames,
            page_size,
            prefault,
        };
        (arena, pieces)
    }
}

impl Arena {
    /// Frame `i` was handed out for the first time or again: fault in the
    /// memory past it ahead of use (module `prefault`). Frames never used
    /// are handed out in index order, so the highest one seen so far marks
    /// where the next new frame's memory lies.
    #[inline]
    pub(super) fn note_used(&self, i: usize) {
        if let Some(p) = &self.prefault {
            p.note_used(i.saturating_add(1).saturating_mul(self.page_size));
        }
    }

    /// Hint that the first `lines` cache lines of frame `i`'s page will be
    /// read soon (a node's header and slot array), so that their misses
    /// overlap the frame's latch instead of following it. Reads nothing:
    /// a prefetch has no effect a program can observe, whatever the bytes
    /// hold or whoever is changing them (FA1 is not touched).
    #[inline]
    pub(super) fn prefetch(&self, i: usize, lines: usize) {
        if i >= self.frames {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        for l in 0..lines.min(self.page_size / 64) {
            // In bounds: i < frames and l * 64 < page_size.
            let line = self
                .base
                .as_ptr()
                .wrapping_add(i * self.page_size + l * 64)
                .cast_const();
            // SAFETY: a prefetch cannot fault and reads nothing the
            // program observes; SSE is part of every x86_64 target.
            unsafe {
                use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
                _mm_prefetch::<_MM_HINT_T0>(line.cast::<i8>());
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (i, lines);
    }
}

/// One frame's page-sized piece of an [`Arena`].
#[derive(Debug)]
pub(super) struct FrameMem {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a FrameMem is the unique handle to its bytes (FA1), like a
// Box<[u8]>: moving it to another thread moves that ownership.
unsafe impl Send for FrameMem {}
// SAFETY: `&FrameMem` only permits reads through `Deref`.
unsafe impl Sync for FrameMem {}

impl std::ops::Deref for FrameMem {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: FA1 (a unique piece of `len` initialised, zeroed-at-birth
        // bytes) and FA2 (the arena is still allocated).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for FrameMem {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for Deref, and `&mut self` is exclusive access to the
        // only handle to these bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident bytes of this process (Linux's `/proc/self/statm`).
    #[cfg(target_os = "linux")]
    fn resident() -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    /// A pool's memory costs nothing until its frames are used: 4 GiB of
    /// frames leave the process's resident size about where it was, and
    /// using one frame faults in about one frame.
    #[cfg(target_os = "linux")]
    #[test]
    fn frames_are_not_touched_until_used() {
        let before = resident();
        let (arena, mut pieces) = Arena::new(1 << 18, 16 << 10);
        assert!(matches!(arena.backing, Backing::Mapped { .. }));
        let after = resident();
        assert!(
            after < before + (256 << 20),
            "4 GiB arena: resident {before} -> {after}"
        );
        pieces[1000].fill(7);
        assert!(pieces[1000].iter().all(|&b| b == 7));
        assert!(pieces[1001].iter().all(|&b| b == 0));
    }

    /// The arena's mapping carries the huge-page advice (`hg` in its
    /// `VmFlags` in `/proc/self/smaps`): what `madvise` sets, whatever
    /// mode the kernel's huge pages are in. (The mapping may have merged
    /// with a neighbouring arena of another test: the block whose range
    /// holds the arena's start is the one checked.)
    #[cfg(target_os = "linux")]
    #[test]
    fn the_arena_asks_for_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            eprintln!("this kernel has no transparent huge pages: nothing to check");
            return;
        }
        let (arena, _pieces) = Arena::new(64, 64 << 10);
        assert!(matches!(arena.backing, Backing::Mapped { .. }));
        let base = arena.base.as_ptr() as usize;
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        // A block's header is "start-end perms ..."; its fields follow.
        let range = |line: &str| {
            let (start, end) = line.split_whitespace().next()?.split_once('-')?;
            Some((
                usize::from_str_radix(start, 16).ok()?,
                usize::from_str_radix(end, 16).ok()?,
            ))
        };
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((start, end)) = range(line) {
                inside = (start..end).contains(&base);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                assert!(
                    flags.split_whitespace().any(|f| f == "hg"),
                    "no huge-page advice on the arena: {flags}"
                );
                return;
            }
        }
        panic!("no VmFlags for the mapping holding {base:x} in /proc/self/smaps");
    }

    /// Whether the 4 KiB page holding `addr` is backed (bit 63 of its
    /// entry in `/proc/self/pagemap`, readable without privilege).
    #[cfg(target_os = "linux")]
    fn backed(addr: *const u8) -> bool {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open("/proc/self/pagemap").unwrap();
        f.seek(SeekFrom::Start((addr as u64 / 4096) * 8)).unwrap();
        let mut e = [0u8; 8];
        f.read_exact(&mut e).unwrap();
        u64::from_le_bytes(e) >> 63 == 1
    }

    /// Handing out a frame makes the prefault thread back the next
    /// lead's bytes and nothing far beyond (PF3), without changing a
    /// byte already written (PF1); handing out the last frame backs the
    /// rest; dropping the arena stops the thread (PF2: no hang, no fault).
    #[cfg(target_os = "linux")]
    #[test]
    fn memory_is_backed_ahead_of_use_and_no_further() {
        use super::super::prefault::{CHUNK, MAX_LEAD, lead_for};
        assert_eq!(lead_for(1 << 20), CHUNK);
        assert_eq!(lead_for(128 << 20), 8 << 20);
        assert_eq!(lead_for(2 << 30), MAX_LEAD);
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        if !smaps.contains("KernelPageSize:        4 kB") {
            eprintln!("pagemap entries are per 4 KiB page only on 4 KiB kernels: nothing to check");
            return;
        }
        let page = 16 << 10;
        let frames = (48 << 20) / page;
        let (arena, mut pieces) = Arena::new(frames, page);
        let prefault = arena.prefault.as_ref().unwrap();
        let ahead = prefault.lead();
        assert_eq!(ahead, 4 << 20, "a 48 MiB pool's lead");
        pieces[1].fill(7);
        let wait_for = |bytes: usize| {
            let start = std::time::Instant::now();
            while prefault.populated() < bytes && !prefault.gave_up() {
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(20),
                    "prefault stuck at {} of {bytes} bytes",
                    prefault.populated()
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            !prefault.gave_up()
        };
        arena.note_used(1);
        if !wait_for(2 * page + ahead) {
            eprintln!("this kernel refuses MADV_POPULATE_WRITE: nothing to check");
            return;
        }
        let at = |i: usize| pieces[i].as_ptr();
        assert!(
            backed(at(2)) && backed(at(ahead / page)),
            "not backed ahead"
        );
        // Far past the request (huge pages may round it up by 2 MiB).
        assert!(!backed(at(frames - 1)), "backed far beyond the request");
        assert!(pieces[1].iter().all(|&b| b == 7), "a written frame changed");
        assert!(pieces[2].iter().all(|&b| b == 0));
        // Within half the lead of the end of the request: the thread runs on.
        arena.note_used(ahead / page);
        assert!(wait_for(ahead + ahead));
        arena.note_used(frames - 1);
        assert!(wait_for(frames * page));
        assert!(backed(at(frames - 1)));
        drop(pieces);
        drop(arena);
    }

    #[test]
    fn pieces_are_disjoint_aligned_and_zeroed() {
        let (_arena, mut pieces) = Arena::new(5, 4096);
        assert_eq!(pieces.len(), 5);
        for (i, p) in pieces.iter_mut().enumerate() {
            assert_eq!(p.len(), 4096);
            assert_eq!(p.as_ptr() as usize % DIRECT_IO_ALIGN, 0);
            assert!(p.iter().all(|&b| b == 0));
            p.fill(i as u8 + 1);
        }
        for (i, p) in pieces.iter().enumerate() {
            assert!(
                p.iter().all(|&b| b == i as u8 + 1),
                "piece {i} was overwritten"
            );
        }
    }
}
