//! `MPI_Pack`, `MPI_Unpack` and `MPI_Pack_size` (native representation, errors on the
//! communicator's handler) and their `external32` versions (`MPI_Pack_external` …, errors on
//! MPI_COMM_SELF's handler), each with its `_c` twin.
//!
//! The packing itself is `madmpi-datatypes`' (`pack_checked`, `unpack_checked`,
//! `pack_external`, `unpack_external`); this module checks the C arguments. A buffer too small
//! for the data is `MPI_ERR_TRUNCATE` and nothing is written; a position or size that does not
//! fit the output's C type is `MPI_ERR_VALUE_TOO_LARGE`.

use std::os::raw::{c_char, c_int, c_void};

use madmpi::ErrorClass;

use super::common::*;
use super::datatype::c_str;
use crate::abi::*;
use crate::handles;

/// The datatype of a pack or unpack: committed (as for communication).
fn committed(datatype: MPI_Datatype) -> R<handles::DtRef> {
    let dt = handles::datatype(datatype)?;
    if !dt.is_committed() {
        return fail(
            ErrorClass::Type,
            "datatype not committed (call MPI_Type_commit)",
        );
    }
    Ok(dt)
}

/// A buffer size or position argument.
fn size_arg(v: i64, what: &str) -> R<usize> {
    usize::try_from(v).or_else(|_| {
        fail(
            ErrorClass::Arg,
            format!("invalid {what} {v} (must be >= 0)"),
        )
    })
}

/// `end` as a value of the output type whose largest value is `max`.
fn fits(end: usize, max: i64, what: &str) -> R<i64> {
    i64::try_from(end)
        .ok()
        .filter(|&v| v <= max)
        .ok_or_else(|| {
            madmpi::Error::new(
                ErrorClass::ValueTooLarge,
                format!("{what} {end} does not fit the output argument"),
            )
        })
}

/// A packed-data buffer of `len` bytes (NULL only when empty).
fn packed_buf(p: *const c_void, len: usize, what: &str) -> R<*mut u8> {
    if p.is_null() && len > 0 {
        return fail(
            ErrorClass::Buffer,
            format!("invalid buffer pointer: {what} is NULL with size {len}"),
        );
    }
    Ok(p as *mut u8)
}

/// The checked arguments of a pack or unpack of `count` elements of `datatype` at `buf`,
/// to or from a packed buffer of `size` bytes (`size_name`) from `position`: the element
/// count, the type, the size, the position and the bytes the elements take packed; the end
/// position must fit `pos_max`.
#[allow(clippy::too_many_arguments)]
fn checked(
    buf: *const c_void,
    count: i64,
    datatype: MPI_Datatype,
    size: i64,
    size_name: &str,
    position: i64,
    pos_max: i64,
    external: bool,
) -> R<(usize, handles::DtRef, usize, usize, usize)> {
    running()?;
    let n = count_arg(count)?;
    let dt = committed(datatype)?;
    check_buf(buf, n, &dt)?;
    let size = size_arg(size, size_name)?;
    let pos = size_arg(position, "position")?;
    if pos > size {
        // (Open MPI's class too; the generic "0 available" said nothing of why.)
        return fail(
            ErrorClass::Truncate,
            format!(
                "position {pos} is past the end of the {size}-byte packed buffer ({size_name})"
            ),
        );
    }
    let needed = if external {
        dt.pack_external_size(n)?
    } else {
        dt.pack_size(n)?
    };
    fits(pos.saturating_add(needed), pos_max, "position")?;
    Ok((n, dt, size, pos, needed))
}

/// `MPI_Pack` and `MPI_Pack_external`: pack `incount` elements at `outbuf[position..]`; returns
/// the new position. `external`: in `external32`. `pos_max`: the largest position the caller's
/// position type holds.
#[allow(clippy::too_many_arguments)]
unsafe fn pack(
    inbuf: *const c_void,
    incount: i64,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: i64,
    position: i64,
    pos_max: i64,
    external: bool,
) -> R<i64> {
    let (n, dt, size, mut pos, bytes) = checked(
        inbuf, incount, datatype, outsize, "outsize", position, pos_max, external,
    )?;
    let out = packed_buf(outbuf, size, "outbuf")?;
    let out: &mut [u8] = if size == 0 {
        &mut []
    } else {
        // SAFETY: `outbuf` holds `outsize` bytes (the caller's contract), not overlapping the
        // data of `inbuf`.
        unsafe { std::slice::from_raw_parts_mut(out, size) }
    };
    // Over an emulated NIC, the copy of the `bytes` packed costs what it cost on the paper's
    // host.
    // SAFETY: `inbuf` holds `incount` elements of `datatype` (the caller's contract; NULL is
    // MPI_BOTTOM with absolute displacements).
    madmpi::charge_host_copy(bytes, || unsafe {
        if external {
            dt.pack_external(inbuf as *const u8, n, out, &mut pos)
        } else {
            dt.pack_checked(inbuf as *const u8, n, out, &mut pos)
        }
    })?;
    Ok(pos as i64)
}

/// `MPI_Unpack` and `MPI_Unpack_external`: unpack `outcount` elements from `inbuf[position..]`
/// into `outbuf`; returns the new position.
#[allow(clippy::too_many_arguments)]
unsafe fn unpack(
    inbuf: *const c_void,
    insize: i64,
    position: i64,
    pos_max: i64,
    outbuf: *mut c_void,
    outcount: i64,
    datatype: MPI_Datatype,
    external: bool,
) -> R<i64> {
    let (n, dt, size, mut pos, bytes) = checked(
        outbuf, outcount, datatype, insize, "insize", position, pos_max, external,
    )?;
    let input = packed_buf(inbuf, size, "inbuf")?;
    let input: &[u8] = if size == 0 {
        &[]
    } else {
        // SAFETY: `inbuf` holds `insize` bytes (the caller's contract), not overlapping the
        // data of `outbuf`.
        unsafe { std::slice::from_raw_parts(input, size) }
    };
    // SAFETY: `outbuf` holds `outcount` elements of `datatype` (the caller's contract).
    madmpi::charge_host_copy(bytes, || unsafe {
        if external {
            dt.unpack_external(input, &mut pos, outbuf as *mut u8, n)
        } else {
            dt.unpack_checked(input, &mut pos, outbuf as *mut u8, n)
        }
    })?;
    Ok(pos as i64)
}

/// Read a position argument.
fn read_pos<'a, T: Copy + Into<i64>>(p: *mut T) -> R<(&'a mut T, i64)> {
    let slot = out(p, "position")?;
    let v = (*slot).into();
    Ok((slot, v))
}

fn pack_call(name: &str, incount: i64, datatype: MPI_Datatype, comm: MPI_Comm) -> String {
    format!(
        "{name}(incount={incount}, datatype={}, comm={})",
        handles::type_name(datatype),
        handles::comm_name(comm)
    )
}

fn unpack_call(name: &str, outcount: i64, datatype: MPI_Datatype, comm: MPI_Comm) -> String {
    format!(
        "{name}(outcount={outcount}, datatype={}, comm={})",
        handles::type_name(datatype),
        handles::comm_name(comm)
    )
}

// ------------------------------------------------------------------------------------ native

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Pack(
    inbuf: *const c_void,
    incount: c_int,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: c_int,
    position: *mut c_int,
    comm: MPI_Comm,
) -> c_int {
    let r = (|| {
        handles::comm(comm)?;
        let (slot, pos) = read_pos(position)?;
        let end = unsafe {
            pack(
                inbuf,
                incount as i64,
                datatype,
                outbuf,
                outsize as i64,
                pos,
                c_int::MAX as i64,
                false,
            )?
        };
        *slot = end as c_int;
        Ok(())
    })();
    finish(comm, r, &|| {
        pack_call("MPI_Pack", incount as i64, datatype, comm)
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Pack_c(
    inbuf: *const c_void,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Count,
    position: *mut MPI_Count,
    comm: MPI_Comm,
) -> c_int {
    let r = (|| {
        handles::comm(comm)?;
        let (slot, pos) = read_pos(position)?;
        *slot = unsafe {
            pack(
                inbuf,
                incount,
                datatype,
                outbuf,
                outsize,
                pos,
                MPI_Count::MAX,
                false,
            )?
        };
        Ok(())
    })();
    finish(comm, r, &|| {
        pack_call("MPI_Pack_c", incount, datatype, comm)
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Unpack(
    inbuf: *const c_void,
    insize: c_int,
    position: *mut c_int,
    outbuf: *mut c_void,
    outcount: c_int,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let r = (|| {
        handles::comm(comm)?;
        let (slot, pos) = read_pos(position)?;
        let end = unsafe {
            unpack(
                inbuf,
                insize as i64,
                pos,
                c_int::MAX as i64,
                outbuf,
                outcount as i64,
                datatype,
                false,
            )?
        };
        *slot = end as c_int;
        Ok(())
    })();
    finish(comm, r, &|| {
        unpack_call("MPI_Unpack", outcount as i64, datatype, comm)
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Unpack_c(
    inbuf: *const c_void,
    insize: MPI_Count,
    position: *mut MPI_Count,
    outbuf: *mut c_void,
    outcount: MPI_Count,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let r = (|| {
        handles::comm(comm)?;
        let (slot, pos) = read_pos(position)?;
        *slot = unsafe {
            unpack(
                inbuf,
                insize,
                pos,
                MPI_Count::MAX,
                outbuf,
                outcount,
                datatype,
                false,
            )?
        };
        Ok(())
    })();
    finish(comm, r, &|| {
        unpack_call("MPI_Unpack_c", outcount, datatype, comm)
    })
}

/// Bytes to pack `incount` elements (`external`: in external32).
fn pack_size(incount: i64, datatype: MPI_Datatype, external: bool) -> R<usize> {
    running()?;
    let n = count_arg(incount)?;
    let dt = handles::datatype(datatype)?;
    Ok(if external {
        dt.pack_external_size(n)?
    } else {
        dt.pack_size(n)?
    })
}

pub unsafe fn MPI_Pack_size(
    incount: c_int,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
    size: *mut c_int,
) -> c_int {
    let r = (|| {
        handles::comm(comm)?;
        let o = out(size, "size")?;
        let s = pack_size(incount as i64, datatype, false)?;
        *o = fits(s, c_int::MAX as i64, "pack size")? as c_int;
        Ok(())
    })();
    finish(comm, r, &|| {
        pack_call("MPI_Pack_size", incount as i64, datatype, comm)
    })
}

pub unsafe fn MPI_Pack_size_c(
    incount: MPI_Count,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
    size: *mut MPI_Count,
) -> c_int {
    let r = (|| {
        handles::comm(comm)?;
        let o = out(size, "size")?;
        let s = pack_size(incount, datatype, false)?;
        *o = fits(s, MPI_Count::MAX, "pack size")?;
        Ok(())
    })();
    finish(comm, r, &|| {
        pack_call("MPI_Pack_size_c", incount, datatype, comm)
    })
}

// ------------------------------------------------------------------------------------ external32

/// The `datarep` argument: only "external32".
fn check_datarep(p: *const c_char) -> R<()> {
    Ok(madmpi_datatypes::check_datarep(&c_str(p, "datarep")?)?)
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Pack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: c_int,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Aint,
    position: *mut MPI_Aint,
) -> c_int {
    let r = (|| {
        check_datarep(datarep)?;
        let slot = out(position, "position")?;
        *slot = unsafe {
            pack(
                inbuf,
                incount as i64,
                datatype,
                outbuf,
                outsize as i64,
                *slot as i64,
                MPI_Aint::MAX as i64,
                true,
            )?
        } as MPI_Aint;
        Ok(())
    })();
    finish_self("MPI_Pack_external", r)
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Pack_external_c(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Count,
    position: *mut MPI_Count,
) -> c_int {
    let r = (|| {
        check_datarep(datarep)?;
        let slot = out(position, "position")?;
        *slot = unsafe {
            pack(
                inbuf,
                incount,
                datatype,
                outbuf,
                outsize,
                *slot,
                MPI_Count::MAX,
                true,
            )?
        };
        Ok(())
    })();
    finish_self("MPI_Pack_external_c", r)
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Unpack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Aint,
    position: *mut MPI_Aint,
    outbuf: *mut c_void,
    outcount: c_int,
    datatype: MPI_Datatype,
) -> c_int {
    let r = (|| {
        check_datarep(datarep)?;
        let slot = out(position, "position")?;
        *slot = unsafe {
            unpack(
                inbuf,
                insize as i64,
                *slot as i64,
                MPI_Aint::MAX as i64,
                outbuf,
                outcount as i64,
                datatype,
                true,
            )?
        } as MPI_Aint;
        Ok(())
    })();
    finish_self("MPI_Unpack_external", r)
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Unpack_external_c(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Count,
    position: *mut MPI_Count,
    outbuf: *mut c_void,
    outcount: MPI_Count,
    datatype: MPI_Datatype,
) -> c_int {
    let r = (|| {
        check_datarep(datarep)?;
        let slot = out(position, "position")?;
        *slot = unsafe {
            unpack(
                inbuf,
                insize,
                *slot,
                MPI_Count::MAX,
                outbuf,
                outcount,
                datatype,
                true,
            )?
        };
        Ok(())
    })();
    finish_self("MPI_Unpack_external_c", r)
}

pub unsafe fn MPI_Pack_external_size(
    datarep: *const c_char,
    incount: c_int,
    datatype: MPI_Datatype,
    size: *mut MPI_Aint,
) -> c_int {
    let r = (|| {
        check_datarep(datarep)?;
        let o = out(size, "size")?;
        let s = pack_size(incount as i64, datatype, true)?;
        *o = fits(s, MPI_Aint::MAX as i64, "pack size")? as MPI_Aint;
        Ok(())
    })();
    finish_self("MPI_Pack_external_size", r)
}

pub unsafe fn MPI_Pack_external_size_c(
    datarep: *const c_char,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    size: *mut MPI_Count,
) -> c_int {
    let r = (|| {
        check_datarep(datarep)?;
        let o = out(size, "size")?;
        let s = pack_size(incount, datatype, true)?;
        *o = fits(s, MPI_Count::MAX, "pack size")?;
        Ok(())
    })();
    finish_self("MPI_Pack_external_size_c", r)
}
