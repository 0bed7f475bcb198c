//! `big-endian-peer <triple>`: the reference C peer built for a big-endian CPU (s390x),
//! checked by this machine's own harness: its echo cells with that peer started through
//! QEMU user mode (a program of someone else's, of another byte order, through the
//! external peer protocol; every reply checked byte for byte). Needs no build of the
//! workspace for that CPU: the peer is the only emulated process. Results go to
//! `<target>/ipc-matrix/big-endian-peer/`, apart from the native leg's.

use crate::repo::Repo;
use crate::sh::host_triple;
use crate::{cargo_config, peers, reports};
use anyhow::{Context, Result};

/// `word` as a JSON string (which YAML reads as a string too).
fn json_string(word: &str) -> String {
    let mut quoted = String::from("\"");
    for c in word.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if (c as u32) < 0x20 => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// The matrix: matrix.yaml's echo-c-peer cells, with the peer behind the target's runner.
fn matrix(triple: &str, host: &str, command: &[String]) -> String {
    let command: Vec<String> = command.iter().map(|w| json_string(w)).collect();
    format!(
        "# Written by cargo xtask big-endian-peer: the C peer of {triple}, behind its runner.
version: 1
targets:
  - {{ triple: {host}, runner: native, blocks_merge: false }}
profiles:
  quick: {{ description: the reference C peer on {triple} }}
scenarios:
  - name: echo-c-peer-{triple}
    kind: echo
    transports: [tcp, udp, local]
    payloads: [200B, 60KiB]
    iterations: 1000
    warmup: 100
    timeout: 5s
    peer: {{ command: [{}] }}
",
        command.join(", ")
    )
}

/// Runs the cells; the CLI's exit status.
pub fn big_endian_peer(repo: &Repo, triple: &str) -> Result<u8> {
    let mut command = cargo_config::runner(&repo.root, triple)?
        .with_context(|| format!("{triple} has no runner in .cargo/config.toml"))?;
    // Absolute paths: the harness resolves a relative command from the matrix file's folder.
    if command[0].contains('/') && !command[0].starts_with('/') {
        command[0] = repo.root.join(&command[0]).to_string_lossy().into_owned();
    }
    let peer = repo.root.join(peers::build(repo, Some(triple))?);
    command.push(peer.to_string_lossy().into_owned());
    let dir = repo.target_dir.join("ipc-matrix/big-endian-peer");
    std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    let file = dir.join("matrix.yaml");
    std::fs::write(&file, matrix(triple, &host_triple()?, &command))
        .with_context(|| file.display().to_string())?;
    let args = [
        "run".into(),
        "--matrix".into(),
        file.to_string_lossy().into_owned(),
        "--out".into(),
        dir.join("results").to_string_lossy().into_owned(),
    ];
    reports::ipc_matrix(repo, None, &args)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_is_written_as_json_strings() {
        assert_eq!(super::json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
        let m = super::matrix(
            "s390x-unknown-linux-gnu",
            "x86_64-unknown-linux-gnu",
            &["/r/scripts/qemu-run".into(), "s390x".into()],
        );
        assert!(
            m.contains("peer: { command: [\"/r/scripts/qemu-run\", \"s390x\"] }"),
            "{m}"
        );
        assert!(
            m.contains("name: echo-c-peer-s390x-unknown-linux-gnu"),
            "{m}"
        );
    }
}
