//! The C interface of one-sided communication: the window handle table (`MPI_Win`), errors
//! raised on a window's error handler, and the calls, in `window` (creation, freeing,
//! attributes, names, info, error handlers, group), `ops` (put, get, accumulates, atomics and
//! their `_c` forms), `req` (the request-based forms) and `sync` (fence, locks, flushes,
//! PSCW); `fast`, the arguments of their fast path on the direct path. The protocol
//! is `madmpi::rma`'s; nothing here talks to other processes.

mod fast;
mod ops;
mod req;
mod sync;
mod window;

pub use ops::*;
pub use req::*;
pub use sync::*;
pub use window::*;

use std::os::raw::c_int;

use madmpi::rma::WinId;
use madmpi::{Error, ErrorClass};
use parking_lot::{const_mutex, Mutex};

use super::common::*;
use super::info::Pairs;
use crate::abi::*;
use crate::errors;
use crate::handles::{self, ErrhFn, Kind, Table};

/// What the predefined attributes of a window point at (kept with the window).
pub(crate) struct WinAttrs {
    base: usize,
    size: MPI_Aint,
    disp_unit: c_int,
    flavor: c_int,
    model: c_int,
}

/// A window of the C interface.
pub(crate) struct WinEntry {
    id: WinId,
    errh: usize,
    name: String,
    attrs: Box<WinAttrs>,
    info: Pairs,
    /// The handle of the communicator it was created over (for requests' errors).
    comm: MPI_Comm,
}

// SAFETY: `comm` is a handle value, never dereferenced.
unsafe impl Send for WinEntry {}

static WINS: Mutex<Table<WinEntry>> = const_mutex(Table::new(Kind::Win));
/// The core window of each live window handle, for lookups without the table's lock (every
/// one-sided operation looks its window up).
static WIN_SIDE: handles::Side = handles::Side::new();

/// Store window `e`; its handle.
pub(crate) fn register_win(e: WinEntry) -> R<MPI_Win> {
    let id = e.id;
    let h = WINS.lock().insert(e)?;
    WIN_SIDE.set(h, h & (handles::MAX_SLOTS - 1), id.0 as usize);
    Ok(h as MPI_Win)
}

/// Forget window handle `w`; its entry.
pub(crate) fn unregister_win(w: MPI_Win) -> R<WinEntry> {
    let e = WINS.lock().remove(w as usize)?;
    WIN_SIDE.clear(w as usize);
    Ok(e)
}

/// The core window of handle `w`.
#[inline]
pub(crate) fn win(w: MPI_Win) -> R<WinId> {
    if let Some((_, id)) = WIN_SIDE.get(w as usize) {
        return Ok(WinId(id as u32));
    }
    // Not live: the table says why.
    if w == MPI_WIN_NULL {
        return fail(ErrorClass::Win, "invalid window: MPI_WIN_NULL");
    }
    WINS.lock()
        .get(w as usize)
        .map(|e| e.id)
        .map_err(|_| Error::new(ErrorClass::Win, format!("invalid window {:#x}", w as usize)))
}

fn with_entry<T>(w: MPI_Win, f: impl FnOnce(&mut WinEntry) -> T) -> R<T> {
    if w == MPI_WIN_NULL {
        return fail(ErrorClass::Win, "invalid window: MPI_WIN_NULL");
    }
    let mut t = WINS.lock();
    let e = t
        .get_mut(w as usize)
        .map_err(|_| Error::new(ErrorClass::Win, format!("invalid window {:#x}", w as usize)))?;
    Ok(f(e))
}

/// A name for a window in messages.
pub(crate) fn win_name(w: MPI_Win) -> String {
    if w == MPI_WIN_NULL {
        return "MPI_WIN_NULL".into();
    }
    match WINS.lock().get(w as usize) {
        Ok(e) if !e.name.is_empty() => e.name.clone(),
        _ => format!("{:#x}", w as usize),
    }
}

/// Report error `code` of `call` on window `w`'s handler (MPI_COMM_SELF's for an invalid
/// window).
fn raise_code(w: MPI_Win, call: &dyn Fn() -> String, code: c_int, why: &str) -> c_int {
    let h = WINS.lock().get(w as usize).ok().map(|e| e.errh);
    let Some(h) = h else {
        return errors::raise_code(MPI_COMM_SELF, call, code, why);
    };
    let eh = handles::errhandler(h as MPI_Errhandler).unwrap_or(handles::Errh::Fatal);
    let user = |f: ErrhFn, c: c_int| {
        let (mut w, mut c) = (w, c);
        if let ErrhFn::Win(func) = f {
            // SAFETY: a C function of the standard's window errhandler type; the variadic
            // tail is empty.
            unsafe { func(&mut w, &mut c) };
        }
        c
    };
    errors::raise_by(eh, &user, call, code, why)
}

/// The end of a window call: MPI_SUCCESS, or the error through the window's handler.
#[inline]
fn finish_win(w: MPI_Win, r: R<()>, call: &dyn Fn() -> String) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise_code(w, call, errors::error_code(&e), &e.msg),
    }
}

/// [`finish_win`] of a call that fails with an exact code (attribute callbacks).
fn finish_win_code(w: MPI_Win, r: Result<(), (c_int, String)>, call: &dyn Fn() -> String) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err((code, why)) => raise_code(w, call, code, &why),
    }
}

/// Name and window of a call, for messages.
fn call_of(name: &'static str, w: MPI_Win) -> impl Fn() -> String {
    move || format!("{name}(win={})", win_name(w))
}
