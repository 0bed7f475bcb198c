//! Hostile input on the command line and on disk: an argument that is not UTF-8 is an
//! error, never a panic; a FIFO where a result file belongs is refused, naming it, never
//! waited on; a temporary directory too long for a socket's name is not a failure.

mod common;

use common::{text, Scratch};
use ipc_matrix_results::{fixture, write_result};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

const MATRIX: &str = test_matrix!(
    "- { name: echo, kind: echo, transports: [tcp], payloads: [200B], iterations: 300, warmup: 0, timeout: 1s }"
);

/// Runs the binary with `args`, killed after a minute: a hang is a failure, not a stuck
/// test run.
fn run_bounded(s: &Scratch, args: &[&OsStr]) -> (Option<i32>, String) {
    let mut command = s.command(&[]);
    command.args(args);
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            panic!("{args:?}: still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), text(&out))
}

#[test]
fn an_argument_that_is_not_utf8_is_an_error_not_a_panic() {
    let s = Scratch::new("hostile-utf8", MATRIX);
    let bad = OsStr::from_bytes(b"\xff.yaml");
    let (code, all) = run_bounded(&s, &[OsStr::new("list"), OsStr::new("--matrix"), bad]);
    assert_eq!(code, Some(2), "{all}");
    assert!(!all.contains("panicked"), "{all}");
    assert!(all.contains(".yaml"), "the error names the file: {all}");
}

/// One passed result of the matrix's first cell, stored under `results/` in `s`, and
/// where it was written.
fn one_stored_result(s: &Scratch) -> (ipc_matrix_results::CellResult, std::path::PathBuf) {
    let cell = &fixture::cells(MATRIX, "quick")[0];
    let env = fixture::environment("native", "Test CPU");
    let result = fixture::passed(cell, &env, (0..300).map(|i| 40_000 + i).collect());
    let stored = write_result(&s.path("results"), &result).unwrap();
    (result, stored)
}

#[test]
fn a_fifo_among_the_results_is_refused_naming_it() {
    let s = Scratch::new("hostile-fifo", MATRIX);
    let (result, stored) = one_stored_result(&s);
    let fifo = stored.with_file_name("planted.json");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string naming a path in the scratch folder.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let leg = result.leg.clone();
    let (code, all) = run_bounded(
        &s,
        &["report", "--results", "results", "--leg", &leg].map(OsStr::new),
    );
    assert_ne!(code, Some(0), "{all}");
    assert!(
        all.contains("planted.json") && all.contains("a FIFO"),
        "{all}"
    );
}

/// A leg names one results folder: a `--leg` that would reach outside it (a path, `..`)
/// or is no leg at all is refused (exit 2) before anything is read or written there.
#[test]
fn a_leg_that_is_not_a_leg_name_is_refused_before_anything_is_written() {
    let s = Scratch::new("hostile-leg", MATRIX);
    one_stored_result(&s);
    for leg in [
        "../../escaped@native",
        "x86_64-unknown-linux-gnu/../..@qemu",
        "..@qemu",
        "x86_64-unknown-linux-gnu@elsewhere",
        "x86_64-unknown-linux-gnu",
    ] {
        for args in [
            vec!["report", "--results", "results", "--leg", leg],
            vec!["history", "results", "--out", "history", "--leg", leg],
        ] {
            let (code, all) = run_bounded(&s, &args.iter().map(OsStr::new).collect::<Vec<_>>());
            assert_eq!(code, Some(2), "{args:?}: {all}");
            assert!(all.contains("is not a leg"), "{args:?}: {all}");
        }
    }
    assert!(!s.path("escaped@native").exists());
    assert!(
        !s.path("history").exists(),
        "nothing is written for a refused leg"
    );
}

/// Every command that takes a path or a word: one that is not UTF-8 is an error (exit 2)
/// naming what was given, never a panic.
#[test]
fn no_command_panics_on_an_argument_that_is_not_utf8() {
    let s = Scratch::new("hostile-utf8-all", MATRIX);
    let bad = OsStr::from_bytes(b"x\xff");
    let o = OsStr::new;
    for args in [
        vec![o("list"), o("--filter"), bad],
        vec![o("list"), o("--profile"), bad],
        vec![o("report"), o("--compare"), bad, bad],
        vec![o("report"), o("--results"), bad],
        vec![o("history"), bad],
        vec![o("history"), o("."), o("--out"), bad, o("--leg"), bad],
        vec![o("run"), o("--out"), bad, o("--filter"), bad],
        vec![o("conformance"), o("--stack"), bad],
        vec![o("conformance"), o("--matrix"), bad],
        vec![o("conformance"), o("--"), bad],
    ] {
        let (code, all) = run_bounded(&s, &args);
        assert!(
            matches!(code, Some(2) | Some(4)),
            "{args:?}: {code:?} {all}"
        );
        assert!(!all.contains("panicked"), "{args:?}: {all}");
    }
    // A word that must be text names its flag and what was given.
    for flag in ["--filter", "--profile"] {
        let (code, all) = run_bounded(&s, &[o("list"), o(flag), bad]);
        assert_eq!(code, Some(2), "{all}");
        assert!(
            all.contains(&format!("{flag} \"x\u{fffd}\" is not UTF-8 text")),
            "{flag}: {all}"
        );
    }
}

/// The matrix is a regular file: one given through a pipe or a FIFO is refused at once,
/// naming it, before any cell runs (it used to be read twice: once for the cells, once
/// more for the regression policy after every cell had run).
#[test]
fn a_matrix_through_a_pipe_or_a_fifo_is_refused_before_any_cell_runs() {
    let s = Scratch::new("hostile-matrix-pipe", MATRIX);
    let mut command = s.command(&["run", "--matrix", "/dev/stdin", "--out", "out"]);
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    // It may have refused the pipe before this is written: a broken pipe is no failure.
    let _ = child.stdin.take().unwrap().write_all(MATRIX.as_bytes());
    let out = child.wait_with_output().unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("/dev/stdin") && all.contains("a FIFO"),
        "{all}"
    );
    assert!(!s.path("out").exists(), "a cell ran: {all}");

    let fifo = s.path("fifo.yaml");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string naming a path in the scratch folder.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let (code, all) = run_bounded(&s, &["list", "--matrix", "fifo.yaml"].map(OsStr::new));
    assert_eq!(code, Some(2), "{all}");
    assert!(all.contains("fifo.yaml") && all.contains("a FIFO"), "{all}");
}

/// Every IPC_MATRIX_* variable is checked like a flag: a runner is a known word (never a
/// path out of --out, never control characters on the terminal), and a count file names
/// each process's own file, so no file the user named is removed.
#[test]
fn environment_values_are_checked_like_flags() {
    let s = Scratch::new("hostile-env", MATRIX);
    let keep = s.path("my-notes.txt");
    std::fs::write(&keep, "mine").unwrap();
    let keep_text = keep.to_str().unwrap();
    let elsewhere = format!("elsewhere-{}", std::process::id());
    let escape = format!("../../../../{elsewhere}");
    for (name, value) in [
        ("IPC_MATRIX_RUNNER", &*escape),
        ("IPC_MATRIX_RUNNER", "nat\nive\x1b[31m"),
        ("IPC_MATRIX_COUNT_FILE", keep_text),
        ("IPC_MATRIX_PEER_DELAY_US", "soon"),
        ("IPC_MATRIX_PEER_DELAY_CELLS", "(echo"),
    ] {
        let out = s
            .command(&["run", "--out", "out"])
            .env(name, value)
            .output()
            .unwrap();
        let all = text(&out);
        assert_eq!(out.status.code(), Some(2), "{name}={value:?}: {all}");
        assert!(all.contains(&format!("{name}=")), "{name}: {all}");
        assert!(!all.contains('\x1b'), "raw ESC printed: {all:?}");
        assert!(!s.path("out").exists(), "{name}: a cell ran: {all}");
    }
    assert_eq!(std::fs::read_to_string(&keep).unwrap(), "mine");
    for dir in [s.0.parent().unwrap(), std::path::Path::new("/")] {
        assert!(
            !dir.join(&elsewhere).exists(),
            "written into {}",
            dir.display()
        );
    }
    // A name ipc-matrix does not know is a warning, not an error.
    let out = s
        .command(&["list"])
        .env("IPC_MATRIX_COUNTFILE", "x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("warning: IPC_MATRIX_COUNTFILE"));
}

/// A matrix of one echo cell over `transports` whose peer is the Python program `body`
/// (after the shared preamble), 40 round trips after 3 of warm-up.
fn python_peer_matrix(s: &Scratch, body: &str, transports: &str) {
    let peer = s.path("peer.py");
    std::fs::write(&peer, format!("{PYTHON_PREAMBLE}{body}")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&peer, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        s.path("matrix.yaml"),
        test_matrix!("- { name: echo, kind: echo, transports: [TRANSPORTS], payloads: [200B], iterations: 40, warmup: 3, timeout: 2s, peer: { command: [./peer.py] } }")
            .replace("TRANSPORTS", transports),
    )
    .unwrap();
}

const PYTHON_PREAMBLE: &str = r#"#!/usr/bin/env python3
import json, os, socket, struct, sys

def read_exact(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            sys.exit(3)
        data += chunk
    return bytes(data)

def connect():
    config = json.loads(sys.argv[3])
    if config["transport"] == "tcp":
        host, port = config["address"].rsplit(":", 1)
        sock = socket.create_connection((host, int(port)))
    elif config["transport"] == "udp":
        host, port = config["address"].rsplit(":", 1)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.connect((host, int(port)))
        sock.send(b"ipc-matrix udp hello v1")
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(config["address"])
    return sock

def echo(sock, replies):
    for _ in range(replies):
        (length,) = struct.unpack("<Q", read_exact(sock, 8))
        sock.sendall(struct.pack("<Q", length) + read_exact(sock, length))

def echo_datagrams(sock, replies):
    for _ in range(replies):
        sock.send(sock.recv(65536))
"#;

/// The goodbye is verified: a peer that answers every round trip but exits without
/// reading its goodbye fails, and so does one whose started process left the serving to
/// a child it forked, whether it exited at once or waits for that child (in its process
/// group or not).
#[test]
fn the_goodbye_is_read_by_the_process_the_cell_started() {
    for (name, body, expected) in [
        (
            "exits-unread",
            "sock = connect()\necho(sock, 43)\nos._exit(0)\n",
            // Told goodbye before or after its end closed: it is seen either way (a Unix
            // socket closed first refuses the goodbye).
            &[
                "without reading its goodbye",
                "before it was told goodbye",
                "goodbye not delivered",
            ][..],
        ),
        (
            // The started process exits right after its fork; on a loaded machine it may
            // not yet have run to its exit when the child's last reply arrives, and is
            // then seen alive beside a child holding the socket. Both are this failure.
            "forks",
            "sock = connect()\nif os.fork() > 0:\n    os._exit(0)\necho(sock, 43)\nread_exact(sock, 8)\nos._exit(0)\n",
            &["before it was told goodbye", "ran at the goodbye"][..],
        ),
        (
            // Closes its connection after its last reply and lingers, alive, so that the
            // goodbye reaches a closed end: TCP resets it, a Unix socket refuses it (or,
            // on a machine so loaded that the linger ran out first, it had exited).
            "closes-and-lingers",
            "import time\nsock = connect()\necho(sock, 43)\nsock.close()\ntime.sleep(0.5)\nos._exit(0)\n",
            &[
                "without reading its goodbye",
                "goodbye not delivered",
                "before it was told goodbye",
            ][..],
        ),
        (
            // The started process stays alive, waiting, while a child it forked does
            // all of the serving and reads the goodbye.
            "forks-and-waits",
            "sock = connect()\nchild = os.fork()\nif child > 0:\n    os.waitpid(child, 0)\n    os._exit(0)\necho(sock, 43)\nread_exact(sock, 8)\nos._exit(0)\n",
            &["ran at the goodbye"][..],
        ),
        (
            // The same, with the child in a session of its own (out of the group).
            "forks-setsid",
            "sock = connect()\nchild = os.fork()\nif child > 0:\n    os.waitpid(child, 0)\n    os._exit(0)\nos.setsid()\necho(sock, 43)\nread_exact(sock, 8)\nos._exit(0)\n",
            &["ran at the goodbye"][..],
        ),
    ] {
        for transport in ["tcp", "local"] {
            let s = Scratch::new(&format!("hostile-goodbye-{name}-{transport}"), MATRIX);
            python_peer_matrix(&s, body, transport);
            let (code, all) = run_bounded(&s, &["run", "--out", "out"].map(OsStr::new));
            assert_eq!(code, Some(1), "{name} over {transport}: {all}");
            assert!(
                all.contains("FAIL") && expected.iter().any(|e| all.contains(e)),
                "{name} over {transport}: {all}"
            );
        }
    }
    // The same peer that reads its goodbye passes: the check is not a false failure.
    let s = Scratch::new("hostile-goodbye-good", MATRIX);
    python_peer_matrix(
        &s,
        "sock = connect()\necho(sock, 43)\nread_exact(sock, 8)\nos._exit(0)\n",
        "tcp, local",
    );
    let (code, all) = run_bounded(&s, &["run", "--out", "out"].map(OsStr::new));
    assert_eq!(code, Some(0), "{all}");
}

/// What a datagram cell can see of its goodbye: a UDP peer whose socket was closed when
/// the goodbye arrived fails (the kernel answered "port unreachable"); one that left it
/// unread in a socket still open cannot be seen, and its passing result says so
/// (`goodbye`). The peer that reads its goodbye passes, with that note.
#[test]
fn over_udp_a_goodbye_that_finds_the_socket_closed_fails_and_what_cannot_be_seen_is_said() {
    const REFUSED: &str = "its socket was closed when the goodbye arrived";
    const EXITED: &str = "before it was told goodbye";
    const UNSEEN: &str = "cannot be seen over datagrams";
    // What the run printed, and the stored result's `goodbye` note (if any).
    let run = |name: &str, body: &str| {
        let s = Scratch::new(&format!("hostile-udp-goodbye-{name}"), MATRIX);
        python_peer_matrix(&s, body, "udp");
        let (code, all) = run_bounded(&s, &["run", "--out", "out"].map(OsStr::new));
        let cell = ipc_matrix_results::run_dir(&s.path("out"), &common::leg(), "quick")
            .join("cells/echo.udp.200B.json");
        let stored: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&cell).unwrap()).unwrap();
        let note = stored["goodbye"].as_str().map(str::to_string);
        (s, code, all, note)
    };
    for round in 0..3 {
        // Closes its socket after its last reply and lingers, alive: the goodbye reaches
        // a closed port, which the kernel answers (or, on a machine so loaded that the
        // linger ran out first, it had exited).
        let (_s, code, all, _) = run(
            &format!("closes-{round}"),
            "import time\nsock = connect()\necho_datagrams(sock, 43)\nsock.close()\ntime.sleep(0.5)\nos._exit(0)\n",
        );
        assert_eq!(code, Some(1), "closes-and-lingers, round {round}: {all}");
        assert!(
            all.contains("FAIL") && (all.contains(REFUSED) || all.contains(EXITED)),
            "closes-and-lingers, round {round}: {all}"
        );
        // Exits at once after its last reply, or lingers with its socket open and the
        // goodbye unread in it: seen when its socket was closed (or it had exited) by the
        // time the goodbye came; otherwise the cell passes and says what it cannot see.
        for (name, body) in [
            ("exits", "sock = connect()\necho_datagrams(sock, 43)\nos._exit(0)\n"),
            (
                "lingers-open",
                "import time\nsock = connect()\necho_datagrams(sock, 43)\ntime.sleep(0.3)\nos._exit(0)\n",
            ),
        ] {
            let (_s, code, all, note) = run(&format!("{name}-{round}"), body);
            match code {
                Some(1) => assert!(
                    all.contains("FAIL") && (all.contains(REFUSED) || all.contains(EXITED)),
                    "{name}, round {round}: {all}"
                ),
                Some(0) => assert!(
                    note.as_deref().is_some_and(|n| n.contains(UNSEEN)),
                    "{name}, round {round}: passed without the note ({note:?}): {all}"
                ),
                _ => panic!("{name}, round {round}: {all}"),
            }
        }
    }
    // The peer that reads its goodbye passes, with the note, in its result and in the
    // report's notes.
    let (s, code, all, note) = run(
        "good",
        "sock = connect()\necho_datagrams(sock, 43)\nos._exit(0 if sock.recv(65536) == b\"\" else 4)\n",
    );
    assert_eq!(code, Some(0), "{all}");
    assert!(
        note.as_deref().is_some_and(|n| n.contains(UNSEEN)),
        "{note:?}"
    );
    let report = s.run(&["report", "--results", "out", "--baselines", "baselines"]);
    assert!(report.status.success(), "{}", text(&report));
    let markdown = std::fs::read_to_string(
        ipc_matrix_results::run_dir(&s.path("out"), &common::leg(), "quick").join("report.md"),
    )
    .unwrap();
    assert!(markdown.contains(UNSEEN), "{markdown}");
}

/// Control characters from matrix.yaml (a peer's command word) reach the terminal
/// escaped.
#[test]
fn control_characters_from_the_matrix_are_escaped_on_the_terminal() {
    let s = Scratch::new(
        "hostile-controls",
        test_matrix!("- { name: echo, kind: echo, transports: [tcp], payloads: [200B], iterations: 10, warmup: 0, timeout: 1s, peer: { command: [\"./no\\e[31mpeer\\a\"] } }"),
    );
    let (code, all) = run_bounded(&s, &["run", "--out", "out"].map(OsStr::new));
    assert_eq!(code, Some(1), "{all}");
    assert!(all.contains("FAIL"), "{all}");
    assert!(
        !all.contains('\x1b') && !all.contains('\x07'),
        "raw controls: {all:?}"
    );
    assert!(all.contains("\\u{1b}"), "{all}");
}

/// Every kind of cell that binds a Unix socket: a stream, iceoryx2's event sockets, an RPC
/// server and a ZeroMQ IPC endpoint.
const SOCKET_MATRIX: &str = test_matrix!(
    "- { name: echo, kind: echo, transports: [local, iceoryx2], wake: [blocking], payloads: [200B], iterations: 200, warmup: 0, timeout: 5s }",
    "- { name: rpc, kind: rpc, transports: [local], payloads: [200B], iterations: 200, warmup: 0, timeout: 5s }",
    "- { name: req-rep, kind: req-rep, transports: [local], payloads: [1B], iterations: 200, warmup: 0, timeout: 5s }",
);

/// A CI runner's TMPDIR can be long; a socket's name holds 107 bytes. Cells that bind
/// sockets put them where the names fit, and leave nothing behind in either place.
#[test]
fn a_temporary_directory_too_long_for_socket_names_still_runs_socket_cells() {
    let s = Scratch::new("hostile-long-tmpdir", SOCKET_MATRIX);
    let tmp = s.path(&format!("tmp-{}", "t".repeat(90)));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut command = s.command(&["run", "--out", "out"]);
    let out = command.env("TMPDIR", &tmp).output().unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("4 cells: 4 passed"), "{all}");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}
