//! Generalized requests (MPI_Grequest_start/complete): requests the application completes,
//! with its query, free and cancel callbacks. The core holds a plain request (complete when
//! MPI_Grequest_complete says so, and then taken by every wait and test call like any other);
//! the callbacks live here, keyed by the request's handle, and run outside the engine:
//! - query_fn by each call that reports the status of the complete request (the wait and test
//!   calls, MPI_Request_get_status*), as the standard says, so that it sees the state the
//!   application left after MPI_Grequest_complete; its return code becomes the status's error;
//! - free_fn when the request is freed: taken by a wait/test call (after query_fn; its error,
//!   when query_fn had none, becomes the status's error), or freed by MPI_Request_free once
//!   complete (a request freed before is completed by MPI_Grequest_complete with its old
//!   handle, which stays valid for that: MPICH does the same);
//! - cancel_fn at MPI_Cancel, with whether the request is complete.

use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

use madmpi::{ErrorClass, RequestId, Status};

use super::common::*;
use crate::abi::*;
use crate::errors;
use crate::handles;

struct Greq {
    rid: RequestId,
    query: MPI_Grequest_query_function,
    free: MPI_Grequest_free_function,
    cancel: MPI_Grequest_cancel_function,
    extra: *mut c_void,
    completed: bool,
    /// MPI_Request_free was called before completion.
    user_freed: bool,
}

struct Table(Mutex<Option<HashMap<usize, Greq>>>);
// SAFETY: `extra` is the application's pointer, handed back to its callbacks on whatever
// thread completes the request, as MPI allows; every access is under the mutex.
unsafe impl Sync for Table {}

static GREQS: Table = Table(Mutex::new(None));

/// Generalized requests alive: the request paths look at the table only when it is not 0.
static LIVE: AtomicUsize = AtomicUsize::new(0);

fn table<T>(f: impl FnOnce(&mut HashMap<usize, Greq>) -> T) -> T {
    let mut g = GREQS.0.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(HashMap::new))
}

fn remove(h: usize) -> Option<Greq> {
    let g = table(|t| t.remove(&h));
    if g.is_some() {
        LIVE.fetch_sub(1, Relaxed);
    }
    g
}

/// Whether any generalized request is alive (one relaxed load: the request paths' check).
#[inline(always)]
pub(crate) fn any() -> bool {
    LIVE.load(Relaxed) != 0
}

/// Handle `h` was dropped by a completion or by MPI_Request_free: run free_fn if the
/// request is complete, else remember that it was freed.
#[cold]
pub(crate) fn dropped(h: usize) {
    let done = table(|t| match t.get_mut(&h) {
        Some(g) if g.completed => true,
        Some(g) => {
            g.user_freed = true;
            false
        }
        None => false,
    });
    if done {
        if let Some(g) = remove(h) {
            call_free(&g);
        }
    }
}

/// Whether `h` is a generalized request whose handle MPI_Request_free must keep (it is not
/// complete yet).
#[cold]
pub(crate) fn keeps_handle(h: usize) -> bool {
    table(|t| t.get(&h).is_some_and(|g| !g.completed))
}

fn call_free(g: &Greq) -> c_int {
    match g.free {
        // SAFETY: the application's callback with its own state.
        Some(f) => unsafe { f(g.extra) },
        None => MPI_SUCCESS,
    }
}

/// MPI_Cancel of `h` if it is a generalized request: cancel_fn's return code.
#[cold]
pub(crate) fn cancel(h: usize) -> Option<c_int> {
    let (f, extra, completed) = table(|t| t.get(&h).map(|g| (g.cancel, g.extra, g.completed)))?;
    Some(match f {
        // SAFETY: the application's callback with its own state.
        Some(f) => unsafe { f(extra, completed as c_int) },
        None => MPI_SUCCESS,
    })
}

/// A completion call reports complete generalized request `h` (if it is one) with status `s`:
/// query_fn fills `s` now (its return code becomes the error). When the call also frees the
/// request (`freeing`), free_fn runs after it, and its error counts when query_fn had none; the
/// handle's later drop then has nothing left to do.
#[cold]
pub(crate) fn reporting(h: usize, s: &mut Status, freeing: bool) {
    let Some((query, extra)) = table(|t| t.get(&h).map(|g| (g.query, g.extra))) else {
        return;
    };
    // SAFETY: a C status is plain integers, for which all zeros is a value.
    let mut cs: MPI_Status = unsafe { std::mem::zeroed() };
    empty_status(&mut cs);
    let rc = match query {
        // SAFETY: the application's callback with its own state and a status to fill.
        Some(q) => unsafe { q(extra, &mut cs) },
        None => MPI_SUCCESS,
    };
    *s = Status {
        source: cs.MPI_SOURCE,
        tag: cs.MPI_TAG,
        error: (rc != MPI_SUCCESS).then(|| class_of(rc)),
        bytes: status_bytes(&cs),
        msg_len: status_bytes(&cs),
        cancelled: cs.MPI_internal[2] != 0,
    };
    if freeing {
        if let Some(g) = remove(h) {
            let rc = call_free(&g);
            if rc != MPI_SUCCESS && s.error.is_none() {
                s.error = Some(class_of(rc));
            }
        }
    }
}

/// The class of an error code a callback returned.
fn class_of(code: c_int) -> ErrorClass {
    use ErrorClass::*;
    let class = errors::class_of_code(code).unwrap_or(MPI_ERR_OTHER);
    [
        Buffer,
        Count,
        Type,
        Tag,
        Comm,
        Rank,
        Request,
        Root,
        Group,
        Op,
        Arg,
        Truncate,
        Other,
        Intern,
        Pending,
        NoMem,
        ProcAborted,
        Unsupported,
        Keyval,
        Info,
        Topology,
        Dims,
        ValueTooLarge,
        UnsupportedDatarep,
        Conversion,
    ]
    .into_iter()
    .find(|&c| errors::class_code(c) == class)
    .unwrap_or(Other)
}

pub unsafe fn MPI_Grequest_start(
    query_fn: MPI_Grequest_query_function,
    free_fn: MPI_Grequest_free_function,
    cancel_fn: MPI_Grequest_cancel_function,
    extra_state: *mut c_void,
    request: *mut MPI_Request,
) -> c_int {
    let r = (|| {
        running()?;
        let out = out(request, "request")?;
        let rid = madmpi::grequest_start()?;
        let h = handles::new_request(rid, MPI_COMM_SELF)?;
        table(|t| {
            t.insert(
                h as usize,
                Greq {
                    rid,
                    query: query_fn,
                    free: free_fn,
                    cancel: cancel_fn,
                    extra: extra_state,
                    completed: false,
                    user_freed: false,
                },
            )
        });
        LIVE.fetch_add(1, Relaxed);
        *out = h;
        Ok(())
    })();
    finish_self("MPI_Grequest_start", r)
}

pub unsafe fn MPI_Grequest_complete(request: MPI_Request) -> c_int {
    let h = request as usize;
    let call = || format!("MPI_Grequest_complete(request={h:#x})");
    let g = table(|t| t.get(&h).map(|g| (g.rid, g.completed)));
    let Some((rid, completed)) = g else {
        return errors::raise(
            MPI_COMM_SELF,
            &call,
            madmpi::Error::new(ErrorClass::Request, "not a generalized request"),
        );
    };
    if completed {
        return errors::raise(
            MPI_COMM_SELF,
            &call,
            madmpi::Error::new(
                ErrorClass::Request,
                "the generalized request is already complete",
            ),
        );
    }
    match madmpi::grequest_complete(rid, madmpi::EMPTY_STATUS) {
        Ok(freed) => {
            let user_freed = table(|t| {
                t.get_mut(&h).is_some_and(|g| {
                    g.completed = true;
                    g.user_freed
                })
            });
            if freed || user_freed {
                // Freed by MPI_Request_free before: its handle goes now, and free_fn runs.
                handles::drop_request(request);
            }
            MPI_SUCCESS
        }
        Err(e) => errors::raise(MPI_COMM_SELF, &call, e),
    }
}
