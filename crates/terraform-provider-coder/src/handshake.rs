//! go-plugin's handshake: how Terraform tells a plugin process how to serve, and the one line
//! on stdout with which the plugin answers where it listens.

use std::net::{Ipv4Addr, TcpListener};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD;

use crate::error::Error;

/// Terraform sets this variable to [`MAGIC_COOKIE_VALUE`] for every provider it starts.
pub(crate) const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
pub(crate) const MAGIC_COOKIE_VALUE: &str =
    "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// go-plugin's own protocol version, then the Terraform plugin protocol we speak.
const CORE_PROTOCOL_VERSION: u32 = 1;
const PLUGIN_PROTOCOL_VERSION: u32 = 6;

/// go-plugin's port range when Terraform does not set one.
const DEFAULT_PORTS: (u16, u16) = (10_000, 25_000);

/// What Terraform asked for, read from the environment it started us with.
#[derive(Debug)]
pub(crate) struct Handshake {
    pub(crate) client_cert_pem: String,
    pub(crate) min_port: u16,
    pub(crate) max_port: u16,
}

impl Handshake {
    pub(crate) fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        if get(MAGIC_COOKIE_KEY).as_deref() != Some(MAGIC_COOKIE_VALUE) {
            return Err(Error::Handshake(
                "this is a Terraform provider: Terraform starts it itself (magic cookie missing)"
                    .into(),
            ));
        }
        if let Some(versions) = get("PLUGIN_PROTOCOL_VERSIONS") {
            let wanted = PLUGIN_PROTOCOL_VERSION.to_string();
            if !versions.split(',').any(|v| v.trim() == wanted) {
                return Err(Error::Handshake(format!(
                    "Terraform offers plugin protocol versions {versions}, this provider speaks only {wanted}"
                )));
            }
        }
        let client_cert_pem = get("PLUGIN_CLIENT_CERT")
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                Error::Handshake(
                    "PLUGIN_CLIENT_CERT is not set: Terraform's AutoMTLS is required".into(),
                )
            })?;
        let port = |name: &str, default: u16| match get(name) {
            None => Ok(default),
            Some(raw) => raw
                .trim()
                .parse::<u16>()
                .map_err(|_| Error::Handshake(format!("{name}={raw:?} is not a port"))),
        };
        let min_port = port("PLUGIN_MIN_PORT", DEFAULT_PORTS.0)?;
        let max_port = port("PLUGIN_MAX_PORT", DEFAULT_PORTS.1)?;
        if min_port > max_port {
            return Err(Error::Handshake(format!(
                "PLUGIN_MIN_PORT {min_port} > PLUGIN_MAX_PORT {max_port}"
            )));
        }
        Ok(Self {
            client_cert_pem,
            min_port,
            max_port,
        })
    }

    /// Listens on the first free loopback port of the allowed range, as go-plugin does.
    pub(crate) fn bind(&self) -> Result<TcpListener, Error> {
        for port in self.min_port..=self.max_port {
            if let Ok(listener) = TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
                return Ok(listener);
            }
        }
        Err(Error::Handshake(format!(
            "no free port between {} and {}",
            self.min_port, self.max_port
        )))
    }
}

/// The line Terraform reads from our stdout: versions, address, protocol and our certificate.
pub(crate) fn announcement(port: u16, server_cert_der: &[u8]) -> String {
    format!(
        "{CORE_PROTOCOL_VERSION}|{PLUGIN_PROTOCOL_VERSION}|tcp|127.0.0.1:{port}|grpc|{}",
        STANDARD_NO_PAD.encode(server_cert_der)
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn requires_the_magic_cookie_protocol_6_and_a_client_cert() {
        assert!(Handshake::from_env(env(&[])).is_err());
        let base = [
            (MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE),
            ("PLUGIN_CLIENT_CERT", "PEM"),
        ];
        assert!(Handshake::from_env(env(&base)).is_ok());
        let old = [base[0], base[1], ("PLUGIN_PROTOCOL_VERSIONS", "5")];
        assert!(Handshake::from_env(env(&old)).is_err());
        assert!(Handshake::from_env(env(&base[..1])).is_err());
    }

    #[test]
    fn honours_the_port_range() {
        let vars = [
            (MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE),
            ("PLUGIN_CLIENT_CERT", "PEM"),
            ("PLUGIN_PROTOCOL_VERSIONS", "5,6"),
            ("PLUGIN_MIN_PORT", "0"),
            ("PLUGIN_MAX_PORT", "0"),
        ];
        let handshake = Handshake::from_env(env(&vars));
        let listener = handshake.and_then(|h| h.bind()).ok();
        assert!(listener.is_some());
        let bad = [
            vars[0],
            vars[1],
            ("PLUGIN_MIN_PORT", "20"),
            ("PLUGIN_MAX_PORT", "10"),
        ];
        assert!(Handshake::from_env(env(&bad)).is_err());
    }

    #[test]
    fn announces_tcp_grpc_and_an_unpadded_certificate() {
        assert_eq!(
            announcement(12345, &[1, 2, 3, 4]),
            "1|6|tcp|127.0.0.1:12345|grpc|AQIDBA"
        );
    }
}
