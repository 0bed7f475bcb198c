//! The environment variables ipc-matrix reads, and what each accepts: they are checked
//! like flags, before a cell runs, so that a value that does not fit is an error naming
//! the variable rather than a folder named after it, a file of someone else's, or a run
//! labelled with a word nothing else knows. `docs/src/reference/environment.md` is this
//! table in prose; `crates/cli/tests/book.rs` keeps the two the same.

use crate::printable::printable;
use std::ffi::OsStr;

/// One variable: its name, what it accepts (as the error and the book say it), and the
/// check of a value that is set.
pub struct Variable {
    pub name: &'static str,
    pub accepts: &'static str,
    /// Who sets it: `scripts/...` or the user.
    pub set_by: &'static str,
    check: fn(&str) -> Result<(), String>,
}

/// Every `IPC_MATRIX_*` variable ipc-matrix or its scripts read.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "IPC_MATRIX_RUNNER",
        accepts: "`native` or `qemu`: the runner of the leg the results are stored under",
        set_by: "scripts/qemu-run (qemu); unset means native",
        check: |v| one_of(v, &["native", "qemu"]),
    },
    Variable {
        name: "IPC_MATRIX_QEMU_VERSION",
        accepts: "one line of text: the emulator's `--version`",
        set_by: "scripts/qemu-run",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_COUNT_FILE",
        accepts: "a path holding `%p` (the process id): each process's count file",
        set_by: "scripts/qemu-run",
        check: |v| {
            one_line(v)?;
            match v.trim().is_empty() || v.contains("%p") {
                true => Ok(()),
                false => Err("it has no %p: each process writes a file of its own, and a peer's is removed once read, so one name for all would be a file of someone else's".into()),
            }
        },
    },
    Variable {
        name: "IPC_MATRIX_COUNTED_STATUS",
        accepts: "a path: the file where a counted run says that it started and how it ended",
        set_by: "`ipc-matrix run --count`, for the run it starts under the emulator",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_UNCOUNTED",
        accepts: "one line of text: why an emulated run is not counted",
        set_by: "scripts/qemu-run",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_PEER_RUNNER",
        accepts: "a command prefix, words separated by spaces, that runs a peer (an emulator)",
        set_by: ".cargo/config.toml's runner, through scripts/qemu-run",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_PIN",
        accepts: "`on` or `off`: whether the two sides are pinned to CPUs of their own",
        set_by: "the user (default on)",
        check: |v| one_of(v, &["on", "off"]),
    },
    Variable {
        name: "IPC_MATRIX_PEER_DELAY_US",
        accepts: "a whole number of microseconds our peer waits before each reply",
        set_by: "the user, to see a regression flagged",
        check: whole_number,
    },
    Variable {
        name: "IPC_MATRIX_PEER_EXTRA_WORK",
        accepts: "a whole number of work units our peer does before each reply",
        set_by: "the user, to see an instruction regression flagged",
        check: whole_number,
    },
    Variable {
        name: "IPC_MATRIX_PEER_DELAY_CELLS",
        accepts: "a regular expression: the cells the peer delay and extra work apply to",
        set_by: "the user (default every cell)",
        check: |v| {
            regex::Regex::new(v)
                .map(|_| ())
                .map_err(|e| format!("not a regular expression: {e}"))
        },
    },
    Variable {
        name: "IPC_MATRIX_CELL_PROCESS",
        accepts: "a path: the folder of one cell's request, in a plugin cell's own process",
        set_by: "ipc-matrix run, for the child it runs a plugin's cell in",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_PLUGIN_PROBE",
        accepts: "a path: the folder of a plugin's probe, its request (the plugin's name and library) in, its report out",
        set_by: "ipc-matrix, for the process it loads a plugin's library in first",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_FILE",
        accepts: "a path: the matrix file a nextest door runs (default: the nearest matrix.yaml at or above the test crate's folder)",
        set_by: "the user",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_PROFILE",
        accepts: "a profile name of the matrix file (default quick)",
        set_by: "the user, scripts/test.sh",
        check: word,
    },
    Variable {
        name: "IPC_MATRIX_OUT",
        accepts: "a path: the folder a nextest door stores its results in (default: target/ipc-matrix beside the test crate's matrix.yaml)",
        set_by: "the user, scripts/second-userland.sh, scripts/example-stacks.sh",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_COUNT",
        accepts: "`on` (count or stop), `off` or `auto` (count when the pinned QEMU and the plugin are there): whether scripts/qemu-run counts instructions",
        set_by: "the user, scripts/count-pass.sh (default auto)",
        check: |v| one_of(v, &["on", "off", "auto"]),
    },
    Variable {
        name: "IPC_MATRIX_COUNT_PLUGIN",
        accepts: "a path: the counting plugin scripts/qemu-run loads",
        set_by: "the user (default the workspace's release build)",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_TARGET",
        accepts: "a target triple the scripts build and run for",
        set_by: "the user, the workflow",
        check: word,
    },
    Variable {
        name: "IPC_MATRIX_EMULATE_NATIVE",
        accepts: "`1`: scripts/qemu-run emulates a binary of this machine's own architecture",
        set_by: "scripts/count-pass.sh",
        check: |v| one_of(v, &["0", "1"]),
    },
    Variable {
        name: "IPC_MATRIX_PINNED_QEMU",
        accepts: "a path: the QEMU build the count passes use",
        set_by: "scripts/lib.sh",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_QEMU_SOURCE",
        accepts: "a path: where scripts/lib.sh finds QEMU's pinned source",
        set_by: "the user",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_ZIG",
        accepts: "a path: the zig the counted builds link with",
        set_by: "scripts/lib.sh",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_SKIP_SECOND_USERLAND",
        accepts: "`1`: scripts/test.sh leaves the second userland out",
        set_by: "the user",
        check: |v| one_of(v, &["0", "1"]),
    },
    Variable {
        name: "IPC_MATRIX_COUNT_PASS_PREPARED",
        accepts: "`1`: the count pass's builds are made already",
        set_by: "scripts/second-userland.sh",
        check: |v| one_of(v, &["0", "1"]),
    },
    Variable {
        name: "IPC_MATRIX_STARTED_BY",
        accepts: "anything: marks a process ipc-matrix started (its parent's pid and the start's number), so a start stuck before exec is told apart; read by nothing",
        set_by: "ipc-matrix, for the peers, cell processes and conformance checks it starts",
        check: |_| Ok(()),
    },
    Variable {
        name: "IPC_MATRIX_LEGS_NOT_RUN",
        accepts: "legs, comma-separated: the blocking legs a local run of the workflow left out (read only under act, ACT=true)",
        set_by: "cargo xtask workflow",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_ACT_STORE",
        accepts: "a path: the local store of the workflow's caches and artifacts",
        set_by: "cargo xtask workflow, for its stand-in actions",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_ACT_RUN",
        accepts: "a name: the local workflow run whose artifacts the stand-ins keep",
        set_by: "cargo xtask workflow, for its stand-in actions",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_STAND_INS",
        accepts: "a path: the folder of the stand-in actions (xtask/stand-ins)",
        set_by: "cargo xtask workflow, for its stand-in actions",
        check: one_line,
    },
    Variable {
        name: "IPC_MATRIX_PERTURBATION",
        accepts: "anything: padding that moves the process's memory layout",
        set_by: "scripts/perturb.sh",
        check: |_| Ok(()),
    },
];

/// A variable set to a value it does not accept, or one whose name ipc-matrix does not
/// know (a typo would otherwise be ignored without a word).
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    Refused(VariableError),
    Unknown(String),
}

/// A variable whose value does not fit, or that is not in the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VariableError {
    /// `value` is shown with its control characters escaped.
    #[error("{name}={value:?} is refused: {why}; it accepts {accepts}")]
    Refused {
        name: &'static str,
        value: String,
        why: String,
        accepts: &'static str,
    },
    #[error("{name} is not in the table of variables")]
    NotInTable { name: String },
}

/// Checks every `IPC_MATRIX_*` variable of this process: the refused ones, then the
/// unknown ones, each naming the variable (its value shown with control characters
/// escaped).
pub fn check_environment() -> Vec<Problem> {
    check(std::env::vars_os())
}

fn check(vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (name, value) in vars {
        let Some(name) = name.to_str().filter(|n| n.starts_with("IPC_MATRIX_")) else {
            continue;
        };
        let Some(variable) = VARIABLES.iter().find(|v| v.name == name) else {
            // The conformance suite's own variables, between its processes.
            if !name.starts_with("IPC_MATRIX_CONFORMANCE_") {
                problems.push(Problem::Unknown(format!(
                    "{name} is not a variable ipc-matrix reads (docs/src/reference/environment.md lists them)"
                )));
            }
            continue;
        };
        if let Err(why) = variable.accept(&value) {
            problems.push(Problem::Refused(why));
        }
    }
    problems.sort_by_key(|p| matches!(p, Problem::Unknown(_)));
    problems
}

impl Variable {
    /// The value, if it fits; an error naming the variable and saying what it accepts.
    pub fn accept(&self, value: &OsStr) -> Result<(), VariableError> {
        let refused = |why: String| VariableError::Refused {
            name: self.name,
            value: printable(&value.to_string_lossy()).to_string(),
            why,
            accepts: self.accepts,
        };
        let text = value
            .to_str()
            .ok_or_else(|| refused("it is not UTF-8 text".into()))?;
        (self.check)(text).map_err(refused)
    }
}

/// The variable `name` of this process, checked: `None` when unset, an error naming it
/// when its value does not fit.
pub fn read_variable(name: &str) -> Result<Option<String>, VariableError> {
    let Some(value) = std::env::var_os(name) else {
        return Ok(None);
    };
    match VARIABLES.iter().find(|v| v.name == name) {
        Some(variable) => variable.accept(&value)?,
        None => {
            return Err(VariableError::NotInTable {
                name: name.to_string(),
            })
        }
    }
    Ok(value.into_string().ok())
}

fn one_of(value: &str, words: &[&str]) -> Result<(), String> {
    match words.contains(&value.trim()) {
        true => Ok(()),
        false => Err(format!("it is none of {}", words.join(", "))),
    }
}

fn one_line(value: &str) -> Result<(), String> {
    match value.chars().find(|c| c.is_control() && *c != '\t') {
        Some(c) => Err(format!("it holds the control character {:?}", c)),
        None => Ok(()),
    }
}

fn whole_number(value: &str) -> Result<(), String> {
    value
        .trim()
        .parse::<u64>()
        .map(|_| ())
        .map_err(|_| "it is not a whole number".into())
}

/// A name such as a profile or a triple: letters, digits, `-`, `_` and `.`, not `.` or `..`.
fn word(value: &str) -> Result<(), String> {
    let value = value.trim();
    let fits = !value.is_empty()
        && value != "."
        && value != ".."
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    match fits {
        true => Ok(()),
        false => Err("it is not a word of letters, digits, `-`, `_` and `.`".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    fn problems(vars: &[(&str, &[u8])]) -> Vec<Problem> {
        check(
            vars.iter()
                .map(|(n, v)| (OsString::from(n), OsString::from_vec(v.to_vec()))),
        )
    }

    #[test]
    fn a_runner_is_a_known_word_and_never_a_path() {
        assert!(problems(&[("IPC_MATRIX_RUNNER", b"qemu")]).is_empty());
        for bad in [
            &b"../../../../elsewhere"[..],
            b"nat\nive\x1b[31m",
            b"\xff",
            b"qemu2",
        ] {
            let found = problems(&[("IPC_MATRIX_RUNNER", bad)]);
            let [Problem::Refused(why)] = found.as_slice() else {
                panic!("{bad:?}: {found:?}");
            };
            assert!(
                matches!(
                    why,
                    VariableError::Refused {
                        name: "IPC_MATRIX_RUNNER",
                        ..
                    }
                ),
                "{why:?}"
            );
            let why = why.to_string();
            assert!(why.starts_with("IPC_MATRIX_RUNNER="), "{why}");
            assert!(why.contains("native` or `qemu"), "{why}");
            assert!(!why.contains('\x1b') && !why.contains('\n'), "{why:?}");
        }
    }

    #[test]
    fn a_count_file_without_its_process_id_is_refused() {
        let found = problems(&[("IPC_MATRIX_COUNT_FILE", b"/home/me/notes.txt")]);
        assert!(
            matches!(found.as_slice(), [Problem::Refused(why)] if why.to_string().contains("%p")),
            "{found:?}"
        );
        assert!(problems(&[("IPC_MATRIX_COUNT_FILE", b"/tmp/c.%p.jsonl")]).is_empty());
    }

    #[test]
    fn numbers_words_and_expressions_are_checked() {
        for (name, bad) in [
            ("IPC_MATRIX_PEER_DELAY_US", &b"ten"[..]),
            ("IPC_MATRIX_PEER_EXTRA_WORK", b"-1"),
            ("IPC_MATRIX_PEER_DELAY_CELLS", b"(unclosed"),
            ("IPC_MATRIX_PROFILE", b"../quick"),
            ("IPC_MATRIX_PIN", b"yes"),
            ("IPC_MATRIX_QEMU_VERSION", b"qemu\x07"),
        ] {
            let found = problems(&[(name, bad)]);
            assert!(
                matches!(found.as_slice(), [Problem::Refused(why)] if why.to_string().starts_with(name)),
                "{name}: {found:?}"
            );
        }
    }

    #[test]
    fn an_unknown_variable_is_named_after_the_refused_ones() {
        let found = problems(&[
            ("IPC_MATRIX_COUNTFILE", b"x"),
            ("IPC_MATRIX_PIN", b"maybe"),
            ("IPC_MATRIX_CONFORMANCE_PEER", b"echo"),
            ("PATH", b"/bin"),
        ]);
        assert!(
            matches!(&found[0], Problem::Refused(w) if w.to_string().starts_with("IPC_MATRIX_PIN"))
        );
        assert!(matches!(&found[1], Problem::Unknown(w) if w.starts_with("IPC_MATRIX_COUNTFILE")));
        assert_eq!(found.len(), 2, "{found:?}");
    }

    #[test]
    fn every_variable_name_is_distinct() {
        let mut names: Vec<_> = VARIABLES.iter().map(|v| v.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), VARIABLES.len());
    }
}
