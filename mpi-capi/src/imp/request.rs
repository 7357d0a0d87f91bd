//! Requests: starting persistent requests, waiting and testing (single, any, all, some),
//! status queries, freeing and cancelling.
//!
//! A completed non-persistent request is freed and its handle set to MPI_REQUEST_NULL; a
//! persistent one becomes inactive and keeps its handle. Null and inactive requests complete at
//! once with the empty status. Errors of a request go to the handler of its communicator;
//! multiple completions that include failed operations return MPI_ERR_IN_STATUS with every
//! status's MPI_ERROR set.

use std::os::raw::c_int;

use madmpi::{Completion, ErrorClass, RequestId};

use super::common::*;
use crate::abi::*;
use crate::errors;
use crate::handles::{self, ReqEntry};

fn req_call(name: &str, r: MPI_Request) -> String {
    match r as usize {
        0x180 => format!("{name}(request=MPI_REQUEST_NULL)"),
        h => format!("{name}(request={h:#x})"),
    }
}

/// Read a request handle argument; `Ok(None)` for MPI_REQUEST_NULL.
fn read_request(request: *mut MPI_Request) -> R<Option<(MPI_Request, ReqEntry)>> {
    running()?;
    let h = *input(request as *const MPI_Request, "request")?;
    if h == MPI_REQUEST_NULL {
        return Ok(None);
    }
    Ok(Some((h, handles::request(h)?)))
}

/// After a completion: a generalized request's callbacks fill its status, and the handle of a
/// request the core freed goes.
#[inline]
fn settle(request: &mut MPI_Request, c: &mut Completion) {
    if super::grequest::any() {
        super::grequest::reporting(*request as usize, &mut c.status, c.freed);
    }
    if c.freed {
        handles::drop_request(*request);
        *request = MPI_REQUEST_NULL;
    }
}

// ------------------------------------------------------------------------------------ start

pub unsafe fn MPI_Start(request: *mut MPI_Request) -> c_int {
    let call = || "MPI_Start".to_string();
    match read_request(request) {
        Ok(Some((_, e))) => finish(e.comm as MPI_Comm, madmpi::start(e.rid), &call),
        Ok(None) => errors::raise(
            MPI_COMM_SELF,
            &call,
            madmpi::Error::new(ErrorClass::Request, "invalid request: MPI_REQUEST_NULL"),
        ),
        Err(err) => errors::raise(MPI_COMM_SELF, &call, err),
    }
}

pub unsafe fn MPI_Startall(count: c_int, array_of_requests: *mut MPI_Request) -> c_int {
    let call = || format!("MPI_Startall(count={count})");
    let reqs = match count_arg(count as i64)
        .and_then(|n| array(array_of_requests, n, "array_of_requests"))
    {
        Ok(r) => r,
        Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
    };
    for (i, &r) in reqs.iter().enumerate() {
        let e = match handles::request(r) {
            Ok(e) => e,
            Err(mut err) => {
                err.msg = format!("{} (at index {i})", err.msg);
                return errors::raise(MPI_COMM_SELF, &call, err);
            }
        };
        if let Err(err) = madmpi::start(e.rid) {
            return errors::raise(e.comm as MPI_Comm, &call, err);
        }
    }
    MPI_SUCCESS
}

// ------------------------------------------------------------------------------------ single

pub unsafe fn MPI_Wait(request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
    // SAFETY: a non-null request pointer points to a handle (the caller's contract).
    let h0 = if request.is_null() {
        MPI_REQUEST_NULL
    } else {
        unsafe { *request }
    };
    let call = || req_call("MPI_Wait", h0);
    match read_request(request) {
        Ok(None) => {
            write_empty_status(status);
            MPI_SUCCESS
        }
        Ok(Some((_, e))) => match madmpi::wait_completion(e.rid) {
            Ok(mut c) => {
                // SAFETY: read_request checked that `request` is non-null.
                settle(unsafe { &mut *request }, &mut c);
                complete_one(e.comm as MPI_Comm, status, &c.status, &call)
            }
            Err(err) => errors::raise(e.comm as MPI_Comm, &call, err),
        },
        Err(err) => errors::raise(MPI_COMM_SELF, &call, err),
    }
}

pub unsafe fn MPI_Test(
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: a non-null request pointer points to a handle (the caller's contract).
    let h0 = if request.is_null() {
        MPI_REQUEST_NULL
    } else {
        unsafe { *request }
    };
    let call = || req_call("MPI_Test", h0);
    let flag = match out(flag, "flag") {
        Ok(f) => f,
        Err(err) => return errors::raise(MPI_COMM_SELF, &call, err),
    };
    match read_request(request) {
        Ok(None) => {
            *flag = 1;
            write_empty_status(status);
            MPI_SUCCESS
        }
        Ok(Some((_, e))) => match madmpi::test(e.rid) {
            Ok(Some(mut c)) => {
                *flag = 1;
                // SAFETY: read_request checked that `request` is non-null.
                settle(unsafe { &mut *request }, &mut c);
                complete_one(e.comm as MPI_Comm, status, &c.status, &call)
            }
            Ok(None) => {
                *flag = 0;
                MPI_SUCCESS
            }
            Err(err) => errors::raise(e.comm as MPI_Comm, &call, err),
        },
        Err(err) => errors::raise(MPI_COMM_SELF, &call, err),
    }
}

pub unsafe fn MPI_Request_get_status(
    request: MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    let call = || req_call("MPI_Request_get_status", request);
    let flag = match out(flag, "flag") {
        Ok(f) => f,
        Err(err) => return errors::raise(MPI_COMM_SELF, &call, err),
    };
    if request == MPI_REQUEST_NULL {
        *flag = 1;
        write_empty_status(status);
        return MPI_SUCCESS;
    }
    let e = match handles::request(request) {
        Ok(e) => e,
        Err(err) => return errors::raise(MPI_COMM_SELF, &call, err),
    };
    match madmpi::request_get_status(e.rid) {
        Ok(Some(mut s)) => {
            if super::grequest::any() {
                super::grequest::reporting(request as usize, &mut s, false);
            }
            *flag = 1;
            complete_one(e.comm as MPI_Comm, status, &s, &call)
        }
        Ok(None) => {
            *flag = 0;
            MPI_SUCCESS
        }
        Err(err) => errors::raise(e.comm as MPI_Comm, &call, err),
    }
}

pub unsafe fn MPI_Request_free(request: *mut MPI_Request) -> c_int {
    // SAFETY: a non-null request pointer points to a handle (the caller's contract).
    let h0 = if request.is_null() {
        MPI_REQUEST_NULL
    } else {
        unsafe { *request }
    };
    let call = || req_call("MPI_Request_free", h0);
    match read_request(request) {
        Ok(Some((h, e))) => match madmpi::request_free(e.rid) {
            Ok(()) => {
                // An incomplete generalized request keeps its handle for
                // MPI_Grequest_complete, which then frees it.
                if !(super::grequest::any() && super::grequest::keeps_handle(h as usize)) {
                    handles::drop_request(h);
                } else {
                    super::grequest::dropped(h as usize);
                }
                // SAFETY: read_request checked that `request` is non-null.
                unsafe { *request = MPI_REQUEST_NULL };
                MPI_SUCCESS
            }
            Err(err) => errors::raise(e.comm as MPI_Comm, &call, err),
        },
        Ok(None) => errors::raise(
            MPI_COMM_SELF,
            &call,
            madmpi::Error::new(ErrorClass::Request, "invalid request: MPI_REQUEST_NULL"),
        ),
        Err(err) => errors::raise(MPI_COMM_SELF, &call, err),
    }
}

pub unsafe fn MPI_Cancel(request: *mut MPI_Request) -> c_int {
    // SAFETY: a non-null request pointer points to a handle (the caller's contract).
    let h0 = if request.is_null() {
        MPI_REQUEST_NULL
    } else {
        unsafe { *request }
    };
    let call = || req_call("MPI_Cancel", h0);
    if super::grequest::any() {
        if let Some(rc) = super::grequest::cancel(h0 as usize) {
            return finish_code(rc, &call);
        }
    }
    match read_request(request) {
        Ok(Some((_, e))) => finish(e.comm as MPI_Comm, madmpi::cancel(e.rid), &call),
        Ok(None) => errors::raise(
            MPI_COMM_SELF,
            &call,
            madmpi::Error::new(ErrorClass::Request, "invalid request: MPI_REQUEST_NULL"),
        ),
        Err(err) => errors::raise(MPI_COMM_SELF, &call, err),
    }
}

/// A callback's return code as this call's result (through MPI_COMM_SELF's handler).
fn finish_code(rc: c_int, call: &dyn Fn() -> String) -> c_int {
    if rc == MPI_SUCCESS {
        return MPI_SUCCESS;
    }
    errors::raise_code(MPI_COMM_SELF, call, rc, "the cancel callback failed")
}

pub unsafe fn MPI_Test_cancelled(status: *const MPI_Status, flag: *mut c_int) -> c_int {
    let r = (|| {
        running()?;
        let s = input(status, "status")?;
        *out(flag, "flag")? = (s.MPI_internal[2] != 0) as c_int;
        Ok(())
    })();
    finish_self("MPI_Test_cancelled", r)
}

// ------------------------------------------------------------------------------------ multiple

/// The checked arguments of a multiple completion: the handles and their entries.
struct Many<'a> {
    handles: &'a mut [MPI_Request],
}

impl<'a> Many<'a> {
    fn new(count: c_int, p: *mut MPI_Request) -> R<Many<'a>> {
        running()?;
        let n = count_arg(count as i64)?;
        Ok(Many {
            handles: array(p, n, "array_of_requests")?,
        })
    }

    /// Look every handle up into `ents`.
    #[inline]
    fn lookup_entries(&self, ents: &mut [Option<ReqEntry>]) -> R<()> {
        handles::requests(self.handles, ents).map_err(|(i, e)| at_index(i, e))
    }

    /// Look every handle up; the core ids go to `rids`, the entries to `ents`.
    fn lookup(&self, ents: &mut [Option<ReqEntry>], rids: &mut [Option<RequestId>]) -> R<()> {
        self.lookup_entries(ents)?;
        for (r, e) in rids.iter_mut().zip(ents.iter()) {
            *r = e.map(|e| e.rid);
        }
        Ok(())
    }
}

/// Error `e` of the handle at index `i` of an array.
#[cold]
#[inline(never)]
fn at_index(i: usize, mut e: madmpi::Error) -> madmpi::Error {
    e.msg = format!("{} (at index {i})", e.msg);
    e
}

/// The comm of entry `i` (MPI_COMM_SELF for a null one).
fn comm_of(ents: &[Option<ReqEntry>], i: usize) -> MPI_Comm {
    ents[i].map_or(MPI_COMM_SELF as usize, |e| e.comm) as MPI_Comm
}

/// Report MPI_ERR_IN_STATUS on the communicator of the first failed request.
#[cold]
fn in_status(comm: MPI_Comm, failed: usize, call: &dyn Fn() -> String) -> c_int {
    let why = format!("{failed} of the operations failed: the error of each is in its status");
    errors::raise_code(comm, call, MPI_ERR_IN_STATUS, &why)
}

/// Write the statuses of the completions `done` (taken by Waitall or Testall), forget the C
/// handles of the freed requests, and report failed ones with MPI_ERR_IN_STATUS.
fn finish_all(
    m: &mut Many,
    ents: &[Option<ReqEntry>],
    done: &mut [Option<Completion>],
    statuses: *mut MPI_Status,
    call: &dyn Fn() -> String,
) -> c_int {
    let n = m.handles.len();
    let mut st = super::common::statuses(statuses, n);
    if super::grequest::any() {
        for (h, c) in m.handles.iter().zip(done.iter_mut()) {
            if let Some(c) = c {
                super::grequest::reporting(*h as usize, &mut c.status, c.freed);
            }
        }
    }
    // The freed ones lose their handles under one lock.
    handles::drop_requests(
        (0..n)
            .filter(|&i| matches!(done[i], Some(c) if c.freed))
            .map(|i| m.handles[i]),
    );
    let mut failed = 0usize;
    let mut first_failed = None;
    for (i, d) in done.iter().enumerate() {
        let Some(c) = d else {
            if let Some(st) = st.as_deref_mut() {
                empty_status(&mut st[i]);
            }
            continue;
        };
        if c.freed {
            m.handles[i] = MPI_REQUEST_NULL;
        }
        if let Some(st) = st.as_deref_mut() {
            fill_status(&mut st[i], &c.status);
        }
        if status_code(&c.status).is_some() {
            failed += 1;
            first_failed.get_or_insert(i);
        }
    }
    match first_failed {
        None => MPI_SUCCESS,
        Some(i) => {
            if let Some(st) = st {
                for (s, d) in st.iter_mut().zip(done) {
                    s.MPI_ERROR = d
                        .and_then(|c| status_code(&c.status))
                        .unwrap_or(MPI_SUCCESS);
                }
            }
            in_status(comm_of(ents, i), failed, call)
        }
    }
}

/// The comm to report a core error of a call on several requests on: the first non-null one.
fn first_comm(ents: &[Option<ReqEntry>]) -> MPI_Comm {
    comm_of(
        ents,
        ents.iter()
            .position(|e| e.is_some())
            .unwrap_or(0)
            .min(ents.len().saturating_sub(1)),
    )
}

pub unsafe fn MPI_Waitall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    let call = || format!("MPI_Waitall(count={count})");
    // The packet of the sends just posted leaves before the handles are looked up.
    madmpi::send_queued();
    let m = match Many::new(count, array_of_requests) {
        Ok(m) => m,
        Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
    };
    let n = m.handles.len();
    // Every handle is checked before anything is taken; the core ids are the handles' own
    // index and generation, so nothing is looked up into a table of entries.
    let (special, comm0) = match handles::check_requests(m.handles) {
        Ok(x) => x,
        Err((i, e)) => return errors::raise(MPI_COMM_SELF, &call, at_index(i, e)),
    };
    let mut st = super::common::statuses(array_of_statuses, n);
    if special {
        // MPI_REQUEST_NULL and the sends complete at their posting: the empty status, without
        // a turn through the core (the latter's handles become MPI_REQUEST_NULL).
        for (i, h) in m.handles.iter_mut().enumerate() {
            if *h == handles::REQUEST_COMPLETE {
                *h = MPI_REQUEST_NULL;
            } else if *h != MPI_REQUEST_NULL {
                continue;
            }
            if let Some(st) = st.as_deref_mut() {
                empty_status(&mut st[i]);
            }
        }
    }
    // (index, error code, communicator) of the operations that failed: MPI_ERR_IN_STATUS.
    let mut failed: Vec<(usize, c_int, usize)> = Vec::new();
    // No generalized request alive (the usual case): no callback to run at a completion, and
    // a handle goes with its side word alone. (A generalized request made meanwhile by another
    // thread cannot be one of these handles.)
    let greq = super::grequest::any();
    // Shared by the loop over the requests and the completions, which clear the handles.
    let hs = std::cell::Cell::from_mut(&mut *m.handles).as_slice_of_cells();
    let r = madmpi::wait_all_with(
        hs,
        |h| handles::checked_request_id(h.get()),
        |i, status, freed| {
            let h = &hs[i];
            let s = st.as_deref_mut().map(|st| &mut st[i]);
            if greq {
                let comm = handles::request_comm(h.get());
                let mut v = h.get();
                if let Some(code) = settle_reporting(&mut v, status, freed, s) {
                    failed.push((i, code, comm));
                }
                h.set(v);
                return;
            }
            if let Some(code) = status_code(status) {
                failed.push((i, code, handles::request_comm(h.get())));
            }
            if freed {
                handles::forget_request(h.get());
                h.set(MPI_REQUEST_NULL);
            }
            if let Some(s) = s {
                fill_status(s, status);
            }
        },
    );
    if let Err(e) = r {
        return errors::raise(comm0 as MPI_Comm, &call, e);
    }
    if let Some(st) = st {
        if !failed.is_empty() {
            for s in st.iter_mut() {
                s.MPI_ERROR = MPI_SUCCESS;
            }
            for &(i, code, _) in &failed {
                st[i].MPI_ERROR = code;
            }
        }
    }
    // The completions come in order, except those taken ahead: report on the first.
    match failed.iter().min_by_key(|f| f.0) {
        None => MPI_SUCCESS,
        Some(&(_, _, comm)) => in_status(comm as MPI_Comm, failed.len(), &call),
    }
}

/// A completion of MPI_Waitall while generalized requests are alive: [`settle`] (their
/// callbacks), the status written to `st`; the error code of a failed operation.
#[cold]
#[inline(never)]
fn settle_reporting(
    h: &mut MPI_Request,
    status: &madmpi::Status,
    freed: bool,
    st: Option<&mut MPI_Status>,
) -> Option<c_int> {
    let c = &mut Completion {
        status: *status,
        freed,
    };
    settle(h, c);
    if let Some(st) = st {
        fill_status(st, &c.status);
    }
    status_code(&c.status)
}

pub unsafe fn MPI_Testall(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    flag: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    let call = || format!("MPI_Testall(count={count})");
    let (mut m, flag) =
        match Many::new(count, array_of_requests).and_then(|m| Ok((m, out(flag, "flag")?))) {
            Ok(x) => x,
            Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
        };
    let n = m.handles.len();
    with_scratch(n, None, |ents| {
        with_scratch(n, None, |rids| {
            if let Err(e) = m.lookup(ents, rids) {
                return errors::raise(MPI_COMM_SELF, &call, e);
            }
            with_scratch(n, None, |done| match madmpi::test_all(rids, done) {
                Ok(false) => {
                    *flag = 0;
                    MPI_SUCCESS
                }
                Ok(true) => {
                    *flag = 1;
                    finish_all(&mut m, ents, done, array_of_statuses, &call)
                }
                Err(e) => errors::raise(first_comm(ents), &call, e),
            })
        })
    })
}

/// Finish Waitany/Testany with request `i` completed as `c`.
fn finish_any(
    m: &mut Many,
    ents: &[Option<ReqEntry>],
    i: usize,
    mut c: Completion,
    index: &mut c_int,
    status: *mut MPI_Status,
    call: &dyn Fn() -> String,
) -> c_int {
    settle(&mut m.handles[i], &mut c);
    *index = i as c_int;
    complete_one(comm_of(ents, i), status, &c.status, call)
}

pub unsafe fn MPI_Waitany(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    let call = || format!("MPI_Waitany(count={count})");
    let (mut m, index) =
        match Many::new(count, array_of_requests).and_then(|m| Ok((m, out(index, "index")?))) {
            Ok(x) => x,
            Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
        };
    let n = m.handles.len();
    with_scratch(n, None, |ents| {
        with_scratch(n, None, |rids| {
            if let Err(e) = m.lookup(ents, rids) {
                return errors::raise(MPI_COMM_SELF, &call, e);
            }
            match madmpi::wait_any(rids) {
                Ok(Some((i, c))) => finish_any(&mut m, ents, i, c, index, status, &call),
                Ok(None) => {
                    *index = MPI_UNDEFINED;
                    write_empty_status(status);
                    MPI_SUCCESS
                }
                Err(e) => errors::raise(MPI_COMM_SELF, &call, e),
            }
        })
    })
}

pub unsafe fn MPI_Testany(
    count: c_int,
    array_of_requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    let call = || format!("MPI_Testany(count={count})");
    let (mut m, index, flag) = match Many::new(count, array_of_requests)
        .and_then(|m| Ok((m, out(index, "index")?, out(flag, "flag")?)))
    {
        Ok(x) => x,
        Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
    };
    let n = m.handles.len();
    with_scratch(n, None, |ents| {
        with_scratch(n, None, |rids| {
            if let Err(e) = m.lookup(ents, rids) {
                return errors::raise(MPI_COMM_SELF, &call, e);
            }
            match madmpi::test_any(rids) {
                Ok(Some(Some((i, c)))) => {
                    *flag = 1;
                    finish_any(&mut m, ents, i, c, index, status, &call)
                }
                Ok(Some(None)) => {
                    *flag = 1;
                    *index = MPI_UNDEFINED;
                    write_empty_status(status);
                    MPI_SUCCESS
                }
                Ok(None) => {
                    *flag = 0;
                    *index = MPI_UNDEFINED;
                    MPI_SUCCESS
                }
                Err(e) => errors::raise(MPI_COMM_SELF, &call, e),
            }
        })
    })
}

/// Finish Waitsome/Testsome with the completions `done`.
#[allow(clippy::too_many_arguments)]
fn finish_some(
    m: &mut Many,
    ents: &[Option<ReqEntry>],
    done: Option<Vec<(usize, Completion)>>,
    outcount: &mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    call: &dyn Fn() -> String,
) -> c_int {
    let Some(mut done) = done else {
        *outcount = MPI_UNDEFINED;
        return MPI_SUCCESS;
    };
    let k = done.len();
    let idx = match array(indices, k, "array_of_indices") {
        Ok(a) => a,
        Err(e) => return errors::raise(MPI_COMM_SELF, call, e),
    };
    let mut st = super::common::statuses(statuses, k);
    let mut first_failed = None;
    let mut failed = 0;
    for (j, (i, c)) in done.iter_mut().enumerate() {
        settle(&mut m.handles[*i], c);
        idx[j] = *i as c_int;
        if let Some(st) = st.as_deref_mut() {
            fill_status(&mut st[j], &c.status);
        }
        if status_code(&c.status).is_some() {
            failed += 1;
            first_failed.get_or_insert(*i);
        }
    }
    *outcount = k as c_int;
    match first_failed {
        None => MPI_SUCCESS,
        Some(i) => {
            if let Some(st) = st {
                for (s, (_, c)) in st.iter_mut().zip(done.iter()) {
                    s.MPI_ERROR = status_code(&c.status).unwrap_or(MPI_SUCCESS);
                }
            }
            in_status(comm_of(ents, i), failed, call)
        }
    }
}

pub unsafe fn MPI_Waitsome(
    incount: c_int,
    array_of_requests: *mut MPI_Request,
    outcount: *mut c_int,
    array_of_indices: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    let call = || format!("MPI_Waitsome(incount={incount})");
    let (mut m, outcount) = match Many::new(incount, array_of_requests).and_then(|m| {
        // Checked before anything completes: a completion is never lost.
        array(array_of_indices, m.handles.len(), "array_of_indices")?;
        Ok((m, out(outcount, "outcount")?))
    }) {
        Ok(x) => x,
        Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
    };
    let n = m.handles.len();
    with_scratch(n, None, |ents| {
        with_scratch(n, None, |rids| {
            if let Err(e) = m.lookup(ents, rids) {
                return errors::raise(MPI_COMM_SELF, &call, e);
            }
            match madmpi::wait_some(rids) {
                Ok(done) => finish_some(
                    &mut m,
                    ents,
                    done,
                    outcount,
                    array_of_indices,
                    array_of_statuses,
                    &call,
                ),
                Err(e) => errors::raise(MPI_COMM_SELF, &call, e),
            }
        })
    })
}

pub unsafe fn MPI_Testsome(
    incount: c_int,
    array_of_requests: *mut MPI_Request,
    outcount: *mut c_int,
    array_of_indices: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    let call = || format!("MPI_Testsome(incount={incount})");
    let (mut m, outcount) = match Many::new(incount, array_of_requests).and_then(|m| {
        // Checked before anything completes: a completion is never lost.
        array(array_of_indices, m.handles.len(), "array_of_indices")?;
        Ok((m, out(outcount, "outcount")?))
    }) {
        Ok(x) => x,
        Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
    };
    let n = m.handles.len();
    with_scratch(n, None, |ents| {
        with_scratch(n, None, |rids| {
            if let Err(e) = m.lookup(ents, rids) {
                return errors::raise(MPI_COMM_SELF, &call, e);
            }
            match madmpi::test_some(rids) {
                Ok(done) => finish_some(
                    &mut m,
                    ents,
                    done,
                    outcount,
                    array_of_indices,
                    array_of_statuses,
                    &call,
                ),
                Err(e) => errors::raise(MPI_COMM_SELF, &call, e),
            }
        })
    })
}

/// MPI_Request_get_status_all (MPI-4.1): like MPI_Testall, but nothing is freed or made
/// inactive.
pub unsafe fn MPI_Request_get_status_all(
    count: c_int,
    array_of_requests: *const MPI_Request,
    flag: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    let call = || format!("MPI_Request_get_status_all(count={count})");
    let r = (|| {
        running()?;
        let n = count_arg(count as i64)?;
        let hs: &[MPI_Request] = if n == 0 {
            &[]
        } else if array_of_requests.is_null() {
            return fail(
                ErrorClass::Arg,
                "invalid argument: array_of_requests is NULL",
            );
        } else {
            // SAFETY: a non-null array argument has `count` handles (the caller's contract); they
            // are only read.
            unsafe { std::slice::from_raw_parts(array_of_requests, n) }
        };
        Ok((hs, out(flag, "flag")?))
    })();
    let (hs, flag) = match r {
        Ok(x) => x,
        Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
    };
    let n = hs.len();
    with_scratch(n, None, |ents| {
        with_scratch(n, None, |rids| {
            if let Err((i, mut e)) = handles::requests(hs, ents) {
                e.msg = format!("{} (at index {i})", e.msg);
                return errors::raise(MPI_COMM_SELF, &call, e);
            }
            for (r, e) in rids.iter_mut().zip(ents.iter()) {
                *r = e.map(|e| e.rid);
            }
            match madmpi::all_complete(rids) {
                Ok(false) => {
                    *flag = 0;
                    return MPI_SUCCESS;
                }
                Ok(true) => *flag = 1,
                Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
            }
            let mut st = super::common::statuses(array_of_statuses, n);
            let mut first_failed = None;
            let mut failed = 0;
            for i in 0..n {
                let s = match rids[i] {
                    None => madmpi::EMPTY_STATUS,
                    Some(r) => match madmpi::request_get_status(r) {
                        Ok(Some(mut s)) => {
                            if super::grequest::any() {
                                super::grequest::reporting(hs[i] as usize, &mut s, false);
                            }
                            s
                        }
                        Ok(None) => {
                            return errors::raise(
                                comm_of(ents, i),
                                &call,
                                madmpi::Error::new(
                                    ErrorClass::Intern,
                                    "a complete request is no longer complete",
                                ),
                            )
                        }
                        Err(e) => return errors::raise(comm_of(ents, i), &call, e),
                    },
                };
                if let Some(st) = st.as_deref_mut() {
                    fill_status(&mut st[i], &s);
                    st[i].MPI_ERROR = status_code(&s).unwrap_or(MPI_SUCCESS);
                }
                if status_code(&s).is_some() {
                    failed += 1;
                    first_failed.get_or_insert(i);
                }
            }
            match first_failed {
                None => MPI_SUCCESS,
                Some(i) => in_status(comm_of(ents, i), failed, &call),
            }
        })
    })
}
