//! `test [nextest arguments]`: the test command (scripts/test.sh, also what CI runs).
//!
//! Formatting, lints, then every test through nextest's `ci` profile, on this machine and
//! on the other of x86_64 and aarch64 under QEMU: unit tests, the fault-injection tests,
//! and one test per cell of the quick profile. The emulated leg is that architecture's
//! counted build (static, musl, by zig) under the pinned QEMU and counts guest
//! instructions as it runs; the host's cells run once more, as its own architecture's
//! counted build, to count them, and each count pass once more in a second userland,
//! which must count the same ([`counted_leg`]). The transport crate's tests also run on
//! the other architecture and on s390x (big-endian), with the reference C peer's cells
//! for s390x; the command line's hostile-input suites on the other architecture. The
//! worked examples of a user's own stack run from copies outside this repository and are
//! counted on each CPU. Ends by writing each leg's reports (judged
//! against baselines/, instructions included) and all legs side by side, renders every
//! page written in headless Chromium (scripts/check-reports.sh), and runs our workflow's
//! plan and merge gate here with act, green and failing as they must
//! ([`crate::workflow_proof`]). The suite is built for the host as a named `--target`, as
//! the workflow's legs build it, so the workflow's jobs find that build.
//!
//! A failing step never hides what the others measure: every step after the lints runs,
//! and the failures are repeated at the end ([`Steps`]). Arguments go to the host suite's
//! and the other architecture's count pass's `cargo nextest run`.

use crate::repo::Repo;
use crate::say::say;
use crate::sh::{describe, exit_code, host_triple, run, tail};
use crate::steps::{started, Steps};
use crate::{count_pass, mdbook, peers, pinned_qemu, reports, second_userland, setup, zig};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The big-endian CPU the transport crate is also tested on.
const BIG_ENDIAN: &str = "s390x-unknown-linux-gnu";

/// A step that the rest depends on: its failure ends the command.
fn required(command: &mut Command) -> Result<()> {
    run(command)
}

/// This task's own binary, to run one of its tasks as a process of its own (its output
/// to a log).
fn this_task() -> Result<Command> {
    std::env::current_exe()
        .map(Command::new)
        .context("this task's binary")
}

/// `from` copied to `to`, when it exists (a suite that built nothing wrote none).
fn keep_junit(from: &Path, to: &Path) {
    let _ = std::fs::copy(from, to);
}

/// What the background work needs, built while the linters run and the host suite
/// compiles (nothing is timed then): the pinned QEMU that counts, the second userland,
/// and mdbook, one after the other (two of them may install packages, and apt takes one
/// at a time).
pub fn prepare(repo: &Repo) -> Result<()> {
    pinned_qemu::ensure(repo)?;
    let code = second_userland::second_userland(repo, &["--prepare".into()])?;
    if code != 0 {
        bail!("the second userland could not be made (exit {code})");
    }
    mdbook::ensure(repo).map(drop)
}

/// A counted leg's steps: the count pass of `triple` (its JUnit kept as
/// `ci/junit-<counted>.xml`), then the same pass in the second userland.
fn count_and_prove(repo: &Repo, triple: &str, nextest: &[String], steps: &mut Steps) {
    steps.outcome(
        count_pass::count_pass(repo, triple, nextest),
        &format!("the count pass of {triple}"),
    );
    if let Some(counted) = ipc_matrix_spec::counted_target(triple) {
        let arch = counted.split('-').next().unwrap_or(counted);
        let nextest_dir = repo.target_dir.join("nextest");
        keep_junit(
            &nextest_dir.join(format!("count-{arch}/junit.xml")),
            &nextest_dir.join(format!("ci/junit-{counted}.xml")),
        );
    }
    steps.outcome(
        second_userland::second_userland(repo, &[triple.to_owned()]),
        &format!("the second userland's count pass of {triple}"),
    );
}

/// `counted-leg <triple> [nextest arguments]`: a counted leg's steps as a task of its own
/// (the test command runs the other architecture's in the background); the first
/// failure's exit status, its failures repeated at the end.
pub fn counted_leg(repo: &Repo, triple: &str, nextest: &[String]) -> u8 {
    let mut steps = Steps::default();
    count_and_prove(repo, triple, nextest, &mut steps);
    steps.summary(&repo.target_dir.join("nextest"), started());
    steps.status()
}

/// The `what` suite (`selection`: nextest's packages, tests and filter) on the other
/// architecture's counted build under the pinned QEMU, uncounted; its JUnit kept as
/// `ci/junit-<counted>-<what>.xml`.
fn other_suite(repo: &Repo, counted: &str, what: &str, selection: &[&str], steps: &mut Steps) {
    say(&format!("{what} suite on {counted} (the pinned QEMU)"));
    steps.outcome(
        zig::env(repo, &[counted.to_owned()]).and_then(|env| {
            let mut c = Command::new("cargo");
            c.args(["nextest", "run", "--locked"])
                .args(selection)
                .args(["--profile", "ci", "--target", counted])
                .envs(env)
                .env("IPC_MATRIX_COUNT", "off");
            c.status().map(exit_code).with_context(|| describe(&c))
        }),
        &format!("the {what} suite on {counted}"),
    );
    let ci = repo.target_dir.join("nextest").join("ci");
    keep_junit(
        &ci.join("junit.xml"),
        &ci.join(format!("junit-{counted}-{what}.xml")),
    );
}

pub fn test(repo: &Repo, nextest: &[String]) -> Result<u8> {
    let since = started();
    let host = host_triple()?;
    let other = if host.starts_with("aarch64-") {
        "x86_64-unknown-linux-gnu"
    } else {
        "aarch64-unknown-linux-gnu"
    };
    let counted_of = |t: &str| {
        ipc_matrix_spec::counted_target(t).with_context(|| {
            format!("{t} has no counted build: the test command counts x86_64 and aarch64")
        })
    };
    let (counted, other_counted) = (counted_of(&host)?, counted_of(other)?);
    // The suite is built for the host as a target named, as the workflow's legs build it
    // (`--target`, IPC_MATRIX_TARGET): the workflow's jobs run here then find that build.
    if reports::suite_target().is_none() {
        std::env::set_var("IPC_MATRIX_TARGET", &host);
    }
    let suite_target = reports::suite_target().unwrap_or_else(|| host.clone());
    let results = repo.target_dir.join("ipc-matrix");
    let nextest_dir = repo.target_dir.join("nextest");
    std::fs::create_dir_all(&results).with_context(|| results.display().to_string())?;
    let mut steps = Steps::default();

    let prepare_log = results.join("prepare.log");
    let log = |path: &Path| -> Result<(Stdio, Stdio)> {
        let file = std::fs::File::create(path).with_context(|| path.display().to_string())?;
        let copy = file.try_clone()?;
        Ok((file.into(), copy.into()))
    };
    let (out, err) = log(&prepare_log)?;
    let mut prepared = this_task()?
        .arg("prepare")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .context("starting the preparation")?;

    say("cargo fmt --check");
    required(Command::new("cargo").args(["fmt", "--all", "--", "--check"]))?;
    say("cargo clippy --all-targets -D warnings");
    // In the test profile, the one the suite builds: the build scripts (libzmq's C++ among
    // them) and proc macros it compiles and runs are the suite's, not done twice.
    required(Command::new("cargo").args([
        "clippy",
        "--locked",
        "--workspace",
        "--all-targets",
        "--profile",
        "test",
        "--target",
        &suite_target,
        "--",
        "-D",
        "warnings",
    ]))?;
    say("xtask: cargo fmt --check, clippy -D warnings, its tests");
    let xtask_cargo = |args: &[&str]| {
        let mut c = Command::new("cargo");
        c.args(args)
            .args(["--manifest-path", "xtask/Cargo.toml"])
            .env("CARGO_TARGET_DIR", repo.target_dir.join("xtask"));
        c
    };
    required(xtask_cargo(&["fmt"]).args(["--", "--check"]))?;
    required(
        xtask_cargo(&["clippy", "--locked", "--all-targets", "--quiet"])
            .args(["--", "-D", "warnings"]),
    )?;
    steps.run(&mut xtask_cargo(&["test", "--locked", "--quiet"]));
    say("workflow lints (actionlint, zizmor)");
    required(&mut Command::new("scripts/lint-workflows.sh"))?;

    // The reference external peers (peers/): the C one built for each target its cells run on.
    peers::build(repo, Some(&host))?;
    say(&format!(
        "host suite: cargo nextest run --profile ci ({host})"
    ));
    let suite = |extra: &[&str]| {
        let mut c = Command::new("cargo");
        c.args(["nextest", "run"])
            .args(extra)
            .args(["--locked", "--workspace", "--profile", "ci"])
            .args(["--target", &suite_target])
            .args(nextest);
        c
    };
    steps.run(&mut suite(&["--no-run"]));
    match prepared.wait() {
        Ok(status) if status.success() => {}
        outcome => {
            let code = outcome.map_or(1, exit_code);
            eprintln!(
                "{}",
                tail(
                    &std::fs::read_to_string(&prepare_log).unwrap_or_default(),
                    20
                )
            );
            let what = format!(
                "the pinned QEMU, the second userland or mdbook (log: {})",
                prepare_log.display()
            );
            say(&format!("failed: {what}"));
            steps.record(code.max(1), &what);
        }
    }
    // The book: every page SUMMARY.md names must exist (create-missing = false); its links
    // are checked by the host suite (crates/cli/tests/book.rs).
    say("the book: mdbook build docs");
    steps.outcome(build_book(repo), "mdbook build docs");
    steps.run(&mut suite(&[]));
    let ci = nextest_dir.join("ci");
    keep_junit(&ci.join("junit.xml"), &ci.join(format!("junit-{host}.xml")));
    // A user's own stack from outside this repository: the worked example, copied elsewhere.
    steps.run(&mut Command::new("scripts/example-stacks.sh"));

    // The counts of both architectures: the cells of this one and of the other, each as
    // its counted build (static against musl, compiled by zig) under the pinned QEMU,
    // built together, so that each build's tail overlaps the other's. The other
    // architecture's count pass is also its suite here (its unit tests run on GitHub's
    // machines of that architecture); the transport crate's tests run on it too.
    for t in [counted, other_counted] {
        setup::setup_target(repo, t)?;
    }
    count_pass::ensure_count_plugin(repo)?;
    // Counting from the command line, in a user's folder (ipc-matrix init), no script of ours.
    steps.run(&mut Command::new("scripts/count-from-cli.sh"));
    steps.outcome(
        counted_build(repo, &[counted, other_counted]),
        "the counted builds",
    );
    // Both architectures' count passes at once, each followed by its second count in a
    // second userland (Debian 13), which must count every cell that gates the same, to the
    // last instruction, and pass against baselines/ too. A pass keeps about one CPU busy
    // (QEMU runs a cell's two processes, mostly one at a time), and what it counts does
    // not depend on what else runs (the baselines were accepted from runs with two CPU
    // hogs). The other architecture's passes run in the background; their output is shown
    // when they end.
    let other_log = results.join(format!("count-pass-{other_counted}.log"));
    let (out, err) = log(&other_log)?;
    let mut other_pass = this_task()?
        .args(["counted-leg", other])
        .args(nextest)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("starting the count passes of {other_counted}"))?;
    // The host's instruction-count pass: its cells again, as its architecture's counted
    // build; the leg <arch>-unknown-linux-musl@qemu is judged on instructions.
    count_and_prove(repo, &host, &[], &mut steps);
    let other_status = other_pass.wait().map_or(1, exit_code);
    let text = std::fs::read_to_string(&other_log).unwrap_or_default();
    eprint!("{text}");
    if other_status != 0 {
        let what = format!(
            "the count passes of {other_counted} (log: {})",
            other_log.display()
        );
        say(&format!("failed: {what}"));
        steps.record(other_status, &what);
        // What failed in there, step by step: its own summary.
        steps.nested(
            text.lines()
                .filter_map(|l| l.strip_prefix("    exit "))
                .map(|l| format!("exit {l}")),
        );
    }
    let mut legs = vec![
        format!("{host}@native"),
        format!("{other_counted}@qemu"),
        format!("{counted}@qemu"),
    ];
    other_suite(
        repo,
        other_counted,
        "transport",
        &["-p", "ipc-matrix-transport"],
        &mut steps,
    );
    // The command line's hostile-input suites on the other architecture too (the count
    // pass built their crates): no process that is not ours decides an exit status, init
    // writes whole or not at all, a datagram's goodbye, what a baseline refuses. The test
    // that runs init's workflow runs the binary its steps install directly, which only
    // the host can.
    other_suite(
        repo,
        other_counted,
        "hostile-input",
        &[
            "-p",
            "ipc-matrix",
            "-p",
            "ipc-matrix-baseline",
            "--test",
            "count_flag",
            "--test",
            "init",
            "--test",
            "hostile",
            "--test",
            "accept",
            "-E",
            "not test(/^the_workflow_init_writes_runs/)",
        ],
        &mut steps,
    );

    // The transport crate alone on a big-endian CPU under QEMU: its conformance suite and
    // property tests read and write headers and length prefixes, which little-endian CPUs
    // cannot get wrong by accident. Not a leg: no cells, no reports; JUnit of its own.
    if host != BIG_ENDIAN {
        setup::setup_target(repo, BIG_ENDIAN)?;
        say(&format!(
            "transport suite on {BIG_ENDIAN} (big-endian, QEMU user mode)"
        ));
        steps.run(Command::new("cargo").args([
            "nextest",
            "run",
            "--locked",
            "-p",
            "ipc-matrix-transport",
            "--profile",
            "ci",
            "--target",
            BIG_ENDIAN,
        ]));
        keep_junit(
            &ci.join("junit.xml"),
            &ci.join(format!("junit-{BIG_ENDIAN}-transport.xml")),
        );
        // The C peer built for s390x, checked byte for byte by this machine's harness (a
        // big-endian program of someone else's, through the external peer protocol).
        peers::build(repo, Some(BIG_ENDIAN))?;
        say(&format!(
            "external C peer cells with the peer on {BIG_ENDIAN} (QEMU user mode)"
        ));
        steps.outcome(
            crate::big_endian_peer::big_endian_peer(repo, BIG_ENDIAN),
            "the C peer's cells on s390x",
        );
    }
    // The worked examples counted on each CPU, as their users count on CPUs of other kinds,
    // judged against the examples' committed baselines, each with its fault.
    steps.run(&mut Command::new("scripts/example-counts.sh"));

    // Instruction regressions fail the test command: counts are deterministic, so a change
    // that costs more instructions must come with its re-measured baseline. Timings only warn.
    steps.outcome(
        reports::write(repo, reports::suite_target().as_deref(), &legs, true),
        "the legs' reports (--strict-instructions)",
    );
    let profile = reports::suite_profile();
    // Every leg with results side by side: the count pass and the emulated leg give the
    // instructions per architecture, the native leg its timings.
    let leg_dir = |leg: &str| results.join(leg).join(&profile);
    legs.retain(|leg| leg_dir(leg).join("cells").is_dir());
    let compared: Vec<String> = legs
        .iter()
        .map(|leg| leg_dir(leg).to_string_lossy().into_owned())
        .collect();
    let comparison = results.join("compare/comparison.html");
    if compared.len() > 1 {
        say(&format!("legs side by side: {}", legs.join(" ")));
        let mut args = vec!["report".to_owned(), "--compare".to_owned()];
        args.extend(compared.iter().cloned());
        steps.outcome(
            reports::cli(repo, reports::suite_target().as_deref(), &args).and_then(|mut c| {
                c.stdout(Stdio::null())
                    .status()
                    .map(exit_code)
                    .map_err(anyhow::Error::from)
            }),
            "the legs side by side",
        );
    }
    // Every page written, as a reader's browser shows it (after the self-test of the checks).
    let mut pages: Vec<PathBuf> = legs
        .iter()
        .map(|leg| leg_dir(leg).join("report.html"))
        .filter(|p| p.is_file())
        .collect();
    if compared.len() > 1 && comparison.is_file() {
        pages.push(comparison);
    }
    if !pages.is_empty() {
        steps.run(Command::new("scripts/check-reports.sh").args(&pages));
    }
    // Our workflow's jobs, run here with act: the plan, and the merge gate on the legs
    // above, green, with a planted count regression, with a blocking leg broken and with a
    // failing leg that does not block (xtask/src/workflow_proof.rs).
    steps.outcome(
        crate::workflow_proof::prove(repo, false),
        "the workflow's local runs (act)",
    );
    say("JUnit: target/nextest/ci/junit-<triple>.xml (and junit-<triple>-transport.xml)");
    for leg in &legs {
        say(&format!(
            "reports of {leg}: target/ipc-matrix/{leg}/{profile}/report.{{md,html}} and results.json"
        ));
    }
    if legs.len() > 1 {
        say("side by side: target/ipc-matrix/compare/comparison.{md,html}");
    }
    let screenshots = results.join("screenshots");
    if std::fs::read_dir(&screenshots)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".png"))
    {
        say("screenshots: target/ipc-matrix/screenshots/<leg>.png (first screen), <leg>.full.png (whole page)");
    }
    steps.summary(&nextest_dir, since);
    Ok(steps.status())
}

/// The book, built; its last lines shown.
fn build_book(repo: &Repo) -> Result<u8> {
    let mdbook = mdbook::ensure(repo)?;
    let out = Command::new(&mdbook)
        .args(["build", "docs"])
        .output()
        .with_context(|| mdbook.display().to_string())?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", tail(&text, 3));
    Ok(exit_code(out.status))
}

/// Builds the cells of the counted builds given (the count passes' own build) in one
/// cargo run, so that each one's serial tail (the last crates, the links) overlaps the
/// other's work.
pub fn counted_build(repo: &Repo, counted: &[&str]) -> Result<u8> {
    say(&format!("the counted builds: {}", counted.join(" ")));
    let triples: Vec<String> = counted.iter().map(|t| (*t).to_owned()).collect();
    let mut build = Command::new("cargo");
    build
        .args([
            "test",
            "--no-run",
            "--locked",
            "--quiet",
            "--workspace",
            "--test",
            "matrix",
        ])
        .envs(zig::env(repo, &triples)?);
    for t in counted {
        build.args(["--target", t]);
    }
    build
        .status()
        .map(exit_code)
        .with_context(|| describe(&build))
}
