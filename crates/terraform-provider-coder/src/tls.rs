//! go-plugin's AutoMTLS: Terraform passes its client certificate, we answer with a fresh
//! self-signed server certificate, and the connection trusts exactly those two.
//!
//! Terraform's client certificate is a self-signed ECDSA P-521 CA certificate. WebPKI path
//! building rejects CA certificates as end entities, so we pin the certificate instead and
//! only check the handshake signature with it (aws-lc-rs verifies P-521; ring cannot).

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{WebPkiSupportedAlgorithms, aws_lc_rs};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme,
};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};

use crate::error::Error;

/// Our certificate (announced in the handshake) and the TLS configuration serving with it.
pub(crate) struct ServerTls {
    pub(crate) cert_der: Vec<u8>,
    pub(crate) config: Arc<ServerConfig>,
}

pub(crate) fn server_tls(client_cert_pem: &str) -> Result<ServerTls, Error> {
    let client_cert = CertificateDer::from_pem_slice(client_cert_pem.as_bytes())
        .map_err(|e| Error::Tls(format!("PLUGIN_CLIENT_CERT is not a PEM certificate: {e}")))?;
    let (cert_der, key_der) = self_signed()?;
    let provider = Arc::new(aws_lc_rs::default_provider());
    let verifier = PinnedClientCert {
        cert: client_cert.into_owned(),
        algorithms: provider.signature_verification_algorithms,
    };
    let mut config = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))?
        .with_client_cert_verifier(Arc::new(verifier))
        .with_single_cert(
            vec![CertificateDer::from(cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_der)),
        )
        .map_err(|e| Error::Tls(e.to_string()))?;
    // gRPC clients insist on negotiating HTTP/2 through ALPN.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(ServerTls {
        cert_der,
        config: Arc::new(config),
    })
}

/// A certificate for `localhost`, which is the name go-plugin's client verifies.
fn self_signed() -> Result<(Vec<u8>, Vec<u8>), Error> {
    let tls_err = |e: rcgen::Error| Error::Tls(e.to_string());
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(tls_err)?;
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).map_err(tls_err)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Coder");
    // go-plugin's client puts our certificate in its root pool, so it is its own CA.
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = params.self_signed(&key).map_err(tls_err)?;
    Ok((cert.der().to_vec(), key.serialize_der()))
}

/// Accepts exactly one client certificate, byte for byte.
#[derive(Debug)]
struct PinnedClientCert {
    cert: CertificateDer<'static>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for PinnedClientCert {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.cert.as_ref() {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> rustls::crypto::CryptoProvider {
        aws_lc_rs::default_provider()
    }

    /// A P-521 certificate like the one go-plugin's client generates.
    fn p521_client_cert() -> Option<String> {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512).ok()?;
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).ok()?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        Some(params.self_signed(&key).ok()?.pem())
    }

    #[test]
    fn verifies_p521_and_serves_h2() {
        let pem = p521_client_cert();
        assert!(pem.is_some(), "rcgen should generate P-521 certificates");
        let tls = server_tls(pem.as_deref().unwrap_or_default());
        let tls = tls.ok();
        assert!(
            tls.as_ref()
                .is_some_and(|t| t.config.alpn_protocols == [b"h2".to_vec()])
        );
        assert!(
            provider()
                .signature_verification_algorithms
                .supported_schemes()
                .contains(&SignatureScheme::ECDSA_NISTP521_SHA512)
        );
    }

    #[test]
    fn only_the_pinned_certificate_is_accepted() {
        let Some(pem) = p521_client_cert() else {
            return;
        };
        let Ok(cert) = CertificateDer::from_pem_slice(pem.as_bytes()) else {
            return;
        };
        let verifier = PinnedClientCert {
            cert: cert.clone().into_owned(),
            algorithms: provider().signature_verification_algorithms,
        };
        assert!(
            verifier
                .verify_client_cert(&cert, &[], UnixTime::now())
                .is_ok()
        );
        let other =
            p521_client_cert().and_then(|p| CertificateDer::from_pem_slice(p.as_bytes()).ok());
        assert!(other.is_some_and(|o| {
            verifier
                .verify_client_cert(&o, &[], UnixTime::now())
                .is_err()
        }));
    }

    #[test]
    fn rejects_garbage_client_certs() {
        assert!(server_tls("not a certificate").is_err());
    }
}
