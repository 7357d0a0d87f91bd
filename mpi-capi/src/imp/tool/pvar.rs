//! Performance variables: `MPI_T_pvar_*`, sessions and handles.
//!
//! A counter's handle keeps its own value: it counts only while started (`accum` plus what the
//! engine counted since `base`), and reset or write change the handle's value, never the
//! engine's, so sessions never disturb each other. Levels and watermarks are continuous and
//! read-only: they read the engine's value as it is.

use std::collections::BTreeMap;
use std::os::raw::{c_char, c_int, c_void};

use madmpi::tool::{pvars, PvarClass, PVARS};
use parking_lot::Mutex;

use super::{c_str, code, index, put, put_str, ready, verbosity, T};
use crate::abi::*;

struct Handle {
    session: usize,
    pvar: usize,
    started: bool,
    accum: u64,
    base: u64,
}

impl Handle {
    fn value(&self, now: u64) -> u64 {
        if !PVARS[self.pvar].continuous() {
            if self.started {
                self.accum.wrapping_add(now.wrapping_sub(self.base))
            } else {
                self.accum
            }
        } else {
            now
        }
    }
}

struct Tables {
    next: usize,
    sessions: BTreeMap<usize, ()>,
    handles: BTreeMap<usize, Handle>,
}

static TABLES: Mutex<Tables> = parking_lot::const_mutex(Tables {
    next: 0x5000_0000,
    sessions: BTreeMap::new(),
    handles: BTreeMap::new(),
});

pub(super) fn free_all() {
    let mut t = TABLES.lock();
    t.sessions.clear();
    t.handles.clear();
}

fn class(c: PvarClass) -> c_int {
    match c {
        PvarClass::Level => MPI_T_PVAR_CLASS_LEVEL,
        PvarClass::HighWatermark => MPI_T_PVAR_CLASS_HIGHWATERMARK,
        PvarClass::Counter => MPI_T_PVAR_CLASS_COUNTER,
    }
}

pub unsafe fn MPI_T_pvar_get_num(num_pvar: *mut c_int) -> c_int {
    code((|| {
        ready()?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(num_pvar, PVARS.len() as c_int) };
        Ok(())
    })())
}

#[allow(clippy::too_many_arguments)] // the C signature
pub unsafe fn MPI_T_pvar_get_info(
    pvar_index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    verbosity_out: *mut c_int,
    var_class: *mut c_int,
    datatype: *mut MPI_Datatype,
    enumtype: *mut MPI_T_enum,
    desc: *mut c_char,
    desc_len: *mut c_int,
    bind: *mut c_int,
    readonly: *mut c_int,
    continuous: *mut c_int,
    atomic: *mut c_int,
) -> c_int {
    code((|| {
        ready()?;
        let p = &PVARS[index(pvar_index, PVARS.len())?];
        // SAFETY: outputs are NULL or valid (caller contract).
        unsafe {
            put_str(&p.name, name, name_len);
            put(verbosity_out, verbosity(p.verbosity));
            put(var_class, class(p.class));
            put(datatype, MPI_UNSIGNED_LONG_LONG);
            put(enumtype, MPI_T_ENUM_NULL);
            put_str(&p.desc, desc, desc_len);
            put(bind, MPI_T_BIND_NO_OBJECT);
            put(readonly, p.readonly() as c_int);
            put(continuous, p.continuous() as c_int);
            put(atomic, 0);
        }
        Ok(())
    })())
}

pub unsafe fn MPI_T_pvar_get_index(
    name: *const c_char,
    var_class: c_int,
    pvar_index: *mut c_int,
) -> c_int {
    code((|| {
        ready()?;
        // SAFETY: a C string (caller contract).
        let name = unsafe { c_str(name)? };
        let i = PVARS
            .iter()
            .position(|p| p.name == name && class(p.class) == var_class)
            .ok_or(MPI_T_ERR_INVALID_NAME)?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(pvar_index, i as c_int) };
        Ok(())
    })())
}

pub unsafe fn MPI_T_pvar_session_create(session: *mut MPI_T_pvar_session) -> c_int {
    code((|| {
        ready()?;
        if session.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        let mut t = TABLES.lock();
        let s = t.next;
        t.next += 1;
        t.sessions.insert(s, ());
        // SAFETY: valid (checked, caller contract).
        unsafe { *session = s as MPI_T_pvar_session };
        Ok(())
    })())
}

pub unsafe fn MPI_T_pvar_session_free(session: *mut MPI_T_pvar_session) -> c_int {
    code((|| {
        ready()?;
        if session.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        // SAFETY: valid (caller contract).
        let s = unsafe { *session } as usize;
        let mut t = TABLES.lock();
        t.sessions.remove(&s).ok_or(MPI_T_ERR_INVALID_SESSION)?;
        t.handles.retain(|_, h| h.session != s);
        // SAFETY: as above.
        unsafe { *session = MPI_T_PVAR_SESSION_NULL };
        Ok(())
    })())
}

pub unsafe fn MPI_T_pvar_handle_alloc(
    session: MPI_T_pvar_session,
    pvar_index: c_int,
    _obj_handle: *mut c_void,
    handle: *mut MPI_T_pvar_handle,
    count: *mut c_int,
) -> c_int {
    code((|| {
        ready()?;
        let i = index(pvar_index, PVARS.len())?;
        if handle.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        let now = pvars::read(i);
        let mut t = TABLES.lock();
        if !t.sessions.contains_key(&(session as usize)) {
            return Err(MPI_T_ERR_INVALID_SESSION);
        }
        let h = t.next;
        t.next += 1;
        t.handles.insert(
            h,
            Handle {
                session: session as usize,
                pvar: i,
                // Continuous variables are always started.
                started: PVARS[i].continuous(),
                accum: 0,
                base: now,
            },
        );
        // SAFETY: outputs are valid or NULL (caller contract).
        unsafe {
            *handle = h as MPI_T_pvar_handle;
            put(count, 1);
        }
        Ok(())
    })())
}

pub unsafe fn MPI_T_pvar_handle_free(
    session: MPI_T_pvar_session,
    handle: *mut MPI_T_pvar_handle,
) -> c_int {
    code((|| {
        ready()?;
        if handle.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        // SAFETY: valid (caller contract).
        let h = unsafe { *handle } as usize;
        let mut t = TABLES.lock();
        if !t.sessions.contains_key(&(session as usize)) {
            return Err(MPI_T_ERR_INVALID_SESSION);
        }
        match t.handles.get(&h) {
            Some(x) if x.session == session as usize => {}
            _ => return Err(MPI_T_ERR_INVALID_HANDLE),
        }
        t.handles.remove(&h);
        // SAFETY: as above.
        unsafe { *handle = MPI_T_PVAR_HANDLE_NULL };
        Ok(())
    })())
}

/// What to do to a handle.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Start,
    Stop,
    Reset,
}

/// `op` on `handle` of `session` (or every handle of it: `MPI_T_PVAR_ALL_HANDLES`, which skips
/// the handles the operation does not apply to, as the standard says).
fn apply(session: MPI_T_pvar_session, handle: MPI_T_pvar_handle, op: Op) -> T<()> {
    ready()?;
    let s = session as usize;
    let all = handle == MPI_T_PVAR_ALL_HANDLES;
    // The engine's values first: no tool lock is held while the engine is reached.
    let targets: Vec<(usize, usize)> = {
        let t = TABLES.lock();
        if !t.sessions.contains_key(&s) {
            return Err(MPI_T_ERR_INVALID_SESSION);
        }
        if all {
            t.handles
                .iter()
                .filter(|(_, x)| x.session == s)
                .map(|(&h, x)| (h, x.pvar))
                .collect()
        } else {
            match t.handles.get(&(handle as usize)) {
                Some(x) if x.session == s => vec![(handle as usize, x.pvar)],
                _ => return Err(MPI_T_ERR_INVALID_HANDLE),
            }
        }
    };
    let now: Vec<u64> = targets.iter().map(|&(_, p)| pvars::read(p)).collect();
    let mut t = TABLES.lock();
    for (&(h, p), &now) in targets.iter().zip(&now) {
        let Some(x) = t.handles.get_mut(&h) else {
            continue;
        };
        let d = &PVARS[p];
        match op {
            Op::Start | Op::Stop if d.continuous() => {
                if !all {
                    return Err(MPI_T_ERR_PVAR_NO_STARTSTOP);
                }
            }
            Op::Reset if d.readonly() => {
                if !all {
                    return Err(MPI_T_ERR_PVAR_NO_WRITE);
                }
            }
            Op::Start => {
                if !x.started {
                    x.started = true;
                    x.base = now;
                }
            }
            Op::Stop => {
                if x.started {
                    x.accum = x.value(now);
                    x.started = false;
                }
            }
            Op::Reset => {
                x.accum = 0;
                x.base = now;
            }
        }
    }
    Ok(())
}

pub unsafe fn MPI_T_pvar_start(session: MPI_T_pvar_session, handle: MPI_T_pvar_handle) -> c_int {
    code(apply(session, handle, Op::Start))
}

pub unsafe fn MPI_T_pvar_stop(session: MPI_T_pvar_session, handle: MPI_T_pvar_handle) -> c_int {
    code(apply(session, handle, Op::Stop))
}

pub unsafe fn MPI_T_pvar_reset(session: MPI_T_pvar_session, handle: MPI_T_pvar_handle) -> c_int {
    code(apply(session, handle, Op::Reset))
}

/// Read one handle (and reset it after, with `reset`; `write`: set it to that value instead).
fn access(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    reset: bool,
    write: Option<u64>,
) -> T<u64> {
    ready()?;
    let s = session as usize;
    let p = {
        let t = TABLES.lock();
        if !t.sessions.contains_key(&s) {
            return Err(MPI_T_ERR_INVALID_SESSION);
        }
        match t.handles.get(&(handle as usize)) {
            Some(x) if x.session == s => x.pvar,
            // Including MPI_T_PVAR_ALL_HANDLES: reads and writes name one handle.
            _ => return Err(MPI_T_ERR_INVALID_HANDLE),
        }
    };
    if (reset || write.is_some()) && PVARS[p].readonly() {
        return Err(MPI_T_ERR_PVAR_NO_WRITE);
    }
    let now = pvars::read(p);
    let mut t = TABLES.lock();
    let x = t
        .handles
        .get_mut(&(handle as usize))
        .ok_or(MPI_T_ERR_INVALID_HANDLE)?;
    let v = x.value(now);
    if let Some(w) = write {
        x.accum = w;
        x.base = now;
    } else if reset {
        x.accum = 0;
        x.base = now;
    }
    Ok(v)
}

/// MPI_T_pvar_read (`reset`: MPI_T_pvar_readreset): the value into `buf`.
fn read_into(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *mut c_void,
    reset: bool,
) -> c_int {
    code((|| {
        if buf.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        let v = access(session, handle, reset, None)?;
        // SAFETY: `buf` holds one unsigned long long (caller contract).
        unsafe { *(buf as *mut u64) = v };
        Ok(())
    })())
}

pub unsafe fn MPI_T_pvar_read(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *mut c_void,
) -> c_int {
    read_into(session, handle, buf, false)
}

pub unsafe fn MPI_T_pvar_readreset(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *mut c_void,
) -> c_int {
    read_into(session, handle, buf, true)
}

pub unsafe fn MPI_T_pvar_write(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *const c_void,
) -> c_int {
    code((|| {
        if buf.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        // SAFETY: `buf` holds one unsigned long long (caller contract).
        let w = unsafe { *(buf as *const u64) };
        access(session, handle, false, Some(w)).map(|_| ())
    })())
}
