//! The networks part's figures: one per curve (`networks-<curve>.png`: ours, the model, the
//! published points) and one per paper (`paper-<seed>.png`: every curve of that paper and its
//! published points on the same axes).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use super::{Curve, Series, SERIES};

/// A paper's figure: the curves it compares.
pub struct Paper {
    pub id: &'static str,
    pub title: &'static str,
    pub curves: &'static [&'static str],
}

/// One figure per seed paper.
pub const PAPERS: &[Paper] = &[
    Paper {
        id: "seed000",
        title: "Madeleine II over BIP and over SISCI (seed 000)",
        curves: &["bip", "mad-bip", "sisci", "mad-sisci"],
    },
    Paper {
        id: "seed002",
        title: "Madeleine over VIA, with and without the registered pool (seed 002)",
        curves: &["via-pool", "mad-via-pool", "via-dynamic", "mad-via-dynamic"],
    },
    Paper {
        id: "seed003",
        title: "MAD-MPI over MX and Elan (seed 003)",
        curves: &["mx", "elan"],
    },
    Paper {
        id: "seed004",
        title: "BCL-3 raw and MPI over it, reliable and lossy (seed 004)",
        curves: &["bcl3", "bcl3-lossy"],
    },
];

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// One drawn line: label, points, color, dashed.
type Line = (String, Vec<(f64, f64)>, RGBColor, bool);
/// One published marker: label, value, color, filled (the layer of ours) or hollow (raw).
type Mark = (String, f64, RGBColor, bool);

fn pick(c: &Curve, bw: bool) -> Vec<(f64, f64)> {
    c.iter()
        .map(|c| (c.0 as f64, if bw { c.2 } else { c.1 }))
        .filter(|p| p.0 > 0.0 && p.1.is_finite() && p.1 > 0.0)
        .collect()
}

/// Draw one panel (latency or bandwidth against size) of `lines` and `marks`.
fn panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    caption: &str,
    bw: bool,
    lines: &[Line],
    marks: &[Mark],
) -> Result<(), String> {
    let ys = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.1))
        .chain(marks.iter().map(|m| m.1));
    let (lo, hi) = ys.fold((f64::INFINITY, 0.0f64), |(a, b), y| (a.min(y), b.max(y)));
    if !lo.is_finite() || lines.iter().all(|l| l.1.is_empty()) {
        return Ok(());
    }
    let xmax = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.0))
        .fold(2.0, f64::max);
    let mut c = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 17))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d((1f64..xmax).log_scale(), (lo * 0.5..hi * 2.0).log_scale())
        .map_err(|e| e.to_string())?;
    c.configure_mesh()
        .x_desc("bytes")
        .draw()
        .map_err(|e| e.to_string())?;
    for (label, pts, color, dashed) in lines {
        let color = *color;
        if *dashed {
            c.draw_series(DashedLineSeries::new(
                pts.iter().copied(),
                6,
                4,
                color.stroke_width(1),
            ))
        } else {
            c.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
        }
        .map_err(|e| e.to_string())?
        .label(label.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
    }
    let at = if bw { xmax } else { 1.0 };
    for (label, v, color, filled) in marks {
        let (color, filled) = (*color, *filled);
        let style = if filled {
            color.filled()
        } else {
            color.stroke_width(2)
        };
        c.draw_series(std::iter::once(Circle::new((at, *v), 5, style)))
            .map_err(|e| e.to_string())?
            .label(label.as_str())
            .legend(move |(x, y)| {
                Circle::new(
                    (x + 7, y),
                    4,
                    if filled {
                        color.filled()
                    } else {
                        color.stroke_width(2)
                    },
                )
            });
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 11))
        .draw()
        .map_err(|e| e.to_string())
}

fn marks_of(s: &Series, bw: bool, color: RGBColor) -> Vec<Mark> {
    s.points
        .iter()
        .filter(|p| (p.metric == "bw") == bw)
        .map(|p| {
            (
                format!(
                    "published: {} {} {}",
                    p.layer,
                    p.value,
                    if bw { "MB/s" } else { "µs" }
                ),
                p.value,
                color,
                p.kind != super::Layer::Raw,
            )
        })
        .collect()
}

/// `networks-<curve>.png`: latency and bandwidth of one curve, its model, its published points.
pub fn network(dir: &Path, s: &Series, curve: &Curve, model: &Curve) -> Result<(), String> {
    crate::plots::fonts()?;
    let png = dir.join(format!("networks-{}.png", s.id));
    let root = BitMapBackend::new(&png, (1100, 450)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(550);
    let ours = match s.prog {
        super::Prog::PingPong => "ours (MPI over emu)",
        super::Prog::Madeleine => "ours (Madeleine API over emu)",
    };
    for (area, bw) in [(left, false), (right, true)] {
        let lines = vec![
            (ours.to_string(), pick(curve, bw), COLORS[0], false),
            (
                "model (one packet)".to_string(),
                pick(model, bw),
                COLORS[2],
                true,
            ),
        ];
        let marks = marks_of(s, bw, COLORS[1]);
        let what = if bw {
            "bandwidth (MB/s)"
        } else {
            "latency (µs)"
        };
        panel(&area, &format!("{} {what}", s.id), bw, &lines, &marks)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// `paper-<seed>.png`: the paper's curves (ours solid, each network's model dashed once) and
/// its published points (filled: the layer of ours; hollow: the raw network).
pub fn paper(
    dir: &Path,
    f: &Paper,
    curves: &BTreeMap<&'static str, (Curve, Curve)>,
) -> Result<(), String> {
    crate::plots::fonts()?;
    let png = dir.join(format!("paper-{}.png", f.id));
    let root = BitMapBackend::new(&png, (1400, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (top, body) = root.split_vertically(30);
    top.draw(&Text::new(f.title, (10, 5), ("sans-serif", 20)))
        .map_err(|e| e.to_string())?;
    let (left, right) = body.split_horizontally(700);
    for (area, bw) in [(left, false), (right, true)] {
        let mut lines = Vec::new();
        let mut marks: Vec<Mark> = Vec::new();
        let mut modelled = Vec::new();
        for (k, id) in f.curves.iter().enumerate() {
            let (Some(s), Some((curve, model))) =
                (SERIES.iter().find(|s| s.id == *id), curves.get(id))
            else {
                continue;
            };
            let color = COLORS[k % COLORS.len()];
            let what = match s.prog {
                super::Prog::PingPong => "MPI",
                super::Prog::Madeleine => "Madeleine API",
            };
            lines.push((
                format!("ours: {what} over emu {id}"),
                pick(curve, bw),
                color,
                false,
            ));
            // One model line per network and settings (VIA with and without its pool).
            if !modelled.contains(&(s.emu, s.env)) && !model.is_empty() {
                modelled.push((s.emu, s.env));
                let how: Vec<String> = s.env.iter().map(|(k, v)| format!(" {k}={v}")).collect();
                lines.push((
                    format!("model: {}{}", s.emu, how.concat()),
                    pick(model, bw),
                    color,
                    true,
                ));
            }
            for m in marks_of(s, bw, color) {
                if !marks.iter().any(|x| x.0 == m.0) {
                    marks.push(m);
                }
            }
        }
        let what = if bw {
            "bandwidth (MB/s)"
        } else {
            "latency (µs)"
        };
        panel(&area, what, bw, &lines, &marks)?;
    }
    root.present().map_err(|e| e.to_string())
}
