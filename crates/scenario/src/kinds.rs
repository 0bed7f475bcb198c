//! One module per scenario kind, each holding its measuring side and its serving side.
//! A kind imports the shared pieces below it (`context`, `failure`, `spawn`, `peer`,
//! `verify`, ...) and nothing from its siblings or from the runner above.

pub(crate) mod echo;
pub(crate) mod fan;
pub(crate) mod logging;
pub(crate) mod req_rep;
pub(crate) mod rpc;
pub(crate) mod udp_load;
