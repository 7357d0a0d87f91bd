//! The type constructors (`MPI_Type_contiguous` … `MPI_Type_create_darray`). Each validates its
//! arguments, computes the bounds by the type-map rules, compiles the layout and records the
//! arguments for `get_contents`. Counts are `usize` (a binding converts signed counts with
//! [`count_from_i64`](crate::count_from_i64)), displacements and strides `isize`; all
//! arithmetic is checked.

#![forbid(unsafe_code)]

use std::sync::Arc;

use crate::basic::{round_up, Basic};
use crate::datatype::{Acc, Args, Datatype, Distribution, Layout, Order};
use crate::error::{to_isize, Checked, Error, Result};
use crate::node::{Entry, Node};
use crate::signature::Sig;

impl Datatype {
    fn derived(layout: Layout, node: Node, sig: Arc<Sig>, args: Args) -> Datatype {
        Datatype::from_parts(layout, Arc::new(node), sig, args)
    }

    /// `count` copies of `old` (`MPI_Type_contiguous[_c]`).
    pub fn contiguous(count: usize, old: &Datatype) -> Result<Datatype> {
        let t = hvector_parts(1, count, 0, old)?;
        Ok(Datatype::rewrap(
            &t,
            Args::Contiguous {
                count,
                old: old.clone(),
            },
        ))
    }

    /// `count` blocks of `blocklength` copies of `old`, block starts `stride` extents of `old`
    /// apart (`MPI_Type_vector[_c]`).
    pub fn vector(
        count: usize,
        blocklength: usize,
        stride: isize,
        old: &Datatype,
    ) -> Result<Datatype> {
        let bytes = stride.mul_or(old.extent(), "stride")?;
        let t = hvector_parts(count, blocklength, bytes, old)?;
        Ok(Datatype::rewrap(
            &t,
            Args::Vector {
                count,
                blocklen: blocklength,
                stride,
                old: old.clone(),
            },
        ))
    }

    /// Like [`vector`](Self::vector) with the stride in bytes (`MPI_Type_create_hvector[_c]`).
    pub fn create_hvector(
        count: usize,
        blocklength: usize,
        stride: isize,
        old: &Datatype,
    ) -> Result<Datatype> {
        let t = hvector_parts(count, blocklength, stride, old)?;
        Ok(Datatype::rewrap(
            &t,
            Args::Hvector {
                count,
                blocklen: blocklength,
                stride,
                old: old.clone(),
            },
        ))
    }

    /// Blocks of `blocklengths[i]` copies of `old` at `displacements[i]` extents of `old`
    /// (`MPI_Type_indexed[_c]`).
    pub fn indexed(
        blocklengths: &[usize],
        displacements: &[isize],
        old: &Datatype,
    ) -> Result<Datatype> {
        same_len(blocklengths.len(), displacements.len(), "displacements")?;
        let bytes = scale(displacements, old.extent())?;
        let t = indexed_parts(blocklengths, &bytes, old)?;
        Ok(Datatype::rewrap(
            &t,
            Args::Indexed {
                blocklens: blocklengths.into(),
                displs: displacements.into(),
                old: old.clone(),
            },
        ))
    }

    /// Like [`indexed`](Self::indexed) with displacements in bytes
    /// (`MPI_Type_create_hindexed[_c]`).
    pub fn create_hindexed(
        blocklengths: &[usize],
        displacements: &[isize],
        old: &Datatype,
    ) -> Result<Datatype> {
        same_len(blocklengths.len(), displacements.len(), "displacements")?;
        let t = indexed_parts(blocklengths, displacements, old)?;
        Ok(Datatype::rewrap(
            &t,
            Args::Hindexed {
                blocklens: blocklengths.into(),
                displs: displacements.into(),
                old: old.clone(),
            },
        ))
    }

    /// Blocks of `blocklength` copies of `old` at `displacements[i]` extents of `old`
    /// (`MPI_Type_create_indexed_block[_c]`).
    pub fn create_indexed_block(
        blocklength: usize,
        displacements: &[isize],
        old: &Datatype,
    ) -> Result<Datatype> {
        let bytes = scale(displacements, old.extent())?;
        let lens = vec![blocklength; displacements.len()];
        let t = indexed_parts(&lens, &bytes, old)?;
        Ok(Datatype::rewrap(
            &t,
            Args::IndexedBlock {
                blocklen: blocklength,
                displs: displacements.into(),
                old: old.clone(),
            },
        ))
    }

    /// Like [`create_indexed_block`](Self::create_indexed_block) with displacements in bytes
    /// (`MPI_Type_create_hindexed_block[_c]`).
    pub fn create_hindexed_block(
        blocklength: usize,
        displacements: &[isize],
        old: &Datatype,
    ) -> Result<Datatype> {
        let lens = vec![blocklength; displacements.len()];
        let t = indexed_parts(&lens, displacements, old)?;
        Ok(Datatype::rewrap(
            &t,
            Args::HindexedBlock {
                blocklen: blocklength,
                displs: displacements.into(),
                old: old.clone(),
            },
        ))
    }

    /// Blocks of `blocklengths[i]` copies of `types[i]` at byte `displacements[i]`
    /// (`MPI_Type_create_struct[_c]`). Unless a component carries an upper-bound marker (from
    /// `create_resized`), the extent is padded to a multiple of the largest alignment of the
    /// basic types inside, as a C compiler pads a struct.
    pub fn create_struct(
        blocklengths: &[usize],
        displacements: &[isize],
        types: &[Datatype],
    ) -> Result<Datatype> {
        same_len(blocklengths.len(), displacements.len(), "displacements")?;
        same_len(blocklengths.len(), types.len(), "types")?;
        let t = struct_parts(blocklengths, displacements, types)?;
        Ok(Datatype::rewrap(
            &t,
            Args::Struct {
                blocklens: blocklengths.into(),
                displs: displacements.into(),
                types: types.into(),
            },
        ))
    }

    /// `old` with its bounds set to `lb` and `lb + extent` (`MPI_Type_create_resized[_c]`).
    /// The bounds are markers: they survive in types built from this one.
    pub fn create_resized(old: &Datatype, lb: isize, extent: isize) -> Result<Datatype> {
        let t = resized_parts(old, lb, extent)?;
        Ok(Datatype::rewrap(
            &t,
            Args::Resized {
                lb,
                extent,
                old: old.clone(),
            },
        ))
    }

    /// A new type with the same layout (`MPI_Type_dup`); committed if `self` is.
    pub fn dup(&self) -> Datatype {
        let t = Datatype::rewrap(self, Args::Dup(self.clone()));
        if self.is_committed() {
            t.commit();
        }
        t
    }

    /// An `ndims`-dimensional subarray of an array of `old` (`MPI_Type_create_subarray[_c]`).
    /// Its lower bound is 0 and its extent the whole array's.
    pub fn create_subarray(
        sizes: &[usize],
        subsizes: &[usize],
        starts: &[usize],
        order: Order,
        old: &Datatype,
    ) -> Result<Datatype> {
        let n = sizes.len();
        if n == 0 {
            return Err(Error::Arg("subarray: ndims must be positive".into()));
        }
        same_len(n, subsizes.len(), "array_of_subsizes")?;
        same_len(n, starts.len(), "array_of_starts")?;
        for i in 0..n {
            if sizes[i] == 0 {
                return Err(Error::Arg(format!(
                    "subarray: array_of_sizes[{i}] must be positive"
                )));
            }
            let end = starts[i].checked_add(subsizes[i]);
            if end.map_or(true, |e| e > sizes[i]) {
                return Err(Error::Arg(format!(
                    "subarray: dimension {i}: start {} + subsize {} exceeds size {}",
                    starts[i], subsizes[i], sizes[i]
                )));
            }
        }
        // dimensions from the fastest-varying one outwards
        let dims: Vec<usize> = match order {
            Order::C => (0..n).rev().collect(),
            Order::Fortran => (0..n).collect(),
        };
        let ex = old.extent();
        let mut t = hvector_parts(1, subsizes[dims[0]], 0, old)?;
        let mut disp = to_isize(starts[dims[0]], "start")?.mul_or(ex, "subarray displacement")?;
        let mut stride = to_isize(sizes[dims[0]], "size")?.mul_or(ex, "subarray stride")?;
        for &d in &dims[1..] {
            t = hvector_parts(subsizes[d], 1, stride, &t)?;
            let off = to_isize(starts[d], "start")?.mul_or(stride, "subarray displacement")?;
            disp = disp.add_or(off, "subarray displacement")?;
            stride = stride.mul_or(to_isize(sizes[d], "size")?, "subarray extent")?;
        }
        let t = indexed_parts(&[1], &[disp], &t)?;
        let t = resized_parts(&t, 0, stride)?;
        Ok(Datatype::rewrap(
            &t,
            Args::Subarray {
                sizes: sizes.into(),
                subsizes: subsizes.into(),
                starts: starts.into(),
                order,
                old: old.clone(),
            },
        ))
    }

    /// The part owned by process `rank` of a `gsizes` array of `old` distributed over a
    /// `psizes` process grid (row-major ranks, as `MPI_Cart_create`)
    /// (`MPI_Type_create_darray[_c]`). `dargs[i] = None` is `MPI_DISTRIBUTE_DFLT_DARG`. Its
    /// lower bound is 0 and its extent the whole array's.
    #[allow(clippy::too_many_arguments)]
    pub fn create_darray(
        size: usize,
        rank: usize,
        gsizes: &[usize],
        distribs: &[Distribution],
        dargs: &[Option<usize>],
        psizes: &[usize],
        order: Order,
        old: &Datatype,
    ) -> Result<Datatype> {
        let n = gsizes.len();
        if n == 0 {
            return Err(Error::Arg("darray: ndims must be positive".into()));
        }
        same_len(n, distribs.len(), "array_of_distribs")?;
        same_len(n, dargs.len(), "array_of_dargs")?;
        same_len(n, psizes.len(), "array_of_psizes")?;
        let mut procs = 1usize;
        for i in 0..n {
            if gsizes[i] == 0 || psizes[i] == 0 {
                return Err(Error::Arg(format!(
                    "darray: gsize and psize of dimension {i} must be positive"
                )));
            }
            procs = procs.mul_or(psizes[i], "process grid")?;
        }
        if procs != size {
            return Err(Error::Arg(format!(
                "darray: the process grid has {procs} processes, size is {size}"
            )));
        }
        if rank >= size {
            return Err(Error::Arg(format!("darray: rank {rank} >= size {size}")));
        }
        let mut coords = vec![0usize; n];
        let mut r = rank;
        for i in (0..n).rev() {
            coords[i] = r % psizes[i];
            r /= psizes[i];
        }
        let dims: Vec<usize> = match order {
            Order::C => (0..n).rev().collect(),
            Order::Fortran => (0..n).collect(),
        };
        let mut t = old.clone();
        for &d in &dims {
            let (gsize, psize, coord) = (gsizes[d], psizes[d], coords[d]);
            t = match distribs[d] {
                Distribution::None => {
                    if psize != 1 {
                        return Err(Error::Arg(format!(
                            "darray: dimension {d} is not distributed but psize is {psize}"
                        )));
                    }
                    block_dim(gsize, 1, 0, Some(gsize), &t)?
                }
                Distribution::Block => block_dim(gsize, psize, coord, dargs[d], &t)?,
                Distribution::Cyclic => cyclic_dim(gsize, psize, coord, dargs[d], &t)?,
            };
        }
        Ok(Datatype::rewrap(
            &t,
            Args::Darray {
                size,
                rank,
                gsizes: gsizes.into(),
                distribs: distribs.into(),
                dargs: dargs.into(),
                psizes: psizes.into(),
                order,
                old: old.clone(),
            },
        ))
    }

    /// The predefined real type with at least `p` decimal digits and exponent range `r`
    /// (`MPI_Type_create_f90_real`; `None` is `MPI_UNDEFINED`).
    pub fn create_f90_real(p: Option<i32>, r: Option<i32>) -> Result<Datatype> {
        let b = f90_real_kind(p, r)?;
        Ok(f90(b, Args::F90Real { p, r }))
    }

    /// The predefined complex type of [`create_f90_real`](Self::create_f90_real) parts
    /// (`MPI_Type_create_f90_complex`).
    pub fn create_f90_complex(p: Option<i32>, r: Option<i32>) -> Result<Datatype> {
        let b = match f90_real_kind(p, r)? {
            Basic::Real4 => Basic::Complex8,
            Basic::Real8 => Basic::Complex16,
            _ => Basic::Complex32,
        };
        Ok(f90(b, Args::F90Complex { p, r }))
    }

    /// The predefined integer type with at least `r` decimal digits
    /// (`MPI_Type_create_f90_integer`).
    pub fn create_f90_integer(r: Option<i32>) -> Result<Datatype> {
        let b = match r.unwrap_or(9) {
            i32::MIN..=2 => Basic::Integer1,
            3..=4 => Basic::Integer2,
            5..=9 => Basic::Integer4,
            10..=18 => Basic::Integer8,
            19..=38 => Basic::Integer16,
            _ => return Err(Error::Arg(format!("no integer kind with range {r:?}"))),
        };
        Ok(f90(b, Args::F90Integer { r }))
    }

    /// The predefined type of `class` and `size` bytes (`MPI_Type_match_size`).
    pub fn match_size(class: crate::TypeClass, size: usize) -> Result<Datatype> {
        Basic::match_size(class, size)
            .map(Datatype::basic)
            .ok_or_else(|| Error::Arg(format!("no {class:?} type of {size} bytes")))
    }

    /// The `{value, index}` pair type for `MPI_MINLOC`/`MPI_MAXLOC`
    /// (`MPI_Type_get_value_index`): the predefined pair type when one exists (e.g.
    /// `MPI_DOUBLE_INT`), otherwise a new type laid out as the C struct, combiner `VALUE_INDEX`.
    pub fn value_index(value: &Datatype, index: &Datatype) -> Result<Datatype> {
        if let (Some(v), Some(i)) = (value.as_basic(), index.as_basic()) {
            if let Some(pair) = Basic::value_index(v, i) {
                return Ok(Datatype::basic(pair));
            }
        }
        let value_ext = usize::try_from(value.extent())
            .map_err(|_| Error::Type("value type has a negative extent".into()))?;
        let off = to_isize(
            round_up(value_ext, index.0.layout.align),
            "index displacement",
        )?;
        let t = struct_parts(&[1, 1], &[0, off], &[value.clone(), index.clone()])?;
        Ok(Datatype::rewrap(
            &t,
            Args::ValueIndex {
                value: value.clone(),
                index: index.clone(),
            },
        ))
    }
}

fn same_len(expected: usize, got: usize, what: &str) -> Result<()> {
    if expected != got {
        return Err(Error::Arg(format!(
            "{what} has {got} entries, {expected} expected"
        )));
    }
    Ok(())
}

fn scale(displs: &[isize], extent: isize) -> Result<Vec<isize>> {
    displs
        .iter()
        .map(|&d| d.mul_or(extent, "displacement"))
        .collect()
}

/// Layout-only type (arguments recorded by the caller) for `count` blocks of `blocklength`
/// copies of `old`, `stride` bytes apart.
fn hvector_parts(
    count: usize,
    blocklength: usize,
    stride: isize,
    old: &Datatype,
) -> Result<Datatype> {
    let mut acc = Acc::default();
    if count > 0 {
        let span = to_isize(count - 1, "count")?.mul_or(stride, "vector span")?;
        acc.add(count, span.min(0), span.max(0), blocklength, &old.0.layout)?;
    }
    let layout = acc.finish(false)?;
    let node = Node::blocks(0, count, blocklength, stride, &old.0.node, layout.extent())?;
    let total = count.mul_or(blocklength, "count")?;
    Ok(Datatype::derived(
        layout,
        node,
        Sig::repeat(total, &old.0.sig),
        Args::Dup(old.clone()),
    ))
}

fn indexed_parts(blocklengths: &[usize], displs: &[isize], old: &Datatype) -> Result<Datatype> {
    let mut acc = Acc::default();
    let mut total = 0usize;
    for (&k, &d) in blocklengths.iter().zip(displs) {
        acc.add(1, d, d, k, &old.0.layout)?;
        total = total.add_or(k, "count")?;
    }
    let layout = acc.finish(false)?;
    let entries = blocklengths
        .iter()
        .zip(displs)
        .map(|(&k, &d)| (d, k))
        .collect();
    let node = Node::indexed(entries, &old.0.node, layout.extent())?;
    Ok(Datatype::derived(
        layout,
        node,
        Sig::repeat(total, &old.0.sig),
        Args::Dup(old.clone()),
    ))
}

fn struct_parts(blocklengths: &[usize], displs: &[isize], types: &[Datatype]) -> Result<Datatype> {
    let mut acc = Acc::default();
    for ((&k, &d), t) in blocklengths.iter().zip(displs).zip(types) {
        acc.add(1, d, d, k, &t.0.layout)?;
    }
    let layout = acc.finish(true)?;
    let entries = blocklengths
        .iter()
        .zip(displs)
        .zip(types)
        .map(|((&k, &d), t)| Entry {
            disp: d,
            k,
            child: t.0.node.clone(),
        })
        .collect();
    let node = Node::structure(entries, layout.extent())?;
    let sig = Sig::concat(blocklengths.iter().zip(types).map(|(&k, t)| (k, &t.0.sig)));
    let any = types
        .first()
        .cloned()
        .unwrap_or_else(|| Datatype::basic(Basic::Byte));
    Ok(Datatype::derived(layout, node, sig, Args::Dup(any)))
}

fn resized_parts(old: &Datatype, lb: isize, extent: isize) -> Result<Datatype> {
    let ub = lb.add_or(extent, "upper bound")?;
    let layout = Layout {
        lb,
        ub,
        sticky_lb: true,
        sticky_ub: true,
        ..old.0.layout
    };
    let node = old.0.node.with_extent(extent);
    Ok(Datatype::derived(
        layout,
        node,
        old.0.sig.clone(),
        Args::Dup(old.clone()),
    ))
}

/// One block-distributed dimension: `gsize` elements of `t`, this process owning block `coord`
/// of `darg` elements (default: `ceil(gsize / psize)`).
fn block_dim(
    gsize: usize,
    psize: usize,
    coord: usize,
    darg: Option<usize>,
    t: &Datatype,
) -> Result<Datatype> {
    let b = match darg {
        Some(0) => return Err(Error::Arg("darray: block size must be positive".into())),
        Some(b) => b,
        None => gsize.div_ceil(psize),
    };
    if b.checked_mul(psize).is_some_and(|cover| cover < gsize) {
        return Err(Error::Arg(format!(
            "darray: block size {b} over {psize} processes does not cover {gsize} elements"
        )));
    }
    let ex = t.extent();
    let start = coord.saturating_mul(b).min(gsize);
    let mine = b.min(gsize - start);
    let inner = hvector_parts(1, mine, 0, t)?;
    let disp = to_isize(start, "darray")?.mul_or(ex, "darray displacement")?;
    let placed = indexed_parts(&[1], &[disp], &inner)?;
    let full = to_isize(gsize, "darray")?.mul_or(ex, "darray extent")?;
    resized_parts(&placed, 0, full)
}

/// One cyclically distributed dimension: blocks of `darg` elements (default 1) dealt
/// round-robin to the `psize` processes.
fn cyclic_dim(
    gsize: usize,
    psize: usize,
    coord: usize,
    darg: Option<usize>,
    t: &Datatype,
) -> Result<Datatype> {
    let b = match darg {
        Some(0) => {
            return Err(Error::Arg(
                "darray: cyclic block size must be positive".into(),
            ))
        }
        Some(b) => b,
        None => 1,
    };
    let ex = t.extent();
    let nblocks = gsize.div_ceil(b);
    let mine = if coord < nblocks {
        (nblocks - coord).div_ceil(psize)
    } else {
        0
    };
    let full = to_isize(gsize, "darray")?.mul_or(ex, "darray extent")?;
    let stride = to_isize(psize, "darray")?
        .mul_or(to_isize(b, "darray")?, "darray stride")?
        .mul_or(ex, "darray stride")?;
    let first = to_isize(coord, "darray")?
        .mul_or(to_isize(b, "darray")?, "darray displacement")?
        .mul_or(ex, "darray displacement")?;
    let placed = if mine == 0 {
        hvector_parts(0, 0, 0, t)?
    } else {
        // the last global block may be short
        let last_global = (coord + (mine - 1) * psize) * b;
        let last_len = b.min(gsize - last_global);
        if last_len == b {
            let v = hvector_parts(mine, b, stride, t)?;
            indexed_parts(&[1], &[first], &v)?
        } else {
            let v = hvector_parts(mine - 1, b, stride, t)?;
            let tail = hvector_parts(1, last_len, 0, t)?;
            let tail_disp = to_isize(last_global, "darray")?.mul_or(ex, "darray displacement")?;
            struct_parts_unpadded(&[1, 1], &[first, tail_disp], &[v, tail])?
        }
    };
    resized_parts(&placed, 0, full)
}

/// A struct without the alignment padding (internal compositions only).
fn struct_parts_unpadded(
    blocklengths: &[usize],
    displs: &[isize],
    types: &[Datatype],
) -> Result<Datatype> {
    let mut acc = Acc::default();
    for ((&k, &d), t) in blocklengths.iter().zip(displs).zip(types) {
        acc.add(1, d, d, k, &t.0.layout)?;
    }
    let layout = acc.finish(false)?;
    let entries = blocklengths
        .iter()
        .zip(displs)
        .zip(types)
        .map(|((&k, &d), t)| Entry {
            disp: d,
            k,
            child: t.0.node.clone(),
        })
        .collect();
    let node = Node::structure(entries, layout.extent())?;
    let sig = Sig::concat(blocklengths.iter().zip(types).map(|(&k, t)| (k, &t.0.sig)));
    Ok(Datatype::derived(
        layout,
        node,
        sig,
        Args::Dup(types[0].clone()),
    ))
}

fn f90_real_kind(p: Option<i32>, r: Option<i32>) -> Result<Basic> {
    if p.is_none() && r.is_none() {
        return Err(Error::Arg(
            "f90 real: p and r cannot both be MPI_UNDEFINED".into(),
        ));
    }
    let (p, r) = (p.unwrap_or(0), r.unwrap_or(0));
    if p <= 6 && r <= 37 {
        Ok(Basic::Real4)
    } else if p <= 15 && r <= 307 {
        Ok(Basic::Real8)
    } else if p <= 33 && r <= 4931 {
        Ok(Basic::Real16)
    } else {
        Err(Error::Arg(format!(
            "no real kind with precision {p} and range {r}"
        )))
    }
}

fn f90(b: Basic, args: Args) -> Datatype {
    let base = Datatype::basic(b);
    let t = Datatype::rewrap(&base, args);
    t.commit();
    t.set_name(b.mpi_name());
    t
}
