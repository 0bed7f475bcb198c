//! What a user sees of a run, and where the command finds its project: the matrix file
//! found from a subfolder, machine-readable output, quiet and verbose runs, colours, and
//! tables that fit the terminal.

mod common;

use common::{leg, text, Scratch};
use std::path::Path;

/// Three quick cells.
const MATRIX: &str = test_matrix!(
    "- { name: echo, kind: echo, transports: [tcp, local], payloads: [200B], iterations: 200, warmup: 10, timeout: 5s }",
    "- { name: bulk, kind: bulk, transports: [tcp], payloads: [64KiB], iterations: 20, warmup: 2, timeout: 5s }",
);
const CELLS: usize = 3;

#[test]
fn the_matrix_file_and_the_projects_folders_are_found_from_a_subfolder() {
    let s = Scratch::new("walk-up", MATRIX);
    let deeper = s.path("sub/deeper");
    std::fs::create_dir_all(&deeper).unwrap();
    let listed = s.command(&["list"]).current_dir(&deeper).output().unwrap();
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed));
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout).lines().count(),
        CELLS,
        "{}",
        text(&listed)
    );
    let run = s
        .command(&["run", "--filter", "/^echo::tcp/"])
        .current_dir(&deeper)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    // Results in the project's target folder, not the current folder's.
    let cells = s.path(&format!("target/ipc-matrix/{}/quick/cells", leg()));
    assert!(
        cells.join("echo.tcp.200B.json").is_file(),
        "no result under {}: {}",
        cells.display(),
        text(&run)
    );
    assert!(!deeper.join("target").exists());
    // The baselines folder looked for is the project's too, named from where the
    // command ran.
    assert!(
        text(&run).contains("no baselines folder at ../../baselines;"),
        "{}",
        text(&run)
    );
    // CARGO_TARGET_DIR still wins.
    let elsewhere = s.path("elsewhere");
    let run = s
        .command(&["run", "--filter", "/^echo::tcp/"])
        .current_dir(&deeper)
        .env("CARGO_TARGET_DIR", &elsewhere)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert!(elsewhere
        .join(format!(
            "ipc-matrix/{}/quick/cells/echo.tcp.200B.json",
            leg()
        ))
        .is_file());
}

#[test]
fn without_a_matrix_file_above_the_error_says_where_it_looked() {
    let dir = std::env::temp_dir().join(format!("ipc-matrix-cli-nowhere-{}", std::process::id()));
    let deeper = dir.join("a/b");
    std::fs::create_dir_all(&deeper).unwrap();
    // Only meaningful when no folder above the temporary folder holds one.
    if ipc_matrix::project::find_matrix(&std::env::temp_dir()).is_ok() {
        eprintln!(
            "skipped: a matrix.yaml is above {}",
            std::env::temp_dir().display()
        );
        return;
    }
    let s = Scratch(dir.clone());
    for args in [&["list"][..], &["run"], &["report"], &["matrix"]] {
        let output = s.command(args).current_dir(&deeper).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!(
                "could not find matrix.yaml in {} or any folder above it",
                deeper.display()
            )),
            "{args:?}: {stderr}"
        );
    }
    assert!(!Path::new(&deeper).join("target").exists());
}

fn lines_of_json(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
        })
        .collect()
}

fn of_type<'a>(events: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[test]
fn json_lines_list_the_cells_and_tell_a_run_cell_by_cell_then_its_summary() {
    let s = Scratch::new("json", MATRIX);
    let human = s.run(&["list"]);
    let ids: Vec<String> = String::from_utf8_lossy(&human.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(ids.len(), CELLS);

    let listed = s.run(&["list", "--message-format", "json"]);
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed));
    let cells = lines_of_json(&listed.stdout);
    assert_eq!(cells.len(), CELLS);
    for (cell, id) in cells.iter().zip(&ids) {
        assert_eq!(cell["type"], "cell", "{cell}");
        assert_eq!(cell["version"], 1, "{cell}");
        assert_eq!(cell["id"].as_str(), Some(id.as_str()), "{cell}");
        assert!(cell["payload_bytes"].as_u64().is_some(), "{cell}");
        assert!(
            cell["kind"].is_string() && cell["transport"].is_string(),
            "{cell}"
        );
    }
    assert_eq!(cells[2]["kind"], "bulk");
    assert_eq!(cells[2]["payload_bytes"], 65536);

    let run = s.run(&["run", "--message-format", "json", "--out", "out"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let events = lines_of_json(&run.stdout);
    assert!(events.iter().all(|e| e["version"] == 1), "{events:?}");
    assert_eq!(events.first().unwrap()["type"], "run-started");
    assert_eq!(events.first().unwrap()["cells"], CELLS);
    let finished = of_type(&events, "cell-finished");
    let finished_ids: Vec<&str> = finished.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(finished_ids, ids);
    for (n, event) in finished.iter().enumerate() {
        assert_eq!(event["passed"], true, "{event}");
        assert_eq!(event["index"], n + 1, "{event}");
        assert_eq!(event["total"], CELLS, "{event}");
        assert!(event["failure"].is_null(), "{event}");
        let p50 = event["p50_ns"].as_u64().unwrap();
        assert!(
            p50 > 0 && p50 <= event["p99_ns"].as_u64().unwrap(),
            "{event}"
        );
        assert!(
            event["p99_ns"].as_u64() <= event["max_ns"].as_u64(),
            "{event}"
        );
        let file = event["result_file"].as_str().unwrap();
        assert!(Path::new(file).is_file(), "{event}");
    }
    let summary = events.last().unwrap();
    assert_eq!(summary["type"], "run-finished", "{summary}");
    assert_eq!(summary["passed"], CELLS, "{summary}");
    assert_eq!(summary["failed"], 0, "{summary}");
    assert_eq!(summary["exit_code"], 0, "{summary}");
    assert_eq!(events.len(), CELLS + 2);
    // The human text went to stderr.
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains(&format!("PASS [1/{CELLS}] {}", ids[0])),
        "{stderr}"
    );
    assert!(stderr.contains("passed, 0 failed"), "{stderr}");
}

/// Two cells, the second failing: its peer waits 200 ms before each reply, and a round
/// trip may take 100 ms.
const FAILING: &str = test_matrix!(
    "- { name: echo, kind: echo, transports: [tcp, local], payloads: [200B], iterations: 50, warmup: 2, timeout: 100ms }",
);

fn failing_run(s: &Scratch, args: &[&str]) -> (std::process::Output, String) {
    let output = s
        .command(&[&["run", "--out", "out"][..], args].concat())
        .env("IPC_MATRIX_PEER_DELAY_US", "200000")
        .env("IPC_MATRIX_PEER_DELAY_CELLS", "::local::")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output, stdout)
}

#[test]
fn quiet_prints_failures_and_the_summary_verbose_prints_more() {
    let s = Scratch::new("quiet", FAILING);
    let (_, normal) = failing_run(&s, &[]);
    assert!(normal.contains("PASS [1/2] echo::tcp::200B"), "{normal}");
    assert!(
        normal.contains("FAIL [2/2] echo::local::200B: "),
        "{normal}"
    );
    assert!(normal.contains('┌'), "{normal}");
    assert!(normal.contains("reports: "), "{normal}");
    assert!(!normal.contains("result: "), "{normal}");

    let (quiet, stdout) = failing_run(&s, &["--quiet"]);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", text(&quiet));
    assert!(
        lines[0].starts_with("FAIL [2/2] echo::local::200B: "),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("run ") && lines[1].ends_with(": 2 cells: 1 passed, 1 failed"),
        "{stdout}"
    );
    assert!(!text(&quiet).contains("PASS"), "{}", text(&quiet));

    let (_, verbose) = failing_run(&s, &["--verbose"]);
    assert!(verbose.contains("environment: "), "{verbose}");
    let file = format!("out/{}/quick/cells/echo.tcp.200B.json", leg());
    assert!(s.path(&file).is_file());
    assert!(
        verbose.contains(&format!("\n    result: {file}\n")),
        "{verbose}"
    );
    assert!(verbose.contains("    measuring on CPU") || verbose.contains("    CPUs left"));
}

#[test]
fn colour_follows_the_flag_no_color_and_clicolor_force() {
    let s = Scratch::new("colour", MATRIX);
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = s.command(
            &[
                &["run", "--out", "out", "--filter", "/^echo::tcp/"][..],
                args,
            ]
            .concat(),
        );
        command.env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE");
        for (k, v) in env {
            command.env(k, v);
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        text(&output)
    };
    const GREEN_PASS: &str = "\x1b[1;32mPASS\x1b[0m [1/1] echo::tcp::200B";
    // Into a pipe, auto colours nothing; NO_COLOR neither.
    assert!(!run(&[], &[]).contains('\x1b'));
    assert!(!run(&[], &[("NO_COLOR", "1")]).contains('\x1b'));
    assert!(!run(&["--color", "never"], &[("CLICOLOR_FORCE", "1")]).contains('\x1b'));
    // --color always, and CLICOLOR_FORCE under auto, colour the verdicts and the table.
    for coloured in [
        run(&["--color", "always"], &[("NO_COLOR", "1")]),
        run(&[], &[("CLICOLOR_FORCE", "1")]),
    ] {
        assert!(coloured.contains(GREEN_PASS), "{coloured}");
        assert!(
            coloured
                .lines()
                .any(|l| l.contains("echo::tcp::200B") && l.contains('│') && l.contains("\x1b[")),
            "{coloured}"
        );
    }
    // The help too.
    let help = |args: &[&str]| {
        let output = s
            .command(args)
            .env_remove("CLICOLOR_FORCE")
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output));
        text(&output)
    };
    assert!(help(&["--color", "always", "run", "--help"]).contains("\x1b["));
    assert!(!help(&["--color", "never", "run", "--help"]).contains("\x1b["));
}

#[test]
fn tables_fit_columns_and_are_whole_into_a_pipe() {
    let s = Scratch::new("columns", MATRIX);
    let table_lines = |columns: Option<&str>| {
        let mut command = s.command(&["run", "--out", "out", "--color", "never"]);
        match columns {
            Some(c) => command.env("COLUMNS", c),
            None => command.env_remove("COLUMNS"),
        };
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let lines: Vec<String> = stdout
            .lines()
            .filter(|l| l.starts_with(['┌', '│', '╞', '├', '└', '(']))
            .map(str::to_string)
            .collect();
        assert!(lines.len() > 2 * CELLS, "{stdout}");
        lines
    };
    let narrow = table_lines(Some("80"));
    for line in &narrow {
        assert!(
            line.chars().count() <= 80,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    assert!(
        narrow.iter().any(|l| l.starts_with("(not shown, to fit: ")),
        "{narrow:?}"
    );
    for id in ["echo::tcp::200B", "echo::local::200B", "bulk::tcp::64KiB"] {
        assert!(
            narrow.iter().any(|l| l.contains(&format!(" {id} "))),
            "{id}: {narrow:?}"
        );
    }
    let whole = table_lines(None);
    assert!(whole.iter().any(|l| l.chars().count() > 80), "{whole:?}");
    assert!(
        whole.iter().any(|l| l.contains("round trips/s")),
        "{whole:?}"
    );
    assert!(
        !whole.iter().any(|l| l.starts_with("(not shown")),
        "{whole:?}"
    );
}

/// Each cell over a channel says how its bytes moved, in its event and its result file:
/// iceoryx2 through its loans, shared memory streamed, tcp copied; and a cell whose peer
/// needs each whole message (a codec) copies over shared memory too. iceoryx2's echo
/// cells carry their own benchmark's setup beside them, and no other cell does.
#[test]
fn each_cell_over_a_channel_says_how_its_bytes_moved() {
    let s = Scratch::new(
        "message-path",
        test_matrix!(
            "- { name: echo, kind: echo, transports: [iceoryx2, shm, tcp], payloads: [200B], iterations: 50, warmup: 5, timeout: 5s }",
            "- { name: codec, kind: codec, codecs: [prost], transports: [shm], wake: [blocking], payloads: [200B], iterations: 20, warmup: 2, timeout: 5s }",
        ),
    );
    let run = s.run(&["run", "--message-format", "json", "--out", "out"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let events = lines_of_json(&run.stdout);
    let mut seen = Vec::new();
    for event in of_type(&events, "cell-finished") {
        let id = event["id"].as_str().unwrap().to_string();
        let path = event["message_path"].as_str().unwrap_or("none").to_string();
        let file = event["result_file"].as_str().unwrap();
        let stored: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        assert_eq!(
            stored["message_path"].as_str(),
            Some(path.as_str()),
            "{id}: {stored}"
        );
        // iceoryx2's own benchmark setups stand beside its echo cells only, timed when
        // the cell is pinned (as every cell is on a machine of two CPUs) in the blocks
        // its floor is timed in: the publish-subscribe setup beside a busy-poll cell, the
        // event setup beside a blocking one.
        let own = &stored["own_setup"];
        let pinned = stored["placement"]["measurer_cpu"].is_u64();
        if id.starts_with("echo::iceoryx2-") && pinned {
            assert!(own["p50_ns"].as_u64().is_some_and(|p| p > 0), "{id}: {own}");
            assert!(
                own["ratio"].as_f64().is_some_and(|r| r > 0.0),
                "{id}: {own}"
            );
            let benchmark = match id.starts_with("echo::iceoryx2-busy") {
                true => "iceoryx2 publish-subscribe benchmark",
                false => "iceoryx2 event benchmark",
            };
            assert!(
                own["setup"]
                    .as_str()
                    .is_some_and(|s| s.starts_with(benchmark)),
                "{id}: {own}"
            );
            // 50 measured round trips: a block before each 5th.
            assert_eq!(own["blocks"].as_u64(), Some(10), "{id}: {own}");
        } else {
            assert!(own.is_null(), "{id}: {own}");
        }
        seen.push((id, path));
    }
    let expected = [
        ("echo::iceoryx2-busy::200B", "loaned"),
        ("echo::iceoryx2-blocking::200B", "loaned"),
        ("echo::shm-busy::200B", "streamed"),
        ("echo::shm-blocking::200B", "streamed"),
        ("echo::tcp::200B", "copied"),
        ("codec::prost::shm-blocking::200B", "copied"),
    ];
    for (id, path) in expected {
        assert!(
            seen.iter().any(|(i, p)| i == id && p == path),
            "{id} should say {path}: {seen:?}"
        );
    }
}
