//! `ipc-matrix init` from a user's empty folder: what it writes, what it refuses, and
//! the workflow it writes, its steps run here as a GitHub runner would run them (plan,
//! run, report into the job summary, upload), then the first baselines accepted from
//! that "artifact" as `baseline accept --artifacts` takes CI's.

use serde_yaml::Value;
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ipc-matrix");

/// An empty scratch folder, removed when dropped.
struct Empty(PathBuf);

impl Empty {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("ipc-matrix-init-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// The binary with `args`, run in the folder (through QEMU when the suite runs
    /// emulated, as common::Scratch starts it).
    fn ipc_matrix<S: AsRef<OsStr>>(&self, args: &[S]) -> std::process::Output {
        let runner = std::env::var(ipc_matrix_scenario::PEER_RUNNER_ENV).unwrap_or_default();
        let mut words = runner.split_whitespace();
        let mut command = match words.next() {
            Some(first) => {
                let mut c = Command::new(first);
                c.args(words).arg(BIN);
                c
            }
            None => Command::new(BIN),
        };
        command
            .args(args)
            .current_dir(&self.0)
            .env_remove("GITHUB_ACTIONS")
            .env_remove("GITHUB_SHA")
            .env_remove(ipc_matrix_results::NEXTEST_RUN_ID_ENV)
            .output()
            .unwrap()
    }

    fn files(&self) -> Vec<String> {
        let mut found = Vec::new();
        let mut folders = vec![self.0.clone()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else {
                    let rel = path.strip_prefix(&self.0).unwrap();
                    found.push(rel.display().to_string());
                }
            }
        }
        found.sort();
        found
    }
}

impl Drop for Empty {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every file and folder below `folder`, recursively, each with its kind and size
/// (symlinks not followed): what a refused or failed init must leave as it was.
fn listing(folder: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut folders = vec![folder.to_path_buf()];
    while let Some(next) = folders.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            let meta = path.symlink_metadata().unwrap();
            let kind = match meta.file_type() {
                k if k.is_dir() => "folder",
                k if k.is_file() => "file",
                k if k.is_symlink() => "symlink",
                _ => "other",
            };
            if kind == "folder" {
                folders.push(path.clone());
            }
            let rel = path.strip_prefix(folder).unwrap().display().to_string();
            found.push(format!("{rel}: {kind}, {} bytes", meta.size()));
        }
    }
    found.sort();
    found
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const REV: &str = "0123456789abcdef0123456789abcdef01234567";

#[test]
fn init_writes_a_matrix_a_baselines_folder_and_a_workflow_pinned_at_the_commit_given() {
    let dir = Empty::new("writes");
    let out = dir.ipc_matrix(&["init", "--rev", REV]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        dir.files(),
        [
            ".github/workflows/ipc-matrix.yml",
            "baselines/README.md",
            "matrix.yaml"
        ]
    );
    let workflow = std::fs::read_to_string(dir.0.join(".github/workflows/ipc-matrix.yml")).unwrap();
    assert!(
        workflow.contains(&format!("IPC_MATRIX_REV: {REV}")),
        "{workflow}"
    );
    assert!(
        !workflow.replace("${{", "").contains("{{"),
        "a placeholder is left: {workflow}"
    );
    // What it wrote is what `run` reads: the cells are listed.
    let out = dir.ipc_matrix(&["list"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let listed = String::from_utf8_lossy(&out.stdout);
    for cell in ["echo::local::64B", "echo::tcp::4KiB"] {
        assert!(
            listed.lines().any(|l| l.trim() == cell),
            "{cell} not in: {listed}"
        );
    }
}

#[test]
fn init_writes_over_nothing_without_force_and_says_what_is_there() {
    let dir = Empty::new("refuses");
    std::fs::write(dir.0.join("matrix.yaml"), "mine\n").unwrap();
    let out = dir.ipc_matrix(&["init", "--rev", REV]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("matrix.yaml already there; nothing written"),
        "{}",
        text(&out)
    );
    assert_eq!(
        dir.files(),
        ["matrix.yaml"],
        "only the user's file is there"
    );
    assert_eq!(
        std::fs::read_to_string(dir.0.join("matrix.yaml")).unwrap(),
        "mine\n"
    );
    let out = dir.ipc_matrix(&["init", "--rev", REV, "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(dir.files().len(), 3);
    assert_ne!(
        std::fs::read_to_string(dir.0.join("matrix.yaml")).unwrap(),
        "mine\n"
    );
}

/// Runs init in `dir` with `args`, which it must refuse: exit 2, a message saying `said`,
/// and every file and folder of `dir` as it was.
fn refused_leaving_all_as_it_was(dir: &Empty, args: &[&str], said: &str) {
    let before = listing(&dir.0);
    let out = dir.ipc_matrix(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    assert!(text(&out).contains(said), "{args:?}: {}", text(&out));
    assert_eq!(listing(&dir.0), before, "{args:?}: {}", text(&out));
}

#[test]
fn a_file_named_github_is_refused_before_anything_is_written() {
    let dir = Empty::new("github-file");
    std::fs::write(dir.0.join(".github"), "mine\n").unwrap();
    refused_leaving_all_as_it_was(
        &dir,
        &["init", "--rev", REV],
        "./.github is a file, not a folder",
    );
    // Nothing was left half-written: with the file moved away, init writes all.
    std::fs::remove_file(dir.0.join(".github")).unwrap();
    let out = dir.ipc_matrix(&["init", "--rev", REV]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn a_file_named_github_workflows_is_refused_before_anything_is_written() {
    let dir = Empty::new("workflows-file");
    std::fs::create_dir(dir.0.join(".github")).unwrap();
    std::fs::write(dir.0.join(".github/workflows"), "mine\n").unwrap();
    refused_leaving_all_as_it_was(
        &dir,
        &["init", "--rev", REV],
        "./.github/workflows is a file, not a folder",
    );
}

#[test]
fn a_file_named_baselines_is_refused_before_anything_is_written() {
    let dir = Empty::new("baselines-file");
    std::fs::write(dir.0.join("baselines"), "mine\n").unwrap();
    refused_leaving_all_as_it_was(
        &dir,
        &["init", "--rev", REV],
        "./baselines is a file, not a folder",
    );
}

#[test]
fn a_symlink_to_nothing_or_a_folder_where_a_file_goes_is_refused_even_with_force() {
    let dir = Empty::new("not-a-file");
    std::os::unix::fs::symlink("nowhere", dir.0.join(".github")).unwrap();
    refused_leaving_all_as_it_was(
        &dir,
        &["init", "--rev", REV],
        "./.github is a symlink to nothing, not a folder",
    );
    std::fs::remove_file(dir.0.join(".github")).unwrap();
    std::fs::create_dir_all(dir.0.join(".github/workflows/ipc-matrix.yml")).unwrap();
    refused_leaving_all_as_it_was(
        &dir,
        &["init", "--rev", REV, "--force"],
        "./.github/workflows/ipc-matrix.yml is a folder, not a file",
    );
}

/// Unmounts its folder when dropped, whatever the test did.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.0).status();
        if !unmounted.is_ok_and(|s| s.success()) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

#[test]
fn on_a_full_disk_init_leaves_the_folder_as_it_was() {
    let dir = Empty::new("full-disk");
    // The folder was made by this process: its owner is who the test runs as.
    if std::fs::metadata(&dir.0).unwrap().uid() != 0 {
        println!("skipped: mounting a small file system needs root");
        return;
    }
    let disk = dir.0.join("disk");
    std::fs::create_dir(&disk).unwrap();
    let mount = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&disk)
        .output();
    match mount {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            println!("skipped: mount -t tmpfs failed: {}", text(&out));
            return;
        }
        Err(e) => {
            println!("skipped: no mount command: {e}");
            return;
        }
    }
    let _mounted = Mounted(disk.clone());
    // Filled, then two pages freed (on 4 KiB pages): room for the first staged files,
    // not for the workflow.
    let filler_path = disk.join("filler");
    let mut filler = std::fs::File::create(&filler_path).unwrap();
    let page = [0u8; 4096];
    while std::io::Write::write_all(&mut filler, &page).is_ok() {}
    let full = filler.metadata().unwrap().len();
    filler.set_len(full.saturating_sub(2 * 4096)).unwrap();
    drop(filler);
    let before = listing(&disk);
    let out = dir.ipc_matrix(&["init", "--rev", REV, "disk"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("No space left on device"),
        "{}",
        text(&out)
    );
    assert_eq!(listing(&disk), before, "{}", text(&out));
}

#[test]
fn a_plugin_value_that_is_not_utf8_is_refused_naming_the_flag_and_the_value() {
    use std::os::unix::ffi::OsStrExt;
    let dir = Empty::new("plugin-not-utf8");
    let value = OsStr::from_bytes(b"mine=lib\xff\x1b[31m.so");
    let args = [
        OsStr::new("init"),
        OsStr::new("--rev"),
        OsStr::new(REV),
        OsStr::new("--plugin"),
        value,
    ];
    let out = dir.ipc_matrix(&args);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    for words in ["--plugin", "mine=lib\u{fffd}\\u{1b}[31m.so", "UTF-8"] {
        assert!(said.contains(words), "{words} not in: {said}");
    }
    assert!(
        !said.contains('\u{1b}'),
        "an escape reached the terminal: {said}"
    );
    assert!(dir.files().is_empty(), "wrote {:?}", dir.files());
}

#[test]
fn bad_arguments_to_init_are_refused_saying_why_and_write_nothing() {
    let dir = Empty::new("bad");
    for (args, said) in [
        (vec!["init", "--rev", "abc"], "is not a commit"),
        (
            vec!["init", "--rev", REV, "--plugin", "nolibrary"],
            "is not NAME=LIBRARY",
        ),
        (
            vec!["init", "--rev", REV, "--plugin", "Bad=lib.so"],
            "a stack's name is a-z",
        ),
        (
            vec!["init", "--rev", REV, "--plugin", "tcp=lib.so"],
            "is a built-in transport",
        ),
        (
            vec!["init", "--rev", REV, "--plugin", "mine="],
            "`library` is empty",
        ),
        (
            vec!["init", "--rev", REV, "no-such-folder"],
            "no such folder",
        ),
    ] {
        let out = dir.ipc_matrix(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(said), "{args:?}: {}", text(&out));
        assert!(dir.files().is_empty(), "{args:?} wrote {:?}", dir.files());
    }
}

#[test]
fn a_plugin_goes_into_the_matrix_and_the_workflow_builds_it_before_the_cells_run() {
    let dir = Empty::new("plugin");
    let out = dir.ipc_matrix(&[
        "init",
        "--rev",
        REV,
        "--plugin",
        "mystack=build/{arch}/libmystack.so",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = dir.ipc_matrix(&["list"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("echo::mystack::64B"),
        "{}",
        text(&out)
    );
    let workflow = read_workflow(&dir.0);
    let steps = steps(&workflow, "leg");
    let build = steps
        .iter()
        .position(|s| name(s) == "Build the stack's library");
    let run = steps
        .iter()
        .position(|s| name(s).starts_with("Run the cells"));
    assert!(
        matches!((build, run), (Some(b), Some(r)) if b < r),
        "{steps:?}"
    );
}

/// The committed example (examples/init/, which scripts/lint-workflows.sh lints with
/// actionlint and zizmor) is what init writes.
#[test]
fn the_linted_example_is_what_init_writes() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/init");
    let dir = Empty::new("example");
    let out = dir.ipc_matrix(&[
        "init",
        "--rev",
        "0000000000000000000000000000000000000000",
        "--plugin",
        "mystack=build/{arch}/libmystack.so",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for file in dir.files() {
        let written = std::fs::read_to_string(dir.0.join(&file)).unwrap();
        let committed = std::fs::read_to_string(example.join(&file))
            .unwrap_or_else(|e| panic!("examples/init/{file}: {e}"));
        assert!(
            written == committed,
            "examples/init/{file} is not what init writes: run `ipc-matrix init --rev {} --plugin mystack=build/{{arch}}/libmystack.so --force examples/init`",
            "0".repeat(40)
        );
    }
}

fn read_workflow(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join(".github/workflows/ipc-matrix.yml")).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

fn steps(workflow: &Value, job: &str) -> Vec<Value> {
    workflow["jobs"][job]["steps"]
        .as_sequence()
        .unwrap_or_else(|| panic!("job {job} has no steps"))
        .clone()
}

fn name(step: &Value) -> &str {
    step["name"].as_str().unwrap_or("")
}

/// Runs a job's `run:` steps in order as a runner does (bash -eo pipefail, the step's
/// env, GITHUB_OUTPUT, GITHUB_PATH and GITHUB_STEP_SUMMARY as files), with `${{ ... }}`
/// in a step's env taken from `expressions`. Installing ipc-matrix is the one step not
/// run: this binary is put where it would be installed.
fn run_job(dir: &Path, home: &Path, job: &[Value], expressions: &[(&str, &str)], files: &Runner) {
    for step in job {
        let Some(script) = step["run"].as_str() else {
            continue;
        };
        if script.contains("cargo install") {
            continue;
        }
        let mut path = std::env::var("PATH").unwrap();
        for line in std::fs::read_to_string(&files.path)
            .unwrap_or_default()
            .lines()
        {
            path = format!("{line}:{path}");
        }
        let mut command = Command::new("bash");
        command
            .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
            .current_dir(dir)
            .env("HOME", home)
            .env("PATH", path)
            .env("GITHUB_OUTPUT", &files.output)
            .env("GITHUB_PATH", &files.path)
            .env("GITHUB_STEP_SUMMARY", &files.summary)
            .env_remove("GITHUB_ACTIONS")
            .env_remove("GITHUB_SHA")
            .env_remove(ipc_matrix_results::NEXTEST_RUN_ID_ENV);
        if let Some(env) = step["env"].as_mapping() {
            for (key, value) in env {
                let mut value = value.as_str().unwrap().to_owned();
                for (expression, is) in expressions {
                    value = value.replace(&format!("${{{{ {expression} }}}}"), is);
                }
                assert!(
                    !value.contains("${{"),
                    "step {}: no value for {value}",
                    name(step)
                );
                command.env(key.as_str().unwrap(), value);
            }
        }
        let out = command.output().unwrap();
        assert!(
            out.status.success(),
            "step `{}` failed: {}",
            name(step),
            text(&out)
        );
    }
}

struct Runner {
    output: PathBuf,
    path: PathBuf,
    summary: PathBuf,
}

#[test]
fn the_workflow_init_writes_runs_its_legs_and_its_first_baselines_come_from_their_artifacts() {
    let dir = Empty::new("workflow");
    let out = dir.ipc_matrix(&["init", "--rev", REV]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let workflow = read_workflow(&dir.0);
    // The runner's own files, and ipc-matrix where the install step puts it.
    let runner = Empty::new("workflow-runner");
    let home = runner.0.join("home");
    std::fs::create_dir_all(home.join(".ipc-matrix/bin")).unwrap();
    std::os::unix::fs::symlink(BIN, home.join(".ipc-matrix/bin/ipc-matrix")).unwrap();
    let files = |job: &str| Runner {
        output: runner.0.join(format!("{job}.output")),
        path: runner.0.join(format!("{job}.path")),
        summary: runner.0.join(format!("{job}.summary")),
    };

    let plan = files("plan");
    run_job(&dir.0, &home, &steps(&workflow, "plan"), &[], &plan);
    let output = std::fs::read_to_string(&plan.output).unwrap();
    let legs = output
        .strip_prefix("legs=")
        .expect("the plan's output is legs=");
    let legs: serde_json::Value = serde_json::from_str(legs.trim()).unwrap();
    // The suite runs natively on Linux (gnu): the leg `ipc-matrix run` writes here.
    let host = format!("{}-unknown-linux-gnu@native", std::env::consts::ARCH);
    let this_leg = legs["include"]
        .as_array()
        .unwrap()
        .iter()
        .find(|leg| leg["leg"] == host.as_str())
        .unwrap_or_else(|| panic!("no leg {host} in {legs}"));
    for field in ["os", "blocks_merge", "leg"] {
        assert!(
            !this_leg[field].is_null(),
            "the leg job reads matrix.{field}: {this_leg}"
        );
    }

    let leg = files("leg");
    run_job(
        &dir.0,
        &home,
        &steps(&workflow, "leg"),
        &[("matrix.leg", &host)],
        &leg,
    );
    let summary = std::fs::read_to_string(&leg.summary).unwrap();
    assert!(
        summary.contains("echo::local::64B"),
        "the job summary: {summary}"
    );

    // What the upload step uploads, downloaded as `gh run download -D legs` lays it out.
    let upload = steps(&workflow, "leg")
        .into_iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .expect("the leg uploads its results");
    let uploaded = upload["with"]["path"].as_str().unwrap().trim();
    let artifact_name = upload["with"]["name"]
        .as_str()
        .unwrap()
        .replace("${{ matrix.leg }}", &host);
    let artifact = runner.0.join("legs").join(artifact_name);
    std::fs::create_dir_all(artifact.parent().unwrap()).unwrap();
    let copied = Command::new("cp")
        .arg("-r")
        .arg(dir.0.join(uploaded.trim_end_matches('/')))
        .arg(&artifact)
        .status()
        .unwrap();
    assert!(copied.success());
    let out = dir.ipc_matrix(&[
        "baseline",
        "accept",
        "--artifacts",
        runner.0.join("legs").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        dir.0.join(format!("baselines/{host}/quick.json")).is_file(),
        "{}: {:?}",
        text(&out),
        dir.files()
    );
}
