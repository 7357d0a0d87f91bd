//! The one error type of the engine. `mpi-capi` alone maps [`ErrorClass`] to `MPI_ERR_*` codes.

use std::fmt;

/// MPI error classes the engine can raise (a subset of the standard's, named after them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// MPI_ERR_BUFFER: invalid buffer pointer.
    Buffer,
    /// MPI_ERR_BUFFER too, for a buffered send the attached buffer has no room for: the C
    /// interface gives it an error code of its own, whose string says so (the class's
    /// standard description is "invalid buffer pointer").
    BufferSpace,
    /// MPI_ERR_COUNT: invalid count.
    Count,
    /// MPI_ERR_TYPE: invalid or uncommitted datatype.
    Type,
    /// MPI_ERR_TAG: invalid tag.
    Tag,
    /// MPI_ERR_COMM: invalid communicator.
    Comm,
    /// MPI_ERR_RANK: invalid rank.
    Rank,
    /// MPI_ERR_REQUEST: invalid request.
    Request,
    /// MPI_ERR_ROOT: invalid root.
    Root,
    /// MPI_ERR_GROUP: invalid group.
    Group,
    /// MPI_ERR_OP: invalid operation.
    Op,
    /// MPI_ERR_ARG: invalid argument of another kind.
    Arg,
    /// MPI_ERR_TRUNCATE: message truncated on receive.
    Truncate,
    /// MPI_ERR_OTHER: known error not in this list.
    Other,
    /// MPI_ERR_INTERN: internal error (a bug, or a resource the OS refused).
    Intern,
    /// MPI_ERR_PENDING: request pending (in the statuses of a multiple completion).
    Pending,
    /// MPI_ERR_NO_MEM: out of memory.
    NoMem,
    /// MPI_ERR_PROC_ABORTED: a peer process involved in the operation has died.
    ProcAborted,
    /// MPI_ERR_UNSUPPORTED_OPERATION: not implemented (yet).
    Unsupported,
    /// MPI_ERR_KEYVAL: invalid attribute key.
    Keyval,
    /// MPI_ERR_INFO: invalid info object.
    Info,
    /// MPI_ERR_TOPOLOGY: invalid topology.
    Topology,
    /// MPI_ERR_DIMS: invalid dimensions.
    Dims,
    /// MPI_ERR_VALUE_TOO_LARGE: a value does not fit the output type.
    ValueTooLarge,
    /// MPI_ERR_UNSUPPORTED_DATAREP: unknown data representation.
    UnsupportedDatarep,
    /// MPI_ERR_CONVERSION: a value cannot be converted to the representation.
    Conversion,
    /// MPI_ERR_WIN: invalid window.
    Win,
    /// MPI_ERR_RMA_RANGE: target memory outside the window (or not attached).
    RmaRange,
    /// MPI_ERR_RMA_SYNC: an RMA call outside the epoch it needs.
    RmaSync,
    /// MPI_ERR_RMA_ATTACH: memory cannot be attached (overlaps a region, or not attached).
    RmaAttach,
    /// MPI_ERR_RMA_FLAVOR: the window's flavor does not allow the call.
    RmaFlavor,
    /// MPI_ERR_RMA_SHARED: memory cannot be shared.
    RmaShared,
    /// MPI_ERR_LOCKTYPE: invalid lock type.
    Locktype,
    /// MPI_ERR_ASSERT: invalid assert argument.
    Assert,
    /// MPI_ERR_DISP: invalid displacement unit.
    Disp,
    /// MPI_ERR_SIZE: invalid size.
    Size,
    /// MPI_ERR_NAME: a service name that cannot be published or is not published (lookup).
    Name,
    /// MPI_ERR_SERVICE: unpublishing a service name that is not published.
    Service,
    /// MPI_ERR_PORT: invalid port name.
    Port,
    /// MPI_ERR_SESSION: invalid session.
    Session,
    /// MPI_ERR_SPAWN: the processes could not be started.
    Spawn,
}

impl ErrorClass {
    /// The standard's name of the class, as printed in messages.
    pub fn mpi_name(self) -> &'static str {
        match self {
            ErrorClass::Buffer | ErrorClass::BufferSpace => "MPI_ERR_BUFFER",
            ErrorClass::Count => "MPI_ERR_COUNT",
            ErrorClass::Type => "MPI_ERR_TYPE",
            ErrorClass::Tag => "MPI_ERR_TAG",
            ErrorClass::Comm => "MPI_ERR_COMM",
            ErrorClass::Rank => "MPI_ERR_RANK",
            ErrorClass::Request => "MPI_ERR_REQUEST",
            ErrorClass::Root => "MPI_ERR_ROOT",
            ErrorClass::Group => "MPI_ERR_GROUP",
            ErrorClass::Op => "MPI_ERR_OP",
            ErrorClass::Arg => "MPI_ERR_ARG",
            ErrorClass::Truncate => "MPI_ERR_TRUNCATE",
            ErrorClass::Other => "MPI_ERR_OTHER",
            ErrorClass::Intern => "MPI_ERR_INTERN",
            ErrorClass::Pending => "MPI_ERR_PENDING",
            ErrorClass::NoMem => "MPI_ERR_NO_MEM",
            ErrorClass::ProcAborted => "MPI_ERR_PROC_ABORTED",
            ErrorClass::Unsupported => "MPI_ERR_UNSUPPORTED_OPERATION",
            ErrorClass::Keyval => "MPI_ERR_KEYVAL",
            ErrorClass::Info => "MPI_ERR_INFO",
            ErrorClass::Topology => "MPI_ERR_TOPOLOGY",
            ErrorClass::Dims => "MPI_ERR_DIMS",
            ErrorClass::ValueTooLarge => "MPI_ERR_VALUE_TOO_LARGE",
            ErrorClass::UnsupportedDatarep => "MPI_ERR_UNSUPPORTED_DATAREP",
            ErrorClass::Conversion => "MPI_ERR_CONVERSION",
            ErrorClass::Win => "MPI_ERR_WIN",
            ErrorClass::RmaRange => "MPI_ERR_RMA_RANGE",
            ErrorClass::RmaSync => "MPI_ERR_RMA_SYNC",
            ErrorClass::RmaAttach => "MPI_ERR_RMA_ATTACH",
            ErrorClass::RmaFlavor => "MPI_ERR_RMA_FLAVOR",
            ErrorClass::RmaShared => "MPI_ERR_RMA_SHARED",
            ErrorClass::Locktype => "MPI_ERR_LOCKTYPE",
            ErrorClass::Assert => "MPI_ERR_ASSERT",
            ErrorClass::Disp => "MPI_ERR_DISP",
            ErrorClass::Size => "MPI_ERR_SIZE",
            ErrorClass::Name => "MPI_ERR_NAME",
            ErrorClass::Service => "MPI_ERR_SERVICE",
            ErrorClass::Port => "MPI_ERR_PORT",
            ErrorClass::Session => "MPI_ERR_SESSION",
            ErrorClass::Spawn => "MPI_ERR_SPAWN",
        }
    }
}

/// An engine error: a class and a message saying what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The MPI error class.
    pub class: ErrorClass,
    /// Human-readable detail (which argument, which value).
    pub msg: String,
}

impl Error {
    /// An error of `class` with message `msg`.
    pub fn new(class: ErrorClass, msg: impl Into<String>) -> Error {
        Error {
            class,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.msg, self.class.mpi_name())
    }
}

impl std::error::Error for Error {}

impl From<madmpi_transports::Error> for Error {
    fn from(e: madmpi_transports::Error) -> Error {
        match e {
            madmpi_transports::Error::PeerLost(p) => {
                Error::new(ErrorClass::ProcAborted, format!("rank {} has died", p.0))
            }
            other => Error::new(ErrorClass::Intern, format!("transport: {other}")),
        }
    }
}

impl From<madmpi_datatypes::Error> for Error {
    fn from(e: madmpi_datatypes::Error) -> Error {
        use madmpi_datatypes::Error as D;
        let class = match &e {
            D::Count(_) => ErrorClass::Count,
            D::Type(_) => ErrorClass::Type,
            D::Arg(_) => ErrorClass::Arg,
            D::Truncate { .. } => ErrorClass::Truncate,
            D::ValueTooLarge(_) => ErrorClass::ValueTooLarge,
            D::UnsupportedDatarep(_) => ErrorClass::UnsupportedDatarep,
            D::Conversion(_) => ErrorClass::Conversion,
            _ => ErrorClass::Other,
        };
        Error::new(class, e.to_string())
    }
}

impl From<madmpi_pmi::Error> for Error {
    fn from(e: madmpi_pmi::Error) -> Error {
        Error::new(ErrorClass::Intern, format!("PMI: {e}"))
    }
}

/// Result type of the engine.
pub type Result<T> = std::result::Result<T, Error>;

/// Shorthand for `Err(Error::new(class, msg))`.
pub(crate) fn err<T>(class: ErrorClass, msg: impl Into<String>) -> Result<T> {
    Err(Error::new(class, msg))
}
