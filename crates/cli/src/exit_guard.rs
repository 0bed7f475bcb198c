//! Our exit status is ours. A command may run code that is not ipc-matrix's in its own
//! process (a plugin library's initialisers and calls, the libraries they start), and
//! such code may call `exit()`: with the status it chose (0 included) the command would
//! end as if it had finished. Once armed, an `exit()` that ipc-matrix did not ask for
//! ends the process with [`exit_code::CELL_FAILED`](crate::exit_code::CELL_FAILED),
//! saying so, whatever status it was given. (`_exit()` and signals bypass every handler:
//! code that may do that runs in a process of its own, whose parent judges its end.)

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set when ipc-matrix itself ends the process: its own exit, not a stranger's.
static OURS: AtomicBool = AtomicBool::new(false);

extern "C" fn on_exit() {
    if OURS.load(Ordering::SeqCst) {
        return;
    }
    const SAID: &[u8] = b"error: this run was ended by exit() from code that is not ipc-matrix's (a plugin's library, or a library it loaded) before it finished; that exit's status is not the run's, which failed\n";
    // SAFETY: writing a static buffer to stderr, then ending the process at once, as an
    // exit handler may (no other handler, no destructor, no buffered stdout of the
    // stranger's is trusted after this).
    unsafe {
        libc::write(libc::STDERR_FILENO, SAID.as_ptr().cast(), SAID.len());
        libc::_exit(i32::from(crate::exit_code::CELL_FAILED));
    }
}

/// From now on an `exit()` not asked for by [`run_as_ours`] or [`exit`] fails the process.
pub fn arm() {
    static ARMED: std::sync::Once = std::sync::Once::new();
    ARMED.call_once(|| {
        // SAFETY: registering a handler with the signature atexit takes.
        if unsafe { libc::atexit(on_exit) } != 0 {
            eprintln!("warning: the guard against a library's exit() could not be set");
        }
    });
}

/// Runs `main` and returns its status as the process's, ended by ipc-matrix. A panic
/// that reaches here is ipc-matrix's own end too (its status 101 stands); one caught on
/// the way (a test harness's) changes nothing.
pub fn run_as_ours(main: impl FnOnce() -> ExitCode) -> ExitCode {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(main)) {
        Ok(code) => {
            OURS.store(true, Ordering::SeqCst);
            code
        }
        Err(panic) => {
            OURS.store(true, Ordering::SeqCst);
            std::panic::resume_unwind(panic)
        }
    }
}

/// Ends the process with `code`, as ipc-matrix.
pub fn exit(code: i32) -> ! {
    OURS.store(true, Ordering::SeqCst);
    std::process::exit(code)
}
