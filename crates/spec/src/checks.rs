//! Checks of values every kind has, each held to its kind's limits: payload lists,
//! round-trip counts, names. Each pushes its problems, located by path, onto `out`.

use crate::kind_spec::OverMaxPayload;
use crate::limits::MAX_NAME_BYTES;
use crate::locate::Segment;
use crate::model::{Overrides, TransportKind};
use crate::raw::RawScenario;
use crate::units::{ByteSize, UDP_MAX_PAYLOAD};
use std::collections::HashSet;

/// Refuses counts a cell of this kind cannot make: warm-up and iterations over the kind's
/// most round trips (or over 64 bits), and more bytes than a cell of the kind holds
/// (a logging cell's lines). `overrides` are a profile's, applied over the scenario's values;
/// `at` are the paths of the iterations and warm-up that apply.
pub(crate) fn check_round_trips(
    scenario: &RawScenario,
    overrides: &Overrides,
    (iterations_at, warmup_at): (Vec<Segment>, Vec<Segment>),
    out: &mut Vec<(Vec<Segment>, String)>,
) {
    let kind = scenario.kind;
    let about = kind.about();
    let most = about.max_round_trips;
    let iterations = overrides.iterations.unwrap_or(scenario.iterations).get();
    let warmup = overrides.warmup.unwrap_or(scenario.warmup);
    let what = about.round_trips;
    if iterations > most {
        out.push((
            iterations_at,
            format!(
                "{iterations} iterations: a {} cell makes at most {most} {what}, warm-up included",
                kind.as_str()
            ),
        ));
        return;
    }
    let total = match warmup.checked_add(iterations) {
        Some(total) if total <= most => total,
        total => {
            out.push((
                warmup_at,
                format!(
                    "warmup {warmup} + iterations {iterations} is {}; a {} cell makes at most {most} {what}, warm-up included",
                    total.map_or_else(|| "more than 64 bits count".into(), |t| t.to_string()),
                    kind.as_str()
                ),
            ));
            return;
        }
    };
    let payloads = overrides.payloads.as_ref().unwrap_or(&scenario.payloads);
    let longest = payloads.iter().map(ByteSize::bytes).max().unwrap_or(0);
    if let Some(why) = kind.check_volume(total, longest) {
        out.push((iterations_at, why));
    }
}

/// Refuses payload lists that cannot work: repeats, UDP payloads over one datagram, and
/// sizes a kind cannot carry.
pub(crate) fn check_payloads(
    payloads: &[ByteSize],
    scenario: &RawScenario,
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
        let about = scenario.kind.about();
        if bytes < about.stamp {
            out.push((
                path.clone(),
                format!(
                    "{payload} is too small: a {} message carries a {}-byte stamp",
                    about.name, about.stamp
                ),
            ))
        }
        let most = about.max_payload;
        let why = match about.over_max_payload {
            _ if bytes <= most => None,
            OverMaxPayload::Carried => {
                Some(format!("is larger than a {} cell carries", about.name))
            }
            OverMaxPayload::NotA(what) => Some(format!("is not a {what}")),
            // The datagram rule below says it.
            OverMaxPayload::Datagram => None,
        };
        if let Some(why) = why {
            out.push((
                path.clone(),
                format!(
                    "{payload} ({bytes} B) {why}; give at most {most} B ({})",
                    size_label(most)
                ),
            ));
            continue;
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

/// `64KiB`, `256MiB`, `1GiB`: a limit as it would be written.
fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    }
}

pub(crate) fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}
