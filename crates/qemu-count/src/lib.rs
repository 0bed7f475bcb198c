//! `qemu-count`: a QEMU TCG plugin that counts the guest instructions each guest thread
//! executes inside measurement windows, for a cost signal that does not depend on the
//! host's speed or load.
//!
//! # Licence and linking
//!
//! This crate is built on the `qemu-plugin` crate, which is GPL-2.0-or-later, so this
//! crate is GPL-2.0-or-later as well. It is a separate workspace member and a `cdylib`
//! that QEMU loads at run time; no other crate of the workspace depends on it, and
//! nothing of it is linked into `ipc-matrix` or any other binary. The guest side, the
//! markers and the reader of the output, is `ipc-matrix-count-window` (MIT OR
//! Apache-2.0), which this plugin uses for the shared constants and the record type.
//!
//! # Build and run
//!
//! ```sh
//! cargo build -p ipc-matrix-qemu-count --release       # host only, a few seconds
//! # -> $CARGO_TARGET_DIR/release/libipc_matrix_qemu_count.so (target/ by default)
//! qemu-x86_64 -cpu Nehalem-v1 \
//!     -plugin target/release/libipc_matrix_qemu_count.so,out=/tmp/counts.%p.jsonl prog
//! qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu cortex-a72 -plugin ...,out=... prog
//! ```
//!
//! The plugin is always built for the host: QEMU is a host program. Cross builds of the
//! workspace (`--target aarch64-unknown-linux-gnu`) build it too, because a Linux cdylib
//! may leave QEMU's symbols undefined, but that library is of no use (QEMU cannot load
//! a library of another architecture) and the integration test ignores itself there.
//!
//! Plugin API v1 (`features = ["plugin-api-v1"]`): what QEMU 6.0 to 8.x load, Debian 12
//! ships 7.2. QEMU 9 and later were not tried; they may need a build with a newer API.
//! The environment variables `QEMU_PLUGIN` and `QEMU_CPU` do what `-plugin` and `-cpu`
//! do, for every QEMU user-mode process started with them (a peer too).
//!
//! Arguments: `out=PATH`, the output file (else the environment variable
//! `IPC_MATRIX_COUNT_FILE`, else standard error). `%p` in the path becomes the QEMU
//! process's pid. Records are appended, one JSON object per line, one `write(2)` each,
//! when a window ends (`ipc_matrix_count_window::Record`):
//!
//! ```json
//! {"label":1,"pid":4242,"tid":4242,"vcpu":0,"insns":1200185,"end":"close"}
//! ```
//!
//! # A fixed CPU model per architecture
//!
//! glibc picks its string and memory functions (ifuncs) by the CPU's features, and
//! QEMU's default user-mode CPU (`max` on most targets) gains features with every QEMU
//! release, so counts are comparable only with a fixed `-cpu`:
//!
//! | guest | `-cpu` | why |
//! | --- | --- | --- |
//! | x86_64 | `Nehalem-v1` | SSE4.2 and POPCNT, all of it provided by TCG (later named models, Haswell or Skylake, warn about features TCG lacks); a versioned name, so its features never change |
//! | aarch64 | `cortex-a72` | Armv8.0 with CRC, a named core: glibc takes its generic routines |
//! | armv7 | `cortex-a15` | Armv7 with NEON and VFPv4 |
//! | riscv64 | `sifive-u54` | RV64GC, what Rust's riscv64gc target needs, named |
//! | ppc64le | `power9_v2.0` | named; POWER8 is Rust's baseline |
//! | s390x | `qemu` | TCG cannot provide any named model (`z13`, `z14` and their `-base` variants all lack features); `qemu` is QEMU's own fixed model, but it may grow between QEMU versions: keep the QEMU version with the counts |
//!
//! # What is counted
//!
//! Each guest thread is a vCPU in user mode (its index is in the records, and it is
//! reused once a thread has exited, so threads are told apart by `tid`). Every
//! translated block adds its instruction count to its vCPU's counter when it starts to
//! execute; a window's count is the difference of the thread's counter between the
//! open and the close marker. So a window counts the instructions after the opening
//! system call instruction up to and including the closing one: `open(); close();`
//! counts the return from one marker and the entry to the next (see the demo's
//! `EMPTY` window), a constant the harness can subtract. A block left early
//! (a faulting access that becomes a guest signal; an atomic operation QEMU must replay
//! alone, which happens with several threads on some guests) counts in full: still
//! the same on every run of the same program.
//!
//! # Unusual sequences
//!
//! - Several labels may be open on one thread at once (nested or overlapping); each
//!   counts every instruction of that thread while it is open.
//! - Opening a label that is already open on the thread ends the first window (record
//!   with `end: "reopen"`) and starts a new one.
//! - Closing a label that is not open on the thread writes a record with
//!   `end: "close-without-open"` and `insns: null`.
//! - A thread that exits with windows open: each is written with `end: "thread-exit"`,
//!   counted up to the exit. That count includes the thread's way out (the standard
//!   library's and glibc's exit path, which takes locks), so it depends on the other
//!   threads' timing: 0.01-0.03 % between runs of the demo. Close windows before a
//!   thread ends when the count matters.
//! - The process exits (or dies of a signal QEMU sees) with windows open: each is
//!   written with `end: "process-exit"`. After SIGKILL nothing more is written; windows
//!   closed before are already in the file.
//! - When it starts in a process it writes one record with `end: "loaded"`, `label` 0 and
//!   `plugin_api`, the API version it was built for: the guest reads it to know that it
//!   is counted.
//! - A forked child inherits neither the parent's open windows nor, in its records, the
//!   parent's pid; it writes to the same file.
//! - Windows are per thread: a window opened on one thread and closed on another gives
//!   a `close-without-open` record on the second and, later, a `thread-exit` or
//!   `process-exit` record on the first.
//! - A pause (`OP_PAUSE`) stops the counting of every window of its thread until the
//!   matching resume (`OP_RESUME`); pauses nest. A window opened or closed during a pause
//!   counts only what ran outside it. A resume without a pause is ignored.
//! - More than 4096 threads alive at once: threads past that have no counter, and their
//!   markers are ignored.

use ipc_matrix_count_window::{
    End, Record, COUNT_FILE_ENV, MARKER_MAGIC, MARKER_SYSCALL, OP_CLOSE, OP_OPEN, OP_PAUSE,
    OP_RESUME,
};
use qemu_plugin::install::{Args, Info};
use qemu_plugin::plugin::{HasCallbacks, Register};
use qemu_plugin::sys::{qemu_plugin_cb_flags, qemu_plugin_tb};
use qemu_plugin::{PluginId, VCPUIndex};
use std::collections::HashMap;
use std::ffi::{c_uint, c_void};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The plugin API this plugin is built for (what QEMU checks before loading it).
const PLUGIN_API: u32 = qemu_plugin::sys::QEMU_PLUGIN_VERSION;

/// Counters for this many vCPU indices (threads alive at once, in user mode).
const MAX_VCPUS: usize = 4096;

/// One vCPU's executed-instruction counter, alone on its cache line. Only the vCPU's own
/// thread adds to it; markers read it on that same thread.
#[repr(align(64))]
struct Counter(AtomicU64);

static COUNTERS: [Counter; MAX_VCPUS] = [const { Counter(AtomicU64::new(0)) }; MAX_VCPUS];

fn counter(vcpu: VCPUIndex) -> Option<u64> {
    COUNTERS
        .get(vcpu as usize)
        .map(|c| c.0.load(Ordering::Relaxed))
}

/// The windows open on one vCPU, and the thread they belong to.
struct Thread {
    tid: u32,
    /// (label, counted instructions at the open), in opening order.
    open: Vec<(u64, u64)>,
    /// Instructions executed while paused, before the current pause.
    paused_total: u64,
    /// The counter when the current pause began, and how many pauses are nested.
    pause: Option<(u64, u32)>,
}

impl Thread {
    fn new(tid: u32) -> Self {
        Self {
            tid,
            open: Vec::new(),
            paused_total: 0,
            pause: None,
        }
    }

    /// The instructions this thread executed outside pauses, up to counter `now`.
    fn counted(&self, now: u64) -> u64 {
        let pausing = self.pause.map_or(0, |(since, _)| now - since);
        now - self.paused_total - pausing
    }

    /// Nothing open and no pause: the entry can go.
    fn idle(&self) -> bool {
        self.open.is_empty() && self.pause.is_none()
    }
}

struct State {
    /// The process the state belongs to: a forked child starts afresh.
    pid: u32,
    threads: HashMap<VCPUIndex, Thread>,
    out: Output,
}

enum Output {
    File(File),
    Stderr,
}

static STATE: OnceLock<Mutex<State>> = OnceLock::new();

fn state() -> Option<MutexGuard<'static, State>> {
    let mut state = STATE
        .get()?
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let pid = std::process::id();
    if state.pid != pid {
        state.pid = pid;
        state.threads.clear();
    }
    Some(state)
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions. In user mode the plugin's callbacks for a
    // vCPU run on the host thread of that guest thread, whose id the guest sees too.
    unsafe { libc::gettid() as u32 }
}

impl State {
    fn write(&mut self, vcpu: VCPUIndex, tid: u32, label: u64, insns: Option<u64>, end: End) {
        let record = Record {
            label,
            pid: self.pid,
            tid,
            vcpu,
            insns,
            end,
            plugin_api: (end == End::Loaded).then_some(PLUGIN_API),
        };
        let mut line = serde_json::to_string(&record).expect("a record serializes");
        line.push('\n');
        // One write per record, in append mode: whole lines even when several processes
        // share the file. A failed write cannot be reported anywhere better than stderr.
        let result = match &mut self.out {
            Output::File(file) => file.write_all(line.as_bytes()),
            Output::Stderr => std::io::stderr().write_all(line.as_bytes()),
        };
        if let Err(e) = result {
            eprintln!("qemu-count: cannot write a record: {e}");
        }
    }

    /// Ends every window open on `vcpu` with `end`, counted up to `now`.
    fn end_all(&mut self, vcpu: VCPUIndex, now: u64, end: End) {
        if let Some(thread) = self.threads.remove(&vcpu) {
            let counted = thread.counted(now);
            for (label, start) in thread.open {
                self.write(vcpu, thread.tid, label, Some(counted - start), end);
            }
        }
    }

    fn marker(&mut self, vcpu: VCPUIndex, op: u32, label: u64) {
        let Some(now) = counter(vcpu) else { return };
        let tid = gettid();
        // Windows of a thread that exited unseen on this vCPU index.
        if self.threads.get(&vcpu).is_some_and(|t| t.tid != tid) {
            self.end_all(vcpu, now, End::ThreadExit);
        }
        match op {
            OP_OPEN => {
                let thread = self.threads.entry(vcpu).or_insert_with(|| Thread::new(tid));
                let counted = thread.counted(now);
                let previous = thread.open.iter().position(|&(l, _)| l == label);
                let reopened = previous.map(|i| thread.open.remove(i));
                thread.open.push((label, counted));
                if let Some((_, start)) = reopened {
                    self.write(vcpu, tid, label, Some(counted - start), End::Reopen);
                }
            }
            OP_CLOSE => {
                let found = self.threads.get_mut(&vcpu).and_then(|thread| {
                    let i = thread.open.iter().position(|&(l, _)| l == label)?;
                    let (_, start) = thread.open.remove(i);
                    Some(thread.counted(now) - start)
                });
                match found {
                    Some(insns) => self.write(vcpu, tid, label, Some(insns), End::Close),
                    None => self.write(vcpu, tid, label, None, End::CloseWithoutOpen),
                }
                if self.threads.get(&vcpu).is_some_and(Thread::idle) {
                    self.threads.remove(&vcpu);
                }
            }
            OP_PAUSE => {
                let thread = self.threads.entry(vcpu).or_insert_with(|| Thread::new(tid));
                thread.pause = Some(match thread.pause {
                    Some((since, depth)) => (since, depth.saturating_add(1)),
                    None => (now, 1),
                });
            }
            OP_RESUME => {
                if let Some(thread) = self.threads.get_mut(&vcpu) {
                    match thread.pause {
                        Some((since, 1)) => {
                            thread.paused_total += now - since;
                            thread.pause = None;
                        }
                        Some((since, depth)) => thread.pause = Some((since, depth - 1)),
                        // A resume without a pause: nothing to resume.
                        None => {}
                    }
                    if thread.idle() {
                        self.threads.remove(&vcpu);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Runs at the start of every executed block: adds its instruction count (`udata`) to
/// the vCPU's counter. The hot path: no lock, no atomic read-modify-write.
unsafe extern "C" fn on_block(vcpu: c_uint, udata: *mut c_void) {
    if let Some(c) = COUNTERS.get(vcpu as usize) {
        let n = udata as u64;
        c.0.store(
            c.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }
}

unsafe extern "C" fn on_translate(_id: PluginId, tb: *mut qemu_plugin_tb) {
    // SAFETY: `tb` is the block QEMU is translating, valid during this callback.
    unsafe {
        let n = qemu_plugin::sys::qemu_plugin_tb_n_insns(tb);
        qemu_plugin::sys::qemu_plugin_register_vcpu_tb_exec_cb(
            tb,
            Some(on_block),
            qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
            n as *mut c_void,
        );
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn on_syscall(
    _id: PluginId,
    vcpu: c_uint,
    num: i64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    _a5: u64,
    _a6: u64,
    _a7: u64,
    _a8: u64,
) {
    // 32-bit guests' arguments arrive sign-extended: only the low 32 bits count.
    if num != MARKER_SYSCALL || a1 as u32 != MARKER_MAGIC {
        return;
    }
    let label = (a3 & 0xFFFF_FFFF) | ((a4 & 0xFFFF_FFFF) << 32);
    if let Some(mut state) = state() {
        state.marker(vcpu, a2 as u32, label);
    }
}

/// A thread (vCPU) exits: its open windows end here.
unsafe extern "C" fn on_vcpu_exit(_id: PluginId, vcpu: c_uint) {
    if let (Some(mut state), Some(now)) = (state(), counter(vcpu)) {
        state.end_all(vcpu, now, End::ThreadExit);
    }
}

/// A new thread (vCPU) starts, maybe on the index of one that exited unseen: that one's
/// windows end at its last count.
unsafe extern "C" fn on_vcpu_init(_id: PluginId, vcpu: c_uint) {
    if let (Some(mut state), Some(now)) = (state(), counter(vcpu)) {
        state.end_all(vcpu, now, End::ThreadExit);
    }
}

fn at_exit() {
    if let Some(mut state) = state() {
        let mut vcpus: Vec<VCPUIndex> = state.threads.keys().copied().collect();
        vcpus.sort_unstable();
        for vcpu in vcpus {
            let now = counter(vcpu).unwrap_or(0);
            state.end_all(vcpu, now, End::ProcessExit);
        }
    }
}

fn fail(message: String) -> ! {
    eprintln!("qemu-count: {message}");
    std::process::exit(2);
}

/// Where the records go: `out=` wins over the environment variable.
fn output(args: &Args) -> Output {
    let mut path = std::env::var(COUNT_FILE_ENV).ok().filter(|p| !p.is_empty());
    for arg in &args.raw {
        match arg.split_once('=') {
            Some(("out", value)) => path = Some(value.to_string()),
            _ => fail(format!(
                "unknown argument {arg:?}; the only argument is out=PATH"
            )),
        }
    }
    let Some(path) = path else {
        return Output::Stderr;
    };
    let path = path.replace("%p", &std::process::id().to_string());
    // Without blocking, and then looked at: a FIFO or a device named instead of a file
    // is refused rather than waited on (opening a FIFO to write waits for a reader).
    use std::os::unix::fs::OpenOptionsExt;
    let opened = OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path);
    match opened {
        Ok(file) if file.metadata().is_ok_and(|m| m.is_file()) => Output::File(file),
        Ok(_) => fail(format!("{path} is not a regular file; refused")),
        Err(e) => fail(format!("cannot open {path}: {e}")),
    }
}

struct Plugin;

impl HasCallbacks for Plugin {}

impl Register for Plugin {
    /// Registers this plugin's own callbacks only (the crate's defaults would take a
    /// global lock on every system call).
    fn register_default(
        &mut self,
        id: PluginId,
        args: &Args,
        info: &Info,
    ) -> qemu_plugin::Result<()> {
        if info.system.is_some() {
            fail("user mode only (qemu-<arch>), not full-system emulation".to_string());
        }
        let out = output(args);
        let _ = STATE.set(Mutex::new(State {
            pid: std::process::id(),
            threads: HashMap::new(),
            out,
        }));
        // The guest finds this record and knows that it is counted (an emulator without
        // plugins ignores QEMU_PLUGIN without a word).
        if let Some(mut state) = state() {
            state.write(0, gettid(), 0, None, End::Loaded);
        }
        qemu_plugin::qemu_plugin_register_vcpu_tb_trans_cb(id, Some(on_translate))?;
        qemu_plugin::qemu_plugin_register_vcpu_syscall_cb(id, Some(on_syscall));
        qemu_plugin::qemu_plugin_register_vcpu_init_cb(id, Some(on_vcpu_init))?;
        qemu_plugin::qemu_plugin_register_vcpu_exit_cb(id, Some(on_vcpu_exit))?;
        qemu_plugin::qemu_plugin_register_atexit_cb(id, |_| at_exit())?;
        Ok(())
    }
}

qemu_plugin::register!(Plugin);
