//! The logging scenario (seed 002): the same short non-ASCII line, numbered, written
//! `iterations` times to a file, one way per cell (`LogSink`). Time is taken per batch of
//! lines; afterwards the file is read back and must equal, byte for byte, what was logged:
//! nothing lost, nothing reordered, nothing added.
//!
//! The file has no name ([`unnamed_file`]): it is written and read back through the
//! descriptor this cell keeps, and sinks that open their own file (`tracing-appender`)
//! open `/proc/self/fd/<descriptor>`, the same file. A crash at any moment leaves nothing
//! on disk.

use crate::context::Tally;
use crate::counting::Counting;
use crate::failure::setup_failure;
use crate::fault::{Fault, FaultKind};
use ipc_matrix_results::{Failure, FailureKind, LoggingStats};
use ipc_matrix_spec::{Cell, LogSink, LogWrite};
use ipc_matrix_transport::{allowed_cpus, set_thread_cpus, unnamed_file};
use std::fs::File;
use std::io::{BufWriter, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tracing_appender::rolling::{RollingFileAppender, Rotation};

/// Lines per timed batch: one clock read per batch keeps the clock out of the cost of a
/// line (a buffered line costs tens of nanoseconds, about as much as reading the clock).
const BATCH: u64 = 1000;
/// The text every line repeats after its number: Korean, Chinese and symbols, as in the
/// seed's UTF-8 log line.
const PHRASE: &str = "측정 완료 — 온도 23.5°C, 압력 1013 hPa, 状态正常 ✓ ";
/// Width of the line number at the start of every line.
const NUMBER_WIDTH: usize = 7;

/// All lines of a cell, one after another, each exactly `line_bytes` long with its '\n'.
pub struct LogLines {
    text: String,
    line_bytes: usize,
}

impl LogLines {
    pub fn new(count: u64, line_bytes: usize) -> Self {
        let mut text = String::with_capacity(count as usize * line_bytes);
        for index in 0..count {
            let start = text.len();
            text.push_str(&format!("{index:0NUMBER_WIDTH$} "));
            // Whole characters of the phrase while they fit, then ASCII padding, so every
            // line is valid UTF-8 of exactly the same length.
            for c in PHRASE.chars().cycle() {
                if text.len() - start + c.len_utf8() > line_bytes - 1 {
                    break;
                }
                text.push(c);
            }
            while text.len() - start < line_bytes - 1 {
                text.push('.');
            }
            text.push('\n');
        }
        Self { text, line_bytes }
    }

    /// Line `index` without its '\n'.
    pub fn line(&self, index: u64) -> &str {
        let start = index as usize * self.line_bytes;
        &self.text[start..start + self.line_bytes - 1]
    }

    /// Line `index` with its '\n'.
    fn line_with_newline(&self, index: u64) -> &[u8] {
        let start = index as usize * self.line_bytes;
        &self.text.as_bytes()[start..start + self.line_bytes]
    }

    pub fn count(&self) -> u64 {
        (self.text.len() / self.line_bytes) as u64
    }

    pub fn bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    /// Why `file` is not exactly these lines, naming the first line that differs.
    pub fn difference(&self, file: &[u8]) -> Option<String> {
        let expected = self.bytes();
        if file == expected {
            return None;
        }
        let first = expected
            .iter()
            .zip(file)
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.len().min(file.len()));
        let line = first / self.line_bytes;
        let shown = |bytes: &[u8]| {
            let start = line * self.line_bytes;
            let end = (start + self.line_bytes).min(bytes.len());
            String::from_utf8_lossy(bytes.get(start..end).unwrap_or_default())
                .trim_end()
                .to_string()
        };
        Some(format!(
            "the file holds {} bytes ({} whole lines), {} were logged ({} lines); \
             first difference at byte {first}, line {line}: expected {:?}, found {:?}",
            file.len(),
            file.len() / self.line_bytes,
            expected.len(),
            self.count(),
            shown(expected),
            shown(file),
        ))
    }
}

/// How many budgets a whole logging cell may take, once its lines are built: the writing
/// has one (checked between batches), closing the writer and reading the file back have
/// what remains of this many. Past it the cell fails, whatever the writer is doing.
pub const CELL_BUDGETS: u32 = 2;

/// Runs a logging cell: writes, times, closes, reads back, compares. The work runs on a
/// thread of its own (pinned as this one is: it inherits the CPUs), so that this thread
/// can fail the cell after [`CELL_BUDGETS`] x `budget` even when a write never returns;
/// such a writer is told to stop at its next batch and left behind.
pub(crate) fn logging(
    cell: &Cell,
    log: &LogWrite,
    helper_cpus: &[usize],
    fault: Option<Fault>,
    tally: &mut Tally,
) -> Result<(), Failure> {
    let line_bytes = usize::try_from(cell.payload_bytes)
        .map_err(|_| setup_failure("the line length does not fit in memory here".into()))?;
    let total = cell
        .warmup
        .checked_add(cell.iterations)
        .ok_or_else(|| setup_failure("warmup + iterations overflow a 64-bit count".into()))?;
    let lines = LogLines::new(total, line_bytes);
    let file = unnamed_file().map_err(|e| setup_failure(format!("creating the log file: {e}")))?;
    let progress = Arc::new(Progress::default());
    let writer = Writer {
        cell: cell.clone(),
        log: *log,
        helper_cpus: helper_cpus.to_vec(),
        fault,
        counting: tally.counting.clone(),
        progress: Arc::clone(&progress),
    };
    let (send, receive) = mpsc::channel();
    let limit = log.budget.saturating_mul(CELL_BUDGETS);
    std::thread::Builder::new()
        .name("ipc-matrix-logging".into())
        .spawn(move || {
            let mut own = Tally::default();
            let outcome = writer.run(&lines, &file, &mut own);
            let _ = send.send((outcome, own));
        })
        .map_err(|e| setup_failure(format!("starting the logging thread: {e}")))?;
    match receive.recv_timeout(limit) {
        Ok((outcome, own)) => {
            tally.recorder = own.recorder;
            tally.first_round_trip = own.first_round_trip;
            tally.measured_time = own.measured_time;
            tally.logging = own.logging;
            tally.operations_counted = own.operations_counted;
            outcome
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            progress.stop.store(true, Ordering::Relaxed);
            let line = progress.line.load(Ordering::Relaxed);
            Err(Failure {
                kind: FailureKind::Timeout,
                round_trip: Some(line),
                reason: format!(
                    "{}: {} within {:?} ({CELL_BUDGETS} x the cell's budget of {:?}); the writer is told to stop and left behind",
                    cell.id,
                    if line < total {
                        format!("the batch of lines from line {line} of {total} did not end")
                    } else {
                        format!("all {total} lines were written, but closing the writer and reading the file back did not end")
                    },
                    limit,
                    log.budget
                ),
            })
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(setup_failure(format!(
            "{}: the logging thread ended without a result",
            cell.id
        ))),
    }
}

/// How far the writer got (the first line of the batch it is writing), and the order to
/// stop, between the logging thread and the cell's thread.
#[derive(Default)]
struct Progress {
    line: AtomicU64,
    stop: AtomicBool,
}

/// What the logging thread is given.
struct Writer {
    cell: Cell,
    log: LogWrite,
    helper_cpus: Vec<usize>,
    fault: Option<Fault>,
    counting: Option<Counting>,
    progress: Arc<Progress>,
}

impl Writer {
    /// Writes every line through the cell's sink, closes it, reads the file back and
    /// compares; fills `tally`.
    fn run(&self, lines: &LogLines, file: &File, tally: &mut Tally) -> Result<(), Failure> {
        let (cell, sink) = (&self.cell, self.log.sink);
        let line_bytes = lines.line_bytes;
        let batches = Batches {
            cell,
            budget: self.log.budget,
            progress: &self.progress,
            stall_at: self
                .fault
                .filter(|f| f.kind == FaultKind::Stall)
                .map(|f| f.at),
            count_label: self.counting.as_ref().map(|c| c.measuring_label()),
        };
        let started = Instant::now();
        let drain = match sink {
            LogSink::Buffered => write_lines(BufWriter::new(file), &batches, lines, tally)?,
            LogSink::WritePerLine => write_lines(file, &batches, lines, tally)?,
            LogSink::TracingBlocking => {
                let appender = appender_of(file)?;
                trace_lines(appender, &batches, lines, tally, || ())?
            }
            LogSink::TracingNonBlocking => {
                let appender = appender_of(file)?;
                // The worker thread inherits the CPUs of the thread that starts it: let it
                // run beside this one rather than on the one CPU this thread is pinned to.
                let own = allowed_cpus();
                let _ = set_thread_cpus(&self.helper_cpus);
                let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
                    .lossy(false)
                    .thread_name("ipc-matrix-log-worker")
                    .finish(appender);
                let _ = set_thread_cpus(&own);
                // Dropping the guard is the appender's shutdown: it waits for the worker.
                trace_lines(writer, &batches, lines, tally, move || drop(guard))?
            }
        };
        let total = started.elapsed();
        tally.measured_time = total;

        let mut written = read_back(file, lines.bytes().len()).map_err(|e| Failure {
            kind: FailureKind::PeerGone,
            round_trip: None,
            reason: format!("reading the log file back: {e}"),
        })?;
        if let Some(fault) = self.fault.filter(|f| f.kind != FaultKind::Stall) {
            damage(&mut written, fault, line_bytes);
        }
        if let Some(difference) = lines.difference(&written) {
            let shutdown = match sink {
                LogSink::TracingNonBlocking => {
                    " (read right after the non-blocking writer's guard was dropped, which is its shutdown)"
                }
                _ => "",
            };
            return Err(Failure {
                kind: FailureKind::Mismatch,
                round_trip: None,
                reason: format!("{sink}: {difference}{shutdown}"),
            });
        }
        tally.logging = Some(LoggingStats {
            lines: lines.count(),
            bytes: written.len() as u64,
            ns_per_line: total.as_nanos() as f64 / lines.count().max(1) as f64,
            drain_ns: drain.as_nanos() as u64,
        });
        Ok(())
    }
}

/// The harness's own test of the read-back check: what a lossy or reordering writer
/// would leave. `truncate` loses line `at`; `flip-byte` swaps it with the next line.
/// (`stall` is no damage: the write of line `at` never returns, see [`Batches`].)
fn damage(file: &mut Vec<u8>, fault: Fault, line_bytes: usize) {
    let start = fault.at as usize * line_bytes;
    if file.len() < start + 2 * line_bytes {
        return;
    }
    match fault.kind {
        FaultKind::FlipByte => {
            let (first, second) = file[start..start + 2 * line_bytes].split_at_mut(line_bytes);
            first.swap_with_slice(second);
        }
        _ => {
            file.drain(start..start + line_bytes);
        }
    }
}

/// `tracing-appender`'s file appender (never rotating) on `file`: it opens its file by a
/// path, so it is given `/proc/self/fd/<descriptor>`, which opens this same file.
fn appender_of(file: &File) -> Result<RollingFileAppender, Failure> {
    let descriptor = file.as_raw_fd().to_string();
    RollingFileAppender::builder()
        .rotation(Rotation::NEVER)
        .filename_prefix(descriptor.as_str())
        .build("/proc/self/fd")
        .map_err(|e| {
            setup_failure(format!(
                "opening the log file through /proc/self/fd/{descriptor}: {e}"
            ))
        })
}

/// The whole file from its start, at most one byte more than `expected` (a longer file
/// differs already; reading on would only cost memory).
fn read_back(file: &File, expected: usize) -> std::io::Result<Vec<u8>> {
    let mut reader = file;
    reader.rewind()?;
    let mut bytes = Vec::with_capacity(expected + 1);
    reader.take(expected as u64 + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes every line with `write_all` (unbuffered `File`: one write(2) per line), then
/// flushes and closes; returns how long that took after the last line.
fn write_lines(
    mut out: impl Write,
    batches: &Batches,
    lines: &LogLines,
    tally: &mut Tally,
) -> Result<Duration, Failure> {
    let failed = |index: u64, e: std::io::Error| Failure {
        kind: FailureKind::PeerGone,
        round_trip: Some(index),
        reason: format!("line {index}: writing to the log file: {e}"),
    };
    batches.write(lines.count(), tally, |index| {
        out.write_all(lines.line_with_newline(index))
            .map_err(|e| failed(index, e))
    })?;
    let closing = Instant::now();
    out.flush().map_err(|e| failed(lines.count(), e))?;
    drop(out);
    Ok(closing.elapsed())
}

/// Logs every line as a `tracing` event through a formatter that prints the message
/// alone, so the file can be compared with the lines; `shutdown` ends the writer.
fn trace_lines<W>(
    writer: W,
    batches: &Batches,
    lines: &LogLines,
    tally: &mut Tally,
    shutdown: impl FnOnce(),
) -> Result<Duration, Failure>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let subscriber = tracing_subscriber::fmt()
        .with_writer(writer)
        .without_time()
        .with_level(false)
        .with_target(false)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        batches.write(lines.count(), tally, |index| {
            tracing::info!("{}", lines.line(index));
            Ok(())
        })
    })?;
    // The subscriber (and with it the writer) is gone once `with_default` returns.
    let closing = Instant::now();
    shutdown();
    Ok(closing.elapsed())
}

/// How the lines are written: in timed batches, within the budget, counted when the
/// cell is counted.
struct Batches<'a> {
    cell: &'a Cell,
    /// Bounds the writing: a file system that stops taking lines fails the cell at the
    /// next batch.
    budget: Duration,
    progress: &'a Progress,
    /// The harness's own test of the budget: the write of this line never returns.
    stall_at: Option<u64>,
    /// The label of the instruction-counting windows, when the cell is counted.
    count_label: Option<u64>,
}

impl Batches<'_> {
    /// Calls `write_line` for lines 0..count; records the mean time per line of every
    /// batch after the warm-up lines, and counts their instructions (the writes alone: the
    /// clock, the deadline check and the batch bookkeeping stay outside the window).
    fn write(
        &self,
        count: u64,
        tally: &mut Tally,
        mut write_line: impl FnMut(u64) -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        let deadline = Instant::now() + self.budget;
        let mut index = 0;
        while index < count {
            self.progress.line.store(index, Ordering::Relaxed);
            if Instant::now() > deadline || self.progress.stop.load(Ordering::Relaxed) {
                return Err(Failure {
                    kind: FailureKind::Timeout,
                    round_trip: Some(index),
                    reason: format!(
                        "{}: line {index} of {count}: the lines before it took longer than the cell's budget ({:?})",
                        self.cell.id, self.budget
                    ),
                });
            }
            let end = (index + BATCH).min(count);
            let measured = index >= self.cell.warmup;
            let counted = self.count_label.filter(|_| measured);
            let started = Instant::now();
            if let Some(label) = counted {
                ipc_matrix_count_window::open(label);
            }
            for line in index..end {
                if self.stall_at == Some(line) {
                    stall();
                }
                write_line(line)?;
            }
            if let Some(label) = counted {
                ipc_matrix_count_window::close(label);
            }
            let elapsed = started.elapsed();
            if measured {
                tally.recorder.record(elapsed / (end - index) as u32);
                if counted.is_some() {
                    *tally.operations_counted.get_or_insert(0) += end - index;
                }
            }
            if index == 0 {
                tally.first_round_trip = Some(elapsed / (end - index) as u32);
            }
            index = end;
        }
        self.progress.line.store(count, Ordering::Relaxed);
        Ok(())
    }
}

/// A write that never returns (the `stall` fault): this thread sleeps for good.
fn stall() -> ! {
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_utf8_of_one_length() {
        let lines = LogLines::new(3, 64);
        assert_eq!(lines.count(), 3);
        assert_eq!(lines.bytes().len(), 192);
        assert!(
            lines.line(2).starts_with("0000002 측정"),
            "{}",
            lines.line(2)
        );
        assert!(!lines.line(0).is_ascii());
        assert!(std::str::from_utf8(lines.bytes()).is_ok());
        assert!(lines.bytes().ends_with(b"\n"));
    }

    #[test]
    fn a_missing_or_swapped_line_is_named() {
        let lines = LogLines::new(4, 40);
        assert_eq!(lines.difference(lines.bytes()), None);
        let short = &lines.bytes()[..120];
        let why = lines.difference(short).expect("a short file differs");
        assert!(why.contains("3 whole lines"), "{why}");
        assert!(why.contains("line 3"), "{why}");
        let mut swapped = lines.bytes().to_vec();
        swapped[40..80].copy_from_slice(&lines.bytes()[80..120]);
        swapped[80..120].copy_from_slice(&lines.bytes()[40..80]);
        let why = lines.difference(&swapped).expect("swapped lines differ");
        assert!(why.contains("line 1"), "{why}");
    }
}
