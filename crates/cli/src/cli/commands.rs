//! One module per subcommand of `ipc-matrix`.

pub mod baseline;
pub mod blocking;
pub mod conformance;
pub mod history;
pub mod init;
pub mod list;
pub mod matrix;
pub mod probe;
pub mod report;
pub mod run;
pub mod same_counts;
