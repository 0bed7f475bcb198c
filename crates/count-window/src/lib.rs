//! Measurement windows for guest instruction counts under QEMU user mode.
//!
//! A program marks the code whose cost it wants counted with [`open`] and [`close`] (or
//! the RAII [`Window`] from [`window`]). Run natively, or under QEMU without the counting
//! plugin, a marker is one failed system call (see below) and nothing else. Run under
//! `qemu-<arch> -plugin libipc_matrix_qemu_count.so` (the `ipc-matrix-qemu-count` crate,
//! a separate GPL-2.0-or-later cdylib that nothing links), the plugin sees each marker
//! and writes one [`Record`] per window: the guest instructions the marking thread
//! executed between its open and its close.
//!
//! # The marker
//!
//! A marker is the system call [`MARKER_SYSCALL`] (`0xC0DE0`, the same number on every
//! architecture) with the arguments `(MARKER_MAGIC, op, label_low32, label_high32)`.
//! No Linux architecture has a system call with that number (the highest are below
//! 500; MIPS's ABIs start at 4000, 5000 and 6000), so the kernel answers `ENOSYS` at the
//! cost of one kernel entry, and QEMU user mode answers the same without calling the
//! host. It was chosen to work unchanged on x86_64, aarch64, s390x, armv7, riscv64 and
//! ppc64le:
//! - below `0xF0000`: 32-bit Arm treats `0xF0000..` as its private calls (QEMU handles
//!   them itself, without the plugin seeing them; the kernel raises `SIGILL` above
//!   `0xF07FF`);
//! - below `0x4000_0000` (x86_64's x32 bit), and not `0x1EBE` (ppc64's endian switch);
//! - every argument is 32 bits wide, so 32-bit guests pass the same values as 64-bit
//!   ones: a 64-bit label travels as two halves.
//!
//! `errno` is saved and restored around the call, so a marker leaves no trace in the
//! program's state. A seccomp filter that forbids unknown system calls would see it:
//! container runtimes' default filters answer `EPERM`, which is just as harmless.
//!
//! # Windows and labels
//!
//! Windows belong to the thread that opens them: a close matches the open of the same
//! label on the same thread. A thread may have several windows open at once if their
//! labels differ (nested or overlapping), and each counts all of that thread's
//! instructions while it is open. The harness picks the labels, for example one for the
//! measuring thread's round trips and one for the peer's serving threads. What the
//! plugin does with an unusual sequence is part of [`End`].
//!
//! # Pauses
//!
//! [`pause`] stops the counting of every window open on the calling thread until its
//! guard is dropped: waiting for another process is not the work a window measures, and
//! how many instructions a wait takes depends on timing. A transport pauses around its
//! waits; the harness turns the markers on with [`mark_pauses`] when it counts, so a
//! wait costs nothing more otherwise.
//!
//! # Output
//!
//! The plugin appends one JSON object per line to the file named by its `out=`
//! argument, else by the environment variable [`COUNT_FILE_ENV`]
//! (`IPC_MATRIX_COUNT_FILE`), else to standard error. `%p` in the path becomes the QEMU
//! process's pid, so one setting serves a measuring process and its peer. Lines are
//! written whole, one `write(2)` per window in append mode, when the window ends: a
//! process killed later keeps what it had counted. [`read_records`] reads such a file.

use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// The system call number of a marker, the same on every architecture (see the crate
/// docs for why it is free everywhere).
pub const MARKER_SYSCALL: i64 = 0xC0DE0;
/// The first argument of a marker ("ipcm"): a call with the marker's number but another
/// first argument is not a marker.
pub const MARKER_MAGIC: u32 = 0x6970_636D;
/// The second argument of a marker that opens a window.
pub const OP_OPEN: u32 = 1;
/// The second argument of a marker that closes a window.
pub const OP_CLOSE: u32 = 2;
/// The second argument of a marker that pauses the counting of every window open on the
/// calling thread (see [`pause`]).
pub const OP_PAUSE: u32 = 3;
/// The second argument of a marker that resumes it.
pub const OP_RESUME: u32 = 4;
/// The environment variable that names the plugin's output file (read by the QEMU
/// process, which passes its environment on to the guest).
pub const COUNT_FILE_ENV: &str = "IPC_MATRIX_COUNT_FILE";

/// Opens window `label` on the calling thread.
pub fn open(label: u64) {
    mark(OP_OPEN, label);
}

/// Closes window `label` on the calling thread.
pub fn close(label: u64) {
    mark(OP_CLOSE, label);
}

/// Opens window `label` on the calling thread; the returned guard closes it when dropped.
#[must_use = "the window closes when the guard is dropped"]
pub fn window(label: u64) -> Window {
    open(label);
    Window {
        label,
        _not_send: PhantomData,
    }
}

/// An open window, closed on drop (see [`window`]). It must be dropped on the thread
/// that opened it, which `!Send` enforces.
#[derive(Debug)]
pub struct Window {
    label: u64,
    _not_send: PhantomData<*const ()>,
}

impl Window {
    /// The window's label.
    pub fn label(&self) -> u64 {
        self.label
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        close(self.label);
    }
}

/// Whether [`pause`] issues markers: off until [`mark_pauses`], so that code which may
/// wait (a transport) costs nothing more when nobody counts.
static PAUSES_MARKED: AtomicBool = AtomicBool::new(false);

/// Makes [`pause`] issue its markers in this process: call it when the process runs
/// under the counting plugin. Windows are opened only by code that knows it counts, but
/// waits happen in code that does not (a transport's wait for the other side).
pub fn mark_pauses() {
    PAUSES_MARKED.store(true, Ordering::Relaxed);
}

/// Pauses the counting of every window open on the calling thread until the returned
/// guard is dropped: for waiting, whose instructions depend on how long the other side
/// takes (a spin, a futex wait that returns early, one more look at a counter), not on
/// the work measured. Pauses nest; counting resumes when the outermost ends. Without
/// [`mark_pauses`] it issues nothing: one relaxed load.
#[must_use = "counting resumes when the guard is dropped"]
pub fn pause() -> Pause {
    let marked = PAUSES_MARKED.load(Ordering::Relaxed);
    if marked {
        mark(OP_PAUSE, 0);
    }
    Pause {
        marked,
        _not_send: PhantomData,
    }
}

/// A pause of the calling thread's counting (see [`pause`]), resumed on drop.
#[derive(Debug)]
pub struct Pause {
    marked: bool,
    _not_send: PhantomData<*const ()>,
}

impl Drop for Pause {
    fn drop(&mut self) {
        if self.marked {
            mark(OP_RESUME, 0);
        }
    }
}

/// Issues one marker. Never inlined, so a marker costs the same instructions wherever it
/// is called from.
#[inline(never)]
fn mark(op: u32, label: u64) {
    #[cfg(target_os = "linux")]
    // SAFETY: an unknown system call number has no effect but the ENOSYS result; errno
    // is thread-local and restored before returning.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        // `as c_long` keeps the 32 bits as they are, also where c_long is 32 bits wide.
        libc::syscall(
            MARKER_SYSCALL as libc::c_long,
            MARKER_MAGIC as libc::c_long,
            op as libc::c_long,
            (label as u32) as libc::c_long,
            ((label >> 32) as u32) as libc::c_long,
        );
        *errno = saved;
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (op, label);
}

/// How a window ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum End {
    /// Closed by [`close`] on its own thread: the normal case.
    Close,
    /// The thread opened the same label again while it was open: the first window ends
    /// there (this record) and a new one starts.
    Reopen,
    /// The thread exited with the window open; counted up to its exit.
    ThreadExit,
    /// The process exited (or was killed by a signal QEMU saw) with the window open;
    /// counted up to then. A process killed by SIGKILL leaves no record of its open
    /// windows.
    ProcessExit,
    /// A close with no open window of that label on that thread; `insns` is `None`.
    CloseWithoutOpen,
    /// Not a window: the plugin's first record in a process, written as it starts
    /// (`label` 0, `insns` `None`, `plugin_api` set). A process whose count file lacks it
    /// was not counted, whatever it asked for: its emulator ignored the plugin.
    Loaded,
}

/// One line of the plugin's output: one window of one thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The window's label.
    pub label: u64,
    /// The (host) pid of the QEMU process, which is the guest's pid.
    pub pid: u32,
    /// The thread id, the same in the guest and on the host under QEMU user mode.
    pub tid: u32,
    /// QEMU's vCPU index of the thread (reused after a thread exits).
    pub vcpu: u32,
    /// Guest instructions the thread executed inside the window (`None` for
    /// [`End::CloseWithoutOpen`]).
    pub insns: Option<u64>,
    /// How the window ended.
    pub end: End,
    /// [`End::Loaded`] records: the plugin API version the plugin was built for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_api: Option<u32>,
}

/// The largest output file read, in bytes (1 GiB, about 12 million windows of about 90
/// bytes each). A larger file is refused, with its path, before anything is read.
pub const MAX_COUNT_FILE_BYTES: u64 = 1 << 30;
/// The longest line that can be a [`Record`], in bytes (a record takes about 90); longer
/// lines are skipped without being held in memory whole.
pub const MAX_RECORD_LINE_BYTES: usize = 4096;

/// Reads the plugin's output: every line that is a [`Record`] (other lines, such as
/// a program's own output when the plugin wrote to standard error, are skipped).
/// Bounded as [`for_each_record`] is.
pub fn read_records(path: &Path) -> std::io::Result<Vec<Record>> {
    let mut records = Vec::new();
    for_each_record(path, |record| records.push(record))?;
    Ok(records)
}

/// Hands every [`Record`] of the plugin's output to `each`, line by line, holding one
/// line at a time (at most [`MAX_RECORD_LINE_BYTES`]): a file over
/// [`MAX_COUNT_FILE_BYTES`] is refused with an error naming it and the bound.
pub fn for_each_record(path: &Path, mut each: impl FnMut(Record)) -> std::io::Result<()> {
    use std::io::{BufRead, Read};
    let located =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let file = open_regular_file(path).map_err(located)?;
    let size = file.metadata().map_err(located)?.len();
    if size > MAX_COUNT_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}: {size} bytes, more than the {MAX_COUNT_FILE_BYTES} bytes (1 GiB) an instruction count file may hold",
                path.display()
            ),
        ));
    }
    let mut reader = std::io::BufReader::new(file.take(MAX_COUNT_FILE_BYTES));
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_RECORD_LINE_BYTES as u64)
            .read_until(b'\n', &mut line)
            .map_err(located)?;
        if read == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') && line.len() == MAX_RECORD_LINE_BYTES {
            // Too long to be a record: skip the rest of the line unread.
            skip_line(&mut reader).map_err(located)?;
            continue;
        }
        if let Some(record) = std::str::from_utf8(&line).ok().and_then(parse_record) {
            each(record);
        }
    }
}

/// Opens `path` for reading if it is a regular file. Opened without blocking and looked
/// at before a byte is read, so a FIFO, socket or device named instead is refused rather
/// than waited on for ever.
pub fn open_regular_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({}); refused", describe_file_kind(kind)),
        ));
    }
    Ok(file)
}

/// What a file that is not a regular one is, in words: `a FIFO`, `a socket`, `a device`.
pub fn describe_file_kind(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_dir() {
        "a folder"
    } else {
        "not a file"
    }
}

/// The plugin API of the counting plugin that runs in process `pid`, read from its count
/// file's [`End::Loaded`] record; `None` when the file holds none (no plugin ran there).
pub fn loaded_plugin_api(path: &Path, pid: u32) -> std::io::Result<Option<u32>> {
    let mut api = None;
    for_each_record(path, |r| {
        if r.end == End::Loaded && r.pid == pid && api.is_none() {
            api = r.plugin_api.or(Some(0));
        }
    })?;
    Ok(api)
}

/// Skips the input up to and including the next '\n'.
fn skip_line(reader: &mut impl std::io::BufRead) -> std::io::Result<()> {
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(());
        }
        match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => {
                reader.consume(at + 1);
                return Ok(());
            }
            None => {
                let all = buffer.len();
                reader.consume(all);
            }
        }
    }
}

/// One line as a [`Record`], when it is one.
fn parse_record(line: &str) -> Option<Record> {
    let line = line.trim_end();
    line.starts_with('{')
        .then(|| serde_json::from_str(line).ok())
        .flatten()
}

/// Parses the plugin's output (see [`read_records`]).
pub fn parse_records(text: &str) -> Vec<Record> {
    text.lines().filter_map(parse_record).collect()
}

/// A deterministic workload for the plugin's tests and `scripts/count-demo.sh`.
pub mod demo;
pub mod heap;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_harmless_natively() {
        // SAFETY: errno is thread-local.
        unsafe { *libc::__errno_location() = 1234 };
        open(7);
        close(7);
        {
            let w = window(u64::MAX);
            assert_eq!(w.label(), u64::MAX);
        }
        close(8);
        // SAFETY: errno's location is this thread's, valid for its life.
        assert_eq!(unsafe { *libc::__errno_location() }, 1234);
    }

    #[test]
    fn the_marker_number_is_no_system_call() {
        // SAFETY: an unknown system call has no effect.
        let ret = unsafe { libc::syscall(MARKER_SYSCALL as libc::c_long, 0, 0, 0, 0) };
        assert_eq!(ret, -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOSYS)
        );
    }

    #[test]
    fn count_files_are_read_line_by_line_within_bounds() {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("count-window-bounds-{}.jsonl", std::process::id()));
        let record = r#"{"label":5,"pid":1,"tid":1,"vcpu":0,"insns":7,"end":"close"}"#;
        let long = format!("{{{}}}", "x".repeat(3 * MAX_RECORD_LINE_BYTES));
        std::fs::write(
            &path,
            format!("{record}\n{long}\n{record}\nnot json\n{record}"),
        )
        .unwrap();
        let records = read_records(&path).unwrap();
        assert_eq!(records.len(), 3, "{records:?}");
        assert!(records.iter().all(|r| r.insns == Some(7)));
        // Past the bound (a sparse file: nothing is written), refused before any read.
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(MAX_COUNT_FILE_BYTES + 1).unwrap();
        let error = read_records(&path).unwrap_err().to_string();
        let _ = std::fs::remove_file(&path);
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(error.contains("1 GiB"), "{error}");
    }

    #[test]
    fn a_fifo_named_as_a_count_file_is_refused_not_waited_on() {
        let path = std::env::temp_dir().join(format!("count-window-fifo-{}", std::process::id()));
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string naming a path in the temporary folder.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let error = read_records(&path).unwrap_err();
        let _ = std::fs::remove_file(&path);
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
        assert!(error.to_string().contains("a FIFO"), "{error}");
    }

    #[test]
    fn the_loaded_record_names_the_plugin_api_of_its_process() {
        let path =
            std::env::temp_dir().join(format!("count-window-loaded-{}.jsonl", std::process::id()));
        std::fs::write(
            &path,
            concat!(
                r#"{"label":0,"pid":7,"tid":7,"vcpu":0,"insns":null,"end":"loaded","plugin_api":1}"#,
                "\n",
                r#"{"label":5,"pid":8,"tid":8,"vcpu":0,"insns":9,"end":"close"}"#,
                "\n"
            ),
        )
        .unwrap();
        let (seven, eight) = (loaded_plugin_api(&path, 7), loaded_plugin_api(&path, 8));
        let _ = std::fs::remove_file(&path);
        assert_eq!(seven.unwrap(), Some(1));
        assert_eq!(
            eight.unwrap(),
            None,
            "a process without its loaded record was not counted"
        );
    }

    #[test]
    fn records_round_trip_through_json_lines() {
        let record = Record {
            label: 1 << 40,
            pid: 10,
            tid: 11,
            vcpu: 0,
            insns: Some(12345),
            end: End::ThreadExit,
            plugin_api: None,
        };
        let line = serde_json::to_string(&record).unwrap();
        assert_eq!(
            line,
            r#"{"label":1099511627776,"pid":10,"tid":11,"vcpu":0,"insns":12345,"end":"thread-exit"}"#
        );
        let unmatched =
            r#"{"label":3,"pid":1,"tid":1,"vcpu":2,"insns":null,"end":"close-without-open"}"#;
        let text = format!("program output\n{line}\n{unmatched}\n");
        let records = parse_records(&text);
        assert_eq!(records.len(), 2);
        assert_eq!(records[0], record);
        assert_eq!(records[1].end, End::CloseWithoutOpen);
        assert_eq!(records[1].insns, None);
    }
}
