//! The `emu` driver: an emulated cluster NIC (Myrinet BIP/GM/MX, SCI, VIA, Quadrics Elan,
//! BCL-3) between the processes of one host. Data moves through a shared-memory segment of its
//! own (the `shm` driver's rings, used as the wire); timing follows the chosen network's model
//! in real time (see [`profile`]), and each network's protocol runs for real (see [`nic`]):
//! transmission modules chosen by size, credits, receiver handshakes, registration, and for
//! BCL-3 a reliable link over injected drops and bit flips.
//!
//! Selection: `MADMPI_TRANSPORTS=emu`, `MADMPI_EMU=bip` (a list, `bip,sisci`, starts one driver
//! per network: several rails to each peer). `MADMPI_EMU_LOSS` (reliable profiles only),
//! `MADMPI_EMU_SCI_DMA`, `MADMPI_EMU_OFF`, `MADMPI_EMU_REGCACHE`, `MADMPI_EMU_RING_BYTES`,
//! `MADMPI_EMU_SEED`, `MADMPI_EMU_STATS` (each NIC's counters on stderr at the end): see
//! `docs/networks.md`.
//!
//! With a reliable profile, a thread plays the NIC's firmware while the host does not poll
//! (in `MPI_Finalize`'s barrier, say): it acknowledges, and resends what timed out, as
//! BCL-3's Myrinet control program does on the card. It only looks every 200 µs (a sleep is
//! fine there: the timeout is ms), and does nothing while the host polls.

use std::io::{IoSlice, IoSliceMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

pub mod clock;
pub mod frame;
mod nic;
pub mod profile;
#[cfg(test)]
mod tests;

pub use nic::NicConfig;
pub use profile::{Module, Profile, PROFILES};

use crate::shm::{ShmConfig, ShmSegment, ShmTransport};
use crate::{Caps, Error, PeerId, RemoteRegion, Result, SendOutcome, Transport};
use nic::Nic;

/// The emulated host's memory copy, ps per byte (the slowest host of the NICs this process
/// opened: [`profile::Host::copy_ps`]); 0 while none is open.
static HOST_COPY_PS: AtomicU64 = AtomicU64::new(0);

/// Run `copy`, which copies `n` bytes for the network (packing a non-contiguous send,
/// `MPI_Pack`, `MPI_Unpack`), and when an emulated NIC is open make it take at least what
/// that copy took on the paper's host (busy-waited on the monotonic clock, as the network's
/// times are): today's copy is far faster, and the papers' results (seed 003's indexed
/// datatype, packed by MPICH) depend on what it cost then. Costs one atomic load otherwise.
pub fn charge_host_copy<R>(n: usize, copy: impl FnOnce() -> R) -> R {
    let ps = HOST_COPY_PS.load(Ordering::Relaxed);
    if ps == 0 {
        return copy();
    }
    let t0 = clock::now_ns();
    let r = copy();
    clock::spin_until(t0 + n as u64 * ps / 1000);
    r
}

/// Names of the emulated drivers, one per network of `MADMPI_EMU`.
pub const NAMES: [&str; 4] = ["emu", "emu1", "emu2", "emu3"];

/// Ring bytes of the wire's segment by default (the largest packet is a quarter).
const DEFAULT_RING: usize = 1 << 20;

/// Counters of one emulated NIC (what the protocol did).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Data packets sent per module.
    pub sent: [u64; 8],
    /// `try_send` refused: the NIC was still busy with the previous packet.
    pub nic_busy: u64,
    /// `try_send` refused: no credit left (static receive buffers all in use).
    pub credit_stalls: u64,
    /// `try_send` refused: reliable window full.
    pub window_stalls: u64,
    /// Requests to send (receiver handshakes).
    pub handshakes: u64,
    /// Registrations paid / avoided by the cache.
    pub reg_misses: u64,
    /// See `reg_misses`.
    pub reg_hits: u64,
    /// Frames the fault injector dropped / corrupted.
    pub dropped: u64,
    /// See `dropped`.
    pub flipped: u64,
    /// Frames taken off the wire's ring.
    pub frames_in: u64,
    /// CRC checks made on received frames (reliable profiles: one per frame taken off the
    /// ring, however many polls it waits for its visibility time).
    pub crc_checks: u64,
    /// Frames that failed their CRC.
    pub crc_errors: u64,
    /// Frames after a gap, dropped and asked for again.
    pub out_of_order: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
    /// NAKs sent.
    pub naks: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Frames sent again.
    pub retransmitted: u64,
}

/// Settings of one emulated driver, from the environment.
#[derive(Clone, Debug)]
pub struct EmuConfig {
    /// The NIC's knobs.
    pub nic: NicConfig,
    /// Bytes per ring of the wire.
    pub ring_bytes: usize,
}

/// The networks `MADMPI_EMU` lists (default `bip`).
///
/// # Errors
///
/// An unknown profile, or more than [`NAMES`] networks.
pub fn profiles_from_env() -> Result<Vec<&'static Profile>> {
    profiles_from(&|k| std::env::var(k).ok())
}

fn profiles_from(get: &dyn Fn(&str) -> Option<String>) -> Result<Vec<&'static Profile>> {
    let v = get("MADMPI_EMU").unwrap_or_default();
    let names: Vec<&str> = v
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let names = if names.is_empty() { vec!["bip"] } else { names };
    if names.len() > NAMES.len() {
        return Err(Error::Invalid(format!(
            "MADMPI_EMU={v}: at most {} emulated networks",
            NAMES.len()
        )));
    }
    names.into_iter().map(profile::find).collect()
}

impl EmuConfig {
    /// The settings of instance `index` (its network is the `index`-th of `MADMPI_EMU`).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] naming the variable: unknown profile, bad number, loss on a profile
    /// without a reliable protocol.
    pub fn from_env(index: usize) -> Result<EmuConfig> {
        EmuConfig::from_env_with(index, |k| std::env::var(k).ok())
    }

    /// [`from_env`](Self::from_env) reading the variables through `lookup`.
    ///
    /// # Errors
    ///
    /// As [`from_env`](Self::from_env).
    pub fn from_env_with(
        index: usize,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<EmuConfig> {
        let get = |k: &str| lookup(k).filter(|s| !s.trim().is_empty());
        let profiles = profiles_from(&get)?;
        let profile = *profiles
            .get(index)
            .ok_or_else(|| Error::Invalid(format!("emu: no network {index} in MADMPI_EMU")))?;
        let loss = match get("MADMPI_EMU_LOSS") {
            None => 0.0,
            Some(s) => match s.trim().parse::<f64>() {
                Ok(x) if (0.0..=0.1).contains(&x) => x,
                _ => {
                    return Err(Error::Invalid(format!(
                        "MADMPI_EMU_LOSS={s}: a probability between 0 and 0.1"
                    )))
                }
            },
        };
        if loss > 0.0 && !profile.reliable {
            return Err(Error::Invalid(format!(
                "MADMPI_EMU_LOSS={loss}: the {} network has no retransmission; only {} \
                 run over a lossy link",
                profile.name,
                PROFILES
                    .iter()
                    .filter(|p| p.reliable)
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let num = |k: &str, default: u64| -> Result<u64> {
            match get(k) {
                None => Ok(default),
                Some(s) => s
                    .trim()
                    .parse()
                    .map_err(|_| Error::Invalid(format!("{k}={s}: not a number"))),
            }
        };
        let mut modules = profile.default_modules();
        if num("MADMPI_EMU_SCI_DMA", 0)? != 0 {
            modules |= (1 << profile.modules.len()) - 1;
        }
        for off in get("MADMPI_EMU_OFF").unwrap_or_default().split(',') {
            let off = off.trim();
            if off.is_empty() {
                continue;
            }
            // A name of another network of the list is for that one.
            if PROFILES
                .iter()
                .any(|p| p.modules.iter().any(|m| m.name == off))
            {
                if let Some(k) = profile.modules.iter().position(|m| m.name == off) {
                    modules &= !(1 << k);
                }
                continue;
            }
            let known: Vec<&str> = PROFILES
                .iter()
                .flat_map(|p| p.modules.iter().map(|m| m.name))
                .collect();
            return Err(Error::Invalid(format!(
                "MADMPI_EMU_OFF: unknown module '{off}' (known: {})",
                known.join(", ")
            )));
        }
        if !profile
            .modules
            .iter()
            .enumerate()
            .any(|(k, m)| m.upto == usize::MAX && modules & (1 << k) != 0)
        {
            return Err(Error::Invalid(format!(
                "MADMPI_EMU_OFF: no module of {} is left for large packets",
                profile.name
            )));
        }
        let reg_cache = num("MADMPI_EMU_REGCACHE", profile.reg_cache as u64)? as usize;
        let ring_bytes = num("MADMPI_EMU_RING_BYTES", DEFAULT_RING as u64)? as usize;
        let seed = num(
            "MADMPI_EMU_SEED",
            clock::now_ns() ^ ((std::process::id() as u64) << 32),
        )?;
        Ok(EmuConfig {
            nic: NicConfig {
                profile,
                loss,
                modules,
                reg_cache,
                seed: seed ^ index as u64,
            },
            ring_bytes,
        })
    }

    /// The configuration of the wire's segment.
    pub fn shm(&self, engine_version: u32) -> ShmConfig {
        ShmConfig {
            ring_bytes: self.ring_bytes,
            cma: false,
            split_min: 0,
            engine_version,
            ..ShmConfig::default()
        }
    }
}

/// The name of instance `index`'s wire segment for a node whose segment is `node_segment`.
pub fn segment_name(node_segment: &str, index: usize) -> String {
    format!("{node_segment}-emu{index}")
}

/// The emulated driver of one process. See the [module documentation](self).
pub struct EmuTransport {
    caps: Caps,
    nic: Arc<Mutex<Nic>>,
    firmware: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

fn lock(nic: &Mutex<Nic>) -> MutexGuard<'_, Nic> {
    nic.lock().unwrap_or_else(|e| e.into_inner())
}

impl EmuTransport {
    /// The driver of local process `my_local` of the wire segment `seg`, where
    /// `local_peers[i]` is the world rank of local index `i`; instance `index` (its name).
    ///
    /// # Errors
    ///
    /// As [`ShmTransport::new`].
    pub fn new(
        seg: ShmSegment,
        my_local: usize,
        local_peers: Vec<PeerId>,
        cfg: &EmuConfig,
        index: usize,
    ) -> Result<EmuTransport> {
        let me = *local_peers
            .get(my_local)
            .ok_or_else(|| Error::Invalid("emu: local index out of range".into()))?;
        let wire = ShmTransport::new(seg, my_local, local_peers.clone())?;
        let inner = wire.caps().clone();
        let nic = Nic::new(cfg.nic.clone(), wire, &local_peers, me);
        let p = cfg.nic.profile;
        HOST_COPY_PS.fetch_max(p.host.copy_ps, Ordering::Relaxed);
        let (latency_ns, bandwidth_mbps) = p.nominal();
        let max_packet = nic.max_packet();
        let caps = Caps {
            name: NAMES[index.min(NAMES.len() - 1)],
            latency_ns,
            bandwidth_mbps,
            max_packet,
            eager_threshold: p.eager.min(max_packet / 2),
            max_iov: inner.max_iov - 1,
            can_get: false,
            preference: 20,
            aggreg_max: max_packet.min(16 << 10),
            solo_min: 2 << 10,
            pack_count: u32::MAX,
            registers_memory: false,
        };
        let reliable = nic.reliable();
        let rto = nic.rto();
        let nic = Arc::new(Mutex::new(nic));
        let firmware = if reliable {
            let stop = Arc::new(AtomicBool::new(false));
            let (s, n) = (stop.clone(), nic.clone());
            let h = std::thread::Builder::new()
                .name(format!("madmpi-{}-nic", caps.name))
                .spawn(move || firmware(&n, &s, rto))
                .map_err(|e| Error::Io {
                    what: "emu: starting the NIC firmware thread".into(),
                    source: e,
                })?;
            Some((stop, h))
        } else {
            None
        };
        Ok(EmuTransport {
            caps,
            nic,
            firmware,
        })
    }

    /// The profile's name and what the protocol did so far.
    pub fn stats(&self) -> Stats {
        lock(&self.nic).stats.clone()
    }

    /// Nothing in flight in either direction (tests: the link has settled).
    pub fn idle(&self) -> bool {
        lock(&self.nic).idle(clock::now_ns())
    }

    /// Run the NIC's work once without taking packets (tests).
    pub fn service(&self) -> Result<()> {
        lock(&self.nic).service(clock::now_ns())
    }
}

/// The firmware thread: while the host has not serviced the NIC for a quarter of the
/// retransmission timeout, do it (acknowledge, resend); stop when asked.
fn firmware(nic: &Mutex<Nic>, stop: &AtomicBool, rto: u64) {
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(std::time::Duration::from_micros(200));
        let mut n = lock(nic);
        let now = clock::now_ns();
        if now >= n.last_service + rto / 4 {
            if let Err(e) = n.service(now) {
                n.deferred.get_or_insert(e);
            }
        }
    }
}

impl Drop for EmuTransport {
    fn drop(&mut self) {
        if let Some((stop, h)) = self.firmware.take() {
            stop.store(true, Ordering::Release);
            let _ = h.join();
        }
        if std::env::var_os("MADMPI_EMU_STATS").is_some_and(|v| !v.is_empty() && v != "0") {
            let n = lock(&self.nic);
            eprintln!(
                "madmpi emu {} ({}) pid {}: {:?}",
                self.caps.name,
                n.profile_name(),
                std::process::id(),
                n.stats
            );
        }
    }
}

impl Transport for EmuTransport {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn try_send(&mut self, peer: PeerId, iov: &[IoSlice<'_>]) -> Result<SendOutcome> {
        lock(&self.nic).try_send(peer, iov)
    }

    fn poll_recv(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize> {
        lock(&self.nic).poll(deliver)
    }

    fn poll_lost(&mut self) -> Option<PeerId> {
        lock(&self.nic).wire().poll_lost()
    }

    fn get(
        &mut self,
        _peer: PeerId,
        _remote: RemoteRegion,
        _local: &mut [IoSliceMut<'_>],
    ) -> Result<()> {
        Err(Error::Unsupported("get over an emulated network"))
    }

    fn reaches(&self, peer: PeerId) -> bool {
        lock(&self.nic).reaches(peer)
    }
}
