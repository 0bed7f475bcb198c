//! Running one cell: start the peer as a separate process (`<exe> serve ...`), exchange
//! payloads with it over the cell's transport, compare every reply with what was sent, and
//! turn the timings into a [`CellResult`](ipc_matrix_results::CellResult).
//!
//! The modules read from the top down; none imports one above it:
//!
//! - `run` (the cell runner) and `serve` (the peer's entry point): the two front doors,
//!   each handing its cell or its peer to the kind.
//! - `kinds`: the list of kinds and the dispatch to them (what the runner does around a
//!   kind's cell, its measuring side, its serving side); `kinds/*`: one module per kind,
//!   its measuring side and its serving side. No kind imports another, or the list.
//! - `round_trip`: the one measuring loop of the request/reply kinds (echo, bulk, codec,
//!   rpc, req-rep), which implement its `Endpoint` trait (send, receive, goodbye).
//! - `context`, `failure`: the run's options and tally, failures as the user reads them
//!   (one transport-error mapping, one clean-exit check).
//! - `floor`: the machine's floor of a cell, timed in blocks between the cell's own round
//!   trips (a busy-polling peer stopped through `spawn` meanwhile).
//! - `own_setup`: a stack's own benchmark setup (iceoryx2's), timed in blocks between its
//!   cells' round trips as floors are.
//! - `blocks`: when those blocks run (the one schedule of floors and own setups).
//! - `spawn`: the peer process (one goodbye deadline).
//! - `second_host`: a `host: netns` cell's network namespace and veth link, made
//!   around the cell by the runner, and the sweep of those a killed run left.
//! - `peer`, `verify`, `payload`, `codec_work`, `measure`, `probe`, `placement`,
//!   `pressure`, `fault`: leaf pieces.

mod run;
mod serve;

mod kinds;

mod round_trip;

mod context;
mod failure;

mod floor;
mod own_setup;

mod blocks;

mod spawn;

mod codec_work;
mod counting;
mod external;
mod fault;
mod measure;
mod payload;
mod peer;
mod placement;
mod pressure;
mod probe;
mod second_host;
mod verify;

pub use context::RunOptions;
pub use counting::{COUNT_FILE_ENV, QEMU_CPU_ENV};
pub use external::{
    resolve as resolve_external_peer, ExternalPeerConfig, ExternalPeerError, ResolvedCommand,
    PROTOCOL_VERSION,
};
pub use fault::{Fault, FaultError, FaultKind, ParseFaultError, Spot};
pub use floor::{emulated, floor_for, measure_floors, probe_for, SelectedFloor};
/// The global allocator of a binary that runs cells: see its docs for why counts need it.
pub use ipc_matrix_count_window::heap::CountedHeap;
pub use payload::{pseudo_random_bytes, Payload};
pub use peer::{
    EnvError, PeerDelay, PEER_DELAY_CELLS_ENV, PEER_DELAY_ENV, PEER_EXTRA_WORK_ENV, SERVE_ARG,
};
pub use placement::PIN_ENV;
pub use probe::core_to_core_ns;
pub use run::{run_cell, unfinished_cell};
pub use second_host::{remove_stale_links, unmet_need, SecondHost};
pub use serve::serve_if_requested;
pub use spawn::PEER_RUNNER_ENV;
pub use verify::{compare, Mismatch};
