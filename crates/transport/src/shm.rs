//! Shared memory through the `shared_memory` crate: one segment, two single-producer /
//! single-consumer rings of slots (measuring side -> peer, peer -> measuring side).
//!
//! Handoff: the producer copies a chunk into a slot, then publishes the ring's `head` with
//! Release; the consumer reads `head` with Acquire before it copies the chunk out, then
//! publishes `tail` with Release so the producer may reuse the slot. In blocking mode the
//! waiter sleeps on the counter with a futex and the publisher wakes it only if a waiter
//! announced itself (SeqCst on both sides, the Dekker pattern, so no wake is missed). In
//! busy-poll mode the waiter spins. Messages larger than a slot stream through in chunks.
//!
//! A round trip to a peer that echoes as it receives is a pipeline (`exchange`, `echo`):
//! the peer copies each request chunk straight from its slot into a slot of the other
//! ring, publishes it, and only then frees the request's slot, while the measuring side
//! takes reply chunks as they come between the request chunks it sends.
//!
//! Memory the other process writes is only touched through raw pointers and atomics, never
//! through `&[u8]`. The segment is unlinked as soon as the peer has mapped it, so nothing
//! remains in /dev/shm even if both processes are killed later.

pub(crate) mod sweep;

use crate::artifact::{unique_name, LifeLock, SHM_DIR};
use std::path::Path;

use crate::address::PeerAddress;
use crate::contract::{Acceptor, Channel};
use crate::error::TransportError;
use crate::platform::{current_pid, ensure_alive, futex_wait, futex_wake};
use crate::wait::{keep_spinning, remaining, LivenessChecks, LIVENESS_PERIOD};
use ipc_matrix_spec::WakeMode;
use shared_memory::{Shmem, ShmemConf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const MAGIC: u64 = u64::from_le_bytes(*b"ipcmxshm");
const LAYOUT_VERSION: u32 = 2;
const SLOTS: u32 = 4;
const MAX_SLOT: usize = 1 << 20;
const MIN_SLOT: usize = 4096;
const SLOT_HEADER: usize = 16;
const RINGS_AT: usize = 128;
const SLOTS_AT: usize = 4096;

#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: u32,
    slot_size: u32,
    slots: u32,
    owner_pid: AtomicU32,
    peer_pid: AtomicU32,
    attached: AtomicU32,
}

/// A count of published (or freed) slots, on a cache line of its own, with the number of
/// processes sleeping on it. The value is a [`Published`] word: the count and, on the
/// producer's side, the length of the chunk just published, so that one store publishes
/// both and a consumer that keeps up learns the length from the line it has just
/// fetched. Reading it from the slot's header instead cost one more transfer between the
/// CPUs: about 50-70 ns of a 300 ns busy-poll round trip on a 2-vCPU AMD VM.
#[repr(C, align(64))]
struct Counter {
    value: AtomicU64,
    sleepers: AtomicU32,
}

impl Counter {
    /// The 32-bit half of the value that holds the count, which a futex waits on (the
    /// half at the lower address, whatever the byte order; see [`Published`]). Only the
    /// kernel reads it through this reference.
    fn count_word(&self) -> &AtomicU32 {
        // SAFETY: the value is 8-byte aligned, so its first 4 bytes are an aligned u32
        // inside it; this process never loads or stores through the reference (it is
        // handed to futex calls only).
        unsafe { &*self.value.as_ptr().cast::<AtomicU32>() }
    }
}

/// A counter's value: the count in the 32 bits at the lower address, the length of the
/// chunk just published (and whether more chunks of its message follow) in the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Published {
    count: u32,
    chunk: u32,
    more: bool,
}

/// Set in a published chunk length when more chunks of the same message follow.
const MORE_FOLLOWS: u32 = 1 << 31;

impl Published {
    fn count(count: u32) -> Self {
        Self {
            count,
            chunk: 0,
            more: false,
        }
    }

    /// The count published with a chunk's length and flag as [`Published::chunk_info`]
    /// gives them.
    fn with_info(count: u32, info: u32) -> Self {
        Self {
            count,
            chunk: info & !MORE_FOLLOWS,
            more: info & MORE_FOLLOWS != 0,
        }
    }

    /// The chunk's length with [`MORE_FOLLOWS`] when more chunks follow.
    fn chunk_info(self) -> u32 {
        self.chunk | if self.more { MORE_FOLLOWS } else { 0 }
    }

    fn pack(self) -> u64 {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&self.count.to_ne_bytes());
        bytes[4..].copy_from_slice(&self.chunk_info().to_ne_bytes());
        u64::from_ne_bytes(bytes)
    }

    fn unpack(word: u64) -> Self {
        let bytes = word.to_ne_bytes();
        let half = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        Self::with_info(half(0), half(4))
    }
}

#[repr(C)]
struct RingControl {
    head: Counter,
    tail: Counter,
}

// The layout unsafe code relies on, checked when this compiles: the header fits before
// the ring controls, both ring controls fit before the slots, and slots start 64-aligned
// (a slot's u64 message length is written at offset 8 of it).
// The pipelined exchange needs two slots at least: with one, the peer publishes a reply
// chunk while the request's only slot is still full, and the measuring side, having
// taken it, would wait for a reply that cannot come before that slot is free.
const _: () = assert!(SLOTS >= 2);

const _: () = {
    assert!(std::mem::size_of::<Header>() <= RINGS_AT);
    assert!(RINGS_AT.is_multiple_of(std::mem::align_of::<RingControl>()));
    assert!(RINGS_AT + 2 * std::mem::size_of::<RingControl>() <= SLOTS_AT);
    assert!(SLOTS_AT.is_multiple_of(64));
    assert!(SLOT_HEADER >= 16 && SLOT_HEADER.is_multiple_of(8));
    assert!(MIN_SLOT <= MAX_SLOT && MAX_SLOT <= u32::MAX as usize);
    assert!(Layout::new(MAX_SLOT, SLOTS).is_some());
};

/// Where the slots are in a segment: `slots` per ring, each `stride` bytes apart, the
/// whole `len` bytes long. Only made by [`Layout::new`], whose arithmetic is checked, so a
/// `Layout` never describes more bytes than `len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    slot_size: usize,
    slots: u32,
    stride: usize,
    len: usize,
}

impl Layout {
    /// `None` when there are no slots, a slot holds nothing, or the sizes overflow.
    const fn new(slot_size: usize, slots: u32) -> Option<Self> {
        if slot_size == 0 || slots == 0 {
            return None;
        }
        let Some(stride) = SLOT_HEADER.checked_add(slot_size) else {
            return None;
        };
        let Some(stride) = stride.checked_next_multiple_of(64) else {
            return None;
        };
        let Some(both_rings) = (slots as usize).checked_mul(2) else {
            return None;
        };
        let Some(slot_bytes) = both_rings.checked_mul(stride) else {
            return None;
        };
        let Some(len) = SLOTS_AT.checked_add(slot_bytes) else {
            return None;
        };
        Some(Self {
            slot_size,
            slots,
            stride,
            len,
        })
    }

    /// Offset of slot `index` (taken modulo the ring's slots) of `ring` (0 or 1). The
    /// slot's stride ends at or before `len`: n < 2 * slots, so
    /// SLOTS_AT + n * stride + stride <= SLOTS_AT + 2 * slots * stride = len.
    fn slot_offset(&self, ring: usize, index: u32) -> usize {
        debug_assert!(ring < 2);
        let n = ring * self.slots as usize + (index % self.slots) as usize;
        SLOTS_AT + n * self.stride
    }
}

pub struct ShmAcceptor {
    shm: Shmem,
    wake: WakeMode,
    /// What this side wrote into the header; never read back from the shared header, which
    /// the peer could overwrite.
    layout: Layout,
    /// Says the segment's creator is alive until the segment is unlinked, so no sweep of
    /// another run removes it ([`crate::sweep`]).
    _alive: LifeLock,
}

impl ShmAcceptor {
    pub fn create(wake: WakeMode, max_message: usize) -> Result<Self, TransportError> {
        // At most MAX_SLOT, a multiple of 64: the const assertions cover this layout.
        let slot_size = max_message.clamp(MIN_SLOT, MAX_SLOT).next_multiple_of(64);
        let layout = Layout::new(slot_size, SLOTS).expect("MAX_SLOT-sized slots fit");
        let os_id = format!("/{}", unique_name());
        let shm = ShmemConf::new()
            .size(layout.len)
            .os_id(&os_id)
            .create()
            .map_err(|e| TransportError::Io {
                context: "creating the shared memory segment",
                source: std::io::Error::other(e.to_string()),
            })?;
        holds(&os_id, shm.len(), layout.len)?;
        let alive = LifeLock::hold(&Path::new(SHM_DIR).join(os_id.trim_start_matches('/')))
            .map_err(TransportError::io("locking the new segment"))?;
        // SAFETY: the mapping is at least layout.len >= SLOTS_AT bytes and page-aligned, so
        // it holds an aligned header; nobody else has it yet, and the magic number is
        // published last, with Release.
        unsafe {
            let header = shm.as_ptr().cast::<Header>();
            (*header).version = LAYOUT_VERSION;
            (*header).slot_size = slot_size as u32;
            (*header).slots = SLOTS;
            (*header).owner_pid.store(current_pid(), Ordering::Relaxed);
            (*header).magic.store(MAGIC, Ordering::Release);
        }
        Ok(Self {
            shm,
            wake,
            layout,
            _alive: alive,
        })
    }

    fn header(&self) -> &Header {
        // SAFETY: initialised in create; only atomics are read through this after setup.
        unsafe { &*self.shm.as_ptr().cast::<Header>() }
    }
}

impl Acceptor for ShmAcceptor {
    fn address(&self) -> PeerAddress {
        PeerAddress::Shm {
            os_id: self.shm.get_os_id().to_string(),
            wake: self.wake,
        }
    }

    fn accept(
        mut self: Box<Self>,
        peer: u32,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError> {
        loop {
            // Alive first, attached second: a peer that attached and exited in between
            // has attached (its messages are in the rings, its death shows later).
            let alive = ensure_alive(peer, "before it mapped the segment");
            if self.header().attached.load(Ordering::Acquire) != 0 {
                break;
            }
            alive?;
            let wait = remaining(deadline, "attachment of the peer to the segment")?;
            let _ = futex_wait(&self.header().attached, 0, wait.min(LIVENESS_PERIOD));
        }
        // Both sides have it mapped: unlink now, so a crash of either leaves nothing.
        let name = std::ffi::CString::new(self.shm.get_os_id()).expect("no NUL in os_id");
        // SAFETY: a valid C string; unlinking a name does not unmap anything.
        unsafe { libc::shm_unlink(name.as_ptr()) };
        self.shm.set_owner(false);
        let peer_pid = self.header().peer_pid.load(Ordering::Acquire);
        let layout = self.layout;
        Ok(Box::new(ShmChannel::new(
            self.shm, layout, self.wake, 0, peer_pid,
        )))
    }
}

/// A new segment `os_id` mapped `got` bytes: enough for the `wanted` its layout needs, or
/// the error saying it is not.
fn holds(os_id: &str, got: usize, wanted: usize) -> Result<(), TransportError> {
    if got < wanted {
        return Err(TransportError::Corrupt(format!(
            "the new segment {os_id} is {got} bytes, not the {wanted} asked for"
        )));
    }
    Ok(())
}

/// The peer's side: maps the segment named `os_id` and announces itself.
pub fn attach(
    os_id: &str,
    wake: WakeMode,
    deadline: Instant,
) -> Result<ShmChannel, TransportError> {
    let shm = loop {
        match ShmemConf::new().os_id(os_id).open() {
            Ok(shm) => break shm,
            Err(e) => {
                if remaining(deadline, "shared memory segment").is_err() {
                    return Err(TransportError::Io {
                        context: "opening the shared memory segment",
                        source: std::io::Error::other(e.to_string()),
                    });
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    };
    let real_len = shm.len();
    if real_len < SLOTS_AT {
        return Err(TransportError::Corrupt(format!(
            "segment {os_id} is {real_len} bytes, too small for a header"
        )));
    }
    // SAFETY: the mapping (page-aligned) holds at least SLOTS_AT bytes, so a header; fields
    // other than atomics are read only after the magic number was seen with Acquire, and
    // each is read once, here: what is used later is what is checked below.
    let (slot_size, slots, owner) = unsafe {
        let header = &*shm.as_ptr().cast::<Header>();
        if header.magic.load(Ordering::Acquire) != MAGIC || header.version != LAYOUT_VERSION {
            return Err(TransportError::Corrupt(format!(
                "segment {os_id} is not an ipc-matrix segment of layout {LAYOUT_VERSION}"
            )));
        }
        (
            header.slot_size,
            header.slots,
            header.owner_pid.load(Ordering::Relaxed),
        )
    };
    // The header is the other process's word; the mapping's size is the kernel's.
    let layout = checked_layout(slot_size, slots, real_len)
        .map_err(|why| TransportError::Corrupt(format!("segment {os_id}: {why}")))?;
    let channel = ShmChannel::new(shm, layout, wake, 1, owner);
    let header = channel.header();
    header.peer_pid.store(current_pid(), Ordering::Relaxed);
    header.attached.store(1, Ordering::SeqCst);
    futex_wake(&header.attached);
    Ok(channel)
}

/// The layout a header announces, if the `real_len` bytes actually mapped hold it.
fn checked_layout(slot_size: u32, slots: u32, real_len: usize) -> Result<Layout, String> {
    let layout = Layout::new(slot_size as usize, slots).ok_or_else(|| {
        format!(
            "its header announces {slots} slots of {slot_size} bytes per ring, a layout whose \
             size is zero or overflows (the mapping is {real_len} bytes)"
        )
    })?;
    if layout.len > real_len {
        return Err(format!(
            "its header announces {slots} slots of {slot_size} bytes per ring, {} bytes, \
             but the mapping is {real_len} bytes",
            layout.len
        ));
    }
    // A chunk's length shares its published word with the MORE_FOLLOWS bit.
    if layout.slot_size > MAX_SLOT {
        return Err(format!(
            "its header announces slots of {slot_size} bytes, more than the {MAX_SLOT} a slot \
             may hold"
        ));
    }
    Ok(layout)
}

pub struct ShmChannel {
    shm: Shmem,
    wake: WakeMode,
    tx: usize,
    rx: usize,
    /// Checked against the mapping's real size (attach) or made by this side (accept).
    layout: Layout,
    other_pid: u32,
    /// The consumer's tail as last seen: while the ring has room by this count, the
    /// producer need not read the shared tail (one cache-line transfer less per message).
    tail_seen: u32,
    /// This side's own positions, kept here as well as published: the head of the ring it
    /// sends on, the tail of the ring it receives on. Only this side writes them, so the
    /// copies are exact, and reading them costs nothing; reading the published ones did,
    /// since the other side keeps pulling those lines over while it waits (about 50 ns
    /// of a 300 ns busy-poll round trip on a 2-vCPU AMD VM).
    tx_head: u32,
    rx_tail: u32,
}

// SAFETY: the mapping belongs to the process, not a thread; the channel is used by one
// thread at a time (it is moved, never shared).
unsafe impl Send for ShmChannel {}

impl ShmChannel {
    /// `side` 0 is the measuring side (sends on ring 0), 1 the peer (sends on ring 1).
    /// `layout` must fit in `shm` (`layout.len <= shm.len()`): every pointer into the
    /// segment is computed from it.
    fn new(shm: Shmem, layout: Layout, wake: WakeMode, side: usize, other_pid: u32) -> Self {
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
        };
        // Wherever the segment's creator left the rings.
        let count =
            |counter: &Counter| Published::unpack(counter.value.load(Ordering::Acquire)).count;
        channel.tx_head = count(&channel.ring(side).head);
        channel.tail_seen = count(&channel.ring(side).tail);
        channel.rx_tail = count(&channel.ring(1 - side).tail);
        channel
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping holds layout.len >= SLOTS_AT bytes, so an aligned header
        // (const assertions); only its atomics are used after setup.
        unsafe { &*self.shm.as_ptr().cast::<Header>() }
    }

    fn ring(&self, ring: usize) -> &RingControl {
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
    fn slot(&self, ring: usize, index: u32) -> *mut u8 {
        let offset = self.layout.slot_offset(ring, index);
        // SAFETY: offset + stride <= layout.len <= the mapping's length (Layout::slot_offset
        // and ShmChannel::new).
        unsafe { self.shm.as_ptr().add(offset) }
    }

    /// Waits until `ready(counter)` holds and returns the counter's value.
    fn wait_for(
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
                        tests::SLEEPS.with(|sleeps| sleeps.borrow_mut().push(_woke));
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

    fn publish(&self, counter: &Counter, value: Published) {
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
struct Incoming {
    expected: Option<usize>,
    taken: usize,
}

/// A chunk of the message being received, checked against the slot and the message:
/// where its bytes are (in the slot, which stays the other side's to read until its tail
/// is published), how many, and whether it ends its message.
struct Chunk {
    bytes: *const u8,
    len: usize,
    ends: bool,
}

impl ShmChannel {
    /// Sends `message` chunk by chunk from byte `sent` (0 for a whole message; never
    /// `message.len()` unless it is 0) at `head`, which it advances past every chunk
    /// published (also when it fails midway), as `tail_seen` follows the consumer.
    fn send_chunks(
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
    fn wait_for_free_slot(
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
    fn has_free_slot(&self, head: u32, tail_seen: &mut u32) -> bool {
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
    fn put_chunk(&self, message: &[u8], sent: usize, head: &mut u32) -> usize {
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
    unsafe fn put_raw(
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

    /// Checks the chunk at `tail` of the ring this side receives on, which the producer
    /// has published (its counter read as `published`, past `tail`), as the next chunk of
    /// `message`: the length it announces within `limit` (TooLarge, before anything is
    /// taken), the chunk within its slot and what its message has left, the same length
    /// announced by every chunk of a message, and its flag true to the message's end
    /// (Corrupt otherwise). Counts it as taken; the slot stays to be freed.
    #[inline]
    fn check_chunk(
        &self,
        tail: u32,
        published: Published,
        limit: usize,
        message: &mut Incoming,
    ) -> Result<Chunk, TransportError> {
        let slot = self.slot(self.rx, tail);
        // SAFETY (both reads): the counter was read with Acquire after the producer's
        // Release, so the slot's header and bytes are visible; the slot is ours until
        // tail is published. The counter tells this chunk's length when this chunk is
        // the last one published; otherwise the slot's header does. A message of one
        // chunk is as long as its chunk. Each field is read once: what is checked is
        // what is used.
        let published = match published.count == tail.wrapping_add(1) {
            true => published,
            false => {
                // SAFETY: `slot` starts a slot of the mapped segment (its place was
                // checked against the layout); the slot's 16-byte header holds this
                // aligned u32 at its start.
                let info = unsafe { slot.cast::<u32>().read() };
                Published::with_info(tail.wrapping_add(1), info)
            }
        };
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
    fn free_slot(&self, tail: &mut u32) {
        *tail = tail.wrapping_add(1);
        self.publish(&self.ring(self.rx).tail, Published::count(*tail));
    }

    /// Takes the chunk published at `tail` (its counter read as `published`) into `buf`,
    /// the next chunk of `message` once checked ([`Self::check_chunk`]), and frees its
    /// slot; says whether it ended the message.
    #[inline]
    fn take_chunk(
        &self,
        published: Published,
        tail: &mut u32,
        limit: usize,
        buf: &mut Vec<u8>,
        message: &mut Incoming,
    ) -> Result<bool, TransportError> {
        let chunk = self.check_chunk(*tail, published, limit, message)?;
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
    fn recv_chunks(
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
            let published =
                self.wait_for(&ring.head, |head| head.count != next, deadline, "message")?;
            if self.take_chunk(published, tail, limit, buf, &mut message)? {
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
    fn echo_chunks(
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
            let published =
                self.wait_for(&ring.head, |head| head.count != next, deadline, "message")?;
            let chunk = self.check_chunk(next, published, limit, &mut message)?;
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
    fn exchange_chunks(
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
            // Before the first request chunk is out, no reply chunk is due; after the
            // last, the reply is waited for as `recv` waits (whether or not it is there
            // yet), so that the counted instructions do not depend on when it comes.
            let ready = match sent > 0 && sent < request.len() {
                false => None,
                true => Some(Published::unpack(ring.head.value.load(Ordering::Acquire)))
                    .filter(|head| head.count != next),
            };
            let published = match ready {
                Some(published) => published,
                None if sent < request.len() && self.has_free_slot(*head, tail_seen) => {
                    sent = self.put_chunk(request, sent, head);
                    continue;
                }
                None => {
                    let what = match sent < request.len() {
                        true => "reply chunk while the request's slots are full",
                        false => "message",
                    };
                    self.wait_for(&ring.head, |head| head.count != next, deadline, what)?
                }
            };
            if self.take_chunk(published, tail, limit, reply, &mut message)? {
                if sent < request.len() {
                    self.send_chunks(request, sent, deadline, head, tail_seen)?;
                }
                return Ok(());
            }
        }
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::{process_alive, FutexWake};

    /// A segment of `len` bytes named like ours, holding a header written by hand: what a
    /// hostile or corrupted creator could leave. Unlinked when dropped.
    struct RawSegment {
        os_id: String,
        map: *mut u8,
        len: usize,
    }

    impl RawSegment {
        fn create(len: usize, slot_size: u32, slots: u32) -> Self {
            let os_id = format!("/{}", unique_name());
            let name = std::ffi::CString::new(os_id.clone()).unwrap();
            // SAFETY: plain POSIX calls on a fresh name; the mapping is `len` bytes and
            // the header fits in it (len >= SLOTS_AT in every caller).
            unsafe {
                let fd = libc::shm_open(
                    name.as_ptr(),
                    libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                    0o600,
                );
                assert!(fd >= 0, "shm_open: {}", std::io::Error::last_os_error());
                assert_eq!(libc::ftruncate(fd, len as libc::off_t), 0);
                let map = libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                );
                libc::close(fd);
                assert_ne!(map, libc::MAP_FAILED);
                let header = map.cast::<Header>();
                (*header).version = LAYOUT_VERSION;
                (*header).slot_size = slot_size;
                (*header).slots = slots;
                (*header).owner_pid.store(current_pid(), Ordering::Relaxed);
                (*header).magic.store(MAGIC, Ordering::Release);
                Self {
                    os_id,
                    map: map.cast(),
                    len,
                }
            }
        }
    }

    impl Drop for RawSegment {
        fn drop(&mut self) {
            let name = std::ffi::CString::new(self.os_id.clone()).unwrap();
            // SAFETY: the mapping and the name are ours.
            unsafe {
                libc::munmap(self.map.cast(), self.len);
                libc::shm_unlink(name.as_ptr());
            }
        }
    }

    /// The header of a 4096-byte segment claims 2^31 slots of 4294967280 bytes: the size
    /// they need wraps around to 4096 in 64-bit arithmetic. Attaching must refuse it
    /// (it used to accept it, and the first send wrote far outside the mapping).
    #[test]
    fn attach_refuses_a_header_whose_size_wraps_around() {
        let segment = RawSegment::create(4096, 4_294_967_280, 1 << 31);
        let deadline = Instant::now() + Duration::from_secs(5);
        match attach(&segment.os_id, WakeMode::Blocking, deadline) {
            Ok(mut channel) => {
                let _ = channel.send(b"hello", Instant::now() + Duration::from_millis(50));
                panic!("attached to a segment whose header does not fit it");
            }
            Err(e) => {
                let message = e.to_string();
                assert!(matches!(e, TransportError::Corrupt(_)), "{message}");
                assert!(message.contains("4096"), "{message}");
            }
        }
    }

    /// A slot larger than MAX_SLOT is refused, though the mapping would hold it: a chunk's
    /// length must leave the MORE_FOLLOWS bit of its published word clear.
    #[test]
    fn attach_refuses_slots_larger_than_a_slot_may_be() {
        let too_big = MAX_SLOT as u32 + 64;
        let need = Layout::new(too_big as usize, 1).unwrap().len;
        let segment = RawSegment::create(need, too_big, 1);
        let deadline = Instant::now() + Duration::from_secs(5);
        match attach(&segment.os_id, WakeMode::BusyPoll, deadline) {
            Err(TransportError::Corrupt(why)) => {
                assert!(
                    why.contains("more than the 1048576 a slot may hold"),
                    "{why}"
                )
            }
            other => panic!("{:?}", other.map(|c| c.layout)),
        }
        assert!(checked_layout(MAX_SLOT as u32, 1, usize::MAX).is_ok());
    }

    /// One byte short of what the header needs is refused; exactly enough is accepted.
    #[test]
    fn attach_checks_the_header_against_the_real_segment_size() {
        let need = Layout::new(64, 1).unwrap().len;
        assert_eq!(need, SLOTS_AT + 2 * 128);
        let deadline = || Instant::now() + Duration::from_secs(5);
        let short = RawSegment::create(need - 1, 64, 1);
        let e = attach(&short.os_id, WakeMode::BusyPoll, deadline())
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains(&format!("{need} bytes, but the mapping is {}", need - 1)),
            "{e}"
        );
        let exact = RawSegment::create(need, 64, 1);
        let channel = attach(&exact.os_id, WakeMode::BusyPoll, deadline()).unwrap();
        assert_eq!(channel.layout.len, need);
    }

    #[test]
    fn layouts_whose_size_overflows_or_is_empty_do_not_exist() {
        assert_eq!(Layout::new(0, 4), None);
        assert_eq!(Layout::new(4096, 0), None);
        assert_eq!(Layout::new(usize::MAX - 8, 1), None);
        assert_eq!(Layout::new(usize::MAX / 4, u32::MAX), None);
        let big = Layout::new(MAX_SLOT, SLOTS).unwrap();
        assert_eq!(big.len, SLOTS_AT + 2 * SLOTS as usize * (MAX_SLOT + 64));
        assert_eq!(big.slot_offset(1, 7) + big.stride, big.len);
    }

    /// A child process that exits by itself after `seconds`, not reaped: a zombie counts
    /// as gone.
    fn short_lived(seconds: &str) -> std::process::Child {
        std::process::Command::new("sleep")
            .arg(seconds)
            .spawn()
            .expect("starting sleep")
    }

    /// The two ends of one segment, both in this process.
    fn both_ends(wake: WakeMode) -> (Box<dyn Channel>, ShmChannel) {
        let acceptor = ShmAcceptor::create(wake, 4096).unwrap();
        let PeerAddress::Shm { os_id, .. } = acceptor.address() else {
            unreachable!()
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let peer = attach(&os_id, wake, deadline).unwrap();
        let owner = Box::new(acceptor).accept(current_pid(), deadline).unwrap();
        (owner, peer)
    }

    /// The other side publishes, then exits, while this side sleeps between two looks: the
    /// liveness check that finds it gone comes before the next look at the counter, and
    /// what it published must still be taken, not reported as a dead peer.
    #[test]
    fn what_a_peer_published_before_it_exited_is_taken() {
        let (_owner, mut peer) = both_ends(WakeMode::Blocking);
        let mut child = short_lived("0.15");
        peer.other_pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(5);
        let head = &peer.ring(peer.rx).head;
        // "Published" the moment the child is gone.
        let result = peer.wait_for(head, |_| !process_alive(child.id()), deadline, "test");
        child.wait().unwrap();
        assert_eq!(result.ok(), Some(Published::count(0)));
        peer.other_pid = current_pid();
    }

    /// Nothing published and the other side gone: PeerGone, within a liveness period or
    /// two, however far the deadline.
    #[test]
    fn a_dead_peer_with_nothing_published_is_gone() {
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        let mut child = short_lived("0");
        child.wait().unwrap();
        peer.other_pid = child.id();
        let start = Instant::now();
        let head = &peer.ring(peer.rx).head;
        let result = peer.wait_for(head, |_| false, start + Duration::from_secs(30), "test");
        assert!(
            matches!(result, Err(TransportError::PeerGone(_))),
            "{result:?}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }

    /// Writes a chunk header (the chunk's length, whether more follow, and the whole
    /// message's length) into slot `index` of the ring `peer` receives on, as its other
    /// side would, and publishes it (the counter then tells the same length and flag).
    fn forge_chunk(peer: &ShmChannel, index: u32, (chunk, more): (u32, bool), announced: u64) {
        let published = Published {
            count: index + 1,
            chunk,
            more,
        };
        let slot = peer.slot(peer.rx, index);
        // SAFETY: the slot is inside the mapping and nobody else writes it.
        unsafe {
            slot.cast::<u32>().write(published.chunk_info());
            slot.add(8).cast::<u64>().write(announced);
        }
        peer.ring(peer.rx)
            .head
            .value
            .store(published.pack(), Ordering::Release);
    }

    fn receive(peer: &mut ShmChannel, limit: usize) -> Result<Vec<u8>, TransportError> {
        let mut buf = Vec::new();
        peer.recv(&mut buf, limit, Instant::now() + Duration::from_secs(2))
            .map(|()| buf)
    }

    /// A message of 4 KiB slots is carried in chunks of one slot.
    #[test]
    fn a_channel_tells_its_chunk_size() {
        let (owner, peer) = both_ends(WakeMode::Blocking);
        assert_eq!(peer.chunk_size(), Some(4096));
        assert_eq!(owner.chunk_size(), Some(4096));
        let acceptor = ShmAcceptor::create(WakeMode::BusyPoll, 3 << 20).unwrap();
        assert_eq!(acceptor.layout.slot_size, MAX_SLOT);
        let acceptor = ShmAcceptor::create(WakeMode::BusyPoll, 5000).unwrap();
        assert_eq!(acceptor.layout.slot_size, 5056);
    }

    /// What a hostile or broken other side may write into the chunk headers: a chunk
    /// longer than a slot, a chunk longer than what is left of its message, a chunk that
    /// announces another message. Each is refused as corrupt, never read.
    #[test]
    fn chunks_that_do_not_fit_their_slot_or_message_are_refused() {
        let limit = 4 * 4096;
        // Longer than a slot, though the message would hold it.
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (4097, true), 3 * 4096);
        match receive(&mut peer, limit) {
            Err(TransportError::Corrupt(why)) => assert_eq!(
                why,
                "a 4097-byte chunk does not fit (slot 4096 bytes, 0 of 12288 received)"
            ),
            other => panic!("{other:?}"),
        }
        // Within a slot, but longer than the message.
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (200, true), 100);
        match receive(&mut peer, limit) {
            Err(TransportError::Corrupt(why)) => assert_eq!(
                why,
                "a 200-byte chunk does not fit (slot 4096 bytes, 0 of 100 received)"
            ),
            other => panic!("{other:?}"),
        }
        // Longer than what the first chunk left.
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (4096, true), 5000);
        forge_chunk(&peer, 1, (4096, false), 5000);
        match receive(&mut peer, limit) {
            Err(TransportError::Corrupt(why)) => assert_eq!(
                why,
                "a 4096-byte chunk does not fit (slot 4096 bytes, 4096 of 5000 received)"
            ),
            other => panic!("{other:?}"),
        }
        // A second chunk that belongs to another message.
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (4096, true), 8192);
        forge_chunk(&peer, 1, (4096, true), 12288);
        match receive(&mut peer, limit) {
            Err(TransportError::Corrupt(why)) => assert_eq!(
                why,
                "a chunk announced a 12288-byte message inside a 8192-byte one"
            ),
            other => panic!("{other:?}"),
        }
        // Shorter than its slot, yet more follows: empty ones could come for ever.
        for short in [0, 100] {
            let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
            forge_chunk(&peer, 0, (short, true), 8192);
            match receive(&mut peer, limit) {
                Err(TransportError::Corrupt(why)) => assert_eq!(
                    why,
                    format!("a {short}-byte chunk says more follows, but only the last chunk of a message may be shorter than its slot (4096 bytes)")
                ),
                other => panic!("{other:?}"),
            }
        }
        // Forged the same way, two chunks that fit are one message.
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (4096, true), 4196);
        forge_chunk(&peer, 1, (100, false), 4196);
        assert_eq!(receive(&mut peer, limit).unwrap().len(), 4196);
    }

    /// A chunk whose flag says the message goes on when its bytes end it, or ends when
    /// bytes are missing, is refused as corrupt.
    #[test]
    fn a_chunk_whose_flag_contradicts_its_message_is_refused() {
        let limit = 4 * 4096;
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (4096, true), 4096);
        match receive(&mut peer, limit) {
            Err(TransportError::Corrupt(why)) => assert_eq!(
                why,
                "a chunk says more follows its message, which has 4096 of 4096 bytes"
            ),
            other => panic!("{other:?}"),
        }
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (4096, true), 8192);
        forge_chunk(&peer, 1, (100, false), 8192);
        match receive(&mut peer, limit) {
            Err(TransportError::Corrupt(why)) => assert_eq!(
                why,
                "a chunk says it ends its message, which has 4196 of 8192 bytes"
            ),
            other => panic!("{other:?}"),
        }
    }

    /// A message of one chunk is as long as the chunk its counter publishes: the slot's
    /// header (its message length) is not read, which is what spares the consumer a second
    /// transfer between the CPUs. A header that disagrees goes unread.
    #[test]
    fn a_message_of_one_chunk_is_as_long_as_its_chunk() {
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (200, false), 100);
        assert_eq!(receive(&mut peer, 4 * 4096).unwrap().len(), 200);
    }

    /// Messages sent before the other side reads any: the counter then tells the last
    /// chunk's length, and each earlier message is read by its slot's header.
    #[test]
    fn a_consumer_that_falls_behind_reads_each_message_at_its_own_length() {
        let (mut owner, mut peer) = both_ends(WakeMode::BusyPoll);
        let deadline = Instant::now() + Duration::from_secs(5);
        let messages: [Vec<u8>; 3] = [vec![1; 10], vec![2; 4096 + 7], vec![3; 300]];
        for message in &messages {
            owner.send(message, deadline).unwrap();
        }
        for message in &messages {
            assert_eq!(&receive(&mut peer, 1 << 16).unwrap(), message);
        }
    }

    /// The count is the 32-bit half of the published word at the lower address, whatever
    /// the byte order: the half a futex waits on.
    #[test]
    fn the_count_is_the_futex_half_of_the_published_word() {
        for (count, chunk, more) in [(0, 0, false), (7, 4096, true), (u32::MAX, 1 << 20, false)] {
            let published = Published { count, chunk, more };
            let word = published.pack();
            assert_eq!(Published::unpack(word), published);
            let counter = Counter {
                value: AtomicU64::new(word),
                sleepers: AtomicU32::new(0),
            };
            // SAFETY: reading 4 bytes inside the counter's own value.
            let half = unsafe { counter.count_word().as_ptr().read() };
            assert_eq!(half, count);
        }
    }

    #[test]
    fn a_spinning_waiter_looks_at_the_clock_every_1024_spins() {
        assert!(keep_spinning(1) && keep_spinning(1023) && !keep_spinning(0));
        let looks: Vec<u32> = (1..=4096).filter(|&s| !keep_spinning(s)).collect();
        assert_eq!(looks, vec![1024, 2048, 3072, 4096]);
    }

    #[test]
    fn a_new_segment_must_hold_its_layout() {
        assert!(holds("/s", 4096, 4096).is_ok());
        assert!(holds("/s", 8192, 4096).is_ok());
        match holds("/s", 4095, 4096) {
            Err(TransportError::Corrupt(why)) => {
                assert_eq!(
                    why,
                    "the new segment /s is 4095 bytes, not the 4096 asked for"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    /// `len` bytes that differ from message to message and from offset to offset.
    fn pattern(seed: u8, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ (i >> 8) as u8 ^ seed)
            .collect()
    }

    /// Echoes with `echo` until the goodbye; returns the lengths echoed.
    fn echo_until_goodbye(
        mut peer: ShmChannel,
        limit: usize,
        deadline: Instant,
    ) -> std::thread::JoinHandle<Result<Vec<usize>, TransportError>> {
        std::thread::spawn(move || {
            let mut scratch = Vec::new();
            let mut lengths = Vec::new();
            loop {
                match peer.echo(&mut scratch, limit, deadline)? {
                    0 => return Ok(lengths),
                    n => lengths.push(n),
                }
            }
        })
    }

    /// Round trips of `exchange` with a peer that `echo`es: from one byte to more than
    /// four rings, around the slot (4 KiB) and the ring (4 slots), come back byte for
    /// byte in both wake modes; the goodbye is taken and not sent back.
    #[test]
    fn exchange_with_an_echoing_peer_carries_every_size() {
        let sizes = [
            1,
            100,
            4095,
            4096,
            4097,
            3 * 4096,
            4 * 4096,
            4 * 4096 + 1,
            18 * 4096 + 2048,
            64 * 4096 + 7,
        ];
        let limit = 1 << 20;
        for wake in [WakeMode::Blocking, WakeMode::BusyPoll] {
            let (mut owner, peer) = both_ends(wake);
            let deadline = Instant::now() + Duration::from_secs(20);
            let echo = echo_until_goodbye(peer, limit, deadline);
            let mut reply = vec![7; 3];
            for (i, &len) in sizes.iter().enumerate() {
                let request = pattern(i as u8, len);
                owner
                    .exchange(&request, &mut reply, limit, deadline)
                    .unwrap();
                assert!(reply == request, "{wake:?}: the {len}-byte reply differs");
            }
            owner.exchange(&[], &mut reply, limit, deadline).unwrap();
            assert!(reply.is_empty());
            assert_eq!(echo.join().unwrap().unwrap(), sizes);
            let after = owner.recv(
                &mut reply,
                limit,
                Instant::now() + Duration::from_millis(50),
            );
            assert!(
                matches!(after, Err(TransportError::Timeout { .. })),
                "{wake:?}: something after the goodbye: {after:?}"
            );
        }
    }

    /// `exchange` and `echo` keep the positions `send` and `recv` use: the same channel
    /// goes on with those, both ways, and back.
    #[test]
    fn exchange_and_echo_leave_the_rings_where_send_and_recv_go_on() {
        let (mut owner, mut peer) = both_ends(WakeMode::BusyPoll);
        let deadline = Instant::now() + Duration::from_secs(20);
        let echo = std::thread::spawn(move || {
            let mut buf = Vec::new();
            peer.echo(&mut buf, 1 << 20, deadline)?;
            peer.recv(&mut buf, 1 << 20, deadline)?;
            peer.send(&buf, deadline)?;
            peer.echo(&mut buf, 1 << 20, deadline)
        });
        let mut reply = Vec::new();
        for (i, len) in [9 * 4096 + 3, 2 * 4096 + 1, 5 * 4096]
            .into_iter()
            .enumerate()
        {
            let request = pattern(i as u8 + 40, len);
            if i == 1 {
                owner.send(&request, deadline).unwrap();
                owner.recv(&mut reply, 1 << 20, deadline).unwrap();
            } else {
                owner
                    .exchange(&request, &mut reply, 1 << 20, deadline)
                    .unwrap();
            }
            assert!(reply == request, "message {i}");
        }
        assert_eq!(echo.join().unwrap().unwrap(), 5 * 4096);
    }

    /// A peer that receives the whole request before it replies (here, after a pause, so
    /// that the request's slots are full first) leaves `exchange` waiting for a reply
    /// chunk that never comes: a Timeout at the deadline, in both wake modes, never
    /// later.
    #[test]
    fn exchange_with_a_peer_that_does_not_echo_as_it_receives_times_out() {
        for wake in [WakeMode::Blocking, WakeMode::BusyPoll] {
            let (mut owner, mut peer) = both_ends(wake);
            let late = std::thread::spawn(move || {
                // Once the measuring side has filled the ring it only waits for a reply
                // chunk; a peer that starts reading earlier lets it send on.
                let full = Instant::now() + Duration::from_secs(5);
                let published = || {
                    Published::unpack(peer.ring(peer.rx).head.value.load(Ordering::Acquire)).count
                };
                while published() < SLOTS && Instant::now() < full {
                    std::thread::sleep(Duration::from_millis(1));
                }
                std::thread::sleep(Duration::from_millis(100));
                let mut buf = Vec::new();
                peer.recv(&mut buf, 1 << 20, Instant::now() + Duration::from_secs(1))?;
                peer.send(&buf, Instant::now() + Duration::from_secs(1))
            });
            let request = pattern(1, 9 * 4096 + 5);
            let wait = Duration::from_millis(500);
            let start = Instant::now();
            let result = owner.exchange(&request, &mut Vec::new(), 1 << 20, start + wait);
            let took = start.elapsed();
            match result {
                Err(TransportError::Timeout { what }) => {
                    assert_eq!(what, "reply chunk while the request's slots are full")
                }
                other => panic!("{wake:?}: {other:?}"),
            }
            assert!(
                took >= wait && took < wait + Duration::from_secs(2),
                "{wake:?}: {took:?}"
            );
            // The peer had four chunks of nine, and no fifth.
            assert!(matches!(
                late.join().unwrap(),
                Err(TransportError::Timeout { .. })
            ));
        }
    }

    /// The reply of an exchange is checked as `recv` checks a message: longer than the
    /// limit is refused before anything is allocated, and a chunk whose flag contradicts
    /// its message is corrupt.
    #[test]
    fn exchange_checks_the_reply_as_recv_does() {
        let (mut owner, peer) = both_ends(WakeMode::BusyPoll);
        let deadline = Instant::now() + Duration::from_secs(5);
        let _echo = echo_until_goodbye(peer, 1 << 20, deadline);
        let mut reply = Vec::new();
        match owner.exchange(&pattern(2, 3 * 4096), &mut reply, 4096, deadline) {
            Err(TransportError::TooLarge { announced, limit }) => {
                assert_eq!((announced, limit), (3 * 4096, 4096));
                assert_eq!(reply.capacity(), 0);
            }
            other => panic!("{other:?}"),
        }
        let (mut owner, mut peer) = both_ends(WakeMode::BusyPoll);
        let liar = std::thread::spawn(move || {
            let mut buf = Vec::new();
            peer.recv(&mut buf, 1 << 20, deadline)?;
            let mut head = peer.tx_head;
            // SAFETY: `buf` holds 100 bytes, outside the segment.
            unsafe { peer.put_raw(buf.as_ptr(), buf.len(), true, buf.len(), &mut head) };
            Ok::<(), TransportError>(())
        });
        match owner.exchange(&pattern(3, 100), &mut reply, 4096, deadline) {
            Err(TransportError::Corrupt(why)) => assert_eq!(
                why,
                "a chunk says more follows its message, which has 100 of 100 bytes"
            ),
            other => panic!("{other:?}"),
        }
        liar.join().unwrap().unwrap();
    }

    /// `echo` checks what it receives as `recv` does, before it echoes a chunk: a message
    /// longer than the limit is refused with nothing sent back, a chunk that does not fit
    /// its slot is corrupt, and so are a chunk that announces another message and one
    /// whose flag contradicts its message's end (after the first chunk went back: the
    /// positions say so).
    #[test]
    fn echo_checks_what_it_receives_as_recv_does() {
        let limit = 4 * 4096;
        let echoed = |peer: &ShmChannel| {
            let published = peer.ring(peer.tx).head.value.load(Ordering::Acquire);
            (
                Published::unpack(published).count,
                peer.tx_head,
                peer.rx_tail,
            )
        };
        let echo = |peer: &mut ShmChannel| {
            peer.echo(
                &mut Vec::new(),
                limit,
                Instant::now() + Duration::from_secs(2),
            )
        };
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (4096, true), 10 * 4096);
        match echo(&mut peer) {
            Err(TransportError::TooLarge { announced, limit }) => {
                assert_eq!((announced, limit), (10 * 4096, 4 * 4096))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(echoed(&peer), (0, 0, 0));
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (4097, true), 3 * 4096);
        match echo(&mut peer) {
            Err(TransportError::Corrupt(why)) => assert_eq!(
                why,
                "a 4097-byte chunk does not fit (slot 4096 bytes, 0 of 12288 received)"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(echoed(&peer), (0, 0, 0));
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (4096, true), 8192);
        forge_chunk(&peer, 1, (4096, true), 12288);
        match echo(&mut peer) {
            Err(TransportError::Corrupt(why)) => assert_eq!(
                why,
                "a chunk announced a 12288-byte message inside a 8192-byte one"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(echoed(&peer), (1, 1, 1));
        let (_owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (4096, true), 8192);
        forge_chunk(&peer, 1, (100, false), 8192);
        match echo(&mut peer) {
            Err(TransportError::Corrupt(why)) => assert_eq!(
                why,
                "a chunk says it ends its message, which has 4196 of 8192 bytes"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(echoed(&peer), (1, 1, 1));
        // Forged the same way, two chunks that fit are echoed as one message.
        let (mut owner, mut peer) = both_ends(WakeMode::BusyPoll);
        forge_chunk(&peer, 0, (4096, true), 4196);
        forge_chunk(&peer, 1, (100, false), 4196);
        assert_eq!(echo(&mut peer).unwrap(), 4196);
        assert_eq!(echoed(&peer), (2, 2, 2));
        let mut reply = Vec::new();
        owner
            .recv(&mut reply, limit, Instant::now() + Duration::from_secs(2))
            .unwrap();
        assert_eq!(reply, vec![0; 4196]);
    }

    thread_local! {
        /// How each futex wait of this thread's `wait_for` ended, oldest first.
        pub(super) static SLEEPS: std::cell::RefCell<Vec<FutexWake>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }

    fn take_sleeps() -> Vec<FutexWake> {
        SLEEPS.with(|sleeps| std::mem::take(&mut *sleeps.borrow_mut()))
    }

    /// Blocking mode blocks: 300 ms of waiting for nothing are a handful of futex sleeps,
    /// each ended by its timeout (one liveness period), where a spinning waiter would
    /// loop millions of times. A futex never returns before its timeout unless woken, so
    /// the count is bounded however slow the machine.
    #[test]
    fn a_blocking_waiter_sleeps_rather_than_spins() {
        let (_owner, peer) = both_ends(WakeMode::Blocking);
        let head = &peer.ring(peer.rx).head;
        take_sleeps();
        let wait = Duration::from_millis(300);
        let result = peer.wait_for(head, |_| false, Instant::now() + wait, "test");
        assert!(
            matches!(result, Err(TransportError::Timeout { .. })),
            "{result:?}"
        );
        let sleeps = take_sleeps();
        let periods = (wait.as_millis() / LIVENESS_PERIOD.as_millis()) as usize;
        assert!(
            (1..=periods + 1).contains(&sleeps.len()),
            "{} sleeps in {wait:?}: {sleeps:?}",
            sleeps.len()
        );
        assert!(
            sleeps.iter().all(|&s| s != FutexWake::Woken),
            "nobody published, yet a sleep was woken: {sleeps:?}"
        );
    }

    /// A blocking waiter is woken by the other side's publish, not by the end of its
    /// sleep: over 50 round trips between two threads, this side's sleeps end by a wake
    /// (a publisher that forgot to wake would leave every one to time out).
    #[test]
    fn a_blocking_waiter_is_woken_by_the_publish() {
        let (mut owner, mut peer) = both_ends(WakeMode::Blocking);
        let deadline = Instant::now() + Duration::from_secs(20);
        let echo = std::thread::spawn(move || {
            let mut buf = Vec::new();
            for _ in 0..50 {
                // The echo side sleeps a little before each reply, so the measuring
                // side is asleep when the reply is published.
                peer.recv(&mut buf, 4096, deadline)?;
                std::thread::sleep(Duration::from_millis(1));
                peer.send(&buf, deadline)?;
            }
            Ok::<(), TransportError>(())
        });
        take_sleeps();
        let mut buf = Vec::new();
        for i in 0..50u8 {
            owner.send(&[i; 100], deadline).unwrap();
            owner.recv(&mut buf, 4096, deadline).unwrap();
            assert_eq!(buf, [i; 100]);
        }
        echo.join().unwrap().unwrap();
        let sleeps = take_sleeps();
        let woken = sleeps.iter().filter(|&&s| s == FutexWake::Woken).count();
        assert!(
            woken * 2 > sleeps.len(),
            "{woken} of {} sleeps were woken by the publish: {sleeps:?}",
            sleeps.len()
        );
    }

    #[test]
    fn liveness_is_looked_at_every_period_from_the_first_wait() {
        let start = Instant::now();
        let mut checks = LivenessChecks::default();
        assert!(!checks.due(start));
        assert!(!checks.due(start + LIVENESS_PERIOD - Duration::from_nanos(1)));
        assert!(checks.due(start + LIVENESS_PERIOD));
        let later = start + LIVENESS_PERIOD;
        assert!(!checks.due(later + LIVENESS_PERIOD / 2));
        assert!(checks.due(later + LIVENESS_PERIOD));
    }

    /// A peer that attached and exited before the measuring side looked has attached; one
    /// that never attached and is gone is refused at once.
    #[test]
    fn accept_takes_a_peer_that_attached_and_exited() {
        let mut child = short_lived("0");
        child.wait().unwrap();
        let dead = child.id();
        let acceptor = ShmAcceptor::create(WakeMode::Blocking, 4096).unwrap();
        acceptor.header().attached.store(1, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(5);
        assert!(Box::new(acceptor).accept(dead, deadline).is_ok());
        let acceptor = ShmAcceptor::create(WakeMode::Blocking, 4096).unwrap();
        let start = Instant::now();
        match Box::new(acceptor).accept(dead, start + Duration::from_secs(30)) {
            Err(TransportError::PeerGone(why)) => {
                assert!(why.contains("before it mapped the segment"), "{why}")
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("accepted a peer that never attached"),
        }
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;
        use proptest::test_runner::Config;

        /// What a segment's creator controls: its size, the header's fields, the ring
        /// counters and the chunk header of the slot the peer reads first.
        #[derive(Debug, Clone)]
        struct Segment {
            len: usize,
            slot_size: u32,
            slots: u32,
            magic_ok: bool,
            version: u32,
            counters: [u32; 4],
            chunk: u32,
            announced: u64,
        }

        fn segments() -> impl Strategy<Value = Segment> {
            // Anything at all, mostly refused ...
            let anything = (
                prop_oneof![
                    64usize..SLOTS_AT,
                    SLOTS_AT..SLOTS_AT + 64 * 1024,
                    Just(SLOTS_AT + 2 * 128),
                ],
                prop_oneof![any::<u32>(), 0u32..9000, Just(4_294_967_280)],
                prop_oneof![any::<u32>(), 0u32..20, Just(1 << 31)],
            );
            // ... and layouts within a few bytes of fitting their segment, either way.
            let near_fit =
                (1u32..4200, 1u32..9, -80isize..80).prop_map(|(slot_size, slots, delta)| {
                    let need = Layout::new(slot_size as usize, slots).unwrap().len;
                    (need.saturating_add_signed(delta), slot_size, slots)
                });
            let version = prop_oneof![9 => Just(LAYOUT_VERSION), 1 => any::<u32>()];
            (
                prop_oneof![anything, near_fit],
                (prop::bool::weighted(0.9), version),
                any::<[u32; 4]>(),
                (prop_oneof![any::<u32>(), 0u32..9000], any::<u64>()),
            )
                .prop_map(
                    |(
                        (len, slot_size, slots),
                        (magic_ok, version),
                        counters,
                        (chunk, announced),
                    )| {
                        Segment {
                            len,
                            slot_size,
                            slots,
                            magic_ok,
                            version,
                            counters,
                            chunk,
                            announced,
                        }
                    },
                )
        }

        proptest! {
            #![proptest_config(Config {
                cases: 512,
                failure_persistence: None,
                ..Config::default()
            })]

            /// Any header: attach either refuses with Corrupt, or accepts exactly when the
            /// layout fits the mapping, with that layout; then sending and receiving
            /// through it (at whatever ring positions the creator left) never crashes.
            #[test]
            fn attach_to_any_header_is_refused_or_consistent(segment in segments()) {
                let raw = RawSegment::create(segment.len, segment.slot_size, segment.slots);
                let fits = Layout::new(segment.slot_size as usize, segment.slots)
                    .filter(|layout| layout.len <= segment.len && segment.len >= SLOTS_AT);
                let valid = segment.magic_ok && segment.version == LAYOUT_VERSION;
                // SAFETY: the test's own mapping; the header fields are inside it, the ring
                // counters only when it holds SLOTS_AT bytes, and the slot only when the
                // layout fits it.
                unsafe {
                    let header = raw.map.cast::<Header>();
                    (*header).version = segment.version;
                    if !segment.magic_ok {
                        (*header).magic.store(!MAGIC, Ordering::Release);
                    }
                    if segment.len >= SLOTS_AT {
                        for (i, value) in segment.counters.iter().enumerate() {
                            raw.map.add(RINGS_AT + i * 64).cast::<u32>().write(*value);
                        }
                    }
                    if let Some(layout) = fits {
                        // The slot the peer reads first: ring 0 at its tail.
                        let slot = raw.map.add(layout.slot_offset(0, segment.counters[1]));
                        slot.cast::<u32>().write(segment.chunk);
                        slot.add(8).cast::<u64>().write(segment.announced);
                        // The other half of ring 0's published word: a chunk's length.
                        raw.map.add(RINGS_AT + 4).cast::<u32>().write(segment.chunk);
                    }
                }
                let deadline = Instant::now() + Duration::from_secs(5);
                match attach(&raw.os_id, WakeMode::BusyPoll, deadline) {
                    Ok(mut channel) => {
                        prop_assert!(valid, "attached to a segment with a bad magic or version");
                        prop_assert_eq!(Some(channel.layout), fits);
                        let now = Instant::now();
                        let _ = channel.send(&[0xa5; 300], now);
                        let mut buf = Vec::new();
                        match channel.recv(&mut buf, 1 << 16, now) {
                            Ok(()) => prop_assert!(buf.len() <= 1 << 16),
                            Err(TransportError::Timeout { .. })
                            | Err(TransportError::TooLarge { .. })
                            | Err(TransportError::Corrupt(_)) => {}
                            Err(e) => prop_assert!(false, "unexpected {e}"),
                        }
                    }
                    Err(TransportError::Corrupt(why)) => {
                        prop_assert!(!valid || fits.is_none(), "refused a fitting layout: {why}");
                        prop_assert!(why.contains(&raw.os_id), "{why}");
                    }
                    Err(e) => prop_assert!(false, "not a clear refusal: {e}"),
                }
            }
        }
    }
}
