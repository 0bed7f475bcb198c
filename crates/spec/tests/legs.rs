//! `ipc-matrix-legs`, the binary the workflow's plan job runs, prints exactly the job
//! matrix of [`job_matrix`] (which `ipc-matrix matrix --github` prints too; the CLI's
//! tests hold it to the same function).

use ipc_matrix_spec::github::job_matrix;
use ipc_matrix_spec::Spec;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary with `args` (through QEMU when the suite runs emulated: the runner the
/// harness passes on to peers).
fn legs(args: &[&str]) -> Output {
    let runner = std::env::var("IPC_MATRIX_PEER_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    let mut command = match words.next() {
        Some(first) => {
            let mut c = Command::new(first);
            c.args(words).arg(env!("CARGO_BIN_EXE_ipc-matrix-legs"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_ipc-matrix-legs")),
    };
    command.args(args).output().unwrap()
}

fn repo_matrix() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../matrix.yaml")
}

#[test]
fn prints_the_job_matrix_of_the_repository_as_one_line() {
    let matrix = repo_matrix();
    let out = legs(&["--matrix", matrix.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spec = Spec::load(&matrix).unwrap();
    let expected = job_matrix(&spec).unwrap().to_json();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{expected}\n")
    );
    assert!(
        expected.starts_with(r#"{"include":[{"blocks_merge":"#),
        "{expected}"
    );
}

#[test]
fn a_missing_file_or_a_bad_argument_is_a_usage_error() {
    let out = legs(&["--matrix", "/nonexistent/matrix.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let out = legs(&["--github"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unexpected argument `--github`"));
    let out = legs(&["--matrix"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_native_target_without_a_hosted_runner_is_refused() {
    let dir = std::env::temp_dir().join(format!("ipc-matrix-legs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("matrix.yaml");
    std::fs::write(
        &file,
        "version: 1
targets:
  - { triple: s390x-unknown-linux-gnu, runner: native, blocks_merge: true }
profiles:
  quick: { description: test }
scenarios:
  - { name: echo, kind: echo, transports: [tcp], payloads: [200B], iterations: 10, warmup: 0, timeout: 1s }
",
    )
    .unwrap();
    let out = legs(&["--matrix", file.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no hosted runner"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
