//! File views and data representations.
//!
//! A view is a displacement, an etype and a filetype: the file's data, seen through it, is the
//! stream of the filetype's data bytes tiled from the displacement. Positions (offsets, file
//! pointers) count etypes of that stream. In `native` (and `internal`, which is native here)
//! the stream holds memory's bytes; in `external32` each value is stored big-endian with its
//! external32 size; a representation of MPI_Register_datarep stores what its conversion
//! functions make, each value taking the extent its extent function gives.
//!
//! Where a representation changes the size of the etype, the filetype's layout cannot be read
//! off its memory layout: such a view needs a filetype without holes (its data contiguous from
//! 0), and its stream is then laid out densely from the displacement.

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::Arc;

use madmpi::Datatype;
use madmpi_datatypes::Basic;
use parking_lot::{const_mutex, Mutex};

use super::super::common::copy_cstr;
use super::super::info;
use super::*;
use crate::abi::*;
use crate::handles;

/// A data representation of MPI_Register_datarep.
pub(crate) struct UserRep {
    pub name: String,
    pub read: Conv,
    pub write: Conv,
    pub extent: MPI_Datarep_extent_function,
    pub extra: *mut c_void,
}

// SAFETY: `extra` is the application's pointer, handed back to its own callbacks.
unsafe impl Send for UserRep {}
// SAFETY: as above; the callbacks are the application's to make thread-safe.
unsafe impl Sync for UserRep {}

/// A conversion function, with an `int` or an `MPI_Count` count.
#[derive(Clone, Copy)]
pub(crate) enum Conv {
    Int(MPI_Datarep_conversion_function),
    Big(MPI_Datarep_conversion_function_c),
}

impl Conv {
    fn is_null(self) -> bool {
        match self {
            Conv::Int(f) => f.is_none(),
            Conv::Big(f) => f.is_none(),
        }
    }

    /// Call it: `count` elements of `dt` between `user` and `filebuf`.
    pub fn call(
        self,
        user: *mut c_void,
        dt: MPI_Datatype,
        count: usize,
        filebuf: *mut c_void,
        extra: *mut c_void,
    ) -> IoR<()> {
        // SAFETY: the application's conversion function with its own state and buffers the
        // size the representation's extents say.
        let rc = unsafe {
            match self {
                Conv::Int(Some(f)) => {
                    let n = c_int::try_from(count).map_err(|_| {
                        ioerr(
                            MPI_ERR_COUNT,
                            "count too large for an int conversion function",
                        )
                    })?;
                    f(user, dt, n, filebuf, 0, extra)
                }
                Conv::Big(Some(f)) => f(user, dt, count as MPI_Count, filebuf, 0, extra),
                _ => MPI_SUCCESS,
            }
        };
        if rc != MPI_SUCCESS {
            return Err(ioerr(
                MPI_ERR_CONVERSION,
                format!("the data representation's conversion function returned {rc}"),
            ));
        }
        Ok(())
    }
}

static DATAREPS: Mutex<Option<HashMap<String, Arc<UserRep>>>> = const_mutex(None);

/// The data representation of a view.
#[derive(Clone)]
pub(crate) enum Rep {
    Native,
    Internal,
    External32,
    User(Arc<UserRep>),
}

impl Rep {
    fn name(&self) -> &str {
        match self {
            Rep::Native => "native",
            Rep::Internal => "internal",
            Rep::External32 => "external32",
            Rep::User(u) => &u.name,
        }
    }

    /// Whether file bytes are memory bytes.
    pub fn is_native(&self) -> bool {
        match self {
            Rep::Native | Rep::Internal => true,
            Rep::External32 => false,
            Rep::User(u) => u.read.is_null() && u.write.is_null(),
        }
    }

    /// Bytes `count` elements of `dt` take in the file.
    pub fn file_size(&self, dt: &Datatype, dth: MPI_Datatype, count: usize) -> IoR<usize> {
        match self {
            Rep::Native | Rep::Internal => Ok(dt.size() * count),
            Rep::External32 => Ok(dt.pack_external_size(count)?),
            Rep::User(u) => {
                if u.read.is_null() && u.write.is_null() {
                    return Ok(dt.size() * count);
                }
                Ok(user_extent(u, dt, dth)? * count)
            }
        }
    }
}

/// The file size of one element of `dt` in a user representation: the sum, over its basic
/// elements, of the extent function's answer.
fn user_extent(u: &UserRep, dt: &Datatype, dth: MPI_Datatype) -> IoR<usize> {
    let ask = |h: MPI_Datatype| -> IoR<usize> {
        let Some(f) = u.extent else {
            return Err(ioerr(
                MPI_ERR_CONVERSION,
                "the data representation has no extent function",
            ));
        };
        let mut ext: MPI_Aint = 0;
        // SAFETY: the application's callback with its own state.
        let rc = unsafe { f(h, &mut ext, u.extra) };
        if rc != MPI_SUCCESS || ext < 0 {
            return Err(ioerr(
                MPI_ERR_CONVERSION,
                format!("the data representation's extent function returned {rc}"),
            ));
        }
        Ok(ext as usize)
    };
    if dt.is_predefined() {
        return ask(dth);
    }
    match dt.uniform_element() {
        Some((b, n)) => Ok(ask(handles::basic_handle(b))? * n),
        None => Err(ioerr(
            MPI_ERR_UNSUPPORTED_DATAREP,
            "a user data representation needs datatypes of one basic type",
        )),
    }
}

/// A file view.
pub(crate) struct View {
    pub disp: i64,
    pub etype: Datatype,
    pub etype_h: MPI_Datatype,
    pub filetype: Datatype,
    pub filetype_h: MPI_Datatype,
    pub rep: Rep,
    /// File bytes of one etype.
    pub esize: usize,
    /// The filetype's memory layout is its file layout (else: dense from `disp`).
    pub native_layout: bool,
}

// SAFETY: the datatype handles are values, never dereferenced.
unsafe impl Send for View {}
// SAFETY: as above.
unsafe impl Sync for View {}

impl View {
    /// The default view: displacement 0, bytes, native.
    pub fn default_view() -> View {
        View {
            disp: 0,
            etype: Datatype::basic(Basic::Byte),
            etype_h: MPI_BYTE,
            filetype: Datatype::basic(Basic::Byte),
            filetype_h: MPI_BYTE,
            rep: Rep::Native,
            esize: 1,
            native_layout: true,
        }
    }

    /// Whether the view's stream is the file's bytes from `disp` on.
    pub fn is_contiguous(&self) -> bool {
        !self.native_layout
            || (self.filetype.is_contiguous()
                && self.filetype.lb() == 0
                && self.filetype.true_lb() == 0
                && self.filetype.extent() == self.filetype.size() as isize)
    }

    /// Call `f(file offset, length)` for the file segments of stream bytes `[a, b)`, in
    /// stream order.
    pub fn segments(&self, a: u64, b: u64, mut f: impl FnMut(u64, usize) -> IoR<()>) -> IoR<()> {
        if b <= a {
            return Ok(());
        }
        if self.is_contiguous() {
            return f(self.disp as u64 + a, (b - a) as usize);
        }
        let size = self.filetype.size() as u64;
        let tiles = b.div_ceil(size) as usize;
        for (off, len) in self.filetype.segments(tiles, a as usize..b as usize) {
            let o = self.disp + off as i64;
            if o < 0 {
                return Err(ioerr(
                    MPI_ERR_ARG,
                    "the view reaches before the start of the file",
                ));
            }
            f(o as u64, len)?;
        }
        Ok(())
    }

    /// The absolute byte offset of stream byte `a` (where data at position `a` lives, or
    /// would).
    pub fn byte_offset(&self, a: u64) -> IoR<i64> {
        let mut first = None;
        self.segments(a, a + 1, |o, _| {
            first.get_or_insert(o);
            Ok(())
        })?;
        Ok(first.map(|o| o as i64).unwrap_or(self.disp))
    }
}

fn rep_of(name: &str) -> IoR<Rep> {
    match name {
        "native" => Ok(Rep::Native),
        "internal" => Ok(Rep::Internal),
        "external32" => Ok(Rep::External32),
        _ => DATAREPS
            .lock()
            .as_ref()
            .and_then(|m| m.get(name).cloned())
            .map(Rep::User)
            .ok_or_else(|| {
                ioerr(
                    MPI_ERR_UNSUPPORTED_DATAREP,
                    format!(
                        "unknown data representation {name:?} (known: native, internal, \
                         external32, and those of MPI_Register_datarep)"
                    ),
                )
            }),
    }
}

fn committed(dt: MPI_Datatype, what: &str) -> IoR<Datatype> {
    let d = handles::datatype(dt)?;
    if !d.is_committed() {
        return Err(ioerr(MPI_ERR_TYPE, format!("the {what} is not committed")));
    }
    Ok((*d).clone())
}

/// The layout rule of etypes and filetypes (MPI-4.1 §14.1.1, §14.3): the displacements of the
/// typemap must be non-negative and monotonically non-decreasing, and in a file opened for
/// writing no two of its pieces may overlap. Checked on the data segments in typemap order,
/// as ROMIO does (a piece starting before the previous one's start is decreasing, one starting
/// before its end overlaps); a violation is `MPI_ERR_IO`, the class MPICH gives.
fn check_typemap(dt: &Datatype, what: &str, writable: bool) -> IoR<()> {
    if dt.true_lb() < 0 {
        return Err(ioerr(
            MPI_ERR_IO,
            format!("the {what} has a negative displacement"),
        ));
    }
    if dt.is_contiguous() {
        return Ok(());
    }
    let mut prev: Option<(isize, usize)> = None;
    for (off, len) in dt.segments(1, 0..dt.size()) {
        if let Some((p, plen)) = prev {
            if off < p {
                return Err(ioerr(
                    MPI_ERR_IO,
                    format!(
                        "the displacements of the {what} decrease ({off} after {p}): they \
                         must be monotonically non-decreasing"
                    ),
                ));
            }
            if writable && off < p + plen as isize {
                return Err(ioerr(
                    MPI_ERR_IO,
                    format!(
                        "the {what} overlaps itself (bytes at {off}), which a file opened \
                         for writing does not allow"
                    ),
                ));
            }
        }
        prev = Some((off, len));
    }
    Ok(())
}

/// Build and check a view.
pub(crate) fn make_view(
    disp: i64,
    etype_h: MPI_Datatype,
    filetype_h: MPI_Datatype,
    rep: Rep,
    writable: bool,
) -> IoR<View> {
    let etype = committed(etype_h, "etype")?;
    let filetype = committed(filetype_h, "filetype")?;
    if etype.size() == 0 {
        return Err(ioerr(MPI_ERR_TYPE, "the etype has no data"));
    }
    if filetype.size() == 0 || filetype.size() % etype.size() != 0 {
        return Err(ioerr(
            MPI_ERR_TYPE,
            format!(
                "the filetype ({} bytes) is not made of whole etypes ({} bytes)",
                filetype.size(),
                etype.size()
            ),
        ));
    }
    if filetype.extent() <= 0 {
        return Err(ioerr(
            MPI_ERR_TYPE,
            "the filetype must have a positive extent",
        ));
    }
    check_typemap(&etype, "etype", writable)?;
    check_typemap(&filetype, "filetype", writable)?;
    if disp < 0 {
        return Err(ioerr(
            MPI_ERR_ARG,
            format!("invalid displacement {disp} (must be >= 0)"),
        ));
    }
    let esize = rep.file_size(&etype, etype_h, 1)?;
    if esize == 0 {
        return Err(ioerr(
            MPI_ERR_UNSUPPORTED_DATAREP,
            "the etype has no size in this data representation",
        ));
    }
    let native_layout = esize == etype.size();
    if !native_layout {
        let dense = filetype.true_lb() == 0 && filetype.is_contiguous();
        if !dense {
            return Err(ioerr(
                MPI_ERR_UNSUPPORTED_DATAREP,
                format!(
                    "data representation {:?} changes the etype's size ({} to {} bytes): \
                     madmpi supports it with filetypes without holes only",
                    rep.name(),
                    etype.size(),
                    esize
                ),
            ));
        }
    }
    Ok(View {
        disp,
        etype,
        etype_h,
        filetype,
        filetype_h,
        rep,
        esize,
        native_layout,
    })
}

/// A C string argument.
pub(crate) fn cstr(p: *const c_char, what: &str) -> IoR<String> {
    if p.is_null() {
        return Err(ioerr(
            MPI_ERR_ARG,
            format!("invalid argument: {what} is NULL"),
        ));
    }
    // SAFETY: a non-null string argument is NUL-terminated (the caller's contract).
    Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

pub unsafe fn MPI_File_set_view(
    fh: MPI_File,
    disp: MPI_Offset,
    etype: MPI_Datatype,
    filetype: MPI_Datatype,
    datarep: *const c_char,
    info: MPI_Info,
) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        let rep = rep_of(&cstr(datarep, "datarep")?)?;
        if info != MPI_INFO_NULL {
            super::super::info::pairs(info)?;
        }
        let seq = f.amode & MPI_MODE_SEQUENTIAL != 0;
        let local = (|| {
            let disp = if disp == MPI_DISPLACEMENT_CURRENT {
                if !seq {
                    return Err(ioerr(
                        MPI_ERR_ARG,
                        "MPI_DISPLACEMENT_CURRENT needs a file opened with MPI_MODE_SEQUENTIAL",
                    ));
                }
                let v = f.st.lock().view.clone();
                let p = shared::read_shared(&f)?;
                v.byte_offset(p as u64 * v.esize as u64)?
            } else {
                disp
            };
            make_view(disp, etype, filetype, rep, f.amode & MPI_MODE_RDONLY == 0)
        })();
        let v = agree(f.comm, local)?;
        // Hints given with the view join the file's.
        let mut extra = Vec::new();
        if info != MPI_INFO_NULL {
            extra = info::pairs(info)?;
        }
        {
            let mut st = f.st.lock();
            st.view = Arc::new(v);
            st.pos = 0;
            for (k, val) in extra {
                file::set_hint(&mut st.info, &k, &val);
            }
        }
        // The shared pointer goes back to 0 too (collectively, after everyone set the view).
        madmpi::barrier(f.comm)?;
        if f.rank == 0 {
            shared::write_shared(&f, 0)?;
        }
        madmpi::barrier(f.comm)?;
        Ok(())
    })();
    done(fh, &call_of("MPI_File_set_view", fh), r)
}

pub unsafe fn MPI_File_get_view(
    fh: MPI_File,
    disp: *mut MPI_Offset,
    etype: *mut MPI_Datatype,
    filetype: *mut MPI_Datatype,
    datarep: *mut c_char,
) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        if disp.is_null() || etype.is_null() || filetype.is_null() || datarep.is_null() {
            return Err(ioerr(MPI_ERR_ARG, "invalid argument: an output is NULL"));
        }
        let v = f.st.lock().view.clone();
        // Derived types come back as new handles the caller frees (the standard).
        let give = |h: MPI_Datatype, d: &Datatype| -> IoR<MPI_Datatype> {
            if d.is_predefined() {
                Ok(h)
            } else {
                Ok(handles::register_datatype(d.clone())?)
            }
        };
        let e = give(v.etype_h, &v.etype)?;
        let t = give(v.filetype_h, &v.filetype)?;
        // SAFETY: checked non-null output arguments.
        unsafe {
            *disp = v.disp;
            *etype = e;
            *filetype = t;
        }
        copy_cstr(v.rep.name(), datarep, MPI_MAX_DATAREP_STRING as usize);
        Ok(())
    })();
    done(fh, &call_of("MPI_File_get_view", fh), r)
}

fn type_extent(fh: MPI_File, dt: MPI_Datatype) -> IoR<i64> {
    let f = file(fh)?;
    let d = handles::datatype(dt)?;
    let v = f.st.lock().view.clone();
    if v.rep.is_native() {
        return Ok(d.extent() as i64);
    }
    let fsize = v.rep.file_size(&d, dt, 1)?;
    if fsize == d.size() {
        return Ok(d.extent() as i64);
    }
    // Another size per value: the extent scales with it (exact for types without holes).
    Ok((d.extent() as i64 * fsize as i64) / d.size().max(1) as i64)
}

pub unsafe fn MPI_File_get_type_extent(
    fh: MPI_File,
    datatype: MPI_Datatype,
    extent: *mut MPI_Aint,
) -> c_int {
    let r = type_extent(fh, datatype).and_then(|e| {
        *super::super::common::out(extent, "extent")? = e as MPI_Aint;
        Ok(())
    });
    done(fh, &call_of("MPI_File_get_type_extent", fh), r)
}

pub unsafe fn MPI_File_get_type_extent_c(
    fh: MPI_File,
    datatype: MPI_Datatype,
    extent: *mut MPI_Count,
) -> c_int {
    let r = type_extent(fh, datatype).and_then(|e| {
        *super::super::common::out(extent, "extent")? = e;
        Ok(())
    });
    done(fh, &call_of("MPI_File_get_type_extent_c", fh), r)
}

pub unsafe fn MPI_File_get_byte_offset(
    fh: MPI_File,
    offset: MPI_Offset,
    disp: *mut MPI_Offset,
) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        if offset < 0 {
            return Err(ioerr(MPI_ERR_ARG, format!("invalid offset {offset}")));
        }
        let v = f.st.lock().view.clone();
        let o = v.byte_offset(offset as u64 * v.esize as u64)?;
        *super::super::common::out(disp, "disp")? = o;
        Ok(())
    })();
    done(fh, &call_of("MPI_File_get_byte_offset", fh), r)
}

fn register_rep(
    name: *const c_char,
    read: Conv,
    write: Conv,
    ext: MPI_Datarep_extent_function,
    extra: *mut c_void,
) -> IoR<()> {
    running()?;
    let name = cstr(name, "datarep")?;
    if name.len() >= MPI_MAX_DATAREP_STRING as usize {
        return Err(ioerr(MPI_ERR_ARG, "data representation name too long"));
    }
    let mut g = DATAREPS.lock();
    let m = g.get_or_insert_with(HashMap::new);
    if matches!(name.as_str(), "native" | "internal" | "external32") || m.contains_key(&name) {
        return Err(ioerr(
            MPI_ERR_DUP_DATAREP,
            format!("data representation {name:?} is already defined"),
        ));
    }
    m.insert(
        name.clone(),
        Arc::new(UserRep {
            name,
            read,
            write,
            extent: ext,
            extra,
        }),
    );
    Ok(())
}

fn finish_rep(name: &'static str, r: IoR<()>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        // Errors of calls without a file go to MPI_FILE_NULL's handler.
        Err(e) => raise(MPI_FILE_NULL, &|| name.to_string(), e),
    }
}

pub unsafe fn MPI_Register_datarep(
    datarep: *const c_char,
    read_conversion_fn: MPI_Datarep_conversion_function,
    write_conversion_fn: MPI_Datarep_conversion_function,
    dtype_file_extent_fn: MPI_Datarep_extent_function,
    extra_state: *mut c_void,
) -> c_int {
    finish_rep(
        "MPI_Register_datarep",
        register_rep(
            datarep,
            Conv::Int(read_conversion_fn),
            Conv::Int(write_conversion_fn),
            dtype_file_extent_fn,
            extra_state,
        ),
    )
}

pub unsafe fn MPI_Register_datarep_c(
    datarep: *const c_char,
    read_conversion_fn: MPI_Datarep_conversion_function_c,
    write_conversion_fn: MPI_Datarep_conversion_function_c,
    dtype_file_extent_fn: MPI_Datarep_extent_function,
    extra_state: *mut c_void,
) -> c_int {
    finish_rep(
        "MPI_Register_datarep_c",
        register_rep(
            datarep,
            Conv::Big(read_conversion_fn),
            Conv::Big(write_conversion_fn),
            dtype_file_extent_fn,
            extra_state,
        ),
    )
}
