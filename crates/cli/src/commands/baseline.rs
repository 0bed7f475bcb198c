//! `ipc-matrix baseline accept`: show how the stored results differ from the baseline,
//! then make them the baseline (or one more run of it).

use crate::args::StoredResults;
use anyhow::{Context, Result};
use ipc_matrix::exit_code;
use ipc_matrix::reporting::{baselines_dir, leg_report, now_unix, verdict_table};
use ipc_matrix_baseline::{baseline_path, AcceptMode, Accepted};
use ipc_matrix_spec::RegressionPolicy;
use std::path::{Path, PathBuf};

pub struct Acceptance {
    pub append: bool,
    pub dry_run: bool,
}

pub fn accept(stored: &StoredResults, baselines: Option<PathBuf>, how: Acceptance) -> Result<u8> {
    stored.policy().and_then(|policy| {
        accept_legs(
            &stored.results_dir(),
            &baselines_dir(baselines, &stored.matrix),
            &stored.legs()?,
            &stored.profile,
            policy,
            how,
        )
    })
}

/// Shows how the results differ from the baseline, then stores them as the baseline (or
/// as one more run of it).
fn accept_legs(
    results: &Path,
    baselines: &Path,
    legs: &[String],
    profile: &str,
    policy: RegressionPolicy,
    how: Acceptance,
) -> Result<u8> {
    for leg in legs {
        let report = leg_report(results, baselines, leg, profile, policy, None)?;
        let path = baseline_path(baselines, leg, profile);
        match &report.baseline {
            Some(_) => println!(
                "{leg} ({profile}): stored results against {}",
                path.display()
            ),
            None => println!("{leg} ({profile}): no baseline yet at {}", path.display()),
        }
        println!("{}", verdict_table(&report));
        let mode = if how.append {
            AcceptMode::Append
        } else {
            AcceptMode::Replace
        };
        let old = report.baseline.as_ref().map(|b| &b.baseline);
        let accepted = ipc_matrix_baseline::accept(old, &report.results, mode, now_unix());
        for id in &report.verdict.not_run {
            let fate = mode.not_run_fate().as_str();
            println!("  {id}: in the baseline, not in these results: {fate}");
        }
        let Accepted {
            baseline, refused, ..
        } = accepted.with_context(|| leg.clone())?;
        for refusal in &refused {
            let (id, why) = (&refusal.cell_id, refusal.reason.as_str());
            if refusal.kept_old_entry {
                println!("  {id}: {why}; its baseline entry is kept");
            } else {
                println!("  {id}: {why}; not accepted");
            }
        }
        let runs = baseline
            .cells
            .values()
            .map(|c| c.runs.len())
            .max()
            .unwrap_or(0);
        if how.dry_run {
            println!("dry run: {} not written", path.display());
        } else {
            baseline.save(&path)?;
            println!(
                "wrote {} ({} cells, up to {runs} accepted run(s) each)",
                path.display(),
                baseline.cells.len()
            );
        }
    }
    Ok(exit_code::OK)
}
