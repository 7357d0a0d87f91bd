//! MPI_Comm_spawn, MPI_Comm_spawn_multiple and MPI_Comm_get_parent (`madmpi::comm_spawn`:
//! the launcher starts the children through PMI's `spawn`). The commands, arguments and infos
//! are significant at the root only; every process gets the error codes (one per process
//! asked for where it knows how many: all of them at the root, the children actually started
//! elsewhere).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

use madmpi::{ErrorClass, SpawnCmd};
use parking_lot::Mutex;

use super::common::*;
use super::info::pairs;
use crate::abi::*;
use crate::handles;

/// A NUL-terminated string.
unsafe fn text(p: *const c_char, what: &str) -> R<String> {
    if p.is_null() {
        return fail(ErrorClass::Arg, format!("invalid argument: {what} is NULL"));
    }
    Ok(CStr::from_ptr(p).to_string_lossy().into_owned())
}

/// A NULL-terminated argument vector (MPI_ARGV_NULL: none).
unsafe fn argv_of(argv: *mut *mut c_char) -> R<Vec<String>> {
    let mut v = Vec::new();
    if argv.is_null() {
        return Ok(v);
    }
    let mut i = 0;
    while !(*argv.add(i)).is_null() {
        v.push(text(*argv.add(i), "argv[i]")?);
        i += 1;
        if i > 1 << 20 {
            return fail(ErrorClass::Arg, "argv is not NULL-terminated");
        }
    }
    Ok(v)
}

unsafe fn command(
    cmd: *const c_char,
    argv: *mut *mut c_char,
    maxprocs: c_int,
    info: MPI_Info,
) -> R<SpawnCmd> {
    if maxprocs < 1 {
        return fail(
            ErrorClass::Arg,
            format!("invalid argument: maxprocs {maxprocs}"),
        );
    }
    Ok(SpawnCmd {
        command: text(cmd, "command")?,
        args: argv_of(argv)?,
        maxprocs,
        info: if info == MPI_INFO_NULL {
            Vec::new()
        } else {
            pairs(info)?
        },
    })
}

/// The common part: the root's commands (built by `cmds`, only called at the root), the
/// spawn, the error codes.
unsafe fn spawn(
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    errcodes: *mut c_int,
    cmds: impl FnOnce() -> R<Vec<SpawnCmd>>,
) -> R<()> {
    let c = handles::comm(comm)?;
    let o = out(intercomm, "intercomm")?;
    let at_root = madmpi::comm_rank(c)? == root;
    let cmds = if at_root { cmds()? } else { Vec::new() };
    let asked: i32 = cmds.iter().map(|c| c.maxprocs).sum();
    let fill = |n: i32, code: c_int| {
        if !errcodes.is_null() {
            for i in 0..n.max(0) as usize {
                *errcodes.add(i) = code;
            }
        }
    };
    match madmpi::comm_spawn(&cmds, root, c) {
        Ok(id) => {
            *o = super::comm_mgmt::register(id, comm)?;
            let n = if at_root {
                asked
            } else {
                madmpi::comm_info(id)?.remote.map_or(0, |r| r.len() as i32)
            };
            fill(n, MPI_SUCCESS);
            Ok(())
        }
        Err(e) => {
            fill(asked, MPI_ERR_SPAWN);
            *o = MPI_COMM_NULL;
            Err(e)
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Comm_spawn(
    command_: *const c_char,
    argv: *mut *mut c_char,
    maxprocs: c_int,
    info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> c_int {
    let r = spawn(root, comm, intercomm, array_of_errcodes, || {
        Ok(vec![command(command_, argv, maxprocs, info)?])
    });
    finish(comm, r, &|| {
        format!(
            "MPI_Comm_spawn(maxprocs={maxprocs}, root={root}, comm={})",
            handles::comm_name(comm)
        )
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Comm_spawn_multiple(
    count: c_int,
    array_of_commands: *mut *mut c_char,
    array_of_argv: *mut *mut *mut c_char,
    array_of_maxprocs: *const c_int,
    array_of_info: *const MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> c_int {
    let r = spawn(root, comm, intercomm, array_of_errcodes, || {
        if count < 1 {
            return fail(ErrorClass::Arg, format!("invalid argument: count {count}"));
        }
        if array_of_commands.is_null() || array_of_maxprocs.is_null() || array_of_info.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: a NULL array");
        }
        (0..count as usize)
            .map(|i| {
                let argv = if array_of_argv.is_null() {
                    std::ptr::null_mut()
                } else {
                    *array_of_argv.add(i)
                };
                command(
                    *array_of_commands.add(i),
                    argv,
                    *array_of_maxprocs.add(i),
                    *array_of_info.add(i),
                )
            })
            .collect()
    });
    finish(comm, r, &|| {
        format!(
            "MPI_Comm_spawn_multiple(count={count}, root={root}, comm={})",
            handles::comm_name(comm)
        )
    })
}

/// The handle of the parent intercommunicator, made once.
static PARENT: Mutex<Option<(madmpi::CommId, usize)>> = Mutex::new(None);

/// MPI_Comm_get_parent: the intercommunicator with the parents of a spawned process, until it
/// is freed or disconnected; MPI_COMM_NULL otherwise.
pub unsafe fn MPI_Comm_get_parent(parent: *mut MPI_Comm) -> c_int {
    let r = (|| {
        running()?;
        let o = out(parent, "parent")?;
        *o = match madmpi::parent() {
            None => MPI_COMM_NULL,
            Some(id) => {
                let mut p = PARENT.lock();
                match *p {
                    Some((i, h))
                        if i == id && handles::comm(h as MPI_Comm).is_ok_and(|x| x == id) =>
                    {
                        h as MPI_Comm
                    }
                    _ => {
                        let h = super::comm_mgmt::register(id, MPI_COMM_WORLD)?;
                        *p = Some((id, h as usize));
                        h
                    }
                }
            }
        };
        Ok(())
    })();
    finish(MPI_COMM_SELF, r, &|| "MPI_Comm_get_parent".to_string())
}
