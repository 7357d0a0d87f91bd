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
