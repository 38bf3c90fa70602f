//! The certificate files of an operator tool, for both of its connections:
//! AMQP (`amqps://`) and the management API (`https://`).
//!
//! One set of files serves both, so a private CA given once is trusted by
//! each, and a client certificate is presented to each.

use std::path::PathBuf;

use queuey_rabbitmq::TlsOptions;

use crate::error::{OpsError, Result};

/// Certificate files and the name to verify. Paths only: `Debug` shows no
/// key material.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    /// PEM files of CA certificates trusted besides the platform's roots.
    pub(crate) ca: Vec<PathBuf>,
    /// A PEM client certificate chain (mutual TLS); needs `key`.
    pub(crate) cert: Option<PathBuf>,
    /// The PEM private key of `cert`.
    pub(crate) key: Option<PathBuf>,
    /// The name the AMQP broker's certificate is verified against, instead
    /// of the URL's host.
    pub(crate) server_name: Option<String>,
}

impl TlsFiles {
    /// The options of the AMQP connection, and of the management API's
    /// client over https (which ignores the server name). A certificate
    /// without its key (or a key without its certificate) is refused.
    pub(crate) fn amqp(&self) -> Result<TlsOptions> {
        let mut options = TlsOptions::default();
        for ca in &self.ca {
            options = options.ca_file(ca);
        }
        let missing = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                options = options.client_cert_files(cert, key);
                None
            }
            (None, None) => None,
            (Some(_), None) => Some("a TLS client certificate needs its key: give --tls-key too"),
            (None, Some(_)) => Some("a TLS client key needs its certificate: give --tls-cert too"),
        };
        if let Some(missing) = missing {
            return Err(OpsError::Invalid(missing.into()));
        }
        if let Some(name) = &self.server_name {
            options = options.server_name(name);
        }
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_needs_its_key() {
        let half = TlsFiles {
            cert: Some("c.pem".into()),
            ..TlsFiles::default()
        };
        assert!(half.amqp().unwrap_err().to_string().contains("--tls-key"));
        let half = TlsFiles {
            key: Some("k.pem".into()),
            ..TlsFiles::default()
        };
        assert!(half.amqp().unwrap_err().to_string().contains("--tls-cert"));
    }
}
