//! One-sided RDMA for MPI windows over the `ofi` driver: a window's memory registered for the
//! peers' reads and writes ([`Transport::register_window`](crate::Transport::register_window)),
//! and asynchronous `fi_write`/`fi_read` into and out of a peer's window
//! ([`Transport::rma_post`](crate::Transport::rma_post)), each completion reported once with
//! the caller's token ([`Transport::rma_poll`](crate::Transport::rma_poll)).
//!
//! Every transfer in flight holds a slot: a libfabric context of its own (so that its
//! completion names it), the token, and the registration of its local memory when the provider
//! wants `FI_MR_LOCAL`. A transfer longer than the provider's `max_msg_size` is cut, each cut in
//! a slot; the token completes when its last cut does. With no slot free, posting polls the
//! completion queue until one is.

use std::collections::HashMap;

use super::ffi::{Access, Context, MemReg};
use super::OfiTransport;
use crate::{Error, PeerId, RemoteRegion, Result};

/// Transfers in flight at most (cuts of one counted apart).
const SLOTS: usize = 256;

/// Idle polls, while waiting for a free slot, before each poll yields the CPU.
const SPIN: u32 = 64;

/// The transfers in flight and the completions not reported yet.
pub(super) struct RmaOps {
    ctx: Box<[Context]>,
    /// Per slot: its token (`u64::MAX`: free) and its local registration.
    token: Vec<u64>,
    mr: Vec<Option<MemReg>>,
    free: Vec<u32>,
    /// Per token: cuts not completed, and the first error seen.
    left: HashMap<u64, (usize, Option<String>)>,
    /// Completed tokens, for the next `rma_poll`.
    done: Vec<(u64, Option<String>)>,
    /// Counted for the trace: transfers posted and their bytes, by direction.
    pub writes: u64,
    pub write_bytes: u64,
    pub reads: u64,
    pub read_bytes: u64,
    pub windows: u64,
    /// Transfers shorter than this are better sent as messages (`Transport::rma_min`).
    pub min: usize,
}

/// Over a provider that does RDMA in software (`tcp;ofi_rxm`: each write or read is a request
/// on the connection that the target's provider serves when it polls), operations below this
/// size are cheaper as the engine's messages, which aggregate (measured: 8-byte puts 50 times
/// slower by RDMA, 4 KiB puts 3 times; 1 MiB puts 4 times faster).
const SOFTWARE_RMA_MIN: usize = 64 << 10;

impl RmaOps {
    pub(super) fn new(provider: &str, set: Option<usize>) -> RmaOps {
        RmaOps {
            ctx: vec![Context::default(); SLOTS].into_boxed_slice(),
            token: vec![u64::MAX; SLOTS],
            mr: (0..SLOTS).map(|_| None).collect(),
            free: (0..SLOTS as u32).rev().collect(),
            left: HashMap::new(),
            done: Vec::new(),
            writes: 0,
            write_bytes: 0,
            reads: 0,
            read_bytes: 0,
            windows: 0,
            min: set.unwrap_or(if super::is_fast(provider) {
                0
            } else {
                SOFTWARE_RMA_MIN
            }),
        }
    }

    /// The completion (`err`: failed) of the operation whose context is `ctx`, if it is one of
    /// these transfers: recorded, and `true`.
    pub(super) fn complete(&mut self, ctx: *mut Context, err: Option<String>) -> bool {
        let base = self.ctx.as_ptr() as usize;
        let s = (ctx as usize).wrapping_sub(base) / std::mem::size_of::<Context>();
        if (ctx as usize) < base || s >= SLOTS || self.token[s] == u64::MAX {
            return false;
        }
        let token = std::mem::replace(&mut self.token[s], u64::MAX);
        self.mr[s] = None;
        self.free.push(s as u32);
        self.cut_done(token, 1, err);
        true
    }

    /// `n` cuts of `token` are done (or will never be posted), `err` if they failed.
    fn cut_done(&mut self, token: u64, n: usize, err: Option<String>) {
        let Some(e) = self.left.get_mut(&token) else {
            return;
        };
        e.0 = e.0.saturating_sub(n);
        if e.1.is_none() {
            e.1 = err;
        }
        if e.0 == 0 {
            let (_, err) = self.left.remove(&token).expect("found above");
            self.done.push((token, err));
        }
    }

    /// Whether transfers are in flight.
    pub(super) fn busy(&self) -> bool {
        !self.left.is_empty()
    }
}

impl OfiTransport {
    /// [`Transport::register_window`](crate::Transport::register_window).
    pub(super) fn rma_register_window(&mut self, ptr: *mut u8, len: usize) -> Result<u64> {
        if !self.ep.attr().rma_write || !self.caps.can_get {
            return Err(Error::Unsupported(
                "one-sided RDMA over ofi (the provider has no FI_RMA writes, or MADMPI_OFI_RMA=0)",
            ));
        }
        let asked = self.next_key;
        self.next_key += 1;
        // SAFETY: the window's memory stays allocated until the window is freed, which
        // deregisters it first.
        let mr = unsafe { self.ep.register(ptr, len.max(1), Access::Window, asked)? };
        let key = mr.key;
        self.rma.windows += 1;
        self.regs.insert(key, mr);
        Ok(key)
    }

    /// [`Transport::rma_post`](crate::Transport::rma_post).
    ///
    /// # Safety
    ///
    /// As the trait's.
    pub(super) unsafe fn rma_post_now(
        &mut self,
        peer: PeerId,
        write: bool,
        remote: RemoteRegion,
        local: *mut u8,
        len: usize,
        token: u64,
    ) -> Result<()> {
        if !self.ep.attr().rma_write || !self.caps.can_get {
            return Err(Error::Unsupported("one-sided RDMA over ofi"));
        }
        let p = self.check_peer(peer)?;
        if p.lost {
            return Err(Error::PeerLost(peer));
        }
        let a = self.ep.attr();
        let (mr_local, virt) = (a.mr_local, a.mr_virt_addr);
        let max = usize::try_from(a.max_msg_size).unwrap_or(usize::MAX).max(1);
        let cuts = len.div_ceil(max);
        if cuts == 0 {
            self.rma.done.push((token, None));
            return Ok(());
        }
        self.rma.left.insert(token, (cuts, None));
        if write {
            self.rma.writes += 1;
            self.rma.write_bytes += len as u64;
        } else {
            self.rma.reads += 1;
            self.rma.read_bytes += len as u64;
        }
        let mut to = if virt {
            remote.addr
        } else {
            remote.addr.wrapping_sub(remote.base)
        };
        let (mut at, mut posted, mut idle) = (0usize, 0usize, 0u32);
        while at < len {
            let n = (len - at).min(max);
            let Some(&s) = self.rma.free.last() else {
                match self.progress() {
                    Ok(0) => {
                        idle += 1;
                        if idle > SPIN {
                            std::thread::yield_now();
                        }
                    }
                    Ok(_) => idle = 0,
                    Err(e) => {
                        self.rma.cut_done(token, cuts - posted, Some(e.to_string()));
                        return Ok(());
                    }
                }
                continue;
            };
            // SAFETY (here and the post): `local[at..at + n]` is the caller's until the
            // completion of this slot's context (the trait's contract); the registration is
            // kept in the slot until then; the context lives as long as the driver.
            let r = (|| -> Result<bool> {
                let ptr = unsafe { local.add(at) };
                let mr = match mr_local {
                    true => Some(unsafe {
                        self.ep.register(
                            ptr,
                            n,
                            if write {
                                Access::WriteSource
                            } else {
                                Access::Local
                            },
                            0,
                        )?
                    }),
                    false => None,
                };
                let desc = mr.as_ref().map_or(std::ptr::null_mut(), |m| m.desc);
                let ctx: *mut Context = &mut self.rma.ctx[s as usize];
                let ok = unsafe {
                    if write {
                        self.ep.write(ptr, n, desc, p.addr, to, remote.key, ctx)?
                    } else {
                        self.ep.read(ptr, n, desc, p.addr, to, remote.key, ctx)?
                    }
                };
                if ok {
                    self.rma.free.pop();
                    self.rma.token[s as usize] = token;
                    self.rma.mr[s as usize] = mr;
                }
                Ok(ok)
            })();
            match r {
                Ok(true) => {
                    at += n;
                    to += n as u64;
                    posted += 1;
                }
                Ok(false) => {
                    if let Err(e) = self.progress() {
                        self.rma.cut_done(token, cuts - posted, Some(e.to_string()));
                        return Ok(());
                    }
                }
                Err(e) => {
                    // (The cuts posted complete later; the token fails with this.)
                    self.rma.cut_done(token, cuts - posted, Some(e.to_string()));
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// [`Transport::rma_poll`](crate::Transport::rma_poll).
    pub(super) fn rma_poll_now(&mut self, done: &mut dyn FnMut(u64, Option<String>)) -> Result<()> {
        if self.rma.busy() {
            for _ in 0..4 {
                if self.progress()? < super::CQ_BATCH {
                    break;
                }
            }
        }
        for (t, e) in self.rma.done.drain(..) {
            done(t, e);
        }
        Ok(())
    }
}
