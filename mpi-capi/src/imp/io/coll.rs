//! Collective access by two-phase I/O.
//!
//! Every process lists the file segments of its part of the access. The union of the
//! accesses, `[lo, hi)`, is cut into one contiguous *file domain* per aggregator (by default
//! the first rank of each node; the `cb_nodes` hint sets how many). Aggregators work through
//! their domain in rounds of at most `cb_buffer_size` bytes. In each round, for a write,
//! every process sends each aggregator the pieces of its data that fall in the aggregator's
//! window (their offsets and bytes, one all-to-all); the aggregator assembles them in one
//! buffer and writes the span they cover with one `pwrite` (reading the span first, under an
//! `fcntl` lock, where the pieces leave holes). A read is the reverse: processes send the
//! offsets they want, each aggregator reads its window's span with one `pread` and sends the
//! bytes back. Many small, interleaved pieces thus become a few large contiguous POSIX calls.
//!
//! Two-phase is used when the accesses are interleaved or noncontiguous (`romio_cb_write` /
//! `romio_cb_read` = `automatic`, the default), always (`enable`) or never (`disable`, or
//! `collective_buffering` = `false`): then each process accesses its own segments, as in an
//! independent call.

use madmpi::{Blocks, Datatype};
use madmpi_datatypes::Basic;

use super::access::{read_segs, segments_of, write_segs};
use super::file::{aggregators, Hints};
use super::view::View;
use super::*;

/// A piece of an access: file offset, length, offset in the process's stream.
type Piece = (u64, usize, usize);

/// What every process learnt about the access.
struct Plan {
    /// Aggregator ranks.
    aggs: Vec<i32>,
    lo: u64,
    /// Bytes of each file domain (the last may be shorter).
    dom: u64,
    hi: u64,
    rounds: u64,
    cb: u64,
}

impl Plan {
    /// Window of aggregator `a` in round `r`.
    fn window(&self, a: usize, r: u64) -> (u64, u64) {
        let dlo = self.lo + a as u64 * self.dom;
        let dhi = (dlo + self.dom).min(self.hi);
        let wlo = dlo + r * self.cb;
        let whi = (wlo + self.cb).min(dhi);
        (wlo, whi.max(wlo))
    }
}

/// My pieces in stream order, sorted by file offset.
fn pieces(v: &View, pos: i64, len: usize) -> IoR<Vec<Piece>> {
    let segs = segments_of(v, pos, len)?;
    let mut s = 0;
    let mut p: Vec<Piece> = segs
        .into_iter()
        .map(|(o, l)| {
            let x = (o, l, s);
            s += l;
            x
        })
        .collect();
    p.sort_by_key(|x| x.0);
    Ok(p)
}

/// Decide, collectively, whether to use two-phase and how.
fn plan(f: &FileObj, h: &Hints, mine: &[Piece], cb: Option<bool>) -> IoR<Option<Plan>> {
    if cb == Some(false) || f.size == 1 && cb != Some(true) {
        return Ok(None);
    }
    let (lo, hi) = match (mine.first(), mine.iter().map(|p| p.0 + p.1 as u64).max()) {
        (Some(a), Some(b)) => (a.0 as i64, b as i64),
        _ => (-1, -1),
    };
    let all = allgather_i64(f.comm, &[lo, hi, mine.len() as i64], f.size)?;
    let ranges: Vec<(i64, i64, i64)> = all
        .chunks(3)
        .map(|c| (c[0], c[1], c[2]))
        .filter(|c| c.0 >= 0)
        .collect();
    if ranges.is_empty() {
        return Ok(None);
    }
    let noncontig = ranges.iter().any(|r| r.2 > 1);
    let mut sorted: Vec<(i64, i64)> = ranges.iter().map(|r| (r.0, r.1)).collect();
    sorted.sort_unstable();
    let interleaved = sorted.windows(2).any(|w| w[1].0 < w[0].1);
    if cb.is_none() && !noncontig && !interleaved {
        return Ok(None);
    }
    let glo = sorted[0].0 as u64;
    let ghi = ranges.iter().map(|r| r.1).max().unwrap_or(0) as u64;
    let aggs = aggregators(f, h);
    let n = aggs.len().max(1) as u64;
    let dom = (ghi - glo).div_ceil(n).max(1);
    let cb = h.cb_buffer_size.max(1) as u64;
    Ok(Some(Plan {
        aggs,
        lo: glo,
        dom,
        hi: ghi,
        rounds: dom.div_ceil(cb),
        cb,
    }))
}

/// My pieces inside `[wlo, whi)`, clipped.
fn in_window(mine: &[Piece], wlo: u64, whi: u64) -> Vec<Piece> {
    let start = mine.partition_point(|p| p.0 + (p.1 as u64) <= wlo);
    let mut v = Vec::new();
    for &(o, l, s) in &mine[start..] {
        if o >= whi {
            break;
        }
        let a = o.max(wlo);
        let b = (o + l as u64).min(whi);
        if b > a {
            v.push((a, (b - a) as usize, s + (a - o) as usize));
        }
    }
    v
}

/// One all-to-all of byte messages: `send[i]` goes to rank `i`; returns what each sent.
fn exchange(f: &FileObj, send: &[Vec<u8>]) -> IoR<Vec<Vec<u8>>> {
    let n = f.size as usize;
    let counts: Vec<i64> = send.iter().map(|m| m.len() as i64).collect();
    let mut rcounts = vec![0i64; n];
    let i64t = Datatype::basic(Basic::Int64);
    // SAFETY: one i64 per process each way, live for the call.
    unsafe {
        madmpi::alltoall(
            Some(madmpi::Data::new(counts.as_ptr() as *const u8, 1, &i64t)),
            madmpi::Data::new(rcounts.as_mut_ptr() as *const u8, 1, &i64t),
            f.comm,
        )?
    };
    let sbuf: Vec<u8> = send.concat();
    let rtotal: i64 = rcounts.iter().sum();
    let mut rbuf = vec![0u8; rtotal as usize];
    let displs = |c: &[i64]| -> Vec<isize> {
        let mut d = Vec::with_capacity(c.len());
        let mut acc = 0isize;
        for &x in c {
            d.push(acc);
            acc += x as isize;
        }
        d
    };
    let byte = Datatype::basic(Basic::Byte);
    let sc: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
    let rc: Vec<usize> = rcounts.iter().map(|&c| c as usize).collect();
    // SAFETY: the buffers hold the counts given, live for the call.
    unsafe {
        madmpi::alltoallw(
            Some(Blocks::v(sbuf.as_ptr(), sc, &displs(&counts), &byte)),
            Blocks::v(rbuf.as_mut_ptr(), rc.clone(), &displs(&rcounts), &byte),
            f.comm,
        )?
    };
    let mut out = Vec::with_capacity(n);
    let mut p = 0;
    for c in rc {
        out.push(rbuf[p..p + c].to_vec());
        p += c;
    }
    Ok(out)
}

fn put_u64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn get_u64(b: &[u8], at: usize) -> IoR<u64> {
    b.get(at..at + 8)
        .map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
        .ok_or_else(|| ioerr(MPI_ERR_INTERN, "malformed two-phase message"))
}

/// The pieces a message lists: `(offset, length)` and where its data starts.
fn parse(m: &[u8]) -> IoR<(Vec<(u64, usize)>, usize)> {
    if m.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let n = get_u64(m, 0)? as usize;
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        v.push((get_u64(m, 8 + 16 * i)?, get_u64(m, 16 + 16 * i)? as usize));
    }
    Ok((v, 8 + 16 * n))
}

/// A collective write of the stream `data` at view position `pos`.
pub(crate) fn write(
    f: &FileObj,
    v: &View,
    pos: i64,
    data: &[u8],
    h: &Hints,
    atomic: bool,
) -> IoR<()> {
    let mine = agree(f.comm, pieces(v, pos, data.len()))?;
    let Some(plan) = plan(f, h, &mine, h.cb_write)? else {
        let r = segments_of(v, pos, data.len()).and_then(|s| write_segs(f, &s, data, h, atomic));
        return agree(f.comm, r);
    };
    let mut result = Ok(());
    let mut buf = Vec::new();
    for r in 0..plan.rounds {
        let mut send = vec![Vec::new(); f.size as usize];
        for (a, &agg) in plan.aggs.iter().enumerate() {
            let (wlo, whi) = plan.window(a, r);
            let ps = in_window(&mine, wlo, whi);
            if ps.is_empty() {
                continue;
            }
            let m = &mut send[agg as usize];
            put_u64(m, ps.len() as u64);
            for &(o, l, _) in &ps {
                put_u64(m, o);
                put_u64(m, l as u64);
            }
            for &(_, l, s) in &ps {
                m.extend_from_slice(&data[s..s + l]);
            }
        }
        let got = exchange(f, &send)?;
        if result.is_err() {
            continue;
        }
        result = (|| {
            // Aggregator: assemble the pieces (in rank order) and write their span.
            let mut all: Vec<(u64, usize, usize, usize)> = Vec::new();
            for (src, m) in got.iter().enumerate() {
                let (ps, mut d) = parse(m)?;
                for (o, l) in ps {
                    all.push((o, l, src, d));
                    d += l;
                }
            }
            if all.is_empty() {
                return Ok(());
            }
            let lo = all.iter().map(|p| p.0).min().unwrap_or(0);
            let hi = all.iter().map(|p| p.0 + p.1 as u64).max().unwrap_or(0);
            let mut cover: Vec<(u64, u64)> = all.iter().map(|p| (p.0, p.0 + p.1 as u64)).collect();
            cover.sort_unstable();
            let mut end = lo;
            let mut holes = false;
            for (a, b) in cover {
                holes |= a > end;
                end = end.max(b);
            }
            buf.clear();
            buf.resize((hi - lo) as usize, 0);
            let _lock = if holes {
                Some(RangeLock::new(f.fd(), lo, hi - lo, true)?)
            } else {
                None
            };
            if holes && f.can_read {
                pread_full(&f.f, &mut buf, lo)?;
            }
            for &(o, l, src, d) in &all {
                let b = (o - lo) as usize;
                buf[b..b + l].copy_from_slice(&got[src][d..d + l]);
            }
            if holes && !f.can_read {
                for &(o, l, _, _) in &all {
                    let b = (o - lo) as usize;
                    pwrite_all(&f.f, &buf[b..b + l], o)?;
                }
                return Ok(());
            }
            pwrite_all(&f.f, &buf, lo)
        })();
    }
    agree(f.comm, result)
}

/// A collective read into the stream `out` from view position `pos`: the bytes obtained.
pub(crate) fn read(
    f: &FileObj,
    v: &View,
    pos: i64,
    out: &mut [u8],
    h: &Hints,
    atomic: bool,
) -> IoR<usize> {
    let mine = agree(f.comm, pieces(v, pos, out.len()))?;
    let Some(plan) = plan(f, h, &mine, h.cb_read)? else {
        let r = segments_of(v, pos, out.len()).and_then(|s| read_segs(f, &s, out, h, atomic));
        return agree(f.comm, r);
    };
    let mut result: IoR<()> = Ok(());
    let mut buf = Vec::new();
    // Bytes past the end of the file are not delivered (the user's buffer keeps its bytes).
    let size = f.f.metadata().map_err(|e| os_err(e, "stat"))?.len();
    for r in 0..plan.rounds {
        // Requests: the pieces each aggregator is to read for me.
        let mut asked: Vec<Vec<Piece>> = vec![Vec::new(); f.size as usize];
        let mut send = vec![Vec::new(); f.size as usize];
        for (a, &agg) in plan.aggs.iter().enumerate() {
            let (wlo, whi) = plan.window(a, r);
            let ps = in_window(&mine, wlo, whi);
            if ps.is_empty() {
                continue;
            }
            let m = &mut send[agg as usize];
            put_u64(m, ps.len() as u64);
            for &(o, l, _) in &ps {
                put_u64(m, o);
                put_u64(m, l as u64);
            }
            asked[agg as usize] = ps;
        }
        let reqs = exchange(f, &send)?;
        // Aggregator: read the span asked for and answer each process.
        let answers = (|| -> IoR<Vec<Vec<u8>>> {
            let mut lists = Vec::with_capacity(reqs.len());
            let (mut lo, mut hi) = (u64::MAX, 0u64);
            for m in &reqs {
                let (ps, _) = parse(m)?;
                for &(o, l) in &ps {
                    lo = lo.min(o);
                    hi = hi.max(o + l as u64);
                }
                lists.push(ps);
            }
            let mut ans = vec![Vec::new(); reqs.len()];
            if hi == 0 {
                return Ok(ans);
            }
            buf.clear();
            buf.resize((hi - lo) as usize, 0);
            let _lock = if atomic {
                Some(RangeLock::new(f.fd(), lo, hi - lo, false)?)
            } else {
                None
            };
            pread_full(&f.f, &mut buf, lo)?;
            for (src, ps) in lists.iter().enumerate() {
                for &(o, l) in ps {
                    let b = (o - lo) as usize;
                    ans[src].extend_from_slice(&buf[b..b + l]);
                }
            }
            Ok(ans)
        })();
        let answers = match answers {
            Ok(a) => a,
            Err(e) => {
                if result.is_ok() {
                    result = Err(e);
                }
                vec![Vec::new(); f.size as usize]
            }
        };
        let back = exchange(f, &answers)?;
        for (agg, ps) in asked.iter().enumerate() {
            let mut d = 0;
            for &(o, l, s) in ps {
                let avail = size.saturating_sub(o).min(l as u64) as usize;
                if let Some(src) = back[agg].get(d..d + avail) {
                    out[s..s + avail].copy_from_slice(src);
                }
                d += l;
            }
        }
    }
    agree(f.comm, result)?;
    // What lies before the end of the file, in stream order.
    let mut segs = mine.clone();
    segs.sort_by_key(|p| p.2);
    let mut got = 0;
    for (o, l, _) in segs {
        let avail = size.saturating_sub(o).min(l as u64) as usize;
        got += avail;
        if avail < l {
            break;
        }
    }
    Ok(got)
}
