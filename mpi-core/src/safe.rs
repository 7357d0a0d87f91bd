//! The safe Rust API: a [`Universe`] (MPI_Init … MPI_Finalize) and [`Communicator`]s with typed
//! point-to-point operations. Non-blocking requests borrow their buffer, so the borrow checker
//! enforces MPI's rule that a buffer stays untouched until its request completes; dropping a
//! [`Request`] waits for it.
//!
//! ```no_run
//! let universe = madmpi::safe::initialize().unwrap();
//! let world = universe.world();
//! let next = (world.rank() + 1) % world.size();
//! let prev = (world.rank() + world.size() - 1) % world.size();
//! let mut token = [0u64];
//! let r = world.irecv(&mut token, prev, 0).unwrap();
//! world.send(&[world.rank() as u64], next, 0).unwrap();
//! r.wait().unwrap();
//! ```

use std::marker::PhantomData;

use madmpi_datatypes::{Basic, Datatype};

use crate::error::Result;
use crate::group::Group;
use crate::request::{RequestId, SendMode, Status};
use crate::{CommId, ThreadLevel};

/// Rust types with a predefined MPI datatype of the same layout.
///
/// # Safety
/// `datatype()` must describe exactly the bytes of `Self` (size and layout).
pub unsafe trait Equivalence: Copy {
    /// The MPI datatype of `Self`.
    fn datatype() -> Datatype;
}

macro_rules! equivalence {
    ($($t:ty => $b:ident),* $(,)?) => {$(
        // SAFETY: the basic type has the size and representation of the Rust type.
        unsafe impl Equivalence for $t {
            fn datatype() -> Datatype { Datatype::basic(Basic::$b) }
        }
    )*};
}

equivalence! {
    u8 => UInt8, i8 => Int8, u16 => UInt16, i16 => Int16, u32 => UInt32, i32 => Int32,
    u64 => UInt64, i64 => Int64, f32 => Float, f64 => Double, bool => CBool,
}

/// An initialized MPI library; MPI_Finalize runs when it is dropped.
pub struct Universe {
    _not_send: PhantomData<*const ()>,
}

/// MPI_Init (thread level MPI_THREAD_MULTIPLE).
pub fn initialize() -> Result<Universe> {
    crate::init(ThreadLevel::Multiple)?;
    Ok(Universe {
        _not_send: PhantomData,
    })
}

impl Universe {
    /// MPI_COMM_WORLD.
    pub fn world(&self) -> Communicator {
        Communicator {
            id: crate::COMM_WORLD,
        }
    }

    /// MPI_COMM_SELF.
    pub fn self_comm(&self) -> Communicator {
        Communicator {
            id: crate::COMM_SELF,
        }
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        if let Err(e) = crate::finalize() {
            eprintln!("madmpi: MPI_Finalize failed: {e}");
        }
    }
}

/// A communicator.
#[derive(Clone, Copy, Debug)]
pub struct Communicator {
    id: CommId,
}

/// A non-blocking operation borrowing its buffer for `'a`.
#[must_use = "a request must be waited for (dropping it waits)"]
pub struct Request<'a> {
    id: Option<RequestId>,
    _buf: PhantomData<&'a mut [u8]>,
}

impl Request<'_> {
    /// MPI_Wait.
    pub fn wait(mut self) -> Result<Status> {
        let id = self.id.take().expect("request waited twice");
        crate::wait(id)
    }

    /// MPI_Test: `Some(status)` once complete (the request is then done).
    pub fn test(&mut self) -> Result<Option<Status>> {
        let Some(id) = self.id else { return Ok(None) };
        let c = crate::test(id)?;
        if c.is_some() {
            self.id = None;
        }
        Ok(c.map(|c| c.status))
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let _ = crate::wait(id);
        }
    }
}

impl Communicator {
    /// The engine's id of this communicator.
    pub fn id(&self) -> CommId {
        self.id
    }

    /// MPI_Comm_rank.
    pub fn rank(&self) -> i32 {
        crate::comm_rank(self.id).expect("communicator is valid")
    }

    /// MPI_Comm_size.
    pub fn size(&self) -> i32 {
        crate::comm_size(self.id).expect("communicator is valid")
    }

    /// MPI_Comm_group: the processes of this communicator, in rank order.
    pub fn group(&self) -> Group {
        crate::comm_info(self.id)
            .expect("communicator is valid")
            .local
            .into()
    }

    /// MPI_Send.
    pub fn send<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        // SAFETY: `buf` is borrowed for the whole blocking call.
        unsafe {
            crate::send(
                buf.as_ptr() as *const u8,
                buf.len(),
                &T::datatype(),
                dest,
                tag,
                self.id,
                SendMode::Standard,
            )
        }
    }

    /// MPI_Ssend.
    pub fn ssend<T: Equivalence>(&self, buf: &[T], dest: i32, tag: i32) -> Result<()> {
        // SAFETY: as `send`.
        unsafe {
            crate::send(
                buf.as_ptr() as *const u8,
                buf.len(),
                &T::datatype(),
                dest,
                tag,
                self.id,
                SendMode::Synchronous,
            )
        }
    }

    /// MPI_Recv.
    pub fn recv<T: Equivalence>(&self, buf: &mut [T], src: i32, tag: i32) -> Result<Status> {
        // SAFETY: `buf` is borrowed mutably for the whole blocking call.
        unsafe {
            crate::recv(
                buf.as_mut_ptr() as *mut u8,
                buf.len(),
                &T::datatype(),
                src,
                tag,
                self.id,
            )
        }
    }

    /// MPI_Isend: the request borrows `buf` until it completes.
    pub fn isend<'a, T: Equivalence>(
        &self,
        buf: &'a [T],
        dest: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        // SAFETY: the returned request borrows `buf`; dropping it waits.
        let id = unsafe {
            crate::isend(
                buf.as_ptr() as *const u8,
                buf.len(),
                &T::datatype(),
                dest,
                tag,
                self.id,
                SendMode::Standard,
            )?
        };
        Ok(Request {
            id: Some(id),
            _buf: PhantomData,
        })
    }

    /// MPI_Irecv: the request borrows `buf` mutably until it completes.
    pub fn irecv<'a, T: Equivalence>(
        &self,
        buf: &'a mut [T],
        src: i32,
        tag: i32,
    ) -> Result<Request<'a>> {
        // SAFETY: as `isend`.
        let id = unsafe {
            crate::irecv(
                buf.as_mut_ptr() as *mut u8,
                buf.len(),
                &T::datatype(),
                src,
                tag,
                self.id,
            )?
        };
        Ok(Request {
            id: Some(id),
            _buf: PhantomData,
        })
    }

    /// MPI_Probe.
    pub fn probe(&self, src: i32, tag: i32) -> Result<Status> {
        crate::probe(src, tag, self.id)
    }

    /// MPI_Barrier.
    pub fn barrier(&self) -> Result<()> {
        crate::barrier(self.id)
    }
}
