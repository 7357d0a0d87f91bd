//! Settings of the TCP driver and where they come from (`MADMPI_TCP_*`).
//!
//! This module only parses and resolves names; it never opens a socket.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use super::sys::{self, Interface};
use crate::{Error, Result};

/// When connections are opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectMode {
    /// On the first packet to a peer (or when the peer connects first).
    Lazy,
    /// Every peer at initialization ([`TcpTransport::connect_all`](super::TcpTransport)).
    Eager,
}

/// Settings of a [`TcpTransport`](super::TcpTransport).
///
/// [`TcpConfig::default`] is a single-host setup on 127.0.0.1; [`TcpConfig::from_env`] reads
/// the `MADMPI_TCP_*` variables listed there.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// The address to listen on and connect from. `None`: 127.0.0.1 (a job on one host).
    /// Jobs across hosts must name an interface or address that the other hosts reach.
    pub bind_addr: Option<IpAddr>,
    /// Listening port; 0 picks an ephemeral one.
    pub port: u16,
    /// `SO_SNDBUF` of every connection, in bytes; 0 leaves it to the kernel's autotuning.
    pub sndbuf: usize,
    /// `SO_RCVBUF` of every connection, in bytes; 0 leaves it to the kernel's autotuning.
    pub rcvbuf: usize,
    /// Messages up to this many bytes travel eagerly ([`Caps::eager_threshold`](crate::Caps)).
    pub eager_threshold: usize,
    /// The largest packet ([`Caps::max_packet`](crate::Caps)); every rank of a job must use the
    /// same value, the handshake checks it.
    pub max_packet: usize,
    /// When connections are opened (the engine reads it; the transport itself is lazy unless
    /// told to [`connect_all`](super::TcpTransport::connect_all)).
    pub connect: ConnectMode,
    /// How long a connection may stay in the handshake before it is closed.
    pub handshake_timeout: Duration,
    /// How long an outgoing connection may take to be established (TCP connect plus
    /// handshake), and how long [`connect_all`](super::TcpTransport::connect_all) waits.
    pub connect_timeout: Duration,
    /// How long dropping the transport may wait to push out packets already accepted.
    pub linger: Duration,
    /// How long a connection's link may fail (data or keepalive probes unacknowledged) before
    /// the connection ends with an error; zero leaves it to the kernel (minutes).
    pub link_timeout: Duration,
    /// Most connections in the handshake at once; more are closed at once (a flood of
    /// foreign connections cannot exhaust the process).
    pub max_handshakes: usize,
    /// The engine's protocol version, carried in the hello without being read: a peer with
    /// another one is refused (mismatched builds).
    pub engine_version: u32,
}

impl Default for TcpConfig {
    fn default() -> TcpConfig {
        TcpConfig {
            bind_addr: None,
            port: 0,
            sndbuf: 4 << 20,
            rcvbuf: 4 << 20,
            // Eager up to 128 KiB (MPICH's TCP default): a message whose receive is posted is
            // read straight into the receive buffer, so eager saves the rendezvous round trip
            // at no copy; measured on loopback, ping-pong 128 KiB 32 -> 24 us, windowed
            // bandwidth unchanged. Larger messages would cost a receiver that has not posted
            // its receive yet that much memory each.
            eager_threshold: 128 << 10,
            // Large messages go in fragments of about 256 KiB: measured on loopback, windowed
            // 1 MiB transfers reach about twice the bandwidth they do with 1 MiB fragments (the
            // receiver starts placing a fragment while the next is still being written), and
            // the ping-pong is unchanged.
            max_packet: (256 << 10) + 4096,
            connect: ConnectMode::Lazy,
            handshake_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(30),
            linger: Duration::from_secs(5),
            // Long enough for any congestion, short enough that a job on several rails goes on
            // on the others in seconds rather than in a quarter of an hour.
            link_timeout: Duration::from_secs(30),
            max_handshakes: 256,
            engine_version: 0,
        }
    }
}

/// Smallest `max_packet`: room for a chunk header and some payload.
pub(crate) const MIN_MAX_PACKET: usize = 256;
/// Largest `max_packet` (the frame length is a `u32`; keep well below).
pub(crate) const MAX_MAX_PACKET: usize = 1 << 30;

impl TcpConfig {
    /// The defaults, overridden by the environment:
    ///
    /// | variable | meaning |
    /// |---|---|
    /// | `MADMPI_TCP_IF` | interface name (`lo`, `eth0`: its first IPv4 address, else IPv6), an IP address, or `auto` (the first interface that is up and not loopback) |
    /// | `MADMPI_TCP_PORT` | listening port (default 0: ephemeral) |
    /// | `MADMPI_TCP_EAGER` | eager threshold in bytes (`64k`, `1m` suffixes allowed) |
    /// | `MADMPI_TCP_MAX_PACKET` | largest packet |
    /// | `MADMPI_TCP_SNDBUF`, `MADMPI_TCP_RCVBUF` | socket buffers (0: kernel autotuning) |
    /// | `MADMPI_TCP_CONNECT` | `lazy` (default) or `eager` |
    /// | `MADMPI_TCP_HANDSHAKE_TIMEOUT_MS`, `MADMPI_TCP_CONNECT_TIMEOUT_MS`, `MADMPI_TCP_LINGER_MS` | timeouts |
    /// | `MADMPI_TCP_LINK_TIMEOUT_MS` | how long a failed link goes unnoticed (0: the kernel's default) |
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a value that does not parse or an unknown interface (a typo must
    /// not silently fall back to another network).
    pub fn from_env() -> Result<TcpConfig> {
        TcpConfig::from_lookup(|k| std::env::var(k).ok())
    }

    /// Like [`from_env`](Self::from_env), with variables looked up by `var`.
    ///
    /// # Errors
    ///
    /// As [`from_env`](Self::from_env).
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<TcpConfig> {
        let mut c = TcpConfig::default();
        let get = |k: &str| {
            var(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if let Some(v) = get("MADMPI_TCP_IF") {
            let ifs = sys::interfaces().map_err(|e| Error::Io {
                what: "listing network interfaces".into(),
                source: e,
            })?;
            c.bind_addr = Some(resolve_interface(&v, &ifs)?);
        }
        if let Some(v) = get("MADMPI_TCP_PORT") {
            c.port = v
                .parse()
                .map_err(|_| Error::Invalid(format!("MADMPI_TCP_PORT={v}: not a port")))?;
        }
        let size = |k: &str, slot: &mut usize| -> Result<()> {
            if let Some(v) = get(k) {
                *slot = parse_size(&v).ok_or_else(|| {
                    Error::Invalid(format!("{k}={v}: not a size (bytes, or with k/m/g)"))
                })?;
            }
            Ok(())
        };
        size("MADMPI_TCP_EAGER", &mut c.eager_threshold)?;
        size("MADMPI_TCP_MAX_PACKET", &mut c.max_packet)?;
        size("MADMPI_TCP_SNDBUF", &mut c.sndbuf)?;
        size("MADMPI_TCP_RCVBUF", &mut c.rcvbuf)?;
        if let Some(v) = get("MADMPI_TCP_CONNECT") {
            c.connect = match v.as_str() {
                "lazy" => ConnectMode::Lazy,
                "eager" => ConnectMode::Eager,
                _ => {
                    return Err(Error::Invalid(format!(
                        "MADMPI_TCP_CONNECT={v}: expected lazy or eager"
                    )))
                }
            };
        }
        let ms = |k: &str, slot: &mut Duration| -> Result<()> {
            if let Some(v) = get(k) {
                let n: u64 = v
                    .parse()
                    .map_err(|_| Error::Invalid(format!("{k}={v}: not milliseconds")))?;
                *slot = Duration::from_millis(n);
            }
            Ok(())
        };
        ms("MADMPI_TCP_HANDSHAKE_TIMEOUT_MS", &mut c.handshake_timeout)?;
        ms("MADMPI_TCP_CONNECT_TIMEOUT_MS", &mut c.connect_timeout)?;
        ms("MADMPI_TCP_LINGER_MS", &mut c.linger)?;
        ms("MADMPI_TCP_LINK_TIMEOUT_MS", &mut c.link_timeout)?;
        c.validate()?;
        Ok(c)
    }

    /// Check the numbers are usable.
    pub(crate) fn validate(&self) -> Result<()> {
        if !(MIN_MAX_PACKET..=MAX_MAX_PACKET).contains(&self.max_packet) {
            return Err(Error::Invalid(format!(
                "tcp max_packet {} outside {MIN_MAX_PACKET}..={MAX_MAX_PACKET}",
                self.max_packet
            )));
        }
        for (name, v) in [("sndbuf", self.sndbuf), ("rcvbuf", self.rcvbuf)] {
            if v > i32::MAX as usize / 2 {
                return Err(Error::Invalid(format!("tcp {name} {v} is too large")));
            }
        }
        if self.max_handshakes == 0 {
            return Err(Error::Invalid("tcp max_handshakes must be positive".into()));
        }
        Ok(())
    }

    /// The address to bind.
    pub(crate) fn address(&self) -> IpAddr {
        self.bind_addr.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }
}

/// `1234`, `64k`, `4M`, `1g` (powers of 1024).
pub(crate) fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (digits, shift) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 10),
        b'm' | b'M' => (&s[..s.len() - 1], 20),
        b'g' | b'G' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: usize = digits.parse().ok()?;
    n.checked_mul(1usize << shift)
}

/// The address `spec` names: an IP address, `auto`, or an interface name (its first IPv4
/// address, else its first IPv6 address that is not link-local, which would need a scope).
pub(crate) fn resolve_interface(spec: &str, ifs: &[Interface]) -> Result<IpAddr> {
    if let Ok(ip) = spec.parse::<IpAddr>() {
        return Ok(ip);
    }
    let usable = |i: &&Interface| match i.addr {
        IpAddr::V4(_) => true,
        IpAddr::V6(a) => (a.segments()[0] & 0xffc0) != 0xfe80,
    };
    let pick = |cands: Vec<&Interface>| {
        cands
            .iter()
            .find(|i| i.addr.is_ipv4())
            .or_else(|| cands.first())
            .map(|i| i.addr)
    };
    if spec == "auto" {
        let cands: Vec<&Interface> = ifs
            .iter()
            .filter(|i| i.up && !i.loopback)
            .filter(usable)
            .collect();
        return pick(cands).ok_or_else(|| {
            Error::Invalid("MADMPI_TCP_IF=auto: no interface is up besides loopback".into())
        });
    }
    let named: Vec<&Interface> = ifs.iter().filter(|i| i.name == spec).collect();
    if named.is_empty() {
        let mut names: Vec<&str> = ifs.iter().map(|i| i.name.as_str()).collect();
        names.dedup();
        return Err(Error::Invalid(format!(
            "MADMPI_TCP_IF={spec}: no such interface with an IP address (have: {})",
            names.join(", ")
        )));
    }
    if !named.iter().any(|i| i.up) {
        return Err(Error::Invalid(format!(
            "MADMPI_TCP_IF={spec}: the interface is down"
        )));
    }
    pick(named.into_iter().filter(|i| i.up).filter(usable).collect()).ok_or_else(|| {
        Error::Invalid(format!(
            "MADMPI_TCP_IF={spec}: the interface has only link-local addresses"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::net::Ipv6Addr;

    fn iface(name: &str, addr: &str, up: bool, lo: bool) -> Interface {
        Interface {
            name: name.into(),
            addr: addr.parse().unwrap(),
            up,
            loopback: lo,
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("65536"), Some(65536));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size("4M"), Some(4 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("k"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn interfaces_resolve() {
        let ifs = [
            iface("lo", "::1", true, true),
            iface("lo", "127.0.0.1", true, true),
            iface("eth0", "fe80::1", true, false),
            iface("eth0", "fd00::2", true, false),
            iface("eth0", "192.0.2.2", true, false),
            iface("v6only", "fe80::2", true, false),
            iface("v6only", "fd00::9", true, false),
            iface("down0", "10.0.0.1", false, false),
        ];
        let r = |s: &str| resolve_interface(s, &ifs);
        assert_eq!(r("lo").unwrap(), IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(r("eth0").unwrap(), "192.0.2.2".parse::<IpAddr>().unwrap());
        assert_eq!(r("v6only").unwrap(), "fd00::9".parse::<IpAddr>().unwrap());
        assert_eq!(r("auto").unwrap(), "192.0.2.2".parse::<IpAddr>().unwrap());
        assert_eq!(r("::1").unwrap(), IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(
            r("127.0.0.5").unwrap(),
            "127.0.0.5".parse::<IpAddr>().unwrap()
        );
        assert!(matches!(r("nope"), Err(Error::Invalid(m)) if m.contains("eth0")));
        assert!(matches!(r("down0"), Err(Error::Invalid(m)) if m.contains("down")));
        let only_lo = [iface("lo", "127.0.0.1", true, true)];
        assert!(resolve_interface("auto", &only_lo).is_err());
    }

    #[test]
    fn env_overrides() {
        let vars: HashMap<&str, &str> = [
            ("MADMPI_TCP_IF", "lo"),
            ("MADMPI_TCP_EAGER", "32k"),
            ("MADMPI_TCP_MAX_PACKET", "2m"),
            ("MADMPI_TCP_SNDBUF", "0"),
            ("MADMPI_TCP_CONNECT", "eager"),
            ("MADMPI_TCP_HANDSHAKE_TIMEOUT_MS", "250"),
        ]
        .into_iter()
        .collect();
        let c = TcpConfig::from_lookup(|k| vars.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(c.bind_addr, Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert_eq!(c.eager_threshold, 32 << 10);
        assert_eq!(c.max_packet, 2 << 20);
        assert_eq!(c.sndbuf, 0);
        assert_eq!(c.rcvbuf, TcpConfig::default().rcvbuf);
        assert_eq!(c.connect, ConnectMode::Eager);
        assert_eq!(c.handshake_timeout, Duration::from_millis(250));
        for (k, v) in [
            ("MADMPI_TCP_CONNECT", "sometimes"),
            ("MADMPI_TCP_EAGER", "lots"),
            ("MADMPI_TCP_IF", "no-such-if0"),
            ("MADMPI_TCP_MAX_PACKET", "10"),
            ("MADMPI_TCP_PORT", "70000"),
        ] {
            let r = TcpConfig::from_lookup(|q| (q == k).then(|| v.to_string()));
            assert!(matches!(r, Err(Error::Invalid(_))), "{k}={v}");
        }
        let d = TcpConfig::from_lookup(|_| None).unwrap();
        assert_eq!(d.address(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
}
