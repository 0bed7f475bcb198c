//! Interop with the reference implementations, both ways and field by field:
//! - frames encoded here are read by `protoc --decode` (Debian: protobuf-compiler) and
//!   `capnp convert binary:json` (Debian: capnproto); what they print is parsed into a
//!   frame (protobuf text format, JSON), strictly: an unknown or repeated field, a number
//!   out of range, a blob element that is not a byte is an error. Every field and every
//!   blob byte must equal the frame sent;
//! - frames written by this test as protobuf text, Cap'n Proto JSON and Cap'n Proto text
//!   are encoded by `protoc --encode`, `capnp convert json:binary` and `capnp convert
//!   text:binary`, and must decode here to the same frame.
//!
//! The frames cover every status, proto3's defaults (fields it leaves out), an empty blob,
//! every byte value, a label that needs escaping, and extreme numbers. Whether a tool is
//! present is decided when the tests are listed: without it, its tests are listed as
//! ignored (kind "needs <tool>"), never passed silently. `scripts/test.sh` installs both
//! where apt is available.

use ipc_matrix_codec::{
    Codec, FrameCodec, Header, Reading, SensorFrame, Status, CAPNP_SCHEMA, PROTO_SCHEMA,
};
use libtest_mimic::{Arguments, Failed, Trial};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    let mut trials = vec![
        with_tool("interop::protoc-reads-prost", "protoc", protoc_reads_prost),
        with_tool("interop::prost-reads-protoc", "protoc", prost_reads_protoc),
        with_tool("interop::capnp-reads-capnp", "capnp", capnp_reads_capnp),
        with_tool(
            "interop::capnp-reads-capnp-json",
            "capnp",
            capnp_reads_capnp_json,
        ),
        with_tool(
            "interop::capnp-reads-capnp-text",
            "capnp",
            capnp_reads_capnp_text,
        ),
    ];
    trials.push(Trial::test("parsers::refuse-what-is-not-a-frame", || {
        parsers_refuse_what_is_not_a_frame()
    }));
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
fn run(program: &str, args: &[&str], dir: &Path, input: &[u8]) -> Result<Vec<u8>, String> {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {program}: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let input = input.to_vec();
    // Written from a thread of its own: a large input must not block against the output.
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child
        .wait_with_output()
        .map_err(|e| format!("waiting for {program}: {e}"))?;
    writer
        .join()
        .expect("the writer does not panic")
        .map_err(|e| format!("writing to {program}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{program} {args:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(output.stdout)
}

fn schema_dir(schema: &str) -> &Path {
    Path::new(schema).parent().expect("a schema folder")
}

fn protoc(mode: &str, input: &[u8]) -> Result<Vec<u8>, String> {
    run(
        "protoc",
        &[
            &format!("--{mode}=ipc_matrix.SensorFrame"),
            "--proto_path=.",
            "sensor_frame.proto",
        ],
        schema_dir(PROTO_SCHEMA),
        input,
    )
}

fn capnp_convert(conversion: &str, input: &[u8]) -> Result<Vec<u8>, String> {
    run(
        "capnp",
        &["convert", conversion, "sensor_frame.capnp", "SensorFrame"],
        schema_dir(CAPNP_SCHEMA),
        input,
    )
}

/// The frames every direction is checked with.
fn frames() -> Vec<(&'static str, SensorFrame)> {
    let mut every_byte: Vec<u8> = (0..=255u8).collect();
    every_byte.extend((0..=255u8).rev());
    let extreme = SensorFrame {
        header: Header {
            sequence: u64::MAX,
            sent_at_ns: 1,
            source_id: u32::MAX,
        },
        // Not exactly representable in decimal: both tools must print it so that it
        // reads back to the same bits.
        temperature_c: 0.1,
        pressure_pa: f32::MAX,
        status: Status::Failed,
        readings: vec![
            Reading {
                channel: 0,
                value: 1e-300,
                quality: 0,
            },
            Reading {
                channel: u32::MAX,
                value: -123_456.789,
                quality: 255,
            },
            Reading {
                channel: 7,
                value: 5e-324,
                quality: 1,
            },
        ],
        label: "quote \" backslash \\ newline \n tab \t nul \0 Straße µ € 🦀".into(),
        blob: every_byte,
    };
    vec![
        // Sequence 7: status degraded; 300 B give a 140-byte blob.
        ("sample 1/7", SensorFrame::sample(1, 7, 300)),
        // Sequence 0: status ok, and proto3 leaves out every field at its default; a
        // payload under the structure's size gives an empty blob.
        ("sample 2/0", SensorFrame::sample(2, 0, 100)),
        // Status failed, a blob of several kilobytes.
        ("sample 3/8", SensorFrame::sample(3, 8, 5000)),
        ("extreme", extreme),
    ]
}

/// The first difference between the frame sent and the one a tool read, or `None`. Every
/// field is compared, floats by their bits, the blob byte for byte.
fn differs(sent: &SensorFrame, read: &SensorFrame) -> Option<String> {
    sent.first_difference(read)
        .or_else(|| (sent != read).then(|| format!("{read:?} != {sent:?}")))
}

/// Runs `check` on every frame; every failure is reported, each with its frame.
fn each_frame(check: impl Fn(&SensorFrame) -> Result<(), String>) -> Result<(), Failed> {
    let failures: Vec<String> = frames()
        .iter()
        .filter_map(|(name, frame)| check(frame).err().map(|e| format!("{name}: {e}")))
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

// ---------------------------------------------------------------------------------------
// protobuf

fn protoc_reads_prost() -> Result<(), Failed> {
    each_frame(|frame| {
        let mut bytes = Vec::new();
        Codec::Prost.encode(frame, &mut bytes);
        let text = String::from_utf8(protoc("decode", &bytes)?)
            .map_err(|e| format!("protoc printed no UTF-8: {e}"))?;
        let read = frame_from_proto_text(&text)
            .map_err(|e| format!("reading protoc's output: {e}\n{text}"))?;
        match differs(frame, &read) {
            None => Ok(()),
            Some(d) => Err(format!("protoc reads {d}\n{text}")),
        }
    })
}

fn prost_reads_protoc() -> Result<(), Failed> {
    each_frame(|frame| {
        let text = proto_text(frame);
        let bytes = protoc("encode", text.as_bytes())?;
        let read = Codec::Prost
            .decode(&bytes)
            .map_err(|e| format!("prost cannot decode protoc's encoding: {e}"))?;
        match differs(frame, &read) {
            None => Ok(()),
            Some(d) => Err(format!("prost reads protoc's encoding with {d}\n{text}")),
        }
    })
}

/// A frame in protobuf text format, as `protoc --encode` reads it. Bytes and strings are
/// written byte by byte in octal escapes; numbers in Rust's shortest round-trip form.
fn proto_text(frame: &SensorFrame) -> String {
    let h = &frame.header;
    let mut text = format!(
        "header {{ sequence: {} sent_at_ns: {} source_id: {} }}\n",
        h.sequence, h.sent_at_ns, h.source_id
    );
    text += &format!("temperature_c: {:e}\n", frame.temperature_c);
    text += &format!("pressure_pa: {:e}\n", frame.pressure_pa);
    let status = match frame.status {
        Status::Ok => "STATUS_OK",
        Status::Degraded => "STATUS_DEGRADED",
        Status::Failed => "STATUS_FAILED",
    };
    text += &format!("status: {status}\n");
    for r in &frame.readings {
        text += &format!(
            "readings {{ channel: {} value: {:e} quality: {} }}\n",
            r.channel, r.value, r.quality
        );
    }
    let octal = |bytes: &[u8]| -> String { bytes.iter().map(|b| format!("\\{b:03o}")).collect() };
    text += &format!("label: \"{}\"\n", octal(frame.label.as_bytes()));
    text += &format!("blob: \"{}\"\n", octal(&frame.blob));
    text
}

/// One value of protobuf text format: a scalar word (number or enum name), a string's
/// bytes, or a message's fields in order.
#[derive(Debug)]
enum TextValue {
    Word(String),
    Bytes(Vec<u8>),
    Message(Vec<(String, TextValue)>),
}

/// Parses protobuf text format (what `protoc --decode` prints) into its fields.
fn parse_proto_text(text: &str) -> Result<Vec<(String, TextValue)>, String> {
    let mut chars = text.char_indices().peekable();
    let fields = parse_fields(text, &mut chars, false)?;
    Ok(fields)
}

type Chars<'a> = std::iter::Peekable<std::str::CharIndices<'a>>;

fn skip_space(chars: &mut Chars) {
    while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
}

fn parse_fields(
    text: &str,
    chars: &mut Chars,
    nested: bool,
) -> Result<Vec<(String, TextValue)>, String> {
    let mut fields = Vec::new();
    loop {
        skip_space(chars);
        let Some(&(at, c)) = chars.peek() else {
            return if nested {
                Err("a message is not closed".into())
            } else {
                Ok(fields)
            };
        };
        if c == '}' {
            chars.next();
            return if nested {
                Ok(fields)
            } else {
                Err(format!("a `}}` at byte {at} closes nothing"))
            };
        }
        let mut name = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| c.is_ascii_alphanumeric() || *c == '_') {
            name.push(c);
        }
        if name.is_empty() {
            return Err(format!(
                "a field name was expected at byte {at}: {:?}",
                &text[at..]
            ));
        }
        skip_space(chars);
        match chars.next() {
            Some((_, '{')) => {
                let inner = parse_fields(text, chars, true)?;
                fields.push((name, TextValue::Message(inner)));
            }
            Some((_, ':')) => {
                skip_space(chars);
                let value = match chars.peek() {
                    Some(&(_, '"')) => {
                        chars.next();
                        TextValue::Bytes(parse_string(chars)?)
                    }
                    _ => {
                        let mut word = String::new();
                        while let Some((_, c)) =
                            chars.next_if(|(_, c)| !c.is_whitespace() && *c != '}' && *c != '{')
                        {
                            word.push(c);
                        }
                        if word.is_empty() {
                            return Err(format!("field {name} has no value"));
                        }
                        TextValue::Word(word)
                    }
                };
                fields.push((name, value));
            }
            other => return Err(format!("field {name} is followed by {other:?}")),
        }
    }
}

/// The bytes of a double-quoted string whose opening quote was read: C escapes (`\n`,
/// `\"`, `\\`, octal `\NNN`, hex `\xHH`, ...).
fn parse_string(chars: &mut Chars) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    loop {
        let (_, c) = chars.next().ok_or("a string is not closed")?;
        match c {
            '"' => return Ok(bytes),
            '\\' => {
                let (_, e) = chars.next().ok_or("a string ends in a backslash")?;
                let simple = match e {
                    'n' => Some(b'\n'),
                    'r' => Some(b'\r'),
                    't' => Some(b'\t'),
                    'a' => Some(0x07),
                    'b' => Some(0x08),
                    'f' => Some(0x0c),
                    'v' => Some(0x0b),
                    '\\' => Some(b'\\'),
                    '\'' => Some(b'\''),
                    '"' => Some(b'"'),
                    '?' => Some(b'?'),
                    _ => None,
                };
                if let Some(b) = simple {
                    bytes.push(b);
                } else if e.is_digit(8) {
                    let mut value = e.to_digit(8).unwrap();
                    for _ in 0..2 {
                        match chars.next_if(|(_, c)| c.is_digit(8)) {
                            Some((_, d)) => value = value * 8 + d.to_digit(8).unwrap(),
                            None => break,
                        }
                    }
                    bytes.push(u8::try_from(value).map_err(|_| format!("\\{value:o} is no byte"))?);
                } else if e == 'x' {
                    let mut value = 0u32;
                    let mut digits = 0;
                    while let Some((_, d)) = chars.next_if(|(_, c)| c.is_ascii_hexdigit()) {
                        value = value * 16 + d.to_digit(16).unwrap();
                        digits += 1;
                        if digits == 2 {
                            break;
                        }
                    }
                    if digits == 0 {
                        return Err("\\x without a hex digit".into());
                    }
                    bytes.push(value as u8);
                } else {
                    return Err(format!("unknown escape \\{e}"));
                }
            }
            c => {
                let mut buf = [0u8; 4];
                bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
}

/// The fields of a parsed message by name: each known name at most once (unless
/// repeated), no other name.
struct Fields<'a> {
    message: &'a str,
    fields: Vec<(&'a str, &'a TextValue)>,
}

impl<'a> Fields<'a> {
    fn of(
        message: &'a str,
        fields: &'a [(String, TextValue)],
        known: &[&str],
    ) -> Result<Self, String> {
        for (name, _) in fields {
            if !known.contains(&name.as_str()) {
                return Err(format!("{message} has an unknown field `{name}`"));
            }
        }
        Ok(Self {
            message,
            fields: fields.iter().map(|(n, v)| (n.as_str(), v)).collect(),
        })
    }

    /// The one value of `name`, `None` when left out (proto3: its default).
    fn one(&self, name: &str) -> Result<Option<&'a TextValue>, String> {
        let mut values = self.fields.iter().filter(|(n, _)| *n == name);
        let first = values.next().map(|(_, v)| *v);
        if values.next().is_some() {
            return Err(format!("{}.{name} appears more than once", self.message));
        }
        Ok(first)
    }

    fn all(&self, name: &str) -> Vec<&'a TextValue> {
        self.fields
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .collect()
    }

    /// A number of type `T` (its default when left out), read whole: `7` is not `70`.
    fn number<T: std::str::FromStr + Default>(&self, name: &str) -> Result<T, String> {
        match self.one(name)? {
            None => Ok(T::default()),
            Some(TextValue::Word(w)) => w.parse().map_err(|_| {
                format!(
                    "{}.{name}: `{w}` is not a {}",
                    self.message,
                    type_name::<T>()
                )
            }),
            Some(other) => Err(format!(
                "{}.{name} is not a number: {other:?}",
                self.message
            )),
        }
    }

    fn bytes(&self, name: &str) -> Result<Vec<u8>, String> {
        match self.one(name)? {
            None => Ok(Vec::new()),
            Some(TextValue::Bytes(b)) => Ok(b.clone()),
            Some(other) => Err(format!(
                "{}.{name} is not a string: {other:?}",
                self.message
            )),
        }
    }
}

fn type_name<T>() -> &'static str {
    std::any::type_name::<T>()
}

fn message<'a>(value: &'a TextValue, what: &str) -> Result<&'a [(String, TextValue)], String> {
    match value {
        TextValue::Message(fields) => Ok(fields),
        other => Err(format!("{what} is not a message: {other:?}")),
    }
}

/// The frame protobuf text format describes; proto3 leaves out fields at their default.
fn frame_from_proto_text(text: &str) -> Result<SensorFrame, String> {
    let parsed = parse_proto_text(text)?;
    let top = Fields::of(
        "SensorFrame",
        &parsed,
        &[
            "header",
            "temperature_c",
            "pressure_pa",
            "status",
            "readings",
            "label",
            "blob",
        ],
    )?;
    let header_fields = match top.one("header")? {
        Some(value) => message(value, "header")?,
        None => return Err("no header".into()),
    };
    let header = Fields::of(
        "header",
        header_fields,
        &["sequence", "sent_at_ns", "source_id"],
    )?;
    let status = match top.one("status")? {
        None => Status::Ok,
        Some(TextValue::Word(w)) => match w.as_str() {
            "STATUS_OK" => Status::Ok,
            "STATUS_DEGRADED" => Status::Degraded,
            "STATUS_FAILED" => Status::Failed,
            other => return Err(format!("status `{other}` is not a Status")),
        },
        Some(other) => return Err(format!("status is not an enum value: {other:?}")),
    };
    let readings = top
        .all("readings")
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            let what = format!("readings[{i}]");
            let fields = message(value, &what)?;
            let r = Fields::of(&what, fields, &["channel", "value", "quality"])?;
            let quality: u32 = r.number("quality")?;
            Ok(Reading {
                channel: r.number("channel")?,
                value: r.number("value")?,
                quality: u8::try_from(quality)
                    .map_err(|_| format!("{what}.quality {quality} is over 255"))?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(SensorFrame {
        header: Header {
            sequence: header.number("sequence")?,
            sent_at_ns: header.number("sent_at_ns")?,
            source_id: header.number("source_id")?,
        },
        temperature_c: top.number("temperature_c")?,
        pressure_pa: top.number("pressure_pa")?,
        status,
        readings,
        label: String::from_utf8(top.bytes("label")?)
            .map_err(|e| format!("label is not UTF-8: {e}"))?,
        blob: top.bytes("blob")?,
    })
}

// ---------------------------------------------------------------------------------------
// Cap'n Proto

fn capnp_reads_capnp() -> Result<(), Failed> {
    each_frame(|frame| {
        let mut bytes = Vec::new();
        Codec::Capnp.encode(frame, &mut bytes);
        let text = String::from_utf8(capnp_convert("binary:json", &bytes)?)
            .map_err(|e| format!("capnp printed no UTF-8: {e}"))?;
        let read = frame_from_capnp_json(&text)
            .map_err(|e| format!("reading capnp's JSON: {e}\n{text}"))?;
        match differs(frame, &read) {
            None => Ok(()),
            Some(d) => Err(format!("capnp reads {d}\n{text}")),
        }
    })
}

fn capnp_reads_capnp_json() -> Result<(), Failed> {
    each_frame(|frame| {
        let json = capnp_json(frame);
        let bytes = capnp_convert("json:binary", json.as_bytes())?;
        let read = Codec::Capnp
            .decode(&bytes)
            .map_err(|e| format!("cannot decode capnp's encoding of JSON: {e}"))?;
        match differs(frame, &read) {
            None => Ok(()),
            Some(d) => Err(format!("capnp's encoding of JSON reads {d}\n{json}")),
        }
    })
}

fn capnp_reads_capnp_text() -> Result<(), Failed> {
    each_frame(|frame| {
        let text = capnp_text(frame);
        let bytes = capnp_convert("text:binary", text.as_bytes())?;
        let read = Codec::Capnp
            .decode(&bytes)
            .map_err(|e| format!("cannot decode capnp's encoding of text: {e}"))?;
        match differs(frame, &read) {
            None => Ok(()),
            Some(d) => Err(format!("capnp's encoding of text reads {d}\n{text}")),
        }
    })
}

fn capnp_status(status: Status) -> &'static str {
    match status {
        Status::Ok => "ok",
        Status::Degraded => "degraded",
        Status::Failed => "failed",
    }
}

/// A frame in Cap'n Proto's JSON (64-bit integers as strings, Data as an array of bytes).
fn capnp_json(frame: &SensorFrame) -> String {
    let value = serde_json::json!({
        "header": {
            "sequence": frame.header.sequence.to_string(),
            "sentAtNs": frame.header.sent_at_ns.to_string(),
            "sourceId": frame.header.source_id,
        },
        "temperatureC": frame.temperature_c,
        "pressurePa": frame.pressure_pa,
        "status": capnp_status(frame.status),
        "readings": frame.readings.iter().map(|r| serde_json::json!({
            "channel": r.channel,
            "value": r.value,
            "quality": r.quality,
        })).collect::<Vec<_>>(),
        "label": frame.label,
        "blob": frame.blob,
    });
    value.to_string()
}

/// A frame in Cap'n Proto's text format (Text and Data as strings of `\xNN` escapes).
fn capnp_text(frame: &SensorFrame) -> String {
    let h = &frame.header;
    let readings: Vec<String> = frame
        .readings
        .iter()
        .map(|r| {
            format!(
                "(channel = {}, value = {:e}, quality = {})",
                r.channel, r.value, r.quality
            )
        })
        .collect();
    let label: String = frame.label.bytes().map(|b| format!("\\x{b:02x}")).collect();
    let blob: String = frame.blob.iter().map(|b| format!("\\x{b:02x}")).collect();
    format!(
        "(header = (sequence = {}, sentAtNs = {}, sourceId = {}), temperatureC = {:e}, \
         pressurePa = {:e}, status = {}, readings = [{}], label = \"{label}\", blob = \"{blob}\")",
        h.sequence,
        h.sent_at_ns,
        h.source_id,
        frame.temperature_c,
        frame.pressure_pa,
        capnp_status(frame.status),
        readings.join(", ")
    )
}

/// A JSON value whose numbers keep their text, so that a float is read with Rust's
/// correctly rounded parser and an integer whole.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl std::fmt::Display for Json {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Json::Number(n) => f.write_str(n),
            Json::String(s) => write!(f, "{s:?}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// Parses one JSON document (RFC 8259), nothing after it.
fn parse_json(text: &str) -> Result<Json, String> {
    let mut chars = text.char_indices().peekable();
    let value = json_value(&mut chars)?;
    skip_space(&mut chars);
    match chars.next() {
        None => Ok(value),
        Some((at, c)) => Err(format!("`{c}` at byte {at} after the document")),
    }
}

fn json_value(chars: &mut Chars) -> Result<Json, String> {
    skip_space(chars);
    let (at, c) = chars
        .next()
        .ok_or("the document ends where a value was expected")?;
    let word = |chars: &mut Chars, rest: &str, value: Json| {
        for expected in rest.chars() {
            if chars.next().map(|(_, c)| c) != Some(expected) {
                return Err(format!("a bad literal at byte {at}"));
            }
        }
        Ok(value)
    };
    match c {
        '{' => {
            let mut members = Vec::new();
            skip_space(chars);
            if chars.next_if(|(_, c)| *c == '}').is_some() {
                return Ok(Json::Object(members));
            }
            loop {
                skip_space(chars);
                let key = match chars.next() {
                    Some((_, '"')) => json_string(chars)?,
                    other => return Err(format!("an object key was expected, not {other:?}")),
                };
                skip_space(chars);
                if chars.next().map(|(_, c)| c) != Some(':') {
                    return Err(format!("no `:` after the key {key:?}"));
                }
                let value = json_value(chars)?;
                members.push((key, value));
                skip_space(chars);
                match chars.next() {
                    Some((_, ',')) => continue,
                    Some((_, '}')) => return Ok(Json::Object(members)),
                    other => return Err(format!("`,` or `}}` was expected, not {other:?}")),
                }
            }
        }
        '[' => {
            let mut items = Vec::new();
            skip_space(chars);
            if chars.next_if(|(_, c)| *c == ']').is_some() {
                return Ok(Json::Array(items));
            }
            loop {
                items.push(json_value(chars)?);
                skip_space(chars);
                match chars.next() {
                    Some((_, ',')) => continue,
                    Some((_, ']')) => return Ok(Json::Array(items)),
                    other => return Err(format!("`,` or `]` was expected, not {other:?}")),
                }
            }
        }
        '"' => Ok(Json::String(json_string(chars)?)),
        't' => word(chars, "rue", Json::Bool(true)),
        'f' => word(chars, "alse", Json::Bool(false)),
        'n' => word(chars, "ull", Json::Null),
        '-' | '0'..='9' => {
            let mut number = String::from(c);
            while let Some((_, d)) = chars
                .next_if(|(_, c)| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
            {
                number.push(d);
            }
            let grammar = is_json_number(&number);
            if !grammar {
                return Err(format!("`{number}` is not a JSON number"));
            }
            Ok(Json::Number(number))
        }
        other => Err(format!("`{other}` at byte {at} starts no value")),
    }
}

/// JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
fn is_json_number(n: &str) -> bool {
    let b = n.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    if b.get(i) == Some(&b'0') {
        i += 1;
    } else if !digits(&mut i) {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == b.len()
}

/// The four hex digits of a `\u` escape.
fn hex_unit(chars: &mut Chars) -> Result<u32, String> {
    let mut v = 0;
    for _ in 0..4 {
        let (_, d) = chars.next().ok_or("a short \\u escape")?;
        v = v * 16 + d.to_digit(16).ok_or("a bad \\u escape")?;
    }
    Ok(v)
}

/// A JSON string whose opening quote was read.
fn json_string(chars: &mut Chars) -> Result<String, String> {
    let mut out = String::new();
    loop {
        let (_, c) = chars.next().ok_or("a string is not closed")?;
        match c {
            '"' => return Ok(out),
            '\\' => {
                let (_, e) = chars.next().ok_or("a string ends in a backslash")?;
                match e {
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    '/' => out.push('/'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'u' => {
                        let high = hex_unit(chars)?;
                        let code = if (0xd800..0xdc00).contains(&high) {
                            if chars.next().map(|(_, c)| c) != Some('\\')
                                || chars.next().map(|(_, c)| c) != Some('u')
                            {
                                return Err("a lone high surrogate".into());
                            }
                            let low = hex_unit(chars)?;
                            0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00)
                        } else {
                            high
                        };
                        out.push(char::from_u32(code).ok_or("a bad \\u escape")?);
                    }
                    other => return Err(format!("unknown escape \\{other}")),
                }
            }
            c if (c as u32) < 0x20 => return Err("a control character in a string".into()),
            c => out.push(c),
        }
    }
}

/// The frame Cap'n Proto's JSON describes, strictly: every field present once and of its
/// type, no other field, every blob element a byte.
fn frame_from_capnp_json(text: &str) -> Result<SensorFrame, String> {
    let json = parse_json(text).map_err(|e| format!("not JSON: {e}"))?;
    let object = |v: &Json, what: &str, keys: &[&str]| -> Result<Vec<Json>, String> {
        let Json::Object(members) = v else {
            return Err(format!("{what} is not an object"));
        };
        for (key, _) in members {
            if !keys.contains(&key.as_str()) {
                return Err(format!("{what} has an unknown field `{key}`"));
            }
        }
        keys.iter()
            .map(|key| {
                let mut found = members.iter().filter(|(k, _)| k == key);
                let value = found
                    .next()
                    .ok_or_else(|| format!("{what} has no `{key}`"))?;
                if found.next().is_some() {
                    return Err(format!("{what}.{key} appears more than once"));
                }
                Ok(value.1.clone())
            })
            .collect()
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // 64-bit integers come as strings (to keep their precision), smaller ones as numbers.
    let u64_of = |v: &Json, what: &str| -> Result<u64, String> {
        match v {
            Json::String(s) | Json::Number(s) if digits(s) => s
                .parse()
                .map_err(|_| format!("{what}: {s} is over 64 bits")),
            other => Err(format!("{what}: {other} is not a whole number")),
        }
    };
    let small = |v: &Json, what: &str, max: u64| -> Result<u64, String> {
        let n: u64 = match v {
            Json::Number(s) if digits(s) => {
                s.parse().map_err(|_| format!("{what}: {s} is huge"))?
            }
            other => return Err(format!("{what}: {other} is not a whole number")),
        };
        if n > max {
            return Err(format!("{what}: {n} is over {max}"));
        }
        Ok(n)
    };
    let float = |v: &Json, what: &str| -> Result<f64, String> {
        match v {
            Json::Number(s) => s
                .parse()
                .map_err(|_| format!("{what}: {s} is not a number")),
            other => Err(format!("{what}: {other} is not a number")),
        }
    };
    let keys = [
        "header",
        "temperatureC",
        "pressurePa",
        "status",
        "readings",
        "label",
        "blob",
    ];
    let [header, temperature, pressure, status, readings, label, blob] =
        <[Json; 7]>::try_from(object(&json, "SensorFrame", &keys)?).expect("seven fields");
    let [sequence, sent_at, source] = <[Json; 3]>::try_from(object(
        &header,
        "header",
        &["sequence", "sentAtNs", "sourceId"],
    )?)
    .expect("three fields");
    let status = match &status {
        Json::String(s) if s == "ok" => Status::Ok,
        Json::String(s) if s == "degraded" => Status::Degraded,
        Json::String(s) if s == "failed" => Status::Failed,
        other => return Err(format!("status {other} is not a Status")),
    };
    let Json::Array(readings) = readings else {
        return Err("readings is not a list".into());
    };
    let readings = readings
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let what = format!("readings[{i}]");
            let [channel, value, quality] =
                <[Json; 3]>::try_from(object(r, &what, &["channel", "value", "quality"])?)
                    .expect("three fields");
            Ok(Reading {
                channel: small(&channel, &format!("{what}.channel"), u32::MAX.into())? as u32,
                value: float(&value, &format!("{what}.value"))?,
                quality: small(&quality, &format!("{what}.quality"), 255)? as u8,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let Json::Array(blob) = blob else {
        return Err("blob is not a list".into());
    };
    let blob = blob
        .iter()
        .enumerate()
        .map(|(i, b)| Ok(small(b, &format!("blob[{i}]"), 255)? as u8))
        .collect::<Result<Vec<u8>, String>>()?;
    // A Float32 is printed as the double it widens to.
    let pressure = float(&pressure, "pressurePa")?;
    let pressure_pa = pressure as f32;
    if f64::from(pressure_pa) != pressure {
        return Err(format!("pressurePa {pressure} is not a Float32"));
    }
    let Json::String(label) = label else {
        return Err("label is not a string".into());
    };
    Ok(SensorFrame {
        header: Header {
            sequence: u64_of(&sequence, "header.sequence")?,
            sent_at_ns: u64_of(&sent_at, "header.sentAtNs")?,
            source_id: small(&source, "header.sourceId", u32::MAX.into())? as u32,
        },
        temperature_c: float(&temperature, "temperatureC")?,
        pressure_pa,
        status,
        readings,
        label,
        blob,
    })
}

// ---------------------------------------------------------------------------------------
// The parsers themselves: what is not a frame is refused, never read as something else.

fn parsers_refuse_what_is_not_a_frame() -> Result<(), Failed> {
    let frame = SensorFrame::sample(1, 7, 300);
    let good_json = capnp_json(&frame);
    let good_text = proto_text(&frame);
    // What this test writes, its own parsers read back exactly.
    let json_back = frame_from_capnp_json(&good_json)?;
    if let Some(d) = differs(&frame, &json_back) {
        return Err(format!("the JSON parser reads {d}").into());
    }
    let text_back = frame_from_proto_text(&good_text)?;
    if let Some(d) = differs(&frame, &text_back) {
        return Err(format!("the text parser reads {d}").into());
    }
    let json_cases: Vec<(&str, String)> = vec![
        (
            "a blob element that is a string",
            good_json.replacen("\"blob\":[", "\"blob\":[\"x\",", 1),
        ),
        (
            "a blob element over 255",
            good_json.replacen("\"blob\":[", "\"blob\":[256,", 1),
        ),
        (
            "a blob element that is negative",
            good_json.replacen("\"blob\":[", "\"blob\":[-1,", 1),
        ),
        (
            "a blob element that is a fraction",
            good_json.replacen("\"blob\":[", "\"blob\":[1.5,", 1),
        ),
        (
            "an unknown field",
            good_json.replacen("{\"blob\"", "{\"extra\":1,\"blob\"", 1),
        ),
        (
            "a missing field",
            good_json.replacen("\"label\":", "\"labels\":", 1),
        ),
        (
            "a sequence that is not a number",
            good_json.replacen("\"sequence\":\"7\"", "\"sequence\":\"7x\"", 1),
        ),
        (
            "an unknown status",
            good_json.replacen("\"degraded\"", "\"fine\"", 1),
        ),
        (
            "a quality over 255",
            good_json.replacen("\"quality\":31", "\"quality\":256", 1),
        ),
        (
            "a field twice",
            good_json.replacen("{\"blob\"", "{\"blob\":[],\"blob\"", 1),
        ),
        (
            "a number JSON does not have",
            good_json.replacen("\"quality\":31", "\"quality\":031", 1),
        ),
        ("something after the document", format!("{good_json} {{}}")),
    ];
    for (what, json) in json_cases {
        if json == good_json {
            return Err(format!("JSON case `{what}` changed nothing").into());
        }
        if let Ok(read) = frame_from_capnp_json(&json) {
            return Err(format!("the JSON parser accepted {what}: {read:?}").into());
        }
    }
    let text_cases: Vec<(&str, String)> = vec![
        ("an unknown field", format!("{good_text}extra: 1\n")),
        (
            "a repeated singular field",
            format!("{good_text}label: \"x\"\n"),
        ),
        (
            "a sequence that is not a number",
            good_text.replacen("sequence: 7", "sequence: 7x", 1),
        ),
        (
            "a negative sequence",
            good_text.replacen("sequence: 7", "sequence: -7", 1),
        ),
        (
            "a quality over 255",
            good_text.replacen("quality: 31", "quality: 256", 1),
        ),
        (
            "an unknown status",
            good_text.replacen("STATUS_DEGRADED", "STATUS_FINE", 1),
        ),
        ("an unclosed message", good_text.replacen(" }\n", "\n", 1)),
        ("an unclosed string", format!("{good_text}blob: \"\\001")),
        (
            "a bad escape",
            good_text.replacen("blob: \"", "blob: \"\\q", 1),
        ),
    ];
    for (what, text) in text_cases {
        if text == good_text {
            return Err(format!("text case `{what}` changed nothing").into());
        }
        if let Ok(read) = frame_from_proto_text(&text) {
            return Err(format!("the text parser accepted {what}: {read:?}").into());
        }
    }
    // A number is read whole: 70 is not 7.
    let seventy = good_text.replacen("sequence: 7", "sequence: 70", 1);
    let read = frame_from_proto_text(&seventy)?;
    if read.header.sequence != 70 || differs(&frame, &read).is_none() {
        return Err(format!("sequence 70 read as {}", read.header.sequence).into());
    }
    Ok(())
}
