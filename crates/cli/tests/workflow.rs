//! No drift between matrix.yaml, the GitHub workflow, the cargo runners and the setup
//! script: every target declared in matrix.yaml can run in each of them.
//!
//! The workflow is read as YAML and checked by [`workflow_problems`]: the legs come from
//! the plan job's output (which the CLI prints from matrix.yaml), each leg's target from
//! `matrix.target`, `continue-on-error` from `matrix.blocks_merge`, results are uploaded
//! whatever became of the tests, and every action is pinned by commit. That the check
//! can fail is shown by feeding it broken copies of the workflow
//! ([`every_breakage_of_the_workflow_is_caught`]).

mod common;

use ipc_matrix_spec::github::job_matrix;
use ipc_matrix_spec::{Runner, Spec};
use regex::Regex;
use serde_yaml::{Mapping, Value};
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

const WORKFLOW: &str = ".github/workflows/matrix.yml";

/// The job matrix as the plan job gets it: `ipc-matrix matrix --github` run on
/// matrix.yaml (through QEMU when the suite runs emulated).
fn printed_job_matrix(name: &str, matrix_yaml: &str) -> serde_json::Value {
    let scratch = common::Scratch::new(&format!("workflow-{name}"), matrix_yaml);
    let output = scratch.run(&["matrix", "--github"]);
    assert!(
        output.status.success(),
        "ipc-matrix matrix --github: {}",
        common::text(&output)
    );
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    assert_eq!(stdout.trim_end().lines().count(), 1, "one line: {stdout}");
    // What the plan job's `ipc-matrix-legs` prints (its own tests hold it to the same
    // function): the CLI and the small binary cannot drift apart.
    let spec = Spec::parse(matrix_yaml, Path::new("matrix.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let library = job_matrix(&spec).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stdout, format!("{}\n", library.to_json()));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

#[test]
fn the_plan_command_prints_one_leg_per_target_with_the_fields_the_workflow_reads() {
    let spec = spec();
    let printed = printed_job_matrix("repository", &read("matrix.yaml"));
    let legs = printed["include"].as_array().expect("include: [...]");
    assert_eq!(legs.len(), spec.targets.len(), "{printed}");
    for (leg, t) in legs.iter().zip(&spec.targets) {
        let name = format!("{}@{}", t.triple, t.runner);
        assert_eq!(leg["leg"].as_str(), Some(name.as_str()), "{leg}");
        assert_eq!(leg["target"].as_str(), Some(t.triple.as_str()), "{leg}");
        assert_eq!(leg["runner"].as_str(), Some(t.runner.as_str()), "{leg}");
        assert_eq!(leg["blocks_merge"].as_bool(), Some(t.blocks_merge), "{leg}");
        let os = match (t.runner, t.triple.starts_with("aarch64-")) {
            (Runner::Native, true) => "ubuntu-24.04-arm",
            _ => "ubuntu-24.04",
        };
        assert_eq!(leg["os"].as_str(), Some(os), "{leg}");
    }
}

#[test]
fn the_job_matrix_is_one_line_of_json_with_the_fields_the_workflow_reads() {
    let printed = printed_job_matrix(
        "three-legs",
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
    );
    assert_eq!(
        printed.to_string(),
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
fn the_workflow_in_the_repository_has_no_problem() {
    let problems = workflow_problems(&read(WORKFLOW), &spec());
    assert!(problems.is_empty(), "{WORKFLOW}:\n{}", problems.join("\n"));
}

/// Each breakage: a text in the workflow, what replaces it, and a word the problem found
/// must contain.
const BREAKAGES: &[(&str, &str, &str, &str)] = &[
    (
        "the plan step no longer writes the legs to its output",
        "          echo \"legs=$legs\" >> \"$GITHUB_OUTPUT\"\n",
        "",
        "writes no `legs=` line to $GITHUB_OUTPUT",
    ),
    (
        "the legs written are not the CLI's",
        "-- matrix --github)\"",
        "-- list)\"",
        "not printed by `ipc-matrix matrix --github`",
    ),
    (
        "the plan job's outputs do not map the step's",
        "    outputs:\n      legs: ${{ steps.plan.outputs.legs }}\n",
        "",
        "jobs.plan.outputs.legs",
    ),
    (
        "the output names a step that does not exist",
        "      - id: plan\n",
        "      - id: derive\n",
        "no step with id `plan`",
    ),
    (
        "the legs are hard-coded",
        "matrix: ${{ fromJSON(needs.plan.outputs.legs) }}",
        "matrix: { target: [x86_64-unknown-linux-gnu], os: [ubuntu-24.04] }",
        "strategy.matrix",
    ),
    (
        "the leg job does not wait for the plan",
        "  leg:\n    needs: plan\n",
        "  leg:\n",
        "needs",
    ),
    (
        "TARGET is hard-coded for the tests",
        "          TARGET: ${{ matrix.target }}\n        run: cargo nextest",
        "          TARGET: x86_64-unknown-linux-gnu\n        run: cargo nextest",
        "x86_64-unknown-linux-gnu",
    ),
    (
        "the target is written into the command",
        "--profile ci --target \"$TARGET\"",
        "--profile ci --target aarch64-unknown-linux-gnu",
        "aarch64-unknown-linux-gnu",
    ),
    (
        "the tests name no target",
        "--profile ci --target \"$TARGET\"",
        "--profile ci",
        "--target",
    ),
    (
        "TARGET comes from another field",
        "          TARGET: ${{ matrix.target }}\n        run: scripts/setup-target.sh",
        "          TARGET: ${{ matrix.leg }}\n        run: scripts/setup-target.sh",
        "matrix.target",
    ),
    (
        "the count pass is given a hard-coded target",
        "run: scripts/count-pass.sh \"$TARGET\"",
        "run: scripts/count-pass.sh x86_64-unknown-linux-gnu",
        "x86_64-unknown-linux-gnu",
    ),
    (
        "the tests leave the ci profile",
        "--profile ci --target",
        "--target",
        "--profile ci",
    ),
    (
        "every leg may fail",
        "continue-on-error: ${{ !matrix.blocks_merge }}",
        "continue-on-error: true",
        "continue-on-error",
    ),
    (
        "the legs that block merges may fail and the others may not",
        "continue-on-error: ${{ !matrix.blocks_merge }}",
        "continue-on-error: ${{ matrix.blocks_merge }}",
        "continue-on-error",
    ),
    (
        "a failing test step is ignored",
        "      - name: Test ${{ matrix.leg }}\n",
        "      - name: Test ${{ matrix.leg }}\n        continue-on-error: true\n",
        "continue-on-error",
    ),
    (
        "one failing leg cancels the others",
        "fail-fast: false",
        "fail-fast: true",
        "fail-fast",
    ),
    (
        "every leg runs on an x86_64 machine",
        "runs-on: ${{ matrix.os }}",
        "runs-on: ubuntu-24.04",
        "runs-on",
    ),
    (
        "a leg's results are uploaded only when its tests pass",
        "      - name: Upload JUnit, results and reports\n        if: always()\n",
        "      - name: Upload JUnit, results and reports\n",
        "if: always()",
    ),
    (
        "a leg's results are uploaded only when it succeeds",
        "      - name: Upload JUnit, results and reports\n        if: always()\n",
        "      - name: Upload JUnit, results and reports\n        if: success()\n",
        "if: always()",
    ),
    (
        "the leg's report is written only when its tests pass",
        "      - name: Report the leg against its baseline (job summary, ::warning on regressions)\n        if: always()\n",
        "      - name: Report the leg against its baseline (job summary, ::warning on regressions)\n",
        "always()",
    ),
    (
        "the leg's results folder is not uploaded",
        "            target/ipc-matrix/${{ matrix.leg }}/\n",
        "",
        "target/ipc-matrix/${{ matrix.leg }}/",
    ),
    (
        "every leg uploads under one name",
        "name: results-${{ matrix.leg }}",
        "name: results",
        "matrix.leg",
    ),
    (
        "the side-by-side job downloads what no leg uploads",
        "pattern: results-*",
        "pattern: result-set-*",
        "pattern",
    ),
    (
        "the side-by-side job runs only when every leg passed",
        "    needs: leg\n    if: always()\n",
        "    needs: leg\n",
        "side-by-side",
    ),
    (
        "the comparison is uploaded only when it succeeded",
        "      - name: Upload the comparison\n        if: always()\n",
        "      - name: Upload the comparison\n",
        "if: always()",
    ),
    (
        "the comparison written is not the one uploaded",
        "--out side-by-side \\",
        "--out compared \\",
        "side-by-side",
    ),
    (
        "an action is pinned by a tag",
        "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683",
        "actions/checkout@v4",
        "not pinned by a 40-hex commit",
    ),
    (
        "an action in the side-by-side job is pinned by a short commit",
        "actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093",
        "actions/download-artifact@d3f86a1",
        "not pinned by a 40-hex commit",
    ),
    (
        "an action is pinned by a branch",
        "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02 # v4.6.2\n        with:\n          name: side-by-side",
        "actions/upload-artifact@main\n        with:\n          name: side-by-side",
        "not pinned by a 40-hex commit",
    ),
    (
        "the workflow may write the repository",
        "permissions:\n  contents: read\n",
        "permissions:\n  contents: write\n",
        "permissions",
    ),
    (
        "a job may write the repository",
        "  side-by-side:\n    needs: leg\n",
        "  side-by-side:\n    permissions: write-all\n    needs: leg\n",
        "permissions beyond read",
    ),
    (
        "a job has no time limit",
        "    timeout-minutes: 60\n",
        "",
        "timeout-minutes",
    ),
];

/// Every breakage, applied to a copy of the workflow (its first occurrence), is found, for
/// the reason it is.
#[test]
fn every_breakage_of_the_workflow_is_caught() {
    let original = read(WORKFLOW);
    let spec = spec();
    let mut escaped = Vec::new();
    for &(what, from, to, reason) in BREAKAGES {
        assert!(
            original.contains(from),
            "breakage `{what}`: its text is not in the workflow: {from:?}"
        );
        let broken = original.replacen(from, to, 1);
        serde_yaml::from_str::<Value>(&broken)
            .unwrap_or_else(|e| panic!("breakage `{what}` is not YAML any more: {e}"));
        let problems = workflow_problems(&broken, &spec);
        if !problems.iter().any(|p| p.contains(reason)) {
            escaped.push(format!(
                "{what}: found {problems:?}, none saying `{reason}`"
            ));
        }
    }
    assert!(
        escaped.is_empty(),
        "breakages not caught:\n{}",
        escaped.join("\n")
    );
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

// ---------------------------------------------------------------------------------------
// The check.

/// What is wrong with `workflow` (the text of .github/workflows/matrix.yml) for the
/// targets of `spec`; empty when nothing is.
fn workflow_problems(workflow: &str, spec: &Spec) -> Vec<String> {
    let wf: Value = match serde_yaml::from_str(workflow) {
        Ok(wf) => wf,
        Err(e) => return vec![format!("not YAML: {e}")],
    };
    let mut problems = Vec::new();
    let Some(jobs) = wf["jobs"].as_mapping() else {
        return vec!["no jobs".into()];
    };
    let read_only = wf["permissions"]
        .as_mapping()
        .is_some_and(|p| p.len() == 1 && str_of(&p["contents"]) == Some("read"));
    if !read_only {
        problems.push("permissions: contents must be `read`, and nothing more".into());
    }
    for (name, job) in jobs {
        let name = name.as_str().unwrap_or("?");
        let writes = job["permissions"]
            .as_mapping()
            .is_some_and(|p| p.values().any(|v| str_of(v) != Some("read")))
            || !matches!(job["permissions"], Value::Null | Value::Mapping(_));
        if writes {
            problems.push(format!("jobs.{name}: permissions beyond read"));
        }
        if job["timeout-minutes"].as_u64().is_none() {
            problems.push(format!("jobs.{name}: no timeout-minutes"));
        }
        for uses in job_uses(job) {
            if !pinned(uses) {
                problems.push(format!(
                    "jobs.{name}: `{uses}` is not pinned by a 40-hex commit"
                ));
            }
        }
    }
    let legs = plan_output(jobs, &mut problems);
    let leg_jobs: Vec<(&str, &Value)> = jobs
        .iter()
        .filter(|(_, job)| !job["strategy"]["matrix"].is_null())
        .map(|(name, job)| (name.as_str().unwrap_or("?"), job))
        .collect();
    if leg_jobs.is_empty() {
        problems.push("no job has a strategy.matrix: the legs run nowhere".into());
    }
    for &(name, job) in &leg_jobs {
        check_leg_job(name, job, legs.as_deref(), spec, &mut problems);
    }
    for (name, job) in jobs {
        check_uploads(name.as_str().unwrap_or("?"), job, &mut problems);
    }
    check_side_by_side(jobs, &leg_jobs, &mut problems);
    problems
}

/// Where the legs come from: the plan job's `outputs.legs` must be its step's output,
/// which that step writes (`legs=...` into $GITHUB_OUTPUT) from `ipc-matrix matrix
/// --github`. The expression the leg jobs must read it with, or `None`.
fn plan_output(jobs: &Mapping, problems: &mut Vec<String>) -> Option<String> {
    let Some(plan) = jobs.get("plan") else {
        problems.push("no plan job".into());
        return None;
    };
    let Some(output) = str_of(&plan["outputs"]["legs"]) else {
        problems.push("jobs.plan.outputs.legs is missing: the legs reach no other job".into());
        return None;
    };
    let step_output = Regex::new(r"^steps\.([A-Za-z0-9_-]+)\.outputs\.legs$").unwrap();
    let Some(step_id) =
        expression(output).and_then(|e| step_output.captures(&e).map(|c| c[1].to_string()))
    else {
        problems.push(format!(
            "jobs.plan.outputs.legs is `{output}`, not `${{{{ steps.<id>.outputs.legs }}}}`"
        ));
        return None;
    };
    let steps = steps_of(plan);
    let Some(step) = steps.iter().find(|s| str_of(&s["id"]) == Some(&step_id)) else {
        problems.push(format!(
            "jobs.plan.outputs.legs reads step `{step_id}`, but there is no step with id \
             `{step_id}`"
        ));
        return None;
    };
    let script = str_of(&step["run"]).unwrap_or("");
    let lines = shell_lines(script);
    let written = lines
        .iter()
        .find_map(|line| github_output_value(line, "legs"));
    let Some(value) = written else {
        problems.push(format!(
            "the plan step `{step_id}` writes no `legs=` line to $GITHUB_OUTPUT"
        ));
        return None;
    };
    // `legs=$var` (its assignment earlier in the script) or `legs=$(command)`.
    let command = match value.strip_prefix('$').map(|v| v.trim_matches(['{', '}'])) {
        Some(var) if !var.starts_with('(') => lines.iter().find_map(|line| {
            let (name, rhs) = line.split_once('=')?;
            (name.trim() == var).then(|| unquote(rhs.trim()))
        }),
        _ => Some(value.clone()),
    };
    let from_cli = command.as_deref().is_some_and(|c| {
        c.starts_with("$(")
            && c.contains("matrix --github")
            && (c.contains("-p ipc-matrix --") || c.contains("ipc-matrix matrix"))
    });
    if !from_cli {
        problems.push(format!(
            "the legs the plan step writes (`legs={value}`) are not printed by `ipc-matrix \
             matrix --github` (from: {command:?})"
        ));
        return None;
    }
    Some("fromJSON(needs.plan.outputs.legs)".into())
}

/// A job that runs one leg per matrix entry.
fn check_leg_job(
    name: &str,
    job: &Value,
    legs: Option<&str>,
    spec: &Spec,
    problems: &mut Vec<String>,
) {
    let at = |what: &str| format!("jobs.{name}.{what}");
    let matrix = &job["strategy"]["matrix"];
    let from_plan = str_of(matrix).and_then(expression);
    if legs.is_none() || from_plan.as_deref() != legs {
        problems.push(format!(
            "{}: {} is not the plan job's output (`${{{{ fromJSON(needs.plan.outputs.legs) }}}}`)",
            at("strategy.matrix"),
            serde_yaml::to_string(matrix).unwrap_or_default().trim()
        ));
    }
    let needs: Vec<&str> = match &job["needs"] {
        Value::String(s) => vec![s.as_str()],
        Value::Sequence(s) => s.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !needs.contains(&"plan") {
        problems.push(format!(
            "{}: the plan job is not among its needs",
            at("needs")
        ));
    }
    if job["strategy"]["fail-fast"].as_bool() != Some(false) {
        problems.push(format!(
            "{}: must be false, or one failing leg cancels the others",
            at("strategy.fail-fast")
        ));
    }
    if str_of(&job["runs-on"]).and_then(expression).as_deref() != Some("matrix.os") {
        problems.push(format!(
            "{}: must be `${{{{ matrix.os }}}}` (the machine of the leg's architecture)",
            at("runs-on")
        ));
    }
    if str_of(&job["continue-on-error"])
        .and_then(expression)
        .as_deref()
        != Some("!matrix.blocks_merge")
    {
        problems.push(format!(
            "{}: must be `${{{{ !matrix.blocks_merge }}}}`, so that exactly the legs that do \
             not block merges may fail",
            at("continue-on-error")
        ));
    }
    let triple = Regex::new(
        r"\b(x86_64|i686|aarch64|arm|armv7|riscv64gc|s390x|powerpc64le|powerpc64|mips\w*)-[a-z0-9_]+-[a-z0-9_]+(-[a-z0-9_]+)?\b",
    )
    .unwrap();
    let mut nextest_target = None;
    for (i, step) in steps_of(job).iter().enumerate() {
        let label = match str_of(&step["name"]) {
            Some(n) => format!("jobs.{name}.steps[{i}] ({n})"),
            None => format!("jobs.{name}.steps[{i}]"),
        };
        if !matches!(step["continue-on-error"], Value::Null | Value::Bool(false)) {
            problems.push(format!(
                "{label}: continue-on-error hides a failing step of a leg"
            ));
        }
        // No triple written into a leg's steps: each leg's target is matrix.target.
        let mut texts: Vec<&str> = Vec::new();
        for field in ["env", "with"] {
            if let Some(map) = step[field].as_mapping() {
                texts.extend(map.values().filter_map(str_of));
            }
        }
        texts.extend(str_of(&step["run"]));
        for text in texts {
            for t in spec.targets.iter().map(|t| t.triple.as_str()) {
                if text.contains(t) {
                    problems.push(format!("{label}: hard-codes the target {t}"));
                }
            }
            if let Some(m) = triple.find(text) {
                problems.push(format!("{label}: hard-codes the target {}", m.as_str()));
            }
        }
        let env = step["env"].as_mapping();
        if let Some(value) = env.and_then(|e| e.get("TARGET")) {
            if str_of(value).and_then(expression).as_deref() != Some("matrix.target") {
                problems.push(format!(
                    "{label}: env TARGET is not `${{{{ matrix.target }}}}`"
                ));
            }
        }
        let resolve = |word: &str| -> Option<String> {
            let var = word
                .strip_prefix("${")
                .and_then(|w| w.strip_suffix('}'))
                .or_else(|| word.strip_prefix('$'));
            match var {
                Some(var) if !var.starts_with('{') && !var.starts_with('(') => {
                    str_of(env?.get(var)?).and_then(expression)
                }
                _ => expression(word),
            }
        };
        for line in shell_lines(str_of(&step["run"]).unwrap_or("")) {
            let words = shell_words(&line);
            let script_arg = |script: &str| {
                let at = words.iter().position(|w| w == script)?;
                words.get(at + 1).cloned()
            };
            if line.contains("cargo nextest run") {
                if script_arg("--profile").as_deref() != Some("ci") {
                    problems.push(format!("{label}: the tests do not run the --profile ci"));
                }
                nextest_target = Some(script_arg("--target").and_then(|w| resolve(&w)));
            }
            for (script, wanted) in [
                ("scripts/setup-target.sh", "matrix.target"),
                ("scripts/count-pass.sh", "matrix.target"),
            ] {
                if words.iter().any(|w| w == script) {
                    let given = script_arg(script).and_then(|w| resolve(&w));
                    if given.as_deref() != Some(wanted) {
                        problems.push(format!(
                            "{label}: {script} is not given `${{{{ {wanted} }}}}` (it is given \
                             {given:?})"
                        ));
                    }
                }
            }
        }
    }
    match nextest_target {
        None => problems.push(format!("{}: no step runs `cargo nextest run`", at("steps"))),
        Some(target) if target.as_deref() != Some("matrix.target") => problems.push(format!(
            "{}: `cargo nextest run` is not given --target `${{{{ matrix.target }}}}` (it is \
             given {target:?})",
            at("steps")
        )),
        Some(_) => {}
    }
}

/// A job that produces results or reports uploads them whatever became of its other
/// steps, and the steps that write reports run whatever became of the tests.
fn check_uploads(name: &str, job: &Value, problems: &mut Vec<String>) {
    let steps = steps_of(job);
    let runs: Vec<&str> = steps.iter().filter_map(|s| str_of(&s["run"])).collect();
    let produces = runs.iter().any(|r| {
        r.contains("cargo nextest run")
            || r.contains("leg-report.sh")
            || r.contains("count-pass.sh")
            || r.contains("report --compare")
    });
    let uploads: Vec<&Value> = steps
        .iter()
        .copied()
        .filter(|s| str_of(&s["uses"]).is_some_and(|u| u.starts_with("actions/upload-artifact@")))
        .collect();
    for (i, step) in steps.iter().enumerate() {
        let is_upload = uploads.iter().any(|u| std::ptr::eq(*u, *step));
        let reports = str_of(&step["run"]).is_some_and(|r| r.contains("leg-report.sh"));
        let condition = str_of(&step["if"]).and_then(expression_or_plain);
        if is_upload && condition.as_deref() != Some("always()") {
            problems.push(format!(
                "jobs.{name}.steps[{i}]: an upload must run with `if: always()` (it has \
                 {condition:?})"
            ));
        }
        if reports
            && !condition
                .as_deref()
                .is_some_and(|c| c.starts_with("always()"))
        {
            problems.push(format!(
                "jobs.{name}.steps[{i}]: a report step must run after failed tests too \
                 (`if: always()`, it has {condition:?})"
            ));
        }
    }
    if produces && uploads.is_empty() {
        problems.push(format!("jobs.{name}: produces results but uploads none"));
    }
    if !job["strategy"]["matrix"].is_null() && produces {
        let Some(upload) = uploads.first() else {
            return;
        };
        let name_of = str_of(&upload["with"]["name"]).unwrap_or("");
        if !name_of.contains("${{ matrix.leg }}") {
            problems.push(format!(
                "jobs.{name}: the artifact `{name_of}` is not named per leg (matrix.leg)"
            ));
        }
        let paths = str_of(&upload["with"]["path"]).unwrap_or("");
        for wanted in [
            "target/nextest/ci/junit.xml",
            "target/ipc-matrix/${{ matrix.leg }}/",
        ] {
            if !paths.lines().any(|l| l.trim() == wanted) {
                problems.push(format!("jobs.{name}: the upload leaves out {wanted}"));
            }
        }
    }
}

/// The job that puts the legs side by side runs whatever became of them, downloads what
/// they upload, and uploads the comparison it writes.
fn check_side_by_side(jobs: &Mapping, leg_jobs: &[(&str, &Value)], problems: &mut Vec<String>) {
    let Some(job) = jobs.get("side-by-side") else {
        problems.push("no side-by-side job".into());
        return;
    };
    let needs_legs = match &job["needs"] {
        Value::String(s) => leg_jobs.iter().any(|(n, _)| n == s),
        Value::Sequence(s) => leg_jobs
            .iter()
            .all(|(n, _)| s.iter().any(|v| v.as_str() == Some(n))),
        _ => false,
    };
    if !needs_legs {
        problems.push("jobs.side-by-side: does not wait for the legs (needs)".into());
    }
    if str_of(&job["if"]).and_then(expression_or_plain).as_deref() != Some("always()") {
        problems.push(
            "jobs.side-by-side: must run with `if: always()`, or one failing leg hides every \
             leg's results"
                .into(),
        );
    }
    let steps = steps_of(job);
    let leg_artifacts: Vec<String> = leg_jobs
        .iter()
        .flat_map(|(_, j)| steps_of(j))
        .filter(|s| str_of(&s["uses"]).is_some_and(|u| u.starts_with("actions/upload-artifact@")))
        .filter_map(|s| str_of(&s["with"]["name"]).map(String::from))
        .collect();
    let download = steps
        .iter()
        .find(|s| str_of(&s["uses"]).is_some_and(|u| u.starts_with("actions/download-artifact@")));
    match download.and_then(|d| str_of(&d["with"]["pattern"])) {
        Some(pattern) => {
            let prefix = pattern.split('*').next().unwrap_or("");
            if !leg_artifacts.iter().any(|a| a.starts_with(prefix)) || !pattern.ends_with('*') {
                problems.push(format!(
                    "jobs.side-by-side: the download pattern `{pattern}` matches none of the \
                     legs' artifacts {leg_artifacts:?}"
                ));
            }
        }
        None => problems.push("jobs.side-by-side: downloads no legs' artifacts (pattern)".into()),
    }
    let writes_to = steps
        .iter()
        .filter_map(|s| str_of(&s["run"]))
        .flat_map(shell_lines)
        .find_map(|line| {
            let words = shell_words(&line);
            let at = words.iter().position(|w| w == "--out")?;
            words.get(at + 1).cloned()
        });
    let uploaded: Vec<String> = steps
        .iter()
        .filter(|s| str_of(&s["uses"]).is_some_and(|u| u.starts_with("actions/upload-artifact@")))
        .filter_map(|s| str_of(&s["with"]["path"]))
        .flat_map(|p| {
            p.lines()
                .map(|l| l.trim().trim_end_matches('/').to_string())
        })
        .collect();
    match writes_to {
        Some(out) if uploaded.contains(&out.trim_end_matches('/').to_string()) => {}
        other => problems.push(format!(
            "jobs.side-by-side: the comparison is written to {other:?} but the upload holds \
             {uploaded:?}"
        )),
    }
}

// ---------------------------------------------------------------------------------------
// Reading YAML values, expressions and shell lines.

fn str_of(v: &Value) -> Option<&str> {
    v.as_str()
}

fn steps_of(job: &Value) -> Vec<&Value> {
    job["steps"]
        .as_sequence()
        .map(|s| s.iter().collect())
        .unwrap_or_default()
}

/// Every action a job uses: its steps' `uses` and, for a reusable workflow, its own.
fn job_uses(job: &Value) -> Vec<&str> {
    let mut uses: Vec<&str> = steps_of(job)
        .iter()
        .filter_map(|s| str_of(&s["uses"]))
        .collect();
    uses.extend(str_of(&job["uses"]));
    uses
}

/// `owner/repo[/path]@<40 hex>`; a local action (`./...`) needs no pin; a container by
/// its sha256 digest.
fn pinned(uses: &str) -> bool {
    if uses.starts_with("./") {
        return true;
    }
    if let Some(image) = uses.strip_prefix("docker://") {
        return image
            .split_once("@sha256:")
            .is_some_and(|(_, d)| d.len() == 64 && d.chars().all(|c| c.is_ascii_hexdigit()));
    }
    match uses.rsplit_once('@') {
        Some((action, sha)) => {
            action.contains('/')
                && sha.len() == 40
                && sha
                    .chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        }
        None => false,
    }
}

/// The inside of `${{ ... }}`, its spaces collapsed; `None` for any other text.
fn expression(text: &str) -> Option<String> {
    let inner = text
        .trim()
        .strip_prefix("${{")?
        .strip_suffix("}}")?
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Some(inner)
}

/// An `if:` condition: an expression with or without `${{ }}`.
fn expression_or_plain(text: &str) -> Option<String> {
    expression(text).or_else(|| Some(text.split_whitespace().collect::<Vec<_>>().join(" ")))
}

/// The logical lines of a shell script: continuations joined, blank lines and comments
/// left out.
fn shell_lines(script: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for raw in script.lines() {
        let line = raw.trim();
        if let Some(head) = line.strip_suffix('\\') {
            current.push_str(head.trim_end());
            current.push(' ');
            continue;
        }
        current.push_str(line);
        let done = std::mem::take(&mut current);
        if !done.is_empty() && !done.starts_with('#') {
            lines.push(done);
        }
    }
    if !current.trim().is_empty() {
        lines.push(current);
    }
    lines
}

/// The words of a shell line, quotes removed; a `$(...)` stays one word.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = line.chars().peekable();
    let (mut quote, mut depth) = (None::<char>, 0usize);
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' if quote.is_none() && depth == 0 => quote = Some(c),
            c if Some(c) == quote => quote = None,
            '$' if chars.peek() == Some(&'(') => {
                word.push(c);
                word.push(chars.next().unwrap());
                depth += 1;
            }
            ')' if depth > 0 => {
                word.push(c);
                depth -= 1;
            }
            c if c.is_whitespace() && quote.is_none() && depth == 0 => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// A word without the quotes around it.
fn unquote(word: &str) -> String {
    shell_words(word).join(" ")
}

/// The value of `key` in a line that appends `key=value` to $GITHUB_OUTPUT
/// (`echo "key=$value" >> "$GITHUB_OUTPUT"`).
fn github_output_value(line: &str, key: &str) -> Option<String> {
    let words = shell_words(line);
    let to = words.iter().position(|w| w == ">>")?;
    let file = words.get(to + 1)?;
    if file != "$GITHUB_OUTPUT" && file != "${GITHUB_OUTPUT}" {
        return None;
    }
    words[..to]
        .iter()
        .find_map(|w| w.strip_prefix(&format!("{key}=")).map(String::from))
}

#[test]
fn shell_words_keep_substitutions_and_drop_quotes() {
    assert_eq!(
        shell_words(r#"legs="$(cargo run -p ipc-matrix -- matrix --github)""#),
        vec!["legs=$(cargo run -p ipc-matrix -- matrix --github)"]
    );
    assert_eq!(
        shell_words(r#"echo "legs=$legs" >> "$GITHUB_OUTPUT""#),
        vec!["echo", "legs=$legs", ">>", "$GITHUB_OUTPUT"]
    );
    assert_eq!(
        github_output_value(r#"echo "legs=$legs" >> "$GITHUB_OUTPUT""#, "legs"),
        Some("$legs".into())
    );
    assert_eq!(
        github_output_value(r#"echo "legs=$legs" >> "$GITHUB_STEP_SUMMARY""#, "legs"),
        None
    );
    assert_eq!(
        shell_lines("a \\\n  b\n# c\n\nd"),
        vec!["a b".to_string(), "d".to_string()]
    );
    assert!(pinned(
        "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683"
    ));
    assert!(!pinned(
        "actions/checkout@11BD71901BBE5B1630CEEA73D27597364C9AF68"
    ));
    assert!(!pinned("actions/checkout@v4"));
    assert!(!pinned("actions/checkout"));
    assert_eq!(
        expression("${{  !matrix.blocks_merge }}").as_deref(),
        Some("!matrix.blocks_merge")
    );
}
