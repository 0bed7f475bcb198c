//! Hostile matrix files: each is refused with a located error, never read as something
//! else, never a panic, an abort or a hang.

use ipc_matrix_spec::{Spec, SpecErrors};
use std::path::Path;

fn matrix(scenarios: &str) -> String {
    format!(
        "version: 1
targets:
  - {{ triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }}
profiles:
  quick: {{ description: q }}
scenarios:
{scenarios}"
    )
}

fn errors(text: &str) -> SpecErrors {
    Spec::parse(text, Path::new("m.yaml")).expect_err("document should be refused")
}

/// The one error of `text`, as printed.
fn error(text: &str) -> String {
    let all = errors(text);
    assert_eq!(all.0.len(), 1, "{all}");
    all.0[0].to_string()
}

fn bulk(payload: &str) -> String {
    matrix(&format!(
        "  - {{ name: b, kind: bulk, transports: [tcp], payloads: [{payload}], iterations: 1, timeout: 1s }}\n"
    ))
}

#[test]
fn sizes_over_64_bits_are_refused() {
    let e = error(&bulk("18446744073709551616B"));
    assert!(
        e.starts_with("m.yaml:7:58: scenarios[0].payloads[0]: "),
        "{e}"
    );
    assert!(e.contains("more bytes than 64 bits count"), "{e}");
    let e = error(&bulk("20000000000GB"));
    assert!(e.contains("more bytes than 64 bits count"), "{e}");
}

#[test]
fn payloads_over_a_kinds_maximum_are_refused() {
    for payload in ["9223372036854775808B", "16000GiB", "1025MiB"] {
        let e = error(&bulk(payload));
        assert!(
            e.starts_with("m.yaml:7:58: scenarios[0].payloads[0]: "),
            "{e}"
        );
        assert!(
            e.contains("larger than a bulk cell carries; give at most 1073741824 B (1GiB)"),
            "{e}"
        );
    }
    assert!(Spec::parse(&bulk("1GiB"), Path::new("m.yaml")).is_ok());
    let codec = matrix(
        "  - { name: c, kind: codec, codecs: [capnp], transports: [tcp], payloads: [300MB], iterations: 1, timeout: 1s }\n",
    );
    assert!(error(&codec).contains("give at most 268435456 B (256MiB)"));
}

#[test]
fn counts_over_a_kinds_maximum_are_refused() {
    let logging = matrix(
        "  - { name: l, kind: logging, transports: [file], sinks: [buffered], payloads: [64B], iterations: 1000000000000, budget: 1s }\n",
    );
    let e = error(&logging);
    assert!(
        e.starts_with("m.yaml:7:99: scenarios[0].iterations: "),
        "{e}"
    );
    assert!(
        e.contains("a logging cell makes at most 10000000 lines"),
        "{e}"
    );

    // Within the line count, but more bytes than a logging cell holds.
    let logging = logging
        .replace("[64B]", "[64KiB]")
        .replace("1000000000000", "100000");
    let e = error(&logging);
    assert!(
        e.contains("scenarios[0].iterations: 100000 lines of 65536 B"),
        "{e}"
    );

    let echo = matrix(
        "  - { name: e, kind: echo, transports: [tcp], payloads: [200B], iterations: 100000001, timeout: 1s }\n",
    );
    assert!(error(&echo).contains("at most 100000000 round trips"));
}

#[test]
fn warmup_and_iterations_that_overflow_are_refused() {
    let text = matrix(
        "  - { name: e, kind: echo, transports: [tcp], payloads: [200B], iterations: 1, warmup: 18446744073709551615, timeout: 1s }\n",
    );
    let e = error(&text);
    assert!(e.starts_with("m.yaml:7:88: scenarios[0].warmup: "), "{e}");
    assert!(
        e.contains("warmup 18446744073709551615 + iterations 1 is more than 64 bits count"),
        "{e}"
    );

    // A profile's warm-up over the scenario's iterations, located at the profile's.
    let text = matrix(
        "  - { name: e, kind: echo, transports: [tcp], payloads: [200B], iterations: 99999999, timeout: 1s }\n",
    )
    .replace(
        "quick: { description: q }",
        "quick: { description: q, scenarios: { e: { warmup: 2 } } }",
    );
    let e = error(&text);
    assert!(
        e.contains(
            "profiles.quick.scenarios.e.warmup: warmup 2 + iterations 99999999 is 100000001"
        ),
        "{e}"
    );
}

#[test]
fn durations_under_a_nanosecond_or_not_finite_are_refused() {
    for (timeout, why) in [
        ("1e-300s", "less than 1 ns"),
        ("0.0000000001s", "less than 1 ns"),
        ("0s", "less than 1 ns"),
        ("NaNs", "more than zero"),
        ("-1s", "more than zero"),
        ("infs", "less than a day"),
        ("1e300s", "less than a day"),
        ("99999999999999999999999m", "less than a day"),
        ("24h", "is not a duration"),
    ] {
        let text = matrix(&format!(
            "  - {{ name: e, kind: echo, transports: [tcp], payloads: [200B], iterations: 1, timeout: {timeout} }}\n"
        ));
        let e = error(&text);
        assert!(
            e.starts_with("m.yaml:7:89: scenarios[0].timeout: "),
            "{timeout}: {e}"
        );
        assert!(e.contains(why), "{timeout}: {e}");
    }
}

#[test]
fn a_byte_order_mark_is_skipped() {
    let text = format!(
        "\u{feff}{}",
        matrix("  - { name: e, kind: echo, transports: [tcp], payloads: [200B], iterations: 1, timeout: 1s }\n")
    );
    Spec::parse(&text, Path::new("m.yaml")).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn names_that_cannot_make_file_names_are_refused() {
    let long = "a".repeat(300);
    let text = matrix(&format!(
        "  - {{ name: {long}, kind: echo, transports: [tcp], payloads: [200B], iterations: 1, timeout: 1s }}\n"
    ));
    let e = error(&text);
    assert!(e.starts_with("m.yaml:7:13: scenarios[0].name: "), "{e}");
    assert!(e.contains("at most 64 bytes"), "{e}");

    // A long payload label makes a long id too.
    let label = format!("{}1B", "0".repeat(250));
    let text = matrix(&format!(
        "  - {{ name: e, kind: echo, transports: [tcp], payloads: [{label}], iterations: 1, timeout: 1s }}\n"
    ));
    let e = error(&text);
    assert!(e.contains("scenarios[0].name: cell id `e::tcp::000"), "{e}");
    assert!(e.contains("of at most 250 bytes"), "{e}");

    let text = matrix(
        "  - { name: e, kind: echo, transports: [tcp], payloads: [200B], iterations: 1, timeout: 1s }\n",
    )
    .replace("x86_64-unknown-linux-gnu", "x86_64-unknown-../../etc");
    assert!(error(&text)
        .contains("targets[0].triple: `x86_64-unknown-../../etc` is not a target triple"));
}

#[test]
fn deep_nesting_is_refused_before_it_is_parsed() {
    for depth in [65, 100_000] {
        let text = format!(
            "version: 1\nseed: {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let e = error(&text);
        assert_eq!(e, "m.yaml:2:70: sequences and mappings nest more than 64 deep here; a matrix file nests at most 64 deep");
    }
}

#[test]
fn files_over_a_mebibyte_are_refused() {
    let text = format!("{}\n# {}\n", bulk("1B"), "x".repeat(1 << 20));
    let e = error(&text);
    assert_eq!(
        e,
        "m.yaml: the matrix file is larger than 1048576 bytes (1 MiB), the most it may be"
    );
}

#[test]
fn many_errors_are_each_located_and_printed_once() {
    let scenarios: String = (0..4000)
        .map(|i| {
            format!(
                "  - {{ name: s{i}, kind: echo, transports: [tcp], payloads: [0B], iterations: 1, timeout: 1s }}\n"
            )
        })
        .collect();
    let text = matrix(&scenarios);
    let all = errors(&text);
    assert_eq!(all.0.len(), 4000);
    for (e, line) in all.0.iter().zip(text.lines().skip(6)) {
        let column = line.find("0B]").unwrap() + 1;
        assert_eq!(e.location, Some((e.location.unwrap().0, column)), "{e}");
        assert_eq!(
            text.lines().nth(e.location.unwrap().0 - 1),
            Some(line),
            "{e}"
        );
    }
    let printed = all.to_string();
    assert!(
        !printed.contains("error:"),
        "the printer adds the prefix: {printed:.200}"
    );
    assert_eq!(printed.lines().count(), 4000);
}

#[test]
fn unknown_scenario_names_list_a_few_of_the_scenarios() {
    let scenarios: String = (0..100)
        .map(|i| {
            format!(
                "  - {{ name: s{i}, kind: echo, transports: [tcp], payloads: [1B], iterations: 1, timeout: 1s }}\n"
            )
        })
        .collect();
    let text = matrix(&scenarios).replace(
        "quick: { description: q }",
        "quick: { description: q, scenarios: { nope: { iterations: 1 } } }",
    );
    let e = error(&text);
    assert!(
        e.ends_with("the scenarios are: s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, and 90 more"),
        "{e}"
    );
}

#[test]
fn profiles_that_expand_into_too_many_cells_are_refused() {
    let threads: Vec<String> = (1..=200).map(|n| n.to_string()).collect();
    let threads = threads.join(", ");
    let text = matrix(&format!(
        "  - {{ name: u, kind: udp-load, transports: [udp], clients: [{threads}], server_threads: [{threads}], duration: 1s, payloads: [128B], iterations: 1, timeout: 1s }}\n"
    ));
    let e = error(&text);
    assert!(
        e.contains(
            "profiles.quick: profile `quick` expands into 40000 cells; a profile has at most 10000"
        ),
        "{e}"
    );
}

#[test]
fn a_key_written_twice_in_one_mapping_is_refused_where_it_is_not_read_as_its_last_value() {
    let scenario =
        "  - { name: e, kind: echo, transports: [tcp], payloads: [1B], iterations: 1 }\n";
    let twice = matrix(scenario).replace(
        "  quick: { description: q }\n",
        "  quick: { description: q }\n  quick: { description: r }\n",
    );
    let said = error(&twice);
    // Where the second one is.
    assert!(said.starts_with("m.yaml:5:3: "), "{said}");
    assert!(
        said.contains("duplicate entry with key \"quick\""),
        "{said}"
    );
    let plugins = format!(
        "{}plugins:\n  p: {{ library: a.so }}\n  p: {{ library: b.so }}\n",
        matrix(scenario)
    );
    assert!(error(&plugins).contains("duplicate entry with key \"p\""));
}
