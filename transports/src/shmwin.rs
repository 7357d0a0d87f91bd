//! Shared memory for one-sided windows (MPI_Win_allocate_shared): one plain segment of any
//! size, created by one process and mapped by the others once they know its name; the creator
//! unlinks the name as soon as everyone has mapped it. This module only maps the memory (and
//! owns the `unsafe` of doing so); how the window lays it out lives with the window.
//!
//! # What this module must never do
//!
//! Know anything of MPI, or block.

use crate::shm::{create_mapping, open_mapping, ShmSegment};
use crate::sys::Mmap;
use crate::{Error, Result};

/// A window's segment, mapped in this process (unmapped when dropped).
#[derive(Debug)]
pub struct WinSegment {
    map: Mmap,
}

impl WinSegment {
    /// Create the segment `name` of `len` bytes (zeroed; the memory is reserved now, so a
    /// full `/dev/shm` is an error here, not a `SIGBUS` later).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad name; [`Error::Io`] when the name exists or the OS refuses.
    /// On error nothing is left behind.
    pub fn create(name: &str, len: usize) -> Result<WinSegment> {
        Ok(WinSegment {
            map: create_mapping(name, len)?,
        })
    }

    /// Map the segment `name` another process created, checking it is `len` bytes long.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when it does not exist or cannot be mapped; [`Error::Invalid`] when its
    /// size differs.
    pub fn open(name: &str, len: usize) -> Result<WinSegment> {
        let map = open_mapping(name, "", |size| {
            if size != len as u64 {
                return Err(Error::Invalid(format!(
                    "window segment {name}: {size} bytes, {len} expected"
                )));
            }
            Ok(())
        })?;
        Ok(WinSegment { map })
    }

    /// Remove the name `name` (mappings stay valid); a name already gone is not an error.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad name, [`Error::Io`] when the OS refuses.
    pub fn unlink(name: &str) -> Result<()> {
        ShmSegment::unlink(name)
    }

    /// Start of the mapping. The memory is shared with other processes: access it through raw
    /// pointers only.
    pub fn ptr(&self) -> *mut u8 {
        self.map.as_ptr()
    }
}
