//! The peer's front door: the same binary started as `<exe> serve --config <json>`. It
//! reads its configuration, pins itself, and hands over to the kind that serves its role.

use crate::kinds;
use crate::peer::{PeerConfig, SERVE_ARG};
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
    let text: Result<Vec<String>, String> = args[2..]
        .iter()
        .map(|a| {
            a.clone()
                .into_string()
                .map_err(|raw| format!("an argument is not UTF-8: {}", raw.to_string_lossy()))
        })
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

fn parse(args: &[String]) -> Result<PeerConfig, String> {
    match args {
        [flag, json] if flag == "--config" => {
            serde_json::from_str(json).map_err(|e| format!("bad --config: {e}"))
        }
        _ => Err(format!(
            "usage: {SERVE_ARG} --config <json> (started by ipc-matrix itself, not by hand)"
        )),
    }
}

fn serve(config: PeerConfig) -> Result<(), String> {
    if !die_with_parent(config.parent) {
        return Err("the measuring process exited before the peer started".into());
    }
    if let Some(cpu) = config.cpu {
        set_thread_cpus(&[cpu]).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
    }
    if config.count.is_some() {
        ipc_matrix_count_window::mark_pauses();
    }
    kinds::serve(&config)
}
