//! Waiting: how a blocked rank polls (spin, then yield the CPU: [`Backoff`], with its budget
//! chosen at MPI_Init), polling the engine until a condition holds, and the completion calls
//! (test, wait and their any/some/all variants, request status, free and cancel).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::engine_slot::with;
use super::env_parse;
use super::watch::after_yield;
use crate::engine::Engine;
use crate::error::{err, Error, ErrorClass, Result};
use crate::request::{Op, RequestId, Status, EMPTY_STATUS};

/// Polls before a waiting rank starts yielding its CPU: `MADMPI_SPIN`, else 2000 — or 16 when
/// this host runs more ranks than it has CPUs, where the rank being waited for can only run if
/// the waiting one gives its core away (set at MPI_Init).
pub(super) static SPIN: AtomicU32 = AtomicU32::new(2000);

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

/// The spin budget now (the tool interface's `MADMPI_SPIN`).
pub fn spin_budget() -> u32 {
    SPIN.load(Ordering::Relaxed)
}

/// Set the spin budget at run time (the tool interface's `MADMPI_SPIN`): every wait and
/// polling call reads it afresh.
pub fn set_spin_budget(v: u32) {
    SPIN.store(v, Ordering::Relaxed);
}

/// Choose the spin budget for `local_ranks` ranks on this host. The CPUs they share are the
/// launcher's (`MADMPI_HOST_CPUS`: a rank it bound to one CPU sees only that one), else this
/// process's.
pub(super) fn set_spin(local_ranks: usize) {
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

    /// Wait a little: `true` when it yielded the CPU (the spinning is over).
    #[inline]
    pub(crate) fn snooze(&mut self) -> bool {
        if self.n < self.spin {
            self.n += 1;
            // The first polls run back to back: a `pause` costs tens of nanoseconds, which is
            // the latency of a message that is about to arrive.
            if self.n > FAST_POLLS {
                std::hint::spin_loop();
            }
            false
        } else {
            std::thread::yield_now();
            // Past `spin`, `n` counts the yields ([`Backoff::snooze_watched`]); wrapping
            // back to 0 after 2^32 of them only means a few polls without a yield.
            self.n = self.n.wrapping_add(1);
            true
        }
    }

    /// [`Backoff::snooze`], and once it yields the CPU, look for dead peers now and then (see
    /// `watch::after_yield`): what waits for a peer that died without a word then fails
    /// instead of hanging. `true` when it yielded.
    #[inline]
    pub(crate) fn snooze_watched(&mut self) -> Result<bool> {
        if !self.snooze() {
            return Ok(false);
        }
        after_yield(self.n.wrapping_sub(self.spin))?;
        Ok(true)
    }
}

/// Polling calls in a row (MPI_Test, MPI_Iprobe and their kin, counted across calls) that
/// found nothing. An application that waits by calling them in a loop never blocks in MPI, so
/// no [`Backoff`] gives its CPU away: with more ranks than CPUs, the rank it waits for may not
/// run until the scheduler's time slice ends (milliseconds per message of a ring broadcast).
/// Past the spin budget ([`SPIN`]) every further fruitless poll yields the CPU, as a blocked
/// wait does, and counts on, so that the yielding ones also look for dead peers now and then
/// (`watch::after_yield`); a poll that finds something resets the count. Plain loads and
/// stores: threads polling at once may lose an increment, which only delays the first yield.
static IDLE_POLLS: AtomicU32 = AtomicU32::new(0);

/// Account for the outcome of a polling call (after the engine was released): see
/// [`IDLE_POLLS`]. The found path costs one load (a store only after fruitless polls).
#[inline(always)]
pub(crate) fn polled(found: bool) {
    if found {
        if IDLE_POLLS.load(Ordering::Relaxed) != 0 {
            IDLE_POLLS.store(0, Ordering::Relaxed);
        }
    } else {
        idle_poll();
    }
}

/// A polling call found nothing: count it, and yield the CPU once the count is past the spin
/// budget.
#[inline]
fn idle_poll() {
    let n = IDLE_POLLS.load(Ordering::Relaxed);
    let spin = SPIN.load(Ordering::Relaxed);
    if n < spin {
        IDLE_POLLS.store(n + 1, Ordering::Relaxed);
    } else {
        std::thread::yield_now();
        IDLE_POLLS.store(n.saturating_add(1), Ordering::Relaxed);
        // (Errors are left to the next call, which meets them, or the failed requests.)
        let _ = after_yield((n - spin).wrapping_add(1));
    }
}

/// [`polled`] for a call that returns an optional result (`None`: nothing found); errors are
/// passed on uncounted.
#[inline(always)]
pub(super) fn polled_opt<T>(r: Result<Option<T>>) -> Result<Option<T>> {
    if let Ok(v) = &r {
        polled(v.is_some());
    }
    r
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

/// Hand the packets being built to the drivers now, for a completion call that has work to do
/// before it waits (the C layer's handle lookups): the receiver starts on them meanwhile.
/// Only for the thread that owns the engine; a failure is left for the call's own flush
/// (`send_pending`) to report.
#[inline(always)]
pub fn send_queued() {
    super::engine_slot::with_owned(|e| {
        if !e.st.nothing_queued() {
            let _ = e.flush();
        }
        Some(())
    });
}

/// Poll the engine until `f` yields a value. Once it yields the CPU, the wait also looks for
/// dead peers now and then (`watch`: its yielding rounds are counted, and every 16th reads
/// the clock), so that what waits for one fails instead of hanging.
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
        b.snooze_watched()?;
    }
}

// -------------------------------------------------------------------- completion

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
/// with the empty status). (Always inlined: it is what a blocked `MPI_Wait`/`MPI_Recv` checks
/// on every turn of its polling loop.)
#[inline(always)]
pub(super) fn take_if_complete(e: &mut Engine, r: RequestId) -> Result<Option<Completion>> {
    match take_done(e, r) {
        Taken::Done(c) => Ok(Some(c)),
        Taken::Pending => Ok(None),
        Taken::Invalid => err(ErrorClass::Request, "invalid request handle"),
    }
}

/// The completion of [`RequestId::COMPLETE`]: a send's empty status; the request is gone.
const DONE_AT_POST: Completion = Completion {
    status: EMPTY_STATUS,
    freed: true,
};

/// The state of request `r` for the calls that look without taking: `Some(status)` when it is
/// complete (`EMPTY_STATUS` when inactive, whether it is active in the flag), `None` when
/// pending, an error when `r` is no request.
#[inline(always)]
fn peek(e: &Engine, r: RequestId) -> std::result::Result<Option<(bool, Status)>, ()> {
    match e.st.reqs.get(r) {
        Some(req) if !req.active => Ok(Some((false, EMPTY_STATUS))),
        Some(req) if req.complete => Ok(Some((true, req.status))),
        Some(_) => Ok(None),
        None if r == RequestId::COMPLETE => Ok(Some((true, EMPTY_STATUS))),
        None => Err(()),
    }
}

/// What [`take_done`] (or [`take_done_with`], whose `done` made the `R`) found.
pub(super) enum Taken<R = Completion> {
    Done(R),
    Pending,
    Invalid,
}

/// [`take_if_complete`] without the error value (for loops that checked the handles).
#[inline(always)]
pub(super) fn take_done(e: &mut Engine, r: RequestId) -> Taken {
    take_done_with(e, r, |status, freed| Completion {
        status: *status,
        freed,
    })
}

/// [`take_done`] that hands the completion to `done(status, freed)` where it lies (in the
/// request, before its slot is emptied) instead of returning a copy of it.
#[inline(always)]
pub(super) fn take_done_with<R>(
    e: &mut Engine,
    r: RequestId,
    done: impl FnOnce(&Status, bool) -> R,
) -> Taken<R> {
    let Some(req) = e.st.reqs.get_mut(r) else {
        // Tested only when the table has no such request: nothing on the path of the others.
        return if r == RequestId::COMPLETE {
            Taken::Done(done(&DONE_AT_POST.status, DONE_AT_POST.freed))
        } else {
            Taken::Invalid
        };
    };
    if !req.active {
        return Taken::Done(done(&EMPTY_STATUS, false));
    }
    if !req.complete {
        return Taken::Pending;
    }
    if req.persistent.is_some() {
        req.active = false;
        req.op = Op::None;
        Taken::Done(done(&req.status, false))
    } else {
        let out = done(&req.status, true);
        // SAFETY: `r`'s slot holds the request just looked at.
        unsafe { e.st.reqs.vacate(r.index()) };
        Taken::Done(out)
    }
}

/// MPI_Test.
pub fn test(r: RequestId) -> Result<Option<Completion>> {
    polled_opt(with(|e| {
        send_pending(e)?;
        if let Some(c) = take_if_complete(e, r)? {
            return Ok(Some(c));
        }
        e.progress()?;
        take_if_complete(e, r)
    }))
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
    polled_opt(with(|e| {
        let check = |e: &mut Engine| -> Result<Option<Status>> {
            match peek(e, r) {
                Ok(s) => Ok(s.map(|(_, s)| s)),
                Err(()) => err(ErrorClass::Request, "invalid request handle"),
            }
        };
        if let Some(s) = check(e)? {
            return Ok(Some(s));
        }
        e.progress()?;
        check(e)
    }))
}

/// The statuses of the complete active requests of `reqs`, without taking them: `None` when
/// no request is active.
fn statuses_now(e: &Engine, reqs: &[Option<RequestId>]) -> Result<Option<Vec<(usize, Status)>>> {
    let mut any_active = false;
    let mut done = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let Some(r) = *r else { continue };
        match peek(e, r).map_err(|()| bad_request_at(i))? {
            Some((false, _)) => continue,
            Some((true, s)) => done.push((i, s)),
            None => {}
        }
        any_active = true;
    }
    Ok(any_active.then_some(done))
}

/// MPI_Request_get_status_some: the statuses of every complete active request (possibly
/// none), nothing freed or made inactive; `None` when no request is active.
pub fn request_get_status_some(reqs: &[Option<RequestId>]) -> Result<Option<Vec<(usize, Status)>>> {
    with(|e| {
        send_pending(e)?;
        e.progress()?;
        statuses_now(e, reqs)
    })
}

/// MPI_Request_get_status_any: `Some(Some((i, status)))` for one complete active request
/// (nothing freed), `Some(None)` when no request is active, `None` when none is complete.
pub fn request_get_status_any(
    reqs: &[Option<RequestId>],
) -> Result<Option<Option<(usize, Status)>>> {
    Ok(match request_get_status_some(reqs)? {
        None => Some(None),
        Some(v) => v.into_iter().next().map(Some),
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
    wait_until(|e| take_any(e, reqs))
}

/// MPI_Testany: `Ok(Err(()))`-free form: `Some(Some(..))` one completed, `Some(None)` no active
/// request (MPI_UNDEFINED with flag true), `None` nothing completed yet.
pub fn test_any(reqs: &[Option<RequestId>]) -> Result<Option<Option<(usize, Completion)>>> {
    polled_opt(with(|e| {
        e.progress()?;
        take_any(e, reqs)
    }))
}

/// One pass of MPI_Waitany/MPI_Testany: `Some(Some(..))` the first complete active request of
/// `reqs`, taken; `Some(None)` no active request; `None` none complete yet.
fn take_any(
    e: &mut Engine,
    reqs: &[Option<RequestId>],
) -> Result<Option<Option<(usize, Completion)>>> {
    let mut any_active = false;
    for (i, r) in reqs.iter().enumerate() {
        let Some(r) = *r else { continue };
        match peek(e, r).map_err(|()| bad_request_at(i))? {
            Some((false, _)) => continue,
            Some(_) => {
                let c = take_if_complete(e, r)?.expect("complete");
                return Ok(Some(Some((i, c))));
            }
            None => any_active = true,
        }
    }
    Ok(if any_active { None } else { Some(None) })
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
        match peek(e, r).map_err(|()| bad_request_at(i))? {
            Some((false, _)) => continue,
            Some(_) => done.push((i, take_if_complete(e, r)?.expect("complete"))),
            None => {}
        }
        any_active = true;
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
    let r = with(|e| {
        e.progress()?;
        some_complete(e, reqs)
    });
    if let Ok(v) = &r {
        polled(v.as_ref().is_none_or(|v| !v.is_empty()));
    }
    r
}

/// Whether every request of `reqs` from `*from` on is complete (inactive ones count as
/// complete). `*from` moves past the ones found complete: they stay complete, so a wait loop
/// never looks at them again.
#[inline]
fn complete_from(e: &Engine, reqs: &[Option<RequestId>], from: &mut usize) -> Result<bool> {
    while let Some(&r) = reqs.get(*from) {
        if let Some(r) = r {
            if peek(e, r).map_err(|()| bad_request_at(*from))?.is_none() {
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
    polled_bool(with(|e| {
        send_pending(e)?;
        let mut from = 0;
        if complete_from(e, reqs, &mut from)? {
            return Ok(true);
        }
        e.progress()?;
        complete_from(e, reqs, &mut from)
    }))
}

/// [`polled`] for a call that returns whether it found what it polled for.
#[inline(always)]
fn polled_bool(r: Result<bool>) -> Result<bool> {
    if let Ok(found) = r {
        polled(found);
    }
    r
}

/// MPI_Testall: if every request of `reqs` is complete, their completions go to `out` (`None`
/// for `None` entries) and the result is true; else nothing is taken.
pub fn test_all(reqs: &[Option<RequestId>], out: &mut [Option<Completion>]) -> Result<bool> {
    polled_bool(with(|e| {
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
    }))
}

/// MPI_Waitall: wait until every request of `reqs` is complete, and take their completions
/// (see [`wait_all_with`]).
pub fn wait_all(reqs: &[Option<RequestId>], out: &mut [Option<Completion>]) -> Result<()> {
    out.fill(None);
    wait_all_with(
        reqs,
        |r| *r,
        |i, status, freed| {
            out[i] = Some(Completion {
                status: *status,
                freed,
            })
        },
    )
}

/// MPI_Waitall without a completion array: `rid(&items[i])` names the request of entry `i`
/// (`None`: a null one); each is taken once complete and handed to `each(i, status, freed)`
/// (`freed` as in [`Completion`])
/// (nothing for null entries). Requests are taken in order as they complete; in addition, the
/// first time a request is found pending, the next [`AHEAD`] ones that are already complete
/// are taken at once (sends complete at posting, typically, listed after receives): that work
/// is then done while the receives are awaited rather than after they arrive. So `each` sees
/// indices in order except for those. `each` runs with the engine held: it must not call MPI.
/// An invalid request fails the call (some requests may have been taken).
pub fn wait_all_with<T>(
    items: &[T],
    rid: impl Fn(&T) -> Option<RequestId>,
    mut each: impl FnMut(usize, &Status, bool),
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
                match take_done_with(e, r, |s, freed| each(from, s, freed)) {
                    Taken::Done(()) => {}
                    Taken::Pending => {
                        if base == usize::MAX {
                            base = from + 1;
                            early = take_ahead(e, items, base, &rid, &mut each as _)?;
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
    // (Not generic in `each`: its one direct call, in `wait_all_with`'s loop, can be inlined.)
    each: &mut dyn FnMut(usize, &Status, bool),
) -> Result<u64> {
    let mut taken = 0u64;
    for (k, it) in items.iter().skip(base).take(AHEAD).enumerate() {
        if let Some(r) = rid(it) {
            match take_done_with(e, r, |s, freed| each(base + k, s, freed)) {
                Taken::Done(()) => taken |= 1 << k,
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
    if r == RequestId::COMPLETE {
        return Ok(());
    }
    with(|e| {
        if e.st.reqs.get(r).is_none() {
            return Err(Error::new(ErrorClass::Request, "invalid request handle"));
        }
        if crate::part::is_running_part(&e.st, r) {
            // Its round could only end with the MPI_Pready calls or the MPI_Start of the peer's
            // next round, which may never come: refused rather than left to hang MPI_Finalize.
            return Err(Error::new(
                ErrorClass::Request,
                "MPI_Request_free on an active partitioned request (complete it first)",
            ));
        }
        let Some(req) = e.st.reqs.get_mut(r) else {
            return Err(Error::new(ErrorClass::Request, "invalid request handle"));
        };
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
