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
//! Memory the other process writes is only touched through raw pointers and atomics, never
//! through `&[u8]`. The segment is unlinked as soon as the peer has mapped it, so nothing
//! remains in /dev/shm even if both processes are killed later.

use crate::cleanup::unique_name;
use crate::framing::remaining;
use crate::platform::{current_pid, ensure_alive, futex_wait, futex_wake};
use crate::{Acceptor, Channel, PeerAddress, TransportError, WakeMode};
use shared_memory::{Shmem, ShmemConf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const MAGIC: u64 = u64::from_le_bytes(*b"ipcmxshm");
const LAYOUT_VERSION: u32 = 1;
const SLOTS: u32 = 4;
const MAX_SLOT: usize = 1 << 20;
const MIN_SLOT: usize = 4096;
const SLOT_HEADER: usize = 16;
const RINGS_AT: usize = 128;
const SLOTS_AT: usize = 4096;
/// How often a waiter checks that the other process still lives.
const LIVENESS_PERIOD: Duration = Duration::from_millis(20);
/// Spins between two looks at the clock in busy-poll mode.
const SPINS_PER_CHECK: u32 = 1024;

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

/// A counter on a cache line of its own, with the number of processes sleeping on it.
#[repr(C, align(64))]
struct Counter {
    value: AtomicU32,
    sleepers: AtomicU32,
}

#[repr(C)]
struct RingControl {
    head: Counter,
    tail: Counter,
}

fn slot_stride(slot_size: usize) -> usize {
    (SLOT_HEADER + slot_size).div_ceil(64) * 64
}

fn segment_len(slot_size: usize, slots: u32) -> usize {
    SLOTS_AT + 2 * slots as usize * slot_stride(slot_size)
}

pub struct ShmAcceptor {
    shm: Shmem,
    wake: WakeMode,
}

impl ShmAcceptor {
    pub fn create(wake: WakeMode, max_message: usize) -> Result<Self, TransportError> {
        let slot_size = max_message.clamp(MIN_SLOT, MAX_SLOT).div_ceil(64) * 64;
        let os_id = format!("/{}", unique_name());
        let shm = ShmemConf::new()
            .size(segment_len(slot_size, SLOTS))
            .os_id(&os_id)
            .create()
            .map_err(|e| TransportError::Io {
                context: "creating the shared memory segment",
                source: std::io::Error::other(e.to_string()),
            })?;
        // SAFETY: the mapping is at least SLOTS_AT bytes and page-aligned; nobody else has
        // it yet, and the magic number is published last, with Release.
        unsafe {
            let header = shm.as_ptr().cast::<Header>();
            (*header).version = LAYOUT_VERSION;
            (*header).slot_size = slot_size as u32;
            (*header).slots = SLOTS;
            (*header).owner_pid.store(current_pid(), Ordering::Relaxed);
            (*header).magic.store(MAGIC, Ordering::Release);
        }
        Ok(Self { shm, wake })
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
        while self.header().attached.load(Ordering::Acquire) == 0 {
            let wait = remaining(deadline, "attachment of the peer to the segment")?;
            ensure_alive(peer, "before it mapped the segment")?;
            futex_wait(&self.header().attached, 0, wait.min(LIVENESS_PERIOD));
        }
        // Both sides have it mapped: unlink now, so a crash of either leaves nothing.
        let name = std::ffi::CString::new(self.shm.get_os_id()).expect("no NUL in os_id");
        // SAFETY: a valid C string; unlinking a name does not unmap anything.
        unsafe { libc::shm_unlink(name.as_ptr()) };
        self.shm.set_owner(false);
        let peer_pid = self.header().peer_pid.load(Ordering::Acquire);
        Ok(Box::new(ShmChannel::new(self.shm, self.wake, 0, peer_pid)))
    }
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
    if shm.len() < SLOTS_AT {
        return Err(TransportError::Corrupt(format!(
            "segment {os_id} is {} bytes, too small for a header",
            shm.len()
        )));
    }
    // SAFETY: the mapping holds at least a header; fields other than atomics are read only
    // after the magic number was seen with Acquire.
    let (slot_size, slots, owner) = unsafe {
        let header = &*shm.as_ptr().cast::<Header>();
        if header.magic.load(Ordering::Acquire) != MAGIC || header.version != LAYOUT_VERSION {
            return Err(TransportError::Corrupt(format!(
                "segment {os_id} is not an ipc-matrix segment of layout {LAYOUT_VERSION}"
            )));
        }
        (
            header.slot_size as usize,
            header.slots,
            header.owner_pid.load(Ordering::Relaxed),
        )
    };
    if slots == 0 || slot_size == 0 || shm.len() < segment_len(slot_size, slots) {
        return Err(TransportError::Corrupt(format!(
            "segment {os_id} is {} bytes, too small for {slots} slots of {slot_size} bytes",
            shm.len()
        )));
    }
    let channel = ShmChannel::new(shm, wake, 1, owner);
    let header = channel.header();
    header.peer_pid.store(current_pid(), Ordering::Relaxed);
    header.attached.store(1, Ordering::SeqCst);
    futex_wake(&header.attached);
    Ok(channel)
}

pub struct ShmChannel {
    shm: Shmem,
    wake: WakeMode,
    tx: usize,
    rx: usize,
    slot_size: usize,
    slots: u32,
    other_pid: u32,
    /// The consumer's tail as last seen: while the ring has room by this count, the
    /// producer need not read the shared tail (one cache-line transfer less per message).
    tail_seen: u32,
}

// SAFETY: the mapping belongs to the process, not a thread; the channel is used by one
// thread at a time (it is moved, never shared).
unsafe impl Send for ShmChannel {}

impl ShmChannel {
    /// `side` 0 is the measuring side (sends on ring 0), 1 the peer (sends on ring 1).
    fn new(shm: Shmem, wake: WakeMode, side: usize, other_pid: u32) -> Self {
        // SAFETY: the header was initialised by the creator before either side gets here.
        let (slot_size, slots) = unsafe {
            let header = &*shm.as_ptr().cast::<Header>();
            (header.slot_size as usize, header.slots)
        };
        Self {
            shm,
            wake,
            tx: side,
            rx: 1 - side,
            slot_size,
            slots,
            other_pid,
            tail_seen: 0,
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: see new.
        unsafe { &*self.shm.as_ptr().cast::<Header>() }
    }

    fn ring(&self, ring: usize) -> &RingControl {
        // SAFETY: RINGS_AT + 2 * size_of::<RingControl>() <= SLOTS_AT, checked at attach.
        unsafe {
            &*self
                .shm
                .as_ptr()
                .add(RINGS_AT)
                .cast::<RingControl>()
                .add(ring)
        }
    }

    fn slot(&self, ring: usize, index: u32) -> *mut u8 {
        let n = ring * self.slots as usize + (index % self.slots) as usize;
        // SAFETY: n < 2 * slots, and the segment holds 2 * slots strides after SLOTS_AT.
        unsafe {
            self.shm
                .as_ptr()
                .add(SLOTS_AT + n * slot_stride(self.slot_size))
        }
    }

    /// Waits until `ready(counter)` holds and returns the counter's value.
    fn wait_for(
        &self,
        counter: &Counter,
        ready: impl Fn(u32) -> bool,
        deadline: Instant,
        what: &'static str,
    ) -> Result<u32, TransportError> {
        // The clock is read only once waiting has begun: a reply that is already there
        // costs no clock reads (each is tens of nanoseconds in a VM).
        let mut next_liveness_check: Option<Instant> = None;
        let mut spins = 0u32;
        loop {
            let value = counter.value.load(Ordering::Acquire);
            if ready(value) {
                return Ok(value);
            }
            match self.wake {
                WakeMode::BusyPoll => {
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    if !spins.is_multiple_of(SPINS_PER_CHECK) {
                        continue;
                    }
                }
                WakeMode::Blocking => {
                    counter.sleepers.fetch_add(1, Ordering::SeqCst);
                    let seen = counter.value.load(Ordering::SeqCst);
                    if !ready(seen) {
                        let wait = remaining(deadline, what)?;
                        futex_wait(&counter.value, seen, wait.min(LIVENESS_PERIOD));
                    }
                    counter.sleepers.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let now = Instant::now();
            remaining(deadline, what)?;
            let check_at = *next_liveness_check.get_or_insert(now + LIVENESS_PERIOD);
            if now >= check_at {
                ensure_alive(self.other_pid, "while waiting")?;
                next_liveness_check = Some(now + LIVENESS_PERIOD);
            }
        }
    }

    fn publish(&self, counter: &Counter, value: u32) {
        match self.wake {
            WakeMode::BusyPoll => counter.value.store(value, Ordering::Release),
            WakeMode::Blocking => {
                counter.value.store(value, Ordering::SeqCst);
                if counter.sleepers.load(Ordering::SeqCst) > 0 {
                    futex_wake(&counter.value);
                }
            }
        }
    }
}

impl Channel for ShmChannel {
    fn send(&mut self, message: &[u8], deadline: Instant) -> Result<(), TransportError> {
        let ring = self.ring(self.tx);
        let mut tail_seen = self.tail_seen;
        let mut sent = 0;
        loop {
            // Only this side writes head, so a relaxed read of our own value is exact.
            let head = ring.head.value.load(Ordering::Relaxed);
            let slots = self.slots;
            if head.wrapping_sub(tail_seen) >= slots {
                tail_seen = self.wait_for(
                    &ring.tail,
                    |tail| head.wrapping_sub(tail) < slots,
                    deadline,
                    "free slot (the other side does not read)",
                )?;
            }
            let chunk = (message.len() - sent).min(self.slot_size);
            let slot = self.slot(self.tx, head);
            // SAFETY: the slot is ours until head is published; it has room for the header
            // and slot_size bytes; `chunk` <= slot_size and the source range is in bounds.
            unsafe {
                slot.cast::<u32>().write(chunk as u32);
                slot.add(8).cast::<u64>().write(message.len() as u64);
                std::ptr::copy_nonoverlapping(
                    message.as_ptr().add(sent),
                    slot.add(SLOT_HEADER),
                    chunk,
                );
            }
            self.publish(&ring.head, head.wrapping_add(1));
            sent += chunk;
            if sent == message.len() {
                self.tail_seen = tail_seen;
                return Ok(());
            }
        }
    }

    fn recv(
        &mut self,
        buf: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let ring = self.ring(self.rx);
        let mut total: Option<usize> = None;
        buf.clear();
        loop {
            let tail = ring.tail.value.load(Ordering::Relaxed);
            self.wait_for(&ring.head, |head| head != tail, deadline, "message")?;
            let slot = self.slot(self.rx, tail);
            // SAFETY: head was read with Acquire after the producer's Release, so the slot's
            // header and data are visible; the slot is ours until tail is published.
            let (chunk, announced) = unsafe {
                (
                    slot.cast::<u32>().read() as usize,
                    slot.add(8).cast::<u64>().read(),
                )
            };
            let expected = match total {
                None => {
                    if announced > limit as u64 {
                        return Err(TransportError::TooLarge { announced, limit });
                    }
                    buf.reserve(announced as usize);
                    *total.insert(announced as usize)
                }
                Some(t) if t as u64 == announced => t,
                Some(t) => {
                    return Err(TransportError::Corrupt(format!(
                        "a chunk announced a {announced}-byte message inside a {t}-byte one"
                    )))
                }
            };
            if chunk > self.slot_size || buf.len() + chunk > expected {
                return Err(TransportError::Corrupt(format!(
                    "a {chunk}-byte chunk does not fit (slot {} bytes, {} of {expected} received)",
                    self.slot_size,
                    buf.len()
                )));
            }
            // SAFETY: capacity was reserved for the whole message; the chunk is in bounds.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    slot.add(SLOT_HEADER),
                    buf.as_mut_ptr().add(buf.len()),
                    chunk,
                );
                buf.set_len(buf.len() + chunk);
            }
            self.publish(&ring.tail, tail.wrapping_add(1));
            if buf.len() == expected {
                return Ok(());
            }
        }
    }
}
