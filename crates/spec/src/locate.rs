//! Finding the line:column of nodes by their paths, and refusing documents that nest
//! too deep.
//!
//! serde_yaml attaches a position to errors raised while a node is read, not to values.
//! To place the errors found after parsing, the document's events are read once more and
//! the places of all their paths are noted in that one pass.

use crate::events::{Event, Events};
use crate::limits::MAX_DEPTH;
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// Renders a path the way errors show it: `scenarios[2].payloads[1]`.
pub fn render(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Where nodes are, found in one pass over the events of a text, however many are asked
/// for (an error used to cost a parse of its own: 4000 errors took 105 s).
pub struct Locations {
    found: HashMap<Vec<Segment>, (usize, usize)>,
}

impl Locations {
    /// Finds every path of `wanted` in `text`.
    pub fn find<'a>(text: &str, wanted: impl IntoIterator<Item = &'a [Segment]>) -> Self {
        let wanted: HashSet<&[Segment]> = wanted.into_iter().collect();
        let mut found = HashMap::new();
        // The text was checked for depth before, so this walk ends; its depth error, if
        // any, places nothing.
        let _ = walk(text, |path, at| {
            if wanted.contains(path) {
                found.entry(path.to_vec()).or_insert(at);
            }
        });
        Self { found }
    }

    /// 1-based (line, column) of the node at `path`, if it is in the text.
    pub fn get(&self, path: &[Segment]) -> Option<(usize, usize)> {
        self.found.get(path).copied()
    }
}

/// Refuses a text that nests deeper than [`MAX_DEPTH`]: where, and why.
pub fn check_depth(text: &str) -> Result<(), ((usize, usize), String)> {
    walk(text, |_, _| {})
}

/// The stand-in segment of nodes inside a mapping key that is not a plain string: no
/// path a problem names passes through one.
const COMPLEX_KEY: &str = "\u{0}key";

/// An open sequence or mapping.
struct Frame {
    kind: FrameKind,
    /// It put a segment on the path (all but the root do), to take off at its end.
    pushed: bool,
}

enum FrameKind {
    /// The segment of the next value, once its key was read.
    Mapping(Option<Segment>),
    /// The index of the next item.
    Sequence(usize),
}

#[cfg(test)]
thread_local! {
    /// Passes over a text's events on this thread, so a test can count them.
    pub static PASSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Walks the first document of `text`, calling `visit` with the path and the place of
/// every node that is not a mapping key. Stops at the end of that document, at a syntax
/// error (serde_yaml reports it), or at a node deeper than [`MAX_DEPTH`] (an error).
fn walk(
    text: &str,
    mut visit: impl FnMut(&[Segment], (usize, usize)),
) -> Result<(), ((usize, usize), String)> {
    #[cfg(test)]
    PASSES.with(|passes| passes.set(passes.get() + 1));
    let mut events = Events::new(text);
    let mut frames: Vec<Frame> = Vec::new();
    let mut path: Vec<Segment> = Vec::new();
    while let Some((event, at)) = events.next_event() {
        let opens = match event {
            Event::Boundary => continue,
            Event::End => break,
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(frame) = frames.pop() {
                    if frame.pushed {
                        path.pop();
                    }
                }
                if frames.is_empty() {
                    break;
                }
                continue;
            }
            Event::SequenceStart | Event::MappingStart => true,
            Event::Scalar(_) | Event::Alias => false,
        };
        // This node's segment: its key's, its index, none for the root; a mapping key
        // gets none of its own and is not visited.
        let (segment, is_key) = match frames.last_mut().map(|f| &mut f.kind) {
            None => (None, false),
            Some(FrameKind::Sequence(next)) => {
                *next += 1;
                (Some(Segment::Index(*next - 1)), false)
            }
            Some(FrameKind::Mapping(value)) => match value.take() {
                Some(segment) => (Some(segment), false),
                None => {
                    *value = Some(Segment::Key(match &event {
                        Event::Scalar(Some(key)) => key.clone(),
                        _ => COMPLEX_KEY.to_string(),
                    }));
                    (Some(Segment::Key(COMPLEX_KEY.to_string())), true)
                }
            },
        };
        let pushed = match segment {
            Some(segment) => {
                path.push(segment);
                true
            }
            None => false,
        };
        if !is_key {
            visit(&path, at);
        }
        if !opens {
            if pushed {
                path.pop();
            }
            if frames.is_empty() {
                break;
            }
            continue;
        }
        if frames.len() >= MAX_DEPTH {
            return Err((
                at,
                format!(
                    "sequences and mappings nest more than {MAX_DEPTH} deep here; a matrix file nests at most {MAX_DEPTH} deep"
                ),
            ));
        }
        let kind = match event {
            Event::MappingStart => FrameKind::Mapping(None),
            _ => FrameKind::Sequence(0),
        };
        frames.push(Frame { kind, pushed });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_nodes() {
        let text = "a: 1\nlist:\n  - x: 1\n  - x: 2\n    y: [10, 20]\n";
        let path = [
            Segment::Key("list".into()),
            Segment::Index(1),
            Segment::Key("y".into()),
            Segment::Index(1),
        ];
        assert_eq!(render(&path), "list[1].y[1]");
        let a = [Segment::Key("a".into())];
        let nope = [Segment::Key("nope".into())];
        let found = Locations::find(text, [&path[..], &a[..], &nope[..]]);
        assert_eq!(found.get(&path), Some((5, 13)));
        assert_eq!(found.get(&a), Some((1, 4)));
        assert_eq!(found.get(&nope), None);
    }

    #[test]
    fn complex_keys_and_aliases_do_not_shift_paths() {
        let text = "? [k, {x: 1}]\n: 1\nb: &anchor [1]\nc: *anchor\nd: [x, y]\n";
        let d1 = [Segment::Key("d".into()), Segment::Index(1)];
        let c = [Segment::Key("c".into())];
        let found = Locations::find(text, [&d1[..], &c[..]]);
        assert_eq!(found.get(&d1), Some((5, 8)));
        assert_eq!(found.get(&c), Some((4, 4)));
    }

    #[test]
    fn deep_nesting_is_refused_where_it_goes_too_deep() {
        let ok = format!(
            "a: {}{}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        assert_eq!(check_depth(&ok), Ok(()));
        let deep = format!("a: {}{}", "[".repeat(100_000), "]".repeat(100_000));
        let (at, why) = check_depth(&deep).unwrap_err();
        assert_eq!(at, (1, 4 + MAX_DEPTH - 1));
        assert!(why.contains("at most 64 deep"), "{why}");
    }
}
