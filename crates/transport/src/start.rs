//! Starting a process with a deadline: [`spawn_within`].
//!
//! `Command::spawn` returns only once the new process has called `exec` (the parent waits
//! on a pipe that `exec` closes). Under QEMU user mode a fork is the emulator's own
//! `fork()` of a multi-threaded process, and its child can deadlock before it reaches
//! `exec`: the parent then waits forever inside `spawn`, and the stuck copy holds every
//! descriptor the parent had. Seen once on a CI machine (aarch64 under QEMU 7.2, in the
//! transport suite: the check hung in `spawn` until its watchdog ended it, and nextest
//! found the parent's output still held open). A watcher kills such a copy after
//! [`FORK_TO_EXEC_LIMIT`], which makes `spawn` return, and the start is tried again.

use std::collections::HashSet;
use std::io;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

/// How long a new process may take from fork to exec before it is taken for stuck: a start
/// takes milliseconds, under QEMU and on a loaded machine a second or two.
pub const FORK_TO_EXEC_LIMIT: Duration = Duration::from_secs(20);

/// Starts tried before [`spawn_within`] gives up.
const ATTEMPTS: u32 = 3;

/// Set in each started process's environment (this process's pid and the start's number),
/// so that one past exec never has this process's environment, even when the command sets
/// nothing else.
pub const STARTED_ENV: &str = "IPC_MATRIX_STARTED_BY";

/// One start at a time in this process, so that a new child of this process that has not
/// reached exec during a start is that start's own.
static STARTING: Mutex<()> = Mutex::new(());

/// `command.spawn()`, but a child that is still this process's copy (not yet past exec)
/// after `within` is killed and the start tried again, at most [`ATTEMPTS`] times; each
/// retry is said on stderr. Fails, saying so, when every start stuck.
pub fn spawn_within(command: &mut Command, within: Duration) -> io::Result<Child> {
    static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let _one_at_a_time = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    let program = command.get_program().to_string_lossy().into_owned();
    for attempt in 1..=ATTEMPTS {
        let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        command.env(STARTED_ENV, format!("{}.{n}", std::process::id()));
        let (child, killed) = spawn_watched(command, within)?;
        if !killed.contains(&child.id()) {
            return Ok(child);
        }
        let mut child = child;
        let _ = child.wait();
        eprintln!(
            "warning: starting {program} (attempt {attempt} of {ATTEMPTS}): the new process \
             (pid {}) was still a copy of this one, short of exec, after {within:?}; killed \
             it{}",
            child.id(),
            if attempt < ATTEMPTS {
                ", starting again"
            } else {
                ""
            }
        );
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "starting {program}: each of {ATTEMPTS} new processes stayed a copy of this one, \
             short of exec, for {within:?} (a fork that deadlocked: QEMU user mode forks a \
             multi-threaded process this way at times)"
        ),
    ))
}

/// One start, with a watcher that kills the children it finds stuck before exec after
/// `within`; returns the child and the pids killed.
fn spawn_watched(command: &mut Command, within: Duration) -> io::Result<(Child, Vec<u32>)> {
    let me = std::process::id();
    let before = children_of(me);
    let own_environment = std::fs::read(format!("/proc/{me}/environ")).ok();
    let (done, finished) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let watcher = scope.spawn(move || {
            let mut killed = Vec::new();
            // Woken by the start's end (or its sender dropped); else look every second.
            let mut wait = within;
            while let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(wait) {
                wait = Duration::from_secs(1);
                for pid in children_of(me).difference(&before) {
                    if still_a_copy(*pid, own_environment.as_deref()) && kill(*pid) {
                        killed.push(*pid);
                    }
                }
            }
            killed
        });
        let spawned = command.spawn();
        drop(done);
        let killed = watcher.join().unwrap_or_default();
        spawned.map(|child| (child, killed))
    })
}

/// The live children of process `parent`.
fn children_of(parent: u32) -> HashSet<u32> {
    crate::platform::process_table()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.parent == parent)
        .map(|p| p.pid)
        .collect()
}

/// Whether `pid` has not exec'd yet: its environment is still this process's, byte for
/// byte (after exec it is the one the command set). Unknown (unreadable) is not a copy.
fn still_a_copy(pid: u32, own_environment: Option<&[u8]>) -> bool {
    match (
        own_environment,
        std::fs::read(format!("/proc/{pid}/environ")),
    ) {
        (Some(own), Ok(theirs)) => own == theirs.as_slice(),
        _ => false,
    }
}

fn kill(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill on integers; the pid is our own child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGKILL) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::{CommandExt, ExitStatusExt};

    /// A command whose new process blocks before exec while `gate` does not exist, and
    /// creates it (so that a later start passes) when `open_after_first` is set.
    fn stuck_before_exec(gate: &std::path::Path, open_after_first: bool) -> Command {
        let gate = std::ffi::CString::new(gate.as_os_str().as_encoded_bytes()).unwrap();
        let mut command = Command::new("true");
        let in_child = move || {
            // SAFETY: access, open, close and nanosleep on a path made before fork.
            unsafe {
                if libc::access(gate.as_ptr(), libc::F_OK) != 0 {
                    if open_after_first {
                        let fd = libc::open(gate.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o600);
                        libc::close(fd);
                    }
                    let long = libc::timespec {
                        tv_sec: 600,
                        tv_nsec: 0,
                    };
                    libc::nanosleep(&long, std::ptr::null_mut());
                }
            }
            Ok(())
        };
        // SAFETY: the closure makes only async-signal-safe calls.
        unsafe { command.pre_exec(in_child) };
        command
    }

    #[test]
    fn a_start_that_never_reaches_exec_is_killed_and_tried_again() {
        let gate = gate_path("retried");
        let mut command = stuck_before_exec(&gate, true);
        let mut child = spawn_within(&mut command, Duration::from_millis(500)).unwrap();
        let status = child.wait().unwrap();
        assert!(status.success(), "the second start ran `true`: {status:?}");
        assert!(gate.exists(), "the first start was the stuck one");
        assert_eq!(copies_left(), 0, "the stuck copy is gone");
        std::fs::remove_file(&gate).unwrap();
    }

    #[test]
    fn starts_that_all_stick_fail_naming_the_cause() {
        let mut command = stuck_before_exec(&gate_path("never"), false);
        let e = spawn_within(&mut command, Duration::from_millis(300)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(e.to_string().contains("short of exec"), "{e}");
        assert_eq!(copies_left(), 0, "every stuck copy is gone");
    }

    /// A path in the temporary folder that does not exist yet, this process's own.
    fn gate_path(name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "ipc-matrix.start-test.{}.{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        path
    }

    /// Children of this process that are still its copies.
    fn copies_left() -> usize {
        let me = std::process::id();
        let own = std::fs::read(format!("/proc/{me}/environ")).ok();
        children_of(me)
            .into_iter()
            .filter(|&pid| still_a_copy(pid, own.as_deref()))
            .count()
    }

    /// A command that changes nothing of the environment still starts a process whose
    /// environment is not this one's (the mark), so a slow start past exec is never
    /// taken for a stuck copy.
    #[test]
    fn a_child_past_exec_is_never_taken_for_a_copy() {
        let mut command = Command::new("sleep");
        command.arg("5");
        let mut child = spawn_within(&mut command, Duration::from_secs(5)).unwrap();
        let own = std::fs::read(format!("/proc/{}/environ", std::process::id())).unwrap();
        assert!(!still_a_copy(child.id(), Some(&own)));
        child.kill().unwrap();
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    }
}
