//! The version of `results.json`: the leg's page writes it, history reads it back.

/// 2: the cell results are of result schema 4 (a cell's kind and its settings in `work`).
/// 3: `commit`.
pub const REPORT_SCHEMA_VERSION: u32 = 3;
