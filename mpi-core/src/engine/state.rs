//! The engine state and the life of its requests: [`State`] and its constructor, [`Engine`],
//! communicators ([`Comm`], `add_comm`, `remove_comm`), completion (`complete`,
//! `maybe_complete_send`), persistent requests (`persistent`, `start`, `rebind`), schedules
//! ([`Schedule`]), the loss of a peer (`peer_lost`), problems with peers' packets (`peer_error`)
//! and whether work remains (`busy`).
//!
//! This module never calls a driver and never blocks.

use std::sync::Arc;

use super::rails::Drivers;
use super::rails::{DriverId, NO_DRIVER};
use super::strategy::PacketStrategy;
use super::{
    check_dest_tag, check_src_tag, check_type, order, Buffers, Gate, MatchQ, OnSent, PendingGet,
    Strategy, Unexpected,
};
use crate::error::{err, Error, ErrorClass, Result};
use crate::request::{Op, Persistent, Request, RequestId, Slab, PROC_NULL_STATUS};
use crate::{CommId, SessionId};

/// A multi-step operation (a non-blocking collective) that the progress engine advances: it
/// posts its point-to-point steps on the state (on the communicator's collective context) and
/// watches them complete. `advance` must never block.
pub(crate) trait Schedule: Send {
    /// Start what can start and look at what finished: `Ok(true)` when the whole operation is
    /// complete; an error completes the request with that error.
    fn advance(&mut self, st: &mut State) -> Result<bool>;

    /// The status of the completed operation (the empty status when `None`: collectives).
    fn status(&self) -> Option<crate::Status> {
        None
    }
}

/// A communicator as the engine sees it.
pub(crate) struct Comm {
    /// Point-to-point context; collectives use `ctx + 1`.
    pub ctx: u32,
    pub rank: i32,
    pub size: i32,
    /// World rank of each communicator rank (the local group).
    pub world: Arc<[u32]>,
    /// For an intercommunicator, the world ranks of the remote group: point-to-point ranks
    /// name remote processes.
    pub remote: Option<Arc<[u32]>>,
    /// The session it derives from (made from a session's group, or from such a
    /// communicator): its buffered sends may use the session's buffer.
    pub session: Option<SessionId>,
}

impl Comm {
    /// The group that point-to-point ranks refer to (remote group of an intercommunicator).
    #[inline]
    pub fn peers(&self) -> &[u32] {
        self.remote.as_deref().unwrap_or(&self.world)
    }

    /// Number of valid destination / source ranks.
    #[inline]
    pub fn peer_count(&self) -> i32 {
        self.peers().len() as i32
    }
}

/// Engine state without the drivers: everything [`State::handle_packet`] may touch.
pub(crate) struct State {
    /// This process's world rank.
    pub me: u32,
    pub nprocs: u32,
    pub gates: Vec<Gate>,
    pub reqs: Slab,
    pub(super) mq: Vec<MatchQ>,
    pub comms: Vec<Option<Comm>>,
    pub(super) messages: Vec<(u64, Unexpected)>,
    pub(super) next_msg: u64,
    /// The job's strategy.
    pub(super) strat: Box<dyn PacketStrategy>,
    /// The strategy copies small sends into the packet being built when they are posted (and
    /// queued chunks wait for the next progress call); otherwise a send leaves at once.
    pub packs_on_post: bool,
    /// With `packs_on_post`: the first small send to a peer after a progress call leaves at
    /// once ([`PacketStrategy::lone_at_once`]), and sends off the fast path are flushed.
    pub lone_at_once: bool,
    /// Progress calls so far (wrapping): a gate that sent at once in the current one
    /// (`Gate::lone_epoch`) packs what follows.
    pub(super) epoch: u32,
    /// Per peer: the order of its messages, restored from their sequence numbers.
    pub(super) order: Vec<order::Order>,
    /// The driver being polled (the rail data arrives on).
    pub(super) polling: DriverId,
    /// Rendezvous receives whose data this process asked for in pieces over several rails,
    /// Unfinished pieces of rendezvous messages pushed over gates with several rails
    /// (`resilience`), and of those whose sender waits for a Fin.
    pub(super) pieces: Vec<super::resilience::PieceRecv>,
    /// Rendezvous sends whose RTS waits for the key of their registration (`FLAG_KEY`).
    pub(super) to_register: Vec<RequestId>,
    /// Registrations of completed sends to undo: (driver, key).
    pub(super) to_deregister: Vec<(DriverId, u64)>,
    pub(super) gets: Vec<PendingGet>,
    /// Buffers of unexpected eager messages already delivered, kept for the next ones: a
    /// fresh allocation of tens of KiB per message is memory the allocator gave back to the
    /// system and faults in again, page by page (a third of the receiver's time when a sender
    /// of 64 KiB messages runs ahead over TCP).
    pub(super) spare: Vec<Vec<u8>>,
    pub(super) dirty: Vec<u32>,
    /// The buffers of buffered sends (the process's and the communicators').
    pub(crate) bsends: Buffers,
    /// Blocks of sparse datatypes at least this large travel zero-copy (`MADMPI_ZCOPY_MIN`).
    pub zcopy_min: usize,
    /// Rendezvous sent with a piece table (zero-copy blocks), for statistics and tests.
    pub zcopy_sends: u64,
    /// Rendezvous whose fragments are gathered from a sparse user buffer (no packing).
    pub gather_sends: u64,
    /// Peers found dead, in the order they were found.
    pub lost: Vec<u32>,
    /// Requests running a [`Schedule`].
    pub(super) scheds: Vec<RequestId>,
    /// Problems with peers' packets, reported once each (malformed data is dropped).
    pub peer_errors: Vec<String>,
    /// Payloads of queued one-sided chunks (`owned`).
    pub(super) owned: super::Owned,
    /// Windows of one-sided communication (`crate::rma`).
    pub(crate) rma: crate::rma::Rma,
    /// What the tool interface's performance variables read (`crate::tool`).
    pub(crate) stats: crate::tool::Counters,
}

// SAFETY: the raw pointers a `State` holds point into user buffers (valid until their request
// completes, by the MPI rule stated on `request`) and into the attached bsend buffer; the state
// lives behind the engine lock, so only one thread touches them at a time.
unsafe impl Send for State {}

/// The engine: state plus drivers.
pub(crate) struct Engine {
    pub st: State,
    pub drv: Drivers,
}

impl State {
    /// Whether a send posted off the fast path (MPI_Isend's checked path, MPI_Start) leaves at
    /// once: under every strategy but `aggreg`, which keeps it for the next progress call.
    #[inline]
    pub fn sends_leave_at_once(&self) -> bool {
        !self.packs_on_post || self.lone_at_once
    }

    /// State for world rank `me` of `nprocs`, one gate per peer.
    pub(super) fn new(me: u32, nprocs: u32, mut gates: Vec<Gate>, strategy: Strategy) -> State {
        let strat = strategy.make();
        for g in &mut gates {
            if strat.push_rendezvous(g) {
                // The sender cuts the data over its rails: it must push it.
                g.can_get = false;
            }
        }
        let all: Arc<[u32]> = (0..nprocs).collect();
        let comms = vec![
            Some(Comm {
                remote: None,
                ctx: 0,
                rank: me as i32,
                size: nprocs as i32,
                world: all.clone(),
                session: None,
            }),
            Some(Comm {
                remote: None,
                ctx: 2,
                rank: 0,
                size: 1,
                world: Arc::from(vec![me]),
                session: None,
            }),
            // The sessions' communicator of every process (`crate::comm::SESSION_COMM`): no
            // handle names it; MPI_Comm_create_from_group agrees on context ids over it.
            Some(Comm {
                remote: None,
                ctx: 4,
                rank: me as i32,
                size: nprocs as i32,
                world: all,
                session: None,
            }),
        ];
        State {
            me,
            nprocs,
            gates,
            reqs: Slab::default(),
            mq: Vec::new(),
            comms,
            messages: Vec::new(),
            next_msg: 0,
            packs_on_post: strat.packs_on_post(),
            lone_at_once: strat.packs_on_post() && strat.lone_at_once(),
            epoch: 0,
            strat,
            order: (0..nprocs).map(|_| order::Order::default()).collect(),
            polling: NO_DRIVER,
            pieces: Vec::new(),
            to_register: Vec::new(),
            to_deregister: Vec::new(),
            gets: Vec::new(),
            spare: Vec::new(),
            dirty: Vec::new(),
            bsends: Buffers::default(),
            zcopy_min: std::env::var("MADMPI_ZCOPY_MIN")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(8192),
            zcopy_sends: 0,
            gather_sends: 0,
            lost: Vec::new(),
            scheds: Vec::new(),
            peer_errors: Vec::new(),
            owned: Default::default(),
            rma: Default::default(),
            stats: Default::default(),
        }
    }

    /// The name of the strategy the engine runs.
    pub(crate) fn strategy_name(&self) -> &'static str {
        self.strat.name()
    }

    /// A strategy parameter (`None`: the strategy has none of this name).
    pub(crate) fn strategy_get(&self, name: &str) -> Option<usize> {
        self.strat.param(name)
    }

    /// Set a strategy parameter at run time; `false` when the strategy has none of this name.
    pub(crate) fn strategy_set(&mut self, name: &str, v: usize) -> bool {
        self.strat.set_param(name, v)
    }

    pub fn comm(&self, c: CommId) -> Result<&Comm> {
        match self.comms.get(c.0 as usize) {
            Some(Some(c)) => Ok(c),
            _ => err(
                ErrorClass::Comm,
                format!("invalid communicator (id {})", c.0),
            ),
        }
    }

    /// A completed request of an operation on MPI_PROC_NULL.
    pub(super) fn null_request(&mut self) -> RequestId {
        let mut r = Request::new(Op::None);
        r.complete = true;
        r.status = PROC_NULL_STATUS;
        self.reqs.insert(r)
    }

    /// A persistent request, inactive until started.
    pub fn persistent(&mut self, p: Persistent) -> Result<RequestId> {
        match &p {
            Persistent::Send {
                dest,
                tag,
                comm,
                dt,
                ..
            } => {
                check_dest_tag(self.comm(*comm)?, *dest, *tag)?;
                check_type(dt)?;
            }
            Persistent::Recv {
                src, tag, comm, dt, ..
            } => {
                check_src_tag(self.comm(*comm)?, *src, *tag)?;
                check_type(dt)?;
            }
            Persistent::Coll(_) | Persistent::Part(_) => {}
        }
        let mut r = Request::new(Op::None);
        r.active = false;
        r.complete = true;
        r.status = crate::request::EMPTY_STATUS;
        r.persistent = Some(Box::new(p));
        Ok(self.reqs.insert(r))
    }

    /// MPI_Start on a persistent request.
    pub fn start(&mut self, id: RequestId) -> Result<()> {
        let r = self.reqs.get(id).ok_or_else(bad_request)?;
        let p = r.persistent.as_deref().cloned().ok_or_else(|| {
            Error::new(
                ErrorClass::Request,
                "MPI_Start on a request that is not persistent",
            )
        })?;
        if r.active {
            return err(
                ErrorClass::Request,
                "MPI_Start on a persistent request that is already active",
            );
        }
        let sched = match &p {
            Persistent::Coll(make) => Some(make(self)?),
            Persistent::Part(part) => Some(crate::part::round(self, part)?),
            _ => None,
        };
        if let Some(sched) = sched {
            // A collective or a partitioned round runs in the persistent request itself, as a
            // schedule.
            let r = self.reqs.get_mut(id).ok_or_else(bad_request)?;
            r.op = Op::Sched(sched);
            r.active = true;
            r.complete = false;
            r.status = crate::request::EMPTY_STATUS;
            self.scheds.push(id);
            self.advance_schedules();
            return Ok(());
        }
        // The inner operation runs as its own request; its state moves into this one.
        // SAFETY: the persistent request's buffer follows the same validity rule as any request.
        let inner = unsafe {
            match p {
                Persistent::Send {
                    buf,
                    count,
                    ref dt,
                    dest,
                    tag,
                    comm,
                    mode,
                } => self.isend(buf, count, dt, dest, tag, comm, mode, false)?,
                Persistent::Recv {
                    buf,
                    count,
                    ref dt,
                    src,
                    tag,
                    comm,
                } => {
                    // The receive runs in the persistent request itself: a match with a
                    // rendezvous already there asks for the data under this request's id
                    // at once (a Cts that would name the inner request is not rewritten).
                    let r = self.irecv_in(Some(id), buf, count, dt, src, tag, comm, false)?;
                    if r == id {
                        return Ok(());
                    }
                    r
                }
                Persistent::Coll(_) | Persistent::Part(_) => unreachable!("started above"),
            }
        };
        self.rebind(inner, id);
        Ok(())
    }

    /// Move the live operation of request `from` into the (persistent) request `to`.
    fn rebind(&mut self, from: RequestId, to: RequestId) {
        let inner = self.reqs.remove(from).expect("just created");
        // Every reference to `from` (posted queue, queued chunks, a registration to make)
        // must now name `to`.
        for r in self.to_register.iter_mut().filter(|r| **r == from) {
            *r = to;
        }
        for q in &mut self.mq {
            for e in q.posted.iter_mut() {
                if e.2 == from {
                    e.2 = to;
                }
            }
        }
        for g in &mut self.gates {
            let pinned = g.rails.iter_mut().flat_map(|r| r.out.iter_mut());
            for c in g.out.iter_mut().chain(pinned) {
                // A chunk this process sends about a peer's request (a receiver's answers)
                // names the peer's request in `sreq`: not ours.
                let theirs = matches!(
                    crate::wire::Kind::from_raw(c.hdr.kind),
                    Some(
                        crate::wire::Kind::Cts
                            | crate::wire::Kind::Fin
                            | crate::wire::Kind::SyncAck
                            | crate::wire::Kind::CancelAck
                    )
                );
                if !theirs && c.hdr.sreq == from.0 {
                    c.hdr.sreq = to.0;
                }
                match &mut c.sent {
                    OnSent::Send(r) | OnSent::Frag(r) if *r == from => *r = to,
                    _ => {}
                }
            }
        }
        for gt in &mut self.gets {
            if gt.rid == from {
                gt.rid = to;
            }
        }
        let r = self.reqs.get_mut(to).expect("checked by start");
        r.op = inner.op;
        r.complete = inner.complete;
        r.status = inner.status;
        r.active = true;
    }

    /// Mark a request complete (and free it if detached).
    #[inline]
    pub(crate) fn complete(&mut self, id: RequestId) {
        let Some(r) = self.reqs.get_mut(id) else {
            return;
        };
        r.complete = true;
        match &mut r.op {
            Op::Recv(rv) => {
                rv.posted = false;
            }
            Op::Send(s) => {
                if let Some(x) = s.extra.take() {
                    if let Some(slot) = x.bsend {
                        self.bsends.release(slot);
                    }
                    if let Some(reg) = x.registered {
                        self.to_deregister.push(reg);
                    }
                }
            }
            _ => {}
        }
        if r.detached {
            self.reqs.free(id);
        }
    }

    pub(super) fn maybe_complete_send(&mut self, id: RequestId) {
        let Some(r) = self.reqs.get_mut(id) else {
            return;
        };
        if let Op::Send(s) = &r.op {
            let frag_done = !s.fragmenting || s.frag_sent >= s.len;
            if !s.queued && !s.await_ack && !s.cancel_wait && frag_done {
                self.complete(id);
            }
        }
    }

    pub(crate) fn peer_error(&mut self, msg: String) {
        if self.peer_errors.len() < 16 {
            eprintln!("madmpi: dropped {msg}");
            self.peer_errors.push(msg);
        }
    }

    /// Start a schedule as a new request (advanced once now, then by every progress call).
    pub fn start_schedule(&mut self, s: Box<dyn Schedule>) -> Result<RequestId> {
        let rid = self.reqs.insert(Request::new(Op::Sched(s)));
        self.scheds.push(rid);
        self.advance_schedules();
        Ok(rid)
    }

    /// Advance every running schedule once.
    pub fn advance_schedules(&mut self) {
        let mut i = 0;
        while i < self.scheds.len() {
            let rid = self.scheds[i];
            let Some(r) = self.reqs.get_mut(rid) else {
                self.scheds.swap_remove(i);
                continue;
            };
            let Op::Sched(mut s) = std::mem::replace(&mut r.op, Op::None) else {
                self.scheds.swap_remove(i);
                continue;
            };
            let res = s.advance(self);
            let status = match res {
                Ok(true) => s.status(),
                _ => None,
            };
            let r = self
                .reqs
                .get_mut(rid)
                .expect("schedules do not free their own request");
            r.op = Op::Sched(s);
            if let Some(st) = status {
                r.status = st;
            }
            match res {
                Ok(false) => i += 1,
                Ok(true) => {
                    self.scheds.swap_remove(i);
                    self.complete(rid);
                }
                Err(e) => {
                    r.status.error = Some(e.class);
                    self.scheds.swap_remove(i);
                    self.complete(rid);
                }
            }
        }
    }

    /// Create a communicator: `ctx` (even; `ctx + 1` carries its collectives) must be agreed
    /// by all its members and unused.
    pub fn add_comm(&mut self, c: Comm) -> CommId {
        match self.comms.iter().skip(2).position(|c| c.is_none()) {
            Some(i) => {
                self.comms[i + 2] = Some(c);
                CommId(i as u32 + 2)
            }
            None => {
                self.comms.push(Some(c));
                CommId(self.comms.len() as u32 - 1)
            }
        }
    }

    /// Forget a communicator (MPI_Comm_free). Operations already started on it go on.
    pub fn remove_comm(&mut self, id: CommId) -> Result<()> {
        if id.0 < 2 {
            return err(
                ErrorClass::Comm,
                "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed",
            );
        }
        match self.comms.get_mut(id.0 as usize) {
            Some(c @ Some(_)) => {
                *c = None;
                Ok(())
            }
            _ => err(
                ErrorClass::Comm,
                format!("invalid communicator (id {})", id.0),
            ),
        }
    }

    /// `peer` has died: fail every operation that involves it (sends to it, receives matched to
    /// it, and posted receives that it could satisfy — its rank, or MPI_ANY_SOURCE on a
    /// communicator it belongs to), so that nobody waits forever. Later sends to it fail at
    /// once, later receives from it when posted or waited for (`liveness.rs`).
    pub fn peer_lost(&mut self, peer: u32) {
        let g = &mut self.gates[peer as usize];
        if g.dead {
            return;
        }
        g.dead = true;
        crate::trace::peer_lost(peer);
        // Payloads the engine owns (one-sided chunks) go with their chunks.
        let owned: Vec<u32> = (g.out.iter())
            .chain(g.rails.iter().flat_map(|r| r.out.iter()))
            .filter_map(|c| match c.sent {
                OnSent::Owned(k) => Some(k),
                _ => None,
            })
            .collect();
        g.out.clear();
        g.packed.clear();
        g.packed_n = 0;
        for r in &mut g.rails {
            r.out.clear();
        }
        g.resil.unacked.clear();
        g.resil.resend.clear();
        for k in owned {
            self.release_owned(k);
        }
        self.rma_peer_lost(peer);
        self.gets.retain(|x| x.peer != peer);
        self.pieces.retain(|x| x.peer != peer);
        if !self.lost.contains(&peer) {
            self.lost.push(peer);
        }
        let stats = &mut self.stats;
        for q in &mut self.mq {
            q.unexpected.retain(|u| {
                if u.peer == peer {
                    stats.unexpected_out(u.held());
                }
                u.peer != peer
            });
        }
        // Posted receives it could satisfy: from its rank, or from MPI_ANY_SOURCE on a
        // communicator it belongs to.
        self.fail_lost_receives();
        let failed = self.reqs.ids_where(|r| match &r.op {
            Op::Send(s) => s.peer == peer && !r.complete,
            Op::Recv(rv) => rv.peer == Some(peer) && !r.complete,
            Op::None | Op::Sched(_) => false,
        });
        for rid in failed {
            self.fail_request(rid);
        }
    }

    /// Outgoing traffic not yet handed to a driver: queued chunks, rendezvous reads.
    pub fn sending(&self) -> bool {
        !self.dirty.is_empty() || !self.gets.is_empty()
    }

    /// Requests the engine must finish before MPI_Finalize returns (buffered and freed sends,
    /// control chunks not yet handed to a driver).
    pub fn busy(&self) -> bool {
        !self.dirty.is_empty() || !self.gets.is_empty() || self.reqs.detached_pending() > 0
    }
}

pub(super) fn bad_request() -> Error {
    Error::new(ErrorClass::Request, "invalid request handle")
}
