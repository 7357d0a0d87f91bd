//! The Fortran side of the standard ABI (MPI_Abi_get/set_fortran_info, MPI_Abi_get/
//! set_fortran_booleans) and MPI_Get_hw_resource_info: calls that need no running engine.
//!
//! madmpi has no Fortran bindings of its own; a Fortran binding layer built over the standard
//! ABI tells the C library, once, the sizes of the Fortran types it uses and the values of its
//! `.TRUE.` and `.FALSE.`. madmpi's predefined Fortran types have fixed sizes (`LOGICAL`,
//! `INTEGER` and `REAL` 4 bytes, `DOUBLE PRECISION` 8), so sizes that differ are refused
//! (MPI_ERR_ABI) rather than silently misread; the booleans are used by the logical reductions
//! (`madmpi::op::set_fortran_booleans`).

use std::os::raw::{c_int, c_void};

use madmpi::{Datatype, ErrorClass};
use madmpi_datatypes::Basic;
use parking_lot::{const_mutex, Mutex};

use super::common::*;
use super::info::{new_info, pairs, Pairs};
use crate::abi::*;
use crate::errors;

/// What MPI_Abi_set_fortran_info was given.
static FORTRAN_INFO: Mutex<Option<Pairs>> = const_mutex(None);

fn abi_error(name: &str, why: String) -> c_int {
    errors::raise_code(MPI_COMM_SELF, &|| name.to_string(), MPI_ERR_ABI, &why)
}

pub unsafe fn MPI_Abi_set_fortran_info(info: MPI_Info) -> c_int {
    const NAME: &str = "MPI_Abi_set_fortran_info";
    let p = match pairs(info) {
        Ok(p) => p,
        Err(e) => return errors::raise_self(NAME, e),
    };
    let get = |k: &str| {
        p.iter()
            .find(|(x, _)| x == k)
            .map(|(_, v)| v.trim().to_string())
    };
    for (key, b) in [
        ("mpi_logical_size", Basic::Logical),
        ("mpi_integer_size", Basic::Integer),
        ("mpi_real_size", Basic::Real),
        ("mpi_double_precision_size", Basic::DoublePrecision),
    ] {
        let have = Datatype::basic(b).size();
        match get(key) {
            None => return abi_error(NAME, format!("the info has no key {key}")),
            Some(v) if v.parse::<usize>().ok() != Some(have) => {
                return abi_error(
                    NAME,
                    format!(
                        "{key}={v}: madmpi's {} has {have} bytes (its Fortran types have fixed \
                         sizes)",
                        b.mpi_name()
                    ),
                )
            }
            Some(_) => {}
        }
    }
    let mut g = FORTRAN_INFO.lock();
    if g.is_some() {
        return abi_error(
            NAME,
            "the Fortran ABI was already set (MPI_Abi_set_fortran_info may be called once)".into(),
        );
    }
    *g = Some(p);
    MPI_SUCCESS
}

/// MPI_Abi_get_fortran_info: what MPI_Abi_set_fortran_info was given; MPI_INFO_NULL before
/// (madmpi itself has no Fortran bindings, as MPICH built without Fortran).
pub unsafe fn MPI_Abi_get_fortran_info(info: *mut MPI_Info) -> c_int {
    let r = (|| {
        let o = out(info, "info")?;
        *o = match FORTRAN_INFO.lock().clone() {
            Some(p) => new_info(p)?,
            None => MPI_INFO_NULL,
        };
        Ok(())
    })();
    finish_self("MPI_Abi_get_fortran_info", r)
}

fn logical_size_arg(n: c_int) -> R<usize> {
    match n {
        1 | 2 | 4 | 8 | 16 => Ok(n as usize),
        _ => fail(
            ErrorClass::Arg,
            format!("logical_size {n}: a Fortran LOGICAL has 1, 2, 4, 8 or 16 bytes"),
        ),
    }
}

pub unsafe fn MPI_Abi_set_fortran_booleans(
    logical_size: c_int,
    logical_true: *mut c_void,
    logical_false: *mut c_void,
) -> c_int {
    const NAME: &str = "MPI_Abi_set_fortran_booleans";
    let r = (|| {
        let n = logical_size_arg(logical_size)?;
        if logical_true.is_null() || logical_false.is_null() {
            return fail(
                ErrorClass::Arg,
                "logical_true and logical_false must not be NULL",
            );
        }
        // SAFETY: each points to a value of `logical_size` bytes (the caller's contract).
        let (t, f) = unsafe {
            (
                std::slice::from_raw_parts(logical_true as *const u8, n),
                std::slice::from_raw_parts(logical_false as *const u8, n),
            )
        };
        madmpi::op::set_fortran_booleans(n, t, f)
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        // Set twice: the ABI's own class.
        Err(e) if e.class == ErrorClass::Other => abi_error(NAME, e.msg),
        Err(e) => errors::raise_self(NAME, e),
    }
}

pub unsafe fn MPI_Abi_get_fortran_booleans(
    logical_size: c_int,
    logical_true: *mut c_void,
    logical_false: *mut c_void,
    is_set: *mut c_int,
) -> c_int {
    const NAME: &str = "MPI_Abi_get_fortran_booleans";
    let r = (|| {
        let n = logical_size_arg(logical_size)?;
        let set = out(is_set, "is_set")?;
        match madmpi::op::fortran_booleans() {
            None => {
                *set = 0;
                Ok(None)
            }
            Some((size, _, _)) if size != n => Ok(Some(size)),
            Some((_, t, f)) => {
                if logical_true.is_null() || logical_false.is_null() {
                    return fail(
                        ErrorClass::Arg,
                        "logical_true and logical_false must not be NULL",
                    );
                }
                // SAFETY: each points to storage of `logical_size` bytes (the caller's contract).
                unsafe {
                    std::ptr::copy_nonoverlapping(t.as_ptr(), logical_true as *mut u8, n);
                    std::ptr::copy_nonoverlapping(f.as_ptr(), logical_false as *mut u8, n);
                }
                *set = 1;
                Ok(None)
            }
        }
    })();
    match r {
        Ok(None) => MPI_SUCCESS,
        Ok(Some(size)) => abi_error(
            NAME,
            format!(
                "the Fortran booleans were set for LOGICAL of {size} bytes, not {logical_size}"
            ),
        ),
        Err(e) => errors::raise_self(NAME, e),
    }
}

/// The CPUs this process may run on, and those online.
fn cpus() -> (usize, usize) {
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    let avail = std::thread::available_parallelism().map_or(online, |n| n.get());
    (avail, online)
}

/// MPI_Get_hw_resource_info: what the process runs on. `mpi_hw_resource_type` names the one
/// resource type MPI_Comm_split_type(MPI_COMM_TYPE_HW_GUIDED) knows, `mpi_shared_memory` (a
/// node); the `madmpi_*` keys say which node and how many CPUs.
pub unsafe fn MPI_Get_hw_resource_info(hw_info: *mut MPI_Info) -> c_int {
    let r = (|| {
        let o = out(hw_info, "hw_info")?;
        let (avail, online) = cpus();
        *o = new_info(vec![
            ("mpi_hw_resource_type".into(), "mpi_shared_memory".into()),
            ("madmpi_host".into(), madmpi::processor_name()),
            ("madmpi_cpus_available".into(), avail.to_string()),
            ("madmpi_cpus_online".into(), online.to_string()),
        ])?;
        Ok(())
    })();
    finish_self("MPI_Get_hw_resource_info", r)
}
