//! The GitHub Actions job matrix, derived from matrix.yaml's targets: adding a target there
//! adds a leg to the workflow (`ipc-matrix matrix --github`).

use ipc_matrix_spec::{Runner, Spec};
use serde_json::{json, Value};

/// The GitHub-hosted runner image a leg runs on. Native legs need a machine of their own
/// architecture; emulated legs run under QEMU on x86_64.
pub fn runner_image(triple: &str, runner: Runner) -> Result<&'static str, String> {
    match (runner, triple.split('-').next()) {
        (Runner::Qemu, _) | (Runner::Native, Some("x86_64")) => Ok("ubuntu-24.04"),
        (Runner::Native, Some("aarch64")) => Ok("ubuntu-24.04-arm"),
        (Runner::Native, _) => Err(format!(
            "{triple}@native: GitHub has no hosted runner of this architecture; use runner: qemu"
        )),
    }
}

/// `{"include": [{"target": ..., "runner": ..., "os": ..., "blocks_merge": ..., "leg": ...}]}`
pub fn job_matrix(spec: &Spec) -> Result<Value, String> {
    let include = spec
        .targets
        .iter()
        .map(|t| {
            Ok(json!({
                "target": t.triple,
                "runner": t.runner.as_str(),
                "os": runner_image(&t.triple, t.runner)?,
                "blocks_merge": t.blocks_merge,
                "leg": format!("{}@{}", t.triple, t.runner),
            }))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(json!({ "include": include }))
}
