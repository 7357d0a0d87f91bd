//! Shared memory for the collectives of one group of processes on one node: a segment with a
//! pair of counters and a data area per member. This module only maps and lays out the memory
//! (and owns the `unsafe` of doing so); the protocols that use it live with the collectives in
//! the engine.
//!
//! # Setup
//!
//! Like the node segment of [`crate::shm`]: one member [`create`](CollSegment::create)s it,
//! the others [`open`](CollSegment::open) it once they know its name, and the creator
//! [`unlink`](CollSegment::unlink)s the name as soon as every member has mapped it, so nothing
//! is left in `/dev/shm` even if the job crashes later.
//!
//! # Layout
//!
//! ```text
//! offset 0     header (128 B): magic, version, members, data bytes per member, total size
//! 128          release line (128 B): one u64 the group's leader may publish to everyone
//! 256          members × 384 B: line 0 `ready` (u64), line 1 `done` (u64), line 2 `info`
//!              (16 u64 words), each written by its member only
//! page aligned members × data_bytes: member i's data area, written by member i only
//! ```
//!
//! Counters start at 0 and only grow (the protocols number their steps from 1), so a waiter's
//! condition "counter ≥ k" that held once keeps holding. Lines are 128 bytes apart so that the
//! adjacent-line prefetcher does not make two writers fight over a pair of lines.
//!
//! [`read_from`] copies from another process's memory (cross-memory attach), for protocols that
//! publish the address of a buffer instead of its contents.
//!
//! # What this module must never do
//!
//! Know anything of MPI, or block.

#![warn(clippy::undocumented_unsafe_blocks)]

use std::mem::size_of;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::shm::{create_mapping, open_mapping, ShmSegment};
use crate::sys::{self, Mmap};
use crate::{Error, Result};

/// "MADMPICO" read as a little-endian `u64`.
const MAGIC: u64 = u64::from_le_bytes(*b"MADMPICO");
const VERSION: u32 = 2;
const LINE: usize = 128;
const PAGE: usize = 4096;
/// Most members of one segment.
pub const MAX_MEMBERS: usize = 4096;
/// Largest data area per member.
const MAX_DATA: usize = 1 << 30;

#[repr(C, align(128))]
struct Header {
    magic: AtomicU64,
    version: u32,
    members: u32,
    data_bytes: u64,
    total_bytes: u64,
}

#[repr(C, align(128))]
struct Line(AtomicU64);

/// Words of a member's `info` line.
pub const INFO_WORDS: usize = 16;

#[repr(C, align(128))]
struct Info([AtomicU64; INFO_WORDS]);

#[repr(C)]
struct Member {
    ready: Line,
    done: Line,
    info: Info,
}

const _: () = {
    assert!(size_of::<Header>() == LINE);
    assert!(size_of::<Line>() == LINE);
    assert!(size_of::<Member>() == 3 * LINE);
};

/// Where everything lives in a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    members: usize,
    data_bytes: usize,
    release_off: usize,
    ctrl_off: usize,
    data_off: usize,
    total: usize,
}

impl Layout {
    fn new(members: usize, data_bytes: usize) -> Result<Layout> {
        if members == 0 || members > MAX_MEMBERS {
            return Err(Error::Invalid(format!(
                "collective segment: {members} members (1 to {MAX_MEMBERS} supported)"
            )));
        }
        if data_bytes == 0 || data_bytes % PAGE != 0 || data_bytes > MAX_DATA {
            return Err(Error::Invalid(format!(
                "collective segment: {data_bytes} data bytes per member (a multiple of {PAGE} \
                 up to {MAX_DATA})"
            )));
        }
        let release_off = size_of::<Header>();
        let ctrl_off = release_off + LINE;
        let data_off = (ctrl_off + members * size_of::<Member>()).next_multiple_of(PAGE);
        let total = members
            .checked_mul(data_bytes)
            .and_then(|d| d.checked_add(data_off))
            .filter(|&t| i64::try_from(t).is_ok())
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "collective segment: {members} × {data_bytes} bytes do not fit in memory"
                ))
            })?;
        Ok(Layout {
            members,
            data_bytes,
            release_off,
            ctrl_off,
            data_off,
            total,
        })
    }
}

/// A group's collective segment, mapped in this process; dropping it unmaps it (the name is
/// [`CollSegment::unlink`]'s business).
#[derive(Debug)]
pub struct CollSegment {
    map: Mmap,
    name: String,
    layout: Layout,
}

// SAFETY: the segment is a mapping owned by this value; nothing in it is tied to a thread, and
// everything shared is accessed through atomics or under the protocols of its users.
unsafe impl Send for CollSegment {}
// SAFETY: as above: `&CollSegment` only hands out atomics and raw pointers.
unsafe impl Sync for CollSegment {}

impl CollSegment {
    /// Create the segment `name` (`"/name"`) for `members` processes with `data_bytes` (a
    /// multiple of 4096) of data each, its backing memory reserved now (so a full `/dev/shm` is
    /// an error here, not a `SIGBUS` later).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad name or size; [`Error::Io`] when the name exists or the OS
    /// refuses. On error nothing is left behind.
    pub fn create(name: &str, members: usize, data_bytes: usize) -> Result<CollSegment> {
        let layout = Layout::new(members, data_bytes)?;
        let total = layout.total as u64;
        let map = create_mapping(name, layout.total)?;
        let hdr = map.as_ptr().cast::<Header>();
        // SAFETY: the mapping is page aligned, larger than a header, freshly created (zeroed)
        // and not yet known to anyone: the others open it only after learning its name, and
        // check `magic`, stored last with Release.
        unsafe {
            ptr::addr_of_mut!((*hdr).version).write(VERSION);
            ptr::addr_of_mut!((*hdr).members).write(members as u32);
            ptr::addr_of_mut!((*hdr).data_bytes).write(data_bytes as u64);
            ptr::addr_of_mut!((*hdr).total_bytes).write(total);
            (*hdr).magic.store(MAGIC, Ordering::Release);
        }
        Ok(CollSegment {
            map,
            name: name.to_owned(),
            layout,
        })
    }

    /// Map the segment `name` another member created, checking it was made for `members`
    /// processes with `data_bytes` each.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when it does not exist or cannot be mapped; [`Error::Invalid`] when its
    /// header does not match.
    pub fn open(name: &str, members: usize, data_bytes: usize) -> Result<CollSegment> {
        let layout = Layout::new(members, data_bytes)?;
        let mismatch = |what: String| Error::Invalid(format!("collective segment {name}: {what}"));
        let map = open_mapping(name, "", |size| {
            if size != layout.total as u64 {
                return Err(mismatch(format!("{size} bytes, {} expected", layout.total)));
            }
            Ok(())
        })?;
        let hdr = map.as_ptr().cast::<Header>();
        // SAFETY: the mapping holds a header (its size was checked) and is page aligned; the
        // plain fields were written before `magic` was published with Release, and are read
        // after `magic` with Acquire; nobody writes them afterwards.
        let (magic, version, m, d) = unsafe {
            (
                (*hdr).magic.load(Ordering::Acquire),
                ptr::addr_of!((*hdr).version).read(),
                ptr::addr_of!((*hdr).members).read(),
                ptr::addr_of!((*hdr).data_bytes).read(),
            )
        };
        if magic != MAGIC || version != VERSION {
            return Err(mismatch(
                "not a madmpi collective segment of this version".into(),
            ));
        }
        if m as usize != members || d != data_bytes as u64 {
            return Err(mismatch(format!(
                "made for {m} members × {d} bytes, {members} × {data_bytes} expected"
            )));
        }
        Ok(CollSegment {
            map,
            name: name.to_owned(),
            layout,
        })
    }

    /// Remove the name `name` (mappings stay valid); a name already gone is not an error.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad name, [`Error::Io`] when the OS refuses.
    pub fn unlink(name: &str) -> Result<()> {
        ShmSegment::unlink(name)
    }

    /// The name the segment was created or opened with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of members.
    pub fn members(&self) -> usize {
        self.layout.members
    }

    /// Bytes of each member's data area.
    pub fn data_bytes(&self) -> usize {
        self.layout.data_bytes
    }

    fn member(&self, i: usize) -> &Member {
        assert!(i < self.layout.members, "member {i} out of range");
        let off = self.layout.ctrl_off + i * size_of::<Member>();
        // SAFETY: in bounds of the mapping (see `Layout::new`, checked against its size),
        // aligned to 128 (the base is page aligned, `ctrl_off` a multiple of 128), and only
        // ever accessed through atomics.
        unsafe { &*self.map.as_ptr().add(off).cast::<Member>() }
    }

    /// Member `i`'s first counter (written by member `i` only).
    #[inline]
    pub fn ready(&self, i: usize) -> &AtomicU64 {
        &self.member(i).ready.0
    }

    /// Member `i`'s second counter (written by member `i` only).
    #[inline]
    pub fn done(&self, i: usize) -> &AtomicU64 {
        &self.member(i).done.0
    }

    /// Word `w` (< [`INFO_WORDS`]) of member `i`'s `info` line (written by member `i` only).
    #[inline]
    pub fn info(&self, i: usize, w: usize) -> &AtomicU64 {
        &self.member(i).info.0[w]
    }

    /// The shared release counter (written by one member chosen by the protocol).
    #[inline]
    pub fn release(&self) -> &AtomicU64 {
        // SAFETY: as in `member`: in bounds, 128-aligned, accessed atomically only.
        unsafe {
            &*self
                .map
                .as_ptr()
                .add(self.layout.release_off)
                .cast::<AtomicU64>()
        }
    }

    /// Start of member `i`'s data area ([`data_bytes`](Self::data_bytes) long, page aligned).
    /// Who may read or write it when is up to the protocol using it: the memory is shared with
    /// the other members, so it must only be accessed through raw pointers, never through a
    /// Rust reference that outlives a step of the protocol.
    #[inline]
    pub fn data(&self, i: usize) -> NonNull<u8> {
        assert!(i < self.layout.members, "member {i} out of range");
        let off = self.layout.data_off + i * self.layout.data_bytes;
        // SAFETY: in bounds of the mapping (see `Layout::new`); the base is not null.
        unsafe { NonNull::new_unchecked(self.map.as_ptr().add(off)) }
    }
}

/// This process's id (what another process needs to [`read_from`] it).
pub fn my_pid() -> i32 {
    sys::getpid()
}

/// Copy `len` bytes at address `addr` of process `pid` to `dst` (cross-memory attach,
/// `process_vm_readv`).
///
/// # Errors
///
/// [`Error::PermissionDenied`] when the OS refuses (ptrace rules, no support), [`Error::Invalid`]
/// for an address the other process does not map, [`Error::Io`] otherwise.
///
/// # Safety
///
/// `dst` must be valid for writes of `len` bytes and not accessed by anything else during the
/// call.
pub unsafe fn read_from(pid: i32, addr: u64, dst: *mut u8, len: usize) -> Result<()> {
    // SAFETY: the caller's buffer (valid, unshared, per the contract); the kernel checks the
    // remote range against the other process's mappings.
    unsafe { sys::cma_copy(pid, false, dst, addr, len) }
        .map_err(|e| sys::cma_error(e, "process_vm_readv", None, pid, addr, len))
}

/// Copy `len` bytes from `src` to address `addr` of process `pid` (cross-memory attach,
/// `process_vm_writev`): what [`read_from`] does, in the other direction.
///
/// # Errors
///
/// As [`read_from`].
///
/// # Safety
///
/// `src` must be valid for reads of `len` bytes; the other process must expect the write
/// (nothing of its own reads or writes that range during the call).
pub unsafe fn write_to(pid: i32, addr: u64, src: *const u8, len: usize) -> Result<()> {
    // SAFETY: the caller's buffer, only read; the kernel checks the remote range against the
    // other process's mappings.
    unsafe { sys::cma_copy(pid, true, src as *mut u8, addr, len) }
        .map_err(|e| sys::cma_error(e, "process_vm_writev", None, pid, addr, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(tag: &str) -> String {
        format!("/madmpi-test-coll-{}-{tag}", std::process::id())
    }

    #[test]
    fn layout_is_aligned_and_bounded() {
        let l = Layout::new(3, 8192).unwrap();
        assert_eq!(l.data_off % PAGE, 0);
        assert!(l.ctrl_off + 3 * 3 * LINE <= l.data_off);
        assert_eq!(l.total, l.data_off + 3 * 8192);
        assert!(Layout::new(0, 4096).is_err());
        assert!(Layout::new(2, 100).is_err());
        assert!(Layout::new(MAX_MEMBERS + 1, 4096).is_err());
    }

    #[test]
    fn create_open_share_and_unlink() {
        let n = name("share");
        let a = CollSegment::create(&n, 2, 4096).unwrap();
        let b = CollSegment::open(&n, 2, 4096).unwrap();
        CollSegment::unlink(&n).unwrap();
        // The mappings outlive the name.
        assert!(CollSegment::open(&n, 2, 4096).is_err());
        a.ready(1).store(7, Ordering::Release);
        assert_eq!(b.ready(1).load(Ordering::Acquire), 7);
        b.done(0).store(3, Ordering::Release);
        assert_eq!(a.done(0).load(Ordering::Acquire), 3);
        a.release().store(9, Ordering::Release);
        assert_eq!(b.release().load(Ordering::Acquire), 9);
        a.info(1, INFO_WORDS - 1).store(11, Ordering::Release);
        assert_eq!(b.info(1, INFO_WORDS - 1).load(Ordering::Acquire), 11);
        assert_eq!(b.info(0, 0).load(Ordering::Acquire), 0);
        // SAFETY: 4096-byte data areas of a live mapping, no one else uses them.
        unsafe {
            a.data(1).as_ptr().add(4095).write(0x5a);
            assert_eq!(b.data(1).as_ptr().add(4095).read(), 0x5a);
            assert_eq!(b.data(0).as_ptr().read(), 0);
        }
        assert_eq!(a.members(), 2);
        assert_eq!(b.data_bytes(), 4096);
    }

    #[test]
    fn copies_with_self_both_ways() {
        let src: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let me = my_pid();
        // SAFETY: each call's local buffer is ours and large enough, its remote range is ours
        // too (or not mapped, for the failures), and nothing else touches them meanwhile.
        unsafe {
            for write in [false, true] {
                let mut dst = vec![0u8; src.len()];
                let (d, n) = (dst.as_mut_ptr(), dst.len());
                let res = if write {
                    write_to(me, d as u64, src.as_ptr(), n)
                } else {
                    read_from(me, src.as_ptr() as u64, d, n)
                };
                match res {
                    Ok(()) => assert_eq!(src, dst),
                    // Cross-memory attach may be forbidden here; that is an answer too.
                    Err(Error::PermissionDenied(_)) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            let mut dst = [0u8; 16];
            assert!(read_from(me, 8, dst.as_mut_ptr(), 16).is_err());
            assert!(write_to(me, 8, src.as_ptr(), 16).is_err());
        }
    }

    #[test]
    fn open_checks_the_shape() {
        let n = name("shape");
        let _a = CollSegment::create(&n, 2, 4096).unwrap();
        assert!(matches!(
            CollSegment::open(&n, 3, 4096),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(
            CollSegment::open(&n, 2, 8192),
            Err(Error::Invalid(_))
        ));
        // The name exists: a second create fails and leaves the first alone.
        assert!(CollSegment::create(&n, 2, 4096).is_err());
        assert!(CollSegment::open(&n, 2, 4096).is_ok());
        CollSegment::unlink(&n).unwrap();
        CollSegment::unlink(&n).unwrap();
    }
}
