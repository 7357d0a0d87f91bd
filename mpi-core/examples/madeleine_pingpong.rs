//! Ping-pong between ranks 0 and 1 through the Madeleine API (a message of an 8-byte header
//! unpacked EXPRESS and the payload unpacked CHEAPER, as in the paper's RPC) next to MPI_Send /
//! MPI_Recv of the payload alone: half round-trip time per size.
//! Run with `bin/mpirun -n 2 target/release/examples/madeleine_pingpong`.

use madmpi::madeleine::{Channel, RECV_CHEAPER, RECV_EXPRESS, SEND_CHEAPER};
use madmpi::safe;

fn main() {
    let universe = safe::initialize().expect("MPI_Init");
    let world = universe.world();
    let rank = world.rank();
    if world.size() < 2 {
        println!("madeleine_pingpong needs 2 ranks");
        return;
    }
    let channel = Channel::open(world.id()).expect("open the channel");
    let peer = 1 - rank;
    for size in [8usize, 1024, 16 << 10, 256 << 10, 1 << 20] {
        let iters = ((64 << 20) / size.max(1024)).clamp(20, 5000);
        let mut buf = vec![0u8; size];
        let mut best_mpi = f64::MAX;
        let mut best_mad = f64::MAX;
        for _rep in 0..3 {
            if rank > 1 {
                break;
            }
            let t0 = madmpi::wtime();
            for _ in 0..iters {
                if rank == 0 {
                    world.send(&buf, 1, 1).unwrap();
                    world.recv(&mut buf, 1, 1).unwrap();
                } else {
                    world.recv(&mut buf, 0, 1).unwrap();
                    world.send(&buf, 0, 1).unwrap();
                }
            }
            best_mpi = best_mpi.min((madmpi::wtime() - t0) / (2.0 * iters as f64));
            let t0 = madmpi::wtime();
            for i in 0..iters {
                if rank == 0 || i > 0 {
                    let header = [size as u64];
                    let mut m = channel.begin_packing(peer).unwrap();
                    m.pack(&header, SEND_CHEAPER, RECV_EXPRESS).unwrap();
                    m.pack(&buf, SEND_CHEAPER, RECV_CHEAPER).unwrap();
                    m.end_packing().unwrap();
                }
                let mut u = channel.begin_unpacking_from(peer).unwrap();
                let mut header = [0u64];
                u.unpack_express(&mut header).unwrap();
                assert_eq!(header[0] as usize, size);
                u.unpack(&mut buf, SEND_CHEAPER, RECV_CHEAPER).unwrap();
                u.end_unpacking().unwrap();
            }
            if rank == 1 {
                let header = [size as u64];
                let mut m = channel.begin_packing(peer).unwrap();
                m.pack(&header, SEND_CHEAPER, RECV_EXPRESS).unwrap();
                m.pack(&buf, SEND_CHEAPER, RECV_CHEAPER).unwrap();
                m.end_packing().unwrap();
            }
            best_mad = best_mad.min((madmpi::wtime() - t0) / (2.0 * iters as f64));
        }
        if rank == 0 {
            println!(
                "size={size} mpi_us={:.2} madeleine_us={:.2}",
                best_mpi * 1e6,
                best_mad * 1e6
            );
        }
    }
    channel.close().expect("close the channel");
}
