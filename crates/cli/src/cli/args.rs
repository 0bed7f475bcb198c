//! The argument groups several commands share: which cells (`Selection`), which stored
//! results (`StoredResults`), how a run is judged (`Judging`).

use crate::default_out_dir;
use crate::project::{matrix_file, project_root};
use crate::reporting::legs_with_results;
use anyhow::{Context, Result};
use ipc_matrix_spec::{Cell, RegressionPolicy, Spec};
use std::path::{Path, PathBuf};

/// The parser of a word argument (a profile, a leg, a filter): text, and one that is not
/// UTF-8 is an error naming its flag and showing what was given (clap's own says only
/// "invalid UTF-8 was detected in one or more arguments").
#[derive(Clone)]
pub struct Text;

impl clap::builder::TypedValueParser for Text {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        value.to_str().map(str::to_owned).ok_or_else(|| {
            let flag = arg
                .and_then(|a| a.get_long())
                .map_or_else(|| "an argument".to_string(), |long| format!("--{long}"));
            cmd.clone().error(
                clap::error::ErrorKind::InvalidUtf8,
                format!(
                    "{flag} {:?} is not UTF-8 text, which {flag} takes",
                    value.to_string_lossy()
                ),
            )
        })
    }
}

/// The parser of a leg (`<triple>@native`, `<triple>@qemu`): [`Text`] that names a
/// results folder of one leg and nothing outside it (`../x@qemu`, `a/b@native` are refused).
pub fn leg() -> impl clap::builder::TypedValueParser<Value = String> {
    use clap::builder::TypedValueParser;
    Text.try_map(|text| match ipc_matrix_results::is_leg_name(&text) {
        true => Ok(text),
        false => Err(format!(
            "{:?} is not a leg: a leg is <triple>@native or <triple>@qemu, the triple of lowercase letters, digits, `_`, `.` and `-` (x86_64-unknown-linux-gnu@native)",
            ipc_matrix_results::printable(&text)
        )),
    })
}

/// Which stored results a command reads.
#[derive(clap::Args)]
pub struct StoredResults {
    /// The matrix file (for the profile's regression policy); default: the nearest
    /// matrix.yaml in the current folder or above.
    #[arg(long = "matrix", value_name = "FILE")]
    matrix_arg: Option<PathBuf>,
    /// The matrix file, once resolved ([`StoredResults::resolve`]).
    #[arg(skip)]
    pub matrix: PathBuf,
    /// The profile whose results are read.
    #[arg(long, default_value = "quick", value_parser = Text)]
    pub profile: String,
    /// Folder the results are in; default: <target dir>/ipc-matrix, the target dir being
    /// $CARGO_TARGET_DIR or target/ in the matrix file's folder.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// Only this leg (`<triple>@<runner>`); repeatable; default: every leg with results.
    #[arg(long, value_name = "LEG", value_parser = leg())]
    pub leg: Vec<String>,
    /// The matrix, once read: a file is read once per command.
    #[arg(skip)]
    spec: std::cell::OnceCell<Spec>,
}

impl StoredResults {
    /// Finds the matrix file, unless given.
    pub fn resolve(&mut self) -> Result<()> {
        self.matrix = matrix_file(self.matrix_arg.as_deref()).map_err(anyhow::Error::msg)?;
        Ok(())
    }

    /// `--results`, else `<target dir>/ipc-matrix` of the project.
    pub fn results_dir(&self) -> PathBuf {
        self.results
            .clone()
            .unwrap_or_else(|| default_out_dir(&project_root(&self.matrix)))
    }

    pub fn policy(&self) -> Result<RegressionPolicy> {
        regression_policy(spec_of(&self.spec, &self.matrix)?, &self.profile)
    }

    /// The legs asked for, or every leg with results of the profile (at least one).
    pub fn legs(&self) -> Result<Vec<String>> {
        if !self.leg.is_empty() {
            return Ok(self.leg.clone());
        }
        let results = self.results_dir();
        let legs = legs_with_results(&results, &self.profile)?;
        if legs.is_empty() {
            return Err(NoCells(format!(
                "no results of profile `{}` under {}; run the cells first",
                self.profile,
                results.display()
            ))
            .into());
        }
        Ok(legs)
    }
}

/// How a run is judged against its baseline.
#[derive(clap::Args)]
pub struct Judging {
    /// Folder of the baselines; default: baselines/ next to the matrix file.
    #[arg(long, value_name = "DIR")]
    pub baselines: Option<PathBuf>,
    /// A regression fails (exit 3) instead of warning; also set per profile in matrix.yaml.
    #[arg(long)]
    pub strict: bool,
    /// A regression in guest instructions per round trip fails (exit 3); timing
    /// regressions still only warn. Instruction counts are deterministic, so this is the
    /// gate for CI, where timings are noisy.
    #[arg(long)]
    pub strict_instructions: bool,
}

impl Judging {
    /// What fails the run.
    pub fn gate(&self) -> Gate {
        match (self.strict, self.strict_instructions) {
            (true, _) => Gate::Every,
            (false, true) => Gate::Instructions,
            (false, false) => Gate::Warn,
        }
    }
}

/// Which gating regressions fail the run (exit 3) rather than warn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Warn,
    Instructions,
    Every,
}

#[derive(clap::Args)]
pub struct Selection {
    /// The matrix file; default: the nearest matrix.yaml in the current folder or above.
    #[arg(long = "matrix", value_name = "FILE")]
    matrix_arg: Option<PathBuf>,
    /// The matrix file, once resolved ([`Selection::resolve`]).
    #[arg(skip)]
    pub matrix: PathBuf,
    /// Profile of matrix.yaml to expand (e.g. quick, full).
    #[arg(long, default_value = "quick", value_parser = Text)]
    pub profile: String,
    /// Keep cells whose id contains EXPR, or matches it when written /regex/; repeatable
    /// (a cell is kept if any filter matches).
    #[arg(long, value_name = "EXPR", value_parser = Text)]
    pub filter: Vec<String>,
    /// The matrix, once read: a file is read once per command.
    #[arg(skip)]
    spec: std::cell::OnceCell<Spec>,
}

impl Selection {
    /// Finds the matrix file, unless given.
    pub fn resolve(&mut self) -> Result<()> {
        self.matrix = matrix_file(self.matrix_arg.as_deref()).map_err(anyhow::Error::msg)?;
        Ok(())
    }

    /// The folder of the matrix file, where results and baselines are by default.
    pub fn root(&self) -> PathBuf {
        project_root(&self.matrix)
    }

    /// The matrix, read the first time it is asked for.
    pub fn spec(&self) -> Result<&Spec> {
        spec_of(&self.spec, &self.matrix)
    }

    /// The regression policy of the profile.
    pub fn policy(&self) -> Result<RegressionPolicy> {
        regression_policy(self.spec()?, &self.profile)
    }

    pub fn cells(&self) -> Result<Vec<Cell>> {
        let spec = self.spec()?;
        let cells = spec.cells(&self.profile).map_err(anyhow::Error::msg)?;
        let filters = self
            .filter
            .iter()
            .map(
                |f| match f.strip_prefix('/').and_then(|f| f.strip_suffix('/')) {
                    Some(re) => regex::Regex::new(re)
                        .map(Filter::Regex)
                        .with_context(|| format!("--filter {f}: not a valid regular expression")),
                    None => Ok(Filter::Contains(f.clone())),
                },
            )
            .collect::<Result<Vec<_>>>()?;
        let selected: Vec<Cell> = cells
            .into_iter()
            .filter(|c| filters.is_empty() || filters.iter().any(|f| f.matches(&c.id)))
            .collect();
        if selected.is_empty() {
            return Err(NoCells(format!(
                "no cell of profile `{}` matches {:?}; `ipc-matrix list --profile {}` shows them",
                self.profile, self.filter, self.profile
            ))
            .into());
        }
        Ok(selected)
    }
}

/// An empty selection: its own error, so that it gets its own exit code.
#[derive(Debug)]
pub struct NoCells(pub String);

impl std::fmt::Display for NoCells {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NoCells {}

enum Filter {
    Contains(String),
    Regex(regex::Regex),
}

impl Filter {
    fn matches(&self, id: &str) -> bool {
        match self {
            Filter::Contains(s) => id.contains(s.as_str()),
            Filter::Regex(re) => re.is_match(id),
        }
    }
}

/// The matrix in `cell`, read from `matrix` the first time.
fn spec_of<'a>(cell: &'a std::cell::OnceCell<Spec>, matrix: &Path) -> Result<&'a Spec> {
    if let Some(spec) = cell.get() {
        return Ok(spec);
    }
    let spec = crate::project::load_matrix(matrix).map_err(anyhow::Error::msg)?;
    Ok(cell.get_or_init(|| spec))
}

/// The regression policy of `profile` in the matrix.
pub fn regression_policy(spec: &Spec, profile: &str) -> Result<RegressionPolicy> {
    let profiles = spec.profile_names().join(", ");
    spec.profiles
        .get(profile)
        .map(|p| p.regression)
        .ok_or_else(|| {
            anyhow::anyhow!("no profile is named `{profile}`; the profiles are: {profiles}")
        })
}
