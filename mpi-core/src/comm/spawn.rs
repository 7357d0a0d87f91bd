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
        None => singleton_spawn(&blocks),
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

/// A singleton (started without a launcher) has no process manager to ask: it starts our
/// `mpirun` itself, as a job of the children's own, exactly as `mpirun` serves a PMI `spawn`
/// (`launcher/src/spawn.rs`); a thread reaps that launcher when it ends.
fn singleton_spawn(blocks: &[SpawnBlock]) -> Result<()> {
    let mpirun = launcher_path()?;
    let mut child = madmpi_launcher::spawn::start_with(&mpirun, blocks)
        .map_err(|e| Error::new(ErrorClass::Spawn, e))?;
    std::thread::Builder::new()
        .name("madmpi-spawn-reaper".into())
        .spawn(move || {
            let _ = child.wait();
        })
        .map_err(|e| Error::new(ErrorClass::Spawn, format!("spawn: a reaper thread: {e}")))?;
    Ok(())
}

/// Our `mpirun`, for a singleton's spawn: `MADMPI_MPIRUN` when set, else next to the object
/// this code is in (`libmadmpi.so` in `<prefix>/lib` has it in `<prefix>/bin`; a Rust program
/// built in the workspace has it in its own directory), else next to the executable. Never a
/// `mpirun` from `PATH`, which may be another MPI's.
pub(crate) fn launcher_path() -> Result<std::path::PathBuf> {
    use std::path::{Path, PathBuf};
    if let Some(p) = std::env::var_os("MADMPI_MPIRUN").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(obj) = object_path() {
        dirs.extend(obj.parent().map(Path::to_path_buf));
    }
    if let Ok(exe) = std::env::current_exe() {
        dirs.extend(exe.parent().map(Path::to_path_buf));
    }
    let tried: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|d| [d.join("mpirun"), d.join("../bin/mpirun")])
        .collect();
    tried.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        Error::new(
            ErrorClass::Spawn,
            format!(
                "this process was started without a launcher (a singleton) and spawns \
                     through madmpi's mpirun, which is not at {}: set MADMPI_MPIRUN to it",
                tried
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        )
    })
}

/// The file (shared library or executable) this code was loaded from.
fn object_path() -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address and fills `info`; a function of this object is a
    // valid address in it.
    let found = unsafe { libc::dladdr(object_path as *const libc::c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let p = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes()));
    std::fs::canonicalize(&p).ok().or(Some(p))
}
