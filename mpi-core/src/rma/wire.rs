//! The payloads of `Rma` chunks. The header's `tag` says what the chunk is ([`Sub`]); `ctx` is
//! the window's number at the receiver, `src` the sender's rank in the window, `sreq` the
//! origin's token of the operation, `msg_len` the offset of the chunk's data in the operation's
//! packed stream, `aux` the operation and basic type of an accumulate (`op | basic << 8`),
//! `flags` the lock type or an error.
//!
//! An operation's chunk carries the target memory it touches as a segment list — `u32` count,
//! `u32` zero, then per segment a `u64` offset (from the window's base; an address for a
//! dynamic window) and a `u64` length — followed by its data (put, accumulate,
//! get-accumulate; compare-and-swap: the new value then the compare value). The origin
//! flattens the target datatype (the standard makes it valid at the origin), so the target
//! needs no datatype. Decoding checks every length against the chunk.

use crate::error::{Error, ErrorClass, Result};

/// What an `Rma` chunk is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub(crate) enum Sub {
    Put = 1,
    Acc = 2,
    Get = 3,
    GetAcc = 4,
    Cas = 5,
    /// Answer to a put or accumulate chunk (`flags`: an error class code, 0 for none).
    Ack = 6,
    /// Answer to a get-like chunk: its data.
    Reply = 7,
    /// Ask for the window's lock (`flags`: 1 exclusive).
    Lock = 8,
    Unlock = 9,
    /// The lock was granted.
    Grant = 10,
    /// MPI_Win_post: the target exposes its window to the receiver.
    Post = 11,
    /// MPI_Win_complete: the origin's operations of its access epoch are done.
    Complete = 12,
}

impl Sub {
    pub(crate) fn of(tag: i32) -> Option<Sub> {
        use Sub::*;
        Some(match tag {
            1 => Put,
            2 => Acc,
            3 => Get,
            4 => GetAcc,
            5 => Cas,
            6 => Ack,
            7 => Reply,
            8 => Lock,
            9 => Unlock,
            10 => Grant,
            11 => Post,
            12 => Complete,
            _ => return None,
        })
    }
}

/// Bytes of the segment count and of one segment.
pub(crate) const SEG_HDR: usize = 8;
pub(crate) const SEG_LEN: usize = 16;

/// The error codes an `Ack` or `Reply` may carry in its flags.
pub(crate) const ERR_RANGE: u8 = 1;

/// Encode `segs` then `data`.
pub(crate) fn encode(segs: &[(u64, u64)], data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(SEG_HDR + segs.len() * SEG_LEN + data.len());
    v.extend_from_slice(&(segs.len() as u32).to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    for &(off, len) in segs {
        v.extend_from_slice(&off.to_le_bytes());
        v.extend_from_slice(&len.to_le_bytes());
    }
    v.extend_from_slice(data);
    v
}

/// Target segments: (offset or address, length).
pub(crate) type Segs = Vec<(u64, u64)>;

/// Decode a payload into its segments and data.
pub(crate) fn decode(p: &[u8]) -> Result<(Segs, &[u8])> {
    let bad = || Error::new(ErrorClass::Intern, "malformed one-sided chunk");
    let n = u32::from_le_bytes(p.get(0..4).ok_or_else(bad)?.try_into().expect("4 bytes")) as usize;
    let end = n
        .checked_mul(SEG_LEN)
        .and_then(|x| x.checked_add(SEG_HDR))
        .filter(|&e| e <= p.len())
        .ok_or_else(bad)?;
    let segs = p[SEG_HDR..end]
        .chunks_exact(SEG_LEN)
        .map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().expect("8 bytes")),
                u64::from_le_bytes(c[8..].try_into().expect("8 bytes")),
            )
        })
        .collect();
    Ok((segs, &p[end..]))
}

/// Cut the target segments of an operation into pieces of at most `room` payload bytes each
/// (segment list plus as many data bytes), cutting segments only at multiples of `elem`
/// bytes. Returns, per piece, its segments and the offset of its data in the stream.
pub(crate) fn pieces(
    segs: impl Iterator<Item = (u64, u64)>,
    room: usize,
    elem: usize,
) -> Vec<(Vec<(u64, u64)>, usize)> {
    let elem = elem.max(1) as u64;
    let mut out = Vec::new();
    let mut cur: Vec<(u64, u64)> = Vec::new();
    let (mut used, mut at, mut start) = (SEG_HDR, 0usize, 0usize);
    for (mut off, mut len) in segs {
        while len > 0 {
            let free = room.saturating_sub(used + SEG_LEN) as u64;
            let fit = free / elem * elem;
            if fit == 0 {
                if cur.is_empty() {
                    // (The room holds less than one element: send it anyway.)
                    let n = elem.min(len);
                    out.push((vec![(off, n)], at));
                    at += n as usize;
                    start = at;
                    off += n;
                    len -= n;
                    continue;
                }
                out.push((std::mem::take(&mut cur), start));
                used = SEG_HDR;
                start = at;
                continue;
            }
            let n = fit.min(len);
            cur.push((off, n));
            used += SEG_LEN + n as usize;
            at += n as usize;
            off += n;
            len -= n;
        }
    }
    if !cur.is_empty() {
        out.push((cur, start));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_stream_in_order_and_fit() {
        let segs = vec![(0u64, 100u64), (200, 8), (300, 1000)];
        let p = pieces(segs.clone().into_iter(), 120, 4);
        let mut at = 0;
        let mut total = 0;
        for (s, start) in &p {
            assert_eq!(*start, at);
            let bytes: u64 = s.iter().map(|x| x.1).sum();
            assert!(SEG_HDR + s.len() * SEG_LEN + bytes as usize <= 120);
            assert!(s.iter().all(|x| x.1 % 4 == 0));
            at += bytes as usize;
            total += bytes;
        }
        assert_eq!(total, 1108);
        let enc = encode(&[(1, 2), (3, 4)], b"xy");
        let (d, data) = decode(&enc).unwrap();
        assert_eq!(d, vec![(1, 2), (3, 4)]);
        assert_eq!(data, b"xy");
        assert!(decode(&[5, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }
}
