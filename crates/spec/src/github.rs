//! The GitHub Actions job matrix, derived from matrix.yaml's targets: adding a target there
//! adds a leg to the workflow (`ipc-matrix matrix --github`).

use crate::{Runner, Spec};
use serde::Serialize;

/// The GitHub-hosted runner image a leg runs on. Native legs need a machine of their own
/// architecture; emulated legs run under QEMU on x86_64.
pub fn runner_image(triple: &str, runner: Runner) -> Result<&'static str, NoHostedRunner> {
    match (runner, triple.split('-').next()) {
        (Runner::Qemu, _) | (Runner::Native, Some("x86_64")) => Ok("ubuntu-24.04"),
        (Runner::Native, Some("aarch64")) => Ok("ubuntu-24.04-arm"),
        (Runner::Native, _) => Err(NoHostedRunner {
            triple: triple.to_string(),
        }),
    }
}

/// A native target of an architecture GitHub hosts no runner of.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{triple}@native: GitHub has no hosted runner of this architecture; use runner: qemu")]
pub struct NoHostedRunner {
    pub triple: String,
}

/// `{"include": [job, ...]}`: what the workflow's `strategy.matrix` reads with `fromJSON`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobMatrix {
    pub include: Vec<Job>,
}

/// One leg of the workflow: `matrix.<field>` in its steps. The fields are declared in the
/// order they are printed (alphabetical).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Job {
    /// Whether a failure of this leg blocks the merge.
    pub blocks_merge: bool,
    /// The leg its count pass reports under ([`crate::count_leg`]): set on native legs
    /// of an architecture with a counted build, empty on the others.
    pub count_leg: String,
    /// The cargo target of that count pass ([`crate::counted_target`]), or empty.
    pub count_target: String,
    /// `<triple>@<runner>`.
    pub leg: String,
    /// The runner image ([`runner_image`]).
    pub os: &'static str,
    /// `native` or `qemu`.
    pub runner: &'static str,
    /// The target triple.
    pub target: String,
}

impl JobMatrix {
    /// One line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a job matrix always serializes")
    }
}

/// One job per target of matrix.yaml, in its order.
pub fn job_matrix(spec: &Spec) -> Result<JobMatrix, NoHostedRunner> {
    let include = spec
        .targets
        .iter()
        .map(|t| {
            Ok(Job {
                blocks_merge: t.blocks_merge,
                count_leg: match t.runner {
                    Runner::Native => crate::count_leg(&t.triple, t.runner).unwrap_or_default(),
                    Runner::Qemu => String::new(),
                },
                count_target: match t.runner {
                    Runner::Native => crate::counted_target(&t.triple).unwrap_or_default().into(),
                    Runner::Qemu => String::new(),
                },
                leg: format!("{}@{}", t.triple, t.runner),
                os: runner_image(&t.triple, t.runner)?,
                runner: t.runner.as_str(),
                target: t.triple.clone(),
            })
        })
        .collect::<Result<Vec<_>, NoHostedRunner>>()?;
    Ok(JobMatrix { include })
}
