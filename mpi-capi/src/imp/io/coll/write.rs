//! The collective write of two-phase I/O.

use super::super::access::write_segs;
use super::*;

/// A collective write of the stream `data` at view position `pos` (or of the error that
/// making the stream met, agreed with the others).
pub(crate) fn write(
    f: &FileObj,
    v: &View,
    pos: i64,
    data: Result<&[u8], &IoErr>,
    h: &Hints,
    atomic: bool,
) -> IoR<()> {
    let mine = match data {
        Ok(d) => pieces(v, pos, d.len()),
        Err(e) => Err(ioerr(e.code, e.msg.clone())),
    };
    let data = data.unwrap_or(&[]);
    let Some(plan) = plan(f, h, &mine, h.cb_write)? else {
        let r = segments_of(v, pos, data.len()).and_then(|s| write_segs(f, &s, data, h, atomic));
        return agree(f.comm, r);
    };
    // `plan` returned an error for every process when one failed.
    let mine = mine?;
    let per = split(&plan, &mine);
    let lists = requests(f, &plan, &per)?;
    let me = plan.mine(f.rank);
    let result = with_scratch(f, |sc| -> IoR<IoR<()>> {
        let Scratch { win, send, recv } = sc;
        let mut result = Ok(());
        let mut mycur = vec![0; per.len()];
        let mut cur = vec![0; lists.len()];
        for r in 0..plan.rounds {
            // My pieces of this round, packed per aggregator (mine stay where they are).
            let mut sends = Vec::new();
            let mut total = 0;
            let mut own = (0, 0);
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
                sends.push((plan.aggs[a], total, len, a, i, j));
                total += len;
            }
            // Few large pieces go as a type over `data`, the others packed in `sbuf`.
            let mut msgs = Vec::with_capacity(sends.len());
            let mut packed = Vec::new();
            for &(dst, _, len, a, i, j) in &sends {
                let ps = &per[a][i..j];
                let blocks: Vec<(usize, usize)> = ps.iter().map(|p| (p.2, p.1)).collect();
                match typed(ps.len(), len, TYPED_MIN_AVG)
                    .then(|| Msg::blocks(dst, data.as_ptr() as *mut u8, &blocks))
                    .flatten()
                {
                    Some(m) => msgs.push(m),
                    None => packed.push((dst, len, ps)),
                }
            }
            let sbuf = room(send, packed.iter().map(|p| p.1).sum());
            let mut at = 0;
            for &(dst, len, ps) in &packed {
                let start = at;
                for &(_, l, s) in ps {
                    sbuf[at..at + l].copy_from_slice(&data[s..s + l]);
                    at += l;
                }
                msgs.push(Msg::bytes(dst, sbuf[start..].as_mut_ptr(), len));
            }
            // As an aggregator: what each process sends me.
            let ranges = match me {
                Some(a) => round_ranges(&plan, a, r, &lists, &mut cur),
                None => Vec::new(),
            };
            let mut recvs = Vec::new();
            let mut rtotal = 0;
            for (src, &(i, j)) in ranges.iter().enumerate() {
                if src as i32 == f.rank || i == j {
                    continue;
                }
                let len: usize = lists[src][i..j].iter().map(|p| p.1).sum();
                recvs.push((src as i32, rtotal, len));
                rtotal += len;
            }
            let rbuf = room(recv, rtotal);
            let rmsgs: Vec<Msg> = recvs
                .iter()
                .map(|&(src, off, len)| Msg::bytes(src, rbuf[off..].as_mut_ptr(), len))
                .collect();
            // SAFETY: the messages point into `data`, `sbuf` and `rbuf`, live and untouched
            // until the call returns.
            unsafe { transfer(f, r, &msgs, &rmsgs)? };
            if let (Some(a), Ok(())) = (me, &result) {
                let own = &per[a][own.0..own.1];
                result = store(f, win, &lists, &ranges, rbuf, own, data, atomic);
            }
        }
        Ok(result)
    })?;
    agree(f.comm, result)
}

/// The aggregator's part of a round: the pieces of every process (`lists[src][i..j]` for
/// `ranges[src] = (i, j)`, their bytes one after the other in `rbuf`, mine `own` in `data`).
/// Pieces that do not overlap go to the file as they are, one `pwritev` per run of adjacent
/// pieces, where the runs are few or the holes between them large; otherwise they are
/// assembled in `win` in rank order (over the file's bytes in the holes, read under an `fcntl`
/// lock) and written with one `pwrite` of their span.
#[allow(clippy::too_many_arguments)]
fn store(
    f: &FileObj,
    win: &mut Vec<u8>,
    lists: &[Vec<(u64, usize)>],
    ranges: &[(usize, usize)],
    rbuf: &[u8],
    own: &[Piece],
    data: &[u8],
    atomic: bool,
) -> IoR<()> {
    // Every piece, in rank order, with where its bytes are.
    let mut ps: Vec<(u64, usize, *const u8)> = Vec::new();
    let mut at = 0;
    for (src, &(i, j)) in ranges.iter().enumerate() {
        if src as i32 == f.rank {
            ps.extend(own.iter().map(|&(o, l, s)| (o, l, data[s..s + l].as_ptr())));
            continue;
        }
        for &(o, l) in &lists[src][i..j] {
            ps.push((o, l, rbuf[at..at + l].as_ptr()));
            at += l;
        }
    }
    if ps.is_empty() {
        return Ok(());
    }
    // File order (stable: equal offsets keep rank order), and the runs the pieces cover:
    // (start, end, first index in `order`).
    let mut order: Vec<usize> = (0..ps.len()).collect();
    if !ps.windows(2).all(|w| w[0].0 <= w[1].0) {
        order.sort_by_key(|&k| ps[k].0);
    }
    let mut runs: Vec<(u64, u64, usize)> = Vec::new();
    let mut overlap = false;
    for (x, &k) in order.iter().enumerate() {
        let (o, l, _) = ps[k];
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
    let holes = runs.len() > 1;
    if !overlap && (runs.len() <= 8 || hi - lo - covered >= covered || !f.can_read) {
        let _lock = if atomic {
            Some(RangeLock::new(f.fd(), lo, hi - lo, true)?)
        } else {
            None
        };
        for (x, r) in runs.iter().enumerate() {
            let to = runs.get(x + 1).map_or(order.len(), |n| n.2);
            let iov: Vec<(*const u8, usize)> =
                order[r.2..to].iter().map(|&k| (ps[k].2, ps[k].1)).collect();
            // SAFETY: the pieces point into `data` and `rbuf`, live for the call.
            unsafe { vectored::pwritev_all(f.fd(), &iov, r.0)? };
        }
        return Ok(());
    }
    let buf = room(win, (hi - lo) as usize);
    let _lock = if holes || atomic {
        Some(RangeLock::new(f.fd(), lo, hi - lo, true)?)
    } else {
        None
    };
    if holes && f.can_read {
        // Bytes between the pieces keep what the file holds (zeros past its end).
        let got = pread_full(&f.f, buf, lo)?;
        buf[got..].fill(0);
    }
    for &(o, l, p) in &ps {
        let b = (o - lo) as usize;
        // SAFETY: `p` points to `l` bytes of `data` or `rbuf` (above), not `win`.
        buf[b..b + l].copy_from_slice(unsafe { std::slice::from_raw_parts(p, l) });
    }
    if holes && !f.can_read {
        // Write-only descriptor: the covered runs one by one.
        for &(a, b, _) in &runs {
            pwrite_all(&f.f, &buf[(a - lo) as usize..(b - lo) as usize], a)?;
        }
        return Ok(());
    }
    pwrite_all(&f.f, buf, lo)
}
