//! IPC stacks side by side: every request/reply cell of one payload size (200 B, the
//! source experiments' small message), whatever carries it (our shared-memory ring, the
//! sockets, a pipe, Cap'n Proto RPC, ZeroMQ, ...), fastest first, each next to its floor.

use crate::LegReport;
use ipc_matrix_results::CellResult;
use ipc_matrix_spec::ScenarioKind;

/// The payload the stacks are compared at.
pub const STACK_PAYLOAD: u64 = 200;

/// One stack: what carries the message, and its cell.
pub struct Stack<'a> {
    pub name: String,
    pub result: &'a CellResult,
}

/// The passed request/reply cells of [`STACK_PAYLOAD`], by median round trip.
pub fn stacks(report: &LegReport) -> Vec<Stack<'_>> {
    let mut stacks: Vec<Stack> = report
        .results
        .iter()
        .filter(|r| r.cell.payload_bytes == STACK_PAYLOAD && r.latency_ns.is_some())
        .filter_map(|result| {
            let transport = result.cell.transport_label();
            let name = match result.cell.kind() {
                ScenarioKind::Echo => transport,
                ScenarioKind::Rpc => format!("Cap'n Proto RPC over {transport}"),
                ScenarioKind::ReqRep => format!("ZeroMQ REQ/REP over {transport}"),
                _ => return None,
            };
            Some(Stack { name, result })
        })
        .collect();
    stacks.sort_by_key(|s| s.result.latency_ns.map(|l| l.p50));
    stacks
}
