//! The sessions model: MPI_Session_init/finalize, process sets, groups and communicators made
//! from them, session error handlers and info.
//!
//! A session is an entry of a handle table (its error handler and its info). The first
//! MPI_Session_init of a process without MPI_Init starts the engine (`madmpi::session_start`);
//! MPI_Init and sessions share it, in either order; sessions may be initialized again after the
//! last one was finalized (see `madmpi::session_end`). The process sets are `mpi://WORLD`, `mpi://SELF`
//! and one per node, `madmpi://node/<n>` (the nodes numbered in the order of their lowest
//! world rank; with `MADMPI_FAKE_HOSTS` the pseudo-hosts are the nodes).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

use madmpi::{ErrorClass, Group, SessionId, ThreadLevel};
use parking_lot::{const_mutex, Mutex};

use super::common::*;
use super::group::{group_of, new_group_of};
use super::info::{new_info, pairs, Pairs};
use crate::abi::*;
use crate::errors;
use crate::handles::{self, Errh, ErrhFn, Kind, Table};

struct SessionEntry {
    /// The engine's id of it.
    id: SessionId,
    /// Its error handler (a handle, one reference held).
    errh: usize,
    /// The info it was created with, plus what it provides (`thread_level`).
    info: Pairs,
}

static SESSIONS: Mutex<Table<SessionEntry>> = const_mutex(Table::new(Kind::Session));

fn level_name(l: ThreadLevel) -> &'static str {
    match l {
        ThreadLevel::Single => "MPI_THREAD_SINGLE",
        ThreadLevel::Funneled => "MPI_THREAD_FUNNELED",
        ThreadLevel::Serialized => "MPI_THREAD_SERIALIZED",
        ThreadLevel::Multiple => "MPI_THREAD_MULTIPLE",
    }
}

fn level_of(name: &str) -> Option<ThreadLevel> {
    Some(match name.trim() {
        "MPI_THREAD_SINGLE" => ThreadLevel::Single,
        "MPI_THREAD_FUNNELED" => ThreadLevel::Funneled,
        "MPI_THREAD_SERIALIZED" => ThreadLevel::Serialized,
        "MPI_THREAD_MULTIPLE" => ThreadLevel::Multiple,
        _ => return None,
    })
}

/// What `f` reads of the entry of session `s`.
fn entry<T>(s: MPI_Session, f: impl FnOnce(&SessionEntry) -> T) -> R<T> {
    match s as usize {
        0x120 => fail(ErrorClass::Session, "invalid session: MPI_SESSION_NULL"),
        h => SESSIONS.lock().get(h).map(f),
    }
}

fn session_errh(s: MPI_Session) -> R<usize> {
    entry(s, |e| e.errh)
}

/// The engine's id of session `s`.
pub(crate) fn session_id(s: MPI_Session) -> R<SessionId> {
    entry(s, |e| e.id)
}

/// Call a session error handler function; the code as it left it.
fn call_user(f: ErrhFn, s: MPI_Session, code: c_int) -> c_int {
    let mut s = s;
    let mut c = code;
    if let ErrhFn::Session(func) = f {
        // SAFETY: a C function of the standard's session errhandler type; the variadic tail
        // is empty.
        unsafe { func(&mut s, &mut c) }
    }
    c
}

/// Report `e` on the handler of session `s` (MPI_ERRORS_RETURN when the session is invalid:
/// no handler of it is in force).
fn raise_on(s: MPI_Session, call: &dyn Fn() -> String, e: madmpi::Error) -> c_int {
    let h = session_errh(s)
        .ok()
        .and_then(|h| handles::errhandler(h as MPI_Errhandler).ok())
        .unwrap_or(Errh::Return);
    let code = errors::error_code(&e);
    errors::raise_by(h, &|f, c| call_user(f, s, c), call, code, &e.msg)
}

/// MPI_SUCCESS, or `r`'s error raised on the handler of session `s`.
pub(crate) fn done(s: MPI_Session, name: &str, r: R<()>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise_on(s, &|| name.to_string(), e),
    }
}

/// A C string argument.
fn string_arg(p: *const c_char, what: &str, max: c_int) -> R<String> {
    if p.is_null() {
        return fail(ErrorClass::Arg, format!("invalid argument: {what} is NULL"));
    }
    // SAFETY: a non-null string argument is a C string (the caller's contract).
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    if s.len() >= max as usize {
        return fail(
            ErrorClass::Arg,
            format!("{what} is longer than {} characters", max - 1),
        );
    }
    Ok(s)
}

/// The process sets: (name, world ranks).
fn psets() -> R<Vec<(String, Vec<u32>)>> {
    let n = madmpi::world_size()?;
    let me = madmpi::world_rank()?;
    let mut v = vec![
        ("mpi://WORLD".to_string(), (0..n).collect()),
        ("mpi://SELF".to_string(), vec![me]),
    ];
    for (i, ranks) in madmpi::nodes().into_iter().enumerate() {
        v.push((format!("madmpi://node/{i}"), ranks));
    }
    Ok(v)
}

fn pset(name: &str) -> R<Vec<u32>> {
    // Names are case-insensitive in the `mpi://` scheme (the standard).
    psets()?
        .into_iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, r)| r)
        .ok_or_else(|| {
            madmpi::Error::new(
                ErrorClass::Arg,
                format!("no process set named {name:?} (see MPI_Session_get_nth_pset)"),
            )
        })
}

// ------------------------------------------------------------------------------------ lifetime

pub unsafe fn MPI_Session_init(
    info: MPI_Info,
    errhandler: MPI_Errhandler,
    session: *mut MPI_Session,
) -> c_int {
    // MPI_ERRHANDLER_NULL: the default, MPI_ERRORS_ARE_FATAL.
    let errhandler = if errhandler == MPI_ERRHANDLER_NULL {
        MPI_ERRORS_ARE_FATAL
    } else {
        errhandler
    };
    let h = handles::errhandler(errhandler);
    let r = (|| {
        let out = out(session, "session")?;
        let hh = match &h {
            Ok(x) => *x,
            Err(e) => return fail(e.class, e.msg.clone()),
        };
        if let Errh::User(ErrhFn::Comm(_) | ErrhFn::Win(_) | ErrhFn::File(_)) = hh {
            return fail(
                ErrorClass::Arg,
                "the error handler was not created for sessions (MPI_Session_create_errhandler)",
            );
        }
        let mut p = if info == MPI_INFO_NULL {
            Vec::new()
        } else {
            pairs(info)?
        };
        let asked = match p.iter().find(|(k, _)| k == "thread_level") {
            Some((_, v)) => level_of(v).ok_or_else(|| {
                madmpi::Error::new(
                    ErrorClass::Info,
                    format!("thread_level {v:?} is not one of MPI_THREAD_SINGLE … MULTIPLE"),
                )
            })?,
            None => ThreadLevel::Multiple,
        };
        let (provided, id) = madmpi::session_start(asked)?;
        p.retain(|(k, _)| k != "thread_level");
        p.push(("thread_level".into(), level_name(provided).into()));
        let entry = SessionEntry {
            id,
            errh: errhandler as usize,
            info: p,
        };
        match SESSIONS.lock().insert(entry) {
            Ok(s) => {
                handles::errh_ref(errhandler as usize);
                *out = s as MPI_Session;
                Ok(())
            }
            Err(e) => {
                let _ = madmpi::session_end(id);
                Err(e)
            }
        }
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => {
            let code = errors::error_code(&e);
            errors::raise_by(
                h.unwrap_or(Errh::Return),
                &|f, c| call_user(f, MPI_SESSION_NULL, c),
                &|| "MPI_Session_init".to_string(),
                code,
                &e.msg,
            )
        }
    }
}

pub unsafe fn MPI_Session_finalize(session: *mut MPI_Session) -> c_int {
    let s0 = if session.is_null() {
        MPI_SESSION_NULL
    } else {
        *session
    };
    let r = (|| {
        let s = *input(session as *const MPI_Session, "session")?;
        madmpi::session_end(session_id(s)?)?;
        let e = SESSIONS.lock().remove(s as usize)?;
        handles::errh_unref(e.errh);
        *session = MPI_SESSION_NULL;
        Ok(())
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise_on(s0, &|| "MPI_Session_finalize".to_string(), e),
    }
}

pub unsafe fn MPI_Session_get_info(session: MPI_Session, info_used: *mut MPI_Info) -> c_int {
    let r = (|| {
        let out = out(info_used, "info_used")?;
        let p = entry(session, |e| e.info.clone())?;
        *out = new_info(p)?;
        Ok(())
    })();
    done(session, "MPI_Session_get_info", r)
}

// ------------------------------------------------------------------------------------ psets

pub unsafe fn MPI_Session_get_num_psets(
    session: MPI_Session,
    info: MPI_Info,
    npset_names: *mut c_int,
) -> c_int {
    let r = (|| {
        session_errh(session)?;
        if info != MPI_INFO_NULL {
            pairs(info)?;
        }
        let out = out(npset_names, "npset_names")?;
        *out = psets()?.len() as c_int;
        Ok(())
    })();
    done(session, "MPI_Session_get_num_psets", r)
}

pub unsafe fn MPI_Session_get_nth_pset(
    session: MPI_Session,
    info: MPI_Info,
    n: c_int,
    pset_len: *mut c_int,
    pset_name: *mut c_char,
) -> c_int {
    let r = (|| {
        session_errh(session)?;
        if info != MPI_INFO_NULL {
            pairs(info)?;
        }
        let len = out(pset_len, "pset_len")?;
        let all = psets()?;
        let Some((name, _)) = usize::try_from(n).ok().and_then(|i| all.get(i)) else {
            return fail(
                ErrorClass::Arg,
                format!("no process set number {n} (there are {})", all.len()),
            );
        };
        if *len <= 0 {
            // The length the name needs, its terminating NUL included.
            *len = name.len() as c_int + 1;
            return Ok(());
        }
        if pset_name.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: pset_name is NULL");
        }
        let k = name.len().min(*len as usize - 1);
        // SAFETY: pset_name holds *pset_len characters (the caller's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(name.as_ptr() as *const c_char, pset_name, k);
            *pset_name.add(k) = 0;
        }
        Ok(())
    })();
    done(session, "MPI_Session_get_nth_pset", r)
}

pub unsafe fn MPI_Session_get_pset_info(
    session: MPI_Session,
    pset_name: *const c_char,
    info: *mut MPI_Info,
) -> c_int {
    let r = (|| {
        session_errh(session)?;
        let name = string_arg(pset_name, "pset_name", MPI_MAX_PSET_NAME_LEN)?;
        let out = out(info, "info")?;
        let ranks = pset(&name)?;
        *out = new_info(vec![("mpi_size".into(), ranks.len().to_string())])?;
        Ok(())
    })();
    done(session, "MPI_Session_get_pset_info", r)
}

pub unsafe fn MPI_Group_from_session_pset(
    session: MPI_Session,
    pset_name: *const c_char,
    newgroup: *mut MPI_Group,
) -> c_int {
    let r = (|| {
        let id = session_id(session)?;
        let name = string_arg(pset_name, "pset_name", MPI_MAX_PSET_NAME_LEN)?;
        let out = out(newgroup, "newgroup")?;
        *out = new_group_of(Group::from(pset(&name)?), Some(id))?;
        Ok(())
    })();
    done(session, "MPI_Group_from_session_pset", r)
}

// ------------------------------------------------------------------------------------ communicators

/// The error handler a new communicator starts with (MPI_ERRHANDLER_NULL: the default,
/// MPI_ERRORS_ARE_FATAL).
fn comm_errh_arg(e: MPI_Errhandler) -> R<usize> {
    if e == MPI_ERRHANDLER_NULL {
        return Ok(MPI_ERRORS_ARE_FATAL as usize);
    }
    match handles::errhandler(e)? {
        Errh::User(ErrhFn::Win(_) | ErrhFn::File(_) | ErrhFn::Session(_)) => fail(
            ErrorClass::Arg,
            "the error handler was not created for communicators (MPI_Comm_create_errhandler)",
        ),
        _ => Ok(e as usize),
    }
}

/// Raise on the handler given to the call (the new communicator's), as MPICH does.
fn finish_with(errh: MPI_Errhandler, name: &str, r: R<()>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => {
            let h = handles::errhandler(errh).unwrap_or(Errh::Fatal);
            let h = if errh == MPI_ERRHANDLER_NULL {
                Errh::Fatal
            } else {
                h
            };
            let code = errors::error_code(&e);
            errors::raise_by(
                h,
                &|f, c| {
                    let mut c = c;
                    if let ErrhFn::Comm(func) = f {
                        let mut comm = MPI_COMM_NULL;
                        // SAFETY: a communicator handler of the standard's type.
                        unsafe { func(&mut comm, &mut c) }
                    }
                    c
                },
                &|| name.to_string(),
                code,
                &e.msg,
            )
        }
    }
}

pub unsafe fn MPI_Comm_create_from_group(
    group_h: MPI_Group,
    stringtag: *const c_char,
    info: MPI_Info,
    errhandler: MPI_Errhandler,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        running()?;
        let (g, session) = group_of(group_h)?;
        let tag = string_arg(stringtag, "stringtag", MPI_MAX_STRINGTAG_LEN)?;
        if info != MPI_INFO_NULL {
            pairs(info)?;
        }
        let errh = comm_errh_arg(errhandler)?;
        let out = out(newcomm, "newcomm")?;
        *out = match madmpi::comm_from_session_group(g.world_ranks(), &tag, session)? {
            Some(id) => handles::register_comm(id, errh)?,
            None => MPI_COMM_NULL,
        };
        Ok(())
    })();
    finish_with(errhandler, "MPI_Comm_create_from_group", r)
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Intercomm_create_from_groups(
    local_group: MPI_Group,
    local_leader: c_int,
    remote_group: MPI_Group,
    remote_leader: c_int,
    stringtag: *const c_char,
    info: MPI_Info,
    errhandler: MPI_Errhandler,
    newintercomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        running()?;
        let (lg, ls) = group_of(local_group)?;
        let (rg, rs) = group_of(remote_group)?;
        let tag = string_arg(stringtag, "stringtag", MPI_MAX_STRINGTAG_LEN)?;
        if info != MPI_INFO_NULL {
            pairs(info)?;
        }
        let errh = comm_errh_arg(errhandler)?;
        let out = out(newintercomm, "newintercomm")?;
        let id = madmpi::intercomm_from_session_groups(
            lg.world_ranks(),
            local_leader,
            rg.world_ranks(),
            remote_leader,
            &tag,
            ls.or(rs),
        )?;
        *out = handles::register_comm(id, errh)?;
        Ok(())
    })();
    finish_with(errhandler, "MPI_Intercomm_create_from_groups", r)
}

// ------------------------------------------------------------------------------------ errhandlers

pub unsafe fn MPI_Session_create_errhandler(
    session_errhandler_fn: MPI_Session_errhandler_function,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = (|| {
        let out = out(errhandler, "errhandler")?;
        let Some(f) = session_errhandler_fn else {
            return fail(
                ErrorClass::Arg,
                "invalid argument: session_errhandler_fn is NULL",
            );
        };
        *out = handles::new_errhandler(ErrhFn::Session(f))?;
        Ok(())
    })();
    finish_self("MPI_Session_create_errhandler", r)
}

pub unsafe fn MPI_Session_set_errhandler(
    session: MPI_Session,
    errhandler: MPI_Errhandler,
) -> c_int {
    let r = (|| {
        session_errh(session)?;
        if let Errh::User(ErrhFn::Comm(_) | ErrhFn::Win(_) | ErrhFn::File(_)) =
            handles::errhandler(errhandler)?
        {
            return fail(
                ErrorClass::Arg,
                "the error handler was not created for sessions (MPI_Session_create_errhandler)",
            );
        }
        let old = {
            let mut t = SESSIONS.lock();
            let e = t.get_mut(session as usize)?;
            std::mem::replace(&mut e.errh, errhandler as usize)
        };
        handles::errh_ref(errhandler as usize);
        handles::errh_unref(old);
        Ok(())
    })();
    done(session, "MPI_Session_set_errhandler", r)
}

pub unsafe fn MPI_Session_get_errhandler(
    session: MPI_Session,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = (|| {
        let h = session_errh(session)?;
        let out = out(errhandler, "errhandler")?;
        // The caller gets a new reference, released by MPI_Errhandler_free.
        handles::errh_ref(h);
        *out = h as MPI_Errhandler;
        Ok(())
    })();
    done(session, "MPI_Session_get_errhandler", r)
}

pub unsafe fn MPI_Session_call_errhandler(session: MPI_Session, errorcode: c_int) -> c_int {
    let h = match session_errh(session) {
        Ok(h) => h,
        Err(e) => return raise_on(session, &|| "MPI_Session_call_errhandler".into(), e),
    };
    let h = handles::errhandler(h as MPI_Errhandler).unwrap_or(Errh::Return);
    let why = errors::code_string(errorcode).unwrap_or_else(|| format!("error code {errorcode}"));
    errors::raise_by(
        h,
        &|f, c| call_user(f, session, c),
        &|| "MPI_Session_call_errhandler".to_string(),
        errorcode,
        &why,
    );
    // As MPI_Comm_call_errhandler: MPI_SUCCESS once the handler has returned.
    MPI_SUCCESS
}
