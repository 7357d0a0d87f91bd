//! Helpers shared by the implementations: argument checks, status conversion, call descriptions
//! for error messages. Nothing here is an MPI function.
//!
//! The status layout (`MPI_internal`, private to the library): `[0]`/`[1]` the low and high 32
//! bits of the byte count, `[2]` the cancelled flag; `[3]` and `[4]` are unused (zero).

use std::os::raw::{c_int, c_void};

use madmpi::{Datatype, Error, ErrorClass, Status, ThreadLevel};

use crate::abi::*;
use crate::errors;
use crate::handles;

/// Result of the core and of the lookups.
pub(crate) type R<T> = Result<T, Error>;

/// `Err(Error::new(class, msg))`.
#[cold]
pub(crate) fn fail<T>(class: ErrorClass, msg: impl Into<String>) -> R<T> {
    Err(Error::new(class, msg))
}

/// MPI is initialized and not finalized (for calls that do not reach the core, which checks it
/// itself).
#[inline]
pub(crate) fn running() -> R<()> {
    // The engine runs for the world model or a session (a process may use sessions alone).
    if madmpi::active() {
        Ok(())
    } else if madmpi::finalized() {
        fail(ErrorClass::Other, "MPI has already been finalized")
    } else if !madmpi::initialized() {
        fail(
            ErrorClass::Other,
            "MPI is not initialized (call MPI_Init first)",
        )
    } else {
        Ok(())
    }
}

/// A count argument (`int` or `MPI_Count`).
#[inline]
pub(crate) fn count_arg(count: i64) -> R<usize> {
    usize::try_from(count).or_else(|_| {
        fail(
            ErrorClass::Count,
            format!("invalid count {count} (must be >= 0)"),
        )
    })
}

/// MPI_IN_PLACE given for a buffer that holds data where the standard does not allow it (where
/// it does, the caller has taken it before asking for a buffer).
#[inline]
pub(crate) fn refuse_in_place(buf: *const c_void, holds_data: bool) -> R<()> {
    if holds_data && std::ptr::eq(buf, MPI_IN_PLACE) {
        return fail(
            ErrorClass::Buffer,
            "invalid buffer: MPI_IN_PLACE is not allowed for this argument",
        );
    }
    Ok(())
}

/// A buffer argument: NULL is an error when data would be read or written at it (MPI_BOTTOM,
/// which is NULL, stays usable with datatypes of absolute addresses, whose data starts away from
/// 0, as MPICH allows).
#[inline]
pub(crate) fn check_buf(buf: *const c_void, count: usize, dt: &Datatype) -> R<()> {
    refuse_in_place(buf, count > 0)?;
    if buf.is_null() && count > 0 && dt.size() > 0 && (dt.is_predefined() || dt.true_lb() == 0) {
        return fail(
            ErrorClass::Buffer,
            format!("invalid buffer pointer NULL with count {count}"),
        );
    }
    Ok(())
}

/// A non-null output argument.
#[inline]
pub(crate) fn out<'a, T>(p: *mut T, what: &str) -> R<&'a mut T> {
    // SAFETY: non-null output arguments point to valid storage (the caller's contract).
    match unsafe { p.as_mut() } {
        Some(r) => Ok(r),
        None => fail(ErrorClass::Arg, format!("invalid argument: {what} is NULL")),
    }
}

/// A non-null input argument.
#[inline]
pub(crate) fn input<'a, T>(p: *const T, what: &str) -> R<&'a T> {
    // SAFETY: non-null input arguments point to valid values (the caller's contract).
    match unsafe { p.as_ref() } {
        Some(r) => Ok(r),
        None => fail(ErrorClass::Arg, format!("invalid argument: {what} is NULL")),
    }
}

/// An array argument of `n` elements (NULL allowed when `n == 0`).
pub(crate) fn array<'a, T>(p: *mut T, n: usize, what: &str) -> R<&'a mut [T]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return fail(ErrorClass::Arg, format!("invalid argument: {what} is NULL"));
    }
    // SAFETY: a non-null array argument has `n` elements (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// An array of statuses, or None for MPI_STATUSES_IGNORE.
pub(crate) fn statuses<'a>(p: *mut MPI_Status, n: usize) -> Option<&'a mut [MPI_Status]> {
    if p.is_null() || n == 0 {
        None
    } else {
        // SAFETY: a non-null status array has room for `n` statuses (the caller's contract).
        Some(unsafe { std::slice::from_raw_parts_mut(p, n) })
    }
}

// ------------------------------------------------------------------------------------ statuses

/// Byte count stored in a status.
#[inline]
pub(crate) fn status_bytes(s: &MPI_Status) -> u64 {
    (s.MPI_internal[0] as u32 as u64) | ((s.MPI_internal[1] as u32 as u64) << 32)
}

/// Store a byte count in a status.
#[inline]
pub(crate) fn set_status_bytes(s: &mut MPI_Status, bytes: u64) {
    s.MPI_internal[0] = bytes as u32 as c_int;
    s.MPI_internal[1] = (bytes >> 32) as u32 as c_int;
}

/// Fill a C status from a core status; MPI_ERROR is left alone (the standard sets it only where
/// it says so).
#[inline]
pub(crate) fn fill_status(d: &mut MPI_Status, s: &Status) {
    d.MPI_SOURCE = s.source;
    d.MPI_TAG = s.tag;
    set_status_bytes(d, s.bytes);
    d.MPI_internal[2] = s.cancelled as c_int;
    d.MPI_internal[3] = 0;
    d.MPI_internal[4] = 0;
}

/// Write a core status to a C status pointer (MPI_STATUS_IGNORE is NULL).
#[inline]
pub(crate) fn write_status(p: *mut MPI_Status, s: &Status) {
    // SAFETY: a non-null status pointer points to a status (the caller's contract).
    if let Some(d) = unsafe { p.as_mut() } {
        fill_status(d, s);
    }
}

/// The standard's empty status: source MPI_ANY_SOURCE, tag MPI_ANY_TAG, error MPI_SUCCESS,
/// count 0, not cancelled.
pub(crate) fn empty_status(d: &mut MPI_Status) {
    fill_status(d, &madmpi::EMPTY_STATUS);
    d.MPI_ERROR = MPI_SUCCESS;
}

/// Write the empty status to a C status pointer.
pub(crate) fn write_empty_status(p: *mut MPI_Status) {
    // SAFETY: as in write_status.
    if let Some(d) = unsafe { p.as_mut() } {
        empty_status(d);
    }
}

/// The error code of an operation's status, if it failed (the code's table out of line: most
/// statuses have no error).
#[inline(always)]
pub(crate) fn status_code(s: &Status) -> Option<c_int> {
    s.error.map(failed_code)
}

#[cold]
#[inline(never)]
fn failed_code(c: madmpi::ErrorClass) -> c_int {
    errors::class_code(c)
}

/// Why an operation with this status failed, for messages.
#[cold]
pub(crate) fn status_why(s: &Status) -> String {
    match s.error {
        Some(ErrorClass::Truncate) => format!(
            "message from rank {} with tag {} is longer than the receive buffer: truncated to {} bytes",
            s.source, s.tag, s.bytes
        ),
        Some(ErrorClass::ProcAborted) => "a process the operation involves has died".into(),
        Some(c) => format!("the operation failed ({})", c.mpi_name()),
        None => "no error".into(),
    }
}

/// Finish a single completion: write the status, and if the operation failed set its MPI_ERROR
/// and report the error on `comm`.
#[inline]
pub(crate) fn complete_one(
    comm: MPI_Comm,
    p: *mut MPI_Status,
    s: &Status,
    call: &dyn Fn() -> String,
) -> c_int {
    write_status(p, s);
    match status_code(s) {
        None => MPI_SUCCESS,
        Some(code) => {
            // SAFETY: as in write_status.
            if let Some(d) = unsafe { p.as_mut() } {
                d.MPI_ERROR = code;
            }
            errors::raise_code(comm, call, code, &status_why(s))
        }
    }
}

/// The end of most calls: MPI_SUCCESS, or the error through `comm`'s handler.
#[inline]
pub(crate) fn finish(comm: MPI_Comm, r: R<()>, call: &dyn Fn() -> String) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => errors::raise(comm, call, e),
    }
}

/// [`finish`] for calls that involve no communicator (errors go to MPI_COMM_SELF).
#[inline]
pub(crate) fn finish_self(name: &str, r: R<()>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => errors::raise_self(name, e),
    }
}

// ------------------------------------------------------------------------------------ misc

/// Thread level from the C constant (anything above a level counts as that level).
pub(crate) fn level_from_c(l: c_int) -> ThreadLevel {
    if l >= MPI_THREAD_MULTIPLE {
        ThreadLevel::Multiple
    } else if l >= MPI_THREAD_SERIALIZED {
        ThreadLevel::Serialized
    } else if l >= MPI_THREAD_FUNNELED {
        ThreadLevel::Funneled
    } else {
        ThreadLevel::Single
    }
}

/// The C constant of a thread level.
pub(crate) fn level_to_c(l: ThreadLevel) -> c_int {
    match l {
        ThreadLevel::Single => MPI_THREAD_SINGLE,
        ThreadLevel::Funneled => MPI_THREAD_FUNNELED,
        ThreadLevel::Serialized => MPI_THREAD_SERIALIZED,
        ThreadLevel::Multiple => MPI_THREAD_MULTIPLE,
    }
}

/// A datatype-crate error as a core error.
pub(crate) fn datatype_error(e: madmpi_datatypes::Error) -> Error {
    use madmpi_datatypes::Error as D;
    let class = match &e {
        D::Count(_) | D::ValueTooLarge(_) => ErrorClass::Count,
        D::Type(_) => ErrorClass::Type,
        D::Truncate { .. } => ErrorClass::Truncate,
        _ => ErrorClass::Arg,
    };
    Error::new(class, e.to_string())
}

/// Copy `s` into a C string buffer of `cap` bytes (NUL included), returning the length written.
pub(crate) fn copy_cstr(s: &str, dst: *mut std::os::raw::c_char, cap: usize) -> c_int {
    let bytes = s.as_bytes();
    let n = bytes.len().min(cap.saturating_sub(1));
    // SAFETY: the caller's buffer holds `cap` bytes (the standard's maximum for this string).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst as *mut u8, n);
        *dst.add(n) = 0;
    }
    n as c_int
}

/// `"MPI_Send(count=1, datatype=MPI_INT, dest=7, tag=0, comm=MPI_COMM_WORLD)"`.
#[cold]
pub(crate) fn p2p_call(
    name: &str,
    count: i64,
    dt: MPI_Datatype,
    peer: &str,
    rank: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> String {
    format!(
        "{name}(count={count}, datatype={}, {peer}={}, tag={}, comm={})",
        handles::type_name(dt),
        rank_name(rank),
        tag_name(tag),
        handles::comm_name(comm)
    )
}

/// A rank argument for messages.
pub(crate) fn rank_name(r: c_int) -> String {
    match r {
        MPI_ANY_SOURCE => "MPI_ANY_SOURCE".into(),
        MPI_PROC_NULL => "MPI_PROC_NULL".into(),
        r => r.to_string(),
    }
}

/// A tag argument for messages.
pub(crate) fn tag_name(t: c_int) -> String {
    match t {
        MPI_ANY_TAG => "MPI_ANY_TAG".into(),
        t => t.to_string(),
    }
}

/// Run `f` on a scratch slice of `n` copies of `init`, on the stack when small.
pub(crate) fn with_scratch<T: Copy, X>(n: usize, init: T, f: impl FnOnce(&mut [T]) -> X) -> X {
    const STACK: usize = 32;
    if n <= STACK {
        let mut a = [init; STACK];
        f(&mut a[..n])
    } else {
        let mut v = vec![init; n];
        f(&mut v)
    }
}
