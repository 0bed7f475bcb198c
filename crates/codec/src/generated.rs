//! Code generated at build time from the schemas (build.rs): Cap'n Proto's with
//! `generated` as its parent module, protobuf's by prost.

#[allow(clippy::all, clippy::pedantic, unused_parens)]
pub(crate) mod sensor_frame_capnp {
    include!(concat!(env!("OUT_DIR"), "/sensor_frame_capnp.rs"));
}

/// The RPC echo interface (`schema/echo_rpc.capnp`), for `capnp-rpc`.
#[allow(clippy::all, clippy::pedantic, unused_parens)]
pub mod echo_rpc_capnp {
    include!(concat!(env!("OUT_DIR"), "/echo_rpc_capnp.rs"));
}

#[allow(clippy::all, clippy::pedantic)]
pub(crate) mod proto {
    include!(concat!(env!("OUT_DIR"), "/ipc_matrix.rs"));
}
