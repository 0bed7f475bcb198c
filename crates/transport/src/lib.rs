//! One contract, [`Channel`]: whole messages, each send and receive bounded by a deadline.
//!
//! A channel has two ends in two processes. The measuring process calls [`listen`], which
//! returns an [`Acceptor`] and the [`PeerAddress`] to hand to the peer; the peer calls
//! [`connect`] with that address (for a pipe, the peer must first inherit the descriptors
//! [`PeerAddress::inherited_fds`] names).
//!
//! Layers, each module using only those below it:
//! 1. `error`, `address`: what fails, and where a peer connects;
//! 2. `contract` ([`Channel`], [`Acceptor`]); `platform`: the Linux specifics (futexes,
//!    CPUs, liveness of a process); `start`: starting a process with a deadline;
//! 3. `wait`: deadlines, retries, spinning and liveness checks; `artifact`: names and life
//!    locks of what a run makes in shared places;
//! 4. `framing` (whole messages over a byte stream); the transports that need no framing,
//!    one file or folder each: `udp`, `shm/`, `iceoryx2/` (each folder with its own sweep);
//! 5. the byte-stream transports `tcp`, `local`, `pipe`; `sweep`, which combines each
//!    transport's sweep; `stack`: a user's stack ([`Stack`]), registered by name;
//!    `plugin`: a stack in a shared library (the C ABI of `include/ipc_matrix_stack.h`);
//! 6. `open`: [`listen`] and [`connect`], which pick the transport;
//! 7. [`conformance`]: the contract's checks, written once and run against any transport
//!    (this crate's suite, and a user's stack from its own test target).

mod address;
mod artifact;
pub mod conformance;
mod contract;
mod error;
mod framing;
mod iceoryx2;
mod local;
mod open;
mod pipe;
mod platform;
mod plugin;
mod shm;
mod stack;
mod start;
mod sweep;
mod tcp;
mod udp;
mod wait;

pub use address::{PeerAddress, SocketEndpoint, SocketKind};
pub use artifact::{unnamed_file, PrivateDir, ARTIFACT_PREFIX};
pub use contract::{Acceptor, Channel, ListenOptions, Loans};
pub use error::{RegisterError, TransportError};
pub use iceoryx2::own_benchmark as iceoryx2_own_benchmark;
pub use ipc_matrix_spec::{ChannelKind, WakeMode};
pub use open::{connect, listen};
pub use platform::{
    allowed_cpus, die_with_parent, futex_wait, futex_wake, holds_a_socket, process_alive,
    process_table, set_thread_cpus, thread_states, FutexWake, ProcessEntry,
};
pub use plugin::{
    library_file_refusal, register_broken_plugin, register_linked_plugin, register_plugin,
    register_probed_plugin, traits_from_text, traits_to_text, try_load_plugin, LinkedTable,
    ABI_VERSION as PLUGIN_ABI_VERSION,
};
pub use shm::{SHM_CHUNK, SHM_RING_SLOTS};
pub use stack::{
    plugin_library, register_stack, registered_plugins, registered_stacks, Stack, StackAcceptor,
};
pub use start::{spawn_within, FORK_TO_EXEC_LIMIT, STARTED_ENV, START_LIMIT};
pub use sweep::{remove_stale_artifacts, remove_stale_artifacts_in, Removed};
pub use wait::is_retry;
