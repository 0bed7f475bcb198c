//! Reading the keys a scenario's kind takes beyond those every kind has, with located
//! errors ([`Keys`]), and refusing those it does not take, naming what it takes instead
//! (`timeout` on a logging scenario: use `budget`).

use crate::locate::Segment;
use crate::model::CodecKind;
use crate::raw::RawScenario;
use crate::units::DurationSpec;
use std::collections::HashSet;
use std::fmt::Display;
use std::hash::Hash;
use std::time::Duration;

pub(crate) type Problems = Vec<(Vec<Segment>, String)>;

/// The keys that bound time, with what each bounds, as a refusal of another names them.
const TIME_LIMITS: [(&str, &str, &str); 3] = [
    (
        "timeout",
        "the deadline of one round trip",
        "the deadline of one round trip is `timeout`",
    ),
    (
        "frame_deadline",
        "how late a frame may arrive",
        "how late a frame may arrive is `frame_deadline`",
    ),
    (
        "budget",
        "the whole write",
        "the whole write is bounded by `budget`",
    ),
];

/// Why a scenario of kind `name`, which takes `takes`, does not take `key` (a key of
/// other kinds: `takers`).
pub(crate) fn not_taken(name: &str, takes: &[&str], key: &str, takers: &[&str]) -> String {
    let limit = TIME_LIMITS.iter().find(|(k, ..)| takes.contains(k));
    let is_limit = TIME_LIMITS.iter().any(|(k, ..)| *k == key);
    match (key, limit) {
        ("timeout", Some((limit, what, _))) => {
            format!("{name} scenarios bound {what} with `{limit}`, not `timeout`")
        }
        (_, Some((_, _, is))) if is_limit => format!("{name} scenarios take no `{key}`; {is}"),
        ("max_loss", _) => {
            format!("{name} scenarios take no `max_loss`: their transports lose nothing")
        }
        ("codecs" | "sinks", _) => format!(
            "{name} scenarios take no `{key}`; {key} apply only to {} scenarios",
            and_list(takers)
        ),
        _ if takers.is_empty() => format!("{name} scenarios take no `{key}`"),
        _ => format!(
            "{name} scenarios take no `{key}`; `{key}` applies only to {} scenarios",
            and_list(takers)
        ),
    }
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The most threads a side of a cell may start.
const MAX_THREADS: u32 = 256;

/// Refuses numbers of threads that cannot work: none, more than [`MAX_THREADS`], or one
/// listed twice.
pub(crate) fn check_thread_counts(counts: &[u32], at: Vec<Segment>, out: &mut Problems) {
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

/// The kind-specific keys of one scenario entry, read by its kind: each value checked,
/// each problem pushed on `out` at its path.
pub(crate) struct Keys<'a> {
    /// The entry as written.
    pub raw: &'a RawScenario,
    /// The kind's name, for messages.
    pub name: &'static str,
    index: usize,
    out: &'a mut Problems,
}

impl<'a> Keys<'a> {
    pub fn new(
        raw: &'a RawScenario,
        name: &'static str,
        index: usize,
        out: &'a mut Problems,
    ) -> Self {
        Self {
            raw,
            name,
            index,
            out,
        }
    }

    /// The path of `key` in this entry.
    pub fn at(&self, key: &str) -> Vec<Segment> {
        vec![
            Segment::Key("scenarios".into()),
            Segment::Index(self.index),
            Segment::Key(key.into()),
        ]
    }

    /// A problem with `key`.
    pub fn problem(&mut self, key: &str, message: String) {
        let at = self.at(key);
        self.out.push((at, message));
    }

    /// Problems of a list given as `key`, pushed by `check` at the paths it is given.
    pub fn check_list(
        &mut self,
        key: &str,
        check: impl FnOnce(Vec<Segment>, &mut Problems),
    ) -> bool {
        let before = self.out.len();
        check(self.at(key), self.out);
        self.out.len() == before
    }

    /// `timeout`: the deadline of one round trip.
    pub fn timeout(&mut self) -> Option<Duration> {
        let given = self.raw.timeout.as_ref();
        self.required_duration("timeout", given, "the deadline of one round trip, e.g. 5s")
    }

    /// A duration the kind needs. When missing because the scenario gives an old key
    /// instead (`timeout` for `budget`), that key's refusal says so already.
    pub fn required_duration(
        &mut self,
        key: &str,
        given: Option<&DurationSpec>,
        what: &str,
    ) -> Option<Duration> {
        match given {
            Some(d) => match d.invalid() {
                Some(why) => {
                    self.problem(key, why.to_string());
                    None
                }
                None => Some(d.get()),
            },
            None => {
                let replaced =
                    matches!(key, "frame_deadline" | "budget") && self.raw.timeout.is_some();
                if !replaced {
                    let name = self.name;
                    self.problem(key, format!("{name} scenarios need `{key}`, {what}"));
                }
                None
            }
        }
    }

    /// `max_loss`: a share between 0 and 1; 0 when not given.
    pub fn max_loss(&mut self) -> Option<f64> {
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

    /// `codecs`: the formats of the frames, one cell each.
    pub fn codecs(&mut self) -> Option<Vec<CodecKind>> {
        let needs = format!("a {} scenario lists its codecs: capnp, prost", self.name);
        self.list("codecs", self.raw.codecs.as_deref(), &needs)
    }

    /// A list the kind needs, at least one item, none twice.
    pub fn list<T: Copy + Eq + Hash + Display>(
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
}
