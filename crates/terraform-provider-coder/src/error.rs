//! Errors of this crate: [`Error`] for the public API, [`ValueError`] for undecodable values
//! (reported to Terraform as diagnostics, never as a crash).

/// Why the provider could not start or keep serving.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The process was not started by Terraform's plugin client, or with settings we can't honour.
    #[error("plugin handshake: {0}")]
    Handshake(String),
    /// The AutoMTLS material could not be parsed or generated.
    #[error("TLS setup: {0}")]
    Tls(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// A `DynamicValue` that is not valid msgpack/JSON of the shape Terraform promises.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ValueError {
    #[error("invalid msgpack: {0}")]
    Msgpack(String),
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("string is not UTF-8")]
    NotUtf8,
    #[error("unexpected {0} in value")]
    Unexpected(&'static str),
}
