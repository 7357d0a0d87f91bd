//! The conformance suite on `ofi`, over every provider that runs here (`tcp;ofi_rxm`, `shm`),
//! and the driver's own checks (cards, lost peers, settings).

use super::*;
use crate::conformance::{self, Pair};

struct OfiPair(OfiTransport, OfiTransport);

impl Pair for OfiPair {
    fn a(&mut self) -> &mut dyn Transport {
        &mut self.0
    }
    fn b(&mut self) -> &mut dyn Transport {
        &mut self.1
    }
    fn a_id(&self) -> PeerId {
        PeerId(0)
    }
    fn b_id(&self) -> PeerId {
        PeerId(1)
    }
    fn patience(&self) -> u32 {
        300
    }
}

/// Without RDMA reads: the suite drives both endpoints from one thread, and a provider with
/// manual progress (`tcp;ofi_rxm`, `shm`) serves a read only while the target's endpoint is
/// progressed, which it is not while the reader waits inside `get`. The reads are tested by
/// MPI programs, where each rank progresses its own endpoint (`tests/tests/ofi.rs`,
/// `rendezvous_data_is_read_with_rdma`).
fn cfg(provider: &str) -> OfiConfig {
    OfiConfig {
        provider: Some(provider.into()),
        rma: false,
        ..OfiConfig::default()
    }
}

/// Two connected endpoints of `provider`, or `None` (printed) when it does not run here.
fn pair(cfg: &OfiConfig) -> Option<OfiPair> {
    if let Err(e) = probe(cfg) {
        eprintln!(
            "provider {:?} not available here, skipped: {e}",
            cfg.provider
        );
        return None;
    }
    let mut a = OfiTransport::open(PeerId(0), 2, 7, cfg).expect("open a");
    let mut b = OfiTransport::open(PeerId(1), 2, 7, cfg).expect("open b");
    let (ca, cb) = (a.card().unwrap(), b.card().unwrap());
    a.connect(PeerId(1), &cb).expect("connect a");
    b.connect(PeerId(0), &ca).expect("connect b");
    Some(OfiPair(a, b))
}

#[test]
fn conformance_tcp_rxm() {
    // The tcp provider must be there wherever libfabric is (it is not optional in Debian's
    // build): a missing one is a failure, not a skip.
    probe(&cfg("tcp;ofi_rxm")).expect("the tcp;ofi_rxm provider");
    let mut p = pair(&cfg("tcp;ofi_rxm")).unwrap();
    assert_eq!(p.0.provider(), "tcp;ofi_rxm");
    conformance::run_all(&mut p);
}

#[test]
fn conformance_tcp_rxm_small_pools() {
    // Two send credits and small packets: backpressure from the pool, not the provider.
    let c = OfiConfig {
        max_packet: 4096,
        tx_buffers: 2,
        rx_buffers: 2,
        ..cfg("tcp;ofi_rxm")
    };
    let mut p = pair(&c).unwrap();
    assert_eq!(p.0.caps().max_packet, 4096);
    conformance::run_all(&mut p);
}

#[test]
fn conformance_shm() {
    if let Some(mut p) = pair(&cfg("shm")) {
        conformance::run_all(&mut p);
    }
}

#[test]
fn cards_are_checked() {
    let Some(mut p) = pair(&cfg("tcp;ofi_rxm")) else {
        return;
    };
    let card = p.1.card().unwrap();
    assert!(
        card.starts_with("tcp+ofi_rxm:") && !card.contains(';'),
        "{card}"
    );
    for bad in ["", "tcp+ofi_rxm", "tcp+ofi_rxm:zz", "tcp+ofi_rxm:123"] {
        let e = p.0.connect(PeerId(1), bad).unwrap_err().to_string();
        assert!(e.contains("card of rank 1"), "{bad}: {e}");
    }
    let e =
        p.0.connect(PeerId(1), &card.replace("tcp+ofi_rxm", "efa"))
            .unwrap_err()
            .to_string();
    assert!(
        e.contains("uses provider efa") && e.contains("tcp;ofi_rxm"),
        "{e}"
    );
    let e = p.0.connect(PeerId(9), &card).unwrap_err().to_string();
    assert!(e.contains("rank out of range"), "{e}");
}

#[test]
fn errors_name_provider_and_call() {
    let e = OfiTransport::open(PeerId(0), 1, 1, &cfg("no-such-provider"))
        .err()
        .expect("an unknown provider fails")
        .to_string();
    assert!(
        e.contains("no-such-provider") && e.contains("fi_getinfo"),
        "{e}"
    );
}

#[test]
fn provider_classes() {
    assert!(!is_fast("tcp;ofi_rxm") && !is_fast("udp;ofi_rxd") && !is_fast("shm"));
    assert!(is_fast("verbs;ofi_rxm") && is_fast("efa") && is_fast("cxi") && is_fast("psm2"));
}

/// A first exchange of `size`-byte packets from `a` to `b`, then `b` goes away: `a` reports
/// it lost (a send answers [`Error::PeerLost`] or `poll_lost` names it) within a minute.
fn closed_peer_is_reported_lost(cfg: &OfiConfig, size: usize) -> OfiTransport {
    let Some(OfiPair(mut a, mut b)) = pair(cfg) else {
        panic!("tcp;ofi_rxm is there (conformance_tcp_rxm)");
    };
    // A first exchange makes the connection, then the peer goes away.
    let mut got = 0;
    let mut sent = false;
    let packet = vec![5u8; size];
    for _ in 0..1_000_000 {
        if !sent {
            sent = a.try_send(PeerId(1), &[IoSlice::new(&packet)]).unwrap() == SendOutcome::Done;
        }
        a.poll_recv(&mut |_, _| {}).unwrap();
        got += b.poll_recv(&mut |_, _| {}).unwrap();
        if got > 0 {
            break;
        }
        std::thread::yield_now();
    }
    assert_eq!(got, 1);
    drop(b);
    let start = std::time::Instant::now();
    let lost = loop {
        match a.try_send(PeerId(1), &[IoSlice::new(&packet)]) {
            Err(Error::PeerLost(p)) => break p,
            Ok(_) => {}
            Err(e) => panic!("{e}"),
        }
        a.poll_recv(&mut |_, _| {}).unwrap();
        if let Some(p) = a.poll_lost() {
            break p;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the loss was never reported"
        );
        std::thread::yield_now();
    };
    assert_eq!(lost, PeerId(1));
    a
}

fn injects(t: &OfiTransport) -> u64 {
    t.counters()
        .iter()
        .find(|c| c.0 == "injects")
        .map(|c| c.1)
        .unwrap()
}

#[test]
fn a_peer_that_closed_is_reported_lost() {
    // Packets above rxm's inject size (64 bytes) travel with fi_send.
    let a = closed_peer_is_reported_lost(&cfg("tcp;ofi_rxm"), 100);
    assert_eq!(injects(&a), 0);
}

/// With `MADMPI_OFI_INJECT=0` small packets travel with `fi_send` too, so that their error
/// completions find a peer lost as larger packets' do (an injected packet has no completion,
/// not even an error one: over `tcp;ofi_rxm` a stream of small packets to a peer that went
/// away is then not noticed by the driver; the launcher ends the job).
#[test]
fn a_peer_that_closed_is_reported_lost_under_small_packets_without_inject() {
    let c = OfiConfig {
        inject: false,
        ..cfg("tcp;ofi_rxm")
    };
    let a = closed_peer_is_reported_lost(&c, 8);
    assert_eq!(injects(&a), 0);
}

/// `MADMPI_OFI_INJECT=0` (`inject: false`): every packet with `fi_send`, none injected; and
/// a packet of exactly the inject size is injected, one byte more is not.
#[test]
fn inject_can_be_turned_off_and_stops_at_the_inject_size() {
    let c = OfiConfig {
        inject: false,
        ..cfg("tcp;ofi_rxm")
    };
    let mut p = pair(&c).unwrap();
    assert_eq!(p.0.inject_max, 0);
    conformance::run_all(&mut p);
    assert_eq!(injects(&p.0) + injects(&p.1), 0);
    let OfiPair(mut a, mut b) = pair(&cfg("tcp;ofi_rxm")).unwrap();
    let max = a.inject_max;
    assert!(max > HDR);
    for (len, injected) in [(max - HDR, 1), (max - HDR + 1, 0)] {
        let before = injects(&a);
        let packet = vec![9u8; len];
        let mut got = Vec::new();
        let mut sent = false;
        let start = std::time::Instant::now();
        while got.is_empty() {
            if !sent {
                sent =
                    a.try_send(PeerId(1), &[IoSlice::new(&packet)]).unwrap() == SendOutcome::Done;
            }
            a.poll_recv(&mut |_, _| {}).unwrap();
            b.poll_recv(&mut |_, p| got.push(p.to_vec())).unwrap();
            assert!(start.elapsed() < std::time::Duration::from_secs(60));
            std::thread::yield_now();
        }
        assert_eq!(got, vec![packet], "{len} bytes");
        assert_eq!(injects(&a) - before, injected, "{len} bytes");
    }
}
