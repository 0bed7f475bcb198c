//! What the repository knows of each target triple it builds for: its cross compiler,
//! Debian's packages for it, the QEMU that runs it and the CPU model QEMU is pinned to,
//! and, for the architectures whose cells are counted, the counted build.

use anyhow::Context;

/// One target triple's recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub triple: &'static str,
    /// The Debian cross gcc prefix (`aarch64-linux-gnu` -> `aarch64-linux-gnu-gcc`).
    pub gnu: &'static str,
    /// The suffix of Debian's `libc6-dev-<libc>-cross`.
    pub libc: &'static str,
    /// QEMU user mode's name of the architecture (`qemu-<arch>`), and `uname -m`'s.
    pub qemu_arch: &'static str,
    /// The CPU model QEMU is pinned to (QEMU_CPU), so that counts and the library code
    /// QEMU runs do not depend on the host or on the QEMU version's default.
    pub cpu: &'static str,
}

/// Every triple matrix.yaml may name, with its recipe.
pub const TARGETS: &[Target] = &[
    Target {
        triple: "x86_64-unknown-linux-gnu",
        gnu: "x86_64-linux-gnu",
        libc: "amd64",
        qemu_arch: "x86_64",
        cpu: "Nehalem-v1",
    },
    Target {
        triple: "aarch64-unknown-linux-gnu",
        gnu: "aarch64-linux-gnu",
        libc: "arm64",
        qemu_arch: "aarch64",
        cpu: "cortex-a72",
    },
    Target {
        triple: "armv7-unknown-linux-gnueabihf",
        gnu: "arm-linux-gnueabihf",
        libc: "armhf",
        qemu_arch: "arm",
        cpu: "cortex-a15",
    },
    Target {
        triple: "riscv64gc-unknown-linux-gnu",
        gnu: "riscv64-linux-gnu",
        libc: "riscv64",
        qemu_arch: "riscv64",
        cpu: "sifive-u54",
    },
    Target {
        triple: "s390x-unknown-linux-gnu",
        gnu: "s390x-linux-gnu",
        libc: "s390x",
        qemu_arch: "s390x",
        // TCG refuses the named z models; the QEMU version is recorded with it.
        cpu: "qemu",
    },
    Target {
        triple: "powerpc64le-unknown-linux-gnu",
        gnu: "powerpc64le-linux-gnu",
        libc: "ppc64el",
        qemu_arch: "ppc64le",
        cpu: "power9_v2.0",
    },
];

/// The recipe of `triple`, or an error that lists the known ones.
pub fn target(triple: &str) -> anyhow::Result<&'static Target> {
    TARGETS
        .iter()
        .find(|t| t.triple == triple)
        .with_context(|| {
            let known: Vec<_> = TARGETS.iter().map(|t| t.triple).collect();
            format!("no recipe for {triple}; known: {}", known.join(", "))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_triple_is_refused_with_the_known_ones() {
        let e = format!("{:#}", target("mips-unknown-linux-gnu").unwrap_err());
        assert!(e.contains("no recipe for mips-unknown-linux-gnu"), "{e}");
        assert!(e.contains("s390x-unknown-linux-gnu"), "{e}");
        assert_eq!(
            target("s390x-unknown-linux-gnu").unwrap().gnu,
            "s390x-linux-gnu"
        );
    }

    #[test]
    fn every_triple_is_listed_once() {
        for (i, t) in TARGETS.iter().enumerate() {
            assert!(
                TARGETS[i + 1..].iter().all(|u| u.triple != t.triple),
                "{} twice",
                t.triple
            );
        }
    }
}

#[cfg(test)]
mod matrix_tests {
    use ipc_matrix_spec::{Runner, Spec};
    use std::path::Path;

    /// Every target matrix.yaml declares to run emulated has a recipe here and a QEMU
    /// runner in .cargo/config.toml for the same architecture.
    #[test]
    fn every_emulated_target_of_the_matrix_has_a_recipe_and_a_runner() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let spec = Spec::load(&root.join("matrix.yaml")).unwrap();
        let config = std::fs::read_to_string(root.join(".cargo/config.toml")).unwrap();
        let mut emulated = 0;
        for t in spec.targets.iter().filter(|t| t.runner == Runner::Qemu) {
            emulated += 1;
            let recipe = super::target(&t.triple).unwrap();
            let runner = crate::cargo_config::runner_in(&config, &t.triple)
                .unwrap()
                .unwrap_or_else(|| panic!("{}: no runner in .cargo/config.toml", t.triple));
            assert_eq!(
                runner,
                ["scripts/qemu-run", recipe.qemu_arch, recipe.gnu],
                "{}",
                t.triple
            );
        }
        assert!(emulated > 0, "matrix.yaml declares no emulated target");
    }
}
