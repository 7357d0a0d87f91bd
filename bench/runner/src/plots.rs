//! Figures in the style of the NewMadeleine papers: one curve per
//! implementation (and the raw TCP baseline in TCP mode; `ours (aggreg)` on
//! the latency and multiseg figures) against the message
//! size on a log₂ axis, written as PNG (plotters' bitmap backend) and SVG
//! into `<run>/plots/`, one pair per (transport, figure).
//!
//! Text is drawn with DejaVu Sans embedded in the binary (the `dejavu` crate;
//! Bitstream Vera license, free to redistribute) through plotters' `ab_glyph`
//! feature, so rendering needs neither fontconfig nor any system font.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters_backend::{BackendCoord, DrawingErrorKind};

use crate::impls::{Kind, Transport};
use crate::summary::{Cell, Table, TableKey};

/// Pixel size of every figure.
const SIZE: (u32, u32) = (960, 600);

/// One figure written as `plots/<stem>.png` and `plots/<stem>.svg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plot {
    pub transport: Transport,
    pub stem: String,
    pub title: String,
}

/// Which figures exist: the modes of one benchmark metric drawn together
/// (the second mode, if any, dashed).
struct Figure {
    bench: &'static str,
    /// (mode, legend suffix)
    modes: &'static [(&'static str, &'static str)],
    metric: &'static str,
    /// Rank count; 0 means the run's `--ranks`.
    ranks: u32,
    stem: &'static str,
    title: &'static str,
    x_desc: &'static str,
    y_desc: &'static str,
    log_y: bool,
    /// Draw `ours (aggreg)` (first mode only) where it ran.
    aggreg: bool,
}

const FIGURES: &[Figure] = &[
    Figure {
        bench: "pingpong",
        modes: &[("lat", "")],
        metric: "lat_us",
        ranks: 2,
        stem: "pingpong-latency",
        title: "Ping-pong latency (half round trip)",
        x_desc: "message size (bytes)",
        y_desc: "latency (µs)",
        log_y: true,
        aggreg: true,
    },
    Figure {
        bench: "pingpong",
        modes: &[("lat", "")],
        metric: "bw_MBps",
        ranks: 2,
        stem: "pingpong-bandwidth",
        title: "Ping-pong bandwidth (size / half round trip)",
        x_desc: "message size (bytes)",
        y_desc: "bandwidth (MB/s)",
        log_y: false,
        aggreg: false,
    },
    Figure {
        bench: "pingpong",
        modes: &[("bw", ""), ("bibw", " bidir")],
        metric: "bw_MBps",
        ranks: 2,
        stem: "windowed-bandwidth",
        title: "Windowed bandwidth (64 messages in flight; dashed: both directions)",
        x_desc: "message size (bytes)",
        y_desc: "bandwidth (MB/s)",
        log_y: false,
        aggreg: false,
    },
    Figure {
        bench: "multiseg",
        modes: &[("multiseg", ""), ("contig", " contiguous")],
        metric: "lat_us",
        ranks: 2,
        stem: "multiseg",
        title: "16 segments on 16 communicators (dashed: one contiguous message)",
        x_desc: "segment size (bytes)",
        y_desc: "latency (µs)",
        log_y: true,
        aggreg: true,
    },
    Figure {
        bench: "coll",
        modes: &[("allreduce", ""), ("iallreduce", " Iallreduce")],
        metric: "lat_us",
        ranks: 0,
        stem: "allreduce",
        title: "MPI_Allreduce (doubles, sum; dashed: MPI_Iallreduce + MPI_Wait)",
        x_desc: "message size (bytes)",
        y_desc: "time per call (µs)",
        log_y: true,
        aggreg: false,
    },
    Figure {
        bench: "allreduce",
        modes: &[("allreduce", ""), ("iallreduce", " Iallreduce")],
        metric: "lat_us",
        ranks: 2,
        stem: "allreduce-large-2",
        title: "MPI_Allreduce, 2 ranks (doubles, sum; dashed: MPI_Iallreduce + MPI_Wait)",
        x_desc: "message size (bytes)",
        y_desc: "time per call (µs)",
        log_y: true,
        aggreg: false,
    },
    Figure {
        bench: "allreduce",
        modes: &[("allreduce", ""), ("iallreduce", " Iallreduce")],
        metric: "lat_us",
        ranks: 0,
        stem: "allreduce-large",
        title: "MPI_Allreduce (doubles, sum; dashed: MPI_Iallreduce + MPI_Wait)",
        x_desc: "message size (bytes)",
        y_desc: "time per call (µs)",
        log_y: true,
        aggreg: false,
    },
    Figure {
        bench: "coll",
        modes: &[("bcast", "")],
        metric: "lat_us",
        ranks: 0,
        stem: "bcast",
        title: "MPI_Bcast",
        x_desc: "message size (bytes)",
        y_desc: "time per call (µs)",
        log_y: true,
        aggreg: false,
    },
    Figure {
        bench: "coll",
        modes: &[("alltoall", "")],
        metric: "lat_us",
        ranks: 0,
        stem: "alltoall",
        title: "MPI_Alltoall",
        x_desc: "bytes per peer",
        y_desc: "time per call (µs)",
        log_y: true,
        aggreg: false,
    },
];

/// How a curve is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Circle,
    Triangle,
    Square,
    Cross,
    Diamond,
}

fn look(kind: Kind) -> (RGBColor, Marker) {
    match kind {
        Kind::Ours => (RGBColor(214, 39, 40), Marker::Circle),
        Kind::OursAggreg => (RGBColor(148, 103, 189), Marker::Diamond),
        Kind::OursTcp => (RGBColor(255, 127, 14), Marker::Diamond),
        Kind::Mpich => (RGBColor(31, 119, 180), Marker::Triangle),
        Kind::OpenMpi => (RGBColor(44, 160, 44), Marker::Square),
        Kind::RawTcp | Kind::FiPingpong => (RGBColor(40, 40, 40), Marker::Cross),
    }
}

/// One curve: median over runs at each size > 0.
#[derive(Debug, Clone)]
struct Series {
    label: String,
    color: RGBColor,
    marker: Marker,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// A figure with its data, ready to draw.
#[derive(Debug, Clone)]
struct Chart {
    title: String,
    x_desc: String,
    y_desc: String,
    log_y: bool,
    series: Vec<Series>,
}

/// The curves of `fig` in `transport` from the aggregated tables; None when
/// nothing was measured.
fn chart(
    fig: &Figure,
    transport: Transport,
    nranks: u32,
    tables: &BTreeMap<TableKey, Table>,
) -> Option<Chart> {
    let ranks = if fig.ranks == 0 { nranks } else { fig.ranks };
    let mut series = Vec::new();
    for (i, (mode, suffix)) in fig.modes.iter().enumerate() {
        let Some((key, table)) = tables.iter().find(|(k, _)| {
            k.transport == transport
                && k.bench == fig.bench
                && k.mode == *mode
                && k.metric == fig.metric
                && k.ranks == ranks
        }) else {
            continue;
        };
        let mut per_kind: BTreeMap<Kind, Vec<(f64, f64)>> = BTreeMap::new();
        for (size, row) in table {
            if *size == 0 {
                continue; // not on a log axis
            }
            for (kind, samples) in row {
                if let Some(c) = Cell::of(samples, key.better) {
                    if c.med > 0.0 && c.med.is_finite() {
                        per_kind
                            .entry(*kind)
                            .or_default()
                            .push((*size as f64, c.med));
                    }
                }
            }
        }
        for (kind, points) in per_kind {
            // The aggreg variant: its own curve for the first mode (the
            // multiseg figure's dashed `contig` mode has one message per
            // ping, nothing to aggregate).
            if kind == Kind::OursAggreg && !(fig.aggreg && i == 0) {
                continue;
            }
            let (color, marker) = look(kind);
            series.push(Series {
                label: format!("{}{suffix}", kind.title()),
                color,
                marker,
                dashed: i > 0 || kind.is_raw(),
                points,
            });
        }
    }
    if series.is_empty() {
        return None;
    }
    let ranks_note = if fig.ranks == 0 {
        format!(", {ranks} ranks")
    } else {
        String::new()
    };
    Some(Chart {
        title: format!("{} — {transport}{ranks_note}", fig.title),
        x_desc: fig.x_desc.into(),
        y_desc: fig.y_desc.into(),
        log_y: fig.log_y,
        series,
    })
}

/// Registers the embedded font once (plotters' ab_glyph feature has no
/// fonts of its own).
pub(crate) fn fonts() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .map_err(|_| "the embedded DejaVu Sans font is not a valid font".to_string())
    })
    .clone()
}

/// Writes every figure that has data into `dir` (created if needed) for each
/// transport. Returns the figures written and one message per failure; a
/// failure never stops the others.
pub fn write_all(
    dir: &Path,
    tables: &BTreeMap<TableKey, Table>,
    transports: &[Transport],
    nranks: u32,
) -> (Vec<Plot>, Vec<String>) {
    let mut written = Vec::new();
    let mut errors = Vec::new();
    if let Err(e) = fonts() {
        errors.push(e);
        return (written, errors);
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        errors.push(format!("{}: {e}", dir.display()));
        return (written, errors);
    }
    for &t in transports {
        for fig in FIGURES {
            let Some(c) = chart(fig, t, nranks, tables) else {
                continue;
            };
            let stem = format!("{t}-{}", fig.stem);
            let png = dir.join(format!("{stem}.png"));
            let svg = dir.join(format!("{stem}.svg"));
            let res = draw(BitMapBackend::new(&png, SIZE).into_drawing_area(), &c)
                .map_err(|e| format!("{}: {e}", png.display()))
                .and_then(|()| {
                    draw(SVGBackend::new(&svg, SIZE).into_drawing_area(), &c)
                        .map_err(|e| format!("{}: {e}", svg.display()))
                });
            match res {
                Ok(()) => written.push(Plot {
                    transport: t,
                    stem,
                    title: c.title.clone(),
                }),
                Err(e) => errors.push(e),
            }
        }
    }
    (written, errors)
}

/// Draws one chart on a drawing area and presents it (writes the file).
fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, c: &Chart) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in c.series.iter().flat_map(|s| &s.points) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    // Whole powers of two on x; whole decades on a log y; 0 at the bottom of
    // a linear y. A single point still gets a non-empty range.
    let x0 = 2f64.powf(x0.log2().floor());
    let x1 = 2f64.powf(x1.log2().ceil()).max(x0 * 2.0);
    let x = (x0..x1).log_scale().base(2.0);
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(&c.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(78);
    if c.log_y {
        let y0 = 10f64.powf(y0.log10().floor());
        let y1 = 10f64.powf(y1.log10().ceil()).max(y0 * 10.0);
        let mut chart = builder
            .build_cartesian_2d(x, (y0..y1).log_scale())
            .map_err(|e| e.to_string())?;
        body(&mut chart, c)?;
    } else {
        let y1 = if y1 > 0.0 { y1 * 1.08 } else { 1.0 };
        let mut chart = builder
            .build_cartesian_2d(x, RangedCoordf64::from(0.0..y1))
            .map_err(|e| e.to_string())?;
        body(&mut chart, c)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Mesh, curves and legend, for either kind of y axis.
fn body<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    c: &Chart,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(&c.x_desc)
        .y_desc(&c.y_desc)
        .x_labels(12)
        .y_labels(10)
        .x_label_formatter(&|v| bytes_label(*v))
        .y_label_formatter(&|v| value_label(*v))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(205, 205, 205))
        .draw()
        .map_err(|e| e.to_string())?;
    for s in &c.series {
        let style = s.color.stroke_width(2);
        if s.dashed {
            chart.draw_series(DashedLineSeries::new(s.points.iter().copied(), 8, 5, style))
        } else {
            chart.draw_series(LineSeries::new(s.points.iter().copied(), style))
        }
        .map_err(|e| e.to_string())?
        .label(s.label.clone())
        .legend({
            let (color, marker, dashed) = (s.color, s.marker, s.dashed);
            move |at| Glyph {
                at,
                color,
                marker,
                line: Some(dashed),
            }
        });
        chart
            .draw_series(s.points.iter().map(|&at| Glyph {
                at,
                color: s.color,
                marker: s.marker,
                line: None,
            }))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .legend_area_size(44)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .draw()
        .map_err(|e| e.to_string())
}

/// A curve's marker at a point, or (for the legend) a short line, dashed
/// or not, with the marker in its middle. One element type for every marker
/// shape, so legend closures and series have a single type.
struct Glyph<C> {
    at: C,
    color: RGBColor,
    marker: Marker,
    /// Legend: draw the line too (`Some(dashed)`).
    line: Option<bool>,
}

impl<'a, C: 'a> PointCollection<'a, C> for &'a Glyph<C> {
    type Point = &'a C;
    type IntoIter = std::iter::Once<&'a C>;
    fn point_iter(self) -> Self::IntoIter {
        std::iter::once(&self.at)
    }
}

impl<DB: DrawingBackend, C> Drawable<DB> for Glyph<C> {
    fn draw<I: Iterator<Item = BackendCoord>>(
        &self,
        mut pos: I,
        b: &mut DB,
        _: (u32, u32),
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        let Some((x, y)) = pos.next() else {
            return Ok(());
        };
        let line = self.color.stroke_width(2);
        let fill = self.color.filled();
        let (cx, cy) = match self.line {
            None => (x, y),
            Some(dashed) => {
                let gap = if dashed { 4 } else { 0 };
                for (a, z) in [(0, 9), (9, 23), (23, 32)] {
                    let a = if a == 0 { 0 } else { a + gap };
                    let z = if z == 32 { 32 } else { z - gap };
                    b.draw_line((x + a, y), (x + z, y), &line)?;
                }
                (x + 16, y)
            }
        };
        match self.marker {
            Marker::Circle => b.draw_circle((cx, cy), 4, &fill, true),
            Marker::Triangle => {
                b.fill_polygon([(cx, cy - 5), (cx - 5, cy + 4), (cx + 5, cy + 4)], &fill)
            }
            Marker::Square => b.draw_rect((cx - 4, cy - 4), (cx + 4, cy + 4), &line, false),
            Marker::Cross => {
                b.draw_line((cx - 4, cy - 4), (cx + 4, cy + 4), &line)?;
                b.draw_line((cx - 4, cy + 4), (cx + 4, cy - 4), &line)
            }
            Marker::Diamond => b.fill_polygon(
                [(cx, cy - 6), (cx + 5, cy), (cx, cy + 6), (cx - 5, cy)],
                &fill,
            ),
        }
    }
}

/// 1, 4, 16, ..., 1K, 4K, ..., 1M (binary prefixes).
fn bytes_label(v: f64) -> String {
    let n = v.round();
    if n <= 0.0 || (v - n).abs() > 1e-6 * n.max(1.0) {
        return String::new();
    }
    let n = n as u64;
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

/// Axis value without float noise: 1000, 10, 2.5, 0.1, 0.01.
fn value_label(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if a >= 1.0 {
        let r = format!("{v:.1}");
        r.strip_suffix(".0").map(String::from).unwrap_or(r)
    } else {
        let decimals = (-a.log10()).ceil() as usize + 1;
        let s = format!("{v:.decimals$}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::Better;
    use crate::summary::Sample;

    fn table(kinds: &[(Kind, f64)], sizes: &[u64]) -> Table {
        let mut t = Table::new();
        for &s in sizes {
            for &(k, base) in kinds {
                let v = base + s as f64 / 1000.0;
                t.entry(s).or_default().entry(k).or_default().push(Sample {
                    med: v,
                    min: v * 0.9,
                    max: v * 1.1,
                    ..Sample::default()
                });
            }
        }
        t
    }

    fn key(t: Transport, bench: &str, mode: &str, metric: &str, better: Better) -> TableKey {
        TableKey {
            transport: t,
            bench_order: 0,
            bench: bench.into(),
            mode: mode.into(),
            metric: metric.into(),
            ranks: 2,
            better,
        }
    }

    #[test]
    fn labels() {
        assert_eq!(bytes_label(1.0), "1");
        assert_eq!(bytes_label(4096.0), "4K");
        assert_eq!(bytes_label(4_194_304.0), "4M");
        assert_eq!(bytes_label(1536.0), "1536");
        assert_eq!(bytes_label(2.5), "");
        assert_eq!(value_label(1000.0), "1000");
        assert_eq!(value_label(0.1), "0.1");
        assert_eq!(value_label(0.010_000_000_1), "0.01");
        assert_eq!(value_label(2.5), "2.5");
        assert_eq!(value_label(0.0), "0");
    }

    #[test]
    fn aggreg_curve_on_latency_and_multiseg_only() {
        let sizes = [4u64, 64, 1024];
        let kinds = [
            (Kind::Ours, 1.0),
            (Kind::OursAggreg, 0.8),
            (Kind::Mpich, 1.5),
        ];
        let mut tables = BTreeMap::new();
        for (mode, metric, better) in [
            ("lat", "lat_us", Better::Lower),
            ("lat", "bw_MBps", Better::Higher),
            ("bw", "bw_MBps", Better::Higher),
        ] {
            tables.insert(
                key(Transport::Shm, "pingpong", mode, metric, better),
                table(&kinds, &sizes),
            );
        }
        for mode in ["multiseg", "contig"] {
            tables.insert(
                key(Transport::Shm, "multiseg", mode, "lat_us", Better::Lower),
                table(&kinds, &sizes),
            );
        }
        let curves = |stem: &str| -> Vec<(String, bool, RGBColor, Marker)> {
            let fig = FIGURES.iter().find(|f| f.stem == stem).unwrap();
            chart(fig, Transport::Shm, 2, &tables)
                .unwrap()
                .series
                .into_iter()
                .map(|s| (s.label, s.dashed, s.color, s.marker))
                .collect()
        };
        let (red, _) = look(Kind::Ours);
        let (purple, diamond) = look(Kind::OursAggreg);
        assert_ne!(red, purple);
        let lat = curves("pingpong-latency");
        assert!(
            lat.contains(&("ours (aggreg)".into(), false, purple, diamond)),
            "{lat:?}"
        );
        assert!(
            lat.contains(&("ours".into(), false, red, Marker::Circle)),
            "{lat:?}"
        );
        let ms = curves("multiseg");
        let labels: Vec<&str> = ms.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(
            labels,
            [
                "ours",
                "ours (aggreg)",
                "MPICH",
                "ours contiguous",
                "MPICH contiguous"
            ]
        );
        for stem in ["pingpong-bandwidth", "windowed-bandwidth"] {
            let c = curves(stem);
            assert!(c.iter().all(|c| !c.0.contains("aggreg")), "{stem}: {c:?}");
        }
        let dir = std::env::temp_dir().join(format!("madmpi-plots-ag-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (plots, errors) = write_all(&dir, &tables, &[Transport::Shm], 2);
        assert!(errors.is_empty(), "{errors:?}");
        let svg = std::fs::read_to_string(dir.join("shm-multiseg.svg")).unwrap();
        assert!(svg.contains("ours (aggreg)"), "legend");
        assert_eq!(plots.len(), 4);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn writes_png_and_svg_with_the_raw_baseline() {
        let sizes: Vec<u64> = (0..=22).map(|k| 1u64 << k).chain([0]).collect();
        let mut tables = BTreeMap::new();
        let kinds = [
            (Kind::Ours, 1.0),
            (Kind::Mpich, 1.5),
            (Kind::OpenMpi, 2.0),
            (Kind::RawTcp, 0.5),
        ];
        tables.insert(
            key(Transport::Tcp, "pingpong", "lat", "lat_us", Better::Lower),
            table(&kinds, &sizes),
        );
        tables.insert(
            key(Transport::Tcp, "pingpong", "lat", "bw_MBps", Better::Higher),
            table(&kinds, &sizes),
        );
        let dir = std::env::temp_dir().join(format!("madmpi-plots-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (plots, errors) = write_all(&dir, &tables, &[Transport::Shm, Transport::Tcp], 4);
        assert!(errors.is_empty(), "{errors:?}");
        let stems: Vec<&str> = plots.iter().map(|p| p.stem.as_str()).collect();
        assert_eq!(stems, ["tcp-pingpong-latency", "tcp-pingpong-bandwidth"]);
        for p in &plots {
            let png = std::fs::read(dir.join(format!("{}.png", p.stem))).unwrap();
            assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{}", p.stem);
            let svg = std::fs::read_to_string(dir.join(format!("{}.svg", p.stem))).unwrap();
            assert!(svg.contains("<svg"), "{}", p.stem);
            assert!(svg.contains("raw TCP"), "{}: legend", p.stem);
            assert!(svg.contains("Open MPI"), "{}: legend", p.stem);
        }
        if std::env::var_os("MADMPI_KEEP_PLOTS").is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            eprintln!("plots kept in {}", dir.display());
        }
    }
}
