//! This binary started again, for a child of its own (a cell in its own process, a
//! plugin's probe, a conformance check): through the runner prefix
//! ([`PEER_RUNNER_ENV`]) when one is set, since under QEMU user mode the kernel cannot
//! start a binary of the emulated CPU by itself (no binfmt_misc is assumed).

use ipc_matrix_scenario::PEER_RUNNER_ENV;
use std::process::Command;

/// A command that starts this binary again, the way its peers are started.
pub fn command() -> std::io::Result<Command> {
    let exe = std::env::current_exe()?;
    let runner: Vec<String> = std::env::var(PEER_RUNNER_ENV)
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    Ok(match runner.split_first() {
        Some((first, rest)) => {
            let mut command = Command::new(first);
            command.args(rest).arg(exe);
            command
        }
        None => Command::new(exe),
    })
}
