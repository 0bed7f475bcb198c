//! Loading: parse (leaf values checked as they are read), then the rules that span fields.
//! Every error is located at its node, and all of them are reported at once.

use crate::error::{SpecError, SpecErrors};
use crate::locate::{locate, render, Segment};
use crate::model::{Scenario, ScenarioKind, Spec, TransportKind, SCHEMA_VERSION};
use crate::units::{ByteSize, UDP_MAX_PAYLOAD};
use crate::CELL_GROUP_FAULT;
use std::collections::HashSet;
use std::path::Path;

impl Spec {
    /// Reads, parses and validates a matrix file.
    pub fn load(file: &Path) -> Result<Spec, SpecErrors> {
        let text = std::fs::read_to_string(file).map_err(|e| {
            SpecErrors(vec![SpecError {
                file: file.to_path_buf(),
                location: None,
                path: String::new(),
                message: format!("cannot read the matrix file: {e}"),
            }])
        })?;
        Spec::parse(&text, file)
    }

    /// Parses and validates matrix text; `file` only names the source in errors.
    pub fn parse(text: &str, file: &Path) -> Result<Spec, SpecErrors> {
        let spec: Spec = serde_yaml::from_str(text).map_err(|e| {
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
        })?;
        let problems = spec.problems();
        if problems.is_empty() {
            return Ok(spec);
        }
        Err(SpecErrors(
            problems
                .into_iter()
                .map(|(path, message)| SpecError {
                    file: file.to_path_buf(),
                    location: locate(text, &path),
                    path: render(&path),
                    message,
                })
                .collect(),
        ))
    }

    fn problems(&self) -> Vec<(Vec<Segment>, String)> {
        let mut out = Vec::new();
        let key = |k: &str| Segment::Key(k.to_string());

        if self.version != SCHEMA_VERSION {
            out.push((
                vec![key("version")],
                format!(
                    "schema version {} is not supported; this ipc-matrix reads version {SCHEMA_VERSION}",
                    self.version
                ),
            ));
        }

        if self.targets.is_empty() {
            out.push((
                vec![key("targets")],
                "declare at least one target, e.g. `- { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }`".into(),
            ));
        }
        let mut legs = HashSet::new();
        for (i, target) in self.targets.iter().enumerate() {
            let at = vec![key("targets"), Segment::Index(i), key("triple")];
            if target.triple.split('-').count() < 3 || target.triple.contains(char::is_whitespace) {
                out.push((
                    at.clone(),
                    format!(
                        "`{}` is not a target triple like x86_64-unknown-linux-gnu",
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

        let names: Vec<&str> = self.scenarios.iter().map(|s| s.name.as_str()).collect();
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
                    format!("profile name `{profile}` may use only a-z, 0-9 and `-`"),
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
                let Some(target) = self.scenarios.iter().find(|s| &s.name == scenario) else {
                    out.push((
                        at,
                        format!(
                            "no scenario is named `{scenario}`; the scenarios are: {}",
                            names.join(", ")
                        ),
                    ));
                    continue;
                };
                let field = |name: &str| {
                    let mut path = at.clone();
                    path.push(key(name));
                    path
                };
                if let Some(why) = overrides.iterations.and_then(|c| c.invalid()) {
                    out.push((field("iterations"), why.into()));
                }
                if let Some(why) = overrides.timeout.as_ref().and_then(|t| t.invalid()) {
                    out.push((field("timeout"), why.into()));
                }
                if let Some(payloads) = &overrides.payloads {
                    let mut payload_path = at.clone();
                    payload_path.push(key("payloads"));
                    check_payloads(payloads, target, payload_path, &mut out);
                }
                let is_load = target.kind == ScenarioKind::UdpLoad;
                for (name, counts) in [
                    ("clients", &overrides.clients),
                    ("server_threads", &overrides.server_threads),
                ] {
                    match counts {
                        Some(_) if !is_load => out.push((
                            field(name),
                            format!("`{name}` applies only to udp-load scenarios"),
                        )),
                        Some(counts) => check_thread_counts(counts, field(name), &mut out),
                        None => {}
                    }
                }
                match &overrides.duration {
                    Some(_) if !is_load => out.push((
                        field("duration"),
                        "`duration` applies only to udp-load scenarios".into(),
                    )),
                    Some(d) => {
                        if let Some(why) = d.invalid() {
                            out.push((field("duration"), why.into()));
                        }
                    }
                    None => {}
                }
            }
        }

        if self.scenarios.is_empty() {
            out.push((
                vec![key("scenarios")],
                "declare at least one scenario".into(),
            ));
        }
        let mut seen = HashSet::new();
        for (i, scenario) in self.scenarios.iter().enumerate() {
            let at = |field: &str| vec![key("scenarios"), Segment::Index(i), key(field)];
            if !is_identifier(&scenario.name) || scenario.name == CELL_GROUP_FAULT {
                out.push((
                    at("name"),
                    format!(
                        "scenario name `{}` may use only a-z, 0-9 and `-`, and `{CELL_GROUP_FAULT}` is reserved",
                        scenario.name
                    ),
                ));
            }
            if !seen.insert(scenario.name.as_str()) {
                out.push((
                    at("name"),
                    format!("scenario name `{}` is used twice", scenario.name),
                ));
            }
            if scenario.transports.is_empty() {
                out.push((
                    at("transports"),
                    format!(
                        "list at least one of: {}",
                        scenario
                            .kind
                            .transports()
                            .iter()
                            .map(|t| t.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            let mut transports = HashSet::new();
            for (j, transport) in scenario.transports.iter().enumerate() {
                if !transports.insert(*transport) {
                    let mut path = at("transports");
                    path.push(Segment::Index(j));
                    out.push((path, format!("`{transport}` is listed twice")));
                }
            }
            if !scenario.wake.is_empty() && !transports.contains(&TransportKind::Shm) {
                out.push((
                    at("wake"),
                    "wake modes apply only to the shm transport; remove `wake` or add shm to transports".into(),
                ));
            }
            match (scenario.kind.uses_codecs(), scenario.codecs.is_empty()) {
                (true, true) => out.push((
                    at("codecs"),
                    format!(
                        "a {} scenario lists its codecs: capnp, prost",
                        scenario.kind.as_str()
                    ),
                )),
                (false, false) => out.push((
                    at("codecs"),
                    format!(
                        "codecs apply only to codec, fan-out and fan-in scenarios; remove them or change kind `{}`",
                        scenario.kind.as_str()
                    ),
                )),
                _ => {}
            }
            let allowed = scenario.kind.transports();
            for (j, transport) in scenario.transports.iter().enumerate() {
                if !allowed.contains(transport) {
                    let mut path = at("transports");
                    path.push(Segment::Index(j));
                    out.push((
                        path,
                        format!(
                            "a {} scenario does not run over {transport}; it runs over: {}",
                            scenario.kind.as_str(),
                            allowed
                                .iter()
                                .map(|t| t.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
            }
            let is_load = scenario.kind == ScenarioKind::UdpLoad;
            for (field, given) in [
                ("clients", !scenario.clients.is_empty()),
                ("server_threads", !scenario.server_threads.is_empty()),
                ("duration", scenario.duration.is_some()),
            ] {
                if is_load && !given {
                    out.push((
                        at(field),
                        format!(
                            "a udp-load scenario needs `{field}`, e.g. {}",
                            example(field)
                        ),
                    ));
                }
                if !is_load && given {
                    out.push((
                        at(field),
                        format!(
                            "`{field}` applies only to udp-load scenarios; remove it or change kind `{}`",
                            scenario.kind.as_str()
                        ),
                    ));
                }
            }
            check_thread_counts(&scenario.clients, at("clients"), &mut out);
            check_thread_counts(&scenario.server_threads, at("server_threads"), &mut out);
            if let Some(why) = scenario.duration.as_ref().and_then(|d| d.invalid()) {
                out.push((at("duration"), why.into()));
            }
            match (scenario.kind == ScenarioKind::Logging, scenario.sinks.is_empty()) {
                (true, true) => out.push((
                    at("sinks"),
                    "a logging scenario lists its sinks: buffered, write-per-line, tracing-blocking, tracing-non-blocking".into(),
                )),
                (false, false) => out.push((
                    at("sinks"),
                    format!(
                        "sinks apply only to logging scenarios; remove them or change kind `{}`",
                        scenario.kind.as_str()
                    ),
                )),
                _ => {}
            }
            let mut sinks = HashSet::new();
            for (j, sink) in scenario.sinks.iter().enumerate() {
                if !sinks.insert(*sink) {
                    let mut path = at("sinks");
                    path.push(Segment::Index(j));
                    out.push((path, format!("`{sink}` is listed twice")));
                }
            }
            let mut codecs = HashSet::new();
            for (j, codec) in scenario.codecs.iter().enumerate() {
                if !codecs.insert(*codec) {
                    let mut path = at("codecs");
                    path.push(Segment::Index(j));
                    out.push((path, format!("`{codec}` is listed twice")));
                }
            }
            if scenario.payloads.is_empty() {
                out.push((
                    at("payloads"),
                    "list at least one payload size, e.g. [200B]".into(),
                ));
            }
            check_payloads(&scenario.payloads, scenario, at("payloads"), &mut out);
            if let Some(why) = scenario.iterations.invalid() {
                out.push((at("iterations"), why.into()));
            }
            if let Some(why) = scenario.timeout.invalid() {
                out.push((at("timeout"), why.into()));
            }
            if !(0.0..=1.0).contains(&scenario.max_loss) {
                out.push((
                    at("max_loss"),
                    format!("{} is not a share between 0.0 and 1.0", scenario.max_loss),
                ));
            }
        }
        out
    }
}

/// The smallest payload of kinds that stamp each message with who sent it and when.
const MIN_STAMPED_PAYLOAD: u64 = 16;
/// The longest log line a `logging` cell writes.
const MAX_LOG_LINE: u64 = 64 * 1024;
/// The most threads a side of a `udp-load` cell may start.
const MAX_THREADS: u32 = 256;

fn example(field: &str) -> &'static str {
    match field {
        "clients" => "[1, 4, 16]",
        "server_threads" => "[1, 4, 16]",
        _ => "5s",
    }
}

fn check_thread_counts(counts: &[u32], at: Vec<Segment>, out: &mut Vec<(Vec<Segment>, String)>) {
    let mut seen = HashSet::new();
    for (j, &count) in counts.iter().enumerate() {
        let mut path = at.clone();
        path.push(Segment::Index(j));
        if count == 0 || count > MAX_THREADS {
            out.push((
                path,
                format!("{count} threads: give a number from 1 to {MAX_THREADS}"),
            ));
        } else if !seen.insert(count) {
            out.push((path, format!("{count} is listed twice")));
        }
    }
}

/// Refuses payload lists that cannot work: repeats, UDP payloads over one datagram, and
/// sizes a kind cannot carry.
fn check_payloads(
    payloads: &[ByteSize],
    scenario: &Scenario,
    at: Vec<Segment>,
    out: &mut Vec<(Vec<Segment>, String)>,
) {
    let transports = &scenario.transports;
    let mut seen = HashSet::new();
    for (j, payload) in payloads.iter().enumerate() {
        let mut path = at.clone();
        path.push(Segment::Index(j));
        if let Some(why) = payload.invalid() {
            out.push((path, why.to_string()));
            continue;
        }
        if !seen.insert(payload.bytes()) {
            out.push((path.clone(), format!("{payload} is listed twice")));
        }
        let bytes = payload.bytes();
        match scenario.kind {
            ScenarioKind::UdpLoad | ScenarioKind::Logging if bytes < MIN_STAMPED_PAYLOAD => {
                out.push((
                    path.clone(),
                    format!(
                        "{payload} is too small: a {} message carries a {MIN_STAMPED_PAYLOAD}-byte stamp",
                        scenario.kind.as_str()
                    ),
                ))
            }
            ScenarioKind::Logging if bytes > MAX_LOG_LINE => out.push((
                path.clone(),
                format!("{payload} is not a log line; give at most 64KiB"),
            )),
            _ => {}
        }
        if transports.contains(&TransportKind::Udp) && payload.bytes() > UDP_MAX_PAYLOAD {
            out.push((
                path,
                format!(
                    "{payload} ({} B) does not fit one UDP datagram (at most {UDP_MAX_PAYLOAD} B); \
                     use a smaller payload or move udp to a scenario of its own",
                    payload.bytes()
                ),
            ));
        }
    }
}

fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}
