//! Simulated runs that lose a rail (`resilience`): a link fails at a random moment, with
//! whatever is on it, while messages of every size flow both ways; every message must still
//! arrive once, whole and in order, and every send complete.

use super::*;

/// Two ranks exchange messages (eager, rendezvous, synchronous; receives by source and by
/// ANY_SOURCE) over two or three rails; after a random number of events one rail fails — the
/// first (which carries the messages) or another — noticed by both sides or only by one (the
/// other learns it from the RailDown). Under every strategy, with chunks scattered over the
/// rails or not.
#[test]
fn a_lost_rail_loses_no_message() {
    // Packets that were on a failed link when it failed, over all runs: they must be many.
    let mut swallowed = 0;
    for seed in 1..60u64 {
        for (strategy, rails, scatter) in [
            (Strategy::SplitBalance, 2, false),
            (Strategy::SplitBalance, 3, true),
            (Strategy::Aggreg, 2, true),
            (Strategy::Adaptive, 2, true),
            (Strategy::Default, 2, false),
        ] {
            let mut net = Net::with_rails(2, strategy, false, seed, rails);
            net.scatter = scatter;
            let mut rng = Rng(seed * 104_729);
            let dt = byte();
            let per = 16u64;
            let mut sends = Vec::new();
            let mut recvs = Vec::new();
            let mut bufs: Vec<Vec<u8>> = (0..2 * per).map(|_| vec![0u8; 5000]).collect();
            let mut datas = Vec::new();
            for src in 0..2u32 {
                for k in 0..per {
                    let len = [0usize, 8, 40, 64, 65, 300, 1000, 5000][rng.below(8)];
                    datas.push((src, payload(src, k, len)));
                }
            }
            for (src, data) in &datas {
                let mode = if rng.below(4) == 0 {
                    SendMode::Synchronous
                } else {
                    SendMode::Standard
                };
                // SAFETY: `datas` outlives the requests (they complete in `run`).
                let r = unsafe {
                    net.ranks[*src as usize]
                        .isend(
                            data.as_ptr(),
                            data.len(),
                            &dt,
                            1 - *src as i32,
                            3,
                            COMM_WORLD,
                            mode,
                            false,
                        )
                        .unwrap()
                };
                sends.push((*src as usize, r));
            }
            for (idx, b) in bufs.iter_mut().enumerate() {
                let me = idx / per as usize;
                let src = if rng.below(2) == 0 {
                    ANY_SOURCE
                } else {
                    1 - me as i32
                };
                // SAFETY: `bufs` outlives the requests.
                let r = unsafe {
                    net.ranks[me]
                        .irecv(b.as_mut_ptr(), 5000, &dt, src, 3, COMM_WORLD, false)
                        .unwrap()
                };
                recvs.push((me, r));
            }
            for _ in 0..rng.below(300) {
                net.step();
            }
            let rail = rng.below(rails);
            let a = rng.below(2) as u32;
            swallowed += [(a, 1 - a, rail), (1 - a, a, rail)]
                .iter()
                .map(|k| net.links.get(k).map_or(0, |q| q.len()))
                .sum::<usize>();
            net.cut(a, 1 - a, rail, rng.below(2) == 0);
            net.run();
            let what = format!("seed {seed}, {strategy:?}, {rails} rails, rail {rail} cut");
            for st in &net.ranks {
                assert!(st.peer_errors.is_empty(), "{what}: {:?}", st.peer_errors);
                assert!(st.gates.iter().all(|g| !g.dead), "{what}: a peer lost");
            }
            for (rank, r) in &sends {
                let st = net.status(*rank, *r);
                assert_eq!(st.error, None, "{what}");
            }
            // Each rank's receives take the other's messages in order.
            for (idx, (me, r)) in recvs.iter().enumerate() {
                let st = net.status(*me, *r);
                assert_eq!(st.error, None, "{what}");
                let k = idx % per as usize;
                let (src, want) = &datas[(1 - me) * per as usize + k];
                assert_eq!(st.source as u32, *src, "{what}");
                assert_eq!(st.bytes as usize, want.len(), "{what}: message {k}");
                assert_eq!(&bufs[idx][..want.len()], &want[..], "{what}: message {k}");
            }
            // Everything was acknowledged or is about to be: no copy kept beyond one window.
            for st in &net.ranks {
                for g in &st.gates {
                    assert!(g.resil.resend.is_empty(), "{what}");
                    assert!(
                        g.resil.unacked.len() <= 2 * resilience::ACK_EVERY as usize,
                        "{what}: {} copies kept",
                        g.resil.unacked.len()
                    );
                }
            }
        }
    }
    assert!(
        swallowed > 100,
        "only {swallowed} packets were lost with their rail"
    );
}

/// When the last rail fails the peer is lost, as with one rail: its operations fail with
/// MPI_ERR_PROC_ABORTED instead of waiting.
#[test]
fn losing_every_rail_loses_the_peer() {
    let mut net = Net::with_rails(2, Strategy::SplitBalance, false, 5, 2);
    let dt = byte();
    let mut b = vec![0u8; 100];
    // SAFETY: `b` outlives the request.
    let r = unsafe {
        net.ranks[1]
            .irecv(b.as_mut_ptr(), 100, &dt, 0, 1, COMM_WORLD, false)
            .unwrap()
    };
    net.cut(1, 0, 0, true);
    assert!(!net.ranks[1].gates[0].dead, "one rail left");
    net.cut(1, 0, 1, true);
    assert!(net.ranks[1].gates[0].dead && net.ranks[0].gates[1].dead);
    assert_eq!(net.status(1, r).error, Some(ErrorClass::ProcAborted));
}

/// After a peer is lost, a receive posted from it, or from MPI_ANY_SOURCE on a communicator it
/// belongs to, fails (at once on the checked path; the fast path posts without looking, and
/// the watch's sweep fails it), as does a probe that finds nothing; a receive from a live rank,
/// or from MPI_ANY_SOURCE on a communicator without the dead rank, waits and completes.
#[test]
fn receives_and_probes_after_a_loss() {
    use crate::COMM_SELF;
    let mut net = Net::new(3, Strategy::Default, true, 5);
    let b = byte();
    let mut bufs = vec![vec![0u8; 16]; 5];
    net.ranks[0].peer_lost(1);
    let mut post = |net: &mut Net, i: usize, src: i32, comm| {
        // SAFETY: `bufs` outlives the requests (the test ends with them).
        unsafe {
            net.ranks[0]
                .irecv(bufs[i].as_mut_ptr(), 16, &b, src, 0, comm, false)
                .unwrap()
        }
    };
    let from1 = post(&mut net, 0, 1, COMM_WORLD);
    let any = post(&mut net, 1, ANY_SOURCE, COMM_WORLD);
    let from2 = post(&mut net, 2, 2, COMM_WORLD);
    let any_self = post(&mut net, 3, ANY_SOURCE, COMM_SELF);
    for r in [from1, any] {
        assert_eq!(net.status(0, r).error, Some(ErrorClass::ProcAborted));
    }
    for (src, comm) in [(1, COMM_WORLD), (ANY_SOURCE, COMM_WORLD)] {
        let e = net.ranks[0].iprobe(src, 0, comm).unwrap_err();
        assert_eq!(e.class, ErrorClass::ProcAborted);
        let e = net.ranks[0].improbe(src, 0, comm).unwrap_err();
        assert_eq!(e.class, ErrorClass::ProcAborted);
    }
    assert!(net.ranks[0].iprobe(2, 0, COMM_WORLD).unwrap().is_none());
    assert!(net.ranks[0]
        .iprobe(ANY_SOURCE, 0, COMM_SELF)
        .unwrap()
        .is_none());

    // SAFETY: as above.
    let fast = unsafe { net.ranks[0].irecv_posted(bufs[4].as_mut_ptr(), 16, &b, 1, 0, COMM_WORLD) }
        .expect("posted");
    assert!(!net.ranks[0].reqs.get(fast).unwrap().complete);
    net.ranks[0].fail_lost_receives();
    assert_eq!(net.status(0, fast).error, Some(ErrorClass::ProcAborted));

    for r in [from2, any_self] {
        assert!(!net.ranks[0].reqs.get(r).unwrap().complete, "still waits");
    }
    let d = payload(2, 1, 16);
    // SAFETY: `d` outlives the request (it completes in `run`).
    let _s = unsafe {
        net.ranks[2]
            .isend(
                d.as_ptr(),
                16,
                &b,
                0,
                0,
                COMM_WORLD,
                SendMode::Standard,
                false,
            )
            .unwrap()
    };
    net.run();
    assert_eq!(net.status(0, from2).error, None);
    assert_eq!(&bufs[2][..], &d[..]);
}
