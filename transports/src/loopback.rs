//! The `self` driver: a rank sending to itself.
//!
//! Packets wait in a FIFO until the next [`Transport::poll_recv`]. Packet buffers are recycled,
//! so steady-state traffic allocates nothing. `get` is a plain `memcpy`, since the "remote"
//! region lives in our own address space. This module never talks to the OS.

#![warn(clippy::undocumented_unsafe_blocks)]

use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut};

use crate::{Caps, Error, PeerId, RemoteRegion, Result, SendOutcome, Transport};

/// Largest packet the `self` driver takes.
const MAX_PACKET: usize = 4 << 20;
/// Default bound on the bytes waiting in the FIFO before `try_send` answers `WouldBlock`.
const DEFAULT_LIMIT: usize = 64 << 20;
/// Recycled buffers kept at most (more are freed).
const MAX_SPARE: usize = 64;
/// Recycled buffers larger than this are freed rather than kept.
const MAX_SPARE_CAPACITY: usize = 1 << 20;

/// The `self` driver. See the [module documentation](self).
#[derive(Debug)]
pub struct LoopbackTransport {
    me: PeerId,
    caps: Caps,
    queue: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    queued_bytes: usize,
    limit: usize,
}

impl LoopbackTransport {
    /// The `self` driver of rank `me`.
    pub fn new(me: PeerId) -> LoopbackTransport {
        LoopbackTransport::with_limit(me, DEFAULT_LIMIT)
    }

    /// Like [`new`](Self::new), with at most `limit_bytes` of packets waiting before
    /// `try_send` answers `WouldBlock` (a packet is always accepted when nothing waits).
    pub fn with_limit(me: PeerId, limit_bytes: usize) -> LoopbackTransport {
        LoopbackTransport {
            me,
            caps: Caps {
                name: "self",
                latency_ns: 20,
                bandwidth_mbps: 10_000,
                max_packet: MAX_PACKET,
                eager_threshold: 32 << 10,
                max_iov: crate::sys::IOV_MAX,
                can_get: true,
                preference: 100,
                aggreg_max: MAX_PACKET,
                solo_min: usize::MAX,
                pack_count: u32::MAX,
                registers_memory: false,
            },
            queue: VecDeque::with_capacity(64),
            spare: Vec::with_capacity(MAX_SPARE),
            queued_bytes: 0,
            limit: limit_bytes,
        }
    }

    fn check_peer(&self, peer: PeerId) -> Result<()> {
        if peer == self.me {
            Ok(())
        } else {
            Err(Error::Invalid(format!(
                "the self driver of rank {} cannot reach rank {}",
                self.me.0, peer.0
            )))
        }
    }
}

impl Transport for LoopbackTransport {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn try_send(&mut self, peer: PeerId, iov: &[IoSlice<'_>]) -> Result<SendOutcome> {
        self.check_peer(peer)?;
        let len: usize = iov.iter().map(|s| s.len()).sum();
        if len > self.caps.max_packet {
            return Err(Error::Invalid(format!(
                "packet of {len} bytes exceeds max_packet {}",
                self.caps.max_packet
            )));
        }
        if !self.queue.is_empty() && self.queued_bytes + len > self.limit {
            return Ok(SendOutcome::WouldBlock);
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.reserve(len);
        for s in iov {
            buf.extend_from_slice(s);
        }
        self.queued_bytes += len;
        self.queue.push_back(buf);
        Ok(SendOutcome::Done)
    }

    /// Whether a packet waits: lets the engine skip the poll call when nothing does.
    #[inline]
    fn may_have_input(&self) -> bool {
        !self.queue.is_empty()
    }

    fn poll_recv(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize> {
        // Only what is queued now: packets the callback cannot add (it has no access to us),
        // but bounding the loop keeps the contract obvious.
        let n = self.queue.len();
        for _ in 0..n {
            let Some(buf) = self.queue.pop_front() else {
                break;
            };
            self.queued_bytes -= buf.len();
            deliver(self.me, &buf);
            if self.spare.len() < MAX_SPARE && buf.capacity() <= MAX_SPARE_CAPACITY {
                self.spare.push(buf);
            }
        }
        Ok(n)
    }

    fn get(
        &mut self,
        peer: PeerId,
        remote: RemoteRegion,
        local: &mut [IoSliceMut<'_>],
    ) -> Result<()> {
        self.check_peer(peer)?;
        let total: u64 = local.iter().map(|s| s.len() as u64).sum();
        if total != remote.len {
            return Err(Error::Invalid(format!(
                "get: local buffers hold {total} bytes, remote region {}",
                remote.len
            )));
        }
        if remote.len == 0 {
            return Ok(());
        }
        let addr = usize::try_from(remote.addr)
            .ok()
            .filter(|&a| a != 0 && a.checked_add(remote.len as usize).is_some())
            .ok_or_else(|| {
                Error::Invalid(format!("get: bad region {:#x}+{}", remote.addr, remote.len))
            })?;
        let mut src = addr as *const u8;
        for dst in local.iter_mut() {
            // SAFETY: the region was advertised by this very rank in a rendezvous request for a
            // buffer that, by the MPI rule, stays valid until the request completes (which needs
            // this `get` to finish); `dst` is a distinct, writable slice. `copy` (memmove)
            // tolerates a region overlapping the destination.
            unsafe {
                std::ptr::copy(src, dst.as_mut_ptr(), dst.len());
                src = src.add(dst.len());
            }
        }
        Ok(())
    }

    fn reaches(&self, peer: PeerId) -> bool {
        peer == self.me
    }
}
