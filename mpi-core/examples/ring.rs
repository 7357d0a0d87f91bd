//! A token travels around the ring of ranks several times; each rank adds its rank number.
//! Run with `bin/mpirun -n 4 target/release/examples/ring`.

use madmpi::safe;

fn main() {
    let universe = safe::initialize().expect("MPI_Init");
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    let laps = 10u64;
    let mut token = [0u64];
    for _ in 0..laps {
        if rank == 0 {
            let r = world.irecv(&mut token, prev, 7).expect("irecv");
            world.send(&[token_value(&[0])], next, 7).expect("send");
            r.wait().expect("wait");
        } else {
            world.recv(&mut token, prev, 7).expect("recv");
            token[0] += rank as u64;
            world.send(&token, next, 7).expect("send");
        }
        if rank == 0 {
            // The token came back with the sum of all ranks.
            let expect = (size as u64 - 1) * size as u64 / 2;
            assert_eq!(token[0], expect, "token corrupted");
        }
    }
    world.barrier().expect("barrier");
    if rank == 0 {
        println!("ring: {laps} laps over {size} ranks, token = {}", token[0]);
    }
}

fn token_value(t: &[u64; 1]) -> u64 {
    t[0]
}
