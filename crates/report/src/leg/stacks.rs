//! IPC stacks side by side: every request/reply cell of one payload size (200 B, the
//! source experiments' small message), whatever carries it (our shared-memory ring, the
//! sockets, a pipe, Cap'n Proto RPC, ZeroMQ, ...), fastest first, each next to its floor.

use super::model::LegReport;
use ipc_matrix_results::CellResult;
use ipc_matrix_spec::{Cell, ScenarioKind};

/// How to read the stacks table, on the page above it.
pub const STACKS_EXPLAINED: &str = "Each stack's median round trip (p50) stands next to two references timed in the same run on the same two CPUs: its floor, the simplest exchange of the payload its transport could do (two threads copying it through shared memory, or a socket pair), and, where the stack's authors publish a benchmark, that benchmark's own setup (iceoryx2's publish-subscribe benchmark beside its busy-poll cells, its event benchmark, a notification each way with no payload, beside its blocking ones), timed in blocks between the cell's own round trips as the floor is. cell / floor is what the stack and the harness cost above the machine; cell / own setup is what the harness adds to the stack as its authors use it: a separate peer process, which reads each request to echo it, and deadlines and liveness looks. Every byte of every reply is checked after the clock stops; on a stack's loans the request is written into its loan before the clock starts (where a copied request is stamped), and each side gives a received message back while the other works. A ratio under 1 is a cell faster than its reference: a zero-copy stack's loans beat a copying floor.";

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
            Some(Stack {
                name: format!("{name}{}", whose_and_where(&result.cell)),
                result,
            })
        })
        .collect();
    stacks.sort_by_key(|s| s.result.latency_ns.map(|l| l.p50));
    stacks
}

/// What sets a stack apart beyond its transport: a peer of someone else's (its program's
/// name) and a peer on a second host (a network namespace, with its link's MTU).
fn whose_and_where(cell: &Cell) -> String {
    let mut out = String::new();
    if let Some(program) = cell.peer.as_ref().and_then(|p| p.command.first()) {
        let name = program.rsplit('/').next().unwrap_or(program);
        out.push_str(&format!(", peer {name}"));
    }
    if let Some(link) = cell.host.netns() {
        out.push_str(&format!(", second host (netns, MTU {})", link.mtu));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipc_matrix_results::fixture::{environment, passed, quick_cells};
    use ipc_matrix_spec::RegressionPolicy;

    /// Three tcp echo stacks, ours, someone else's and ours on a second host, are three
    /// names, fastest first.
    #[test]
    fn an_external_peer_and_a_second_host_are_named_apart_from_our_own_peer() {
        let cells = quick_cells(concat!(
            "  - { name: echo, kind: echo, transports: [tcp], payloads: [200B], iterations: 10, timeout: 1s }\n",
            "  - { name: echo-c, kind: echo, transports: [tcp], payloads: [200B], iterations: 10, timeout: 1s, peer: { command: [\"peers/c/build/{target}/c-echo-peer\"] } }\n",
            "  - { name: echo-netns, kind: echo, transports: [tcp], payloads: [200B], iterations: 10, timeout: 1s, host: netns, mtu: 9000 }\n",
        ));
        let env = environment("native", "cpu");
        let results = cells
            .iter()
            .zip([3_000u64, 1_000, 2_000])
            .map(|(cell, ns)| passed(cell, &env, vec![ns; 10]))
            .collect();
        let report = LegReport::new(results, None, RegressionPolicy::default(), 0);
        let names: Vec<String> = stacks(&report).into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "tcp, peer c-echo-peer",
                "tcp, second host (netns, MTU 9000)",
                "tcp"
            ]
        );
    }
}
