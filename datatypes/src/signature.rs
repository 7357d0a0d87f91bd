//! Type signatures: the sequence of basic types of a datatype, displacements ignored, kept as a
//! run-length encoded tree (runs of one basic type, and repetitions of sub-sequences) so that a
//! vector of a billion doubles is one entry.
//!
//! Used for `MPI_Get_elements` (how many basic elements are in the first `n` packed bytes), for
//! checking that a send signature is a prefix of a receive signature, and to know the basic type
//! of every packed byte for `external32`. Pair types never appear here: they are their two
//! members.

#![forbid(unsafe_code)]

use std::sync::Arc;

use crate::basic::Basic;

#[derive(Debug, Clone)]
pub(crate) enum SigItem {
    /// `n` consecutive elements of one (non-pair) basic type.
    Run(Basic, usize),
    /// A sub-sequence repeated `n` times.
    Rep(usize, Arc<Sig>),
}

#[derive(Debug, Default)]
pub(crate) struct Sig {
    pub items: Box<[SigItem]>,
    /// Native packed bytes.
    pub size: usize,
    /// Basic elements.
    pub elems: usize,
    /// Bytes in `external32` (saturating).
    pub ext_size: usize,
}

impl SigItem {
    fn size(&self) -> usize {
        match self {
            SigItem::Run(b, n) => b.size() * n,
            SigItem::Rep(n, s) => s.size * n,
        }
    }
    fn elems(&self) -> usize {
        match self {
            SigItem::Run(_, n) => *n,
            SigItem::Rep(n, s) => s.elems * n,
        }
    }
    fn ext_size(&self) -> usize {
        match self {
            SigItem::Run(b, n) => b.external32_size().saturating_mul(*n),
            SigItem::Rep(n, s) => s.ext_size.saturating_mul(*n),
        }
    }
}

impl Sig {
    fn from_items(items: Vec<SigItem>) -> Sig {
        let mut s = Sig {
            size: 0,
            elems: 0,
            ext_size: 0,
            items: Box::new([]),
        };
        for it in &items {
            // sizes were checked by the datatype constructors; elements never outnumber bytes
            s.size += it.size();
            s.elems += it.elems();
            s.ext_size = s.ext_size.saturating_add(it.ext_size());
        }
        s.items = items.into_boxed_slice();
        s
    }

    pub fn basic(b: Basic) -> Arc<Sig> {
        let items = match b.pair() {
            Some([(x, _), (y, _)]) if x == y => vec![SigItem::Run(x, 2)],
            Some([(x, _), (y, _)]) => vec![SigItem::Run(x, 1), SigItem::Run(y, 1)],
            None => vec![SigItem::Run(b, 1)],
        };
        Arc::new(Sig::from_items(items))
    }

    pub fn empty() -> Arc<Sig> {
        Arc::new(Sig::default())
    }

    /// `body` repeated `n` times (the caller has checked that the total size fits).
    pub fn repeat(n: usize, body: &Arc<Sig>) -> Arc<Sig> {
        if n == 0 || body.items.is_empty() {
            return Sig::empty();
        }
        if n == 1 {
            return body.clone();
        }
        if let [SigItem::Run(b, m)] = &*body.items {
            return Arc::new(Sig::from_items(vec![SigItem::Run(*b, m * n)]));
        }
        Arc::new(Sig::from_items(vec![SigItem::Rep(n, body.clone())]))
    }

    /// Concatenation of `parts`, each `(repetitions, signature)`.
    pub fn concat<'a>(parts: impl IntoIterator<Item = (usize, &'a Arc<Sig>)>) -> Arc<Sig> {
        let mut items: Vec<SigItem> = Vec::new();
        let mut only: Option<Arc<Sig>> = None;
        let mut nparts = 0;
        for (n, s) in parts {
            let r = Sig::repeat(n, s);
            if r.items.is_empty() {
                continue;
            }
            nparts += 1;
            only = Some(r.clone());
            for it in r.items.iter() {
                match (items.last_mut(), it) {
                    (Some(SigItem::Run(b0, n0)), SigItem::Run(b, n)) if b0 == b => *n0 += n,
                    _ => items.push(it.clone()),
                }
            }
        }
        match (nparts, only) {
            (1, Some(s)) => s,
            _ => Arc::new(Sig::from_items(items)),
        }
    }

    /// Basic elements in the first `bytes` bytes of one instance (`bytes <= size`), or `None`
    /// when `bytes` ends inside an element.
    fn elements_in(&self, mut bytes: usize) -> Option<usize> {
        let mut elems = 0usize;
        let mut items: &[SigItem] = &self.items;
        'outer: loop {
            for it in items {
                if bytes == 0 {
                    return Some(elems);
                }
                let sz = it.size();
                if bytes >= sz {
                    bytes -= sz;
                    elems += it.elems();
                    continue;
                }
                match it {
                    SigItem::Run(b, _) => {
                        return (bytes % b.size() == 0).then(|| elems + bytes / b.size());
                    }
                    SigItem::Rep(_, body) => {
                        let full = bytes / body.size;
                        elems += full * body.elems;
                        bytes -= full * body.size;
                        items = &body.items;
                        continue 'outer;
                    }
                }
            }
            return (bytes == 0).then_some(elems);
        }
    }

    /// Basic elements in the first `bytes` bytes of the packed stream of any number of
    /// instances, or `None` when `bytes` ends inside an element.
    pub fn elements_in_stream(&self, bytes: usize) -> Option<usize> {
        if self.size == 0 {
            return (bytes == 0).then_some(0);
        }
        let full = bytes / self.size;
        let part = self.elements_in(bytes % self.size)?;
        full.checked_mul(self.elems)?.checked_add(part)
    }

    /// Whether every element is of the basic type `b`.
    pub fn is_only(&self, b: Basic) -> bool {
        self.items.iter().all(|it| match it {
            SigItem::Run(x, _) => *x == b,
            SigItem::Rep(_, s) => s.is_only(b),
        })
    }
}

struct CursorFrame<'a> {
    items: &'a [SigItem],
    idx: usize,
    left: usize,
}

/// Walks the runs `(basic type, elements)` of `count` instances of a signature.
pub(crate) struct SigCursor<'a> {
    stack: Vec<CursorFrame<'a>>,
}

impl<'a> SigCursor<'a> {
    pub fn new(sig: &'a Sig, count: usize) -> SigCursor<'a> {
        let mut stack = Vec::new();
        if count > 0 && !sig.items.is_empty() {
            stack.push(CursorFrame {
                items: &sig.items,
                idx: 0,
                left: count,
            });
        }
        SigCursor { stack }
    }
}

impl Iterator for SigCursor<'_> {
    type Item = (Basic, usize);

    fn next(&mut self) -> Option<(Basic, usize)> {
        loop {
            let top = self.stack.last_mut()?;
            if top.idx >= top.items.len() {
                top.left -= 1;
                if top.left == 0 {
                    self.stack.pop();
                } else {
                    top.idx = 0;
                }
                continue;
            }
            let it = &top.items[top.idx];
            top.idx += 1;
            match it {
                SigItem::Run(b, n) => return Some((*b, *n)),
                SigItem::Rep(n, body) => {
                    if *n > 0 && !body.items.is_empty() {
                        self.stack.push(CursorFrame {
                            items: &body.items,
                            idx: 0,
                            left: *n,
                        });
                    }
                }
            }
        }
    }
}

/// Whether the signature of `a_count` instances of `a` is a prefix of that of `b_count`
/// instances of `b` (a message sent with `a` fits a receive with `b`). `MPI_PACKED` on either
/// side matches any signature of the right size.
pub(crate) fn is_prefix(a: &Arc<Sig>, a_count: usize, b: &Arc<Sig>, b_count: usize) -> bool {
    let a_bytes = a.size.saturating_mul(a_count);
    let b_bytes = b.size.saturating_mul(b_count);
    if a_bytes > b_bytes {
        return false;
    }
    if a_bytes == 0 {
        return true;
    }
    if a.is_only(Basic::Packed) || b.is_only(Basic::Packed) {
        return true;
    }
    if Arc::ptr_eq(a, b) {
        return true;
    }
    let mut ca = SigCursor::new(a, a_count);
    let mut cb = SigCursor::new(b, b_count);
    let mut rb: Option<(Basic, usize)> = None;
    for (ta, mut na) in &mut ca {
        while na > 0 {
            let (tb, nb) = match rb.take() {
                Some(x) => x,
                None => match cb.next() {
                    Some(x) => x,
                    None => return false,
                },
            };
            if ta != tb {
                return false;
            }
            let t = na.min(nb);
            na -= t;
            if nb > t {
                rb = Some((tb, nb - t));
            }
        }
    }
    true
}
