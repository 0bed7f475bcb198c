//! The local stand-ins of the remote actions (xtask/stand-ins/stand_in.py) hold to what
//! the workflows rely on, as each action documents it: a stand-in that lies fails here,
//! not in a workflow run that happens to pass.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A workspace, a home folder and a store of their own, removed at the end.
struct Sandbox {
    root: PathBuf,
    run: String,
}

/// What one stand-in command did: its status, what it printed, the outputs it set.
struct Done {
    ok: bool,
    printed: String,
    outputs: BTreeMap<String, String>,
}

impl Sandbox {
    fn new(name: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!(
            "ipc-matrix-stand-ins-{}-{}-{name}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["workspace", "home", "store"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        Self {
            root,
            run: "run-1".into(),
        }
    }

    fn workspace(&self) -> PathBuf {
        self.root.join("workspace")
    }

    /// Writes `text` at `path` in the workspace.
    fn file(&self, path: &str, text: &str) {
        let file = self.workspace().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    /// Runs `command` of the stand-ins with `inputs` (as the composite actions pass them),
    /// in `workspace`.
    fn stand_in(&self, command: &str, workspace: &Path, inputs: &[(&str, &str)]) -> Done {
        let outputs_file = self.root.join("outputs");
        let _ = std::fs::remove_file(&outputs_file);
        let mut c = Command::new("python3");
        c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("stand-ins/stand_in.py"))
            .arg(command)
            .current_dir(workspace)
            .env("GITHUB_WORKSPACE", workspace)
            .env("GITHUB_OUTPUT", &outputs_file)
            .env("HOME", self.root.join("home"))
            .env("IPC_MATRIX_ACT_STORE", self.root.join("store"))
            .env("IPC_MATRIX_ACT_RUN", &self.run);
        for (name, value) in inputs {
            c.env(
                format!("STAND_IN_{}", name.to_uppercase().replace('-', "_")),
                value,
            );
        }
        let out = c.output().expect("python3 runs");
        let outputs = std::fs::read_to_string(&outputs_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Done {
            ok: out.status.success(),
            printed: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            outputs,
        }
    }

    fn upload(&self, inputs: &[(&str, &str)]) -> Done {
        self.stand_in("upload", &self.workspace(), inputs)
    }

    /// The files of artifact `name` of this run, relative to its root.
    fn artifact(&self, name: &str) -> Vec<String> {
        files(&self.root.join("store/artifacts").join(&self.run).join(name))
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Every file under `dir`, relative to it, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, base, out);
            } else {
                out.push(
                    path.strip_prefix(base)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The paths our workflow's leg job uploads, for a native leg and its count leg.
const LEG_UPLOAD: &str = "target/nextest/ci/junit.xml
target/nextest/count-*/junit.xml
target/ipc-matrix/x86_64-unknown-linux-gnu@native/
target/ipc-matrix/x86_64-unknown-linux-musl@qemu/
";

fn leg_results(sb: &Sandbox) {
    sb.file("target/nextest/ci/junit.xml", "<testsuites/>");
    sb.file("target/nextest/count-x86_64/junit.xml", "<testsuites/>");
    sb.file("target/nextest/other/junit.xml", "not uploaded");
    sb.file(
        "target/ipc-matrix/x86_64-unknown-linux-gnu@native/quick/results.json",
        "{}",
    );
    sb.file(
        "target/ipc-matrix/x86_64-unknown-linux-musl@qemu/quick/cells/echo.json",
        "{}",
    );
    sb.file(
        "target/ipc-matrix/aarch64-unknown-linux-gnu@qemu/quick/results.json",
        "{}",
    );
}

#[test]
fn an_artifact_is_rooted_at_the_least_common_ancestor_of_its_search_paths() {
    let sb = Sandbox::new("lca");
    leg_results(&sb);
    let done = sb.upload(&[("name", "results-leg"), ("path", LEG_UPLOAD)]);
    assert!(done.ok, "{}", done.printed);
    // target/nextest and target/ipc-matrix/...: their common ancestor is target/.
    assert_eq!(
        sb.artifact("results-leg"),
        [
            "ipc-matrix/x86_64-unknown-linux-gnu@native/quick/results.json",
            "ipc-matrix/x86_64-unknown-linux-musl@qemu/quick/cells/echo.json",
            "nextest/ci/junit.xml",
            "nextest/count-x86_64/junit.xml",
        ]
    );
}

#[test]
fn one_folder_is_the_root_of_its_artifact_and_one_file_is_uploaded_by_its_name() {
    let sb = Sandbox::new("one-path");
    sb.file("side-by-side/comparison.md", "# legs");
    sb.file("side-by-side/gate.md", "ok");
    let done = sb.upload(&[("name", "side-by-side"), ("path", "side-by-side/")]);
    assert!(done.ok, "{}", done.printed);
    assert_eq!(sb.artifact("side-by-side"), ["comparison.md", "gate.md"]);
    let done = sb.upload(&[("name", "one"), ("path", "side-by-side/gate.md")]);
    assert!(done.ok, "{}", done.printed);
    assert_eq!(sb.artifact("one"), ["gate.md"]);
}

#[test]
fn nothing_found_warns_fails_or_stays_silent_as_if_no_files_found_asks() {
    let sb = Sandbox::new("none-found");
    let warn = sb.upload(&[("name", "a"), ("path", "target/missing/")]);
    assert!(warn.ok && warn.printed.contains("::warning::No files were found"));
    let error = sb.upload(&[
        ("name", "b"),
        ("path", "target/missing/"),
        ("if-no-files-found", "error"),
    ]);
    assert!(!error.ok && error.printed.contains("::error::No files were found"));
    let ignore = sb.upload(&[
        ("name", "c"),
        ("path", "target/missing/"),
        ("if-no-files-found", "ignore"),
    ]);
    assert!(ignore.ok && !ignore.printed.contains("::warning::"));
    for name in ["a", "b", "c"] {
        assert!(sb.artifact(name).is_empty(), "{name} was stored");
    }
}

#[test]
fn hidden_files_stay_out_unless_asked_for() {
    let sb = Sandbox::new("hidden");
    sb.file("out/seen.txt", "1");
    sb.file("out/.hidden", "2");
    sb.file("out/.folder/inside.txt", "3");
    assert!(sb.upload(&[("name", "plain"), ("path", "out/")]).ok);
    assert_eq!(sb.artifact("plain"), ["seen.txt"]);
    assert!(
        sb.upload(&[
            ("name", "all"),
            ("path", "out/"),
            ("include-hidden-files", "true")
        ])
        .ok
    );
    assert_eq!(
        sb.artifact("all"),
        [".folder/inside.txt", ".hidden", "seen.txt"]
    );
}

#[test]
fn excluded_patterns_and_globs_choose_the_files() {
    let sb = Sandbox::new("globs");
    leg_results(&sb);
    let done = sb.upload(&[
        ("name", "juni"),
        ("path", "target/nextest/**/junit.xml\n!target/nextest/ci/"),
    ]);
    assert!(done.ok, "{}", done.printed);
    assert_eq!(
        sb.artifact("juni"),
        ["count-x86_64/junit.xml", "other/junit.xml"]
    );
}

#[test]
fn a_name_used_twice_in_a_run_is_refused_unless_overwrite() {
    let sb = Sandbox::new("twice");
    sb.file("a/one.txt", "1");
    sb.file("b/two.txt", "2");
    assert!(sb.upload(&[("name", "x"), ("path", "a/")]).ok);
    let again = sb.upload(&[("name", "x"), ("path", "b/")]);
    assert!(!again.ok && again.printed.contains("(409) Conflict"));
    assert_eq!(sb.artifact("x"), ["one.txt"]);
    assert!(
        sb.upload(&[("name", "x"), ("path", "b/"), ("overwrite", "true")])
            .ok
    );
    assert_eq!(sb.artifact("x"), ["two.txt"]);
    let bad = sb.upload(&[("name", "a/b"), ("path", "a/")]);
    assert!(!bad.ok && bad.printed.contains("not valid"));
}

#[test]
fn downloads_by_pattern_get_one_folder_per_artifact_unless_one_matched() {
    let sb = Sandbox::new("download");
    leg_results(&sb);
    assert!(sb.upload(&[("name", "results-a"), ("path", LEG_UPLOAD)]).ok);
    sb.file("side/gate.md", "ok");
    assert!(sb.upload(&[("name", "results-b"), ("path", "side/")]).ok);
    assert!(sb.upload(&[("name", "other"), ("path", "side/")]).ok);
    let ws = sb.workspace();
    let done = sb.stand_in(
        "download",
        &ws,
        &[("pattern", "results-*"), ("path", "legs")],
    );
    assert!(done.ok, "{}", done.printed);
    let got = files(&ws.join("legs"));
    assert!(
        got.contains(&"results-a/nextest/ci/junit.xml".to_owned()),
        "{got:?}"
    );
    assert!(got.contains(&"results-b/gate.md".to_owned()), "{got:?}");
    assert!(!got.iter().any(|f| f.starts_with("other")), "{got:?}");
    // One artifact matched: straight into the path, as download-artifact does.
    let one = sb.stand_in(
        "download",
        &ws,
        &[("pattern", "results-b"), ("path", "one")],
    );
    assert!(one.ok, "{}", one.printed);
    assert_eq!(files(&ws.join("one")), ["gate.md"]);
    // By name: into the path; a name no artifact has fails.
    let named = sb.stand_in("download", &ws, &[("name", "other"), ("path", "named")]);
    assert!(named.ok, "{}", named.printed);
    assert_eq!(files(&ws.join("named")), ["gate.md"]);
    let missing = sb.stand_in("download", &ws, &[("name", "nope"), ("path", "x")]);
    assert!(!missing.ok && missing.printed.contains("Artifact 'nope' not found"));
    // Another run's artifacts are not this run's.
    let other_run = Sandbox {
        root: sb.root.clone(),
        run: "run-2".into(),
    };
    let none = other_run.stand_in(
        "download",
        &ws,
        &[("pattern", "results-*"), ("path", "empty")],
    );
    std::mem::forget(other_run);
    assert!(none.ok && files(&ws.join("empty")).is_empty());
}

/// Saves `paths` under `key` from `workspace`.
fn save(sb: &Sandbox, workspace: &Path, key: &str, paths: &str) -> Done {
    sb.stand_in("cache-save", workspace, &[("key", key), ("path", paths)])
}

fn restore(sb: &Sandbox, workspace: &Path, key: &str, restore_keys: &str, paths: &str) -> Done {
    sb.stand_in(
        "cache-restore",
        workspace,
        &[
            ("key", key),
            ("restore-keys", restore_keys),
            ("path", paths),
        ],
    )
}

#[test]
fn a_cache_hits_on_its_exact_key_and_restores_into_another_checkout() {
    let sb = Sandbox::new("cache-exact");
    sb.file("target/debug/lib.rlib", "built");
    let paths = "target/debug\n~/.cargo-ish";
    std::fs::create_dir_all(sb.root.join("home/.cargo-ish")).unwrap();
    std::fs::write(sb.root.join("home/.cargo-ish/index"), "registry").unwrap();
    let saved = save(&sb, &sb.workspace(), "leg-rustc-1-lock-a", paths);
    assert!(saved.ok, "{}", saved.printed);
    std::fs::remove_dir_all(sb.root.join("home/.cargo-ish")).unwrap();
    let other = sb.root.join("other-checkout");
    std::fs::create_dir_all(&other).unwrap();
    let done = restore(&sb, &other, "leg-rustc-1-lock-a", "leg-rustc-1-", paths);
    assert!(done.ok, "{}", done.printed);
    assert_eq!(done.outputs["cache-hit"], "true");
    assert_eq!(done.outputs["cache-primary-key"], "leg-rustc-1-lock-a");
    assert_eq!(
        std::fs::read_to_string(other.join("target/debug/lib.rlib")).unwrap(),
        "built"
    );
    assert_eq!(
        std::fs::read_to_string(sb.root.join("home/.cargo-ish/index")).unwrap(),
        "registry"
    );
}

#[test]
fn restore_keys_are_prefixes_and_the_most_recent_entry_wins() {
    let sb = Sandbox::new("cache-prefix");
    let ws = sb.workspace();
    sb.file("build/x", "old");
    assert!(save(&sb, &ws, "leg-rustc-1-lock-a", "build").ok);
    sb.file("build/x", "new");
    assert!(save(&sb, &ws, "leg-rustc-1-lock-b", "build").ok);
    sb.file("build/x", "other compiler");
    assert!(save(&sb, &ws, "leg-rustc-2-lock-c", "build").ok);
    std::fs::remove_dir_all(ws.join("build")).unwrap();
    let done = restore(&sb, &ws, "leg-rustc-1-lock-z", "leg-rustc-1-", "build");
    assert!(done.ok, "{}", done.printed);
    assert_eq!(done.outputs["cache-hit"], "false");
    assert_eq!(done.outputs["cache-matched-key"], "leg-rustc-1-lock-b");
    assert_eq!(std::fs::read_to_string(ws.join("build/x")).unwrap(), "new");
}

#[test]
fn a_miss_restores_nothing_and_sets_no_hit_and_another_path_list_misses() {
    let sb = Sandbox::new("cache-miss");
    let ws = sb.workspace();
    sb.file("build/x", "1");
    assert!(save(&sb, &ws, "k-1", "build").ok);
    std::fs::remove_dir_all(ws.join("build")).unwrap();
    let miss = restore(&sb, &ws, "other-1", "other-", "build");
    assert!(miss.ok, "{}", miss.printed);
    assert!(
        !miss.outputs.contains_key("cache-hit"),
        "{:?}",
        miss.outputs
    );
    assert_eq!(miss.outputs["cache-primary-key"], "other-1");
    // The same key with another list of paths is another cache (its version differs).
    let other_paths = restore(&sb, &ws, "k-1", "", "build\nmore");
    assert!(!other_paths.outputs.contains_key("cache-hit"));
    assert!(!ws.join("build").exists());
    let fail = sb.stand_in(
        "cache-restore",
        &ws,
        &[
            ("key", "none"),
            ("path", "build"),
            ("fail-on-cache-miss", "true"),
        ],
    );
    assert!(!fail.ok);
}

#[test]
fn a_cache_entry_is_immutable_and_a_save_of_nothing_only_warns() {
    let sb = Sandbox::new("cache-immutable");
    let ws = sb.workspace();
    sb.file("build/x", "first");
    assert!(save(&sb, &ws, "k", "build").ok);
    sb.file("build/x", "second");
    let again = save(&sb, &ws, "k", "build");
    assert!(again.ok && again.printed.contains("Unable to reserve cache with key k"));
    std::fs::remove_dir_all(ws.join("build")).unwrap();
    assert!(restore(&sb, &ws, "k", "", "build").ok);
    assert_eq!(
        std::fs::read_to_string(ws.join("build/x")).unwrap(),
        "first"
    );
    let nothing = save(&sb, &ws, "k2", "absent/");
    assert!(nothing.ok && nothing.printed.contains("::warning::Path Validation Error"));
    let comma = save(&sb, &ws, "a,b", "build");
    assert!(!comma.ok && comma.printed.contains("cannot contain commas"));
}

#[test]
fn install_checks_the_tool_is_there_at_the_asked_version() {
    let sb = Sandbox::new("install");
    let ws = sb.workspace();
    let version = Command::new("python3").arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&version.stdout);
    let number = version.split_whitespace().nth(1).unwrap().to_owned();
    let there = sb.stand_in("install", &ws, &[("tool", &format!("python3@{number}"))]);
    assert!(there.ok, "{}", there.printed);
    let wrong = sb.stand_in("install", &ws, &[("tool", "python3@0.0.1")]);
    assert!(
        !wrong.ok && wrong.printed.contains("not 0.0.1"),
        "{}",
        wrong.printed
    );
    let absent = sb.stand_in("install", &ws, &[("tool", "no-such-tool-here@1.0.0")]);
    assert!(!absent.ok && absent.printed.contains("installs nothing"));
}
