//! `ipc-matrix list`: the cells a profile and filter select, one per line; with
//! `--message-format json`, one JSON object per cell.

use crate::args::Selection;
use anyhow::Result;
use ipc_matrix::exit_code;
use ipc_matrix::term::{console, MessageFormat, JSON_FORMAT_VERSION};
use ipc_matrix_scenario::{probe_for, unmet_need};

pub fn run(selection: &Selection) -> Result<u8> {
    let cells = selection.cells()?;
    ipc_matrix::say_verbose!(
        "{} cells of profile `{}` in {}",
        cells.len(),
        selection.profile,
        selection.matrix.display()
    );
    for cell in cells {
        // What the cell needs that this machine lacks: `run` skips it, saying so.
        let need = unmet_need(&cell);
        match console().format {
            // The list is the output: printed even under --quiet; ids alone, so the
            // need goes to stderr.
            MessageFormat::Human => {
                println!("{}", cell.id);
                if let Some(need) = &need {
                    eprintln!("note: {} is skipped here: it {need}", cell.id);
                }
            }
            MessageFormat::Json => {
                let line = serde_json::json!({
                    "type": "cell",
                    "version": JSON_FORMAT_VERSION,
                    "id": cell.id,
                    "scenario": cell.scenario,
                    "kind": cell.kind().as_str(),
                    "variant": cell.variant_label(),
                    "transport": cell.transport_label(),
                    "payload": cell.payload_label,
                    "payload_bytes": cell.payload_bytes,
                    "warmup": cell.warmup,
                    "iterations": cell.iterations,
                    "profile": cell.profile,
                    "floor_probe": probe_for(&cell),
                    "memory_need_bytes": cell.memory_need(),
                    "unmet_need": need,
                });
                println!("{line}");
            }
        }
    }
    Ok(exit_code::OK)
}
