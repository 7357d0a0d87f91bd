//! MPI-IO on POSIX files: the `MPI_File` handle table, errors raised on a file's error handler,
//! and the calls, in
//! - `file`: open, close, delete, sizes, sync, amode, group, info hints, atomicity, error handlers;
//! - `view`: file views, data representations (`native`, `internal`, `external32`, and those
//!   of MPI_Register_datarep), type extents, byte offsets;
//! - `access`: moving data between memory and the file through a view (conversion, data
//!   sieving, byte-range locks in atomic mode);
//! - `coll`: collective access by two-phase I/O over aggregator processes;
//! - `shared`: the shared file pointer (a counter in a side file under an `fcntl` lock);
//! - `calls`, `nb`: the read and write calls (explicit offsets, individual and shared
//!   pointers; blocking, non-blocking, split collective, `_c`).
//!
//! Every file keeps a private duplicate of its communicator, so that the collectives of
//! MPI-IO never match the application's messages. Errors of collective calls are agreed (every
//! process returns an error when one failed). The default error handler of files is
//! MPI_ERRORS_RETURN (the standard), held by MPI_FILE_NULL.

mod access;
mod calls;
mod coll;
mod file;
mod nb;
mod shared;
mod split;
mod view;

pub use calls::*;
pub use file::*;
pub use nb::*;
pub use shared::*;
pub use split::*;
pub use view::*;

use std::os::fd::AsRawFd;
use std::os::raw::c_int;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use madmpi::{BuiltinOp, CommId, Datatype, Input, Op};
use madmpi_datatypes::Basic;
use parking_lot::{const_mutex, Mutex};

use super::info::Pairs;
use crate::abi::*;
use crate::errors;
use crate::handles::{self, ErrhFn, Kind, Table};

// ------------------------------------------------------------------------------------ errors

/// A failure of an I/O call with its exact error code (the I/O classes have no core class).
#[derive(Debug)]
pub(crate) struct IoErr {
    pub code: c_int,
    pub msg: String,
}

impl From<madmpi::Error> for IoErr {
    fn from(e: madmpi::Error) -> IoErr {
        IoErr {
            code: errors::error_code(&e),
            msg: e.msg,
        }
    }
}

impl From<madmpi_datatypes::Error> for IoErr {
    fn from(e: madmpi_datatypes::Error) -> IoErr {
        super::common::datatype_error(e).into()
    }
}

pub(crate) type IoR<T> = Result<T, IoErr>;

/// An error with code `code`.
#[cold]
pub(crate) fn ioerr(code: c_int, msg: impl Into<String>) -> IoErr {
    IoErr {
        code,
        msg: msg.into(),
    }
}

/// The MPI class of an operating-system error, with what was being done.
#[cold]
pub(crate) fn os_err(e: std::io::Error, what: &str) -> IoErr {
    let code = match e.raw_os_error() {
        Some(libc::ENOENT) => MPI_ERR_NO_SUCH_FILE,
        Some(libc::EEXIST) => MPI_ERR_FILE_EXISTS,
        Some(libc::EACCES) | Some(libc::EPERM) => MPI_ERR_ACCESS,
        Some(libc::EROFS) => MPI_ERR_READ_ONLY,
        Some(libc::ENOSPC) | Some(libc::EFBIG) => MPI_ERR_NO_SPACE,
        Some(libc::EDQUOT) => MPI_ERR_QUOTA,
        Some(libc::ENAMETOOLONG) | Some(libc::ENOTDIR) | Some(libc::EISDIR) | Some(libc::ELOOP) => {
            MPI_ERR_BAD_FILE
        }
        Some(libc::ETXTBSY) => MPI_ERR_FILE_IN_USE,
        _ => MPI_ERR_IO,
    };
    ioerr(code, format!("{what}: {e}"))
}

// ------------------------------------------------------------------------------------ files

/// An open file of the C interface.
pub(crate) struct FileObj {
    /// The private duplicate of the communicator it was opened on.
    pub comm: CommId,
    /// This process's rank in it, and its size.
    pub rank: i32,
    pub size: i32,
    /// The first rank of each node, in rank order (the default aggregators).
    pub leaders: Vec<i32>,
    /// The path it was opened with (prefix such as `ufs:` removed).
    pub path: std::path::PathBuf,
    pub f: std::fs::File,
    pub amode: c_int,
    /// Whether the descriptor can read (a write-only file is opened read-write when allowed,
    /// for data sieving).
    pub can_read: bool,
    /// The side file of the shared file pointer.
    pub shfp_path: std::path::PathBuf,
    pub st: Mutex<FileState>,
}

/// The mutable state of a file.
pub(crate) struct FileState {
    pub errh: usize,
    pub view: Arc<view::View>,
    /// The individual file pointer, in etypes of the view.
    pub pos: i64,
    pub atomic: bool,
    pub info: Pairs,
    /// A split collective begun and not ended: its bytes (in memory) and whether it reads.
    pub split: Option<(u64, bool)>,
    /// The side file of the shared pointer, once opened.
    pub shfp: Option<Arc<std::fs::File>>,
}

impl FileObj {
    pub fn fd(&self) -> c_int {
        self.f.as_raw_fd()
    }
}

static FILES: Mutex<Table<Arc<FileObj>>> = const_mutex(Table::new(Kind::File));

/// The error handler of MPI_FILE_NULL: the one new files start with (MPI_ERRORS_RETURN).
static NULL_ERRH: AtomicUsize = AtomicUsize::new(0x143);

/// The file of handle `fh`.
pub(crate) fn file(fh: MPI_File) -> IoR<Arc<FileObj>> {
    if fh == MPI_FILE_NULL {
        return Err(ioerr(MPI_ERR_FILE, "invalid file: MPI_FILE_NULL"));
    }
    FILES.lock().get(fh as usize).cloned().map_err(|_| {
        ioerr(
            MPI_ERR_FILE,
            format!("invalid file handle {:#x}", fh as usize),
        )
    })
}

fn register(f: FileObj) -> IoR<MPI_File> {
    Ok(FILES.lock().insert(Arc::new(f))? as MPI_File)
}

fn unregister(fh: MPI_File) -> IoR<Arc<FileObj>> {
    FILES
        .lock()
        .remove(fh as usize)
        .map_err(|_| ioerr(MPI_ERR_FILE, "invalid file handle"))
}

/// Report `e` of `call` on `fh`'s handler (MPI_FILE_NULL's for an invalid or null file).
#[cold]
pub(crate) fn raise(fh: MPI_File, call: &dyn Fn() -> String, e: IoErr) -> c_int {
    let h = file(fh)
        .ok()
        .map(|f| f.st.lock().errh)
        .unwrap_or_else(|| NULL_ERRH.load(Relaxed));
    let fh = if file(fh).is_ok() { fh } else { MPI_FILE_NULL };
    let eh = handles::errhandler(h as MPI_Errhandler).unwrap_or(handles::Errh::Return);
    let user = |f: ErrhFn, c: c_int| {
        if let ErrhFn::File(func) = f {
            let (mut fh, mut c) = (fh, c);
            // SAFETY: a C function of the standard's file errhandler type; the variadic tail
            // is empty.
            unsafe { func(&mut fh, &mut c) };
        }
    };
    errors::raise_by(eh, &user, call, e.code, &e.msg)
}

/// The end of a file call: MPI_SUCCESS, or the error through the file's handler.
pub(crate) fn done(fh: MPI_File, call: &dyn Fn() -> String, r: IoR<()>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(fh, call, e),
    }
}

/// `"name(fh=0x…)"` for messages.
pub(crate) fn call_of(name: &'static str, fh: MPI_File) -> impl Fn() -> String {
    move || format!("{name}(fh={:#x})", fh as usize)
}

/// MPI is running (for calls that reach no core function first).
pub(crate) fn running() -> IoR<()> {
    super::common::running().map_err(IoErr::from)
}

// ------------------------------------------------------------------------------------ collectives

fn int_max(comm: CommId, v: i64, op: BuiltinOp) -> IoR<i64> {
    let mut out = 0i64;
    // SAFETY: one i64 in, one out, both live for the call.
    unsafe {
        madmpi::allreduce(
            Input::Buf(&v as *const i64 as *const u8),
            &mut out as *mut i64 as *mut u8,
            1,
            &Datatype::basic(Basic::Int64),
            &Op::Builtin(op),
            comm,
        )?
    };
    Ok(out)
}

/// Allreduce of one `i64`.
pub(crate) fn allreduce_i64(comm: CommId, v: i64, op: BuiltinOp) -> IoR<i64> {
    int_max(comm, v, op)
}

/// Every process's `v`, in rank order.
pub(crate) fn allgather_i64(comm: CommId, v: &[i64], size: i32) -> IoR<Vec<i64>> {
    let n = v.len();
    let mut out = vec![0i64; n * size as usize];
    let dt = Datatype::basic(Basic::Int64);
    // SAFETY: `v` and `out` hold n and n * size values for the call.
    unsafe {
        madmpi::allgather(
            Some(madmpi::Data::new(v.as_ptr() as *const u8, n, &dt)),
            madmpi::Data::new(out.as_mut_ptr() as *const u8, n, &dt),
            comm,
        )?
    };
    Ok(out)
}

/// Broadcast of `v` from `root`.
pub(crate) fn bcast_i64(comm: CommId, v: &mut [i64], root: i32) -> IoR<()> {
    // SAFETY: `v` is live for the call.
    unsafe {
        madmpi::bcast(
            v.as_mut_ptr() as *mut u8,
            v.len(),
            &Datatype::basic(Basic::Int64),
            root,
            comm,
        )?
    };
    Ok(())
}

/// Agree on the outcome of a collective step: if any process failed, every process fails
/// (with its own error, or the largest code of the others).
pub(crate) fn agree<T>(comm: CommId, r: IoR<T>) -> IoR<T> {
    let mine = match &r {
        Ok(_) => 0,
        Err(e) => e.code as i64,
    };
    let worst = int_max(comm, mine, BuiltinOp::Max)?;
    match r {
        Ok(_) if worst != 0 => Err(ioerr(
            worst as c_int,
            "the collective I/O call failed on another process of the file's group",
        )),
        r => r,
    }
}

// ------------------------------------------------------------------------------------ POSIX

/// Read at `off` until `buf` is full or the end of the file: the bytes read.
pub(crate) fn pread_full(f: &std::fs::File, buf: &mut [u8], off: u64) -> IoR<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(os_err(e, "read")),
        }
    }
    Ok(done)
}

/// Write all of `buf` at `off`.
pub(crate) fn pwrite_all(f: &std::fs::File, buf: &[u8], off: u64) -> IoR<()> {
    f.write_all_at(buf, off).map_err(|e| os_err(e, "write"))
}

/// An `fcntl` byte-range lock on `[off, off + len)` (len 0: to the end), held until dropped.
pub(crate) struct RangeLock {
    fd: c_int,
    off: u64,
    len: u64,
}

impl RangeLock {
    /// Wait for a write (`write`) or read lock.
    pub fn new(fd: c_int, off: u64, len: u64, write: bool) -> IoR<RangeLock> {
        set_lock(
            fd,
            off,
            len,
            if write { libc::F_WRLCK } else { libc::F_RDLCK },
        )?;
        Ok(RangeLock { fd, off, len })
    }
}

impl Drop for RangeLock {
    fn drop(&mut self) {
        let _ = set_lock(self.fd, self.off, self.len, libc::F_UNLCK);
    }
}

fn set_lock(fd: c_int, off: u64, len: u64, kind: c_int) -> IoR<()> {
    // SAFETY: a zeroed flock is a valid value; the fields set are those fcntl reads.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = off as libc::off_t;
    fl.l_len = len as libc::off_t;
    loop {
        // SAFETY: fcntl with F_SETLKW and a valid flock on a descriptor we own.
        let rc = unsafe { libc::fcntl(fd, libc::F_SETLKW, &fl) };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(os_err(e, "byte-range lock (fcntl)"));
        }
    }
}
