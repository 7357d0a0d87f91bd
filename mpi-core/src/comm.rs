//! Communicator management: context-id agreement, duplication, split, creation from groups,
//! intercommunicators (create, merge, dup, split, creation from a subgroup), and the
//! per-communicator state of the collectives (sequence numbers, the local communicator of an
//! intercommunicator, the topology).
//!
//! **Context ids.** Each process keeps a bitmask of the ids it has free (id `k` is the
//! point-to-point context `2k`, `2k + 1` carries the collectives; ids 0 and 1 are MPI_COMM_WORLD
//! and MPI_COMM_SELF). A creation reserves every free id of the process, agrees with an
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
    /// Collectives started so far (all members start them in the same order).
    seq: u32,
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

/// The base tag of the next collective on `c`: 20 bits of sequence number, 10 bits left for
/// the algorithm's sub-tags; bit 30 is for MPI_Comm_create_group.
pub(crate) fn next_tag(c: CommId) -> i32 {
    let mut m = EXTRA.lock();
    let e = m.entry(c.0).or_default();
    let t = ((e.seq & 0xF_FFFF) << 10) as i32;
    e.seq = e.seq.wrapping_add(1);
    t
}

/// The tag [`next_tag`] would return, without taking it.
fn peek_tag(c: CommId) -> i32 {
    let s = EXTRA.lock().get(&c.0).map_or(0, |e| e.seq);
    ((s & 0xF_FFFF) << 10) as i32
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

// ------------------------------------------------------------------------------------ id pool

/// Context ids per process (the contexts go up to `2 * IDS`, the engine's [`CTX_LIMIT`]).
const IDS: usize = CTX_LIMIT as usize / 2;
const WORDS: usize = IDS / 64;
/// The context of an MPI_Comm_idup communicator until its agreement completes: beyond the
/// pool, never used by anyone.
const PLACEHOLDER_CTX: u32 = 2 * IDS as u32;

/// The priority of an agreement: (parent context, collective tag) — the same on every member,
/// so the lowest one in progress anywhere gets every member's free ids.
type Key = (u32, i32);

struct Pool {
    free: [u64; WORDS],
    /// Agreements in progress in this process.
    active: std::collections::BTreeSet<Key>,
}

static POOL: Lazy<Mutex<Pool>> = Lazy::new(|| {
    let mut free = [u64::MAX; WORDS];
    // ids 0 and 1: MPI_COMM_WORLD (context 0) and MPI_COMM_SELF (context 2).
    free[0] &= !0b11;
    Mutex::new(Pool {
        free,
        active: Default::default(),
    })
});

type Mask = [u64; WORDS];

impl Pool {
    /// Take every free id for agreement `key` if it has the priority here; otherwise none (it
    /// will find nothing in common and retry until the one before it is done). Without the
    /// priority, two agreements could take turns holding the ids on different processes and
    /// both retry forever.
    ///
    /// The flag is false when the agreement had the priority and still found no free id: the
    /// process has run out of ids, and the agreement must fail (everywhere) rather than retry.
    fn reserve(&mut self, key: Key) -> (Mask, bool) {
        if self.active.first().is_some_and(|&k| k != key) {
            return ([0; WORDS], true);
        }
        let m = std::mem::replace(&mut self.free, [0; WORDS]);
        let some = m.iter().any(|&w| w != 0);
        (m, some)
    }

    /// Return the ids of `m` except `keep`.
    fn release(&mut self, m: &Mask, keep: &[u32]) {
        for (f, w) in self.free.iter_mut().zip(m.iter()) {
            *f |= *w;
        }
        for &k in keep {
            self.free[k as usize / 64] &= !(1u64 << (k % 64));
        }
    }

    fn give_back(&mut self, id: u32) {
        if (id as usize) < IDS {
            self.free[id as usize / 64] |= 1u64 << (id % 64);
        }
    }
}

/// The lowest ids set in `m`, skipping `not`.
fn lowest(m: &Mask, not: Option<u32>) -> Option<u32> {
    for (i, &w) in m.iter().enumerate() {
        let mut w = w;
        while w != 0 {
            let b = w.trailing_zeros();
            let id = (i * 64) as u32 + b;
            if Some(id) != not {
                return Some(id);
            }
            w &= w - 1;
        }
    }
    None
}

fn and(a: &Mask, b: &Mask) -> Mask {
    let mut r = [0; WORDS];
    for i in 0..WORDS {
        r[i] = a[i] & b[i];
    }
    r
}

const MASK_BYTES: usize = WORDS * 8;
/// A mask and the "ids left" word (all ones, or 0 for a process out of ids), ANDed together.
const BUF_BYTES: usize = MASK_BYTES + 8;

/// The "ids left" word after a mask.
unsafe fn ids_left(p: *const u8) -> bool {
    let mut w = [0u8; 8];
    std::ptr::copy_nonoverlapping(p.add(MASK_BYTES), w.as_mut_ptr(), 8);
    u64::from_ne_bytes(w) != 0
}

fn out_of_ids() -> Error {
    Error::new(
        ErrorClass::Other,
        format!("out of context ids: too many communicators in use (at most {IDS} per process)"),
    )
}

unsafe fn read_mask(p: *const u8) -> Mask {
    let mut m = [0u64; WORDS];
    std::ptr::copy_nonoverlapping(p, m.as_mut_ptr() as *mut u8, MASK_BYTES);
    m
}

unsafe fn write_mask(p: *mut u8, m: &Mask) {
    std::ptr::copy_nonoverlapping(m.as_ptr() as *const u8, p, MASK_BYTES);
}

/// A raw pointer that may move into a step closure (the schedule owns what it points to).
#[derive(Clone, Copy)]
struct P(*mut u8);
// SAFETY: points into a schedule's scratch buffer, only touched under the engine lock.
unsafe impl Send for P {}

impl P {
    /// The pointer (a method, so that closures capture the whole `Send` wrapper).
    fn p(self) -> *mut u8 {
        self.0
    }
}

/// Shared between the steps of one agreement.
#[derive(Default)]
struct Agreed {
    snapshot: Option<Mask>,
    key: Key,
}

type Cell = Arc<Mutex<Agreed>>;

/// Steps that reserve this process's free ids and AND them over `t` into the returned buffer.
/// Returns (round to jump to for a retry, buffer with the AND).
fn mask_allreduce(b: &mut B, t: &Team, cell: &Cell) -> (usize, *mut u8) {
    b.op = Some((Op::Builtin(BuiltinOp::Band), Datatype::basic(Basic::UInt64)));
    let key = b.prio.unwrap_or_default();
    cell.lock().key = key;
    b.fence();
    let start = b.round_index();
    let mine = P(b.tmp(BUF_BYTES));
    let all = b.tmp(BUF_BYTES);
    let c = cell.clone();
    b.call(move |_st| {
        let (m, left) = POOL.lock().reserve(key);
        let w = if left { u64::MAX } else { 0 };
        // SAFETY: `mine` is a BUF_BYTES scratch buffer of this schedule.
        unsafe {
            write_mask(mine.p(), &m);
            std::ptr::copy_nonoverlapping(w.to_ne_bytes().as_ptr(), mine.p().add(MASK_BYTES), 8);
        }
        c.lock().snapshot = Some(m);
        Ok(Flow::Next)
    });
    algo::allreduce_doubling(b, t, mine.p(), all, WORDS + 1, 8);
    (start, all)
}

/// Give back the snapshot except the ids kept; `done`: the agreement is over.
fn settle(cell: &Cell, keep: &[u32], done: bool) {
    let mut g = cell.lock();
    let mut p = POOL.lock();
    if let Some(m) = g.snapshot.take() {
        p.release(&m, keep);
    }
    if done {
        p.active.remove(&g.key);
    }
}

/// Register a communicator from inside a schedule.
fn add(st: &mut State, ctx: u32, local: Arc<[u32]>, remote: Option<Arc<[u32]>>) -> Result<CommId> {
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
        POOL.lock().active.insert((ctx, tag));
        // A failed agreement must not keep its priority.
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

// ------------------------------------------------------------------------------------ intra

/// Agreement on one id over `t`, then `make(st, id)` (run by every member).
fn agree_intra(
    b: &mut B,
    t: &Team,
    mut make: impl FnMut(&mut State, u32) -> Result<()> + Send + 'static,
) {
    let cell: Cell = Arc::default();
    let (start, all) = mask_allreduce(b, t, &cell);
    let all = P(all);
    b.call(move |st| {
        // SAFETY: `all` is a BUF_BYTES scratch buffer of this schedule.
        let (m, left) = unsafe { (read_mask(all.p()), ids_left(all.p())) };
        if !left {
            settle(&cell, &[], true);
            return Err(out_of_ids());
        }
        match lowest(&m, None) {
            None => {
                settle(&cell, &[], false);
                Ok(Flow::Jump(start))
            }
            Some(id) => {
                settle(&cell, &[id], true);
                make(st, id)?;
                Ok(Flow::Next)
            }
        }
    });
}

/// MPI_Comm_dup of an intracommunicator or intercommunicator (the topology goes along).
pub fn comm_dup(c: CommId) -> Result<CommId> {
    let sink = ErrorSink::default();
    let (id, r) = idup(c, Some(sink.clone()))?;
    if let Err(e) = finish(r, &sink) {
        let _ = free_comm(id);
        return Err(e);
    }
    Ok(id)
}

/// MPI_Comm_idup: the new communicator's id now, usable once the request completes.
pub fn comm_idup(c: CommId) -> Result<(CommId, RequestId)> {
    idup(c, None)
}

fn idup(c: CommId, sink: Option<ErrorSink>) -> Result<(CommId, RequestId)> {
    let topo = topology(c);
    let out: Out<CommId> = Arc::default();
    let o = out.clone();
    let r = start(c, None, sink, |b, st| {
        let (rank, local, remote) = view(st, c)?;
        let id = st.add_comm(Comm {
            ctx: PLACEHOLDER_CTX,
            rank,
            size: local.len() as i32,
            world: local.clone(),
            remote: remote.clone(),
        });
        set_extra(id, None, topo.clone(), false);
        *o.lock() = Some(id);
        match remote {
            None => {
                let t = Team::new(c, rank, local.len() as i32);
                agree_intra(b, &t, move |st, x| {
                    if let Some(Some(cm)) = st.comms.get_mut(id.0 as usize) {
                        cm.ctx = 2 * x;
                    }
                    set_extra(id, None, topo.clone(), true);
                    Ok(())
                });
            }
            Some(_) => {
                let l = local_of(c).ok_or_else(|| {
                    Error::new(
                        ErrorClass::Intern,
                        "intercommunicator without a local communicator",
                    )
                })?;
                let lt = Team::new(l, rank, local.len() as i32);
                let rt = Team::new(c, rank, remote.as_ref().map_or(0, |r| r.len() as i32));
                let how = Leaders::Coll(rt);
                agree_inter(b, &lt, how, Vec::new(), 0, true, move |st, x, y, _| {
                    if let Some(Some(cm)) = st.comms.get_mut(id.0 as usize) {
                        cm.ctx = 2 * x;
                    }
                    let lc = add(st, 2 * y, local.clone(), None)?;
                    set_extra(lc, None, None, true);
                    set_extra(id, Some(lc), topo.clone(), true);
                    Ok(())
                });
            }
        }
        Ok(())
    });
    match r {
        Ok(r) => Ok((take(&out)?, r)),
        Err(e) => {
            if let Some(id) = out.lock().take() {
                let _ = with(|en| en.st.remove_comm(id));
                EXTRA.lock().remove(&id.0);
            }
            Err(e)
        }
    }
}

/// MPI_Comm_split: the processes of each `color` (≥ 0) form a communicator, ranked by `key`
/// then by rank in `c`; MPI_UNDEFINED gives None. On an intercommunicator, the processes of a
/// color in each group form an intercommunicator (see `split_inter`).
pub fn comm_split(c: CommId, color: i32, key: i32) -> Result<Option<CommId>> {
    split_with(c, color, key, None)
}

/// MPI_Comm_split_type with MPI_COMM_TYPE_SHARED: the processes of one host (`rank_host`).
/// On an intercommunicator (which the standard does not exclude) the color names the host the
/// same way in both groups, so the result joins the processes of each group on one host (None
/// where the other group has none there), as MPICH does.
pub fn comm_split_shared(c: CommId, key: i32) -> Result<Option<CommId>> {
    let info = crate::api::comm_info(c)?;
    let me = crate::api::world_rank()?;
    let host = |r: u32| crate::api::rank_host(r).unwrap_or_else(|| format!("rank{r}"));
    let mine = host(me);
    let remote = info.remote.as_deref().unwrap_or(&[]);
    let color = info
        .local
        .iter()
        .chain(remote.iter())
        .copied()
        .filter(|&r| host(r) == mine)
        .min()
        .unwrap_or(me) as i32;
    split_with(c, color, key, None)
}

/// Split with a topology for the result (MPI_Cart_sub).
pub(crate) fn split_with(
    c: CommId,
    color: i32,
    key: i32,
    topo: Option<Arc<Topology>>,
) -> Result<Option<CommId>> {
    if color < 0 && color != UNDEFINED {
        return err(
            ErrorClass::Arg,
            format!("invalid color {color} (must be >= 0 or MPI_UNDEFINED)"),
        );
    }
    let out: Out<Option<CommId>> = Arc::default();
    let o = out.clone();
    run(c, None, |b, st| {
        let (rank, local, remote) = view(st, c)?;
        if let Some(remote) = remote {
            return split_inter(b, c, rank, local, remote, color, key, o.clone());
        }
        let n = local.len() as i32;
        let t = Team::new(c, rank, n);
        let pairs = allgather_pairs(b, &t, color, key);
        agree_intra(b, &t, move |st, x| {
            if color == UNDEFINED {
                POOL.lock().give_back(x);
                *o.lock() = Some(None);
                return Ok(());
            }
            // SAFETY: `pairs` holds one (color, key) pair per process of `local`.
            let world = unsafe { members_of(pairs, &local, color) };
            let id = add(st, 2 * x, world, None)?;
            set_extra(id, None, topo.clone(), true);
            *o.lock() = Some(Some(id));
            Ok(())
        });
        Ok(())
    })?;
    take(&out)
}

/// Steps that gather every process's (color, key) over `t`: returns the buffer of the pairs
/// (8 bytes each, in rank order of `t`).
fn allgather_pairs(b: &mut B, t: &Team, color: i32, key: i32) -> P {
    let n = t.size as usize;
    let pairs = b.tmp(8 * n);
    let mine = b.tmp(8);
    // SAFETY: `mine` has 8 bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(color.to_ne_bytes().as_ptr(), mine, 4);
        std::ptr::copy_nonoverlapping(key.to_ne_bytes().as_ptr(), mine.add(4), 4);
    }
    let bt = crate::coll::sched::bytes();
    algo::allgather_bruck(
        b,
        t,
        8,
        (mine, 8, &bt),
        &|r| {
            (
                pairs.wrapping_add(8 * r as usize),
                8,
                crate::coll::sched::bytes(),
            )
        },
        false,
    );
    P(pairs)
}

/// The processes of `group` (world ranks, in rank order) whose color is `color`, ordered by
/// key, then by rank.
///
/// # Safety
/// `pairs` holds one (color, key) pair (two native-endian i32) per process of `group`.
unsafe fn members_of(pairs: P, group: &[u32], color: i32) -> Arc<[u32]> {
    let word = |p: *const u8| {
        let mut w = [0u8; 4];
        std::ptr::copy_nonoverlapping(p, w.as_mut_ptr(), 4);
        i32::from_ne_bytes(w)
    };
    let mut members: Vec<(i32, usize, u32)> = Vec::new();
    for (r, &w) in group.iter().enumerate() {
        let p = pairs.p().add(8 * r);
        if word(p) == color {
            members.push((word(p.add(4)), r, w));
        }
    }
    members.sort();
    members.iter().map(|m| m.2).collect()
}

/// The local communicator of intercommunicator `c`.
fn local_comm(c: CommId) -> Result<CommId> {
    local_of(c).ok_or_else(|| {
        Error::new(
            ErrorClass::Intern,
            "intercommunicator without a local communicator",
        )
    })
}

/// MPI_Comm_split of an intercommunicator: the processes of each color in the two groups form
/// an intercommunicator (ranked by key, then by rank, on each side). A color chosen in one
/// group only, or MPI_UNDEFINED, gives None. The (color, key) pairs are gathered in each group
/// and exchanged by the leaders; then one agreement across the two groups gives the id every
/// new intercommunicator uses (their groups are disjoint) and one id per group for the local
/// communicators.
#[allow(clippy::too_many_arguments)]
fn split_inter(
    b: &mut B,
    c: CommId,
    rank: i32,
    local: Arc<[u32]>,
    remote: Arc<[u32]>,
    color: i32,
    key: i32,
    o: Out<Option<CommId>>,
) -> Result<()> {
    let n = local.len();
    let m = remote.len();
    let lt = Team::new(local_comm(c)?, rank, n as i32);
    let rt = Team::new(c, rank, m as i32);
    let lp = allgather_pairs(b, &lt, color, key);
    let rp = P(b.tmp(8 * m));
    b.fence();
    if rank == 0 {
        b.send_bytes(&rt, 0, lp.p(), 8 * n);
        b.recv_bytes(&rt, 0, rp.p(), 8 * m);
    }
    algo::bcast_binomial(b, &lt, 0, rp.p(), 8 * m, &crate::coll::sched::bytes());
    let how = Leaders::Coll(rt);
    agree_inter(b, &lt, how, Vec::new(), 0, true, move |st, x, y, _| {
        // SAFETY: `lp` and `rp` hold one pair per process of `local` and `remote`.
        let (lw, rw) = unsafe {
            (
                members_of(lp, &local, color),
                members_of(rp, &remote, color),
            )
        };
        if color == UNDEFINED || rw.is_empty() {
            let mut p = POOL.lock();
            p.give_back(x);
            p.give_back(y);
            *o.lock() = Some(None);
            return Ok(());
        }
        *o.lock() = Some(Some(add_inter(st, x, y, lw, rw)?));
        Ok(())
    });
    Ok(())
}

/// Register an intercommunicator (context id `x`) and its local communicator (id `y`).
fn add_inter(
    st: &mut State,
    x: u32,
    y: u32,
    local: Arc<[u32]>,
    remote: Arc<[u32]>,
) -> Result<CommId> {
    let lc = add(st, 2 * y, local.clone(), None)?;
    set_extra(lc, None, None, true);
    let id = add(st, 2 * x, local, Some(remote))?;
    set_extra(id, Some(lc), None, true);
    Ok(id)
}

/// MPI_Comm_create: every process of `c` calls it with the group (world ranks, in the new rank
/// order) it belongs to; processes outside their group get None. On an intercommunicator, the
/// group is a subgroup of the local group and the result an intercommunicator between the two
/// groups' subgroups (None for everyone if either is empty).
pub fn comm_create_from_group(c: CommId, group: &[u32]) -> Result<Option<CommId>> {
    create_with(c, group, None)
}

pub(crate) fn create_with(
    c: CommId,
    group: &[u32],
    topo: Option<Arc<Topology>>,
) -> Result<Option<CommId>> {
    let me = crate::api::world_rank()?;
    // (Not inside `run`'s closure: it holds the engine lock.)
    let nprocs = crate::api::world_size()? as usize;
    let member = group.contains(&me);
    let world: Arc<[u32]> = group.into();
    let out: Out<Option<CommId>> = Arc::default();
    let o = out.clone();
    run(c, None, |b, st| {
        let (rank, local, remote) = view(st, c)?;
        if let Some(r) = world.iter().find(|r| !local.contains(r)) {
            return err(
                ErrorClass::Group,
                format!(
                    "the group holds world rank {r}, which is not in the (local) group of the \
                     communicator"
                ),
            );
        }
        if let Some(remote) = remote {
            // Intercommunicator: the group is a subgroup of the local group, the same in the
            // whole local group; the leaders exchange the two subgroups with the agreement.
            let lt = Team::new(local_comm(c)?, rank, local.len() as i32);
            let rt = Team::new(c, rank, remote.len() as i32);
            let w = world.clone();
            let o = o.clone();
            agree_inter(
                b,
                &lt,
                Leaders::Coll(rt),
                ranks_bytes(&world),
                4 * nprocs,
                true,
                move |st, x, y, rest| {
                    let rw: Arc<[u32]> = bytes_ranks(rest).into();
                    if !member || w.is_empty() || rw.is_empty() {
                        let mut p = POOL.lock();
                        p.give_back(x);
                        p.give_back(y);
                        *o.lock() = Some(None);
                        return Ok(());
                    }
                    *o.lock() = Some(Some(add_inter(st, x, y, w.clone(), rw)?));
                    Ok(())
                },
            );
            return Ok(());
        }
        let t = Team::new(c, rank, local.len() as i32);
        agree_intra(b, &t, move |st, x| {
            if !member || world.is_empty() {
                POOL.lock().give_back(x);
                *o.lock() = Some(None);
                return Ok(());
            }
            let id = add(st, 2 * x, world.clone(), None)?;
            set_extra(id, None, topo.clone(), true);
            *o.lock() = Some(Some(id));
            Ok(())
        });
        Ok(())
    })?;
    take(&out)
}

/// MPI_Comm_create_group: only the members of `group` (world ranks) call it; `tag`
/// distinguishes concurrent calls on the same communicator. A process outside the group (the
/// group empty, say) gets None at once: the call is local for it (MPI-4.1 §7.4.2).
pub fn comm_create_group(c: CommId, group: &[u32], tag: i32) -> Result<Option<CommId>> {
    if tag < 0 {
        return err(ErrorClass::Tag, format!("invalid tag {tag}"));
    }
    let me = crate::api::world_rank()?;
    let info = crate::api::comm_info(c)?;
    if info.remote.is_some() {
        // The standard defines MPI_Comm_create_group on intracommunicators only.
        return err(
            ErrorClass::Comm,
            "MPI_Comm_create_group needs an intracommunicator",
        );
    }
    let mut map = Vec::with_capacity(group.len());
    for w in group {
        match info.local.iter().position(|x| x == w) {
            Some(r) => map.push(r as i32),
            None => {
                return err(
                    ErrorClass::Group,
                    format!("the group holds world rank {w}, which is not in the communicator"),
                )
            }
        }
    }
    let Some(vme) = group.iter().position(|&w| w == me) else {
        return Ok(None);
    };
    let world: Arc<[u32]> = group.into();
    let t = Team {
        comm: c,
        me: vme as i32,
        size: group.len() as i32,
        map: Some(map.into()),
    };
    let out: Out<CommId> = Arc::default();
    let o = out.clone();
    run(c, Some(group_tag(tag)), |b, _st| {
        agree_intra(b, &t, move |st, x| {
            let id = add(st, 2 * x, world.clone(), None)?;
            set_extra(id, None, None, true);
            *o.lock() = Some(id);
            Ok(())
        });
        Ok(())
    })?;
    take(&out).map(Some)
}

/// Register a copy of `c`'s group with a topology (MPI_Cart_create … on all ranks of `c`):
/// the first `n` ranks of `c` take part, the others get None.
pub(crate) fn create_topo(c: CommId, n: usize, topo: Topology) -> Result<Option<CommId>> {
    let info = crate::api::comm_info(c)?;
    if info.remote.is_some() {
        return err(ErrorClass::Comm, "topologies need an intracommunicator");
    }
    if n > info.local.len() {
        return err(
            ErrorClass::Arg,
            format!(
                "the topology has {n} processes, more than the {} of the communicator",
                info.local.len()
            ),
        );
    }
    create_with(c, &info.local[..n], Some(Arc::new(topo)))
}

// ------------------------------------------------------------------------------------ inter

/// How two group leaders talk.
enum Leaders {
    /// On the collective context of an intercommunicator (remote rank 0).
    Coll(Team),
    /// Point to point on a peer communicator with the user's tag (MPI_Intercomm_create).
    User { comm: CommId, peer: i32, tag: i32 },
}

/// Agreement across two groups: allreduce of the masks in the local group `lt` (leader: local
/// rank `leader`), exchange of (mask, `payload`) between the leaders, the leader's decision
/// broadcast in the group; then `make(st, x, y, remote_payload)` with `x` common to both
/// groups and `y` (when `need_local`) free in this group.
#[allow(clippy::too_many_arguments)]
fn agree_inter_at(
    b: &mut B,
    lt: &Team,
    leader: i32,
    how: Leaders,
    payload: Vec<u8>,
    max_remote: usize,
    need_local: bool,
    mut make: impl FnMut(&mut State, u32, u32, &[u8]) -> Result<()> + Send + 'static,
) {
    let cell: Cell = Arc::default();
    let (start, all) = mask_allreduce(b, lt, &cell);
    let msg_len = BUF_BYTES + 8 + payload.len();
    let cap = BUF_BYTES + 8 + max_remote;
    let out = P(b.tmp(msg_len));
    let inb = P(b.tmp(cap));
    let dec_len = 32 + max_remote;
    let dec = P(b.tmp(dec_len));
    let all = P(all);
    let i_lead = lt.me == leader;
    if i_lead {
        let pl = payload.clone();
        b.call(move |_| {
            // SAFETY: `out` holds msg_len bytes; `all` a mask.
            unsafe {
                std::ptr::copy_nonoverlapping(all.p(), out.p(), BUF_BYTES);
                let n = (pl.len() as u64).to_ne_bytes();
                std::ptr::copy_nonoverlapping(n.as_ptr(), out.p().add(BUF_BYTES), 8);
                std::ptr::copy_nonoverlapping(pl.as_ptr(), out.p().add(BUF_BYTES + 8), pl.len());
            }
            Ok(Flow::Next)
        });
        match &how {
            Leaders::Coll(rt) => {
                b.send_bytes(rt, 0, out.p(), msg_len);
                b.recv_bytes(rt, 0, inb.p(), cap);
            }
            Leaders::User { comm, peer, tag } => {
                b.user_xfer(true, *comm, *peer, *tag, out.p(), msg_len);
                b.user_xfer(false, *comm, *peer, *tag, inb.p(), cap);
            }
        }
        b.call(move |_| {
            // SAFETY: the buffers have the sizes computed above; the peer's payload length
            // is checked against the capacity.
            unsafe {
                let mine = read_mask(all.p());
                let theirs = read_mask(inb.p());
                let left = ids_left(all.p()) && ids_left(inb.p());
                let mut n = [0u8; 8];
                std::ptr::copy_nonoverlapping(inb.p().add(BUF_BYTES), n.as_mut_ptr(), 8);
                let plen = (u64::from_ne_bytes(n) as usize).min(max_remote);
                let both = and(&mine, &theirs);
                let x = lowest(&both, None);
                let ok = x.is_some_and(|x| {
                    !need_local
                        || (lowest(&mine, Some(x)).is_some() && lowest(&theirs, Some(x)).is_some())
                });
                let words: [u64; 4] = match x {
                    // 2: a process is out of ids, everyone fails.
                    _ if !left => [2, 0, 0, 0],
                    Some(x) if ok => [
                        1,
                        x as u64,
                        lowest(&mine, Some(x)).unwrap_or(0) as u64,
                        plen as u64,
                    ],
                    _ => [0; 4],
                };
                std::ptr::copy_nonoverlapping(words.as_ptr() as *const u8, dec.p(), 32);
                std::ptr::copy_nonoverlapping(inb.p().add(BUF_BYTES + 8), dec.p().add(32), plen);
            }
            Ok(Flow::Next)
        });
    }
    algo::bcast_binomial(
        b,
        lt,
        leader,
        dec.p(),
        dec_len,
        &crate::coll::sched::bytes(),
    );
    b.call(move |st| {
        // SAFETY: `dec` holds dec_len bytes.
        let (words, rest) = unsafe {
            let mut w = [0u64; 4];
            std::ptr::copy_nonoverlapping(dec.p(), w.as_mut_ptr() as *mut u8, 32);
            let plen = (w[3] as usize).min(max_remote);
            (
                w,
                std::slice::from_raw_parts(dec.p().add(32), plen).to_vec(),
            )
        };
        if words[0] == 0 {
            settle(&cell, &[], false);
            return Ok(Flow::Jump(start));
        }
        if words[0] == 2 {
            settle(&cell, &[], true);
            return Err(out_of_ids());
        }
        let (x, y) = (words[1] as u32, words[2] as u32);
        let keep = if need_local { vec![x, y] } else { vec![x] };
        settle(&cell, &keep, true);
        make(st, x, y, &rest)?;
        Ok(Flow::Next)
    });
}

fn agree_inter(
    b: &mut B,
    lt: &Team,
    how: Leaders,
    payload: Vec<u8>,
    max_remote: usize,
    need_local: bool,
    make: impl FnMut(&mut State, u32, u32, &[u8]) -> Result<()> + Send + 'static,
) {
    agree_inter_at(b, lt, 0, how, payload, max_remote, need_local, make)
}

fn ranks_bytes(r: &[u32]) -> Vec<u8> {
    r.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn bytes_ranks(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_ne_bytes(c.try_into().unwrap_or([0; 4])))
        .collect()
}

/// MPI_Intercomm_create: the processes of `local` (leader `local_leader`) and those of another
/// group (whose leader is rank `remote_leader` of `peer`, significant at the local leader)
/// form an intercommunicator; the leaders talk on `peer` with `tag`.
pub fn intercomm_create(
    local: CommId,
    local_leader: i32,
    peer: CommId,
    remote_leader: i32,
    tag: i32,
) -> Result<CommId> {
    let nprocs = crate::api::world_size()? as usize;
    let out: Out<CommId> = Arc::default();
    let o = out.clone();
    run(local, None, |b, st| {
        let (rank, group, remote) = view(st, local)?;
        if remote.is_some() {
            return err(
                ErrorClass::Comm,
                "the local communicator must be an intracommunicator",
            );
        }
        let n = group.len() as i32;
        if !(0..n).contains(&local_leader) {
            return err(
                ErrorClass::Rank,
                format!("invalid local leader {local_leader}"),
            );
        }
        if rank == local_leader {
            let pc = st.comm(peer)?;
            if !(0..pc.peer_count()).contains(&remote_leader) {
                return err(
                    ErrorClass::Rank,
                    format!("invalid remote leader {remote_leader}"),
                );
            }
            if !(0..=crate::TAG_UB).contains(&tag) {
                return err(ErrorClass::Tag, format!("invalid tag {tag}"));
            }
        }
        let lt = Team::new(local, rank, n);
        let how = Leaders::User {
            comm: peer,
            peer: remote_leader,
            tag,
        };
        let g = group.clone();
        agree_inter_at(
            b,
            &lt,
            local_leader,
            how,
            ranks_bytes(&group),
            4 * nprocs,
            true,
            move |st, x, y, rest| {
                let rem: Arc<[u32]> = bytes_ranks(rest).into();
                if rem.iter().any(|r| g.contains(r)) || rem.is_empty() {
                    return err(
                        ErrorClass::Arg,
                        "MPI_Intercomm_create: the two groups overlap (or the remote group is empty)",
                    );
                }
                let lc = add(st, 2 * y, g.clone(), None)?;
                set_extra(lc, None, None, true);
                let id = add(st, 2 * x, g.clone(), Some(rem))?;
                set_extra(id, Some(lc), None, true);
                *o.lock() = Some(id);
                Ok(())
            },
        );
        Ok(())
    })?;
    take(&out)
}

/// MPI_Intercomm_merge: an intracommunicator of both groups, the group that passed
/// `high = false` first (if both passed the same, the group whose leader has the lower world
/// rank).
pub fn intercomm_merge(inter: CommId, high: bool) -> Result<CommId> {
    let out: Out<CommId> = Arc::default();
    let o = out.clone();
    run(inter, None, |b, st| {
        let (rank, group, remote) = view(st, inter)?;
        let Some(remote) = remote else {
            return err(
                ErrorClass::Comm,
                "MPI_Intercomm_merge needs an intercommunicator",
            );
        };
        let l = local_of(inter).ok_or_else(|| {
            Error::new(
                ErrorClass::Intern,
                "intercommunicator without a local communicator",
            )
        })?;
        let lt = Team::new(l, rank, group.len() as i32);
        let rt = Team::new(inter, rank, remote.len() as i32);
        agree_inter(
            b,
            &lt,
            Leaders::Coll(rt),
            vec![high as u8],
            1,
            false,
            move |st, x, _, rest| {
                let their_high = rest.first().copied().unwrap_or(0) != 0;
                let mine_first = if high != their_high {
                    !high
                } else {
                    group[0] < remote[0]
                };
                let world: Arc<[u32]> = if mine_first {
                    group.iter().chain(remote.iter()).copied().collect()
                } else {
                    remote.iter().chain(group.iter()).copied().collect()
                };
                let id = add(st, 2 * x, world, None)?;
                set_extra(id, None, None, true);
                *o.lock() = Some(id);
                Ok(())
            },
        );
        Ok(())
    })?;
    take(&out)
}

/// Whether `c` is an intercommunicator.
pub fn comm_is_inter(c: CommId) -> Result<bool> {
    with(|e| Ok(e.st.comm(c)?.remote.is_some()))
}

/// Whether `c` is an intercommunicator, and this process's rank in (the local group of) it:
/// what a collective's C binding needs to know about its caller, under one lock.
pub fn comm_role(c: CommId) -> Result<(bool, i32)> {
    with(|e| {
        let cm = e.st.comm(c)?;
        Ok((cm.remote.is_some(), cm.rank))
    })
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

fn destroy(st: &mut State, c: CommId) -> Result<()> {
    let ctx = st.comm(c)?.ctx;
    st.remove_comm(c)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_reserves_and_releases() {
        let mut p = Pool {
            free: [u64::MAX; WORDS],
            active: Default::default(),
        };
        p.free[0] &= !0b11;
        p.active.insert((0, 0));
        p.active.insert((0, 1024));
        assert_eq!(lowest(&p.reserve((0, 1024)).0, None), None, "not its turn");
        assert!(p.reserve((0, 1024)).1, "not out of ids either");
        let (m, left) = p.reserve((0, 0));
        assert!(left);
        assert!(
            !p.reserve((0, 0)).1,
            "nothing left with the priority: out of ids"
        );
        assert_eq!(lowest(&m, None), Some(2));
        assert_eq!(lowest(&p.free, None), None);
        p.release(&m, &[2]);
        assert_eq!(lowest(&p.free, None), Some(3));
        let mut other = [0u64; WORDS];
        other[1] = 1 << 5;
        assert_eq!(lowest(&and(&p.free, &other), None), Some(69));
        assert_eq!(lowest(&m, Some(2)), Some(3));
    }
}
