use ipc_matrix_spec::StackNameError;
use std::io;

/// Why a channel operation failed; each variant reads as the end of a sentence
/// ("round trip 17: ...").
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("no {what} before the deadline")]
    Timeout { what: &'static str },
    #[error("the peer closed the connection")]
    Closed,
    /// The peer's end was closed with bytes of ours unread in it (a stream's reset).
    #[error("the peer reset the connection: it closed its end with bytes of ours unread")]
    Reset,
    #[error("the peer is gone: {0}")]
    PeerGone(String),
    #[error("the peer announced a {announced}-byte message, larger than the {limit}-byte limit")]
    TooLarge { announced: u64, limit: usize },
    #[error("corrupt frame: {0}")]
    Corrupt(String),
    /// The loaned path cannot do what was asked: a loan while one is open, a commit with
    /// none, a message longer than a loan holds.
    #[error("on the loaned path: {0}")]
    Loan(String),
    /// A user's stack's own failure, in its words; or a stack this binary lacks.
    #[error("{0}")]
    Stack(String),
    /// A stack the peer loads from its library is refused where it runs. Boxed: this
    /// error is in the `Result` of every send and receive, inside the counted windows, and
    /// stays as small as its other variants keep it.
    #[error(transparent)]
    Register(Box<RegisterError>),
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        #[source]
        source: io::Error,
    },
}

impl From<RegisterError> for TransportError {
    fn from(e: RegisterError) -> Self {
        TransportError::Register(Box::new(e))
    }
}

// The hot paths return `Result<_, TransportError>`: a larger error makes each of them move
// more bytes (unboxed, `Register` made it larger, and echo::tcp::200B counted about 20
// more instructions per round trip on each side).
const _: () = assert!(std::mem::size_of::<TransportError>() <= 32);

impl TransportError {
    /// The peer's end is closed, with or without bytes of ours unread in it.
    pub fn is_closed(&self) -> bool {
        matches!(self, TransportError::Closed | TransportError::Reset)
    }

    pub fn io(context: &'static str) -> impl FnOnce(io::Error) -> TransportError {
        move |source| TransportError::Io { context, source }
    }
}

/// Why a stack was not registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// Its name is ill-formed, a built-in transport's, or taken; or its traits are
    /// refused.
    #[error(transparent)]
    Name(#[from] StackNameError),
    /// A C stack linked into this binary whose table is refused.
    #[error("the linked C stack `{name}` cannot be used: {why}")]
    LinkedTableRefused { name: String, why: String },
}
