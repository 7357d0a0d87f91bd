//! Intercommunicators: MPI_Intercomm_create and MPI_Intercomm_merge, and what a caller asks
//! of a communicator's kind.

use super::*;

/// MPI_Intercomm_create: the processes of `local` (leader `local_leader`) and those of another
/// group (whose leader is rank `remote_leader` of `peer`, significant at the local leader)
/// form an intercommunicator; the leaders talk on `peer` with `tag`.
pub fn intercomm_create(
    local: CommId,
    local_leader: i32,
    peer: CommId,
    remote_leader: i32,
    tag: i32,
) -> Result<CommId> {
    let nprocs = crate::api::world_size()? as usize;
    let out: Out<CommId> = Arc::default();
    let o = out.clone();
    run(local, None, |b, st| {
        let (rank, group, remote) = view(st, local)?;
        if remote.is_some() {
            return err(
                ErrorClass::Comm,
                "the local communicator must be an intracommunicator",
            );
        }
        let n = group.len() as i32;
        if !(0..n).contains(&local_leader) {
            return err(
                ErrorClass::Rank,
                format!("invalid local leader {local_leader}"),
            );
        }
        if rank == local_leader {
            let pc = st.comm(peer)?;
            if !(0..pc.peer_count()).contains(&remote_leader) {
                return err(
                    ErrorClass::Rank,
                    format!("invalid remote leader {remote_leader}"),
                );
            }
            if !(0..=crate::TAG_UB).contains(&tag) {
                return err(ErrorClass::Tag, format!("invalid tag {tag}"));
            }
        }
        let lt = Team::new(local, rank, n);
        let how = Leaders::User {
            comm: peer,
            peer: remote_leader,
            tag,
        };
        let g = group.clone();
        agree_inter_at(
            b,
            &lt,
            local_leader,
            how,
            ranks_bytes(&group),
            4 * nprocs,
            true,
            move |st, x, y, rest| {
                let rem: Arc<[u32]> = bytes_ranks(rest).into();
                if rem.iter().any(|r| g.contains(r)) || rem.is_empty() {
                    return err(
                        ErrorClass::Arg,
                        "MPI_Intercomm_create: the two groups overlap (or the remote group is empty)",
                    );
                }
                let lc = add(st, local, 2 * y, g.clone(), None)?;
                set_extra(lc, None, None, true);
                let id = add(st, local, 2 * x, g.clone(), Some(rem))?;
                set_extra(id, Some(lc), None, true);
                *o.lock() = Some(id);
                Ok(())
            },
        );
        Ok(())
    })?;
    take(&out)
}

/// MPI_Intercomm_merge: an intracommunicator of both groups, the group that passed
/// `high = false` first (if both passed the same, the group whose leader has the lower world
/// rank).
pub fn intercomm_merge(inter: CommId, high: bool) -> Result<CommId> {
    let out: Out<CommId> = Arc::default();
    let o = out.clone();
    run(inter, None, |b, st| {
        let (rank, group, remote) = view(st, inter)?;
        let Some(remote) = remote else {
            return err(
                ErrorClass::Comm,
                "MPI_Intercomm_merge needs an intercommunicator",
            );
        };
        let l = local_of(inter).ok_or_else(|| {
            Error::new(
                ErrorClass::Intern,
                "intercommunicator without a local communicator",
            )
        })?;
        let lt = Team::new(l, rank, group.len() as i32);
        let rt = Team::new(inter, rank, remote.len() as i32);
        agree_inter(
            b,
            &lt,
            Leaders::Coll(rt),
            vec![high as u8],
            1,
            false,
            move |st, x, _, rest| {
                let their_high = rest.first().copied().unwrap_or(0) != 0;
                let mine_first = if high != their_high {
                    !high
                } else {
                    // Two jobs number each other's processes differently: the accepting
                    // group goes first.
                    dynamic::accepting(inter).unwrap_or(group[0] < remote[0])
                };
                let world: Arc<[u32]> = if mine_first {
                    group.iter().chain(remote.iter()).copied().collect()
                } else {
                    remote.iter().chain(group.iter()).copied().collect()
                };
                let id = add(st, inter, 2 * x, world, None)?;
                set_extra(id, None, None, true);
                *o.lock() = Some(id);
                Ok(())
            },
        );
        Ok(())
    })?;
    take(&out)
}

/// Whether `c` is an intercommunicator.
pub fn comm_is_inter(c: CommId) -> Result<bool> {
    with(|e| Ok(e.st.comm(c)?.remote.is_some()))
}

/// Whether `c` is an intercommunicator, and this process's rank in (the local group of) it:
/// what a collective's C binding needs to know about its caller, under one lock.
pub fn comm_role(c: CommId) -> Result<(bool, i32)> {
    with(|e| {
        let cm = e.st.comm(c)?;
        Ok((cm.remote.is_some(), cm.rank))
    })
}
