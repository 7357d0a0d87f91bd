//! A naive reference: the explicit type map of a datatype, rebuilt from `get_contents` alone
//! (so it shares no code with the engine), with bounds by direct enumeration.
//!
//! Bound semantics mirrored here: markers set by `create_resized` are "hard" and win; otherwise
//! each placed instance contributes its own (soft) lower and upper bound; a struct pads its
//! soft extent to the largest alignment inside.
#![allow(dead_code)]

use madmpi_datatypes::{abi, Basic, Combiner, Datatype};

#[derive(Clone, Debug, Default)]
pub struct Map {
    /// Data entries in type-map order.
    pub data: Vec<(isize, Basic)>,
    pub lb: isize,
    pub ub: isize,
    pub hard_lb: bool,
    pub hard_ub: bool,
    /// Whether the type has any entry at all (data or hard marker).
    pub any: bool,
    pub align: usize,
}

impl Map {
    pub fn extent(&self) -> isize {
        self.ub - self.lb
    }
    pub fn size(&self) -> usize {
        self.data.iter().map(|(_, b)| b.size()).sum()
    }
    pub fn true_bounds(&self) -> (isize, isize) {
        if self.data.is_empty() {
            return (0, 0);
        }
        let lo = self.data.iter().map(|(d, _)| *d).min().unwrap();
        let hi = self
            .data
            .iter()
            .map(|(d, b)| d + b.size() as isize)
            .max()
            .unwrap();
        (lo, hi)
    }
}

#[derive(Default)]
struct Builder {
    data: Vec<(isize, Basic)>,
    hard_lb: Option<isize>,
    hard_ub: Option<isize>,
    soft_lb: Option<isize>,
    soft_ub: Option<isize>,
    align: usize,
}

impl Builder {
    /// Places one instance of `m` at `disp`.
    fn place(&mut self, m: &Map, disp: isize) {
        self.data.extend(m.data.iter().map(|(d, b)| (d + disp, *b)));
        self.align = self.align.max(m.align);
        if !m.any {
            return;
        }
        let (lb, ub) = (m.lb + disp, m.ub + disp);
        if m.hard_lb {
            self.hard_lb = Some(self.hard_lb.map_or(lb, |x| x.min(lb)));
        } else {
            self.soft_lb = Some(self.soft_lb.map_or(lb, |x| x.min(lb)));
        }
        if m.hard_ub {
            self.hard_ub = Some(self.hard_ub.map_or(ub, |x| x.max(ub)));
        } else {
            self.soft_ub = Some(self.soft_ub.map_or(ub, |x| x.max(ub)));
        }
    }

    fn finish(self, pad: bool) -> Map {
        let any = !self.data.is_empty() || self.hard_lb.is_some() || self.hard_ub.is_some();
        let lb = self.hard_lb.or(self.soft_lb).unwrap_or(0);
        let mut ub = self.hard_ub.or(self.soft_ub).unwrap_or(lb);
        if pad && self.hard_ub.is_none() && self.align > 1 && ub - lb > 0 {
            let a = self.align as isize;
            let ext = ub - lb;
            ub = lb + (ext + a - 1) / a * a;
        }
        Map {
            data: self.data,
            lb,
            ub,
            hard_lb: self.hard_lb.is_some(),
            hard_ub: self.hard_ub.is_some(),
            any,
            align: self.align.max(1),
        }
    }
}

fn resized(m: Map, lb: isize, extent: isize) -> Map {
    Map {
        lb,
        ub: lb + extent,
        hard_lb: true,
        hard_ub: true,
        any: true,
        ..m
    }
}

/// Blocks `(disp, k)` of `old`.
fn blocks(old: &Map, blocks: impl IntoIterator<Item = (isize, usize)>) -> Map {
    let mut b = Builder::default();
    for (d, k) in blocks {
        for i in 0..k {
            b.place(old, d + i as isize * old.extent());
        }
    }
    b.finish(false)
}

pub fn map_of(t: &Datatype) -> Map {
    let env = t.envelope();
    if env.combiner == Combiner::Named {
        let b = t.as_basic().unwrap();
        let mut bd = Builder::default();
        match b.pair() {
            Some([(x, ox), (y, oy)]) => {
                bd.data.push((ox as isize, x));
                bd.data.push((oy as isize, y));
            }
            None => bd.data.push((0, b)),
        }
        bd.align = b.align();
        let mut m = bd.finish(false);
        m.lb = 0;
        m.ub = b.extent() as isize;
        return m;
    }
    let c = t.contents().unwrap();
    // the integer-like arguments, whichever layout they were reported in
    let large = env.num_large_counts > 0;
    let ints: Vec<i64> = if large {
        c.large_counts.clone()
    } else {
        c.integers.iter().map(|&v| v as i64).collect()
    };
    let addrs: Vec<i64> = if large {
        vec![]
    } else {
        c.addresses.iter().map(|&v| v as i64).collect()
    };
    let u = |v: i64| v as usize;
    let olds: Vec<Map> = c.datatypes.iter().map(map_of).collect();
    match env.combiner {
        Combiner::Named => unreachable!(),
        Combiner::Dup => olds[0].clone(),
        Combiner::F90Real | Combiner::F90Complex | Combiner::F90Integer => {
            map_of(&Datatype::basic(t.as_basic().unwrap_or(Basic::Byte)))
        }
        Combiner::Contiguous => blocks(&olds[0], [(0, u(ints[0]))]),
        Combiner::Vector | Combiner::Hvector => {
            let (count, bl) = (u(ints[0]), u(ints[1]));
            let stride = if env.combiner == Combiner::Vector {
                ints[2] as isize * olds[0].extent()
            } else if large {
                ints[2] as isize
            } else {
                addrs[0] as isize
            };
            blocks(&olds[0], (0..count).map(|j| (j as isize * stride, bl)))
        }
        Combiner::Indexed | Combiner::Hindexed => {
            let n = u(ints[0]);
            let bls = &ints[1..1 + n];
            let ds: Vec<isize> = if env.combiner == Combiner::Indexed {
                ints[1 + n..1 + 2 * n]
                    .iter()
                    .map(|&d| d as isize * olds[0].extent())
                    .collect()
            } else if large {
                ints[1 + n..1 + 2 * n].iter().map(|&d| d as isize).collect()
            } else {
                addrs.iter().map(|&d| d as isize).collect()
            };
            blocks(&olds[0], ds.into_iter().zip(bls.iter().map(|&k| u(k))))
        }
        Combiner::IndexedBlock | Combiner::HindexedBlock => {
            let (n, bl) = (u(ints[0]), u(ints[1]));
            let ds: Vec<isize> = if env.combiner == Combiner::IndexedBlock {
                ints[2..2 + n]
                    .iter()
                    .map(|&d| d as isize * olds[0].extent())
                    .collect()
            } else if large {
                ints[2..2 + n].iter().map(|&d| d as isize).collect()
            } else {
                addrs.iter().map(|&d| d as isize).collect()
            };
            blocks(&olds[0], ds.into_iter().map(|d| (d, bl)))
        }
        Combiner::Struct => {
            let n = u(ints[0]);
            let bls = &ints[1..1 + n];
            let ds: Vec<isize> = if large {
                ints[1 + n..1 + 2 * n].iter().map(|&d| d as isize).collect()
            } else {
                addrs.iter().map(|&d| d as isize).collect()
            };
            let mut b = Builder::default();
            for i in 0..n {
                for k in 0..u(bls[i]) {
                    b.place(&olds[i], ds[i] + k as isize * olds[i].extent());
                }
            }
            b.finish(true)
        }
        Combiner::Resized => {
            let (lb, ext) = if large {
                (ints[0] as isize, ints[1] as isize)
            } else {
                (addrs[0] as isize, addrs[1] as isize)
            };
            resized(olds[0].clone(), lb, ext)
        }
        Combiner::Subarray => {
            let ci = &c.integers;
            let n = ci[0] as usize;
            let arr: Vec<usize> = if large {
                c.large_counts.iter().map(|&v| v as usize).collect()
            } else {
                ci[1..1 + 3 * n].iter().map(|&v| v as usize).collect()
            };
            let (sizes, subsizes, starts) = (&arr[..n], &arr[n..2 * n], &arr[2 * n..3 * n]);
            let order = *ci.last().unwrap();
            let old = &olds[0];
            let mut b = Builder::default();
            for idx in indices(subsizes, order == abi::ORDER_C) {
                let full: Vec<usize> = idx.iter().zip(starts).map(|(i, s)| i + s).collect();
                let lin = linear(&full, sizes, order == abi::ORDER_C);
                b.place(old, lin as isize * old.extent());
            }
            let total: usize = sizes.iter().product();
            let m = b.finish(false);
            resized(m, 0, total as isize * old.extent())
        }
        Combiner::Darray => {
            let ci = &c.integers;
            let (size, rank, n) = (ci[0] as usize, ci[1] as usize, ci[2] as usize);
            let mut k = 3;
            let gsizes: Vec<usize> = if large {
                c.large_counts.iter().map(|&v| v as usize).collect()
            } else {
                k += n;
                ci[3..3 + n].iter().map(|&v| v as usize).collect()
            };
            let distribs = &ci[k..k + n];
            let dargs = &ci[k + n..k + 2 * n];
            let psizes: Vec<usize> = ci[k + 2 * n..k + 3 * n]
                .iter()
                .map(|&v| v as usize)
                .collect();
            let order = ci[k + 3 * n];
            assert_eq!(psizes.iter().product::<usize>(), size);
            let mut coords = vec![0; n];
            let mut r = rank;
            for i in (0..n).rev() {
                coords[i] = r % psizes[i];
                r /= psizes[i];
            }
            let owns = |d: usize, i: usize| -> bool {
                let (g, p) = (gsizes[d], psizes[d]);
                match distribs[d] {
                    abi::DISTRIBUTE_NONE => true,
                    abi::DISTRIBUTE_BLOCK => {
                        let b = if dargs[d] == abi::DISTRIBUTE_DFLT_DARG {
                            g.div_ceil(p)
                        } else {
                            dargs[d] as usize
                        };
                        i / b == coords[d]
                    }
                    _ => {
                        let b = if dargs[d] == abi::DISTRIBUTE_DFLT_DARG {
                            1
                        } else {
                            dargs[d] as usize
                        };
                        (i / b) % p == coords[d]
                    }
                }
            };
            let old = &olds[0];
            let mut b = Builder::default();
            for idx in indices(&gsizes, order == abi::ORDER_C) {
                if (0..n).all(|d| owns(d, idx[d])) {
                    let lin = linear(&idx, &gsizes, order == abi::ORDER_C);
                    b.place(old, lin as isize * old.extent());
                }
            }
            let total: usize = gsizes.iter().product();
            let m = b.finish(false);
            resized(m, 0, total as isize * old.extent())
        }
        Combiner::ValueIndex => {
            let (v, i) = (&olds[0], &olds[1]);
            let a = i.align as isize;
            let off = (v.extent() + a - 1) / a * a;
            let mut b = Builder::default();
            b.place(v, 0);
            b.place(i, off);
            b.finish(true)
        }
    }
}

/// All index tuples of a box, in storage order.
fn indices(dims: &[usize], c_order: bool) -> Vec<Vec<usize>> {
    let n = dims.len();
    let mut out = vec![];
    if dims.contains(&0) {
        return out;
    }
    let mut idx = vec![0usize; n];
    loop {
        out.push(idx.clone());
        // increment the fastest dimension first
        let order: Vec<usize> = if c_order {
            (0..n).rev().collect()
        } else {
            (0..n).collect()
        };
        let mut carry = true;
        for &d in &order {
            idx[d] += 1;
            if idx[d] < dims[d] {
                carry = false;
                break;
            }
            idx[d] = 0;
        }
        if carry {
            return out;
        }
    }
}

fn linear(idx: &[usize], dims: &[usize], c_order: bool) -> usize {
    let n = dims.len();
    let mut lin = 0;
    if c_order {
        for d in 0..n {
            lin = lin * dims[d] + idx[d];
        }
    } else {
        for d in (0..n).rev() {
            lin = lin * dims[d] + idx[d];
        }
    }
    lin
}

/// The (offset, len) of every basic element of `count` instances, in order.
pub fn elements(m: &Map, count: usize) -> Vec<(isize, usize, Basic)> {
    let mut v = vec![];
    for n in 0..count {
        for &(d, b) in &m.data {
            v.push((n as isize * m.extent() + d, b.size(), b));
        }
    }
    v
}

/// Merged segments of bytes `range` of the stream.
pub fn segments(m: &Map, count: usize, start: usize, end: usize) -> Vec<(isize, usize)> {
    let mut out: Vec<(isize, usize)> = vec![];
    let mut pos = 0usize;
    for (off, len, _) in elements(m, count) {
        let (s, e) = (pos.max(start), (pos + len).min(end));
        if s < e {
            let o = off + (s - pos) as isize;
            let l = e - s;
            match out.last_mut() {
                Some(last) if last.0 + last.1 as isize == o => last.1 += l,
                _ => out.push((o, l)),
            }
        }
        pos += len;
    }
    out
}

/// A test buffer covering everything `count` instances touch, with some slack.
pub struct Buf {
    pub bytes: Vec<u8>,
    /// Index of the buffer origin in `bytes`.
    pub origin: usize,
}

impl Buf {
    pub fn new(t: &Datatype, count: usize, fill: impl Fn(usize) -> u8) -> Buf {
        let (lo, hi) = t.buffer_span(count).unwrap();
        let lo = lo.min(0) - 8;
        let hi = hi.max(0) + 8;
        let len = (hi - lo) as usize;
        Buf {
            bytes: (0..len).map(fill).collect(),
            origin: (-lo) as usize,
        }
    }
    /// The origin, with the provenance of the whole buffer (displacements may be negative).
    pub fn ptr(&self) -> *const u8 {
        self.bytes.as_ptr().wrapping_add(self.origin)
    }
    pub fn mut_ptr(&mut self) -> *mut u8 {
        self.bytes.as_mut_ptr().wrapping_add(self.origin)
    }
    pub fn at(&self, off: isize) -> usize {
        (self.origin as isize + off) as usize
    }
}

pub fn naive_pack(m: &Map, count: usize, buf: &Buf) -> Vec<u8> {
    let mut out = vec![];
    for (off, len, _) in elements(m, count) {
        let i = buf.at(off);
        out.extend_from_slice(&buf.bytes[i..i + len]);
    }
    out
}

pub fn naive_unpack(m: &Map, count: usize, input: &[u8], buf: &mut Buf) {
    let mut p = 0;
    for (off, len, _) in elements(m, count) {
        let i = buf.at(off);
        buf.bytes[i..i + len].copy_from_slice(&input[p..p + len]);
        p += len;
    }
}

/// Basic elements in the first `bytes` bytes, or None mid-element.
pub fn naive_elements(m: &Map, bytes: usize) -> Option<usize> {
    if m.size() == 0 {
        return (bytes == 0).then_some(0);
    }
    let count = bytes / m.size() + 1;
    let mut pos = 0;
    let mut n = 0;
    for (_, len, _) in elements(m, count) {
        if pos == bytes {
            return Some(n);
        }
        if pos + len > bytes {
            return None;
        }
        pos += len;
        n += 1;
    }
    (pos == bytes).then_some(n)
}

/// A recursive description from the contents (for failure messages).
pub fn describe(t: &Datatype) -> String {
    if let Some(b) = t.as_basic() {
        return b.mpi_name().to_string();
    }
    let c = t.contents().unwrap();
    let subs: Vec<String> = c.datatypes.iter().map(describe).collect();
    format!(
        "{:?}(i={:?} a={:?} c={:?} [{}])",
        t.combiner(),
        c.integers,
        c.addresses,
        c.large_counts,
        subs.join(", ")
    )
}

/// A datatype whose `Debug` is its full description.
#[derive(Clone)]
pub struct T(pub Datatype);

impl std::fmt::Debug for T {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", describe(&self.0))
    }
}
