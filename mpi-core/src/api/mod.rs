//! The raw API: one function per operation, each reaching the engine for as short a time as it
//! can (under the engine lock, or as the thread that owns it: see `EngineCell`). Blocking
//! functions poll with [`Backoff`] between attempts, with the engine released.
//!
//! Here: the communicator queries; `engine_slot` holds the engine and how calls reach it,
//! `lifetime` MPI_Init/Finalize/Abort and the process-wide state, `wait` polling and the
//! completion calls, `p2p` the point-to-point calls and probes, `names` the name service of
//! dynamic processes, `compound` the requests made of others (MPI_Isendrecv) or completed by
//! the application (generalized requests), `progress` the asynchronous progress thread of
//! one-sided communication, `watch` when waits look for dead peers. Every call is re-exported
//! here.

mod buffers;
mod compound;
mod engine_slot;
mod lifetime;
pub(crate) use lifetime::with_pmi;
mod names;
mod p2p;
mod progress;
mod wait;
mod watch;

use crate::error::Result;
use crate::CommId;

pub use buffers::{
    buffer_attach, buffer_attach_to, buffer_detach, buffer_detach_from, buffer_flush,
    buffer_iflush, AttachedBuffer,
};
pub use compound::{grequest_complete, grequest_start, isendrecv, isendrecv_replace};
pub(crate) use engine_slot::{now, with, with_quiet, Now};
pub use lifetime::{
    abort, active, appnum, exit_code, finalize, finalized, init, initialized, is_thread_main,
    lost_ranks, nodes, processor_name, query_thread, rank_host, session_end, session_start,
    universe_size, wtick, wtime,
};
pub use names::{lookup_name, publish_name, unpublish_name};
pub use p2p::{
    improbe, imrecv, iprobe, irecv, irecv_now, isend, isend_now, mprobe, probe, recv, recv_init,
    recv_now, send, send_init, send_now, start,
};
pub use progress::async_progress_running;
pub(crate) use progress::{window_closed, window_opened};
pub use wait::{
    all_complete, cancel, progress, request_free, request_get_status, request_get_status_any,
    request_get_status_some, send_queued, set_spin_budget, spin_budget, test, test_all, test_any,
    test_some, wait, wait_all, wait_all_with, wait_any, wait_completion, wait_some, Completion,
};
pub(crate) use wait::{cpus_shared, polled, wait_until, Backoff};
pub(crate) use watch::WATCH_EVERY;

fn env_parse<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

// -------------------------------------------------------------------- communicators

/// MPI_Comm_rank.
pub fn comm_rank(c: CommId) -> Result<i32> {
    with(|e| Ok(e.st.comm(c)?.rank))
}

/// MPI_Comm_size.
pub fn comm_size(c: CommId) -> Result<i32> {
    with(|e| Ok(e.st.comm(c)?.size))
}

/// Size of MPI_COMM_WORLD.
pub fn world_size() -> Result<u32> {
    with(|e| Ok(e.st.nprocs))
}

// -------------------------------------------------------------------- communicator management

/// What the engine knows of a communicator.
#[derive(Clone, Debug)]
pub struct CommInfo {
    /// Point-to-point context id (even); collectives use `ctx + 1`.
    pub ctx: u32,
    /// This process's rank in the local group.
    pub rank: i32,
    /// World ranks of the local group.
    pub local: std::sync::Arc<[u32]>,
    /// World ranks of the remote group (intercommunicators).
    pub remote: Option<std::sync::Arc<[u32]>>,
    /// The session it derives from (sessions model), if any.
    pub session: Option<crate::SessionId>,
}

/// The engine's view of communicator `c`.
pub fn comm_info(c: CommId) -> Result<CommInfo> {
    with(|e| {
        let cm = e.st.comm(c)?;
        Ok(CommInfo {
            ctx: cm.ctx,
            rank: cm.rank,
            local: cm.world.clone(),
            remote: cm.remote.clone(),
            session: cm.session,
        })
    })
}

/// This process's rank in MPI_COMM_WORLD.
pub fn world_rank() -> Result<u32> {
    with(|e| Ok(e.st.comm(crate::COMM_WORLD)?.rank as u32))
}
