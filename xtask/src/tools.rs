//! What the tests need of the machine beyond Rust, installed with apt where it is missing.
//!
//! `interop-tools`: protoc and capnp (the reference implementations the interop tests
//! decode with), pyzmq on the system's libzmq (the stock ZeroMQ peer), `ip` and `tc` for
//! the second host's cells and `setpriv` for the test that drops CAP_NET_ADMIN. Without
//! them those tests are listed as ignored, so a failed install only says so.
//!
//! `browser`: headless Chromium and Python 3 for the browser check of the reports
//! (scripts/check-reports.sh). Exit 1, saying why the check is skipped, where neither
//! the browser nor apt is there: never silently.

use crate::say::say;
use crate::sh::{apt_install, have, missing_packages, succeeds};
use std::process::Command;

pub fn interop_tools() {
    let mut missing = missing_packages(&[
        ("protoc", "protobuf-compiler"),
        ("capnp", "capnproto"),
        ("ip", "iproute2"),
        ("setpriv", "util-linux"),
    ]);
    if !succeeds(Command::new("/usr/bin/python3").args(["-c", "import zmq"])) {
        missing.push("python3-zmq".into());
    }
    if missing.is_empty() {
        return;
    }
    if let Err(e) = apt_install(&missing) {
        say(&format!(
            "could not install {} ({e:#}): the interop tests that need them are listed as ignored",
            missing.join(" ")
        ));
    }
}

/// Whether the browser check can run (Chromium and Python there, or installed now).
pub fn browser() -> bool {
    let missing = missing_packages(&[("chromium", "chromium"), ("python3", "python3")]);
    if missing.is_empty() {
        return true;
    }
    let names = missing.join(" ");
    if !have("apt-get") {
        say(&format!(
            "skipped: no {names} and no apt (the reports are not checked in a browser)"
        ));
        return false;
    }
    if apt_install(&missing).is_ok() {
        return true;
    }
    // Ubuntu, for one, ships Chromium only as a snap, which apt cannot install here.
    say(&format!(
        "skipped: apt-get could not install {names} (the reports are not checked in a browser)"
    ));
    false
}
