//! No drift between matrix.yaml, the GitHub workflow, the cargo runners and the setup
//! script: every target declared in matrix.yaml can run in each of them.

use ipc_matrix::github::job_matrix;
use ipc_matrix_spec::{Runner, Spec};
use serde_yaml::Value;
use std::path::{Path, PathBuf};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn spec() -> Spec {
    Spec::load(&repo("matrix.yaml")).unwrap_or_else(|e| panic!("{e}"))
}

fn workflow() -> Value {
    serde_yaml::from_str(&read(".github/workflows/matrix.yml")).expect("workflow is YAML")
}

#[test]
fn every_target_has_a_github_leg() {
    let jobs = job_matrix(&spec()).unwrap_or_else(|e| panic!("{e}"));
    let legs = &jobs.include;
    assert_eq!(legs.len(), spec().targets.len());
    for t in &spec().targets {
        let leg = format!("{}@{}", t.triple, t.runner);
        assert!(legs.iter().any(|l| l.leg == leg), "no leg {leg}");
    }
}

#[test]
fn the_job_matrix_is_one_line_of_json_with_the_fields_the_workflow_reads() {
    let spec = Spec::parse(
        "version: 1
targets:
  - { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }
  - { triple: aarch64-unknown-linux-gnu, runner: native, blocks_merge: true }
  - { triple: s390x-unknown-linux-gnu, runner: qemu, blocks_merge: false }
profiles:
  quick: { description: test }
scenarios:
  - { name: echo, kind: echo, transports: [tcp], payloads: [200B], iterations: 10, warmup: 0, timeout: 1s }
",
        Path::new("matrix.yaml"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let jobs = job_matrix(&spec).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        jobs.to_json(),
        concat!(
            r#"{"include":["#,
            r#"{"blocks_merge":true,"leg":"x86_64-unknown-linux-gnu@native","os":"ubuntu-24.04","runner":"native","target":"x86_64-unknown-linux-gnu"},"#,
            r#"{"blocks_merge":true,"leg":"aarch64-unknown-linux-gnu@native","os":"ubuntu-24.04-arm","runner":"native","target":"aarch64-unknown-linux-gnu"},"#,
            r#"{"blocks_merge":false,"leg":"s390x-unknown-linux-gnu@qemu","os":"ubuntu-24.04","runner":"qemu","target":"s390x-unknown-linux-gnu"}"#,
            "]}"
        )
    );
}

#[test]
fn the_workflow_takes_its_legs_from_the_cli() {
    let wf = workflow();
    let plan_steps = wf["jobs"]["plan"]["steps"].as_sequence().unwrap();
    assert!(
        plan_steps.iter().any(|s| s["run"]
            .as_str()
            .is_some_and(|r| r.contains("-- matrix --github"))),
        "the plan job must print the job matrix with `ipc-matrix matrix --github`"
    );
    let leg = &wf["jobs"]["leg"];
    assert_eq!(
        leg["strategy"]["matrix"].as_str(),
        Some("${{ fromJSON(needs.plan.outputs.legs) }}")
    );
    assert_eq!(leg["strategy"]["fail-fast"].as_bool(), Some(false));
    assert_eq!(leg["runs-on"].as_str(), Some("${{ matrix.os }}"));
    let runs: Vec<&str> = leg["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str())
        .collect();
    assert!(runs.iter().any(|r| r.contains("--profile ci --target")));
}

#[test]
fn the_workflow_is_least_privilege_pinned_and_bounded() {
    let wf = workflow();
    assert_eq!(wf["permissions"]["contents"].as_str(), Some("read"));
    for (name, job) in wf["jobs"].as_mapping().unwrap() {
        assert!(
            job["timeout-minutes"].as_u64().is_some(),
            "job {name:?} has no timeout-minutes"
        );
        for step in job["steps"].as_sequence().unwrap() {
            if let Some(uses) = step["uses"].as_str() {
                let sha = uses.rsplit_once('@').map(|(_, r)| r).unwrap_or("");
                assert!(
                    sha.len() == 40 && sha.chars().all(|c| c.is_ascii_hexdigit()),
                    "{uses} is not pinned by commit SHA"
                );
            }
        }
    }
}

#[test]
fn every_emulated_target_has_a_runner_and_a_setup_recipe() {
    let cargo_config = read(".cargo/config.toml");
    let setup = read("scripts/setup-target.sh");
    for t in spec().targets.iter().filter(|t| t.runner == Runner::Qemu) {
        let section = format!("[target.{}]", t.triple);
        let body = cargo_config
            .split(&section)
            .nth(1)
            .unwrap_or_else(|| panic!("{section} missing in .cargo/config.toml"));
        let body = body.split("\n[").next().unwrap();
        assert!(body.contains("linker = "), "{section}: no linker");
        assert!(
            body.contains("scripts/qemu-run"),
            "{section}: no QEMU runner"
        );
        assert!(
            setup.contains(&format!("  {})", t.triple)),
            "scripts/setup-target.sh has no recipe for {}",
            t.triple
        );
    }
}
