//! The progress loop: the engine's side that calls drivers. Packets the strategy commits are
//! built by [`with_packet`] (the one place that turns queued chunks into what a driver sends,
//! also used by the simulation), handed to the rails' drivers, and every driver is polled.
//! Rendezvous `get`s and the help with split copies run here too. This module never blocks and
//! never sleeps; waiting lives in `api`.

use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut};

use madmpi_transports::{PeerId, RemoteRegion, SendOutcome, SplitParams, Transport};

use super::rails::{DriverId, Drivers};
use super::strategy;
use super::{
    gate_for, gather_worthy, pad_len, raw_slice, wire, Engine, Gate, NotPacked, OutChunk, Route,
    State, Strategy, KIND_PACKED, PAD, SPLIT_MIN,
};
use crate::error::{err, ErrorClass, Result};
use crate::request::{Op, Request, RequestId, SendOp};
use crate::wire::{Header, Kind, HDR_LEN};
use crate::CommId;
use madmpi_datatypes::Datatype;

/// The packet made of the first `n` chunks of queue `q` (the gate's queue, whose packed marker
/// stands for `packed`, or a rail's pinned fragments), handed to `send` as an iovec of at most
/// `max_iov` entries. Fragments gathered from a sparse buffer go piece by piece, or packed when
/// they have more pieces than `max_iov`.
pub(crate) fn with_packet<R>(
    q: &VecDeque<OutChunk>,
    packed: &[u8],
    n: usize,
    max_iov: usize,
    send: impl FnOnce(&[IoSlice<'_>]) -> R,
) -> R {
    let first = q.front().expect("a packet of queued chunks");
    if n == 1 && first.gather.is_some() {
        let c = first;
        let hb = c.hdr.encode();
        let (dt, count) = c.gather.as_ref().expect("checked");
        let mut iov = Vec::with_capacity(8);
        iov.push(IoSlice::new(&hb));
        let mut whole = Vec::new();
        // SAFETY: the send buffer is valid until the request completes.
        for seg in unsafe { c.gathered() } {
            if iov.len() == max_iov {
                // Too many blocks for one gathering write: pack this fragment.
                whole = vec![0u8; c.len];
                // SAFETY: as above.
                unsafe { dt.pack(c.ptr, *count, c.hdr.msg_len as usize, &mut whole) };
                break;
            }
            iov.push(IoSlice::new(seg));
        }
        if !whole.is_empty() {
            iov.truncate(1);
            iov.push(IoSlice::new(&whole));
        }
        send(&iov)
    } else if n == 1 && first.hdr.kind == KIND_PACKED {
        send(&[IoSlice::new(packed)])
    } else if n == 1 {
        let hb = first.hdr.encode();
        // SAFETY: the chunk's payload is owned by a request that is not complete.
        let payload = unsafe { raw_slice(first.ptr, first.len) };
        send(&[IoSlice::new(&hb), IoSlice::new(payload)])
    } else {
        let hdrs: Vec<wire::Encoded> = q.iter().take(n).map(|c| c.hdr.encode()).collect();
        let mut iov = Vec::with_capacity(n * 3);
        for (c, hb) in q.iter().take(n).zip(hdrs.iter()) {
            if c.hdr.kind == KIND_PACKED {
                // Records complete with their headers and padding.
                iov.push(IoSlice::new(packed));
                continue;
            }
            iov.push(IoSlice::new(hb));
            // SAFETY: as above.
            iov.push(IoSlice::new(unsafe { raw_slice(c.ptr, c.len) }));
            let pad = pad_len(c.len);
            if pad > 0 {
                iov.push(IoSlice::new(&PAD[..pad]));
            }
        }
        send(&iov)
    }
}

/// The headers of the chunks of the packet made of the first `n` chunks of `q` (for the trace:
/// the records of the packed bytes are read back).
fn packet_headers(q: &VecDeque<OutChunk>, packed: &[u8], n: usize) -> Vec<Header> {
    let mut v = Vec::with_capacity(n);
    for c in q.iter().take(n) {
        if c.hdr.kind == KIND_PACKED {
            v.extend(
                wire::Chunks::new(packed)
                    .map_while(|c| c.ok())
                    .map(|(h, _)| h),
            );
        } else {
            v.push(c.hdr);
        }
    }
    v
}

/// Driver `drv` lost `peer`: its rail (`Offered::Busy`: the peer's other rails carry on) or
/// the peer.
fn lost(st: &mut State, peer: u32, drv: DriverId) -> Offered {
    st.driver_lost(peer, drv);
    if st.gates[peer as usize].dead {
        Offered::Lost
    } else {
        Offered::Busy
    }
}

/// What became of a packet offered to a rail.
enum Offered {
    Sent,
    Busy,
    /// The peer is gone (the gate is failed).
    Lost,
}

impl Engine {
    /// A new engine for world rank `me` of `nprocs`, with the given drivers. Each peer's rails
    /// are the best driver that reaches it, the other instances of that driver (one TCP driver
    /// per interface: several networks), and, of the other drivers that reach it, those
    /// `rails` names (`MADMPI_RAILS`).
    pub fn new(me: u32, nprocs: u32, drv: Drivers, strategy: Strategy, rails: &[&str]) -> Engine {
        let gates = (0..nprocs)
            .map(|p| {
                let peer = PeerId(p);
                let family = |i: DriverId| drv.families.get(i as usize).copied().unwrap_or("");
                let mut reach: Vec<(DriverId, &madmpi_transports::Caps)> = drv
                    .list
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| d.reaches(peer))
                    .map(|(i, d)| (i as DriverId, d.caps()))
                    .collect();
                // Best first, by the registry's preference; the best (all its instances), then
                // those asked for.
                reach.sort_by_key(|(_, c)| std::cmp::Reverse(c.preference));
                let best = reach.first().map_or("", |&(i, _)| family(i));
                let mut chosen: Vec<_> = reach
                    .iter()
                    .filter(|&&(i, _)| family(i) == best || rails.contains(&family(i)))
                    .copied()
                    .collect();
                // Message chunks take the first rail: the lowest latency.
                chosen.sort_by_key(|(_, c)| (c.latency_ns, std::cmp::Reverse(c.preference)));
                let g = gate_for(chosen);
                let names: Vec<&str> = g.rails.iter().map(|r| r.name).collect();
                tracing::debug!(
                    peer = p,
                    rails = ?names,
                    eager_max = g.eager_max,
                    get = g.can_get,
                    "transport"
                );
                g
            })
            .collect();
        let mut st = State::new(me, nprocs, gates, strategy);
        st.stats = crate::tool::Counters::with_drivers(drv.list.len());
        tracing::debug!(strategy = st.strat.name(), "engine");
        Engine { st, drv }
    }

    /// The fast path of a standard-mode send: a small contiguous message to a peer whose gate
    /// has nothing queued goes to the driver at once, with no request and no queueing (what the
    /// strategy would do with it anyway: a lone chunk on an idle gate leaves as it is). Returns
    /// `false`, having done nothing, when the message needs the general path: arguments to
    /// check and report, a non-contiguous or large message, a busy gate or driver, a dead peer.
    /// `coll`: on the communicator's collective context (a collective's message). `sreq`: the
    /// sender's request the message names (`NO_SREQ` for a send that has none).
    ///
    /// # Safety
    /// `buf` holds `count` elements of `dt` for the duration of the call.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn try_send_now(
        &mut self,
        buf: *const u8,
        count: usize,
        dt: &Datatype,
        dest: i32,
        tag: i32,
        comm: CommId,
        sreq: u64,
        coll: bool,
    ) -> Result<Option<u32>> {
        match self.st.fast_route(count, dt, dest, tag, comm, coll) {
            // SAFETY: forwarded caller contract.
            Some(r) => unsafe { self.send_routed(r, buf, sreq) },
            None => Ok(None),
        }
    }

    /// [`Engine::try_send_now`] of a message whose arguments are checked (`r`).
    ///
    /// # Safety
    /// `buf` holds the message `r` describes for the duration of the call.
    #[inline(always)]
    unsafe fn send_routed(&mut self, r: Route, buf: *const u8, sreq: u64) -> Result<Option<u32>> {
        let (peer, bytes) = (r.peer, r.bytes);
        let st = &mut self.st;
        let g = &st.gates[peer as usize];
        if !g.out.is_empty() || g.dead || bytes > g.eager_max {
            return Ok(None);
        }
        let driver = g.driver;
        let seq = g.seq.wrapping_add(1);
        let hb = r.eager(seq, sreq).encode();
        // SAFETY: the caller's buffer holds the message for the whole call.
        let payload = unsafe { raw_slice(buf.wrapping_offset(r.off), bytes) };
        let t0 = crate::trace::now();
        let Some(t) = self.drv.list.get_mut(driver as usize) else {
            return Ok(None);
        };
        let res = t.try_send2(PeerId(peer), &hb, payload);
        crate::trace::sent_now(peer, || t.caps().name, &hb, &res, t0);
        match res {
            Ok(SendOutcome::Done) => {
                let g = &mut st.gates[peer as usize];
                g.seq = seq;
                if g.resilient() {
                    st.retain(peer, &[&hb[..], payload].concat());
                }
                st.stats.eager_sends += 1;
                st.stats.packet(driver, peer, 1, hb.len() + bytes);
                Ok(Some(peer))
            }
            Ok(SendOutcome::WouldBlock) => Ok(None),
            Err(madmpi_transports::Error::PeerLost(p)) => {
                st.driver_lost(p.0, driver);
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A standard-mode non-blocking send that needs no queueing: the eager fast path
    /// ([`Engine::isend_routed`]) or, under a strategy that packs sends when they are posted,
    /// the packet being built ([`State::pack_routed`]; a message larger than the rail's
    /// `solo_min` takes the eager fast path). `None`, having done nothing, when it needs
    /// [`State::isend`].
    ///
    /// # Safety
    /// As [`State::isend`].
    #[inline]
    pub unsafe fn isend_fast(
        &mut self,
        buf: *const u8,
        count: usize,
        dt: &Datatype,
        dest: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<Option<RequestId>> {
        let Some(r) = self.st.fast_route(count, dt, dest, tag, comm, false) else {
            return Ok(None);
        };
        if !self.st.packs_on_post {
            // SAFETY: forwarded caller contract.
            return unsafe { self.isend_routed(r, buf) };
        }
        if self.st.lone_at_once {
            let epoch = self.st.epoch;
            // The first send to this peer since the last progress call leaves at once (when
            // the gate and driver are free); the next ones are packed (`Gate::lone_send`).
            if self.st.gates[r.peer as usize].lone_send(epoch) {
                // SAFETY: forwarded caller contract.
                if let Some(id) = unsafe { self.isend_routed(r, buf)? } {
                    return Ok(Some(id));
                }
            }
        }
        // SAFETY: forwarded caller contract.
        match unsafe { self.st.pack_routed(r, buf) } {
            Ok(id) => return Ok(Some(id)),
            // A full packet has nothing left to wait for: it leaves now if the driver takes
            // it (the receiver works on it while the next one is built), and this message
            // opens the next one.
            Err(NotPacked::Full) if self.schedule(r.peer)? => {
                let g = &mut self.st.gates[r.peer as usize];
                g.pack_limit = g.pack_limit.saturating_mul(2);
                // SAFETY: forwarded caller contract.
                if let Ok(id) = unsafe { self.st.pack_routed(r, buf) } {
                    return Ok(Some(id));
                }
            }
            Err(_) => {}
        }
        // A large message travels alone (`solo_min`): it leaves at once, as under `default`,
        // when nothing waits before it.
        if r.bytes > self.st.gates[r.peer as usize].solo_min {
            // SAFETY: forwarded caller contract.
            unsafe { self.isend_routed(r, buf) }
        } else {
            Ok(None)
        }
    }

    /// [`Engine::send_routed`] for a non-blocking send: the request is born complete, and
    /// stays cancellable while the receiver has not matched the message.
    ///
    /// # Safety
    /// As [`Engine::send_routed`].
    #[inline(always)]
    unsafe fn isend_routed(&mut self, r: Route, buf: *const u8) -> Result<Option<RequestId>> {
        // The message names its request (for a cancel), which is made once it has left.
        let rid = self.st.reqs.next_id();
        // SAFETY: forwarded caller contract.
        match unsafe { self.send_routed(r, buf, rid.0) } {
            Ok(Some(peer)) => {
                let made = (self.st.reqs)
                    .insert_with(|| Request::done(Op::Send(SendOp::new(peer, buf, 0))));
                debug_assert_eq!(made, rid);
                Ok(Some(made))
            }
            other => other.map(|_| None),
        }
    }

    /// `schedule`'s first case: the packet the send fast path built, alone in the queue of a
    /// gate of one rail, handed to the driver as one slice, with what `offer` and `sent` do
    /// for that one chunk only (no iovec to build, no chunk to dispatch on). True when the
    /// gate has nothing left to send (the packet left, or the peer is gone).
    #[inline]
    fn send_packed(&mut self, peer: u32) -> Result<bool> {
        let st = &mut self.st;
        let g = &mut st.gates[peer as usize];
        let drv = g.rails[0].drv;
        let Some(t) = self.drv.list.get_mut(drv as usize) else {
            return err(
                ErrorClass::Intern,
                format!("no transport reaches rank {peer}"),
            );
        };
        let t0 = crate::trace::now();
        let res = t.try_send(PeerId(peer), &[IoSlice::new(&g.packed)]);
        crate::trace::sent(
            peer,
            g.rails[0].name,
            || packet_headers(&g.out, &g.packed, 1),
            &res,
            t0,
        );
        match res {
            Ok(SendOutcome::Done) => {
                let (chunks, bytes) = (g.packed_n as u64, g.packed.len());
                // The packed marker (`OnSent::Nothing`) stands for its messages, complete
                // since they were posted.
                g.out.pop_front();
                g.packed.clear();
                g.packed_n = 0;
                st.stats.packet(drv, peer, chunks, bytes);
                Ok(true)
            }
            Ok(SendOutcome::WouldBlock) => Ok(false),
            Err(madmpi_transports::Error::PeerLost(p)) => {
                Ok(matches!(lost(st, p.0, drv), Offered::Lost))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// What a send posted off the fast path does under a strategy whose sends leave at once
    /// (`State::sends_leave_at_once`): hand the queued chunks to the drivers, as
    /// [`Engine::flush`], except that a gate where a burst leaves as one packet (no
    /// `pack_count`: TCP) keeps its chunks for the next progress call, where they leave
    /// together as under `aggreg`, when a send already left at once to that peer in this
    /// progress epoch or when the epoch before carried several sends (`Gate::epoch_sends`): a
    /// burst of sends too large to pack, or non-contiguous, is then one write, not one each.
    pub fn flush_posted(&mut self) -> Result<()> {
        if !self.st.lone_at_once {
            return self.flush();
        }
        let epoch = self.st.epoch;
        self.flush_unless(|g| g.pack_count == u32::MAX && !g.lone_send(epoch))
    }

    /// Hand queued chunks to the drivers, as the strategy packs them. Never blocks: a gate
    /// whose driver says "would block" keeps its chunks for the next call.
    pub fn flush(&mut self) -> Result<()> {
        self.flush_unless(|_| false)
    }

    /// [`Engine::flush`] of the gates for which `hold` says false (the others keep their
    /// chunks for a later call).
    #[inline(always)]
    fn flush_unless(&mut self, mut hold: impl FnMut(&mut Gate) -> bool) -> Result<()> {
        if self.st.dirty.is_empty() {
            return Ok(());
        }
        // The list keeps its buffer from call to call: no allocation per message.
        let mut dirty = std::mem::take(&mut self.st.dirty);
        let mut res = Ok(());
        dirty.retain(|&peer| {
            if hold(&mut self.st.gates[peer as usize]) {
                return true;
            }
            match self.schedule(peer) {
                Ok(true) => {
                    self.st.gates[peer as usize].queued = false;
                    false
                }
                Ok(false) => true,
                Err(e) => {
                    res = Err(e);
                    true
                }
            }
        });
        debug_assert!(self.st.dirty.is_empty(), "scheduling queues nothing");
        self.st.dirty = dirty;
        res
    }

    /// Run the strategy on one gate until its queues are empty (true) or its rails are busy
    /// (false): the gate's queue as the strategy commits it, then the fragments pinned to each
    /// rail.
    fn schedule(&mut self, peer: u32) -> Result<bool> {
        let p = peer as usize;
        if !self.st.rma.open.is_empty() {
            // An open batch of one-sided operations joins the queue first (`rma::batch`).
            self.st.rma_close(peer);
        }
        let g = &self.st.gates[p];
        if g.out.len() == 1
            && g.out[0].hdr.kind == KIND_PACKED
            && g.rails.len() == 1
            && g.rails[0].out.is_empty()
            && self.st.to_register.is_empty()
        {
            // The packet the send fast path built, alone on a gate of one rail (a burst's
            // flush): what any strategy commits, without asking it.
            return self.send_packed(peer);
        }
        let mut busy = 0u32;
        if !self.st.to_register.is_empty() {
            self.register_sends();
        }
        if self.st.gates[p].resilient() {
            if !self.resend(peer)? {
                return Ok(self.st.gates[p].dead);
            }
            // Failed rails are busy for good.
            for (r, rail) in self.st.gates[p].rails.iter().enumerate() {
                if rail.dead {
                    busy |= strategy::bit(r);
                }
            }
        }
        loop {
            let c = self.st.pick(peer, busy);
            let rail = self.st.gates[p].live_rail(c.rail);
            if c.n == 0 || busy & strategy::bit(rail) != 0 {
                break;
            }
            self.st.number(peer, c.n);
            match self.offer(peer, None, c.n, rail)? {
                Offered::Sent => self.st.sent(peer, c.n),
                Offered::Busy => busy |= strategy::bit(rail),
                Offered::Lost => return Ok(true),
            }
        }
        for r in 0..self.st.gates[p].rails.len() {
            while !self.st.gates[p].rails[r].out.is_empty() {
                match self.offer(peer, Some(r), 1, r)? {
                    Offered::Sent => self.st.sent_pinned(peer, r),
                    Offered::Busy => break,
                    Offered::Lost => return Ok(true),
                }
            }
        }
        let g = &self.st.gates[p];
        Ok(g.out.is_empty() && g.rails.iter().all(|r| r.out.is_empty()))
    }

    /// Offer the packet of the first `n` chunks of `peer`'s gate queue (`pinned`: of that
    /// rail's pinned fragments) to the driver of rail `rail`.
    fn offer(
        &mut self,
        peer: u32,
        pinned: Option<usize>,
        n: usize,
        rail: usize,
    ) -> Result<Offered> {
        let st = &mut self.st;
        let g = &st.gates[peer as usize];
        let Some(t) = g
            .rails
            .get(rail)
            .and_then(|r| self.drv.list.get_mut(r.drv as usize))
        else {
            return err(
                ErrorClass::Intern,
                format!("no transport reaches rank {peer}"),
            );
        };
        let (q, packed) = match pinned {
            Some(r) => (&g.rails[r].out, &[][..]),
            None => (&g.out, &g.packed[..]),
        };
        let max_iov = g.rails[rail].max_iov;
        let drv = g.rails[rail].drv;
        // A gate with several rails keeps a copy of what it sends (`resilience`).
        let keep = g.resilient() && pinned.is_none();
        let mut copy = Vec::new();
        let t0 = crate::trace::now();
        let mut bytes = 0;
        let outcome = with_packet(q, packed, n, max_iov, |iov| {
            let o = t.try_send(PeerId(peer), iov);
            if let Ok(SendOutcome::Done) = o {
                bytes = iov.iter().map(|s| s.len()).sum();
                if keep {
                    copy = iov.iter().flat_map(|s| s.iter().copied()).collect();
                }
            }
            o
        });
        crate::trace::sent(
            peer,
            g.rails[rail].name,
            || packet_headers(q, packed, n),
            &outcome,
            t0,
        );
        match outcome {
            Ok(SendOutcome::WouldBlock) => Ok(Offered::Busy),
            Ok(SendOutcome::Done) => {
                // The packed marker, always last in the gate's queue, stands for its messages.
                let chunks = match q.back() {
                    Some(c) if n == q.len() && c.hdr.kind == KIND_PACKED => {
                        n - 1 + g.packed_n as usize
                    }
                    _ => n,
                };
                st.stats.packet(drv, peer, chunks as u64, bytes);
                if keep {
                    st.retain(peer, &copy);
                }
                Ok(Offered::Sent)
            }
            Err(madmpi_transports::Error::PeerLost(p)) => Ok(lost(st, p.0, drv)),
            Err(e) => Err(e.into()),
        }
    }

    /// Register with their first rail's driver the messages of the RTSs waiting for a key
    /// (`FLAG_KEY`), and write the keys into them. A driver that refuses (registration limits:
    /// `ulimit -l`) makes that message stream its data instead (the receiver asks with Cts).
    fn register_sends(&mut self) {
        for rid in std::mem::take(&mut self.st.to_register) {
            let Some(Request {
                op: Op::Send(s), ..
            }) = self.st.reqs.get_mut(rid)
            else {
                continue;
            };
            let drv = self.st.gates[s.peer as usize].driver;
            let reg = match self.drv.get(drv) {
                Some(t) => t.register(s.ptr, s.len),
                None => Err(madmpi_transports::Error::Unsupported("register")),
            };
            match reg {
                Ok(key) => {
                    let x = s.extra_mut();
                    x.key = key.to_le_bytes();
                    x.registered = Some((drv, key));
                }
                Err(e) => {
                    tracing::info!(peer = s.peer, error = %e, "registration refused: data streamed");
                    let peer = s.peer as usize;
                    if let Some(c) = (self.st.gates[peer].out.iter_mut())
                        .find(|c| matches!(c.sent, super::OnSent::Send(id) if id == rid))
                    {
                        c.hdr.flags = (c.hdr.flags & !wire::FLAG_KEY) | wire::FLAG_STREAM;
                        c.hdr.aux = 0;
                        c.hdr.len = 0;
                        c.len = 0;
                    }
                }
            }
        }
    }

    /// Undo the registrations of completed sends.
    fn deregister_sends(&mut self) {
        for (drv, key) in std::mem::take(&mut self.st.to_deregister) {
            if let Some(t) = self.drv.get(drv) {
                t.deregister(key);
            }
        }
    }

    /// Send again, on the first rail that works, the copies a failed rail may have swallowed
    /// (`resilience`). Whether none is left.
    fn resend(&mut self, peer: u32) -> Result<bool> {
        loop {
            let st = &mut self.st;
            let g = &st.gates[peer as usize];
            let Some(pkt) = g.resil.resend.front() else {
                return Ok(true);
            };
            let rail = g.live_rail(0);
            let drv = g.rails[rail].drv;
            let Some(t) = self.drv.get(drv) else {
                return Ok(false);
            };
            match t.try_send(PeerId(peer), &[IoSlice::new(pkt)]) {
                Ok(SendOutcome::Done) => {
                    st.gates[peer as usize].resil.resend.pop_front();
                }
                Ok(SendOutcome::WouldBlock) => return Ok(false),
                Err(madmpi_transports::Error::PeerLost(p)) => {
                    if let Offered::Lost = lost(st, p.0, drv) {
                        return Ok(false);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// One pass of progress: flush, poll every driver, run rendezvous gets, flush replies.
    /// Returns whether anything arrived.
    #[inline]
    pub fn progress(&mut self) -> Result<bool> {
        self.st.epoch = self.st.epoch.wrapping_add(1);
        // The idle poll, inlined into the waiting loops: nothing to send, no driver with
        // possible input (`may_have_input`: a few loads per shm driver; TCP always says yes),
        // no pending `get`, schedule or deregistration. What `progress_work` would find.
        let st = &self.st;
        if !st.dirty.is_empty()
            || !st.gets.is_empty()
            || !st.scheds.is_empty()
            || !st.to_deregister.is_empty()
        {
            return self.progress_work();
        }
        for d in &self.drv.list {
            if d.may_have_input() {
                return self.progress_work();
            }
        }
        Ok(false)
    }

    /// [`Engine::progress`] past its idle test.
    #[inline(never)]
    fn progress_work(&mut self) -> Result<bool> {
        if !self.st.dirty.is_empty() {
            self.flush()?;
        }
        let st = &mut self.st;
        let mut n = 0;
        let split = SplitParams {
            head_len: HDR_LEN,
            min_rest: SPLIT_MIN,
        };
        for (i, d) in self.drv.list.iter_mut().enumerate() {
            if !d.may_have_input() {
                continue;
            }
            st.polling = i as DriverId;
            n += d.poll_into(split, st)?;
            while let Some(p) = d.poll_lost() {
                st.driver_lost(p.0, i as DriverId);
            }
        }
        if !self.st.gets.is_empty() {
            self.run_gets()?;
        }
        if !self.st.scheds.is_empty() {
            self.st.advance_schedules();
        }
        if !self.st.to_deregister.is_empty() {
            self.deregister_sends();
        }
        if !self.st.dirty.is_empty() {
            self.flush()?;
        }
        Ok(n > 0)
    }

    fn run_gets(&mut self) -> Result<()> {
        let drv = &mut self.drv;
        self.st
            .run_gets(&mut |id, peer, remote, local| match drv.get(id) {
                Some(t) => t.get(PeerId(peer), remote, local),
                None => Err(madmpi_transports::Error::Unsupported("get")),
            })
    }
}

/// Reads a region of a peer's memory into local iovecs (a driver's `get`).
pub(crate) type Getter<'a> = dyn FnMut(
        DriverId,
        u32,
        RemoteRegion,
        &mut [IoSliceMut<'_>],
    ) -> std::result::Result<(), madmpi_transports::Error>
    + 'a;

impl State {
    /// Pull the data of matched rendezvous messages with `get`, complete their receives and
    /// tell the senders (Fin). Where the OS refuses cross-memory access, fall back to
    /// fragments (Cts) for that peer from now on.
    pub(crate) fn run_gets(&mut self, get: &mut Getter<'_>) -> Result<()> {
        for g in std::mem::take(&mut self.gets) {
            let id = self.gates[g.peer as usize].driver;
            let Some(Request {
                op: Op::Recv(rv), ..
            }) = self.reqs.get_mut(g.rid)
            else {
                continue;
            };
            let cap = rv.target.cap as u64;
            let small_blocks = rv
                .target
                .layout
                .as_deref()
                .is_some_and(|(_, dt, count)| !gather_worthy(dt, *count));
            let t0 = crate::trace::now();
            let mut res = Ok(());
            for &(off, addr, len) in &g.ranges {
                // Truncation: pull only what fits.
                let n = len.min(cap.saturating_sub(off));
                if n == 0 {
                    continue;
                }
                let remote = RemoteRegion {
                    addr,
                    len: n,
                    key: g.key,
                    base: g.base,
                };
                if small_blocks {
                    // Many small blocks: one read into a bounce buffer and a user-space
                    // unpack cost far less than a kernel iovec per block.
                    let mut tmp = vec![0u8; n as usize];
                    res = get(id, g.peer, remote, &mut [IoSliceMut::new(&mut tmp)]);
                    if res.is_ok() {
                        // SAFETY: the receive buffer is valid until completion.
                        unsafe { rv.target.write_at(off as usize, &tmp) };
                    }
                } else {
                    // SAFETY: the receive buffer is valid until completion; [off, off+n) <= cap.
                    let mut local = unsafe { rv.target.iovecs(off as usize, n as usize) };
                    res = get(id, g.peer, remote, &mut local);
                }
                if res.is_err() {
                    break;
                }
            }
            crate::trace::get(g.peer, g.sreq, &g.ranges, &res, t0);
            match res {
                Ok(()) => {
                    if let Some(d) = self.stats.drivers.get_mut(id as usize) {
                        d.bytes_got += g.ranges.iter().map(|r| r.2).sum::<u64>().min(cap);
                    }
                    self.complete(g.rid);
                    self.queue_ctrl(g.peer, Kind::Fin, 0, g.sreq, 0);
                }
                Err(
                    madmpi_transports::Error::PermissionDenied(_)
                    | madmpi_transports::Error::Unsupported(_),
                ) => {
                    // Cross-memory access refused: the sender streams the packed bytes instead,
                    // for this message and every later one from this peer.
                    tracing::info!(
                        peer = g.peer,
                        "get refused: data from this peer will use CTS"
                    );
                    self.gates[g.peer as usize].can_get = false;
                    self.queue_ctrl(g.peer, Kind::Cts, 0, g.sreq, g.rid.0);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Strategy;
    use madmpi_datatypes::Basic;

    /// The packets a burst of `n` small sends to this process leaves in, as the number of
    /// packets sent after each send, then after the progress call that ends the burst.
    fn burst(e: &mut Engine, n: usize, tag: i32) -> Vec<u64> {
        let dt = Datatype::basic(Basic::Byte);
        let data = [7u8; 8];
        let packets = |e: &Engine| e.st.stats.drivers[0].packets_sent;
        let mut seen = Vec::new();
        for _ in 0..n {
            // SAFETY: `data` outlives the call; a packed send is complete when posted, and the
            // lone one's bytes leave before the call returns.
            let id = unsafe { e.isend_fast(data.as_ptr(), 8, &dt, 0, tag, crate::COMM_WORLD) };
            assert!(
                matches!(id, Ok(Some(_))),
                "a small send takes the fast path"
            );
            seen.push(packets(e));
        }
        e.progress().unwrap();
        seen.push(packets(e));
        seen
    }

    /// Under `adaptive` a burst leaves as its first send alone, then in packets of
    /// `pack_count` sends, twice as many, and so on, the rest at the progress call that ends
    /// the burst; the next burst starts again at `pack_count`. `aggreg` packs the whole burst
    /// into one packet whatever the count.
    #[test]
    fn a_burst_leaves_in_growing_packets() {
        let drv = crate::bootstrap::singleton().unwrap();
        let mut e = Engine::new(0, 1, drv, Strategy::Adaptive, &[]);
        e.st.set_pack_count(2);
        // Sends 1 (alone), 2–3, 4–7, 8–15, then 16–20 at the progress call.
        let want = [
            1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 5,
        ];
        assert_eq!(burst(&mut e, 20, 1), want);
        assert_eq!(e.st.stats.max_chunks, 8);
        let again: Vec<u64> = burst(&mut e, 5, 2).iter().map(|p| p - 5).collect();
        assert_eq!(
            again,
            [1, 1, 1, 2, 2, 3],
            "the next burst starts at pack_count again"
        );
        assert_eq!(e.st.stats.packet_chunks, 25, "every send left once");

        let drv = crate::bootstrap::singleton().unwrap();
        let mut e = Engine::new(0, 1, drv, Strategy::Aggreg, &[]);
        e.st.set_pack_count(2);
        assert_eq!(burst(&mut e, 20, 1), [[0; 20].as_slice(), &[1]].concat());
        assert_eq!(e.st.stats.max_chunks, 20);
    }

    /// Where a burst leaves as one packet (no `pack_count`: here the `self` driver, as TCP), the
    /// first send of an epoch leaves alone unless the epoch before carried several sends:
    /// then it is taken for the start of another burst and packed with the rest.
    #[test]
    fn after_a_burst_the_first_send_is_packed_where_bursts_leave_whole() {
        let drv = crate::bootstrap::singleton().unwrap();
        let mut e = Engine::new(0, 1, drv, Strategy::Adaptive, &[]);
        // The first burst: its first send alone, the 4 others in one packet at the progress call.
        assert_eq!(burst(&mut e, 5, 1), [1, 1, 1, 1, 1, 2]);
        // The next: all 5 in one packet.
        assert_eq!(burst(&mut e, 5, 2), [2, 2, 2, 2, 2, 3]);
        // A lone send after a burst is packed (leaves at the progress call) ...
        assert_eq!(burst(&mut e, 1, 3), [3, 4]);
        // ... and the next lone one leaves at once again.
        assert_eq!(burst(&mut e, 1, 4), [5, 5]);
        assert_eq!(e.st.stats.packet_chunks, 12, "every send left once");
    }

    /// As `api::isend`: the fast path, else the checked path and `flush_posted`.
    fn post(e: &mut Engine, data: &[u8], tag: i32) {
        let dt = Datatype::basic(Basic::Byte);
        // SAFETY: `data` outlives the engine's use of it (the `self` driver copies a packet
        // when it is sent, and every test here sends before it returns).
        let fast =
            unsafe { e.isend_fast(data.as_ptr(), data.len(), &dt, 0, tag, crate::COMM_WORLD) };
        if matches!(fast, Ok(Some(_))) {
            return;
        }
        // SAFETY: as above.
        let r = unsafe {
            e.st.isend(
                data.as_ptr(),
                data.len(),
                &dt,
                0,
                tag,
                crate::COMM_WORLD,
                crate::request::SendMode::Standard,
                false,
            )
        };
        assert!(r.is_ok());
        e.flush_posted().unwrap();
    }

    /// Where a burst leaves as one packet (here the `self` driver, as TCP), sends too large to
    /// pack that follow one that left at once in the same epoch wait for the progress call and
    /// leave together; after an epoch of several, the next epoch's first waits too.
    #[test]
    fn a_burst_of_large_sends_leaves_together_where_bursts_leave_whole() {
        let drv = crate::bootstrap::singleton().unwrap();
        let mut e = Engine::new(0, 1, drv, Strategy::Adaptive, &[]);
        let data = vec![5u8; 8 << 10];
        let packets = |e: &Engine| e.st.stats.drivers[0].packets_sent;
        let mut seen = Vec::new();
        for _ in 0..4 {
            post(&mut e, &data, 1);
            seen.push(packets(&e));
        }
        e.progress().unwrap();
        seen.push(packets(&e));
        assert_eq!(
            seen,
            [1, 1, 1, 1, 2],
            "the first alone, the 3 others in one packet"
        );
        seen.clear();
        for _ in 0..4 {
            post(&mut e, &data, 2);
            seen.push(packets(&e));
        }
        e.progress().unwrap();
        seen.push(packets(&e));
        assert_eq!(
            seen,
            [2, 2, 2, 2, 3],
            "after a burst, the whole next one in one packet"
        );
        assert_eq!(e.st.stats.packet_chunks, 8);
    }
}
