//! The comparison's model: the legs as columns in architecture order, the counted legs,
//! the tables of counts and timings, and what both formats say of them.

use crate::units::{instructions, nanos};
use ipc_matrix_results::{CellResult, InstructionCounts};

/// The architectures, in the order their columns are shown.
pub const ARCHITECTURES: [&str; 6] = ["x86_64", "aarch64", "s390x", "armv7", "riscv64", "ppc64le"];

/// The architecture of a target triple as the columns name it: `x86_64`,
/// `armv7` (`armv7-unknown-linux-gnueabihf`), `riscv64` (`riscv64gc-...`), `ppc64le`
/// (`powerpc64le-...`); another triple's first part.
pub fn architecture(triple: &str) -> String {
    let first = triple.split('-').next().unwrap_or(triple);
    [
        ("x86_64", "x86_64"),
        ("aarch64", "aarch64"),
        ("s390x", "s390x"),
        ("armv7", "armv7"),
        ("riscv64", "riscv64"),
        ("powerpc64le", "ppc64le"),
        ("ppc64le", "ppc64le"),
    ]
    .iter()
    .find(|(prefix, _)| first.starts_with(prefix))
    .map_or_else(|| first.to_string(), |(_, arch)| arch.to_string())
}

/// One leg's results, named by its leg and profile.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub runner: String,
    pub results: Vec<CellResult>,
}

impl Column {
    /// The architecture of the target its results were built for (without results, of
    /// the leg its name starts with).
    pub fn architecture(&self) -> String {
        match self.results.first() {
            Some(r) => architecture(&r.environment.target_triple),
            None => architecture(self.name.split('@').next().unwrap_or(&self.name)),
        }
    }

    /// The leg ran under an emulator: its runner (or a result's) is not `native`, or a
    /// result's leg is `<triple>@qemu` (also the count pass of a native leg). Its timings
    /// then measure the emulator on its host, not the CPU.
    pub fn emulated(&self) -> bool {
        self.runner != "native"
            || self
                .results
                .iter()
                .any(|r| r.environment.runner != "native" || r.leg.ends_with("@qemu"))
    }

    fn passed(&self, id: &str) -> Option<&CellResult> {
        self.results
            .iter()
            .find(|r| r.cell.id == id && r.outcome.passed)
    }

    pub(super) fn p50(&self, id: &str) -> Option<u64> {
        self.passed(id)?.latency_ns.map(|l| l.p50)
    }

    pub(super) fn counts(&self, id: &str) -> Option<&InstructionCounts> {
        self.passed(id)?.instructions.as_ref()
    }

    /// The emulated CPU models its counts were made on (`QEMU_CPU`), in first-seen order.
    fn cpu_models(&self) -> Vec<String> {
        let mut models: Vec<String> = Vec::new();
        for r in &self.results {
            if let Some(model) = r.instructions.as_ref().and_then(|i| i.cpu_model.clone()) {
                if !models.contains(&model) {
                    models.push(model);
                }
            }
        }
        models
    }
}

/// The columns in the order of [`ARCHITECTURES`] (other architectures after them), a
/// native leg before an emulated one of the same architecture, otherwise as given.
pub fn arranged(columns: &[Column]) -> Vec<&Column> {
    let rank = |c: &Column| {
        let arch = c.architecture();
        let known = ARCHITECTURES.iter().position(|a| *a == arch);
        (known.unwrap_or(ARCHITECTURES.len()), c.emulated())
    };
    let mut sorted: Vec<&Column> = columns.iter().collect();
    sorted.sort_by_key(|c| rank(c));
    sorted
}

/// Every cell id that any leg has, with its scenario: scenarios in first-seen order, and
/// cells in first-seen order within each.
pub(super) fn cell_ids(columns: &[&Column]) -> Vec<(String, String)> {
    let mut ids: Vec<(String, String)> = Vec::new();
    for column in columns {
        for r in &column.results {
            if !ids.iter().any(|(_, id)| *id == r.cell.id) {
                ids.push((r.cell.scenario.clone(), r.cell.id.clone()));
            }
        }
    }
    let mut scenarios: Vec<String> = Vec::new();
    for (scenario, _) in &ids {
        if !scenarios.contains(scenario) {
            scenarios.push(scenario.clone());
        }
    }
    ids.sort_by_key(|(scenario, _)| scenarios.iter().position(|s| s == scenario));
    ids
}

/// A leg with instruction counts: its column, its short header (the architecture, or the
/// leg's name when two counted legs share one), the CPU model QEMU emulated, and its
/// colour in the charts.
pub(super) struct Counted<'a> {
    pub(super) column: &'a Column,
    pub(super) label: String,
    pub(super) cpu: String,
    pub(super) color: usize,
}

pub(super) fn counted<'a>(columns: &[&'a Column]) -> Vec<Counted<'a>> {
    let with_counts: Vec<&Column> = columns
        .iter()
        .copied()
        .filter(|c| c.results.iter().any(|r| r.instructions.is_some()))
        .collect();
    let arches: Vec<String> = with_counts.iter().map(|c| c.architecture()).collect();
    with_counts
        .iter()
        .zip(&arches)
        .enumerate()
        .map(|(color, (column, arch))| {
            let shared = arches.iter().filter(|a| *a == arch).count() > 1;
            let models = column.cpu_models();
            Counted {
                column,
                label: if shared {
                    column.name.clone()
                } else {
                    arch.clone()
                },
                cpu: if models.is_empty() {
                    "CPU model not recorded".into()
                } else {
                    models.join(" / ")
                },
                color,
            }
        })
        .collect()
}

/// What one instruction column counts.
#[derive(Debug, Clone, Copy)]
pub(super) enum Part {
    Measuring,
    Peer,
    Encode,
    Decode,
}

impl Part {
    pub(super) fn name(self) -> &'static str {
        match self {
            Part::Measuring => "measuring",
            Part::Peer => "peer",
            Part::Encode => "encode",
            Part::Decode => "decode",
        }
    }

    pub(super) fn value(self, counts: &InstructionCounts) -> Option<f64> {
        match self {
            Part::Measuring => counts.measuring,
            Part::Peer => counts.peer,
            Part::Encode => counts.encode,
            Part::Decode => counts.decode,
        }
    }

    /// The round-trip windows of a cell whose count depends on timing only inform; the
    /// encoding and decoding windows hold no wait and no read, so they never do.
    fn informs(self, counts: &InstructionCounts) -> bool {
        counts.timing_dependent && matches!(self, Part::Measuring | Part::Peer)
    }
}

/// The mark of a count that depends on timing (it informs only).
pub(super) const INFORMS: &str = "†";

/// One table of counts: per cell, per counted leg, one column per part.
pub(super) struct Grid {
    pub(super) parts: [Part; 2],
    pub(super) rows: Vec<GridRow>,
}

pub(super) struct GridRow {
    pub(super) scenario: String,
    pub(super) id: String,
    /// Per leg, per part: the count, and whether it only informs.
    pub(super) values: Vec<Option<(f64, bool)>>,
}

impl GridRow {
    pub(super) fn text(value: &Option<(f64, bool)>) -> String {
        match value {
            Some((n, false)) => instructions(*n),
            Some((n, true)) => format!("{}{INFORMS}", instructions(*n)),
            None => "-".into(),
        }
    }
}

/// The rows of the cells with a count of `parts` on some leg.
pub(super) fn grid(legs: &[Counted], ids: &[(String, String)], parts: [Part; 2]) -> Grid {
    let rows = ids
        .iter()
        .filter_map(|(scenario, id)| {
            let values: Vec<Option<(f64, bool)>> = legs
                .iter()
                .flat_map(|leg| {
                    let counts = leg.column.counts(id);
                    parts.map(|part| counts.and_then(|c| Some((part.value(c)?, part.informs(c)))))
                })
                .collect();
            values.iter().any(Option::is_some).then(|| GridRow {
                scenario: scenario.clone(),
                id: id.clone(),
                values,
            })
        })
        .collect();
    Grid { parts, rows }
}

pub(super) fn informs_anywhere(grid: &Grid) -> bool {
    grid.rows
        .iter()
        .any(|r| r.values.iter().any(|v| matches!(v, Some((_, true)))))
}

/// What the counted columns are: `x86_64 on Nehalem-v1 (<leg>), aarch64 on ...`, the
/// legs' names in code spans when `code`.
pub(super) fn counted_legs_text(legs: &[Counted], code: bool) -> String {
    legs.iter()
        .map(|leg| {
            let (open, close) = if code { ("`", "`") } else { ("", "") };
            if leg.label == leg.column.name {
                format!("{open}{}{close} on {}", leg.label, leg.cpu)
            } else {
                format!(
                    "{} on {} ({open}{}{close})",
                    leg.label, leg.cpu, leg.column.name
                )
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) const COUNTS_NOTE: &str = "Guest instructions per round trip, measuring side and peer, counted under QEMU on one fixed emulated CPU per architecture. A count depends on the code, the compilers, the emulated CPU model, the emulator and the C library the guest ran, each recorded with it, and on nothing else: not on where the checkout, matrix.yaml or TMPDIR lie, the environment, the machine's speed or its load (a cell whose count moved at all under those, by more than 0.0001 %, when its baseline was made only informs). The count legs (`<arch>-unknown-linux-musl@qemu`) take none of these from the host: a static build against musl, compiled by zig, the same bytes wherever it is built, under the pinned QEMU, so they count the same on every machine. A count made with another compiler, emulator or C library than its baseline's only informs. Instruction sets differ (s390x moves 256 bytes in one instruction): read how a cell's count moves between architectures, not a count as a speed.";
pub(super) const INFORMS_NOTE: &str = "depends on timing (a busy-poll wait, UDP, a delayed peer, a stream message of 64 KiB or more) and only informs.";
pub(super) const CODEC_NOTE: &str = "The measuring side's encoding of one frame and decoding of one reply, each a window of its own inside the round trip: a codec that costs one CPU far more than the others shows here.";
pub(super) const EMULATED_NOTE: &str = "emulated, not a CPU measure: their round trips measure the emulator on the host that ran it, so they are never compared";

/// The legs whose timings are compared: native ones.
pub(super) fn native<'a>(columns: &[&'a Column]) -> Vec<&'a Column> {
    columns.iter().copied().filter(|c| !c.emulated()).collect()
}

pub(super) fn emulated<'a>(columns: &[&'a Column]) -> Vec<&'a Column> {
    columns.iter().copied().filter(|c| c.emulated()).collect()
}

/// Native legs' medians, each after the first with its ratio to the first.
pub(super) fn native_table(
    native: &[&Column],
    ids: &[(String, String)],
) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header = vec!["cell".to_string()];
    for (i, c) in native.iter().enumerate() {
        header.push(format!("{} p50", c.name));
        if i > 0 {
            header.push("ratio".into());
        }
    }
    let rows = ids
        .iter()
        .map(|(_, id)| {
            let first = native.first().and_then(|c| c.p50(id));
            let mut row = vec![id.clone()];
            for (i, column) in native.iter().enumerate() {
                let value = column.p50(id);
                row.push(value.map_or_else(|| "-".into(), nanos));
                if i > 0 {
                    row.push(match (first, value) {
                        (Some(a), Some(b)) if a > 0 => format!("{:.2}x", b as f64 / a as f64),
                        _ => "-".into(),
                    });
                }
            }
            row
        })
        .collect();
    (header, rows)
}

/// Emulated legs' medians, labelled, without ratios.
pub(super) fn emulated_table(
    emulated: &[&Column],
    ids: &[(String, String)],
) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header = vec!["cell".to_string()];
    header.extend(
        emulated
            .iter()
            .map(|c| format!("{} p50 (emulated, not a CPU measure)", c.name)),
    );
    let rows = ids
        .iter()
        .map(|(_, id)| {
            std::iter::once(id.clone())
                .chain(
                    emulated
                        .iter()
                        .map(|c| c.p50(id).map_or_else(|| "-".into(), nanos)),
                )
                .collect()
        })
        .collect();
    (header, rows)
}

pub(super) fn native_note(native: &[&Column]) -> String {
    match native {
        [] => String::new(),
        [only] => format!(
            "Median round trip per cell on {} (the one native leg: no ratio).",
            only.name
        ),
        [first, ..] => format!(
            "Median round trip per cell; each ratio is to {} (2.00x: twice as slow).",
            first.name
        ),
    }
}

pub(super) fn names(columns: &[&Column]) -> String {
    columns
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
