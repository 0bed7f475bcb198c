//! Peers the user brings (`peer: { command: [...] }`), through `ipc-matrix run` as a
//! user's matrix names them: the reference C peer (`peers/c`, built for the suite's
//! target by `scripts/build-peers.sh`; under QEMU it runs through the same emulator as
//! our own peer) and the Python one (`peers/python`). Every reply is checked byte for
//! byte; a peer that corrupts one byte, is missing, or dies fails its cell with a reason.

mod common;

use common::{leg, text, Scratch};
use ipc_matrix_results::{read_run, run_dir, FailureKind, RunResults};
use std::path::PathBuf;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The C peer, `{target}` left for the harness to fill in, as matrix.yaml writes it.
fn c_peer() -> String {
    let path = workspace().join("peers/c/build/{target}/c-echo-peer");
    path.to_str().unwrap().to_string()
}

fn python_peer() -> String {
    let path = workspace().join("peers/python/echo_peer.py");
    path.to_str().unwrap().to_string()
}

/// A matrix of echo scenarios whose peer is `command`, each a line of YAML.
fn matrix(scenarios: &[(&str, &str, Vec<String>)]) -> String {
    let mut text = String::from(
        "version: 1\ntargets:\n  - { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }\nprofiles:\n  quick: { description: test }\nscenarios:\n",
    );
    for (name, transports, command) in scenarios {
        let words: Vec<String> = command.iter().map(|w| format!("{w:?}")).collect();
        text.push_str(&format!(
            "  - {{ name: {name}, kind: echo, transports: [{transports}], payloads: [1B, 200B, 60KiB], iterations: 40, warmup: 3, timeout: 5s, peer: {{ command: [{}] }} }}\n",
            words.join(", ")
        ));
    }
    text
}

fn stored(s: &Scratch) -> RunResults {
    read_run(&run_dir(&s.path("out"), &leg(), "quick"), None).unwrap()
}

#[test]
fn the_reference_peers_pass_their_cells_checked_byte_for_byte() {
    let s = Scratch::new(
        "external-pass",
        &matrix(&[
            ("c", "tcp, udp, local", vec![c_peer()]),
            ("python", "tcp, local", vec![python_peer()]),
        ]),
    );
    let output = s.run(&["run", "--out", "out", "--baselines", "baselines"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let run = stored(&s);
    let mut ids: Vec<&str> = run.results.iter().map(|r| r.cell.id.as_str()).collect();
    ids.sort();
    let mut expected = Vec::new();
    for (scenario, transports) in [
        ("c", &["local", "tcp", "udp"][..]),
        ("python", &["local", "tcp"]),
    ] {
        for transport in transports {
            for size in ["1B", "200B", "60KiB"] {
                expected.push(format!("{scenario}::{transport}::{size}"));
            }
        }
    }
    expected.sort();
    assert_eq!(ids, expected);
    for result in &run.results {
        assert!(
            result.outcome.failure.is_none(),
            "{}: {:?}",
            result.cell.id,
            result.outcome.failure
        );
        // Every round trip was measured (or, over udp, lost), and each peer was the
        // program the scenario named.
        let answered = result.measured_round_trips + result.lost;
        assert!(
            (40..=43).contains(&answered),
            "{}: {answered}",
            result.cell.id
        );
        assert!(result.cell.peer.is_some(), "{}", result.cell.id);
    }
}

#[test]
fn a_peer_that_corrupts_one_byte_fails_naming_the_round_trip_and_the_offset() {
    let corrupt = |peer: String| vec![peer, "--corrupt".into(), "5:17".into()];
    let s = Scratch::new(
        "external-corrupt",
        &matrix(&[
            ("c", "tcp, udp, local", corrupt(c_peer())),
            ("python", "tcp, local", corrupt(python_peer())),
        ]),
    );
    let output = s.run(&["run", "--out", "out", "--baselines", "baselines"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let run = stored(&s);
    assert_eq!(run.results.len(), 15);
    for result in &run.results {
        let id = &result.cell.id;
        let failure = result
            .outcome
            .failure
            .as_ref()
            .unwrap_or_else(|| panic!("{id} passed"));
        // 1 B has no offset 17: the peer says so and exits (over udp the reply it never
        // sent counts as lost, and the next round trip finds it gone); every larger reply
        // is caught at the flipped byte.
        if id.ends_with("::1B") {
            let expected = if result.cell.transport.as_str() == "udp" {
                6
            } else {
                5
            };
            assert_eq!(
                failure.round_trip,
                Some(expected),
                "{id}: {}",
                failure.reason
            );
            assert!(
                failure.reason.contains("offset 17"),
                "{id}: {}",
                failure.reason
            );
            continue;
        }
        assert_eq!(
            failure.kind,
            FailureKind::Mismatch,
            "{id}: {}",
            failure.reason
        );
        assert_eq!(failure.round_trip, Some(5), "{id}: {}", failure.reason);
        assert!(
            failure
                .reason
                .contains("first difference at byte offset 17"),
            "{id}: {}",
            failure.reason
        );
        assert!(text(&output).contains(id.as_str()), "{}", text(&output));
    }
}

#[test]
fn a_missing_or_dying_peer_command_fails_its_cell_with_a_clear_reason() {
    let s = Scratch::new(
        "external-broken",
        &matrix(&[
            ("missing", "tcp", vec!["peers/none/{target}/here".into()]),
            (
                "dying",
                "tcp, udp, local",
                vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    "echo refusing to serve >&2; exit 3".into(),
                    "sh".into(),
                ],
            ),
        ]),
    );
    let output = s.run(&["run", "--out", "out", "--baselines", "baselines"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let run = stored(&s);
    assert_eq!(run.results.len(), 12);
    for result in &run.results {
        let id = &result.cell.id;
        let failure = result
            .outcome
            .failure
            .as_ref()
            .unwrap_or_else(|| panic!("{id} passed"));
        assert_eq!(failure.kind, FailureKind::Setup, "{id}: {}", failure.reason);
        if result.cell.scenario == "missing" {
            let triple = &result.environment.target_triple;
            let expected = format!("the peer command `peers/none/{triple}/here` does not exist");
            assert!(
                failure.reason.contains(&expected),
                "{id}: {}",
                failure.reason
            );
        } else {
            assert!(
                failure.reason.contains("exit status 3"),
                "{id}: {}",
                failure.reason
            );
            assert!(
                failure.reason.contains("refusing to serve"),
                "{id}: {}",
                failure.reason
            );
        }
    }
}

/// The book's worked example (docs/src/peers/worked-example.md), exactly as printed
/// there, saved where it says and named by a relative command: its cells pass.
#[test]
fn the_readme_worked_example_passes_its_cells_as_printed() {
    let section =
        std::fs::read_to_string(workspace().join("docs/src/peers/worked-example.md")).unwrap();
    let code = section
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the example's Python block");
    let s = Scratch::new(
        "external-readme",
        &matrix(&[("mine", "tcp, local", vec!["peers/my_peer.py".into()])]),
    );
    std::fs::create_dir(s.path("peers")).unwrap();
    std::fs::write(s.path("peers/my_peer.py"), code).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        s.path("peers/my_peer.py"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let output = s.run(&["run", "--out", "out", "--baselines", "baselines"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let run = stored(&s);
    assert_eq!(run.results.len(), 6);
    assert!(run.results.iter().all(|r| r.outcome.passed));
}

/// Processes whose command line is `sleep <seconds>`.
fn sleepers(seconds: &str) -> usize {
    let wanted = format!("sleep\0{seconds}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| std::fs::read(entry.ok()?.path().join("cmdline")).ok())
        .filter(|cmdline| cmdline == wanted.as_bytes())
        .count()
}

/// Peers that misbehave at the edges of the protocol: one that starts a process of its
/// own (which holds its stderr) and leaves it behind, one that talks after the goodbye,
/// one that writes far more to stderr than is kept before its error line.
#[test]
fn a_peers_leftovers_its_words_after_goodbye_and_its_last_error_line_are_handled() {
    let s = Scratch::new(
        "external-edges",
        &matrix(&[
            ("leaves-child", "tcp", vec!["./leaves-child.sh".into()]),
            ("talks-after", "tcp", vec!["./talks-after.py".into()]),
            ("noisy", "tcp", vec!["./noisy.sh".into()]),
        ]),
    );
    let script = |name: &str, text: String| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(s.path(name), text).unwrap();
        std::fs::set_permissions(s.path(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    // `exec`: the peer keeps the script's pid; the sleeper is in its process group and
    // holds its stderr.
    script(
        "leaves-child.sh",
        format!("#!/bin/sh\nsleep 31337 &\nexec {} \"$@\"\n", python_peer()),
    );
    let page =
        std::fs::read_to_string(workspace().join("docs/src/peers/worked-example.md")).unwrap();
    let example = page
        .split("```python\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .unwrap();
    let goodbye = "        sys.exit(0)                           # goodbye\n";
    assert!(example.contains(goodbye));
    script(
        "talks-after.py",
        example.replace(
            goodbye,
            "        sock.sendall(struct.pack(\"<Q\", 3) + b\"bye\")\n        sys.exit(0)\n",
        ),
    );
    script(
        "noisy.sh",
        "#!/bin/sh\ni=0\nwhile [ $i -lt 2000 ]; do echo \"line $i: a long line of progress that nobody needs to read, over and over\" >&2; i=$((i+1)); done\necho 'noisy: THE REAL ERROR' >&2\nexit 2\n".into(),
    );
    let output = s.run(&["run", "--out", "out", "--baselines", "baselines"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let run = stored(&s);
    for result in &run.results {
        let (id, failure) = (&result.cell.id, &result.outcome.failure);
        match result.cell.scenario.as_str() {
            "leaves-child" => assert!(failure.is_none(), "{id}: {failure:?}"),
            "talks-after" => {
                let failure = failure.as_ref().unwrap_or_else(|| panic!("{id} passed"));
                assert_eq!(
                    failure.kind,
                    FailureKind::Protocol,
                    "{id}: {}",
                    failure.reason
                );
                assert!(
                    failure.reason.contains("3 bytes after its last reply"),
                    "{id}: {}",
                    failure.reason
                );
            }
            _ => {
                let failure = failure.as_ref().unwrap_or_else(|| panic!("{id} passed"));
                assert!(
                    failure.reason.contains("noisy: THE REAL ERROR"),
                    "{id}: {}",
                    failure.reason
                );
                assert!(
                    failure.reason.contains("bytes left out"),
                    "{id}: {}",
                    failure.reason
                );
                assert!(
                    failure.reason.contains("line 0:"),
                    "{id}: {}",
                    failure.reason
                );
            }
        }
    }
    assert_eq!(
        sleepers("31337"),
        0,
        "a peer's own process was left running"
    );
}

/// `list --message-format json` says whose each cell's peer is and where it runs.
#[test]
fn list_names_each_cells_peer_command_and_host() {
    let s = Scratch::new(
        "external-list",
        &matrix(&[("c", "tcp", vec![c_peer(), "--flag".into()])]),
    );
    let output = s.run(&["list", "--message-format", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    for line in lines {
        assert_eq!(
            line["peer_command"],
            serde_json::json!([c_peer(), "--flag"])
        );
        assert_eq!(line["host"]["on"], "loopback", "{line}");
    }
}
