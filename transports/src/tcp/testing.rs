//! Owns nothing: it builds the messages of the wire format for tests. The driver never uses it.

use super::handshake::{Auth, Hello, Role, Transcript, Verdict};
pub use super::handshake::{AUTH_LEN, HELLO_LEN};

/// The connector's hello to `target`, from `rank`, with `nonce`, for a transport whose
/// engine protocol version is the default configuration's (0).
pub fn client_hello(
    rank: u32,
    target: u32,
    nprocs: u32,
    max_packet: u32,
    nonce: [u8; 32],
) -> [u8; HELLO_LEN] {
    Hello {
        role: Role::Connector,
        nprocs,
        rank,
        target,
        max_packet,
        engine: 0,
        nonce,
    }
    .encode()
}

/// The connector's proof, given the acceptor's hello; `None` if that hello is invalid.
pub fn client_auth(
    secret: &[u8; 32],
    my_rank: u32,
    my_nonce: [u8; 32],
    server_hello: &[u8; HELLO_LEN],
) -> Option<[u8; AUTH_LEN]> {
    let h = Hello::decode(server_hello).ok()?;
    let t = Transcript {
        nonce_c: my_nonce,
        nonce_a: h.nonce,
        rank_c: my_rank,
        rank_a: h.rank,
        nprocs: h.nprocs,
    };
    let mac = t.mac(secret, Role::Connector, Verdict::Accept);
    Some(
        Auth {
            verdict: Verdict::Accept,
            mac,
        }
        .encode(),
    )
}

/// The verdict byte of an acceptor's auth message (0 accept, 1 superseded, 2 duplicate,
/// 3 refused).
pub fn verdict(auth: &[u8; AUTH_LEN]) -> u8 {
    auth[1]
}

/// A frame header for a packet of `len` bytes (any length, for oversize tests).
pub fn frame_header(len: u32) -> [u8; 8] {
    super::frame_header(super::KIND_PACKET, len as usize)
}
