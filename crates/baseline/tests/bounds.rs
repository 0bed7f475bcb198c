//! What a baseline file may hold: judging costs time in proportion to its batches, so a
//! file with more than any accepted run makes is refused when loaded, with its path.

use ipc_matrix_baseline::{Baseline, BaselineError, MAX_BATCHES};
use ipc_matrix_results::fixture;

const MATRIX: &str = r#"
version: 1
targets:
  - { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }
profiles:
  quick: { description: test }
scenarios:
  - { name: echo, kind: echo, transports: [tcp], payloads: [200B], iterations: 300, warmup: 0, timeout: 1s }
"#;

fn stored(batches: usize) -> (std::path::PathBuf, Result<Option<Baseline>, BaselineError>) {
    let env = fixture::environment("native", "Test CPU");
    let cell = &fixture::cells(MATRIX, "quick")[0];
    let result = fixture::passed(cell, &env, (0..300).map(|i| 40_000 + i).collect());
    let mut baseline = Baseline::from_results(&[result], 1).unwrap();
    for entry in baseline.cells.values_mut() {
        entry.runs[0].batch_medians_ns = vec![40_000; batches];
    }
    let path = std::env::temp_dir().join(format!(
        "ipc-matrix-bounds-{batches}-{}.json",
        std::process::id()
    ));
    std::fs::write(&path, serde_json::to_vec(&baseline).unwrap()).unwrap();
    let loaded = Baseline::load(&path);
    let _ = std::fs::remove_file(&path);
    (path, loaded)
}

#[test]
fn a_baseline_within_bounds_loads() {
    let (_, loaded) = stored(MAX_BATCHES);
    assert!(loaded.unwrap().is_some());
}

#[test]
fn a_million_batch_medians_are_refused_with_the_path() {
    let (path, loaded) = stored(1_000_000);
    let error = loaded.unwrap_err().to_string();
    assert!(error.contains(&path.display().to_string()), "{error}");
    assert!(error.contains("1000000 batch medians"), "{error}");
}
