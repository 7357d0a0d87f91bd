//! Info objects: ordered (key, value) string pairs in a handle table, MPI_INFO_ENV (the
//! process's start-up environment, read-only) and MPI_Info_create_env. Keys are at most
//! `MPI_MAX_INFO_KEY - 1` characters (MPI_ERR_INFO_KEY), values `MPI_MAX_INFO_VAL - 1`
//! (MPI_ERR_INFO_VALUE); deleting a missing key is MPI_ERR_INFO_NOKEY.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

use madmpi::ErrorClass;
use parking_lot::{const_mutex, Mutex};

use super::common::*;
use crate::abi::*;
use crate::errors;
use crate::handles::{Kind, Table};

/// An info object: pairs in insertion order.
pub(crate) type Pairs = Vec<(String, String)>;

static INFOS: Mutex<Table<Pairs>> = const_mutex(Table::new(Kind::Info));

/// A failure with its exact error code (the info classes have no core class).
type E = (c_int, String);

fn code(e: madmpi::Error) -> E {
    (errors::class_code(e.class), e.msg)
}

fn done(name: &str, r: Result<(), E>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err((c, why)) => errors::raise_code(MPI_COMM_SELF, &|| name.to_string(), c, &why),
    }
}

/// The contents of MPI_INFO_ENV.
fn env_pairs(argv: Option<Vec<String>>) -> Pairs {
    let args = argv.unwrap_or_else(|| std::env::args().collect());
    let mut v = Vec::new();
    if let Some(c) = args.first() {
        v.push(("command".into(), c.clone()));
    }
    if args.len() > 1 {
        v.push(("argv".into(), args[1..].join(" ")));
    }
    // Before MPI_Init and after MPI_Finalize, from the launcher (PMI, Slurm), so that the
    // object is the same whenever it is asked for; a process started without one is alone.
    let launched = || {
        ["PMI_SIZE", "SLURM_NTASKS"]
            .iter()
            .find_map(|k| std::env::var(k).ok()?.trim().parse::<u32>().ok())
    };
    let n = madmpi::world_size().ok().or_else(launched).unwrap_or(1);
    v.push(("maxprocs".into(), n.to_string()));
    v.push(("host".into(), madmpi::processor_name()));
    v.push(("arch".into(), std::env::consts::ARCH.into()));
    if let Ok(d) = std::env::current_dir() {
        v.push(("wdir".into(), d.display().to_string()));
    }
    let level = match madmpi::query_thread() {
        madmpi::ThreadLevel::Single => "MPI_THREAD_SINGLE",
        madmpi::ThreadLevel::Funneled => "MPI_THREAD_FUNNELED",
        madmpi::ThreadLevel::Serialized => "MPI_THREAD_SERIALIZED",
        madmpi::ThreadLevel::Multiple => "MPI_THREAD_MULTIPLE",
    };
    v.push(("thread_level".into(), level.into()));
    v
}

/// The pairs of `info` (MPI_INFO_NULL is an error).
pub(crate) fn pairs(info: MPI_Info) -> R<Pairs> {
    match info as usize {
        0x130 => fail(ErrorClass::Info, "invalid info object: MPI_INFO_NULL"),
        0x131 => Ok(env_pairs(None)),
        h => INFOS.lock().get(h).cloned(),
    }
}

/// A new info handle holding `p`.
pub(crate) fn new_info(p: Pairs) -> R<MPI_Info> {
    Ok(INFOS.lock().insert(p)? as MPI_Info)
}

fn with_mut<T>(info: MPI_Info, f: impl FnOnce(&mut Pairs) -> Result<T, E>) -> Result<T, E> {
    match info as usize {
        0x130 => Err((MPI_ERR_INFO, "invalid info object: MPI_INFO_NULL".into())),
        0x131 => Err((MPI_ERR_INFO, "MPI_INFO_ENV cannot be modified".into())),
        h => {
            let mut t = INFOS.lock();
            let p = t.get_mut(h).map_err(code)?;
            f(p)
        }
    }
}

fn key_arg(key: *const c_char) -> Result<String, E> {
    if key.is_null() {
        return Err((MPI_ERR_ARG, "invalid argument: key is NULL".into()));
    }
    // SAFETY: a non-null key is a C string (the caller's contract).
    let k = unsafe { CStr::from_ptr(key) }
        .to_string_lossy()
        .into_owned();
    if k.is_empty() || k.len() >= MPI_MAX_INFO_KEY as usize {
        return Err((
            MPI_ERR_INFO_KEY,
            format!(
                "invalid info key of {} characters (1 to {})",
                k.len(),
                MPI_MAX_INFO_KEY - 1
            ),
        ));
    }
    Ok(k)
}

fn get(info: MPI_Info, key: *const c_char) -> Result<Option<String>, E> {
    let k = key_arg(key)?;
    let p = pairs(info).map_err(code)?;
    Ok(p.into_iter().find(|(x, _)| *x == k).map(|(_, v)| v))
}

fn out_e<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, E> {
    out(p, what).map_err(code)
}

/// (Like every info function, callable before MPI_Init and after MPI_Finalize: MPI-4.0.)
pub unsafe fn MPI_Info_create(info: *mut MPI_Info) -> c_int {
    let r = (|| {
        let o = out_e(info, "info")?;
        *o = new_info(Vec::new()).map_err(code)?;
        Ok(())
    })();
    done("MPI_Info_create", r)
}

pub unsafe fn MPI_Info_create_env(
    argc: c_int,
    argv: *mut *mut c_char,
    info: *mut MPI_Info,
) -> c_int {
    let r = (|| {
        let o = out_e(info, "info")?;
        let args = if argv.is_null() || argc <= 0 {
            None
        } else {
            Some(
                (0..argc as usize)
                    .filter_map(|i| {
                        // SAFETY: argv holds argc C strings (the caller's contract).
                        let p = unsafe { *argv.add(i) };
                        (!p.is_null())
                            .then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
                    })
                    .collect(),
            )
        };
        *o = new_info(env_pairs(args)).map_err(code)?;
        Ok(())
    })();
    done("MPI_Info_create_env", r)
}

pub unsafe fn MPI_Info_set(info: MPI_Info, key: *const c_char, value: *const c_char) -> c_int {
    let r = (|| {
        let k = key_arg(key)?;
        if value.is_null() {
            return Err((MPI_ERR_ARG, "invalid argument: value is NULL".into()));
        }
        let v = CStr::from_ptr(value).to_string_lossy().into_owned();
        if v.len() >= MPI_MAX_INFO_VAL as usize {
            return Err((
                MPI_ERR_INFO_VALUE,
                format!(
                    "info value of {} characters (at most {})",
                    v.len(),
                    MPI_MAX_INFO_VAL - 1
                ),
            ));
        }
        with_mut(info, |p| {
            match p.iter_mut().find(|(x, _)| *x == k) {
                Some(e) => e.1 = v,
                None => p.push((k, v)),
            }
            Ok(())
        })
    })();
    done("MPI_Info_set", r)
}

pub unsafe fn MPI_Info_delete(info: MPI_Info, key: *const c_char) -> c_int {
    let r = (|| {
        let k = key_arg(key)?;
        with_mut(info, |p| match p.iter().position(|(x, _)| *x == k) {
            Some(i) => {
                p.remove(i);
                Ok(())
            }
            None => Err((
                MPI_ERR_INFO_NOKEY,
                format!("no key \"{k}\" in the info object"),
            )),
        })
    })();
    done("MPI_Info_delete", r)
}

pub unsafe fn MPI_Info_get(
    info: MPI_Info,
    key: *const c_char,
    valuelen: c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    let r = (|| {
        let f = out_e(flag, "flag")?;
        if valuelen < 0 {
            return Err((MPI_ERR_ARG, format!("invalid valuelen {valuelen}")));
        }
        match get(info, key)? {
            Some(v) => {
                if value.is_null() {
                    return Err((MPI_ERR_ARG, "invalid argument: value is NULL".into()));
                }
                copy_cstr(&v, value, valuelen as usize + 1);
                *f = 1;
            }
            None => *f = 0,
        }
        Ok(())
    })();
    done("MPI_Info_get", r)
}

pub unsafe fn MPI_Info_get_string(
    info: MPI_Info,
    key: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    let r = (|| {
        let f = out_e(flag, "flag")?;
        let bl = out_e(buflen, "buflen")?;
        match get(info, key)? {
            Some(v) => {
                if *bl > 0 && !value.is_null() {
                    copy_cstr(&v, value, *bl as usize);
                }
                *bl = v.len() as c_int + 1;
                *f = 1;
            }
            None => *f = 0,
        }
        Ok(())
    })();
    done("MPI_Info_get_string", r)
}

pub unsafe fn MPI_Info_get_valuelen(
    info: MPI_Info,
    key: *const c_char,
    valuelen: *mut c_int,
    flag: *mut c_int,
) -> c_int {
    let r = (|| {
        let f = out_e(flag, "flag")?;
        let l = out_e(valuelen, "valuelen")?;
        match get(info, key)? {
            Some(v) => {
                *l = v.len() as c_int;
                *f = 1;
            }
            None => *f = 0,
        }
        Ok(())
    })();
    done("MPI_Info_get_valuelen", r)
}

pub unsafe fn MPI_Info_get_nkeys(info: MPI_Info, nkeys: *mut c_int) -> c_int {
    let r = (|| {
        let o = out_e(nkeys, "nkeys")?;
        *o = pairs(info).map_err(code)?.len() as c_int;
        Ok(())
    })();
    done("MPI_Info_get_nkeys", r)
}

pub unsafe fn MPI_Info_get_nthkey(info: MPI_Info, n: c_int, key: *mut c_char) -> c_int {
    let r = (|| {
        let p = pairs(info).map_err(code)?;
        if n < 0 || n as usize >= p.len() {
            return Err((
                MPI_ERR_ARG,
                format!("invalid key index {n} (the object has {} keys)", p.len()),
            ));
        }
        if key.is_null() {
            return Err((MPI_ERR_ARG, "invalid argument: key is NULL".into()));
        }
        copy_cstr(&p[n as usize].0, key, MPI_MAX_INFO_KEY as usize);
        Ok(())
    })();
    done("MPI_Info_get_nthkey", r)
}

pub unsafe fn MPI_Info_dup(info: MPI_Info, newinfo: *mut MPI_Info) -> c_int {
    let r = (|| {
        let o = out_e(newinfo, "newinfo")?;
        let p = pairs(info).map_err(code)?;
        *o = new_info(p).map_err(code)?;
        Ok(())
    })();
    done("MPI_Info_dup", r)
}

pub unsafe fn MPI_Info_free(info: *mut MPI_Info) -> c_int {
    let r = (|| {
        let slot = out_e(info, "info")?;
        match *slot as usize {
            0x130 => return Err((MPI_ERR_INFO, "invalid info object: MPI_INFO_NULL".into())),
            0x131 => return Err((MPI_ERR_INFO, "MPI_INFO_ENV cannot be freed".into())),
            h => {
                INFOS.lock().remove(h).map_err(code)?;
            }
        }
        *slot = MPI_INFO_NULL;
        Ok(())
    })();
    done("MPI_Info_free", r)
}
