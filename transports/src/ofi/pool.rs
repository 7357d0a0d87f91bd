//! The `ofi` driver's bounce buffers: one allocation carved into buffers of one size.

use super::ffi::{Access, Endpoint, MemReg};
use crate::Result;

/// Buffers of one size carved from one allocation, registered once.
pub(super) struct Pool {
    /// Registration of the whole allocation (when the provider wants `FI_MR_LOCAL`); dropped
    /// before the memory, and after the endpoint is closed (see `OfiTransport`'s drop).
    mr: Option<MemReg>,
    mem: Vec<u64>,
    /// The size of one buffer.
    pub(super) slot: usize,
}

impl Pool {
    pub(super) fn new(ep: &Endpoint, count: usize, slot: usize) -> Result<Pool> {
        let slot = slot.next_multiple_of(64);
        let mut mem = vec![0u64; count * slot / 8];
        let mr = if ep.attr().mr_local {
            // SAFETY: the allocation lives in the pool, whose registration is dropped first.
            Some(unsafe { ep.register(mem.as_mut_ptr().cast(), mem.len() * 8, Access::Local, 0)? })
        } else {
            None
        };
        Ok(Pool { mr, mem, slot })
    }

    pub(super) fn ptr(&mut self, i: usize) -> *mut u8 {
        // SAFETY: `i` is below the pool's count: the offset stays inside the allocation.
        unsafe { self.mem.as_mut_ptr().cast::<u8>().add(i * self.slot) }
    }

    pub(super) fn desc(&self) -> *mut std::ffi::c_void {
        self.mr.as_ref().map_or(std::ptr::null_mut(), |m| m.desc)
    }
}
