//! The emulated networks: each profile is a list of transmission modules chosen by packet size
//! (Madeleine II's switch), each with LogGP-style parameters and the protocol features of the
//! network's driver. The numbers and their sources are in `docs/networks.md`.
//!
//! The model, per packet of `n` bytes posted at time `t` on module `m`:
//! - the sender's CPU is busy `o_s` (plus a registration or copy cost where the module has one);
//! - the sender's NIC is busy until `t + o_s + w(n)`, where `w(n) = units(n) · unit · G` (the
//!   wire time; `unit` is 64 for SCI's write-combining buffers, 1 otherwise): the next packet
//!   cannot start before;
//! - the packet is visible to the receiver at `t + o_s + L + w(n)` (never before the previous
//!   packet of that direction: the link keeps order);
//! - taking it costs the receiver's CPU `o_r`.

use crate::{Error, Result};

/// A registration cost: memory pinned before the NIC may touch it (VIA, BCL-3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg {
    /// Cost of one registration, in ns.
    pub base_ns: u64,
    /// Added per 4 KiB page, in ns.
    pub page_ns: u64,
}

/// The host under a network's published figures: what the middleware of the paper's machines
/// cost per message, and how fast they copied memory. The emulated NIC charges it by
/// busy-waiting on the monotonic clock, as it charges the network: `send_ns` with each data
/// packet's `o_s`, `recv_ns` with its `o_r` (control frames are the NIC's own and pay
/// nothing), and the copy wherever madmpi packs or unpacks data for the network (the engine's
/// packing of a non-contiguous send, `MPI_Pack`, `MPI_Unpack`: [`super::charge_host_copy`])
/// and in the modules that copy into pre-registered buffers (VIA's pool). Today's CPU does
/// the same work in a fraction of the time; what it adds on top is measured, not modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    /// The machine (shown in the benchmark's table).
    pub name: &'static str,
    /// The middleware's software per data packet on the sending host, ns.
    pub send_ns: u64,
    /// The middleware's software per data packet on the receiving host, ns.
    pub recv_ns: u64,
    /// Memory copy, picoseconds per byte (1e6 / MB/s); 0: copies are not charged.
    pub copy_ps: u64,
}

impl Host {
    /// The host's share of a one-way message: its software on both sides, ns.
    pub const fn per_message_ns(&self) -> u64 {
        self.send_ns + self.recv_ns
    }

    /// Time to copy `n` bytes, ns.
    pub const fn copy_ns(&self, n: usize) -> u64 {
        n as u64 * self.copy_ps / 1000
    }
}

/// Seeds 000 and 002 (Madeleine II; Madeleine over VIA): dual Pentium II 450 MHz, 128 MB, Linux
/// 2.2. Madeleine II over BIP takes 7 µs where raw BIP takes 5 µs: 2 µs of software per
/// message, half on each side. Copy at 150 MB/s: a PC100 SDRAM memory bus (800 MB/s peak)
/// copying through a 450 MHz Pentium II (ours: the papers give no copy figure).
pub const PII_450: Host = Host {
    name: "Pentium II 450 MHz (seeds 000, 002)",
    send_ns: 1000,
    recv_ns: 1000,
    copy_ps: 1_000_000 / 150,
};

/// Seed 004 (BCL-3 on DAWNING-3000): 4-way 375 MHz Power3 SMP, AIX 4.3.3. MPI over BCL-3
/// takes 23.7 µs where BCL-3 takes 18.3 µs: 5.4 µs of software per message, half on each
/// side. Copy at 391 MB/s: BCL-3's intra-node bandwidth, a copy into shared memory and one out
/// of it, pipelined (the paper's own measure of the node's memory copy).
pub const POWER3_375: Host = Host {
    name: "Power3 375 MHz (seed 004)",
    send_ns: 2700,
    recv_ns: 2700,
    copy_ps: 1_000_000 / 391,
};

/// Seed 003 (NewMadeleine): dual-core 1.8 GHz Opteron, 1 MB L2, Linux 2.6.17. MAD-MPI adds
/// "less than 0.5 µs" to the latency: we charge the middle of that range, 0.25 µs, half on
/// each side. Copy at 1600 MB/s: half the 3.2 GB/s that a dual-channel DDR-400 memory (6.4
/// GB/s peak) gives a copy, which reads and writes every byte (ours: the paper gives no copy
/// figure).
pub const OPTERON_1800: Host = Host {
    name: "Opteron 1.8 GHz (seed 003)",
    send_ns: 125,
    recv_ns: 125,
    copy_ps: 1_000_000 / 1600,
};

/// No middleware figure published (GM: seed 004's table gives the raw network only): the
/// network alone.
pub const NO_HOST: Host = Host {
    name: "none (raw figures only)",
    send_ns: 0,
    recv_ns: 0,
    copy_ps: 0,
};

/// One transmission module (a range of packet sizes and how they travel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Module {
    /// Name (shown in statistics and errors).
    pub name: &'static str,
    /// Packets of at most this many bytes (frame payload) take this module, if no earlier one.
    pub upto: usize,
    /// Sender overhead, ns.
    pub o_s: u64,
    /// Receiver overhead, ns.
    pub o_r: u64,
    /// Wire latency, ns.
    pub l: u64,
    /// Gap per byte, in picoseconds (1e6 / bandwidth in MB/s).
    pub g_ps: u64,
    /// Bytes travel in units of this size (SCI write-combining: 64); 1 otherwise.
    pub unit: usize,
    /// Static receive buffers per peer (credit-based flow control); 0: none.
    pub credits: u32,
    /// The receiver acknowledges that it is ready before the data leaves (BIP long messages,
    /// VIA RDMA write, BCL-3 normal channel).
    pub handshake: bool,
    /// The sender's buffer is registered for this module (unless in the registration cache).
    pub reg: Option<Reg>,
    /// The data is copied into a pre-registered buffer first: ps per byte of the first
    /// `copy_window` bytes (the rest of the copy overlaps the wire, pipelined).
    pub copy_ps: u64,
    /// See `copy_ps`.
    pub copy_window: usize,
    /// Only used when the profile's optional modules are enabled (SCI DMA).
    pub optional: bool,
}

impl Module {
    const fn base(
        name: &'static str,
        upto: usize,
        o_s: u64,
        l: u64,
        o_r: u64,
        mbps: u64,
    ) -> Module {
        Module {
            name,
            upto,
            o_s,
            o_r,
            l,
            g_ps: 1_000_000 / mbps,
            unit: 1,
            credits: 0,
            handshake: false,
            reg: None,
            copy_ps: 0,
            copy_window: 0,
            optional: false,
        }
    }
    const fn credits(mut self, c: u32) -> Module {
        self.credits = c;
        self
    }
    const fn handshake(mut self) -> Module {
        self.handshake = true;
        self
    }
    const fn unit(mut self, u: usize) -> Module {
        self.unit = u;
        self
    }
    const fn reg(mut self, base_ns: u64, page_ns: u64) -> Module {
        self.reg = Some(Reg { base_ns, page_ns });
        self
    }
    const fn copy(mut self, ps: u64, window: usize) -> Module {
        self.copy_ps = ps;
        self.copy_window = window;
        self
    }
    const fn optional(mut self) -> Module {
        self.optional = true;
        self
    }

    /// Wire time of `n` bytes, ns.
    pub fn wire_ns(&self, n: usize) -> u64 {
        let units = n.div_ceil(self.unit.max(1)) * self.unit.max(1);
        (units as u64 * self.g_ps) / 1000
    }

    /// The sender's CPU time for `n` bytes, without registration, ns.
    pub fn send_cpu_ns(&self, n: usize) -> u64 {
        self.o_s + (n.min(self.copy_window) as u64 * self.copy_ps) / 1000
    }

    /// Registration cost of `len` bytes (not cached), ns.
    pub fn reg_ns(&self, len: usize) -> u64 {
        self.reg
            .map_or(0, |r| r.base_ns + len.div_ceil(4096) as u64 * r.page_ns)
    }
}

/// One emulated network.
#[derive(Clone, Copy, Debug)]
pub struct Profile {
    /// `MADMPI_EMU` name.
    pub name: &'static str,
    /// What it emulates.
    pub about: &'static str,
    /// Modules, by increasing `upto` (the last one takes every larger packet).
    pub modules: &'static [Module],
    /// Sequence numbers, CRC, ACK/NAK and retransmission (BCL-3): the only profiles that may
    /// run over a lossy link (`MADMPI_EMU_LOSS`).
    pub reliable: bool,
    /// Entries of the registration (pin-down) cache; 0: every registration is paid.
    pub reg_cache: usize,
    /// The engine's eager threshold over this network.
    pub eager: usize,
    /// The host of the paper whose figures the profile reproduces.
    pub host: &'static Host,
}

const KB: usize = 1024;
/// SCI's wire latency: Madeleine II's 3.9 us over SISCI (seed 000) less Madeleine II's own
/// 2 us on its host (`PII_450`, from BIP: 7 us against raw BIP's 5 us), o_s, o_r and one
/// 64-byte write-combining buffer at 75 MB/s (853 ns).
const SCI_L: u64 = 3900 - PII_450.per_message_ns() - 300 - 300 - 64 * (1_000_000 / 75) / 1000;
const MAX: usize = usize::MAX;

/// Every profile.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "bip",
        about: "Myrinet BIP (Madeleine II, seed 000): raw 5 us / 126 MB/s",
        modules: &[
            Module::base("bip-short", KB, 1000, 3000, 1000, 126).credits(32),
            Module::base("bip-long", MAX, 1000, 3000, 1000, 126).handshake(),
        ],
        reliable: false,
        reg_cache: 0,
        eager: 16 * KB,
        host: &PII_450,
    },
    Profile {
        name: "gm",
        about: "Myrinet GM (seed 004, table 1): 13.37-21 us / >140 MB/s",
        modules: &[Module::base("gm", MAX, 2500, 8400, 2500, 145)],
        reliable: false,
        reg_cache: 0,
        eager: 16 * KB,
        host: &NO_HOST,
    },
    Profile {
        name: "mx",
        about: "Myri-10G MX (era documentation, issue 18): ~2.5 us / ~1150 MB/s",
        modules: &[
            Module::base("mx-eager", 32 * KB, 500, 1500, 500, 1150),
            Module::base("mx-rndv", MAX, 500, 1500, 500, 1150).handshake(),
        ],
        reliable: false,
        reg_cache: 0,
        eager: 32 * KB,
        host: &OPTERON_1800,
    },
    Profile {
        name: "sisci",
        about: "Dolphin SCI / SISCI (Madeleine II, seed 000): 3.9 us / 82 MB/s",
        modules: &[
            // PIO through 64-byte write-combining buffers: one flush. The published 3.9 us is
            // Madeleine II's smallest message, which fills one 64-byte buffer (its header word
            // is written with its data): host 2 us + o_s + L + o_r + 64 B at 75 MB/s = 3.9 us,
            // so L = 0.447 us.
            Module::base("sci-pio-short", 112, 300, SCI_L, 300, 75).unit(64),
            // Regular remote write: data, flush, mailbox flag, flush again.
            Module::base("sci-regular", 8 * KB, 1500, SCI_L, 300, 70).unit(64),
            // DMA, capped at 35 MB/s (inactive in the paper; MADMPI_EMU_SCI_DMA=1).
            Module::base("sci-dma", MAX, 10_000, SCI_L, 300, 35).optional(),
            // Regular mode, double-buffered above 8 kB: copy overlaps the wire.
            Module::base("sci-double-buffer", MAX, 1500, SCI_L, 300, 82).unit(64),
        ],
        reliable: false,
        reg_cache: 0,
        eager: 16 * KB,
        host: &PII_450,
    },
    Profile {
        name: "via",
        about: "M-VIA over Fast Ethernet (seeds 000, 002): 35-53 us / ~11 MB/s",
        modules: &[
            // Pre-registered pool of 512-byte buffers: a copy (pipelined), credits.
            Module::base("via-pool", 5 * KB, 5000, 25_000, 5000, 11)
                .credits(16)
                .copy(PII_450.copy_ps, 512),
            // Dynamic registration, message passing (up to the 32 kB MTU), credits. One page
            // registered on each side: 8 us each (53 us = 35 us + 2 us of Madeleine on its
            // host + 2 x 8 us), the receiver's inside its o_r.
            Module::base("via-dynamic", 32 * KB, 5000, 25_000, 13_000, 11)
                .credits(16)
                .reg(7500, 500),
            // Dynamic registration, RDMA write after the receiver's acknowledgement.
            Module::base("via-rdma", MAX, 5000, 25_000, 13_000, 11)
                .handshake()
                .reg(7500, 500),
        ],
        reliable: false,
        reg_cache: 0,
        eager: 16 * KB,
        host: &PII_450,
    },
    Profile {
        name: "elan",
        about: "Quadrics QsNet II / Elan4 (era documentation, issue 18): ~1.5 us / ~835 MB/s",
        modules: &[Module::base("elan", MAX, 300, 900, 300, 835)],
        reliable: false,
        reg_cache: 0,
        eager: 16 * KB,
        host: &OPTERON_1800,
    },
    Profile {
        name: "bcl3",
        about: "BCL-3 over Myrinet (seed 004): 18.3 us / 146 MB/s, ACK/NAK reliability",
        modules: &[
            // System channel: small messages into pooled buffers (kernel trap to send).
            Module::base("bcl3-system", 4 * KB, 5000, 10_300, 3000, 146),
            // Normal channel: rendezvous with pinned-down user buffers (pin-down cache).
            Module::base("bcl3-normal", MAX, 5000, 10_300, 3000, 146)
                .handshake()
                .reg(5000, 250),
        ],
        reliable: true,
        reg_cache: 64,
        eager: 16 * KB,
        host: &POWER3_375,
    },
];

/// The profile named `name`.
///
/// # Errors
///
/// [`Error::Invalid`] listing the known profiles.
pub fn find(name: &str) -> Result<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name).ok_or_else(|| {
        let known: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
        Error::Invalid(format!(
            "MADMPI_EMU: unknown network profile '{name}' (known: {})",
            known.join(", ")
        ))
    })
}

impl Profile {
    /// The modules in use by default (bit `k`: module `k`): all but the optional ones.
    pub fn default_modules(&self) -> u64 {
        self.modules
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.optional)
            .fold(0, |a, (k, _)| a | 1 << k)
    }

    /// The index of the module for a packet of `n` bytes, among the modules `on` (a bit set,
    /// as [`default_modules`](Self::default_modules)): the first in use whose range holds it.
    pub fn module_for(&self, n: usize, on: u64) -> usize {
        self.modules
            .iter()
            .enumerate()
            .position(|(k, m)| n <= m.upto && on & (1 << k) != 0)
            .unwrap_or(self.modules.len() - 1)
    }

    /// Predicted one-way time of a lone packet of `n` bytes (no queueing, credits available,
    /// registration not cached, handshake included) on the modules `on`, ns: the model's
    /// arithmetic, for tests and for the benchmark's table.
    pub fn one_way_ns(&self, n: usize, on: u64) -> u64 {
        let m = &self.modules[self.module_for(n, on)];
        let ctl = &self.modules[0];
        let hs = if m.handshake {
            2 * (ctl.o_s + ctl.l + ctl.o_r)
        } else {
            0
        };
        hs + m.send_cpu_ns(n) + m.reg_ns(n) + m.l + m.wire_ns(n) + m.o_r
    }

    /// [`one_way_ns`](Self::one_way_ns) with the host's software on both sides: what the
    /// paper's middleware took on its machine, for one packet.
    pub fn with_host_ns(&self, n: usize, on: u64) -> u64 {
        self.one_way_ns(n, on) + self.host.per_message_ns()
    }

    /// Streaming bandwidth of packets of `n` bytes, MB/s (the NIC's occupancy per packet).
    pub fn stream_mbps(&self, n: usize, on: u64) -> f64 {
        let m = &self.modules[self.module_for(n, on)];
        let busy = m.send_cpu_ns(n) + m.reg_ns(n) + m.wire_ns(n);
        n as f64 * 1000.0 / busy.max(1) as f64
    }

    /// Nominal latency (ns) and bandwidth (MB/s) for [`crate::Caps`].
    pub fn nominal(&self) -> (u64, u64) {
        let m0 = &self.modules[0];
        let last = &self.modules[self.modules.len() - 1];
        (m0.o_s + m0.l + m0.o_r, 1_000_000 / last.g_ps.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_ordered_and_complete() {
        for p in PROFILES {
            assert!(!p.modules.is_empty(), "{}", p.name);
            assert_eq!(p.modules[p.modules.len() - 1].upto, MAX, "{}", p.name);
            let req: Vec<_> = p.modules.iter().filter(|m| !m.optional).collect();
            assert!(req.windows(2).all(|w| w[0].upto < w[1].upto), "{}", p.name);
        }
    }

    #[test]
    fn model_arithmetic() {
        let bip = find("bip").unwrap();
        let on = bip.default_modules();
        // 0 bytes: o_s + L + o_r = 5 us; 1 kB on the short module adds 1024 * 7.936 ns.
        assert_eq!(bip.one_way_ns(0, on), 5000);
        assert_eq!(bip.module_for(1024, on), 0);
        assert_eq!(bip.one_way_ns(1024, on), 5000 + 1024 * 7936 / 1000);
        // Long: handshake (two control packets of 5 us) before the data.
        assert_eq!(bip.module_for(1025, on), 1);
        assert_eq!(bip.one_way_ns(1025, on), 10_000 + 5000 + 1025 * 7936 / 1000);
        let bw = bip.stream_mbps(1 << 20, on);
        assert!((125.0..126.1).contains(&bw), "{bw}");
        // SCI: 64-byte units, the DMA module only when asked.
        let sci = find("sisci").unwrap();
        let (on, dma) = (sci.default_modules(), 0b1111);
        assert_eq!(on, 0b1011);
        // The smallest message (one 64-byte write-combining buffer) takes the published 3.9 us.
        // Madeleine II's 3.9 us is the network's 1.9 us and its host's 2 us.
        assert_eq!(SCI_L, 447);
        assert_eq!(sci.one_way_ns(1, on), 1900);
        assert_eq!(sci.with_host_ns(1, on), 3900);
        assert_eq!(sci.one_way_ns(64, on), 1900);
        assert_eq!(sci.one_way_ns(65, on), 1900 + 853);
        // Madeleine II over BIP: 5 us of network and 2 us of host.
        assert_eq!(bip.with_host_ns(0, bip.default_modules()), 7000);
        // MPI over BCL-3: 18.3 us (18.3 with the 4 bytes of the paper) and 5.4 us of host.
        let bcl3 = find("bcl3").unwrap();
        assert_eq!(bcl3.with_host_ns(0, bcl3.default_modules()), 18_300 + 5400);
        assert_eq!(
            sci.modules[sci.module_for(64 << 10, on)].name,
            "sci-double-buffer"
        );
        assert_eq!(sci.modules[sci.module_for(64 << 10, dma)].name, "sci-dma");
        // VIA: the pool copies (first 512 B), dynamic registration pays a page.
        let via = find("via").unwrap();
        assert_eq!(via.modules[via.module_for(5 * KB, 0b111)].name, "via-pool");
        // Without the pool, small blocks are registered dynamically.
        assert_eq!(via.modules[via.module_for(100, 0b110)].name, "via-dynamic");
        let m = &via.modules[1];
        assert_eq!(m.reg_ns(6000), 7500 + 2 * 500);
        assert_eq!(via.modules[0].send_cpu_ns(4096), 5000 + 512 * 6666 / 1000);
    }

    #[test]
    fn unknown_profile_lists_the_known_ones() {
        let e = find("myrinet").unwrap_err().to_string();
        assert!(
            e.contains("'myrinet'") && e.contains("bip, gm, mx, sisci, via, elan, bcl3"),
            "{e}"
        );
    }
}
