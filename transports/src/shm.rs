//! The `shm` driver: one shared segment per node, a lock-free byte ring per ordered pair of
//! local processes, and single-copy large transfers through cross-memory attach.
//!
//! # Setup
//!
//! The engine drives setup around its own barriers (this crate knows nothing of PMI):
//!
//! 1. the node leader calls [`ShmSegment::create`];
//! 2. barrier; every other local process calls [`ShmSegment::open`];
//! 3. every process calls [`ShmTransport::new`] (which publishes its pid);
//! 4. barrier; the leader calls [`ShmSegment::unlink`], so nothing is left in `/dev/shm` even if
//!    the job crashes later (the mappings stay valid after the name is gone).
//!
//! # Segment layout
//!
//! ```text
//! offset 0        header (128 B): magic, version, nlocal, ring size, total size, flags
//! 128             nlocal process slots (256 B each):
//!                   line 0: doorbell (u64, bumped by every producer writing to this process,
//!                           when the header's doorbell flag is set)
//!                   line 1: pid (i32), state (u32: 0 free, 1 attached, 2 closed)
//! ...             nlocal*(nlocal-1) ring controls (384 B each):
//!                   line 0: head (u64, written by the consumer only)
//!                   line 1: tail (u64, written by the producer only)
//!                   line 2: split board of the ring's direction (see "Split copies")
//! page aligned    nlocal*(nlocal-1) ring data areas of `ring_bytes` (a power of two)
//! ```
//!
//! Ring `(src → dst)` has index `src * (nlocal - 1) + (dst if dst < src else dst - 1)`. Lines
//! are 128 bytes so that the adjacent-line prefetcher does not make producer and consumer fight
//! over a pair of lines.
//!
//! # Ring records
//!
//! `head` and `tail` are free-running byte counters (never reduced modulo the size; the position
//! is `counter & (size - 1)`). A record is an 8-byte header word, `READY (bit 63) | length`,
//! followed by the payload padded to 8 bytes. A record never wraps: when it does not fit before
//! the end of the data area the producer writes a skip marker (`u64::MAX`) and starts the record
//! at offset 0.
//!
//! The producer writes the payload, clears the word just after the record (the next header, so
//! that it reads 0, "nothing yet"), stores the header with Release (the skip marker last, when
//! there is one), then publishes `tail` with Release. The consumer polls the header word at its
//! `head` with Acquire rather than `tail`: the signal then travels in the same cache line as a
//! small payload, one line transfer per message instead of two (on this machine a line transfer
//! is ~150 ns, so this halves small-message latency). It hands the payload to the engine
//! straight from the ring, and only then publishes `head` with Release; the producer reads
//! `head` only when its cached copy says the ring is full. A ring holds at most
//! `ring_bytes - 8` bytes of records (the word after the last record is always free).
//!
//! Every header a peer wrote is validated before use, so a corrupt ring is an
//! [`Error::Malformed`], never an access outside the ring.
//!
//! # Split copies
//!
//! A large transfer from `src` to `dst` can be copied by both processes at once: `dst` reads
//! chunks of it with `process_vm_readv` while `src` writes others with `process_vm_writev`.
//! One core's copy does not saturate the memory system, so two copying halves finish in about
//! half the time (measured here: 1 MiB in ~23 µs instead of ~55 µs). Line 2 of the control
//! block of ring `(src → dst)` is the board of these transfers, one at a time; only `dst` opens
//! it ([`ShmTransport::split_open`]), tells `src` by a packet of its own, then both claim
//! chunks ([`ShmTransport::split_get`], [`ShmTransport::split_put`]):
//!
//! - `claim` = `generation << 32 | next chunk`. Opening bumps the generation; a chunk is taken
//!   by a compare-and-swap that also checks the generation, so a helper that arrives after the
//!   transfer is over (or for an older one) takes nothing.
//! - `done` counts the chunks the helper has finished (Release after its copy: the owner that
//!   reads the count with Acquire sees the bytes). The owner returns only when every chunk it
//!   did not copy itself is counted, so the board is never reopened under a helper's copy.
//! - `orphan` = `generation << 32 | chunk + 1` when the helper could not write a chunk it
//!   claimed (its writes refused): it still counts it as done, and the owner copies it.
//!
//! The helper never waits for anything, and the owner waits only for chunks already claimed:
//! two processes each owning a transfer from the other cannot deadlock.
//!
//! # For the engine
//!
//! - The slice given to the `poll_recv` callback points into the ring, i.e. into memory shared
//!   with the sender: it is valid only during the call, and the ring space is not reused until
//!   the callback returns, so copy out what must outlive it (or consume it in place). A slow
//!   callback holds back the sender once the ring is full.
//! - `poll_recv` cannot be re-entered: the callback has no access to the driver (it is
//!   borrowed mutably). Packets to send in reaction (CTS, acknowledgements) must be queued and
//!   sent after `poll_recv` returns. A packet is consumed before the callback runs: if the
//!   callback panics, that packet is lost, never delivered twice.
//! - A packet is visible only once complete: a sender that dies while writing leaves nothing.
//! - Local processes are trusted not to scribble on the segment while it is in use; what they
//!   could do is make this process see malformed packets (`Error::Malformed`), not read or
//!   write outside the segment.
//! - `try_send` reports [`Error::PeerLost`] when the receiver has closed its driver and its ring
//!   is full, or when the ring has stayed full for a second and its pid no longer exists.
//! - The default [`ShmConfig`] ignores the environment; use [`ShmConfig::from_env`].
//!
//! # What this module must never do
//!
//! Block, allocate or make a system call on the `try_send`/`poll_recv` path (except the cheap
//! liveness probe when a ring has stayed full for a long time), or know anything of MPI.

#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::CString;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::size_of;
use std::os::fd::AsFd;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::sys::{self, Mmap, IOV_MAX};
use crate::{Caps, Error, PeerId, RemoteRegion, Result, SendOutcome, Transport};

#[cfg(test)]
mod fuzz;
mod split;
pub use split::{take_chunk, SplitCopy, SplitJob, MAX_SPLIT_CHUNKS};

/// "MADMPISH" read as a little-endian `u64`.
const MAGIC: u64 = u64::from_le_bytes(*b"MADMPISH");
/// Bumped whenever the layout changes, or what the packets mean (3: a rendezvous RTS may carry
/// the start of its message).
const VERSION: u32 = 3;
/// Alignment of everything shared by two writers' caches (two x86 cache lines).
const LINE: usize = 128;
const PAGE: usize = 4096;
/// Size of a record header.
const REC_HDR: usize = 8;
/// Record header meaning "nothing more before the end of the data area".
const SKIP: u64 = u64::MAX;
/// Set in every record header, so that a header is never 0 (0 means "no record yet").
const READY: u64 = 1 << 63;

const STATE_FREE: u32 = 0;
const STATE_ATTACHED: u32 = 1;
const STATE_CLOSED: u32 = 2;

/// Header flag: producers ring the receiver's doorbell, and receivers check it first.
const FLAG_DOORBELL: u32 = 1;

/// Smallest and largest ring sizes accepted.
const MIN_RING: usize = 4096;
const MAX_RING: usize = 1 << 30;
/// Most local processes per segment.
const MAX_LOCAL: usize = 4096;

/// How long a ring may stay full before the producer checks that the consumer still lives.
const PEER_CHECK_AFTER: Duration = Duration::from_secs(1);

/// Defaults of [`ShmConfig`].
const DEFAULT_RING_BYTES: usize = 256 << 10;
const DEFAULT_EAGER: usize = 16 << 10;
const DEFAULT_SPLIT_MIN: usize = 128 << 10;

/// One value padded to its own pair of cache lines.
#[repr(C, align(128))]
struct Padded<T>(T);

#[repr(C, align(128))]
struct SegHeader {
    magic: AtomicU64,
    version: u32,
    nlocal: u32,
    ring_bytes: u64,
    total_bytes: u64,
    flags: u32,
    _reserved: u32,
}

#[repr(C)]
struct ProcSlot {
    doorbell: Padded<AtomicU64>,
    ident: Padded<ProcIdent>,
}

#[repr(C)]
struct ProcIdent {
    pid: AtomicI32,
    state: AtomicU32,
}

#[repr(C)]
struct RingCtrl {
    head: Padded<AtomicU64>,
    tail: Padded<AtomicU64>,
    split: Padded<SplitBoard>,
}

/// The board of split copies in one direction (see "Split copies" in the module docs).
#[repr(C)]
struct SplitBoard {
    claim: AtomicU64,
    done: AtomicU64,
    orphan: AtomicU64,
}

const _: () = {
    assert!(size_of::<SegHeader>() == LINE);
    assert!(size_of::<ProcSlot>() == 2 * LINE);
    assert!(size_of::<RingCtrl>() == 3 * LINE);
};

/// Configuration of the `shm` driver. Every process of a node must use the same sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShmConfig {
    /// Bytes of each per-pair ring; a power of two between 4 KiB and 1 GiB
    /// (`MADMPI_SHM_RING_BYTES`, default 256 KiB). The largest packet is a quarter of it.
    pub ring_bytes: usize,
    /// Eager threshold announced in [`Caps`] (`MADMPI_SHM_EAGER`, default 16 KiB), capped at
    /// half the largest packet.
    pub eager_threshold: usize,
    /// Offer single-copy `get` through `process_vm_readv` (`MADMPI_SHM_CMA`, default on).
    pub cma: bool,
    /// Transfers of at least this many bytes are copied by both processes at once (see
    /// "Split copies"; `MADMPI_SHM_SPLIT_MIN`, default 128 KiB, `0` never). Needs `cma`.
    pub split_min: usize,
    /// Whether producers ring a per-receiver doorbell so that an idle poll costs one load
    /// whatever the number of peers (`MADMPI_SHM_DOORBELL` = `0`/`1`/`auto`; default `None`,
    /// i.e. auto: on from [`ShmConfig::DOORBELL_AUTO_MIN_LOCAL`] local processes). Decided by
    /// the leader at [`ShmSegment::create`]; the others follow the segment.
    pub doorbell: Option<bool>,
}

impl Default for ShmConfig {
    fn default() -> ShmConfig {
        ShmConfig {
            ring_bytes: DEFAULT_RING_BYTES,
            eager_threshold: DEFAULT_EAGER,
            cma: true,
            split_min: DEFAULT_SPLIT_MIN,
            doorbell: None,
        }
    }
}

impl ShmConfig {
    /// With the automatic choice, the doorbell is used from this many local processes on.
    pub const DOORBELL_AUTO_MIN_LOCAL: usize = 32;

    /// The defaults, overridden by the `MADMPI_SHM_*` environment variables.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] naming the variable when a value does not parse or is out of range.
    pub fn from_env() -> Result<ShmConfig> {
        ShmConfig::from_lookup(|k| std::env::var(k).ok())
    }

    fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<ShmConfig> {
        let mut cfg = ShmConfig::default();
        if let Some(v) = get("MADMPI_SHM_RING_BYTES") {
            cfg.ring_bytes = parse_size("MADMPI_SHM_RING_BYTES", &v)?;
        }
        if let Some(v) = get("MADMPI_SHM_EAGER") {
            cfg.eager_threshold = parse_size("MADMPI_SHM_EAGER", &v)?;
        }
        if let Some(v) = get("MADMPI_SHM_CMA") {
            cfg.cma = parse_bool("MADMPI_SHM_CMA", &v)?;
        }
        if let Some(v) = get("MADMPI_SHM_SPLIT_MIN") {
            cfg.split_min = parse_size("MADMPI_SHM_SPLIT_MIN", &v)?;
        }
        if let Some(v) = get("MADMPI_SHM_DOORBELL") {
            cfg.doorbell = match v.trim() {
                "auto" | "" => None,
                other => Some(parse_bool("MADMPI_SHM_DOORBELL", other)?),
            };
        }
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<()> {
        let r = self.ring_bytes;
        if !r.is_power_of_two() || !(MIN_RING..=MAX_RING).contains(&r) {
            return Err(Error::Invalid(format!(
                "shm ring size {r} must be a power of two between {MIN_RING} and {MAX_RING}"
            )));
        }
        Ok(())
    }

    fn max_packet(&self) -> usize {
        self.ring_bytes / 4
    }
}

fn parse_size(var: &str, v: &str) -> Result<usize> {
    let t = v.trim();
    let (digits, mult) = match t.as_bytes().last() {
        Some(b'k' | b'K') => (&t[..t.len() - 1], 1usize << 10),
        Some(b'm' | b'M') => (&t[..t.len() - 1], 1 << 20),
        Some(b'g' | b'G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| Error::Invalid(format!("{var}={v:?}: expected a size like 262144 or 256K")))
}

fn parse_bool(var: &str, v: &str) -> Result<bool> {
    match v.trim() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(Error::Invalid(format!("{var}={v:?}: expected 0 or 1"))),
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// Where everything lives in a segment of `nlocal` processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    nlocal: usize,
    ring_bytes: usize,
    slots_off: usize,
    ctrl_off: usize,
    data_off: usize,
    total: usize,
}

impl Layout {
    fn new(nlocal: usize, ring_bytes: usize) -> Result<Layout> {
        if nlocal == 0 || nlocal > MAX_LOCAL {
            return Err(Error::Invalid(format!(
                "shm: {nlocal} local processes (1 to {MAX_LOCAL} supported)"
            )));
        }
        let nrings = nlocal * (nlocal - 1);
        let slots_off = size_of::<SegHeader>();
        let ctrl_off = slots_off + nlocal * size_of::<ProcSlot>();
        let data_off = (ctrl_off + nrings * size_of::<RingCtrl>()).next_multiple_of(PAGE);
        let total = nrings
            .checked_mul(ring_bytes)
            .and_then(|d| d.checked_add(data_off))
            .filter(|&t| i64::try_from(t).is_ok())
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "shm: {nlocal} processes with {ring_bytes}-byte rings do not fit in memory"
                ))
            })?;
        Ok(Layout {
            nlocal,
            ring_bytes,
            slots_off,
            ctrl_off,
            data_off,
            total,
        })
    }

    #[inline]
    fn ring_index(&self, src: usize, dst: usize) -> usize {
        debug_assert!(src != dst && src < self.nlocal && dst < self.nlocal);
        src * (self.nlocal - 1) + if dst < src { dst } else { dst - 1 }
    }
}

pub(crate) fn c_name(name: &str) -> Result<CString> {
    let ok = name.len() >= 2
        && name.len() <= 255
        && name.starts_with('/')
        && !name[1..].contains('/')
        && !name.contains('\0');
    if !ok {
        return Err(Error::Invalid(format!(
            "shm segment name {name:?}: expected \"/name\" (one leading slash, at most 255 bytes)"
        )));
    }
    CString::new(name).map_err(|_| Error::Invalid(format!("shm segment name {name:?}")))
}

/// Create the POSIX shared-memory object `name` exclusively, reserve `total` bytes of backing
/// memory (so a full `/dev/shm` is an error now, not a `SIGBUS` later) and map it. On error the
/// name is removed again: nothing is left behind.
pub(crate) fn create_mapping(name: &str, total: usize) -> Result<Mmap> {
    let cname = c_name(name)?;
    let fd = sys::shm_open(&cname, libc::O_CREAT | libc::O_EXCL | libc::O_RDWR, 0o600)
        .map_err(io_err(format!("shm_open({name}, O_CREAT|O_EXCL)")))?;
    let unlink_on_error = |e: Error| {
        let _ = sys::shm_unlink(&cname);
        e
    };
    let len = total as u64;
    sys::ftruncate(fd.as_fd(), len)
        .map_err(io_err(format!("ftruncate({name}, {len})")))
        .map_err(unlink_on_error)?;
    sys::fallocate(fd.as_fd(), len)
        .map_err(io_err(format!(
            "reserving {len} bytes of shared memory for {name}"
        )))
        .map_err(unlink_on_error)?;
    Mmap::shared(fd.as_fd(), total)
        .map_err(io_err(format!("mmap({name}, {len})")))
        .map_err(unlink_on_error)
}

/// Open the existing shared-memory object `name` (`hint` added to the error when it does not
/// exist) and map all of it, after `check` accepted its size in bytes.
pub(crate) fn open_mapping(
    name: &str,
    hint: &str,
    check: impl FnOnce(u64) -> Result<()>,
) -> Result<Mmap> {
    let cname = c_name(name)?;
    let fd = sys::shm_open(&cname, libc::O_RDWR, 0)
        .map_err(io_err(format!("shm_open({name}){hint}")))?;
    let size = sys::file_size(fd.as_fd()).map_err(io_err(format!("fstat({name})")))?;
    check(size)?;
    let len = usize::try_from(size)
        .map_err(|_| Error::Invalid(format!("shm segment {name}: size {size}")))?;
    Mmap::shared(fd.as_fd(), len).map_err(io_err(format!("mmap({name}, {size})")))
}

/// A node's shared segment, mapped in this process. Dropping it unmaps it (it does not unlink
/// the name: that is [`ShmSegment::unlink`]'s job).
#[derive(Debug)]
pub struct ShmSegment {
    map: Mmap,
    name: String,
    layout: Layout,
    doorbell: bool,
    cfg: ShmConfig,
}

// SAFETY: the segment is a mapping owned by this value; nothing in it is tied to a thread.
unsafe impl Send for ShmSegment {}

impl ShmSegment {
    /// Create and initialize the segment `name` (like `/madmpi-<kvsname>-<n>`) for `nlocal`
    /// processes. Called once per node, by the leader, before the others [`open`](Self::open)
    /// it. The backing memory is reserved now (so a full `/dev/shm` is an error here, not a
    /// crash later): `nlocal * (nlocal - 1) * ring_bytes` plus a few pages.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad name, count or configuration; [`Error::Io`] when the name
    /// already exists or the OS refuses (no space in `/dev/shm`, ...). On error nothing is left
    /// behind.
    pub fn create(name: &str, nlocal: usize, cfg: &ShmConfig) -> Result<ShmSegment> {
        cfg.validate()?;
        let layout = Layout::new(nlocal, cfg.ring_bytes)?;
        let total = layout.total as u64;
        let map = create_mapping(name, layout.total)?;
        let doorbell = cfg
            .doorbell
            .unwrap_or(nlocal >= ShmConfig::DOORBELL_AUTO_MIN_LOCAL);
        let hdr = map.as_ptr().cast::<SegHeader>();
        // SAFETY: the mapping is at least `layout.total` > size_of::<SegHeader>() bytes, page
        // aligned, freshly created (zero-filled) and not yet visible to any other process: the
        // others only read the header after a barrier, and check `magic`, written last.
        unsafe {
            ptr::addr_of_mut!((*hdr).version).write(VERSION);
            ptr::addr_of_mut!((*hdr).nlocal).write(nlocal as u32);
            ptr::addr_of_mut!((*hdr).ring_bytes).write(cfg.ring_bytes as u64);
            ptr::addr_of_mut!((*hdr).total_bytes).write(total);
            ptr::addr_of_mut!((*hdr).flags).write(if doorbell { FLAG_DOORBELL } else { 0 });
            (*hdr).magic.store(MAGIC, Ordering::Release);
        }
        Ok(ShmSegment {
            map,
            name: name.to_owned(),
            layout,
            doorbell,
            cfg: cfg.clone(),
        })
    }

    /// Attach to the segment `name` the leader created, checking that it was made for
    /// `nlocal` processes and the same ring size.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the segment does not exist or cannot be mapped; [`Error::Invalid`]
    /// when the header does not match (not a madmpi segment, another version, another process
    /// count or ring size: the processes of a node disagree on their configuration).
    pub fn open(name: &str, nlocal: usize, cfg: &ShmConfig) -> Result<ShmSegment> {
        cfg.validate()?;
        let layout = Layout::new(nlocal, cfg.ring_bytes)?;
        let mismatch = |what: String| Error::Invalid(format!("shm segment {name}: {what}"));
        let map = open_mapping(name, " (has the node leader created it?)", |size| {
            if size < size_of::<SegHeader>() as u64 {
                return Err(mismatch(format!(
                    "{size} bytes, too small for a madmpi header"
                )));
            }
            Ok(())
        })?;
        let size = map.len() as u64;
        let hdr = map.as_ptr().cast::<SegHeader>();
        // SAFETY: the mapping holds at least a header (checked above) and is page aligned; the
        // creator wrote the plain fields before publishing `magic` with Release, and we read
        // them only after seeing `magic` with Acquire. Nobody writes them afterwards.
        let (magic, version, seg_nlocal, ring_bytes, total, flags) = unsafe {
            let magic = (*hdr).magic.load(Ordering::Acquire);
            (
                magic,
                ptr::addr_of!((*hdr).version).read(),
                ptr::addr_of!((*hdr).nlocal).read(),
                ptr::addr_of!((*hdr).ring_bytes).read(),
                ptr::addr_of!((*hdr).total_bytes).read(),
                ptr::addr_of!((*hdr).flags).read(),
            )
        };
        if magic != MAGIC {
            return Err(mismatch(
                "not a madmpi segment (or not initialized yet)".into(),
            ));
        }
        if version != VERSION {
            return Err(mismatch(format!(
                "layout version {version}, this library has {VERSION}"
            )));
        }
        if seg_nlocal as usize != nlocal {
            return Err(mismatch(format!(
                "created for {seg_nlocal} local processes, {nlocal} expected"
            )));
        }
        if ring_bytes != cfg.ring_bytes as u64 {
            return Err(mismatch(format!(
                "rings of {ring_bytes} bytes, {} expected (MADMPI_SHM_RING_BYTES differs?)",
                cfg.ring_bytes
            )));
        }
        if total != layout.total as u64 || size != total {
            return Err(mismatch(format!(
                "{size} bytes (header says {total}), {} expected",
                layout.total
            )));
        }
        Ok(ShmSegment {
            map,
            name: name.to_owned(),
            layout,
            doorbell: flags & FLAG_DOORBELL != 0,
            cfg: cfg.clone(),
        })
    }

    /// Remove the name `name` from the system (the mappings stay valid). Called once by the
    /// leader after every local process has attached. A name that is already gone is not an
    /// error, so this can also serve as a cleanup guard.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad name, [`Error::Io`] when the OS refuses.
    pub fn unlink(name: &str) -> Result<()> {
        let cname = c_name(name)?;
        match sys::shm_unlink(&cname) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(e) => Err(Error::Io {
                what: format!("shm_unlink({name})"),
                source: e,
            }),
        }
    }

    /// The name the segment was created or opened with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of local processes the segment serves.
    pub fn nlocal(&self) -> usize {
        self.layout.nlocal
    }

    /// Whether producers ring the receivers' doorbells in this segment.
    pub fn doorbell(&self) -> bool {
        self.doorbell
    }

    fn slot(&self, i: usize) -> NonNull<ProcSlot> {
        assert!(i < self.layout.nlocal);
        let off = self.layout.slots_off + i * size_of::<ProcSlot>();
        // SAFETY: `off` + one slot lies inside the mapping (the layout was checked against its
        // size), and the mapping's base is not null.
        unsafe { NonNull::new_unchecked(self.map.as_ptr().add(off).cast()) }
    }

    fn ring(&self, src: usize, dst: usize) -> (NonNull<RingCtrl>, NonNull<u8>) {
        let r = self.layout.ring_index(src, dst);
        let ctrl = self.layout.ctrl_off + r * size_of::<RingCtrl>();
        let data = self.layout.data_off + r * self.layout.ring_bytes;
        // SAFETY: both offsets, plus a control block and `ring_bytes` of data, lie inside the
        // mapping (see `Layout::new`, checked against the mapping's size); base is not null.
        unsafe {
            (
                NonNull::new_unchecked(self.map.as_ptr().add(ctrl).cast()),
                NonNull::new_unchecked(self.map.as_ptr().add(data)),
            )
        }
    }
}

/// Round up to the record alignment.
#[inline(always)]
fn align8(n: usize) -> usize {
    (n + 7) & !7
}

/// The header word of the record at byte `pos` of a data area.
///
/// # Safety
///
/// `base` is a live data area, `pos` is 8-aligned and at most its size minus 8.
#[inline(always)]
unsafe fn header<'a>(base: *mut u8, pos: usize) -> &'a AtomicU64 {
    // SAFETY: in bounds and 8-aligned (caller); the word is only accessed atomically while it
    // serves as a header, and accesses as payload bytes are ordered with those by the
    // head/header protocol.
    unsafe { AtomicU64::from_ptr(base.add(pos).cast()) }
}

/// Producer end of one ring, owned by the only process that writes to it.
#[derive(Debug)]
struct Producer {
    ctrl: NonNull<RingCtrl>,
    data: NonNull<u8>,
    mask: usize,
    /// Our own `tail`, mirrored in the shared control block.
    tail: u64,
    /// The consumer's `head` as last read: the ring has at least this much room.
    head_cache: u64,
}

impl Producer {
    /// # Safety
    ///
    /// `ctrl` and `data` (`capacity` bytes, 8-byte aligned, `capacity` a power of two, zeroed
    /// at creation) stay valid as long as the producer, and no one else produces on this ring.
    unsafe fn new(ctrl: NonNull<RingCtrl>, data: NonNull<u8>, capacity: usize) -> Producer {
        debug_assert!(capacity.is_power_of_two() && capacity >= 64);
        // SAFETY: `ctrl` is valid (caller).
        let tail = unsafe { ctrl.as_ref() }.tail.0.load(Ordering::Acquire);
        // SAFETY: as above.
        let head = unsafe { ctrl.as_ref() }.head.0.load(Ordering::Acquire);
        Producer {
            ctrl,
            data,
            mask: capacity - 1,
            tail,
            head_cache: head,
        }
    }

    #[inline(always)]
    fn ctrl(&self) -> &RingCtrl {
        // SAFETY: valid for our lifetime (see `new`); only atomics are accessed through it.
        unsafe { self.ctrl.as_ref() }
    }

    /// Append one record holding the concatenation of `iov` (`len` bytes in total, at most a
    /// quarter of the ring), or return `false` and take nothing when it does not fit now.
    #[inline]
    fn try_push(&mut self, iov: &[IoSlice<'_>], len: usize) -> bool {
        // SAFETY: `fill` writes the `len` bytes of the slices, which cannot overlap the ring.
        self.try_push_with(len, |mut dst| unsafe {
            for s in iov {
                crate::copy_bytes(s.as_ptr(), dst, s.len());
                dst = dst.add(s.len());
            }
        })
    }

    /// [`Producer::try_push`] of a record whose `len` bytes `fill` writes at the pointer it is
    /// given (room for exactly `len` bytes).
    #[inline(always)]
    fn try_push_with(&mut self, len: usize, fill: impl FnOnce(*mut u8)) -> bool {
        let cap = self.mask + 1;
        let rec = REC_HDR + align8(len);
        let pos = self.tail as usize & self.mask;
        let to_end = cap - pos;
        let wraps = rec > to_end;
        let need = if wraps { to_end + rec } else { rec };
        // `+ REC_HDR`: the word after the record must be free too, to be cleared as the next
        // (still empty) header.
        let used = self.tail.wrapping_sub(self.head_cache);
        if used > cap as u64 || need + REC_HDR > cap - used as usize {
            self.head_cache = self.ctrl().head.0.load(Ordering::Acquire);
            // A consumer publishing nonsense (head past tail) only makes the ring look full.
            let used = self.tail.wrapping_sub(self.head_cache);
            if used > cap as u64 || need + REC_HDR > cap - used as usize {
                return false;
            }
        }
        let base = self.data.as_ptr();
        let at = if wraps { 0 } else { pos };
        let next = (at + rec) & self.mask;
        // SAFETY: [at, at + rec) and the word at `next` are inside the data area (rec <= to_end,
        // or at == 0 and rec < cap) and free (checked above): the consumer reads them only after
        // it sees the header stores below. The iovec slices are valid for reads and cannot
        // overlap the ring, which no Rust reference covers.
        unsafe {
            fill(base.add(at + REC_HDR));
            header(base, next).store(0, Ordering::Relaxed);
            header(base, at).store(READY | len as u64, Ordering::Release);
            if wraps {
                // Published last: the consumer, waiting at `pos`, then finds the record at 0.
                header(base, pos).store(SKIP, Ordering::Release);
            }
        }
        self.tail += need as u64;
        self.ctrl().tail.0.store(self.tail, Ordering::Release);
        true
    }
}

/// Consumer end of one ring, owned by the only process that reads from it.
#[derive(Debug)]
struct Consumer {
    ctrl: NonNull<RingCtrl>,
    data: NonNull<u8>,
    mask: usize,
    /// Our own `head`; ahead of the shared one while a record is being delivered.
    head: u64,
}

impl Consumer {
    /// # Safety
    ///
    /// As [`Producer::new`], with "consumes" for "produces".
    unsafe fn new(ctrl: NonNull<RingCtrl>, data: NonNull<u8>, capacity: usize) -> Consumer {
        debug_assert!(capacity.is_power_of_two() && capacity >= 64);
        // SAFETY: `ctrl` is valid (caller).
        let head = unsafe { ctrl.as_ref() }.head.0.load(Ordering::Acquire);
        Consumer {
            ctrl,
            data,
            mask: capacity - 1,
            head,
        }
    }

    #[inline(always)]
    fn ctrl(&self) -> &RingCtrl {
        // SAFETY: valid for our lifetime (see `new`); only atomics are accessed through it.
        unsafe { self.ctrl.as_ref() }
    }

    /// The header word where the next record will appear (0 while there is none).
    #[inline(always)]
    fn peek(&self) -> u64 {
        // SAFETY: `head` only advances by whole 8-aligned records inside the area.
        unsafe { header(self.data.as_ptr(), self.head as usize & self.mask) }
            .load(Ordering::Acquire)
    }

    /// Whether a record is waiting.
    #[inline]
    fn pending(&self) -> bool {
        self.peek() != 0
    }

    /// Hand the records published so far to `f`, oldest first, and at most one ring's worth
    /// (so the loop is bounded even if the producer keeps up). A record is consumed before `f`
    /// runs: if `f` panics it is not delivered again.
    #[inline]
    fn pop_all(&mut self, f: &mut dyn FnMut(&[u8])) -> Result<usize> {
        let word = self.peek();
        if word == 0 {
            return Ok(0);
        }
        self.pop_from(word, f)
    }

    fn pop_from(&mut self, mut word: u64, f: &mut dyn FnMut(&[u8])) -> Result<usize> {
        let cap = self.mask + 1;
        let base = self.data.as_ptr();
        let start = self.head;
        let mut n = 0;
        loop {
            let pos = self.head as usize & self.mask;
            let to_end = cap - pos;
            if word == SKIP {
                self.head += to_end as u64;
            } else {
                let len = word & !READY;
                if word & READY == 0 || len >= cap as u64 {
                    return Err(Error::Malformed(format!(
                        "shm ring: bad record header {word:#x} at {pos}"
                    )));
                }
                let len = len as usize;
                let rec = REC_HDR + align8(len);
                if rec > to_end {
                    return Err(Error::Malformed(format!(
                        "shm ring: record of {len} bytes at {pos} overruns the ring"
                    )));
                }
                self.head += rec as u64;
                // SAFETY: [pos + 8, pos + 8 + len) is inside the data area (checked above) and
                // was written before the header we read with Acquire; the producer does not
                // write it again before we publish a `head` past it, which happens only after
                // `f` returns, so the slice is stable while it lives.
                let payload = unsafe { std::slice::from_raw_parts(base.add(pos + REC_HDR), len) };
                prefetch(payload);
                f(payload);
                self.ctrl().head.0.store(self.head, Ordering::Release);
                n += 1;
            }
            if self.head.wrapping_sub(start) >= cap as u64 {
                break;
            }
            word = self.peek();
            if word == 0 {
                break;
            }
        }
        // Publish a skip that ended the batch.
        self.ctrl().head.0.store(self.head, Ordering::Release);
        Ok(n)
    }
}

/// Ask for every cache line of a record at once before handing it over: the lines were
/// written by the other core, and a packet of many small chunks is read a chunk at a time,
/// so without this they arrive one transfer after another instead of overlapped.
#[inline(always)]
fn prefetch(p: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if p.len() > PREFETCH_MIN {
        let end = p.len().min(PREFETCH_MAX);
        let mut off = 64;
        while off < end {
            // SAFETY: a prefetch has no effect on memory; the address is inside `p`.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    p.as_ptr().add(off).cast(),
                )
            };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Records up to this many bytes are not prefetched (two lines at most: the hardware's
/// adjacent-line prefetch brings them).
const PREFETCH_MIN: usize = 128;
/// Only the first this many bytes of a record are prefetched: a core tracks a limited number
/// of outstanding misses, and beyond a few dozen lines the hardware's stream prefetcher has
/// caught on anyway.
const PREFETCH_MAX: usize = 2048;

#[derive(Debug)]
struct TxRing {
    prod: Producer,
    /// The receiver's doorbell and identity.
    slot: NonNull<ProcSlot>,
    peer: PeerId,
    /// Consecutive `WouldBlock`s, and when the first of them happened.
    blocked: u32,
    blocked_since: Option<Instant>,
}

#[derive(Debug)]
struct RxRing {
    cons: Consumer,
    peer: PeerId,
}

/// World rank → local index.
#[derive(Debug)]
enum RankMap {
    /// `table[rank - base]`, `NOT_LOCAL` for ranks of other nodes: the usual case, where the
    /// ranks of a node span a small range.
    Dense { base: u32, table: Vec<u32> },
    /// `(rank, local index)` sorted by rank, when the span would make the table too large.
    Sorted(Vec<(u32, u32)>),
}

/// Sentinel of [`RankMap::Dense`].
const NOT_LOCAL: u32 = u32::MAX;
/// Largest span of ranks given a dense table (4 bytes per rank).
const DENSE_MAX_SPAN: u32 = 1 << 20;

impl RankMap {
    fn new(ranks: &[PeerId]) -> Result<RankMap> {
        let mut sorted: Vec<(u32, u32)> = ranks
            .iter()
            .enumerate()
            .map(|(i, p)| (p.0, i as u32))
            .collect();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(Error::Invalid(format!("shm: rank {} listed twice", w[0].0)));
        }
        let (lo, hi) = match (sorted.first(), sorted.last()) {
            (Some(a), Some(b)) => (a.0, b.0),
            _ => return Ok(RankMap::Sorted(sorted)),
        };
        if hi - lo >= DENSE_MAX_SPAN {
            return Ok(RankMap::Sorted(sorted));
        }
        let mut table = vec![NOT_LOCAL; (hi - lo) as usize + 1];
        for (rank, i) in sorted {
            table[(rank - lo) as usize] = i;
        }
        Ok(RankMap::Dense { base: lo, table })
    }

    #[inline(always)]
    fn get(&self, peer: PeerId) -> Option<usize> {
        match self {
            RankMap::Dense { base, table } => {
                match table.get(peer.0.wrapping_sub(*base) as usize) {
                    Some(&j) if j != NOT_LOCAL => Some(j as usize),
                    _ => None,
                }
            }
            RankMap::Sorted(v) => v
                .binary_search_by_key(&peer.0, |e| e.0)
                .ok()
                .map(|k| v[k].1 as usize),
        }
    }
}

/// Largest packet worth aggregating into over shared memory (`Caps::aggreg_max`): a bigger one
/// gains nothing per chunk and makes the receiver wait for all of it, where packets of this
/// size keep both sides busy at once.
const AGGREG_MAX: usize = 16 << 10;
/// Over shared memory a message of more than this many bytes travels alone (`Caps::solo_min`):
/// copying it costs more than a packet of its own, and the receiver starts on it as soon as it
/// is written (measured: 64 non-blocking 4 KiB sends in flight, ~6 GB/s aggregated by four,
/// ~9–10 GB/s alone; the multiseg ping-pong 16 × 4 KiB and 16 × 8 KiB 10–15 % faster alone,
/// 16 × 2 KiB faster aggregated).
const SOLO_MIN: usize = 2 << 10;

/// The `shm` driver of one process. See the [module documentation](self).
#[derive(Debug)]
pub struct ShmTransport {
    caps: Caps,
    me: usize,
    my_slot: NonNull<ProcSlot>,
    doorbell: bool,
    /// Doorbell value when the rings were last scanned.
    seen: u64,
    /// `tx[j]` sends to local index `j`; `tx[me]` is absent.
    tx: Vec<Option<TxRing>>,
    /// Incoming rings, one per other local process.
    rx: Vec<RxRing>,
    /// Where the next poll starts, for fairness between peers.
    rr: usize,
    /// World rank → local index.
    ranks: RankMap,
    /// Slots of every local process, by local index (for pids and liveness).
    slots: Vec<NonNull<ProcSlot>>,
    /// Reused by `get`.
    iov_scratch: Vec<libc::iovec>,
    /// Keeps the mapping alive; declared last so it is dropped after the pointers above.
    seg: ShmSegment,
}

// SAFETY: all raw pointers point into the mapping owned by `seg`, which moves with the value;
// none of them is tied to the creating thread. (`iov_scratch` holds no live pointers between
// calls.)
unsafe impl Send for ShmTransport {}

impl ShmTransport {
    /// The driver of local process `my_local` of `seg`, where `local_peers[i]` is the world
    /// rank of local index `i`. Publishes this process's pid in the segment (for cross-memory
    /// attach by the others).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] when `local_peers` does not have one distinct rank per local process,
    /// `my_local` is out of range, or another process already attached as `my_local`.
    pub fn new(seg: ShmSegment, my_local: usize, local_peers: Vec<PeerId>) -> Result<ShmTransport> {
        let n = seg.nlocal();
        if local_peers.len() != n || my_local >= n {
            return Err(Error::Invalid(format!(
                "shm: {} local peers and local index {my_local} for a segment of {n}",
                local_peers.len()
            )));
        }
        let ranks = RankMap::new(&local_peers)?;

        let slots: Vec<_> = (0..n).map(|i| seg.slot(i)).collect();
        let my_slot = slots[my_local];
        // SAFETY: slots point into the mapping owned by `seg`; only atomics are accessed.
        let ident = unsafe { &my_slot.as_ref().ident.0 };
        if let Err(state) = ident.state.compare_exchange(
            STATE_FREE,
            STATE_ATTACHED,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            return Err(Error::Invalid(format!(
                "shm segment {}: local index {my_local} already taken (state {state}, pid {})",
                seg.name(),
                ident.pid.load(Ordering::Acquire)
            )));
        }
        ident.pid.store(sys::getpid(), Ordering::Release);

        let cap = seg.layout.ring_bytes;
        let mut tx = Vec::with_capacity(n);
        let mut rx = Vec::with_capacity(n.saturating_sub(1));
        for j in 0..n {
            if j == my_local {
                tx.push(None);
                continue;
            }
            let (ctrl, data) = seg.ring(my_local, j);
            tx.push(Some(TxRing {
                // SAFETY: the ring lies in the mapping kept alive by `seg` (owned by the
                // transport), is page aligned with a power-of-two size, and we are its only
                // producer (the slot claim above makes `my_local` ours).
                prod: unsafe { Producer::new(ctrl, data, cap) },
                slot: slots[j],
                peer: local_peers[j],
                blocked: 0,
                blocked_since: None,
            }));
            let (ctrl, data) = seg.ring(j, my_local);
            rx.push(RxRing {
                // SAFETY: as above, and we are the only consumer of rings towards `my_local`.
                cons: unsafe { Consumer::new(ctrl, data, cap) },
                peer: local_peers[j],
            });
        }

        let max_packet = seg.cfg.max_packet();
        let caps = Caps {
            name: "shm",
            // Measured on the development machine (see the benchmark in
            // `tests/shm_processes.rs`): ~190 ns for 8 bytes one way, ~16 GB/s for a 1 MiB `get`.
            latency_ns: 200,
            bandwidth_mbps: 15_000,
            max_packet,
            eager_threshold: seg.cfg.eager_threshold.min(max_packet / 2),
            max_iov: IOV_MAX,
            can_get: seg.cfg.cma,
            preference: 80,
            aggreg_max: max_packet.min(AGGREG_MAX),
            solo_min: SOLO_MIN,
            registers_memory: false,
        };
        Ok(ShmTransport {
            caps,
            me: my_local,
            my_slot,
            doorbell: seg.doorbell,
            seen: 0,
            tx,
            rx,
            rr: 0,
            ranks,
            slots,
            iov_scratch: Vec::with_capacity(IOV_MAX),
            seg,
        })
    }

    /// Local index of `peer`, if it is on this node.
    #[inline(always)]
    fn local_index(&self, peer: PeerId) -> Option<usize> {
        self.ranks.get(peer)
    }

    fn unreachable(&self, peer: PeerId) -> Error {
        Error::Invalid(format!(
            "shm: rank {} is not another process of this node",
            peer.0
        ))
    }

    /// The segment this driver works in.
    pub fn segment(&self) -> &ShmSegment {
        &self.seg
    }

    fn ident(&self, j: usize) -> &ProcIdent {
        // SAFETY: slots point into the mapping owned by `self.seg`; only atomics are accessed.
        unsafe { &self.slots[j].as_ref().ident.0 }
    }

    /// Slow path of `try_send`: the ring towards local `j` is full. Decide whether the
    /// receiver may be gone.
    #[cold]
    #[inline(never)]
    fn blocked(&mut self, j: usize) -> Result<SendOutcome> {
        let state = self.ident(j).state.load(Ordering::Acquire);
        let pid = self.ident(j).pid.load(Ordering::Acquire);
        let Some(t) = self.tx[j].as_mut() else {
            return Ok(SendOutcome::WouldBlock);
        };
        if state == STATE_CLOSED {
            return Err(Error::PeerLost(t.peer));
        }
        t.blocked = t.blocked.wrapping_add(1);
        // Read the clock once every 256 attempts only.
        if t.blocked & 0xff == 1 {
            let now = Instant::now();
            match t.blocked_since {
                None => t.blocked_since = Some(now),
                Some(since) if now.duration_since(since) >= PEER_CHECK_AFTER => {
                    t.blocked_since = Some(now);
                    if pid > 0 {
                        if let Err(e) = sys::probe_pid(pid) {
                            if e.raw_os_error() == Some(libc::ESRCH) {
                                return Err(Error::PeerLost(t.peer));
                            }
                        }
                    }
                }
                Some(_) => {}
            }
        }
        Ok(SendOutcome::WouldBlock)
    }

    /// Advance the (entry, offset) cursor over `local` by `n` bytes.
    fn advance(local: &[IoSliceMut<'_>], idx: &mut usize, off: &mut usize, mut n: usize) {
        while n > 0 {
            let left = local[*idx].len() - *off;
            if n < left {
                *off += n;
                return;
            }
            n -= left;
            *idx += 1;
            *off = 0;
        }
        // Skip empty entries so the cursor rests on data (or the end).
        while *idx < local.len() && local[*idx].len() == *off {
            *idx += 1;
            *off = 0;
        }
    }
}

impl Drop for ShmTransport {
    fn drop(&mut self) {
        // SAFETY: the slot lies in the mapping, still alive (`seg` is dropped after this).
        let ident = unsafe { &self.my_slot.as_ref().ident.0 };
        ident.state.store(STATE_CLOSED, Ordering::Release);
    }
}

impl ShmTransport {
    /// [`Transport::try_send`] of a packet made of two pieces (a chunk header and its payload:
    /// the eager fast path), without the iovec array and without a virtual call.
    #[inline]
    pub fn try_send2(&mut self, peer: PeerId, head: &[u8], body: &[u8]) -> Result<SendOutcome> {
        let len = head.len() + body.len();
        self.push_record(peer, len, |p| {
            // SAFETY: the record has room for `len` bytes; the slices cannot overlap the ring.
            p.try_push_with(len, |dst| unsafe {
                crate::copy_bytes(head.as_ptr(), dst, head.len());
                crate::copy_bytes(body.as_ptr(), dst.add(head.len()), body.len());
            })
        })
    }

    /// Push a record of `len` bytes to `peer` with `push` (false: the ring is full), ring its
    /// doorbell, keep the blocking state.
    #[inline(always)]
    fn push_record(
        &mut self,
        peer: PeerId,
        len: usize,
        push: impl FnOnce(&mut Producer) -> bool,
    ) -> Result<SendOutcome> {
        let Some(j) = self.local_index(peer).filter(|&j| j != self.me) else {
            return Err(self.unreachable(peer));
        };
        if len > self.caps.max_packet {
            return Err(self.too_long(len));
        }
        let doorbell = self.doorbell;
        let Some(t) = self.tx[j].as_mut() else {
            return Err(self.unreachable(peer));
        };
        if push(&mut t.prod) {
            if doorbell {
                // SAFETY: the slot lies in the mapping owned by `self.seg`.
                let slot = unsafe { t.slot.as_ref() };
                // Release: a receiver that sees the new count also sees the record.
                slot.doorbell.0.fetch_add(1, Ordering::Release);
            }
            t.blocked = 0;
            t.blocked_since = None;
            return Ok(SendOutcome::Done);
        }
        self.blocked(j)
    }

    #[cold]
    fn too_long(&self, len: usize) -> Error {
        Error::Invalid(format!(
            "shm: packet of {len} bytes exceeds max_packet {}",
            self.caps.max_packet
        ))
    }

    /// The rest of [`Transport::poll_recv`]: deliver what every ring holds (one lap each),
    /// starting with a different ring each time; `bell` is the doorbell count read first.
    #[inline(never)]
    fn scan(&mut self, bell: u64, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize> {
        let n = self.rx.len();
        if n == 0 {
            return Ok(0);
        }
        let start = self.rr;
        self.rr = if start + 1 == n { 0 } else { start + 1 };
        let mut total = 0;
        let mut more = false;
        let mut i = start;
        for _ in 0..n {
            let r = &mut self.rx[i];
            let peer = r.peer;
            let got = r.cons.pop_all(&mut |p| deliver(peer, p))?;
            // A ring left non-empty (one lap per call) must be visited again even if the
            // doorbell stays quiet.
            more |= got > 0 && r.cons.pending();
            total += got;
            i += 1;
            if i == n {
                i = 0;
            }
        }
        // Every ring was scanned after reading `bell`: unless one was left non-empty,
        // everything it announced is in.
        if !more {
            self.seen = bell;
        }
        Ok(total)
    }
}

impl Transport for ShmTransport {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    #[inline]
    fn try_send2(&mut self, peer: PeerId, head: &[u8], body: &[u8]) -> Result<SendOutcome> {
        ShmTransport::try_send2(self, peer, head, body)
    }

    #[inline]
    fn try_send(&mut self, peer: PeerId, iov: &[IoSlice<'_>]) -> Result<SendOutcome> {
        let mut len = 0usize;
        for s in iov {
            len += s.len();
        }
        self.push_record(peer, len, |p| p.try_push(iov, len))
    }
    /// An idle poll (nothing in any ring) is a few loads and no call: with the doorbell,
    /// whether it rang since the last complete scan (a ring left non-empty keeps that scan
    /// incomplete); without, whether a record waits at the head of some ring.
    #[inline]
    fn poll_recv(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize> {
        let mut bell = 0;
        if self.doorbell {
            // SAFETY: the slot lies in the mapping owned by `self.seg`.
            bell = unsafe { self.my_slot.as_ref() }
                .doorbell
                .0
                .load(Ordering::Acquire);
            if bell == self.seen {
                return Ok(0);
            }
        } else if !self.rx.iter().any(|r| r.cons.pending()) {
            return Ok(0);
        }
        self.scan(bell, deliver)
    }

    fn get(
        &mut self,
        peer: PeerId,
        remote: RemoteRegion,
        local: &mut [IoSliceMut<'_>],
    ) -> Result<()> {
        if !self.caps.can_get {
            return Err(Error::Unsupported("shm get (cross-memory attach disabled)"));
        }
        let Some(j) = self.local_index(peer).filter(|&j| j != self.me) else {
            return Err(self.unreachable(peer));
        };
        let total: u64 = local.iter().map(|s| s.len() as u64).sum();
        if total != remote.len {
            return Err(Error::Invalid(format!(
                "get: local buffers hold {total} bytes, remote region {}",
                remote.len
            )));
        }
        if remote.len == 0 {
            return Ok(());
        }
        if remote.addr.checked_add(remote.len).is_none() || usize::try_from(remote.len).is_err() {
            return Err(Error::Invalid(format!(
                "get: bad region {:#x}+{}",
                remote.addr, remote.len
            )));
        }
        let pid = self.ident(j).pid.load(Ordering::Acquire);
        if pid <= 0 {
            return Err(Error::Invalid(format!(
                "get: rank {} has not attached to the shm segment yet",
                peer.0
            )));
        }

        let mut scratch = std::mem::take(&mut self.iov_scratch);
        let (mut idx, mut off) = (0usize, 0usize);
        Self::advance(local, &mut idx, &mut off, 0);
        let mut addr = remote.addr;
        let mut left = remote.len as usize;
        let result = loop {
            if left == 0 {
                break Ok(());
            }
            scratch.clear();
            let mut batch = 0usize;
            let (mut k, mut o) = (idx, off);
            while k < local.len() && scratch.len() < IOV_MAX {
                let s = &mut local[k];
                let l = s.len() - o;
                if l > 0 {
                    scratch.push(libc::iovec {
                        // SAFETY: `o` <= the slice length, so the pointer stays in bounds.
                        iov_base: unsafe { s.as_mut_ptr().add(o) }.cast(),
                        iov_len: l,
                    });
                    batch += l;
                }
                k += 1;
                o = 0;
            }
            let rem = [libc::iovec {
                iov_base: addr as usize as *mut libc::c_void,
                iov_len: batch,
            }];
            // SAFETY: every local entry is a part of a distinct `&mut` slice of `local`, which
            // nothing else touches during the call.
            match unsafe { sys::process_vm_readv(pid, &scratch, &rem) } {
                Ok(0) => {
                    break Err(Error::Invalid(format!(
                        "get: no progress reading {:#x}+{left} from rank {}",
                        addr, peer.0
                    )))
                }
                Ok(got) => {
                    let got = got.min(left);
                    Self::advance(local, &mut idx, &mut off, got);
                    addr += got as u64;
                    left -= got;
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => {
                    break Err(sys::cma_error(
                        e,
                        "process_vm_readv",
                        Some(peer),
                        pid,
                        addr,
                        left,
                    ))
                }
            }
        };
        scratch.clear();
        self.iov_scratch = scratch;
        result
    }

    fn reaches(&self, peer: PeerId) -> bool {
        self.local_index(peer).is_some_and(|j| j != self.me)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring in private memory, for unit tests of the record logic.
    struct TestRing {
        _ctrl: Box<RingCtrl>,
        _data: Vec<u64>,
        prod: Producer,
        cons: Consumer,
    }

    fn ring(cap: usize) -> TestRing {
        let mut ctrl = Box::new(RingCtrl {
            head: Padded(AtomicU64::new(0)),
            tail: Padded(AtomicU64::new(0)),
            split: Padded(SplitBoard {
                claim: AtomicU64::new(0),
                done: AtomicU64::new(0),
                orphan: AtomicU64::new(0),
            }),
        });
        let mut data = vec![0u64; cap / 8];
        let c = NonNull::from(&mut *ctrl);
        let d = NonNull::new(data.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: ctrl and data live in the returned value, alongside the two ends.
        let (prod, cons) = unsafe { (Producer::new(c, d, cap), Consumer::new(c, d, cap)) };
        TestRing {
            _ctrl: ctrl,
            _data: data,
            prod,
            cons,
        }
    }

    fn push(r: &mut TestRing, bytes: &[u8]) -> bool {
        r.prod.try_push(&[IoSlice::new(bytes)], bytes.len())
    }

    fn pop(r: &mut TestRing) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        r.cons.pop_all(&mut |p| out.push(p.to_vec())).unwrap();
        out
    }

    #[test]
    fn wrap_around_with_skip_marker() {
        let mut r = ring(256);
        // 3 records of 8 + 56 = 64 bytes: tail at 192.
        for i in 0..3u8 {
            assert!(push(&mut r, &[i; 56]));
        }
        assert_eq!(pop(&mut r).len(), 3);
        // 8 + 72 = 80 bytes do not fit in the 64 left before the end: skip, then at 0.
        assert!(push(&mut r, &[7; 72]));
        assert_eq!(r.prod.tail, 256 + 80);
        // SAFETY: test ring memory is alive; offset 192 is inside.
        let marker = unsafe { r.prod.data.as_ptr().add(192).cast::<u64>().read() };
        assert_eq!(marker, SKIP);
        assert_eq!(pop(&mut r), vec![vec![7u8; 72]]);
        assert_eq!(r.cons.head, 256 + 80);
        // Many rounds of odd sizes keep order and content.
        let mut expect = std::collections::VecDeque::new();
        for k in 0..2000usize {
            let len = (k * 7919) % 61;
            let v: Vec<u8> = (0..len).map(|b| (b + k) as u8).collect();
            while !push(&mut r, &v) {
                for got in pop(&mut r) {
                    assert_eq!(Some(got), expect.pop_front());
                }
            }
            expect.push_back(v);
        }
        for got in pop(&mut r) {
            assert_eq!(Some(got), expect.pop_front());
        }
        assert!(expect.is_empty());
    }

    #[test]
    fn full_ring_would_block_and_takes_nothing() {
        let mut r = ring(256);
        let mut n = 0;
        while push(&mut r, &[1; 24]) {
            n += 1;
        }
        // 32-byte records, and the word after the last one stays free.
        assert_eq!(n, 256 / 32 - 1);
        let tail = r.prod.tail;
        assert!(!push(&mut r, &[9; 24]));
        assert_eq!(r.prod.tail, tail);
        assert_eq!(r.prod.ctrl().tail.0.load(Ordering::Relaxed), tail);
        assert_eq!(pop(&mut r), vec![vec![1u8; 24]; n]);
        assert!(push(&mut r, &[2; 24]));
        assert_eq!(pop(&mut r), vec![vec![2u8; 24]]);
    }

    #[test]
    fn exact_fit_records() {
        let mut r = ring(256);
        // 240 + 8 bytes of records and the free word: exactly full.
        assert!(push(&mut r, &[3; 232]));
        assert!(push(&mut r, &[]));
        assert_eq!(r.prod.tail, 248);
        assert!(!push(&mut r, &[]), "the ring is exactly full");
        assert_eq!(pop(&mut r), vec![vec![3u8; 232], vec![]]);
        // A record ending exactly at the end of the area needs no skip marker.
        assert!(push(&mut r, &[]));
        assert_eq!(r.prod.tail, 256);
        assert_eq!(pop(&mut r), vec![vec![]]);
        assert!(push(&mut r, &[4; 120]));
        assert_eq!(pop(&mut r), vec![vec![4u8; 120]]);
        assert!(push(&mut r, &[5; 120]));
        assert_eq!(r.prod.tail, 512);
        assert_eq!(pop(&mut r), vec![vec![5u8; 120]]);
        // The largest record an empty ring takes, and one more byte.
        assert!(!push(&mut r, &[6; 241]));
        assert!(push(&mut r, &[6; 240]));
        assert_eq!(pop(&mut r), vec![vec![6u8; 240]]);
        assert_eq!(r.cons.head, 512 + 248);
    }

    #[test]
    fn zero_length_and_unaligned_lengths() {
        let mut r = ring(4096);
        for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 0, 0] {
            assert!(push(&mut r, &vec![len as u8; len]));
        }
        let got = pop(&mut r);
        let lens: Vec<_> = got.iter().map(Vec::len).collect();
        assert_eq!(lens, vec![0, 1, 7, 8, 9, 15, 16, 17, 0, 0]);
        assert!(pop(&mut r).is_empty());
    }

    #[test]
    fn gather_of_several_slices() {
        let mut r = ring(4096);
        let parts: [&[u8]; 4] = [b"ab", b"", b"cde", b"fghij"];
        let iov: Vec<_> = parts.iter().map(|p| IoSlice::new(p)).collect();
        assert!(r.prod.try_push(&iov, 10));
        assert_eq!(pop(&mut r), vec![b"abcdefghij".to_vec()]);
    }

    #[test]
    fn corrupt_ring_is_malformed_not_a_crash() {
        let mut r = ring(256);
        let base = r.prod.data.as_ptr();
        for bad in [1 << 40, READY | 256, READY | 249, 5] {
            // SAFETY: test ring memory is alive; offset 0 is inside and 8-aligned.
            unsafe { header(base, 0) }.store(bad, Ordering::Release);
            assert!(
                matches!(r.cons.pop_all(&mut |_| {}), Err(Error::Malformed(_))),
                "{bad:#x}"
            );
        }
    }

    #[test]
    fn panicking_callback_does_not_redeliver() {
        let mut r = ring(256);
        assert!(push(&mut r, b"first"));
        assert!(push(&mut r, b"second"));
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            r.cons.pop_all(&mut |_| panic!("engine bug")).ok();
        }));
        assert!(res.is_err());
        assert_eq!(pop(&mut r), vec![b"second".to_vec()]);
    }

    #[test]
    fn config_from_env_values() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let c = ShmConfig::from_lookup(env(&[
            ("MADMPI_SHM_RING_BYTES", "64K"),
            ("MADMPI_SHM_EAGER", "4096"),
            ("MADMPI_SHM_CMA", "0"),
            ("MADMPI_SHM_DOORBELL", "1"),
            ("MADMPI_SHM_SPLIT_MIN", "1M"),
        ]))
        .unwrap();
        assert_eq!(
            (
                c.ring_bytes,
                c.eager_threshold,
                c.cma,
                c.doorbell,
                c.split_min
            ),
            (65536, 4096, false, Some(true), 1 << 20)
        );
        assert_eq!(
            ShmConfig::from_lookup(env(&[])).unwrap(),
            ShmConfig::default()
        );
        assert!(ShmConfig::from_lookup(env(&[("MADMPI_SHM_RING_BYTES", "100000")])).is_err());
        assert!(ShmConfig::from_lookup(env(&[("MADMPI_SHM_CMA", "maybe")])).is_err());
        assert!(ShmConfig::from_lookup(env(&[("MADMPI_SHM_SPLIT_MIN", "big")])).is_err());
    }

    #[test]
    fn layout_is_consistent() {
        let l = Layout::new(4, 4096).unwrap();
        assert_eq!(l.data_off % PAGE, 0);
        assert_eq!(l.total, l.data_off + 12 * 4096);
        let mut seen = std::collections::HashSet::new();
        for s in 0..4 {
            for d in 0..4 {
                if s != d {
                    assert!(seen.insert(l.ring_index(s, d)));
                }
            }
        }
        assert_eq!(seen, (0..12).collect());
        assert!(Layout::new(0, 4096).is_err());
        assert!(Layout::new(1, 4096).is_ok());
    }
}
