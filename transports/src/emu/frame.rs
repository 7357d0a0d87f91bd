//! The emulated NIC's frames: a 32-byte header before each packet on the shared-memory wire.
//!
//! ```text
//! 0   kind (u8)       DATA, RTS, CTS, CREDIT, ACK, NAK
//! 1   module (u8)     transmission module of a DATA frame (the receiver checks it is the one
//!                     it selects for that size: the same module sequence on both sides)
//! 2   reserved (u16)
//! 4   len (u32)       payload bytes
//! 8   seq (u32)       sequence number (reliable profiles; 0 otherwise)
//! 12  aux (u32)       CREDIT: credits returned; ACK/NAK: the next sequence number expected
//! 16  visible (u64)   when the receiver may see it (CLOCK_MONOTONIC, ns)
//! 24  crc (u32)       CRC-32 of the header (this field zero) and payload (reliable profiles)
//! 28  reserved (u32)
//! ```

use crate::{Error, Result};

/// Header bytes.
pub const HDR: usize = 32;

/// Frame kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A packet of the engine.
    Data = 1,
    /// Request to send a packet that needs the receiver's acknowledgement.
    Rts = 2,
    /// The receiver is ready (answer to `Rts`).
    Cts = 3,
    /// Static receive buffers freed by the receiver.
    Credit = 4,
    /// Cumulative acknowledgement: every sequence number below `aux` arrived.
    Ack = 5,
    /// Negative acknowledgement: `aux` is missing or arrived damaged; resend from it.
    Nak = 6,
}

impl Kind {
    fn from(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Data,
            2 => Kind::Rts,
            3 => Kind::Cts,
            4 => Kind::Credit,
            5 => Kind::Ack,
            6 => Kind::Nak,
            _ => return None,
        })
    }

    /// Whether frames of this kind carry a sequence number and are retransmitted.
    pub fn sequenced(self) -> bool {
        !matches!(self, Kind::Ack | Kind::Nak)
    }
}

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Kind.
    pub kind: Kind,
    /// Module index (DATA).
    pub module: u8,
    /// Payload length.
    pub len: u32,
    /// Sequence number.
    pub seq: u32,
    /// See the layout.
    pub aux: u32,
    /// Visibility time, ns.
    pub visible: u64,
    /// CRC (0 when not computed).
    pub crc: u32,
}

impl Header {
    /// A header of `kind`.
    pub fn new(kind: Kind, len: usize) -> Header {
        Header {
            kind,
            module: 0,
            len: len as u32,
            seq: 0,
            aux: 0,
            visible: 0,
            crc: 0,
        }
    }

    /// The 32 bytes.
    pub fn encode(&self) -> [u8; HDR] {
        let mut b = [0u8; HDR];
        b[0] = self.kind as u8;
        b[1] = self.module;
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..12].copy_from_slice(&self.seq.to_le_bytes());
        b[12..16].copy_from_slice(&self.aux.to_le_bytes());
        b[16..24].copy_from_slice(&self.visible.to_le_bytes());
        b[24..28].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    /// Decode the header of `frame`, checking the length.
    ///
    /// # Errors
    ///
    /// [`Error::Malformed`] for a short frame, an unknown kind or a length that disagrees.
    pub fn decode(frame: &[u8]) -> Result<Header> {
        if frame.len() < HDR {
            return Err(Error::Malformed(format!(
                "emu: frame of {} bytes",
                frame.len()
            )));
        }
        let u32_at = |o: usize| u32::from_le_bytes(frame[o..o + 4].try_into().unwrap_or_default());
        let kind = Kind::from(frame[0])
            .ok_or_else(|| Error::Malformed(format!("emu: frame kind {}", frame[0])))?;
        let h = Header {
            kind,
            module: frame[1],
            len: u32_at(4),
            seq: u32_at(8),
            aux: u32_at(12),
            visible: u64::from_le_bytes(frame[16..24].try_into().unwrap_or_default()),
            crc: u32_at(24),
        };
        if h.len as usize != frame.len() - HDR {
            return Err(Error::Malformed(format!(
                "emu: frame says {} payload bytes, carries {}",
                h.len,
                frame.len() - HDR
            )));
        }
        Ok(h)
    }
}

/// Slicing-by-8 tables of the reflected IEEE 802.3 polynomial: `T[0]` is the classic
/// byte-at-a-time table, `T[k][i]` the CRC of byte `i` followed by `k` zero bytes. Eight bytes
/// per step instead of one: a 256 KiB frame's CRC is computed several times faster (it is
/// computed once per frame on each side, on the path of every reliable packet).
const fn crc_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let p = t[k - 1][i];
            t[k][i] = (p >> 8) ^ t[0][(p & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static CRC: [[u32; 256]; 8] = crc_tables();

/// Continue the (inverted) CRC register `c` over `p`.
fn crc_update(mut c: u32, p: &[u8]) -> u32 {
    let mut words = p.chunks_exact(8);
    for w in &mut words {
        let lo = c ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let hi = u32::from_le_bytes([w[4], w[5], w[6], w[7]]);
        c = CRC[7][(lo & 0xff) as usize]
            ^ CRC[6][((lo >> 8) & 0xff) as usize]
            ^ CRC[5][((lo >> 16) & 0xff) as usize]
            ^ CRC[4][(lo >> 24) as usize]
            ^ CRC[3][(hi & 0xff) as usize]
            ^ CRC[2][((hi >> 8) & 0xff) as usize]
            ^ CRC[1][((hi >> 16) & 0xff) as usize]
            ^ CRC[0][(hi >> 24) as usize];
    }
    for &b in words.remainder() {
        c = CRC[0][((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    c
}

/// CRC-32 (IEEE 802.3 polynomial, reflected) over several pieces.
pub fn crc32(pieces: &[&[u8]]) -> u32 {
    !pieces.iter().fold(!0u32, |c, p| crc_update(c, p))
}

/// CRC-32 the byte-at-a-time way (what this module did before slicing-by-8): to check the
/// tables against, and for the measurement in the driver's tests.
#[cfg(test)]
pub(crate) fn crc_bytewise(p: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in p {
        c = CRC[0][((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// The CRC of a whole frame (header with its CRC field taken as zero).
pub fn frame_crc(frame: &[u8]) -> u32 {
    crc32(&[&frame[..24], &[0; 4], &frame[28..]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slicing_by_8_agrees_with_the_bytewise_crc() {
        let data: Vec<u8> = (0..4099u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 100, 4099] {
            for start in [0, 1, 3] {
                let p = &data[start..start + len.min(data.len() - start)];
                assert_eq!(crc32(&[p]), crc_bytewise(p), "len {len} start {start}");
                let (a, b) = p.split_at(p.len() / 3);
                assert_eq!(crc32(&[a, b]), crc_bytewise(p), "split, len {len}");
            }
        }
    }

    #[test]
    fn crc_known_value_and_roundtrip() {
        assert_eq!(crc32(&[b"123456789"]), 0xcbf4_3926);
        assert_eq!(crc32(&[b"1234", b"56789"]), 0xcbf4_3926);
        let mut h = Header::new(Kind::Data, 3);
        h.seq = 7;
        h.aux = 9;
        h.visible = 1 << 40;
        h.module = 2;
        let mut f = h.encode().to_vec();
        f.extend_from_slice(b"abc");
        let c = frame_crc(&f);
        f[24..28].copy_from_slice(&c.to_le_bytes());
        let d = Header::decode(&f).unwrap();
        assert_eq!(d.crc, c);
        assert_eq!(frame_crc(&f), c);
        assert_eq!(Header { crc: 0, ..d }, h);
        f[HDR + 1] ^= 4;
        assert_ne!(frame_crc(&f), c);
        assert!(Header::decode(&f[..HDR]).is_err());
    }
}
