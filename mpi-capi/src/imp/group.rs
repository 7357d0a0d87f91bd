//! Groups: ordered sets of processes, held as lists of world ranks in a handle table
//! (`MPI_GROUP_EMPTY` is the predefined empty group; operations that produce an empty group
//! return it). Pure set logic: nothing here talks to other processes.

use std::os::raw::c_int;
use std::sync::Arc;

use madmpi::ErrorClass;
use parking_lot::{const_mutex, Mutex};

use super::common::*;
use crate::abi::*;
use crate::handles::{self, Kind, Table};

static GROUPS: Mutex<Table<Arc<[u32]>>> = const_mutex(Table::new(Kind::Group));

/// The world ranks of group `g`.
pub(crate) fn group(g: MPI_Group) -> R<Arc<[u32]>> {
    match g as usize {
        0x109 => Ok(Arc::from(Vec::new())),
        0x108 => fail(ErrorClass::Group, "invalid group: MPI_GROUP_NULL"),
        h => GROUPS.lock().get(h).cloned(),
    }
}

/// A handle for a group (MPI_GROUP_EMPTY when it is empty).
pub(crate) fn new_group(v: Arc<[u32]>) -> R<MPI_Group> {
    if v.is_empty() {
        return Ok(MPI_GROUP_EMPTY);
    }
    Ok(GROUPS.lock().insert(v)? as MPI_Group)
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

/// Rank `r` of a group of `n`, checked.
fn rank_in(r: c_int, n: usize) -> R<usize> {
    if r < 0 || r as usize >= n {
        return fail(
            ErrorClass::Rank,
            format!("invalid rank {r} (group size {n})"),
        );
    }
    Ok(r as usize)
}

fn ints<'a>(p: *const c_int, n: c_int, what: &str) -> R<&'a [c_int]> {
    if n < 0 {
        return fail(ErrorClass::Arg, format!("invalid count {n}"));
    }
    Ok(array(p as *mut c_int, n as usize, what)?)
}

pub unsafe fn MPI_Group_size(group: MPI_Group, size: *mut c_int) -> c_int {
    let r = (|| {
        let g = self::group(group)?;
        *out(size, "size")? = g.len() as c_int;
        Ok(())
    })();
    done("MPI_Group_size", r)
}

pub unsafe fn MPI_Group_rank(group: MPI_Group, rank: *mut c_int) -> c_int {
    let r = (|| {
        let g = self::group(group)?;
        let me = madmpi::world_rank()?;
        *out(rank, "rank")? = g
            .iter()
            .position(|&x| x == me)
            .map_or(MPI_UNDEFINED, |p| p as c_int);
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
        let mut res = Vec::with_capacity(r1.len());
        for &x in r1 {
            res.push(if x == MPI_PROC_NULL {
                MPI_PROC_NULL
            } else {
                let w = g1[rank_in(x, g1.len())?];
                g2.iter()
                    .position(|&y| y == w)
                    .map_or(MPI_UNDEFINED, |p| p as c_int)
            });
        }
        out.copy_from_slice(&res);
        Ok(())
    })();
    done("MPI_Group_translate_ranks", r)
}

/// MPI_IDENT, MPI_SIMILAR or MPI_UNEQUAL.
pub(crate) fn compare(a: &[u32], b: &[u32]) -> c_int {
    if a == b {
        return MPI_IDENT;
    }
    if a.len() == b.len() {
        let mut x = a.to_vec();
        let mut y = b.to_vec();
        x.sort_unstable();
        y.sort_unstable();
        if x == y {
            return MPI_SIMILAR;
        }
    }
    MPI_UNEQUAL
}

pub unsafe fn MPI_Group_compare(group1: MPI_Group, group2: MPI_Group, result: *mut c_int) -> c_int {
    let r = (|| {
        let (a, b) = (group(group1)?, group(group2)?);
        *out(result, "result")? = compare(&a, &b);
        Ok(())
    })();
    done("MPI_Group_compare", r)
}

fn binary(
    name: &str,
    g1: MPI_Group,
    g2: MPI_Group,
    newgroup: *mut MPI_Group,
    f: impl FnOnce(&[u32], &[u32]) -> Vec<u32>,
) -> c_int {
    let r = (|| {
        let (a, b) = (group(g1)?, group(g2)?);
        let o = out(newgroup, "newgroup")?;
        *o = new_group(f(&a, &b).into())?;
        Ok(())
    })();
    done(name, r)
}

pub unsafe fn MPI_Group_union(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    binary("MPI_Group_union", group1, group2, newgroup, |a, b| {
        let mut v = a.to_vec();
        v.extend(b.iter().filter(|x| !a.contains(x)));
        v
    })
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
        |a, b| a.iter().copied().filter(|x| b.contains(x)).collect(),
    )
}

pub unsafe fn MPI_Group_difference(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    binary("MPI_Group_difference", group1, group2, newgroup, |a, b| {
        a.iter().copied().filter(|x| !b.contains(x)).collect()
    })
}

/// Distinct valid ranks of a group of `n`.
fn distinct(ranks: &[c_int], n: usize) -> R<Vec<usize>> {
    let mut seen = vec![false; n];
    let mut v = Vec::with_capacity(ranks.len());
    for &r in ranks {
        let i = rank_in(r, n)?;
        if seen[i] {
            return fail(ErrorClass::Rank, format!("rank {r} appears twice"));
        }
        seen[i] = true;
        v.push(i);
    }
    Ok(v)
}

fn select(
    name: &str,
    group: MPI_Group,
    newgroup: *mut MPI_Group,
    f: impl FnOnce(&[u32]) -> R<Vec<u32>>,
) -> c_int {
    let r: R<()> = (|| {
        let g = self::group(group)?;
        let o = out(newgroup, "newgroup")?;
        *o = new_group(f(&g)?.into())?;
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
        let rs = distinct(ints(ranks, n, "ranks")?, g.len())?;
        Ok(rs.iter().map(|&i| g[i]).collect())
    })
}

pub unsafe fn MPI_Group_excl(
    group: MPI_Group,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    select("MPI_Group_excl", group, newgroup, |g| {
        let rs = distinct(ints(ranks, n, "ranks")?, g.len())?;
        Ok(g.iter()
            .enumerate()
            .filter(|(i, _)| !rs.contains(i))
            .map(|(_, &w)| w)
            .collect())
    })
}

/// The ranks of `n` triplets (first, last, stride).
fn ranges(p: *mut [c_int; 3], n: c_int, size: usize) -> R<Vec<c_int>> {
    if n < 0 {
        return fail(ErrorClass::Arg, format!("invalid count {n}"));
    }
    let t = array(p, n as usize, "ranges")?;
    let mut v = Vec::new();
    for &[first, last, stride] in t.iter() {
        if stride == 0 {
            return fail(ErrorClass::Arg, "a range has stride 0");
        }
        rank_in(first, size)?;
        rank_in(last, size)?;
        if (stride > 0 && first > last) || (stride < 0 && first < last) {
            return fail(
                ErrorClass::Arg,
                format!("range ({first}, {last}, {stride}) is empty"),
            );
        }
        let mut r = first as i64;
        while (stride > 0 && r <= last as i64) || (stride < 0 && r >= last as i64) {
            v.push(r as c_int);
            r += stride as i64;
        }
    }
    Ok(v)
}

pub unsafe fn MPI_Group_range_incl(
    group: MPI_Group,
    n: c_int,
    ranges: *mut [c_int; 3],
    newgroup: *mut MPI_Group,
) -> c_int {
    select("MPI_Group_range_incl", group, newgroup, |g| {
        let rs = distinct(&self::ranges(ranges, n, g.len())?, g.len())?;
        Ok(rs.iter().map(|&i| g[i]).collect())
    })
}

pub unsafe fn MPI_Group_range_excl(
    group: MPI_Group,
    n: c_int,
    ranges: *mut [c_int; 3],
    newgroup: *mut MPI_Group,
) -> c_int {
    select("MPI_Group_range_excl", group, newgroup, |g| {
        let rs = distinct(&self::ranges(ranges, n, g.len())?, g.len())?;
        Ok(g.iter()
            .enumerate()
            .filter(|(i, _)| !rs.contains(i))
            .map(|(_, &w)| w)
            .collect())
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
        *o = new_group(madmpi::comm_info(c)?.local)?;
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
        let rem = madmpi::comm_info(c)?
            .remote
            .ok_or_else(|| madmpi::Error::new(ErrorClass::Comm, "not an intercommunicator"))?;
        *o = new_group(rem)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!("MPI_Comm_remote_group(comm={})", handles::comm_name(comm))
    })
}
