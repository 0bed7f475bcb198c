//! What a user sees of a run, and where the command finds its project: the matrix file
//! found from a subfolder, machine-readable output, quiet and verbose runs, colours, and
//! tables that fit the terminal.

mod common;

use common::{leg, text, Scratch};
use std::path::Path;

/// Three quick cells.
const MATRIX: &str = r#"
version: 1
targets:
  - { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }
profiles:
  quick: { description: test }
scenarios:
  - { name: echo, kind: echo, transports: [tcp, local], payloads: [200B], iterations: 200, warmup: 10, timeout: 5s }
  - { name: bulk, kind: bulk, transports: [tcp], payloads: [64KiB], iterations: 20, warmup: 2, timeout: 5s }
"#;
const CELLS: usize = 3;

#[test]
fn the_matrix_file_and_the_projects_folders_are_found_from_a_subfolder() {
    let s = Scratch::new("walk-up", MATRIX);
    let deeper = s.path("sub/deeper");
    std::fs::create_dir_all(&deeper).unwrap();
    let listed = s.command(&["list"]).current_dir(&deeper).output().unwrap();
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed));
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout).lines().count(),
        CELLS,
        "{}",
        text(&listed)
    );
    let run = s
        .command(&["run", "--filter", "/^echo::tcp/"])
        .current_dir(&deeper)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    // Results in the project's target folder, not the current folder's.
    let cells = s.path(&format!("target/ipc-matrix/{}/quick/cells", leg()));
    assert!(
        cells.join("echo.tcp.200B.json").is_file(),
        "no result under {}: {}",
        cells.display(),
        text(&run)
    );
    assert!(!deeper.join("target").exists());
    // The baselines folder looked for is the project's too.
    assert!(
        text(&run).contains(&format!(
            "no baselines folder at {}",
            s.path("baselines").display()
        )),
        "{}",
        text(&run)
    );
    // CARGO_TARGET_DIR still wins.
    let elsewhere = s.path("elsewhere");
    let run = s
        .command(&["run", "--filter", "/^echo::tcp/"])
        .current_dir(&deeper)
        .env("CARGO_TARGET_DIR", &elsewhere)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert!(elsewhere
        .join(format!(
            "ipc-matrix/{}/quick/cells/echo.tcp.200B.json",
            leg()
        ))
        .is_file());
}

#[test]
fn without_a_matrix_file_above_the_error_says_where_it_looked() {
    let dir = std::env::temp_dir().join(format!("ipc-matrix-cli-nowhere-{}", std::process::id()));
    let deeper = dir.join("a/b");
    std::fs::create_dir_all(&deeper).unwrap();
    // Only meaningful when no folder above the temporary folder holds one.
    if ipc_matrix::project::find_matrix(&std::env::temp_dir()).is_ok() {
        eprintln!(
            "skipped: a matrix.yaml is above {}",
            std::env::temp_dir().display()
        );
        return;
    }
    let s = Scratch(dir.clone());
    for args in [&["list"][..], &["run"], &["report"], &["matrix"]] {
        let output = s.command(args).current_dir(&deeper).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!(
                "could not find matrix.yaml in {} or any folder above it",
                deeper.display()
            )),
            "{args:?}: {stderr}"
        );
    }
    assert!(!Path::new(&deeper).join("target").exists());
}
