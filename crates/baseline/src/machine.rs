//! The rule both the baseline and the verdict use to tell whether the machine was in the
//! same state: a core-to-core probe within [`MACHINE_CHANGE_LIMIT`] of another.

/// A machine probe (core-to-core round trip) this many times slower or faster than the
/// baseline's means the machine, not the code, changed: the verdict only informs.
pub const MACHINE_CHANGE_LIMIT: f64 = 1.5;

/// Whether a probe of `now_ns` and one of `then_ns` (core to core, a cache line's trip
/// between two CPUs) say the machine was in the same state: within
/// [`MACHINE_CHANGE_LIMIT`] of each other, either way.
pub(crate) fn same_machine_state(now_ns: u64, then_ns: u64) -> bool {
    let ratio = now_ns.max(1) as f64 / then_ns.max(1) as f64;
    (1.0 / MACHINE_CHANGE_LIMIT..=MACHINE_CHANGE_LIMIT).contains(&ratio)
}
