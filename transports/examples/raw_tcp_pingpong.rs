//! Raw TCP ping-pong over loopback: the floor the `tcp` driver is measured against.
//!
//! Two processes (or two threads with `--threads`) connected by one TCP socket with
//! `TCP_NODELAY`, non-blocking, busy-polling `read`/`write` (no epoll, no framing, no copies
//! beyond the kernel's). Prints the half round-trip time of an 8-byte message and the
//! ping-pong bandwidth of 1 MiB messages (size / half round trip).
//!
//! ```text
//! cargo run --release -p madmpi-transports --example raw_tcp_pingpong [-- --threads]
//!     [--iters N] [--bw-iters N] [--size BYTES]
//! ```
//!
//! The last line is machine-readable: `raw_tcp latency_8B_ns=… bandwidth_MBps=… size=…`.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Instant;

struct Args {
    threads: bool,
    iters: usize,
    bw_iters: usize,
    size: usize,
    child: Option<u16>,
}

fn args() -> Args {
    let mut a = Args {
        threads: false,
        iters: 20_000,
        bw_iters: 200,
        size: 1 << 20,
        child: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        let mut num = || -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{x} needs a number"))
        };
        match x.as_str() {
            "--threads" => a.threads = true,
            "--iters" => a.iters = num(),
            "--bw-iters" => a.bw_iters = num(),
            "--size" => a.size = num(),
            "--child" => a.child = Some(num() as u16),
            "--bench" => {} // passed by `cargo bench`-style runners
            _ => panic!("unknown argument {x}"),
        }
    }
    a
}

/// Busy-poll until all of `buf` has arrived.
fn read_all(s: &mut TcpStream, buf: &mut [u8]) {
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

/// Busy-poll until all of `buf` is written.
fn write_all(s: &mut TcpStream, buf: &[u8]) {
    let mut put = 0;
    while put < buf.len() {
        match s.write(&buf[put..]) {
            Ok(n) => put += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) => panic!("write: {e}"),
        }
    }
}

/// `iters` round trips of `size` bytes; returns the mean half round trip in ns (the first
/// tenth is warm-up and not counted).
fn pingpong(s: &mut TcpStream, first: bool, size: usize, iters: usize) -> f64 {
    let mut buf = vec![0x5au8; size];
    let warm = (iters / 10).max(1);
    let mut start = Instant::now();
    for i in 0..warm + iters {
        if i == warm {
            start = Instant::now();
        }
        if first {
            write_all(s, &buf);
            read_all(s, &mut buf);
        } else {
            read_all(s, &mut buf);
            write_all(s, &buf);
        }
    }
    start.elapsed().as_nanos() as f64 / (2 * iters) as f64
}

fn setup(s: &TcpStream) {
    s.set_nodelay(true).expect("TCP_NODELAY");
    s.set_nonblocking(true).expect("non-blocking");
}

fn side(mut s: TcpStream, first: bool, a: &Args) -> (f64, f64) {
    setup(&s);
    let lat = pingpong(&mut s, first, 8, a.iters);
    let bw = pingpong(&mut s, first, a.size, a.bw_iters);
    (lat, bw)
}

fn main() {
    let a = args();
    if let Some(port) = a.child {
        let s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect");
        side(s, false, &a);
        return;
    }
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
    let port = l.local_addr().expect("addr").port();
    let other = if a.threads {
        let (iters, bw_iters, size) = (a.iters, a.bw_iters, a.size);
        let h = std::thread::spawn(move || {
            let s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect");
            let a = Args {
                threads: true,
                iters,
                bw_iters,
                size,
                child: None,
            };
            side(s, false, &a);
        });
        Err(h)
    } else {
        let exe = std::env::current_exe().expect("own path");
        let child = Command::new(exe)
            .args([
                "--child",
                &port.to_string(),
                "--iters",
                &a.iters.to_string(),
                "--bw-iters",
                &a.bw_iters.to_string(),
                "--size",
                &a.size.to_string(),
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn the other side");
        Ok(child)
    };
    let (s, _) = l.accept().expect("accept");
    let (lat, half) = side(s, true, &a);
    match other {
        Ok(mut c) => assert!(c.wait().expect("wait").success(), "child failed"),
        Err(h) => h.join().expect("thread"),
    }
    let mbps = a.size as f64 / half * 1e3;
    let how = if a.threads {
        "2 threads"
    } else {
        "2 processes"
    };
    println!(
        "raw TCP ping-pong ({how}, loopback, busy-polling): 8 B half round trip {:.2} us",
        lat / 1e3
    );
    println!(
        "raw TCP ping-pong: {} B half round trip {:.1} us, {:.0} MB/s",
        a.size,
        half / 1e3,
        mbps
    );
    println!(
        "raw_tcp latency_8B_ns={lat:.0} bandwidth_MBps={mbps:.0} size={}",
        a.size
    );
}
