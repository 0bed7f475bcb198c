//! The shared-memory probe: a handoff of chunks through rings of shared buffers, sized
//! as the shared-memory transport's, its waiting side spinning or asleep on a futex.

use super::timing::*;
use ipc_matrix_transport::{futex_wait, futex_wake};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How the waiting side of a shared-memory handoff waits.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Wait {
    Spin,
    Futex,
}

/// The largest chunk a handoff copies at once, and the chunks in flight each way: as the
/// shared-memory transport's largest slot and its ring. A message longer than a chunk
/// streams through the ring, the reader copying one chunk out while the writer copies the
/// next in, and the chunks stay in the caches; copying the whole message at once would
/// go through memory twice (two copies of 100 MB took 21 ms here, where the transport's
/// round trip of 100 MB, four copies streamed, took 17.5 ms).
pub(super) const CHUNK: usize = ipc_matrix_transport::SHM_CHUNK;
pub(super) const RING: u32 = ipc_matrix_transport::SHM_RING_SLOTS;

/// A count on a cache line of its own, with the number of threads asleep on it.
#[repr(C, align(64))]
pub(super) struct Line {
    pub(super) count: AtomicU32,
    pub(super) sleepers: AtomicU32,
}

impl Line {
    pub(super) fn new() -> Self {
        Self {
            count: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
        }
    }

    pub(super) fn publish(&self, count: u32, wait: Wait) {
        match wait {
            Wait::Spin => self.count.store(count, Ordering::Release),
            Wait::Futex => {
                self.count.store(count, Ordering::SeqCst);
                if self.sleepers.load(Ordering::SeqCst) != 0 {
                    futex_wake(&self.count);
                }
            }
        }
    }

    /// Waits until `ready(count)` (or until `give_up` says so) and returns the count.
    pub(super) fn wait_until(
        &self,
        ready: impl Fn(u32) -> bool,
        wait: Wait,
        give_up: &dyn Fn() -> bool,
    ) -> Result<u32, ProbeError> {
        let mut spins = 0u32;
        loop {
            let seen = self.count.load(Ordering::Acquire);
            if ready(seen) {
                return Ok(seen);
            }
            match wait {
                Wait::Spin => {
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    if !spins.is_multiple_of(1024) {
                        continue;
                    }
                }
                Wait::Futex => {
                    self.sleepers.fetch_add(1, Ordering::SeqCst);
                    let seen = self.count.load(Ordering::SeqCst);
                    if !ready(seen) {
                        let _ = futex_wait(&self.count, seen, Duration::from_millis(20));
                    }
                    self.sleepers.fetch_sub(1, Ordering::SeqCst);
                }
            }
            if give_up() {
                return Err(ProbeError::Stopped);
            }
        }
    }
}

/// One direction of a shared-memory handoff: a ring of chunk buffers, the writer's count
/// of chunks published and the reader's count of chunks taken, each on its own line.
pub(super) struct Direction {
    pub(super) published: Line,
    pub(super) taken: Line,
    pub(super) slots: Vec<UnsafeCell<Box<[u8]>>>,
}

// SAFETY: a slot is written only by the writer before it publishes the slot's chunk, and
// read only by the reader after it saw that (Release/Acquire on `published`) and before
// it counts the chunk taken (Release/Acquire on `taken`), never both at once.
unsafe impl Sync for Direction {}

/// Where each side of one direction is: the next chunk to publish or take, and the
/// reader's count as the writer last saw it.
#[derive(Default)]
pub(super) struct Cursor {
    pub(super) next: u32,
    pub(super) taken_seen: u32,
}

impl Direction {
    pub(super) fn new(len: usize) -> Self {
        let slot = len.clamp(1, CHUNK);
        Self {
            published: Line::new(),
            taken: Line::new(),
            slots: (0..RING)
                .map(|_| UnsafeCell::new(vec![0u8; slot].into_boxed_slice()))
                .collect(),
        }
    }

    /// Copies `chunk` (at most [`CHUNK`] bytes) into the next slot once it is free, and
    /// publishes it.
    pub(super) fn put_chunk(
        &self,
        chunk: &[u8],
        cursor: &mut Cursor,
        wait: Wait,
        give_up: &dyn Fn() -> bool,
    ) -> Result<(), ProbeError> {
        let n = cursor.next;
        if n.wrapping_sub(cursor.taken_seen) >= RING {
            cursor.taken_seen =
                self.taken
                    .wait_until(|taken| n.wrapping_sub(taken) < RING, wait, give_up)?;
        }
        let slot = self.slots[(n % RING) as usize].get();
        // SAFETY: see `Sync`: the reader has taken this slot's last chunk and does not
        // touch it until it sees this one published.
        unsafe { (&mut *slot)[..chunk.len()].copy_from_slice(chunk) };
        cursor.next = n.wrapping_add(1);
        self.published.publish(cursor.next, wait);
        Ok(())
    }

    /// True when the next slot is free (the reader's count looked at again if need be).
    pub(super) fn has_room(&self, cursor: &mut Cursor) -> bool {
        if cursor.next.wrapping_sub(cursor.taken_seen) < RING {
            return true;
        }
        cursor.taken_seen = self.taken.count.load(Ordering::Acquire);
        cursor.next.wrapping_sub(cursor.taken_seen) < RING
    }

    /// True when the next chunk to take is published.
    pub(super) fn is_ready(&self, cursor: &Cursor) -> bool {
        self.published.count.load(Ordering::Acquire) != cursor.next
    }

    /// Waits for the next chunk and copies it out into `out` (its length).
    pub(super) fn take_chunk(
        &self,
        out: &mut [u8],
        cursor: &mut Cursor,
        wait: Wait,
        give_up: &dyn Fn() -> bool,
    ) -> Result<(), ProbeError> {
        let n = cursor.next;
        self.published
            .wait_until(|published| published != n, wait, give_up)?;
        let slot = self.slots[(n % RING) as usize].get();
        // SAFETY: see `Sync`: the writer published this slot's chunk and does not touch
        // it again until it sees it taken.
        out.copy_from_slice(unsafe { &(&*slot)[..out.len()] });
        cursor.next = n.wrapping_add(1);
        self.taken.publish(cursor.next, wait);
        Ok(())
    }
}

/// The responder's side of a round trip of `len` bytes: each chunk copied straight from
/// the request's slot into the reply's, as soon as it is there.
pub(super) fn echo_chunks(
    (requests, replies): (&Direction, &Direction),
    len: usize,
    (from, to): (&mut Cursor, &mut Cursor),
    wait: Wait,
    give_up: &dyn Fn() -> bool,
) -> Result<(), ProbeError> {
    for start in (0..len).step_by(CHUNK) {
        let chunk = (len - start).min(CHUNK);
        let n = from.next;
        requests
            .published
            .wait_until(|published| published != n, wait, give_up)?;
        let m = to.next;
        if m.wrapping_sub(to.taken_seen) >= RING {
            to.taken_seen =
                replies
                    .taken
                    .wait_until(|taken| m.wrapping_sub(taken) < RING, wait, give_up)?;
        }
        let (source, target) = (
            requests.slots[(n % RING) as usize].get(),
            replies.slots[(m % RING) as usize].get(),
        );
        // SAFETY: see `Sync`: the request's slot is published and not yet taken, the
        // reply's is free and not yet published; they are two different buffers.
        unsafe { (&mut *target)[..chunk].copy_from_slice(&(&*source)[..chunk]) };
        to.next = m.wrapping_add(1);
        replies.published.publish(to.next, wait);
        from.next = n.wrapping_add(1);
        requests.taken.publish(from.next, wait);
    }
    Ok(())
}

/// The measuring side's round trip: request chunks put while reply chunks are taken as
/// they come back. Waiting for a reply chunk when nothing else can be done is safe
/// because the responder echoes each chunk as it takes it.
pub(super) fn exchange_chunks(
    (requests, replies): (&Direction, &Direction),
    (request, reply): (&[u8], &mut [u8]),
    (to, from): (&mut Cursor, &mut Cursor),
    wait: Wait,
    give_up: &dyn Fn() -> bool,
) -> Result<(), ProbeError> {
    let total = request.len().div_ceil(CHUNK);
    let (mut sent, mut got) = (0, 0);
    while got < total {
        let take = got < sent && replies.is_ready(from);
        if !take && sent < total && requests.has_room(to) {
            let start = sent * CHUNK;
            let end = (start + CHUNK).min(request.len());
            requests.put_chunk(&request[start..end], to, wait, give_up)?;
            sent += 1;
            continue;
        }
        // A reply chunk is there, or is due: all chunks are sent, or the ring is full.
        let start = got * CHUNK;
        let end = (start + CHUNK).min(reply.len());
        replies.take_chunk(&mut reply[start..end], from, wait, give_up)?;
        got += 1;
    }
    Ok(())
}

/// Ping-pong through shared buffers, as a shared-memory transport must at the least: the
/// payload copied into the request's buffers, straight from those into the reply's by the
/// responder, and out of those; each chunk published on a cache line of its own, a long
/// payload streamed through a ring of chunks, the reply's first chunks coming back while
/// the request's last ones are still being written.
pub(super) fn handoff(len: usize, peer_cpu: usize, wait: Wait) -> Result<OpenProbe, ProbeError> {
    let request_way = Arc::new(Direction::new(len));
    let reply_way = Arc::new(Direction::new(len));
    let stop = Arc::new(AtomicBool::new(false));
    let responder = {
        let (request_way, reply_way, stop) = (request_way.clone(), reply_way.clone(), stop.clone());
        responder(peer_cpu, move || {
            let (mut from, mut to) = (Cursor::default(), Cursor::default());
            let stopped = || stop.load(Ordering::Relaxed);
            let ways = (&*request_way, &*reply_way);
            while !stopped() && echo_chunks(ways, len, (&mut from, &mut to), wait, &stopped).is_ok()
            {
            }
            Ok(())
        })
    };
    let request = vec![0x5au8; len];
    let mut reply = vec![0u8; len];
    let (mut to, mut from) = (Cursor::default(), Cursor::default());
    let (requests, replies) = (request_way.clone(), reply_way.clone());
    Ok(OpenProbe {
        responder,
        one: Box::new(move |give_up| {
            exchange_chunks(
                (&requests, &replies),
                (&request, &mut reply),
                (&mut to, &mut from),
                wait,
                give_up,
            )
        }),
        stop: Box::new(move || {
            stop.store(true, Ordering::Relaxed);
            for line in [&request_way.published, &reply_way.taken] {
                futex_wake(&line.count);
            }
        }),
    })
}
