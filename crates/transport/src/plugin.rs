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
//!
//! Its rooms: `abi.rs`, the header's table and words, checked; `channel.rs`, the
//! [`Channel`] contract over a library's calls; this file, loading and registering.

mod abi;
mod channel;
#[cfg(test)]
mod tests;

use crate::contract::{Channel, ListenOptions};
use crate::error::{RegisterError, TransportError};
use crate::stack::{register_stack_from, Library, Stack, StackAcceptor};
#[cfg(not(target_env = "musl"))]
use abi::ENTRY;
use abi::{bounded_c_str, check, monotonic_ns, Calls, ErrorBuf, Named, Table, MAX_ADDRESS_BYTES};
use channel::{PluginAcceptor, PluginChannel};
use ipc_matrix_spec::{ChannelKind, MessagePath, StackName, StackNameError, StackTraits};
use std::ffi::{c_void, CString};
use std::path::Path;
use std::time::Instant;

pub use abi::ABI_VERSION;

/// A loaded library's stack (or, when it could not be loaded, why).
struct Plugin {
    name: &'static str,
    loaded: Result<(Calls, StackTraits), String>,
    /// For a library a probe loaded in a process of its own: it is loaded here only when
    /// this process first calls into it (a cell or a check run here); until then none of
    /// its code runs here, and `loaded` is not looked at.
    deferred: Option<Deferred>,
}

/// The library of a probed plugin, the traits its probe read, and its calls once this
/// process has loaded it.
struct Deferred {
    path: std::path::PathBuf,
    traits: StackTraits,
    calls: std::sync::OnceLock<Result<Calls, String>>,
}

/// Loads the library at `library` as the stack `name` and registers it in this process;
/// a library that cannot be loaded, or whose table is refused, is registered as broken
/// (its cells fail saying why). Err only when `name` cannot be registered at all (an
/// ill-formed name, or one taken). Loading the same library as the same name again is
/// nothing.
pub fn register_plugin(name: &str, library: &Path) -> Result<StackName, RegisterError> {
    if let Some(known) = already_from(name, library)? {
        return Ok(known);
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
        deferred: None,
    };
    register_stack_from(Box::leak(Box::new(plugin)), Some(library))
}

/// Registers the stack `name` from `library` with the `traits` a probe read from its
/// table in a process of its own ([`try_load_plugin`]), without loading it here: its
/// code runs in this process only once a cell or check here calls into it. A command
/// that runs its cells and checks in processes of their own never loads it at all.
pub fn register_probed_plugin(
    name: &str,
    library: &Path,
    traits: StackTraits,
) -> Result<StackName, RegisterError> {
    if let Some(known) = already_from(name, library)? {
        return Ok(known);
    }
    let plugin = Plugin {
        name: Box::leak(name.to_owned().into_boxed_str()),
        // What the probe read; the calls come from `deferred` once loaded here.
        loaded: Err(String::new()),
        deferred: Some(Deferred {
            path: library.to_path_buf(),
            traits,
            calls: std::sync::OnceLock::new(),
        }),
    };
    let library = Library {
        path: library.to_path_buf(),
        loaded: true,
    };
    register_stack_from(Box::leak(Box::new(plugin)), Some(library))
}

/// Registers the stack `name` from `library` as broken, for `why`, without loading it:
/// its cells fail saying so (a library whose loading crashed or hung another process).
pub fn register_broken_plugin(
    name: &str,
    library: &Path,
    why: &str,
) -> Result<StackName, RegisterError> {
    if let Some(known) = already_from(name, library)? {
        return Ok(known);
    }
    let plugin = Plugin {
        name: Box::leak(name.to_owned().into_boxed_str()),
        loaded: Err(format!(
            "the plugin `{name}` ({}) cannot be used: {why}",
            library.display()
        )),
        deferred: None,
    };
    let library = Library {
        path: library.to_path_buf(),
        loaded: false,
    };
    register_stack_from(Box::leak(Box::new(plugin)), Some(library))
}

/// The stack `name`, when this process registered it from `library` already; refused
/// when it registered it otherwise.
fn already_from(name: &str, library: &Path) -> Result<Option<StackName>, RegisterError> {
    let Some(known) = StackName::find(name).filter(|n| n.traits().is_some()) else {
        return Ok(None);
    };
    match crate::stack::library_of(known) {
        Some(known_library) if known_library.path == library => Ok(Some(known)),
        _ => Err(StackNameError::RegisteredTwice {
            name: name.to_string(),
        }
        .into()),
    }
}

/// Loads the library at `library` and checks its table, in this process, without
/// registering it: what a plugin's probe (a process of its own) does. `Err` says why the
/// library cannot be used, in the words its cells would fail with.
pub fn try_load_plugin(name: &str, library: &Path) -> Result<StackTraits, String> {
    load(name, library).map(|(_, traits)| traits)
}

/// A stack's traits as one line of text, for a probe's report ([`traits_from_text`]
/// reads it back): `wake_modes=0 paths=copied,loaned floor_like=local byte_stream=1`.
pub fn traits_to_text(traits: &StackTraits) -> String {
    let paths: Vec<&str> = traits.message_paths.iter().map(|p| p.as_str()).collect();
    format!(
        "wake_modes={} paths={} floor_like={} byte_stream={}",
        u8::from(traits.wake_modes),
        paths.join(","),
        traits.floor_like.as_str(),
        u8::from(traits.byte_stream)
    )
}

/// The traits [`traits_to_text`] wrote; `None` for any other text.
pub fn traits_from_text(text: &str) -> Option<StackTraits> {
    let mut fields = text.trim().split(' ');
    let mut next = |key: &str| fields.next()?.strip_prefix(key)?.strip_prefix('=');
    let flag = |v: &str| match v {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    };
    let wake_modes = flag(next("wake_modes")?)?;
    let paths: Vec<MessagePath> = next("paths")?
        .split(',')
        .map(|p| MessagePath::ALL.into_iter().find(|m| m.as_str() == p))
        .collect::<Option<_>>()?;
    let floor = next("floor_like")?;
    let floor_like = ChannelKind::ALL.into_iter().find(|c| c.as_str() == floor)?;
    let byte_stream = flag(next("byte_stream")?)?;
    if fields.next().is_some() || paths.is_empty() {
        return None;
    }
    Some(StackTraits {
        wake_modes,
        // Leaked once per probed plugin, as its name is.
        message_paths: Box::leak(paths.into_boxed_slice()),
        floor_like,
        byte_stream,
    })
}

/// A library is opened only when it is a regular file (symlinks followed): opening a FIFO
/// waits for a writer that may never come, and a folder or a device is nothing to load.
/// One that is not there is left to the loader, whose message names it.
pub fn library_file_refusal(library: &Path) -> Option<String> {
    let kind = std::fs::metadata(library).ok()?.file_type();
    (!kind.is_file()).then(|| {
        format!(
            "it is {}, not a regular file: a library is a file (refused before opening it)",
            ipc_matrix_count_window::describe_file_kind(kind)
        )
    })
}

/// Opens the library and checks its table.
#[cfg(not(target_env = "musl"))]
fn load(name: &str, library: &Path) -> Result<(Calls, StackTraits), String> {
    if let Some(refusal) = library_file_refusal(library) {
        return Err(refusal);
    }
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
    unsafe { check(name, table) }.map_err(|why| why.to_string())
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
pub unsafe fn register_linked_plugin(
    name: &str,
    entry: LinkedTable,
) -> Result<StackName, RegisterError> {
    // SAFETY: the caller's promise.
    let checked = unsafe { check(name, entry().cast::<Table>()) }.map_err(|why| {
        RegisterError::LinkedTableRefused {
            name: name.to_string(),
            why: why.to_string(),
        }
    })?;
    let plugin = Plugin {
        name: Box::leak(name.to_owned().into_boxed_str()),
        loaded: Ok(checked),
        deferred: None,
    };
    register_stack_from(Box::leak(Box::new(plugin)), None)
}

impl Stack for Plugin {
    fn name(&self) -> &'static str {
        self.name
    }

    fn traits(&self) -> StackTraits {
        if let Some(deferred) = &self.deferred {
            return deferred.traits;
        }
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

impl Plugin {
    fn calls(&self) -> Result<Calls, TransportError> {
        let loaded = match &self.deferred {
            Some(deferred) => deferred
                .calls
                .get_or_init(|| {
                    load(self.name, &deferred.path)
                        .map(|(calls, _)| calls)
                        .map_err(|why| {
                            format!(
                                "the plugin `{}` ({}) cannot be used: {why}",
                                self.name,
                                deferred.path.display()
                            )
                        })
                })
                .as_ref()
                .map(|calls| *calls),
            None => self.loaded.as_ref().map(|(calls, _)| *calls),
        };
        loaded.map_err(|why| TransportError::Stack(why.clone()))
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
