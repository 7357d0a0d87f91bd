//! The schedule of a collective: rounds of point-to-point transfers, each followed by local
//! steps (reductions, copies, arbitrary state changes), compiled once when the operation starts
//! and then walked by the progress engine (after libNBC's round model).
//!
//! A round posts all its transfers at once; when every one of them has completed, its local
//! steps run in order, and the next round starts. The builder [`B`] opens a new round by itself
//! when a transfer follows local steps, so an algorithm reads as "exchange, then combine";
//! [`B::fence`] separates transfers that depend on each other.
//!
//! Buffers: the user's (raw pointers, valid until the request completes by the MPI rule stated
//! in `request`) and scratch buffers the schedule owns ([`B::tmp`]), allocated at build time so
//! that their addresses never change. If the schedule fails while transfers are still posted,
//! its scratch buffers are leaked rather than freed under those transfers.

use madmpi_datatypes::{Basic, Datatype};

use crate::engine::{Schedule, State};
use crate::error::{err, Error, ErrorClass, Result};
use crate::op::{apply_packed, AlignedBuf, Op};
use crate::request::{RequestId, SendMode};
use crate::CommId;

use super::step_done;

/// The processes taking part in an algorithm: virtual ranks `0..size`, this process is `me`.
/// Virtual ranks map to ranks of `comm` (the identity unless a subset takes part).
#[derive(Clone, Debug)]
pub(crate) struct Team {
    pub comm: CommId,
    pub me: i32,
    pub size: i32,
    pub map: Option<std::sync::Arc<[i32]>>,
}

impl Team {
    /// The whole communicator (its local group).
    pub fn new(comm: CommId, me: i32, size: i32) -> Team {
        Team {
            comm,
            me,
            size,
            map: None,
        }
    }

    /// The rank in `comm` of virtual rank `v` (negative values, e.g. MPI_PROC_NULL, pass).
    #[inline]
    pub fn peer(&self, v: i32) -> i32 {
        match &self.map {
            Some(m) if v >= 0 => m[v as usize],
            _ => v,
        }
    }
}

/// What a local step may ask for next.
pub(crate) enum Flow {
    Next,
    /// Continue with round `k` (retry loops of context-id agreement).
    Jump(usize),
    /// Nothing to do yet: run this round's local steps again at the next progress poll (the
    /// step must be the first of its round: put a `fence` before it).
    Wait,
    /// Replace the next round with the rounds this builds (built only when taken: a path the
    /// schedule seldom takes costs nothing, its scratch buffers included), and go on with them.
    Splice(Build),
}

/// Builds rounds at run time (see [`Flow::Splice`]).
pub(crate) type Build = Box<dyn FnOnce(&mut B) + Send>;

/// A closure run as a local step, with the engine state.
pub(crate) type Call = Box<dyn FnMut(&mut State) -> Result<Flow> + Send>;

pub(crate) enum Local {
    /// `inout = in op inout` over `count` elements of the schedule's datatype (packed).
    Reduce {
        inb: *const u8,
        inout: *mut u8,
        count: usize,
    },
    /// `len` bytes.
    Copy {
        src: *const u8,
        dst: *mut u8,
        len: usize,
    },
    /// Elements in one layout to elements in another (same type signature).
    CopyTyped {
        src: *const u8,
        scount: usize,
        sdt: Datatype,
        dst: *mut u8,
        rcount: usize,
        rdt: Datatype,
    },
    /// `count` elements of `dt` at `src`, packed into `dst`.
    Pack {
        src: *const u8,
        count: usize,
        dt: Datatype,
        dst: *mut u8,
    },
    /// The `avail` packed bytes at `src` into `count` elements of `dt` at `dst`: as much as
    /// both have; more bytes than the elements hold is a truncation (after what fits).
    Unpack {
        src: *const u8,
        avail: usize,
        dst: *mut u8,
        count: usize,
        dt: Datatype,
    },
    Call(Call),
}

pub(crate) struct Xfer {
    send: bool,
    buf: *mut u8,
    count: usize,
    dt: Datatype,
    peer: i32,
    comm: CommId,
    /// Tag: the schedule's base tag plus `sub`, unless `user_tag` is set.
    sub: u16,
    /// A point-to-point transfer on the user's context with this tag (MPI_Intercomm_create).
    user_tag: Option<i32>,
}

#[derive(Default)]
pub(crate) struct Round {
    xfers: Vec<Xfer>,
    then: Vec<Local>,
}

/// The bytes datatype, for packed data.
pub(crate) fn bytes() -> Datatype {
    Datatype::basic(Basic::Byte)
}

/// Builds a schedule.
pub(crate) struct B {
    rounds: Vec<Round>,
    bufs: Vec<AlignedBuf>,
    /// Datatype and operation of the `Reduce` steps.
    pub op: Option<(Op, Datatype)>,
    /// Priority of a context-id agreement (parent context, tag), for `comm`.
    pub prio: Option<(u32, i32)>,
    /// Other processes may write into the scratch buffers (cross-memory attach) until the
    /// schedule completes: a failed schedule leaks them even with no transfer in flight.
    pub exposed: bool,
}

impl B {
    pub fn new() -> B {
        B {
            rounds: Vec::new(),
            bufs: Vec::new(),
            op: None,
            prio: None,
            exposed: false,
        }
    }

    /// A scratch buffer of `len` bytes, aligned for any type, owned by the schedule.
    pub fn tmp(&mut self, len: usize) -> *mut u8 {
        let mut b = AlignedBuf::new(len);
        let p = b.ptr();
        self.bufs.push(b);
        p
    }

    fn open(&mut self) -> &mut Round {
        if self.rounds.is_empty() {
            self.rounds.push(Round::default());
        }
        self.rounds.last_mut().expect("one round at least")
    }

    /// The next transfer starts a new round.
    pub fn fence(&mut self) {
        if self
            .rounds
            .last()
            .is_some_and(|r| !r.xfers.is_empty() || !r.then.is_empty())
        {
            self.rounds.push(Round::default());
        }
    }

    fn xfer(&mut self, x: Xfer) {
        if self.rounds.last().is_some_and(|r| !r.then.is_empty()) {
            self.rounds.push(Round::default());
        }
        self.open().xfers.push(x);
    }

    /// Send `count` elements of `dt` at `buf` to virtual rank `to` of `t`.
    pub fn send(&mut self, t: &Team, to: i32, buf: *const u8, count: usize, dt: &Datatype) {
        self.send_sub(t, to, buf, count, dt, 0)
    }

    /// [`B::send`] with a sub-tag (messages between one pair that could be confused).
    pub fn send_sub(
        &mut self,
        t: &Team,
        to: i32,
        buf: *const u8,
        count: usize,
        dt: &Datatype,
        sub: u16,
    ) {
        self.xfer(Xfer {
            send: true,
            buf: buf as *mut u8,
            count,
            dt: dt.clone(),
            peer: t.peer(to),
            comm: t.comm,
            sub,
            user_tag: None,
        })
    }

    /// Receive `count` elements of `dt` into `buf` from virtual rank `from` of `t`.
    pub fn recv(&mut self, t: &Team, from: i32, buf: *mut u8, count: usize, dt: &Datatype) {
        self.recv_sub(t, from, buf, count, dt, 0)
    }

    /// [`B::recv`] with a sub-tag.
    pub fn recv_sub(
        &mut self,
        t: &Team,
        from: i32,
        buf: *mut u8,
        count: usize,
        dt: &Datatype,
        sub: u16,
    ) {
        self.xfer(Xfer {
            send: false,
            buf,
            count,
            dt: dt.clone(),
            peer: t.peer(from),
            comm: t.comm,
            sub,
            user_tag: None,
        })
    }

    /// Send `len` packed bytes.
    pub fn send_bytes(&mut self, t: &Team, to: i32, buf: *const u8, len: usize) {
        self.send(t, to, buf, len, &bytes())
    }

    /// Receive `len` packed bytes.
    pub fn recv_bytes(&mut self, t: &Team, from: i32, buf: *mut u8, len: usize) {
        self.recv(t, from, buf, len, &bytes())
    }

    /// A transfer of bytes on the user's point-to-point context of `comm` (rank `peer`).
    pub fn user_xfer(
        &mut self,
        send: bool,
        comm: CommId,
        peer: i32,
        tag: i32,
        buf: *mut u8,
        len: usize,
    ) {
        self.xfer(Xfer {
            send,
            buf,
            count: len,
            dt: bytes(),
            peer,
            comm,
            sub: 0,
            user_tag: Some(tag),
        })
    }

    /// A local step, run once the transfers of the current round have completed.
    pub fn local(&mut self, l: Local) {
        self.open().then.push(l);
    }

    /// `inout = in op inout` over `count` elements (packed).
    pub fn reduce(&mut self, inb: *const u8, inout: *mut u8, count: usize) {
        if count > 0 && !std::ptr::eq(inb, inout) {
            self.local(Local::Reduce { inb, inout, count })
        }
    }

    /// Copy `len` bytes (nothing if the same place).
    pub fn copy(&mut self, src: *const u8, dst: *mut u8, len: usize) {
        if len > 0 && !std::ptr::eq(src, dst) {
            self.local(Local::Copy { src, dst, len })
        }
    }

    /// Pack `count` elements of `dt` at `src` into `dst`.
    pub fn pack(&mut self, src: *const u8, count: usize, dt: &Datatype, dst: *mut u8) {
        if count > 0 && dt.size() > 0 {
            self.local(Local::Pack {
                src,
                count,
                dt: dt.clone(),
                dst,
            })
        }
    }

    /// Unpack into `count` elements of `dt` at `dst`.
    pub fn unpack(&mut self, src: *const u8, dst: *mut u8, count: usize, dt: &Datatype) {
        self.unpack_from(src, count * dt.size(), dst, count, dt)
    }

    /// Unpack a block of `avail` packed bytes, which need not be the size of the `count`
    /// elements it goes to (a block whose size the senders chose): what fits, and
    /// MPI_ERR_TRUNCATE if it does not all fit.
    pub fn unpack_from(
        &mut self,
        src: *const u8,
        avail: usize,
        dst: *mut u8,
        count: usize,
        dt: &Datatype,
    ) {
        if avail > 0 || count * dt.size() > 0 {
            self.local(Local::Unpack {
                src,
                avail,
                dst,
                count,
                dt: dt.clone(),
            })
        }
    }

    /// Copy typed data between two layouts.
    pub fn copy_typed(
        &mut self,
        src: *const u8,
        scount: usize,
        sdt: &Datatype,
        dst: *mut u8,
        rcount: usize,
        rdt: &Datatype,
    ) {
        if scount * sdt.size() == 0 && rcount * rdt.size() == 0 {
            return;
        }
        self.local(Local::CopyTyped {
            src,
            scount,
            sdt: sdt.clone(),
            dst,
            rcount,
            rdt: rdt.clone(),
        })
    }

    /// Run `f` with the engine state.
    pub fn call(&mut self, f: impl FnMut(&mut State) -> Result<Flow> + Send + 'static) {
        self.local(Local::Call(Box::new(f)))
    }

    /// Index of the round the next local step would join (for [`Flow::Jump`]).
    pub fn round_index(&self) -> usize {
        self.rounds.len().saturating_sub(1)
    }

    /// The finished schedule, its transfers tagged with `tag + sub`.
    pub fn finish(self, tag: i32) -> Sched {
        Sched {
            rounds: self.rounds,
            bufs: self.bufs,
            op: self.op,
            tag,
            cur: 0,
            in_round: None,
            pending: Vec::new(),
            failed: None,
            finally: Vec::new(),
            on_error: None,
            exposed: self.exposed,
        }
    }
}

/// A compiled collective (see the module documentation).
pub(crate) struct Sched {
    rounds: Vec<Round>,
    bufs: Vec<AlignedBuf>,
    op: Option<(Op, Datatype)>,
    tag: i32,
    /// Next round to start.
    cur: usize,
    /// The round whose transfers are in flight (its local steps run when they are done).
    in_round: Option<usize>,
    pending: Vec<RequestId>,
    /// The first error of a transfer or a local step. The schedule still runs to its end
    /// (what it receives, sends on, and what it sends, others wait for): stopping would leave
    /// the peers waiting, and their later collectives out of step; it fails when it ends.
    failed: Option<Error>,
    /// Run once when the schedule is over, completed or failed.
    finally: Vec<Finally>,
    /// Run with the error if the schedule fails.
    on_error: Option<OnError>,
    /// See [`B::exposed`].
    exposed: bool,
}

/// Run with the error of a failed schedule.
type OnError = Box<dyn FnOnce(&Error) + Send>;

/// Where a failed schedule leaves its error (see [`Sched::reporting`]).
pub(crate) type ErrorSink = std::sync::Arc<parking_lot::Mutex<Option<Error>>>;

/// A step run when a schedule is over (see [`Sched::finally`]).
pub(crate) type Finally = Box<dyn FnOnce(&mut State) + Send>;

// SAFETY: the raw pointers are to user buffers (valid until the request completes, the MPI
// rule stated on `request`) and to the schedule's own scratch buffers; the schedule is only
// touched under the engine lock.
unsafe impl Send for Sched {}

impl Sched {
    /// Run `f` when the schedule is over, whether it completed or failed.
    pub fn finally(mut self, f: impl FnOnce(&mut State) + Send + 'static) -> Sched {
        self.finally.push(Box::new(f));
        self
    }

    /// Keep the error the schedule fails with in `sink` (its request only carries the class).
    pub fn reporting(self, sink: ErrorSink) -> Sched {
        self.finally_err(move |e| *sink.lock() = Some(e.clone()))
    }

    fn finally_err(mut self, f: impl FnOnce(&Error) + Send + 'static) -> Sched {
        self.on_error = Some(Box::new(f));
        self
    }

    /// Hold `c` while the schedule runs (`comm::hold` / `comm::release`).
    pub fn holding(self, c: CommId) -> Sched {
        crate::comm::hold(c);
        self.finally(move |st| crate::comm::release(st, c))
    }

    /// Fail: posted transfers (or, `exposed`, other processes) may still write into scratch
    /// buffers, so those are leaked (and the transfers free themselves when they complete);
    /// with none in flight, nothing can touch them any more and they are freed.
    fn abandon(&mut self, st: &mut State) {
        let in_flight = !self.pending.is_empty() || self.exposed;
        for id in self.pending.drain(..) {
            if let Some(r) = st.reqs.get_mut(id) {
                r.detached = true;
            }
        }
        let bufs = std::mem::take(&mut self.bufs);
        if in_flight {
            std::mem::forget(bufs);
        }
    }

    fn run_local(l: &mut Local, op: &Option<(Op, Datatype)>, st: &mut State) -> Result<Flow> {
        // SAFETY (all arms): the pointers were built by the algorithm for buffers of the sizes
        // used here: user buffers valid until completion, or the schedule's scratch buffers.
        unsafe {
            match l {
                Local::Reduce { inb, inout, count } => {
                    let Some((op, dt)) = op else {
                        return err(ErrorClass::Intern, "reduction step without an operation");
                    };
                    apply_packed(op, dt, *count, *inb, *inout)?;
                }
                Local::Copy { src, dst, len } => std::ptr::copy(*src, *dst, *len),
                Local::CopyTyped {
                    src,
                    scount,
                    sdt,
                    dst,
                    rcount,
                    rdt,
                } => copy_typed(*src, *scount, sdt, *dst, *rcount, rdt)?,
                Local::Pack {
                    src,
                    count,
                    dt,
                    dst,
                } => {
                    let n = *count * dt.size();
                    dt.pack(*src, *count, 0, std::slice::from_raw_parts_mut(*dst, n));
                }
                Local::Unpack {
                    src,
                    avail,
                    dst,
                    count,
                    dt,
                } => {
                    let n = *count * dt.size();
                    let m = n.min(*avail);
                    if m > 0 {
                        dt.unpack(*dst, *count, 0, std::slice::from_raw_parts(*src, m));
                    }
                    if *avail > n {
                        return err(
                            ErrorClass::Truncate,
                            format!(
                                "a block of {avail} bytes of the collective was longer than its \
                                 buffer of {n} bytes (counts or types differ between processes)"
                            ),
                        );
                    }
                }
                Local::Call(f) => return f(st),
            }
        }
        Ok(Flow::Next)
    }

    fn post(&mut self, st: &mut State, r: usize) -> Result<()> {
        let base = self.tag;
        for x in &self.rounds[r].xfers {
            let (tag, coll) = match x.user_tag {
                Some(t) => (t, false),
                None => (base | x.sub as i32, true),
            };
            // SAFETY: buffers as in run_local; they outlive the transfer (the schedule waits
            // for it, or leaks its scratch buffers when abandoning it).
            let id = unsafe {
                if x.send {
                    st.isend(
                        x.buf,
                        x.count,
                        &x.dt,
                        x.peer,
                        tag,
                        x.comm,
                        SendMode::Standard,
                        coll,
                    )?
                } else {
                    st.irecv(x.buf, x.count, &x.dt, x.peer, tag, x.comm, coll)?
                }
            };
            self.pending.push(id);
        }
        Ok(())
    }

    /// Keep `e` if it is the first error; a lost peer or an internal error ends the schedule
    /// at once (nothing more can be exchanged with any certainty).
    fn fail(&mut self, e: Error) -> Result<()> {
        if matches!(e.class, ErrorClass::ProcAborted | ErrorClass::Intern) {
            return Err(e);
        }
        self.failed.get_or_insert(e);
        Ok(())
    }

    fn step(&mut self, st: &mut State) -> Result<bool> {
        loop {
            let mut i = 0;
            while i < self.pending.len() {
                match step_done(st, self.pending[i]) {
                    Ok(None) => i += 1,
                    Ok(Some(_)) => {
                        self.pending.swap_remove(i);
                    }
                    // (step_done has freed the failed request.)
                    Err(e) => {
                        self.pending.swap_remove(i);
                        self.fail(e)?;
                    }
                }
            }
            if !self.pending.is_empty() {
                return Ok(false);
            }
            if let Some(r) = self.in_round.take() {
                let mut next = r + 1;
                let mut failed = None;
                let mut wait = false;
                let mut splice = None;
                let Sched { rounds, op, .. } = self;
                for l in rounds[r].then.iter_mut() {
                    match Sched::run_local(l, op, st) {
                        Ok(Flow::Jump(k)) => {
                            next = k;
                            break;
                        }
                        Ok(Flow::Splice(f)) => {
                            splice = Some(f);
                            break;
                        }
                        Ok(Flow::Wait) => {
                            wait = true;
                            break;
                        }
                        Ok(Flow::Next) => {}
                        Err(e) => {
                            failed.get_or_insert(e);
                        }
                    }
                }
                if let Some(f) = splice {
                    let mut nb = B::new();
                    f(&mut nb);
                    let end = (r + 2).min(self.rounds.len());
                    self.rounds.splice(r + 1..end, nb.rounds);
                    self.bufs.append(&mut nb.bufs);
                }
                if let Some(e) = failed {
                    self.fail(e)?;
                }
                if wait {
                    self.in_round = Some(r);
                    return Ok(false);
                }
                self.cur = next;
            }
            if self.cur >= self.rounds.len() {
                return match self.failed.take() {
                    Some(e) => Err(e),
                    None => Ok(true),
                };
            }
            let r = self.cur;
            self.in_round = Some(r);
            self.post(st, r)?;
        }
    }
}

impl Schedule for Sched {
    fn advance(&mut self, st: &mut State) -> Result<bool> {
        let res = self.step(st);
        if let Err(e) = &res {
            self.abandon(st);
            if let Some(f) = self.on_error.take() {
                f(e);
            }
        }
        if !matches!(res, Ok(false)) {
            for f in std::mem::take(&mut self.finally) {
                f(st);
            }
        }
        res
    }
}

/// Copy `scount` elements of `sdt` at `src` to `rcount` elements of `rdt` at `dst` (the type
/// signatures must agree; a longer source is a truncation).
///
/// # Safety
/// Both buffers must hold their elements.
pub(crate) unsafe fn copy_typed(
    src: *const u8,
    scount: usize,
    sdt: &Datatype,
    dst: *mut u8,
    rcount: usize,
    rdt: &Datatype,
) -> Result<()> {
    let n = scount * sdt.size();
    let cap = rcount * rdt.size();
    if n > cap {
        return Err(Error::new(
            ErrorClass::Truncate,
            format!("{n} bytes do not fit the {cap} bytes of the receive buffer"),
        ));
    }
    if n == 0 {
        return Ok(());
    }
    match (sdt.contiguous_span(scount), rdt.contiguous_span(rcount)) {
        (Some((so, _)), Some((ro, _))) => std::ptr::copy(src.offset(so), dst.offset(ro), n),
        (Some((so, _)), None) => {
            rdt.unpack(
                dst,
                rcount,
                0,
                std::slice::from_raw_parts(src.offset(so), n),
            );
        }
        (None, Some((ro, _))) => {
            sdt.pack(
                src,
                scount,
                0,
                std::slice::from_raw_parts_mut(dst.offset(ro), n),
            );
        }
        (None, None) => {
            let mut v = vec![0u8; n];
            sdt.pack(src, scount, 0, &mut v);
            rdt.unpack(dst, rcount, 0, &v);
        }
    }
    Ok(())
}
