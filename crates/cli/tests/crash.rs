//! `kill -9` in the middle of a run: of the measuring process, and in some rounds of its
//! peer first. No process of the killed run is left (peers die with their parent), and
//! the next run removes everything the killed ones left in /dev/shm and the temporary
//! directory (once it is over a second old), naming what it removed. A logging cell
//! killed while it writes leaves nothing at all: its file has no name.

mod common;

use common::{text, Scratch};
use ipc_matrix_spec::splitmix64;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// Cells long enough to be killed inside (a logging cell, whose file lives for the whole
/// cell, then echo over shared memory in both wake modes, a local socket and TCP), and one
/// quick cell for the run that comes after.
const MATRIX: &str = r#"
version: 1
targets:
  - { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }
profiles:
  quick: { description: test }
scenarios:
  - { name: logging, kind: logging, transports: [file], sinks: [write-per-line], payloads: [64B], iterations: 300000, warmup: 0, budget: 30s }
  - { name: echo, kind: echo, transports: [shm, local, tcp], wake: [blocking, busy-poll], payloads: [200B], iterations: 30000, warmup: 10, timeout: 5s }
  - { name: after, kind: echo, transports: [tcp], payloads: [200B], iterations: 100, warmup: 0, timeout: 5s }
"#;
const KILLED_CELLS: &str = "/^(logging|echo)::/";
const ROUNDS: u64 = 5;
const SEED: u64 = 0x6b69_6c6c_2d39;
/// The sweep leaves artefacts younger than a second alone (their creator may not have
/// locked them yet): the next run starts later than that.
const SWEEP_GRACE: Duration = Duration::from_millis(1_200);

/// Pids of the processes of `group` (a process group), zombies left out.
fn live_members(group: u32) -> Vec<u32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() != Some(&"Z") && fields.get(2) == Some(&group.to_string().as_str()) {
            members.push(pid);
        }
    }
    members
}

/// The children of `pid`, from every thread's children list.
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
                found.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    found
}

fn sigkill(pid: u32) {
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
}

/// Artefacts (`ipc-matrix.<pid>.…`) in /dev/shm and the temporary directory made by one
/// of `pids`.
fn artefacts_of(pids: &BTreeSet<u32>) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in [Path::new("/dev/shm").to_path_buf(), std::env::temp_dir()] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let creator = name
                .strip_prefix(ipc_matrix_transport::ARTIFACT_PREFIX)
                .and_then(|rest| rest.split('.').next())
                .and_then(|pid| pid.parse::<u32>().ok());
            if creator.is_some_and(|pid| pids.contains(&pid)) {
                found.push(entry.path());
            }
        }
    }
    found
}

/// The lines `child` prints, as they come.
fn lines_of(child: &mut Child) -> Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (send, receive) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

#[test]
fn a_killed_run_leaves_no_process_and_the_next_run_removes_its_leftovers() {
    let s = Scratch::new("crash", MATRIX);
    let mut rng = SEED;
    let mut killed = BTreeSet::new();
    let mut peers_killed = 0;
    // What each killed run left; a later round's run removes it, or the last run.
    let mut left_behind = Vec::new();
    for round in 0..ROUNDS {
        let mut run = s
            .command(&["run", "--out", "out", "--filter", KILLED_CELLS])
            // Its own process group: every process of the run, found after the kill
            // whoever its parent is by then.
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = run.id();
        let lines = lines_of(&mut run);
        // Odd rounds kill the peer of an echo cell first (once the logging cell, which has
        // none, is over), then the measuring process. Round 0 kills the measuring process
        // while its logging cell writes (which must leave nothing); round 2 while it has a
        // peer, which must then die with it; the others at any moment.
        let kill_peer = round % 2 == 1;
        let with_peer = kill_peer || round == 2;
        let started = Instant::now();
        if with_peer {
            // The first cell's verdict line (the floors' line comes before it).
            let deadline = Instant::now() + Duration::from_secs(10);
            let first_cell_ended = std::iter::from_fn(|| {
                let left = deadline.saturating_duration_since(Instant::now());
                lines.recv_timeout(left).ok()
            })
            .any(|line| line.starts_with("PASS ") || line.starts_with("FAIL "));
            assert!(
                first_cell_ended,
                "round {round}: the first cell did not end"
            );
        }
        if round == 0 {
            let deadline = Instant::now() + Duration::from_secs(10);
            while open_files_under(pid, &std::env::temp_dir()).is_empty()
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        std::thread::sleep(Duration::from_millis(match round {
            0 => splitmix64(&mut rng) % 100,
            _ if with_peer => 50 + splitmix64(&mut rng) % 550,
            _ => 100 + splitmix64(&mut rng) % 1_400,
        }));
        let mut peers = Vec::new();
        if with_peer {
            // Between two cells there is no peer for a moment.
            let deadline = Instant::now() + Duration::from_secs(2);
            while peers.is_empty() && Instant::now() < deadline {
                peers = children(pid);
                std::thread::sleep(Duration::from_millis(2));
            }
            assert!(!peers.is_empty(), "round {round}: no peer to be found");
        }
        let moment = started.elapsed();
        assert!(
            run.try_wait().unwrap().is_none(),
            "round {round}: the run ended before {moment:?}; give its cells more to do"
        );
        killed.extend(peers.iter().copied());
        if kill_peer {
            peers.iter().copied().for_each(sigkill);
            peers_killed += 1;
            // A dead peer is noticed: its cell ends (fails) soon, and the run goes on.
            let deadline = Instant::now() + Duration::from_secs(10);
            let ended = std::iter::from_fn(|| {
                lines
                    .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                    .ok()
            })
            .find(|line| line.starts_with("FAIL") || line.starts_with("PASS"));
            assert!(
                ended.is_some(),
                "round {round}: the cell whose peer was killed did not end"
            );
            assert!(run.try_wait().unwrap().is_none(), "round {round}");
        }
        sigkill(pid);
        killed.insert(pid);
        run.wait().unwrap();
        drop(lines);
        let mut of_this_run: BTreeSet<u32> = peers.iter().copied().collect();
        of_this_run.insert(pid);
        let left = artefacts_of(&of_this_run);
        eprintln!(
            "round {round}: killed {} at {moment:?}{}; it left {left:?}",
            if kill_peer {
                "a peer, then the run"
            } else {
                "the run"
            },
            if peers.is_empty() {
                String::new()
            } else {
                format!(" (peer {peers:?})")
            },
        );
        if round == 0 {
            assert_eq!(
                left,
                Vec::<PathBuf>::new(),
                "a killed logging cell left files"
            );
        }
        left_behind.extend(left);

        // No process of the run is left: its peer dies with it (PR_SET_PDEATHSIG).
        assert_all_gone(
            pid,
            &format!("round {round} (killed at {moment:?}): processes of the killed run are left"),
        );
        std::thread::sleep(SWEEP_GRACE);
    }
    assert!(peers_killed > 0, "no round found a peer to kill");

    // What a killed creator leaves when the crash comes between creating a private
    // directory and removing it (its lock released with it, over a second ago): the next
    // run removes it too.
    let planted = std::env::temp_dir().join(format!(
        "{}{}.999999.0",
        ipc_matrix_transport::ARTIFACT_PREFIX,
        killed.first().unwrap()
    ));
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(planted.join(".alive"), b"").unwrap();
    std::thread::sleep(SWEEP_GRACE);
    left_behind.push(planted);
    // What the killed runs left is removed by the next run, which names it.
    let left = artefacts_of(&killed);
    let next = s.run(&["run", "--out", "out", "--filter", "/^after::/"]);
    assert_eq!(next.status.code(), Some(0), "{}", text(&next));
    for path in &left {
        assert!(
            text(&next).contains(&format!(
                "removed a leftover of a crashed run: {}",
                path.display()
            )),
            "{} was not removed:\n{}",
            path.display(),
            text(&next)
        );
    }
    assert_eq!(
        artefacts_of(&killed),
        Vec::<PathBuf>::new(),
        "left by the killed runs after the next one"
    );
    eprintln!(
        "{ROUNDS} rounds, {peers_killed} with a peer killed; the killed runs left {}",
        left_behind.len()
    );
}

/// Logging cells long enough to be killed while they write, one per sink.
const LOGGING_MATRIX: &str = r#"
version: 1
targets:
  - { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }
profiles:
  quick: { description: test }
scenarios:
  - { name: logging, kind: logging, transports: [file], sinks: [buffered, write-per-line, tracing-blocking, tracing-non-blocking], payloads: [64B], iterations: 3000000, warmup: 0, budget: 60s }
"#;

/// The files that process `pid` holds open under `dir` (a file without a name shows as
/// `<dir>/#<inode> (deleted)`), with their sizes.
fn open_files_under(pid: u32, dir: &Path) -> Vec<(PathBuf, u64)> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| {
            let target = std::fs::read_link(fd.path()).ok()?;
            let size = std::fs::metadata(fd.path()).ok()?.len();
            (target.starts_with(dir) && std::fs::metadata(fd.path()).ok()?.is_file())
                .then_some((target, size))
        })
        .collect()
}

fn listing(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_logging_cell_killed_while_it_writes_leaves_nothing_on_disk() {
    let s = Scratch::new("crash-logging", LOGGING_MATRIX);
    // The run's temporary directory is a folder of this test alone, so its listing before
    // and after is exact.
    let tmp = s.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let before = listing(&tmp);
    let mut rng = SEED ^ 0x6c6f67;
    for sink in [
        "buffered",
        "write-per-line",
        "tracing-blocking",
        "tracing-non-blocking",
    ] {
        let mut run = s
            .command(&["run", "--out", "out", "--filter", &format!("::{sink}::")])
            .env("TMPDIR", &tmp)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = run.id();
        // Mid-write: the log file is open and holds lines.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut writing = Vec::new();
        while writing.is_empty() && Instant::now() < deadline {
            assert!(
                run.try_wait().unwrap().is_none(),
                "{sink}: the run ended before its log file was seen"
            );
            writing = open_files_under(pid, &tmp);
            writing.retain(|(_, size)| *size > 0);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!writing.is_empty(), "{sink}: no log file being written");
        std::thread::sleep(Duration::from_millis(splitmix64(&mut rng) % 20));
        let still = open_files_under(pid, &tmp);
        sigkill(pid);
        let status = run.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "{sink}: the run ended by itself before it was killed; give it more lines"
        );
        let after = listing(&tmp);
        eprintln!("{sink}: killed while writing {writing:?} (then {still:?}); left {after:?}");
        assert_eq!(
            after, before,
            "{sink}: the killed logging cell left files in its temporary directory"
        );
    }
}

#[test]
fn the_next_run_removes_temporary_files_of_crashed_writes_and_keeps_the_rest() {
    let s = Scratch::new("crash-tmp", MATRIX);
    let dir = ipc_matrix_results::run_dir(&s.path("out"), &common::leg(), "quick");
    let cells = dir.join("cells");
    std::fs::create_dir_all(&cells).unwrap();
    let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    let plant = |path: &Path, age: Option<std::time::SystemTime>| {
        let file = std::fs::File::create(path).unwrap();
        std::io::Write::write_all(&mut &file, b"{\"half a resu").unwrap();
        if let Some(when) = age {
            file.set_modified(when).unwrap();
        }
        file
    };
    // What a writer killed mid-write leaves (no lock held any more): removed.
    let stale = [
        cells.join("echo.tcp.200B.json.tmp4194301"),
        dir.join("report.md.tmp17"),
        cells.join(".write-check-12.tmp12"),
    ];
    for path in &stale {
        plant(path, Some(an_hour_ago));
    }
    // Kept: other names, a temporary file whose writer is alive (it holds the lock), and
    // one written just now (its writer may not have locked it yet).
    let kept = [
        cells.join("notes.tmp"),
        cells.join("echo.tcp.200B.json.tmpx1"),
        dir.join("my.tmp12.txt"),
        dir.join("keep.tmpfile"),
    ];
    for path in &kept {
        plant(path, Some(an_hour_ago));
    }
    let writing = dir.join("report.html.tmp4194302");
    let held = plant(&writing, Some(an_hour_ago));
    held.try_lock().unwrap();
    let fresh = cells.join("after.tcp.200B.json.tmp4194303");
    plant(&fresh, None);

    let run = s.run(&["run", "--out", "out", "--filter", "/^after::/"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    for path in &stale {
        assert!(
            !path.exists(),
            "{} was left:\n{}",
            path.display(),
            text(&run)
        );
        assert!(
            text(&run).contains(&format!(
                "removed a temporary file of a crashed write: {}",
                path.strip_prefix(&s.0).unwrap().display()
            )),
            "{} was not named:\n{}",
            path.display(),
            text(&run)
        );
    }
    for path in kept.iter().chain([&writing, &fresh]) {
        assert!(
            path.exists(),
            "{} was removed:\n{}",
            path.display(),
            text(&run)
        );
    }
    drop(held);
}

/// Two long iceoryx2 cells, blocking then busy-poll, and a quick cell for the run after.
const ICEORYX2_MATRIX: &str = test_matrix!(
    "- { name: echo, kind: echo, transports: [iceoryx2], wake: [blocking, busy-poll], payloads: [200B], iterations: 3000000, warmup: 10, timeout: 5s }",
    "- { name: after, kind: echo, transports: [tcp], payloads: [200B], iterations: 100, warmup: 0, timeout: 5s }",
);

/// Waits up to 5 s for every process of the process group `pid` leads to be gone, then
/// asserts that none is left (`what`: the failure's message).
fn assert_all_gone(pid: u32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_members(pid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(live_members(pid), Vec::<u32>::new(), "{what}");
}

/// The iceoryx2 root directory and /dev/shm prefix of the channel peer `pid` serves, read
/// from its command line (`serve --config <json>`, whose address names both).
fn iceoryx2_files_of_peer(pid: u32) -> Option<(PathBuf, String)> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let text = String::from_utf8_lossy(&cmdline);
    let config = text.split('\0').skip_while(|a| *a != "--config").nth(1)?;
    let config: serde_json::Value = serde_json::from_str(config).ok()?;
    let address = &config["address"];
    if address["transport"] != "iceoryx2" {
        return None;
    }
    Some((
        PathBuf::from(address["root"].as_str()?),
        address["prefix"].as_str()?.to_string(),
    ))
}

/// What is left of an iceoryx2 channel: its root directory and its /dev/shm names.
fn iceoryx2_leftovers((root, prefix): &(PathBuf, String)) -> Vec<PathBuf> {
    let mut left: Vec<PathBuf> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix.as_str()))
        .map(|e| e.path())
        .collect();
    if root.exists() {
        left.push(root.clone());
    }
    left.sort();
    left
}

/// The peer of the cell that runs now, once it serves a channel other than `not`; with
/// the channel's files.
fn next_iceoryx2_peer(run: u32, not: Option<&str>) -> (u32, (PathBuf, String)) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for peer in children(run) {
            if let Some(files) = iceoryx2_files_of_peer(peer) {
                if Some(files.1.as_str()) != not {
                    return (peer, files);
                }
            }
        }
        assert!(Instant::now() < deadline, "no iceoryx2 peer of run {run}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `kill -9` of an iceoryx2 peer mid-cell: the measuring side notices, fails the cell and,
/// dropping the channel, removes everything of it at once (iceoryx2's cleanup of the dead
/// node, then the prefix's names left in /dev/shm, then the root). `kill -9` of the
/// measuring process mid-cell (its peer dies with it): the channel's root directory and
/// its /dev/shm names are left, and the next run removes them all, naming each.
#[test]
fn a_killed_iceoryx2_cell_leaves_nothing_once_the_next_run_starts() {
    let s = Scratch::new("crash-iceoryx2", ICEORYX2_MATRIX);
    let mut run = s
        .command(&["run", "--out", "out", "--filter", "/^echo::/"])
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = run.id();
    let lines = lines_of(&mut run);

    // The first cell (blocking): its peer is killed mid-run.
    let (peer, first) = next_iceoryx2_peer(pid, None);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !iceoryx2_leftovers(&first).is_empty(),
        "a running iceoryx2 cell has no files under {first:?}"
    );
    sigkill(peer);
    let deadline = Instant::now() + Duration::from_secs(10);
    let verdict = std::iter::from_fn(|| {
        lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .ok()
    })
    .find(|line| line.starts_with("FAIL") || line.starts_with("PASS"));
    let verdict = verdict.expect("the cell whose peer was killed did not end");
    assert!(
        verdict.starts_with("FAIL") && verdict.contains("echo::iceoryx2-blocking::200B"),
        "{verdict}"
    );
    assert_eq!(
        iceoryx2_leftovers(&first),
        Vec::<PathBuf>::new(),
        "the cell whose peer was killed left files behind"
    );

    // The second cell (busy-poll): the measuring process is killed mid-run.
    let (_, second) = next_iceoryx2_peer(pid, Some(&first.1));
    std::thread::sleep(Duration::from_millis(300));
    sigkill(pid);
    run.wait().unwrap();
    drop(lines);
    let left = iceoryx2_leftovers(&second);
    assert!(
        left.iter().any(|p| p.starts_with("/dev/shm")) && left.contains(&second.0),
        "the killed run left no segment and no root to remove: {left:?}"
    );
    assert_all_gone(pid, "processes of the killed run are left");
    std::thread::sleep(SWEEP_GRACE);

    // What is left when the next run starts is what it must remove and name: the sweep of
    // another test's process running beside this one may have removed some or all of it
    // first (seen under QEMU); that nothing is left afterwards is asserted below either way.
    let left = iceoryx2_leftovers(&second);
    let next = s.run(&["run", "--out", "out", "--filter", "/^after::/"]);
    assert_eq!(next.status.code(), Some(0), "{}", text(&next));
    for path in &left {
        assert!(
            text(&next).contains(&format!(
                "removed a leftover of a crashed run: {}",
                path.display()
            )),
            "{} was not named as removed:\n{}",
            path.display(),
            text(&next)
        );
    }
    assert_eq!(
        iceoryx2_leftovers(&second),
        Vec::<PathBuf>::new(),
        "left by the killed run after the next one started"
    );
    eprintln!("the killed run left {left:?}; the next run removed them");
}
