//! The MPI-4 point-to-point additions: MPI_Isendrecv and MPI_Isendrecv_replace (one request
//! for a receive and a send) and MPI_Request_get_status_any/some (statuses of complete
//! requests without freeing them).

use std::os::raw::{c_int, c_void};

use super::common::*;
use crate::abi::*;
use crate::errors;
use crate::handles::{self, ReqEntry};

#[allow(clippy::too_many_arguments)]
unsafe fn isendrecv(
    name: &'static str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let sn = count_arg(sendcount)?;
        let rn = count_arg(recvcount)?;
        let sdt = handles::datatype(sendtype)?;
        let rdt = handles::datatype(recvtype)?;
        check_buf(sendbuf, sn, &sdt)?;
        check_buf(recvbuf, rn, &rdt)?;
        let out = out(request, "request")?;
        // SAFETY: the user keeps both buffers valid until the request completes (MPI's rule).
        let rid = unsafe {
            madmpi::isendrecv(
                sendbuf as *const u8,
                sn,
                &sdt,
                dest,
                sendtag,
                recvbuf as *mut u8,
                rn,
                &rdt,
                source,
                recvtag,
                c,
            )?
        };
        *out = handles::new_request(rid, comm)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!(
            "{name}(sendcount={sendcount}, dest={}, sendtag={}, recvcount={recvcount}, \
             source={}, recvtag={}, comm={})",
            rank_name(dest),
            tag_name(sendtag),
            rank_name(source),
            tag_name(recvtag),
            handles::comm_name(comm)
        )
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Isendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        isendrecv(
            "MPI_Isendrecv",
            sendbuf,
            sendcount.into(),
            sendtype,
            dest,
            sendtag,
            recvbuf,
            recvcount.into(),
            recvtype,
            source,
            recvtag,
            comm,
            request,
        )
    }
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Isendrecv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        isendrecv(
            "MPI_Isendrecv_c",
            sendbuf,
            sendcount,
            sendtype,
            dest,
            sendtag,
            recvbuf,
            recvcount,
            recvtype,
            source,
            recvtag,
            comm,
            request,
        )
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn isendrecv_replace(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let n = count_arg(count)?;
        let dt = handles::datatype(datatype)?;
        check_buf(buf, n, &dt)?;
        let out = out(request, "request")?;
        // SAFETY: the user keeps the buffer valid until the request completes (MPI's rule).
        let rid = unsafe {
            madmpi::isendrecv_replace(buf as *mut u8, n, &dt, dest, sendtag, source, recvtag, c)?
        };
        *out = handles::new_request(rid, comm)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!(
            "{name}(count={count}, dest={}, sendtag={}, source={}, recvtag={}, comm={})",
            rank_name(dest),
            tag_name(sendtag),
            rank_name(source),
            tag_name(recvtag),
            handles::comm_name(comm)
        )
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Isendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        isendrecv_replace(
            "MPI_Isendrecv_replace",
            buf,
            count.into(),
            datatype,
            dest,
            sendtag,
            source,
            recvtag,
            comm,
            request,
        )
    }
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Isendrecv_replace_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        isendrecv_replace(
            "MPI_Isendrecv_replace_c",
            buf,
            count,
            datatype,
            dest,
            sendtag,
            source,
            recvtag,
            comm,
            request,
        )
    }
}

// ------------------------------------------------------------------------------------ status

/// Core ids and entries of an array of request handles.
type Looked = (Vec<Option<madmpi::RequestId>>, Vec<Option<ReqEntry>>);

/// The request handles of an array argument, looked up: core ids and entries.
fn lookup(count: c_int, p: *const MPI_Request) -> R<Looked> {
    running()?;
    let n = count_arg(count as i64)?;
    let hs: &[MPI_Request] = array(p as *mut MPI_Request, n, "array_of_requests")?;
    let mut ents = vec![None; n];
    handles::requests(hs, &mut ents).map_err(|(i, mut e)| {
        e.msg = format!("{} (at index {i})", e.msg);
        e
    })?;
    Ok((ents.iter().map(|e| e.map(|e| e.rid)).collect(), ents))
}

fn comm_at(ents: &[Option<ReqEntry>], i: usize) -> MPI_Comm {
    ents[i].map_or(MPI_COMM_SELF as usize, |e| e.comm) as MPI_Comm
}

/// MPI_Request_get_status_any (MPI-4.1): like MPI_Testany, but the request is neither freed
/// nor made inactive.
pub unsafe fn MPI_Request_get_status_any(
    count: c_int,
    array_of_requests: *const MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    let call = || format!("MPI_Request_get_status_any(count={count})");
    let r = (|| {
        let (rids, ents) = lookup(count, array_of_requests)?;
        Ok((rids, ents, out(index, "index")?, out(flag, "flag")?))
    })();
    let (rids, ents, index, flag) = match r {
        Ok(x) => x,
        Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
    };
    match madmpi::request_get_status_any(&rids) {
        Ok(Some(Some((i, mut s)))) => {
            if super::grequest::any() {
                // SAFETY: `lookup` read `count` handles from the array.
                let h = unsafe { *array_of_requests.add(i) };
                super::grequest::reporting(h as usize, &mut s, false);
            }
            *flag = 1;
            *index = i as c_int;
            complete_one(comm_at(&ents, i), status, &s, &call)
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
}

/// MPI_Request_get_status_some (MPI-4.1): like MPI_Testsome, but nothing is freed or made
/// inactive.
pub unsafe fn MPI_Request_get_status_some(
    incount: c_int,
    array_of_requests: *const MPI_Request,
    outcount: *mut c_int,
    array_of_indices: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    let call = || format!("MPI_Request_get_status_some(incount={incount})");
    let r = (|| {
        let (rids, ents) = lookup(incount, array_of_requests)?;
        array(array_of_indices, rids.len(), "array_of_indices")?;
        Ok((rids, ents, out(outcount, "outcount")?))
    })();
    let (rids, ents, outcount) = match r {
        Ok(x) => x,
        Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
    };
    let mut done = match madmpi::request_get_status_some(&rids) {
        Ok(Some(d)) => d,
        Ok(None) => {
            *outcount = MPI_UNDEFINED;
            return MPI_SUCCESS;
        }
        Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
    };
    if super::grequest::any() {
        for (i, s) in done.iter_mut() {
            // SAFETY: `lookup` read `incount` handles from the array.
            let h = unsafe { *array_of_requests.add(*i) };
            super::grequest::reporting(h as usize, s, false);
        }
    }
    let k = done.len();
    let idx = match array(array_of_indices, k, "array_of_indices") {
        Ok(a) => a,
        Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
    };
    let mut st = statuses(array_of_statuses, k);
    let mut first_failed = None;
    let mut failed = 0;
    for (j, (i, s)) in done.iter().enumerate() {
        idx[j] = *i as c_int;
        if let Some(st) = st.as_deref_mut() {
            fill_status(&mut st[j], s);
            st[j].MPI_ERROR = status_code(s).unwrap_or(MPI_SUCCESS);
        }
        if status_code(s).is_some() {
            failed += 1;
            first_failed.get_or_insert(*i);
        }
    }
    *outcount = k as c_int;
    match first_failed {
        None => MPI_SUCCESS,
        Some(i) => {
            let why =
                format!("{failed} of the operations failed: the error of each is in its status");
            errors::raise_code(comm_at(&ents, i), &call, MPI_ERR_IN_STATUS, &why)
        }
    }
}
