//! Collective access by two-phase I/O.
//!
//! Every process lists the file segments of its part of the access (its *pieces*). The union
//! of the accesses, `[lo, hi)`, is cut into one contiguous *file domain* per aggregator
//! (`cb_nodes` of them when the hint is given; else one per node, and more for a large
//! access: see `file::aggregators`). Aggregators work through their domain in windows of at
//! most `cb_buffer_size` bytes, one round per window.
//!
//! 1. *Plan* (one allgather): every process's range and piece count, and the errors of the
//!    preparation; from them every process computes the same domains and rounds.
//! 2. *Requests* (one all-to-all of sizes, one of lists): each process sends each aggregator
//!    the `(offset, length)` list of its pieces in the aggregator's domain, cut at the window
//!    boundaries, for all rounds at once. From then on both sides know, per round, how many
//!    bytes go between each process and each aggregator.
//! 3. *Rounds* (point-to-point, only between processes that have data for each other; the
//!    pieces of one message go as a datatype over the caller's stream when they are few and
//!    large, so that the engine moves them without packing, else packed in one buffer):
//!    - write ([`write`]): each process sends each aggregator its pieces of the window; the
//!      aggregator writes the pieces it received, and its own straight from the caller's
//!      stream, with one `pwritev` per run of adjacent pieces when the pieces do not overlap
//!      and the runs are few or far apart; otherwise it assembles them in its window buffer in
//!      rank order and writes their span with one `pwrite`, reading the span first under an
//!      `fcntl` lock where the pieces leave holes;
//!    - read ([`read`]): the aggregator reads each run of adjacent pieces with one `preadv`
//!      straight into the answers (its own pieces into the caller's stream), or, where the
//!      pieces overlap or leave many small holes, the span of pieces less than [`GAP`] apart
//!      into its window buffer, and sends each process its pieces in one message.
//!
//! The window, send and receive buffers are kept by the file between calls (`Scratch`), so
//! that repeated collective calls touch no new memory.
//!
//! Two-phase is used when the accesses are interleaved or noncontiguous (`romio_cb_write` /
//! `romio_cb_read` = `automatic`, the default), always (`enable`) or never (`disable`, or
//! `collective_buffering` = `false`): then each process accesses its own segments, as in an
//! independent call.

mod read;
mod vectored;
mod write;

pub(crate) use read::read;
pub(crate) use write::write;

use madmpi::{Blocks, Datatype, RequestId, SendMode};
use madmpi_datatypes::Basic;

use super::access::segments_of;
use super::file::{aggregators, Hints};
use super::view::View;
use super::*;

/// A piece of an access: file offset, length, offset in the process's stream.
type Piece = (u64, usize, usize);

/// The largest slot per process of the one-step exchange of requests.
const SLOT_MAX: u64 = 4096;

/// Reads of two pieces less than this many bytes apart are merged into one `pread`.
const GAP: u64 = 64 << 10;

/// Domain boundaries of large domains are aligned to this (a page), so that two aggregators
/// never write the same page.
const ALIGN: u64 = 4096;

/// Scratch buffers a file keeps between collective calls (never shrunk below what the last
/// call used, dropped past [`KEEP`]).
#[derive(Default)]
pub(crate) struct Scratch {
    win: Vec<u8>,
    send: Vec<u8>,
    recv: Vec<u8>,
}

/// Scratch memory kept by a file between calls, at most.
const KEEP: usize = 96 << 20;

impl Scratch {
    fn trim(&mut self) {
        for v in [&mut self.win, &mut self.send, &mut self.recv] {
            if v.capacity() > KEEP / 3 {
                *v = Vec::new();
            }
        }
    }
}

/// The first `n` bytes of `v`, grown (zeroed) when shorter; the bytes kept from an earlier
/// call are stale: callers write every byte they then read.
fn room(v: &mut Vec<u8>, n: usize) -> &mut [u8] {
    if v.len() < n {
        v.resize(n, 0);
    }
    &mut v[..n]
}

/// What every process learnt about the access.
pub(super) struct Plan {
    /// Aggregator ranks.
    aggs: Vec<i32>,
    /// Domain boundaries: domain `a` is `[bounds[a], bounds[a + 1])`.
    bounds: Vec<u64>,
    /// Rounds (the most windows of any domain).
    rounds: u64,
    /// Bytes per window.
    cb: u64,
    /// The most pieces any process has (huge when a process's pieces overlap).
    most: u64,
}

impl Plan {
    /// The index of my domain, if I am an aggregator.
    fn mine(&self, rank: i32) -> Option<usize> {
        self.aggs.iter().position(|&a| a == rank)
    }

    /// The domain holding file offset `o` (within `[lo, hi)`).
    fn domain_of(&self, o: u64) -> usize {
        let n = self.aggs.len();
        self.bounds[1..n].partition_point(|&b| b <= o)
    }

    /// The end of the window holding offset `o` of domain `a`.
    fn window_end(&self, a: usize, o: u64) -> u64 {
        let d = self.bounds[a];
        let r = (o - d) / self.cb;
        (d + (r + 1) * self.cb).min(self.bounds[a + 1])
    }

    /// The round of offset `o` in domain `a`.
    fn round_of(&self, a: usize, o: u64) -> u64 {
        (o - self.bounds[a]) / self.cb
    }
}

/// My pieces sorted by file offset.
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
    if !p.windows(2).all(|w| w[0].0 <= w[1].0) {
        p.sort_by_key(|x| x.0);
    }
    Ok(p)
}

/// Decide, collectively, whether to use two-phase and how; `mine` is this process's pieces
/// or the error of computing them (agreed here: every process fails when one did).
fn plan(f: &FileObj, h: &Hints, mine: &IoR<Vec<Piece>>, cb: Option<bool>) -> IoR<Option<Plan>> {
    let (code, lo, hi, n) = match mine {
        Err(e) => (e.code as i64, -1, -1, 0),
        Ok(m) => match (m.first(), m.iter().map(|p| p.0 + p.1 as u64).max()) {
            // Overlapping pieces (possible in a read) could be cut more often than there are
            // boundaries: they make the one-step exchange of requests unsafe (`requests`).
            (Some(a), Some(b)) if m.windows(2).any(|w| w[1].0 < w[0].0 + w[0].1 as u64) => {
                (0, a.0 as i64, b as i64, i64::MAX / 4)
            }
            (Some(a), Some(b)) => (0, a.0 as i64, b as i64, m.len() as i64),
            _ => (0, -1, -1, 0),
        },
    };
    let all = allgather_i64(f.comm, &[code, lo, hi, n], f.size)?;
    if let Some(&worst) = all.chunks(4).map(|c| &c[0]).max().filter(|&&c| c != 0) {
        if code == 0 {
            return Err(ioerr(
                worst as c_int,
                "the collective I/O call failed on another process of the file's group",
            ));
        }
    }
    if let Err(e) = mine {
        return Err(ioerr(e.code, e.msg.clone()));
    }
    if cb == Some(false) || f.size == 1 && cb != Some(true) {
        return Ok(None);
    }
    let ranges: Vec<(i64, i64, i64)> = all
        .chunks(4)
        .map(|c| (c[1], c[2], c[3]))
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
    let lo = sorted[0].0 as u64;
    let hi = ranges.iter().map(|r| r.1).max().unwrap_or(0) as u64;
    let aggs = aggregators(f, h, hi - lo);
    let n = aggs.len().max(1) as u64;
    let span = hi - lo;
    let mut bounds: Vec<u64> = (0..=n).map(|a| lo + span * a / n).collect();
    if span / n >= 16 * ALIGN {
        for b in &mut bounds[1..n as usize] {
            *b = (*b / ALIGN * ALIGN).max(lo);
        }
    }
    let cb = h.cb_buffer_size.max(1) as u64;
    let rounds = bounds
        .windows(2)
        .map(|w| (w[1] - w[0]).div_ceil(cb))
        .max()
        .unwrap_or(0);
    let most = ranges.iter().map(|r| r.2 as u64).max().unwrap_or(0);
    Ok(Some(Plan {
        aggs,
        bounds,
        rounds,
        cb,
        most,
    }))
}

/// A collective access that failed before it started on this process: the others learn it in
/// the exchange they start with (the plan); returns the error.
pub(crate) fn fail(f: &FileObj, h: &Hints, e: IoErr, write: bool) -> IoErr {
    let cb = if write { h.cb_write } else { h.cb_read };
    match plan(f, h, &Err(e), cb) {
        Err(e) => e,
        Ok(_) => ioerr(MPI_ERR_INTERN, "collective I/O: an error was not agreed"),
    }
}

/// My pieces cut at the domains' and windows' boundaries, per aggregator (index in
/// `plan.aggs`), each list in file order.
fn split(plan: &Plan, mine: &[Piece]) -> Vec<Vec<Piece>> {
    let mut per = vec![Vec::new(); plan.aggs.len()];
    for &(mut o, mut l, mut s) in mine {
        while l > 0 {
            let a = plan.domain_of(o);
            let end = plan.window_end(a, o);
            let cut = ((end - o) as usize).min(l);
            per[a].push((o, cut, s));
            o += cut as u64;
            s += cut;
            l -= cut;
        }
    }
    per
}

/// Step 2: send every aggregator the list of my pieces in its domain; an aggregator gets, per
/// process, the `(offset, length)` list of that process's pieces in its domain (its own taken
/// from `per`, not sent).
fn requests(f: &FileObj, plan: &Plan, per: &[Vec<Piece>]) -> IoR<Vec<Vec<(u64, usize)>>> {
    let n = f.size as usize;
    let me = plan.mine(f.rank);
    // Pieces one process can send one aggregator, at most: its own, each cut at most once per
    // window boundary. When that is small, one all-to-all of fixed-size slots suffices.
    let bound = plan
        .most
        .saturating_add(plan.aggs.len() as u64 * plan.rounds);
    let slot = bound.saturating_mul(16).saturating_add(8);
    let (rbuf, rdispl, rcounts) = if slot <= SLOT_MAX && slot.saturating_mul(n as u64) <= 1 << 20 {
        let slot = slot as usize;
        let mut sbuf = vec![0u8; slot * n];
        for (a, ps) in per.iter().enumerate() {
            if Some(a) == me {
                continue;
            }
            let m = &mut sbuf[plan.aggs[a] as usize * slot..][..slot];
            m[..8].copy_from_slice(&(ps.len() as u64).to_le_bytes());
            for (k, &(o, l, _)) in ps.iter().enumerate() {
                m[8 + 16 * k..16 + 16 * k].copy_from_slice(&o.to_le_bytes());
                m[16 + 16 * k..24 + 16 * k].copy_from_slice(&(l as u64).to_le_bytes());
            }
        }
        let mut rbuf = vec![0u8; slot * n];
        let byte = Datatype::basic(Basic::Byte);
        // SAFETY: `slot` bytes per process each way, live for the call.
        unsafe {
            madmpi::alltoall(
                Some(madmpi::Data::new(sbuf.as_ptr(), slot, &byte)),
                madmpi::Data::new(rbuf.as_mut_ptr(), slot, &byte),
                f.comm,
            )?
        };
        let mut rdispl = vec![0isize; n];
        let mut rcounts = vec![0i64; n];
        for i in 0..n {
            let k = u64::from_le_bytes(rbuf[i * slot..][..8].try_into().expect("8 bytes"));
            if k > bound {
                return Err(ioerr(MPI_ERR_INTERN, "malformed two-phase request"));
            }
            rdispl[i] = (i * slot + 8) as isize;
            rcounts[i] = (k * 16) as i64;
        }
        (rbuf, rdispl, rcounts)
    } else {
        lists_by_size(f, plan, per)?
    };
    let mut lists = vec![Vec::new(); n];
    for (src, list) in lists.iter_mut().enumerate() {
        if me.is_none() {
            break;
        }
        if src as i32 == f.rank {
            *list = per[me.unwrap_or(0)].iter().map(|p| (p.0, p.1)).collect();
            continue;
        }
        let m = &rbuf[rdispl[src] as usize..][..rcounts[src] as usize];
        let word = |i: usize| u64::from_le_bytes(m[i..i + 8].try_into().expect("8 bytes"));
        *list = (0..m.len() / 16)
            .map(|i| (word(16 * i), word(16 * i + 8) as usize))
            .collect();
    }
    Ok(lists)
}

/// The lists of [`requests`] in two steps: one all-to-all of their sizes, one of the lists.
/// Returns the received bytes, each process's displacement and byte count.
#[allow(clippy::type_complexity)]
fn lists_by_size(
    f: &FileObj,
    plan: &Plan,
    per: &[Vec<Piece>],
) -> IoR<(Vec<u8>, Vec<isize>, Vec<i64>)> {
    let n = f.size as usize;
    let me = plan.mine(f.rank);
    let mut counts = vec![0i64; n];
    for (a, ps) in per.iter().enumerate() {
        if Some(a) != me {
            counts[plan.aggs[a] as usize] = (ps.len() * 16) as i64;
        }
    }
    let mut sbuf = Vec::with_capacity(counts.iter().sum::<i64>() as usize);
    let mut sdispl = vec![0isize; n];
    let mut order: Vec<usize> = (0..per.len()).filter(|&a| Some(a) != me).collect();
    order.sort_by_key(|&a| plan.aggs[a]);
    for a in order {
        sdispl[plan.aggs[a] as usize] = sbuf.len() as isize;
        for &(o, l, _) in &per[a] {
            sbuf.extend_from_slice(&o.to_le_bytes());
            sbuf.extend_from_slice(&(l as u64).to_le_bytes());
        }
    }
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
    let mut rdispl = vec![0isize; n];
    let mut total = 0usize;
    for i in 0..n {
        rdispl[i] = total as isize;
        total += rcounts[i] as usize;
    }
    let mut rbuf = vec![0u8; total];
    let byte = Datatype::basic(Basic::Byte);
    let sc: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
    let rc: Vec<usize> = rcounts.iter().map(|&c| c as usize).collect();
    // SAFETY: the buffers hold the counts given at the displacements given, live for the call.
    unsafe {
        madmpi::alltoallw(
            Some(Blocks::v(sbuf.as_ptr(), sc, &sdispl, &byte)),
            Blocks::v(rbuf.as_mut_ptr(), rc, &rdispl, &byte),
            f.comm,
        )?
    };
    Ok((rbuf, rdispl, rcounts))
}

/// For each process, the range `[from, to)` of its list holding the pieces of round `r` of
/// domain `a`, advancing the cursors `cur`.
fn round_ranges(
    plan: &Plan,
    a: usize,
    r: u64,
    lists: &[Vec<(u64, usize)>],
    cur: &mut [usize],
) -> Vec<(usize, usize)> {
    lists
        .iter()
        .zip(cur.iter_mut())
        .map(|(l, c)| {
            let from = *c;
            while *c < l.len() && plan.round_of(a, l[*c].0) == r {
                *c += 1;
            }
            (from, *c)
        })
        .collect()
}

/// My pieces for aggregator `a` in round `r`: `per[a][from..to]`, advancing `cur[a]`.
fn my_round(
    plan: &Plan,
    per: &[Vec<Piece>],
    a: usize,
    r: u64,
    cur: &mut [usize],
) -> (usize, usize) {
    let from = cur[a];
    while cur[a] < per[a].len() && plan.round_of(a, per[a][cur[a]].0) == r {
        cur[a] += 1;
    }
    (from, cur[a])
}

/// Tag of the messages of round `r`.
fn tag(r: u64) -> i32 {
    (r % (1 << 20)) as i32
}

/// A message of a round: a peer, and its data as `count` elements of a datatype at a pointer
/// (bytes of a packed buffer, or a type over the pieces of the caller's stream).
pub(super) struct Msg {
    peer: i32,
    ptr: *mut u8,
    count: usize,
    dt: Datatype,
}

impl Msg {
    /// `len` bytes at `p`.
    fn bytes(peer: i32, p: *mut u8, len: usize) -> Msg {
        Msg {
            peer,
            ptr: p,
            count: len,
            dt: Datatype::basic(Basic::Byte),
        }
    }

    /// The blocks `(offset from base, length)` at `base`, as one element of a byte type: the
    /// engine moves large blocks without packing them (zero-copy rendezvous, `get` into the
    /// blocks). `None` when the type cannot be built (the caller packs).
    fn blocks(peer: i32, base: *mut u8, blocks: &[(usize, usize)]) -> Option<Msg> {
        let lens: Vec<usize> = blocks.iter().map(|b| b.1).collect();
        let displs: Vec<isize> = blocks.iter().map(|b| b.0 as isize).collect();
        let dt = Datatype::create_hindexed(&lens, &displs, &Datatype::basic(Basic::Byte)).ok()?;
        dt.commit();
        Some(Msg {
            peer,
            ptr: base,
            count: 1,
            dt,
        })
    }
}

/// Pieces of a message go as a datatype over the caller's stream (no packing) when there are
/// at most this many ...
const TYPED_MAX: usize = 256;
/// ... and they average at least this many bytes (what lets the engine move them zero-copy).
const TYPED_MIN_AVG: usize = 8192;

/// Whether pieces of these lengths go typed (see [`TYPED_MAX`]).
fn typed(n: usize, bytes: usize, min_avg: usize) -> bool {
    n > 1 && n <= TYPED_MAX && bytes / n >= min_avg
}

/// Post the messages of a round and wait for all of them.
///
/// # Safety
/// Every message's memory is valid (readable for sends, writable for receives) and not
/// otherwise used until the call returns.
unsafe fn transfer(f: &FileObj, r: u64, sends: &[Msg], recvs: &[Msg]) -> IoR<()> {
    if sends.is_empty() && recvs.is_empty() {
        return Ok(());
    }
    let mut reqs: Vec<Option<RequestId>> = Vec::with_capacity(sends.len() + recvs.len());
    let t = tag(r);
    for m in recvs {
        // SAFETY: the caller's contract.
        let q = unsafe { madmpi::irecv(m.ptr, m.count, &m.dt, m.peer, t, f.comm) };
        match q {
            Ok(q) => reqs.push(Some(q)),
            Err(e) => return Err(abandon(&reqs, e)),
        }
    }
    for m in sends {
        // SAFETY: the caller's contract.
        let q =
            unsafe { madmpi::isend(m.ptr, m.count, &m.dt, m.peer, t, f.comm, SendMode::Standard) };
        match q {
            Ok(q) => reqs.push(Some(q)),
            Err(e) => return Err(abandon(&reqs, e)),
        }
    }
    let mut done: Vec<_> = reqs.iter().map(|_| None).collect();
    madmpi::wait_all(&reqs, &mut done)?;
    Ok(())
}

/// A failure while posting a round: cancel what was posted and wait for it (the buffers must
/// outlive the requests), then report the failure.
#[cold]
fn abandon(reqs: &[Option<RequestId>], e: madmpi::Error) -> IoErr {
    for q in reqs.iter().flatten() {
        let _ = madmpi::cancel(*q);
    }
    let mut done: Vec<_> = reqs.iter().map(|_| None).collect();
    let _ = madmpi::wait_all(reqs, &mut done);
    e.into()
}

/// Run `body` with the file's scratch buffers (fresh ones when another thread holds them).
fn with_scratch<T>(f: &FileObj, body: impl FnOnce(&mut Scratch) -> T) -> T {
    match f.scratch.try_lock() {
        Some(mut s) => {
            let r = body(&mut s);
            s.trim();
            r
        }
        None => body(&mut Scratch::default()),
    }
}
