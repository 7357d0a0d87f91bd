//! The library's lifetime and process-wide state: MPI_Init (bootstrap through PMI, the engine
//! set up), MPI_Finalize, MPI_Abort, the launcher watch, and what is known of the job and its
//! hosts (thread level, appnum, universe size, host names, wall clock).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::time::Instant;

use madmpi_pmi::Client;
use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::engine_slot::{
    is_owner, not_running, thread_word, with, with_slot, ENGINE, OWNER_THREAD,
};
use super::env_parse;
use super::wait::{set_spin, wait_until, SPIN};
use crate::engine::{BufferOwner, Engine, Strategy};
use crate::error::{err, Error, ErrorClass, Result};
use crate::{SessionId, ThreadLevel};

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
pub(super) const FINALIZED: u8 = 2;
pub(super) static PHASE: AtomicU8 = AtomicU8::new(UNINIT);
static EPOCH: Lazy<Instant> = Lazy::new(Instant::now);

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
    if ENGINE_UP.load(Ordering::Acquire) {
        // Sessions started the engine: the world model joins it. Other threads may be using
        // their sessions, so the engine keeps its lock (no owner mode), which serves every
        // thread level.
        g.thread_level = required;
        g.main_thread = Some(std::thread::current().id());
        PHASE.store(RUNNING, Ordering::Release);
        return Ok(required);
    }
    if SHUT_DOWN.load(Ordering::Acquire) {
        return err(
            ErrorClass::Other,
            "MPI cannot be initialized again after the library was shut down",
        );
    }
    start_engine(&mut g, required, true)?;
    g.main_thread = Some(std::thread::current().id());
    PHASE.store(RUNNING, Ordering::Release);
    Ok(required)
}

/// Bootstrap and start the engine (for MPI_Init, or the first MPI_Session_init): `owner`
/// lets a single-threaded level take owner mode.
fn start_engine(g: &mut Global, required: ThreadLevel, owner: bool) -> Result<()> {
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
        Err(_) => Strategy::Adaptive,
    };
    let pack_flush: usize = env_number("MADMPI_PACK_FLUSH", "a number of bytes (0: off)")?;
    let pack_count: u32 = env_number(
        "MADMPI_PACK_COUNT",
        "a number of sends (0: the transport's)",
    )?;
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
    let mut engine = engine;
    if pack_flush > 0 {
        engine.st.set_pack_flush(pack_flush);
    }
    engine.st.set_pack_count(pack_count);
    let owner = owner && matches!(required, ThreadLevel::Single | ThreadLevel::Funneled);
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
    g.appnum = appnum;
    g.universe_size = universe;
    g.hosts = hosts;
    crate::trace::start(g.pmi.as_ref().map_or(0, |p| p.rank()), &g.hosts);
    tracing::debug!(
        ?strategy,
        spin = SPIN.load(Ordering::Relaxed),
        "engine started"
    );
    ENGINE_UP.store(true, Ordering::Release);
    Ok(())
}

/// The engine is running (the world model, a session, or both use it).
static ENGINE_UP: AtomicBool = AtomicBool::new(false);
/// The engine was shut down (the PMI connection is closed): it cannot start again.
static SHUT_DOWN: AtomicBool = AtomicBool::new(false);
/// Sessions initialized and not finalized.
static SESSIONS: AtomicU32 = AtomicU32::new(0);
/// The number of the last session started.
static LAST_SESSION: AtomicU32 = AtomicU32::new(0);

/// Whether the engine runs: MPI calls may be made (through the world model or a session).
pub fn active() -> bool {
    ENGINE_UP.load(Ordering::Acquire)
}

/// MPI_Session_init's part in the library's lifetime: starts the engine when nothing else
/// has (the process may never call MPI_Init), at `level` (`MPI_THREAD_MULTIPLE` when the info
/// asks for nothing: the engine's lock serves every level). Returns the level provided and the
/// new session's id.
pub fn session_start(level: ThreadLevel) -> Result<(ThreadLevel, SessionId)> {
    let mut g = GLOBAL.lock();
    if !ENGINE_UP.load(Ordering::Acquire) {
        if SHUT_DOWN.load(Ordering::Acquire) {
            return err(
                ErrorClass::Other,
                "MPI cannot start a session after the library was shut down (by the last of \
                 MPI_Finalize and the finalization of the sessions open at that time)",
            );
        }
        start_engine(&mut g, level, false)?;
    }
    SESSIONS.fetch_add(1, Ordering::AcqRel);
    let id = SessionId(LAST_SESSION.fetch_add(1, Ordering::AcqRel) + 1);
    let provided = if PHASE.load(Ordering::Acquire) == RUNNING {
        g.thread_level
    } else {
        level
    };
    Ok((provided, id))
}

/// MPI_Session_finalize's part: the session's traffic completes (its buffered sends too: its
/// buffer, if one is attached, is detached as MPI_Session_detach_buffer would). When it was the last
/// session: after MPI_Finalize, the engine stops now (MPI_Finalize left it running for the
/// sessions); in a process that never called MPI_Init, the ranks synchronise as MPI_Finalize
/// does (PMI barrier) but the engine stays, so that a later MPI_Session_init, or MPI_Init,
/// reuses it (sessions may be initialized again), and the process says goodbye to the launcher
/// (PMI finalize) when it exits.
pub fn session_end(id: SessionId) -> Result<()> {
    if !ENGINE_UP.load(Ordering::Acquire) {
        return not_running();
    }
    wait_until(|e| Ok((!e.st.busy()).then_some(())))?;
    // Nothing is in flight any more, buffered sends included (they are detached requests).
    with(|e| {
        e.st.bsends.forget(BufferOwner::Session(id));
        Ok(())
    })?;
    let mut g = GLOBAL.lock();
    let left = SESSIONS.fetch_sub(1, Ordering::AcqRel).saturating_sub(1);
    if left == 0 {
        match PHASE.load(Ordering::Acquire) {
            RUNNING => {}
            FINALIZED => shut_down(&mut g)?,
            _ => {
                if let Some(p) = g.pmi.as_mut() {
                    p.barrier()?;
                }
                static HOOKED: std::sync::Once = std::sync::Once::new();
                // SAFETY: registers a plain `extern "C"` function without arguments.
                HOOKED.call_once(|| unsafe {
                    libc::atexit(leave_at_exit);
                });
            }
        }
    }
    Ok(())
}

/// At the exit of a process whose sessions are all finalized and that is not inside the world
/// model: tell the launcher it finalized (the ranks synchronised at the last
/// MPI_Session_finalize). A process that exits with a session open, or between MPI_Init and
/// MPI_Finalize, is left as before: it did not finalize.
extern "C" fn leave_at_exit() {
    if !ENGINE_UP.load(Ordering::Acquire)
        || SESSIONS.load(Ordering::Acquire) > 0
        || PHASE.load(Ordering::Acquire) == RUNNING
    {
        return;
    }
    LEAVING.store(true, Ordering::Release);
    if let Some(mut g) = GLOBAL.try_lock_for(std::time::Duration::from_millis(200)) {
        if let Some(mut p) = g.pmi.take() {
            let _ = p.finalize();
        }
    }
    crate::trace::finish();
}

/// Leave the job: synchronise with the other ranks through PMI and drop the engine.
fn shut_down(g: &mut Global) -> Result<()> {
    LEAVING.store(true, Ordering::Release);
    if let Some(mut p) = g.pmi.take() {
        p.barrier()?;
        p.finalize()?;
    }
    with_slot(|slot| {
        if let Some(e) = slot.as_ref() {
            crate::trace::driver_counters(&e.drv.list);
            crate::tool::pvars::engine_stops(e);
        }
        *slot = None;
        Ok(())
    })?;
    if is_owner() {
        OWNER_THREAD.store(0, Ordering::Relaxed);
        ENGINE.owned.store(false, Ordering::Release);
    }
    ENGINE_UP.store(false, Ordering::Release);
    SHUT_DOWN.store(true, Ordering::Release);
    crate::trace::finish();
    Ok(())
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
    super::progress::shutdown();
    wait_until(|e| Ok((!e.st.busy()).then_some(())))?;
    let mut g = GLOBAL.lock();
    if SESSIONS.load(Ordering::Acquire) > 0 {
        // Sessions still use the engine: the last one's MPI_Session_finalize stops it.
        PHASE.store(FINALIZED, Ordering::Release);
        return Ok(());
    }
    shut_down(&mut g)?;
    PHASE.store(FINALIZED, Ordering::Release);
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

/// Runs `f` with the connection to the process manager (`None` in a singleton, or once the
/// process left the job), holding the process-wide state's lock so that PMI requests from
/// several threads do not interleave.
pub(crate) fn with_pmi<R>(f: impl FnOnce(Option<&mut Client>) -> R) -> R {
    f(GLOBAL.lock().pmi.as_mut())
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

/// The nodes of the job: the world ranks of each host, in rank order, the nodes in the order
/// of their first rank (the psets `madmpi://node/<n>` of the sessions model).
pub fn nodes() -> Vec<Vec<u32>> {
    let g = GLOBAL.lock();
    let mut out: Vec<(String, Vec<u32>)> = Vec::new();
    for (r, h) in g.hosts.iter().enumerate() {
        match out.iter_mut().find(|(x, _)| x == h) {
            Some((_, v)) => v.push(r as u32),
            None => out.push((h.clone(), vec![r as u32])),
        }
    }
    out.into_iter().map(|(_, v)| v).collect()
}

/// The number in environment variable `name` (0 when unset), or an `MPI_ERR_ARG` saying it
/// expected `what`.
fn env_number<T: std::str::FromStr + Default>(name: &str, what: &str) -> Result<T> {
    match std::env::var(name) {
        Ok(s) => s
            .trim()
            .parse::<T>()
            .map_err(|_| Error::new(ErrorClass::Arg, format!("{name}={s}: expected {what}"))),
        Err(_) => Ok(T::default()),
    }
}
