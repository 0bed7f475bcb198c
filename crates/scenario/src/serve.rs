//! The peer's front door: the same binary started as `<exe> serve --config <json>`. It
//! reads its configuration, pins itself, and hands over to the kind that serves its role.

use crate::kinds;
use crate::peer::{PeerConfig, PeerError, SERVE_ARG};
use ipc_matrix_transport::{die_with_parent, set_thread_cpus};

/// If this process was started as a peer, serves and exits; otherwise returns at once.
/// Call it first thing in `main` of every binary that may act as a peer.
pub fn serve_if_requested() {
    // Arguments as the OS gives them: the binary's own command line may hold paths that
    // are not UTF-8, which are none of this function's business.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).and_then(|a| a.to_str()) != Some(SERVE_ARG) {
        return;
    }
    let text: Result<Vec<String>, PeerError> = args[2..]
        .iter()
        .map(|a| a.clone().into_string().map_err(PeerError::ArgumentNotUtf8))
        .collect();
    let code = match text.and_then(|args| parse(&args)).and_then(serve) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ipc-matrix peer: {e}");
            2
        }
    };
    std::process::exit(code);
}

fn parse(args: &[String]) -> Result<PeerConfig, PeerError> {
    match args {
        [flag, json] if flag == "--config" => {
            serde_json::from_str(json).map_err(PeerError::BadConfig)
        }
        _ => Err(PeerError::Usage),
    }
}

fn serve(config: PeerConfig) -> Result<(), PeerError> {
    if !die_with_parent(config.parent) {
        return Err(PeerError::ParentGone);
    }
    if let Some(cpu) = config.cpu {
        set_thread_cpus(&[cpu]).map_err(|source| PeerError::Pinning { cpu, source })?;
    }
    if config.count.is_some() {
        ipc_matrix_count_window::mark_pauses();
    }
    kinds::serve(&config)
}
