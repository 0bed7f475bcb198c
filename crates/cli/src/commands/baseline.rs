//! `ipc-matrix baseline accept`: show how the stored results differ from the baseline,
//! then make them the baseline (or one more run of it).

use crate::args::StoredResults;
use anyhow::{Context, Result};
use ipc_matrix::exit_code;
use ipc_matrix::reporting::{baselines_dir, leg_report, now_unix, verdict_table};
use ipc_matrix_baseline::{baseline_path, Baseline};
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
        let report = leg_report(results, baselines, leg, profile, policy)?;
        let path = baseline_path(baselines, leg, profile);
        match &report.baseline {
            Some(_) => println!(
                "{leg} ({profile}): stored results against {}",
                path.display()
            ),
            None => println!("{leg} ({profile}): no baseline yet at {}", path.display()),
        }
        println!("{}", verdict_table(&report));
        for id in &report.verdict.not_run {
            let fate = if how.append { "kept" } else { "dropped" };
            println!("  {id}: in the baseline, not in these results: {fate}");
        }
        let (keep, refuse): (Vec<_>, Vec<_>) = report
            .results
            .iter()
            .cloned()
            .partition(|r| r.outcome.passed && r.peer_delay_us.is_none());
        let old = report.baseline.as_ref().map(|b| &b.baseline);
        let mut baseline = match old {
            Some(old) if how.append => {
                if old.environment.cpu_model != report.results[0].environment.cpu_model {
                    anyhow::bail!(
                        "{leg}: the baseline was measured on {}, these results on {}; \
                         accept without --append to replace it",
                        old.environment.cpu_model,
                        report.results[0].environment.cpu_model
                    );
                }
                let mut appended = old.clone();
                appended.add_run(&keep, now_unix());
                appended
            }
            _ => Baseline::from_results(&keep, now_unix())
                .with_context(|| format!("{leg}: no passing cell to accept"))?,
        };
        for r in &refuse {
            let why = if r.outcome.passed {
                "ran with a slowed peer"
            } else {
                "failed"
            };
            match old.and_then(|b| b.cells.get(&r.cell.id)) {
                Some(entry) => {
                    println!("  {}: {why}; its baseline entry is kept", r.cell.id);
                    baseline.cells.insert(r.cell.id.clone(), entry.clone());
                }
                None => println!("  {}: {why}; not accepted", r.cell.id),
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
