//! Hostile input on the command line and on disk: an argument that is not UTF-8 is an
//! error, never a panic; a FIFO where a result file belongs is refused, naming it, never
//! waited on.

mod common;

use common::{text, Scratch};
use ipc_matrix_results::{fixture, write_result};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

const MATRIX: &str = test_matrix!(
    "- { name: echo, kind: echo, transports: [tcp], payloads: [200B], iterations: 300, warmup: 0, timeout: 1s }"
);

/// Runs the binary with `args`, killed after a minute: a hang is a failure, not a stuck
/// test run.
fn run_bounded(s: &Scratch, args: &[&OsStr]) -> (Option<i32>, String) {
    let mut command = s.command(&[]);
    command.args(args);
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            panic!("{args:?}: still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), text(&out))
}

#[test]
fn an_argument_that_is_not_utf8_is_an_error_not_a_panic() {
    let s = Scratch::new("hostile-utf8", MATRIX);
    let bad = OsStr::from_bytes(b"\xff.yaml");
    let (code, all) = run_bounded(&s, &[OsStr::new("list"), OsStr::new("--matrix"), bad]);
    assert_eq!(code, Some(2), "{all}");
    assert!(!all.contains("panicked"), "{all}");
    assert!(all.contains(".yaml"), "the error names the file: {all}");
}

#[test]
fn a_fifo_among_the_results_is_refused_naming_it() {
    let s = Scratch::new("hostile-fifo", MATRIX);
    let cell = &fixture::cells(MATRIX, "quick")[0];
    let env = fixture::environment("native", "Test CPU");
    let result = fixture::passed(cell, &env, (0..300).map(|i| 40_000 + i).collect());
    let stored = write_result(&s.path("results"), &result).unwrap();
    let fifo = stored.with_file_name("planted.json");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string naming a path in the scratch folder.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let leg = result.leg.clone();
    let (code, all) = run_bounded(
        &s,
        &["report", "--results", "results", "--leg", &leg].map(OsStr::new),
    );
    assert_ne!(code, Some(0), "{all}");
    assert!(
        all.contains("planted.json") && all.contains("a FIFO"),
        "{all}"
    );
}
