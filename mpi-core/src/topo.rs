//! Process topologies: Cartesian grids, graphs and distributed graphs attached to
//! communicators, their queries, MPI_Dims_create, and the neighbour lists of the neighbourhood
//! collectives. Creating the communicators goes through `comm`; no reordering is done (rank i
//! of the new communicator is rank i of the old one), which the standard allows.

use std::sync::Arc;

use crate::error::{err, ErrorClass, Result};
use crate::{CommId, PROC_NULL, UNDEFINED};

/// A virtual topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Topology {
    /// MPI_Cart_create.
    Cart {
        /// Processes per dimension.
        dims: Vec<i32>,
        /// Whether each dimension wraps around.
        periods: Vec<bool>,
    },
    /// MPI_Graph_create: `index[i]` is the end of node i's neighbours in `edges`.
    Graph {
        /// Cumulative degrees.
        index: Vec<i32>,
        /// Neighbours, concatenated.
        edges: Vec<i32>,
    },
    /// MPI_Dist_graph_create(_adjacent): this process's own edges.
    DistGraph {
        /// Ranks with an edge to this process.
        sources: Vec<i32>,
        /// Their weights.
        sweights: Vec<i32>,
        /// Ranks this process has an edge to.
        dests: Vec<i32>,
        /// Their weights.
        dweights: Vec<i32>,
        /// Whether weights were given.
        weighted: bool,
    },
}

/// The three kinds (MPI_Topo_test).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopoKind {
    /// MPI_CART.
    Cart,
    /// MPI_GRAPH.
    Graph,
    /// MPI_DIST_GRAPH.
    DistGraph,
}

impl Topology {
    /// Its kind.
    pub fn kind(&self) -> TopoKind {
        match self {
            Topology::Cart { .. } => TopoKind::Cart,
            Topology::Graph { .. } => TopoKind::Graph,
            Topology::DistGraph { .. } => TopoKind::DistGraph,
        }
    }

    /// The in-neighbours and out-neighbours of `rank`, in the order the neighbourhood
    /// collectives use: for a grid, in each dimension the process at −1 then at +1
    /// (MPI_PROC_NULL off a non-periodic edge), as sources and as destinations.
    pub fn neighbors(&self, rank: i32) -> (Vec<i32>, Vec<i32>) {
        match self {
            Topology::Cart { dims, periods } => {
                let mut v = Vec::with_capacity(2 * dims.len());
                for d in 0..dims.len() {
                    let (s, t) = cart_shift(dims, periods, rank, d, 1);
                    v.push(s);
                    v.push(t);
                }
                (v.clone(), v)
            }
            Topology::Graph { index, edges } => {
                let v = graph_neighbors(index, edges, rank).to_vec();
                (v.clone(), v)
            }
            Topology::DistGraph { sources, dests, .. } => (sources.clone(), dests.clone()),
        }
    }

    /// Whether neighbour `k` of a grid is paired with its opposite direction (Cartesian
    /// neighbour collectives tag messages by direction of travel).
    pub fn is_cart(&self) -> bool {
        matches!(self, Topology::Cart { .. })
    }
}

/// The topology of `c`, or an MPI_ERR_TOPOLOGY error naming what was expected.
pub fn topo_of(c: CommId) -> Result<Arc<Topology>> {
    crate::comm::topology(c)
        .ok_or_else(|| crate::Error::new(ErrorClass::Topology, "the communicator has no topology"))
}

/// The grid of `c`.
pub fn cart_of(c: CommId) -> Result<(Vec<i32>, Vec<bool>)> {
    match &*topo_of(c)? {
        Topology::Cart { dims, periods } => Ok((dims.clone(), periods.clone())),
        _ => err(
            ErrorClass::Topology,
            "the communicator has no Cartesian topology",
        ),
    }
}

/// Coordinates of `rank` in a grid (row-major).
pub fn cart_coords(dims: &[i32], rank: i32) -> Vec<i32> {
    let mut c = vec![0; dims.len()];
    let mut r = rank;
    for d in (0..dims.len()).rev() {
        let n = dims[d].max(1);
        c[d] = r % n;
        r /= n;
    }
    c
}

/// Rank at `coords` (out-of-range coordinates wrap in periodic dimensions, else are an
/// MPI_ERR_ARG error).
pub fn cart_rank(dims: &[i32], periods: &[bool], coords: &[i32]) -> Result<i32> {
    let mut r = 0i32;
    for d in 0..dims.len() {
        let n = dims[d];
        let mut c = coords[d];
        if !(0..n).contains(&c) {
            if periods[d] {
                c = c.rem_euclid(n);
            } else {
                return err(
                    ErrorClass::Arg,
                    format!("coordinate {c} out of range 0..{n} in non-periodic dimension {d}"),
                );
            }
        }
        r = r * n + c;
    }
    Ok(r)
}

/// MPI_Cart_shift: (source, destination) of a shift by `disp` in dimension `dir`.
pub fn cart_shift(dims: &[i32], periods: &[bool], rank: i32, dir: usize, disp: i32) -> (i32, i32) {
    let c = cart_coords(dims, rank);
    let at = |delta: i32| {
        let mut x = c.clone();
        let n = dims[dir];
        let v = x[dir] + delta;
        if !(0..n).contains(&v) && !periods[dir] {
            return PROC_NULL;
        }
        x[dir] = v.rem_euclid(n);
        cart_rank(dims, periods, &x).unwrap_or(PROC_NULL)
    };
    (at(-disp), at(disp))
}

/// Neighbours of node `rank` of a graph.
pub fn graph_neighbors<'a>(index: &[i32], edges: &'a [i32], rank: i32) -> &'a [i32] {
    let r = rank as usize;
    if r >= index.len() {
        return &[];
    }
    let lo = if r == 0 { 0 } else { index[r - 1] as usize };
    let hi = index[r] as usize;
    edges.get(lo..hi).unwrap_or(&[])
}

/// MPI_Dims_create: fill the zero entries of `dims` so that the product is `nnodes`, the
/// dimensions as close to each other as possible, in non-increasing order: the free dimensions
/// with the smallest difference between the largest and the smallest, and among those the one
/// whose smallest dimension is the largest (then the next smallest, and so on). This is the
/// choice MPICH makes (its test `topo/dims5` checks 75,000 cases against it).
pub fn dims_create(nnodes: i32, dims: &mut [i32]) -> Result<()> {
    if nnodes < 0 {
        return err(ErrorClass::Arg, format!("invalid number of nodes {nnodes}"));
    }
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return err(
            ErrorClass::Dims,
            format!("invalid dimension {d} (must be >= 0)"),
        );
    }
    let fixed: i64 = dims.iter().filter(|&&d| d > 0).map(|&d| d as i64).product();
    let free = dims.iter().filter(|&&d| d == 0).count();
    if nnodes == 0 {
        if free > 0 || fixed != 0 {
            return err(ErrorClass::Dims, "zero nodes need every dimension given");
        }
        return Ok(());
    }
    if fixed == 0 || nnodes as i64 % fixed != 0 {
        return err(
            ErrorClass::Dims,
            format!("{nnodes} nodes cannot be split along the given dimensions (product {fixed})"),
        );
    }
    let rest = (nnodes as i64 / fixed) as u64;
    if free == 0 {
        if rest != 1 {
            return err(
                ErrorClass::Dims,
                format!("the dimensions multiply to {fixed}, not {nnodes}"),
            );
        }
        return Ok(());
    }
    let out = balanced(rest, free);
    let mut it = out.into_iter().rev();
    for d in dims.iter_mut() {
        if *d == 0 {
            *d = it.next().unwrap_or(1) as i32;
        }
    }
    Ok(())
}

/// The `k` factors of `n` (non-decreasing) with the smallest spread (largest − smallest), the
/// ties going to the one that is lexicographically largest from the smallest factor up.
fn balanced(n: u64, k: usize) -> Vec<u64> {
    let mut divs: Vec<u64> = (1..)
        .take_while(|d| d * d <= n)
        .filter(|d| n.is_multiple_of(*d))
        .collect();
    let big: Vec<u64> = divs
        .iter()
        .rev()
        .map(|d| n / d)
        .filter(|&q| q * q != n)
        .collect();
    divs.extend(big);
    let mut s = Search {
        divs,
        cur: Vec::with_capacity(k),
        best: Vec::new(),
        spread: u64::MAX,
    };
    s.next(n, k, 1);
    s.best
}

/// Branch and bound over the factorizations, smallest factor first.
struct Search {
    /// The divisors of the number being split, ascending.
    divs: Vec<u64>,
    /// The factors chosen so far, non-decreasing.
    cur: Vec<u64>,
    /// The best factorization found, and its spread.
    best: Vec<u64>,
    spread: u64,
}

impl Search {
    /// Choose `j` more factors, each at least `lo`, whose product is `r`.
    fn next(&mut self, r: u64, j: usize, lo: u64) {
        if j == 0 {
            return;
        }
        if j == 1 {
            if r >= lo {
                self.cur.push(r);
                self.offer();
                self.cur.pop();
            }
            return;
        }
        for i in 0..self.divs.len() {
            let d = self.divs[i];
            if d < lo || !r.is_multiple_of(d) {
                continue;
            }
            if d.checked_pow(j as u32).is_none_or(|p| p > r) {
                break;
            }
            // Every factor from here on is at least `d`, and the largest at least the
            // (j-1)-th root of what is left.
            let smallest = self.cur.first().copied().unwrap_or(d);
            if d - smallest > self.spread {
                break;
            }
            if d.max(root_up(r / d, j - 1)) - smallest > self.spread {
                continue;
            }
            self.cur.push(d);
            self.next(r / d, j - 1, d);
            self.cur.pop();
        }
    }

    fn offer(&mut self) {
        let spread = self.cur[self.cur.len() - 1] - self.cur[0];
        if spread < self.spread || (spread == self.spread && self.cur > self.best) {
            self.spread = spread;
            self.best.clone_from(&self.cur);
        }
    }
}

/// The smallest `m` with `m^j >= r`.
fn root_up(r: u64, j: usize) -> u64 {
    let mut m = (r as f64).powf(1.0 / j as f64).round() as u64;
    while m > 1 && (m - 1).checked_pow(j as u32).is_some_and(|p| p >= r) {
        m -= 1;
    }
    while m.checked_pow(j as u32).is_some_and(|p| p < r) {
        m += 1;
    }
    m.max(1)
}

// ------------------------------------------------------------------------------------ creation

fn check_intra(c: CommId) -> Result<crate::CommInfo> {
    let info = crate::api::comm_info(c)?;
    if info.remote.is_some() {
        return err(ErrorClass::Comm, "topologies need an intracommunicator");
    }
    Ok(info)
}

/// MPI_Cart_create (no reordering): the first `prod(dims)` processes of `c` form the grid, the
/// others get None.
pub fn cart_create(c: CommId, dims: &[i32], periods: &[bool]) -> Result<Option<CommId>> {
    let info = check_intra(c)?;
    if dims.len() != periods.len() {
        return err(ErrorClass::Arg, "dims and periods differ in length");
    }
    if let Some(d) = dims.iter().find(|&&d| d <= 0) {
        return err(
            ErrorClass::Dims,
            format!("invalid dimension {d} (must be > 0)"),
        );
    }
    let n: i64 = dims.iter().map(|&d| d as i64).product();
    if n > info.local.len() as i64 {
        return err(
            ErrorClass::Arg,
            format!(
                "the grid has {n} processes, the communicator only {}",
                info.local.len()
            ),
        );
    }
    let t = Topology::Cart {
        dims: dims.to_vec(),
        periods: periods.to_vec(),
    };
    crate::comm::create_topo(c, n as usize, t)
}

/// MPI_Cart_sub: the subgrids keeping the dimensions where `remain` is true.
pub fn cart_sub(c: CommId, remain: &[bool]) -> Result<Option<CommId>> {
    let (dims, periods) = cart_of(c)?;
    if remain.len() != dims.len() {
        return err(ErrorClass::Arg, "remain_dims has the wrong length");
    }
    let me = crate::api::comm_rank(c)?;
    let coords = cart_coords(&dims, me);
    let mut color = 0i32;
    let mut key = 0i32;
    let mut sd = Vec::new();
    let mut sp = Vec::new();
    for d in 0..dims.len() {
        if remain[d] {
            key = key * dims[d] + coords[d];
            sd.push(dims[d]);
            sp.push(periods[d]);
        } else {
            color = color * dims[d] + coords[d];
        }
    }
    let t = Topology::Cart {
        dims: sd,
        periods: sp,
    };
    crate::comm::split_with(c, color, key, Some(Arc::new(t)))
}

/// MPI_Graph_create (no reordering): the first `index.len()` processes form the graph.
pub fn graph_create(c: CommId, index: &[i32], edges: &[i32]) -> Result<Option<CommId>> {
    let info = check_intra(c)?;
    let n = index.len();
    if n > info.local.len() {
        return err(
            ErrorClass::Arg,
            format!(
                "the graph has {n} nodes, the communicator only {}",
                info.local.len()
            ),
        );
    }
    let mut prev = 0;
    for &i in index {
        if i < prev || i as usize > edges.len() {
            return err(
                ErrorClass::Arg,
                "index must be non-decreasing and within the edges",
            );
        }
        prev = i;
    }
    if let Some(e) = edges.iter().find(|&&e| e < 0 || e as usize >= n) {
        return err(
            ErrorClass::Arg,
            format!("edge to node {e} outside the graph"),
        );
    }
    let t = Topology::Graph {
        index: index.to_vec(),
        edges: edges.to_vec(),
    };
    crate::comm::create_topo(c, n, t)
}

fn check_ranks(r: &[i32], n: usize) -> Result<()> {
    match r.iter().find(|&&x| x < 0 || x as usize >= n) {
        Some(x) => err(ErrorClass::Rank, format!("invalid neighbour rank {x}")),
        None => Ok(()),
    }
}

/// MPI_Dist_graph_create_adjacent: every process gives its own in- and out-neighbours.
pub fn dist_graph_create_adjacent(
    c: CommId,
    sources: &[i32],
    sweights: Option<&[i32]>,
    dests: &[i32],
    dweights: Option<&[i32]>,
) -> Result<CommId> {
    let info = check_intra(c)?;
    check_ranks(sources, info.local.len())?;
    check_ranks(dests, info.local.len())?;
    let t = Topology::DistGraph {
        sources: sources.to_vec(),
        sweights: sweights.map_or_else(|| vec![1; sources.len()], <[i32]>::to_vec),
        dests: dests.to_vec(),
        dweights: dweights.map_or_else(|| vec![1; dests.len()], <[i32]>::to_vec),
        weighted: sweights.is_some() || dweights.is_some(),
    };
    let n = info.local.len();
    crate::comm::create_topo(c, n, t)?
        .ok_or_else(|| crate::Error::new(ErrorClass::Intern, "no communicator created"))
}

/// MPI_Dist_graph_create: every process gives some edges `(source, destination, weight)` of
/// the graph, anywhere; they are exchanged so that each process learns its own.
pub fn dist_graph_create(c: CommId, edges: &[(i32, i32, i32)], weighted: bool) -> Result<CommId> {
    use madmpi_datatypes::{Basic, Datatype};
    let info = check_intra(c)?;
    let n = info.local.len();
    for &(s, d, _) in edges {
        check_ranks(&[s, d], n)?;
    }
    let int = Datatype::basic(Basic::Int);
    let mine = [edges.len() as i32 * 3];
    let mut counts = vec![0i32; n];
    // SAFETY: the buffers hold the counts given and live until the calls return.
    unsafe {
        crate::coll::allgather(
            Some(crate::Data::new(mine.as_ptr() as *const u8, 1, &int)),
            crate::Data::new(counts.as_mut_ptr() as *const u8, 1, &int),
            c,
        )?;
    }
    let flat: Vec<i32> = edges.iter().flat_map(|&(s, d, w)| [s, d, w]).collect();
    let total: usize = counts.iter().map(|&x| x.max(0) as usize).sum();
    let mut all = vec![0i32; total];
    let mut displs = Vec::with_capacity(n);
    let mut at = 0isize;
    for &k in &counts {
        displs.push(at);
        at += k as isize;
    }
    // SAFETY: as above.
    unsafe {
        crate::coll::allgatherv(
            Some(crate::Data::new(
                flat.as_ptr() as *const u8,
                flat.len(),
                &int,
            )),
            crate::Blocks::v(
                all.as_mut_ptr() as *const u8,
                counts.iter().map(|&x| x as usize).collect(),
                &displs,
                &int,
            ),
            c,
        )?;
    }
    let me = crate::api::comm_rank(c)?;
    let (mut sources, mut sweights, mut dests, mut dweights) = (vec![], vec![], vec![], vec![]);
    for e in all.chunks_exact(3) {
        if e[1] == me {
            sources.push(e[0]);
            sweights.push(e[2]);
        }
        if e[0] == me {
            dests.push(e[1]);
            dweights.push(e[2]);
        }
    }
    let t = Topology::DistGraph {
        sources,
        sweights,
        dests,
        dweights,
        weighted,
    };
    crate::comm::create_topo(c, n, t)?
        .ok_or_else(|| crate::Error::new(ErrorClass::Intern, "no communicator created"))
}

/// MPI_Cart_map / MPI_Graph_map: no reordering — rank `rank` keeps its rank if it fits.
pub fn map_rank(rank: i32, nnodes: i32) -> i32 {
    if rank < nnodes {
        rank
    } else {
        UNDEFINED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dc(n: i32, mut d: Vec<i32>) -> Vec<i32> {
        dims_create(n, &mut d).unwrap();
        d
    }

    #[test]
    fn dims_are_balanced() {
        assert_eq!(dc(6, vec![0, 0]), vec![3, 2]);
        assert_eq!(dc(7, vec![0, 0]), vec![7, 1]);
        assert_eq!(dc(12, vec![0, 0, 0]), vec![3, 2, 2]);
        assert_eq!(dc(16, vec![0, 0]), vec![4, 4]);
        assert_eq!(dc(24, vec![0, 0, 0]), vec![4, 3, 2]);
        assert_eq!(dc(36, vec![0, 0, 0]), vec![4, 3, 3]);
        assert_eq!(dc(8, vec![0, 0, 0]), vec![2, 2, 2]);
        assert_eq!(dc(12, vec![0, 3, 0]), vec![2, 3, 2]);
        assert_eq!(dc(1, vec![0, 0]), vec![1, 1]);
        assert_eq!(dc(64, vec![0, 0, 0, 0]), vec![4, 4, 2, 2]);
        // The smallest spread, then the largest smallest dimension (MPICH's choice).
        assert_eq!(dc(72, vec![0, 0]), vec![9, 8]);
        assert_eq!(dc(5040, vec![0, 0, 0]), vec![21, 16, 15]);
        assert_eq!(dc(34425, vec![0, 0, 0]), vec![51, 27, 25]);
        assert_eq!(dc(1 << 30, vec![0; 40]).iter().product::<i32>(), 1 << 30);
        assert_eq!(dc(720720, vec![0; 6]).iter().product::<i32>(), 720720);
        assert!(dims_create(10, &mut [3, 0]).is_err());
    }

    #[test]
    fn cart_math() {
        let dims = [3, 2];
        let per = [true, false];
        assert_eq!(cart_coords(&dims, 5), vec![2, 1]);
        assert_eq!(cart_rank(&dims, &per, &[2, 1]).unwrap(), 5);
        assert_eq!(cart_rank(&dims, &per, &[-1, 1]).unwrap(), 5);
        assert!(cart_rank(&dims, &per, &[0, 2]).is_err());
        assert_eq!(cart_shift(&dims, &per, 0, 0, 1), (4, 2));
        assert_eq!(cart_shift(&dims, &per, 0, 1, 1), (PROC_NULL, 1));
    }
}
