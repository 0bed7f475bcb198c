//! Finding the line:column of a node by its path.
//!
//! serde_yaml attaches a position to errors raised while a node is read, not to values. To
//! place an error found after parsing, the document is read once more by a visitor that
//! walks down the path and raises an error at the node; the position comes back with it.

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
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

const HERE: &str = "\u{0}ipc-matrix-locate";

/// 1-based (line, column) of the node at `path`, or None if the path is not in `text`.
pub fn locate(text: &str, path: &[Segment]) -> Option<(usize, usize)> {
    let de = serde_yaml::Deserializer::from_str(text);
    match (Probe { path }).deserialize(de) {
        Err(error) if error.to_string().contains(HERE) => error
            .location()
            .map(|location| (location.line(), location.column())),
        _ => None,
    }
}

struct Probe<'a> {
    path: &'a [Segment],
}

impl<'de> DeserializeSeed<'de> for Probe<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Probe<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let target = match self.path.first() {
            None => return Err(de::Error::custom(HERE)),
            Some(Segment::Key(key)) => Some(key.as_str()),
            Some(Segment::Index(_)) => None,
        };
        while let Some(key) = map.next_key::<String>()? {
            if Some(key.as_str()) == target {
                return map.next_value_seed(Probe {
                    path: &self.path[1..],
                });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let target = match self.path.first() {
            None => return Err(de::Error::custom(HERE)),
            Some(Segment::Index(i)) => Some(*i),
            Some(Segment::Key(_)) => None,
        };
        let mut index = 0;
        loop {
            if Some(index) == target {
                return seq
                    .next_element_seed(Probe {
                        path: &self.path[1..],
                    })
                    .map(|_| ());
            }
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.leaf()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.leaf()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.leaf()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.leaf()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.leaf()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.leaf()
    }
}

impl Probe<'_> {
    fn leaf<E: de::Error>(&self) -> Result<(), E> {
        if self.path.is_empty() {
            Err(E::custom(HERE))
        } else {
            Ok(())
        }
    }
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
        assert_eq!(locate(text, &path), Some((5, 13)));
        assert_eq!(locate(text, &[Segment::Key("a".into())]), Some((1, 4)));
        assert_eq!(locate(text, &[Segment::Key("nope".into())]), None);
    }
}
