//! What the tests that start `ipc-matrix run` share: a scratch folder with a matrix file
//! of their own, and the command that starts the binary (through QEMU when the suite runs
//! emulated), as its own run.

#![allow(dead_code)] // each test binary uses a part

use std::path::PathBuf;

/// A matrix file of one native x86_64 target and one profile, `quick`, with the given
/// scenario lines (each a flow mapping, `- { name: ..., kind: ..., ... }`).
#[macro_export]
macro_rules! test_matrix {
    ($($scenario:literal),+ $(,)?) => {
        concat!(
            "\nversion: 1\ntargets:\n  - { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }\nprofiles:\n  quick: { description: test }\nscenarios:\n",
            $("  ", $scenario, "\n"),+
        )
    };
}
use std::process::{Command, Output};

/// A scratch folder with a matrix file; removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str, matrix: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("ipc-matrix-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("matrix.yaml"), matrix).unwrap();
        Self(dir)
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    /// The binary with `args`, run in the scratch folder (through QEMU when the suite runs
    /// emulated). Each command is a run of its own: nextest's run id, which the cells of
    /// one nextest run share, is not passed on.
    pub fn command(&self, args: &[&str]) -> Command {
        let runner = std::env::var(ipc_matrix_scenario::PEER_RUNNER_ENV).unwrap_or_default();
        let mut words = runner.split_whitespace();
        let mut command = match words.next() {
            Some(first) => {
                let mut c = Command::new(first);
                c.args(words).arg(env!("CARGO_BIN_EXE_ipc-matrix"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_ipc-matrix")),
        };
        command
            .args(args)
            .current_dir(&self.0)
            .env_remove("GITHUB_ACTIONS")
            .env_remove(ipc_matrix_results::NEXTEST_RUN_ID_ENV);
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The run id a finished `ipc-matrix run` printed (`run <id>: N cells: ...`).
pub fn printed_run_id(output: &str) -> Option<String> {
    output.lines().find_map(|line| {
        let rest = line.strip_prefix("run ")?;
        let (id, tail) = rest.split_once(": ")?;
        tail.contains(" cells: ").then(|| id.to_string())
    })
}

/// The leg this test binary's runs store their results under.
pub fn leg() -> String {
    ipc_matrix_results::Environment::capture().leg()
}
