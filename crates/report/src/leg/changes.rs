//! What changed in a run, in the order a reviewer reads it: failures, regressions,
//! improvements, then everything else (folded by both report formats). Notes that repeat
//! across cells are grouped, so nineteen "the machine changed" lines read as one.

use super::model::LegReport;
use ipc_matrix_baseline::{CellVerdict, Verdict};
use ipc_matrix_results::CellResult;

/// One cell of the run with its verdict.
pub type Row<'a> = (&'a CellResult, &'a CellVerdict);

/// The run's cells, sorted by what happened to them. A cell appears in one list only:
/// failed before regressed (in time or instructions) before improved before the rest.
#[derive(Default)]
pub struct Changes<'a> {
    pub failed: Vec<Row<'a>>,
    pub regressed: Vec<Row<'a>>,
    pub improved: Vec<Row<'a>>,
    /// Unchanged and new cells: shown folded.
    pub rest: Vec<Row<'a>>,
}

impl<'a> Changes<'a> {
    pub fn of(report: &'a LegReport) -> Self {
        let mut changes = Changes::default();
        for row in report.results.iter().zip(&report.verdict.cells) {
            let (_, cell) = row;
            let instructions = cell.instructions.as_ref().map(|i| i.verdict);
            let list = if cell.verdict == Verdict::Failed {
                &mut changes.failed
            } else if cell.verdict == Verdict::Regressed
                || instructions == Some(Verdict::Regressed)
                || cell.count_missing()
            {
                &mut changes.regressed
            } else if cell.verdict == Verdict::Improved || instructions == Some(Verdict::Improved) {
                &mut changes.improved
            } else {
                &mut changes.rest
            };
            list.push(row);
        }
        // What fails the run first, what only informs after it.
        changes
            .regressed
            .sort_by_key(|(_, cell)| !gates(cell, Verdict::Regressed));
        changes
            .improved
            .sort_by_key(|(_, cell)| !gates(cell, Verdict::Improved));
        changes
    }

    /// The regressions that gate (in time where timing gates, in instructions, or a
    /// count missing where the baseline has one), in report order.
    pub fn gating_regressions(&self) -> impl Iterator<Item = &Row<'a>> {
        self.regressed
            .iter()
            .filter(|(_, cell)| gates(cell, Verdict::Regressed))
    }

    /// Nothing failed, regressed or improved.
    pub fn is_quiet(&self) -> bool {
        self.failed.is_empty() && self.regressed.is_empty() && self.improved.is_empty()
    }
}

/// Whether a cell's timing or instruction verdict (the one it is listed for) gates.
pub fn gates(cell: &CellVerdict, verdict: Verdict) -> bool {
    let timing = cell.verdict == verdict && cell.gating;
    let counted = cell
        .instructions
        .as_ref()
        .is_some_and(|i| i.verdict == verdict && i.gating);
    let missing = verdict == Verdict::Regressed && cell.count_missing();
    timing || counted || missing
}

/// One line per gating regression, for the top of a report: the cell and what
/// regressed (`instructions 1.021x`, `time 1.30x`, `not counted: ...`).
pub fn gating_lines(changes: &Changes) -> Vec<(String, String)> {
    changes
        .gating_regressions()
        .map(|(_, cell)| {
            let mut what = Vec::new();
            if cell.gating && cell.verdict == Verdict::Regressed {
                if let Some(change) = cell.change {
                    what.push(format!("time {:.2}x", change.ratio));
                }
            }
            if let Some(i) = cell
                .instructions
                .as_ref()
                .filter(|i| i.gating && i.verdict == Verdict::Regressed)
            {
                what.push(format!("instructions {:.3}x", i.ratio.unwrap_or(1.0)));
            }
            if let Some(why) = &cell.uncounted {
                what.push(why.clone());
            }
            (cell.cell_id.clone(), what.join("; "))
        })
        .collect()
}

/// Notes of the same kind on several cells, said once with the cells that share it.
#[derive(Debug, Clone, PartialEq)]
pub struct NoteGroup {
    /// What the notes say, up to their first colon ("the machine changed"), or the note
    /// itself when every cell's reads the same.
    pub what: String,
    /// Each cell with its own note, in run order.
    pub cells: Vec<(String, String)>,
}

/// The run's notes (verdict notes and baseline cells the run did not produce), grouped by
/// kind in order of first appearance.
pub fn note_groups(report: &LegReport) -> Vec<NoteGroup> {
    let verdict = &report.verdict;
    let notes = verdict
        .cells
        .iter()
        .flat_map(|c| c.notes.iter().map(move |n| (c.cell_id.clone(), n.clone())))
        .chain(
            verdict
                .not_run
                .iter()
                .map(|id| (id.clone(), NOT_RUN.to_string())),
        );
    let mut groups: Vec<NoteGroup> = Vec::new();
    for (id, note) in notes {
        let what = note_kind(&note);
        match groups.iter_mut().find(|g| g.what == what) {
            Some(group) => group.cells.push((id, note)),
            None => groups.push(NoteGroup {
                what,
                cells: vec![(id, note)],
            }),
        }
    }
    groups
}

pub const NOT_RUN: &str = "in the baseline, not in this run";

/// A note's kind: the words before its first colon, or the note with its numbers
/// replaced, so that notes differing only in a measurement fall together.
fn note_kind(note: &str) -> String {
    if let Some((head, _)) = note.split_once(": ") {
        return head.to_string();
    }
    let mut kind = String::with_capacity(note.len());
    let mut in_number = false;
    for ch in note.chars() {
        if ch.is_ascii_digit() || (in_number && ch == '.') {
            if !in_number {
                kind.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            kind.push(ch);
        }
    }
    kind
}

/// Characters of [`interval_strip`] between its two ends.
const STRIP: usize = 25;
/// The strip spans 1/SPAN ..= SPAN on a log scale.
const SPAN: f64 = 2.0;

/// A text plot of a ratio to the baseline for tables that cannot hold images (the job
/// summary): the axis runs from 0.5x to 2x on a log scale, `|` marks 1.0x, `░` the margin a
/// change must clear, `━` the 95 % interval and `●` the estimate; `<` or `>`
/// beside an end means the interval runs past it.
///
/// `0.5x ─────░░│░░──━━━●━━─── 2x` (the spaces are no-break spaces)
pub fn interval_strip(ratio: f64, low: f64, high: f64, margin: f64) -> String {
    let position = |r: f64| {
        let t = (r.max(1e-9).ln() / SPAN.ln() + 1.0) / 2.0;
        (t * (STRIP - 1) as f64)
            .round()
            .clamp(0.0, (STRIP - 1) as f64) as usize
    };
    let mut strip = vec!['─'; STRIP];
    let (band_low, band_high) = (position(1.0 / (1.0 + margin)), position(1.0 + margin));
    for c in &mut strip[band_low..=band_high] {
        *c = '░';
    }
    strip[position(1.0)] = '│';
    let (from, to) = (position(low), position(high));
    for c in &mut strip[from..=to] {
        *c = '━';
    }
    strip[position(ratio)] = '●';
    // No-break spaces: the strip stays one line in a narrow table column.
    let before = if low < 1.0 / SPAN { '<' } else { '\u{a0}' };
    let after = if high > SPAN { '>' } else { '\u{a0}' };
    format!(
        "0.5x{before}{}{after}2x",
        strip.into_iter().collect::<String>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_that_differ_only_in_their_numbers_are_one_kind() {
        assert_eq!(
            note_kind("the machine changed: a cache line took 295 ns after this cell"),
            "the machine changed"
        );
        assert_eq!(
            note_kind("peer did 10 units of extra work per reply on purpose"),
            note_kind("peer did 2.5 units of extra work per reply on purpose"),
        );
        assert_ne!(
            note_kind("peer did 10 units of extra work per reply on purpose"),
            note_kind("peer slowed by 10 us per reply on purpose"),
        );
    }

    #[test]
    fn the_strip_puts_the_estimate_where_its_ratio_is() {
        let unchanged = interval_strip(1.0, 0.97, 1.03, 0.1);
        let slower = interval_strip(1.5, 1.4, 1.6, 0.1);
        let faster = interval_strip(0.7, 0.65, 0.75, 0.1);
        let dot = |s: &str| s.chars().position(|c| c == '●').unwrap();
        assert!(dot(&faster) < dot(&unchanged), "{faster} / {unchanged}");
        assert!(dot(&unchanged) < dot(&slower), "{unchanged} / {slower}");
        assert!(slower.contains('━') && slower.contains('░') && slower.contains('│'));
        assert!(interval_strip(3.0, 2.5, 3.5, 0.1).ends_with("●>2x"));
        assert!(interval_strip(0.3, 0.2, 0.4, 0.1).starts_with("0.5x<●"));
        assert!(!unchanged.contains('<') && !unchanged.contains('>'));
        assert_eq!(
            unchanged.chars().count(),
            interval_strip(1.9, 1.1, 1.95, 0.5).chars().count()
        );
    }
}
