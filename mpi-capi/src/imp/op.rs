//! Reduction operations: the predefined `MPI_Op` handles, MPI_Op_create(_c), MPI_Op_free,
//! MPI_Op_commutative. A user operation becomes, for each call that uses it, a core closure
//! bound to the C datatype handle of that call (the C function receives it as its fourth
//! argument).

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use madmpi::{BuiltinOp, Datatype, ErrorClass, Op};
use parking_lot::{const_mutex, Mutex};

use super::common::*;
use crate::abi::*;
use crate::handles::{Kind, Table};

/// A user function, with an `int` or an `MPI_Count` length.
#[derive(Clone, Copy)]
enum UserFn {
    Int(unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut MPI_Datatype)),
    Big(unsafe extern "C" fn(*mut c_void, *mut c_void, *mut MPI_Count, *mut MPI_Datatype)),
}

struct UserOp {
    f: UserFn,
    commute: bool,
}

static OPS: Mutex<Table<UserOp>> = const_mutex(Table::new(Kind::Op));

/// The predefined operation of a handle value.
#[inline]
pub(crate) fn builtin(h: usize) -> Option<BuiltinOp> {
    use BuiltinOp::*;
    Some(match h {
        0x21 => Sum,
        0x22 => Min,
        0x23 => Max,
        0x24 => Prod,
        0x28 => Band,
        0x29 => Bor,
        0x2a => Bxor,
        0x30 => Land,
        0x31 => Lor,
        0x32 => Lxor,
        0x38 => MinLoc,
        0x39 => MaxLoc,
        0x3c => Replace,
        0x3d => NoOp,
        _ => return None,
    })
}

/// Name of an operation handle for messages.
pub(crate) fn op_name(op: MPI_Op) -> String {
    match builtin(op as usize) {
        Some(b) => b.mpi_name().into(),
        None if op as usize == 0x20 => "MPI_OP_NULL".into(),
        None => format!("{:#x}", op as usize),
    }
}

/// The core operation of `op` for data of type `dt` (handle `dth`): a user function is bound
/// to `dth`, and called in pieces of at most `INT_MAX` elements for the `int` form.
pub(crate) fn op(op: MPI_Op, dth: MPI_Datatype, dt: &Datatype) -> R<Op> {
    let h = op as usize;
    if let Some(b) = builtin(h) {
        return Ok(Op::Builtin(b));
    }
    if h == 0x20 {
        return fail(ErrorClass::Op, "invalid operation: MPI_OP_NULL");
    }
    let (f, commute) = {
        let t = OPS.lock();
        let e = t.get(h)?;
        (e.f, e.commute)
    };
    let dtv = dth as usize;
    let ext = dt.extent();
    let call = move |a: *const u8, b: *mut u8, n: usize| {
        let mut d = dtv as MPI_Datatype;
        match f {
            UserFn::Big(f) => {
                let mut len = n as MPI_Count;
                // SAFETY: the core passes `n` elements of the datatype at both pointers.
                unsafe { f(a as *mut c_void, b as *mut c_void, &mut len, &mut d) };
            }
            UserFn::Int(f) => {
                let mut done = 0usize;
                while done < n {
                    let k = (n - done).min(c_int::MAX as usize);
                    let off = done as isize * ext;
                    let mut len = k as c_int;
                    // SAFETY: as above, for the elements [done, done + k).
                    unsafe {
                        f(
                            a.wrapping_offset(off) as *mut c_void,
                            b.wrapping_offset(off) as *mut c_void,
                            &mut len,
                            &mut d,
                        )
                    };
                    done += k;
                }
            }
        }
    };
    Ok(Op::User {
        f: Arc::new(call),
        commute,
    })
}

fn create(f: UserFn, commute: c_int, op: *mut MPI_Op) -> R<()> {
    let out = out(op, "op")?;
    let h = OPS.lock().insert(UserOp {
        f,
        commute: commute != 0,
    })?;
    *out = h as MPI_Op;
    Ok(())
}

pub unsafe fn MPI_Op_create(user_fn: MPI_User_function, commute: c_int, op: *mut MPI_Op) -> c_int {
    let r = (|| {
        running()?;
        let f = user_fn.ok_or_else(|| {
            madmpi::Error::new(ErrorClass::Arg, "invalid argument: user_fn is NULL")
        })?;
        create(UserFn::Int(f), commute, op)
    })();
    finish_self("MPI_Op_create", r)
}

pub unsafe fn MPI_Op_create_c(
    user_fn: MPI_User_function_c,
    commute: c_int,
    op: *mut MPI_Op,
) -> c_int {
    let r = (|| {
        running()?;
        let f = user_fn.ok_or_else(|| {
            madmpi::Error::new(ErrorClass::Arg, "invalid argument: user_fn is NULL")
        })?;
        create(UserFn::Big(f), commute, op)
    })();
    finish_self("MPI_Op_create_c", r)
}

pub unsafe fn MPI_Op_free(op: *mut MPI_Op) -> c_int {
    let r = (|| {
        running()?;
        let slot = out(op, "op")?;
        let h = *slot as usize;
        if builtin(h).is_some() {
            return fail(
                ErrorClass::Op,
                format!("cannot free the predefined operation {}", op_name(*slot)),
            );
        }
        if h == 0x20 {
            return fail(ErrorClass::Op, "invalid operation: MPI_OP_NULL");
        }
        // Operations in progress hold their own copy of the function.
        OPS.lock().remove(h)?;
        *slot = MPI_OP_NULL;
        Ok(())
    })();
    finish_self("MPI_Op_free", r)
}

pub unsafe fn MPI_Op_commutative(op: MPI_Op, commute: *mut c_int) -> c_int {
    let r = (|| {
        let out = out(commute, "commute")?;
        let h = op as usize;
        let c = match builtin(h) {
            Some(_) => true,
            None if h == 0x20 => return fail(ErrorClass::Op, "invalid operation: MPI_OP_NULL"),
            None => OPS.lock().get(h)?.commute,
        };
        *out = c as c_int;
        Ok(())
    })();
    finish_self("MPI_Op_commutative", r)
}
