//! The report's plots, drawn with `plotters` into SVG strings that the HTML report inlines
//! (so the page opens offline). Latencies use log axes: a 300 ns shared-memory echo and a
//! 2 ms megabyte echo share a chart and both stay readable.

use crate::model::transport_label;
use crate::units::{bytes, nanos, number};
use ipc_matrix_baseline::{stats::batch_medians, RunVerdict, Verdict};
use ipc_matrix_results::{CellResult, Floor};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::error::Error;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), Box<dyn Error>>;

/// Okabe & Ito's colour-blind-safe palette.
const COLORS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(0, 0, 0),
];
const FONT: &str = "sans-serif";
/// Tick labels and axis titles; plotters draws text at about four fifths of the size
/// asked for, so these read as 12 and 13 px.
const LABEL_SIZE: u32 = 15;
const AXIS_TITLE_SIZE: u32 = 16;
const WIDTH: u32 = 900;
/// Round trips drawn per latency-over-index plot; longer runs are shown as per-bucket
/// maxima (the page holds one such plot per cell, so each is kept small).
const MAX_POINTS: usize = 800;

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// Runs `draw` on a fresh SVG canvas and returns the SVG text.
fn svg(height: u32, draw: impl FnOnce(&Area) -> DrawResult) -> Result<String, String> {
    svg_sized(WIDTH, height, draw)
}

fn svg_sized(
    width: u32,
    height: u32,
    draw: impl FnOnce(&Area) -> DrawResult,
) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        draw(&root).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// The series legend, boxed, where it hides the least.
fn legend<'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    position: SeriesLabelPosition,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FONT, LABEL_SIZE))
        .draw()?;
    Ok(())
}

/// A log axis range that holds every value with some room on both sides.
fn log_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (low, high) = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if low > high {
        return 1.0..10.0;
    }
    low / 2.0..high * 2.0
}

/// The line a cell belongs to in [`round_trip_vs_payload`]: its scenario, transport and
/// variant (codec, load shape); only payloads differ along a line.
fn line_of(result: &CellResult) -> String {
    let mut line = format!("{} {}", result.cell.scenario, transport_label(result));
    if let Some(variant) = result.cell.variant_label() {
        line = format!(
            "{} {variant} {}",
            result.cell.scenario,
            transport_label(result)
        );
    }
    line
}

/// Median round trip against payload size, one line per scenario and transport: a line
/// never joins two scenarios.
pub fn round_trip_vs_payload(results: &[CellResult]) -> Result<String, String> {
    let mut transports: Vec<String> = results.iter().map(line_of).collect();
    transports.sort_unstable();
    transports.dedup();
    let measured: Vec<&CellResult> = results.iter().filter(|r| r.latency_ns.is_some()).collect();
    let x_range = log_range(measured.iter().map(|r| r.cell.payload_bytes as f64));
    let y_range = log_range(
        measured
            .iter()
            .filter_map(|r| r.latency_ns)
            .map(|l| l.p50 as f64),
    );
    svg(420, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("Median round trip vs payload size", (FONT, 20))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d(x_range.log_scale(), y_range.log_scale())?;
        chart
            .configure_mesh()
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, AXIS_TITLE_SIZE))
            .x_desc("payload (bytes, log scale)")
            .y_desc("p50 round trip (log scale)")
            .x_label_formatter(&|v| bytes(*v as u64))
            .y_labels(8)
            .y_label_formatter(&|v| nanos(*v as u64))
            .draw()?;
        for (i, transport) in transports.iter().enumerate() {
            let mut points: Vec<(f64, f64)> = measured
                .iter()
                .filter(|r| line_of(r) == *transport)
                .filter_map(|r| Some((r.cell.payload_bytes as f64, r.latency_ns?.p50 as f64)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let c = color(i);
            chart
                .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))?
                .label(transport.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
            chart.draw_series(PointSeries::of_element(
                points,
                4,
                c.filled(),
                &|p, s, st| Circle::new(p, s, st),
            ))?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        Ok(())
    })
}

/// Horizontal grouped bars: one row per label, one bar per series, on a log axis.
pub fn grouped_bars(
    title: &str,
    x_desc: &str,
    rows: &[String],
    series: &[(String, Vec<Option<f64>>)],
    format_value: &dyn Fn(f64) -> String,
) -> Result<String, String> {
    let values = log_range(series.iter().flat_map(|(_, v)| v.iter().flatten().copied()));
    // Room on the right for the legend.
    let x_range = values.start..values.end * 8.0;
    let height = 90 + 34 * rows.len().max(1) as u32 + 12 * series.len() as u32;
    svg(height, |root| {
        let n = rows.len();
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 20))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(label_width(rows))
            .build_cartesian_2d(x_range.clone().log_scale(), -0.5f64..n as f64 - 0.5)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n.max(1))
            .y_label_formatter(&|v| {
                // Rows sit at whole numbers; any other tick stays unlabelled.
                let row = v.round();
                if (v - row).abs() < 1e-6 && row >= 0.0 && row < n as f64 {
                    rows.get(n - 1 - row as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, AXIS_TITLE_SIZE))
            .x_desc(x_desc)
            .x_label_formatter(&|v| format_value(*v))
            .draw()?;
        let band = 0.8 / series.len().max(1) as f64;
        for (k, (name, values)) in series.iter().enumerate() {
            let c = color(k);
            let bars = values.iter().enumerate().filter_map(|(row, v)| {
                let v = (*v)?;
                // Rows run top to bottom in label order, series top to bottom in order.
                let top = (n - 1 - row) as f64 + 0.4 - band * k as f64;
                Some(Rectangle::new(
                    [(x_range.start, top), (v, top - band * 0.9)],
                    c.filled(),
                ))
            });
            chart
                .draw_series(bars)?
                .label(name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        Ok(())
    })
}

/// One series of a bar chart: its legend name, its colour (an index into the palette, so
/// a leg keeps its colour from chart to chart) and a value per row (`None`: no bar).
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub color: usize,
    pub values: Vec<Option<f64>>,
}

/// One panel of [`series_bars`]: what its axis shows, and its series.
#[derive(Debug, Clone)]
pub struct Panel {
    pub x_desc: String,
    pub series: Vec<Series>,
}

/// The log axis range a panel's bars need: with `from`, room on both sides of it for the
/// values written beside the bars.
fn panel_range(series: &[Series], from: Option<f64>) -> Option<std::ops::Range<f64>> {
    let values: Vec<f64> = series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied())
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    if values.is_empty() {
        return None;
    }
    Some(match from {
        Some(base) => {
            let (lo, hi) = values
                .iter()
                .fold((base, base), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            lo / 1.8..hi * 1.8
        }
        None => log_range(values.into_iter()),
    })
}

/// Horizontal grouped bars on log axes: one row per label, one bar per series, rows tall
/// enough for every series, and the legend in a column of its own on the right (it never
/// hides a bar). Panels side by side share the rows (labelled on the left) and the legend,
/// each with its own axis. With `from`, each bar runs from that value (1.0 for a ratio,
/// drawn as a line) to its own, which is written beside it; without, bars start at the
/// axis.
pub fn series_bars(
    title: &str,
    rows: &[String],
    panels: &[Panel],
    from: Option<f64>,
    format_value: &dyn Fn(f64) -> String,
) -> Result<String, String> {
    let ranges = panels
        .iter()
        .map(|p| panel_range(&p.series, from))
        .collect::<Option<Vec<_>>>()
        .ok_or("no values to draw")?;
    let mut legend: Vec<(&str, usize)> = Vec::new();
    for s in panels.iter().flat_map(|p| &p.series) {
        if !legend.iter().any(|(name, _)| *name == s.name) {
            legend.push((&s.name, s.color));
        }
    }
    let n = rows.len().max(1);
    let most = panels.iter().map(|p| p.series.len()).max().unwrap_or(1) as u32;
    let per_bar = if from.is_some() { 15 } else { 7 };
    let row_height = 34.max(per_bar * most + 16);
    let longest_row = rows.iter().map(|r| r.chars().count()).max().unwrap_or(0) as u32;
    let label_width = (longest_row * 7 + 24).clamp(120, 420);
    let longest_name = legend
        .iter()
        .map(|(name, _)| name.chars().count())
        .max()
        .unwrap_or(0) as u32;
    let key_width = (longest_name * 8 + 48).clamp(110, 340);
    // Each panel after the first gets the room the first one's row labels take.
    let width = WIDTH.max(key_width + label_width + 380 * panels.len() as u32);
    svg_sized(width, 110 + row_height * n as u32, |root| {
        let titled = root.titled(title, (FONT, 20))?;
        let (plots, key) = titled.split_horizontally(width - key_width);
        let first = (width - key_width - label_width) / panels.len() as u32 + label_width;
        let mut areas = vec![plots.clone()];
        for _ in 1..panels.len() {
            let rest = areas.pop().expect("one area at least");
            let taken = if areas.is_empty() {
                first
            } else {
                first - label_width
            };
            let (left, right) = rest.split_horizontally(taken);
            areas.push(left);
            areas.push(right);
        }
        for (i, ((panel, range), area)) in panels.iter().zip(&ranges).zip(&areas).enumerate() {
            // Ratios get ticks at powers of two (0.5x, 1x, 2x), which a log axis of base
            // 10 would leave out below 1x.
            let axis = match from {
                Some(_) => range.clone().log_scale().base(2.0),
                None => range.clone().log_scale(),
            };
            let mut chart = ChartBuilder::on(area)
                .margin(14)
                .x_label_area_size(48)
                .y_label_area_size(if i == 0 { label_width } else { 8 })
                .build_cartesian_2d(axis, -0.5f64..n as f64 - 0.5)?;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(if i == 0 { n } else { 0 })
                .y_label_formatter(&|v| {
                    // Rows sit at whole numbers; any other tick stays unlabelled.
                    let row = v.round();
                    if (v - row).abs() < 1e-6 && row >= 0.0 && row < n as f64 {
                        rows.get(n - 1 - row as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .label_style((FONT, LABEL_SIZE))
                .axis_desc_style((FONT, AXIS_TITLE_SIZE))
                .x_desc(panel.x_desc.as_str())
                .x_label_formatter(&|v| format_value(*v))
                .draw()?;
            let band = 0.8 / panel.series.len().max(1) as f64;
            let start = from.unwrap_or(range.start);
            for (k, s) in panel.series.iter().enumerate() {
                let c = color(s.color);
                // Rows run top to bottom in label order, series top to bottom in order.
                let bars: Vec<(f64, f64)> = s
                    .values
                    .iter()
                    .enumerate()
                    .filter_map(|(row, v)| {
                        let v = (*v).filter(|v| *v > 0.0 && v.is_finite())?;
                        Some((v, (n - 1 - row) as f64 + 0.4 - band * k as f64))
                    })
                    .collect();
                chart.draw_series(bars.iter().map(|&(v, top)| {
                    Rectangle::new(
                        [(start.min(v), top), (start.max(v), top - band * 0.85)],
                        c.filled(),
                    )
                }))?;
                if from.is_some() {
                    // Plotters draws text at about four fifths of the size asked for.
                    let size = (band * f64::from(row_height)).clamp(12.0, 15.0);
                    chart.draw_series(bars.iter().map(|&(v, top)| {
                        let (x, h) = if v >= start {
                            (v * 1.02, HPos::Left)
                        } else {
                            (v / 1.02, HPos::Right)
                        };
                        let style = TextStyle::from((FONT, size).into_font())
                            .color(&BLACK)
                            .pos(Pos::new(h, VPos::Center));
                        Text::new(format_value(v), (x, top - band * 0.425), style)
                    }))?;
                }
            }
            if let Some(base) = from {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(base, -0.5), (base, n as f64 - 0.5)],
                    BLACK.stroke_width(1),
                )))?;
            }
        }
        for (k, (name, c)) in legend.iter().enumerate() {
            let y = 24 + 24 * k as i32;
            key.draw(&Rectangle::new([(8, y), (22, y + 14)], color(*c).filled()))?;
            key.draw(&Text::new(
                name.to_string(),
                (30, y + 7),
                TextStyle::from((FONT, 16).into_font()).pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
        }
        Ok(())
    })
}

fn cell_ids(results: &[CellResult]) -> Vec<String> {
    results.iter().map(|r| r.cell.id.clone()).collect()
}

/// p50, p90, p99 and p99.9 of every cell; `unit` names what was timed ("round trip").
pub fn percentile_bars(results: &[CellResult], unit: &str) -> Result<String, String> {
    let pick = |f: fn(&ipc_matrix_results::LatencyStats) -> u64| {
        results
            .iter()
            .map(|r| r.latency_ns.as_ref().map(|l| f(l) as f64))
            .collect::<Vec<_>>()
    };
    let series = [
        ("p50".to_string(), pick(|l| l.p50)),
        ("p90".to_string(), pick(|l| l.p90)),
        ("p99".to_string(), pick(|l| l.p99)),
        ("p99.9".to_string(), pick(|l| l.p999)),
    ];
    grouped_bars(
        &format!("Percentiles of the {unit}"),
        &format!("{unit} (log scale)"),
        &cell_ids(results),
        &series,
        &|v| nanos(v as u64),
    )
}

/// Payload megabytes per second, request and reply counted.
pub fn throughput_bars(results: &[CellResult]) -> Result<String, String> {
    let series = [(
        "MB/s".to_string(),
        results
            .iter()
            .map(|r| r.throughput.map(|t| t.mb_per_s))
            .collect(),
    )];
    grouped_bars(
        "Throughput, request and reply counted",
        "MB/s (10^6 bytes per second, log scale)",
        &cell_ids(results),
        &series,
        &|v| number(v),
    )
}

/// Every round trip of one cell in run order, with the batch medians the verdict uses: a
/// drift, a periodic stall or a slow start shows here and nowhere else.
pub fn latency_over_index(
    result: &CellResult,
    baseline_p50: Option<u64>,
) -> Result<String, String> {
    let samples = &result.samples_ns;
    let bucket = samples.len().div_ceil(MAX_POINTS).max(1);
    let shown: Vec<(f64, f64)> = samples
        .chunks(bucket)
        .enumerate()
        .map(|(i, chunk)| {
            (
                (i * bucket) as f64,
                *chunk.iter().max().unwrap_or(&1) as f64,
            )
        })
        .collect();
    let batch = ipc_matrix_baseline::stats::batch_size(samples.len());
    let medians: Vec<(f64, f64)> = batch_medians(samples)
        .into_iter()
        .enumerate()
        .map(|(i, m)| ((i * batch + batch / 2) as f64, m as f64))
        .collect();
    let y_range = log_range(
        samples
            .iter()
            .map(|&v| v as f64)
            .chain(baseline_p50.map(|b| b as f64)),
    );
    let x_end = samples.len().max(1) as f64;
    svg(280, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!("{}: in order of the messages", result.cell.id),
                (FONT, 18),
            )
            .margin(10)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..x_end, y_range.log_scale())?;
        chart
            .configure_mesh()
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, AXIS_TITLE_SIZE))
            .x_desc("message index (warm-up excluded)")
            .y_desc("time (log scale)")
            .y_labels(6)
            .y_label_formatter(&|v| nanos(*v as u64))
            .x_label_formatter(&whole)
            .draw()?;
        let line = if bucket == 1 {
            "round trip".to_string()
        } else {
            format!("max of each {bucket}")
        };
        chart
            .draw_series(LineSeries::new(shown, color(4).stroke_width(1)))?
            .label(line)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color(4).stroke_width(1)));
        chart
            .draw_series(LineSeries::new(medians, color(5).stroke_width(2)))?
            .label(format!("median of each {batch}"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color(5).stroke_width(2)));
        if let Some(base) = baseline_p50 {
            let base = base as f64;
            chart
                .draw_series(DashedLineSeries::new(
                    [(0.0, base), (x_end, base)],
                    6,
                    4,
                    BLACK.stroke_width(2),
                ))?
                .label("baseline median")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2))
                });
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        Ok(())
    })
}

/// A tick label for a count: whole numbers only (a short run's axis has ticks between
/// its messages, which would read "0, 0, 1, 2, 2").
fn whole(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        String::new()
    }
}

/// Ticks of a ratio axis, labelled where the axis reaches them: finer near 1.0x, where
/// verdicts are decided.
const RATIO_TICKS: [f64; 15] = [
    0.1, 0.25, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0, 10.0, 100.0,
];

/// How wide the row labels of a chart must be.
fn label_width(rows: &[String]) -> u32 {
    let longest = rows.iter().map(|r| r.chars().count()).max().unwrap_or(0) as u32;
    (longest * 8 + 24).clamp(120, 440)
}

/// Median ratio to the baseline per cell, with its 95 % interval as a whisker and the
/// margin a change must clear as a shaded band. Colour says the verdict; a filled dot
/// gates, a hollow one only informs.
pub fn baseline_ratios(verdict: &RunVerdict) -> Result<String, String> {
    let judged: Vec<_> = verdict
        .cells
        .iter()
        .filter(|c| c.change.is_some())
        .collect();
    if judged.is_empty() {
        return Err("no cell has a baseline to compare with".into());
    }
    let changes: Vec<_> = judged.iter().filter_map(|c| c.change).collect();
    let high = changes
        .iter()
        .map(|c| c.ci_high.max(1.0 + c.margin))
        .fold(1.5, f64::max)
        * 1.1;
    let low = changes
        .iter()
        .map(|c| c.ci_low.min(1.0 / (1.0 + c.margin)))
        .fold(1.0 / 1.5, f64::min)
        / 1.1;
    let n = judged.len();
    let rows: Vec<String> = judged.iter().map(|c| c.cell_id.clone()).collect();
    let key_width = 190;
    let width = WIDTH + 200;
    svg_sized(width, 110 + 26 * n as u32, |root| {
        let titled = root.titled(
            "Median round trip vs baseline (ratio, 95 % interval)",
            (FONT, 20),
        )?;
        let (plot, key) = titled.split_horizontally(width - key_width);
        let mut chart = ChartBuilder::on(&plot)
            .margin(14)
            .x_label_area_size(72)
            .y_label_area_size(label_width(&rows))
            .build_cartesian_2d((low..high).log_scale(), -0.5f64..n as f64 - 0.5)?;
        let ticks: Vec<f64> = RATIO_TICKS
            .iter()
            .copied()
            .filter(|t| (low..=high).contains(t))
            .collect();
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(0)
            .x_label_formatter(&|_| String::new())
            .y_labels(n)
            .y_label_formatter(&|v| {
                let row = v.round();
                if (v - row).abs() < 1e-6 && row >= 0.0 && row < n as f64 {
                    rows.get(n - 1 - row as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, AXIS_TITLE_SIZE))
            .x_desc("current / baseline median (log scale; 1.00x = unchanged, right is slower)")
            .draw()?;
        // Ticks of our own: the default log ticks of this narrow range label only 1x and 2x.
        let grid = RGBColor(225, 225, 225);
        for &t in &ticks {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(t, -0.5), (t, n as f64 - 0.5)],
                grid.stroke_width(1),
            )))?;
        }
        // Labels at least 56 px apart, 1.00x first: a wide range keeps its coarse ticks.
        let bottom = chart.backend_coord(&(low, -0.5)).1;
        let mut labelled: Vec<i32> = Vec::new();
        let mut by_priority = ticks.clone();
        by_priority.sort_by(|a, b| {
            let rank = |t: f64| {
                (t.ln().abs() * 1000.0) as i64
                    * if [0.5, 1.0, 2.0, 10.0, 100.0, 0.1].contains(&t) {
                        1
                    } else {
                        1000
                    }
            };
            rank(*a).cmp(&rank(*b))
        });
        for t in by_priority {
            let (x, _) = chart.backend_coord(&(t, -0.5));
            if labelled.iter().any(|&l| (l - x).abs() < 56) {
                continue;
            }
            labelled.push(x);
            plot.draw(&Text::new(
                format!("{t:.2}x"),
                (x, bottom + 6),
                TextStyle::from((FONT, LABEL_SIZE).into_font())
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))?;
        }
        for (row, (cell, change)) in judged.iter().zip(&changes).enumerate() {
            let y = (n - 1 - row) as f64;
            chart.draw_series(std::iter::once(Rectangle::new(
                [
                    (1.0 / (1.0 + change.margin), y - 0.35),
                    (1.0 + change.margin, y + 0.35),
                ],
                RGBColor(210, 210, 210).filled(),
            )))?;
            let c = verdict_color(cell.verdict);
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(change.ci_low, y), (change.ci_high, y)],
                c.stroke_width(3),
            )))?;
            let dot = if cell.gating {
                c.filled()
            } else {
                c.stroke_width(2)
            };
            chart.draw_series(std::iter::once(Circle::new((change.ratio, y), 5, dot)))?;
        }
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(1.0, -0.5), (1.0, n as f64 - 0.5)],
            BLACK.stroke_width(1),
        )))?;
        // The key: what colour and fill mean.
        let text = |label: &str, y: i32| {
            Text::new(
                label.to_string(),
                (34, y),
                TextStyle::from((FONT, 16).into_font()).pos(Pos::new(HPos::Left, VPos::Center)),
            )
        };
        let mut y = 30;
        for v in [Verdict::Regressed, Verdict::Improved, Verdict::Unchanged] {
            key.draw(&Circle::new((16, y), 5, verdict_color(v).filled()))?;
            key.draw(&text(v.as_str(), y))?;
            y += 24;
        }
        key.draw(&Circle::new((16, y), 5, BLACK.stroke_width(2)))?;
        key.draw(&text("hollow: informational", y))?;
        y += 24;
        key.draw(&PathElement::new(
            vec![(8, y), (26, y)],
            BLACK.stroke_width(3),
        ))?;
        key.draw(&text("95 % interval", y))?;
        y += 24;
        key.draw(&Rectangle::new(
            [(8, y - 7), (26, y + 7)],
            RGBColor(210, 210, 210).filled(),
        ))?;
        key.draw(&text("margin", y))?;
        Ok(())
    })
}

fn verdict_color(verdict: Verdict) -> RGBColor {
    match verdict {
        Verdict::Regressed => RGBColor(213, 94, 0),
        Verdict::Improved => RGBColor(0, 158, 115),
        _ => RGBColor(0, 114, 178),
    }
}

/// Each cell's median over its floor's, as bars from 1.0x.
pub fn floor_ratios(floors: &[(&CellResult, Floor)]) -> Result<String, String> {
    let rows: Vec<String> = floors.iter().map(|(r, _)| r.cell.id.clone()).collect();
    let values = floors.iter().map(|(_, f)| f.ratio).collect();
    series_bars(
        "Cells over their floors",
        &rows,
        &[Panel {
            x_desc: "cell median / floor median (log scale; 1.00x = the machine's floor)".into(),
            series: vec![Series {
                name: "cell / floor".into(),
                color: 0,
                values,
            }],
        }],
        Some(1.0),
        &|v| format!("{v:.2}x"),
    )
}

/// A value per run, oldest first, as points joined where consecutive runs both have one,
/// over the baseline (dashed) and the band a change must leave to count (shaded).
pub fn trend(
    title: &str,
    y_desc: &str,
    runs: &[String],
    values: &[Option<f64>],
    band: Option<(f64, f64)>,
    format_value: &dyn Fn(f64) -> String,
) -> Result<String, String> {
    let present: Vec<(f64, f64)> = values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((i as f64, (*v).filter(|v| *v > 0.0)?)))
        .collect();
    if present.is_empty() {
        return Err("no run has a value".into());
    }
    let edges = band
        .map(|(base, margin)| [base / (1.0 + margin), base * (1.0 + margin)])
        .unwrap_or_default();
    let y_range = log_range(
        present
            .iter()
            .map(|p| p.1)
            .chain(edges.into_iter().filter(|v| *v > 0.0)),
    );
    let n = runs.len().max(1);
    svg(300, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(52)
            .y_label_area_size(90)
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, y_range.log_scale())?;
        chart
            .configure_mesh()
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, AXIS_TITLE_SIZE))
            .x_labels(n.min(12))
            .x_label_formatter(&|v| {
                let i = v.round();
                if (v - i).abs() < 1e-9 && i >= 0.0 {
                    runs.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc("run, oldest to newest (commit, or time)")
            .y_desc(y_desc)
            .y_labels(6)
            .y_label_formatter(&|v| format_value(*v))
            .draw()?;
        if let Some((base, margin)) = band {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [
                        (-0.5, base / (1.0 + margin)),
                        (n as f64 - 0.5, base * (1.0 + margin)),
                    ],
                    RGBColor(215, 215, 215).filled(),
                )))?
                .label("baseline band")
                .legend(|(x, y)| {
                    Rectangle::new(
                        [(x, y - 5), (x + 18, y + 5)],
                        RGBColor(215, 215, 215).filled(),
                    )
                });
            chart
                .draw_series(DashedLineSeries::new(
                    [(-0.5, base), (n as f64 - 0.5, base)],
                    6,
                    4,
                    BLACK.stroke_width(2),
                ))?
                .label("baseline")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2))
                });
        }
        // Joined only between neighbouring runs: a gap stays a gap.
        for pair in present.windows(2).filter(|w| w[1].0 - w[0].0 == 1.0) {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![pair[0], pair[1]],
                color(0).stroke_width(2),
            )))?;
        }
        chart
            .draw_series(PointSeries::of_element(
                present,
                4,
                color(0).filled(),
                &|p, s, st| Circle::new(p, s, st),
            ))?
            .label("each run")
            .legend(|(x, y)| Circle::new((x + 9, y), 4, color(0).filled()));
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        Ok(())
    })
}
