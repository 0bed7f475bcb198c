//! Linux specifics, all in one place: futex waits and wakes on shared memory, liveness of
//! another process, and tying a peer's life to its parent's.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// How a futex wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FutexWake {
    /// Another thread or process woke the word.
    Woken,
    /// The word no longer held the expected value when the wait began.
    Changed,
    /// The timeout passed.
    TimedOut,
    /// A signal, or any other early return.
    Other,
}

/// Sleeps while `*word == expected`, at most `timeout`. Spurious returns are fine: callers
/// re-check their condition. The futex is not FUTEX_PRIVATE: the word lives in memory
/// shared between processes.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) -> FutexWake {
    // Clamped so that it fits a 32-bit time_t too; `as _` takes the field's own type
    // (libc names musl's time_t deprecated: it is to become 64-bit everywhere).
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as _,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call.
    let result = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    if result == 0 {
        return FutexWake::Woken;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) => FutexWake::Changed,
        Some(libc::ETIMEDOUT) => FutexWake::TimedOut,
        _ => FutexWake::Other,
    }
}

/// Wakes every waiter on `word`.
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: as for futex_wait; FUTEX_WAKE reads no memory besides the address.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

/// True while process `pid` exists and has not exited (a zombie counts as exited).
/// It reads `/proc/<pid>/stat`, whose length changes with the pid and the process's
/// times: a stack calls it once a wait has run out, not on every message, or what a round
/// trip counts depends on them.
pub fn process_alive(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let exists = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    // A child that died stays a zombie until its parent reaps it; kill(0) still succeeds.
    match process_state(pid) {
        Ok(state) => state.is_none_or(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

/// The state letter of process `pid` in /proc/<pid>/stat (`R`, `S`, `T`, `Z`, ...):
/// `Ok(None)` when the line has none, an error when the file cannot be read.
fn process_state(pid: u32) -> std::io::Result<Option<char>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    Ok(state_letter(&stat))
}

/// The state letter of every thread of process `pid` (/proc/<pid>/task/<tid>/stat), in
/// no particular order: a signal stops a process thread by thread, so whether all of it
/// has stopped (or runs again) is told by all of its threads, not by its first one. A
/// thread that exits while they are read is left out.
pub fn thread_states(pid: u32) -> std::io::Result<Vec<Option<char>>> {
    let mut states = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        match std::fs::read_to_string(task?.path().join("stat")) {
            Ok(stat) => states.push(state_letter(&stat)),
            // Gone between the listing and the read (ENOENT, or ESRCH for one that is
            // still listed).
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(libc::ESRCH) =>
            {
                continue
            }
            Err(e) => return Err(e),
        }
    }
    Ok(states)
}

/// One live process as /proc/<pid>/stat tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEntry {
    pub pid: u32,
    pub parent: u32,
    pub group: u32,
    /// Its command name (at most 15 bytes, as the kernel keeps it).
    pub name: String,
}

/// Every process that runs (zombies left out: they answer nothing), in no particular
/// order. A process that exits while the table is read is left out.
pub fn process_table() -> std::io::Result<Vec<ProcessEntry>> {
    let mut table = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some(process) = parse_stat(pid, &stat) {
            table.push(process);
        }
    }
    Ok(table)
}

/// Whether process `pid` holds a socket (a descriptor that is `socket:[inode]`): one that
/// could send a reply. A process that cannot be looked at (of another user) is taken to
/// hold one, so that what cannot be told is never a pass. One gone since it was listed
/// holds none: it is as if it had exited before the list was read (a wrapper's short
/// command ending at that moment is no false failure).
pub fn holds_a_socket(pid: u32) -> bool {
    let fds = match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(fds) => fds,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
        Err(_) => return true,
    };
    fds.filter_map(Result::ok).any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            target
                .as_os_str()
                .as_encoded_bytes()
                .starts_with(b"socket:")
        })
    })
}

/// `pid (name) state parent group ...`, or `None` for a zombie or a line of another shape.
fn parse_stat(pid: u32, stat: &str) -> Option<ProcessEntry> {
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_string();
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    if state == 'Z' || state == 'X' {
        return None;
    }
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    Some(ProcessEntry {
        pid,
        parent,
        group,
        name,
    })
}

/// The state letter of a /proc stat line: the first field after the command name, which
/// is in parentheses and may hold anything (parentheses too).
fn state_letter(stat: &str) -> Option<char> {
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|state| state.chars().next())
}

/// Fails with `PeerGone` when process `pid` no longer runs; `when` ends the sentence.
pub fn ensure_alive(pid: u32, when: &str) -> Result<(), crate::error::TransportError> {
    if process_alive(pid) {
        Ok(())
    } else {
        Err(crate::error::TransportError::PeerGone(format!(
            "process {pid} exited {when}"
        )))
    }
}

/// Asks the kernel to kill this process when its parent dies, so a peer never outlives a
/// killed runner (and never keeps a segment or socket alive). Returns false when the
/// parent `expected_parent` is already gone, which the request alone would miss.
pub fn die_with_parent(expected_parent: u32) -> bool {
    // SAFETY: plain prctl and getppid with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::getppid() as u32 == expected_parent
    }
}

pub fn current_pid() -> u32 {
    std::process::id()
}

/// The CPUs this thread may run on, in ascending order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

/// Restricts the calling thread to `cpus` (an empty list allows nothing and is refused,
/// and so is a CPU number past what a CPU set holds).
pub fn set_thread_cpus(cpus: &[usize]) -> std::io::Result<()> {
    if cpus.is_empty() {
        return Err(std::io::Error::other("an empty CPU set"));
    }
    if let Some(cpu) = cpus.iter().find(|&&cpu| cpu >= libc::CPU_SETSIZE as usize) {
        return Err(std::io::Error::other(format!(
            "CPU {cpu} is past the {} a CPU set holds",
            libc::CPU_SETSIZE
        )));
    }
    // SAFETY: as above; CPU_SET only writes inside the set (each CPU is below its size).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every thread of a process is read, each with its own state.
    #[test]
    fn the_process_table_holds_this_process_and_its_child_with_their_relations() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let table = process_table().unwrap();
        let me = std::process::id();
        assert!(table.iter().any(|p| p.pid == me), "this process");
        let theirs = table
            .iter()
            .find(|p| p.pid == child.id())
            .expect("the child");
        assert_eq!(theirs.parent, me);
        // Our own group from the kernel, not from our own stat line: under QEMU user mode
        // that line is the emulator's, with 0 for the group.
        // SAFETY: getpgrp has no preconditions.
        assert_eq!(theirs.group, unsafe { libc::getpgrp() } as u32);
        // A sleeper holds no socket; this process, a listener, does.
        assert!(!holds_a_socket(child.id()));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(holds_a_socket(me));
        drop(listener);
        child.kill().unwrap();
        child.wait().unwrap();
        // Reaped: gone from the table, and holding nothing; a zombie never appears in it.
        assert!(!process_table().unwrap().iter().any(|p| p.pid == child.id()));
        assert!(!holds_a_socket(child.id()));
        let zombie = "7 (a b) c) Z 1 7 7 0";
        assert_eq!(parse_stat(7, zombie), None);
        let odd = parse_stat(7, "7 (a b) c) S 1 9 7 0").unwrap();
        assert_eq!((odd.name.as_str(), odd.parent, odd.group), ("a b) c", 1, 9));
    }

    #[test]
    fn thread_states_reads_every_thread_of_a_process() {
        // Three threads that wait until the states are read: at `read` to start, at `done`
        // to end.
        let (read, done) = (
            std::sync::Arc::new(std::sync::Barrier::new(4)),
            std::sync::Arc::new(std::sync::Barrier::new(4)),
        );
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (read, done) = (read.clone(), done.clone());
                std::thread::spawn(move || {
                    read.wait();
                    done.wait();
                })
            })
            .collect();
        read.wait();
        let states = thread_states(current_pid()).unwrap();
        done.wait();
        for thread in threads {
            thread.join().unwrap();
        }
        // This thread, the three waiting ones, and whatever the test harness runs.
        assert!(states.len() >= 4, "{states:?}");
        assert!(
            states.iter().all(|s| s.is_some_and(|s| "RSD".contains(s))),
            "{states:?}"
        );
    }

    #[test]
    fn the_state_letter_follows_the_last_parenthesis_of_the_command_name() {
        assert_eq!(state_letter("42 (a) b) T 1 2"), Some('T'));
        assert_eq!(state_letter("42 (sleep) S 1"), Some('S'));
        assert_eq!(state_letter("42 (sleep)"), None);
        assert_eq!(state_letter("garbage"), None);
    }

    /// A CPU past what a CPU set holds is refused with a reason, not a panic; an empty
    /// list too.
    #[test]
    fn cpus_a_cpu_set_cannot_hold_are_refused() {
        let past = set_thread_cpus(&[libc::CPU_SETSIZE as usize]).unwrap_err();
        assert!(past.to_string().contains("past the"), "{past}");
        assert!(set_thread_cpus(&[]).is_err());
    }

    #[test]
    fn a_process_that_does_not_exist_has_no_threads_to_read() {
        assert!(thread_states(u32::MAX).is_err());
    }
}
