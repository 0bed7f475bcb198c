//! What the checks share: deterministic message bytes, whole-message comparison, the peer
//! process (this same binary, started again), and segments with hand-written headers.

use crate::address::PeerAddress;
use crate::start::FORK_TO_EXEC_LIMIT;
use ipc_matrix_spec::ChannelKind;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A [`CheckFailure::Violated`] in the check's words, as `format!` takes them.
macro_rules! violated {
    ($($words:tt)*) => {
        $crate::conformance::support::CheckFailure::Violated(format!($($words)*))
    };
}
pub(super) use violated;

/// Set in the peer's environment: the role it plays (see `peer.rs`).
pub const PEER_ROLE_ENV: &str = "IPC_MATRIX_CONFORMANCE_PEER";
/// Set in the peer's environment: the channel's address, as JSON.
pub const PEER_ADDRESS_ENV: &str = "IPC_MATRIX_CONFORMANCE_ADDRESS";
/// Set in the peer's environment: the largest message it receives.
pub const PEER_LIMIT_ENV: &str = "IPC_MATRIX_CONFORMANCE_LIMIT";
/// Set in the peer's environment: the process that started it.
pub const PEER_PARENT_ENV: &str = "IPC_MATRIX_CONFORMANCE_PARENT";
/// A command prefix to start the peer with (QEMU user mode; set by `scripts/qemu-run`).
pub const PEER_RUNNER_ENV: &str = "IPC_MATRIX_PEER_RUNNER";

/// The largest message of the stream and shared-memory checks (4 slots of 1 MiB).
pub const LIMIT: usize = 4 << 20;
/// The largest message of the exchange checks: four and a half slots of 1 MiB, more than
/// a shared-memory ring holds (4 slots), so the request and its reply must stream through
/// at once.
pub const EXCHANGE_LIMIT: usize = 9 << 19;
/// The largest UDP datagram payload: UDP's limit.
pub const UDP_LIMIT: usize = 65_507;
/// Starting the peer under QEMU and connecting takes a while.
pub const SETUP: Duration = Duration::from_secs(30);
/// Deadline of one send or receive that should succeed (4 MiB under QEMU included).
pub const OP: Duration = Duration::from_secs(30);
/// How long a failure that should be noticed "at once" may take, under QEMU included.
pub const PROMPT: Duration = Duration::from_secs(2);
/// A peer waiting for something that never comes gives up after this long.
pub const PEER_IDLE: Duration = Duration::from_secs(60);

/// The limit a channel of this transport is checked against: a datagram's for UDP, one
/// limit for every other channel.
pub fn limit_of(kind: ChannelKind) -> usize {
    if kind == ChannelKind::Udp {
        UDP_LIMIT
    } else {
        LIMIT
    }
}

/// The limit of the exchange checks' messages: a datagram's for UDP, [`EXCHANGE_LIMIT`]
/// for every other channel.
pub fn exchange_limit_of(kind: ChannelKind) -> usize {
    if kind == ChannelKind::Udp {
        UDP_LIMIT
    } else {
        EXCHANGE_LIMIT
    }
}

/// `len` pseudo-random bytes from `seed` (SplitMix64, little-endian words): the same on
/// every CPU, and never one repeated byte, which would hide offset bugs.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let word = z.to_le_bytes();
        let take = (len - out.len()).min(8);
        out.extend_from_slice(&word[..take]);
    }
    out
}

/// Message `index` of the ordering checks: its index (8 bytes, little-endian), then
/// 0..700 pseudo-random bytes of its own.
pub fn ordered(index: u64) -> Vec<u8> {
    let len = (bytes(index ^ 0x0dde_0dde, 8)[0] as usize * 700) / 256;
    let mut message = index.to_le_bytes().to_vec();
    message.extend_from_slice(&bytes(index, len));
    message
}

/// The index an `ordered` message carries.
pub fn index_of(message: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(message.get(..8)?.try_into().ok()?))
}

/// Whole-message comparison: the length, then the first differing offset with a window
/// of bytes on both sides.
pub fn compare(what: &str, expected: &[u8], actual: &[u8]) -> Result<(), CheckFailure> {
    if expected == actual {
        return Ok(());
    }
    let first = expected
        .iter()
        .zip(actual)
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| expected.len().min(actual.len()));
    let window = |b: &[u8]| {
        let end = (first + 8).min(b.len());
        format!("{:02x?}", &b[first.saturating_sub(8).min(end)..end])
    };
    Err(violated!(
        "{what}: {} bytes, expected {}; first difference at byte offset {first}: \
         expected {} got {}",
        actual.len(),
        expected.len(),
        window(expected),
        window(actual)
    ))
}

/// The peer: this test binary started again with a role in its environment, through the
/// runner prefix when there is one. Killed and reaped when dropped.
pub struct Peer {
    child: Child,
    stderr: Option<JoinHandle<String>>,
    status: Option<ExitStatus>,
}

impl Peer {
    pub fn spawn(role: &str, address: &PeerAddress, limit: usize) -> Result<Self, CheckFailure> {
        let program = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
        let runner: Vec<String> = std::env::var(PEER_RUNNER_ENV)
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect();
        let mut command = match runner.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&program);
                c
            }
            None => Command::new(&program),
        };
        let inherited = address.inherited_fds();
        if !inherited.is_empty() {
            let clear_cloexec = move || {
                for &fd in &inherited {
                    // SAFETY: fcntl on integers only: async-signal-safe.
                    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
                    if flags < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // SAFETY: as above.
                    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            };
            // SAFETY: the closure calls fcntl only and reads a Vec made before fork.
            unsafe { std::os::unix::process::CommandExt::pre_exec(&mut command, clear_cloexec) };
        }
        let json = serde_json::to_string(address).map_err(|e| e.to_string())?;
        command
            .env(PEER_ROLE_ENV, role)
            .env(PEER_ADDRESS_ENV, json)
            .env(PEER_LIMIT_ENV, limit.to_string())
            .env(PEER_PARENT_ENV, std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = crate::start::spawn_within(&mut command, FORK_TO_EXEC_LIMIT)
            .map_err(|e| format!("starting the peer {}: {e}", program.display()))?;
        let mut pipe = child.stderr.take().expect("stderr is piped");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
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

    /// Waits at most `within` for the peer to exit by itself.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if self.status.is_none() {
                self.status = self.child.try_wait().ok().flatten();
            }
            if self.status.is_some() || Instant::now() >= deadline {
                return self.status;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Kills the peer if it still runs, reaps it, and returns its stderr.
    pub fn finish(&mut self) -> String {
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
            .trim()
            .to_string()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A shared-memory segment named like ours whose header is written by hand, as a hostile
/// or corrupted creator could: the layout below is the one `shm.rs` defines (magic u64,
/// then u32 version, slot size, slot count, owner pid), in this CPU's byte order.
/// Unlinked and unmapped when dropped.
pub struct HandMadeSegment {
    pub os_id: String,
    map: *mut libc::c_void,
    len: usize,
}

impl HandMadeSegment {
    pub fn create(len: usize, slot_size: u32, slots: u32) -> Result<Self, CheckFailure> {
        static SEQUENCE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let os_id = format!("/ipc-matrix.{}.conformance.{n}", std::process::id());
        let name = std::ffi::CString::new(os_id.clone()).expect("no NUL");
        let last = || std::io::Error::last_os_error().to_string();
        // SAFETY: POSIX calls on a fresh name; every write below is inside the `len`-byte
        // mapping (len >= 32 is asserted first).
        unsafe {
            assert!(len >= 32, "a header is 32 bytes");
            let fd = libc::shm_open(
                name.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                0o600,
            );
            if fd < 0 {
                return Err(violated!("shm_open {os_id}: {}", last()));
            }
            let sized = libc::ftruncate(fd, len as libc::off_t) == 0;
            let map = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            libc::close(fd);
            if !sized || map == libc::MAP_FAILED {
                libc::shm_unlink(name.as_ptr());
                return Err(violated!("sizing or mapping {os_id}: {}", last()));
            }
            let base = map.cast::<u8>();
            // The layout version this build reads.
            base.add(8).cast::<u32>().write(2);
            base.add(12).cast::<u32>().write(slot_size);
            base.add(16).cast::<u32>().write(slots);
            base.add(20).cast::<u32>().write(std::process::id());
            let magic = u64::from_le_bytes(*b"ipcmxshm");
            (*base.cast::<std::sync::atomic::AtomicU64>())
                .store(magic, std::sync::atomic::Ordering::Release);
            Ok(Self { os_id, map, len })
        }
    }
}

impl Drop for HandMadeSegment {
    fn drop(&mut self) {
        let name = std::ffi::CString::new(self.os_id.clone()).expect("no NUL");
        // SAFETY: our own mapping and name.
        unsafe {
            libc::munmap(self.map, self.len);
            libc::shm_unlink(name.as_ptr());
        }
    }
}

/// A message from the other side as a failure shows it: as text where it is text, escaped
/// where not, and at most 160 bytes of it.
pub fn shown(message: &[u8]) -> String {
    const MOST: usize = 160;
    let text = String::from_utf8_lossy(&message[..message.len().min(MOST)]);
    let mut shown = format!("\"{}\"", text.escape_debug());
    if message.len() > MOST {
        shown.push_str(&format!(" (the first {MOST} of {} bytes)", message.len()));
    }
    shown
}

/// Why a check failed: in this process, or in the process of its own it ran in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckFailure {
    /// The subject did not keep the contract, or a call of the check failed: the check's
    /// own words (what it did, what it expected, what came).
    #[error("{0}")]
    Violated(String),
    /// The check's own process could not be started.
    #[error("{what}: {why}")]
    NotStarted { what: &'static str, why: String },
    /// The check's own process was still running at `limit`, and was stopped.
    #[error("the check did not finish in {limit:.0?}, longer than every deadline of a check allows: a call into the stack did not return by its deadline; its process was stopped")]
    Hung { limit: Duration },
    /// The check's own process was killed by `signal` (`name`, when a usual one), inside
    /// the stack's code; `said`: the end of its stderr.
    #[error(
        "the check's process was killed by signal {signal}{}, inside the stack's own code{}",
        name.map_or(String::new(), |n| format!(" ({n})")),
        it_said(said)
    )]
    Killed {
        signal: i32,
        name: Option<&'static str>,
        said: String,
    },
    /// The check's own process exited with `code` (none: unknown) without saying why.
    #[error(
        "the check's process exited with status {}{}",
        code.map_or_else(|| "?".into(), |c| c.to_string()),
        it_said(said)
    )]
    Exited { code: Option<i32>, said: String },
    /// The check's own process exited with status 0 without having said that its check
    /// passed: code that is not ipc-matrix's (the stack's) ended it.
    #[error(
        "the check's process exited with status 0 before its check had finished: the stack's own code ended it (exit or _exit){}",
        it_said(said)
    )]
    Unfinished { said: String },
}

impl From<String> for CheckFailure {
    fn from(words: String) -> Self {
        CheckFailure::Violated(words)
    }
}

impl From<&str> for CheckFailure {
    fn from(words: &str) -> Self {
        CheckFailure::Violated(words.to_string())
    }
}

/// `; it said: ...` with the end of what a check's process printed, if anything.
fn it_said(said: &str) -> String {
    match said.is_empty() {
        true => String::new(),
        false => format!("; it said: {said}"),
    }
}
