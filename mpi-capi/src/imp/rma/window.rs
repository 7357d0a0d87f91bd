//! Window creation and freeing, attributes, keyvals, names, info, error handlers, group.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

use madmpi::rma::{self, Flavor, WinId};
use madmpi::{Error, ErrorClass};

use super::super::attr;
use super::super::common::*;
use super::super::group::new_group;
use super::super::info;
use super::{
    call_of, finish_win, finish_win_code, register_win, unregister_win, with_entry, WinAttrs,
    WinEntry,
};
use crate::abi::*;
use crate::errors;
use crate::handles::{self, Errh, ErrhFn};

fn size_arg(size: MPI_Aint) -> R<usize> {
    usize::try_from(size).map_err(|_| Error::new(ErrorClass::Size, format!("negative size {size}")))
}

fn disp_arg(d: MPI_Aint) -> R<usize> {
    match usize::try_from(d) {
        Ok(d) if d > 0 => Ok(d),
        _ => fail(ErrorClass::Disp, format!("invalid displacement unit {d}")),
    }
}

/// Register window `id` (created over `comm` with `info`) and write its handle.
fn register(id: WinId, comm: MPI_Comm, inf: MPI_Info, out: &mut MPI_Win) -> R<()> {
    let i = rma::win_info(id)?;
    let pairs = if inf == MPI_INFO_NULL {
        Vec::new()
    } else {
        info::pairs(inf)?
    };
    let flavor = match i.flavor {
        Flavor::Create => MPI_WIN_FLAVOR_CREATE,
        Flavor::Allocate => MPI_WIN_FLAVOR_ALLOCATE,
        Flavor::Dynamic => MPI_WIN_FLAVOR_DYNAMIC,
        Flavor::Shared => MPI_WIN_FLAVOR_SHARED,
    };
    let e = WinEntry {
        id,
        errh: MPI_ERRORS_ARE_FATAL as usize,
        name: String::new(),
        attrs: Box::new(WinAttrs {
            base: i.base as usize,
            size: i.size as MPI_Aint,
            disp_unit: i.disp_unit as c_int,
            flavor,
            model: MPI_WIN_UNIFIED,
        }),
        info: pairs,
        comm,
    };
    *out = register_win(e)?;
    Ok(())
}

fn check_info(inf: MPI_Info) -> R<()> {
    if inf != MPI_INFO_NULL {
        info::pairs(inf)?;
    }
    Ok(())
}

unsafe fn create(
    name: &'static str,
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    inf: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    let r = (|| {
        running()?;
        let c = handles::comm(comm)?;
        let o = out(win, "win")?;
        let (size, du) = (size_arg(size)?, disp_arg(disp_unit)?);
        check_info(inf)?;
        let id = rma::win_create(base as *mut u8, size, du, c)?;
        register(id, comm, inf, o)
    })();
    finish(comm, r, &|| {
        format!("{name}(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Win_create(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    create(
        "MPI_Win_create",
        base,
        size,
        disp_unit as MPI_Aint,
        info,
        comm,
        win,
    )
}

pub unsafe fn MPI_Win_create_c(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    create("MPI_Win_create_c", base, size, disp_unit, info, comm, win)
}

#[allow(clippy::too_many_arguments)]
unsafe fn allocate(
    name: &'static str,
    shared: bool,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    inf: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    let r = (|| {
        running()?;
        let c = handles::comm(comm)?;
        let o = out(win, "win")?;
        let b = out(baseptr as *mut *mut c_void, "baseptr")?;
        let (size, du) = (size_arg(size)?, disp_arg(disp_unit)?);
        check_info(inf)?;
        let (id, base) = if shared {
            rma::win_allocate_shared(size, du, c)?
        } else {
            rma::win_allocate(size, du, c)?
        };
        register(id, comm, inf, o)?;
        *b = base as *mut c_void;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("{name}(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Win_allocate(
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    allocate(
        "MPI_Win_allocate",
        false,
        size,
        disp_unit as MPI_Aint,
        info,
        comm,
        baseptr,
        win,
    )
}

pub unsafe fn MPI_Win_allocate_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    allocate(
        "MPI_Win_allocate_c",
        false,
        size,
        disp_unit,
        info,
        comm,
        baseptr,
        win,
    )
}

pub unsafe fn MPI_Win_allocate_shared(
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    allocate(
        "MPI_Win_allocate_shared",
        true,
        size,
        disp_unit as MPI_Aint,
        info,
        comm,
        baseptr,
        win,
    )
}

pub unsafe fn MPI_Win_allocate_shared_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    allocate(
        "MPI_Win_allocate_shared_c",
        true,
        size,
        disp_unit,
        info,
        comm,
        baseptr,
        win,
    )
}

pub unsafe fn MPI_Win_create_dynamic(info: MPI_Info, comm: MPI_Comm, win: *mut MPI_Win) -> c_int {
    let r = (|| {
        running()?;
        let c = handles::comm(comm)?;
        let o = out(win, "win")?;
        check_info(info)?;
        let id = rma::win_create_dynamic(c)?;
        register(id, comm, info, o)
    })();
    finish(comm, r, &|| {
        format!("MPI_Win_create_dynamic(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Win_free(win: *mut MPI_Win) -> c_int {
    let w = if win.is_null() { MPI_WIN_NULL } else { *win };
    let call = call_of("MPI_Win_free", w);
    let r = (|| {
        running()?;
        let o = out(win, "win")?;
        let id = super::win(*o)?;
        rma::win_free(id)?;
        Ok(id)
    })();
    let r = match r {
        Ok(_) => {
            if let Err(e) = attr::win_delete_all(w) {
                return finish_win_code(w, Err(e), &call);
            }
            if let Ok(e) = unregister_win(w) {
                handles::errh_unref(e.errh);
            }
            *win = MPI_WIN_NULL;
            Ok(())
        }
        Err(e) => Err(e),
    };
    finish_win(w, r, &call)
}

pub unsafe fn MPI_Win_attach(win: MPI_Win, base: *mut c_void, size: MPI_Aint) -> c_int {
    let r = (|| {
        running()?;
        let id = super::win(win)?;
        rma::win_attach(id, base as *mut u8, size_arg(size)?)
    })();
    finish_win(win, r, &call_of("MPI_Win_attach", win))
}

pub unsafe fn MPI_Win_detach(win: MPI_Win, base: *const c_void) -> c_int {
    let r = (|| {
        running()?;
        let id = super::win(win)?;
        rma::win_detach(id, base as *const u8)
    })();
    finish_win(win, r, &call_of("MPI_Win_detach", win))
}

// ------------------------------------------------------------------------------------ attributes

pub unsafe fn MPI_Win_get_attr(
    win: MPI_Win,
    win_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let call = call_of("MPI_Win_get_attr", win);
    if attr::is_user_keyval(win_keyval) {
        let r = super::win(win).map(|_| ());
        if r.is_err() {
            return finish_win(win, r, &call);
        }
        return finish_win_code(
            win,
            attr::win_get(win, win_keyval, attribute_val, flag),
            &call,
        );
    }
    let r = (|| {
        running()?;
        let val = out(attribute_val as *mut *mut c_void, "attribute_val")?;
        let f = out(flag, "flag")?;
        let p = with_entry(win, |e| {
            let a = &*e.attrs;
            Some(match win_keyval {
                // MPI_WIN_BASE's value is the base itself; the others point at the value.
                MPI_WIN_BASE => a.base as *mut c_void,
                MPI_WIN_SIZE => &a.size as *const MPI_Aint as *mut c_void,
                MPI_WIN_DISP_UNIT => &a.disp_unit as *const c_int as *mut c_void,
                MPI_WIN_CREATE_FLAVOR => &a.flavor as *const c_int as *mut c_void,
                MPI_WIN_MODEL => &a.model as *const c_int as *mut c_void,
                _ => return None,
            })
        })?;
        match p {
            Some(p) => {
                *val = p;
                *f = 1;
                Ok(())
            }
            None => fail(
                ErrorClass::Keyval,
                format!("keyval {win_keyval} is not a window attribute"),
            ),
        }
    })();
    finish_win(win, r, &call)
}

pub unsafe fn MPI_Win_set_attr(
    win: MPI_Win,
    win_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    let call = call_of("MPI_Win_set_attr", win);
    if let Err(e) = super::win(win) {
        return finish_win(win, Err(e), &call);
    }
    if !attr::is_user_keyval(win_keyval) {
        return finish_win(
            win,
            fail(
                ErrorClass::Keyval,
                format!("keyval {win_keyval} is predefined and cannot be set"),
            ),
            &call,
        );
    }
    finish_win_code(win, attr::win_set(win, win_keyval, attribute_val), &call)
}

pub unsafe fn MPI_Win_delete_attr(win: MPI_Win, win_keyval: c_int) -> c_int {
    let call = call_of("MPI_Win_delete_attr", win);
    if let Err(e) = super::win(win) {
        return finish_win(win, Err(e), &call);
    }
    finish_win_code(win, attr::win_delete(win, win_keyval), &call)
}

pub unsafe fn MPI_Win_create_keyval(
    win_copy_attr_fn: MPI_Win_copy_attr_function,
    win_delete_attr_fn: MPI_Win_delete_attr_function,
    win_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    // (Windows are never copied: the copy function is accepted and never called.)
    let _ = win_copy_attr_fn;
    if let Err(e) = running() {
        return errors::raise_self("MPI_Win_create_keyval", e);
    }
    match attr::win_create_keyval(win_delete_attr_fn, win_keyval, extra_state) {
        Ok(()) => MPI_SUCCESS,
        Err((code, why)) => errors::raise_code(
            MPI_COMM_SELF,
            &|| "MPI_Win_create_keyval".into(),
            code,
            &why,
        ),
    }
}

pub unsafe fn MPI_Win_free_keyval(win_keyval: *mut c_int) -> c_int {
    if let Err(e) = running() {
        return errors::raise_self("MPI_Win_free_keyval", e);
    }
    match attr::win_free_keyval(win_keyval) {
        Ok(()) => MPI_SUCCESS,
        Err((code, why)) => {
            errors::raise_code(MPI_COMM_SELF, &|| "MPI_Win_free_keyval".into(), code, &why)
        }
    }
}

// ------------------------------------------------------------------------------------ names, info

pub unsafe fn MPI_Win_set_name(win: MPI_Win, win_name: *const c_char) -> c_int {
    let r = (|| {
        running()?;
        if win_name.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: win_name is NULL");
        }
        let s = CStr::from_ptr(win_name).to_string_lossy();
        let s: String = s.chars().take(MPI_MAX_OBJECT_NAME as usize - 1).collect();
        with_entry(win, |e| e.name = s)
    })();
    finish_win(win, r, &call_of("MPI_Win_set_name", win))
}

pub unsafe fn MPI_Win_get_name(
    win: MPI_Win,
    win_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    let r = (|| {
        running()?;
        let len = out(resultlen, "resultlen")?;
        if win_name.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: win_name is NULL");
        }
        // (MPI-4.1: the null handle has its name.)
        let name = if win == MPI_WIN_NULL {
            "MPI_WIN_NULL".to_string()
        } else {
            with_entry(win, |e| e.name.clone())?
        };
        *len = copy_cstr(&name, win_name, MPI_MAX_OBJECT_NAME as usize);
        Ok(())
    })();
    finish_win(win, r, &call_of("MPI_Win_get_name", win))
}

pub unsafe fn MPI_Win_set_info(win: MPI_Win, info: MPI_Info) -> c_int {
    let r = (|| {
        running()?;
        let p = info::pairs(info)?;
        with_entry(win, |e| {
            for (k, v) in p {
                match e.info.iter_mut().find(|x| x.0 == k) {
                    Some(x) => x.1 = v,
                    None => e.info.push((k, v)),
                }
            }
        })
    })();
    finish_win(win, r, &call_of("MPI_Win_set_info", win))
}

pub unsafe fn MPI_Win_get_info(win: MPI_Win, info_used: *mut MPI_Info) -> c_int {
    let r = (|| {
        running()?;
        let o = out(info_used, "info_used")?;
        let mut p = with_entry(win, |e| e.info.clone())?;
        // The hints madmpi honours, with the values in force.
        for (k, v) in [
            ("no_locks", "false"),
            ("accumulate_ordering", "rar,raw,war,waw"),
            ("accumulate_ops", "same_op_no_op"),
            ("same_size", "false"),
            ("same_disp_unit", "false"),
        ] {
            if !p.iter().any(|x| x.0 == k) {
                p.push((k.into(), v.into()));
            }
        }
        *o = info::new_info(p)?;
        Ok(())
    })();
    finish_win(win, r, &call_of("MPI_Win_get_info", win))
}

pub unsafe fn MPI_Win_get_group(win: MPI_Win, group: *mut MPI_Group) -> c_int {
    let r = (|| {
        running()?;
        let o = out(group, "group")?;
        let i = rma::win_info(super::win(win)?)?;
        *o = new_group(i.world.into())?;
        Ok(())
    })();
    finish_win(win, r, &call_of("MPI_Win_get_group", win))
}

// ------------------------------------------------------------------------------------ error handlers

pub unsafe fn MPI_Win_create_errhandler(
    win_errhandler_fn: MPI_Win_errhandler_function,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = (|| {
        running()?;
        let o = out(errhandler, "errhandler")?;
        let Some(f) = win_errhandler_fn else {
            return fail(
                ErrorClass::Arg,
                "invalid argument: win_errhandler_fn is NULL",
            );
        };
        *o = handles::new_errhandler(ErrhFn::Win(f))?;
        Ok(())
    })();
    finish_self("MPI_Win_create_errhandler", r)
}

pub unsafe fn MPI_Win_set_errhandler(win: MPI_Win, errhandler: MPI_Errhandler) -> c_int {
    let r = (|| {
        running()?;
        super::win(win)?;
        match handles::errhandler(errhandler)? {
            Errh::User(ErrhFn::Comm(_) | ErrhFn::File(_) | ErrhFn::Session(_)) => fail(
                ErrorClass::Arg,
                "the error handler was not created for windows (MPI_Win_create_errhandler)",
            ),
            _ => {
                let h = errhandler as usize;
                handles::errh_ref(h);
                let old = with_entry(win, |e| std::mem::replace(&mut e.errh, h))?;
                handles::errh_unref(old);
                Ok(())
            }
        }
    })();
    finish_win(win, r, &call_of("MPI_Win_set_errhandler", win))
}

pub unsafe fn MPI_Win_get_errhandler(win: MPI_Win, errhandler: *mut MPI_Errhandler) -> c_int {
    let r = (|| {
        running()?;
        let o = out(errhandler, "errhandler")?;
        let h = with_entry(win, |e| e.errh)?;
        handles::errh_ref(h);
        *o = h as MPI_Errhandler;
        Ok(())
    })();
    finish_win(win, r, &call_of("MPI_Win_get_errhandler", win))
}

pub unsafe fn MPI_Win_call_errhandler(win: MPI_Win, errorcode: c_int) -> c_int {
    let call = || {
        format!(
            "MPI_Win_call_errhandler(win={}, errorcode={errorcode})",
            super::win_name(win)
        )
    };
    if let Err(e) = running().and_then(|_| super::win(win)) {
        return finish_win(win, Err(e), &call);
    }
    let why = errors::code_string(errorcode).unwrap_or_else(|| format!("error code {errorcode}"));
    super::raise_code(win, &call, errorcode, &why);
    MPI_SUCCESS
}

/// The communicator handle a window was created over (for the errors of its requests).
pub(crate) fn win_comm(win: MPI_Win) -> MPI_Comm {
    with_entry(win, |e| e.comm).unwrap_or(MPI_COMM_SELF)
}
