//! Where an iceoryx2 channel's files live: under its root directory, and in /dev/shm
//! under a prefix derived from that directory's name; and the iceoryx2 configuration and
//! node that put them there.

use crate::artifact::{LifeLock, PrivateDir, MAX_SOCKET_PATH, SHM_DIR};
use crate::error::TransportError;
use iceoryx2::prelude::{Config, FileName, Node, NodeBuilder, SemanticString, SignalHandlingMode};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The service type: ports of `ipc::Service` hold an `Rc` and are not `Send`.
pub(super) type S = iceoryx2::prelude::ipc::Service;

/// The start of every /dev/shm name iceoryx2 makes for us (see [`prefix_of`]).
pub(crate) const PREFIX_START: &str = "iox2.";
/// The name after the prefix of the file in /dev/shm whose lock says the prefix's
/// creator lives (see [`RunFiles`]).
pub(crate) const ALIVE: &str = "alive";
/// The length of a prefix: [`PREFIX_START`], 12 hex digits and a dot.
const PREFIX_LEN: usize = PREFIX_START.len() + 13;
/// The /dev/shm prefix of the iceoryx2 files of the run whose root is the private
/// directory named `dir_name`: `iox2.` and 48 bits of an FNV-1a hash of the name. Short,
/// because an event socket's path holds the root, the prefix and a 39-digit id in 107
/// bytes; derived, so that whoever removes the directory finds its segments.
pub(crate) fn prefix_of(dir_name: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in dir_name.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{PREFIX_START}{:012x}.", hash & 0xffff_ffff_ffff)
}

/// The prefix a /dev/shm name made by [`prefix_of`]'s channels starts with, if it is one.
pub(crate) fn prefix_in(name: &str) -> Option<&str> {
    let hash = name
        .strip_prefix(PREFIX_START)?
        .get(..PREFIX_LEN - PREFIX_START.len())?;
    let (hex, dot) = hash.split_at(12);
    (dot == "." && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| &name[..PREFIX_LEN])
}

/// The iceoryx2 configuration of a channel: the defaults, with every file under `root`
/// and every /dev/shm name starting with `prefix`. Dead nodes are cleaned up when a node is
/// created and dropped and when a service is opened (iceoryx2's defaults, kept).
pub(super) fn config(root: &Path, prefix: &str) -> Result<Config, TransportError> {
    let mut config = Config::default();
    let mut root_text = root.to_string_lossy().into_owned();
    if !root_text.ends_with('/') {
        root_text.push('/');
    }
    let path = iceoryx2::prelude::Path::new(root_text.as_bytes())
        .map_err(iox("naming the iceoryx2 root directory"))?;
    config.global.set_root_path(&path);
    config.global.prefix =
        FileName::new(prefix.as_bytes()).map_err(iox("naming the iceoryx2 prefix"))?;
    Ok(config)
}

/// An iceoryx2 error, which says only its variant, as an I/O error with its context.
pub(super) fn iox<E: std::fmt::Debug>(context: &'static str) -> impl FnOnce(E) -> TransportError {
    move |e| TransportError::Io {
        context,
        source: std::io::Error::other(format!("{e:?}")),
    }
}

pub(super) fn node(config: &Config) -> Result<Node<S>, TransportError> {
    NodeBuilder::new()
        .config(config)
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<S>()
        .map_err(iox("creating the iceoryx2 node"))
}

/// The files of `segments` whose names start with `prefix`.
pub(super) fn segments_of(segments: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(segments) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect()
}

/// Removes every file of `segments` whose name starts with `prefix`.
pub(super) fn remove_segments(segments: &Path, prefix: &str) {
    for path in segments_of(segments, prefix) {
        let _ = std::fs::remove_file(&path);
    }
}

/// What iceoryx2 adds to the root and prefix in an event socket's name: a listener id
/// (a u128 in decimal, up to 39 digits) and `.event`.
const EVENT_NAME_TAIL: usize = 39 + ".event".len();

/// What the measuring side made on disk: the root directory and the prefix of its
/// segments, and `<prefix>alive` in /dev/shm, which it holds locked ([`LifeLock`]) while
/// the channel lives, so that the sweep can tell the prefix's names abandoned even once
/// the root is gone (an older ipc-matrix's sweep removes the root and knows nothing of
/// them). Dropped after the channel's ports (declared after them), it removes whatever iceoryx2
/// left in /dev/shm under the prefix (the node counter `<prefix>…node.*.global_mgmt`,
/// which iceoryx2 never removes; a stalled peer's segments), the lock file with them, then
/// the directory.
pub(super) struct RunFiles {
    pub(super) prefix: String,
    _alive: LifeLock,
    pub(super) root: PrivateDir,
}

impl RunFiles {
    pub(super) fn create() -> Result<Self, TransportError> {
        // The root holds the event sockets: `/<prefix><id>.event`.
        let sockets = 1 + PREFIX_LEN + EVENT_NAME_TAIL;
        let root = PrivateDir::for_sockets(sockets)
            .map_err(TransportError::io("creating the iceoryx2 root directory"))?;
        let name = root
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let prefix = prefix_of(&name);
        // Before any file of the prefix exists: a name of the prefix without it is an
        // orphan.
        let lock = Path::new(SHM_DIR).join(format!("{prefix}{ALIVE}"));
        let alive = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&lock)
            .and_then(|_| LifeLock::hold(&lock))
            .map_err(TransportError::io(
                "creating the iceoryx2 prefix's lock file",
            ))?;
        Ok(Self {
            prefix,
            _alive: alive,
            root,
        })
    }
}

impl Drop for RunFiles {
    fn drop(&mut self) {
        remove_segments(Path::new(SHM_DIR), &self.prefix);
        // The lock goes next, then the PrivateDir, with everything iceoryx2 made under it.
    }
}

/// Fails when the event socket of a channel under `root` with `prefix` would have a name
/// longer than a Unix socket takes.
pub(super) fn check_socket_path(root: &Path, prefix: &str) -> Result<(), TransportError> {
    let len = root.as_os_str().len() + 1 + prefix.len() + EVENT_NAME_TAIL;
    if len > MAX_SOCKET_PATH {
        return Err(TransportError::Io {
            context: "naming the iceoryx2 event sockets",
            source: std::io::Error::other(format!(
                "{}/{prefix}<id>.event would be {len} bytes, more than the {MAX_SOCKET_PATH} \
                 of a Unix socket's name",
                root.display()
            )),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_is_short_and_belongs_to_its_directory() {
        let a = prefix_of("ipc-matrix.123.0.0000abcd");
        let b = prefix_of("ipc-matrix.123.1.0000abcd");
        assert_ne!(a, b);
        assert_eq!(a, prefix_of("ipc-matrix.123.0.0000abcd"));
        assert!(a.starts_with(PREFIX_START) && a.ends_with('.'), "{a}");
        assert_eq!(a.len(), PREFIX_LEN);
        assert!(!a.starts_with(crate::artifact::ARTIFACT_PREFIX));
    }

    #[test]
    fn a_name_of_a_prefix_says_its_prefix() {
        let prefix = prefix_of("ipc-matrix.1.2.3");
        let name = format!("{prefix}0354a209029e7d09_1584.data");
        assert_eq!(prefix_in(&name), Some(prefix.as_str()));
        assert_eq!(
            prefix_in(&format!("{prefix}{ALIVE}")),
            Some(prefix.as_str())
        );
        for other in [
            "iox2_node.global_mgmt",
            "iox2.12345.x",
            "iox2.0123456789ag.a",
            "ipc-matrix.1.2",
        ] {
            assert_eq!(prefix_in(other), None, "{other}");
        }
    }

    #[test]
    fn an_event_socket_name_too_long_is_refused_up_front() {
        let prefix = prefix_of("x");
        assert!(
            check_socket_path(Path::new("/tmp/ipc-matrix.4194304.999.ffffffff"), &prefix).is_ok()
        );
        let long = format!("/tmp/{}", "d".repeat(60));
        match check_socket_path(Path::new(&long), &prefix) {
            Err(TransportError::Io { source, .. }) => {
                assert!(source.to_string().contains("more than the 107"), "{source}")
            }
            other => panic!("{other:?}"),
        }
    }
}
