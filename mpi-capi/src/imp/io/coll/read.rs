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
            let rbuf = room(recv, rtotal);
            transfer(f, r, &sends, &send[..total], &recvs, rbuf)?;
            let mut at = 0;
            for &(a, i, j) in &asked {
                for &(_, l, s) in &per[a][i..j] {
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

/// The aggregator's part of a round: read the runs that the pieces of every process
/// (`lists[src][i..j]` for `ranges[src] = (i, j)`) cover into `win` (pieces less than `GAP`
/// apart in one `pread`), pack the other processes' pieces in rank order into `sbuf`, and
/// put mine (`own`) straight into my stream `out`.
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
    let mut cover: Vec<(u64, u64)> = Vec::new();
    for (src, &(i, j)) in ranges.iter().enumerate() {
        cover.extend(lists[src][i..j].iter().map(|&(o, l)| (o, o + l as u64)));
    }
    if cover.is_empty() {
        return Ok(());
    }
    if !cover.windows(2).all(|w| w[0] <= w[1]) {
        cover.sort_unstable();
    }
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (a, b) in cover {
        match runs.last_mut() {
            Some(last) if a <= last.1 + GAP => last.1 = last.1.max(b),
            _ => runs.push((a, b)),
        }
    }
    let lo = runs[0].0;
    let hi = runs.iter().map(|r| r.1).max().unwrap_or(lo);
    let buf = room(win, (hi - lo) as usize);
    {
        let _lock = if atomic {
            Some(RangeLock::new(f.fd(), lo, hi - lo, false)?)
        } else {
            None
        };
        for &(a, b) in &runs {
            let span = &mut buf[(a - lo) as usize..(b - lo) as usize];
            // The file may have shrunk since the pieces were cut at its end: zeros then.
            let got = pread_full(&f.f, span, a)?;
            span[got..].fill(0);
        }
    }
    let mut at = 0;
    for (src, &(i, j)) in ranges.iter().enumerate() {
        if src as i32 == f.rank {
            for &(o, l, s) in own {
                let b = (o - lo) as usize;
                out[s..s + l].copy_from_slice(&buf[b..b + l]);
            }
            continue;
        }
        for &(o, l) in &lists[src][i..j] {
            let b = (o - lo) as usize;
            sbuf[at..at + l].copy_from_slice(&buf[b..b + l]);
            at += l;
        }
    }
    Ok(())
}
