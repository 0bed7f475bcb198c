//! `ipc-matrix matrix`: the legs of matrix.yaml, or with `--github` the JSON job matrix
//! the GitHub workflow reads.

use crate::exit_code;
use anyhow::Result;
use std::path::Path;

pub fn run(matrix: &Path, github: bool) -> Result<u8> {
    let spec = crate::project::load_matrix(matrix).map_err(anyhow::Error::msg)?;
    let jobs = ipc_matrix_spec::github::job_matrix(&spec).map_err(anyhow::Error::msg)?;
    if github {
        println!("{}", jobs.to_json());
    } else {
        for job in &jobs.include {
            println!(
                "{}  blocks merge: {}  GitHub runner: {}",
                job.leg, job.blocks_merge, job.os
            );
        }
    }
    Ok(exit_code::OK)
}
