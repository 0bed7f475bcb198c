//! Where the two processes of a cell run. Left to the scheduler, a blocking echo lands on
//! one CPU in some runs and on two in others, and its round trip moves several-fold from
//! run to run (on a 2-vCPU VM: 6 us on one CPU, 40 us across two). Pinning the measuring
//! thread and the peer to two different CPUs makes runs comparable with each other and
//! with a baseline; the placement is recorded with every result.

use ipc_matrix_results::Placement;
use ipc_matrix_transport::{allowed_cpus, set_thread_cpus};

/// `off` leaves placement to the scheduler.
pub const PIN_ENV: &str = "IPC_MATRIX_PIN";

/// The measuring thread on the first CPU this process may use, the peer on the second;
/// no pinning with fewer than two CPUs or when switched off.
pub fn choose() -> Placement {
    let switched_off = std::env::var(PIN_ENV).is_ok_and(|v| v == "off");
    match allowed_cpus().as_slice() {
        [first, second, ..] if !switched_off => Placement {
            measurer_cpu: Some(*first),
            peer_cpu: Some(*second),
        },
        _ => Placement::default(),
    }
}

/// Pins the calling thread to `cpu` until dropped, then gives it back the CPUs it had.
pub struct PinnedThread {
    previous: Vec<usize>,
}

impl PinnedThread {
    pub fn pin(cpu: Option<usize>) -> std::io::Result<Self> {
        let previous = allowed_cpus();
        if let Some(cpu) = cpu {
            set_thread_cpus(&[cpu])?;
        }
        Ok(Self { previous })
    }
}

impl Drop for PinnedThread {
    fn drop(&mut self) {
        // Best effort: failing to widen the set again only costs later cells their choice.
        let _ = set_thread_cpus(&self.previous);
    }
}
