//! The MPI-5.0 standard ABI as Rust items: handle and scalar types, `MPI_Status`, the callback
//! types and every constant of `abi/mpi-abi-constants.tsv` and `abi/mpi-abi-callbacks.tsv`.
//!
//! This module is what `include/mpi.h` is generated from: cbindgen emits its integer constants,
//! scalar typedefs, handle typedefs and `MPI_Status`. The build writes what cbindgen cannot
//! express from the tables themselves: the `((MPI_Comm)0x101)`-style macros of predefined handles
//! and special pointers, and the callback function types (`abi/mpi-abi-signatures.txt`).
//!
//! Every value here is checked against the tables at compile time (integers) or by a unit test
//! (pointers), from code the build generates (`$OUT_DIR/abi_check.rs`). It holds no logic.

use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

// ---------------------------------------------------------------------------------------------
// Handle types. A handle is a pointer to an incomplete struct (`typedef struct MPI_ABI_Comm
// *MPI_Comm;`); predefined handles are the small integers below, the library's own handles are
// other encoded integers. Never dereferenced.
// ---------------------------------------------------------------------------------------------

/// Target of [`MPI_Op`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_Op {
    _private: [u8; 0],
}
/// A reduction operation handle.
pub type MPI_Op = *mut MPI_ABI_Op;

/// Target of [`MPI_Comm`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_Comm {
    _private: [u8; 0],
}
/// A communicator handle.
pub type MPI_Comm = *mut MPI_ABI_Comm;

/// Target of [`MPI_Group`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_Group {
    _private: [u8; 0],
}
/// A process group handle.
pub type MPI_Group = *mut MPI_ABI_Group;

/// Target of [`MPI_Win`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_Win {
    _private: [u8; 0],
}
/// A RMA window handle.
pub type MPI_Win = *mut MPI_ABI_Win;

/// Target of [`MPI_File`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_File {
    _private: [u8; 0],
}
/// A file handle.
pub type MPI_File = *mut MPI_ABI_File;

/// Target of [`MPI_Session`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_Session {
    _private: [u8; 0],
}
/// A session handle.
pub type MPI_Session = *mut MPI_ABI_Session;

/// Target of [`MPI_Message`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_Message {
    _private: [u8; 0],
}
/// A matched message (`MPI_Mprobe`) handle.
pub type MPI_Message = *mut MPI_ABI_Message;

/// Target of [`MPI_Info`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_Info {
    _private: [u8; 0],
}
/// A info object handle.
pub type MPI_Info = *mut MPI_ABI_Info;

/// Target of [`MPI_Errhandler`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_Errhandler {
    _private: [u8; 0],
}
/// A error handler handle.
pub type MPI_Errhandler = *mut MPI_ABI_Errhandler;

/// Target of [`MPI_Request`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_Request {
    _private: [u8; 0],
}
/// A request handle.
pub type MPI_Request = *mut MPI_ABI_Request;

/// Target of [`MPI_Datatype`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_Datatype {
    _private: [u8; 0],
}
/// A datatype handle.
pub type MPI_Datatype = *mut MPI_ABI_Datatype;

/// Target of [`MPI_T_enum`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_T_enum {
    _private: [u8; 0],
}
/// A tool interface enumeration handle.
pub type MPI_T_enum = *mut MPI_ABI_T_enum;

/// Target of [`MPI_T_cvar_handle`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_T_cvar_handle {
    _private: [u8; 0],
}
/// A tool interface control variable handle handle.
pub type MPI_T_cvar_handle = *mut MPI_ABI_T_cvar_handle;

/// Target of [`MPI_T_pvar_handle`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_T_pvar_handle {
    _private: [u8; 0],
}
/// A tool interface performance variable handle handle.
pub type MPI_T_pvar_handle = *mut MPI_ABI_T_pvar_handle;

/// Target of [`MPI_T_pvar_session`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_T_pvar_session {
    _private: [u8; 0],
}
/// A tool interface performance variable session handle.
pub type MPI_T_pvar_session = *mut MPI_ABI_T_pvar_session;

/// Target of [`MPI_T_event_registration`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_T_event_registration {
    _private: [u8; 0],
}
/// A tool interface event registration handle.
pub type MPI_T_event_registration = *mut MPI_ABI_T_event_registration;

/// Target of [`MPI_T_event_instance`]; incomplete in C, never instantiated.
#[repr(C)]
pub struct MPI_ABI_T_event_instance {
    _private: [u8; 0],
}
/// A tool interface event instance handle.
pub type MPI_T_event_instance = *mut MPI_ABI_T_event_instance;

// ---------------------------------------------------------------------------------------------
// Scalar types and the status
// ---------------------------------------------------------------------------------------------

/// An address or address difference (C `intptr_t`).
pub type MPI_Aint = isize;
/// A file offset (C `int64_t`).
pub type MPI_Offset = i64;
/// A count large enough for any `MPI_Aint` or `MPI_Offset` (C `int64_t`).
pub type MPI_Count = i64;
/// A Fortran `INTEGER` (C `int`): handles and statuses as Fortran sees them.
pub type MPI_Fint = c_int;
/// Required safety of a tool-interface event callback: one of `MPI_T_CB_REQUIRE_*`.
pub type MPI_T_cb_safety = c_int;
/// Ordering of a tool-interface event source: `MPI_T_SOURCE_ORDERED` or `MPI_T_SOURCE_UNORDERED`.
pub type MPI_T_source_order = c_int;

/// The status of a completed operation (32 bytes). `MPI_internal` is private to the library.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MPI_Status {
    pub MPI_SOURCE: c_int,
    pub MPI_TAG: c_int,
    pub MPI_ERROR: c_int,
    pub MPI_internal: [c_int; 5],
}

// ---------------------------------------------------------------------------------------------
// Predefined handles (in C: `#define MPI_COMM_WORLD ((MPI_Comm)0x101)`)
// ---------------------------------------------------------------------------------------------

// MPI_Op
pub const MPI_OP_NULL: MPI_Op = 0x20 as MPI_Op;
pub const MPI_SUM: MPI_Op = 0x21 as MPI_Op;
pub const MPI_MIN: MPI_Op = 0x22 as MPI_Op;
pub const MPI_MAX: MPI_Op = 0x23 as MPI_Op;
pub const MPI_PROD: MPI_Op = 0x24 as MPI_Op;
pub const MPI_BAND: MPI_Op = 0x28 as MPI_Op;
pub const MPI_BOR: MPI_Op = 0x29 as MPI_Op;
pub const MPI_BXOR: MPI_Op = 0x2a as MPI_Op;
pub const MPI_LAND: MPI_Op = 0x30 as MPI_Op;
pub const MPI_LOR: MPI_Op = 0x31 as MPI_Op;
pub const MPI_LXOR: MPI_Op = 0x32 as MPI_Op;
pub const MPI_MINLOC: MPI_Op = 0x38 as MPI_Op;
pub const MPI_MAXLOC: MPI_Op = 0x39 as MPI_Op;
pub const MPI_REPLACE: MPI_Op = 0x3c as MPI_Op;
pub const MPI_NO_OP: MPI_Op = 0x3d as MPI_Op;

// MPI_Comm
pub const MPI_COMM_NULL: MPI_Comm = 0x100 as MPI_Comm;
pub const MPI_COMM_WORLD: MPI_Comm = 0x101 as MPI_Comm;
pub const MPI_COMM_SELF: MPI_Comm = 0x102 as MPI_Comm;

// MPI_Group
pub const MPI_GROUP_NULL: MPI_Group = 0x108 as MPI_Group;
pub const MPI_GROUP_EMPTY: MPI_Group = 0x109 as MPI_Group;

// MPI_Win
pub const MPI_WIN_NULL: MPI_Win = 0x110 as MPI_Win;

// MPI_File
pub const MPI_FILE_NULL: MPI_File = 0x118 as MPI_File;

// MPI_Session
pub const MPI_SESSION_NULL: MPI_Session = 0x120 as MPI_Session;

// MPI_Message
pub const MPI_MESSAGE_NULL: MPI_Message = 0x128 as MPI_Message;
pub const MPI_MESSAGE_NO_PROC: MPI_Message = 0x129 as MPI_Message;

// MPI_Info
pub const MPI_INFO_NULL: MPI_Info = 0x130 as MPI_Info;
pub const MPI_INFO_ENV: MPI_Info = 0x131 as MPI_Info;

// MPI_Errhandler
pub const MPI_ERRHANDLER_NULL: MPI_Errhandler = 0x140 as MPI_Errhandler;
pub const MPI_ERRORS_ARE_FATAL: MPI_Errhandler = 0x141 as MPI_Errhandler;
pub const MPI_ERRORS_ABORT: MPI_Errhandler = 0x142 as MPI_Errhandler;
pub const MPI_ERRORS_RETURN: MPI_Errhandler = 0x143 as MPI_Errhandler;

// MPI_Request
pub const MPI_REQUEST_NULL: MPI_Request = 0x180 as MPI_Request;

// MPI_Datatype
pub const MPI_DATATYPE_NULL: MPI_Datatype = 0x200 as MPI_Datatype;
pub const MPI_AINT: MPI_Datatype = 0x201 as MPI_Datatype;
pub const MPI_COUNT: MPI_Datatype = 0x202 as MPI_Datatype;
pub const MPI_OFFSET: MPI_Datatype = 0x203 as MPI_Datatype;
pub const MPI_PACKED: MPI_Datatype = 0x207 as MPI_Datatype;
pub const MPI_SHORT: MPI_Datatype = 0x208 as MPI_Datatype;
pub const MPI_INT: MPI_Datatype = 0x209 as MPI_Datatype;
pub const MPI_LONG: MPI_Datatype = 0x20a as MPI_Datatype;
pub const MPI_LONG_LONG: MPI_Datatype = 0x20b as MPI_Datatype;
pub const MPI_UNSIGNED_SHORT: MPI_Datatype = 0x20c as MPI_Datatype;
pub const MPI_UNSIGNED: MPI_Datatype = 0x20d as MPI_Datatype;
pub const MPI_UNSIGNED_LONG: MPI_Datatype = 0x20e as MPI_Datatype;
pub const MPI_UNSIGNED_LONG_LONG: MPI_Datatype = 0x20f as MPI_Datatype;
pub const MPI_FLOAT: MPI_Datatype = 0x210 as MPI_Datatype;
pub const MPI_C_FLOAT_COMPLEX: MPI_Datatype = 0x212 as MPI_Datatype;
pub const MPI_CXX_FLOAT_COMPLEX: MPI_Datatype = 0x213 as MPI_Datatype;
pub const MPI_DOUBLE: MPI_Datatype = 0x214 as MPI_Datatype;
pub const MPI_C_DOUBLE_COMPLEX: MPI_Datatype = 0x216 as MPI_Datatype;
pub const MPI_CXX_DOUBLE_COMPLEX: MPI_Datatype = 0x217 as MPI_Datatype;
pub const MPI_LOGICAL: MPI_Datatype = 0x218 as MPI_Datatype;
pub const MPI_INTEGER: MPI_Datatype = 0x219 as MPI_Datatype;
pub const MPI_REAL: MPI_Datatype = 0x21a as MPI_Datatype;
pub const MPI_COMPLEX: MPI_Datatype = 0x21b as MPI_Datatype;
pub const MPI_DOUBLE_PRECISION: MPI_Datatype = 0x21c as MPI_Datatype;
pub const MPI_DOUBLE_COMPLEX: MPI_Datatype = 0x21d as MPI_Datatype;
pub const MPI_CHARACTER: MPI_Datatype = 0x21e as MPI_Datatype;
pub const MPI_LONG_DOUBLE: MPI_Datatype = 0x220 as MPI_Datatype;
pub const MPI_C_LONG_DOUBLE_COMPLEX: MPI_Datatype = 0x224 as MPI_Datatype;
pub const MPI_CXX_LONG_DOUBLE_COMPLEX: MPI_Datatype = 0x225 as MPI_Datatype;
pub const MPI_FLOAT_INT: MPI_Datatype = 0x228 as MPI_Datatype;
pub const MPI_DOUBLE_INT: MPI_Datatype = 0x229 as MPI_Datatype;
pub const MPI_LONG_INT: MPI_Datatype = 0x22a as MPI_Datatype;
pub const MPI_2INT: MPI_Datatype = 0x22b as MPI_Datatype;
pub const MPI_SHORT_INT: MPI_Datatype = 0x22c as MPI_Datatype;
pub const MPI_LONG_DOUBLE_INT: MPI_Datatype = 0x22d as MPI_Datatype;
pub const MPI_2REAL: MPI_Datatype = 0x230 as MPI_Datatype;
pub const MPI_2DOUBLE_PRECISION: MPI_Datatype = 0x231 as MPI_Datatype;
pub const MPI_2INTEGER: MPI_Datatype = 0x232 as MPI_Datatype;
pub const MPI_C_BOOL: MPI_Datatype = 0x238 as MPI_Datatype;
pub const MPI_CXX_BOOL: MPI_Datatype = 0x239 as MPI_Datatype;
pub const MPI_WCHAR: MPI_Datatype = 0x23c as MPI_Datatype;
pub const MPI_INT8_T: MPI_Datatype = 0x240 as MPI_Datatype;
pub const MPI_UINT8_T: MPI_Datatype = 0x241 as MPI_Datatype;
pub const MPI_CHAR: MPI_Datatype = 0x243 as MPI_Datatype;
pub const MPI_SIGNED_CHAR: MPI_Datatype = 0x244 as MPI_Datatype;
pub const MPI_UNSIGNED_CHAR: MPI_Datatype = 0x245 as MPI_Datatype;
pub const MPI_BYTE: MPI_Datatype = 0x247 as MPI_Datatype;
pub const MPI_INT16_T: MPI_Datatype = 0x248 as MPI_Datatype;
pub const MPI_UINT16_T: MPI_Datatype = 0x249 as MPI_Datatype;
pub const MPI_INT32_T: MPI_Datatype = 0x250 as MPI_Datatype;
pub const MPI_UINT32_T: MPI_Datatype = 0x251 as MPI_Datatype;
pub const MPI_INT64_T: MPI_Datatype = 0x258 as MPI_Datatype;
pub const MPI_UINT64_T: MPI_Datatype = 0x259 as MPI_Datatype;
pub const MPI_LOGICAL1: MPI_Datatype = 0x2c0 as MPI_Datatype;
pub const MPI_INTEGER1: MPI_Datatype = 0x2c1 as MPI_Datatype;
pub const MPI_LOGICAL2: MPI_Datatype = 0x2c8 as MPI_Datatype;
pub const MPI_INTEGER2: MPI_Datatype = 0x2c9 as MPI_Datatype;
pub const MPI_REAL2: MPI_Datatype = 0x2ca as MPI_Datatype;
pub const MPI_LOGICAL4: MPI_Datatype = 0x2d0 as MPI_Datatype;
pub const MPI_INTEGER4: MPI_Datatype = 0x2d1 as MPI_Datatype;
pub const MPI_REAL4: MPI_Datatype = 0x2d2 as MPI_Datatype;
pub const MPI_COMPLEX4: MPI_Datatype = 0x2d3 as MPI_Datatype;
pub const MPI_LOGICAL8: MPI_Datatype = 0x2d8 as MPI_Datatype;
pub const MPI_INTEGER8: MPI_Datatype = 0x2d9 as MPI_Datatype;
pub const MPI_REAL8: MPI_Datatype = 0x2da as MPI_Datatype;
pub const MPI_COMPLEX8: MPI_Datatype = 0x2db as MPI_Datatype;
pub const MPI_LOGICAL16: MPI_Datatype = 0x2e0 as MPI_Datatype;
pub const MPI_INTEGER16: MPI_Datatype = 0x2e1 as MPI_Datatype;
pub const MPI_REAL16: MPI_Datatype = 0x2e2 as MPI_Datatype;
pub const MPI_COMPLEX16: MPI_Datatype = 0x2e3 as MPI_Datatype;
pub const MPI_COMPLEX32: MPI_Datatype = 0x2eb as MPI_Datatype;

// MPI_T_enum
pub const MPI_T_ENUM_NULL: MPI_T_enum = ptr::null_mut();

// MPI_T_cvar_handle
pub const MPI_T_CVAR_HANDLE_NULL: MPI_T_cvar_handle = ptr::null_mut();

// MPI_T_pvar_session
pub const MPI_T_PVAR_SESSION_NULL: MPI_T_pvar_session = ptr::null_mut();

// MPI_T_pvar_handle
pub const MPI_T_PVAR_HANDLE_NULL: MPI_T_pvar_handle = ptr::null_mut();
pub const MPI_T_PVAR_ALL_HANDLES: MPI_T_pvar_handle = 0x1 as MPI_T_pvar_handle;

// Aliases
pub const MPI_LONG_LONG_INT: MPI_Datatype = MPI_LONG_LONG;
pub const MPI_C_COMPLEX: MPI_Datatype = MPI_C_FLOAT_COMPLEX;

// ---------------------------------------------------------------------------------------------
// Special addresses and ignored arguments (in C: `#define MPI_IN_PLACE ((void *)1)`)
// ---------------------------------------------------------------------------------------------

pub const MPI_BOTTOM: *mut c_void = ptr::null_mut();
#[allow(clippy::manual_dangling_ptr)] // an ABI sentinel, compared, never dereferenced
pub const MPI_IN_PLACE: *mut c_void = 1 as *mut c_void;
pub const MPI_BUFFER_AUTOMATIC: *mut c_void = 2 as *mut c_void;
pub const MPI_ARGV_NULL: *mut *mut c_char = ptr::null_mut();
pub const MPI_ARGVS_NULL: *mut *mut *mut c_char = ptr::null_mut();
pub const MPI_ERRCODES_IGNORE: *mut c_int = ptr::null_mut();
pub const MPI_STATUS_IGNORE: *mut MPI_Status = ptr::null_mut();
pub const MPI_STATUSES_IGNORE: *mut MPI_Status = ptr::null_mut();
pub const MPI_UNWEIGHTED: *mut c_int = 10 as *mut c_int;
pub const MPI_WEIGHTS_EMPTY: *mut c_int = 11 as *mut c_int;
pub const MPI_DISPLACEMENT_CURRENT: MPI_Offset = -1;

// ---------------------------------------------------------------------------------------------
// Integer constants
// ---------------------------------------------------------------------------------------------

// Versions
pub const MPI_VERSION: c_int = 5;
pub const MPI_SUBVERSION: c_int = 0;
pub const MPI_ABI_VERSION: c_int = 1;
pub const MPI_ABI_SUBVERSION: c_int = 0;

// Maximum string sizes and the buffered-send overhead
pub const MPI_MAX_DATAREP_STRING: c_int = 128;
pub const MPI_MAX_ERROR_STRING: c_int = 512;
pub const MPI_MAX_INFO_KEY: c_int = 256;
pub const MPI_MAX_INFO_VAL: c_int = 1024;
pub const MPI_MAX_LIBRARY_VERSION_STRING: c_int = 8192;
pub const MPI_MAX_OBJECT_NAME: c_int = 128;
pub const MPI_MAX_PORT_NAME: c_int = 1024;
pub const MPI_MAX_PROCESSOR_NAME: c_int = 256;
pub const MPI_MAX_STRINGTAG_LEN: c_int = 1024;
pub const MPI_MAX_PSET_NAME_LEN: c_int = 1024;
pub const MPI_BSEND_OVERHEAD: c_int = 512;

// Layout of a Fortran status (`MPI_Fint[MPI_F_STATUS_SIZE]`)
pub const MPI_F_STATUS_SIZE: c_int = 8;
pub const MPI_F_SOURCE: c_int = 0;
pub const MPI_F_TAG: c_int = 1;
pub const MPI_F_ERROR: c_int = 2;

// Error classes
pub const MPI_SUCCESS: c_int = 0;
pub const MPI_ERR_BUFFER: c_int = 1;
pub const MPI_ERR_COUNT: c_int = 2;
pub const MPI_ERR_TYPE: c_int = 3;
pub const MPI_ERR_TAG: c_int = 4;
pub const MPI_ERR_COMM: c_int = 5;
pub const MPI_ERR_RANK: c_int = 6;
pub const MPI_ERR_REQUEST: c_int = 7;
pub const MPI_ERR_ROOT: c_int = 8;
pub const MPI_ERR_GROUP: c_int = 9;
pub const MPI_ERR_OP: c_int = 10;
pub const MPI_ERR_TOPOLOGY: c_int = 11;
pub const MPI_ERR_DIMS: c_int = 12;
pub const MPI_ERR_ARG: c_int = 13;
pub const MPI_ERR_UNKNOWN: c_int = 14;
pub const MPI_ERR_TRUNCATE: c_int = 15;
pub const MPI_ERR_OTHER: c_int = 16;
pub const MPI_ERR_INTERN: c_int = 17;
pub const MPI_ERR_PENDING: c_int = 18;
pub const MPI_ERR_IN_STATUS: c_int = 19;
pub const MPI_ERR_ACCESS: c_int = 20;
pub const MPI_ERR_AMODE: c_int = 21;
pub const MPI_ERR_ASSERT: c_int = 22;
pub const MPI_ERR_BAD_FILE: c_int = 23;
pub const MPI_ERR_BASE: c_int = 24;
pub const MPI_ERR_CONVERSION: c_int = 25;
pub const MPI_ERR_DISP: c_int = 26;
pub const MPI_ERR_DUP_DATAREP: c_int = 27;
pub const MPI_ERR_FILE_EXISTS: c_int = 28;
pub const MPI_ERR_FILE_IN_USE: c_int = 29;
pub const MPI_ERR_FILE: c_int = 30;
pub const MPI_ERR_INFO_KEY: c_int = 31;
pub const MPI_ERR_INFO_NOKEY: c_int = 32;
pub const MPI_ERR_INFO_VALUE: c_int = 33;
pub const MPI_ERR_INFO: c_int = 34;
pub const MPI_ERR_IO: c_int = 35;
pub const MPI_ERR_KEYVAL: c_int = 36;
pub const MPI_ERR_LOCKTYPE: c_int = 37;
pub const MPI_ERR_NAME: c_int = 38;
pub const MPI_ERR_NO_MEM: c_int = 39;
pub const MPI_ERR_NOT_SAME: c_int = 40;
pub const MPI_ERR_NO_SPACE: c_int = 41;
pub const MPI_ERR_NO_SUCH_FILE: c_int = 42;
pub const MPI_ERR_PORT: c_int = 43;
pub const MPI_ERR_QUOTA: c_int = 44;
pub const MPI_ERR_READ_ONLY: c_int = 45;
pub const MPI_ERR_RMA_ATTACH: c_int = 46;
pub const MPI_ERR_RMA_CONFLICT: c_int = 47;
pub const MPI_ERR_RMA_RANGE: c_int = 48;
pub const MPI_ERR_RMA_SHARED: c_int = 49;
pub const MPI_ERR_RMA_SYNC: c_int = 50;
pub const MPI_ERR_SERVICE: c_int = 51;
pub const MPI_ERR_SIZE: c_int = 52;
pub const MPI_ERR_SPAWN: c_int = 53;
pub const MPI_ERR_UNSUPPORTED_DATAREP: c_int = 54;
pub const MPI_ERR_UNSUPPORTED_OPERATION: c_int = 55;
pub const MPI_ERR_WIN: c_int = 56;
pub const MPI_ERR_RMA_FLAVOR: c_int = 57;
pub const MPI_ERR_PROC_ABORTED: c_int = 58;
pub const MPI_ERR_VALUE_TOO_LARGE: c_int = 59;
pub const MPI_ERR_SESSION: c_int = 60;
pub const MPI_ERR_ERRHANDLER: c_int = 61;
pub const MPI_ERR_ABI: c_int = 62;

// Error classes of the tool interface
pub const MPI_T_ERR_CANNOT_INIT: c_int = 1001;
pub const MPI_T_ERR_NOT_ACCESSIBLE: c_int = 1002;
pub const MPI_T_ERR_NOT_INITIALIZED: c_int = 1003;
pub const MPI_T_ERR_NOT_SUPPORTED: c_int = 1004;
pub const MPI_T_ERR_MEMORY: c_int = 1005;
pub const MPI_T_ERR_INVALID: c_int = 1006;
pub const MPI_T_ERR_INVALID_INDEX: c_int = 1007;
pub const MPI_T_ERR_INVALID_ITEM: c_int = 1008;
pub const MPI_T_ERR_INVALID_SESSION: c_int = 1009;
pub const MPI_T_ERR_INVALID_HANDLE: c_int = 1010;
pub const MPI_T_ERR_INVALID_NAME: c_int = 1011;
pub const MPI_T_ERR_OUT_OF_HANDLES: c_int = 1012;
pub const MPI_T_ERR_OUT_OF_SESSIONS: c_int = 1013;
pub const MPI_T_ERR_CVAR_SET_NOT_NOW: c_int = 1014;
pub const MPI_T_ERR_CVAR_SET_NEVER: c_int = 1015;
pub const MPI_T_ERR_PVAR_NO_WRITE: c_int = 1016;
pub const MPI_T_ERR_PVAR_NO_STARTSTOP: c_int = 1017;
pub const MPI_T_ERR_PVAR_NO_ATOMIC: c_int = 1018;

// Largest error code
pub const MPI_ERR_LASTCODE: c_int = 16383;

// Mode bits: file access modes and RMA assertions
pub const MPI_MODE_APPEND: c_int = 1;
pub const MPI_MODE_CREATE: c_int = 2;
pub const MPI_MODE_DELETE_ON_CLOSE: c_int = 4;
pub const MPI_MODE_EXCL: c_int = 8;
pub const MPI_MODE_RDONLY: c_int = 16;
pub const MPI_MODE_RDWR: c_int = 32;
pub const MPI_MODE_SEQUENTIAL: c_int = 64;
pub const MPI_MODE_UNIQUE_OPEN: c_int = 128;
pub const MPI_MODE_WRONLY: c_int = 256;
pub const MPI_MODE_NOCHECK: c_int = 1024;
pub const MPI_MODE_NOPRECEDE: c_int = 2048;
pub const MPI_MODE_NOPUT: c_int = 4096;
pub const MPI_MODE_NOSTORE: c_int = 8192;
pub const MPI_MODE_NOSUCCEED: c_int = 16384;

// Wildcards and sentinels
pub const MPI_ANY_SOURCE: c_int = -1;
pub const MPI_ANY_TAG: c_int = -2;
pub const MPI_PROC_NULL: c_int = -3;
pub const MPI_ROOT: c_int = -4;
pub const MPI_UNDEFINED: c_int = -32766;

// Thread support levels (monotonic)
pub const MPI_THREAD_SINGLE: c_int = 0;
pub const MPI_THREAD_FUNNELED: c_int = 1024;
pub const MPI_THREAD_SERIALIZED: c_int = 2048;
pub const MPI_THREAD_MULTIPLE: c_int = 4096;

// Array order and distribution (darray/subarray)
pub const MPI_ORDER_C: c_int = 12;
pub const MPI_ORDER_FORTRAN: c_int = 15;
pub const MPI_DISTRIBUTE_NONE: c_int = 16;
pub const MPI_DISTRIBUTE_BLOCK: c_int = 17;
pub const MPI_DISTRIBUTE_CYCLIC: c_int = 18;
pub const MPI_DISTRIBUTE_DFLT_DARG: c_int = 19;

// Datatype decoding combiners
pub const MPI_COMBINER_NAMED: c_int = 101;
pub const MPI_COMBINER_DUP: c_int = 102;
pub const MPI_COMBINER_CONTIGUOUS: c_int = 103;
pub const MPI_COMBINER_VECTOR: c_int = 104;
pub const MPI_COMBINER_HVECTOR: c_int = 105;
pub const MPI_COMBINER_INDEXED: c_int = 106;
pub const MPI_COMBINER_HINDEXED: c_int = 107;
pub const MPI_COMBINER_INDEXED_BLOCK: c_int = 108;
pub const MPI_COMBINER_HINDEXED_BLOCK: c_int = 109;
pub const MPI_COMBINER_STRUCT: c_int = 110;
pub const MPI_COMBINER_SUBARRAY: c_int = 111;
pub const MPI_COMBINER_DARRAY: c_int = 112;
pub const MPI_COMBINER_F90_REAL: c_int = 113;
pub const MPI_COMBINER_F90_COMPLEX: c_int = 114;
pub const MPI_COMBINER_F90_INTEGER: c_int = 115;
pub const MPI_COMBINER_RESIZED: c_int = 116;
pub const MPI_COMBINER_VALUE_INDEX: c_int = 117;

// Fortran type classes (`MPI_Type_match_size`)
pub const MPIX_TYPECLASS_LOGICAL: c_int = 191;
pub const MPI_TYPECLASS_INTEGER: c_int = 192;
pub const MPI_TYPECLASS_REAL: c_int = 193;
pub const MPI_TYPECLASS_COMPLEX: c_int = 194;

// Comparison results
pub const MPI_IDENT: c_int = 201;
pub const MPI_CONGRUENT: c_int = 202;
pub const MPI_SIMILAR: c_int = 203;
pub const MPI_UNEQUAL: c_int = 204;

// Topology kinds
pub const MPI_CART: c_int = 211;
pub const MPI_GRAPH: c_int = 212;
pub const MPI_DIST_GRAPH: c_int = 213;

// Communicator split types
pub const MPI_COMM_TYPE_SHARED: c_int = 221;
pub const MPI_COMM_TYPE_HW_UNGUIDED: c_int = 222;
pub const MPI_COMM_TYPE_HW_GUIDED: c_int = 223;
pub const MPI_COMM_TYPE_RESOURCE_GUIDED: c_int = 224;

// RMA lock types, window flavors and memory models
pub const MPI_LOCK_EXCLUSIVE: c_int = 301;
pub const MPI_LOCK_SHARED: c_int = 302;
pub const MPI_WIN_FLAVOR_CREATE: c_int = 311;
pub const MPI_WIN_FLAVOR_ALLOCATE: c_int = 312;
pub const MPI_WIN_FLAVOR_DYNAMIC: c_int = 313;
pub const MPI_WIN_FLAVOR_SHARED: c_int = 314;
pub const MPI_WIN_UNIFIED: c_int = 321;
pub const MPI_WIN_SEPARATE: c_int = 322;

// File positioning
pub const MPI_SEEK_CUR: c_int = 401;
pub const MPI_SEEK_END: c_int = 402;
pub const MPI_SEEK_SET: c_int = 403;

// Predefined attribute keys
pub const MPI_KEYVAL_INVALID: c_int = 0;
pub const MPI_TAG_UB: c_int = 501;
pub const MPI_IO: c_int = 502;
pub const MPI_HOST: c_int = 503;
pub const MPI_WTIME_IS_GLOBAL: c_int = 504;
pub const MPI_APPNUM: c_int = 505;
pub const MPI_LASTUSEDCODE: c_int = 506;
pub const MPI_UNIVERSE_SIZE: c_int = 507;
pub const MPI_WIN_BASE: c_int = 601;
pub const MPI_WIN_DISP_UNIT: c_int = 602;
pub const MPI_WIN_SIZE: c_int = 603;
pub const MPI_WIN_CREATE_FLAVOR: c_int = 604;
pub const MPI_WIN_MODEL: c_int = 605;

// Tool interface: callback safety levels (`MPI_T_cb_safety`)
pub const MPI_T_CB_REQUIRE_NONE: c_int = 0;
pub const MPI_T_CB_REQUIRE_MPI_RESTRICTED: c_int = 3;
pub const MPI_T_CB_REQUIRE_THREAD_SAFE: c_int = 15;
pub const MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE: c_int = 63;

// Tool interface: event source ordering (`MPI_T_source_order`)
pub const MPI_T_SOURCE_ORDERED: c_int = 1;
pub const MPI_T_SOURCE_UNORDERED: c_int = 2;

// Tool interface: verbosity levels
pub const MPI_T_VERBOSITY_USER_BASIC: c_int = 9;
pub const MPI_T_VERBOSITY_USER_DETAIL: c_int = 10;
pub const MPI_T_VERBOSITY_USER_ALL: c_int = 12;
pub const MPI_T_VERBOSITY_TUNER_BASIC: c_int = 17;
pub const MPI_T_VERBOSITY_TUNER_DETAIL: c_int = 18;
pub const MPI_T_VERBOSITY_TUNER_ALL: c_int = 20;
pub const MPI_T_VERBOSITY_MPIDEV_BASIC: c_int = 33;
pub const MPI_T_VERBOSITY_MPIDEV_DETAIL: c_int = 34;
pub const MPI_T_VERBOSITY_MPIDEV_ALL: c_int = 36;

// Tool interface: object bindings
pub const MPI_T_BIND_NO_OBJECT: c_int = 1;
pub const MPI_T_BIND_MPI_COMM: c_int = 2;
pub const MPI_T_BIND_MPI_DATATYPE: c_int = 3;
pub const MPI_T_BIND_MPI_ERRHANDLER: c_int = 4;
pub const MPI_T_BIND_MPI_FILE: c_int = 5;
pub const MPI_T_BIND_MPI_GROUP: c_int = 6;
pub const MPI_T_BIND_MPI_OP: c_int = 7;
pub const MPI_T_BIND_MPI_REQUEST: c_int = 8;
pub const MPI_T_BIND_MPI_WIN: c_int = 9;
pub const MPI_T_BIND_MPI_MESSAGE: c_int = 10;
pub const MPI_T_BIND_MPI_INFO: c_int = 11;
pub const MPI_T_BIND_MPI_SESSION: c_int = 12;

// Tool interface: control variable scopes
pub const MPI_T_SCOPE_CONSTANT: c_int = 1;
pub const MPI_T_SCOPE_READONLY: c_int = 2;
pub const MPI_T_SCOPE_LOCAL: c_int = 3;
pub const MPI_T_SCOPE_GROUP: c_int = 4;
pub const MPI_T_SCOPE_GROUP_EQ: c_int = 5;
pub const MPI_T_SCOPE_ALL: c_int = 6;
pub const MPI_T_SCOPE_ALL_EQ: c_int = 7;

// Tool interface: performance variable classes
pub const MPI_T_PVAR_CLASS_STATE: c_int = 1;
pub const MPI_T_PVAR_CLASS_LEVEL: c_int = 2;
pub const MPI_T_PVAR_CLASS_SIZE: c_int = 3;
pub const MPI_T_PVAR_CLASS_PERCENTAGE: c_int = 4;
pub const MPI_T_PVAR_CLASS_HIGHWATERMARK: c_int = 5;
pub const MPI_T_PVAR_CLASS_LOWWATERMARK: c_int = 6;
pub const MPI_T_PVAR_CLASS_COUNTER: c_int = 7;
pub const MPI_T_PVAR_CLASS_AGGREGATE: c_int = 8;
pub const MPI_T_PVAR_CLASS_TIMER: c_int = 9;
pub const MPI_T_PVAR_CLASS_GENERIC: c_int = 10;

// ---------------------------------------------------------------------------------------------
// Callback types. In C each is a function type (`typedef void MPI_User_function(...);`) taken as
// `MPI_User_function *user_fn`; in Rust each is the nullable function pointer a parameter of that
// type receives. The build checks them against `abi/mpi-abi-signatures.txt`.
// ---------------------------------------------------------------------------------------------

/// A user-defined reduction (`MPI_Op_create`).
pub type MPI_User_function = Option<
    unsafe extern "C" fn(
        invec: *mut c_void,
        inoutvec: *mut c_void,
        len: *mut c_int,
        datatype: *mut MPI_Datatype,
    ),
>;
/// A user-defined reduction with a large count (`MPI_Op_create_c`).
pub type MPI_User_function_c = Option<
    unsafe extern "C" fn(
        invec: *mut c_void,
        inoutvec: *mut c_void,
        len: *mut MPI_Count,
        datatype: *mut MPI_Datatype,
    ),
>;
/// Copies a communicator attribute (`MPI_Comm_create_keyval`).
pub type MPI_Comm_copy_attr_function = Option<
    unsafe extern "C" fn(
        oldcomm: MPI_Comm,
        comm_keyval: c_int,
        extra_state: *mut c_void,
        attribute_val_in: *mut c_void,
        attribute_val_out: *mut c_void,
        flag: *mut c_int,
    ) -> c_int,
>;
/// Deletes a communicator attribute (`MPI_Comm_create_keyval`).
pub type MPI_Comm_delete_attr_function = Option<
    unsafe extern "C" fn(
        comm: MPI_Comm,
        comm_keyval: c_int,
        attribute_val: *mut c_void,
        extra_state: *mut c_void,
    ) -> c_int,
>;
/// Copies a datatype attribute (`MPI_Type_create_keyval`).
pub type MPI_Type_copy_attr_function = Option<
    unsafe extern "C" fn(
        oldtype: MPI_Datatype,
        type_keyval: c_int,
        extra_state: *mut c_void,
        attribute_val_in: *mut c_void,
        attribute_val_out: *mut c_void,
        flag: *mut c_int,
    ) -> c_int,
>;
/// Deletes a datatype attribute (`MPI_Type_create_keyval`).
pub type MPI_Type_delete_attr_function = Option<
    unsafe extern "C" fn(
        datatype: MPI_Datatype,
        type_keyval: c_int,
        attribute_val: *mut c_void,
        extra_state: *mut c_void,
    ) -> c_int,
>;
/// Copies a window attribute (`MPI_Win_create_keyval`).
pub type MPI_Win_copy_attr_function = Option<
    unsafe extern "C" fn(
        oldwin: MPI_Win,
        win_keyval: c_int,
        extra_state: *mut c_void,
        attribute_val_in: *mut c_void,
        attribute_val_out: *mut c_void,
        flag: *mut c_int,
    ) -> c_int,
>;
/// Deletes a window attribute (`MPI_Win_create_keyval`).
pub type MPI_Win_delete_attr_function = Option<
    unsafe extern "C" fn(
        win: MPI_Win,
        win_keyval: c_int,
        attribute_val: *mut c_void,
        extra_state: *mut c_void,
    ) -> c_int,
>;
/// A communicator error handler. C-variadic: call it with exactly the two fixed arguments.
pub type MPI_Comm_errhandler_function =
    Option<unsafe extern "C" fn(comm: *mut MPI_Comm, error_code: *mut c_int, ...)>;
/// A window error handler. C-variadic: call it with exactly the two fixed arguments.
pub type MPI_Win_errhandler_function =
    Option<unsafe extern "C" fn(win: *mut MPI_Win, error_code: *mut c_int, ...)>;
/// A file error handler. C-variadic: call it with exactly the two fixed arguments.
pub type MPI_File_errhandler_function =
    Option<unsafe extern "C" fn(file: *mut MPI_File, error_code: *mut c_int, ...)>;
/// A session error handler. C-variadic: call it with exactly the two fixed arguments.
pub type MPI_Session_errhandler_function =
    Option<unsafe extern "C" fn(session: *mut MPI_Session, error_code: *mut c_int, ...)>;
/// Fills the status of a generalized request (`MPI_Grequest_start`).
pub type MPI_Grequest_query_function =
    Option<unsafe extern "C" fn(extra_state: *mut c_void, status: *mut MPI_Status) -> c_int>;
/// Frees the state of a generalized request (`MPI_Grequest_start`).
pub type MPI_Grequest_free_function =
    Option<unsafe extern "C" fn(extra_state: *mut c_void) -> c_int>;
/// Cancels a generalized request (`MPI_Grequest_start`).
pub type MPI_Grequest_cancel_function =
    Option<unsafe extern "C" fn(extra_state: *mut c_void, complete: c_int) -> c_int>;
/// Extent of a datatype in a user data representation (`MPI_Register_datarep`).
pub type MPI_Datarep_extent_function = Option<
    unsafe extern "C" fn(
        datatype: MPI_Datatype,
        extent: *mut MPI_Aint,
        extra_state: *mut c_void,
    ) -> c_int,
>;
/// Converts between a user data representation and the native one (`MPI_Register_datarep`).
pub type MPI_Datarep_conversion_function = Option<
    unsafe extern "C" fn(
        userbuf: *mut c_void,
        datatype: MPI_Datatype,
        count: c_int,
        filebuf: *mut c_void,
        position: MPI_Offset,
        extra_state: *mut c_void,
    ) -> c_int,
>;
/// Converts with a large count (`MPI_Register_datarep_c`).
pub type MPI_Datarep_conversion_function_c = Option<
    unsafe extern "C" fn(
        userbuf: *mut c_void,
        datatype: MPI_Datatype,
        count: MPI_Count,
        filebuf: *mut c_void,
        position: MPI_Offset,
        extra_state: *mut c_void,
    ) -> c_int,
>;
/// Copies a communicator attribute (deprecated `MPI_Keyval_create`).
pub type MPI_Copy_function = Option<
    unsafe extern "C" fn(
        oldcomm: MPI_Comm,
        keyval: c_int,
        extra_state: *mut c_void,
        attribute_val_in: *mut c_void,
        attribute_val_out: *mut c_void,
        flag: *mut c_int,
    ) -> c_int,
>;
/// Deletes a communicator attribute (deprecated `MPI_Keyval_create`).
pub type MPI_Delete_function = Option<
    unsafe extern "C" fn(
        comm: MPI_Comm,
        keyval: c_int,
        attribute_val: *mut c_void,
        extra_state: *mut c_void,
    ) -> c_int,
>;
/// Handles a tool-interface event (`MPI_T_event_register_callback`).
pub type MPI_T_event_cb_function = Option<
    unsafe extern "C" fn(
        event_instance: MPI_T_event_instance,
        event_registration: MPI_T_event_registration,
        cb_safety: MPI_T_cb_safety,
        user_data: *mut c_void,
    ),
>;
/// Runs when an event registration is freed (`MPI_T_event_handle_free`).
pub type MPI_T_event_free_cb_function = Option<
    unsafe extern "C" fn(
        event_registration: MPI_T_event_registration,
        cb_safety: MPI_T_cb_safety,
        user_data: *mut c_void,
    ),
>;
/// Reports dropped events (`MPI_T_event_set_dropped_handler`).
pub type MPI_T_event_dropped_cb_function = Option<
    unsafe extern "C" fn(
        count: MPI_Count,
        event_registration: MPI_T_event_registration,
        source_index: c_int,
        cb_safety: MPI_T_cb_safety,
        user_data: *mut c_void,
    ),
>;
// ---------------------------------------------------------------------------------------------
// Predefined callbacks. In C: `#define MPI_COMM_DUP_FN ((MPI_Comm_copy_attr_function *)0x1)`.
// A Rust function pointer cannot hold such an address in a constant, so these are the addresses:
// compare with `f.map_or(0, |f| f as usize)`. The `*_NULL_*` ones are `None`.
// ---------------------------------------------------------------------------------------------

pub const MPI_NULL_COPY_FN: usize = 0x0;
pub const MPI_DUP_FN: usize = 0x1;
pub const MPI_NULL_DELETE_FN: usize = 0x0;
pub const MPI_COMM_NULL_COPY_FN: usize = 0x0;
pub const MPI_COMM_DUP_FN: usize = 0x1;
pub const MPI_COMM_NULL_DELETE_FN: usize = 0x0;
pub const MPI_TYPE_NULL_COPY_FN: usize = 0x0;
pub const MPI_TYPE_DUP_FN: usize = 0x1;
pub const MPI_TYPE_NULL_DELETE_FN: usize = 0x0;
pub const MPI_WIN_NULL_COPY_FN: usize = 0x0;
pub const MPI_WIN_DUP_FN: usize = 0x1;
pub const MPI_WIN_NULL_DELETE_FN: usize = 0x0;
pub const MPI_CONVERSION_FN_NULL: usize = 0x0;
pub const MPI_CONVERSION_FN_NULL_C: usize = 0x0;
/// Paths of what the build generated, for the tests of the workspace.
///
/// cbindgen:ignore
pub mod build {
    /// `$OUT_DIR` of this crate's build: `mpi.h`, `unsupported.txt`, `generated.rs`.
    pub const OUT_DIR: &str = env!("OUT_DIR");
}

/// Compile-time checks of the items above against the ABI tables (generated by the build).
///
/// cbindgen:ignore
mod check {
    #![allow(clippy::type_complexity)]
    include!(concat!(env!("OUT_DIR"), "/abi_check.rs"));
}
