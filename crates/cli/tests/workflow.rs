//! No drift between matrix.yaml, the GitHub workflow, the cargo runners and the setup
//! script: every target declared in matrix.yaml can run in each of them.
//!
//! The workflow is read as YAML and checked by [`workflow_problems`]: the legs come from
//! the plan job's output (which `ipc-matrix-legs` prints from matrix.yaml, building the
//! spec crate only), each leg's target from `matrix.target`, `continue-on-error` from
//! `matrix.blocks_merge`, results are uploaded whatever became of the tests, every action
//! is one of the known Node 24 releases pinned by commit with its release in a comment,
//! nextest comes prebuilt, each leg's cache is keyed by the rustc version and saved
//! whatever became of the tests, the count pass and the reports reuse the leg's build,
//! and the side-by-side job runs the merge gate. That the check can fail is shown by
//! feeding it broken copies of the workflow ([`every_breakage_of_the_workflow_is_caught`]).

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
        // The count pass of a native leg: its leg and target, as the scripts name them.
        let count_leg = match t.runner {
            Runner::Native => ipc_matrix_spec::count_leg(&t.triple, t.runner).unwrap_or_default(),
            Runner::Qemu => String::new(),
        };
        assert_eq!(leg["count_leg"].as_str(), Some(count_leg.as_str()), "{leg}");
        let count_target = count_leg.strip_suffix("@qemu").unwrap_or("");
        assert_eq!(leg["count_target"].as_str(), Some(count_target), "{leg}");
        if !count_target.is_empty() {
            // What the count pass builds (xtask/src/count_pass.rs asks the spec the same).
            assert_eq!(
                ipc_matrix_spec::counted_target(&t.triple),
                Some(count_target),
                "{leg}"
            );
        }
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
            r#"{"blocks_merge":true,"count_leg":"x86_64-unknown-linux-musl@qemu","count_target":"x86_64-unknown-linux-musl","leg":"x86_64-unknown-linux-gnu@native","os":"ubuntu-24.04","runner":"native","target":"x86_64-unknown-linux-gnu"},"#,
            r#"{"blocks_merge":true,"count_leg":"aarch64-unknown-linux-musl@qemu","count_target":"aarch64-unknown-linux-musl","leg":"aarch64-unknown-linux-gnu@native","os":"ubuntu-24.04-arm","runner":"native","target":"aarch64-unknown-linux-gnu"},"#,
            r#"{"blocks_merge":false,"count_leg":"","count_target":"","leg":"s390x-unknown-linux-gnu@qemu","os":"ubuntu-24.04","runner":"qemu","target":"s390x-unknown-linux-gnu"}"#,
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
        "the legs written come from another binary",
        "--bin ipc-matrix-legs)",
        "--bin ipc-matrix-list)",
        "not printed by `ipc-matrix-legs`",
    ),
    (
        "the plan job builds the ipc-matrix binary to print the legs",
        "-p ipc-matrix-spec --bin ipc-matrix-legs)",
        "-p ipc-matrix -- matrix --github)",
        "builds more than ipc-matrix-spec",
    ),
    (
        "the plan job builds the whole workspace first",
        "        run: |\n          legs=",
        "        run: |\n          cargo build --locked\n          legs=",
        "builds more than ipc-matrix-spec",
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
        "the count pass runs on native legs only, not where the plan gives one",
        "        if: matrix.count_leg != ''\n",
        "        if: matrix.runner == 'native'\n",
        "the count pass must run",
    ),
    (
        "the counts are reported under the leg's own triple",
        "          LEG: ${{ matrix.count_leg }}",
        "          LEG: ${{ matrix.target }}@qemu",
        "no step reports the count leg",
    ),
    (
        "the cache forgets the pinned QEMU",
        "            target/pinned\n            ~/.cache/zig\n          key: ${{ matrix.leg }}",
        "            ~/.cache/zig\n          key: ${{ matrix.leg }}",
        "the cache leaves out target/pinned",
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
        "--out side-by-side --compare",
        "--out compared --compare",
        "side-by-side",
    ),
    (
        "an action is pinned by a tag",
        "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1",
        "actions/checkout@v4",
        "not pinned by a 40-hex commit",
    ),
    (
        "an action in the side-by-side job is pinned by a short commit",
        "actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c",
        "actions/download-artifact@3e5f45b",
        "not pinned by a 40-hex commit",
    ),
    (
        "an action is pinned by a branch",
        "actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f # v7.0.0\n        with:\n          name: side-by-side",
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
    (
        "an action stays on its Node 20 release",
        "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1",
        "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2",
        "not the known Node 24 pin of actions/checkout",
    ),
    (
        "an action nobody checked",
        "actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c # v8.0.1",
        "some-one/download@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c # v8.0.1",
        "not one of the known Node 24 pins",
    ),
    (
        "a pin without its release in a comment",
        "actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c # v8.0.1",
        "actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c",
        "version comment must be `# v8.0.1`",
    ),
    (
        "a pin whose comment names another release",
        "actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f # v7.0.0",
        "actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f # v6.0.0",
        "version comment must be `# v7.0.0`",
    ),
    (
        "nextest falls back to another installer",
        "          fallback: none\n",
        "",
        "fallback: none",
    ),
    (
        "install-action installs another tool than nextest",
        "tool: cargo-nextest@${{ env.NEXTEST_VERSION }}",
        "tool: cargo-hack",
        "cargo-nextest is not installed with taiki-e/install-action",
    ),
    (
        "nextest of another version than NEXTEST_VERSION",
        "tool: cargo-nextest@${{ env.NEXTEST_VERSION }}",
        "tool: cargo-nextest",
        "not `cargo-nextest@${{ env.NEXTEST_VERSION }}`",
    ),
    (
        "nextest is compiled on every leg",
        "      - name: Install protoc, capnp and pyzmq (the interop tests' reference peers)\n        run: |\n",
        "      - name: Install protoc, capnp and pyzmq (the interop tests' reference peers)\n        run: |\n          cargo install --locked cargo-nextest\n",
        "builds cargo-nextest with `cargo install`",
    ),
    (
        "the cache key leaves the compiler out",
        "key: ${{ matrix.leg }}-${{ runner.arch }}-rustc-${{ steps.rust.outputs.rustc }}-${{ hashFiles('Cargo.lock') }}",
        "key: ${{ matrix.leg }}-${{ runner.arch }}-${{ hashFiles('Cargo.lock') }}",
        "must hold the rustc version",
    ),
    (
        "the restore keys leave the compiler out",
        "restore-keys: ${{ matrix.leg }}-${{ runner.arch }}-rustc-${{ steps.rust.outputs.rustc }}-",
        "restore-keys: ${{ matrix.leg }}-${{ runner.arch }}-",
        "must hold the rustc version",
    ),
    (
        "the version in the key is not rustc's",
        "echo \"rustc=$(rustc -vV |",
        "echo \"rustc=$(date |",
        "must hold the rustc version",
    ),
    (
        "one cache for every leg",
        "key: ${{ matrix.leg }}-${{ runner.arch }}-rustc",
        "key: ${{ runner.arch }}-rustc",
        "not per leg",
    ),
    (
        "the combined cache action, which saves only after success",
        "uses: actions/cache/restore@27d5ce7f107fe9357f9df03efb73ab90386fccae # v5.0.5",
        "uses: actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae # v5.0.5",
        "actions/cache saves only when the job succeeds",
    ),
    (
        "the cache is saved only when the tests pass",
        "        if: always() && steps.cache.outputs.cache-hit != 'true'\n",
        "        if: steps.cache.outputs.cache-hit != 'true'\n",
        "actions/cache/save must run with `if: always() && steps.cache.outputs.cache-hit != 'true'`",
    ),
    (
        "the cache is saved again after an exact hit",
        "        if: always() && steps.cache.outputs.cache-hit != 'true'\n",
        "        if: always()\n",
        "actions/cache/save must run with",
    ),
    (
        "the cache is never saved",
        "        uses: actions/cache/save@27d5ce7f107fe9357f9df03efb73ab90386fccae # v5.0.5\n",
        "        uses: actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f # v7.0.0\n",
        "never saves its cache",
    ),
    (
        "the cache is saved under another key",
        "key: ${{ steps.cache.outputs.cache-primary-key }}",
        "key: cargo-${{ github.sha }}",
        "not the key it restored",
    ),
    (
        "the cache holds the results",
        "            target/release\n",
        "            target/release\n            target/ipc-matrix\n",
        "the cache holds target/ipc-matrix",
    ),
    (
        "the whole target folder is cached",
        "            target/debug\n            target/release\n            target/${{ matrix.target }}/debug\n",
        "            target\n",
        "the whole target folder is cached",
    ),
    (
        "the cache leaves the leg's build out",
        "            target/${{ matrix.target }}/debug\n            target/${{ matrix.count_target",
        "            target/${{ matrix.count_target",
        "the cache leaves out target/${{ matrix.target }}/debug",
    ),
    (
        "the reports are not told the leg's cargo target",
        "      IPC_MATRIX_TARGET: ${{ matrix.target }}\n",
        "",
        "IPC_MATRIX_TARGET is not `${{ matrix.target }}`",
    ),
    (
        "the reports are told another cargo target",
        "      IPC_MATRIX_TARGET: ${{ matrix.target }}\n",
        "      IPC_MATRIX_TARGET: ${{ matrix.leg }}\n",
        "IPC_MATRIX_TARGET is not `${{ matrix.target }}`",
    ),
    (
        "the side-by-side job does not gate",
        "report --fail-on-blocking-regressions --out",
        "report --out",
        "runs no merge gate",
    ),
    (
        "the gate's failure is swallowed",
        ">> \"$GITHUB_STEP_SUMMARY\"\n      - name: Upload the comparison",
        ">> \"$GITHUB_STEP_SUMMARY\" || true\n      - name: Upload the comparison",
        "the gate's failure is ignored",
    ),
    (
        "the gate step may fail",
        "      - name: Put the legs side by side and gate the merge (job summary)\n",
        "      - name: Put the legs side by side and gate the merge (job summary)\n        continue-on-error: true\n",
        "the gate's failure is ignored",
    ),
    (
        "the side-by-side job does not wait for the legs",
        "  side-by-side:\n    needs: leg\n",
        "  side-by-side:\n",
        "does not wait for the legs",
    ),
    (
        "the side-by-side job restores a cache no leg saves",
        "key: x86_64-unknown-linux-gnu@native-${{ runner.arch }}",
        "key: x86_64-unknown-linux-gnu@native-${{ runner.os }}",
        "is not the x86_64-unknown-linux-gnu@native leg's",
    ),
    (
        "the side-by-side job builds the CLI in another folder than the leg's",
        "--profile test --target \"$HOST\" -p ipc-matrix",
        "--profile test -p ipc-matrix",
        "not built as the leg builds it",
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

/// The recipes themselves (cross gcc, Debian packages, QEMU) are the xtask's
/// (`xtask/src/targets.rs`), whose own test holds each to this runner.
#[test]
fn every_emulated_target_has_a_runner_and_a_setup_recipe() {
    let cargo_config = read(".cargo/config.toml");
    let recipes = read("xtask/src/targets.rs");
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
            recipes.contains(&format!("triple: \"{}\",", t.triple)),
            "xtask/src/targets.rs has no recipe for {}",
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
    if let Some(plan) = jobs.get("plan") {
        check_plan_is_small(plan, &mut problems);
    }
    check_pins(workflow, &mut problems);
    for &(name, job) in &leg_jobs {
        check_nextest_install(name, job, &mut problems);
        check_leg_cache(name, job, &mut problems);
        check_suite_build_reused(name, job, &mut problems);
        check_count_pass(name, job, &mut problems);
    }
    if let (Some(job), Some(&(_, leg))) = (jobs.get("side-by-side"), leg_jobs.first()) {
        check_gate(job, leg, spec, &mut problems);
    }
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
    // `ipc-matrix-legs` prints what `ipc-matrix matrix --github` does (the same function;
    // the_plan_command_prints_... and the spec crate's tests/legs.rs hold both to it).
    let from_legs = command.as_deref().is_some_and(|c| {
        let words = shell_words(c.trim_start_matches("$(").trim_end_matches(')'));
        c.starts_with("$(")
            && words
                .windows(2)
                .any(|w| w[0] == "--bin" && w[1] == "ipc-matrix-legs")
    });
    if !from_legs {
        problems.push(format!(
            "the legs the plan step writes (`legs={value}`) are not printed by \
             `ipc-matrix-legs` (ipc_matrix_spec::github::job_matrix; from: {command:?})"
        ));
        return None;
    }
    Some("fromJSON(needs.plan.outputs.legs)".into())
}

/// The plan job builds the spec crate only: every cargo command in it selects
/// `-p ipc-matrix-spec` (none, or another package, builds the ipc-matrix binary's graph:
/// libzmq from source, Cap'n Proto, ... for a line of JSON).
fn check_plan_is_small(plan: &Value, problems: &mut Vec<String>) {
    for line in steps_of(plan)
        .iter()
        .filter_map(|s| str_of(&s["run"]))
        .flat_map(shell_lines)
    {
        for command in line
            .split("$(")
            .filter(|c| c.trim_start().starts_with("cargo "))
        {
            let words = shell_words(command.trim_end_matches([')', '"']));
            let builds = words.get(1).is_some_and(|w| {
                ["build", "run", "test", "nextest", "install"].contains(&w.as_str())
            });
            let package = words
                .windows(2)
                .find(|w| w[0] == "-p" || w[0] == "--package")
                .map(|w| w[1].as_str());
            if builds && package != Some("ipc-matrix-spec") {
                problems.push(format!(
                    "jobs.plan: `{}` builds more than ipc-matrix-spec (the ipc-matrix binary's \
                     graph), for a line of JSON",
                    command.trim().trim_end_matches([')', '"'])
                ));
            }
        }
    }
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

/// The actions the workflow may use, each at its current release on Node 24 (GitHub
/// retires Node 20 from its runners), pinned by commit: (action, commit, release,
/// `runs.using` of that commit's action.yml). Read from each action's repository at that
/// commit (`git rev-list -n1 <tag>`, `git show <tag>:action.yml`).
const KNOWN_PINS: &[(&str, &str, &str, &str)] = &[
    (
        "actions/checkout",
        "3d3c42e5aac5ba805825da76410c181273ba90b1",
        "v7.0.1",
        "node24",
    ),
    (
        "actions/cache/restore",
        "27d5ce7f107fe9357f9df03efb73ab90386fccae",
        "v5.0.5",
        "node24",
    ),
    (
        "actions/cache/save",
        "27d5ce7f107fe9357f9df03efb73ab90386fccae",
        "v5.0.5",
        "node24",
    ),
    (
        "actions/upload-artifact",
        "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f",
        "v7.0.0",
        "node24",
    ),
    (
        "actions/download-artifact",
        "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c",
        "v8.0.1",
        "node24",
    ),
    // A composite action (bash): no Node at all.
    (
        "taiki-e/install-action",
        "ba47c86ac325773530516bb756137ac718732518",
        "v2.86.5",
        "composite",
    ),
];

#[test]
fn every_known_pin_is_a_full_commit_of_a_release_on_node_24() {
    for &(action, sha, version, using) in KNOWN_PINS {
        assert!(pinned(&format!("{action}@{sha}")), "{action}@{sha}");
        assert!(
            ["node24", "composite"].contains(&using),
            "{action} {version} runs on {using}"
        );
        let digits = version.strip_prefix('v').unwrap_or("");
        assert!(
            digits.split('.').count() == 3 && digits.split('.').all(|d| d.parse::<u32>().is_ok()),
            "{action}: `{version}` is not a release vX.Y.Z"
        );
    }
}

/// Every `uses:` line is one of [`KNOWN_PINS`], with its release in a comment after it
/// (`uses: owner/repo@<commit> # vX.Y.Z`). Read from the text: YAML drops comments.
fn check_pins(workflow: &str, problems: &mut Vec<String>) {
    for (n, line) in workflow.lines().enumerate() {
        let Some(rest) = line
            .trim_start()
            .trim_start_matches("- ")
            .strip_prefix("uses:")
        else {
            continue;
        };
        let (uses, comment) = match rest.split_once('#') {
            Some((u, c)) => (u.trim(), Some(c.trim())),
            None => (rest.trim(), None),
        };
        let uses = uses.trim_matches(['"', '\'']);
        let (action, sha) = uses.rsplit_once('@').unwrap_or((uses, ""));
        let at = format!("line {}: `{uses}`", n + 1);
        let Some(&(_, known, version, using)) = KNOWN_PINS.iter().find(|p| p.0 == action) else {
            problems.push(format!("{at} is not one of the known Node 24 pins"));
            continue;
        };
        if sha != known {
            problems.push(format!(
                "{at} is not the known Node 24 pin of {action} ({version} {known}, {using})"
            ));
        }
        if comment != Some(version) {
            problems.push(format!(
                "{at}: its version comment must be `# {version}` (it is {comment:?})"
            ));
        }
    }
}

/// cargo-nextest comes prebuilt from install-action (checksum verified), its version the
/// workflow's NEXTEST_VERSION, with no fallback that would build or fetch another way,
/// before the tests; never `cargo install` (minutes of compiling on every leg).
fn check_nextest_install(name: &str, job: &Value, problems: &mut Vec<String>) {
    let steps = steps_of(job);
    let install = steps.iter().position(|s| {
        str_of(&s["uses"]).is_some_and(|u| u.starts_with("taiki-e/install-action@"))
            && str_of(&s["with"]["tool"])
                .is_some_and(|t| t.starts_with("cargo-nextest") || t.starts_with("nextest"))
    });
    let tests = steps
        .iter()
        .position(|s| str_of(&s["run"]).is_some_and(|r| r.contains("cargo nextest run")));
    match install {
        None => problems.push(format!(
            "jobs.{name}: cargo-nextest is not installed with taiki-e/install-action \
             (tool: cargo-nextest@${{{{ env.NEXTEST_VERSION }}}})"
        )),
        Some(i) => {
            let with = &steps[i]["with"];
            if str_of(&with["tool"]) != Some("cargo-nextest@${{ env.NEXTEST_VERSION }}") {
                problems.push(format!(
                    "jobs.{name}.steps[{i}]: tool is {:?}, not \
                     `cargo-nextest@${{{{ env.NEXTEST_VERSION }}}}`",
                    str_of(&with["tool"])
                ));
            }
            if str_of(&with["fallback"]) != Some("none") {
                problems.push(format!(
                    "jobs.{name}.steps[{i}]: install-action must have `fallback: none` (it \
                     has {:?}): a missing prebuilt version fails instead of falling back",
                    str_of(&with["fallback"])
                ));
            }
            if tests.is_some_and(|t| t < i) {
                problems.push(format!(
                    "jobs.{name}.steps[{i}]: cargo-nextest is installed after the tests"
                ));
            }
        }
    }
    for (i, step) in steps.iter().enumerate() {
        if str_of(&step["run"])
            .is_some_and(|r| r.contains("cargo install") && r.contains("nextest"))
        {
            problems.push(format!(
                "jobs.{name}.steps[{i}]: builds cargo-nextest with `cargo install`"
            ));
        }
    }
}

/// The id of the step that writes `rustc=` to $GITHUB_OUTPUT from `rustc -vV` (or -V).
fn rustc_step_id(job: &Value) -> Option<String> {
    steps_of(job).iter().find_map(|s| {
        let id = str_of(&s["id"])?;
        shell_lines(str_of(&s["run"])?)
            .iter()
            .any(|line| {
                github_output_value(line, "rustc")
                    .is_some_and(|v| v.contains("rustc -vV") || v.contains("rustc -V"))
            })
            .then(|| id.to_string())
    })
}

fn uses_of<'a>(job: &'a Value, action: &str) -> Vec<(usize, &'a Value)> {
    steps_of(job)
        .into_iter()
        .enumerate()
        .filter(|(_, s)| str_of(&s["uses"]).is_some_and(|u| u.starts_with(&format!("{action}@"))))
        .collect()
}

fn path_lines(step: &Value) -> Vec<String> {
    str_of(&step["with"]["path"])
        .unwrap_or("")
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// A leg's cache: restored first, keyed per leg by the rustc version and Cargo.lock, the
/// registry and the leg's build only; saved by the leg whatever became of its tests
/// (actions/cache saves only after success), under the key it restored.
fn check_leg_cache(name: &str, job: &Value, problems: &mut Vec<String>) {
    let at = |i: usize| format!("jobs.{name}.steps[{i}]");
    for (i, _) in uses_of(job, "actions/cache") {
        problems.push(format!(
            "{}: actions/cache saves only when the job succeeds; use actions/cache/restore \
             and actions/cache/save",
            at(i)
        ));
    }
    let restores = uses_of(job, "actions/cache/restore");
    let Some(&(r, restore)) = restores.first() else {
        problems.push(format!(
            "jobs.{name}: restores no cache (actions/cache/restore)"
        ));
        return;
    };
    let rustc = rustc_step_id(job).map(|id| format!("steps.{id}.outputs.rustc"));
    let key = str_of(&restore["with"]["key"]).unwrap_or("");
    let prefix = str_of(&restore["with"]["restore-keys"]).unwrap_or("");
    match &rustc {
        Some(rustc) if key.contains(rustc.as_str()) && prefix.contains(rustc.as_str()) => {}
        _ => problems.push(format!(
            "{}: the cache key `{key}` and its restore-keys `{prefix}` must hold the rustc \
             version (a step's `rustc=` output from `rustc -vV`: {rustc:?}); another \
             compiler's build is rebuilt whole",
            at(r)
        )),
    }
    if !key.contains("${{ matrix.leg }}") || !prefix.contains("${{ matrix.leg }}") {
        problems.push(format!(
            "{}: the cache key is not per leg (matrix.leg)",
            at(r)
        ));
    }
    let paths = path_lines(restore);
    for wanted in [
        "~/.cargo/registry/index",
        "~/.cargo/registry/cache",
        "target/${{ matrix.target }}/debug",
    ] {
        if !paths.iter().any(|p| p == wanted) {
            problems.push(format!("{}: the cache leaves out {wanted}", at(r)));
        }
    }
    for path in &paths {
        let p = path.trim_end_matches('/');
        if p == "target" {
            problems.push(format!(
                "{}: the whole target folder is cached (results, nextest output, every \
                 profile)",
                at(r)
            ));
        }
        if p.starts_with("target/ipc-matrix") || p.starts_with("target/nextest") {
            problems.push(format!(
                "{}: the cache holds {p}: results and test output are not build output",
                at(r)
            ));
        }
    }
    let id = str_of(&restore["id"]).unwrap_or("?");
    let saves = uses_of(job, "actions/cache/save");
    let Some(&(s, save)) = saves.first() else {
        problems.push(format!(
            "jobs.{name}: never saves its cache (actions/cache/save)"
        ));
        return;
    };
    let condition = str_of(&save["if"]).and_then(expression_or_plain);
    let wanted = format!("always() && steps.{id}.outputs.cache-hit != 'true'");
    if condition.as_deref() != Some(wanted.as_str()) {
        problems.push(format!(
            "{}: actions/cache/save must run with `if: {wanted}` (it has {condition:?}): a \
             leg whose tests fail saves its build too",
            at(s)
        ));
    }
    let saved_key = str_of(&save["with"]["key"]).and_then(expression);
    if saved_key.as_deref() != Some(&format!("steps.{id}.outputs.cache-primary-key")) {
        problems.push(format!(
            "{}: the cache is saved under {saved_key:?}, not the key it restored \
             (steps.{id}.outputs.cache-primary-key)",
            at(s)
        ));
    }
    if path_lines(save) != paths {
        problems.push(format!(
            "{}: saves other paths than it restores ({:?} vs {paths:?}): another cache version",
            at(s),
            path_lines(save)
        ));
    }
    let tests = steps_of(job)
        .iter()
        .position(|st| str_of(&st["run"]).is_some_and(|r| r.contains("cargo nextest run")));
    if tests.is_some_and(|t| s < t) || s < r {
        problems.push(format!("{}: the cache is saved before the build", at(s)));
    }
}

/// The count pass runs where the plan gives the leg one (`matrix.count_leg`), through the
/// pinned path (scripts/count-pass.sh: the counted build under the pinned QEMU), its
/// counts are reported under that leg whatever became of the tests, and the cache keeps
/// the counted build and the pinned QEMU.
fn check_count_pass(name: &str, job: &Value, problems: &mut Vec<String>) {
    let steps = steps_of(job);
    let at = |i: usize| format!("jobs.{name}.steps[{i}]");
    let passes: Vec<(usize, &&Value)> = steps
        .iter()
        .enumerate()
        .filter(|(_, st)| str_of(&st["run"]).is_some_and(|r| r.contains("scripts/count-pass.sh")))
        .collect();
    if passes.is_empty() {
        problems.push(format!("jobs.{name}: no step runs scripts/count-pass.sh"));
    }
    for (i, step) in passes {
        let condition = str_of(&step["if"]).and_then(expression_or_plain);
        if condition.as_deref() != Some("matrix.count_leg != ''") {
            problems.push(format!(
                "{}: the count pass must run `if: matrix.count_leg != ''` (it has {condition:?})",
                at(i)
            ));
        }
    }
    let reported = steps.iter().any(|st| {
        str_of(&st["run"]).is_some_and(|r| r.contains("scripts/leg-report.sh"))
            && st["env"]
                .get("LEG")
                .and_then(str_of)
                .and_then(expression)
                .as_deref()
                == Some("matrix.count_leg")
            && str_of(&st["if"]).and_then(expression_or_plain).as_deref()
                == Some("always() && matrix.count_leg != ''")
    });
    if !reported {
        problems.push(format!(
            "jobs.{name}: no step reports the count leg (scripts/leg-report.sh with LEG \
             `${{{{ matrix.count_leg }}}}`, `if: always() && matrix.count_leg != ''`)"
        ));
    }
    if let Some(&(r, restore)) = uses_of(job, "actions/cache/restore").first() {
        let paths = path_lines(restore);
        for wanted in [
            "target/${{ matrix.count_target || matrix.target }}/debug",
            "target/pinned",
        ] {
            if !paths.iter().any(|p| p == wanted) {
                problems.push(format!(
                    "jobs.{name}.steps[{r}]: the cache leaves out {wanted} (the count pass's build)"
                ));
            }
        }
    }
}

/// The count pass and the reports run from the build of the leg's tests: each step that
/// runs them is given the leg's cargo target (IPC_MATRIX_TARGET, read by the reports' task,
/// xtask/src/reports.rs), or the CLI would be built again, the whole graph, without --target.
fn check_suite_build_reused(name: &str, job: &Value, problems: &mut Vec<String>) {
    for (i, step) in steps_of(job).iter().enumerate() {
        let run = str_of(&step["run"]).unwrap_or("");
        if !run.contains("scripts/leg-report.sh") && !run.contains("scripts/count-pass.sh") {
            continue;
        }
        let value = step["env"]
            .get("IPC_MATRIX_TARGET")
            .or_else(|| job["env"].get("IPC_MATRIX_TARGET"));
        if value.and_then(str_of).and_then(expression).as_deref() != Some("matrix.target") {
            problems.push(format!(
                "jobs.{name}.steps[{i}]: IPC_MATRIX_TARGET is not `${{{{ matrix.target }}}}` \
                 ({value:?}): its CLI would compile a second graph"
            ));
        }
    }
}

/// The side-by-side job runs the merge gate over what it downloaded, and lets it fail;
/// it builds the CLI from the x86_64 native leg's cache, restored, never saved.
fn check_gate(job: &Value, leg: &Value, spec: &Spec, problems: &mut Vec<String>) {
    let downloaded = uses_of(job, "actions/download-artifact")
        .first()
        .and_then(|(_, d)| str_of(&d["with"]["path"]))
        .unwrap_or("?")
        .to_string();
    let gate = steps_of(job).into_iter().find_map(|step| {
        let line = shell_lines(str_of(&step["run"])?)
            .into_iter()
            .find(|l| l.contains("--fail-on-blocking-regressions"))?;
        Some((step, line))
    });
    let Some((step, line)) = gate else {
        problems.push(
            "jobs.side-by-side: runs no merge gate (`report --compare ... \
             --fail-on-blocking-regressions`)"
                .into(),
        );
        return;
    };
    let words = shell_words(&line);
    if !words.iter().any(|w| w == "report") || !words.iter().any(|w| w == "--compare") {
        problems.push(format!(
            "jobs.side-by-side: the gate is not `report --compare`: {line}"
        ));
    }
    if ["|| true", "|| :", "|| exit 0"]
        .iter()
        .any(|t| line.contains(t))
        || !matches!(step["continue-on-error"], Value::Null | Value::Bool(false))
    {
        problems.push(format!(
            "jobs.side-by-side: the gate's failure is ignored: {line}"
        ));
    }
    let script = str_of(&step["run"]).unwrap_or("");
    if !script.contains(&format!("{downloaded}/")) {
        problems.push(format!(
            "jobs.side-by-side: the gate reads no folder of the download ({downloaded}/)"
        ));
    }
    if !uses_of(job, "actions/cache/save").is_empty() || !uses_of(job, "actions/cache").is_empty() {
        problems.push("jobs.side-by-side: saves a cache (it only reads a leg's)".into());
    }
    // The restore must find the x86_64 native leg's entry: its key and paths, spelled out.
    let Some(host) = job["env"].get("HOST").and_then(str_of) else {
        problems.push("jobs.side-by-side: no env HOST (the target the CLI is built for)".into());
        return;
    };
    if !spec
        .targets
        .iter()
        .any(|t| t.triple == host && t.runner == Runner::Native)
    {
        problems.push(format!(
            "jobs.side-by-side: matrix.yaml has no {host}@native leg to reuse"
        ));
    }
    if !words
        .windows(2)
        .any(|w| w[0] == "--target" && w[1] == "$HOST")
        || !words
            .windows(2)
            .any(|w| w[0] == "--profile" && w[1] == "test")
    {
        problems.push(format!(
            "jobs.side-by-side: the CLI is not built as the leg builds it (--profile test \
             --target \"$HOST\"): {line}"
        ));
    }
    let (Some(&(_, mine)), Some(&(_, theirs))) = (
        uses_of(job, "actions/cache/restore").first(),
        uses_of(leg, "actions/cache/restore").first(),
    ) else {
        problems.push("jobs.side-by-side: restores no leg's cache".into());
        return;
    };
    let leg_name = format!("{host}@native");
    let counted = ipc_matrix_spec::counted_target(host).unwrap_or(host);
    let as_host = |text: &str| {
        text.replace("${{ matrix.leg }}", &leg_name)
            .replace("${{ matrix.count_target || matrix.target }}", counted)
            .replace("${{ matrix.target }}", host)
    };
    let rustc = |j: &Value| rustc_step_id(j).map(|id| format!("steps.{id}.outputs.rustc"));
    let key = |step: &Value, field: &str, j: &Value| {
        let text = str_of(&step["with"][field]).unwrap_or("").to_string();
        match rustc(j) {
            Some(r) => text.replace(&r, "RUSTC"),
            None => text,
        }
    };
    for field in ["key", "restore-keys"] {
        let (want, have) = (as_host(&key(theirs, field, leg)), key(mine, field, job));
        if want != have {
            problems.push(format!(
                "jobs.side-by-side: the cache {field} `{have}` is not the {leg_name} leg's \
                 (`{want}`)"
            ));
        }
    }
    let want: Vec<String> = path_lines(theirs).iter().map(|p| as_host(p)).collect();
    if path_lines(mine) != want {
        problems.push(format!(
            "jobs.side-by-side: the cache paths {:?} are not the {leg_name} leg's {want:?}",
            path_lines(mine)
        ));
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

/// The workflow `ipc-matrix init` writes (examples/init is what it writes, see
/// tests/init.rs) pins the same actions as ours, by commit, with their releases named;
/// only reads the repository's contents; and its leg job takes its legs from the plan's
/// job matrix with every field of it that it reads.
#[test]
fn the_workflow_init_writes_has_no_problem() {
    let text = read("examples/init/.github/workflows/ipc-matrix.yml");
    let mut problems = Vec::new();
    check_pins(&text, &mut problems);
    let workflow: Value = serde_yaml::from_str(&text).unwrap();
    if workflow["permissions"]["contents"].as_str() != Some("read")
        || workflow["permissions"].as_mapping().map(|m| m.len()) != Some(1)
    {
        problems.push("permissions must be `contents: read` alone".into());
    }
    let leg = &workflow["jobs"]["leg"];
    if str_of(&leg["strategy"]["matrix"]) != Some("${{ fromJSON(needs.plan.outputs.legs) }}") {
        problems.push("the leg job's matrix is not the plan's job matrix".into());
    }
    let job_text = serde_yaml::to_string(leg).unwrap();
    let spec = spec();
    let jobs = ipc_matrix_spec::github::job_matrix(&spec).unwrap();
    let fields = serde_json::to_value(&jobs.include[0]).unwrap();
    // Fields read in expressions: `${{ matrix.leg }}`, `${{ !matrix.blocks_merge }}`.
    let expression = regex::Regex::new(r"\$\{\{[^}]*\}\}").unwrap();
    let field = regex::Regex::new(r"\bmatrix\.([A-Za-z0-9_]+)").unwrap();
    for e in expression.find_iter(&job_text) {
        for read in field.captures_iter(e.as_str()) {
            if fields.get(&read[1]).is_none() {
                problems.push(format!(
                    "the leg job reads matrix.{}, which the job matrix has not",
                    &read[1]
                ));
            }
        }
    }
    for job in ["plan", "leg"] {
        if workflow["jobs"][job]["timeout-minutes"].as_u64().is_none() {
            problems.push(format!("job {job} has no timeout-minutes"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
