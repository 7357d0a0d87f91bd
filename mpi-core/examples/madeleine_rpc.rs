//! The remote procedure call of the Madeleine II paper (section 2.3), over madmpi's Madeleine
//! API: a request's header, unpacked EXPRESS, tells the server which function to run and how
//! large the array behind it is; the server allocates the array and unpacks it CHEAPER. Rank 0
//! is the client of every other rank; each call's answer comes back the same way.
//! Run with `bin/mpirun -n 2 target/release/examples/madeleine_rpc`.

use madmpi::madeleine::{
    Channel, RECV_CHEAPER, RECV_EXPRESS, SEND_CHEAPER, SEND_LATER, SEND_SAFER,
};
use madmpi::safe;

/// The server's functions.
const SUM: u64 = 1;
const SUM_OF_TWO: u64 = 2;
const STOP: u64 = 3;

/// Array lengths (u32 elements) around the head/body boundary (4 KiB) and the rendezvous.
const LENGTHS: &[usize] = &[0, 1, 100, 1024, 1025, 5000, 40_000, 300_000];

fn main() {
    let universe = safe::initialize().expect("MPI_Init");
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    if size < 2 {
        println!("madeleine_rpc needs 2 ranks");
        return;
    }
    let channel = Channel::open(world.id()).expect("open the channel");
    if rank == 0 {
        let mut calls = 0;
        for server in 1..size {
            for (i, &n) in LENGTHS.iter().enumerate() {
                let a: Vec<u32> = (0..n as u32).map(|k| k ^ (server as u32 * 7919)).collect();
                let b: Vec<u32> = (0..(n / 2) as u32).map(|k| k.wrapping_mul(3)).collect();
                let expect = if i.is_multiple_of(2) {
                    sum(&a)
                } else {
                    sum(&a).wrapping_add(sum(&b))
                };
                assert_eq!(
                    call(&channel, server, i, &a, &b),
                    expect,
                    "call to {server}"
                );
                calls += 1;
            }
            let mut m = channel.begin_packing(server).expect("begin_packing");
            let header = [STOP, 0, 0];
            m.pack(&header, SEND_SAFER, RECV_EXPRESS).expect("pack");
            m.end_packing().expect("end_packing");
        }
        println!(
            "madeleine_rpc: {calls} calls to {} servers, every answer right",
            size - 1
        );
    } else {
        serve(&channel);
    }
    channel.close().expect("close the channel");
}

fn sum(a: &[u32]) -> u64 {
    a.iter().map(|&x| x as u64).sum()
}

/// One call: SUM of `a` for even `i`, else SUM_OF_TWO of `a` and `b` (two arrays in one
/// message, and the header packed LATER).
fn call(channel: &Channel, server: i32, i: usize, a: &[u32], b: &[u32]) -> u64 {
    let mut m = channel.begin_packing(server).expect("begin_packing");
    if i.is_multiple_of(2) {
        let header = [SUM, a.len() as u64, 0];
        m.pack(&header, SEND_CHEAPER, RECV_EXPRESS).expect("pack");
        m.pack(a, SEND_CHEAPER, RECV_CHEAPER).expect("pack");
        m.end_packing().expect("end_packing");
    } else {
        let header = [SUM_OF_TWO, a.len() as u64, b.len() as u64];
        m.pack(&header, SEND_LATER, RECV_EXPRESS).expect("pack");
        m.pack(a, SEND_CHEAPER, RECV_CHEAPER).expect("pack");
        m.pack(b, SEND_SAFER, RECV_CHEAPER).expect("pack");
        m.end_packing().expect("end_packing");
    }
    let mut u = channel
        .begin_unpacking_from(server)
        .expect("begin_unpacking");
    let mut answer = [0u64];
    u.unpack_express(&mut answer).expect("unpack");
    u.end_unpacking().expect("end_unpacking");
    answer[0]
}

fn serve(channel: &Channel) {
    loop {
        // Declared before the message, which borrows them until it ends, but allocated once
        // its header says how large they are.
        let (mut a, mut b): (Vec<u32>, Vec<u32>);
        let mut u = channel.begin_unpacking().expect("begin_unpacking");
        let client = u.source();
        let mut header = [0u64; 3];
        u.unpack_express(&mut header).expect("unpack the header");
        if header[0] == STOP {
            u.end_unpacking().expect("end_unpacking");
            return;
        }
        // The header said how large the arrays are: allocate, then unpack them CHEAPER.
        a = vec![0u32; header[1] as usize];
        b = vec![0u32; header[2] as usize];
        u.unpack(&mut a, SEND_CHEAPER, RECV_CHEAPER)
            .expect("unpack");
        if header[0] == SUM_OF_TWO {
            u.unpack(&mut b, SEND_SAFER, RECV_CHEAPER).expect("unpack");
        }
        u.end_unpacking().expect("end_unpacking");
        let result = [sum(&a).wrapping_add(sum(&b))];
        let mut m = channel.begin_packing(client).expect("begin_packing");
        m.pack(&result, SEND_SAFER, RECV_EXPRESS).expect("pack");
        m.end_packing().expect("end_packing");
    }
}
