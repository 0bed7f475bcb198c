//! Whatever a `cells/` folder holds (arbitrary bytes, valid results mutated byte by byte
//! or value by value), reading it gives the run's results or an error naming the file:
//! never a panic.

mod mutation;

use ipc_matrix_results::{cell_file_name, fixture, read_run, run_dir, CellResult};
use mutation::{apply, apply_bytes, byte_edit, edit};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const PROFILE: &str = "quick";

/// Two valid results of one run (echo over tcp and udp), as stored.
fn valid_results() -> Vec<CellResult> {
    let env = fixture::environment("native", "Test CPU");
    fixture::quick_cells(
        "  - { name: echo, kind: echo, transports: [tcp, udp], payloads: [200B], iterations: 30, warmup: 0, timeout: 1s }\n",
    )
    .iter()
    .map(|cell| fixture::passed(cell, &env, (1..=30).map(|i| 1_000 * i).collect()))
    .collect()
}

/// A fresh run folder (`<tmp>/<leg>/quick`) with an empty `cells/`; removed when dropped.
struct RunFolder {
    root: PathBuf,
    run: PathBuf,
}

impl RunFolder {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let root = std::env::temp_dir().join(format!(
            "ipc-matrix-results-props-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        let leg = fixture::environment("native", "Test CPU").leg();
        let run = run_dir(&root, &leg, PROFILE);
        std::fs::create_dir_all(run.join("cells")).unwrap();
        Self { root, run }
    }

    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.run.join("cells").join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

impl Drop for RunFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Reads the folder; an error must name `file`, the one that may be bad.
fn reads_or_names(folder: &RunFolder, file: &Path) -> Result<(), TestCaseError> {
    match read_run(&folder.run, None) {
        Ok(run) => {
            // Whatever was read belongs to one run and holds each cell once.
            prop_assert!(run.results.iter().all(|r| r.run_id == run.run_id));
            let mut ids: Vec<_> = run.results.iter().map(|r| &r.cell.id).collect();
            ids.dedup();
            prop_assert_eq!(ids.len(), run.results.len());
        }
        Err(e) => {
            let message = e.to_string();
            prop_assert!(
                message.contains(&file.display().to_string()),
                "the error does not name {}: {message}",
                file.display()
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_are_read_or_named(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let folder = RunFolder::new();
        let file = folder.write("cell.json", &bytes);
        reads_or_names(&folder, &file)?;
    }

    #[test]
    fn valid_results_mutated_value_by_value_are_read_or_named(
        which in 0..2usize,
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        let results = valid_results();
        let folder = RunFolder::new();
        // The other cell stays valid beside it.
        let other = &results[1 - which];
        folder.write(&cell_file_name(&other.cell.id), &serde_json::to_vec(other).unwrap());
        let mut document = serde_json::to_value(&results[which]).unwrap();
        for e in &edits {
            apply(&mut document, e);
        }
        let file = folder.write(
            &cell_file_name(&results[which].cell.id),
            &serde_json::to_vec_pretty(&document).unwrap(),
        );
        reads_or_names(&folder, &file)?;
    }

    #[test]
    fn valid_results_mutated_byte_by_byte_are_read_or_named(
        which in 0..2usize,
        edits in prop::collection::vec(byte_edit(), 1..4),
    ) {
        let results = valid_results();
        let folder = RunFolder::new();
        let other = &results[1 - which];
        folder.write(&cell_file_name(&other.cell.id), &serde_json::to_vec(other).unwrap());
        let mut bytes = serde_json::to_vec_pretty(&results[which]).unwrap();
        for e in &edits {
            apply_bytes(&mut bytes, e);
        }
        // Under another name too: a copy of a cell must be named, not merged.
        let file = folder.write("mutated.json", &bytes);
        reads_or_names(&folder, &file)?;
    }
}

#[test]
fn unmutated_results_are_read_whole() {
    let folder = RunFolder::new();
    for r in valid_results() {
        folder.write(
            &cell_file_name(&r.cell.id),
            &serde_json::to_vec(&r).unwrap(),
        );
    }
    let run = read_run(&folder.run, None).unwrap();
    let ids: Vec<_> = run.results.iter().map(|r| r.cell.id.as_str()).collect();
    assert_eq!(ids, ["echo::tcp::200B", "echo::udp::200B"]);
    assert_eq!(run.run_id, fixture::FIXTURE_RUN_ID);
    assert_eq!((run.other_runs, run.other_schema), (0, 0));
}

#[test]
fn a_result_that_cannot_be_read_is_named() {
    let folder = RunFolder::new();
    // A folder where a result file should be: reading it fails with EISDIR.
    let path = folder.run.join("cells").join("echo.tcp.200B.json");
    std::fs::create_dir(&path).unwrap();
    let error = read_run(&folder.run, None).unwrap_err().to_string();
    assert!(
        error.contains(&path.display().to_string()),
        "the error does not name {}: {error}",
        path.display()
    );
}
