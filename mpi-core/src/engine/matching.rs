//! Matching: the per-context queues of posted receives and unexpected messages ([`MatchQ`],
//! [`Unexpected`]), the MPI matching rule (`matches`), the probes (`iprobe`, `improbe`) and the
//! buffers kept for unexpected eager messages.
//!
//! This module never calls a driver and never queues a chunk; it only finds and moves entries of
//! the queues (delivering a match is `recv`'s).

use std::collections::VecDeque;

use super::{check_src_tag, State};
use crate::error::{err, ErrorClass, Result};
use crate::request::{RequestId, Status, PROC_NULL_STATUS};
use crate::wire::{self, Header};
use crate::{CommId, MessageId, ANY_SOURCE, ANY_TAG, PROC_NULL};

/// The communicators' contexts are below this; the communicators' pool of context ids
/// (`comm`) is sized from it.
pub(crate) const CTX_LIMIT: u32 = 8192;
/// Every context a message can name is below this (a peer's chunk naming another is
/// malformed): a communicator's contexts, and their shadows `ctx + CTX_LIMIT`, on which
/// partitioned communication matches (`crate::part`) apart from the user's traffic.
pub(crate) const CTX_WIRE_LIMIT: u32 = 2 * CTX_LIMIT;

/// A message that arrived before its receive was posted (or taken by MPI_Mprobe).
pub(crate) struct Unexpected {
    pub(super) src: i32,
    pub(super) tag: i32,
    pub(super) peer: u32,
    pub(super) msg_len: u64,
    pub(super) sreq: u64,
    pub(super) sync: bool,
    pub(super) body: UBody,
}

impl Unexpected {
    /// Bytes of message data it holds (for the tool interface's queue counters).
    pub(crate) fn held(&self) -> usize {
        match &self.body {
            UBody::Eager(v) => v.len(),
            UBody::Rts { table, prefix, .. } => prefix.len() + table.as_ref().map_or(0, Vec::len),
        }
    }

    /// The message whose chunk header is `h`, from world rank `peer`, with `body`.
    pub(super) fn of(peer: u32, h: &Header, body: UBody) -> Unexpected {
        Unexpected {
            src: h.src,
            tag: h.tag,
            peer,
            msg_len: h.msg_len,
            sreq: h.sreq,
            sync: h.flags & wire::FLAG_SYNC != 0,
            body,
        }
    }
}

pub(super) enum UBody {
    Eager(Vec<u8>),
    /// `table`: the piece table of a zero-copy rendezvous of a sparse type (else the whole
    /// stream is at `addr`).
    Rts {
        addr: u64,
        table: Option<Vec<u8>>,
        /// The sender streams the data (`FLAG_STREAM`): there is nothing to pull.
        stream: bool,
        /// The sender waits for a Fin also after pushing the data (`FLAG_FIN`).
        fin: bool,
        /// The key of the sender's registration of the data (`FLAG_KEY`; else 0).
        key: u64,
        /// The start of the message, sent with the RTS (`FLAG_PREFIX`; else empty).
        prefix: Vec<u8>,
        /// How many bytes of the message the RTS carried (kept in `prefix`, or written by
        /// whoever delivers the RTS): the sender sends the rest.
        start: usize,
    },
}

/// A posted receive: the source and tag it takes, its request.
pub(super) type Posted = (i32, i32, RequestId);

/// The posted receives of a context, oldest first: a `Vec` read from `head` on. Cheaper than a
/// `VecDeque` on the paths every message takes: a push is `Vec::push` inlined (where
/// `VecDeque::push_back` was an out-of-line call), taking the oldest moves `head` and empties
/// the vector when it was the last. The entries before `head` are dropped only when a push
/// finds the vector full, so its capacity grows only with the receives actually posted.
#[derive(Default)]
pub(super) struct PostedQ {
    v: Vec<Posted>,
    head: usize,
}

impl PostedQ {
    #[inline(always)]
    pub(super) fn push_back(&mut self, e: Posted) {
        let n = self.v.len();
        if n == self.v.capacity() {
            self.make_room();
        }
        // SAFETY: there is room for one more entry (made above when the vector was full), and
        // the entries below `n` stay initialised.
        unsafe {
            self.v.as_mut_ptr().add(self.v.len()).write(e);
            self.v.set_len(self.v.len() + 1);
        }
    }

    /// Room for one more entry: the taken ones dropped if there are any, else more capacity.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self) {
        if self.head > 0 {
            self.compact();
        } else {
            self.v.reserve(1);
        }
    }

    #[cold]
    #[inline(never)]
    fn compact(&mut self) {
        self.v.drain(..self.head);
        self.head = 0;
    }

    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        self.head == self.v.len()
    }

    #[inline(always)]
    pub(super) fn front(&self) -> Option<&Posted> {
        self.v.get(self.head)
    }

    #[inline(always)]
    pub(super) fn pop_front(&mut self) -> Option<Posted> {
        let e = *self.v.get(self.head)?;
        self.head += 1;
        if self.head == self.v.len() {
            self.v.clear();
            self.head = 0;
        }
        Some(e)
    }

    /// Take the entry at `pos` (counted from the oldest).
    #[inline(always)]
    pub(super) fn remove(&mut self, pos: usize) -> Option<Posted> {
        if pos == 0 {
            self.pop_front()
        } else {
            self.remove_later(pos)
        }
    }

    #[inline(never)]
    fn remove_later(&mut self, pos: usize) -> Option<Posted> {
        let i = self.head.checked_add(pos).filter(|&i| i < self.v.len())?;
        Some(self.v.remove(i))
    }

    #[inline(always)]
    pub(super) fn iter(&self) -> std::slice::Iter<'_, Posted> {
        self.v[self.head..].iter()
    }

    pub(super) fn iter_mut(&mut self) -> std::slice::IterMut<'_, Posted> {
        self.v[self.head..].iter_mut()
    }

    pub(super) fn retain(&mut self, keep: impl FnMut(&Posted) -> bool) {
        self.compact();
        self.v.retain(keep);
    }
}

impl std::ops::Index<usize> for PostedQ {
    type Output = Posted;
    fn index(&self, pos: usize) -> &Posted {
        &self.v[self.head + pos]
    }
}

#[derive(Default)]
pub(super) struct MatchQ {
    pub(super) posted: PostedQ,
    pub(super) unexpected: VecDeque<Unexpected>,
}

impl MatchQ {
    /// Where the oldest posted receive that takes a message from `src` with `tag` is.
    #[inline(always)]
    pub(super) fn find_posted(&self, src: i32, tag: i32) -> Option<usize> {
        // Usually the oldest one: look at it before searching.
        match self.posted.front() {
            Some(&(s, t, _)) if matches(s, t, src, tag) => Some(0),
            _ => self
                .posted
                .iter()
                .position(|&(s, t, _)| matches(s, t, src, tag)),
        }
    }
}

pub(super) fn matches(want_src: i32, want_tag: i32, src: i32, tag: i32) -> bool {
    (want_src == ANY_SOURCE || want_src == src) && (want_tag == ANY_TAG || want_tag == tag)
}

impl State {
    pub(super) fn mq(&mut self, ctx: u32) -> &mut MatchQ {
        let i = ctx as usize;
        if i >= self.mq.len() {
            self.mq.resize_with(i + 1, MatchQ::default);
        }
        &mut self.mq[i]
    }

    /// The matching queues of a context a peer's message names; `None` for a context no
    /// communicator can have (the queues, indexed by context, never grow for a forged one).
    #[inline(always)]
    pub(super) fn peer_mq(&mut self, ctx: u32) -> Option<&mut MatchQ> {
        if ctx >= CTX_WIRE_LIMIT {
            return None;
        }
        Some(self.mq(ctx))
    }

    #[cold]
    #[inline(never)]
    pub(super) fn bad_context(&mut self, peer: u32, ctx: u32) {
        self.peer_error(format!(
            "from rank {peer}: a message in context {ctx}, which no communicator has"
        ));
    }

    pub fn iprobe(&mut self, src: i32, tag: i32, comm: CommId) -> Result<Option<Status>> {
        let c = self.comm(comm)?;
        check_src_tag(c, src, tag)?;
        if src == PROC_NULL {
            return Ok(Some(PROC_NULL_STATUS));
        }
        let ctx = c.ctx;
        let found = (self.mq(ctx).unexpected.iter())
            .find(|u| matches(src, tag, u.src, u.tag))
            .map(|u| Status {
                source: u.src,
                tag: u.tag,
                error: None,
                bytes: u.msg_len,
                msg_len: u.msg_len,
                cancelled: false,
            });
        if found.is_none() && !self.lost.is_empty() {
            self.probe_lost(comm, src)?;
        }
        Ok(found)
    }

    /// A probe that found nothing fails if only a lost peer could satisfy it (see
    /// `liveness.rs`).
    #[cold]
    fn probe_lost(&self, comm: CommId, src: i32) -> Result<()> {
        let c = self.comm(comm)?;
        match self.lost_source_in(c.peers(), src) {
            Some(p) if src == ANY_SOURCE => err(
                ErrorClass::ProcAborted,
                format!(
                    "no message matches, and world rank {p} of the communicator has died \
                     (MPI_ANY_SOURCE)"
                ),
            ),
            Some(p) => err(
                ErrorClass::ProcAborted,
                format!("rank {src} (world rank {p}) has died"),
            ),
            None => Ok(()),
        }
    }

    pub fn improbe(
        &mut self,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<Option<(MessageId, Status)>> {
        let c = self.comm(comm)?;
        check_src_tag(c, src, tag)?;
        if src == PROC_NULL {
            return Ok(Some((MessageId::NO_PROC, PROC_NULL_STATUS)));
        }
        let ctx = c.ctx;
        let q = self.mq(ctx);
        let Some(pos) = q
            .unexpected
            .iter()
            .position(|u| matches(src, tag, u.src, u.tag))
        else {
            if !self.lost.is_empty() {
                self.probe_lost(comm, src)?;
            }
            return Ok(None);
        };
        let u = q.unexpected.remove(pos).expect("in range");
        self.stats.unexpected_out(u.held());
        let st = Status {
            source: u.src,
            tag: u.tag,
            error: None,
            bytes: u.msg_len,
            msg_len: u.msg_len,
            cancelled: false,
        };
        self.next_msg += 1;
        let id = self.next_msg;
        self.messages.push((id, u));
        Ok(Some((MessageId(id), st)))
    }

    /// A copy of `data` for the unexpected-message queue, in a spare buffer if one is big
    /// enough.
    pub(super) fn unexpected_copy(&mut self, data: &[u8]) -> Vec<u8> {
        let mut v = match self.spare.iter().rposition(|b| b.capacity() >= data.len()) {
            Some(i) => self.spare.swap_remove(i),
            None => Vec::with_capacity(data.len()),
        };
        v.clear();
        v.extend_from_slice(data);
        v
    }

    /// Keep the buffer of a delivered unexpected message for [`State::unexpected_copy`].
    pub(super) fn recycle(&mut self, v: Vec<u8>) {
        /// Spare buffers kept at most, and the largest kept.
        const KEEP: usize = 16;
        const KEEP_MAX: usize = 256 << 10;
        if self.spare.len() < KEEP && (1..=KEEP_MAX).contains(&v.capacity()) {
            self.spare.push(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(i: u32) -> Posted {
        (i as i32, 0, RequestId::new(i, 1))
    }

    #[test]
    fn posted_queue_keeps_order_through_pops_removes_and_growth() {
        let mut q = PostedQ::default();
        let mut model = VecDeque::new();
        let mut next = 0u32;
        // Pushes, pops from the front and removals from the middle, interleaved so that
        // entries before `head` are dropped on a push into a full vector.
        for round in 0..200u32 {
            for _ in 0..(round % 5) {
                q.push_back(e(next));
                model.push_back(e(next));
                next += 1;
            }
            if round % 3 == 0 {
                assert_eq!(q.pop_front(), model.pop_front());
            }
            if round % 7 == 0 && model.len() > 2 {
                assert_eq!(q.remove(1), model.remove(1));
            }
            if round % 11 == 0 {
                q.retain(|p| p.0 % 4 != 0);
                model.retain(|p| p.0 % 4 != 0);
            }
            assert_eq!(q.is_empty(), model.is_empty());
            assert_eq!(q.front(), model.front());
            assert!(q.iter().eq(model.iter()));
            if !model.is_empty() {
                assert_eq!(q[model.len() - 1], model[model.len() - 1]);
            }
            assert!(
                q.v.capacity() <= 4 * (model.len() + 4),
                "no unbounded growth"
            );
        }
        assert_eq!(q.remove(model.len()), None);
        while let Some(x) = model.pop_front() {
            assert_eq!(q.pop_front(), Some(x));
        }
        assert!(q.is_empty() && q.head == 0 && q.v.is_empty());
    }
}
