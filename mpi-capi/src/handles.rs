//! The C handle tables: what an `MPI_Comm`, `MPI_Datatype`, `MPI_Request`, `MPI_Errhandler` or
//! `MPI_Message` value names in the core, and which communicator (hence which error handler) an
//! object belongs to.
//!
//! Two families of values:
//! - **predefined handles** are the standard ABI's small constants (`MPI_COMM_WORLD` = 0x101,
//!   `MPI_INT` = 0x209, …), all below 4096, decoded by `match` or a static table;
//! - **library handles** are encoded integers `0x4000_0000 | kind << 26 | generation << 20 |
//!   index`: bit 30 keeps them outside 1..4095 and away from 0, they fit in 31 bits (so the
//!   Fortran integer of a handle is its value), the kind tells a datatype passed as a request
//!   apart, and the 6-bit generation (bumped when a slot is freed) tells a freed handle from the
//!   live one that reuses its slot. They are never pointers and never dereferenced.
//!
//! A lookup never crashes: a wrong, stale or garbage value is an [`Error`] of the class of the
//! expected kind (`MPI_ERR_REQUEST` for a request, …). Lookups of predefined communicators and
//! datatypes (the hot path of MPI_Send/MPI_Recv) take no lock and allocate nothing; request
//! lookups take one uncontended lock and index a vector.
//!
//! This module never calls the core's communication functions.

use std::os::raw::c_int;

use madmpi::{CommId, Datatype, Error, ErrorClass, MessageId, RequestId};
use madmpi_datatypes::Basic;
use once_cell::sync::Lazy;
use parking_lot::{const_mutex, const_rwlock, Mutex, RwLock};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::abi::*;

// ------------------------------------------------------------------------------------ encoding

/// The kinds of library handles (4 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// `MPI_Comm`.
    Comm = 1,
    /// `MPI_Group`.
    Group = 2,
    /// `MPI_Datatype`.
    Datatype = 3,
    /// `MPI_Request`.
    Request = 4,
    /// `MPI_Op`.
    Op = 5,
    /// `MPI_Errhandler`.
    Errhandler = 6,
    /// `MPI_Info`.
    Info = 7,
    /// `MPI_Message`.
    Message = 8,
    /// `MPI_Win`.
    Win = 9,
    /// `MPI_File`.
    File = 10,
    /// `MPI_Session`.
    Session = 11,
    /// A Madeleine API channel (`mad_channel_t`, `madeleine.h`).
    MadChannel = 12,
    /// A Madeleine API connection (`mad_connection_t`).
    MadConn = 13,
}

impl Kind {
    fn from_bits(b: usize) -> Option<Kind> {
        Some(match b {
            1 => Kind::Comm,
            2 => Kind::Group,
            3 => Kind::Datatype,
            4 => Kind::Request,
            5 => Kind::Op,
            6 => Kind::Errhandler,
            7 => Kind::Info,
            8 => Kind::Message,
            9 => Kind::Win,
            10 => Kind::File,
            11 => Kind::Session,
            12 => Kind::MadChannel,
            13 => Kind::MadConn,
            _ => return None,
        })
    }

    /// What the standard calls an object of this kind, for messages.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Comm => "communicator",
            Kind::Group => "group",
            Kind::Datatype => "datatype",
            Kind::Request => "request",
            Kind::Op => "operation",
            Kind::Errhandler => "error handler",
            Kind::Info => "info object",
            Kind::Message => "message",
            Kind::Win => "window",
            Kind::File => "file",
            Kind::Session => "session",
            Kind::MadChannel => "Madeleine channel",
            Kind::MadConn => "Madeleine connection",
        }
    }

    /// The error class of an invalid handle of this kind.
    pub fn error_class(self) -> ErrorClass {
        match self {
            Kind::Comm => ErrorClass::Comm,
            Kind::Group => ErrorClass::Group,
            Kind::Datatype => ErrorClass::Type,
            Kind::Request | Kind::Message => ErrorClass::Request,
            Kind::Op => ErrorClass::Op,
            Kind::Info => ErrorClass::Info,
            Kind::Session => ErrorClass::Session,
            Kind::Errhandler | Kind::Win | Kind::File | Kind::MadChannel | Kind::MadConn => {
                ErrorClass::Arg
            }
        }
    }

    /// The kind of a predefined handle value (by the ABI's numbering), if it is one.
    fn of_predefined(h: usize) -> Option<Kind> {
        Some(match h {
            0x20..=0x3f => Kind::Op,
            0x100..=0x107 => Kind::Comm,
            0x108..=0x10f => Kind::Group,
            0x110..=0x117 => Kind::Win,
            0x118..=0x11f => Kind::File,
            0x120..=0x127 => Kind::Session,
            0x128..=0x12f => Kind::Message,
            0x130..=0x13f => Kind::Info,
            0x140..=0x17f => Kind::Errhandler,
            0x180..=0x1ff => Kind::Request,
            0x200..=0x3ff => Kind::Datatype,
            _ => return None,
        })
    }
}

const TAG_BIT: usize = 1 << 30;
const KIND_SHIFT: u32 = 26;
const GEN_SHIFT: u32 = 20;
const GEN_MASK: u32 = 0x3f;
const INDEX_BITS: u32 = 20;
/// Slots per table (about a million live objects of one kind).
pub const MAX_SLOTS: usize = 1 << INDEX_BITS;

#[inline]
fn encode(kind: Kind, index: u32, gen: u32) -> usize {
    TAG_BIT
        | (kind as usize) << KIND_SHIFT
        | ((gen & GEN_MASK) as usize) << GEN_SHIFT
        | index as usize
}

/// `(kind, index, generation)` of a library handle value.
#[inline]
fn decode(h: usize) -> Option<(Kind, u32, u32)> {
    if h & !0x7fff_ffff != 0 || h & TAG_BIT == 0 {
        return None;
    }
    let kind = Kind::from_bits((h >> KIND_SHIFT) & 0xf)?;
    Some((
        kind,
        (h & (MAX_SLOTS - 1)) as u32,
        ((h >> GEN_SHIFT) as u32) & GEN_MASK,
    ))
}

/// Why a value is not a live handle of the expected kind.
fn bad_handle(expected: Kind, h: usize, null_name: Option<&str>) -> Error {
    let class = expected.error_class();
    let what = expected.noun();
    if let Some(n) = null_name {
        return Error::new(class, format!("invalid {what}: {n}"));
    }
    let other = decode(h)
        .map(|(k, _, _)| k)
        .or_else(|| Kind::of_predefined(h));
    let msg = match other {
        Some(k) if k != expected => {
            format!("invalid {what} handle {h:#x} (it is a {} handle)", k.noun())
        }
        Some(_) => format!("invalid {what} handle {h:#x} (freed, or never created)"),
        None if h == 0 => format!("invalid {what} handle 0 (uninitialized?)"),
        None => format!("invalid {what} handle {h:#x}"),
    };
    Error::new(class, msg)
}

// ------------------------------------------------------------------------------------ tables

struct Slot<T> {
    gen: u32,
    val: Option<T>,
}

/// A generation-checked table of one kind of library handle.
pub struct Table<T> {
    kind: Kind,
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> Table<T> {
    /// An empty table (usable in a `static`).
    pub const fn new(kind: Kind) -> Table<T> {
        Table {
            kind,
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Store `v` and return its handle value.
    pub fn insert(&mut self, v: T) -> Result<usize, Error> {
        if let Some(i) = self.free.pop() {
            let s = &mut self.slots[i as usize];
            s.val = Some(v);
            return Ok(encode(self.kind, i, s.gen));
        }
        if self.slots.len() >= MAX_SLOTS {
            return Err(Error::new(
                ErrorClass::NoMem,
                format!("too many live {} handles ({MAX_SLOTS})", self.kind.noun()),
            ));
        }
        let i = self.slots.len() as u32;
        self.slots.push(Slot {
            gen: 0,
            val: Some(v),
        });
        Ok(encode(self.kind, i, 0))
    }

    #[inline]
    fn index_of(&self, h: usize) -> Option<usize> {
        match decode(h) {
            Some((k, i, g)) if k == self.kind => match self.slots.get(i as usize) {
                Some(s) if s.gen == g && s.val.is_some() => Some(i as usize),
                _ => None,
            },
            _ => None,
        }
    }

    /// The object of handle `h`.
    #[inline]
    pub fn get(&self, h: usize) -> Result<&T, Error> {
        match self.index_of(h) {
            Some(i) => Ok(self.slots[i].val.as_ref().expect("checked by index_of")),
            None => Err(bad_handle(self.kind, h, None)),
        }
    }

    /// The object of handle `h`, mutably.
    #[inline]
    pub fn get_mut(&mut self, h: usize) -> Result<&mut T, Error> {
        match self.index_of(h) {
            Some(i) => Ok(self.slots[i].val.as_mut().expect("checked by index_of")),
            None => Err(bad_handle(self.kind, h, None)),
        }
    }

    /// Remove the object of handle `h`; the handle becomes stale.
    pub fn remove(&mut self, h: usize) -> Result<T, Error> {
        match self.index_of(h) {
            Some(i) => {
                let s = &mut self.slots[i];
                s.gen = (s.gen + 1) & GEN_MASK;
                self.free.push(i as u32);
                Ok(s.val.take().expect("checked by index_of"))
            }
            None => Err(bad_handle(self.kind, h, None)),
        }
    }

    /// Live objects.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether no object is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

// ------------------------------------------------------------------------------------ communicators

/// A communicator created by the library (not MPI_COMM_WORLD / MPI_COMM_SELF).
pub struct CommEntry {
    /// The core's communicator.
    pub id: CommId,
    /// Its error handler (a predefined or user `MPI_Errhandler` value).
    pub errh: usize,
}

static COMMS: RwLock<Table<CommEntry>> = const_rwlock(Table::new(Kind::Comm));
/// The core id of each live library communicator handle, for lookups without the lock.
static COMM_SIDE: Side = Side::new();

/// The error handlers of MPI_COMM_WORLD and MPI_COMM_SELF (handle values).
static PREDEF_COMM_ERRH: Mutex<[usize; 2]> = const_mutex([0x141, 0x141]);

/// The core communicator of `comm`.
#[inline]
pub fn comm(comm: MPI_Comm) -> Result<CommId, Error> {
    match comm as usize {
        0x101 => Ok(madmpi::COMM_WORLD),
        0x102 => Ok(madmpi::COMM_SELF),
        0x100 => Err(bad_handle(Kind::Comm, 0x100, Some("MPI_COMM_NULL"))),
        h => match COMM_SIDE.get(h) {
            Some((_, id)) => Ok(CommId(id as u32)),
            // Not live: the table says why.
            None => COMMS.read().get(h).map(|e| e.id),
        },
    }
}

/// The core id of a live communicator handle, without the error of a bad one (the fast paths
/// of the point-to-point calls; `None` sends them down the checked path).
#[inline]
pub fn comm_live(comm: MPI_Comm) -> Option<CommId> {
    match comm as usize {
        0x101 => Some(madmpi::COMM_WORLD),
        0x102 => Some(madmpi::COMM_SELF),
        h => COMM_SIDE.get(h).map(|(_, id)| CommId(id as u32)),
    }
}

/// Register a communicator created by the core; it starts with `errh` (the standard: the
/// handler of the communicator it was created from).
pub fn register_comm(id: CommId, errh: usize) -> Result<MPI_Comm, Error> {
    let h = COMMS.write().insert(CommEntry { id, errh })?;
    COMM_SIDE.set(h, h & (MAX_SLOTS - 1), id.0 as usize);
    errh_ref(errh);
    Ok(h as MPI_Comm)
}

/// Forget a communicator handle (MPI_Comm_free); returns its core id.
pub fn free_comm(comm: MPI_Comm) -> Result<CommId, Error> {
    match comm as usize {
        0x100..=0x102 => Err(Error::new(
            ErrorClass::Comm,
            format!(
                "cannot free the predefined communicator {}",
                comm_name(comm)
            ),
        )),
        h => {
            let e = COMMS.write().remove(h)?;
            COMM_SIDE.clear(h);
            errh_unref(e.errh);
            Ok(e.id)
        }
    }
}

/// The error handler of `comm`, or None if `comm` is not a valid communicator.
pub fn comm_errhandler(comm: MPI_Comm) -> Option<usize> {
    match comm as usize {
        0x101 => Some(PREDEF_COMM_ERRH.lock()[0]),
        0x102 => Some(PREDEF_COMM_ERRH.lock()[1]),
        0x100 => None,
        h => COMMS.read().get(h).ok().map(|e| e.errh),
    }
}

/// Set the error handler of `comm` (taking a reference on it and dropping the old one).
pub fn set_comm_errhandler(comm: MPI_Comm, errh: usize) -> Result<(), Error> {
    let old = match comm as usize {
        0x101 | 0x102 => {
            let mut g = PREDEF_COMM_ERRH.lock();
            let slot = &mut g[(comm as usize) - 0x101];
            errh_ref(errh);
            std::mem::replace(slot, errh)
        }
        0x100 => return Err(bad_handle(Kind::Comm, 0x100, Some("MPI_COMM_NULL"))),
        h => {
            let mut t = COMMS.write();
            let e = t.get_mut(h)?;
            errh_ref(errh);
            std::mem::replace(&mut e.errh, errh)
        }
    };
    errh_unref(old);
    Ok(())
}

/// Name of a communicator handle for messages.
pub fn comm_name(comm: MPI_Comm) -> String {
    match comm as usize {
        0x100 => "MPI_COMM_NULL".into(),
        0x101 => "MPI_COMM_WORLD".into(),
        0x102 => "MPI_COMM_SELF".into(),
        h => format!("{h:#x}"),
    }
}

// ------------------------------------------------------------------------------------ datatypes

/// The predefined datatype a handle value names (aliases share their value).
fn basic_of(h: usize) -> Option<Basic> {
    use Basic::*;
    Some(match h {
        0x201 => Aint,
        0x202 => Count,
        0x203 => Offset,
        0x207 => Packed,
        0x208 => Short,
        0x209 => Int,
        0x20a => Long,
        0x20b => LongLong,
        0x20c => UnsignedShort,
        0x20d => Unsigned,
        0x20e => UnsignedLong,
        0x20f => UnsignedLongLong,
        0x210 => Float,
        0x212 => CFloatComplex,
        0x213 => CxxFloatComplex,
        0x214 => Double,
        0x216 => CDoubleComplex,
        0x217 => CxxDoubleComplex,
        0x218 => Logical,
        0x219 => Integer,
        0x21a => Real,
        0x21b => Complex,
        0x21c => DoublePrecision,
        0x21d => DoubleComplex,
        0x21e => Character,
        0x220 => LongDouble,
        0x224 => CLongDoubleComplex,
        0x225 => CxxLongDoubleComplex,
        0x228 => FloatInt,
        0x229 => DoubleInt,
        0x22a => LongInt,
        0x22b => TwoInt,
        0x22c => ShortInt,
        0x22d => LongDoubleInt,
        0x230 => TwoReal,
        0x231 => TwoDoublePrecision,
        0x232 => TwoInteger,
        0x238 => CBool,
        0x239 => CxxBool,
        0x23c => WChar,
        0x240 => Int8,
        0x241 => UInt8,
        0x243 => Char,
        0x244 => SignedChar,
        0x245 => UnsignedChar,
        0x247 => Byte,
        0x248 => Int16,
        0x249 => UInt16,
        0x250 => Int32,
        0x251 => UInt32,
        0x258 => Int64,
        0x259 => UInt64,
        0x2c0 => Logical1,
        0x2c1 => Integer1,
        0x2c8 => Logical2,
        0x2c9 => Integer2,
        0x2ca => Real2,
        0x2d0 => Logical4,
        0x2d1 => Integer4,
        0x2d2 => Real4,
        0x2d3 => Complex4,
        0x2d8 => Logical8,
        0x2d9 => Integer8,
        0x2da => Real8,
        0x2db => Complex8,
        0x2e0 => Logical16,
        0x2e1 => Integer16,
        0x2e2 => Real16,
        0x2e3 => Complex16,
        0x2eb => Complex32,
        _ => return None,
    })
}

const PREDEF_TYPE_BASE: usize = 0x200;
const PREDEF_TYPE_COUNT: usize = 0x100;

/// Every predefined datatype, indexed by `handle - 0x200`.
static PREDEF_TYPES: Lazy<Vec<Option<Datatype>>> = Lazy::new(|| {
    (0..PREDEF_TYPE_COUNT)
        .map(|i| basic_of(PREDEF_TYPE_BASE + i).map(Datatype::basic))
        .collect()
});

/// By handle, the size of each predefined datatype whose elements lie in one run of memory
/// from their address (contiguous, lower bound 0), 0 for the others: a put's fast path needs
/// only its buffers' bytes (`predefined_run_bytes`).
static PREDEF_RUN: Lazy<[u32; PREDEF_TYPE_COUNT]> = Lazy::new(|| {
    let mut t = [0; PREDEF_TYPE_COUNT];
    for (s, d) in t.iter_mut().zip(PREDEF_TYPES.iter()) {
        if let Some(d) = d.as_ref().filter(|d| d.is_contiguous() && d.lb() == 0) {
            *s = u32::try_from(d.size()).unwrap_or(0);
        }
    }
    t
});

/// The size of predefined datatype `dt` when its elements lie in one run of memory from their
/// address (contiguous, lower bound 0, not empty); `None` otherwise (and for other handles).
#[inline(always)]
pub fn predefined_run_bytes(dt: MPI_Datatype) -> Option<usize> {
    let s = *PREDEF_RUN.get((dt as usize).wrapping_sub(PREDEF_TYPE_BASE))?;
    (s != 0).then_some(s as usize)
}

/// The handle value of a predefined datatype.
pub fn basic_handle(b: Basic) -> MPI_Datatype {
    // Small and run rarely (datatype decoding): a scan keeps one source of truth.
    (PREDEF_TYPE_BASE..PREDEF_TYPE_BASE + PREDEF_TYPE_COUNT)
        .find(|&h| basic_of(h) == Some(b))
        .unwrap_or(0x200) as MPI_Datatype
}

static TYPES: RwLock<Table<Datatype>> = const_rwlock(Table::new(Kind::Datatype));

/// A datatype borrowed from the predefined table, or a clone of a user type.
pub enum DtRef {
    /// A predefined datatype (no reference counting).
    Predefined(&'static Datatype),
    /// A library-created datatype (kept alive by this clone while in use).
    Derived(Datatype),
}

impl std::ops::Deref for DtRef {
    type Target = Datatype;
    #[inline]
    fn deref(&self) -> &Datatype {
        match self {
            DtRef::Predefined(d) => d,
            DtRef::Derived(d) => d,
        }
    }
}

/// The datatype of handle `dt`.
#[inline]
pub fn datatype(dt: MPI_Datatype) -> Result<DtRef, Error> {
    let h = dt as usize;
    if (PREDEF_TYPE_BASE..PREDEF_TYPE_BASE + PREDEF_TYPE_COUNT).contains(&h) {
        return match &PREDEF_TYPES[h - PREDEF_TYPE_BASE] {
            Some(d) => Ok(DtRef::Predefined(d)),
            None if h == 0x200 => Err(bad_handle(Kind::Datatype, h, Some("MPI_DATATYPE_NULL"))),
            None => Err(Error::new(
                ErrorClass::Type,
                format!("invalid datatype handle {h:#x}"),
            )),
        };
    }
    TYPES.read().get(h).map(|d| DtRef::Derived(d.clone()))
}

/// The datatype of a predefined datatype handle (`None` for any other handle).
#[inline]
pub fn predefined_type(dt: MPI_Datatype) -> Option<&'static Datatype> {
    PREDEF_TYPES
        .get((dt as usize).wrapping_sub(PREDEF_TYPE_BASE))?
        .as_ref()
}

/// Register a datatype created by the library and return its handle.
pub fn register_datatype(d: Datatype) -> Result<MPI_Datatype, Error> {
    Ok(TYPES.write().insert(d)? as MPI_Datatype)
}

/// Forget a library datatype handle (MPI_Type_free); pending operations keep their clones.
pub fn free_datatype(dt: MPI_Datatype) -> Result<Datatype, Error> {
    let h = dt as usize;
    if (PREDEF_TYPE_BASE..PREDEF_TYPE_BASE + PREDEF_TYPE_COUNT).contains(&h) {
        return Err(Error::new(
            ErrorClass::Type,
            format!("cannot free the predefined datatype {}", type_name(dt)),
        ));
    }
    TYPES.write().remove(h)
}

/// Name of a datatype handle for messages.
pub fn type_name(dt: MPI_Datatype) -> String {
    let h = dt as usize;
    if h == 0x200 {
        return "MPI_DATATYPE_NULL".into();
    }
    match basic_of(h) {
        Some(b) => b.mpi_name().into(),
        None => format!("{h:#x}"),
    }
}

// ------------------------------------------------------------------------------------ side words

/// One word per slot of a handle table, read without a lock: `handle << 32 | value` for the
/// live handle of the slot, 0 for none. Every library handle value fits in 31 bits, and so
/// does every value stored (a communicator handle, a core id). What a handle stands for never
/// changes while it lives, and a thread only reads the words of handles it was given (using a
/// handle while another thread frees it is erroneous), so relaxed accesses suffice: the hot
/// lookups (a request, a library communicator) cost two loads and no atomic read-modify-write.
pub(crate) struct Side {
    /// One word per slot, zero until used: a static array in zero-filled memory, whose pages
    /// the system provides only when first written (no lazy chunks to check on every lookup).
    words: [AtomicU64; MAX_SLOTS],
}

impl Side {
    pub(crate) const fn new() -> Side {
        Side {
            words: [const { AtomicU64::new(0) }; MAX_SLOTS],
        }
    }

    /// The word of slot `i` (< MAX_SLOTS).
    #[inline(always)]
    fn word(&self, i: usize) -> &AtomicU64 {
        &self.words[i & (MAX_SLOTS - 1)]
    }

    /// Handle `h` (of slot `i`) now stands for `v`.
    #[inline]
    pub(crate) fn set(&self, h: usize, i: usize, v: usize) {
        self.word(i)
            .store((h as u64) << 32 | (v as u64 & 0xffff_ffff), Relaxed);
    }

    /// The generation and value of `h`, if it is the live handle of its slot. A table's words
    /// only ever hold handles of its own kind, so finding `h` itself in the word of its index
    /// is the whole check (kind, generation and liveness at once); 0 is never a handle.
    #[inline(always)]
    pub(crate) fn get(&self, h: usize) -> Option<(u32, usize)> {
        let w = self.word(h).load(Relaxed);
        (w != 0 && w >> 32 == h as u64).then_some((
            ((h >> GEN_SHIFT) as u32) & GEN_MASK,
            (w & 0xffff_ffff) as usize,
        ))
    }

    /// Handle `h` no longer stands for anything (a stale `h` leaves the slot's new handle alone).
    #[inline(always)]
    pub(crate) fn clear(&self, h: usize) {
        let w = self.word(h);
        if w.load(Relaxed) >> 32 == h as u64 {
            w.store(0, Relaxed);
        }
    }
}

// ------------------------------------------------------------------------------------ requests

/// What a C request handle stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReqEntry {
    /// The core's request.
    pub rid: RequestId,
    /// The communicator of the operation (its handler reports the request's errors).
    pub comm: usize,
}

// A request handle is the core's request id itself, encoded like any library handle
// (`Kind::Request`, the core slot as index, its generation): the core's slab is the table,
// and giving a request a handle costs no lock. What the core does not keep — whether the
// slot has a C handle now, and the request's communicator — is in `REQ_SIDE`.

static REQ_SIDE: Side = Side::new();

/// The handle of every send complete at its posting (the core's `RequestId::COMPLETE`: no
/// request record). A library handle of kind 0, which no table uses: it is neither
/// MPI_REQUEST_NULL nor any other predefined value (all below 0x400), and no live handle of
/// any kind can equal it; its side word (slot 0's) never holds it, so [`request_of`] finds it
/// only after the ordinary lookup has missed, at no cost to the others.
pub const REQUEST_COMPLETE: MPI_Request = TAG_BIT as MPI_Request;

/// Give the core request `rid`, an operation on `comm`, a C handle.
#[inline]
pub fn new_request(rid: RequestId, comm: MPI_Comm) -> Result<MPI_Request, Error> {
    let i = rid.index();
    if i >= MAX_SLOTS {
        if rid == RequestId::COMPLETE {
            return Ok(REQUEST_COMPLETE);
        }
        // More live requests than handles can name: let the operation finish on its own.
        let _ = madmpi::request_free(rid);
        return Err(Error::new(
            ErrorClass::NoMem,
            format!("too many live request handles ({MAX_SLOTS})"),
        ));
    }
    let h = encode(Kind::Request, i as u32, rid.gen());
    REQ_SIDE.set(h, i, comm as usize);
    Ok(h as MPI_Request)
}

/// The entry of a request handle value that is live, or why it is not.
#[inline]
fn request_of(h: usize) -> Result<ReqEntry, Error> {
    match REQ_SIDE.get(h) {
        Some((g, comm)) => Ok(ReqEntry {
            rid: RequestId::new((h & (MAX_SLOTS - 1)) as u32, g),
            comm,
        }),
        None if h == REQUEST_COMPLETE as usize => Ok(ReqEntry {
            rid: RequestId::COMPLETE,
            comm: MPI_COMM_SELF as usize,
        }),
        None => Err(bad_handle(Kind::Request, h, None)),
    }
}

/// The entry of a (non-null) request handle.
#[inline]
pub fn request(r: MPI_Request) -> Result<ReqEntry, Error> {
    let h = r as usize;
    if h == 0x180 {
        return Err(bad_handle(Kind::Request, h, Some("MPI_REQUEST_NULL")));
    }
    request_of(h)
}

/// Entries of an array of request handles (`None` for MPI_REQUEST_NULL).
/// On error returns the index of the first bad handle with the error.
#[inline]
pub fn requests(rs: &[MPI_Request], out: &mut [Option<ReqEntry>]) -> Result<(), (usize, Error)> {
    for (i, (&r, o)) in rs.iter().zip(out.iter_mut()).enumerate() {
        let h = r as usize;
        // The live handles first: MPI_REQUEST_NULL is no library handle, so its side word
        // never holds it.
        *o = match REQ_SIDE.get(h) {
            Some((g, comm)) => Some(ReqEntry {
                rid: RequestId::new((h & (MAX_SLOTS - 1)) as u32, g),
                comm,
            }),
            None => special_request(h).map_err(|e| (i, e))?,
        };
    }
    Ok(())
}

/// Check an array of request handles without looking them up into entries: each is live,
/// MPI_REQUEST_NULL or [`REQUEST_COMPLETE`]. Returns whether any is one of the last two, and
/// the communicator of the first that is not MPI_REQUEST_NULL (MPI_COMM_SELF if none); on error
/// the index of the first bad handle with the error. The core ids of the live ones are then
/// [`checked_request_id`].
#[inline]
pub fn check_requests(rs: &[MPI_Request]) -> Result<(bool, usize), (usize, Error)> {
    let mut special = false;
    let mut first = None;
    for (i, &r) in rs.iter().enumerate() {
        let h = r as usize;
        let comm = match REQ_SIDE.get(h) {
            Some((_, comm)) => Some(comm),
            // (The sends complete at posting are common: tested inline.)
            None if h == REQUEST_COMPLETE as usize => {
                special = true;
                Some(MPI_COMM_SELF as usize)
            }
            None => {
                special = true;
                special_request(h).map_err(|e| (i, e))?.map(|e| e.comm)
            }
        };
        if first.is_none() {
            first = comm;
        }
    }
    Ok((special, first.unwrap_or(MPI_COMM_SELF as usize)))
}

/// The core request of a handle [`check_requests`] accepted (a live handle is its request's
/// slot and generation); `None` for MPI_REQUEST_NULL and [`REQUEST_COMPLETE`].
#[inline(always)]
pub fn checked_request_id(r: MPI_Request) -> Option<RequestId> {
    let h = r as usize;
    (h != 0x180 && h != REQUEST_COMPLETE as usize).then(|| {
        RequestId::new(
            (h & (MAX_SLOTS - 1)) as u32,
            ((h >> GEN_SHIFT) as u32) & GEN_MASK,
        )
    })
}

/// The communicator of a live request handle (MPI_COMM_SELF for any other value).
#[cold]
pub fn request_comm(r: MPI_Request) -> usize {
    REQ_SIDE
        .get(r as usize)
        .map_or(MPI_COMM_SELF as usize, |(_, c)| c)
}

/// The entry of a request handle that is no live request's: `None` for MPI_REQUEST_NULL, the
/// entry of [`REQUEST_COMPLETE`], or why the handle is invalid.
#[cold]
#[inline(never)]
fn special_request(h: usize) -> Result<Option<ReqEntry>, Error> {
    if h == 0x180 {
        return Ok(None);
    }
    request_of(h).map(Some)
}

/// Forget a request handle (its core request is gone or detached).
#[inline]
pub fn drop_request(r: MPI_Request) {
    forget_request(r);
    // A generalized request's free_fn runs when its handle goes (one load when there is none).
    if crate::imp::grequest::any() {
        crate::imp::grequest::dropped(r as usize);
    }
}

/// [`drop_request`] when no generalized request is alive (`crate::imp::grequest::any()` false).
#[inline(always)]
pub fn forget_request(r: MPI_Request) {
    REQ_SIDE.clear(r as usize);
}

/// Forget several request handles.
pub fn drop_requests(rs: impl Iterator<Item = MPI_Request>) {
    for r in rs {
        drop_request(r);
    }
}

// ------------------------------------------------------------------------------------ messages

/// What a C message handle (MPI_Mprobe) stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgEntry {
    /// The core's message.
    pub msg: MessageId,
    /// The communicator it was probed on.
    pub comm: usize,
}

static MESSAGES: Mutex<Table<MsgEntry>> = const_mutex(Table::new(Kind::Message));

/// A handle for a matched message (MPI_MESSAGE_NO_PROC for a probe on MPI_PROC_NULL).
pub fn new_message(msg: MessageId, comm: MPI_Comm) -> Result<MPI_Message, Error> {
    if msg == MessageId::NO_PROC {
        return Ok(MPI_MESSAGE_NO_PROC);
    }
    Ok(MESSAGES.lock().insert(MsgEntry {
        msg,
        comm: comm as usize,
    })? as MPI_Message)
}

/// Take the message of a handle (it is received exactly once).
pub fn take_message(m: MPI_Message) -> Result<MsgEntry, Error> {
    match m as usize {
        0x129 => Ok(MsgEntry {
            msg: MessageId::NO_PROC,
            comm: MPI_COMM_SELF as usize,
        }),
        0x128 => Err(bad_handle(Kind::Message, 0x128, Some("MPI_MESSAGE_NULL"))),
        h => MESSAGES.lock().remove(h),
    }
}

/// The communicator of a message handle, if it is valid (for error reporting).
pub fn message_comm(m: MPI_Message) -> Option<usize> {
    MESSAGES.lock().get(m as usize).ok().map(|e| e.comm)
}

// ------------------------------------------------------------------------------------ error handlers

/// A user error handler function, by the kind of object it was created for.
#[derive(Clone, Copy, Debug)]
pub enum ErrhFn {
    /// MPI_Comm_create_errhandler.
    Comm(unsafe extern "C" fn(comm: *mut MPI_Comm, error_code: *mut c_int, ...)),
    /// MPI_Win_create_errhandler.
    Win(unsafe extern "C" fn(win: *mut MPI_Win, error_code: *mut c_int, ...)),
    /// MPI_File_create_errhandler.
    File(unsafe extern "C" fn(file: *mut MPI_File, error_code: *mut c_int, ...)),
    /// MPI_Session_create_errhandler.
    Session(unsafe extern "C" fn(session: *mut MPI_Session, error_code: *mut c_int, ...)),
}

/// A user error handler.
pub struct ErrhEntry {
    /// The C function.
    pub func: ErrhFn,
    /// References: the user's handle plus every object it is attached to.
    refs: u32,
}

static ERRHANDLERS: Mutex<Table<ErrhEntry>> = const_mutex(Table::new(Kind::Errhandler));

/// How an error handler acts.
#[derive(Clone, Copy, Debug)]
pub enum Errh {
    /// MPI_ERRORS_ARE_FATAL.
    Fatal,
    /// MPI_ERRORS_ABORT.
    Abort,
    /// MPI_ERRORS_RETURN.
    Return,
    /// A user function.
    User(ErrhFn),
}

/// Decode an error handler handle.
pub fn errhandler(e: MPI_Errhandler) -> Result<Errh, Error> {
    match e as usize {
        0x141 => Ok(Errh::Fatal),
        0x142 => Ok(Errh::Abort),
        0x143 => Ok(Errh::Return),
        0x140 => Err(Error::new(
            ErrorClass::Arg,
            "invalid error handler: MPI_ERRHANDLER_NULL",
        )),
        h => ERRHANDLERS.lock().get(h).map(|x| Errh::User(x.func)),
    }
}

/// Create a user error handler (one reference, the user's).
pub fn new_errhandler(func: ErrhFn) -> Result<MPI_Errhandler, Error> {
    Ok(ERRHANDLERS.lock().insert(ErrhEntry { func, refs: 1 })? as MPI_Errhandler)
}

/// Take one more reference on a handler (predefined ones are not counted).
pub fn errh_ref(e: usize) {
    if let Ok(x) = ERRHANDLERS.lock().get_mut(e) {
        x.refs += 1;
    }
}

/// Drop one reference; the handler goes away with the last one.
pub fn errh_unref(e: usize) {
    let mut t = ERRHANDLERS.lock();
    let gone = match t.get_mut(e) {
        Ok(x) => {
            x.refs = x.refs.saturating_sub(1);
            x.refs == 0
        }
        Err(_) => false,
    };
    if gone {
        let _ = t.remove(e);
    }
}

/// MPI_Errhandler_free: validate and drop the user's reference.
pub fn free_errhandler(e: MPI_Errhandler) -> Result<(), Error> {
    match e as usize {
        // Freeing a predefined handler only nulls the user's variable (as MPICH does).
        0x141..=0x143 => Ok(()),
        h => {
            errhandler(e)?;
            errh_unref(h);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_stays_outside_predefined_range_and_31_bits() {
        for kind in [Kind::Comm, Kind::Request, Kind::Session] {
            for (i, g) in [(0u32, 0u32), (MAX_SLOTS as u32 - 1, GEN_MASK), (12345, 7)] {
                let h = encode(kind, i, g);
                assert!(h > 4095 && h <= 0x7fff_ffff && h != 0);
                assert_eq!(decode(h), Some((kind, i, g)));
            }
        }
        assert_eq!(decode(0x101), None);
        assert_eq!(decode(0), None);
        assert_eq!(decode(0xdead_beef_0000), None);
    }

    #[test]
    fn stale_and_wrong_kind_handles_are_errors() {
        let mut t: Table<u32> = Table::new(Kind::Request);
        let a = t.insert(7).unwrap();
        assert_eq!(*t.get(a).unwrap(), 7);
        assert_eq!(t.remove(a).unwrap(), 7);
        let e = t.get(a).unwrap_err();
        assert_eq!(e.class, ErrorClass::Request);
        assert!(e.msg.contains("freed"), "{}", e.msg);
        let b = t.insert(8).unwrap();
        assert_ne!(a, b, "a reused slot gets a new generation");
        assert!(t.get(a).is_err());
        let dt = encode(Kind::Datatype, 0, 0);
        assert!(t.get(dt).unwrap_err().msg.contains("datatype handle"));
        assert!(t
            .get(0x101)
            .unwrap_err()
            .msg
            .contains("communicator handle"));
        assert!(t.get(0).is_err());
        assert!(t.get(usize::MAX).is_err());
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn predefined_datatypes_all_resolve() {
        let mut n = 0;
        for h in 0x200..0x300usize {
            if let Some(b) = basic_of(h) {
                n += 1;
                let d = datatype(h as MPI_Datatype).unwrap();
                assert_eq!(d.size(), b.size());
                assert_eq!(basic_handle(b) as usize, h);
            }
        }
        assert_eq!(n, Basic::ALL.len());
        assert_eq!(
            datatype(MPI_DATATYPE_NULL).err().unwrap().class,
            ErrorClass::Type
        );
        assert_eq!(
            datatype(0x211 as MPI_Datatype).err().unwrap().class,
            ErrorClass::Type
        );
        assert_eq!(datatype(MPI_LONG_LONG_INT).unwrap().size(), 8);
        assert_eq!(
            datatype(MPI_COMM_WORLD as usize as MPI_Datatype)
                .err()
                .unwrap()
                .class,
            ErrorClass::Type
        );
    }

    #[test]
    fn comms_resolve() {
        assert_eq!(comm(MPI_COMM_WORLD).unwrap(), madmpi::COMM_WORLD);
        assert_eq!(comm(MPI_COMM_SELF).unwrap(), madmpi::COMM_SELF);
        assert_eq!(comm(MPI_COMM_NULL).unwrap_err().class, ErrorClass::Comm);
        assert_eq!(
            comm(MPI_INT as usize as MPI_Comm).unwrap_err().class,
            ErrorClass::Comm
        );
    }
}
