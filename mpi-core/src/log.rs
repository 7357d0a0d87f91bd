//! `MADMPI_LOG`: diagnostics on stderr through `tracing`, off by default.
//!
//! The value is a level (`error`, `warn`, `info`, `debug`, `trace`) or `tracing` target
//! directives (`madmpi::engine=trace,info`). When set, `MPI_Init` installs a global subscriber
//! that writes one line per event to stderr, prefixed with the world rank:
//!
//! ```text
//! madmpi[1] 0.004182 DEBUG madmpi::engine: transport chosen peer=0 driver=Shm eager_max=16384
//! ```
//!
//! (seconds since the subscriber was installed, level, module, message, fields). When unset no
//! subscriber exists and every `tracing` call site costs one relaxed load (`tracing`'s global
//! maximum level is `OFF`). A program that installed its own global subscriber keeps it.

use std::fmt;
use std::sync::Once;
use std::time::Instant;

use tracing::{Event, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;

/// Install the stderr subscriber if `MADMPI_LOG` asks for one (once per process).
pub(crate) fn install(rank: u32) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Ok(spec) = std::env::var("MADMPI_LOG") else {
            return;
        };
        let spec = spec.trim();
        if spec.is_empty() || spec == "off" || spec == "0" {
            return;
        }
        let targets: Targets = match spec.parse() {
            Ok(t) => t,
            Err(e) => {
                crate::trace::say_line(format!(
                    "madmpi: rank {rank}: MADMPI_LOG={spec}: {e} (expected error, warn, info, \
                     debug, trace, or target=level directives); logging stays off"
                ));
                return;
            }
        };
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .event_format(RankFormat {
                rank,
                start: Instant::now(),
            });
        let subscriber = tracing_subscriber::registry().with(layer).with(targets);
        // Fails only if the program installed its own subscriber, which then stays in charge.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// One line per event: `madmpi[<rank>] <seconds> <LEVEL> <target>: <spans>: <message> <fields>`.
struct RankFormat {
    rank: u32,
    start: Instant,
}

impl<S, N> FormatEvent<S, N> for RankFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        write!(
            w,
            "madmpi[{}] {:.6} {:>5} {}: ",
            self.rank,
            self.start.elapsed().as_secs_f64(),
            meta.level(),
            meta.target()
        )?;
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                write!(w, "{}", span.name())?;
                let ext = span.extensions();
                if let Some(fields) = ext.get::<tracing_subscriber::fmt::FormattedFields<N>>() {
                    if !fields.is_empty() {
                        write!(w, "{{{fields}}}")?;
                    }
                }
                w.write_str(": ")?;
            }
        }
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}
