//! The machine and build a result came from.

use crate::variables::read_variable;
use serde::{Deserialize, Serialize};

/// Set by the QEMU runner script to `qemu`; absent means the binary runs natively.
pub const RUNNER_ENV: &str = "IPC_MATRIX_RUNNER";
/// Set by the QEMU runner script to the emulator's version line.
const QEMU_VERSION_ENV: &str = "IPC_MATRIX_QEMU_VERSION";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub target_triple: String,
    /// `native`, or `qemu` for emulated runs (whose timings measure the emulator).
    pub runner: String,
    pub qemu_version: Option<String>,
    pub cpu_model: String,
    pub logical_cores: usize,
    pub kernel: String,
    pub rustc: String,
    pub build_profile: String,
    pub opt_level: String,
    pub debug_assertions: bool,
}

impl Environment {
    /// The environment of this process, read once (it does not change during a run).
    pub fn capture() -> Self {
        static CAPTURED: std::sync::OnceLock<Environment> = std::sync::OnceLock::new();
        CAPTURED.get_or_init(Self::read).clone()
    }

    fn read() -> Self {
        // Values that do not fit are refused where a run starts (`check_environment`);
        // here they are never a folder's name.
        let runner = match read_variable(RUNNER_ENV) {
            Ok(Some(runner)) => runner.trim().to_string(),
            _ => "native".into(),
        };
        Self {
            target_triple: env!("IPC_MATRIX_BUILD_TARGET").to_string(),
            qemu_version: (runner == "qemu").then(|| {
                read_variable(QEMU_VERSION_ENV)
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| "unknown".into())
            }),
            runner,
            cpu_model: cpu_model(),
            logical_cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            rustc: env!("IPC_MATRIX_BUILD_RUSTC").to_string(),
            build_profile: env!("IPC_MATRIX_BUILD_PROFILE").to_string(),
            opt_level: env!("IPC_MATRIX_BUILD_OPT_LEVEL").to_string(),
            debug_assertions: cfg!(debug_assertions),
        }
    }

    /// Timings are only worth keeping from optimized code.
    pub fn is_optimized(&self) -> bool {
        self.opt_level != "0"
    }

    pub fn leg(&self) -> String {
        leg_name(&self.target_triple, &self.runner)
    }
}

fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            matches!(key.trim(), "model name" | "Model" | "cpu model" | "cpu")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// A leg's name: the target triple and the runner, `<triple>@<runner>`.
pub fn leg_name(triple: &str, runner: &str) -> String {
    format!("{triple}@{runner}")
}
