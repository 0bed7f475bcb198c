//! An anonymous pipe pair to the peer: one pipe each way, created by the measuring side
//! with O_CLOEXEC, so no process inherits them by accident. The peer's two ends reach the
//! peer only: [`PeerAddress::inherited_fds`] names them, and whoever starts the peer
//! clears FD_CLOEXEC on exactly those, in the child, between fork and exec. Once the peer
//! runs, the measuring side closes its copies of the peer's ends, so the peer's death is
//! an end of file (or EPIPE) at once. Messages are framed as on the other streams
//! (`framing`: an 8-byte little-endian length, then the bytes).
//!
//! The ends each side keeps are non-blocking: a read or write that cannot proceed waits in
//! poll(2), bounded by the deadline, so a stalled reader makes a send time out instead of
//! blocking in write(2).

use crate::address::PeerAddress;
use crate::contract::{Acceptor, Channel};
use crate::error::TransportError;
use crate::framing::{Framed, TimedStream};
use crate::platform::ensure_alive;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// A descriptor the peer inherits is never 0, 1 or 2: those are the child's stdio, which
/// the spawner replaces before exec.
const LOWEST_INHERITED_FD: RawFd = 3;

pub struct PipeAcceptor {
    /// Ours: the read end of peer -> us, the write end of us -> peer.
    read: OwnedFd,
    write: OwnedFd,
    /// The peer's: closed in `accept`, once the peer has inherited them.
    peer_read: OwnedFd,
    peer_write: OwnedFd,
}

impl PipeAcceptor {
    pub fn create() -> Result<Self, TransportError> {
        let (peer_read, write) = pipe().map_err(TransportError::io("creating a pipe"))?;
        let (read, peer_write) = pipe().map_err(TransportError::io("creating a pipe"))?;
        Ok(Self {
            read,
            write,
            peer_read,
            peer_write,
        })
    }
}

impl Acceptor for PipeAcceptor {
    fn address(&self) -> PeerAddress {
        PeerAddress::Pipe {
            read_fd: self.peer_read.as_raw_fd(),
            write_fd: self.peer_write.as_raw_fd(),
        }
    }

    fn accept(
        self: Box<Self>,
        peer: u32,
        _deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError> {
        let Self {
            read,
            write,
            peer_read,
            peer_write,
        } = *self;
        // The peer has its own copies (it was started with them); with ours closed, the
        // peer is the only reader and writer at its ends, and its death shows at once.
        drop(peer_read);
        drop(peer_write);
        ensure_alive(peer, "before the channel was set up")?;
        Ok(Box::new(framed(read, write)?))
    }
}

/// The peer's side: takes over the two descriptors it inherited.
pub fn connect(read_fd: RawFd, write_fd: RawFd) -> Result<impl Channel, TransportError> {
    if read_fd == write_fd {
        return Err(TransportError::Corrupt(format!(
            "the pipe's two ends are one descriptor, {read_fd}"
        )));
    }
    check_inherited(read_fd, libc::O_RDONLY)?;
    check_inherited(write_fd, libc::O_WRONLY)?;
    // SAFETY: both are open pipe ends of the right direction (checked above), handed to
    // this process for this channel alone; nothing else in it owns them.
    let (read, write) = unsafe {
        (
            OwnedFd::from_raw_fd(read_fd),
            OwnedFd::from_raw_fd(write_fd),
        )
    };
    for fd in [&read, &write] {
        // Processes this peer starts must not keep the channel open.
        set_fd_flag(
            fd.as_raw_fd(),
            libc::F_GETFD,
            libc::F_SETFD,
            libc::FD_CLOEXEC,
        )
        .map_err(TransportError::io(
            "setting FD_CLOEXEC on an inherited pipe",
        ))?;
    }
    framed(read, write)
}

/// Refuses a descriptor that is not an open pipe end opened for `access`.
fn check_inherited(fd: RawFd, access: libc::c_int) -> Result<(), TransportError> {
    let corrupt = |why: String| TransportError::Corrupt(format!("descriptor {fd}: {why}"));
    if fd < LOWEST_INHERITED_FD {
        return Err(corrupt("is stdio, not an inherited pipe".into()));
    }
    // SAFETY: F_GETFL and fstat only read the descriptor table and the inode.
    let (flags, stat) = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        let mut stat: libc::stat = std::mem::zeroed();
        let stat_ok = libc::fstat(fd, &mut stat) == 0;
        (flags, stat_ok.then_some(stat))
    };
    if flags < 0 {
        return Err(corrupt(format!(
            "was not inherited ({})",
            io::Error::last_os_error()
        )));
    }
    match stat {
        Some(stat) if stat.st_mode & libc::S_IFMT == libc::S_IFIFO => {}
        _ => return Err(corrupt("is not a pipe".into())),
    }
    if flags & libc::O_ACCMODE != access {
        return Err(corrupt("is the pipe's other end".into()));
    }
    Ok(())
}

fn framed(read: OwnedFd, write: OwnedFd) -> Result<Framed<PipeStream>, TransportError> {
    for fd in [&read, &write] {
        set_fd_flag(
            fd.as_raw_fd(),
            libc::F_GETFL,
            libc::F_SETFL,
            libc::O_NONBLOCK,
        )
        .map_err(TransportError::io("making a pipe end non-blocking"))?;
    }
    Framed::new(PipeStream {
        read,
        write,
        read_timeout: Duration::ZERO,
        write_timeout: Duration::ZERO,
        read_waits_first: false,
    })
    .map_err(TransportError::io("setting pipe timeouts"))
}

/// A pipe in each direction, read and written as one stream; each wait for readiness is
/// bounded by the timeout `Framed` sets.
pub struct PipeStream {
    read: OwnedFd,
    write: OwnedFd,
    read_timeout: Duration,
    write_timeout: Duration,
    /// The last read had to wait for its bytes (and did not fill its buffer): the next
    /// one waits for readiness first. In a ping-pong every read must wait, and trying the
    /// read first cost one more system call per message (read, poll, read), about 5 % of
    /// a 45 us round trip of 200 B on a 2-vCPU VM.
    read_waits_first: bool,
}

impl Read for PipeStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let fd = self.read.as_raw_fd();
        let len = buf.len();
        let wait_first = self.read_waits_first;
        // SAFETY: `buf` is valid for writes of its length.
        let (got, waited) = io_loop(fd, libc::POLLIN, self.read_timeout, wait_first, || unsafe {
            libc::read(fd, buf.as_mut_ptr().cast(), len)
        })?;
        // A read that filled its buffer may well find more bytes waiting: try the next
        // one first again.
        self.read_waits_first = waited && got < len;
        Ok(got)
    }
}

impl Write for PipeStream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let fd = self.write.as_raw_fd();
        // SAFETY: `data` is valid for reads of its length.
        io_loop(fd, libc::POLLOUT, self.write_timeout, false, || unsafe {
            libc::write(fd, data.as_ptr().cast(), data.len())
        })
        .map(|(written, _)| written)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TimedStream for PipeStream {
    fn set_read_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.read_timeout = timeout;
        Ok(())
    }
    fn set_write_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.write_timeout = timeout;
        Ok(())
    }
}

/// Tries `op` on non-blocking `fd` (after waiting up to `timeout` for `events`, when
/// `wait_first`); when it would block, waits up to `timeout` and tries once more.
/// `TimedOut` when the wait ran out (the caller checks its deadline). Also says whether
/// it waited.
fn io_loop(
    fd: RawFd,
    events: libc::c_short,
    timeout: Duration,
    wait_first: bool,
    mut op: impl FnMut() -> libc::ssize_t,
) -> io::Result<(usize, bool)> {
    if wait_first {
        wait_for(fd, events, timeout)?;
    }
    let mut waited = wait_first;
    loop {
        let n = op();
        if n >= 0 {
            return Ok((n as usize, waited));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock if !waited => {
                wait_for(fd, events, timeout)?;
                waited = true;
            }
            io::ErrorKind::WouldBlock => return Err(io::ErrorKind::TimedOut.into()),
            _ => return Err(e),
        }
    }
}

/// poll(2) on one descriptor; readiness, hang-up and error all return Ok (the next read or
/// write tells which), an expired wait returns Ok too (the retry then says WouldBlock).
fn wait_for(fd: RawFd, events: libc::c_short, timeout: Duration) -> io::Result<()> {
    let mut poll_fd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // Round up, so a wait is never a busy loop of zero-millisecond polls.
    let ms = timeout
        .as_nanos()
        .div_ceil(1_000_000)
        .clamp(1, i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd.
    match unsafe { libc::poll(&mut poll_fd, 1, ms) } {
        n if n >= 0 => Ok(()),
        _ => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            }
        }
    }
}

/// A pipe whose two ends have O_CLOEXEC and are numbered 3 or above: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just opened and are owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(read)?, above_stdio(write)?))
}

/// `fd` itself when it is 3 or above, else a close-on-exec duplicate that is (the original
/// is closed when dropped).
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() >= LOWEST_INHERITED_FD {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor or -1.
    let dup = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, LOWEST_INHERITED_FD) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

/// Sets `flag` in the flags read by `get` and written by `set` (F_GETFD/F_SETFD or
/// F_GETFL/F_SETFL).
fn set_fd_flag(fd: RawFd, get: libc::c_int, set: libc::c_int, flag: libc::c_int) -> io::Result<()> {
    // SAFETY: fcntl with integer arguments on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, get);
        if flags < 0 || libc::fcntl(fd, set, flags | flag) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream() -> (PipeStream, OwnedFd) {
        let (read, theirs) = pipe().unwrap();
        let (_, write) = pipe().unwrap();
        set_fd_flag(
            read.as_raw_fd(),
            libc::F_GETFL,
            libc::F_SETFL,
            libc::O_NONBLOCK,
        )
        .unwrap();
        let stream = PipeStream {
            read,
            write,
            read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(5),
            read_waits_first: false,
        };
        (stream, theirs)
    }

    /// A read that had to wait makes the next one wait for readiness first; one that
    /// fills its buffer (more may be waiting) makes the next one try first again. Either
    /// way every byte arrives, in order.
    #[test]
    fn a_read_that_had_to_wait_makes_the_next_one_wait_first() {
        let (mut stream, theirs) = stream();
        let writer = std::thread::spawn(move || {
            let mut theirs = std::fs::File::from(theirs);
            std::thread::sleep(Duration::from_millis(50));
            theirs.write_all(b"abc").unwrap();
            std::thread::sleep(Duration::from_millis(50));
            theirs.write_all(b"defgh").unwrap();
        });
        let mut buf = [0u8; 8];
        assert_eq!(stream.read(&mut buf).unwrap(), 3);
        assert!(stream.read_waits_first, "the first read waited");
        let mut exact = [0u8; 5];
        assert_eq!(stream.read(&mut exact).unwrap(), 5);
        assert_eq!(&exact, b"defgh");
        assert!(
            !stream.read_waits_first,
            "a full buffer: try first next time"
        );
        writer.join().unwrap();
        // The writer is gone: the end of the stream, at once, whichever way is tried.
        assert_eq!(stream.read(&mut buf).unwrap(), 0);
    }
}
