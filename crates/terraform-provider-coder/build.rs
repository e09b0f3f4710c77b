//! Generates the gRPC server code from our own `.proto` files with a pure-Rust protobuf
//! compiler, so building needs no system `protoc`.

const NAMESPACE_MESSAGES: [&str; 15] = [
    "GetMetadata",
    "GetProviderSchema",
    "ValidateProviderConfig",
    "UpgradeResourceState",
    "ValidateResourceConfig",
    "ValidateDataResourceConfig",
    "ConfigureProvider",
    "ReadResource",
    "PlanResourceChange",
    "ApplyResourceChange",
    "ImportResourceState",
    "MoveResourceState",
    "ReadDataSource",
    "GetFunctions",
    "StopProvider",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/tfplugin6.proto",
        "proto/goplugin.proto",
        "proto/health.proto",
    ];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    let mut config = tonic_prost_build::configure()
        .build_client(false)
        .build_server(true);
    // Each RPC's message only namespaces its Request/Response; prost still emits an empty
    // struct for it that nothing constructs.
    for rpc in NAMESPACE_MESSAGES {
        config = config.message_attribute(format!(".tfplugin6.{rpc}"), "#[allow(dead_code)]");
    }
    config.compile_fds(descriptors)?;
    Ok(())
}
