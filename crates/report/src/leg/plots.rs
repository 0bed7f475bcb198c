//! The report's plots, drawn with `plotters` into SVG strings that the HTML report inlines
//! (so the page opens offline). Latencies use log axes: a 300 ns shared-memory echo and a
//! 2 ms megabyte echo share a chart and both stay readable.

use super::model::transport_label;
use crate::render::charts::{
    color, grouped_bars, label_width, legend, log_range, series_bars, svg, svg_sized, ChartError,
    Panel, Series, AXIS_TITLE_SIZE, FONT, LABEL_SIZE, WIDTH,
};
use crate::units::{bytes, nanos, number};
use ipc_matrix_baseline::{stats::batch_medians, RunVerdict, Verdict};
use ipc_matrix_results::{CellResult, Floor};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Round trips drawn per latency-over-index plot; longer runs are shown as per-bucket
/// maxima (the page holds one such plot per cell, so each is kept small).
const MAX_POINTS: usize = 800;

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
pub fn round_trip_vs_payload(results: &[CellResult]) -> Result<String, ChartError> {
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

fn cell_ids(results: &[CellResult]) -> Vec<String> {
    results.iter().map(|r| r.cell.id.clone()).collect()
}

/// p50, p90, p99 and p99.9 of every cell; `unit` names what was timed ("round trip").
pub fn percentile_bars(results: &[CellResult], unit: &str) -> Result<String, ChartError> {
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
pub fn throughput_bars(results: &[CellResult]) -> Result<String, ChartError> {
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
) -> Result<String, ChartError> {
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

/// Median ratio to the baseline per cell, with its 95 % interval as a whisker and the
/// margin a change must clear as a shaded band. Colour says the verdict; a filled dot
/// gates, a hollow one only informs.
pub fn baseline_ratios(verdict: &RunVerdict) -> Result<String, ChartError> {
    let judged: Vec<_> = verdict
        .cells
        .iter()
        .filter(|c| c.change.is_some())
        .collect();
    if judged.is_empty() {
        return Err(ChartError::NothingToDraw(
            "no cell has a baseline to compare with",
        ));
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
pub fn floor_ratios(floors: &[(&CellResult, Floor)]) -> Result<String, ChartError> {
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
