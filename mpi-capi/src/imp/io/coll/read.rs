//! The collective read of two-phase I/O.

use super::super::access::read_segs;
use super::*;

/// A collective read into the stream `out` from view position `pos`: the bytes obtained
/// (those before the end of the file, in stream order, up to the first missing one). Bytes
/// past the end of the file are not delivered: the caller's buffer keeps them.
pub(crate) fn read(
    f: &FileObj,
    v: &View,
    pos: i64,
    out: &mut [u8],
    h: &Hints,
    atomic: bool,
) -> IoR<usize> {
    let size =
        f.f.metadata()
            .map(|m| m.len())
            .map_err(|e| os_err(e, "stat"));
    // My pieces, cut at the end of the file, and the bytes they deliver.
    let mine = pieces(v, pos, out.len()).and_then(|m| {
        let size = size.as_ref().map_err(|e| ioerr(e.code, e.msg.clone()))?;
        let got = delivered(&m, *size);
        let cut: Vec<Piece> = m
            .iter()
            .filter_map(|&(o, l, s)| {
                let avail = size.saturating_sub(o).min(l as u64) as usize;
                (avail > 0).then_some((o, avail, s))
            })
            .collect();
        Ok((cut, got))
    });
    let (list, got) = match mine {
        Ok((c, g)) => (Ok(c), g),
        Err(e) => (Err(e), 0),
    };
    let Some(plan) = plan(f, h, &list, h.cb_read)? else {
        let r = segments_of(v, pos, out.len()).and_then(|s| read_segs(f, &s, out, h, atomic));
        return agree(f.comm, r);
    };
    let mine = list?;
    let per = split(&plan, &mine);
    let lists = requests(f, &plan, &per)?;
    let me = plan.mine(f.rank);
    let result = with_scratch(f, |sc| -> IoR<IoR<()>> {
        let Scratch { win, send, recv } = sc;
        let mut result = Ok(());
        let mut mycur = vec![0; per.len()];
        let mut cur = vec![0; lists.len()];
        for r in 0..plan.rounds {
            // What each aggregator sends me this round (mine I take myself).
            let mut recvs = Vec::new();
            let mut rtotal = 0;
            let mut own = (0, 0);
            let mut asked = Vec::new();
            for (a, ps) in per.iter().enumerate() {
                let (i, j) = my_round(&plan, &per, a, r, &mut mycur);
                if Some(a) == me {
                    own = (i, j);
                    continue;
                }
                if i == j {
                    continue;
                }
                let len: usize = ps[i..j].iter().map(|p| p.1).sum();
                recvs.push((plan.aggs[a], rtotal, len));
                asked.push((a, i, j));
                rtotal += len;
            }
            // As an aggregator: read the window's pieces, answer every process.
            let mut sends = Vec::new();
            let mut total = 0;
            if let Some(a) = me {
                let ranges = round_ranges(&plan, a, r, &lists, &mut cur);
                for (src, &(i, j)) in ranges.iter().enumerate() {
                    if src as i32 == f.rank || i == j {
                        continue;
                    }
                    let len: usize = lists[src][i..j].iter().map(|p| p.1).sum();
                    sends.push((src as i32, total, len));
                    total += len;
                }
                let sbuf = room(send, total);
                let own = &per[a][own.0..own.1];
                let r = load(f, win, &lists, &ranges, sbuf, own, out, atomic);
                if result.is_ok() {
                    // On failure the messages still go (their bytes unspecified): the
                    // processes waiting for them must not hang; the error is agreed below.
                    result = r;
                }
            }
            // Pieces of a few kilobytes or more are received straight into `out`, the
            // others into `rbuf` and copied.
            let mut rmsgs = Vec::with_capacity(recvs.len());
            let mut copied = Vec::new();
            let rbuf = room(recv, rtotal);
            for (&(src, off, len), &(a, i, j)) in recvs.iter().zip(&asked) {
                let ps = &per[a][i..j];
                let blocks: Vec<(usize, usize)> = ps.iter().map(|p| (p.2, p.1)).collect();
                let direct = (ps.len() == 1 || typed(ps.len(), len, 2048))
                    .then(|| Msg::blocks(src, out.as_mut_ptr(), &blocks))
                    .flatten();
                match direct {
                    Some(m) => rmsgs.push(m),
                    None => {
                        rmsgs.push(Msg::bytes(src, rbuf[off..].as_mut_ptr(), len));
                        copied.push((off, ps));
                    }
                }
            }
            let smsgs: Vec<Msg> = sends
                .iter()
                .map(|&(dst, off, len)| Msg::bytes(dst, send[off..].as_mut_ptr(), len))
                .collect();
            // SAFETY: the messages point into `send`, `rbuf` and `out` (pieces of `out` that
            // this round writes nothing else to), live and untouched until the call returns.
            unsafe { transfer(f, r, &smsgs, &rmsgs)? };
            for (off, ps) in copied {
                let mut at = off;
                for &(_, l, s) in ps {
                    out[s..s + l].copy_from_slice(&rbuf[at..at + l]);
                    at += l;
                }
            }
        }
        Ok(result)
    })?;
    agree(f.comm, result)?;
    Ok(got)
}

/// The stream bytes before the end of the file `size`, in stream order, up to the first piece
/// that ends past it.
fn delivered(m: &[Piece], size: u64) -> usize {
    let mut segs: Vec<(u64, usize, usize)> = m.to_vec();
    if !segs.windows(2).all(|w| w[0].2 <= w[1].2) {
        segs.sort_by_key(|p| p.2);
    }
    let mut got = 0;
    for (o, l, _) in segs {
        let avail = size.saturating_sub(o).min(l as u64) as usize;
        got += avail;
        if avail < l {
            break;
        }
    }
    got
}

/// The aggregator's part of a round: the pieces of every process (`lists[src][i..j]` for
/// `ranges[src] = (i, j)`) read into the messages of the other processes (`sbuf`, in rank
/// order) and mine (`own`) straight into my stream `out`. Pieces that do not overlap are read
/// by one `preadv` per run of adjacent pieces where the runs are few or the holes between them
/// large; otherwise the runs they cover (pieces less than `GAP` apart merged) are read into
/// `win` and the pieces copied from there.
#[allow(clippy::too_many_arguments)]
fn load(
    f: &FileObj,
    win: &mut Vec<u8>,
    lists: &[Vec<(u64, usize)>],
    ranges: &[(usize, usize)],
    sbuf: &mut [u8],
    own: &[Piece],
    out: &mut [u8],
    atomic: bool,
) -> IoR<()> {
    // Every piece with where its bytes go.
    let mut ps: Vec<(u64, usize, *mut u8)> = Vec::new();
    let mut at = 0;
    for (src, &(i, j)) in ranges.iter().enumerate() {
        if src as i32 == f.rank {
            ps.extend(
                own.iter()
                    .map(|&(o, l, s)| (o, l, out[s..s + l].as_mut_ptr())),
            );
            continue;
        }
        for &(o, l) in &lists[src][i..j] {
            ps.push((o, l, sbuf[at..at + l].as_mut_ptr()));
            at += l;
        }
    }
    if ps.is_empty() {
        return Ok(());
    }
    if !ps.windows(2).all(|w| w[0].0 <= w[1].0) {
        ps.sort_by_key(|p| p.0);
    }
    // Runs of adjacent pieces: (start, end, first piece).
    let mut runs: Vec<(u64, u64, usize)> = Vec::new();
    let mut overlap = false;
    for (x, &(o, l, _)) in ps.iter().enumerate() {
        let b = o + l as u64;
        match runs.last_mut() {
            Some(last) if o <= last.1 => {
                overlap |= o < last.1;
                last.1 = last.1.max(b);
            }
            _ => runs.push((o, b, x)),
        }
    }
    let lo = runs[0].0;
    let hi = runs.iter().map(|r| r.1).max().unwrap_or(lo);
    let covered: u64 = runs.iter().map(|r| r.1 - r.0).sum();
    let _lock = if atomic {
        Some(RangeLock::new(f.fd(), lo, hi - lo, false)?)
    } else {
        None
    };
    if !overlap && (runs.len() <= 8 || hi - lo - covered >= covered) {
        for (x, r) in runs.iter().enumerate() {
            let to = runs.get(x + 1).map_or(ps.len(), |n| n.2);
            let iov: Vec<(*mut u8, usize)> = ps[r.2..to].iter().map(|p| (p.2, p.1)).collect();
            // SAFETY: the pieces point into `out` and `sbuf`, disjoint, live for the call.
            unsafe { vectored::preadv_full(f.fd(), &iov, r.0)? };
        }
        return Ok(());
    }
    // Data sieving: spans of pieces less than GAP apart.
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for &(a, b, _) in &runs {
        match spans.last_mut() {
            Some(last) if a <= last.1 + GAP => last.1 = last.1.max(b),
            _ => spans.push((a, b)),
        }
    }
    let buf = room(win, (hi - lo) as usize);
    for &(a, b) in &spans {
        let span = &mut buf[(a - lo) as usize..(b - lo) as usize];
        // The file may have shrunk since the pieces were cut at its end: zeros then.
        let got = pread_full(&f.f, span, a)?;
        span[got..].fill(0);
    }
    for &(o, l, p) in &ps {
        let b = (o - lo) as usize;
        // SAFETY: `p` points to `l` writable bytes of `out` or `sbuf` (above), not `win`.
        unsafe { std::ptr::copy_nonoverlapping(buf[b..].as_ptr(), p, l) };
    }
    Ok(())
}
