//! What the repository's matrix.yaml measures, per profile, as a reviewed snapshot: a
//! change to the file that adds, drops or resizes a cell shows up as a snapshot diff.

use ipc_matrix_spec::{Spec, Work};
use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

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
            "{:<26} {:>11} B  {:>5} + {:>3} warm-up  {}  seed {:#x}{}{}",
            cell.id,
            cell.payload_bytes,
            cell.iterations,
            cell.warmup,
            limits(&cell.work),
            cell.seed,
            match cell.work {
                Work::UdpLoad(load) => format!("  for {:?}", load.shape.duration),
                _ => String::new(),
            },
            // The second host a netns cell's peer runs on, and its link.
            cell.host
                .netns()
                .map_or_else(String::new, |link| format!("  on netns, mtu {}", link.mtu))
        );
    }
    out
}

/// The time limits of a cell's kind, and the loss it allows where it has one: those of
/// its settings that are limits, in this order.
fn limits(work: &Work) -> String {
    let settings = serde_json::to_value(work).unwrap();
    let shown = |value: &serde_json::Value| match value.as_f64() {
        Some(share) => share.to_string(),
        None => format!(
            "{:?}",
            serde_json::from_value::<Duration>(value.clone()).unwrap()
        ),
    };
    ["timeout", "frame_deadline", "budget", "max_loss"]
        .into_iter()
        .filter_map(|key| Some(format!("{key} {}", shown(settings.get(key)?))))
        .collect::<Vec<_>>()
        .join("  ")
}

#[test]
fn quick_profile_cells() {
    insta::assert_snapshot!(expansion("quick"));
}

#[test]
fn full_profile_cells() {
    insta::assert_snapshot!(expansion("full"));
}
