//! Making a segment (the measuring side's [`ShmAcceptor`]) and attaching to one (the
//! peer's [`attach`]).

use super::channel::ShmChannel;
use super::layout::*;
use crate::address::PeerAddress;
use crate::artifact::{unique_name, LifeLock, SHM_DIR};
use crate::contract::{Acceptor, Channel};
use crate::error::TransportError;
use crate::platform::{current_pid, ensure_alive, futex_wait, futex_wake};
use crate::wait::{remaining, LIVENESS_PERIOD};
use ipc_matrix_spec::WakeMode;
use shared_memory::{Shmem, ShmemConf};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub struct ShmAcceptor {
    pub(super) shm: Shmem,
    pub(super) wake: WakeMode,
    /// What this side wrote into the header; never read back from the shared header, which
    /// the peer could overwrite.
    pub(super) layout: Layout,
    /// Says the segment's creator is alive until the segment is unlinked, so no sweep of
    /// another run removes it ([`crate::sweep`]).
    pub(super) _alive: LifeLock,
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

    pub(super) fn header(&self) -> &Header {
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
pub(super) fn holds(os_id: &str, got: usize, wanted: usize) -> Result<(), TransportError> {
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
