//! One TCP connection and what flows on it once it is established.
//!
//! # What it owns
//!
//! The [`Conn`] state (socket, handshake phase, receive buffer and read-ahead, the partly
//! written packet, a placement in progress), the frame format (header, kinds,
//! [`frame_header`]), reading and writing a connection (`flush`, `read`,
//! `TcpTransport::write_packet`), delivering or placing the frames of its receive buffer
//! ([`parse`], `TcpTransport::service`), and the large receive buffers lent by [`RxPool`].
//!
//! # What it must never do
//!
//! Decide a peer's fate: a connection that fails is reported as a [`Fail`] to `peers.rs`
//! (which closes it, dials again or loses the peer). It never dials, accepts or closes a
//! socket, never waits on epoll, and never blocks.

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

use super::handshake::{self, Role, NONCE_LEN};
use super::{sys, TcpTransport};
use crate::{Error, PeerId, RecvSink, Result, SendOutcome, SplitParams};

/// Bytes of a frame header.
pub(super) const FRAME_HDR: usize = 8;
/// Packets up to this size (with their frame header) are gathered into one buffer and
/// written with `send` instead of `sendmsg`.
pub(super) const SMALL_WRITE: usize = 2048;
/// First byte of every frame header.
const FRAME_MAGIC: u8 = 0xA7;
/// Frame kind: a packet.
pub(super) const KIND_PACKET: u8 = 0;
/// Frame kind: the sender is closing (no payload).
pub(super) const KIND_BYE: u8 = 1;
/// Initial (and minimum) receive buffer of a connection.
pub(super) const RX_INITIAL: usize = 64 << 10;
/// Compact the receive buffer before reading when less than this is free at its end.
pub(super) const RX_MIN_FREE: usize = 16 << 10;
/// Reads per connection per poll, at most (fairness between peers).
const READS_PER_POLL: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Non-blocking `connect` in flight (connector only).
    Connecting,
    /// Our hello is sent; waiting for the peer's.
    AwaitHello,
    /// Waiting for the peer's proof (connector: with the verdict).
    AwaitAuth,
    /// Authenticated: frames flow.
    Established,
}

/// The rest of a packet being read into engine memory.
#[derive(Debug)]
struct Direct {
    ptr: *mut u8,
    /// Bytes still to write at `ptr`.
    left: usize,
    /// Bytes to drop after that (the placement was shorter than the packet).
    discard: usize,
    total: usize,
}

#[derive(Debug)]
pub(super) struct Conn {
    pub(super) fd: OwnedFd,
    /// Since when the kernel has been retransmitting on this connection without an
    /// acknowledgement (the link may have failed: `check_links`).
    pub(super) suspect_since: Option<std::time::Instant>,
    pub(super) token: u64,
    pub(super) remote: String,
    pub(super) role: Role,
    pub(super) phase: Phase,
    /// The peer's rank: the dialled one (connector), or the claimed one after its hello.
    pub(super) peer: Option<u32>,
    pub(super) nonce: [u8; NONCE_LEN],
    pub(super) peer_nonce: [u8; NONCE_LEN],
    pub(super) deadline: Option<Instant>,
    pub(super) readable: bool,
    pub(super) writable: bool,
    /// In the work list.
    pub(super) queued: bool,
    pub(super) rx: Vec<u8>,
    /// The small receive buffer, kept while `rx` is a large one from the pool (so that going
    /// back to it allocates nothing: a stream of large packets would otherwise allocate and
    /// fault in a fresh small buffer after each).
    rx_small: Vec<u8>,
    pub(super) rx_start: usize,
    pub(super) rx_end: usize,
    /// The frame at `rx_start` was offered to `place` and declined.
    offered: bool,
    direct: Option<Direct>,
    /// The head of the packet in `direct`, for `placed`.
    head: Vec<u8>,
    pub(super) out: Vec<u8>,
    pub(super) out_off: usize,
    /// The peer sent its goodbye.
    pub(super) bye: bool,
    /// The last packet with a payload was placed (not delivered whole).
    last_placed: bool,
    /// Stop reading this connection for this poll and let the engine run first: it accepted a
    /// placement asking to answer first (`Placement::reply_first`), or declined to place a
    /// packet that came right behind one it had placed (see `parse`).
    reply_first: bool,
}

impl Conn {
    pub(super) fn new(fd: OwnedFd, token: u64, remote: String, role: Role, phase: Phase) -> Conn {
        Conn {
            fd,
            suspect_since: None,
            token,
            remote,
            role,
            phase,
            peer: None,
            nonce: [0; NONCE_LEN],
            peer_nonce: [0; NONCE_LEN],
            deadline: None,
            readable: false,
            writable: false,
            queued: false,
            rx: Vec::new(),
            rx_small: Vec::new(),
            rx_start: 0,
            rx_end: 0,
            offered: false,
            direct: None,
            head: Vec::new(),
            out: Vec::new(),
            out_off: 0,
            bye: false,
            last_placed: false,
            reply_first: false,
        }
    }

    pub(super) fn out_pending(&self) -> bool {
        self.out_off < self.out.len()
    }

    pub(super) fn rx_len(&self) -> usize {
        self.rx_end - self.rx_start
    }

    /// Write the pending output; `Ok(true)` when all of it is out.
    pub(super) fn flush(&mut self) -> io::Result<bool> {
        while self.out_pending() {
            let rest = &self.out[self.out_off..];
            let iov = [libc::iovec {
                iov_base: rest.as_ptr() as *mut libc::c_void,
                iov_len: rest.len(),
            }];
            // SAFETY: the iovec describes `rest`, alive for the call.
            match unsafe { sys::sendmsg(self.fd.as_fd(), &iov) } {
                Ok(n) => {
                    self.out_off += n;
                    if n < rest.len() {
                        self.writable = false;
                        return Ok(false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.writable = false;
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.out_off = 0;
        Ok(true)
    }

    /// Make room in the receive buffer for at least `need` bytes from `rx_start`, and some
    /// free space at its end to read ahead into. A buffer too small for `need` is swapped for
    /// a large one from `pool`.
    fn rx_reserve(&mut self, need: usize, pool: &mut RxPool) {
        if self.rx_start == self.rx_end {
            self.rx_start = 0;
            self.rx_end = 0;
        }
        let fits =
            |c: &Conn| c.rx.len() - c.rx_start >= need && c.rx.len() - c.rx_end >= RX_MIN_FREE;
        if fits(self) {
            return;
        }
        if self.rx_start > 0 {
            self.rx.copy_within(self.rx_start..self.rx_end, 0);
            self.rx_end -= self.rx_start;
            self.rx_start = 0;
        }
        if fits(self) {
            return;
        }
        let required = need.max(self.rx_end + RX_MIN_FREE);
        let mut new = if required <= RX_INITIAL {
            vec![0; RX_INITIAL]
        } else {
            pool.take(required)
        };
        new[..self.rx_end].copy_from_slice(&self.rx[..self.rx_end]);
        let old = std::mem::replace(&mut self.rx, new);
        if old.len() == RX_INITIAL && self.rx_small.is_empty() {
            self.rx_small = old;
        } else {
            pool.give(old);
        }
    }

    /// Hand a large receive buffer back to `pool` once it is empty, so that a connection that
    /// once received a large packet does not keep a large buffer forever.
    fn rx_shrink(&mut self, pool: &mut RxPool) {
        if self.rx_start == self.rx_end && self.rx.len() > RX_INITIAL && self.direct.is_none() {
            self.rx_start = 0;
            self.rx_end = 0;
            let small = match std::mem::take(&mut self.rx_small) {
                b if b.len() == RX_INITIAL => b,
                _ => vec![0; RX_INITIAL],
            };
            pool.give(std::mem::replace(&mut self.rx, small));
        }
    }

    /// Read once into the receive buffer (or straight into a placement, with the buffer
    /// behind it). Returns (bytes read, bytes asked for); 0 bytes read is EOF.
    /// At most `limit` bytes go to the receive buffer.
    pub(super) fn read(&mut self, limit: usize) -> io::Result<(usize, usize)> {
        let (ptr, left) = match &self.direct {
            Some(d) if d.left > 0 => (d.ptr, d.left),
            _ => (std::ptr::null_mut(), 0),
        };
        let end = self.rx.len().min(self.rx_end.saturating_add(limit));
        let free = &mut self.rx[self.rx_end..end];
        if left == 0 {
            let asked = free.len();
            let n = sys::recv(self.fd.as_fd(), free)?;
            self.rx_end += n;
            return Ok((n, asked));
        }
        let iov = [
            libc::iovec {
                iov_base: ptr.cast(),
                iov_len: left,
            },
            libc::iovec {
                iov_base: free.as_mut_ptr().cast(),
                iov_len: free.len(),
            },
        ];
        let asked = left + free.len();
        // SAFETY: the first iovec is the unwritten part of a placement, which the engine keeps
        // valid and untouched until `placed` (contract of `Placement::new`); the second is our
        // own buffer.
        let n = unsafe { sys::readv(self.fd.as_fd(), &iov) }?;
        let into_dst = n.min(left);
        let d = self.direct.as_mut().expect("checked above");
        // SAFETY: `into_dst <= left`, so the pointer stays inside the placement.
        d.ptr = unsafe { d.ptr.add(into_dst) };
        d.left -= into_dst;
        self.rx_end += n - into_dst;
        Ok((n, asked))
    }
}

/// Large receive buffers (room for a frame of `max_packet` bytes and some read-ahead), lent
/// to connections receiving a packet larger than their small buffer: memory stays bounded by
/// the connections that are receiving a large packet right now, not by all connections that
/// ever did.
#[derive(Debug)]
pub(super) struct RxPool {
    pub(super) size: usize,
    pub(super) spare: Vec<Vec<u8>>,
}

/// Spare large buffers kept at most.
pub(super) const RX_POOL_KEEP: usize = 2;

impl RxPool {
    fn take(&mut self, at_least: usize) -> Vec<u8> {
        match self.spare.pop() {
            Some(b) if b.len() >= at_least => b,
            _ => vec![0; self.size.max(at_least)],
        }
    }

    fn give(&mut self, b: Vec<u8>) {
        if b.len() == self.size && self.spare.len() < RX_POOL_KEEP {
            self.spare.push(b);
        }
    }
}

/// What a valid frame header announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameHead {
    /// A packet of this many bytes follows.
    Packet(usize),
    /// The peer is closing.
    Bye,
}

/// Decode a frame header (no state: `parse` acts on the answer); the error says what is wrong
/// with it. A packet longer than `max_packet` is an error, so that no buffer is ever sized by a
/// length the peer made up.
pub(crate) fn decode_frame_header(
    h: &[u8; FRAME_HDR],
    max_packet: usize,
) -> std::result::Result<FrameHead, String> {
    if h[0] != FRAME_MAGIC || h[1] != handshake::VERSION as u8 || h[3] != 0 {
        return Err(format!("malformed frame header {:02x?}", &h[..4]));
    }
    let kind = h[2];
    let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
    match kind {
        KIND_BYE if len == 0 => Ok(FrameHead::Bye),
        KIND_PACKET if len <= max_packet => Ok(FrameHead::Packet(len)),
        KIND_PACKET => Err(format!(
            "frame of {len} bytes exceeds max_packet {max_packet}"
        )),
        _ => Err(format!("unknown frame kind {kind} (length {len})")),
    }
}

/// Encode a frame header.
#[inline]
pub(super) fn frame_header(kind: u8, len: usize) -> [u8; FRAME_HDR] {
    let l = (len as u32).to_le_bytes();
    [
        FRAME_MAGIC,
        handshake::VERSION as u8,
        kind,
        0,
        l[0],
        l[1],
        l[2],
        l[3],
    ]
}

/// Why a connection stopped, as the engine sees it.
pub(super) enum Fail {
    /// Close it, log the reason, and (if authenticated) lose the peer; an attempt of ours is
    /// retried.
    Bad(String),
    /// Like `Bad`, and an attempt of ours is not retried: the peer is lost.
    Fatal(String),
    /// Orderly end (EOF after a goodbye).
    Closed,
}

impl TcpTransport {
    /// Pending output, then (with a sink) incoming frames of an established connection.
    pub(super) fn service(
        &mut self,
        idx: usize,
        sink: Option<(SplitParams, &mut dyn RecvSink)>,
        count: &mut usize,
    ) -> std::result::Result<(), Fail> {
        let max_packet = self.cfg.max_packet;
        let c = self.conns[idx].as_mut().expect("live connection");
        let pool = &mut self.pool;
        if c.writable && c.out_pending() {
            if let Err(e) = c.flush() {
                return Err(Fail::Bad(format!("write: {e}")));
            }
        }
        let Some((split, sink)) = sink else {
            return Ok(());
        };
        let peer = c.peer.expect("established connections know their peer");
        let mut stats = (0u64, 0u64);
        let mut parse = |c: &mut Conn, pool: &mut RxPool| {
            parse(c, pool, peer, max_packet, split, &mut *sink, &mut stats)
        };
        let r = (|| {
            parse(c, pool)?;
            for _ in 0..READS_PER_POLL {
                if c.reply_first {
                    break;
                }
                if !c.readable {
                    break;
                }
                c.rx_reserve(0, pool);
                // While placing a packet, and after one, the next is likely large too: read
                // only up to its head, so that its payload goes straight to where the engine
                // wants it instead of through our buffer (one more system call per large
                // packet, one copy of up to 64 KiB less).
                let limit = if c.direct.is_some() || (c.last_placed && c.rx_len() == 0) {
                    FRAME_HDR + split.head_len
                } else {
                    usize::MAX
                };
                match c.read(limit) {
                    Ok((0, _)) => {
                        parse(c, pool)?;
                        return Err(if c.bye {
                            Fail::Closed
                        } else if c.rx_len() > 0 || c.direct.is_some() {
                            Fail::Bad("connection closed in the middle of a packet".into())
                        } else {
                            Fail::Bad("connection closed by the peer".into())
                        });
                    }
                    Ok((n, asked)) => {
                        if n < asked {
                            c.readable = false;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => c.readable = false,
                    // After a goodbye, a reset (our late packet hit a closed socket) is the
                    // same orderly end.
                    Err(_) if c.bye => return Err(Fail::Closed),
                    Err(e) => return Err(Fail::Bad(format!("read: {e}"))),
                }
                parse(c, pool)?;
            }
            if c.reply_first {
                // The engine answers before this connection is read further; the rest
                // (buffered or not) is taken at the next poll, which `readable` asks for.
                c.reply_first = false;
                c.readable = true;
            }
            c.rx_shrink(pool);
            Ok(())
        })();
        self.stats.packets_delivered += stats.0;
        self.stats.packets_placed += stats.1;
        *count += (stats.0 + stats.1) as usize;
        r
    }

    /// Write one packet on an established, writable connection with nothing pending.
    pub(super) fn write_packet(
        &mut self,
        idx: usize,
        iov: &[IoSlice<'_>],
        len: usize,
    ) -> Result<SendOutcome> {
        let hdr = frame_header(KIND_PACKET, len);
        let total = FRAME_HDR + len;
        let mut list = std::mem::take(&mut self.iov);
        list.clear();
        // A small packet is gathered here and written as one buffer: cheaper for the kernel
        // than a message header and an iovec array to copy in and walk.
        let mut small = std::mem::take(&mut self.small);
        small.clear();
        if total <= SMALL_WRITE {
            small.extend_from_slice(&hdr);
            for s in iov {
                small.extend_from_slice(s);
            }
            list.push(libc::iovec {
                iov_base: small.as_mut_ptr() as *mut libc::c_void,
                iov_len: total,
            });
        } else {
            list.push(libc::iovec {
                iov_base: hdr.as_ptr() as *mut libc::c_void,
                iov_len: FRAME_HDR,
            });
            list.extend(iov.iter().filter(|s| !s.is_empty()).map(|s| libc::iovec {
                iov_base: s.as_ptr() as *mut libc::c_void,
                iov_len: s.len(),
            }));
        }
        let mut sent = 0usize;
        let mut first = 0usize;
        let c = self.conns[idx].as_mut().expect("live connection");
        let mut failure = None;
        while sent < total {
            let window = &list[first..list.len().min(first + crate::sys::IOV_MAX)];
            let want: usize = window.iter().map(|v| v.iov_len).sum();
            let wrote = match window {
                // SAFETY: the entry points into `small`, `hdr` or a caller's slice, alive
                // for the call.
                [one] => sys::send(c.fd.as_fd(), unsafe {
                    std::slice::from_raw_parts(one.iov_base as *const u8, one.iov_len)
                }),
                // SAFETY: every entry points into `small`, `hdr` or the caller's slices,
                // alive for the call.
                _ => unsafe { sys::sendmsg(c.fd.as_fd(), window) },
            };
            match wrote {
                Ok(n) => {
                    sent += n;
                    // Skip what was written.
                    let mut k = n;
                    while k > 0 {
                        let v = &mut list[first];
                        if k >= v.iov_len {
                            k -= v.iov_len;
                            first += 1;
                        } else {
                            // SAFETY: `k < iov_len`, so the pointer stays inside the entry.
                            v.iov_base = unsafe { v.iov_base.cast::<u8>().add(k) }.cast();
                            v.iov_len -= k;
                            k = 0;
                        }
                    }
                    if n < want {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let outcome = if let Some(e) = failure {
            Err(e)
        } else if sent == 0 {
            c.writable = false;
            Ok(SendOutcome::WouldBlock)
        } else {
            if sent < total {
                c.writable = false;
                for v in &list[first..] {
                    // SAFETY: the entry describes the unsent part of `small`, `hdr` or a caller slice.
                    let s =
                        unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len) };
                    c.out.extend_from_slice(s);
                }
                self.stats.partial_writes += 1;
                self.stats.bytes_buffered += (total - sent) as u64;
            }
            Ok(SendOutcome::Done)
        };
        list.clear();
        self.iov = list;
        self.small = small;
        match outcome {
            Ok(o) => {
                if o == SendOutcome::Done {
                    self.stats.packets_sent += 1;
                } else {
                    self.stats.would_block += 1;
                }
                Ok(o)
            }
            Err(e) => {
                let c = self.conn(idx);
                let p = c.peer.expect("established connections know their peer");
                let f = if c.bye {
                    Fail::Closed
                } else {
                    Fail::Bad(format!("write: {e}"))
                };
                self.fail(idx, f);
                Err(Error::PeerLost(PeerId(p)))
            }
        }
    }
}

/// Deliver or place every complete frame in a connection's buffer.
fn parse(
    c: &mut Conn,
    pool: &mut RxPool,
    peer: u32,
    max_packet: usize,
    split: SplitParams,
    sink: &mut dyn RecvSink,
    stats: &mut (u64, u64),
) -> std::result::Result<(), Fail> {
    let from = PeerId(peer);
    loop {
        if let Some(d) = &mut c.direct {
            let take = (c.rx_end - c.rx_start).min(d.left);
            if take > 0 {
                // SAFETY: `take <= left`: inside the placement, which the engine keeps valid
                // and untouched until `placed`; the source is our buffer, not overlapping it.
                unsafe {
                    std::ptr::copy_nonoverlapping(c.rx.as_ptr().add(c.rx_start), d.ptr, take);
                    d.ptr = d.ptr.add(take);
                }
                d.left -= take;
                c.rx_start += take;
            }
            let drop_n = (c.rx_end - c.rx_start).min(d.discard);
            d.discard -= drop_n;
            c.rx_start += drop_n;
            if d.left > 0 || d.discard > 0 {
                break;
            }
            let total = d.total;
            c.direct = None;
            c.last_placed = true;
            sink.placed(from, &c.head, total);
            stats.1 += 1;
            continue;
        }
        let avail = c.rx_len();
        if avail < FRAME_HDR {
            c.rx_reserve(FRAME_HDR, pool);
            break;
        }
        let h = c.rx[c.rx_start..c.rx_start + FRAME_HDR]
            .try_into()
            .expect("FRAME_HDR bytes");
        let len = match decode_frame_header(h, max_packet).map_err(Fail::Bad)? {
            FrameHead::Bye => {
                c.rx_start += FRAME_HDR;
                c.bye = true;
                continue;
            }
            FrameHead::Packet(len) => len,
        };
        if c.bye {
            return Err(Fail::Bad("packet after goodbye".into()));
        }
        let body = c.rx_start + FRAME_HDR;
        if !c.offered
            && split.head_len > 0
            && len >= split.head_len.saturating_add(split.min_rest)
            && len > split.head_len
        {
            if avail < FRAME_HDR + split.head_len {
                c.rx_reserve(FRAME_HDR + split.head_len, pool);
                break;
            }
            let head = &c.rx[body..body + split.head_len];
            match sink.place(from, head, len) {
                Some(p) => {
                    let rest = len - split.head_len;
                    let into = p.len().min(rest);
                    c.head.clear();
                    c.head.extend_from_slice(head);
                    c.direct = Some(Direct {
                        ptr: p.as_mut_ptr(),
                        left: into,
                        discard: rest - into,
                        total: len,
                    });
                    c.rx_start = body + split.head_len;
                    if p.wants_reply_first() {
                        // What is already buffered goes into the placement at the next poll.
                        c.reply_first = true;
                        break;
                    }
                    continue;
                }
                // Right behind a packet placed in this poll (`stats.1` counts this service's
                // placements: the next RTS or fragment of a stream), the receive is most
                // likely about to be posted: the engine has not yet seen the previous one
                // complete. It gets to run before the payload is read, which would otherwise go
                // through our buffer (and an unexpected message) instead of straight where it
                // belongs, and delay the reply. If it declines again at the next poll, the
                // packet is read whole.
                None if stats.1 > 0 => {
                    c.reply_first = true;
                    break;
                }
                None => c.offered = true,
            }
        }
        if avail < FRAME_HDR + len {
            c.rx_reserve(FRAME_HDR + len, pool);
            break;
        }
        sink.deliver(from, &c.rx[body..body + len]);
        // A packet with no payload (a Cts, an acknowledgement) between the fragments of large
        // messages does not end the run of them.
        if len > split.head_len {
            c.last_placed = false;
        }
        stats.0 += 1;
        c.rx_start = body + len;
        c.offered = false;
    }
    if c.rx_start == c.rx_end {
        c.rx_start = 0;
        c.rx_end = 0;
    }
    Ok(())
}

#[cfg(test)]
#[path = "fuzz.rs"]
mod fuzz;
