//! Loading: parse (leaf values checked as they are read), then the rules that span fields.
//! Every error is located at its node, and all of them are reported at once.

use crate::error::{SpecError, SpecErrors};
use crate::locate::{locate, render, Segment};
use crate::model::{Spec, TransportKind, SCHEMA_VERSION};
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
                    check_payloads(payloads, &target.transports, payload_path, &mut out);
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
                    "list at least one of: shm, local, tcp, udp".into(),
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
            if scenario.kind.uses_codecs() && transports.contains(&TransportKind::Udp) {
                out.push((
                    at("transports"),
                    format!(
                        "udp loses and limits datagrams; {} scenarios run over shm, local or tcp",
                        scenario.kind.as_str()
                    ),
                ));
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
            check_payloads(
                &scenario.payloads,
                &scenario.transports,
                at("payloads"),
                &mut out,
            );
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

/// Refuses payload lists that cannot work: repeats, and UDP payloads over one datagram.
fn check_payloads(
    payloads: &[ByteSize],
    transports: &[TransportKind],
    at: Vec<Segment>,
    out: &mut Vec<(Vec<Segment>, String)>,
) {
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
