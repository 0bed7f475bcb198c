//! `ipc-matrix report` and `ipc-matrix baseline accept` on stored results with known
//! round-trip times: what is written, what is flagged, and the exit codes.

use ipc_matrix_results::{fixture, write_result, CellResult};
use std::path::PathBuf;
use std::process::{Command, Output};

const MATRIX: &str = r#"
version: 1
targets:
  - { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }
profiles:
  quick: { description: test }
  gate:
    description: a profile whose regressions fail the run
    regression: { min_change: 0.5, strict: true }
scenarios:
  - { name: echo, kind: echo, transports: [tcp, udp], payloads: [200B], iterations: 300, warmup: 0, timeout: 1s }
"#;
const LEG: &str = "x86_64-unknown-linux-gnu@native";

/// A scratch folder with the matrix file; removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("ipc-matrix-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("matrix.yaml"), MATRIX).unwrap();
        Self(dir)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    /// Stores results of `profile` with tcp and udp round trips around the given times.
    fn store(&self, results: &str, profile: &str, tcp_ns: u64, udp_ns: u64, phase: u64) {
        let env = fixture::environment("native", "Test CPU");
        for (cell, center) in fixture::cells(MATRIX, profile).iter().zip([tcp_ns, udp_ns]) {
            let samples = (0..300u64)
                .map(|i| center * (90 + (i * 7919 + phase * 104_729) % 21) / 100)
                .collect();
            let result: CellResult = fixture::passed(cell, &env, samples);
            write_result(&self.path(results), &result).unwrap();
        }
    }

    /// Runs the binary in the scratch folder (through QEMU when the suite runs emulated).
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let runner = std::env::var(ipc_matrix_scenario::PEER_RUNNER_ENV).unwrap_or_default();
        let mut words = runner.split_whitespace();
        let mut command = match words.next() {
            Some(first) => {
                let mut c = Command::new(first);
                c.args(words).arg(env!("CARGO_BIN_EXE_ipc-matrix"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_ipc-matrix")),
        };
        command
            .args(args)
            .current_dir(&self.0)
            .env_remove("GITHUB_ACTIONS")
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn accept_then_report_shows_every_cell_unchanged() {
    let s = Scratch::new("accept");
    s.store("results", "quick", 45_000, 40_000, 1);
    let args = ["--results", "results", "--baselines", "baselines"];

    let first = s.run(&[&["report"][..], &args].concat(), &[]);
    assert!(first.status.success(), "{}", text(&first));
    assert!(
        text(&first).contains("0 regressed, 0 improved, 0 unchanged, 2 new"),
        "{}",
        text(&first)
    );
    for file in ["report.md", "report.html", "results.json"] {
        assert!(
            s.path(&format!("results/{LEG}/quick/{file}")).is_file(),
            "{file}"
        );
    }

    let dry = s.run(
        &[&["baseline", "accept", "--dry-run"][..], &args].concat(),
        &[],
    );
    assert!(dry.status.success(), "{}", text(&dry));
    assert!(text(&dry).contains("dry run"));
    assert!(!s.path(&format!("baselines/{LEG}/quick.json")).exists());

    let accept = s.run(&[&["baseline", "accept"][..], &args].concat(), &[]);
    assert!(accept.status.success(), "{}", text(&accept));
    assert!(
        text(&accept).contains("no baseline yet"),
        "{}",
        text(&accept)
    );
    assert!(s.path(&format!("baselines/{LEG}/quick.json")).is_file());

    // A later run of unchanged code.
    s.store("results", "quick", 45_000, 40_000, 2);
    let again = s.run(&[&["report"][..], &args].concat(), &[]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        text(&again).contains("0 regressed, 0 improved, 2 unchanged, 0 new"),
        "{}",
        text(&again)
    );
    // ... and accepted as a second run of the same baseline.
    let append = s.run(
        &[&["baseline", "accept", "--append"][..], &args].concat(),
        &[],
    );
    assert!(append.status.success(), "{}", text(&append));
    assert!(
        text(&append).contains("up to 2 accepted run(s)"),
        "{}",
        text(&append)
    );
    let file = std::fs::read_to_string(s.path(&format!("baselines/{LEG}/quick.json"))).unwrap();
    let baseline: serde_json::Value = serde_json::from_str(&file).unwrap();
    assert_eq!(
        baseline["cells"]["echo::tcp::200B"]["runs"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn a_doubled_round_trip_warns_and_fails_when_strict() {
    let s = Scratch::new("strict");
    s.store("base", "quick", 45_000, 40_000, 1);
    s.store("base", "gate", 45_000, 40_000, 1);
    let base = ["--results", "base", "--baselines", "baselines"];
    for profile in ["quick", "gate"] {
        let accept = s.run(
            &[&["baseline", "accept", "--profile", profile][..], &base].concat(),
            &[],
        );
        assert!(accept.status.success(), "{}", text(&accept));
    }
    s.store("slow", "quick", 90_000, 40_000, 2);
    s.store("slow", "gate", 90_000, 40_000, 2);
    let slow = ["--results", "slow", "--baselines", "baselines"];

    let warned = s.run(
        &[&["report"][..], &slow].concat(),
        &[("GITHUB_ACTIONS", "true")],
    );
    let out = text(&warned);
    assert_eq!(warned.status.code(), Some(0), "{out}");
    assert!(
        out.contains("1 regressed, 0 improved, 1 unchanged"),
        "{out}"
    );
    assert!(
        out.contains(&format!("warning: {LEG}: echo::tcp::200B regressed")),
        "{out}"
    );
    assert!(
        out.contains("::warning title=ipc-matrix regression"),
        "{out}"
    );

    let strict = s.run(&[&["report", "--strict"][..], &slow].concat(), &[]);
    assert_eq!(strict.status.code(), Some(3), "{}", text(&strict));
    // The profile's own `strict: true` does the same without the flag.
    let gate = s.run(&[&["report", "--profile", "gate"][..], &slow].concat(), &[]);
    assert_eq!(gate.status.code(), Some(3), "{}", text(&gate));
    // The reports are written either way.
    let md = std::fs::read_to_string(s.path(&format!("slow/{LEG}/gate/report.md"))).unwrap();
    assert!(md.contains("`echo::tcp::200B` | pass | "), "{md}");
    assert!(md.contains("**regressed**"), "{md}");
}

#[test]
fn compare_puts_folders_side_by_side() {
    let s = Scratch::new("compare");
    s.store("a", "quick", 45_000, 40_000, 1);
    s.store("b", "quick", 90_000, 40_000, 2);
    let a = format!("a/{LEG}/quick");
    let b = format!("b/{LEG}/quick");
    let out = s.run(&["report", "--compare", &a, &b, "--out", "cmp"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let md = std::fs::read_to_string(s.path("cmp/comparison.md")).unwrap();
    assert!(
        md.contains("| `echo::tcp::200B` | 45.0us | 90.0us | 2.00x |"),
        "{md}"
    );
    assert!(s.path("cmp/comparison.html").is_file());
}

#[test]
fn bad_input_is_refused_clearly() {
    let s = Scratch::new("bad");
    let one = s.run(&["report", "--compare", "only-one"], &[]);
    assert_eq!(one.status.code(), Some(2), "{}", text(&one));

    let none = s.run(&["report", "--results", "nowhere"], &[]);
    assert_eq!(none.status.code(), Some(2), "{}", text(&none));
    assert!(text(&none).contains("no results folder"), "{}", text(&none));

    std::fs::create_dir_all(s.path("empty")).unwrap();
    let empty = s.run(&["report", "--results", "empty"], &[]);
    assert_eq!(empty.status.code(), Some(4), "{}", text(&empty));

    let profile = s.run(&["report", "--profile", "nope"], &[]);
    assert_eq!(profile.status.code(), Some(2), "{}", text(&profile));
    assert!(
        text(&profile).contains("no profile is named `nope`"),
        "{}",
        text(&profile)
    );

    // A damaged baseline is named, and the results are left alone.
    s.store("results", "quick", 45_000, 40_000, 1);
    let baseline = s.path(&format!("baselines/{LEG}/quick.json"));
    std::fs::create_dir_all(baseline.parent().unwrap()).unwrap();
    std::fs::write(&baseline, "{").unwrap();
    let damaged = s.run(
        &["report", "--results", "results", "--baselines", "baselines"],
        &[],
    );
    assert_eq!(damaged.status.code(), Some(2), "{}", text(&damaged));
    assert!(
        text(&damaged).contains("not a baseline file"),
        "{}",
        text(&damaged)
    );
    assert!(s
        .path(&format!("results/{LEG}/quick/cells/echo.tcp.200B.json"))
        .is_file());
}

/// Stores a passing result of `cell_index` (0: tcp, 1: udp) as part of run `run_id`.
fn store_in_run(s: &Scratch, cell_index: usize, run_id: &str, finished_at: u64) -> PathBuf {
    let env = fixture::environment("native", "Test CPU");
    let cell = &fixture::cells(MATRIX, "quick")[cell_index];
    let mut result = fixture::passed(cell, &env, (0..300u64).map(|i| 40_000 + i).collect());
    result.run_id = run_id.into();
    result.finished_at_unix = finished_at;
    write_result(&s.path("results"), &result).unwrap()
}

#[test]
fn a_report_judges_the_last_run_only_and_names_it() {
    let s = Scratch::new("one-run");
    // An earlier run of both cells, then a run of one cell into the same folder.
    store_in_run(&s, 0, "earlier-run", 1_000);
    store_in_run(&s, 1, "earlier-run", 1_000);
    store_in_run(&s, 0, "later-run", 2_000);
    let out = s.run(&["report", "--results", "results", "--baselines", "b"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("0 regressed, 0 improved, 0 unchanged, 1 new"),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("1 results of other runs"),
        "{}",
        text(&out)
    );
    let markdown = std::fs::read_to_string(s.path(&format!("results/{LEG}/quick/report.md")))
        .expect("report.md");
    assert!(
        markdown.contains("Run later-run: 1 cells: 1 passed, 0 failed."),
        "{markdown}"
    );
}

#[test]
fn results_of_an_older_schema_are_left_out_and_counted_with_a_word_to_re_run() {
    let s = Scratch::new("old-schema");
    store_in_run(&s, 0, "a-run", 1_000);
    // A result of schema 3 (an older build): its cell has `kind` and `timeout` beside it,
    // not `work`.
    let stored = store_in_run(&s, 1, "a-run", 1_000);
    let mut old: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&stored).unwrap()).unwrap();
    old["schema_version"] = 3.into();
    old["cell"]["kind"] = "echo".into();
    old["cell"]["work"] = serde_json::Value::Null;
    std::fs::write(&stored, serde_json::to_vec(&old).unwrap()).unwrap();
    let out = s.run(&["report", "--results", "results", "--baselines", "b"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("1 results in ")
            && text(&out).contains("were written with another result schema (not 4) and were left out; re-run their cells"),
        "{}",
        text(&out)
    );
    let markdown = std::fs::read_to_string(s.path(&format!("results/{LEG}/quick/report.md")))
        .expect("report.md");
    assert!(
        markdown.contains("1 cells: 1 passed, 0 failed. 1 results of another result schema"),
        "{markdown}"
    );
}

#[test]
fn a_result_stored_under_another_leg_is_refused_with_its_path() {
    let s = Scratch::new("moved");
    let stored = store_in_run(&s, 0, "a-run", 1_000);
    let elsewhere = s.path("results/aarch64-unknown-linux-gnu@qemu/quick/cells");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::copy(&stored, elsewhere.join(stored.file_name().unwrap())).unwrap();
    let out = s.run(
        &[
            "report",
            "--results",
            "results",
            "--baselines",
            "b",
            "--leg",
            "aarch64-unknown-linux-gnu@qemu",
        ],
        &[],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("this result says leg x86_64-unknown-linux-gnu@native"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_run_into_a_folder_it_cannot_write_stops_before_any_cell() {
    let s = Scratch::new("unwritable");
    let leg_dir = s.path(&format!(
        "out/{}",
        ipc_matrix_results::Environment::capture().leg()
    ));
    std::fs::create_dir_all(leg_dir.join("quick")).unwrap();
    // `cells` is a file: nothing can be stored there, whoever runs the test (root too).
    std::fs::write(leg_dir.join("quick/cells"), b"not a folder").unwrap();
    let out = s.run(&["run", "--out", "out", "--filter", "/tcp/"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("cannot create"), "{}", text(&out));
    assert!(!text(&out).contains("PASS"), "{}", text(&out));
}

#[test]
fn a_second_run_into_the_same_folder_is_refused_while_the_first_holds_it() {
    let s = Scratch::new("concurrent");
    let leg = ipc_matrix_results::Environment::capture().leg();
    let first = ipc_matrix::RunFolder::claim(&s.path("out"), &leg, "quick").unwrap();
    let second = s.run(&["run", "--out", "out", "--filter", "/tcp/"], &[]);
    assert_eq!(second.status.code(), Some(2), "{}", text(&second));
    assert!(
        text(&second).contains("another ipc-matrix run is writing results into"),
        "{}",
        text(&second)
    );
    assert!(!text(&second).contains("PASS"), "{}", text(&second));
    // Another folder is free.
    let other = ipc_matrix::RunFolder::claim(&s.path("other"), &leg, "quick");
    assert!(other.is_ok());
    drop(first);
    assert!(ipc_matrix::RunFolder::claim(&s.path("out"), &leg, "quick").is_ok());
}

#[test]
fn one_cell_stored_twice_in_one_run_is_an_error_not_two_cells() {
    let s = Scratch::new("duplicate");
    let stored = store_in_run(&s, 0, "a-run", 1_000);
    std::fs::copy(&stored, stored.with_file_name("copy.json")).unwrap();
    let out = s.run(&["report", "--results", "results", "--baselines", "b"], &[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("both hold cell echo::tcp::200B of run a-run"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_strict_report_without_a_baselines_folder_is_an_error_not_a_pass() {
    let s = Scratch::new("no-baselines");
    store_in_run(&s, 0, "a-run", 1_000);
    let args = [
        "report",
        "--results",
        "results",
        "--baselines",
        "/nonexistent",
    ];
    let strict = s.run(&[&args[..], &["--strict"]].concat(), &[]);
    assert_eq!(strict.status.code(), Some(2), "{}", text(&strict));
    assert!(
        text(&strict).contains("no baselines folder at /nonexistent"),
        "{}",
        text(&strict)
    );
    let lenient = s.run(&args, &[]);
    assert!(lenient.status.success(), "{}", text(&lenient));
    assert!(
        text(&lenient).contains("every cell is new"),
        "{}",
        text(&lenient)
    );
}

#[test]
fn a_baseline_recorded_for_another_leg_is_refused_with_its_path() {
    let s = Scratch::new("other-leg-baseline");
    s.store("results", "quick", 45_000, 40_000, 1);
    let args = ["--results", "results", "--baselines", "baselines"];
    let accept = s.run(&[&["baseline", "accept"][..], &args].concat(), &[]);
    assert!(accept.status.success(), "{}", text(&accept));
    // The file copied to another leg's place, as if that leg had a baseline.
    let other = "aarch64-unknown-linux-gnu@qemu";
    std::fs::create_dir_all(s.path(&format!("baselines/{other}"))).unwrap();
    std::fs::copy(
        s.path(&format!("baselines/{LEG}/quick.json")),
        s.path(&format!("baselines/{other}/quick.json")),
    )
    .unwrap();
    // Results of that leg to judge.
    let env = fixture::environment("qemu", "Test CPU");
    let mut result = fixture::passed(&fixture::cells(MATRIX, "quick")[0], &env, vec![1; 300]);
    result.leg = other.into();
    write_result(&s.path("results"), &result).unwrap();
    let out = s.run(&[&["report", "--leg", other][..], &args].concat(), &[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("this baseline was recorded for x86_64-unknown-linux-gnu@native"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_report_that_cannot_be_written_whole_updates_none_of_its_files() {
    let s = Scratch::new("partial");
    store_in_run(&s, 0, "a-run", 1_000);
    let dir = s.path(&format!("results/{LEG}/quick"));
    // report.html cannot be replaced (a non-empty folder stands in its place).
    std::fs::create_dir_all(dir.join("report.html/in-the-way")).unwrap();
    let out = s.run(&["report", "--results", "results", "--baselines", "b"], &[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        !dir.join("report.md").exists(),
        "report.md was written alone"
    );
    assert!(!dir.join("results.json").exists());
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
