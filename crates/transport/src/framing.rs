//! Whole messages over a byte stream (TCP, local socket): an 8-byte little-endian length,
//! then the bytes. The per-call socket timeout is lowered only as a deadline nears, so the
//! common case costs no extra system call.

use crate::TransportError;
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// A stream whose blocking calls can be bounded.
pub trait TimedStream: Read + Write + Send {
    fn set_read_timeout(&mut self, timeout: Duration) -> io::Result<()>;
    fn set_write_timeout(&mut self, timeout: Duration) -> io::Result<()>;
}

/// Longest a single blocking call may wait before the deadline is checked again.
const MAX_CALL_WAIT: Duration = Duration::from_millis(250);
/// Messages up to this size are sent with their header in one write.
const COALESCE_LIMIT: usize = 64 * 1024;

pub struct Framed<S> {
    stream: S,
    read_timeout: Duration,
    write_timeout: Duration,
    scratch: Vec<u8>,
}

impl<S: TimedStream> Framed<S> {
    pub fn new(mut stream: S) -> io::Result<Self> {
        stream.set_read_timeout(MAX_CALL_WAIT)?;
        stream.set_write_timeout(MAX_CALL_WAIT)?;
        Ok(Self {
            stream,
            read_timeout: MAX_CALL_WAIT,
            write_timeout: MAX_CALL_WAIT,
            scratch: Vec::new(),
        })
    }

    fn write_all(&mut self, mut data: &[u8], deadline: Instant) -> Result<(), TransportError> {
        while !data.is_empty() {
            let stream = &mut self.stream;
            arm(deadline, "progress sending", &mut self.write_timeout, |t| {
                stream
                    .set_write_timeout(t)
                    .map_err(TransportError::io("setting the send timeout"))
            })?;
            match self.stream.write(data) {
                Ok(0) => return Err(TransportError::Closed),
                Ok(n) => data = &data[n..],
                Err(e) if is_retry(&e) => continue,
                Err(e) => return Err(stream_error(e, "sending")),
            }
        }
        Ok(())
    }

    fn read_exact(&mut self, mut buf: &mut [u8], deadline: Instant) -> Result<(), TransportError> {
        while !buf.is_empty() {
            let stream = &mut self.stream;
            arm(deadline, "reply", &mut self.read_timeout, |t| {
                stream
                    .set_read_timeout(t)
                    .map_err(TransportError::io("setting the receive timeout"))
            })?;
            match self.stream.read(buf) {
                Ok(0) => return Err(TransportError::Closed),
                Ok(n) => buf = &mut buf[n..],
                Err(e) if is_retry(&e) => continue,
                Err(e) => return Err(stream_error(e, "receiving")),
            }
        }
        Ok(())
    }
}

impl<S: TimedStream> crate::Channel for Framed<S> {
    fn send(&mut self, message: &[u8], deadline: Instant) -> Result<(), TransportError> {
        let header = (message.len() as u64).to_le_bytes();
        if message.len() <= COALESCE_LIMIT {
            let mut frame = std::mem::take(&mut self.scratch);
            frame.clear();
            frame.extend_from_slice(&header);
            frame.extend_from_slice(message);
            let result = self.write_all(&frame, deadline);
            self.scratch = frame;
            result
        } else {
            self.write_all(&header, deadline)?;
            self.write_all(message, deadline)
        }
    }

    fn recv(
        &mut self,
        buf: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let mut header = [0u8; 8];
        self.read_exact(&mut header, deadline)?;
        let announced = u64::from_le_bytes(header);
        if announced > limit as u64 {
            return Err(TransportError::TooLarge { announced, limit });
        }
        buf.resize(announced as usize, 0);
        self.read_exact(buf, deadline)
    }
}

/// Bounds the next blocking call by what is left before `deadline` (at most
/// MAX_CALL_WAIT); `set` is called only when that differs from `current`.
fn arm(
    deadline: Instant,
    what: &'static str,
    current: &mut Duration,
    set: impl FnOnce(Duration) -> Result<(), TransportError>,
) -> Result<(), TransportError> {
    let call_wait = remaining(deadline, what)?.min(MAX_CALL_WAIT);
    if call_wait != *current {
        set(call_wait)?;
        *current = call_wait;
    }
    Ok(())
}

/// Time left before `deadline`, or the timeout error naming what did not arrive.
pub fn remaining(deadline: Instant, what: &'static str) -> Result<Duration, TransportError> {
    let now = Instant::now();
    if now >= deadline {
        return Err(TransportError::Timeout { what });
    }
    Ok((deadline - now).max(Duration::from_millis(1)))
}

/// Polls a non-blocking `accept` until it yields a connection, the deadline passes, or
/// process `peer` dies first.
pub fn poll_accept<T>(
    mut accept: impl FnMut() -> io::Result<T>,
    peer: u32,
    deadline: Instant,
) -> Result<T, TransportError> {
    loop {
        match accept() {
            Ok(connection) => return Ok(connection),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                remaining(deadline, "connection from the peer")?;
                crate::platform::ensure_alive(peer, "before it connected")?;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(TransportError::io("accepting the peer")(e)),
        }
    }
}

fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn stream_error(e: io::Error, context: &'static str) -> TransportError {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionAborted => TransportError::Closed,
        _ => TransportError::Io { context, source: e },
    }
}
