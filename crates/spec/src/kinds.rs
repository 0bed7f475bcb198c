//! From a scenario as written to its kind's variant ([`ScenarioWork`]): each kind takes
//! its own keys, and a key it does not take is refused where it is, naming what the kind
//! takes instead (`timeout` on a logging scenario: use `budget`).

use crate::checks::check_thread_counts;
use crate::locate::Segment;
use crate::model::{Overrides, ScenarioKind, ScenarioWork, TransportKind};
use crate::raw::RawScenario;
use crate::units::DurationSpec;
use std::collections::HashSet;
use std::fmt::Display;
use std::hash::Hash;
use std::time::Duration;

type Problems = Vec<(Vec<Segment>, String)>;

/// Why a scenario of `kind` does not take `key` (one of the kind-specific keys).
pub(crate) fn not_taken(kind: ScenarioKind, key: &str) -> String {
    let name = kind.as_str();
    let takes_timeout = kind.keys().contains(&"timeout");
    match key {
        "timeout" if kind == ScenarioKind::Logging => {
            "logging scenarios bound the whole write with `budget`, not `timeout`".into()
        }
        "timeout" => format!(
            "{name} scenarios bound how late a frame may arrive with `frame_deadline`, not `timeout`"
        ),
        "frame_deadline" | "budget" if takes_timeout => format!(
            "{name} scenarios take no `{key}`; the deadline of one round trip is `timeout`"
        ),
        "frame_deadline" => format!(
            "{name} scenarios take no `frame_deadline`; the whole write is bounded by `budget`"
        ),
        "budget" => format!(
            "{name} scenarios take no `budget`; how late a frame may arrive is `frame_deadline`"
        ),
        "max_loss" => format!(
            "{name} scenarios take no `max_loss`: their transports lose nothing"
        ),
        "codecs" => format!(
            "{name} scenarios take no `codecs`; codecs apply only to codec, fan-out and fan-in scenarios"
        ),
        "sinks" => format!(
            "{name} scenarios take no `sinks`; sinks apply only to logging scenarios"
        ),
        _ => format!(
            "{name} scenarios take no `{key}`; `{key}` applies only to udp-load scenarios"
        ),
    }
}

/// The kind's variant of scenario `index`, or None with its problems pushed on `out`.
pub(crate) fn work(raw: &RawScenario, index: usize, out: &mut Problems) -> Option<ScenarioWork> {
    let mut keys = Keys { raw, index, out };
    keys.refuse_others();
    match raw.kind {
        ScenarioKind::Echo => {
            let (timeout, max_loss) = keys.echoes();
            Some(ScenarioWork::Echo {
                timeout: timeout?,
                max_loss: max_loss?,
            })
        }
        ScenarioKind::Bulk => {
            let (timeout, max_loss) = keys.echoes();
            Some(ScenarioWork::Bulk {
                timeout: timeout?,
                max_loss: max_loss?,
            })
        }
        ScenarioKind::Codec => {
            let codecs = keys.codecs();
            let timeout = keys.timeout();
            Some(ScenarioWork::Codec {
                codecs: codecs?,
                timeout: timeout?,
            })
        }
        ScenarioKind::FanOut | ScenarioKind::FanIn => {
            let codecs = keys.codecs();
            let frame_deadline = keys.required_duration(
                "frame_deadline",
                raw.frame_deadline.as_ref(),
                "how late a frame may arrive before it counts as dropped, e.g. 2s",
            );
            let max_loss = keys.max_loss();
            let (codecs, frame_deadline, max_loss) = (codecs?, frame_deadline?, max_loss?);
            Some(match raw.kind {
                ScenarioKind::FanOut => ScenarioWork::FanOut {
                    codecs,
                    frame_deadline,
                    max_loss,
                },
                _ => ScenarioWork::FanIn {
                    codecs,
                    frame_deadline,
                    max_loss,
                },
            })
        }
        ScenarioKind::Rpc => Some(ScenarioWork::Rpc {
            timeout: keys.timeout()?,
        }),
        ScenarioKind::ReqRep => Some(ScenarioWork::ReqRep {
            timeout: keys.timeout()?,
        }),
        ScenarioKind::UdpLoad => {
            let clients = keys.threads("clients", raw.clients.as_deref());
            let server_threads = keys.threads("server_threads", raw.server_threads.as_deref());
            let duration = keys.required_duration(
                "duration",
                raw.duration.as_ref(),
                "how long the clients send, e.g. 5s",
            );
            let timeout = keys.timeout();
            let max_loss = keys.max_loss();
            Some(ScenarioWork::UdpLoad {
                clients: clients?,
                server_threads: server_threads?,
                duration: duration?,
                timeout: timeout?,
                max_loss: max_loss?,
            })
        }
        ScenarioKind::Logging => {
            let sinks = keys.list(
                "sinks",
                raw.sinks.as_deref(),
                "a logging scenario lists its sinks: buffered, write-per-line, tracing-blocking, tracing-non-blocking",
            );
            let budget = keys.required_duration(
                "budget",
                raw.budget.as_ref(),
                "the time the whole write may take, e.g. 30s",
            );
            Some(ScenarioWork::Logging {
                sinks: sinks?,
                budget: budget?,
            })
        }
    }
}

/// Checks a profile's overrides of a scenario of `kind`: each names a field the kind
/// takes, with a value that works. `field` gives the path of an override's key.
pub(crate) fn check_overrides(
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
            Some(_) if !kind.keys().contains(&key) => out.push((field(key), not_taken(kind, key))),
            Some(d) => {
                if let Some(why) = d.invalid() {
                    out.push((field(key), why.into()));
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
            Some(_) if !kind.keys().contains(&key) => out.push((field(key), not_taken(kind, key))),
            Some(counts) => check_thread_counts(counts, field(key), out),
            None => {}
        }
    }
}

/// The kind-specific keys of one scenario, taken by its kind.
struct Keys<'a> {
    raw: &'a RawScenario,
    index: usize,
    out: &'a mut Problems,
}

impl Keys<'_> {
    fn at(&self, key: &str) -> Vec<Segment> {
        vec![
            Segment::Key("scenarios".into()),
            Segment::Index(self.index),
            Segment::Key(key.into()),
        ]
    }

    fn problem(&mut self, key: &str, message: String) {
        let at = self.at(key);
        self.out.push((at, message));
    }

    /// Refuses every key given that the kind does not take.
    fn refuse_others(&mut self) {
        let kind = self.raw.kind;
        for key in self.raw.given_keys() {
            if !kind.keys().contains(&key) {
                self.problem(key, not_taken(kind, key));
            }
        }
    }

    /// `timeout` and `max_loss` of echo and bulk: a loss is allowed only over udp.
    fn echoes(&mut self) -> (Option<Duration>, Option<f64>) {
        let timeout = self.timeout();
        let max_loss = self.max_loss();
        if self.raw.max_loss.is_some() && !self.raw.transports.contains(&TransportKind::Udp) {
            let kind = self.raw.kind.as_str();
            self.problem(
                "max_loss",
                format!(
                    "only udp loses messages, and this {kind} scenario does not list it; remove `max_loss` or add udp to transports"
                ),
            );
            return (timeout, None);
        }
        (timeout, max_loss)
    }

    /// `timeout`: the deadline of one round trip.
    fn timeout(&mut self) -> Option<Duration> {
        let given = self.raw.timeout.as_ref();
        self.required_duration("timeout", given, "the deadline of one round trip, e.g. 5s")
    }

    /// A duration the kind needs. When missing because the scenario gives an old key
    /// instead (`timeout` for `budget`), that key's refusal says so already.
    fn required_duration(
        &mut self,
        key: &str,
        given: Option<&DurationSpec>,
        what: &str,
    ) -> Option<Duration> {
        match given {
            Some(d) => match d.invalid() {
                Some(why) => {
                    self.problem(key, why.into());
                    None
                }
                None => Some(d.get()),
            },
            None => {
                let replaced =
                    matches!(key, "frame_deadline" | "budget") && self.raw.timeout.is_some();
                if !replaced {
                    let kind = self.raw.kind.as_str();
                    self.problem(key, format!("{kind} scenarios need `{key}`, {what}"));
                }
                None
            }
        }
    }

    /// `max_loss`: a share between 0 and 1; 0 when not given.
    fn max_loss(&mut self) -> Option<f64> {
        let max_loss = self.raw.max_loss.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&max_loss) {
            self.problem(
                "max_loss",
                format!("{max_loss} is not a share between 0.0 and 1.0"),
            );
            return None;
        }
        Some(max_loss)
    }

    fn codecs(&mut self) -> Option<Vec<crate::model::CodecKind>> {
        let needs = format!(
            "a {} scenario lists its codecs: capnp, prost",
            self.raw.kind.as_str()
        );
        self.list("codecs", self.raw.codecs.as_deref(), &needs)
    }

    /// A list the kind needs, at least one item, none twice.
    fn list<T: Copy + Eq + Hash + Display>(
        &mut self,
        key: &str,
        given: Option<&[T]>,
        needs: &str,
    ) -> Option<Vec<T>> {
        let given = given.unwrap_or_default();
        if given.is_empty() {
            self.problem(key, needs.into());
            return None;
        }
        let mut seen = HashSet::new();
        let mut ok = true;
        for (j, item) in given.iter().enumerate() {
            if !seen.insert(*item) {
                let mut path = self.at(key);
                path.push(Segment::Index(j));
                self.out.push((path, format!("`{item}` is listed twice")));
                ok = false;
            }
        }
        ok.then(|| given.to_vec())
    }

    /// Numbers of threads a udp-load scenario needs.
    fn threads(&mut self, key: &str, given: Option<&[u32]>) -> Option<Vec<u32>> {
        let Some(counts) = given.filter(|c| !c.is_empty()) else {
            let example = "[1, 4, 16]";
            self.problem(
                key,
                format!("udp-load scenarios need `{key}`, e.g. {example}"),
            );
            return None;
        };
        let before = self.out.len();
        check_thread_counts(counts, self.at(key), self.out);
        (self.out.len() == before).then(|| counts.to_vec())
    }
}
