//! Packets built in place in the driver (issue #23, fourth pass): under `adaptive`, the small
//! sends that follow the first of a burst are written straight into the packet the first
//! rail's driver builds in its ring (`Driver::append`: the `shm` driver), instead of being
//! copied into the gate's packet (`Gate::packed`, `State::pack_routed`) that is copied into the
//! ring at the next progress call. One copy fewer per message, and the driver makes the packet
//! visible as soon as it holds `MADMPI_SHM_PUBLISH` bytes, so that the receiver works on the
//! first messages of a burst while the sender writes the next (the two sides overlap, as with
//! one packet per message, at the cost of one packet per few hundred bytes). What is still
//! held leaves at the next progress or completion call (`Engine::publish`), as the gate's
//! packet would.
//!
//! Order: a message is written in place only when nothing waits in its gate's queue (it takes
//! the next sequence number, and every later packet to that peer is written after it: the
//! driver makes the packet being built visible before any other packet to the same peer).
//! Gates with several rails (which keep copies of what they send, `resilience`) and drivers
//! that build nothing in place (TCP, whose strength is one system call per packet) keep the
//! gate's packet.

use madmpi_transports::shm::Appended;
use madmpi_transports::PeerId;

use super::{raw_slice, wire, Engine, Route};
use crate::request::{Op, Request, RequestId, SendOp};

/// Largest message written in place (as `pack_routed` copies): beyond, a packet of its own.
pub(super) const IN_PLACE_MAX: usize = 1024;

impl Engine {
    /// Write a small send into the packet its peer's driver builds in place. `None`, having
    /// done nothing, when it cannot: something queued before it, a dead peer, several rails,
    /// a message above [`IN_PLACE_MAX`] or the eager limit, a driver that builds nothing in
    /// place towards that peer, or a full ring.
    ///
    /// # Safety
    /// `buf` holds the message `r` describes for the duration of the call.
    #[inline(always)]
    pub(super) unsafe fn append_routed(&mut self, r: Route, buf: *const u8) -> Option<RequestId> {
        let (peer, bytes) = (r.peer, r.bytes);
        let st = &mut self.st;
        let g = &st.gates[peer as usize];
        if !g.out.is_empty() || g.dead || g.resilient() || bytes > g.eager_max.min(IN_PLACE_MAX) {
            return None;
        }
        let driver = g.driver;
        let t = self.drv.list.get_mut(driver as usize)?;
        let seq = g.seq.wrapping_add(1);
        let rec = wire::EAGER_HDR_LEN + wire::pad8(bytes);
        let rid = st.reqs.next_id();
        let hdr = r.eager(seq, rid.0);
        // SAFETY: the caller's buffer holds the message for the whole call.
        let payload = unsafe { raw_slice(buf.wrapping_offset(r.off), bytes) };
        let t0 = crate::trace::now();
        // SAFETY: `append` gives room for exactly `rec` bytes, in the ring, which no Rust
        // reference covers and which cannot overlap the caller's buffer: the header, the
        // payload and its padding (zeroed) are all written.
        let res = t.append(PeerId(peer), rec, |dst| unsafe {
            hdr.encode_eager(&mut *(dst as *mut [u8; wire::EAGER_HDR_LEN]));
            let body = dst.add(wire::EAGER_HDR_LEN);
            let padded = rec - wire::EAGER_HDR_LEN;
            if padded > 0 {
                std::ptr::write_bytes(body.add(padded - 8), 0, 8);
            }
            madmpi_transports::copy_bytes(payload.as_ptr(), body, bytes);
        });
        let Appended::Done { begun, held } = res else {
            return None;
        };
        let made = (st.reqs).insert_with(|| Request::done(Op::Send(SendOp::new(peer, buf, 0))));
        debug_assert_eq!(made, rid);
        let g = &mut st.gates[peer as usize];
        g.seq = seq;
        st.unpublished |= held;
        st.stats.eager_sends += 1;
        st.stats.packed_sends += 1;
        if begun {
            st.stats.packet(driver, peer, 1, rec);
        } else {
            st.stats.packet_grew(driver, rec);
        }
        crate::trace::queued(peer, &hdr);
        crate::trace::sent(
            peer,
            g.rails[0].name,
            || vec![hdr],
            &Ok(madmpi_transports::SendOutcome::Done),
            t0,
        );
        Some(made)
    }

    /// Make the packets the drivers build in place visible to their receivers.
    #[inline(never)]
    pub(super) fn publish(&mut self) {
        self.st.unpublished = false;
        for d in &mut self.drv.list {
            d.publish_all();
        }
    }
}
