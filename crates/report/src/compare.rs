//! Legs side by side (`ipc-matrix report --compare DIR DIR...`), in the order of
//! [`ARCHITECTURES`] whatever order they were given in:
//! - guest instructions per round trip on every counted leg, the measuring side and the
//!   peer apart, and for codec cells the encoding and the decoding apart too: counted under
//!   QEMU with one fixed CPU model per architecture; a count depends on the code, the
//!   compiler, the emulator and the guest's C library, each recorded with it;
//! - the median round trip of native legs, with ratios between native legs only. An
//!   emulated leg's timings measure the emulator on its host, not the CPU: they are shown
//!   apart, labelled so, and never as a ratio.

mod html;
mod markdown;
mod model;

pub use html::html;
pub use markdown::markdown;
pub use model::{architecture, arranged, Column, ARCHITECTURES};

use ipc_matrix_results::write_atomically;
use std::path::{Path, PathBuf};

/// Writes `comparison.md` and `comparison.html` into `out`.
pub fn write(out: &Path, columns: &[Column]) -> std::io::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out)?;
    let (md, page) = (out.join("comparison.md"), out.join("comparison.html"));
    write_atomically(&md, markdown(columns).as_bytes())?;
    write_atomically(&page, html(columns).as_bytes())?;
    Ok((md, page))
}
