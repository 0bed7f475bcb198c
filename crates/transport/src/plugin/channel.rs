//! A library's acceptor and channel: the [`Channel`] and [`Loans`] contract over its
//! calls, every length it gives checked against the room it had.

use super::abi::{monotonic_ns, Acc, Calls, Chan, ErrorBuf, LoanCalls, Named, POISON, TOO_LONG};
use crate::contract::{Channel, Loans};
use crate::error::TransportError;
use crate::stack::StackAcceptor;
use std::time::Instant;

/// A plugin's acceptor, its address read.
pub(super) struct PluginAcceptor {
    pub(super) plugin: Named,
    pub(super) calls: Calls,
    pub(super) acceptor: *mut Acc,
    pub(super) address: String,
}

// SAFETY: an acceptor is used from one thread at a time, as the header asks; nothing
// else holds its pointer.
unsafe impl Send for PluginAcceptor {}

impl StackAcceptor for PluginAcceptor {
    fn address(&self) -> String {
        self.address.clone()
    }

    fn accept(
        mut self: Box<Self>,
        peer: u32,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError> {
        let acceptor = std::mem::replace(&mut self.acceptor, std::ptr::null_mut());
        let mut channel = std::ptr::null_mut();
        let mut error = ErrorBuf::new();
        // SAFETY: the header's accept, which takes the acceptor whatever it returns.
        let status = unsafe {
            (self.calls.accept)(
                acceptor,
                peer,
                monotonic_ns(deadline),
                &mut channel,
                &mut error,
            )
        };
        self.plugin.status("accept", status, &error)?;
        PluginChannel::boxed(self.plugin, self.calls, channel, "accept")
    }
}

impl Drop for PluginAcceptor {
    fn drop(&mut self) {
        if !self.acceptor.is_null() {
            // SAFETY: an acceptor never accepted on; not used again.
            unsafe { (self.calls.drop_acceptor)(self.acceptor) };
        }
    }
}

/// A plugin's channel: the [`Channel`] contract over its calls, every length it gives
/// checked against the room it had.
pub(super) struct PluginChannel {
    pub(super) plugin: Named,
    pub(super) calls: Calls,
    pub(super) channel: *mut Chan,
    /// The open loan's room, and the borrowed message, as the library lent them.
    pub(super) loan: Option<(*mut u8, usize)>,
    pub(super) borrowed: Option<(*const u8, usize)>,
}

// SAFETY: a channel is used from one thread at a time (`&mut self`), as the header asks;
// nothing else holds its pointers.
unsafe impl Send for PluginChannel {}

impl PluginChannel {
    /// The channel `call` gave, refused when it gave none.
    pub(super) fn boxed(
        plugin: Named,
        calls: Calls,
        channel: *mut Chan,
        call: &str,
    ) -> Result<Box<dyn Channel>, TransportError> {
        if channel.is_null() {
            return Err(plugin.lie(&format!("{call} returned IPCM_OK and no channel")));
        }
        Ok(Box::new(PluginChannel {
            plugin,
            calls,
            channel,
            loan: None,
            borrowed: None,
        }))
    }

    fn loan_calls(&self) -> Result<LoanCalls, TransportError> {
        self.calls
            .loans
            .ok_or_else(|| TransportError::Loan("this plugin has no loaned path".into()))
    }
}

impl Channel for PluginChannel {
    fn send(&mut self, message: &[u8], deadline: Instant) -> Result<(), TransportError> {
        // The library's loan and its send may share room: a copying send over an open
        // loan is refused, as iceoryx2 refuses it, so that no message is made of both.
        if self.loan.is_some() {
            return Err(TransportError::Loan(
                "a copying send while a loan is open: commit or cancel it first".into(),
            ));
        }
        let mut error = ErrorBuf::new();
        // SAFETY: the header's send: the message's bytes, valid for the call.
        let status = unsafe {
            (self.calls.send)(
                self.channel,
                message.as_ptr(),
                message.len(),
                monotonic_ns(deadline),
                &mut error,
            )
        };
        self.plugin.status("send", status, &error)
    }

    fn recv(
        &mut self,
        buf: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        // Likewise a copying receive while a message is borrowed: it could take the
        // next message, or the borrowed one's place.
        if self.borrowed.is_some() {
            return Err(TransportError::Loan(
                "a copying receive while a message is borrowed: release it first".into(),
            ));
        }
        // The room is written over before each receive: a library that says it wrote
        // more than it did shows bytes that match nothing it was sent (never the last
        // reply's, which the caller's buffer held), and no byte read is uninitialised.
        buf.clear();
        buf.resize(limit, POISON);
        let mut len = 0usize;
        let mut error = ErrorBuf::new();
        // SAFETY: the header's recv, into the `limit` bytes of `buf`.
        let status = unsafe {
            (self.calls.recv)(
                self.channel,
                buf.as_mut_ptr(),
                limit,
                &mut len,
                monotonic_ns(deadline),
                &mut error,
            )
        };
        if status == TOO_LONG && len > limit {
            return Err(TransportError::TooLarge {
                announced: len as u64,
                limit,
            });
        }
        self.plugin.status("recv", status, &error)?;
        if len > limit {
            return Err(self.plugin.lie(&format!(
                "recv said it wrote {len} bytes into room for {limit}"
            )));
        }
        buf.truncate(len);
        Ok(())
    }

    fn loans(&mut self) -> Option<&mut dyn Loans> {
        if self.calls.loans.is_some() {
            Some(self)
        } else {
            None
        }
    }
}

impl Loans for PluginChannel {
    fn max_loan(&self) -> usize {
        self.calls.loans.map_or(0, |l| l.max_loan)
    }

    fn loan(&mut self, len: usize, deadline: Instant) -> Result<&mut [u8], TransportError> {
        let calls = self.loan_calls()?;
        if self.loan.is_some() {
            return Err(TransportError::Loan("a loan is open already".into()));
        }
        if len > calls.max_loan {
            return Err(TransportError::Loan(format!(
                "a {len}-byte message is longer than a loan ({} bytes)",
                calls.max_loan
            )));
        }
        let mut room = std::ptr::null_mut();
        let mut error = ErrorBuf::new();
        // SAFETY: the header's loan: room for its pointer and its error.
        let status = unsafe {
            (calls.loan)(
                self.channel,
                len,
                monotonic_ns(deadline),
                &mut room,
                &mut error,
            )
        };
        self.plugin.status("loan", status, &error)?;
        if room.is_null() && len > 0 {
            return Err(self.plugin.lie("loan returned IPCM_OK and no room"));
        }
        self.loan = Some((room, len));
        Ok(self.loaned().unwrap_or_default())
    }

    fn loaned(&mut self) -> Option<&mut [u8]> {
        let (room, len) = self.loan?;
        if len == 0 {
            return Some(&mut []);
        }
        // SAFETY: the library lent `len` writable bytes at `room` until commit or cancel,
        // and this borrow of `self` ends before either.
        Some(unsafe { std::slice::from_raw_parts_mut(room, len) })
    }

    fn cancel(&mut self) {
        if let (Some(_), Some(calls)) = (self.loan.take(), self.calls.loans) {
            // SAFETY: the header's cancel, with a loan open.
            unsafe { (calls.cancel)(self.channel) };
        }
    }

    fn commit(&mut self, deadline: Instant) -> Result<(), TransportError> {
        let calls = self.loan_calls()?;
        if self.loan.take().is_none() {
            return Err(TransportError::Loan("commit with no loan open".into()));
        }
        let mut error = ErrorBuf::new();
        // SAFETY: the header's commit, with a loan open.
        let status = unsafe { (calls.commit)(self.channel, monotonic_ns(deadline), &mut error) };
        self.plugin.status("commit", status, &error)
    }

    fn borrow(&mut self, limit: usize, deadline: Instant) -> Result<&[u8], TransportError> {
        let calls = self.loan_calls()?;
        if self.borrowed.is_some() {
            return Err(TransportError::Loan("a message is borrowed already".into()));
        }
        let mut message = std::ptr::null();
        let mut len = 0usize;
        let mut error = ErrorBuf::new();
        let room = limit.min(calls.max_loan);
        // SAFETY: the header's borrow: room for the message's place, its length and error.
        let status = unsafe {
            (calls.borrow)(
                self.channel,
                room,
                monotonic_ns(deadline),
                &mut message,
                &mut len,
                &mut error,
            )
        };
        if status == TOO_LONG && len > room {
            return Err(TransportError::TooLarge {
                announced: len as u64,
                limit: room,
            });
        }
        self.plugin.status("borrow", status, &error)?;
        let lie = if len > room {
            Some(format!(
                "borrow lent {len} bytes where at most {room} were asked for"
            ))
        } else if message.is_null() && len > 0 {
            Some(format!("borrow lent {len} bytes at NULL"))
        } else {
            None
        };
        if let Some(lie) = lie {
            // What was lent is given back before saying so.
            // SAFETY: the header's release, with a message borrowed.
            unsafe { (calls.release)(self.channel) };
            return Err(self.plugin.lie(&lie));
        }
        self.borrowed = Some((message, len));
        Ok(self.borrowed().unwrap_or_default())
    }

    fn borrowed(&self) -> Option<&[u8]> {
        let (message, len) = self.borrowed?;
        if len == 0 {
            return Some(&[]);
        }
        // SAFETY: the library lent these `len` bytes until release, and this borrow of
        // `self` ends before it.
        Some(unsafe { std::slice::from_raw_parts(message, len) })
    }

    fn release(&mut self) {
        if let (Some(_), Some(calls)) = (self.borrowed.take(), self.calls.loans) {
            // SAFETY: the header's release, with a message borrowed.
            unsafe { (calls.release)(self.channel) };
        }
    }

    fn echo_loaned(&mut self, limit: usize, deadline: Instant) -> Result<usize, TransportError> {
        let len = self.borrow(limit, deadline)?.len();
        if len == 0 {
            self.release();
            return Ok(0);
        }
        let result = self.loan(len, deadline).map(|_| ());
        if let Err(e) = result {
            self.release();
            return Err(e);
        }
        if let (Some((from, _)), Some((to, _))) = (self.borrowed, self.loan) {
            // A stack may lend the received message's own room as the reply's loan (an
            // echo in place): then there is nothing to copy.
            if !std::ptr::eq(from, to) {
                // SAFETY: `len` bytes lent each way; `copy` allows the two to overlap.
                unsafe { std::ptr::copy(from, to, len) };
            }
        }
        self.release();
        self.commit(deadline)?;
        Ok(len)
    }
}

impl Drop for PluginChannel {
    fn drop(&mut self) {
        self.cancel();
        self.release();
        // SAFETY: the channel is not used again.
        unsafe { (self.calls.close)(self.channel) };
    }
}
