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
