//! Stacks in shared libraries (matrix.yaml's `plugins:`, the C ABI of
//! crates/transport/include/ipc_matrix_stack.h): the example stack (examples/c-stack) as
//! it is, and broken in each way a real library might be (tests/plugins/hostile.c). A
//! broken library fails its own cells with the reason, never the run: the built-in cell
//! beside them passes, and the run exits 1, not 2.
//!
//! The libraries are built here with the C compiler (`CC`, else `cc`). A static build
//! (the counted musl builds) cannot load a library at all, so these run where the C
//! library is glibc.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

mod common;

use common::{text, Scratch};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// Builds `source` as a shared library `out`, with `defines`.
fn build_library(source: &Path, out: &Path, defines: &[&str]) {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args([
            "-std=c11", "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror",
        ])
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg("-I")
        .arg(repo("crates/transport/include"))
        .arg("-I")
        .arg(repo("examples/c-stack"))
        .arg("-o")
        .arg(out)
        .arg(source)
        .output()
        .unwrap_or_else(|e| panic!("the C compiler `{cc}` cannot be started: {e}"));
    assert!(built.status.success(), "{cc}: {}", text(&built));
}

/// A matrix with the plugin `seqpacket` at `library` and echo cells over it, on both
/// paths, beside a built-in local socket's.
fn matrix(library: &str) -> String {
    format!(
        "version: 1
targets: [{{ triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }}]
profiles: {{ quick: {{ description: test }} }}
plugins:
  seqpacket: {{ library: {library} }}
scenarios:
  - {{ name: echo, kind: echo, transports: [seqpacket, local], payloads: [200B], iterations: 40, warmup: 10, timeout: 2s }}
  - {{ name: echo-paths, kind: echo, transports: [seqpacket], paths: [loaned], payloads: [200B], iterations: 40, warmup: 10, timeout: 2s }}
"
    )
}

/// A scratch folder `<prefix>-<way>` whose matrix names `lib/libseqpacket.so`, built
/// there as the hostile library `HOSTILE_<way>` (none: the example as it is).
fn with_library(prefix: &str, way: Option<&str>) -> Scratch {
    let name = format!("{prefix}-{}", way.unwrap_or("good").to_lowercase());
    let scratch = Scratch::new(&name, &matrix("lib/libseqpacket.so"));
    std::fs::create_dir_all(scratch.path("lib")).unwrap();
    let define = way.map(|w| format!("HOSTILE_{w}"));
    let (source, defines): (PathBuf, Vec<&str>) = match &define {
        Some(d) => (repo("crates/cli/tests/plugins/hostile.c"), vec![d.as_str()]),
        None => (repo("examples/c-stack/seqpacket.c"), vec![]),
    };
    build_library(&source, &scratch.path("lib/libseqpacket.so"), &defines);
    scratch
}

/// Runs the quick profile with the hostile library built `HOSTILE_<way>` (none: the
/// example as it is); its exit code and output.
fn run_with(way: Option<&str>, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let scratch = with_library("plugin", way);
    let mut command = scratch.command(&["run", "--profile", "quick", "--out", "out"]);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    (out.status.code(), text(&out))
}

/// The outcome line of `cell` in `output`.
fn line_of<'a>(output: &'a str, cell: &str) -> &'a str {
    output
        .lines()
        .find(|l| {
            (l.starts_with("PASS") || l.starts_with("FAIL")) && l.contains(&format!("] {cell}"))
        })
        .unwrap_or_else(|| panic!("no outcome of {cell}:\n{output}"))
}

/// A broken library's cells fail with `reason`; the built-in cell passes; exit 1.
fn fails_its_cells_only(way: &str, reason: &str) {
    let (code, output) = run_with(Some(way), &[]);
    assert_eq!(code, Some(1), "{output}");
    assert!(
        line_of(&output, "echo::local::200B").starts_with("PASS"),
        "{output}"
    );
    let failed = line_of(&output, "echo::seqpacket::200B");
    assert!(failed.starts_with("FAIL"), "{output}");
    assert!(failed.contains(reason), "{reason:?} not in: {failed}");
}

#[test]
fn the_example_stack_passes_on_both_paths() {
    let (code, output) = run_with(None, &[]);
    assert_eq!(code, Some(0), "{output}");
    for cell in [
        "echo::seqpacket::200B",
        "echo::local::200B",
        "echo-paths::loaned::seqpacket::200B",
    ] {
        assert!(line_of(&output, cell).starts_with("PASS"), "{output}");
    }
    assert!(output.contains("its unix-stream floor"), "{output}");
}

#[test]
fn a_reply_the_stack_corrupts_fails_its_cell_at_that_round_trip_and_offset() {
    // The peer's 6th message is the reply of round trip 5; its middle byte is byte 100.
    let (code, output) = run_with(None, &[("SEQPACKET_CORRUPT_REPLY", "6")]);
    assert_eq!(code, Some(1), "{output}");
    let failed = line_of(&output, "echo::seqpacket::200B");
    assert!(failed.contains("round trip 5 of"), "{failed}");
    assert!(
        failed.contains("first difference at byte offset 100"),
        "{failed}"
    );
}

#[test]
fn a_library_that_is_not_there_fails_its_cells_naming_the_path() {
    let scratch = Scratch::new("plugin-missing", &matrix("lib/nowhere.so"));
    let out = scratch.run(&["run", "--profile", "quick", "--out", "out"]);
    let output = text(&out);
    assert_eq!(out.status.code(), Some(1), "{output}");
    assert!(
        line_of(&output, "echo::local::200B").starts_with("PASS"),
        "{output}"
    );
    let failed = line_of(&output, "echo::seqpacket::200B");
    assert!(
        failed.contains("lib/nowhere.so") && failed.contains("cannot be used"),
        "{failed}"
    );
}

#[test]
fn a_library_without_the_entry_point_fails_its_cells() {
    fails_its_cells_only("NO_ENTRY", "it has no function ipcm_stack_v1");
}

#[test]
fn a_table_of_another_abi_version_fails_its_cells() {
    fails_its_cells_only(
        "ABI_VERSION",
        "its table is ABI version 2; this ipc-matrix speaks version 1",
    );
}

#[test]
fn a_table_of_another_size_fails_its_cells() {
    fails_its_cells_only("SIZE", "its table is 64 bytes");
}

#[test]
fn a_table_under_another_name_fails_its_cells() {
    fails_its_cells_only("NAME", "it calls itself `someone-else`");
}

#[test]
fn a_table_with_a_call_missing_fails_its_cells() {
    fails_its_cells_only("NULL_SEND", "its table has no `send`");
}

#[test]
fn a_loaned_path_only_partly_there_fails_its_cells() {
    fails_its_cells_only("PARTIAL_LOANS", "its loaned path is only partly there");
}

#[test]
fn a_receive_that_claims_more_bytes_than_its_room_fails_its_cell() {
    fails_its_cells_only("LYING_RECV", "broke its ABI: recv said it wrote");
}

#[test]
fn a_status_the_abi_does_not_have_fails_its_cell() {
    fails_its_cells_only("UNKNOWN_STATUS", "send returned status 42");
}

#[test]
fn a_peer_that_crashes_inside_the_library_fails_its_cell_naming_the_signal() {
    fails_its_cells_only("CRASHING_PEER", "killed by signal 11");
}

#[test]
fn a_peer_that_ignores_its_deadline_fails_its_cell_at_the_deadline() {
    fails_its_cells_only("SILENT_PEER", "no message before the deadline");
}

#[test]
fn a_stack_that_answers_the_measuring_side_itself_fails_although_every_byte_matched() {
    fails_its_cells_only(
        "ANSWERS_ITSELF",
        "the goodbye came after 0 messages, where the measuring side sends 50",
    );
}

#[test]
fn a_receive_that_writes_less_than_it_says_fails_at_the_first_byte_it_left() {
    // Not the last reply's bytes, which the buffer held before: the room is written over.
    fails_its_cells_only(
        "SHORT_RECV",
        "round trip 1 of 50 (warm-up): first difference at byte offset 8",
    );
}

#[test]
fn a_library_whose_loading_crashes_fails_its_cells_and_no_command() {
    fails_its_cells_only(
        "CRASHING_LOAD",
        "loading it killed the process that loaded it (signal 6)",
    );
}

#[test]
fn a_library_whose_loading_exits_fails_its_cells_and_never_decides_the_exit_status() {
    // An initialiser's exit(0) or exit(2) ended the whole run with that status, nothing
    // run: the probe's exit status was taken for its answer.
    for way in ["EXIT0_ON_LOAD", "EXIT2_ON_LOAD"] {
        fails_its_cells_only(
            way,
            "loading it ended the process that loaded it (exit status",
        );
    }
}

#[test]
fn a_library_that_exits_only_once_past_its_probe_fails_its_cells_never_the_run() {
    // It loads in its probe, then calls exit(0) wherever it is loaded again: the command
    // never loads it (its probe read its table), and each cell's own process that does
    // ends without a result, which fails that cell.
    let (code, output) = run_with(Some("EXIT0_ON_SECOND_LOAD"), &[]);
    assert_eq!(code, Some(1), "{output}");
    assert!(
        line_of(&output, "echo::local::200B").starts_with("PASS"),
        "{output}"
    );
    let failed = line_of(&output, "echo::seqpacket::200B");
    assert!(
        failed.contains("exited with status 0 before writing its result"),
        "{failed}"
    );
}

#[test]
fn a_stacks_exit_in_a_guarded_process_is_told_as_a_strangers_not_taken_for_a_status() {
    // A check's own process is the command again: the stack's exit(0) there ends it with
    // 1, saying whose exit it was, and the check fails with those words.
    let (code, output) = conformance_with(Some("EXIT_CALLING_MEASURER"), &["--", "exchange-echo"]);
    assert_eq!(code, Some(1), "{output}");
    assert!(
        reported(&output, "seqpacket::exchange-echo", "FAILED")
            && output.contains("ended by exit() from code that is not ipc-matrix's"),
        "{output}"
    );
}

#[test]
fn the_conformance_harness_arguments_end_with_our_codes() {
    let (code, output) = conformance_with(None, &["--", "--help"]);
    assert_eq!(code, Some(0), "{output}");
    assert!(!output.contains("not ipc-matrix's"), "{output}");
    let (code, output) = conformance_with(None, &["--", "--no-such-flag"]);
    assert_eq!(code, Some(2), "{output}");
    // Every check left ignored: nothing ran, which is no pass.
    let (code, output) = conformance_with(None, &["--", "--bench"]);
    assert_eq!(code, Some(4), "{output}");
}

#[test]
fn commands_that_only_read_the_matrix_are_not_ended_by_a_librarys_exit() {
    let scratch = with_library("plugin-exit-matrix", Some("EXIT0_ON_LOAD"));
    // The legs, whole: the broken library is its cells' business, not the job matrix's.
    let out = scratch.run(&["matrix", "--github"]);
    let output = text(&out);
    assert_eq!(out.status.code(), Some(0), "{output}");
    let legs: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {output}"));
    assert_eq!(
        legs["include"].as_array().map(Vec::len),
        Some(1),
        "{output}"
    );
    // Its conformance checks fail, naming why; the command says so with exit 1.
    let out = scratch.run(&["conformance"]);
    let output = text(&out);
    assert_eq!(out.status.code(), Some(1), "{output}");
    assert!(
        output.contains("loading it ended the process that loaded it (exit status 0)"),
        "{output}"
    );
}

#[test]
fn a_measuring_side_that_ends_itself_with_exit_0_fails_its_cell_and_its_checks() {
    // _exit(0) passes no exit handler: the process's own word (a result, a verdict) is
    // what counts, and it never gave one.
    fails_its_cells_only(
        "EXITING_MEASURER",
        "exited with status 0 before writing its result",
    );
    let (code, output) = conformance_with(Some("EXITING_MEASURER"), &["--", "exchange-echo"]);
    assert_eq!(code, Some(1), "{output}");
    assert!(
        reported(&output, "seqpacket::exchange-echo", "FAILED")
            && output.contains("before its check had finished"),
        "{output}"
    );
}

#[test]
fn a_negative_status_is_told_as_the_c_int_it_is() {
    fails_its_cells_only("NEGATIVE_STATUS", "send returned status -1,");
}

#[test]
fn a_fifo_named_as_the_library_is_refused_by_its_type_not_waited_on() {
    let scratch = Scratch::new("plugin-fifo", &matrix("lib/libseqpacket.so"));
    std::fs::create_dir_all(scratch.path("lib")).unwrap();
    let fifo = scratch.path("lib/libseqpacket.so");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let out = scratch.run(&["run", "--profile", "quick", "--out", "out"]);
    let output = text(&out);
    assert_eq!(out.status.code(), Some(1), "{output}");
    let failed = line_of(&output, "echo::seqpacket::200B");
    assert!(
        failed.contains("it is a FIFO, not a regular file"),
        "{failed}"
    );
    assert!(
        line_of(&output, "echo::local::200B").starts_with("PASS"),
        "{output}"
    );
}

#[test]
fn a_crash_inside_the_library_on_the_measuring_side_fails_its_cell_not_the_run() {
    fails_its_cells_only(
        "CRASHING_MEASURER",
        "the measuring process was killed by signal 11",
    );
}

#[test]
fn a_measuring_side_stuck_inside_the_library_is_stopped_and_fails_its_cell() {
    // Its round trips stop at the third; the cell's process is stopped once it has been
    // silent for longer than set-up and the round trip's deadline allow.
    fails_its_cells_only("STUCK_MEASURER", "made no progress for");
}

#[test]
fn a_borrow_that_lends_more_than_asked_fails_the_loaned_cell() {
    let (code, output) = run_with(Some("LYING_BORROW"), &[]);
    assert_eq!(code, Some(1), "{output}");
    assert!(
        line_of(&output, "echo::seqpacket::200B").starts_with("PASS"),
        "{output}"
    );
    let failed = line_of(&output, "echo-paths::loaned::seqpacket::200B");
    assert!(failed.contains("broke its ABI: borrow lent"), "{failed}");
}

#[test]
fn a_plugin_under_a_built_in_transports_name_is_refused_before_anything_runs() {
    let scratch = Scratch::new(
        "plugin-built-in-name",
        &matrix("lib/x.so").replace("  seqpacket: {", "  tcp: {"),
    );
    let out = scratch.run(&["run", "--profile", "quick", "--out", "out"]);
    let output = text(&out);
    assert_eq!(out.status.code(), Some(2), "{output}");
    assert!(output.contains("plugins.tcp"), "{output}");
    assert!(!scratch.path("out").exists(), "{output}");
}

/// Whether the harness's output has the line `test <check> ... <outcome>`.
fn reported(output: &str, check: &str, outcome: &str) -> bool {
    output
        .lines()
        .any(|l| l.starts_with(&format!("test {check} ")) && l.ends_with(&format!("... {outcome}")))
}

/// Builds the library of `way` (none: the example) into a scratch folder whose matrix
/// names it, and runs `ipc-matrix conformance` there with `args`.
fn conformance_with(way: Option<&str>, args: &[&str]) -> (Option<i32>, String) {
    let scratch = with_library("conformance", way);
    let mut all = vec!["conformance"];
    all.extend_from_slice(args);
    let out = scratch.command(&all).output().unwrap();
    (out.status.code(), text(&out))
}

#[test]
fn the_conformance_suite_passes_for_the_example_c_stack_in_one_call() {
    // The example's loans hold 64 KiB, and a SOCK_SEQPACKET message goes whole into the
    // socket's buffer: its limit is given, as a library cannot say it.
    let (code, output) = conformance_with(None, &["--max-message", "64KiB"]);
    assert_eq!(code, Some(0), "{output}");
    for check in [
        "seqpacket::sizes",
        "seqpacket::ordering",
        "seqpacket::peer-death",
        "seqpacket::oversized-refused",
        "seqpacket::loaned-echo",
        "seqpacket::loans-refuse-misuse",
    ] {
        assert!(reported(&output, check, "ok"), "{check}: {output}");
    }
}

#[test]
fn the_conformance_suite_fails_a_stack_that_hands_over_less_than_it_received() {
    // Its receive says the whole message came, and writes 8 bytes of it.
    let (code, output) = conformance_with(
        Some("SHORT_RECV"),
        &[
            "--max-message",
            "64KiB",
            "--",
            "--exact",
            "seqpacket::sizes",
        ],
    );
    assert_eq!(code, Some(1), "{output}");
    assert!(reported(&output, "seqpacket::sizes", "FAILED"), "{output}");
    assert!(
        output.contains("first difference at byte offset 8"),
        "{output}"
    );
}

#[test]
fn conformance_names_what_it_cannot_check() {
    let (code, output) = conformance_with(None, &["--stack", "nothing-here"]);
    assert_eq!(code, Some(2), "{output}");
    assert!(
        output.contains("--stack nothing-here: no such stack; the stacks here are: seqpacket"),
        "{output}"
    );
    let (code, output) = conformance_with(None, &["--max-message", "1000B"]);
    assert_eq!(code, Some(2), "{output}");
    assert!(output.contains("at most 1000 bytes"), "{output}");
    // A matrix without plugins, in a binary that registers no stack: nothing to check.
    let scratch = Scratch::new(
        "conformance-nothing",
        "version: 1
targets: [{ triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }]
profiles: { quick: { description: test } }
scenarios:
  - { name: echo, kind: echo, transports: [local], payloads: [200B], iterations: 40, warmup: 10, timeout: 2s }
",
    );
    let out = scratch.command(&["conformance"]).output().unwrap();
    let output = text(&out);
    assert_eq!(out.status.code(), Some(4), "{output}");
    assert!(output.contains("no stack to check"), "{output}");
}

#[test]
fn the_conformance_suite_fails_a_stack_that_answers_the_measuring_side_itself() {
    // Every reply is the request, and none reached the peer: the peer says so.
    let (code, output) = conformance_with(
        Some("ANSWERS_ITSELF"),
        &[
            "--max-message",
            "64KiB",
            "--",
            "--exact",
            "seqpacket::sizes",
        ],
    );
    assert_eq!(code, Some(1), "{output}");
    assert!(
        output.contains("messages reached the peer, their bytes summing to"),
        "{output}"
    );
}

#[test]
fn conformance_arguments_that_select_nothing_or_cannot_run_are_not_a_pass() {
    let (code, output) = conformance_with(None, &["--", "--exact", "sizes"]);
    assert_eq!(code, Some(4), "{output}");
    assert!(output.contains("selected none of the"), "{output}");
    let (code, output) = conformance_with(None, &["--", "--test-threads", "0"]);
    assert_eq!(code, Some(2), "{output}");
    assert!(output.contains("--test-threads 0"), "{output}");
    // A stack named twice is checked once.
    let (code, output) = conformance_with(
        None,
        &[
            "--stack",
            "seqpacket",
            "--stack",
            "seqpacket",
            "--max-message",
            "64KiB",
            "--",
            "--list",
        ],
    );
    assert_eq!(code, Some(0), "{output}");
    assert_eq!(
        output.matches("seqpacket::sizes: test").count(),
        1,
        "{output}"
    );
}

#[test]
fn a_crash_inside_the_library_fails_its_conformance_checks_not_the_run() {
    // Each check runs in a process of its own: the crash (its measuring side's third
    // receive) is that check's failure, named, and the harness still sums up every check.
    let (code, output) = conformance_with(Some("CRASHING_MEASURER"), &["--max-message", "64KiB"]);
    assert_eq!(code, Some(1), "{output}");
    assert!(reported(&output, "seqpacket::sizes", "FAILED"), "{output}");
    assert!(
        output.contains(
            "the check's process was killed by signal 11 (SIGSEGV), inside the stack's own code"
        ),
        "{output}"
    );
    assert!(output.contains("test result: FAILED."), "{output}");
}

#[test]
fn conformance_takes_the_command_lines_quiet_and_colour() {
    let scratch = with_library("conformance-quiet", None);
    let out = scratch
        .command(&[
            "--quiet",
            "--color",
            "always",
            "conformance",
            "--max-message",
            "64KiB",
        ])
        .output()
        .unwrap();
    let output = text(&out);
    assert_eq!(out.status.code(), Some(0), "{output}");
    // libtest's quiet form: a dot per check, no line per check; its colours on.
    assert!(!output.contains("test seqpacket::sizes ... "), "{output}");
    assert!(output.contains("test result: "), "{output}");
    assert!(output.contains('\u{1b}'), "{output}");
}
