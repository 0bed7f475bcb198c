//! One nextest test per cell of this crate's matrix.yaml, and the matrix's fault trials
//! over udgram (`fault::udgram::flip-byte`, ...).

ipc_matrix::test_main!(udgram_stack::UnixDatagramStack);
