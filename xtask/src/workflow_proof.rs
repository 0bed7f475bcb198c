//! `workflow-proof`: the test command's local runs of our workflow (.github/workflows/
//! matrix.yml), each with act as GitHub would run it ([`crate::workflow`]), and the merge
//! gate proved both ways:
//!
//! 1. **as committed**: the plan, then `side-by-side` on the legs this test command ran
//!    (its host suite is the native leg's, its count passes the count legs'), each packed
//!    by the upload stand-in from the workflow's own upload step: green;
//! 2. **a non-blocking leg fails**: that leg's job runs on a tree whose nextest
//!    configuration is broken; the run still passes by GitHub's rule, and the gate says
//!    the leg has no report and does not block merges;
//! 3. **a blocking leg breaks** before writing results (the same tree, the native leg of
//!    this machine): `side-by-side` exits 1 naming it;
//! 4. **a planted count regression**: one gating cell of this machine's count leg counted
//!    again with the peer's extra work: `side-by-side` exits 3 naming the leg and the cell.
//!
//! 5. **`init`'s workflow**: in a folder `ipc-matrix init` wrote, its plan and this
//!    machine's leg, with this test command's ipc-matrix in its cache: green, the leg's
//!    cells in its job summary, its results in its artifact.
//!
//! Blocking legs this machine does not run (an arm64 runner's, the emulated legs'
//! builds) are named to the gate as not run here (`IPC_MATRIX_LEGS_NOT_RUN`, read only
//! under act), and listed so in its section.

use crate::repo::Repo;
use crate::reports;
use crate::say::say;
use crate::second_userland::env_path;
use crate::sh::{exit_code, host_triple, output};
use crate::workflow::{act, commit_all, replace, tree, Outcome, Run};
use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

const WORKFLOW: &str = ".github/workflows/matrix.yml";

/// The matrix filter that keeps no leg: `side-by-side` then runs after the plan alone.
const NO_LEG: &str = "leg:(none)";

/// Units of the peer's extra work in the planted regression (each reply).
const PLANTED_WORK: &str = "10";

/// The workflow's legs (the plan's job matrix, from matrix.yaml as the plan job computes
/// it) as JSON objects.
fn plan(repo: &Repo) -> Result<Vec<Map<String, Value>>> {
    let spec = ipc_matrix_spec::Spec::load(&repo.root.join("matrix.yaml"))
        .map_err(|e| anyhow::anyhow!("matrix.yaml: {e}"))?;
    let matrix = ipc_matrix_spec::github::job_matrix(&spec)
        .map_err(|e| anyhow::anyhow!("the job matrix: {e}"))?;
    let json = serde_json::to_value(&matrix)?;
    Ok(json["include"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_object().cloned())
        .collect())
}

fn text<'a>(entry: &'a Map<String, Value>, key: &str) -> &'a str {
    entry.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// `${{ matrix.a || matrix.b }}` and `${{ matrix.a }}` in `template`, for one entry.
fn substitute(template: &str, entry: &Map<String, Value>) -> Result<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find("}}")
            .with_context(|| format!("an unclosed expression in `{template}`"))?;
        let expression = rest[start + 3..start + end].trim();
        let mut value = String::new();
        for alternative in expression.split("||").map(str::trim) {
            let key = alternative.strip_prefix("matrix.").with_context(|| {
                format!("`{expression}` in the upload step is not one this proof evaluates")
            })?;
            value = text(entry, key).to_owned();
            if !value.is_empty() {
                break;
            }
        }
        out.push_str(&value);
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The leg job's upload step: its `name` and `path` templates and `if-no-files-found`.
fn upload_step(repo: &Repo) -> Result<(String, String, String)> {
    let file = repo.root.join(WORKFLOW);
    let workflow: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(&file)?)
        .with_context(|| file.display().to_string())?;
    let steps = workflow["jobs"]["leg"]["steps"]
        .as_sequence()
        .context("the leg job has no steps")?;
    let step = steps
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .context("the leg job has no upload-artifact step")?;
    let with = |k: &str| step["with"][k].as_str().unwrap_or_default().to_owned();
    Ok((with("name"), with("path"), with("if-no-files-found")))
}

/// Packs one leg's results as its upload step (`name`, `path`, `if-no-files-found`, from
/// [`upload_step`]) would from `workspace` (whose `target/`
/// holds them), into the run `run` of `store`, with the upload stand-in itself.
fn pack(
    repo: &Repo,
    (name, path, if_none): &(String, String, String),
    store: &Path,
    run: &str,
    workspace: &Path,
    entry: &Map<String, Value>,
) -> Result<()> {
    let mut c = Command::new("python3");
    c.arg(repo.root.join("xtask/stand-ins/stand_in.py"))
        .arg("upload")
        .current_dir(workspace)
        .env("GITHUB_WORKSPACE", workspace)
        .env("IPC_MATRIX_ACT_STORE", store)
        .env("IPC_MATRIX_ACT_RUN", run)
        .env("STAND_IN_NAME", substitute(name, entry)?)
        .env("STAND_IN_PATH", substitute(path, entry)?)
        .env("STAND_IN_IF_NO_FILES_FOUND", if_none);
    output(&mut c).map(drop)
}

/// A folder whose `target/` shows `ipc-matrix/` (with `legs` replaced by other folders,
/// each `(leg, folder of the leg)`) and `nextest/` of this checkout, to pack from.
fn packing_workspace(repo: &Repo, dir: &Path, replaced: &[(String, PathBuf)]) -> Result<PathBuf> {
    let _ = std::fs::remove_dir_all(dir);
    let target = dir.join("target");
    let results = target.join("ipc-matrix");
    std::fs::create_dir_all(&results)?;
    std::os::unix::fs::symlink(repo.target_dir.join("nextest"), target.join("nextest"))?;
    for entry in std::fs::read_dir(repo.target_dir.join("ipc-matrix"))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.contains('@') {
            continue;
        }
        let from = replaced
            .iter()
            .find(|(leg, _)| *leg == name)
            .map_or(entry.path(), |(_, f)| f.clone());
        std::os::unix::fs::symlink(from, results.join(&name))?;
    }
    for (leg, folder) in replaced {
        let link = results.join(leg);
        if !link.exists() {
            std::os::unix::fs::symlink(folder, link)?;
        }
    }
    Ok(dir.to_path_buf())
}

/// What one of the four runs must show.
struct Expect {
    /// `side-by-side`'s result, and the exit status of its failed step.
    gate_passes: bool,
    gate_status: Option<u8>,
    /// The run by GitHub's rule.
    run_passes: bool,
    /// Text the gate's section must hold.
    section_holds: Vec<String>,
}

/// Checks `outcome` against `expect`; the differences, each a sentence.
fn judge(outcome: &Outcome, section: &str, expect: &Expect) -> Vec<String> {
    let mut wrong = Vec::new();
    let gate = outcome.job("side-by-side");
    match gate.first() {
        None => wrong.push("side-by-side did not run".to_owned()),
        Some(g) => {
            if g.failed() == expect.gate_passes {
                wrong.push(format!("side-by-side ended {}", g.result));
            }
        }
    }
    if let Some(code) = expect.gate_status {
        let codes: Vec<u8> = outcome
            .step_failures
            .iter()
            .filter(|(job, _)| job == "side-by-side")
            .map(|(_, c)| *c)
            .collect();
        if !codes.contains(&code) {
            wrong.push(format!("side-by-side's gate exited {codes:?}, not {code}"));
        }
    }
    if outcome.github_passes() != expect.run_passes {
        wrong.push(format!(
            "the run {} by GitHub's rule",
            if outcome.github_passes() {
                "passes"
            } else {
                "fails"
            }
        ));
    }
    for text in &expect.section_holds {
        if !section.contains(text.as_str()) {
            wrong.push(format!("the gate's section does not say `{text}`"));
        }
    }
    wrong
}

/// `workflow-proof [init]`: every run above, or `init`'s workflow alone.
pub fn prove(repo: &Repo, only_init: bool) -> Result<u8> {
    let host = host_triple()?;
    let profile = reports::suite_profile();
    let base = repo.target_dir.join("ipc-matrix/workflow");
    let _ = std::fs::remove_dir_all(&base);
    let store = base.join("store");
    std::fs::create_dir_all(&store)?;
    if only_init {
        let wrong = init_workflow(repo, &base, &store, &host)?;
        for w in &wrong {
            say(&format!("failed: workflow run `init-default`: {w}"));
        }
        return Ok(u8::from(!wrong.is_empty()));
    }
    let results = repo.target_dir.join("ipc-matrix");
    let has_results =
        |leg: &str| !leg.is_empty() && results.join(leg).join(&profile).join("cells").is_dir();
    let entries = plan(repo)?;
    let native = entries
        .iter()
        .find(|e| text(e, "leg") == format!("{host}@native"))
        .with_context(|| format!("the workflow has no leg {host}@native"))?
        .clone();
    let count_leg = text(&native, "count_leg").to_owned();
    if !has_results(&format!("{host}@native")) || !has_results(&count_leg) {
        bail!("the workflow's local runs need this test command's {host}@native and {count_leg} results");
    }
    let non_blocking = entries
        .iter()
        .find(|e| e.get("blocks_merge") == Some(&Value::Bool(false)))
        .context("the workflow has no leg that does not block merges")?
        .clone();
    // The legs this test command did not run (an arm64 runner's, the emulated legs'):
    // named to the gate as not run here, but for the one a run runs itself.
    let mut not_run = Vec::new();
    for e in &entries {
        for leg in [text(e, "leg"), text(e, "count_leg")] {
            if !leg.is_empty() && !has_results(leg) {
                not_run.push(leg.to_owned());
            }
        }
    }
    say(&format!(
        "the workflow, run here with act; legs this machine does not run: {}",
        not_run.join(", ")
    ));
    // The jobs run in a home of their own (cargo's and rustup's folders kept), as each
    // runner starts with one: the caches they save and restore hold this run's files,
    // never the user's registry.
    let job_home = base.join("home");
    std::fs::create_dir_all(&job_home)?;
    let env_without = |running: &str| {
        let legs: Vec<&str> = not_run
            .iter()
            .map(String::as_str)
            .filter(|l| *l != running)
            .collect();
        let mut env = home_env(&job_home);
        env.push(("IPC_MATRIX_LEGS_NOT_RUN".to_owned(), legs.join(",")));
        env
    };

    let committed = base.join("trees/as-committed");
    tree(repo, &committed, None)?;
    let broken = base.join("trees/broken-nextest-config");
    tree(
        repo,
        &broken,
        Some(&|t: &Path| {
            let config = t.join(".config/nextest.toml");
            let mut text = std::fs::read_to_string(&config)?;
            text.push_str("\n[profile.ci\nplanted = \"a broken configuration: the leg breaks before any result\"\n");
            replace(&config, &text)
        }),
    )?;
    let packed_from = packing_workspace(repo, &base.join("packing/as-measured"), &[])?;

    // The planted regression: one gating cell of the count leg, counted again with the
    // peer's extra work, into a results folder of its own.
    let gating = output(&mut reports::cli(
        repo,
        reports::suite_target().as_deref(),
        &reports::leg_report_args(&results, &count_leg, &profile, &["--gating-cells"]),
    )?)?;
    let cell = gating
        .lines()
        .find(|l| l.starts_with("echo::"))
        .or_else(|| gating.lines().next())
        .with_context(|| format!("no cell of {count_leg} gates: nothing to plant a regression in"))?
        .to_owned();
    let planted = base.join("planted");
    say(&format!(
        "planting a count regression: {cell} counted again with the peer's extra work ({PLANTED_WORK} units per reply)"
    ));
    // The count pass's JUnit is the real pass's until the planted one overwrites it.
    let junit = repo.target_dir.join(format!(
        "nextest/count-{}/junit.xml",
        host.split('-').next().unwrap_or_default()
    ));
    let kept = std::fs::read(&junit).ok();
    let status = Command::new(std::env::current_exe()?)
        .args(["count-pass", &host, "-E", &format!("test(={cell})")])
        .env("IPC_MATRIX_OUT", &planted)
        .env("IPC_MATRIX_PEER_EXTRA_WORK", PLANTED_WORK)
        .env(
            "IPC_MATRIX_PEER_DELAY_CELLS",
            format!("^{}$", regex_escape(&cell)),
        )
        .status()
        .context("the planted count pass")?;
    if let Some(kept) = kept {
        std::fs::write(&junit, kept)?;
    }
    if exit_code(status) != 0 {
        bail!(
            "the planted count pass of {cell} failed (exit {})",
            exit_code(status)
        );
    }
    let _ = reports::cli(
        repo,
        reports::suite_target().as_deref(),
        &reports::leg_report_args(&planted, &count_leg, &profile, &["--strict-instructions"]),
    )?
    .stdout(std::process::Stdio::null())
    .status();
    let planted_from = packing_workspace(
        repo,
        &base.join("packing/planted"),
        &[(count_leg.clone(), planted.join(&count_leg))],
    )?;

    struct Case<'a> {
        name: &'a str,
        tree: &'a Path,
        matrix: String,
        packed_from: &'a Path,
        leave_out: Option<&'a str>,
        expect: Expect,
    }
    let native_leg = format!("{host}@native");
    let cases = [
        Case {
            name: "as-committed",
            tree: &committed,
            matrix: NO_LEG.into(),
            packed_from: &packed_from,
            leave_out: None,
            expect: Expect {
                gate_passes: true,
                gate_status: None,
                run_passes: true,
                section_holds: vec!["No leg that blocks merges regressed.".into()],
            },
        },
        Case {
            name: "non-blocking-leg-fails",
            tree: &broken,
            matrix: format!("leg:{}", text(&non_blocking, "leg")),
            packed_from: &packed_from,
            leave_out: None,
            expect: Expect {
                gate_passes: true,
                gate_status: None,
                run_passes: true,
                section_holds: vec![format!(
                    "`{}` ({profile}): no report: no folder of profile `{profile}` among the results given (does not block merges)",
                    text(&non_blocking, "leg")
                )],
            },
        },
        Case {
            name: "blocking-leg-breaks",
            tree: &broken,
            matrix: format!("leg:{native_leg}"),
            packed_from: &packed_from,
            leave_out: Some(&native_leg),
            expect: Expect {
                gate_passes: false,
                gate_status: Some(1),
                run_passes: false,
                section_holds: vec![format!("`{native_leg}` ({profile}): **no report**")],
            },
        },
        Case {
            name: "planted-count-regression",
            tree: &committed,
            matrix: NO_LEG.into(),
            packed_from: &planted_from,
            leave_out: None,
            expect: Expect {
                gate_passes: false,
                gate_status: Some(3),
                run_passes: false,
                section_holds: vec![format!("`{count_leg}` ({profile}): **regressed**: `{cell}` (instructions)")],
            },
        },
    ];
    let upload = upload_step(repo)?;
    let mut wrong_runs = 0;
    for case in &cases {
        for entry in &entries {
            let leg = text(entry, "leg");
            let has_any = has_results(leg) || has_results(text(entry, "count_leg"));
            if has_any && case.leave_out != Some(leg) {
                pack(repo, &upload, &store, case.name, case.packed_from, entry)?;
            }
        }
        say(&format!(
            "workflow run `{}`: act push -j side-by-side --matrix {} ({})",
            case.name,
            case.matrix,
            case.tree.display()
        ));
        let outcome = act(
            repo,
            &Run {
                workflow: WORKFLOW,
                event: "push",
                job: "side-by-side",
                matrix: vec![case.matrix.clone()],
                tree: case.tree.to_path_buf(),
                store: store.clone(),
                name: case.name.to_owned(),
                env: env_without(case.matrix.strip_prefix("leg:").unwrap_or_default()),
                log: base.join(format!("{}.log", case.name)),
                show: false,
            },
        )?;
        // The gate's section of side-by-side's job summary, as act shows it, and as the
        // comparison's artifact keeps it (gate.md): the two must agree.
        let summary = outcome.summary("side-by-side");
        let section = summary
            .find("### Legs that block merges")
            .map_or("", |at| &summary[at..])
            .trim()
            .to_owned();
        let section_file = store
            .join("artifacts")
            .join(case.name)
            .join("side-by-side/gate.md");
        let kept = std::fs::read_to_string(&section_file).unwrap_or_default();
        eprint!("{}", outcome.describe());
        eprintln!("  side-by-side's job summary, its gate section:");
        for line in section.lines() {
            eprintln!("    {line}");
        }
        let plan_printed = outcome
            .printed
            .iter()
            .any(|(job, line)| job == "plan" && line.starts_with("{\"include\""));
        let mut wrong = judge(&outcome, &section, &case.expect);
        if kept.trim() != section {
            wrong.push(format!(
                "{} does not hold the job summary's gate section",
                section_file.display()
            ));
        }
        if !plan_printed {
            wrong.push("the plan job printed no legs".into());
        }
        if wrong.is_empty() {
            say(&format!("workflow run `{}`: as expected", case.name));
        } else {
            wrong_runs += 1;
            say(&format!(
                "failed: workflow run `{}`: {} (log: {})",
                case.name,
                wrong.join("; "),
                base.join(format!("{}.log", case.name)).display()
            ));
        }
    }
    let wrong = init_workflow(repo, &base, &store, &host)?;
    if wrong.is_empty() {
        say("workflow run `init-default`: as expected");
    } else {
        wrong_runs += 1;
        say(&format!(
            "failed: workflow run `init-default`: {} (log: {})",
            wrong.join("; "),
            base.join("init-default.log").display()
        ));
    }
    Ok(u8::from(wrong_runs > 0))
}

/// The variables of a job run in `home`: cargo's and rustup's folders stay the user's.
fn home_env(home: &Path) -> Vec<(String, String)> {
    let own = env_path("HOME", || PathBuf::from("/root"));
    let tool = |name: &str, under: &str| {
        env_path(name, || own.join(under))
            .to_string_lossy()
            .into_owned()
    };
    vec![
        ("HOME".into(), home.to_string_lossy().into_owned()),
        ("CARGO_HOME".into(), tool("CARGO_HOME", ".cargo")),
        ("RUSTUP_HOME".into(), tool("RUSTUP_HOME", ".rustup")),
    ]
}

/// The workflow `ipc-matrix init` writes, run the same way, in a folder init wrote
/// (a repository of its own) and a home of its own: the ipc-matrix this test command
/// built stands in for the one its install step builds, as a cache entry under that
/// step's key (a hit brings it, as it brings the built one on GitHub). Its plan and this
/// machine's leg must pass, the leg's job summary show its cells and its artifact hold
/// the leg's results. What differs from what was expected, each a sentence.
fn init_workflow(repo: &Repo, base: &Path, store: &Path, host: &str) -> Result<Vec<String>> {
    let dir = base.join("init/user-repository");
    let home = base.join("init/home");
    std::fs::create_dir_all(&dir)?;
    std::fs::create_dir_all(&home)?;
    let rev = output(
        Command::new("git")
            .current_dir(&repo.root)
            .args(["rev-parse", "HEAD"]),
    )?
    .trim()
    .to_owned();
    let target = reports::suite_target();
    let mut init = reports::cli(
        repo,
        target.as_deref(),
        &["init".into(), "--rev".into(), rev.clone()],
    )?;
    output(init.current_dir(&dir)).context("ipc-matrix init, in a folder of its own")?;
    commit_all(&dir)?;
    let built = repo
        .target_dir
        .join(target.unwrap_or_default())
        .join("debug/ipc-matrix");
    let installed = home.join(".ipc-matrix/bin");
    std::fs::create_dir_all(&installed)?;
    std::fs::copy(&built, installed.join("ipc-matrix"))
        .with_context(|| built.display().to_string())?;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "X64",
        "aarch64" => "ARM64",
        other => other,
    };
    let key = format!("ipc-matrix-{rev}-Linux-{arch}");
    output(
        Command::new("python3")
            .arg(repo.root.join("xtask/stand-ins/stand_in.py"))
            .arg("cache-save")
            .current_dir(&dir)
            .env("HOME", &home)
            .env("GITHUB_WORKSPACE", &dir)
            .env("IPC_MATRIX_ACT_STORE", store)
            .env("STAND_IN_KEY", &key)
            .env("STAND_IN_PATH", "~/.ipc-matrix"),
    )?;
    std::fs::remove_dir_all(home.join(".ipc-matrix"))?;
    let leg = format!("{host}@native");
    say(&format!(
        "workflow run `init-default`: act push -j leg --matrix leg:{leg} ({})",
        dir.display()
    ));
    let outcome = act(
        repo,
        &Run {
            workflow: ".github/workflows/ipc-matrix.yml",
            event: "push",
            job: "leg",
            matrix: vec![format!("leg:{leg}")],
            tree: dir.clone(),
            store: store.to_path_buf(),
            name: "init-default".into(),
            env: home_env(&home),
            log: base.join("init-default.log"),
            show: false,
        },
    )?;
    eprint!("{}", outcome.describe());
    let summary = outcome.summary("leg");
    eprintln!("  the leg's job summary, its first lines:");
    for line in summary.lines().take(12) {
        eprintln!("    {line}");
    }
    let mut wrong = Vec::new();
    for job in ["plan", "leg"] {
        match outcome.job(job).first() {
            None => wrong.push(format!("{job} did not run")),
            Some(j) if j.failed() => wrong.push(format!("{job} ended {}", j.result)),
            Some(_) => {}
        }
    }
    if !outcome.printed.iter().any(|(job, line)| {
        job == "leg" && line.contains(&format!("Cache restored from key: {key}"))
    }) {
        wrong.push("the leg did not restore ipc-matrix from its cache".into());
    }
    if !summary.contains("echo::local::64B") {
        wrong.push("the leg's job summary does not show echo::local::64B".into());
    }
    let uploaded = store
        .join("artifacts/init-default")
        .join(format!("results-{leg}"))
        .join(&leg)
        .join("quick/results.json");
    if !uploaded.is_file() {
        wrong.push(format!("no {}", uploaded.display()));
    }
    Ok(wrong)
}

/// `text` with the characters a regular expression reads specially escaped.
fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}
