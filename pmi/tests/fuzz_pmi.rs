//! Fuzzing of what the PMI library and the launcher's PMI server parse: lines and `mcmd`
//! blocks (`parse_message`), requests (`parse_line`), the stream framer (`LineFramer`) and the
//! server fed with whatever a rank sends. Structured inputs (encoded messages and commands,
//! mutated, cut, glued) and raw bytes. Properties: no panic; allocation linear in the input
//! and none at all for a line over `MAX_FRAME`; encode → decode is the identity for messages
//! and commands; the framer gives back exactly the lines of a stream however it is cut, its
//! buffer stays under its limit plus one read (its work is linear: see the unit test
//! `framer_work_is_linear_in_short_lines`); every
//! reply of the server decodes. `MADMPI_FUZZ_CASES` sets the number of inputs (see
//! `fuzz/kit.rs`).

#[path = "../../fuzz/kit.rs"]
mod kit;

use kit::Rng;
use madmpi_pmi::wire::MAX_FRAME;
use madmpi_pmi::{
    parse_line, parse_message, Command, Frame, LineFramer, Message, Server, ServerConfig,
};

#[global_allocator]
static METER: kit::Meter = kit::Meter;

const CI_CASES: u64 = 30_000;

/// Words the PMI grammar is made of, to build lines that get past the first checks.
const WORDS: &[&str] = &[
    "cmd",
    "mcmd",
    "=",
    " ",
    "\t",
    "\\",
    "\\ ",
    "\n",
    "\r\n",
    "endcmd",
    "put",
    "get",
    "init",
    "initack",
    "barrier_in",
    "finalize",
    "abort",
    "spawn",
    "kvsname",
    "key",
    "value",
    "pmiid",
    "pmi_version",
    "pmi_subversion",
    "exitcode",
    "message",
    "service",
    "port",
    "token",
    "madmpi_auth",
    "totspawns",
    "spawnssofar",
    "get_maxes",
    "lookup_name",
    "publish_name",
    "-1",
    "0",
    "1",
    "2147483647",
    "2147483648",
    "-2147483649",
    "kvs_1_0",
    "é",
    "\u{0}",
];

fn ident(rng: &mut Rng) -> String {
    let n = 1 + rng.below(8);
    (0..n).map(|_| *rng.pick(b"az_-09.") as char).collect()
}

/// A value: printable text with spaces, backslashes, `=`, tabs and UTF-8.
fn value(rng: &mut Rng) -> String {
    let n = rng.len_upto(24);
    (0..n)
        .map(|_| *rng.pick(&['a', ' ', '\\', '=', '\t', 'é', '€', ',', 'Z', '0']))
        .collect()
}

fn random_message(rng: &mut Rng) -> Message {
    let mut m = Message::new(&ident(rng));
    m.mcmd = rng.one_in(4);
    for _ in 0..rng.below(6) {
        let v = if m.mcmd || !rng.one_in(5) {
            Some(value(rng))
        } else {
            None
        };
        m.args.push((ident(rng), v));
    }
    if m.mcmd {
        // An mcmd block has no bare tokens, and its lines are trimmed around the key.
        for (_, v) in &mut m.args {
            if v.is_none() {
                *v = Some(String::new());
            }
        }
    }
    m
}

fn grammar_line(rng: &mut Rng) -> Vec<u8> {
    let mut s = String::new();
    for _ in 0..rng.below(20) {
        let w = WORDS[rng.below(WORDS.len())];
        s.push_str(w);
    }
    s.into_bytes()
}

/// One input for the line parsers.
fn line_input(rng: &mut Rng) -> Vec<u8> {
    match rng.below(5) {
        0 => rng.raw(300),
        1 => grammar_line(rng),
        2 => random_command(rng).encode(),
        _ => {
            let mut b = random_message(rng).encode();
            rng.mutate(&mut b, 4);
            b
        }
    }
}

/// Allocation a parse of `n` bytes may cost: linear in the input (every token is a string no
/// longer than the text it came from, in a vector of at most one entry per two bytes).
fn alloc_budget(n: usize) -> usize {
    64 * n + 1024
}

#[test]
fn fuzz_parse_message() {
    kit::assert_metering();
    kit::run("pmi::parse_message", CI_CASES, |rng| {
        if rng.one_in(3) {
            // Round trip.
            let m = random_message(rng);
            let mut enc = m.encode();
            if !m.mcmd && rng.one_in(2) {
                enc.pop(); // The newline is optional.
            }
            let got = parse_message(&enc);
            // In an mcmd block, keys are trimmed and a value keeps its spaces; both sides are
            // ASCII-safe here, so the only change allowed is none.
            assert_eq!(got.as_ref(), Ok(&m), "{:?}", String::from_utf8_lossy(&enc));
        }
        let input = line_input(rng);
        let (r, usage) = kit::metered(|| parse_message(&input));
        assert!(
            usage.bytes <= alloc_budget(input.len()),
            "{usage:?} for {} bytes",
            input.len()
        );
        if let Ok(m) = r {
            // What decodes re-encodes to the same message.
            assert_eq!(parse_message(&m.encode()), Ok(m));
        }
    });
    // A line over the limit is refused before anything is allocated.
    let mut big = b"cmd=put key=k value=".to_vec();
    big.resize(MAX_FRAME + 1, b'x');
    let (r, usage) = kit::metered(|| parse_message(&big));
    assert!(r.is_err());
    assert_eq!(usage.count, 0);
}

fn random_command(rng: &mut Rng) -> Command {
    let int = |rng: &mut Rng| rng.edgy_u32() as i32;
    let opt = |rng: &mut Rng| rng.one_in(2).then(|| ident(rng));
    match rng.below(17) {
        0 => Command::Init {
            pmi_version: int(rng),
            pmi_subversion: int(rng),
        },
        1 => Command::InitAck { pmiid: int(rng) },
        2 => Command::GetMaxes,
        3 => Command::GetAppnum,
        4 => Command::GetMyKvsname,
        5 => Command::GetUniverseSize,
        6 => Command::Put {
            kvsname: opt(rng),
            key: ident(rng),
            value: value(rng),
        },
        7 => Command::Get {
            kvsname: opt(rng),
            key: ident(rng),
        },
        8 => Command::BarrierIn,
        9 => Command::Finalize,
        10 => Command::Abort {
            exitcode: int(rng),
            message: rng.one_in(2).then(|| value(rng)),
        },
        11 => Command::PublishName {
            service: ident(rng),
            port: value(rng),
        },
        12 => Command::UnpublishName {
            service: ident(rng),
        },
        13 => Command::LookupName {
            service: ident(rng),
        },
        14 => Command::Auth { token: value(rng) },
        _ => Command::Spawn {
            totspawns: int(rng),
            spawnssofar: int(rng),
            block: Box::new(madmpi_pmi::SpawnBlock {
                nprocs: int(rng),
                execname: ident(rng),
                args: vec![ident(rng)],
                preput: vec![(ident(rng), ident(rng))],
                info: vec![(ident(rng), ident(rng))],
            }),
        },
    }
}

#[test]
fn fuzz_parse_line() {
    kit::assert_metering();
    kit::run("pmi::parse_line", CI_CASES, |rng| {
        let c = random_command(rng);
        assert_eq!(parse_line(&c.encode()), Ok(c.clone()), "{c:?}");
        let input = line_input(rng);
        let (r, usage) = kit::metered(|| parse_line(&input));
        assert!(usage.bytes <= alloc_budget(input.len()), "{usage:?}");
        if let Ok(c) = r {
            assert_eq!(parse_line(&c.encode()), Ok(c));
        }
    });
}

/// Feed `stream` to `f` in random pieces, collecting frames; check the buffer bound.
fn feed(rng: &mut Rng, f: &mut LineFramer, limit: usize, stream: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let n = 1 + rng.len_upto(rest.len() - 1);
        let (piece, tail) = rest.split_at(n);
        rest = tail;
        f.handle_bytes(piece);
        while let Some(fr) = f.poll_frame() {
            out.push(fr);
        }
        assert!(
            f.pending() <= limit.max(16).saturating_add(1),
            "{} bytes pending",
            f.pending()
        );
    }
    out
}

#[test]
fn fuzz_line_framer() {
    kit::run("pmi::LineFramer", CI_CASES / 2, |rng| {
        let limit = *rng.pick(&[16, 64, 300, MAX_FRAME]);
        let mut f = LineFramer::new(limit);
        if rng.one_in(2) {
            // A stream of well-formed lines and blocks, shorter than the limit: the frames are
            // exactly those, however the stream is cut.
            let mut stream = Vec::new();
            let mut want = Vec::new();
            for _ in 0..rng.below(8) {
                let m = random_message(rng);
                let enc = m.encode();
                if enc.len() > limit.max(16) {
                    continue;
                }
                stream.extend_from_slice(&enc);
                want.push(Frame::Data(if m.mcmd {
                    enc
                } else {
                    enc[..enc.len() - 1].to_vec()
                }));
            }
            let got = feed(rng, &mut f, usize::MAX, &stream);
            assert_eq!(got, want);
            assert_eq!(f.pending(), 0);
        } else {
            let mut stream = Vec::new();
            for _ in 0..rng.below(6) {
                let part = line_input(rng);
                stream.extend_from_slice(&part);
            }
            rng.mutate(&mut stream, 4);
            // What stays buffered is at most the limit plus the last piece.
            let mut rest = &stream[..];
            while !rest.is_empty() {
                let n = 1 + rng.len_upto(rest.len() - 1);
                let (piece, tail) = rest.split_at(n);
                rest = tail;
                f.handle_bytes(piece);
                let mut frames = 0;
                while f.poll_frame().is_some() {
                    frames += 1;
                    assert!(frames <= piece.len() + 1, "more frames than bytes");
                }
                assert!(f.pending() <= limit.max(16) + piece.len());
            }
        }
    });
}

#[test]
fn fuzz_server() {
    kit::run("pmi::Server", CI_CASES / 3, |rng| {
        let size = 1 + rng.below(4) as u32;
        let mut cfg = ServerConfig::single_node(size, "kvs_1_0");
        if rng.one_in(4) {
            cfg.auth_token = Some("secret".into());
        }
        let mut s = Server::new(cfg);
        let conns: Vec<_> = (0..size)
            .map(|r| s.handle_connect((!rng.one_in(4)).then_some(r)))
            .collect();
        for _ in 0..rng.below(12) {
            let conn = *rng.pick(&conns);
            let frame = match rng.below(8) {
                0 => Frame::Overlong {
                    len: rng.edgy_u64() as usize,
                },
                1 => Frame::Data(
                    Command::Auth {
                        token: "secret".into(),
                    }
                    .encode(),
                ),
                2 => Frame::Data(random_command(rng).encode()),
                _ => Frame::Data(line_input(rng)),
            };
            if rng.one_in(20) {
                s.handle_disconnect(conn);
            }
            s.handle_frame(conn, &frame);
            while let Some((_, reply)) = s.poll_transmit() {
                // What the server says, a client can read.
                assert!(reply.ends_with(b"\n"));
                assert!(
                    parse_message(&reply).is_ok(),
                    "{:?}",
                    String::from_utf8_lossy(&reply)
                );
            }
            while s.poll_event().is_some() {}
        }
    });
}
