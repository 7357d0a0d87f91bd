//! Context ids: the per-process pool, the agreement of one id over a group (`agree_intra`)
//! and across the two groups of an intercommunicator (`agree_inter`).

use super::*;

// ------------------------------------------------------------------------------------ id pool

/// Context ids per process (the contexts go up to `2 * IDS`, the engine's [`CTX_LIMIT`]).
pub(super) const IDS: usize = CTX_LIMIT as usize / 2;
pub(super) const WORDS: usize = IDS / 64;
/// The context of an MPI_Comm_idup communicator until its agreement completes: beyond the
/// pool, never used by anyone.
pub(super) const PLACEHOLDER_CTX: u32 = 2 * IDS as u32;

/// The priority of an agreement: (parent context, collective tag) — the same on every member,
/// so the lowest one in progress anywhere gets every member's free ids.
pub(super) type Key = (u32, i32);

pub(super) struct Pool {
    free: [u64; WORDS],
    /// Agreements in progress in this process.
    pub(super) active: std::collections::BTreeSet<Key>,
    /// How many non-empty snapshots of `free` agreements of this process hold (taken by
    /// `reserve`, not yet given back by `release`).
    held: usize,
    /// An agreement holds the eager ids (word [`EAGER`] of `free`, offered by an agreement's
    /// first pass: see [`mask_allreduce`]).
    eager_busy: bool,
}

/// The word of the id mask an agreement's first pass offers (ids 0–63, the first three being
/// the predefined communicators'); the other words are the ones agreed on with the priority.
const EAGER: usize = 0;

pub(super) static POOL: Lazy<Mutex<Pool>> = Lazy::new(|| {
    let mut free = [u64::MAX; WORDS];
    // ids 0, 1 and 2: MPI_COMM_WORLD (context 0), MPI_COMM_SELF (context 2) and the
    // sessions' communicator (context 4, `SESSION_COMM`).
    free[0] &= !0b111;
    Mutex::new(Pool {
        free,
        active: Default::default(),
        held: 0,
        eager_busy: false,
    })
});

pub(super) type Mask = [u64; WORDS];

impl Pool {
    /// Take every free id for agreement `key` if it has the priority here; otherwise none (it
    /// will find nothing in common and retry until the one before it is done). Without the
    /// priority, two agreements could take turns holding the ids on different processes and
    /// both retry forever.
    ///
    /// The flag is false when the agreement had the priority and still found no free id while
    /// no other agreement of this process holds any: the process has run out of ids, and the
    /// agreement must fail (everywhere) rather than retry. When another one holds them (it
    /// reserved them before this one, of higher priority, started here), this one retries: the
    /// other finds nothing in common on the processes where this one has the ids, and gives
    /// them back.
    fn reserve(&mut self, key: Key) -> (Mask, bool) {
        if self.active.first().is_some_and(|&k| k != key) {
            return ([0; WORDS], true);
        }
        let mut m = std::mem::replace(&mut self.free, [0; WORDS]);
        // The eager ids stay for the first passes.
        self.free[EAGER] = std::mem::take(&mut m[EAGER]);
        let some = m.iter().any(|&w| w != 0);
        if some {
            self.held += 1;
        }
        (m, some || self.held > 0)
    }

    /// The eager ids, for an agreement's first pass, if no other agreement holds them (then
    /// `true`: give them back with [`Pool::release`] and [`Pool::eager_done`]).
    fn reserve_eager(&mut self) -> (Mask, bool) {
        let mut m = [0; WORDS];
        if self.eager_busy {
            return (m, false);
        }
        self.eager_busy = true;
        m[EAGER] = std::mem::take(&mut self.free[EAGER]);
        (m, true)
    }

    fn eager_done(&mut self) {
        self.eager_busy = false;
    }

    /// Return the ids of `m` except `keep`.
    fn release(&mut self, m: &Mask, keep: &[u32]) {
        if m.iter().enumerate().any(|(i, &w)| i != EAGER && w != 0) {
            self.held -= 1;
        }
        for (f, w) in self.free.iter_mut().zip(m.iter()) {
            *f |= *w;
        }
        for &k in keep {
            self.free[k as usize / 64] &= !(1u64 << (k % 64));
        }
    }

    /// For an agreement over this process alone: the lowest free id, taken; `None` while the
    /// free ones are held by other agreements of this process (they give them back between
    /// their passes); out of ids when none is free or held.
    fn take_one(&mut self) -> Result<Option<u32>> {
        match lowest(&self.free, None) {
            Some(id) => {
                self.free[id as usize / 64] &= !(1u64 << (id % 64));
                Ok(Some(id))
            }
            None if self.held > 0 || self.eager_busy => Ok(None),
            None => Err(out_of_ids()),
        }
    }

    pub(super) fn give_back(&mut self, id: u32) {
        if (id as usize) < IDS {
            self.free[id as usize / 64] |= 1u64 << (id % 64);
        }
    }
}

/// The lowest ids set in `m`, skipping `not`.
pub(super) fn lowest(m: &Mask, not: Option<u32>) -> Option<u32> {
    for (i, &w) in m.iter().enumerate() {
        let mut w = w;
        while w != 0 {
            let b = w.trailing_zeros();
            let id = (i * 64) as u32 + b;
            if Some(id) != not {
                return Some(id);
            }
            w &= w - 1;
        }
    }
    None
}

pub(super) fn and(a: &Mask, b: &Mask) -> Mask {
    let mut r = [0; WORDS];
    for i in 0..WORDS {
        r[i] = a[i] & b[i];
    }
    r
}

pub(super) const MASK_BYTES: usize = WORDS * 8;
/// A mask and the "ids left" word (all ones, or 0 for a process out of ids), ANDed together.
pub(super) const BUF_BYTES: usize = MASK_BYTES + 8;

/// The "ids left" word after a mask.
pub(super) unsafe fn ids_left(p: *const u8) -> bool {
    let mut w = [0u8; 8];
    std::ptr::copy_nonoverlapping(p.add(MASK_BYTES), w.as_mut_ptr(), 8);
    u64::from_ne_bytes(w) != 0
}

pub(super) fn out_of_ids() -> Error {
    Error::new(
        ErrorClass::Other,
        format!("out of context ids: too many communicators in use (at most {IDS} per process)"),
    )
}

pub(super) unsafe fn read_mask(p: *const u8) -> Mask {
    let mut m = [0u64; WORDS];
    std::ptr::copy_nonoverlapping(p, m.as_mut_ptr() as *mut u8, MASK_BYTES);
    m
}

pub(super) unsafe fn write_mask(p: *mut u8, m: &Mask) {
    std::ptr::copy_nonoverlapping(m.as_ptr() as *const u8, p, MASK_BYTES);
}

/// A raw pointer that may move into a step closure (the schedule owns what it points to).
#[derive(Clone, Copy)]
pub(super) struct P(pub(super) *mut u8);
// SAFETY: points into a schedule's scratch buffer, only touched under the engine lock.
unsafe impl Send for P {}

impl P {
    /// The pointer (a method, so that closures capture the whole `Send` wrapper).
    pub(super) fn p(self) -> *mut u8 {
        self.0
    }
}

/// Shared between the steps of one agreement.
#[derive(Default)]
pub(super) struct Agreed {
    snapshot: Option<Mask>,
    key: Key,
    /// Every member has started the agreement (its first pass is over).
    synced: bool,
    /// The snapshot is of the eager ids.
    eager: bool,
}

pub(super) type Cell = Arc<Mutex<Agreed>>;

/// Steps that reserve this process's free ids and AND them over `t` into the returned buffer.
/// Returns (round to jump to for a retry, buffer with the AND).
///
/// The first pass offers only the eager ids (64, held by one agreement of a process at a
/// time; none if another holds them): it usually agrees on one of them, and otherwise tells
/// that every member has started the agreement (the caller finds nothing in common and jumps
/// back). Only then does the agreement take part in the priority among those of this process
/// and hold the other ids. An agreement that held those while waiting for members that had
/// not started it could starve another that they must finish first: a blocking
/// MPI_Comm_create_group on some processes while the others have started an MPI_Comm_idup
/// before it (MPICH's `comm/comm_create_group_idup`; MPICH synchronises the same way, with an
/// eager segment of its mask, before an allocation may hold the rest).
pub(super) fn mask_allreduce(b: &mut B, t: &Team, cell: &Cell) -> (usize, *mut u8) {
    b.op = Some((Op::Builtin(BuiltinOp::Band), Datatype::basic(Basic::UInt64)));
    let key = b.prio.unwrap_or_default();
    cell.lock().key = key;
    b.fence();
    let start = b.round_index();
    let mine = P(b.tmp(BUF_BYTES));
    let all = b.tmp(BUF_BYTES);
    let c = cell.clone();
    b.call(move |_st| {
        let mut g = c.lock();
        let mut p = POOL.lock();
        let (m, left) = if std::mem::replace(&mut g.synced, true) {
            p.active.insert(key);
            p.reserve(key)
        } else {
            let (m, eager) = p.reserve_eager();
            g.eager = eager;
            (m, true)
        };
        drop(p);
        let w = if left { u64::MAX } else { 0 };
        // SAFETY: `mine` is a BUF_BYTES scratch buffer of this schedule.
        unsafe {
            write_mask(mine.p(), &m);
            std::ptr::copy_nonoverlapping(w.to_ne_bytes().as_ptr(), mine.p().add(MASK_BYTES), 8);
        }
        g.snapshot = Some(m);
        Ok(Flow::Next)
    });
    algo::allreduce_doubling(b, t, mine.p(), all, WORDS + 1, 8);
    (start, all)
}

/// Give back the snapshot except the ids kept; `done`: the agreement is over.
pub(super) fn settle(cell: &Cell, keep: &[u32], done: bool) {
    let mut g = cell.lock();
    let mut p = POOL.lock();
    if let Some(m) = g.snapshot.take() {
        p.release(&m, keep);
    }
    if std::mem::take(&mut g.eager) {
        p.eager_done();
    }
    if done {
        p.active.remove(&g.key);
    }
}

/// Agreement on one id over `t`, then `make(st, id)` (run by every member).
pub(super) fn agree_intra(
    b: &mut B,
    t: &Team,
    mut make: impl FnMut(&mut State, u32) -> Result<()> + Send + 'static,
) {
    if t.size == 1 {
        // Over this process alone (MPI_Comm_dup of MPI_COMM_SELF...): there is no one to agree
        // with, so no priority to wait for. Under the priority such an agreement could wait for
        // one of lower key that waits for other processes, which wait for this thread to leave
        // it (MPICH's `threads/comm/comm_create_group_threads`); and its retry, which posts no
        // transfer, looped inside the progress call.
        b.fence();
        b.call(move |st| {
            // The pool's lock is released before `make`, which may take it (a split gives
            // back the ids of the colours this process is not in).
            let got = POOL.lock().take_one()?;
            match got {
                Some(id) => {
                    make(st, id)?;
                    Ok(Flow::Next)
                }
                None => Ok(Flow::Wait),
            }
        });
        return;
    }
    let cell: Cell = Arc::default();
    let (start, all) = mask_allreduce(b, t, &cell);
    let all = P(all);
    b.call(move |st| {
        // SAFETY: `all` is a BUF_BYTES scratch buffer of this schedule.
        let (m, left) = unsafe { (read_mask(all.p()), ids_left(all.p())) };
        if !left {
            settle(&cell, &[], true);
            return Err(out_of_ids());
        }
        match lowest(&m, None) {
            None => {
                settle(&cell, &[], false);
                Ok(Flow::Jump(start))
            }
            Some(id) => {
                settle(&cell, &[id], true);
                make(st, id)?;
                Ok(Flow::Next)
            }
        }
    });
}

// ------------------------------------------------------------------------------------ inter

/// How two group leaders talk.
pub(super) enum Leaders {
    /// On the collective context of an intercommunicator (remote rank 0).
    Coll(Team),
    /// Point to point on a peer communicator with the user's tag (MPI_Intercomm_create).
    User { comm: CommId, peer: i32, tag: i32 },
    /// Over the socket of a port (dynamic processes: `dynamic.rs`), at the leader only. The
    /// leader blocks in the step that exchanges; a broken connection fails the agreement in
    /// both groups (the leader's decision says so).
    Port(super::dynamic::RootConn),
}

/// Agreement across two groups: allreduce of the masks in the local group `lt` (leader: local
/// rank `leader`), exchange of (mask, `payload`) between the leaders, the leader's decision
/// broadcast in the group; then `make(st, x, y, remote_payload)` with `x` common to both
/// groups and `y` (when `need_local`) free in this group.
#[allow(clippy::too_many_arguments)]
pub(super) fn agree_inter_at(
    b: &mut B,
    lt: &Team,
    leader: i32,
    how: Leaders,
    payload: Vec<u8>,
    max_remote: usize,
    need_local: bool,
    mut make: impl FnMut(&mut State, u32, u32, &[u8]) -> Result<()> + Send + 'static,
) {
    let cell: Cell = Arc::default();
    let (start, all) = mask_allreduce(b, lt, &cell);
    let msg_len = BUF_BYTES + 8 + payload.len();
    let cap = BUF_BYTES + 8 + max_remote;
    let out = P(b.tmp(msg_len));
    let inb = P(b.tmp(cap));
    let dec_len = 32 + max_remote;
    let dec = P(b.tmp(dec_len));
    let all = P(all);
    let i_lead = lt.me == leader;
    if i_lead {
        let port = match &how {
            Leaders::Port(c) => Some(c.clone()),
            _ => None,
        };
        let pl = payload.clone();
        b.call(move |_| {
            // SAFETY: `out` holds msg_len bytes; `all` a mask.
            unsafe {
                std::ptr::copy_nonoverlapping(all.p(), out.p(), BUF_BYTES);
                let n = (pl.len() as u64).to_ne_bytes();
                std::ptr::copy_nonoverlapping(n.as_ptr(), out.p().add(BUF_BYTES), 8);
                std::ptr::copy_nonoverlapping(pl.as_ptr(), out.p().add(BUF_BYTES + 8), pl.len());
            }
            Ok(Flow::Next)
        });
        match &how {
            Leaders::Coll(rt) => {
                b.send_bytes(rt, 0, out.p(), msg_len);
                b.recv_bytes(rt, 0, inb.p(), cap);
            }
            Leaders::User { comm, peer, tag } => {
                b.user_xfer(true, *comm, *peer, *tag, out.p(), msg_len);
                b.user_xfer(false, *comm, *peer, *tag, inb.p(), cap);
            }
            Leaders::Port(conn) => {
                let conn = conn.clone();
                b.call(move |_| {
                    // SAFETY: `out` holds msg_len bytes, `inb` cap bytes, both scratch
                    // buffers of this schedule.
                    unsafe { super::dynamic::exchange(&conn, out.p(), msg_len, inb.p(), cap) };
                    Ok(Flow::Next)
                });
            }
        }
        b.call(move |_| {
            // SAFETY: the buffers have the sizes computed above; the peer's payload length
            // is checked against the capacity.
            unsafe {
                let mine = read_mask(all.p());
                let theirs = read_mask(inb.p());
                let left = ids_left(all.p()) && ids_left(inb.p());
                let mut n = [0u8; 8];
                std::ptr::copy_nonoverlapping(inb.p().add(BUF_BYTES), n.as_mut_ptr(), 8);
                let plen = (u64::from_ne_bytes(n) as usize).min(max_remote);
                let both = and(&mine, &theirs);
                let x = lowest(&both, None);
                let ok = x.is_some_and(|x| {
                    !need_local
                        || (lowest(&mine, Some(x)).is_some() && lowest(&theirs, Some(x)).is_some())
                });
                let broke = port.as_ref().is_some_and(|c| c.broken());
                let words: [u64; 4] = match x {
                    // 3: the leaders' connection broke, everyone fails.
                    _ if broke => [3, 0, 0, 0],
                    // 2: a process is out of ids, everyone fails.
                    _ if !left => [2, 0, 0, 0],
                    Some(x) if ok => [
                        1,
                        x as u64,
                        lowest(&mine, Some(x)).unwrap_or(0) as u64,
                        plen as u64,
                    ],
                    _ => [0; 4],
                };
                std::ptr::copy_nonoverlapping(words.as_ptr() as *const u8, dec.p(), 32);
                std::ptr::copy_nonoverlapping(inb.p().add(BUF_BYTES + 8), dec.p().add(32), plen);
            }
            Ok(Flow::Next)
        });
    }
    algo::bcast_binomial(
        b,
        lt,
        leader,
        dec.p(),
        dec_len,
        &crate::coll::sched::bytes(),
    );
    b.call(move |st| {
        // SAFETY: `dec` holds dec_len bytes.
        let (words, rest) = unsafe {
            let mut w = [0u64; 4];
            std::ptr::copy_nonoverlapping(dec.p(), w.as_mut_ptr() as *mut u8, 32);
            let plen = (w[3] as usize).min(max_remote);
            (
                w,
                std::slice::from_raw_parts(dec.p().add(32), plen).to_vec(),
            )
        };
        if words[0] == 0 {
            settle(&cell, &[], false);
            return Ok(Flow::Jump(start));
        }
        if words[0] == 2 {
            settle(&cell, &[], true);
            return Err(out_of_ids());
        }
        if words[0] == 3 {
            settle(&cell, &[], true);
            return err(
                ErrorClass::Other,
                "the connection between the roots of the two groups broke",
            );
        }
        let (x, y) = (words[1] as u32, words[2] as u32);
        let keep = if need_local { vec![x, y] } else { vec![x] };
        settle(&cell, &keep, true);
        make(st, x, y, &rest)?;
        Ok(Flow::Next)
    });
}

pub(super) fn agree_inter(
    b: &mut B,
    lt: &Team,
    how: Leaders,
    payload: Vec<u8>,
    max_remote: usize,
    need_local: bool,
    make: impl FnMut(&mut State, u32, u32, &[u8]) -> Result<()> + Send + 'static,
) {
    agree_inter_at(b, lt, 0, how, payload, max_remote, need_local, make)
}

pub(super) fn ranks_bytes(r: &[u32]) -> Vec<u8> {
    r.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

pub(super) fn bytes_ranks(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_ne_bytes(c.try_into().unwrap_or([0; 4])))
        .collect()
}
#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Pool {
        let mut p = Pool {
            free: [u64::MAX; WORDS],
            active: Default::default(),
            held: 0,
            eager_busy: false,
        };
        p.free[0] &= !0b11;
        p
    }

    #[test]
    fn pool_reserves_and_releases() {
        let mut p = pool();
        p.active.insert((0, 0));
        p.active.insert((0, 1024));
        assert_eq!(lowest(&p.reserve((0, 1024)).0, None), None, "not its turn");
        assert!(p.reserve((0, 1024)).1, "not out of ids either");
        let (m, left) = p.reserve((0, 0));
        assert!(left);
        assert_eq!(lowest(&m, None), Some(64), "the eager ids are not in it");
        assert_eq!(
            lowest(&p.free, None),
            Some(2),
            "only the eager ids are left"
        );
        p.release(&m, &[64]);
        assert_eq!(p.free[1] & 0b11, 0b10);
        let mut other = [0u64; WORDS];
        other[1] = 1 << 5;
        assert_eq!(lowest(&and(&p.free, &other), None), Some(69));
        assert_eq!(lowest(&m, Some(64)), Some(65));
        p.free = [0; WORDS];
        assert!(
            !p.reserve((0, 0)).1,
            "nothing left with the priority, nothing held: out of ids"
        );
    }

    #[test]
    fn eager_ids_go_to_one_first_pass_at_a_time() {
        let mut p = pool();
        let (m, took) = p.reserve_eager();
        assert!(took);
        assert_eq!(lowest(&m, None), Some(2));
        assert_eq!(m[1..], [0; WORDS - 1]);
        let (m2, took2) = p.reserve_eager();
        assert!(!took2);
        assert_eq!(lowest(&m2, None), None);
        // Taking one of them and giving the rest back holds nothing of the rest of the mask.
        p.release(&m, &[2]);
        p.eager_done();
        assert_eq!(p.held, 0);
        assert_eq!(lowest(&p.free, None), Some(3));
        assert!(p.reserve_eager().1);
    }

    /// Two MPI_Comm_idup started in different orders on two processes (MPICH's
    /// `comm_idup_overlap`): here the one of lower priority took every id before the other
    /// started. The other must retry, not report that the ids ran out.
    #[test]
    fn priority_finding_the_ids_held_retries() {
        let mut p = pool();
        p.active.insert((8, 0));
        let (held, _) = p.reserve((8, 0));
        p.active.insert((4, 0));
        let (m, left) = p.reserve((4, 0));
        assert_eq!(lowest(&m, None), None);
        assert!(left, "held by the other agreement: retry");
        // The other finds nothing in common and gives them back; now they are there.
        p.release(&held, &[]);
        p.release(&m, &[]);
        let (m, left) = p.reserve((4, 0));
        assert!(left);
        assert_eq!(lowest(&m, None), Some(64));
    }
}
