//! How much other work competed for the CPUs during a cell, from the kernel's pressure
//! stall information (/proc/pressure/cpu, Linux 4.20+): the share of the cell's wall time
//! in which some runnable task waited for a CPU. A compile or another CI job on the same
//! machine shows here; on a quiet machine it stays near zero.

use std::time::Instant;

/// Cumulative microseconds in which some task waited for a CPU; `None` without PSI.
fn cpu_some_total_us() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|field| field.strip_prefix("total="))?
        .parse()
        .ok()
}

/// A reading taken at the start of a cell.
pub struct PressureMeter {
    started: Instant,
    stalled_us: Option<u64>,
}

impl PressureMeter {
    pub fn start() -> Self {
        Self {
            started: Instant::now(),
            stalled_us: cpu_some_total_us(),
        }
    }

    /// The share (0..=1) of the time since `start` in which some task waited for a CPU.
    pub fn share(&self) -> Option<f64> {
        let stalled = cpu_some_total_us()?.checked_sub(self.stalled_us?)?;
        let elapsed = self.started.elapsed().as_micros() as f64;
        (elapsed > 0.0).then(|| (stalled as f64 / elapsed).min(1.0))
    }
}
