//! The algorithms of the collectives inside one group, written against the schedule builder.
//!
//! Reductions work on packed data (see `op`): `sp` is the packed input, `rp` the packed output,
//! `count` elements of the reduction datatype, `esz` bytes each. Rooted algorithms number the
//! processes relative to the root ("virtual ranks") so that any root uses the same tree.
//! Non-commutative operations always combine a lower-ranked operand as the `in` argument of
//! `inout = in op inout`, and an order-preserving tree or exchange pattern is used for them.

use madmpi_datatypes::Datatype;

use super::sched::{Team, B};

/// Largest power of two ≤ n (n ≥ 1).
pub(crate) fn pof2_floor(n: i32) -> i32 {
    let mut p = 1;
    while p * 2 <= n {
        p *= 2;
    }
    p
}

/// Lowest set bit of `v`, or the first power of two ≥ `n` for `v == 0` (the root's span).
fn low_bit(v: i32, n: i32) -> i32 {
    if v == 0 {
        let mut m = 1;
        while m < n {
            m *= 2;
        }
        m
    } else {
        v & v.wrapping_neg()
    }
}

/// Rooted virtual ranks: `(vrank of me, real rank of a vrank)`.
fn rooted(t: &Team, root: i32) -> (i32, impl Fn(i32) -> i32) {
    let n = t.size;
    ((t.me - root + n) % n, move |v: i32| (v + root) % n)
}

// ------------------------------------------------------------------------------------ barrier

/// Dissemination barrier: ⌈log2 n⌉ rounds; in round k each process signals `me + 2^k` and
/// waits for `me - 2^k`. Any size.
pub(crate) fn barrier_dissemination(b: &mut B, t: &Team) {
    let n = t.size;
    let nothing = std::ptr::NonNull::<u8>::dangling().as_ptr();
    let mut d = 1;
    while d < n {
        b.fence();
        b.recv_bytes(t, (t.me - d + n) % n, nothing, 0);
        b.send_bytes(t, (t.me + d) % n, nothing, 0);
        d *= 2;
    }
}

// ------------------------------------------------------------------------------------ broadcast

/// Binomial tree: receive from the parent, then send to every child at once. Typed transfers
/// (the engine handles derived datatypes).
pub(crate) fn bcast_binomial(
    b: &mut B,
    t: &Team,
    root: i32,
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
) {
    let n = t.size;
    if n == 1 {
        return;
    }
    let (vr, real) = rooted(t, root);
    let low = low_bit(vr, n);
    b.fence();
    if vr != 0 {
        b.recv(t, real(vr - low), buf, count, dt);
        b.fence();
    }
    let mut m = low / 2;
    while m > 0 {
        if vr + m < n {
            b.send(t, real(vr + m), buf, count, dt);
        }
        m /= 2;
    }
}

/// Byte range of chunks `[a, b)` when `nb` bytes are cut into chunks of `chunk` bytes.
fn chunk_range(a: i32, z: i32, chunk: usize, nb: usize) -> (usize, usize) {
    let lo = (a as usize * chunk).min(nb);
    let hi = (z as usize * chunk).min(nb);
    (lo, hi - lo)
}

/// Van de Geijn: binomial scatter of `n` chunks of the packed buffer, then a ring allgather of
/// the chunks. Bandwidth-optimal for large messages.
pub(crate) fn bcast_scatter_ring(b: &mut B, t: &Team, root: i32, p: *mut u8, nb: usize) {
    let n = t.size;
    if n == 1 {
        return;
    }
    let (vr, real) = rooted(t, root);
    let chunk = nb.div_ceil(n as usize).max(1);
    let low = low_bit(vr, n);
    b.fence();
    if vr != 0 {
        let (off, len) = chunk_range(vr, (vr + low).min(n), chunk, nb);
        // SAFETY (pointer arithmetic): offsets stay within the nb bytes of the buffer.
        b.recv_bytes(t, real(vr - low), p.wrapping_add(off), len);
        b.fence();
    }
    let mut m = low / 2;
    while m > 0 {
        if vr + m < n {
            let (off, len) = chunk_range(vr + m, (vr + 2 * m).min(n), chunk, nb);
            b.send_bytes(t, real(vr + m), p.wrapping_add(off), len);
        }
        m /= 2;
    }
    b.fence();
    let right = real((vr + 1) % n);
    let left = real((vr - 1 + n) % n);
    for k in 0..n - 1 {
        let sc = (vr - k + n) % n;
        let rc = (vr - k - 1 + 2 * n) % n;
        let (so, sl) = chunk_range(sc, sc + 1, chunk, nb);
        let (ro, rl) = chunk_range(rc, rc + 1, chunk, nb);
        b.send_bytes(t, right, p.wrapping_add(so), sl);
        b.recv_bytes(t, left, p.wrapping_add(ro), rl);
        b.fence();
    }
}

// ------------------------------------------------------------------------------------ gather

/// Binomial gather of `bsz`-byte blocks: every node collects its subtree's blocks (in virtual
/// rank order) and forwards them; the root unpacks them into place with `unpack_block`.
/// `own` packs this process's block into a buffer (None at an in-place root). Leaves send
/// their data as it is (`leaf_send`).
pub(crate) struct GatherArgs<'a> {
    pub bsz: usize,
    /// This process's contribution: `(ptr, count, dt)`, None for an in-place root.
    pub own: Option<(*const u8, usize, &'a Datatype)>,
    /// At the root: where block of real rank r goes `(ptr, count, dt)`.
    pub slot: Option<&'a dyn Fn(i32) -> Blk>,
}

pub(crate) fn gather_binomial(b: &mut B, t: &Team, root: i32, a: GatherArgs<'_>) {
    let n = t.size;
    let (vr, real) = rooted(t, root);
    let low = low_bit(vr, n);
    let sub = low.min(n - vr);
    let bsz = a.bsz;
    if vr != 0 && sub == 1 {
        if let Some((p, c, dt)) = a.own {
            b.send(t, real(vr - low), p, c, dt);
        }
        return;
    }
    let tmp = b.tmp(sub as usize * bsz);
    if let Some((p, c, dt)) = a.own {
        b.pack(p, c, dt, tmp);
    }
    b.fence();
    let mut m = 1;
    while m < low && vr + m < n {
        let cs = m.min(n - vr - m);
        b.recv_bytes(
            t,
            real(vr + m),
            tmp.wrapping_add(m as usize * bsz),
            cs as usize * bsz,
        );
        m *= 2;
    }
    b.fence();
    if vr != 0 {
        b.send_bytes(t, real(vr - low), tmp, sub as usize * bsz);
        return;
    }
    if let Some(slot) = a.slot {
        for j in 0..n {
            if j == 0 && a.own.is_none() {
                continue;
            }
            let (p, c, dt) = slot(real(j));
            // Blocks are as long as the senders' (`bsz`): a shorter receive block is a
            // truncation, never a read past the scratch buffer.
            b.unpack_from(tmp.wrapping_add(j as usize * bsz), bsz, p, c, &dt);
        }
    }
}

/// Binomial scatter of `bsz`-byte blocks from the root (reverse of [`gather_binomial`]).
pub(crate) struct ScatterArgs<'a> {
    pub bsz: usize,
    /// At the root: the block of real rank r `(ptr, count, dt)`.
    pub slot: Option<&'a dyn Fn(i32) -> Blk>,
    /// This process's destination, None for an in-place root.
    pub own: Option<(*mut u8, usize, &'a Datatype)>,
}

pub(crate) fn scatter_binomial(b: &mut B, t: &Team, root: i32, a: ScatterArgs<'_>) {
    let n = t.size;
    let (vr, real) = rooted(t, root);
    let low = low_bit(vr, n);
    let sub = low.min(n - vr);
    let bsz = a.bsz;
    if vr != 0 && sub == 1 {
        if let Some((p, c, dt)) = a.own {
            b.recv(t, real(vr - low), p, c, dt);
        }
        return;
    }
    let tmp = b.tmp(sub as usize * bsz);
    if vr == 0 {
        if let Some(slot) = a.slot {
            for j in 0..n {
                let (p, c, dt) = slot(real(j));
                b.pack(p, c, &dt, tmp.wrapping_add(j as usize * bsz));
            }
        }
    } else {
        b.fence();
        b.recv_bytes(t, real(vr - low), tmp, sub as usize * bsz);
    }
    b.fence();
    let mut m = low / 2;
    while m > 0 {
        if vr + m < n {
            let cs = m.min(n - vr - m);
            b.send_bytes(
                t,
                real(vr + m),
                tmp.wrapping_add(m as usize * bsz),
                cs as usize * bsz,
            );
        }
        m /= 2;
    }
    if let Some((p, c, dt)) = a.own {
        b.unpack_from(tmp, bsz, p, c, dt);
    }
}

// ------------------------------------------------------------------------------------ allgather

/// Bruck: ⌈log2 n⌉ rounds for any n; block `j` of the scratch buffer ends up holding the data
/// of rank `me + j`. `own` is this process's packed block source; `slot(r)` its place in the
/// result.
pub(crate) fn allgather_bruck(
    b: &mut B,
    t: &Team,
    bsz: usize,
    own: (*const u8, usize, &Datatype),
    slot: &dyn Fn(i32) -> (*mut u8, usize, Datatype),
    skip_own: bool,
) {
    let n = t.size;
    let me = t.me;
    let tmp = b.tmp(n as usize * bsz);
    b.pack(own.0, own.1, own.2, tmp);
    let mut d = 1;
    while d < n {
        let cnt = d.min(n - d);
        b.fence();
        b.send_bytes(t, (me - d + n) % n, tmp, cnt as usize * bsz);
        b.recv_bytes(
            t,
            (me + d) % n,
            tmp.wrapping_add(d as usize * bsz),
            cnt as usize * bsz,
        );
        d *= 2;
    }
    for j in 0..n {
        if j == 0 && skip_own {
            continue;
        }
        let (p, c, dt) = slot((me + j) % n);
        // Blocks are as long as this process's own (`bsz`, what the others send when the
        // counts agree): a shorter receive block is a truncation, a longer one gets what came.
        b.unpack_from(tmp.wrapping_add(j as usize * bsz), bsz, p, c, &dt);
    }
}

/// Ring: n-1 rounds, block `me - k` passed to the right in round k; typed transfers straight
/// between the slots of the result. `slot(r)` is the block of rank r (any counts: allgatherv).
/// `own`: where round 0 sends this process's block from, when not from its slot: the caller's
/// send buffer. A block a neighbour has just read over shared memory (a single-copy get reads
/// it from the other core) is shared in that core's cache, and writing it again (the next
/// call's copy of the own block into the result) pays an ownership request per cache line: a
/// 1 MiB copy took ten times as long. The send buffer is only ever read.
pub(crate) fn allgather_ring(
    b: &mut B,
    t: &Team,
    slot: &dyn Fn(i32) -> (*mut u8, usize, Datatype),
    own: Option<(*const u8, usize, &Datatype)>,
) {
    let n = t.size;
    let me = t.me;
    let right = (me + 1) % n;
    let left = (me - 1 + n) % n;
    for k in 0..n - 1 {
        let sb = (me - k + n) % n;
        let rb = (me - k - 1 + 2 * n) % n;
        let (sp, sc, sdt) = slot(sb);
        let (rp, rc, rdt) = slot(rb);
        b.fence();
        match own {
            Some((p, c, dt)) if k == 0 => b.send(t, right, p, c, dt),
            _ => b.send(t, right, sp, sc, &sdt),
        }
        b.recv(t, left, rp, rc, &rdt);
    }
}

// ------------------------------------------------------------------------------------ alltoall

/// A block of data: pointer, count, datatype.
pub(crate) type Blk = (*mut u8, usize, Datatype);

/// Every exchange posted at once (small and medium blocks).
pub(crate) fn alltoall_linear(
    b: &mut B,
    t: &Team,
    sblk: &dyn Fn(i32) -> Blk,
    rblk: &dyn Fn(i32) -> Blk,
) {
    let n = t.size;
    let me = t.me;
    b.fence();
    for k in 1..n {
        let src = (me - k + n) % n;
        let (p, c, dt) = rblk(src);
        b.recv(t, src, p, c, &dt);
    }
    for k in 1..n {
        let dst = (me + k) % n;
        let (p, c, dt) = sblk(dst);
        b.send(t, dst, p, c, &dt);
    }
}

/// Pairwise exchange: in round k, send to `me + k` and receive from `me - k` (large blocks:
/// one exchange in flight per process, no congestion at any receiver).
pub(crate) fn alltoall_pairwise(
    b: &mut B,
    t: &Team,
    sblk: &dyn Fn(i32) -> Blk,
    rblk: &dyn Fn(i32) -> Blk,
) {
    let n = t.size;
    let me = t.me;
    for k in 1..n {
        let dst = (me + k) % n;
        let src = (me - k + n) % n;
        let (sp, sc, sdt) = sblk(dst);
        let (rp, rc, rdt) = rblk(src);
        b.fence();
        b.send(t, dst, sp, sc, &sdt);
        b.recv(t, src, rp, rc, &rdt);
    }
}

// ------------------------------------------------------------------------------------ reductions

/// Two buffers that take turns holding the accumulator: the one not holding it receives the
/// next operand.
struct Juggle {
    acc: *mut u8,
    bufs: [*mut u8; 2],
}

impl Juggle {
    fn spare(&self) -> *mut u8 {
        if self.bufs[0] != self.acc {
            self.bufs[0]
        } else {
            self.bufs[1]
        }
    }
}

/// Binomial reduction to `root`. Commutative operations use the tree rooted at the root;
/// non-commutative ones the tree rooted at 0 (whose subtrees are rank intervals, combined in
/// order), then rank 0 sends the result to the root. `rp` is significant at the root only.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_binomial(
    b: &mut B,
    t: &Team,
    root: i32,
    sp: *const u8,
    rp: *mut u8,
    count: usize,
    esz: usize,
    commutative: bool,
) {
    let n = t.size;
    let me = t.me;
    let nb = count * esz;
    let troot = if commutative { root } else { 0 };
    let (vr, real) = rooted(t, troot);
    let low = low_bit(vr, n);
    let final_here = vr == 0 && me == root;
    let has_children = vr + 1 < n && low > 1;
    let mut acc = sp as *mut u8;
    if has_children {
        let other = if final_here { rp } else { b.tmp(nb) };
        let mut j = Juggle {
            acc,
            bufs: [b.tmp(nb), other],
        };
        // Child k (from 1) lands in bufs[(k - 1) % 2]: order the buffers so that the last one
        // lands in `other` (the root's `rp`), saving a copy when possible.
        let kids = {
            let mut k = 0;
            let mut m = 1;
            while m < low && vr + m < n {
                k += 1;
                m *= 2;
            }
            k
        };
        if kids % 2 == 1 {
            j.bufs.swap(0, 1);
        }
        let mut m = 1;
        while m < low && vr + m < n {
            let x = j.spare();
            b.fence();
            b.recv_bytes(t, real(vr + m), x, nb);
            // The child's subtree holds higher ranks: acc op child, into the child's buffer.
            b.reduce(j.acc, x, count);
            j.acc = x;
            m *= 2;
        }
        acc = j.acc;
    }
    b.fence();
    if vr != 0 {
        b.send_bytes(t, real(vr - low), acc, nb);
    } else if me == root {
        b.copy(acc, rp, nb);
    }
    if !commutative && root != 0 {
        b.fence();
        if me == 0 {
            b.send_bytes(t, root, acc, nb);
        } else if me == root {
            b.recv_bytes(t, 0, rp, nb);
        }
    }
}

/// Block `i` of `count` elements cut into `parts` blocks: `(first element, elements)`.
pub(crate) fn block(count: usize, parts: usize, i: usize) -> (usize, usize) {
    let q = count / parts;
    let r = count % parts;
    (i * q + i.min(r), q + usize::from(i < r))
}

/// Fold the processes beyond the largest power of two into their neighbours (the first
/// `2 * rem` ranks pair up, the even one hands its data to the odd one): returns this
/// process's rank among the `p2` remaining ones, or None if it was folded away. `acc` must be
/// writable; `tmp` receives.
fn fold(b: &mut B, t: &Team, acc: *mut u8, tmp: *mut u8, count: usize, nb: usize) -> Option<i32> {
    let n = t.size;
    let me = t.me;
    let p2 = pof2_floor(n);
    let rem = n - p2;
    b.fence();
    if me < 2 * rem {
        if me % 2 == 0 {
            b.send_bytes(t, me + 1, acc, nb);
            None
        } else {
            b.recv_bytes(t, me - 1, tmp, nb);
            // The lower rank's data is the left operand.
            b.reduce(tmp, acc, count);
            Some(me / 2)
        }
    } else {
        Some(me - rem)
    }
}

/// A scratch buffer for [`fold`] and [`reduce_scatter_halving`]: the whole vector when some
/// processes fold, else the largest half a round that reads from `acc` receives (half of the
/// vector when the first round does, a quarter when it reads `src`; none for two processes
/// then). Every call allocates (and zeroes) it, so it is no larger than it must be.
fn halving_tmp(b: &mut B, n: i32, from_src: bool, count: usize, esz: usize) -> *mut u8 {
    let p2 = pof2_floor(n);
    let blocks = if n > p2 {
        return b.tmp(count * esz);
    } else if from_src {
        p2 / 4
    } else {
        p2 / 2
    };
    if blocks == 0 {
        return std::ptr::null_mut();
    }
    b.tmp(blocks as usize * count.div_ceil(p2 as usize) * esz)
}

/// Rank of a folded rank.
fn unfolded(nr: i32, rem: i32) -> i32 {
    if nr < rem {
        nr * 2 + 1
    } else {
        nr + rem
    }
}

/// Recursive-halving reduce-scatter among the `p2` ranks left by [`fold`] (commutative
/// operations): afterwards this process holds the full reduction of block `nr` of `acc`.
/// `src`: this process's contribution, read by the first round only; when it is not `acc`,
/// that round sends from `src`, receives the partner's half straight into `acc` and combines
/// `src`'s half into it (no copy of the contribution into `acc` first, no `tmp`). The other
/// rounds receive into the start of `tmp` (see [`halving_tmp`]).
#[allow(clippy::too_many_arguments)]
fn reduce_scatter_halving(
    b: &mut B,
    t: &Team,
    nr: i32,
    src: *const u8,
    acc: *mut u8,
    tmp: *mut u8,
    count: usize,
    esz: usize,
    p2: i32,
) {
    let mut from = src;
    let rem = t.size - p2;
    let (mut lo, mut hi) = (0usize, p2 as usize);
    let mut mask = p2 / 2;
    while mask > 0 {
        let partner = unfolded(nr ^ mask, rem);
        let mid = lo + (hi - lo) / 2;
        let (keep, give) = if nr & mask == 0 {
            ((lo, mid), (mid, hi))
        } else {
            ((mid, hi), (lo, mid))
        };
        let (ks, _) = block(count, p2 as usize, keep.0);
        let ke = if keep.1 == p2 as usize {
            count
        } else {
            block(count, p2 as usize, keep.1).0
        };
        let (gs, _) = block(count, p2 as usize, give.0);
        let ge = if give.1 == p2 as usize {
            count
        } else {
            block(count, p2 as usize, give.1).0
        };
        b.fence();
        b.send_bytes(t, partner, from.wrapping_add(gs * esz), (ge - gs) * esz);
        let (ka, kl) = (acc.wrapping_add(ks * esz), (ke - ks) * esz);
        if std::ptr::eq(from, acc) {
            b.recv_bytes(t, partner, tmp, kl);
            b.reduce(tmp, ka, ke - ks);
        } else {
            b.recv_bytes(t, partner, ka, kl);
            b.reduce(from.wrapping_add(ks * esz), ka, ke - ks);
        }
        from = acc;
        (lo, hi) = keep;
        mask /= 2;
    }
}

/// Allreduce by recursive doubling (any operation; order-preserving): ⌈log2 n⌉ exchanges of
/// the whole vector, plus one before and after for the ranks beyond the power of two.
pub(crate) fn allreduce_doubling(
    b: &mut B,
    t: &Team,
    sp: *const u8,
    rp: *mut u8,
    count: usize,
    esz: usize,
) {
    let n = t.size;
    let me = t.me;
    let nb = count * esz;
    b.copy(sp, rp, nb);
    if n == 1 {
        return;
    }
    let p2 = pof2_floor(n);
    let rem = n - p2;
    let tmp = b.tmp(nb);
    let mut j = Juggle {
        acc: rp,
        bufs: [rp, tmp],
    };
    let nr = fold(b, t, rp, tmp, count, nb);
    if let Some(nr) = nr {
        let mut mask = 1;
        while mask < p2 {
            let pn = nr ^ mask;
            let partner = unfolded(pn, rem);
            let x = j.spare();
            b.fence();
            b.send_bytes(t, partner, j.acc, nb);
            b.recv_bytes(t, partner, x, nb);
            if pn < nr {
                b.reduce(x, j.acc, count);
            } else {
                b.reduce(j.acc, x, count);
                j.acc = x;
            }
            mask *= 2;
        }
    }
    b.fence();
    if me < 2 * rem {
        if me % 2 == 1 {
            b.send_bytes(t, me - 1, j.acc, nb);
        } else {
            b.recv_bytes(t, me + 1, rp, nb);
        }
    }
    if j.acc != rp {
        b.copy(j.acc, rp, nb);
    }
}

/// Rabenseifner's allreduce (commutative operations, `count ≥ p2`): recursive-halving
/// reduce-scatter, then recursive-doubling allgather; about 2·n bytes moved per process
/// whatever the number of processes.
pub(crate) fn allreduce_rabenseifner(
    b: &mut B,
    t: &Team,
    sp: *const u8,
    rp: *mut u8,
    count: usize,
    esz: usize,
) {
    let n = t.size;
    let me = t.me;
    let nb = count * esz;
    let p2 = pof2_floor(n);
    let rem = n - p2;
    // A power of two reads its contribution where it is (`reduce_scatter_halving`); the others
    // copy it into the result first, which the fold combines into.
    let src = if rem == 0 && n > 1 && !std::ptr::eq(sp, rp) {
        sp
    } else {
        b.copy(sp, rp, nb);
        rp
    };
    if n == 1 {
        return;
    }
    let tmp = halving_tmp(b, n, !std::ptr::eq(src, rp), count, esz);
    if let Some(nr) = fold(b, t, rp, tmp, count, nb) {
        reduce_scatter_halving(b, t, nr, src, rp, tmp, count, esz, p2);
        let (mut lo, mut hi) = (nr as usize, nr as usize + 1);
        let mut mask = 1;
        let at = |i: usize| {
            if i == p2 as usize {
                count
            } else {
                block(count, p2 as usize, i).0
            }
        };
        while mask < p2 {
            let partner = unfolded(nr ^ mask, rem);
            let w = hi - lo;
            let (plo, phi) = if nr & mask == 0 {
                (hi, hi + w)
            } else {
                (lo - w, lo)
            };
            b.fence();
            b.send_bytes(
                t,
                partner,
                rp.wrapping_add(at(lo) * esz),
                (at(hi) - at(lo)) * esz,
            );
            b.recv_bytes(
                t,
                partner,
                rp.wrapping_add(at(plo) * esz),
                (at(phi) - at(plo)) * esz,
            );
            lo = lo.min(plo);
            hi = hi.max(phi);
            mask *= 2;
        }
    }
    b.fence();
    if me < 2 * rem {
        if me % 2 == 1 {
            b.send_bytes(t, me - 1, rp, nb);
        } else {
            b.recv_bytes(t, me + 1, rp, nb);
        }
    }
}

/// Allreduce in two rounds whatever the number of processes (commutative operations, `count ≥
/// n`): the vector is cut into `n` blocks and process `i` combines block `i`. Round 1: every
/// process sends each other one its block and receives block `me` from all, all at once, then
/// combines them; round 2: it sends its combined block to all and receives theirs. Each
/// process moves `2 (n − 1) / n` of the vector and combines `(n − 1) / n` of it, as in
/// Rabenseifner's algorithm on a power of two, but in two rounds instead of `2 log2 n` and
/// without a fold for other counts: with more processes than free CPUs, every round waits
/// for the partners that are not running, and here a round's transfers complete in whatever
/// order the partners come. One partner's part of block `me` is received straight into the
/// result (unless in place), the others' into scratch.
pub(crate) fn allreduce_linear(
    b: &mut B,
    t: &Team,
    sp: *const u8,
    rp: *mut u8,
    count: usize,
    esz: usize,
) {
    let n = t.size as usize;
    let me = t.me as usize;
    let nb = count * esz;
    if n == 1 {
        b.copy(sp, rp, nb);
        return;
    }
    let in_place = std::ptr::eq(sp, rp);
    let (ms, mc) = block(count, n, me);
    let (mine, ml) = (rp.wrapping_add(ms * esz), mc * esz);
    // Scratch for the parts of block `me` that do not land in the result: n − 1 of them in
    // place (the result holds the own part), else n − 2.
    let slots = if in_place { n - 1 } else { n - 2 };
    let tmp = if slots > 0 {
        b.tmp(slots * ml)
    } else {
        std::ptr::null_mut()
    };
    b.fence();
    let mut slot = 0;
    for k in 1..n {
        let j = (me + k) % n;
        let (js, jc) = block(count, n, j);
        b.send_bytes(t, j as i32, sp.wrapping_add(js * esz), jc * esz);
        let from = (me + n - k) % n;
        if k == 1 && !in_place {
            b.recv_bytes(t, from as i32, mine, ml);
        } else {
            b.recv_bytes(t, from as i32, tmp.wrapping_add(slot * ml), ml);
            slot += 1;
        }
    }
    if !in_place {
        b.reduce(sp.wrapping_add(ms * esz), mine, mc);
    }
    for s in 0..slots {
        b.reduce(tmp.wrapping_add(s * ml), mine, mc);
    }
    b.fence();
    for k in 1..n {
        let j = (me + k) % n;
        b.send_bytes(t, j as i32, mine, ml);
        let from = (me + n - k) % n;
        let (fs, fc) = block(count, n, from);
        b.recv_bytes(t, from as i32, rp.wrapping_add(fs * esz), fc * esz);
    }
}

/// Reduce to `root` by reduce-scatter (recursive halving) and a gather of the blocks at the
/// root (commutative operations, `count ≥ p2`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_rabenseifner(
    b: &mut B,
    t: &Team,
    root: i32,
    sp: *const u8,
    rp: *mut u8,
    count: usize,
    esz: usize,
) {
    let n = t.size;
    let me = t.me;
    let nb = count * esz;
    let p2 = pof2_floor(n);
    let rem = n - p2;
    let acc = b.tmp(nb);
    // As in `allreduce_rabenseifner`: a power of two reads its contribution where it is.
    let src = if rem == 0 && n > 1 {
        sp
    } else {
        b.copy(sp, acc, nb);
        acc
    };
    let tmp = halving_tmp(b, n, !std::ptr::eq(src, acc), count, esz);
    let nr = fold(b, t, acc, tmp, count, nb);
    if let Some(nr) = nr {
        reduce_scatter_halving(b, t, nr, src, acc, tmp, count, esz, p2);
    }
    b.fence();
    if let Some(nr) = nr {
        let (s, c) = block(count, p2 as usize, nr as usize);
        if me == root {
            b.copy(acc.wrapping_add(s * esz), rp.wrapping_add(s * esz), c * esz);
        } else {
            b.send_bytes(t, root, acc.wrapping_add(s * esz), c * esz);
        }
    }
    if me == root {
        for q in 0..p2 {
            let r = unfolded(q, rem);
            if r == me {
                continue;
            }
            let (s, c) = block(count, p2 as usize, q as usize);
            b.recv_bytes(t, r, rp.wrapping_add(s * esz), c * esz);
        }
    }
}

/// Reduce-scatter by pairwise exchange (commutative operations): in round k, send the block of
/// `me + k` to it and combine the block received from `me - k` into this process's result.
/// `blocks[i]` = (first element, elements) of rank i's block in the input `sp`.
pub(crate) fn reduce_scatter_pairwise(
    b: &mut B,
    t: &Team,
    sp: *const u8,
    rp: *mut u8,
    blocks: &[(usize, usize)],
    esz: usize,
) {
    let n = t.size;
    let me = t.me;
    let (ms, mc) = blocks[me as usize];
    b.copy(sp.wrapping_add(ms * esz), rp, mc * esz);
    let tmp = b.tmp(mc * esz);
    for k in 1..n {
        let dst = (me + k) % n;
        let src = (me - k + n) % n;
        let (ds, dc) = blocks[dst as usize];
        b.fence();
        b.send_bytes(t, dst, sp.wrapping_add(ds * esz), dc * esz);
        b.recv_bytes(t, src, tmp, mc * esz);
        b.reduce(tmp, rp, mc);
    }
}

/// Inclusive (`exclusive == false`) or exclusive prefix reduction by recursive doubling; any
/// operation and size. `rp` receives the result (undefined at rank 0 for an exclusive scan).
pub(crate) fn scan_doubling(
    b: &mut B,
    t: &Team,
    sp: *const u8,
    rp: *mut u8,
    count: usize,
    esz: usize,
    exclusive: bool,
) {
    let n = t.size;
    let me = t.me;
    let nb = count * esz;
    let mut partial = b.tmp(nb);
    let mut spare = b.tmp(nb);
    b.copy(sp, partial, nb);
    if !exclusive {
        b.copy(sp, rp, nb);
    }
    let mut have = !exclusive;
    let mut mask = 1;
    while mask < n {
        let partner = me ^ mask;
        mask *= 2;
        if partner >= n {
            continue;
        }
        b.fence();
        b.send_bytes(t, partner, partial, nb);
        b.recv_bytes(t, partner, spare, nb);
        if partner < me {
            if have {
                b.reduce(spare, rp, count);
            } else {
                b.copy(spare, rp, nb);
                have = true;
            }
            b.reduce(spare, partial, count);
        } else {
            b.reduce(partial, spare, count);
            std::mem::swap(&mut partial, &mut spare);
        }
    }
}
