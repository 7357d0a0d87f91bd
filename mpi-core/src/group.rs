//! Groups: ordered sets of processes, held as the world ranks of their members (rank `i` of a
//! group is its `i`-th entry). This module owns the pure set logic of MPI groups — size, rank
//! lookup, union, intersection, difference, inclusion and exclusion by ranks or ranges, rank
//! translation and comparison — with MPI's ordering rules and argument checks. Nothing here
//! contacts other processes or the engine: a group is a value. The C interface keeps its handle
//! table of [`Group`]s in `mpi-capi` and converts arguments; communicators hand out their groups
//! through [`crate::safe::Communicator::group`].

use std::sync::Arc;

use crate::error::{err, ErrorClass, Result};

/// An ordered set of processes, as world ranks. Cheap to clone (shared).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Group(Arc<[u32]>);

/// The result of comparing two groups (MPI_Group_compare).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupComparison {
    /// MPI_IDENT: the same members in the same order.
    Ident,
    /// MPI_SIMILAR: the same members in another order.
    Similar,
    /// MPI_UNEQUAL: different members.
    Unequal,
}

impl From<Arc<[u32]>> for Group {
    fn from(world: Arc<[u32]>) -> Group {
        Group(world)
    }
}

impl From<Vec<u32>> for Group {
    fn from(world: Vec<u32>) -> Group {
        Group(world.into())
    }
}

impl Default for Group {
    fn default() -> Group {
        Group::empty()
    }
}

/// Rank `r` of a group of `n`, checked.
fn rank_in(r: i32, n: usize) -> Result<usize> {
    if r < 0 || r as usize >= n {
        return err(
            ErrorClass::Rank,
            format!("invalid rank {r} (group size {n})"),
        );
    }
    Ok(r as usize)
}

/// Distinct valid ranks of a group of `n`.
fn distinct(ranks: &[i32], n: usize) -> Result<Vec<usize>> {
    let mut seen = vec![false; n];
    let mut v = Vec::with_capacity(ranks.len());
    for &r in ranks {
        let i = rank_in(r, n)?;
        if seen[i] {
            return err(ErrorClass::Rank, format!("rank {r} appears twice"));
        }
        seen[i] = true;
        v.push(i);
    }
    Ok(v)
}

/// The ranks of triplets (first, last, stride), in order.
fn expand(ranges: &[[i32; 3]], size: usize) -> Result<Vec<i32>> {
    let mut v = Vec::new();
    for &[first, last, stride] in ranges {
        if stride == 0 {
            return err(ErrorClass::Arg, "a range has stride 0");
        }
        rank_in(first, size)?;
        rank_in(last, size)?;
        if (stride > 0 && first > last) || (stride < 0 && first < last) {
            return err(
                ErrorClass::Arg,
                format!("range ({first}, {last}, {stride}) is empty"),
            );
        }
        let mut r = first as i64;
        while (stride > 0 && r <= last as i64) || (stride < 0 && r >= last as i64) {
            v.push(r as i32);
            r += stride as i64;
        }
    }
    Ok(v)
}

impl Group {
    /// MPI_GROUP_EMPTY.
    pub fn empty() -> Group {
        Group(Arc::from(Vec::new()))
    }

    /// The members' world ranks, in group rank order.
    pub fn world_ranks(&self) -> &[u32] {
        &self.0
    }

    /// The members' world ranks, shared.
    pub fn to_arc(&self) -> Arc<[u32]> {
        self.0.clone()
    }

    /// MPI_Group_size.
    pub fn size(&self) -> i32 {
        self.0.len() as i32
    }

    /// Whether the group has no members.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The rank in this group of the process of world rank `world` (None: not a member, i.e.
    /// MPI_UNDEFINED).
    pub fn rank_of(&self, world: u32) -> Option<i32> {
        self.0.iter().position(|&x| x == world).map(|p| p as i32)
    }

    /// MPI_Group_union: this group's members, then those of `other` not in it, in `other`'s
    /// order.
    pub fn union(&self, other: &Group) -> Group {
        let mut v = self.0.to_vec();
        v.extend(other.0.iter().filter(|x| !self.0.contains(x)));
        v.into()
    }

    /// MPI_Group_intersection: the members of both, in this group's order.
    pub fn intersection(&self, other: &Group) -> Group {
        self.0
            .iter()
            .copied()
            .filter(|x| other.0.contains(x))
            .collect::<Vec<_>>()
            .into()
    }

    /// MPI_Group_difference: the members not in `other`, in this group's order.
    pub fn difference(&self, other: &Group) -> Group {
        self.0
            .iter()
            .copied()
            .filter(|x| !other.0.contains(x))
            .collect::<Vec<_>>()
            .into()
    }

    /// MPI_Group_incl: the members of ranks `ranks`, in that order (distinct valid ranks, or
    /// an MPI_ERR_RANK error).
    pub fn incl(&self, ranks: &[i32]) -> Result<Group> {
        let rs = distinct(ranks, self.0.len())?;
        Ok(rs.iter().map(|&i| self.0[i]).collect::<Vec<_>>().into())
    }

    /// MPI_Group_excl: the members but those of ranks `ranks`, in this group's order (distinct
    /// valid ranks, or an MPI_ERR_RANK error).
    pub fn excl(&self, ranks: &[i32]) -> Result<Group> {
        let rs = distinct(ranks, self.0.len())?;
        Ok(self.without(&rs))
    }

    fn without(&self, rs: &[usize]) -> Group {
        self.0
            .iter()
            .enumerate()
            .filter(|(i, _)| !rs.contains(i))
            .map(|(_, &w)| w)
            .collect::<Vec<_>>()
            .into()
    }

    /// MPI_Group_range_incl: the members of the ranks of the triplets (first, last, stride), in
    /// that order. A stride of 0 or a range that goes away from its last rank is an MPI_ERR_ARG
    /// error; a rank out of the group or listed twice, an MPI_ERR_RANK error.
    pub fn range_incl(&self, ranges: &[[i32; 3]]) -> Result<Group> {
        self.incl(&expand(ranges, self.0.len())?)
    }

    /// MPI_Group_range_excl: the members but those of the ranks of the triplets, in this
    /// group's order (the checks of [`Group::range_incl`]).
    pub fn range_excl(&self, ranges: &[[i32; 3]]) -> Result<Group> {
        self.excl(&expand(ranges, self.0.len())?)
    }

    /// MPI_Group_translate_ranks: the ranks in `other` of the processes of ranks `ranks` here
    /// (MPI_UNDEFINED for those not in `other`; MPI_PROC_NULL stays MPI_PROC_NULL).
    pub fn translate_ranks(&self, ranks: &[i32], other: &Group) -> Result<Vec<i32>> {
        ranks
            .iter()
            .map(|&x| {
                Ok(if x == crate::PROC_NULL {
                    crate::PROC_NULL
                } else {
                    let w = self.0[rank_in(x, self.0.len())?];
                    other.rank_of(w).unwrap_or(crate::UNDEFINED)
                })
            })
            .collect()
    }

    /// MPI_Group_compare.
    pub fn compare(&self, other: &Group) -> GroupComparison {
        if self.0 == other.0 {
            return GroupComparison::Ident;
        }
        if self.0.len() == other.0.len() {
            let mut x = self.0.to_vec();
            let mut y = other.0.to_vec();
            x.sort_unstable();
            y.sort_unstable();
            if x == y {
                return GroupComparison::Similar;
            }
        }
        GroupComparison::Unequal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(v: &[u32]) -> Group {
        v.to_vec().into()
    }

    fn class<T: std::fmt::Debug>(r: Result<T>) -> (ErrorClass, String) {
        let e = r.unwrap_err();
        (e.class, e.msg)
    }

    #[test]
    fn size_and_rank_of() {
        let a = g(&[5, 2, 9]);
        assert_eq!(a.size(), 3);
        assert_eq!(a.rank_of(9), Some(2));
        assert_eq!(a.rank_of(4), None);
        assert!(Group::empty().is_empty());
        assert_eq!(Group::empty().size(), 0);
    }

    #[test]
    fn union_keeps_first_then_new_members_of_second() {
        let a = g(&[3, 1, 4]);
        let b = g(&[5, 4, 9, 1, 2]);
        assert_eq!(a.union(&b).world_ranks(), &[3, 1, 4, 5, 9, 2]);
        assert_eq!(b.union(&a).world_ranks(), &[5, 4, 9, 1, 2, 3]);
        assert_eq!(a.union(&Group::empty()), a);
    }

    #[test]
    fn intersection_and_difference_in_first_order() {
        let a = g(&[3, 1, 4, 5, 9]);
        let b = g(&[9, 2, 1, 3]);
        assert_eq!(a.intersection(&b).world_ranks(), &[3, 1, 9]);
        assert_eq!(b.intersection(&a).world_ranks(), &[9, 1, 3]);
        assert_eq!(a.difference(&b).world_ranks(), &[4, 5]);
        assert_eq!(b.difference(&a).world_ranks(), &[2]);
        assert!(a.difference(&a).is_empty());
        assert!(a.intersection(&Group::empty()).is_empty());
    }

    #[test]
    fn incl_and_excl() {
        let a = g(&[10, 11, 12, 13, 14]);
        assert_eq!(a.incl(&[4, 0, 2]).unwrap().world_ranks(), &[14, 10, 12]);
        assert_eq!(a.excl(&[4, 0, 2]).unwrap().world_ranks(), &[11, 13]);
        assert!(a.incl(&[]).unwrap().is_empty());
        assert_eq!(a.excl(&[]).unwrap(), a);
        assert_eq!(
            class(a.incl(&[1, 5])),
            (ErrorClass::Rank, "invalid rank 5 (group size 5)".into())
        );
        assert_eq!(
            class(a.excl(&[-1])),
            (ErrorClass::Rank, "invalid rank -1 (group size 5)".into())
        );
        assert_eq!(
            class(a.incl(&[2, 3, 2])),
            (ErrorClass::Rank, "rank 2 appears twice".into())
        );
        assert_eq!(class(a.excl(&[0, 0])).0, ErrorClass::Rank);
    }

    #[test]
    fn ranges_with_positive_and_negative_strides() {
        let a: Group = (100..110).collect::<Vec<u32>>().into();
        let r = a.range_incl(&[[0, 6, 3], [9, 7, -1]]).unwrap();
        assert_eq!(r.world_ranks(), &[100, 103, 106, 109, 108, 107]);
        // The last rank need not be reached.
        let r = a.range_incl(&[[8, 1, -3]]).unwrap();
        assert_eq!(r.world_ranks(), &[108, 105, 102]);
        let r = a.range_incl(&[[4, 4, -2]]).unwrap();
        assert_eq!(r.world_ranks(), &[104]);
        let r = a.range_excl(&[[9, 1, -2]]).unwrap();
        assert_eq!(r.world_ranks(), &[100, 102, 104, 106, 108]);
        assert!(a.range_excl(&[[0, 9, 1]]).unwrap().is_empty());
    }

    #[test]
    fn range_errors() {
        let a = g(&[0, 1, 2, 3]);
        assert_eq!(
            class(a.range_incl(&[[0, 3, 0]])),
            (ErrorClass::Arg, "a range has stride 0".into())
        );
        assert_eq!(
            class(a.range_incl(&[[3, 0, 1]])),
            (ErrorClass::Arg, "range (3, 0, 1) is empty".into())
        );
        assert_eq!(
            class(a.range_excl(&[[0, 2, -1]])),
            (ErrorClass::Arg, "range (0, 2, -1) is empty".into())
        );
        assert_eq!(
            class(a.range_incl(&[[0, 4, 1]])),
            (ErrorClass::Rank, "invalid rank 4 (group size 4)".into())
        );
        assert_eq!(
            class(a.range_excl(&[[0, 2, 1], [2, 3, 1]])),
            (ErrorClass::Rank, "rank 2 appears twice".into())
        );
    }

    #[test]
    fn translate_ranks_with_proc_null_and_undefined() {
        let a = g(&[7, 3, 5]);
        let b = g(&[5, 7]);
        assert_eq!(
            a.translate_ranks(&[0, 1, 2, crate::PROC_NULL], &b).unwrap(),
            vec![1, crate::UNDEFINED, 0, crate::PROC_NULL]
        );
        assert_eq!(
            a.translate_ranks(&[crate::PROC_NULL], &Group::empty())
                .unwrap(),
            vec![crate::PROC_NULL]
        );
        assert_eq!(
            class(a.translate_ranks(&[3], &b)),
            (ErrorClass::Rank, "invalid rank 3 (group size 3)".into())
        );
    }

    #[test]
    fn compare_ident_similar_unequal() {
        let a = g(&[1, 2, 3]);
        assert_eq!(a.compare(&a.clone()), GroupComparison::Ident);
        assert_eq!(a.compare(&g(&[3, 1, 2])), GroupComparison::Similar);
        assert_eq!(a.compare(&g(&[1, 2])), GroupComparison::Unequal);
        assert_eq!(a.compare(&g(&[1, 2, 4])), GroupComparison::Unequal);
        assert_eq!(
            Group::empty().compare(&Group::empty()),
            GroupComparison::Ident
        );
    }
}
