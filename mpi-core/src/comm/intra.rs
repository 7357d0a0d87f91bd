//! Intracommunicator creation: dup/idup, split (also of intercommunicators), creation from
//! a group, and the topology constructors' communicators.

use super::*;

/// MPI_Comm_dup of an intracommunicator or intercommunicator (the topology goes along).
pub fn comm_dup(c: CommId) -> Result<CommId> {
    let sink = ErrorSink::default();
    let (id, r) = idup(c, Some(sink.clone()))?;
    if let Err(e) = finish(r, &sink) {
        let _ = free_comm(id);
        return Err(e);
    }
    Ok(id)
}

/// MPI_Comm_idup: the new communicator's id now, usable once the request completes.
pub fn comm_idup(c: CommId) -> Result<(CommId, RequestId)> {
    idup(c, None)
}

pub(super) fn idup(c: CommId, sink: Option<ErrorSink>) -> Result<(CommId, RequestId)> {
    let topo = topology(c);
    let out: Out<CommId> = Arc::default();
    let o = out.clone();
    let r = start(c, None, sink, |b, st| {
        let (rank, local, remote) = view(st, c)?;
        let id = st.add_comm(Comm {
            ctx: PLACEHOLDER_CTX,
            rank,
            size: local.len() as i32,
            world: local.clone(),
            remote: remote.clone(),
            session: st.comm(c)?.session,
        });
        set_extra(id, None, topo.clone(), false);
        *o.lock() = Some(id);
        match remote {
            None => {
                let t = Team::new(c, rank, local.len() as i32);
                agree_intra(b, &t, move |st, x| {
                    if let Some(Some(cm)) = st.comms.get_mut(id.0 as usize) {
                        cm.ctx = 2 * x;
                    }
                    set_extra(id, None, topo.clone(), true);
                    Ok(())
                });
            }
            Some(_) => {
                let l = local_of(c).ok_or_else(|| {
                    Error::new(
                        ErrorClass::Intern,
                        "intercommunicator without a local communicator",
                    )
                })?;
                let lt = Team::new(l, rank, local.len() as i32);
                let rt = Team::new(c, rank, remote.as_ref().map_or(0, |r| r.len() as i32));
                let how = Leaders::Coll(rt);
                agree_inter(b, &lt, how, Vec::new(), 0, true, move |st, x, y, _| {
                    if let Some(Some(cm)) = st.comms.get_mut(id.0 as usize) {
                        cm.ctx = 2 * x;
                    }
                    let lc = add(st, c, 2 * y, local.clone(), None)?;
                    set_extra(lc, None, None, true);
                    set_extra(id, Some(lc), topo.clone(), true);
                    Ok(())
                });
            }
        }
        Ok(())
    });
    match r {
        Ok(r) => Ok((take(&out)?, r)),
        Err(e) => {
            if let Some(id) = out.lock().take() {
                let _ = with(|en| en.st.remove_comm(id));
                EXTRA.lock().remove(&id.0);
            }
            Err(e)
        }
    }
}

/// MPI_Comm_split: the processes of each `color` (≥ 0) form a communicator, ranked by `key`
/// then by rank in `c`; MPI_UNDEFINED gives None. On an intercommunicator, the processes of a
/// color in each group form an intercommunicator (see `split_inter`).
pub fn comm_split(c: CommId, color: i32, key: i32) -> Result<Option<CommId>> {
    split_with(c, color, key, None)
}

/// MPI_Comm_split_type with MPI_COMM_TYPE_SHARED: the processes of one host (`rank_host`).
/// On an intercommunicator (which the standard does not exclude) the color names the host the
/// same way in both groups, so the result joins the processes of each group on one host (None
/// where the other group has none there), as MPICH does.
pub fn comm_split_shared(c: CommId, key: i32) -> Result<Option<CommId>> {
    let info = crate::api::comm_info(c)?;
    let me = crate::api::world_rank()?;
    let host = |r: u32| crate::api::rank_host(r).unwrap_or_else(|| format!("rank{r}"));
    let mine = host(me);
    let remote = info.remote.as_deref().unwrap_or(&[]);
    let color = info
        .local
        .iter()
        .chain(remote.iter())
        .copied()
        .filter(|&r| host(r) == mine)
        .min()
        .unwrap_or(me) as i32;
    split_with(c, color, key, None)
}

/// Split with a topology for the result (MPI_Cart_sub).
pub(crate) fn split_with(
    c: CommId,
    color: i32,
    key: i32,
    topo: Option<Arc<Topology>>,
) -> Result<Option<CommId>> {
    if color < 0 && color != UNDEFINED {
        return err(
            ErrorClass::Arg,
            format!("invalid color {color} (must be >= 0 or MPI_UNDEFINED)"),
        );
    }
    let out: Out<Option<CommId>> = Arc::default();
    let o = out.clone();
    run(c, None, |b, st| {
        let (rank, local, remote) = view(st, c)?;
        if let Some(remote) = remote {
            return split_inter(b, c, rank, local, remote, color, key, o.clone());
        }
        let n = local.len() as i32;
        let t = Team::new(c, rank, n);
        let pairs = allgather_pairs(b, &t, color, key);
        agree_intra(b, &t, move |st, x| {
            if color == UNDEFINED {
                POOL.lock().give_back(x);
                *o.lock() = Some(None);
                return Ok(());
            }
            // SAFETY: `pairs` holds one (color, key) pair per process of `local`.
            let world = unsafe { members_of(pairs, &local, color) };
            let id = add(st, c, 2 * x, world, None)?;
            set_extra(id, None, topo.clone(), true);
            *o.lock() = Some(Some(id));
            Ok(())
        });
        Ok(())
    })?;
    take(&out)
}

/// Steps that gather every process's (color, key) over `t`: returns the buffer of the pairs
/// (8 bytes each, in rank order of `t`).
pub(super) fn allgather_pairs(b: &mut B, t: &Team, color: i32, key: i32) -> P {
    let n = t.size as usize;
    let pairs = b.tmp(8 * n);
    let mine = b.tmp(8);
    // SAFETY: `mine` has 8 bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(color.to_ne_bytes().as_ptr(), mine, 4);
        std::ptr::copy_nonoverlapping(key.to_ne_bytes().as_ptr(), mine.add(4), 4);
    }
    let bt = crate::coll::sched::bytes();
    algo::allgather_bruck(
        b,
        t,
        8,
        (mine, 8, &bt),
        &|r| {
            (
                pairs.wrapping_add(8 * r as usize),
                8,
                crate::coll::sched::bytes(),
            )
        },
        false,
    );
    P(pairs)
}

/// The processes of `group` (world ranks, in rank order) whose color is `color`, ordered by
/// key, then by rank.
///
/// # Safety
/// `pairs` holds one (color, key) pair (two native-endian i32) per process of `group`.
pub(super) unsafe fn members_of(pairs: P, group: &[u32], color: i32) -> Arc<[u32]> {
    let word = |p: *const u8| {
        let mut w = [0u8; 4];
        std::ptr::copy_nonoverlapping(p, w.as_mut_ptr(), 4);
        i32::from_ne_bytes(w)
    };
    let mut members: Vec<(i32, usize, u32)> = Vec::new();
    for (r, &w) in group.iter().enumerate() {
        let p = pairs.p().add(8 * r);
        if word(p) == color {
            members.push((word(p.add(4)), r, w));
        }
    }
    members.sort();
    members.iter().map(|m| m.2).collect()
}

/// The local communicator of intercommunicator `c`.
pub(super) fn local_comm(c: CommId) -> Result<CommId> {
    local_of(c).ok_or_else(|| {
        Error::new(
            ErrorClass::Intern,
            "intercommunicator without a local communicator",
        )
    })
}

/// MPI_Comm_split of an intercommunicator: the processes of each color in the two groups form
/// an intercommunicator (ranked by key, then by rank, on each side). A color chosen in one
/// group only, or MPI_UNDEFINED, gives None. The (color, key) pairs are gathered in each group
/// and exchanged by the leaders; then one agreement across the two groups gives the id every
/// new intercommunicator uses (their groups are disjoint) and one id per group for the local
/// communicators.
#[allow(clippy::too_many_arguments)]
pub(super) fn split_inter(
    b: &mut B,
    c: CommId,
    rank: i32,
    local: Arc<[u32]>,
    remote: Arc<[u32]>,
    color: i32,
    key: i32,
    o: Out<Option<CommId>>,
) -> Result<()> {
    let n = local.len();
    let m = remote.len();
    let lt = Team::new(local_comm(c)?, rank, n as i32);
    let rt = Team::new(c, rank, m as i32);
    let lp = allgather_pairs(b, &lt, color, key);
    let rp = P(b.tmp(8 * m));
    b.fence();
    if rank == 0 {
        b.send_bytes(&rt, 0, lp.p(), 8 * n);
        b.recv_bytes(&rt, 0, rp.p(), 8 * m);
    }
    algo::bcast_binomial(b, &lt, 0, rp.p(), 8 * m, &crate::coll::sched::bytes());
    let how = Leaders::Coll(rt);
    agree_inter(b, &lt, how, Vec::new(), 0, true, move |st, x, y, _| {
        // SAFETY: `lp` and `rp` hold one pair per process of `local` and `remote`.
        let (lw, rw) = unsafe {
            (
                members_of(lp, &local, color),
                members_of(rp, &remote, color),
            )
        };
        if color == UNDEFINED || rw.is_empty() {
            let mut p = POOL.lock();
            p.give_back(x);
            p.give_back(y);
            *o.lock() = Some(None);
            return Ok(());
        }
        *o.lock() = Some(Some(add_inter(st, c, x, y, lw, rw)?));
        Ok(())
    });
    Ok(())
}

/// Register an intercommunicator (context id `x`) and its local communicator (id `y`).
pub(super) fn add_inter(
    st: &mut State,
    from: CommId,
    x: u32,
    y: u32,
    local: Arc<[u32]>,
    remote: Arc<[u32]>,
) -> Result<CommId> {
    let lc = add(st, from, 2 * y, local.clone(), None)?;
    set_extra(lc, None, None, true);
    let id = add(st, from, 2 * x, local, Some(remote))?;
    set_extra(id, Some(lc), None, true);
    Ok(id)
}

/// MPI_Comm_create: every process of `c` calls it with the group (world ranks, in the new rank
/// order) it belongs to; processes outside their group get None. On an intercommunicator, the
/// group is a subgroup of the local group and the result an intercommunicator between the two
/// groups' subgroups (None for everyone if either is empty).
pub fn comm_create_from_group(c: CommId, group: &[u32]) -> Result<Option<CommId>> {
    create_with(c, group, None)
}

pub(crate) fn create_with(
    c: CommId,
    group: &[u32],
    topo: Option<Arc<Topology>>,
) -> Result<Option<CommId>> {
    let me = crate::api::world_rank()?;
    // (Not inside `run`'s closure: it holds the engine lock.)
    let nprocs = crate::api::world_size()? as usize;
    let member = group.contains(&me);
    let world: Arc<[u32]> = group.into();
    let out: Out<Option<CommId>> = Arc::default();
    let o = out.clone();
    run(c, None, |b, st| {
        let (rank, local, remote) = view(st, c)?;
        if let Some(r) = world.iter().find(|r| !local.contains(r)) {
            return err(
                ErrorClass::Group,
                format!(
                    "the group holds world rank {r}, which is not in the (local) group of the \
                     communicator"
                ),
            );
        }
        if let Some(remote) = remote {
            // Intercommunicator: the group is a subgroup of the local group, the same in the
            // whole local group; the leaders exchange the two subgroups with the agreement.
            let lt = Team::new(local_comm(c)?, rank, local.len() as i32);
            let rt = Team::new(c, rank, remote.len() as i32);
            let w = world.clone();
            let o = o.clone();
            agree_inter(
                b,
                &lt,
                Leaders::Coll(rt),
                ranks_bytes(&world),
                4 * nprocs,
                true,
                move |st, x, y, rest| {
                    let rw: Arc<[u32]> = bytes_ranks(rest).into();
                    if !member || w.is_empty() || rw.is_empty() {
                        let mut p = POOL.lock();
                        p.give_back(x);
                        p.give_back(y);
                        *o.lock() = Some(None);
                        return Ok(());
                    }
                    *o.lock() = Some(Some(add_inter(st, c, x, y, w.clone(), rw)?));
                    Ok(())
                },
            );
            return Ok(());
        }
        let t = Team::new(c, rank, local.len() as i32);
        agree_intra(b, &t, move |st, x| {
            if !member || world.is_empty() {
                POOL.lock().give_back(x);
                *o.lock() = Some(None);
                return Ok(());
            }
            let id = add(st, c, 2 * x, world.clone(), None)?;
            set_extra(id, None, topo.clone(), true);
            *o.lock() = Some(Some(id));
            Ok(())
        });
        Ok(())
    })?;
    take(&out)
}

/// MPI_Comm_create_group: only the members of `group` (world ranks) call it; `tag`
/// distinguishes concurrent calls on the same communicator. A process outside the group (the
/// group empty, say) gets None at once: the call is local for it (MPI-4.1 §7.4.2).
pub fn comm_create_group(c: CommId, group: &[u32], tag: i32) -> Result<Option<CommId>> {
    if tag < 0 {
        return err(ErrorClass::Tag, format!("invalid tag {tag}"));
    }
    let me = crate::api::world_rank()?;
    let info = crate::api::comm_info(c)?;
    if info.remote.is_some() {
        // The standard defines MPI_Comm_create_group on intracommunicators only.
        return err(
            ErrorClass::Comm,
            "MPI_Comm_create_group needs an intracommunicator",
        );
    }
    let mut map = Vec::with_capacity(group.len());
    for w in group {
        match info.local.iter().position(|x| x == w) {
            Some(r) => map.push(r as i32),
            None => {
                return err(
                    ErrorClass::Group,
                    format!("the group holds world rank {w}, which is not in the communicator"),
                )
            }
        }
    }
    let Some(vme) = group.iter().position(|&w| w == me) else {
        return Ok(None);
    };
    let world: Arc<[u32]> = group.into();
    let t = Team {
        comm: c,
        me: vme as i32,
        size: group.len() as i32,
        map: Some(map.into()),
    };
    let out: Out<CommId> = Arc::default();
    let o = out.clone();
    run(c, Some(group_tag(tag)), |b, _st| {
        agree_intra(b, &t, move |st, x| {
            let id = add(st, c, 2 * x, world.clone(), None)?;
            set_extra(id, None, None, true);
            *o.lock() = Some(id);
            Ok(())
        });
        Ok(())
    })?;
    take(&out).map(Some)
}

/// Register a copy of `c`'s group with a topology (MPI_Cart_create … on all ranks of `c`):
/// the first `n` ranks of `c` take part, the others get None.
pub(crate) fn create_topo(c: CommId, n: usize, topo: Topology) -> Result<Option<CommId>> {
    let info = crate::api::comm_info(c)?;
    if info.remote.is_some() {
        return err(ErrorClass::Comm, "topologies need an intracommunicator");
    }
    if n > info.local.len() {
        return err(
            ErrorClass::Arg,
            format!(
                "the topology has {n} processes, more than the {} of the communicator",
                info.local.len()
            ),
        );
    }
    create_with(c, &info.local[..n], Some(Arc::new(topo)))
}
