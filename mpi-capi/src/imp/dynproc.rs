//! Dynamic process management: the name service (MPI_Publish_name, MPI_Lookup_name,
//! MPI_Unpublish_name), served by the launcher through PMI (`madmpi::publish_name`); errors go
//! to MPI_COMM_SELF's handler, as for every call tied to no communicator. MPI_Comm_disconnect
//! is MPI_Comm_free's twin in `comm_mgmt.rs`.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

use madmpi::ErrorClass;

use super::common::*;
use super::info::pairs;
use crate::abi::*;

/// A string argument, or MPI_ERR_ARG naming it when NULL.
unsafe fn text(p: *const c_char, what: &str) -> R<String> {
    if p.is_null() {
        return fail(ErrorClass::Arg, format!("invalid argument: {what} is NULL"));
    }
    Ok(CStr::from_ptr(p).to_string_lossy().into_owned())
}

/// The info argument: MPI_INFO_NULL or a valid info (no key is used by the name service).
fn info_arg(info: MPI_Info) -> R<()> {
    if info != MPI_INFO_NULL {
        pairs(info)?;
    }
    Ok(())
}

/// MPI_Publish_name and MPI_Unpublish_name: their arguments checked, then `call(service, port)`.
unsafe fn named_port(
    name: &str,
    service_name: *const c_char,
    info: MPI_Info,
    port_name: *const c_char,
    call: fn(&str, &str) -> R<()>,
) -> c_int {
    let r = (|| {
        running()?;
        let service = text(service_name, "service_name")?;
        let port = text(port_name, "port_name")?;
        info_arg(info)?;
        call(&service, &port)
    })();
    finish_self(name, r)
}

pub unsafe fn MPI_Publish_name(
    service_name: *const c_char,
    info: MPI_Info,
    port_name: *const c_char,
) -> c_int {
    named_port(
        "MPI_Publish_name",
        service_name,
        info,
        port_name,
        madmpi::publish_name,
    )
}

pub unsafe fn MPI_Lookup_name(
    service_name: *const c_char,
    info: MPI_Info,
    port_name: *mut c_char,
) -> c_int {
    let r = (|| {
        running()?;
        let service = text(service_name, "service_name")?;
        if port_name.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: port_name is NULL");
        }
        info_arg(info)?;
        let port = madmpi::lookup_name(&service)?;
        if port.len() >= MPI_MAX_PORT_NAME as usize {
            return fail(
                ErrorClass::Name,
                format!(
                    "the port published under '{service}' has {} bytes, more than \
                     MPI_MAX_PORT_NAME allows",
                    port.len()
                ),
            );
        }
        copy_cstr(&port, port_name, MPI_MAX_PORT_NAME as usize);
        Ok(())
    })();
    finish_self("MPI_Lookup_name", r)
}

pub unsafe fn MPI_Unpublish_name(
    service_name: *const c_char,
    info: MPI_Info,
    port_name: *const c_char,
) -> c_int {
    named_port(
        "MPI_Unpublish_name",
        service_name,
        info,
        port_name,
        madmpi::unpublish_name,
    )
}

// ------------------------------------------------------------------ ports and intercommunicators

pub unsafe fn MPI_Open_port(info: MPI_Info, port_name: *mut c_char) -> c_int {
    let r = (|| {
        running()?;
        info_arg(info)?;
        if port_name.is_null() {
            return fail(ErrorClass::Arg, "invalid argument: port_name is NULL");
        }
        let port = madmpi::open_port()?;
        copy_cstr(&port, port_name, MPI_MAX_PORT_NAME as usize);
        Ok(())
    })();
    finish_self("MPI_Open_port", r)
}

pub unsafe fn MPI_Close_port(port_name: *const c_char) -> c_int {
    let r = (|| {
        running()?;
        let port = text(port_name, "port_name")?;
        madmpi::close_port(&port)
    })();
    finish_self("MPI_Close_port", r)
}

/// MPI_Comm_accept and MPI_Comm_connect: the arguments checked (the port name and info are
/// significant at the root only), then `call`.
unsafe fn accept_connect(
    port_name: *const c_char,
    info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
    call: fn(&str, i32, madmpi::CommId) -> madmpi::Result<madmpi::CommId>,
) -> R<()> {
    let c = crate::handles::comm(comm)?;
    let o = out(newcomm, "newcomm")?;
    let port = if madmpi::comm_rank(c)? == root {
        info_arg(info)?;
        text(port_name, "port_name")?
    } else {
        String::new()
    };
    let id = call(&port, root, c)?;
    *o = super::comm_mgmt::register(id, comm)?;
    Ok(())
}

pub unsafe fn MPI_Comm_accept(
    port_name: *const c_char,
    info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = accept_connect(port_name, info, root, comm, newcomm, madmpi::comm_accept);
    finish(comm, r, &|| {
        format!(
            "MPI_Comm_accept(root={root}, comm={})",
            crate::handles::comm_name(comm)
        )
    })
}

pub unsafe fn MPI_Comm_connect(
    port_name: *const c_char,
    info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = accept_connect(port_name, info, root, comm, newcomm, madmpi::comm_connect);
    finish(comm, r, &|| {
        format!(
            "MPI_Comm_connect(root={root}, comm={})",
            crate::handles::comm_name(comm)
        )
    })
}

pub unsafe fn MPI_Comm_join(fd: c_int, intercomm: *mut MPI_Comm) -> c_int {
    let r = (|| {
        running()?;
        let o = out(intercomm, "intercomm")?;
        if fd < 0 {
            return fail(ErrorClass::Arg, format!("invalid socket descriptor {fd}"));
        }
        // SAFETY: the caller says `fd` is an open socket; it is only borrowed (duplicated).
        let b = std::os::fd::BorrowedFd::borrow_raw(fd);
        let id = madmpi::comm_join(b)?;
        *o = super::comm_mgmt::register(id, MPI_COMM_SELF)?;
        Ok(())
    })();
    finish_self("MPI_Comm_join", r)
}
