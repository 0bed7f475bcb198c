//! matrix.yaml in, cells or located errors out.

use ipc_matrix_spec::{
    CodecKind, Echoes, Fan, LogSink, LogWrite, ScenarioKind, Spec, SpecErrors, Work,
};
use std::path::Path;
use std::time::Duration;

const GOOD: &str = r#"
version: 1
targets:
  - { triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }
profiles:
  quick:
    description: small
    scenarios:
      echo: { iterations: 5 }
scenarios:
  - name: echo
    kind: echo
    transports: [shm, tcp, udp]
    payloads: [200B, 60KB]
    iterations: 1000
    warmup: 10
    timeout: 2s
"#;

fn errors(text: &str) -> SpecErrors {
    Spec::parse(text, Path::new("m.yaml")).expect_err("document should be refused")
}

#[test]
fn the_repository_matrix_loads_and_expands() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../matrix.yaml");
    let spec = Spec::load(&file).unwrap_or_else(|e| panic!("{e}"));
    for profile in ["quick", "full"] {
        let cells = spec.cells(profile).unwrap();
        assert!(!cells.is_empty());
        let ids: std::collections::HashSet<_> = cells.iter().map(|c| &c.id).collect();
        assert_eq!(ids.len(), cells.len(), "cell ids repeat in {profile}");
    }
    let full = spec.cells("full").unwrap();
    let echo = full.iter().find(|c| c.id == "echo::tcp::200B").unwrap();
    assert_eq!((echo.payload_bytes, echo.iterations), (200, 1000));
    let bulk = full
        .iter()
        .find(|c| c.id == "bulk::shm-busy::100MB")
        .unwrap();
    assert_eq!((bulk.payload_bytes, bulk.iterations), (100_000_000, 100));
}

#[test]
fn profiles_override_and_shm_expands_into_wake_modes() {
    let spec = Spec::parse(GOOD, Path::new("m.yaml")).unwrap();
    let cells = spec.cells("quick").unwrap();
    let ids: Vec<_> = cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "echo::shm-blocking::200B",
            "echo::shm-blocking::60KB",
            "echo::shm-busy::200B",
            "echo::shm-busy::60KB",
            "echo::tcp::200B",
            "echo::tcp::60KB",
            "echo::udp::200B",
            "echo::udp::60KB",
        ]
    );
    assert!(cells.iter().all(|c| c.iterations == 5 && c.warmup == 10));
    let err = spec.cells("full").unwrap_err();
    assert_eq!(err.profiles, ["quick"]);
    assert!(err.to_string().contains("profiles are: quick"), "{err}");
}

#[test]
fn unknown_keys_are_located() {
    let text = GOOD.replace("    warmup: 10\n", "    warmup: 10\n    colour: red\n");
    let e = &errors(&text).0[0];
    assert!(e.message.contains("unknown field `colour`"), "{e}");
    assert!(e.message.contains("scenarios[0]"), "{e}");
    assert_eq!(e.location.map(|l| l.0), Some(17), "{e}");
}

#[test]
fn bad_sizes_and_zero_counts_are_refused_where_they_are() {
    let e = &errors(&GOOD.replace("[200B, 60KB]", "[200B, 64 parsecs]")).0[0];
    assert!(e.to_string().starts_with("m.yaml:14:22: "), "{e}");
    assert_eq!(e.path, "scenarios[0].payloads[1]", "{e}");
    assert!(e.message.contains("like 200B"), "{e}");

    let e = &errors(&GOOD.replace("iterations: 1000", "iterations: 0")).0[0];
    assert_eq!(e.path, "scenarios[0].iterations", "{e}");
    assert_eq!(e.location, Some((15, 17)), "{e}");
    assert!(e.message.contains("use 1 or more"), "{e}");
}

#[test]
fn udp_payloads_over_one_datagram_are_refused_with_their_path() {
    let all = errors(&GOOD.replace("60KB]", "65508B]"));
    let e = &all.0[0];
    assert_eq!(e.path, "scenarios[0].payloads[1]");
    assert_eq!(e.location, Some((14, 22)));
    assert!(e.message.contains("at most 65507 B"), "{e}");

    // The same rule holds for a profile's override.
    let text = GOOD.replace("{ iterations: 5 }", "{ iterations: 5, payloads: [1MB] }");
    let e = &errors(&text).0[0];
    assert_eq!(e.path, "profiles.quick.scenarios.echo.payloads[0]");
    assert_eq!(e.location.map(|l| l.0), Some(9));
}

#[test]
fn cross_field_rules_report_every_problem() {
    let text = GOOD
        .replace("version: 1", "version: 7")
        .replace("[shm, tcp, udp]", "[tcp, tcp]")
        .replace(
            "    warmup: 10\n",
            "    warmup: 10\n    wake: [busy-poll]\n",
        )
        .replace("echo: { iterations: 5 }", "ehco: { iterations: 5 }");
    let all = errors(&text);
    let paths: Vec<_> = all.0.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "version",
            "profiles.quick.scenarios.ehco",
            "scenarios[0].transports[1]",
            "scenarios[0].wake"
        ],
        "{all}"
    );
    assert!(all.0.iter().all(|e| e.location.is_some()), "{all}");
    assert!(all.to_string().contains("the scenarios are: echo"), "{all}");
}

#[test]
fn bad_durations_in_profiles_are_located() {
    let text = GOOD.replace("{ iterations: 5 }", "{ iterations: 5, timeout: soon }");
    let e = &errors(&text).0[0];
    assert_eq!(e.path, "profiles.quick.scenarios.echo.timeout", "{e}");
    assert!(e.message.contains("like 500ms"), "{e}");
}

#[test]
fn unknown_enum_values_say_what_is_accepted() {
    let e = &errors(&GOOD.replace("[shm, tcp, udp]", "[shm, Carrier Pigeon]")).0[0];
    assert!(e.to_string().contains("scenarios[0].transports"), "{e}");
    assert!(e.message.contains("not a transport"), "{e}");
    assert!(e.message.contains("shm, local, tcp"), "{e}");
}

/// A well-formed name that is no built-in transport is a user's stack, which only the
/// binary that registers it may list: here none does, and the error says so, located.
#[test]
fn an_unregistered_stack_is_refused_where_it_is_listed() {
    let e = &errors(&GOOD.replace("[shm, tcp, udp]", "[shm, carrier-pigeon]")).0[0];
    assert_eq!(e.path, "scenarios[0].transports[1]", "{e}");
    assert!(e.location.is_some(), "{e}");
    assert!(
        e.message
            .contains("`carrier-pigeon` is neither a built-in transport"),
        "{e}"
    );
    assert!(e.message.contains("it registers none"), "{e}");
}

#[test]
fn codec_scenarios_are_checked() {
    let text = GOOD.replace(
        "scenarios:\n  - name: echo",
        "scenarios:\n  - { name: ser, kind: codec, transports: [tcp, udp], payloads: [200B], iterations: 5, timeout: 1s }\n  - { name: plain, kind: echo, codecs: [capnp], transports: [tcp], payloads: [200B], iterations: 5, timeout: 1s }\n  - name: echo",
    );
    let message = errors(&text).to_string();
    for wanted in [
        "scenarios[0].codecs: a codec scenario lists its codecs: capnp, prost",
        "scenarios[0].transports[1]: a codec scenario does not run over udp; it runs over: shm, local, tcp",
        "m.yaml:12:40: scenarios[1].codecs: echo scenarios take no `codecs`; codecs apply only to codec, fan-out and fan-in scenarios",
    ] {
        assert!(
            message.contains(wanted),
            "missing `{wanted}` in:\n{message}"
        );
    }

    let good = GOOD.replace(
        "scenarios:\n  - name: echo",
        "scenarios:\n  - { name: ser, kind: codec, codecs: [capnp, prost], transports: [tcp], payloads: [64KiB], iterations: 5, timeout: 1s }\n  - name: echo",
    );
    let spec = Spec::parse(&good, Path::new("m.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<String> = spec
        .cells("quick")
        .unwrap()
        .into_iter()
        .filter(|c| c.work.codec().is_some())
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["ser::capnp::tcp::64KiB", "ser::prost::tcp::64KiB"]);
}

/// `paths` gives one cell per message path, named by it, on the transports that have
/// every path listed; a path a transport lacks, a path listed twice, an empty list, an
/// unknown path and paths with an external peer are refused where they are written.
#[test]
fn message_paths_are_cells_of_their_own_on_the_transports_that_have_them() {
    let good = GOOD.replace(
        "scenarios:\n  - name: echo",
        "scenarios:\n  - { name: paths, kind: echo, transports: [shm, iceoryx2], wake: [busy-poll], paths: [loaned, copied], payloads: [200B], iterations: 5, timeout: 1s }\n  - name: echo",
    );
    let spec = Spec::parse(&good, Path::new("m.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let cells: Vec<_> = spec
        .cells("quick")
        .unwrap()
        .into_iter()
        .filter(|c| c.scenario == "paths")
        .collect();
    let ids: Vec<&str> = cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "paths::loaned::shm-busy::200B",
            "paths::copied::shm-busy::200B",
            "paths::loaned::iceoryx2-busy::200B",
            "paths::copied::iceoryx2-busy::200B",
        ]
    );
    let asked: Vec<_> = cells
        .iter()
        .map(|c| match c.work {
            Work::Echo(e) => e.path,
            _ => unreachable!(),
        })
        .collect();
    use ipc_matrix_spec::MessagePath::{Copied, Loaned};
    assert_eq!(
        asked,
        [Some(Loaned), Some(Copied), Some(Loaned), Some(Copied)]
    );
    // The echo scenario without `paths` keeps its ids and asks for none.
    let echo = spec.cells("quick").unwrap();
    let plain = echo
        .iter()
        .find(|c| c.id == "echo::shm-busy::200B")
        .unwrap();
    assert_eq!(
        plain.work,
        Work::Echo(Echoes::new(Duration::from_secs(2), 0.0))
    );

    for (paths, wanted) in [
        (
            "[loaned]",
            "scenarios[0].paths: tcp has no loaned path (it offers copied); list tcp in a scenario of its own, or remove `loaned`",
        ),
        ("[copied, copied]", "scenarios[0].paths[1]: `copied` is listed twice"),
        ("[]", "scenarios[0].paths: `paths` lists at least one message path: copied, streamed, loaned"),
        ("[shared]", "unknown variant `shared`, expected one of `copied`, `streamed`, `loaned`"),
    ] {
        let text = GOOD.replace(
            "scenarios:\n  - name: echo",
            &format!("scenarios:\n  - {{ name: p, kind: echo, transports: [shm, tcp], paths: {paths}, payloads: [200B], iterations: 5, timeout: 1s }}\n  - name: echo"),
        );
        let message = errors(&text).to_string();
        assert!(message.contains(wanted), "missing `{wanted}` in:\n{message}");
    }
    // An external peer serves the copying path (the peer protocol copies), and no other.
    let external = |paths: &str| {
        GOOD.replace(
            "scenarios:\n  - name: echo",
            &format!("scenarios:\n  - {{ name: p, kind: echo, transports: [tcp], paths: {paths}, peer: {{ command: [./peer] }}, payloads: [200B], iterations: 5, timeout: 1s }}\n  - name: echo"),
        )
    };
    let spec = Spec::parse(&external("[copied]"), Path::new("matrix.yaml"))
        .unwrap_or_else(|e| panic!("an external peer's copying path is refused:\n{e}"));
    assert!(
        spec.cells("quick")
            .unwrap()
            .iter()
            .any(|c| c.id == "p::copied::tcp::200B"),
        "no copied cell of the external peer"
    );
    let message = errors(&external("[copied, loaned]")).to_string();
    assert!(
        message.contains(
            "scenarios[0].paths: an external peer serves the peer protocol, which copies: it has no loaned path"
        ),
        "{message}"
    );
    let codec = GOOD.replace(
        "scenarios:\n  - name: echo",
        "scenarios:\n  - { name: p, kind: codec, codecs: [capnp], transports: [shm], paths: [loaned], payloads: [200B], iterations: 5, timeout: 1s }\n  - name: echo",
    );
    let message = errors(&codec).to_string();
    assert!(
        message.contains("codec scenarios take no `paths`"),
        "{message}"
    );
}

#[test]
fn load_and_logging_scenarios_are_checked() {
    let text = GOOD.replace(
        "scenarios:\n  - name: echo",
        "scenarios:\n  - { name: grid, kind: udp-load, transports: [udp, tcp], server_threads: [0, 4, 4], payloads: [8B, 70000B], iterations: 5, timeout: 2s }\n  - { name: log, kind: logging, transports: [file], clients: [1], payloads: [64B], iterations: 5, budget: 1s }\n  - { name: rpc, kind: rpc, transports: [shm], sinks: [buffered], payloads: [200B], iterations: 5, timeout: 1s }\n  - name: echo",
    );
    let message = errors(&text).to_string();
    for wanted in [
        "scenarios[0].transports[1]: a udp-load scenario does not run over tcp; it runs over: udp",
        // A missing key is placed at its scenario.
        "m.yaml:11:5: scenarios[0].clients: udp-load scenarios need `clients`, e.g. [1, 4, 16]",
        "scenarios[0].duration: udp-load scenarios need `duration`",
        "scenarios[0].server_threads[0]: 0 threads: give a number from 1 to 256",
        "scenarios[0].server_threads[2]: 4 is listed twice",
        "scenarios[0].payloads[0]: 8B is too small: a udp-load message carries a 16-byte stamp",
        "scenarios[0].payloads[1]: 70000B (70000 B) does not fit one UDP datagram",
        "scenarios[1].sinks: a logging scenario lists its sinks",
        "m.yaml:12:62: scenarios[1].clients: logging scenarios take no `clients`; `clients` applies only to udp-load scenarios",
        "scenarios[2].transports[0]: a rpc scenario does not run over shm; it runs over: local, tcp",
        "m.yaml:13:55: scenarios[2].sinks: rpc scenarios take no `sinks`; sinks apply only to logging scenarios",
    ] {
        assert!(
            message.contains(wanted),
            "missing `{wanted}` in:\n{message}"
        );
    }

    let good = GOOD
        .replace(
            "scenarios:\n  - name: echo",
            "scenarios:\n  - { name: grid, kind: udp-load, transports: [udp], clients: [1, 4], server_threads: [2], duration: 1s, payloads: [128B], iterations: 5, timeout: 2s }\n  - { name: log, kind: logging, transports: [file], sinks: [buffered, tracing-non-blocking], payloads: [64B], iterations: 5, budget: 1s }\n  - name: echo",
        )
        .replace(
            "scenarios:\n      echo:",
            "scenarios:\n      grid: { clients: [16], duration: 300ms }\n      echo:",
        );
    let spec = Spec::parse(&good, Path::new("m.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let cells = spec.cells("quick").unwrap();
    let ids: Vec<&str> = cells
        .iter()
        .filter(|c| matches!(c.work, Work::UdpLoad(_) | Work::Logging(_)))
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "grid::c16-s2::udp::128B",
            "log::buffered::file::64B",
            "log::tracing-non-blocking::file::64B"
        ]
    );
    let Work::UdpLoad(load) = cells[0].work else {
        panic!("a load cell: {:?}", cells[0]);
    };
    assert_eq!(load.shape.duration, std::time::Duration::from_millis(300));
}

#[test]
fn keys_of_another_kind_are_refused_with_the_key_to_use() {
    let text = GOOD.replace(
        "scenarios:\n  - name: echo",
        "scenarios:
  - { name: log, kind: logging, transports: [file], sinks: [buffered], payloads: [64B], iterations: 5, timeout: 30s }
  - { name: fan, kind: fan-in, codecs: [capnp], transports: [tcp], payloads: [64KiB], iterations: 5, timeout: 2s }
  - { name: late, kind: fan-out, codecs: [capnp], transports: [tcp], payloads: [64KiB], iterations: 5 }
  - { name: pings, kind: echo, transports: [tcp], payloads: [200B], iterations: 5, budget: 1s, max_loss: 0.1 }
  - name: echo",
    );
    let shown: Vec<String> = errors(&text).0.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        shown,
        [
            "m.yaml:11:113: scenarios[0].timeout: logging scenarios bound the whole write with `budget`, not `timeout`",
            "m.yaml:12:111: scenarios[1].timeout: fan-in scenarios bound how late a frame may arrive with `frame_deadline`, not `timeout`",
            "m.yaml:13:5: scenarios[2].frame_deadline: fan-out scenarios need `frame_deadline`, how late a frame may arrive before it counts as dropped, e.g. 2s",
            "m.yaml:14:92: scenarios[3].budget: echo scenarios take no `budget`; the deadline of one round trip is `timeout`",
            "m.yaml:14:5: scenarios[3].timeout: echo scenarios need `timeout`, the deadline of one round trip, e.g. 5s",
            "m.yaml:14:106: scenarios[3].max_loss: only udp loses messages, and this echo scenario does not list it; remove `max_loss` or add udp to transports",
        ]
    );

    // A profile's override of another kind's limit is refused the same way.
    let text = GOOD.replace("{ iterations: 5 }", "{ iterations: 5, budget: 1s }");
    let e = &errors(&text).0[0];
    assert_eq!(e.path, "profiles.quick.scenarios.echo.budget", "{e}");
    assert_eq!(e.location.map(|l| l.0), Some(9), "{e}");
    assert!(e.message.contains("echo scenarios take no `budget`"), "{e}");

    // Each kind's own limit, overridden by a profile, reaches its cells.
    let good = GOOD
        .replace(
            "scenarios:\n  - name: echo",
            "scenarios:\n  - { name: log, kind: logging, transports: [file], sinks: [buffered], payloads: [64B], iterations: 5, budget: 30s }\n  - { name: fan, kind: fan-in, codecs: [prost], transports: [tcp], payloads: [64KiB], iterations: 5, frame_deadline: 2s, max_loss: 0.25 }\n  - name: echo",
        )
        .replace(
            "scenarios:\n      echo:",
            "scenarios:\n      log: { budget: 10s }\n      fan: { frame_deadline: 500ms }\n      echo:",
        );
    let spec = Spec::parse(&good, Path::new("m.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let cells = spec.cells("quick").unwrap();
    assert_eq!(
        cells[0].work,
        Work::Logging(LogWrite {
            sink: LogSink::Buffered,
            budget: Duration::from_secs(10)
        })
    );
    assert_eq!(
        cells[1].work,
        Work::FanIn(Fan {
            codec: CodecKind::Prost,
            frame_deadline: Duration::from_millis(500),
            max_loss: 0.25
        })
    );
    assert_eq!(cells[1].kind(), ScenarioKind::FanIn);
    assert_eq!(
        cells[2].work,
        Work::Echo(Echoes::new(Duration::from_secs(2), 0.0))
    );
}

#[test]
fn a_second_host_and_an_external_peer_are_read_into_every_cell() {
    let text = GOOD.replace("[shm, tcp, udp]", "[tcp, udp]").replace(
        "    warmup: 10\n",
        "    warmup: 10\n    host: netns\n    mtu: 9000\n    link: { delay: 1ms, loss: 0.5% }\n    peer: { command: [\"target/peers/{target}/p\", \"-v\"] }\n",
    );
    let spec = Spec::parse(&text, Path::new("m.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let cells = spec.cells("quick").unwrap();
    assert_eq!(cells.len(), 4);
    for cell in &cells {
        let link = cell.host.netns().expect("a netns cell");
        assert_eq!(link.mtu, 9000);
        assert_eq!(link.delay, Some(Duration::from_millis(1)));
        assert_eq!(link.loss_percent, Some(0.5));
        assert!(link.is_shaped());
        let peer = cell.peer.as_ref().expect("an external peer");
        assert_eq!(peer.command_for("t")[0], "target/peers/t/p");
    }
    // Defaults: loopback, and a namespace's MTU is Ethernet's.
    assert!(Spec::parse(GOOD, Path::new("m.yaml"))
        .unwrap()
        .cells("quick")
        .unwrap()[0]
        .host
        .is_loopback());
    let spec = Spec::parse(
        &GOOD
            .replace("[shm, tcp, udp]", "[tcp]")
            .replace("    warmup: 10\n", "    warmup: 10\n    host: netns\n"),
        Path::new("m.yaml"),
    )
    .unwrap();
    assert_eq!(
        spec.cells("quick").unwrap()[0].host.netns().unwrap().mtu,
        1500
    );
}

#[test]
fn second_hosts_and_external_peers_are_refused_where_they_cannot_run() {
    let text = GOOD.replace(
        "    warmup: 10\n",
        "    warmup: 10\n    host: netns\n    mtu: 40\n    link: { loss: 120% }\n    peer: { command: [] }\n",
    );
    let all = errors(&text);
    let paths: Vec<_> = all.0.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "scenarios[0].transports[0]",
            "scenarios[0].mtu",
            "scenarios[0].link.loss",
            "scenarios[0].transports[0]",
            "scenarios[0].peer.command",
        ],
        "{all}"
    );
    assert!(all.0.iter().all(|e| e.location.is_some()), "{all}");
    assert!(
        all.0[0]
            .message
            .contains("over tcp, udp only, not over shm"),
        "{all}"
    );
    assert!(all.0[1].message.contains("40 bytes"), "{all}");

    // The link of a second host, without one.
    let all = errors(&GOOD.replace("    warmup: 10\n", "    warmup: 10\n    mtu: 1500\n"));
    assert_eq!(all.0[0].path, "scenarios[0].mtu", "{all}");
    assert!(
        all.0[0].message.contains("only with `host: netns`"),
        "{all}"
    );

    // A kind that neither crosses to a second host nor echoes.
    let logging = r#"
version: 1
targets: [{ triple: x86_64-unknown-linux-gnu, runner: native, blocks_merge: true }]
profiles: { quick: { description: q } }
scenarios:
  - { name: log, kind: logging, transports: [file], payloads: [64B], iterations: 10, budget: 1s, sinks: [write-per-line], host: netns, peer: { command: [x] } }
"#;
    let all = errors(logging);
    let messages: Vec<_> = all.0.iter().map(|e| e.message.as_str()).collect();
    assert!(
        messages.iter().any(|m| m.contains("not to logging")),
        "{all}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("serves echo and bulk scenarios, not logging")),
        "{all}"
    );
}

/// A stack this process registered is listed like a built-in transport: its cells carry
/// its name (in each of its wake modes, on the paths it offers), in the kinds that run
/// over any channel, and a kind that does not is refused where the stack is listed.
#[test]
fn a_registered_stack_makes_cells_in_the_kinds_that_take_any_channel() {
    use ipc_matrix_spec::{ChannelKind, MessagePath, StackName, StackTraits};
    StackName::register(
        "ring-of-mine",
        StackTraits {
            wake_modes: true,
            message_paths: &[MessagePath::Copied, MessagePath::Loaned],
            floor_like: ChannelKind::Shm,
            byte_stream: false,
        },
    )
    .unwrap();
    let text = GOOD.replace(
        "scenarios:\n  - name: echo",
        "scenarios:\n  - { name: mine, kind: echo, transports: [ring-of-mine], wake: [busy-poll], paths: [loaned], payloads: [200B], iterations: 5, timeout: 1s }\n  - { name: ser, kind: codec, codecs: [prost], transports: [ring-of-mine], wake: [blocking], payloads: [200B], iterations: 5, timeout: 1s }\n  - name: echo",
    );
    let spec = Spec::parse(&text, Path::new("m.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<String> = spec
        .cells("quick")
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .filter(|id| id.contains("ring-of-mine"))
        .collect();
    assert_eq!(
        ids,
        [
            "mine::loaned::ring-of-mine-busy::200B",
            "ser::prost::ring-of-mine-blocking::200B"
        ]
    );
    let rpc = GOOD.replace(
        "scenarios:\n  - name: echo",
        "scenarios:\n  - { name: calls, kind: rpc, transports: [ring-of-mine], payloads: [200B], iterations: 5, timeout: 1s }\n  - name: echo",
    );
    let e = &errors(&rpc).0[0];
    assert_eq!(e.path, "scenarios[0].transports[0]", "{e}");
    assert!(
        e.message.contains("does not run over a user's stack"),
        "{e}"
    );
}
