//! The functions of the C interface that only compute with their arguments: handle conversions to
//! and from integers (`MPI_*_c2f`/`_f2c` for Fortran, `MPI_*_toint`/`_fromint` for other language
//! bindings), status conversions to and from Fortran, and address arithmetic (`MPI_Aint_add`,
//! `MPI_Aint_diff`). The build routes these names here unless `imp` defines them.
//!
//! They look nothing up and keep no state. A handle is an integer value of at most 0x7fffffff
//! (predefined handles are the ABI's small constants, the library's own are encoded table
//! entries), so its integer form is its value and the reverse conversion rebuilds it. Converting
//! an integer that is no handle gives a handle the tables reject at its first use, which is what
//! the standard asks of an invalid argument to `MPI_*_f2c`.

use crate::abi::*;
use std::os::raw::c_int;
use std::slice;

/// The `int` form of a handle; `-1` (never a handle) when the value does not fit.
fn handle_to_int(value: usize) -> c_int {
    c_int::try_from(value).unwrap_or(-1)
}

/// The handle value of an `int` form. Negative integers become values above every handle.
fn int_to_handle(value: c_int) -> usize {
    value as u32 as usize
}

macro_rules! handle_conversions {
    ($($handle:ident: $c2f:ident, $f2c:ident, $toint:ident, $fromint:ident;)*) => {$(
        #[doc = concat!("`", stringify!($c2f), "`: the Fortran integer of a handle.")]
        pub fn $c2f(handle: $handle) -> MPI_Fint {
            handle_to_int(handle as usize)
        }

        #[doc = concat!("`", stringify!($f2c), "`: the handle of a Fortran integer.")]
        pub fn $f2c(handle: MPI_Fint) -> $handle {
            int_to_handle(handle) as $handle
        }

        #[doc = concat!("`", stringify!($toint), "`: the integer of a handle.")]
        pub fn $toint(handle: $handle) -> c_int {
            handle_to_int(handle as usize)
        }

        #[doc = concat!("`", stringify!($fromint), "`: the handle of an integer.")]
        pub fn $fromint(handle: c_int) -> $handle {
            int_to_handle(handle) as $handle
        }
    )*};
}

handle_conversions! {
    MPI_Comm: MPI_Comm_c2f, MPI_Comm_f2c, MPI_Comm_toint, MPI_Comm_fromint;
    MPI_Errhandler: MPI_Errhandler_c2f, MPI_Errhandler_f2c, MPI_Errhandler_toint, MPI_Errhandler_fromint;
    MPI_File: MPI_File_c2f, MPI_File_f2c, MPI_File_toint, MPI_File_fromint;
    MPI_Group: MPI_Group_c2f, MPI_Group_f2c, MPI_Group_toint, MPI_Group_fromint;
    MPI_Info: MPI_Info_c2f, MPI_Info_f2c, MPI_Info_toint, MPI_Info_fromint;
    MPI_Message: MPI_Message_c2f, MPI_Message_f2c, MPI_Message_toint, MPI_Message_fromint;
    MPI_Op: MPI_Op_c2f, MPI_Op_f2c, MPI_Op_toint, MPI_Op_fromint;
    MPI_Request: MPI_Request_c2f, MPI_Request_f2c, MPI_Request_toint, MPI_Request_fromint;
    MPI_Session: MPI_Session_c2f, MPI_Session_f2c, MPI_Session_toint, MPI_Session_fromint;
    MPI_Datatype: MPI_Type_c2f, MPI_Type_f2c, MPI_Type_toint, MPI_Type_fromint;
    MPI_Win: MPI_Win_c2f, MPI_Win_f2c, MPI_Win_toint, MPI_Win_fromint;
}

// The Fortran status is the C status word for word: the standard ABI puts MPI_SOURCE, MPI_TAG
// and MPI_ERROR first at the indices MPI_F_SOURCE, MPI_F_TAG and MPI_F_ERROR.
const _: () =
    assert!(MPI_F_STATUS_SIZE == 8 && MPI_F_SOURCE == 0 && MPI_F_TAG == 1 && MPI_F_ERROR == 2);
const _: () = assert!(std::mem::size_of::<MPI_Status>() == 8 * std::mem::size_of::<MPI_Fint>());

/// `MPI_Status_c2f`: copies a status into a Fortran status (`MPI_Fint[MPI_F_STATUS_SIZE]`).
///
/// # Safety
/// `c_status` and `f_status` are null or valid for a status and `MPI_F_STATUS_SIZE` integers.
pub unsafe fn MPI_Status_c2f(c_status: *const MPI_Status, f_status: *mut MPI_Fint) -> c_int {
    // MPI_STATUS_IGNORE (null) is not a status: the standard makes passing it erroneous.
    if c_status.is_null() || f_status.is_null() {
        return MPI_ERR_ARG;
    }
    // SAFETY: both are non-null and, per the caller, valid for these sizes.
    let (c, f) = unsafe {
        (
            &*c_status,
            slice::from_raw_parts_mut(f_status, MPI_F_STATUS_SIZE as usize),
        )
    };
    f[..3].copy_from_slice(&[c.MPI_SOURCE, c.MPI_TAG, c.MPI_ERROR]);
    f[3..].copy_from_slice(&c.MPI_internal);
    MPI_SUCCESS
}

/// `MPI_Status_f2c`: copies a Fortran status into a status.
///
/// # Safety
/// `f_status` and `c_status` are null or valid for `MPI_F_STATUS_SIZE` integers and a status.
pub unsafe fn MPI_Status_f2c(f_status: *const MPI_Fint, c_status: *mut MPI_Status) -> c_int {
    if f_status.is_null() || c_status.is_null() {
        return MPI_ERR_ARG;
    }
    // SAFETY: both are non-null and, per the caller, valid for these sizes.
    let (f, c) = unsafe {
        (
            slice::from_raw_parts(f_status, MPI_F_STATUS_SIZE as usize),
            &mut *c_status,
        )
    };
    c.MPI_SOURCE = f[0];
    c.MPI_TAG = f[1];
    c.MPI_ERROR = f[2];
    c.MPI_internal.copy_from_slice(&f[3..]);
    MPI_SUCCESS
}

/// `MPI_Aint_add`: `base + disp` as addresses, wrapping like the hardware.
pub fn MPI_Aint_add(base: MPI_Aint, disp: MPI_Aint) -> MPI_Aint {
    base.wrapping_add(disp)
}

/// `MPI_Aint_diff`: `addr1 - addr2` as addresses, wrapping like the hardware.
pub fn MPI_Aint_diff(addr1: MPI_Aint, addr2: MPI_Aint) -> MPI_Aint {
    addr1.wrapping_sub(addr2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predefined_handles_keep_their_abi_value() {
        assert_eq!(MPI_Comm_c2f(MPI_COMM_WORLD), 0x101);
        assert_eq!(MPI_Type_toint(MPI_DOUBLE), 0x214);
        assert_eq!(MPI_Comm_f2c(0x102), MPI_COMM_SELF);
        assert_eq!(MPI_Op_fromint(MPI_Op_toint(MPI_MAXLOC)), MPI_MAXLOC);
    }

    #[test]
    fn library_handles_round_trip() {
        let h = 0x7fff_fffe_usize as MPI_Request;
        assert_eq!(MPI_Request_f2c(MPI_Request_c2f(h)), h);
        assert_eq!(MPI_Request_c2f(0x1_0000_0000_usize as MPI_Request), -1);
    }

    #[test]
    fn status_round_trips_through_fortran() {
        let c = MPI_Status {
            MPI_SOURCE: 3,
            MPI_TAG: 7,
            MPI_ERROR: 0,
            MPI_internal: [1, 2, 3, 4, 5],
        };
        let mut f = [0; 8];
        let mut back = MPI_Status::default();
        unsafe {
            assert_eq!(MPI_Status_c2f(&c, f.as_mut_ptr()), MPI_SUCCESS);
            assert_eq!(MPI_Status_f2c(f.as_ptr(), &mut back), MPI_SUCCESS);
            assert_eq!(
                MPI_Status_c2f(MPI_STATUS_IGNORE, f.as_mut_ptr()),
                MPI_ERR_ARG
            );
        }
        assert_eq!(f, [3, 7, 0, 1, 2, 3, 4, 5]);
        assert_eq!(back, c);
    }
}
