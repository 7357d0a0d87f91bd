//! Communicator management: duplication (with attribute copying), split, creation from groups,
//! intercommunicators, freeing (with attribute deletion), comparison, names and info hints.
//! A new communicator starts with the error handler of the one it was made from.

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

use madmpi::{CommId, ErrorClass, Group};
use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::attr::{self, Obj};
use super::common::*;
use super::group::{compare_code, group};
use super::info::{new_info, pairs, Pairs};
use crate::abi::*;
use crate::errors;
use crate::handles;

/// Names and info hints of communicators, by handle value.
#[derive(Default)]
struct Meta {
    names: HashMap<usize, String>,
    infos: HashMap<usize, Pairs>,
}

static META: Lazy<Mutex<Meta>> = Lazy::new(Mutex::default);

/// A failure with an exact error code (callbacks return arbitrary codes).
type E = (c_int, String);

fn code(e: madmpi::Error) -> E {
    (errors::class_code(e.class), e.msg)
}

fn done(comm: MPI_Comm, call: &dyn Fn() -> String, r: Result<(), E>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err((c, why)) => errors::raise_code(comm, call, c, &why),
    }
}

/// Give a communicator the core created a handle, with `parent`'s error handler.
pub(crate) fn register(id: CommId, parent: MPI_Comm) -> R<MPI_Comm> {
    let errh = handles::comm_errhandler(parent).unwrap_or(MPI_ERRORS_ARE_FATAL as usize);
    handles::register_comm(id, errh)
}

/// Register, or MPI_COMM_NULL.
pub(crate) fn register_opt(id: Option<CommId>, parent: MPI_Comm) -> R<MPI_Comm> {
    match id {
        Some(id) => register(id, parent),
        None => Ok(MPI_COMM_NULL),
    }
}

fn info_arg(info: MPI_Info) -> R<Pairs> {
    if info == MPI_INFO_NULL {
        Ok(Vec::new())
    } else {
        pairs(info)
    }
}

/// Duplicate: handle, attributes (copy callbacks), and the hints given (none for a plain dup).
/// On failure `*newcomm` is MPI_COMM_NULL, as in MPICH and Open MPI.
///
/// # Safety
/// `newcomm` and `req` are null or point to writable storage.
unsafe fn dup_into(
    comm: MPI_Comm,
    hints: Option<Pairs>,
    newcomm: *mut MPI_Comm,
    req: Option<*mut MPI_Request>,
) -> Result<(), E> {
    let o = out(newcomm, "newcomm").map_err(code)?;
    if let Some(r) = req {
        out(r, "request").map_err(code)?;
    }
    let r = dup(comm, hints, req);
    *o = *r.as_ref().unwrap_or(&MPI_COMM_NULL);
    r.map(|_| ())
}

fn dup(comm: MPI_Comm, hints: Option<Pairs>, req: Option<*mut MPI_Request>) -> Result<MPI_Comm, E> {
    let c = handles::comm(comm).map_err(code)?;
    let (id, rid) = match req {
        None => (madmpi::comm_dup(c).map_err(code)?, None),
        Some(_) => {
            let (id, r) = madmpi::comm_idup(c).map_err(code)?;
            (id, Some(r))
        }
    };
    let h = register(id, comm).map_err(code)?;
    if let Err(e) = attr::copy_all(Obj::Comm, comm as usize, h as usize) {
        if rid.is_none() {
            let _ = madmpi::free_comm(id);
            let _ = handles::free_comm(h);
        }
        return Err(e);
    }
    // Since MPI-4.0 no hint passes from one communicator to another, not even through
    // MPI_Comm_dup (MPI-3.1 made dup the exception); only the `_with_info` forms set any.
    let hints = hints.unwrap_or_default();
    if !hints.is_empty() {
        META.lock().infos.insert(h as usize, hints);
    }
    if let (Some(rid), Some(p)) = (rid, req) {
        let r = handles::new_request(rid, comm).map_err(code)?;
        // SAFETY: checked non-null by the caller.
        unsafe { *p = r };
    }
    Ok(h)
}

pub unsafe fn MPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
    let r = dup_into(comm, None, newcomm, None);
    done(
        comm,
        &|| format!("MPI_Comm_dup(comm={})", handles::comm_name(comm)),
        r,
    )
}

pub unsafe fn MPI_Comm_dup_with_info(
    comm: MPI_Comm,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = info_arg(info)
        .map_err(code)
        .and_then(|h| dup_into(comm, Some(h), newcomm, None));
    done(
        comm,
        &|| format!("MPI_Comm_dup_with_info(comm={})", handles::comm_name(comm)),
        r,
    )
}

pub unsafe fn MPI_Comm_idup(
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let r = dup_into(comm, None, newcomm, Some(request));
    done(
        comm,
        &|| format!("MPI_Comm_idup(comm={})", handles::comm_name(comm)),
        r,
    )
}

pub unsafe fn MPI_Comm_idup_with_info(
    comm: MPI_Comm,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let r = info_arg(info)
        .map_err(code)
        .and_then(|h| dup_into(comm, Some(h), newcomm, Some(request)));
    done(
        comm,
        &|| format!("MPI_Comm_idup_with_info(comm={})", handles::comm_name(comm)),
        r,
    )
}

pub unsafe fn MPI_Comm_split(
    comm: MPI_Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let o = out(newcomm, "newcomm")?;
        *o = register_opt(madmpi::comm_split(c, color, key)?, comm)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!(
            "MPI_Comm_split(comm={}, color={color}, key={key})",
            handles::comm_name(comm)
        )
    })
}

pub unsafe fn MPI_Comm_split_type(
    comm: MPI_Comm,
    split_type: c_int,
    key: c_int,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let o = out(newcomm, "newcomm")?;
        let hints = info_arg(info)?;
        let guided_shared = hints
            .iter()
            .any(|(k, v)| k == "mpi_hw_resource_type" && v == "mpi_shared_memory");
        let id = match split_type {
            MPI_COMM_TYPE_SHARED => madmpi::comm_split_shared(c, key)?,
            MPI_COMM_TYPE_HW_GUIDED | MPI_COMM_TYPE_RESOURCE_GUIDED if guided_shared => {
                madmpi::comm_split_shared(c, key)?
            }
            // Unknown resources and the unguided split (which must return a strict subset)
            // give MPI_COMM_NULL, collectively.
            MPI_UNDEFINED
            | MPI_COMM_TYPE_HW_GUIDED
            | MPI_COMM_TYPE_RESOURCE_GUIDED
            | MPI_COMM_TYPE_HW_UNGUIDED => madmpi::comm_split(c, MPI_UNDEFINED, key)?,
            t => return fail(ErrorClass::Arg, format!("invalid split_type {t}")),
        };
        *o = register_opt(id, comm)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!(
            "MPI_Comm_split_type(comm={}, split_type={split_type}, key={key})",
            handles::comm_name(comm)
        )
    })
}

pub unsafe fn MPI_Comm_create(comm: MPI_Comm, grp: MPI_Group, newcomm: *mut MPI_Comm) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let o = out(newcomm, "newcomm")?;
        let g = group(grp)?;
        *o = register_opt(madmpi::comm_create_from_group(c, g.world_ranks())?, comm)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_create(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Comm_create_group(
    comm: MPI_Comm,
    grp: MPI_Group,
    tag: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let o = out(newcomm, "newcomm")?;
        let g = group(grp)?;
        *o = register_opt(madmpi::comm_create_group(c, g.world_ranks(), tag)?, comm)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!(
            "MPI_Comm_create_group(comm={}, tag={tag})",
            handles::comm_name(comm)
        )
    })
}

pub unsafe fn MPI_Comm_free(comm: *mut MPI_Comm) -> c_int {
    let h = comm.as_ref().copied().unwrap_or(MPI_COMM_NULL);
    let r = free_handle(comm, false);
    done(
        h,
        &|| format!("MPI_Comm_free(comm={})", handles::comm_name(h)),
        r,
    )
}

/// MPI_Comm_disconnect: MPI_Comm_free once the pending communication on the communicator is
/// over and its members are all there (`madmpi::disconnect_wait`).
pub unsafe fn MPI_Comm_disconnect(comm: *mut MPI_Comm) -> c_int {
    let h = comm.as_ref().copied().unwrap_or(MPI_COMM_NULL);
    let r = free_handle(comm, true);
    done(
        h,
        &|| format!("MPI_Comm_disconnect(comm={})", handles::comm_name(h)),
        r,
    )
}

/// The common part of MPI_Comm_free and MPI_Comm_disconnect.
unsafe fn free_handle(comm: *mut MPI_Comm, disconnect: bool) -> Result<(), E> {
    let slot = out(comm, "comm").map_err(code)?;
    let c = handles::comm(*slot).map_err(code)?;
    if c == madmpi::COMM_WORLD || c == madmpi::COMM_SELF {
        return Err((
            MPI_ERR_COMM,
            format!(
                "cannot {} the predefined communicator {}",
                if disconnect { "disconnect" } else { "free" },
                handles::comm_name(*slot)
            ),
        ));
    }
    if disconnect {
        madmpi::disconnect_wait(c).map_err(code)?;
    }
    attr::delete_all(Obj::Comm, *slot as usize)?;
    madmpi::free_comm(c).map_err(code)?;
    handles::free_comm(*slot).map_err(code)?;
    let mut m = META.lock();
    m.names.remove(&(*slot as usize));
    m.infos.remove(&(*slot as usize));
    *slot = MPI_COMM_NULL;
    Ok(())
}

pub unsafe fn MPI_Comm_compare(comm1: MPI_Comm, comm2: MPI_Comm, result: *mut c_int) -> c_int {
    let r = (|| {
        let a = handles::comm(comm1)?;
        let b = handles::comm(comm2)?;
        let o = out(result, "result")?;
        if a == b {
            *o = MPI_IDENT;
            return Ok(());
        }
        let ia = madmpi::comm_info(a)?;
        let ib = madmpi::comm_info(b)?;
        let compare = |a: &std::sync::Arc<[u32]>, b: &std::sync::Arc<[u32]>| {
            compare_code(Group::from(a.clone()).compare(&Group::from(b.clone())))
        };
        let local = compare(&ia.local, &ib.local);
        *o = match (&ia.remote, &ib.remote) {
            (None, None) => match local {
                MPI_IDENT => MPI_CONGRUENT,
                x => x,
            },
            (Some(ra), Some(rb)) => match (local, compare(ra, rb)) {
                (MPI_IDENT, MPI_IDENT) => MPI_CONGRUENT,
                (MPI_UNEQUAL, _) | (_, MPI_UNEQUAL) => MPI_UNEQUAL,
                _ => MPI_SIMILAR,
            },
            _ => MPI_UNEQUAL,
        };
        Ok(())
    })();
    finish(comm1, r, &|| {
        format!(
            "MPI_Comm_compare(comm1={}, comm2={})",
            handles::comm_name(comm1),
            handles::comm_name(comm2)
        )
    })
}

pub unsafe fn MPI_Comm_test_inter(comm: MPI_Comm, flag: *mut c_int) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        *out(flag, "flag")? = madmpi::comm_is_inter(c)? as c_int;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_test_inter(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Comm_remote_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let o = out(size, "size")?;
        let rem = madmpi::comm_info(c)?
            .remote
            .ok_or_else(|| madmpi::Error::new(ErrorClass::Comm, "not an intercommunicator"))?;
        *o = rem.len() as c_int;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_remote_size(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Comm_set_name(comm: MPI_Comm, comm_name: *const c_char) -> c_int {
    let r = (|| {
        handles::comm(comm)?;
        if comm_name.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: comm_name is NULL");
        }
        let mut s = CStr::from_ptr(comm_name).to_string_lossy().into_owned();
        s.truncate(MPI_MAX_OBJECT_NAME as usize - 1);
        META.lock().names.insert(comm as usize, s);
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_set_name(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Comm_get_name(
    comm: MPI_Comm,
    comm_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    let r = (|| {
        let len = out(resultlen, "resultlen")?;
        if comm_name.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: comm_name is NULL");
        }
        // MPI-4.1: the null handle has a name too.
        if comm == MPI_COMM_NULL {
            *len = copy_cstr("MPI_COMM_NULL", comm_name, MPI_MAX_OBJECT_NAME as usize);
            return Ok(());
        }
        handles::comm(comm)?;
        let name = META
            .lock()
            .names
            .get(&(comm as usize))
            .cloned()
            .unwrap_or_else(|| match comm {
                MPI_COMM_WORLD => "MPI_COMM_WORLD".into(),
                MPI_COMM_SELF => "MPI_COMM_SELF".into(),
                _ => String::new(),
            });
        *len = copy_cstr(&name, comm_name, MPI_MAX_OBJECT_NAME as usize);
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_get_name(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Comm_set_info(comm: MPI_Comm, info: MPI_Info) -> c_int {
    let r = (|| {
        handles::comm(comm)?;
        let p = pairs(info)?;
        let mut m = META.lock();
        let e = m.infos.entry(comm as usize).or_default();
        for (k, v) in p {
            match e.iter_mut().find(|(x, _)| *x == k) {
                Some(x) => x.1 = v,
                None => e.push((k, v)),
            }
        }
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_set_info(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Comm_get_info(comm: MPI_Comm, info_used: *mut MPI_Info) -> c_int {
    let r = (|| {
        handles::comm(comm)?;
        let o = out(info_used, "info_used")?;
        let p = META
            .lock()
            .infos
            .get(&(comm as usize))
            .cloned()
            .unwrap_or_default();
        *o = new_info(p)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_get_info(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Intercomm_create(
    local_comm: MPI_Comm,
    local_leader: c_int,
    peer_comm: MPI_Comm,
    remote_leader: c_int,
    tag: c_int,
    newintercomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        let l = handles::comm(local_comm)?;
        let o = out(newintercomm, "newintercomm")?;
        // The peer communicator is significant at the local leader only.
        let p = if madmpi::comm_rank(l)? == local_leader {
            handles::comm(peer_comm)?
        } else {
            madmpi::COMM_WORLD
        };
        let id = madmpi::intercomm_create(l, local_leader, p, remote_leader, tag)?;
        *o = register(id, local_comm)?;
        Ok(())
    })();
    finish(local_comm, r, &|| {
        format!(
            "MPI_Intercomm_create(local_comm={}, local_leader={local_leader}, peer_comm={}, \
             remote_leader={remote_leader}, tag={tag})",
            handles::comm_name(local_comm),
            handles::comm_name(peer_comm)
        )
    })
}

pub unsafe fn MPI_Intercomm_merge(
    intercomm: MPI_Comm,
    high: c_int,
    newintracomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        let c = handles::comm(intercomm)?;
        let o = out(newintracomm, "newintracomm")?;
        *o = register(madmpi::intercomm_merge(c, high != 0)?, intercomm)?;
        Ok(())
    })();
    finish(intercomm, r, &|| {
        format!(
            "MPI_Intercomm_merge(intercomm={}, high={high})",
            handles::comm_name(intercomm)
        )
    })
}
