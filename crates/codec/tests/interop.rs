//! Interop with the reference implementations: frames encoded here must be read by
//! `protoc --decode` (Debian: protobuf-compiler) and `capnp decode` (Debian: capnproto).
//! Whether a tool is present is decided when the tests are listed: without it, its test
//! is listed as ignored (kind "needs <tool>"), never passed silently.
//! `scripts/test.sh` installs both where apt is available.

use ipc_matrix_codec::{Codec, FrameCodec, SensorFrame, CAPNP_SCHEMA, PROTO_SCHEMA};
use libtest_mimic::{Arguments, Failed, Trial};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    let trials = vec![
        with_tool("interop::protoc-reads-prost", "protoc", protoc_reads_prost),
        with_tool("interop::capnp-reads-capnp", "capnp", capnp_reads_capnp),
    ];
    libtest_mimic::run(&args, trials).exit_code()
}

fn with_tool(name: &str, tool: &str, test: fn() -> Result<(), Failed>) -> Trial {
    let trial = Trial::test(name, test);
    if on_path(tool) {
        trial
    } else {
        trial
            .with_ignored_flag(true)
            .with_kind(format!("needs {tool}"))
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
}

/// Runs `program args` in `dir` with `input` on stdin; its stdout, or why it failed.
fn run(program: &str, args: &[&str], dir: &Path, input: &[u8]) -> Result<String, Failed> {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {program}: {e}"))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(input)
        .map_err(|e| format!("writing to {program}: {e}"))?;
    let output = child
        .wait_with_output()
        .map_err(|e| format!("waiting for {program}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{program} {args:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn expect_all(tool: &str, text: &str, wanted: &[String]) -> Result<(), Failed> {
    for line in wanted {
        if !text.contains(line.as_str()) {
            return Err(format!("{tool} output lacks `{line}`:\n{text}").into());
        }
    }
    Ok(())
}

fn frame() -> SensorFrame {
    // Sequence 7 has status "degraded"; payload 300 B gives a 140-byte blob.
    SensorFrame::sample(1, 7, 300)
}

fn protoc_reads_prost() -> Result<(), Failed> {
    let frame = frame();
    let mut bytes = Vec::new();
    Codec::Prost.encode(&frame, &mut bytes);
    let schema = Path::new(PROTO_SCHEMA);
    let text = run(
        "protoc",
        &[
            "--decode=ipc_matrix.SensorFrame",
            "--proto_path=.",
            "sensor_frame.proto",
        ],
        schema.parent().expect("a schema folder"),
        &bytes,
    )?;
    expect_all(
        "protoc",
        &text,
        &[
            format!("sequence: {}", frame.header.sequence),
            format!("sent_at_ns: {}", frame.header.sent_at_ns),
            format!("source_id: {}", frame.header.source_id),
            "status: STATUS_DEGRADED".into(),
            format!("channel: {}", frame.readings[3].channel),
            format!("quality: {}", frame.readings[3].quality),
        ],
    )?;
    if text.matches("readings {").count() != frame.readings.len() {
        return Err(format!("protoc shows a different number of readings:\n{text}").into());
    }
    Ok(())
}

fn capnp_reads_capnp() -> Result<(), Failed> {
    let frame = frame();
    let mut bytes = Vec::new();
    Codec::Capnp.encode(&frame, &mut bytes);
    let schema = Path::new(CAPNP_SCHEMA);
    // JSON, so that every field, the blob included, can be compared exactly.
    let text = run(
        "capnp",
        &[
            "convert",
            "binary:json",
            "sensor_frame.capnp",
            "SensorFrame",
        ],
        schema.parent().expect("a schema folder"),
        &bytes,
    )?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("capnp printed no JSON ({e}):\n{text}"))?;
    let number = |v: &serde_json::Value| -> Option<f64> {
        // 64-bit integers come as strings, to keep their precision.
        v.as_f64().or_else(|| v.as_str()?.parse().ok())
    };
    let readings: Vec<(f64, f64, f64)> = json["readings"]
        .as_array()
        .ok_or("no readings")?
        .iter()
        .map(|r| {
            (
                number(&r["channel"]).unwrap_or(f64::NAN),
                number(&r["value"]).unwrap_or(f64::NAN),
                number(&r["quality"]).unwrap_or(f64::NAN),
            )
        })
        .collect();
    let blob: Vec<u8> = json["blob"]
        .as_array()
        .ok_or("no blob")?
        .iter()
        .map(|b| b.as_u64().unwrap_or(256) as u8)
        .collect();
    let checks = [
        (
            "header.sequence",
            json["header"]["sequence"].as_str() == Some(&frame.header.sequence.to_string()),
        ),
        (
            "header.sentAtNs",
            json["header"]["sentAtNs"].as_str() == Some(&frame.header.sent_at_ns.to_string()),
        ),
        (
            "header.sourceId",
            number(&json["header"]["sourceId"]) == Some(f64::from(frame.header.source_id)),
        ),
        (
            "temperatureC",
            number(&json["temperatureC"]) == Some(frame.temperature_c),
        ),
        (
            "pressurePa",
            number(&json["pressurePa"]) == Some(f64::from(frame.pressure_pa)),
        ),
        ("status", json["status"] == "degraded"),
        ("label", json["label"] == frame.label.as_str()),
        (
            "readings",
            readings
                == frame
                    .readings
                    .iter()
                    .map(|r| (f64::from(r.channel), r.value, f64::from(r.quality)))
                    .collect::<Vec<_>>(),
        ),
        ("blob", blob == frame.blob),
    ];
    match checks.iter().find(|(_, ok)| !ok) {
        Some((field, _)) => Err(format!("capnp reads {field} differently:\n{text}").into()),
        None => Ok(()),
    }
}
