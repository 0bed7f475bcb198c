//! `second-userland [--prepare] [<triple> [nextest arguments]]`: the proof that a count
//! depends only on what the repository pins. An architecture's count pass, run again
//! inside a second Linux userland (Debian 13 "trixie": another C library, Python, shell
//! and kernel-facing tools; made with debootstrap into `<target>/userland/`, once), must
//! count every cell that gates (`ipc-matrix report --gating-cells`) the same, measuring
//! and peer, as the count pass on this machine did, and pass against baselines/ too. Only
//! those cells run in there: the others only inform. Extra arguments go to the count
//! pass (nextest filters) in place of the gating cells.
//!
//! The userland runs in a mount namespace of its own (unshare): /proc, /sys, /dev (with
//! /dev/shm), the checkout and the Rust toolchain are bound into it and vanish with it.
//! Nothing is built in there: the count pass finds this machine's counted build fresh,
//! and this task's own binary runs it.

use crate::repo::Repo;
use crate::say::say;
use crate::sh::{apt_install, exit_code, have, host_triple, is_root, output, run, succeeds, tail};
use crate::{reports, zig};
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SUITE: &str = "trixie";
/// What the userland needs to run the count pass: the pinned QEMU's libraries (glib),
/// `ip` for the second host's cells, python3 for the Python peer (minbase has the shell
/// tools).
const PACKAGES: &str = "libglib2.0-0t64,iproute2,python3";
const MIRROR: &str = "http://deb.debian.org/debian";
const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// In the namespace: the userland's root a mount point of its own (`ip netns` makes / a
/// slave mount, which a plain folder cannot be), the machine's /proc, /sys and /dev, the
/// folders given, then the command, chrooted, from the checkout.
const IN_NAMESPACE: &str = r#"
userland="$1" root="$2"; shift 2
mount --bind "$userland" "$userland"
for dir in /proc /sys /dev; do mount --rbind "$dir" "$userland$dir"; done
binds=()
while [ "$1" != -- ]; do binds+=("$1"); shift; done
shift
for path in "${binds[@]}"; do
  if [ -d "$path" ]; then
    mkdir -p "$userland$path"
  elif [ -f "$path" ]; then
    mkdir -p "$(dirname "$userland$path")" && touch "$userland$path"
  else
    continue
  fi
  mount --rbind "$path" "$userland$path"
done
exec chroot "$userland" /bin/sh -c 'cd "$0" && exec "$@"' "$root" "$@"
"#;

/// Commands as root: themselves, or through sudo.
struct Root {
    sudo: bool,
}

impl Root {
    fn command(&self, program: &str) -> Command {
        if self.sudo {
            let mut c = Command::new("sudo");
            c.arg(program);
            c
        } else {
            Command::new(program)
        }
    }
}

/// The userland's folder, made once (again when its packages change).
fn prepare(repo: &Repo, root: &Root) -> Result<PathBuf> {
    let userland = repo.target_dir.join("userland").join(SUITE);
    let made = userland.join(".made");
    if std::fs::read_to_string(&made).is_ok_and(|m| m.trim_end() == PACKAGES) {
        return Ok(userland);
    }
    if !have("debootstrap") {
        apt_install(&["debootstrap".into()])
            .context("debootstrap is missing and could not be installed")?;
    }
    if !Path::new(KEYRING).is_file() {
        let _ = apt_install(&["debian-archive-keyring".into()]);
    }
    say(&format!(
        "debootstrap {SUITE} into {} (once)",
        userland.display()
    ));
    run(root.command("rm").arg("-rf").arg(&userland))?;
    let log = repo
        .target_dir
        .join("userland")
        .join(format!("{SUITE}.log"));
    std::fs::create_dir_all(repo.target_dir.join("userland"))
        .with_context(|| log.display().to_string())?;
    let log_file = std::fs::File::create(&log).with_context(|| log.display().to_string())?;
    let mut debootstrap = root.command("debootstrap");
    debootstrap.arg("--variant=minbase");
    if Path::new(KEYRING).is_file() {
        debootstrap.args(["--keyring", KEYRING]);
    }
    debootstrap
        .arg(format!("--include={PACKAGES}"))
        .arg(SUITE)
        .arg(&userland)
        .arg(MIRROR)
        .stdout(log_file.try_clone()?)
        .stderr(log_file);
    if !debootstrap.status().is_ok_and(|s| s.success()) {
        eprintln!(
            "{}",
            tail(&std::fs::read_to_string(&log).unwrap_or_default(), 20)
        );
        bail!("debootstrap {SUITE} failed (log: {})", log.display());
    }
    let mut tee = root.command("tee");
    tee.arg(&made).stdin(Stdio::piped()).stdout(Stdio::null());
    let mut child = tee.spawn().context("tee")?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        stdin
            .write_all(format!("{PACKAGES}\n").as_bytes())
            .with_context(|| made.display().to_string())?;
    }
    child.wait().context("tee")?;
    Ok(userland)
}

/// The counted build's test binaries of the matrix, with the times they were written:
/// the count pass in there must find them fresh and write none.
fn built(repo: &Repo, counted: &str) -> Vec<(String, u64)> {
    let deps = repo.target_dir.join(counted).join("debug/deps");
    let mut found: Vec<(String, u64)> = std::fs::read_dir(deps)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("matrix-"))
        .map(|e| {
            let time = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            (e.file_name().to_string_lossy().into_owned(), time)
        })
        .collect();
    found.sort();
    found
}

/// Whether zig's variable `name` is part of the counted build's settings that the pass in
/// there must have as out here (so that cargo finds the build fresh).
fn counted_setting(name: &str) -> bool {
    let musl =
        name.ends_with("musl") || name.ends_with("MUSL_LINKER") || name.ends_with("MUSL_RUSTFLAGS");
    let per_target = [
        "AR_",
        "BINDGEN_EXTRA_CLANG_ARGS_",
        "CC_",
        "CMAKE_TOOLCHAIN_FILE_",
        "CXX_",
        "RANLIB_",
        "CFLAGS_",
        "CXXFLAGS_",
        "CARGO_TARGET_",
    ];
    name.starts_with("CARGO_ZIGBUILD_")
        || name == "IPC_MATRIX_ZIG"
        || (musl && per_target.iter().any(|p| name.starts_with(p)))
}

pub fn env_path(name: &str, default: impl FnOnce() -> PathBuf) -> PathBuf {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(default)
}

/// Runs the task; the first failure's exit status (every check runs).
pub fn second_userland(repo: &Repo, args: &[String]) -> Result<u8> {
    let root = if is_root() {
        Root { sudo: false }
    } else {
        if std::env::var("IPC_MATRIX_SKIP_SECOND_USERLAND").as_deref() == Ok("1") {
            say("skipped: the second userland (IPC_MATRIX_SKIP_SECOND_USERLAND=1)");
            return Ok(0);
        }
        if !succeeds(Command::new("sudo").args(["-n", "true"])) {
            bail!("the second userland needs root (debootstrap, mounts, chroot): run as root or with passwordless sudo, or set IPC_MATRIX_SKIP_SECOND_USERLAND=1 to leave this proof out, knowingly");
        }
        Root { sudo: true }
    };
    let (prepare_only, args) = match args.split_first() {
        Some((first, rest)) if first == "--prepare" => (true, rest),
        _ => (false, args),
    };
    let host = host_triple()?;
    let (triple, nextest) = match args.split_first() {
        Some((triple, rest)) => (triple.clone(), rest.to_vec()),
        None => (host, Vec::new()),
    };
    let counted = ipc_matrix_spec::counted_target(&triple)
        .with_context(|| format!("second userland: {triple} has no counted build"))?;
    let leg = format!("{counted}@qemu");
    let profile = reports::suite_profile();
    let results = repo.target_dir.join("ipc-matrix");
    let here = results.join(&leg).join(&profile);
    if !prepare_only && !here.join("cells").is_dir() {
        bail!(
            "second userland: no count pass results at {} (run scripts/count-pass.sh {triple} first)",
            here.display()
        );
    }
    let userland = prepare(repo, &root)?;
    if prepare_only {
        return Ok(0);
    }
    let os = std::fs::read_to_string(userland.join("etc/os-release")).unwrap_or_default();
    let name = os
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .unwrap_or("?")
        .trim_matches('"');
    let libc = output(
        root.command("chroot")
            .arg(&userland)
            .args(["ldd", "--version"]),
    )
    .ok()
    .and_then(|v| v.lines().next().map(str::to_owned))
    .unwrap_or_default();
    say(&format!("second userland: {name}, {libc}"));

    // The count pass's environment as this machine has it, so that cargo in there finds
    // the counted build fresh: the zig wrappers' settings (never run: nothing compiles)
    // and the toolchain's folders.
    let zig_env = zig::env(repo, &[counted.to_owned()])?;
    let report_args =
        |results: &Path, extra: &[&str]| reports::leg_report_args(results, &leg, &profile, extra);
    let nextest = if nextest.is_empty() {
        let mut gating = reports::cli(
            repo,
            reports::suite_target().as_deref(),
            &report_args(&results, &["--gating-cells"]),
        )?;
        let ids = output(&mut gating).with_context(|| {
            format!("second userland: could not tell which cells of {leg} gate")
        })?;
        let ids: Vec<&str> = ids.lines().filter(|l| !l.is_empty()).collect();
        if ids.is_empty() {
            say(&format!(
                "second userland: no cell of {leg} gates (no baseline of it?): nothing to count again"
            ));
            return Ok(0);
        }
        say(&format!(
            "second userland: the {} cells of {leg} whose counts gate",
            ids.len()
        ));
        let filter: Vec<String> = ids.iter().map(|id| format!("test(={id})")).collect();
        vec!["-E".to_owned(), filter.join(" | ")]
    } else {
        nextest
    };

    let home = env_path("HOME", || PathBuf::from("/root"));
    let cargo_home = env_path("CARGO_HOME", || home.join(".cargo"));
    let rustup_home = env_path("RUSTUP_HOME", || home.join(".rustup"));
    let there = results.join("second-userland");
    // Written by root of the namespace: removed as root, and a failure to remove them fails
    // here (stale results must never be judged as this run's).
    run(root.command("rm").arg("-rf").arg(there.join(&leg)))?;
    std::fs::create_dir_all(&there).with_context(|| there.display().to_string())?;
    // cargo-nextest, wherever it was installed (cargo's bin folder, or /usr/local/bin).
    let nextest_bin = output(Command::new("sh").args(["-c", "command -v cargo-nextest"]))
        .map_err(|_| anyhow!("cargo-nextest is not in PATH"))?;
    let nextest_dir = Path::new(&nextest_bin)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut binds = vec![
        repo.root.clone(),
        cargo_home.clone(),
        rustup_home.clone(),
        home.join(".cache/cargo-zigbuild"),
        PathBuf::from(&nextest_bin),
    ];
    if repo.target_dir != repo.root.join("target") {
        binds.push(repo.target_dir.clone());
    }
    say(&format!(
        "count pass of {triple} in the second userland (results: {})",
        there.join(&leg).display()
    ));
    let before = built(repo, counted);
    let mut pass: Vec<(String, String)> = vec![
        ("HOME".into(), home.to_string_lossy().into_owned()),
        (
            "PATH".into(),
            format!(
                "{}/bin:{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                cargo_home.display(),
                nextest_dir.display()
            ),
        ),
        ("TERM".into(), "dumb".into()),
        (
            "CARGO_HOME".into(),
            cargo_home.to_string_lossy().into_owned(),
        ),
        (
            "RUSTUP_HOME".into(),
            rustup_home.to_string_lossy().into_owned(),
        ),
        (
            "IPC_MATRIX_OUT".into(),
            there.to_string_lossy().into_owned(),
        ),
        ("IPC_MATRIX_PROFILE".into(), profile.clone()),
        ("IPC_MATRIX_COUNT_PASS_PREPARED".into(), "1".into()),
    ];
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        if !dir.is_empty() {
            pass.push(("CARGO_TARGET_DIR".into(), dir));
        }
    }
    // What the counted build out here compiled with (its compilers, its linker, the flags
    // that keep paths out of it), so that the build in there finds nothing to do.
    pass.extend(
        zig_env
            .into_iter()
            .filter(|(name, _)| counted_setting(name)),
    );
    let xtask = std::env::current_exe().context("this task's binary")?;
    let mut namespace = root.command("env");
    namespace
        .arg("-i")
        .args(pass.iter().map(|(k, v)| format!("{k}={v}")))
        .args(["unshare", "--mount", "--propagation", "private"])
        .args([
            "bash",
            "-euo",
            "pipefail",
            "-c",
            IN_NAMESPACE,
            "second-userland",
        ])
        .arg(&userland)
        .arg(&repo.root)
        .args(&binds)
        .arg("--")
        .arg(&xtask)
        .args(["count-pass", &triple])
        .args(&nextest);
    let mut first = exit_code(
        namespace
            .status()
            .context("the second userland's namespace")?,
    );
    if built(repo, counted) != before {
        say("the count pass in the second userland built the counted binary again: the environment given to it differs from the one its build out here had");
        first = first.max(1);
    }
    // The results in there were written by root of the namespace: the report reads them
    // here. Judged against the committed baselines; then this machine's run, cell by cell,
    // against them: a cell that gates here and was not counted there fails too.
    let report = |extra: &[&str], results: &Path| -> Result<u8> {
        let args = report_args(results, extra);
        reports::ipc_matrix(repo, reports::suite_target().as_deref(), &args)
    };
    for outcome in [
        report(&["--strict-instructions"], &there),
        report(
            &[
                "--same-counts-as",
                &there.join(&leg).join(&profile).to_string_lossy(),
            ],
            &results,
        ),
    ] {
        let code = outcome.unwrap_or_else(|e| {
            eprintln!("error: {e:#}");
            1
        });
        if first == 0 {
            first = code;
        }
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_counted_builds_settings_go_in() {
        for kept in [
            "CC_x86_64_unknown_linux_musl",
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER",
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS",
            "CFLAGS_aarch64_unknown_linux_musl",
            "CARGO_ZIGBUILD_ZIG_COMMAND",
            "IPC_MATRIX_ZIG",
        ] {
            assert!(super::counted_setting(kept), "{kept}");
        }
        for left in [
            "CC_x86_64_unknown_linux_gnu",
            "PATH",
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUNNER",
        ] {
            assert!(!super::counted_setting(left), "{left}");
        }
    }
}
