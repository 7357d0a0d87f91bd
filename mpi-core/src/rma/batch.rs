//! Untracked operations: puts and accumulates that bring nothing back and have no request.
//!
//! Such an operation needs no token and no `Track` at its origin: each of its chunks adds one to
//! the target's `pending` count of the window and carries token 0. The target does not answer
//! each chunk: it counts, per origin and window, the untracked chunks it applied while handling
//! one packet (`acks_due`), and answers each count with one `Ack` (token 0, `msg_len` the count,
//! `flags` `ERR_RANGE` if one of them was refused) when the packet is done. The origin takes the
//! count off `pending`. So a batch of small puts that left in one packet costs one answer, and
//! a flush, an unlock, a complete or a fence still waits until every chunk was applied (their
//! wait for `pending` at zero is unchanged). A chunk held back for its turn (another rail) is
//! counted in the packet whose handling applied it.
//!
//! Batches: the fast path of a small put or accumulate (`msg_now`, called by the one-sided
//! fast path when the window is not on the direct path) appends a record (target offset,
//! length, operation, then the data: 16 bytes and the data, where a chunk of its own took a
//! 48-byte header and a 24-byte segment list) to the open batch of its target, straight from
//! the origin buffer: no plan, no datatype, no chunk. A batch is one `Batch` chunk, counted as
//! one untracked chunk from its opening. It is queued (closed) when anything else is queued to
//! that target (an operation of the general path, a synchronisation chunk, any chunk: so the
//! one-sided operations and synchronisations reach a target in call order), when its gate is
//! scheduled (any progress: every wait of a flush, unlock, complete or fence), when the next
//! operation is for another window or does not fit (`BATCH_MAX`). The target applies its
//! records in order, each whole under the engine lock as a chunk is, and counts the batch.

use super::wire::{self, Sub};
use super::WinId;
use crate::engine::State;
use crate::error::{Error, ErrorClass};
use crate::wire::{Header, Kind};

/// Untracked chunks applied for one origin's window, to be answered with one count.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AckDue {
    /// The origin's world rank.
    peer: u32,
    /// The origin's number of the window (where the answer goes) and this process's rank in
    /// it.
    reply_to: u32,
    me: i32,
    count: u64,
    flags: u8,
}

impl State {
    /// An untracked chunk from `peer` for its window `reply_to` (this process being rank `me`
    /// of it) was applied (`refused`: its target memory was not in the window).
    pub(super) fn rma_defer_ack(&mut self, peer: u32, reply_to: u32, me: i32, refused: bool) {
        let flags = if refused { wire::ERR_RANGE } else { 0 };
        let due = &mut self.rma.acks_due;
        match due
            .iter_mut()
            .find(|a| a.peer == peer && a.reply_to == reply_to)
        {
            Some(a) => {
                a.count += 1;
                a.flags |= flags;
            }
            None => due.push(AckDue {
                peer,
                reply_to,
                me,
                count: 1,
                flags,
            }),
        }
    }

    /// Answer the counts of untracked chunks applied (the end of a packet's handling).
    #[inline(never)]
    pub(crate) fn rma_send_acks(&mut self) {
        let due = std::mem::take(&mut self.rma.acks_due);
        for a in &due {
            let hdr = Header {
                kind: Kind::Rma as u8,
                flags: a.flags,
                ctx: a.reply_to,
                src: a.me,
                tag: Sub::Ack as i32,
                msg_len: a.count,
                ..Default::default()
            };
            self.queue_owned(a.peer, hdr, Vec::new());
        }
        // (Kept for the next packet: no allocation once it has grown.)
        let mut due = due;
        due.clear();
        if self.rma.acks_due.is_empty() {
            self.rma.acks_due = due;
        }
    }

    /// The answer to untracked chunks: `h.msg_len` of them to target `h.src` of this process's
    /// window `h.ctx` were applied.
    pub(super) fn rma_counted(&mut self, peer: u32, h: Header) {
        let ok = match self.rma.wins.get_mut(h.ctx as usize) {
            Some(Some(w)) if h.src >= 0 && w.world.get(h.src as usize) == Some(&peer) => {
                let p = &mut w.pending[h.src as usize];
                *p = p.saturating_sub(h.msg_len.min(u32::MAX as u64) as u32);
                if h.flags == wire::ERR_RANGE && w.error.is_none() {
                    w.error = Some(Error::new(
                        ErrorClass::RmaRange,
                        format!(
                            "target {} refused an operation: its target memory is not (all) in \
                             the window",
                            h.src
                        ),
                    ));
                }
                true
            }
            _ => false,
        };
        if !ok {
            self.peer_error(format!(
                "from rank {peer}: an answer for an unknown window {}",
                h.ctx
            ));
        }
    }

    /// A small put (`sub` `Put`) or accumulate (`Acc`, `aux` its operation and type) of the
    /// `n` bytes at `src` to `n` bytes at displacement `disp` of rank `rank`'s part of window
    /// `w`, when the window takes messages and the operation fits a batch: appended to the
    /// target's open batch. `None`, having done nothing, otherwise (or on any check that
    /// fails: the general path then does it or reports the error).
    ///
    /// # Safety
    /// `src` holds `n` bytes.
    // (Not inlined into the fast path's callers: the direct path's code stays as it was.)
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn msg_now(
        &mut self,
        w: WinId,
        src: *const u8,
        n: usize,
        rank: i32,
        disp: i64,
        sub: Sub,
        aux: u64,
    ) -> Option<()> {
        if !self.rma.rdma.wins.is_empty() {
            return None;
        }
        let win = self.rma.wins.get(w.0 as usize)?.as_ref()?;
        let r = usize::try_from(rank).ok()?;
        if win.direct.is_some()
            || win.segment.is_some()
            || win.flavor == super::Flavor::Dynamic
            || r >= win.world.len()
            || n == 0
            || n > REC_MAX
            || !win.may_access(rank)
        {
            return None;
        }
        let peer = &win.peers[r];
        if win.flavor == super::Flavor::Create && peer.pid != 0 {
            // (Cross-memory attach, `cma`.)
            return None;
        }
        let peer_unit = i64::try_from(peer.disp_unit).ok()?;
        let peer_size = peer.size;
        let start = u64::try_from(disp.checked_mul(peer_unit)?).ok()?;
        let world = win.world[r];
        let rec = wire::REC_HEAD + n;
        let (id, me) = (peer.id, win.rank);
        if start.checked_add(n as u64)? > peer.size
            || world == self.me
            || self.peer_dead(world)
            || rec > self.chunk_max(world)
        {
            return None;
        }
        let max = self.chunk_max(world).min(BATCH_MAX);
        let open = &mut self.rma.open;
        let i = match open.iter().position(|o| o.peer == world) {
            Some(i) if open[i].win == w && open[i].buf.len() + rec <= max => i,
            Some(i) => {
                self.rma_close_at(i);
                self.rma_open(world, w, r, id, me)
            }
            None => self.rma_open(world, w, r, id, me),
        };
        let buf = &mut self.rma.open[i].buf;
        buf.reserve(rec);
        // SAFETY: room for `rec` more bytes was reserved; `src` holds `n` (caller).
        unsafe { append(buf, start, src, n, sub, aux) };
        // What the checks above proved, for the next operations to this target (`hot_now`).
        self.rma.hot = Some(Hot {
            win: w.0,
            rank,
            at: i,
            disp_unit: peer_unit,
            size: peer_size,
            max: max.min(buf.capacity()),
        });
        Some(())
    }

    /// [`State::msg_now`] for an operation to the target of the last one, while the batch it
    /// went to is open (`Rma::hot`): only the range and the room are checked, the rest was
    /// proved by that operation's checks and stays true while its batch is open (see [`Hot`]).
    /// Whether it was appended (`false`, having done nothing: take `msg_now`).
    ///
    /// # Safety
    /// `src` holds `n` bytes.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn hot_now(
        &mut self,
        w: WinId,
        src: *const u8,
        n: usize,
        rank: i32,
        disp: i64,
        sub: Sub,
        aux: u64,
    ) -> bool {
        let rma = &mut self.rma;
        let Some(h) = rma.hot else {
            return false;
        };
        // (`n` in 1..=REC_MAX in one comparison.)
        if h.win != w.0 || h.rank != rank || n.wrapping_sub(1) >= REC_MAX {
            return false;
        }
        let Some(start) = disp.checked_mul(h.disp_unit) else {
            return false;
        };
        // (Non-negative `start` is at most `i64::MAX` and `n` at most `REC_MAX`: no overflow.)
        if start < 0 || start as u64 + n as u64 > h.size {
            return false;
        }
        let Some(o) = rma.open.get_mut(h.at) else {
            return false;
        };
        if o.buf.len() + wire::REC_HEAD + n > h.max {
            return false;
        }
        // SAFETY: `h.max` is at most the buffer's capacity; `src` holds `n` (caller).
        unsafe { append(&mut o.buf, start as u64, src, n, sub, aux) };
        true
    }

    /// Open a batch to world rank `peer` (rank `r` of window `w`, whose number there is `id`;
    /// this process is rank `me` of it): counted as one untracked chunk from now on, and the
    /// gate marked for the next progress, which closes it (`rma_close`). Its index.
    fn rma_open(&mut self, peer: u32, w: WinId, r: usize, id: u32, me: i32) -> usize {
        let hdr = Header {
            kind: Kind::Rma as u8,
            ctx: id,
            src: me,
            tag: Sub::Batch as i32,
            aux: (w.0 as u64) << 32,
            ..Default::default()
        };
        let mut buf = self.owned_buffer(BATCH_MAX);
        buf.clear();
        if let Some(Some(win)) = self.rma.wins.get_mut(w.0 as usize) {
            win.pending[r] += 1;
        }
        self.rma.open.push(Open {
            peer,
            win: w,
            hdr,
            buf,
        });
        self.mark_queued(peer);
        self.rma.open.len() - 1
    }

    /// Queue the open batch at index `i`.
    fn rma_close_at(&mut self, i: usize) {
        self.rma.hot = None;
        let o = self.rma.open.swap_remove(i);
        self.queue_owned(o.peer, o.hdr, o.buf);
    }

    /// Queue the open batch to world rank `peer`, if any: before anything else is queued to
    /// it, and when its gate is scheduled.
    #[inline(never)]
    pub(crate) fn rma_close(&mut self, peer: u32) {
        if let Some(i) = self.rma.open.iter().position(|o| o.peer == peer) {
            self.rma_close_at(i);
        }
    }

    /// World rank `peer` died: its open batch is dropped (its count is cleared with the
    /// window's, `rma_peer_lost`).
    pub(super) fn rma_drop_open(&mut self, peer: u32) {
        self.rma.hot = None;
        self.rma.open.retain(|o| o.peer != peer);
    }
}

/// Append a record (`n` bytes from `src` to target offset `start`) to `buf`.
///
/// # Safety
/// `buf` has room for `REC_HEAD + n` more bytes; `src` holds `n`.
#[inline(always)]
unsafe fn append(buf: &mut Vec<u8>, start: u64, src: *const u8, n: usize, sub: Sub, aux: u64) {
    let len = buf.len();
    // SAFETY: the caller's.
    unsafe {
        let p = buf.as_mut_ptr().add(len);
        wire::write_record_head(p, start, n as u32, sub, aux);
        std::ptr::copy_nonoverlapping(src, p.add(wire::REC_HEAD), n);
        buf.set_len(len + wire::REC_HEAD + n);
    }
}

/// What the checks of the last operation appended to a batch proved (`msg_now`), kept while
/// that batch is open so that the next operations to the same target of the same window check
/// only their range and the batch's room (`hot_now`): the window lives, takes messages and not
/// the direct path, the origin is in an access epoch to `rank`, which is alive and another
/// process. None of that changes while the batch is open: it is counted in the window's
/// pending operations from its opening and its gate is marked, so every call that ends an
/// epoch or frees the window waits for it and the first progress pass of that wait closes
/// the batch (`rma_close`), before the call changes anything; a target that dies drops it
/// (`rma_drop_open`). Closing or dropping any batch clears `hot` (indices in `open` move).
#[derive(Clone, Copy)]
pub(crate) struct Hot {
    win: u32,
    rank: i32,
    /// The batch's index in `Rma::open`.
    at: usize,
    disp_unit: i64,
    /// The target's part, bytes.
    size: u64,
    /// The batch's largest payload (its buffer's capacity at most).
    max: usize,
}

/// Largest batch payload (the gate's largest chunk if smaller).
const BATCH_MAX: usize = 8192;
/// Largest operation a batch takes.
const REC_MAX: usize = 1024;

/// A batch being filled: small puts and accumulates to one target of one window, one record
/// each, sent as one `Batch` chunk.
pub(crate) struct Open {
    peer: u32,
    win: WinId,
    hdr: Header,
    buf: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use madmpi_datatypes::Basic;

    use super::super::wire::{self, Sub};
    use super::super::{op_code, WinId};
    use crate::engine::owned_tests::{dirty, queued, two_ranks, window};
    use crate::engine::State;
    use crate::error::ErrorClass;
    use crate::op::BuiltinOp;
    use crate::wire::{Header, Kind};

    /// Rank 0 of a two-member window over `mem` (world ranks 0 and 1), in a fence epoch.
    fn state(mem: &mut [u8]) -> State {
        let mut st = two_ranks();
        let mut w = window();
        w.base = mem.as_mut_ptr();
        w.size = mem.len();
        w.fence = true;
        w.peers[1].size = 64;
        w.peers[1].disp_unit = 1;
        w.peers[1].id = 5;
        st.rma.wins.push(Some(w));
        st
    }

    /// Window 0 has nothing pending on target 1 any more, and its error to report is `class`.
    fn assert_settled(st: &State, class: ErrorClass) {
        let w = st.rma.wins[0].as_ref().unwrap();
        assert_eq!(w.pending[1], 0);
        assert_eq!(w.error.as_ref().map(|e| e.class), Some(class));
    }

    /// The header of a `Batch` chunk from world rank 1 on window 0 (its number 9 there).
    fn batch_header() -> Header {
        Header {
            kind: Kind::Rma as u8,
            ctx: 0,
            src: 1,
            tag: Sub::Batch as i32,
            aux: 9 << 32,
            ..Default::default()
        }
    }

    fn record(sub: Sub, off: u64, aux: u64, data: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; wire::REC_HEAD];
        // SAFETY: `v` holds the head.
        unsafe { wire::write_record_head(v.as_mut_ptr(), off, data.len() as u32, sub, aux) };
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn records_round_trip_and_reject_garbage() {
        let aux = op_code(BuiltinOp::Sum) as u64 | (Basic::Int64.index() as u64) << 8;
        let mut p = record(Sub::Acc, 1 << 40, aux, &[1, 2, 3, 4, 5, 6, 7, 8]);
        p.extend(record(Sub::Put, 3, 0, &[9]));
        let ((off, len, sub, a, data), rest) = wire::record(&p).unwrap();
        assert_eq!(
            (off, len, sub, a, data),
            (1 << 40, 8, Sub::Acc, aux, &p[16..24])
        );
        let ((off, len, sub, _, data), rest) = wire::record(rest).unwrap();
        assert_eq!(
            (off, len, sub, data, rest.len()),
            (3, 1, Sub::Put, &[9u8][..], 0)
        );
        assert!(wire::record(&p[..23]).is_none(), "truncated data");
        assert!(wire::record(&p[..10]).is_none(), "truncated head");
        let mut bad = record(Sub::Get, 0, 0, &[1]);
        assert!(wire::record(&bad).is_none(), "a get in a batch");
        bad[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(wire::record(&bad).is_none(), "a length past the end");
    }

    /// A batch is applied record by record, in order, and answered by one count (with the
    /// refusal of an operation outside the window); the origin takes the count off its
    /// pending operations and reports the refusal.
    #[test]
    fn a_batch_is_applied_in_order_and_counted_once() {
        let mut mem = vec![0u8; 32];
        let mut st = state(&mut mem);
        let aux = op_code(BuiltinOp::Sum) as u64 | (Basic::Int64.index() as u64) << 8;
        let mut p = record(Sub::Put, 8, 0, &5i64.to_le_bytes());
        p.extend(record(Sub::Acc, 8, aux, &7i64.to_le_bytes()));
        p.extend(record(Sub::Put, 0, 0, b"abc"));
        let h = batch_header();
        st.handle_rma(1, h, &p);
        assert_eq!(i64::from_le_bytes(mem[8..16].try_into().unwrap()), 12);
        assert_eq!(&mem[..3], b"abc");
        let mut refused = record(Sub::Put, 30, 0, &[1, 2, 3, 4]);
        refused.extend(record(Sub::Put, 4, 0, &[4]));
        st.handle_rma(1, h, &refused);
        assert_eq!(mem[4], 4, "the records after a refused one are applied");
        assert_eq!(st.rma.acks_due.len(), 1);
        let a = st.rma.acks_due[0];
        assert_eq!(
            (a.peer, a.reply_to, a.count, a.flags),
            (1, 9, 2, wire::ERR_RANGE)
        );
        st.rma_send_acks();
        assert!(st.rma.acks_due.is_empty());
        let q = queued(&st, 1);
        assert_eq!(q.len(), 1);
        assert_eq!((q[0].tag, q[0].sreq, q[0].msg_len), (Sub::Ack as i32, 0, 2));

        // As the origin: two untracked operations pending on target 1, answered.
        st.rma.wins[0].as_mut().unwrap().pending[1] = 2;
        let ack = Header {
            kind: Kind::Rma as u8,
            flags: wire::ERR_RANGE,
            ctx: 0,
            src: 1,
            tag: Sub::Ack as i32,
            msg_len: 2,
            ..Default::default()
        };
        st.handle_rma(1, ack, &[]);
        assert_settled(&st, ErrorClass::RmaRange);
    }

    /// Put records applied by `target::put_one` (the fast path's copy by size): every size of the
    /// copy (1, 2, 4, 8, 16 bytes, odd sizes, a larger one) lands whole and nowhere else, a put
    /// that ends at the window's last byte is applied, and accumulates between puts keep their
    /// order.
    #[test]
    fn put_records_of_every_size_land_in_place() {
        let mut mem = vec![0u8; 256];
        let mut st = state(&mut mem);
        let aux = op_code(BuiltinOp::Sum) as u64 | (Basic::Int64.index() as u64) << 8;
        let mut p = Vec::new();
        let mut want = vec![0u8; 256];
        let mut at = 0usize;
        for (k, n) in [1usize, 2, 3, 4, 7, 8, 15, 16, 17, 100]
            .into_iter()
            .enumerate()
        {
            let data: Vec<u8> = (0..n).map(|i| (k * 31 + i) as u8 | 1).collect();
            p.extend(record(Sub::Put, at as u64, 0, &data));
            want[at..at + n].copy_from_slice(&data);
            at += n + 1;
        }
        p.extend(record(Sub::Put, 248, 0, &3i64.to_le_bytes()));
        p.extend(record(Sub::Acc, 248, aux, &4i64.to_le_bytes()));
        p.extend(record(Sub::Put, 255, 0, &[9]));
        want[248..256].copy_from_slice(&7i64.to_le_bytes());
        want[255] = 9;
        let h = batch_header();
        st.handle_rma(1, h, &p);
        assert_eq!(mem, want);
        assert_eq!(st.rma.acks_due[0].flags, 0, "nothing refused");
    }

    /// Small puts fill one open batch, which leaves before anything queued after it; a
    /// target that dies drops its open batch and its count.
    #[test]
    fn open_batches_leave_first_and_die_with_their_target() {
        let mut mem = vec![0u8; 8];
        let mut st = state(&mut mem);
        let v = 7u64.to_le_bytes();
        for i in 0..3 {
            // SAFETY: `v` holds 8 bytes.
            let r = unsafe { st.msg_now(WinId(0), v.as_ptr(), 8, 1, 8 * i, Sub::Put, 0) };
            assert!(r.is_some());
        }
        // Out of the target's 64 bytes, and to MPI_PROC_NULL: the general path's.
        // SAFETY: as above.
        assert!(unsafe { st.msg_now(WinId(0), v.as_ptr(), 8, 1, 60, Sub::Put, 0) }.is_none());
        // SAFETY: as above.
        assert!(unsafe { st.msg_now(WinId(0), v.as_ptr(), 8, -1, 0, Sub::Put, 0) }.is_none());
        assert_eq!(st.rma.open.len(), 1);
        assert_eq!(st.rma.open[0].buf.len(), 3 * (wire::REC_HEAD + 8));
        assert_eq!(st.rma.wins[0].as_ref().unwrap().pending[1], 1);
        assert_eq!(dirty(&st), vec![1]);
        // Something else to that target: the batch goes first.
        st.queue_owned(1, Header::default(), Vec::new());
        assert!(st.rma.open.is_empty());
        let q = queued(&st, 1);
        let tags: Vec<i32> = q.iter().map(|h| h.tag).collect();
        assert_eq!(tags, vec![Sub::Batch as i32, 0]);
        assert_eq!(q[0].ctx, 5);

        // SAFETY: as above.
        assert!(unsafe { st.msg_now(WinId(0), v.as_ptr(), 8, 1, 0, Sub::Put, 0) }.is_some());
        assert_eq!(st.rma.wins[0].as_ref().unwrap().pending[1], 2);
        st.peer_lost(1);
        assert!(st.rma.open.is_empty());
        assert!(st.rma.hot.is_none(), "the hot batch dies with its target");
        assert_settled(&st, ErrorClass::ProcAborted);
    }

    /// The hot batch: the next operations to the last target append with their range
    /// checked; another rank, a range outside the part, an operation too large or an empty
    /// one are left to `msg_now`; closing the batch forgets it.
    #[test]
    fn the_hot_batch_takes_the_next_operations_to_its_target() {
        let mut mem = vec![0u8; 8];
        let mut st = state(&mut mem);
        let v = [7u8; 2048];
        let put = |st: &mut State, n: usize, rank: i32, disp: i64| {
            // SAFETY: `v` holds 2048 bytes.
            unsafe { st.hot_now(WinId(0), v.as_ptr(), n, rank, disp, Sub::Put, 0) }
        };
        assert!(!put(&mut st, 8, 1, 0), "nothing hot before a batch opens");
        // SAFETY: as above.
        assert!(unsafe { st.msg_now(WinId(0), v.as_ptr(), 8, 1, 0, Sub::Put, 0) }.is_some());
        assert!(st.rma.hot.is_some());
        assert!(put(&mut st, 8, 1, 8));
        assert!(put(&mut st, 8, 1, 56), "the part's last 8 bytes");
        assert!(!put(&mut st, 8, 1, 57), "past the target's 64 bytes");
        assert!(!put(&mut st, 8, 1, -1), "a negative displacement");
        assert!(!put(&mut st, 8, 0, 0), "another rank");
        assert!(!put(&mut st, 0, 1, 0), "an empty operation");
        assert!(!put(&mut st, 2048, 1, 0), "larger than a batch record");
        assert!(
            !put(&mut st, 8, 1, i64::MAX),
            "a displacement that overflows"
        );
        assert_eq!(st.rma.open[0].buf.len(), 3 * (wire::REC_HEAD + 8));
        assert_eq!(st.rma.wins[0].as_ref().unwrap().pending[1], 1);
        st.rma_close(1);
        assert!(st.rma.hot.is_none());
        assert!(!put(&mut st, 8, 1, 0), "nothing hot once the batch left");
    }
}
