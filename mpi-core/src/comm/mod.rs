//! Communicator management: context-id agreement, duplication, split, creation from groups,
//! intercommunicators (create, merge, dup, split, creation from a subgroup), and the
//! per-communicator state of the collectives (sequence numbers, the local communicator of an
//! intercommunicator, the topology).
//!
//! **Context ids.** Each process keeps a bitmask of the ids it has free (id `k` is the
//! point-to-point context `2k`, `2k + 1` carries the collectives; ids 0, 1 and 2 are
//! MPI_COMM_WORLD, MPI_COMM_SELF and the sessions' communicator, `session.rs`). A creation reserves every free id of the process, agrees with an
//! allreduce(BAND) of the masks over the parent, takes the lowest common id(s), and returns the
//! rest. An agreement that finds nothing in common (another agreement of the process holds the
//! ids: a pending MPI_Comm_idup, or a creation in another thread) retries — every member sees
//! the same result, so they all retry together. Intercommunicators agree in each group, then
//! the two leaders exchange their groups' masks and decide for both. No central server, and an
//! id is never reused while any member still uses it.
//!
//! Every creation is a collective schedule (see `coll::sched`), so MPI_Comm_idup is the same
//! code as MPI_Comm_dup without the wait. The new communicator is registered with the engine by
//! the schedule's last step; an idup registers a placeholder at once (so the caller has an id)
//! and gives it its context when the agreement completes.
//!
//! This module never reads C handles; groups are lists of world ranks.

use std::collections::HashMap;
use std::sync::Arc;

use madmpi_datatypes::{Basic, Datatype};
use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::api::{wait, with};
use crate::coll::algo;
use crate::coll::sched::{ErrorSink, Flow, Team, B};
use crate::engine::{Comm, State, CTX_LIMIT};
use crate::error::{err, Error, ErrorClass, Result};
use crate::op::{BuiltinOp, Op};
use crate::request::RequestId;
use crate::topo::Topology;
use crate::{CommId, UNDEFINED};

// ------------------------------------------------------------------------------------ side table

/// What the collectives keep per communicator, beside the engine's view.
#[derive(Default, Clone)]
struct Extra {
    /// Non-blocking and persistent collectives started so far (all members start them in
    /// the same order).
    seq: u32,
    /// Blocking collectives started so far.
    bseq: u32,
    /// The intracommunicator of an intercommunicator's local group.
    local: Option<CommId>,
    topo: Option<Arc<Topology>>,
    /// The context id came from the pool (and goes back when the communicator is freed).
    pooled: bool,
    /// Collectives in progress on it (MPI_Comm_free waits for them to finish).
    pending: u32,
    /// MPI_Comm_free was called while collectives were in progress.
    freed: bool,
}

static EXTRA: Lazy<Mutex<HashMap<u32, Extra>>> = Lazy::new(|| Mutex::new(HashMap::new()));

thread_local! {
    /// This thread is inside a blocking collective (see [`blocking_collective`]).
    static BLOCKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs a blocking collective: its messages take tags from a sequence of their own, apart
/// from the non-blocking and persistent collectives', as in MPICH and Open MPI. Programs that
/// order a blocking and a non-blocking collective differently on different processes (which
/// the standard does not allow, but which works there, e.g. mpi4py's emulation of
/// `MPI_Comm_iagree` with `MPI_Iallreduce` around `MPI_Barrier`) then match each with its own.
pub fn blocking_collective<T>(f: impl FnOnce() -> T) -> T {
    let outer = BLOCKING.with(|b| b.replace(true));
    let r = f();
    BLOCKING.with(|b| b.set(outer));
    r
}

/// The base tag of the next collective on `c`: 19 bits of sequence number (one sequence for
/// the blocking collectives, bit 29 set, one for the others), 10 bits left for the algorithm's
/// sub-tags; bit 30 is for MPI_Comm_create_group.
pub(crate) fn next_tag(c: CommId) -> i32 {
    let mut m = EXTRA.lock();
    let e = m.entry(c.0).or_default();
    if BLOCKING.with(|b| b.get()) {
        let t = BLOCKING_TAG | ((e.bseq & SEQ_MASK) << 10) as i32;
        e.bseq = e.bseq.wrapping_add(1);
        t
    } else {
        let t = ((e.seq & SEQ_MASK) << 10) as i32;
        e.seq = e.seq.wrapping_add(1);
        t
    }
}

/// The sequence bits of a collective's tag.
const SEQ_MASK: u32 = 0x7_FFFF;

/// The tag bit of the blocking collectives.
const BLOCKING_TAG: i32 = 1 << 29;

/// The tag [`next_tag`] would return outside a blocking collective, without taking it.
fn peek_tag(c: CommId) -> i32 {
    let s = EXTRA.lock().get(&c.0).map_or(0, |e| e.seq);
    ((s & SEQ_MASK) << 10) as i32
}

fn commit_tag(c: CommId) {
    let mut m = EXTRA.lock();
    let e = m.entry(c.0).or_default();
    e.seq = e.seq.wrapping_add(1);
}

/// The tag space of MPI_Comm_create_group's agreement (`tag` is the user's).
fn group_tag(tag: i32) -> i32 {
    0x4000_0000 | ((tag as u32 & 0xF_FFFF) << 10) as i32
}

/// The local communicator of intercommunicator `c`.
pub(crate) fn local_of(c: CommId) -> Option<CommId> {
    EXTRA.lock().get(&c.0).and_then(|e| e.local)
}

/// The topology attached to `c` (MPI_Topo_test …).
pub fn topology(c: CommId) -> Option<Arc<Topology>> {
    EXTRA.lock().get(&c.0).and_then(|e| e.topo.clone())
}

fn set_extra(c: CommId, local: Option<CommId>, topo: Option<Arc<Topology>>, pooled: bool) {
    let mut m = EXTRA.lock();
    let pending = m.get(&c.0).map_or(0, |e| e.pending);
    m.insert(
        c.0,
        Extra {
            seq: 0,
            bseq: 0,
            local,
            topo,
            pooled,
            pending,
            freed: false,
        },
    );
}

/// A collective starts on `c`: the communicator must outlive it.
pub(crate) fn hold(c: CommId) {
    EXTRA.lock().entry(c.0).or_default().pending += 1;
}

/// A collective on `c` is over: a communicator freed meanwhile goes with the last one.
pub(crate) fn release(st: &mut State, c: CommId) {
    let gone = match EXTRA.lock().get_mut(&c.0) {
        Some(e) => {
            e.pending = e.pending.saturating_sub(1);
            e.freed && e.pending == 0
        }
        None => false,
    };
    if gone {
        let _ = destroy(st, c);
    }
}

pub(crate) mod dynamic;
mod ids;
mod inter;
mod intra;
mod session;
pub(crate) mod spawn;

pub use dynamic::{close_port, comm_accept, comm_connect, comm_join, open_port};
use ids::*;
pub use inter::*;
pub use intra::*;
pub use session::{comm_from_session_group, intercomm_from_session_groups};
pub use spawn::{comm_spawn, connect_parent, parent, SpawnCmd};

/// Register a communicator made from `from` from inside a schedule: it derives from the
/// session `from` derives from, if any.
fn add(
    st: &mut State,
    from: CommId,
    ctx: u32,
    local: Arc<[u32]>,
    remote: Option<Arc<[u32]>>,
) -> Result<CommId> {
    let session = st.comm(from).ok().and_then(|c| c.session);
    let me = st.comm(crate::COMM_WORLD)?.rank as u32;
    let rank = local.iter().position(|&r| r == me).ok_or_else(|| {
        Error::new(
            ErrorClass::Intern,
            "this process is not in the new communicator",
        )
    })? as i32;
    let size = local.len() as i32;
    Ok(st.add_comm(Comm {
        ctx,
        rank,
        size,
        world: local,
        remote,
        session,
    }))
}

/// Rank, local group and remote group of a communicator.
type ViewOf = (i32, Arc<[u32]>, Option<Arc<[u32]>>);

/// The engine's view of a communicator.
fn view(st: &State, c: CommId) -> Result<ViewOf> {
    let cm = st.comm(c)?;
    Ok((cm.rank, cm.world.clone(), cm.remote.clone()))
}

/// Start a creation schedule on `comm` and wait for it.
fn run(
    comm: CommId,
    tag: Option<i32>,
    f: impl FnOnce(&mut B, &mut State) -> Result<()>,
) -> Result<()> {
    let sink = ErrorSink::default();
    let r = start(comm, tag, Some(sink.clone()), f)?;
    finish(r, &sink)
}

/// Wait for a creation schedule; its error, with its message.
fn finish(r: RequestId, sink: &ErrorSink) -> Result<()> {
    let s = wait(r)?;
    match s.error {
        None => Ok(()),
        Some(c) => Err(sink.lock().take().unwrap_or_else(|| {
            Error::new(c, "communicator creation failed in a point-to-point step")
        })),
    }
}

fn start(
    comm: CommId,
    tag: Option<i32>,
    sink: Option<ErrorSink>,
    f: impl FnOnce(&mut B, &mut State) -> Result<()>,
) -> Result<RequestId> {
    with(|e| {
        let ctx = e.st.comm(comm)?.ctx;
        let own_tag = tag.is_none();
        let tag = tag.unwrap_or_else(|| peek_tag(comm));
        let mut b = B::new();
        b.prio = Some((ctx, tag));
        f(&mut b, &mut e.st)?;
        if own_tag {
            commit_tag(comm);
        }
        // Its agreement takes part in the priority once every member has started it
        // (`ids::mask_allreduce`); a failed one must not keep it.
        let mut s = b.finish(tag).holding(comm).finally(move |_| {
            POOL.lock().active.remove(&(ctx, tag));
        });
        if let Some(k) = sink {
            s = s.reporting(k);
        }
        let r = e.st.start_schedule(Box::new(s))?;
        e.flush()?;
        Ok(r)
    })
}

type Out<T> = Arc<Mutex<Option<T>>>;

fn take<T>(o: &Out<T>) -> Result<T> {
    o.lock()
        .take()
        .ok_or_else(|| Error::new(ErrorClass::Intern, "communicator creation did not finish"))
}

/// MPI_Comm_free: forget the communicator (and the local communicator of an
/// intercommunicator), and give its context ids back — once the collectives still in progress
/// on it have completed, as the standard allows them to.
pub fn free_comm(c: CommId) -> Result<()> {
    with(|e| {
        e.st.comm(c)?;
        if c.0 < 2 {
            return e.st.remove_comm(c);
        }
        let busy = {
            let mut m = EXTRA.lock();
            let x = m.entry(c.0).or_default();
            if x.freed {
                return err(ErrorClass::Comm, "the communicator has already been freed");
            }
            x.freed = true;
            x.pending > 0
        };
        if busy {
            return Ok(());
        }
        destroy(&mut e.st, c)
    })
}

/// MPI_Comm_disconnect's wait, before the communicator is freed (`free_comm`, after the
/// attributes' delete callbacks): waits until this process's outgoing traffic has been handed
/// to the drivers (queued chunks, rendezvous reads: what MPI_Finalize waits for, but not the
/// freed requests of other communicators, which may wait for messages that come later) and the
/// collectives in progress on `c` have finished, then synchronises the members (a barrier on
/// `c`, so that no member leaves while another still sends on it). The standard asks the
/// caller to have completed and matched every communication on `c` first, as before
/// MPI_Finalize.
pub fn disconnect_wait(c: CommId) -> Result<()> {
    with(|e| e.st.comm(c).map(|_| ()))?;
    crate::api::wait_until(|e| {
        let collectives = EXTRA.lock().get(&c.0).map_or(0, |x| x.pending);
        Ok((collectives == 0 && !e.st.sending()).then_some(()))
    })?;
    crate::coll::barrier(c)
}

fn destroy(st: &mut State, c: CommId) -> Result<()> {
    let ctx = st.comm(c)?.ctx;
    st.remove_comm(c)?;
    dynamic::forget(c);
    // Its buffer goes with it: the id may name another communicator later.
    st.bsends.forget(crate::engine::BufferOwner::Comm(c));
    crate::coll::shmcoll::forget(c);
    let ex = EXTRA.lock().remove(&c.0);
    let Some(ex) = ex else {
        return Ok(());
    };
    if ex.pooled {
        POOL.lock().give_back(ctx / 2);
    }
    if let Some(l) = ex.local {
        if let Ok(cm) = st.comm(l) {
            let lctx = cm.ctx;
            st.remove_comm(l)?;
            crate::coll::shmcoll::forget(l);
            POOL.lock().give_back(lctx / 2);
        }
        EXTRA.lock().remove(&l.0);
    }
    Ok(())
}
