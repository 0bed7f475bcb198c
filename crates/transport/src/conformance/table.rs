//! Which checks there are, and which subjects each applies to.

use super::checks::{
    chunk_boundaries, exchange_echo, exchange_with_a_late_peer, hostile_header_refused, ordering,
    oversized_refused, peer_death, receive_deadline, send_deadline, sizes,
};
use super::loaned::{
    held_replies, loaned_and_copying_paths_meet, loaned_echo, loans_offered_as_listed,
    loans_refuse_misuse,
};
use super::peer::CHUNKED;
use super::subject::{has_loans, Subject};
use super::support::CheckFailure;
use ipc_matrix_spec::ChannelKind;

pub struct Check {
    pub name: &'static str,
    pub applies: fn(Subject) -> bool,
    pub run: fn(Subject) -> Result<(), CheckFailure>,
}

fn always(_: Subject) -> bool {
    true
}

fn shm_only(subject: Subject) -> bool {
    subject.kind == ChannelKind::Shm
}

/// Transports whose messages may be larger than a datagram.
fn not_datagrams(subject: Subject) -> bool {
    !subject.lossy()
}

/// Transports that carry the chunk-boundary check's largest message (four slots).
fn carries_four_slots(subject: Subject) -> bool {
    !subject.lossy() && subject.limit() >= CHUNKED[CHUNKED.len() - 1]
}

pub const CHECKS: &[Check] = &[
    Check {
        name: "sizes",
        applies: always,
        run: sizes,
    },
    Check {
        name: "chunk-boundaries",
        applies: carries_four_slots,
        run: chunk_boundaries,
    },
    Check {
        name: "exchange-echo",
        applies: not_datagrams,
        run: exchange_echo,
    },
    Check {
        name: "exchange-with-a-late-peer",
        applies: not_datagrams,
        run: exchange_with_a_late_peer,
    },
    Check {
        name: "ordering",
        applies: always,
        run: ordering,
    },
    Check {
        name: "receive-deadline",
        applies: always,
        run: receive_deadline,
    },
    Check {
        name: "send-deadline",
        applies: always,
        run: send_deadline,
    },
    Check {
        name: "peer-death",
        applies: always,
        run: peer_death,
    },
    Check {
        name: "oversized-refused",
        applies: always,
        run: oversized_refused,
    },
    Check {
        name: "hostile-header-refused",
        applies: shm_only,
        run: hostile_header_refused,
    },
    Check {
        name: "loans-offered-as-listed",
        applies: always,
        run: loans_offered_as_listed,
    },
    Check {
        name: "loaned-echo",
        applies: has_loans,
        run: loaned_echo,
    },
    Check {
        name: "held-replies",
        applies: has_loans,
        run: held_replies,
    },
    Check {
        name: "loaned-and-copying-paths-meet",
        applies: has_loans,
        run: loaned_and_copying_paths_meet,
    },
    Check {
        name: "loans-refuse-misuse",
        applies: has_loans,
        run: loans_refuse_misuse,
    },
];
