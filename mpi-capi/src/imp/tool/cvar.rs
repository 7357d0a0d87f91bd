//! Control variables: `MPI_T_cvar_*`. A handle names a variable (none is bound to an object);
//! reading converts the core's value to the variable's C type, writing checks the scope
//! (`MPI_T_ERR_CVAR_SET_NEVER` for a read-only variable, `_SET_NOT_NOW` before `MPI_Init`).

use std::collections::BTreeMap;
use std::os::raw::{c_char, c_int, c_void};

use madmpi::tool::{Scope, SetError, Ty, Value, CVARS};
use parking_lot::Mutex;

use super::{c_str, code, enum_handle, index, put, put_str, ready, verbosity, T};
use crate::abi::*;

/// Elements of a text variable (its buffer, terminator included).
pub(super) const STR_COUNT: usize = 256;

/// Live handles: value → variable index. Values are never reused.
struct Handles {
    next: usize,
    live: BTreeMap<usize, usize>,
}

static HANDLES: Mutex<Handles> = parking_lot::const_mutex(Handles {
    next: 0x4c00_0000,
    live: BTreeMap::new(),
});

pub(super) fn free_all() {
    HANDLES.lock().live.clear();
}

fn datatype(ty: Ty) -> MPI_Datatype {
    match ty {
        Ty::Int => MPI_UNSIGNED_LONG_LONG,
        Ty::Enum(_) => MPI_INT,
        Ty::Str => MPI_CHAR,
    }
}

fn handle_var(h: MPI_T_cvar_handle) -> T<usize> {
    HANDLES
        .lock()
        .live
        .get(&(h as usize))
        .copied()
        .ok_or(MPI_T_ERR_INVALID_HANDLE)
}

pub unsafe fn MPI_T_cvar_get_num(num_cvar: *mut c_int) -> c_int {
    code((|| {
        ready()?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(num_cvar, CVARS.len() as c_int) };
        Ok(())
    })())
}

#[allow(clippy::too_many_arguments)] // the C signature
pub unsafe fn MPI_T_cvar_get_info(
    cvar_index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    verbosity_out: *mut c_int,
    datatype_out: *mut MPI_Datatype,
    enumtype: *mut MPI_T_enum,
    desc: *mut c_char,
    desc_len: *mut c_int,
    bind: *mut c_int,
    scope: *mut c_int,
) -> c_int {
    code((|| {
        ready()?;
        let v = &CVARS[index(cvar_index, CVARS.len())?];
        // SAFETY: outputs are NULL or valid (caller contract).
        unsafe {
            put_str(&v.name, name, name_len);
            put(verbosity_out, verbosity(v.verbosity));
            put(datatype_out, datatype(v.ty));
            put(
                enumtype,
                match v.ty {
                    Ty::Enum(i) => enum_handle(i),
                    _ => MPI_T_ENUM_NULL,
                },
            );
            put_str(&v.desc, desc, desc_len);
            put(bind, MPI_T_BIND_NO_OBJECT);
            put(
                scope,
                match v.scope() {
                    Scope::ReadOnly => MPI_T_SCOPE_READONLY,
                    Scope::Local => MPI_T_SCOPE_LOCAL,
                },
            );
        }
        Ok(())
    })())
}

pub unsafe fn MPI_T_cvar_get_index(name: *const c_char, cvar_index: *mut c_int) -> c_int {
    code((|| {
        ready()?;
        // SAFETY: a C string (caller contract).
        let name = unsafe { c_str(name)? };
        let i = CVARS
            .iter()
            .position(|v| v.name == name)
            .ok_or(MPI_T_ERR_INVALID_NAME)?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(cvar_index, i as c_int) };
        Ok(())
    })())
}

pub unsafe fn MPI_T_cvar_handle_alloc(
    cvar_index: c_int,
    _obj_handle: *mut c_void,
    handle: *mut MPI_T_cvar_handle,
    count: *mut c_int,
) -> c_int {
    code((|| {
        ready()?;
        let i = index(cvar_index, CVARS.len())?;
        if handle.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        let mut t = HANDLES.lock();
        let h = t.next;
        t.next += 1;
        t.live.insert(h, i);
        drop(t);
        // SAFETY: outputs are valid or NULL (caller contract).
        unsafe {
            *handle = h as MPI_T_cvar_handle;
            put(
                count,
                if CVARS[i].ty == Ty::Str {
                    STR_COUNT as c_int
                } else {
                    1
                },
            );
        }
        Ok(())
    })())
}

pub unsafe fn MPI_T_cvar_handle_free(handle: *mut MPI_T_cvar_handle) -> c_int {
    code((|| {
        ready()?;
        if handle.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        // SAFETY: valid (caller contract).
        let h = unsafe { *handle };
        HANDLES
            .lock()
            .live
            .remove(&(h as usize))
            .ok_or(MPI_T_ERR_INVALID_HANDLE)?;
        // SAFETY: as above.
        unsafe { *handle = MPI_T_CVAR_HANDLE_NULL };
        Ok(())
    })())
}

pub unsafe fn MPI_T_cvar_read(handle: MPI_T_cvar_handle, buf: *mut c_void) -> c_int {
    code((|| {
        ready()?;
        let v = &CVARS[handle_var(handle)?];
        if buf.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        // SAFETY: `buf` holds `count` elements of the variable's type (caller contract).
        unsafe {
            match (v.ty, v.read()) {
                (Ty::Enum(_), Value::Int(x)) => *(buf as *mut c_int) = x as c_int,
                (_, Value::Int(x)) => *(buf as *mut u64) = x as u64,
                (_, Value::Str(s)) => {
                    let mut len = STR_COUNT as c_int;
                    put_str(&s, buf as *mut c_char, &mut len);
                }
            }
        }
        Ok(())
    })())
}

pub unsafe fn MPI_T_cvar_write(handle: MPI_T_cvar_handle, buf: *const c_void) -> c_int {
    code((|| {
        ready()?;
        let v = &CVARS[handle_var(handle)?];
        if !v.writable() {
            return Err(MPI_T_ERR_CVAR_SET_NEVER);
        }
        if buf.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        // SAFETY: `buf` holds one element of the variable's type (caller contract).
        let x = unsafe {
            match v.ty {
                Ty::Enum(_) => *(buf as *const c_int) as i64,
                Ty::Int => {
                    let x = *(buf as *const u64);
                    i64::try_from(x).map_err(|_| MPI_T_ERR_INVALID)?
                }
                Ty::Str => return Err(MPI_T_ERR_CVAR_SET_NEVER),
            }
        };
        v.write(x).map_err(|e| match e {
            SetError::Never => MPI_T_ERR_CVAR_SET_NEVER,
            SetError::NotNow => MPI_T_ERR_CVAR_SET_NOT_NOW,
            SetError::Invalid => MPI_T_ERR_INVALID,
        })
    })())
}
