//! Two `ipc-matrix run`s at once: into one results folder, exactly one runs its cells and
//! the other is refused before any cell, so the folder holds one run and the report judges
//! it; into two folders, both run, each folder holding its own run.

mod common;

use common::{leg, printed_run_id, text, Scratch};
use ipc_matrix_results::{read_run, run_dir};
use std::process::Output;

/// Two fast cells. The peer of the local cell waits 2 ms before each of its 310 replies
/// (`IPC_MATRIX_PEER_DELAY_US` below), so a run holds its folder for at least 0.6 s
/// whatever the machine: the other process, started at the same moment, asks for the
/// folder well within that time.
const MATRIX: &str = test_matrix!(
    "- { name: echo, kind: echo, transports: [tcp, local], payloads: [200B], iterations: 300, warmup: 10, timeout: 5s }",
);
const CELLS: usize = 2;
const REFUSED: &str = "another ipc-matrix run is writing results into";

/// Starts two runs at the same moment, into `out_a` and `out_b`, and waits for both.
fn two_runs(s: &Scratch, out_a: &str, out_b: &str) -> (Output, Output) {
    let start = |out: &str| {
        s.command(&["run", "--out", out, "--baselines", "baselines"])
            .env("IPC_MATRIX_PEER_DELAY_US", "2000")
            .env("IPC_MATRIX_PEER_DELAY_CELLS", "::local::")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start(out_a), start(out_b));
    (a.wait_with_output().unwrap(), b.wait_with_output().unwrap())
}

/// A run that ran all its cells: passed, and its id as printed.
fn ran(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(0), "{}", text(output));
    assert!(
        text(output).contains(&format!("{CELLS} cells: {CELLS} passed, 0 failed")),
        "{}",
        text(output)
    );
    printed_run_id(&text(output)).unwrap_or_else(|| panic!("no run id: {}", text(output)))
}

/// The folder under `out` holds the results of run `id` alone, every cell once.
fn holds_only(s: &Scratch, out: &str, id: &str) {
    let stored = read_run(&run_dir(&s.path(out), &leg(), "quick"), None).unwrap();
    assert_eq!(stored.run_id, id);
    assert_eq!(stored.results.len(), CELLS);
    assert_eq!(stored.other_runs, 0, "results of another run in {out}");
}

#[test]
fn two_runs_into_one_folder_at_once_one_runs_the_other_is_refused() {
    let s = Scratch::new("concurrent-same", MATRIX);
    let (a, b) = two_runs(&s, "out", "out");
    let refused = |o: &Output| o.status.code() == Some(2) && text(o).contains(REFUSED);
    let (winner, loser) = match (refused(&a), refused(&b)) {
        (false, true) => (&a, &b),
        (true, false) => (&b, &a),
        _ => panic!(
            "exactly one run must be refused\n--- first:\n{}\n--- second:\n{}",
            text(&a),
            text(&b)
        ),
    };
    assert!(!text(loser).contains("PASS"), "{}", text(loser));
    let id = ran(winner);
    holds_only(&s, "out", &id);

    // The report judges that run, and names it.
    let report = s.run(&["report", "--results", "out", "--baselines", "baselines"]);
    assert!(report.status.success(), "{}", text(&report));
    assert!(
        text(&report).contains(&format!("0 unchanged, {CELLS} new")),
        "{}",
        text(&report)
    );
    let markdown =
        std::fs::read_to_string(run_dir(&s.path("out"), &leg(), "quick").join("report.md"))
            .unwrap();
    assert!(
        markdown.contains(&format!(
            "Run {id}: {CELLS} cells: {CELLS} passed, 0 failed."
        )),
        "{markdown}"
    );
    assert!(!markdown.contains("other runs"), "{markdown}");
}

#[test]
fn two_runs_into_two_folders_at_once_both_run() {
    let s = Scratch::new("concurrent-apart", MATRIX);
    let (a, b) = two_runs(&s, "out-a", "out-b");
    let (id_a, id_b) = (ran(&a), ran(&b));
    assert_ne!(id_a, id_b);
    holds_only(&s, "out-a", &id_a);
    holds_only(&s, "out-b", &id_b);
}
