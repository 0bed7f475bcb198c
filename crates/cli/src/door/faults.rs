//! The echo fault trials of a channel: its peer commits each fault ([`FaultKind`]) at
//! round trip [`FAULT_AT`], and its cell must fail that round trip, with the right reason
//! and the byte offset. Run for every built-in channel by this repository's nextest door,
//! and for every stack a user registers by theirs (`fault::<stack>::flip-byte`).

use ipc_matrix_results::{CellResult, Failure, FailureKind};
use ipc_matrix_scenario::{run_cell, Fault, FaultKind, RunOptions};
use ipc_matrix_spec::{
    Cell, ChannelKind, Echoes, MessagePath, StackName, TransportKind, WakeMode, Work,
    CELL_GROUP_FAULT,
};
use libtest_mimic::{Failed, Trial};
use std::time::Duration;

/// The round trip (0-based, warm-up included) whose reply the peer spoils.
pub const FAULT_AT: u64 = 4;

/// Every channel of an echo cell, built in or registered here, those with wake modes
/// (shared memory) in each.
pub fn echo_variants() -> Vec<(TransportKind, Option<WakeMode>)> {
    ChannelKind::ALL
        .into_iter()
        .chain(StackName::registered().into_iter().map(ChannelKind::Stack))
        .flat_map(variants_of)
        .collect()
}

/// The echo fault trials of every stack this process registered.
pub fn registered_stacks_fault_trials() -> Vec<Trial> {
    let stacks: Vec<ChannelKind> = StackName::registered()
        .into_iter()
        .map(ChannelKind::Stack)
        .collect();
    echo_fault_trials(&stacks)
}

/// `channel` in each of its wake modes, or once.
fn variants_of(channel: ChannelKind) -> Vec<(TransportKind, Option<WakeMode>)> {
    let t = TransportKind::from(channel);
    match t.has_wake_modes() {
        true => vec![(t, Some(WakeMode::Blocking)), (t, Some(WakeMode::BusyPoll))],
        false => vec![(t, None)],
    }
}

/// One test per fault for each of `channels` (in each wake mode): `fault::<label>::<fault>`
/// on its own path, and `fault::loaned::<label>::<fault>` on the loaned path where it has
/// one, checked where the reply lies.
pub fn echo_fault_trials(channels: &[ChannelKind]) -> Vec<Trial> {
    let mut trials = Vec::new();
    let variants: Vec<_> = channels.iter().flat_map(|c| variants_of(*c)).collect();
    for &(transport, wake) in &variants {
        for kind in FaultKind::ALL {
            let mut cell = fault_cell(transport, wake);
            cell.id = format!(
                "{CELL_GROUP_FAULT}::{}::{}",
                cell.transport_label(),
                kind.as_str()
            );
            trials.push(Trial::test(cell.id.clone(), move || {
                check_fault(&cell, kind)
            }));
        }
    }
    for (prefix, cell) in loaned_cells(&variants) {
        for kind in FaultKind::ALL {
            let mut cell = cell.clone();
            cell.id = format!("{prefix}::{}", kind.as_str());
            trials.push(Trial::test(cell.id.clone(), move || {
                check_fault(&cell, kind)
            }));
        }
    }
    trials
}

/// The fault tests' echo cells on the loaned path: one per variant whose channel has it,
/// named `fault::loaned::<transport>`. A loan holds a whole message, so this path has no
/// chunk boundaries to spoil.
pub fn loaned_cells(variants: &[(TransportKind, Option<WakeMode>)]) -> Vec<(String, Cell)> {
    variants
        .iter()
        .filter(|(transport, _)| {
            transport
                .channel()
                .is_some_and(|c| c.message_paths().contains(&MessagePath::Loaned))
        })
        .map(|&(transport, wake)| {
            let mut cell = fault_cell(transport, wake);
            cell.work = Work::Echo(Echoes {
                path: Some(MessagePath::Loaned),
                ..Echoes::new(timeout_for(transport), 0.0)
            });
            let prefix = format!("{CELL_GROUP_FAULT}::loaned::{}", cell.transport_label());
            (prefix, cell)
        })
        .collect()
}

/// An echo cell of the fault tests over `transport`: 2 + 6 round trips of 200 B.
pub fn fault_cell(transport: TransportKind, wake: Option<WakeMode>) -> Cell {
    Cell {
        id: String::new(),
        scenario: CELL_GROUP_FAULT.into(),
        transport,
        wake,
        payload_bytes: 200,
        payload_label: "200B".into(),
        iterations: 6,
        warmup: 2,
        seed: 42,
        profile: "fault".into(),
        work: Work::Echo(Echoes::new(timeout_for(transport), 0.0)),
        host: Default::default(),
        peer: None,
    }
}

/// The time limit of the fault tests' cells: short, so stalls end quickly; generous next
/// to a loopback round trip.
pub fn timeout_for(transport: TransportKind) -> Duration {
    Duration::from_millis(if transport == TransportKind::Udp {
        400
    } else {
        1500
    })
}

/// Runs `cell` with a peer that commits `kind` at round trip [`FAULT_AT`]; the failure,
/// or an error when the cell passed regardless.
pub fn failure_under_fault(cell: &Cell, kind: FaultKind) -> Result<Failure, Failed> {
    let options = RunOptions {
        fault: Some(Fault::new(kind, FAULT_AT)),
        ..RunOptions::default()
    };
    let result = run_cell(cell, &options);
    took_the_asked_path(cell, &result)?;
    result
        .outcome
        .failure
        .ok_or_else(|| format!("the cell passed although the peer committed {kind:?}").into())
}

/// A cell that asked for a message path took it: a fault test of the loaned path that
/// silently copied would prove nothing of it.
pub fn took_the_asked_path(cell: &Cell, result: &CellResult) -> Result<(), Failed> {
    match cell.work.message_path() {
        Some(path) if result.message_path != Some(path) => Err(format!(
            "{}: asked for the {path} path, took {:?}",
            cell.id, result.message_path
        )
        .into()),
        _ => Ok(()),
    }
}

/// The byte offset a failure reports ("first difference at byte offset N"), the number
/// read whole.
pub fn reported_offset(reason: &str) -> Option<usize> {
    let (_, rest) = reason.split_once("first difference at byte offset ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Runs `cell` under fault `kind` and checks its failure: the kind, the round trip, what
/// the reason says and the byte offset it names.
pub fn check_fault(cell: &Cell, kind: FaultKind) -> Result<(), Failed> {
    let failure = failure_under_fault(cell, kind)?;
    let lossy = cell.transport == TransportKind::Udp;
    let expected = match kind {
        FaultKind::FlipByte => FailureKind::Mismatch,
        FaultKind::Truncate | FaultKind::ExtraBytes => FailureKind::Length,
        FaultKind::Stall => FailureKind::Timeout,
        FaultKind::Exit => FailureKind::PeerGone,
    };
    // UDP cannot tell a dead or stalled peer from lost datagrams at once: it notices at
    // the next request (port unreachable) or after replies were lost in a row.
    let round_trip_ok = match failure.round_trip {
        Some(i) if lossy && matches!(kind, FaultKind::Stall | FaultKind::Exit) => {
            (FAULT_AT..FAULT_AT + 3).contains(&i)
        }
        Some(i) => i == FAULT_AT,
        None => false,
    };
    if failure.kind != expected || !round_trip_ok {
        return Err(format!(
            "expected a {expected:?} failure at round trip {FAULT_AT}, got {:?} at {:?}: {}",
            failure.kind, failure.round_trip, failure.reason
        )
        .into());
    }
    // The reply of 200 bytes: its middle byte flipped, its last byte cut, 3 bytes added.
    let offset = match kind {
        FaultKind::FlipByte => Some(100),
        FaultKind::Truncate => Some(199),
        FaultKind::ExtraBytes => Some(200),
        FaultKind::Stall | FaultKind::Exit => None,
    };
    let detail = match kind {
        FaultKind::FlipByte => "",
        FaultKind::Truncate => "reply is 199 bytes, expected 200",
        FaultKind::ExtraBytes => "reply is 203 bytes, expected 200",
        FaultKind::Stall => {
            if lossy {
                "replies in a row"
            } else {
                "before the deadline"
            }
        }
        // UDP learns it from the next request (nothing listens any more).
        FaultKind::Exit => "the peer exited (exit status 3)",
    };
    if lossy && kind == FaultKind::Exit && !failure.reason.contains("the peer is gone") {
        return Err(format!(
            "the reason does not say `the peer is gone`: {}",
            failure.reason
        )
        .into());
    }
    if !failure.reason.contains(detail) || !failure.reason.contains("round trip") {
        return Err(format!("the reason does not say `{detail}`: {}", failure.reason).into());
    }
    if reported_offset(&failure.reason) != offset {
        return Err(format!(
            "expected the first difference at byte offset {offset:?}, the reason says {:?}: {}",
            reported_offset(&failure.reason),
            failure.reason
        )
        .into());
    }
    println!("{}: failed as expected: {}", cell.id, failure.reason);
    Ok(())
}
