//! Peers the user brings: a program named by a scenario's `peer: { command: [...] }`,
//! started as `<command...> serve --config <json>`, where the JSON follows the external
//! peer protocol (version [`PROTOCOL_VERSION`], `peers/peer-config.schema.json`, the book's
//! docs/src/peers/protocol.md). It is a smaller contract than our own
//! peer's configuration: where to connect, the largest message, the idle timeout and the
//! measuring process; the framing and the goodbye are the transports' own.

use crate::peer::PeerConfig;
use ipc_matrix_spec::{Cell, ChannelKind, ExternalPeer, ScenarioKind};
use ipc_matrix_transport::PeerAddress;
use serde::Serialize;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The version of the external peer protocol this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// What an external peer is told, serialized onto its command line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExternalPeerConfig {
    pub protocol: u32,
    /// The cell's id, for the peer's own messages.
    pub cell: String,
    /// `echo` or `bulk`: both mean "send every message back unchanged".
    pub kind: &'static str,
    /// `tcp`, `udp` or `local`.
    pub transport: &'static str,
    /// `a.b.c.d:port` for tcp and udp; the socket's path for local.
    pub address: String,
    /// The largest message the peer may be sent, in bytes.
    pub max_message: usize,
    /// The peer gives up when no message arrives for this long.
    pub idle_timeout_ms: u64,
    /// The measuring process; the peer should die with it.
    pub parent_pid: u32,
}

impl ExternalPeerConfig {
    /// The protocol's form of our own peer's configuration for `cell`.
    pub(crate) fn of(cell: &Cell, config: &PeerConfig) -> Result<Self, ExternalPeerError> {
        let kind = match cell.kind() {
            ScenarioKind::Echo => "echo",
            ScenarioKind::Bulk => "bulk",
            other => return Err(ExternalPeerError::Kind(other)),
        };
        let (transport, address) = match &config.address {
            PeerAddress::Tcp { addr } => ("tcp", addr.to_string()),
            PeerAddress::Udp { addr } => ("udp", addr.to_string()),
            PeerAddress::Local { path } => (
                "local",
                path.to_str()
                    .ok_or_else(|| ExternalPeerError::PathNotUtf8(path.clone()))?
                    .to_string(),
            ),
            other => return Err(ExternalPeerError::Channel(other.channel())),
        };
        Ok(Self {
            protocol: PROTOCOL_VERSION,
            cell: cell.id.clone(),
            kind,
            transport,
            address,
            max_message: config.limit,
            idle_timeout_ms: u64::try_from(config.idle_timeout.as_millis()).unwrap_or(u64::MAX),
            parent_pid: config.parent,
        })
    }
}

/// Why an external peer cannot be started: what the protocol cannot tell it (a kind or a
/// channel it does not serve), or a command that is not a program this leg can run.
#[derive(Debug, thiserror::Error)]
pub enum ExternalPeerError {
    #[error("an external peer cannot serve a {} cell", .0.as_str())]
    Kind(ScenarioKind),
    #[error("the socket path {} is not UTF-8", .0.display())]
    PathNotUtf8(PathBuf),
    #[error("an external peer cannot connect over {0}")]
    Channel(ChannelKind),
    #[error("the peer command is empty: name a program")]
    EmptyCommand,
    /// `word` (relative to the project's folder) is a symbolic link to nothing.
    #[error(
        "the peer command `{word}` is a symbolic link ({}) to nothing that exists",
        .path.display()
    )]
    DanglingLink { word: String, path: PathBuf },
    #[error("the peer command `{word}` does not exist (looked for {})", .path.display())]
    Missing { word: String, path: PathBuf },
    #[error("the peer command `{word}` is not an executable file in PATH")]
    NotInPath { word: String },
    #[error("the peer command {}: {source}", .program.display())]
    Unreadable {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the peer command {} is not an executable file", .program.display())]
    NotExecutable { program: PathBuf },
    /// An ELF executable for another CPU (`built_for` describes it) on a native leg.
    #[error(
        "the peer command {} is built for another CPU ({built_for}); this leg runs natively on {} ({}): build it for {target}",
        .program.display(),
        std::env::consts::ARCH,
        this_machine().map_or_else(|| "unknown".into(), |m| m.describe()),
    )]
    OtherCpu {
        program: PathBuf,
        built_for: String,
        /// The target triple it should be built for.
        target: String,
    },
    #[error(
        "the peer command {} is a script whose interpreter {interpreter} (its #! line) does not exist",
        .program.display()
    )]
    NoInterpreter {
        program: PathBuf,
        interpreter: String,
    },
    #[error(
        "the peer command {} is neither an ELF executable nor a script (a first line `#!interpreter`)",
        .program.display()
    )]
    NotAProgram { program: PathBuf },
}

/// An external peer's command, found on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The program is an ELF executable of this build's architecture: under QEMU it runs
    /// through the same emulator prefix as our own peer. Anything else (a script, a
    /// program of the host's architecture) runs as it is.
    pub for_this_target: bool,
}

/// Finds `peer`'s program: a word with a `/` is a path (relative ones from
/// `project_dir`, matrix.yaml's folder), a bare name is looked up in PATH; `{target}`
/// stands for `target_triple`. Refuses, saying why, a program that is not there or cannot
/// run. On a native leg (`emulated` false) it also refuses one built for another CPU,
/// which would otherwise run on the wrong CPU, or through an emulator the host happens to
/// register; on an emulated leg such a program is the host's own (a shell, an
/// interpreter), and runs as it is.
pub fn resolve(
    peer: &ExternalPeer,
    project_dir: &Path,
    target_triple: &str,
    emulated: bool,
) -> Result<ResolvedCommand, ExternalPeerError> {
    let mut words = peer.command_for(target_triple).into_iter();
    let first = words.next().ok_or(ExternalPeerError::EmptyCommand)?;
    let program = if first.contains('/') {
        let path = project_dir.join(&first);
        let path = std::path::absolute(&path).unwrap_or(path);
        if let Ok(link) = std::fs::symlink_metadata(&path) {
            if link.file_type().is_symlink() && !path.exists() {
                return Err(ExternalPeerError::DanglingLink { word: first, path });
            }
        }
        if !path.exists() {
            return Err(ExternalPeerError::Missing { word: first, path });
        }
        path
    } else {
        find_in_path(&first).ok_or(ExternalPeerError::NotInPath { word: first })?
    };
    let metadata = std::fs::metadata(&program).map_err(|source| ExternalPeerError::Unreadable {
        program: program.clone(),
        source,
    })?;
    if !metadata.is_file() || metadata.permissions().mode() & 0o111 == 0 {
        return Err(ExternalPeerError::NotExecutable { program });
    }
    let for_this_target = match Executable::read(&program) {
        Executable::Elf(elf) if Some(elf) == this_machine() => true,
        Executable::Elf(_) if emulated => false,
        Executable::Elf(elf) => {
            return Err(ExternalPeerError::OtherCpu {
                program,
                built_for: elf.describe(),
                target: target_triple.to_string(),
            })
        }
        Executable::Script(interpreter) => {
            if interpreter.starts_with('/') && !Path::new(&interpreter).exists() {
                return Err(ExternalPeerError::NoInterpreter {
                    program,
                    interpreter,
                });
            }
            false
        }
        Executable::Unknown => return Err(ExternalPeerError::NotAProgram { program }),
    };
    Ok(ResolvedCommand {
        for_this_target,
        program,
        args: words.collect(),
    })
}

/// The first executable file named `name` in PATH, as a shell finds it.
fn find_in_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|path| {
                std::fs::metadata(path)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    })
}

/// The CPU an ELF executable is built for: its machine and byte order (ppc64 is one
/// machine in two byte orders).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ElfMachine {
    machine: u16,
    big_endian: bool,
}

impl ElfMachine {
    fn describe(self) -> String {
        let name = match self.machine {
            3 => "x86",
            62 => "x86_64",
            40 => "arm",
            183 => "aarch64",
            22 => "s390x",
            21 => "powerpc64",
            243 => "riscv",
            _ => "ELF machine",
        };
        let order = if self.big_endian { "big" } else { "little" };
        format!("{name} ({}), {order}-endian", self.machine)
    }
}

/// What a program file is, from its first bytes.
enum Executable {
    Elf(ElfMachine),
    /// A script, with the interpreter its `#!` line names.
    Script(String),
    Unknown,
}

impl Executable {
    fn read(path: &Path) -> Self {
        let mut head = [0u8; 256];
        let Ok(n) = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)) else {
            return Executable::Unknown;
        };
        let head = &head[..n];
        if head.len() >= 20 && &head[..4] == b"\x7fELF" {
            let bytes = [head[18], head[19]];
            let big_endian = match head[5] {
                1 => false,
                2 => true,
                _ => return Executable::Unknown,
            };
            let machine = match big_endian {
                false => u16::from_le_bytes(bytes),
                true => u16::from_be_bytes(bytes),
            };
            return Executable::Elf(ElfMachine {
                machine,
                big_endian,
            });
        }
        match head.strip_prefix(b"#!") {
            Some(rest) => {
                let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
                let line = String::from_utf8_lossy(line);
                Executable::Script(line.split_whitespace().next().unwrap_or("").to_string())
            }
            None => Executable::Unknown,
        }
    }
}

/// The CPU this build runs as; `None` on one this table does not know.
fn this_machine() -> Option<ElfMachine> {
    let machine = match std::env::consts::ARCH {
        "x86" => 3,
        "x86_64" => 62,
        "arm" => 40,
        "aarch64" => 183,
        "s390x" => 22,
        "powerpc64" => 21,
        "riscv64" => 243,
        _ => return None,
    };
    Some(ElfMachine {
        machine,
        big_endian: cfg!(target_endian = "big"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(words: &[&str]) -> ExternalPeer {
        ExternalPeer {
            command: words.iter().map(|w| w.to_string()).collect(),
        }
    }

    /// Our side of the protocol, against its published schema: every transport's form
    /// validates, and the schema refuses what a peer must refuse.
    #[test]
    fn every_config_an_external_peer_is_given_validates_against_the_schema() {
        use ipc_matrix_spec::{Echoes, Work};
        let file =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../peers/peer-config.schema.json");
        let schema: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let addresses = [
            PeerAddress::Tcp {
                addr: "127.0.0.1:40000".parse().unwrap(),
            },
            PeerAddress::Udp {
                addr: "198.18.0.1:5000".parse().unwrap(),
            },
            PeerAddress::Local {
                path: "/tmp/ipc-matrix-x/socket".into(),
            },
        ];
        for address in addresses {
            let cell = Cell {
                id: "echo-c::tcp::200B".into(),
                scenario: "echo-c".into(),
                transport: address.channel().transport(),
                wake: None,
                payload_bytes: 200,
                payload_label: "200B".into(),
                iterations: 10,
                warmup: 1,
                seed: 1,
                profile: "quick".into(),
                work: Work::Echo(Echoes::new(std::time::Duration::from_secs(5), 0.0)),
                host: Default::default(),
                peer: None,
            };
            let config = PeerConfig {
                address,
                parent: 42,
                limit: 1224,
                idle_timeout: std::time::Duration::from_secs(65),
                fault: None,
                delay: None,
                extra_work: None,
                cpu: Some(1),
                codec: None,
                kind: cell.kind(),
                role: serde_json::Value::Null,
                count: None,
                echoes_as_it_receives: false,
                echoes_from_loans: false,
                messages: None,
            };
            let sent =
                serde_json::to_value(ExternalPeerConfig::of(&cell, &config).unwrap()).unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&sent)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{sent}: {errors:?}");
            assert_eq!(sent["idle_timeout_ms"], 65_000);
            // What a peer must refuse, the schema refuses too.
            for (key, bad) in [
                ("protocol", serde_json::json!(2)),
                ("transport", serde_json::json!("shm")),
                ("max_message", serde_json::json!(-1)),
            ] {
                let mut wrong = sent.clone();
                wrong[key] = bad;
                assert!(!validator.is_valid(&wrong), "{wrong} accepted");
            }
            let mut missing = sent.clone();
            missing.as_object_mut().unwrap().remove("address");
            assert!(!validator.is_valid(&missing), "{missing} accepted");
        }
    }

    #[test]
    fn a_missing_command_is_refused_with_where_it_was_looked_for() {
        let dir = Path::new("/nonexistent-project");
        let e = resolve(&peer(&["peers/{target}/p"]), dir, "t", false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`peers/t/p` does not exist (looked for /nonexistent-project/peers/t/p)"),
            "{e}"
        );
        let e = resolve(&peer(&["no-such-program-here"]), dir, "t", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an executable file in PATH"), "{e}");
        let e = resolve(&peer(&["/"]), dir, "t", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not an executable file"), "{e}");
    }

    /// Files a command may name that cannot be this leg's peer, each refused saying why.
    #[test]
    fn foreign_elves_headless_files_missing_interpreters_and_dangling_links_are_refused() {
        let dir = std::env::temp_dir().join(format!("ipc-matrix-resolve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, bytes: &[u8]| {
            std::fs::write(dir.join(name), bytes).unwrap();
            std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        };
        // An ELF header of another CPU: s390x (22, big-endian) here, x86_64 on s390x.
        let other: &[u8] = match std::env::consts::ARCH {
            "s390x" => &[
                0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 62, 0,
            ],
            _ => &[
                0x7f, b'E', b'L', b'F', 2, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 22,
            ],
        };
        write("foreign", other);
        write("headless", b"echo no interpreter line\n");
        write("orphan.sh", b"#!/nonexistent/interpreter -x\n");
        std::os::unix::fs::symlink(dir.join("nothing"), dir.join("dangling")).unwrap();
        let refusal = |name: &str| {
            resolve(&peer(&[&format!("./{name}")]), &dir, "t", false)
                .unwrap_err()
                .to_string()
        };
        let e = refusal("foreign");
        assert!(
            e.contains("is built for another CPU") && e.contains("build it for t"),
            "{e}"
        );
        let e = refusal("headless");
        assert!(e.contains("neither an ELF executable nor a script"), "{e}");
        let e = refusal("orphan.sh");
        assert!(
            e.contains("interpreter /nonexistent/interpreter (its #! line) does not exist"),
            "{e}"
        );
        let e = refusal("dangling");
        assert!(
            e.contains("is a symbolic link") && e.contains("to nothing that exists"),
            "{e}"
        );
        // Paths are shown whole, without `./` pieces.
        assert!(e.contains(&format!("({}/dangling)", dir.display())), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn this_programs_own_binary_is_for_this_target_and_a_script_is_not() {
        let own = std::env::current_exe().unwrap();
        let resolved = resolve(
            &peer(&[own.to_str().unwrap(), "--flag"]),
            Path::new("/"),
            "t",
            false,
        )
        .unwrap();
        assert!(resolved.for_this_target);
        assert_eq!(resolved.args, ["--flag"]);
        let script =
            std::env::temp_dir().join(format!("ipc-matrix-peer-{}.sh", std::process::id()));
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let resolved = resolve(
            &peer(&[script.to_str().unwrap()]),
            Path::new("/"),
            "t",
            false,
        );
        std::fs::remove_file(&script).unwrap();
        assert!(!resolved.unwrap().for_this_target);
    }
}
