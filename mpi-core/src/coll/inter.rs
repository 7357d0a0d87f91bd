//! Collectives on intercommunicators. Rooted operations name the root with MPI_ROOT (the root
//! itself), MPI_PROC_NULL (the rest of its group) or its rank in the remote group. Traffic
//! between the groups goes on the intercommunicator's collective context, traffic inside a
//! group on the collective context of the group's local communicator, all under the
//! intercommunicator's sequence tag.

use madmpi_datatypes::Datatype;

use super::sched::{bytes, Team, B};
use super::{algo, need, packed_in, packed_out, Blocks, Data, Input, View, ROOT};
use crate::error::{err, ErrorClass, Result};
use crate::PROC_NULL;

/// Every process of a group leaves once every process of the other group has entered: local
/// barrier, leaders exchange, local broadcast.
pub(super) fn barrier(b: &mut B, v: &View) {
    let lt = v.team();
    let rt = v.remote();
    let z = std::ptr::NonNull::<u8>::dangling().as_ptr();
    algo::barrier_dissemination(b, &lt);
    b.fence();
    if v.rank == 0 {
        b.send_bytes(&rt, 0, z, 0);
        b.recv_bytes(&rt, 0, z, 0);
    }
    algo::bcast_binomial(b, &lt, 0, z, 0, &bytes());
}

/// The root sends to the other group's rank 0, which broadcasts in its group.
pub(super) fn bcast(b: &mut B, v: &View, d: &Data, root: i32) {
    if root == PROC_NULL {
        return;
    }
    let rt = v.remote();
    if root == ROOT {
        b.send(&rt, 0, d.ptr, d.count, &d.dt);
        return;
    }
    if v.rank == 0 {
        b.recv(&rt, root, d.ptr, d.count, &d.dt);
    }
    algo::bcast_binomial(b, &v.team(), 0, d.ptr, d.count, &d.dt);
}

/// The root receives a block from every process of the other group.
pub(super) fn gather(
    b: &mut B,
    v: &View,
    send: Option<&Data>,
    recv: Option<&Blocks>,
    root: i32,
) -> Result<()> {
    if root == PROC_NULL {
        return Ok(());
    }
    let rt = v.remote();
    if root == ROOT {
        let r = need(recv, "receive buffer")?;
        for i in 0..rt.size {
            let (p, c, dt) = r.block(i);
            b.recv(&rt, i, p, c, &dt);
        }
    } else {
        let s = need(send, "send buffer")?;
        b.send(&rt, root, s.ptr, s.count, &s.dt);
    }
    Ok(())
}

/// The root sends a block to every process of the other group.
pub(super) fn scatter(
    b: &mut B,
    v: &View,
    send: Option<&Blocks>,
    recv: Option<&Data>,
    root: i32,
) -> Result<()> {
    if root == PROC_NULL {
        return Ok(());
    }
    let rt = v.remote();
    if root == ROOT {
        let s = need(send, "send buffer")?;
        for i in 0..rt.size {
            let (p, c, dt) = s.block(i);
            b.send(&rt, i, p, c, &dt);
        }
    } else {
        let r = need(recv, "receive buffer")?;
        b.recv(&rt, root, r.ptr, r.count, &r.dt);
    }
    Ok(())
}

/// Every process sends its block to every process of the other group.
pub(super) fn allgather(b: &mut B, v: &View, send: &Data, recv: &Blocks) {
    let rt = v.remote();
    b.fence();
    for i in 0..rt.size {
        let (p, c, dt) = recv.block(i);
        b.recv(&rt, i, p, c, &dt);
    }
    for i in 0..rt.size {
        b.send(&rt, i, send.ptr, send.count, &send.dt);
    }
}

/// Block `i` to and from process `i` of the other group.
pub(super) fn alltoall(b: &mut B, rt: &Team, send: &Blocks, recv: &Blocks) {
    b.fence();
    for i in 0..rt.size {
        let (p, c, dt) = recv.block(i);
        b.recv(rt, i, p, c, &dt);
    }
    for i in 0..rt.size {
        let (p, c, dt) = send.block(i);
        b.send(rt, i, p, c, &dt);
    }
}

/// The other group reduces to its rank 0 (in rank order), which sends the result to the root.
#[allow(clippy::too_many_arguments)]
pub(super) fn reduce(
    b: &mut B,
    v: &View,
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    commutative: bool,
    root: i32,
) -> Result<()> {
    if root == PROC_NULL {
        return Ok(());
    }
    let nb = count * dt.size();
    let rt = v.remote();
    if root == ROOT {
        let (rp, unpack) = packed_out(b, recv, count, dt);
        b.fence();
        b.recv_bytes(&rt, 0, rp, nb);
        if unpack {
            b.unpack(rp, recv, count, dt);
        }
        return Ok(());
    }
    let s = send_buf(send)?;
    let sp = packed_in(b, s, count, dt);
    let mine = if v.rank == 0 {
        b.tmp(nb)
    } else {
        std::ptr::null_mut()
    };
    algo::reduce_binomial(b, &v.team(), 0, sp, mine, count, dt.size(), commutative);
    b.fence();
    if v.rank == 0 {
        b.send_bytes(&rt, root, mine, nb);
    }
    Ok(())
}

/// Each group reduces to its rank 0; the two exchange their results; each broadcasts the
/// other group's result in its group.
#[allow(clippy::too_many_arguments)]
pub(super) fn allreduce(
    b: &mut B,
    v: &View,
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    commutative: bool,
) -> Result<()> {
    let s = send_buf(send)?;
    let nb = count * dt.size();
    let lt = v.team();
    let rt = v.remote();
    let sp = packed_in(b, s, count, dt);
    let (rp, unpack) = packed_out(b, recv, count, dt);
    let mine = if v.rank == 0 {
        b.tmp(nb)
    } else {
        std::ptr::null_mut()
    };
    algo::reduce_binomial(b, &lt, 0, sp, mine, count, dt.size(), commutative);
    b.fence();
    if v.rank == 0 {
        b.send_bytes(&rt, 0, mine, nb);
        b.recv_bytes(&rt, 0, rp, nb);
    }
    algo::bcast_binomial(b, &lt, 0, rp, nb, &bytes());
    if unpack {
        b.unpack(rp, recv, count, dt);
    }
    Ok(())
}

/// Each group reduces its whole vector to its rank 0 (binomial, rank order); the two leaders
/// exchange their results; each leader scatters the other group's result over its group, block
/// `i` (`counts[i]` elements, `counts` being this group's) to process `i`. Both groups reduce
/// the same number of elements (the standard requires it).
#[allow(clippy::too_many_arguments)]
pub(super) fn reduce_scatter(
    b: &mut B,
    v: &View,
    send: Input,
    recv: *mut u8,
    counts: &[usize],
    dt: &Datatype,
    commutative: bool,
) -> Result<()> {
    let s = send_buf(send)?;
    let n = v.size as usize;
    let counts = &counts[..n];
    let esz = dt.size();
    let total: usize = counts.iter().sum();
    let nb = total * esz;
    let lt = v.team();
    let rt = v.remote();
    let me = v.rank as usize;
    let sp = packed_in(b, s, total, dt);
    let (mine, theirs) = if v.rank == 0 {
        (b.tmp(nb), b.tmp(nb))
    } else {
        (std::ptr::null_mut(), std::ptr::null_mut())
    };
    algo::reduce_binomial(b, &lt, 0, sp, mine, total, esz, commutative);
    b.fence();
    if v.rank == 0 {
        b.send_bytes(&rt, 0, mine, nb);
        b.recv_bytes(&rt, 0, theirs, nb);
    }
    b.fence();
    let (rp, unpack) = packed_out(b, recv, counts[me], dt);
    let by = bytes();
    if counts.iter().all(|&c| c == counts[0]) {
        let bsz = counts[0] * esz;
        let slot = move |r: i32| (theirs.wrapping_add(r as usize * bsz), bsz, bytes());
        algo::scatter_binomial(
            b,
            &lt,
            0,
            algo::ScatterArgs {
                bsz,
                slot: (v.rank == 0).then_some(&slot as &dyn Fn(i32) -> algo::Blk),
                own: Some((rp, bsz, &by)),
            },
        );
    } else {
        let mut displs = Vec::with_capacity(n);
        let mut at = 0isize;
        for &c in counts {
            displs.push(at);
            at += (c * esz) as isize;
        }
        let blocks = Blocks::w(
            theirs,
            counts.iter().map(|c| c * esz).collect(),
            displs,
            vec![by.clone(); n],
        );
        let own = Data::new(rp, counts[me] * esz, &by);
        super::rooted::scatterv_linear(b, &lt, 0, (v.rank == 0).then_some(&blocks), Some(&own));
    }
    if unpack {
        b.unpack(rp, recv, counts[me], dt);
    }
    Ok(())
}

/// The send buffer of a reduction on an intercommunicator, where MPI_IN_PLACE is not allowed.
fn send_buf(send: Input) -> Result<*const u8> {
    match send {
        Input::Buf(s) => Ok(s),
        Input::InPlace => err(
            ErrorClass::Buffer,
            "MPI_IN_PLACE is not allowed on an intercommunicator",
        ),
    }
}
