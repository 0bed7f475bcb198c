//! A user's stack as a transport: the [`Stack`] trait a crate outside this workspace
//! implements for its own IPC (both sides), and the registry [`listen`](crate::listen)
//! and [`connect`](crate::connect) find it in, by name.
//!
//! Both processes of a cell register the same stacks: the peer is the measuring binary
//! started again (`<exe> serve`), so registering before serving (which the entry points
//! `ipc_matrix::main!` and `ipc_matrix::test_main!` do) is all it takes.

use crate::address::PeerAddress;
use crate::contract::{Acceptor, Channel, ListenOptions};
use crate::error::{RegisterError, TransportError};
use ipc_matrix_spec::{StackName, StackTraits};
use std::path::PathBuf;
use std::sync::RwLock;
use std::time::Instant;

/// A user's IPC stack: how its measuring side listens and its peer connects.
///
/// The channel it gives on each side keeps the [`Channel`] contract: whole messages, each
/// send and receive bounded by its deadline (a stack that cannot wait with a deadline
/// must poll, never block past it), a message longer than `limit` refused before it is
/// read. A stack with a loaned path returns it from [`Channel::loans`].
pub trait Stack: Send + Sync + 'static {
    /// Its name in matrix.yaml and in cell ids (`echo::<name>::200B`): a-z, 0-9 and `-`.
    fn name(&self) -> &'static str;

    /// What the matrix needs to know of it: wake modes, message paths, its floor.
    fn traits(&self) -> StackTraits;

    /// The largest message it carries, where it has a limit of its own (a datagram's, a
    /// ring's): the conformance suite checks messages up to it and no larger.
    fn max_message(&self) -> Option<usize> {
        None
    }

    /// Opens the measuring side, for messages of up to `options.max_message` bytes (and
    /// in `options.wake`, when its traits say it has wake modes).
    fn listen(&self, options: &ListenOptions) -> Result<Box<dyn StackAcceptor>, TransportError>;

    /// The peer's side: connects to what the measuring side's acceptor gave as its
    /// address ([`StackAcceptor::address`]), by `deadline`.
    fn connect(&self, address: &str, deadline: Instant)
        -> Result<Box<dyn Channel>, TransportError>;
}

/// A user's stack's measuring side before its peer has connected.
pub trait StackAcceptor: Send {
    /// What the peer needs to connect: any text (a path, a port, a segment's name),
    /// handed to [`Stack::connect`] in the peer process.
    fn address(&self) -> String;

    /// Waits for the peer, process `peer`, to connect, by `deadline`. A stack that can
    /// should give up early when that process has died (`crate::process_alive`).
    fn accept(
        self: Box<Self>,
        peer: u32,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError>;
}

/// A registered stack, and the shared library it came from (`crate::plugin`), if any.
struct Entry {
    name: StackName,
    stack: &'static dyn Stack,
    library: Option<Library>,
}

/// Where a stack from a shared library came from, and whether it loaded (a broken one's
/// cells fail saying why, and no code of its library runs).
#[derive(Clone)]
pub(crate) struct Library {
    pub path: PathBuf,
    pub loaded: bool,
}

static STACKS: RwLock<Vec<Entry>> = RwLock::new(Vec::new());

/// Registers `stack` for this process's cells and peers, under its name. Refused when the
/// name is ill-formed, a built-in transport's, or registered already.
pub fn register_stack(stack: &'static dyn Stack) -> Result<StackName, RegisterError> {
    register_stack_from(stack, None)
}

/// [`register_stack`], for a stack loaded from `library`, which its peers load too.
pub(crate) fn register_stack_from(
    stack: &'static dyn Stack,
    library: Option<Library>,
) -> Result<StackName, RegisterError> {
    let name = StackName::register(stack.name(), stack.traits())?;
    STACKS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .push(Entry {
            name,
            stack,
            library,
        });
    Ok(name)
}

/// The shared library the registered stack `name` was loaded from (matrix.yaml's
/// `plugins:`); `None` for a stack in this binary, and for one whose library could not
/// be loaded (none of its code runs).
pub fn plugin_library(name: StackName) -> Option<PathBuf> {
    library_of(name).filter(|l| l.loaded).map(|l| l.path)
}

/// Every registered stack, in the order registered.
pub fn registered_stacks() -> Vec<StackName> {
    STACKS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|e| e.name)
        .collect()
}

/// Every stack loaded from a shared library: its name and its library.
pub fn registered_plugins() -> Vec<(String, PathBuf)> {
    STACKS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(|e| {
            let library = e.library.clone().filter(|l| l.loaded)?;
            Some((e.name.as_str().to_owned(), library.path))
        })
        .collect()
}

/// The library the registered stack `name` came from, loaded or not.
pub(crate) fn library_of(name: StackName) -> Option<Library> {
    STACKS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| e.library.clone())
}

/// The largest message the registered stack `name` carries, where it says
/// ([`Stack::max_message`]).
pub(crate) fn max_message_of(name: StackName) -> Result<Option<usize>, TransportError> {
    registered(name).map(|stack| stack.max_message())
}

/// The registered stack of `name`.
fn registered(name: StackName) -> Result<&'static dyn Stack, TransportError> {
    STACKS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|e| e.name == name)
        .map(|e| e.stack)
        .ok_or_else(|| {
            TransportError::Stack(format!(
                "stack `{name}` is not registered in this binary (register it in the entry point, ipc_matrix::main! or ipc_matrix::test_main!)"
            ))
        })
}

/// The measuring side of a registered stack.
pub(crate) fn listen(
    name: StackName,
    options: &ListenOptions,
) -> Result<Box<dyn Acceptor>, TransportError> {
    let inner = registered(name)?.listen(options)?;
    Ok(Box::new(Registered {
        name,
        inner,
        library: plugin_library(name),
    }))
}

/// The peer's side of a registered stack, from the address its acceptor gave.
pub(crate) fn connect(
    stack: StackName,
    address: &str,
    deadline: Instant,
) -> Result<Box<dyn Channel>, TransportError> {
    registered(stack)?.connect(address, deadline)
}

/// A stack's acceptor as the matrix's: its address named by the stack.
struct Registered {
    name: StackName,
    inner: Box<dyn StackAcceptor>,
    library: Option<PathBuf>,
}

impl Acceptor for Registered {
    fn address(&self) -> PeerAddress {
        PeerAddress::Stack {
            stack: self.name,
            address: self.inner.address(),
            library: self.library.clone(),
        }
    }

    fn accept(
        self: Box<Self>,
        peer: u32,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError> {
        self.inner.accept(peer, deadline)
    }
}
