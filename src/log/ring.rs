//! The in-memory log buffer: a ring of `size` bytes (a power of two, a
//! multiple of the 4 KiB block) indexed by `lsn % size`, shared by every
//! appending thread without a mutex.
//!
//! This file holds all of the log's `unsafe` code. The protocol that makes it
//! sound (enforced by `buffer.rs` and `writer.rs`, numbered for assertions):
//!
//! 1. **Exclusive ranges.** A byte at LSN `x` is written (non-atomically) only
//!    by the appender that reserved `x` with the atomic add on `reserved`,
//!    and only after it observed (Acquire) `ring_limit > x`, i.e. after the
//!    writer zeroed the previous lap's bytes of that slot (Release).
//! 2. **Publication.** Every fragment starts at an 8-aligned LSN `p`. Its
//!    first word (the LSN field) is the *marker*: the appender writes every
//!    other byte of the fragment first, then stores `p` into the marker
//!    (SeqCst). A marker slot is otherwise zero: the ring starts zeroed and
//!    the writer re-zeroes every block it has consumed (plain stores under
//!    the writer lock: no thread loads those markers meanwhile, I3) before
//!    the slot can be reserved again. Because LSNs start above zero,
//!    "marker == p" means "fragment at p is complete", never a stale value.
//! 3. **Readers.** Only the holder of the writer lock scans markers (from its
//!    `filled` position, always a fragment start) and copies out bytes below
//!    `filled`, which are complete and immutable until it zeroes them.
//! 4. **No wrap inside a marker.** `size` is a multiple of 8 and fragments
//!    are 8-aligned, so a marker never straddles the end of the ring.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::io::AlignedBuf;

/// The shared ring memory.
pub(crate) struct Ring {
    mem: AlignedBuf,
    mask: u64,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").field("size", &self.size()).finish()
    }
}

impl Ring {
    /// A zeroed ring of `size` bytes; `size` must be a power of two and a
    /// multiple of 4096 (checked by `LogOptions::validate`).
    pub(crate) fn new(size: usize) -> Ring {
        let mem = AlignedBuf::new(size);
        debug_assert!(
            mem.len().is_power_of_two(),
            "ring I4: size is a power of two"
        );
        let mask = mem.len() as u64 - 1;
        Ring { mem, mask }
    }

    /// Ring size in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.mask + 1
    }

    fn offset(&self, lsn: u64) -> usize {
        (lsn & self.mask) as usize
    }

    /// Where `len` bytes (at most one lap) from `lsn` lie in the buffer:
    /// `(off, first)`, the first `first` bytes at `off..off + first` and the
    /// rest, if the range wraps, at `0..len - first`. Both pieces are inside
    /// the buffer.
    fn split(&self, lsn: u64, len: usize) -> (usize, usize) {
        let off = self.offset(lsn);
        let size = self.size() as usize;
        debug_assert!(len <= size, "ring: a range is at most one lap");
        (off, len.min(size - off))
    }

    fn marker(&self, lsn: u64) -> &AtomicU64 {
        debug_assert_eq!(lsn % 8, 0, "ring I2: fragments are 8-aligned");
        let off = self.offset(lsn) & !7;
        // SAFETY: off + 8 <= size (off is 8-aligned and size a multiple of 8,
        // I4); the buffer is 4096-aligned so the word is 8-aligned; the memory
        // lives as long as `self`. Every concurrent access to a marker word is
        // atomic (I2, I3). The non-atomic writes to it are an appender's (I1)
        // and `zero`'s: the writer lock holder zeroes a word only after its
        // SeqCst load saw the word's fragment published, and the next lap's
        // appender writes it only after the ring_limit Release/Acquire pair
        // that follows the zeroing, so neither races an atomic access.
        unsafe { AtomicU64::from_ptr(self.mem.as_raw().add(off).cast::<u64>()) }
    }

    /// Mark the fragment at `lsn` complete (I2).
    pub(crate) fn publish(&self, lsn: u64) {
        self.marker(lsn).store(lsn, Ordering::SeqCst);
    }

    /// Whether the fragment at `lsn` is complete (I2).
    pub(crate) fn is_published(&self, lsn: u64) -> bool {
        self.marker(lsn).load(Ordering::SeqCst) == lsn
    }

    /// Copy `src` into the ring at LSN `lsn`, wrapping at the end.
    ///
    /// # Safety
    /// The caller owns `[lsn, lsn + src.len())` under I1 and does not cover
    /// a marker word it has published (or that another appender owns).
    pub(crate) unsafe fn write(&self, lsn: u64, src: &[u8]) {
        let (off, first) = self.split(lsn, src.len());
        let (a, b) = src.split_at(first);
        // SAFETY: [off, off + first) and [0, b.len()) lie inside the buffer
        // (b.len() <= size because fragments are smaller than the ring); the
        // caller owns these bytes exclusively (I1), so no other access races.
        unsafe {
            std::ptr::copy_nonoverlapping(a.as_ptr(), self.mem.as_raw().add(off), a.len());
            std::ptr::copy_nonoverlapping(b.as_ptr(), self.mem.as_raw(), b.len());
        }
    }

    /// Copy ring bytes `[lsn, lsn + dst.len())` into `dst`.
    ///
    /// # Safety
    /// The range is complete and immutable (below `filled`, I3) or owned by
    /// the caller, and no marker inside it is concurrently stored.
    pub(crate) unsafe fn read(&self, lsn: u64, dst: &mut [u8]) {
        let (off, first) = self.split(lsn, dst.len());
        let (a, b) = dst.split_at_mut(first);
        // SAFETY: bounds as in `write`; the bytes are not written concurrently
        // (caller contract), and reads may overlap atomic loads of markers.
        unsafe {
            std::ptr::copy_nonoverlapping(self.mem.as_raw().add(off), a.as_mut_ptr(), a.len());
            std::ptr::copy_nonoverlapping(self.mem.as_raw(), b.as_mut_ptr(), b.len());
        }
    }

    /// Zero `[from, to)` (8-aligned ends, at most one lap), wrapping at the
    /// end, with plain stores (a `memset`), so that its marker words read
    /// "unpublished" in the next lap (I2).
    ///
    /// # Safety
    /// The caller holds the writer lock and the range is below `filled`
    /// and not yet handed to appenders (`ring_limit` does not cover its
    /// next lap). Then no other thread touches these bytes: appenders of
    /// the next lap wait for the `ring_limit` store (Release) that follows
    /// this call, and only the lock holder loads markers (I3), so plain
    /// stores race no atomic access.
    pub(crate) unsafe fn zero(&self, from: u64, to: u64) {
        debug_assert!(from.is_multiple_of(8) && to.is_multiple_of(8));
        // A hard check: the bounds of the plain stores below rest on it.
        assert!(
            from <= to && to - from <= self.size(),
            "ring: zeroing [{from}, {to}) is more than one lap"
        );
        let len = (to - from) as usize;
        let (off, first) = self.split(from, len);
        // SAFETY: [off, off + first) and [0, len - first) lie inside the
        // buffer (len <= size); no other thread accesses them (caller
        // contract).
        unsafe {
            std::ptr::write_bytes(self.mem.as_raw().add(off), 0, first);
            std::ptr::write_bytes(self.mem.as_raw(), 0, len - first);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_wraps() {
        let r = Ring::new(16384);
        let data: Vec<u8> = (0..100u8).collect();
        // SAFETY: single-threaded test owns the whole ring.
        unsafe { r.write(16384 * 3 + 16384 - 40, &data) };
        let mut back = vec![0u8; 100];
        // SAFETY: as above.
        unsafe { r.read(16384 * 3 + 16384 - 40, &mut back) };
        assert_eq!(back, data);
    }

    #[test]
    fn publish_and_zero() {
        let r = Ring::new(16384);
        assert!(!r.is_published(4096));
        r.publish(4096);
        assert!(r.is_published(4096));
        assert!(
            !r.is_published(4096 + 16384),
            "a later lap must not see this marker"
        );
        // SAFETY: single-threaded test owns the whole ring.
        unsafe { r.zero(4096, 8192) };
        assert!(!r.is_published(4096));
    }

    #[test]
    fn zero_wraps_at_the_end_of_the_ring() {
        let r = Ring::new(16384);
        let ones = vec![0xffu8; 16384];
        // SAFETY: single-threaded test owns the whole ring.
        unsafe { r.write(0, &ones) };
        // SAFETY: as above.
        unsafe { r.zero(16384 * 2 - 4096, 16384 * 2 + 4096) };
        let mut back = vec![0u8; 16384];
        // SAFETY: as above.
        unsafe { r.read(0, &mut back) };
        assert!(back[..4096].iter().all(|&b| b == 0), "the wrapped part");
        assert!(back[4096..12288].iter().all(|&b| b == 0xff), "untouched");
        assert!(
            back[12288..].iter().all(|&b| b == 0),
            "the part before the end"
        );
    }
}
