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
//!
//! With `--compare`, the two processes also open a raw TCP socket (as `raw_tcp_pingpong`) and
//! alternate short batches on both, reporting the minimum and median batch of each: on a busy
//! machine this is a fairer comparison than two runs minutes apart.

use std::io::{BufRead, BufReader, ErrorKind, IoSlice, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
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
    compare: bool,
    raw_port: Option<u16>,
}

fn args() -> Args {
    let mut a = Args {
        iters: 20_000,
        bw_iters: 200,
        size: 1 << 20,
        child: None,
        compare: false,
        raw_port: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{x} needs a value"));
        match x.as_str() {
            "--iters" => a.iters = val().parse().expect("number"),
            "--bw-iters" => a.bw_iters = val().parse().expect("number"),
            "--size" => a.size = val().parse().expect("number"),
            "--child" => a.child = Some(val()),
            "--compare" => a.compare = true,
            "--raw-port" => a.raw_port = Some(val().parse().expect("port")),
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

// ---------------------------------------------------------------- --compare

fn raw_read(s: &mut TcpStream, buf: &mut [u8]) {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => panic!("peer closed"),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) => panic!("read: {e}"),
        }
    }
}

fn raw_write(s: &mut TcpStream, buf: &[u8]) {
    let mut put = 0;
    while put < buf.len() {
        match s.write(&buf[put..]) {
            Ok(n) => put += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) => panic!("write: {e}"),
        }
    }
}

/// Mean half round trip (ns) of `iters` raw round trips of `size` bytes.
fn raw_batch(s: &mut TcpStream, first: bool, size: usize, iters: usize) -> f64 {
    let mut buf = vec![0x5au8; size];
    let start = Instant::now();
    for _ in 0..iters {
        if first {
            raw_write(s, &buf);
            raw_read(s, &mut buf);
        } else {
            raw_read(s, &mut buf);
            raw_write(s, &buf);
        }
    }
    start.elapsed().as_nanos() as f64 / (2 * iters) as f64
}

fn min_median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

/// Alternate raw and driver batches; the first side reports.
fn compare(t: &mut TcpTransport, s: &mut TcpStream, first: bool, a: &Args) {
    const ROUNDS: usize = 40;
    let batch = (a.iters / ROUNDS).max(10);
    let bw_batch = (a.bw_iters / ROUNDS).max(2);
    s.set_nodelay(true).expect("nodelay");
    s.set_nonblocking(true).expect("non-blocking");
    pingpong(t, first, 8, 10, false);
    let (mut rl, mut dl, mut rb, mut db) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        rl.push(raw_batch(s, first, 8, batch));
        dl.push(pingpong(t, first, 8, batch, false));
        rb.push(raw_batch(s, first, a.size, bw_batch));
        db.push(pingpong(t, first, HEAD + a.size, bw_batch, true));
    }
    if !first {
        return;
    }
    eprintln!("driver stats: {:?}", t.stats());
    let (rl, dl, rb, db) = (
        min_median(rl),
        min_median(dl),
        min_median(rb),
        min_median(db),
    );
    let mbps = |ns: f64| a.size as f64 / ns * 1e3;
    println!(
        "{ROUNDS} alternating rounds of {batch} (8 B) and {bw_batch} ({} B) round trips",
        a.size
    );
    println!(
        "8 B half round trip, min / median batch: raw {:.2} / {:.2} us, driver {:.2} / {:.2} us \
         (driver - raw: {:+.0} / {:+.0} ns)",
        rl.0 / 1e3,
        rl.1 / 1e3,
        dl.0 / 1e3,
        dl.1 / 1e3,
        dl.0 - rl.0,
        dl.1 - rl.1
    );
    println!(
        "{} B ping-pong bandwidth, best / median batch: raw {:.0} / {:.0} MB/s, driver (split) \
         {:.0} / {:.0} MB/s",
        a.size,
        mbps(rb.0),
        mbps(rb.1),
        mbps(db.0),
        mbps(db.1)
    );
    println!(
        "compare raw_latency_8B_ns={:.0} driver_latency_8B_ns={:.0} raw_bandwidth_MBps={:.0} \
         driver_bandwidth_MBps={:.0} size={} (medians)",
        rl.1,
        dl.1,
        mbps(rb.1),
        mbps(db.1),
        a.size
    );
}

fn main() {
    let a = args();
    // `MADMPI_TCP_*` variables apply (socket buffers, ...); the largest packet is the test's.
    let cfg = TcpConfig {
        max_packet: a.size + HEAD,
        ..TcpConfig::from_env().expect("MADMPI_TCP_* settings")
    };
    if let Some(card) = &a.child {
        let mut t = TcpTransport::listen(PeerId(1), 2, SECRET, &cfg).expect("listen");
        t.add_peer(PeerId(0), card).expect("card");
        println!("{}", t.business_card());
        std::io::stdout().flush().expect("stdout");
        if let Some(port) = a.raw_port {
            let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("raw connect");
            compare(&mut t, &mut s, false, &a);
        } else {
            run(&mut t, false, &a);
        }
        return;
    }
    let raw = a
        .compare
        .then(|| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("raw listener"));
    let mut t = TcpTransport::listen(PeerId(0), 2, SECRET, &cfg).expect("listen");
    let exe = std::env::current_exe().expect("own path");
    let mut cmd = Command::new(exe);
    if let Some(l) = &raw {
        cmd.args([
            "--raw-port",
            &l.local_addr().expect("addr").port().to_string(),
        ]);
    }
    let mut child = cmd
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
    if let Some(l) = raw {
        let (mut s, _) = l.accept().expect("raw accept");
        compare(&mut t, &mut s, true, &a);
        assert!(child.wait().expect("wait").success(), "child failed");
        return;
    }
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
