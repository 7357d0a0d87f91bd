//! Shared-memory windows (MPI_Win_allocate_shared): one segment for the whole window, mapped
//! by every member, the members' parts contiguous in rank order (the standard's default), so
//! that each process may load and store any member's part directly (MPI_Win_shared_query
//! gives its address in the caller's mapping). The segment is the transports' `WinSegment`
//! (created by rank 0, opened by the others once they know its name, and unlinked as soon as
//! everyone has mapped it). One-sided operations on such a window take the direct path
//! (`direct`: the control block at the start of the segment), unless `MADMPI_RMA_DIRECT=0`;
//! then puts and gets are still copies, the rest active messages.
//!
//! Every member must run on the same host (whatever the transports: the segment is mapped by
//! name); otherwise the call fails on all of them with MPI_ERR_RMA_SHARED. A window of one
//! process needs no segment.

use std::sync::atomic::{AtomicU64, Ordering};

use madmpi_datatypes::{Basic, Datatype};
use madmpi_transports::shmcoll::my_pid;
use madmpi_transports::shmwin::WinSegment;

use super::direct::{self, ctl_bytes, Direct};
use super::window::make;
use super::{Flavor, Mem, WinId};
use crate::api::{comm_info, with};
use crate::coll::Data;
use crate::error::{err, Error, ErrorClass, Result};
use crate::op::AlignedBuf;
use crate::CommId;

/// Numbers the segments this process creates.
static NAMES: AtomicU64 = AtomicU64::new(0);

/// Exchange `mine` (`K` words) with every member of `comm`.
pub(super) fn exchange<const K: usize>(
    mine: [u64; K],
    n: usize,
    comm: CommId,
) -> Result<Vec<[u64; K]>> {
    let mut all = vec![[0u64; K]; n];
    let byte = Datatype::basic(Basic::Byte);
    // SAFETY: both buffers live until the call returns.
    unsafe {
        crate::coll::allgather(
            Some(Data {
                ptr: mine.as_ptr() as *mut u8,
                count: 8 * K,
                dt: byte.clone(),
            }),
            Data {
                ptr: all.as_mut_ptr() as *mut u8,
                count: 8 * K,
                dt: byte,
            },
            comm,
        )?
    };
    Ok(all)
}

/// Map one segment of `bytes` bytes (zeroed) in every member of `comm` (`n` of them, this
/// one `me`): member 0 creates it, the others open it once they know its name, and the name
/// goes once everyone has mapped it. Collective; `None` on every member when any could not
/// create or map it.
pub(super) fn node_segment(
    bytes: usize,
    me: usize,
    n: usize,
    comm: CommId,
) -> Result<Option<WinSegment>> {
    let bytes = bytes.max(1).div_ceil(4096) * 4096;
    // Named after rank 0's process and its count of windows: unique on the node.
    let name = |pid: u64, id: u64| format!("/madmpi-rmaw-{pid}-{id}");
    let mut msg = [0u64; 3];
    let mut seg = None;
    if me == 0 {
        let id = NAMES.fetch_add(1, Ordering::Relaxed);
        let pid = my_pid() as u64;
        if let Ok(s) = WinSegment::create(&name(pid, id), bytes) {
            seg = Some(s);
            msg = [1, id, pid];
        }
    }
    let res = (|| -> Result<bool> {
        let first = exchange(msg, n, comm)?[0];
        if first[0] != 1 {
            return Ok(false);
        }
        if me != 0 {
            seg = WinSegment::open(&name(first[2], first[1]), bytes).ok();
        }
        let oks = exchange([seg.is_some() as u64], n, comm)?;
        Ok(oks.iter().all(|x| x[0] == 1))
    })();
    if me == 0 && msg[0] == 1 {
        // Everyone who could map it has: the name goes, whatever happened.
        let _ = WinSegment::unlink(&name(msg[2], msg[1]));
    }
    Ok(if res? { seg } else { None })
}

/// Whether every member of `members` (world ranks) runs on this process's host (`me`).
pub(super) fn one_host(members: &[u32], me: usize) -> bool {
    let host = crate::rank_host(members[me]);
    host.is_some() && members.iter().all(|&w| crate::rank_host(w) == host)
}

/// MPI_Win_allocate_shared: returns the window and the address of this process's part.
pub fn win_allocate_shared(
    size: usize,
    disp_unit: usize,
    comm: CommId,
) -> Result<(WinId, *mut u8)> {
    if disp_unit == 0 {
        return err(ErrorClass::Disp, "the displacement unit must be positive");
    }
    let info = comm_info(comm)?;
    if info.remote.is_some() {
        return err(
            ErrorClass::Comm,
            "windows are created over intracommunicators only",
        );
    }
    let n = info.local.len();
    let me = info.rank as usize;
    // Whether every member runs on this process's host (whatever the transports: the
    // segment is mapped by name).
    let ok = n == 1 || one_host(&info.local, me);
    let all = exchange([size as u64, ok as u64, direct::enabled() as u64], n, comm)?;
    if all.iter().any(|x| x[1] == 0) {
        return err(
            ErrorClass::RmaShared,
            "MPI_Win_allocate_shared needs every process of the communicator on one node, \
             reached through shared memory",
        );
    }
    let is_direct = all.iter().all(|x| x[2] == 1);
    let mut offsets = Vec::with_capacity(n);
    let mut total = 0usize;
    for x in &all {
        offsets.push(total);
        total = total.saturating_add(x[0] as usize);
    }
    let (mem, start, d) = if n == 1 {
        let mut b = AlignedBuf::new(total);
        let p = b.ptr();
        (Mem::Heap(b), p, is_direct.then(|| Direct::local(p)))
    } else {
        // The control block of the direct path first, then the parts.
        let ctl = if is_direct { ctl_bytes(n) } else { 0 };
        match node_segment(ctl.saturating_add(total), me, n, comm)? {
            Some(s) => {
                let p = s.ptr().wrapping_add(ctl);
                let parts = offsets.iter().map(|&o| p.wrapping_add(o)).collect();
                // SAFETY: the segment begins with `ctl` zeroed bytes, page-aligned, mapped by
                // every member, kept with the window.
                let d = is_direct.then(|| unsafe { Direct::in_segment(parts, s.ptr()) });
                (Mem::Shared(s), p, d)
            }
            None => {
                return err(
                    ErrorClass::RmaShared,
                    "the shared segment of the window could not be created or mapped",
                )
            }
        }
    };
    let base = start.wrapping_add(offsets[me]);
    let w = make(base, size, disp_unit, comm, Flavor::Shared, Some(mem), d)?;
    with(|e| {
        e.st.rma.win_mut(w)?.segment = Some((start, offsets));
        Ok(())
    })?;
    Ok((w, base))
}

/// MPI_Win_shared_query: the size, displacement unit and address (in this process) of member
/// `rank`'s part (MPI_PROC_NULL: of the first member with a non-empty part). On a window of
/// another flavor, only this process's own part has an address (the others: size 0, NULL).
pub fn win_shared_query(w: WinId, rank: i32) -> Result<(usize, usize, *mut u8)> {
    with(|e| {
        let x = e.st.rma.win(w)?;
        let Some((start, offs)) = &x.segment else {
            // Another flavor (MPI-4.1): only this process's own memory is reachable by load
            // and store; the others' parts have no address here.
            if rank != crate::PROC_NULL && (rank < 0 || rank as usize >= x.peers.len()) {
                return Err(Error::new(
                    ErrorClass::Rank,
                    format!(
                        "invalid rank {rank} (the window has {} members)",
                        x.peers.len()
                    ),
                ));
            }
            let p = x.peers[if rank < 0 { x.rank } else { rank } as usize];
            return Ok(if rank == x.rank && x.flavor != Flavor::Dynamic {
                (x.size, x.disp_unit, x.base)
            } else {
                (0, p.disp_unit as usize, std::ptr::null_mut())
            });
        };
        let r = if rank == crate::PROC_NULL {
            match x.peers.iter().position(|p| p.size > 0) {
                Some(r) => r,
                None => return Ok((0, x.peers[0].disp_unit as usize, *start)),
            }
        } else if rank < 0 || rank as usize >= x.peers.len() {
            return Err(Error::new(
                ErrorClass::Rank,
                format!(
                    "invalid rank {rank} (the window has {} members)",
                    x.peers.len()
                ),
            ));
        } else {
            rank as usize
        };
        let p = x.peers[r];
        // (An empty part has no address, as in MPICH.)
        let at = if p.size == 0 {
            std::ptr::null_mut()
        } else {
            start.wrapping_add(offs[r])
        };
        Ok((p.size as usize, p.disp_unit as usize, at))
    })
}
