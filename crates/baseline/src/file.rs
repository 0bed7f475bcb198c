//! Baseline files: `baselines/<triple>@<runner>/<profile>.json`, committed, one per leg and
//! profile. A baseline keeps, per cell, the batch medians of an accepted run (the samples a
//! later run is compared with) and the headline figures for people reading the diff.
//!
//! Timings are compared statistically (see [`crate::verdict`]), never as exact text: a
//! snapshot tool that compares strings would flag every run.

use crate::stats::{batch_medians, batch_size};
use ipc_matrix_results::{CellResult, Environment, Placement};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Bump on any change a reader of an older file would misread.
pub const BASELINE_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub format_version: u32,
    /// `<triple>@<runner>`.
    pub leg: String,
    pub profile: String,
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
    /// Round trips per batch when this was accepted.
    pub batch_size: usize,
    /// The median round trip of each batch, in run order, nanoseconds.
    pub batch_medians_ns: Vec<u64>,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub throughput_mb_per_s: Option<f64>,
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
        let cells = results
            .iter()
            .filter(|r| r.outcome.passed && !r.samples_ns.is_empty())
            .map(|r| {
                let cell = BaselineCell {
                    payload_bytes: r.cell.payload_bytes,
                    placement: r.placement,
                    batch_size: batch_size(r.samples_ns.len()),
                    batch_medians_ns: batch_medians(&r.samples_ns),
                    p50_ns: r.latency_ns.map_or(0, |l| l.p50),
                    p99_ns: r.latency_ns.map_or(0, |l| l.p99),
                    throughput_mb_per_s: r.throughput.map(|t| t.mb_per_s),
                };
                (r.cell.id.clone(), cell)
            })
            .collect();
        Some(Self {
            format_version: BASELINE_FORMAT_VERSION,
            leg: first.leg.clone(),
            profile: first.cell.profile.clone(),
            accepted_at_unix,
            environment: first.environment.clone(),
            cells,
        })
    }

    /// Reads a baseline; `Ok(None)` when there is none yet.
    pub fn load(path: &Path) -> Result<Option<Self>, BaselineError> {
        let bytes = match std::fs::read(path) {
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
        serde_json::from_value(value)
            .map(Some)
            .map_err(|e| malformed(e.to_string()))
    }

    /// Writes the baseline through a temporary file, so an interrupted write leaves the
    /// old baseline in place.
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
        let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
        std::fs::write(&tmp, json).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }
}
