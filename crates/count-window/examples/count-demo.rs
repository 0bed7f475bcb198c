//! The counting demo as a program for any target (see `count_window::demo`):
//! `count-demo [iterations] [threads]`, default 100000 and 4. Run it under
//! `qemu-<arch> -plugin libipc_matrix_qemu_count.so,out=counts.jsonl`
//! (`scripts/count-demo.sh` does, and checks the counts).

fn main() {
    let mut args = std::env::args().skip(1);
    let iterations = args
        .next()
        .map_or(100_000, |a| a.parse().expect("iterations: a number"));
    let threads = args
        .next()
        .map_or(4, |a| a.parse().expect("threads: a number"));
    ipc_matrix_count_window::demo::run(iterations, threads);
}
