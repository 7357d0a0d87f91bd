//! The shared segment: its configuration, its layout, and mapping it.
//!
//! # What it owns
//!
//! [`ShmConfig`] (sizes, and reading them from the environment), the layout of a segment
//! ([`Layout`]: header, process slots, ring control blocks and data areas, as drawn in the
//! `shm` module documentation) and the structures shared there, and creating, opening,
//! unlinking and mapping segments ([`ShmSegment`]; `shmcoll` maps its own with the same
//! functions).
//!
//! # What it must never do
//!
//! Move packets or know what a record is: it hands out where a slot or a ring lives, and what
//! flows through them is `ring.rs`'s and the driver's.

use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::fd::AsFd;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

use crate::sys::{self, Mmap};
use crate::{Error, Result};

/// "MADMPISH" read as a little-endian `u64`.
const MAGIC: u64 = u64::from_le_bytes(*b"MADMPISH");
/// Bumped whenever the layout changes (3: a rendezvous RTS may carry the start of its message;
/// 4: the header carries the engine's protocol version, which says what the packets mean;
/// 5: a ring record may be the driver's own, `DRIVER` in its header: a split copy's help
/// request; 6: per-receiver rings (an inbox shared by the senders and a few pair rings claimed
/// on first contact) instead of one ring per ordered pair, the split board in the process slot).
const VERSION: u32 = 6;
/// Alignment of everything shared by two writers' caches (two x86 cache lines).
const LINE: usize = 128;
const PAGE: usize = 4096;

pub(super) const STATE_FREE: u32 = 0;
pub(super) const STATE_ATTACHED: u32 = 1;
pub(super) const STATE_CLOSED: u32 = 2;

/// Header flag: producers ring the receiver's doorbell, and receivers check it first.
const FLAG_DOORBELL: u32 = 1;

/// Smallest and largest ring sizes accepted.
const MIN_RING: usize = 4096;
const MAX_RING: usize = 1 << 30;
/// Most local processes per segment.
const MAX_LOCAL: usize = 4096;

/// Defaults of [`ShmConfig`].
const DEFAULT_RING_BYTES: usize = 256 << 10;
const DEFAULT_EAGER: usize = 16 << 10;
const DEFAULT_SPLIT_MIN: usize = 128 << 10;
const DEFAULT_PAIR_RINGS: usize = 8;
/// Most pair rings per receiver.
const MAX_PAIR_RINGS: usize = MAX_LOCAL;

/// One value padded to its own pair of cache lines.
#[repr(C, align(128))]
pub(super) struct Padded<T>(pub(super) T);

#[repr(C, align(128))]
struct SegHeader {
    magic: AtomicU64,
    version: u32,
    nlocal: u32,
    ring_bytes: u64,
    total_bytes: u64,
    flags: u32,
    /// The engine's protocol version (opaque here; every process must share it).
    engine: u32,
    /// Pair rings per receiver.
    pair_rings: u32,
}

#[repr(C)]
pub(super) struct ProcSlot {
    pub(super) doorbell: Padded<AtomicU64>,
    pub(super) ident: Padded<ProcIdent>,
    /// The board of split copies towards this process (it runs one at a time).
    pub(super) split: Padded<SplitBoard>,
    /// How many of this process's pair rings senders have claimed (may count past the number
    /// of rings: those senders use the inbox).
    pub(super) claimed: Padded<AtomicU32>,
    /// The inbox's producer lock: 0 free, else the holder's local index + 1 (whose slot gives
    /// its pid, for the takeover of a dead holder's lock).
    pub(super) inbox_lock: Padded<AtomicU32>,
}

#[repr(C)]
pub(super) struct ProcIdent {
    pub(super) pid: AtomicI32,
    pub(super) state: AtomicU32,
}

#[repr(C)]
pub(super) struct RingCtrl {
    pub(super) head: Padded<AtomicU64>,
    pub(super) tail: Padded<AtomicU64>,
    /// A pair ring's sender (local index + 1; 0 while unclaimed). Unused for an inbox.
    pub(super) owner: Padded<AtomicU32>,
}

/// The board of split copies in one direction (see "Split copies" in the module docs).
#[repr(C)]
pub(super) struct SplitBoard {
    pub(super) claim: AtomicU64,
    pub(super) done: AtomicU64,
    pub(super) orphan: AtomicU64,
}

const _: () = {
    assert!(size_of::<SegHeader>() == LINE);
    assert!(size_of::<ProcSlot>() == 5 * LINE);
    assert!(size_of::<RingCtrl>() == 3 * LINE);
};

/// Configuration of the `shm` driver. Every process of a node must use the same sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShmConfig {
    /// Bytes of each ring (inbox or pair ring); a power of two between 4 KiB and 1 GiB
    /// (`MADMPI_SHM_RING_BYTES`, default 256 KiB). The largest packet is a quarter of it.
    pub ring_bytes: usize,
    /// Pair rings per receiver (`MADMPI_SHM_PAIR_RINGS`, default 8): the first senders to
    /// contact a process get a ring of their own, the others share its inbox. With at least
    /// `nlocal - 1`, every ordered pair has its ring from the start and there is no inbox.
    pub pair_rings: usize,
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
    /// The engine's protocol version, kept in the segment's header without being read: a
    /// process of another build is refused when it opens the segment.
    pub engine_version: u32,
}

impl Default for ShmConfig {
    fn default() -> ShmConfig {
        ShmConfig {
            ring_bytes: DEFAULT_RING_BYTES,
            pair_rings: DEFAULT_PAIR_RINGS,
            eager_threshold: DEFAULT_EAGER,
            cma: true,
            split_min: DEFAULT_SPLIT_MIN,
            doorbell: None,
            engine_version: 0,
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
        if let Some(v) = get("MADMPI_SHM_PAIR_RINGS") {
            cfg.pair_rings = v
                .trim()
                .parse()
                .ok()
                .filter(|&k| k <= MAX_PAIR_RINGS)
                .ok_or_else(|| {
                    Error::Invalid(format!(
                        "MADMPI_SHM_PAIR_RINGS={v:?}: expected 0 to {MAX_PAIR_RINGS}"
                    ))
                })?;
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

    pub(super) fn max_packet(&self) -> usize {
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
pub(super) struct Layout {
    nlocal: usize,
    pub(super) ring_bytes: usize,
    /// Pair rings per receiver: `min(pair_rings, nlocal - 1)`.
    pub(super) pairs: usize,
    /// Whether each receiver has an inbox (some senders have no pair ring).
    pub(super) inbox: bool,
    slots_off: usize,
    ctrl_off: usize,
    data_off: usize,
    total: usize,
}

impl Layout {
    fn new(nlocal: usize, ring_bytes: usize, pair_rings: usize) -> Result<Layout> {
        if nlocal == 0 || nlocal > MAX_LOCAL {
            return Err(Error::Invalid(format!(
                "shm: {nlocal} local processes (1 to {MAX_LOCAL} supported)"
            )));
        }
        let pairs = pair_rings.min(nlocal - 1);
        let inbox = pairs < nlocal - 1;
        // O(nlocal): a fixed number of rings per receiver.
        let nrings = nlocal * (pairs + usize::from(inbox));
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
            pairs,
            inbox,
            slots_off,
            ctrl_off,
            data_off,
            total,
        })
    }

    /// Whether every ordered pair has its ring from the start (no inbox, nothing claimed).
    pub(super) fn static_pairs(&self) -> bool {
        !self.inbox
    }

    /// Ring `r` of receiver `dst`: its pair rings `0..pairs`, then its inbox.
    #[inline]
    fn ring_index(&self, dst: usize, r: usize) -> usize {
        debug_assert!(dst < self.nlocal && r < self.pairs + usize::from(self.inbox));
        dst * (self.pairs + usize::from(self.inbox)) + r
    }

    /// With [`static_pairs`](Self::static_pairs), the pair ring of `dst` that `src` owns.
    #[inline]
    pub(super) fn static_ring(&self, src: usize, dst: usize) -> usize {
        debug_assert!(src != dst && self.static_pairs());
        if src < dst {
            src
        } else {
            src - 1
        }
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
    pub(super) layout: Layout,
    pub(super) doorbell: bool,
    pub(super) cfg: ShmConfig,
}

// SAFETY: the segment is a mapping owned by this value; nothing in it is tied to a thread.
unsafe impl Send for ShmSegment {}

impl ShmSegment {
    /// Create and initialize the segment `name` (like `/madmpi-<kvsname>-<n>`) for `nlocal`
    /// processes. Called once per node, by the leader, before the others [`open`](Self::open)
    /// it. The backing memory is reserved now (so a full `/dev/shm` is an error here, not a
    /// crash later): `nlocal * (min(pair_rings, nlocal - 1) + inbox) * ring_bytes` plus a few
    /// pages, where `inbox` is 1 when `pair_rings < nlocal - 1`: linear in `nlocal`.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad name, count or configuration; [`Error::Io`] when the name
    /// already exists or the OS refuses (no space in `/dev/shm`, ...). On error nothing is left
    /// behind.
    pub fn create(name: &str, nlocal: usize, cfg: &ShmConfig) -> Result<ShmSegment> {
        cfg.validate()?;
        let layout = Layout::new(nlocal, cfg.ring_bytes, cfg.pair_rings)?;
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
            ptr::addr_of_mut!((*hdr).engine).write(cfg.engine_version);
            ptr::addr_of_mut!((*hdr).pair_rings).write(layout.pairs as u32);
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
        let layout = Layout::new(nlocal, cfg.ring_bytes, cfg.pair_rings)?;
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
        let (magic, version, seg_nlocal, ring_bytes, total, flags, engine, pairs) = unsafe {
            let magic = (*hdr).magic.load(Ordering::Acquire);
            (
                magic,
                ptr::addr_of!((*hdr).version).read(),
                ptr::addr_of!((*hdr).nlocal).read(),
                ptr::addr_of!((*hdr).ring_bytes).read(),
                ptr::addr_of!((*hdr).total_bytes).read(),
                ptr::addr_of!((*hdr).flags).read(),
                ptr::addr_of!((*hdr).engine).read(),
                ptr::addr_of!((*hdr).pair_rings).read(),
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
        if engine != cfg.engine_version {
            return Err(mismatch(format!(
                "engine protocol version {engine}, this process speaks {} (madmpi builds of \
                 different versions on one node)",
                cfg.engine_version
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
        if pairs as usize != layout.pairs {
            return Err(mismatch(format!(
                "{pairs} pair rings per process, {} expected (MADMPI_SHM_PAIR_RINGS differs?)",
                layout.pairs
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

    pub(super) fn slot(&self, i: usize) -> NonNull<ProcSlot> {
        assert!(i < self.layout.nlocal);
        let off = self.layout.slots_off + i * size_of::<ProcSlot>();
        // SAFETY: `off` + one slot lies inside the mapping (the layout was checked against its
        // size), and the mapping's base is not null.
        unsafe { NonNull::new_unchecked(self.map.as_ptr().add(off).cast()) }
    }

    /// Ring `r` of receiver `dst` (its pair rings `0..pairs`, then its inbox).
    pub(super) fn ring(&self, dst: usize, r: usize) -> (NonNull<RingCtrl>, NonNull<u8>) {
        let r = self.layout.ring_index(dst, r);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A process of another build (another engine protocol version) cannot open the segment.
    #[test]
    fn engines_of_different_versions_refuse_the_segment() {
        let name = format!("/madmpi-test-engine-{}", std::process::id());
        let mine = ShmConfig {
            engine_version: 1,
            ..ShmConfig::default()
        };
        let theirs = ShmConfig {
            engine_version: 2,
            ..ShmConfig::default()
        };
        let seg = ShmSegment::create(&name, 2, &mine).expect("create");
        let Err(e) = ShmSegment::open(&name, 2, &theirs) else {
            panic!("a segment of another engine version was opened");
        };
        let same = ShmSegment::open(&name, 2, &mine);
        ShmSegment::unlink(&name).expect("unlink");
        drop(seg);
        assert!(
            e.to_string()
                .contains("engine protocol version 1, this process speaks 2"),
            "{e}"
        );
        assert!(same.is_ok());
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
            ("MADMPI_SHM_PAIR_RINGS", "3"),
        ]))
        .unwrap();
        assert_eq!(
            (
                c.ring_bytes,
                c.eager_threshold,
                c.cma,
                c.doorbell,
                c.split_min,
                c.pair_rings
            ),
            (65536, 4096, false, Some(true), 1 << 20, 3)
        );
        assert_eq!(
            ShmConfig::from_lookup(env(&[])).unwrap(),
            ShmConfig::default()
        );
        assert!(ShmConfig::from_lookup(env(&[("MADMPI_SHM_RING_BYTES", "100000")])).is_err());
        assert!(ShmConfig::from_lookup(env(&[("MADMPI_SHM_CMA", "maybe")])).is_err());
        assert!(ShmConfig::from_lookup(env(&[("MADMPI_SHM_SPLIT_MIN", "big")])).is_err());
        assert!(ShmConfig::from_lookup(env(&[("MADMPI_SHM_PAIR_RINGS", "-1")])).is_err());
    }

    #[test]
    fn layout_is_consistent() {
        // Few processes: one ring per ordered pair, no inbox.
        let l = Layout::new(4, 4096, 8).unwrap();
        assert!(l.static_pairs());
        assert_eq!(l.data_off % PAGE, 0);
        assert_eq!(l.total, l.data_off + 12 * 4096);
        let mut seen = std::collections::HashSet::new();
        for s in 0..4 {
            for d in 0..4 {
                if s != d {
                    assert!(seen.insert(l.ring_index(d, l.static_ring(s, d))));
                }
            }
        }
        assert_eq!(seen, (0..12).collect());
        // Many: `pairs` rings and an inbox per process, linear in the count.
        let l = Layout::new(256, 4096, 8).unwrap();
        assert!(!l.static_pairs());
        assert_eq!(l.data_off % PAGE, 0);
        assert_eq!(l.total, l.data_off + 256 * 9 * 4096);
        assert_eq!(l.ring_index(255, 8), 256 * 9 - 1);
        let l0 = Layout::new(256, 4096, 0).unwrap();
        assert_eq!(l0.total, l0.data_off + 256 * 4096);
        assert!(Layout::new(0, 4096, 8).is_err());
        assert!(Layout::new(1, 4096, 8).is_ok());
    }
}
