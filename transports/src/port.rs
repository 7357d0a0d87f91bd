//! Ports of dynamic process management (MPI_Open_port, MPI_Comm_accept, MPI_Comm_connect):
//! a listening TCP socket and the blocking exchange of the two roots over it.
//!
//! A port's name is `madmpi-port:<address>/<secret>` (the address as `ip:port` or
//! `[ip6]:port`, the secret 32 random bytes in hexadecimal): whoever knows the name may
//! connect. After the TCP connection the acceptor sends a 32-byte nonce and the connector
//! answers `HMAC-SHA256(secret, "madmpi-port-v1" || nonce)`; the acceptor answers one byte
//! (1: accepted) or closes. A connection that fails this is dropped and the acceptor goes on
//! accepting. Then the roots exchange frames (`u32` little-endian length, then the bytes).
//!
//! Everything here blocks (an MPI_Comm_accept waits for its connector); the connector waits
//! at most its timeout for an acceptor.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::tcp::TcpConfig;
use crate::{Error, Result};

const PREFIX: &str = "madmpi-port:";
const LABEL: &[u8] = b"madmpi-port-v1";
/// Largest frame the roots exchange (a group's cards and context ids).
const MAX_FRAME: usize = 64 << 20;

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The address and secret a port name holds; `None` for a name this library did not make.
pub fn parse_name(name: &str) -> Option<(SocketAddr, [u8; 32])> {
    let rest = name.trim().strip_prefix(PREFIX)?;
    let (addr, secret) = rest.rsplit_once('/')?;
    Some((addr.parse().ok()?, unhex(secret)?))
}

fn proof(secret: &[u8; 32], nonce: &[u8; 32]) -> [u8; 32] {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("any key length");
    m.update(LABEL);
    m.update(nonce);
    m.finalize().into_bytes().into()
}

/// Fresh random bytes.
pub fn random32() -> Result<[u8; 32]> {
    let mut b = [0u8; 32];
    crate::tcp::random(&mut b).map_err(io_err("getrandom"))?;
    Ok(b)
}

/// An open port.
#[derive(Debug)]
pub struct Port {
    listener: TcpListener,
    secret: [u8; 32],
    name: String,
}

impl Port {
    /// Listen on the TCP driver's address (`MADMPI_TCP_IF`, loopback by default), on an
    /// ephemeral port.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the socket cannot be made.
    pub fn open(cfg: &TcpConfig) -> Result<Port> {
        let listener = TcpListener::bind(SocketAddr::new(cfg.address(), 0))
            .map_err(io_err("port: binding a listening socket"))?;
        let addr = listener.local_addr().map_err(io_err("port: getsockname"))?;
        let secret = random32()?;
        let name = format!("{PREFIX}{addr}/{}", hex(&secret));
        Ok(Port {
            listener,
            secret,
            name,
        })
    }

    /// The port's name (what MPI_Open_port returns).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// [`accept`](Self::accept), giving up at `deadline` (`Ok(None)`).
    ///
    /// # Errors
    ///
    /// As [`accept`](Self::accept).
    pub fn accept_until(&self, deadline: Instant, rejected: &mut u32) -> Result<Option<PortConn>> {
        self.listener
            .set_nonblocking(true)
            .map_err(io_err("port: fcntl"))?;
        let ready = loop {
            // Peek for a pending connection without taking it.
            let mut pfd = libc::pollfd {
                fd: std::os::fd::AsRawFd::as_raw_fd(&self.listener),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, for the duration of the call.
            let n = unsafe { libc::poll(&mut pfd, 1, 50) };
            if n > 0 {
                break true;
            }
            if Instant::now() >= deadline {
                break false;
            }
        };
        self.listener
            .set_nonblocking(false)
            .map_err(io_err("port: fcntl"))?;
        if !ready {
            return Ok(None);
        }
        self.accept(rejected).map(Some)
    }

    /// Wait for a connector that proves the port's secret. Connections that do not are
    /// dropped (`rejected` counts them) and the wait goes on.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when accepting itself fails.
    pub fn accept(&self, rejected: &mut u32) -> Result<PortConn> {
        loop {
            let (mut s, _) = self.listener.accept().map_err(io_err("port: accept"))?;
            let ok = (|| -> io::Result<bool> {
                s.set_read_timeout(Some(Duration::from_secs(10)))?;
                let nonce = random32().map_err(|e| io::Error::other(e.to_string()))?;
                s.write_all(&nonce)?;
                let mut p = [0u8; 32];
                s.read_exact(&mut p)?;
                let good = <Hmac<Sha256> as Mac>::new_from_slice(&self.secret)
                    .expect("any key length")
                    .chain_update(LABEL)
                    .chain_update(nonce)
                    .verify_slice(&p)
                    .is_ok();
                if good {
                    s.write_all(&[1])?;
                    s.set_read_timeout(None)?;
                }
                Ok(good)
            })();
            match ok {
                Ok(true) => {
                    let _ = s.set_nodelay(true);
                    return Ok(PortConn { s });
                }
                _ => *rejected += 1,
            }
        }
    }
}

/// Why a connect failed.
#[derive(Debug)]
pub enum ConnectError {
    /// The name is not a port name of this library.
    BadName,
    /// Nothing listens there (the port is closed, or its process is gone).
    Refused(io::Error),
    /// No process accepted within the timeout.
    TimedOut(Duration),
    /// The port was closed while the connection waited for an accept.
    Closed(io::Error),
    /// The port's owner refused our proof, or the connection broke.
    Failed(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::BadName => write!(f, "not a port name of madmpi"),
            ConnectError::Refused(e) => write!(f, "nothing listens on the port ({e})"),
            ConnectError::TimedOut(t) => {
                write!(f, "no process accepted the connection within {t:?}")
            }
            ConnectError::Closed(e) => {
                write!(
                    f,
                    "the port was closed before it accepted the connection ({e})"
                )
            }
            ConnectError::Failed(e) => write!(f, "the connection failed: {e}"),
        }
    }
}

/// Connect to the port `name` and prove its secret; wait at most `timeout` for an acceptor.
///
/// # Errors
///
/// As [`ConnectError`] says.
pub fn connect(name: &str, timeout: Duration) -> std::result::Result<PortConn, ConnectError> {
    let (addr, secret) = parse_name(name).ok_or(ConnectError::BadName)?;
    let start = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(ConnectError::Refused)?;
    let left = timeout
        .saturating_sub(start.elapsed())
        .max(Duration::from_millis(1));
    s.set_read_timeout(Some(left))
        .map_err(|e| ConnectError::Failed(e.to_string()))?;
    let mut nonce = [0u8; 32];
    if let Err(e) = s.read_exact(&mut nonce) {
        return Err(match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ConnectError::TimedOut(timeout),
            // The listening socket went away with this connection still in its backlog.
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted => ConnectError::Closed(e),
            _ => ConnectError::Failed(e.to_string()),
        });
    }
    let mut ok = [0u8; 1];
    s.write_all(&proof(&secret, &nonce))
        .and_then(|_| s.read_exact(&mut ok))
        .map_err(|e| ConnectError::Failed(e.to_string()))?;
    if ok[0] != 1 {
        return Err(ConnectError::Failed("refused by the port's owner".into()));
    }
    s.set_read_timeout(None)
        .map_err(|e| ConnectError::Failed(e.to_string()))?;
    let _ = s.set_nodelay(true);
    Ok(PortConn { s })
}

/// A connection between two roots, after the port's proof.
#[derive(Debug)]
pub struct PortConn {
    s: TcpStream,
}

impl PortConn {
    /// One side of a connected socket pair (MPI_Comm_join's socket is made a `PortConn`
    /// by its caller); the fd is duplicated, the caller keeps its own.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the descriptor cannot be duplicated.
    pub fn from_socket(fd: std::os::fd::BorrowedFd<'_>) -> Result<PortConn> {
        let own = fd.try_clone_to_owned().map_err(io_err("dup"))?;
        let s = TcpStream::from(own);
        s.set_nonblocking(false).map_err(io_err("fcntl"))?;
        Ok(PortConn { s })
    }

    /// Wait at most `t` for each later read (`None`: forever).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] from the socket.
    pub fn set_timeout(&self, t: Option<Duration>) -> Result<()> {
        self.s.set_read_timeout(t).map_err(io_err("setsockopt"))
    }

    /// Send one frame.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the connection breaks.
    pub fn send(&mut self, b: &[u8]) -> Result<()> {
        let len = u32::try_from(b.len())
            .ok()
            .filter(|&l| l as usize <= MAX_FRAME)
            .ok_or_else(|| Error::Invalid(format!("port: frame of {} bytes", b.len())))?;
        self.s
            .write_all(&len.to_le_bytes())
            .and_then(|_| self.s.write_all(b))
            .map_err(io_err("port: send"))
    }

    /// Receive one frame.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the connection breaks or times out, [`Error::Malformed`] for a frame
    /// longer than the limit.
    pub fn recv(&mut self) -> Result<Vec<u8>> {
        let mut l = [0u8; 4];
        self.s.read_exact(&mut l).map_err(io_err("port: receive"))?;
        let len = u32::from_le_bytes(l) as usize;
        if len > MAX_FRAME {
            return Err(Error::Malformed(format!("port frame of {len} bytes")));
        }
        let mut v = vec![0u8; len];
        self.s.read_exact(&mut v).map_err(io_err("port: receive"))?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_names() {
        let p = Port::open(&TcpConfig::default()).unwrap();
        let (addr, secret) = parse_name(p.name()).unwrap();
        assert_eq!(addr, p.listener.local_addr().unwrap());
        assert_eq!(secret, p.secret);
        assert!(parse_name("tcp://1.2.3.4:5").is_none());
        assert!(parse_name("madmpi-port:127.0.0.1:5/00").is_none());
        assert!(matches!(
            connect("junk", Duration::from_secs(1)),
            Err(ConnectError::BadName)
        ));
    }

    #[test]
    fn accept_connect_exchange_and_wrong_secret() {
        let p = Port::open(&TcpConfig::default()).unwrap();
        let name = p.name().to_string();
        let (addr, _) = parse_name(&name).unwrap();
        let forged = format!("{PREFIX}{addr}/{}", hex(&[9u8; 32]));
        let h = std::thread::spawn(move || {
            // A forger first: refused; then the real connector.
            let bad = connect(&forged, Duration::from_secs(10));
            assert!(matches!(bad, Err(ConnectError::Failed(_))), "{bad:?}");
            let mut c = connect(&name, Duration::from_secs(10)).unwrap();
            c.send(b"ping").unwrap();
            assert_eq!(c.recv().unwrap(), b"pong");
        });
        let mut rejected = 0;
        let mut a = p.accept(&mut rejected).unwrap();
        assert_eq!(rejected, 1);
        assert_eq!(a.recv().unwrap(), b"ping");
        a.send(b"pong").unwrap();
        h.join().unwrap();
    }

    #[test]
    fn connect_times_out_without_acceptor_and_is_refused_when_closed() {
        let p = Port::open(&TcpConfig::default()).unwrap();
        let name = p.name().to_string();
        let r = connect(&name, Duration::from_millis(300));
        assert!(matches!(r, Err(ConnectError::TimedOut(_))), "{r:?}");
        drop(p);
        let r = connect(&name, Duration::from_secs(5));
        assert!(matches!(r, Err(ConnectError::Refused(_))), "{r:?}");
    }

    #[test]
    fn a_port_closed_while_a_connect_waits_for_its_accept_is_closed() {
        let p = Port::open(&TcpConfig::default()).unwrap();
        let name = p.name().to_string();
        let h = std::thread::spawn(move || connect(&name, Duration::from_secs(30)));
        // The connection is in the listener's backlog long before: then closed with it.
        std::thread::sleep(Duration::from_millis(300));
        drop(p);
        let r = h.join().unwrap();
        assert!(matches!(r, Err(ConnectError::Closed(_))), "{r:?}");
    }
}
