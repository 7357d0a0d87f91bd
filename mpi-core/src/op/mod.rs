//! Reduction operations: the predefined ones (MPI_SUM … MPI_NO_OP) applied to data of one basic
//! type, and user functions (MPI_Op_create).
//!
//! Collectives reduce *packed* data — the stream of `count * size` bytes that the elements of a
//! datatype pack into — so that intermediate results travel and combine as plain bytes whatever
//! the user's layout. A predefined operation applies itself to that stream directly through
//! [`Datatype::uniform_element`]; a user function receives its arguments in the memory layout
//! of the datatype (unpacked into scratch buffers first when that layout is not contiguous).
//! [`reduce_layout`] is the entry for data in the user's layout (MPI_Reduce_local).
//!
//! Which predefined operation applies to which type follows the standard's table (C and Fortran
//! integers, floating point, logical, complex, byte; MINLOC/MAXLOC on the pair types), plus
//! `MPI_CHAR` as an integer, as MPICH and Open MPI accept it. MPI_REPLACE and MPI_NO_OP are
//! defined for one-sided accumulation only: collectives reject them, [`apply_packed`] supports
//! them for the RMA layer. Values are read unaligned, as packed data may sit at any offset.
//!
//! User functions run with the engine lock held (they are called by the progress engine): like
//! the standard says, they must not call MPI communication functions.
//!
//! Here: the operation types, their checks and the entry points for packed and user-layout data;
//! `kind` classifies the basic types, `builtin` holds the predefined operations' arithmetic,
//! `buffer` the aligned scratch buffers.

mod buffer;
mod builtin;
mod fortran_bool;
mod kind;

use std::sync::Arc;

use madmpi_datatypes::{Basic, Datatype};

use crate::error::{err, Error, ErrorClass, Result};

pub(crate) use buffer::AlignedBuf;
pub use builtin::apply_basic;
pub(crate) use builtin::{kernel, Kernel};
pub use fortran_bool::{fortran_booleans, set_fortran_booleans};
pub(crate) use kind::is_integer;
use kind::{available, kind, Fl, Kind};

/// The width of `b` when it is a C `float` (4) or `double` (8): the types whose kernels
/// compute in `f32` or `f64` (the one-sided fast path adds one such element inline).
pub(crate) fn float_width(b: Basic) -> Option<usize> {
    match kind(b) {
        Kind::Float(Fl::F32) => Some(4),
        Kind::Float(Fl::F64) => Some(8),
        _ => None,
    }
}

/// A predefined reduction operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BuiltinOp {
    /// MPI_SUM.
    Sum,
    /// MPI_PROD.
    Prod,
    /// MPI_MIN.
    Min,
    /// MPI_MAX.
    Max,
    /// MPI_LAND.
    Land,
    /// MPI_LOR.
    Lor,
    /// MPI_LXOR.
    Lxor,
    /// MPI_BAND.
    Band,
    /// MPI_BOR.
    Bor,
    /// MPI_BXOR.
    Bxor,
    /// MPI_MINLOC.
    MinLoc,
    /// MPI_MAXLOC.
    MaxLoc,
    /// MPI_REPLACE (one-sided accumulation only).
    Replace,
    /// MPI_NO_OP (one-sided accumulation only).
    NoOp,
}

impl BuiltinOp {
    /// Every predefined operation.
    pub const ALL: [BuiltinOp; 14] = [
        BuiltinOp::Sum,
        BuiltinOp::Prod,
        BuiltinOp::Min,
        BuiltinOp::Max,
        BuiltinOp::Land,
        BuiltinOp::Lor,
        BuiltinOp::Lxor,
        BuiltinOp::Band,
        BuiltinOp::Bor,
        BuiltinOp::Bxor,
        BuiltinOp::MinLoc,
        BuiltinOp::MaxLoc,
        BuiltinOp::Replace,
        BuiltinOp::NoOp,
    ];

    /// The standard's name, e.g. `"MPI_SUM"`.
    pub fn mpi_name(self) -> &'static str {
        match self {
            BuiltinOp::Sum => "MPI_SUM",
            BuiltinOp::Prod => "MPI_PROD",
            BuiltinOp::Min => "MPI_MIN",
            BuiltinOp::Max => "MPI_MAX",
            BuiltinOp::Land => "MPI_LAND",
            BuiltinOp::Lor => "MPI_LOR",
            BuiltinOp::Lxor => "MPI_LXOR",
            BuiltinOp::Band => "MPI_BAND",
            BuiltinOp::Bor => "MPI_BOR",
            BuiltinOp::Bxor => "MPI_BXOR",
            BuiltinOp::MinLoc => "MPI_MINLOC",
            BuiltinOp::MaxLoc => "MPI_MAXLOC",
            BuiltinOp::Replace => "MPI_REPLACE",
            BuiltinOp::NoOp => "MPI_NO_OP",
        }
    }

    /// Whether the operation is defined on elements of `b` (the standard's table).
    pub fn supports(self, b: Basic) -> bool {
        use BuiltinOp::*;
        let k = kind(b);
        match self {
            Sum | Prod => matches!(k, Kind::Int { .. } | Kind::Float(_) | Kind::Complex(_)),
            Min | Max => matches!(k, Kind::Int { .. } | Kind::Float(_)),
            Land | Lor | Lxor => matches!(k, Kind::Int { fortran: false, .. } | Kind::Logical(_)),
            Band | Bor | Bxor => matches!(k, Kind::Int { .. } | Kind::Byte),
            MinLoc | MaxLoc => matches!(k, Kind::Pair(..)),
            Replace | NoOp => true,
        }
    }
}

/// A user function: `f(in, inout, count)` computes `inout[i] = in[i] op inout[i]` for `count`
/// elements of the operation's datatype, both pointers in that datatype's memory layout. The C
/// layer binds the C datatype handle of the call into the closure.
pub type UserFn = Arc<dyn Fn(*const u8, *mut u8, usize) + Send + Sync>;

/// A reduction operation.
#[derive(Clone)]
pub enum Op {
    /// A predefined operation.
    Builtin(BuiltinOp),
    /// A user operation (MPI_Op_create).
    User {
        /// The function.
        f: UserFn,
        /// Whether it is commutative (it is always assumed associative).
        commute: bool,
    },
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Builtin(b) => write!(f, "{}", b.mpi_name()),
            Op::User { commute, .. } => write!(f, "user op (commute={commute})"),
        }
    }
}

impl Op {
    /// Whether the operation is commutative (every predefined one is).
    pub fn is_commutative(&self) -> bool {
        match self {
            Op::Builtin(_) => true,
            Op::User { commute, .. } => *commute,
        }
    }

    /// Check that a collective reduction may apply this operation to `dt` (MPI_ERR_OP if not).
    pub fn check_collective(&self, dt: &Datatype) -> Result<()> {
        match self {
            Op::Builtin(b @ (BuiltinOp::Replace | BuiltinOp::NoOp)) => err(
                ErrorClass::Op,
                format!(
                    "{} is defined for one-sided accumulation only, not for reductions",
                    b.mpi_name()
                ),
            ),
            _ => self.check(dt),
        }
    }

    /// Check that the operation is defined on `dt` (a derived type must be made of one basic
    /// type for a predefined operation).
    pub fn check(&self, dt: &Datatype) -> Result<()> {
        let Op::Builtin(b) = self else {
            return Ok(());
        };
        let Some((basic, n)) = dt.uniform_element() else {
            return err(
                ErrorClass::Op,
                format!(
                    "{} applies to datatypes made of one predefined type; this one mixes several",
                    b.mpi_name()
                ),
            );
        };
        if n == 0 || b.supports(basic) && available(*b, basic) {
            return Ok(());
        }
        if b.supports(basic) {
            return err(
                ErrorClass::Op,
                format!(
                    "{} on {} is not available in this build (no arithmetic for that format)",
                    b.mpi_name(),
                    basic.mpi_name()
                ),
            );
        }
        err(
            ErrorClass::Op,
            format!(
                "{} is not defined for datatype {}",
                b.mpi_name(),
                basic.mpi_name()
            ),
        )
    }
}

// ------------------------------------------------------------------------------------ apply

/// `inout = in op inout` over `count` elements of `dt`, both buffers holding packed data
/// (`count * dt.size()` bytes, any alignment). The operation must have been checked
/// ([`Op::check`]).
///
/// # Safety
/// `inb` must be readable and `inout` writable for `count * dt.size()` bytes; they may not
/// overlap unless equal.
pub unsafe fn apply_packed(
    op: &Op,
    dt: &Datatype,
    count: usize,
    inb: *const u8,
    inout: *mut u8,
) -> Result<()> {
    if count == 0 || dt.size() == 0 {
        return Ok(());
    }
    match op {
        Op::Builtin(b) => {
            let (basic, k) = dt.uniform_element().ok_or_else(|| {
                Error::new(ErrorClass::Op, "datatype mixes several predefined types")
            })?;
            apply_basic(*b, basic, count * k, inb, inout)
        }
        Op::User { f, .. } => {
            if dt.is_contiguous() {
                // The packed stream is the memory layout, shifted by the true lower bound.
                let lb = dt.true_lb();
                f(inb.wrapping_offset(-lb), inout.wrapping_offset(-lb), count);
                return Ok(());
            }
            let (lo, hi) = dt
                .buffer_span(count)
                .map_err(|e| Error::new(ErrorClass::Count, e.to_string()))?;
            let len = (hi - lo) as usize;
            let mut a = AlignedBuf::new(len);
            let mut b = AlignedBuf::new(len);
            let pa = a.ptr().wrapping_offset(-lo);
            let pb = b.ptr().wrapping_offset(-lo);
            let bytes = count * dt.size();
            dt.unpack(pa, count, 0, std::slice::from_raw_parts(inb, bytes));
            dt.unpack(pb, count, 0, std::slice::from_raw_parts(inout, bytes));
            f(pa, pb, count);
            dt.pack(pb, count, 0, std::slice::from_raw_parts_mut(inout, bytes));
            Ok(())
        }
    }
}

/// `inout = in op inout` over `count` elements of `dt` in the user's memory layout
/// (MPI_Reduce_local).
///
/// # Safety
/// `inb` and `inout` must hold `count` elements of `dt`.
pub unsafe fn reduce_layout(
    op: &Op,
    dt: &Datatype,
    count: usize,
    inb: *const u8,
    inout: *mut u8,
) -> Result<()> {
    op.check(dt)?;
    if count == 0 || dt.size() == 0 {
        return Ok(());
    }
    match op {
        Op::User { f, .. } => {
            f(inb, inout, count);
            Ok(())
        }
        Op::Builtin(_) => {
            if dt.is_contiguous() {
                let lb = dt.true_lb();
                return apply_packed(op, dt, count, inb.offset(lb), inout.offset(lb));
            }
            let bytes = count * dt.size();
            let mut a = vec![0u8; bytes];
            let mut b = vec![0u8; bytes];
            dt.pack(inb, count, 0, &mut a);
            dt.pack(inout, count, 0, &mut b);
            apply_packed(op, dt, count, a.as_ptr(), b.as_mut_ptr())?;
            dt.unpack(inout, count, 0, &b);
            Ok(())
        }
    }
}
