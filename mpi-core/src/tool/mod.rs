//! The tool information interface's side in the core (MPI_T): control variables (`cvars`:
//! the `MADMPI_*` settings), performance variables (`pvars`: what the engine counts,
//! `counters`), events (`events`), their categories and enumerations. The C layer
//! (`mpi-capi/src/imp/tool/`) owns handles, sessions and callbacks; this module never sees a
//! C type.
//!
//! Everything here works before `MPI_Init` and after `MPI_Finalize`: values then come from the
//! environment (cvars) or are those of the stopped engine (pvars). Reading while MPI runs
//! takes the engine lock for the time of one read.

pub mod counters;
pub mod cvars;
pub mod events;
pub mod pvars;

pub use counters::{Counters, DriverCounters};
pub use cvars::{CvarDesc, CVARS};
pub use events::{EventDesc, EventKind, Instance, EVENTS};
pub use pvars::{PvarClass, PvarDesc, PVARS};

use once_cell::sync::Lazy;

use crate::engine::Engine;

/// The standard's verbosity levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verbosity {
    /// End users, basic.
    UserBasic,
    /// End users, detail.
    UserDetail,
    /// Performance tuners, basic.
    TunerBasic,
    /// Performance tuners, detail.
    TunerDetail,
    /// MPI developers, basic.
    MpidevBasic,
    /// MPI developers, detail.
    MpidevDetail,
}

/// The scopes of control variables that madmpi uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Fixed when MPI starts; never writable.
    ReadOnly,
    /// Writable, and the change concerns this process only.
    Local,
}

/// Type of a control variable's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// An integer (C `int` for enumerations, `unsigned long long` for the rest).
    Int,
    /// Text.
    Str,
    /// A value of the enumeration of this index in [`ENUMS`].
    Enum(usize),
}

/// A control variable's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// An integer.
    Int(i64),
    /// Text.
    Str(String),
}

/// Why a control variable was not written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetError {
    /// It can never be written.
    Never,
    /// Not now (before MPI_Init: the engine that applies it does not exist yet).
    NotNow,
    /// The value is out of its range.
    Invalid,
}

/// An enumeration: its name and (value, name) items.
pub struct EnumDesc {
    /// Name.
    pub name: &'static str,
    /// Items.
    pub items: &'static [(i32, &'static str)],
}

/// Names of the strategies, by their value in the `madmpi_strategy` enumeration.
pub const STRATEGY_NAMES: &[&str] = &["adaptive", "default", "aggreg", "split_balance"];

/// Index of `madmpi_strategy` in [`ENUMS`].
pub const ENUM_STRATEGY: usize = 0;
/// Index of `madmpi_off_on_auto`.
pub const ENUM_AUTO_BOOL: usize = 1;
/// Index of `madmpi_tcp_connect`.
pub const ENUM_TCP_CONNECT: usize = 2;

/// Every enumeration.
pub const ENUMS: &[EnumDesc] = &[
    EnumDesc {
        name: "madmpi_strategy",
        items: &[
            (0, "adaptive"),
            (1, "default"),
            (2, "aggreg"),
            (3, "split_balance"),
        ],
    },
    EnumDesc {
        name: "madmpi_off_on_auto",
        items: &[(0, "off"), (1, "on"), (2, "auto")],
    },
    EnumDesc {
        name: "madmpi_tcp_connect",
        items: &[(0, "lazy"), (1, "eager")],
    },
];

/// A category: its variables, events and sub-categories, by index.
pub struct Category {
    /// Name.
    pub name: &'static str,
    /// What it groups.
    pub desc: &'static str,
    /// Control variables.
    pub cvars: Vec<usize>,
    /// Performance variables.
    pub pvars: Vec<usize>,
    /// Event types.
    pub events: Vec<usize>,
    /// Sub-categories.
    pub categories: Vec<usize>,
}

const CATEGORIES: &[(&str, &str)] = &[
    ("madmpi", "everything madmpi exposes"),
    (
        "engine",
        "the engine: protocols, matching, waiting (spin), drivers started",
    ),
    (
        "scheduler",
        "the packet scheduler: strategy, packets, aggregation",
    ),
    ("transport_self", "the self driver (a process to itself)"),
    ("transport_shm", "the shared-memory driver"),
    ("transport_ofi", "the libfabric driver"),
    ("transport_tcp", "the TCP driver"),
    ("transport_emu", "the emulated cluster networks"),
    ("collectives", "collective algorithms"),
    ("diagnostics", "tracing and logging"),
];

/// Every category (the first, `madmpi`, holds the others).
pub static CATEGORIES_ALL: Lazy<Vec<Category>> = Lazy::new(|| {
    let index = |name: &str| CATEGORIES.iter().position(|(n, _)| *n == name);
    let mut cats: Vec<Category> = CATEGORIES
        .iter()
        .map(|&(name, desc)| Category {
            name,
            desc,
            cvars: Vec::new(),
            pvars: Vec::new(),
            events: Vec::new(),
            categories: Vec::new(),
        })
        .collect();
    cats[0].categories = (1..CATEGORIES.len()).collect();
    for (i, c) in CVARS.iter().enumerate() {
        if let Some(k) = index(c.category) {
            cats[k].cvars.push(i);
        }
    }
    for (i, p) in PVARS.iter().enumerate() {
        if let Some(k) = index(p.category) {
            cats[k].pvars.push(i);
        }
    }
    for (i, e) in EVENTS.iter().enumerate() {
        if let Some(k) = index(e.category) {
            cats[k].events.push(i);
        }
    }
    cats
});

/// `f` on the running engine; `None` when MPI is not running (or the engine is out of this
/// thread's reach: another thread owns it, or this is a call from inside an MPI call).
pub(crate) fn engine<T>(f: impl FnOnce(&mut Engine) -> T) -> Option<T> {
    crate::api::with_quiet(|e| Ok(f(e))).ok()
}
