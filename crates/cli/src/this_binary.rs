//! This binary started again, for a child of its own (a cell in its own process, a
//! plugin's probe, a conformance check): through the runner prefix
//! ([`PEER_RUNNER_ENV`]) when one is set, since under QEMU user mode the kernel cannot
//! start a binary of the emulated CPU by itself (no binfmt_misc is assumed).

use ipc_matrix_scenario::PEER_RUNNER_ENV;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

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

/// The text a child of ours wrote for us at `file`, when it is there: read without blocking
/// and at most `bound` bytes, since code that is not ours ran in that child (a plugin's, an
/// emulator) and could have put a FIFO or a flood there instead. `what` names it in errors.
pub fn read_childs_word(file: &Path, bound: u64, what: &str) -> Option<String> {
    let bytes = ipc_matrix_results::read_bounded(file, bound, what).ok()?;
    String::from_utf8(bytes).ok()
}

/// Waits for `child`, looking every `period`: its exit status, or `None` once `limit` has
/// passed, the child then killed and reaped.
pub fn wait_within(
    child: &mut Child,
    limit: Duration,
    period: Duration,
) -> std::io::Result<Option<ExitStatus>> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(period);
    }
}
