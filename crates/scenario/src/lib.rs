//! Running one cell: start the peer as a separate process (`<exe> serve ...`), echo
//! payloads through the cell's transport, compare every reply with what was sent, and turn
//! the timings into a [`CellResult`](ipc_matrix_results::CellResult).

mod codec_work;
mod echo;
mod fan;
mod fault;
mod logging;
mod measure;
mod payload;
mod peer;
mod placement;
mod pressure;
mod probe;
mod req_rep;
mod rpc;
mod spawn;
mod udp_load;
mod verify;

pub use echo::{run_cell, RunOptions};
pub use fault::{Fault, FaultKind};
pub use payload::{pseudo_random_bytes, Payload};
pub use peer::{serve_if_requested, PeerDelay, PEER_DELAY_CELLS_ENV, PEER_DELAY_ENV, SERVE_ARG};
pub use placement::PIN_ENV;
pub use probe::core_to_core_ns;
pub use spawn::PEER_RUNNER_ENV;
pub use verify::{compare, Mismatch};
