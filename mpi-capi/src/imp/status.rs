//! Reading and writing statuses: counts and elements, the cancelled flag, and the MPI-5 field
//! accessors.

use std::os::raw::c_int;

use madmpi::ErrorClass;

use super::common::*;
use crate::abi::*;
use crate::handles;

/// Elements of `datatype` in the status's bytes: `None` when they are not a whole number.
fn count_of(status: *const MPI_Status, datatype: MPI_Datatype) -> R<Option<u64>> {
    running()?;
    let s = input(status, "status")?;
    let dt = handles::datatype(datatype)?;
    let bytes = status_bytes(s);
    Ok(match dt.size() as u64 {
        0 if bytes == 0 => Some(0),
        0 => None,
        size if bytes / size * size == bytes => Some(bytes / size),
        _ => None,
    })
}

/// Basic elements of `datatype` in the status's bytes.
fn elements_of(status: *const MPI_Status, datatype: MPI_Datatype) -> R<Option<u64>> {
    running()?;
    let s = input(status, "status")?;
    let dt = handles::datatype(datatype)?;
    let bytes =
        usize::try_from(status_bytes(s)).or_else(|_| fail(ErrorClass::Count, "count too large"))?;
    Ok(dt.elements_in(bytes).map(|n| n as u64))
}

/// An `int` count: MPI_UNDEFINED when undefined or too large for an `int`.
fn as_int(v: Option<u64>) -> c_int {
    v.and_then(|v| c_int::try_from(v).ok())
        .unwrap_or(MPI_UNDEFINED)
}

/// An `MPI_Count`: MPI_UNDEFINED when undefined.
fn as_count(v: Option<u64>) -> MPI_Count {
    v.and_then(|v| MPI_Count::try_from(v).ok())
        .unwrap_or(MPI_UNDEFINED as MPI_Count)
}

pub unsafe fn MPI_Get_count(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut c_int,
) -> c_int {
    let r = (|| {
        let out = out(count, "count")?;
        *out = as_int(count_of(status, datatype)?);
        Ok(())
    })();
    finish_self("MPI_Get_count", r)
}

pub unsafe fn MPI_Get_count_c(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut MPI_Count,
) -> c_int {
    let r = (|| {
        let out = out(count, "count")?;
        *out = as_count(count_of(status, datatype)?);
        Ok(())
    })();
    finish_self("MPI_Get_count_c", r)
}

pub unsafe fn MPI_Get_elements(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut c_int,
) -> c_int {
    let r = (|| {
        let out = out(count, "count")?;
        *out = as_int(elements_of(status, datatype)?);
        Ok(())
    })();
    finish_self("MPI_Get_elements", r)
}

pub unsafe fn MPI_Get_elements_c(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut MPI_Count,
) -> c_int {
    let r = (|| {
        let out = out(count, "count")?;
        *out = as_count(elements_of(status, datatype)?);
        Ok(())
    })();
    finish_self("MPI_Get_elements_c", r)
}

pub unsafe fn MPI_Get_elements_x(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut MPI_Count,
) -> c_int {
    let r = (|| {
        let out = out(count, "count")?;
        *out = as_count(elements_of(status, datatype)?);
        Ok(())
    })();
    finish_self("MPI_Get_elements_x", r)
}

/// `count` elements of `datatype`: the status then holds `count * size` bytes (as MPICH does
/// for every datatype).
fn set_elements(status: *mut MPI_Status, datatype: MPI_Datatype, count: i64) -> R<()> {
    running()?;
    let s = out(status, "status")?;
    let dt = handles::datatype(datatype)?;
    let n = count_arg(count)? as u64;
    let bytes = n
        .checked_mul(dt.size() as u64)
        .ok_or_else(|| madmpi::Error::new(ErrorClass::Count, format!("count {count} overflows")))?;
    set_status_bytes(s, bytes);
    Ok(())
}

pub unsafe fn MPI_Status_set_elements(
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    count: c_int,
) -> c_int {
    finish_self(
        "MPI_Status_set_elements",
        set_elements(status, datatype, count as i64),
    )
}

pub unsafe fn MPI_Status_set_elements_c(
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    count: MPI_Count,
) -> c_int {
    finish_self(
        "MPI_Status_set_elements_c",
        set_elements(status, datatype, count),
    )
}

pub unsafe fn MPI_Status_set_elements_x(
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    count: MPI_Count,
) -> c_int {
    finish_self(
        "MPI_Status_set_elements_x",
        set_elements(status, datatype, count),
    )
}

pub unsafe fn MPI_Status_set_cancelled(status: *mut MPI_Status, flag: c_int) -> c_int {
    let r = running()
        .and_then(|()| out(status, "status"))
        .map(|s| s.MPI_internal[2] = (flag != 0) as c_int);
    finish_self("MPI_Status_set_cancelled", r)
}

fn get_field(
    name: &str,
    status: *const MPI_Status,
    out_p: *mut c_int,
    f: fn(&MPI_Status) -> c_int,
) -> c_int {
    let r = (|| {
        running()?;
        let s = input(status, "status")?;
        *out(out_p, "output")? = f(s);
        Ok(())
    })();
    finish_self(name, r)
}

fn set_field(name: &str, status: *mut MPI_Status, f: impl FnOnce(&mut MPI_Status)) -> c_int {
    let r = running().and_then(|()| out(status, "status")).map(f);
    finish_self(name, r)
}

pub unsafe fn MPI_Status_get_source(status: *const MPI_Status, source: *mut c_int) -> c_int {
    get_field("MPI_Status_get_source", status, source, |s| s.MPI_SOURCE)
}

pub unsafe fn MPI_Status_get_tag(status: *const MPI_Status, tag: *mut c_int) -> c_int {
    get_field("MPI_Status_get_tag", status, tag, |s| s.MPI_TAG)
}

pub unsafe fn MPI_Status_get_error(status: *const MPI_Status, err: *mut c_int) -> c_int {
    get_field("MPI_Status_get_error", status, err, |s| s.MPI_ERROR)
}

pub unsafe fn MPI_Status_set_source(status: *mut MPI_Status, source: c_int) -> c_int {
    set_field("MPI_Status_set_source", status, |s| s.MPI_SOURCE = source)
}

pub unsafe fn MPI_Status_set_tag(status: *mut MPI_Status, tag: c_int) -> c_int {
    set_field("MPI_Status_set_tag", status, |s| s.MPI_TAG = tag)
}

pub unsafe fn MPI_Status_set_error(status: *mut MPI_Status, err: c_int) -> c_int {
    set_field("MPI_Status_set_error", status, |s| s.MPI_ERROR = err)
}
