//! The engine: gates, strategies, matching and the eager / rendezvous / synchronous protocols.
//!
//! Structure after NewMadeleine: an operation becomes a request plus chunks queued on the gate of
//! its peer (*collect*); when the gate's driver can take a packet, the strategy builds it from the
//! queued chunks (*schedule*); the driver moves it (*transfer*). Incoming packets are cut into
//! chunks and handled by [`State::handle_packet`], which only changes state and queues replies:
//! it never calls a driver. The few operations that need a driver after a packet was handled
//! (rendezvous `get`s) are queued in [`State::gets`] and run by [`Engine::progress`].
//!
//! This module never blocks and never sleeps; waiting lives in `api`.

use std::collections::VecDeque;
use std::sync::Arc;

use madmpi_datatypes::Datatype;
use madmpi_transports::{PeerId, Placement, RecvSink, SplitJob};

use crate::error::{err, Error, ErrorClass, Result};
use crate::request::{
    Op, Persistent, RecvOp, RecvTarget, Request, RequestId, SendExtra, SendMode, SendOp, Slab,
    Status, PROC_NULL_STATUS,
};
use crate::wire::{self, Chunks, Header, Kind, HDR_LEN};
use crate::{CommId, MessageId, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};

mod drive;
mod order;
pub(crate) mod rails;
pub(crate) mod strategy;

pub(crate) use rails::Drivers;
use rails::{DriverId, Rail, NO_DRIVER};
pub use strategy::Strategy;
use strategy::{Commit, PacketStrategy, Piece};

/// Bytes reserved per buffered message beyond its data (MPI_BSEND_OVERHEAD).
pub const BSEND_OVERHEAD: usize = 512;

/// A multi-step operation (a non-blocking collective) that the progress engine advances: it
/// posts its point-to-point steps on the state (on the communicator's collective context) and
/// watches them complete. `advance` must never block.
pub(crate) trait Schedule: Send {
    /// Start what can start and look at what finished: `Ok(true)` when the whole operation is
    /// complete; an error completes the request with that error.
    fn advance(&mut self, st: &mut State) -> Result<bool>;
}

/// What to do when a chunk has been handed to the driver.
#[derive(Clone, Copy)]
enum OnSent {
    Nothing,
    /// The Eager/Rts chunk of a send request.
    Send(RequestId),
    /// A Data fragment of a send request.
    Frag(RequestId),
}

/// The `kind` of the marker chunk that stands, in a gate's queue, for the records already
/// encoded into the gate's `packed` bytes (never on the wire as such: its records are).
pub(crate) const KIND_PACKED: u8 = 0;

/// Largest message `aggreg` copies into the packet being built when it is posted (beyond,
/// copying costs more than the queued chunk it saves).
const PACK_COPY_MAX: usize = 1024;

pub(crate) struct OutChunk {
    hdr: Header,
    ptr: *const u8,
    len: usize,
    sent: OnSent,
    /// A Data fragment gathered from a non-contiguous user buffer at `ptr`: bytes
    /// `hdr.msg_len..+len` of the packed stream of `count` elements of the type.
    gather: Option<(Datatype, usize)>,
}

impl OutChunk {
    /// The pieces of the user buffer a gathered fragment (`gather`) is made of, in order
    /// (none for another chunk).
    ///
    /// # Safety
    /// The send buffer is valid: the chunk's request has not completed.
    unsafe fn gathered(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let off = self.hdr.msg_len as usize;
        self.gather.iter().flat_map(move |(dt, count)| {
            dt.segments(*count, off..off + self.len)
                // SAFETY: the segment lies in the send buffer (caller).
                .map(move |(mem, len)| unsafe { raw_slice(self.ptr.wrapping_offset(mem), len) })
        })
    }
}

/// The per-peer gate: outgoing chunks waiting for the strategy, its rails, and protocol
/// parameters (those of the first rail, which carries every message chunk under the built-in
/// strategies).
pub(crate) struct Gate {
    /// The first rail's driver (`NO_DRIVER`: the peer is unreachable).
    driver: DriverId,
    /// The drivers that reach the peer, best first (`rails`).
    rails: Vec<Rail>,
    out: VecDeque<OutChunk>,
    /// The sequence number of the last message chunk (Eager, Rts) that left; queued chunks are
    /// numbered when they leave (a cancelled one leaves no gap).
    seq: u32,
    /// Largest message sent eagerly.
    eager_max: usize,
    /// Largest chunk payload (packet minus header).
    frag_max: usize,
    /// Largest packet `aggreg` builds (at most the driver's largest packet).
    aggreg_max: usize,
    /// A message of more than this many bytes travels in a packet of its own.
    solo_min: usize,
    max_iov: usize,
    /// Rendezvous data may be pulled with `get`.
    can_get: bool,
    /// This process may write into the peer's memory (to help a split copy): false once
    /// refused.
    can_put: bool,
    queued: bool,
    /// The peer has died: every operation involving it fails with MPI_ERR_PROC_ABORTED.
    dead: bool,
    /// Complete chunks (header, payload, padding) of small sends `aggreg` copied when they
    /// were posted; a `KIND_PACKED` marker holds their place in `out` (at most one, last).
    packed: Vec<u8>,
    /// The posted receive an eager message from this peer is being received into, straight
    /// from the driver (`RecvSink::place`); `placed` completes it.
    placing: Option<RequestId>,
    /// Sends to this peer whose RTS carried the start of the message and that wait for their
    /// Cts.
    prefixed: u32,
}

impl Gate {
    /// The send `s` to this peer will get no Cts for a start its RTS carried (the Cts came, or
    /// the send was cancelled): a rendezvous to this peer may carry a start again once none
    /// waits ([`Gate::prefixed`]). Nothing for a send whose RTS carried none, or that is
    /// already past its Cts.
    fn start_settled(&mut self, s: &SendOp) {
        if s.frag_sent > 0 && !s.fragmenting {
            self.prefixed = self.prefixed.saturating_sub(1);
        }
    }
}

/// Why `aggreg` did not copy a send into the packet it is building ([`State::pack_routed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NotPacked {
    /// The packet has no room left for it.
    Full,
    /// The send takes the general path.
    Other,
}

/// A message that arrived before its receive was posted (or taken by MPI_Mprobe).
pub(crate) struct Unexpected {
    src: i32,
    tag: i32,
    peer: u32,
    msg_len: u64,
    sreq: u64,
    sync: bool,
    body: UBody,
}

impl Unexpected {
    /// The message whose chunk header is `h`, from world rank `peer`, with `body`.
    fn of(peer: u32, h: &Header, body: UBody) -> Unexpected {
        Unexpected {
            src: h.src,
            tag: h.tag,
            peer,
            msg_len: h.msg_len,
            sreq: h.sreq,
            sync: h.flags & wire::FLAG_SYNC != 0,
            body,
        }
    }
}

enum UBody {
    Eager(Vec<u8>),
    /// `table`: the piece table of a zero-copy rendezvous of a sparse type (else the whole
    /// stream is at `addr`).
    Rts {
        addr: u64,
        table: Option<Vec<u8>>,
        /// The sender streams the data (`FLAG_STREAM`): there is nothing to pull.
        stream: bool,
        /// The start of the message, sent with the RTS (`FLAG_PREFIX`; else empty).
        prefix: Vec<u8>,
        /// How many bytes of the message the RTS carried (kept in `prefix`, or written by
        /// whoever delivers the RTS): the sender sends the rest.
        start: usize,
    },
}

#[derive(Default)]
struct MatchQ {
    posted: VecDeque<(i32, i32, RequestId)>,
    unexpected: VecDeque<Unexpected>,
}

impl MatchQ {
    /// Where the oldest posted receive that takes a message from `src` with `tag` is.
    #[inline(always)]
    fn find_posted(&self, src: i32, tag: i32) -> Option<usize> {
        // Usually the oldest one: look at it before searching.
        match self.posted.front() {
            Some(&(s, t, _)) if matches(s, t, src, tag) => Some(0),
            _ => self
                .posted
                .iter()
                .position(|&(s, t, _)| matches(s, t, src, tag)),
        }
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

/// A rendezvous receive whose data was asked for in pieces over several rails
/// ([`State::request_data`]): per rail of the sender's gate, the bytes asked for, those come
/// in, and when the last came (ns; 0: not yet).
struct SplitRecv {
    rid: RequestId,
    peer: u32,
    /// When the pieces were asked for.
    t0: u64,
    rails: Vec<(usize, usize, u64)>,
}

struct PendingGet {
    peer: u32,
    /// (stream offset, sender address, length) of each block to pull.
    ranges: Vec<(u64, u64, u64)>,
    rid: RequestId,
    sreq: u64,
}

/// A receiver's request for help with the split copy of our rendezvous send `sreq`
/// (`Kind::Help`): write chunks of it to `remote` in its memory.
struct HelpReq {
    peer: u32,
    sreq: u64,
    job: SplitJob,
    remote: u64,
}

/// The attached buffer of MPI_Buffer_attach and its first-fit allocator.
#[derive(Default)]
pub(crate) struct BsendBuffer {
    pub base: usize,
    pub size: usize,
    /// Allocated (offset, len), sorted by offset.
    used: Vec<(usize, usize)>,
}

impl BsendBuffer {
    fn alloc(&mut self, len: usize) -> Option<usize> {
        let mut at = 0usize;
        for (i, &(off, l)) in self.used.iter().enumerate() {
            if off - at >= len {
                self.used.insert(i, (at, len));
                return Some(at);
            }
            at = off + l;
        }
        if self.size.saturating_sub(at) >= len {
            self.used.push((at, len));
            Some(at)
        } else {
            None
        }
    }

    fn release(&mut self, off: usize) {
        if let Some(i) = self.used.iter().position(|&(o, _)| o == off) {
            self.used.remove(i);
        }
    }

    fn free_bytes(&self) -> usize {
        self.size - self.used.iter().map(|&(_, l)| l).sum::<usize>()
    }

    pub fn in_use(&self) -> bool {
        !self.used.is_empty()
    }
}

/// Engine state without the drivers: everything [`State::handle_packet`] may touch.
pub(crate) struct State {
    /// This process's world rank.
    pub me: u32,
    pub nprocs: u32,
    pub gates: Vec<Gate>,
    pub reqs: Slab,
    mq: Vec<MatchQ>,
    pub comms: Vec<Option<Comm>>,
    messages: Vec<(u64, Unexpected)>,
    next_msg: u64,
    /// The job's strategy, by name (the send fast paths test it), and its implementation.
    pub strategy: Strategy,
    strat: Box<dyn PacketStrategy>,
    /// The strategy copies small sends into the packet being built when they are posted.
    packs_on_post: bool,
    /// Per peer: the order of its messages, restored from their sequence numbers.
    order: Vec<order::Order>,
    /// The driver being polled (the rail data arrives on).
    polling: DriverId,
    /// Rendezvous receives whose data this process asked for in pieces over several rails,
    /// timed to learn the rails' bandwidth.
    splits: Vec<SplitRecv>,
    gets: Vec<PendingGet>,
    helps: Vec<HelpReq>,
    /// Buffers of unexpected eager messages already delivered, kept for the next ones: a
    /// fresh allocation of tens of KiB per message is memory the allocator gave back to the
    /// system and faults in again, page by page (a third of the receiver's time when a sender
    /// of 64 KiB messages runs ahead over TCP).
    spare: Vec<Vec<u8>>,
    dirty: Vec<u32>,
    pub bsend: BsendBuffer,
    /// Blocks of sparse datatypes at least this large travel zero-copy (`MADMPI_ZCOPY_MIN`).
    pub zcopy_min: usize,
    /// Rendezvous sent with a piece table (zero-copy blocks), for statistics and tests.
    pub zcopy_sends: u64,
    /// Rendezvous whose fragments are gathered from a sparse user buffer (no packing).
    pub gather_sends: u64,
    /// Peers found dead, in the order they were found.
    pub lost: Vec<u32>,
    /// Requests running a [`Schedule`].
    scheds: Vec<RequestId>,
    /// Problems with peers' packets, reported once each (malformed data is dropped).
    pub peer_errors: Vec<String>,
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

/// The gate of a peer reached by `rails` (best first; none: unreachable), its protocol
/// parameters those of the first rail. `caps` gives each rail's driver's capabilities.
fn gate_for(rails: Vec<(DriverId, &madmpi_transports::Caps)>) -> Gate {
    let first = rails.first().map(|&(_, c)| c);
    let rails: Vec<Rail> = rails.into_iter().map(|(d, c)| Rail::new(d, c)).collect();
    let (driver, eager, frag_max, aggreg, solo, iov, get) = match (rails.first(), first) {
        (Some(r), Some(c)) => (
            r.drv,
            r.eager_max,
            r.frag_max,
            c.aggreg_max.min(c.max_packet),
            c.solo_min,
            r.max_iov,
            r.can_get,
        ),
        _ => (NO_DRIVER, 0, 1, HDR_LEN + 1, usize::MAX, 2, false),
    };
    Gate {
        driver,
        rails,
        out: VecDeque::new(),
        seq: 0,
        eager_max: eager,
        frag_max,
        aggreg_max: aggreg,
        solo_min: solo,
        max_iov: iov,
        can_get: get,
        can_put: get,
        queued: false,
        dead: false,
        packed: Vec::new(),
        placing: None,
        prefixed: 0,
    }
}

/// A message of the send fast paths, its arguments checked: world rank of the destination,
/// context, source rank and tag of its header, and its contiguous bytes (`off` from the
/// buffer, `bytes` long).
#[derive(Clone, Copy)]
pub(crate) struct Route {
    peer: u32,
    ctx: u32,
    src: i32,
    tag: i32,
    off: isize,
    bytes: usize,
}

impl Route {
    /// The header of the message as an eager chunk.
    #[inline(always)]
    fn eager(&self, seq: u32, sreq: u64) -> Header {
        Header {
            kind: Kind::Eager as u8,
            flags: 0,
            ctx: self.ctx,
            src: self.src,
            tag: self.tag,
            seq,
            len: self.bytes as u32,
            msg_len: self.bytes as u64,
            sreq,
            aux: 0,
        }
    }
}

fn matches(want_src: i32, want_tag: i32, src: i32, tag: i32) -> bool {
    (want_src == ANY_SOURCE || want_src == src) && (want_tag == ANY_TAG || want_tag == tag)
}

impl State {
    /// State for world rank `me` of `nprocs`, one gate per peer.
    fn new(me: u32, nprocs: u32, mut gates: Vec<Gate>, strategy: Strategy) -> State {
        let strat = strategy.make();
        for g in &mut gates {
            if strat.push_rendezvous(g) {
                // The sender cuts the data over its rails: it must push it.
                g.can_get = false;
                g.can_put = false;
            }
        }
        let all: Arc<[u32]> = (0..nprocs).collect();
        let comms = vec![
            Some(Comm {
                remote: None,
                ctx: 0,
                rank: me as i32,
                size: nprocs as i32,
                world: all,
            }),
            Some(Comm {
                remote: None,
                ctx: 2,
                rank: 0,
                size: 1,
                world: Arc::from(vec![me]),
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
            strategy,
            packs_on_post: strat.packs_on_post(),
            strat,
            order: (0..nprocs).map(|_| order::Order::default()).collect(),
            polling: NO_DRIVER,
            splits: Vec::new(),
            gets: Vec::new(),
            helps: Vec::new(),
            spare: Vec::new(),
            dirty: Vec::new(),
            bsend: BsendBuffer::default(),
            zcopy_min: std::env::var("MADMPI_ZCOPY_MIN")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(8192),
            zcopy_sends: 0,
            gather_sends: 0,
            lost: Vec::new(),
            scheds: Vec::new(),
            peer_errors: Vec::new(),
        }
    }

    fn mq(&mut self, ctx: u32) -> &mut MatchQ {
        let i = ctx as usize;
        if i >= self.mq.len() {
            self.mq.resize_with(i + 1, MatchQ::default);
        }
        &mut self.mq[i]
    }

    /// The matching queues of a context a peer's message names; `None` for a context no
    /// communicator can have (the queues, indexed by context, never grow for a forged one).
    #[inline(always)]
    fn peer_mq(&mut self, ctx: u32) -> Option<&mut MatchQ> {
        if ctx >= crate::comm::CTX_LIMIT {
            return None;
        }
        Some(self.mq(ctx))
    }

    #[cold]
    #[inline(never)]
    fn bad_context(&mut self, peer: u32, ctx: u32) {
        self.peer_error(format!(
            "from rank {peer}: a message in context {ctx}, which no communicator has"
        ));
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

    /// Where a contiguous message of the send fast paths goes: `None` when the arguments need
    /// the checked path (a bad communicator, rank, tag or datatype, or a non-contiguous layout).
    /// `coll`: on the communicator's collective context.
    #[inline(always)]
    fn fast_route(
        &self,
        count: usize,
        dt: &Datatype,
        dest: i32,
        tag: i32,
        comm: CommId,
        coll: bool,
    ) -> Option<Route> {
        let Some(Some(c)) = self.comms.get(comm.0 as usize) else {
            return None;
        };
        if dest < 0 || dest >= c.peer_count() || !(0..=TAG_UB).contains(&tag) || !dt.is_committed()
        {
            return None;
        }
        let (off, bytes) = dt.contiguous_span(count)?;
        Some(Route {
            peer: c.peers()[dest as usize],
            ctx: c.ctx + coll as u32,
            src: c.rank,
            tag,
            off,
            bytes,
        })
    }

    /// No gate has chunks waiting for the strategy.
    #[inline(always)]
    pub fn nothing_queued(&self) -> bool {
        self.dirty.is_empty()
    }

    fn queue(&mut self, peer: u32, c: OutChunk) {
        crate::trace::queued(peer, &c.hdr);
        let g = &mut self.gates[peer as usize];
        g.out.push_back(c);
        if !g.queued {
            g.queued = true;
            self.dirty.push(peer);
        }
    }

    /// Queue a Data fragment on rail `rail` of `peer`'s gate (the receiver cut the message
    /// over several rails).
    fn pin(&mut self, peer: u32, rail: usize, c: OutChunk) {
        crate::trace::queued(peer, &c.hdr);
        let g = &mut self.gates[peer as usize];
        g.rails[rail].out.push_back(c);
        if !g.queued {
            g.queued = true;
            self.dirty.push(peer);
        }
    }

    fn queue_ctrl(&mut self, peer: u32, kind: Kind, flags: u8, sreq: u64, aux: u64) {
        let hdr = Header {
            kind: kind as u8,
            flags,
            sreq,
            aux,
            ..Default::default()
        };
        self.queue(
            peer,
            OutChunk {
                hdr,
                ptr: std::ptr::null(),
                len: 0,
                sent: OnSent::Nothing,
                gather: None,
            },
        );
    }

    // ---------------------------------------------------------------- commands

    /// A completed request of an operation on MPI_PROC_NULL.
    fn null_request(&mut self) -> RequestId {
        let mut r = Request::new(Op::None);
        r.complete = true;
        r.status = PROC_NULL_STATUS;
        self.reqs.insert(r)
    }

    /// Start a send. `buf` must stay valid until the request completes (see `request`).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn isend(
        &mut self,
        buf: *const u8,
        count: usize,
        dt: &Datatype,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
        coll: bool,
    ) -> Result<RequestId> {
        let c = self.comm(comm)?;
        check_dest_tag(c, dest, tag)?;
        check_type(dt)?;
        // A null operation still has valid arguments (as in MPICH and Open MPI).
        if dest == PROC_NULL {
            return Ok(self.null_request());
        }
        let bytes = count
            .checked_mul(dt.size())
            .ok_or_else(|| Error::new(ErrorClass::Count, format!("count {count} overflows")))?;
        let peer = c.peers()[dest as usize];
        let (ctx, src) = (c.ctx + coll as u32, c.rank);
        // Before anything is reserved in the attached buffer: a send that fails here must
        // leave none of it taken (MPI_Buffer_detach would wait for it forever).
        let g = &self.gates[peer as usize];
        if g.dead {
            return err(
                ErrorClass::ProcAborted,
                format!("rank {dest} (world rank {peer}) has died"),
            );
        }
        if g.driver == NO_DRIVER {
            return err(
                ErrorClass::Intern,
                format!("no transport reaches rank {dest} (world rank {peer})"),
            );
        }

        // The bytes to send: the user buffer itself when contiguous, else a packed copy;
        // buffered sends copy into the attached buffer.
        let mut staging = None;
        let mut bsend = None;
        let mut pieces = None;
        let mut stream = false;
        let ptr: *const u8 = if mode == SendMode::Buffered {
            // Exactly what MPI_Pack_size + MPI_BSEND_OVERHEAD promises the user suffices, for
            // each message in the buffer at once: no padding (the data is bytes, copied and
            // sent as bytes; nothing reads it aligned).
            let need = bytes + BSEND_OVERHEAD;
            let off = self.bsend.alloc(need).ok_or_else(|| {
                Error::new(
                    ErrorClass::BufferSpace,
                    format!(
                        "attached buffer too small for a buffered send of {bytes} bytes: needs {need} \
                         (data + MPI_BSEND_OVERHEAD), {} free of {}",
                        self.bsend.free_bytes(),
                        self.bsend.size
                    ),
                )
            })?;
            let dst = (self.bsend.base + off) as *mut u8;
            // SAFETY: [off, off+need) lies inside the attached buffer, reserved for this message.
            let out = std::slice::from_raw_parts_mut(dst, bytes);
            if dt.is_contiguous() {
                std::ptr::copy_nonoverlapping(buf.offset(dt.true_lb()), dst, bytes);
            } else {
                dt.pack(buf, count, 0, out);
            }
            bsend = Some((off, need));
            dst
        } else if let Some((off, _)) = dt.contiguous_span(count) {
            buf.wrapping_offset(off)
        } else if bytes > self.gates[peer as usize].eager_max && self.gates[peer as usize].can_get {
            // Sparse type, rendezvous with `get`: small blocks inline, large blocks pulled
            // straight from the user buffer (NewMadeleine's per-block zero copy).
            match piece_table(
                buf,
                count,
                dt,
                self.zcopy_min,
                self.gates[peer as usize].frag_max,
            ) {
                Some(table) => {
                    self.zcopy_sends += 1;
                    pieces = Some((buf, dt.clone(), count));
                    let p = table.as_ptr();
                    staging = Some(table);
                    p
                }
                None => {
                    let mut v = vec![0u8; bytes];
                    dt.pack(buf, count, 0, &mut v);
                    let p = v.as_ptr();
                    staging = Some(v);
                    p
                }
            }
        } else if bytes > self.gates[peer as usize].eager_max && gather_worthy(dt, count) {
            // Sparse type with large blocks, no `get`: the fragments will be gathered from
            // the user buffer when the receiver asks (Cts), never packed.
            stream = true;
            pieces = Some((buf, dt.clone(), count));
            buf
        } else {
            let mut v = vec![0u8; bytes];
            dt.pack(buf, count, 0, &mut v);
            let p = v.as_ptr();
            staging = Some(v);
            p
        };

        let g = &self.gates[peer as usize];
        let eager = bytes <= g.eager_max;
        // A rendezvous that the receiver answers with a Cts (it cannot pull the data) carries
        // the start of the message, as much as an eager message could: the receiver has it,
        // and answers, while the rest waits for the answer. Only when nothing else is on its
        // way to the peer (a latency-bound message): in a stream of large messages the round
        // trips overlap anyway, and the starts only add packets.
        let prefix =
            if !eager && !g.can_get && pieces.is_none() && g.out.is_empty() && g.prefixed == 0 {
                bytes.min(g.eager_max)
            } else {
                0
            };
        if !eager {
            tracing::debug!(
                peer,
                bytes,
                get = g.can_get,
                zero_copy = pieces.is_some(),
                "rendezvous"
            );
        }
        if prefix > 0 {
            self.gates[peer as usize].prefixed += 1;
        }
        let sync = mode == SendMode::Synchronous;
        // Numbered when it leaves (`number`).
        let seq = 0;
        let table_len = if pieces.is_some() {
            staging.as_ref().map_or(0, |t| t.len())
        } else {
            0
        };
        let extra = (staging.is_some() || bsend.is_some() || pieces.is_some()).then(|| {
            Box::new(SendExtra {
                staging,
                layout: pieces,
                bsend,
            })
        });
        let mut r = Request::new(Op::Send(SendOp {
            queued: true,
            await_ack: sync || !eager,
            frag_sent: prefix,
            extra,
            ..SendOp::new(peer, ptr, bytes)
        }));
        // A buffered send completes for the user at once; the transfer goes on detached.
        let user_req = if mode == SendMode::Buffered {
            r.detached = true;
            let mut u = Request::new(Op::None);
            u.complete = true;
            Some(u)
        } else {
            None
        };
        let rid = self.reqs.insert(r);
        let hdr = Header {
            kind: if eager { Kind::Eager } else { Kind::Rts } as u8,
            flags: if sync { wire::FLAG_SYNC } else { 0 }
                | if table_len > 0 { wire::FLAG_PIECES } else { 0 }
                | if stream && !eager {
                    wire::FLAG_STREAM
                } else {
                    0
                }
                | if prefix > 0 { wire::FLAG_PREFIX } else { 0 },
            ctx,
            src,
            tag,
            seq,
            len: if eager {
                bytes as u32
            } else {
                (table_len + prefix) as u32
            },
            msg_len: bytes as u64,
            sreq: rid.0,
            aux: if eager || table_len > 0 || stream {
                0
            } else {
                ptr as u64
            },
        };
        self.queue(
            peer,
            OutChunk {
                hdr,
                ptr,
                len: if eager { bytes } else { table_len + prefix },
                sent: OnSent::Send(rid),
                gather: None,
            },
        );
        Ok(match user_req {
            Some(u) => self.reqs.insert(u),
            None => rid,
        })
    }

    /// `aggreg`'s way with a small standard-mode send (its arguments checked: `r`): the chunk
    /// (header, payload, padding) is written at once into the packet the gate is building, and
    /// the request is born complete (the bytes are ours now, as on the eager fast path; it
    /// stays cancellable until the receiver matches the message). What the strategy would have
    /// done at the next progress call, without a queued chunk and a completion per message.
    /// Fails, having done nothing, when the packet has no room left for the message (`Full`:
    /// the packet should leave) or when the message needs the general path (a large message,
    /// other chunks queued behind the packed ones, a dead peer).
    ///
    /// # Safety
    /// `buf` holds the message `r` describes for the duration of the call.
    #[inline(always)]
    unsafe fn pack_routed(
        &mut self,
        r: Route,
        buf: *const u8,
    ) -> std::result::Result<RequestId, NotPacked> {
        let (peer, bytes) = (r.peer, r.bytes);
        let g = &self.gates[peer as usize];
        let rec = wire::EAGER_HDR_LEN + wire::pad8(bytes);
        let open = match g.out.back() {
            None => true,
            Some(c) => c.hdr.kind == KIND_PACKED,
        };
        if !open || g.dead || g.driver == NO_DRIVER || bytes > g.eager_max.min(PACK_COPY_MAX) {
            return Err(NotPacked::Other);
        }
        if g.packed.len() + rec > g.aggreg_max {
            return Err(if g.packed.is_empty() {
                NotPacked::Other
            } else {
                NotPacked::Full
            });
        }
        let rid = self
            .reqs
            .insert_with(|| Request::done(Op::Send(SendOp::new(peer, buf, 0))));
        let g = &mut self.gates[peer as usize];
        g.seq = g.seq.wrapping_add(1);
        let hdr = r.eager(g.seq, rid.0);
        crate::trace::queued(peer, &hdr);
        let at = g.packed.len();
        g.packed.reserve(rec);
        let spare = &mut g.packed.spare_capacity_mut()[..rec];
        // SAFETY: `spare` has `rec` bytes: the header, the payload, then up to 7 of padding,
        // all written here (the padding zeroed) before they are counted in the length; the
        // caller's buffer holds the payload.
        unsafe {
            let dst = spare.as_mut_ptr() as *mut u8;
            hdr.encode_eager(&mut *(dst as *mut [u8; wire::EAGER_HDR_LEN]));
            let body = dst.add(wire::EAGER_HDR_LEN);
            let padded = rec - wire::EAGER_HDR_LEN;
            if padded > 0 {
                std::ptr::write_bytes(body.add(padded - 8), 0, 8);
            }
            madmpi_transports::copy_bytes(buf.wrapping_offset(r.off), body, bytes);
            g.packed.set_len(at + rec);
        }
        if at == 0 {
            self.queue(
                peer,
                OutChunk {
                    hdr: Header {
                        kind: KIND_PACKED,
                        ..Header::default()
                    },
                    ptr: std::ptr::null(),
                    len: 0,
                    sent: OnSent::Nothing,
                    gather: None,
                },
            );
        }
        Ok(rid)
    }

    /// Start a receive. `buf` must stay valid until the request completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn irecv(
        &mut self,
        buf: *mut u8,
        count: usize,
        dt: &Datatype,
        src: i32,
        tag: i32,
        comm: CommId,
        coll: bool,
    ) -> Result<RequestId> {
        let c = self.comm(comm)?;
        check_src_tag(c, src, tag)?;
        check_type(dt)?;
        if src == PROC_NULL {
            return Ok(self.null_request());
        }
        let ctx = c.ctx + coll as u32;
        let target = recv_target(buf, count, dt)?;
        let rid = self.reqs.insert(Request::new(Op::Recv(RecvOp {
            ctx,
            target,
            peer: None,
            msg_len: 0,
            got: 0,
            posted: true,
        })));
        let q = self.mq(ctx);
        if let Some(pos) = q
            .unexpected
            .iter()
            .position(|u| matches(src, tag, u.src, u.tag))
        {
            let u = q.unexpected.remove(pos).expect("position is in range");
            self.deliver(rid, u);
        } else {
            q.posted.push_back((src, tag, rid));
        }
        Ok(rid)
    }

    /// [`State::irecv`] of a receive that can only be posted: a contiguous type, valid
    /// arguments, nothing unexpected on the communicator to match. `None`, having done nothing,
    /// otherwise.
    ///
    /// # Safety
    /// As [`State::irecv`].
    #[inline(always)]
    pub unsafe fn irecv_posted(
        &mut self,
        buf: *mut u8,
        count: usize,
        dt: &Datatype,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Option<RequestId> {
        let Some(Some(c)) = self.comms.get(comm.0 as usize) else {
            return None;
        };
        if (src != ANY_SOURCE && (src < 0 || src >= c.peer_count()))
            || (tag != ANY_TAG && !(0..=TAG_UB).contains(&tag))
            || !dt.is_committed()
        {
            return None;
        }
        let ctx = c.ctx;
        let (off, cap) = dt.contiguous_span(count)?;
        let q = self.mq.get(ctx as usize)?;
        if !q.unexpected.is_empty() {
            return None;
        }
        let rid = self.reqs.insert_with(|| {
            Request::new(Op::Recv(RecvOp {
                ctx,
                target: RecvTarget {
                    ptr: buf.wrapping_offset(off),
                    cap,
                    layout: None,
                },
                peer: None,
                msg_len: 0,
                got: 0,
                posted: true,
            }))
        });
        self.mq[ctx as usize].posted.push_back((src, tag, rid));
        Some(rid)
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
            Persistent::Coll(_) => {}
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
        if let Persistent::Coll(make) = &p {
            // A collective runs in the persistent request itself, as a schedule.
            let sched = make(self)?;
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
                } => self.irecv(buf, count, dt, src, tag, comm, false)?,
                Persistent::Coll(_) => unreachable!("started above"),
            }
        };
        self.rebind(inner, id);
        Ok(())
    }

    /// Move the live operation of request `from` into the (persistent) request `to`.
    fn rebind(&mut self, from: RequestId, to: RequestId) {
        let inner = self.reqs.remove(from).expect("just created");
        // Every reference to `from` (posted queue, queued chunks) must now name `to`.
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
                if c.hdr.sreq == from.0 {
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

    /// MPI_Cancel.
    pub fn cancel(&mut self, id: RequestId) -> Result<()> {
        let r = self.reqs.get_mut(id).ok_or_else(bad_request)?;
        if !r.active {
            return Ok(());
        }
        match &mut r.op {
            Op::Recv(rv) if rv.posted => {
                let ctx = rv.ctx;
                rv.posted = false;
                r.status.cancelled = true;
                self.mq(ctx).posted.retain(|e| e.2 != id);
                self.complete(id);
            }
            Op::Send(s) if !s.cancel_wait && s.bsend().is_none() => {
                let peer = s.peer;
                if s.queued {
                    // Not yet handed to the driver: take it back.
                    let g = &mut self.gates[peer as usize];
                    g.out
                        .retain(|c| !matches!(c.sent, OnSent::Send(r) if r == id));
                    // Never sent: no Cts will come.
                    g.start_settled(s);
                    s.queued = false;
                    s.await_ack = false;
                    r.status.cancelled = true;
                    self.complete(id);
                } else if !s.fragmenting {
                    // Sent: ask the receiver to drop it if it is still unmatched there.
                    s.cancel_wait = true;
                    r.complete = false;
                    self.queue_ctrl(peer, Kind::CancelReq, 0, id.0, 0);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether `id` is a send to this process whose cancellation is still being settled.
    pub fn cancel_to_self_pending(&self, id: RequestId) -> bool {
        match self.reqs.get(id).map(|r| &r.op) {
            Some(Op::Send(s)) => s.cancel_wait && s.peer == self.me,
            _ => false,
        }
    }

    pub fn iprobe(&mut self, src: i32, tag: i32, comm: CommId) -> Result<Option<Status>> {
        let c = self.comm(comm)?;
        check_src_tag(c, src, tag)?;
        if src == PROC_NULL {
            return Ok(Some(PROC_NULL_STATUS));
        }
        let ctx = c.ctx;
        Ok(self
            .mq(ctx)
            .unexpected
            .iter()
            .find(|u| matches(src, tag, u.src, u.tag))
            .map(|u| Status {
                source: u.src,
                tag: u.tag,
                error: None,
                bytes: u.msg_len,
                msg_len: u.msg_len,
                cancelled: false,
            }))
    }

    pub fn improbe(
        &mut self,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<Option<(MessageId, Status)>> {
        let c = self.comm(comm)?;
        check_src_tag(c, src, tag)?;
        if src == PROC_NULL {
            return Ok(Some((MessageId::NO_PROC, PROC_NULL_STATUS)));
        }
        let ctx = c.ctx;
        let q = self.mq(ctx);
        let Some(pos) = q
            .unexpected
            .iter()
            .position(|u| matches(src, tag, u.src, u.tag))
        else {
            return Ok(None);
        };
        let u = q.unexpected.remove(pos).expect("in range");
        let st = Status {
            source: u.src,
            tag: u.tag,
            error: None,
            bytes: u.msg_len,
            msg_len: u.msg_len,
            cancelled: false,
        };
        self.next_msg += 1;
        let id = self.next_msg;
        self.messages.push((id, u));
        Ok(Some((MessageId(id), st)))
    }

    /// MPI_Imrecv.
    pub unsafe fn imrecv(
        &mut self,
        buf: *mut u8,
        count: usize,
        dt: &Datatype,
        msg: MessageId,
    ) -> Result<RequestId> {
        if msg == MessageId::NO_PROC {
            return Ok(self.null_request());
        }
        check_type(dt)?;
        let pos = self
            .messages
            .iter()
            .position(|(id, _)| *id == msg.0)
            .ok_or_else(|| {
                Error::new(
                    ErrorClass::Request,
                    "invalid message handle (already received?)",
                )
            })?;
        let target = recv_target(buf, count, dt)?;
        let (_, u) = self.messages.swap_remove(pos);
        let rid = self.reqs.insert(Request::new(Op::Recv(RecvOp {
            ctx: 0,
            target,
            peer: None,
            msg_len: 0,
            got: 0,
            posted: false,
        })));
        self.deliver(rid, u);
        Ok(rid)
    }

    pub fn buffer_attach(&mut self, base: usize, size: usize) -> Result<()> {
        if self.bsend.size != 0 {
            return err(
                ErrorClass::Buffer,
                "a buffer is already attached (detach it first)",
            );
        }
        self.bsend = BsendBuffer {
            base,
            size,
            used: Vec::new(),
        };
        Ok(())
    }

    // ---------------------------------------------------------------- completion

    /// Mark a request complete (and free it if detached).
    #[inline]
    fn complete(&mut self, id: RequestId) {
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
                    if let Some((off, _)) = x.bsend {
                        self.bsend.release(off);
                    }
                }
            }
            _ => {}
        }
        if r.detached {
            self.reqs.free(id);
        }
    }

    fn maybe_complete_send(&mut self, id: RequestId) {
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

    /// A copy of `data` for the unexpected-message queue, in a spare buffer if one is big
    /// enough.
    fn unexpected_copy(&mut self, data: &[u8]) -> Vec<u8> {
        let mut v = match self.spare.iter().rposition(|b| b.capacity() >= data.len()) {
            Some(i) => self.spare.swap_remove(i),
            None => Vec::with_capacity(data.len()),
        };
        v.clear();
        v.extend_from_slice(data);
        v
    }

    /// Keep the buffer of a delivered unexpected message for [`State::unexpected_copy`].
    fn recycle(&mut self, v: Vec<u8>) {
        /// Spare buffers kept at most, and the largest kept.
        const KEEP: usize = 16;
        const KEEP_MAX: usize = 256 << 10;
        if self.spare.len() < KEEP && (1..=KEEP_MAX).contains(&v.capacity()) {
            self.spare.push(v);
        }
    }

    /// A matched message goes into receive request `rid`.
    fn deliver(&mut self, rid: RequestId, u: Unexpected) {
        let peer = u.peer;
        if let UBody::Eager(data) = u.body {
            self.deliver_eager(rid, u.src, u.tag, peer, &data);
            if u.sync {
                self.queue_ctrl(peer, Kind::SyncAck, 0, u.sreq, 0);
            }
            self.recycle(data);
            return;
        }
        let can_get = self.gates[peer as usize].can_get;
        let Some(r) = self.matched(rid, u.src, u.tag, peer, u.msg_len) else {
            return;
        };
        let Op::Recv(rv) = &mut r.op else { return };
        match u.body {
            UBody::Eager(_) => unreachable!("delivered above"),
            UBody::Rts {
                addr,
                table,
                stream,
                prefix,
                start,
            } => {
                tracing::debug!(
                    peer,
                    bytes = u.msg_len,
                    get = can_get && !stream,
                    "rendezvous matched"
                );
                rv.msg_len = u.msg_len;
                let ranges = match table {
                    None => vec![(0, addr, u.msg_len)],
                    // SAFETY: the receive buffer is valid until completion.
                    Some(t) => match unsafe { apply_piece_table(&rv.target, &t, u.msg_len) } {
                        Ok(r) => r,
                        Err(why) => {
                            r.status.error = Some(ErrorClass::Other);
                            self.peer_error(format!(
                                "from rank {peer}: bad rendezvous table: {why}"
                            ));
                            self.queue_ctrl(peer, Kind::Fin, 0, u.sreq, 0);
                            self.complete(rid);
                            return;
                        }
                    },
                };
                if can_get && !stream {
                    self.gets.push(PendingGet {
                        peer,
                        ranges,
                        rid,
                        sreq: u.sreq,
                    });
                } else {
                    self.request_data(peer, u.sreq, rid, start, u.msg_len as usize);
                }
                if !prefix.is_empty() {
                    self.write_prefix(rid, &prefix);
                    self.recycle(prefix);
                }
            }
        }
    }

    /// Ask `peer` for the data of its rendezvous send `sreq`, matched by the receive `rid`:
    /// bytes `from..len` (the RTS carried the start). With several rails to the peer, the
    /// strategy may cut it (`rdv_accept`, on the receiving side as in NewMadeleine): one Cts
    /// per piece (`FLAG_PART`), each naming its rail, and the pieces are timed as they come in
    /// to learn each rail's bandwidth. Otherwise one Cts asks for all of it.
    fn request_data(&mut self, peer: u32, sreq: u64, rid: RequestId, from: usize, len: usize) {
        let g = &self.gates[peer as usize];
        let mut pieces: Vec<Piece> = Vec::new();
        if g.rails.len() > 1 && from < len {
            self.strat.rdv_accept(g, from, len, &mut pieces);
        }
        if matches!(pieces.as_slice(), [] | [Piece { rail: 0, .. }]) {
            return self.queue_ctrl(peer, Kind::Cts, 0, sreq, rid.0);
        }
        let mut rails = vec![(0usize, 0usize, 0u64); g.rails.len()];
        for p in &pieces {
            rails[p.rail].0 += p.len;
            // (A piece names its length in 32 bits.)
            let mut off = p.off;
            while off < p.off + p.len {
                let n = (p.off + p.len - off).min(1 << 30);
                let hdr = Header {
                    kind: Kind::Cts as u8,
                    flags: wire::FLAG_PART,
                    tag: p.rail as i32,
                    seq: n as u32,
                    msg_len: off as u64,
                    sreq,
                    aux: rid.0,
                    ..Default::default()
                };
                self.queue(
                    peer,
                    OutChunk {
                        hdr,
                        ptr: std::ptr::null(),
                        len: 0,
                        sent: OnSent::Nothing,
                        gather: None,
                    },
                );
                off += n;
            }
        }
        tracing::debug!(
            peer,
            bytes = len - from,
            ?pieces,
            "rendezvous cut over rails"
        );
        self.splits.push(SplitRecv {
            rid,
            peer,
            t0: crate::trace::clock_ns(),
            rails,
        });
    }

    /// `n` bytes of the rendezvous receive `id` from `peer` came in on the rail being polled
    /// (`done`: the last of them): if its data was asked for in pieces, account for them, and
    /// when all are in, teach each rail the rate its piece came at.
    #[cold]
    #[inline(never)]
    fn split_data(&mut self, peer: u32, id: RequestId, n: usize, done: bool) {
        let Some(k) = self
            .splits
            .iter()
            .position(|s| s.rid == id && s.peer == peer)
        else {
            return;
        };
        let now = crate::trace::clock_ns();
        let g = &mut self.gates[peer as usize];
        if let Some(r) = g.rails.iter().position(|r| r.drv == self.polling) {
            if let Some(p) = self.splits[k].rails.get_mut(r) {
                p.1 += n;
                if p.1 >= p.0 && p.2 == 0 {
                    p.2 = now;
                }
            }
        }
        if done {
            let s = self.splits.swap_remove(k);
            for (r, &(want, _, last)) in s.rails.iter().enumerate() {
                if want > 0 && last > s.t0 {
                    g.rails[r].learn(want, last - s.t0);
                }
            }
        }
    }

    /// The start of a rendezvous message, sent with its RTS, into the receive `rid` that
    /// matched it.
    fn write_prefix(&mut self, rid: RequestId, data: &[u8]) {
        if let Some(Request {
            op: Op::Recv(rv), ..
        }) = self.reqs.get_mut(rid)
        {
            // SAFETY: the receive buffer is valid until completion; write_at clips.
            unsafe { rv.target.write_at(0, data) };
            rv.got += data.len() as u64;
        }
    }

    // ---------------------------------------------------------------- inputs

    /// Handle one packet from `peer`. Malformed input is dropped and recorded, never trusted.
    pub fn handle_packet(&mut self, peer: u32, pkt: &[u8]) {
        crate::trace::received(peer, pkt);
        for c in Chunks::new(pkt) {
            match c {
                Ok((h, payload)) => self.handle_chunk(peer, h, payload),
                Err(e) => {
                    self.peer_error(format!("from rank {peer}: {}", e.msg));
                    return;
                }
            }
        }
    }

    fn peer_error(&mut self, msg: String) {
        if self.peer_errors.len() < 16 {
            eprintln!("madmpi: dropped {msg}");
            self.peer_errors.push(msg);
        }
    }

    fn handle_chunk(&mut self, peer: u32, h: Header, payload: &[u8]) {
        let Some(kind) = h.kind() else { return };
        match kind {
            Kind::Eager | Kind::Rts => {
                // Messages are matched in the order they were sent, whatever their rails.
                let o = &mut self.order[peer as usize];
                if h.seq != o.expect {
                    return self.hold(peer, h, payload);
                }
                o.expect = o.expect.wrapping_add(1);
                self.handle_message(peer, kind == Kind::Eager, h, payload);
                if !self.order[peer as usize].is_empty() {
                    self.release_held(peer);
                }
            }
            Kind::Fin | Kind::SyncAck => {
                let id = RequestId(h.sreq);
                if let Some(Request {
                    op: Op::Send(s), ..
                }) = self.reqs.get_mut(id)
                {
                    s.await_ack = false;
                    self.maybe_complete_send(id);
                }
            }
            Kind::Cts => {
                let id = RequestId(h.sreq);
                let Some(Request {
                    op: Op::Send(s), ..
                }) = self.reqs.get_mut(id)
                else {
                    return;
                };
                // A Cts asks for the rest of the message; with `FLAG_PART`, for one piece of
                // it on one rail (the receiver cut it: `request_data`).
                let part = h.flags & wire::FLAG_PART != 0;
                if s.fragmenting && !part {
                    // (A second Cts for the same send: the peer is confused.)
                    return self.peer_error(format!("from rank {peer}: a second Cts"));
                }
                if !s.fragmenting {
                    self.gates[peer as usize].start_settled(s);
                    s.await_ack = false;
                    s.fragmenting = true;
                    if let Some((buf, dt, count)) = s.extra.as_mut().and_then(|x| x.layout.take()) {
                        if gather_worthy(&dt, count) {
                            // Fragments gathered straight from the user buffer (the layout
                            // stays for the pieces of later Cts).
                            self.gather_sends += 1;
                            s.ptr = buf;
                            s.extra_mut().layout = Some((buf, dt, count));
                        } else {
                            // The receiver cannot pull the blocks: stream the packed bytes.
                            let mut v = vec![0u8; s.len];
                            // SAFETY: the send buffer is valid until the request completes.
                            unsafe { dt.pack(buf, count, 0, &mut v) };
                            s.ptr = v.as_ptr();
                            s.extra_mut().staging = Some(v);
                        }
                    }
                }
                let gather = s
                    .extra
                    .as_ref()
                    .and_then(|x| x.layout.as_ref())
                    .map(|(_, dt, count)| (dt.clone(), *count));
                let (ptr, len) = (s.ptr, s.len);
                // The fragments start after what the RTS carried (`frag_sent` counts it).
                let (from, to, rail) = if part {
                    let (off, n) = (h.msg_len as usize, h.seq as usize);
                    if off.checked_add(n).is_none_or(|end| end > len) {
                        return self.peer_error(format!(
                            "from rank {peer}: a Cts for bytes {off}+{n} of a {len}-byte message"
                        ));
                    }
                    let rails = self.gates[peer as usize].rails.len();
                    (
                        off,
                        off + n,
                        Some((h.tag.max(0) as usize).min(rails.max(1) - 1)),
                    )
                } else {
                    (s.frag_sent, len, None)
                };
                let frag = match rail {
                    Some(r) => self.gates[peer as usize].rails[r].frag_max,
                    None => self.gates[peer as usize].frag_max,
                };
                let mut off = from;
                while off < to {
                    let n = frag.min(to - off);
                    let hdr = Header {
                        kind: Kind::Data as u8,
                        len: n as u32,
                        msg_len: off as u64,
                        sreq: h.sreq,
                        aux: h.aux,
                        ..Default::default()
                    };
                    let chunk = match &gather {
                        Some(g) => OutChunk {
                            hdr,
                            ptr,
                            len: n,
                            sent: OnSent::Frag(id),
                            gather: Some(g.clone()),
                        },
                        None => OutChunk {
                            hdr,
                            ptr: ptr.wrapping_add(off),
                            len: n,
                            sent: OnSent::Frag(id),
                            gather: None,
                        },
                    };
                    match rail {
                        Some(r) => self.pin(peer, r, chunk),
                        None => self.queue(peer, chunk),
                    }
                    off += n;
                }
            }
            Kind::Data => {
                let id = RequestId(h.aux);
                let Some(r) = self.reqs.get_mut(id) else {
                    return self
                        .peer_error(format!("from rank {peer}: data for an unknown request"));
                };
                let Op::Recv(rv) = &mut r.op else { return };
                // SAFETY: the receive buffer is valid until completion; write_at clips.
                unsafe { rv.target.write_at(h.msg_len as usize, payload) };
                rv.got += payload.len() as u64;
                let done = rv.got >= rv.msg_len;
                if !self.splits.is_empty() {
                    self.split_data(peer, id, payload.len(), done);
                }
                if done {
                    self.complete(id);
                }
            }
            Kind::CancelReq => {
                let mut found = false;
                for q in &mut self.mq {
                    if let Some(pos) = q
                        .unexpected
                        .iter()
                        .position(|u| u.peer == peer && u.sreq == h.sreq)
                    {
                        q.unexpected.remove(pos);
                        found = true;
                        break;
                    }
                }
                let flags = if found { wire::FLAG_CANCELLED } else { 0 };
                self.queue_ctrl(peer, Kind::CancelAck, flags, h.sreq, 0);
            }
            Kind::Help => {
                let Some(job) = SplitJob::new(h.ctx, h.msg_len as usize, h.seq) else {
                    return self.peer_error(format!(
                        "from rank {peer}: a split copy in {} chunks",
                        h.seq
                    ));
                };
                if self.gates[peer as usize].can_put {
                    self.helps.push(HelpReq {
                        peer,
                        sreq: h.sreq,
                        job,
                        remote: h.aux,
                    });
                }
            }
            Kind::CancelAck => {
                let id = RequestId(h.sreq);
                let Some(r) = self.reqs.get_mut(id) else {
                    return;
                };
                let Op::Send(s) = &mut r.op else { return };
                s.cancel_wait = false;
                if h.flags & wire::FLAG_CANCELLED != 0 {
                    // No Cts will come.
                    self.gates[peer as usize].start_settled(s);
                    r.status.cancelled = true;
                    s.await_ack = false;
                    s.fragmenting = false;
                }
                self.maybe_complete_send(id);
            }
        }
    }

    /// A message chunk (Eager or Rts), in its turn.
    #[inline(always)]
    fn handle_message(&mut self, peer: u32, eager: bool, h: Header, payload: &[u8]) {
        // (An eager header carries no length of its own: the chunk's is the message's.)
        let Some(q) = self.peer_mq(h.ctx) else {
            return self.bad_context(peer, h.ctx);
        };
        let pos = q.find_posted(h.src, h.tag);
        if eager {
            if let Some(pos) = pos {
                // The usual case, matched to the oldest posted receive: no copy kept.
                let (_, _, rid) = if pos == 0 {
                    q.posted.pop_front()
                } else {
                    q.posted.remove(pos)
                }
                .expect("in range");
                let sync = h.flags & wire::FLAG_SYNC != 0;
                self.deliver_eager(rid, h.src, h.tag, peer, payload);
                if sync {
                    self.queue_ctrl(peer, Kind::SyncAck, 0, h.sreq, 0);
                }
                return;
            }
        }
        self.not_posted(peer, h, payload, pos);
    }

    /// A message chunk that came before its turn (on another rail): kept until the ones
    /// before it have been handled.
    #[cold]
    #[inline(never)]
    fn hold(&mut self, peer: u32, h: Header, payload: &[u8]) {
        let expect = self.order[peer as usize].expect;
        if let Err(why) = self.order[peer as usize].hold(h, payload) {
            self.peer_error(format!(
                "from rank {peer}: message number {} while expecting {expect} ({why:?})",
                h.seq
            ));
        }
    }

    /// Handle the held chunks of `peer` whose turn has come.
    #[cold]
    #[inline(never)]
    fn release_held(&mut self, peer: u32) {
        while let Some((h, payload)) = self.order[peer as usize].next_held() {
            self.handle_message(peer, h.kind == Kind::Eager as u8, h, &payload);
        }
    }

    /// An eager chunk that no posted receive takes, or an RTS: queued as unexpected, or
    /// delivered to the posted receive at `pos` with what a rendezvous needs. Out of line: the
    /// usual eager arrival, taken by the oldest posted receive, stays short.
    #[cold]
    #[inline(never)]
    fn not_posted(&mut self, peer: u32, h: Header, payload: &[u8], pos: Option<usize>) {
        // The start of the message an RTS carries (FLAG_PREFIX), else nothing.
        let start: &[u8] = if h.carries_start() { payload } else { &[] };
        let body = if h.kind == Kind::Eager as u8 {
            UBody::Eager(self.unexpected_copy(payload))
        } else if h.flags & wire::FLAG_PIECES != 0 {
            UBody::Rts {
                addr: 0,
                table: Some(payload.to_vec()),
                stream: false,
                prefix: Vec::new(),
                start: 0,
            }
        } else {
            // The start is kept with the message if no receive takes it yet.
            let prefix = if !start.is_empty() && pos.is_none() {
                self.unexpected_copy(start)
            } else {
                Vec::new()
            };
            UBody::Rts {
                addr: h.aux,
                table: None,
                stream: h.flags & wire::FLAG_STREAM != 0,
                prefix,
                start: start.len(),
            }
        };
        let u = Unexpected::of(peer, &h, body);
        let q = self.mq(h.ctx);
        match pos {
            Some(pos) => {
                let (_, _, rid) = q.posted.remove(pos).expect("in range");
                self.deliver(rid, u);
                if !start.is_empty() {
                    self.write_prefix(rid, start);
                }
            }
            None => q.unexpected.push_back(u),
        }
    }

    /// Eager payload straight from the packet into a posted receive (no intermediate copy).
    /// An eager message (`payload`, from `src` with `tag`, arrived from world rank `peer`)
    /// matched by the posted receive `rid`. (A synchronous sender's acknowledgement is the
    /// caller's.)
    #[inline]
    fn deliver_eager(&mut self, rid: RequestId, src: i32, tag: i32, peer: u32, payload: &[u8]) {
        let Some(r) = self.matched(rid, src, tag, peer, payload.len() as u64) else {
            return;
        };
        if let Op::Recv(rv) = &r.op {
            // SAFETY: the receive buffer is valid until completion; write_at clips to cap.
            unsafe { rv.target.write_at(0, payload) };
        }
        // What `complete` does for a receive, on the request at hand.
        r.complete = true;
        if r.detached {
            self.reqs.free(rid);
        }
    }

    /// The receive `rid` matched a message of `len` bytes from `src` with `tag`, arrived from
    /// world rank `peer` (eager, or a rendezvous of that length): its status is set
    /// (truncation included), its data not yet written. `None` if `rid` is not a receive.
    #[inline(always)]
    fn matched(
        &mut self,
        rid: RequestId,
        src: i32,
        tag: i32,
        peer: u32,
        len: u64,
    ) -> Option<&mut Request> {
        let r = self.reqs.get_mut(rid)?;
        let Op::Recv(rv) = &mut r.op else {
            return None;
        };
        rv.posted = false;
        rv.peer = Some(peer);
        r.status.source = src;
        r.status.tag = tag;
        let cap = rv.target.cap as u64;
        r.status.bytes = len.min(cap);
        r.status.msg_len = len;
        if len > cap {
            r.status.error = Some(ErrorClass::Truncate);
        }
        Some(r)
    }

    fn on_sent(&mut self, s: OnSent, len: usize) {
        match s {
            OnSent::Nothing => {}
            OnSent::Send(id) => {
                if let Some(Request {
                    op: Op::Send(op), ..
                }) = self.reqs.get_mut(id)
                {
                    op.queued = false;
                    self.maybe_complete_send(id);
                }
            }
            OnSent::Frag(id) => {
                if let Some(Request {
                    op: Op::Send(op), ..
                }) = self.reqs.get_mut(id)
                {
                    op.frag_sent += len;
                    self.maybe_complete_send(id);
                }
            }
        }
    }

    /// The next packet of `peer`'s gate, as the strategy commits it.
    #[inline]
    fn pick(&self, peer: u32, busy: u32) -> Commit {
        self.strat.try_and_commit(&self.gates[peer as usize], busy)
    }

    /// Number the message chunks among the first `n` queued on `peer`'s gate, from the last
    /// number that left: they are about to be offered to a driver (numbers become final when
    /// the driver takes them, in [`State::sent`]; a refused packet is numbered again).
    fn number(&mut self, peer: u32, n: usize) {
        let g = &mut self.gates[peer as usize];
        let mut seq = g.seq;
        for c in g.out.iter_mut().take(n) {
            if c.hdr.kind == Kind::Eager as u8 || c.hdr.kind == Kind::Rts as u8 {
                seq = seq.wrapping_add(1);
                c.hdr.seq = seq;
            }
        }
    }

    /// The first `n` chunks of `peer`'s gate were handed to the driver.
    fn sent(&mut self, peer: u32, n: usize) {
        for _ in 0..n {
            let g = &mut self.gates[peer as usize];
            let c = g.out.pop_front().expect("n chunks queued");
            if c.hdr.kind == KIND_PACKED {
                g.packed.clear();
            } else if c.hdr.kind == Kind::Eager as u8 || c.hdr.kind == Kind::Rts as u8 {
                g.seq = c.hdr.seq;
            }
            self.on_sent(c.sent, c.len);
        }
    }

    /// The first fragment pinned to rail `rail` of `peer`'s gate was handed to its driver.
    fn sent_pinned(&mut self, peer: u32, rail: usize) {
        let r = &mut self.gates[peer as usize].rails[rail];
        let c = r.out.pop_front().expect("a pinned chunk");
        self.on_sent(c.sent, c.len);
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
            let r = self
                .reqs
                .get_mut(rid)
                .expect("schedules do not free their own request");
            r.op = Op::Sched(s);
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
    /// it, and posted receives that it could satisfy — its rank or MPI_ANY_SOURCE), so that
    /// nobody waits forever. Later operations with it fail at once.
    pub fn peer_lost(&mut self, peer: u32) {
        let g = &mut self.gates[peer as usize];
        if g.dead {
            return;
        }
        g.dead = true;
        crate::trace::peer_lost(peer);
        g.out.clear();
        g.packed.clear();
        for r in &mut g.rails {
            r.out.clear();
        }
        self.gets.retain(|x| x.peer != peer);
        self.helps.retain(|x| x.peer != peer);
        self.splits.retain(|x| x.peer != peer);
        if !self.lost.contains(&peer) {
            self.lost.push(peer);
        }
        let mut failed = Vec::new();
        for (ctx, q) in self.mq.iter_mut().enumerate() {
            let comm = self
                .comms
                .iter()
                .flatten()
                .find(|c| c.ctx == (ctx as u32 & !1));
            q.unexpected.retain(|u| u.peer != peer);
            q.posted.retain(|&(src, _, rid)| {
                let hit = src == ANY_SOURCE
                    || comm.is_some_and(|c| c.peers().get(src as usize) == Some(&peer));
                if hit {
                    failed.push(rid);
                }
                !hit
            });
        }
        failed.extend(self.reqs.ids_where(|r| match &r.op {
            Op::Send(s) => s.peer == peer && !r.complete,
            Op::Recv(rv) => rv.peer == Some(peer) && !r.complete,
            Op::None | Op::Sched(_) => false,
        }));
        for rid in failed {
            if let Some(r) = self.reqs.get_mut(rid) {
                r.status.error = Some(ErrorClass::ProcAborted);
                if let Op::Send(s) = &mut r.op {
                    s.queued = false;
                    s.await_ack = false;
                    s.cancel_wait = false;
                    s.fragmenting = false;
                }
            }
            self.complete(rid);
        }
    }

    /// Requests the engine must finish before MPI_Finalize returns (buffered and freed sends,
    /// control chunks not yet handed to a driver).
    pub fn busy(&self) -> bool {
        !self.dirty.is_empty() || !self.gets.is_empty() || self.reqs.detached_pending() > 0
    }
}

const PAD: [u8; 8] = [0; 8];

/// Padding after a chunk of `len` payload bytes (both header lengths are multiples of 8).
#[inline]
fn pad_len(len: usize) -> usize {
    wire::pad8(len) - len
}

/// Packets of Data chunks at least this large are received straight into the user buffer by
/// drivers that can split a packet (TCP).
const SPLIT_MIN: usize = 16 * 1024;

impl RecvSink for State {
    fn deliver(&mut self, peer: PeerId, packet: &[u8]) {
        self.handle_packet(peer.0, packet);
    }

    /// A packet made of exactly one Data chunk for a contiguous receive, or of one eager
    /// message that a contiguous posted receive takes: the rest of it goes straight to its
    /// place in the user buffer.
    fn place(&mut self, peer: PeerId, head: &[u8], total_len: usize) -> Option<Placement> {
        let h = Header::decode(head).ok()?;
        if h.kind() != Some(Kind::Data) {
            return self.place_message(peer.0, &h, head, total_len);
        }
        if HDR_LEN + h.len as usize != total_len {
            return None;
        }
        let Some(Request {
            op: Op::Recv(rv), ..
        }) = self.reqs.get(RequestId(h.aux))
        else {
            return None;
        };
        if rv.target.layout.is_some() {
            return None;
        }
        let off = (h.msg_len as usize).min(rv.target.cap);
        let n = (h.len as usize).min(rv.target.cap - off);
        // SAFETY: [off, off+n) lies in the receive buffer, valid and untouched by anything else
        // until this request completes, which cannot happen before `placed`.
        Some(unsafe { Placement::new(rv.target.ptr.add(off), n) })
    }

    fn placed(&mut self, peer: PeerId, head: &[u8], total_len: usize) {
        crate::trace::received_placed(peer.0, head, total_len);
        let Ok(h) = Header::decode(head) else { return };
        if h.kind() == Some(Kind::Eager) {
            if let Some(rid) = self.gates[peer.0 as usize].placing.take() {
                if h.flags & wire::FLAG_SYNC != 0 {
                    self.queue_ctrl(peer.0, Kind::SyncAck, 0, h.sreq, 0);
                }
                self.complete(rid);
            }
            return;
        }
        // The start of a rendezvous message, sent with its RTS, or a fragment.
        let id = if h.kind() == Some(Kind::Rts) {
            match self.gates[peer.0 as usize].placing.take() {
                Some(rid) => rid,
                None => return,
            }
        } else {
            RequestId(h.aux)
        };
        let Some(Request {
            op: Op::Recv(rv), ..
        }) = self.reqs.get_mut(id)
        else {
            return self.peer_error(format!(
                "from rank {}: placed data for an unknown request",
                peer.0
            ));
        };
        rv.got += h.len as u64;
        let done = rv.got >= rv.msg_len;
        if !self.splits.is_empty() && h.kind() == Some(Kind::Data) {
            self.split_data(peer.0, id, h.len as usize, done);
        }
        if done {
            self.complete(id);
        }
    }
}

impl State {
    /// [`RecvSink::place`] for a packet made of one message chunk (`h`, whose first bytes are
    /// `head`): an eager message, or an RTS carrying the start of its message (`FLAG_PREFIX`).
    /// Matched now against the posted receives, as `handle_chunk` would match it (the driver
    /// hands packets over in order, so every earlier message has been matched), if the receive
    /// that takes it is contiguous; the payload bytes already in `head` are copied, the
    /// placement is the rest of what fits, and `placed` finishes the receive. An RTS gets its
    /// Cts queued at once, and the driver lets it leave before reading on
    /// (`Placement::reply_first`), so that the sender streams the rest while the start is still
    /// arriving. `None`, having matched nothing, for the general path.
    fn place_message(
        &mut self,
        peer: u32,
        h: &Header,
        head: &[u8],
        total_len: usize,
    ) -> Option<Placement> {
        let rts = h.carries_start();
        if !rts && h.kind() != Some(Kind::Eager) {
            return None;
        }
        let (hdr_len, len) = (h.wire_len(), h.len as usize);
        if hdr_len + wire::pad8(len) != total_len {
            return None;
        }
        let rid = self.take_posted_contiguous(peer, h)?;
        if rts {
            crate::trace::placing(peer, head);
            let body = UBody::Rts {
                addr: h.aux,
                table: None,
                stream: h.flags & wire::FLAG_STREAM != 0,
                prefix: Vec::new(),
                start: h.len as usize,
            };
            self.deliver(rid, Unexpected::of(peer, h, body));
        } else {
            self.matched(rid, h.src, h.tag, peer, len as u64);
        }
        self.gates[peer as usize].placing = Some(rid);
        let Some(Request {
            op: Op::Recv(rv), ..
        }) = self.reqs.get(rid)
        else {
            unreachable!("a posted receive, taken above");
        };
        let inline = &head[hdr_len.min(head.len())..];
        let inline = &inline[..inline.len().min(len)];
        // SAFETY: the receive buffer is valid until completion; write_at clips to cap.
        unsafe { rv.target.write_at(0, inline) };
        let done = inline.len().min(rv.target.cap);
        let rest = len.min(rv.target.cap) - done;
        // SAFETY: [done, done + rest) lies in the receive buffer, valid and untouched by
        // anything else until this request completes, which cannot happen before `placed` (for
        // an RTS, the fragments after the Cts come behind the start on the same connection) or
        // the loss of the peer.
        let p = unsafe { Placement::new(rv.target.ptr.add(done), rest) };
        if !self.order[peer as usize].is_empty() {
            self.release_held(peer);
        }
        Some(if rts { p.reply_first() } else { p })
    }

    /// The oldest posted receive that matches the message of `h`, from world rank `peer`,
    /// taken out of the posted queue if it is contiguous (a placement needs one span); `None`,
    /// leaving everything as it was, if there is none or a placement from `peer` is under way.
    fn take_posted_contiguous(&mut self, peer: u32, h: &Header) -> Option<RequestId> {
        if self.gates.get(peer as usize)?.placing.is_some()
            || h.seq != self.order[peer as usize].expect
        {
            // (A message before its turn is delivered whole, and held.)
            return None;
        }
        let q = self.peer_mq(h.ctx)?;
        let pos = q.find_posted(h.src, h.tag)?;
        let rid = q.posted[pos].2;
        match self.reqs.get(rid) {
            Some(Request {
                op: Op::Recv(rv), ..
            }) if rv.target.layout.is_none() => {}
            _ => return None,
        }
        self.mq(h.ctx).posted.remove(pos);
        let o = &mut self.order[peer as usize];
        o.expect = o.expect.wrapping_add(1);
        Some(rid)
    }
}

/// Whether a message of `count` elements of a sparse type is better sent by gathering its
/// blocks (one gathering write per fragment) than by packing: blocks large enough that the
/// per-block cost of the write is below the cost of copying them.
fn gather_worthy(dt: &Datatype, count: usize) -> bool {
    const MIN_AVG_BLOCK: usize = 2048;
    let s = dt.block_stats(count);
    s.segments > 0 && s.bytes / s.segments >= MIN_AVG_BLOCK
}

fn bad_request() -> Error {
    Error::new(ErrorClass::Request, "invalid request handle")
}

fn check_type(dt: &Datatype) -> Result<()> {
    if !dt.is_committed() {
        return err(
            ErrorClass::Type,
            "datatype not committed (call MPI_Type_commit)",
        );
    }
    Ok(())
}

/// The destination and tag of a send: a rank of `c` or MPI_PROC_NULL; a tag in 0..=TAG_UB
/// (checked for MPI_PROC_NULL too, as in MPICH and Open MPI).
fn check_dest_tag(c: &Comm, dest: i32, tag: i32) -> Result<()> {
    if dest != PROC_NULL && (dest < 0 || dest >= c.peer_count()) {
        return err(
            ErrorClass::Rank,
            format!(
                "invalid destination rank {dest} (communicator size {})",
                c.peer_count()
            ),
        );
    }
    if !(0..=TAG_UB).contains(&tag) {
        return err(
            ErrorClass::Tag,
            format!("invalid tag {tag} (must be 0..={TAG_UB})"),
        );
    }
    Ok(())
}

/// The source and tag of a receive or probe: a rank of `c`, MPI_ANY_SOURCE or MPI_PROC_NULL; a
/// tag in 0..=TAG_UB or MPI_ANY_TAG (checked for MPI_PROC_NULL too, as in MPICH and Open MPI).
fn check_src_tag(c: &Comm, src: i32, tag: i32) -> Result<()> {
    if src != ANY_SOURCE && src != PROC_NULL && (src < 0 || src >= c.peer_count()) {
        return err(
            ErrorClass::Rank,
            format!(
                "invalid source rank {src} (communicator size {})",
                c.peer_count()
            ),
        );
    }
    if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
        return err(
            ErrorClass::Tag,
            format!("invalid tag {tag} (must be 0..={TAG_UB} or MPI_ANY_TAG)"),
        );
    }
    Ok(())
}

fn recv_target(buf: *mut u8, count: usize, dt: &Datatype) -> Result<RecvTarget> {
    let cap = count
        .checked_mul(dt.size())
        .ok_or_else(|| Error::new(ErrorClass::Count, format!("count {count} overflows")))?;
    Ok(match dt.contiguous_span(count) {
        Some((off, _)) => RecvTarget {
            ptr: buf.wrapping_offset(off),
            cap,
            layout: None,
        },
        None => RecvTarget {
            ptr: buf,
            cap,
            layout: Some(Box::new((buf, dt.clone(), count))),
        },
    })
}

/// The piece table of a zero-copy rendezvous (RTS payload with `FLAG_PIECES`):
/// `u32 nremote, u32 0`, then `nremote` × `(u64 stream offset, u64 address, u64 length)`, then the
/// bytes of the stream not covered by those blocks, in stream order. Blocks of at least
/// `min_block` bytes are remote; the table must fit in `max_len`. `None` when zero copy does not
/// pay (no large block, or too many / too much inline data): the caller packs instead.
///
/// # Safety
/// `buf` must hold `count` elements of `dt`.
unsafe fn piece_table(
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    min_block: usize,
    max_len: usize,
) -> Option<Vec<u8>> {
    const MAX_REMOTE: usize = 256;
    let bytes = count * dt.size();
    if dt.block_stats(count).max_len < min_block {
        return None;
    }
    let mut remote: Vec<(u64, u64, u64)> = Vec::new();
    let mut inline: Vec<u8> = Vec::new();
    let mut off = 0usize;
    for (mem, len) in dt.segments(count, 0..bytes) {
        let p = buf.wrapping_offset(mem);
        if len >= min_block {
            if remote.len() == MAX_REMOTE {
                return None;
            }
            remote.push((off as u64, p as u64, len as u64));
        } else {
            if 8 + (remote.len() + 1) * 24 + inline.len() + len > max_len {
                return None;
            }
            inline.extend_from_slice(std::slice::from_raw_parts(p, len));
        }
        off += len;
    }
    if remote.is_empty() || 8 + remote.len() * 24 + inline.len() > max_len {
        return None;
    }
    let mut t = Vec::with_capacity(8 + remote.len() * 24 + inline.len());
    t.extend_from_slice(&(remote.len() as u32).to_le_bytes());
    t.extend_from_slice(&0u32.to_le_bytes());
    for (o, a, l) in &remote {
        t.extend_from_slice(&o.to_le_bytes());
        t.extend_from_slice(&a.to_le_bytes());
        t.extend_from_slice(&l.to_le_bytes());
    }
    t.extend_from_slice(&inline);
    Some(t)
}

/// Receiver side of [`piece_table`]: write the inline bytes into place and return the blocks to
/// pull. Everything from the peer is checked: ranges in order, inside the message, and inline
/// bytes exactly filling the gaps.
///
/// # Safety
/// The receive buffer of `target` must be valid.
unsafe fn apply_piece_table(
    target: &RecvTarget,
    t: &[u8],
    msg_len: u64,
) -> std::result::Result<Vec<(u64, u64, u64)>, String> {
    let rd = |i: usize| -> std::result::Result<u64, String> {
        t.get(i..i + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .ok_or_else(|| "truncated table".to_string())
    };
    let n = t
        .get(0..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .ok_or("truncated table")? as usize;
    if n > 4096 || 8 + n * 24 > t.len() {
        return Err(format!(
            "{n} blocks do not fit a table of {} bytes",
            t.len()
        ));
    }
    let mut ranges = Vec::with_capacity(n);
    let mut inline = &t[8 + n * 24..];
    let mut cursor = 0u64;
    for i in 0..=n {
        let (o, a, l) = if i < n {
            (rd(8 + i * 24)?, rd(16 + i * 24)?, rd(24 + i * 24)?)
        } else {
            (msg_len, 0, 0)
        };
        let end = o
            .checked_add(l)
            .filter(|&e| e <= msg_len)
            .ok_or("block beyond the message")?;
        let gap = o.checked_sub(cursor).ok_or("blocks out of order")? as usize;
        if gap > inline.len() {
            return Err("inline data shorter than the gaps".into());
        }
        target.write_at(cursor as usize, &inline[..gap]);
        inline = &inline[gap..];
        if i < n {
            ranges.push((o, a, l));
        }
        cursor = end;
    }
    if !inline.is_empty() {
        return Err("inline data longer than the gaps".into());
    }
    Ok(ranges)
}

/// # Safety
/// `ptr` must be valid for `len` bytes (or `len == 0`).
#[inline]
unsafe fn raw_slice<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr, len)
    }
}

#[cfg(test)]
mod sim;
