//! Whole messages over a byte stream (TCP, local socket, pipe): an 8-byte little-endian
//! length, then the bytes. The per-call socket timeout is lowered only as a deadline nears,
//! so the common case costs no extra system call; and a receive reads a little ahead, so
//! a small message's header and body come in one read.

use crate::error::TransportError;
use crate::wait::{is_retry, remaining};
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// A stream whose blocking calls can be bounded.
pub trait TimedStream: Read + Write + Send {
    fn set_read_timeout(&mut self, timeout: Duration) -> io::Result<()>;
    fn set_write_timeout(&mut self, timeout: Duration) -> io::Result<()>;
    /// The socket's pending error (SO_ERROR), taken; `None` where there is none or the
    /// stream cannot tell.
    fn take_pending_error(&mut self) -> Option<io::Error> {
        None
    }
}

/// Longest a single blocking call may wait before the deadline is checked again.
const MAX_CALL_WAIT: Duration = Duration::from_millis(250);
/// Messages up to this size are sent with their header in one write.
const COALESCE_LIMIT: usize = 64 * 1024;
/// Bytes a receive may read beyond what it needs, kept for the next one. Reading the
/// header and then the body took two reads per message, and the second read cost about
/// 2-3 us of a 30 us Unix-stream round trip of 200 B on a 2-vCPU VM (two reads per side).
/// What is read ahead is copied once more, so it is kept small: the rest of a longer
/// message is read straight into its buffer.
const READ_AHEAD: usize = 4096;

pub struct Framed<S> {
    stream: S,
    read_timeout: Duration,
    write_timeout: Duration,
    scratch: Vec<u8>,
    /// Bytes read ahead: `inbox[taken..filled]` have arrived and are not taken yet.
    inbox: Box<[u8]>,
    taken: usize,
    filled: usize,
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
            inbox: vec![0u8; READ_AHEAD].into_boxed_slice(),
            taken: 0,
            filled: 0,
        })
    }

    fn write_all(&mut self, mut data: &[u8], deadline: Instant) -> Result<(), TransportError> {
        // Writes after the first wait for the reader to make room (the kernel's buffer
        // was full), and how many it takes is timing: counting stops after the first,
        // whether or not another comes, so that both cost the counted instructions the
        // same.
        let mut waiting = None;
        while !data.is_empty() {
            let stream = &mut self.stream;
            arm(deadline, "progress sending", &mut self.write_timeout, |t| {
                stream
                    .set_write_timeout(t)
                    .map_err(TransportError::io("setting the send timeout"))
            })?;
            let written = self.stream.write(data);
            waiting.get_or_insert_with(ipc_matrix_count_window::pause);
            match written {
                Ok(0) => return Err(TransportError::Closed),
                Ok(n) => data = &data[n..],
                Err(e) if is_retry(&e) => continue,
                Err(e) => return Err(stream_error(e, "sending")),
            }
        }
        Ok(())
    }

    /// Fills `buf` from what was read ahead, then from the stream: through the inbox
    /// while what is missing is shorter than it, straight into `buf` otherwise (never
    /// reading past `buf`'s end then).
    fn read_exact(&mut self, buf: &mut [u8], deadline: Instant) -> Result<(), TransportError> {
        let mut done = 0;
        // Reads after the first wait for what had not arrived yet, and how many it takes
        // is timing: counting stops after the first read, whether or not another comes,
        // so that both cost the counted instructions the same.
        let mut waiting = None;
        while done < buf.len() {
            let missing = buf.len() - done;
            if self.taken == self.filled {
                if missing >= self.inbox.len() {
                    let into = BufferOf::Message(&mut buf[done..]);
                    done += self.read_some(into, deadline, &mut waiting)?;
                    continue;
                }
                self.filled = self.read_some(BufferOf::Inbox, deadline, &mut waiting)?;
                self.taken = 0;
            }
            let n = missing.min(self.filled - self.taken);
            buf[done..done + n].copy_from_slice(&self.inbox[self.taken..self.taken + n]);
            self.taken += n;
            done += n;
        }
        Ok(())
    }

    /// One read that returns at least one byte (retried while it would block or was
    /// interrupted), bounded by `deadline`. Counting stops in `waiting` after the first
    /// read: a retry (its call timed out, or was interrupted) is waiting too.
    fn read_some(
        &mut self,
        into: BufferOf<'_>,
        deadline: Instant,
        waiting: &mut Option<ipc_matrix_count_window::Pause>,
    ) -> Result<usize, TransportError> {
        let buf = match into {
            BufferOf::Inbox => &mut self.inbox[..],
            BufferOf::Message(buf) => buf,
        };
        loop {
            let stream = &mut self.stream;
            arm(deadline, "reply", &mut self.read_timeout, |t| {
                stream
                    .set_read_timeout(t)
                    .map_err(TransportError::io("setting the receive timeout"))
            })?;
            let read = self.stream.read(buf);
            waiting.get_or_insert_with(ipc_matrix_count_window::pause);
            match read {
                Ok(0) => return Err(TransportError::Closed),
                Ok(n) => return Ok(n),
                Err(e) if is_retry(&e) => continue,
                Err(e) => return Err(stream_error(e, "receiving")),
            }
        }
    }
}

/// Where a read goes: the inbox, or the rest of the message being received.
enum BufferOf<'a> {
    Inbox,
    Message(&'a mut [u8]),
}

impl<S: TimedStream> crate::contract::Channel for Framed<S> {
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

    /// A TCP connection whose end was closed (its FIN read) and then reset: bytes of ours
    /// reached the other side after it had closed, and its kernel answered with a reset,
    /// which sets the socket's error (EPIPE, from CLOSE_WAIT) but no read reports.
    fn reset_after_close(&mut self) -> bool {
        self.stream.take_pending_error().is_some_and(|e| {
            matches!(
                e.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            )
        })
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

fn stream_error(e: io::Error, context: &'static str) -> TransportError {
    match e.kind() {
        io::ErrorKind::ConnectionReset => TransportError::Reset,
        io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionAborted => TransportError::Closed,
        _ => TransportError::Io { context, source: e },
    }
}

#[cfg(test)]
mod scripted {
    use super::*;
    use crate::contract::Channel;
    use std::collections::VecDeque;

    /// A stream whose reads return what the test scripted (then end of file) and whose
    /// writes are recorded, or fail as scripted.
    #[derive(Default)]
    struct Scripted {
        reads: VecDeque<io::Result<Vec<u8>>>,
        write_errors: VecDeque<io::ErrorKind>,
        writes: Vec<Vec<u8>>,
        /// Nothing ever arrives: every read would block.
        silent: bool,
        /// Every read timeout set, in order.
        read_timeouts: Vec<Duration>,
    }

    impl Read for Scripted {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.silent {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            match self.reads.pop_front() {
                None => Ok(0),
                Some(Err(e)) => Err(e),
                // As a socket does: as much as fits, the rest stays for the next read.
                Some(Ok(mut bytes)) => {
                    let n = bytes.len().min(buf.len());
                    buf[..n].copy_from_slice(&bytes[..n]);
                    if n < bytes.len() {
                        self.reads.push_front(Ok(bytes.split_off(n)));
                    }
                    Ok(n)
                }
            }
        }
    }

    impl Write for Scripted {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if let Some(kind) = self.write_errors.pop_front() {
                return Err(kind.into());
            }
            self.writes.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl TimedStream for Scripted {
        fn set_read_timeout(&mut self, timeout: Duration) -> io::Result<()> {
            self.read_timeouts.push(timeout);
            Ok(())
        }
        fn set_write_timeout(&mut self, _: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    fn deadline() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    fn framed(stream: Scripted) -> Framed<Scripted> {
        Framed::new(stream).unwrap()
    }

    /// Up to COALESCE_LIMIT bytes, a message and its header go out in one write; a larger
    /// one as the header, then the body.
    #[test]
    fn a_message_up_to_64_kib_goes_out_with_its_header_in_one_write() {
        for len in [0, 1, 100, COALESCE_LIMIT] {
            let mut f = framed(Scripted::default());
            let message = vec![0x5a; len];
            f.send(&message, deadline()).unwrap();
            let mut wire = (len as u64).to_le_bytes().to_vec();
            wire.extend_from_slice(&message);
            assert_eq!(f.stream.writes, vec![wire], "{len} bytes");
        }
        let mut f = framed(Scripted::default());
        let message = vec![0xa5; COALESCE_LIMIT + 1];
        f.send(&message, deadline()).unwrap();
        let header = ((COALESCE_LIMIT + 1) as u64).to_le_bytes().to_vec();
        assert_eq!(f.stream.writes, vec![header, message]);
    }

    /// One read takes a small message's header and body together, and what it read of
    /// the next message is that message's start; the rest of a message longer than the
    /// read-ahead is read straight into its buffer, never past its end.
    #[test]
    fn a_receive_reads_ahead_and_keeps_what_belongs_to_the_next_message() {
        let frame = |body: &[u8]| {
            let mut wire = (body.len() as u64).to_le_bytes().to_vec();
            wire.extend_from_slice(body);
            wire
        };
        let long = vec![0x3c; READ_AHEAD * 2 + 5];
        let mut wire = frame(b"first");
        wire.extend(frame(b"second"));
        wire.extend(frame(&long));
        wire.extend(frame(b"last"));
        let mut stream = Scripted::default();
        stream.reads.push_back(Ok(wire));
        let mut f = framed(stream);
        let mut buf = Vec::new();
        let mut received = Vec::new();
        let mut reads_left = Vec::new();
        for _ in 0..4 {
            f.recv(&mut buf, long.len(), deadline()).unwrap();
            received.push(buf.clone());
            reads_left.push(f.stream.reads.len());
        }
        assert_eq!(
            received,
            vec![
                b"first".to_vec(),
                b"second".to_vec(),
                long,
                b"last".to_vec()
            ]
        );
        // The first read filled the inbox (the first two messages and the long one's
        // start); the long one's rest came in one read of exactly what it lacked, so the
        // last message was still on the stream.
        assert_eq!(reads_left, vec![1, 1, 1, 0]);
        assert!(matches!(
            f.recv(&mut buf, 10, deadline()),
            Err(TransportError::Closed)
        ));
    }

    /// Would-block, timed-out and interrupted calls are tried again; a reset or a broken
    /// pipe is the peer gone at once; any other error is an I/O error, at once.
    #[test]
    fn read_errors_are_retried_or_end_the_read_by_their_kind() {
        let header = 3u64.to_le_bytes().to_vec();
        let mut stream = Scripted::default();
        for kind in [
            io::ErrorKind::WouldBlock,
            io::ErrorKind::TimedOut,
            io::ErrorKind::Interrupted,
        ] {
            stream.reads.push_back(Err(kind.into()));
        }
        stream.reads.push_back(Ok(header.clone()));
        stream
            .reads
            .push_back(Err(io::ErrorKind::Interrupted.into()));
        stream.reads.push_back(Ok(b"abc".to_vec()));
        let mut buf = Vec::new();
        framed(stream).recv(&mut buf, 10, deadline()).unwrap();
        assert_eq!(buf, b"abc");
        for (kind, closed) in [
            (io::ErrorKind::ConnectionReset, true),
            (io::ErrorKind::BrokenPipe, true),
            (io::ErrorKind::UnexpectedEof, true),
            (io::ErrorKind::ConnectionAborted, true),
            (io::ErrorKind::PermissionDenied, false),
        ] {
            let mut stream = Scripted::default();
            stream.reads.push_back(Err(kind.into()));
            let start = Instant::now();
            let result = framed(stream).recv(&mut Vec::new(), 10, deadline());
            match result {
                Err(e) if closed && e.is_closed() => {}
                Err(TransportError::Io {
                    context: "receiving",
                    ..
                }) if !closed => {}
                other => panic!("{kind:?}: {other:?}"),
            }
            assert!(start.elapsed() < Duration::from_secs(1), "{kind:?}");
        }
    }

    /// A blocking call waits at most MAX_CALL_WAIT, and less as the deadline nears: the
    /// socket's timeout is lowered to what is left (and set only when it changes), so a
    /// receive never overruns its deadline by a whole MAX_CALL_WAIT.
    #[test]
    fn the_call_timeout_follows_the_deadline() {
        let stream = Scripted {
            silent: true,
            ..Scripted::default()
        };
        let mut f = framed(stream);
        assert_eq!(f.stream.read_timeouts, vec![MAX_CALL_WAIT]);
        let start = Instant::now();
        let result = f.recv(&mut Vec::new(), 10, start + Duration::from_millis(50));
        assert!(
            matches!(result, Err(TransportError::Timeout { what: "reply" })),
            "{result:?}"
        );
        let lowered = &f.stream.read_timeouts[1..];
        assert!(!lowered.is_empty(), "the timeout was never lowered");
        assert!(lowered[0] <= Duration::from_millis(50), "{lowered:?}");
        assert!(
            lowered.windows(2).all(|w| w[0] != w[1]),
            "set again unchanged: {lowered:?}"
        );
    }

    #[test]
    fn write_errors_are_retried_or_end_the_send_by_their_kind() {
        let mut stream = Scripted::default();
        stream.write_errors.extend([
            io::ErrorKind::WouldBlock,
            io::ErrorKind::TimedOut,
            io::ErrorKind::Interrupted,
        ]);
        let mut f = framed(stream);
        f.send(b"abc", deadline()).unwrap();
        assert_eq!(f.stream.writes, vec![b"\x03\0\0\0\0\0\0\0abc".to_vec()]);
        for (kind, closed) in [
            (io::ErrorKind::BrokenPipe, true),
            (io::ErrorKind::ConnectionReset, true),
            (io::ErrorKind::PermissionDenied, false),
        ] {
            let mut stream = Scripted::default();
            stream.write_errors.push_back(kind);
            let start = Instant::now();
            match framed(stream).send(b"abc", deadline()) {
                Err(e) if closed && e.is_closed() => {}
                Err(TransportError::Io {
                    context: "sending", ..
                }) if !closed => {}
                other => panic!("{kind:?}: {other:?}"),
            }
            assert!(start.elapsed() < Duration::from_secs(1), "{kind:?}");
        }
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use crate::contract::Channel;
    use proptest::prelude::*;
    use proptest::test_runner::Config;
    use std::os::unix::net::UnixStream;

    impl TimedStream for UnixStream {
        fn set_read_timeout(&mut self, t: Duration) -> io::Result<()> {
            UnixStream::set_read_timeout(self, Some(t))
        }
        fn set_write_timeout(&mut self, t: Duration) -> io::Result<()> {
            UnixStream::set_write_timeout(self, Some(t))
        }
    }

    fn deadline() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    /// A receiving end fed `wire` (then closed) by a thread of its own.
    fn fed(wire: Vec<u8>) -> (Framed<UnixStream>, std::thread::JoinHandle<()>) {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = theirs.write_all(&wire);
        });
        (Framed::new(ours).unwrap(), writer)
    }

    /// What the receiver must make of `wire`, frame by frame: each message, then the
    /// error that ends it (`None`: the limit refused a length; `Some(())`: closed).
    fn model(wire: &[u8], limit: usize) -> (Vec<Vec<u8>>, bool) {
        let mut messages = Vec::new();
        let mut rest = wire;
        loop {
            let Some((header, body)) = rest.split_first_chunk::<8>() else {
                return (messages, true);
            };
            let announced = u64::from_le_bytes(*header);
            if announced > limit as u64 {
                return (messages, false);
            }
            if (body.len() as u64) < announced {
                return (messages, true);
            }
            let (message, after) = body.split_at(announced as usize);
            messages.push(message.to_vec());
            rest = after;
        }
    }

    /// Frames as a sender would write them, some with a lying length, cut anywhere, with
    /// garbage after; or bytes with no structure at all.
    fn wires() -> impl Strategy<Value = Vec<u8>> {
        let framed = (
            prop::collection::vec(
                (
                    prop::collection::vec(any::<u8>(), 0..600),
                    prop::option::weighted(0.1, any::<u64>()),
                ),
                0..8,
            ),
            any::<prop::sample::Index>(),
            prop::collection::vec(any::<u8>(), 0..16),
        )
            .prop_map(|(frames, cut, garbage)| {
                let mut wire = Vec::new();
                for (body, lie) in frames {
                    let announced = lie.unwrap_or(body.len() as u64);
                    wire.extend_from_slice(&announced.to_le_bytes());
                    wire.extend_from_slice(&body);
                }
                let keep = if wire.is_empty() {
                    0
                } else {
                    cut.index(wire.len() + 1)
                };
                wire.truncate(keep);
                wire.extend_from_slice(&garbage);
                wire
            });
        prop_oneof![3 => framed, 1 => prop::collection::vec(any::<u8>(), 0..4096)]
    }

    proptest! {
        #![proptest_config(Config {
            cases: 256,
            failure_persistence: None,
            ..Config::default()
        })]

        /// Any length prefix: over the limit it is refused before anything is allocated;
        /// otherwise exactly that many bytes are the message, or the stream ends short.
        #[test]
        fn any_length_prefix(
            announced in prop_oneof![any::<u64>(), 0u64..2048, Just(u64::MAX), 990u64..1010],
            body in prop::collection::vec(any::<u8>(), 0..2048),
            limit in prop_oneof![0usize..1500, Just(1000)],
        ) {
            let mut wire = announced.to_le_bytes().to_vec();
            wire.extend_from_slice(&body);
            let (mut framed, writer) = fed(wire);
            let mut buf = Vec::new();
            let result = framed.recv(&mut buf, limit, deadline());
            writer.join().unwrap();
            if announced > limit as u64 {
                prop_assert!(
                    matches!(result, Err(TransportError::TooLarge { announced: a, limit: l }) if a == announced && l == limit),
                    "{result:?}"
                );
                prop_assert_eq!(buf.capacity(), 0);
            } else if announced as usize <= body.len() {
                prop_assert!(result.is_ok(), "{result:?}");
                prop_assert_eq!(&buf[..], &body[..announced as usize]);
            } else {
                prop_assert!(matches!(result, Err(TransportError::Closed)), "{result:?}");
            }
        }

        /// Any byte stream: the messages received are exactly those its frames hold, in
        /// order, none over the limit, and it ends with TooLarge or Closed, never a panic.
        #[test]
        fn any_byte_stream(wire in wires(), limit in prop_oneof![0usize..700, Just(4096)]) {
            let (expected, ends_closed) = model(&wire, limit);
            let (mut framed, writer) = fed(wire);
            let mut received = Vec::new();
            let mut buf = Vec::new();
            let end = loop {
                match framed.recv(&mut buf, limit, deadline()) {
                    Ok(()) => {
                        prop_assert!(buf.len() <= limit);
                        received.push(buf.clone());
                    }
                    Err(e) => break e,
                }
            };
            writer.join().unwrap();
            prop_assert_eq!(received, expected);
            if ends_closed {
                prop_assert!(matches!(end, TransportError::Closed), "{end:?}");
            } else {
                prop_assert!(matches!(end, TransportError::TooLarge { .. }), "{end:?}");
            }
        }

    }

    proptest! {
        // Fewer cases: some messages are 64 KiB, slow under QEMU.
        #![proptest_config(Config {
            cases: 128,
            failure_persistence: None,
            ..Config::default()
        })]

        /// Whatever is sent is received whole and in order, small messages (header and
        /// body in one write) and large ones (written apart) alike.
        #[test]
        fn what_is_sent_is_received(
            messages in prop::collection::vec(
                prop_oneof![
                    8 => prop::collection::vec(any::<u8>(), 0..2000),
                    1 => prop::collection::vec(any::<u8>(), COALESCE_LIMIT - 2..COALESCE_LIMIT + 3),
                ],
                0..12,
            ),
        ) {
            let (ours, theirs) = UnixStream::pair().unwrap();
            let to_send = messages.clone();
            let sender = std::thread::spawn(move || {
                let mut framed = Framed::new(theirs).unwrap();
                for message in &to_send {
                    framed.send(message, deadline()).unwrap();
                }
            });
            let mut framed = Framed::new(ours).unwrap();
            let mut buf = Vec::new();
            for message in &messages {
                framed.recv(&mut buf, COALESCE_LIMIT + 3, deadline()).unwrap();
                prop_assert_eq!(&buf, message);
            }
            sender.join().unwrap();
            prop_assert!(matches!(framed.recv(&mut buf, 1, deadline()), Err(TransportError::Closed)));
        }
    }
}
