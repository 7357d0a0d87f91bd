//! Moving data between memory and a file through a view, on one process.
//!
//! Memory is first turned into the view's *stream* (its data representation's bytes, in the
//! order the datatype lists them): for `native` and a contiguous memory type the user's buffer
//! is the stream, otherwise it is packed (converted for `external32` and user
//! representations). The stream's bytes at view position `pos` are then the file segments the
//! view gives (`View::segments`).
//!
//! Noncontiguous independent access uses *data sieving*: segments close together are read
//! with one `pread` of the span that holds them (`ind_rd_buffer_size` bytes at most), and
//! written by reading the span, patching it and writing it back under an `fcntl` write lock on
//! the span (`ind_wr_buffer_size`), so that processes writing interleaved pieces never lose
//! each other's bytes. In atomic mode the whole range accessed is locked for the call.

use std::borrow::Cow;

use madmpi::Datatype;

use super::file::Hints;
use super::view::{Rep, View};
use super::*;
use crate::abi::*;

/// The memory side of an access: `count` elements of `dt` (handle `dth`) at `buf`.
pub(crate) struct Mem {
    pub buf: *mut u8,
    pub count: usize,
    pub dt: Datatype,
    pub dth: MPI_Datatype,
}

impl Mem {
    /// Memory bytes of the access.
    pub fn bytes(&self) -> usize {
        self.count * self.dt.size()
    }

    /// Stream (file representation) bytes of the access, checking that it is made of whole
    /// etypes.
    pub fn stream_bytes(&self, v: &View) -> IoR<usize> {
        if !self.bytes().is_multiple_of(v.etype.size()) {
            return Err(ioerr(
                MPI_ERR_TYPE,
                format!(
                    "the access ({} bytes) is not made of whole etypes ({} bytes)",
                    self.bytes(),
                    v.etype.size()
                ),
            ));
        }
        v.rep.file_size(&self.dt, self.dth, self.count)
    }

    /// The stream of the data to write.
    pub fn write_stream(&self, v: &View) -> IoR<Cow<'_, [u8]>> {
        let n = self.bytes();
        if n == 0 {
            return Ok(Cow::Borrowed(&[]));
        }
        if v.rep.is_native() {
            if let Some((off, len)) = self.dt.contiguous_span(self.count) {
                // SAFETY: the user's buffer holds the data the type describes (MPI's rule).
                return Ok(Cow::Borrowed(unsafe {
                    std::slice::from_raw_parts(self.buf.wrapping_offset(off), len)
                }));
            }
            let mut out = vec![0u8; n];
            // SAFETY: as above.
            unsafe { self.dt.pack(self.buf, self.count, 0, &mut out) };
            return Ok(Cow::Owned(out));
        }
        let fsize = self.stream_bytes(v)?;
        let mut out = vec![0u8; fsize];
        match &v.rep {
            Rep::External32 => {
                let mut p = 0;
                // SAFETY: as above.
                unsafe {
                    self.dt
                        .pack_external(self.buf, self.count, &mut out, &mut p)?
                };
            }
            Rep::User(u) => {
                u.write.call(
                    self.buf as *mut _,
                    self.dth,
                    self.count,
                    out.as_mut_ptr() as *mut _,
                    u.extra,
                )?;
            }
            Rep::Native | Rep::Internal => unreachable!("native handled above"),
        }
        Ok(Cow::Owned(out))
    }

    /// Read: give `f` a buffer for the stream (the user's own memory when it can be), then
    /// move the `got` bytes it filled to memory. Returns the memory bytes delivered.
    pub fn read_stream(&self, v: &View, f: impl FnOnce(&mut [u8]) -> IoR<usize>) -> IoR<usize> {
        let n = self.bytes();
        if n == 0 {
            // A collective read still takes part.
            f(&mut [])?;
            return Ok(0);
        }
        if v.rep.is_native() {
            if let Some((off, len)) = self.dt.contiguous_span(self.count) {
                // SAFETY: the user's buffer holds the data the type describes, writable.
                let s =
                    unsafe { std::slice::from_raw_parts_mut(self.buf.wrapping_offset(off), len) };
                return f(s);
            }
            let mut tmp = vec![0u8; n];
            let got = f(&mut tmp)?;
            // SAFETY: as above.
            unsafe { self.dt.unpack(self.buf, self.count, 0, &tmp[..got]) };
            return Ok(got);
        }
        let fsize = self.stream_bytes(v)?;
        let mut tmp = vec![0u8; fsize];
        let got = f(&mut tmp)?;
        // Whole elements of the memory type only.
        let per = fsize / self.count;
        let k = got.checked_div(per).unwrap_or(0);
        if k == 0 {
            return Ok(0);
        }
        match &v.rep {
            Rep::External32 => {
                let mut p = 0;
                // SAFETY: as above.
                unsafe {
                    self.dt
                        .unpack_external(&tmp[..k * per], &mut p, self.buf, k)?
                };
            }
            Rep::User(u) => {
                u.read.call(
                    self.buf as *mut _,
                    self.dth,
                    k,
                    tmp.as_mut_ptr() as *mut _,
                    u.extra,
                )?;
            }
            Rep::Native | Rep::Internal => unreachable!("native handled above"),
        }
        Ok(k * self.dt.size())
    }
}

/// The file segments of `len` stream bytes from view position `pos` (etypes).
pub(crate) fn segments_of(v: &View, pos: i64, len: usize) -> IoR<Vec<(u64, usize)>> {
    let a = pos as u64 * v.esize as u64;
    let mut segs = Vec::new();
    v.segments(a, a + len as u64, |o, l| {
        segs.push((o, l));
        Ok(())
    })?;
    Ok(segs)
}

/// Whether segments are in increasing file order without overlap (sieving needs it).
fn sorted(segs: &[(u64, usize)]) -> bool {
    segs.windows(2).all(|w| w[0].0 + w[0].1 as u64 <= w[1].0)
}

fn span(segs: &[(u64, usize)]) -> (u64, u64) {
    let lo = segs.iter().map(|s| s.0).min().unwrap_or(0);
    let hi = segs.iter().map(|s| s.0 + s.1 as u64).max().unwrap_or(0);
    (lo, hi)
}

/// Whether sieving pays: several small pieces.
fn sieve(segs: &[(u64, usize)]) -> bool {
    segs.len() > 1 && {
        let total: usize = segs.iter().map(|s| s.1).sum();
        total / segs.len() < 64 << 10 && sorted(segs)
    }
}

/// The windows of sieving: ranges `[i, j)` of segments whose span fits `cap` bytes (a lone
/// larger segment is a window of its own).
fn windows(segs: &[(u64, usize)], cap: usize) -> Vec<(usize, usize)> {
    let mut w = Vec::new();
    let mut i = 0;
    while i < segs.len() {
        let start = segs[i].0;
        let mut j = i + 1;
        while j < segs.len() && segs[j].0 + segs[j].1 as u64 <= start + cap as u64 {
            j += 1;
        }
        w.push((i, j));
        i = j;
    }
    w
}

/// Write `data` (the stream) to `segs`.
pub(crate) fn write_segs(
    f: &FileObj,
    segs: &[(u64, usize)],
    data: &[u8],
    h: &Hints,
    atomic: bool,
) -> IoR<()> {
    if segs.is_empty() {
        return Ok(());
    }
    let (lo, hi) = span(segs);
    let _all = if atomic {
        Some(RangeLock::new(f.fd(), lo, hi - lo, true)?)
    } else {
        None
    };
    if !(h.ds_write && f.can_read && sieve(segs)) {
        let mut p = 0;
        for &(o, l) in segs {
            pwrite_all(&f.f, &data[p..p + l], o)?;
            p += l;
        }
        return Ok(());
    }
    let mut p = 0;
    let mut buf = Vec::new();
    for (i, j) in windows(segs, h.ind_wr_buffer_size) {
        let start = segs[i].0;
        let end = segs[j - 1].0 + segs[j - 1].1 as u64;
        if j == i + 1 {
            let l = segs[i].1;
            pwrite_all(&f.f, &data[p..p + l], start)?;
            p += l;
            continue;
        }
        let _lock = if atomic {
            None
        } else {
            Some(RangeLock::new(f.fd(), start, end - start, true)?)
        };
        buf.clear();
        buf.resize((end - start) as usize, 0);
        pread_full(&f.f, &mut buf, start)?;
        for &(o, l) in &segs[i..j] {
            let b = (o - start) as usize;
            buf[b..b + l].copy_from_slice(&data[p..p + l]);
            p += l;
        }
        pwrite_all(&f.f, &buf, start)?;
    }
    Ok(())
}

/// Read the stream from `segs` into `out`: the bytes obtained before the end of the file.
pub(crate) fn read_segs(
    f: &FileObj,
    segs: &[(u64, usize)],
    out: &mut [u8],
    h: &Hints,
    atomic: bool,
) -> IoR<usize> {
    if segs.is_empty() {
        return Ok(0);
    }
    let (lo, hi) = span(segs);
    let _all = if atomic {
        Some(RangeLock::new(f.fd(), lo, hi - lo, false)?)
    } else {
        None
    };
    let mut p = 0;
    if !(h.ds_read && sieve(segs)) {
        for &(o, l) in segs {
            let n = pread_full(&f.f, &mut out[p..p + l], o)?;
            p += n;
            if n < l {
                break;
            }
        }
        return Ok(p);
    }
    let mut buf = Vec::new();
    for (i, j) in windows(segs, h.ind_rd_buffer_size) {
        let start = segs[i].0;
        let end = segs[j - 1].0 + segs[j - 1].1 as u64;
        if j == i + 1 {
            let l = segs[i].1;
            let n = pread_full(&f.f, &mut out[p..p + l], start)?;
            p += n;
            if n < l {
                return Ok(p);
            }
            continue;
        }
        buf.clear();
        buf.resize((end - start) as usize, 0);
        let got = pread_full(&f.f, &mut buf, start)? as u64;
        for &(o, l) in &segs[i..j] {
            let b = o - start;
            let avail = got.saturating_sub(b).min(l as u64) as usize;
            out[p..p + avail].copy_from_slice(&buf[b as usize..b as usize + avail]);
            p += avail;
            if avail < l {
                return Ok(p);
            }
        }
    }
    Ok(p)
}
