//! Whatever the text, loading it ends in a valid spec or located errors: never a panic.
//! Unit values parse or are refused, and valid ones read back as written.

use ipc_matrix_spec::{ByteSize, DurationSpec, Spec};
use proptest::prelude::*;
use std::path::Path;
use std::time::Duration;

fn repository_matrix() -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../matrix.yaml");
    std::fs::read_to_string(file).unwrap()
}

/// Text made of YAML's punctuation, keys and values of matrix.yaml, and numbers.
fn yamlish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("\n".to_string()),
        Just("  ".to_string()),
        Just("- ".to_string()),
        Just(": ".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just(", ".to_string()),
        Just("&a ".to_string()),
        Just("*a".to_string()),
        Just("'".to_string()),
        Just("\"".to_string()),
        Just("#".to_string()),
        Just("\u{feff}".to_string()),
        prop::sample::select(vec![
            "version",
            "targets",
            "profiles",
            "scenarios",
            "name",
            "kind",
            "echo",
            "bulk",
            "logging",
            "udp-load",
            "transports",
            "tcp",
            "udp",
            "shm",
            "payloads",
            "iterations",
            "warmup",
            "timeout",
            "frame_deadline",
            "budget",
            "max_loss",
            "codecs",
            "capnp",
            "fan-out",
            "sinks",
            "buffered",
            "clients",
            "server_threads",
            "duration",
            "triple",
            "runner",
            "native",
            "blocks_merge",
            "true",
            "description",
            "quick",
        ])
        .prop_map(str::to_string),
        "[0-9]{1,22}(\\.[0-9]{1,3})?(B|KiB|GiB|MB|s|ms|us|m)?",
        any::<u64>().prop_map(|n| n.to_string()),
    ];
    prop::collection::vec(piece, 0..120).prop_map(|pieces| pieces.concat())
}

/// Loads `text`; a refusal must locate every error, or name the whole file.
fn loads_or_locates(text: &str) -> Result<(), TestCaseError> {
    match Spec::parse(text, Path::new("m.yaml")) {
        Ok(spec) => {
            for profile in spec.profile_names() {
                let cells = spec
                    .cells(profile)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                for cell in cells {
                    prop_assert!(cell.id.len() + ".json".len() <= 255);
                    prop_assert!(cell.round_trips().is_some());
                    prop_assert!(cell.memory_need().is_some());
                }
            }
        }
        Err(errors) => {
            prop_assert!(!errors.0.is_empty());
            for e in &errors.0 {
                prop_assert!(e.location.is_some() || e.path.is_empty(), "unlocated: {e}");
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn yamlish_text_never_panics(text in yamlish()) {
        loads_or_locates(&text)?;
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        loads_or_locates(&text)?;
    }

    #[test]
    fn unit_parsers_never_panic(text in "\\PC{0,40}") {
        let _ = ByteSize::parse(&text);
        let _ = DurationSpec::parse(&text);
    }

    #[test]
    fn sizes_read_back_as_written(bytes in 1u64.., unit in 0usize..4) {
        let (suffix, scale) = [("B", 1), ("KiB", 1 << 10), ("MB", 1_000_000), ("GiB", 1 << 30)][unit];
        let whole = bytes / scale;
        prop_assume!(whole > 0);
        let size = ByteSize::parse(&format!("{whole}{suffix}")).unwrap();
        prop_assert_eq!(size.bytes(), whole * scale);
        prop_assert_eq!(size.label(), format!("{whole}{suffix}"));
    }

    #[test]
    fn durations_read_back_as_written(nanos in 1u64..86_400_000_000_000, unit in 0usize..4) {
        let (suffix, scale) = [("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000), ("m", 60_000_000_000)][unit];
        let whole = nanos / scale;
        prop_assume!(whole > 0);
        let parsed = DurationSpec::parse(&format!("{whole}{suffix}")).unwrap();
        prop_assert_eq!(parsed.get(), Duration::from_nanos(whole * scale));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// The repository's matrix.yaml with bytes deleted, replaced or inserted.
    #[test]
    fn mutations_of_the_repository_matrix_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, "\\PC{0,8}"), 1..6)
    ) {
        let mut text = repository_matrix();
        for (at, how, insert) in edits {
            let mut i = at.index(text.len().max(1));
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            let end = text[i..].chars().next().map_or(i, |c| i + c.len_utf8());
            match how {
                0 => text.replace_range(i..end, ""),
                1 => text.replace_range(i..end, &insert),
                _ => text.insert_str(i, &insert),
            }
        }
        loads_or_locates(&text)?;
    }
}
