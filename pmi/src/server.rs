//! The process-manager side of PMI-1, as a sans-IO state machine (used by `mpirun`).
//!
//! The launcher owns the sockets; this type owns what the protocol means: the key-value space,
//! the barrier, per-rank init/finalize state, the name service, and the job attributes
//! (`PMI_process_mapping`). Call order, as in quinn:
//!
//! 1. getters ([`rank_of`](Server::rank_of), [`is_initialized`](Server::is_initialized), ...);
//! 2. inputs: [`handle_connect`](Server::handle_connect), [`handle_frame`](Server::handle_frame)
//!    (one frame cut by [`LineFramer`](crate::LineFramer)), [`handle_disconnect`](Server::handle_disconnect);
//! 3. outputs: drain [`poll_transmit`](Server::poll_transmit) (bytes for a connection) and
//!    [`poll_event`](Server::poll_event) (what the launcher must act on: aborts, misbehaviour).
//!
//! Semantics follow Hydra's, which is what MPICH-derived clients are tested against: a `put`
//! becomes visible to `get`s (the putter's included) when the next barrier completes; a repeated
//! `put` of a key overwrites; `abort` gets no reply. Where Hydra is lax and a stricter answer
//! catches client bugs early (wrong kvsname, over-long keys or values), this server refuses with
//! `rc=-1` and a message. It never panics and never stops on bad input: malformed lines get an
//! error reply and an [`Event::Misbehaved`].
//!
//! Connections accepted on a TCP port (`PMI_PORT`) can come from anyone who can reach it. When
//! [`ServerConfig::auth_token`] is set, such a connection must first send `cmd=madmpi_auth
//! token=<token>` (our client does when `MADMPI_PMI_TOKEN` is set); until then every other
//! request is refused, and a wrong token or any other first line gets one error reply and an
//! [`Event::Refused`]: the launcher closes the connection. So a foreign process can neither read
//! the KVS (where the job's TCP secret lives) nor take a rank's place or enter a barrier.
//! Inherited sockets (`PMI_FD`) are trusted: only the rank they were made for holds them.

use std::collections::{HashMap, VecDeque};

use crate::command::{reply_name_for, Command, PMI_SUBVERSION, PMI_VERSION};
use crate::wire::{parse_message, Frame, Message};

/// Limits a server announces in its `maxes` reply. Lengths include the C terminator, as in MPICH:
/// a key may have at most `keylen_max - 1` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maxes {
    /// Longest kvsname.
    pub kvsname_max: u32,
    /// Longest key.
    pub keylen_max: u32,
    /// Longest value.
    pub vallen_max: u32,
}

impl Default for Maxes {
    /// Hydra's values.
    fn default() -> Self {
        Maxes {
            kvsname_max: 256,
            keylen_max: 64,
            vallen_max: 1024,
        }
    }
}

/// What the job looks like to its ranks.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Number of ranks.
    pub size: u32,
    /// The job's key-value space name (unique per job).
    pub kvsname: String,
    /// `get_appnum` answer.
    pub appnum: i32,
    /// `get_appnum` answer per rank, overriding `appnum` for the ranks it covers: an MPMD job's
    /// ranks get the index of their part (Hydra's `appnum`, the ranks' `MPI_APPNUM`).
    pub rank_appnum: Vec<i32>,
    /// `get_universe_size` answer; `None` is served as -1 ("unknown"), like Hydra.
    pub universe_size: Option<u32>,
    /// Served as the job attribute `PMI_process_mapping`.
    pub process_mapping: Option<String>,
    /// More job attributes, readable with `get` from the start (before any barrier), e.g. the
    /// launcher's per-job secret `madmpi_secret`.
    pub attributes: Vec<(String, String)>,
    /// Limits announced and enforced.
    pub maxes: Maxes,
    /// Value of `set debug=` in the `initack` sequence.
    pub debug: bool,
    /// The token a `PMI_PORT` connection must present (`cmd=madmpi_auth token=`) before
    /// anything else; `None` accepts every connection as Hydra does.
    pub auth_token: Option<String>,
}

impl ServerConfig {
    /// A single-node job of `size` ranks with the given kvsname.
    pub fn single_node(size: u32, kvsname: &str) -> ServerConfig {
        ServerConfig {
            size,
            kvsname: kvsname.to_owned(),
            appnum: 0,
            rank_appnum: Vec::new(),
            universe_size: Some(size),
            process_mapping: Some(crate::ProcessMapping::single_node(size).to_string()),
            attributes: Vec::new(),
            maxes: Maxes::default(),
            debug: false,
            auth_token: None,
        }
    }
}

/// A connection, as the server knows it. Ids are never reused within a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub usize);

/// Something the launcher must know about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A rank completed `init`.
    Initialized {
        /// The rank.
        rank: u32,
    },
    /// A rank completed `finalize`.
    Finalized {
        /// The rank.
        rank: u32,
    },
    /// A rank asked to abort the job (`rank` is `None` for a PMI_PORT connection that never
    /// said who it is).
    Abort {
        /// Connection it came on.
        conn: ConnId,
        /// The rank.
        rank: Option<u32>,
        /// Requested exit code.
        exitcode: i32,
        /// The client's message, when given.
        message: Option<String>,
    },
    /// Every rank entered the barrier; pending puts are now visible.
    BarrierReleased {
        /// How many barriers have completed, this one included.
        count: u64,
    },
    /// A connection failed to authenticate (wrong token, or anything but `madmpi_auth` first).
    /// It got one error reply; the launcher should send it and close the connection. Further
    /// lines from it are ignored.
    Refused {
        /// The connection.
        conn: ConnId,
        /// What was wrong.
        reason: String,
    },
    /// A rank asked to start processes (the blocks of one PMI-1 spawn request, complete):
    /// the launcher starts them, or not, and answers with [`Server::spawn_result`].
    Spawn {
        /// The connection to answer on.
        conn: ConnId,
        /// Its rank, when known.
        rank: Option<u32>,
        /// The commands, in order.
        blocks: Vec<crate::SpawnBlock>,
    },
    /// A connection sent something the server refused (it got an error reply).
    Misbehaved {
        /// The connection.
        conn: ConnId,
        /// Its rank, when known.
        rank: Option<u32>,
        /// What was wrong.
        reason: String,
    },
}

#[derive(Debug, Default)]
struct Conn {
    rank: Option<u32>,
    initialized: bool,
    finalized: bool,
    in_barrier: bool,
    open: bool,
    /// Inherited socket, or presented the token (or the server checks none).
    authenticated: bool,
    /// Refused: waiting for the launcher to close it.
    refused: bool,
    /// The blocks of a spawn request received so far.
    spawn: Vec<crate::SpawnBlock>,
}

/// The PMI-1 server state machine. See the module documentation.
#[derive(Debug)]
pub struct Server {
    config: ServerConfig,
    conns: Vec<Conn>,
    /// Which connection speaks for each rank.
    rank_conn: Vec<Option<ConnId>>,
    initialized: Vec<bool>,
    finalized: Vec<bool>,
    kvs: HashMap<String, String>,
    /// Puts since the last barrier, in order; committed when it completes.
    pending: Vec<(String, String)>,
    in_barrier: u32,
    /// Ranks that died while the job goes on (the launcher's `--disable-auto-cleanup`): the
    /// barriers no longer wait for them.
    gone: Vec<bool>,
    barriers: u64,
    names: HashMap<String, String>,
    transmit: VecDeque<(ConnId, Vec<u8>)>,
    events: VecDeque<Event>,
}

impl Server {
    /// A server for one job.
    pub fn new(config: ServerConfig) -> Server {
        let n = config.size as usize;
        let mut kvs = HashMap::new();
        if let Some(map) = &config.process_mapping {
            kvs.insert("PMI_process_mapping".to_owned(), map.clone());
        }
        for (k, v) in &config.attributes {
            kvs.insert(k.clone(), v.clone());
        }
        Server {
            config,
            conns: Vec::new(),
            rank_conn: vec![None; n],
            initialized: vec![false; n],
            finalized: vec![false; n],
            kvs,
            pending: Vec::new(),
            in_barrier: 0,
            gone: vec![false; n],
            barriers: 0,
            names: HashMap::new(),
            transmit: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    // ---- getters -------------------------------------------------------------------------

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The rank a connection speaks for, once known.
    pub fn rank_of(&self, conn: ConnId) -> Option<u32> {
        self.conns.get(conn.0).and_then(|c| c.rank)
    }

    /// Whether a connection may make requests (see the module documentation).
    pub fn is_authenticated(&self, conn: ConnId) -> bool {
        self.conns.get(conn.0).is_some_and(|c| c.authenticated)
    }

    /// The connection that speaks for `rank`, if any.
    pub fn conn_of(&self, rank: u32) -> Option<ConnId> {
        self.rank_conn.get(rank as usize).copied().flatten()
    }

    /// Whether `rank` completed `init`.
    pub fn is_initialized(&self, rank: u32) -> bool {
        self.initialized
            .get(rank as usize)
            .copied()
            .unwrap_or(false)
    }

    /// Whether `rank` completed `finalize`.
    pub fn is_finalized(&self, rank: u32) -> bool {
        self.finalized.get(rank as usize).copied().unwrap_or(false)
    }

    /// Whether `rank` was reported gone ([`Server::rank_gone`]).
    pub fn is_gone(&self, rank: u32) -> bool {
        self.gone.get(rank as usize).copied().unwrap_or(false)
    }

    /// How many ranks are waiting in the current barrier.
    pub fn barrier_waiting(&self) -> u32 {
        self.in_barrier
    }

    /// The committed value of a key (job attributes included).
    pub fn value(&self, key: &str) -> Option<&str> {
        self.kvs.get(key).map(String::as_str)
    }

    // ---- inputs --------------------------------------------------------------------------

    /// A new connection. `rank` is known for `PMI_FD` connections (one socketpair per rank,
    /// trusted) and learnt from `initack` for `PMI_PORT` ones (`None`: accepted on the network,
    /// it must authenticate when [`ServerConfig::auth_token`] is set).
    pub fn handle_connect(&mut self, rank: Option<u32>) -> ConnId {
        let id = ConnId(self.conns.len());
        let authenticated = rank.is_some() || self.config.auth_token.is_none();
        let rank = rank.filter(|&r| r < self.config.size && self.rank_conn[r as usize].is_none());
        if let Some(r) = rank {
            self.rank_conn[r as usize] = Some(id);
        }
        self.conns.push(Conn {
            rank,
            open: true,
            authenticated,
            ..Conn::default()
        });
        id
    }

    /// The connection closed (or the launcher closed it).
    pub fn handle_disconnect(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(conn.0) {
            c.open = false;
        }
        // Queued replies for it are moot now.
        self.transmit.retain(|(id, _)| *id != conn);
    }

    /// One frame received on `conn` (as cut by [`LineFramer`](crate::LineFramer)).
    pub fn handle_frame(&mut self, conn: ConnId, frame: &Frame) {
        match frame {
            Frame::Data(bytes) => self.handle_line(conn, bytes),
            Frame::Overlong { len } => {
                let reason = format!("a PMI line of {len} bytes exceeds the limit and was dropped");
                self.refuse(conn, "error", &reason);
            }
        }
    }

    /// One line (or `mcmd` block) received on `conn`; a trailing newline is optional.
    pub fn handle_line(&mut self, conn: ConnId, line: &[u8]) {
        let Some(c) = self.conns.get(conn.0).filter(|c| c.open && !c.refused) else {
            return;
        };
        if !c.authenticated {
            return self.authenticate(conn, line);
        }
        let msg = match parse_message(line) {
            Ok(m) => m,
            Err(e) => return self.refuse(conn, "error", &e.to_string()),
        };
        let cmd = match Command::from_message(&msg) {
            Ok(c) => c,
            Err(e) => {
                let reply = reply_name_for(&msg.cmd).unwrap_or("error");
                return self.refuse(conn, reply, &e.to_string());
            }
        };
        self.handle_command(conn, cmd);
    }

    /// The first line of a connection that must authenticate.
    fn authenticate(&mut self, conn: ConnId, line: &[u8]) {
        let expected = self.config.auth_token.as_deref().unwrap_or_default();
        let why = match parse_message(line).map(|m| Command::from_message(&m)) {
            Ok(Ok(Command::Auth { token })) if same_secret(&token, expected) => {
                self.conns[conn.0].authenticated = true;
                return self.send(conn, Message::new("madmpi_auth_result").arg("rc", 0));
            }
            Ok(Ok(Command::Auth { .. })) => "wrong PMI token".to_owned(),
            Ok(Ok(other)) => format!(
                "'{}' before authentication (cmd=madmpi_auth token=<MADMPI_PMI_TOKEN> must come first)",
                other.name()
            ),
            Ok(Err(e)) | Err(e) => format!("{e} (before authentication)"),
        };
        self.send(
            conn,
            Message::new("madmpi_auth_result")
                .arg("rc", -1)
                .arg("msg", "not_authenticated"),
        );
        self.conns[conn.0].refused = true;
        self.events.push_back(Event::Refused { conn, reason: why });
    }

    fn handle_command(&mut self, conn: ConnId, cmd: Command) {
        let rank = self.rank_of(conn);
        if self.conns[conn.0].finalized {
            let reply = cmd.reply_name().unwrap_or("error");
            return self.refuse(conn, reply, &format!("'{}' after finalize", cmd.name()));
        }
        match cmd {
            Command::Init {
                pmi_version,
                pmi_subversion,
            } => {
                let ok = pmi_version == PMI_VERSION && pmi_subversion <= PMI_SUBVERSION;
                let reply = Message::new("response_to_init")
                    .arg("pmi_version", PMI_VERSION)
                    .arg("pmi_subversion", PMI_SUBVERSION)
                    .arg("rc", if ok { 0 } else { -1 });
                self.send(conn, reply);
                if ok {
                    self.conns[conn.0].initialized = true;
                    if let Some(r) = rank {
                        self.initialized[r as usize] = true;
                        self.events.push_back(Event::Initialized { rank: r });
                    }
                } else {
                    self.misbehaved(
                        conn,
                        format!("asked for PMI {pmi_version}.{pmi_subversion}; this server speaks PMI 1.1"),
                    );
                }
            }
            Command::InitAck { pmiid } => self.initack(conn, pmiid),
            Command::Auth { token } => {
                // Already trusted (inherited socket, or authenticated once): a check only.
                let ok = match self.config.auth_token.as_deref() {
                    None => true,
                    Some(t) => same_secret(&token, t),
                };
                if ok {
                    self.send(conn, Message::new("madmpi_auth_result").arg("rc", 0));
                } else {
                    self.refuse(conn, "madmpi_auth_result", "wrong PMI token");
                }
            }
            Command::GetMaxes => {
                let m = self.config.maxes;
                self.send(
                    conn,
                    Message::new("maxes")
                        .arg("kvsname_max", m.kvsname_max)
                        .arg("keylen_max", m.keylen_max)
                        .arg("vallen_max", m.vallen_max),
                );
            }
            Command::GetAppnum => {
                let appnum = self
                    .rank_of(conn)
                    .and_then(|r| self.config.rank_appnum.get(r as usize))
                    .copied()
                    .unwrap_or(self.config.appnum);
                self.send(conn, Message::new("appnum").arg("appnum", appnum))
            }
            Command::GetMyKvsname => {
                let kvs = self.config.kvsname.clone();
                self.send(conn, Message::new("my_kvsname").arg("kvsname", kvs));
            }
            Command::GetUniverseSize => {
                let size = self.config.universe_size.map_or(-1, i64::from);
                self.send(conn, Message::new("universe_size").arg("size", size));
            }
            Command::Put {
                kvsname,
                key,
                value,
            } => {
                if let Err(why) = self
                    .check_kvsname(kvsname.as_deref())
                    .and_then(|()| self.check_key(&key))
                {
                    return self.refuse(conn, "put_result", &why);
                }
                if value.len() >= self.config.maxes.vallen_max as usize {
                    let why = format!(
                        "value of key {key} has {} bytes; vallen_max is {} (terminator included)",
                        value.len(),
                        self.config.maxes.vallen_max
                    );
                    return self.refuse(conn, "put_result", &why);
                }
                self.pending.push((key, value));
                self.send(
                    conn,
                    Message::new("put_result")
                        .arg("rc", 0)
                        .arg("msg", "success"),
                );
            }
            Command::Get { kvsname, key } => {
                if let Err(why) = self.check_kvsname(kvsname.as_deref()) {
                    return self.refuse(conn, "get_result", &why);
                }
                let reply = match self.kvs.get(&key) {
                    Some(v) => Message::new("get_result")
                        .arg("rc", 0)
                        .arg("msg", "success")
                        .arg("value", v),
                    // Hydra's answer, underscores and all: old MPICH clients split on spaces.
                    None => Message::new("get_result")
                        .arg("rc", -1)
                        .arg("msg", format!("key_{key}_not_found")),
                };
                self.send(conn, reply);
            }
            Command::BarrierIn => self.barrier_in(conn),
            Command::Finalize => {
                self.conns[conn.0].finalized = true;
                self.send(conn, Message::new("finalize_ack"));
                if let Some(r) = rank {
                    self.finalized[r as usize] = true;
                    self.events.push_back(Event::Finalized { rank: r });
                }
            }
            Command::Abort { exitcode, message } => {
                self.events.push_back(Event::Abort {
                    conn,
                    rank,
                    exitcode,
                    message,
                });
            }
            Command::PublishName { service, port } => {
                let reply = match self.names.entry(service) {
                    std::collections::hash_map::Entry::Occupied(_) => {
                        Message::new("publish_result")
                            .arg("rc", -1)
                            .arg("info", "fail")
                            .arg("msg", "service_already_published")
                    }
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(port);
                        Message::new("publish_result")
                            .arg("rc", 0)
                            .arg("info", "ok")
                    }
                };
                self.send(conn, reply);
            }
            Command::UnpublishName { service } => {
                let reply = if self.names.remove(&service).is_some() {
                    Message::new("unpublish_result")
                        .arg("rc", 0)
                        .arg("info", "ok")
                } else {
                    Message::new("unpublish_result")
                        .arg("rc", -1)
                        .arg("info", "fail")
                        .arg("msg", "service_not_found")
                };
                self.send(conn, reply);
            }
            Command::LookupName { service } => {
                let reply = match self.names.get(&service) {
                    Some(port) => Message::new("lookup_result")
                        .arg("rc", 0)
                        .arg("info", "ok")
                        .arg("port", port),
                    None => Message::new("lookup_result")
                        .arg("rc", -1)
                        .arg("info", "fail")
                        .arg("msg", "service_not_found"),
                };
                self.send(conn, reply);
            }
            Command::Spawn {
                totspawns,
                spawnssofar,
                block,
            } => {
                // The client reads one spawn_result after its last block.
                let c = &mut self.conns[conn.0];
                c.spawn.push(*block);
                if spawnssofar >= totspawns {
                    let blocks = std::mem::take(&mut c.spawn);
                    let rank = c.rank;
                    self.events.push_back(Event::Spawn { conn, rank, blocks });
                }
            }
        }
    }

    fn initack(&mut self, conn: ConnId, pmiid: i32) {
        let size = self.config.size;
        let current = self.conns[conn.0].rank;
        let ok_id = u32::try_from(pmiid).ok().filter(|&id| id < size);
        let result = match (current, ok_id) {
            (_, None) => Err(format!("pmiid {pmiid} is not a rank of this job of {size}")),
            (Some(r), Some(id)) if r != id => {
                Err(format!("pmiid {id} on the connection of rank {r}"))
            }
            (Some(r), Some(_)) => Ok(r),
            (None, Some(id)) => match self.rank_conn[id as usize] {
                Some(_) => Err(format!("pmiid {id} is already connected")),
                None => {
                    self.rank_conn[id as usize] = Some(conn);
                    self.conns[conn.0].rank = Some(id);
                    Ok(id)
                }
            },
        };
        match result {
            Ok(rank) => {
                self.send(conn, Message::new("initack"));
                self.send(conn, Message::new("set").arg("size", size));
                self.send(conn, Message::new("set").arg("rank", rank));
                self.send(
                    conn,
                    Message::new("set").arg("debug", u8::from(self.config.debug)),
                );
            }
            Err(why) => self.refuse(conn, "initack", &why),
        }
    }

    fn barrier_in(&mut self, conn: ConnId) {
        if self.conns[conn.0].rank.is_none() {
            return self.refuse(
                conn,
                "barrier_out",
                "barrier_in from a connection that has not said its rank (initack)",
            );
        }
        if self.conns[conn.0].in_barrier {
            return self.refuse(conn, "barrier_out", "barrier_in twice in the same barrier");
        }
        self.conns[conn.0].in_barrier = true;
        self.in_barrier += 1;
        self.release_barrier();
    }

    /// Rank `rank` died and the job goes on without it (the launcher's
    /// `--disable-auto-cleanup`): barriers, the one under way included, stop waiting for it.
    pub fn rank_gone(&mut self, rank: u32) {
        match self.gone.get_mut(rank as usize) {
            Some(g) if !*g => *g = true,
            _ => return,
        }
        for c in self.conns.iter_mut().filter(|c| c.rank == Some(rank)) {
            if std::mem::take(&mut c.in_barrier) {
                self.in_barrier -= 1;
            }
        }
        if self.in_barrier > 0 {
            self.release_barrier();
        }
    }

    /// Ends the barrier under way when every rank still alive is in it.
    fn release_barrier(&mut self) {
        let gone = self.gone.iter().filter(|&&g| g).count() as u32;
        if self.in_barrier < self.config.size.saturating_sub(gone) {
            return;
        }
        for (k, v) in self.pending.drain(..) {
            self.kvs.insert(k, v);
        }
        self.in_barrier = 0;
        self.barriers += 1;
        for id in 0..self.conns.len() {
            if self.conns[id].in_barrier {
                self.conns[id].in_barrier = false;
                self.send(ConnId(id), Message::new("barrier_out"));
            }
        }
        self.events.push_back(Event::BarrierReleased {
            count: self.barriers,
        });
    }

    fn check_kvsname(&self, kvsname: Option<&str>) -> Result<(), String> {
        match kvsname {
            Some(k) if k != self.config.kvsname => Err(format!(
                "unknown kvsname {k} (this job's is {})",
                self.config.kvsname
            )),
            _ => Ok(()),
        }
    }

    fn check_key(&self, key: &str) -> Result<(), String> {
        if key.is_empty() {
            return Err("empty key".into());
        }
        if key.len() >= self.config.maxes.keylen_max as usize {
            return Err(format!(
                "key {key} has {} bytes; keylen_max is {} (terminator included)",
                key.len(),
                self.config.maxes.keylen_max
            ));
        }
        Ok(())
    }

    // ---- outputs -------------------------------------------------------------------------

    /// Next bytes to write to a connection, in order.
    pub fn poll_transmit(&mut self) -> Option<(ConnId, Vec<u8>)> {
        self.transmit.pop_front()
    }

    /// Next event for the launcher.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn send(&mut self, conn: ConnId, msg: Message) {
        if self.conns.get(conn.0).is_some_and(|c| c.open) {
            self.transmit.push_back((conn, msg.encode()));
        }
    }

    /// The answer to a [`Event::Spawn`]: the processes were started, or why not.
    pub fn spawn_result(&mut self, conn: ConnId, r: Result<(), String>) {
        match r {
            Ok(()) => self.send(conn, Message::new("spawn_result").arg("rc", 0)),
            Err(why) => {
                let msg: String = why
                    .chars()
                    .map(|c| if c.is_whitespace() { '_' } else { c })
                    .collect();
                let m = Message::new("spawn_result").arg("rc", -1).arg("msg", msg);
                self.send(conn, m)
            }
        }
    }

    /// Replies `cmd=<reply> rc=-1 msg=<why>` and reports the misbehaviour.
    fn refuse(&mut self, conn: ConnId, reply: &str, why: &str) {
        // Old MPICH clients cut values at spaces even when escaped; Hydra writes underscores.
        let msg: String = why
            .chars()
            .map(|c| if c.is_whitespace() { '_' } else { c })
            .collect();
        self.send(conn, Message::new(reply).arg("rc", -1).arg("msg", msg));
        self.misbehaved(conn, why.to_owned());
    }

    fn misbehaved(&mut self, conn: ConnId, reason: String) {
        let rank = self.rank_of(conn);
        self.events
            .push_back(Event::Misbehaved { conn, rank, reason });
    }
}

/// Compares a presented token with the expected one in time independent of where they differ.
fn same_secret(presented: &str, expected: &str) -> bool {
    let (a, b) = (presented.as_bytes(), expected.as_bytes());
    if a.len() != b.len() || b.is_empty() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tests::XorShift;

    fn drain(s: &mut Server) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        while let Some((c, b)) = s.poll_transmit() {
            out.push((c.0, String::from_utf8(b).unwrap()));
        }
        out
    }

    fn job(n: u32) -> (Server, Vec<ConnId>) {
        let mut s = Server::new(ServerConfig::single_node(n, "kvs_1_abc"));
        let conns = (0..n).map(|r| s.handle_connect(Some(r))).collect();
        (s, conns)
    }

    #[test]
    fn init_and_queries() {
        let (mut s, c) = job(2);
        s.handle_line(c[0], b"cmd=init pmi_version=1 pmi_subversion=1\n");
        s.handle_line(c[0], b"cmd=get_maxes");
        s.handle_line(c[0], b"cmd=get_appnum");
        s.handle_line(c[0], b"cmd=get_my_kvsname");
        s.handle_line(c[0], b"cmd=get_universe_size");
        s.handle_line(c[0], b"cmd=get kvsname=kvs_1_abc key=PMI_process_mapping");
        let out: Vec<String> = drain(&mut s).into_iter().map(|(_, l)| l).collect();
        assert_eq!(
            out,
            [
                "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
                "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n",
                "cmd=appnum appnum=0\n",
                "cmd=my_kvsname kvsname=kvs_1_abc\n",
                "cmd=universe_size size=2\n",
                "cmd=get_result rc=0 msg=success value=(vector,(0,1,2))\n",
            ]
        );
        assert!(s.is_initialized(0) && !s.is_initialized(1));
        assert_eq!(s.poll_event(), Some(Event::Initialized { rank: 0 }));
    }

    #[test]
    fn appnum_per_rank() {
        let mut config = ServerConfig::single_node(3, "kvs_1_abc");
        config.rank_appnum = vec![0, 1, 1];
        let mut s = Server::new(config);
        let c: Vec<ConnId> = (0..3).map(|r| s.handle_connect(Some(r))).collect();
        for &conn in &c {
            s.handle_line(conn, b"cmd=init pmi_version=1 pmi_subversion=1\n");
            s.handle_line(conn, b"cmd=get_appnum");
        }
        let appnums: Vec<String> = drain(&mut s)
            .into_iter()
            .map(|(_, l)| l)
            .filter(|l| l.starts_with("cmd=appnum"))
            .collect();
        assert_eq!(
            appnums,
            [
                "cmd=appnum appnum=0\n",
                "cmd=appnum appnum=1\n",
                "cmd=appnum appnum=1\n"
            ]
        );
    }

    /// A rank that died (the launcher's `--disable-auto-cleanup`) is not waited for: neither
    /// by the barrier under way (also when it died inside it) nor by the next ones.
    #[test]
    fn barriers_go_on_without_a_gone_rank() {
        let (mut s, c) = job(3);
        s.handle_line(c[0], b"cmd=barrier_in");
        s.handle_line(c[2], b"cmd=barrier_in");
        assert!(drain(&mut s).is_empty());
        s.rank_gone(1);
        let mut out = drain(&mut s);
        out.sort();
        assert_eq!(
            out,
            [
                (0, "cmd=barrier_out\n".into()),
                (2, "cmd=barrier_out\n".into())
            ]
        );
        s.rank_gone(1);
        s.handle_line(c[2], b"cmd=barrier_in");
        assert!(drain(&mut s).is_empty());
        s.handle_line(c[0], b"cmd=barrier_in");
        assert_eq!(drain(&mut s).len(), 2);
        // One that dies inside a barrier is taken out of it.
        s.handle_line(c[0], b"cmd=barrier_in");
        s.handle_line(c[2], b"cmd=barrier_in");
        assert_eq!(drain(&mut s).len(), 2);
        let (mut s, c) = job(3);
        s.handle_line(c[0], b"cmd=barrier_in");
        s.handle_line(c[1], b"cmd=barrier_in");
        s.rank_gone(1);
        assert!(drain(&mut s).is_empty());
        assert_eq!(s.barrier_waiting(), 1);
        s.handle_line(c[2], b"cmd=barrier_in");
        assert_eq!(drain(&mut s).len(), 2);
    }

    #[test]
    fn puts_become_visible_at_barrier() {
        let (mut s, c) = job(3);
        s.handle_line(c[1], b"cmd=put kvsname=kvs_1_abc key=k1 value=v1");
        s.handle_line(c[1], b"cmd=get kvsname=kvs_1_abc key=k1");
        assert_eq!(
            drain(&mut s),
            [
                (1, "cmd=put_result rc=0 msg=success\n".into()),
                (1, "cmd=get_result rc=-1 msg=key_k1_not_found\n".into())
            ]
        );
        s.handle_line(c[0], b"cmd=barrier_in");
        s.handle_line(c[2], b"cmd=barrier_in");
        assert!(drain(&mut s).is_empty());
        assert_eq!(s.barrier_waiting(), 2);
        s.handle_line(c[1], b"cmd=barrier_in");
        let mut out = drain(&mut s);
        out.sort();
        assert_eq!(
            out,
            [
                (0, "cmd=barrier_out\n".into()),
                (1, "cmd=barrier_out\n".into()),
                (2, "cmd=barrier_out\n".into())
            ]
        );
        s.handle_line(c[2], b"cmd=get kvsname=kvs_1_abc key=k1");
        assert_eq!(
            drain(&mut s),
            [(2, "cmd=get_result rc=0 msg=success value=v1\n".into())]
        );
        // A second barrier works the same way.
        for &cn in &c {
            s.handle_line(cn, b"cmd=barrier_in");
        }
        assert_eq!(drain(&mut s).len(), 3);
        let evs: Vec<Event> = std::iter::from_fn(|| s.poll_event()).collect();
        assert!(evs.contains(&Event::BarrierReleased { count: 2 }));
    }

    #[test]
    fn refusals_do_not_stop_the_server() {
        let (mut s, c) = job(1);
        s.handle_line(c[0], b"garbage here");
        s.handle_line(c[0], b"cmd=bogus");
        s.handle_line(c[0], b"cmd=put key=a");
        s.handle_line(c[0], b"cmd=put kvsname=other key=a value=b");
        s.handle_line(
            c[0],
            format!("cmd=put key={} value=b", "k".repeat(64)).as_bytes(),
        );
        s.handle_line(
            c[0],
            format!("cmd=put key=a value={}", "v".repeat(1024)).as_bytes(),
        );
        s.handle_line(c[0], b"cmd=barrier_in");
        s.handle_line(c[0], b"\xff\xfe");
        s.handle_frame(c[0], &Frame::Overlong { len: 100_000 });
        let out = drain(&mut s);
        let lines: Vec<&str> = out.iter().map(|(_, l)| l.as_str()).collect();
        assert!(
            lines[0].starts_with("cmd=error rc=-1 msg=PMI_line_does_not_start_with_cmd"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].starts_with("cmd=error rc=-1 msg=unknown_PMI_command_'bogus'"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].starts_with("cmd=put_result rc=-1 msg="),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].starts_with("cmd=put_result rc=-1 msg=unknown_kvsname_other"),
            "{}",
            lines[3]
        );
        assert!(
            lines[4].starts_with("cmd=put_result rc=-1 msg=key_"),
            "{}",
            lines[4]
        );
        assert!(lines[5].contains("vallen_max_is_1024"), "{}", lines[5]);
        assert_eq!(lines[6], "cmd=barrier_out\n");
        assert!(lines[7].starts_with("cmd=error rc=-1"));
        assert!(lines[8].starts_with("cmd=error rc=-1 msg=a_PMI_line_of_100000"));
        let misbehaved = std::iter::from_fn(|| s.poll_event())
            .filter(|e| matches!(e, Event::Misbehaved { .. }))
            .count();
        assert_eq!(misbehaved, 8);
    }

    #[test]
    fn abort_finalize_and_after() {
        let (mut s, c) = job(2);
        s.handle_line(c[1], b"cmd=abort exitcode=3 message=bad\\ thing");
        assert!(drain(&mut s).is_empty());
        assert_eq!(
            s.poll_event(),
            Some(Event::Abort {
                conn: c[1],
                rank: Some(1),
                exitcode: 3,
                message: Some("bad thing".into())
            })
        );
        s.handle_line(c[0], b"cmd=finalize");
        assert_eq!(drain(&mut s), [(0, "cmd=finalize_ack\n".into())]);
        assert!(s.is_finalized(0));
        s.handle_line(c[0], b"cmd=get_maxes");
        assert!(drain(&mut s)[0].1.starts_with("cmd=maxes rc=-1"));
    }

    #[test]
    fn pmi_port_initack() {
        let mut s = Server::new(ServerConfig::single_node(2, "kvs"));
        let a = s.handle_connect(None);
        let b = s.handle_connect(None);
        s.handle_line(a, b"cmd=initack pmiid=1");
        s.handle_line(b, b"cmd=initack pmiid=1");
        s.handle_line(b, b"cmd=initack pmiid=7");
        s.handle_line(b, b"cmd=initack pmiid=0");
        let out: Vec<String> = drain(&mut s)
            .into_iter()
            .map(|(c, l)| format!("{c}:{l}"))
            .collect();
        assert_eq!(out[0], "0:cmd=initack\n");
        assert_eq!(out[1], "0:cmd=set size=2\n");
        assert_eq!(out[2], "0:cmd=set rank=1\n");
        assert_eq!(out[3], "0:cmd=set debug=0\n");
        assert!(out[4].starts_with("1:cmd=initack rc=-1 msg=pmiid_1_is_already_connected"));
        assert!(out[5].starts_with("1:cmd=initack rc=-1"));
        assert_eq!(out[6], "1:cmd=initack\n");
        assert_eq!(s.rank_of(b), Some(0));
        assert_eq!(s.conn_of(1), Some(a));
    }

    #[test]
    fn pmi_port_connections_must_authenticate() {
        let mut cfg = ServerConfig::single_node(2, "kvs");
        cfg.auth_token = Some("t0k3n".into());
        cfg.attributes
            .push(("madmpi_secret".into(), "s3cret".into()));
        let mut s = Server::new(cfg);
        let trusted = s.handle_connect(Some(0));
        let good = s.handle_connect(None);
        let wrong = s.handle_connect(None);
        let rude = s.handle_connect(None);
        let thief = s.handle_connect(None);
        let noise = s.handle_connect(None);
        assert!(s.is_authenticated(trusted) && !s.is_authenticated(good));
        s.handle_line(wrong, b"cmd=madmpi_auth token=t0k3m");
        s.handle_line(wrong, b"cmd=madmpi_auth token=t0k3n");
        s.handle_line(rude, b"cmd=initack pmiid=1");
        s.handle_line(thief, b"cmd=get kvsname=kvs key=madmpi_secret");
        s.handle_line(noise, b"\xff\x00 garbage");
        s.handle_line(good, b"cmd=madmpi_auth token=t0k3n");
        s.handle_line(good, b"cmd=initack pmiid=1");
        s.handle_line(trusted, b"cmd=get kvsname=kvs key=madmpi_secret");
        s.handle_line(trusted, b"cmd=madmpi_auth token=nope");
        let out: Vec<String> = drain(&mut s)
            .into_iter()
            .map(|(c, l)| format!("{c}:{l}"))
            .collect();
        assert_eq!(
            out,
            [
                "2:cmd=madmpi_auth_result rc=-1 msg=not_authenticated\n",
                "3:cmd=madmpi_auth_result rc=-1 msg=not_authenticated\n",
                "4:cmd=madmpi_auth_result rc=-1 msg=not_authenticated\n",
                "5:cmd=madmpi_auth_result rc=-1 msg=not_authenticated\n",
                "1:cmd=madmpi_auth_result rc=0\n",
                "1:cmd=initack\n",
                "1:cmd=set size=2\n",
                "1:cmd=set rank=1\n",
                "1:cmd=set debug=0\n",
                "0:cmd=get_result rc=0 msg=success value=s3cret\n",
                "0:cmd=madmpi_auth_result rc=-1 msg=wrong_PMI_token\n",
            ]
        );
        assert_eq!(s.conn_of(1), Some(good));
        let refused: Vec<ConnId> = std::iter::from_fn(|| s.poll_event())
            .filter_map(|e| match e {
                Event::Refused { conn, .. } => Some(conn),
                _ => None,
            })
            .collect();
        assert_eq!(refused, [wrong, rude, thief, noise]);
        // Without a configured token every connection is trusted, as under Hydra.
        let mut open = Server::new(ServerConfig::single_node(1, "kvs"));
        let c = open.handle_connect(None);
        assert!(open.is_authenticated(c));
        open.handle_line(c, b"cmd=madmpi_auth token=anything");
        assert_eq!(
            drain(&mut open),
            [(0, "cmd=madmpi_auth_result rc=0\n".into())]
        );
    }

    #[test]
    fn spawn_event_once_per_request_and_names() {
        let (mut s, c) = job(1);
        s.handle_line(
            c[0],
            b"mcmd=spawn\ntotspawns=2\nspawnssofar=1\nexecname=a\nendcmd\n",
        );
        assert!(drain(&mut s).is_empty());
        s.handle_line(
            c[0],
            b"mcmd=spawn\ntotspawns=2\nspawnssofar=2\nexecname=b\nendcmd\n",
        );
        assert!(drain(&mut s).is_empty(), "the launcher answers");
        let ev = std::iter::from_fn(|| s.poll_event())
            .find(|e| matches!(e, Event::Spawn { .. }))
            .expect("a spawn event");
        let Event::Spawn { conn, blocks, .. } = ev else {
            unreachable!()
        };
        let names: Vec<&str> = blocks.iter().map(|b| b.execname.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        s.spawn_result(conn, Err("no such program".into()));
        assert!(drain(&mut s)[0].1.starts_with("cmd=spawn_result rc=-1"));
        s.spawn_result(conn, Ok(()));
        assert_eq!(drain(&mut s)[0].1, "cmd=spawn_result rc=0\n");
        s.handle_line(c[0], b"cmd=publish_name service=svc port=p1");
        s.handle_line(c[0], b"cmd=lookup_name service=svc");
        s.handle_line(c[0], b"cmd=unpublish_name service=svc");
        s.handle_line(c[0], b"cmd=lookup_name service=svc");
        let out: Vec<String> = drain(&mut s).into_iter().map(|(_, l)| l).collect();
        assert_eq!(out[0], "cmd=publish_result rc=0 info=ok\n");
        assert_eq!(out[1], "cmd=lookup_result rc=0 info=ok port=p1\n");
        assert_eq!(out[2], "cmd=unpublish_result rc=0 info=ok\n");
        assert!(out[3].starts_with("cmd=lookup_result rc=-1 info=fail"));
    }

    #[test]
    fn property_random_lines_never_panic() {
        let mut cfg = ServerConfig::single_node(3, "kvs_1_abc");
        cfg.auth_token = Some("0".into());
        let mut s = Server::new(cfg);
        let c: Vec<ConnId> = (0..3).map(|r| s.handle_connect(Some(r))).collect();
        let extra = s.handle_connect(None);
        let extra2 = s.handle_connect(None);
        let conns = [c[0], c[1], c[2], extra, extra2, ConnId(99)];
        let alphabet: &[u8] = b"cmd=put get barrier_in initack madmpi_auth token=0 pmiid=0 1 key=value=kvsname=kvs_1_abc finalize abort \n";
        let mut rng = XorShift(4242);
        for i in 0..30_000 {
            let line = rng.bytes(80, alphabet);
            let conn = conns[(rng.next() % conns.len() as u64) as usize];
            s.handle_line(conn, &line);
            if i % 97 == 0 {
                s.handle_disconnect(conn);
            }
            while s.poll_transmit().is_some() {}
            while s.poll_event().is_some() {}
        }
    }
}
