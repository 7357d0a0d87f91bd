//! Derived datatypes: the constructors (with their `_c` large-count twins), commit and free,
//! size and extent queries, envelope and contents decoding, names, the Fortran parameterized
//! types, `MPI_Type_match_size`, `MPI_Type_get_value_index` and `MPI_Get_address`.
//!
//! The types themselves live in `madmpi-datatypes`; this module converts the C arguments
//! (signed counts, `int`/`MPI_Aint`/`MPI_Count` arrays, ABI constants) and owns the handles.
//! A handle of a derived type holds one clone of the type: freeing the handle drops that clone,
//! and pending operations and types built on it keep theirs, so a freed type stays alive until
//! they are done. Attributes (`attr.rs`) follow `MPI_Type_dup` and `MPI_Type_free` through their
//! callbacks. No call here touches the network.
//!
//! Decisions where the standard leaves a choice (tests in `tests/c/dt/errors.c`):
//! - negative counts and block lengths are `MPI_ERR_COUNT`; other negative sizes, a bad
//!   `ndims`, order or distribution are `MPI_ERR_ARG`; a bound, stride or extent that does not
//!   fit the address range is `MPI_ERR_VALUE_TOO_LARGE`;
//! - arrays shorter than the envelope in `MPI_Type_get_contents` are `MPI_ERR_ARG`;
//! - the `int` variants of `MPI_Type_get_envelope`/`MPI_Type_get_contents` on a type whose
//!   arguments only the `_c` variants can return are `MPI_ERR_TYPE`;
//! - `MPI_Type_create_f90_*` return the same handle for the same arguments; like the named
//!   types, those handles cannot be freed (`MPI_ERR_TYPE`).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

use madmpi::{Datatype, ErrorClass};
use madmpi_datatypes::{Basic, Distribution, Order, TypeClass};
use parking_lot::{const_mutex, Mutex};

use super::common::*;
use crate::abi::*;
use crate::errors;
use crate::handles;

// ------------------------------------------------------------------------------------ helpers

/// An integer argument of any C width.
pub(crate) trait Wide: Copy {
    fn wide(self) -> i64;
}
impl Wide for i32 {
    fn wide(self) -> i64 {
        self as i64
    }
}
impl Wide for i64 {
    fn wide(self) -> i64 {
        self
    }
}
impl Wide for isize {
    fn wide(self) -> i64 {
        self as i64
    }
}

/// A read-only array argument of `n` elements (NULL allowed when `n == 0`).
pub(crate) fn slice<'a, T>(p: *const T, n: usize, what: &str) -> R<&'a [T]> {
    array(p as *mut T, n, what).map(|s| &*s)
}

/// An array count such as `count` or `ndims`: negative is `class`.
fn len_arg(v: i64, what: &str, class: ErrorClass) -> R<usize> {
    usize::try_from(v).or_else(|_| fail(class, format!("invalid {what} {v} (must be >= 0)")))
}

/// A non-negative integer argument: negative is `class`.
fn nonneg(v: impl Wide, what: &str, class: ErrorClass) -> R<usize> {
    let v = v.wide();
    usize::try_from(v).or_else(|_| fail(class, format!("invalid {what} {v} (must be >= 0)")))
}

/// Block lengths (counts: negative is MPI_ERR_COUNT).
fn blocklens<T: Wide>(s: &[T]) -> R<Vec<usize>> {
    s.iter()
        .enumerate()
        .map(|(i, &b)| nonneg(b, &format!("array_of_blocklengths[{i}]"), ErrorClass::Count))
        .collect()
}

/// Displacements, strides, bounds: any value that fits an address.
fn addr(v: impl Wide, what: &str) -> R<isize> {
    let v = v.wide();
    isize::try_from(v).or_else(|_| {
        fail(
            ErrorClass::ValueTooLarge,
            format!("{what} = {v} does not fit an address"),
        )
    })
}

fn displs<T: Wide>(s: &[T]) -> R<Vec<isize>> {
    s.iter()
        .enumerate()
        .map(|(i, &d)| addr(d, &format!("array_of_displacements[{i}]")))
        .collect()
}

/// Non-negative sizes of a multi-dimensional array (negative is MPI_ERR_ARG).
fn dims<T: Wide>(s: &[T], what: &str) -> R<Vec<usize>> {
    s.iter()
        .enumerate()
        .map(|(i, &v)| nonneg(v, &format!("{what}[{i}]"), ErrorClass::Arg))
        .collect()
}

/// The datatype of an argument handle, as an owned clone.
fn old_type(h: MPI_Datatype) -> R<Datatype> {
    Ok(Datatype::clone(&*handles::datatype(h)?))
}

/// Build a type with `f`, register it and write its handle to `newtype` (only on success).
/// `large`: made by a `_c` constructor (its contents are reported as large counts).
fn build(newtype: *mut MPI_Datatype, large: bool, f: impl FnOnce() -> R<Datatype>) -> R<()> {
    running()?;
    let out = out(newtype, "newtype")?;
    let t = f()?;
    let t = if large { t.mark_large_count() } else { t };
    *out = handles::register_datatype(t)?;
    Ok(())
}

/// An `int` output: the value, or MPI_UNDEFINED when it does not fit.
fn int_or_undefined(v: impl TryInto<c_int>) -> c_int {
    v.try_into().unwrap_or(MPI_UNDEFINED)
}

/// A C string argument.
pub(crate) fn c_str(p: *const c_char, what: &str) -> R<String> {
    if p.is_null() {
        return fail(ErrorClass::Arg, format!("invalid argument: {what} is NULL"));
    }
    // SAFETY: a non-null string argument is NUL-terminated (the caller's contract).
    Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

// ------------------------------------------------------------------------------------ handles of returned types

/// The `f90` types handed out so far, by (combiner, p, r): the standard makes them predefined,
/// so the same arguments give the same handle, and they are never freed.
struct F90Entry {
    key: (c_int, c_int, c_int),
    handle: usize,
    dt: Datatype,
}

static F90_TYPES: Mutex<Vec<F90Entry>> = const_mutex(Vec::new());

/// The handle of an `f90` type, creating it on first use.
fn f90_handle(key: (c_int, c_int, c_int), make: impl FnOnce() -> R<Datatype>) -> R<MPI_Datatype> {
    let mut t = F90_TYPES.lock();
    if let Some(e) = t.iter().find(|e| e.key == key) {
        return Ok(e.handle as MPI_Datatype);
    }
    let dt = make()?;
    let handle = handles::register_datatype(dt.clone())? as usize;
    t.push(F90Entry { key, handle, dt });
    Ok(handle as MPI_Datatype)
}

/// The handle to return for a type found inside another (`MPI_Type_get_contents`): the
/// predefined handle for a named or `f90` type, a new handle for a derived one.
fn handle_for(dt: &Datatype) -> R<MPI_Datatype> {
    if let Some(b) = dt.as_basic() {
        return Ok(handles::basic_handle(b));
    }
    if dt.is_predefined() {
        if let Some(e) = F90_TYPES.lock().iter().find(|e| e.dt.ptr_eq(dt)) {
            return Ok(e.handle as MPI_Datatype);
        }
    }
    handles::register_datatype(dt.clone())
}

/// New handles for `types`; on failure none stays registered.
fn handles_for(types: &[Datatype]) -> R<Vec<MPI_Datatype>> {
    let mut v = Vec::with_capacity(types.len());
    for t in types {
        match handle_for(t) {
            Ok(h) => v.push(h),
            Err(e) => {
                for (h, t) in v.into_iter().zip(types) {
                    if !t.is_predefined() {
                        let _ = handles::free_datatype(h);
                    }
                }
                return Err(e);
            }
        }
    }
    Ok(v)
}

// ------------------------------------------------------------------------------------ contiguous, vector

fn contiguous(count: i64, oldtype: MPI_Datatype, newtype: *mut MPI_Datatype, large: bool) -> R<()> {
    build(newtype, large, || {
        let n = count_arg(count)?;
        Ok(Datatype::contiguous(n, &old_type(oldtype)?)?)
    })
}

pub unsafe fn MPI_Type_contiguous(
    count: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_contiguous",
        contiguous(count as i64, oldtype, newtype, false),
    )
}

pub unsafe fn MPI_Type_contiguous_c(
    count: MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_contiguous_c",
        contiguous(count, oldtype, newtype, true),
    )
}

/// Vector (`bytes == false`, stride in extents) or hvector (stride in bytes).
fn vector(
    count: i64,
    blocklength: i64,
    stride: i64,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    bytes: bool,
    large: bool,
) -> R<()> {
    build(newtype, large, || {
        let n = count_arg(count)?;
        let b = nonneg(blocklength, "blocklength", ErrorClass::Count)?;
        let s = addr(stride, "stride")?;
        let old = old_type(oldtype)?;
        Ok(if bytes {
            Datatype::create_hvector(n, b, s, &old)?
        } else {
            Datatype::vector(n, b, s, &old)?
        })
    })
}

pub unsafe fn MPI_Type_vector(
    count: c_int,
    blocklength: c_int,
    stride: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_vector",
        vector(
            count as i64,
            blocklength as i64,
            stride as i64,
            oldtype,
            newtype,
            false,
            false,
        ),
    )
}

pub unsafe fn MPI_Type_vector_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    stride: MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_vector_c",
        vector(count, blocklength, stride, oldtype, newtype, false, true),
    )
}

pub unsafe fn MPI_Type_create_hvector(
    count: c_int,
    blocklength: c_int,
    stride: MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_hvector",
        vector(
            count as i64,
            blocklength as i64,
            stride as i64,
            oldtype,
            newtype,
            true,
            false,
        ),
    )
}

pub unsafe fn MPI_Type_create_hvector_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    stride: MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_hvector_c",
        vector(count, blocklength, stride, oldtype, newtype, true, true),
    )
}

// ------------------------------------------------------------------------------------ indexed

/// Indexed (`bytes == false`, displacements in extents) or hindexed.
#[allow(clippy::too_many_arguments)]
fn indexed<B: Wide, D: Wide>(
    count: i64,
    array_of_blocklengths: *const B,
    array_of_displacements: *const D,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    bytes: bool,
    large: bool,
) -> R<()> {
    build(newtype, large, || {
        let n = count_arg(count)?;
        let bl = blocklens(slice(array_of_blocklengths, n, "array_of_blocklengths")?)?;
        let d = displs(slice(array_of_displacements, n, "array_of_displacements")?)?;
        let old = old_type(oldtype)?;
        Ok(if bytes {
            Datatype::create_hindexed(&bl, &d, &old)?
        } else {
            Datatype::indexed(&bl, &d, &old)?
        })
    })
}

pub unsafe fn MPI_Type_indexed(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_indexed",
        indexed(
            count as i64,
            array_of_blocklengths,
            array_of_displacements,
            oldtype,
            newtype,
            false,
            false,
        ),
    )
}

pub unsafe fn MPI_Type_indexed_c(
    count: MPI_Count,
    array_of_blocklengths: *const MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_indexed_c",
        indexed(
            count,
            array_of_blocklengths,
            array_of_displacements,
            oldtype,
            newtype,
            false,
            true,
        ),
    )
}

pub unsafe fn MPI_Type_create_hindexed(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_hindexed",
        indexed(
            count as i64,
            array_of_blocklengths,
            array_of_displacements,
            oldtype,
            newtype,
            true,
            false,
        ),
    )
}

pub unsafe fn MPI_Type_create_hindexed_c(
    count: MPI_Count,
    array_of_blocklengths: *const MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_hindexed_c",
        indexed(
            count,
            array_of_blocklengths,
            array_of_displacements,
            oldtype,
            newtype,
            true,
            true,
        ),
    )
}

/// Indexed_block (`bytes == false`) or hindexed_block.
#[allow(clippy::too_many_arguments)]
fn indexed_block<D: Wide>(
    count: i64,
    blocklength: i64,
    array_of_displacements: *const D,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    bytes: bool,
    large: bool,
) -> R<()> {
    build(newtype, large, || {
        let n = count_arg(count)?;
        let b = nonneg(blocklength, "blocklength", ErrorClass::Count)?;
        let d = displs(slice(array_of_displacements, n, "array_of_displacements")?)?;
        let old = old_type(oldtype)?;
        Ok(if bytes {
            Datatype::create_hindexed_block(b, &d, &old)?
        } else {
            Datatype::create_indexed_block(b, &d, &old)?
        })
    })
}

pub unsafe fn MPI_Type_create_indexed_block(
    count: c_int,
    blocklength: c_int,
    array_of_displacements: *const c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_indexed_block",
        indexed_block(
            count as i64,
            blocklength as i64,
            array_of_displacements,
            oldtype,
            newtype,
            false,
            false,
        ),
    )
}

pub unsafe fn MPI_Type_create_indexed_block_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_indexed_block_c",
        indexed_block(
            count,
            blocklength,
            array_of_displacements,
            oldtype,
            newtype,
            false,
            true,
        ),
    )
}

pub unsafe fn MPI_Type_create_hindexed_block(
    count: c_int,
    blocklength: c_int,
    array_of_displacements: *const MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_hindexed_block",
        indexed_block(
            count as i64,
            blocklength as i64,
            array_of_displacements,
            oldtype,
            newtype,
            true,
            false,
        ),
    )
}

pub unsafe fn MPI_Type_create_hindexed_block_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_hindexed_block_c",
        indexed_block(
            count,
            blocklength,
            array_of_displacements,
            oldtype,
            newtype,
            true,
            true,
        ),
    )
}

// ------------------------------------------------------------------------------------ struct

fn create_struct<B: Wide, D: Wide>(
    count: i64,
    array_of_blocklengths: *const B,
    array_of_displacements: *const D,
    array_of_types: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
) -> R<()> {
    build(newtype, large, || {
        let n = count_arg(count)?;
        let bl = blocklens(slice(array_of_blocklengths, n, "array_of_blocklengths")?)?;
        let d = displs(slice(array_of_displacements, n, "array_of_displacements")?)?;
        let types = slice(array_of_types, n, "array_of_types")?
            .iter()
            .map(|&h| old_type(h))
            .collect::<R<Vec<_>>>()?;
        Ok(Datatype::create_struct(&bl, &d, &types)?)
    })
}

pub unsafe fn MPI_Type_create_struct(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const MPI_Aint,
    array_of_types: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_struct",
        create_struct(
            count as i64,
            array_of_blocklengths,
            array_of_displacements,
            array_of_types,
            newtype,
            false,
        ),
    )
}

pub unsafe fn MPI_Type_create_struct_c(
    count: MPI_Count,
    array_of_blocklengths: *const MPI_Count,
    array_of_displacements: *const MPI_Count,
    array_of_types: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_struct_c",
        create_struct(
            count,
            array_of_blocklengths,
            array_of_displacements,
            array_of_types,
            newtype,
            true,
        ),
    )
}

// ------------------------------------------------------------------------------------ subarray, darray

fn order_arg(order: c_int) -> R<Order> {
    Ok(Order::from_abi(order)?)
}

#[allow(clippy::too_many_arguments)]
fn subarray<T: Wide>(
    ndims: c_int,
    array_of_sizes: *const T,
    array_of_subsizes: *const T,
    array_of_starts: *const T,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
) -> R<()> {
    build(newtype, large, || {
        let n = len_arg(ndims as i64, "ndims", ErrorClass::Arg)?;
        let sizes = dims(
            slice(array_of_sizes, n, "array_of_sizes")?,
            "array_of_sizes",
        )?;
        let subsizes = dims(
            slice(array_of_subsizes, n, "array_of_subsizes")?,
            "array_of_subsizes",
        )?;
        let starts = dims(
            slice(array_of_starts, n, "array_of_starts")?,
            "array_of_starts",
        )?;
        let order = order_arg(order)?;
        let old = old_type(oldtype)?;
        Ok(Datatype::create_subarray(
            &sizes, &subsizes, &starts, order, &old,
        )?)
    })
}

pub unsafe fn MPI_Type_create_subarray(
    ndims: c_int,
    array_of_sizes: *const c_int,
    array_of_subsizes: *const c_int,
    array_of_starts: *const c_int,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_subarray",
        subarray(
            ndims,
            array_of_sizes,
            array_of_subsizes,
            array_of_starts,
            order,
            oldtype,
            newtype,
            false,
        ),
    )
}

pub unsafe fn MPI_Type_create_subarray_c(
    ndims: c_int,
    array_of_sizes: *const MPI_Count,
    array_of_subsizes: *const MPI_Count,
    array_of_starts: *const MPI_Count,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_subarray_c",
        subarray(
            ndims,
            array_of_sizes,
            array_of_subsizes,
            array_of_starts,
            order,
            oldtype,
            newtype,
            true,
        ),
    )
}

#[allow(clippy::too_many_arguments)]
fn darray<T: Wide>(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    array_of_gsizes: *const T,
    array_of_distribs: *const c_int,
    array_of_dargs: *const c_int,
    array_of_psizes: *const c_int,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
    large: bool,
) -> R<()> {
    build(newtype, large, || {
        let size = nonneg(size, "size", ErrorClass::Arg)?;
        let rank = nonneg(rank, "rank", ErrorClass::Arg)?;
        let n = len_arg(ndims as i64, "ndims", ErrorClass::Arg)?;
        let gsizes = dims(
            slice(array_of_gsizes, n, "array_of_gsizes")?,
            "array_of_gsizes",
        )?;
        let distribs = slice(array_of_distribs, n, "array_of_distribs")?
            .iter()
            .map(|&d| Distribution::from_abi(d))
            .collect::<Result<Vec<_>, _>>()?;
        let dargs = slice(array_of_dargs, n, "array_of_dargs")?
            .iter()
            .enumerate()
            .map(|(i, &d)| match d {
                MPI_DISTRIBUTE_DFLT_DARG => Ok(None),
                d => nonneg(d, &format!("array_of_dargs[{i}]"), ErrorClass::Arg).map(Some),
            })
            .collect::<R<Vec<_>>>()?;
        let psizes = dims(
            slice(array_of_psizes, n, "array_of_psizes")?,
            "array_of_psizes",
        )?;
        let order = order_arg(order)?;
        let old = old_type(oldtype)?;
        Ok(Datatype::create_darray(
            size, rank, &gsizes, &distribs, &dargs, &psizes, order, &old,
        )?)
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Type_create_darray(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    array_of_gsizes: *const c_int,
    array_of_distribs: *const c_int,
    array_of_dargs: *const c_int,
    array_of_psizes: *const c_int,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_darray",
        darray(
            size,
            rank,
            ndims,
            array_of_gsizes,
            array_of_distribs,
            array_of_dargs,
            array_of_psizes,
            order,
            oldtype,
            newtype,
            false,
        ),
    )
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Type_create_darray_c(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    array_of_gsizes: *const MPI_Count,
    array_of_distribs: *const c_int,
    array_of_dargs: *const c_int,
    array_of_psizes: *const c_int,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_darray_c",
        darray(
            size,
            rank,
            ndims,
            array_of_gsizes,
            array_of_distribs,
            array_of_dargs,
            array_of_psizes,
            order,
            oldtype,
            newtype,
            true,
        ),
    )
}

// ------------------------------------------------------------------------------------ resized, dup

fn resized(
    oldtype: MPI_Datatype,
    lb: i64,
    extent: i64,
    newtype: *mut MPI_Datatype,
    large: bool,
) -> R<()> {
    build(newtype, large, || {
        let lb = addr(lb, "lb")?;
        let extent = addr(extent, "extent")?;
        Ok(Datatype::create_resized(&old_type(oldtype)?, lb, extent)?)
    })
}

pub unsafe fn MPI_Type_create_resized(
    oldtype: MPI_Datatype,
    lb: MPI_Aint,
    extent: MPI_Aint,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_resized",
        resized(oldtype, lb as i64, extent as i64, newtype, false),
    )
}

pub unsafe fn MPI_Type_create_resized_c(
    oldtype: MPI_Datatype,
    lb: MPI_Count,
    extent: MPI_Count,
    newtype: *mut MPI_Datatype,
) -> c_int {
    finish_self(
        "MPI_Type_create_resized_c",
        resized(oldtype, lb, extent, newtype, true),
    )
}

pub unsafe fn MPI_Type_dup(oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
    let r = (|| {
        running()?;
        let o = out(newtype, "newtype")?;
        let h = handles::register_datatype(handles::datatype(oldtype)?.dup())?;
        Ok((o, h))
    })();
    let (o, h) = match r {
        Ok(v) => v,
        Err(e) => return finish_self("MPI_Type_dup", Err(e)),
    };
    // The attributes follow through their copy callbacks (user code: no lock is held).
    match super::attr::type_dup_attrs(oldtype, h) {
        Ok(()) => {
            *o = h;
            MPI_SUCCESS
        }
        Err((code, why)) => {
            let _ = handles::free_datatype(h);
            errors::raise_code(MPI_COMM_SELF, &|| "MPI_Type_dup".into(), code, &why)
        }
    }
}

// ------------------------------------------------------------------------------------ commit, free

pub unsafe fn MPI_Type_commit(datatype: *mut MPI_Datatype) -> c_int {
    let r = (|| {
        running()?;
        let h = *input(datatype as *const MPI_Datatype, "datatype")?;
        // Committing a predefined type is allowed and changes nothing.
        handles::datatype(h)?.commit();
        Ok(())
    })();
    finish_self("MPI_Type_commit", r)
}

pub unsafe fn MPI_Type_free(datatype: *mut MPI_Datatype) -> c_int {
    let r = (|| {
        running()?;
        let slot = out(datatype, "datatype")?;
        let h = *slot;
        if handles::datatype(h)?.is_predefined() {
            return fail(
                ErrorClass::Type,
                format!(
                    "cannot free the predefined datatype {}",
                    handles::type_name(h)
                ),
            );
        }
        Ok((slot, h))
    })();
    let (slot, h) = match r {
        Ok(v) => v,
        Err(e) => return finish_self("MPI_Type_free", Err(e)),
    };
    // The attributes go first, through their delete callbacks (user code: no lock is held);
    // if one fails, the type stays.
    if let Err((code, why)) = super::attr::type_free_attrs(h) {
        return errors::raise_code(MPI_COMM_SELF, &|| "MPI_Type_free".into(), code, &why);
    }
    // Operations in progress and types built on it hold their own clones.
    let r = handles::free_datatype(h).map(|_| *slot = MPI_DATATYPE_NULL);
    finish_self("MPI_Type_free", r)
}

// ------------------------------------------------------------------------------------ size, extent

fn query<T>(datatype: MPI_Datatype, f: impl FnOnce(&Datatype) -> T) -> R<T> {
    running()?;
    Ok(f(&*handles::datatype(datatype)?))
}

/// Write two outputs after checking both.
fn write2<A, B>(pa: *mut A, a: A, pb: *mut B, b: B, na: &str, nb: &str) -> R<()> {
    let oa = out(pa, na)?;
    let ob = out(pb, nb)?;
    *oa = a;
    *ob = b;
    Ok(())
}

pub unsafe fn MPI_Type_size(datatype: MPI_Datatype, size: *mut c_int) -> c_int {
    let r = query(datatype, |d| d.size()).and_then(|s| {
        *out(size, "size")? = int_or_undefined(s);
        Ok(())
    });
    finish_self("MPI_Type_size", r)
}

fn size_count(datatype: MPI_Datatype, size: *mut MPI_Count) -> R<()> {
    let s = query(datatype, |d| d.size())?;
    *out(size, "size")? = MPI_Count::try_from(s).unwrap_or(MPI_UNDEFINED as MPI_Count);
    Ok(())
}

pub unsafe fn MPI_Type_size_c(datatype: MPI_Datatype, size: *mut MPI_Count) -> c_int {
    finish_self("MPI_Type_size_c", size_count(datatype, size))
}

pub unsafe fn MPI_Type_size_x(datatype: MPI_Datatype, size: *mut MPI_Count) -> c_int {
    finish_self("MPI_Type_size_x", size_count(datatype, size))
}

pub unsafe fn MPI_Type_get_extent(
    datatype: MPI_Datatype,
    lb: *mut MPI_Aint,
    extent: *mut MPI_Aint,
) -> c_int {
    let r = query(datatype, |d| (d.lb(), d.extent()))
        .and_then(|(l, e)| write2(lb, l, extent, e, "lb", "extent"));
    finish_self("MPI_Type_get_extent", r)
}

fn extent_count(datatype: MPI_Datatype, lb: *mut MPI_Count, extent: *mut MPI_Count) -> R<()> {
    let (l, e) = query(datatype, |d| (d.lb(), d.extent()))?;
    write2(lb, l as MPI_Count, extent, e as MPI_Count, "lb", "extent")
}

pub unsafe fn MPI_Type_get_extent_c(
    datatype: MPI_Datatype,
    lb: *mut MPI_Count,
    extent: *mut MPI_Count,
) -> c_int {
    finish_self("MPI_Type_get_extent_c", extent_count(datatype, lb, extent))
}

pub unsafe fn MPI_Type_get_extent_x(
    datatype: MPI_Datatype,
    lb: *mut MPI_Count,
    extent: *mut MPI_Count,
) -> c_int {
    finish_self("MPI_Type_get_extent_x", extent_count(datatype, lb, extent))
}

pub unsafe fn MPI_Type_get_true_extent(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Aint,
    true_extent: *mut MPI_Aint,
) -> c_int {
    let r = query(datatype, |d| (d.true_lb(), d.true_extent()))
        .and_then(|(l, e)| write2(true_lb, l, true_extent, e, "true_lb", "true_extent"));
    finish_self("MPI_Type_get_true_extent", r)
}

fn true_extent_count(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> R<()> {
    let (l, e) = query(datatype, |d| (d.true_lb(), d.true_extent()))?;
    write2(
        true_lb,
        l as MPI_Count,
        true_extent,
        e as MPI_Count,
        "true_lb",
        "true_extent",
    )
}

pub unsafe fn MPI_Type_get_true_extent_c(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> c_int {
    finish_self(
        "MPI_Type_get_true_extent_c",
        true_extent_count(datatype, true_lb, true_extent),
    )
}

pub unsafe fn MPI_Type_get_true_extent_x(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> c_int {
    finish_self(
        "MPI_Type_get_true_extent_x",
        true_extent_count(datatype, true_lb, true_extent),
    )
}

// ------------------------------------------------------------------------------------ envelope, contents

/// Why the `int` variants cannot describe a type made with large counts.
fn needs_large(h: MPI_Datatype, what: &str) -> madmpi::Error {
    madmpi::Error::new(
        ErrorClass::Type,
        format!(
            "datatype {} was built with large counts: use {what}_c",
            handles::type_name(h)
        ),
    )
}

pub unsafe fn MPI_Type_get_envelope(
    datatype: MPI_Datatype,
    num_integers: *mut c_int,
    num_addresses: *mut c_int,
    num_datatypes: *mut c_int,
    combiner: *mut c_int,
) -> c_int {
    let r = (|| {
        let e = query(datatype, |d| d.envelope())?;
        if e.num_large_counts > 0 {
            return Err(needs_large(datatype, "MPI_Type_get_envelope"));
        }
        let (ni, na, nd, c) = (
            out(num_integers, "num_integers")?,
            out(num_addresses, "num_addresses")?,
            out(num_datatypes, "num_datatypes")?,
            out(combiner, "combiner")?,
        );
        // Argument lists are as long as the C arrays they came from: they fit an int.
        *ni = int_or_undefined(e.num_integers);
        *na = int_or_undefined(e.num_addresses);
        *nd = int_or_undefined(e.num_datatypes);
        *c = e.combiner as c_int;
        Ok(())
    })();
    finish_self("MPI_Type_get_envelope", r)
}

pub unsafe fn MPI_Type_get_envelope_c(
    datatype: MPI_Datatype,
    num_integers: *mut MPI_Count,
    num_addresses: *mut MPI_Count,
    num_large_counts: *mut MPI_Count,
    num_datatypes: *mut MPI_Count,
    combiner: *mut c_int,
) -> c_int {
    let r = (|| {
        let e = query(datatype, |d| d.envelope())?;
        let (ni, na, nl, nd, c) = (
            out(num_integers, "num_integers")?,
            out(num_addresses, "num_addresses")?,
            out(num_large_counts, "num_large_counts")?,
            out(num_datatypes, "num_datatypes")?,
            out(combiner, "combiner")?,
        );
        *ni = e.num_integers as MPI_Count;
        *na = e.num_addresses as MPI_Count;
        *nl = e.num_large_counts as MPI_Count;
        *nd = e.num_datatypes as MPI_Count;
        *c = e.combiner as c_int;
        Ok(())
    })();
    finish_self("MPI_Type_get_envelope_c", r)
}

/// The contents of `datatype` for arrays of the given lengths: MPI_ERR_TYPE for a named type,
/// MPI_ERR_ARG when an array is shorter than the envelope says.
fn contents(
    datatype: MPI_Datatype,
    max: [i64; 4],
    names: [&str; 4],
) -> R<madmpi_datatypes::Contents> {
    let dt = query(datatype, Datatype::clone)?;
    let mut m = [0usize; 4];
    for i in 0..4 {
        m[i] = len_arg(max[i], names[i], ErrorClass::Arg)?;
    }
    dt.get_contents(m[0], m[1], m[2], m[3])
        .map_err(|e| match e {
            madmpi_datatypes::Error::Truncate {
                what,
                needed,
                available,
            } => madmpi::Error::new(
                ErrorClass::Arg,
                format!("{what} too short: {needed} entries needed, {available} given"),
            ),
            e => e.into(),
        })
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Type_get_contents(
    datatype: MPI_Datatype,
    max_integers: c_int,
    max_addresses: c_int,
    max_datatypes: c_int,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut MPI_Aint,
    array_of_datatypes: *mut MPI_Datatype,
) -> c_int {
    let r = (|| {
        if query(datatype, |d| d.envelope().num_large_counts)? > 0 {
            return Err(needs_large(datatype, "MPI_Type_get_contents"));
        }
        let c = contents(
            datatype,
            [
                max_integers as i64,
                max_addresses as i64,
                0,
                max_datatypes as i64,
            ],
            [
                "max_integers",
                "max_addresses",
                "max_large_counts",
                "max_datatypes",
            ],
        )?;
        let ints = array(array_of_integers, c.integers.len(), "array_of_integers")?;
        let addrs = array(array_of_addresses, c.addresses.len(), "array_of_addresses")?;
        let types = array(array_of_datatypes, c.datatypes.len(), "array_of_datatypes")?;
        let hs = handles_for(&c.datatypes)?;
        ints.copy_from_slice(&c.integers);
        addrs.copy_from_slice(&c.addresses);
        types.copy_from_slice(&hs);
        Ok(())
    })();
    finish_self("MPI_Type_get_contents", r)
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Type_get_contents_c(
    datatype: MPI_Datatype,
    max_integers: MPI_Count,
    max_addresses: MPI_Count,
    max_large_counts: MPI_Count,
    max_datatypes: MPI_Count,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut MPI_Aint,
    array_of_large_counts: *mut MPI_Count,
    array_of_datatypes: *mut MPI_Datatype,
) -> c_int {
    let r = (|| {
        let c = contents(
            datatype,
            [max_integers, max_addresses, max_large_counts, max_datatypes],
            [
                "max_integers",
                "max_addresses",
                "max_large_counts",
                "max_datatypes",
            ],
        )?;
        let ints = array(array_of_integers, c.integers.len(), "array_of_integers")?;
        let addrs = array(array_of_addresses, c.addresses.len(), "array_of_addresses")?;
        let counts = array(
            array_of_large_counts,
            c.large_counts.len(),
            "array_of_large_counts",
        )?;
        let types = array(array_of_datatypes, c.datatypes.len(), "array_of_datatypes")?;
        let hs = handles_for(&c.datatypes)?;
        ints.copy_from_slice(&c.integers);
        addrs.copy_from_slice(&c.addresses);
        counts.copy_from_slice(&c.large_counts);
        types.copy_from_slice(&hs);
        Ok(())
    })();
    finish_self("MPI_Type_get_contents_c", r)
}

// ------------------------------------------------------------------------------------ names

pub unsafe fn MPI_Type_set_name(datatype: MPI_Datatype, type_name: *const c_char) -> c_int {
    let r = (|| {
        let dt = query(datatype, Datatype::clone)?;
        let mut name = c_str(type_name, "type_name")?;
        // Longer names are cut to what MPI_Type_get_name can return.
        let max = MPI_MAX_OBJECT_NAME as usize - 1;
        if name.len() > max {
            let mut end = max;
            while !name.is_char_boundary(end) {
                end -= 1;
            }
            name.truncate(end);
        }
        dt.set_name(&name);
        Ok(())
    })();
    finish_self("MPI_Type_set_name", r)
}

pub unsafe fn MPI_Type_get_name(
    datatype: MPI_Datatype,
    type_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    let r = (|| {
        // MPI-4.1: the null handle has a name too.
        let name = if datatype == MPI_DATATYPE_NULL {
            "MPI_DATATYPE_NULL".to_string()
        } else {
            query(datatype, |d| d.name())?
        };
        if type_name.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: type_name is NULL");
        }
        let len = out(resultlen, "resultlen")?;
        *len = copy_cstr(&name, type_name, MPI_MAX_OBJECT_NAME as usize);
        Ok(())
    })();
    finish_self("MPI_Type_get_name", r)
}

// ------------------------------------------------------------------------------------ predefined lookups

/// `MPI_UNDEFINED` as "not given".
fn defined(v: c_int) -> Option<i32> {
    (v != MPI_UNDEFINED).then_some(v)
}

fn f90(
    newtype: *mut MPI_Datatype,
    combiner: c_int,
    p: c_int,
    r: c_int,
    make: impl FnOnce() -> Result<Datatype, madmpi_datatypes::Error>,
) -> R<()> {
    running()?;
    let o = out(newtype, "newtype")?;
    *o = f90_handle((combiner, p, r), || Ok(make()?))?;
    Ok(())
}

pub unsafe fn MPI_Type_create_f90_real(p: c_int, r: c_int, newtype: *mut MPI_Datatype) -> c_int {
    let res = f90(newtype, MPI_COMBINER_F90_REAL, p, r, || {
        Datatype::create_f90_real(defined(p), defined(r))
    });
    finish_self("MPI_Type_create_f90_real", res)
}

pub unsafe fn MPI_Type_create_f90_complex(p: c_int, r: c_int, newtype: *mut MPI_Datatype) -> c_int {
    let res = f90(newtype, MPI_COMBINER_F90_COMPLEX, p, r, || {
        Datatype::create_f90_complex(defined(p), defined(r))
    });
    finish_self("MPI_Type_create_f90_complex", res)
}

pub unsafe fn MPI_Type_create_f90_integer(r: c_int, newtype: *mut MPI_Datatype) -> c_int {
    let res = f90(newtype, MPI_COMBINER_F90_INTEGER, 0, r, || {
        Datatype::create_f90_integer(defined(r))
    });
    finish_self("MPI_Type_create_f90_integer", res)
}

pub unsafe fn MPI_Type_match_size(
    typeclass: c_int,
    size: c_int,
    datatype: *mut MPI_Datatype,
) -> c_int {
    let r = (|| {
        running()?;
        let o = out(datatype, "datatype")?;
        let class = match typeclass {
            MPI_TYPECLASS_INTEGER => TypeClass::Integer,
            MPI_TYPECLASS_REAL => TypeClass::Real,
            MPI_TYPECLASS_COMPLEX => TypeClass::Complex,
            MPIX_TYPECLASS_LOGICAL => TypeClass::Logical,
            c => return fail(ErrorClass::Arg, format!("invalid typeclass {c}")),
        };
        let size = nonneg(size, "size", ErrorClass::Arg)?;
        let t = Datatype::match_size(class, size)?;
        *o = handle_for(&t)?;
        Ok(())
    })();
    finish_self("MPI_Type_match_size", r)
}

pub unsafe fn MPI_Type_get_value_index(
    value_type: MPI_Datatype,
    index_type: MPI_Datatype,
    pair_type: *mut MPI_Datatype,
) -> c_int {
    let r = (|| {
        running()?;
        let o = out(pair_type, "pair_type")?;
        let v = old_type(value_type)?;
        let i = old_type(index_type)?;
        *o = match predefined_pair(&v, &i) {
            Some(pair) => handle_for(&Datatype::basic(pair))?,
            None => MPI_DATATYPE_NULL,
        };
        Ok(())
    })();
    finish_self("MPI_Type_get_value_index", r)
}

/// The predefined pair type MPI_Type_get_value_index returns for `v` and `i` (the C pairs
/// such as `MPI_DOUBLE_INT`, and the Fortran `MPI_2REAL`, `MPI_2DOUBLE_PRECISION`,
/// `MPI_2INTEGER`). MPI-4.1 6.9.4 gives a handle only "if such a predefined type exists",
/// else MPI_DATATYPE_NULL, as MPICH and Open MPI do; mpi4py's tests rely on that.
fn predefined_pair(v: &Datatype, i: &Datatype) -> Option<Basic> {
    Basic::value_index(v.as_basic()?, i.as_basic()?)
}

// ------------------------------------------------------------------------------------ addresses

pub unsafe fn MPI_Get_address(location: *const c_void, address: *mut MPI_Aint) -> c_int {
    let r = out(address, "address").map(|a| *a = madmpi_datatypes::get_address(location));
    finish_self("MPI_Get_address", r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use madmpi_datatypes::Combiner;

    #[test]
    fn combiners_match_the_abi() {
        for (c, v) in [
            (Combiner::Named, MPI_COMBINER_NAMED),
            (Combiner::Dup, MPI_COMBINER_DUP),
            (Combiner::Contiguous, MPI_COMBINER_CONTIGUOUS),
            (Combiner::Vector, MPI_COMBINER_VECTOR),
            (Combiner::Hvector, MPI_COMBINER_HVECTOR),
            (Combiner::Indexed, MPI_COMBINER_INDEXED),
            (Combiner::Hindexed, MPI_COMBINER_HINDEXED),
            (Combiner::IndexedBlock, MPI_COMBINER_INDEXED_BLOCK),
            (Combiner::HindexedBlock, MPI_COMBINER_HINDEXED_BLOCK),
            (Combiner::Struct, MPI_COMBINER_STRUCT),
            (Combiner::Subarray, MPI_COMBINER_SUBARRAY),
            (Combiner::Darray, MPI_COMBINER_DARRAY),
            (Combiner::F90Real, MPI_COMBINER_F90_REAL),
            (Combiner::F90Complex, MPI_COMBINER_F90_COMPLEX),
            (Combiner::F90Integer, MPI_COMBINER_F90_INTEGER),
            (Combiner::Resized, MPI_COMBINER_RESIZED),
            (Combiner::ValueIndex, MPI_COMBINER_VALUE_INDEX),
        ] {
            assert_eq!(c as c_int, v, "{c:?}");
        }
    }

    #[test]
    fn abi_constants_inside_contents_match() {
        use madmpi_datatypes::abi;
        assert_eq!(abi::UNDEFINED, MPI_UNDEFINED);
        assert_eq!(abi::ORDER_C, MPI_ORDER_C);
        assert_eq!(abi::ORDER_FORTRAN, MPI_ORDER_FORTRAN);
        assert_eq!(abi::DISTRIBUTE_NONE, MPI_DISTRIBUTE_NONE);
        assert_eq!(abi::DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK);
        assert_eq!(abi::DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_CYCLIC);
        assert_eq!(abi::DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG);
    }

    #[test]
    fn argument_conversions() {
        assert_eq!(blocklens(&[1i32, 0, 7]).unwrap(), vec![1, 0, 7]);
        assert_eq!(blocklens(&[1i32, -1]).unwrap_err().class, ErrorClass::Count);
        assert_eq!(displs(&[-4i64, 8]).unwrap(), vec![-4, 8]);
        assert_eq!(
            dims(&[3i32, -2], "array_of_sizes").unwrap_err().class,
            ErrorClass::Arg
        );
        assert_eq!(int_or_undefined(1usize << 40), MPI_UNDEFINED);
        assert_eq!(int_or_undefined(12usize), 12);
        assert_eq!(defined(MPI_UNDEFINED), None);
        assert_eq!(defined(6), Some(6));
    }
}
