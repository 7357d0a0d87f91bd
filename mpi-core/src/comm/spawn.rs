//! MPI_Comm_spawn and MPI_Comm_spawn_multiple, MPI_Comm_get_parent.
//!
//! The root opens a port and asks the process manager to start the commands (PMI-1 `spawn`,
//! with the port preput as `PARENT_ROOT_PORT_NAME`); the children's MPI_Init connects to it
//! with their MPI_COMM_WORLD ([`connect_parent`]), and the parents accept with `comm`: the
//! intercommunicator of both is the parents' result and the children's parent. Our `mpirun`
//! serves `spawn` by starting a job of its own (`launcher/src/spawn.rs`) with the port in
//! `MADMPI_PARENT_PORT`; under another process manager the children read the key from their
//! KVS. A root whose request is refused, or whose children do not connect within
//! `MADMPI_DPM_TIMEOUT` seconds (60 by default), fails with MPI_ERR_SPAWN in every parent.

use std::time::Instant;

use madmpi_pmi::SpawnBlock;

use super::dynamic::{self, port_of, Side};
use super::*;

/// The key the port travels under (MPICH's name for it).
const PARENT_KEY: &str = "PARENT_ROOT_PORT_NAME";

/// One command of a spawn request.
#[derive(Clone, Debug, Default)]
pub struct SpawnCmd {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// How many processes.
    pub maxprocs: i32,
    /// Its info (key, value): `host`, `wdir`, `path` are served by our launcher.
    pub info: Vec<(String, String)>,
}

/// This process's parent intercommunicator, once connected.
static PARENT: Lazy<Mutex<Option<CommId>>> = Lazy::new(|| Mutex::new(None));

/// MPI_Comm_get_parent's communicator (`None`: not spawned, or disconnected since).
pub fn parent() -> Option<CommId> {
    let p = *PARENT.lock();
    p.filter(|&c| with(|e| e.st.comm(c).map(|_| ())).is_ok())
}

/// The parent's intercommunicator is gone (freed or disconnected).
pub fn forget_parent(c: CommId) {
    let mut p = PARENT.lock();
    if *p == Some(c) {
        *p = None;
    }
}

/// At MPI_Init: a spawned process connects its world to its parents' port. Nothing for a
/// process that was not spawned.
pub fn connect_parent() -> Result<()> {
    let port = std::env::var("MADMPI_PARENT_PORT")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .or_else(|| {
            crate::api::with_pmi(|p| p.and_then(|c| c.get(PARENT_KEY).ok()))
                .filter(|p| !p.trim().is_empty())
        });
    let Some(port) = port else {
        return Ok(());
    };
    let c = dynamic::comm_connect(&port, 0, crate::COMM_WORLD).map_err(|e| {
        Error::new(
            e.class,
            format!(
                "connecting to the parents that spawned this process: {}",
                e.msg
            ),
        )
    })?;
    *PARENT.lock() = Some(c);
    Ok(())
}

/// MPI_Comm_spawn_multiple (and MPI_Comm_spawn: one command): `cmds` significant at `root`.
/// Returns the intercommunicator with the children.
pub fn comm_spawn(cmds: &[SpawnCmd], root: i32, comm: CommId) -> Result<CommId> {
    let cmds = cmds.to_vec();
    dynamic::establish(Side::Accept, root, comm, move || {
        let port = dynamic::open_port()?;
        let r = spawn_and_accept(&cmds, &port);
        let _ = dynamic::close_port(&port);
        r
    })
}

fn spawn_and_accept(cmds: &[SpawnCmd], port: &str) -> Result<madmpi_transports::port::PortConn> {
    if cmds.is_empty() || cmds.iter().any(|c| c.maxprocs < 1) {
        return err(
            ErrorClass::Spawn,
            "every command must start at least one process",
        );
    }
    let blocks: Vec<SpawnBlock> = cmds
        .iter()
        .map(|c| SpawnBlock {
            nprocs: c.maxprocs,
            execname: c.command.clone(),
            args: c.args.clone(),
            preput: vec![(PARENT_KEY.to_owned(), port.to_owned())],
            info: c.info.clone(),
        })
        .collect();
    crate::api::with_pmi(|p| match p {
        None => err(
            ErrorClass::Spawn,
            "this process was not started by a process manager (a singleton): start it with \
             mpirun to spawn",
        ),
        Some(c) => c.spawn(&blocks).map_err(|e| {
            Error::new(
                ErrorClass::Spawn,
                format!("the process manager did not start the processes: {e}"),
            )
        }),
    })?;
    let deadline = Instant::now() + dynamic::timeout();
    let p = port_of(port)?;
    let mut rejected = 0;
    match p.accept_until(deadline, &mut rejected)? {
        Some(c) => Ok(c),
        None => err(
            ErrorClass::Spawn,
            format!(
                "the spawned processes did not connect within {:?} (MADMPI_DPM_TIMEOUT)",
                dynamic::timeout()
            ),
        ),
    }
}
