//! `udgram-matrix`: the ipc-matrix CLI with the udgram stack in it
//! (`udgram-matrix run`, `report`, `baseline accept`).

ipc_matrix::main!(udgram_stack::UnixDatagramStack);
