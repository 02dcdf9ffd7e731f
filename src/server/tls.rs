//! TLS for the Flight port (`[tls]`): the server's certificate chain and key, and optionally a
//! client CA, which makes the server require a client certificate signed by it (mTLS). rustls
//! offers TLS 1.2 and 1.3 only; a plaintext client or an older TLS version fails its handshake
//! and never reaches a service.

use std::time::Duration;

use tonic::transport::{Certificate, Identity, ServerTlsConfig};

use crate::error::{invalid, Result};

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// `[tls]`, with its files read.
#[derive(Clone)]
pub struct TlsOptions {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    pub client_ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is never printed.
        f.debug_struct("TlsOptions")
            .field("mtls", &self.client_ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// Reads a PEM file of `[tls]` (`key` names it in the error).
#[allow(clippy::disallowed_methods)] // Small files read once at start-up.
fn read_pem(key: &str, path: &str) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|e| {
        crate::error::InvalidArgumentSnafu {
            message: format!("config: [tls] {key} {path}: {e}"),
        }
        .build()
    })?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return invalid!("config: [tls] {key} {path}: not a PEM file");
    }
    Ok(bytes)
}

impl TlsOptions {
    pub fn read(cert_file: &str, key_file: &str, client_ca_file: Option<&str>) -> Result<Self> {
        Ok(Self {
            cert_pem: read_pem("cert_file", cert_file)?,
            key_pem: read_pem("key_file", key_file)?,
            client_ca_pem: client_ca_file
                .map(|f| read_pem("client_ca_file", f))
                .transpose()?,
        })
    }

    /// tonic's server TLS configuration.
    pub fn server_config(&self) -> ServerTlsConfig {
        // tonic builds its rustls config from the process's default provider; ring is the one
        // this build has. An Err means one is installed already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = ServerTlsConfig::new()
            .identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
            .timeout(HANDSHAKE_TIMEOUT);
        if let Some(ca) = &self.client_ca_pem {
            config = config.client_ca_root(Certificate::from_pem(ca));
        }
        config
    }
}
