//! `ipc-matrix list`: the cells a profile and filter select, one per line; with
//! `--message-format json`, one JSON object per cell.

use crate::cli::args::Selection;
use crate::exit_code;
use crate::term::{console, MessageFormat, JSON_FORMAT_VERSION};
use anyhow::Result;
use ipc_matrix_scenario::{probe_for, unmet_need};
use std::collections::BTreeMap;

pub fn run(selection: &Selection) -> Result<u8> {
    let cells = selection.cells()?;
    crate::say_verbose!(
        "{} cells of profile `{}` in {}",
        cells.len(),
        selection.profile,
        selection.matrix.display()
    );
    // Cells by what they need that this machine lacks: `run` skips them, saying so.
    let mut unmet: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for cell in cells {
        let need = unmet_need(&cell);
        if let Some(need) = &need {
            unmet.entry(need.clone()).or_default().push(cell.id.clone());
        }
        match console().format {
            // The list is the output: printed even under --quiet.
            MessageFormat::Human => println!("{}", cell.id),
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
                    // Where its peer runs (`loopback`, or `netns` with its link) and
                    // whose it is (an external command, or null for ours).
                    "host": cell.host,
                    "peer_command": cell.peer.as_ref().map(|p| &p.command),
                });
                println!("{line}");
            }
        }
    }
    // Beside the ids, on stderr: one note per need.
    if console().format == MessageFormat::Human {
        for (need, ids) in unmet {
            let shown = ids.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
            let more = match ids.len() {
                n if n > 3 => format!(" and {} more", n - 3),
                _ => String::new(),
            };
            eprintln!(
                "note: {} cells are skipped here, each {need}: {shown}{more}",
                ids.len()
            );
        }
    }
    Ok(exit_code::OK)
}
