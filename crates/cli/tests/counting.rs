//! No count is not a pass: `ipc-matrix run` asked to count (`IPC_MATRIX_COUNT_FILE`) in a
//! process where no counting plugin runs (natively, or under a QEMU that ignores
//! `QEMU_PLUGIN`, as a QEMU built without plugin support does) fails its cells at their
//! start, saying why; a count file without `%p` is refused, and no file the run did not
//! write is removed. (A count file that is a FIFO: `ipc-matrix-count-window`'s tests.)

mod common;

use common::{text, Scratch};

const MATRIX: &str = test_matrix!(
    "- { name: echo, kind: echo, transports: [tcp], payloads: [200B], iterations: 50, warmup: 0, timeout: 5s }"
);

/// `ipc-matrix run` in `s` with the count file `pattern`, under no counting plugin: the
/// test binary's own plugin (when the suite runs counted under QEMU) is not passed on,
/// as a QEMU without plugin support would not load it.
fn run_uncounted(s: &Scratch, pattern: &str) -> (Option<i32>, String) {
    let out = s
        .command(&["run", "--matrix", "matrix.yaml", "--out", "results"])
        .env("IPC_MATRIX_COUNT_FILE", pattern)
        .env_remove("QEMU_PLUGIN")
        .output()
        .unwrap();
    (out.status.code(), text(&out))
}

#[test]
fn a_run_asked_to_count_where_no_plugin_counts_fails_its_cells_naming_why() {
    let s = Scratch::new("count-no-plugin", MATRIX);
    std::fs::create_dir_all(s.path("counts")).unwrap();
    let pattern = s.path("counts/%p.jsonl");
    let (code, all) = run_uncounted(&s, pattern.to_str().unwrap());
    assert_eq!(code, Some(1), "{all}");
    let fail = all
        .lines()
        .find(|l| l.starts_with("FAIL"))
        .unwrap_or_else(|| panic!("no FAIL line: {all}"));
    assert!(fail.contains("echo::tcp::200B"), "{fail}");
    assert!(
        all.contains("no counting plugin runs in this process"),
        "{all}"
    );
    assert!(all.contains("ignores QEMU_PLUGIN"), "{all}");
}

#[test]
fn a_count_file_without_the_process_id_is_refused_and_left_alone() {
    let s = Scratch::new("count-no-pid", MATRIX);
    let theirs = s.path("notes.txt");
    std::fs::write(&theirs, "someone's notes\n").unwrap();
    let (code, all) = run_uncounted(&s, theirs.to_str().unwrap());
    // Refused where the run starts, like a bad flag: no cell runs.
    assert_eq!(code, Some(2), "{all}");
    assert!(
        all.contains("IPC_MATRIX_COUNT_FILE=") && all.contains("no %p"),
        "{all}"
    );
    assert_eq!(
        std::fs::read_to_string(&theirs).unwrap(),
        "someone's notes\n",
        "a file the run did not write is never removed or changed"
    );
}
