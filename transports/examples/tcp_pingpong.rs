//! Ping-pong through the `tcp` driver between two processes over loopback, to compare with
//! `raw_tcp_pingpong` (same shape: busy-polling, half round trip of 8 B, ping-pong bandwidth
//! of 1 MiB).
//!
//! Packets are sent as two iovecs, a 48-byte head and the payload, as the engine does. The
//! 1 MiB case runs twice: received whole (`poll_recv`: read into the driver's buffer, then
//! copied out by the receiver, as an engine would copy into the user buffer) and split
//! (`poll_recv_split`: the payload is read straight into the destination buffer).
//!
//! ```text
//! cargo run --release -p madmpi-transports --example tcp_pingpong [-- --iters N]
//!     [--bw-iters N] [--size BYTES]
//! ```
//!
//! The last line is machine-readable:
//! `tcp_driver latency_8B_ns=… bandwidth_copy_MBps=… bandwidth_split_MBps=… size=…`.

use std::io::{BufRead, BufReader, IoSlice, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use madmpi_transports::tcp::{TcpConfig, TcpTransport};
use madmpi_transports::{PeerId, Placement, RecvSink, SendOutcome, SplitParams, Transport};

const SECRET: [u8; 32] = *b"example secret, not for real use";
const HEAD: usize = 48;

struct Args {
    iters: usize,
    bw_iters: usize,
    size: usize,
    child: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        iters: 20_000,
        bw_iters: 200,
        size: 1 << 20,
        child: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{x} needs a value"));
        match x.as_str() {
            "--iters" => a.iters = val().parse().expect("number"),
            "--bw-iters" => a.bw_iters = val().parse().expect("number"),
            "--size" => a.size = val().parse().expect("number"),
            "--child" => a.child = Some(val()),
            "--bench" => {}
            _ => panic!("unknown argument {x}"),
        }
    }
    a
}

/// Receives one packet at a time: small ones whole, large ones into `dst` when splitting.
struct Sink {
    dst: Vec<u8>,
    got: bool,
    copy: bool,
}

impl RecvSink for Sink {
    fn deliver(&mut self, _: PeerId, p: &[u8]) {
        if self.copy && p.len() > HEAD {
            // What an engine does with a whole packet: copy the payload to the user buffer.
            let n = p.len() - HEAD;
            self.dst[..n].copy_from_slice(&p[HEAD..]);
        }
        self.got = true;
    }
    fn place(&mut self, _: PeerId, _: &[u8], total: usize) -> Option<Placement> {
        let n = total - HEAD;
        // SAFETY: `dst` is not touched until `placed` (we only poll meanwhile).
        Some(unsafe { Placement::new(self.dst.as_mut_ptr(), n) })
    }
    fn placed(&mut self, _: PeerId, _: &[u8], _: usize) {
        self.got = true;
    }
}

fn send(t: &mut TcpTransport, to: PeerId, head: &[u8], payload: &[u8]) {
    let iov = [IoSlice::new(head), IoSlice::new(payload)];
    loop {
        match t.try_send(to, &iov).expect("try_send") {
            SendOutcome::Done => return,
            SendOutcome::WouldBlock => t.progress().expect("progress"),
        }
    }
}

fn recv(t: &mut TcpTransport, sink: &mut Sink, split: bool) {
    sink.got = false;
    let params = SplitParams {
        head_len: HEAD,
        min_rest: 4096,
    };
    while !sink.got {
        if split {
            t.poll_recv_split(params, sink).expect("poll");
        } else {
            let s = &mut *sink;
            t.poll_recv(&mut |p, b| s.deliver(p, b)).expect("poll");
        }
        if let Some(p) = t.poll_lost() {
            panic!("lost rank {}", p.0);
        }
    }
}

/// `iters` round trips of a packet of `size` bytes (a head of up to [`HEAD`] bytes, then
/// the payload); mean half round trip in ns (the first tenth is warm-up).
fn pingpong(t: &mut TcpTransport, first: bool, size: usize, iters: usize, split: bool) -> f64 {
    let other = PeerId(1 - t.rank().0);
    let head = vec![0u8; size.min(HEAD)];
    let payload = vec![0x5au8; size - head.len()];
    let mut sink = Sink {
        dst: vec![0u8; payload.len().max(1)],
        got: false,
        copy: !split,
    };
    let warm = (iters / 10).max(1);
    let mut start = Instant::now();
    for i in 0..warm + iters {
        if i == warm {
            start = Instant::now();
        }
        if first {
            send(t, other, &head, &payload);
            recv(t, &mut sink, split);
        } else {
            recv(t, &mut sink, split);
            send(t, other, &head, &payload);
        }
    }
    start.elapsed().as_nanos() as f64 / (2 * iters) as f64
}

fn run(t: &mut TcpTransport, first: bool, a: &Args) -> (f64, f64, f64) {
    // The first exchange connects.
    pingpong(t, first, 8, 10, false);
    let lat = pingpong(t, first, 8, a.iters, false);
    let copy = pingpong(t, first, HEAD + a.size, a.bw_iters, false);
    let split = pingpong(t, first, HEAD + a.size, a.bw_iters, true);
    (lat, copy, split)
}

fn main() {
    let a = args();
    let cfg = TcpConfig {
        max_packet: a.size + HEAD,
        ..TcpConfig::default()
    };
    if let Some(card) = &a.child {
        let mut t = TcpTransport::listen(PeerId(1), 2, SECRET, &cfg).expect("listen");
        t.add_peer(PeerId(0), card).expect("card");
        println!("{}", t.business_card());
        std::io::stdout().flush().expect("stdout");
        run(&mut t, false, &a);
        return;
    }
    let mut t = TcpTransport::listen(PeerId(0), 2, SECRET, &cfg).expect("listen");
    let exe = std::env::current_exe().expect("own path");
    let mut child = Command::new(exe)
        .args([
            "--child",
            &t.business_card(),
            "--iters",
            &a.iters.to_string(),
            "--bw-iters",
            &a.bw_iters.to_string(),
            "--size",
            &a.size.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the other side");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("child card");
    t.add_peer(PeerId(1), line.trim()).expect("child card");
    let (lat, copy, split) = run(&mut t, true, &a);
    assert!(child.wait().expect("wait").success(), "child failed");
    let mbps = |half: f64| a.size as f64 / half * 1e3;
    println!(
        "tcp driver ping-pong (2 processes, loopback, busy-polling): 8 B packet half round \
         trip {:.2} us",
        lat / 1e3
    );
    println!(
        "tcp driver ping-pong: {} B + {HEAD} B head, received whole and copied: half round \
         trip {:.1} us, {:.0} MB/s",
        a.size,
        copy / 1e3,
        mbps(copy)
    );
    println!(
        "tcp driver ping-pong: {} B + {HEAD} B head, payload read in place: half round trip \
         {:.1} us, {:.0} MB/s",
        a.size,
        split / 1e3,
        mbps(split)
    );
    println!(
        "tcp_driver latency_8B_ns={lat:.0} bandwidth_copy_MBps={:.0} bandwidth_split_MBps={:.0} \
         size={}",
        mbps(copy),
        mbps(split),
        a.size
    );
}
