//! Whatever a baseline file holds (arbitrary bytes, a valid baseline mutated byte by byte
//! or value by value), loading it gives a baseline, none, or an error naming the file:
//! never a panic. A baseline that loads can be judged against, also without a panic.

#[path = "../../results/tests/mutation/mod.rs"]
mod mutation;

use ipc_matrix_baseline::{judge, Baseline};
use ipc_matrix_results::{fixture, CellResult};
use ipc_matrix_spec::RegressionPolicy;
use mutation::{apply, apply_bytes, byte_edit, edit};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Results of echo over tcp and udp, and a baseline accepted from two runs of them.
fn results_and_baseline() -> (Vec<CellResult>, Baseline) {
    let env = fixture::environment("native", "Test CPU");
    let results: Vec<CellResult> = fixture::quick_cells(
        "  - { name: echo, kind: echo, transports: [tcp, udp], payloads: [200B], iterations: 300, warmup: 0, timeout: 1s }\n",
    )
    .iter()
    .map(|cell| fixture::passed(cell, &env, (0..300).map(|i| 40_000 + 13 * (i % 17)).collect()))
    .collect();
    let mut baseline = Baseline::from_results(&results, 1).unwrap();
    baseline.add_run(&results, 2);
    (results, baseline)
}

/// A file path of its own under the temporary directory; removed when dropped.
struct File(PathBuf);

impl File {
    fn with(bytes: &[u8]) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "ipc-matrix-baseline-props-{}-{}.json",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, bytes).unwrap();
        Self(path)
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Loads `bytes` from a file; an error must name it, and a baseline must be judgeable.
fn loads_or_names(bytes: &[u8], results: &[CellResult]) -> Result<(), TestCaseError> {
    let file = File::with(bytes);
    match Baseline::load(&file.0) {
        Ok(Some(baseline)) => {
            let verdict = judge(results, Some(&baseline), RegressionPolicy::default());
            prop_assert_eq!(verdict.cells.len(), results.len());
        }
        Ok(None) => prop_assert!(false, "{} exists, yet no baseline", file.0.display()),
        Err(e) => names(&e.to_string(), &file.0)?,
    }
    Ok(())
}

fn names(message: &str, path: &Path) -> Result<(), TestCaseError> {
    prop_assert!(
        message.contains(&path.display().to_string()),
        "the error does not name {}: {message}",
        path.display()
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_load_or_are_named(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let (results, _) = results_and_baseline();
        loads_or_names(&bytes, &results)?;
    }

    #[test]
    fn a_baseline_mutated_value_by_value_loads_or_is_named(
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        let (results, baseline) = results_and_baseline();
        let mut document = serde_json::to_value(&baseline).unwrap();
        for e in &edits {
            apply(&mut document, e);
        }
        loads_or_names(&serde_json::to_vec_pretty(&document).unwrap(), &results)?;
    }

    #[test]
    fn a_baseline_mutated_byte_by_byte_loads_or_is_named(
        edits in prop::collection::vec(byte_edit(), 1..4),
    ) {
        let (results, baseline) = results_and_baseline();
        let mut bytes = serde_json::to_vec_pretty(&baseline).unwrap();
        for e in &edits {
            apply_bytes(&mut bytes, e);
        }
        loads_or_names(&bytes, &results)?;
    }
}

#[test]
fn the_unmutated_baseline_loads_as_saved() {
    let (_, baseline) = results_and_baseline();
    let file = File::with(&serde_json::to_vec_pretty(&baseline).unwrap());
    let loaded = Baseline::load(&file.0).unwrap().unwrap();
    assert_eq!(
        loaded.cells.keys().collect::<Vec<_>>(),
        ["echo::tcp::200B", "echo::udp::200B"]
    );
    assert!(loaded.cells.values().all(|c| c.runs.len() == 2));
}
