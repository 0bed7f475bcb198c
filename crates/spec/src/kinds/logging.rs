//! `logging` (seed 002): the cost of writing log lines to a file, per way of writing
//! them (one cell per sink); the file is then read back and compared with what was
//! logged.

use crate::keys::Keys;
use crate::kind_spec::{override_duration, About, KindSpec, OverMaxPayload, Settings};
use crate::model::{Overrides, TransportKind};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// The most bytes a `logging` cell writes (lines x line length): it holds all its lines
/// in memory, and reads the file back into memory to compare it.
pub const MAX_LOG_BYTES: u64 = 1 << 30;

/// The longest log line of a `logging` cell (64 KiB).
pub const MAX_LOG_LINE: u64 = 64 << 10;

/// The most lines of a `logging` cell (warm-up included): line numbers are 7 digits wide.
pub const MAX_LOG_LINES: u64 = 10_000_000;

/// A `logging` scenario: its sinks (one cell each) and the time the whole write may take.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggingScenario {
    pub sinks: Vec<LogSink>,
    pub budget: Duration,
}

/// `logging` cells.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LogWrite {
    /// How the lines are written.
    pub sink: LogSink,
    /// The time the whole write may take: a file system that stops taking lines fails
    /// the cell once it has passed.
    pub budget: Duration,
}

/// A way of writing log lines to a file (`logging` cells).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogSink {
    /// Formatted into a `BufWriter` (8 KiB buffer), as a buffered C++ stream does.
    Buffered,
    /// One write(2) per line, no buffer.
    WritePerLine,
    /// `tracing` with `tracing-appender`'s file appender, written by the logging thread.
    TracingBlocking,
    /// `tracing` with `tracing-appender`'s non-blocking writer (lossless mode): a worker
    /// thread writes; the cost includes waiting for it at shutdown.
    TracingNonBlocking,
}

impl LogSink {
    pub fn as_str(self) -> &'static str {
        match self {
            LogSink::Buffered => "buffered",
            LogSink::WritePerLine => "write-per-line",
            LogSink::TracingBlocking => "tracing-blocking",
            LogSink::TracingNonBlocking => "tracing-non-blocking",
        }
    }
}

impl fmt::Display for LogSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Log lines written to a file.
pub(crate) struct Logging;

impl Settings for LoggingScenario {
    type Cell = LogWrite;

    fn parse(keys: &mut Keys<'_>) -> Option<LoggingScenario> {
        let raw = keys.raw;
        let sinks = keys.list(
            "sinks",
            raw.sinks.as_deref(),
            "a logging scenario lists its sinks: buffered, write-per-line, tracing-blocking, tracing-non-blocking",
        );
        let budget = keys.required_duration(
            "budget",
            raw.budget.as_ref(),
            "the time the whole write may take, e.g. 30s",
        );
        Some(LoggingScenario {
            sinks: sinks?,
            budget: budget?,
        })
    }

    fn override_with(&mut self, overrides: &Overrides) {
        override_duration(&overrides.budget, &mut self.budget);
    }

    fn variant_count(&self) -> Option<u64> {
        Some(self.sinks.len() as u64)
    }

    fn cells(&self) -> Vec<LogWrite> {
        let budget = self.budget;
        self.sinks
            .iter()
            .map(|&sink| LogWrite { sink, budget })
            .collect()
    }

    fn variant_label(write: &LogWrite) -> Option<String> {
        Some(write.sink.to_string())
    }
}

impl KindSpec for Logging {
    type Scenario = LoggingScenario;
    type Cell = LogWrite;
    const ABOUT: About = About {
        name: "logging",
        transports: &[TransportKind::File],
        stacks: false,
        keys: &["sinks", "budget"],
        max_payload: MAX_LOG_LINE,
        over_max_payload: OverMaxPayload::NotA("log line"),
        stamp: 16,
        max_round_trips: MAX_LOG_LINES,
        round_trips: "lines",
        processes: 1,
        // The lines in memory and the file read back.
        payload_copies: 2,
    };

    /// Every line, in memory and read back from the file.
    fn messages_need(_: &LogWrite, payload: u64, round_trips: Option<u64>) -> Option<u64> {
        payload
            .checked_mul(round_trips?)?
            .checked_mul(Self::ABOUT.payload_copies)
    }

    fn check_volume(lines: u64, longest: u64) -> Option<String> {
        longest.checked_mul(lines).is_none_or(|bytes| bytes > MAX_LOG_BYTES).then(|| {
            format!(
                "{lines} lines of {longest} B are more than {MAX_LOG_BYTES} B (1 GiB), the most a logging cell writes (it holds its lines in memory)"
            )
        })
    }
}
