//! The byte-stream and UDP probes: ping-pong of the cell's payload over a stream (a pipe
//! each way, a socket pair) or one datagram each way.

use super::timing::*;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A reader and a writer used as one stream (a pipe each way).
pub(super) struct Duplex<R, W>(pub(super) R, pub(super) W);

impl<R: Read, W> Read for Duplex<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl<R, W: Write> Write for Duplex<R, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.1.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.1.flush()
    }
}

/// Ping-pong of `len` bytes over a byte stream: write it all, read it all back; the
/// responder reads it all, then writes it back. No framing: both sides know the length.
/// Closing drops our ends: the responder reads the end of the stream and stops.
pub(super) fn stream_ping_pong<R, W, S>(
    len: usize,
    peer_cpu: usize,
    (mut rx, mut tx): (R, W),
    mut theirs: S,
) -> Result<OpenProbe, ProbeError>
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
    S: Read + Write + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let responder = responder(peer_cpu, move || {
        let mut buf = vec![0u8; len];
        loop {
            // Between the blocks of a cell, as long as the cell takes: each read waits
            // at most RESPONDER_WAKE, and then goes on unless the probe is closed.
            let mut got = 0;
            while got < len {
                match theirs.read(&mut buf[got..]) {
                    // The measuring side closed its end: done.
                    Ok(0) => return Ok(()),
                    Ok(n) => got += n,
                    Err(e) if waits_on(&e, &stopped, "read")? => {}
                    Err(_) => return Ok(()),
                }
            }
            theirs
                .write_all(&buf)
                .map_err(|source| ProbeError::Responder {
                    doing: "write",
                    source,
                })?;
        }
    });
    let request = vec![0x5au8; len];
    let mut reply = vec![0u8; len];
    Ok(OpenProbe {
        responder,
        one: Box::new(move |_| {
            tx.write_all(&request)
                .map_err(|source| ProbeError::RoundTrip {
                    doing: "write",
                    source,
                })?;
            rx.read_exact(&mut reply)
                .map_err(|source| ProbeError::RoundTrip {
                    doing: "read",
                    source,
                })
        }),
        stop: Box::new(move || stop.store(true, Ordering::Relaxed)),
    })
}

/// What an idle responder does when a read failed with `e`: waits on (`true`) when it
/// only gave up at the responder's wake-up timeout while the probe is open, stops
/// (`false`) once the probe is closed, and fails on anything else.
pub(super) fn waits_on(
    e: &std::io::Error,
    stopped: &AtomicBool,
    doing: &'static str,
) -> Result<bool, ProbeError> {
    match ipc_matrix_transport::is_retry(e) {
        true => Ok(!stopped.load(Ordering::Relaxed)),
        false => Err(ProbeError::Responder {
            doing,
            source: again(e),
        }),
    }
}

/// `e` once more, for an error to keep (an `io::Error` is not `Clone`): the same OS
/// error, or one of the same kind and text.
fn again(e: &std::io::Error) -> std::io::Error {
    match e.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(e.kind(), e.to_string()),
    }
}

/// Ping-pong of one datagram each way; closing sends the empty datagram that says
/// goodbye.
pub(super) fn udp_ping_pong(len: usize, peer_cpu: usize) -> Result<OpenProbe, ProbeError> {
    let ours = std::net::UdpSocket::bind("127.0.0.1:0").map_err(ProbeError::Setup)?;
    let theirs = std::net::UdpSocket::bind("127.0.0.1:0").map_err(ProbeError::Setup)?;
    ours.connect(theirs.local_addr().map_err(ProbeError::Setup)?)
        .map_err(ProbeError::Setup)?;
    theirs
        .connect(ours.local_addr().map_err(ProbeError::Setup)?)
        .map_err(ProbeError::Setup)?;
    for (s, read) in [(&ours, CALL_TIMEOUT), (&theirs, RESPONDER_WAKE)] {
        s.set_read_timeout(Some(read)).map_err(ProbeError::Setup)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let responder = responder(peer_cpu, move || {
        let mut buf = vec![0u8; len.max(1)];
        loop {
            // As the stream responder: idle between blocks for as long as the cell takes.
            let got = match theirs.recv(&mut buf) {
                Ok(got) => got,
                Err(e) if waits_on(&e, &stopped, "recv")? => continue,
                Err(_) => return Ok(()),
            };
            // An empty datagram says goodbye.
            if got == 0 {
                return Ok(());
            }
            theirs
                .send(&buf[..got])
                .map_err(|source| ProbeError::Responder {
                    doing: "send",
                    source,
                })?;
        }
    });
    let goodbye = ours.try_clone().map_err(ProbeError::Setup)?;
    let request = vec![0x5au8; len.max(1)];
    let mut reply = vec![0u8; len.max(1)];
    Ok(OpenProbe {
        responder,
        one: Box::new(move |_| {
            ours.send(&request)
                .map_err(|source| ProbeError::RoundTrip {
                    doing: "send",
                    source,
                })?;
            let got = ours
                .recv(&mut reply)
                .map_err(|source| ProbeError::RoundTrip {
                    doing: "recv",
                    source,
                })?;
            match got == request.len() {
                true => Ok(()),
                false => Err(ProbeError::ShortReply {
                    got,
                    sent: request.len(),
                }),
            }
        }),
        stop: Box::new(move || {
            stop.store(true, Ordering::Relaxed);
            let _ = goodbye.send(&[]);
        }),
    })
}
