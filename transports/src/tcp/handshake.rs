//! The connection handshake of the TCP driver: message formats and the MAC, without I/O.
//!
//! ```text
//! connector C (rank c)                              acceptor A (rank a)
//!   connect ─────────────────────────────────────▶ accept
//!   Hello{role C, c, target a, nonce_c} ──┐   ┌── Hello{role A, a, target ?, nonce_a}
//!                                         └─▶ ◀─┘     (both sent at once, 64 bytes each)
//!   Auth{0, mac_C} ─────────────────────────────▶   check mac_C, then decide
//!                  ◀───────────────────────────── Auth{verdict, mac_A}   (36 bytes each)
//!   check mac_A; if the verdict is Accept,
//!   MPI frames flow both ways (the acceptor may send its first frame right after its Auth)
//! ```
//!
//! `mac_X = HMAC-SHA256(secret, "madmpi-tcp-v1" || X || nonce_c || nonce_a || c || a || nprocs
//! || verdict)` with `X` the role byte of the side that computes it (`C` or `A`), ranks and
//! `nprocs` as little-endian `u32`, and `verdict` 0 for the connector. Fresh random nonces on
//! both sides make every MAC unique to its connection (no replay); the role byte makes a MAC
//! useless in the other direction (no reflection); the acceptor proves itself only after the
//! connector has, so an unauthenticated client learns nothing but the acceptor's rank. What this
//! is not: encryption or per-frame integrity. It keeps foreign processes out of a job, it does
//! not protect against someone who can rewrite packets on the path.
//!
//! This module owns the byte layouts; it must never do I/O or hold connection state.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of a hello (the first handshake message of either side).
pub const HELLO_LEN: usize = 64;
/// Bytes of an auth message (the second handshake message: proof and verdict).
pub const AUTH_LEN: usize = 36;
/// Bytes of a MAC.
pub(crate) const MAC_LEN: usize = 32;
/// Bytes of a nonce.
pub(crate) const NONCE_LEN: usize = 32;

/// First bytes of every hello.
const MAGIC: [u8; 8] = *b"MMPI-TCP";
/// Handshake and framing version, bumped too when what the packets mean changes (peers of
/// different versions refuse each other at the handshake instead of misreading): 2, a
/// rendezvous RTS may carry the start of its message; 3, the hello carries the engine's
/// protocol version (what the packets mean is the engine's business from then on).
pub(crate) const VERSION: u16 = 3;
/// Domain-separation label of the MAC.
const LABEL: &[u8] = b"madmpi-tcp-v1";
/// First byte of an [`Auth`].
const AUTH_TAG: u8 = b'K';
/// `target` of an acceptor's hello: it does not know who connects.
pub(crate) const ANY_RANK: u32 = u32::MAX;

/// Which end of a connection a side is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The side that called `connect`.
    Connector,
    /// The side that called `accept`.
    Acceptor,
}

impl Role {
    fn byte(self) -> u8 {
        match self {
            Role::Connector => b'C',
            Role::Acceptor => b'A',
        }
    }
}

/// The first message of both sides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hello {
    /// Role of the sender.
    pub role: Role,
    /// Processes in the job, as the sender knows it.
    pub nprocs: u32,
    /// Rank of the sender.
    pub rank: u32,
    /// Rank the sender means to talk to ([`ANY_RANK`] from an acceptor).
    pub target: u32,
    /// The sender's largest packet (must match ours: both ends check frame lengths with it).
    pub max_packet: u32,
    /// The sender's engine protocol version (opaque here; must match ours).
    pub engine: u32,
    /// Fresh random bytes.
    pub nonce: [u8; NONCE_LEN],
}

impl Hello {
    /// The wire form.
    pub(crate) fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_le_bytes());
        b[10] = self.role.byte();
        b[12..16].copy_from_slice(&self.nprocs.to_le_bytes());
        b[16..20].copy_from_slice(&self.rank.to_le_bytes());
        b[20..24].copy_from_slice(&self.target.to_le_bytes());
        b[24..28].copy_from_slice(&self.max_packet.to_le_bytes());
        b[28..32].copy_from_slice(&self.engine.to_le_bytes());
        b[32..64].copy_from_slice(&self.nonce);
        b
    }

    /// Parse a hello; the error says what is wrong with it.
    pub(crate) fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, String> {
        if b[0..8] != MAGIC {
            return Err("not a madmpi TCP hello (bad magic)".into());
        }
        let version = u16::from_le_bytes([b[8], b[9]]);
        if version != VERSION {
            return Err(format!(
                "handshake version {version}, this library speaks {VERSION}"
            ));
        }
        let role = match b[10] {
            b'C' => Role::Connector,
            b'A' => Role::Acceptor,
            r => return Err(format!("unknown role byte {r:#04x}")),
        };
        if b[11] != 0 {
            return Err("reserved hello bytes are not zero".into());
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&b[32..64]);
        Ok(Hello {
            role,
            nprocs: u32_at(12),
            rank: u32_at(16),
            target: u32_at(20),
            max_packet: u32_at(24),
            engine: u32_at(28),
            nonce,
        })
    }
}

/// Whether the first bytes of a hello can still be a hello (its magic so far).
pub(crate) fn magic_prefix_ok(first: &[u8]) -> bool {
    let n = first.len().min(MAGIC.len());
    first[..n] == MAGIC[..n]
}

/// The acceptor's decision about an authenticated connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// This connection carries the traffic of the pair.
    Accept = 0,
    /// Both sides connected at once and this connection lost the tie-break (the connection
    /// initiated by the lower rank is kept): the connector waits for the other one.
    Superseded = 1,
    /// The claimed rank already has an authenticated connection.
    Duplicate = 2,
    /// The acceptor will not talk to this rank (it considers it lost, or is closing).
    Refused = 3,
}

impl Verdict {
    fn from_u8(v: u8) -> Option<Verdict> {
        Some(match v {
            0 => Verdict::Accept,
            1 => Verdict::Superseded,
            2 => Verdict::Duplicate,
            3 => Verdict::Refused,
            _ => return None,
        })
    }
}

/// The second message of both sides: the proof of the secret (and the acceptor's verdict).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Auth {
    /// [`Verdict::Accept`] from the connector.
    pub verdict: Verdict,
    /// The MAC over the transcript.
    pub mac: [u8; MAC_LEN],
}

impl Auth {
    /// The wire form.
    pub(crate) fn encode(&self) -> [u8; AUTH_LEN] {
        let mut b = [0u8; AUTH_LEN];
        b[0] = AUTH_TAG;
        b[1] = self.verdict as u8;
        b[4..36].copy_from_slice(&self.mac);
        b
    }

    /// Parse an auth message; the error says what is wrong with it.
    pub(crate) fn decode(b: &[u8; AUTH_LEN]) -> Result<Auth, String> {
        if b[0] != AUTH_TAG || b[2..4] != [0, 0] {
            return Err("malformed authentication message".into());
        }
        let verdict = Verdict::from_u8(b[1]).ok_or_else(|| format!("unknown verdict {}", b[1]))?;
        let mut mac = [0u8; MAC_LEN];
        mac.copy_from_slice(&b[4..36]);
        Ok(Auth { verdict, mac })
    }
}

/// What both MACs of a connection cover.
#[derive(Clone, Debug)]
pub(crate) struct Transcript {
    /// The connector's nonce.
    pub nonce_c: [u8; NONCE_LEN],
    /// The acceptor's nonce.
    pub nonce_a: [u8; NONCE_LEN],
    /// The connector's rank.
    pub rank_c: u32,
    /// The acceptor's rank.
    pub rank_a: u32,
    /// Processes in the job.
    pub nprocs: u32,
}

impl Transcript {
    fn hmac(&self, secret: &[u8; 32], role: Role, verdict: Verdict) -> Hmac<Sha256> {
        // A 32-byte key is always valid for HMAC.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("any key length");
        m.update(LABEL);
        m.update(&[role.byte()]);
        m.update(&self.nonce_c);
        m.update(&self.nonce_a);
        m.update(&self.rank_c.to_le_bytes());
        m.update(&self.rank_a.to_le_bytes());
        m.update(&self.nprocs.to_le_bytes());
        m.update(&[verdict as u8]);
        m
    }

    /// The MAC the side of `role` sends.
    pub(crate) fn mac(&self, secret: &[u8; 32], role: Role, verdict: Verdict) -> [u8; MAC_LEN] {
        self.hmac(secret, role, verdict)
            .finalize()
            .into_bytes()
            .into()
    }

    /// Whether `auth` is a valid proof from the side of `role` (constant-time comparison).
    pub(crate) fn verify(&self, secret: &[u8; 32], role: Role, auth: &Auth) -> bool {
        self.hmac(secret, role, auth.verdict)
            .verify_slice(&auth.mac)
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transcript() -> Transcript {
        Transcript {
            nonce_c: [1; 32],
            nonce_a: [2; 32],
            rank_c: 3,
            rank_a: 5,
            nprocs: 8,
        }
    }

    #[test]
    fn hello_round_trip_and_rejects() {
        let h = Hello {
            role: Role::Connector,
            nprocs: 4,
            rank: 1,
            target: 2,
            max_packet: 1 << 20,
            engine: 3,
            nonce: [7; 32],
        };
        let b = h.encode();
        assert_eq!(Hello::decode(&b).unwrap(), h);
        let mut bad = b;
        bad[0] = b'X';
        assert!(Hello::decode(&bad).unwrap_err().contains("magic"));
        assert!(magic_prefix_ok(&b[..3]) && magic_prefix_ok(&[]) && magic_prefix_ok(&b));
        assert!(!magic_prefix_ok(&bad[..1]) && !magic_prefix_ok(b"GET / HTTP/1.1"));
        let mut bad = b;
        bad[8] = 9;
        assert!(Hello::decode(&bad).unwrap_err().contains("version"));
        let mut bad = b;
        bad[10] = b'Z';
        assert!(Hello::decode(&bad).unwrap_err().contains("role"));
        let mut bad = b;
        bad[11] = 1;
        assert!(Hello::decode(&bad).unwrap_err().contains("reserved"));
    }

    #[test]
    fn auth_round_trip_and_rejects() {
        let a = Auth {
            verdict: Verdict::Superseded,
            mac: [9; 32],
        };
        let b = a.encode();
        assert_eq!(Auth::decode(&b).unwrap(), a);
        let mut bad = b;
        bad[1] = 77;
        assert!(Auth::decode(&bad).is_err());
        let mut bad = b;
        bad[0] = 0;
        assert!(Auth::decode(&bad).is_err());
    }

    #[test]
    fn macs_bind_secret_role_verdict_and_transcript() {
        let s = [0x42; 32];
        let t = transcript();
        let mac = t.mac(&s, Role::Connector, Verdict::Accept);
        let ok = Auth {
            verdict: Verdict::Accept,
            mac,
        };
        assert!(t.verify(&s, Role::Connector, &ok));
        // Wrong secret, reflected to the other role, other verdict, other nonce, other rank.
        assert!(!t.verify(&[0x43; 32], Role::Connector, &ok));
        assert!(!t.verify(&s, Role::Acceptor, &ok));
        let flipped = Auth {
            verdict: Verdict::Duplicate,
            mac,
        };
        assert!(!t.verify(&s, Role::Connector, &flipped));
        let mut t2 = transcript();
        t2.nonce_a[31] ^= 1;
        assert!(!t2.verify(&s, Role::Connector, &ok));
        let mut t3 = transcript();
        t3.rank_c = 4;
        assert!(!t3.verify(&s, Role::Connector, &ok));
    }

    #[test]
    fn hmac_sha256_known_answer() {
        // RFC 4231, test case 2.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        let out: [u8; 32] = m.finalize().into_bytes().into();
        let hex: String = out.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
