//! A leg's suite and its baseline: `test-target <triple> [nextest arguments]` runs the
//! whole suite for one target of matrix.yaml and writes that leg's reports;
//! `accept-baseline [runs] [leg]` measures a leg's baseline afresh from several runs.

use crate::repo::Repo;
use crate::say::say;
use crate::sh::{exit_code, host_triple, run};
use crate::{count_pass, peers, reports, setup, zig};
use anyhow::{bail, Context, Result};
use std::process::Command;

/// The leg a target's results form: `<triple>@native` on this machine, else `@qemu`.
pub fn leg_of(triple: &str, host: &str) -> String {
    if triple == host {
        format!("{triple}@native")
    } else {
        format!("{triple}@qemu")
    }
}

/// `cargo nextest run` of the workspace's suite for `triple` through the `ci` profile.
fn ci_suite(triple: &str) -> Vec<String> {
    [
        "cargo",
        "nextest",
        "run",
        "--locked",
        "--workspace",
        "--profile",
        "ci",
        "--target",
        triple,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Whether `triple` is itself a counted build (compiled by zig: its CLI for the reports
/// is the host's, which compiles with other settings).
fn is_counted_build(triple: &str) -> bool {
    ipc_matrix_spec::counted_target(triple) == Some(triple)
}

/// The suite of one target, set up first if needed, then its leg's reports; the first
/// failure's exit status (every step runs).
pub fn test_target(repo: &Repo, triple: &str, nextest: &[String]) -> Result<u8> {
    setup::setup_target(repo, triple)?;
    peers::build(repo, Some(triple))?;
    let host = host_triple()?;
    let suite = ci_suite(triple);
    let mut command = Command::new(&suite[0]);
    command.args(&suite[1..]).args(nextest);
    // An emulated leg counts as it runs, or stops saying why (scripts/qemu-run).
    let mut count = "off";
    if triple != host {
        count_pass::ensure_count_plugin(repo)?;
        count = "on";
        // The counted build of this machine's own architecture runs under QEMU too.
        if triple.split('-').next() == host.split('-').next() {
            command.env("IPC_MATRIX_EMULATE_NATIVE", "1");
        }
    }
    say(&format!("cargo nextest run --profile ci --target {triple}"));
    let zig_env = if is_counted_build(triple) {
        zig::env(repo, &[triple.to_owned()])
    } else {
        Ok(Vec::new())
    };
    let suite = zig_env.and_then(|env| {
        command
            .envs(env)
            .env("IPC_MATRIX_COUNT", count)
            .status()
            .map(exit_code)
            .context("cargo nextest")
    });
    // A failed suite still gets its reports: what was measured is kept and shown.
    let mut first = suite.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        1
    });
    let junit = repo.target_dir.join("nextest/ci");
    let _ = std::fs::copy(
        junit.join("junit.xml"),
        junit.join(format!("junit-{triple}.xml")),
    );
    let leg = leg_of(triple, &host);
    // The reports run the CLI of the suite just built for the triple; for a counted
    // build, which compiles with zig's settings, the host's.
    let cli = (!is_counted_build(triple)).then_some(triple);
    let reported = reports::write(repo, cli, std::slice::from_ref(&leg), false)?;
    if first == 0 {
        first = reported;
    }
    say(&format!(
        "JUnit: target/nextest/ci/junit-{triple}.xml; reports: target/ipc-matrix/{leg}/{}/",
        reports::suite_profile()
    ));
    Ok(first)
}

/// Measures the baseline of the leg `asked` names (this machine's when none) afresh from
/// `runs` runs of its timing cells, so that it knows how far unchanged code moves from run
/// to run (for a counted leg, how far its counts move under perturbations). A count pass
/// is asked for as its leg (`<arch>-unknown-linux-musl@qemu`, or the counted triple
/// alone) or, for the host's, as `<host>@qemu`; any other triple is a leg of its own,
/// emulated unless it is the host's.
pub fn accept_baseline(repo: &Repo, runs: u32, asked: Option<&str>) -> Result<()> {
    let host = host_triple()?;
    let asked = asked.unwrap_or(&host);
    let triple = asked.split('@').next().unwrap_or(asked);
    let count_pass = asked == format!("{host}@qemu") || is_counted_build(triple);
    let leg = if count_pass {
        let counted = ipc_matrix_spec::counted_target(triple)
            .with_context(|| format!("{triple} has no counted build"))?;
        format!("{counted}@qemu")
    } else {
        if triple != host {
            setup::setup_target(repo, triple)?;
            // The emulated cells count guest instructions as they run.
            count_pass::ensure_count_plugin(repo)?;
            // The reference C peer its cells start.
            peers::build(repo, Some(triple))?;
        }
        leg_of(triple, &host)
    };
    // The CLI of the build the cells ran from: the --target build of the timing cells, or
    // for a count pass (a counted build, compiled by zig) the host build.
    let cli = (!count_pass).then_some(triple);
    let profile = reports::suite_profile();
    for n in 1..=runs {
        say(&format!(
            "run {n} of {runs}: the timing cells of {leg} ({profile})"
        ));
        // A counted leg's runs are made under perturbations (scripts/perturb.sh): a count
        // that moves under one depends on more than the code, and its verdict only informs.
        let mut words: Vec<String> = Vec::new();
        if leg != format!("{triple}@native") {
            words.extend(["scripts/perturb.sh".into(), n.to_string(), "--".into()]);
        }
        if count_pass {
            words.extend(["scripts/count-pass.sh".into(), triple.into()]);
        } else {
            words.extend(ci_suite(triple));
            words.extend(["-E".into(), "binary(matrix) & !test(/^fault::/)".into()]);
        }
        let mut cells = Command::new(&words[0]);
        cells.args(&words[1..]);
        if !count_pass {
            cells.env("IPC_MATRIX_COUNT", "on");
        }
        run(&mut cells)?;
        let mut accept: Vec<String> = ["baseline", "accept"].map(str::to_owned).to_vec();
        if n > 1 {
            accept.push("--append".into());
        }
        accept.extend(["--profile", &profile, "--leg", &leg].map(str::to_owned));
        let code = reports::ipc_matrix(repo, cli, &accept)?;
        if code != 0 {
            bail!("ipc-matrix baseline accept failed (exit {code})");
        }
    }
    say(&format!(
        "baselines/{leg}/{profile}.json now holds {runs} run(s); review with git diff and commit"
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_leg_is_native_only_on_this_machine() {
        let host = "x86_64-unknown-linux-gnu";
        assert_eq!(super::leg_of(host, host), "x86_64-unknown-linux-gnu@native");
        assert_eq!(
            super::leg_of("s390x-unknown-linux-gnu", host),
            "s390x-unknown-linux-gnu@qemu"
        );
    }
}
