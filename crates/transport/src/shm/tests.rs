use super::attach::*;
use super::channel::*;
use super::layout::*;
#[allow(unused_imports)]
use crate::address::PeerAddress;
use crate::artifact::unique_name;
#[allow(unused_imports)]
use crate::contract::{Acceptor, Channel};
use crate::error::TransportError;
#[allow(unused_imports)]
use crate::platform::{current_pid, ensure_alive, futex_wait, futex_wake};
use crate::platform::{process_alive, FutexWake};
#[allow(unused_imports)]
use crate::wait::{keep_spinning, remaining, LivenessChecks, LIVENESS_PERIOD};
use ipc_matrix_spec::WakeMode;
#[allow(unused_imports)]
use shared_memory::{Shmem, ShmemConf};
#[allow(unused_imports)]
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
            let published =
                || Published::unpack(peer.ring(peer.rx).head.value.load(Ordering::Acquire)).count;
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
        let near_fit = (1u32..4200, 1u32..9, -80isize..80).prop_map(|(slot_size, slots, delta)| {
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
                |((len, slot_size, slots), (magic_ok, version), counters, (chunk, announced))| {
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
