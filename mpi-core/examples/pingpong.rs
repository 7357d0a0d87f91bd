//! Ping-pong between ranks 0 and 1: half round-trip latency and bandwidth per size.
//! Run with `bin/mpirun -n 2 target/release/examples/pingpong`.

use madmpi::safe;

fn main() {
    let universe = safe::initialize().expect("MPI_Init");
    let world = universe.world();
    let rank = world.rank();
    if world.size() < 2 {
        println!("pingpong needs 2 ranks");
        return;
    }
    let mut size = 0usize;
    while size <= 4 << 20 {
        let iters = if size <= 4096 {
            20000
        } else {
            (200 << 20) / size.max(1)
        }
        .clamp(20, 20000);
        let mut buf = vec![0u8; size];
        let mut best = f64::MAX;
        for _rep in 0..3 {
            world.barrier().unwrap();
            let t0 = madmpi::wtime();
            for _ in 0..iters {
                if rank == 0 {
                    world.send(&buf, 1, 1).unwrap();
                    world.recv(&mut buf, 1, 1).unwrap();
                } else if rank == 1 {
                    world.recv(&mut buf, 0, 1).unwrap();
                    world.send(&buf, 0, 1).unwrap();
                }
            }
            let t = (madmpi::wtime() - t0) / (2.0 * iters as f64);
            best = best.min(t);
        }
        if rank == 0 {
            let mbps = if best > 0.0 {
                size as f64 / best / 1e6
            } else {
                0.0
            };
            println!("size={size} lat_us={:.3} bw_MBps={:.1}", best * 1e6, mbps);
        }
        size = if size == 0 { 1 } else { size * 4 };
    }
}
