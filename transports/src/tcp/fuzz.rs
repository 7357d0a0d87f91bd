//! Fuzzing of what the TCP driver decodes from a peer: frame headers, the frame stream as
//! `parse` cuts it out of a connection's receive buffer (with placements of large packets
//! straight into engine memory), and the handshake's hello and auth messages. Structured
//! inputs (encoded messages and streams, mutated, cut at random read boundaries, lengths
//! around `max_packet` and huge ones) and raw bytes. Properties: no panic; bounded work (every
//! `parse` call consumes or waits, a stream ends within a number of reads linear in its
//! length); the receive buffer never grows past what `max_packet` allows, whatever the length
//! fields say; decoders are canonical (what decodes re-encodes to the same bytes) and
//! encode → decode is the identity; a well-formed stream is delivered and placed exactly.
//! `MADMPI_FUZZ_CASES` sets the number of inputs (see `fuzz/kit.rs`).

use std::fs::File;

use super::super::handshake::{Auth, Hello, Role, Verdict, AUTH_LEN, HELLO_LEN};
use super::*;
use crate::fuzzkit::{self, Rng};
use crate::Placement;

const CI_CASES: u64 = 50_000;

#[test]
fn fuzz_frame_header() {
    fuzzkit::assert_metering();
    fuzzkit::run("tcp::decode_frame_header", CI_CASES * 4, |rng| {
        let max_packet = rng.edgy_u32() as usize;
        let kind = if rng.one_in(4) {
            rng.next_u32() as u8
        } else {
            rng.below(2) as u8
        };
        let len = rng.edgy_u32() as usize;
        let mut h = frame_header(kind, len);
        match rng.below(3) {
            0 => {}
            1 => {
                let mut v = h.to_vec();
                rng.mutate(&mut v, 3);
                v.resize(FRAME_HDR, 0);
                h.copy_from_slice(&v);
            }
            _ => rng.fill(&mut h),
        }
        let (r, usage) = fuzzkit::metered(|| decode_frame_header(&h, max_packet));
        match r {
            Ok(FrameHead::Packet(n)) => {
                assert!(n <= max_packet);
                assert_eq!(frame_header(KIND_PACKET, n), h, "canonical");
                assert_eq!(usage.count, 0);
            }
            Ok(FrameHead::Bye) => {
                assert_eq!(frame_header(KIND_BYE, 0), h, "canonical");
                assert_eq!(usage.count, 0);
            }
            Err(_) => {
                assert!(usage.largest <= 256, "{usage:?}");
                // Round trip: only what the encoder does not make (or too long) is refused.
                let made = h == frame_header(KIND_PACKET, len) && len <= max_packet
                    || h == frame_header(KIND_BYE, 0);
                assert!(!made, "refused {h:02x?}");
            }
        }
    });
}

fn random_hello(rng: &mut Rng) -> Hello {
    let mut nonce = [0; 32];
    rng.fill(&mut nonce);
    Hello {
        role: if rng.one_in(2) {
            Role::Connector
        } else {
            Role::Acceptor
        },
        nprocs: rng.edgy_u32(),
        rank: rng.edgy_u32(),
        target: rng.edgy_u32(),
        max_packet: rng.edgy_u32(),
        engine: rng.edgy_u32(),
        nonce,
    }
}

#[test]
fn fuzz_handshake() {
    fuzzkit::run("tcp::handshake (Hello, Auth)", CI_CASES * 4, |rng| {
        // Hello: round trip, then mutated or raw; what decodes is canonical.
        let h = random_hello(rng);
        let b = h.encode();
        assert_eq!(Hello::decode(&b).as_ref(), Ok(&h));
        let mut v = b.to_vec();
        match rng.below(3) {
            0 => rng.mutate(&mut v, 3),
            1 => v = rng.raw(HELLO_LEN),
            _ => {
                // Random after a good magic.
                let tail = rng.raw(HELLO_LEN);
                v.truncate(8 + rng.below(4));
                v.extend_from_slice(&tail);
            }
        }
        // Whatever prefix arrived, the early check agrees with the magic.
        let n = v.len().min(HELLO_LEN);
        let ok_prefix = handshake::magic_prefix_ok(&v[..n]);
        assert_eq!(ok_prefix, v[..n.min(8)] == b.as_slice()[..n.min(8)]);
        v.resize(HELLO_LEN, 0);
        let m: [u8; HELLO_LEN] = v.try_into().expect("HELLO_LEN");
        if let Ok(h) = Hello::decode(&m) {
            assert_eq!(h.encode(), m, "canonical hello");
        }
        // Auth: the same.
        let mut mac = [0; 32];
        rng.fill(&mut mac);
        let verdict = *rng.pick(&[
            Verdict::Accept,
            Verdict::Superseded,
            Verdict::Duplicate,
            Verdict::Refused,
        ]);
        let a = Auth { verdict, mac };
        let b = a.encode();
        assert_eq!(Auth::decode(&b).as_ref(), Ok(&a));
        let mut v = b.to_vec();
        if rng.one_in(2) {
            rng.mutate(&mut v, 3);
        } else {
            v = rng.raw(AUTH_LEN);
        }
        v.resize(AUTH_LEN, 0);
        let m: [u8; AUTH_LEN] = v.try_into().expect("AUTH_LEN");
        if let Ok(a) = Auth::decode(&m) {
            assert_eq!(a.encode(), m, "canonical auth");
        }
    });
}

/// What `parse` handed the sink, in order.
#[derive(Debug, PartialEq, Eq)]
enum Got {
    Delivered(Vec<u8>),
    /// Head, total length, and the bytes that landed in the placement.
    Placed(Vec<u8>, usize, Vec<u8>),
}

/// A sink that places some packets in buffers of random sizes and records everything.
struct Sink {
    rng: Rng,
    got: Vec<Got>,
    /// The placement being filled, kept alive until `placed`.
    dst: Option<Vec<u8>>,
    place_len: usize,
}

impl RecvSink for Sink {
    fn deliver(&mut self, _: PeerId, packet: &[u8]) {
        assert!(self.dst.is_none(), "delivered during a placement");
        self.got.push(Got::Delivered(packet.to_vec()));
    }

    fn place(&mut self, _: PeerId, head: &[u8], total_len: usize) -> Option<Placement> {
        assert!(self.dst.is_none(), "placement asked during a placement");
        assert!(head.len() < total_len);
        if self.rng.one_in(3) {
            return None;
        }
        let rest = total_len - head.len();
        // Shorter than the rest (the driver drops the excess), exact, or longer.
        let n = match self.rng.below(3) {
            0 => self.rng.below(rest + 1),
            1 => rest,
            _ => rest + self.rng.below(64),
        };
        self.place_len = n;
        let mut dst = vec![0u8; n];
        // SAFETY: `dst` is kept in `self.dst`, unmoved (a Vec's buffer does not move with it)
        // and untouched, until `placed`.
        let p = unsafe { Placement::new(dst.as_mut_ptr(), n) };
        self.dst = Some(dst);
        Some(if self.rng.one_in(4) {
            p.reply_first()
        } else {
            p
        })
    }

    fn placed(&mut self, _: PeerId, head: &[u8], total_len: usize) {
        let dst = self.dst.take().expect("placed without a placement");
        let rest = total_len - head.len();
        self.got.push(Got::Placed(
            head.to_vec(),
            total_len,
            dst[..rest.min(dst.len())].to_vec(),
        ));
    }
}

/// One read of the test: what `Conn::read` does with the socket, from `input` instead (the
/// first bytes into the placement being filled, the rest into the receive buffer).
fn read_from(c: &mut Conn, input: &mut &[u8], limit: usize, want: usize) -> usize {
    let left = c.direct.as_ref().map_or(0, |d| d.left);
    let end = c.rx.len().min(c.rx_end.saturating_add(limit));
    let room = left + (end - c.rx_end);
    let n = want.min(room).min(input.len());
    let (now, later) = input.split_at(n);
    *input = later;
    let into_dst = n.min(left);
    if into_dst > 0 {
        let d = c.direct.as_mut().expect("left > 0");
        // SAFETY: `into_dst <= left`: inside the placement, which the sink keeps alive.
        unsafe {
            std::ptr::copy_nonoverlapping(now.as_ptr(), d.ptr, into_dst);
            d.ptr = d.ptr.add(into_dst);
        }
        d.left -= into_dst;
    }
    let rest = &now[into_dst..];
    c.rx[c.rx_end..c.rx_end + rest.len()].copy_from_slice(rest);
    c.rx_end += rest.len();
    n
}

/// Frames for a stream: packets of random lengths (some at `max_packet`), maybe a goodbye.
fn stream(rng: &mut Rng, max_packet: usize) -> (Vec<u8>, Vec<Vec<u8>>, bool) {
    let mut s = Vec::new();
    let mut packets = Vec::new();
    for _ in 0..rng.below(6) {
        let len = match rng.below(6) {
            0 => max_packet,
            1 => rng.below(max_packet + 1),
            _ => rng.len_upto(300).min(max_packet),
        };
        let p = rng.bytes(len);
        s.extend_from_slice(&frame_header(KIND_PACKET, len));
        s.extend_from_slice(&p);
        packets.push(p);
    }
    let bye = rng.one_in(4);
    if bye {
        s.extend_from_slice(&frame_header(KIND_BYE, 0));
    }
    (s, packets, bye)
}

#[test]
fn fuzz_frame_stream() {
    fuzzkit::assert_metering();
    let null: OwnedFd = File::open("/dev/null").expect("/dev/null").into();
    let mut c = Conn::new(null, 0, "fuzz".into(), Role::Acceptor, Phase::Established);
    fuzzkit::run("tcp::parse (frame stream)", CI_CASES, |rng| {
        let max_packet = *rng.pick(&[16, 100, 4096, RX_INITIAL + 100]);
        let split = SplitParams {
            head_len: *rng.pick(&[0, 8, 48]),
            min_rest: *rng.pick(&[0, 1, 64]),
        };
        let mut pool = RxPool {
            size: FRAME_HDR + max_packet + RX_MIN_FREE,
            spare: Vec::new(),
        };
        // The largest receive buffer a connection may hold, whatever a peer sends.
        let rx_bound = RX_INITIAL.max(pool.size);
        // A fresh connection state (the allocation of the fd is reused).
        c.rx = Vec::new();
        c.rx_small = Vec::new();
        (c.rx_start, c.rx_end) = (0, 0);
        (c.offered, c.bye, c.last_placed, c.reply_first) = (false, false, false, false);
        c.direct = None;
        c.head.clear();

        let (mut bytes, packets, bye) = stream(rng, max_packet);
        let intact = rng.one_in(2);
        if !intact {
            if rng.one_in(4) {
                bytes = rng.raw(600);
            } else {
                rng.mutate(&mut bytes, 4);
            }
        }
        let mut sink = Sink {
            rng: Rng::new(rng.next_u64()),
            got: Vec::new(),
            dst: None,
            place_len: 0,
        };
        let mut stats = (0u64, 0u64);
        let mut input = &bytes[..];
        let mut failed = false;
        let mut idle = 0;
        let mut rounds = 0;
        loop {
            if let Err(f) = parse(
                &mut c, &mut pool, 1, max_packet, split, &mut sink, &mut stats,
            ) {
                assert!(!matches!(f, Fail::Closed | Fail::Fatal(_)));
                failed = true;
                break;
            }
            assert!(c.rx.len() <= rx_bound, "{} > {rx_bound}", c.rx.len());
            assert!(c.rx_start <= c.rx_end && c.rx_end <= c.rx.len());
            rounds += 1;
            assert!(rounds <= 4 * bytes.len() + 16, "parse makes no progress");
            // As the next poll: the engine ran, parsing resumes (before reading).
            stats = (0, 0);
            if std::mem::take(&mut c.reply_first) {
                continue;
            }
            if input.is_empty() {
                break;
            }
            c.rx_reserve(0, &mut pool);
            let limit = if c.direct.is_some() || (c.last_placed && c.rx_len() == 0) {
                FRAME_HDR + split.head_len
            } else {
                usize::MAX
            };
            let want = 1 + rng.len_upto(2 * max_packet);
            if read_from(&mut c, &mut input, limit, want) == 0 {
                idle += 1;
                assert!(idle < 3, "no room to read into: the stream cannot progress");
            } else {
                idle = 0;
            }
        }
        c.rx_shrink(&mut pool);
        assert!(c.rx.len() <= rx_bound);
        if intact {
            assert!(!failed);
            assert_eq!(c.bye, bye);
            assert!(c.direct.is_none() && c.rx_len() == 0, "bytes left over");
            // Each packet delivered whole or placed: head + what fit in the placement.
            assert_eq!(sink.got.len(), packets.len());
            for (g, p) in sink.got.iter().zip(&packets) {
                match g {
                    Got::Delivered(d) => assert_eq!(d, p),
                    Got::Placed(head, total, rest) => {
                        assert_eq!(*total, p.len());
                        assert_eq!(&p[..head.len()], &head[..]);
                        assert_eq!(&p[head.len()..head.len() + rest.len()], &rest[..]);
                    }
                }
            }
        }
        let _ = sink.place_len;
    });
}
