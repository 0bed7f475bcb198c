//! The C ABI of `include/ipc_matrix_stack.h`, version 1, as Rust sees it: the table field
//! for field, its status words, and the check a table passes before any of its calls is
//! made.

use crate::error::TransportError;
use ipc_matrix_spec::{ChannelKind, MessagePath, StackTraits};
use std::ffi::{c_char, c_void};
use std::time::Instant;

/// The ABI version this build speaks (`IPCM_STACK_ABI_VERSION`).
pub const ABI_VERSION: u32 = 1;
/// The symbol looked up in a library.
#[cfg(not(target_env = "musl"))]
pub(super) const ENTRY: &[u8] = b"ipcm_stack_v1\0";
/// `IPCM_ERROR_BYTES`.
pub(super) const ERROR_BYTES: usize = 256;
/// What a receive's room holds before the library writes into it.
pub(super) const POISON: u8 = 0xa5;
/// The longest address a library may give, with its NUL.
pub(super) const MAX_ADDRESS_BYTES: usize = 4096;

pub(super) const OK: u32 = 0;
pub(super) const TIMEOUT: u32 = 1;
pub(super) const CLOSED: u32 = 2;
pub(super) const TOO_LONG: u32 = 3;
pub(super) const ERROR: u32 = 4;

#[repr(C)]
pub(super) struct ErrorBuf {
    pub(super) message: [c_char; ERROR_BYTES],
}

pub(super) type Acc = c_void;
pub(super) type Chan = c_void;

/// `ipcm_stack_table_v1`, field for field.
#[repr(C)]
pub(super) struct Table {
    pub(super) abi_version: u32,
    pub(super) size: u32,
    pub(super) name: *const c_char,
    pub(super) floor: u32,
    pub(super) reserved: u32,
    pub(super) listen: Option<unsafe extern "C" fn(usize, *mut *mut Acc, *mut ErrorBuf) -> u32>,
    pub(super) address: Option<unsafe extern "C" fn(*const Acc) -> *const c_char>,
    pub(super) accept:
        Option<unsafe extern "C" fn(*mut Acc, u32, u64, *mut *mut Chan, *mut ErrorBuf) -> u32>,
    pub(super) drop_acceptor: Option<unsafe extern "C" fn(*mut Acc)>,
    pub(super) connect:
        Option<unsafe extern "C" fn(*const c_char, u64, *mut *mut Chan, *mut ErrorBuf) -> u32>,
    pub(super) send:
        Option<unsafe extern "C" fn(*mut Chan, *const u8, usize, u64, *mut ErrorBuf) -> u32>,
    pub(super) recv: Option<
        unsafe extern "C" fn(*mut Chan, *mut u8, usize, *mut usize, u64, *mut ErrorBuf) -> u32,
    >,
    pub(super) close: Option<unsafe extern "C" fn(*mut Chan)>,
    pub(super) max_loan: usize,
    pub(super) loan:
        Option<unsafe extern "C" fn(*mut Chan, usize, u64, *mut *mut u8, *mut ErrorBuf) -> u32>,
    pub(super) commit: Option<unsafe extern "C" fn(*mut Chan, u64, *mut ErrorBuf) -> u32>,
    pub(super) cancel: Option<unsafe extern "C" fn(*mut Chan)>,
    pub(super) borrow: Option<
        unsafe extern "C" fn(
            *mut Chan,
            usize,
            u64,
            *mut *const u8,
            *mut usize,
            *mut ErrorBuf,
        ) -> u32,
    >,
    pub(super) release: Option<unsafe extern "C" fn(*mut Chan)>,
}

/// The calls every table has, checked present once: the channel's hot path then calls
/// them without looking again.
#[derive(Clone, Copy)]
pub(super) struct Calls {
    pub(super) listen: unsafe extern "C" fn(usize, *mut *mut Acc, *mut ErrorBuf) -> u32,
    pub(super) address: unsafe extern "C" fn(*const Acc) -> *const c_char,
    pub(super) accept:
        unsafe extern "C" fn(*mut Acc, u32, u64, *mut *mut Chan, *mut ErrorBuf) -> u32,
    pub(super) drop_acceptor: unsafe extern "C" fn(*mut Acc),
    pub(super) connect:
        unsafe extern "C" fn(*const c_char, u64, *mut *mut Chan, *mut ErrorBuf) -> u32,
    pub(super) send: unsafe extern "C" fn(*mut Chan, *const u8, usize, u64, *mut ErrorBuf) -> u32,
    pub(super) recv:
        unsafe extern "C" fn(*mut Chan, *mut u8, usize, *mut usize, u64, *mut ErrorBuf) -> u32,
    pub(super) close: unsafe extern "C" fn(*mut Chan),
    pub(super) loans: Option<LoanCalls>,
}

#[derive(Clone, Copy)]
pub(super) struct LoanCalls {
    pub(super) max_loan: usize,
    pub(super) loan:
        unsafe extern "C" fn(*mut Chan, usize, u64, *mut *mut u8, *mut ErrorBuf) -> u32,
    pub(super) commit: unsafe extern "C" fn(*mut Chan, u64, *mut ErrorBuf) -> u32,
    pub(super) cancel: unsafe extern "C" fn(*mut Chan),
    pub(super) borrow: unsafe extern "C" fn(
        *mut Chan,
        usize,
        u64,
        *mut *const u8,
        *mut usize,
        *mut ErrorBuf,
    ) -> u32,
    pub(super) release: unsafe extern "C" fn(*mut Chan),
}

/// Why a stack's table is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TableRefusal {
    #[error("ipcm_stack_v1() returned NULL")]
    Null,
    #[error("its table is ABI version {0}; this ipc-matrix speaks version {ABI_VERSION}")]
    Version(u32),
    #[error(
        "its table is {size} bytes; version {ABI_VERSION}'s is {} (was it built with this ipc_matrix_stack.h?)",
        std::mem::size_of::<Table>()
    )]
    Size { size: u32 },
    #[error("its table has no name")]
    NoName,
    #[error("its name is longer than 40 bytes")]
    LongName,
    #[error("it calls itself `{own}`, and matrix.yaml `{given}`: the two must agree")]
    OtherName { own: String, given: String },
    #[error("its reserved field is {0}, where version 1 asks for 0")]
    Reserved(u32),
    #[error("its floor is {0}, which ABI version 1 does not have (0 to 4)")]
    Floor(u32),
    #[error("its table has no `{0}` (a NULL where a call must be)")]
    Missing(&'static str),
    #[error("it has the loaned path, with a max_loan of 0")]
    ZeroMaxLoan,
    #[error("it gives a max_loan but no loaned path (loan, commit, cancel, borrow, release)")]
    MaxLoanWithoutLoans,
    #[error("its loaned path is only partly there: loan, commit, cancel, borrow and release are all set or all NULL")]
    PartLoans,
}

/// Checks the table at `table` (the ABI version and size first, then the rest) and takes
/// its calls.
///
/// # Safety
/// `table` is NULL, or points to a table that starts with the header's two u32s and, when
/// they are version 1's, is a whole `ipcm_stack_table_v1` that is never freed.
pub(super) unsafe fn check(
    name: &str,
    table: *const Table,
) -> Result<(Calls, StackTraits), TableRefusal> {
    if table.is_null() {
        return Err(TableRefusal::Null);
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
        return Err(TableRefusal::Version(version));
    }
    if size as usize != std::mem::size_of::<Table>() {
        return Err(TableRefusal::Size { size });
    }
    // SAFETY: the version and size are ours, so the whole table is there; it lives as
    // long as the library, which is never unloaded.
    let table: &'static Table = unsafe { &*table };
    let own_name = if table.name.is_null() {
        return Err(TableRefusal::NoName);
    } else {
        // SAFETY: the header says name is a NUL-terminated string the library keeps; at
        // most a name's 40 bytes and its NUL are read.
        match unsafe { bounded_c_str(table.name, 41) } {
            Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            None => return Err(TableRefusal::LongName),
        }
    };
    if own_name != name {
        return Err(TableRefusal::OtherName {
            own: own_name,
            given: name.to_string(),
        });
    }
    if table.reserved != 0 {
        return Err(TableRefusal::Reserved(table.reserved));
    }
    let floor_like = match table.floor {
        0 => ChannelKind::Local,
        1 => ChannelKind::Tcp,
        2 => ChannelKind::Udp,
        3 => ChannelKind::Pipe,
        4 => ChannelKind::Shm,
        other => return Err(TableRefusal::Floor(other)),
    };
    let missing = TableRefusal::Missing;
    let loans = match (
        table.loan,
        table.commit,
        table.cancel,
        table.borrow,
        table.release,
    ) {
        (Some(loan), Some(commit), Some(cancel), Some(borrow), Some(release)) => {
            if table.max_loan == 0 {
                return Err(TableRefusal::ZeroMaxLoan);
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
            return Err(TableRefusal::MaxLoanWithoutLoans)
        }
        (None, None, None, None, None) => None,
        _ => return Err(TableRefusal::PartLoans),
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

/// What a channel or acceptor keeps of its plugin, to name it in errors.
#[derive(Clone, Copy)]
pub(super) struct Named {
    pub(super) name: &'static str,
}

impl Named {
    /// `Ok` for IPCM_OK, else the error the status and message say.
    pub(super) fn status(
        self,
        call: &str,
        status: u32,
        error: &ErrorBuf,
    ) -> Result<(), TransportError> {
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
            // The header's enum is a C int: -1 is told as -1.
            other => Err(self.lie(&format!(
                "{call} returned status {}, which ABI version 1 does not have (0 to 4)",
                other as i32
            ))),
        }
    }

    pub(super) fn lie(self, what: &str) -> TransportError {
        TransportError::Stack(format!("the plugin `{}` broke its ABI: {what}", self.name))
    }
}

pub(super) fn timeout_what(call: &str) -> &'static str {
    match call {
        "accept" => "peer connected",
        "connect" => "connection",
        "send" | "commit" => "send",
        "loan" => "free loan",
        _ => "message",
    }
}

impl ErrorBuf {
    pub(super) fn new() -> Self {
        ErrorBuf {
            message: [0; ERROR_BYTES],
        }
    }

    /// The library's sentence, up to its NUL (or the buffer's end, where it wrote none).
    pub(super) fn text(&self) -> String {
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
pub(super) unsafe fn bounded_c_str(at: *const c_char, max: usize) -> Option<Vec<u8>> {
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
pub(super) fn monotonic_ns(deadline: Instant) -> u64 {
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
