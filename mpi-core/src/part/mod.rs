//! Partitioned communication (MPI_Psend_init, MPI_Precv_init, MPI_Pready*, MPI_Parrived).
//!
//! **Matching.** A partitioned operation matches apart from the user's messages, on the
//! *shadow* of its communicator: a communicator the engine knows with the same groups and
//! context `ctx + CTX_LIMIT` (`CTX_WIRE_LIMIT` bounds what a peer may name). Both sides derive
//! it alone, so no agreement is needed. MPI_Psend_init sends a 24-byte *setup* message on the
//! shadow's point-to-point context with the user's tag: the sender's partition count, its
//! total bytes and a *base tag*, the first of a range of tags the sender takes from its own
//! counter for that shadow. MPI_Precv_init posts the receive of that setup message; so the
//! initialisation calls match in the order they are made, as the standard says, and ordinary
//! messages with the same tag never meet them.
//!
//! **Partitions travel as they become ready.** Each MPI_Pready posts one ordinary send of that
//! partition on the shadow's second (collective) context with tag `base + i`: the packet
//! strategy aggregates it with the other ready partitions and messages to that peer (several
//! partitions made ready by one MPI_Pready_range or MPI_Pready_list leave in one flush), and
//! large partitions take the rendezvous as any large message does. The receiver, once it has
//! the setup message, posts one receive per *sender* partition (tag `base + j`, straight into
//! its buffer when the receive layout is contiguous, else into a scratch buffer unpacked on
//! arrival); so the two sides may cut the buffer into different partition counts, as long as
//! the total sizes agree (as in MPICH). A receive partition has arrived (MPI_Parrived) when
//! every sender partition that overlaps it has. The setup travels once: later rounds reuse the
//! tags, which stay ordered per (source, context, tag).
//!
//! This module never touches C handles; the engine sees only ordinary sends and receives.

use std::collections::HashMap;
use std::sync::Arc;

use madmpi_datatypes::{Basic, Datatype};
use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::engine::{Comm, Schedule, State, CTX_LIMIT};
use crate::error::{err, Error, ErrorClass, Result};
use crate::request::{Persistent, RequestId, SendMode, Status};
use crate::{CommId, PROC_NULL, TAG_UB};

mod api;
pub use api::*;

/// The state of one partitioned request, shared by its persistent request, the schedule of its
/// current round and the MPI_Pready/MPI_Parrived calls.
pub(crate) type Shared = Arc<Mutex<Part>>;

/// Bytes of the setup message.
const SETUP_LEN: usize = 24;

/// One partitioned send or receive.
pub(crate) struct Part {
    send: bool,
    /// The user's buffer (read-only for a send).
    buf: *mut u8,
    parts: usize,
    /// Elements per partition.
    count: usize,
    dt: Datatype,
    /// Destination or source rank (may be MPI_PROC_NULL).
    peer: i32,
    tag: i32,
    shadow: CommId,
    /// Bytes of the whole operation.
    total: u64,
    /// The setup message (sent, or being received); kept until its send completes.
    setup: Box<[u8; SETUP_LEN]>,
    setup_req: Option<RequestId>,
    /// A round is running (between MPI_Start and its completion).
    active: bool,
    /// Sender: the first tag of this operation's range.
    base: i32,
    /// Sender: MPI_Pready was called for partition i this round.
    ready: Vec<bool>,
    /// Per transfer (sender: own partitions; receiver: the sender's), the request in flight.
    reqs: Vec<Option<RequestId>>,
    /// Per transfer: completed this round.
    done: Vec<bool>,
    /// Receiver: what the setup message said, once it came.
    plan: Option<Plan>,
    /// Receiver: the receives of this round are posted.
    posted: bool,
    /// Receiver: scratch buffers of sender partitions (non-contiguous layout or a size
    /// mismatch).
    scratch: Vec<Vec<u8>>,
    /// The first error of this round.
    error: Option<ErrorClass>,
}

// SAFETY: the raw pointer is the user's buffer, valid while the request is active (the MPI
// rule stated in `request`); the state is only touched under the engine lock.
unsafe impl Send for Part {}

impl Drop for Part {
    fn drop(&mut self) {
        if self.setup_req.is_some() {
            // The setup send may still reference its bytes (queued on a busy gate): keep them.
            std::mem::forget(std::mem::replace(&mut self.setup, Box::new([0; SETUP_LEN])));
        }
    }
}

/// What the receiver learnt from the sender's setup message.
#[derive(Clone, Copy)]
struct Plan {
    base: i32,
    /// Sender partitions.
    sparts: usize,
    /// Bytes per sender partition.
    sbytes: usize,
    /// The sender's total differs from ours: the data is drained and the round fails.
    mismatch: bool,
    /// The receive layout is contiguous: bytes land at `buf + off`.
    direct: Option<isize>,
}

/// The shadow communicator of each communicator context (see the module documentation).
static SHADOWS: Lazy<Mutex<HashMap<u32, CommId>>> = Lazy::new(|| Mutex::new(HashMap::new()));
/// The next base tag per shadow context (this process as a sender).
static NEXT_BASE: Lazy<Mutex<HashMap<u32, i32>>> = Lazy::new(|| Mutex::new(HashMap::new()));

fn bytes_type() -> Datatype {
    Datatype::basic(Basic::Byte)
}

/// The shadow of `comm`, made when first needed (again when the context was reused by a
/// communicator with other groups).
fn shadow(st: &mut State, comm: CommId) -> Result<CommId> {
    let c = st.comm(comm)?;
    let (ctx, rank, size, world, remote) =
        (c.ctx, c.rank, c.size, c.world.clone(), c.remote.clone());
    let mut m = SHADOWS.lock();
    if let Some(&s) = m.get(&ctx) {
        if let Ok(sc) = st.comm(s) {
            if sc.ctx == ctx + CTX_LIMIT && sc.world == world && sc.remote == remote {
                return Ok(s);
            }
        }
        let _ = st.remove_comm(s);
    }
    let s = st.add_comm(Comm {
        ctx: ctx + CTX_LIMIT,
        rank,
        size,
        world,
        remote,
        // Partitions are never buffered sends.
        session: None,
    });
    m.insert(ctx, s);
    Ok(s)
}

/// Take `n` tags for a send on `shadow_ctx`.
fn take_base(shadow_ctx: u32, n: usize) -> Result<i32> {
    if n as u64 > TAG_UB as u64 {
        return err(
            ErrorClass::Arg,
            format!("{n} partitions: at most {TAG_UB} are possible"),
        );
    }
    let mut m = NEXT_BASE.lock();
    let next = m.entry(shadow_ctx).or_insert(0);
    let mut base = *next;
    if base as u64 + n as u64 > TAG_UB as u64 {
        base = 0;
    }
    *next = ((base as u64 + n as u64) % (TAG_UB as u64 + 1)) as i32;
    Ok(base)
}

/// The checks and the state common to both sides.
#[allow(clippy::too_many_arguments)]
fn new_part(
    st: &mut State,
    send: bool,
    buf: *mut u8,
    parts: usize,
    count: usize,
    dt: &Datatype,
    peer: i32,
    tag: i32,
    comm: CommId,
) -> Result<Part> {
    if parts == 0 {
        return err(ErrorClass::Arg, "the number of partitions must be positive");
    }
    st.check_args(comm, peer, tag, dt, false)?;
    let total = (parts as u64)
        .checked_mul(count as u64)
        .and_then(|n| n.checked_mul(dt.size() as u64))
        .ok_or_else(|| Error::new(ErrorClass::Count, "the partitioned buffer overflows"))?;
    let shadow = shadow(st, comm)?;
    Ok(Part {
        send,
        buf,
        parts,
        count,
        dt: dt.clone(),
        peer,
        tag,
        shadow,
        total,
        setup: Box::new([0; SETUP_LEN]),
        setup_req: None,
        active: false,
        base: 0,
        ready: vec![false; if send { parts } else { 0 }],
        reqs: Vec::new(),
        done: Vec::new(),
        plan: None,
        posted: false,
        scratch: Vec::new(),
        error: None,
    })
}

impl State {
    /// MPI_Psend_init: the setup message leaves now.
    ///
    /// # Safety
    /// `buf` must hold `parts * count` elements of `dt` while the request is active.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn psend_init(
        &mut self,
        buf: *const u8,
        parts: usize,
        count: usize,
        dt: &Datatype,
        dest: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<RequestId> {
        let mut p = new_part(
            self,
            true,
            buf as *mut u8,
            parts,
            count,
            dt,
            dest,
            tag,
            comm,
        )?;
        if dest != PROC_NULL {
            let sctx = self.comm(p.shadow)?.ctx;
            p.base = take_base(sctx, parts)?;
            p.setup[0..4].copy_from_slice(&(p.base as u32).to_le_bytes());
            p.setup[4..8].copy_from_slice(&(parts as u32).to_le_bytes());
            p.setup[8..16].copy_from_slice(&p.total.to_le_bytes());
            p.setup[16..24].copy_from_slice(&(parts as u64).to_le_bytes());
            let ptr = p.setup.as_ptr();
            // SAFETY: the setup bytes live in a box the request keeps (or leaks) until the
            // send completes.
            let r = unsafe {
                self.isend(
                    ptr,
                    SETUP_LEN,
                    &bytes_type(),
                    dest,
                    tag,
                    p.shadow,
                    SendMode::Standard,
                    false,
                )?
            };
            p.setup_req = Some(r);
        }
        self.persistent(Persistent::Part(Arc::new(Mutex::new(p))))
    }

    /// MPI_Precv_init: the receive of the setup message is posted now.
    ///
    /// # Safety
    /// As [`State::psend_init`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn precv_init(
        &mut self,
        buf: *mut u8,
        parts: usize,
        count: usize,
        dt: &Datatype,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<RequestId> {
        if src == crate::ANY_SOURCE {
            return err(
                ErrorClass::Rank,
                "MPI_ANY_SOURCE is not allowed in a partitioned receive",
            );
        }
        if tag == crate::ANY_TAG {
            return err(
                ErrorClass::Tag,
                "MPI_ANY_TAG is not allowed in a partitioned receive",
            );
        }
        let mut p = new_part(self, false, buf, parts, count, dt, src, tag, comm)?;
        if src != PROC_NULL {
            let ptr = p.setup.as_mut_ptr();
            // SAFETY: as in `psend_init`.
            let r =
                unsafe { self.irecv(ptr, SETUP_LEN, &bytes_type(), src, tag, p.shadow, false)? };
            p.setup_req = Some(r);
        }
        self.persistent(Persistent::Part(Arc::new(Mutex::new(p))))
    }
}

/// MPI_Start of a partitioned request: a new round, as a schedule.
pub(crate) fn round(st: &mut State, shared: &Shared) -> Result<Box<dyn Schedule>> {
    {
        let mut p = shared.lock();
        p.active = true;
        p.error = None;
        p.posted = false;
        if p.send {
            p.ready.iter_mut().for_each(|r| *r = false);
            let n = p.parts;
            p.reqs = vec![None; n];
            p.done = vec![false; n];
        }
        p.advance(st);
    }
    Ok(Box::new(Round(shared.clone())))
}

/// The schedule of one round.
struct Round(Shared);

impl Schedule for Round {
    fn advance(&mut self, st: &mut State) -> Result<bool> {
        let mut p = self.0.lock();
        let over = p.advance(st);
        if over {
            p.active = false;
            if let Some(e) = p.error {
                return Err(Error::new(e, "partitioned communication failed"));
            }
        }
        Ok(over)
    }

    fn status(&self) -> Option<Status> {
        let p = self.0.lock();
        if p.send {
            return None;
        }
        let bytes = if p.peer == PROC_NULL { 0 } else { p.total };
        Some(Status {
            source: p.peer,
            tag: if p.peer == PROC_NULL {
                crate::ANY_TAG
            } else {
                p.tag
            },
            error: None,
            bytes,
            msg_len: bytes,
            cancelled: false,
        })
    }
}

/// Whether request `r` is complete; it is then freed, and its error returned.
fn finished(st: &mut State, r: RequestId) -> Option<Option<ErrorClass>> {
    let req = st.reqs.get(r)?;
    if !req.complete {
        return None;
    }
    let e = req.status.error;
    st.reqs.free(r);
    Some(e)
}

impl Part {
    /// Look at what completed and post what can be posted: whether the round is over.
    fn advance(&mut self, st: &mut State) -> bool {
        if let Some(r) = self.setup_req {
            if let Some(e) = finished(st, r) {
                self.setup_req = None;
                if !self.send {
                    self.read_setup(e);
                } else if e.is_some() {
                    self.error = self.error.or(e);
                }
            }
        }
        if !self.active {
            return false;
        }
        if self.peer == PROC_NULL {
            return !self.send || self.ready.iter().all(|&r| r);
        }
        if !self.send && !self.posted {
            if self.plan.is_none() {
                return false;
            }
            if let Err(e) = self.post_receives(st) {
                self.error = self.error.or(Some(e.class));
                return true;
            }
        }
        for i in 0..self.reqs.len() {
            let Some(r) = self.reqs[i] else { continue };
            if let Some(e) = finished(st, r) {
                self.reqs[i] = None;
                self.done[i] = true;
                if e.is_some() {
                    self.error = self.error.or(e);
                }
                self.arrived(i);
            }
        }
        self.done.iter().all(|&d| d) && (!self.send || self.ready.iter().all(|&r| r))
    }

    /// The receiver got the setup message (or failed to).
    fn read_setup(&mut self, e: Option<ErrorClass>) {
        if e.is_some() {
            self.error = self.error.or(e);
            return;
        }
        let s = &self.setup;
        let word = |a: usize| u32::from_le_bytes(s[a..a + 4].try_into().unwrap_or_default());
        let base = word(0) as i32;
        let sparts = word(4) as usize;
        let stotal = u64::from_le_bytes(s[8..16].try_into().unwrap_or_default());
        let sparts = sparts.max(1);
        let mismatch = stotal != self.total || stotal % sparts as u64 != 0;
        let sbytes = (stotal / sparts as u64) as usize;
        let direct = if mismatch {
            None
        } else {
            self.dt
                .contiguous_span(self.parts * self.count)
                .map(|(off, _)| off)
        };
        self.plan = Some(Plan {
            base,
            sparts,
            sbytes,
            mismatch,
            direct,
        });
    }

    /// Post this round's receive of every sender partition.
    fn post_receives(&mut self, st: &mut State) -> Result<()> {
        let plan = self.plan.expect("checked by the caller");
        let n = plan.sparts;
        self.reqs = vec![None; n];
        self.done = vec![false; n];
        if plan.direct.is_none() && self.scratch.len() != n {
            self.scratch = (0..n).map(|_| vec![0u8; plan.sbytes]).collect();
        }
        for j in 0..n {
            let ptr = match plan.direct {
                Some(off) => self.buf.wrapping_offset(off).wrapping_add(j * plan.sbytes),
                None => self.scratch[j].as_mut_ptr(),
            };
            let tag = plan.base.wrapping_add(j as i32);
            // SAFETY: the user's buffer is valid while the request is active; the scratch
            // buffers live in this state, which the request keeps.
            let r = unsafe {
                st.irecv(
                    ptr,
                    plan.sbytes,
                    &bytes_type(),
                    self.peer,
                    tag,
                    self.shadow,
                    true,
                )?
            };
            self.reqs[j] = Some(r);
        }
        self.posted = true;
        if plan.mismatch {
            self.error = Some(ErrorClass::Truncate);
        }
        Ok(())
    }

    /// Transfer `i` completed: a sender partition received into scratch space is unpacked.
    fn arrived(&mut self, i: usize) {
        if self.send {
            return;
        }
        let Some(plan) = self.plan else { return };
        if plan.direct.is_some() || plan.mismatch {
            return;
        }
        if let Some(data) = self.scratch.get(i) {
            // SAFETY: the user's buffer holds `parts * count` elements of the type while the
            // request is active; the offset is inside its packed size (totals agree).
            unsafe {
                self.dt
                    .unpack(self.buf, self.parts * self.count, i * plan.sbytes, data);
            }
        }
    }

    /// MPI_Pready of partition `i`: its send leaves.
    fn ready(&mut self, st: &mut State, i: usize) -> Result<()> {
        if self.ready[i] {
            return err(
                ErrorClass::Arg,
                format!("partition {i} was already marked ready in this round"),
            );
        }
        self.ready[i] = true;
        if self.peer == PROC_NULL {
            self.done[i] = true;
            return Ok(());
        }
        let ext = self.dt.extent();
        let ptr = self
            .buf
            .wrapping_offset(ext.wrapping_mul((i * self.count) as isize));
        // SAFETY: the user's buffer is valid while the request is active.
        let r = unsafe {
            st.isend(
                ptr,
                self.count,
                &self.dt,
                self.peer,
                self.base.wrapping_add(i as i32),
                self.shadow,
                SendMode::Standard,
                true,
            )?
        };
        self.reqs[i] = Some(r);
        Ok(())
    }

    /// Whether receive partition `i` has arrived.
    fn has_arrived(&self, i: usize) -> Result<bool> {
        if self.peer == PROC_NULL {
            return Ok(true);
        }
        let Some(plan) = self.plan else {
            return Ok(false);
        };
        if !self.posted {
            return Ok(false);
        }
        if plan.mismatch {
            return err(
                ErrorClass::Truncate,
                "the partitioned send and receive have different total sizes",
            );
        }
        let rbytes = self.total as usize / self.parts;
        // The sender partitions that carry receive partition `i`: by bytes; with no bytes at
        // all (the totals agree, so both are empty), by position, so that an empty partition
        // still arrives only once the sender made its counterpart ready.
        let (first, last) = if rbytes == 0 || plan.sbytes == 0 {
            (
                i * plan.sparts / self.parts,
                ((i + 1) * plan.sparts).div_ceil(self.parts).max(1) - 1,
            )
        } else {
            (
                i * rbytes / plan.sbytes,
                ((i + 1) * rbytes - 1) / plan.sbytes,
            )
        };
        Ok((first..=last.min(plan.sparts - 1)).all(|j| self.done[j]))
    }
}
