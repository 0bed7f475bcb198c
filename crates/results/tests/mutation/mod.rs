//! Mutations of JSON documents for property tests: edits of the parsed value (a node
//! replaced, removed or added) and of the bytes (flipped, cut, inserted, deleted).
//! Shared by the results and baseline property tests.

use proptest::prelude::*;
use serde_json::Value;

/// A JSON value of any shape, a few levels deep.
pub fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(Value::from),
        Just(Value::from(u64::MAX)),
        Just(Value::from(-1)),
        ".{0,12}".prop_map(Value::from),
        prop::sample::select(vec![
            "x86_64-unknown-linux-gnu@native",
            "quick",
            "echo::tcp::200B",
            "fixture-run",
            "tcp",
            "shm",
            "echo",
            "logging",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One change to a JSON document: the node at a pseudo-random path replaced, removed,
/// or given a new key.
#[derive(Debug, Clone)]
pub enum Edit {
    Replace(Vec<usize>, Value),
    Remove(Vec<usize>),
    Insert(Vec<usize>, String, Value),
}

pub fn edit() -> impl Strategy<Value = Edit> {
    let path = prop::collection::vec(any::<usize>(), 0..6);
    prop_oneof![
        (path.clone(), any_json()).prop_map(|(p, v)| Edit::Replace(p, v)),
        path.clone().prop_map(Edit::Remove),
        (path, ".{0,8}", any_json()).prop_map(|(p, k, v)| Edit::Insert(p, k, v)),
    ]
}

/// The child of `value` picked by `index` (modulo its length), if it has children.
fn child(value: &mut Value, index: usize) -> Option<&mut Value> {
    match value {
        Value::Array(items) if !items.is_empty() => {
            let n = items.len();
            items.get_mut(index % n)
        }
        Value::Object(map) if !map.is_empty() => {
            let n = map.len();
            map.values_mut().nth(index % n)
        }
        _ => None,
    }
}

pub fn apply(document: &mut Value, edit: &Edit) {
    let (path, last) = match edit {
        Edit::Replace(p, _) | Edit::Remove(p) | Edit::Insert(p, ..) => {
            (p.as_slice(), p.last().copied().unwrap_or(0))
        }
    };
    // Walk down to the parent of the node edited.
    let mut node = document;
    for &i in path.iter().take(path.len().saturating_sub(1)) {
        if child(node, i).is_none() {
            break;
        }
        node = child(node, i).unwrap();
    }
    match edit {
        Edit::Replace(_, v) => match child(node, last) {
            Some(target) => *target = v.clone(),
            None => *node = v.clone(),
        },
        Edit::Remove(_) => match node {
            Value::Array(items) if !items.is_empty() => {
                let n = items.len();
                items.remove(last % n);
            }
            Value::Object(map) if !map.is_empty() => {
                let key = map.keys().nth(last % map.len()).unwrap().clone();
                map.remove(&key);
            }
            _ => {}
        },
        Edit::Insert(_, k, v) => match node {
            Value::Object(map) => {
                map.insert(k.clone(), v.clone());
            }
            Value::Array(items) => items.push(v.clone()),
            _ => {}
        },
    }
}

/// One change to the bytes of a document.
#[derive(Debug, Clone)]
pub enum ByteEdit {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
}

pub fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(at, x)| ByteEdit::Flip(at, x)),
        any::<usize>().prop_map(ByteEdit::Truncate),
        (
            any::<usize>(),
            prop::collection::vec(
                prop_oneof![
                    any::<u8>(),
                    prop::sample::select(b"{}[]\",:0123456789-.eE \\".to_vec())
                ],
                1..8
            )
        )
            .prop_map(|(at, b)| ByteEdit::Insert(at, b)),
        (any::<usize>(), 1..64usize).prop_map(|(at, n)| ByteEdit::Delete(at, n)),
    ]
}

pub fn apply_bytes(bytes: &mut Vec<u8>, edit: &ByteEdit) {
    let at = |i: usize, len: usize| if len == 0 { 0 } else { i % len };
    match edit {
        ByteEdit::Flip(i, x) => {
            if !bytes.is_empty() {
                let i = at(*i, bytes.len());
                bytes[i] ^= x;
            }
        }
        ByteEdit::Truncate(i) => bytes.truncate(at(*i, bytes.len() + 1)),
        ByteEdit::Insert(i, b) => {
            let i = at(*i, bytes.len() + 1);
            bytes.splice(i..i, b.iter().copied());
        }
        ByteEdit::Delete(i, n) => {
            let i = at(*i, bytes.len() + 1);
            let end = (i + n).min(bytes.len());
            bytes.drain(i..end);
        }
    }
}
