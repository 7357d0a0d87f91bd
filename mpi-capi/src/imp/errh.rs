//! Error handlers of communicators, and error classes, codes and strings.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

use madmpi::ErrorClass;

use super::common::*;
use crate::abi::*;
use crate::errors;
use crate::handles::{self, Errh, ErrhFn};

pub unsafe fn MPI_Comm_create_errhandler(
    comm_errhandler_fn: MPI_Comm_errhandler_function,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = (|| {
        running()?;
        let out = out(errhandler, "errhandler")?;
        let Some(f) = comm_errhandler_fn else {
            return fail(
                ErrorClass::Arg,
                "invalid argument: comm_errhandler_fn is NULL",
            );
        };
        *out = handles::new_errhandler(ErrhFn::Comm(f))?;
        Ok(())
    })();
    finish_self("MPI_Comm_create_errhandler", r)
}

pub unsafe fn MPI_Comm_set_errhandler(comm: MPI_Comm, errhandler: MPI_Errhandler) -> c_int {
    let r = (|| {
        running()?;
        handles::comm(comm)?;
        match handles::errhandler(errhandler)? {
            Errh::User(ErrhFn::Win(_) | ErrhFn::File(_) | ErrhFn::Session(_)) => fail(
                ErrorClass::Arg,
                "the error handler was not created for communicators (MPI_Comm_create_errhandler)",
            ),
            _ => handles::set_comm_errhandler(comm, errhandler as usize),
        }
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_set_errhandler(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Comm_get_errhandler(comm: MPI_Comm, errhandler: *mut MPI_Errhandler) -> c_int {
    let r = (|| {
        running()?;
        handles::comm(comm)?;
        let out = out(errhandler, "errhandler")?;
        let h = handles::comm_errhandler(comm).unwrap_or(MPI_ERRORS_ARE_FATAL as usize);
        // The caller gets a new reference, released by MPI_Errhandler_free.
        handles::errh_ref(h);
        *out = h as MPI_Errhandler;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_get_errhandler(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Comm_call_errhandler(comm: MPI_Comm, errorcode: c_int) -> c_int {
    if let Err(e) = running() {
        return errors::raise_self("MPI_Comm_call_errhandler", e);
    }
    errors::call_errhandler(comm, errorcode)
}

pub unsafe fn MPI_Errhandler_free(errhandler: *mut MPI_Errhandler) -> c_int {
    let r = (|| {
        running()?;
        let e = out(errhandler, "errhandler")?;
        handles::free_errhandler(*e)?;
        *e = MPI_ERRHANDLER_NULL;
        Ok(())
    })();
    finish_self("MPI_Errhandler_free", r)
}

pub unsafe fn MPI_Error_string(
    errorcode: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    let r = (|| {
        let len = out(resultlen, "resultlen")?;
        if string.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: string is NULL");
        }
        let Some(s) = errors::code_string(errorcode) else {
            return fail(ErrorClass::Arg, format!("invalid error code {errorcode}"));
        };
        *len = copy_cstr(&s, string, MPI_MAX_ERROR_STRING as usize);
        Ok(())
    })();
    finish_self("MPI_Error_string", r)
}

pub unsafe fn MPI_Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int {
    let r = (|| {
        let out = out(errorclass, "errorclass")?;
        let Some(c) = errors::class_of_code(errorcode) else {
            return fail(ErrorClass::Arg, format!("invalid error code {errorcode}"));
        };
        *out = c;
        Ok(())
    })();
    finish_self("MPI_Error_class", r)
}

pub unsafe fn MPI_Add_error_class(errorclass: *mut c_int) -> c_int {
    let r = (|| {
        running()?;
        let out = out(errorclass, "errorclass")?;
        *out = errors::add_class()?;
        Ok(())
    })();
    finish_self("MPI_Add_error_class", r)
}

pub unsafe fn MPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) -> c_int {
    let r = (|| {
        running()?;
        let out = out(errorcode, "errorcode")?;
        *out = errors::add_code(errorclass)?;
        Ok(())
    })();
    finish_self("MPI_Add_error_code", r)
}

pub unsafe fn MPI_Add_error_string(errorcode: c_int, string: *const c_char) -> c_int {
    let r = (|| {
        running()?;
        if string.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: string is NULL");
        }
        // SAFETY: a non-null string argument is NUL-terminated (the caller's contract).
        let s = unsafe { CStr::from_ptr(string) };
        if s.to_bytes().len() >= MPI_MAX_ERROR_STRING as usize {
            return fail(
                ErrorClass::Arg,
                format!(
                    "error string of {} bytes is too long (at most MPI_MAX_ERROR_STRING - 1)",
                    s.to_bytes().len()
                ),
            );
        }
        errors::add_string(errorcode, s.to_string_lossy().into_owned())
    })();
    finish_self("MPI_Add_error_string", r)
}

pub unsafe fn MPI_Remove_error_class(errorclass: c_int) -> c_int {
    finish_self(
        "MPI_Remove_error_class",
        running().and_then(|()| errors::remove_class(errorclass)),
    )
}

pub unsafe fn MPI_Remove_error_code(errorcode: c_int) -> c_int {
    finish_self(
        "MPI_Remove_error_code",
        running().and_then(|()| errors::remove_code(errorcode)),
    )
}

pub unsafe fn MPI_Remove_error_string(errorcode: c_int) -> c_int {
    finish_self(
        "MPI_Remove_error_string",
        running().and_then(|()| errors::remove_string(errorcode)),
    )
}
