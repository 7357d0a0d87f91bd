//! Puts and gets by RDMA (`fi_write`, `fi_read`) to windows of peers reached over a driver that
//! registers memory (the `ofi` driver where the provider offers `FI_RMA` reads and writes):
//! no target action, no copy through the engine.
//!
//! - **Registration**: when an `MPI_Win_create` or (off the direct path) `MPI_Win_allocate`
//!   window is made, a member whose first rail to some other member is such a driver registers
//!   its part ([`Transport::register_window`]); the key travels with the window's own
//!   allgather (two more words: the key and whether there is one). A refusal (the provider's
//!   limits, `ulimit -l`, `MADMPI_OFI_RMA=0`) is logged and the member is reached by messages.
//!   A dynamic window registers each region attached instead, and origins learn the keys on
//!   demand (`dynreg`). Shared windows keep the message path.
//! - **Issue** (`queue`, from `origin::rma_issue` once the general checks passed): a put or a
//!   get of at least the driver's `rma_min` bytes (64 KiB over a provider that does RDMA in
//!   software, `MADMPI_OFI_RMA_MIN`) to a member that registered and whose first rail is that
//!   same driver, whose target
//!   memory is at most [`MAX_SEGS`] runs, becomes one transfer per run, written from (read
//!   into) the origin buffer itself when it is contiguous, else from a packed copy (into a
//!   temporary unpacked when the transfers complete). The transfers are posted once the engine
//!   state is released (`post`, in the same engine section), and the operation counts in the
//!   window's `pending` like a message operation, so that every synchronisation that waits for
//!   those (flush, unlock, fence, complete, free) waits for it, reaping completions as it polls
//!   (`reap`). Accumulates, fetch-and-op and compare-and-swap stay on messages.
//! - **Request-based** `MPI_Rput`/`MPI_Rget` wait for their transfers before returning (the
//!   request's completion is not polled by the general request wait).
//! - **A failed transfer** fails the operation: the window reports it at its next
//!   synchronisation (or the request completes with it).

use std::collections::HashMap;

use madmpi_datatypes::Datatype;
use madmpi_transports::{PeerId, RemoteRegion, Transport};

use super::origin::{pack, target_segments, Plan};
use super::wire::Sub;
use super::{Flavor, Peer, WinId};
use crate::engine::{Engine, State};
use crate::error::{Error, ErrorClass, Result};
use crate::request::{Op as ReqOp, Request, RequestId};

/// A target memory of more runs than this takes the message path.
const MAX_SEGS: usize = 64;

/// Transfers per operation at most (a token is the operation's number and its transfer's).
const PIECE_BITS: u32 = 16;

/// One-sided RDMA state of the process.
#[derive(Default)]
pub(crate) struct Rdma {
    /// Per window (by number): the driver, this member's key, each member's key.
    pub(super) wins: HashMap<u32, WinRdma>,
    /// Operations in flight, by number.
    ops: HashMap<u64, RdmaOp>,
    /// Transfers to post once the engine state is released.
    jobs: Vec<Job>,
    next: u64,
    /// The operation of the last request-based call issued here (waited for by `origin::rma`).
    last_req: Option<u64>,
}

pub(super) struct WinRdma {
    pub(super) drv: u8,
    /// Operations of fewer bytes travel as messages (`Transport::rma_min`).
    min: usize,
    /// This member's registration (deregistered when the window is freed).
    own: Option<u64>,
    /// Per member: the key of its registration.
    keys: Vec<Option<u64>>,
    /// A dynamic window: its attached regions' registrations and the keys known of the
    /// members' (`dynreg`).
    pub(super) dynamic: Option<super::dynreg::Dyn>,
}

struct RdmaOp {
    win: WinId,
    target: i32,
    /// Transfers not completed.
    left: u32,
    req: Option<RequestId>,
    /// A get into a result buffer that is not contiguous: the temporary read into, unpacked
    /// into `count` elements of the type at the pointer once complete.
    unpack: Option<(*mut u8, usize, Datatype)>,
    /// The packed origin data of a put, or the temporary of a get (kept until complete).
    buf: Vec<u8>,
    error: Option<String>,
}

struct Job {
    drv: u8,
    peer: u32,
    write: bool,
    remote: RemoteRegion,
    local: *mut u8,
    len: usize,
    token: u64,
}

// SAFETY: the pointers are user buffers valid until the operation completes (MPI's rule for
// origin and result buffers) or `RdmaOp::buf`; touched only under the engine lock.
unsafe impl Send for Rdma {}

/// The driver a window's RDMA would use (the first that registers windows), and whether this
/// process should register: some other member's first rail is that driver.
fn driver_for(e: &mut Engine, world: &[u32]) -> Option<u8> {
    let id = e.drv.list.iter().position(|d| d.caps().registers_memory)?;
    let id = u8::try_from(id).ok()?;
    world
        .iter()
        .any(|&r| r != e.st.me && e.st.first_driver(r) == id)
        .then_some(id)
}

/// Register this member's part of a window being made (under the engine): the words it adds
/// to the window's allgather, `[key, 1]` or `[0, 0]` (nothing registered); `[0, 2]` for a
/// dynamic window that may register the regions attached to it.
pub(super) fn register(
    e: &mut Engine,
    world: &[u32],
    flavor: Flavor,
    base: *mut u8,
    size: usize,
) -> [u64; 2] {
    if flavor == Flavor::Dynamic {
        return match driver_for(e, world) {
            Some(_) => [0, 2],
            None => [0, 0],
        };
    }
    if !matches!(flavor, Flavor::Create | Flavor::Allocate) || size == 0 || base.is_null() {
        return [0, 0];
    }
    let Some(id) = driver_for(e, world) else {
        return [0, 0];
    };
    match e.drv.list[id as usize].register_window(base, size) {
        Ok(key) => [key, 1],
        Err(err) => {
            tracing::info!(error = %err, "window not registered for RDMA: reached by messages");
            [0, 0]
        }
    }
}

/// Record the members' keys of window `w` (`words[i]` the two words member `i` added), once
/// the allgather is done; nothing if this member registered nothing and none did.
pub(super) fn record(e: &mut Engine, w: WinId, mine: [u64; 2], words: &[[u64; 2]]) {
    let world: Vec<u32> = match e.st.rma.win(w) {
        Ok(x) => x.world.to_vec(),
        Err(_) => return,
    };
    let keys: Vec<Option<u64>> = words.iter().map(|x| (x[1] == 1).then_some(x[0])).collect();
    let dynamic = words.iter().any(|x| x[1] == 2);
    if keys.iter().all(Option::is_none) && !dynamic {
        return;
    }
    let Some(drv) = driver_for(e, &world) else {
        return;
    };
    let min = e.drv.list[drv as usize].rma_min();
    e.st.rma.rdma.wins.insert(
        w.0,
        WinRdma {
            drv,
            min,
            own: (mine[1] == 1).then_some(mine[0]),
            dynamic: dynamic.then(|| super::dynreg::Dyn::new(keys.len())),
            keys,
        },
    );
}

/// Forget window `w` (being freed, every operation complete): its registration ends.
pub(super) fn forget(e: &mut Engine, w: WinId) {
    if let Some(x) = e.st.rma.rdma.wins.remove(&w.0) {
        if let Some(d) = e.drv.list.get_mut(x.drv as usize) {
            let own = x.dynamic.iter().flat_map(|y| y.own_keys());
            for key in x.own.into_iter().chain(own) {
                d.deregister(key);
            }
        }
    }
}

/// A put or a get of plan `p` to rank `rank` of window `w` (its `peer` record; target memory
/// `start` bytes from its base, range and epoch checked), by RDMA if it can: queued, counted
/// pending, and `Some(request)`; `None`: not for this path.
///
/// # Safety
/// The origin and result buffers hold what their types describe and stay valid until the
/// operation completes.
pub(super) unsafe fn queue(
    st: &mut State,
    w: WinId,
    p: &Plan,
    peer: &Peer,
    start: i128,
    want_req: bool,
) -> Result<Option<Option<RequestId>>> {
    let write = match p.sub {
        Sub::Put => true,
        Sub::Get => false,
        _ => return Ok(None),
    };
    if st.rma.rdma.wins.is_empty() || p.bytes == 0 {
        return Ok(None);
    }
    let t = &p.target;
    let Some(x) = st.rma.rdma.wins.get(&w.0) else {
        return Ok(None);
    };
    if p.bytes < x.min {
        return Ok(None);
    }
    let drv = x.drv;
    let world = st.rma.win(w)?.world[t.rank as usize];
    if world == st.me || st.first_driver(world) != drv {
        return Ok(None);
    }
    let segs: Vec<(isize, usize)> = target_segments(t, p.bytes).take(MAX_SEGS + 1).collect();
    if segs.len() > MAX_SEGS {
        return Ok(None);
    }
    // The key, and the address the registration starts at (the window's base; a dynamic
    // window's region).
    let (key, rbase) = match &x.dynamic {
        None => match x.keys.get(t.rank as usize).copied().flatten() {
            Some(k) => (k, peer.base),
            None => return Ok(None),
        },
        Some(d) => {
            let at = |off: isize| (peer.base as i128 + start + off as i128) as u64;
            let lo = segs.iter().map(|s| at(s.0)).min().unwrap_or(0);
            let hi = segs.iter().map(|s| at(s.0) + s.1 as u64).max().unwrap_or(0);
            match d.lookup(t.rank as usize, lo, hi) {
                Some(kb) => kb,
                None => {
                    super::dynreg::ask(st, w, t.rank, world, peer.id, lo);
                    return Ok(None);
                }
            }
        }
    };
    // The local side: the origin (result) buffer when it is one run, else a packed copy (a
    // temporary, unpacked once complete).
    let mut buf = Vec::new();
    let mut unpack = None;
    let local: *mut u8 = if write {
        let o = p.origin.as_ref().expect("a put has an origin");
        match o.dt.contiguous_span(o.count) {
            Some((off, _)) => o.ptr.wrapping_offset(off),
            None => {
                // SAFETY: the origin buffer holds its elements (caller).
                buf = unsafe { pack(o) };
                buf.as_mut_ptr()
            }
        }
    } else {
        let (rp, rc, rdt) = p.result.as_ref().expect("a get has a result");
        match rdt.contiguous_span(*rc) {
            Some((off, _)) => rp.wrapping_offset(off),
            None => {
                buf = vec![0u8; p.bytes];
                unpack = Some((*rp, *rc, rdt.clone()));
                buf.as_mut_ptr()
            }
        }
    };
    let rdma = &mut st.rma.rdma;
    let id = rdma.next;
    rdma.next += 1;
    let mut at = 0usize;
    for (i, &(off, len)) in segs.iter().enumerate() {
        let addr = (peer.base as i128 + start + off as i128) as u64;
        rdma.jobs.push(Job {
            drv,
            peer: world,
            write,
            remote: RemoteRegion {
                addr,
                len: len as u64,
                key,
                base: rbase,
            },
            local: local.wrapping_add(at),
            len,
            token: (id << PIECE_BITS) | i as u64,
        });
        at += len;
    }
    let req = want_req.then(|| st.reqs.insert(Request::new(ReqOp::None)));
    let rdma = &mut st.rma.rdma;
    rdma.ops.insert(
        id,
        RdmaOp {
            win: w,
            target: t.rank,
            left: segs.len() as u32,
            req,
            unpack,
            buf,
            error: None,
        },
    );
    if req.is_some() {
        rdma.last_req = Some(id);
    }
    st.rma.win_mut(w)?.pending[t.rank as usize] += 1;
    Ok(Some(req))
}

/// Post the transfers queued (after `queue`, in the same engine section). Returns the
/// operation of the request-based call issued, if any, which the caller waits for.
pub(super) fn post(e: &mut Engine) -> Option<u64> {
    let jobs = std::mem::take(&mut e.st.rma.rdma.jobs);
    for j in jobs {
        let r = match e.drv.list.get_mut(j.drv as usize) {
            // SAFETY: `local` is the origin or result buffer (valid until the operation
            // completes: the caller of `rma`) or the operation's own `buf`, kept in
            // `ops` until every transfer of it completed.
            Some(d) => unsafe {
                d.rma_post(PeerId(j.peer), j.write, j.remote, j.local, j.len, j.token)
            },
            None => Err(madmpi_transports::Error::Unsupported("no such driver")),
        };
        if let Err(err) = r {
            finish(&mut e.st, j.token, Some(err.to_string()));
        }
    }
    e.st.rma.rdma.last_req.take()
}

/// Take the completions of transfers (every synchronisation's wait calls it as it polls).
pub(super) fn reap(e: &mut Engine) -> Result<()> {
    if e.st.rma.rdma.ops.is_empty() {
        return Ok(());
    }
    let mut drivers: Vec<u8> = e.st.rma.rdma.wins.values().map(|x| x.drv).collect();
    drivers.sort_unstable();
    drivers.dedup();
    let mut done = Vec::new();
    for d in drivers {
        if let Some(t) = e.drv.list.get_mut(d as usize) {
            t.rma_poll(&mut |token, err| done.push((token, err)))?;
        }
    }
    for (token, err) in done {
        finish(&mut e.st, token, err);
    }
    Ok(())
}

/// Whether operation `id` has completed.
pub(super) fn done(e: &Engine, id: u64) -> bool {
    !e.st.rma.rdma.ops.contains_key(&id)
}

/// Transfer `token` completed (`err`: failed).
fn finish(st: &mut State, token: u64, err: Option<String>) {
    let id = token >> PIECE_BITS;
    let Some(op) = st.rma.rdma.ops.get_mut(&id) else {
        return;
    };
    if op.error.is_none() {
        op.error = err;
    }
    op.left = op.left.saturating_sub(1);
    if op.left > 0 {
        return;
    }
    let op = st.rma.rdma.ops.remove(&id).expect("found above");
    if let (Some((ptr, count, dt)), None) = (&op.unpack, &op.error) {
        // SAFETY: the result buffer holds `count` elements until the operation completes.
        unsafe { dt.unpack(*ptr, *count, 0, &op.buf) };
    }
    let class = op.error.as_ref().map(|_| ErrorClass::Other);
    if let Ok(win) = st.rma.win_mut(op.win) {
        let p = &mut win.pending[op.target as usize];
        *p = p.saturating_sub(1);
        if let (Some(why), None) = (&op.error, &win.error) {
            win.error = Some(Error::new(
                ErrorClass::Other,
                format!("an RDMA transfer to target {} failed: {why}", op.target),
            ));
        }
    }
    if let Some(r) = op.req {
        st.complete_with(r, class);
    }
}
