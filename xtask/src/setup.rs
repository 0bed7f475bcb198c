//! `setup-target <triple>`: prepares this machine to build and run tests for a target,
//! installing only what is missing and saying what it did: the rustup target; for a
//! counted build zig, cargo-zigbuild and the pinned QEMU; for any other emulated target
//! the cross gcc and g++ (libzmq is C++) and qemu-user, from apt.

use crate::repo::Repo;
use crate::say::say;
use crate::sh::{apt_install, have, host_triple, rustup_target};
use crate::targets::target;
use crate::{pinned_qemu, zig};
use anyhow::{anyhow, Result};

pub fn setup_target(repo: &Repo, triple: &str) -> Result<()> {
    if ipc_matrix_spec::counted_target(triple) == Some(triple) {
        rustup_target(triple)?;
        zig::ensure(&repo.target_dir)?;
        let bin = pinned_qemu::ensure(repo)?;
        say(&format!("the pinned QEMU: {}", bin.display()));
        return Ok(());
    }
    if triple == host_triple()? {
        say(&format!(
            "{triple} is this machine's own target; nothing to set up"
        ));
        return Ok(());
    }
    let recipe = target(triple)?;
    rustup_target(triple)?;
    let gnu = recipe.gnu;
    let qemu = format!("qemu-{}", recipe.qemu_arch);
    let mut missing = Vec::new();
    if !have(&format!("{gnu}-gcc")) {
        missing.push(format!("gcc-{gnu}"));
        missing.push(format!("libc6-dev-{}-cross", recipe.libc));
    }
    if !have(&format!("{gnu}-g++")) {
        missing.push(format!("g++-{gnu}"));
    }
    if !have(&qemu) {
        missing.push("qemu-user".into());
    }
    if missing.is_empty() {
        say(&format!(
            "{gnu}-gcc, {gnu}-g++ and {qemu}: already installed"
        ));
        return Ok(());
    }
    // The advice follows the cause, so the chain is written into this one message.
    apt_install(&missing).map_err(|e| {
        anyhow!(
            "could not install {}: {e:#}; install them (or their equivalents) by hand (Debian and Ubuntu are known)",
            missing.join(" ")
        )
    })?;
    say(&format!("installed: {}", missing.join(" ")));
    Ok(())
}
