//! The memory of the buffer pool's frames: one zeroed allocation for all
//! of them, cut into page-sized pieces.
//!
//! Why one allocation: a pool of `n` frames allocated one page at a time
//! makes the allocator carve every page out of its own small heaps, which
//! writes to (and so faults in) every byte at open. With a 2 GiB pool that
//! was 7.3 s of system CPU and 2.1 GB resident before the first query. One
//! allocation this large comes straight from the operating system as
//! untouched zero pages: a frame's memory is faulted in when a page is
//! first loaded into it, and a pool larger than the data never costs more
//! than the data.
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

use crate::io::{AlignedBuf, DIRECT_IO_ALIGN};

/// One zeroed allocation holding every frame's page. It only keeps the
/// memory alive; the pieces were handed out when it was made.
#[derive(Debug)]
pub(super) struct Arena {
    _buf: AlignedBuf,
}

impl Arena {
    /// Zeroed memory for `frames` pages of `page_size` bytes, and its
    /// pieces, one per frame (FA1: made here and nowhere else, once).
    pub(super) fn new(frames: usize, page_size: usize) -> (Arena, Vec<FrameMem>) {
        assert!(
            page_size > 0 && page_size.is_multiple_of(DIRECT_IO_ALIGN),
            "buffer arena FA1: page size {page_size} is not a multiple of {DIRECT_IO_ALIGN}"
        );
        let bytes = frames.checked_mul(page_size).unwrap_or_else(|| {
            panic!("buffer arena: {frames} frames of {page_size} bytes overflow usize")
        });
        let buf = AlignedBuf::new(bytes);
        let base = buf.as_raw();
        let pieces = (0..frames)
            .map(|i| {
                // SAFETY: i < frames, so the offset stays inside the
                // allocation of frames * page_size bytes.
                let ptr = unsafe { base.add(i * page_size) };
                FrameMem {
                    // A non-null base plus an in-bounds offset.
                    ptr: NonNull::new(ptr).unwrap_or_else(|| unreachable!()),
                    len: page_size,
                }
            })
            .collect();
        (Arena { _buf: buf }, pieces)
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
