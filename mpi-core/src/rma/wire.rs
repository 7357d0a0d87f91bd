//! The payloads of `Rma` chunks. The header's `tag` says what the chunk is ([`Sub`]); `ctx` is
//! the window's number at the receiver, `src` the sender's rank in the window, `sreq` the
//! origin's token of the operation, `msg_len` the offset of the chunk's data in the operation's
//! packed stream, `aux` the sender's number of the window (bits 32–63: where the answer goes)
//! and the operation and basic type of an accumulate (`op | basic << 8`), `flags` the lock
//! type or an error.
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
    /// Ask a member of a dynamic window for the RDMA key of the region attached at the
    /// address `msg_len` (`sreq`: the asker's generation of its key cache, echoed back).
    KeyAsk = 13,
    /// The answer: empty (no registered region there), or the region's address, length and
    /// key (three `u64`).
    KeyTell = 14,
    /// Small puts and accumulates to one target, one record each ([`record`]), applied in
    /// order and answered as one untracked chunk (`batch`).
    Batch = 15,
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
            13 => KeyAsk,
            14 => KeyTell,
            15 => Batch,
            _ => return None,
        })
    }
}

/// Bytes of the segment count and of one segment.
pub(crate) const SEG_HDR: usize = 8;
pub(crate) const SEG_LEN: usize = 16;

/// The error codes an `Ack` or `Reply` may carry in its flags.
pub(crate) const ERR_RANGE: u8 = 1;

/// Bytes of the payload [`encode_into`] makes.
pub(crate) fn encoded_len(segs: &[(u64, u64)], data: &[u8]) -> usize {
    SEG_HDR + segs.len() * SEG_LEN + data.len()
}

/// Encode `segs` then `data` into `v` (emptied first: a recycled buffer).
pub(crate) fn encode_into(mut v: Vec<u8>, segs: &[(u64, u64)], data: &[u8]) -> Vec<u8> {
    v.clear();
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

/// Bytes of a batch record's head: the target offset (`u64`), the data's length (`u32`),
/// what it is (`u8`: put or accumulate), the operation (`u8`) and the basic type (`u16`) of
/// an accumulate; the data follows.
pub(crate) const REC_HEAD: usize = 16;

/// Write a batch record's head at `p`.
///
/// # Safety
/// `p` holds `REC_HEAD` bytes.
#[inline(always)]
pub(crate) unsafe fn write_record_head(p: *mut u8, off: u64, len: u32, sub: Sub, aux: u64) {
    let w = (len as u64) | (sub as u64) << 32 | (aux & 0xff) << 40 | (aux >> 8 & 0xffff) << 48;
    // SAFETY: the caller's.
    unsafe {
        (p as *mut [u8; 8]).write_unaligned(off.to_le_bytes());
        (p.add(8) as *mut [u8; 8]).write_unaligned(w.to_le_bytes());
    }
}

/// A batch record: target offset, length, what it is, its `aux` word (operation and basic
/// type, as an `Acc` chunk's), its data.
pub(crate) type Record<'a> = (u64, u64, Sub, u64, &'a [u8]);

/// The first record of a batch's payload `p`, and the rest of the payload. `None`: malformed.
#[inline(always)]
pub(crate) fn record(p: &[u8]) -> Option<(Record<'_>, &[u8])> {
    let off = u64::from_le_bytes(p.get(..8)?.try_into().ok()?);
    let w = u64::from_le_bytes(p.get(8..REC_HEAD)?.try_into().ok()?);
    let len = w & 0xffff_ffff;
    let sub = match (w >> 32) & 0xff {
        1 => Sub::Put,
        2 => Sub::Acc,
        _ => return None,
    };
    let aux = (w >> 40) & 0xff | ((w >> 48) & 0xffff) << 8;
    let end = REC_HEAD.checked_add(usize::try_from(len).ok()?)?;
    let data = p.get(REC_HEAD..end)?;
    Some(((off, len, sub, aux, data), &p[end..]))
}

/// Decode a payload of exactly one segment into it and its data (`None`: another count, or
/// malformed; `decode` then says which).
#[inline]
pub(crate) fn decode_one(p: &[u8]) -> Option<((u64, u64), &[u8])> {
    let word =
        |i: usize| -> Option<u64> { Some(u64::from_le_bytes(p.get(i..i + 8)?.try_into().ok()?)) };
    if word(0)? != 1 {
        return None;
    }
    let seg = (word(SEG_HDR)?, word(SEG_HDR + 8)?);
    Some((seg, &p[SEG_HDR + SEG_LEN..]))
}

/// Cut the target segments of an operation into pieces of at most `room` payload bytes each
/// (segment list plus as many data bytes), each piece holding whole elements of `elem` bytes
/// of the packed stream: a segment is cut only at a multiple of `elem` from the stream's start,
/// and the segments that make up one element (a pair type with a hole, or a derived type whose
/// segments split an element) stay in one piece. Returns, per piece, its segments and the
/// offset of its data in the stream.
pub(crate) fn pieces(
    segs: impl Iterator<Item = (u64, u64)>,
    room: usize,
    elem: usize,
) -> Vec<(Vec<(u64, u64)>, usize)> {
    let elem = elem.max(1) as u64;
    let mut p = Packer {
        room,
        out: Vec::new(),
        cur: Vec::new(),
        used: SEG_HDR,
        at: 0,
        start: 0,
    };
    // The segments of an element begun but not finished, and its bytes so far.
    let mut partial: Vec<(u64, u64)> = Vec::new();
    let mut plen = 0u64;
    for (mut off, mut len) in segs {
        if plen > 0 {
            let n = len.min(elem - plen);
            partial.push((off, n));
            plen += n;
            off += n;
            len -= n;
            if plen == elem {
                p.unit(std::mem::take(&mut partial));
                plen = 0;
            }
        }
        let whole = len / elem * elem;
        if whole > 0 {
            p.run(off, whole, elem);
        }
        if len > whole {
            partial.push((off + whole, len - whole));
            plen = len - whole;
        }
    }
    if !partial.is_empty() {
        // (A stream that ends inside an element: the origin checked counts, so only a byte
        // stream of another unit; send what there is.)
        p.unit(partial);
    }
    p.finish()
}

/// The state of [`pieces`].
struct Packer {
    room: usize,
    out: Vec<(Vec<(u64, u64)>, usize)>,
    cur: Vec<(u64, u64)>,
    used: usize,
    at: usize,
    start: usize,
}

impl Packer {
    fn close(&mut self) {
        if !self.cur.is_empty() {
            self.out.push((std::mem::take(&mut self.cur), self.start));
        }
        self.used = SEG_HDR;
        self.start = self.at;
    }

    fn push(&mut self, off: u64, n: u64) {
        self.cur.push((off, n));
        self.used += SEG_LEN + n as usize;
        self.at += n as usize;
    }

    /// `len` bytes at `off`, a whole number of elements: cut at element boundaries.
    fn run(&mut self, mut off: u64, mut len: u64, elem: u64) {
        while len > 0 {
            let free = self.room.saturating_sub(self.used + SEG_LEN) as u64;
            let fit = free / elem * elem;
            if fit == 0 {
                if self.cur.is_empty() {
                    // (The room holds less than one element: send it anyway.)
                    let n = elem.min(len);
                    self.push(off, n);
                    self.close();
                    off += n;
                    len -= n;
                } else {
                    self.close();
                }
                continue;
            }
            let n = fit.min(len);
            self.push(off, n);
            off += n;
            len -= n;
        }
    }

    /// The segments of one element, kept together.
    fn unit(&mut self, segs: Vec<(u64, u64)>) {
        let cost: usize = segs.iter().map(|s| SEG_LEN + s.1 as usize).sum();
        if self.used + cost > self.room && !self.cur.is_empty() {
            self.close();
        }
        for (off, n) in segs {
            self.push(off, n);
        }
    }

    fn finish(mut self) -> Vec<(Vec<(u64, u64)>, usize)> {
        self.close();
        self.out
    }
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
        // (Into a recycled buffer holding older bytes.)
        let enc = encode_into(vec![9u8; 100], &[(1, 2), (3, 4)], b"xy");
        assert_eq!(enc.len(), encoded_len(&[(1, 2), (3, 4)], b"xy"));
        let (d, data) = decode(&enc).unwrap();
        assert_eq!(d, vec![(1, 2), (3, 4)]);
        assert_eq!(data, b"xy");
        assert!(decode(&[5, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn pieces_keep_split_elements_whole() {
        // MPI_SHORT_INT: 2 bytes at 0, 4 at 4, extent 8; 6 bytes of data per element.
        let segs: Vec<(u64, u64)> = (0..50u64)
            .flat_map(|i| [(8 * i, 2), (8 * i + 4, 4)])
            .collect();
        for room in [SEG_HDR + 2 * SEG_LEN + 6, 100, 1000] {
            let p = pieces(segs.clone().into_iter(), room, 6);
            let mut at = 0;
            for (s, start) in &p {
                assert_eq!(*start, at);
                let bytes: u64 = s.iter().map(|x| x.1).sum();
                assert_eq!(bytes % 6, 0, "a piece of partial elements (room {room})");
                assert!(SEG_HDR + s.len() * SEG_LEN + bytes as usize <= room);
                at += bytes as usize;
            }
            assert_eq!(at, 300);
        }
        // Two whole elements then a segment that starts inside the third.
        let p = pieces([(0u64, 8u64), (100, 4)].into_iter(), 1000, 6);
        assert_eq!(p, vec![(vec![(0, 6), (6, 2), (100, 4)], 0)]);
    }
}
