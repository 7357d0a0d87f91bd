//! Communicators of the sessions model: MPI_Comm_create_from_group and
//! MPI_Intercomm_create_from_groups, which have no parent communicator.
//!
//! Every process has one more communicator from the start, `SESSION_COMM`: all the world
//! ranks, context 4 (id 2 of the pool, never handed out), named by no handle. A creation from
//! a group is MPI_Comm_create_group over it: only the members call, and they agree on a context
//! id with the allreduce of their pools' masks, on its collective context, under a tag made
//! from the user's string tag (a hash of it: two creations in progress at once over
//! overlapping groups must use string tags whose hashes differ, as in MPICH, which hashes them
//! too). The leaders of an intercommunicator's two groups talk on its point-to-point context.
//!
//! A communicator made from a session's group carries the session (`Comm::session`), and so
//! does every communicator made from it (`add`): their buffered sends may use the session's
//! buffer (MPI_Session_attach_buffer).

use super::*;
use crate::SessionId;

/// The sessions' communicator (see the module documentation).
pub(crate) const SESSION_COMM: CommId = CommId(2);

/// The tag of string tag `s`: 20 bits of its FNV-1a hash (what `group_tag` keeps).
fn tag_of(s: &str) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    ((h ^ (h >> 20)) & 0xF_FFFF) as i32
}

/// MPI_Comm_create_from_group: a communicator of `group` (world ranks, in rank order), made by
/// the members alone, derived from `session` (the session the group comes from). `None` for an
/// empty group.
pub fn comm_from_session_group(
    group: &[u32],
    tag: &str,
    session: Option<SessionId>,
) -> Result<Option<CommId>> {
    if group.is_empty() {
        return Ok(None);
    }
    let me = crate::api::world_rank()?;
    if !group.contains(&me) {
        return err(
            ErrorClass::Group,
            "MPI_Comm_create_from_group: the calling process is not in the group",
        );
    }
    let Some(id) = comm_create_group(SESSION_COMM, group, tag_of(tag))? else {
        return Ok(None);
    };
    with(|e| {
        if let Some(Some(c)) = e.st.comms.get_mut(id.0 as usize) {
            c.session = session;
        }
        Ok(())
    })?;
    Ok(Some(id))
}

/// MPI_Intercomm_create_from_groups: `local` and `remote` (world ranks) form an
/// intercommunicator derived from `session`; `local_leader` is a rank of `local`,
/// `remote_leader` one of `remote`.
pub fn intercomm_from_session_groups(
    local: &[u32],
    local_leader: i32,
    remote: &[u32],
    remote_leader: i32,
    tag: &str,
    session: Option<SessionId>,
) -> Result<CommId> {
    if !(0..local.len() as i32).contains(&local_leader) {
        return err(
            ErrorClass::Rank,
            format!("invalid local leader {local_leader}"),
        );
    }
    if !(0..remote.len() as i32).contains(&remote_leader) {
        return err(
            ErrorClass::Rank,
            format!("invalid remote leader {remote_leader}"),
        );
    }
    if local.iter().any(|r| remote.contains(r)) {
        return err(
            ErrorClass::Group,
            "MPI_Intercomm_create_from_groups: the two groups overlap",
        );
    }
    let lc = comm_from_session_group(local, tag, session)?
        .ok_or_else(|| Error::new(ErrorClass::Group, "the local group is empty"))?;
    let peer = remote[remote_leader as usize] as i32;
    let made = intercomm_create(lc, local_leader, SESSION_COMM, peer, tag_of(tag));
    let freed = free_comm(lc);
    let id = made?;
    freed?;
    Ok(id)
}
