//! Scratch memory for reductions: buffers aligned for any C type.

use std::mem::{ManuallyDrop, MaybeUninit};

/// A scratch buffer aligned for any C type (16 bytes), zeroed ([`AlignedBuf::new`]) or not
/// ([`AlignedBuf::uninit`]). Its bytes are only reached through the raw pointer of
/// [`AlignedBuf::ptr`], never through a reference, so an uninitialised buffer is sound to hold;
/// whoever reads through the pointer must have written what it reads.
pub(crate) struct AlignedBuf(Vec<MaybeUninit<u128>>);

impl AlignedBuf {
    /// `len` bytes (at least one word), zeroed.
    pub(crate) fn new(len: usize) -> AlignedBuf {
        // `vec![0; n]` takes zeroed memory from the allocator (calloc: fresh pages need no
        // clearing); the words are then viewed as possibly uninitialised, the same layout.
        let mut v = ManuallyDrop::new(vec![0u128; len.div_ceil(16).max(1)]);
        let (p, n, cap) = (v.as_mut_ptr(), v.len(), v.capacity());
        // SAFETY: the parts of a live Vec<u128> (not dropped: ManuallyDrop), reassembled as a
        // Vec of a type with the same size and alignment.
        AlignedBuf(unsafe { Vec::from_raw_parts(p.cast::<MaybeUninit<u128>>(), n, cap) })
    }

    /// `len` bytes (at least one word), not initialised: for scratch memory whose users write
    /// every byte they read before reading it (a collective's staging buffer that a receive,
    /// a copy or a pack fills first). Saves clearing the memory, which at megabytes costs as
    /// much as a pass of the reduction itself.
    pub(crate) fn uninit(len: usize) -> AlignedBuf {
        let n = len.div_ceil(16).max(1);
        let mut v = Vec::with_capacity(n);
        // SAFETY: the capacity holds `n` elements, and `MaybeUninit` needs no initialisation.
        unsafe { v.set_len(n) };
        AlignedBuf(v)
    }

    pub(crate) fn ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr() as *mut u8
    }
}

#[cfg(test)]
mod tests {
    use super::AlignedBuf;

    #[test]
    fn sizes_alignment_and_zeroing() {
        for len in [0usize, 1, 15, 16, 17, 4096, 1 << 20] {
            let mut z = AlignedBuf::new(len);
            let p = z.ptr();
            assert_eq!(p as usize % 16, 0);
            // SAFETY: `new` zeroes at least `len` bytes (one byte at least).
            let s = unsafe { std::slice::from_raw_parts(p, len.max(1)) };
            assert!(s.iter().all(|&b| b == 0));
            let mut u = AlignedBuf::uninit(len);
            let q = u.ptr();
            assert_eq!(q as usize % 16, 0);
            // SAFETY: `uninit` holds at least `len` bytes; written before being read.
            unsafe {
                std::ptr::write_bytes(q, 0xa5, len.max(1));
                assert_eq!(*q.add(len.max(1) - 1), 0xa5);
            }
        }
    }
}
