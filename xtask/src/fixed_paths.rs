//! Where the checkout, its target folder and cargo's home lie must not reach the counted
//! code: the paths compiled into it (the dependencies' panic locations, libzmq's
//! assertions) are written under fixed names, so that any checkout on any machine builds
//! the same bytes (a path's length moves every constant after it, and the counts with
//! their alignment).

use crate::say::say;
use std::path::{Component, Path, PathBuf};

/// The prefixes mapped, in the order the flags give them: cargo's home, the checkout,
/// and a target folder outside the checkout (prefixes that overlap are mapped in an
/// order the compilers do not agree on, so one inside is left to the checkout's).
pub fn prefixes(root: &Path, target_dir: &Path, cargo_home: &Path) -> Vec<(PathBuf, &'static str)> {
    let (root, target, home) = (resolved(root), resolved(target_dir), resolved(cargo_home));
    let mut prefixes = vec![(home, "/cargo-home"), (root.clone(), "/ipc-matrix")];
    if !target.starts_with(&root) {
        prefixes.push((target, "/ipc-matrix-target"));
    }
    prefixes
}

/// The variables that carry the mapping for each counted triple: rustc's
/// `--remap-path-prefix` in `CARGO_TARGET_<TRIPLE>_RUSTFLAGS`, the C and C++ compilers'
/// `-ffile-prefix-map` in `CFLAGS_<triple>` and `CXXFLAGS_<triple>`. A prefix that holds
/// white space cannot be written in those flags: it is left out, with a warning.
pub fn env(prefixes: &[(PathBuf, &'static str)], triples: &[String]) -> Vec<(String, String)> {
    let mut rust = Vec::new();
    let mut c = Vec::new();
    for (from, to) in prefixes {
        let from = from.to_string_lossy();
        if from.chars().any(char::is_whitespace) {
            say(&format!(
                "warning: {from} holds a space, so it stays in the counted build: counts made in this folder may differ from counts made elsewhere"
            ));
            continue;
        }
        rust.push(format!("--remap-path-prefix={from}={to}"));
        c.push(format!("-ffile-prefix-map={from}={to}"));
    }
    let (rust, c) = (rust.join(" "), c.join(" "));
    let mut vars = Vec::new();
    for triple in triples {
        let upper = triple.to_ascii_uppercase().replace('-', "_");
        vars.push((format!("CARGO_TARGET_{upper}_RUSTFLAGS"), rust.clone()));
        let lower = triple.replace('-', "_");
        vars.push((format!("CFLAGS_{lower}"), c.clone()));
        vars.push((format!("CXXFLAGS_{lower}"), c.clone()));
    }
    vars
}

/// `path` as the compilers see it, as `realpath -m` gives it: absolute, every symbolic
/// link of the part that exists resolved, `.` and `..` taken away; the rest need not
/// exist.
pub fn resolved(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::from("/");
    for part in absolute.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => {
                out.push(name);
                if let Ok(real) = std::fs::canonicalize(&out) {
                    out = real;
                }
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_as_realpath_m_resolves_them() {
        let dir = std::env::temp_dir().join(format!("xtask-fixed-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("real")).unwrap();
        let _ = std::fs::remove_file(dir.join("link"));
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        let dir = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(resolved(&dir.join("link/x/../y")), dir.join("real/y"));
        assert_eq!(resolved(&dir.join("missing/./z")), dir.join("missing/z"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_target_folder_inside_the_checkout_is_not_mapped_apart() {
        let (root, home) = (Path::new("/r/repo"), Path::new("/h/.cargo"));
        let inside = prefixes(root, Path::new("/r/repo/target"), home);
        assert_eq!(
            inside,
            [(home.into(), "/cargo-home"), (root.into(), "/ipc-matrix")]
        );
        let outside = prefixes(root, Path::new("/t/target"), home);
        assert_eq!(
            outside[2],
            (PathBuf::from("/t/target"), "/ipc-matrix-target")
        );
    }

    #[test]
    fn each_triple_gets_the_mapping_for_rust_c_and_cpp_and_spaces_stay_out() {
        let prefixes = vec![
            (PathBuf::from("/h/.cargo"), "/cargo-home"),
            (PathBuf::from("/my repo"), "/ipc-matrix"),
        ];
        let vars = env(&prefixes, &["x86_64-unknown-linux-musl".into()]);
        assert_eq!(
            vars,
            [
                (
                    "CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS".into(),
                    "--remap-path-prefix=/h/.cargo=/cargo-home".into()
                ),
                (
                    "CFLAGS_x86_64_unknown_linux_musl".into(),
                    "-ffile-prefix-map=/h/.cargo=/cargo-home".into()
                ),
                (
                    "CXXFLAGS_x86_64_unknown_linux_musl".into(),
                    "-ffile-prefix-map=/h/.cargo=/cargo-home".into()
                ),
            ]
        );
    }
}
