//! Attribute caching on communicators and datatypes: keyvals with their copy and delete
//! callbacks, the attributes themselves, and the deprecated MPI-1 forms (MPI_Keyval_*,
//! MPI_Attr_*). The predefined communicator attributes (MPI_TAG_UB …) are in `comm.rs`.
//!
//! Copy callbacks run in MPI_Comm_dup / MPI_Comm_idup / MPI_Type_dup (in the order the
//! attributes were set), delete callbacks on MPI_*_delete_attr, when an attribute is replaced,
//! and when the object is freed (in reverse order). `MPI_*_NULL_COPY_FN` (0) copies nothing,
//! `MPI_*_DUP_FN` (1) copies the value. No lock is held while a callback runs, so callbacks may
//! call MPI. A keyval freed while attributes still use it lives on until they are deleted.

use std::collections::HashMap;
use std::os::raw::{c_int, c_void};

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::common::*;
use crate::abi::*;
use crate::errors;
use crate::handles;

/// The kind of object an attribute hangs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Obj {
    Comm,
    Type,
    Win,
}

impl Obj {
    fn noun(self) -> &'static str {
        match self {
            Obj::Comm => "communicator",
            Obj::Type => "datatype",
            Obj::Win => "window",
        }
    }
}

type CommCopy = unsafe extern "C" fn(
    MPI_Comm,
    c_int,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_int,
) -> c_int;
type CommDel = unsafe extern "C" fn(MPI_Comm, c_int, *mut c_void, *mut c_void) -> c_int;
type TypeCopy = unsafe extern "C" fn(
    MPI_Datatype,
    c_int,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_int,
) -> c_int;
type TypeDel = unsafe extern "C" fn(MPI_Datatype, c_int, *mut c_void, *mut c_void) -> c_int;
type WinDel = unsafe extern "C" fn(MPI_Win, c_int, *mut c_void, *mut c_void) -> c_int;

#[derive(Clone, Copy)]
enum CopyF {
    Null,
    Dup,
    Comm(CommCopy),
    Type(TypeCopy),
}

#[derive(Clone, Copy)]
enum DelF {
    Null,
    Comm(CommDel),
    Type(TypeDel),
    Win(WinDel),
}

#[derive(Clone, Copy)]
struct Keyval {
    obj: Obj,
    copy: CopyF,
    delete: DelF,
    extra: usize,
    /// The user freed the keyval; it goes when no attribute uses it.
    freed: bool,
    uses: u32,
}

#[derive(Default)]
struct Store {
    keyvals: HashMap<c_int, Keyval>,
    next: c_int,
    /// Attributes of each object, in the order they were set: (keyval, value).
    attrs: HashMap<(Obj, usize), Vec<(c_int, usize)>>,
}

static STORE: Lazy<Mutex<Store>> = Lazy::new(|| {
    Mutex::new(Store {
        next: FIRST_KEYVAL,
        ..Default::default()
    })
});

/// User keyvals start above every predefined one.
const FIRST_KEYVAL: c_int = 1000;

/// A failure with an exact error code (callbacks return arbitrary codes).
type E = (c_int, String);

fn code(e: madmpi::Error) -> E {
    (errors::class_code(e.class), e.msg)
}

/// Whether `k` is a keyval created by the user (not a predefined attribute).
pub(crate) fn is_user_keyval(k: c_int) -> bool {
    k >= FIRST_KEYVAL
}

fn create(
    obj: Obj,
    copy: CopyF,
    delete: DelF,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> Result<(), E> {
    running().map_err(code)?;
    let o = out(keyval, "keyval").map_err(code)?;
    let mut s = STORE.lock();
    let k = s.next;
    s.next += 1;
    s.keyvals.insert(
        k,
        Keyval {
            obj,
            copy,
            delete,
            extra: extra as usize,
            freed: false,
            uses: 0,
        },
    );
    *o = k;
    Ok(())
}

fn keyval_of(s: &Store, obj: Obj, k: c_int) -> Result<Keyval, E> {
    match s.keyvals.get(&k) {
        Some(kv) if kv.obj == obj => Ok(*kv),
        Some(kv) => Err((
            MPI_ERR_KEYVAL,
            format!("keyval {k} is for {}s, not {}s", kv.obj.noun(), obj.noun()),
        )),
        None => Err((MPI_ERR_KEYVAL, format!("invalid keyval {k}"))),
    }
}

fn free_keyval(obj: Obj, keyval: *mut c_int) -> Result<(), E> {
    let slot = out(keyval, "keyval").map_err(code)?;
    let mut s = STORE.lock();
    let kv = keyval_of(&s, obj, *slot)?;
    if kv.uses == 0 {
        s.keyvals.remove(slot);
    } else if let Some(k) = s.keyvals.get_mut(slot) {
        k.freed = true;
    }
    *slot = MPI_KEYVAL_INVALID;
    Ok(())
}

/// Run the delete callback of attribute `(k, val)` of object `h`.
fn run_delete(obj: Obj, h: usize, k: c_int, kv: &Keyval, val: usize) -> Result<(), E> {
    // SAFETY: the callbacks are the user's, called with the arguments the standard gives them.
    let rc = unsafe {
        match kv.delete {
            DelF::Null => MPI_SUCCESS,
            DelF::Comm(f) => f(
                h as MPI_Comm,
                k,
                val as *mut c_void,
                kv.extra as *mut c_void,
            ),
            DelF::Type(f) => f(
                h as MPI_Datatype,
                k,
                val as *mut c_void,
                kv.extra as *mut c_void,
            ),
            DelF::Win(f) => f(h as MPI_Win, k, val as *mut c_void, kv.extra as *mut c_void),
        }
    };
    if rc != MPI_SUCCESS {
        return Err((
            rc,
            format!(
                "the delete callback of keyval {k} on {} {h:#x} returned {rc}",
                obj.noun()
            ),
        ));
    }
    Ok(())
}

/// Forget attribute `k` of `h` (after its delete callback succeeded).
fn drop_attr(s: &mut Store, obj: Obj, h: usize, k: c_int) {
    if let Some(v) = s.attrs.get_mut(&(obj, h)) {
        v.retain(|&(x, _)| x != k);
        if v.is_empty() {
            s.attrs.remove(&(obj, h));
        }
    }
    let gone = match s.keyvals.get_mut(&k) {
        Some(kv) => {
            kv.uses = kv.uses.saturating_sub(1);
            kv.freed && kv.uses == 0
        }
        None => false,
    };
    if gone {
        s.keyvals.remove(&k);
    }
}

fn current(obj: Obj, h: usize, k: c_int) -> Option<usize> {
    STORE
        .lock()
        .attrs
        .get(&(obj, h))
        .and_then(|v| v.iter().find(|&&(x, _)| x == k).map(|&(_, val)| val))
}

fn set(obj: Obj, h: usize, k: c_int, val: usize) -> Result<(), E> {
    let kv = keyval_of(&STORE.lock(), obj, k)?;
    if kv.freed {
        return Err((MPI_ERR_KEYVAL, format!("keyval {k} has been freed")));
    }
    if let Some(old) = current(obj, h, k) {
        run_delete(obj, h, k, &kv, old)?;
        let mut s = STORE.lock();
        if let Some(v) = s.attrs.get_mut(&(obj, h)) {
            if let Some(e) = v.iter_mut().find(|e| e.0 == k) {
                e.1 = val;
            }
        }
        return Ok(());
    }
    let mut s = STORE.lock();
    s.attrs.entry((obj, h)).or_default().push((k, val));
    if let Some(kv) = s.keyvals.get_mut(&k) {
        kv.uses += 1;
    }
    Ok(())
}

fn get(obj: Obj, h: usize, k: c_int, val: *mut c_void, flag: *mut c_int) -> Result<(), E> {
    keyval_of(&STORE.lock(), obj, k)?;
    let v = out(val as *mut *mut c_void, "attribute_val").map_err(code)?;
    let f = out(flag, "flag").map_err(code)?;
    match current(obj, h, k) {
        Some(x) => {
            *v = x as *mut c_void;
            *f = 1;
        }
        None => *f = 0,
    }
    Ok(())
}

fn delete(obj: Obj, h: usize, k: c_int) -> Result<(), E> {
    let kv = keyval_of(&STORE.lock(), obj, k)?;
    let Some(val) = current(obj, h, k) else {
        return Err((MPI_ERR_KEYVAL, format!("no attribute for keyval {k}")));
    };
    run_delete(obj, h, k, &kv, val)?;
    drop_attr(&mut STORE.lock(), obj, h, k);
    Ok(())
}

/// Copy the attributes of `old` to `new` through the copy callbacks (MPI_Comm_dup,
/// MPI_Type_dup). On a callback failure, the attributes already copied are deleted again.
pub(crate) fn copy_all(obj: Obj, old: usize, new: usize) -> Result<(), (c_int, String)> {
    let list: Vec<(c_int, usize)> = STORE
        .lock()
        .attrs
        .get(&(obj, old))
        .cloned()
        .unwrap_or_default();
    for (k, val) in list {
        let Some(kv) = STORE.lock().keyvals.get(&k).copied() else {
            continue;
        };
        let mut out: *mut c_void = std::ptr::null_mut();
        let mut flag: c_int = 0;
        // SAFETY: user callbacks with the standard's arguments; `out` and `flag` are locals.
        let rc = unsafe {
            match kv.copy {
                CopyF::Null => MPI_SUCCESS,
                CopyF::Dup => {
                    out = val as *mut c_void;
                    flag = 1;
                    MPI_SUCCESS
                }
                CopyF::Comm(f) => f(
                    old as MPI_Comm,
                    k,
                    kv.extra as *mut c_void,
                    val as *mut c_void,
                    &mut out as *mut *mut c_void as *mut c_void,
                    &mut flag,
                ),
                CopyF::Type(f) => f(
                    old as MPI_Datatype,
                    k,
                    kv.extra as *mut c_void,
                    val as *mut c_void,
                    &mut out as *mut *mut c_void as *mut c_void,
                    &mut flag,
                ),
            }
        };
        if rc != MPI_SUCCESS {
            let _ = delete_all(obj, new);
            return Err((rc, format!("the copy callback of keyval {k} returned {rc}")));
        }
        if flag != 0 {
            let mut s = STORE.lock();
            s.attrs
                .entry((obj, new))
                .or_default()
                .push((k, out as usize));
            if let Some(kv) = s.keyvals.get_mut(&k) {
                kv.uses += 1;
            }
        }
    }
    Ok(())
}

/// Delete every attribute of `h` (newest first) through the delete callbacks (the object is
/// being freed). Stops at the first failure, leaving the rest in place.
pub(crate) fn delete_all(obj: Obj, h: usize) -> Result<(), (c_int, String)> {
    loop {
        let last = STORE
            .lock()
            .attrs
            .get(&(obj, h))
            .and_then(|v| v.last().copied());
        let Some((k, val)) = last else {
            return Ok(());
        };
        let kv = STORE.lock().keyvals.get(&k).copied();
        if let Some(kv) = kv {
            run_delete(obj, h, k, &kv, val)?;
        }
        drop_attr(&mut STORE.lock(), obj, h, k);
    }
}

/// For MPI_Type_dup (in `datatype.rs`): copy the datatype attributes.
#[allow(dead_code)]
pub(crate) fn type_dup_attrs(old: MPI_Datatype, new: MPI_Datatype) -> Result<(), (c_int, String)> {
    copy_all(Obj::Type, old as usize, new as usize)
}

/// For MPI_Type_free (in `datatype.rs`): delete the datatype attributes.
#[allow(dead_code)]
pub(crate) fn type_free_attrs(dt: MPI_Datatype) -> Result<(), (c_int, String)> {
    delete_all(Obj::Type, dt as usize)
}

/// For MPI_Finalize: delete the attributes of MPI_COMM_SELF first (the standard's hook for
/// libraries to clean up), then those of MPI_COMM_WORLD.
#[allow(dead_code)]
pub(crate) fn finalize_attrs() {
    let _ = delete_all(Obj::Comm, MPI_COMM_SELF as usize);
    let _ = delete_all(Obj::Comm, MPI_COMM_WORLD as usize);
}

fn done(comm: MPI_Comm, name: &str, r: Result<(), E>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err((c, why)) => errors::raise_code(comm, &|| name.to_string(), c, &why),
    }
}

fn comm_h(comm: MPI_Comm) -> Result<usize, E> {
    handles::comm(comm).map_err(code)?;
    Ok(comm as usize)
}

fn type_h(dt: MPI_Datatype) -> Result<usize, E> {
    handles::datatype(dt).map_err(code)?;
    Ok(dt as usize)
}

fn comm_copy(f: MPI_Comm_copy_attr_function) -> CopyF {
    match f.map_or(0, |f| f as usize) {
        MPI_COMM_NULL_COPY_FN => CopyF::Null,
        MPI_COMM_DUP_FN => CopyF::Dup,
        _ => f.map_or(CopyF::Null, CopyF::Comm),
    }
}

fn comm_del(f: MPI_Comm_delete_attr_function) -> DelF {
    f.map_or(DelF::Null, DelF::Comm)
}

// ------------------------------------------------------------------------------------ comm

pub unsafe fn MPI_Comm_create_keyval(
    comm_copy_attr_fn: MPI_Comm_copy_attr_function,
    comm_delete_attr_fn: MPI_Comm_delete_attr_function,
    comm_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    let r = create(
        Obj::Comm,
        comm_copy(comm_copy_attr_fn),
        comm_del(comm_delete_attr_fn),
        comm_keyval,
        extra_state,
    );
    done(MPI_COMM_SELF, "MPI_Comm_create_keyval", r)
}

pub unsafe fn MPI_Comm_free_keyval(comm_keyval: *mut c_int) -> c_int {
    done(
        MPI_COMM_SELF,
        "MPI_Comm_free_keyval",
        free_keyval(Obj::Comm, comm_keyval),
    )
}

pub unsafe fn MPI_Comm_set_attr(
    comm: MPI_Comm,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    let r = comm_h(comm).and_then(|h| {
        if !is_user_keyval(comm_keyval) {
            return Err((
                MPI_ERR_KEYVAL,
                format!("keyval {comm_keyval} is predefined or invalid: it cannot be set"),
            ));
        }
        set(Obj::Comm, h, comm_keyval, attribute_val as usize)
    });
    done(comm, "MPI_Comm_set_attr", r)
}

/// MPI_Comm_get_attr for a user keyval (called by `comm.rs`).
pub(crate) fn comm_get_user(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let r = comm_h(comm).and_then(|h| get(Obj::Comm, h, keyval, attribute_val, flag));
    done(comm, "MPI_Comm_get_attr", r)
}

pub unsafe fn MPI_Comm_delete_attr(comm: MPI_Comm, comm_keyval: c_int) -> c_int {
    let r = comm_h(comm).and_then(|h| delete(Obj::Comm, h, comm_keyval));
    done(comm, "MPI_Comm_delete_attr", r)
}

pub unsafe fn MPI_Keyval_create(
    copy_fn: MPI_Copy_function,
    delete_fn: MPI_Delete_function,
    keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    MPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state)
}

pub unsafe fn MPI_Keyval_free(keyval: *mut c_int) -> c_int {
    MPI_Comm_free_keyval(keyval)
}

pub unsafe fn MPI_Attr_put(comm: MPI_Comm, keyval: c_int, attribute_val: *mut c_void) -> c_int {
    MPI_Comm_set_attr(comm, keyval, attribute_val)
}

pub unsafe fn MPI_Attr_get(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    super::MPI_Comm_get_attr(comm, keyval, attribute_val, flag)
}

pub unsafe fn MPI_Attr_delete(comm: MPI_Comm, keyval: c_int) -> c_int {
    MPI_Comm_delete_attr(comm, keyval)
}

// ------------------------------------------------------------------------------------ types

pub unsafe fn MPI_Type_create_keyval(
    type_copy_attr_fn: MPI_Type_copy_attr_function,
    type_delete_attr_fn: MPI_Type_delete_attr_function,
    type_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    let copy = match type_copy_attr_fn.map_or(0, |f| f as usize) {
        MPI_TYPE_NULL_COPY_FN => CopyF::Null,
        MPI_TYPE_DUP_FN => CopyF::Dup,
        _ => type_copy_attr_fn.map_or(CopyF::Null, CopyF::Type),
    };
    let del = type_delete_attr_fn.map_or(DelF::Null, DelF::Type);
    let r = create(Obj::Type, copy, del, type_keyval, extra_state);
    done(MPI_COMM_SELF, "MPI_Type_create_keyval", r)
}

pub unsafe fn MPI_Type_free_keyval(type_keyval: *mut c_int) -> c_int {
    done(
        MPI_COMM_SELF,
        "MPI_Type_free_keyval",
        free_keyval(Obj::Type, type_keyval),
    )
}

pub unsafe fn MPI_Type_set_attr(
    datatype: MPI_Datatype,
    type_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    let r = type_h(datatype).and_then(|h| set(Obj::Type, h, type_keyval, attribute_val as usize));
    done(MPI_COMM_SELF, "MPI_Type_set_attr", r)
}

pub unsafe fn MPI_Type_get_attr(
    datatype: MPI_Datatype,
    type_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let r = type_h(datatype).and_then(|h| get(Obj::Type, h, type_keyval, attribute_val, flag));
    done(MPI_COMM_SELF, "MPI_Type_get_attr", r)
}

pub unsafe fn MPI_Type_delete_attr(datatype: MPI_Datatype, type_keyval: c_int) -> c_int {
    let r = type_h(datatype).and_then(|h| delete(Obj::Type, h, type_keyval));
    done(MPI_COMM_SELF, "MPI_Type_delete_attr", r)
}

// ------------------------------------------------------------------------------------ windows

// (Windows are never duplicated: their copy callback is never called and not kept.)

/// MPI_Win_create_keyval (for `rma`).
pub(crate) fn win_create_keyval(
    del: MPI_Win_delete_attr_function,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> Result<(), (c_int, String)> {
    create(
        Obj::Win,
        CopyF::Null,
        del.map_or(DelF::Null, DelF::Win),
        keyval,
        extra,
    )
}

/// MPI_Win_free_keyval.
pub(crate) fn win_free_keyval(keyval: *mut c_int) -> Result<(), (c_int, String)> {
    free_keyval(Obj::Win, keyval)
}

/// MPI_Win_set_attr.
pub(crate) fn win_set(w: MPI_Win, k: c_int, val: *mut c_void) -> Result<(), (c_int, String)> {
    set(Obj::Win, w as usize, k, val as usize)
}

/// MPI_Win_get_attr of a user keyval.
pub(crate) fn win_get(
    w: MPI_Win,
    k: c_int,
    val: *mut c_void,
    flag: *mut c_int,
) -> Result<(), (c_int, String)> {
    get(Obj::Win, w as usize, k, val, flag)
}

/// MPI_Win_delete_attr.
pub(crate) fn win_delete(w: MPI_Win, k: c_int) -> Result<(), (c_int, String)> {
    delete(Obj::Win, w as usize, k)
}

/// MPI_Win_free: delete the window's attributes.
pub(crate) fn win_delete_all(w: MPI_Win) -> Result<(), (c_int, String)> {
    delete_all(Obj::Win, w as usize)
}
