//! The progress of a run: on a terminal, a bar that advances within a cell (from the round
//! trips its request/reply loop has done, [`RunOptions::progress`]) with the time left;
//! elsewhere nothing but the numbered line of each finished cell.
//!
//! Each cell weighs the time it took in the run before this one (its stored result's
//! `wall_seconds`); a cell never run before weighs the median of the known ones (one unit
//! each when none is known). Within a cell the bar moves by the share of its round trips
//! done; cells of the kinds that do not go through the request/reply loop (fan-out,
//! fan-in, udp-load, logging) move it when they end. The time left is the time the run
//! has taken per unit so far, times the units left.
//!
//! [`RunOptions::progress`]: ipc_matrix_scenario::RunOptions::progress

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use ipc_matrix_spec::{Cell, Work};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the bar is redrawn.
const TICK: Duration = Duration::from_millis(200);

/// What each cell weighs, and how many round trips its loop reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Milliseconds expected, at least 1.
    weights: Vec<u64>,
    /// Warm-up + round trips of a cell whose loop reports them; 0 for the other kinds.
    rounds: Vec<u64>,
}

impl Plan {
    /// The plan of `cells`, weighed by `previous` (seconds a cell took before, if known).
    pub fn new(cells: &[Cell], previous: impl Fn(&Cell) -> Option<f64>) -> Self {
        let known: Vec<Option<u64>> = cells
            .iter()
            .map(|c| {
                previous(c)
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| ((s * 1000.0) as u64).max(1))
            })
            .collect();
        let mut sorted: Vec<u64> = known.iter().flatten().copied().collect();
        sorted.sort_unstable();
        let fallback = sorted.get(sorted.len() / 2).copied().unwrap_or(1000);
        Self {
            weights: known.iter().map(|k| k.unwrap_or(fallback)).collect(),
            rounds: cells.iter().map(reported_rounds).collect(),
        }
    }

    /// The units of the whole run.
    pub fn total(&self) -> u64 {
        self.weights.iter().sum()
    }

    /// Where the run is when cell `index` has done `rounds_done` round trips (all cells
    /// before it done).
    pub fn position(&self, index: usize, rounds_done: u64) -> u64 {
        let before: u64 = self.weights.iter().take(index).sum();
        let (Some(&weight), Some(&rounds)) = (self.weights.get(index), self.rounds.get(index))
        else {
            return before;
        };
        let within = match rounds {
            0 => 0,
            _ => {
                (u128::from(weight) * u128::from(rounds_done.min(rounds)) / u128::from(rounds))
                    as u64
            }
        };
        before + within
    }
}

/// The round trips a cell's loop reports: warm-up + round trips for the kinds that run
/// the request/reply loop, none for the others.
fn reported_rounds(cell: &Cell) -> u64 {
    match cell.work {
        Work::Echo(_) | Work::Bulk(_) | Work::Codec(_) | Work::Rpc(_) | Work::ReqRep(_) => {
            cell.warmup.saturating_add(cell.iterations)
        }
        Work::FanOut(_) | Work::FanIn(_) | Work::UdpLoad(_) | Work::Logging(_) => 0,
    }
}

/// The seconds each cell took in the last run stored under `cells_dir` (a run folder's
/// `cells/`), read before this run overwrites them.
pub fn previous_seconds(cells_dir: &Path, cell: &Cell) -> Option<f64> {
    #[derive(serde::Deserialize)]
    struct Took {
        wall_seconds: f64,
    }
    let path = cells_dir.join(ipc_matrix_results::cell_file_name(&cell.id));
    let file = std::fs::File::open(path).ok()?;
    let took: Took = serde_json::from_reader(std::io::BufReader::new(file)).ok()?;
    Some(took.wall_seconds)
}

/// `1:05`, `12s`: the time left, or `?` until the run has gone a second and a hundredth
/// of the way (before, the start-up of the first cell would count for the whole run).
fn time_left(state: &ProgressState) -> String {
    let (pos, len) = (state.pos(), state.len().unwrap_or(0));
    if pos == 0 || pos.saturating_mul(100) < len || state.elapsed() < Duration::from_secs(1) {
        return "?".into();
    }
    let per_unit = state.elapsed().as_secs_f64() / pos as f64;
    let left = (per_unit * len.saturating_sub(pos) as f64).round() as u64;
    match left {
        0..=59 => format!("{left}s"),
        60..=3599 => format!("{}:{:02}", left / 60, left % 60),
        _ => format!("{}:{:02}:{:02}", left / 3600, left / 60 % 60, left % 60),
    }
}

/// The bar of a run, or nothing when stderr is no terminal.
pub struct Progress {
    bar: ProgressBar,
    plan: Arc<Plan>,
    /// The round trips done by the cell running now (given to the cell runner).
    done: Arc<AtomicU64>,
    /// The cell running now.
    current: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
    cells: usize,
}

impl Progress {
    /// A bar on stderr when it is a terminal (`shown`), else a hidden one.
    pub fn new(plan: Plan, cells: usize, shown: bool, color: bool) -> Self {
        let plan = Arc::new(plan);
        let bar = if shown {
            ProgressBar::with_draw_target(Some(plan.total()), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        let template = if color {
            "{spinner:.green} {elapsed:>4} [{bar:30.cyan/blue}] {prefix:.bold} cells, {eta} left  {wide_msg}"
        } else {
            "{spinner} {elapsed:>4} [{bar:30}] {prefix} cells, {eta} left  {wide_msg}"
        };
        bar.set_style(
            ProgressStyle::with_template(template)
                .expect("a valid template")
                .progress_chars("=> ")
                .with_key(
                    "eta",
                    |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = w.write_str(&time_left(state));
                    },
                ),
        );
        bar.set_prefix(format!("0/{cells}"));
        let done = Arc::new(AtomicU64::new(0));
        let current = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = shown.then(|| {
            let (bar, plan, done, current, stop) = (
                bar.clone(),
                plan.clone(),
                done.clone(),
                current.clone(),
                stop.clone(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let index = current.load(Ordering::Relaxed);
                    let position = plan.position(index, done.load(Ordering::Relaxed));
                    // Forward only: a cell's counter starts again at 0.
                    if position > bar.position() {
                        bar.set_position(position);
                    }
                    bar.tick();
                    std::thread::park_timeout(TICK);
                }
            })
        });
        Self {
            bar,
            plan,
            done,
            current,
            stop,
            ticker,
            cells,
        }
    }

    /// The counter the cell runner stores its round trips in; `None` when nothing is shown
    /// (no work at all is added to the cells then).
    pub fn hook(&self) -> Option<Arc<AtomicU64>> {
        self.ticker.is_some().then(|| self.done.clone())
    }

    /// Cell `index` starts.
    pub fn start(&self, index: usize, id: &str) {
        self.current.store(index, Ordering::Relaxed);
        self.bar.set_message(id.to_string());
    }

    /// Cell `index` ended.
    pub fn finish(&self, index: usize) {
        self.bar.set_position(self.plan.position(index + 1, 0));
        self.bar.set_prefix(format!("{}/{}", index + 1, self.cells));
    }

    /// Runs `f` (that prints) with the bar out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Removes the bar.
    pub fn clear(mut self) {
        self.stop_ticker();
        self.bar.finish_and_clear();
    }

    fn stop_ticker(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(ticker) = self.ticker.take() {
            ticker.thread().unpark();
            let _ = ticker.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_ticker();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells() -> Vec<Cell> {
        ipc_matrix_results::fixture::quick_cells(
            "  - { name: echo, kind: echo, transports: [tcp, local], payloads: [200B], iterations: 90, warmup: 10, timeout: 5s }\n  - { name: logging, kind: logging, transports: [file], sinks: [buffered], payloads: [64B], iterations: 200, budget: 30s }\n",
        )
    }

    #[test]
    fn cells_weigh_what_they_took_before_and_the_unknown_the_median() {
        let cells = cells();
        assert_eq!(cells.len(), 3);
        let plan = Plan::new(&cells, |c| (c.id == "echo::tcp::200B").then_some(2.0));
        assert_eq!(plan.weights, [2000, 2000, 2000]);
        let plan = Plan::new(&cells, |c| match c.id.as_str() {
            "echo::tcp::200B" => Some(1.0),
            "echo::local::200B" => Some(3.0),
            _ => None,
        });
        assert_eq!(plan.weights, [1000, 3000, 3000]);
        assert_eq!(plan.total(), 7000);
        // None known: one unit (1000) each.
        assert_eq!(Plan::new(&cells, |_| None).weights, [1000, 1000, 1000]);
    }

    #[test]
    fn the_position_moves_within_a_cell_of_the_loop_and_jumps_over_the_others() {
        let cells = cells();
        let plan = Plan::new(&cells, |_| Some(1.0));
        assert_eq!(plan.rounds, [100, 100, 0]);
        assert_eq!(plan.position(0, 0), 0);
        assert_eq!(plan.position(0, 50), 500);
        assert_eq!(plan.position(0, 100), 1000);
        // More than declared (never): the cell's whole weight, no more.
        assert_eq!(plan.position(0, 1000), 1000);
        assert_eq!(plan.position(1, 25), 1250);
        // The logging cell reports nothing: it moves when it ends.
        assert_eq!(plan.position(2, 0), 2000);
        assert_eq!(plan.position(3, 0), 3000);
        assert_eq!(plan.position(3, 0), plan.total());
    }
}
