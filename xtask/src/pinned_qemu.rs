//! The emulator that counts, pinned: QEMU user mode with plugin support, built from one
//! source package (Debian 12's 1:7.2+dfsg-7+deb12u18, QEMU 7.2.22; each file checked
//! against its SHA-256) for the architectures whose cells are counted. Distributions ship
//! other releases (Ubuntu 24.04: 8.2, which gives guests a vDSO, so clock reads run guest
//! code) or builds that cannot load plugins at all (Debian 13, Ubuntu 26.04), so a count
//! made with the host's QEMU would depend on the host. Built once into
//! `<target dir>/pinned/qemu-<release>/` (about 4 minutes on 2 cores).
//! `IPC_MATRIX_QEMU_SOURCE=DIR` takes the three source files from DIR instead of Debian's
//! archive (a mirror, or a cache of CI's).

use crate::repo::Repo;
use crate::say::say;
use crate::sh::{apt_install, missing_packages, output, run, succeeds};
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub const RELEASE: &str = "7.2.22";
const PACKAGE: &str = "7.2+dfsg-7+deb12u18";
const TARGETS: &str = "x86_64-linux-user,aarch64-linux-user";
const BINARIES: [&str; 2] = ["qemu-x86_64", "qemu-aarch64"];
const POOL: &str = "http://deb.debian.org/debian/pool/main/q/qemu";

/// The architectures it is built for (QEMU's and `uname -m`'s names).
pub const COVERS: [&str; 2] = ["x86_64", "aarch64"];

/// Where its binaries are, once built.
pub fn bin_dir(repo: &Repo) -> PathBuf {
    repo.target_dir.join(format!("pinned/qemu-{RELEASE}/bin"))
}

/// The source files and their SHA-256.
fn sources() -> [(String, &'static str); 3] {
    [
        (
            format!("qemu_{PACKAGE}.dsc"),
            "6b6bd27b947ec89e40a1d6b26d9c9f3c698ca691da13163e0483f6061bbb20b3",
        ),
        (
            "qemu_7.2+dfsg.orig.tar.xz".into(),
            "91aca71520040edc40b8d437aa3004dae614f58e286cf653ee8996c07af2962f",
        ),
        (
            format!("qemu_{PACKAGE}.debian.tar.xz"),
            "28a1c86310ee53b6bf1854cffe6f6be6ed29a08db7d05759f8ac57b8d6a6cb2f",
        ),
    ]
}

/// What the build is made of: a change to any of it builds again.
fn identity() -> String {
    format!("{PACKAGE} {TARGETS} plugins")
}

/// The pinned QEMU's folder of binaries, built first if it is not there (or was built
/// from something else).
pub fn ensure(repo: &Repo) -> Result<PathBuf> {
    let bin = bin_dir(repo);
    let root = bin.parent().map(Path::to_path_buf).unwrap_or_default();
    let stamp = root.join("built-from");
    let built = std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == identity())
        && BINARIES.iter().all(|b| bin.join(b).is_file());
    if built {
        return Ok(bin);
    }
    let mut missing = missing_packages(&[
        ("curl", "curl"),
        ("dpkg-source", "dpkg-dev"),
        ("gcc", "gcc"),
        ("make", "make"),
        ("ninja", "ninja-build"),
        ("meson", "meson"),
        ("pkg-config", "pkg-config"),
        ("flex", "flex"),
        ("bison", "bison"),
        ("python3", "python3"),
        ("xz", "xz-utils"),
    ]);
    if !succeeds(Command::new("pkg-config").args(["--exists", "glib-2.0"])) {
        missing.push("libglib2.0-dev".into());
    }
    if !missing.is_empty() {
        apt_install(&missing)
            .with_context(|| format!("building the pinned QEMU needs {}", missing.join(" ")))?;
    }
    let work = root.with_file_name(format!("qemu-{RELEASE}.build"));
    let _ = std::fs::remove_dir_all(&work);
    let _ = std::fs::remove_dir_all(&root);
    let src = work.join("src");
    std::fs::create_dir_all(&src).with_context(|| src.display().to_string())?;
    for (file, sum) in sources() {
        let to = src.join(&file);
        match std::env::var_os("IPC_MATRIX_QEMU_SOURCE") {
            Some(dir) => {
                std::fs::copy(Path::new(&dir).join(&file), &to).with_context(|| {
                    format!(
                        "IPC_MATRIX_QEMU_SOURCE={} has no {file}",
                        dir.to_string_lossy()
                    )
                })?;
            }
            None => {
                let url = format!("{POOL}/{}", file.replace('+', "%2b"));
                say(&format!("fetching {url}"));
                run(Command::new("curl")
                    .args(["--fail", "--silent", "--show-error", "--location", "--retry", "3", "-o"])
                    .arg(&to)
                    .arg(&url))
                .with_context(|| {
                    format!("could not fetch {url} (set IPC_MATRIX_QEMU_SOURCE to a folder holding {file})")
                })?;
            }
        }
        let got = output(Command::new("sha256sum").arg(&to))?;
        if got.split_whitespace().next() != Some(sum) {
            bail!("{file} does not have the pinned SHA-256 {sum}");
        }
    }
    say(&format!(
        "building QEMU {RELEASE} ({PACKAGE}) user mode with plugins: {TARGETS}"
    ));
    let tree = work.join("qemu");
    run(Command::new("dpkg-source")
        .args(["--no-check", "-x"])
        .arg(src.join(format!("qemu_{PACKAGE}.dsc")))
        .arg(&tree)
        .stdout(Stdio::null()))?;
    let build = work.join("build");
    std::fs::create_dir_all(&build).with_context(|| build.display().to_string())?;
    let logged = |mut command: Command, log: &str| -> Result<()> {
        let log = work.join(log);
        let file = std::fs::File::create(&log).with_context(|| log.display().to_string())?;
        let err = file.try_clone()?;
        command.current_dir(&build).stdout(file).stderr(err);
        run(&mut command).map_err(|e| {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            anyhow!("{}\n{e:#} (logs in {})", tail.join("\n"), work.display())
        })
    };
    let mut configure = Command::new(tree.join("configure"));
    configure
        .arg(format!("--prefix={}", root.display()))
        .arg(format!("--target-list={TARGETS}"))
        .arg(format!(
            "--with-pkgversion=Debian 1:{PACKAGE}, built by ipc-matrix"
        ))
        .args([
            "--without-default-features",
            "--enable-plugins",
            "--disable-werror",
            "--disable-docs",
        ]);
    logged(configure, "configure.log")?;
    let mut ninja = Command::new("ninja");
    ninja.args(BINARIES);
    logged(ninja, "build.log")?;
    std::fs::create_dir_all(&bin).with_context(|| bin.display().to_string())?;
    for b in BINARIES {
        std::fs::copy(build.join(b), bin.join(b)).with_context(|| format!("copying {b}"))?;
    }
    let help = output(Command::new(bin.join("qemu-x86_64")).arg("-h"))?;
    if !help.lines().any(|l| l.starts_with("-plugin")) {
        bail!("the pinned QEMU was built without plugin support");
    }
    std::fs::write(&stamp, format!("{}\n", identity()))?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(bin)
}
