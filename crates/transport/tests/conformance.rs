//! The `Channel` contract (`ipc_matrix_transport::conformance`) for every built-in
//! transport and wake mode: one test `<subject>::<check>` each.

fn main() {
    ipc_matrix_transport::conformance::main(ipc_matrix_transport::conformance::subjects());
}
