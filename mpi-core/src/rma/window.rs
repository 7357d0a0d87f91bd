//! Creating and freeing windows, attaching memory to dynamic ones, and what a window says of
//! itself. Creation is collective: each member registers its part (so that an operation that
//! arrives early finds it), then the members exchange their window numbers, sizes and
//! displacement units over the window's own communicator (a duplicate of the user's).

use std::collections::VecDeque;

use madmpi_datatypes::{Basic, Datatype};

use super::direct::{self, ctl_bytes, Direct};
use super::{shared, Flavor, Held, Mem, Peer, Win, WinId};
use crate::api::{comm_info, wait_until, with};
use crate::coll::Data;
use crate::error::{err, ErrorClass, Result};
use crate::op::AlignedBuf;
use crate::CommId;

/// What a window says of itself (its attributes and group).
#[derive(Clone, Debug)]
pub struct WinInfo {
    /// MPI_WIN_BASE.
    pub base: *mut u8,
    /// MPI_WIN_SIZE.
    pub size: usize,
    /// MPI_WIN_DISP_UNIT.
    pub disp_unit: usize,
    /// MPI_WIN_CREATE_FLAVOR.
    pub flavor: Flavor,
    /// World ranks of the members (MPI_Win_get_group).
    pub world: std::sync::Arc<[u32]>,
    /// This process's rank in the window.
    pub rank: i32,
}

/// MPI_Win_create: a window over `size` bytes at `base`, collective over `comm`.
pub fn win_create(base: *mut u8, size: usize, disp_unit: usize, comm: CommId) -> Result<WinId> {
    make(base, size, disp_unit, comm, Flavor::Create, None, None)
}

/// MPI_Win_allocate: a window over `size` new bytes (zeroed, aligned for any C type); returns
/// the window and the memory's address. When every member runs on this host, the memory is
/// this process's part of one node-wide segment (parts 64-byte aligned) and the window takes
/// the direct path (`direct`); otherwise (or when the segment cannot be made) it is heap
/// memory reached by active messages.
pub fn win_allocate(size: usize, disp_unit: usize, comm: CommId) -> Result<(WinId, *mut u8)> {
    if disp_unit == 0 {
        return err(ErrorClass::Disp, "the displacement unit must be positive");
    }
    let info = comm_info(comm)?;
    let (n, me) = (info.local.len(), info.rank as usize);
    let heap = |direct: bool| {
        let mut mem = AlignedBuf::new(size);
        let base = mem.ptr();
        (Mem::Heap(mem), base, direct.then(|| Direct::local(base)))
    };
    let (mem, base, d) = if info.remote.is_some() {
        // (Refused by `make`.)
        heap(false)
    } else if n == 1 {
        heap(direct::enabled())
    } else {
        let want = direct::enabled() && shared::one_host(&info.local, me);
        let all = shared::exchange([size as u64, want as u64], n, comm)?;
        if all.iter().all(|x| x[1] == 1) {
            let ctl = ctl_bytes(n);
            let mut offsets = Vec::with_capacity(n);
            let mut total = ctl;
            for x in &all {
                offsets.push(total);
                total = total.saturating_add((x[0] as usize).div_ceil(64) * 64);
            }
            match shared::node_segment(total, me, n, comm)? {
                Some(s) => {
                    let parts = offsets.iter().map(|&o| s.ptr().wrapping_add(o)).collect();
                    // SAFETY: the segment begins with `ctl` zeroed bytes, page-aligned,
                    // mapped by every member, kept with the window.
                    let d = unsafe { Direct::in_segment(parts, s.ptr()) };
                    let base = s.ptr().wrapping_add(offsets[me]);
                    (Mem::Shared(s), base, Some(d))
                }
                None => heap(false),
            }
        } else {
            heap(false)
        }
    };
    let w = make(base, size, disp_unit, comm, Flavor::Allocate, Some(mem), d)?;
    Ok((w, base))
}

/// MPI_Win_create_dynamic: a window without memory (MPI_Win_attach adds some); target
/// displacements are addresses.
pub fn win_create_dynamic(comm: CommId) -> Result<WinId> {
    make(
        std::ptr::null_mut(),
        0,
        1,
        comm,
        Flavor::Dynamic,
        None,
        None,
    )
}

/// Words each member adds to the window's allgather: its number of the window, size,
/// displacement unit, process id (cross-memory attach), base, RDMA key and whether it has one.
const WORDS: usize = 7;

pub(super) fn make(
    base: *mut u8,
    size: usize,
    disp_unit: usize,
    comm: CommId,
    flavor: Flavor,
    mem: Option<Mem>,
    direct: Option<Direct>,
) -> Result<WinId> {
    if disp_unit == 0 && flavor != Flavor::Dynamic {
        return err(ErrorClass::Disp, "the displacement unit must be positive");
    }
    if crate::comm_is_inter(comm)? {
        return err(
            ErrorClass::Comm,
            "windows are created over intracommunicators only",
        );
    }
    let dup = crate::comm_dup(comm)?;
    let info = comm_info(dup)?;
    let n = info.local.len();
    let is_direct = direct.is_some();
    let id = with(|e| {
        let rma = &mut e.st.rma;
        let win = Win {
            comm: dup,
            world: info.local.clone(),
            rank: info.rank,
            base,
            size,
            disp_unit,
            flavor,
            _mem: mem,
            segment: None,
            direct,
            regions: Vec::new(),
            peers: vec![Peer::default(); n],
            pending: vec![0; n],
            error: None,
            fence: false,
            held: vec![Held::None; n],
            lock_all: false,
            start: None,
            posts: vec![0; n],
            post: None,
            completes: 0,
            unlocks_sent: vec![0; n],
            unlocks_seen: vec![0; n],
            excl: None,
            shared: 0,
            shared_by: vec![false; n],
            pids: vec![0; n],
            waiting: VecDeque::new(),
        };
        Ok(match rma.wins.iter().position(|w| w.is_none()) {
            Some(i) => {
                rma.wins[i] = Some(win);
                WinId(i as u32)
            }
            None => {
                rma.wins.push(Some(win));
                WinId(rma.wins.len() as u32 - 1)
            }
        })
    })?;
    // Members on this host may reach an MPI_Win_create window by cross-memory attach.
    // (And the members of a window on the direct path see whether an accumulate lock's
    // holder has died: `Direct::acc_lock`.)
    // (And every member on this host sees whether a lock holder has died: `State::rma_watch`.)
    let pid = madmpi_transports::shmcoll::my_pid() as u64;
    let cma = flavor == Flavor::Create && super::cma::enabled();
    // (Two more words: this member's RDMA registration, `rdma`.)
    let reg = match is_direct {
        true => [0, 0],
        false => with(|e| Ok(super::rdma::register(e, &info.local, flavor, base, size)))?,
    };
    let mine = [
        id.0 as u64,
        size as u64,
        disp_unit as u64,
        pid,
        base as u64,
        reg[0],
        reg[1],
    ];
    let mut all = vec![0u64; WORDS * n];
    let byte = Datatype::basic(Basic::Byte);
    // SAFETY: both buffers live until the call returns.
    let r = unsafe {
        crate::coll::allgather(
            Some(Data {
                ptr: mine.as_ptr() as *mut u8,
                count: 8 * WORDS,
                dt: byte.clone(),
            }),
            Data {
                ptr: all.as_mut_ptr() as *mut u8,
                count: 8 * WORDS,
                dt: byte,
            },
            dup,
        )
    };
    if let Err(e) = r {
        let _ = with(|e| {
            e.st.rma.wins[id.0 as usize] = None;
            Ok(())
        });
        let _ = crate::free_comm(dup);
        return Err(e);
    }
    let host = crate::rank_host(info.local[info.rank as usize]);
    let local: Vec<bool> = info
        .local
        .iter()
        .map(|&r| host.is_some() && crate::rank_host(r) == host)
        .collect();
    with(|e| {
        let words: Vec<[u64; 2]> = all.chunks_exact(WORDS).map(|c| [c[5], c[6]]).collect();
        super::rdma::record(e, id, reg, &words);
        let w = e.st.rma.win_mut(id)?;
        let pids: Vec<i32> = (all.chunks_exact(WORDS).zip(&local))
            .map(|(c, &here)| if here { c[3] as i32 } else { 0 })
            .collect();
        // Kept only if every one on this host is seen alive now (members in another pid
        // namespace would look dead).
        // (The direct path's check is the same: every member is on this host.)
        match &mut w.direct {
            Some(d) => {
                d.set_pids(all.chunks_exact(WORDS).map(|c| c[3] as i32).collect());
                if d.has_pids() {
                    w.pids = pids.clone();
                }
            }
            None if pids.iter().all(|&p| p == 0 || super::direct::pid_alive(p)) => {
                w.pids = pids.clone();
            }
            None => {}
        }
        for ((p, c), &pid) in w.peers.iter_mut().zip(all.chunks_exact(WORDS)).zip(&pids) {
            *p = Peer {
                id: c[0] as u32,
                size: c[1],
                disp_unit: c[2],
                pid: if cma { pid } else { 0 },
                base: c[4],
            };
        }
        Ok(())
    })?;
    crate::api::window_opened(n, is_direct);
    Ok(id)
}

/// MPI_Win_free: collective; every epoch must be closed. Waits until every member is done
/// with the window (a barrier), then forgets it.
pub fn win_free(w: WinId) -> Result<()> {
    let comm = with(|e| {
        let win = e.st.rma.win(w)?;
        if win.lock_all || win.held.iter().any(|h| *h != Held::None) {
            return err(
                ErrorClass::RmaSync,
                "MPI_Win_free while this process holds a lock on the window",
            );
        }
        if win.start.is_some() || win.post.is_some() {
            return err(
                ErrorClass::RmaSync,
                "MPI_Win_free inside an access or exposure epoch (MPI_Win_start/post without \
                 complete/wait)",
            );
        }
        Ok((win.comm, win.world.len(), win.direct.is_some()))
    })?;
    let (comm, members, direct) = comm;
    super::sync::wait_all_done(w)?;
    unlocks_arrived(w, comm, members)?;
    crate::barrier(comm)?;
    with(|e| {
        e.st.rma.win(w)?;
        super::rdma::forget(e, w);
        e.st.rma.wins[w.0 as usize] = None;
        e.st.rma.ops.retain(|_, t| t.win != w);
        Ok(())
    })?;
    crate::api::window_closed(members, direct);
    crate::free_comm(comm)
}

/// Before window `w` is dropped: wait until every unlock chunk another member sent to this
/// process has been handled (each member tells each other how many it sent). A chunk still
/// on its way would otherwise find no window, or a new window that took its number.
fn unlocks_arrived(w: WinId, comm: CommId, members: usize) -> Result<()> {
    let sent = with(|e| Ok(e.st.rma.win(w)?.unlocks_sent.clone()))?;
    let mut expect = vec![0u64; members];
    let byte = Datatype::basic(Basic::Byte);
    // SAFETY: both buffers hold `members` words and live until the call returns.
    unsafe {
        crate::coll::alltoall(
            Some(Data {
                ptr: sent.as_ptr() as *mut u8,
                count: 8,
                dt: byte.clone(),
            }),
            Data {
                ptr: expect.as_mut_ptr() as *mut u8,
                count: 8,
                dt: byte,
            },
            comm,
        )?;
    }
    wait_until(|e| {
        let win = e.st.rma.win(w)?;
        let all = win.unlocks_seen.iter().zip(&expect).all(|(s, x)| s >= x);
        Ok(all.then_some(()))
    })
}

/// The attributes and group of window `w`.
pub fn win_info(w: WinId) -> Result<WinInfo> {
    with(|e| {
        let x = e.st.rma.win(w)?;
        Ok(WinInfo {
            base: x.base,
            size: x.size,
            disp_unit: x.disp_unit,
            flavor: x.flavor,
            world: x.world.clone(),
            rank: x.rank,
        })
    })
}

/// MPI_Win_attach: expose `size` bytes at `base` through dynamic window `w`.
pub fn win_attach(w: WinId, base: *mut u8, size: usize) -> Result<()> {
    with(|e| {
        let x = e.st.rma.win_mut(w)?;
        if x.flavor != Flavor::Dynamic {
            return err(
                ErrorClass::RmaFlavor,
                "MPI_Win_attach needs a window made by MPI_Win_create_dynamic",
            );
        }
        let (a, n) = (base as usize, size);
        if x.regions.iter().any(|&(b, m)| a < b + m && b < a + n) {
            return err(
                ErrorClass::RmaAttach,
                "the memory overlaps memory already attached to the window",
            );
        }
        if n > 0 {
            x.regions.push((a, n));
            super::dynreg::attach(e, w, a, n);
        }
        Ok(())
    })
}

/// MPI_Win_detach: stop exposing the region attached at `base`.
pub fn win_detach(w: WinId, base: *const u8) -> Result<()> {
    with(|e| {
        let x = e.st.rma.win_mut(w)?;
        if x.flavor != Flavor::Dynamic {
            return err(
                ErrorClass::RmaFlavor,
                "MPI_Win_detach needs a window made by MPI_Win_create_dynamic",
            );
        }
        match x.regions.iter().position(|&(b, _)| b == base as usize) {
            Some(i) => {
                x.regions.remove(i);
                super::dynreg::detach(e, w, base as usize);
                Ok(())
            }
            None => err(
                ErrorClass::RmaAttach,
                "no memory is attached to the window at that address",
            ),
        }
    })
}
