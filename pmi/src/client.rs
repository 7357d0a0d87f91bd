//! The rank side of PMI-1: what the MPI library calls to bootstrap.
//!
//! [`Client::from_env`] finds the process manager the way MPICH's simple PMI does: `PMI_FD` (a
//! socket inherited from the launcher, with `PMI_RANK`/`PMI_SIZE` in the environment) or
//! `PMI_PORT=host:port` (with `PMI_ID`, answered by `initack` and `set` lines). Each call is one
//! blocking request/reply exchange; nothing is cached except what `init` time fetched and the
//! result of [`Client::local_ranks`].

use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;

use crate::command::{Command, PMI_SUBVERSION, PMI_VERSION};
use crate::mapping::ProcessMapping;
use crate::server::Maxes;
use crate::sys;
use crate::wire::{parse_message, Frame, LineFramer, Message};

/// Everything that can go wrong talking to the process manager.
#[derive(Debug)]
pub enum Error {
    /// The connection failed (or the environment pointed at something that is not one).
    Io(io::Error),
    /// The peer said something that is not PMI-1, or the caller asked for something the wire
    /// cannot carry (a value too long or with spaces), or used the client after `finalize`.
    Protocol(String),
    /// `get` found no such key (yet: puts become visible at the next barrier).
    NotFound(String),
    /// The server answered with a non-zero `rc`.
    Rejected {
        /// The request.
        cmd: String,
        /// The `rc` it answered.
        rc: i32,
        /// Its `msg`, if any.
        msg: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "PMI I/O error: {e}"),
            Error::Protocol(m) => write!(f, "PMI protocol error: {m}"),
            Error::NotFound(k) => write!(f, "PMI key not found: {k}"),
            Error::Rejected { cmd, rc, msg } => {
                write!(f, "PMI server rejected '{cmd}' (rc={rc}): {msg}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

/// The connection. Sockets are written with `send(MSG_NOSIGNAL)` (std's `TcpStream` does so
/// too), so a dead launcher is an `EPIPE` error and not a SIGPIPE that kills a C program.
enum Conn {
    Sock(UnixStream),
    Fd(std::fs::File),
    Tcp(TcpStream),
}

impl Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Sock(s) => s.read(buf),
            Conn::Fd(f) => f.read(buf),
            Conn::Tcp(s) => s.read(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Conn::Sock(s) => sys::send_all(std::os::fd::AsFd::as_fd(s), buf),
            Conn::Fd(f) => f.write_all(buf),
            Conn::Tcp(s) => s.write_all(buf),
        }
    }
}

/// A rank's connection to its process manager (our `mpirun`, Hydra, or Slurm).
pub struct Client {
    conn: Conn,
    framer: LineFramer,
    rank: u32,
    size: u32,
    appnum: i32,
    universe_size: Option<u32>,
    kvsname: String,
    maxes: Maxes,
    local_ranks: Option<Vec<u32>>,
    finalized: bool,
    trace: bool,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("kvsname", &self.kvsname)
            .field("appnum", &self.appnum)
            .field("universe_size", &self.universe_size)
            .field("maxes", &self.maxes)
            .field("finalized", &self.finalized)
            .finish_non_exhaustive()
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_int<T: std::str::FromStr>(name: &str) -> Result<Option<T>, Error> {
    match env(name) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::Protocol(format!("{name}={v} is not a valid number"))),
    }
}

impl Client {
    /// The file descriptor of the connection to the process manager (to watch it for a hang-up:
    /// the launcher is gone).
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match &self.conn {
            Conn::Sock(s) => s.as_raw_fd(),
            Conn::Fd(f) => f.as_raw_fd(),
            Conn::Tcp(t) => t.as_raw_fd(),
        }
    }

    /// Connects using `PMI_FD` (fd inherited from the launcher) or `PMI_PORT` (host:port, with
    /// `PMI_ID`) from the environment; `Ok(None)` when neither is set (singleton).
    ///
    /// On a `PMI_PORT` connection, first presents `MADMPI_PMI_TOKEN` when it is set (see
    /// [`Server`](crate::Server)). Performs `init` and fetches the limits, appnum, kvsname and
    /// universe size.
    /// Set `MADMPI_PMI_TRACE=1` to print every exchanged line on stderr.
    pub fn from_env() -> Result<Option<Client>, Error> {
        let trace = env("MADMPI_PMI_TRACE").is_some_and(|v| v != "0");
        if let Some(fd) = env_int::<i32>("PMI_FD")? {
            let (owned, is_socket) = sys::inherit_fd(fd).map_err(|e| {
                Error::Io(io::Error::new(
                    e.kind(),
                    format!("PMI_FD={fd} is not a usable file descriptor: {e}"),
                ))
            })?;
            // Any socket type works through UnixStream's send/recv.
            let conn = if is_socket {
                Conn::Sock(UnixStream::from(owned))
            } else {
                Conn::Fd(owned.into())
            };
            let rank = env_int::<u32>("PMI_RANK")?.unwrap_or(0);
            let size = env_int::<u32>("PMI_SIZE")?.unwrap_or(1);
            let mut c = Client::with_conn(conn, rank, size, trace);
            if let Some(id) = env_int::<i32>("PMI_ID")? {
                c.initack(id)?;
            }
            c.init()?;
            return Ok(Some(c));
        }
        if let Some(port) = env("PMI_PORT") {
            let stream = TcpStream::connect(port.trim()).map_err(|e| {
                Error::Io(io::Error::new(
                    e.kind(),
                    format!("cannot connect to PMI_PORT={port}: {e}"),
                ))
            })?;
            // Requests are small and each waits for its reply.
            let _ = stream.set_nodelay(true);
            let rank = env_int::<u32>("PMI_RANK")?.unwrap_or(0);
            let size = env_int::<u32>("PMI_SIZE")?.unwrap_or(1);
            let mut c = Client::with_conn(Conn::Tcp(stream), rank, size, trace);
            // Our mpirun serves PMI_PORT only to connections that prove they belong to the job.
            if let Some(token) = env("MADMPI_PMI_TOKEN") {
                c.authenticate(token.trim())?;
            }
            if let Some(id) = env_int::<i32>("PMI_ID")? {
                c.initack(id)?;
            }
            c.init()?;
            return Ok(Some(c));
        }
        Ok(None)
    }

    fn with_conn(conn: Conn, rank: u32, size: u32, trace: bool) -> Client {
        Client {
            conn,
            framer: LineFramer::default(),
            rank,
            size,
            appnum: 0,
            universe_size: None,
            kvsname: String::new(),
            maxes: Maxes::default(),
            local_ranks: None,
            finalized: false,
            trace,
        }
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Which application (of an MPMD launch) this rank belongs to; 0 for the first or only one
    /// (Slurm answers -1, "unknown").
    pub fn appnum(&self) -> i32 {
        self.appnum
    }

    /// `MPI_UNIVERSE_SIZE`, when the process manager knows it.
    pub fn universe_size(&self) -> Option<u32> {
        self.universe_size
    }

    /// The job's key-value space name (unique per job; our `mpirun` also exports it as
    /// `MADMPI_JOBID`).
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// Longest key `put` accepts, in bytes (the server's `keylen_max` minus the C terminator).
    pub fn max_key_len(&self) -> usize {
        (self.maxes.keylen_max as usize).saturating_sub(1)
    }

    /// Longest value `put` accepts, in bytes (the server's `vallen_max` minus the C terminator).
    pub fn max_value_len(&self) -> usize {
        (self.maxes.vallen_max as usize).saturating_sub(1)
    }

    /// Publishes `key=value`; other ranks (and this one) see it after the next [`barrier`].
    ///
    /// Keys and values must be non-empty printable text without spaces or backslashes (old
    /// servers cannot carry them), at most [`max_key_len`]/[`max_value_len`] bytes.
    ///
    /// [`barrier`]: Self::barrier
    /// [`max_key_len`]: Self::max_key_len
    /// [`max_value_len`]: Self::max_value_len
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
        check_token("key", key, key, self.max_key_len())?;
        check_token("value", key, value, self.max_value_len())?;
        let cmd = Command::Put {
            kvsname: Some(self.kvsname.clone()),
            key: key.into(),
            value: value.into(),
        };
        self.request(&cmd)?;
        Ok(())
    }

    /// Waits until every rank has entered the barrier; this is also the point where puts
    /// become visible.
    pub fn barrier(&mut self) -> Result<(), Error> {
        self.request(&Command::BarrierIn)?;
        Ok(())
    }

    /// The value of `key`; `Err(Error::NotFound)` for a missing key.
    pub fn get(&mut self, key: &str) -> Result<String, Error> {
        check_token("key", key, key, self.max_key_len())?;
        let cmd = Command::Get {
            kvsname: Some(self.kvsname.clone()),
            key: key.into(),
        };
        let reply = self.exchange(&cmd)?;
        if reply.rc().unwrap_or(0) != 0 {
            return Err(Error::NotFound(key.to_owned()));
        }
        match reply.get("value") {
            Some(v) => Ok(v.to_owned()),
            None => Err(Error::Protocol(format!(
                "get_result for {key} has rc=0 and no value: {reply}"
            ))),
        }
    }

    /// Publishes `service` as reachable at `port` in the process manager's name service (the
    /// scope is the server's: with our `mpirun`, the job). Both must be single tokens, as for
    /// [`put`](Self::put); a server that already holds `service` answers with a non-zero `rc`
    /// ([`Error::Rejected`]).
    pub fn publish_name(&mut self, service: &str, port: &str) -> Result<(), Error> {
        check_token("service", service, service, NAME_MAX)?;
        check_token("port", service, port, NAME_MAX)?;
        self.request(&Command::PublishName {
            service: service.into(),
            port: port.into(),
        })?;
        Ok(())
    }

    /// Asks the process manager to start the processes of `blocks` (PMI-1 `spawn`, one
    /// `mcmd=spawn` block per command); [`Error::Rejected`] when it does not.
    pub fn spawn(&mut self, blocks: &[crate::SpawnBlock]) -> Result<(), Error> {
        let n = blocks.len() as i32;
        for (i, b) in blocks.iter().enumerate() {
            let cmd = Command::Spawn {
                totspawns: n,
                spawnssofar: i as i32 + 1,
                block: Box::new(b.clone()),
            };
            if i + 1 < blocks.len() {
                self.send(&cmd)?;
            } else {
                self.request(&cmd)?;
            }
        }
        Ok(())
    }

    /// Withdraws `service` from the name service; [`Error::NotFound`] when it is not published.
    pub fn unpublish_name(&mut self, service: &str) -> Result<(), Error> {
        check_token("service", service, service, NAME_MAX)?;
        let reply = self.exchange(&Command::UnpublishName {
            service: service.into(),
        })?;
        match reply.rc() {
            Some(rc) if rc != 0 => Err(Error::NotFound(service.to_owned())),
            _ => Ok(()),
        }
    }

    /// The port published under `service`; [`Error::NotFound`] when none is.
    pub fn lookup_name(&mut self, service: &str) -> Result<String, Error> {
        check_token("service", service, service, NAME_MAX)?;
        let reply = self.exchange(&Command::LookupName {
            service: service.into(),
        })?;
        match (reply.rc(), reply.get("port")) {
            (Some(rc), _) if rc != 0 => Err(Error::NotFound(service.to_owned())),
            (_, Some(port)) => Ok(port.to_owned()),
            (_, None) => Err(Error::Protocol(format!(
                "lookup_result for {service} has rc=0 and no port: {reply}"
            ))),
        }
    }

    /// The ranks that share this node, in increasing order.
    ///
    /// From the `PMI_process_mapping` job attribute (Hydra, Slurm and our `mpirun` serve it).
    /// When it is absent or unusable, every rank publishes its hostname and this becomes a
    /// collective call (a put, a barrier and `size` gets): all ranks must then call it. The
    /// answer is cached.
    pub fn local_ranks(&mut self) -> Result<Vec<u32>, Error> {
        if let Some(l) = &self.local_ranks {
            return Ok(l.clone());
        }
        let from_mapping = match self.get("PMI_process_mapping") {
            Ok(text) => ProcessMapping::parse(&text)
                .and_then(|m| m.local_ranks(self.size, self.rank))
                .ok()
                .flatten(),
            Err(Error::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        let local = match from_mapping {
            Some(l) => l,
            None => self.local_ranks_by_hostname()?,
        };
        self.local_ranks = Some(local.clone());
        Ok(local)
    }

    fn local_ranks_by_hostname(&mut self) -> Result<Vec<u32>, Error> {
        let host: String = sys::hostname()
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() && c != '\\' {
                    c
                } else {
                    '_'
                }
            })
            .take(self.max_value_len().max(1))
            .collect();
        let host = if host.is_empty() {
            "localhost".to_owned()
        } else {
            host
        };
        self.put(&format!("madmpi-host-{}", self.rank), &host)?;
        self.barrier()?;
        let mut local = Vec::new();
        for r in 0..self.size {
            if r == self.rank || self.get(&format!("madmpi-host-{r}"))? == host {
                local.push(r);
            }
        }
        Ok(local)
    }

    /// Asks the process manager to kill the job with exit code `code`. No reply comes: the
    /// caller should exit (with `code`) right after, as MPICH does.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<(), Error> {
        // Keep the line short enough for any server's buffer; newlines cannot travel.
        let mut msg: String = msg
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        if msg.len() > 512 {
            let mut cut = 512;
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            msg.truncate(cut);
        }
        let message = if msg.trim().is_empty() {
            None
        } else {
            Some(msg)
        };
        self.send(&Command::Abort {
            exitcode: code,
            message,
        })
    }

    /// Tells the process manager this rank is done with PMI. Further calls fail.
    pub fn finalize(&mut self) -> Result<(), Error> {
        self.request(&Command::Finalize)?;
        self.finalized = true;
        Ok(())
    }

    // ---- the exchanges ---------------------------------------------------------------------

    fn authenticate(&mut self, token: &str) -> Result<(), Error> {
        if token.is_empty() || token.chars().any(|c| !c.is_ascii_graphic() || c == '\\') {
            return Err(Error::Protocol(
                "MADMPI_PMI_TOKEN is not a printable token".into(),
            ));
        }
        let token = token.to_owned();
        self.request(&Command::Auth { token })?;
        Ok(())
    }

    fn initack(&mut self, pmiid: i32) -> Result<(), Error> {
        self.send(&Command::InitAck { pmiid })?;
        let ack = self.receive()?;
        if ack.cmd != "initack" {
            return Err(Error::Protocol(format!("expected initack, got: {ack}")));
        }
        if let Some(rc) = ack.rc().filter(|&rc| rc != 0) {
            return Err(rejected("initack", rc, &ack));
        }
        // Then `set size=`, `set rank=`, `set debug=` (MPICH reads exactly these three).
        let (mut size, mut rank, mut debug) = (None, None, false);
        while size.is_none() || rank.is_none() || !debug {
            let set = self.receive()?;
            if set.cmd != "set" {
                return Err(Error::Protocol(format!(
                    "expected 'set' after initack, got: {set}"
                )));
            }
            for (k, v) in &set.args {
                let Some(v) = v else { continue };
                let bad = || Error::Protocol(format!("bad value in: {set}"));
                match k.as_str() {
                    "size" => size = Some(v.parse::<u32>().map_err(|_| bad())?),
                    "rank" => rank = Some(v.parse::<u32>().map_err(|_| bad())?),
                    "debug" => debug = true,
                    _ => {}
                }
            }
        }
        self.size = size.unwrap_or(1);
        self.rank = rank.unwrap_or(0);
        Ok(())
    }

    fn init(&mut self) -> Result<(), Error> {
        let reply = self.request(&Command::Init {
            pmi_version: PMI_VERSION,
            pmi_subversion: PMI_SUBVERSION,
        })?;
        if let Some(v) = reply.get("pmi_version") {
            if v.trim() != PMI_VERSION.to_string() {
                return Err(Error::Protocol(format!(
                    "server speaks PMI version {v}, not {PMI_VERSION}"
                )));
            }
        }
        if self.size == 0 || self.rank >= self.size {
            return Err(Error::Protocol(format!(
                "rank {} is not in a job of size {}",
                self.rank, self.size
            )));
        }
        let maxes = self.request(&Command::GetMaxes)?;
        let num = |m: &Message, key: &str, default: u32| {
            m.get(key)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        };
        let d = Maxes::default();
        self.maxes = Maxes {
            kvsname_max: num(&maxes, "kvsname_max", d.kvsname_max),
            keylen_max: num(&maxes, "keylen_max", d.keylen_max),
            vallen_max: num(&maxes, "vallen_max", d.vallen_max),
        };
        let appnum = self.request(&Command::GetAppnum)?;
        self.appnum = appnum
            .get("appnum")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let kvs = self.request(&Command::GetMyKvsname)?;
        self.kvsname = kvs
            .get("kvsname")
            .map(str::to_owned)
            .ok_or_else(|| Error::Protocol(format!("my_kvsname reply without kvsname: {kvs}")))?;
        let usize_reply = self.request(&Command::GetUniverseSize)?;
        self.universe_size = usize_reply
            .get("size")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|&s| s > 0)
            .and_then(|s| u32::try_from(s).ok());
        Ok(())
    }

    /// Sends a request and returns its reply, refusing any non-zero `rc`.
    fn request(&mut self, cmd: &Command) -> Result<Message, Error> {
        let reply = self.exchange(cmd)?;
        match reply.rc() {
            Some(rc) if rc != 0 => Err(rejected(cmd.name(), rc, &reply)),
            _ => Ok(reply),
        }
    }

    /// Sends a request and returns a reply of the expected name (whatever its `rc`).
    fn exchange(&mut self, cmd: &Command) -> Result<Message, Error> {
        self.send(cmd)?;
        let expected = cmd.reply_name().unwrap_or("");
        let reply = self.receive()?;
        if reply.cmd == expected {
            return Ok(reply);
        }
        // A server that could not parse us answers with its own error line.
        match reply.rc() {
            Some(rc) if rc != 0 => Err(rejected(cmd.name(), rc, &reply)),
            _ => Err(Error::Protocol(format!(
                "sent '{}', expected '{expected}', got: {reply}",
                cmd.name()
            ))),
        }
    }

    fn send(&mut self, cmd: &Command) -> Result<(), Error> {
        if self.finalized {
            return Err(Error::Protocol(format!("'{}' after finalize", cmd.name())));
        }
        let bytes = cmd.encode();
        if self.trace {
            let shown = match cmd {
                Command::Auth { .. } => "cmd=madmpi_auth token=(not shown)\n".into(),
                _ => String::from_utf8_lossy(&bytes),
            };
            eprint!("[pmi {}] > {shown}", self.rank);
        }
        self.conn.write_all(&bytes)?;
        Ok(())
    }

    fn receive(&mut self) -> Result<Message, Error> {
        let mut buf = [0u8; 4096];
        loop {
            match self.framer.poll_frame() {
                Some(Frame::Data(line)) => {
                    if self.trace {
                        eprintln!("[pmi {}] < {}", self.rank, String::from_utf8_lossy(&line));
                    }
                    return parse_message(&line).map_err(|e| {
                        Error::Protocol(format!(
                            "undecodable reply '{}': {e}",
                            String::from_utf8_lossy(&line)
                        ))
                    });
                }
                Some(Frame::Overlong { len }) => {
                    return Err(Error::Protocol(format!(
                        "reply of {len} bytes exceeds the line limit"
                    )));
                }
                None => {}
            }
            let n = loop {
                match self.conn.read(&mut buf) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    other => break other?,
                }
            };
            if n == 0 {
                return Err(Error::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the process manager closed the PMI connection",
                )));
            }
            self.framer.handle_bytes(&buf[..n]);
        }
    }
}

fn rejected(cmd: &str, rc: i64, reply: &Message) -> Error {
    Error::Rejected {
        cmd: cmd.to_owned(),
        rc: i32::try_from(rc).unwrap_or(i32::MIN),
        msg: reply
            .get("msg")
            .or_else(|| reply.get("errmsg"))
            .unwrap_or("")
            .replace('_', " "),
    }
}

/// Longest service name or port string the name service calls send (one line must hold both
/// within every server's buffer: Hydra's is 1024 bytes per line).
pub const NAME_MAX: usize = 400;

/// Keys and values travel as single tokens through servers that never unescape.
fn check_token(what: &str, key: &str, s: &str, max: usize) -> Result<(), Error> {
    if s.is_empty() {
        return Err(Error::Protocol(format!(
            "PMI {what} for key '{key}' is empty"
        )));
    }
    if s.len() > max {
        return Err(Error::Protocol(format!(
            "PMI {what} for key '{key}' has {} bytes; the server accepts at most {max}",
            s.len()
        )));
    }
    if let Some(c) = s
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || *c == '\\')
    {
        return Err(Error::Protocol(format!(
            "PMI {what} for key '{key}' contains {c:?}, which PMI-1 cannot carry"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{Server, ServerConfig};

    /// Runs a [`Server`] for one connection on a thread, answering until the peer hangs up.
    fn serve(server: Server, stream: UnixStream) -> std::thread::JoinHandle<Server> {
        serve_as(server, stream, Some(0))
    }

    /// The same, for a connection that is rank `rank`'s inherited socket (`Some`) or accepted
    /// from the network (`None`).
    fn serve_as(
        server: Server,
        stream: UnixStream,
        rank: Option<u32>,
    ) -> std::thread::JoinHandle<Server> {
        std::thread::spawn(move || {
            let mut server = server;
            let conn = server.handle_connect(rank);
            let mut framer = LineFramer::default();
            let mut s = stream;
            let mut buf = [0u8; 1024];
            loop {
                let n = match s.read(&mut buf) {
                    Ok(0) | Err(_) => return server,
                    Ok(n) => n,
                };
                framer.handle_bytes(&buf[..n]);
                while let Some(f) = framer.poll_frame() {
                    server.handle_frame(conn, &f);
                }
                while let Some((_, bytes)) = server.poll_transmit() {
                    if s.write_all(&bytes).is_err() {
                        return server;
                    }
                }
            }
        })
    }

    fn client_pair(config: ServerConfig) -> (Client, std::thread::JoinHandle<Server>) {
        let (a, b) = UnixStream::pair().unwrap();
        let mut c = Client::with_conn(Conn::Sock(a), 0, config.size, false);
        let h = serve(Server::new(config), b);
        c.init().unwrap();
        (c, h)
    }

    #[test]
    fn talks_to_our_server() {
        let (mut c, h) = client_pair(ServerConfig::single_node(1, "kvs_9_x"));
        assert_eq!(c.kvsname(), "kvs_9_x");
        assert_eq!(c.universe_size(), Some(1));
        assert_eq!(c.max_value_len(), 1023);
        c.put("a", "b").unwrap();
        assert!(matches!(c.get("a"), Err(Error::NotFound(k)) if k == "a"));
        c.barrier().unwrap();
        assert_eq!(c.get("a").unwrap(), "b");
        assert_eq!(c.local_ranks().unwrap(), vec![0]);
        // Refused before reaching the wire.
        assert!(
            matches!(c.put("k", &"v".repeat(1024)), Err(Error::Protocol(m)) if m.contains("at most 1023"))
        );
        assert!(matches!(c.put("k", "a b"), Err(Error::Protocol(_))));
        assert!(matches!(c.put("k", ""), Err(Error::Protocol(_))));
        c.put("k", &"v".repeat(1023)).unwrap();
        c.finalize().unwrap();
        assert!(matches!(c.barrier(), Err(Error::Protocol(_))));
        drop(c);
        let server = h.join().unwrap();
        assert!(server.is_finalized(0));
    }

    #[test]
    fn name_service() {
        let (mut c, h) = client_pair(ServerConfig::single_node(1, "kvs"));
        assert!(matches!(c.lookup_name("svc"), Err(Error::NotFound(s)) if s == "svc"));
        assert!(matches!(c.unpublish_name("svc"), Err(Error::NotFound(_))));
        c.publish_name("svc", "tcp:127.0.0.1:5").unwrap();
        assert!(matches!(
            c.publish_name("svc", "other"),
            Err(Error::Rejected { cmd, .. }) if cmd == "publish_name"
        ));
        assert_eq!(c.lookup_name("svc").unwrap(), "tcp:127.0.0.1:5");
        c.unpublish_name("svc").unwrap();
        assert!(matches!(c.lookup_name("svc"), Err(Error::NotFound(_))));
        // Refused before reaching the wire.
        assert!(matches!(
            c.publish_name("a b", "p"),
            Err(Error::Protocol(_))
        ));
        assert!(matches!(
            c.publish_name("s", &"p".repeat(NAME_MAX + 1)),
            Err(Error::Protocol(_))
        ));
        drop(c);
        h.join().unwrap();
    }

    #[test]
    fn authenticates_on_network_connections() {
        let mut cfg = ServerConfig::single_node(2, "kvs");
        cfg.auth_token = Some("feed42".into());
        for (token, ok) in [("feed42", true), ("feed43", false)] {
            let (a, b) = UnixStream::pair().unwrap();
            let mut c = Client::with_conn(Conn::Sock(a), 0, 1, false);
            let h = serve_as(Server::new(cfg.clone()), b, None);
            match c.authenticate(token) {
                Ok(()) => {
                    assert!(ok);
                    c.initack(1).unwrap();
                    c.init().unwrap();
                    assert_eq!((c.rank(), c.size()), (1, 2));
                }
                Err(Error::Rejected { cmd, .. }) => assert!(!ok && cmd == "madmpi_auth"),
                Err(e) => panic!("{e}"),
            }
            drop(c);
            h.join().unwrap();
        }
        let (a, _b) = UnixStream::pair().unwrap();
        let mut c = Client::with_conn(Conn::Sock(a), 0, 1, false);
        assert!(matches!(c.authenticate("a b"), Err(Error::Protocol(_))));
    }

    #[test]
    fn falls_back_to_hostnames_without_mapping() {
        let mut cfg = ServerConfig::single_node(1, "kvs");
        cfg.process_mapping = None;
        let (mut c, h) = client_pair(cfg);
        assert_eq!(c.local_ranks().unwrap(), vec![0]);
        drop(c);
        let server = h.join().unwrap();
        assert_eq!(
            server.value("madmpi-host-0").map(str::to_owned),
            Some(sys::hostname())
                .filter(|h| !h.is_empty())
                .or(Some("localhost".into()))
        );
    }

    #[test]
    fn abort_sends_and_returns() {
        let (mut c, h) = client_pair(ServerConfig::single_node(1, "kvs"));
        c.abort(3, "bad\nthing happened").unwrap();
        drop(c);
        let mut server = h.join().unwrap();
        let ev = std::iter::from_fn(|| server.poll_event())
            .find(|e| matches!(e, crate::Event::Abort { .. }));
        assert_eq!(
            ev,
            Some(crate::Event::Abort {
                conn: crate::ConnId(0),
                rank: Some(0),
                exitcode: 3,
                message: Some("bad thing happened".into())
            })
        );
    }

    #[test]
    fn rejected_and_eof_errors() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut c = Client::with_conn(Conn::Sock(a), 0, 1, false);
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            let _ = b.read(&mut buf);
            b.write_all(b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1 msg=go_away\n")
                .unwrap();
        });
        match c.init() {
            Err(Error::Rejected { cmd, rc, msg }) => {
                assert_eq!((cmd.as_str(), rc, msg.as_str()), ("init", -1, "go away"));
            }
            other => panic!("{other:?}"),
        }
        t.join().unwrap();
        assert!(matches!(c.barrier(), Err(Error::Io(_))));
    }
}
