//! Starting and stopping the peer process. Its stderr is kept for failure messages; it is
//! killed when dropped, so no failure path leaves it running.

use crate::peer::{PeerConfig, SERVE_ARG};
use std::io::{self, Read};
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

pub struct PeerProcess {
    child: Child,
    stderr: Option<JoinHandle<Vec<u8>>>,
    status: Option<ExitStatus>,
}

impl PeerProcess {
    /// Starts `program` as the peer; in network namespace `netns` when given (the whole
    /// command, runner included, under `ip netns exec`, which execs it: same pid).
    pub fn spawn(program: &Path, config: &PeerConfig, netns: Option<&str>) -> io::Result<Self> {
        let runner: Vec<String> = netns
            .map(crate::second_host::exec_in)
            .unwrap_or_default()
            .into_iter()
            .chain(
                std::env::var(PEER_RUNNER_ENV)
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(String::from),
            )
            .collect();
        let mut command = match runner.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(program);
                c
            }
            None => Command::new(program),
        };
        // The transport's descriptors the peer inherits (a pipe's ends): clear their
        // FD_CLOEXEC in the child only, with fcntl (async-signal-safe) between fork and exec.
        let inherited = config.address.inherited_fds();
        if !inherited.is_empty() {
            let clear_cloexec = move || {
                for &fd in &inherited {
                    // SAFETY: fcntl on integers; no allocation, no lock.
                    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
                    if flags < 0
                        || unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0
                    {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            };
            // SAFETY: the closure only calls fcntl and reads a Vec allocated before fork.
            unsafe { std::os::unix::process::CommandExt::pre_exec(&mut command, clear_cloexec) };
        }
        let json = serde_json::to_string(config).map_err(io::Error::other)?;
        let mut child = command
            .arg(SERVE_ARG)
            .arg("--config")
            .arg(json)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                io::Error::new(e.kind(), format!("starting {}: {e}", program.display()))
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
