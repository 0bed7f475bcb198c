//! Code generation from the schemas (the sensor frame in both formats, the RPC echo
//! interface), in-process and host-independent: the Cap'n Proto
//! compiler runs as WebAssembly (capnpc-embedded) and protobuf schemas are parsed in pure
//! Rust (protox), so a fresh machine needs neither `capnp` nor `protoc`, and a cross build
//! runs no target binary.

fn main() {
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    for schema in ["schema/sensor_frame.capnp", "schema/echo_rpc.capnp"] {
        let request = capnpc_embedded::CompileCommand::new()
            .src_prefix("schema")
            .file(schema)
            .compile()
            .unwrap_or_else(|e| panic!("compiling {schema}: {e}"));
        capnpc::codegen::CodeGenerationCommand::new()
            .output_directory(&out)
            .default_parent_module(vec!["generated".into()])
            .run(&request[..])
            .unwrap_or_else(|e| panic!("generating Rust from {schema}: {e}"));
    }
    let descriptors = protox::compile(["schema/sensor_frame.proto"], ["schema"])
        .expect("compiling schema/sensor_frame.proto");
    prost_build::Config::new()
        .compile_fds(descriptors)
        .expect("generating Rust from schema/sensor_frame.proto");
    // The schema files, not their folder: a folder's time moves when a checkout or copy
    // makes it anew, and the code generated from the same files is the same.
    for schema in [
        "schema/sensor_frame.capnp",
        "schema/echo_rpc.capnp",
        "schema/sensor_frame.proto",
    ] {
        println!("cargo::rerun-if-changed={schema}");
    }
}
