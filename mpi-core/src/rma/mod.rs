//! One-sided communication (MPI RMA): windows, their operations and their synchronisation.
//!
//! Every operation travels as active messages through the engine: an origin queues `Rma`
//! chunks (`crate::wire::Kind::Rma`) on the target's gate like any other chunk, so that the
//! strategy aggregates many small operations to one target into one packet, and the target
//! applies them when it handles the packet, in its progress loop. Operations of one origin
//! reach a target in issue order (the chunks are numbered with the messages), which gives the
//! standard's default accumulate ordering; each chunk is applied whole under the engine lock,
//! which gives element-wise atomicity of accumulates (and of fetch-and-op and
//! compare-and-swap) whatever the origins. Every piece of an operation is answered (an
//! acknowledgement, or the data a get asked for): an origin knows an operation complete at the
//! target when all its answers came, which is what `flush`, `unlock`, `complete` and `fence`
//! wait for. Puts and accumulates without a request are untracked: the target answers them
//! with one count per packet, and the small ones travel in batches, one record each (`batch`).
//!
//! Progress: a target serves origins whenever it enters the engine (any MPI call that
//! progresses, including MPI_Win_* calls and MPI_Test); see `docs/rma.md`.
//!
//! Windows whose members all run on one node and whose memory the library allocates take the
//! direct path instead (`direct`): the origin does every operation itself in the node-wide
//! segment, and the locks are words of a control block in it; no target action at all.
//!
//! Modules: `wire` (the payloads of `Rma` chunks), `origin` (issuing operations, their
//! answers), `target` (applying operations, the lock of a window), `sync` (fence, locks,
//! post/start/complete/wait, flushes), `window` (creation and freeing, the queries),
//! `shared` (shared-memory windows and the node-wide segment), `direct` (the direct path),
//! `cma` (puts and gets to `MPI_Win_create` windows on this host by cross-memory attach),
//! `fast` (the direct path's fast path: calls on contiguous predefined types done at once),
//! `rdma` (puts and gets by RDMA to windows registered with a driver that offers it: `ofi`).

mod batch;
mod cma;
mod direct;
mod dynreg;
mod fast;
mod lost;
mod origin;
mod rdma;
mod shared;
mod sync;
mod target;
mod window;
mod wire;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use madmpi_datatypes::Datatype;

use crate::error::{Error, ErrorClass, Result};
use crate::op::{AlignedBuf, BuiltinOp};
use crate::request::RequestId;
use crate::CommId;

pub use fast::{acc_now, cas_now, flush_now, get_now, put_now, racc_now, rget_now, rput_now, Run};
pub use origin::{rma, Call, Local, Remote};
pub use shared::{win_allocate_shared, win_shared_query};
pub use sync::{
    win_complete, win_fence, win_flush, win_flush_all, win_lock, win_lock_all, win_post, win_start,
    win_sync, win_test, win_unlock, win_unlock_all, win_wait, LockType, MODE_NOCHECK,
    MODE_NOPRECEDE, MODE_NOPUT, MODE_NOSTORE, MODE_NOSUCCEED,
};
pub use window::{
    win_allocate, win_attach, win_create, win_create_dynamic, win_detach, win_free, win_info,
    WinInfo,
};

/// A window known to this process (its number in the process's table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WinId(pub u32);

/// How a window's memory was obtained (MPI_WIN_CREATE_FLAVOR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// MPI_Win_create: the user's memory.
    Create,
    /// MPI_Win_allocate: memory allocated by the library.
    Allocate,
    /// MPI_Win_create_dynamic: memory attached later; displacements are addresses.
    Dynamic,
    /// MPI_Win_allocate_shared: one node-wide segment that every member maps.
    Shared,
}

/// Memory a window owns (held to keep it alive until the window goes).
#[allow(dead_code)]
pub(crate) enum Mem {
    Heap(AlignedBuf),
    Shared(madmpi_transports::shmwin::WinSegment),
}

/// What this process knows of another member's part of a window.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Peer {
    /// The window's number in that process's table.
    pub id: u32,
    pub size: u64,
    pub disp_unit: u64,
    /// For cross-memory attach to an `MPI_Win_create` window on this host (`cma`): the
    /// process id (0: not reachable that way) and the window's base in that process.
    pub pid: i32,
    pub base: u64,
}

/// A lock this process holds, or asked for, on a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    None,
    /// Asked for; the grant has not come.
    Asked(LockType),
    Granted(LockType),
    /// Taken with MPI_MODE_NOCHECK: no lock message was sent.
    Unchecked(LockType),
}

/// A window: its memory, its members, and the state of its epochs as origin and as target.
pub(crate) struct Win {
    /// The window's own communicator (a duplicate of the user's, for its barriers).
    pub comm: CommId,
    /// World rank of each member.
    pub world: Arc<[u32]>,
    pub rank: i32,
    pub base: *mut u8,
    pub size: usize,
    pub disp_unit: usize,
    pub flavor: Flavor,
    /// Memory of an allocated window (kept alive with it).
    pub _mem: Option<Mem>,
    /// A shared window: the start of the segment's data in this process, and each member's
    /// offset in it.
    pub segment: Option<(*mut u8, Vec<usize>)>,
    /// The direct path on one node (every operation done by the origin in shared memory,
    /// the locks in the window's control block), when the window takes it.
    pub direct: Option<direct::Direct>,
    /// Regions attached to a dynamic window: (address, length).
    pub regions: Vec<(usize, usize)>,
    pub peers: Vec<Peer>,
    /// Per target: operations issued whose answers have not all come.
    pub pending: Vec<u32>,
    /// An error a target reported for an operation (reported by the next synchronisation).
    pub error: Option<Error>,
    /// An access epoch opened by a fence (not closed by MPI_MODE_NOSUCCEED).
    pub fence: bool,
    /// Per target: the lock held on it.
    pub held: Vec<Held>,
    /// MPI_Win_lock_all is in force.
    pub lock_all: bool,
    /// The targets of the access epoch opened by MPI_Win_start (ranks in the window).
    pub start: Option<Vec<i32>>,
    /// Per target: MPI_Win_post notices received and not yet used by a start.
    pub posts: Vec<u32>,
    /// The origins of the exposure epoch opened by MPI_Win_post.
    pub post: Option<Vec<i32>>,
    /// MPI_Win_complete notices received (from origins of the exposure epoch).
    pub completes: u32,
    /// Per target: unlock chunks sent to it. Nothing answers an unlock, and MPI_Win_free's
    /// barrier may take a path that overtakes chunks (shared-memory collectives), so the
    /// free compares these counts with `unlocks_seen` before dropping the window.
    pub unlocks_sent: Vec<u64>,
    /// Per origin: unlock chunks received from it.
    pub unlocks_seen: Vec<u64>,
    /// The window's lock at this process as target: its exclusive holder.
    pub excl: Option<i32>,
    /// Shared holders, and which origins they are (to give back a dead one's).
    pub shared: u32,
    pub shared_by: Vec<bool>,
    /// Each member's process id when it runs on this host (0: unknown), to see a lock
    /// holder die (`State::rma_watch`).
    pub pids: Vec<i32>,
    /// Origins waiting for the lock (rank, exclusive, their number of the window), served in
    /// order.
    pub waiting: VecDeque<(i32, bool, u32)>,
}

// SAFETY: `base` points at the window's memory, which the user keeps valid until MPI_Win_free
// (or which the window owns); the window lives in the engine state, behind the engine lock.
unsafe impl Send for Win {}

impl Win {
    /// Whether the epochs this process opened allow an operation on `target`.
    #[inline(always)]
    fn may_access(&self, target: i32) -> bool {
        self.fence
            || self.lock_all
            || matches!(
                self.held[target as usize],
                Held::Granted(_) | Held::Unchecked(_)
            )
            || self.start.as_ref().is_some_and(|g| g.contains(&target))
    }
}

/// An operation in flight at its origin: the answers it waits for and what to do with them.
pub(crate) struct Track {
    pub win: WinId,
    pub target: i32,
    /// Answers still to come (one per chunk sent).
    pub left: u32,
    /// Where the data a get (or get-accumulate, fetch-and-op, compare-and-swap) brings back
    /// goes: a buffer holding `count` elements of the type.
    pub result: Option<(*mut u8, usize, Datatype)>,
    /// The request of a request-based operation (MPI_Rput …), completed with the operation.
    pub req: Option<RequestId>,
    pub error: Option<ErrorClass>,
}

/// The windows of this process and the operations in flight.
#[derive(Default)]
pub(crate) struct Rma {
    pub wins: Vec<Option<Win>>,
    pub ops: HashMap<u64, Track>,
    /// The last token given to a tracked operation (tokens start at 1: token 0 marks the
    /// untracked operations, `batch`).
    pub next_token: u64,
    /// As target: the untracked operations applied in the packet being handled, answered
    /// with one count per origin and window when it is done (`batch`).
    pub acks_due: Vec<batch::AckDue>,
    /// As origin: the batches being filled, one per target at most (`batch`).
    pub open: Vec<batch::Open>,
    /// As origin: the batch the last small operation went to, while it is open (`batch`).
    pub hot: Option<batch::Hot>,
    /// Puts and gets by RDMA (`rdma`).
    pub rdma: rdma::Rdma,
}

// SAFETY: as for `Win`; `Track::result` points at a user buffer that stays valid until the
// operation completes (MPI's rule for RMA origin buffers), only touched under the engine lock.
unsafe impl Send for Rma {}

impl Rma {
    pub(crate) fn win(&self, w: WinId) -> Result<&Win> {
        match self.wins.get(w.0 as usize) {
            Some(Some(x)) => Ok(x),
            _ => Err(bad_win()),
        }
    }

    pub(crate) fn win_mut(&mut self, w: WinId) -> Result<&mut Win> {
        match self.wins.get_mut(w.0 as usize) {
            Some(Some(x)) => Ok(x),
            _ => Err(bad_win()),
        }
    }
}

fn bad_win() -> Error {
    Error::new(ErrorClass::Win, "invalid window (freed, or never created)")
}

/// The predefined operations an accumulate may apply (every one, plus MPI_REPLACE and
/// MPI_NO_OP), by their number on the wire.
fn op_code(op: BuiltinOp) -> u8 {
    BuiltinOp::ALL
        .iter()
        .position(|&o| o == op)
        .expect("every operation is listed") as u8
}

fn op_of(code: u8) -> Option<BuiltinOp> {
    BuiltinOp::ALL.get(code as usize).copied()
}
