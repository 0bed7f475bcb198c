//! Chart primitives the pages draw with: the SVG canvas, the palette, fonts and log axes
//! of `plotters`, and the charts of plain rows and values (grouped bars, panels of bars, a
//! value per run).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::error::Error;

pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
pub(crate) type DrawResult = Result<(), Box<dyn Error>>;

/// Why a chart could not be drawn. Its text is what the page shows in the chart's place
/// ("Plot not drawn (caption): text"), so each variant displays only its reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChartError {
    /// `plotters` failed while drawing (its SVG backend, a layout, a series): its error's
    /// text.
    #[error("{0}")]
    Draw(String),
    /// The data holds nothing the chart could show; says what is missing ("no values to
    /// draw").
    #[error("{0}")]
    NothingToDraw(&'static str),
}

impl ChartError {
    fn draw(error: impl std::fmt::Display) -> Self {
        Self::Draw(error.to_string())
    }
}

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
pub(crate) const FONT: &str = "sans-serif";
/// Tick labels and axis titles; plotters draws text at about four fifths of the size
/// asked for, so these read as 12 and 13 px.
pub(crate) const LABEL_SIZE: u32 = 15;
pub(crate) const AXIS_TITLE_SIZE: u32 = 16;
pub(crate) const WIDTH: u32 = 900;

pub(crate) fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// Runs `draw` on a fresh SVG canvas and returns the SVG text.
pub(crate) fn svg(
    height: u32,
    draw: impl FnOnce(&Area) -> DrawResult,
) -> Result<String, ChartError> {
    svg_sized(WIDTH, height, draw)
}

pub(crate) fn svg_sized(
    width: u32,
    height: u32,
    draw: impl FnOnce(&Area) -> DrawResult,
) -> Result<String, ChartError> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(ChartError::draw)?;
        draw(&root).map_err(ChartError::draw)?;
        root.present().map_err(ChartError::draw)?;
    }
    Ok(out)
}

/// The series legend, boxed, where it hides the least.
pub(crate) fn legend<'a, X: Ranged, Y: Ranged>(
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
pub(crate) fn log_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (low, high) = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if low > high {
        return 1.0..10.0;
    }
    low / 2.0..high * 2.0
}

/// Horizontal grouped bars: one row per label, one bar per series, on a log axis.
pub fn grouped_bars(
    title: &str,
    x_desc: &str,
    rows: &[String],
    series: &[(String, Vec<Option<f64>>)],
    format_value: &dyn Fn(f64) -> String,
) -> Result<String, ChartError> {
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
) -> Result<String, ChartError> {
    let ranges = panels
        .iter()
        .map(|p| panel_range(&p.series, from))
        .collect::<Option<Vec<_>>>()
        .ok_or(ChartError::NothingToDraw("no values to draw"))?;
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

/// How wide the row labels of a chart must be.
pub(crate) fn label_width(rows: &[String]) -> u32 {
    let longest = rows.iter().map(|r| r.chars().count()).max().unwrap_or(0) as u32;
    (longest * 8 + 24).clamp(120, 440)
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
) -> Result<String, ChartError> {
    let present: Vec<(f64, f64)> = values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((i as f64, (*v).filter(|v| *v > 0.0)?)))
        .collect();
    if present.is_empty() {
        return Err(ChartError::NothingToDraw("no run has a value"));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_error_shows_only_its_reason() {
        assert_eq!(
            ChartError::NothingToDraw("no values to draw").to_string(),
            "no values to draw"
        );
        assert_eq!(
            ChartError::Draw("backend failed".into()).to_string(),
            "backend failed"
        );
    }

    #[test]
    fn a_failed_drawing_keeps_the_text_of_its_error() {
        let drawn = svg(100, |_| Err("the layout does not fit".into()));
        assert_eq!(
            drawn,
            Err(ChartError::Draw("the layout does not fit".into()))
        );
    }

    #[test]
    fn charts_without_values_are_not_drawn() {
        let none = &|v: f64| v.to_string();
        let runs = ["a".to_string(), "b".to_string()];
        assert_eq!(
            trend("t", "y", &runs, &[None, Some(0.0)], None, none),
            Err(ChartError::NothingToDraw("no run has a value"))
        );
        let panel = Panel {
            x_desc: "x".into(),
            series: vec![Series {
                name: "s".into(),
                color: 0,
                values: vec![None, None],
            }],
        };
        assert_eq!(
            series_bars("t", &runs, &[panel], None, none),
            Err(ChartError::NothingToDraw("no values to draw"))
        );
    }
}
