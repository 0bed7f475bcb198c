//! Interop with a stock libzmq: the measuring side's REQ socket (libzmq built from source
//! by zmq-sys) against a REP peer on the system's libzmq through pyzmq
//! (`tests/peers/zmq_rep_peer.py`; Debian: python3-zmq). The peer is started exactly as
//! ipc-matrix starts its own, so the whole cell runs: every echo compared byte for byte.
//! Without `/usr/bin/python3` able to import zmq, the tests are listed as ignored (kind
//! "needs pyzmq"), never passed silently. `scripts/test.sh` installs python3-zmq where
//! apt is available.

use ipc_matrix_scenario::{run_cell, RunOptions, PEER_RUNNER_ENV};
use ipc_matrix_spec::{Calls, Cell, TransportKind, Work};
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Debian's python, where python3-zmq installs pyzmq.
const PYTHON: &str = "/usr/bin/python3";

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    // The peer is a host program: an emulator prefix for our own peers must not wrap it.
    std::env::remove_var(PEER_RUNNER_ENV);
    let available = pyzmq_available();
    let mut trials = Vec::new();
    for transport in [TransportKind::Tcp, TransportKind::Local] {
        for size in [1u64, 128, 8192] {
            let name = format!("interop::pyzmq-rep::{transport}::{size}B");
            let trial = Trial::test(name, move || echo_through_pyzmq(transport, size));
            trials.push(if available {
                trial
            } else {
                trial.with_ignored_flag(true).with_kind("needs pyzmq")
            });
        }
    }
    libtest_mimic::run(&args, trials).exit_code()
}

fn pyzmq_available() -> bool {
    Command::new(PYTHON)
        .args(["-c", "import zmq"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn echo_through_pyzmq(transport: TransportKind, size: u64) -> Result<(), Failed> {
    let cell = Cell {
        id: format!("interop::pyzmq-rep::{transport}::{size}B"),
        scenario: "interop".into(),
        transport,
        wake: None,
        payload_bytes: size,
        payload_label: format!("{size}B"),
        iterations: 200,
        warmup: 10,
        seed: 7,
        profile: "interop".into(),
        work: Work::ReqRep(Calls {
            timeout: Duration::from_secs(5),
        }),
        host: Default::default(),
        peer: None,
    };
    let options = RunOptions {
        peer_program: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers/zmq_rep_peer.py"),
        ..RunOptions::default()
    };
    let result = run_cell(&cell, &options);
    if let Some(failure) = result.outcome.failure {
        return Err(format!("{:?}: {}", failure.kind, failure.reason).into());
    }
    if result.measured_round_trips != cell.iterations {
        return Err(format!(
            "{} round trips measured, {} expected",
            result.measured_round_trips, cell.iterations
        )
        .into());
    }
    Ok(())
}
