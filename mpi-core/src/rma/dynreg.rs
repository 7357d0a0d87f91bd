//! RDMA to dynamic windows (`MPI_Win_create_dynamic`): the regions a member attaches are
//! registered with the RDMA driver one by one, and origins learn a region's key on demand.
//!
//! - **Target**: `MPI_Win_attach` registers the region ([`attach`]; a refusal is logged and
//!   the region is reached by messages), `MPI_Win_detach` deregisters it ([`detach`]) before
//!   returning, and freeing the window deregisters what is left. Every registration asks the
//!   driver for a key never used before by this process, so that a key of a detached region
//!   never names a later one (a transfer with a stale key is still not to be relied on: over
//!   `tcp;ofi_rxm` one was seen never to complete; the origin side below avoids them).
//! - **Origin**: a put or a get big enough for RDMA to an address of no region it knows the
//!   key of goes by messages, and asks the target once for the key of the region at that
//!   address ([`Sub::KeyAsk`]; the answer, [`Sub::KeyTell`], is the region's address, length
//!   and key, or nothing). The ask counts in the window's `pending` like an operation, so every
//!   synchronisation that waits for the operations waits for the answer too. Later operations
//!   that fall in a known region go by RDMA.
//! - **Staleness**: MPI requires an origin to synchronise with the target after the target
//!   attaches memory and before it accesses it. Every synchronisation that opens an access
//!   to a target (`MPI_Win_lock` on it, `MPI_Win_lock_all`, `MPI_Win_fence`, `MPI_Win_start`)
//!   and `MPI_Win_sync` forget the keys known for the targets it covers ([`new_epoch`]) and
//!   bump their generation: an answer to an ask of an older generation is dropped. So a
//!   detach then an attach at the same address is never reached with the old key by an origin
//!   that synchronised as the standard requires.

use madmpi_transports::Transport;

use super::rdma::WinRdma;
use super::wire::Sub;
use super::WinId;
use crate::engine::{Engine, State};
use crate::wire::{Header, Kind};

/// Addresses asked for per target and generation at most (past it: messages, no more asks).
const MAX_ASKS: usize = 1024;

/// A region: address, length, key.
type Region = (u64, u64, u64);

/// The dynamic-window part of a window's RDMA state.
pub(crate) struct Dyn {
    /// This member's registered regions.
    own: Vec<Region>,
    /// Per member: the regions whose keys it told in this generation.
    cache: Vec<Vec<Region>>,
    /// Per member: the generation of `cache` (answers to asks of another are dropped).
    gen: Vec<u64>,
    /// Per member: the addresses asked in this generation.
    asked: Vec<Vec<u64>>,
}

impl Dyn {
    pub(super) fn new(n: usize) -> Dyn {
        Dyn {
            own: Vec::new(),
            cache: vec![Vec::new(); n],
            gen: vec![0; n],
            asked: vec![Vec::new(); n],
        }
    }

    /// The key and address of the known region of member `rank` that holds `[lo, hi)`.
    pub(super) fn lookup(&self, rank: usize, lo: u64, hi: u64) -> Option<(u64, u64)> {
        self.cache
            .get(rank)?
            .iter()
            .find(|&&(a, n, _)| lo >= a && hi <= a.saturating_add(n))
            .map(|&(a, _, k)| (k, a))
    }

    /// Forget the keys known of member `r` and start its next generation.
    fn forget(&mut self, r: usize) {
        self.gen[r] += 1;
        self.cache[r].clear();
        self.asked[r].clear();
    }

    /// The answer `payload` from member `r` to an ask of generation `gen`: its region is
    /// known from now on, unless the ask is of an older generation (or the answer empty).
    fn told(&mut self, r: usize, gen: u64, payload: &[u8]) {
        if self.gen.get(r) != Some(&gen) || payload.len() != 24 {
            return;
        }
        let word = |i: usize| u64::from_le_bytes(payload[8 * i..8 * i + 8].try_into().expect("8"));
        let (a, n, k) = (word(0), word(1), word(2));
        let c = &mut self.cache[r];
        c.retain(|&(b, m, _)| !(a < b.saturating_add(m) && b < a.saturating_add(n)));
        c.push((a, n, k));
    }

    /// The keys of this member's regions (to deregister them all).
    pub(super) fn own_keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.own.iter().map(|r| r.2)
    }
}

fn dyn_of(e: &mut Engine, w: WinId) -> Option<(&mut WinRdma, u8)> {
    let x = e.st.rma.rdma.wins.get_mut(&w.0)?;
    let drv = x.drv;
    x.dynamic.is_some().then_some((x, drv))
}

/// `MPI_Win_attach` of `len` bytes at `base` (checked and recorded by the caller): register
/// them for the peers' RDMA, if the window goes by RDMA.
pub(super) fn attach(e: &mut Engine, w: WinId, base: usize, len: usize) {
    let Some((_, drv)) = dyn_of(e, w) else {
        return;
    };
    let Some(d) = e.drv.list.get_mut(drv as usize) else {
        return;
    };
    match d.register_window(base as *mut u8, len) {
        Ok(key) => {
            if let Some((x, _)) = dyn_of(e, w) {
                let own = &mut x.dynamic.as_mut().expect("dynamic").own;
                own.push((base as u64, len as u64, key));
            }
        }
        Err(err) => {
            tracing::info!(error = %err, "attached memory not registered for RDMA: reached by messages")
        }
    }
}

/// `MPI_Win_detach` of the region at `base`: its registration ends now.
pub(super) fn detach(e: &mut Engine, w: WinId, base: usize) {
    let Some((x, drv)) = dyn_of(e, w) else {
        return;
    };
    let own = &mut x.dynamic.as_mut().expect("dynamic").own;
    let Some(i) = own.iter().position(|r| r.0 == base as u64) else {
        return;
    };
    let (_, _, key) = own.swap_remove(i);
    if let Some(d) = e.drv.list.get_mut(drv as usize) {
        d.deregister(key);
    }
}

/// The key cache of dynamic window `w`, if it has one.
fn dyn_mut(st: &mut State, w: WinId) -> Option<&mut Dyn> {
    (st.rma.rdma.wins.get_mut(&w.0)).and_then(|x| x.dynamic.as_mut())
}

/// A synchronisation that opens an access to member `rank` (every member: `None`) of window
/// `w`, or `MPI_Win_sync`: the keys known for it are forgotten.
pub(super) fn new_epoch(st: &mut State, w: WinId, rank: Option<i32>) {
    let Some(d) = dyn_mut(st, w) else {
        return;
    };
    let n = d.gen.len();
    let ranks = match rank {
        Some(r) if (r as usize) < n => r as usize..r as usize + 1,
        Some(_) => return,
        None => 0..n,
    };
    for r in ranks {
        d.forget(r);
    }
}

/// Ask member `rank` (world rank `world`, its number of the window `id`) of window `w` for
/// the key of the region at `addr`, unless asked already in this generation.
pub(super) fn ask(st: &mut State, w: WinId, rank: i32, world: u32, id: u32, addr: u64) {
    let Some(d) = dyn_mut(st, w) else {
        return;
    };
    let r = rank as usize;
    if d.asked[r].contains(&addr) || d.asked[r].len() >= MAX_ASKS {
        return;
    }
    d.asked[r].push(addr);
    let gen = d.gen[r];
    let Ok(win) = st.rma.win_mut(w) else {
        return;
    };
    win.pending[r] += 1;
    let hdr = Header {
        kind: Kind::Rma as u8,
        ctx: id,
        src: win.rank,
        tag: Sub::KeyAsk as i32,
        msg_len: addr,
        sreq: gen,
        aux: (w.0 as u64) << 32,
        ..Default::default()
    };
    st.queue_owned(world, hdr, Vec::new());
}

/// A `KeyAsk` or `KeyTell` chunk from world rank `peer` (a member of window `h.ctx`, checked
/// by the caller).
pub(super) fn key_chunk(st: &mut State, peer: u32, sub: Sub, h: Header, payload: &[u8]) {
    let (w, from) = (WinId(h.ctx), h.src);
    if sub == Sub::KeyAsk {
        let addr = h.msg_len;
        let found = st
            .rma
            .rdma
            .wins
            .get(&w.0)
            .and_then(|x| x.dynamic.as_ref())
            .and_then(|d| {
                d.own
                    .iter()
                    .find(|&&(a, n, _)| addr >= a && addr < a.saturating_add(n))
                    .copied()
            });
        let Ok(win) = st.rma.win(w) else { return };
        let hdr = Header {
            kind: Kind::Rma as u8,
            ctx: (h.aux >> 32) as u32,
            src: win.rank,
            tag: Sub::KeyTell as i32,
            msg_len: addr,
            sreq: h.sreq,
            ..Default::default()
        };
        let body = match found {
            Some((a, n, k)) => [a, n, k].iter().flat_map(|v| v.to_le_bytes()).collect(),
            None => Vec::new(),
        };
        return st.queue_owned(peer, hdr, body);
    }
    let r = from as usize;
    if let Ok(win) = st.rma.win_mut(w) {
        if let Some(p) = win.pending.get_mut(r) {
            *p = p.saturating_sub(1);
        }
    }
    let Some(d) = dyn_mut(st, w) else {
        return;
    };
    d.told(r, h.sreq, payload);
}

#[cfg(test)]
mod tests {
    use super::Dyn;

    fn tell(a: u64, n: u64, k: u64) -> Vec<u8> {
        [a, n, k].iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn keys_known_within_a_region_only() {
        let mut d = Dyn::new(2);
        assert_eq!(d.lookup(1, 0x1000, 0x1010), None);
        d.told(1, 0, &tell(0x1000, 0x100, 7));
        assert_eq!(d.lookup(1, 0x1000, 0x1100), Some((7, 0x1000)));
        assert_eq!(d.lookup(1, 0x10f0, 0x1101), None, "past the region's end");
        assert_eq!(d.lookup(0, 0x1000, 0x1010), None, "another member");
        d.told(1, 0, &[]);
        assert_eq!(
            d.lookup(1, 0x1000, 0x1100),
            Some((7, 0x1000)),
            "an empty answer"
        );
        // A region overlapping a known one replaces it.
        d.told(1, 0, &tell(0x1080, 0x100, 9));
        assert_eq!(d.lookup(1, 0x1000, 0x1010), None);
        assert_eq!(d.lookup(1, 0x1080, 0x1090), Some((9, 0x1080)));
    }

    #[test]
    fn a_new_epoch_forgets_and_drops_older_answers() {
        let mut d = Dyn::new(2);
        d.asked[1].push(0x1000);
        d.told(1, 0, &tell(0x1000, 0x100, 7));
        d.forget(1);
        assert_eq!(d.lookup(1, 0x1000, 0x1010), None, "forgotten");
        assert!(d.asked[1].is_empty(), "may be asked again");
        // The answer to an ask of the generation before (the region detached since, and
        // another attached at the same address with key 8) is dropped.
        d.told(1, 0, &tell(0x1000, 0x100, 7));
        assert_eq!(d.lookup(1, 0x1000, 0x1010), None);
        d.told(1, 1, &tell(0x1000, 0x100, 8));
        assert_eq!(d.lookup(1, 0x1000, 0x1010), Some((8, 0x1000)));
    }
}
