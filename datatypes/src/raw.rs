//! The one module that reads and writes raw user memory: pack and unpack (native and
//! `external32`).
//!
//! Everything else in the crate computes offsets; here they are applied to the caller's pointer.
//! The contract, stated once: **a buffer passed here must be valid, for reads (pack) or writes
//! (unpack), at every byte the datatype describes for the given count** — the range
//! [`Datatype::buffer_span`] reports — with the data bytes initialized for reads, and must not
//! be accessed by anything else during the call. Displacements may be negative: the pointer must
//! carry the provenance of the whole allocation (e.g. `vec.as_ptr().add(origin)`, not
//! `vec[origin..].as_ptr()`). A null buffer is `MPI_BOTTOM`: the displacements are then absolute
//! addresses from [`get_address`](crate::get_address). For a non-blocking operation this is the MPI
//! rule that the buffer stays valid and untouched until the request completes.
#![allow(unsafe_code)]

use crate::datatype::Datatype;
use crate::error::{Error, Result};
use crate::external32::{decode, encode};
use crate::node::{Kind, Node};
use crate::segments::{flat_runs, Runs};
use crate::signature::SigCursor;

/// Copies `len` bytes, with fixed-size moves for the small lengths strided types produce.
///
/// # Safety
/// `src` valid for reading and `dst` for writing `len` bytes; the ranges do not overlap.
#[inline(always)]
unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller guarantees both ranges; unaligned accesses are used because user data
    // has no alignment guarantee at an arbitrary offset of the stream.
    unsafe {
        match len {
            4 => dst
                .cast::<u32>()
                .write_unaligned(src.cast::<u32>().read_unaligned()),
            8 => dst
                .cast::<u64>()
                .write_unaligned(src.cast::<u64>().read_unaligned()),
            16 => dst
                .cast::<u128>()
                .write_unaligned(src.cast::<u128>().read_unaligned()),
            _ => std::ptr::copy_nonoverlapping(src, dst, len),
        }
    }
}

/// `base + off`. A null `base` is `MPI_BOTTOM`: `off` is then an absolute address obtained
/// with [`get_address`](crate::get_address), which exposed its provenance, and the pointer is
/// rebuilt from it; otherwise the arithmetic keeps `base`'s provenance.
#[inline(always)]
fn at(base: *mut u8, off: isize) -> *mut u8 {
    if base.is_null() {
        off as usize as *mut u8
    } else {
        base.wrapping_offset(off)
    }
}

/// Direction of a native copy.
#[derive(Clone, Copy)]
enum Dir {
    /// User memory → stream.
    Pack,
    /// Stream → user memory.
    Unpack,
}

impl Datatype {
    /// Packs bytes `[offset, offset + out.len())` of the packed stream of `count` elements at
    /// `src` into `out`; returns the bytes written (fewer at the end of the stream, 0 past it).
    /// Any part of the stream may be packed on its own: packing it in pieces gives the same
    /// bytes as packing it whole.
    ///
    /// # Safety
    /// `src` must be valid for reads at every byte the type describes for `count` elements
    /// (see [`buffer_span`](Self::buffer_span)), and those bytes initialized; see the module
    /// documentation of `raw`.
    pub unsafe fn pack(
        &self,
        src: *const u8,
        count: usize,
        offset: usize,
        out: &mut [u8],
    ) -> usize {
        // SAFETY: forwarded contract; `Dir::Pack` only reads through `src`.
        unsafe {
            self.copy_stream(
                src as *mut u8,
                count,
                offset,
                out.as_mut_ptr(),
                out.len(),
                Dir::Pack,
            )
        }
    }

    /// Unpacks `input` as bytes `[offset, offset + input.len())` of the packed stream of `count`
    /// elements into `dst`; returns the bytes consumed (fewer at the end of the stream).
    ///
    /// # Safety
    /// `dst` must be valid for writes at every byte the type describes for `count` elements
    /// (see [`buffer_span`](Self::buffer_span)), and not overlap `input`.
    pub unsafe fn unpack(&self, dst: *mut u8, count: usize, offset: usize, input: &[u8]) -> usize {
        // SAFETY: forwarded contract; `Dir::Unpack` only reads from `input`.
        unsafe {
            self.copy_stream(
                dst,
                count,
                offset,
                input.as_ptr() as *mut u8,
                input.len(),
                Dir::Unpack,
            )
        }
    }

    /// `MPI_Pack`: packs all `count` elements at `out[*position..]` and advances `position`;
    /// [`Error::Truncate`] (and nothing written) when they do not fit.
    ///
    /// # Safety
    /// As [`pack`](Self::pack).
    pub unsafe fn pack_checked(
        &self,
        src: *const u8,
        count: usize,
        out: &mut [u8],
        position: &mut usize,
    ) -> Result<()> {
        self.buffer_span(count)?;
        let needed = self.pack_size(count)?;
        let room = space(out.len(), *position, needed, "pack output buffer")?;
        // SAFETY: forwarded contract.
        let n = unsafe { self.pack(src, count, 0, &mut out[*position..*position + room]) };
        *position += n;
        Ok(())
    }

    /// `MPI_Unpack`: unpacks `count` elements from `input[*position..]` and advances `position`;
    /// [`Error::Truncate`] (and nothing written) when `input` holds fewer bytes.
    ///
    /// # Safety
    /// As [`unpack`](Self::unpack).
    pub unsafe fn unpack_checked(
        &self,
        input: &[u8],
        position: &mut usize,
        dst: *mut u8,
        count: usize,
    ) -> Result<()> {
        self.buffer_span(count)?;
        let needed = self.pack_size(count)?;
        let room = space(input.len(), *position, needed, "unpack input buffer")?;
        // SAFETY: forwarded contract.
        let n = unsafe { self.unpack(dst, count, 0, &input[*position..*position + room]) };
        *position += n;
        Ok(())
    }

    /// `MPI_Pack_external("external32", …)`: packs `count` elements big-endian, with the
    /// external32 sizes, at `out[*position..]`, and advances `position`. Nothing is written on
    /// error.
    ///
    /// # Safety
    /// As [`pack`](Self::pack).
    pub unsafe fn pack_external(
        &self,
        src: *const u8,
        count: usize,
        out: &mut [u8],
        position: &mut usize,
    ) -> Result<()> {
        self.buffer_span(count)?;
        let needed = self.pack_external_size(count)?;
        space(out.len(), *position, needed, "pack_external output buffer")?;
        let out = &mut out[*position..*position + needed];
        let mut segs = self.segments(count, 0..usize::MAX);
        let (mut off, mut len) = (0isize, 0usize);
        let mut p = 0usize;
        for (b, n) in SigCursor::new(&self.0.sig, count) {
            let (conv, _) = b.conv();
            let (nsz, esz) = (b.size(), b.external32_size());
            let mut left = n;
            while left > 0 {
                if len == 0 {
                    (off, len) = segs.next().ok_or_else(internal)?;
                }
                let take = left.min(len / nsz);
                if take == 0 {
                    return Err(internal());
                }
                // SAFETY: `off..off + take * nsz` is a data segment of the type, readable and
                // initialized by the caller's contract.
                let native =
                    unsafe { std::slice::from_raw_parts(src.wrapping_offset(off), take * nsz) };
                encode(conv, native, &mut out[p..p + take * esz])?;
                off = off.wrapping_add((take * nsz) as isize);
                len -= take * nsz;
                left -= take;
                p += take * esz;
            }
        }
        *position += needed;
        Ok(())
    }

    /// `MPI_Unpack_external("external32", …)`: unpacks `count` elements from
    /// `input[*position..]` into `dst` and advances `position`.
    ///
    /// # Safety
    /// As [`unpack`](Self::unpack).
    pub unsafe fn unpack_external(
        &self,
        input: &[u8],
        position: &mut usize,
        dst: *mut u8,
        count: usize,
    ) -> Result<()> {
        self.buffer_span(count)?;
        let needed = self.pack_external_size(count)?;
        space(
            input.len(),
            *position,
            needed,
            "unpack_external input buffer",
        )?;
        let input = &input[*position..*position + needed];
        let mut segs = self.segments(count, 0..usize::MAX);
        let (mut off, mut len) = (0isize, 0usize);
        let mut p = 0usize;
        for (b, n) in SigCursor::new(&self.0.sig, count) {
            let (conv, _) = b.conv();
            let (nsz, esz) = (b.size(), b.external32_size());
            let mut left = n;
            while left > 0 {
                if len == 0 {
                    (off, len) = segs.next().ok_or_else(internal)?;
                }
                let take = left.min(len / nsz);
                if take == 0 {
                    return Err(internal());
                }
                // SAFETY: `off..off + take * nsz` is a data segment of the type, writable by the
                // caller's contract and not aliased by `input`.
                let native = unsafe { std::slice::from_raw_parts_mut(at(dst, off), take * nsz) };
                decode(conv, &input[p..p + take * esz], native)?;
                off = off.wrapping_add((take * nsz) as isize);
                len -= take * nsz;
                left -= take;
                p += take * esz;
            }
        }
        *position += needed;
        Ok(())
    }

    /// Copies bytes `[offset, offset + len)` of the stream between user memory at `user` and
    /// the stream buffer `stream`, in direction `dir`; returns the bytes copied.
    ///
    /// # Safety
    /// `user` as in `pack`/`unpack`; `stream` valid for `len` bytes (read for `Unpack`, written
    /// for `Pack`) and not overlapping the user bytes.
    unsafe fn copy_stream(
        &self,
        user: *mut u8,
        count: usize,
        offset: usize,
        stream: *mut u8,
        len: usize,
        dir: Dir,
    ) -> usize {
        let total = count.saturating_mul(self.size());
        if offset >= total || len == 0 {
            return 0;
        }
        let n = len.min(total - offset);
        let step = |off: isize, pos: usize, l: usize| {
            let u = at(user, off);
            let s = stream.wrapping_add(pos);
            // SAFETY: `off..off + l` is a data segment of the type (valid by the caller's
            // contract) and `pos + l <= n <= len` stays inside the stream buffer.
            unsafe {
                match dir {
                    Dir::Pack => copy(u, s, l),
                    Dir::Unpack => copy(s, u, l),
                }
            }
        };
        if let Some((off, _)) = self.contiguous_span(count) {
            step(off.wrapping_add(offset as isize), 0, n);
            return n;
        }
        // one-level layouts (every block one run): loop over instances and blocks directly, with
        // the loop specialized per layout kind
        let node = &*self.0.node;
        if let Some(runs) = flat_runs(node) {
            let extent = self.extent();
            let nblocks = node.nblocks().max(1);
            return match runs {
                Runs::One { off, len } => {
                    flat_loop(node, offset, n, extent, 1, |_| (off, len), step)
                }
                Runs::Strided { .. } => {
                    flat_loop(node, offset, n, extent, nblocks, |j| runs.get(j), step)
                }
                Runs::Blocks { .. } => {
                    flat_loop(node, offset, n, extent, nblocks, |j| runs.get(j), step)
                }
                Runs::Varying { .. } => {
                    flat_loop(node, offset, n, extent, nblocks, |j| runs.get(j), step)
                }
            };
        }
        let mut pos = 0;
        for (off, l) in self.segments(count, offset..offset + n) {
            step(off, pos, l);
            pos += l;
        }
        pos
    }
}

/// Copies stream bytes `[offset, offset + n)` of a layout whose blocks are single runs:
/// `block(j)` is the `(displacement, length)` of block `j` of one instance.
#[inline(always)]
fn flat_loop(
    node: &Node,
    offset: usize,
    n: usize,
    extent: isize,
    nblocks: usize,
    block: impl Fn(usize) -> (isize, usize),
    mut step: impl FnMut(isize, usize, usize),
) -> usize {
    let (mut inst, within) = (offset / node.size, offset % node.size);
    let (mut j, mut skip) = match node.kind {
        Kind::Leaf { .. } => (0, within),
        _ => {
            let (j, i, rem) = node.locate(within);
            let unit = node.block(j).2.size;
            (j, i * unit + rem)
        }
    };
    let mut base = (inst as isize).wrapping_mul(extent);
    let mut pos = 0;
    while pos < n {
        let (d, len) = block(j);
        let l = (len - skip).min(n - pos);
        step(base.wrapping_add(d).wrapping_add(skip as isize), pos, l);
        pos += l;
        skip = 0;
        j += 1;
        if j == nblocks {
            j = 0;
            inst += 1;
            base = (inst as isize).wrapping_mul(extent);
        }
    }
    n
}

fn space(have: usize, position: usize, needed: usize, what: &'static str) -> Result<usize> {
    let available = have.saturating_sub(position);
    if position > have || available < needed {
        return Err(Error::Truncate {
            what,
            needed,
            available,
        });
    }
    Ok(needed)
}

fn internal() -> Error {
    Error::Conversion("internal: the type signature and layout disagree".into())
}
