//! Opening, closing and deleting files; size, preallocation, sync; amode, group, info hints,
//! atomicity; file error handlers.

use std::os::raw::{c_char, c_int};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use parking_lot::Mutex;

use super::super::common::out;
use super::super::group::new_group;
use super::super::info::{self, Pairs};
use super::view::{cstr, View};
use super::*;
use crate::abi::*;
use crate::handles::{self, Errh, ErrhFn};

/// The hints of a file and what they are when not given.
pub(crate) struct Hints {
    /// Bytes an aggregator handles per round of two-phase I/O.
    pub cb_buffer_size: usize,
    /// Aggregators (0: one per node).
    pub cb_nodes: usize,
    /// Collective buffering for reads and writes: `Some(true)` always, `Some(false)` never,
    /// `None` when the access is noncontiguous and interleaved.
    pub cb_read: Option<bool>,
    pub cb_write: Option<bool>,
    /// Data sieving for independent reads and writes, and its buffer sizes.
    pub ds_read: bool,
    pub ds_write: bool,
    pub ind_rd_buffer_size: usize,
    pub ind_wr_buffer_size: usize,
}

fn get<'a>(p: &'a Pairs, k: &str) -> Option<&'a str> {
    p.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
}

fn num(p: &Pairs, k: &str, dflt: usize) -> usize {
    get(p, k)
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(dflt)
}

fn switch(p: &Pairs, k: &str) -> Option<bool> {
    match get(p, k) {
        Some("enable") | Some("true") => Some(true),
        Some("disable") | Some("false") => Some(false),
        _ => None,
    }
}

/// The hints in force for a file's info.
pub(crate) fn hints(p: &Pairs) -> Hints {
    let cb_off = get(p, "collective_buffering") == Some("false");
    Hints {
        cb_buffer_size: num(p, "cb_buffer_size", 16 << 20),
        cb_nodes: num(p, "cb_nodes", 0),
        cb_read: if cb_off {
            Some(false)
        } else {
            switch(p, "romio_cb_read")
        },
        cb_write: if cb_off {
            Some(false)
        } else {
            switch(p, "romio_cb_write")
        },
        ds_read: switch(p, "romio_ds_read") != Some(false),
        ds_write: switch(p, "romio_ds_write") != Some(false),
        ind_rd_buffer_size: num(p, "ind_rd_buffer_size", 4 << 20),
        ind_wr_buffer_size: num(p, "ind_wr_buffer_size", 512 << 10),
    }
}

/// Set or replace hint `k`.
pub(crate) fn set_hint(p: &mut Pairs, k: &str, v: &str) {
    match p.iter_mut().find(|(a, _)| a == k) {
        Some(e) => e.1 = v.to_string(),
        None => p.push((k.to_string(), v.to_string())),
    }
}

/// The info MPI_File_get_info returns: the hints in force, given or default.
fn info_used(f: &FileObj, p: &Pairs) -> Pairs {
    let h = hints(p);
    let mut out: Pairs = p.clone();
    let onoff = |b: Option<bool>| match b {
        Some(true) => "enable",
        Some(false) => "disable",
        None => "automatic",
    };
    let defaults = [
        ("cb_buffer_size", h.cb_buffer_size.to_string()),
        ("cb_nodes", aggregators(f, &h, 0).len().to_string()),
        ("romio_cb_read", onoff(h.cb_read).to_string()),
        ("romio_cb_write", onoff(h.cb_write).to_string()),
        (
            "romio_ds_read",
            if h.ds_read { "automatic" } else { "disable" }.to_string(),
        ),
        (
            "romio_ds_write",
            if h.ds_write { "automatic" } else { "disable" }.to_string(),
        ),
        ("ind_rd_buffer_size", h.ind_rd_buffer_size.to_string()),
        ("ind_wr_buffer_size", h.ind_wr_buffer_size.to_string()),
        ("filename", f.path.display().to_string()),
    ];
    for (k, v) in defaults {
        if get(&out, k).is_none() {
            out.push((k.to_string(), v));
        }
    }
    out
}

/// The aggregators of a file's collective I/O over a file region of `span` bytes, in rank
/// order: `cb_nodes` of them when the hint is given, else one per node and more for a large
/// region (one per [`AGG_BYTES`], at most one per process), spread over the nodes in turn.
pub(crate) fn aggregators(f: &FileObj, h: &Hints, span: u64) -> Vec<i32> {
    let nodes = f.nodes.len().max(1);
    let want = if h.cb_nodes == 0 {
        (span.div_ceil(AGG_BYTES) as usize).max(nodes)
    } else {
        h.cb_nodes
    }
    .clamp(1, f.size.max(1) as usize);
    let mut v = Vec::with_capacity(want);
    for k in 0.. {
        for n in &f.nodes {
            if let Some(&r) = n.get(k) {
                if v.len() < want {
                    v.push(r);
                }
            }
        }
        if v.len() >= want || f.nodes.iter().all(|n| n.len() <= k) {
            break;
        }
    }
    v.sort_unstable();
    v
}

/// File bytes per aggregator from which a node gets another aggregator (without `cb_nodes`).
pub(crate) const AGG_BYTES: u64 = 4 << 20;

/// A path argument, without a file-system prefix such as `ufs:` (ROMIO's convention).
fn path_of(name: &str) -> IoR<PathBuf> {
    if name.is_empty() {
        return Err(ioerr(MPI_ERR_BAD_FILE, "empty file name"));
    }
    let known = [
        "ufs", "nfs", "lustre", "gpfs", "pvfs2", "xfs", "panfs", "testfs", "posix",
    ];
    let p = match name.split_once(':') {
        Some((pre, rest)) if known.contains(&pre) => rest,
        _ => name,
    };
    if p.len() >= libc::PATH_MAX as usize {
        return Err(ioerr(MPI_ERR_BAD_FILE, "file name too long"));
    }
    Ok(PathBuf::from(p))
}

fn check_amode(amode: c_int) -> IoR<()> {
    let rw = [MPI_MODE_RDONLY, MPI_MODE_WRONLY, MPI_MODE_RDWR]
        .iter()
        .filter(|&&m| amode & m != 0)
        .count();
    let all = MPI_MODE_RDONLY
        | MPI_MODE_WRONLY
        | MPI_MODE_RDWR
        | MPI_MODE_CREATE
        | MPI_MODE_EXCL
        | MPI_MODE_DELETE_ON_CLOSE
        | MPI_MODE_UNIQUE_OPEN
        | MPI_MODE_SEQUENTIAL
        | MPI_MODE_APPEND;
    let why = if rw != 1 {
        "exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY and MPI_MODE_RDWR is needed"
    } else if amode & !all != 0 {
        "unknown mode bits"
    } else if amode & MPI_MODE_RDONLY != 0 && amode & (MPI_MODE_CREATE | MPI_MODE_EXCL) != 0 {
        "MPI_MODE_RDONLY cannot be combined with MPI_MODE_CREATE or MPI_MODE_EXCL"
    } else if amode & MPI_MODE_RDWR != 0 && amode & MPI_MODE_SEQUENTIAL != 0 {
        "MPI_MODE_RDWR cannot be combined with MPI_MODE_SEQUENTIAL"
    } else {
        return Ok(());
    };
    Err(ioerr(
        MPI_ERR_AMODE,
        format!("invalid amode {amode:#x}: {why}"),
    ))
}

/// Open the file on this process; `create` for the process that creates it.
fn open_local(path: &PathBuf, amode: c_int, create: bool, perm: u32) -> IoR<(std::fs::File, bool)> {
    let mut o = std::fs::OpenOptions::new();
    o.mode(perm);
    let wr = amode & (MPI_MODE_WRONLY | MPI_MODE_RDWR) != 0;
    o.read(amode & MPI_MODE_WRONLY == 0).write(wr);
    if create && amode & MPI_MODE_CREATE != 0 {
        if amode & MPI_MODE_EXCL != 0 {
            o.create_new(true);
        } else {
            o.create(true);
        }
    }
    if amode & MPI_MODE_WRONLY != 0 {
        // Read-write when permitted, for data sieving.
        let mut rw = o.clone();
        rw.read(true);
        if let Ok(f) = rw.open(path) {
            return Ok((f, true));
        }
    }
    let f = o
        .open(path)
        .map_err(|e| os_err(e, &format!("cannot open {}", path.display())))?;
    if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Err(ioerr(
            MPI_ERR_BAD_FILE,
            format!("{} is a directory", path.display()),
        ));
    }
    Ok((f, amode & MPI_MODE_WRONLY == 0))
}

/// The ranks of each node of `comm`, nodes in the order of their first rank.
fn node_ranks(comm: madmpi::CommId) -> IoR<Vec<Vec<i32>>> {
    let ci = madmpi::comm_info(comm)?;
    let mut seen: Vec<String> = Vec::new();
    let mut v: Vec<Vec<i32>> = Vec::new();
    for (i, &w) in ci.local.iter().enumerate() {
        let h = madmpi::rank_host(w).unwrap_or_default();
        match seen.iter().position(|s| *s == h) {
            Some(k) => v[k].push(i as i32),
            None => {
                seen.push(h);
                v.push(vec![i as i32]);
            }
        }
    }
    Ok(v)
}

pub unsafe fn MPI_File_open(
    comm: MPI_Comm,
    filename: *const c_char,
    amode: c_int,
    info: MPI_Info,
    fh: *mut MPI_File,
) -> c_int {
    let r = (|| {
        running()?;
        let c = handles::comm(comm)?;
        let ci = madmpi::comm_info(c)?;
        if ci.remote.is_some() {
            return Err(ioerr(
                MPI_ERR_COMM,
                "MPI_File_open needs an intracommunicator",
            ));
        }
        let out = out(fh, "fh")?;
        let pairs = if info == MPI_INFO_NULL {
            Vec::new()
        } else {
            info::pairs(info)?
        };
        let checked = cstr(filename, "filename")
            .and_then(|n| path_of(&n))
            .and_then(|p| check_amode(amode).map(|_| p));
        let dup = madmpi::comm_dup(c)?;
        let opened = open_on(dup, checked, amode, pairs);
        if opened.is_err() {
            let _ = madmpi::free_comm(dup);
        }
        *out = opened?;
        Ok(())
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(
            MPI_FILE_NULL,
            &|| {
                format!(
                    "MPI_File_open(comm={}, amode={amode:#x})",
                    handles::comm_name(comm)
                )
            },
            e,
        ),
    }
}

fn open_on(dup: madmpi::CommId, path: IoR<PathBuf>, amode: c_int, pairs: Pairs) -> IoR<MPI_File> {
    let rank = madmpi::comm_rank(dup)?;
    let size = madmpi::comm_size(dup)?;
    let path = agree(dup, path)?;
    let perm = get(&pairs, "file_perm")
        .and_then(|v| u32::from_str_radix(v.trim().trim_start_matches("0o"), 8).ok())
        .unwrap_or(0o666);
    let shfp_path = {
        let base = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        path.with_file_name(format!(".{base}.madmpi-shfp"))
    };
    // Rank 0 creates the file (alone: MPI_MODE_EXCL fails for all but one creator), then the
    // others open it.
    let first = if rank == 0 {
        let r = open_local(&path, amode, true, perm);
        if r.is_ok() {
            let _ = std::fs::remove_file(&shfp_path);
        }
        Some(r)
    } else {
        None
    };
    let first = agree(dup, first.transpose())?;
    let opened = match first {
        Some(x) => Ok(x),
        None => open_local(&path, amode, false, perm),
    };
    let (f, can_read) = agree(dup, opened)?;
    let pos = if amode & MPI_MODE_APPEND != 0 {
        f.metadata().map(|m| m.len() as i64).unwrap_or(0)
    } else {
        0
    };
    let obj = FileObj {
        comm: dup,
        rank,
        size,
        nodes: node_ranks(dup)?,
        path,
        f,
        amode,
        can_read,
        shfp_path,
        st: Mutex::new(FileState {
            errh: {
                let e = NULL_ERRH.load(Relaxed);
                handles::errh_ref(e);
                e
            },
            view: Arc::new(View::default_view()),
            pos,
            atomic: false,
            info: pairs,
            split: None,
            shfp: None,
        }),
        scratch: Mutex::new(Default::default()),
    };
    if amode & MPI_MODE_APPEND != 0 {
        madmpi::barrier(dup)?;
        if rank == 0 {
            shared::write_shared(&obj, pos)?;
        }
        madmpi::barrier(dup)?;
    }
    register(obj)
}

pub unsafe fn MPI_File_close(fh: *mut MPI_File) -> c_int {
    let h = if fh.is_null() {
        MPI_FILE_NULL
    } else {
        unsafe { *fh }
    };
    let r = (|| {
        let f = file(h)?;
        madmpi::barrier(f.comm)?;
        unregister(h)?;
        let st = f.st.lock();
        handles::errh_unref(st.errh);
        drop(st);
        let mut gone = Ok(());
        if f.rank == 0 {
            let _ = std::fs::remove_file(&f.shfp_path);
            if f.amode & MPI_MODE_DELETE_ON_CLOSE != 0 {
                gone = std::fs::remove_file(&f.path)
                    .map_err(|e| os_err(e, &format!("cannot delete {}", f.path.display())));
            }
        }
        // Deleted for everyone once the call returns.
        let gone = agree(f.comm, gone);
        madmpi::free_comm(f.comm)?;
        // SAFETY: checked non-null by the lookup above (a null fh is MPI_FILE_NULL).
        unsafe { *fh = MPI_FILE_NULL };
        gone
    })();
    done(h, &call_of("MPI_File_close", h), r)
}

pub unsafe fn MPI_File_delete(filename: *const c_char, info: MPI_Info) -> c_int {
    let r = (|| {
        running()?;
        if info != MPI_INFO_NULL {
            info::pairs(info)?;
        }
        let p = path_of(&cstr(filename, "filename")?)?;
        std::fs::remove_file(&p).map_err(|e| os_err(e, &format!("cannot delete {}", p.display())))
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(MPI_FILE_NULL, &|| "MPI_File_delete".to_string(), e),
    }
}

fn writable(f: &FileObj) -> IoR<()> {
    if f.amode & MPI_MODE_RDONLY != 0 {
        return Err(ioerr(
            MPI_ERR_READ_ONLY,
            "the file was opened MPI_MODE_RDONLY",
        ));
    }
    Ok(())
}

fn size_arg(size: MPI_Offset) -> IoR<u64> {
    u64::try_from(size).map_err(|_| ioerr(MPI_ERR_ARG, format!("invalid size {size}")))
}

pub unsafe fn MPI_File_set_size(fh: MPI_File, size: MPI_Offset) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        let local = size_arg(size).and_then(|s| {
            writable(&f)?;
            if f.amode & MPI_MODE_SEQUENTIAL != 0 {
                return Err(ioerr(
                    MPI_ERR_UNSUPPORTED_OPERATION,
                    "MPI_File_set_size on a sequential file",
                ));
            }
            if f.rank == 0 {
                f.f.set_len(s).map_err(|e| os_err(e, "set size"))?;
            }
            Ok(())
        });
        agree(f.comm, local)
    })();
    done(fh, &call_of("MPI_File_set_size", fh), r)
}

pub unsafe fn MPI_File_preallocate(fh: MPI_File, size: MPI_Offset) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        let local = size_arg(size).and_then(|s| {
            writable(&f)?;
            if f.rank == 0 && s > 0 {
                // SAFETY: posix_fallocate on a descriptor we own.
                let rc = unsafe { libc::posix_fallocate(f.fd(), 0, s as libc::off_t) };
                if rc == libc::EOPNOTSUPP || rc == libc::EINVAL {
                    // A file system without it: at least make the file that long.
                    if f.f.metadata().map_err(|e| os_err(e, "stat"))?.len() < s {
                        f.f.set_len(s).map_err(|e| os_err(e, "set size"))?;
                    }
                } else if rc != 0 {
                    return Err(os_err(std::io::Error::from_raw_os_error(rc), "preallocate"));
                }
            }
            Ok(())
        });
        agree(f.comm, local)
    })();
    done(fh, &call_of("MPI_File_preallocate", fh), r)
}

pub unsafe fn MPI_File_get_size(fh: MPI_File, size: *mut MPI_Offset) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        let m = f.f.metadata().map_err(|e| os_err(e, "stat"))?;
        *out(size, "size")? = m.size() as MPI_Offset;
        Ok(())
    })();
    done(fh, &call_of("MPI_File_get_size", fh), r)
}

pub unsafe fn MPI_File_sync(fh: MPI_File) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        let local = if f.amode & MPI_MODE_RDONLY != 0 {
            Ok(())
        } else {
            f.f.sync_all().map_err(|e| os_err(e, "sync"))
        };
        agree(f.comm, local)
    })();
    done(fh, &call_of("MPI_File_sync", fh), r)
}

pub unsafe fn MPI_File_get_amode(fh: MPI_File, amode: *mut c_int) -> c_int {
    let r = file(fh).and_then(|f| {
        *out(amode, "amode")? = f.amode;
        Ok(())
    });
    done(fh, &call_of("MPI_File_get_amode", fh), r)
}

pub unsafe fn MPI_File_get_group(fh: MPI_File, group: *mut MPI_Group) -> c_int {
    let r = file(fh).and_then(|f| {
        let o = out(group, "group")?;
        *o = new_group(madmpi::comm_info(f.comm)?.local.into())?;
        Ok(())
    });
    done(fh, &call_of("MPI_File_get_group", fh), r)
}

pub unsafe fn MPI_File_set_info(fh: MPI_File, info: MPI_Info) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        let p = if info == MPI_INFO_NULL {
            Ok(Vec::new())
        } else {
            info::pairs(info).map_err(IoErr::from)
        };
        let p = agree(f.comm, p)?;
        let mut st = f.st.lock();
        for (k, v) in p {
            set_hint(&mut st.info, &k, &v);
        }
        Ok(())
    })();
    done(fh, &call_of("MPI_File_set_info", fh), r)
}

pub unsafe fn MPI_File_get_info(fh: MPI_File, info_used_out: *mut MPI_Info) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        let o = out(info_used_out, "info_used")?;
        let p = f.st.lock().info.clone();
        *o = info::new_info(info_used(&f, &p))?;
        Ok(())
    })();
    done(fh, &call_of("MPI_File_get_info", fh), r)
}

pub unsafe fn MPI_File_set_atomicity(fh: MPI_File, flag: c_int) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        let all_same = allreduce_i64(f.comm, (flag != 0) as i64, madmpi::BuiltinOp::Sum)?;
        if all_same != 0 && all_same != f.size as i64 {
            return Err(ioerr(
                MPI_ERR_NOT_SAME,
                "MPI_File_set_atomicity: flags differ between processes",
            ));
        }
        f.st.lock().atomic = flag != 0;
        Ok(())
    })();
    done(fh, &call_of("MPI_File_set_atomicity", fh), r)
}

pub unsafe fn MPI_File_get_atomicity(fh: MPI_File, flag: *mut c_int) -> c_int {
    let r = file(fh).and_then(|f| {
        *out(flag, "flag")? = f.st.lock().atomic as c_int;
        Ok(())
    });
    done(fh, &call_of("MPI_File_get_atomicity", fh), r)
}

// ------------------------------------------------------------------------------------ handlers

pub unsafe fn MPI_File_create_errhandler(
    file_errhandler_fn: MPI_File_errhandler_function,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    let r = (|| {
        running()?;
        let o = out(errhandler, "errhandler")?;
        let Some(f) = file_errhandler_fn else {
            return Err(ioerr(
                MPI_ERR_ARG,
                "invalid argument: file_errhandler_fn is NULL",
            ));
        };
        *o = handles::new_errhandler(ErrhFn::File(f))?;
        Ok(())
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise(
            MPI_FILE_NULL,
            &|| "MPI_File_create_errhandler".to_string(),
            e,
        ),
    }
}

pub unsafe fn MPI_File_set_errhandler(fh: MPI_File, errhandler: MPI_Errhandler) -> c_int {
    let r = (|| {
        running()?;
        if let Errh::User(ErrhFn::Comm(_) | ErrhFn::Win(_) | ErrhFn::Session(_)) =
            handles::errhandler(errhandler)?
        {
            return Err(ioerr(
                MPI_ERR_ARG,
                "the error handler was not created for files (MPI_File_create_errhandler)",
            ));
        }
        let e = errhandler as usize;
        handles::errh_ref(e);
        let old = if fh == MPI_FILE_NULL {
            NULL_ERRH.swap(e, Relaxed)
        } else {
            match file(fh) {
                Ok(f) => std::mem::replace(&mut f.st.lock().errh, e),
                Err(x) => {
                    handles::errh_unref(e);
                    return Err(x);
                }
            }
        };
        handles::errh_unref(old);
        Ok(())
    })();
    done(fh, &call_of("MPI_File_set_errhandler", fh), r)
}

pub unsafe fn MPI_File_get_errhandler(fh: MPI_File, errhandler: *mut MPI_Errhandler) -> c_int {
    let r = (|| {
        running()?;
        let o = out(errhandler, "errhandler")?;
        let e = if fh == MPI_FILE_NULL {
            NULL_ERRH.load(Relaxed)
        } else {
            file(fh)?.st.lock().errh
        };
        handles::errh_ref(e);
        *o = e as MPI_Errhandler;
        Ok(())
    })();
    done(fh, &call_of("MPI_File_get_errhandler", fh), r)
}

pub unsafe fn MPI_File_call_errhandler(fh: MPI_File, errorcode: c_int) -> c_int {
    if let Err(e) = running() {
        return raise(MPI_FILE_NULL, &|| "MPI_File_call_errhandler".to_string(), e);
    }
    if fh != MPI_FILE_NULL && file(fh).is_err() {
        return raise(
            MPI_FILE_NULL,
            &|| "MPI_File_call_errhandler".to_string(),
            ioerr(MPI_ERR_FILE, "invalid file handle"),
        );
    }
    let why = errors::code_string(errorcode).unwrap_or_else(|| format!("error code {errorcode}"));
    raise(
        fh,
        &|| format!("MPI_File_call_errhandler(errorcode={errorcode})"),
        ioerr(errorcode, why),
    );
    MPI_SUCCESS
}
