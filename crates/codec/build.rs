//! Code generation from the two schemas, in-process and host-independent: the Cap'n Proto
//! compiler runs as WebAssembly (capnpc-embedded) and protobuf schemas are parsed in pure
//! Rust (protox), so a fresh machine needs neither `capnp` nor `protoc`, and a cross build
//! runs no target binary.

fn main() {
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let request = capnpc_embedded::CompileCommand::new()
        .src_prefix("schema")
        .file("schema/sensor_frame.capnp")
        .compile()
        .expect("compiling schema/sensor_frame.capnp");
    capnpc::codegen::CodeGenerationCommand::new()
        .output_directory(&out)
        .run(&request[..])
        .expect("generating Rust from schema/sensor_frame.capnp");
    let descriptors = protox::compile(["schema/sensor_frame.proto"], ["schema"])
        .expect("compiling schema/sensor_frame.proto");
    prost_build::Config::new()
        .compile_fds(descriptors)
        .expect("generating Rust from schema/sensor_frame.proto");
    println!("cargo::rerun-if-changed=schema");
}
