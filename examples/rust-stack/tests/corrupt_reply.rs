//! The stack itself corrupts one byte of one reply (its peer's side flips the middle byte
//! of its 7th message: the hello, then replies 0 to 5): the cell fails, naming the round
//! trip and the byte offset, and the run exits 1.

use std::process::Command;

#[test]
fn a_reply_the_stack_corrupts_fails_its_cell_at_that_round_trip_and_offset() {
    let out = tempdir();
    let run = Command::new(env!("CARGO_BIN_EXE_udgram-matrix"))
        .args([
            "run",
            "--profile",
            "quick",
            "--filter",
            "echo::udgram::200B",
            "--out",
        ])
        .arg(&out)
        .env(udgram_stack::CORRUPT_REPLY_ENV, "7")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the CLI runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let _ = std::fs::remove_dir_all(&out);
    assert_eq!(run.status.code(), Some(1), "{text}");
    assert!(text.contains("FAIL"), "{text}");
    assert!(text.contains("round trip 5"), "{text}");
    assert!(
        text.contains("first difference at byte offset 100"),
        "{text}"
    );
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("udgram-fault-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
