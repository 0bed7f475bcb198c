//! Starting and stopping the peer process. Its stderr is kept for failure messages; it is
//! killed when dropped, so no failure path leaves it running.

use crate::external::{ExternalPeerConfig, ResolvedCommand};
use crate::peer::{PeerConfig, SERVE_ARG};
use std::io::{self, Read};
use std::os::fd::RawFd;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A command prefix that runs the peer binary, e.g. `qemu-aarch64 -L /usr/aarch64-linux-gnu`
/// for an emulated target; empty or unset runs it directly.
pub const PEER_RUNNER_ENV: &str = "IPC_MATRIX_PEER_RUNNER";
/// How long a peer may take to exit after its goodbye, in every kind.
pub(crate) const GOODBYE_WITHIN: Duration = Duration::from_secs(5);
/// At most this much of the peer's stderr is kept.
const STDERR_KEEP: usize = 16 * 1024;

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
}

/// A CPU set of one CPU.
fn cpu_set(cpu: usize) -> libc::cpu_set_t {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET stays within it (checked).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu < libc::CPU_SETSIZE as usize {
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    set
}

pub struct PeerProcess {
    child: Child,
    stderr: Option<JoinHandle<Vec<u8>>>,
    status: Option<ExitStatus>,
}

impl PeerProcess {
    /// Starts our own peer: `program serve --config <config>`, through the runner prefix
    /// ([`PEER_RUNNER_ENV`]) when one is set.
    pub fn spawn(program: &Path, config: &PeerConfig) -> io::Result<Self> {
        let json = serde_json::to_string(config).map_err(io::Error::other)?;
        let launch = Launch {
            program,
            args: &[],
            through_runner: true,
            inherited: config.address.inherited_fds(),
            // Our peer pins itself, after reading its configuration.
            cpu: None,
        };
        Self::start(launch, &json)
    }

    /// Starts a peer the user brings: `<command...> serve --config <config>`. An ELF of
    /// this build's architecture goes through the runner prefix (QEMU); it is pinned to
    /// `cpu` before it runs, as our own peer pins itself.
    pub fn spawn_external(
        command: &ResolvedCommand,
        config: &ExternalPeerConfig,
        cpu: Option<usize>,
    ) -> io::Result<Self> {
        let json = serde_json::to_string(config).map_err(io::Error::other)?;
        let launch = Launch {
            program: &command.program,
            args: &command.args,
            through_runner: command.for_this_target,
            inherited: Vec::new(),
            cpu,
        };
        Self::start(launch, &json)
    }

    fn start(launch: Launch, json: &str) -> io::Result<Self> {
        let runner: Vec<String> = match launch.through_runner {
            true => std::env::var(PEER_RUNNER_ENV)
                .unwrap_or_default()
                .split_whitespace()
                .map(String::from)
                .collect(),
            false => Vec::new(),
        };
        let mut command = match runner.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(launch.program);
                c
            }
            None => Command::new(launch.program),
        };
        command.args(launch.args);
        // The transport's descriptors the peer inherits (a pipe's ends): clear their
        // FD_CLOEXEC in the child only, with fcntl (async-signal-safe) between fork and
        // exec; and the CPU it is pinned to, with sched_setaffinity (a system call).
        let inherited = launch.inherited;
        let cpus = launch.cpu.map(cpu_set);
        if !inherited.is_empty() || cpus.is_some() {
            let in_child = move || {
                for &fd in &inherited {
                    // SAFETY: fcntl on integers; no allocation, no lock.
                    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
                    if flags < 0
                        || unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0
                    {
                        return Err(io::Error::last_os_error());
                    }
                }
                if let Some(set) = &cpus {
                    // SAFETY: a set built before fork, read only.
                    let size = std::mem::size_of::<libc::cpu_set_t>();
                    if unsafe { libc::sched_setaffinity(0, size, set) } != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            };
            // SAFETY: the closure only calls fcntl and sched_setaffinity on data
            // allocated before fork.
            unsafe { std::os::unix::process::CommandExt::pre_exec(&mut command, in_child) };
        }
        let mut child = command
            .arg(SERVE_ARG)
            .arg("--config")
            .arg(json)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("starting {}: {e}", launch.program.display()),
                )
            })?;
        let mut pipe = child.stderr.take().expect("stderr is piped");
        let stderr = std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let room = STDERR_KEEP.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
            kept
        });
        Ok(Self {
            child,
            stderr: Some(stderr),
            status: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
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

    /// Kills the peer if it still runs, reaps it, and returns what it wrote to stderr.
    pub fn stop(&mut self) -> String {
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string())
            .unwrap_or_default()
    }
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
