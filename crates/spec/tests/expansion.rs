//! What the repository's matrix.yaml measures, per profile, as a reviewed snapshot: a
//! change to the file that adds, drops or resizes a cell shows up as a snapshot diff.

use ipc_matrix_spec::{Spec, Work};
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
            "{:<26} {:>11} B  {:>5} + {:>3} warm-up  {}  seed {:#x}{}",
            cell.id,
            cell.payload_bytes,
            cell.iterations,
            cell.warmup,
            limits(&cell.work),
            cell.seed,
            match cell.work {
                Work::UdpLoad(load) => format!("  for {:?}", load.shape.duration),
                _ => String::new(),
            }
        );
    }
    out
}

/// The time limits of a cell's kind, and the loss it allows where it has one.
fn limits(work: &Work) -> String {
    match work {
        Work::Echo(e) | Work::Bulk(e) => {
            format!("timeout {:?}  max_loss {}", e.timeout, e.max_loss)
        }
        Work::Codec(frames) => format!("timeout {:?}", frames.timeout),
        Work::FanOut(fan) | Work::FanIn(fan) => format!(
            "frame_deadline {:?}  max_loss {}",
            fan.frame_deadline, fan.max_loss
        ),
        Work::Rpc(calls) | Work::ReqRep(calls) => format!("timeout {:?}", calls.timeout),
        Work::UdpLoad(load) => format!("timeout {:?}  max_loss {}", load.timeout, load.max_loss),
        Work::Logging(write) => format!("budget {:?}", write.budget),
    }
}

#[test]
fn quick_profile_cells() {
    insta::assert_snapshot!(expansion("quick"));
}

#[test]
fn full_profile_cells() {
    insta::assert_snapshot!(expansion("full"));
}
