//! Environment: initialization and finalization, versions, thread level, processor name,
//! timers, MPI_Abort, MPI_Alloc_mem.

use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::Ordering;

use madmpi::{ErrorClass, ThreadLevel};

use super::comm::record_world_attrs;
use super::common::*;
use crate::abi::*;
use crate::errors;
use crate::handles;

fn init(required: ThreadLevel) -> R<ThreadLevel> {
    let provided = madmpi::init(required)?;
    if let Ok(r) = madmpi::comm_rank(madmpi::COMM_WORLD) {
        errors::WORLD_RANK.store(r, Ordering::Relaxed);
    }
    record_world_attrs();
    // A spawned process connects to its parents (MPI_Comm_get_parent).
    madmpi::connect_parent()?;
    Ok(provided)
}

pub unsafe fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    let _ = (argc, argv);
    finish_self("MPI_Init", init(ThreadLevel::Single).map(|_| ()))
}

pub unsafe fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    let _ = (argc, argv);
    let r = (|| {
        let p = out(provided, "provided")?;
        let l = init(level_from_c(required))?;
        *p = level_to_c(l);
        Ok(())
    })();
    finish_self("MPI_Init_thread", r)
}

pub unsafe fn MPI_Initialized(flag: *mut c_int) -> c_int {
    let r = out(flag, "flag").map(|f| *f = madmpi::initialized() as c_int);
    finish_self("MPI_Initialized", r)
}

pub unsafe fn MPI_Finalize() -> c_int {
    // The standard: MPI_Finalize first frees MPI_COMM_SELF's attributes, running their delete
    // callbacks (libraries hook their own cleanup there).
    if madmpi::initialized() && !madmpi::finalized() {
        super::attr::finalize_attrs();
    }
    finish_self("MPI_Finalize", madmpi::finalize())
}

pub unsafe fn MPI_Finalized(flag: *mut c_int) -> c_int {
    let r = out(flag, "flag").map(|f| *f = madmpi::finalized() as c_int);
    finish_self("MPI_Finalized", r)
}

pub unsafe fn MPI_Abort(comm: MPI_Comm, errorcode: c_int) -> c_int {
    let msg = format!(
        "{}MPI_Abort(comm={}, errorcode={errorcode}) called: ending the job",
        match errors::WORLD_RANK.load(Ordering::Relaxed) {
            r if r >= 0 => format!("madmpi: rank {r}: "),
            _ => "madmpi: ".into(),
        },
        handles::comm_name(comm)
    );
    eprintln!("{msg}");
    madmpi::abort(errorcode, &msg)
}

pub unsafe fn MPI_Query_thread(provided: *mut c_int) -> c_int {
    let r = (|| {
        running()?;
        *out(provided, "provided")? = level_to_c(madmpi::query_thread());
        Ok(())
    })();
    finish_self("MPI_Query_thread", r)
}

pub unsafe fn MPI_Is_thread_main(flag: *mut c_int) -> c_int {
    let r = (|| {
        running()?;
        *out(flag, "flag")? = madmpi::is_thread_main() as c_int;
        Ok(())
    })();
    finish_self("MPI_Is_thread_main", r)
}

pub unsafe fn MPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    let r = (|| {
        let (v, s) = (out(version, "version")?, out(subversion, "subversion")?);
        *v = MPI_VERSION;
        *s = MPI_SUBVERSION;
        Ok(())
    })();
    finish_self("MPI_Get_version", r)
}

// ------------------------------------------------------------------------------------ ABI queries
// MPI-5.0: callable at any time, before MPI_Init and after MPI_Finalize included.

pub unsafe fn MPI_Abi_get_version(abi_major: *mut c_int, abi_minor: *mut c_int) -> c_int {
    let r = (|| {
        let (v, s) = (out(abi_major, "abi_major")?, out(abi_minor, "abi_minor")?);
        *v = MPI_ABI_VERSION;
        *s = MPI_ABI_SUBVERSION;
        Ok(())
    })();
    finish_self("MPI_Abi_get_version", r)
}

/// MPI_Abi_get_info: a new info object (the caller frees it) with the sizes of the integer
/// types the ABI leaves to the platform, in bytes.
pub unsafe fn MPI_Abi_get_info(info: *mut MPI_Info) -> c_int {
    let r = (|| {
        let o = out(info, "info")?;
        let size = |n: usize| n.to_string();
        *o = super::info::new_info(vec![
            (
                "mpi_aint_size".into(),
                size(std::mem::size_of::<MPI_Aint>()),
            ),
            (
                "mpi_count_size".into(),
                size(std::mem::size_of::<MPI_Count>()),
            ),
            (
                "mpi_offset_size".into(),
                size(std::mem::size_of::<MPI_Offset>()),
            ),
        ])?;
        Ok(())
    })();
    finish_self("MPI_Abi_get_info", r)
}

/// The library version string.
pub(crate) fn library_version() -> String {
    format!(
        "madmpi {} (MPI {MPI_VERSION}.{MPI_SUBVERSION}, standard ABI {MPI_ABI_VERSION}.{MPI_ABI_SUBVERSION}), \
         an MPI implementation in Rust after NewMadeleine's MAD-MPI",
        env!("CARGO_PKG_VERSION")
    )
}

pub unsafe fn MPI_Get_library_version(version: *mut c_char, resultlen: *mut c_int) -> c_int {
    let r = (|| {
        let len = out(resultlen, "resultlen")?;
        if version.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: version is NULL");
        }
        *len = copy_cstr(
            &library_version(),
            version,
            MPI_MAX_LIBRARY_VERSION_STRING as usize,
        );
        Ok(())
    })();
    finish_self("MPI_Get_library_version", r)
}

pub unsafe fn MPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
    let r = (|| {
        running()?;
        let len = out(resultlen, "resultlen")?;
        if name.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: name is NULL");
        }
        *len = copy_cstr(
            &madmpi::processor_name(),
            name,
            MPI_MAX_PROCESSOR_NAME as usize,
        );
        Ok(())
    })();
    finish_self("MPI_Get_processor_name", r)
}

pub unsafe fn MPI_Wtime() -> f64 {
    madmpi::wtime()
}

pub unsafe fn MPI_Wtick() -> f64 {
    madmpi::wtick()
}

pub unsafe fn MPI_Alloc_mem(size: MPI_Aint, info: MPI_Info, baseptr: *mut c_void) -> c_int {
    let _ = info;
    let r = (|| {
        running()?;
        let out = out(baseptr as *mut *mut c_void, "baseptr")?;
        let n = usize::try_from(size).or_else(|_| {
            fail(
                ErrorClass::Arg,
                format!("invalid size {size} (must be >= 0)"),
            )
        })?;
        // SAFETY: plain allocation; a zero size still gets a distinct pointer.
        let p = unsafe { libc::malloc(n.max(1)) };
        if p.is_null() {
            return fail(ErrorClass::NoMem, format!("cannot allocate {n} bytes"));
        }
        *out = p;
        Ok(())
    })();
    finish_self("MPI_Alloc_mem", r)
}

pub unsafe fn MPI_Free_mem(base: *mut c_void) -> c_int {
    let r = running().map(|()| {
        // SAFETY: `base` came from MPI_Alloc_mem (malloc), or is NULL.
        unsafe { libc::free(base) }
    });
    finish_self("MPI_Free_mem", r)
}
