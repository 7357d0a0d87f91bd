//! Events: `MPI_T_event_*`. A registration (`MPI_T_event_handle_alloc`) names an event type
//! and holds up to one callback per safety level; while any registration of a type has a
//! callback, the core queues that type's instances (`madmpi::tool::events`).
//!
//! Delivery is never from inside the engine: the core calls [`deliver`] after an MPI call has
//! released the engine, on the calling thread, one thread at a time and never re-entered (a
//! callback that calls MPI does not deliver again). In that context any callback may run, so
//! callbacks are invoked with `MPI_T_CB_REQUIRE_NONE`, the lowest level registered chosen. An
//! event instance handle is valid only during its callback (checked: another value is
//! `MPI_T_ERR_INVALID_HANDLE`).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::os::raw::{c_char, c_int, c_void};

use madmpi::tool::{events, Instance, EVENTS};
use parking_lot::Mutex;

use super::{c_str, code, index, put, put_str, ready, verbosity, T};
use crate::abi::*;
use crate::imp::info::{new_info, pairs};

type Pairs = Vec<(String, String)>;

/// The safety levels, least demanding first (the index of a registration's callback slot).
const LEVELS: [c_int; 4] = [
    MPI_T_CB_REQUIRE_NONE,
    MPI_T_CB_REQUIRE_MPI_RESTRICTED,
    MPI_T_CB_REQUIRE_THREAD_SAFE,
    MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE,
];

#[derive(Clone, Copy)]
struct Callback {
    f: unsafe extern "C" fn(
        MPI_T_event_instance,
        MPI_T_event_registration,
        MPI_T_cb_safety,
        *mut c_void,
    ),
    user_data: *mut c_void,
}

struct Reg {
    event: usize,
    info: Pairs,
    callbacks: [Option<(Callback, Pairs)>; 4],
    dropped: MPI_T_event_dropped_cb_function,
}

struct Regs {
    next: usize,
    live: BTreeMap<usize, Reg>,
}

// SAFETY: the raw `user_data` pointers are the tool's, handed back to its callbacks only.
unsafe impl Send for Regs {}

static REGS: Mutex<Regs> = parking_lot::const_mutex(Regs {
    next: 0x5800_0000,
    live: BTreeMap::new(),
});

/// One delivery at a time.
static DELIVERY: Mutex<()> = parking_lot::const_mutex(());

thread_local! {
    /// The instance whose callback runs on this thread (its handle's value), or 0.
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

pub(super) fn install() {
    events::set_delivery(deliver);
}

pub(super) fn free_all() {
    REGS.lock().live.clear();
    for k in 0..EVENTS.len() {
        events::want(k, false);
    }
}

/// Tell the core which event types are wanted now.
fn update_wanted(r: &Regs) {
    for k in 0..EVENTS.len() {
        let on = r
            .live
            .values()
            .any(|g| g.event == k && g.callbacks.iter().any(Option::is_some));
        events::want(k, on);
    }
}

fn level_slot(cb_safety: c_int) -> T<usize> {
    LEVELS
        .iter()
        .position(|&l| l == cb_safety)
        .ok_or(MPI_T_ERR_INVALID)
}

/// Hand queued instances to the registered callbacks (see the module documentation).
fn deliver() {
    if CURRENT.with(|c| c.get()) != 0 {
        return;
    }
    let Some(_one) = DELIVERY.try_lock() else {
        return;
    };
    let (items, dropped) = events::take();
    type Target = (
        usize,
        usize,
        Option<Callback>,
        MPI_T_event_dropped_cb_function,
    );
    let targets: Vec<Target> = REGS
        .lock()
        .live
        .iter()
        .map(|(&h, g)| {
            let cb = g.callbacks.iter().flatten().next().map(|(c, _)| *c);
            (h, g.event, cb, g.dropped)
        })
        .collect();
    for (h, event, cb, dropped_cb) in &targets {
        let n = dropped.get(*event).copied().unwrap_or(0);
        if let (Some(f), true) = (dropped_cb, n > 0) {
            // SAFETY: the tool's callback, with the arguments the standard gives it.
            unsafe {
                f(
                    n as MPI_Count,
                    *h as MPI_T_event_registration,
                    0,
                    MPI_T_CB_REQUIRE_NONE,
                    cb.map_or(std::ptr::null_mut(), |c| c.user_data),
                )
            };
        }
    }
    for inst in &items {
        for (h, event, cb, _) in &targets {
            let Some(cb) = cb.filter(|_| *event == inst.kind) else {
                continue;
            };
            let at = inst as *const Instance as usize;
            CURRENT.with(|c| c.set(at));
            // SAFETY: the tool's callback; the instance outlives the call.
            unsafe {
                (cb.f)(
                    at as MPI_T_event_instance,
                    *h as MPI_T_event_registration,
                    MPI_T_CB_REQUIRE_NONE,
                    cb.user_data,
                )
            };
            CURRENT.with(|c| c.set(0));
        }
    }
}

/// The instance a handle names, if its callback runs on this thread.
fn instance<'a>(h: MPI_T_event_instance) -> T<&'a Instance> {
    let at = h as usize;
    if at == 0 || CURRENT.with(|c| c.get()) != at {
        return Err(MPI_T_ERR_INVALID_HANDLE);
    }
    // SAFETY: `at` is the address of the instance `deliver` is handing to a callback on this
    // thread right now; it lives until that callback returns.
    Ok(unsafe { &*(at as *const Instance) })
}

fn with_reg<X>(r: MPI_T_event_registration, f: impl FnOnce(&mut Reg) -> T<X>) -> T<X> {
    ready()?;
    let mut t = REGS.lock();
    let g = t
        .live
        .get_mut(&(r as usize))
        .ok_or(MPI_T_ERR_INVALID_HANDLE)?;
    f(g)
}

/// The pairs of an info argument (`MPI_INFO_NULL`: none).
fn info_pairs(info: MPI_Info) -> T<Pairs> {
    if info == MPI_INFO_NULL {
        return Ok(Vec::new());
    }
    pairs(info).map_err(|_| MPI_T_ERR_INVALID)
}

/// A new info object with `p` into `out`.
///
/// # Safety
/// `out` is NULL or valid.
unsafe fn info_out(p: Pairs, out: *mut MPI_Info) -> T<()> {
    if out.is_null() {
        return Err(MPI_T_ERR_INVALID);
    }
    let h = new_info(p).map_err(|_| MPI_T_ERR_MEMORY)?;
    // SAFETY: per the contract.
    unsafe { *out = h };
    Ok(())
}

pub unsafe fn MPI_T_event_get_num(num_events: *mut c_int) -> c_int {
    code((|| {
        ready()?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(num_events, EVENTS.len() as c_int) };
        Ok(())
    })())
}

pub unsafe fn MPI_T_event_get_index(name: *const c_char, event_index: *mut c_int) -> c_int {
    code((|| {
        ready()?;
        // SAFETY: a C string (caller contract).
        let name = unsafe { c_str(name)? };
        let i = EVENTS
            .iter()
            .position(|e| e.name == name)
            .ok_or(MPI_T_ERR_INVALID_NAME)?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(event_index, i as c_int) };
        Ok(())
    })())
}

#[allow(clippy::too_many_arguments)] // the C signature
pub unsafe fn MPI_T_event_get_info(
    event_index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    verbosity_out: *mut c_int,
    array_of_datatypes: *mut MPI_Datatype,
    array_of_displacements: *mut MPI_Aint,
    num_elements: *mut c_int,
    enumtype: *mut MPI_T_enum,
    info: *mut MPI_Info,
    desc: *mut c_char,
    desc_len: *mut c_int,
    bind: *mut c_int,
) -> c_int {
    code((|| {
        ready()?;
        let e = &EVENTS[index(event_index, EVENTS.len())?];
        let n = e.elements.len();
        if !num_elements.is_null() {
            // SAFETY: valid (caller contract): on input, the arrays' length.
            let cap = unsafe { *num_elements }.max(0) as usize;
            for k in 0..n.min(cap) {
                // SAFETY: the arrays hold `cap` entries when not NULL.
                unsafe {
                    if !array_of_datatypes.is_null() {
                        *array_of_datatypes.add(k) = MPI_UNSIGNED_LONG_LONG;
                    }
                    if !array_of_displacements.is_null() {
                        *array_of_displacements.add(k) = (k * 8) as MPI_Aint;
                    }
                }
            }
            // SAFETY: as above.
            unsafe { *num_elements = n as c_int };
        }
        if !info.is_null() {
            // SAFETY: valid (checked).
            unsafe { info_out(Vec::new(), info)? };
        }
        // SAFETY: outputs are NULL or valid (caller contract).
        unsafe {
            put_str(e.name, name, name_len);
            put(verbosity_out, verbosity(e.verbosity));
            put(enumtype, MPI_T_ENUM_NULL);
            put_str(e.desc, desc, desc_len);
            put(bind, MPI_T_BIND_NO_OBJECT);
        }
        Ok(())
    })())
}

pub unsafe fn MPI_T_event_handle_alloc(
    event_index: c_int,
    _obj_handle: *mut c_void,
    info: MPI_Info,
    event_registration: *mut MPI_T_event_registration,
) -> c_int {
    code((|| {
        ready()?;
        let event = index(event_index, EVENTS.len())?;
        if event_registration.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        let info = info_pairs(info)?;
        let mut t = REGS.lock();
        let h = t.next;
        t.next += 1;
        t.live.insert(
            h,
            Reg {
                event,
                info,
                callbacks: [None, None, None, None],
                dropped: None,
            },
        );
        // SAFETY: valid (checked, caller contract).
        unsafe { *event_registration = h as MPI_T_event_registration };
        Ok(())
    })())
}

pub unsafe fn MPI_T_event_handle_set_info(
    event_registration: MPI_T_event_registration,
    info: MPI_Info,
) -> c_int {
    code((|| {
        let p = info_pairs(info)?;
        with_reg(event_registration, |g| {
            g.info = p;
            Ok(())
        })
    })())
}

pub unsafe fn MPI_T_event_handle_get_info(
    event_registration: MPI_T_event_registration,
    info_used: *mut MPI_Info,
) -> c_int {
    code((|| {
        let p = with_reg(event_registration, |g| Ok(g.info.clone()))?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { info_out(p, info_used) }
    })())
}

pub unsafe fn MPI_T_event_register_callback(
    event_registration: MPI_T_event_registration,
    cb_safety: MPI_T_cb_safety,
    info: MPI_Info,
    user_data: *mut c_void,
    event_cb_function: MPI_T_event_cb_function,
) -> c_int {
    code((|| {
        let slot = level_slot(cb_safety)?;
        let p = info_pairs(info)?;
        with_reg(event_registration, |g| {
            g.callbacks[slot] = event_cb_function.map(|f| (Callback { f, user_data }, p));
            Ok(())
        })?;
        update_wanted(&REGS.lock());
        Ok(())
    })())
}

pub unsafe fn MPI_T_event_callback_set_info(
    event_registration: MPI_T_event_registration,
    cb_safety: MPI_T_cb_safety,
    info: MPI_Info,
) -> c_int {
    code((|| {
        let slot = level_slot(cb_safety)?;
        let p = info_pairs(info)?;
        with_reg(event_registration, |g| match &mut g.callbacks[slot] {
            Some((_, i)) => {
                *i = p;
                Ok(())
            }
            None => Err(MPI_T_ERR_INVALID),
        })
    })())
}

pub unsafe fn MPI_T_event_callback_get_info(
    event_registration: MPI_T_event_registration,
    cb_safety: MPI_T_cb_safety,
    info_used: *mut MPI_Info,
) -> c_int {
    code((|| {
        let slot = level_slot(cb_safety)?;
        let p = with_reg(event_registration, |g| match &g.callbacks[slot] {
            Some((_, i)) => Ok(i.clone()),
            None => Err(MPI_T_ERR_INVALID),
        })?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { info_out(p, info_used) }
    })())
}

pub unsafe fn MPI_T_event_set_dropped_handler(
    event_registration: MPI_T_event_registration,
    dropped_cb_function: MPI_T_event_dropped_cb_function,
) -> c_int {
    code(with_reg(event_registration, |g| {
        g.dropped = dropped_cb_function;
        Ok(())
    }))
}

pub unsafe fn MPI_T_event_handle_free(
    event_registration: MPI_T_event_registration,
    user_data: *mut c_void,
    free_cb_function: MPI_T_event_free_cb_function,
) -> c_int {
    code((|| {
        ready()?;
        {
            let mut t = REGS.lock();
            t.live
                .remove(&(event_registration as usize))
                .ok_or(MPI_T_ERR_INVALID_HANDLE)?;
            update_wanted(&t);
        }
        if let Some(f) = free_cb_function {
            // SAFETY: the tool's callback, outside every lock.
            unsafe { f(event_registration, MPI_T_CB_REQUIRE_NONE, user_data) };
        }
        Ok(())
    })())
}

pub unsafe fn MPI_T_event_read(
    event_instance: MPI_T_event_instance,
    element_index: c_int,
    buffer: *mut c_void,
) -> c_int {
    code((|| {
        let inst = instance(event_instance)?;
        let k = index(element_index, inst.data.len()).map_err(|_| MPI_T_ERR_INVALID_INDEX)?;
        if buffer.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        // SAFETY: `buffer` holds the element (an unsigned long long; caller contract).
        unsafe { (buffer as *mut u64).write_unaligned(inst.data[k]) };
        Ok(())
    })())
}

pub unsafe fn MPI_T_event_copy(event_instance: MPI_T_event_instance, buffer: *mut c_void) -> c_int {
    code((|| {
        let inst = instance(event_instance)?;
        if buffer.is_null() {
            return Err(MPI_T_ERR_INVALID);
        }
        // SAFETY: `buffer` holds every element at its displacement (caller contract).
        unsafe {
            std::ptr::copy_nonoverlapping(
                inst.data.as_ptr() as *const u8,
                buffer as *mut u8,
                std::mem::size_of_val(&inst.data),
            )
        };
        Ok(())
    })())
}

pub unsafe fn MPI_T_event_get_timestamp(
    event_instance: MPI_T_event_instance,
    event_timestamp: *mut MPI_Count,
) -> c_int {
    code((|| {
        let inst = instance(event_instance)?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(event_timestamp, inst.time_ns as MPI_Count) };
        Ok(())
    })())
}

pub unsafe fn MPI_T_event_get_source(
    event_instance: MPI_T_event_instance,
    source_index: *mut c_int,
) -> c_int {
    code((|| {
        instance(event_instance)?;
        // SAFETY: NULL or valid (caller contract).
        unsafe { put(source_index, 0) };
        Ok(())
    })())
}
