//! Starting and stopping the peer process. Its stderr is kept for failure messages; it is
//! killed when dropped, so no failure path leaves it running.

use crate::external::{ExternalPeerConfig, ResolvedCommand};
use crate::peer::{PeerConfig, SERVE_ARG};
use ipc_matrix_transport::FORK_TO_EXEC_LIMIT;
use std::io::{self, Read};
use std::os::fd::RawFd;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A command prefix that runs the peer binary, e.g. `qemu-aarch64 -L /usr/aarch64-linux-gnu`
/// for an emulated target; empty or unset runs it directly.
pub const PEER_RUNNER_ENV: &str = "IPC_MATRIX_PEER_RUNNER";
/// How long a peer may take to start and connect, unless a run says otherwise
/// (`RunOptions::setup_timeout`).
pub(crate) const SETUP_ALLOWANCE: Duration = Duration::from_secs(30);
/// How long a peer may take to exit after its goodbye, in every kind: as long as it may
/// take to start. Its exit is not measured, and under an emulator and load it can be
/// slow: an aarch64 peer freeing a 6.5 MB cell's shared memory under QEMU, with two CPU
/// hogs running, exited cleanly after more than 5 s.
pub(crate) const GOODBYE_WITHIN: Duration = SETUP_ALLOWANCE;
/// Of the peer's stderr, the first and the last this many bytes are kept: how it started
/// and how it ended.
const STDERR_HEAD: usize = 4 * 1024;
const STDERR_TAIL: usize = 12 * 1024;
/// How long a stopped peer's stderr may take to reach its end.
const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// How a peer process is started.
struct Launch<'a> {
    program: &'a Path,
    args: &'a [String],
    /// Through the runner prefix ([`PEER_RUNNER_ENV`]), when one is set.
    through_runner: bool,
    /// Descriptors of ours the peer inherits.
    inherited: Vec<RawFd>,
    /// The CPU the process is pinned to before it runs.
    cpu: Option<usize>,
    /// The folder it runs in; ours when `None`.
    dir: Option<&'a Path>,
    /// Words that start it elsewhere (`ip netns exec <ns>`: a second host); empty here.
    place: &'a [String],
}

/// A CPU set of one CPU.
fn cpu_set(cpu: usize) -> libc::cpu_set_t {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET stays within it (checked).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu < libc::CPU_SETSIZE as usize {
        // SAFETY: `cpu` is below CPU_SETSIZE, so CPU_SET writes inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    set
}

pub struct PeerProcess {
    child: Child,
    /// The thread that reads the peer's stderr into `kept`.
    stderr: Option<JoinHandle<()>>,
    kept: Arc<Mutex<KeptStderr>>,
    status: Option<ExitStatus>,
}

impl PeerProcess {
    /// Starts our own peer: `program serve --config <config>`, through the runner prefix
    /// ([`PEER_RUNNER_ENV`]) when one is set; after `place` (a second host's `ip netns exec`).
    pub fn spawn(program: &Path, config: &PeerConfig, place: &[String]) -> io::Result<Self> {
        let json = serde_json::to_string(config).map_err(io::Error::other)?;
        let launch = Launch {
            program,
            args: &[],
            through_runner: true,
            inherited: config.address.inherited_fds(),
            // Our peer pins itself, after reading its configuration.
            cpu: None,
            dir: None,
            place,
        };
        Self::start(launch, &json)
    }

    /// Starts a peer the user brings: `<command...> serve --config <config>`, in `dir`
    /// (matrix.yaml's folder, which its relative arguments are written from). An ELF of
    /// this build's architecture goes through the runner prefix (QEMU); it is pinned to
    /// `cpu` before it runs, as our own peer pins itself.
    pub fn spawn_external(
        command: &ResolvedCommand,
        config: &ExternalPeerConfig,
        (cpu, dir): (Option<usize>, &Path),
        place: &[String],
    ) -> io::Result<Self> {
        let json = serde_json::to_string(config).map_err(io::Error::other)?;
        let launch = Launch {
            program: &command.program,
            args: &command.args,
            through_runner: command.for_this_target,
            inherited: Vec::new(),
            cpu,
            dir: Some(dir),
            place,
        };
        Self::start(launch, &json)
    }

    fn start(launch: Launch, json: &str) -> io::Result<Self> {
        // In the namespace (`ip netns exec` execs the rest: the same pid), then through
        // the emulator.
        let emulator: Vec<String> = match launch.through_runner {
            true => std::env::var(PEER_RUNNER_ENV)
                .unwrap_or_default()
                .split_whitespace()
                .map(String::from)
                .collect(),
            false => Vec::new(),
        };
        let runner: Vec<String> = launch.place.iter().cloned().chain(emulator).collect();
        let mut command = match runner.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(launch.program);
                c
            }
            None => Command::new(launch.program),
        };
        command.args(launch.args);
        if let Some(dir) = launch.dir {
            command.current_dir(dir);
        }
        // Its own process group, so that stopping it stops whatever it started too.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        // In the child, between fork and exec, only async-signal-safe system calls: the
        // transport's descriptors the peer inherits (a pipe's ends) lose FD_CLOEXEC; the
        // peer dies with the thread that started it (PR_SET_PDEATHSIG; and not at all if
        // that already happened); and it is pinned to its CPU.
        let inherited = launch.inherited;
        let cpus = launch.cpu.map(cpu_set);
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        let in_child = move || {
            for &fd in &inherited {
                // SAFETY: fcntl on integers; no allocation, no lock.
                let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
                if flags < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: as above.
                if unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            // SAFETY: prctl on integers.
            if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: getppid has no preconditions.
            if unsafe { libc::getppid() } != parent {
                return Err(io::Error::other("the measuring process exited"));
            }
            if let Some(set) = &cpus {
                let size = std::mem::size_of::<libc::cpu_set_t>();
                // SAFETY: a set built before fork, read only, of `size` bytes.
                if unsafe { libc::sched_setaffinity(0, size, set) } != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        };
        // SAFETY: the closure calls only fcntl, prctl, getppid and sched_setaffinity, on
        // data allocated before fork.
        unsafe { std::os::unix::process::CommandExt::pre_exec(&mut command, in_child) };
        command
            .arg(SERVE_ARG)
            .arg("--config")
            .arg(json)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = ipc_matrix_transport::spawn_within(&mut command, FORK_TO_EXEC_LIMIT)
            .map_err(|e| {
                let what = match runner.is_empty() {
                    false => format!(
                        "{} through `{}` (the namespace's and {PEER_RUNNER_ENV}'s prefix)",
                        launch.program.display(),
                        runner.join(" ")
                    ),
                    true => launch.program.display().to_string(),
                };
                io::Error::new(e.kind(), format!("starting {what}: {e}"))
            })?;
        let pipe = child.stderr.take().expect("stderr is piped");
        let kept = Arc::new(Mutex::new(KeptStderr::default()));
        let stderr = {
            let kept = Arc::clone(&kept);
            std::thread::spawn(move || keep_stderr(pipe, &kept))
        };
        Ok(Self {
            child,
            stderr: Some(stderr),
            kept,
            status: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The peer's exit status if it has exited, without waiting.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// The live processes besides the started one that are its own (in its process
    /// group, or descended from it: a child that left the group with `setsid` keeps its
    /// parent, or descended from those) and hold a socket. Any of them may have sent a
    /// reply, so the cell cannot say its replies came from the process it started. One
    /// that holds none (a sleeper, a logger writing to the stderr pipe) cannot have.
    /// `Err` when /proc cannot be read.
    pub fn others_of_its_own(&self) -> io::Result<Vec<ipc_matrix_transport::ProcessEntry>> {
        let started = self.child.id();
        let table = ipc_matrix_transport::process_table()?;
        let mut own: Vec<u32> = vec![started];
        let mut others = Vec::new();
        // To a fixed point: a grandchild is found once its parent is.
        loop {
            let before = others.len();
            for process in &table {
                let belongs = process.group == started || own.contains(&process.parent);
                if belongs && !own.contains(&process.pid) {
                    own.push(process.pid);
                    others.push(process.clone());
                }
            }
            if others.len() == before {
                others.retain(|p| ipc_matrix_transport::holds_a_socket(p.pid));
                return Ok(others);
            }
        }
    }

    /// Waits for the peer to exit on its own until `deadline`.
    pub fn wait_until(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            if let Some(status) = self.status {
                return Some(status);
            }
            self.status = self.child.try_wait().ok().flatten();
            if self.status.is_some() || Instant::now() >= deadline {
                return self.status;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Kills the peer and every process it started (its process group) if they still
    /// run, reaps it, and returns what it wrote to stderr (control characters shown as
    /// U+FFFD: it is printed on terminals).
    pub fn stop(&mut self) -> String {
        // SAFETY: kill on integers. The group is the peer's own (process_group(0)): its
        // id is not reused while a member lives, and ESRCH when none does is harmless.
        unsafe { libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL) };
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
        let Some(reader) = self.stderr.take() else {
            return String::new();
        };
        // A process that left the group (setsid) may still hold the pipe: what arrived
        // is kept either way, and the wait for the rest is bounded.
        let until = Instant::now() + STDERR_DRAIN;
        while !reader.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        let held_open = !reader.is_finished();
        let kept = self.kept.lock().map(|k| k.text()).unwrap_or_default();
        let mut text: String = kept
            .trim()
            .chars()
            .map(|c| match c.is_control() && c != '\n' && c != '\t' {
                true => char::REPLACEMENT_CHARACTER,
                false => c,
            })
            .collect();
        if held_open {
            text.push_str(" [its stderr is still held open by a process it started that left its process group]");
        }
        text
    }
}

impl PeerProcess {
    /// Stops the peer's process group (SIGSTOP) until the returned guard is dropped
    /// (SIGCONT), once every thread of the peer is seen stopped: so that a floor can be
    /// timed on the CPU that a busy-polling peer would otherwise spin on. `None` when it
    /// could not be stopped within [`PAUSE_WITHIN`] (it is continued again then).
    pub(crate) fn pause(&self) -> Option<PausedPeer> {
        pause_group(self.child.id())
    }
}

/// Stops process group `leader` (whose leader is that process) until the guard is
/// dropped; see [`PeerProcess::pause`].
pub(crate) fn pause_group(leader: u32) -> Option<PausedPeer> {
    let pid = leader as libc::pid_t;
    // SAFETY: kill on integers; the group is the peer's own (see `PeerProcess::stop`).
    if unsafe { libc::kill(-pid, libc::SIGSTOP) } != 0 {
        return None;
    }
    let paused = PausedPeer { group: pid };
    let until = Instant::now() + PAUSE_WITHIN;
    while Instant::now() < until {
        if stopped(pid) {
            return Some(paused);
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    None
}

/// How long a peer is given to stop when paused.
const PAUSE_WITHIN: Duration = Duration::from_secs(1);

/// A peer's process group stopped by [`PeerProcess::pause`]; continued when dropped.
pub(crate) struct PausedPeer {
    group: libc::pid_t,
}

impl Drop for PausedPeer {
    /// Continues the group, and waits (at most [`PAUSE_WITHIN`]) until no thread of its
    /// leader is seen stopped, so that the cell's next round trip does not time its waking.
    fn drop(&mut self) {
        // SAFETY: kill on integers.
        if unsafe { libc::kill(-self.group, libc::SIGCONT) } != 0 {
            return;
        }
        let until = Instant::now() + PAUSE_WITHIN;
        while partly_stopped(self.group) && Instant::now() < until {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// True when every thread of process `pid` is stopped by a signal (state `T` in
/// /proc/<pid>/task/*/stat). A stop reaches a process thread by thread: its first thread
/// stopped says nothing of another that still spins.
pub(crate) fn stopped(pid: libc::pid_t) -> bool {
    ipc_matrix_transport::thread_states(pid as u32)
        .is_ok_and(|states| !states.is_empty() && states.iter().all(|s| *s == Some('T')))
}

/// True when some thread of process `pid` is still stopped by a signal.
pub(crate) fn partly_stopped(pid: libc::pid_t) -> bool {
    ipc_matrix_transport::thread_states(pid as u32).is_ok_and(|states| states.contains(&Some('T')))
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `exit status 3`, `killed by signal 9`.
pub fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}

/// The first [`STDERR_HEAD`] and the last [`STDERR_TAIL`] bytes of a peer's stderr.
#[derive(Default)]
struct KeptStderr {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    left_out: u64,
}

impl KeptStderr {
    fn push(&mut self, mut bytes: &[u8]) {
        let into_head = bytes.len().min(STDERR_HEAD - self.head.len());
        self.head.extend_from_slice(&bytes[..into_head]);
        bytes = &bytes[into_head..];
        self.tail.extend(bytes);
        let over = self.tail.len().saturating_sub(STDERR_TAIL);
        self.tail.drain(..over);
        self.left_out += over as u64;
    }

    fn text(&self) -> String {
        let head = String::from_utf8_lossy(&self.head);
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let tail = String::from_utf8_lossy(&tail);
        match self.left_out {
            0 => format!("{head}{tail}"),
            n => format!("{head} [... {n} bytes left out ...] {tail}"),
        }
    }
}

/// Reads the peer's stderr to its end into `kept` (a read interrupted by a signal is
/// tried again: a peer must never block on a full pipe).
fn keep_stderr(mut pipe: impl Read, kept: &Mutex<KeptStderr>) {
    let mut chunk = [0u8; 4096];
    loop {
        match pipe.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                if let Ok(mut kept) = kept.lock() {
                    kept.push(&chunk[..n]);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
