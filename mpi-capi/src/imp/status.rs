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

/// Complete basic elements of `dt` in the first `bytes` bytes of its packed stream (also between
/// element boundaries, where `elements_in` has no answer: the last boundary below counts, and
/// no basic element is longer than 32 bytes).
fn elements_before(dt: &madmpi::Datatype, bytes: usize) -> usize {
    (0..=bytes.min(32))
        .find_map(|back| dt.elements_in(bytes - back))
        .unwrap_or(0)
}

/// Bytes of the packed stream of `dt` that hold its first `count` basic elements.
fn bytes_of_elements(dt: &madmpi::Datatype, count: u64) -> Option<u64> {
    let per = dt.element_count() as u64;
    if per == 0 {
        return (count == 0).then_some(0);
    }
    let (full, rest) = (count / per, (count % per) as usize);
    // The shortest prefix of one element holding `rest` basic elements.
    let (mut lo, mut hi) = (0usize, dt.size());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if elements_before(dt, mid) >= rest {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    full.checked_mul(dt.size() as u64)?.checked_add(lo as u64)
}

/// `count` basic elements of `datatype`: MPI_Get_elements then answers `count` (also for derived
/// and pair types, whose elements are not `size` bytes each), and MPI_Get_count the number of
/// whole `datatype` elements they make.
fn set_elements(status: *mut MPI_Status, datatype: MPI_Datatype, count: i64) -> R<()> {
    running()?;
    let s = out(status, "status")?;
    let dt = handles::datatype(datatype)?;
    let n = count_arg(count)? as u64;
    let bytes = bytes_of_elements(&dt, n)
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

#[cfg(test)]
mod tests {
    use super::*;
    use madmpi::Datatype;
    use madmpi_datatypes::Basic;

    #[test]
    fn set_elements_counts_basic_elements() {
        let int = Datatype::basic(Basic::Int);
        let double = Datatype::basic(Basic::Double);
        // {int, double, double}: 20 bytes, 3 elements of different sizes
        let t = Datatype::create_struct(&[1, 2], &[0, 8], &[int.clone(), double]).unwrap();
        for (count, bytes) in [(0, 0), (1, 4), (2, 12), (3, 20), (4, 24), (7, 44)] {
            assert_eq!(
                bytes_of_elements(&t, count),
                Some(bytes),
                "{count} elements"
            );
            assert_eq!(t.elements_in(bytes as usize), Some(count as usize));
        }
        let pair = Datatype::basic(Basic::DoubleInt);
        assert_eq!(bytes_of_elements(&pair, 3), Some(20));
        assert_eq!(bytes_of_elements(&int, 5), Some(20));
        let empty = Datatype::contiguous(0, &int).unwrap();
        assert_eq!(bytes_of_elements(&empty, 0), Some(0));
        assert_eq!(bytes_of_elements(&empty, 1), None);
    }
}
