//! Tests of the TCP driver within one process: the conformance suite, the header/data split,
//! connection set-up. Multi-process, security and failure tests live in `tests/tcp_*.rs`.

use std::io::{IoSlice, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use super::conn::{RX_INITIAL, RX_POOL_KEEP};
use super::*;
use crate::conformance::{run_all, Pair, Rng};
use crate::Placement;

const SECRET: [u8; 32] = [0x5a; 32];

fn cfg_with(f: impl FnOnce(&mut TcpConfig)) -> TcpConfig {
    let mut c = TcpConfig::default();
    f(&mut c);
    c
}

/// A largest packet above the default, for the tests of packets of 1 MiB.
const BIG_PACKET: usize = (1 << 20) + 4096;

/// Ranks `ra` and `rb` of a job of `n`, registered with each other.
fn pair_of(ra: u32, rb: u32, n: u32, cfg: &TcpConfig) -> (TcpTransport, TcpTransport) {
    let mut a = TcpTransport::listen(PeerId(ra), n, SECRET, cfg).expect("listen a");
    let mut b = TcpTransport::listen(PeerId(rb), n, SECRET, cfg).expect("listen b");
    a.add_peer(PeerId(rb), &b.business_card()).unwrap();
    b.add_peer(PeerId(ra), &a.business_card()).unwrap();
    (a, b)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    A,
    B,
}

/// Both endpoints behind one value: whichever side the suite talks to, polling it also
/// progresses the other (as the other process would on its own). A poll that finds nothing
/// while packets the other side accepted are still in flight (in its outgoing buffer or in the
/// kernel) waits for them: the suite expects a packet to be there once `try_send` said `Done`,
/// as it is with shared memory.
struct Duo {
    a: TcpTransport,
    b: TcpTransport,
    side: Side,
}

impl Duo {
    fn split(&mut self) -> (&mut TcpTransport, &mut TcpTransport) {
        match self.side {
            Side::A => (&mut self.a, &mut self.b),
            Side::B => (&mut self.b, &mut self.a),
        }
    }
}

impl Transport for Duo {
    fn caps(&self) -> &Caps {
        self.a.caps()
    }
    fn try_send(&mut self, peer: PeerId, iov: &[IoSlice<'_>]) -> Result<SendOutcome> {
        let (me, other) = self.split();
        other.progress()?;
        me.try_send(peer, iov)
    }
    fn poll_recv(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize> {
        let (me, other) = self.split();
        let start = Instant::now();
        loop {
            other.progress()?;
            let n = me.poll_recv(deliver)?;
            let st = me.stats();
            let in_flight = other.stats().packets_sent > st.packets_delivered + st.packets_placed;
            if n > 0 || !in_flight {
                return Ok(n);
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "output pending for 10 s"
            );
            std::thread::yield_now();
        }
    }
    fn get(&mut self, peer: PeerId, r: RemoteRegion, l: &mut [IoSliceMut<'_>]) -> Result<()> {
        self.split().0.get(peer, r, l)
    }
    fn reaches(&self, peer: PeerId) -> bool {
        match self.side {
            Side::A => self.a.reaches(peer),
            Side::B => self.b.reaches(peer),
        }
    }
}

struct TcpPair {
    duo: Duo,
}

impl Pair for TcpPair {
    fn a(&mut self) -> &mut dyn Transport {
        self.duo.side = Side::A;
        &mut self.duo
    }
    fn b(&mut self) -> &mut dyn Transport {
        self.duo.side = Side::B;
        &mut self.duo
    }
    fn a_id(&self) -> PeerId {
        self.duo.a.rank()
    }
    fn b_id(&self) -> PeerId {
        self.duo.b.rank()
    }
}

fn tcp_pair(ra: u32, rb: u32, cfg: &TcpConfig) -> TcpPair {
    let (a, b) = pair_of(ra, rb, ra.max(rb) + 1, cfg);
    TcpPair {
        duo: Duo {
            a,
            b,
            side: Side::A,
        },
    }
}

#[test]
fn tcp_conformance() {
    // Defaults; tiny socket buffers (partial writes everywhere); IPv6 loopback; ranks in
    // both orders (who dials first does not matter).
    run_all(&mut tcp_pair(0, 1, &TcpConfig::default()));
    let tiny = cfg_with(|c| {
        c.sndbuf = 4096;
        c.rcvbuf = 4096;
        c.max_packet = 64 << 10;
    });
    let mut p = tcp_pair(5, 2, &tiny);
    run_all(&mut p);
    assert!(
        p.duo.a.stats().partial_writes > 0,
        "tiny buffers split packets"
    );
    let v6 = cfg_with(|c| c.bind_addr = Some(IpAddr::V6(Ipv6Addr::LOCALHOST)));
    match TcpTransport::listen(PeerId(0), 2, SECRET, &v6) {
        Ok(_) => run_all(&mut tcp_pair(1, 0, &v6)),
        Err(e) => eprintln!("no IPv6 loopback here, skipped: {e}"),
    }
}

#[test]
fn caps_and_cards() {
    let t = TcpTransport::listen(PeerId(1), 3, SECRET, &TcpConfig::default()).unwrap();
    let c = t.caps();
    assert_eq!(
        (c.name, c.can_get, c.eager_threshold, c.max_iov),
        ("tcp", false, 128 << 10, 1024)
    );
    assert!(c.max_packet > 256 << 10);
    let card = t.business_card();
    assert!(card.starts_with("127.0.0.1:"), "{card}");
    assert_ne!(t.local_addr().port(), 0);
    let mut t = t;
    assert!(matches!(
        t.add_peer(PeerId(1), &card),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        t.add_peer(PeerId(3), &card),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        t.add_peer(PeerId(0), "nonsense"),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        t.add_peer(PeerId(0), "0.0.0.0:5"),
        Err(Error::Invalid(_))
    ));
    assert!(!t.reaches(PeerId(0)));
    t.add_peer(PeerId(0), "127.0.0.1:9").unwrap();
    assert!(t.reaches(PeerId(0)));
    assert!(!t.reaches(PeerId(1)));
    let wild = cfg_with(|c| c.bind_addr = Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
    assert!(matches!(
        TcpTransport::listen(PeerId(0), 2, SECRET, &wild),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        TcpTransport::listen(PeerId(2), 2, SECRET, &TcpConfig::default()),
        Err(Error::Invalid(_))
    ));
}

/// Poll both until `done` says so (or panic after 20 s).
fn pump_until(
    a: &mut TcpTransport,
    b: &mut TcpTransport,
    mut done: impl FnMut(&mut TcpTransport, &mut TcpTransport) -> bool,
) {
    let start = Instant::now();
    while !done(a, b) {
        a.progress().unwrap();
        b.progress().unwrap();
        assert!(start.elapsed() < Duration::from_secs(20), "timed out");
        std::thread::yield_now();
    }
}

#[test]
fn lazy_connection_and_connect_all() {
    let (mut a, mut b) = pair_of(0, 1, 2, &TcpConfig::default());
    assert!(!a.is_connected(PeerId(1)));
    // The first try_send starts the connection and says WouldBlock until it is authenticated.
    assert_eq!(
        a.try_send(PeerId(1), &[IoSlice::new(b"x")]).unwrap(),
        SendOutcome::WouldBlock
    );
    pump_until(&mut a, &mut b, |a, b| {
        a.is_connected(PeerId(1)) && b.is_connected(PeerId(0))
    });
    assert_eq!(
        a.try_send(PeerId(1), &[IoSlice::new(b"x")]).unwrap(),
        SendOutcome::Done
    );
    let mut got = Vec::new();
    pump_until(&mut a, &mut b, |_, b| {
        b.poll_recv(&mut |p, d| got.push((p, d.to_vec()))).unwrap();
        !got.is_empty()
    });
    assert_eq!(got, [(PeerId(0), b"x".to_vec())]);
    assert_eq!((a.stats().connections, b.stats().connections), (1, 1));

    // connect_all in three threads.
    let n = 3;
    let mut ts: Vec<TcpTransport> = (0..n)
        .map(|r| TcpTransport::listen(PeerId(r), n, SECRET, &TcpConfig::default()).unwrap())
        .collect();
    let cards: Vec<String> = ts.iter().map(TcpTransport::business_card).collect();
    for (r, t) in ts.iter_mut().enumerate() {
        for (q, card) in cards.iter().enumerate() {
            if q != r {
                t.add_peer(PeerId(q as u32), card).unwrap();
            }
        }
    }
    let handles: Vec<_> = ts
        .into_iter()
        .map(|mut t| {
            std::thread::spawn(move || {
                t.connect_all().expect("connect_all");
                t
            })
        })
        .collect();
    let ts: Vec<TcpTransport> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for t in &ts {
        for q in 0..n {
            assert_eq!(t.is_connected(PeerId(q)), q != t.rank().0);
        }
        assert!(t.log_is_quiet());
    }
}

impl TcpTransport {
    /// No rejected connection was logged (tie-breaks are silent).
    fn log_is_quiet(&self) -> bool {
        self.log.iter().all(|l| !l.contains("closed"))
    }
}

/// What the split sink saw, in order.
#[derive(Debug, PartialEq, Eq)]
enum Ev {
    Whole(Vec<u8>),
    Placed { head: Vec<u8>, total: usize },
}

/// Places packets whose head starts with `P` into `dst` (of the length the head's second
/// byte says, in KiB; 255: all of the rest; 254: all of the rest, answering first), and those
/// starting with `L` whole once they have been declined once (a receive posted late);
/// declines the others.
struct Sink {
    events: Vec<Ev>,
    dst: Vec<Vec<u8>>,
    offered: usize,
    head_len: usize,
    /// An `L` packet was declined once.
    late: bool,
}

impl Sink {
    fn new(head_len: usize) -> Sink {
        Sink {
            events: Vec::new(),
            dst: Vec::new(),
            offered: 0,
            head_len,
            late: false,
        }
    }
}

/// A connected pair that allows large packets, and the split of the placement tests (heads of
/// 48 bytes, placement from 1 KiB of payload on).
fn split_pair() -> (TcpTransport, TcpTransport, SplitParams) {
    let cfg = cfg_with(|c| c.max_packet = BIG_PACKET);
    let (a, b) = pair_of(0, 1, 2, &cfg);
    let split = SplitParams {
        head_len: 48,
        min_rest: 1024,
    };
    (a, b, split)
}

impl RecvSink for Sink {
    fn deliver(&mut self, _: PeerId, packet: &[u8]) {
        self.events.push(Ev::Whole(packet.to_vec()));
    }
    fn place(&mut self, _: PeerId, head: &[u8], total: usize) -> Option<Placement> {
        assert_eq!(head.len(), self.head_len);
        self.offered += 1;
        if head[0] == b'L' {
            self.late = !self.late;
            if self.late {
                return None;
            }
        } else if head[0] != b'P' {
            return None;
        }
        let rest = total - head.len();
        let len = if head[1] >= 254 || head[0] == b'L' {
            rest
        } else {
            (head[1] as usize) << 10
        };
        self.dst.push(vec![0xee; len]);
        let d = self.dst.last_mut().expect("pushed");
        // SAFETY: `d`'s heap storage is not touched until `placed` (we only push to the outer
        // vector, which moves the inner `Vec` headers, not their buffers).
        let p = unsafe { Placement::new(d.as_mut_ptr(), d.len()) };
        Some(if head[1] == 254 { p.reply_first() } else { p })
    }
    fn placed(&mut self, _: PeerId, head: &[u8], total: usize) {
        self.events.push(Ev::Placed {
            head: head.to_vec(),
            total,
        });
    }
}

#[test]
fn header_data_split() {
    for bufs in [0, 8192] {
        let cfg = cfg_with(|c| {
            c.sndbuf = bufs;
            c.rcvbuf = bufs;
            c.max_packet = BIG_PACKET;
        });
        let (mut a, mut b) = pair_of(0, 1, 2, &cfg);
        let head_len = 48;
        let split = SplitParams {
            head_len,
            min_rest: 1024,
        };
        let mut rng = Rng::new(9);
        // (packet, expected placement) pairs.
        let mut sent: Vec<(Vec<u8>, Option<usize>)> = Vec::new();
        let mut sink = Sink::new(head_len);
        let mut offers_expected = 0;
        // Declined packets right behind a placed one are offered twice (see
        // declined_behind_a_placement_is_offered_again).
        let mut declined = 0;
        for i in 0..300 {
            let total = match i % 6 {
                0 => 10,                                // shorter than a head
                1 => head_len,                          // a head alone
                2 => head_len + 1023,                   // just under min_rest
                3 => head_len + 1024 + rng.below(4096), // small placements
                4 => head_len + rng.below(1 << 20),     // up to 1 MiB
                _ => cfg.max_packet,                    // the largest
            };
            let mut pk: Vec<u8> = (0..total).map(|_| rng.next() as u8).collect();
            let rest = total.saturating_sub(head_len);
            let offered = total >= head_len + 1024;
            let mut place = None;
            if offered {
                offers_expected += 1;
                match rng.below(4) {
                    0 => {
                        pk[0] = b'N';
                        declined += 1;
                    }
                    1 => {
                        // A placement shorter than the rest: the tail is dropped.
                        pk[0] = b'P';
                        pk[1] = rng.below((rest >> 10).max(1)) as u8;
                        place = Some((pk[1] as usize) << 10);
                    }
                    _ => {
                        pk[0] = b'P';
                        pk[1] = 255;
                        place = Some(rest);
                    }
                }
            } else if total > 0 {
                pk[0] = b'P';
            }
            // Send in two pieces, as the engine does (header, payload).
            let cut = total.min(head_len);
            let iov = [IoSlice::new(&pk[..cut]), IoSlice::new(&pk[cut..])];
            let start = Instant::now();
            loop {
                match a.try_send(PeerId(1), &iov).unwrap() {
                    SendOutcome::Done => break,
                    SendOutcome::WouldBlock => {
                        a.progress().unwrap();
                        b.poll_recv_split(split, &mut sink).unwrap();
                        assert!(start.elapsed() < Duration::from_secs(20));
                    }
                }
            }
            sent.push((pk, place));
        }
        pump_until(&mut a, &mut b, |_, b| {
            b.poll_recv_split(split, &mut sink).unwrap();
            sink.events.len() == sent.len()
        });
        assert!(
            (offers_expected..=offers_expected + declined).contains(&sink.offered),
            "{} offers for {offers_expected} offered packets, {declined} declined",
            sink.offered
        );
        let mut dsts = sink.dst.iter();
        for (i, ((pk, place), ev)) in sent.iter().zip(&sink.events).enumerate() {
            match (place, ev) {
                (None, Ev::Whole(got)) => assert!(got == pk, "packet {i} delivered wrong"),
                (Some(n), Ev::Placed { head, total }) => {
                    assert_eq!(*total, pk.len(), "packet {i}");
                    assert_eq!(head[..], pk[..head_len], "packet {i} head");
                    let d = dsts.next().expect("a placement per placed packet");
                    assert_eq!(d.len(), *n);
                    assert!(
                        d[..] == pk[head_len..head_len + n],
                        "packet {i}: placed bytes differ"
                    );
                }
                (p, e) => panic!("packet {i}: expected placement {p:?}, got {e:?}"),
            }
        }
        assert_eq!(b.stats().packets_placed as usize, sink.dst.len());
        // The plain poll_recv never places.
        let mut n = 0;
        assert_eq!(
            a.try_send(PeerId(1), &[IoSlice::new(&vec![b'P'; 100_000])])
                .unwrap(),
            SendOutcome::Done
        );
        pump_until(&mut a, &mut b, |_, b| {
            b.poll_recv(&mut |_, d| {
                assert_eq!(d.len(), 100_000);
                n += 1
            })
            .unwrap();
            n == 1
        });
    }
}

/// A placement that asks to answer first: the poll that accepted it returns before reading
/// the packet on, although all of it has arrived; the next polls land it, then what follows.
#[test]
fn reply_first_placement_returns_at_once() {
    let (mut a, mut b, split) = split_pair();
    let head_len = split.head_len;
    let mut sink = Sink::new(head_len);
    let mut big: Vec<u8> = (0..head_len + (64 << 10)).map(|i| i as u8).collect();
    big[0] = b'P';
    big[1] = 254;
    let small = vec![b'N'; 100];
    for pk in [&big, &small] {
        let start = Instant::now();
        // (The first send also waits for the connection.)
        while a.try_send(PeerId(1), &[IoSlice::new(pk)]).unwrap() == SendOutcome::WouldBlock {
            a.progress().unwrap();
            b.poll_recv_split(split, &mut sink).unwrap();
            assert!(start.elapsed() < Duration::from_secs(20));
        }
    }
    // Both packets wait on b's socket (loopback delivers within the send): the first poll
    // that sees the head places it and returns.
    pump_until(&mut a, &mut b, |_, b| {
        b.poll_recv_split(split, &mut sink).unwrap();
        sink.offered == 1
    });
    assert!(
        sink.events.is_empty(),
        "the poll read on: {:?}",
        sink.events.len()
    );
    pump_until(&mut a, &mut b, |_, b| {
        b.poll_recv_split(split, &mut sink).unwrap();
        sink.events.len() == 2
    });
    assert_eq!(
        sink.events[0],
        Ev::Placed {
            head: big[..head_len].to_vec(),
            total: big.len()
        }
    );
    assert!(sink.dst[0][..] == big[head_len..]);
    assert_eq!(sink.events[1], Ev::Whole(small));
}

/// A packet declined right behind one placed in the same poll (the next RTS or fragment of a
/// stream, whose receive the engine is about to post) is not read on: the poll returns, and
/// the next one offers it again, to land it straight in place. Declined again, it is read
/// whole.
#[test]
fn declined_behind_a_placement_is_offered_again() {
    let (mut a, mut b, split) = split_pair();
    let head_len = split.head_len;
    let mut sink = Sink::new(head_len);
    let packet = |mark: u8, n: usize| {
        let mut p: Vec<u8> = (0..head_len + n).map(|i| (i * 7) as u8).collect();
        p[0] = mark;
        p[1] = 255;
        p
    };
    let (first, late, declined, last) = (
        packet(b'P', 64 << 10),
        packet(b'L', 100 << 10),
        packet(b'N', 80 << 10),
        packet(b'P', 4 << 10),
    );
    let order = [&first, &late, &first, &declined, &last];
    for pk in order {
        let start = Instant::now();
        // (The first send also waits for the connection, which b's progress accepts without
        // reading any packet.)
        while a.try_send(PeerId(1), &[IoSlice::new(pk)]).unwrap() == SendOutcome::WouldBlock {
            a.progress().unwrap();
            b.progress().unwrap();
            assert!(start.elapsed() < Duration::from_secs(20));
        }
    }
    // All of it waits on b's socket. The poll that places the first packet sees the head of
    // the late one, which is declined: it returns without reading it.
    pump_until(&mut a, &mut b, |_, b| {
        b.poll_recv_split(split, &mut sink).unwrap();
        !sink.events.is_empty()
    });
    assert_eq!(sink.events.len(), 1);
    assert_eq!(sink.offered, 2);
    pump_until(&mut a, &mut b, |_, b| {
        b.poll_recv_split(split, &mut sink).unwrap();
        sink.events.len() == order.len()
    });
    let placed = |p: &Vec<u8>| Ev::Placed {
        head: p[..head_len].to_vec(),
        total: p.len(),
    };
    assert_eq!(
        sink.events,
        [
            placed(&first),
            placed(&late),
            placed(&first),
            Ev::Whole(declined.clone()),
            placed(&last)
        ]
    );
    // first, late twice, first, declined twice, last.
    assert_eq!(sink.offered, 7);
    assert!(sink.dst[1][..] == late[head_len..]);
    assert!(sink.dst[3][..] == last[head_len..]);
}

#[test]
fn default_split_delivers_whole() {
    // A driver that does not override poll_recv_split delivers through `deliver`.
    let me = PeerId(0);
    let mut lo = crate::loopback::LoopbackTransport::new(me);
    lo.try_send(me, &[IoSlice::new(&[b'P'; 5000])]).unwrap();
    let mut sink = Sink::new(48);
    let split = SplitParams {
        head_len: 48,
        min_rest: 0,
    };
    assert_eq!(lo.poll_recv_split(split, &mut sink).unwrap(), 1);
    assert_eq!(sink.offered, 0);
    assert_eq!(sink.events, [Ev::Whole(vec![b'P'; 5000])]);
    assert_eq!(lo.poll_lost(), None);
}

#[test]
fn dropped_peer_is_gone_not_lost() {
    let (mut a, mut b) = pair_of(0, 1, 2, &TcpConfig::default());
    while a.try_send(PeerId(1), &[IoSlice::new(b"hi")]).unwrap() != SendOutcome::Done {
        a.progress().unwrap();
        b.progress().unwrap();
    }
    // Data sent just before the drop still arrives, then the goodbye: not a loss.
    drop(b);
    let mut got = 0;
    let start = Instant::now();
    loop {
        a.poll_recv(&mut |_, _| got += 1).unwrap();
        if matches!(
            a.try_send(PeerId(1), &[IoSlice::new(b"x")]),
            Err(Error::PeerLost(PeerId(1)))
        ) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10));
    }
    assert_eq!(a.poll_lost(), None);
    assert_eq!(got, 0);
}

/// Ranks 0 and 1 of a job of two, with socket buffers of `bytes` each way.
fn pair_with_buffers(bytes: usize) -> (TcpTransport, TcpTransport) {
    let cfg = cfg_with(|c| {
        c.sndbuf = bytes;
        c.rcvbuf = bytes;
    });
    pair_of(0, 1, 2, &cfg)
}

/// Send one packet from `a` to rank 1 (`b`), reading `b` into `got` while `a` would block.
fn send_reading(
    a: &mut TcpTransport,
    b: &mut TcpTransport,
    iov: &[IoSlice<'_>],
    got: &mut Vec<Vec<u8>>,
) {
    let start = Instant::now();
    while a.try_send(PeerId(1), iov).unwrap() != SendOutcome::Done {
        a.progress().unwrap();
        b.poll_recv(&mut |_, d| got.push(d.to_vec())).unwrap();
        assert!(start.elapsed() < Duration::from_secs(10));
    }
}

#[test]
fn more_iovecs_than_one_system_call_takes() {
    // 1024 entries plus the frame header: two sendmsg windows, through small buffers so that
    // the cut between windows and partial writes meet.
    let (mut a, mut b) = pair_with_buffers(8192);
    let parts: Vec<Vec<u8>> = (0..1024).map(|i| vec![i as u8; 1 + i % 300]).collect();
    let iov: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
    let mut got = Vec::new();
    for _ in 0..5 {
        send_reading(&mut a, &mut b, &iov, &mut got);
    }
    pump_until(&mut a, &mut b, |_, b| {
        b.poll_recv(&mut |_, d| got.push(d.to_vec())).unwrap();
        got.len() == 5
    });
    let whole = parts.concat();
    assert!(got.iter().all(|g| *g == whole));
}

#[test]
fn small_packets_through_a_full_socket_arrive_whole() {
    // Packets small enough to be gathered into one buffer and written with `send` (header and
    // data slices of every length up to that size), streamed without the receiver reading
    // until the socket is full: every one arrives whole and in order. (Linux refuses such a
    // write whole rather than cutting it; a cut one would take the path of the large packets.)
    let (mut a, mut b) = pair_with_buffers(4096);
    // Payload lengths 0 ..= the largest that fits, each once, in a scrambled order (37 is
    // prime to their count).
    let lengths = SMALL_WRITE - FRAME_HDR - 16 + 1;
    let packets: Vec<(Vec<u8>, Vec<u8>)> = (0..lengths as u32)
        .map(|i| {
            let n = (i as usize * 37) % lengths;
            (i.to_le_bytes().repeat(4), vec![(i % 251) as u8; n])
        })
        .collect();
    let mut got = Vec::new();
    for (h, d) in &packets {
        send_reading(
            &mut a,
            &mut b,
            &[IoSlice::new(h), IoSlice::new(d)],
            &mut got,
        );
    }
    assert!(a.stats().would_block > 0, "the socket filled up");
    pump_until(&mut a, &mut b, |_, b| {
        b.poll_recv(&mut |_, p| got.push(p.to_vec())).unwrap();
        got.len() == packets.len()
    });
    for (g, (h, d)) in got.iter().zip(&packets) {
        assert_eq!(*g, [&h[..], &d[..]].concat());
    }
}

#[test]
fn large_receive_buffers_are_given_back() {
    let (mut a, mut b) = pair_of(0, 1, 2, &cfg_with(|c| c.max_packet = BIG_PACKET));
    let big = vec![7u8; 1 << 20];
    let mut n = 0;
    for pk in [&big[..], b"small", &big[..], b"small"] {
        while a.try_send(PeerId(1), &[IoSlice::new(pk)]).unwrap() != SendOutcome::Done {
            a.progress().unwrap();
            b.poll_recv(&mut |_, _| n += 1).unwrap();
        }
    }
    pump_until(&mut a, &mut b, |_, b| {
        b.poll_recv(&mut |_, _| n += 1).unwrap();
        n == 4
    });
    let idx = b.established[0];
    let c = b.conns[idx].as_ref().unwrap();
    assert_eq!(
        c.rx.len(),
        RX_INITIAL,
        "the large buffer went back to the pool"
    );
    assert!(b.pool.spare.len() <= RX_POOL_KEEP);
}

/// Processes whose engines speak different protocol versions (mismatched builds) refuse each
/// other at the handshake, the versions in the log, instead of misreading each other's packets.
#[test]
fn engines_of_different_versions_refuse_each_other() {
    let mut a = TcpTransport::listen(PeerId(0), 2, SECRET, &cfg_with(|c| c.engine_version = 1))
        .expect("listen a");
    let mut b = TcpTransport::listen(PeerId(1), 2, SECRET, &cfg_with(|c| c.engine_version = 2))
        .expect("listen b");
    a.add_peer(PeerId(1), &b.business_card()).unwrap();
    b.add_peer(PeerId(0), &a.business_card()).unwrap();
    pump_until(&mut a, &mut b, |a, _| {
        matches!(
            a.try_send(PeerId(1), &[IoSlice::new(b"hi")]),
            Err(Error::PeerLost(PeerId(1)))
        )
    });
    let log = [a.take_log(), b.take_log()].concat().join("\n");
    assert!(
        log.contains("engine protocol version 2, this rank 1")
            || log.contains("engine protocol version 1, this rank 2"),
        "{log}"
    );
}

/// A receiver that stops reading for longer than the link timeout (an MPI rank computing: its
/// socket buffer fills, its window closes) is not a failed link: the sender keeps the
/// connection, and everything arrives once the receiver reads again.
#[test]
fn a_receiver_that_stops_reading_is_not_a_failed_link() {
    let cfg = cfg_with(|c| {
        c.link_timeout = Duration::from_millis(300);
        c.sndbuf = 64 << 10;
        c.rcvbuf = 64 << 10;
    });
    let (mut a, mut b) = pair_of(0, 1, 2, &cfg);
    let chunk = vec![7u8; 32 << 10];
    let mut sent = 0usize;
    let start = Instant::now();
    // `a` sends while `b` never reads (but connects: both sides poll until the connection is
    // up), for four link timeouts.
    while start.elapsed() < Duration::from_millis(1200) {
        match a.try_send(PeerId(1), &[IoSlice::new(&chunk)]).unwrap() {
            SendOutcome::Done => sent += 1,
            SendOutcome::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
        }
        a.progress().unwrap();
        if !b.is_connected(PeerId(0)) {
            b.pump(None, 0).unwrap();
        }
        assert!(
            a.poll_lost().is_none(),
            "the sender lost a peer that only stopped reading"
        );
    }
    assert!(
        sent > 4,
        "the buffers should have filled: {sent} packets sent"
    );
    let mut got = 0usize;
    pump_until(&mut a, &mut b, |_, b| {
        got += b
            .poll_recv(&mut |p, pkt| assert_eq!((p, pkt.len()), (PeerId(0), chunk.len())))
            .unwrap();
        got == sent
    });
    assert!(a.poll_lost().is_none() && b.poll_lost().is_none());
}
