//! Where the tasks work.

use std::path::PathBuf;

/// Where the tasks work: the repository, and its cargo target folder (`CARGO_TARGET_DIR`,
/// else the repository's `target/`). The scripts run this binary itself, built into
/// `<target>/xtask` (scripts/lib.sh `xtask`), so that its environment is theirs: no
/// variable of `cargo run` reaches the processes it starts.
pub struct Repo {
    pub root: PathBuf,
    pub target_dir: PathBuf,
    /// The folder the task was started in (the tasks themselves run in `root`): where
    /// the CLI runs for a user's copy.
    pub caller_dir: PathBuf,
}

impl Repo {
    pub fn here() -> Self {
        // The folder above this crate's manifest; the binary may run from anywhere.
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(PathBuf::from)
            .unwrap_or_default();
        let target_dir = std::env::var_os("CARGO_TARGET_DIR")
            .filter(|t| !t.is_empty())
            .map(PathBuf::from)
            .map(|t| if t.is_absolute() { t } else { root.join(t) })
            .unwrap_or_else(|| root.join("target"));
        let caller_dir = std::env::current_dir().unwrap_or_else(|_| root.clone());
        Self {
            root,
            target_dir,
            caller_dir,
        }
    }
}
