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
//! through `&[u8]`, on the copying path; the loaned path (`loans.rs`) lends slots as
//! slices, trusting the other process as iceoryx2 does. The segment is unlinked as soon as the peer has mapped it, so nothing
//! remains in /dev/shm even if both processes are killed later.

mod attach;
mod channel;
mod layout;
mod loans;
pub(crate) mod sweep;
#[cfg(test)]
mod tests;

pub use attach::{attach, ShmAcceptor};
/// The most bytes a chunk carries (one slot of the ring); a longer message streams through
/// in chunks of this size, the last one shorter.
pub const SHM_CHUNK: usize = layout::MAX_SLOT;
/// Slots per ring: chunks a side may publish before the other has taken one.
pub const SHM_RING_SLOTS: u32 = layout::SLOTS;
