//! `ipc-matrix list`: the cells a profile and filter select, one per line.

use crate::args::Selection;
use anyhow::Result;
use ipc_matrix::exit_code;

pub fn run(selection: &Selection) -> Result<u8> {
    selection.cells().map(|cells| {
        for cell in cells {
            println!("{}", cell.id);
        }
        exit_code::OK
    })
}
