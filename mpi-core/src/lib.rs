//! madmpi: an MPI implementation after NewMadeleine's MAD-MPI — the engine and the native Rust API.
//!
//! Three levels:
//! - the raw API at the crate root ([`init`], [`isend`], [`irecv`], [`wait`], …), used by the C
//!   library: it takes raw buffers and typed ids and reports [`Error`]s with MPI error classes;
//! - the safe API in [`safe`] ([`safe::Universe`], [`safe::Communicator`]) for Rust programs;
//! - Madeleine II's message construction in [`madeleine`] (channels, pack/unpack with modes).
//!
//! One engine per process lives behind a lock, so every function here may be called from any
//! thread (MPI_THREAD_MULTIPLE). Waiting functions poll the engine, spinning briefly and then
//! yielding the CPU, so that more ranks than cores still make progress.

#![deny(missing_docs)]

mod api;
mod bootstrap;
mod coll;
mod comm;
mod engine;
pub mod error;
pub mod group;
mod log;
pub mod madeleine;
pub mod op;
mod part;
mod request;
pub mod rma;
pub mod safe;
pub mod tool;
pub mod topo;
pub mod trace;
pub mod wire;

pub use api::*;
pub use coll::{
    allgather, allgather_init, allgatherv, allgatherv_init, allreduce, allreduce_init, alltoall,
    alltoall_init, alltoallw, alltoallw_init, barrier, barrier_init, bcast, bcast_init, gather,
    gather_init, gatherv, gatherv_init, iallgather, iallgatherv, iallreduce, ialltoall, ialltoallw,
    ibarrier, ibcast, igather, igatherv, ineighbor_alltoallw, ireduce, ireduce_scatter, iscan,
    iscatter, iscatterv, neighbor_alltoallw, neighbor_alltoallw_init, neighbor_counts, reduce,
    reduce_init, reduce_local, reduce_scatter, reduce_scatter_init, scan, scan_init, scatter,
    scatter_init, scatterv, scatterv_init, Blocks, Data, Input, ROOT,
};
pub use comm::{blocking_collective, close_port, comm_accept, comm_connect, comm_join, open_port};
pub use comm::{
    comm_create_from_group, comm_create_group, comm_dup, comm_idup, comm_is_inter, comm_role,
    comm_split, comm_split_shared, disconnect_wait, free_comm, intercomm_create, intercomm_merge,
    topology,
};
pub use comm::{comm_from_session_group, intercomm_from_session_groups};
pub use comm::{comm_spawn, connect_parent, parent, SpawnCmd};
pub use engine::{BufferOwner, Strategy, BSEND_OVERHEAD};
pub use error::{Error, ErrorClass, Result};
pub use group::{Group, GroupComparison};
pub use madmpi_datatypes::Datatype;
pub use madmpi_transports::emu::charge_host_copy;
pub use op::{BuiltinOp, Op};
pub use part::{parrived, pready, precv_init, psend_init};
pub use request::{RequestId, SendMode, Status, EMPTY_STATUS, PROC_NULL_STATUS};

/// MPI_ANY_SOURCE.
pub const ANY_SOURCE: i32 = -1;
/// MPI_ANY_TAG.
pub const ANY_TAG: i32 = -2;
/// MPI_PROC_NULL.
pub const PROC_NULL: i32 = -3;
/// MPI_UNDEFINED.
pub const UNDEFINED: i32 = -32766;
/// The largest tag value (MPI_TAG_UB attribute).
pub const TAG_UB: i32 = i32::MAX;

/// A communicator known to the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CommId(pub u32);

/// A session of the sessions model (MPI_Session_init), numbered by the engine from 1 in the
/// order the sessions start; a number is never given twice in a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionId(pub u32);

/// MPI_COMM_WORLD.
pub const COMM_WORLD: CommId = CommId(0);
/// MPI_COMM_SELF.
pub const COMM_SELF: CommId = CommId(1);

/// A message taken off the queue by MPI_Mprobe / MPI_Improbe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MessageId(pub u64);

impl MessageId {
    /// MPI_MESSAGE_NO_PROC: the message of a probe on MPI_PROC_NULL.
    pub const NO_PROC: MessageId = MessageId(0);
}

/// Thread support levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ThreadLevel {
    /// MPI_THREAD_SINGLE.
    Single,
    /// MPI_THREAD_FUNNELED.
    Funneled,
    /// MPI_THREAD_SERIALIZED.
    Serialized,
    /// MPI_THREAD_MULTIPLE.
    Multiple,
}
