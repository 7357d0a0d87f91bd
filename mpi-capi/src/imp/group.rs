//! The C interface of groups: a handle table of [`madmpi::Group`]s (`MPI_GROUP_EMPTY` is the
//! predefined empty group; operations that produce an empty group return it), argument
//! conversion and error reporting. The set logic is `madmpi::group`'s; nothing here talks to
//! other processes. A group remembers the session it derives from (MPI_Group_from_session_pset,
//! the group of a communicator of a session, and groups made from those), which the
//! communicators made from it carry.

use std::os::raw::c_int;

use madmpi::{ErrorClass, Group, GroupComparison, SessionId};
use parking_lot::{const_mutex, Mutex};

use super::common::*;
use crate::abi::*;
use crate::handles::{self, Kind, Table};

/// A group and the session it derives from.
type Entry = (Group, Option<SessionId>);

static GROUPS: Mutex<Table<Entry>> = const_mutex(Table::new(Kind::Group));

/// Group `g` and the session it derives from.
pub(crate) fn group_of(g: MPI_Group) -> R<Entry> {
    match g as usize {
        0x109 => Ok((Group::empty(), None)),
        0x108 => fail(ErrorClass::Group, "invalid group: MPI_GROUP_NULL"),
        h => GROUPS.lock().get(h).cloned(),
    }
}

/// Group `g`.
pub(crate) fn group(g: MPI_Group) -> R<Group> {
    group_of(g).map(|e| e.0)
}

/// A handle for a group derived from `session` (MPI_GROUP_EMPTY when it is empty).
pub(crate) fn new_group_of(g: Group, session: Option<SessionId>) -> R<MPI_Group> {
    if g.is_empty() {
        return Ok(MPI_GROUP_EMPTY);
    }
    Ok(GROUPS.lock().insert((g, session))? as MPI_Group)
}

/// A handle for a group of the world model (MPI_GROUP_EMPTY when it is empty).
pub(crate) fn new_group(g: Group) -> R<MPI_Group> {
    new_group_of(g, None)
}

/// MPI_IDENT, MPI_SIMILAR or MPI_UNEQUAL.
pub(crate) fn compare_code(c: GroupComparison) -> c_int {
    match c {
        GroupComparison::Ident => MPI_IDENT,
        GroupComparison::Similar => MPI_SIMILAR,
        GroupComparison::Unequal => MPI_UNEQUAL,
    }
}

fn group_name(g: MPI_Group) -> String {
    match g as usize {
        0x108 => "MPI_GROUP_NULL".into(),
        0x109 => "MPI_GROUP_EMPTY".into(),
        h => format!("{h:#x}"),
    }
}

fn done(name: &str, r: R<()>) -> c_int {
    finish_self(name, r)
}

fn ints<'a>(p: *const c_int, n: c_int, what: &str) -> R<&'a [c_int]> {
    if n < 0 {
        return fail(ErrorClass::Arg, format!("invalid count {n}"));
    }
    Ok(array(p as *mut c_int, n as usize, what)?)
}

/// `n` triplets (first, last, stride).
fn triplets<'a>(p: *mut [c_int; 3], n: c_int) -> R<&'a [[c_int; 3]]> {
    if n < 0 {
        return fail(ErrorClass::Arg, format!("invalid count {n}"));
    }
    Ok(array(p, n as usize, "ranges")?)
}

pub unsafe fn MPI_Group_size(group: MPI_Group, size: *mut c_int) -> c_int {
    let r = (|| {
        let g = self::group(group)?;
        *out(size, "size")? = g.size();
        Ok(())
    })();
    done("MPI_Group_size", r)
}

pub unsafe fn MPI_Group_rank(group: MPI_Group, rank: *mut c_int) -> c_int {
    let r = (|| {
        let g = self::group(group)?;
        let me = madmpi::world_rank()?;
        *out(rank, "rank")? = g.rank_of(me).unwrap_or(MPI_UNDEFINED);
        Ok(())
    })();
    done("MPI_Group_rank", r)
}

pub unsafe fn MPI_Group_translate_ranks(
    group1: MPI_Group,
    n: c_int,
    ranks1: *const c_int,
    group2: MPI_Group,
    ranks2: *mut c_int,
) -> c_int {
    let r = (|| {
        let g1 = group(group1)?;
        let g2 = group(group2)?;
        let r1 = ints(ranks1, n, "ranks1")?;
        let out = array(ranks2, r1.len(), "ranks2")?;
        out.copy_from_slice(&g1.translate_ranks(r1, &g2)?);
        Ok(())
    })();
    done("MPI_Group_translate_ranks", r)
}

pub unsafe fn MPI_Group_compare(group1: MPI_Group, group2: MPI_Group, result: *mut c_int) -> c_int {
    let r = (|| {
        let (a, b) = (group(group1)?, group(group2)?);
        *out(result, "result")? = compare_code(a.compare(&b));
        Ok(())
    })();
    done("MPI_Group_compare", r)
}

fn binary(
    name: &str,
    g1: MPI_Group,
    g2: MPI_Group,
    newgroup: *mut MPI_Group,
    f: impl FnOnce(&Group, &Group) -> Group,
) -> c_int {
    let r = (|| {
        let ((a, sa), (b, sb)) = (group_of(g1)?, group_of(g2)?);
        let o = out(newgroup, "newgroup")?;
        *o = new_group_of(f(&a, &b), sa.or(sb))?;
        Ok(())
    })();
    done(name, r)
}

pub unsafe fn MPI_Group_union(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    binary("MPI_Group_union", group1, group2, newgroup, Group::union)
}

pub unsafe fn MPI_Group_intersection(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    binary(
        "MPI_Group_intersection",
        group1,
        group2,
        newgroup,
        Group::intersection,
    )
}

pub unsafe fn MPI_Group_difference(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    binary(
        "MPI_Group_difference",
        group1,
        group2,
        newgroup,
        Group::difference,
    )
}

fn select(
    name: &str,
    group: MPI_Group,
    newgroup: *mut MPI_Group,
    f: impl FnOnce(&Group) -> R<Group>,
) -> c_int {
    let r: R<()> = (|| {
        let (g, session) = group_of(group)?;
        let o = out(newgroup, "newgroup")?;
        *o = new_group_of(f(&g)?, session)?;
        Ok(())
    })();
    finish_self(
        name,
        r.map_err(|e: madmpi::Error| {
            madmpi::Error::new(e.class, format!("{} (group {})", e.msg, group_name(group)))
        }),
    )
}

pub unsafe fn MPI_Group_incl(
    group: MPI_Group,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    select("MPI_Group_incl", group, newgroup, |g| {
        g.incl(ints(ranks, n, "ranks")?)
    })
}

pub unsafe fn MPI_Group_excl(
    group: MPI_Group,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    select("MPI_Group_excl", group, newgroup, |g| {
        g.excl(ints(ranks, n, "ranks")?)
    })
}

pub unsafe fn MPI_Group_range_incl(
    group: MPI_Group,
    n: c_int,
    ranges: *mut [c_int; 3],
    newgroup: *mut MPI_Group,
) -> c_int {
    select("MPI_Group_range_incl", group, newgroup, |g| {
        g.range_incl(triplets(ranges, n)?)
    })
}

pub unsafe fn MPI_Group_range_excl(
    group: MPI_Group,
    n: c_int,
    ranges: *mut [c_int; 3],
    newgroup: *mut MPI_Group,
) -> c_int {
    select("MPI_Group_range_excl", group, newgroup, |g| {
        g.range_excl(triplets(ranges, n)?)
    })
}

pub unsafe fn MPI_Group_free(group: *mut MPI_Group) -> c_int {
    let r = (|| {
        let slot = out(group, "group")?;
        match *slot as usize {
            0x108 => return fail(ErrorClass::Group, "invalid group: MPI_GROUP_NULL"),
            // Freeing MPI_GROUP_EMPTY (returned by the group operations) only nulls the handle.
            0x109 => {}
            h => {
                GROUPS.lock().remove(h)?;
            }
        }
        *slot = MPI_GROUP_NULL;
        Ok(())
    })();
    done("MPI_Group_free", r)
}

pub unsafe fn MPI_Comm_group(comm: MPI_Comm, group: *mut MPI_Group) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let o = out(group, "group")?;
        let info = madmpi::comm_info(c)?;
        *o = new_group_of(info.local.into(), info.session)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_group(comm={})", handles::comm_name(comm))
    })
}

pub unsafe fn MPI_Comm_remote_group(comm: MPI_Comm, group: *mut MPI_Group) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let o = out(group, "group")?;
        let info = madmpi::comm_info(c)?;
        let rem = info
            .remote
            .ok_or_else(|| madmpi::Error::new(ErrorClass::Comm, "not an intercommunicator"))?;
        *o = new_group_of(rem.into(), info.session)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_remote_group(comm={})", handles::comm_name(comm))
    })
}
