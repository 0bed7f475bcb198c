//! Loading: parse (leaf values checked as they are read), then the rules that span fields.
//! Every error is located at its node, and all of them are reported at once.

use crate::checks::{check_payloads, check_round_trips, is_identifier};
use crate::error::{SpecError, SpecErrors};
use crate::keys::{check_thread_counts, Problems};
use crate::kinds::ScenarioKind;
use crate::limits::{MAX_CELLS, MAX_CELL_ID_BYTES, MAX_FILE_BYTES, MAX_NAME_BYTES};
use crate::locate::{check_depth, render, Locations, Segment};
use crate::model::{Overrides, Scenario, Spec, TransportKind, SCHEMA_VERSION};
use crate::raw::{RawScenario, RawSpec};
use crate::reach::RawReach;
use crate::CELL_GROUP_FAULT;
use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

fn key(k: &str) -> Segment {
    Segment::Key(k.to_string())
}

impl Spec {
    /// Reads, parses and validates a matrix file.
    pub fn load(file: &Path) -> Result<Spec, SpecErrors> {
        let text = read_matrix(file)?;
        Spec::parse(&text, file)
    }

    /// Parses and validates matrix text; `file` only names the source in errors.
    pub fn parse(text: &str, file: &Path) -> Result<Spec, SpecErrors> {
        let whole = |location: Option<(usize, usize)>, message: String| {
            SpecErrors(vec![SpecError {
                file: file.to_path_buf(),
                location,
                path: String::new(),
                message,
            }])
        };
        // A byte order mark is no part of the document (serde_yaml would read it as part
        // of the first key).
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        if text.len() > MAX_FILE_BYTES {
            return Err(whole(None, too_large()));
        }
        check_depth(text).map_err(|(at, message)| whole(Some(at), message))?;
        let located = |e: serde_yaml::Error| {
            // The library renders "<path>: <message> at line L column C"; the position is
            // moved to the front, where editors and terminals look for it.
            let rendered = e.to_string();
            let message = match rendered.rfind(" at line ") {
                Some(cut) if e.location().is_some() => rendered[..cut].to_string(),
                _ => rendered,
            };
            SpecErrors(vec![SpecError {
                file: file.to_path_buf(),
                location: e.location().map(|l| (l.line(), l.column())),
                path: String::new(),
                message,
            }])
        };
        // A key written twice in one mapping (two profiles, two plugins of one name) would
        // be read as its last value alone; a YAML value refuses it, where it is.
        if let Err(e) = serde_yaml::from_str::<serde_yaml::Value>(text) {
            if e.to_string().contains("duplicate entry") {
                return Err(located(e));
            }
        }
        let raw: RawSpec = serde_yaml::from_str(text).map_err(located)?;
        let (spec, mut problems) = raw.check();
        if let (Some(spec), true) = (&spec, problems.is_empty()) {
            spec.check_cells(&mut problems);
        }
        match spec {
            Some(spec) if problems.is_empty() => return Ok(spec),
            _ => {}
        }
        // Every problem's place, from one more pass over the text. A key that is missing
        // is placed at the nearest node above it that is there.
        let wanted: HashSet<&[Segment]> = problems
            .iter()
            .flat_map(|(path, _)| (1..=path.len()).map(|n| &path[..n]))
            .collect();
        let locations = Locations::find(text, wanted);
        Err(SpecErrors(
            problems
                .into_iter()
                .map(|(path, message)| SpecError {
                    file: file.to_path_buf(),
                    location: (1..=path.len())
                        .rev()
                        .find_map(|n| locations.get(&path[..n])),
                    path: render(&path),
                    message,
                })
                .collect(),
        ))
    }
}

/// The text of the matrix file at `file`: a regular file within the size limit, UTF-8.
pub(crate) fn read_matrix(file: &Path) -> Result<String, SpecErrors> {
    let whole = |message: String| {
        SpecErrors(vec![SpecError {
            file: file.to_path_buf(),
            location: None,
            path: String::new(),
            message,
        }])
    };
    // A regular file only: a FIFO, socket or device is refused before a byte is
    // read (a FIFO would be waited on, /dev/zero read for ever, and a pipe could be
    // read only once, where a run reads its matrix at the start and each nextest
    // process again). One byte more than the limit is enough to refuse it.
    let mut bytes = Vec::new();
    ipc_matrix_count_window::open_regular_file(file)
        .and_then(|f| f.take(MAX_FILE_BYTES as u64 + 1).read_to_end(&mut bytes))
        .map_err(|e| whole(format!("cannot read the matrix file: {e}")))?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(whole(too_large()));
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| whole(format!("the matrix file is not UTF-8 text: {e}")))?;
    Ok(text)
}

impl RawSpec {
    /// The spec with every scenario in its kind's variant, when nothing is wrong; and
    /// every problem found, in document order.
    fn check(self) -> (Option<Spec>, Problems) {
        let mut out = Vec::new();
        if self.version != SCHEMA_VERSION {
            out.push((
                vec![key("version")],
                format!(
                    "schema version {} is not supported; this ipc-matrix reads version {SCHEMA_VERSION}",
                    self.version
                ),
            ));
        }
        self.check_targets(&mut out);
        for (name, plugin) in &self.plugins {
            if let Err(why) = crate::plugins::check_plugin(name, plugin) {
                out.push((vec![key("plugins"), key(name)], why.to_string()));
            }
        }
        self.check_profiles(&mut out);
        if self.scenarios.is_empty() {
            out.push((
                vec![key("scenarios")],
                "declare at least one scenario".into(),
            ));
        }
        let mut seen = HashSet::new();
        let scenarios: Vec<Option<Scenario>> = self
            .scenarios
            .iter()
            .enumerate()
            .map(|(i, scenario)| {
                if !seen.insert(scenario.name.as_str()) {
                    out.push((
                        vec![key("scenarios"), Segment::Index(i), key("name")],
                        format!("scenario name `{}` is used twice", scenario.name),
                    ));
                }
                check_scenario(scenario, i, &mut out)
            })
            .collect();
        let spec = scenarios
            .into_iter()
            .collect::<Option<Vec<Scenario>>>()
            .map(|scenarios| Spec {
                version: self.version,
                seed: self.seed,
                targets: self.targets,
                profiles: self.profiles,
                scenarios,
            });
        (spec, out)
    }

    fn check_targets(&self, out: &mut Problems) {
        if self.targets.is_empty() {
            out.push((
                vec![key("targets")],
                "declare at least one target, e.g. `- { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }`".into(),
            ));
        }
        let mut legs = HashSet::new();
        for (i, target) in self.targets.iter().enumerate() {
            let at = vec![key("targets"), Segment::Index(i), key("triple")];
            // The triple names a folder of results: no separators, no dots alone.
            let safe = target.triple.len() <= MAX_NAME_BYTES
                && target
                    .triple
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
                && !target.triple.starts_with('.');
            if target.triple.split('-').count() < 3 || !safe {
                out.push((
                    at.clone(),
                    format!(
                        "`{}` is not a target triple like x86_64-unknown-linux-gnu (a-z, 0-9, `_`, `-`, `.`; at most {MAX_NAME_BYTES} bytes)",
                        target.triple
                    ),
                ));
            }
            if !legs.insert((target.triple.clone(), target.runner)) {
                out.push((
                    at,
                    format!(
                        "{}@{} is declared twice; each leg appears once",
                        target.triple, target.runner
                    ),
                ));
            }
        }
    }

    fn check_profiles(&self, out: &mut Problems) {
        let names = some_names(self.scenarios.iter().map(|s| s.name.as_str()));
        if self.profiles.is_empty() {
            out.push((
                vec![key("profiles")],
                "declare at least one profile, e.g. `quick:` with a description".into(),
            ));
        }
        for (profile, body) in &self.profiles {
            if !is_identifier(profile) {
                out.push((
                    vec![key("profiles"), key(profile)],
                    format!(
                        "profile name `{profile}` may use only a-z, 0-9 and `-`, at most {MAX_NAME_BYTES} bytes"
                    ),
                ));
            }
            let min_change = body.regression.min_change;
            if !(min_change.is_finite() && min_change > 0.0 && min_change <= 10.0) {
                out.push((
                    vec![
                        key("profiles"),
                        key(profile),
                        key("regression"),
                        key("min_change"),
                    ],
                    format!(
                        "min_change {min_change} is not a fraction between 0 and 10 (0.5 means 50 % slower)"
                    ),
                ));
            }
            for (scenario, overrides) in &body.scenarios {
                let at = vec![
                    key("profiles"),
                    key(profile),
                    key("scenarios"),
                    key(scenario),
                ];
                match self.scenarios.iter().position(|s| &s.name == scenario) {
                    Some(i) => self.check_overrides(i, overrides, at, out),
                    None => out.push((
                        at,
                        format!("no scenario is named `{scenario}`; the scenarios are: {names}"),
                    )),
                }
            }
        }
    }

    /// A profile's overrides (at `at`) of scenario `i`.
    fn check_overrides(
        &self,
        i: usize,
        overrides: &Overrides,
        at: Vec<Segment>,
        out: &mut Problems,
    ) {
        let target = &self.scenarios[i];
        let field = |name: &str| {
            let mut path = at.clone();
            path.push(key(name));
            path
        };
        if let Some(why) = overrides.iterations.and_then(|c| c.invalid()) {
            out.push((field("iterations"), why.into()));
        }
        let scenario_at = |name: &str| vec![key("scenarios"), Segment::Index(i), key(name)];
        let iterations_at = match overrides.iterations {
            Some(_) => field("iterations"),
            None => scenario_at("iterations"),
        };
        let warmup_at = match overrides.warmup {
            Some(_) => field("warmup"),
            None => scenario_at("warmup"),
        };
        check_round_trips(target, overrides, (iterations_at, warmup_at), out);
        if let Some(payloads) = &overrides.payloads {
            check_payloads(payloads, target, field("payloads"), out);
        }
        check_kind_overrides(target.kind, overrides, field, out);
    }
}

/// Checks a profile's overrides of a scenario of `kind`: each names a key the kind takes,
/// with a value that works. `field` gives the path of an override's key.
fn check_kind_overrides(
    kind: ScenarioKind,
    overrides: &Overrides,
    field: impl Fn(&str) -> Vec<Segment>,
    out: &mut Problems,
) {
    let durations = [
        ("timeout", &overrides.timeout),
        ("frame_deadline", &overrides.frame_deadline),
        ("budget", &overrides.budget),
        ("duration", &overrides.duration),
    ];
    for (key, given) in durations {
        match given {
            Some(_) if !kind.keys().contains(&key) => out.push((field(key), kind.not_taken(key))),
            Some(d) => {
                if let Some(why) = d.invalid() {
                    out.push((field(key), why.to_string()));
                }
            }
            None => {}
        }
    }
    for (key, given) in [
        ("clients", &overrides.clients),
        ("server_threads", &overrides.server_threads),
    ] {
        match given {
            Some(_) if !kind.keys().contains(&key) => out.push((field(key), kind.not_taken(key))),
            Some(counts) => check_thread_counts(counts, field(key), out),
            None => {}
        }
    }
}

/// Scenario `i`: what every kind shares, then its kind's own keys; the scenario in its
/// kind's variant when nothing is wrong with it.
fn check_scenario(scenario: &RawScenario, i: usize, out: &mut Problems) -> Option<Scenario> {
    let before = out.len();
    let at = |field: &str| vec![key("scenarios"), Segment::Index(i), key(field)];
    if !is_identifier(&scenario.name) || scenario.name == CELL_GROUP_FAULT {
        out.push((
            at("name"),
            format!(
                "scenario name `{}` may use only a-z, 0-9 and `-`, at most {MAX_NAME_BYTES} bytes, and `{CELL_GROUP_FAULT}` is reserved",
                scenario.name
            ),
        ));
    }
    let kind = scenario.kind;
    let allowed = kind.transports();
    let listed =
        |ts: &[TransportKind]| ts.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ");
    if scenario.transports.is_empty() {
        out.push((
            at("transports"),
            format!("list at least one of: {}", listed(allowed)),
        ));
    }
    let mut transports = HashSet::new();
    for (j, transport) in scenario.transports.iter().enumerate() {
        let mut path = at("transports");
        path.push(Segment::Index(j));
        if !transports.insert(*transport) {
            out.push((path.clone(), format!("`{transport}` is listed twice")));
        }
        if let TransportKind::Stack(stack) = transport {
            if !transport.is_known() {
                let registered = crate::StackName::registered();
                let names = registered.iter().map(|s| s.as_str()).collect::<Vec<_>>();
                out.push((
                    path,
                    format!(
                        "`{stack}` is neither a built-in transport ({}) nor a stack this binary registers ({}); a stack is registered by the binary that carries it (ipc_matrix::main!, ipc_matrix::test_main!)",
                        listed(&TransportKind::CHANNELS),
                        match names.is_empty() {
                            true => "it registers none".to_owned(),
                            false => names.join(", "),
                        }
                    ),
                ));
            } else if !kind.takes_stacks() {
                out.push((
                    path,
                    format!(
                        "a {} scenario does not run over a user's stack such as `{stack}`; it runs over: {}",
                        kind.as_str(),
                        listed(allowed)
                    ),
                ));
            }
        } else if !allowed.contains(transport) {
            out.push((
                path,
                format!(
                    "a {} scenario does not run over {transport}; it runs over: {}",
                    kind.as_str(),
                    listed(allowed)
                ),
            ));
        }
    }
    if !scenario.wake.is_empty() && !transports.iter().any(|t| t.has_wake_modes()) {
        let waking: Vec<TransportKind> = TransportKind::CHANNELS
            .into_iter()
            .filter(|t| t.has_wake_modes())
            .collect();
        let names = waking.iter().map(|t| t.as_str()).collect::<Vec<_>>();
        out.push((
            at("wake"),
            format!(
                "wake modes apply only to the {} transport{}; remove `wake` or add one to transports",
                names.join(", "),
                if names.len() == 1 { "" } else { "s" }
            ),
        ));
    }
    let work = kind.parse(scenario, i, out);
    if scenario.payloads.is_empty() {
        out.push((
            at("payloads"),
            "list at least one payload size, e.g. [200B]".into(),
        ));
    }
    check_payloads(&scenario.payloads, scenario, at("payloads"), out);
    if let Some(why) = scenario.iterations.invalid() {
        out.push((at("iterations"), why.into()));
    }
    check_round_trips(
        scenario,
        &Overrides::default(),
        (at("iterations"), at("warmup")),
        out,
    );
    let (host, peer) = RawReach {
        kind,
        transports: &scenario.transports,
        host: scenario.host,
        mtu: scenario.mtu,
        link: scenario.link.as_ref(),
        peer: scenario.peer.as_ref(),
    }
    .check(at, out);
    let work = work.filter(|_| out.len() == before)?;
    Some(Scenario {
        name: scenario.name.clone(),
        transports: scenario.transports.clone(),
        wake: scenario.wake.clone(),
        payloads: scenario.payloads.clone(),
        iterations: scenario.iterations,
        warmup: scenario.warmup,
        work,
        host,
        peer,
    })
}

impl Spec {
    /// Rules on the cells themselves, once everything else holds: how many a profile
    /// makes, and that every id can name a file.
    fn check_cells(&self, out: &mut Problems) {
        for profile in self.profiles.keys() {
            match self.cell_count(profile) {
                Some(count) if count <= MAX_CELLS as u64 => {}
                count => {
                    out.push((
                        vec![key("profiles"), key(profile)],
                        format!(
                            "profile `{profile}` expands into {} cells; a profile has at most {MAX_CELLS}: list fewer transports, payloads or threads",
                            count.map_or_else(|| "more than 2^64".to_string(), |c| c.to_string())
                        ),
                    ));
                    continue;
                }
            }
            let Ok(cells) = self.cells(profile) else {
                continue;
            };
            let mut reported = HashSet::new();
            for cell in cells {
                if cell.id.len() > MAX_CELL_ID_BYTES && reported.insert(cell.scenario.clone()) {
                    let i = self.scenarios.iter().position(|s| s.name == cell.scenario);
                    out.push((
                        vec![key("scenarios"), Segment::Index(i.unwrap_or(0)), key("name")],
                        format!(
                            "cell id `{}` is {} bytes; ids are file names (`<id>.json`) of at most {MAX_CELL_ID_BYTES} bytes: shorten the name or the payload sizes",
                            cell.id,
                            cell.id.len()
                        ),
                    ));
                }
            }
        }
    }
}

fn too_large() -> String {
    format!("the matrix file is larger than {MAX_FILE_BYTES} bytes (1 MiB), the most it may be")
}

/// Names for a message: the first few, and how many more.
fn some_names<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 10;
    let total = names.len();
    let mut shown: Vec<&str> = names.take(SHOWN).collect();
    let more = format!("and {} more", total.saturating_sub(SHOWN));
    if total > SHOWN {
        shown.push(&more);
    }
    shown.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locate::PASSES;

    #[test]
    fn all_errors_are_located_in_one_pass() {
        let mut text = String::from(
            "version: 1\ntargets: [{ triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }]\nprofiles: { quick: { description: q } }\nscenarios:\n",
        );
        for i in 0..4000 {
            text.push_str(&format!(
                "  - {{ name: s{i}, kind: echo, transports: [tcp], payloads: [0B], iterations: 1, timeout: 1s }}\n"
            ));
        }
        let before = PASSES.with(|p| p.get());
        let errors = Spec::parse(&text, Path::new("m.yaml")).unwrap_err();
        let passes = PASSES.with(|p| p.get()) - before;
        assert_eq!(errors.0.len(), 4000);
        assert!(errors.0.iter().all(|e| e.location.is_some()));
        // One pass bounds the depth, one locates every error: not one per error.
        assert_eq!(passes, 2);
    }
}
