//! The `Channel` contract, written once (`checks`) and run against any transport and wake
//! mode: one test `<subject>::<check>` each, against a peer that is a real separate
//! process (`peer`: the same binary, started again with a role in its environment,
//! through `IPC_MATRIX_PEER_RUNNER` under QEMU). Every blocking call has a deadline, and
//! every peer gives up on its own: no check can hang.
//!
//! Public, so that a test target (`harness = false`) runs the same checks as this crate's
//! own suite: [`main`] with the subjects to check.
//!
//! Layers, each module using only those below it: `support` (message bytes, comparison,
//! the peer process); `peer` (the peer's roles); `subject` (what is checked, and opening
//! its channel); `checks` and `loaned` (the copying and the loaned path's checks);
//! `table` (which checks apply to which subjects); this file.

mod checks;
mod loaned;
mod peer;
mod subject;
mod support;
mod table;

pub use libtest_mimic::{Arguments, ColorSetting, Conclusion};
pub use subject::{stack_subjects, stack_subjects_up_to, subjects, Subject};
pub use support::CheckFailure;

use libtest_mimic::Trial;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The suite's entry point, as a test target's `main`: in a peer process (started by a
/// check), plays its role and exits; otherwise makes one test per subject and check that
/// applies to it, runs those the arguments select (libtest's, as nextest passes them) and
/// exits with libtest's status.
pub fn main(subjects: Vec<Subject>) -> ! {
    serve_if_requested();
    run(&Arguments::from_args(), subjects).exit();
}

/// In a peer process of the suite (started by a check, its role in the environment):
/// plays that role and exits. Elsewhere returns at once. A binary that runs the suite
/// ([`run`]) calls it first, before it reads its command line.
pub fn serve_if_requested() {
    if let Ok(role) = std::env::var(support::PEER_ROLE_ENV) {
        peer::main(&role);
    }
}

/// Runs the checks that apply to `subjects`, those `args` select, one test
/// `<subject>::<check>` each; their peers are this binary started again, which must call
/// [`serve_if_requested`] first.
pub fn run(args: &Arguments, subjects: Vec<Subject>) -> Conclusion {
    run_checks(args, subjects, None)
}

/// Runs a check given its test name somewhere else than in this process (in a process of
/// its own, say, where a crash in a stack's code is that check's failure): its failure,
/// or `Ok`. It must keep [`CHECK_LIMIT`] itself, less a margin.
pub type Elsewhere = Arc<dyn Fn(&str) -> Result<(), CheckFailure> + Send + Sync>;

/// As [`run`], with every check run by `elsewhere`; where it runs one, it calls
/// [`run_one`] with the same subjects.
pub fn run_elsewhere(args: &Arguments, subjects: Vec<Subject>, elsewhere: Elsewhere) -> Conclusion {
    run_checks(args, subjects, Some(elsewhere))
}

/// The check whose test name is `name`, run in this process: `None` when no check that
/// applies to `subjects` has that name.
pub fn run_one(subjects: &[Subject], name: &str) -> Option<Result<(), CheckFailure>> {
    applying(subjects)
        .find(|(test, _, _)| test == name)
        .map(|(_, subject, run)| run(subject))
}

/// Each check that applies to each subject: its test name, its subject, its code.
type CheckCode = fn(Subject) -> Result<(), CheckFailure>;
fn applying(subjects: &[Subject]) -> impl Iterator<Item = (String, Subject, CheckCode)> + '_ {
    subjects.iter().flat_map(|&subject| {
        table::CHECKS
            .iter()
            .filter(move |c| (c.applies)(subject))
            .map(move |c| (format!("{}::{}", subject.name(), c.name), subject, c.run))
    })
}

fn run_checks(
    args: &Arguments,
    subjects: Vec<Subject>,
    elsewhere: Option<Elsewhere>,
) -> Conclusion {
    let running = watchdog();
    let mut trials = Vec::new();
    for (name, subject, run) in applying(&subjects) {
        let running = running.clone();
        let elsewhere = elsewhere.clone();
        trials.push(Trial::test(name.clone(), move || {
            let started = (name, Instant::now());
            lock(&running).push(started.clone());
            let result = match &elsewhere {
                Some(elsewhere) => elsewhere(&started.0),
                None => run(subject),
            };
            lock(&running).retain(|r| *r != started);
            result.map_err(|failure| failure.to_string().into())
        }));
    }
    libtest_mimic::run(args, trials)
}

/// How long a check may run: every wait of a check has a deadline (set-up's and a few
/// operations'), so a check still running after this is stuck in a call that did not
/// keep its deadline. The checks take 2 s at most here, under QEMU too.
pub const CHECK_LIMIT: Duration = Duration::from_secs(150);

/// The checks running, and when each started.
type Running = Arc<Mutex<Vec<(String, Instant)>>>;

/// Watches the running checks: one stuck past [`CHECK_LIMIT`] (inside a stack's call,
/// where no thread can be stopped) ends the run, naming it, with exit status 1.
fn watchdog() -> Running {
    let running: Running = Arc::default();
    let watched = running.clone();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let stuck = lock(&watched)
            .iter()
            .find(|(_, started)| started.elapsed() > CHECK_LIMIT)
            .map(|(name, started)| (name.clone(), started.elapsed()));
        if let Some((name, took)) = stuck {
            eprintln!(
                "error: {name} has run for {took:.0?}, longer than every deadline of a check allows: a call into the stack did not return by its deadline; the run stops here"
            );
            std::process::exit(1);
        }
    });
    running
}

fn lock(running: &Running) -> std::sync::MutexGuard<'_, Vec<(String, Instant)>> {
    running.lock().unwrap_or_else(|e| e.into_inner())
}
