//! Scratch memory for reductions: buffers aligned for any C type.

/// A zeroed scratch buffer aligned for any C type (16 bytes).
pub(crate) struct AlignedBuf(Vec<u128>);

impl AlignedBuf {
    pub(crate) fn new(len: usize) -> AlignedBuf {
        AlignedBuf(vec![0u128; len.div_ceil(16).max(1)])
    }

    pub(crate) fn ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr() as *mut u8
    }
}
