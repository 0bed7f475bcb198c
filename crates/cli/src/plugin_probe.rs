//! A plugin's library is loaded first in a process of its own (this binary again, told by
//! [`PLUGIN_PROBE_ENV`]), before any command loads it in its own: loading runs the
//! library's initialisers and its `ipcm_stack_v1()`, and one that crashes or hangs there
//! would take the command with it. When the probe dies or does not finish in time, the
//! plugin is registered as broken, saying so, and only its cells fail.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Set in a probe to `<name>\n<library path>`.
pub const PLUGIN_PROBE_ENV: &str = "IPC_MATRIX_PLUGIN_PROBE";

/// How long loading a library may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// In a probe: loads the library (checking its table) and exits; nothing otherwise. What
/// is wrong with a library that loads is for the command to say, so that exits 0 too.
pub fn serve_if_requested() {
    let Some(request) = std::env::var_os(PLUGIN_PROBE_ENV) else {
        return;
    };
    let request = request.to_string_lossy().into_owned();
    let code = match request.split_once('\n') {
        Some((name, library)) => {
            match ipc_matrix_transport::register_plugin(name, Path::new(library)) {
                Ok(_) => 0,
                Err(why) => {
                    eprintln!("error: {why}");
                    2
                }
            }
        }
        None => 2,
    };
    std::process::exit(code);
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
    #[error("loading it ended the process that loaded it (exit status {code:?})")]
    Ended { code: Option<i32> },
}

/// Loads the library at `library` in a probe; `Err` says why it must not be loaded here.
pub fn probe(name: &str, library: &Path) -> Result<(), ProbeRefusal> {
    let not_started = |what| move |source| ProbeRefusal::NotStarted { what, source };
    let mut child = crate::this_binary::command()
        .map_err(not_started("finding this binary"))?
        .env(PLUGIN_PROBE_ENV, format!("{name}\n{}", library.display()))
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
    match (status.code(), status.signal()) {
        (Some(0), _) => Ok(()),
        // Refused with a reason the command gives again when it loads it.
        (Some(2), _) => Ok(()),
        (_, Some(signal)) => Err(ProbeRefusal::Crashed { signal }),
        (code, _) => Err(ProbeRefusal::Ended { code }),
    }
}
