//! Process topologies: Cartesian grids, graphs, distributed graphs, their queries and
//! MPI_Dims_create. No reordering is done (`reorder` is accepted and ignored, as the standard
//! allows). The neighbourhood collectives are in `coll/neighbor.rs`.

use std::os::raw::c_int;

use madmpi::topo::{self, Topology};
use madmpi::ErrorClass;

use super::comm_mgmt::register_opt;
use super::common::*;
use crate::abi::*;
use crate::handles;

fn ints<'a>(p: *const c_int, n: c_int, what: &str) -> R<&'a [c_int]> {
    if n < 0 {
        return fail(ErrorClass::Arg, format!("invalid count {n} for {what}"));
    }
    Ok(array(p as *mut c_int, n as usize, what)?)
}

fn outs<'a>(p: *mut c_int, n: usize, what: &str) -> R<&'a mut [c_int]> {
    array(p, n, what)
}

fn weights(p: *const c_int, n: c_int, what: &str) -> R<Option<Vec<c_int>>> {
    if std::ptr::eq(p, MPI_UNWEIGHTED) {
        return Ok(None);
    }
    // MPI_WEIGHTS_EMPTY: a weighted graph with no edges here (MPI_Dist_graph_neighbors_count
    // then says weighted, as in MPICH and Open MPI).
    if std::ptr::eq(p, MPI_WEIGHTS_EMPTY) {
        if n > 0 {
            return fail(
                ErrorClass::Arg,
                format!("MPI_WEIGHTS_EMPTY as {what} for {n} edges (it is for none)"),
            );
        }
        return Ok(Some(Vec::new()));
    }
    if n > 0 && p.is_null() {
        return Ok(None);
    }
    Ok(Some(ints(p, n, what)?.to_vec()))
}

fn call(name: &str, comm: MPI_Comm) -> String {
    format!("{name}(comm={})", handles::comm_name(comm))
}

pub unsafe fn MPI_Cart_create(
    comm_old: MPI_Comm,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    reorder: c_int,
    comm_cart: *mut MPI_Comm,
) -> c_int {
    let _ = reorder;
    let r = (|| {
        let c = handles::comm(comm_old)?;
        let o = out(comm_cart, "comm_cart")?;
        let d = ints(dims, ndims, "dims")?;
        let p: Vec<bool> = ints(periods, ndims, "periods")?
            .iter()
            .map(|&x| x != 0)
            .collect();
        *o = register_opt(topo::cart_create(c, d, &p)?, comm_old)?;
        Ok(())
    })();
    finish(comm_old, r, &|| call("MPI_Cart_create", comm_old))
}

pub unsafe fn MPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
    let r = (|| {
        if ndims < 0 {
            return fail(ErrorClass::Dims, format!("invalid ndims {ndims}"));
        }
        let d = outs(dims, ndims as usize, "dims")?;
        let mut v = d.to_vec();
        topo::dims_create(nnodes, &mut v)?;
        d.copy_from_slice(&v);
        Ok(())
    })();
    finish_self("MPI_Dims_create", r)
}

pub unsafe fn MPI_Cartdim_get(comm: MPI_Comm, ndims: *mut c_int) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let (d, _) = topo::cart_of(c)?;
        *out(ndims, "ndims")? = d.len() as c_int;
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Cartdim_get", comm))
}

pub unsafe fn MPI_Cart_get(
    comm: MPI_Comm,
    maxdims: c_int,
    dims: *mut c_int,
    periods: *mut c_int,
    coords: *mut c_int,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let (d, p) = topo::cart_of(c)?;
        let n = d.len().min(maxdims.max(0) as usize);
        let me = madmpi::comm_rank(c)?;
        let co = topo::cart_coords(&d, me);
        outs(dims, n, "dims")?.copy_from_slice(&d[..n]);
        let pv: Vec<c_int> = p.iter().map(|&x| x as c_int).collect();
        outs(periods, n, "periods")?.copy_from_slice(&pv[..n]);
        outs(coords, n, "coords")?.copy_from_slice(&co[..n]);
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Cart_get", comm))
}

pub unsafe fn MPI_Cart_coords(
    comm: MPI_Comm,
    rank: c_int,
    maxdims: c_int,
    coords: *mut c_int,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let (d, _) = topo::cart_of(c)?;
        let size: i64 = d.iter().map(|&x| x as i64).product();
        if rank < 0 || rank as i64 >= size {
            return fail(ErrorClass::Rank, format!("invalid rank {rank}"));
        }
        if (maxdims as usize) < d.len() {
            return fail(
                ErrorClass::Arg,
                format!("maxdims {maxdims} < {} dimensions", d.len()),
            );
        }
        let co = topo::cart_coords(&d, rank);
        outs(coords, d.len(), "coords")?.copy_from_slice(&co);
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Cart_coords", comm))
}

pub unsafe fn MPI_Cart_rank(comm: MPI_Comm, coords: *const c_int, rank: *mut c_int) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let (d, p) = topo::cart_of(c)?;
        let co = ints(coords, d.len() as c_int, "coords")?;
        // A coordinate out of range is MPI_ERR_ARG, as in MPICH and Open MPI.
        *out(rank, "rank")? = topo::cart_rank(&d, &p, co)?;
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Cart_rank", comm))
}

pub unsafe fn MPI_Cart_shift(
    comm: MPI_Comm,
    direction: c_int,
    disp: c_int,
    rank_source: *mut c_int,
    rank_dest: *mut c_int,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let (d, p) = topo::cart_of(c)?;
        if direction < 0 || direction as usize >= d.len() {
            return fail(ErrorClass::Arg, format!("invalid direction {direction}"));
        }
        let s = out(rank_source, "rank_source")?;
        let t = out(rank_dest, "rank_dest")?;
        let me = madmpi::comm_rank(c)?;
        let (a, b) = topo::cart_shift(&d, &p, me, direction as usize, disp);
        *s = a;
        *t = b;
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Cart_shift", comm))
}

pub unsafe fn MPI_Cart_sub(
    comm: MPI_Comm,
    remain_dims: *const c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let (d, _) = topo::cart_of(c)?;
        let o = out(newcomm, "newcomm")?;
        let rem: Vec<bool> = ints(remain_dims, d.len() as c_int, "remain_dims")?
            .iter()
            .map(|&x| x != 0)
            .collect();
        *o = register_opt(topo::cart_sub(c, &rem)?, comm)?;
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Cart_sub", comm))
}

pub unsafe fn MPI_Cart_map(
    comm: MPI_Comm,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    let _ = periods;
    let r = (|| {
        let c = handles::comm(comm)?;
        let d = ints(dims, ndims, "dims")?;
        if d.iter().any(|&x| x < 0) {
            return fail(ErrorClass::Dims, "dimensions must not be negative");
        }
        // A dimension of 0 is a grid of no process: this one is not in it (MPI_UNDEFINED, as
        // in MPICH), not an error.
        let n: i64 = d.iter().map(|&x| x as i64).product();
        let size = madmpi::comm_size(c)?;
        if n > size as i64 {
            return fail(
                ErrorClass::Arg,
                format!("the grid needs {n} processes, the communicator has {size}"),
            );
        }
        *out(newrank, "newrank")? = topo::map_rank(madmpi::comm_rank(c)?, n as c_int);
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Cart_map", comm))
}

pub unsafe fn MPI_Graph_create(
    comm_old: MPI_Comm,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    reorder: c_int,
    comm_graph: *mut MPI_Comm,
) -> c_int {
    let _ = reorder;
    let r = (|| {
        let c = handles::comm(comm_old)?;
        let o = out(comm_graph, "comm_graph")?;
        let idx = ints(index, nnodes, "index")?;
        let ne = idx.last().copied().unwrap_or(0);
        let e = ints(edges, ne, "edges")?;
        *o = register_opt(topo::graph_create(c, idx, e)?, comm_old)?;
        Ok(())
    })();
    finish(comm_old, r, &|| call("MPI_Graph_create", comm_old))
}

fn graph_of(c: madmpi::CommId) -> R<(Vec<c_int>, Vec<c_int>)> {
    match &*topo::topo_of(c)? {
        Topology::Graph { index, edges } => Ok((index.clone(), edges.clone())),
        _ => fail(
            ErrorClass::Topology,
            "the communicator has no graph topology",
        ),
    }
}

pub unsafe fn MPI_Graphdims_get(comm: MPI_Comm, nnodes: *mut c_int, nedges: *mut c_int) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let (i, e) = graph_of(c)?;
        *out(nnodes, "nnodes")? = i.len() as c_int;
        *out(nedges, "nedges")? = e.len() as c_int;
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Graphdims_get", comm))
}

pub unsafe fn MPI_Graph_get(
    comm: MPI_Comm,
    maxindex: c_int,
    maxedges: c_int,
    index: *mut c_int,
    edges: *mut c_int,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let (i, e) = graph_of(c)?;
        let ni = i.len().min(maxindex.max(0) as usize);
        let ne = e.len().min(maxedges.max(0) as usize);
        outs(index, ni, "index")?.copy_from_slice(&i[..ni]);
        outs(edges, ne, "edges")?.copy_from_slice(&e[..ne]);
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Graph_get", comm))
}

pub unsafe fn MPI_Graph_neighbors_count(
    comm: MPI_Comm,
    rank: c_int,
    nneighbors: *mut c_int,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let (i, e) = graph_of(c)?;
        if rank < 0 || rank as usize >= i.len() {
            return fail(ErrorClass::Rank, format!("invalid rank {rank}"));
        }
        *out(nneighbors, "nneighbors")? = topo::graph_neighbors(&i, &e, rank).len() as c_int;
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Graph_neighbors_count", comm))
}

pub unsafe fn MPI_Graph_neighbors(
    comm: MPI_Comm,
    rank: c_int,
    maxneighbors: c_int,
    neighbors: *mut c_int,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let (i, e) = graph_of(c)?;
        if rank < 0 || rank as usize >= i.len() {
            return fail(ErrorClass::Rank, format!("invalid rank {rank}"));
        }
        let nb = topo::graph_neighbors(&i, &e, rank);
        let n = nb.len().min(maxneighbors.max(0) as usize);
        outs(neighbors, n, "neighbors")?.copy_from_slice(&nb[..n]);
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Graph_neighbors", comm))
}

pub unsafe fn MPI_Graph_map(
    comm: MPI_Comm,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    let _ = (index, edges);
    let r = (|| {
        let c = handles::comm(comm)?;
        let size = madmpi::comm_size(c)?;
        if nnodes < 0 || nnodes > size {
            return fail(
                ErrorClass::Arg,
                format!("invalid nnodes {nnodes} (communicator size {size})"),
            );
        }
        *out(newrank, "newrank")? = topo::map_rank(madmpi::comm_rank(c)?, nnodes);
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Graph_map", comm))
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Dist_graph_create_adjacent(
    comm_old: MPI_Comm,
    indegree: c_int,
    sources: *const c_int,
    sourceweights: *const c_int,
    outdegree: c_int,
    destinations: *const c_int,
    destweights: *const c_int,
    info: MPI_Info,
    reorder: c_int,
    comm_dist_graph: *mut MPI_Comm,
) -> c_int {
    let _ = (info, reorder);
    let r = (|| {
        let c = handles::comm(comm_old)?;
        let o = out(comm_dist_graph, "comm_dist_graph")?;
        let s = ints(sources, indegree, "sources")?;
        let d = ints(destinations, outdegree, "destinations")?;
        let sw = weights(sourceweights, indegree, "sourceweights")?;
        let dw = weights(destweights, outdegree, "destweights")?;
        let id = topo::dist_graph_create_adjacent(c, s, sw.as_deref(), d, dw.as_deref())?;
        *o = register_opt(Some(id), comm_old)?;
        Ok(())
    })();
    finish(comm_old, r, &|| {
        call("MPI_Dist_graph_create_adjacent", comm_old)
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Dist_graph_create(
    comm_old: MPI_Comm,
    n: c_int,
    sources: *const c_int,
    degrees: *const c_int,
    destinations: *const c_int,
    weights: *const c_int,
    info: MPI_Info,
    reorder: c_int,
    comm_dist_graph: *mut MPI_Comm,
) -> c_int {
    let _ = (info, reorder);
    let r = (|| {
        let c = handles::comm(comm_old)?;
        let o = out(comm_dist_graph, "comm_dist_graph")?;
        let s = ints(sources, n, "sources")?;
        let deg = ints(degrees, n, "degrees")?;
        if deg.iter().any(|&x| x < 0) {
            return fail(ErrorClass::Arg, "negative degree");
        }
        let total: c_int = deg.iter().sum();
        let d = ints(destinations, total, "destinations")?;
        let w = self::weights(weights, total, "weights")?;
        let mut edges = Vec::with_capacity(total as usize);
        let mut k = 0usize;
        for (i, &src) in s.iter().enumerate() {
            for _ in 0..deg[i] {
                edges.push((src, d[k], w.as_ref().map_or(1, |w| w[k])));
                k += 1;
            }
        }
        let id = topo::dist_graph_create(c, &edges, w.is_some())?;
        *o = register_opt(Some(id), comm_old)?;
        Ok(())
    })();
    finish(comm_old, r, &|| call("MPI_Dist_graph_create", comm_old))
}

pub unsafe fn MPI_Dist_graph_neighbors_count(
    comm: MPI_Comm,
    indegree: *mut c_int,
    outdegree: *mut c_int,
    weighted: *mut c_int,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let t = topo::topo_of(c)?;
        let Topology::DistGraph {
            sources,
            dests,
            weighted: w,
            ..
        } = &*t
        else {
            return fail(
                ErrorClass::Topology,
                "the communicator has no distributed graph topology",
            );
        };
        *out(indegree, "indegree")? = sources.len() as c_int;
        *out(outdegree, "outdegree")? = dests.len() as c_int;
        *out(weighted, "weighted")? = *w as c_int;
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Dist_graph_neighbors_count", comm))
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Dist_graph_neighbors(
    comm: MPI_Comm,
    maxindegree: c_int,
    sources: *mut c_int,
    sourceweights: *mut c_int,
    maxoutdegree: c_int,
    destinations: *mut c_int,
    destweights: *mut c_int,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let t = topo::topo_of(c)?;
        let Topology::DistGraph {
            sources: s,
            sweights,
            dests,
            dweights,
            weighted,
        } = &*t
        else {
            return fail(
                ErrorClass::Topology,
                "the communicator has no distributed graph topology",
            );
        };
        let ni = s.len().min(maxindegree.max(0) as usize);
        let no = dests.len().min(maxoutdegree.max(0) as usize);
        outs(sources, ni, "sources")?.copy_from_slice(&s[..ni]);
        outs(destinations, no, "destinations")?.copy_from_slice(&dests[..no]);
        let skip = |p: *mut c_int| std::ptr::eq(p, MPI_UNWEIGHTED) || p.is_null();
        if *weighted {
            if !skip(sourceweights) {
                outs(sourceweights, ni, "sourceweights")?.copy_from_slice(&sweights[..ni]);
            }
            if !skip(destweights) {
                outs(destweights, no, "destweights")?.copy_from_slice(&dweights[..no]);
            }
        }
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Dist_graph_neighbors", comm))
}

pub unsafe fn MPI_Topo_test(comm: MPI_Comm, status: *mut c_int) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let o = out(status, "status")?;
        *o = match madmpi::topology(c).map(|t| t.kind()) {
            Some(topo::TopoKind::Cart) => MPI_CART,
            Some(topo::TopoKind::Graph) => MPI_GRAPH,
            Some(topo::TopoKind::DistGraph) => MPI_DIST_GRAPH,
            None => MPI_UNDEFINED,
        };
        Ok(())
    })();
    finish(comm, r, &|| call("MPI_Topo_test", comm))
}
