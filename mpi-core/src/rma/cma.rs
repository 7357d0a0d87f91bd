//! Puts and gets to `MPI_Win_create` windows of processes on this host by cross-memory attach
//! (`process_vm_writev`/`readv`): the user's memory is not shared, but the kernel copies into
//! (or out of) the target's address space in one system call, with no target action. Each
//! member publishes its process id and window base when the window is created (only to the
//! members on its host); a target whose range is one run of memory (a contiguous target
//! datatype) is reached this way, anything else takes the active-message path.
//!
//! A copy is complete at the target when the call returns, so the synchronisations need
//! nothing more: the lock of such a window is still taken by message, its unlock (and a
//! fence's barrier, a complete notice) leaves after the copies. Puts and gets are not atomic
//! with respect to accumulates (the standard makes concurrent ones erroneous), so accumulates
//! keep the message path and the target's progress. When the OS refuses cross-memory attach
//! (ptrace rules: Yama's `ptrace_scope`, a non-dumpable process), the window stops trying and
//! sends messages from then on. `MADMPI_RMA_CMA=0` (or `MADMPI_RMA_DIRECT=0`) never tries.

use madmpi_transports::shmcoll::{read_from, write_to};
use madmpi_transports::Error as TError;

use super::origin::{pack, Plan};
use super::wire::Sub;
use super::Peer;
use crate::error::{Error, ErrorClass, Result};

/// Whether this process offers its `MPI_Win_create` windows to cross-memory attach
/// (`MADMPI_RMA_CMA=0` or `MADMPI_RMA_DIRECT=0`: no).
pub(super) fn enabled() -> bool {
    super::direct::enabled() && std::env::var("MADMPI_RMA_CMA").map_or(true, |v| v.trim() != "0")
}

/// What [`copy`] did.
pub(super) enum Outcome {
    /// The operation is complete at the target.
    Done,
    /// Not for this path (a target range of several runs): send it.
    NotHere,
    /// The OS refused cross-memory attach: send it, and stop trying on this window.
    Refused,
}

/// Put or get `p` to `peer`, whose target memory starts `start` bytes into its window (range
/// checked).
///
/// # Safety
/// The origin and result buffers hold what their types describe; `peer.base` and
/// `peer.pid` are what the target published for this window.
pub(super) unsafe fn copy(p: &Plan, peer: &Peer, start: i128) -> Result<Outcome> {
    let t = &p.target;
    let Some((toff, len)) = t.dt.contiguous_span(t.count) else {
        return Ok(Outcome::NotHere);
    };
    if len == 0 {
        return Ok(Outcome::Done);
    }
    let addr = (peer.base as i128 + start + toff as i128) as u64;
    let pid = peer.pid;
    // SAFETY (of the calls below): the local buffers hold `len` bytes (caller); the kernel
    // checks the remote range against the target's mappings.
    let r = match (p.sub, &p.origin, &p.result) {
        (Sub::Put, Some(o), _) => match o.dt.contiguous_span(o.count) {
            Some((off, _)) => unsafe { write_to(pid, addr, o.ptr.wrapping_offset(off), len) },
            None => {
                let v = unsafe { pack(o) };
                unsafe { write_to(pid, addr, v.as_ptr(), len) }
            }
        },
        (Sub::Get, _, Some((rp, rc, rdt))) => match rdt.contiguous_span(*rc) {
            Some((off, _)) => unsafe { read_from(pid, addr, rp.wrapping_offset(off), len) },
            None => {
                let mut v = vec![0u8; len];
                unsafe { read_from(pid, addr, v.as_mut_ptr(), len) }.map(|()| {
                    // SAFETY: the result buffer holds `rc` elements.
                    unsafe { rdt.unpack(*rp, *rc, 0, &v) };
                })
            }
        },
        _ => return Ok(Outcome::NotHere),
    };
    match r {
        Ok(()) => Ok(Outcome::Done),
        Err(TError::PermissionDenied(why)) => {
            tracing::debug!("one-sided cross-memory attach refused: {why}");
            Ok(Outcome::Refused)
        }
        Err(e) => Err(Error::new(
            ErrorClass::Other,
            format!("a one-sided copy to the target's memory failed: {e}"),
        )),
    }
}
