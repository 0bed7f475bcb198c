//! `ipc-matrix probe`: the floors of the selected cells, measured now.

use crate::cli::args::Selection;
use crate::exit_code;
use crate::format::floor_table;
use crate::term::{console, MessageFormat, JSON_FORMAT_VERSION};
use anyhow::Result;
use ipc_matrix_scenario::measure_floors;

pub fn run(selection: &Selection) -> Result<u8> {
    let cells = selection.cells()?;
    if ipc_matrix_scenario::emulated() {
        anyhow::bail!("floors are not measured under an emulator: an emulator's floor is its own, not the machine's");
    }
    let floors = measure_floors(&cells);
    if console().format == MessageFormat::Json {
        for selected in &floors {
            let line = serde_json::json!({
                "type": "floor",
                "version": JSON_FORMAT_VERSION,
                "probe": selected.probe,
                "payload_bytes": selected.payload_bytes,
                "warmup": selected.rounds.0,
                "iterations": selected.rounds.1,
                "p50_ns": selected.floor.map(|f| f.p50_ns),
                "round_trips": selected.floor.map(|f| f.round_trips),
                "cells": selected.cells,
            });
            println!("{line}");
        }
    } else if floors.is_empty() {
        println!(
            "none of the selected cells has a floor (fan, udp-load and logging cells have none)"
        );
    } else {
        println!("{}", floor_table(&floors));
        crate::say!("{}", ipc_matrix_report::FLOORS_EXPLAINED);
    }
    Ok(exit_code::OK)
}
