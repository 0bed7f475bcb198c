//! A cell in a process of its own, for the cells of a stack in a shared library (matrix.yaml's
//! `plugins:`): the library's code runs inside the measuring process, and a crash there,
//! or a call that does not come back by its deadline, ends or stalls that process. Run in
//! a child, that is the cell's failure, named, and the run goes on with the next cell.
//!
//! The child is this binary again, told by [`CELL_PROCESS_ENV`] where its request is (the
//! cell, the run it belongs to, the libraries to load). It runs the cell as the run would
//! and writes the result next to the request; meanwhile it prints its round trips done,
//! which the parent shows as progress and watches: a child silent for longer than the
//! cell's deadline allows is stopped, and the cell fails at the round trip it reached.
//! The nextest door needs none of this: each of its cells is a process already.

use ipc_matrix_results::{CellResult, Failure, FailureKind};
use ipc_matrix_scenario::{run_cell, unfinished_cell, RunOptions};
use ipc_matrix_spec::{Cell, StackName, TransportKind, Work};
use ipc_matrix_transport::{FORK_TO_EXEC_LIMIT, START_LIMIT};
use serde::{Deserialize, Serialize};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Set in a child to the folder of its request: `request.json` in, `result.json` out.
pub const CELL_PROCESS_ENV: &str = "IPC_MATRIX_CELL_PROCESS";

/// The file in the request's folder where the child says how far it got.
const PROGRESS_FILE: &str = "progress";

/// The round trips done that the child last wrote, if it has.
fn read_progress(file: &Path) -> Option<u64> {
    crate::this_binary::read_childs_word(file, 64, "a cell's progress")?
        .trim()
        .parse()
        .ok()
}

/// How often the child says how far it got, at most.
const PROGRESS_PERIOD: Duration = Duration::from_millis(100);

#[derive(Serialize, Deserialize)]
struct Request {
    cell: Cell,
    run_id: String,
    project_dir: PathBuf,
    /// Each plugin the parent registered: its name and library.
    plugins: Vec<(String, PathBuf)>,
}

/// The cell's stack is in a shared library, so the cell runs in a child.
pub fn needs_own_process(cell: &Cell) -> bool {
    stack_of(cell).is_some_and(|stack| ipc_matrix_transport::plugin_library(stack).is_some())
}

/// In a child started by [`run_in_own_process`]: runs its cell, writes the result and
/// exits. Nothing otherwise.
pub fn serve_if_requested() {
    let Some(dir) = std::env::var_os(CELL_PROCESS_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    // Not passed on to the cell's peer. Nothing else runs in this process yet.
    std::env::remove_var(CELL_PROCESS_ENV);
    let code = match serve(&dir) {
        Ok(()) => 0,
        Err(why) => {
            eprintln!("error: the cell's own process: {why}");
            2
        }
    };
    std::process::exit(code);
}

fn serve(dir: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(dir.join("request.json"))
        .map_err(|e| format!("reading its request: {e}"))?;
    let request: Request =
        serde_json::from_str(&text).map_err(|e| format!("reading its request: {e}"))?;
    for (name, library) in &request.plugins {
        ipc_matrix_transport::register_plugin(name, library).map_err(|e| e.to_string())?;
    }
    let mut options = RunOptions::from_env().map_err(|e| e.to_string())?;
    options.run_id = request.run_id;
    options.project_dir = request.project_dir;
    let progress = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    options.progress = Some(progress.clone());
    // How far the cell got, in a file of the request's folder, for the parent (not on
    // stdout or a pipe, which the library's code could write to or close).
    let file = dir.join(PROGRESS_FILE);
    std::thread::spawn(move || {
        let mut last = u64::MAX;
        loop {
            let now = progress.load(Ordering::Relaxed);
            if now != last {
                let partial = file.with_extension("partial");
                if std::fs::write(&partial, now.to_string())
                    .and_then(|()| std::fs::rename(&partial, &file))
                    .is_err()
                {
                    return;
                }
                last = now;
            }
            std::thread::sleep(PROGRESS_PERIOD);
        }
    });
    let result = run_cell(&request.cell, &options);
    let json = serde_json::to_vec(&result).map_err(|e| e.to_string())?;
    let partial = dir.join("result.json.partial");
    std::fs::write(&partial, json)
        .and_then(|()| std::fs::rename(&partial, dir.join("result.json")))
        .map_err(|e| format!("writing its result: {e}"))
}

/// Runs `cell` in a child of this binary and returns its result; a child that dies, or
/// falls silent for longer than the cell's deadlines allow, gives a failed result saying
/// so, at the round trip it had reached.
pub fn run_in_own_process(cell: &Cell, options: &RunOptions) -> CellResult {
    let started = Instant::now();
    let progress = |n: u64| {
        if let Some(p) = &options.progress {
            p.store(n, Ordering::Relaxed);
        }
    };
    progress(0);
    let mut reached = 0;
    // Whether `reached` is where the child stopped: true for one that stalled.
    let mut exact = false;
    let outcome = (|| {
        let dir = tempfile_dir()?;
        let request = Request {
            cell: cell.clone(),
            run_id: options.run_id.clone(),
            project_dir: options.project_dir.clone(),
            plugins: ipc_matrix_transport::registered_plugins(),
        };
        let json = serde_json::to_vec(&request).map_err(|e| e.to_string())?;
        std::fs::write(dir.path.join("request.json"), json)
            .map_err(|e| format!("writing its request: {e}"))?;
        // The child's stdout is the library's too: it goes to this process's stderr, so
        // that nothing it prints is taken for this run's output (its JSON lines).
        let stderr = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| format!("passing on stderr: {e}"))?;
        let mut command =
            crate::this_binary::command().map_err(|e| format!("finding this binary: {e}"))?;
        command
            .env(CELL_PROCESS_ENV, &dir.path)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stderr));
        let mut child = ipc_matrix_transport::spawn_within(&mut command, FORK_TO_EXEC_LIMIT)
            .map_err(|e| format!("starting its process: {e}"))?;
        let progress_file = dir.path.join(PROGRESS_FILE);
        let mut last_heard = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(50));
            if let Some(n) = read_progress(&progress_file).filter(|&n| n != reached) {
                reached = n;
                progress(n);
                last_heard = Instant::now();
            }
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                let result = ipc_matrix_results::read_bounded(
                    &dir.path.join("result.json"),
                    ipc_matrix_results::MAX_RESULT_FILE_BYTES,
                    "a cell's result",
                );
                return match (status.success(), result) {
                    (true, Ok(bytes)) => serde_json::from_slice::<CellResult>(&bytes)
                        .map_err(|e| format!("its result does not read back: {e}")),
                    _ => Err(format!(
                        "the measuring process {} ({}), inside the stack's own code",
                        describe(status),
                        plugin_words(cell)
                    )),
                };
            }
            let silence = silence_limit(cell, options, reached);
            if last_heard.elapsed() > silence {
                let _ = child.kill();
                let _ = child.wait();
                exact = true;
                return Err(format!(
                    "the measuring side made no progress for {:.0?}, longer than its deadlines allow, and was stopped ({}): a call into the stack that did not return by its deadline",
                    silence,
                    plugin_words(cell)
                ));
            }
        }
    })();
    match outcome {
        Ok(result) => result,
        Err(reason) => unfinished_cell(
            cell,
            options,
            where_it_stopped(cell, reached, exact, reason),
            started.elapsed().as_secs_f64(),
        ),
    }
}

/// The failure `reason`, at the round trip the child had reached (`reached` done). Its
/// progress is sampled: a child that stalled has said how far it got (`exact`), one that
/// died may have got further than it said.
fn where_it_stopped(cell: &Cell, reached: u64, exact: bool, reason: String) -> Failure {
    let total = cell.iterations.saturating_add(cell.warmup);
    let (round_trip, reason) = if !exact && reached == 0 {
        (
            None,
            format!("before it had said it finished a round trip: {reason}"),
        )
    } else if !exact {
        (
            None,
            format!("with at least {reached} of {total} round trips done: {reason}"),
        )
    } else if reached == 0 {
        (None, format!("before its first round trip: {reason}"))
    } else if reached >= total {
        (None, format!("after its last round trip: {reason}"))
    } else {
        let phase = if reached < cell.warmup {
            " (warm-up)"
        } else {
            ""
        };
        (
            Some(reached),
            format!("round trip {reached} of {total}{phase}: {reason}"),
        )
    };
    Failure {
        kind: FailureKind::Setup,
        round_trip,
        reason,
    }
}

/// What a working cell's child may take between two round trips beyond twice the round
/// trip's deadline: the floor's blocks, timed between round trips.
const BETWEEN_ROUND_TRIPS: Duration = Duration::from_secs(10);

/// The longest a working cell's child may go without finishing a round trip, once it has
/// done `reached`: twice the cell's deadline of one round trip, and
/// [`BETWEEN_ROUND_TRIPS`]; before the first and after the last, set-up (the peer
/// connected or stopped, `setup_timeout`) and the peer's start (up to START_LIMIT)
/// besides. The C ABI's page and header state the same sum
/// (`the_documented_limits_of_a_stuck_call_are_the_codes`).
fn silence_limit(cell: &Cell, options: &RunOptions, reached: u64) -> Duration {
    let round_trip = match &cell.work {
        Work::Echo(e) | Work::Bulk(e) => e.timeout,
        Work::Codec(f) => f.timeout,
        _ => Duration::from_secs(30),
    };
    let between = round_trip * 2 + BETWEEN_ROUND_TRIPS;
    let total = cell.iterations.saturating_add(cell.warmup);
    if reached > 0 && reached < total {
        between
    } else {
        options.setup_timeout + START_LIMIT + between
    }
}

fn stack_of(cell: &Cell) -> Option<StackName> {
    match cell.transport {
        TransportKind::Stack(stack) => Some(stack),
        _ => None,
    }
}

fn plugin_words(cell: &Cell) -> String {
    let stack = stack_of(cell).map_or("?", |s| s.as_str());
    match stack_of(cell).and_then(ipc_matrix_transport::plugin_library) {
        Some(library) => format!("the plugin `{stack}`, {}", library.display()),
        None => format!("the stack `{stack}`"),
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (_, Some(signal)) => format!("was killed by signal {signal}"),
        (Some(code), None) => format!("exited with status {code} before writing its result"),
        (None, None) => "ended".into(),
    }
}

/// A private folder for one child's request and result, removed when dropped.
struct TempDir {
    path: PathBuf,
}

fn tempfile_dir() -> Result<TempDir, String> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "ipc-matrix-cell-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&path)
        .map_err(|e| format!("making its folder {}: {e}", path.display()))?;
    Ok(TempDir { path })
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the C ABI's page and its header say of a call that does not come back, in the
    /// code's numbers: the sum [`silence_limit`] allows, word for word.
    fn the_promise() -> String {
        format!(
            "stopped once the cell has made no progress for twice its round-trip `timeout` \
             and {} s ({} s of set-up and up to {} s for its peer's start more before the \
             first round trip and after the last)",
            BETWEEN_ROUND_TRIPS.as_secs(),
            RunOptions::default().setup_timeout.as_secs(),
            START_LIMIT.as_secs()
        )
    }

    /// `text` with C comment margins gone and every run of white space one space.
    fn flat(text: &str) -> String {
        text.lines()
            .map(|l| l.trim().trim_start_matches('*').trim())
            .collect::<Vec<_>>()
            .join(" ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_documented_limits_of_a_stuck_call_are_the_codes() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for file in [
            "docs/src/stacks/c-abi.md",
            "crates/transport/include/ipc_matrix_stack.h",
        ] {
            let text = std::fs::read_to_string(root.join(file)).unwrap();
            assert!(
                flat(&text).contains(&the_promise()),
                "{file} does not say: {}",
                the_promise()
            );
        }
    }

    #[test]
    fn a_stuck_set_up_is_stopped_at_the_sum_the_documents_give() {
        let matrix = "version: 1
targets: [{ triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }]
profiles: { quick: { description: test } }
scenarios:
  - { name: echo, kind: echo, transports: [tcp], payloads: [200B], iterations: 10, warmup: 0, timeout: 2s }
";
        let spec = ipc_matrix_spec::Spec::parse(matrix, Path::new("matrix.yaml")).unwrap();
        let cell = spec.cells("quick").unwrap().remove(0);
        let options = RunOptions::default();
        let between = Duration::from_secs(2) * 2 + BETWEEN_ROUND_TRIPS;
        assert_eq!(silence_limit(&cell, &options, 5), between);
        assert_eq!(
            silence_limit(&cell, &options, 0),
            between + options.setup_timeout + START_LIMIT
        );
    }
}
