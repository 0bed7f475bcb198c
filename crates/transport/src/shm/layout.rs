//! The segment's layout: its header, the two rings' counters, and where each slot is.
//! Both processes compute every pointer into the segment from a [`Layout`] checked against
//! what is mapped.

use std::sync::atomic::{AtomicU32, AtomicU64};

pub(super) const MAGIC: u64 = u64::from_le_bytes(*b"ipcmxshm");
pub(super) const LAYOUT_VERSION: u32 = 2;
pub(super) const SLOTS: u32 = 4;
pub(super) const MAX_SLOT: usize = 1 << 20;
pub(super) const MIN_SLOT: usize = 4096;
pub(super) const SLOT_HEADER: usize = 16;
pub(super) const RINGS_AT: usize = 128;
pub(super) const SLOTS_AT: usize = 4096;

#[repr(C)]
pub(super) struct Header {
    pub(super) magic: AtomicU64,
    pub(super) version: u32,
    pub(super) slot_size: u32,
    pub(super) slots: u32,
    pub(super) owner_pid: AtomicU32,
    pub(super) peer_pid: AtomicU32,
    pub(super) attached: AtomicU32,
}

/// A count of published (or freed) slots, on a cache line of its own, with the number of
/// processes sleeping on it. The value is a [`Published`] word: the count and, on the
/// producer's side, the length of the chunk just published, so that one store publishes
/// both and a consumer that keeps up learns the length from the line it has just
/// fetched. Reading it from the slot's header instead cost one more transfer between the
/// CPUs: about 50-70 ns of a 300 ns busy-poll round trip on a 2-vCPU AMD VM.
#[repr(C, align(64))]
pub(super) struct Counter {
    pub(super) value: AtomicU64,
    pub(super) sleepers: AtomicU32,
}

impl Counter {
    /// The 32-bit half of the value that holds the count, which a futex waits on (the
    /// half at the lower address, whatever the byte order; see [`Published`]). Only the
    /// kernel reads it through this reference.
    pub(super) fn count_word(&self) -> &AtomicU32 {
        // SAFETY: the value is 8-byte aligned, so its first 4 bytes are an aligned u32
        // inside it; this process never loads or stores through the reference (it is
        // handed to futex calls only).
        unsafe { &*self.value.as_ptr().cast::<AtomicU32>() }
    }
}

/// A counter's value: the count in the 32 bits at the lower address, the length of the
/// chunk just published (and whether more chunks of its message follow) in the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Published {
    pub(super) count: u32,
    pub(super) chunk: u32,
    pub(super) more: bool,
}

/// Set in a published chunk length when more chunks of the same message follow.
pub(super) const MORE_FOLLOWS: u32 = 1 << 31;

impl Published {
    pub(super) fn count(count: u32) -> Self {
        Self {
            count,
            chunk: 0,
            more: false,
        }
    }

    /// The count published with a chunk's length and flag as [`Published::chunk_info`]
    /// gives them.
    pub(super) fn with_info(count: u32, info: u32) -> Self {
        Self {
            count,
            chunk: info & !MORE_FOLLOWS,
            more: info & MORE_FOLLOWS != 0,
        }
    }

    /// The chunk's length with [`MORE_FOLLOWS`] when more chunks follow.
    pub(super) fn chunk_info(self) -> u32 {
        self.chunk | if self.more { MORE_FOLLOWS } else { 0 }
    }

    pub(super) fn pack(self) -> u64 {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&self.count.to_ne_bytes());
        bytes[4..].copy_from_slice(&self.chunk_info().to_ne_bytes());
        u64::from_ne_bytes(bytes)
    }

    pub(super) fn unpack(word: u64) -> Self {
        let bytes = word.to_ne_bytes();
        let half = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        Self::with_info(half(0), half(4))
    }
}

#[repr(C)]
pub(super) struct RingControl {
    pub(super) head: Counter,
    pub(super) tail: Counter,
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
pub(super) struct Layout {
    pub(super) slot_size: usize,
    pub(super) slots: u32,
    pub(super) stride: usize,
    pub(super) len: usize,
}

impl Layout {
    /// `None` when there are no slots, a slot holds nothing, or the sizes overflow.
    pub(super) const fn new(slot_size: usize, slots: u32) -> Option<Self> {
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
    pub(super) fn slot_offset(&self, ring: usize, index: u32) -> usize {
        debug_assert!(ring < 2);
        let n = ring * self.slots as usize + (index % self.slots) as usize;
        SLOTS_AT + n * self.stride
    }
}

/// Why the layout a segment's header announces cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LayoutError {
    #[error(
        "its header announces {slots} slots of {slot_size} bytes per ring, a layout whose \
         size is zero or overflows (the mapping is {real_len} bytes)"
    )]
    ZeroOrOverflowing {
        slots: u32,
        slot_size: u32,
        real_len: usize,
    },
    #[error(
        "its header announces {slots} slots of {slot_size} bytes per ring, {len} bytes, \
         but the mapping is {real_len} bytes"
    )]
    LargerThanTheMapping {
        slots: u32,
        slot_size: u32,
        len: usize,
        real_len: usize,
    },
    #[error(
        "its header announces slots of {slot_size} bytes, more than the {MAX_SLOT} a slot \
         may hold"
    )]
    SlotTooLarge { slot_size: u32 },
}

/// The layout a header announces, if the `real_len` bytes actually mapped hold it.
pub(super) fn checked_layout(
    slot_size: u32,
    slots: u32,
    real_len: usize,
) -> Result<Layout, LayoutError> {
    let layout = Layout::new(slot_size as usize, slots).ok_or(LayoutError::ZeroOrOverflowing {
        slots,
        slot_size,
        real_len,
    })?;
    if layout.len > real_len {
        return Err(LayoutError::LargerThanTheMapping {
            slots,
            slot_size,
            len: layout.len,
            real_len,
        });
    }
    // A chunk's length shares its published word with the MORE_FOLLOWS bit.
    if layout.slot_size > MAX_SLOT {
        return Err(LayoutError::SlotTooLarge { slot_size });
    }
    Ok(layout)
}
