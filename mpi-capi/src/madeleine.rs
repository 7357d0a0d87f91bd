//! The C ABI of the Madeleine API (`include/madeleine.h`): `mad_*` functions over
//! `madmpi::madeleine`. Channels and connections are integer handles, each naming a slot of a
//! table (a slab: the handle gives the slot directly) and the slot's generation, so a wrong,
//! ended or closed one is an error (`MPI_ERR_ARG`), never a crash. Errors go to the error
//! handler of the communicator the channel was opened on, as MPI errors do, and return its code.
//!
//! Each exported function keeps the shape of the MPI ones: panic boundary → lookup → one call
//! into the core → error mapping → error handler.

use std::os::raw::{c_int, c_void};
use std::sync::Mutex;

use madmpi::madeleine::{self, Channel, Packing, RecvMode, SendMode, Unpacking};
use madmpi::{Error, ErrorClass};

use crate::abi::*;
use crate::errors;
use crate::handles;

type R<T> = Result<T, Error>;

/// `mad_send_SAFER` and the other flags of `madeleine.h`.
const SEND_SAFER: c_int = 0;
const SEND_LATER: c_int = 1;
const SEND_CHEAPER: c_int = 2;
const RECEIVE_EXPRESS: c_int = 0;
const RECEIVE_CHEAPER: c_int = 1;

enum Conn {
    Pack(Packing<'static>),
    Unpack(Unpacking<'static>),
}

struct Entry {
    conn: Conn,
    /// The communicator whose error handler reports this connection's errors.
    comm: MPI_Comm,
}

struct ChannelEntry {
    channel: Channel,
    comm: MPI_Comm,
}

/// A table of handles: the C layer's generation-checked handle table ([`handles::Table`],
/// a slab indexed by the handle: no hash, no search), of a kind of its own for channels and
/// for connections (one table's handle is never valid in the other; a handle whose slot was
/// freed, perhaps reused, is refused). Lookups answer `None` for a wrong handle: the callers
/// say which object was expected.
struct Slab<T>(handles::Table<T>);

impl<T> Slab<T> {
    const fn new(kind: handles::Kind) -> Slab<T> {
        Slab(handles::Table::new(kind))
    }

    fn insert(&mut self, value: T) -> R<usize> {
        self.0.insert(value)
    }

    fn get(&self, h: usize) -> Option<&T> {
        self.0.get(h).ok()
    }

    fn get_mut(&mut self, h: usize) -> Option<&mut T> {
        self.0.get_mut(h).ok()
    }

    fn remove(&mut self, h: usize) -> Option<T> {
        self.0.remove(h).ok()
    }
}

struct Tables {
    channels: Slab<ChannelEntry>,
    conns: Slab<Entry>,
}

/// A connection's pieces are raw pointers into the user's memory, valid as `mad_pack`'s and
/// `mad_unpack`'s contracts say: the tables only hold them between calls.
struct Shared(Mutex<Tables>);
// SAFETY: the raw pointers held are the C program's buffers, which it may hand to any thread;
// every access goes through the mutex.
unsafe impl Sync for Shared {}

/// One mutex over both tables (uncontended: one atomic exchange to take it, one to release;
/// it stays for programs that use the API from several threads).
static TABLES: Shared = Shared(Mutex::new(Tables {
    channels: Slab::new(handles::Kind::MadChannel),
    conns: Slab::new(handles::Kind::MadConn),
}));

fn tables<T>(f: impl FnOnce(&mut Tables) -> T) -> T {
    let mut g = TABLES.0.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut g)
}

fn bad(what: &str) -> Error {
    Error::new(ErrorClass::Arg, format!("invalid {what}"))
}

/// The modes of a `mad_pack`/`mad_unpack` (inlined: two compares on the path; the error,
/// rare, is built out of line).
#[inline(always)]
fn modes(send: c_int, recv: c_int) -> R<(SendMode, RecvMode)> {
    let s = match send {
        SEND_SAFER => SendMode::Safer,
        SEND_LATER => SendMode::Later,
        SEND_CHEAPER => SendMode::Cheaper,
        _ => return Err(bad_mode("send", send)),
    };
    let r = match recv {
        RECEIVE_EXPRESS => RecvMode::Express,
        RECEIVE_CHEAPER => RecvMode::Cheaper,
        _ => return Err(bad_mode("receive", recv)),
    };
    Ok((s, r))
}

#[cold]
#[inline(never)]
fn bad_mode(what: &str, m: c_int) -> Error {
    bad(&format!("{what} mode {m}"))
}

/// Run `f` inside a panic boundary; report its error on the handler of `comm()`'s
/// communicator (looked up only when there is an error).
fn guard(name: &'static str, comm: impl FnOnce() -> MPI_Comm, f: impl FnOnce() -> R<()>) -> c_int {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(Error::new(
            ErrorClass::Intern,
            "internal error (panic) in the library",
        ))
    });
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => errors::raise(comm(), &|| name.to_string(), e),
    }
}

fn out<T>(p: *mut T, what: &str) -> R<&'static mut T> {
    // SAFETY: a non-null output argument points to storage (the caller's contract).
    unsafe { p.as_mut() }.ok_or_else(|| bad(&format!("argument: {what} is NULL")))
}

fn channel_comm(ch: usize) -> MPI_Comm {
    tables(|t| t.channels.get(ch).map(|c| c.comm)).unwrap_or(MPI_COMM_WORLD)
}

fn conn_comm(c: usize) -> MPI_Comm {
    tables(|t| t.conns.get(c).map(|c| c.comm)).unwrap_or(MPI_COMM_WORLD)
}

/// `int mad_open_channel(MPI_Comm comm, mad_channel_t *channel)`: collective over `comm`.
#[no_mangle]
pub unsafe extern "C" fn mad_open_channel(comm: MPI_Comm, channel: *mut *mut c_void) -> c_int {
    guard(
        "mad_open_channel",
        || comm,
        || {
            let out = out(channel, "channel")?;
            let c = handles::comm(comm)?;
            let ch = Channel::open(c)?;
            let h = tables(|t| t.channels.insert(ChannelEntry { channel: ch, comm }))?;
            *out = h as *mut c_void;
            Ok(())
        },
    )
}

/// `int mad_close_channel(mad_channel_t *channel)`: sets `*channel` to NULL.
#[no_mangle]
pub unsafe extern "C" fn mad_close_channel(channel: *mut *mut c_void) -> c_int {
    let h = channel.as_ref().map_or(0, |p| *p as usize);
    guard(
        "mad_close_channel",
        || channel_comm(h),
        || {
            let out = out(channel, "channel")?;
            let e = tables(|t| t.channels.remove(h)).ok_or_else(|| bad("channel"))?;
            *out = std::ptr::null_mut();
            e.channel.close()
        },
    )
}

fn begin(
    name: &'static str,
    channel: *mut c_void,
    remote: Option<c_int>,
    connection: *mut *mut c_void,
    pack: bool,
) -> c_int {
    let ch = channel as usize;
    if pack {
        return begin_packing(name, ch, remote.unwrap_or(-1), connection);
    }
    // The channel stays in the table while the call blocks: take what the call needs (its
    // communicator and size, and the user's communicator for errors) in one look.
    let found = tables(|t| {
        t.channels
            .get(ch)
            .map(|c| (c.comm, c.channel.comm(), c.channel.size().ok()))
    });
    let comm = found.map_or(MPI_COMM_WORLD, |f| f.0);
    guard(
        name,
        || comm,
        || {
            let out = out(connection, "connection")?;
            let (_, id, size) = found.ok_or_else(|| bad("channel"))?;
            let size = size.ok_or_else(|| bad("channel"))?;
            let src = remote.unwrap_or(madmpi::ANY_SOURCE);
            let conn = Conn::Unpack(madeleine::begin_unpacking_sized(id, size, src)?);
            let h = tables(|t| t.conns.insert(Entry { conn, comm }))?;
            *out = h as *mut c_void;
            Ok(())
        },
    )
}

/// `mad_begin_packing`: nothing blocks, so the channel is looked up and the connection entered
/// under one lock of the tables.
fn begin_packing(
    name: &'static str,
    ch: usize,
    dest: c_int,
    connection: *mut *mut c_void,
) -> c_int {
    // The user's communicator of the channel, for errors (the world's if there is none).
    let comm = std::cell::Cell::new(MPI_COMM_WORLD);
    guard(
        name,
        || comm.get(),
        || {
            let out = out(connection, "connection")?;
            let h = tables(|t| {
                let c = t.channels.get(ch).ok_or_else(|| bad("channel"))?;
                comm.set(c.comm);
                let size = c.channel.size()?;
                let conn = Conn::Pack(madeleine::begin_packing_sized(
                    c.channel.comm(),
                    size,
                    dest,
                )?);
                t.conns.insert(Entry {
                    conn,
                    comm: comm.get(),
                })
            })?;
            *out = h as *mut c_void;
            Ok(())
        },
    )
}

/// `int mad_begin_packing(mad_channel_t channel, int remote, mad_connection_t *connection)`.
#[no_mangle]
pub unsafe extern "C" fn mad_begin_packing(
    channel: *mut c_void,
    remote: c_int,
    connection: *mut *mut c_void,
) -> c_int {
    begin("mad_begin_packing", channel, Some(remote), connection, true)
}

/// `int mad_begin_unpacking(mad_channel_t channel, mad_connection_t *connection)`.
#[no_mangle]
pub unsafe extern "C" fn mad_begin_unpacking(
    channel: *mut c_void,
    connection: *mut *mut c_void,
) -> c_int {
    begin("mad_begin_unpacking", channel, None, connection, false)
}

/// `int mad_begin_unpacking_from(mad_channel_t channel, int remote, mad_connection_t *c)`.
#[no_mangle]
pub unsafe extern "C" fn mad_begin_unpacking_from(
    channel: *mut c_void,
    remote: c_int,
    connection: *mut *mut c_void,
) -> c_int {
    begin(
        "mad_begin_unpacking_from",
        channel,
        Some(remote),
        connection,
        false,
    )
}

/// `int mad_pack(mad_connection_t c, const void *data, size_t size, int send, int receive)`.
#[no_mangle]
pub unsafe extern "C" fn mad_pack(
    connection: *mut c_void,
    data: *const c_void,
    size: usize,
    send_mode_: c_int,
    receive_mode: c_int,
) -> c_int {
    let h = connection as usize;
    guard(
        "mad_pack",
        || conn_comm(h),
        || {
            let (s, r) = modes(send_mode_, receive_mode)?;
            tables(|t| match t.conns.get_mut(h) {
                // SAFETY: mad_pack's contract (madeleine.h): `data` holds `size` bytes, readable
                // as the send mode says.
                Some(Entry {
                    conn: Conn::Pack(p),
                    ..
                }) => unsafe { p.pack_raw(data as *const u8, size, s, r) },
                _ => Err(bad("connection (not a message being packed)")),
            })
        },
    )
}

/// `int mad_unpack(mad_connection_t c, void *data, size_t size, int send, int receive)`.
#[no_mangle]
pub unsafe extern "C" fn mad_unpack(
    connection: *mut c_void,
    data: *mut c_void,
    size: usize,
    send_mode_: c_int,
    receive_mode: c_int,
) -> c_int {
    let h = connection as usize;
    guard(
        "mad_unpack",
        || conn_comm(h),
        || {
            let (s, r) = modes(send_mode_, receive_mode)?;
            tables(|t| match t.conns.get_mut(h) {
                // SAFETY: mad_unpack's contract (madeleine.h): `data` holds `size` writable bytes
                // until the call returns (EXPRESS) or until mad_end_unpacking (CHEAPER).
                Some(Entry {
                    conn: Conn::Unpack(u),
                    ..
                }) => unsafe { u.unpack_raw(data as *mut u8, size, s, r) },
                _ => Err(bad("connection (not a message being unpacked)")),
            })
        },
    )
}

fn end(name: &'static str, connection: *mut *mut c_void, pack: bool) -> c_int {
    // SAFETY: a non-null `connection` points to a handle (the caller's contract).
    let h = unsafe { connection.as_ref() }.map_or(0, |p| *p as usize);
    // The connection leaves the table before the message ends (one look at the table).
    let e = tables(|t| match t.conns.get(h) {
        Some(Entry {
            conn: Conn::Pack(_),
            ..
        }) if pack => t.conns.remove(h),
        Some(Entry {
            conn: Conn::Unpack(_),
            ..
        }) if !pack => t.conns.remove(h),
        _ => None,
    });
    let comm = e.as_ref().map_or_else(|| conn_comm(h), |e| e.comm);
    guard(
        name,
        || comm,
        || {
            let e = e.ok_or_else(|| bad("connection"))?;
            let out = out(connection, "connection")?;
            *out = std::ptr::null_mut();
            match e.conn {
                Conn::Pack(p) => p.end_packing(),
                Conn::Unpack(u) => u.end_unpacking(),
            }
        },
    )
}

/// `int mad_end_packing(mad_connection_t *connection)`: sends the message, sets `*connection`
/// to NULL.
#[no_mangle]
pub unsafe extern "C" fn mad_end_packing(connection: *mut *mut c_void) -> c_int {
    end("mad_end_packing", connection, true)
}

/// `int mad_end_unpacking(mad_connection_t *connection)`: every piece is in place; sets
/// `*connection` to NULL.
#[no_mangle]
pub unsafe extern "C" fn mad_end_unpacking(connection: *mut *mut c_void) -> c_int {
    end("mad_end_unpacking", connection, false)
}

/// `int mad_connection_remote(mad_connection_t connection, int *rank)`: the peer's rank in the
/// channel (the sender of a message being unpacked, the destination of one being packed).
#[no_mangle]
pub unsafe extern "C" fn mad_connection_remote(connection: *mut c_void, rank: *mut c_int) -> c_int {
    let h = connection as usize;
    guard(
        "mad_connection_remote",
        || conn_comm(h),
        || {
            let out = out(rank, "rank")?;
            *out = tables(|t| match t.conns.get(h) {
                Some(Entry {
                    conn: Conn::Pack(p),
                    ..
                }) => Some(p.dest()),
                Some(Entry {
                    conn: Conn::Unpack(u),
                    ..
                }) => Some(u.source()),
                None => None,
            })
            .ok_or_else(|| bad("connection"))?;
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_and_connection_handles_are_never_taken_for_each_other() {
        let mut conns: Slab<u32> = Slab::new(handles::Kind::MadConn);
        let mut chans: Slab<u32> = Slab::new(handles::Kind::MadChannel);
        let a = conns.insert(1).unwrap();
        let c = chans.insert(3).unwrap();
        assert_eq!(conns.get(a), Some(&1));
        assert_eq!(chans.get(c), Some(&3));
        assert_eq!(conns.get(c), None);
        assert_eq!(chans.get(a), None);
        assert_eq!(conns.remove(a), Some(1));
        assert_eq!(conns.get(a), None, "an ended connection");
    }
}
