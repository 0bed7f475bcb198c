//! What the repository's matrix.yaml measures, per profile, as a reviewed snapshot: a
//! change to the file that adds, drops or resizes a cell shows up as a snapshot diff.

use ipc_matrix_spec::Spec;
use std::fmt::Write;
use std::path::Path;

fn expansion(profile: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../matrix.yaml");
    let spec = Spec::load(&file).unwrap_or_else(|e| panic!("{e}"));
    let policy = spec.profiles[profile].regression;
    let mut out = format!(
        "regression: min_change {}, strict {}\n",
        policy.min_change, policy.strict
    );
    for cell in spec.cells(profile).unwrap() {
        let _ = writeln!(
            out,
            "{:<26} {:>11} B  {:>5} + {:>3} warm-up  timeout {:?}  max_loss {}  seed {:#x}{}",
            cell.id,
            cell.payload_bytes,
            cell.iterations,
            cell.warmup,
            cell.timeout,
            cell.max_loss,
            cell.seed,
            cell.load
                .map(|load| format!("  for {:?}", load.duration))
                .unwrap_or_default()
        );
    }
    out
}

#[test]
fn quick_profile_cells() {
    insta::assert_snapshot!(expansion("quick"));
}

#[test]
fn full_profile_cells() {
    insta::assert_snapshot!(expansion("full"));
}
