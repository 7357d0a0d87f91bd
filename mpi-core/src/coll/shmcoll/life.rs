//! The area of each communicator and its life cycle: the table of areas (`AREAS`, `HOT`,
//! the spare cells), finding a communicator's area without a lock (`held`), eligibility, the
//! collective setup over point-to-point, and `forget` when the communicator is freed.
//!
//! This module owns when an area exists and who may use it. It must never send point-to-point
//! messages outside the setup, never free a cell that held an area, and never wait for an
//! area's user while holding the engine lock.

use super::*;

pub(super) enum Entry {
    /// Blocking collectives seen so far, before the area is made.
    Count(u32),
    Ready(&'static AreaCell),
    /// Not eligible, or the setup failed: point-to-point for good.
    Off,
}

/// Per communicator (engine id) of this process.
pub(super) static AREAS: Lazy<Mutex<HashMap<u32, Entry>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));
/// What the non-blocking allreduce by cross-memory attach (`coll/cma.rs`), which must
/// neither make an area nor take one's flag, needs of each communicator whose area's members
/// agreed on cross-memory attach: their process ids and the area's claim words.
pub(super) static CMA_PEERS: Lazy<Mutex<HashMap<u32, NbCma>>> =
    Lazy::new(|| Mutex::new(HashMap::new()));
/// Per communicator, how many non-blocking allreduces by cross-memory attach it has started
/// (the same on every member: collectives start in the same order everywhere).
pub(super) static NB_SEQ: Lazy<Mutex<HashMap<u32, u32>>> = Lazy::new(|| Mutex::new(HashMap::new()));
/// Numbers the segments this process creates.
pub(super) static NAMES: AtomicU64 = AtomicU64::new(0);

/// Forget the area of a communicator being destroyed: its mapping goes now, and its cell
/// becomes a spare. (If a thread is using the area at this very moment, which only an
/// erroneous program does — a collective on a communicator being freed — the cell is left to
/// it, and never reused.) Runs under the engine lock: it never waits for the area's user.
pub(crate) fn forget(c: CommId) {
    CMA_PEERS.lock().remove(&c.0);
    NB_SEQ.lock().remove(&c.0);
    let Some(Entry::Ready(cell)) = AREAS.lock().remove(&c.0) else {
        return;
    };
    let _ = HOT[hot_slot(c)].compare_exchange(
        cell as *const AreaCell as *mut AreaCell,
        std::ptr::null_mut(),
        Ordering::AcqRel,
        Ordering::Relaxed,
    );
    if cell.busy.swap(true, Ordering::Acquire) {
        return;
    }
    cell.owner.store(NOBODY, Ordering::Relaxed);
    // SAFETY: `busy` is ours.
    let area = unsafe { (*cell.inner.get()).take() };
    cell.busy.store(false, Ordering::Release);
    drop(area);
    SPARE.lock().push(cell);
}

/// Cells of forgotten areas, to reuse.
pub(super) static SPARE: Mutex<Vec<&'static AreaCell>> = parking_lot::const_mutex(Vec::new());

/// The cell of the area of communicator `c` is `HOT[hot_slot(c)]`, if any (a communicator
/// whose slot another one's area took finds its own through [`AREAS`], and takes the slot
/// back).
pub(super) const HOT_SLOTS: usize = 64;
pub(super) static HOT: [AtomicPtr<AreaCell>; HOT_SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; HOT_SLOTS];

pub(super) fn hot_slot(c: CommId) -> usize {
    c.0 as usize % HOT_SLOTS
}

/// The area of `comm`, held by this thread until the guard goes, if it has (or now gets) one.
/// Collective (see [`area`]). An area is found without the engine lock, another lock or a
/// reference count change: the call costs no atomic read-modify-write but its cell's flag. An
/// area exists only for a valid intracommunicator (it goes with it), so finding one is all the
/// checking the communicator needs.
#[inline]
pub(super) fn held(comm: CommId) -> Result<Option<Held>> {
    if crate::api::finalized() {
        return err(ErrorClass::Other, "MPI has already been finalized");
    }
    // SAFETY: cells are never freed.
    if let Some(cell) = unsafe { HOT[hot_slot(comm)].load(Ordering::Acquire).as_ref() } {
        if let Some(a) = cell.get(comm) {
            return Ok(Some(a));
        }
    }
    held_slow(comm)
}

/// [`held`] when the area is not in [`HOT`].
#[inline(never)]
pub(super) fn held_slow(comm: CommId) -> Result<Option<Held>> {
    let Some(cell) = area(comm)? else {
        return Ok(None);
    };
    HOT[hot_slot(comm)].store(cell as *const AreaCell as *mut AreaCell, Ordering::Release);
    // None: forgotten meanwhile, the communicator was freed during the call (erroneous).
    Ok(cell.get(comm))
}

/// Run `f` on the area of `comm` (see [`held`]): `Ok(None)` if it has none.
pub(super) fn with_area<T>(
    comm: CommId,
    f: impl FnOnce(&mut Area) -> Result<T>,
) -> Result<Option<T>> {
    match held(comm)? {
        Some(mut a) => f(&mut a).map(Some),
        None => Ok(None),
    }
}

/// The place of an area, and the flag that keeps two threads from using it at once (which
/// MPI forbids anyway: collectives on one communicator are ordered). Allocated once and never
/// freed (forgotten areas leave their cells to [`SPARE`]), so that a pointer to one found
/// without a lock is always valid memory; whether it holds the area wanted is checked before
/// taking the flag (a thread never waits for the flag of another communicator's area), and
/// again under it. Released with a plain store, so that no locked instruction waits behind
/// the last cross-core store of a collective.
pub(super) struct AreaCell {
    pub(super) busy: AtomicBool,
    /// The communicator whose area this is (`NOBODY`: none); changed under `busy`.
    pub(super) owner: AtomicU32,
    /// The area (None when `owner` is `NOBODY`).
    pub(super) inner: UnsafeCell<Option<Area>>,
}

pub(super) const NOBODY: u32 = u32::MAX;

// SAFETY: the area is only reached under `busy`, which makes access exclusive.
unsafe impl Sync for AreaCell {}
// SAFETY: `Area` is `Send`.
unsafe impl Send for AreaCell {}

impl AreaCell {
    /// A cell holding `a`, the area of `comm` (a spare one if there is one).
    pub(super) fn hold(comm: CommId, a: Area) -> &'static AreaCell {
        let spare = SPARE.lock().pop();
        match spare {
            Some(cell) => {
                cell.lock();
                // SAFETY: `busy` is ours.
                unsafe { *cell.inner.get() = Some(a) };
                cell.owner.store(comm.0, Ordering::Relaxed);
                cell.busy.store(false, Ordering::Release);
                cell
            }
            None => Box::leak(Box::new(AreaCell {
                busy: AtomicBool::new(false),
                owner: AtomicU32::new(comm.0),
                inner: UnsafeCell::new(Some(a)),
            })),
        }
    }

    pub(super) fn lock(&self) {
        while self.busy.swap(true, Ordering::Acquire) {
            std::thread::yield_now();
        }
    }

    /// The area, held until the guard goes, if it is `comm`'s.
    #[inline]
    pub(super) fn get(&'static self, comm: CommId) -> Option<Held> {
        if self.owner.load(Ordering::Relaxed) != comm.0 {
            return None;
        }
        self.lock();
        let held = Held(self);
        // Under the flag, `owner` (and so `inner`) cannot change.
        (self.owner.load(Ordering::Relaxed) == comm.0).then_some(held)
    }
}

/// An area whose cell's flag this thread holds (see [`AreaCell::get`]).
pub(super) struct Held(&'static AreaCell);

impl Drop for Held {
    #[inline]
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

impl std::ops::Deref for Held {
    type Target = Area;
    #[inline]
    fn deref(&self) -> &Area {
        // SAFETY: the flag is held, and the area is there (`owner` checked by `get`).
        unsafe { (*self.0.inner.get()).as_ref().unwrap_unchecked() }
    }
}

impl std::ops::DerefMut for Held {
    #[inline]
    fn deref_mut(&mut self) -> &mut Area {
        // SAFETY: as in `deref`; the flag makes the reference exclusive.
        unsafe { (*self.0.inner.get()).as_mut().unwrap_unchecked() }
    }
}

/// What setting up an area needs to know about the communicator.
pub(super) struct Info {
    pub(super) rank: usize,
    pub(super) size: usize,
    pub(super) world: Arc<[u32]>,
    /// Name of the node segment: the prefix of ours, which the launcher cleans up.
    pub(super) prefix: String,
}

/// The communicator's description if its processes (two or more) all share this process's
/// node segment.
pub(super) fn eligible(comm: CommId) -> Result<Option<Info>> {
    with(|e| {
        let c = e.st.comm(comm)?;
        if c.remote.is_some()
            || c.size < 2
            || c.size as usize > madmpi_transports::shmcoll::MAX_MEMBERS
        {
            return Ok(None);
        }
        // The driver that maps the node's segment, if there is one.
        let Some((shm, prefix)) = e
            .drv
            .list
            .iter()
            .find_map(|d| d.segment_name().map(|n| (d, n)))
        else {
            return Ok(None);
        };
        let me = c.world[c.rank as usize];
        if !c.world.iter().all(|&w| w == me || shm.reaches(PeerId(w))) {
            return Ok(None);
        }
        Ok(Some(Info {
            rank: c.rank as usize,
            size: c.size as usize,
            world: c.world.clone(),
            prefix: prefix.to_owned(),
        }))
    })
}

/// The area of `comm`, if it has (or now gets) one. Collective: every member calls it at the
/// same collective, and all get the same answer.
pub(super) fn area(comm: CommId) -> Result<Option<&'static AreaCell>> {
    let seen = {
        let mut s = AREAS.lock();
        match s.get_mut(&comm.0) {
            Some(Entry::Ready(a)) => return Ok(Some(*a)),
            Some(Entry::Off) => return Ok(None),
            Some(Entry::Count(c)) if *c < AFTER => {
                *c += 1;
                return Ok(None);
            }
            Some(Entry::Count(_)) => true,
            None => false,
        }
    };
    // Never hold AREAS while taking the engine lock: `forget` runs under the engine lock.
    let Some(info) = eligible(comm)? else {
        AREAS.lock().insert(comm.0, Entry::Off);
        return Ok(None);
    };
    if !seen && comm != COMM_WORLD && AFTER > 0 {
        AREAS.lock().insert(comm.0, Entry::Count(1));
        return Ok(None);
    }
    let made = setup(comm, &info)?;
    let mut s = AREAS.lock();
    match made {
        Some(a) => {
            if a.cma {
                let peers = NbCma {
                    pids: a.pids.clone().into(),
                    claims: a.seg.info(0, INFO_NB_CLAIMS) as *const AtomicU64,
                };
                CMA_PEERS.lock().insert(comm.0, peers);
            }
            let a = AreaCell::hold(comm, a);
            s.insert(comm.0, Entry::Ready(a));
            Ok(Some(a))
        }
        None => {
            s.insert(comm.0, Entry::Off);
            Ok(None)
        }
    }
}

pub(super) fn live_areas() -> usize {
    AREAS
        .lock()
        .values()
        .filter(|s| matches!(s, Entry::Ready(_)))
        .count()
}

/// Create (rank 0) or map (the others) the communicator's segment; see the module
/// documentation. `None`: some member could not, and everyone stays on point-to-point.
pub(super) fn setup(comm: CommId, info: &Info) -> Result<Option<Area>> {
    let cells = if comm == COMM_WORLD {
        let quantum = CELLS * 4096;
        ((WORLD_SEGMENT / info.size).clamp(SMALL_CELLS, WORLD_CELLS) / quantum) * quantum
    } else {
        SMALL_CELLS
    };
    let data = SLOTS * SLOT + cells;
    let mut msg = [0u64; 2];
    let mut seg = None;
    let name = |id: u64| format!("{}-c{}-{}", info.prefix, info.world[0], id);
    if info.rank == 0 && live_areas() < MAX_AREAS {
        let id = NAMES.fetch_add(1, Ordering::Relaxed);
        if let Ok(s) = CollSegment::create(&name(id), info.size, data) {
            seg = Some(s);
            msg = [1, id];
        }
    }
    let res = (|| -> Result<bool> {
        p2p_bcast(comm, &mut msg)?;
        if msg[0] != 1 {
            return Ok(false);
        }
        if info.rank != 0 && live_areas() < MAX_AREAS {
            seg = CollSegment::open(&name(msg[1]), info.size, data).ok();
        }
        let mut ok = i32::from(seg.is_some());
        p2p_allreduce_min(comm, &mut ok)?;
        Ok(ok == 1)
    })();
    if info.rank == 0 && msg[0] == 1 {
        // Everyone who could map it has: the name goes, whatever happened.
        let _ = CollSegment::unlink(&name(msg[1]));
    }
    match (res?, seg) {
        (true, Some(seg)) => {
            let mut a = Area::new(seg, info);
            a.agree_cma()?;
            Ok(Some(a))
        }
        _ => Ok(None),
    }
}

/// Broadcast two words from rank 0 over point-to-point.
pub(super) fn p2p_bcast(comm: CommId, msg: &mut [u64; 2]) -> Result<()> {
    let p = Ptr(msg.as_mut_ptr().cast());
    let r = super::super::start(comm, When::Now, move |b, v| {
        algo::bcast_binomial(b, &v.team(), 0, p.get(), 16, &bytes());
        Ok(())
    })?;
    super::super::finish(r, "collective set-up (broadcast)")
}

/// Minimum of one `int` over the communicator, over point-to-point.
pub(super) fn p2p_allreduce_min(comm: CommId, v: &mut i32) -> Result<()> {
    let mut out = 0i32;
    let (sp, rp) = (
        Ptr((v as *mut i32).cast()),
        Ptr((&mut out as *mut i32).cast()),
    );
    let r = super::super::start(comm, When::Now, move |b, view| {
        b.op = Some((Op::Builtin(BuiltinOp::Min), Datatype::basic(Basic::Int)));
        algo::allreduce_doubling(b, &view.team(), sp.get(), rp.get(), 1, 4);
        Ok(())
    })?;
    super::super::finish(r, "collective set-up (allreduce)")?;
    *v = out;
    Ok(())
}
