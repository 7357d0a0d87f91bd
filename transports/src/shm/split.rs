//! Split copies: a large transfer copied by both processes at once. The protocol is in the
//! [module documentation](super) ("Split copies"); this file is its code.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use std::io::IoSliceMut;

use super::segment::SplitBoard;
use super::{ShmTransport, PEER_CHECK_AFTER};
use crate::sys;
use crate::{Error, PeerId, Result, SendOutcome};

/// The most chunks one split copy may have.
pub const MAX_SPLIT_CHUNKS: u32 = 1 << 16;

/// One split transfer, as both processes describe it: the receiver chooses it, opens the board
/// with [`ShmTransport::split_open`] (which gives the generation) and sends it to the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitJob {
    gen: u32,
    len: usize,
    chunks: u32,
}

/// Split copies of at least this many bytes go in four chunks, smaller ones in two (measured on
/// the development machine: halves are best up to 1 MiB, and quarters at 4 MiB as good, with
/// less to wait for when the other process is slow to start).
const QUARTERS_FROM: usize = 2 << 20;

impl SplitJob {
    /// `len` bytes in the number of chunks that suits a copy by two processes of that size:
    /// two, or four from 2 MiB.
    pub fn sized(gen: u32, len: usize) -> SplitJob {
        let chunks = if len < QUARTERS_FROM { 2 } else { 4 };
        SplitJob { gen, len, chunks }
    }

    /// Chunks of the transfer.
    pub fn chunks(&self) -> u32 {
        self.chunks
    }

    /// `len` bytes in `chunks` chunks (of `len.div_ceil(chunks)` bytes, the last one shorter),
    /// on board generation `gen`. `None` unless `1 <= chunks <=` [`MAX_SPLIT_CHUNKS`].
    pub fn new(gen: u32, len: usize, chunks: u32) -> Option<SplitJob> {
        (1..=MAX_SPLIT_CHUNKS)
            .contains(&chunks)
            .then_some(SplitJob { gen, len, chunks })
    }

    /// Bytes of the transfer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the transfer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// (offset, length) of chunk `k`.
    pub fn span(&self, k: u32) -> (usize, usize) {
        let size = self.len.div_ceil(self.chunks as usize);
        let off = (k as usize).saturating_mul(size).min(self.len);
        (off, size.min(self.len - off))
    }
}

/// How the chunks of a split copy were shared out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitCopy {
    /// Chunks this process copied.
    pub mine: u32,
    /// Chunks the other process copied.
    pub theirs: u32,
}

/// Take the next chunk of `job` from a claim word (`generation << 32 | next chunk`), if any is
/// left: a compare-and-swap, so that each chunk goes to exactly one of the two copiers, and
/// nothing is taken from a board of another generation. The word of a `shm` ring's split
/// board, or any other shared word the two processes agree on (the shared-memory
/// collectives' two-process broadcast).
pub fn take_chunk(word: &AtomicU64, job: &SplitJob) -> Option<u32> {
    let mut cur = word.load(Ordering::Acquire);
    loop {
        let k = cur as u32;
        if (cur >> 32) as u32 != job.gen || k >= job.chunks {
            return None;
        }
        match word.compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(k),
            Err(now) => cur = now,
        }
    }
}

/// Take every chunk left of generation `gen` (so that the helper starts no more); returns how
/// many that was.
fn claim_rest(b: &SplitBoard, gen: u32, chunks: u32) -> u32 {
    let mut cur = b.claim.load(Ordering::Acquire);
    loop {
        let k = cur as u32;
        if (cur >> 32) as u32 != gen || k >= chunks {
            return 0;
        }
        let all = u64::from(gen) << 32 | u64::from(chunks);
        match b
            .claim
            .compare_exchange_weak(cur, all, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return chunks - k,
            Err(now) => cur = now,
        }
    }
}

/// A receiver's request for help with a split copy: a driver record on the ring towards the
/// sender (generation, chunks, length, the sender's address, the receiver's address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct HelpAsk {
    job: SplitJob,
    from: u64,
    to: u64,
}

/// What a driver's split copies did (its [`Transport::counters`](crate::Transport::counters)).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SplitCounts {
    pub(super) gets: u64,
    pub(super) mine: u64,
    pub(super) theirs: u64,
    pub(super) helped: u64,
}

/// Bytes of an encoded [`HelpAsk`].
const HELP_BYTES: usize = 32;

impl HelpAsk {
    fn encode(&self) -> [u8; HELP_BYTES] {
        let mut b = [0u8; HELP_BYTES];
        b[0..4].copy_from_slice(&self.job.gen.to_le_bytes());
        b[4..8].copy_from_slice(&self.job.chunks.to_le_bytes());
        b[8..16].copy_from_slice(&(self.job.len as u64).to_le_bytes());
        b[16..24].copy_from_slice(&self.from.to_le_bytes());
        b[24..32].copy_from_slice(&self.to.to_le_bytes());
        b
    }

    /// `None` for a record that is not one (wrong length, a chunk count out of range).
    pub(super) fn decode(p: &[u8]) -> Option<HelpAsk> {
        let p: &[u8; HELP_BYTES] = p.try_into().ok()?;
        let word = |a: usize| u64::from_le_bytes(p[a..a + 8].try_into().expect("8 bytes"));
        let gen = u32::from_le_bytes(p[0..4].try_into().expect("4 bytes"));
        let chunks = u32::from_le_bytes(p[4..8].try_into().expect("4 bytes"));
        let job = SplitJob::new(gen, usize::try_from(word(8)).ok()?, chunks)?;
        Some(HelpAsk {
            job,
            from: word(16),
            to: word(24),
        })
    }
}

impl ShmTransport {
    /// The `get` of one large block (at least [`split_min`](Self::split_min)): open the board,
    /// ask the sender for help with a driver record on our ring towards it (a full ring: we
    /// copy alone), and copy. Help requests of others not served yet are dropped: our own
    /// receive first (when both directions copy at once, each helping the other, both lose
    /// ~15 %; left alone, their receivers copy everything).
    pub(super) fn helped_get(
        &mut self,
        peer: PeerId,
        from: u64,
        local: &mut IoSliceMut<'_>,
    ) -> Result<()> {
        self.helps.clear();
        let gen = self.split_open(peer)?;
        let job = SplitJob::sized(gen, local.len());
        let ask = HelpAsk {
            job,
            from,
            to: local.as_mut_ptr() as u64,
        }
        .encode();
        match self.push_record(peer, ask.len(), |p, from| p.try_push_driver(&ask, from)) {
            Ok(SendOutcome::Done | SendOutcome::WouldBlock) => {}
            Err(e) => return Err(e),
        }
        // SAFETY: `local` is valid for writes of `job.len()` bytes and borrowed mutably.
        let c = unsafe { self.split_get(peer, job, from, local.as_mut_ptr()) }?;
        self.split.gets += 1;
        self.split.mine += u64::from(c.mine);
        self.split.theirs += u64::from(c.theirs);
        Ok(())
    }

    /// Serve the help requests a poll read, in order. A request whose transfer is over (or
    /// another's) takes no chunk; one this process may not write (refused once) is left to the
    /// receiver, which copies every chunk it does not see taken.
    #[cold]
    pub(super) fn serve_helps(&mut self) -> Result<()> {
        let mut helps = std::mem::take(&mut self.helps);
        let mut res = Ok(());
        for (peer, ask) in helps.drain(..) {
            let Some(ask) = ask else {
                res = Err(Error::Malformed(format!(
                    "shm: a split-copy request from rank {} that is not one",
                    peer.0
                )));
                continue;
            };
            let Some(j) = self.local_index(peer) else {
                continue;
            };
            if self.no_put[j] {
                continue;
            }
            // SAFETY: nothing here dereferences `ask.from`: the kernel reads it (an address
            // outside our memory is EFAULT), and only while the receiver's board is at this
            // generation, i.e. while the send whose data is there waits for the receiver.
            match unsafe { self.split_put(peer, ask.job, ask.from as *const u8, ask.to) } {
                Ok(n) => self.split.helped += u64::from(n),
                Err(Error::PermissionDenied(_)) => self.no_put[j] = true,
                // The receiver copies what we could not; a lost peer shows elsewhere.
                Err(_) => {}
            }
        }
        // The list keeps its buffer.
        self.helps = helps;
        res
    }

    /// Chunks of other processes' split copies this process has written so far.
    pub fn chunks_helped(&self) -> u64 {
        self.split.helped
    }

    /// Local index and pid of `peer`, which must be another attached process of the node.
    fn cma_peer(&self, peer: PeerId) -> Result<(usize, i32)> {
        let Some(j) = self.local_index(peer).filter(|&j| j != self.me) else {
            return Err(self.unreachable(peer));
        };
        let pid = self.ident(j).pid.load(Ordering::Acquire);
        if pid <= 0 {
            return Err(Error::Invalid(format!(
                "rank {} has not attached to the shm segment yet",
                peer.0
            )));
        }
        Ok((j, pid))
    }

    /// The board of transfers to local `j` (this process runs one at a time, whoever sends).
    fn board(&self, j: usize) -> &SplitBoard {
        // SAFETY: slots point into the mapping owned by `self.seg`; only atomics are accessed.
        unsafe { &self.slots[j].as_ref().split.0 }
    }

    /// Transfers of at least this many bytes are worth splitting (`None`: never, or no
    /// cross-memory attach).
    pub fn split_min(&self) -> Option<usize> {
        let min = self.seg.cfg.split_min;
        (self.caps.can_get && min > 0).then_some(min)
    }

    /// Open the board of transfers from `peer` to this process for a new one, and return its
    /// generation: build the [`SplitJob`] with it, tell `peer` (so that it may call
    /// [`split_put`](Self::split_put)), then call [`split_get`](Self::split_get). One transfer
    /// per peer at a time: `split_get` must have returned before the next open.
    pub fn split_open(&mut self, peer: PeerId) -> Result<u32> {
        self.cma_peer(peer)?;
        let b = self.board(self.me);
        let gen = ((b.claim.load(Ordering::Relaxed) >> 32) as u32).wrapping_add(1);
        b.done.store(0, Ordering::Relaxed);
        b.orphan.store(0, Ordering::Relaxed);
        // Release: a helper that claims in this generation sees the counters reset.
        b.claim.store(u64::from(gen) << 32, Ordering::Release);
        Ok(gen)
    }

    /// The receiving side of split transfer `job` from `peer`: copy chunks of the sender's
    /// memory at `remote` into `local` until none is left, then wait until the chunks the
    /// sender took have landed (or copy the one it could not write). On return nothing writes
    /// to `local` any more, whatever the result.
    ///
    /// # Errors
    ///
    /// As [`get`](crate::Transport::get): [`Error::PermissionDenied`] when reading the peer's
    /// memory is refused, [`Error::PeerLost`] when it died, [`Error::Invalid`] for a bad
    /// address; the content of `local` is then unspecified.
    ///
    /// # Safety
    ///
    /// `local` is valid for writes of `job.len()` bytes, and nothing else reads or writes that
    /// memory until this returns.
    pub unsafe fn split_get(
        &mut self,
        peer: PeerId,
        job: SplitJob,
        remote: u64,
        local: *mut u8,
    ) -> Result<SplitCopy> {
        let (j, pid) = self.cma_peer(peer)?;
        let b = self.board(self.me);
        let mut mine = 0u32;
        // Chunk `k` into place.
        let read = |k: u32| {
            let (off, n) = job.span(k);
            // SAFETY: chunk `k` lies inside `local` (caller's contract).
            unsafe {
                sys::cma_copy(
                    pid,
                    false,
                    local.add(off),
                    remote.wrapping_add(off as u64),
                    n,
                )
            }
            .map_err(|e| sys::cma_error(e, "process_vm_readv", Some(peer), pid, remote, n))
        };
        let mut res = Ok(());
        while let Some(k) = take_chunk(&b.claim, &job) {
            mine += 1;
            res = read(k);
            if res.is_err() {
                // No helper may start on what is left: it is ours, abandoned.
                mine += claim_rest(b, job.gen, job.chunks);
                break;
            }
        }
        let mut theirs = job.chunks - mine;
        self.wait_helper(j, peer, b, theirs)?;
        let orphan = b.orphan.load(Ordering::Acquire);
        if res.is_ok() && (orphan >> 32) as u32 == job.gen && orphan as u32 != 0 {
            // The sender took this chunk but could not write it.
            res = read(orphan as u32 - 1);
            mine += 1;
            theirs -= 1;
        }
        res.map(|()| SplitCopy { mine, theirs })
    }

    /// Wait until the helper (local `j`) has counted `want` chunks done: it took them and is
    /// copying, which takes no longer than copying them here. Spins briefly, then yields; a
    /// helper that dies meanwhile is [`Error::PeerLost`].
    fn wait_helper(&self, j: usize, peer: PeerId, b: &SplitBoard, want: u32) -> Result<()> {
        let mut spins = 0u32;
        let mut since: Option<Instant> = None;
        while b.done.load(Ordering::Acquire) < u64::from(want) {
            spins = spins.wrapping_add(1);
            if spins < 128 {
                std::hint::spin_loop();
                continue;
            }
            std::thread::yield_now();
            if spins & 0xff != 0 {
                continue;
            }
            let now = Instant::now();
            let start = *since.get_or_insert(now);
            if now.duration_since(start) >= PEER_CHECK_AFTER {
                since = Some(now);
                if self.gone(j) {
                    return Err(Error::PeerLost(peer));
                }
            }
        }
        Ok(())
    }

    /// The sending side of split transfer `job` to `peer`: copy chunks of `local` (the data
    /// the receiver reads) to the receiver's memory at `remote` while any is left; returns how
    /// many. Never waits. A chunk whose write fails is handed back to the receiver (it copies
    /// it), and the error returned; the caller should stop helping that peer when it is
    /// [`Error::PermissionDenied`].
    ///
    /// # Safety
    ///
    /// The chunks are read from `local` by the kernel (`process_vm_writev`), never through a
    /// reference: an address outside this process's memory is an error, not undefined
    /// behaviour. The caller makes sure that what is there is the transfer's data while the
    /// receiver's board is at `job`'s generation.
    pub unsafe fn split_put(
        &mut self,
        peer: PeerId,
        job: SplitJob,
        local: *const u8,
        remote: u64,
    ) -> Result<u32> {
        let (j, pid) = self.cma_peer(peer)?;
        let b = self.board(j);
        let mut n = 0;
        while let Some(k) = take_chunk(&b.claim, &job) {
            let (off, len) = job.span(k);
            // SAFETY: only the kernel reads at `local` (see above).
            let res = unsafe {
                sys::cma_copy(
                    pid,
                    true,
                    local.wrapping_add(off).cast_mut(),
                    remote.wrapping_add(off as u64),
                    len,
                )
            };
            if let Err(e) = res {
                b.orphan.store(
                    u64::from(job.gen) << 32 | u64::from(k + 1),
                    Ordering::Relaxed,
                );
                b.done.fetch_add(1, Ordering::Release);
                return Err(sys::cma_error(
                    e,
                    "process_vm_writev",
                    Some(peer),
                    pid,
                    remote,
                    len,
                ));
            }
            // Release: the owner that sees the count sees the bytes.
            b.done.fetch_add(1, Ordering::Release);
            n += 1;
        }
        Ok(n)
    }
}
