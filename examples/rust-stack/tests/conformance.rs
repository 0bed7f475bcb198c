//! The transport conformance suite, the checks every built-in transport of ipc-matrix
//! passes, run against udgram: `udgram::sizes`, `udgram::ordering`, `udgram::peer-death`...

ipc_matrix::conformance_main!(udgram_stack::UnixDatagramStack);
