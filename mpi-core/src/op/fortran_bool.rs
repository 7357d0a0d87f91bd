//! The values of Fortran's `.TRUE.` and `.FALSE.` (MPI_Abi_set_fortran_booleans): a Fortran
//! binding layer over the standard ABI tells them once, and the logical reductions on the
//! Fortran `LOGICAL` types of that size then read a value as true unless it is `.FALSE.`, and
//! write `.TRUE.` or `.FALSE.` (without them, a logical is true when nonzero and the results
//! are 1 and 0, as for C).

use madmpi_datatypes::Basic;
use parking_lot::RwLock;

use super::BuiltinOp;
use crate::error::{err, ErrorClass, Result};

/// A `LOGICAL` size in bytes, with the bytes of `.TRUE.` and of `.FALSE.`.
pub type Booleans = (usize, Vec<u8>, Vec<u8>);

/// The values, once set.
static BOOLS: RwLock<Option<Booleans>> = RwLock::new(None);

/// Set the values, once: a second call is an error (`Other`; the C layer reports
/// MPI_ERR_ABI), as is a size no Fortran `LOGICAL` has, or equal values.
pub fn set_fortran_booleans(size: usize, t: &[u8], f: &[u8]) -> Result<()> {
    if ![1, 2, 4, 8, 16].contains(&size) || t.len() != size || f.len() != size {
        return err(
            ErrorClass::Arg,
            format!("logical_size {size}: a Fortran LOGICAL has 1, 2, 4, 8 or 16 bytes"),
        );
    }
    if t == f {
        return err(ErrorClass::Arg, ".TRUE. and .FALSE. must differ");
    }
    let mut g = BOOLS.write();
    if g.is_some() {
        return err(
            ErrorClass::Other,
            "the Fortran booleans were already set (MPI_Abi_set_fortran_booleans may be called once)",
        );
    }
    *g = Some((size, t.to_vec(), f.to_vec()));
    Ok(())
}

/// The values set, if any: (size, `.TRUE.`, `.FALSE.`).
pub fn fortran_booleans() -> Option<Booleans> {
    BOOLS.read().clone()
}

/// `io = a op io` on `n` Fortran logicals of type `b` with the values set; false (nothing
/// done) when none are set for its size or `b` is not a Fortran `LOGICAL`.
///
/// # Safety
/// `a` and `io` hold `n * size` bytes.
pub(super) unsafe fn apply(
    op: BuiltinOp,
    b: Basic,
    size: usize,
    n: usize,
    a: *const u8,
    io: *mut u8,
) -> bool {
    let fortran = matches!(
        b,
        Basic::Logical
            | Basic::Logical1
            | Basic::Logical2
            | Basic::Logical4
            | Basic::Logical8
            | Basic::Logical16
    );
    if !fortran {
        return false;
    }
    let g = BOOLS.read();
    let Some((s, t, f)) = g.as_ref() else {
        return false;
    };
    if *s != size {
        return false;
    }
    for i in 0..n {
        // SAFETY: element i of both buffers is inside the `n * size` bytes of the caller.
        let (x, y) = unsafe {
            (
                std::slice::from_raw_parts(a.add(i * size), size),
                std::slice::from_raw_parts_mut(io.add(i * size), size),
            )
        };
        let (p, q) = (x != f.as_slice(), y != f.as_slice());
        let r = match op {
            BuiltinOp::Land => p && q,
            BuiltinOp::Lor => p || q,
            BuiltinOp::Lxor => p != q,
            _ => return false,
        };
        y.copy_from_slice(if r { t } else { f });
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_once_and_applied_to_fortran_logicals_only() {
        let (t, f) = ((-1i32).to_ne_bytes(), 0i32.to_ne_bytes());
        assert!(set_fortran_booleans(3, &t[..3], &f[..3]).is_err());
        set_fortran_booleans(4, &t, &f).unwrap();
        assert!(set_fortran_booleans(4, &t, &f).is_err(), "once");
        assert_eq!(fortran_booleans(), Some((4, t.to_vec(), f.to_vec())));
        let a: [i32; 3] = [-1, 0, 5];
        let mut io: [i32; 3] = [-1, -1, 0];
        // SAFETY: three 4-byte elements each.
        let done = unsafe {
            apply(
                BuiltinOp::Land,
                Basic::Logical,
                4,
                3,
                a.as_ptr() as _,
                io.as_mut_ptr() as _,
            )
        };
        assert!(done);
        assert_eq!(io, [-1, 0, 0]);
        // SAFETY: as above.
        let c_bool = unsafe {
            apply(
                BuiltinOp::Lor,
                Basic::CBool,
                1,
                1,
                a.as_ptr() as _,
                io.as_mut_ptr() as _,
            )
        };
        assert!(!c_bool, "C types keep C's rule");
    }
}
