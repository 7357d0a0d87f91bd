//! Partitioned communication: MPI_Psend_init, MPI_Precv_init (+ `_c`), MPI_Pready,
//! MPI_Pready_range, MPI_Pready_list, MPI_Parrived. The requests are persistent requests of
//! the core (`madmpi::psend_init`), so MPI_Start/Startall, every wait and test,
//! MPI_Request_free and MPI_Cancel take them as any other.

use std::os::raw::{c_int, c_void};

use madmpi::ErrorClass;

use super::common::*;
use crate::abi::*;
use crate::errors;
use crate::handles;

fn info_ok(info: MPI_Info) -> R<()> {
    if info != MPI_INFO_NULL {
        super::info::pairs(info)?;
    }
    Ok(())
}

fn partitions_arg(partitions: c_int) -> R<usize> {
    if partitions < 1 {
        return fail(
            ErrorClass::Arg,
            format!("invalid number of partitions {partitions} (must be at least 1)"),
        );
    }
    Ok(partitions as usize)
}

#[allow(clippy::too_many_arguments)]
unsafe fn part_init(
    name: &'static str,
    send: bool,
    buf: *const c_void,
    partitions: c_int,
    count: MPI_Count,
    datatype: MPI_Datatype,
    peer: c_int,
    tag: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let r = (|| {
        running()?;
        let c = handles::comm(comm)?;
        let parts = partitions_arg(partitions)?;
        let n = count_arg(count)?;
        let dt = handles::datatype(datatype)?;
        let all = n
            .checked_mul(parts)
            .ok_or_else(|| madmpi::Error::new(ErrorClass::Count, "partitions * count overflows"))?;
        check_buf(buf, all, &dt)?;
        info_ok(info)?;
        let out = out(request, "request")?;
        // SAFETY: the user keeps the buffer valid while the request is active (MPI's rule).
        let rid = unsafe {
            if send {
                madmpi::psend_init(buf as *const u8, parts, n, &dt, peer, tag, c)?
            } else {
                madmpi::precv_init(buf as *mut u8, parts, n, &dt, peer, tag, c)?
            }
        };
        *out = handles::new_request(rid, comm)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!(
            "{}, partitions={partitions})",
            p2p_call(
                name,
                count,
                datatype,
                if send { "dest" } else { "source" },
                peer,
                tag,
                comm
            )
            .trim_end_matches(')')
        )
    })
}

/// Mark `parts` ready on `request`; errors go to the request's communicator.
fn ready(request: MPI_Request, parts: &[i64], call: &dyn Fn() -> String) -> c_int {
    if let Err(e) = running() {
        return errors::raise(MPI_COMM_SELF, call, e);
    }
    if request == MPI_REQUEST_NULL {
        return errors::raise(
            MPI_COMM_SELF,
            call,
            madmpi::Error::new(ErrorClass::Request, "invalid request: MPI_REQUEST_NULL"),
        );
    }
    match handles::request(request) {
        Ok(e) => finish(e.comm as MPI_Comm, madmpi::pready(e.rid, parts), call),
        Err(err) => errors::raise(MPI_COMM_SELF, call, err),
    }
}

pub unsafe fn MPI_Pready(partition: c_int, request: MPI_Request) -> c_int {
    ready(request, &[partition as i64], &|| {
        format!("MPI_Pready(partition={partition})")
    })
}

pub unsafe fn MPI_Pready_range(
    partition_low: c_int,
    partition_high: c_int,
    request: MPI_Request,
) -> c_int {
    let call = || {
        format!("MPI_Pready_range(partition_low={partition_low}, partition_high={partition_high})")
    };
    if partition_low > partition_high {
        return errors::raise(
            MPI_COMM_SELF,
            &call,
            madmpi::Error::new(
                ErrorClass::Arg,
                format!(
                    "empty range: partition_low {partition_low} > partition_high {partition_high}"
                ),
            ),
        );
    }
    let parts: Vec<i64> = (partition_low as i64..=partition_high as i64).collect();
    ready(request, &parts, &call)
}

pub unsafe fn MPI_Pready_list(
    length: c_int,
    array_of_partitions: *const c_int,
    request: MPI_Request,
) -> c_int {
    let call = || format!("MPI_Pready_list(length={length})");
    let list = match count_arg(length as i64)
        .and_then(|n| array(array_of_partitions as *mut c_int, n, "array_of_partitions"))
    {
        Ok(l) => l,
        Err(e) => return errors::raise(MPI_COMM_SELF, &call, e),
    };
    let parts: Vec<i64> = list.iter().map(|&p| p as i64).collect();
    ready(request, &parts, &call)
}

pub unsafe fn MPI_Parrived(request: MPI_Request, partition: c_int, flag: *mut c_int) -> c_int {
    let call = || format!("MPI_Parrived(partition={partition})");
    let e = match running().and_then(|_| out(flag, "flag")).and_then(|f| {
        if request == MPI_REQUEST_NULL {
            // A null request has nothing pending (as MPI_Test on it).
            *f = 1;
            return Ok(None);
        }
        Ok(Some((f, handles::request(request)?)))
    }) {
        Ok(Some(x)) => x,
        Ok(None) => return MPI_SUCCESS,
        Err(err) => return errors::raise(MPI_COMM_SELF, &call, err),
    };
    let (f, ent) = e;
    let r = madmpi::parrived(ent.rid, partition as i64).map(|b| *f = b as c_int);
    finish(ent.comm as MPI_Comm, r, &call)
}

// MPI_Psend_init, MPI_Precv_init and their `_c` twins, one call to `part_init` each: generated by
// `build.rs` (`generate_part_wrappers`) from the ABI's signature table.
include!(concat!(env!("OUT_DIR"), "/part_wrappers.rs"));
