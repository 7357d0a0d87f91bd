//! The [`Datatype`] handle: bounds, size, commit state, name, and the constructor arguments
//! (`MPI_Type_get_envelope` / `MPI_Type_get_contents`).
//!
//! A `Datatype` is an `Arc`: cloning is reference counting, and a type stays alive while anything
//! (a derived type built on it, a pending request) holds a clone, whatever happened to the C
//! handle. Constructors live in `build`, traversal in `segments`, raw memory access in `raw`.

#![forbid(unsafe_code)]

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::basic::{round_up, Basic};
use crate::error::{to_isize, too_large, Checked, Error, Result};
use crate::node::Node;
use crate::segments::Segments;
use crate::signature::{is_prefix, Sig};

/// Constants of the MPI standard ABI that appear inside `get_contents` integer arrays.
pub mod abi {
    /// `MPI_UNDEFINED` (unspecified precision or range of the `f90` types).
    pub const UNDEFINED: i32 = -32766;
    /// `MPI_ORDER_C`.
    pub const ORDER_C: i32 = 12;
    /// `MPI_ORDER_FORTRAN`.
    pub const ORDER_FORTRAN: i32 = 15;
    /// `MPI_DISTRIBUTE_NONE`.
    pub const DISTRIBUTE_NONE: i32 = 16;
    /// `MPI_DISTRIBUTE_BLOCK`.
    pub const DISTRIBUTE_BLOCK: i32 = 17;
    /// `MPI_DISTRIBUTE_CYCLIC`.
    pub const DISTRIBUTE_CYCLIC: i32 = 18;
    /// `MPI_DISTRIBUTE_DFLT_DARG`.
    pub const DISTRIBUTE_DFLT_DARG: i32 = 19;
}

/// How a datatype was created (`MPI_COMBINER_*`, numbered as in the MPI ABI).
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Combiner {
    Named = 101,
    Dup = 102,
    Contiguous = 103,
    Vector = 104,
    Hvector = 105,
    Indexed = 106,
    Hindexed = 107,
    IndexedBlock = 108,
    HindexedBlock = 109,
    Struct = 110,
    Subarray = 111,
    Darray = 112,
    F90Real = 113,
    F90Complex = 114,
    F90Integer = 115,
    Resized = 116,
    ValueIndex = 117,
}

/// Storage order of a multi-dimensional array (subarray, darray).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Order {
    /// Row major: the last index varies fastest (`MPI_ORDER_C`).
    C,
    /// Column major: the first index varies fastest (`MPI_ORDER_FORTRAN`).
    Fortran,
}

impl Order {
    /// The ABI value.
    pub fn abi(self) -> i32 {
        match self {
            Order::C => abi::ORDER_C,
            Order::Fortran => abi::ORDER_FORTRAN,
        }
    }
    /// From the ABI value.
    pub fn from_abi(v: i32) -> Result<Order> {
        match v {
            abi::ORDER_C => Ok(Order::C),
            abi::ORDER_FORTRAN => Ok(Order::Fortran),
            _ => Err(Error::Arg(format!("invalid order {v}"))),
        }
    }
}

/// Distribution of one dimension of a darray.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Distribution {
    /// Not distributed (the process-grid dimension must be 1).
    None,
    /// Contiguous blocks.
    Block,
    /// Round-robin blocks.
    Cyclic,
}

impl Distribution {
    /// The ABI value.
    pub fn abi(self) -> i32 {
        match self {
            Distribution::None => abi::DISTRIBUTE_NONE,
            Distribution::Block => abi::DISTRIBUTE_BLOCK,
            Distribution::Cyclic => abi::DISTRIBUTE_CYCLIC,
        }
    }
    /// From the ABI value.
    pub fn from_abi(v: i32) -> Result<Distribution> {
        match v {
            abi::DISTRIBUTE_NONE => Ok(Distribution::None),
            abi::DISTRIBUTE_BLOCK => Ok(Distribution::Block),
            abi::DISTRIBUTE_CYCLIC => Ok(Distribution::Cyclic),
            _ => Err(Error::Arg(format!("invalid distribution {v}"))),
        }
    }
}

/// Sizes of the arrays `get_contents` returns (`MPI_Type_get_envelope[_c]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Entries of `Contents::integers`.
    pub num_integers: usize,
    /// Entries of `Contents::addresses`.
    pub num_addresses: usize,
    /// Entries of `Contents::large_counts` (non-zero only for types made by the `_c`
    /// constructors, or whose arguments do not fit a C `int`).
    pub num_large_counts: usize,
    /// Entries of `Contents::datatypes`.
    pub num_datatypes: usize,
    /// The constructor.
    pub combiner: Combiner,
}

/// The constructor arguments of a derived type (`MPI_Type_get_contents[_c]`), laid out as the
/// MPI standard specifies for each combiner.
#[derive(Clone, Debug)]
pub struct Contents {
    /// Integer arguments.
    pub integers: Vec<i32>,
    /// Address arguments.
    pub addresses: Vec<isize>,
    /// Large-count arguments.
    pub large_counts: Vec<i64>,
    /// Datatype arguments (new references: the C layer gives each its own handle).
    pub datatypes: Vec<Datatype>,
}

/// Segment statistics of `count` instances, for choosing between packing and per-block
/// zero-copy transfers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlockStats {
    /// Number of memory segments (exact for contiguous types, otherwise an upper bound: runs
    /// that happen to touch across instances are counted separately).
    pub segments: usize,
    /// Shortest segment.
    pub min_len: usize,
    /// Longest segment.
    pub max_len: usize,
    /// Total data bytes.
    pub bytes: usize,
}

/// Bounds and size of a type (MPI-4 §5.1.7): `lb`/`ub` honour the markers set by
/// `create_resized` ("sticky" bounds propagate through constructors and win over natural ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub size: usize,
    pub lb: isize,
    pub ub: isize,
    pub true_lb: isize,
    pub true_ub: isize,
    pub sticky_lb: bool,
    pub sticky_ub: bool,
    /// Largest alignment of a basic component (for the struct padding rule).
    pub align: usize,
}

impl Layout {
    pub fn extent(&self) -> isize {
        // checked when the layout was made
        self.ub.wrapping_sub(self.lb)
    }
}

/// The constructor and its arguments.
#[derive(Debug)]
pub(crate) enum Args {
    Named(Basic),
    Dup(Datatype),
    Contiguous {
        count: usize,
        old: Datatype,
    },
    Vector {
        count: usize,
        blocklen: usize,
        stride: isize,
        old: Datatype,
    },
    Hvector {
        count: usize,
        blocklen: usize,
        stride: isize,
        old: Datatype,
    },
    Indexed {
        blocklens: Box<[usize]>,
        displs: Box<[isize]>,
        old: Datatype,
    },
    Hindexed {
        blocklens: Box<[usize]>,
        displs: Box<[isize]>,
        old: Datatype,
    },
    IndexedBlock {
        blocklen: usize,
        displs: Box<[isize]>,
        old: Datatype,
    },
    HindexedBlock {
        blocklen: usize,
        displs: Box<[isize]>,
        old: Datatype,
    },
    Struct {
        blocklens: Box<[usize]>,
        displs: Box<[isize]>,
        types: Box<[Datatype]>,
    },
    Subarray {
        sizes: Box<[usize]>,
        subsizes: Box<[usize]>,
        starts: Box<[usize]>,
        order: Order,
        old: Datatype,
    },
    Darray {
        size: usize,
        rank: usize,
        gsizes: Box<[usize]>,
        distribs: Box<[Distribution]>,
        dargs: Box<[Option<usize>]>,
        psizes: Box<[usize]>,
        order: Order,
        old: Datatype,
    },
    F90Real {
        p: Option<i32>,
        r: Option<i32>,
    },
    F90Complex {
        p: Option<i32>,
        r: Option<i32>,
    },
    F90Integer {
        r: Option<i32>,
    },
    Resized {
        lb: isize,
        extent: isize,
        old: Datatype,
    },
    ValueIndex {
        value: Datatype,
        index: Datatype,
    },
}

pub(crate) struct Inner {
    pub layout: Layout,
    pub node: Arc<Node>,
    pub sig: Arc<Sig>,
    pub args: Args,
    /// Report the arguments as large counts (types made by the `_c` constructors).
    large: AtomicBool,
    committed: AtomicBool,
    name: Mutex<String>,
}

/// An MPI datatype: a type map (basic types at displacements) with its bounds, compiled for
/// traversal.
///
/// Cheap to clone (an `Arc`); all clones are the same type: committing or naming one commits or
/// names them all. Freeing a C handle drops one clone; the type lives on while derived types or
/// requests hold others.
#[derive(Clone)]
pub struct Datatype(pub(crate) Arc<Inner>);

impl fmt::Debug for Datatype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Datatype")
            .field("name", &self.name())
            .field("combiner", &self.combiner())
            .field("size", &self.size())
            .field("lb", &self.lb())
            .field("extent", &self.extent())
            .field("true_lb", &self.true_lb())
            .field("true_extent", &self.true_extent())
            .finish()
    }
}

/// Accumulates the bounds of placed blocks (the type-map rules of MPI-4 §5.1.7).
#[derive(Default)]
pub(crate) struct Acc {
    size: usize,
    data: Option<(isize, isize)>,
    lb: Option<(bool, isize)>,
    ub: Option<(bool, isize)>,
    align: usize,
}

impl Acc {
    /// Adds `nblocks` blocks of `k` instances of `child` whose displacements range over
    /// `dmin..=dmax` (all blocks alike).
    pub fn add(
        &mut self,
        nblocks: usize,
        dmin: isize,
        dmax: isize,
        k: usize,
        child: &Layout,
    ) -> Result<()> {
        if k == 0 || nblocks == 0 {
            return Ok(());
        }
        let e = child.extent();
        let span = to_isize(k - 1, "block length")?.mul_or(e, "block extent")?;
        let (lo, hi) = (span.min(0), span.max(0));
        let bytes = nblocks
            .mul_or(k, "datatype size")?
            .mul_or(child.size, "datatype size")?;
        self.size = self.size.add_or(bytes, "datatype size")?;
        self.align = self.align.max(child.align);
        let first = dmin.add_or(lo, "displacement")?;
        let last = dmax.add_or(hi, "displacement")?;
        if child.size > 0 {
            let tl = first.add_or(child.true_lb, "true lower bound")?;
            let tu = last.add_or(child.true_ub, "true upper bound")?;
            self.data = Some(match self.data {
                Some((a, b)) => (a.min(tl), b.max(tu)),
                None => (tl, tu),
            });
        }
        if child.sticky_lb || child.size > 0 {
            let v = first.add_or(child.lb, "lower bound")?;
            self.lb = Some(merge_mark(self.lb, child.sticky_lb, v, isize::min));
        }
        if child.sticky_ub || child.size > 0 {
            let v = last.add_or(child.ub, "upper bound")?;
            self.ub = Some(merge_mark(self.ub, child.sticky_ub, v, isize::max));
        }
        Ok(())
    }

    /// The bounds; `pad` applies the struct rule (the extent is rounded up to the largest
    /// alignment of the components unless an upper-bound marker fixes it).
    pub fn finish(self, pad: bool) -> Result<Layout> {
        let (sticky_lb, lb) = self.lb.unwrap_or((false, 0));
        let (sticky_ub, mut ub) = self.ub.unwrap_or((false, lb));
        let (true_lb, true_ub) = self.data.unwrap_or((0, 0));
        let extent = ub.checked_sub(lb).ok_or_else(|| too_large("extent"))?;
        if pad && !sticky_ub && self.align > 1 && extent > 0 {
            let padded = round_up(extent as usize, self.align);
            ub = lb.add_or(to_isize(padded, "extent")?, "upper bound")?;
        }
        Ok(Layout {
            size: self.size,
            lb,
            ub,
            true_lb,
            true_ub,
            sticky_lb,
            sticky_ub,
            align: self.align.max(1),
        })
    }
}

fn merge_mark(
    cur: Option<(bool, isize)>,
    sticky: bool,
    v: isize,
    pick: fn(isize, isize) -> isize,
) -> (bool, isize) {
    match cur {
        None => (sticky, v),
        Some((s, c)) if s == sticky => (s, pick(c, v)),
        Some((true, c)) => (true, c),
        Some((false, _)) => (true, v),
    }
}

fn predefined_table() -> &'static [Datatype] {
    static TABLE: OnceLock<Box<[Datatype]>> = OnceLock::new();
    TABLE.get_or_init(|| Basic::ALL.iter().map(|&b| make_basic(b)).collect())
}

fn basic_layout_node(b: Basic) -> (Layout, Node) {
    let extent = b.extent() as isize;
    let (true_ub, node) = match b.pair() {
        Some([(x, _), (y, off)]) => {
            let entries = vec![
                crate::node::Entry {
                    disp: 0,
                    k: x.size(),
                    child: crate::node::byte().clone(),
                },
                crate::node::Entry {
                    disp: off as isize,
                    k: y.size(),
                    child: crate::node::byte().clone(),
                },
            ];
            // two small runs: cannot overflow
            let node = Node::structure(entries, extent).unwrap_or_else(|_| Node::empty(extent));
            ((off + y.size()) as isize, node)
        }
        None => (b.size() as isize, Node::leaf(0, b.size(), extent)),
    };
    let layout = Layout {
        size: b.size(),
        lb: 0,
        ub: extent,
        true_lb: 0,
        true_ub,
        sticky_lb: false,
        sticky_ub: false,
        align: b.align(),
    };
    (layout, node)
}

fn make_basic(b: Basic) -> Datatype {
    let (layout, node) = basic_layout_node(b);
    let dt = Datatype::from_parts(layout, Arc::new(node), Sig::basic(b), Args::Named(b));
    dt.0.committed.store(true, Ordering::Release);
    dt.set_name(b.mpi_name());
    dt
}

impl Datatype {
    pub(crate) fn from_parts(layout: Layout, node: Arc<Node>, sig: Arc<Sig>, args: Args) -> Self {
        Datatype(Arc::new(Inner {
            layout,
            node,
            sig,
            args,
            large: AtomicBool::new(false),
            committed: AtomicBool::new(false),
            name: Mutex::new(String::new()),
        }))
    }

    /// The same layout under other constructor arguments.
    pub(crate) fn rewrap(t: &Datatype, args: Args) -> Datatype {
        Datatype::from_parts(t.0.layout, t.0.node.clone(), t.0.sig.clone(), args)
    }

    /// A predefined type: committed, named (`"MPI_INT"`…), never freed. Every call returns a
    /// clone of the same type.
    pub fn basic(b: Basic) -> Datatype {
        predefined_table()[b.index()].clone()
    }

    /// The predefined type this is, if it is one (combiner `NAMED`).
    pub fn as_basic(&self) -> Option<Basic> {
        match self.0.args {
            Args::Named(b) => Some(b),
            _ => None,
        }
    }

    /// Whether this is a predefined type that users may not free (`NAMED`, and the `f90`
    /// parameterized types).
    pub fn is_predefined(&self) -> bool {
        matches!(
            self.0.args,
            Args::Named(_)
                | Args::F90Real { .. }
                | Args::F90Complex { .. }
                | Args::F90Integer { .. }
        )
    }

    /// Whether both are the same type object (not merely equal layouts).
    pub fn ptr_eq(&self, other: &Datatype) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Bytes of data in one element (`MPI_Type_size`).
    #[inline]
    pub fn size(&self) -> usize {
        self.0.layout.size
    }

    /// `ub - lb` (`MPI_Type_get_extent`).
    #[inline]
    pub fn extent(&self) -> isize {
        self.0.layout.extent()
    }

    /// Lower bound (`MPI_Type_get_extent`).
    #[inline]
    pub fn lb(&self) -> isize {
        self.0.layout.lb
    }

    /// Upper bound.
    #[inline]
    pub fn ub(&self) -> isize {
        self.0.layout.ub
    }

    /// Lowest displacement of data, markers ignored (`MPI_Type_get_true_extent`).
    #[inline]
    pub fn true_lb(&self) -> isize {
        self.0.layout.true_lb
    }

    /// Span of the data, markers ignored (`MPI_Type_get_true_extent`).
    #[inline]
    pub fn true_extent(&self) -> isize {
        self.0.layout.true_ub - self.0.layout.true_lb
    }

    /// One past the highest displacement of data.
    #[inline]
    pub fn true_ub(&self) -> isize {
        self.0.layout.true_ub
    }

    /// Whether `commit` was called (predefined types are always committed).
    #[inline]
    pub fn is_committed(&self) -> bool {
        self.0.committed.load(Ordering::Acquire)
    }

    /// Commits the type (on every clone): it may now be used for communication. The layout is
    /// compiled at construction, so this only sets the flag.
    pub fn commit(&self) {
        self.0.committed.store(true, Ordering::Release);
    }

    /// `count` elements at `buf` form one contiguous run of `count * size()` bytes starting at
    /// `buf + true_lb()` (fast path), for every `count`.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.0.layout.size == 0 || self.0.node.as_dense_leaf().is_some()
    }

    /// `Some((offset, len))` when `count` elements form one run of memory: also true for a
    /// single element of a type whose data is contiguous but whose extent has a gap.
    pub fn contiguous_span(&self, count: usize) -> Option<(isize, usize)> {
        let len = count.checked_mul(self.size())?;
        if len == 0 {
            return Some((0, 0));
        }
        match self.0.node.as_leaf() {
            Some((off, _)) if count == 1 || self.is_contiguous() => Some((off, len)),
            _ => None,
        }
    }

    /// Number of basic elements in the first `bytes` of the packed stream of this type
    /// (`MPI_Get_elements`), or `None` when `bytes` does not end on a basic-element boundary
    /// (→ `MPI_UNDEFINED`). Pair types count as two elements.
    pub fn elements_in(&self, bytes: usize) -> Option<usize> {
        self.0.sig.elements_in_stream(bytes)
    }

    /// Basic elements in one instance.
    pub fn element_count(&self) -> usize {
        self.0.sig.elems
    }

    /// `Some((basic, n))` when the packed data of one instance is `n` elements of the single
    /// predefined type `basic` (a scalar or a pair type): what a reduction operation needs to
    /// apply itself to packed data (e.g. `contiguous(4, MPI_DOUBLE_INT)` is 4 `DoubleInt`s).
    /// `None` for mixed types. Empty types report `n = 0` of `Byte`.
    pub fn uniform_element(&self) -> Option<(Basic, usize)> {
        if self.size() == 0 {
            return Some((Basic::Byte, 0));
        }
        let b = self.uniform_basic()?;
        Some((b, self.size() / b.size()))
    }

    fn uniform_basic(&self) -> Option<Basic> {
        if self.size() == 0 {
            return None;
        }
        match &self.0.args {
            Args::Named(b) => Some(*b),
            Args::F90Real { .. } | Args::F90Complex { .. } | Args::F90Integer { .. } => {
                match &*self.0.sig.items {
                    [crate::signature::SigItem::Run(b, 1)] => Some(*b),
                    _ => None,
                }
            }
            Args::Dup(old)
            | Args::Contiguous { old, .. }
            | Args::Vector { old, .. }
            | Args::Hvector { old, .. }
            | Args::Indexed { old, .. }
            | Args::Hindexed { old, .. }
            | Args::IndexedBlock { old, .. }
            | Args::HindexedBlock { old, .. }
            | Args::Subarray { old, .. }
            | Args::Darray { old, .. }
            | Args::Resized { old, .. } => old.uniform_basic(),
            Args::Struct {
                blocklens, types, ..
            } => {
                let mut found: Option<Basic> = None;
                for (t, &k) in types.iter().zip(blocklens.iter()) {
                    if k == 0 || t.size() == 0 {
                        continue;
                    }
                    let b = t.uniform_basic()?;
                    if found.is_some_and(|f| f != b) {
                        return None;
                    }
                    found = Some(b);
                }
                found
            }
            Args::ValueIndex { .. } => None,
        }
    }

    /// The name (`MPI_Type_get_name`): the MPI name for predefined types, empty for new ones.
    pub fn name(&self) -> String {
        self.0.name.lock().map(|n| n.clone()).unwrap_or_default()
    }

    /// Sets the name (`MPI_Type_set_name`) on every clone.
    pub fn set_name(&self, name: &str) {
        if let Ok(mut n) = self.0.name.lock() {
            n.clear();
            n.push_str(name);
        }
    }

    /// Report the constructor arguments as large counts (for the `_c` C constructors), and
    /// return `self`. No effect on predefined types.
    pub fn mark_large_count(self) -> Datatype {
        if !self.is_predefined() {
            self.0.large.store(true, Ordering::Relaxed);
        }
        self
    }

    /// The segments `(offset from the buffer, length)` holding bytes `range` of the packed
    /// stream of `count` elements, in packing order, adjacent segments merged. `range` is
    /// clipped to `0..count * size()`.
    pub fn segments(&self, count: usize, range: Range<usize>) -> Segments<'_> {
        Segments::new(&self.0.node, count, range)
    }

    /// Statistics of the segments of `count` elements, computed from the compiled layout in
    /// O(1).
    pub fn block_stats(&self, count: usize) -> BlockStats {
        let bytes = count.saturating_mul(self.size());
        if bytes == 0 {
            return BlockStats::default();
        }
        if self.is_contiguous() {
            return BlockStats {
                segments: 1,
                min_len: bytes,
                max_len: bytes,
                bytes,
            };
        }
        let n = &self.0.node;
        BlockStats {
            segments: count.saturating_mul(n.runs),
            min_len: n.min_run,
            max_len: n.max_run,
            bytes,
        }
    }

    /// The range `[lo, hi)` of bytes, relative to the buffer, that `count` elements touch (their
    /// data, markers ignored); `(0, 0)` when there is no data.
    pub fn buffer_span(&self, count: usize) -> Result<(isize, isize)> {
        if count == 0 || self.size() == 0 {
            return Ok((0, 0));
        }
        let span = to_isize(count - 1, "count")?.mul_or(self.extent(), "buffer span")?;
        Ok((
            self.true_lb().add_or(span.min(0), "buffer span")?,
            self.true_ub().add_or(span.max(0), "buffer span")?,
        ))
    }

    /// Bytes needed to pack `count` elements (`MPI_Pack_size`): exactly `count * size()`.
    pub fn pack_size(&self, count: usize) -> Result<usize> {
        count.mul_or(self.size(), "pack size")
    }

    /// Bytes needed to pack `count` elements in `external32` (`MPI_Pack_external_size`).
    pub fn pack_external_size(&self, count: usize) -> Result<usize> {
        if self.0.sig.ext_size == usize::MAX {
            return Err(too_large("external32 size"));
        }
        count.mul_or(self.0.sig.ext_size, "external32 size")
    }

    /// Whether the type signature of `count` elements of `self` is a prefix of that of
    /// `recv_count` elements of `recv` (a send with `self` matches a receive with `recv`).
    /// `MPI_PACKED` on either side matches anything of a fitting size. Costs O(number of runs of
    /// basic types) in the worst case.
    pub fn signature_matches_prefix(
        &self,
        count: usize,
        recv: &Datatype,
        recv_count: usize,
    ) -> bool {
        is_prefix(&self.0.sig, count, &recv.0.sig, recv_count)
    }

    /// The constructor (`MPI_Type_get_envelope`).
    pub fn combiner(&self) -> Combiner {
        match self.0.args {
            Args::Named(_) => Combiner::Named,
            Args::Dup(_) => Combiner::Dup,
            Args::Contiguous { .. } => Combiner::Contiguous,
            Args::Vector { .. } => Combiner::Vector,
            Args::Hvector { .. } => Combiner::Hvector,
            Args::Indexed { .. } => Combiner::Indexed,
            Args::Hindexed { .. } => Combiner::Hindexed,
            Args::IndexedBlock { .. } => Combiner::IndexedBlock,
            Args::HindexedBlock { .. } => Combiner::HindexedBlock,
            Args::Struct { .. } => Combiner::Struct,
            Args::Subarray { .. } => Combiner::Subarray,
            Args::Darray { .. } => Combiner::Darray,
            Args::F90Real { .. } => Combiner::F90Real,
            Args::F90Complex { .. } => Combiner::F90Complex,
            Args::F90Integer { .. } => Combiner::F90Integer,
            Args::Resized { .. } => Combiner::Resized,
            Args::ValueIndex { .. } => Combiner::ValueIndex,
        }
    }

    /// Numbers of arguments of each kind, and the combiner (`MPI_Type_get_envelope[_c]`).
    pub fn envelope(&self) -> Envelope {
        let c = self.contents_unchecked();
        Envelope {
            num_integers: c.integers.len(),
            num_addresses: c.addresses.len(),
            num_large_counts: c.large_counts.len(),
            num_datatypes: c.datatypes.len(),
            combiner: self.combiner(),
        }
    }

    /// The constructor arguments (`MPI_Type_get_contents[_c]`). [`Error::Type`] for a
    /// predefined (`NAMED`) type.
    pub fn contents(&self) -> Result<Contents> {
        if let Args::Named(b) = self.0.args {
            return Err(Error::Type(format!(
                "{} is predefined: it has no contents",
                b.mpi_name()
            )));
        }
        Ok(self.contents_unchecked())
    }

    /// [`contents`](Self::contents) into caller arrays of the given lengths:
    /// [`Error::Truncate`] when one is too short.
    pub fn get_contents(
        &self,
        max_integers: usize,
        max_addresses: usize,
        max_large_counts: usize,
        max_datatypes: usize,
    ) -> Result<Contents> {
        let c = self.contents()?;
        let checks = [
            ("array_of_integers", c.integers.len(), max_integers),
            ("array_of_addresses", c.addresses.len(), max_addresses),
            (
                "array_of_large_counts",
                c.large_counts.len(),
                max_large_counts,
            ),
            ("array_of_datatypes", c.datatypes.len(), max_datatypes),
        ];
        for (what, needed, available) in checks {
            if needed > available {
                return Err(Error::Truncate {
                    what,
                    needed,
                    available,
                });
            }
        }
        Ok(c)
    }

    fn contents_unchecked(&self) -> Contents {
        let large = self.0.large.load(Ordering::Relaxed);
        let f = self.0.args.form(large);
        match f
            .ints
            .iter()
            .map(|&v| i32::try_from(v))
            .collect::<std::result::Result<Vec<i32>, _>>()
        {
            Ok(integers) => Contents {
                integers,
                addresses: f.addrs,
                large_counts: f.counts,
                datatypes: f.types,
            },
            // an argument does not fit a C int: report everything as large counts
            Err(_) => {
                let f = self.0.args.form(true);
                Contents {
                    integers: f.ints.iter().map(|&v| v as i32).collect(),
                    addresses: f.addrs,
                    large_counts: f.counts,
                    datatypes: f.types,
                }
            }
        }
    }
}

/// Arguments in one of the two standard layouts.
struct Form {
    ints: Vec<i64>,
    addrs: Vec<isize>,
    counts: Vec<i64>,
    types: Vec<Datatype>,
}

fn u(v: usize) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
fn a(v: isize) -> i64 {
    v as i64
}

impl Args {
    fn form(&self, large: bool) -> Form {
        let mut f = Form {
            ints: Vec::new(),
            addrs: Vec::new(),
            counts: Vec::new(),
            types: Vec::new(),
        };
        // "integer" arguments go to `counts` in the large layout
        macro_rules! int {
            ($v:expr) => {
                if large {
                    f.counts.push($v)
                } else {
                    f.ints.push($v)
                }
            };
        }
        macro_rules! addr {
            ($v:expr) => {
                if large {
                    f.counts.push(a($v))
                } else {
                    f.addrs.push($v)
                }
            };
        }
        match self {
            Args::Named(_) => {}
            Args::F90Real { p, r } | Args::F90Complex { p, r } => {
                f.ints.push(p.unwrap_or(abi::UNDEFINED) as i64);
                f.ints.push(r.unwrap_or(abi::UNDEFINED) as i64);
            }
            Args::F90Integer { r } => f.ints.push(r.unwrap_or(abi::UNDEFINED) as i64),
            Args::Dup(old) => f.types.push(old.clone()),
            Args::Contiguous { count, old } => {
                int!(u(*count));
                f.types.push(old.clone());
            }
            Args::Vector {
                count,
                blocklen,
                stride,
                old,
            } => {
                int!(u(*count));
                int!(u(*blocklen));
                int!(a(*stride));
                f.types.push(old.clone());
            }
            Args::Hvector {
                count,
                blocklen,
                stride,
                old,
            } => {
                int!(u(*count));
                int!(u(*blocklen));
                addr!(*stride);
                f.types.push(old.clone());
            }
            Args::Indexed {
                blocklens,
                displs,
                old,
            } => {
                int!(u(blocklens.len()));
                blocklens.iter().for_each(|&b| int!(u(b)));
                displs.iter().for_each(|&d| int!(a(d)));
                f.types.push(old.clone());
            }
            Args::Hindexed {
                blocklens,
                displs,
                old,
            } => {
                int!(u(blocklens.len()));
                blocklens.iter().for_each(|&b| int!(u(b)));
                displs.iter().for_each(|&d| addr!(d));
                f.types.push(old.clone());
            }
            Args::IndexedBlock {
                blocklen,
                displs,
                old,
            } => {
                int!(u(displs.len()));
                int!(u(*blocklen));
                displs.iter().for_each(|&d| int!(a(d)));
                f.types.push(old.clone());
            }
            Args::HindexedBlock {
                blocklen,
                displs,
                old,
            } => {
                int!(u(displs.len()));
                int!(u(*blocklen));
                displs.iter().for_each(|&d| addr!(d));
                f.types.push(old.clone());
            }
            Args::Struct {
                blocklens,
                displs,
                types,
            } => {
                int!(u(blocklens.len()));
                blocklens.iter().for_each(|&b| int!(u(b)));
                displs.iter().for_each(|&d| addr!(d));
                f.types.extend(types.iter().cloned());
            }
            Args::Subarray {
                sizes,
                subsizes,
                starts,
                order,
                old,
            } => {
                f.ints.push(u(sizes.len()));
                for arr in [sizes, subsizes, starts] {
                    arr.iter().for_each(|&v| int!(u(v)));
                }
                f.ints.push(order.abi() as i64);
                f.types.push(old.clone());
            }
            Args::Darray {
                size,
                rank,
                gsizes,
                distribs,
                dargs,
                psizes,
                order,
                old,
            } => {
                f.ints.push(u(*size));
                f.ints.push(u(*rank));
                f.ints.push(u(gsizes.len()));
                gsizes.iter().for_each(|&v| int!(u(v)));
                f.ints.extend(distribs.iter().map(|d| d.abi() as i64));
                f.ints.extend(
                    dargs
                        .iter()
                        .map(|d| d.map(u).unwrap_or(abi::DISTRIBUTE_DFLT_DARG as i64)),
                );
                f.ints.extend(psizes.iter().map(|&p| u(p)));
                f.ints.push(order.abi() as i64);
                f.types.push(old.clone());
            }
            Args::Resized { lb, extent, old } => {
                addr!(*lb);
                addr!(*extent);
                f.types.push(old.clone());
            }
            Args::ValueIndex { value, index } => {
                f.types.push(value.clone());
                f.types.push(index.clone());
            }
        }
        f
    }
}
