//! A plugin's library is loaded first in a process of its own (this binary again, told by
//! [`PLUGIN_PROBE_ENV`]), before any command loads it in its own: loading runs the
//! library's initialisers and its `ipcm_stack_v1()`, and one that crashes, hangs or exits
//! there would take the command with it. Only a probe that reached its end and wrote its
//! report says anything: a probe that exited, whatever its status (an initialiser may call
//! `exit(0)`), died or did not finish in time registers the plugin as broken, saying so,
//! and only its cells fail. A library the probe refused is never loaded here either; one
//! it loaded is registered with the traits the probe read from its table, and loaded
//! here only if a cell or a check runs in this process (never in `run`, `conformance` or
//! the nextest door, which run each in a process of its own).

use ipc_matrix_transport::PrivateDir;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// Set in a probe to the folder of its request: `name` and `library` in, `report` out.
pub const PLUGIN_PROBE_ENV: &str = "IPC_MATRIX_PLUGIN_PROBE";

/// How long loading a library may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The first line of a probe's report when the library loaded and its table was taken.
const LOADED: &str = "loaded";
/// The first line of a probe's report when the library was refused; its reason follows.
const REFUSED: &str = "refused";

/// In a probe: loads the library (checking its table), writes what came of it into the
/// request's folder and exits 0; nothing otherwise. The report, not the exit status,
/// is the answer: a library's initialiser can exit with any status, but it cannot have
/// reached the end of this function.
pub fn serve_if_requested() {
    let Some(dir) = std::env::var_os(PLUGIN_PROBE_ENV) else {
        return;
    };
    // Not seen by the library's initialisers, nor passed on to anything they start.
    std::env::remove_var(PLUGIN_PROBE_ENV);
    let dir = PathBuf::from(dir);
    let read = |file: &str| std::fs::read(dir.join(file));
    let code = match (read("name"), read("library")) {
        (Ok(name), Ok(library)) => {
            let name = String::from_utf8_lossy(&name);
            let library = Path::new(std::ffi::OsStr::from_bytes(&library));
            let report = match ipc_matrix_transport::try_load_plugin(&name, library) {
                Ok(traits) => format!(
                    "{LOADED}\n{}",
                    ipc_matrix_transport::traits_to_text(&traits)
                ),
                Err(why) => format!("{REFUSED}\n{why}"),
            };
            let partial = dir.join("report.partial");
            match std::fs::write(&partial, report)
                .and_then(|()| std::fs::rename(&partial, dir.join("report")))
            {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("error: a plugin's probe could not write its report: {e}");
                    2
                }
            }
        }
        _ => {
            eprintln!("error: a plugin's probe could not read its request");
            2
        }
    };
    std::process::exit(code);
}

/// What a probe found that the library is: loadable, with the traits its table gives,
/// or refused with the reason its cells fail with.
#[derive(Debug)]
pub enum Probed {
    Loaded(ipc_matrix_spec::StackTraits),
    Refused(String),
}

/// Why a library must not be loaded in the process that runs the cells: loading it in a
/// probe of its own failed so.
#[derive(Debug, thiserror::Error)]
pub enum ProbeRefusal {
    #[error("{what}: {source}")]
    NotStarted {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "loading it did not finish in {PROBE_TIMEOUT:?}: its initialisers or ipcm_stack_v1() hang"
    )]
    Hung,
    #[error("loading it killed the process that loaded it (signal {signal}): its initialisers or ipcm_stack_v1() crashed")]
    Crashed { signal: i32 },
    #[error("loading it ended the process that loaded it (exit status {code}) before loading was done: its initialisers or ipcm_stack_v1() exited")]
    Ended { code: i32 },
}

/// Loads the library at `library` in a probe: whether it loads, or why it must not be
/// loaded here.
pub fn probe(name: &str, library: &Path) -> Result<Probed, ProbeRefusal> {
    // Refused by its type before anything opens it (a FIFO would block the opener).
    if let Some(refusal) = ipc_matrix_transport::library_file_refusal(library) {
        return Ok(Probed::Refused(refusal));
    }
    let not_started = |what| move |source| ProbeRefusal::NotStarted { what, source };
    let dir = PrivateDir::create().map_err(not_started("making a folder for its probe"))?;
    std::fs::write(dir.path().join("name"), name)
        .and_then(|()| std::fs::write(dir.path().join("library"), library.as_os_str().as_bytes()))
        .map_err(not_started("writing its probe's request"))?;
    let mut child = crate::this_binary::command()
        .map_err(not_started("finding this binary"))?
        .env(PLUGIN_PROBE_ENV, dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(not_started("starting a process to load it in"))?;
    let status =
        crate::this_binary::wait_within(&mut child, PROBE_TIMEOUT, Duration::from_millis(5))
            .map_err(not_started("waiting for the process that loads it"))?;
    let Some(status) = status else {
        return Err(ProbeRefusal::Hung);
    };
    use std::os::unix::process::ExitStatusExt;
    let report = crate::this_binary::read_childs_word(
        &dir.path().join("report"),
        1 << 16,
        "a probe's report",
    );
    match (status.code(), status.signal(), report) {
        (Some(0), _, Some(report)) => Ok(match report.split_once('\n') {
            Some((REFUSED, why)) => Probed::Refused(why.to_owned()),
            Some((LOADED, traits)) => match ipc_matrix_transport::traits_from_text(traits) {
                Some(traits) => Probed::Loaded(traits),
                None => Probed::Refused("its probe's report does not read back".to_owned()),
            },
            _ => Probed::Refused("its probe's report does not read back".to_owned()),
        }),
        (_, Some(signal), _) => Err(ProbeRefusal::Crashed { signal }),
        (code, _, _) => Err(ProbeRefusal::Ended {
            code: code.unwrap_or(-1),
        }),
    }
}
