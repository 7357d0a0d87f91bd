//! Error codes, classes and strings, and the error handlers that report them.
//!
//! - [`class_code`] is the one mapping from the core's [`ErrorClass`] to `MPI_ERR_*`.
//! - Error codes equal error classes for every predefined error. `MPI_Add_error_class` and
//!   `MPI_Add_error_code` hand out new values above `MPI_ERR_LASTCODE`; `MPI_LASTUSEDCODE`
//!   (an attribute of every communicator) is the largest value handed out.
//! - [`raise`] sends an error through the handler of the object involved: the communicator, or
//!   MPI_COMM_SELF when the call has none or its communicator is invalid (the MPI-4 rule).
//!   `MPI_ERRORS_ARE_FATAL` (the default everywhere) and `MPI_ERRORS_ABORT` print one line naming
//!   the call, the reason and the class, then end the job; `MPI_ERRORS_RETURN` returns the code;
//!   a user handler is called with `(MPI_Comm *, int *)` and the code is returned after it.
//!
//! No lock is held while a user handler runs: it may call MPI itself.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

use madmpi::{Error, ErrorClass};
use parking_lot::{const_mutex, Mutex};

use crate::abi::*;
use crate::handles::{self, Errh, ErrhFn};

/// The `MPI_ERR_*` class of an engine error class.
pub fn class_code(c: ErrorClass) -> c_int {
    match c {
        ErrorClass::Buffer | ErrorClass::BufferSpace => MPI_ERR_BUFFER,
        ErrorClass::Count => MPI_ERR_COUNT,
        ErrorClass::Type => MPI_ERR_TYPE,
        ErrorClass::Tag => MPI_ERR_TAG,
        ErrorClass::Comm => MPI_ERR_COMM,
        ErrorClass::Rank => MPI_ERR_RANK,
        ErrorClass::Request => MPI_ERR_REQUEST,
        ErrorClass::Root => MPI_ERR_ROOT,
        ErrorClass::Group => MPI_ERR_GROUP,
        ErrorClass::Op => MPI_ERR_OP,
        ErrorClass::Arg => MPI_ERR_ARG,
        ErrorClass::Truncate => MPI_ERR_TRUNCATE,
        ErrorClass::Other => MPI_ERR_OTHER,
        ErrorClass::Intern => MPI_ERR_INTERN,
        ErrorClass::Pending => MPI_ERR_PENDING,
        ErrorClass::NoMem => MPI_ERR_NO_MEM,
        ErrorClass::ProcAborted => MPI_ERR_PROC_ABORTED,
        ErrorClass::Unsupported => MPI_ERR_UNSUPPORTED_OPERATION,
        ErrorClass::Keyval => MPI_ERR_KEYVAL,
        ErrorClass::Info => MPI_ERR_INFO,
        ErrorClass::Topology => MPI_ERR_TOPOLOGY,
        ErrorClass::Dims => MPI_ERR_DIMS,
        ErrorClass::ValueTooLarge => MPI_ERR_VALUE_TOO_LARGE,
        ErrorClass::UnsupportedDatarep => MPI_ERR_UNSUPPORTED_DATAREP,
        ErrorClass::Conversion => MPI_ERR_CONVERSION,
        ErrorClass::Win => MPI_ERR_WIN,
        ErrorClass::RmaRange => MPI_ERR_RMA_RANGE,
        ErrorClass::RmaSync => MPI_ERR_RMA_SYNC,
        ErrorClass::RmaAttach => MPI_ERR_RMA_ATTACH,
        ErrorClass::RmaFlavor => MPI_ERR_RMA_FLAVOR,
        ErrorClass::RmaShared => MPI_ERR_RMA_SHARED,
        ErrorClass::Locktype => MPI_ERR_LOCKTYPE,
        ErrorClass::Assert => MPI_ERR_ASSERT,
        ErrorClass::Disp => MPI_ERR_DISP,
        ErrorClass::Size => MPI_ERR_SIZE,
        ErrorClass::Name => MPI_ERR_NAME,
        ErrorClass::Service => MPI_ERR_SERVICE,
        ErrorClass::Port => MPI_ERR_PORT,
        ErrorClass::Session => MPI_ERR_SESSION,
        ErrorClass::Spawn => MPI_ERR_SPAWN,
    }
}

/// The standard's name and description of every predefined error class.
const PREDEFINED: &[(c_int, &str, &str)] = &[
    (MPI_SUCCESS, "MPI_SUCCESS", "no error"),
    (MPI_ERR_BUFFER, "MPI_ERR_BUFFER", "invalid buffer pointer"),
    (MPI_ERR_COUNT, "MPI_ERR_COUNT", "invalid count argument"),
    (MPI_ERR_TYPE, "MPI_ERR_TYPE", "invalid datatype argument"),
    (MPI_ERR_TAG, "MPI_ERR_TAG", "invalid tag argument"),
    (MPI_ERR_COMM, "MPI_ERR_COMM", "invalid communicator"),
    (MPI_ERR_RANK, "MPI_ERR_RANK", "invalid rank"),
    (MPI_ERR_REQUEST, "MPI_ERR_REQUEST", "invalid request (handle)"),
    (MPI_ERR_ROOT, "MPI_ERR_ROOT", "invalid root"),
    (MPI_ERR_GROUP, "MPI_ERR_GROUP", "invalid group"),
    (MPI_ERR_OP, "MPI_ERR_OP", "invalid operation"),
    (MPI_ERR_TOPOLOGY, "MPI_ERR_TOPOLOGY", "invalid topology"),
    (MPI_ERR_DIMS, "MPI_ERR_DIMS", "invalid dimension argument"),
    (MPI_ERR_ARG, "MPI_ERR_ARG", "invalid argument of some other kind"),
    (MPI_ERR_UNKNOWN, "MPI_ERR_UNKNOWN", "unknown error"),
    (MPI_ERR_TRUNCATE, "MPI_ERR_TRUNCATE", "message truncated on receive"),
    (MPI_ERR_OTHER, "MPI_ERR_OTHER", "known error not in this list"),
    (MPI_ERR_INTERN, "MPI_ERR_INTERN", "internal MPI (implementation) error"),
    (MPI_ERR_PENDING, "MPI_ERR_PENDING", "pending request"),
    (MPI_ERR_IN_STATUS, "MPI_ERR_IN_STATUS", "error code is in status"),
    (MPI_ERR_ACCESS, "MPI_ERR_ACCESS", "permission denied"),
    (MPI_ERR_AMODE, "MPI_ERR_AMODE", "error related to the amode passed to MPI_FILE_OPEN"),
    (MPI_ERR_ASSERT, "MPI_ERR_ASSERT", "invalid assertion argument"),
    (MPI_ERR_BAD_FILE, "MPI_ERR_BAD_FILE", "invalid file name (e.g., path name too long)"),
    (MPI_ERR_BASE, "MPI_ERR_BASE", "invalid base argument"),
    (
        MPI_ERR_CONVERSION,
        "MPI_ERR_CONVERSION",
        "an error occurred in a user supplied data conversion function",
    ),
    (MPI_ERR_DISP, "MPI_ERR_DISP", "invalid displacement argument"),
    (
        MPI_ERR_DUP_DATAREP,
        "MPI_ERR_DUP_DATAREP",
        "conversion functions could not be registered because a data representation identifier \
         that was already defined was passed to MPI_REGISTER_DATAREP",
    ),
    (MPI_ERR_FILE_EXISTS, "MPI_ERR_FILE_EXISTS", "file exists"),
    (MPI_ERR_FILE_IN_USE, "MPI_ERR_FILE_IN_USE", "file operation could not be completed, as the file is currently open by some process"),
    (MPI_ERR_FILE, "MPI_ERR_FILE", "invalid file handle"),
    (MPI_ERR_INFO_KEY, "MPI_ERR_INFO_KEY", "key longer than MPI_MAX_INFO_KEY"),
    (MPI_ERR_INFO_NOKEY, "MPI_ERR_INFO_NOKEY", "invalid key passed to MPI_INFO_DELETE"),
    (MPI_ERR_INFO_VALUE, "MPI_ERR_INFO_VALUE", "value longer than MPI_MAX_INFO_VAL"),
    (MPI_ERR_INFO, "MPI_ERR_INFO", "invalid info argument"),
    (MPI_ERR_IO, "MPI_ERR_IO", "other I/O error"),
    (MPI_ERR_KEYVAL, "MPI_ERR_KEYVAL", "invalid keyval has been passed"),
    (MPI_ERR_LOCKTYPE, "MPI_ERR_LOCKTYPE", "invalid locktype argument"),
    (MPI_ERR_NAME, "MPI_ERR_NAME", "invalid service name passed to MPI_LOOKUP_NAME"),
    (MPI_ERR_NO_MEM, "MPI_ERR_NO_MEM", "MPI_ALLOC_MEM failed because memory is exhausted"),
    (MPI_ERR_NOT_SAME, "MPI_ERR_NOT_SAME", "collective argument not identical on all processes, or collective routines called in a different order by different processes"),
    (MPI_ERR_NO_SPACE, "MPI_ERR_NO_SPACE", "not enough space"),
    (MPI_ERR_NO_SUCH_FILE, "MPI_ERR_NO_SUCH_FILE", "file does not exist"),
    (MPI_ERR_PORT, "MPI_ERR_PORT", "invalid port name passed to MPI_COMM_CONNECT"),
    (MPI_ERR_QUOTA, "MPI_ERR_QUOTA", "quota exceeded"),
    (MPI_ERR_READ_ONLY, "MPI_ERR_READ_ONLY", "read-only file or file system"),
    (MPI_ERR_RMA_ATTACH, "MPI_ERR_RMA_ATTACH", "memory cannot be attached (e.g., because of resource exhaustion)"),
    (MPI_ERR_RMA_CONFLICT, "MPI_ERR_RMA_CONFLICT", "conflicting accesses to window"),
    (MPI_ERR_RMA_RANGE, "MPI_ERR_RMA_RANGE", "target memory is not part of the window (in the case of a window created with MPI_WIN_CREATE_DYNAMIC, target memory is not attached)"),
    (MPI_ERR_RMA_SHARED, "MPI_ERR_RMA_SHARED", "memory cannot be shared (e.g., some process in the group of the specified communicator cannot expose shared memory)"),
    (MPI_ERR_RMA_SYNC, "MPI_ERR_RMA_SYNC", "wrong synchronization of RMA calls"),
    (MPI_ERR_SERVICE, "MPI_ERR_SERVICE", "invalid service name passed to MPI_UNPUBLISH_NAME"),
    (MPI_ERR_SIZE, "MPI_ERR_SIZE", "invalid size argument"),
    (MPI_ERR_SPAWN, "MPI_ERR_SPAWN", "error in spawning processes"),
    (MPI_ERR_UNSUPPORTED_DATAREP, "MPI_ERR_UNSUPPORTED_DATAREP", "unsupported datarep passed to MPI_FILE_SET_VIEW"),
    (MPI_ERR_UNSUPPORTED_OPERATION, "MPI_ERR_UNSUPPORTED_OPERATION", "unsupported operation"),
    (MPI_ERR_WIN, "MPI_ERR_WIN", "invalid window argument"),
    (MPI_ERR_RMA_FLAVOR, "MPI_ERR_RMA_FLAVOR", "passed window has the wrong flavor for the called function"),
    (MPI_ERR_PROC_ABORTED, "MPI_ERR_PROC_ABORTED", "operation failed because a peer process has aborted"),
    (MPI_ERR_VALUE_TOO_LARGE, "MPI_ERR_VALUE_TOO_LARGE", "value is too large to store"),
    (MPI_ERR_SESSION, "MPI_ERR_SESSION", "invalid session argument"),
    (MPI_ERR_ERRHANDLER, "MPI_ERR_ERRHANDLER", "invalid error handler"),
    (MPI_ERR_ABI, "MPI_ERR_ABI", "the ABI of the library does not match the ABI the program was compiled for"),
    (MPI_T_ERR_CANNOT_INIT, "MPI_T_ERR_CANNOT_INIT", "interface not in the state to be initialized"),
    (MPI_T_ERR_NOT_ACCESSIBLE, "MPI_T_ERR_NOT_ACCESSIBLE", "requested functionality not accessible"),
    (MPI_T_ERR_NOT_INITIALIZED, "MPI_T_ERR_NOT_INITIALIZED", "the MPI tool information interface is not initialized"),
    (MPI_T_ERR_NOT_SUPPORTED, "MPI_T_ERR_NOT_SUPPORTED", "requested functionality not supported"),
    (MPI_T_ERR_MEMORY, "MPI_T_ERR_MEMORY", "out of memory"),
    (MPI_T_ERR_INVALID, "MPI_T_ERR_INVALID", "invalid use of the interface or bad parameter value(s)"),
    (MPI_T_ERR_INVALID_INDEX, "MPI_T_ERR_INVALID_INDEX", "the index is invalid or has been deleted"),
    (MPI_T_ERR_INVALID_ITEM, "MPI_T_ERR_INVALID_ITEM", "item index queried is out of range"),
    (MPI_T_ERR_INVALID_SESSION, "MPI_T_ERR_INVALID_SESSION", "session argument is not a valid session"),
    (MPI_T_ERR_INVALID_HANDLE, "MPI_T_ERR_INVALID_HANDLE", "handle argument is not a valid handle"),
    (MPI_T_ERR_INVALID_NAME, "MPI_T_ERR_INVALID_NAME", "the variable or category name is invalid"),
    (MPI_T_ERR_OUT_OF_HANDLES, "MPI_T_ERR_OUT_OF_HANDLES", "no more handles available"),
    (MPI_T_ERR_OUT_OF_SESSIONS, "MPI_T_ERR_OUT_OF_SESSIONS", "no more sessions available"),
    (MPI_T_ERR_CVAR_SET_NOT_NOW, "MPI_T_ERR_CVAR_SET_NOT_NOW", "variable cannot be set at this moment"),
    (MPI_T_ERR_CVAR_SET_NEVER, "MPI_T_ERR_CVAR_SET_NEVER", "variable cannot be set until end of execution"),
    (MPI_T_ERR_PVAR_NO_WRITE, "MPI_T_ERR_PVAR_NO_WRITE", "variable cannot be written or reset"),
    (MPI_T_ERR_PVAR_NO_STARTSTOP, "MPI_T_ERR_PVAR_NO_STARTSTOP", "variable cannot be started or stopped"),
    (MPI_T_ERR_PVAR_NO_ATOMIC, "MPI_T_ERR_PVAR_NO_ATOMIC", "variable cannot be read and written atomically"),
];

fn predefined(code: c_int) -> Option<&'static (c_int, &'static str, &'static str)> {
    PREDEFINED.iter().find(|e| e.0 == code)
}

/// Name of a predefined class (`"MPI_ERR_RANK"`), for messages.
pub fn class_name(code: c_int) -> Option<&'static str> {
    predefined(code).map(|e| e.1)
}

// ------------------------------------------------------------------------------------ user codes

/// A class or code added by the user.
struct UserCode {
    /// Its class (itself for a class).
    class: c_int,
    string: Option<String>,
}

static USER_CODES: Mutex<BTreeMap<c_int, UserCode>> = const_mutex(BTreeMap::new());

/// The value of the `MPI_LASTUSEDCODE` attribute; the attribute points at it.
pub static LASTUSEDCODE: AtomicI32 = AtomicI32::new(MPI_ERR_LASTCODE);

/// The class of an error code, or None if it is no code.
pub fn class_of_code(code: c_int) -> Option<c_int> {
    if predefined(code).is_some() {
        return Some(code);
    }
    if code > MPI_ERR_LASTCODE {
        return USER_CODES.lock().get(&code).map(|u| u.class);
    }
    None
}

/// The string of an error code, or None if it is no code.
pub fn code_string(code: c_int) -> Option<String> {
    if let Some((_, name, text)) = predefined(code) {
        return Some(format!("{name}: {text}"));
    }
    if code > MPI_ERR_LASTCODE {
        // A code without a string has the empty string (the standard).
        return USER_CODES
            .lock()
            .get(&code)
            .map(|u| u.string.clone().unwrap_or_default());
    }
    None
}

fn next_code(t: &BTreeMap<c_int, UserCode>) -> Result<c_int, Error> {
    let last = LASTUSEDCODE
        .load(Ordering::Relaxed)
        .max(t.keys().next_back().copied().unwrap_or(0));
    last.checked_add(1)
        .ok_or_else(|| Error::new(ErrorClass::NoMem, "no error codes left"))
}

/// MPI_Add_error_class.
pub fn add_class() -> Result<c_int, Error> {
    let mut t = USER_CODES.lock();
    let c = next_code(&t)?;
    t.insert(
        c,
        UserCode {
            class: c,
            string: None,
        },
    );
    LASTUSEDCODE.store(c, Ordering::Relaxed);
    Ok(c)
}

/// MPI_Add_error_code.
pub fn add_code(class: c_int) -> Result<c_int, Error> {
    let mut t = USER_CODES.lock();
    let known = predefined(class).is_some_and(|e| e.0 != MPI_SUCCESS)
        || t.get(&class).is_some_and(|u| u.class == class);
    if !known {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("{class} is not an error class"),
        ));
    }
    let c = next_code(&t)?;
    t.insert(
        c,
        UserCode {
            class,
            string: None,
        },
    );
    LASTUSEDCODE.store(c, Ordering::Relaxed);
    Ok(c)
}

/// MPI_Add_error_string.
pub fn add_string(code: c_int, s: String) -> Result<(), Error> {
    let mut t = USER_CODES.lock();
    match t.get_mut(&code) {
        Some(u) => {
            u.string = Some(s);
            Ok(())
        }
        None if predefined(code).is_some() => Err(Error::new(
            ErrorClass::Arg,
            format!("the string of the predefined error code {code} cannot be changed"),
        )),
        None => Err(Error::new(
            ErrorClass::Arg,
            format!(
                "{code} is not an error code added by MPI_Add_error_code or MPI_Add_error_class"
            ),
        )),
    }
}

/// MPI_Remove_error_class.
pub fn remove_class(class: c_int) -> Result<(), Error> {
    let mut t = USER_CODES.lock();
    match t.get(&class) {
        Some(u) if u.class == class => {}
        _ => {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("{class} is not an error class added by MPI_Add_error_class"),
            ))
        }
    }
    if let Some((c, _)) = t.iter().find(|(&c, u)| u.class == class && c != class) {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("error class {class} still has the error code {c} (remove it first)"),
        ));
    }
    if t.get(&class).is_some_and(|u| u.string.is_some()) {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("error class {class} still has a string (remove it first)"),
        ));
    }
    t.remove(&class);
    Ok(())
}

/// MPI_Remove_error_code.
pub fn remove_code(code: c_int) -> Result<(), Error> {
    let mut t = USER_CODES.lock();
    match t.get(&code) {
        Some(u) if u.class != code => {}
        _ => {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("{code} is not an error code added by MPI_Add_error_code"),
            ))
        }
    }
    if t.get(&code).is_some_and(|u| u.string.is_some()) {
        return Err(Error::new(
            ErrorClass::Arg,
            format!("error code {code} still has a string (remove it first)"),
        ));
    }
    t.remove(&code);
    Ok(())
}

/// MPI_Remove_error_string.
pub fn remove_string(code: c_int) -> Result<(), Error> {
    let mut t = USER_CODES.lock();
    match t.get_mut(&code) {
        Some(u) if u.string.is_some() => {
            u.string = None;
            Ok(())
        }
        _ => Err(Error::new(
            ErrorClass::Arg,
            format!("error code {code} has no string added by MPI_Add_error_string"),
        )),
    }
}

// ------------------------------------------------------------------------------------ raising

/// World rank of this process for messages (set by MPI_Init), or -1.
pub static WORLD_RANK: AtomicI32 = AtomicI32::new(-1);

fn prefix() -> String {
    match WORLD_RANK.load(Ordering::Relaxed) {
        r if r >= 0 => format!("madmpi: rank {r}: "),
        _ => "madmpi: ".to_string(),
    }
}

/// Print `line` and end the whole job with `code`.
fn die(code: c_int, line: String) -> ! {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
    let _ = err.flush();
    drop(err);
    // The code becomes an exit status (its low byte): never let an error look like success.
    let code = if code & 0xff == 0 {
        MPI_ERR_OTHER
    } else {
        code
    };
    madmpi::abort(code, &line)
}

/// The handler an error on `comm` goes to: the communicator's, else MPI_COMM_SELF's.
fn handler_for(comm: MPI_Comm) -> (MPI_Comm, Errh) {
    let (comm, h) = match handles::comm_errhandler(comm) {
        Some(h) => (comm, h),
        None => (
            MPI_COMM_SELF,
            handles::comm_errhandler(MPI_COMM_SELF).unwrap_or(0x141),
        ),
    };
    (
        comm,
        handles::errhandler(h as MPI_Errhandler).unwrap_or(Errh::Fatal),
    )
}

/// Report error `code` (with the text `why`) of the call described by `call` on `comm`'s
/// handler. Returns the code when the handler returns.
pub fn raise_code(comm: MPI_Comm, call: &dyn Fn() -> String, code: c_int, why: &str) -> c_int {
    let (comm, h) = handler_for(comm);
    raise_by(h, &|f, c| call_user(f, comm, c), call, code, why)
}

/// Report error `code` on handler `h`; `user` calls a user handler function with the object
/// and returns the code as the handler left it. Returns the code when the handler returns: the
/// one a user handler left in its `int *` argument (as MPICH: the handler is given the code the
/// call is to return).
pub fn raise_by(
    h: Errh,
    user: &dyn Fn(ErrhFn, c_int) -> c_int,
    call: &dyn Fn() -> String,
    code: c_int,
    why: &str,
) -> c_int {
    match h {
        Errh::Return => code,
        Errh::Fatal | Errh::Abort => {
            let class = class_of_code(code).unwrap_or(code);
            let cname = class_name(class)
                .map(str::to_string)
                .unwrap_or_else(|| format!("error class {class}"));
            let which = if code == class {
                cname
            } else {
                format!("error code {code}, {cname}")
            };
            // A dead peer: name it and its host, so the job's last words say who died where.
            let dead = if class == MPI_ERR_PROC_ABORTED {
                let lost = madmpi::lost_ranks();
                if lost.is_empty() {
                    String::new()
                } else {
                    let names: Vec<String> = lost
                        .iter()
                        .map(|(r, h)| {
                            if h.is_empty() {
                                format!("rank {r}")
                            } else {
                                format!("rank {r} on {h}")
                            }
                        })
                        .collect();
                    format!(" [dead: {}]", names.join(", "))
                }
            } else {
                String::new()
            };
            die(
                code,
                format!("{}{}: {why}{dead} ({which})", prefix(), call()),
            )
        }
        Errh::User(f) => user(f, code),
    }
}

/// Call a user error handler with `(MPI_Comm *, int *)`; the code as it left it.
fn call_user(f: ErrhFn, comm: MPI_Comm, code: c_int) -> c_int {
    let mut c = comm;
    let mut e = code;
    match f {
        // SAFETY: a C function of the standard's errhandler type; the variadic tail is empty.
        ErrhFn::Comm(func) => unsafe { func(&mut c, &mut e) },
        // Only communicator handlers can be attached to communicators (checked when set).
        ErrhFn::Win(_) | ErrhFn::File(_) | ErrhFn::Session(_) => {}
    }
    e
}

/// Report a core error of the call described by `call` on `comm`'s handler.
#[cold]
pub fn raise(comm: MPI_Comm, call: &dyn Fn() -> String, e: Error) -> c_int {
    raise_code(comm, call, error_code(&e), &e.msg)
}

/// The error code of a core error (its class's, or a code whose string says more).
pub fn error_code(e: &Error) -> c_int {
    match e.class {
        // MPI_ERR_BUFFER's own string is "invalid buffer pointer": a full buffer gets a code
        // of that class that says what is wrong (MPICH's string says the same).
        ErrorClass::BufferSpace => described_code(
            "bsend space",
            MPI_ERR_BUFFER,
            "MPI_ERR_BUFFER: not enough space in the attached buffer for a buffered send \
             (each message needs MPI_Pack_size + MPI_BSEND_OVERHEAD bytes)",
        ),
        // The class's standard string names MPI_FILE_SET_VIEW, which madmpi's only users of
        // data representations (MPI_Pack_external …) are not.
        ErrorClass::UnsupportedDatarep => described_code(
            "datarep",
            MPI_ERR_UNSUPPORTED_DATAREP,
            "MPI_ERR_UNSUPPORTED_DATAREP: unsupported data representation (the one known is \
             \"external32\")",
        ),
        c => class_code(c),
    }
}

/// Report a core error of a call that involves no communicator (on MPI_COMM_SELF).
#[cold]
pub fn raise_self(name: &str, e: Error) -> c_int {
    raise(MPI_COMM_SELF, &|| name.to_string(), e)
}

/// MPI_Comm_call_errhandler: invoke `comm`'s handler with `code` (on MPI_COMM_SELF's if `comm`
/// is invalid, with MPI_ERR_COMM).
pub fn call_errhandler(comm: MPI_Comm, code: c_int) -> c_int {
    let call = || {
        format!(
            "MPI_Comm_call_errhandler(comm={}, errorcode={code})",
            handles::comm_name(comm)
        )
    };
    if handles::comm_errhandler(comm).is_none() {
        return raise_code(MPI_COMM_SELF, &call, MPI_ERR_COMM, "invalid communicator");
    }
    let why = code_string(code).unwrap_or_else(|| format!("unknown error code {code}"));
    raise_code(comm, &call, code, &why);
    // The standard: MPI_SUCCESS once the handler has returned (MPICH and Open MPI agree, also
    // for MPI_ERRORS_RETURN).
    MPI_SUCCESS
}

/// What the generated wrapper of an unimplemented function returns: MPI_ERR_UNSUPPORTED_OPERATION
/// through the handler of `comm` (MPI_COMM_SELF's if it has none).
pub fn unsupported(func: &'static str, comm: MPI_Comm) -> c_int {
    let why = format!("{func} is not implemented in madmpi (yet)");
    // One code per function, whose `MPI_Error_string` names the function (so that a program
    // running with MPI_ERRORS_RETURN can say which one, as the fatal handler does).
    let code = described_code(
        func,
        MPI_ERR_UNSUPPORTED_OPERATION,
        &format!("MPI_ERR_UNSUPPORTED_OPERATION: {why}"),
    );
    // The tool interface returns its codes and never calls an error handler; and before
    // MPI_Init a program may probe what it may call then (MPI_Session_init, MPI_T_*, the ABI
    // setters): no handler is in force yet to end it for asking.
    let tool = func.starts_with("MPI_T_") || func.starts_with("PMPI_T_");
    if tool || !madmpi::initialized() {
        return code;
    }
    raise_code(comm, &|| func.to_string(), code, &why)
}

/// An error code of `class` with the string `text`, one per `key`, made on first use: for
/// errors the class's own string would misdescribe.
fn described_code(key: &'static str, class: c_int, text: &str) -> c_int {
    static CODES: Mutex<BTreeMap<&'static str, c_int>> = const_mutex(BTreeMap::new());
    let mut codes = CODES.lock();
    if let Some(&c) = codes.get(key) {
        return c;
    }
    let made = add_code(class).and_then(|c| {
        add_string(c, text.to_string())?;
        Ok(c)
    });
    let c = made.unwrap_or(class);
    codes.insert(key, c);
    c
}

/// What the generated wrapper returns when the implementation of `func` panicked: MPI_ERR_INTERN
/// through MPI_COMM_SELF's handler.
pub fn panicked(func: &'static str) -> c_int {
    raise_code(
        MPI_COMM_SELF,
        &|| func.to_string(),
        MPI_ERR_INTERN,
        "internal error in madmpi (a bug: please report it)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_core_class_maps_to_a_described_code() {
        use ErrorClass::*;
        for c in [
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
            Session,
        ] {
            let code = class_code(c);
            assert_eq!(class_name(code), Some(c.mpi_name()));
        }
    }

    #[test]
    fn predefined_codes_are_their_own_class() {
        for code in 0..=MPI_ERR_ABI {
            assert_eq!(class_of_code(code), Some(code));
            assert!(code_string(code).unwrap().starts_with("MPI_"));
        }
        assert_eq!(class_of_code(-1), None);
        assert_eq!(class_of_code(MPI_ERR_ABI + 1), None);
    }

    #[test]
    fn user_classes_and_codes() {
        let c = add_class().unwrap();
        assert!(c > MPI_ERR_LASTCODE);
        assert!(LASTUSEDCODE.load(Ordering::Relaxed) >= c);
        let k = add_code(c).unwrap();
        assert!(k > c);
        assert_eq!(class_of_code(k), Some(c));
        assert_eq!(code_string(k).unwrap(), "");
        add_string(k, "mine".into()).unwrap();
        assert_eq!(code_string(k).unwrap(), "mine");
        assert!(add_code(k).is_err(), "a code is not a class");
        assert!(remove_class(c).is_err(), "the class still has a code");
        assert!(remove_code(k).is_err(), "the code still has a string");
        remove_string(k).unwrap();
        remove_code(k).unwrap();
        remove_class(c).unwrap();
        assert_eq!(class_of_code(k), None);
        assert!(add_code(MPI_ERR_RANK).is_ok());
        assert!(add_string(MPI_ERR_RANK, "x".into()).is_err());
    }
}
