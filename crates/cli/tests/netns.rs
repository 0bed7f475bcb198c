//! Cells on a second host (`host: netns`): without CAP_NET_ADMIN they are skipped, each
//! named with what it needs, never passed; a run killed (`kill -9`) while such a cell
//! runs leaves its namespace and veth link, and the next run removes them, naming them;
//! a link shaped by netem delays every packet, or is skipped where the kernel has no
//! `sch_netem`; a udp-load cell counts as many IP fragments a datagram as its MTU makes.
//!
//! Most start `ipc-matrix run` as a run of its own (through QEMU when the suite runs
//! emulated); one calls the sweep itself, on a namespace whose life lock it holds.
//! Without what a test needs here (CAP_NET_ADMIN and `ip`; util-linux's
//! `setpriv` to drop the capability) it is listed as ignored, saying so.

mod common;

use common::{text, Scratch};
use ipc_matrix_spec::Spec;
use libtest_mimic::{Arguments, Failed, Trial};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// An echo across the link long enough to be killed inside, and a quick loopback cell
/// for the run that comes after.
const MATRIX: &str = test_matrix!(
    "- { name: echo-netns, kind: echo, host: netns, transports: [tcp, udp], payloads: [200B], iterations: 300000, warmup: 10, timeout: 5s }",
    "- { name: after, kind: echo, transports: [tcp], payloads: [200B], iterations: 100, warmup: 0, timeout: 5s }",
);
/// The UDP maximum across links of two MTUs: 45 IP fragments at 1500 (1480 bytes of
/// each packet carry the 65515 of the datagram), 8 at 9000 (8976).
const FRAGMENT_MATRIX: &str = test_matrix!(
    "- { name: mtu-1500, kind: udp-load, host: netns, mtu: 1500, transports: [udp], clients: [1], server_threads: [1], payloads: [65507B], duration: 300ms, iterations: 200, warmup: 2, timeout: 2s, max_loss: 0.5 }",
    "- { name: mtu-9000, kind: udp-load, host: netns, mtu: 9000, transports: [udp], clients: [1], server_threads: [1], payloads: [65507B], duration: 300ms, iterations: 200, warmup: 2, timeout: 2s, max_loss: 0.5 }",
);
/// An echo across a link that netem delays by 1 ms each way.
const SHAPED_MATRIX: &str = test_matrix!(
    "- { name: shaped, kind: echo, host: netns, link: { delay: 1ms }, transports: [tcp], payloads: [200B], iterations: 50, warmup: 5, timeout: 5s }",
);
/// Drops CAP_NET_ADMIN from every set of the command it runs, and from its children's.
const WITHOUT_NET_ADMIN: [&str; 4] = [
    "setpriv",
    "--inh-caps=-net_admin",
    "--ambient-caps=-net_admin",
    "--bounding-set=-net_admin",
];

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    let netns_need = netns_need();
    let can_drop = Command::new(WITHOUT_NET_ADMIN[0])
        .args(&WITHOUT_NET_ADMIN[1..])
        .arg("true")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let gated = Trial::test(
        "netns::without-cap-net-admin::cells-are-skipped",
        cells_are_skipped_without_net_admin,
    );
    let crash = Trial::test(
        "netns::kill-9::next-run-removes-the-link",
        the_next_run_removes_a_killed_runs_link,
    );
    let shaped = Trial::test(
        "netns::shaped-link::delayed-or-skipped-without-netem",
        a_shaped_link_delays_or_is_skipped,
    );
    let held = Trial::test(
        "netns::sweep::a-locked-namespace-is-left-alone",
        a_locked_namespace_is_left_alone,
    );
    let fragments = Trial::test(
        "netns::udp-load::fragments-follow-the-mtu",
        fragments_follow_the_mtu,
    );
    let trials = vec![
        match &netns_need {
            None => fragments,
            Some(need) => fragments.with_ignored_flag(true).with_kind(need.clone()),
        },
        match &netns_need {
            None => held,
            Some(need) => held.with_ignored_flag(true).with_kind(need.clone()),
        },
        match &netns_need {
            None => shaped,
            Some(need) => shaped.with_ignored_flag(true).with_kind(need.clone()),
        },
        match can_drop {
            true => gated,
            false => gated.with_ignored_flag(true).with_kind("needs setpriv"),
        },
        match netns_need {
            None => crash,
            Some(need) => crash.with_ignored_flag(true).with_kind(need),
        },
    ];
    libtest_mimic::run(&args, trials).exit_code()
}

/// What this machine lacks to run the netns cells of `matrix`, if anything.
fn need_of(matrix: &str) -> Option<String> {
    let scratch = Scratch::new("netns-need", matrix);
    let cells = Spec::load(&scratch.path("matrix.yaml"))
        .expect("the test matrix loads")
        .cells("quick")
        .expect("the test matrix has the profile quick");
    cells.iter().find_map(ipc_matrix_scenario::unmet_need)
}

fn netns_need() -> Option<String> {
    need_of(MATRIX)
}

/// Where the kernel has `sch_netem`, the link's delay shows in every round trip (two
/// crossings of 1 ms); where it has not, the cell is skipped saying so.
fn a_shaped_link_delays_or_is_skipped() -> Result<(), Failed> {
    let s = Scratch::new("netns-shaped", SHAPED_MATRIX);
    let ran = s.run(&["run", "--out", "out", "--message-format", "json"]);
    let out = text(&ran);
    // Its one cell skipped, the run ran nothing: 4, never a pass.
    let expected = match need_of(SHAPED_MATRIX) {
        Some(_) => Some(4),
        None => Some(0),
    };
    if ran.status.code() != expected {
        return Err(format!(
            "the run exited {:?}, not {expected:?}:\n{out}",
            ran.status.code()
        )
        .into());
    }
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&ran.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let of = |kind: &str| events.iter().find(|e| e["type"] == kind);
    match need_of(SHAPED_MATRIX) {
        Some(need) => {
            let skipped = of("cell-skipped").ok_or_else(|| format!("not skipped:\n{out}"))?;
            if need != "needs sch_netem" || skipped["reason"] != "needs sch_netem" {
                return Err(format!("skipped for {need:?}: {skipped}").into());
            }
            if of("cell-finished").is_some() {
                return Err(format!("a skipped cell ran:\n{out}").into());
            }
            println!("no sch_netem here: {skipped}");
        }
        None => {
            let finished = of("cell-finished").ok_or_else(|| format!("no cell ran:\n{out}"))?;
            let p50 = finished["p50_ns"].as_u64().unwrap_or(0);
            if finished["passed"] != true || p50 < 2_000_000 {
                return Err(format!("a 1 ms link each way, yet: {finished}").into());
            }
            println!("p50 across the delayed link: {p50} ns");
        }
    }
    Ok(())
}

fn cells_are_skipped_without_net_admin() -> Result<(), Failed> {
    let s = Scratch::new("netns-gated", MATRIX);
    let without = |args: &[&str]| {
        let inner = s.command(args);
        let mut command = Command::new(WITHOUT_NET_ADMIN[0]);
        command
            .args(&WITHOUT_NET_ADMIN[1..])
            .arg(inner.get_program())
            .args(inner.get_args())
            .current_dir(&s.0)
            .env_remove("GITHUB_ACTIONS")
            .env_remove(ipc_matrix_results::NEXTEST_RUN_ID_ENV);
        command.output()
    };
    let ran = without(&["run", "--out", "out", "--filter", "echo-netns"])?;
    let out = text(&ran);
    // Every selected cell skipped: the run ran nothing, which is no pass.
    if ran.status.code() != Some(4)
        || !out.contains("none of the 2 selected cells can run on this machine")
    {
        return Err(format!("a run of skipped cells only: {out}").into());
    }
    for transport in ["tcp", "udp"] {
        let line = format!("echo-netns::{transport}::200B: needs CAP_NET_ADMIN");
        if !out
            .lines()
            .any(|l| l.starts_with("SKIP") && l.ends_with(&line))
        {
            return Err(format!("no SKIP line ending `{line}`:\n{out}").into());
        }
    }
    if !out.contains("0 passed, 0 failed, 2 skipped") || out.contains("PASS") {
        return Err(format!("skipped cells were counted otherwise:\n{out}").into());
    }
    let stored = std::fs::read_dir(s.path("out"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|leg| {
            leg.path()
                .join("quick/cells")
                .read_dir()
                .is_ok_and(|mut d| d.next().is_some())
        });
    if stored {
        return Err("a skipped cell stored a result".into());
    }
    // The list says it too: a note on stderr beside the ids, `unmet_need` in JSON.
    let listed = without(&["list", "--filter", "echo-netns"])?;
    let note = "note: 2 cells are skipped here, each needs CAP_NET_ADMIN: echo-netns::tcp::200B, echo-netns::udp::200B";
    if !String::from_utf8_lossy(&listed.stderr).contains(note)
        || String::from_utf8_lossy(&listed.stdout).lines().count() != 2
    {
        return Err(format!("list: {}", text(&listed)).into());
    }
    let listed = without(&["list", "--message-format", "json", "--filter", "echo-netns"])?;
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    if lines.len() != 2
        || lines
            .iter()
            .any(|l| l["unmet_need"] != "needs CAP_NET_ADMIN")
    {
        return Err(format!("list: {lines:?}").into());
    }
    println!("{out}");
    Ok(())
}

/// Namespaces and host-side veth ends of links made by process `pid`.
fn links_of(pid: u32) -> Vec<PathBuf> {
    let namespace = PathBuf::from(format!("/run/netns/ipcm-{pid}-0"));
    let veth = PathBuf::from(format!("/sys/class/net/ipcm{pid}h0"));
    [namespace, veth]
        .into_iter()
        .filter(|p| p.exists())
        .collect()
}

fn sigkill(pid: u32) {
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
}

/// How many times a killed run is tried when another test's run (nextest runs them in
/// parallel, each sweeping as it starts) removes the leftovers before the next run does.
const ATTEMPTS: u32 = 3;

fn the_next_run_removes_a_killed_runs_link() -> Result<(), Failed> {
    let s = Scratch::new("netns-crash", MATRIX);
    for attempt in 1..=ATTEMPTS {
        match kill_then_sweep(&s)? {
            Swept::AllNamed => return Ok(()),
            Swept::RacedBy(gone) => {
                println!("attempt {attempt}: another process removed {gone:?} first");
            }
        }
    }
    Err(format!("in {ATTEMPTS} attempts another process always removed the leftovers first").into())
}

/// What the next run did with a killed run's link.
enum Swept {
    /// It removed every piece and named it.
    AllNamed,
    /// Everything is gone, but these went before the next run could remove them.
    RacedBy(Vec<PathBuf>),
}

/// Kills a run inside its netns cell, checks what it left, then runs the next run.
fn kill_then_sweep(s: &Scratch) -> Result<Swept, Failed> {
    let mut run = s
        .command(&["run", "--out", "out", "--filter", "echo-netns::tcp"])
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = run.id();
    let stdout = run.stdout.take().ok_or("no stdout")?;
    // Drained, so the run never blocks on a full pipe.
    std::thread::spawn(move || BufReader::new(stdout).lines().map_while(Result::ok).count());
    // The cell runs once its namespace holds the peer.
    let deadline = Instant::now() + Duration::from_secs(60);
    let namespace = format!("ipcm-{pid}-0");
    let peer = loop {
        let pids = Command::new("ip")
            .args(["netns", "pids", &namespace])
            .stderr(Stdio::null())
            .output()?;
        let found = String::from_utf8_lossy(&pids.stdout)
            .split_whitespace()
            .find_map(|p| p.parse::<u32>().ok());
        if let Some(peer) = found {
            break peer;
        }
        if Instant::now() >= deadline || run.try_wait()?.is_some() {
            sigkill(pid);
            let _ = run.wait();
            return Err(format!("no peer ran in namespace {namespace} within 60 s").into());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    std::thread::sleep(Duration::from_millis(200));
    if run.try_wait()?.is_some() {
        return Err("the run ended before it was killed; give its cell more to do".into());
    }
    sigkill(pid);
    run.wait()?;
    // Its peer dies with it (PR_SET_PDEATHSIG), inside the namespace too.
    let deadline = Instant::now() + Duration::from_secs(10);
    while ipc_matrix_transport::process_alive(peer) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    if ipc_matrix_transport::process_alive(peer) {
        return Err(format!("peer {peer} outlived its killed run").into());
    }
    let left = links_of(pid);
    println!("the killed run {pid} left {left:?}");
    if left.is_empty() {
        // Killed in its netns cell, it left a link: gone already, another run took it.
        return Ok(Swept::RacedBy(links_of(pid)));
    }
    // Nothing may be left after the next run, which names what it removed; another
    // test's run may remove some first (then the caller tries again).
    let next = s.run(&["run", "--out", "out", "--filter", "/^after::/"]);
    let out = text(&next);
    if next.status.code() != Some(0) {
        return Err(format!("the next run failed:\n{out}").into());
    }
    if !links_of(pid).is_empty() {
        return Err(format!("left after the next run: {:?}\n{out}", links_of(pid)).into());
    }
    let unnamed: Vec<PathBuf> = left
        .iter()
        .filter(|p| {
            !out.contains(&format!(
                "removed a leftover of a crashed run: {}",
                p.display()
            ))
        })
        .cloned()
        .collect();
    println!(
        "the next run named {} of {}:\n{out}",
        left.len() - unnamed.len(),
        left.len()
    );
    Ok(match unnamed.is_empty() {
        true => Swept::AllNamed,
        false => Swept::RacedBy(unnamed),
    })
}

/// A namespace named for a pid that is not running here, as one made in another PID
/// namespace is: left alone while its life lock is held, removed (and named) once not.
fn a_locked_namespace_is_left_alone() -> Result<(), Failed> {
    // A pid that ran and is gone.
    let mut gone = Command::new("true").spawn()?;
    let pid = gone.id();
    gone.wait()?;
    let name = format!("ipcm-{pid}-zz");
    let file = PathBuf::from(format!("/run/netns/{name}"));
    let made = Command::new("ip").args(["netns", "add", &name]).status()?;
    if !made.success() {
        return Err(format!("`ip netns add {name}` failed").into());
    }
    let lock = std::fs::File::open(&file)?;
    lock.lock_shared()?;
    let removed = ipc_matrix_scenario::remove_stale_links();
    let kept = file.exists();
    drop(lock);
    if !kept || removed.contains(&file) {
        let _ = Command::new("ip").args(["netns", "del", &name]).status();
        return Err(format!("{name} was removed while locked: {removed:?}").into());
    }
    let removed = ipc_matrix_scenario::remove_stale_links();
    // Another test's run may sweep it first; either way it must be gone.
    if file.exists() {
        let _ = Command::new("ip").args(["netns", "del", &name]).status();
        return Err(format!("{name} was left once its lock was free: {removed:?}").into());
    }
    println!("kept while locked, then removed: {removed:?}");
    Ok(())
}

/// Every request crosses into the namespace in as many fragments as the link's MTU
/// makes, every echo leaves in as many: the counters are the second host's own. Each
/// cell's link is gone when the run ends.
fn fragments_follow_the_mtu() -> Result<(), Failed> {
    let s = Scratch::new("netns-fragments", FRAGMENT_MATRIX);
    let child = s
        .command(&["run", "--out", "out"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let ran = child.wait_with_output()?;
    let out = text(&ran);
    if ran.status.code() != Some(0) {
        return Err(format!("the run failed:\n{out}").into());
    }
    // Each cell's link went with the cell.
    let names_of_run = |dir: &str, prefix: String| -> Vec<String> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(&prefix))
            .collect()
    };
    let left = [
        names_of_run("/run/netns", format!("ipcm-{pid}-")),
        names_of_run("/sys/class/net", format!("ipcm{pid}h")),
    ]
    .concat();
    if !left.is_empty() {
        return Err(format!("the run {pid} ended and left {left:?}").into());
    }
    let cells = s.path("out").join(common::leg()).join("quick/cells");
    for (id, per_datagram) in [
        ("mtu-1500::c1-s1::udp::65507B", 45),
        ("mtu-9000::c1-s1::udp::65507B", 8),
    ] {
        let file = cells.join(ipc_matrix_results::cell_file_name(id));
        let result: serde_json::Value = serde_json::from_slice(&std::fs::read(&file)?)?;
        let load = &result["load"];
        let f = &load["fragmentation"];
        let count = |key: &str| f[key].as_u64().unwrap_or(0);
        let received = load["server_received"].as_u64().unwrap_or(0);
        // Each request the peer received was reassembled from exactly that many
        // fragments, and each echo it sent was cut into as many. The counters are read
        // as the load ends: the one request of the one client may be mid-way then.
        let whole = |fragments: u64, datagrams: u64| {
            (per_datagram * datagrams..per_datagram * (datagrams + 1)).contains(&fragments)
        };
        if count("reassembled") + 1 < received
            || !whole(count("fragments_received"), count("reassembled"))
            || !whole(count("fragments_created"), count("fragmented"))
            || count("fragmented") == 0
        {
            return Err(
                format!("{id}: {per_datagram} fragments a datagram expected: {load}").into(),
            );
        }
        println!("{id}: {f}");
    }
    Ok(())
}
