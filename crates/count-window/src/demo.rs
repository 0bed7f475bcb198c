//! A deterministic workload with known windows: the same loop at one and at two times
//! the iterations, an empty window, one window per thread, and every unusual sequence the
//! plugin documents (reopen, close without open, a thread and the process exiting inside
//! a window, nesting). Work outside the windows is ten times larger than inside, so a
//! count that leaks it is obvious. Used by the plugin's tests (x86_64, as the test
//! binary itself) and by `examples/count-demo.rs` (any target, `scripts/count-demo.sh`).

use crate::{close, mark_pauses, open, pause, window};
use std::hint::black_box;

/// `iterations` of the loop.
pub const ONE: u64 = 1;
/// `2 * iterations` of the same loop.
pub const TWO: u64 = 2;
/// Nothing: the cost of the markers themselves.
pub const EMPTY: u64 = 3;
/// `iterations` of the loop, once in each of the spawned threads.
pub const PER_THREAD: u64 = 4;
/// Opened, `iterations`, opened again, `iterations`, closed: a `reopen` record and a
/// `close` record.
pub const REOPENED: u64 = 5;
/// Closed without having been opened.
pub const UNMATCHED: u64 = 6;
/// Opened in a thread that then exits: `iterations`, then a `thread-exit` record.
pub const THREAD_EXIT: u64 = 7;
/// Outer window around [`INNER`] and another `iterations`.
pub const OUTER: u64 = 8;
/// `iterations` inside [`OUTER`].
pub const INNER: u64 = 9;
/// A label whose two 32-bit halves both have their top bit set: it must arrive whole
/// from 32-bit guests too (an empty window).
pub const WIDE: u64 = 0xFEDC_BA98_8765_4321;
/// `iterations` counted, with ten times as many inside a pause (and a nested pause) in
/// between: counts as [`ONE`].
pub const PAUSED: u64 = 11;
/// Opened last and never closed: a `process-exit` record.
pub const PROCESS_EXIT: u64 = 10;

/// A loop the compiler cannot shorten: `iterations` rounds of xorshift.
#[inline(never)]
pub fn spin(iterations: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..black_box(iterations) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    black_box(x)
}

/// Runs the workload: `iterations` per unit of work, `threads` threads for
/// [`PER_THREAD`]. Leaves [`PROCESS_EXIT`] open, so call it last.
pub fn run(iterations: u64, threads: usize) {
    // Outside every window: not counted.
    spin(10 * iterations);
    {
        let _w = window(ONE);
        spin(iterations);
    }
    spin(10 * iterations);
    {
        let _w = window(TWO);
        spin(2 * iterations);
    }
    {
        let _w = window(EMPTY);
    }
    {
        let _w = window(WIDE);
    }
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                spin(10 * iterations);
                let _w = window(PER_THREAD);
                spin(iterations);
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker thread");
    }

    open(REOPENED);
    spin(iterations);
    open(REOPENED);
    spin(iterations);
    close(REOPENED);

    close(UNMATCHED);

    std::thread::spawn(move || {
        open(THREAD_EXIT);
        spin(iterations);
    })
    .join()
    .expect("exiting thread");

    open(OUTER);
    {
        let _w = window(INNER);
        spin(iterations);
    }
    spin(iterations);
    close(OUTER);

    mark_pauses();
    {
        let _w = window(PAUSED);
        {
            let _paused = pause();
            spin(5 * iterations);
            {
                let _nested = pause();
                spin(5 * iterations);
            }
        }
        spin(iterations);
    }

    open(PROCESS_EXIT);
    spin(iterations);
}
