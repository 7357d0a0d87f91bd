//! The tool information interface (MPI_T): initialization (reference counted, usable before
//! `MPI_Init` and after `MPI_Finalize`), enumerations, categories and event sources here;
//! control variables in `cvar.rs`, performance variables and their sessions in `pvar.rs`,
//! events in `event.rs`. The variables themselves are the core's (`madmpi::tool`).
//!
//! MPI_T functions return their error codes directly (the standard gives them no error
//! handler). Handles are encoded integers, never pointers: a wrong or freed one is
//! `MPI_T_ERR_INVALID_HANDLE`. Every output argument may be NULL (nothing is written there).

mod cvar;
mod event;
mod pvar;

pub use cvar::*;
pub use event::*;
pub use pvar::*;

use std::os::raw::{c_char, c_int};

use madmpi::tool::{self, Verbosity, CATEGORIES_ALL};
use parking_lot::Mutex;

use crate::abi::*;

/// Times MPI_T_init_thread was called without its MPI_T_finalize.
static INITS: Mutex<u32> = parking_lot::const_mutex(0);

type T<X> = Result<X, c_int>;

/// `MPI_T_ERR_NOT_INITIALIZED` unless the interface is initialized.
fn ready() -> T<()> {
    if *INITS.lock() == 0 {
        Err(MPI_T_ERR_NOT_INITIALIZED)
    } else {
        Ok(())
    }
}

/// The code of `r`.
fn code(r: T<()>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(c) => c,
    }
}

/// Write `v` through `p` unless it is NULL.
///
/// # Safety
/// `p` is NULL or valid for a write of `X`.
unsafe fn put<X>(p: *mut X, v: X) {
    if !p.is_null() {
        // SAFETY: per the contract.
        unsafe { p.write(v) };
    }
}

/// The standard's convention for returned strings: with a NULL buffer or a zero length, only
/// the length the string needs (with its terminator) is returned; otherwise the string,
/// truncated to the buffer, terminated, and the length written (terminator included).
///
/// # Safety
/// `len` is NULL or valid; `buf` holds `*len` bytes when neither is NULL/0.
unsafe fn put_str(s: &str, buf: *mut c_char, len: *mut c_int) {
    if len.is_null() {
        return;
    }
    // SAFETY: per the contract.
    let cap = unsafe { *len };
    if buf.is_null() || cap <= 0 {
        // SAFETY: as above.
        unsafe { *len = s.len() as c_int + 1 };
        return;
    }
    let n = s.len().min(cap as usize - 1);
    // SAFETY: the buffer holds `cap` > n bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
        *len = n as c_int + 1;
    }
}

/// A C string argument (`MPI_T_ERR_INVALID` when NULL or not UTF-8).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn c_str<'a>(p: *const c_char) -> T<&'a str> {
    if p.is_null() {
        return Err(MPI_T_ERR_INVALID);
    }
    // SAFETY: per the contract.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| MPI_T_ERR_INVALID)
}

fn verbosity(v: Verbosity) -> c_int {
    match v {
        Verbosity::UserBasic => MPI_T_VERBOSITY_USER_BASIC,
        Verbosity::UserDetail => MPI_T_VERBOSITY_USER_DETAIL,
        Verbosity::TunerBasic => MPI_T_VERBOSITY_TUNER_BASIC,
        Verbosity::TunerDetail => MPI_T_VERBOSITY_TUNER_DETAIL,
        Verbosity::MpidevBasic => MPI_T_VERBOSITY_MPIDEV_BASIC,
        Verbosity::MpidevDetail => MPI_T_VERBOSITY_MPIDEV_DETAIL,
    }
}

/// Enumeration handles: this base plus the index (never a pointer, never 0).
const ENUM_BASE: usize = 0x5e_0000;

fn enum_handle(i: usize) -> MPI_T_enum {
    (ENUM_BASE + i) as MPI_T_enum
}

fn enum_of(e: MPI_T_enum) -> T<&'static tool::EnumDesc> {
    (e as usize)
        .checked_sub(ENUM_BASE)
        .and_then(|i| tool::ENUMS.get(i))
        .ok_or(MPI_T_ERR_INVALID_HANDLE)
}

/// Index `i` of a table of `n` (`MPI_T_ERR_INVALID_INDEX` otherwise).
fn index(i: c_int, n: usize) -> T<usize> {
    usize::try_from(i)
        .ok()
        .filter(|&i| i < n)
        .ok_or(MPI_T_ERR_INVALID_INDEX)
}

pub unsafe fn MPI_T_init_thread(required: c_int, provided: *mut c_int) -> c_int {
    if !(MPI_THREAD_SINGLE..=MPI_THREAD_MULTIPLE).contains(&required) {
        return MPI_T_ERR_INVALID;
    }
    *INITS.lock() += 1;
    event::install();
    // The tables are shared and locked: every level is safe.
    // SAFETY: `provided` is NULL or valid (caller contract).
    unsafe { put(provided, required) };
    MPI_SUCCESS
}

pub unsafe fn MPI_T_finalize() -> c_int {
    let mut n = INITS.lock();
    if *n == 0 {
        return MPI_T_ERR_NOT_INITIALIZED;
    }
    *n -= 1;
    if *n == 0 {
        drop(n);
        // The last finalize frees what the tools left (the standard: handles are invalid
        // once the interface is finalized).
        cvar::free_all();
        pvar::free_all();
        event::free_all();
    }
    MPI_SUCCESS
}

pub unsafe fn MPI_T_enum_get_info(
    enumtype: MPI_T_enum,
    num: *mut c_int,
    name: *mut c_char,
    name_len: *mut c_int,
) -> c_int {
    code((|| {
        ready()?;
        let e = enum_of(enumtype)?;
        // SAFETY: outputs are NULL or valid (caller contract).
        unsafe {
            put(num, e.items.len() as c_int);
            put_str(e.name, name, name_len);
        }
        Ok(())
    })())
}

pub unsafe fn MPI_T_enum_get_item(
    enumtype: MPI_T_enum,
    index: c_int,
    value: *mut c_int,
    name: *mut c_char,
    name_len: *mut c_int,
) -> c_int {
    code((|| {
        ready()?;
        let e = enum_of(enumtype)?;
        let &(v, n) = usize::try_from(index)
            .ok()
            .and_then(|i| e.items.get(i))
            .ok_or(MPI_T_ERR_INVALID_ITEM)?;
        // SAFETY: outputs are NULL or valid (caller contract).
        unsafe {
            put(value, v);
            put_str(n, name, name_len);
        }
        Ok(())
    })())
}

// ------------------------------------------------------------------------------- categories

pub unsafe fn MPI_T_category_get_num(num_cat: *mut c_int) -> c_int {
    code((|| {
        ready()?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(num_cat, CATEGORIES_ALL.len() as c_int) };
        Ok(())
    })())
}

#[allow(clippy::too_many_arguments)] // the C signature
pub unsafe fn MPI_T_category_get_info(
    cat_index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    desc: *mut c_char,
    desc_len: *mut c_int,
    num_cvars: *mut c_int,
    num_pvars: *mut c_int,
    num_categories: *mut c_int,
) -> c_int {
    code((|| {
        ready()?;
        let c = &CATEGORIES_ALL[index(cat_index, CATEGORIES_ALL.len())?];
        // SAFETY: outputs are NULL or valid (caller contract).
        unsafe {
            put_str(c.name, name, name_len);
            put_str(c.desc, desc, desc_len);
            put(num_cvars, c.cvars.len() as c_int);
            put(num_pvars, c.pvars.len() as c_int);
            put(num_categories, c.categories.len() as c_int);
        }
        Ok(())
    })())
}

pub unsafe fn MPI_T_category_get_num_events(cat_index: c_int, num_events: *mut c_int) -> c_int {
    code((|| {
        ready()?;
        let c = &CATEGORIES_ALL[index(cat_index, CATEGORIES_ALL.len())?];
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(num_events, c.events.len() as c_int) };
        Ok(())
    })())
}

pub unsafe fn MPI_T_category_get_index(name: *const c_char, cat_index: *mut c_int) -> c_int {
    code((|| {
        ready()?;
        // SAFETY: a C string (caller contract).
        let name = unsafe { c_str(name)? };
        let i = CATEGORIES_ALL
            .iter()
            .position(|c| c.name == name)
            .ok_or(MPI_T_ERR_INVALID_NAME)?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(cat_index, i as c_int) };
        Ok(())
    })())
}

/// The first `len` members of one of category `cat`'s lists into `out`.
///
/// # Safety
/// `out` is NULL or holds `len` ints.
unsafe fn members(
    cat: c_int,
    len: c_int,
    out: *mut c_int,
    list: fn(&tool::Category) -> &Vec<usize>,
) -> c_int {
    code((|| {
        ready()?;
        let c = &CATEGORIES_ALL[index(cat, CATEGORIES_ALL.len())?];
        if len < 0 {
            return Err(MPI_T_ERR_INVALID);
        }
        let items = list(c);
        let n = items.len().min(len as usize);
        if n > 0 && out.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        for (k, &i) in items.iter().take(n).enumerate() {
            // SAFETY: `out` holds `len` >= n ints.
            unsafe { *out.add(k) = i as c_int };
        }
        Ok(())
    })())
}

pub unsafe fn MPI_T_category_get_cvars(cat_index: c_int, len: c_int, indices: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { members(cat_index, len, indices, |c| &c.cvars) }
}

pub unsafe fn MPI_T_category_get_pvars(cat_index: c_int, len: c_int, indices: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { members(cat_index, len, indices, |c| &c.pvars) }
}

pub unsafe fn MPI_T_category_get_events(
    cat_index: c_int,
    len: c_int,
    indices: *mut c_int,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { members(cat_index, len, indices, |c| &c.events) }
}

pub unsafe fn MPI_T_category_get_categories(
    cat_index: c_int,
    len: c_int,
    indices: *mut c_int,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { members(cat_index, len, indices, |c| &c.categories) }
}

pub unsafe fn MPI_T_category_changed(update_number: *mut c_int) -> c_int {
    code((|| {
        ready()?;
        // The sets of variables, events and categories are fixed: they never change.
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(update_number, 0) };
        Ok(())
    })())
}

// ------------------------------------------------------------------------------- sources

/// The one event source: the process's monotonic clock, in nanoseconds.
const SOURCE_NAME: &str = "madmpi_monotonic";

pub unsafe fn MPI_T_source_get_num(num_sources: *mut c_int) -> c_int {
    code((|| {
        ready()?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(num_sources, 1) };
        Ok(())
    })())
}

#[allow(clippy::too_many_arguments)] // the C signature
pub unsafe fn MPI_T_source_get_info(
    source_index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    desc: *mut c_char,
    desc_len: *mut c_int,
    ordering: *mut MPI_T_source_order,
    ticks_per_second: *mut MPI_Count,
    max_ticks: *mut MPI_Count,
    info: *mut MPI_Info,
) -> c_int {
    code((|| {
        ready()?;
        index(source_index, 1)?;
        if !info.is_null() {
            // SAFETY: `info` is valid (caller contract).
            if unsafe { crate::imp::MPI_Info_create(info) } != MPI_SUCCESS {
                return Err(MPI_T_ERR_MEMORY);
            }
        }
        // SAFETY: outputs are NULL or valid (caller contract).
        unsafe {
            put_str(SOURCE_NAME, name, name_len);
            put_str(
                "the process's monotonic clock (nanoseconds since its first tool use); every \
                 event of this process, in the order they happened",
                desc,
                desc_len,
            );
            put(ordering, MPI_T_SOURCE_ORDERED);
            put(ticks_per_second, 1_000_000_000);
            put(max_ticks, MPI_Count::MAX);
        }
        Ok(())
    })())
}

pub unsafe fn MPI_T_source_get_timestamp(source_index: c_int, timestamp: *mut MPI_Count) -> c_int {
    code((|| {
        ready()?;
        index(source_index, 1)?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(timestamp, tool::events::now_ns() as MPI_Count) };
        Ok(())
    })())
}
