//! `ipc-matrix history`: several runs' results.json as per-cell trends, in order of time
//! and labelled by commit; refuses what is not a report, leaves out other schemas.

mod common;

use common::{text, Scratch};
use ipc_matrix_results::{fixture, write_result, CellResult};

const MATRIX: &str = test_matrix!(
    "- { name: echo, kind: echo, transports: [tcp, udp], payloads: [200B], iterations: 300, warmup: 0, timeout: 1s }",
);
const LEG: &str = "x86_64-unknown-linux-gnu@native";

/// Stores a run of both cells, tcp around `tcp_ns`, finished at `at`, and writes its
/// report as commit `commit` into `results`.
fn run_at(scratch: &Scratch, results: &str, run: &str, at: u64, tcp_ns: u64, commit: &str) {
    let env = fixture::environment("native", "Test CPU");
    for (cell, center) in fixture::cells(MATRIX, "quick").iter().zip([tcp_ns, 40_000]) {
        let samples = (0..300u64)
            .map(|i| center * (90 + (i * 7919) % 21) / 100)
            .collect();
        let mut result: CellResult = fixture::passed(cell, &env, samples);
        result.run_id = run.to_string();
        result.finished_at_unix = at;
        write_result(&scratch.path(results), &result).unwrap();
    }
    let output = scratch
        .command(&["report", "--results", results, "--leg", LEG])
        .env("GITHUB_SHA", commit)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn runs_are_drawn_oldest_first_with_their_commits_and_the_cell_that_moved_first() {
    let scratch = Scratch::new("history", MATRIX);
    let (old, new) = ("1".repeat(40), "2".repeat(40));
    // Given newest first: history orders by time, not by argument.
    run_at(&scratch, "new", "run-b", 1_796_000_000, 90_000, &new);
    run_at(&scratch, "old", "run-a", 1_795_000_000, 45_000, &old);
    let output = scratch.run(&["history", "new", "old", "--out", "hist"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("history of 2 runs over 1 leg"),
        "{}",
        text(&output)
    );
    let md = std::fs::read_to_string(scratch.path("hist/history.md")).unwrap();
    let (first, second) = (md.find("1111111 ").unwrap(), md.find("2222222 ").unwrap());
    assert!(first < second, "{md}");
    // tcp doubled, udp held: tcp is listed first, with how far it moved.
    let tcp = md.find("| `echo::tcp::200B` | 2.00x |").expect(&md);
    let udp = md.find("| `echo::udp::200B` | 1.00x |").expect(&md);
    assert!(tcp < udp, "{md}");
    let page = std::fs::read_to_string(scratch.path("hist/history.html")).unwrap();
    assert!(page.contains("echo::tcp::200B: median round trip per run"));

    // The same run found twice (an artifact downloaded twice) is read once.
    let output = scratch.run(&["history", "new", "old", "new", ".", "--out", "hist"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("history of 2 runs"),
        "{}",
        text(&output)
    );
}

#[test]
fn a_file_that_is_not_a_report_is_named_and_another_schema_is_left_out() {
    let scratch = Scratch::new("history-bad", MATRIX);
    run_at(
        &scratch,
        "ok",
        "run-a",
        1_795_000_000,
        45_000,
        &"1".repeat(40),
    );

    std::fs::create_dir_all(scratch.path("old")).unwrap();
    std::fs::write(
        scratch.path("old/results.json"),
        r#"{"schema_version": 1, "leg": "x", "profile": "quick", "generated_at_unix": 1, "cells": []}"#,
    )
    .unwrap();
    let output = scratch.run(&["history", "ok", "old", "--out", "hist"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("report schema 1"),
        "{}",
        text(&output)
    );
    assert!(
        text(&output).contains("history of 1 run over 1 leg"),
        "{}",
        text(&output)
    );

    std::fs::create_dir_all(scratch.path("bad")).unwrap();
    std::fs::write(
        scratch.path("bad/results.json"),
        "{\"schema_version\": 3, \"leg\": ",
    )
    .unwrap();
    let output = scratch.run(&["history", "ok", "bad", "--out", "hist"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("bad/results.json"),
        "{}",
        text(&output)
    );

    let output = scratch.run(&["history", "nowhere", "--out", "hist"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("nowhere: no such file or folder"),
        "{}",
        text(&output)
    );
}
