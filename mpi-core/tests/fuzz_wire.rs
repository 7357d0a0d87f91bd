//! Fuzzing of the engine's wire format (`madmpi::wire`): chunk headers and the chunk sequence
//! of a packet, which arrive from peers. Structured inputs (encoded headers and packets with
//! mutated fields, truncated, with lengths around the packet's end and huge ones) and raw
//! bytes. Properties: no panic; decoding is bounded (a packet of `n` bytes yields at most
//! `n / 8 + 1` items and every payload lies inside it); a header that decodes allocates
//! nothing, a malformed one only its short message; encode → decode is the identity and a
//! well-formed packet yields exactly its chunks. `MADMPI_FUZZ_CASES` sets the number of inputs
//! (see `fuzz/kit.rs`).

#[path = "../../fuzz/kit.rs"]
mod kit;

use kit::Rng;
use madmpi::wire::{header_len, pad8, Chunks, Header, Kind, HDR_LEN};

#[global_allocator]
static METER: kit::Meter = kit::Meter;

/// Inputs per target in CI (both run in well under a second each in a debug build).
const CI_CASES: u64 = 100_000;

/// Largest error message a malformed header or packet may cost.
const ERR_BUDGET: usize = 256;

/// A kind the decoder knows, at random.
fn known_kind(rng: &mut Rng) -> u8 {
    loop {
        let k = rng.below(32) as u8;
        if Kind::known(k) {
            return k;
        }
    }
}

fn random_header(rng: &mut Rng) -> Header {
    let kind = if rng.one_in(8) {
        rng.next_u32() as u8
    } else {
        known_kind(rng)
    };
    let len = if rng.one_in(2) {
        rng.len_upto(200) as u32
    } else {
        rng.edgy_u32()
    };
    let mut h = Header {
        kind,
        flags: rng.next_u32() as u8,
        ctx: rng.edgy_u32(),
        src: rng.edgy_u32() as i32,
        tag: rng.edgy_u32() as i32,
        seq: rng.edgy_u32(),
        len,
        msg_len: rng.edgy_u64(),
        sreq: rng.edgy_u64(),
        aux: rng.edgy_u64(),
    };
    if kind == Kind::Eager as u8 {
        // What an Eager header carries (see `Header::encode`).
        h.msg_len = h.len as u64;
        h.aux = 0;
    }
    h
}

/// Decode `b` as one header and check everything that must hold, whatever `b` is.
fn check_header(b: &[u8]) {
    let (r, usage) = kit::metered(|| Header::decode(b));
    let kind_ok = b.first().is_some_and(|&k| Kind::known(k));
    let long_enough = b.len() >= header_len(b.first().copied().unwrap_or(0));
    match r {
        Ok(h) => {
            assert!(kind_ok && long_enough, "decoded {h:?} from {b:02x?}");
            assert_eq!(usage.count, 0, "a valid header allocates nothing");
            assert_eq!(h.wire_len(), header_len(b[0]));
            // The decoded header is exactly what these bytes say: re-encoding gives them back
            // (bytes 2..4 are padding, ignored on input).
            let e = h.encode();
            assert_eq!(e.len(), h.wire_len());
            let mut want = b[..e.len()].to_vec();
            want[2..4].fill(0);
            assert_eq!(&e[..], &want[..]);
        }
        Err(_) => {
            assert!(!kind_ok || !long_enough, "rejected a valid header {b:02x?}");
            assert!(usage.largest <= ERR_BUDGET, "error costs {usage:?}");
        }
    }
}

#[test]
fn fuzz_header_decode() {
    kit::assert_metering();
    kit::run("wire::Header::decode", CI_CASES, |rng| {
        let h = random_header(rng);
        let enc = h.encode();
        if h.kind().is_some() {
            // Round trip.
            assert_eq!(Header::decode(&enc).expect("valid header"), h);
            assert_eq!(enc.len(), header_len(h.kind));
        }
        let mut b = enc.to_vec();
        match rng.below(4) {
            0 => {
                // Cut anywhere, in particular just short of the header.
                let n = if rng.one_in(2) {
                    b.len().saturating_sub(1 + rng.below(8))
                } else {
                    rng.below(b.len() + 1)
                };
                b.truncate(n);
            }
            1 => rng.mutate(&mut b, 4),
            2 => {
                // A short header's bytes read as a long one and the reverse.
                b[0] = if b[0] == Kind::Eager as u8 { 2 } else { 1 };
                b.truncate(rng.below(HDR_LEN + 1));
            }
            _ => b = rng.raw(HDR_LEN + 16),
        }
        check_header(&b);
    });
}

/// Walk the chunks of `pkt`; check bounds and termination; return the `(header, payload)` of
/// each good chunk and whether it ended in an error.
fn walk(pkt: &[u8]) -> (Vec<(Header, Vec<u8>)>, bool) {
    let mut out = Vec::new();
    let mut failed = false;
    let range = pkt.as_ptr_range();
    let mut steps = 0usize;
    let mut it = Chunks::new(pkt);
    loop {
        let (item, usage) = kit::metered(|| it.next());
        let Some(item) = item else { break };
        steps += 1;
        // Every chunk takes at least 8 bytes: the walk is linear in the packet.
        assert!(
            steps <= pkt.len() / 8 + 1,
            "{steps} items from {} bytes",
            pkt.len()
        );
        assert!(!failed, "an item after the error");
        match item {
            Ok((h, payload)) => {
                assert_eq!(usage.count, 0, "a good chunk allocates nothing");
                let p = payload.as_ptr_range();
                assert!(
                    range.start <= p.start && p.end <= range.end,
                    "payload outside"
                );
                assert_eq!(payload.len(), h.len as usize);
                out.push((h, payload.to_vec()));
            }
            Err(_) => {
                assert!(usage.largest <= ERR_BUDGET, "error costs {usage:?}");
                failed = true;
            }
        }
    }
    (out, failed)
}

#[test]
fn fuzz_chunks() {
    kit::assert_metering();
    kit::run("wire::Chunks", CI_CASES, |rng| {
        // A well-formed packet of up to 8 chunks of every kind.
        let mut pkt = Vec::new();
        let mut want = Vec::new();
        let mut offsets = Vec::new();
        for _ in 0..rng.below(9) {
            let mut h = random_header(rng);
            h.kind = known_kind(rng);
            h.len = rng.len_upto(100) as u32;
            if h.kind == Kind::Eager as u8 {
                h.msg_len = h.len as u64;
                h.aux = 0;
            }
            offsets.push(pkt.len());
            pkt.extend_from_slice(&h.encode());
            let payload = rng.bytes(h.len as usize);
            pkt.extend_from_slice(&payload);
            pkt.resize(pad8(pkt.len()), 0);
            want.push((h, payload));
        }
        // The last chunk's padding is optional.
        if rng.one_in(2) {
            if let Some((h, _)) = want.last() {
                let end = offsets.last().unwrap() + h.wire_len() + h.len as usize;
                pkt.truncate(end);
            }
        }
        if rng.one_in(4) {
            // Round trip: exactly the chunks that were built.
            let (got, failed) = walk(&pkt);
            assert!(!failed);
            assert_eq!(got, want);
            return;
        }
        match rng.below(4) {
            0 if !offsets.is_empty() => {
                // A chunk whose length runs past the packet, or to its very end, or is huge.
                let at = *rng.pick(&offsets);
                let hl = header_len(pkt[at]);
                let room = (pkt.len() - at - hl) as u32;
                let edgy = rng.edgy_u32();
                let len = *rng.pick(&[
                    room,
                    room + 1,
                    room.wrapping_sub(1),
                    room + 8,
                    u32::MAX,
                    u32::MAX - (hl as u32) + 1,
                    edgy,
                ]);
                pkt[at + 20..at + 24].copy_from_slice(&len.to_le_bytes());
            }
            1 => {
                let n = rng.below(pkt.len() + 1);
                pkt.truncate(n);
            }
            2 => rng.mutate(&mut pkt, 8),
            _ => pkt = rng.raw(600),
        }
        let (got, failed) = walk(&pkt);
        // What the walk accepted is a prefix of the chunks it can re-encode: the good chunks
        // and their padding account for no more bytes than the packet has.
        let used: usize = got.iter().map(|(h, p)| pad8(h.wire_len() + p.len())).sum();
        assert!(used <= pad8(pkt.len()));
        if !failed {
            assert!(used >= pkt.len(), "bytes left over without an error");
        }
    });
}
