//! PMI-1 "simple" wire protocol: the client a rank uses to bootstrap, and the server side that
//! `mpirun` runs.
//!
//! - [`wire`]: framing and tokenizing (`cmd=... key=value ...` lines, `mcmd=` blocks), never
//!   panicking on peer input;
//! - [`command`]: the typed requests ([`Command`], [`parse_line`]);
//! - [`mapping`]: the `PMI_process_mapping` attribute ([`ProcessMapping`]);
//! - [`client`]: [`Client`], blocking request/reply over `PMI_FD` or `PMI_PORT`;
//! - [`server`]: [`Server`], a sans-IO state machine (KVS, barrier, finalize, abort).
//!
//! Protocol facts follow MPICH's PMI 1.1 message definitions and what Hydra (checked against
//! `mpiexec.hydra` 4.0) and Slurm's `mpi/pmi2` plugin answer on the wire.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod client;
pub mod command;
pub mod mapping;
pub mod server;
mod sys;
pub mod wire;

pub use client::{Client, Error};

/// Every shared-memory object the library creates for job `kvsname` is named
/// `/dev/shm/<this>`… (its node segment, its collectives' areas), so that the launcher can
/// remove what a rank killed mid-job left behind.
pub fn shm_prefix(kvsname: &str) -> String {
    format!("madmpi-{kvsname}")
}
pub use command::{parse_line, Command, SpawnBlock};
pub use mapping::{MappingError, ProcessMapping};
pub use server::{ConnId, Event, Maxes, Server, ServerConfig};
pub use wire::{parse_message, Frame, LineFramer, Message, ParseError};
