//! A stack in a shared library: the C ABI of `include/ipc_matrix_stack.h` (version 1),
//! loaded by path, as a [`Stack`] registered under the name matrix.yaml gives it.
//!
//! Nothing a library says is taken on trust: its table's version, size, name and floor
//! are checked before it is registered; a status it has no word for, a length longer than
//! the room it was given, a loan of another size, fail the call (and so the cell) saying
//! so. A library that cannot be loaded is still registered, as broken, so that its cells
//! fail naming why, not the run. A crash inside the library takes its process with it:
//! in the peer that fails the cell (the peer is gone); the nextest door runs each cell in
//! a process of its own.

use crate::contract::{Channel, Loans};
use crate::error::TransportError;
use crate::stack::{register_stack_from, Library, Stack, StackAcceptor};
use crate::ListenOptions;
use ipc_matrix_spec::{ChannelKind, MessagePath, StackName, StackTraits};
use std::ffi::{c_char, c_void, CString};
use std::path::Path;
use std::time::Instant;

/// The ABI version this build speaks (`IPCM_STACK_ABI_VERSION`).
pub const ABI_VERSION: u32 = 1;
/// The symbol looked up in a library.
#[cfg(not(target_env = "musl"))]
const ENTRY: &[u8] = b"ipcm_stack_v1\0";
/// `IPCM_ERROR_BYTES`.
const ERROR_BYTES: usize = 256;
/// What a receive's room holds before the library writes into it.
const POISON: u8 = 0xa5;
/// The longest address a library may give, with its NUL.
const MAX_ADDRESS_BYTES: usize = 4096;

const OK: u32 = 0;
const TIMEOUT: u32 = 1;
const CLOSED: u32 = 2;
const TOO_LONG: u32 = 3;
const ERROR: u32 = 4;

#[repr(C)]
struct ErrorBuf {
    message: [c_char; ERROR_BYTES],
}

type Acc = c_void;
type Chan = c_void;

/// `ipcm_stack_table_v1`, field for field.
#[repr(C)]
struct Table {
    abi_version: u32,
    size: u32,
    name: *const c_char,
    floor: u32,
    reserved: u32,
    listen: Option<unsafe extern "C" fn(usize, *mut *mut Acc, *mut ErrorBuf) -> u32>,
    address: Option<unsafe extern "C" fn(*const Acc) -> *const c_char>,
    accept: Option<unsafe extern "C" fn(*mut Acc, u32, u64, *mut *mut Chan, *mut ErrorBuf) -> u32>,
    drop_acceptor: Option<unsafe extern "C" fn(*mut Acc)>,
    connect: Option<unsafe extern "C" fn(*const c_char, u64, *mut *mut Chan, *mut ErrorBuf) -> u32>,
    send: Option<unsafe extern "C" fn(*mut Chan, *const u8, usize, u64, *mut ErrorBuf) -> u32>,
    recv: Option<
        unsafe extern "C" fn(*mut Chan, *mut u8, usize, *mut usize, u64, *mut ErrorBuf) -> u32,
    >,
    close: Option<unsafe extern "C" fn(*mut Chan)>,
    max_loan: usize,
    loan: Option<unsafe extern "C" fn(*mut Chan, usize, u64, *mut *mut u8, *mut ErrorBuf) -> u32>,
    commit: Option<unsafe extern "C" fn(*mut Chan, u64, *mut ErrorBuf) -> u32>,
    cancel: Option<unsafe extern "C" fn(*mut Chan)>,
    borrow: Option<
        unsafe extern "C" fn(
            *mut Chan,
            usize,
            u64,
            *mut *const u8,
            *mut usize,
            *mut ErrorBuf,
        ) -> u32,
    >,
    release: Option<unsafe extern "C" fn(*mut Chan)>,
}

/// The calls every table has, checked present once: the channel's hot path then calls
/// them without looking again.
#[derive(Clone, Copy)]
struct Calls {
    listen: unsafe extern "C" fn(usize, *mut *mut Acc, *mut ErrorBuf) -> u32,
    address: unsafe extern "C" fn(*const Acc) -> *const c_char,
    accept: unsafe extern "C" fn(*mut Acc, u32, u64, *mut *mut Chan, *mut ErrorBuf) -> u32,
    drop_acceptor: unsafe extern "C" fn(*mut Acc),
    connect: unsafe extern "C" fn(*const c_char, u64, *mut *mut Chan, *mut ErrorBuf) -> u32,
    send: unsafe extern "C" fn(*mut Chan, *const u8, usize, u64, *mut ErrorBuf) -> u32,
    recv: unsafe extern "C" fn(*mut Chan, *mut u8, usize, *mut usize, u64, *mut ErrorBuf) -> u32,
    close: unsafe extern "C" fn(*mut Chan),
    loans: Option<LoanCalls>,
}

#[derive(Clone, Copy)]
struct LoanCalls {
    max_loan: usize,
    loan: unsafe extern "C" fn(*mut Chan, usize, u64, *mut *mut u8, *mut ErrorBuf) -> u32,
    commit: unsafe extern "C" fn(*mut Chan, u64, *mut ErrorBuf) -> u32,
    cancel: unsafe extern "C" fn(*mut Chan),
    borrow: unsafe extern "C" fn(
        *mut Chan,
        usize,
        u64,
        *mut *const u8,
        *mut usize,
        *mut ErrorBuf,
    ) -> u32,
    release: unsafe extern "C" fn(*mut Chan),
}

/// A loaded library's stack (or, when it could not be loaded, why).
struct Plugin {
    name: &'static str,
    loaded: Result<(Calls, StackTraits), String>,
}

/// Loads the library at `library` as the stack `name` and registers it in this process;
/// a library that cannot be loaded, or whose table is refused, is registered as broken
/// (its cells fail saying why). Err only when `name` cannot be registered at all (an
/// ill-formed name, or one taken). Loading the same library as the same name again is
/// nothing.
pub fn register_plugin(name: &str, library: &Path) -> Result<StackName, String> {
    if let Some(known) = StackName::find(name).filter(|n| n.traits().is_some()) {
        return match crate::stack::library_of(known) {
            Some(known_library) if known_library.path == library => Ok(known),
            _ => Err(format!("stack `{name}` is registered twice")),
        };
    }
    let loaded = load(name, library).map_err(|why| {
        format!(
            "the plugin `{name}` ({}) cannot be used: {why}",
            library.display()
        )
    });
    let library = Library {
        path: library.to_path_buf(),
        loaded: loaded.is_ok(),
    };
    let plugin = Plugin {
        name: Box::leak(name.to_owned().into_boxed_str()),
        loaded,
    };
    register_stack_from(Box::leak(Box::new(plugin)), Some(library))
}

/// Registers the stack `name` from `library` as broken, for `why`, without loading it:
/// its cells fail saying so (a library whose loading crashed or hung another process).
pub fn register_broken_plugin(name: &str, library: &Path, why: &str) -> Result<StackName, String> {
    if let Some(known) = StackName::find(name).filter(|n| n.traits().is_some()) {
        return match crate::stack::library_of(known) {
            Some(known_library) if known_library.path == library => Ok(known),
            _ => Err(format!("stack `{name}` is registered twice")),
        };
    }
    let plugin = Plugin {
        name: Box::leak(name.to_owned().into_boxed_str()),
        loaded: Err(format!(
            "the plugin `{name}` ({}) cannot be used: {why}",
            library.display()
        )),
    };
    let library = Library {
        path: library.to_path_buf(),
        loaded: false,
    };
    register_stack_from(Box::leak(Box::new(plugin)), Some(library))
}

/// Opens the library and checks its table.
#[cfg(not(target_env = "musl"))]
fn load(name: &str, library: &Path) -> Result<(Calls, StackTraits), String> {
    // SAFETY: loading a library runs its initialisers: that is what naming it in
    // matrix.yaml asks for. It stays loaded for the life of the process (leaked below),
    // so the table and functions taken from it never dangle.
    let lib = unsafe { libloading::Library::new(library) }.map_err(|e| e.to_string())?;
    let lib: &'static libloading::Library = Box::leak(Box::new(lib));
    // SAFETY: the symbol's type is the header's `const ipcm_stack_table_v1 *(void)`.
    let entry =
        unsafe { lib.get::<unsafe extern "C" fn() -> *const Table>(ENTRY) }.map_err(|e| {
            format!("it has no function ipcm_stack_v1 (include/ipc_matrix_stack.h): {e}")
        })?;
    // SAFETY: a call with no arguments, as declared; the library is never unloaded.
    let table = unsafe { entry() };
    // SAFETY: what a library's ipcm_stack_v1 returns is what the header says, or NULL.
    unsafe { check(name, table) }
}

/// A static build (the counted musl builds) has no loader to open a library with, and
/// does not link one: its instruction counts are those of the code it runs. Its C stacks
/// are linked in instead ([`register_linked_plugin`]).
#[cfg(target_env = "musl")]
fn load(_: &str, _: &Path) -> Result<(Calls, StackTraits), String> {
    Err("this is a static build, which cannot load a library: link the stack into it and register it with register_linked_plugin".into())
}

/// The `ipcm_stack_v1` function of a C stack linked into this binary.
pub type LinkedTable = unsafe extern "C" fn() -> *const c_void;

/// Registers the C stack whose `ipcm_stack_v1` is linked into this binary (compiled with
/// the `cc` crate, say) as the stack `name`, its table checked as a loaded library's is:
/// what a static build, which cannot load a library, uses instead of matrix.yaml's
/// `plugins:` (the counted musl builds). A table that is refused is an error here: the
/// binary carries it.
///
/// # Safety
/// `entry` is a function of the header's `const ipcm_stack_table_v1 *ipcm_stack_v1(void)`,
/// returning NULL or a table that lives as long as the process.
pub unsafe fn register_linked_plugin(name: &str, entry: LinkedTable) -> Result<StackName, String> {
    // SAFETY: the caller's promise.
    let checked = unsafe { check(name, entry().cast::<Table>()) }
        .map_err(|why| format!("the linked C stack `{name}` cannot be used: {why}"))?;
    let plugin = Plugin {
        name: Box::leak(name.to_owned().into_boxed_str()),
        loaded: Ok(checked),
    };
    register_stack_from(Box::leak(Box::new(plugin)), None)
}

/// Checks the table at `table` (the ABI version and size first, then the rest) and takes
/// its calls.
///
/// # Safety
/// `table` is NULL, or points to a table that starts with the header's two u32s and, when
/// they are version 1's, is a whole `ipcm_stack_table_v1` that is never freed.
unsafe fn check(name: &str, table: *const Table) -> Result<(Calls, StackTraits), String> {
    if table.is_null() {
        return Err("ipcm_stack_v1() returned NULL".into());
    }
    // The version and size are read before the rest: a table of another version may
    // be shorter than ours.
    // SAFETY: every version's table starts with these two u32s.
    let (version, size) = unsafe {
        (
            std::ptr::addr_of!((*table).abi_version).read_unaligned(),
            std::ptr::addr_of!((*table).size).read_unaligned(),
        )
    };
    if version != ABI_VERSION {
        return Err(format!(
            "its table is ABI version {version}; this ipc-matrix speaks version {ABI_VERSION}"
        ));
    }
    if size as usize != std::mem::size_of::<Table>() {
        return Err(format!(
            "its table is {size} bytes; version {ABI_VERSION}'s is {} (was it built with this ipc_matrix_stack.h?)",
            std::mem::size_of::<Table>()
        ));
    }
    // SAFETY: the version and size are ours, so the whole table is there; it lives as
    // long as the library, which is never unloaded.
    let table: &'static Table = unsafe { &*table };
    let own_name = if table.name.is_null() {
        return Err("its table has no name".into());
    } else {
        // SAFETY: the header says name is a NUL-terminated string the library keeps; at
        // most a name's 40 bytes and its NUL are read.
        match unsafe { bounded_c_str(table.name, 41) } {
            Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            None => return Err("its name is longer than 40 bytes".into()),
        }
    };
    if own_name != name {
        return Err(format!(
            "it calls itself `{own_name}`, and matrix.yaml `{name}`: the two must agree"
        ));
    }
    if table.reserved != 0 {
        return Err(format!(
            "its reserved field is {}, where version 1 asks for 0",
            table.reserved
        ));
    }
    let floor_like = match table.floor {
        0 => ChannelKind::Local,
        1 => ChannelKind::Tcp,
        2 => ChannelKind::Udp,
        3 => ChannelKind::Pipe,
        4 => ChannelKind::Shm,
        other => {
            return Err(format!(
                "its floor is {other}, which ABI version 1 does not have (0 to 4)"
            ))
        }
    };
    let missing = |what: &str| format!("its table has no `{what}` (a NULL where a call must be)");
    let loans = match (table.loan, table.commit, table.cancel, table.borrow, table.release) {
        (Some(loan), Some(commit), Some(cancel), Some(borrow), Some(release)) => {
            if table.max_loan == 0 {
                return Err("it has the loaned path, with a max_loan of 0".into());
            }
            Some(LoanCalls {
                max_loan: table.max_loan,
                loan,
                commit,
                cancel,
                borrow,
                release,
            })
        }
        (None, None, None, None, None) if table.max_loan != 0 => {
            return Err("it gives a max_loan but no loaned path (loan, commit, cancel, borrow, release)".into())
        }
        (None, None, None, None, None) => None,
        _ => {
            return Err(
                "its loaned path is only partly there: loan, commit, cancel, borrow and release are all set or all NULL".into(),
            )
        }
    };
    let calls = Calls {
        listen: table.listen.ok_or_else(|| missing("listen"))?,
        address: table.address.ok_or_else(|| missing("address"))?,
        accept: table.accept.ok_or_else(|| missing("accept"))?,
        drop_acceptor: table
            .drop_acceptor
            .ok_or_else(|| missing("drop_acceptor"))?,
        connect: table.connect.ok_or_else(|| missing("connect"))?,
        send: table.send.ok_or_else(|| missing("send"))?,
        recv: table.recv.ok_or_else(|| missing("recv"))?,
        close: table.close.ok_or_else(|| missing("close"))?,
        loans,
    };
    let traits = StackTraits {
        wake_modes: false,
        message_paths: if loans.is_some() {
            &[MessagePath::Copied, MessagePath::Loaned]
        } else {
            &[MessagePath::Copied]
        },
        floor_like,
        byte_stream: false,
    };
    Ok((calls, traits))
}

impl Stack for Plugin {
    fn name(&self) -> &'static str {
        self.name
    }

    fn traits(&self) -> StackTraits {
        match &self.loaded {
            Ok((_, traits)) => *traits,
            // Both paths, so that every scenario naming it is read as written and each of
            // its cells fails saying why the library cannot be used.
            Err(_) => StackTraits {
                message_paths: &[MessagePath::Copied, MessagePath::Loaned],
                ..StackTraits::copying(ChannelKind::Local)
            },
        }
    }

    fn listen(&self, options: &ListenOptions) -> Result<Box<dyn StackAcceptor>, TransportError> {
        let calls = self.calls()?;
        let mut acceptor = std::ptr::null_mut();
        let mut error = ErrorBuf::new();
        // SAFETY: the header's listen, with room for its acceptor and its error.
        let status = unsafe { (calls.listen)(options.max_message, &mut acceptor, &mut error) };
        self.status("listen", status, &error)?;
        if acceptor.is_null() {
            return Err(self.lie("listen returned IPCM_OK and no acceptor"));
        }
        // SAFETY: an acceptor listen gave, not yet accepted on or dropped.
        let address = unsafe { (calls.address)(acceptor) };
        let address = if address.is_null() {
            None
        } else {
            // SAFETY: a NUL-terminated string the acceptor owns; read at most the
            // header's 4096 bytes of it.
            let bytes = unsafe { bounded_c_str(address, MAX_ADDRESS_BYTES) };
            bytes.and_then(|b| String::from_utf8(b).ok())
        };
        let Some(address) = address else {
            // SAFETY: the acceptor is not used again.
            unsafe { (calls.drop_acceptor)(acceptor) };
            return Err(self.lie(&format!(
                "address gave no UTF-8 string of at most {} bytes",
                MAX_ADDRESS_BYTES - 1
            )));
        };
        Ok(Box::new(PluginAcceptor {
            plugin: self.public(),
            calls,
            acceptor,
            address,
        }))
    }

    fn connect(
        &self,
        address: &str,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError> {
        let calls = self.calls()?;
        let address = CString::new(address)
            .map_err(|_| TransportError::Stack("the address has a NUL byte".into()))?;
        let mut channel = std::ptr::null_mut();
        let mut error = ErrorBuf::new();
        // SAFETY: the header's connect: a NUL-terminated address, room for the channel.
        let status = unsafe {
            (calls.connect)(
                address.as_ptr(),
                monotonic_ns(deadline),
                &mut channel,
                &mut error,
            )
        };
        self.status("connect", status, &error)?;
        PluginChannel::boxed(self.public(), calls, channel, "connect")
    }
}

/// What a channel or acceptor keeps of its plugin, to name it in errors.
#[derive(Clone, Copy)]
struct Named {
    name: &'static str,
}

impl Plugin {
    fn calls(&self) -> Result<Calls, TransportError> {
        match &self.loaded {
            Ok((calls, _)) => Ok(*calls),
            Err(why) => Err(TransportError::Stack(why.clone())),
        }
    }

    fn public(&self) -> Named {
        Named { name: self.name }
    }

    fn status(&self, call: &str, status: u32, error: &ErrorBuf) -> Result<(), TransportError> {
        self.public().status(call, status, error)
    }

    fn lie(&self, what: &str) -> TransportError {
        self.public().lie(what)
    }
}

impl Named {
    /// `Ok` for IPCM_OK, else the error the status and message say.
    fn status(self, call: &str, status: u32, error: &ErrorBuf) -> Result<(), TransportError> {
        let said = || error.text();
        match status {
            OK => Ok(()),
            // The contract's words for these, which the cell's failure shows (a timeout
            // is told apart from a loss on a lossy channel by them).
            TIMEOUT => Err(TransportError::Timeout {
                what: timeout_what(call),
            }),
            CLOSED => Err(TransportError::Closed),
            TOO_LONG => Err(TransportError::Stack(format!(
                "{}: {call}: {}: {}",
                self.name,
                match call {
                    "send" | "loan" | "commit" => "the message is longer than the stack carries",
                    _ => "the message is longer than the room for it",
                },
                said()
            ))),
            ERROR => Err(TransportError::Stack(format!(
                "{}: {call}: {}",
                self.name,
                said()
            ))),
            other => Err(self.lie(&format!(
                "{call} returned status {other}, which ABI version 1 does not have (0 to 4)"
            ))),
        }
    }

    fn lie(self, what: &str) -> TransportError {
        TransportError::Stack(format!("the plugin `{}` broke its ABI: {what}", self.name))
    }
}

fn timeout_what(call: &str) -> &'static str {
    match call {
        "accept" => "peer connected",
        "connect" => "connection",
        "send" | "commit" => "send",
        "loan" => "free loan",
        _ => "message",
    }
}

impl ErrorBuf {
    fn new() -> Self {
        ErrorBuf {
            message: [0; ERROR_BYTES],
        }
    }

    /// The library's sentence, up to its NUL (or the buffer's end, where it wrote none).
    fn text(&self) -> String {
        let bytes: Vec<u8> = self
            .message
            .iter()
            .map(|&c| c as u8)
            .take_while(|&b| b != 0)
            .collect();
        match String::from_utf8_lossy(&bytes).trim() {
            "" => "(it gave no message)".to_owned(),
            text => text.to_owned(),
        }
    }
}

/// At most `max` bytes of the NUL-terminated string at `at`, without its NUL; `None` when
/// no NUL comes within them.
///
/// # Safety
/// `at` points to a NUL-terminated string, or to at least `max` readable bytes.
unsafe fn bounded_c_str(at: *const c_char, max: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..max {
        // SAFETY: within the string or the `max` bytes the caller vouches for.
        let b = unsafe { *at.add(i) } as u8;
        if b == 0 {
            return Some(out);
        }
        out.push(b);
    }
    None
}

/// `deadline` as the header's: CLOCK_MONOTONIC, in nanoseconds (an `Instant` is that
/// clock on Linux, but its value is not public).
fn monotonic_ns(deadline: Instant) -> u64 {
    let left = deadline.saturating_duration_since(Instant::now());
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write into; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let now_ns = (now.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec as u64);
    now_ns.saturating_add(u64::try_from(left.as_nanos()).unwrap_or(u64::MAX))
}

/// A plugin's acceptor, its address read.
struct PluginAcceptor {
    plugin: Named,
    calls: Calls,
    acceptor: *mut Acc,
    address: String,
}

// SAFETY: an acceptor is used from one thread at a time, as the header asks; nothing
// else holds its pointer.
unsafe impl Send for PluginAcceptor {}

impl StackAcceptor for PluginAcceptor {
    fn address(&self) -> String {
        self.address.clone()
    }

    fn accept(
        mut self: Box<Self>,
        peer: u32,
        deadline: Instant,
    ) -> Result<Box<dyn Channel>, TransportError> {
        let acceptor = std::mem::replace(&mut self.acceptor, std::ptr::null_mut());
        let mut channel = std::ptr::null_mut();
        let mut error = ErrorBuf::new();
        // SAFETY: the header's accept, which takes the acceptor whatever it returns.
        let status = unsafe {
            (self.calls.accept)(
                acceptor,
                peer,
                monotonic_ns(deadline),
                &mut channel,
                &mut error,
            )
        };
        self.plugin.status("accept", status, &error)?;
        PluginChannel::boxed(self.plugin, self.calls, channel, "accept")
    }
}

impl Drop for PluginAcceptor {
    fn drop(&mut self) {
        if !self.acceptor.is_null() {
            // SAFETY: an acceptor never accepted on; not used again.
            unsafe { (self.calls.drop_acceptor)(self.acceptor) };
        }
    }
}

/// A plugin's channel: the [`Channel`] contract over its calls, every length it gives
/// checked against the room it had.
struct PluginChannel {
    plugin: Named,
    calls: Calls,
    channel: *mut Chan,
    /// The open loan's room, and the borrowed message, as the library lent them.
    loan: Option<(*mut u8, usize)>,
    borrowed: Option<(*const u8, usize)>,
}

// SAFETY: a channel is used from one thread at a time (`&mut self`), as the header asks;
// nothing else holds its pointers.
unsafe impl Send for PluginChannel {}

impl PluginChannel {
    /// The channel `call` gave, refused when it gave none.
    fn boxed(
        plugin: Named,
        calls: Calls,
        channel: *mut Chan,
        call: &str,
    ) -> Result<Box<dyn Channel>, TransportError> {
        if channel.is_null() {
            return Err(plugin.lie(&format!("{call} returned IPCM_OK and no channel")));
        }
        Ok(Box::new(PluginChannel {
            plugin,
            calls,
            channel,
            loan: None,
            borrowed: None,
        }))
    }

    fn loan_calls(&self) -> Result<LoanCalls, TransportError> {
        self.calls
            .loans
            .ok_or_else(|| TransportError::Loan("this plugin has no loaned path".into()))
    }
}

impl Channel for PluginChannel {
    fn send(&mut self, message: &[u8], deadline: Instant) -> Result<(), TransportError> {
        let mut error = ErrorBuf::new();
        // SAFETY: the header's send: the message's bytes, valid for the call.
        let status = unsafe {
            (self.calls.send)(
                self.channel,
                message.as_ptr(),
                message.len(),
                monotonic_ns(deadline),
                &mut error,
            )
        };
        self.plugin.status("send", status, &error)
    }

    fn recv(
        &mut self,
        buf: &mut Vec<u8>,
        limit: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        // The room is written over before each receive: a library that says it wrote
        // more than it did shows bytes that match nothing it was sent (never the last
        // reply's, which the caller's buffer held), and no byte read is uninitialised.
        buf.clear();
        buf.resize(limit, POISON);
        let mut len = 0usize;
        let mut error = ErrorBuf::new();
        // SAFETY: the header's recv, into the `limit` bytes of `buf`.
        let status = unsafe {
            (self.calls.recv)(
                self.channel,
                buf.as_mut_ptr(),
                limit,
                &mut len,
                monotonic_ns(deadline),
                &mut error,
            )
        };
        if status == TOO_LONG && len > limit {
            return Err(TransportError::TooLarge {
                announced: len as u64,
                limit,
            });
        }
        self.plugin.status("recv", status, &error)?;
        if len > limit {
            return Err(self.plugin.lie(&format!(
                "recv said it wrote {len} bytes into room for {limit}"
            )));
        }
        buf.truncate(len);
        Ok(())
    }

    fn loans(&mut self) -> Option<&mut dyn Loans> {
        if self.calls.loans.is_some() {
            Some(self)
        } else {
            None
        }
    }
}

impl Loans for PluginChannel {
    fn max_loan(&self) -> usize {
        self.calls.loans.map_or(0, |l| l.max_loan)
    }

    fn loan(&mut self, len: usize, deadline: Instant) -> Result<&mut [u8], TransportError> {
        let calls = self.loan_calls()?;
        if self.loan.is_some() {
            return Err(TransportError::Loan("a loan is open already".into()));
        }
        if len > calls.max_loan {
            return Err(TransportError::Loan(format!(
                "a {len}-byte message is longer than a loan ({} bytes)",
                calls.max_loan
            )));
        }
        let mut room = std::ptr::null_mut();
        let mut error = ErrorBuf::new();
        // SAFETY: the header's loan: room for its pointer and its error.
        let status = unsafe {
            (calls.loan)(
                self.channel,
                len,
                monotonic_ns(deadline),
                &mut room,
                &mut error,
            )
        };
        self.plugin.status("loan", status, &error)?;
        if room.is_null() && len > 0 {
            return Err(self.plugin.lie("loan returned IPCM_OK and no room"));
        }
        self.loan = Some((room, len));
        Ok(self.loaned().unwrap_or_default())
    }

    fn loaned(&mut self) -> Option<&mut [u8]> {
        let (room, len) = self.loan?;
        if len == 0 {
            return Some(&mut []);
        }
        // SAFETY: the library lent `len` writable bytes at `room` until commit or cancel,
        // and this borrow of `self` ends before either.
        Some(unsafe { std::slice::from_raw_parts_mut(room, len) })
    }

    fn cancel(&mut self) {
        if let (Some(_), Some(calls)) = (self.loan.take(), self.calls.loans) {
            // SAFETY: the header's cancel, with a loan open.
            unsafe { (calls.cancel)(self.channel) };
        }
    }

    fn commit(&mut self, deadline: Instant) -> Result<(), TransportError> {
        let calls = self.loan_calls()?;
        if self.loan.take().is_none() {
            return Err(TransportError::Loan("commit with no loan open".into()));
        }
        let mut error = ErrorBuf::new();
        // SAFETY: the header's commit, with a loan open.
        let status = unsafe { (calls.commit)(self.channel, monotonic_ns(deadline), &mut error) };
        self.plugin.status("commit", status, &error)
    }

    fn borrow(&mut self, limit: usize, deadline: Instant) -> Result<&[u8], TransportError> {
        let calls = self.loan_calls()?;
        if self.borrowed.is_some() {
            return Err(TransportError::Loan("a message is borrowed already".into()));
        }
        let mut message = std::ptr::null();
        let mut len = 0usize;
        let mut error = ErrorBuf::new();
        let room = limit.min(calls.max_loan);
        // SAFETY: the header's borrow: room for the message's place, its length and error.
        let status = unsafe {
            (calls.borrow)(
                self.channel,
                room,
                monotonic_ns(deadline),
                &mut message,
                &mut len,
                &mut error,
            )
        };
        if status == TOO_LONG && len > room {
            return Err(TransportError::TooLarge {
                announced: len as u64,
                limit: room,
            });
        }
        self.plugin.status("borrow", status, &error)?;
        let lie = if len > room {
            Some(format!(
                "borrow lent {len} bytes where at most {room} were asked for"
            ))
        } else if message.is_null() && len > 0 {
            Some(format!("borrow lent {len} bytes at NULL"))
        } else {
            None
        };
        if let Some(lie) = lie {
            // What was lent is given back before saying so.
            // SAFETY: the header's release, with a message borrowed.
            unsafe { (calls.release)(self.channel) };
            return Err(self.plugin.lie(&lie));
        }
        self.borrowed = Some((message, len));
        Ok(self.borrowed().unwrap_or_default())
    }

    fn borrowed(&self) -> Option<&[u8]> {
        let (message, len) = self.borrowed?;
        if len == 0 {
            return Some(&[]);
        }
        // SAFETY: the library lent these `len` bytes until release, and this borrow of
        // `self` ends before it.
        Some(unsafe { std::slice::from_raw_parts(message, len) })
    }

    fn release(&mut self) {
        if let (Some(_), Some(calls)) = (self.borrowed.take(), self.calls.loans) {
            // SAFETY: the header's release, with a message borrowed.
            unsafe { (calls.release)(self.channel) };
        }
    }

    fn echo_loaned(&mut self, limit: usize, deadline: Instant) -> Result<usize, TransportError> {
        let len = self.borrow(limit, deadline)?.len();
        if len == 0 {
            self.release();
            return Ok(0);
        }
        let result = self.loan(len, deadline).map(|_| ());
        if let Err(e) = result {
            self.release();
            return Err(e);
        }
        if let (Some((from, _)), Some((to, _))) = (self.borrowed, self.loan) {
            // A stack may lend the received message's own room as the reply's loan (an
            // echo in place): then there is nothing to copy.
            if !std::ptr::eq(from, to) {
                // SAFETY: `len` bytes lent each way; `copy` allows the two to overlap.
                unsafe { std::ptr::copy(from, to, len) };
            }
        }
        self.release();
        self.commit(deadline)?;
        Ok(len)
    }
}

impl Drop for PluginChannel {
    fn drop(&mut self) {
        self.cancel();
        self.release();
        // SAFETY: the channel is not used again.
        unsafe { (self.calls.close)(self.channel) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    /// A table as a C stack would give it, made here: every call present, none called.
    fn table(name: &'static CStr) -> Table {
        unsafe extern "C" fn listen(_: usize, _: *mut *mut Acc, _: *mut ErrorBuf) -> u32 {
            ERROR
        }
        unsafe extern "C" fn address(_: *const Acc) -> *const c_char {
            std::ptr::null()
        }
        unsafe extern "C" fn accept(
            _: *mut Acc,
            _: u32,
            _: u64,
            _: *mut *mut Chan,
            _: *mut ErrorBuf,
        ) -> u32 {
            ERROR
        }
        unsafe extern "C" fn drop_acceptor(_: *mut Acc) {}
        unsafe extern "C" fn connect(
            _: *const c_char,
            _: u64,
            _: *mut *mut Chan,
            _: *mut ErrorBuf,
        ) -> u32 {
            ERROR
        }
        unsafe extern "C" fn send(
            _: *mut Chan,
            _: *const u8,
            _: usize,
            _: u64,
            _: *mut ErrorBuf,
        ) -> u32 {
            ERROR
        }
        unsafe extern "C" fn recv(
            _: *mut Chan,
            _: *mut u8,
            _: usize,
            _: *mut usize,
            _: u64,
            _: *mut ErrorBuf,
        ) -> u32 {
            ERROR
        }
        unsafe extern "C" fn close(_: *mut Chan) {}
        Table {
            abi_version: ABI_VERSION,
            size: std::mem::size_of::<Table>() as u32,
            name: name.as_ptr(),
            floor: 0,
            reserved: 0,
            listen: Some(listen),
            address: Some(address),
            accept: Some(accept),
            drop_acceptor: Some(drop_acceptor),
            connect: Some(connect),
            send: Some(send),
            recv: Some(recv),
            close: Some(close),
            max_loan: 0,
            loan: None,
            commit: None,
            cancel: None,
            borrow: None,
            release: None,
        }
    }

    fn checked(t: Table) -> Result<StackTraits, String> {
        let t: &'static Table = Box::leak(Box::new(t));
        // SAFETY: a whole table that is never freed.
        unsafe { check("made-here", t) }.map(|(_, traits)| traits)
    }

    #[test]
    fn a_whole_table_is_taken_with_its_floor_and_without_loans() {
        let mut t = table(c"made-here");
        t.floor = 1;
        let traits = checked(t).unwrap();
        assert_eq!(traits.floor_like, ChannelKind::Tcp);
        assert_eq!(traits.message_paths, &[MessagePath::Copied]);
    }

    #[test]
    fn each_thing_wrong_with_a_table_is_refused_naming_it() {
        type Spoil = fn(&mut Table);
        let cases: [(Spoil, &str); 7] = [
            (|t| t.abi_version = 2, "ABI version 2"),
            (|t| t.size -= 8, "bytes; version 1's is"),
            (|t| t.name = std::ptr::null(), "has no name"),
            (|t| t.name = c"other".as_ptr(), "it calls itself `other`"),
            (|t| t.floor = 9, "its floor is 9"),
            (|t| t.recv = None, "has no `recv`"),
            (|t| t.max_loan = 64, "max_loan but no loaned path"),
        ];
        for (spoil, said) in cases {
            let mut t = table(c"made-here");
            spoil(&mut t);
            let why = checked(t).expect_err(said);
            assert!(why.contains(said), "{said:?} not in {why:?}");
        }
        // SAFETY: NULL is what the check is for.
        let why = unsafe { check("made-here", std::ptr::null()) }
            .map(|(_, traits)| traits)
            .unwrap_err();
        assert!(why.contains("returned NULL"), "{why}");
    }
}
