//! `ipc-matrix baseline accept`: show how the stored results differ from the baseline,
//! then make them the baseline (or one more run of it).

use crate::cli::args::StoredResults;
use crate::exit_code;
use crate::reporting::{baselines_dir, leg_report, now_unix, verdict_table};
use anyhow::{Context, Result};
use ipc_matrix_baseline::{baseline_path, AcceptMode, Accepted};
use ipc_matrix_spec::RegressionPolicy;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy)]
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

/// How deep below an artifacts folder results are looked for: `<artifact>/ipc-matrix/
/// <leg>/<profile>/cells` is four levels down; a few more allow other upload roots.
const ARTIFACT_DEPTH: usize = 8;

/// Accepts the results CI legs uploaded, downloaded into `dir` (one folder per artifact):
/// each `<results>/<leg>/<profile>/cells` found is accepted as that leg's baseline.
pub fn accept_artifacts(
    stored: &StoredResults,
    dir: &Path,
    baselines: Option<PathBuf>,
    how: Acceptance,
) -> Result<u8> {
    let policy = stored.policy()?;
    let found = results_in_artifacts(dir, &stored.profile)?;
    let wanted = |leg: &str| stored.leg.is_empty() || stored.leg.iter().any(|l| l == leg);
    // A leg's own artifact (`results-<leg>`, as the workflow names them) is preferred
    // where another one holds the same leg too (a native leg's count pass uploads
    // `<triple>@qemu`, which an emulated leg of the same triple also makes).
    let own = |leg: &str, root: &Path| {
        root.components()
            .any(|c| c.as_os_str().to_str() == Some(&format!("results-{leg}")))
    };
    let mut legs: Vec<(String, PathBuf)> = Vec::new();
    for (leg, root) in found.into_iter().filter(|(leg, _)| wanted(leg)) {
        match legs.iter().position(|(l, _)| *l == leg) {
            None => legs.push((leg, root)),
            Some(i) if own(&leg, &legs[i].1) && !own(&leg, &root) => {}
            Some(i) if own(&leg, &root) && !own(&leg, &legs[i].1) => legs[i].1 = root,
            Some(i) => anyhow::bail!(
                "{leg}: results of profile `{}` in two artifacts, {} and {}, neither of them results-{leg}; download one run's artifacts into the folder",
                stored.profile,
                legs[i].1.display(),
                root.display()
            ),
        }
    }
    for asked in &stored.leg {
        if !legs.iter().any(|(l, _)| l == asked) {
            anyhow::bail!(
                "--leg {asked}: no results of profile `{}` for it in {}",
                stored.profile,
                dir.display()
            );
        }
    }
    if legs.is_empty() {
        return Err(crate::cli::args::NoCells(format!(
            "{}: no results of profile `{}` in any artifact (expected <artifact>/.../<leg>/{}/cells, as `gh run download -D {}` writes them)",
            dir.display(),
            stored.profile,
            stored.profile,
            dir.display()
        ))
        .into());
    }
    let baselines = baselines_dir(baselines, &stored.matrix);
    for (leg, root) in &legs {
        println!("{leg}: from {}", root.display());
        accept_legs(
            root,
            &baselines,
            std::slice::from_ref(leg),
            &stored.profile,
            policy,
            how,
        )?;
    }
    Ok(exit_code::OK)
}

/// Every (leg, results folder) below `dir` that holds results of `profile`, in path
/// order; folders that are links are not followed.
fn results_in_artifacts(dir: &Path, profile: &str) -> Result<Vec<(String, PathBuf)>> {
    let meta =
        std::fs::symlink_metadata(dir).with_context(|| format!("--artifacts {}", dir.display()))?;
    if !meta.is_dir() {
        anyhow::bail!("--artifacts {}: not a folder", dir.display());
    }
    let mut found = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), 0usize)];
    while let Some((folder, depth)) = pending.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&folder)
            .with_context(|| format!("reading {}", folder.display()))?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        entries.sort();
        for entry in entries {
            let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if ipc_matrix_results::is_leg_name(name) && entry.join(profile).join("cells").is_dir() {
                found.push((name.to_string(), folder.clone()));
            } else if depth + 1 < ARTIFACT_DEPTH {
                pending.push((entry, depth + 1));
            }
        }
    }
    found.sort();
    Ok(found)
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
