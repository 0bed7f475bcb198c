//! The peer's front door: the same binary started as `<exe> serve --config <json>`. It
//! reads its configuration, pins itself, and hands over to the kind that serves its role.

use crate::kinds;
use crate::peer::{PeerConfig, SERVE_ARG};
use ipc_matrix_transport::{die_with_parent, set_thread_cpus};

/// If this process was started as a peer, serves and exits; otherwise returns at once.
/// Call it first thing in `main` of every binary that may act as a peer.
pub fn serve_if_requested() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some(SERVE_ARG) {
        return;
    }
    let code = match parse(&args[2..]).and_then(serve) {
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
