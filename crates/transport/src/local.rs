//! Local socket through `interprocess` (a Unix domain socket on Linux). The socket file
//! lives in a fresh directory of mode 0700, which is removed as soon as the peer is
//! connected: from then on nothing of ours is on the file system.

use crate::address::PeerAddress;
use crate::artifact::{PrivateDir, ARTIFACT_PREFIX};
use crate::contract::{Acceptor, Channel};
use crate::error::TransportError;
use crate::framing::{Framed, TimedStream};
use crate::wait::{poll_accept, remaining};
use interprocess::local_socket::{
    prelude::*, GenericFilePath, ListenerNonblockingMode, ListenerOptions, Stream,
};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

impl TimedStream for Stream {
    fn set_read_timeout(&mut self, t: Duration) -> io::Result<()> {
        self.set_recv_timeout(Some(t))
    }
    fn set_write_timeout(&mut self, t: Duration) -> io::Result<()> {
        self.set_send_timeout(Some(t))
    }
}

pub struct LocalAcceptor {
    listener: interprocess::local_socket::Listener,
    /// Holds the socket file; removed when the acceptor is dropped.
    _dir: PrivateDir,
    path: PathBuf,
}

impl LocalAcceptor {
    pub fn bind() -> Result<Self, TransportError> {
        let file = format!("{ARTIFACT_PREFIX}sock");
        let dir = PrivateDir::for_sockets(1 + file.len())
            .map_err(TransportError::io("creating a private directory"))?;
        let path = dir.path().join(file);
        let name = path
            .as_path()
            .to_fs_name::<GenericFilePath>()
            .map_err(TransportError::io("naming the local socket"))?;
        let listener = ListenerOptions::new()
            .name(name)
            .nonblocking(ListenerNonblockingMode::Accept)
            .create_sync()
            .map_err(TransportError::io("binding the local socket"))?;
        Ok(Self {
            listener,
            _dir: dir,
            path,
        })
    }
}

impl Acceptor for LocalAcceptor {
    fn address(&self) -> PeerAddress {
        PeerAddress::Local {
            path: self.path.clone(),
        }
    }

    fn accept(
        self: Box<Self>,
        peer: u32,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError> {
        let stream = poll_accept(|| self.listener.accept(), peer, deadline)?;
        // Dropping self removes the socket file and its directory; the connection stays.
        stream
            .set_nonblocking(false)
            .map_err(TransportError::io("making the stream blocking"))?;
        Ok(Box::new(
            Framed::new(stream).map_err(TransportError::io("setting socket timeouts"))?,
        ))
    }
}

pub fn connect(path: &Path, deadline: Instant) -> Result<impl Channel, TransportError> {
    let name = path
        .to_fs_name::<GenericFilePath>()
        .map_err(TransportError::io("naming the local socket"))?;
    let stream = loop {
        match Stream::connect(name.clone()) {
            Ok(stream) => break stream,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                if remaining(deadline, "connection").is_err() {
                    return Err(TransportError::io("connecting to the local socket")(e));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    };
    Framed::new(stream).map_err(TransportError::io("setting socket timeouts"))
}
