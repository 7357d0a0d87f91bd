//! The compiled layout of a datatype: a small tree of contiguous / vector / block-indexed /
//! indexed / struct nodes (a "dataloop"), normalized at construction so that traversal does as
//! little work as possible.
//!
//! This module owns the layout only (where the bytes are, in which order); bounds, signatures
//! and constructor arguments live in `datatype`. It never touches user memory.
//!
//! Normal form, applied by every builder here:
//! * zero-length blocks and zero-size children are dropped;
//! * a block of `k` instances of a *dense leaf* (a run of `len` bytes whose extent is `len`) is a
//!   run of `k * len` bytes, expressed over the shared one-byte leaf ([`byte`]);
//! * adjacent blocks of the same child that touch are merged;
//! * one block of bytes is a leaf; equal blocks at a constant stride are a vector.

#![forbid(unsafe_code)]

use std::sync::{Arc, OnceLock};

use crate::error::{to_isize, Checked, Result};

/// A compiled layout. Displacements are relative to the buffer origin of one instance;
/// instance `n` of `count` lives at `n * extent`.
#[derive(Debug)]
pub(crate) struct Node {
    /// Bytes of data in one instance.
    pub size: usize,
    /// Distance between consecutive instances.
    pub extent: isize,
    pub kind: Kind,
    /// Number of runs the traversal yields for one instance (saturating; an upper bound once
    /// runs of neighbouring instances merge).
    pub runs: usize,
    /// Shortest and longest run of one instance.
    pub min_run: usize,
    pub max_run: usize,
}

/// The node kinds. In all block-based kinds, a block is `k` consecutive instances of `child`
/// (spaced by `child.extent`) starting at the block's displacement.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// No data.
    Empty,
    /// One run of `len` bytes at `off`.
    Leaf { off: isize, len: usize },
    /// `count` blocks of `blocklen` instances, block `j` at `base + j * stride`.
    Vector {
        base: isize,
        count: usize,
        blocklen: usize,
        stride: isize,
        child: Arc<Node>,
    },
    /// Blocks of `blocklen` instances at arbitrary displacements.
    BlockIndexed {
        blocklen: usize,
        displs: Arc<[isize]>,
        child: Arc<Node>,
    },
    /// Blocks of varying lengths; `starts[j]` is the number of instances before block `j`.
    Indexed {
        blocklens: Arc<[usize]>,
        displs: Arc<[isize]>,
        starts: Arc<[usize]>,
        child: Arc<Node>,
    },
    /// Blocks of different children; `starts[j]` is the number of data bytes before block `j`.
    Struct {
        blocklens: Arc<[usize]>,
        displs: Arc<[isize]>,
        children: Arc<[Arc<Node>]>,
        starts: Arc<[usize]>,
    },
}

/// The placeholder node used to fill unused traversal stack slots.
pub(crate) static EMPTY_NODE: Node = Node {
    size: 0,
    extent: 0,
    kind: Kind::Empty,
    runs: 0,
    min_run: 0,
    max_run: 0,
};

/// The shared one-byte leaf: runs of bytes are blocks of it.
pub(crate) fn byte() -> &'static Arc<Node> {
    static BYTE: OnceLock<Arc<Node>> = OnceLock::new();
    BYTE.get_or_init(|| Arc::new(Node::leaf(0, 1, 1)))
}

/// A placed block before normalization: `k` instances of `child` at `disp`.
#[derive(Clone)]
pub(crate) struct Entry {
    pub disp: isize,
    pub k: usize,
    pub child: Arc<Node>,
}

impl Node {
    pub fn leaf(off: isize, len: usize, extent: isize) -> Node {
        if len == 0 {
            return Node::empty(extent);
        }
        Node {
            size: len,
            extent,
            kind: Kind::Leaf { off, len },
            runs: 1,
            min_run: len,
            max_run: len,
        }
    }

    pub fn empty(extent: isize) -> Node {
        Node {
            size: 0,
            extent,
            kind: Kind::Empty,
            runs: 0,
            min_run: 0,
            max_run: 0,
        }
    }

    /// The same layout with another extent (resized types).
    pub fn with_extent(&self, extent: isize) -> Node {
        Node {
            size: self.size,
            extent,
            kind: self.kind.clone(),
            runs: self.runs,
            min_run: self.min_run,
            max_run: self.max_run,
        }
    }

    /// `Some((off, len))` when one instance is a single run.
    #[inline]
    pub fn as_leaf(&self) -> Option<(isize, usize)> {
        match self.kind {
            Kind::Leaf { off, len } => Some((off, len)),
            _ => None,
        }
    }

    /// `Some((off, len))` when consecutive instances form one run (a leaf whose extent is its
    /// length): `k` instances are then one run of `k * len` bytes.
    #[inline]
    pub fn as_dense_leaf(&self) -> Option<(isize, usize)> {
        match self.kind {
            Kind::Leaf { off, len } if len as isize == self.extent => Some((off, len)),
            _ => None,
        }
    }

    /// Number of blocks of a block-based node (0 for leaves and empty nodes).
    #[inline]
    pub fn nblocks(&self) -> usize {
        match &self.kind {
            Kind::Empty | Kind::Leaf { .. } => 0,
            Kind::Vector { count, .. } => *count,
            Kind::BlockIndexed { displs, .. } => displs.len(),
            Kind::Indexed { displs, .. } => displs.len(),
            Kind::Struct { displs, .. } => displs.len(),
        }
    }

    /// Block `j`: (displacement, instances, child). `j < nblocks()`.
    #[inline]
    pub fn block(&self, j: usize) -> (isize, usize, &Arc<Node>) {
        match &self.kind {
            Kind::Vector {
                base,
                blocklen,
                stride,
                child,
                ..
            } => (
                base.wrapping_add((j as isize).wrapping_mul(*stride)),
                *blocklen,
                child,
            ),
            Kind::BlockIndexed {
                blocklen,
                displs,
                child,
            } => (displs[j], *blocklen, child),
            Kind::Indexed {
                blocklens,
                displs,
                child,
                ..
            } => (displs[j], blocklens[j], child),
            Kind::Struct {
                blocklens,
                displs,
                children,
                ..
            } => (displs[j], blocklens[j], &children[j]),
            Kind::Empty | Kind::Leaf { .. } => (0, 0, byte()),
        }
    }

    /// Locates byte `pos` (< `size`) of one instance: (block, instance within the block, byte
    /// within that instance).
    pub fn locate(&self, pos: usize) -> (usize, usize, usize) {
        match &self.kind {
            Kind::Vector {
                blocklen, child, ..
            }
            | Kind::BlockIndexed {
                blocklen, child, ..
            } => {
                let block_bytes = blocklen * child.size;
                let j = pos / block_bytes;
                let r = pos % block_bytes;
                (j, r / child.size, r % child.size)
            }
            Kind::Indexed { starts, child, .. } => {
                let g = pos / child.size;
                let j = starts.partition_point(|&s| s <= g) - 1;
                (j, g - starts[j], pos % child.size)
            }
            Kind::Struct {
                starts, children, ..
            } => {
                let j = starts.partition_point(|&s| s <= pos) - 1;
                let r = pos - starts[j];
                let cs = children[j].size;
                (j, r / cs, r % cs)
            }
            Kind::Empty | Kind::Leaf { .. } => (0, 0, pos),
        }
    }

    /// `count` blocks of `blocklen` instances of `child`, block `j` at `base + j * stride`.
    pub fn blocks(
        base: isize,
        count: usize,
        blocklen: usize,
        stride: isize,
        child: &Arc<Node>,
        extent: isize,
    ) -> Result<Node> {
        if count == 0 || blocklen == 0 || child.size == 0 {
            return Ok(Node::empty(extent));
        }
        let size = count
            .mul_or(blocklen, "datatype size")?
            .mul_or(child.size, "datatype size")?;
        if let Some((off, len)) = child.as_dense_leaf() {
            let run = blocklen.mul_or(len, "block length")?;
            let base = base.add_or(off, "displacement")?;
            if count == 1 || stride == to_isize(run, "block length")? {
                return Ok(Node::leaf(base, size, extent));
            }
            return Ok(Node::vector(
                base,
                count,
                run,
                stride,
                byte().clone(),
                extent,
                size,
            ));
        }
        let mut count = count;
        let mut blocklen = blocklen;
        let mut stride = stride;
        if count > 1 {
            // blocks that follow each other without a gap are one block
            let span = to_isize(blocklen, "block length")?.checked_mul(child.extent);
            if span == Some(stride) {
                blocklen = count.mul_or(blocklen, "block length")?;
                count = 1;
            }
        }
        if count == 1 {
            stride = 0;
        }
        if let Some((off, len)) = child.as_leaf() {
            // runs of one leaf each: a vector of byte runs is simpler to traverse
            let base = base.add_or(off, "displacement")?;
            if count == 1 {
                return Ok(Node::vector(
                    base,
                    blocklen,
                    len,
                    child.extent,
                    byte().clone(),
                    extent,
                    size,
                ));
            }
            if blocklen == 1 {
                return Ok(Node::vector(
                    base,
                    count,
                    len,
                    stride,
                    byte().clone(),
                    extent,
                    size,
                ));
            }
        }
        Ok(Node::vector(
            base,
            count,
            blocklen,
            stride,
            child.clone(),
            extent,
            size,
        ))
    }

    fn vector(
        base: isize,
        count: usize,
        blocklen: usize,
        stride: isize,
        child: Arc<Node>,
        extent: isize,
        size: usize,
    ) -> Node {
        let (runs, min_run, max_run) = block_stats(count, blocklen, &child);
        Node {
            size,
            extent,
            kind: Kind::Vector {
                base,
                count,
                blocklen,
                stride,
                child,
            },
            runs,
            min_run,
            max_run,
        }
    }

    /// Blocks of one child at arbitrary displacements (indexed, hindexed, block variants).
    pub fn indexed(entries: Vec<(isize, usize)>, child: &Arc<Node>, extent: isize) -> Result<Node> {
        let entries = entries
            .into_iter()
            .map(|(disp, k)| Entry {
                disp,
                k,
                child: child.clone(),
            })
            .collect();
        Node::structure(entries, extent)
    }

    /// The general case: blocks of possibly different children.
    pub fn structure(entries: Vec<Entry>, extent: isize) -> Result<Node> {
        let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
        let mut size = 0usize;
        for e in entries {
            if e.k == 0 || e.child.size == 0 {
                continue;
            }
            size = size.add_or(e.k.mul_or(e.child.size, "datatype size")?, "datatype size")?;
            let e = if let Some((off, len)) = e.child.as_dense_leaf() {
                Entry {
                    disp: e.disp.add_or(off, "displacement")?,
                    k: e.k.mul_or(len, "block length")?,
                    child: byte().clone(),
                }
            } else if let (Some((off, len)), 1) = (e.child.as_leaf(), e.k) {
                Entry {
                    disp: e.disp.add_or(off, "displacement")?,
                    k: len,
                    child: byte().clone(),
                }
            } else {
                e
            };
            if let Some(last) = out.last_mut() {
                if Arc::ptr_eq(&last.child, &e.child) {
                    let touching = to_isize(last.k, "block length")
                        .ok()
                        .and_then(|k| k.checked_mul(last.child.extent))
                        .and_then(|span| last.disp.checked_add(span))
                        == Some(e.disp);
                    if touching {
                        last.k = last.k.add_or(e.k, "block length")?;
                        continue;
                    }
                }
            }
            out.push(e);
        }
        if out.is_empty() {
            return Ok(Node::empty(extent));
        }
        let first = out[0].child.clone();
        let uniform = out.iter().all(|e| Arc::ptr_eq(&e.child, &first));
        if out.len() == 1 {
            let e = &out[0];
            return Node::blocks(e.disp, 1, e.k, 0, &e.child, extent);
        }
        if uniform {
            let k0 = out[0].k;
            if out.iter().all(|e| e.k == k0) {
                let stride = out[1].disp.wrapping_sub(out[0].disp);
                let arithmetic = out
                    .windows(2)
                    .all(|w| w[1].disp.checked_sub(w[0].disp) == Some(stride));
                if arithmetic {
                    return Node::blocks(out[0].disp, out.len(), k0, stride, &first, extent);
                }
                let (runs, min_run, max_run) = block_stats(out.len(), k0, &first);
                return Ok(Node {
                    size,
                    extent,
                    kind: Kind::BlockIndexed {
                        blocklen: k0,
                        displs: out.iter().map(|e| e.disp).collect(),
                        child: first,
                    },
                    runs,
                    min_run,
                    max_run,
                });
            }
        }
        let mut stats = (0usize, usize::MAX, 0usize);
        let mut starts = Vec::with_capacity(out.len());
        let mut acc = 0usize;
        for e in &out {
            starts.push(acc);
            acc += if uniform { e.k } else { e.k * e.child.size };
            let (r, lo, hi) = block_stats(1, e.k, &e.child);
            stats = (stats.0.saturating_add(r), stats.1.min(lo), stats.2.max(hi));
        }
        let blocklens: Arc<[usize]> = out.iter().map(|e| e.k).collect();
        let displs: Arc<[isize]> = out.iter().map(|e| e.disp).collect();
        let kind = if uniform {
            Kind::Indexed {
                blocklens,
                displs,
                starts: starts.into(),
                child: first,
            }
        } else {
            Kind::Struct {
                blocklens,
                displs,
                children: out.into_iter().map(|e| e.child).collect(),
                starts: starts.into(),
            }
        };
        Ok(Node {
            size,
            extent,
            kind,
            runs: stats.0,
            min_run: stats.1,
            max_run: stats.2,
        })
    }
}

/// (runs, shortest, longest) for `count` blocks of `k` instances of `child`.
fn block_stats(count: usize, k: usize, child: &Node) -> (usize, usize, usize) {
    if let Some((_, len)) = child.as_dense_leaf() {
        let run = k.saturating_mul(len);
        (count, run, run)
    } else {
        (
            count.saturating_mul(k).saturating_mul(child.runs),
            child.min_run,
            child.max_run,
        )
    }
}
