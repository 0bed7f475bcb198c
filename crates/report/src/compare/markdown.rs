//! `comparison.md`: the legs' counts and native timings as GitHub-flavoured tables.

use super::model::{
    arranged, cell_ids, counted, counted_legs_text, emulated, emulated_table, grid,
    informs_anywhere, names, native, native_note, native_table, Column, Counted, Grid, GridRow,
    Part, CODEC_NOTE, COUNTS_NOTE, EMULATED_NOTE, INFORMS, INFORMS_NOTE,
};
use std::fmt::Write;

fn grid_markdown(md: &mut String, legs: &[Counted], grid: &Grid) {
    let _ = write!(md, "| cell |");
    for leg in legs {
        for part in grid.parts {
            let _ = write!(md, " {} {} |", leg.label, part.name());
        }
    }
    let _ = writeln!(md, "\n|---|{}", "---:|".repeat(legs.len() * 2));
    for row in &grid.rows {
        let values: Vec<String> = row.values.iter().map(GridRow::text).collect();
        let _ = writeln!(md, "| `{}` | {} |", row.id, values.join(" | "));
    }
}

fn markdown_table(md: &mut String, (header, rows): (Vec<String>, Vec<Vec<String>>)) {
    let _ = writeln!(md, "| {} |", header.join(" | "));
    let _ = writeln!(md, "|---|{}", "---:|".repeat(header.len() - 1));
    for row in rows {
        let _ = writeln!(md, "| `{}` | {} |", row[0], row[1..].join(" | "));
    }
}

/// `comparison.md`: the instruction tables first when some leg was counted, then the
/// native legs' timings; emulated timings are only named (the HTML page lists them),
/// unless nothing else is there to show.
pub fn markdown(columns: &[Column]) -> String {
    let columns = arranged(columns);
    let ids = cell_ids(&columns);
    let legs = counted(&columns);
    let mut md = String::from("## ipc-matrix: legs side by side\n");
    if !legs.is_empty() {
        let counts = grid(&legs, &ids, [Part::Measuring, Part::Peer]);
        let _ = write!(
            md,
            "\n### Instructions per round trip\n\n{COUNTS_NOTE} Columns: {}.",
            counted_legs_text(&legs, true)
        );
        if informs_anywhere(&counts) {
            let _ = write!(md, " {INFORMS}: {INFORMS_NOTE}");
        }
        md.push_str("\n\n");
        grid_markdown(&mut md, &legs, &counts);
        let codec = grid(&legs, &ids, [Part::Encode, Part::Decode]);
        if !codec.rows.is_empty() {
            let _ = writeln!(
                md,
                "\n### Codec encoding and decoding (instructions per frame)\n\n{CODEC_NOTE}\n"
            );
            grid_markdown(&mut md, &legs, &codec);
        }
    }
    let (native, emulated) = (native(&columns), emulated(&columns));
    if !native.is_empty() {
        let _ = writeln!(
            md,
            "\n### Median round trip, native legs\n\n{}\n",
            native_note(&native)
        );
        markdown_table(&mut md, native_table(&native, &ids));
    }
    if !emulated.is_empty() {
        if native.is_empty() && legs.is_empty() {
            let _ = writeln!(
                md,
                "\n### Median round trip, emulated legs\n\nTimings {EMULATED_NOTE}.\n"
            );
            markdown_table(&mut md, emulated_table(&emulated, &ids));
        } else {
            let _ = writeln!(
                md,
                "\nTimings of {} are {EMULATED_NOTE} (comparison.html lists them).",
                names(&emulated)
            );
        }
    }
    md
}
