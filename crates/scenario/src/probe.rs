//! A probe of the machine itself, taken just before each cell: the round trip of one cache
//! line between the measuring CPU and the peer CPU, two threads of this process spinning.
//! It is the floor of any shared-memory round trip between those CPUs at that moment, and
//! it moves when the host moves the vCPUs (onto two hyperthreads of one core, say); a
//! verdict that sees it move knows the machine changed, not the code.

use ipc_matrix_results::Placement;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROUND_TRIPS: u64 = 2000;
const BATCH: u64 = 100;
/// The whole probe gives up after this long (a descheduled responder, an emulator).
const DEADLINE: Duration = Duration::from_millis(200);

/// Median over batches of the mean round trip, in nanoseconds; `None` when the process is
/// not pinned or the probe did not finish in time.
pub fn core_to_core_ns(placement: Placement) -> Option<u64> {
    let peer_cpu = placement.peer_cpu?;
    placement.measurer_cpu?;
    let line = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + DEADLINE;
    let responder = {
        let line = Arc::clone(&line);
        std::thread::spawn(move || {
            if ipc_matrix_transport::set_thread_cpus(&[peer_cpu]).is_err() {
                return;
            }
            for i in 0..ROUND_TRIPS {
                // Odd values are pings, even values pongs.
                if !spin_until(&line, 2 * i + 1, deadline) {
                    return;
                }
                line.store(2 * i + 2, Ordering::Release);
            }
        })
    };
    let mut batch_means = Vec::new();
    let mut finished = true;
    'batches: for batch in 0..ROUND_TRIPS / BATCH {
        let started = Instant::now();
        for i in batch * BATCH..(batch + 1) * BATCH {
            line.store(2 * i + 1, Ordering::Release);
            if !spin_until(&line, 2 * i + 2, deadline) {
                finished = false;
                break 'batches;
            }
        }
        batch_means.push(started.elapsed().as_nanos() as u64 / BATCH);
    }
    if !finished {
        // Let the responder see the deadline too; it never blocks past it.
        line.store(u64::MAX, Ordering::Release);
    }
    let _ = responder.join();
    if !finished {
        return None;
    }
    batch_means.sort_unstable();
    batch_means.get(batch_means.len() / 2).copied()
}

fn spin_until(line: &AtomicU64, value: u64, deadline: Instant) -> bool {
    let mut spins = 0u32;
    loop {
        let seen = line.load(Ordering::Acquire);
        if seen == value {
            return true;
        }
        if seen == u64::MAX {
            return false;
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(4096) && Instant::now() > deadline {
            return false;
        }
        std::hint::spin_loop();
    }
}
