//! TLS to apps that serve https inside the workspace (an app URL `https://localhost:…`, or a
//! port host `<port>s--…`). Such servers are development servers with certificates nobody
//! can vouch for (self-signed, or issued for a name other than the loopback address the
//! agent dials), so the proxy does not check who signed the certificate: the authenticated,
//! encrypted hop is the relay to the agent, and the app's TLS only spans the workspace's
//! loopback. The handshake itself is still verified (the server must prove it holds the key of
//! the certificate it presented), so a broken or truncated handshake fails as it should.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, aws_lc_rs};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The name offered in SNI: what a development certificate is most often issued for.
const SERVER_NAME: &str = "localhost";

#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn connector() -> Result<&'static TlsConnector, rustls::Error> {
    static CONNECTOR: OnceLock<TlsConnector> = OnceLock::new();
    if let Some(c) = CONNECTOR.get() {
        return Ok(c);
    }
    let provider = Arc::new(aws_lc_rs::default_provider());
    let mut config = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    // The proxy speaks HTTP/1.1 to apps (upgrades included).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(CONNECTOR.get_or_init(|| TlsConnector::from(Arc::new(config))))
}

/// Runs a TLS client handshake over `io` (a relay stream to the app's port).
pub async fn connect<IO>(io: IO) -> std::io::Result<TlsStream<IO>>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let connector = connector().map_err(std::io::Error::other)?;
    let name = ServerName::try_from(SERVER_NAME).map_err(std::io::Error::other)?;
    connector.connect(name, io).await
}
