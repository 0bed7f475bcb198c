//! The `Channel` contract, written once (`checks.rs`) and run for every transport and wake
//! mode (`checks::subjects`): one test `<subject>::<check>` each, against a peer that is a
//! real separate process (`peer.rs`: this binary, started again with a role in its
//! environment, through `IPC_MATRIX_PEER_RUNNER` under QEMU). Every blocking call has a
//! deadline, and every peer gives up on its own: no test can hang.

mod checks;
mod peer;
mod support;

use libtest_mimic::{Arguments, Trial};

fn main() {
    if let Ok(role) = std::env::var(support::PEER_ROLE_ENV) {
        peer::main(&role);
    }
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for subject in checks::subjects() {
        for check in checks::CHECKS.iter().filter(|c| (c.applies)(subject)) {
            let run = check.run;
            trials.push(Trial::test(
                format!("{}::{}", subject.name(), check.name),
                move || run(subject).map_err(Into::into),
            ));
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
