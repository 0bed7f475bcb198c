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

use std::io;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// How long a new process may take from fork to exec before it is taken for stuck: a start
/// takes milliseconds, under QEMU and on a loaded machine a second or two.
pub const FORK_TO_EXEC_LIMIT: Duration = Duration::from_secs(20);

/// Starts tried, in all, before [`spawn_within`] gives up.
const ATTEMPTS: u32 = 3;

/// The longest [`spawn_within`] with [`FORK_TO_EXEC_LIMIT`] takes: every start stuck,
/// each found within a second of its limit. What a caller that bounds a whole set-up
/// allows for starting a process.
pub const START_LIMIT: Duration =
    Duration::from_secs(ATTEMPTS as u64 * (FORK_TO_EXEC_LIMIT.as_secs() + 1));

/// Set in each started process's environment (this process's pid and the start's number),
/// so that one past exec never has this process's environment, even when the command sets
/// nothing else.
pub const STARTED_ENV: &str = "IPC_MATRIX_STARTED_BY";

/// `command.spawn()`, but a child that is still this process's copy (not yet past exec)
/// after `within` is killed and the start tried again, [`ATTEMPTS`] starts in all; each
/// retry is said on stderr. Fails, saying so, when every start stuck.
///
/// Only the calling thread's own children are looked at (the fork is made on it, so
/// `PR_SET_PDEATHSIG` still ties the child to it): another thread's start is left alone.
pub fn spawn_within(command: &mut Command, within: Duration) -> io::Result<Child> {
    static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let program = command.get_program().to_string_lossy().into_owned();
    for attempt in 1..=ATTEMPTS {
        let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        command.env(STARTED_ENV, format!("{}.{n}", std::process::id()));
        let (spawned, killed) = spawn_watched(command, within);
        let mut child = spawned?;
        if !killed.contains(&child.id()) {
            if !killed.is_empty() {
                eprintln!(
                    "warning: starting {program}: killed {killed:?}, this thread's children \
                     still short of exec after {within:?}"
                );
            }
            return Ok(child);
        }
        let _ = child.wait();
        eprintln!(
            "warning: starting {program} (start {attempt} of {ATTEMPTS}): the new process \
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

/// What the watcher is asked: look at `thread`'s children after `within`, unless the
/// start ends first (`finished` gets a message or is dropped); answer with the pids killed.
struct Watch {
    thread: libc::pid_t,
    within: Duration,
    finished: mpsc::Receiver<()>,
    killed: mpsc::Sender<Vec<u32>>,
}

/// One start, watched. The watcher is one thread for the whole process, made at the first
/// start and parked between starts: no thread is being made while a fork happens. Without
/// it (a thread could not be made), the start is not watched.
fn spawn_watched(command: &mut Command, within: Duration) -> (io::Result<Child>, Vec<u32>) {
    static WATCHER: OnceLock<Option<Mutex<mpsc::Sender<Watch>>>> = OnceLock::new();
    let watcher = WATCHER.get_or_init(|| {
        let (ask, asked) = mpsc::channel::<Watch>();
        std::thread::Builder::new()
            .name("start watcher".into())
            .spawn(move || {
                for watch in asked {
                    let _ = watch.killed.send(watch_one(&watch));
                }
            })
            .ok()
            .map(|_| Mutex::new(ask))
    });
    // One start at a time: the watcher answers one.
    let Some(ask) = watcher else {
        return (command.spawn(), Vec::new());
    };
    let ask = ask.lock().unwrap_or_else(|e| e.into_inner());
    let (done, finished) = mpsc::channel();
    let (killed_tx, killed) = mpsc::channel();
    let watch = Watch {
        // SAFETY: gettid has no preconditions.
        thread: unsafe { libc::gettid() },
        within,
        finished,
        killed: killed_tx,
    };
    if ask.send(watch).is_err() {
        return (command.spawn(), Vec::new());
    }
    let spawned = command.spawn();
    drop(done);
    (spawned, killed.recv().unwrap_or_default())
}

/// Waits `within` for the start to end; then, every second until it does, kills the
/// watched thread's children that are still copies of this process.
fn watch_one(watch: &Watch) -> Vec<u32> {
    let me = std::process::id();
    let own_environment = std::fs::read(format!("/proc/{me}/environ")).ok();
    let mut killed = Vec::new();
    let mut wait = watch.within;
    while let Err(mpsc::RecvTimeoutError::Timeout) = watch.finished.recv_timeout(wait) {
        wait = Duration::from_secs(1);
        for pid in children_of_thread(me, watch.thread) {
            // A copy stays one until it execs or dies, and only this process reaps it: its
            // pid cannot go to another process between the look and the kill.
            if !killed.contains(&pid) && still_a_copy(pid, own_environment.as_deref()) && kill(pid)
            {
                killed.push(pid);
            }
        }
    }
    killed
}

/// The children that thread `thread` of process `process` forked, from the kernel's list
/// (`/proc/<pid>/task/<tid>/children`); where the kernel keeps none, every child of the
/// process.
fn children_of_thread(process: u32, thread: libc::pid_t) -> Vec<u32> {
    match std::fs::read_to_string(format!("/proc/{process}/task/{thread}/children")) {
        Ok(list) => list
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        Err(_) => crate::platform::process_table()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p.parent == process)
            .map(|p| p.pid)
            .collect(),
    }
}

/// Whether `pid` has not exec'd yet: its environment is still this process's, byte for
/// byte (after exec it is the one the command set, with [`STARTED_ENV`]). Unknown
/// (unreadable) is not a copy.
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
    // SAFETY: kill on integers; the pid is our own unreaped child.
    unsafe { libc::kill(pid, libc::SIGKILL) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::path::{Path, PathBuf};

    /// A command whose new process appends a byte to `tally`, then blocks before exec
    /// while `gate` does not exist; the first to find no gate creates it when
    /// `open_after_first` is set, so that a later start passes.
    fn stuck_before_exec(gate: &Path, tally: &Path, open_after_first: bool) -> Command {
        let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let (gate, tally) = (c(gate), c(tally));
        let mut command = Command::new("true");
        let in_child = move || {
            // SAFETY: access, open, write, close and nanosleep on paths made before fork.
            unsafe {
                let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_APPEND;
                let fd = libc::open(tally.as_ptr(), flags, 0o600);
                libc::write(fd, b"s".as_ptr().cast(), 1);
                libc::close(fd);
                if libc::access(gate.as_ptr(), libc::F_OK) != 0 {
                    if open_after_first {
                        libc::close(libc::open(
                            gate.as_ptr(),
                            libc::O_CREAT | libc::O_WRONLY,
                            0o600,
                        ));
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

    /// A path in the temporary folder that does not exist yet, this process's own.
    fn fresh_path(name: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "ipc-matrix.start-test.{}.{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        path
    }

    /// This process's children that are still its copies.
    fn copies() -> Vec<u32> {
        let me = std::process::id();
        let own = std::fs::read(format!("/proc/{me}/environ")).ok();
        crate::platform::process_table()
            .unwrap()
            .into_iter()
            .filter(|p| p.parent == me && still_a_copy(p.pid, own.as_deref()))
            .map(|p| p.pid)
            .collect()
    }

    #[test]
    fn a_start_that_never_reaches_exec_is_killed_and_tried_again() {
        let (gate, tally) = (fresh_path("gate"), fresh_path("tally"));
        let mut command = stuck_before_exec(&gate, &tally, true);
        let mut child = spawn_within(&mut command, Duration::from_secs(2)).unwrap();
        let status = child.wait().unwrap();
        assert!(status.success(), "the second start ran `true`: {status:?}");
        assert_eq!(std::fs::read(&tally).unwrap(), b"ss", "two starts");
        assert_eq!(copies(), Vec::<u32>::new(), "the stuck copy is gone");
        std::fs::remove_file(&gate).unwrap();
        std::fs::remove_file(&tally).unwrap();
    }

    #[test]
    fn starts_that_all_stick_fail_naming_the_cause() {
        let (gate, tally) = (fresh_path("never"), fresh_path("tally"));
        let mut command = stuck_before_exec(&gate, &tally, false);
        let e = spawn_within(&mut command, Duration::from_millis(300)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(e.to_string().contains("short of exec"), "{e}");
        assert_eq!(std::fs::read(&tally).unwrap(), b"sss", "three starts");
        assert_eq!(copies(), Vec::<u32>::new(), "every stuck copy is gone");
        std::fs::remove_file(&tally).unwrap();
    }

    /// Another thread's start, stuck before exec as ours is, is that thread's business:
    /// ours gives up without touching it.
    #[test]
    fn another_threads_start_is_left_alone() {
        let (other_gate, other_tally) = (fresh_path("other-gate"), fresh_path("other-tally"));
        let mut other = stuck_before_exec(&other_gate, &other_tally, false);
        let theirs = std::thread::spawn(move || other.spawn().map(|mut c| c.wait()));
        while !other_tally.exists() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let theirs_pid = copies();
        assert_eq!(
            theirs_pid.len(),
            1,
            "the other thread's copy: {theirs_pid:?}"
        );
        let (gate, tally) = (fresh_path("own-gate"), fresh_path("own-tally"));
        let mut command = stuck_before_exec(&gate, &tally, false);
        spawn_within(&mut command, Duration::from_millis(300)).unwrap_err();
        assert_eq!(
            copies(),
            theirs_pid,
            "the other thread's copy is still there"
        );
        assert!(kill(theirs_pid[0]));
        let _ = theirs.join().unwrap();
        for path in [other_tally, tally] {
            std::fs::remove_file(path).unwrap();
        }
    }

    /// A command that changes nothing of the environment still starts a process whose
    /// environment is not this one's (the mark), so a slow start past exec is never
    /// taken for a stuck copy.
    #[test]
    fn a_child_past_exec_is_never_taken_for_a_copy() {
        let mut command = Command::new("sleep");
        command.arg("5");
        let mut child = spawn_within(&mut command, Duration::from_secs(5)).unwrap();
        // `spawn` returns past exec on a kernel; under QEMU user mode a C library's
        // vfork-style spawn is the emulator's fork, which can return first. Look once the
        // child runs `sleep` (its command line), the moment this test is about.
        let cmdline = format!("/proc/{}/cmdline", child.id());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let runs_sleep = || std::fs::read(&cmdline).unwrap().starts_with(b"sleep\0");
        while !runs_sleep() {
            assert!(std::time::Instant::now() < deadline, "sleep never ran");
            std::thread::sleep(Duration::from_millis(10));
        }
        let own = std::fs::read(format!("/proc/{}/environ", std::process::id())).unwrap();
        assert!(!still_a_copy(child.id(), Some(&own)));
        child.kill().unwrap();
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    }
}
