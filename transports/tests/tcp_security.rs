//! Foreign clients against a `tcp` transport: garbage, a wrong secret, a hijack attempt, an
//! oversized frame after a correct handshake, silence, a flood of handshakes. Each is closed
//! with a logged reason, and the legitimate traffic between two transports carries on intact.
//!
//! The clients are plain blocking sockets in their own threads; the main thread keeps the two
//! legitimate transports talking meanwhile.

use std::io::{IoSlice, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use madmpi_transports::tcp::testing::{self, AUTH_LEN, HELLO_LEN};
use madmpi_transports::tcp::{TcpConfig, TcpTransport};
use madmpi_transports::{PeerId, SendOutcome, Transport};

const SECRET: [u8; 32] = *b"the job secret, thirty-two bytes";
const NPROCS: u32 = 5;

fn config() -> TcpConfig {
    TcpConfig {
        handshake_timeout: Duration::from_millis(700),
        max_packet: 1 << 20,
        max_handshakes: 32,
        ..TcpConfig::default()
    }
}

/// What a foreign client observed.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// The server closed the connection (EOF or reset) after sending `bytes` bytes.
    Closed { bytes: usize },
    /// The server's verdict on our handshake, then it closed.
    Verdict(u8),
    /// Still open after the deadline.
    Open,
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// Read until the server closes; how many bytes it sent.
fn until_closed(s: &mut TcpStream) -> Seen {
    let mut total = 0;
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Seen::Closed { bytes: total },
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Seen::Closed { bytes: total }
            }
            Err(_) => return Seen::Open,
        }
    }
}

/// A correct handshake (if `secret` is right) claiming `rank`; returns the server's verdict,
/// or `None` if it closed instead of answering.
fn handshake(s: &mut TcpStream, rank: u32, secret: &[u8; 32]) -> Option<u8> {
    let nonce = [rank as u8; 32];
    s.write_all(&testing::client_hello(rank, 0, NPROCS, 1 << 20, nonce))
        .unwrap();
    let mut hello = [0u8; HELLO_LEN];
    s.read_exact(&mut hello).ok()?;
    let auth = testing::client_auth(secret, rank, nonce, &hello).expect("server hello");
    s.write_all(&auth).unwrap();
    let mut reply = [0u8; AUTH_LEN];
    s.read_exact(&mut reply).ok()?;
    Some(testing::verdict(&reply))
}

/// An attack: what the client saw, and its local port (to find its log line).
type Attack = Box<dyn FnOnce(SocketAddr) -> (Seen, u16) + Send>;

fn port(s: &TcpStream) -> u16 {
    s.local_addr().unwrap().port()
}

fn attacks() -> Vec<(&'static str, &'static str, Attack)> {
    vec![
        (
            "garbage",
            "bad magic",
            Box::new(|addr| {
                let mut s = connect(addr);
                let junk: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
                s.write_all(&junk).unwrap();
                (until_closed(&mut s), port(&s))
            }),
        ),
        (
            "HTTP request (shorter than a hello)",
            "bad magic",
            Box::new(|addr| {
                let mut s = connect(addr);
                s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n")
                    .unwrap();
                (until_closed(&mut s), port(&s))
            }),
        ),
        (
            "wrong secret",
            "authentication failed",
            Box::new(|addr| {
                let mut s = connect(addr);
                let seen = match handshake(&mut s, 2, &[0u8; 32]) {
                    None => Seen::Closed { bytes: HELLO_LEN },
                    Some(v) => Seen::Verdict(v),
                };
                (seen, port(&s))
            }),
        ),
        (
            "hijack of a connected rank",
            "rank 1 is already connected",
            Box::new(|addr| {
                let mut s = connect(addr);
                let seen = match handshake(&mut s, 1, &SECRET) {
                    Some(v) => {
                        assert_eq!(until_closed(&mut s), Seen::Closed { bytes: 0 });
                        Seen::Verdict(v)
                    }
                    None => Seen::Closed { bytes: 0 },
                };
                (seen, port(&s))
            }),
        ),
        (
            "unregistered rank",
            "not a registered peer",
            Box::new(|addr| {
                let mut s = connect(addr);
                let seen = match handshake(&mut s, 3, &SECRET) {
                    None => Seen::Closed { bytes: HELLO_LEN },
                    Some(v) => Seen::Verdict(v),
                };
                (seen, port(&s))
            }),
        ),
        (
            "rank out of range",
            "invalid rank",
            Box::new(|addr| {
                let mut s = connect(addr);
                let seen = match handshake(&mut s, 77, &SECRET) {
                    None => Seen::Closed { bytes: HELLO_LEN },
                    Some(v) => Seen::Verdict(v),
                };
                (seen, port(&s))
            }),
        ),
        (
            "oversized frame after a correct handshake",
            "exceeds max_packet",
            Box::new(|addr| {
                let mut s = connect(addr);
                assert_eq!(handshake(&mut s, 2, &SECRET), Some(0), "accepted");
                s.write_all(&testing::frame_header((1 << 20) + 1)).unwrap();
                s.write_all(&[0u8; 1000]).unwrap();
                (until_closed(&mut s), port(&s))
            }),
        ),
        (
            "unknown frame version after a correct handshake",
            "malformed frame header",
            Box::new(|addr| {
                let mut s = connect(addr);
                assert_eq!(handshake(&mut s, 4, &SECRET), Some(0), "accepted");
                let mut h = testing::frame_header(10);
                h[1] = 9;
                s.write_all(&h).unwrap();
                s.write_all(&[0u8; 10]).unwrap();
                (until_closed(&mut s), port(&s))
            }),
        ),
        (
            "silent",
            "handshake timed out",
            Box::new(|addr| {
                let mut s = connect(addr);
                let t = Instant::now();
                let seen = until_closed(&mut s);
                assert!(t.elapsed() < Duration::from_secs(4), "closed in time");
                // It did send its hello (64 bytes) and nothing else.
                assert_eq!(seen, Seen::Closed { bytes: HELLO_LEN });
                (seen, port(&s))
            }),
        ),
    ]
}

/// Keep `a` and `b` exchanging checked, numbered messages until `stop`; returns how many
/// each received.
fn legit_traffic(
    a: &mut TcpTransport,
    b: &mut TcpTransport,
    stop: &mut dyn FnMut() -> bool,
) -> (u64, u64) {
    let mut sent = [0u64; 2];
    let mut got = [0u64; 2];
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut finishing = false;
    loop {
        for (i, (t, to)) in [(&mut *a, PeerId(1)), (&mut *b, PeerId(0))]
            .into_iter()
            .enumerate()
        {
            if !finishing {
                let mut m = vec![i as u8; 16 + (sent[i] % 3000) as usize];
                m[..8].copy_from_slice(&sent[i].to_le_bytes());
                if t.try_send(to, &[IoSlice::new(&m)]).unwrap() == SendOutcome::Done {
                    sent[i] += 1;
                }
            }
            let from = 1 - i;
            t.poll_recv(&mut |p, m| {
                assert_eq!(p.0 as usize, from);
                let seq = u64::from_le_bytes(m[..8].try_into().unwrap());
                assert_eq!(seq, got[i], "legit traffic lost or reordered");
                assert_eq!(m.len(), 16 + (seq % 3000) as usize);
                assert!(m[8..].iter().all(|&x| x == from as u8));
                got[i] += 1;
            })
            .unwrap();
            if let Some(p) = t.poll_lost() {
                // Only the ranks the misbehaving clients impersonated may be lost.
                assert!(
                    p == PeerId(2) || p == PeerId(4),
                    "a legitimate peer was lost"
                );
            }
        }
        if !finishing && stop() {
            finishing = true;
        }
        if finishing && got[0] == sent[1] && got[1] == sent[0] {
            return (got[0], got[1]);
        }
        assert!(Instant::now() < deadline, "legit traffic stalled");
        std::thread::yield_now();
    }
}

#[test]
fn foreign_clients_are_rejected_and_traffic_continues() {
    let cfg = config();
    let mut a = TcpTransport::listen(PeerId(0), NPROCS, SECRET, &cfg).unwrap();
    let mut b = TcpTransport::listen(PeerId(1), NPROCS, SECRET, &cfg).unwrap();
    a.add_peer(PeerId(1), &b.business_card()).unwrap();
    b.add_peer(PeerId(0), &a.business_card()).unwrap();
    // Ranks 2 and 4 are registered (their cards point nowhere useful); rank 3 is not.
    a.add_peer(PeerId(2), "127.0.0.1:9").unwrap();
    a.add_peer(PeerId(4), "127.0.0.1:9").unwrap();
    // Establish the legitimate connection first, so that the hijack has something to hijack:
    // rank 1 dials (a second connection claiming rank 1 is then a duplicate; had rank 0
    // dialled, it would look like the loser of a simultaneous connect and be turned away
    // without a log line).
    let start = Instant::now();
    while b
        .try_send(PeerId(0), &[IoSlice::new(&0u64.to_le_bytes())])
        .unwrap()
        != SendOutcome::Done
    {
        a.progress().unwrap();
        b.progress().unwrap();
        assert!(start.elapsed() < Duration::from_secs(10));
    }
    let mut first = false;
    while !first {
        a.poll_recv(&mut |_, _| first = true).unwrap();
    }
    let mut warm = 0;
    legit_traffic(&mut a, &mut b, &mut || {
        warm += 1;
        warm > 50
    });
    assert!(a.is_connected(PeerId(1)));
    a.take_log();

    let addr = a.local_addr();
    let mut expected = Vec::new();
    let mut clients: Vec<JoinHandle<(&'static str, (Seen, u16))>> = Vec::new();
    for (name, reason, attack) in attacks() {
        expected.push((name, reason));
        clients.push(std::thread::spawn(move || (name, attack(addr))));
    }
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = Arc::clone(&done);
        let clients = std::mem::take(&mut clients);
        std::thread::spawn(move || {
            let r: Vec<(&str, (Seen, u16))> =
                clients.into_iter().map(|h| h.join().unwrap()).collect();
            done.store(true, Ordering::Release);
            r
        })
    };
    let (ga, gb) = legit_traffic(&mut a, &mut b, &mut || done.load(Ordering::Acquire));
    let results = watcher.join().unwrap();
    eprintln!("legit traffic during the attacks: {ga} and {gb} messages");
    for (name, (seen, _)) in &results {
        eprintln!("{name}: {seen:?}");
        match *name {
            "hijack of a connected rank" => assert_eq!(*seen, Seen::Verdict(2), "{name}"),
            "oversized frame after a correct handshake"
            | "unknown frame version after a correct handshake" => {
                assert!(matches!(seen, Seen::Closed { .. }), "{name}: {seen:?}")
            }
            // Never a verdict without the secret and a registered rank: closed, after at most
            // the server's hello.
            _ => assert!(
                matches!(seen, Seen::Closed { bytes } if *bytes <= HELLO_LEN),
                "{name}: {seen:?}"
            ),
        }
    }
    let log = a.take_log();
    for line in &log {
        eprintln!("log: {line}");
    }
    // Each client's rejection is logged with its own address and the expected reason.
    for ((name, reason), (_, (_, port))) in expected.iter().zip(&results) {
        let addr = format!("127.0.0.1:{port}");
        assert!(
            log.iter().any(|l| l.contains(reason) && l.contains(&addr)),
            "{name}: no log line with {reason:?} for {addr}"
        );
    }
    // The impostors of ranks 2 and 4 got in with the secret, misbehaved, and made those ranks
    // lost; rank 1 is untouched.
    assert!(log.iter().any(|l| l.contains("lost rank 2")));
    assert!(log.iter().any(|l| l.contains("lost rank 4")));
    assert!(a.is_connected(PeerId(1)));
    assert!(b.take_log().is_empty());
    assert!(a.stats().rejected >= 6);
}

#[test]
fn handshake_flood_is_bounded() {
    let cfg = TcpConfig {
        max_handshakes: 8,
        ..config()
    };
    let mut a = TcpTransport::listen(PeerId(0), NPROCS, SECRET, &cfg).unwrap();
    let mut b = TcpTransport::listen(PeerId(1), NPROCS, SECRET, &cfg).unwrap();
    a.add_peer(PeerId(1), &b.business_card()).unwrap();
    b.add_peer(PeerId(0), &a.business_card()).unwrap();
    // 40 silent connections against a limit of 8 handshakes at once.
    let silent: Vec<TcpStream> = (0..40).map(|_| connect(a.local_addr())).collect();
    let mut n = 0;
    legit_traffic(&mut a, &mut b, &mut || {
        n += 1;
        n > 3000
    });
    let log = a.take_log();
    let evicted = log.iter().filter(|l| l.contains("evicted")).count();
    assert!(evicted >= 30, "{evicted} evicted: {log:?}");
    assert!(a.is_connected(PeerId(1)));
    drop(silent);
}
