//! The terminal: how much is printed (`--quiet`, `--verbose`), where human text goes
//! (stdout, or stderr when stdout carries JSON Lines), whether it is coloured
//! (`--color`, `NO_COLOR`, `CLICOLOR_FORCE`), and how wide tables may be.
//!
//! `main` sets the console once ([`set`]); the commands print through [`say!`],
//! [`say_verbose!`] and [`say_always!`], which follow it. Until it is set (the test
//! harness, unit tests) the console is the default one: normal, human, no colour.

use clap::ColorChoice;
use comfy_table::{Cell as TableCell, Color, ColumnConstraint, ContentArrangement, Table};
use std::io::{IsTerminal, Write};
use std::sync::OnceLock;

/// How much a command prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Verbosity {
    /// Failures, warnings and the final summary line.
    Quiet,
    #[default]
    Normal,
    /// Also each cell's environment, CPUs, floor and result file.
    Verbose,
}

/// What `list`, `run` and `probe` print on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum MessageFormat {
    /// Text for people; a table at the end of a run.
    #[default]
    Human,
    /// JSON Lines: one object per line, nothing else on stdout (human text goes to stderr).
    Json,
}

/// The version of the JSON Lines that `--message-format json` prints; it changes when a
/// field changes meaning or goes away (new fields may be added within a version).
pub const JSON_FORMAT_VERSION: u32 = 1;

/// The console of this process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Console {
    pub verbosity: Verbosity,
    pub format: MessageFormat,
    /// Colour on the stream human text goes to.
    pub color: bool,
    /// The width tables must fit in; `None`: as wide as their content.
    pub width: Option<u16>,
}

static CONSOLE: OnceLock<Console> = OnceLock::new();

impl Console {
    /// The console the command line asks for: colour and width for the stream human text
    /// goes to, from the environment.
    pub fn new(verbosity: Verbosity, format: MessageFormat, color: ColorChoice) -> Self {
        let to_stderr = format == MessageFormat::Json;
        let is_terminal = if to_stderr {
            std::io::stderr().is_terminal()
        } else {
            std::io::stdout().is_terminal()
        };
        let env = |key: &str| std::env::var_os(key).map(|v| v.to_string_lossy().into_owned());
        Self {
            verbosity,
            format,
            color: color_enabled(color, is_terminal, env),
            width: terminal_width(
                env("COLUMNS").as_deref(),
                is_terminal
                    .then(|| {
                        let mut probe = Table::new();
                        if to_stderr {
                            probe.use_stderr();
                        }
                        probe.width()
                    })
                    .flatten(),
            ),
        }
    }

    /// Human text goes to stderr: stdout carries JSON Lines.
    pub fn human_to_stderr(&self) -> bool {
        self.format == MessageFormat::Json
    }

    /// Writes one line of human text, if `level` is printed.
    pub fn line(&self, level: Verbosity, text: std::fmt::Arguments) {
        if level > self.verbosity {
            return;
        }
        // A closed pipe (`| head`) ends the output, not the run.
        let _ = if self.human_to_stderr() {
            writeln!(std::io::stderr().lock(), "{text}")
        } else {
            writeln!(std::io::stdout().lock(), "{text}")
        };
    }

    /// `text` in `paint`'s colour when this console colours.
    pub fn paint(&self, paint: Paint, text: &str) -> String {
        if self.color {
            format!("{}{text}\x1b[0m", paint.ansi())
        } else {
            text.to_string()
        }
    }
}

/// Sets this process's console; the first call wins.
pub fn set(console: Console) {
    let _ = CONSOLE.set(console);
}

/// This process's console.
pub fn console() -> &'static Console {
    CONSOLE.get_or_init(Console::default)
}

/// Prints a line of human text at normal verbosity (not under `--quiet`).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::term::console().line($crate::term::Verbosity::Normal, format_args!($($arg)*))
    };
}

/// Prints a line of human text under `--verbose` only.
#[macro_export]
macro_rules! say_verbose {
    ($($arg:tt)*) => {
        $crate::term::console().line($crate::term::Verbosity::Verbose, format_args!($($arg)*))
    };
}

/// Prints a line of human text even under `--quiet` (failures, the final summary).
#[macro_export]
macro_rules! say_always {
    ($($arg:tt)*) => {
        $crate::term::console().line($crate::term::Verbosity::Quiet, format_args!($($arg)*))
    };
}

/// Whether to colour a stream. `always` and `never` are obeyed; `auto` colours a
/// terminal, unless `NO_COLOR` is set (to anything but nothing) or `CLICOLOR=0` or
/// `TERM=dumb`, and colours anything when `CLICOLOR_FORCE` is set (not to `0`).
pub fn color_enabled(
    choice: ColorChoice,
    is_terminal: bool,
    env: impl Fn(&str) -> Option<String>,
) -> bool {
    let set = |key: &str| env(key).is_some_and(|v| !v.is_empty());
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            if set("NO_COLOR") {
                false
            } else if env("CLICOLOR_FORCE").is_some_and(|v| !v.is_empty() && v != "0") {
                true
            } else {
                is_terminal
                    && env("CLICOLOR").is_none_or(|v| v != "0")
                    && env("TERM").is_none_or(|v| v != "dumb")
            }
        }
    }
}

/// The width tables must fit in: `COLUMNS` when it is a number, else the terminal's;
/// `None` (as wide as the content) when neither is known, e.g. into a file or a pipe.
pub fn terminal_width(columns: Option<&str>, terminal: Option<u16>) -> Option<u16> {
    columns
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|&w| w > 0)
        .or(terminal)
}

/// `--color` as given on the command line, read before clap parses it (clap's own help
/// and errors are coloured by it): `auto` when absent or not understood.
pub fn color_arg(args: impl IntoIterator<Item = std::ffi::OsString>) -> ColorChoice {
    let mut args = args.into_iter().map(|a| a.to_string_lossy().into_owned());
    let mut chosen = None;
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        let value = match arg.strip_prefix("--color") {
            Some("") => args.next(),
            Some(rest) => rest.strip_prefix('=').map(str::to_string),
            None => None,
        };
        if let Some(value) = value {
            chosen = match value.as_str() {
                "always" => Some(ColorChoice::Always),
                "never" => Some(ColorChoice::Never),
                _ => Some(ColorChoice::Auto),
            };
        }
    }
    chosen.unwrap_or(ColorChoice::Auto)
}

/// The colours of verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    /// Passed, improved.
    Good,
    /// Failed.
    Bad,
    /// Regressed, a warning.
    Warn,
    /// Details that matter less.
    Dim,
}

impl Paint {
    fn ansi(self) -> &'static str {
        match self {
            Paint::Good => "\x1b[1;32m",
            Paint::Bad => "\x1b[1;31m",
            Paint::Warn => "\x1b[1;33m",
            Paint::Dim => "\x1b[2m",
        }
    }

    fn color(self) -> Color {
        match self {
            Paint::Good => Color::Green,
            Paint::Bad => Color::Red,
            Paint::Warn => Color::Yellow,
            Paint::Dim => Color::DarkGrey,
        }
    }
}

/// A table cell in `paint`'s colour (drawn only when the console colours).
pub fn painted(text: impl Into<String>, paint: Paint) -> TableCell {
    TableCell::new(text.into()).fg(paint.color())
}

/// A table fitted to a width, and the columns left out to fit it.
pub struct Fitted {
    pub table: Table,
    pub left_out: Vec<String>,
}

impl std::fmt::Display for Fitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.table)?;
        if !self.left_out.is_empty() {
            let note = format!("(not shown, to fit: {})", self.left_out.join(", "));
            let width = self.table.width().map_or(usize::MAX, usize::from);
            for line in wrap(&note, width) {
                write!(f, "\n{line}")?;
            }
        }
        Ok(())
    }
}

/// Fits `table` to this console: coloured or not, and within its width ([`fit_to`]).
pub fn fit(table: Table, keep_whole: &[usize], drop_order: &[usize]) -> Fitted {
    let console = console();
    fit_to(table, console.width, console.color, keep_whole, drop_order)
}

/// Fits `table` into `width` columns: the columns of `drop_order` are left out, in that
/// order, until the table fits; what still does not fit is wrapped, except the columns
/// of `keep_whole` (cell ids are never broken). `None`: as wide as the content.
pub fn fit_to(
    mut table: Table,
    width: Option<u16>,
    color: bool,
    keep_whole: &[usize],
    drop_order: &[usize],
) -> Fitted {
    table.force_no_tty();
    if color {
        table.enforce_styling();
    }
    let mut left_out = Vec::new();
    let Some(width) = width else {
        return Fitted { table, left_out };
    };
    let widest = |table: &Table| {
        table
            .lines()
            .map(|line| strip_ansi(&line).chars().count())
            .max()
            .unwrap_or(0)
    };
    for &column in keep_whole {
        if let Some(c) = table.column_mut(column) {
            c.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
    let header = |table: &Table, column: usize| {
        table
            .header()
            .and_then(|h| h.cell_iter().nth(column))
            .map(|c| c.content())
            .unwrap_or_default()
    };
    for &column in drop_order {
        if widest(&table) <= usize::from(width) {
            break;
        }
        let name = header(&table, column);
        if let Some(c) = table.column_mut(column) {
            c.set_constraint(ColumnConstraint::Hidden);
            left_out.push(name);
        }
    }
    table
        .set_width(width)
        .set_content_arrangement(ContentArrangement::Dynamic);
    Fitted { table, left_out }
}

/// `text` in lines of at most `width` characters, broken between words (a longer word
/// stands alone).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// `text` without ANSI colour sequences (`ESC [ ... m`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn auto_colours_a_terminal_unless_told_otherwise() {
        use ColorChoice::*;
        assert!(color_enabled(Auto, true, env_of(&[])));
        assert!(!color_enabled(Auto, false, env_of(&[])));
        assert!(!color_enabled(Auto, true, env_of(&[("NO_COLOR", "1")])));
        // An empty NO_COLOR does not count.
        assert!(color_enabled(Auto, true, env_of(&[("NO_COLOR", "")])));
        assert!(!color_enabled(Auto, true, env_of(&[("TERM", "dumb")])));
        assert!(!color_enabled(Auto, true, env_of(&[("CLICOLOR", "0")])));
        assert!(color_enabled(
            Auto,
            false,
            env_of(&[("CLICOLOR_FORCE", "1")])
        ));
        assert!(!color_enabled(
            Auto,
            false,
            env_of(&[("CLICOLOR_FORCE", "0")])
        ));
        assert!(color_enabled(Always, false, env_of(&[("NO_COLOR", "1")])));
        assert!(!color_enabled(
            Never,
            true,
            env_of(&[("CLICOLOR_FORCE", "1")])
        ));
    }

    #[test]
    fn the_color_argument_is_read_before_parsing() {
        let args = |words: &[&str]| words.iter().map(|w| w.into()).collect::<Vec<_>>();
        assert_eq!(color_arg(args(&["x", "run"])), ColorChoice::Auto);
        assert_eq!(
            color_arg(args(&["x", "--color", "never"])),
            ColorChoice::Never
        );
        assert_eq!(
            color_arg(args(&["x", "run", "--color=always"])),
            ColorChoice::Always
        );
        assert_eq!(color_arg(args(&["x", "--color=bogus"])), ColorChoice::Auto);
        assert_eq!(
            color_arg(args(&["x", "--", "--color=always"])),
            ColorChoice::Auto
        );
    }

    #[test]
    fn columns_wins_over_the_terminal() {
        assert_eq!(terminal_width(Some("80"), Some(200)), Some(80));
        assert_eq!(terminal_width(Some("wide"), Some(200)), Some(200));
        assert_eq!(terminal_width(Some("0"), None), None);
        assert_eq!(terminal_width(None, None), None);
    }

    #[test]
    fn ansi_sequences_are_stripped() {
        assert_eq!(strip_ansi("\x1b[1;32mPASS\x1b[0m x"), "PASS x");
    }
}
