//! The loaned path ([`Loans`]) of the shared-memory ring: a loan is the free slot at the
//! head of the ring this side sends on, filled in place and published by the commit; a
//! borrowed message is the slot at the tail of the ring it receives on, lent where it
//! lies and freed by the release. So a message on the loaned path is at most one slot.
//!
//! The copying path never looks at the loaned path's state, so that its round trips cost
//! what they did before loans. A copying send while a loan is open takes the loan's room
//! (the slot at the head) for its own message, which goes out whole; the loan is then
//! stale, and its commit is refused rather than publish a slot it no longer owns. A
//! copying receive while a message is borrowed takes that message (a copy of it) and
//! frees its slot; the borrow is then stale, and its release gives back nothing more.
//!
//! Lent slices break the rule the copying path keeps (memory the other process writes
//! is touched only through raw pointers): like iceoryx2's samples, they trust the other
//! process not to write a slot it has handed over. That process is the cell's own peer
//! or measuring side; a message that changed under a compare fails it as a mismatch.

use super::channel::{Incoming, ShmChannel};
use super::layout::{Published, SLOT_HEADER};
use crate::contract::{Channel, Loans};
use crate::error::TransportError;
use std::time::Instant;

impl ShmChannel {
    /// The open loan's length, if it is open and its room is still the slot at the head.
    fn open_loan(&self) -> Option<usize> {
        self.loaned
            .filter(|&(_, head)| head == self.tx_head)
            .map(|(len, _)| len)
    }

    /// The borrowed message's length, if its slot is still the one at the tail.
    fn open_borrow(&self) -> Option<usize> {
        self.borrowed
            .filter(|&(_, tail)| tail == self.rx_tail)
            .map(|(len, _)| len)
    }

    /// `len` bytes of room in the slot at the head, the open loan's.
    fn loan_room(&mut self, len: usize) -> &mut [u8] {
        let slot = self.slot(self.tx, self.tx_head);
        // SAFETY: the slot at the head is free (waited for by `loan`), so ours until it
        // is published; it holds slot_size >= len bytes after its header, inside the
        // mapping, which holds bytes (the kernel zeroes a new segment); `&mut self` keeps
        // any other slice of it from living meanwhile.
        unsafe { std::slice::from_raw_parts_mut(slot.add(SLOT_HEADER), len) }
    }

    /// The borrowed message: `len` bytes (what `check_chunk` found inside the slot when
    /// it was borrowed) of the slot at the tail.
    fn borrowed_bytes(&self, len: usize) -> &[u8] {
        let slot = self.slot(self.rx, self.rx_tail);
        // SAFETY: the slot was published with Release and its counter read with
        // Acquire; check_chunk found `len` bytes inside it; it is this side's until the
        // release frees it.
        unsafe { std::slice::from_raw_parts(slot.add(SLOT_HEADER), len) }
    }
}

impl Loans for ShmChannel {
    fn max_loan(&self) -> usize {
        self.layout.slot_size
    }

    fn loan(&mut self, len: usize, deadline: Instant) -> Result<&mut [u8], TransportError> {
        if self.open_loan().is_some() {
            return Err(TransportError::Loan("a loan is already open".into()));
        }
        if len > self.layout.slot_size {
            return Err(TransportError::Loan(format!(
                "a {len}-byte message is longer than a loan holds ({} bytes, one slot)",
                self.layout.slot_size
            )));
        }
        let mut tail_seen = self.tail_seen;
        self.wait_for_free_slot(self.tx_head, &mut tail_seen, deadline)?;
        self.tail_seen = tail_seen;
        self.loaned = Some((len, self.tx_head));
        Ok(self.loan_room(len))
    }

    fn loaned(&mut self) -> Option<&mut [u8]> {
        let len = self.open_loan()?;
        Some(self.loan_room(len))
    }

    fn cancel(&mut self) {
        // The slot was only reserved: nothing was published.
        self.loaned = None;
    }

    fn commit(&mut self, _deadline: Instant) -> Result<(), TransportError> {
        let open = self.open_loan();
        let was = self.loaned.take();
        let len = match (open, was) {
            (Some(len), _) => len,
            (None, Some(_)) => {
                return Err(TransportError::Loan(
                    "the copying path sent a message in this loan's room while it was open: the loan is dropped, unsent".into(),
                ))
            }
            (None, None) => return Err(TransportError::Loan("no loan is open to commit".into())),
        };
        let published = Published {
            count: self.tx_head.wrapping_add(1),
            chunk: len as u32,
            more: false,
        };
        let mut head = self.tx_head;
        self.publish_slot(published, len, &mut head);
        self.tx_head = head;
        Ok(())
    }

    fn borrow(&mut self, limit: usize, deadline: Instant) -> Result<&[u8], TransportError> {
        if self.open_borrow().is_some() {
            return Err(TransportError::Loan("a message is already borrowed".into()));
        }
        let next = self.rx_tail;
        self.wait_for(
            &self.ring(self.rx).head,
            |head| head.count != next,
            deadline,
            "message",
        )?;
        let mut message = Incoming::default();
        let chunk = self.check_chunk(next, limit, &mut message)?;
        if !chunk.ends {
            // Not taken: the slot stays where it is, and the channel is left to fail.
            return Err(TransportError::Loan(format!(
                "a {}-byte message spans more than one slot ({} bytes): only a message that fits a loan is borrowed",
                message.expected.unwrap_or(0),
                self.layout.slot_size
            )));
        }
        self.borrowed = Some((chunk.len, next));
        Ok(self.borrowed_bytes(chunk.len))
    }

    fn borrowed(&self) -> Option<&[u8]> {
        self.open_borrow().map(|len| self.borrowed_bytes(len))
    }

    fn release(&mut self) {
        let open = self.open_borrow();
        self.borrowed = None;
        if open.is_some() {
            let mut tail = self.rx_tail;
            self.free_slot(&mut tail);
            self.rx_tail = tail;
        }
    }

    /// The ring's echo already writes each chunk from the request's slot straight into
    /// the reply's, which is what a loaned echo is; it takes a message of several slots
    /// too, chunk by chunk.
    fn echo_loaned(&mut self, limit: usize, deadline: Instant) -> Result<usize, TransportError> {
        self.echo(&mut Vec::new(), limit, deadline)
    }
}
