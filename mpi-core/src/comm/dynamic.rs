//! Dynamic processes (MPI 4.1 §11): ports (MPI_Open_port, MPI_Close_port), the intercommunicator
//! between two groups that MPI_Comm_accept and MPI_Comm_connect make, and MPI_Comm_join.
//!
//! How two groups meet:
//!
//! 1. every member opens a TCP driver of its own for the new intercommunicator
//!    (`TcpTransport::listen_unbound`) and the root gathers their cards (addresses);
//! 2. the roots meet over the port's socket (`madmpi_transports::port`: the connector proves
//!    the port's secret) and exchange their groups' sizes; the accepting root draws the
//!    connection's secret; the root broadcasts the outcome (or the error) in its group;
//! 3. the context ids are agreed as MPI_Intercomm_create's leaders do (`agree_inter_at`), the
//!    leaders exchanging masks and their groups' cards over the socket;
//! 4. every member binds its driver in the connection's numbering (acceptors first), adds the
//!    other group's cards, hands the driver to the engine (`Engine::add_peers`: peer ids beyond
//!    the world) and registers the intercommunicator.
//!
//! MPI_Intercomm_merge of such an intercommunicator with the same `high` on both sides puts
//! the accepting group first (the engine's peer ids cannot order two groups that number each
//! other differently).

use std::os::fd::BorrowedFd;
use std::time::Duration;

use madmpi_transports::port::{self, ConnectError, Port, PortConn};
use madmpi_transports::registry::Driver;
use madmpi_transports::tcp::{DynTcp, TcpConfig, TcpTransport};
use madmpi_transports::PeerId;

use super::*;

/// Bytes of a card slot (a TCP address, NUL-padded).
const CARD: usize = 64;
/// Bytes of the outcome a root broadcasts: status, remote size, secret, message length,
/// message.
const MSG: usize = 256;
const HEAD: usize = 4 + 4 + 32 + 4 + MSG;

/// The ports this process opened, by name.
static PORTS: Lazy<Mutex<HashMap<String, Arc<Port>>>> = Lazy::new(|| Mutex::new(HashMap::new()));

/// Intercommunicators made here, and whether this process is in the accepting group.
static ACCEPTING: Lazy<Mutex<HashMap<u32, bool>>> = Lazy::new(|| Mutex::new(HashMap::new()));

/// The connection of the two roots, shared with the agreement's step (at the root only).
#[derive(Clone, Default)]
pub(crate) struct RootConn(Arc<Mutex<(Option<PortConn>, bool)>>);

impl RootConn {
    fn new(c: Option<PortConn>) -> RootConn {
        RootConn(Arc::new(Mutex::new((c, false))))
    }

    /// Whether an exchange over it failed.
    pub(super) fn broken(&self) -> bool {
        self.0.lock().1
    }
}

/// The leaders' exchange of an agreement over the roots' socket: send `len` bytes at `out`,
/// receive at most `cap` into `inb`. A failure marks the connection broken (the decision then
/// fails the agreement in both groups).
///
/// # Safety
/// `out` holds `len` readable bytes, `inb` `cap` writable ones.
pub(super) unsafe fn exchange(c: &RootConn, out: *const u8, len: usize, inb: *mut u8, cap: usize) {
    let mut g = c.0.lock();
    let (conn, broke) = &mut *g;
    let Some(conn) = conn.as_mut() else {
        *broke = true;
        return;
    };
    let r = conn
        .send(std::slice::from_raw_parts(out, len))
        .and_then(|_| conn.recv());
    match r {
        Ok(v) => std::ptr::copy_nonoverlapping(v.as_ptr(), inb, v.len().min(cap)),
        Err(_) => *broke = true,
    }
}

fn tcp_config() -> Result<TcpConfig> {
    TcpConfig::from_env().map_err(|e| Error::new(ErrorClass::Other, e.to_string()))
}

/// How long a connect waits for an acceptor (`MADMPI_DPM_TIMEOUT`, seconds; 60 by default).
pub(crate) fn timeout() -> Duration {
    let s = std::env::var("MADMPI_DPM_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .unwrap_or(60);
    Duration::from_secs(s)
}

/// MPI_Open_port: a new port, listening on the TCP driver's address.
pub fn open_port() -> Result<String> {
    let p = Port::open(&tcp_config()?)?;
    let name = p.name().to_owned();
    PORTS.lock().insert(name.clone(), Arc::new(p));
    Ok(name)
}

/// MPI_Close_port.
pub fn close_port(name: &str) -> Result<()> {
    match PORTS.lock().remove(name.trim()) {
        Some(_) => Ok(()),
        None => err(
            ErrorClass::Port,
            format!("{name:?} is not a port this process opened (or it is closed already)"),
        ),
    }
}

/// Which group a process is in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Accept,
    Connect,
}

/// What the root learned: the remote group's size and the connection's secret.
struct Met {
    conn: PortConn,
    remote: u32,
    secret: [u8; 32],
}

fn encode_err(e: &Error) -> u32 {
    match e.class {
        ErrorClass::Port => 1,
        ErrorClass::Arg => 3,
        ErrorClass::Spawn => 4,
        _ => 2,
    }
}

fn decode_err(code: u32, msg: String) -> Error {
    let class = match code {
        1 => ErrorClass::Port,
        3 => ErrorClass::Arg,
        4 => ErrorClass::Spawn,
        _ => ErrorClass::Other,
    };
    Error::new(class, msg)
}

/// The roots' meeting: exchange (ok, group size) and the secret the acceptor draws.
fn meet(side: Side, mut conn: PortConn, local: u32, ok: bool) -> Result<Met> {
    let secret = match side {
        Side::Accept => port::random32()?,
        Side::Connect => [0; 32],
    };
    let mut hello = vec![ok as u8];
    hello.extend_from_slice(&local.to_le_bytes());
    hello.extend_from_slice(&secret);
    conn.send(&hello)?;
    let theirs = conn.recv()?;
    if theirs.len() != hello.len() {
        return err(ErrorClass::Other, "malformed greeting from the other root");
    }
    if !ok || theirs[0] != 1 {
        return err(
            ErrorClass::Other,
            "a process of one of the two groups could not open its TCP driver",
        );
    }
    let remote = u32::from_le_bytes([theirs[1], theirs[2], theirs[3], theirs[4]]);
    let mut s = secret;
    if side == Side::Connect {
        s.copy_from_slice(&theirs[5..37]);
    }
    if remote == 0 {
        return err(ErrorClass::Other, "the other group is empty");
    }
    Ok(Met {
        conn,
        remote,
        secret: s,
    })
}

/// The port `name` of this process.
pub(super) fn port_of(name: &str) -> Result<Arc<Port>> {
    PORTS.lock().get(name.trim()).cloned().ok_or_else(|| {
        Error::new(
            ErrorClass::Port,
            format!("{name:?} is not a port this process opened"),
        )
    })
}

/// MPI_Comm_accept (`port` significant at `root` only).
pub fn comm_accept(port: &str, root: i32, comm: CommId) -> Result<CommId> {
    let name = port.trim().to_owned();
    establish(Side::Accept, root, comm, move || {
        let p = port_of(&name)?;
        let mut rejected = 0;
        Ok(p.accept(&mut rejected)?)
    })
}

/// MPI_Comm_connect (`port` significant at `root` only); waits at most `MADMPI_DPM_TIMEOUT`
/// seconds for an acceptor.
pub fn comm_connect(port: &str, root: i32, comm: CommId) -> Result<CommId> {
    let name = port.to_owned();
    establish(Side::Connect, root, comm, move || {
        port::connect(&name, timeout()).map_err(|e| {
            let class = match e {
                // A port that does not exist, is closed (also while this connect waits for
                // its accept) or accepts nothing in time: MPI_ERR_PORT (MPI-4.1 §11.8.2).
                ConnectError::BadName
                | ConnectError::Refused(_)
                | ConnectError::Closed(_)
                | ConnectError::TimedOut(_) => ErrorClass::Port,
                ConnectError::Failed(_) => ErrorClass::Other,
            };
            Error::new(class, format!("connecting to {name:?}: {e}"))
        })
    })
}

/// MPI_Comm_join: the two processes of the connected socket `fd` open a port each, send its
/// name over the socket, and the one whose name sorts first accepts while the other connects.
pub fn comm_join(fd: BorrowedFd<'_>) -> Result<CommId> {
    let mut sock = PortConn::from_socket(fd)?;
    sock.set_timeout(Some(timeout()))?;
    let mine = open_port()?;
    let r = (|| {
        sock.send(mine.as_bytes())?;
        let theirs = String::from_utf8(sock.recv()?)
            .map_err(|_| Error::new(ErrorClass::Arg, "MPI_Comm_join: garbage on the socket"))?;
        if theirs == mine {
            return err(ErrorClass::Arg, "MPI_Comm_join: the socket leads to itself");
        }
        if mine < theirs {
            comm_accept(&mine, 0, crate::COMM_SELF)
        } else {
            comm_connect(&theirs, 0, crate::COMM_SELF)
        }
    })();
    let _ = close_port(&mine);
    r
}

/// Whether this process is in the accepting group of dynamic intercommunicator `c` (`None`:
/// not one).
pub(super) fn accepting(c: CommId) -> Option<bool> {
    ACCEPTING.lock().get(&c.0).copied()
}

/// `c` is freed.
pub(super) fn forget(c: CommId) {
    ACCEPTING.lock().remove(&c.0);
    super::spawn::forget_parent(c);
}

/// The collective part of accept and connect; `meet_root` gives the root's socket.
pub(super) fn establish(
    side: Side,
    root: i32,
    comm: CommId,
    meet_root: impl FnOnce() -> Result<PortConn>,
) -> Result<CommId> {
    let (rank, size) = with(|e| {
        let c = e.st.comm(comm)?;
        if c.remote.is_some() {
            return err(ErrorClass::Comm, "accept/connect need an intracommunicator");
        }
        Ok((c.rank, c.size))
    })?;
    if !(0..size).contains(&root) {
        return err(ErrorClass::Root, format!("invalid root {root}"));
    }
    let n = size as usize;
    let at_root = rank == root;
    // 1. Each member's driver for the new intercommunicator, and its card at the root.
    let t = tcp_config().and_then(|c| Ok(TcpTransport::listen_unbound(&c)?));
    let mut card = [0u8; CARD];
    if let Ok(t) = &t {
        let s = t.business_card();
        if s.len() < CARD {
            card[..s.len()].copy_from_slice(s.as_bytes());
        }
    }
    let mut cards = vec![0u8; if at_root { CARD * n } else { 0 }];
    let bytes = crate::coll::sched::bytes();
    // SAFETY: both buffers outlive the blocking call and have the sizes given.
    unsafe {
        crate::coll::gather(
            Some(crate::coll::Data {
                ptr: card.as_mut_ptr(),
                count: CARD,
                dt: bytes.clone(),
            }),
            at_root.then(|| crate::coll::Data {
                ptr: cards.as_mut_ptr(),
                count: CARD,
                dt: bytes.clone(),
            }),
            root,
            comm,
        )?;
    }
    // 2. The roots meet; the outcome goes to every member.
    let mut head = [0u8; HEAD];
    let mut conn = None;
    if at_root {
        let ok = cards.chunks(CARD).all(|c| c[0] != 0);
        let r = meet_root().and_then(|c| meet(side, c, n as u32, ok));
        match r {
            Ok(m) => {
                head[4..8].copy_from_slice(&m.remote.to_le_bytes());
                head[8..40].copy_from_slice(&m.secret);
                conn = Some(m.conn);
            }
            Err(e) => {
                let msg = e.msg.as_bytes();
                let l = msg.len().min(MSG);
                head[0..4].copy_from_slice(&encode_err(&e).to_le_bytes());
                head[40..44].copy_from_slice(&(l as u32).to_le_bytes());
                head[44..44 + l].copy_from_slice(&msg[..l]);
            }
        }
    }
    // SAFETY: `head` outlives the blocking call.
    unsafe { crate::coll::bcast(head.as_mut_ptr(), HEAD, &bytes, root, comm)? };
    let word = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
    if word(0) != 0 {
        let l = (word(40) as usize).min(MSG);
        return Err(decode_err(
            word(0),
            String::from_utf8_lossy(&head[44..44 + l]).into_owned(),
        ));
    }
    let mut t = t?;
    let remote = word(4);
    let mut secret = [0u8; 32];
    secret.copy_from_slice(&head[8..40]);
    // 3. Context ids, and the remote group's cards.
    let rc = RootConn::new(conn);
    let out: Out<(u32, u32, Vec<u8>)> = Arc::default();
    let o = out.clone();
    run(comm, None, |b, st| {
        let (rank, group, _) = view(st, comm)?;
        let lt = Team::new(comm, rank, group.len() as i32);
        agree_inter_at(
            b,
            &lt,
            root,
            Leaders::Port(rc.clone()),
            cards,
            CARD * remote as usize,
            true,
            move |_, x, y, rest| {
                *o.lock() = Some((x, y, rest.to_vec()));
                Ok(())
            },
        );
        Ok(())
    })?;
    drop(rc);
    let (x, y, rest) = take(&out)?;
    if rest.len() != CARD * remote as usize {
        return err(ErrorClass::Other, "the other group's cards did not arrive");
    }
    // 4. The driver, the peers, the communicators.
    let (na, nc) = match side {
        Side::Accept => (n as u32, remote),
        Side::Connect => (remote, n as u32),
    };
    let (mine, theirs) = match side {
        Side::Accept => (0, na),
        Side::Connect => (na, 0),
    };
    t.rebind(mine + rank as u32, na + nc, secret)?;
    for (j, c) in rest.chunks(CARD).enumerate() {
        let end = c.iter().position(|&b| b == 0).unwrap_or(CARD);
        let card = std::str::from_utf8(&c[..end])
            .map_err(|_| Error::new(ErrorClass::Other, "a remote card is not text"))?;
        t.add_peer(PeerId(theirs + j as u32), card)?;
    }
    with(|e| {
        let base = e.next_peer();
        let d = Driver::Dyn(DynTcp::new(t, base, theirs, remote));
        e.add_peers(d, remote)?;
        let rem: Arc<[u32]> = (base..base + remote).collect();
        let (_, group, _) = view(&e.st, comm)?;
        let lc = add(&mut e.st, comm, 2 * y, group.clone(), None)?;
        set_extra(lc, None, None, true);
        let id = add(&mut e.st, comm, 2 * x, group, Some(rem))?;
        set_extra(id, Some(lc), None, true);
        ACCEPTING.lock().insert(id.0, side == Side::Accept);
        Ok(id)
    })
}
