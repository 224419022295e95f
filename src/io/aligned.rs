//! A heap buffer aligned for direct I/O.
//!
//! Invariants:
//! 1. `ptr` points at `len` bytes allocated with `layout` (alignment
//!    [`super::DIRECT_IO_ALIGN`] unless asked otherwise), zeroed at creation.
//! 2. `len` is a multiple of the alignment, so any prefix of whole blocks is a
//!    valid direct-I/O buffer.

use std::alloc::Layout;
use std::ptr::NonNull;

use super::DIRECT_IO_ALIGN;

/// A zero-initialised, block-aligned byte buffer.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like Vec<u8>); sharing
// `&AlignedBuf` only permits reads through `Deref`, and raw-pointer users
// (the log's ring buffer) state their own synchronisation.
unsafe impl Send for AlignedBuf {}
// SAFETY: see `Send`; `&self` methods never mutate through a reference.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of at least `len` bytes, rounded up to whole
    /// [`DIRECT_IO_ALIGN`] blocks. Aborts the process like `Vec` if memory is
    /// exhausted.
    pub fn new(len: usize) -> Self {
        let len = len.max(1).div_ceil(DIRECT_IO_ALIGN) * DIRECT_IO_ALIGN;
        let layout = match Layout::from_size_align(len, DIRECT_IO_ALIGN) {
            Ok(layout) => layout,
            Err(_) => std::alloc::handle_alloc_error(Layout::new::<u8>()),
        };
        // SAFETY: layout has non-zero size (len >= DIRECT_IO_ALIGN).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, len, layout }
    }

    /// Length in bytes (a multiple of the alignment).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: buffers hold at least one block.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Raw pointer to the first byte, for code that shares the buffer between
    /// threads under its own synchronisation (never through `&[u8]`).
    pub fn as_raw(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: invariant 1: ptr is valid for len initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: invariant 1, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_up_and_aligns() {
        let b = AlignedBuf::new(5000);
        assert_eq!(b.len(), 8192);
        assert_eq!(b.as_raw() as usize % DIRECT_IO_ALIGN, 0);
        assert!(b.iter().all(|&x| x == 0));
    }
}
