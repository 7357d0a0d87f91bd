//! The networks part's experiments besides the curves: the heterogeneous multi-rail
//! (`split_balance` over BIP + SISCI) and the NewMadeleine paper's experiments (seed 003, §5.2
//! and §5.3) over the emulated MX: the multi-segment ping-pong under `aggreg` and `default`, and
//! the indexed datatype of a 64-byte and a 256 KiB block sent block by block (zero-copy) or
//! packed first as the paper says MPICH does.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Ctx, Curve};
use crate::proc::{self, Outcome, Spec};

fn kib(n: u64) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1024 && n % 1024 == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

/// `split_balance` over BIP + SISCI next to each network alone: large messages should reach
/// the sum of the two bandwidths (target: 90 % of it), small ones the lower latency of the two.
pub fn rails(curves: &BTreeMap<&'static str, (Curve, Curve)>) -> String {
    let mut md = String::from(
        "\n### Heterogeneous multi-rail: `split_balance` over BIP + SISCI\n\n\
         `MADMPI_EMU=bip,sisci MADMPI_STRATEGY=split_balance` (two emulated NICs to the peer; \
         the receiver cuts each rendezvous over both in proportion to their bandwidth, learned \
         from the pieces it receives) next to the `bip` and `sisci` curves above. Large \
         messages: the ratio to the sum of the two bandwidths (target ≥ 0.90). Small messages: \
         the ratio to the lower of the two latencies (they should take that rail: ≈ 1).\n\n",
    );
    let get = |id: &str| curves.get(id).map(|c| &c.0);
    let (Some(b), Some(s), Some(r)) = (get("bip"), get("sisci"), get("rails")) else {
        md.push_str("not measured: needs the `bip`, `sisci` and `rails` curves.\n");
        return md;
    };
    let at = |c: &Curve, n: u64| c.iter().find(|p| p.0 == n).copied();
    let _ = writeln!(
        md,
        "| size | bip | sisci | rails (split_balance) | rails / reference | reference |\n\
         |---|---|---|---|---|---|"
    );
    for &(n, lat, bw) in r {
        let (Some(pb), Some(ps)) = (at(b, n), at(s, n)) else {
            continue;
        };
        if n >= 256 << 10 {
            let sum = pb.2 + ps.2;
            let _ = writeln!(
                md,
                "| {} | {:.1} MB/s | {:.1} MB/s | {bw:.1} MB/s | {:.2} | sum {sum:.1} MB/s |",
                kib(n),
                pb.2,
                ps.2,
                bw / sum
            );
        } else if n <= 4096 {
            let low = pb.1.min(ps.1);
            let _ = writeln!(
                md,
                "| {} | {:.2} µs | {:.2} µs | {lat:.2} µs | {:.2} | lower {low:.2} µs |",
                kib(n),
                pb.1,
                ps.1,
                lat / low
            );
        }
    }
    md
}

/// Medians of `metric` by (mode, size).
fn table(ms: &[crate::parse::Measurement], metric: &str) -> BTreeMap<(String, u64), f64> {
    ms.iter()
        .filter(|m| m.metric == metric)
        .map(|m| ((m.mode.clone(), m.size), m.med))
        .collect()
}

/// The multi-segment ping-pong (16 `MPI_Isend`s on 16 communicators per ping) over the
/// emulated MX, `aggreg` against `default`.
pub fn multiseg(cx: &Ctx<'_>) -> Result<String, String> {
    eprintln!("madmpi-bench: networks: multiseg over mx");
    let exe = cx.build("multiseg", "bench/c/multiseg.c")?;
    let mut by = BTreeMap::new();
    for strategy in ["default", "aggreg"] {
        let ms = cx.measure(
            &format!("networks-multiseg-{strategy}"),
            &exe,
            &["--mode", "multiseg"],
            &[
                ("MADMPI_TRANSPORTS", "emu"),
                ("MADMPI_EMU", "mx"),
                ("MADMPI_STRATEGY", strategy),
            ],
        )?;
        by.insert(strategy, table(&ms, "lat_us"));
    }
    let mut md = String::from(
        "\n### NewMadeleine over the emulated MX: multi-segment ping-pong\n\n\
         `bench/c/multiseg.c` (each ping: 16 `MPI_Isend`s of the size below, each on its own \
         communicator) over `MADMPI_EMU=mx`, half round trip. Published (seed 003 §5.2, \
         figure 3(b)): MAD-MPI with aggregation is up to 70 % faster than MPICH-MX and Open \
         MPI-MX, which do not aggregate (the figure's values are not in the text). Here the \
         non-aggregating reference is our own `default` strategy (one chunk per packet).\n\n\
         | segment | `default` | `aggreg` | aggreg faster by |\n|---|---|---|---|\n",
    );
    for ((_, n), d) in &by["default"] {
        if let Some(a) = by["aggreg"].get(&("multiseg".to_string(), *n)) {
            let _ = writeln!(
                md,
                "| {} | {d:.2} µs | {a:.2} µs | {:.0} % |",
                kib(*n),
                100.0 * (1.0 - a / d)
            );
        }
    }
    Ok(md)
}

/// The indexed datatype of seed 003 §5.3 (64 B, a 1 KiB gap, 256 KiB) over the emulated MX:
/// ours block by block (the small block with the rendezvous request, the large one zero-copy)
/// against packing it first (`MPI_Pack`, one contiguous message, `MPI_Unpack`: what the paper
/// says MPICH does), and a contiguous message of the same payload.
pub fn indexed(cx: &Ctx<'_>) -> Result<String, String> {
    eprintln!("madmpi-bench: networks: indexed over mx");
    let exe = cx.build("indexed", "bench/c/indexed.c")?;
    let env = [
        ("MADMPI_TRANSPORTS", "emu"),
        ("MADMPI_EMU", "mx"),
        ("MADMPI_STRATEGY", "aggreg"),
    ];
    let mut lat = BTreeMap::new();
    for mode in ["indexed", "indexed_pack", "indexed_contig"] {
        let ms = cx.measure(
            &format!("networks-indexed-{mode}"),
            &exe,
            &["--mode", mode],
            &env,
        )?;
        lat.extend(table(&ms, "lat_us"));
    }
    let mut md = String::from(
        "\n### NewMadeleine over the emulated MX: indexed datatype\n\n\
         `bench/c/indexed.c`: one element of an indexed type of a 64-byte block, a 1 KiB gap \
         and a large block, ping-pong over `MADMPI_EMU=mx` under `aggreg`, half round trip. \
         *block by block*: ours (`--mode indexed`); *packed*: the same type packed into a \
         contiguous buffer, sent, received into a temporary buffer and unpacked \
         (`--mode indexed_pack`, the paper's account of MPICH); *contiguous*: the same payload \
         in one contiguous buffer. Published (seed 003 §5.3, figure 4(a)): about 70 % gain \
         over MPICH and 50 % over Open MPI over MX. `MPI_Pack` and `MPI_Unpack` copy at the \
         profile's host model's rate (the paper's 1.8 GHz Opteron, `docs/networks.md`), not \
         at this machine's.\n\n\
         | payload | block by block | packed | contiguous | gain over packed |\n\
         |---|---|---|---|---|\n",
    );
    let sizes: Vec<u64> = lat
        .keys()
        .filter(|(m, _)| m == "indexed")
        .map(|(_, n)| *n)
        .collect();
    for n in sizes {
        let get = |m: &str| lat.get(&(m.to_string(), n)).copied().unwrap_or(f64::NAN);
        let (i, p, c) = (get("indexed"), get("indexed_pack"), get("indexed_contig"));
        let _ = writeln!(
            md,
            "| {} + 64 B | {i:.1} µs | {p:.1} µs | {c:.1} µs | {:.0} % |",
            kib(n - 64),
            100.0 * (1.0 - i / p)
        );
    }
    Ok(md)
}

/// Messages each rank sends in the exactly-once run (both ranks send: twice this in all).
const EXACTLY_ONCE_EACH: u64 = 500_000;

/// The counters of `MADMPI_EMU_STATS` lines on stderr, summed over the ranks' NICs.
fn stats_sum(stderr: &str, keys: &[&str]) -> Vec<u64> {
    keys.iter()
        .map(|k| {
            stderr
                .lines()
                .filter(|l| l.starts_with("madmpi emu "))
                .filter_map(|l| {
                    let at = l.find(&format!("{k}: "))? + k.len() + 2;
                    let digits: String =
                        l[at..].chars().take_while(|c| c.is_ascii_digit()).collect();
                    digits.parse::<u64>().ok()
                })
                .sum()
        })
        .collect()
}

/// Seed 004's reliability through MPI: `tests/c/p2p/exactly_once.c` on 2 ranks over
/// `MADMPI_EMU=bcl3 MADMPI_EMU_LOSS=1e-4`, 10^6 messages (10^5 with `--quick`) of 0 B to 256 KiB, each checked for
/// loss, duplication, order and content; the NICs' counters (drops and bit flips injected,
/// CRC errors, NAKs, timeouts, retransmissions) from `MADMPI_EMU_STATS`.
pub fn exactly_once(cx: &Ctx<'_>) -> Result<String, String> {
    eprintln!("madmpi-bench: networks: exactly_once over lossy bcl3");
    let exe = cx.build("exactly_once", "tests/c/p2p/exactly_once.c")?;
    let each = if cx.quick {
        EXACTLY_ONCE_EACH / 10
    } else {
        EXACTLY_ONCE_EACH
    };
    let mut spec = Spec::new(&[
        cx.repo.join("bin/mpirun").display().to_string(),
        "-n".into(),
        "2".into(),
        exe.display().to_string(),
        each.to_string(),
    ]);
    spec.env = [
        ("MADMPI_TRANSPORTS", "emu"),
        ("MADMPI_EMU", "bcl3"),
        ("MADMPI_EMU_LOSS", "1e-4"),
        ("MADMPI_EMU_STATS", "1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let f = proc::run(
        &spec,
        cx.timeout.max(std::time::Duration::from_secs(1800)),
        &cx.log_dir.join("networks-exactly_once"),
    );
    let line = f
        .stdout
        .lines()
        .find(|l| l.starts_with("exactly_once: "))
        .map(str::to_owned);
    let (Outcome::Ok, Some(line)) = (&f.outcome, line) else {
        return Err(format!(
            "{}; stderr: {}",
            f.outcome.detail(),
            f.stderr
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join(" / ")
        ));
    };
    let keys = [
        "frames_in",
        "dropped",
        "flipped",
        "crc_errors",
        "out_of_order",
        "duplicates",
        "naks",
        "timeouts",
        "retransmitted",
    ];
    let v = stats_sum(&f.stderr, &keys);
    let mut md = format!(
        "\n### BCL-3's reliability through MPI: {} messages over a lossy link\n\n\
         `tests/c/p2p/exactly_once.c`, 2 ranks each sending {each} messages (0 B to 256 KiB: \
         eager, system channel, normal channel with handshake) over `MADMPI_EMU=bcl3 \
         MADMPI_EMU_LOSS=1e-4`, in {:.1} s. The program: {}\n\n\
         | counter (both NICs) | count |\n|---|---|\n",
        2 * each,
        f.wall.as_secs_f64(),
        line.trim_start_matches("exactly_once: ")
    );
    for (k, n) in keys.iter().zip(&v) {
        let _ = writeln!(md, "| {k} | {n} |");
    }
    Ok(md)
}
