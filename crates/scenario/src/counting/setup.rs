//! The counting setup of this process, as it sees it: the emulator that runs it (the
//! version line the runner script passes, as `Environment` captured it), the counting plugin's API, and the C library and other shared
//! objects it has mapped, each hashed. Read once per process.

use ipc_matrix_results::{CountingSetup, Environment};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

/// Hex digits of a library's SHA-256 kept: enough to tell two builds apart.
const DIGEST_HEX: usize = 16;

/// This process's counting setup, counted by a plugin of API `plugin_api`.
pub(crate) fn of_this_process(plugin_api: u32) -> CountingSetup {
    static SETUP: OnceLock<CountingSetup> = OnceLock::new();
    SETUP
        .get_or_init(|| {
            let libraries = mapped_libraries();
            CountingSetup {
                emulator: emulator(Environment::capture().qemu_version.as_deref()),
                plugin_api,
                c_library: c_library(),
                linkage: if libraries.is_empty() {
                    "static"
                } else {
                    "dynamic"
                }
                .into(),
                libraries,
            }
        })
        .clone()
}

/// `qemu 7.2.22` from `qemu-x86_64 version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18)`: the
/// release, not the distribution's package revision.
fn emulator(version_line: Option<&str>) -> String {
    let Some(line) = version_line else {
        return "unknown emulator".into();
    };
    let release = line
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1);
    match release {
        Some(release) => format!("qemu {release}"),
        None => line.trim().to_string(),
    }
}

#[cfg(target_env = "gnu")]
fn c_library() -> String {
    // SAFETY: gnu_get_libc_version returns a static, NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    format!("glibc {}", version.to_string_lossy())
}

/// A static musl build names the toolchain whose musl it links: `scripts/lib.sh zig_env`
/// sets IPC_MATRIX_ZIG (`zig 0.17.1`) for the counted builds.
#[cfg(target_env = "musl")]
fn c_library() -> String {
    match option_env!("IPC_MATRIX_ZIG") {
        Some(zig) => format!("musl of {zig} (linked into the binary)"),
        None => "musl (linked into the binary)".into(),
    }
}

#[cfg(not(any(target_env = "gnu", target_env = "musl")))]
fn c_library() -> String {
    "unknown C library".into()
}

/// Every shared object this process has mapped (not the program itself), as
/// `<file name> <digest>`, sorted. Under QEMU user mode `/proc/self/maps` lists the
/// guest's mappings with the files they came from.
fn mapped_libraries() -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let exe = std::env::current_exe().ok();
    let mut paths: Vec<&str> = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter(|path| path.starts_with('/') && path.contains(".so"))
        .filter(|path| exe.as_deref() != Some(std::path::Path::new(path)))
        .collect();
    paths.sort_unstable();
    paths.dedup();
    let mut libraries: Vec<String> = paths
        .into_iter()
        .map(|path| {
            let name = path.rsplit('/').next().unwrap_or(path);
            match std::fs::read(path) {
                Ok(bytes) => {
                    let digest = Sha256::digest(&bytes);
                    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                    format!("{name} {}", &hex[..DIGEST_HEX])
                }
                Err(e) => format!("{name} unreadable ({})", e.kind()),
            }
        })
        .collect();
    libraries.sort();
    libraries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emulator_is_named_by_its_release() {
        let debian = "qemu-x86_64 version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)";
        assert_eq!(emulator(Some(debian)), "qemu 7.2.22");
        assert_eq!(emulator(Some("qemu-aarch64 version 10.0.2")), "qemu 10.0.2");
        assert_eq!(emulator(Some("something else")), "something else");
        assert_eq!(emulator(None), "unknown emulator");
    }

    #[test]
    #[cfg(target_env = "gnu")]
    fn this_process_names_its_c_library_and_hashes_its_libraries() {
        let setup = of_this_process(1);
        assert!(setup.c_library.starts_with("glibc 2."), "{setup:?}");
        assert_eq!(setup.linkage, "dynamic");
        assert!(
            setup.libraries.iter().any(|l| l.starts_with("libc.so.6 ")),
            "{setup:?}"
        );
        assert!(setup
            .libraries
            .iter()
            .all(|l| l.rsplit(' ').next().is_some_and(|d| d.len() == DIGEST_HEX)));
    }
}
