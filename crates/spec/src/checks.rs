//! Checks of values that several kinds share: payload lists, round-trip counts, thread
//! counts, names. Each pushes its problems, located by path, onto `out`.

use crate::limits::{MAX_LOG_BYTES, MAX_NAME_BYTES};
use crate::locate::Segment;
use crate::model::{Overrides, ScenarioKind, TransportKind};
use crate::raw::RawScenario;
use crate::units::{ByteSize, UDP_MAX_PAYLOAD};
use std::collections::HashSet;

/// Refuses counts a cell of this kind cannot make: warm-up and iterations over the kind's
/// most round trips (or over 64 bits), and logging cells that would write more than
/// [`MAX_LOG_BYTES`]. `overrides` are a profile's, applied over the scenario's values;
/// `at` are the paths of the iterations and warm-up that apply.
pub(crate) fn check_round_trips(
    scenario: &RawScenario,
    overrides: &Overrides,
    (iterations_at, warmup_at): (Vec<Segment>, Vec<Segment>),
    out: &mut Vec<(Vec<Segment>, String)>,
) {
    let kind = scenario.kind;
    let most = kind.max_round_trips();
    let iterations = overrides.iterations.unwrap_or(scenario.iterations).get();
    let warmup = overrides.warmup.unwrap_or(scenario.warmup);
    let what = match kind {
        ScenarioKind::Logging => "lines",
        ScenarioKind::UdpLoad => "requests per client",
        _ => "round trips",
    };
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
    if kind == ScenarioKind::Logging {
        let payloads = overrides.payloads.as_ref().unwrap_or(&scenario.payloads);
        let longest = payloads.iter().map(ByteSize::bytes).max().unwrap_or(0);
        if longest
            .checked_mul(total)
            .is_none_or(|bytes| bytes > MAX_LOG_BYTES)
        {
            out.push((
                iterations_at,
                format!(
                    "{total} lines of {longest} B are more than {MAX_LOG_BYTES} B (1 GiB), the most a logging cell writes (it holds its lines in memory)"
                ),
            ));
        }
    }
}

/// The smallest payload of kinds that stamp each message with who sent it and when.
const MIN_STAMPED_PAYLOAD: u64 = 16;
/// The most threads a side of a `udp-load` cell may start.
const MAX_THREADS: u32 = 256;

pub(crate) fn check_thread_counts(
    counts: &[u32],
    at: Vec<Segment>,
    out: &mut Vec<(Vec<Segment>, String)>,
) {
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
            _ => {}
        }
        let most = scenario.kind.max_payload();
        // udp-load: the datagram rule below says it.
        if bytes > most && scenario.kind != ScenarioKind::UdpLoad {
            let why = match scenario.kind {
                ScenarioKind::Logging => "is not a log line".to_string(),
                kind => format!("is larger than a {} cell carries", kind.as_str()),
            };
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
