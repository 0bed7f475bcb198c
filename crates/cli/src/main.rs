//! `ipc-matrix`: the command line (`ipc_matrix::cli`).

use std::process::ExitCode;

/// Size classes when this process is counted, so that no count depends on where earlier
/// allocations left the heap (paths, run ids); glibc's malloc otherwise.
#[global_allocator]
static HEAP: ipc_matrix_scenario::CountedHeap = ipc_matrix_scenario::CountedHeap::new();

fn main() -> ExitCode {
    ipc_matrix::cli::main()
}
