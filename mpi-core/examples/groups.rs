//! Groups through the Rust API: each rank takes the group of MPI_COMM_WORLD, splits it into even
//! and odd ranks with the group operations and checks what MPI specifies of them (ranks, order,
//! translation, comparison). Purely local: groups contact no other process.
//! Run with `bin/mpirun -n 4 target/release/examples/groups`.

use madmpi::{safe, Group, GroupComparison};

fn main() {
    let universe = safe::initialize().expect("MPI_Init");
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let all = world.group();
    assert_eq!(all.size(), size);
    assert_eq!(all.world_ranks(), (0..size as u32).collect::<Vec<_>>());
    let me = all.world_ranks()[rank as usize];
    assert_eq!(all.rank_of(me), Some(rank));

    // Even ranks by a range, odd ranks as the rest.
    let even = all.range_incl(&[[0, size - 1, 2]]).expect("range_incl");
    let odd = all.difference(&even);
    assert_eq!(even.size() + odd.size(), size);
    assert!(even.intersection(&odd).is_empty());
    // Union: the even ranks, then the odd ones (the same order as the world's up to 2 ranks).
    let similar = if size <= 2 {
        GroupComparison::Ident
    } else {
        GroupComparison::Similar
    };
    assert_eq!(even.union(&odd).compare(&all), similar);
    assert_eq!(odd.union(&even).size(), size);
    let mine = if rank % 2 == 0 { &even } else { &odd };
    assert_eq!(mine.rank_of(me), Some(rank / 2));

    // Reversed world, and translation back.
    let reversed = all.range_incl(&[[size - 1, 0, -1]]).expect("range_incl");
    let back = reversed
        .translate_ranks(&[0, madmpi::PROC_NULL], &all)
        .expect("translate_ranks");
    assert_eq!(back, vec![size - 1, madmpi::PROC_NULL]);
    let expected = if size == 1 {
        GroupComparison::Ident
    } else {
        GroupComparison::Similar
    };
    assert_eq!(reversed.compare(&all), expected);
    assert_eq!(
        world.group().compare(&all),
        GroupComparison::Ident,
        "the group of a communicator does not change"
    );
    assert!(all.incl(&[0, 0]).is_err(), "a rank twice must be refused");
    assert_eq!(
        universe.self_comm().group(),
        Group::from(vec![me]),
        "MPI_COMM_SELF's group is this process"
    );

    world.barrier().expect("barrier");
    if rank == 0 {
        println!(
            "groups: {size} ranks, {} even, {} odd",
            even.size(),
            odd.size()
        );
    }
}
