//! Where results live: `<out>/<triple>@<runner>/<profile>/cells/<cell>.json`, each written
//! to a temporary file and renamed, so a crash never leaves half a result. Keeping profiles
//! apart means a report never mixes a quick run's cells with a full run's.

use crate::{CellResult, RESULT_SCHEMA_VERSION};
use std::io;
use std::path::{Path, PathBuf};

pub fn leg_name(triple: &str, runner: &str) -> String {
    format!("{triple}@{runner}")
}

/// The folder of one leg's results for one profile, where its reports are written too.
pub fn run_dir(out: &Path, leg: &str, profile: &str) -> PathBuf {
    out.join(leg).join(profile)
}

/// `echo::tcp::200B` -> `echo.tcp.200B.json`.
pub fn cell_file_name(cell_id: &str) -> String {
    format!("{}.json", cell_id.replace("::", "."))
}

/// Writes one result under `<out>/<leg>/<profile>/cells/` and returns its path.
pub fn write_result(out: &Path, result: &CellResult) -> io::Result<PathBuf> {
    let dir = run_dir(out, &result.leg, &result.cell.profile).join("cells");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(cell_file_name(&result.cell.id));
    let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
    let json = serde_json::to_vec_pretty(result).map_err(io::Error::other)?;
    std::fs::write(&tmp, json)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Reads every result of one run folder ([`run_dir`]), sorted by cell id; files of
/// another schema version are reported, not guessed at.
pub fn read_results(run_dir: &Path) -> io::Result<Vec<CellResult>> {
    let mut results = Vec::new();
    let cells = run_dir.join("cells");
    let entries = std::fs::read_dir(&cells)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", cells.display())))?;
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let bytes = std::fs::read(&path)?;
        let value: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?;
        let version = value.get("schema_version").and_then(|v| v.as_u64());
        if version != Some(u64::from(RESULT_SCHEMA_VERSION)) {
            return Err(io::Error::other(format!(
                "{}: result schema version {version:?}, this ipc-matrix reads {RESULT_SCHEMA_VERSION}; re-run the cell",
                path.display()
            )));
        }
        results.push(
            serde_json::from_value(value)
                .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?,
        );
    }
    results.sort_by(|a: &CellResult, b| a.cell.id.cmp(&b.cell.id));
    Ok(results)
}
