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

/// What history promises for what it finds: another schema of another layout is left out
/// with a note (and a folder of only such files says so), folders below the depth limit
/// are named, a FIFO or a device given is refused for what it is, and two files of one
/// run id are read once with a note naming both and saying whether they differ.
#[test]
fn history_keeps_its_promises_for_odd_files_and_folders() {
    let scratch = Scratch::new("history-odd", MATRIX);
    run_at(
        &scratch,
        "ok",
        "run-a",
        1_795_000_000,
        45_000,
        &"1".repeat(40),
    );
    let future = r#"{"schema_version": 99, "legs": {"x86_64": [1, 2]}}"#;
    std::fs::create_dir_all(scratch.path("future")).unwrap();
    std::fs::write(scratch.path("future/results.json"), future).unwrap();
    let output = scratch.run(&["history", "ok", "future", "--out", "hist"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        text(&output).contains("future/results.json: report schema 99"),
        "{}",
        text(&output)
    );
    let output = scratch.run(&["history", "future", "--out", "hist"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("report schema 99") && text(&output).contains("left out"),
        "{}",
        text(&output)
    );

    let deep = scratch.path("deep/1/2/3/4/5/6/7/8/9/10");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::copy(find_report(&scratch.path("ok")), deep.join("results.json")).unwrap();
    let output = scratch.run(&["history", "ok", "deep", "--out", "hist"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        text(&output).contains("were not searched"),
        "{}",
        text(&output)
    );

    let fifo = scratch.path("fifo.json");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string naming a path in the scratch folder.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    for (given, kind) in [("fifo.json", "a FIFO"), ("/dev/zero", "a device")] {
        let output = scratch.run(&["history", given, "--out", "hist"]);
        assert_eq!(output.status.code(), Some(2), "{given}: {}", text(&output));
        assert!(text(&output).contains(kind), "{given}: {}", text(&output));
    }

    let original = find_report(&scratch.path("ok"));
    let edited = std::fs::read_to_string(&original).unwrap().replacen(
        "\"generated_at_unix\": ",
        "\"generated_at_unix\": 1",
        1,
    );
    std::fs::create_dir_all(scratch.path("edited")).unwrap();
    std::fs::write(scratch.path("edited/results.json"), edited).unwrap();
    let output = scratch.run(&["history", "ok", "edited", "--out", "hist"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let all = text(&output);
    assert!(
        all.contains("edited/results.json")
            && all.contains(original.to_str().unwrap())
            && all.contains("differ"),
        "{all}"
    );
    assert!(all.contains("history of 1 run"), "{all}");
}

/// The one results.json under `dir`.
fn find_report(dir: &std::path::Path) -> std::path::PathBuf {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let found = find_report(&path);
            if found.exists() {
                return found;
            }
        } else if path.file_name().is_some_and(|n| n == "results.json") {
            return path;
        }
    }
    dir.join("none")
}
