//! Baseline files: `baselines/<triple>@<runner>/<profile>.json`, committed, one per leg and
//! profile. A baseline keeps, per cell, the batch medians of an accepted run (the samples a
//! later run is compared with) and the headline figures for people reading the diff.
//!
//! Timings are compared statistically (see [`crate::verdict`]), never as exact text: a
//! snapshot tool that compares strings would flag every run.

use crate::machine::same_machine_state;
use crate::stats::{batch_medians, batch_size, median, relative_spread};
use ipc_matrix_results::InstructionCounts;
use ipc_matrix_results::{CellResult, Environment, Placement};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Bump on any change a reader of an older file would misread.
pub const BASELINE_FORMAT_VERSION: u32 = 1;
/// Accepted runs kept per cell; the oldest is dropped first.
pub const MAX_RUNS: usize = 5;
/// At most this many batch medians per accepted run: a result keeps at most 100,000
/// round trips, and batches hold at least 10 (about 30 batches is usual).
pub const MAX_BATCHES: usize = 10_000;
/// At most this many cells per baseline (a profile expands into at most 10,000).
pub const MAX_CELLS: usize = 10_000;
/// A baseline file larger than this is refused before it is parsed.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub format_version: u32,
    /// `<triple>@<runner>`.
    pub leg: String,
    pub profile: String,
    /// When a run was last accepted.
    pub accepted_at_unix: u64,
    /// The machine and build the accepted run came from.
    pub environment: Environment,
    /// Keyed by cell id.
    pub cells: BTreeMap<String, BaselineCell>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineCell {
    pub payload_bytes: u64,
    pub placement: Placement,
    /// The accepted runs of this cell, oldest first, at most [`MAX_RUNS`]. More than one
    /// run shows how far unchanged code moves from run to run on this machine.
    pub runs: Vec<BaselineRun>,
}

/// One accepted run of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineRun {
    pub accepted_at_unix: u64,
    /// Round trips per batch.
    pub batch_size: usize,
    /// The median round trip of each batch, in run order, nanoseconds.
    pub batch_medians_ns: Vec<u64>,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub throughput_mb_per_s: Option<f64>,
    /// The machine probe taken before the cell (see the results' `core_to_core_ns`).
    pub core_to_core_ns: Option<u64>,
    /// The cell's CPU pressure (see the results' `cpu_pressure`).
    #[serde(default)]
    pub cpu_pressure: Option<f64>,
    /// Guest instructions per round trip counted under QEMU (see the results'
    /// `instructions`): judged with a margin of its own, and gating on every leg.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<InstructionCounts>,
}

impl BaselineCell {
    /// The accepted runs taken while the machine was in its usual state: those whose
    /// probe is within [`crate::MACHINE_CHANGE_LIMIT`] of the median probe (runs without a probe
    /// count as usual). A run taken while the host had moved the CPUs says nothing about
    /// this cell's own noise, and would only blur its centre.
    pub fn typical_runs(&self) -> Vec<&BaselineRun> {
        let usual = self.core_to_core_ns();
        self.runs
            .iter()
            .filter(|r| match (r.core_to_core_ns, usual) {
                (Some(probe), Some(usual)) => same_machine_state(probe, usual),
                _ => true,
            })
            .collect()
    }

    /// The batch medians of the typical accepted runs together: the sample a run is
    /// compared with.
    pub fn pooled_batch_medians(&self) -> Vec<u64> {
        self.typical_runs()
            .into_iter()
            .flat_map(|r| r.batch_medians_ns.iter().copied())
            .collect()
    }

    /// The median of the pooled batch medians.
    pub fn median_ns(&self) -> u64 {
        median(&self.pooled_batch_medians())
    }

    /// The median machine probe of the accepted runs that have one.
    pub fn core_to_core_ns(&self) -> Option<u64> {
        let probes: Vec<u64> = self.runs.iter().filter_map(|r| r.core_to_core_ns).collect();
        (!probes.is_empty()).then(|| median(&probes))
    }

    /// The median CPU pressure of the typical accepted runs: what the cell itself causes
    /// (a fan cell runs three processes on two CPUs, say).
    pub fn cpu_pressure(&self) -> Option<f64> {
        let mut shares: Vec<f64> = self
            .typical_runs()
            .iter()
            .filter_map(|r| r.cpu_pressure)
            .collect();
        shares.sort_by(f64::total_cmp);
        shares.get(shares.len() / 2).copied()
    }

    /// The largest relative interquartile spread of one accepted run's batch medians:
    /// how noisy the cell is within a run.
    pub fn within_run_spread(&self) -> f64 {
        self.typical_runs()
            .into_iter()
            .map(|r| relative_spread(&r.batch_medians_ns))
            .fold(0.0, f64::max)
    }

    /// Three standard deviations of the run-to-run movement of this cell's median,
    /// relative to it: sigma is estimated from the range of the accepted runs as R / d2,
    /// with Shewhart's control-chart constant d2 for that many runs (1.128 for 2, 1.693
    /// for 3, 2.059 for 4, 2.326 for 5). 0 for a single run, which shows no such movement.
    pub fn run_to_run_noise(&self) -> f64 {
        const D2: [f64; 4] = [1.128, 1.693, 2.059, 2.326];
        match self.typical_runs().len() {
            0 | 1 => 0.0,
            n => 3.0 * self.run_to_run_spread() / D2[(n - 2).min(D2.len() - 1)],
        }
    }

    /// How far apart the typical accepted runs' medians are: slowest / fastest - 1 (0 for one run).
    pub fn run_to_run_spread(&self) -> f64 {
        let medians: Vec<u64> = self
            .typical_runs()
            .into_iter()
            .map(|r| median(&r.batch_medians_ns))
            .collect();
        let (low, high) = (medians.iter().min(), medians.iter().max());
        match (low, high) {
            (Some(&low), Some(&high)) if low > 0 => high as f64 / low as f64 - 1.0,
            _ => 0.0,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a baseline file: {reason}")]
    Malformed { path: PathBuf, reason: String },
    #[error("{path}: baseline format {found}, this ipc-matrix reads {BASELINE_FORMAT_VERSION}; accept a new baseline (`ipc-matrix baseline accept`)")]
    Version { path: PathBuf, found: u64 },
}

/// `<baselines>/<leg>/<profile>.json`.
pub fn baseline_path(baselines: &Path, leg: &str, profile: &str) -> PathBuf {
    baselines.join(leg).join(format!("{profile}.json"))
}

impl Baseline {
    /// A baseline made of the passing, timed cells of one run. Failed cells and cells
    /// from an unoptimized build have no timings worth keeping and are left out.
    pub fn from_results(results: &[CellResult], accepted_at_unix: u64) -> Option<Self> {
        let first = results.first()?;
        let mut baseline = Self {
            format_version: BASELINE_FORMAT_VERSION,
            leg: first.leg.clone(),
            profile: first.cell.profile.clone(),
            accepted_at_unix,
            environment: first.environment.clone(),
            cells: BTreeMap::new(),
        };
        baseline.add_run(results, accepted_at_unix);
        Some(baseline)
    }

    /// Adds one more run of each passing, timed cell (a cell pinned differently starts
    /// afresh), keeping the last [`MAX_RUNS`] runs per cell.
    pub fn add_run(&mut self, results: &[CellResult], accepted_at_unix: u64) {
        self.accepted_at_unix = accepted_at_unix;
        for r in results
            .iter()
            .filter(|r| r.outcome.passed && !r.samples_ns.is_empty())
        {
            let run = BaselineRun {
                accepted_at_unix,
                batch_size: batch_size(r.samples_ns.len()),
                batch_medians_ns: batch_medians(&r.samples_ns),
                p50_ns: r.latency_ns.map_or(0, |l| l.p50),
                p99_ns: r.latency_ns.map_or(0, |l| l.p99),
                throughput_mb_per_s: r.throughput.map(|t| t.mb_per_s),
                core_to_core_ns: r.core_to_core_ns,
                cpu_pressure: r.cpu_pressure,
                instructions: r.instructions.clone(),
            };
            let fresh = BaselineCell {
                payload_bytes: r.cell.payload_bytes,
                placement: r.placement,
                runs: Vec::new(),
            };
            let cell = self
                .cells
                .entry(r.cell.id.clone())
                .or_insert_with(|| fresh.clone());
            if cell.placement != r.placement || cell.payload_bytes != r.cell.payload_bytes {
                *cell = fresh;
            }
            cell.runs.push(run);
            let excess = cell.runs.len().saturating_sub(MAX_RUNS);
            cell.runs.drain(..excess);
        }
    }

    /// Reads a baseline; `Ok(None)` when there is none yet.
    pub fn load(path: &Path) -> Result<Option<Self>, BaselineError> {
        let read = ipc_matrix_results::open_regular(path).and_then(|file| {
            use std::io::Read;
            let mut bytes = Vec::new();
            file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
            Ok(bytes)
        });
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(BaselineError::Io {
                    path: path.into(),
                    source,
                })
            }
        };
        let malformed = |reason: String| BaselineError::Malformed {
            path: path.into(),
            reason,
        };
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(malformed(format!(
                "larger than {} MiB, more than any baseline holds",
                MAX_FILE_BYTES >> 20
            )));
        }
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| malformed(e.to_string()))?;
        let found = value
            .get("format_version")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| malformed("no format_version".into()))?;
        if found != u64::from(BASELINE_FORMAT_VERSION) {
            return Err(BaselineError::Version {
                path: path.into(),
                found,
            });
        }
        let baseline: Self = serde_json::from_value(value).map_err(|e| malformed(e.to_string()))?;
        baseline.check_bounds().map_err(malformed)?;
        Ok(Some(baseline))
    }

    /// What a baseline may hold: judging it costs time in proportion to its batches.
    fn check_bounds(&self) -> Result<(), String> {
        if self.cells.len() > MAX_CELLS {
            return Err(format!(
                "{} cells; a baseline holds at most {MAX_CELLS}",
                self.cells.len()
            ));
        }
        for (id, cell) in &self.cells {
            if cell.runs.len() > MAX_RUNS {
                return Err(format!(
                    "cell {id} holds {} runs; at most {MAX_RUNS} are kept",
                    cell.runs.len()
                ));
            }
            if let Some(run) = cell
                .runs
                .iter()
                .find(|r| r.batch_medians_ns.len() > MAX_BATCHES)
            {
                return Err(format!(
                    "cell {id} holds a run of {} batch medians; at most {MAX_BATCHES}",
                    run.batch_medians_ns.len()
                ));
            }
        }
        Ok(())
    }

    /// Writes the baseline through a temporary file, so an interrupted write leaves the
    /// old baseline in place ([`ipc_matrix_results::write_atomically`]: the temporary
    /// file is removed when the write fails). Temporary files that a crashed write left in
    /// the baseline's folder are removed first.
    pub fn save(&self, path: &Path) -> Result<(), BaselineError> {
        let io = |source| BaselineError::Io {
            path: path.into(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut json = serde_json::to_vec_pretty(self).expect("a baseline always serializes");
        json.push(b'\n');
        if let Some(dir) = path.parent() {
            ipc_matrix_results::remove_stale_temporary_files(dir).map_err(io)?;
        }
        // Its error names the file already.
        let prefix = format!("{}: ", path.display());
        ipc_matrix_results::write_atomically(path, &json).map_err(|e| {
            let message = e.to_string();
            let message = message.strip_prefix(&prefix).unwrap_or(&message);
            io(std::io::Error::new(e.kind(), message.to_string()))
        })
    }
}
