//! Performance variables: what the engine counts ([`super::Counters`]), per driver family
//! (`shm`, `tcp`, … summed over a family's instances), the drivers' own counters (the shm
//! split copies) and the emulated networks' protocol counters (BCL-3 retransmissions).
//!
//! Every value is an unsigned 64-bit integer read from the engine while MPI runs; before
//! `MPI_Init` every value is 0, after `MPI_Finalize` the values of the moment the engine
//! stopped.

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::counters::{Counters, DriverCounters};
use super::{engine, Verbosity};
use crate::engine::Engine;

/// Classes of performance variables (the standard's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PvarClass {
    /// A level: a quantity now (queue length).
    Level,
    /// The most a level ever was.
    HighWatermark,
    /// A count of occurrences.
    Counter,
}

enum Source {
    Engine(fn(&Counters) -> u64),
    Driver(&'static str, fn(&DriverCounters) -> u64),
    /// A counter a driver of this family reports (`Transport::counters`).
    Named(&'static str, &'static str),
    /// A counter of the emulated NICs' protocol.
    Emu(fn(&madmpi_transports::emu::Stats) -> u64),
}

/// A performance variable.
pub struct PvarDesc {
    /// Name.
    pub name: String,
    /// What it counts.
    pub desc: String,
    /// Class.
    pub class: PvarClass,
    /// Who should care.
    pub verbosity: Verbosity,
    /// Category name.
    pub category: &'static str,
    source: Source,
}

impl PvarDesc {
    /// Counters and levels of the engine are read-only for their class's meaning; a counter's
    /// handle may still be reset or written (its own value, not the engine's).
    pub fn readonly(&self) -> bool {
        self.class != PvarClass::Counter
    }

    /// Levels and watermarks need no start: they are continuous.
    pub fn continuous(&self) -> bool {
        self.class != PvarClass::Counter
    }

    fn value(&self, e: &Engine) -> u64 {
        use madmpi_transports::registry::Driver;
        use madmpi_transports::Transport;
        let c = &e.st.stats;
        let of = |fam: &'static str| {
            e.drv
                .families
                .iter()
                .enumerate()
                .filter(move |(_, &f)| f == fam)
                .map(|(i, _)| i)
        };
        match &self.source {
            Source::Engine(f) => f(c),
            Source::Driver(fam, f) => of(fam).filter_map(|i| c.drivers.get(i)).map(f).sum(),
            Source::Named(fam, name) => of(fam)
                .filter_map(|i| e.drv.list.get(i))
                .flat_map(|d| d.counters())
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v)
                .sum(),
            Source::Emu(f) => e
                .drv
                .list
                .iter()
                .map(|d| match d {
                    Driver::Emu(t) => f(&t.stats()),
                    _ => 0,
                })
                .sum(),
        }
    }
}

/// The driver families a pvar set is made for (the registry's).
pub const FAMILIES: &[&str] = &["self", "shm", "ofi", "tcp", "emu"];

fn def(
    name: &str,
    class: PvarClass,
    verbosity: Verbosity,
    category: &'static str,
    desc: &str,
    source: Source,
) -> PvarDesc {
    PvarDesc {
        name: name.to_string(),
        desc: desc.to_string(),
        class,
        verbosity,
        category,
        source,
    }
}

/// A counter of a record: name, description, how to read it.
type Field<R> = (&'static str, &'static str, fn(&R) -> u64);

fn defs() -> Vec<PvarDesc> {
    use PvarClass::*;
    use Source::Engine as E;
    use Verbosity::*;
    let mut v = vec![
        def(
            "madmpi_packets_sent",
            Counter,
            TunerBasic,
            "scheduler",
            "packets handed to drivers (all peers, all rails)",
            E(|c| c.packets()),
        ),
        def(
            "madmpi_packet_chunks_sent",
            Counter,
            TunerBasic,
            "scheduler",
            "chunks (messages, control, data fragments) in those packets: divided by \
             madmpi_packets_sent, the chunks aggregated per packet",
            E(|c| c.packet_chunks),
        ),
        def(
            "madmpi_packet_chunks_max",
            HighWatermark,
            TunerDetail,
            "scheduler",
            "most chunks aggregated into one packet",
            E(|c| c.max_chunks),
        ),
        def(
            "madmpi_eager_sends",
            Counter,
            UserBasic,
            "engine",
            "messages sent eagerly (their data in the first packet)",
            E(|c| c.eager_sends),
        ),
        def(
            "madmpi_packed_sends",
            Counter,
            TunerBasic,
            "scheduler",
            "eager messages copied into the packet being built when posted (aggreg, adaptive)",
            E(|c| c.packed_sends),
        ),
        def(
            "madmpi_rendezvous_sends",
            Counter,
            UserBasic,
            "engine",
            "messages sent by rendezvous (RTS, then the data)",
            E(|c| c.rdv_sends),
        ),
        def(
            "madmpi_unexpected_messages",
            Counter,
            UserBasic,
            "engine",
            "messages that arrived before their receive was posted",
            E(|c| c.unexpected_total),
        ),
        def(
            "madmpi_unexpected_queue_length",
            Level,
            UserBasic,
            "engine",
            "messages in the unexpected queues now",
            E(|c| c.unexpected_len),
        ),
        def(
            "madmpi_unexpected_queue_bytes",
            Level,
            UserDetail,
            "engine",
            "bytes of message data the unexpected queues hold now",
            E(|c| c.unexpected_bytes),
        ),
        def(
            "madmpi_unexpected_queue_length_hwm",
            HighWatermark,
            UserDetail,
            "engine",
            "most messages the unexpected queues ever held at once",
            E(|c| c.unexpected_len_hwm),
        ),
        def(
            "madmpi_unexpected_queue_bytes_hwm",
            HighWatermark,
            UserDetail,
            "engine",
            "most bytes the unexpected queues ever held at once",
            E(|c| c.unexpected_bytes_hwm),
        ),
    ];
    for fam in FAMILIES {
        let cat: &'static str = Box::leak(format!("transport_{fam}").into_boxed_str());
        let fields: [Field<DriverCounters>; 5] = [
            ("packets_sent", "packets the driver took", |d| {
                d.packets_sent
            }),
            (
                "bytes_sent",
                "bytes of those packets (headers included)",
                |d| d.bytes_sent,
            ),
            ("packets_received", "packets the driver delivered", |d| {
                d.packets_received
            }),
            (
                "bytes_received",
                "bytes of those packets (headers included)",
                |d| d.bytes_received,
            ),
            (
                "bytes_pulled",
                "rendezvous bytes pulled from peers' memory (get)",
                |d| d.bytes_got,
            ),
        ];
        for (what, desc, f) in fields {
            v.push(def(
                &format!("madmpi_{fam}_{what}"),
                Counter,
                TunerBasic,
                cat,
                &format!("{fam}: {desc}, summed over the family's instances"),
                Source::Driver(fam, f),
            ));
        }
    }
    for (name, desc) in [
        ("split_gets", "rendezvous copied by both processes at once"),
        (
            "split_chunks_mine",
            "chunks of split copies this process copied itself",
        ),
        (
            "split_chunks_theirs",
            "chunks of split copies the sender copied",
        ),
        (
            "split_chunks_helped",
            "chunks this process copied for a peer's split copy",
        ),
    ] {
        v.push(def(
            &format!("madmpi_shm_{name}"),
            Counter,
            TunerDetail,
            "transport_shm",
            &format!("shm: {desc}"),
            Source::Named("shm", name),
        ));
    }
    let emu: [Field<madmpi_transports::emu::Stats>; 7] = [
        (
            "retransmitted",
            "frames sent again (BCL-3 go-back-N)",
            |s| s.retransmitted,
        ),
        ("naks", "NAKs sent", |s| s.naks),
        ("timeouts", "retransmission timeouts", |s| s.timeouts),
        ("crc_errors", "frames that failed their CRC", |s| {
            s.crc_errors
        }),
        ("dropped", "frames the fault injector dropped", |s| {
            s.dropped
        }),
        ("flipped", "frames the fault injector corrupted", |s| {
            s.flipped
        }),
        ("duplicates", "duplicate frames dropped", |s| s.duplicates),
    ];
    for (name, desc, f) in emu {
        v.push(def(
            &format!("madmpi_emu_{name}"),
            Counter,
            TunerBasic,
            "transport_emu",
            &format!("emu: {desc}"),
            Source::Emu(f),
        ));
    }
    v
}

/// Every performance variable, in index order.
pub static PVARS: Lazy<Vec<PvarDesc>> = Lazy::new(defs);

/// The values at MPI_Finalize.
static LAST: Mutex<Option<Vec<u64>>> = parking_lot::const_mutex(None);

/// The value of pvar `i` now (see the module documentation).
pub fn read(i: usize) -> u64 {
    let Some(p) = PVARS.get(i) else { return 0 };
    if let Some(v) = engine(|e| p.value(e)) {
        return v;
    }
    LAST.lock()
        .as_ref()
        .and_then(|v| v.get(i).copied())
        .unwrap_or(0)
}

/// Keep every value of the engine as it stops.
pub(crate) fn engine_stops(e: &Engine) {
    *LAST.lock() = Some(PVARS.iter().map(|p| p.value(e)).collect());
}
