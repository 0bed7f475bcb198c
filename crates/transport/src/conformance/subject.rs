//! What the checks run against and share: a [`Subject`] (one transport in one wake mode,
//! and the largest messages it is checked with), the measuring side of a channel to a new
//! peer, the sizes a check sends, and what a failure adds of the peer.

use super::peer::LIE_LIMIT;
use super::support::{exchange_limit_of, limit_of, Peer, EXCHANGE_LIMIT, LIMIT, PROMPT, SETUP};
use super::support::{violated, CheckFailure};
use crate::contract::{Channel, ListenOptions};
use crate::error::TransportError;
use crate::open::listen;
use ipc_matrix_spec::{ChannelKind, MessagePath, StackName, WakeMode};
use std::time::Instant;

/// One transport in one wake mode, and the largest messages it is checked with.
#[derive(Debug, Clone, Copy)]
pub struct Subject {
    pub kind: ChannelKind,
    pub wake: Option<WakeMode>,
    /// The largest message of most checks.
    limit: usize,
    /// The largest message of the exchange checks.
    pub(super) exchange_limit: usize,
}

impl Subject {
    /// A built-in transport, checked up to its limits (`support::limit_of`).
    fn built_in(kind: ChannelKind, wake: Option<WakeMode>) -> Self {
        Self {
            kind,
            wake,
            limit: limit_of(kind),
            exchange_limit: exchange_limit_of(kind),
        }
    }

    /// `shm-blocking`, `shm-busy`, or the transport's name.
    pub fn name(self) -> String {
        match self.wake {
            Some(WakeMode::Blocking) => format!("{}-blocking", self.kind),
            Some(WakeMode::BusyPoll) => format!("{}-busy", self.kind),
            None => self.kind.to_string(),
        }
    }

    pub(super) fn lossy(self) -> bool {
        self.kind == ChannelKind::Udp
    }

    pub(super) fn limit(self) -> usize {
        self.limit
    }

    /// A user's stack ([`crate::Stack`]), whose framing, if any, is its own.
    pub(super) fn is_stack(self) -> bool {
        matches!(self.kind, ChannelKind::Stack(_))
    }

    /// A byte stream that this crate frames, which a peer can lie on by writing frames by
    /// hand.
    pub(super) fn framed_here(self) -> bool {
        self.kind.is_byte_stream() && !self.is_stack()
    }
}

/// Every built-in transport and wake mode the contract is checked for: every channel,
/// those that have wake modes (shared memory) in each of them.
pub fn subjects() -> Vec<Subject> {
    let mut subjects = Vec::new();
    for kind in ChannelKind::ALL {
        for wake in wake_modes(kind) {
            subjects.push(Subject::built_in(kind, wake));
        }
    }
    subjects
}

/// The subjects of the registered stack `name`: one per wake mode where it has them,
/// checked with messages up to its [`crate::Stack::max_message`] (at most the built-in
/// transports' limits).
pub fn stack_subjects(name: StackName) -> Result<Vec<Subject>, TransportError> {
    stack_subjects_up_to(name, None)
}

/// [`stack_subjects`], with messages of at most `max_message` bytes when given (a stack
/// in a shared library has no way to say its limit).
pub fn stack_subjects_up_to(
    name: StackName,
    max_message: Option<usize>,
) -> Result<Vec<Subject>, TransportError> {
    let kind = ChannelKind::Stack(name);
    let own = crate::stack::max_message_of(name)?.unwrap_or(usize::MAX);
    let max = max_message.map_or(own, |given| given.min(own));
    if max <= LIE_LIMIT {
        return Err(TransportError::Stack(format!(
            "stack `{name}` carries messages of at most {max} bytes; the conformance suite needs more than {LIE_LIMIT}"
        )));
    }
    Ok(wake_modes(kind)
        .into_iter()
        .map(|wake| Subject {
            kind,
            wake,
            limit: LIMIT.min(max),
            exchange_limit: EXCHANGE_LIMIT.min(max),
        })
        .collect())
}

/// Each wake mode of `kind`, or none.
pub(super) fn wake_modes(kind: ChannelKind) -> Vec<Option<WakeMode>> {
    if kind.has_wake_modes() {
        vec![Some(WakeMode::Blocking), Some(WakeMode::BusyPoll)]
    } else {
        vec![None]
    }
}

/// The transports that list the loaned path ([`crate::Loans`]) among their message
/// paths.
pub(super) fn has_loans(subject: Subject) -> bool {
    subject.kind.message_paths().contains(&MessagePath::Loaned)
}

/// The measuring side of a channel of `subject` to a new peer playing `role`.
pub(super) fn open(subject: Subject, role: &str) -> Result<(Box<dyn Channel>, Peer), CheckFailure> {
    open_for(subject, role, subject.limit())
}

/// [`open`] for messages of up to `max_message` bytes (shared memory: still slots of at
/// most 1 MiB).
pub(super) fn open_for(
    subject: Subject,
    role: &str,
    max_message: usize,
) -> Result<(Box<dyn Channel>, Peer), CheckFailure> {
    let acceptor = listen(
        subject.kind,
        ListenOptions {
            wake: subject.wake,
            max_message,
            bind: None,
        },
    )
    .map_err(|e| format!("listening: {e}"))?;
    let mut peer = Peer::spawn(role, &acceptor.address(), max_message)?;
    match acceptor.accept(peer.pid(), Instant::now() + SETUP) {
        Ok(channel) => Ok((channel, peer)),
        Err(e) => Err(violated!(
            "accepting the peer: {e}; its stderr: {}",
            peer.finish()
        )),
    }
}

/// Adds the peer's stderr to a failure.
pub(super) fn with_stderr<E: std::fmt::Display>(
    peer: &mut Peer,
) -> impl FnOnce(E) -> CheckFailure + '_ {
    move |e| violated!("{e}; the peer's stderr: {:?}", peer.finish())
}

/// Message sizes from 0 to the limit: around the 8-byte frame header and 64-byte lines,
/// around one shared-memory slot (1 MiB for a channel sized for LIMIT: exactly one slot
/// and one byte more, which streams as two chunks), several slots, and the limit itself.
pub(super) fn sizes_for(limit: usize) -> Vec<usize> {
    const SLOT: usize = 1 << 20;
    let mut sizes = vec![
        0,
        1,
        2,
        7,
        8,
        9,
        63,
        64,
        65,
        4095,
        4096,
        4097,
        65_507,
        65_535,
        65_536,
        65_537,
        SLOT - 1,
        SLOT,
        SLOT + 1,
        3 * SLOT + 17,
        limit - 1,
        limit,
    ];
    sizes.retain(|&s| s <= limit);
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The peer (`who`) exits 0 within PROMPT of its goodbye.
pub(super) fn exits_cleanly_on_the_goodbye(peer: &mut Peer, who: &str) -> Result<(), CheckFailure> {
    match peer.wait_exit(PROMPT) {
        Some(status) if status.success() => Ok(()),
        Some(status) => Err(violated!(
            "{who} was to exit cleanly on the goodbye, and ended with {status}; its stderr: {:?}",
            peer.finish()
        )),
        None => Err(violated!(
            "{who} was to exit on the goodbye, and still ran {PROMPT:?} after it; its stderr: {:?}",
            peer.finish()
        )),
    }
}
