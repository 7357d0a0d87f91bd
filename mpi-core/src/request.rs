//! Requests: the state of every operation in flight, in a generation-checked slab.
//!
//! A request that holds a raw user buffer relies on the MPI rule that **the buffer stays valid
//! and untouched until the request completes**: that rule is what makes the raw pointers in
//! [`SendOp`] and [`RecvTarget`] sound; it is stated here once.

use madmpi_datatypes::Datatype;

use crate::error::ErrorClass;
use crate::CommId;

/// An opaque request handle: slot index and generation, so a stale handle is detected.
///
/// Generations count modulo [`RequestId::GENERATIONS`], so that a binding can carry a request
/// id in a small handle (the C layer's `MPI_Request` is the index and the generation, with no
/// table of its own); a handle is then taken for a live one only when its slot has been reused
/// a multiple of 64 times since.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestId(pub u64);

impl RequestId {
    /// Generations a slot cycles through.
    pub const GENERATIONS: u32 = 64;

    /// The id of slot `index` at generation `gen` (below [`RequestId::GENERATIONS`]).
    #[inline]
    pub fn new(index: u32, gen: u32) -> RequestId {
        RequestId(((gen as u64) << 32) | index as u64)
    }
    /// A standard-mode send complete when posted: its message copied whole into the packet
    /// the send fast path is building (`State::pack_routed`), nothing left to do for it. It
    /// has no record in the request table, and all such sends share this id (as MPICH's
    /// built-in completed request): waiting for it or testing it completes it at once with the
    /// empty status (its `freed` true), MPI_Request_get_status finds it complete, freeing it
    /// does nothing, and MPI_Cancel leaves it alone (the communication completes; MPI-4.1
    /// §3.8.4 lets a cancel fail so), so MPI_Test_cancelled reports false. Every other use
    /// (MPI_Start, ...) reports an invalid request. No slot has this index or generation, and
    /// no message carries it as its sender's request but those packed sends, so no cancel or
    /// acknowledgement ever names it.
    pub const COMPLETE: RequestId = RequestId(u64::MAX);

    /// The slot: ids alive at once have distinct slots, numbered densely from 0.
    #[inline]
    pub fn index(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }
    /// The generation of the slot this id names.
    #[inline]
    pub fn gen(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// The outcome of a receive (or of a send, with fewer fields meaningful).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// Aligned to 16 bytes: a request is built with its status from constants and copied into its
// slot; with the status at an 8-byte offset the compiler's 16-byte copies each straddled two of
// its own 16-byte constant stores, which cannot be forwarded (a stall on every MPI_Isend).
#[repr(align(16))]
pub struct Status {
    /// Source rank in the communicator (MPI_PROC_NULL for a null operation).
    pub source: i32,
    /// Tag of the message.
    pub tag: i32,
    /// Error of this operation, if any (e.g. truncation).
    pub error: Option<ErrorClass>,
    /// Bytes received.
    pub bytes: u64,
    /// Bytes the sender sent (more than `bytes` when the message was truncated).
    pub msg_len: u64,
    /// The operation was cancelled.
    pub cancelled: bool,
}

/// The standard's "empty" status: source MPI_ANY_SOURCE, tag MPI_ANY_TAG, no error, count 0.
pub const EMPTY_STATUS: Status = Status {
    source: crate::ANY_SOURCE,
    tag: crate::ANY_TAG,
    error: None,
    bytes: 0,
    msg_len: 0,
    cancelled: false,
};

/// The status of an operation on MPI_PROC_NULL.
pub const PROC_NULL_STATUS: Status = Status {
    source: crate::PROC_NULL,
    tag: crate::ANY_TAG,
    error: None,
    bytes: 0,
    msg_len: 0,
    cancelled: false,
};

/// Send modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// MPI_Send: eager below the threshold, rendezvous above.
    Standard,
    /// MPI_Ssend: completes once the receiver has matched the message.
    Synchronous,
    /// MPI_Rsend: the receive is known to be posted (treated as standard).
    Ready,
    /// MPI_Bsend: copied into the attached buffer, completes at once.
    Buffered,
}

/// Where received bytes go: the packed stream of the message, byte `off` of which lands either
/// at `ptr + off` (contiguous layout) or where the receive datatype puts it.
pub(crate) struct RecvTarget {
    /// Start of the data when the layout is contiguous.
    pub ptr: *mut u8,
    /// Bytes the receive can hold (`count * size`).
    pub cap: usize,
    /// For a non-contiguous layout: user buffer, datatype and count (boxed: rare, and it keeps
    /// every request small).
    pub layout: Option<Box<(*mut u8, Datatype, usize)>>,
}

impl RecvTarget {
    /// Write bytes `[off, off + data.len())` of the packed stream into place, clipped to the
    /// capacity (truncation). Returns the bytes written.
    ///
    /// # Safety
    /// The receive buffer must be valid (it is, until the request completes).
    pub unsafe fn write_at(&self, off: usize, data: &[u8]) -> usize {
        if off >= self.cap {
            return 0;
        }
        let n = data.len().min(self.cap - off);
        match self.layout.as_deref() {
            None => madmpi_transports::copy_bytes(data.as_ptr(), self.ptr.add(off), n),
            Some((buf, dt, count)) => {
                dt.unpack(*buf, *count, off, &data[..n]);
            }
        }
        n
    }

    /// The memory of bytes `[off, off + len)` of the packed stream (the caller clips to `cap`).
    ///
    /// # Safety
    /// As [`RecvTarget::write_at`]; the slices alias the user buffer and must not outlive the
    /// request.
    pub unsafe fn iovecs<'a>(&self, off: usize, len: usize) -> Vec<std::io::IoSliceMut<'a>> {
        match self.layout.as_deref() {
            None => vec![std::io::IoSliceMut::new(std::slice::from_raw_parts_mut(
                self.ptr.add(off),
                len,
            ))],
            Some((buf, dt, count)) => dt
                .segments(*count, off..off + len)
                .map(|(o, l)| {
                    std::io::IoSliceMut::new(std::slice::from_raw_parts_mut(buf.offset(o), l))
                })
                .collect(),
        }
    }
}

/// A send in flight.
pub(crate) struct SendOp {
    /// Destination world rank.
    pub peer: u32,
    /// The header chunk (Eager or Rts) is still queued on the gate (cancellable locally).
    pub queued: bool,
    /// Completion waits for a receiver answer (SyncAck or Fin).
    pub await_ack: bool,
    /// Whether fragments have been scheduled (after a Cts).
    pub fragmenting: bool,
    /// A CancelReq was sent; waiting for the CancelAck.
    pub cancel_wait: bool,
    /// Contiguous bytes to send (user buffer, `staging`, or the attached bsend buffer).
    pub ptr: *const u8,
    /// Bytes to send.
    pub len: usize,
    /// Bytes of Data fragments handed to the transport (rendezvous without `get`).
    pub frag_sent: usize,
    /// What only some sends have (boxed: a plain send's request stays small).
    pub extra: Option<Box<SendExtra>>,
}

/// The parts of a send that only packed, zero-copy or buffered sends have.
#[derive(Default)]
pub(crate) struct SendExtra {
    /// Packed copy for non-contiguous datatypes, or the piece table of a zero-copy rendezvous.
    pub staging: Option<Vec<u8>>,
    /// Zero-copy rendezvous of a non-contiguous datatype: buffer, type, count (packed only if
    /// the receiver asks for fragments).
    pub layout: Option<(*const u8, Datatype, usize)>,
    /// The buffer (its id) and the offset in it of a buffered send's reservation.
    pub bsend: Option<(usize, usize)>,
    /// The key of the driver's registration of the message (the payload of its RTS, filled in
    /// before the RTS leaves: `FLAG_KEY`).
    pub key: [u8; 8],
    /// The driver that registered the message and the key, to deregister it at completion.
    pub registered: Option<(u8, u64)>,
}

impl SendOp {
    /// A send of `len` contiguous bytes at `ptr` to world rank `peer`, nothing queued or
    /// awaited yet.
    #[inline]
    pub fn new(peer: u32, ptr: *const u8, len: usize) -> SendOp {
        SendOp {
            peer,
            queued: false,
            await_ack: false,
            fragmenting: false,
            cancel_wait: false,
            ptr,
            len,
            frag_sent: 0,
            extra: None,
        }
    }

    /// The extra parts, made when first needed.
    pub fn extra_mut(&mut self) -> &mut SendExtra {
        self.extra.get_or_insert_with(Box::default)
    }

    /// The buffer reservation of a buffered send (buffer id, offset).
    pub fn bsend(&self) -> Option<(usize, usize)> {
        self.extra.as_ref().and_then(|x| x.bsend)
    }
}

/// A receive in flight.
pub(crate) struct RecvOp {
    /// Context the receive matches in.
    pub ctx: u32,
    /// Destination.
    pub target: RecvTarget,
    /// Message length announced by the sender (rendezvous), bytes received so far.
    pub msg_len: u64,
    pub got: u64,
    /// Still in the posted queue (not matched).
    pub posted: bool,
    /// The world rank of the matched sender.
    pub peer: Option<u32>,
}

/// What to re-create on MPI_Start.
#[derive(Clone)]
pub(crate) enum Persistent {
    Send {
        buf: *const u8,
        count: usize,
        dt: Datatype,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
    },
    Recv {
        buf: *mut u8,
        count: usize,
        dt: Datatype,
        src: i32,
        tag: i32,
        comm: CommId,
    },
    /// A persistent collective (MPI_Bcast_init …): its schedule, built anew at each start.
    Coll(MakeSched),
    /// A partitioned send or receive (`crate::part`): its state, shared with MPI_Pready and
    /// MPI_Parrived; each start runs one round of it as a schedule.
    Part(crate::part::Shared),
}

/// Builds the schedule of a persistent collective (at each MPI_Start).
pub(crate) type MakeSched = std::sync::Arc<
    dyn Fn(&mut crate::engine::State) -> crate::error::Result<Box<dyn crate::engine::Schedule>>
        + Send
        + Sync,
>;

pub(crate) enum Op {
    /// Nothing in flight (completed at creation, or inactive persistent).
    None,
    /// A multi-step operation (a non-blocking collective) advanced by the progress engine.
    Sched(Box<dyn crate::engine::Schedule>),
    Send(SendOp),
    Recv(RecvOp),
}

pub(crate) struct Request {
    pub op: Op,
    pub complete: bool,
    /// Active (a started persistent request, or any non-persistent one).
    pub active: bool,
    pub status: Status,
    pub persistent: Option<Box<Persistent>>,
    /// MPI_Request_free was called (or the request is internal): free at completion.
    pub detached: bool,
}

impl Request {
    /// Whether dropping this request frees nothing (no box, buffer or datatype held).
    #[inline(always)]
    fn owns_nothing(&self) -> bool {
        if self.persistent.is_some() {
            return false;
        }
        // The receive inline, the other kinds out of line (one compare instead of a jump
        // through a table of the kinds).
        match &self.op {
            Op::Recv(rv) => rv.target.layout.is_none(),
            op => op_owns_nothing(op),
        }
    }

    /// A request complete from the start (its operation needs nothing more).
    #[inline(always)]
    pub fn done(op: Op) -> Request {
        Request {
            complete: true,
            ..Request::new(op)
        }
    }

    #[inline(always)]
    pub fn new(op: Op) -> Request {
        Request {
            op,
            complete: false,
            active: true,
            status: EMPTY_STATUS,
            persistent: None,
            detached: false,
        }
    }
}

/// [`Request::owns_nothing`] of an operation that is not a receive.
#[inline(never)]
fn op_owns_nothing(op: &Op) -> bool {
    match op {
        Op::None => true,
        Op::Send(s) => s.extra.is_none(),
        Op::Recv(rv) => rv.target.layout.is_none(),
        Op::Sched(_) => false,
    }
}

/// Generation-checked slab of requests.
#[derive(Default)]
pub(crate) struct Slab {
    slots: Vec<(u32, Option<Request>)>,
    free: Vec<u32>,
    live: usize,
}

impl Slab {
    /// [`Slab::insert`] of the request `f` makes, built straight in its slot when one is free.
    #[inline(always)]
    pub fn insert_with(&mut self, f: impl FnOnce() -> Request) -> RequestId {
        self.live += 1;
        if let Some(i) = self.free.pop() {
            // SAFETY: the free list holds only indices of existing slots (slots are never
            // removed).
            let slot = unsafe { self.slots.get_unchecked_mut(i as usize) };
            slot.0 = (slot.0 + 1) % RequestId::GENERATIONS;
            debug_assert!(slot.1.is_none(), "a free slot is empty");
            // SAFETY: a slot on the free list holds `None`: nothing to drop, so the request is
            // written in place without the drop check of an assignment.
            unsafe { std::ptr::write(&mut slot.1, Some(f())) };
            RequestId::new(i, slot.0)
        } else {
            let i = self.slots.len() as u32;
            self.slots.push((1, Some(f())));
            RequestId::new(i, 1)
        }
    }

    /// The id the next [`Slab::insert_with`] will return (if nothing else is inserted or freed
    /// meanwhile).
    #[inline(always)]
    pub fn next_id(&self) -> RequestId {
        match self.free.last() {
            Some(&i) => RequestId::new(i, (self.slots[i as usize].0 + 1) % RequestId::GENERATIONS),
            None => RequestId::new(self.slots.len() as u32, 1),
        }
    }

    #[inline(always)]
    pub fn insert(&mut self, r: Request) -> RequestId {
        self.insert_with(|| r)
    }

    #[inline]
    pub fn get(&self, id: RequestId) -> Option<&Request> {
        match self.slots.get(id.index()) {
            Some((g, Some(r))) if *g == id.gen() => Some(r),
            _ => None,
        }
    }

    #[inline]
    pub fn get_mut(&mut self, id: RequestId) -> Option<&mut Request> {
        match self.slots.get_mut(id.index()) {
            Some((g, Some(r))) if *g == id.gen() => Some(r),
            _ => None,
        }
    }

    /// Free the request `id` (dropped in place), if it exists.
    #[inline(always)]
    pub fn free(&mut self, id: RequestId) {
        if let Some((g, Some(_))) = self.slots.get(id.index()) {
            if *g == id.gen() {
                // SAFETY: the slot exists and holds a request.
                unsafe { self.vacate(id.index()) };
            }
        }
    }

    /// Empty slot `i`, whose request the caller has just found live: [`Slab::free`] without
    /// its lookup.
    ///
    /// # Safety
    /// Slot `i` exists and holds a request.
    #[inline(always)]
    pub unsafe fn vacate(&mut self, i: usize) {
        // SAFETY: slot `i` exists (the caller's contract).
        let r = unsafe { &mut self.slots.get_unchecked_mut(i).1 };
        if r.as_ref().is_some_and(Request::owns_nothing) {
            // SAFETY: the request owns no memory (checked), so not running its drop code
            // leaks nothing; most requests are like this.
            unsafe { std::ptr::write(r, None) };
        } else {
            *r = None;
        }
        self.free.push(i as u32);
        self.live -= 1;
    }

    pub fn remove(&mut self, id: RequestId) -> Option<Request> {
        match self.slots.get_mut(id.index()) {
            Some((g, r @ Some(_))) if *g == id.gen() => {
                self.free.push(id.index() as u32);
                self.live -= 1;
                r.take()
            }
            _ => None,
        }
    }

    /// Requests alive.
    #[cfg(test)]
    pub fn live(&self) -> usize {
        self.live
    }

    /// Ids of the live requests for which `f` holds.
    pub fn ids_where(&self, f: impl Fn(&Request) -> bool) -> Vec<RequestId> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, (g, r))| {
                r.as_ref()
                    .filter(|r| f(r))
                    .map(|_| RequestId::new(i as u32, *g))
            })
            .collect()
    }

    /// Ids of the requests that are detached (internal or freed by the user) and not complete.
    pub fn detached_pending(&self) -> usize {
        self.slots
            .iter()
            .filter(|(_, r)| matches!(r, Some(r) if r.detached && !r.complete))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every request is created, moved into the slab and dropped on the per-message path: the
    /// rare parts of sends and receives are boxed so that a request stays small.
    #[test]
    fn requests_stay_small() {
        assert!(std::mem::size_of::<SendOp>() <= 40);
        assert!(std::mem::size_of::<RecvOp>() <= 56);
        // (112 since the status is 16-byte aligned: see `Status`.)
        assert!(std::mem::size_of::<Request>() <= 112);
    }

    #[test]
    fn stale_handles_are_rejected() {
        let mut s = Slab::default();
        let a = s.insert(Request::new(Op::None));
        assert!(s.get(a).is_some());
        assert!(s.remove(a).is_some());
        assert!(s.get(a).is_none());
        let b = s.insert(Request::new(Op::None));
        assert_eq!(a.index(), b.index());
        assert!(
            s.get(a).is_none(),
            "old generation must not alias the new request"
        );
        assert!(s.remove(a).is_none());
        assert_eq!(s.live(), 1);
    }

    /// `next_id` names the request the next insert makes: a new slot, or the last freed one
    /// at its next generation (wrapping).
    #[test]
    fn next_id_is_the_next_insert() {
        let mut s = Slab::default();
        for _ in 0..3 {
            let want = s.next_id();
            assert_eq!(s.insert(Request::new(Op::None)), want);
        }
        let ids: Vec<_> = (0..2 * RequestId::GENERATIONS)
            .map(|_| {
                let want = s.next_id();
                let got = s.insert(Request::new(Op::None));
                assert_eq!(got, want);
                s.free(got);
                got
            })
            .collect();
        assert!(
            ids.iter().all(|r| r.index() == 3),
            "the freed slot is reused"
        );
        assert!(
            ids.windows(2).all(|w| w[0] != w[1]),
            "each use a new generation"
        );
    }
}
