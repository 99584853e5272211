//! Generates the PodResources v1 messages (and, with the `client` and `server` features, the
//! two sides of the service) from `proto/api.proto`, compiled by protox: no `protoc` binary.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let proto = "proto/api.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    // Cargo tells a build script its package's enabled features this way.
    let enabled = |feature: &str| std::env::var_os(format!("CARGO_FEATURE_{feature}")).is_some();
    tonic_prost_build::configure()
        .build_client(enabled("CLIENT"))
        .build_server(enabled("SERVER"))
        .compile_fds(descriptors)?;
    Ok(())
}
