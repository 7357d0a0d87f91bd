//! The registry: every driver by name, in preference order, how each one starts, and the one
//! static-dispatch enum ([`Driver`]) through which the engine reaches them.
//!
//! Adding a driver is one folder (its module) plus one line in [`ENTRIES`] and one variant of
//! [`Driver`]: the engine chooses by the numbers in [`Caps`] alone, and bootstraps every driver
//! through [`Starting`], so no file of the engine names a driver type.
//!
//! Start-up runs in three phases between the launcher's barriers (every rank makes the same
//! launcher calls in the same order, whatever its drivers):
//! 1. [`start`] (before the first barrier): shared state is created (the node's segment, by
//!    its leader);
//! 2. [`Starting::open`] (after it): the others attach, listeners open; the address card to
//!    publish is returned;
//! 3. [`Starting::finish`] (after the second barrier): the peers' cards are read and the driver
//!    is made; shared names are removed so that nothing outlives the job.

use std::io::{IoSlice, IoSliceMut};

use crate::emu::{EmuConfig, EmuTransport};
use crate::loopback::LoopbackTransport;
#[cfg(madmpi_ofi)]
use crate::ofi::{OfiConfig, OfiTransport};
use crate::shm::{ShmConfig, ShmSegment, ShmTransport};
use crate::tcp::{ConnectMode, TcpConfig, TcpTransport};
use crate::{
    Caps, Error, PeerId, RecvSink, RemoteRegion, Result, SendOutcome, SplitParams, Transport,
};

/// Which peers a driver can reach at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The process itself.
    Itself,
    /// The other processes of its node (shared memory).
    Node,
    /// Any other process of the job (a network).
    Any,
}

/// A driver as the registry lists it.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The name used in `MADMPI_TRANSPORTS` and `MADMPI_RAILS`.
    pub name: &'static str,
    /// Which peers it can reach.
    pub scope: Scope,
    /// It needs the job's secret (it authenticates its connections).
    pub needs_secret: bool,
    /// Whether it is started when `MADMPI_TRANSPORTS` does not list the drivers, given
    /// whether the job spans several hosts.
    pub by_default: fn(multi_host: bool) -> bool,
}

fn always(_multi_host: bool) -> bool {
    true
}

fn never(_multi_host: bool) -> bool {
    false
}

/// `ofi` starts by itself only in a job spanning hosts, with a fast provider (not TCP, UDP or
/// shared memory, which the `tcp` and `shm` drivers serve as well): InfiniBand, EFA,
/// Slingshot, Omni-Path. Elsewhere `MADMPI_TRANSPORTS` asks for it.
fn ofi_by_default(multi_host: bool) -> bool {
    #[cfg(madmpi_ofi)]
    {
        multi_host
            && crate::ofi::OfiConfig::from_env()
                .ok()
                .and_then(|c| crate::ofi::probe(&c).ok())
                .is_some_and(|p| crate::ofi::is_fast(&p))
    }
    #[cfg(not(madmpi_ofi))]
    {
        let _ = multi_host;
        false
    }
}

/// Every driver, best first: among the drivers that reach a peer, the first listed carries its
/// traffic when one rail is used.
pub const ENTRIES: &[Entry] = &[
    Entry {
        name: "self",
        scope: Scope::Itself,
        needs_secret: false,
        by_default: always,
    },
    Entry {
        name: "shm",
        scope: Scope::Node,
        needs_secret: false,
        by_default: always,
    },
    Entry {
        name: "ofi",
        scope: Scope::Any,
        needs_secret: false,
        by_default: ofi_by_default,
    },
    Entry {
        name: "tcp",
        scope: Scope::Any,
        needs_secret: true,
        by_default: always,
    },
    // Emulated networks (`MADMPI_EMU`): last, so only chosen when asked for
    // (`MADMPI_TRANSPORTS=emu` or `MADMPI_RAILS`).
    Entry {
        name: "emu",
        scope: Scope::Node,
        needs_secret: false,
        by_default: never,
    },
];

/// The entry named `name`.
pub fn entry(name: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.name == name)
}

/// The names of a comma-separated list of drivers (`MADMPI_TRANSPORTS`, `MADMPI_RAILS`), each
/// checked against the registry, in registry order, without repeats.
///
/// # Errors
///
/// [`Error::Invalid`] naming the variable, the unknown name and the known ones.
pub fn parse_list(var: &str, value: &str) -> Result<Vec<&'static str>> {
    let mut out: Vec<&'static str> = Vec::new();
    for t in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let Some(e) = entry(t) else {
            let known: Vec<&str> = ENTRIES.iter().map(|e| e.name).collect();
            return Err(Error::Invalid(format!(
                "{var}={value}: unknown transport '{t}' (known: {})",
                known.join(", ")
            )));
        };
        if !out.contains(&e.name) {
            out.push(e.name);
        }
    }
    out.sort_by_key(|n| ENTRIES.iter().position(|e| e.name == *n));
    Ok(out)
}

/// What a driver's start-up knows of the job.
pub struct Job<'a> {
    /// This process's rank in the job.
    pub me: u32,
    /// Ranks in the job.
    pub n: u32,
    /// The ranks of this node (this one included), in rank order: the first is the leader.
    pub local: &'a [u32],
    /// The prefix of the names of the job's shared-memory objects (unique among running jobs;
    /// the launcher removes `/dev/shm/<prefix>*` after a failure).
    pub shm_prefix: &'a str,
    /// The job spans several hosts (a network driver must listen where others reach it).
    pub multi_host: bool,
    /// The job's secret, for drivers that authenticate connections.
    pub secret: Option<[u8; 32]>,
    /// The engine's protocol version: drivers carry it when they connect (and refuse a peer
    /// of another one) without reading it.
    pub engine_version: u32,
}

/// The name of the node segment of a job whose shared-memory objects start with `prefix`.
pub fn segment_name(prefix: &str, leader: u32) -> String {
    format!("/{prefix}-{leader}")
}

/// A driver between start-up phases (see the [module documentation](self)).
#[allow(clippy::large_enum_variant)]
pub enum Starting {
    /// `self`: nothing to set up.
    Loop,
    /// `shm`: the segment (the leader's from phase 1, the others' from phase 2).
    Shm {
        /// Segment name.
        name: String,
        /// Ring sizes and modes.
        cfg: ShmConfig,
        /// The mapped segment, once created or opened.
        seg: Option<ShmSegment>,
    },
    /// `emu`: network `index` of `MADMPI_EMU`, its wire segment (as `Shm`).
    Emu {
        /// Which network of the list.
        index: usize,
        /// Its settings.
        cfg: EmuConfig,
        /// Segment name.
        name: String,
        /// The mapped segment, once created or opened.
        seg: Option<ShmSegment>,
    },
    /// `tcp`: the listener, open from phase 2; `index` among the interfaces of
    /// `MADMPI_TCP_IF` (one driver, one rail, per interface).
    Tcp {
        /// Which interface of the list.
        index: usize,
        /// The listener and its connection mode.
        t: Option<(TcpTransport, ConnectMode)>,
    },
    /// `ofi`: the endpoint, open from phase 2.
    #[cfg(madmpi_ofi)]
    Ofi(Option<OfiTransport>),
}

/// Names of the TCP drivers, one per interface of `MADMPI_TCP_IF` (a comma-separated list makes
/// several rails over several networks).
const TCP_NAMES: [&str; 4] = ["tcp", "tcp1", "tcp2", "tcp3"];

/// The interfaces `MADMPI_TCP_IF` lists (empty: none set).
fn tcp_interfaces() -> Vec<String> {
    std::env::var("MADMPI_TCP_IF")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// How many drivers of entry `name` this process runs (one, or one per TCP interface).
///
/// # Errors
///
/// More TCP interfaces than [`TCP_NAMES`] holds.
pub fn instances(name: &str) -> Result<usize> {
    if name == "emu" {
        return Ok(crate::emu::profiles_from_env()?.len());
    }
    if name != "tcp" {
        return Ok(1);
    }
    let n = tcp_interfaces().len().max(1);
    if n > TCP_NAMES.len() {
        return Err(Error::Invalid(format!(
            "MADMPI_TCP_IF lists {n} interfaces; at most {} TCP rails",
            TCP_NAMES.len()
        )));
    }
    Ok(n)
}

/// Phase 1 of instance `index` (see [`instances`]) of driver `name` (see the
/// [module documentation](self)).
///
/// # Errors
///
/// As the driver's set-up: a bad `MADMPI_*` setting, a segment that cannot be created.
pub fn start(name: &str, index: usize, job: &Job<'_>) -> Result<Starting> {
    Ok(match name {
        "self" => Starting::Loop,
        "shm" => {
            let mut cfg = ShmConfig::from_env()?;
            cfg.engine_version = job.engine_version;
            let name = segment_name(job.shm_prefix, job.local[0]);
            let seg = if job.local[0] == job.me {
                Some(ShmSegment::create(&name, job.local.len(), &cfg)?)
            } else {
                None
            };
            Starting::Shm { name, cfg, seg }
        }
        "tcp" => Starting::Tcp { index, t: None },
        "emu" => {
            let cfg = EmuConfig::from_env(index)?;
            let name = crate::emu::segment_name(&segment_name(job.shm_prefix, job.local[0]), index);
            let seg = if job.local[0] == job.me {
                Some(ShmSegment::create(
                    &name,
                    job.local.len(),
                    &cfg.shm(job.engine_version),
                )?)
            } else {
                None
            };
            Starting::Emu {
                index,
                cfg,
                name,
                seg,
            }
        }
        #[cfg(madmpi_ofi)]
        "ofi" => Starting::Ofi(None),
        #[cfg(not(madmpi_ofi))]
        "ofi" => {
            return Err(Error::Unsupported(
                "the ofi transport (this build of madmpi has no libfabric: libfabric-dev 1.17+ \
                 was not found when it was built)",
            ))
        }
        other => return Err(Error::Invalid(format!("no driver named {other}"))),
    })
}

impl Starting {
    /// The driver's name.
    pub fn name(&self) -> &'static str {
        match self {
            Starting::Loop => "self",
            Starting::Shm { .. } => "shm",
            Starting::Tcp { index, .. } => TCP_NAMES[(*index).min(TCP_NAMES.len() - 1)],
            Starting::Emu { index, .. } => {
                crate::emu::NAMES[(*index).min(crate::emu::NAMES.len() - 1)]
            }
            #[cfg(madmpi_ofi)]
            Starting::Ofi(_) => "ofi",
        }
    }

    /// Phase 2: attach, listen. Returns the address card to publish, if the driver has one.
    ///
    /// # Errors
    ///
    /// As the driver's set-up.
    pub fn open(&mut self, job: &Job<'_>) -> Result<Option<String>> {
        match self {
            Starting::Loop => Ok(None),
            Starting::Shm { name, cfg, seg } => {
                if seg.is_none() {
                    *seg = Some(ShmSegment::open(name, job.local.len(), cfg)?);
                }
                Ok(None)
            }
            Starting::Emu { name, cfg, seg, .. } => {
                if seg.is_none() {
                    *seg = Some(ShmSegment::open(
                        name,
                        job.local.len(),
                        &cfg.shm(job.engine_version),
                    )?);
                }
                Ok(None)
            }
            Starting::Tcp { index, t } => {
                let (index, multi_host) = (*index, job.multi_host);
                let ifs = tcp_interfaces();
                let mut cfg = TcpConfig::from_lookup(|k| match k {
                    // This instance's interface of the list.
                    "MADMPI_TCP_IF" => ifs
                        .get(index)
                        .cloned()
                        .or_else(|| multi_host.then(|| "auto".into())),
                    // A fixed port for the first listener only.
                    "MADMPI_TCP_PORT" if index > 0 => None,
                    _ => std::env::var(k).ok(),
                })?;
                cfg.engine_version = job.engine_version;
                let secret = job
                    .secret
                    .ok_or_else(|| Error::Invalid("tcp: no job secret".into()))?;
                let mut l = TcpTransport::listen(PeerId(job.me), job.n, secret, &cfg)?;
                l.set_name(TCP_NAMES[index.min(TCP_NAMES.len() - 1)]);
                let card = l.business_card();
                *t = Some((l, cfg.connect));
                Ok(Some(card))
            }
            #[cfg(madmpi_ofi)]
            Starting::Ofi(t) => {
                let cfg = OfiConfig::from_env()?;
                let o = OfiTransport::open(PeerId(job.me), job.n, job.engine_version, &cfg)?;
                let card = o.card();
                *t = Some(o);
                Ok(card)
            }
        }
    }

    /// Phase 3: make the driver, reaching `peers` (for a network driver; whose cards
    /// `card_of` reads).
    ///
    /// # Errors
    ///
    /// As the driver's set-up; a malformed card.
    pub fn finish(
        self,
        job: &Job<'_>,
        peers: &[u32],
        card_of: &mut dyn FnMut(u32) -> Result<String>,
    ) -> Result<Driver> {
        match self {
            Starting::Loop => Ok(Driver::Loop(LoopbackTransport::new(PeerId(job.me)))),
            Starting::Shm { name, seg, .. } => {
                let seg = seg.ok_or_else(|| Error::Invalid("shm: segment not opened".into()))?;
                if job.local[0] == job.me {
                    // Everyone has mapped it (second barrier): the name can go.
                    ShmSegment::unlink(&name)?;
                }
                let my_local =
                    job.local.iter().position(|&r| r == job.me).ok_or_else(|| {
                        Error::Invalid("shm: this rank is not on its node".into())
                    })?;
                let ranks = job.local.iter().map(|&r| PeerId(r)).collect();
                Ok(Driver::Shm(ShmTransport::new(seg, my_local, ranks)?))
            }
            Starting::Emu {
                index,
                cfg,
                name,
                seg,
            } => {
                let seg = seg.ok_or_else(|| Error::Invalid("emu: segment not opened".into()))?;
                if job.local[0] == job.me {
                    ShmSegment::unlink(&name)?;
                }
                let my_local =
                    job.local.iter().position(|&r| r == job.me).ok_or_else(|| {
                        Error::Invalid("emu: this rank is not on its node".into())
                    })?;
                let ranks = job.local.iter().map(|&r| PeerId(r)).collect();
                Ok(Driver::Emu(EmuTransport::new(
                    seg, my_local, ranks, &cfg, index,
                )?))
            }
            Starting::Tcp { t, .. } => {
                let (mut t, mode) =
                    t.ok_or_else(|| Error::Invalid("tcp: listener not opened".into()))?;
                for &p in peers {
                    let card = card_of(p)?;
                    t.connect(PeerId(p), &card)?;
                }
                if mode == ConnectMode::Eager {
                    t.connect_all()?;
                }
                Ok(Driver::Tcp(t))
            }
            #[cfg(madmpi_ofi)]
            Starting::Ofi(t) => {
                let mut t = t.ok_or_else(|| Error::Invalid("ofi: endpoint not opened".into()))?;
                for &p in peers {
                    let card = card_of(p)?;
                    t.connect(PeerId(p), &card)?;
                }
                Ok(Driver::Ofi(t))
            }
        }
    }
}

/// Every driver, dispatched by `match` (no virtual call on the send fast path).
#[allow(clippy::large_enum_variant)]
pub enum Driver {
    /// `self`.
    Loop(LoopbackTransport),
    /// `shm`.
    Shm(ShmTransport),
    /// `tcp`.
    Tcp(TcpTransport),
    /// `emu`.
    Emu(EmuTransport),
    /// `tcp` to the peers of one intercommunicator outside the world (dynamic processes).
    Dyn(crate::tcp::DynTcp),
    /// `ofi` (libfabric).
    #[cfg(madmpi_ofi)]
    Ofi(OfiTransport),
}

macro_rules! each {
    ($d:expr, $t:ident => $e:expr) => {
        match $d {
            Driver::Loop($t) => $e,
            Driver::Shm($t) => $e,
            Driver::Tcp($t) => $e,
            Driver::Emu($t) => $e,
            Driver::Dyn($t) => $e,
            #[cfg(madmpi_ofi)]
            Driver::Ofi($t) => $e,
        }
    };
}

impl Driver {
    /// Poll for packets into `sink`, statically dispatched: drivers that can write the rest
    /// of a large packet where the sink says ([`Transport::poll_recv_split`]) do, the others
    /// deliver whole packets.
    #[inline]
    pub fn poll_into<S: RecvSink>(&mut self, split: SplitParams, sink: &mut S) -> Result<usize> {
        match self {
            Driver::Tcp(t) => t.poll_recv_split(split, sink),
            Driver::Loop(t) => t.poll_recv(&mut |p, b| sink.deliver(p, b)),
            Driver::Shm(t) => t.poll_recv(&mut |p, b| sink.deliver(p, b)),
            Driver::Emu(t) => t.poll_recv(&mut |p, b| sink.deliver(p, b)),
            Driver::Dyn(t) => t.poll_recv_split(split, sink),
            #[cfg(madmpi_ofi)]
            Driver::Ofi(t) => t.poll_recv(&mut |p, b| sink.deliver(p, b)),
        }
    }

    /// The name of the node's shared segment, for a driver that maps one (the node-wide
    /// collectives live beside it).
    pub fn segment_name(&self) -> Option<&str> {
        match self {
            Driver::Shm(s) => Some(s.segment().name()),
            _ => None,
        }
    }
}

impl Transport for Driver {
    #[inline]
    fn caps(&self) -> &Caps {
        each!(self, t => t.caps())
    }

    #[inline]
    fn try_send(&mut self, peer: PeerId, iov: &[IoSlice<'_>]) -> Result<SendOutcome> {
        each!(self, t => t.try_send(peer, iov))
    }

    #[inline(always)]
    fn try_send2(&mut self, peer: PeerId, head: &[u8], body: &[u8]) -> Result<SendOutcome> {
        each!(self, t => t.try_send2(peer, head, body))
    }

    #[inline(always)]
    fn may_have_input(&self) -> bool {
        each!(self, t => t.may_have_input())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        each!(self, t => t.counters())
    }

    fn poll_recv(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize> {
        each!(self, t => t.poll_recv(deliver))
    }

    #[inline]
    fn poll_recv_split(&mut self, split: SplitParams, sink: &mut dyn RecvSink) -> Result<usize> {
        each!(self, t => t.poll_recv_split(split, sink))
    }

    #[inline]
    fn poll_lost(&mut self) -> Option<PeerId> {
        each!(self, t => t.poll_lost())
    }

    fn check_peers(&mut self) -> Vec<PeerId> {
        each!(self, t => t.check_peers())
    }

    fn get(
        &mut self,
        peer: PeerId,
        remote: RemoteRegion,
        local: &mut [IoSliceMut<'_>],
    ) -> Result<()> {
        each!(self, t => t.get(peer, remote, local))
    }

    fn reaches(&self, peer: PeerId) -> bool {
        each!(self, t => t.reaches(peer))
    }

    fn card(&self) -> Option<String> {
        each!(self, t => t.card())
    }

    fn connect(&mut self, peer: PeerId, card: &str) -> Result<()> {
        each!(self, t => t.connect(peer, card))
    }

    fn register(&mut self, ptr: *const u8, len: usize) -> Result<u64> {
        each!(self, t => t.register(ptr, len))
    }

    fn deregister(&mut self, key: u64) {
        each!(self, t => t.deregister(key))
    }

    fn register_window(&mut self, ptr: *mut u8, len: usize) -> Result<u64> {
        each!(self, t => t.register_window(ptr, len))
    }

    unsafe fn rma_post(
        &mut self,
        peer: PeerId,
        write: bool,
        remote: RemoteRegion,
        local: *mut u8,
        len: usize,
        token: u64,
    ) -> Result<()> {
        // SAFETY: forwarded.
        each!(self, t => unsafe { t.rma_post(peer, write, remote, local, len, token) })
    }

    fn rma_poll(&mut self, done: &mut dyn FnMut(u64, Option<String>)) -> Result<()> {
        each!(self, t => t.rma_poll(done))
    }

    fn rma_min(&self) -> usize {
        each!(self, t => t.rma_min())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_checked_against_the_registry() {
        assert_eq!(parse_list("V", "tcp, shm,tcp").unwrap(), vec!["shm", "tcp"]);
        assert_eq!(parse_list("V", "").unwrap(), Vec::<&str>::new());
        let e = parse_list("MADMPI_TRANSPORTS", "shm,ib")
            .unwrap_err()
            .to_string();
        assert!(e.contains("MADMPI_TRANSPORTS=shm,ib"), "{e}");
        assert!(
            e.contains("'ib'") && e.contains("self, shm, ofi, tcp, emu"),
            "{e}"
        );
    }

    #[test]
    fn every_entry_starts() {
        for e in ENTRIES {
            let job = Job {
                me: 0,
                n: 1,
                local: &[0],
                shm_prefix: "madmpi-registry-test",
                multi_host: false,
                secret: Some([7; 32]),
                engine_version: 1,
            };
            if e.name == "shm" {
                continue; // needs a second process: tests/shm_processes.rs
            }
            if e.name == "ofi" && !cfg!(madmpi_ofi) {
                let err = start(e.name, 0, &job).err().expect("ofi is not built");
                assert!(err.to_string().contains("no libfabric"), "{err}");
                eprintln!("ofi not built (no libfabric), its start-up not tested: {err}");
                continue;
            }
            let mut s = start(e.name, 0, &job).unwrap();
            let card = s.open(&job).unwrap();
            assert_eq!(card.is_some(), e.scope == Scope::Any, "{}", e.name);
            let d = s.finish(&job, &[], &mut |_| unreachable!()).unwrap();
            assert_eq!(d.caps().name, e.name);
        }
    }
}
