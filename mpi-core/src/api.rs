//! The raw API: one function per operation, each reaching the engine for as short a time as it
//! can (under the engine lock, or as the thread that owns it: see `EngineCell`). Blocking
//! functions poll with [`Backoff`] between attempts, with the engine released.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::Instant;

use madmpi_datatypes::Datatype;
use madmpi_pmi::Client;
use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::engine::{Engine, Strategy};
use crate::error::{err, Error, ErrorClass, Result};
use crate::request::{Op, Persistent, RequestId, SendMode, Status, EMPTY_STATUS};
use crate::{CommId, MessageId, ThreadLevel};

struct Global {
    pmi: Option<Client>,
    thread_level: ThreadLevel,
    main_thread: Option<std::thread::ThreadId>,
    appnum: i32,
    universe_size: Option<u32>,
    /// Host name of every world rank.
    hosts: Vec<String>,
}

static GLOBAL: Lazy<Mutex<Global>> = Lazy::new(|| {
    Mutex::new(Global {
        pmi: None,
        thread_level: ThreadLevel::Single,
        main_thread: None,
        appnum: 0,
        universe_size: None,
        hosts: Vec::new(),
    })
});

const UNINIT: u8 = 0;
const RUNNING: u8 = 1;
const FINALIZED: u8 = 2;
static PHASE: AtomicU8 = AtomicU8::new(UNINIT);
static EPOCH: Lazy<Instant> = Lazy::new(Instant::now);

/// Polls before a waiting rank starts yielding its CPU: `MADMPI_SPIN`, else 2000 — or 16 when
/// this host runs more ranks than it has CPUs, where the rank being waited for can only run if
/// the waiting one gives its core away (set at MPI_Init).
static SPIN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(2000);

/// CPUs this process may run on.
fn cpus_available() -> usize {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            return (libc::CPU_COUNT(&set) as usize).max(1);
        }
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Choose the spin budget for `local_ranks` ranks on this host. The CPUs they share are the
/// launcher's (`MADMPI_HOST_CPUS`: a rank it bound to one CPU sees only that one), else this
/// process's.
fn set_spin(local_ranks: usize) {
    let cpus = env_parse("MADMPI_HOST_CPUS").unwrap_or_else(cpus_available);
    let shared = local_ranks > cpus;
    SHARED_CPUS.store(shared, Ordering::Relaxed);
    let spin = env_parse("MADMPI_SPIN").unwrap_or(if shared { 16 } else { 2000 });
    SPIN.store(spin, Ordering::Relaxed);
}

/// This host runs more ranks of the job than it has CPUs (set at MPI_Init).
static SHARED_CPUS: AtomicBool = AtomicBool::new(false);

/// Whether this host runs more ranks of the job than it has CPUs for them (so that some of
/// them take turns on a CPU).
pub(crate) fn cpus_shared() -> bool {
    SHARED_CPUS.load(Ordering::Relaxed)
}

/// Polls made without even a `pause` before a waiting rank backs off.
const FAST_POLLS: u32 = 128;

/// Spin a little, then yield the CPU: waiting never monopolises a core.
pub(crate) struct Backoff {
    n: u32,
    spin: u32,
}

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff::with_spin(SPIN.load(Ordering::Relaxed))
    }

    /// A backoff that yields after at most `spin` polls (and never later than the job's
    /// budget, `MADMPI_SPIN`).
    pub(crate) fn with_spin(spin: u32) -> Backoff {
        Backoff {
            n: 0,
            spin: spin.min(SPIN.load(Ordering::Relaxed)),
        }
    }

    /// Whether the spinning is over: each further `snooze` yields the CPU.
    #[inline]
    pub(crate) fn yielding(&self) -> bool {
        self.n >= self.spin
    }

    #[inline]
    pub(crate) fn snooze(&mut self) {
        if self.n < self.spin {
            self.n += 1;
            // The first polls run back to back: a `pause` costs tens of nanoseconds, which is
            // the latency of a message that is about to arrive.
            if self.n > FAST_POLLS {
                std::hint::spin_loop();
            }
        } else {
            std::thread::yield_now();
        }
    }
}

/// The process is leaving on purpose (MPI_Finalize, MPI_Abort): the launcher may close the
/// connection first.
static LEAVING: AtomicBool = AtomicBool::new(false);

/// Watch the connection to the process manager from a thread of its own, blocked in `poll`
/// (no CPU), and end the process when the connection hangs up while the process is not leaving.
/// A rank whose launcher is gone (killed with SIGKILL, so it could not end the job, and the
/// rank is not its direct child, so the kernel's parent-death signal did not reach it: a
/// wrapper script in between) would otherwise go on waiting for, or talking with, peers
/// forever. Hydra's and Slurm's ranks lose their proxy the same way.
fn watch_lifeline(fd: std::os::fd::RawFd) {
    let spawned = std::thread::Builder::new()
        .name("madmpi-lifeline".into())
        .spawn(move || loop {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLRDHUP,
                revents: 0,
            };
            // SAFETY: one valid pollfd, no timeout.
            let n = unsafe { libc::poll(&mut p, 1, -1) };
            let failed =
                n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted;
            // Leaving, a closed fd, or a poll that cannot work: nothing to watch (and no loop
            // spinning on an error).
            if LEAVING.load(Ordering::Acquire)
                || failed
                || (n == 1 && p.revents & libc::POLLNVAL != 0)
            {
                return;
            }
            let gone = libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR;
            if n == 1 && p.revents & gone != 0 {
                eprintln!(
                    "madmpi: the connection to the launcher (PMI) hung up: the job is gone; \
                     exiting"
                );
                // SAFETY: ends the process at once (other threads may hold the engine's lock).
                unsafe { libc::_exit(1) };
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the launcher watch: {e}");
    }
}

fn env_parse<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// The engine, and how calls reach it.
///
/// At MPI_THREAD_SERIALIZED and MULTIPLE every call takes the engine lock: acquired with one
/// atomic exchange (spinning briefly, then yielding), released with a plain store. (A locked
/// instruction waits until every earlier store of the core has left it; at the end of a call
/// those are its writes to the shared-memory rings, which the other core is reading, so a
/// release by compare-and-swap, as a general-purpose mutex does it, stalls every call for a
/// cross-core transfer.)
///
/// At MPI_THREAD_SINGLE and FUNNELED only the thread that initialized MPI may call it (the
/// standard's rule), so that thread owns the engine and reaches it without the lock: *owner
/// mode*, no atomic read-modify-write per call. Any other thread then gets an error instead of
/// a data race. Owner mode is switched on and off by the owner only, the switch-on under the
/// lock, so a thread that took the lock before sees it when it looks again under the lock.
struct EngineCell {
    /// Owner mode.
    owned: AtomicBool,
    /// The lock; in owner mode, the guard against a re-entrant call (an error, never a second
    /// `&mut Engine`).
    held: AtomicBool,
    engine: UnsafeCell<Option<Engine>>,
}

// SAFETY: the engine is reached only through `with_slot`, which gives one thread at a time a
// reference: the lock holder, or in owner mode the owner (others are refused).
unsafe impl Sync for EngineCell {}

static ENGINE: EngineCell = EngineCell {
    owned: AtomicBool::new(false),
    held: AtomicBool::new(false),
    engine: UnsafeCell::new(None),
};

/// The thread that initialized MPI at MPI_THREAD_SINGLE or FUNNELED (its [`thread_word`], 0
/// for none). A thread id rather than a thread-local flag: in a shared library a thread-local
/// costs a call to `__tls_get_addr` on every MPI call, the thread id one load.
static OWNER_THREAD: AtomicUsize = AtomicUsize::new(0);

/// A word that identifies the calling thread among the live ones, never 0: the address of
/// its thread control block. On x86-64 Linux that is the first word of the `fs` segment (the
/// value `pthread_self` returns, read inline instead of through a call into libc on every MPI
/// call); elsewhere `pthread_self` itself.
#[inline(always)]
fn thread_word() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let tcb: usize;
        // SAFETY: on x86-64 Linux (glibc and musl alike) `fs` points at the thread control
        // block, whose first word is its own address; reading it has no other effect.
        unsafe {
            std::arch::asm!(
                "mov {}, qword ptr fs:[0]",
                out(reg) tcb,
                options(nostack, readonly, preserves_flags, pure)
            )
        };
        tcb
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        // SAFETY: pthread_self has no preconditions.
        unsafe { libc::pthread_self() as usize }
    }
}

/// Whether the calling thread owns the engine.
#[inline(always)]
fn is_owner() -> bool {
    OWNER_THREAD.load(Ordering::Relaxed) == thread_word()
}

/// Clears a flag when dropped (also when `f` panics).
struct Clear<'a>(&'a AtomicBool);

impl Drop for Clear<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Run `f` on the engine slot, alone: see [`EngineCell`].
#[inline]
fn with_slot<T>(f: impl FnOnce(&mut Option<Engine>) -> Result<T>) -> Result<T> {
    let c = &ENGINE;
    if c.owned.load(Ordering::Relaxed) {
        if !is_owner() {
            return not_owner();
        }
        if c.held.load(Ordering::Relaxed) {
            return reentrant();
        }
        c.held.store(true, Ordering::Relaxed);
        let _c = Clear(&c.held);
        // SAFETY: owner mode: only this thread reaches the engine, and `held` keeps it from
        // doing so twice at once.
        return f(unsafe { &mut *c.engine.get() });
    }
    if c.held.swap(true, Ordering::Acquire) {
        let mut b = Backoff::new();
        loop {
            b.snooze();
            if !c.held.load(Ordering::Relaxed) && !c.held.swap(true, Ordering::Acquire) {
                break;
            }
        }
    }
    let _c = Clear(&c.held);
    if c.owned.load(Ordering::Relaxed) {
        // Owner mode began while we waited.
        return if is_owner() { reentrant() } else { not_owner() };
    }
    // SAFETY: we hold the lock.
    f(unsafe { &mut *c.engine.get() })
}

#[cold]
fn not_owner<T>() -> Result<T> {
    err(
        ErrorClass::Other,
        "MPI called from a thread other than the one that initialized it (the thread level is \
         MPI_THREAD_SINGLE or MPI_THREAD_FUNNELED; initialize with MPI_Init_thread and \
         MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE to call MPI from several threads)",
    )
}

#[cold]
fn reentrant<T>() -> Result<T> {
    err(
        ErrorClass::Other,
        "MPI called from inside an MPI call (a callback that calls MPI back)",
    )
}

/// Run `f` on the engine when the calling thread owns it (MPI_THREAD_SINGLE/FUNNELED) and is
/// not already inside it; `None` otherwise (the caller then takes the path through [`with`]).
#[inline(always)]
fn with_owned<T>(f: impl FnOnce(&mut Engine) -> Option<T>) -> Option<T> {
    let c = &ENGINE;
    if !c.owned.load(Ordering::Relaxed) || c.held.load(Ordering::Relaxed) || !is_owner() {
        return None;
    }
    c.held.store(true, Ordering::Relaxed);
    let _c = Clear(&c.held);
    // SAFETY: owner mode, on the owner thread, not re-entered: as in `with_slot`.
    unsafe { &mut *c.engine.get() }.as_mut().and_then(f)
}

/// Run `f` on the engine, alone (see [`EngineCell`]).
#[inline]
pub(crate) fn with<T>(f: impl FnOnce(&mut Engine) -> Result<T>) -> Result<T> {
    with_slot(|slot| match slot.as_mut() {
        Some(e) => f(e),
        None => not_running(),
    })
}

fn not_running<T>() -> Result<T> {
    match PHASE.load(Ordering::Acquire) {
        FINALIZED => err(ErrorClass::Other, "MPI has already been finalized"),
        _ => err(
            ErrorClass::Other,
            "MPI is not initialized (call MPI_Init first)",
        ),
    }
}

/// Hand the packets being built to the drivers at the start of a completion call, which may
/// return without polling (its requests complete already): `aggreg`'s small sends are complete
/// when posted, and their packet must neither wait for some later call nor for this call to
/// take its completions first.
#[inline(always)]
fn send_pending(e: &mut Engine) -> Result<()> {
    if e.st.nothing_queued() {
        return Ok(());
    }
    e.flush()
}

/// Poll the engine until `f` yields a value.
pub(crate) fn wait_until<T>(mut f: impl FnMut(&mut Engine) -> Result<Option<T>>) -> Result<T> {
    let mut b = Backoff::new();
    loop {
        let r = with(|e| {
            send_pending(e)?;
            if let Some(v) = f(e)? {
                return Ok(Some(v));
            }
            if e.progress()? {
                return f(e);
            }
            Ok(None)
        })?;
        if let Some(v) = r {
            return Ok(v);
        }
        b.snooze();
    }
}

// -------------------------------------------------------------------- lifetime

/// MPI_Init_thread: bootstrap through PMI-1 (or as a singleton without a launcher), set up the
/// transports, and return the thread level provided (the engine's lock makes every level safe, so
/// the level asked for is the level given).
pub fn init(required: ThreadLevel) -> Result<ThreadLevel> {
    let mut g = GLOBAL.lock();
    match PHASE.load(Ordering::Acquire) {
        RUNNING => return err(ErrorClass::Other, "MPI_Init called twice"),
        FINALIZED => {
            return err(
                ErrorClass::Other,
                "MPI cannot be initialized again after MPI_Finalize",
            )
        }
        _ => {}
    }
    Lazy::force(&EPOCH);
    let strategy = match std::env::var("MADMPI_STRATEGY") {
        Ok(s) => Strategy::parse(s.trim()).ok_or_else(|| {
            Error::new(
                ErrorClass::Arg,
                format!(
                    "MADMPI_STRATEGY={s}: unknown strategy ({})",
                    Strategy::NAMES
                ),
            )
        })?,
        Err(_) => Strategy::Default,
    };
    let mut pmi = Client::from_env()?;
    crate::log::install(pmi.as_ref().map_or(0, |p| p.rank()));
    let (engine, appnum, universe, hosts) = match pmi.as_mut() {
        None => {
            let drv = crate::bootstrap::singleton()?;
            // A singleton was started by no launcher: MPI_APPNUM is not set (as in MPICH).
            (
                Engine::new(0, 1, drv, strategy, &[]),
                -1,
                Some(1),
                vec![processor_name()],
            )
        }
        Some(p) => {
            let (me, n) = (p.rank(), p.size());
            let _span = tracing::debug_span!("bootstrap", rank = me, size = n).entered();
            let (host, local) = node_of(p, me)?;
            let s = crate::bootstrap::start(p, me, n, &host, &local)?;
            let hosts = s.hosts;
            let here = &hosts[me as usize];
            set_spin(hosts.iter().filter(|h| *h == here).count());
            (
                Engine::new(me, n, s.drivers, strategy, &s.rails),
                p.appnum(),
                p.universe_size(),
                hosts,
            )
        }
    };
    let owner = matches!(required, ThreadLevel::Single | ThreadLevel::Funneled);
    with_slot(|slot| {
        *slot = Some(engine);
        if owner {
            OWNER_THREAD.store(thread_word(), Ordering::Relaxed);
            ENGINE.owned.store(true, Ordering::Relaxed);
        }
        Ok(())
    })?;
    if let Some(p) = pmi.as_ref() {
        watch_lifeline(p.raw_fd());
    }
    g.pmi = pmi;
    g.thread_level = required;
    g.main_thread = Some(std::thread::current().id());
    g.appnum = appnum;
    g.universe_size = universe;
    g.hosts = hosts;
    crate::trace::start(g.pmi.as_ref().map_or(0, |p| p.rank()), &g.hosts);
    tracing::debug!(
        ?strategy,
        spin = SPIN.load(Ordering::Relaxed),
        "MPI_Init done"
    );
    PHASE.store(RUNNING, Ordering::Release);
    Ok(required)
}

/// This rank's host name and the ranks of its node, in rank order (`MADMPI_FAKE_HOSTS=k`, for
/// tests: this host's ranks split into k pseudo-hosts by rank mod k, so that one machine
/// exercises shared memory inside a "host" and TCP across them).
fn node_of(p: &mut Client, me: u32) -> Result<(String, Vec<u32>)> {
    let mut local = p.local_ranks()?;
    let fake_hosts: Option<u32> = env_parse("MADMPI_FAKE_HOSTS").filter(|&k: &u32| k >= 1);
    if let Some(k) = fake_hosts {
        local.retain(|&r| r % k == me % k);
    }
    if !local.contains(&me) {
        return err(
            ErrorClass::Intern,
            "PMI: this rank is not in its own node's list",
        );
    }
    let host = match fake_hosts {
        Some(k) => format!("{}#{}", processor_name(), me % k),
        None => processor_name(),
    };
    Ok((host, local))
}

/// MPI_Finalize: complete buffered and detached traffic, synchronise with the other ranks
/// through PMI, and shut the engine down.
pub fn finalize() -> Result<()> {
    if PHASE.load(Ordering::Acquire) != RUNNING {
        return not_running();
    }
    wait_until(|e| Ok((!e.st.busy()).then_some(())))?;
    let mut g = GLOBAL.lock();
    LEAVING.store(true, Ordering::Release);
    if let Some(mut p) = g.pmi.take() {
        p.barrier()?;
        p.finalize()?;
    }
    with_slot(|slot| {
        *slot = None;
        Ok(())
    })?;
    if is_owner() {
        OWNER_THREAD.store(0, Ordering::Relaxed);
        ENGINE.owned.store(false, Ordering::Release);
    }
    PHASE.store(FINALIZED, Ordering::Release);
    crate::trace::finish();
    Ok(())
}

/// MPI_Initialized.
pub fn initialized() -> bool {
    PHASE.load(Ordering::Acquire) != UNINIT
}

/// MPI_Finalized.
pub fn finalized() -> bool {
    PHASE.load(Ordering::Acquire) == FINALIZED
}

/// MPI_Abort: ask the launcher to end the whole job (it reports `msg`), then exit with `code`
/// reduced to a byte — never 0, so an abort never looks like success. Without a launcher
/// (singleton), `msg` is printed here.
pub fn abort(code: i32, msg: &str) -> ! {
    use std::io::Write;
    LEAVING.store(true, Ordering::Release);
    let _ = std::io::stdout().flush();
    crate::trace::finish_abort();
    let mut told = false;
    if let Some(mut g) = GLOBAL.try_lock_for(std::time::Duration::from_millis(200)) {
        if let Some(p) = g.pmi.as_mut() {
            told = p.abort(code, msg).is_ok();
        }
    }
    if !told && !msg.is_empty() {
        eprintln!("madmpi: MPI_Abort (code {code}): {msg}");
    }
    std::process::exit(exit_code(code))
}

/// The process exit status for MPI_Abort's `code`: its low byte, or 1 when that is 0.
pub fn exit_code(code: i32) -> i32 {
    match code & 0xff {
        0 => 1,
        c => c,
    }
}

/// MPI_Query_thread.
pub fn query_thread() -> ThreadLevel {
    GLOBAL.lock().thread_level
}

/// MPI_Is_thread_main.
pub fn is_thread_main() -> bool {
    GLOBAL.lock().main_thread == Some(std::thread::current().id())
}

/// MPI_Wtime: seconds since an arbitrary point in the past (monotonic).
pub fn wtime() -> f64 {
    EPOCH.elapsed().as_secs_f64()
}

/// MPI_Wtick: resolution of [`wtime`].
pub fn wtick() -> f64 {
    1e-9
}

/// MPI_Get_processor_name.
pub fn processor_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// MPI_APPNUM attribute: the index of this process's part of an MPMD command line (0 for a
/// plain one), or -1 for a singleton (the attribute is then not set).
pub fn appnum() -> i32 {
    GLOBAL.lock().appnum
}

/// MPI_UNIVERSE_SIZE attribute, when the launcher told it.
pub fn universe_size() -> Option<u32> {
    GLOBAL.lock().universe_size
}

// -------------------------------------------------------------------- communicators

/// MPI_Comm_rank.
pub fn comm_rank(c: CommId) -> Result<i32> {
    with(|e| Ok(e.st.comm(c)?.rank))
}

/// MPI_Comm_size.
pub fn comm_size(c: CommId) -> Result<i32> {
    with(|e| Ok(e.st.comm(c)?.size))
}

// -------------------------------------------------------------------- point to point

/// MPI_Isend and its modes. `buf` must stay valid until the request completes.
///
/// # Safety
/// `buf` must point to `count` elements of `dt` and stay valid and unmodified until the request
/// completes.
pub unsafe fn isend(
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    dest: i32,
    tag: i32,
    comm: CommId,
    mode: SendMode,
) -> Result<RequestId> {
    with(|e| {
        // An eager message on an idle gate leaves at once and the request is born complete;
        // `aggreg` copies a small one into the packet it is building instead.
        if matches!(mode, SendMode::Standard | SendMode::Ready) {
            // SAFETY: forwarded caller contract.
            if let Some(r) = unsafe { e.isend_fast(buf, count, dt, dest, tag, comm)? } {
                return Ok(r);
            }
        }
        // SAFETY: forwarded caller contract.
        let r = unsafe { e.st.isend(buf, count, dt, dest, tag, comm, mode, false)? };
        if e.st.strategy == Strategy::Default {
            e.flush()?;
        }
        Ok(r)
    })
}

/// The fast path of a standard-mode MPI_Isend, for the thread that owns the engine
/// (MPI_THREAD_SINGLE/FUNNELED): the eager fast path (`default`) or the packet being built
/// (`aggreg`). `None`, having done nothing, when the send needs [`isend`] (which also reports
/// every error).
///
/// # Safety
/// As [`isend`].
#[inline]
pub unsafe fn isend_now(
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    dest: i32,
    tag: i32,
    comm: CommId,
) -> Option<RequestId> {
    // SAFETY: forwarded caller contract.
    with_owned(|e| unsafe { e.isend_fast(buf, count, dt, dest, tag, comm) }.ok()?)
}

/// The fast path of a standard-mode MPI_Send, for the thread that owns the engine: a small
/// contiguous message to an idle gate leaves at once (the engine's `try_send_now`). False,
/// having done nothing, when the send needs [`send`].
///
/// # Safety
/// As [`send`].
#[inline]
pub unsafe fn send_now(
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    dest: i32,
    tag: i32,
    comm: CommId,
) -> bool {
    with_owned(|e| {
        // Packets being built leave at this call: the checked path sends them.
        if !e.st.nothing_queued() {
            return None;
        }
        // SAFETY: forwarded caller contract.
        unsafe { e.try_send_now(buf, count, dt, dest, tag, comm, 0, false) }.ok()?
    })
    .is_some()
}

/// The fast path of MPI_Recv, for the thread that owns the engine: a receive that can be posted
/// at once (see [`irecv_now`]), then waited for. `None`, having done nothing, when the receive
/// needs [`recv`].
///
/// # Safety
/// As [`recv`].
#[inline]
pub unsafe fn recv_now(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    src: i32,
    tag: i32,
    comm: CommId,
) -> Option<Result<Status>> {
    // Post, then poll once, in one visit: the message is often already there.
    let first = with_owned(|e| {
        // SAFETY: forwarded caller contract.
        let r = unsafe { e.st.irecv_posted(buf, count, dt, src, tag, comm) }?;
        Some(e.progress().map(|_| match take_done(e, r) {
            Taken::Done(c) => Err(c.status),
            _ => Ok(r),
        }))
    })?;
    Some(match first {
        Err(e) => Err(e),
        Ok(Err(status)) => Ok(status),
        Ok(Ok(r)) => wait(r),
    })
}

/// The fast path of MPI_Irecv, for the thread that owns the engine: a receive of a contiguous
/// type with valid arguments and nothing unexpected on its communicator is posted. `None`,
/// having done nothing, when the receive needs [`irecv`].
///
/// # Safety
/// As [`irecv`].
#[inline(always)]
pub unsafe fn irecv_now(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    src: i32,
    tag: i32,
    comm: CommId,
) -> Option<RequestId> {
    with_owned(|e| {
        // Packets being built leave at this call: the checked path sends them.
        if !e.st.nothing_queued() {
            return None;
        }
        // SAFETY: forwarded caller contract.
        unsafe { e.st.irecv_posted(buf, count, dt, src, tag, comm) }
    })
}

/// MPI_Send and its blocking modes.
///
/// # Safety
/// As [`isend`], until the call returns.
pub unsafe fn send(
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    dest: i32,
    tag: i32,
    comm: CommId,
    mode: SendMode,
) -> Result<()> {
    // Post and try to complete under one lock: an eager send usually leaves at once.
    let r = with(|e| {
        if matches!(mode, SendMode::Standard | SendMode::Ready)
            // SAFETY: forwarded caller contract.
            && unsafe { e.try_send_now(buf, count, dt, dest, tag, comm, 0, false)? }.is_some()
        {
            return Ok(Err(Completion {
                status: EMPTY_STATUS,
                freed: true,
            }));
        }
        // SAFETY: forwarded caller contract.
        let r = unsafe { e.st.isend(buf, count, dt, dest, tag, comm, mode, false)? };
        e.flush()?;
        Ok(match take_if_complete(e, r)? {
            Some(c) => Err(c),
            None => Ok(r),
        })
    })?;
    match r {
        Err(done) => status_result(done.status),
        Ok(r) => wait(r).and_then(status_result),
    }
}

/// A send's status as a result (a send fails only when its peer died).
fn status_result(s: Status) -> Result<()> {
    match s.error {
        Some(ErrorClass::ProcAborted) => {
            err(ErrorClass::ProcAborted, "the destination process has died")
        }
        _ => Ok(()),
    }
}

/// MPI_Irecv.
///
/// # Safety
/// `buf` must be valid for writes of `count` elements of `dt` until the request completes.
pub unsafe fn irecv(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    src: i32,
    tag: i32,
    comm: CommId,
) -> Result<RequestId> {
    with(|e| {
        // SAFETY: forwarded caller contract.
        let r = unsafe { e.st.irecv(buf, count, dt, src, tag, comm, false)? };
        e.flush()?;
        Ok(r)
    })
}

/// MPI_Recv. Returns the status; a truncated message is reported in `status.error`.
///
/// # Safety
/// As [`irecv`], until the call returns.
pub unsafe fn recv(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    src: i32,
    tag: i32,
    comm: CommId,
) -> Result<Status> {
    // Post, then poll once, under one lock: the message is often already there.
    let r = with(|e| {
        // SAFETY: forwarded caller contract.
        let r = unsafe { e.st.irecv(buf, count, dt, src, tag, comm, false)? };
        if let Some(c) = take_if_complete(e, r)? {
            return Ok(Err(c.status));
        }
        e.progress()?;
        Ok(match take_if_complete(e, r)? {
            Some(c) => Err(c.status),
            None => Ok(r),
        })
    })?;
    match r {
        Err(status) => Ok(status),
        Ok(r) => wait(r),
    }
}

/// MPI_Send_init (and Ssend/Rsend/Bsend_init): an inactive persistent request.
///
/// # Safety
/// `buf` must be valid each time the request is started, until it completes.
pub unsafe fn send_init(
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    dest: i32,
    tag: i32,
    comm: CommId,
    mode: SendMode,
) -> Result<RequestId> {
    let dt = dt.clone();
    with(|e| {
        e.st.persistent(Persistent::Send {
            buf,
            count,
            dt,
            dest,
            tag,
            comm,
            mode,
        })
    })
}

/// MPI_Recv_init.
///
/// # Safety
/// As [`send_init`].
pub unsafe fn recv_init(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    src: i32,
    tag: i32,
    comm: CommId,
) -> Result<RequestId> {
    let dt = dt.clone();
    with(|e| {
        e.st.persistent(Persistent::Recv {
            buf,
            count,
            dt,
            src,
            tag,
            comm,
        })
    })
}

/// MPI_Start.
pub fn start(r: RequestId) -> Result<()> {
    with(|e| {
        e.st.start(r)?;
        if e.st.strategy == Strategy::Default {
            e.flush()?;
        }
        Ok(())
    })
}

/// A completed operation: its status, and whether the request was freed (non-persistent) —
/// the C layer then sets the handle to MPI_REQUEST_NULL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The status of the operation.
    pub status: Status,
    /// The request no longer exists.
    pub freed: bool,
}

/// Take the completion of `r` if it is complete (inactive persistent requests complete at once
/// with the empty status).
#[inline]
fn take_if_complete(e: &mut Engine, r: RequestId) -> Result<Option<Completion>> {
    match take_done(e, r) {
        Taken::Done(c) => Ok(Some(c)),
        Taken::Pending => Ok(None),
        Taken::Invalid => err(ErrorClass::Request, "invalid request handle"),
    }
}

/// What [`take_done`] found.
enum Taken {
    Done(Completion),
    Pending,
    Invalid,
}

/// [`take_if_complete`] without the error value (for loops that checked the handles).
#[inline(always)]
fn take_done(e: &mut Engine, r: RequestId) -> Taken {
    let Some(req) = e.st.reqs.get_mut(r) else {
        return Taken::Invalid;
    };
    if !req.active {
        return Taken::Done(Completion {
            status: EMPTY_STATUS,
            freed: false,
        });
    }
    if !req.complete {
        return Taken::Pending;
    }
    let status = req.status;
    if req.persistent.is_some() {
        req.active = false;
        req.op = Op::None;
        Taken::Done(Completion {
            status,
            freed: false,
        })
    } else {
        e.st.reqs.free(r);
        Taken::Done(Completion {
            status,
            freed: true,
        })
    }
}

/// MPI_Test.
pub fn test(r: RequestId) -> Result<Option<Completion>> {
    with(|e| {
        send_pending(e)?;
        if let Some(c) = take_if_complete(e, r)? {
            return Ok(Some(c));
        }
        e.progress()?;
        take_if_complete(e, r)
    })
}

/// MPI_Wait: the status, with `freed` as for [`test()`](fn@test).
pub fn wait_completion(r: RequestId) -> Result<Completion> {
    wait_until(|e| take_if_complete(e, r))
}

/// MPI_Wait, for callers that do not keep handles (the request is freed if not persistent).
pub fn wait(r: RequestId) -> Result<Status> {
    wait_completion(r).map(|c| c.status)
}

/// MPI_Request_get_status: the status if complete, without freeing.
pub fn request_get_status(r: RequestId) -> Result<Option<Status>> {
    with(|e| {
        let check = |e: &mut Engine| -> Result<Option<Status>> {
            let req =
                e.st.reqs
                    .get(r)
                    .ok_or_else(|| Error::new(ErrorClass::Request, "invalid request handle"))?;
            Ok(if !req.active {
                Some(EMPTY_STATUS)
            } else if req.complete {
                Some(req.status)
            } else {
                None
            })
        };
        if let Some(s) = check(e)? {
            return Ok(Some(s));
        }
        e.progress()?;
        check(e)
    })
}

/// One pass of progress on every driver.
pub fn progress() -> Result<bool> {
    with(|e| e.progress())
}

/// MPI_Waitany over `reqs` (None entries are MPI_REQUEST_NULL). Returns None when every entry is
/// null or an inactive persistent request (the standard's MPI_UNDEFINED case).
pub fn wait_any(reqs: &[Option<RequestId>]) -> Result<Option<(usize, Completion)>> {
    if !reqs.iter().any(|r| r.is_some()) {
        return Ok(None);
    }
    wait_until(|e| {
        let mut any_active = false;
        for (i, r) in reqs.iter().enumerate() {
            let Some(r) = *r else { continue };
            let req = e.st.reqs.get(r).ok_or_else(|| {
                Error::new(
                    ErrorClass::Request,
                    format!("invalid request handle at index {i}"),
                )
            })?;
            if !req.active {
                continue;
            }
            any_active = true;
            if req.complete {
                let c = take_if_complete(e, r)?.expect("complete");
                return Ok(Some(Some((i, c))));
            }
        }
        Ok(if any_active { None } else { Some(None) })
    })
}

/// MPI_Testany: `Ok(Err(()))`-free form: `Some(Some(..))` one completed, `Some(None)` no active
/// request (MPI_UNDEFINED with flag true), `None` nothing completed yet.
pub fn test_any(reqs: &[Option<RequestId>]) -> Result<Option<Option<(usize, Completion)>>> {
    with(|e| {
        e.progress()?;
        let mut any_active = false;
        for (i, r) in reqs.iter().enumerate() {
            let Some(r) = *r else { continue };
            let req = e.st.reqs.get(r).ok_or_else(|| {
                Error::new(
                    ErrorClass::Request,
                    format!("invalid request handle at index {i}"),
                )
            })?;
            if !req.active {
                continue;
            }
            any_active = true;
            if req.complete {
                let c = take_if_complete(e, r)?.expect("complete");
                return Ok(Some(Some((i, c))));
            }
        }
        Ok(if any_active { None } else { Some(None) })
    })
}

/// Collect every completed active request of `reqs` (for Testsome/Waitsome). Returns None when no
/// request is active (MPI_UNDEFINED).
fn some_complete(
    e: &mut Engine,
    reqs: &[Option<RequestId>],
) -> Result<Option<Vec<(usize, Completion)>>> {
    let mut any_active = false;
    let mut done = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let Some(r) = *r else { continue };
        let req = e.st.reqs.get(r).ok_or_else(|| {
            Error::new(
                ErrorClass::Request,
                format!("invalid request handle at index {i}"),
            )
        })?;
        if !req.active {
            continue;
        }
        any_active = true;
        if req.complete {
            done.push((i, take_if_complete(e, r)?.expect("complete")));
        }
    }
    Ok(if any_active { Some(done) } else { None })
}

/// MPI_Waitsome: at least one completion, or None when no request is active.
pub fn wait_some(reqs: &[Option<RequestId>]) -> Result<Option<Vec<(usize, Completion)>>> {
    wait_until(|e| {
        Ok(match some_complete(e, reqs)? {
            None => Some(None),
            Some(v) if v.is_empty() => None,
            Some(v) => Some(Some(v)),
        })
    })
}

/// MPI_Testsome: the completions now (possibly none), or None when no request is active.
pub fn test_some(reqs: &[Option<RequestId>]) -> Result<Option<Vec<(usize, Completion)>>> {
    with(|e| {
        e.progress()?;
        some_complete(e, reqs)
    })
}

/// Whether every request of `reqs` from `*from` on is complete (inactive ones count as
/// complete). `*from` moves past the ones found complete: they stay complete, so a wait loop
/// never looks at them again.
#[inline]
fn complete_from(e: &Engine, reqs: &[Option<RequestId>], from: &mut usize) -> Result<bool> {
    while let Some(&r) = reqs.get(*from) {
        if let Some(r) = r {
            let req = e.st.reqs.get(r).ok_or_else(|| bad_request_at(*from))?;
            if req.active && !req.complete {
                return Ok(false);
            }
        }
        *from += 1;
    }
    Ok(true)
}

/// Take the completions of `reqs`, all complete (checked under the same lock).
fn take_all(
    e: &mut Engine,
    reqs: &[Option<RequestId>],
    out: &mut [Option<Completion>],
) -> Result<()> {
    for (r, o) in reqs.iter().zip(out.iter_mut()) {
        *o = match *r {
            None => None,
            Some(r) => Some(
                take_if_complete(e, r)?
                    .ok_or_else(|| Error::new(ErrorClass::Intern, "request not complete"))?,
            ),
        };
    }
    Ok(())
}

/// Whether every active request of `reqs` is complete (MPI_Request_get_status_all's flag),
/// without taking any.
pub fn all_complete(reqs: &[Option<RequestId>]) -> Result<bool> {
    with(|e| {
        send_pending(e)?;
        let mut from = 0;
        if complete_from(e, reqs, &mut from)? {
            return Ok(true);
        }
        e.progress()?;
        complete_from(e, reqs, &mut from)
    })
}

/// MPI_Testall: if every request of `reqs` is complete, their completions go to `out` (`None`
/// for `None` entries) and the result is true; else nothing is taken.
pub fn test_all(reqs: &[Option<RequestId>], out: &mut [Option<Completion>]) -> Result<bool> {
    with(|e| {
        send_pending(e)?;
        let mut from = 0;
        if !complete_from(e, reqs, &mut from)? {
            e.progress()?;
            if !complete_from(e, reqs, &mut from)? {
                return Ok(false);
            }
        }
        take_all(e, reqs, out)?;
        Ok(true)
    })
}

/// MPI_Waitall: wait until every request of `reqs` is complete, and take their completions
/// (see [`wait_all_with`]).
pub fn wait_all(reqs: &[Option<RequestId>], out: &mut [Option<Completion>]) -> Result<()> {
    out.fill(None);
    wait_all_with(reqs, |r| *r, |i, c| out[i] = Some(*c))
}

/// MPI_Waitall without a completion array: `rid(&items[i])` names the request of entry `i`
/// (`None`: a null one); each is taken once complete and handed to `each(i, completion)`
/// (nothing for null entries). Requests are taken in order as they complete; in addition, the
/// first time a request is found pending, the next [`AHEAD`] ones that are already complete
/// are taken at once (sends complete at posting, typically, listed after receives): that work
/// is then done while the receives are awaited rather than after they arrive. So `each` sees
/// indices in order except for those. `each` runs with the engine held: it must not call MPI.
/// An invalid request fails the call (some requests may have been taken).
pub fn wait_all_with<T>(
    items: &[T],
    rid: impl Fn(&T) -> Option<RequestId>,
    mut each: impl FnMut(usize, &Completion),
) -> Result<()> {
    let mut from = 0;
    // Bit `i` of `early`: entry `base + i` was taken ahead of the in-order scan.
    let (mut base, mut early) = (usize::MAX, 0u64);
    wait_until(|e| {
        while let Some(it) = items.get(from) {
            let ahead = from.wrapping_sub(base);
            if ahead < AHEAD && early >> ahead & 1 != 0 {
                from += 1;
                continue;
            }
            if let Some(r) = rid(it) {
                match take_done(e, r) {
                    Taken::Done(c) => each(from, &c),
                    Taken::Pending => {
                        if base == usize::MAX {
                            base = from + 1;
                            early = take_ahead(e, items, base, &rid, &mut each)?;
                        }
                        return Ok(None);
                    }
                    Taken::Invalid => return Err(bad_request_at(from)),
                }
            }
            from += 1;
        }
        Ok(Some(()))
    })
}

/// Entries [`wait_all_with`] looks at ahead of the first pending one (the bits of a word).
const AHEAD: usize = 64;

/// The look ahead of [`wait_all_with`]: take every request of `items[base..base + AHEAD]` that
/// is complete now; bit `i` of the result says entry `base + i` was taken.
#[inline(never)]
fn take_ahead<T>(
    e: &mut Engine,
    items: &[T],
    base: usize,
    rid: &impl Fn(&T) -> Option<RequestId>,
    each: &mut impl FnMut(usize, &Completion),
) -> Result<u64> {
    let mut taken = 0u64;
    for (k, it) in items.iter().skip(base).take(AHEAD).enumerate() {
        if let Some(r) = rid(it) {
            match take_done(e, r) {
                Taken::Done(c) => {
                    each(base + k, &c);
                    taken |= 1 << k;
                }
                Taken::Pending => {}
                Taken::Invalid => return Err(bad_request_at(base + k)),
            }
        }
    }
    Ok(taken)
}

#[cold]
fn bad_request_at(i: usize) -> Error {
    Error::new(
        ErrorClass::Request,
        format!("invalid request handle at index {i}"),
    )
}

/// MPI_Request_free: the request is freed now if complete, else when it completes.
pub fn request_free(r: RequestId) -> Result<()> {
    with(|e| {
        let req =
            e.st.reqs
                .get_mut(r)
                .ok_or_else(|| Error::new(ErrorClass::Request, "invalid request handle"))?;
        if !req.active || req.complete {
            e.st.reqs.free(r);
        } else {
            req.detached = true;
            req.persistent = None;
        }
        Ok(())
    })
}

/// MPI_Cancel.
pub fn cancel(r: RequestId) -> Result<()> {
    with(|e| {
        e.st.cancel(r)?;
        e.flush()?;
        // A send to self is withdrawn by our own progress alone (the request to drop the
        // message and its answer go through the self driver): settle it now, so that the next
        // MPI_Test or MPI_Request_get_status finds it complete and cancelled, as in MPICH. A
        // few passes suffice; the bound only guards against a bug turning this into a hang.
        for _ in 0..16 {
            if !e.st.cancel_to_self_pending(r) {
                break;
            }
            e.progress()?;
        }
        Ok(())
    })
}

/// MPI_Iprobe.
pub fn iprobe(src: i32, tag: i32, comm: CommId) -> Result<Option<Status>> {
    with(|e| {
        if let Some(s) = e.st.iprobe(src, tag, comm)? {
            return Ok(Some(s));
        }
        e.progress()?;
        e.st.iprobe(src, tag, comm)
    })
}

/// MPI_Probe.
pub fn probe(src: i32, tag: i32, comm: CommId) -> Result<Status> {
    wait_until(|e| e.st.iprobe(src, tag, comm))
}

/// MPI_Improbe.
pub fn improbe(src: i32, tag: i32, comm: CommId) -> Result<Option<(MessageId, Status)>> {
    with(|e| {
        if let Some(s) = e.st.improbe(src, tag, comm)? {
            return Ok(Some(s));
        }
        e.progress()?;
        e.st.improbe(src, tag, comm)
    })
}

/// MPI_Mprobe.
pub fn mprobe(src: i32, tag: i32, comm: CommId) -> Result<(MessageId, Status)> {
    wait_until(|e| e.st.improbe(src, tag, comm))
}

/// MPI_Imrecv.
///
/// # Safety
/// As [`irecv`].
pub unsafe fn imrecv(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    msg: MessageId,
) -> Result<RequestId> {
    with(|e| {
        // SAFETY: forwarded caller contract.
        let r = unsafe { e.st.imrecv(buf, count, dt, msg)? };
        e.flush()?;
        Ok(r)
    })
}

/// MPI_Buffer_attach.
pub fn buffer_attach(base: *mut u8, size: usize) -> Result<()> {
    with(|e| e.st.buffer_attach(base as usize, size))
}

/// MPI_Buffer_detach: waits until every buffered message has been handed off, then returns the
/// buffer that was attached.
pub fn buffer_detach() -> Result<(*mut u8, usize)> {
    let b = wait_until(|e| {
        if e.st.bsend.in_use() {
            return Ok(None);
        }
        Ok(Some(std::mem::take(&mut e.st.bsend)))
    })?;
    if b.size == 0 {
        return err(ErrorClass::Buffer, "no buffer is attached");
    }
    Ok((b.base as *mut u8, b.size))
}

/// Size of MPI_COMM_WORLD.
pub fn world_size() -> Result<u32> {
    with(|e| Ok(e.st.nprocs))
}

/// The ranks found dead so far (world rank, host), in the order they were found: for the
/// message of MPI_ERR_PROC_ABORTED errors.
pub fn lost_ranks() -> Vec<(u32, String)> {
    let lost = with(|e| Ok(e.st.lost.clone())).unwrap_or_default();
    let g = GLOBAL.lock();
    lost.into_iter()
        .map(|r| (r, g.hosts.get(r as usize).cloned().unwrap_or_default()))
        .collect()
}

/// Host name of world rank `r`, when known.
pub fn rank_host(r: u32) -> Option<String> {
    GLOBAL
        .lock()
        .hosts
        .get(r as usize)
        .cloned()
        .filter(|h| !h.is_empty())
}

// -------------------------------------------------------------------- communicator management

/// What the engine knows of a communicator.
#[derive(Clone, Debug)]
pub struct CommInfo {
    /// Point-to-point context id (even); collectives use `ctx + 1`.
    pub ctx: u32,
    /// This process's rank in the local group.
    pub rank: i32,
    /// World ranks of the local group.
    pub local: std::sync::Arc<[u32]>,
    /// World ranks of the remote group (intercommunicators).
    pub remote: Option<std::sync::Arc<[u32]>>,
}

/// The engine's view of communicator `c`.
pub fn comm_info(c: CommId) -> Result<CommInfo> {
    with(|e| {
        let cm = e.st.comm(c)?;
        Ok(CommInfo {
            ctx: cm.ctx,
            rank: cm.rank,
            local: cm.world.clone(),
            remote: cm.remote.clone(),
        })
    })
}

/// This process's rank in MPI_COMM_WORLD.
pub fn world_rank() -> Result<u32> {
    with(|e| Ok(e.st.comm(crate::COMM_WORLD)?.rank as u32))
}

#[cfg(test)]
mod tests {
    use super::thread_word;

    #[test]
    fn thread_word_names_the_calling_thread() {
        let here = thread_word();
        assert_ne!(here, 0);
        assert_eq!(here, thread_word());
        // SAFETY: pthread_self has no preconditions.
        #[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
        assert_eq!(here, unsafe { libc::pthread_self() } as usize);
        let other = std::thread::spawn(thread_word).join().unwrap();
        assert_ne!(other, 0);
        assert_ne!(other, here);
    }
}
