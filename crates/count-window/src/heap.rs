//! A heap for counted processes: where a block lands, and what taking it costs, depend on
//! its size alone, not on what the process allocated before.
//!
//! # Why
//!
//! Under glibc's allocator a block's address depends on every allocation before it: the
//! length of the checkout's path, of matrix.yaml's, of `TMPDIR`, of a run id or a pid in
//! a socket name. The code a window counts then takes other paths for other addresses:
//! `memcpy`, `memset` and comparisons align to 16 or 64 bytes before their main loop,
//! `calloc` skips the zeroing of memory fresh from the kernel, and a free list is found
//! full or empty. Measured: capnp's encoding of one frame counted 2,196 or 2,034
//! instructions for matrix.yaml at paths of other lengths, the same binary on the same
//! machine.
//!
//! # How
//!
//! [`CountedHeap`] is a `#[global_allocator]` that, in a process that counts (one whose
//! environment names a count file, [`crate::COUNT_FILE_ENV`], when it first allocates),
//! serves every allocation from power-of-two size classes:
//! - a block of class `2^k` lies at a multiple of `min(2^k, 4096)`: a 200-byte buffer is
//!   always 256-byte aligned, whatever came before;
//! - taking a block pops the class's free list or carves the next block of the class's
//!   current 1 MiB chunk; giving it back pushes it: a few instructions, the same for every
//!   block of the class. A new chunk is one `mmap`, once per megabyte of a class;
//! - zeroed blocks are always zeroed (`memset`), fresh or not.
//!
//! A process that does not count takes `System` (glibc's malloc), so native timings are
//! untouched: one relaxed load and a branch more per call. A layout aligned to more than
//! a page also goes to `System`, in every process: the layout alone decides, so a block
//! is always given back to the allocator it came from.
//!
//! Threads share one lock. A thread that finds it taken pauses its count while it waits
//! (see [`crate::pause`]), so another thread's allocation costs the counted one only the
//! few instructions of finding the lock taken and pausing.
//!
//! Memory is never returned to the system (freed blocks stay on their class's list), and
//! classes waste up to half of a block: fine for the short processes of an emulated count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// The smallest class, 2^4 = 16 bytes: what glibc aligns every block to.
const MIN_SHIFT: u32 = 4;
/// Classes up to 2^47 bytes (128 TiB): beyond any address space a guest has.
const CLASSES: usize = 44;
const PAGE: usize = 4096;
/// Classes up to this size are carved from chunks of this size; larger blocks are a
/// mapping each.
const CHUNK: usize = 1 << 20;

/// [`crate::COUNT_FILE_ENV`], for `getenv`.
const COUNT_FILE_C: &std::ffi::CStr = c"IPC_MATRIX_COUNT_FILE";

/// Whether this process counts: not yet known, no, yes.
const UNKNOWN: u8 = 0;
const NATIVE: u8 = 1;
const COUNTED: u8 = 2;

/// The process's global allocator: size classes when it counts, `System` otherwise (see
/// the module docs).
///
/// ```ignore
/// #[global_allocator]
/// static HEAP: ipc_matrix_count_window::heap::CountedHeap = ipc_matrix_count_window::heap::CountedHeap::new();
/// ```
pub struct CountedHeap {
    mode: AtomicU8,
    locked: AtomicBool,
    classes: UnsafeCell<[Class; CLASSES]>,
}

// SAFETY: `classes` is only touched with `locked` held (see `CountedHeap::with_classes`).
unsafe impl Sync for CountedHeap {}

#[derive(Clone, Copy)]
struct Class {
    /// Freed blocks, each holding the address of the next in its first word.
    free: *mut u8,
    /// The next never-used block of the current chunk, and the chunk's end.
    next: *mut u8,
    end: *mut u8,
}

const EMPTY: Class = Class {
    free: ptr::null_mut(),
    next: ptr::null_mut(),
    end: ptr::null_mut(),
};

impl CountedHeap {
    pub const fn new() -> Self {
        Self {
            mode: AtomicU8::new(UNKNOWN),
            locked: AtomicBool::new(false),
            classes: UnsafeCell::new([EMPTY; CLASSES]),
        }
    }

    /// Whether this process serves its allocations from size classes (it counts).
    pub fn is_counted(&self) -> bool {
        self.counted()
    }

    fn counted(&self) -> bool {
        match self.mode.load(Ordering::Relaxed) {
            NATIVE => false,
            COUNTED => true,
            _ => {
                // SAFETY: getenv reads the environment without allocating; nothing in
                // this process changes the count file's variable.
                let set = unsafe {
                    let value = libc::getenv(COUNT_FILE_C.as_ptr());
                    !value.is_null() && *value != 0
                };
                let mode = if set { COUNTED } else { NATIVE };
                // The first thread to decide wins; every later call sees its decision.
                match self.mode.compare_exchange(
                    UNKNOWN,
                    mode,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => set,
                    Err(decided) => decided == COUNTED,
                }
            }
        }
    }

    /// Runs `f` on the classes with the lock held.
    fn with_classes<R>(&self, f: impl FnOnce(&mut [Class; CLASSES]) -> R) -> R {
        if self
            .locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // Another thread allocates: waiting for it is not this thread's work.
            let _waiting = crate::pause();
            while self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                std::hint::spin_loop();
            }
        }
        // SAFETY: the lock is held, so no other thread touches the classes.
        let result = f(unsafe { &mut *self.classes.get() });
        self.locked.store(false, Ordering::Release);
        result
    }

    /// A block of class `index`, or null when the system has no memory left.
    fn take(&self, index: usize) -> *mut u8 {
        let size = class_size(index);
        self.with_classes(|classes| {
            let class = &mut classes[index];
            if !class.free.is_null() {
                let block = class.free;
                // SAFETY: a freed block of this class holds the next one's address.
                class.free = unsafe { block.cast::<*mut u8>().read() };
                return block;
            }
            if class.next == class.end {
                let Some(chunk) = map(size.max(CHUNK)) else {
                    return ptr::null_mut();
                };
                class.next = chunk.as_ptr();
                // SAFETY: the mapping is size.max(CHUNK) bytes long.
                class.end = unsafe { class.next.add(size.max(CHUNK)) };
            }
            let block = class.next;
            // SAFETY: chunks hold a whole number of blocks, so `next` stays within one.
            class.next = unsafe { block.add(size) };
            block
        })
    }

    /// Gives back a block of class `index`.
    ///
    /// # Safety
    /// `block` came from `take(index)` and is not used after this.
    unsafe fn give(&self, block: *mut u8, index: usize) {
        self.with_classes(|classes| {
            let class = &mut classes[index];
            // SAFETY: every class holds at least a pointer, aligned for one.
            unsafe { block.cast::<*mut u8>().write(class.free) };
            class.free = block;
        });
    }
}

impl Default for CountedHeap {
    fn default() -> Self {
        Self::new()
    }
}

/// The class of a layout served from classes, or `None` for one `System` serves.
fn class_of(layout: Layout) -> Option<usize> {
    if layout.align() > PAGE {
        return None;
    }
    let wanted = layout.size().max(layout.align()).max(1 << MIN_SHIFT);
    let shift = usize::BITS - (wanted - 1).leading_zeros();
    let index = (shift - MIN_SHIFT) as usize;
    // A class must fit in an isize (2^31 does not on a 32-bit guest).
    (index < CLASSES && shift < usize::BITS - 1).then_some(index)
}

fn class_size(index: usize) -> usize {
    1 << (index as u32 + MIN_SHIFT)
}

/// `len` bytes of fresh, zeroed, page-aligned memory.
fn map(len: usize) -> Option<NonNull<u8>> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    NonNull::new(p.cast())
}

// SAFETY: blocks of a class are `class_size` bytes at multiples of
// `min(class_size, PAGE)`, which covers every layout the class is chosen for (size and
// align at most the class size, align at most a page); a block is handed out once until
// given back. Layouts `class_of` refuses, and every layout in a process that does not
// count, go to `System`, and the same layout (or, for realloc, the same align) brings
// them back there.
unsafe impl GlobalAlloc for CountedHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout).filter(|_| self.counted()) {
            Some(index) => self.take(index),
            // SAFETY: the caller's layout, passed on.
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match class_of(layout).filter(|_| self.counted()) {
            Some(index) => {
                let block = self.take(index);
                if !block.is_null() {
                    // Zeroed whether fresh or reused: the same cost either way.
                    // SAFETY: the block holds at least layout.size() bytes.
                    unsafe { ptr::write_bytes(block, 0, layout.size()) };
                }
                block
            }
            // SAFETY: the caller's layout, passed on.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        match class_of(layout).filter(|_| self.counted()) {
            // SAFETY: the same layout chose the same class when the block was taken.
            Some(index) => unsafe { self.give(block, index) },
            // SAFETY: the same layout sent the block to System when it was allocated.
            None => unsafe { System.dealloc(block, layout) },
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.counted() || layout.align() > PAGE {
            // SAFETY: the caller's block and layout, passed on.
            return unsafe { System.realloc(block, layout, new_size) };
        }
        // SAFETY: GlobalAlloc::realloc's contract: new_size rounded to align fits isize.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let (old, new) = (class_of(layout), class_of(new_layout));
        if old.is_some() && old == new {
            return block;
        }
        if old.is_none() && new.is_none() {
            // SAFETY: both layouts are System's: the caller's block, passed on.
            return unsafe { System.realloc(block, layout, new_size) };
        }
        // Another class, or from a class to System or back (the layout decides where a
        // block lives): moved, so that dealloc with the new layout finds it.
        // SAFETY: new_layout has a non-zero size (the caller's contract).
        let moved = unsafe { self.alloc(new_layout) };
        if !moved.is_null() {
            // SAFETY: both blocks hold the smaller size; they are distinct blocks, and
            // the old one goes back where its layout sent it.
            unsafe {
                ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                self.dealloc(block, layout);
            }
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_aligned_to_its_class_whatever_came_before() {
        let heap = CountedHeap::new();
        heap.mode.store(COUNTED, Ordering::Relaxed);
        for before in [1usize, 7, 33, 250, 4000] {
            let layout = Layout::from_size_align(before, 1).unwrap();
            // SAFETY: a valid layout; the block is given back below.
            let earlier = unsafe { heap.alloc(layout) };
            let payload = Layout::from_size_align(200, 1).unwrap();
            // SAFETY: as above.
            let block = unsafe { heap.alloc(payload) };
            assert_eq!(block as usize % 256, 0, "after {before} bytes");
            // SAFETY: both blocks came from this heap with these layouts.
            unsafe {
                heap.dealloc(block, payload);
                heap.dealloc(earlier, layout);
            }
        }
    }

    #[test]
    fn blocks_are_reused_zeroed_and_moved_whole() {
        let heap = CountedHeap::new();
        heap.mode.store(COUNTED, Ordering::Relaxed);
        let layout = Layout::from_size_align(100, 8).unwrap();
        // SAFETY: valid layouts; every block is written within its size and given back.
        unsafe {
            let a = heap.alloc(layout);
            a.write_bytes(0xAB, 100);
            heap.dealloc(a, layout);
            let b = heap.alloc_zeroed(layout);
            assert_eq!(a, b, "the freed block is taken again");
            assert!((0..100).all(|i| *b.add(i) == 0));
            b.write_bytes(7, 100);
            let c = heap.realloc(b, layout, 120);
            assert_eq!(c, b, "the same class: the block stays");
            let d = heap.realloc(c, layout, 5000);
            assert_ne!(d, c);
            assert!((0..100).all(|i| *d.add(i) == 7));
            assert_eq!(d as usize % PAGE, 0);
            heap.dealloc(d, Layout::from_size_align(5000, 8).unwrap());
        }
    }

    #[test]
    fn the_variable_read_is_the_count_file_one() {
        assert_eq!(COUNT_FILE_C.to_str(), Ok(crate::COUNT_FILE_ENV));
    }

    #[test]
    fn classes_cover_sizes_and_alignments() {
        let class = |size, align| class_of(Layout::from_size_align(size, align).unwrap());
        assert_eq!(class(0, 1), Some(0));
        assert_eq!(class(16, 1), Some(0));
        assert_eq!(class(17, 1), Some(1));
        assert_eq!(class(1, 64), Some(2));
        assert_eq!(class(CHUNK + 1, 8).map(class_size), Some(2 * CHUNK));
        assert_eq!(class(8, 2 * PAGE), None);
    }

    #[test]
    fn a_native_process_takes_the_system_allocator() {
        let heap = CountedHeap::new();
        heap.mode.store(NATIVE, Ordering::Relaxed);
        let layout = Layout::from_size_align(200, 1).unwrap();
        // SAFETY: a valid layout, given back with the same.
        unsafe {
            let block = heap.alloc(layout);
            assert!(!block.is_null());
            heap.dealloc(block, layout);
        }
        assert!(!heap.is_counted());
    }
}
