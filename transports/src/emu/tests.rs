//! The emulated driver: the conformance suite over each network, its protocols (credits,
//! handshake, registration cache, module agreement), and BCL-3's reliable link over a lossy
//! wire (10^6 messages, none lost, duplicated or corrupted).

use std::collections::VecDeque;
use std::io::IoSlice;

use super::clock::{now_ns, spin_until};
use super::profile::{find, Module, Profile};
use super::*;
use crate::conformance::{self, seg_name, Pair, Rng, Unlink};

struct EmuPair {
    a: EmuTransport,
    b: EmuTransport,
    ids: [PeerId; 2],
}

impl Pair for EmuPair {
    fn a(&mut self) -> &mut dyn Transport {
        &mut self.a
    }
    fn b(&mut self) -> &mut dyn Transport {
        &mut self.b
    }
    fn a_id(&self) -> PeerId {
        self.ids[0]
    }
    fn b_id(&self) -> PeerId {
        self.ids[1]
    }
    fn settle(&mut self) {
        let t0 = now_ns();
        loop {
            self.a.service().expect("service a");
            self.b.service().expect("service b");
            if self.a.idle() && self.b.idle() {
                return;
            }
            assert!(
                now_ns() < t0 + 30_000_000_000,
                "the emulated link never settled"
            );
            spin_until(now_ns() + 1000);
        }
    }
}

fn cfg(profile: &'static Profile, loss: f64) -> EmuConfig {
    EmuConfig {
        nic: NicConfig {
            profile,
            loss,
            modules: profile.default_modules(),
            reg_cache: profile.reg_cache,
            seed: 42,
        },
        ring_bytes: 256 << 10,
    }
}

fn pair(c: &EmuConfig) -> EmuPair {
    let name = seg_name("emu");
    let _guard = Unlink(name.clone());
    let s0 = ShmSegment::create(&name, 2, &c.shm(1)).expect("create");
    let s1 = ShmSegment::open(&name, 2, &c.shm(1)).expect("open");
    ShmSegment::unlink(&name).expect("unlink");
    let ranks = vec![PeerId(3), PeerId(8)];
    EmuPair {
        a: EmuTransport::new(s0, 0, ranks.clone(), c, 0).expect("a"),
        b: EmuTransport::new(s1, 1, ranks.clone(), c, 0).expect("b"),
        ids: [ranks[0], ranks[1]],
    }
}

/// A network that costs no time, whose only backpressure is its 4 credits: the
/// conformance suite's backpressure test needs a refusal that lasts until the receiver polls.
static CREDITS_ONLY: Profile = Profile {
    name: "test-credits",
    about: "test: no time, 4 credits",
    modules: &[Module {
        name: "test",
        upto: usize::MAX,
        o_s: 0,
        o_r: 0,
        l: 0,
        g_ps: 0,
        unit: 1,
        credits: 4,
        handshake: false,
        reg: None,
        copy_ps: 0,
        copy_window: 0,
        optional: false,
    }],
    reliable: false,
    reg_cache: 0,
    eager: 16 << 10,
    host: &profile::NO_HOST,
};

#[test]
fn conformance_with_credits_backpressure() {
    conformance::run_all(&mut pair(&cfg(&CREDITS_ONLY, 0.0)));
}

/// Every network, with its timing and protocols: everything but `backpressure` (a busy
/// emulated NIC refuses for a few microseconds only, which that test cannot tell from room).
#[test]
fn conformance_every_network() {
    for p in PROFILES {
        let mut c = cfg(p, 0.0);
        if p.name == "sisci" {
            c.nic.modules = 0b1111; // with the DMA module
        }
        let mut pr = pair(&c);
        conformance::reachability(&mut pr);
        conformance::zero_length(&mut pr);
        conformance::iovec_gather(&mut pr);
        conformance::order_and_exactly_once(&mut pr);
        conformance::max_packet(&mut pr);
        conformance::get(&mut pr);
        let s = pr.a.stats();
        assert!(s.sent.iter().sum::<u64>() > 5000, "{}: {s:?}", p.name);
        let used = s.sent.iter().filter(|&&n| n > 0).count();
        assert!(
            used >= p.modules.len().min(2),
            "{}: modules used {s:?}",
            p.name
        );
    }
}

fn send_all(pr: &mut EmuPair, packets: &[&[u8]], got: &mut VecDeque<Vec<u8>>) {
    let b = pr.ids[1];
    for pk in packets {
        loop {
            match pr.a.try_send(b, &[IoSlice::new(pk)]).expect("try_send") {
                SendOutcome::Done => break,
                SendOutcome::WouldBlock => {
                    pr.b.poll_recv(&mut |_, x| got.push_back(x.to_vec()))
                        .expect("poll");
                }
            }
        }
    }
    conformance::drain(pr, got);
}

#[test]
fn credits_stall_the_sender_until_returned() {
    let mut pr = pair(&cfg(find("bip").unwrap(), 0.0));
    let b = pr.ids[1];
    // 40 short messages and no poll on the receiver: after 32 (BIP's static buffers) the
    // sender is refused, however long it waits.
    let mut sent = 0;
    let t_end = now_ns() + 5_000_000;
    while now_ns() < t_end {
        if pr.a.try_send(b, &[IoSlice::new(b"short")]).unwrap() == SendOutcome::Done {
            sent += 1;
        }
    }
    assert_eq!(sent, 32);
    assert!(pr.a.stats().credit_stalls > 0);
    let mut got = VecDeque::new();
    conformance::drain(&mut pr, &mut got);
    assert_eq!(got.len(), 32);
    // The receiver returned them: the sender goes on.
    send_all(&mut pr, &[b"more"], &mut got);
    assert_eq!(got.back().map(Vec::as_slice), Some(&b"more"[..]));
}

#[test]
fn long_packets_wait_for_the_receiver() {
    let mut pr = pair(&cfg(find("bip").unwrap(), 0.0));
    let b = pr.ids[1];
    let big = vec![7u8; 4000];
    // Without the receiver's answer, a long packet never leaves.
    for _ in 0..1000 {
        assert_eq!(
            pr.a.try_send(b, &[IoSlice::new(&big)]).unwrap(),
            SendOutcome::WouldBlock
        );
    }
    assert_eq!(pr.a.stats().handshakes, 1, "one request to send");
    let mut got = VecDeque::new();
    send_all(&mut pr, &[&big], &mut got);
    assert_eq!(got, [big]);
    assert_eq!(pr.a.stats().sent[1], 1);
}

#[test]
fn registration_cache_spares_reused_buffers() {
    let via = find("via").unwrap();
    let buf = vec![1u8; 8000]; // the dynamic-registration module
    for (cache, misses) in [(0usize, 3u64), (8, 1)] {
        let mut c = cfg(via, 0.0);
        c.nic.reg_cache = cache;
        let mut pr = pair(&c);
        let mut got = VecDeque::new();
        send_all(&mut pr, &[&buf, &buf, &buf], &mut got);
        assert_eq!(got.len(), 3);
        let s = pr.a.stats();
        assert_eq!(
            (s.reg_misses, s.reg_hits),
            (misses, 3 - misses),
            "cache {cache}"
        );
    }
}

#[test]
fn modules_must_agree_on_both_sides() {
    // A sender whose switch differs from the receiver's (SCI DMA on one side only).
    let sci = find("sisci").unwrap();
    let name = seg_name("emu-switch");
    let _guard = Unlink(name.clone());
    let mut ca = cfg(sci, 0.0);
    ca.nic.modules = 0b1111;
    let cb = cfg(sci, 0.0);
    let s0 = ShmSegment::create(&name, 2, &ca.shm(1)).unwrap();
    let s1 = ShmSegment::open(&name, 2, &cb.shm(1)).unwrap();
    let ranks = vec![PeerId(0), PeerId(1)];
    let mut a = EmuTransport::new(s0, 0, ranks.clone(), &ca, 0).unwrap();
    let mut b = EmuTransport::new(s1, 1, ranks, &cb, 0).unwrap();
    let big = vec![0u8; 20_000];
    while a.try_send(PeerId(1), &[IoSlice::new(&big)]).unwrap() != SendOutcome::Done {}
    let t_end = now_ns() + 1_000_000_000;
    let err = loop {
        match b.poll_recv(&mut |_, _| panic!("delivered despite the module mismatch")) {
            Err(e) => break e,
            Ok(_) => assert!(now_ns() < t_end, "mismatch not detected"),
        }
    };
    assert!(
        matches!(err, Error::Malformed(ref m) if m.contains("sci-double-buffer")),
        "{err}"
    );
}

#[test]
fn loss_needs_a_reliable_network() {
    // Through the environment parser's own check.
    let e = EmuConfig::from_env_with(0, |k| match k {
        "MADMPI_EMU" => Some("bip".into()),
        "MADMPI_EMU_LOSS" => Some("1e-4".into()),
        _ => None,
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("bip") && e.contains("bcl3"), "{e}");
    let e = EmuConfig::from_env_with(0, |k| (k == "MADMPI_EMU").then(|| "bip,ib".into()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("'ib'") && e.contains("sisci"), "{e}");
    let lossy = |k: &str| match k {
        "MADMPI_EMU" => Some("bip,bcl3".into()),
        "MADMPI_EMU_LOSS" => Some("0.001".into()),
        _ => None,
    };
    assert!(
        EmuConfig::from_env_with(0, lossy).is_err(),
        "bip refuses the loss"
    );
    let c = EmuConfig::from_env_with(1, lossy).expect("bcl3 takes it");
    assert_eq!((c.nic.profile.name, c.nic.loss), ("bcl3", 0.001));
    // Modules turned off by name; unknown names and no module left for large packets refused.
    let off = |v: &'static str| {
        move |k: &str| match k {
            "MADMPI_EMU" => Some("via".into()),
            "MADMPI_EMU_OFF" => Some(v.into()),
            _ => None,
        }
    };
    let c = EmuConfig::from_env_with(0, off("via-pool, sci-dma")).expect("via without pool");
    assert_eq!(c.nic.modules, 0b110);
    let e = EmuConfig::from_env_with(0, off("pool"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("'pool'") && e.contains("via-pool"), "{e}");
    assert!(EmuConfig::from_env_with(0, off("via-rdma")).is_err());
}

/// BCL-3's reliable link over a wire that drops and corrupts one frame in 10^4 each:
/// 10^6 messages arrive once each, in order, intact.
#[test]
fn lossy_bcl3_delivers_a_million_messages_exactly_once() {
    const N: u64 = 1_000_000;
    let mut pr = pair(&cfg(find("bcl3").unwrap(), 1e-4));
    let b = pr.ids[1];
    let mut rng = Rng::new(9);
    let mut buf = Vec::new();
    let mut next = 0u64;
    let mut check = |x: &[u8]| {
        let seq = u64::from_le_bytes(x[..8].try_into().unwrap());
        assert_eq!(seq, next, "lost, duplicated or reordered");
        let mut r = Rng::new(seq);
        assert!(
            x[8..].iter().all(|&c| c == r.next() as u8),
            "message {seq} corrupted"
        );
        next += 1;
    };
    for seq in 0..N {
        let len = 8 + rng.below(120);
        buf.clear();
        buf.extend_from_slice(&seq.to_le_bytes());
        let mut r = Rng::new(seq);
        buf.extend((8..len).map(|_| r.next() as u8));
        loop {
            match pr.a.try_send(b, &[IoSlice::new(&buf)]).expect("try_send") {
                SendOutcome::Done => break,
                SendOutcome::WouldBlock => {
                    pr.b.poll_recv(&mut |_, x| check(x)).expect("poll");
                }
            }
        }
    }
    let t_end = now_ns() + 60_000_000_000;
    while !(pr.a.idle() && pr.b.idle()) {
        pr.a.service().expect("service");
        pr.b.poll_recv(&mut |_, x| check(x)).expect("poll");
        assert!(now_ns() < t_end, "the lossy link never settled");
    }
    pr.b.poll_recv(&mut |_, x| check(x)).expect("poll");
    let _ = &mut check;
    assert_eq!(next, N);
    let (sa, sb) = (pr.a.stats(), pr.b.stats());
    assert!(sa.dropped + sb.dropped > 50, "{sa:?} {sb:?}");
    assert!(sa.flipped + sb.flipped > 50, "{sa:?} {sb:?}");
    assert!(sb.crc_errors > 0 && sa.retransmitted > 0, "{sa:?} {sb:?}");
}

/// Large frames (the normal channel: handshake and registration) over a lossy BCL-3 link, at
/// a loss rate high enough that many of them are dropped or damaged: each arrives once, in
/// order, intact (the CRC is checked once per frame, as it comes off the ring).
#[test]
fn lossy_bcl3_large_frames_arrive_once_in_order_intact() {
    const N: u64 = 300;
    let mut pr = pair(&cfg(find("bcl3").unwrap(), 1e-2));
    let b = pr.ids[1];
    let max = pr.a.caps().max_packet;
    let mut rng = Rng::new(5);
    let mut next = 0u64;
    let mut check = |x: &[u8]| {
        let seq = u64::from_le_bytes(x[..8].try_into().unwrap());
        assert_eq!(seq, next, "lost, duplicated or reordered");
        let mut r = Rng::new(seq ^ 0x5555);
        assert!(
            x[8..].iter().all(|&c| c == r.next() as u8),
            "frame {seq} corrupted"
        );
        next += 1;
    };
    let mut buf = Vec::new();
    for seq in 0..N {
        let len = 8 + 4096 + rng.below(max - 8 - 4096);
        buf.clear();
        buf.extend_from_slice(&seq.to_le_bytes());
        let mut r = Rng::new(seq ^ 0x5555);
        buf.extend((8..len).map(|_| r.next() as u8));
        loop {
            match pr.a.try_send(b, &[IoSlice::new(&buf)]).expect("try_send") {
                SendOutcome::Done => break,
                SendOutcome::WouldBlock => {
                    pr.b.poll_recv(&mut |_, x| check(x)).expect("poll");
                }
            }
        }
    }
    let t_end = now_ns() + 60_000_000_000;
    while !(pr.a.idle() && pr.b.idle()) {
        pr.a.service().expect("service");
        pr.b.poll_recv(&mut |_, x| check(x)).expect("poll");
        assert!(now_ns() < t_end, "the lossy link never settled");
    }
    pr.b.poll_recv(&mut |_, x| check(x)).expect("poll");
    let _ = &mut check;
    assert_eq!(next, N);
    let (sa, sb) = (pr.a.stats(), pr.b.stats());
    assert!(sb.crc_errors > 0 && sa.retransmitted > 0, "{sa:?} {sb:?}");
    assert!(sa.handshakes > 0, "the normal channel was used: {sa:?}");
}

/// A reliable frame's CRC is checked once, as it comes off the ring, not at each of the polls
/// that find it waiting for its visibility time (a 256 KiB frame's CRC at every poll used to
/// delay its delivery by up to two CRC times: half of BCL-3's bandwidth).
#[test]
fn crc_is_checked_once_per_frame() {
    let mut pr = pair(&cfg(find("bcl3").unwrap(), 0.0));
    let b = pr.ids[1];
    let data = vec![3u8; 2000];
    while pr.a.try_send(b, &[IoSlice::new(&data)]).expect("send") != SendOutcome::Done {}
    let (mut polls, mut got) = (0u64, 0);
    while got == 0 {
        polls += 1;
        pr.b.poll_recv(&mut |_, p| {
            assert_eq!(p, &data[..]);
            got += 1;
        })
        .expect("poll");
    }
    let s = pr.b.stats();
    assert!(s.frames_in >= 1, "{s:?}");
    assert_eq!(s.crc_checks, s.frames_in, "{polls} polls: {s:?}");
    pr.settle();
}

/// Not a check, a measurement (run with `--ignored --nocapture`): the CRC of a 256 KiB frame
/// computed byte by byte and by slicing-by-8, and a stream of the largest packets over BCL-3
/// between two threads (sender and receiver as two processes would be), in MB/s, with the
/// NIC's counters.
#[test]
#[ignore = "a measurement, not a check"]
fn probe_bcl3_stream() {
    let frame = vec![0x5au8; 256 << 10];
    for (name, f) in [
        ("bytewise", frame::crc_bytewise as fn(&[u8]) -> u32),
        ("slicing-by-8", |p: &[u8]| frame::crc32(&[p])),
    ] {
        let t0 = now_ns();
        for _ in 0..20 {
            std::hint::black_box(f(std::hint::black_box(&frame)));
        }
        let ns = (now_ns() - t0) / 20;
        println!(
            "crc {name}: {} us per 256 KiB ({:.0} MB/s)",
            ns / 1000,
            (256 << 10) as f64 * 1000.0 / ns as f64
        );
    }
    // The same stream over GM (about the same bandwidth, no handshake, no CRC) and BIP
    // (handshake, no CRC): what the machine's load alone costs.
    static GM_RELIABLE: Profile = Profile {
        name: "gm-reliable",
        about: "test: GM's module with BCL-3's reliable link",
        modules: &[Module {
            name: "gm",
            upto: usize::MAX,
            o_s: 2500,
            o_r: 2500,
            l: 8400,
            g_ps: 1_000_000 / 145,
            unit: 1,
            credits: 0,
            handshake: false,
            reg: None,
            copy_ps: 0,
            copy_window: 0,
            optional: false,
        }],
        reliable: true,
        reg_cache: 0,
        eager: 16 << 10,
        host: &profile::NO_HOST,
    };
    for net in ["gm", "gm-reliable", "bip", "bcl3"] {
        let p = if net == "gm-reliable" {
            &GM_RELIABLE
        } else {
            find(net).unwrap()
        };
        let mut c = cfg(p, 0.0);
        c.ring_bytes = DEFAULT_RING;
        let mut pr = pair(&c);
        let n = pr.a.caps().max_packet;
        let data = vec![7u8; n];
        const COUNT: usize = 40;
        let bid = pr.ids[1];
        let EmuPair { a, b, .. } = &mut pr;
        let t0 = now_ns();
        let t1 = std::thread::scope(|s| {
            let rx = s.spawn(move || {
                let mut got = 0;
                let mut at = Vec::new();
                while got < COUNT {
                    b.poll_recv(&mut |_, p| {
                        assert_eq!(p.len(), n);
                        got += 1;
                        at.push(now_ns());
                    })
                    .expect("poll");
                }
                let gaps: Vec<u64> = at.windows(2).map(|w| (w[1] - w[0]) / 1000).collect();
                println!("  {net}: gaps between deliveries (us): {gaps:?}");
                now_ns()
            });
            for _ in 0..COUNT {
                while a.try_send(bid, &[IoSlice::new(&data)]).expect("send") != SendOutcome::Done {
                    a.poll_recv(&mut |_, _| {}).expect("poll");
                }
            }
            rx.join().expect("receiver")
        });
        let model = p.stream_mbps(n, c.nic.modules);
        println!(
            "{net} stream of {COUNT} x {n} B: {:.1} MB/s (model, NIC occupancy: {model:.1})",
            (COUNT * n) as f64 * 1000.0 / (t1 - t0) as f64
        );
        println!("  sender {:?}", pr.a.stats());
        println!("  receiver {:?}", pr.b.stats());
    }
}

/// The emulator never delivers faster than its model: a lone packet reaches the receiver's
/// host no sooner than `o_s + L + w(n) + o_r` and the host model's software on both sides
/// after it was offered, however the receiver polls
/// (here back to back, so that its polls wait for frames about to become visible and count
/// `o_r` from the visibility time). A lower bound only: a loaded machine makes it later.
#[test]
fn delivery_never_precedes_the_model() {
    for name in ["sisci", "bip", "mx", "elan"] {
        let p = find(name).expect("profile");
        let c = cfg(p, 0.0);
        let mut pr = pair(&c);
        let b = pr.ids[1];
        for n in [0usize, 8, 40, 100, 1000] {
            let pk = vec![7u8; n];
            // The network and the host's software on both sides.
            let want = p.with_host_ns(n, c.nic.modules);
            for _ in 0..20 {
                pr.settle();
                let t0 = now_ns();
                loop {
                    match pr.a.try_send(b, &[IoSlice::new(&pk)]).expect("try_send") {
                        SendOutcome::Done => break,
                        SendOutcome::WouldBlock => pr.a.service().expect("service"),
                    }
                }
                let mut at = None;
                while at.is_none() {
                    pr.b.poll_recv(&mut |_, x| {
                        assert_eq!(x.len(), n);
                        at = Some(now_ns());
                    })
                    .expect("poll");
                }
                let took = at.unwrap_or(0) - t0;
                assert!(
                    took >= want,
                    "{name}: {n} bytes delivered after {took} ns, the model says {want} ns"
                );
            }
        }
    }
}
