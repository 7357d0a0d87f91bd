//! The one module that reads and writes raw user memory: pack and unpack (native and
//! `external32`).
//!
//! Everything else in the crate computes offsets; here they are applied to the caller's pointer.
//! The contract, stated once: **a buffer passed here must be valid, for reads (pack) or writes
//! (unpack), at every byte the datatype describes for the given count** — the range
//! [`Datatype::buffer_span`] reports — with the data bytes initialized for reads, and must not
//! be accessed by anything else during the call. For a non-blocking operation this is the MPI
//! rule that the buffer stays valid and untouched until the request completes.
#![allow(unsafe_code)]

use crate::datatype::Datatype;
use crate::error::{Error, Result};
use crate::external32::{decode, encode};
use crate::node::Kind;
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
                let native =
                    unsafe { std::slice::from_raw_parts_mut(dst.wrapping_offset(off), take * nsz) };
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
            let u = user.wrapping_offset(off);
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
        if let Kind::Vector {
            base,
            count: blocks,
            blocklen,
            stride,
            ref child,
        } = self.0.node.kind
        {
            if child.as_dense_leaf() == Some((0, 1)) {
                // strided fast path: `blocks` runs of `blocklen` bytes per element
                let extent = self.extent();
                let g = offset / blocklen;
                let mut skip = offset % blocklen;
                let (mut inst, mut j) = (g / blocks, g % blocks);
                let mut pos = 0;
                while pos < n {
                    let off = (inst as isize)
                        .wrapping_mul(extent)
                        .wrapping_add(base)
                        .wrapping_add((j as isize).wrapping_mul(stride))
                        .wrapping_add(skip as isize);
                    let l = (blocklen - skip).min(n - pos);
                    step(off, pos, l);
                    pos += l;
                    skip = 0;
                    j += 1;
                    if j == blocks {
                        j = 0;
                        inst += 1;
                    }
                }
                return n;
            }
        }
        let mut pos = 0;
        for (off, l) in self.segments(count, offset..offset + n) {
            step(off, pos, l);
            pos += l;
        }
        pos
    }
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
