//! The TCP driver for peers outside the world (dynamic processes: MPI_Comm_accept /
//! MPI_Comm_connect, MPI_Comm_spawn, MPI_Comm_join).
//!
//! Each intercommunicator made between two groups of processes gets a TCP driver of its own,
//! with the usual handshake and framing, over a numbering of its own: the *connection space*,
//! where the accepting group holds ranks `0..na` and the connecting group `na..na + nc`, and
//! whose secret is the connection's (drawn by the accepting root, handed to the connecting
//! root over the port's socket, broadcast in each group). So a connection proves the secret
//! of the intercommunicator it belongs to and names its process by (connection, rank), and a
//! process of another job never needs a rank of ours.
//!
//! The engine names the same peers by ids beyond its world (`base..base + n`); [`DynTcp`]
//! translates between the two numberings on the way in and out (one subtraction and one
//! addition). Dynamic peers go over TCP even on one host.

use std::io::{IoSlice, IoSliceMut};

use super::{TcpConfig, TcpTransport};
use crate::{
    Caps, Error, PeerId, Placement, RecvSink, RemoteRegion, Result, SendOutcome, SplitParams,
    Transport,
};

impl TcpTransport {
    /// A listening driver whose rank, size and secret are not known yet
    /// ([`rebind`](Self::rebind) sets them before any peer is added): its
    /// [`business_card`](Self::business_card) is what the groups exchange.
    ///
    /// # Errors
    ///
    /// As [`listen`](Self::listen).
    pub fn listen_unbound(cfg: &TcpConfig) -> Result<TcpTransport> {
        TcpTransport::listen(PeerId(0), 1, [0; 32], cfg)
    }

    /// Set this driver's rank, the size of its job and the secret its connections prove, before
    /// any peer is added (the peer table grows to `nprocs`).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] once a connection exists or a peer was added, or `me >= nprocs`.
    pub fn rebind(&mut self, me: u32, nprocs: u32, secret: [u8; 32]) -> Result<()> {
        if me >= nprocs
            || self.conns.iter().any(Option::is_some)
            || self.peers.iter().any(|s| s.addr.is_some())
        {
            return Err(Error::Invalid(format!(
                "tcp: cannot rebind to rank {me} of {nprocs} (in use, or out of range)"
            )));
        }
        self.me = me;
        self.nprocs = nprocs;
        self.secret = secret;
        self.peers = (0..nprocs)
            .map(|_| super::peers::PeerSlot::idle())
            .collect();
        Ok(())
    }
}

/// A TCP driver over a connection space, seen by the engine as peers `base..base + n`: the
/// engine's peer `base + i` is rank `off + i` of the connection space.
#[derive(Debug)]
pub struct DynTcp {
    t: TcpTransport,
    base: u32,
    off: u32,
    n: u32,
}

impl DynTcp {
    /// Wrap `t` (rebound, its peers added): engine peers `base..base + n` are its ranks
    /// `off..off + n`.
    pub fn new(t: TcpTransport, base: u32, off: u32, n: u32) -> DynTcp {
        DynTcp { t, base, off, n }
    }

    #[inline]
    fn inner(&self, peer: PeerId) -> Result<PeerId> {
        match peer.0.checked_sub(self.base) {
            Some(i) if i < self.n => Ok(PeerId(i + self.off)),
            _ => Err(Error::Invalid(format!(
                "tcp (dynamic): peer {} is not one of this connection's",
                peer.0
            ))),
        }
    }

    #[inline]
    fn outer(&self, peer: PeerId) -> PeerId {
        PeerId(peer.0.wrapping_sub(self.off).wrapping_add(self.base))
    }

    /// Whether an authenticated connection to `peer` (engine id) exists.
    pub fn is_connected(&self, peer: PeerId) -> bool {
        self.inner(peer).is_ok_and(|p| self.t.is_connected(p))
    }
}

/// A sink that renames the peers of what it is given.
struct Remap<'a> {
    sink: &'a mut dyn RecvSink,
    base: u32,
    off: u32,
}

impl Remap<'_> {
    #[inline]
    fn outer(&self, peer: PeerId) -> PeerId {
        PeerId(peer.0.wrapping_sub(self.off).wrapping_add(self.base))
    }
}

impl RecvSink for Remap<'_> {
    fn deliver(&mut self, peer: PeerId, packet: &[u8]) {
        let p = self.outer(peer);
        self.sink.deliver(p, packet)
    }

    fn place(&mut self, peer: PeerId, head: &[u8], total_len: usize) -> Option<Placement> {
        let p = self.outer(peer);
        self.sink.place(p, head, total_len)
    }

    fn placed(&mut self, peer: PeerId, head: &[u8], total_len: usize) {
        let p = self.outer(peer);
        self.sink.placed(p, head, total_len)
    }
}

impl Transport for DynTcp {
    fn caps(&self) -> &Caps {
        self.t.caps()
    }

    fn try_send(&mut self, peer: PeerId, iov: &[IoSlice<'_>]) -> Result<SendOutcome> {
        let p = self.inner(peer)?;
        match self.t.try_send(p, iov) {
            Err(Error::PeerLost(_)) => Err(Error::PeerLost(peer)),
            r => r,
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.t.counters()
    }

    fn poll_recv(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize> {
        let (base, off) = (self.base, self.off);
        self.t
            .poll_recv(&mut |p: PeerId, b: &[u8]| deliver(PeerId(p.0 - off + base), b))
    }

    fn poll_recv_split(&mut self, split: SplitParams, sink: &mut dyn RecvSink) -> Result<usize> {
        let mut r = Remap {
            sink,
            base: self.base,
            off: self.off,
        };
        self.t.poll_recv_split(split, &mut r)
    }

    fn poll_lost(&mut self) -> Option<PeerId> {
        self.t.poll_lost().map(|p| self.outer(p))
    }

    fn get(
        &mut self,
        peer: PeerId,
        remote: RemoteRegion,
        local: &mut [IoSliceMut<'_>],
    ) -> Result<()> {
        let p = self.inner(peer)?;
        self.t.get(p, remote, local)
    }

    fn reaches(&self, peer: PeerId) -> bool {
        self.inner(peer).is_ok_and(|p| self.t.reaches(p))
    }
}

impl DynTcp {
    #[cfg(test)]
    fn take_log_for_tests(&mut self) -> Vec<String> {
        self.t.take_log()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn cfg() -> TcpConfig {
        TcpConfig::default()
    }

    /// Two connection spaces of 1 + 2 ranks: the engine ids are renamed both ways, and a
    /// connection proves the connection's secret (a peer with another one is refused).
    #[test]
    fn two_groups_talk_through_their_own_numbering() {
        let secret = [7u8; 32];
        let mut a = TcpTransport::listen_unbound(&cfg()).unwrap();
        let mut c0 = TcpTransport::listen_unbound(&cfg()).unwrap();
        let mut c1 = TcpTransport::listen_unbound(&cfg()).unwrap();
        let (ca, cc0, cc1) = (a.business_card(), c0.business_card(), c1.business_card());
        a.rebind(0, 3, secret).unwrap();
        c0.rebind(1, 3, secret).unwrap();
        c1.rebind(2, 3, [8u8; 32]).unwrap();
        a.add_peer(PeerId(1), &cc0).unwrap();
        a.add_peer(PeerId(2), &cc1).unwrap();
        c0.add_peer(PeerId(0), &ca).unwrap();
        c1.add_peer(PeerId(0), &ca).unwrap();
        assert!(a.rebind(0, 3, secret).is_err(), "in use");
        // Engine of `a`: its world has 4 ranks, the connecting group is 4 and 5.
        let mut a = DynTcp::new(a, 4, 1, 2);
        // Engines of the connecting group: worlds of 2, the acceptor is peer 2.
        let mut c0 = DynTcp::new(c0, 2, 0, 1);
        let mut c1 = DynTcp::new(c1, 2, 0, 1);
        assert!(a.reaches(PeerId(4)) && a.reaches(PeerId(5)) && !a.reaches(PeerId(6)));
        assert!(a.try_send(PeerId(3), &[]).is_err());
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut got: Vec<(u32, Vec<u8>)> = Vec::new();
        let mut sent = false;
        let mut refused = false;
        while (got.is_empty() || !refused) && Instant::now() < deadline {
            if !sent {
                sent = matches!(
                    c0.try_send(PeerId(2), &[IoSlice::new(b"hello")]),
                    Ok(SendOutcome::Done)
                );
            }
            let _ = c1.try_send(PeerId(2), &[IoSlice::new(b"intruder")]);
            a.poll_recv(&mut |p, b| got.push((p.0, b.to_vec())))
                .unwrap();
            c0.poll_recv(&mut |_, _| {}).unwrap();
            c1.poll_recv(&mut |_, _| {}).unwrap();
            refused |= a
                .take_log_for_tests()
                .iter()
                .any(|l| l.contains("claiming rank 2") && l.contains("authentication failed"));
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(got, vec![(4, b"hello".to_vec())]);
        assert!(refused, "a wrong secret is refused");
        assert!(c0.is_connected(PeerId(2)));
        assert!(!c1.is_connected(PeerId(2)));
    }
}
