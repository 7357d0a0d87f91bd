//! Traversal: the (offset, length) segments of `count` instances of a type, in type-map order,
//! between any two byte positions of the packed stream.
//!
//! The iterator walks the compiled [`Node`] tree with an explicit stack (inline for the usual
//! depths, so creating and running it does not allocate), seeks to a start position in
//! O(depth × log(blocks)), and merges runs that touch. It never touches user memory: it only
//! computes offsets, with wrapping arithmetic (a caller that describes more memory than exists
//! gets meaningless offsets, never a panic).

#![forbid(unsafe_code)]

use std::iter::FusedIterator;
use std::ops::Range;

use crate::node::{Kind, Node, EMPTY_NODE};

#[derive(Clone, Copy, Debug)]
struct Frame<'a> {
    node: &'a Node,
    /// Offset of this instance's origin from the buffer.
    base: isize,
    /// Current block.
    j: usize,
    /// Next instance within the block.
    i: usize,
    /// The root frame: one block of `count` instances of `node`.
    root: bool,
}

const INLINE: usize = 8;

/// A stack that lives inline up to [`INLINE`] frames and spills to the heap beyond.
#[derive(Clone, Debug)]
struct Stack<'a> {
    inline: [Frame<'a>; INLINE],
    len: usize,
    spill: Vec<Frame<'a>>,
}

impl<'a> Stack<'a> {
    fn new() -> Self {
        let blank = Frame {
            node: &EMPTY_NODE,
            base: 0,
            j: 0,
            i: 0,
            root: false,
        };
        Stack {
            inline: [blank; INLINE],
            len: 0,
            spill: Vec::new(),
        }
    }

    #[inline]
    fn push(&mut self, f: Frame<'a>) {
        if self.len < INLINE {
            self.inline[self.len] = f;
        } else {
            self.spill.push(f);
        }
        self.len += 1;
    }

    #[inline]
    fn pop(&mut self) {
        if self.len > INLINE {
            self.spill.pop();
        }
        self.len = self.len.saturating_sub(1);
    }

    #[inline]
    fn top(&mut self) -> Option<&mut Frame<'a>> {
        match self.len {
            0 => None,
            n if n <= INLINE => Some(&mut self.inline[n - 1]),
            _ => self.spill.last_mut(),
        }
    }
}

/// Iterator over the memory segments `(offset from the buffer, length)` of part of the packed
/// stream of `count` instances of a datatype, in packing order, adjacent segments merged.
///
/// Created by [`Datatype::segments`](crate::Datatype::segments). Does not allocate unless the
/// layout tree is deeper than eight levels.
#[derive(Clone, Debug)]
pub struct Segments<'a> {
    /// `Some` for one-level layouts (every block one run): walked without the stack.
    flat: Option<Flat<'a>>,
    stack: Stack<'a>,
    count: usize,
    /// Bytes to drop from the front of the next run (set by the initial seek).
    skip: usize,
    /// Bytes still to yield.
    remaining: usize,
    pending: Option<(isize, usize)>,
}

/// State of the stack-free walk of a one-level layout.
#[derive(Clone, Copy, Debug)]
struct Flat<'a> {
    runs: Runs<'a>,
    nblocks: usize,
    extent: isize,
    /// Next block of the current instance.
    j: usize,
    /// Origin of the current instance.
    base: isize,
}

/// The runs of one instance of a one-level layout, decoded once.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Runs<'a> {
    One {
        off: isize,
        len: usize,
    },
    Strided {
        first: isize,
        len: usize,
        stride: isize,
    },
    Blocks {
        displs: &'a [isize],
        off: isize,
        len: usize,
    },
    Varying {
        displs: &'a [isize],
        lens: &'a [usize],
        off: isize,
        unit: usize,
    },
}

impl Runs<'_> {
    #[inline(always)]
    pub(crate) fn get(&self, j: usize) -> (isize, usize) {
        match *self {
            Runs::One { off, len } => (off, len),
            Runs::Strided { first, len, stride } => {
                (first.wrapping_add((j as isize).wrapping_mul(stride)), len)
            }
            Runs::Blocks { displs, off, len } => (displs[j].wrapping_add(off), len),
            Runs::Varying {
                displs,
                lens,
                off,
                unit,
            } => (displs[j].wrapping_add(off), lens[j] * unit),
        }
    }
}

/// The runs of `node` when every block of it is a single run.
pub(crate) fn flat_runs(node: &Node) -> Option<Runs<'_>> {
    match &node.kind {
        Kind::Leaf { off, len } => Some(Runs::One {
            off: *off,
            len: *len,
        }),
        Kind::Vector {
            base,
            blocklen,
            stride,
            child,
            ..
        } => child.as_dense_leaf().map(|(off, len)| Runs::Strided {
            first: base.wrapping_add(off),
            len: blocklen * len,
            stride: *stride,
        }),
        Kind::BlockIndexed {
            blocklen,
            displs,
            child,
        } => child.as_dense_leaf().map(|(off, len)| Runs::Blocks {
            displs,
            off,
            len: blocklen * len,
        }),
        Kind::Indexed {
            blocklens,
            displs,
            child,
            ..
        } => child.as_dense_leaf().map(|(off, len)| Runs::Varying {
            displs,
            lens: blocklens,
            off,
            unit: len,
        }),
        Kind::Empty | Kind::Struct { .. } => None,
    }
}

impl<'a> Segments<'a> {
    pub(crate) fn new(node: &'a Node, count: usize, range: Range<usize>) -> Segments<'a> {
        let total = count.saturating_mul(node.size);
        let start = range.start.min(total);
        let end = range.end.min(total);
        let mut it = Segments {
            flat: None,
            stack: Stack::new(),
            count,
            skip: 0,
            remaining: end.saturating_sub(start),
            pending: None,
        };
        if it.remaining == 0 {
            return it;
        }
        if let Some(runs) = flat_runs(node) {
            let (inst, within) = (start / node.size, start % node.size);
            let (j, skip) = match node.kind {
                Kind::Leaf { .. } => (0, within),
                _ => {
                    let (j, i, rem) = node.locate(within);
                    (j, i * node.block(j).2.size + rem)
                }
            };
            it.skip = skip;
            it.flat = Some(Flat {
                runs,
                nblocks: node.nblocks().max(1),
                extent: node.extent,
                j,
                base: (inst as isize).wrapping_mul(node.extent),
            });
            return it;
        }
        it.stack.push(Frame {
            node,
            base: 0,
            j: 0,
            i: 0,
            root: true,
        });
        it.seek(start);
        it
    }

    /// Positions the stack so that the next raw run contains byte `pos` of the stream.
    fn seek(&mut self, mut pos: usize) {
        while let Some(top) = self.stack.top() {
            let node = top.node;
            let (j, i, rem, disp, child): (usize, usize, usize, isize, &'a Node) = if top.root {
                (0, pos / node.size, pos % node.size, 0, node)
            } else {
                let (j, i, rem) = node.locate(pos);
                let (disp, _, child) = node.block(j);
                (j, i, rem, disp, child)
            };
            top.j = j;
            if child.as_leaf().is_some() {
                top.i = i;
                self.skip = rem;
                return;
            }
            top.i = i + 1;
            let base = top
                .base
                .wrapping_add(disp)
                .wrapping_add((i as isize).wrapping_mul(child.extent));
            self.stack.push(Frame {
                node: child,
                base,
                j: 0,
                i: 0,
                root: false,
            });
            pos = rem;
        }
    }

    #[inline]
    fn emit(&mut self, off: isize, len: usize) -> (isize, usize) {
        let (off, len) = if self.skip > 0 {
            let s = std::mem::take(&mut self.skip);
            (off.wrapping_add(s as isize), len - s)
        } else {
            (off, len)
        };
        let len = len.min(self.remaining);
        self.remaining -= len;
        (off, len)
    }

    /// The next run, before merging.
    #[inline(always)]
    fn next_raw(&mut self) -> Option<(isize, usize)> {
        if self.remaining == 0 {
            return None;
        }
        if let Some(f) = &mut self.flat {
            let (d, len) = f.runs.get(f.j);
            let off = f.base.wrapping_add(d);
            f.j += 1;
            if f.j == f.nblocks {
                f.j = 0;
                f.base = f.base.wrapping_add(f.extent);
            }
            return Some(self.emit(off, len));
        }
        self.next_tree()
    }

    /// The next run of a layout tree (kept out of line so that the flat path stays small).
    #[inline(never)]
    fn next_tree(&mut self) -> Option<(isize, usize)> {
        let count = self.count;
        loop {
            let top = self.stack.top()?;
            let node: &'a Node = top.node;
            let (nblocks, disp, k, child): (usize, isize, usize, &'a Node) = if top.root {
                (1, 0, count, node)
            } else {
                let n = node.nblocks();
                if top.j >= n {
                    self.stack.pop();
                    continue;
                }
                let (d, k, c) = node.block(top.j);
                (n, d, k, c)
            };
            if top.j >= nblocks {
                self.stack.pop();
                continue;
            }
            if let Some((off, len)) = child.as_dense_leaf() {
                // the rest of the block is one run
                let start = top
                    .base
                    .wrapping_add(disp)
                    .wrapping_add(off)
                    .wrapping_add((top.i as isize).wrapping_mul(len as isize));
                let run = (k - top.i).saturating_mul(len);
                top.j += 1;
                top.i = 0;
                return Some(self.emit(start, run));
            }
            if top.i >= k {
                top.j += 1;
                top.i = 0;
                continue;
            }
            let inst = top
                .base
                .wrapping_add(disp)
                .wrapping_add((top.i as isize).wrapping_mul(child.extent));
            top.i += 1;
            match child.kind {
                Kind::Leaf { off, len } => return Some(self.emit(inst.wrapping_add(off), len)),
                Kind::Empty => continue,
                _ => self.stack.push(Frame {
                    node: child,
                    base: inst,
                    j: 0,
                    i: 0,
                    root: false,
                }),
            }
        }
    }
}

impl Iterator for Segments<'_> {
    type Item = (isize, usize);

    #[inline]
    fn next(&mut self) -> Option<(isize, usize)> {
        let (off, mut len) = match self.pending.take() {
            Some(p) => p,
            None => self.next_raw()?,
        };
        while let Some((o, l)) = self.next_raw() {
            if o == off.wrapping_add(len as isize) {
                len += l;
            } else {
                self.pending = Some((o, l));
                break;
            }
        }
        Some((off, len))
    }
}

impl FusedIterator for Segments<'_> {}
