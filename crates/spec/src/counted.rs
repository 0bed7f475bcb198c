//! The counted build of a target: what its instruction counts are made from. A count is
//! the guest instructions of a program under an emulator, so everything the program runs
//! is part of it; the counted build takes nothing from the host: it is static against
//! musl, its C and C++ compiled by zig (both pinned), and it runs under the pinned QEMU
//! (`scripts/pinned-qemu.sh`, which covers x86_64 and aarch64). Its results form the leg
//! [`count_leg`], whatever the triple of the leg whose cells it counts.

use crate::Runner;

/// The counted build of `triple`'s architecture, `x86_64-unknown-linux-musl` for
/// `x86_64-unknown-linux-gnu`; `None` where the pinned QEMU does not cover it.
pub fn counted_target(triple: &str) -> Option<&'static str> {
    let linux = |arch: &str| {
        triple
            .strip_prefix(arch)
            .is_some_and(|rest| rest.starts_with("-unknown-linux-"))
    };
    if linux("x86_64") {
        Some("x86_64-unknown-linux-musl")
    } else if linux("aarch64") {
        Some("aarch64-unknown-linux-musl")
    } else {
        None
    }
}

/// The leg a target's instruction counts are reported under, `<counted triple>@qemu`:
/// the count pass of a native leg (its cells again, as the counted build), or the
/// emulated leg of a counted build itself. `None` for a target without a counted build
/// and for emulated legs of other builds (their suite runs under QEMU, uncounted).
pub fn count_leg(triple: &str, runner: Runner) -> Option<String> {
    let counted = counted_target(triple)?;
    (runner == Runner::Native || triple == counted).then(|| format!("{counted}@{}", Runner::Qemu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_covered_architecture_has_one_counted_build() {
        for (triple, counted) in [
            (
                "x86_64-unknown-linux-gnu",
                Some("x86_64-unknown-linux-musl"),
            ),
            (
                "x86_64-unknown-linux-musl",
                Some("x86_64-unknown-linux-musl"),
            ),
            (
                "aarch64-unknown-linux-gnu",
                Some("aarch64-unknown-linux-musl"),
            ),
            ("s390x-unknown-linux-gnu", None),
            ("armv7-unknown-linux-gnueabihf", None),
            ("x86_64-pc-windows-msvc", None),
            ("x86_64", None),
        ] {
            assert_eq!(counted_target(triple), counted, "{triple}");
        }
    }

    #[test]
    fn native_legs_and_counted_builds_have_a_count_leg() {
        let leg = |t, r| count_leg(t, r);
        assert_eq!(
            leg("x86_64-unknown-linux-gnu", Runner::Native).as_deref(),
            Some("x86_64-unknown-linux-musl@qemu")
        );
        assert_eq!(
            leg("aarch64-unknown-linux-musl", Runner::Qemu).as_deref(),
            Some("aarch64-unknown-linux-musl@qemu")
        );
        assert_eq!(leg("aarch64-unknown-linux-gnu", Runner::Qemu), None);
        assert_eq!(leg("s390x-unknown-linux-gnu", Runner::Qemu), None);
    }
}
