//! The channel over a mapped segment: chunks handed off through the two rings, the
//! pipeline of `exchange` and `echo`, and waiting (spinning or a futex) for the other side.

use super::layout::*;
use crate::contract::{Channel, Loans};
use crate::error::TransportError;
use crate::platform::{ensure_alive, futex_wait, futex_wake};
use crate::wait::{keep_spinning, remaining, LivenessChecks, LIVENESS_PERIOD};
use ipc_matrix_spec::WakeMode;
use shared_memory::Shmem;
use std::sync::atomic::Ordering;
use std::time::Instant;

pub struct ShmChannel {
    pub(super) shm: Shmem,
    pub(super) wake: WakeMode,
    pub(super) tx: usize,
    pub(super) rx: usize,
    /// Checked against the mapping's real size (attach) or made by this side (accept).
    pub(super) layout: Layout,
    pub(super) other_pid: u32,
    /// The consumer's tail as last seen: while the ring has room by this count, the
    /// producer need not read the shared tail (one cache-line transfer less per message).
    pub(super) tail_seen: u32,
    /// This side's own positions, kept here as well as published: the head of the ring it
    /// sends on, the tail of the ring it receives on. Only this side writes them, so the
    /// copies are exact, and reading them costs nothing; reading the published ones did,
    /// since the other side keeps pulling those lines over while it waits (about 50 ns
    /// of a 300 ns busy-poll round trip on a 2-vCPU AMD VM).
    pub(super) tx_head: u32,
    pub(super) rx_tail: u32,
    /// The loaned path ([`crate::Loans`], `loans.rs`): the open loan, its length and the
    /// head whose slot is its room; the borrowed message, its length (as checked when it
    /// was borrowed) and the tail whose slot holds it. The copying path never looks at
    /// them (its round trips cost what they did before loans): the loaned path sees from
    /// the positions whether the copying path moved on meanwhile.
    pub(super) loaned: Option<(usize, u32)>,
    pub(super) borrowed: Option<(usize, u32)>,
}

// SAFETY: the mapping belongs to the process, not a thread; the channel is used by one
// thread at a time (it is moved, never shared).
unsafe impl Send for ShmChannel {}

impl ShmChannel {
    /// `side` 0 is the measuring side (sends on ring 0), 1 the peer (sends on ring 1).
    /// `layout` must fit in `shm` (`layout.len <= shm.len()`): every pointer into the
    /// segment is computed from it.
    pub(super) fn new(
        shm: Shmem,
        layout: Layout,
        wake: WakeMode,
        side: usize,
        other_pid: u32,
    ) -> Self {
        assert!(layout.len <= shm.len(), "the layout fits the mapping");
        let mut channel = Self {
            shm,
            wake,
            tx: side,
            rx: 1 - side,
            layout,
            other_pid,
            tail_seen: 0,
            tx_head: 0,
            rx_tail: 0,
            loaned: None,
            borrowed: None,
        };
        // Wherever the segment's creator left the rings.
        let count =
            |counter: &Counter| Published::unpack(counter.value.load(Ordering::Acquire)).count;
        channel.tx_head = count(&channel.ring(side).head);
        channel.tail_seen = count(&channel.ring(side).tail);
        channel.rx_tail = count(&channel.ring(1 - side).tail);
        channel
    }

    pub(super) fn header(&self) -> &Header {
        // SAFETY: the mapping holds layout.len >= SLOTS_AT bytes, so an aligned header
        // (const assertions); only its atomics are used after setup.
        unsafe { &*self.shm.as_ptr().cast::<Header>() }
    }

    pub(super) fn ring(&self, ring: usize) -> &RingControl {
        assert!(ring < 2);
        // SAFETY: RINGS_AT + 2 * size_of::<RingControl>() <= SLOTS_AT <= layout.len <=
        // the mapping's length, and RINGS_AT is aligned for RingControl (const assertions
        // at the top of this file; layout.len checked in ShmChannel::new).
        unsafe {
            &*self
                .shm
                .as_ptr()
                .add(RINGS_AT)
                .cast::<RingControl>()
                .add(ring)
        }
    }

    /// The start of a slot: `layout.stride` bytes (SLOT_HEADER + slot_size, rounded up)
    /// inside the mapping, 64-aligned.
    pub(super) fn slot(&self, ring: usize, index: u32) -> *mut u8 {
        let offset = self.layout.slot_offset(ring, index);
        // SAFETY: offset + stride <= layout.len <= the mapping's length (Layout::slot_offset
        // and ShmChannel::new).
        unsafe { self.shm.as_ptr().add(offset) }
    }

    /// Waits until `ready(counter)` holds and returns the counter's value.
    pub(super) fn wait_for(
        &self,
        counter: &Counter,
        ready: impl Fn(Published) -> bool,
        deadline: Instant,
        what: &'static str,
    ) -> Result<Published, TransportError> {
        // Instructions spent waiting depend on how long the other side takes (spins, a
        // futex wait that returns early, one more look): never counted, and paused on
        // every call, ready or not, so that every call costs the counted work the same.
        let _waiting = ipc_matrix_count_window::pause();
        // The clock is read only once waiting has begun: a reply that is already there
        // costs no clock reads (each is tens of nanoseconds in a VM).
        let mut liveness = LivenessChecks::default();
        // The other side found gone, reported only after one more look at the counter:
        // what it published before it exited still counts.
        let mut gone: Option<TransportError> = None;
        let mut spins = 0u32;
        loop {
            let value = Published::unpack(counter.value.load(Ordering::Acquire));
            if ready(value) {
                return Ok(value);
            }
            if let Some(e) = gone.take() {
                return Err(e);
            }
            match self.wake {
                WakeMode::BusyPoll => {
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    if keep_spinning(spins) {
                        continue;
                    }
                }
                WakeMode::Blocking => {
                    counter.sleepers.fetch_add(1, Ordering::SeqCst);
                    let seen = Published::unpack(counter.value.load(Ordering::SeqCst));
                    if !ready(seen) {
                        let wait = remaining(deadline, what)?;
                        let word = counter.count_word();
                        let _woke = futex_wait(word, seen.count, wait.min(LIVENESS_PERIOD));
                        #[cfg(test)]
                        super::tests::SLEEPS.with(|sleeps| sleeps.borrow_mut().push(_woke));
                    }
                    counter.sleepers.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let now = Instant::now();
            remaining(deadline, what)?;
            if liveness.due(now) {
                gone = ensure_alive(self.other_pid, "while waiting").err();
            }
        }
    }

    pub(super) fn publish(&self, counter: &Counter, value: Published) {
        match self.wake {
            WakeMode::BusyPoll => counter.value.store(value.pack(), Ordering::Release),
            WakeMode::Blocking => {
                counter.value.store(value.pack(), Ordering::SeqCst);
                // Whether the other side sleeps yet is timing: its wake is not counted.
                let _waking = ipc_matrix_count_window::pause();
                if counter.sleepers.load(Ordering::SeqCst) != 0 {
                    futex_wake(counter.count_word());
                }
            }
        }
    }
}

/// The message being received, as its chunks are taken: the length its first chunk
/// announced, and how many of its bytes the chunks taken so far carried.
#[derive(Default)]
pub(super) struct Incoming {
    pub(super) expected: Option<usize>,
    pub(super) taken: usize,
}

/// A chunk of the message being received, checked against the slot and the message:
/// where its bytes are (in the slot, which stays the other side's to read until its tail
/// is published), how many, and whether it ends its message.
pub(super) struct Chunk {
    pub(super) bytes: *const u8,
    pub(super) len: usize,
    pub(super) ends: bool,
}

impl ShmChannel {
    /// Sends `message` chunk by chunk from byte `sent` (0 for a whole message; never
    /// `message.len()` unless it is 0) at `head`, which it advances past every chunk
    /// published (also when it fails midway), as `tail_seen` follows the consumer.
    pub(super) fn send_chunks(
        &self,
        message: &[u8],
        mut sent: usize,
        deadline: Instant,
        head: &mut u32,
        tail_seen: &mut u32,
    ) -> Result<(), TransportError> {
        loop {
            self.wait_for_free_slot(*head, tail_seen, deadline)?;
            sent = self.put_chunk(message, sent, head);
            if sent == message.len() {
                return Ok(());
            }
        }
    }

    /// Waits until the slot at `head` of the ring this side sends on is free: at once
    /// while the consumer's tail as last seen (`tail_seen`) says so, else by its tail.
    #[inline]
    pub(super) fn wait_for_free_slot(
        &self,
        head: u32,
        tail_seen: &mut u32,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        // Whether the tail last seen says the slot is free depends on when it was seen:
        // the look is part of the wait, and never counted.
        let _waiting = ipc_matrix_count_window::pause();
        let slots = self.layout.slots;
        if head.wrapping_sub(*tail_seen) >= slots {
            *tail_seen = self
                .wait_for(
                    &self.ring(self.tx).tail,
                    |tail| head.wrapping_sub(tail.count) < slots,
                    deadline,
                    "free slot (the other side does not read)",
                )?
                .count;
        }
        Ok(())
    }

    /// Whether the slot at `head` is free now, without waiting: by `tail_seen`, else by
    /// the consumer's tail, read once (and remembered in `tail_seen`).
    #[inline]
    pub(super) fn has_free_slot(&self, head: u32, tail_seen: &mut u32) -> bool {
        // Timing decides the answer: not counted (see wait_for_free_slot).
        let _waiting = ipc_matrix_count_window::pause();
        let slots = self.layout.slots;
        if head.wrapping_sub(*tail_seen) < slots {
            return true;
        }
        let tail = self.ring(self.tx).tail.value.load(Ordering::Acquire);
        *tail_seen = Published::unpack(tail).count;
        head.wrapping_sub(*tail_seen) < slots
    }

    /// Puts the next chunk of `message`, from byte `sent`, into the free slot at `head`
    /// and publishes it; returns how many bytes of the message have then been sent.
    #[inline]
    pub(super) fn put_chunk(&self, message: &[u8], sent: usize, head: &mut u32) -> usize {
        let chunk = (message.len() - sent).min(self.layout.slot_size);
        // SAFETY: `sent + chunk <= message.len()`, so the source range is in bounds.
        let bytes = unsafe { message.as_ptr().add(sent) };
        let more = sent + chunk < message.len();
        // SAFETY: the range is `message`'s, which cannot be in the slot at `head`: that
        // slot is this side's until published, and no slice of it is ever made.
        unsafe { self.put_raw(bytes, chunk, more, message.len(), head) };
        sent + chunk
    }

    /// Copies a chunk of `chunk` bytes from `bytes` into the slot at `head`, which must
    /// be free, with the slot's header (the chunk's length and flag, the whole message's
    /// length), advances `head` and publishes it.
    ///
    /// # Safety
    /// `bytes` is valid for reading `chunk` bytes, `chunk <= slot_size`, and the range
    /// does not overlap the slot at `head`.
    #[inline]
    pub(super) unsafe fn put_raw(
        &self,
        bytes: *const u8,
        chunk: usize,
        more: bool,
        message_len: usize,
        head: &mut u32,
    ) {
        debug_assert!(chunk <= self.layout.slot_size);
        let published = Published {
            count: head.wrapping_add(1),
            chunk: chunk as u32,
            more,
        };
        let slot = self.slot(self.tx, *head);
        // SAFETY: the slot is ours until head is published; it has room for the header
        // and slot_size bytes; `chunk` <= slot_size and the source is valid and apart
        // (the caller's word). The header is for a consumer that has fallen behind (the
        // counter then tells a later chunk's length) and for the length of a message of
        // several chunks.
        unsafe {
            slot.cast::<u32>().write(published.chunk_info());
            slot.add(8).cast::<u64>().write(message_len as u64);
            std::ptr::copy_nonoverlapping(bytes, slot.add(SLOT_HEADER), chunk);
        }
        *head = published.count;
        self.publish(&self.ring(self.tx).head, published);
    }

    /// Publishes the slot at `head`, whose bytes are in place (a loan's, filled): writes
    /// its header as [`Self::put_raw`] does, advances `head` and publishes it. Apart from
    /// `put_raw`, whose copying round trips stay as they were.
    pub(super) fn publish_slot(&self, published: Published, message_len: usize, head: &mut u32) {
        let slot = self.slot(self.tx, *head);
        // SAFETY: the slot is ours until head is published; its 16-byte header holds an
        // aligned u32 at its start and an aligned u64 at byte 8.
        unsafe {
            slot.cast::<u32>().write(published.chunk_info());
            slot.add(8).cast::<u64>().write(message_len as u64);
        }
        *head = published.count;
        self.publish(&self.ring(self.tx).head, published);
    }

    /// Checks the chunk at `tail` of the ring this side receives on, which the producer
    /// has published (its counter seen past `tail`), as the next chunk of `message`: the
    /// length it announces within `limit` (TooLarge, before anything is taken), the chunk
    /// within its slot and what its message has left, the same length announced by every
    /// chunk of a message, and its flag true to the message's end (Corrupt otherwise).
    /// Counts it as taken; the slot stays to be freed.
    #[inline]
    pub(super) fn check_chunk(
        &self,
        tail: u32,
        limit: usize,
        message: &mut Incoming,
    ) -> Result<Chunk, TransportError> {
        let slot = self.slot(self.rx, tail);
        // The slot's header tells the chunk's length and flag. The counter tells them too,
        // but only of the last chunk published: taking them from one place or the other
        // by when the consumer looks made the counted instructions depend on timing.
        // Each field is read once: what is checked is what is used.
        // SAFETY: the counter was read with Acquire after the producer's Release, so the
        // slot's header and bytes are visible (also to the reads below); the slot is ours
        // until tail is published; its header holds an aligned u32 at its start.
        let info = unsafe { slot.cast::<u32>().read() };
        let published = Published::with_info(tail.wrapping_add(1), info);
        let chunk = published.chunk as usize;
        let announced = match (message.expected, published.more) {
            (None, false) => chunk as u64,
            // SAFETY: as above; the header holds the message's length, an aligned u64, at
            // byte 8.
            _ => unsafe { slot.add(8).cast::<u64>().read() },
        };
        let expected = match message.expected {
            None => {
                if announced > limit as u64 {
                    return Err(TransportError::TooLarge { announced, limit });
                }
                *message.expected.insert(announced as usize)
            }
            Some(t) if t as u64 == announced => t,
            Some(t) => {
                return Err(TransportError::Corrupt(format!(
                    "a chunk announced a {announced}-byte message inside a {t}-byte one"
                )))
            }
        };
        if chunk > self.layout.slot_size || message.taken + chunk > expected {
            return Err(TransportError::Corrupt(format!(
                "a {chunk}-byte chunk does not fit (slot {} bytes, {} of {expected} received)",
                self.layout.slot_size, message.taken
            )));
        }
        let taken = message.taken + chunk;
        let ends = taken == expected;
        if ends == published.more {
            return Err(TransportError::Corrupt(format!(
                "a chunk {} its message, which has {taken} of {expected} bytes",
                if published.more {
                    "says more follows"
                } else {
                    "says it ends"
                },
            )));
        }
        // Every chunk but the last fills its slot: so a message has at most as many
        // chunks as its length says, and a producer that keeps publishing short ones
        // (empty ones that say more follows) cannot keep the receive going past its
        // deadline, which is only looked at while waiting.
        if published.more && chunk != self.layout.slot_size {
            return Err(TransportError::Corrupt(format!(
                "a {chunk}-byte chunk says more follows, but only the last chunk of a message may be shorter than its slot ({} bytes)",
                self.layout.slot_size
            )));
        }
        message.taken = taken;
        Ok(Chunk {
            // SAFETY: the slot's bytes start SLOT_HEADER into it.
            bytes: unsafe { slot.add(SLOT_HEADER) },
            len: chunk,
            ends,
        })
    }

    /// Frees the slot at `tail` for the producer: advances `tail` and publishes it.
    #[inline]
    pub(super) fn free_slot(&self, tail: &mut u32) {
        *tail = tail.wrapping_add(1);
        self.publish(&self.ring(self.rx).tail, Published::count(*tail));
    }

    /// Takes the chunk published at `tail` into `buf`,
    /// the next chunk of `message` once checked ([`Self::check_chunk`]), and frees its
    /// slot; says whether it ended the message.
    #[inline]
    pub(super) fn take_chunk(
        &self,
        tail: &mut u32,
        limit: usize,
        buf: &mut Vec<u8>,
        message: &mut Incoming,
    ) -> Result<bool, TransportError> {
        let chunk = self.check_chunk(*tail, limit, message)?;
        // `buf` holds the message's earlier chunks: room for the whole message, which
        // check_chunk found within the limit, once (a no-op after the first chunk).
        let expected = message
            .expected
            .expect("a checked chunk's message has a length");
        buf.reserve(expected - buf.len());
        // SAFETY: capacity was reserved for the whole message, and the chunk is within
        // what it has left (check_chunk); the slot's bytes are readable until freed.
        unsafe {
            std::ptr::copy_nonoverlapping(chunk.bytes, buf.as_mut_ptr().add(buf.len()), chunk.len);
            buf.set_len(buf.len() + chunk.len);
        }
        self.free_slot(tail);
        Ok(chunk.ends)
    }

    /// Receives one message into `buf` chunk by chunk from `tail`, which it advances
    /// past every chunk taken (also when it fails midway).
    pub(super) fn recv_chunks(
        &self,
        buf: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
        tail: &mut u32,
    ) -> Result<(), TransportError> {
        let ring = self.ring(self.rx);
        let mut message = Incoming::default();
        buf.clear();
        loop {
            let next = *tail;
            self.wait_for(&ring.head, |head| head.count != next, deadline, "message")?;
            if self.take_chunk(tail, limit, buf, &mut message)? {
                return Ok(());
            }
        }
    }

    /// The peer's echo ([`Channel::echo`]): each chunk of the message at `tail` is checked
    /// as [`Self::recv_chunks`] checks it, copied from its slot straight into a free slot
    /// of the other ring at `head` and published there, and only then freed. A peer that
    /// echoes this way frees a slot of the request only once the reply's chunk is out:
    /// what makes [`Self::exchange_chunks`] safe. The goodbye (an empty message) is taken
    /// and not sent back. Every position advances past what was done, also when it fails
    /// midway.
    pub(super) fn echo_chunks(
        &self,
        limit: usize,
        deadline: Instant,
        tail: &mut u32,
        (head, tail_seen): (&mut u32, &mut u32),
    ) -> Result<usize, TransportError> {
        let ring = self.ring(self.rx);
        let mut message = Incoming::default();
        loop {
            let next = *tail;
            self.wait_for(&ring.head, |head| head.count != next, deadline, "message")?;
            let chunk = self.check_chunk(next, limit, &mut message)?;
            let len = message
                .expected
                .expect("a checked chunk's message has a length");
            if len == 0 {
                self.free_slot(tail);
                return Ok(0);
            }
            self.wait_for_free_slot(*head, tail_seen, deadline)?;
            // SAFETY: the chunk is checked to fit a slot; its bytes stay readable until its
            // slot is freed, below; they are in the other ring, apart from the slot at
            // `head`.
            unsafe { self.put_raw(chunk.bytes, chunk.len, !chunk.ends, len, head) };
            self.free_slot(tail);
            if chunk.ends {
                return Ok(len);
            }
        }
    }

    /// The measuring side's round trip with a peer that echoes as it receives
    /// ([`Self::echo_chunks`]): the request's chunks go out from `head` while the reply's
    /// are taken from `tail` as they come, never waiting on one ring while the other can
    /// go on. Each turn takes a reply chunk if one is there, else sends a request chunk
    /// if a slot is free, else waits for a reply chunk.
    ///
    /// That wait cannot deadlock with such a peer: every slot of the request is taken,
    /// and every reply chunk published has been taken, so the reply ring has room; the
    /// peer echoes the oldest request chunk into it and only then frees that chunk's
    /// slot, which publishes a reply chunk, which ends the wait. A peer that receives the
    /// whole request before it replies publishes nothing while it waits for the rest,
    /// which no longer comes: the wait ends with a Timeout at `deadline`.
    ///
    /// The reply is checked as [`Self::recv_chunks`] checks a message. A reply that ends
    /// before the whole request has gone out (a peer that does not echo) is taken, and
    /// the rest of the request is sent as `send` would. After the request's last chunk,
    /// the reply is waited for exactly as `recv` waits, so that a request of one chunk
    /// costs the counted instructions the same whenever its reply comes. Every position
    /// advances past what was done, also when it fails midway.
    pub(super) fn exchange_chunks(
        &self,
        request: &[u8],
        (reply, limit): (&mut Vec<u8>, usize),
        deadline: Instant,
        tail: &mut u32,
        (head, tail_seen): (&mut u32, &mut u32),
    ) -> Result<(), TransportError> {
        debug_assert!(!request.is_empty(), "the goodbye is sent, not exchanged");
        let ring = self.ring(self.rx);
        let mut message = Incoming::default();
        reply.clear();
        let mut sent = 0;
        loop {
            let next = *tail;
            // Which ring a turn serves depends on when the peer's chunks come: the choice,
            // and the wait it may need, are never counted, and every turn costs the same
            // one pause, so that the counted instructions depend on the chunks only.
            let turn = {
                let _choosing = ipc_matrix_count_window::pause();
                // Before the first request chunk is out, no reply chunk is due; after the
                // last, the reply is waited for as `recv` waits (whether or not it is
                // there yet).
                let ready = sent > 0
                    && sent < request.len()
                    && Published::unpack(ring.head.value.load(Ordering::Acquire)).count != next;
                match ready {
                    true => Turn::Take,
                    false if sent < request.len() && self.has_free_slot(*head, tail_seen) => {
                        Turn::Put
                    }
                    false => {
                        let what = match sent < request.len() {
                            true => "reply chunk while the request's slots are full",
                            false => "message",
                        };
                        self.wait_for(&ring.head, |head| head.count != next, deadline, what)?;
                        Turn::Take
                    }
                }
            };
            if let Turn::Put = turn {
                sent = self.put_chunk(request, sent, head);
                continue;
            }
            if self.take_chunk(tail, limit, reply, &mut message)? {
                if sent < request.len() {
                    self.send_chunks(request, sent, deadline, head, tail_seen)?;
                }
                return Ok(());
            }
        }
    }
}

/// What a turn of [`ShmChannel::exchange_chunks`] does: put the next request chunk into
/// a free slot, or take the reply chunk published.
enum Turn {
    Put,
    Take,
}

impl Channel for ShmChannel {
    fn send(&mut self, message: &[u8], deadline: Instant) -> Result<(), TransportError> {
        let (mut head, mut tail_seen) = (self.tx_head, self.tail_seen);
        let sent = self.send_chunks(message, 0, deadline, &mut head, &mut tail_seen);
        (self.tx_head, self.tail_seen) = (head, tail_seen);
        sent
    }

    fn recv(
        &mut self,
        buf: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let mut tail = self.rx_tail;
        let received = self.recv_chunks(buf, limit, deadline, &mut tail);
        self.rx_tail = tail;
        received
    }

    fn exchange(
        &mut self,
        request: &[u8],
        reply: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        if request.is_empty() {
            reply.clear();
            return self.send(request, deadline);
        }
        let (mut head, mut tail_seen, mut tail) = (self.tx_head, self.tail_seen, self.rx_tail);
        let exchanged = self.exchange_chunks(
            request,
            (reply, limit),
            deadline,
            &mut tail,
            (&mut head, &mut tail_seen),
        );
        (self.tx_head, self.tail_seen, self.rx_tail) = (head, tail_seen, tail);
        exchanged
    }

    fn echo(
        &mut self,
        _scratch: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<usize, TransportError> {
        let (mut head, mut tail_seen, mut tail) = (self.tx_head, self.tail_seen, self.rx_tail);
        let echoed = self.echo_chunks(limit, deadline, &mut tail, (&mut head, &mut tail_seen));
        (self.tx_head, self.tail_seen, self.rx_tail) = (head, tail_seen, tail);
        echoed
    }

    fn chunk_size(&self) -> Option<usize> {
        Some(self.layout.slot_size)
    }

    fn loans(&mut self) -> Option<&mut dyn Loans> {
        Some(self)
    }
}
