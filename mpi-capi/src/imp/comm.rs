//! Communicator queries: rank, size, the predefined attributes, MPI_Barrier.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

use madmpi::ErrorClass;

use super::common::*;
use crate::abi::*;
use crate::errors;
use crate::handles;

pub unsafe fn MPI_Comm_rank(comm: MPI_Comm, rank: *mut c_int) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let out = out(rank, "rank")?;
        *out = madmpi::comm_rank(c)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_rank(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Comm_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let out = out(size, "size")?;
        *out = madmpi::comm_size(c)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_size(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Barrier(comm: MPI_Comm) -> c_int {
    let r = handles::comm(comm).and_then(madmpi::barrier);
    finish(comm, r, &|| {
        format!("MPI_Barrier(comm={})", handles::comm_name(comm))
    })
}

// ------------------------------------------------------------------------------------ attributes

// The values the predefined attributes point at: process-lifetime and writable, like MPICH's.
static TAG_UB_VALUE: AtomicI32 = AtomicI32::new(madmpi::TAG_UB);
static HOST_VALUE: AtomicI32 = AtomicI32::new(MPI_PROC_NULL);
// Every process can do I/O.
static IO_VALUE: AtomicI32 = AtomicI32::new(MPI_ANY_SOURCE);
// Clocks are per process (monotonic since each process started).
static WTIME_IS_GLOBAL_VALUE: AtomicI32 = AtomicI32::new(0);
static APPNUM_VALUE: AtomicI32 = AtomicI32::new(0);
static UNIVERSE_SIZE_VALUE: AtomicI32 = AtomicI32::new(-1);

/// Record the attributes the launcher told the core (called by MPI_Init).
pub(crate) fn record_world_attrs() {
    APPNUM_VALUE.store(madmpi::appnum(), Ordering::Relaxed);
    let u = madmpi::universe_size()
        .and_then(|u| i32::try_from(u).ok())
        .unwrap_or(-1);
    UNIVERSE_SIZE_VALUE.store(u, Ordering::Relaxed);
}

/// The value of a predefined attribute: `Ok(None)` when it is not set.
fn predefined_attr(keyval: c_int) -> R<Option<&'static AtomicI32>> {
    Ok(Some(match keyval {
        MPI_TAG_UB => &TAG_UB_VALUE,
        MPI_HOST => &HOST_VALUE,
        MPI_IO => &IO_VALUE,
        MPI_WTIME_IS_GLOBAL => &WTIME_IS_GLOBAL_VALUE,
        // Not set for a singleton (negative), as in MPICH.
        MPI_APPNUM if APPNUM_VALUE.load(Ordering::Relaxed) < 0 => return Ok(None),
        MPI_APPNUM => &APPNUM_VALUE,
        MPI_LASTUSEDCODE => &errors::LASTUSEDCODE,
        MPI_UNIVERSE_SIZE if UNIVERSE_SIZE_VALUE.load(Ordering::Relaxed) < 0 => return Ok(None),
        MPI_UNIVERSE_SIZE => &UNIVERSE_SIZE_VALUE,
        MPI_KEYVAL_INVALID => return fail(ErrorClass::Keyval, "invalid keyval MPI_KEYVAL_INVALID"),
        MPI_WIN_BASE..=MPI_WIN_MODEL => {
            return fail(
                ErrorClass::Keyval,
                format!("keyval {keyval} is a window attribute, not a communicator one"),
            )
        }
        _ => return fail(ErrorClass::Keyval, format!("invalid keyval {keyval}")),
    }))
}

pub unsafe fn MPI_Comm_get_attr(
    comm: MPI_Comm,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    if super::attr::is_user_keyval(comm_keyval) {
        return super::attr::comm_get_user(comm, comm_keyval, attribute_val, flag);
    }
    let r = (|| {
        running()?;
        handles::comm(comm)?;
        let val = out(attribute_val as *mut *mut c_void, "attribute_val")?;
        let flag = out(flag, "flag")?;
        // The predefined attributes are on every communicator (as in MPICH).
        match predefined_attr(comm_keyval)? {
            Some(v) => {
                *val = v.as_ptr() as *mut c_void;
                *flag = 1;
            }
            None => *flag = 0,
        }
        Ok(())
    })();
    finish(comm, r, &|| {
        format!(
            "MPI_Comm_get_attr(comm={}, comm_keyval={comm_keyval})",
            handles::comm_name(comm)
        )
    })
}
