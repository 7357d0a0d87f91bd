//! Simulated runs of messages: matching and order under every strategy, synchronous sends and
//! truncation, cancel, aggregation, packed sends, malformed packets.

use super::*;

/// Non-overtaking: messages from one source on one communicator are matched in send order, even
/// with ANY_SOURCE receives, mixed eager and rendezvous sizes, receives posted before and after
/// arrival, under every strategy and with and without `get`; on several rails, with the
/// message chunks scattered over them (they overtake each other on the way) and with the
/// rendezvous data cut over them by `split_balance`.
#[test]
fn matching_order_and_rendezvous() {
    for seed in 1..40u64 {
        for (strategy, can_get, rails, scatter) in [
            (Strategy::Default, true, 1, false),
            (Strategy::Aggreg, true, 1, false),
            (Strategy::Aggreg, false, 1, false),
            (Strategy::Default, false, 1, false),
            (Strategy::Default, true, 3, true),
            (Strategy::Aggreg, false, 2, true),
            (Strategy::SplitBalance, false, 3, false),
            (Strategy::SplitBalance, true, 2, true),
            (Strategy::Adaptive, true, 1, false),
            (Strategy::Adaptive, false, 2, true),
        ] {
            let n = 4u32;
            let per = 12u64;
            let mut net = Net::with_rails(n, strategy, can_get, seed, rails);
            net.scatter = scatter;
            let mut rng = Rng(seed * 7919);
            let dt = byte();
            let mut sends: Vec<(usize, RequestId, Vec<u8>)> = Vec::new();
            for src in 1..n {
                for k in 0..per {
                    let len = [0usize, 8, 40, 64, 65, 300, 1000][rng.below(7)];
                    let data = payload(src, k, len);
                    let st = &mut net.ranks[src as usize];
                    // `aggreg` and `adaptive` pack small non-blocking sends when they are
                    // posted (as `api::isend` does), mixed here with queued chunks.
                    let packs = matches!(strategy, Strategy::Aggreg | Strategy::Adaptive);
                    let packed = if packs && rng.below(2) == 0 {
                        // SAFETY: `data` is kept in `sends` until the end of the test.
                        unsafe { send_packed(st, &data[..len], 0, (k % 3) as i32) }
                    } else {
                        None
                    };
                    // SAFETY: as above.
                    let r = packed.unwrap_or_else(|| unsafe {
                        st.isend(
                            data.as_ptr(),
                            len,
                            &dt,
                            0,
                            (k % 3) as i32,
                            COMM_WORLD,
                            SendMode::Standard,
                            false,
                        )
                        .unwrap()
                    });
                    sends.push((src as usize, r, data));
                }
            }
            // Half of the receives before any traffic, half after some has arrived.
            let total = (n as u64 - 1) * per;
            let mut bufs: Vec<Vec<u8>> = (0..total).map(|_| vec![0u8; 1000]).collect();
            let mut recvs = Vec::new();
            for (idx, b) in bufs.iter_mut().enumerate() {
                if idx == total as usize / 2 {
                    for _ in 0..200 {
                        net.step();
                    }
                }
                // SAFETY: `bufs` outlives the requests.
                let r = unsafe {
                    net.ranks[0]
                        .irecv(
                            b.as_mut_ptr(),
                            1000,
                            &dt,
                            ANY_SOURCE,
                            ANY_TAG,
                            COMM_WORLD,
                            false,
                        )
                        .unwrap()
                };
                recvs.push(r);
            }
            net.run();
            let mut last: HashMap<i32, i64> = HashMap::new();
            for (idx, &r) in recvs.iter().enumerate() {
                let st = net.status(0, r);
                assert_eq!(st.error, None);
                let len = st.bytes as usize;
                let b = &bufs[idx][..len];
                if len >= 8 {
                    let k = u64::from_le_bytes(b[..8].try_into().unwrap());
                    assert_eq!(
                        b,
                        &payload(st.source as u32, k, len)[..],
                        "payload corrupted (seed {seed})"
                    );
                    let prev = last.insert(st.source, k as i64).unwrap_or(-1);
                    assert!(
                        k as i64 > prev,
                        "message {k} from {} overtook {prev} (seed {seed}, {strategy:?})",
                        st.source
                    );
                }
            }
            // Packed sends are complete when posted and have no request record.
            for (rank, r, _) in sends.iter().filter(|s| s.1 != RequestId::COMPLETE) {
                let st = net.status(*rank, *r);
                assert!(!st.cancelled);
            }
        }
    }
}

/// Synchronous sends complete only after the match; truncation delivers what fits and reports
/// MPI_ERR_TRUNCATE, on both the eager and the rendezvous paths.
#[test]
fn ssend_and_truncation() {
    for can_get in [true, false] {
        let mut net = Net::new(2, Strategy::Default, can_get, 3);
        let dt = byte();
        let small = payload(0, 1, 40);
        let big = payload(0, 2, 700);
        // SAFETY: buffers outlive the requests.
        let s1 = unsafe {
            net.ranks[0]
                .isend(
                    small.as_ptr(),
                    40,
                    &dt,
                    1,
                    5,
                    COMM_WORLD,
                    SendMode::Synchronous,
                    false,
                )
                .unwrap()
        };
        net.run();
        assert!(
            !net.ranks[0].reqs.get(s1).unwrap().complete,
            "ssend completed before a receive matched it"
        );
        let mut rb = vec![0u8; 16];
        let r1 = unsafe {
            net.ranks[1]
                .irecv(rb.as_mut_ptr(), 16, &dt, 0, 5, COMM_WORLD, false)
                .unwrap()
        };
        net.run();
        assert!(net.ranks[0].reqs.get(s1).unwrap().complete);
        let st = net.status(1, r1);
        assert_eq!(st.error, Some(ErrorClass::Truncate));
        assert_eq!(st.bytes, 16);
        assert_eq!(&rb[..], &small[..16]);

        let mut rb2 = vec![0u8; 300];
        let r2 = unsafe {
            net.ranks[1]
                .irecv(rb2.as_mut_ptr(), 300, &dt, 0, 6, COMM_WORLD, false)
                .unwrap()
        };
        let s2 = unsafe {
            net.ranks[0]
                .isend(
                    big.as_ptr(),
                    700,
                    &dt,
                    1,
                    6,
                    COMM_WORLD,
                    SendMode::Standard,
                    false,
                )
                .unwrap()
        };
        net.run();
        let st = net.status(1, r2);
        assert_eq!(st.error, Some(ErrorClass::Truncate));
        assert_eq!(&rb2[..], &big[..300]);
        assert!(
            net.ranks[0].reqs.get(s2).unwrap().complete,
            "truncated rendezvous must still complete the sender"
        );
    }
}

/// Cancel: a posted receive, a queued send, and a sent-but-unmatched send (rendezvous and
/// eager) are cancelled; a matched one is not.
#[test]
fn cancel() {
    let mut net = Net::new(2, Strategy::Default, true, 5);
    let dt = byte();
    let mut rb = vec![0u8; 8];
    let r = unsafe {
        net.ranks[1]
            .irecv(rb.as_mut_ptr(), 8, &dt, 0, 1, COMM_WORLD, false)
            .unwrap()
    };
    net.ranks[1].cancel(r).unwrap();
    assert!(net.status(1, r).cancelled);

    let big = payload(0, 9, 500);
    let small = payload(0, 8, 16);
    let s_big = unsafe {
        net.ranks[0]
            .isend(
                big.as_ptr(),
                500,
                &dt,
                1,
                2,
                COMM_WORLD,
                SendMode::Standard,
                false,
            )
            .unwrap()
    };
    let s_small = unsafe {
        net.ranks[0]
            .isend(
                small.as_ptr(),
                16,
                &dt,
                1,
                3,
                COMM_WORLD,
                SendMode::Standard,
                false,
            )
            .unwrap()
    };
    net.run(); // both now sit unexpected at rank 1
    net.ranks[0].cancel(s_big).unwrap();
    net.ranks[0].cancel(s_small).unwrap();
    net.run();
    assert!(net.status(0, s_big).cancelled);
    assert!(net.status(0, s_small).cancelled);
    // Nothing is left to receive.
    assert_eq!(
        net.ranks[1]
            .iprobe(ANY_SOURCE, ANY_TAG, COMM_WORLD)
            .unwrap(),
        None
    );

    // A matched message cannot be cancelled.
    let mut rb3 = vec![0u8; 16];
    let s = unsafe {
        net.ranks[0]
            .isend(
                small.as_ptr(),
                16,
                &dt,
                1,
                4,
                COMM_WORLD,
                SendMode::Synchronous,
                false,
            )
            .unwrap()
    };
    let r3 = unsafe {
        net.ranks[1]
            .irecv(rb3.as_mut_ptr(), 16, &dt, 0, 4, COMM_WORLD, false)
            .unwrap()
    };
    net.run();
    net.ranks[0].cancel(s).unwrap();
    net.run();
    assert!(!net.status(0, s).cancelled);
    assert_eq!(net.status(1, r3).bytes, 16);
}

/// Aggregation: chunks queued on one gate leave in fewer packets than chunks.
#[test]
fn aggreg_packs_chunks_together() {
    let mut net = Net::new(2, Strategy::Aggreg, true, 11);
    let dt = byte();
    let data: Vec<Vec<u8>> = (0..16).map(|k| payload(0, k, 8)).collect();
    let mut reqs = Vec::new();
    for (k, d) in data.iter().enumerate() {
        reqs.push(unsafe {
            net.ranks[0]
                .isend(
                    d.as_ptr(),
                    8,
                    &dt,
                    1,
                    k as i32,
                    COMM_WORLD,
                    SendMode::Standard,
                    false,
                )
                .unwrap()
        });
    }
    let mut packets = 0;
    while net.transmit(0, 1) {
        packets += 1;
    }
    assert!(
        (1..16).contains(&packets),
        "16 chunks of 8 bytes went in {packets} packets"
    );
    net.run();
    for k in 0..16 {
        let st = net.ranks[1]
            .iprobe(0, k, COMM_WORLD)
            .unwrap()
            .expect("message arrived");
        assert_eq!(st.bytes, 8);
    }
}

/// `aggreg`'s packed sends: small sends are written into the packet being built when posted
/// (born complete); a full packet, or a queued chunk behind them, sends the next ones the
/// general way; everything arrives in order and intact. A packed send is complete when posted
/// and has no request record (`RequestId::COMPLETE`): a cancel leaves it alone, and it
/// arrives.
#[test]
fn packed_sends() {
    let mut net = Net::new(2, Strategy::Aggreg, true, 3);
    let lens = [0usize, 1, 7, 8, 9, 31, 64, 65, 300, 5, 16];
    let data: Vec<Vec<u8>> = (0..lens.len() * 3)
        .map(|k| payload(0, k as u64, lens[k % lens.len()]))
        .collect();
    let mut packed = 0;
    let mut packed_20 = false;
    for (k, d) in data.iter().enumerate() {
        // SAFETY: `data` outlives the requests.
        let r = match unsafe { send_packed(&mut net.ranks[0], d, 1, 7) } {
            Some(r) => {
                packed += 1;
                assert_eq!(r, RequestId::COMPLETE, "complete when posted");
                assert!(net.ranks[0].reqs.get(r).is_none(), "no request record");
                if k == 20 {
                    packed_20 = true;
                    net.ranks[0].cancel(r).unwrap();
                }
                r
            }
            // SAFETY: as above.
            None => unsafe { send_bytes(&mut net.ranks[0], d, 1, 7) },
        };
        assert!(d.len() <= 64 || net.ranks[0].reqs.get(r).is_some() || r == RequestId::COMPLETE);
        if k % 5 == 4 {
            // Some packets leave between posts.
            net.transmit(0, 1);
        }
        if k == 19 {
            // The gate empties: message 20 starts a new packet.
            while net.transmit(0, 1) {}
        }
    }
    assert!(
        packed >= 5 && packed < data.len(),
        "{packed} of {} sends were packed",
        data.len()
    );
    assert!(packed_20, "message 20 was packed");
    net.run();
    for (k, d) in data.iter().enumerate() {
        net.recv_expect(1, 0, 7, d, &format!("message {k}"));
    }
    assert_eq!(net.ranks[1].iprobe(0, 7, COMM_WORLD).unwrap(), None);
}

/// A packet of packed eager messages, delivered chunk by chunk by `handle_packet`'s loop for
/// an eager chunk in its turn: posted receives with MPI_ANY_SOURCE and MPI_ANY_TAG, a truncated
/// one between two others, a message no receive takes yet (kept as unexpected and received
/// after the packet), two with the same tag taken in order; every message intact in its
/// receive, the truncation reported on its receive only.
#[test]
fn packed_packet_delivered_chunk_by_chunk() {
    let mut net = Net::new(2, Strategy::Aggreg, true, 9);
    let dt = byte();
    let tags = [0, 1, 9, 3, 3, 5];
    let data: Vec<Vec<u8>> = (0..tags.len()).map(|k| payload(0, k as u64, 8)).collect();
    // (source, tag, capacity) of each posted receive, and the message it must get.
    let posts = [
        (ANY_SOURCE, ANY_TAG, 64, 0),
        (0, 1, 4, 1),
        (0, 3, 64, 3),
        (ANY_SOURCE, 3, 64, 4),
        (ANY_SOURCE, 5, 64, 5),
    ];
    let mut bufs: Vec<Vec<u8>> = posts.iter().map(|p| vec![0u8; p.2]).collect();
    let mut recvs = Vec::new();
    for (p, b) in posts.iter().zip(bufs.iter_mut()) {
        // SAFETY: `bufs` outlives the requests, which complete in `run`.
        recvs.push(unsafe {
            net.ranks[1]
                .irecv(b.as_mut_ptr(), p.2, &dt, p.0, p.1, COMM_WORLD, false)
                .unwrap()
        });
    }
    for (d, &tag) in data.iter().zip(&tags) {
        // SAFETY: `data` outlives the requests.
        assert!(unsafe { send_packed(&mut net.ranks[0], d, 1, tag) }.is_some());
    }
    assert!(net.transmit(0, 1), "the packet leaves");
    assert!(!net.transmit(0, 1), "in one packet");
    net.run();
    for ((p, b), r) in posts.iter().zip(&bufs).zip(&recvs) {
        let want = &data[p.3];
        let st = net.status(1, *r);
        assert_eq!(
            (st.source, st.tag),
            (0, tags[p.3]),
            "receive of message {}",
            p.3
        );
        assert_eq!(st.msg_len, 8);
        if p.2 < 8 {
            assert_eq!(st.error, Some(ErrorClass::Truncate));
            assert_eq!(st.bytes, p.2 as u64);
        } else {
            assert_eq!(st.error, None, "message {}", p.3);
            assert_eq!(st.bytes, 8);
        }
        let n = p.2.min(8);
        assert_eq!(&b[..n], &want[..n], "message {}", p.3);
    }
    net.recv_expect(1, 0, 9, &data[2], "the unexpected message");
    assert_eq!(
        net.ranks[1]
            .iprobe(ANY_SOURCE, ANY_TAG, COMM_WORLD)
            .unwrap(),
        None
    );
}

/// `MADMPI_PACK_FLUSH` (`State::set_pack_flush`): the packets the send fast path builds hold
/// at most the limit (a packet without room for the next send is full: the caller sends it
/// and packs again), a record larger than the limit still packs alone, and everything arrives
/// in order and intact.
#[test]
fn pack_flush_limits_packets() {
    let mut net = Net::new(2, Strategy::Aggreg, true, 3);
    // Records of 8-byte messages take 32 + 8 bytes: two fit in 90; that of a 64-byte one
    // (the simulated rail's eager limit) 96.
    net.ranks[0].set_pack_flush(90);
    let mut lens = vec![8usize; 10];
    lens.push(64);
    lens.push(8);
    let data: Vec<Vec<u8>> = (0..lens.len())
        .map(|k| payload(0, k as u64, lens[k]))
        .collect();
    let mut packets = 0;
    for (k, d) in data.iter().enumerate() {
        // SAFETY: `data` outlives the requests.
        if unsafe { send_packed(&mut net.ranks[0], d, 1, 5) }.is_none() {
            assert!(net.transmit(0, 1), "message {k}: a full packet leaves");
            packets += 1;
            // SAFETY: as above.
            let again = unsafe { send_packed(&mut net.ranks[0], d, 1, 5) };
            assert!(again.is_some(), "message {k} packs into the next packet");
        }
    }
    while net.transmit(0, 1) {
        packets += 1;
    }
    // 10 small ones two by two, the large one alone, the last one alone.
    assert_eq!(packets, 7);
    net.run();
    for (k, d) in data.iter().enumerate() {
        net.recv_expect(1, 0, 5, d, &format!("message {k}"));
    }
    // 0 restores the default: five small ones fit in one packet again (200 bytes of the
    // simulated rail's `aggreg_max`, HDR_LEN + 200).
    net.ranks[0].set_pack_flush(0);
    for d in &data[..5] {
        // SAFETY: as above.
        assert!(unsafe { send_packed(&mut net.ranks[0], d, 1, 6) }.is_some());
    }
    assert!(net.transmit(0, 1));
    assert!(!net.transmit(0, 1));
    net.run();
    for (k, d) in data[..5].iter().enumerate() {
        net.recv_expect(1, 0, 6, d, &format!("message {k} without the limit"));
    }
}

/// A peer's garbage is dropped without panicking and without disturbing the matching state.
#[test]
fn malformed_packets_are_dropped() {
    let mut net = Net::new(2, Strategy::Default, true, 1);
    // First, a well-formed message in a context no communicator can have is refused, and the
    // matching queues (indexed by context) do not grow for it.
    for (kind, ctx) in [(Kind::Eager, u32::MAX - 1), (Kind::Rts, CTX_WIRE_LIMIT)] {
        let h = Header {
            kind: kind as u8,
            ctx,
            len: 8,
            msg_len: 8,
            ..Default::default()
        };
        let mut pkt = h.encode().to_vec();
        pkt.extend_from_slice(&[7u8; 8]);
        let before = net.ranks[1].peer_errors.len();
        net.ranks[1].handle_packet(0, &pkt);
        assert_eq!(
            net.ranks[1].peer_errors.len(),
            before + 1,
            "{kind:?} in context {ctx}"
        );
        assert!(net.ranks[1].mq.len() <= CTX_WIRE_LIMIT as usize);
    }
    let mut rng = Rng(99);
    for len in 0..400 {
        let pkt: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        net.ranks[1].handle_packet(0, &pkt);
    }
    // Well-formed traffic still works afterwards.
    let dt = byte();
    let d = payload(0, 1, 32);
    let mut rb = vec![0u8; 32];
    let r = unsafe {
        net.ranks[1]
            .irecv(rb.as_mut_ptr(), 32, &dt, 0, 0, COMM_WORLD, false)
            .unwrap()
    };
    let _s = unsafe {
        net.ranks[0]
            .isend(
                d.as_ptr(),
                32,
                &dt,
                1,
                0,
                COMM_WORLD,
                SendMode::Standard,
                false,
            )
            .unwrap()
    };
    net.run();
    assert_eq!(net.status(1, r).bytes, 32);
    assert_eq!(rb, d);
}
