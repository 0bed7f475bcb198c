//! A user's stack in a binary of their own: what a crate outside this workspace needs to
//! implement a transport ([`Stack`], [`Channel`], [`Loans`]) and the entry points that
//! register it, [`main!`](crate::main) for its CLI, [`test_main!`](crate::test_main) for
//! its nextest door and [`conformance_main!`](crate::conformance_main) for the transport
//! conformance suite, in the manner of `criterion_main!`.
//!
//! ```ignore
//! // src/main.rs: the same CLI as `ipc-matrix`, with the stack in it.
//! ipc_matrix::main!(my_stack::UnixDatagram);
//! // tests/cells.rs, a `[[test]]` with `harness = false`: one test per cell.
//! ipc_matrix::test_main!(my_stack::UnixDatagram);
//! // tests/conformance.rs, `harness = false`: the `Channel` contract's checks.
//! ipc_matrix::conformance_main!(my_stack::UnixDatagram);
//! ```

pub use ipc_matrix_scenario::CountedHeap;
pub use ipc_matrix_spec::{ChannelKind, MessagePath, StackTraits, WakeMode};
pub use ipc_matrix_transport::{
    process_alive, register_linked_plugin, Channel, LinkedTable, ListenOptions, Loans, Stack,
    StackAcceptor, TransportError,
};

/// Registers each of `stacks` in this process (before it serves as a peer or reads
/// matrix.yaml); on a refused one, says why and exits with [`exit_code::USAGE`].
///
/// [`exit_code::USAGE`]: crate::exit_code::USAGE
pub fn register_or_exit(stacks: Vec<&'static dyn Stack>) {
    for stack in stacks {
        if let Err(why) = ipc_matrix_transport::register_stack(stack) {
            eprintln!("error: {why}");
            std::process::exit(i32::from(crate::exit_code::USAGE));
        }
    }
}

/// Registers each of `stacks` as [`register_or_exit`] does, then runs the transport
/// conformance suite (`ipc_matrix_transport::conformance`, the checks every built-in
/// transport passes) against each: one test `<stack>::<check>` per check that applies,
/// its peer this binary started again. Never returns.
pub fn conformance(stacks: Vec<&'static dyn Stack>) -> ! {
    use ipc_matrix_transport::conformance;
    let mut subjects = Vec::new();
    for stack in stacks {
        let name = match ipc_matrix_transport::register_stack(stack) {
            Ok(name) => name,
            Err(why) => {
                eprintln!("error: {why}");
                std::process::exit(i32::from(crate::exit_code::USAGE));
            }
        };
        match conformance::stack_subjects(name) {
            Ok(more) => subjects.extend(more),
            Err(why) => {
                eprintln!("error: {why}");
                std::process::exit(i32::from(crate::exit_code::USAGE));
            }
        }
    }
    conformance::main(subjects)
}

/// The CLI of a user's binary (`ipc-matrix run`, `report`, `baseline accept`, ...) with
/// their stacks registered, and this process's allocator the counted one, so that its
/// instruction counts do not move with where earlier allocations left the heap. Each
/// argument is a value of a type implementing [`Stack`].
#[macro_export]
macro_rules! main {
    ($($stack:expr),* $(,)?) => {
        #[global_allocator]
        static IPC_MATRIX_HEAP: $crate::stack_entry::CountedHeap =
            $crate::stack_entry::CountedHeap::new();

        fn main() -> ::std::process::ExitCode {
            $crate::stack_entry::register_or_exit(::std::vec![
                $(::std::boxed::Box::leak(::std::boxed::Box::new($stack))
                    as &'static dyn $crate::stack_entry::Stack),*
            ]);
            $crate::cli::main()
        }
    };
}

/// The nextest door of a user's test target (`harness = false`): one test per cell of
/// the nearest matrix.yaml at or above the crate, then the echo fault trials of each
/// registered stack (`fault::<stack>::flip-byte`, ...), with their stacks registered as
/// by [`main!`](crate::main).
#[macro_export]
macro_rules! test_main {
    ($($stack:expr),* $(,)?) => {
        #[global_allocator]
        static IPC_MATRIX_HEAP: $crate::stack_entry::CountedHeap =
            $crate::stack_entry::CountedHeap::new();

        fn main() -> ::std::process::ExitCode {
            $crate::stack_entry::register_or_exit(::std::vec![
                $(::std::boxed::Box::leak(::std::boxed::Box::new($stack))
                    as &'static dyn $crate::stack_entry::Stack),*
            ]);
            static IPC_MATRIX_CRATE_DIR: $crate::door::CompiledPath =
                $crate::door::CompiledPath::new(env!("CARGO_MANIFEST_DIR"));
            $crate::door::run(
                IPC_MATRIX_CRATE_DIR.as_path(),
                $crate::door::faults::registered_stacks_fault_trials(),
            )
        }
    };
}

/// The transport conformance suite of a user's test target (`harness = false`) for their
/// stacks: the checks of the `Channel` contract every built-in transport passes (sizes,
/// ordering, deadlines, a dead peer, oversized messages, the loaned path where it has
/// one), one test `<stack>::<check>` each, against a peer in a process of its own. Each
/// argument is a value of a type implementing [`Stack`].
#[macro_export]
macro_rules! conformance_main {
    ($($stack:expr),* $(,)?) => {
        fn main() {
            $crate::stack_entry::conformance(::std::vec![
                $(::std::boxed::Box::leak(::std::boxed::Box::new($stack))
                    as &'static dyn $crate::stack_entry::Stack),*
            ]);
        }
    };
}
