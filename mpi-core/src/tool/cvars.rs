//! Control variables: one per `MADMPI_*` setting the library reads. A variable's value is what
//! the engine uses: while MPI runs, read from the engine (the strategy it runs, the drivers'
//! thresholds, the spin budget it chose); before `MPI_Init` and after `MPI_Finalize`, what the
//! setting's parser makes of the environment (the value the next start would use).
//!
//! Only settings the engine applies safely at run time are writable (scope `Local`): the spin
//! budget, the zero-copy block size of sparse datatypes (a sender-side choice per message) and
//! the smallest rendezvous piece of `split_balance` (a receiver-side choice per rendezvous).
//! The others are fixed when MPI starts (`ReadOnly`).

use once_cell::sync::Lazy;

use super::{engine, Scope, SetError, Ty, Value, Verbosity};
use crate::engine::Strategy;

/// A control variable.
pub struct CvarDesc {
    /// Name (the environment variable's).
    pub name: String,
    /// What it controls.
    pub desc: String,
    /// Type of its value.
    pub ty: Ty,
    /// Who should care.
    pub verbosity: Verbosity,
    /// Whether it may be written in this run (`None`: whenever it has a setter).
    applies: Option<fn() -> bool>,
    /// Category name.
    pub category: &'static str,
    get: Box<dyn Fn() -> Value + Send + Sync>,
    set: Option<fn(i64) -> Result<(), SetError>>,
}

impl CvarDesc {
    /// Its value now.
    pub fn read(&self) -> Value {
        (self.get)()
    }

    /// Whether and how it may be written: `Local` when this run applies a new value
    /// (`split_balance`'s parameter only under `split_balance`).
    pub fn scope(&self) -> Scope {
        match (self.set, self.applies) {
            (Some(_), None) => Scope::Local,
            (Some(_), Some(f)) if f() => Scope::Local,
            _ => Scope::ReadOnly,
        }
    }

    /// Write `v` (an integer variable's new value).
    pub fn write(&self, v: i64) -> Result<(), SetError> {
        match self.set {
            None => Err(SetError::Never),
            Some(_) if self.scope() == Scope::ReadOnly => Err(SetError::Never),
            Some(_) if crate::api::finalized() => Err(SetError::Never),
            Some(_) if !crate::api::initialized() => Err(SetError::NotNow),
            Some(f) => f(v),
        }
    }

    /// Whether it can be written at all.
    pub fn writable(&self) -> bool {
        self.scope() == Scope::Local
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn env_u64(name: &str) -> Option<u64> {
    env(name).and_then(|v| v.parse().ok())
}

/// The first running driver of `family`'s caps, through `f`.
fn caps_of<T>(family: &str, f: impl Fn(&madmpi_transports::Caps) -> T) -> Option<T> {
    use madmpi_transports::Transport;
    engine(|e| {
        let i = e.drv.families.iter().position(|&n| n == family)?;
        e.drv.list.get(i).map(|d| f(d.caps()))
    })
    .flatten()
}

fn shm_cfg() -> Option<madmpi_transports::shm::ShmConfig> {
    madmpi_transports::shm::ShmConfig::from_env().ok()
}

fn tcp_cfg() -> Option<madmpi_transports::tcp::TcpConfig> {
    madmpi_transports::tcp::TcpConfig::from_env().ok()
}

fn int(v: Option<u64>) -> Value {
    Value::Int(v.unwrap_or(0) as i64)
}

fn text(v: Option<String>) -> Value {
    Value::Str(v.unwrap_or_default())
}

/// Index of each strategy in the `madmpi_strategy` enumeration.
fn strategy_index(name: &str) -> i64 {
    super::STRATEGY_NAMES
        .iter()
        .position(|&n| n == name)
        .unwrap_or(0) as i64
}

fn set_spin(v: i64) -> Result<(), SetError> {
    let v = u32::try_from(v).map_err(|_| SetError::Invalid)?;
    crate::api::set_spin_budget(v);
    Ok(())
}

fn set_zcopy_min(v: i64) -> Result<(), SetError> {
    let v = usize::try_from(v).map_err(|_| SetError::Invalid)?;
    if v == 0 {
        return Err(SetError::Invalid);
    }
    engine(|e| e.st.zcopy_min = v).ok_or(SetError::NotNow)
}

fn set_split_min(v: i64) -> Result<(), SetError> {
    let v = usize::try_from(v).map_err(|_| SetError::Invalid)?;
    match engine(|e| e.st.strategy_set("split_balance_min", v)) {
        None => Err(SetError::NotNow),
        Some(true) => Ok(()),
        // The engine runs another strategy: the setting has no effect in this run.
        Some(false) => Err(SetError::Never),
    }
}

/// Whether the engine runs (or, before MPI_Init, will run) `split_balance`.
fn runs_split_balance() -> bool {
    let running = engine(|e| e.st.strategy_name() == "split_balance");
    running.unwrap_or_else(|| env("MADMPI_STRATEGY").as_deref() == Some("split_balance"))
}

struct Def {
    name: &'static str,
    desc: &'static str,
    ty: Ty,
    verbosity: Verbosity,
    category: &'static str,
    get: Box<dyn Fn() -> Value + Send + Sync>,
    set: Option<fn(i64) -> Result<(), SetError>>,
}

fn ro(
    name: &'static str,
    ty: Ty,
    category: &'static str,
    verbosity: Verbosity,
    desc: &'static str,
    get: impl Fn() -> Value + Send + Sync + 'static,
) -> Def {
    Def {
        name,
        desc,
        ty,
        verbosity,
        category,
        get: Box::new(get),
        set: None,
    }
}

fn defs() -> Vec<Def> {
    use Ty::{Enum, Int, Str};
    use Verbosity::*;
    let mut v = vec![
        ro(
            "MADMPI_STRATEGY",
            Enum(super::ENUM_STRATEGY),
            "scheduler",
            UserBasic,
            "packet strategy the engine runs (chosen at MPI_Init)",
            || {
                let name = engine(|e| e.st.strategy_name().to_string()).unwrap_or_else(|| {
                    env("MADMPI_STRATEGY")
                        .filter(|s| Strategy::parse(s).is_some())
                        .unwrap_or_else(|| "adaptive".into())
                });
                Value::Int(strategy_index(&name))
            },
        ),
        Def {
            set: Some(set_split_min),
            ..ro(
                "MADMPI_SPLIT_BALANCE_MIN",
                Int,
                "scheduler",
                TunerBasic,
                "split_balance: smallest rendezvous piece worth a rail of its own, in bytes \
                 (writable while MPI runs under split_balance)",
                || {
                    let v = engine(|e| e.st.strategy_get("split_balance_min")).flatten();
                    int(v
                        .map(|v| v as u64)
                        .or_else(|| env_u64("MADMPI_SPLIT_BALANCE_MIN"))
                        .or(Some(64 << 10)))
                },
            )
        },
        ro(
            "MADMPI_DPM_TIMEOUT",
            Int,
            "engine",
            UserDetail,
            "seconds an MPI_Comm_connect waits for an acceptor, and an MPI_Comm_spawn for its \
             children to connect",
            || int(Some(crate::comm::dynamic::timeout().as_secs())),
        ),
        ro(
            "MADMPI_MPIRUN",
            Str,
            "engine",
            UserDetail,
            "the mpirun a singleton (a process started without a launcher) starts for \
             MPI_Comm_spawn (empty: none found)",
            || {
                text(
                    crate::comm::spawn::launcher_path()
                        .ok()
                        .map(|p| p.display().to_string()),
                )
            },
        ),
        ro(
            "MADMPI_PACK_FLUSH",
            Int,
            "scheduler",
            TunerDetail,
            "largest packet the send fast path builds before it sends it, in bytes (0: off, \
             packets as large as the transport takes; experimental)",
            || int(env_u64("MADMPI_PACK_FLUSH").or(Some(0))),
        ),
        ro(
            "MADMPI_PACK_COUNT",
            Int,
            "scheduler",
            TunerDetail,
            "sends in the first packet of a burst under adaptive, twice as many in each next \
             one (0: the transport's, 6 over shared memory, no limit over TCP)",
            || int(env_u64("MADMPI_PACK_COUNT").or(Some(0))),
        ),
        Def {
            set: Some(set_spin),
            ..ro(
                "MADMPI_SPIN",
                Int,
                "engine",
                TunerBasic,
                "polls before a waiting rank yields the CPU, and fruitless polling calls in a \
                 row before each further one yields (writable)",
                || Value::Int(crate::api::spin_budget() as i64),
            )
        },
        Def {
            set: Some(set_zcopy_min),
            ..ro(
                "MADMPI_ZCOPY_MIN",
                Int,
                "engine",
                TunerDetail,
                "blocks of a sparse datatype at least this large travel zero-copy (writable)",
                || {
                    int(engine(|e| e.st.zcopy_min as u64)
                        .or_else(|| env_u64("MADMPI_ZCOPY_MIN"))
                        .or(Some(8192)))
                },
            )
        },
        ro(
            "MADMPI_TRANSPORTS",
            Str,
            "engine",
            UserBasic,
            "drivers started (while MPI runs: those running, by family; before: the setting)",
            || {
                text(
                    engine(|e| {
                        let mut fams: Vec<&str> = Vec::new();
                        for f in &e.drv.families {
                            if !fams.contains(f) {
                                fams.push(f);
                            }
                        }
                        fams.join(",")
                    })
                    .or_else(|| env("MADMPI_TRANSPORTS")),
                )
            },
        ),
        ro(
            "MADMPI_RAILS",
            Str,
            "engine",
            TunerBasic,
            "drivers that carry traffic beside the best one (empty: one rail per peer)",
            || text(env("MADMPI_RAILS")),
        ),
        ro(
            "MADMPI_SHM_EAGER",
            Int,
            "transport_shm",
            TunerBasic,
            "largest message sent eagerly over shared memory, in bytes",
            || {
                int(caps_of("shm", |c| c.eager_threshold as u64)
                    .or_else(|| shm_cfg().map(|c| c.eager_threshold as u64)))
            },
        ),
        ro(
            "MADMPI_SHM_RING_BYTES",
            Int,
            "transport_shm",
            TunerDetail,
            "bytes of each per-pair shared-memory ring",
            || int(shm_cfg().map(|c| c.ring_bytes as u64)),
        ),
        ro(
            "MADMPI_SHM_CMA",
            Int,
            "transport_shm",
            TunerDetail,
            "1 when rendezvous data is pulled by cross-memory attach (while MPI runs: whether \
             the driver can)",
            || {
                int(caps_of("shm", |c| c.can_get as u64)
                    .or_else(|| shm_cfg().map(|c| c.cma as u64)))
            },
        ),
        ro(
            "MADMPI_SHM_SPLIT_MIN",
            Int,
            "transport_shm",
            TunerDetail,
            "rendezvous of at least this many bytes are copied by both processes at once (0: never)",
            || int(shm_cfg().map(|c| c.split_min as u64)),
        ),
        ro(
            "MADMPI_SHM_DOORBELL",
            Enum(super::ENUM_AUTO_BOOL),
            "transport_shm",
            TunerDetail,
            "per-receiver doorbell word: 0 off, 1 on, 2 auto (32+ local ranks)",
            || {
                Value::Int(match shm_cfg().and_then(|c| c.doorbell) {
                    Some(false) => 0,
                    Some(true) => 1,
                    None => 2,
                })
            },
        ),
        ro(
            "MADMPI_TCP_EAGER",
            Int,
            "transport_tcp",
            TunerBasic,
            "TCP eager threshold, in bytes",
            || {
                int(caps_of("tcp", |c| c.eager_threshold as u64)
                    .or_else(|| tcp_cfg().map(|c| c.eager_threshold as u64)))
            },
        ),
        ro(
            "MADMPI_TCP_MAX_PACKET",
            Int,
            "transport_tcp",
            TunerDetail,
            "largest TCP packet, in bytes (large messages travel in fragments of this size)",
            || {
                int(caps_of("tcp", |c| c.max_packet as u64)
                    .or_else(|| tcp_cfg().map(|c| c.max_packet as u64)))
            },
        ),
        ro(
            "MADMPI_TCP_SNDBUF",
            Int,
            "transport_tcp",
            TunerDetail,
            "TCP socket send buffer, in bytes (0: kernel autotuning)",
            || int(tcp_cfg().map(|c| c.sndbuf as u64)),
        ),
        ro(
            "MADMPI_TCP_RCVBUF",
            Int,
            "transport_tcp",
            TunerDetail,
            "TCP socket receive buffer, in bytes (0: kernel autotuning)",
            || int(tcp_cfg().map(|c| c.rcvbuf as u64)),
        ),
        ro(
            "MADMPI_TCP_CONNECT",
            Enum(super::ENUM_TCP_CONNECT),
            "transport_tcp",
            TunerDetail,
            "when TCP connections are made: 0 lazy (first use), 1 eager (MPI_Init)",
            || {
                Value::Int(match tcp_cfg().map(|c| c.connect) {
                    Some(madmpi_transports::tcp::ConnectMode::Eager) => 1,
                    _ => 0,
                })
            },
        ),
        ro(
            "MADMPI_TCP_PORT",
            Int,
            "transport_tcp",
            MpidevBasic,
            "TCP listener port (0: ephemeral)",
            || int(tcp_cfg().map(|c| c.port as u64)),
        ),
        ro(
            "MADMPI_TCP_HANDSHAKE_TIMEOUT_MS",
            Int,
            "transport_tcp",
            MpidevDetail,
            "TCP handshake timeout, in milliseconds",
            || int(tcp_cfg().map(|c| c.handshake_timeout.as_millis() as u64)),
        ),
        ro(
            "MADMPI_TCP_CONNECT_TIMEOUT_MS",
            Int,
            "transport_tcp",
            MpidevDetail,
            "TCP connect timeout, in milliseconds",
            || int(tcp_cfg().map(|c| c.connect_timeout.as_millis() as u64)),
        ),
        ro(
            "MADMPI_TCP_LINGER_MS",
            Int,
            "transport_tcp",
            MpidevDetail,
            "how long closing TCP connections wait for unsent data, in milliseconds",
            || int(tcp_cfg().map(|c| c.linger.as_millis() as u64)),
        ),
        ro(
            "MADMPI_TCP_IF",
            Str,
            "transport_tcp",
            UserDetail,
            "interface(s) or address TCP listens on (empty: the default, 127.0.0.1 on one host)",
            || text(env("MADMPI_TCP_IF")),
        ),
        ro(
            "MADMPI_OFI_EAGER",
            Int,
            "transport_ofi",
            TunerBasic,
            "ofi eager threshold, in bytes (0: ofi not running and not set)",
            || int(caps_of("ofi", |c| c.eager_threshold as u64).or_else(|| env_u64("MADMPI_OFI_EAGER"))),
        ),
        ro(
            "MADMPI_OFI_MAX_PACKET",
            Int,
            "transport_ofi",
            TunerDetail,
            "largest ofi packet, in bytes (0: ofi not running and not set)",
            || int(caps_of("ofi", |c| c.max_packet as u64).or_else(|| env_u64("MADMPI_OFI_MAX_PACKET"))),
        ),
    ];
    for (name, desc) in [
        (
            "MADMPI_OFI_PROVIDER",
            "libfabric provider of the ofi transport (empty: FI_PROVIDER or libfabric's choice)",
        ),
        (
            "MADMPI_OFI_RX",
            "ofi receive buffers kept posted (empty: 64)",
        ),
        ("MADMPI_OFI_TX", "ofi send buffers, the credits (empty: 64)"),
        (
            "MADMPI_OFI_RMA",
            "0: ofi rendezvous data in fragments instead of fi_read (empty: 1)",
        ),
        (
            "MADMPI_OFI_INJECT",
            "0: small ofi packets with fi_send instead of fi_inject (empty: 1)",
        ),
    ] {
        v.push(ro(
            name,
            Str,
            "transport_ofi",
            TunerDetail,
            desc,
            move || text(env(name)),
        ));
    }
    for (name, desc) in [
        (
            "MADMPI_EMU",
            "emulated network(s) of the emu transport (empty: bip)",
        ),
        (
            "MADMPI_EMU_LOSS",
            "probability of a dropped and of a corrupted frame on the emulated wire (bcl3 only)",
        ),
        ("MADMPI_EMU_OFF", "emulated modules switched off"),
        ("MADMPI_EMU_SCI_DMA", "SCI DMA module switched on"),
        (
            "MADMPI_EMU_REGCACHE",
            "registration cache entries of the emulated NICs",
        ),
        (
            "MADMPI_EMU_RING_BYTES",
            "bytes per ring of the emulated wire",
        ),
        ("MADMPI_EMU_SEED", "seed of the fault injector"),
    ] {
        v.push(ro(
            name,
            Str,
            "transport_emu",
            TunerDetail,
            desc,
            move || text(env(name)),
        ));
    }
    for (name, _) in crate::coll::KNOWN {
        let var: &'static str = Box::leak(format!("MADMPI_COLL_{name}").into_boxed_str());
        let desc: &'static str = Box::leak(
            format!(
                "algorithm forced for {} (auto: chosen by size)",
                name.to_lowercase()
            )
            .into_boxed_str(),
        );
        v.push(ro(var, Str, "collectives", TunerBasic, desc, move || {
            Value::Str(
                crate::coll::forced_any(name)
                    .ok()
                    .flatten()
                    .unwrap_or("auto")
                    .to_string(),
            )
        }));
    }
    for (name, desc) in [
        (
            "MADMPI_TRACE",
            "directory where each rank writes its trace at MPI_Finalize (empty: off)",
        ),
        (
            "MADMPI_TRACE_MAX_EVENTS",
            "trace events kept per rank (empty: 1000000)",
        ),
        (
            "MADMPI_TRACE_CLOCK",
            "trace timestamps: monotonic or realtime (empty: by job)",
        ),
        (
            "MADMPI_LOG",
            "diagnostics on stderr: level or directives (empty: off)",
        ),
        ("MADMPI_PMI_TRACE", "1: print every PMI line on stderr"),
        (
            "MADMPI_FAKE_HOSTS",
            "testing: pseudo-hosts one host's ranks are split into",
        ),
    ] {
        v.push(ro(name, Str, "diagnostics", MpidevBasic, desc, move || {
            text(env(name))
        }));
    }
    v
}

/// Every control variable, in index order.
pub static CVARS: Lazy<Vec<CvarDesc>> = Lazy::new(|| {
    defs()
        .into_iter()
        .map(|d| CvarDesc {
            name: d.name.to_string(),
            desc: d.desc.to_string(),
            ty: d.ty,
            verbosity: d.verbosity,
            applies: (d.name == "MADMPI_SPLIT_BALANCE_MIN")
                .then_some(runs_split_balance as fn() -> bool),
            category: d.category,
            get: d.get,
            set: d.set,
        })
        .collect()
});
