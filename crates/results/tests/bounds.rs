//! Result files are bounded before they are read: a file over MAX_RESULT_FILE_BYTES is
//! refused with its path and the bound, without being read into memory (the test's file
//! is sparse: nothing of it is written).

use ipc_matrix_results::{read_run, MAX_RESULT_FILE_BYTES};

#[test]
fn a_result_file_over_the_bound_is_refused_with_its_path_and_the_bound() {
    let run = std::env::temp_dir()
        .join(format!("ipc-matrix-result-bounds-{}", std::process::id()))
        .join("x86_64-unknown-linux-gnu@native")
        .join("quick");
    let cells = run.join("cells");
    std::fs::create_dir_all(&cells).unwrap();
    let path = cells.join("echo.tcp.200B.json");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(MAX_RESULT_FILE_BYTES + 1).unwrap();
    let error = read_run(&run, None).unwrap_err();
    // At the bound itself the file is read (and is no JSON: NUL bytes).
    file.set_len(MAX_RESULT_FILE_BYTES).unwrap();
    let at_bound = read_run(&run, None).unwrap_err();
    let _ = std::fs::remove_dir_all(run.parent().unwrap().parent().unwrap());
    let error = error.to_string();
    assert!(error.contains(&path.display().to_string()), "{error}");
    assert!(
        error.contains(
            "16777217 bytes, more than the 16777216 bytes (16 MiB) a result file may hold"
        ),
        "{error}"
    );
    let at_bound = at_bound.to_string();
    assert!(!at_bound.contains("more than"), "{at_bound}");
    assert!(at_bound.contains(&path.display().to_string()), "{at_bound}");
}
