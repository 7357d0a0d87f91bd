//! Chunk headers: the bytes every chunk of a packet starts with.
//!
//! A packet (what a transport carries) is a sequence of chunks; each chunk is a header followed
//! by `len` payload bytes, padded to 8 bytes. The header is [`HDR_LEN`] bytes, except for
//! `Eager` chunks, whose [`EAGER_HDR_LEN`]-byte header leaves out what an eager message does not
//! need (its length is the chunk's, and it has no `aux`): an 8-byte message and its header then
//! fit in one cache line of a shared-memory ring. Decoding never trusts the peer: every length
//! is checked against the packet, and an unknown kind is an error.

use crate::error::{Error, ErrorClass, Result};

/// Bytes of a chunk header (the longest kind).
pub const HDR_LEN: usize = 48;

/// The version of what chunks mean, bumped when it changes (1: message chunks matched in
/// sequence order; a Cts may ask for one piece on one rail, `FLAG_PART`; 2: no `Help` chunk,
/// the shm driver asks for help with a split copy itself; `Rma` chunks; 3: `Ctrl`, `Ack` and
/// `RailDown` chunks and `FLAG_FIN`, which let a gate with several rails lose one). The drivers carry it
/// without reading it (in the TCP hello, in the shared-memory segment's header), so that
/// processes of different builds refuse each other when they connect instead of misreading.
pub const VERSION: u32 = 3;
/// Bytes of the header of an `Eager` chunk: bytes 0..24 as in the long header, then `sreq`.
pub const EAGER_HDR_LEN: usize = 32;
const _: () = assert!(
    HDR_LEN.is_multiple_of(8) && EAGER_HDR_LEN.is_multiple_of(8),
    "chunks stay 8-aligned"
);

/// An encoded header: the first `len` bytes of `buf` (use it as a byte slice).
#[derive(Clone, Copy)]
pub struct Encoded {
    buf: [u8; HDR_LEN],
    len: usize,
}

impl std::ops::Deref for Encoded {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Chunk kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A whole message, payload inline.
    Eager = 1,
    /// Request to send a large message: `aux` = sender buffer address (for `get`).
    Rts = 2,
    /// Clear to send (receiver cannot `get`): `aux` = receiver request token.
    Cts = 3,
    /// A fragment of a rendezvous message: `aux` = receiver token, `msg_len` = offset.
    Data = 4,
    /// Receiver pulled the data of an RTS: the sender request `sreq` completes.
    Fin = 5,
    /// A synchronous eager message was matched: the sender request `sreq` completes.
    SyncAck = 6,
    /// The sender asks to cancel its message `sreq` if not matched yet.
    CancelReq = 7,
    /// Answer to `CancelReq`: `flags & FLAG_CANCELLED` says whether it was cancelled.
    CancelAck = 8,
    // 9 was `Help` (version 1): the shm driver's split copy now asks for help on its own.
    /// One-sided communication (`crate::rma`): an operation on a window or a synchronisation
    /// of one, or the answer to one; `tag` says which (`rma::wire`), `ctx` is the window's
    /// number at the receiver, `src` the sender's rank in the window. Numbered like message
    /// chunks and handled in sequence order, so that the operations of one origin reach a
    /// target in the order they were issued, whatever their rails.
    Rma = 10,
    /// A control chunk (Cts, Fin, SyncAck, CancelReq, CancelAck, RailDown) to a peer reached by
    /// several rails, numbered like message chunks and handled in sequence order: its payload
    /// is the control chunk's header. Numbered, it is kept until acknowledged and sent again
    /// on another rail if its rail is lost (`engine::resilience`).
    Ctrl = 11,
    /// The numbered chunks of its sender up to `msg_len` (a sequence number) were handled: the
    /// sender may forget its copies of them. Not numbered (a later one says more).
    Ack = 12,
    /// The sender lost its rail number `tag` to the receiver (its link failed): the receiver
    /// stops using it too. Sent inside a `Ctrl` chunk.
    RailDown = 13,
}

impl Kind {
    /// Whether `v` is the number of a kind of chunk (what a decoder accepts).
    pub fn known(v: u8) -> bool {
        Kind::from_u8(v).is_some()
    }

    /// The kind numbered `v`, if there is one.
    pub fn from_raw(v: u8) -> Option<Kind> {
        Kind::from_u8(v)
    }

    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Eager,
            2 => Kind::Rts,
            3 => Kind::Cts,
            4 => Kind::Data,
            5 => Kind::Fin,
            6 => Kind::SyncAck,
            7 => Kind::CancelReq,
            8 => Kind::CancelAck,
            10 => Kind::Rma,
            11 => Kind::Ctrl,
            12 => Kind::Ack,
            13 => Kind::RailDown,
            _ => return None,
        })
    }
}

/// The sender wants to know when the message is matched (MPI_Ssend).
pub const FLAG_SYNC: u8 = 1;
/// In a `CancelAck`: the message was cancelled.
pub const FLAG_CANCELLED: u8 = 2;
/// In an `Rts`: the payload is a piece table (zero-copy rendezvous of a sparse datatype).
pub const FLAG_PIECES: u8 = 4;
/// In an `Rts`: the sender streams the data (no address to pull from): answer with `Cts`.
pub const FLAG_STREAM: u8 = 8;
/// In an `Rts` without `FLAG_PIECES`: the payload is the start of the message (its first `len`
/// bytes); the `Data` fragments after the `Cts` carry the rest, from that offset.
pub const FLAG_PREFIX: u8 = 16;
/// In a `Cts`: it asks for one piece of the message, `seq` bytes from offset `msg_len`, on the
/// sender's rail number `tag` (the receiver cut the message over the rails); the pieces of one
/// message cover it from the end of its start to its end.
pub const FLAG_PART: u8 = 32;
/// In an `Rts`: the sender keeps the message until the receiver says with a `Fin` that all of
/// it arrived, also when the data is pushed (a gate with several rails: data lost with a rail
/// is asked for again).
pub const FLAG_FIN: u8 = 64;
/// In an `Rts` without `FLAG_PIECES`, `FLAG_PREFIX` or `FLAG_STREAM`: the payload is the 8-byte
/// key of the sender's registration of the message (drivers that `get` only registered memory,
/// e.g. libfabric's `fi_read`); the receiver's `get` names it.
pub const FLAG_KEY: u8 = 128;

/// A decoded chunk header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Header {
    /// Chunk kind (raw; see [`Kind`]).
    pub kind: u8,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Communicator context id.
    pub ctx: u32,
    /// Source rank in the communicator.
    pub src: i32,
    /// Message tag.
    pub tag: i32,
    /// Per-gate sequence number of matched chunks (Eager, Rts).
    pub seq: u32,
    /// Payload bytes in this chunk.
    pub len: u32,
    /// Whole message length (Eager, Rts) or fragment offset (Data).
    pub msg_len: u64,
    /// Sender request token.
    pub sreq: u64,
    /// Kind-specific: sender address (Rts), receiver token (Cts, Data).
    pub aux: u64,
}

impl Header {
    /// The kind, if valid.
    pub fn kind(&self) -> Option<Kind> {
        Kind::from_u8(self.kind)
    }

    /// An `Rts` whose payload is the start of its message (`FLAG_PREFIX`).
    pub fn carries_start(&self) -> bool {
        self.kind == Kind::Rts as u8
            && self.flags & FLAG_PREFIX != 0
            && self.flags & FLAG_PIECES == 0
    }

    /// Bytes of this header on the wire.
    #[inline]
    pub fn wire_len(&self) -> usize {
        header_len(self.kind)
    }

    /// Encode (an `Eager` header's `msg_len` must equal `len`, and its `aux` is not sent).
    #[inline]
    pub fn encode(&self) -> Encoded {
        let mut b = [0u8; HDR_LEN];
        if self.kind == Kind::Eager as u8 {
            let (e, _) = b
                .split_first_chunk_mut::<EAGER_HDR_LEN>()
                .expect("long enough");
            self.encode_eager(e);
            return Encoded {
                buf: b,
                len: EAGER_HDR_LEN,
            };
        }
        self.encode_common(&mut b);
        b[24..32].copy_from_slice(&self.msg_len.to_le_bytes());
        b[32..40].copy_from_slice(&self.sreq.to_le_bytes());
        b[40..48].copy_from_slice(&self.aux.to_le_bytes());
        Encoded {
            buf: b,
            len: HDR_LEN,
        }
    }

    /// Encode an `Eager` header (its `msg_len` must equal `len`) into `b`, in place.
    #[inline]
    pub fn encode_eager(&self, b: &mut [u8; EAGER_HDR_LEN]) {
        debug_assert_eq!(self.kind, Kind::Eager as u8);
        debug_assert_eq!(self.msg_len, self.len as u64);
        self.encode_common(b);
        b[24..32].copy_from_slice(&self.sreq.to_le_bytes());
    }

    /// Bytes 0..24, the same in both header lengths.
    #[inline(always)]
    fn encode_common<const N: usize>(&self, b: &mut [u8; N]) {
        b[0] = self.kind;
        b[1] = self.flags;
        b[2..4].fill(0);
        b[4..8].copy_from_slice(&self.ctx.to_le_bytes());
        b[8..12].copy_from_slice(&self.src.to_le_bytes());
        b[12..16].copy_from_slice(&self.tag.to_le_bytes());
        b[16..20].copy_from_slice(&self.seq.to_le_bytes());
        b[20..24].copy_from_slice(&self.len.to_le_bytes());
    }

    /// [`Header::decode`] without the error: `None` for a malformed header.
    #[inline(always)]
    fn decode_ok(b: &[u8]) -> Option<Header> {
        let h = if b.first() == Some(&(Kind::Eager as u8)) {
            let a = b.first_chunk::<EAGER_HDR_LEN>()?;
            let len = le32(a, 20);
            Header {
                msg_len: len as u64,
                sreq: le64(a, 24),
                aux: 0,
                ..common(a)
            }
        } else {
            let a = b.first_chunk::<HDR_LEN>()?;
            Header {
                msg_len: le64(a, 24),
                sreq: le64(a, 32),
                aux: le64(a, 40),
                ..common(a)
            }
        };
        h.kind()?;
        Some(h)
    }

    /// Decode a header from the start of `b` (at least [`header_len`] bytes of its kind).
    #[inline]
    pub fn decode(b: &[u8]) -> Result<Header> {
        Header::decode_ok(b).ok_or_else(|| malformed_header(b))
    }
}

/// Why the header at the start of `b` does not decode.
#[cold]
fn malformed_header(b: &[u8]) -> Error {
    let need = header_len(b.first().copied().unwrap_or(0));
    if b.len() < need {
        return Error::new(
            ErrorClass::Intern,
            "malformed packet: truncated chunk header",
        );
    }
    Error::new(
        ErrorClass::Intern,
        format!("malformed packet: unknown chunk kind {}", b[0]),
    )
}

/// The fields of bytes 0..24, the same in both header lengths.
#[inline(always)]
fn common<const N: usize>(a: &[u8; N]) -> Header {
    Header {
        kind: a[0],
        flags: a[1],
        ctx: le32(a, 4),
        src: le32(a, 8) as i32,
        tag: le32(a, 12) as i32,
        seq: le32(a, 16),
        len: le32(a, 20),
        ..Header::default()
    }
}

#[inline(always)]
fn le32<const N: usize>(a: &[u8; N], i: usize) -> u32 {
    u32::from_le_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]])
}

#[inline(always)]
fn le64<const N: usize>(a: &[u8; N], i: usize) -> u64 {
    u64::from_le_bytes([
        a[i],
        a[i + 1],
        a[i + 2],
        a[i + 3],
        a[i + 4],
        a[i + 5],
        a[i + 6],
        a[i + 7],
    ])
}

/// Bytes of the header of a chunk of raw kind `kind` on the wire.
#[inline]
pub fn header_len(kind: u8) -> usize {
    if kind == Kind::Eager as u8 {
        EAGER_HDR_LEN
    } else {
        HDR_LEN
    }
}

/// Round `n` up to the chunk alignment (8 bytes).
#[inline]
pub const fn pad8(n: usize) -> usize {
    (n + 7) & !7
}

/// Iterate over the chunks of a packet: yields `(header, payload)` or an error for a malformed
/// packet (after which iteration stops).
pub struct Chunks<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Chunks<'a> {
    /// Chunks of `packet`.
    pub fn new(packet: &'a [u8]) -> Chunks<'a> {
        Chunks {
            rest: packet,
            failed: false,
        }
    }
}

impl<'a> Iterator for Chunks<'a> {
    type Item = Result<(Header, &'a [u8])>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() || self.failed {
            return None;
        }
        if let Some(h) = Header::decode_ok(self.rest) {
            let end = h.wire_len() + h.len as usize;
            if end <= self.rest.len() {
                let payload = &self.rest[h.wire_len()..end];
                self.rest = &self.rest[pad8(end).min(self.rest.len())..];
                return Some(Ok((h, payload)));
            }
        }
        self.failed = true;
        Some(Err(self.malformed()))
    }
}

impl Chunks<'_> {
    /// Why the chunk at the front is malformed.
    #[cold]
    #[inline(never)]
    fn malformed(&self) -> Error {
        match Header::decode(self.rest) {
            Err(e) => e,
            Ok(h) => Error::new(
                ErrorClass::Intern,
                format!(
                    "malformed packet: chunk of {} bytes overruns the packet",
                    h.len
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let h = Header {
            kind: Kind::Rts as u8,
            flags: FLAG_SYNC,
            ctx: 7,
            src: 3,
            tag: -2,
            seq: 99,
            len: 0,
            msg_len: 1 << 40,
            sreq: 0xdead_beef_0000_0001,
            aux: 0x7fff_0000_1000,
        };
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
        assert_eq!(h.encode().len(), HDR_LEN);
    }

    #[test]
    fn eager_headers_are_short() {
        let h = Header {
            kind: Kind::Eager as u8,
            flags: FLAG_SYNC,
            ctx: 9,
            src: 1,
            tag: 12345,
            seq: 7,
            len: 8,
            msg_len: 8,
            sreq: 0x1234_5678_9abc,
            aux: 0,
        };
        let e = h.encode();
        assert_eq!(e.len(), EAGER_HDR_LEN);
        assert_eq!(Header::decode(&e).unwrap(), h);
        // A short header cut before `sreq` is truncated.
        assert!(Header::decode(&e[..EAGER_HDR_LEN - 1]).is_err());
    }

    #[test]
    fn chunks_and_garbage() {
        let mut pkt = Vec::new();
        for i in 0..3u32 {
            // Eager (short header) and Rts (long header) chunks mixed.
            let h = Header {
                kind: if i == 1 { Kind::Rts as u8 } else { 1 },
                len: i * 3,
                msg_len: (i * 3) as u64,
                ..Default::default()
            };
            pkt.extend_from_slice(&h.encode());
            pkt.extend(std::iter::repeat_n(i as u8, (i * 3) as usize));
            pkt.resize(pad8(pkt.len()), 0);
        }
        let got: Vec<_> = Chunks::new(&pkt).map(|c| c.unwrap().1.to_vec()).collect();
        assert_eq!(got, vec![vec![], vec![1; 3], vec![2; 6]]);
        // A length that overruns the packet is an error, not a panic.
        let mut bad = Header {
            kind: 1,
            len: 1000,
            msg_len: 1000,
            ..Default::default()
        }
        .encode()
        .to_vec();
        bad.extend_from_slice(&[0; 8]);
        assert!(Chunks::new(&bad).next().unwrap().is_err());
        // Unknown kind.
        let bad = Header {
            kind: 77,
            ..Default::default()
        }
        .encode();
        assert!(Chunks::new(&bad).next().unwrap().is_err());
        // Truncated header.
        assert!(Chunks::new(&[1, 2, 3]).next().unwrap().is_err());
    }
}
