//! `rediss://`: Redis over TLS through rustls (the `rustls` feature).
//!
//! A `rediss://` URL is always TLS and never falls back to plaintext; TLS
//! settings given for a `redis://` URL are refused rather than ignored.

use std::fmt;

use redis::{ClientTlsConfig, TlsCertificates};

/// The TLS settings of a builder.
#[derive(Clone, Default)]
pub(crate) struct TlsOptions {
    /// PEM certificates to trust instead of the platform's roots.
    pub(crate) root_certificates: Option<Vec<u8>>,
    /// A client certificate and its key, PEM.
    pub(crate) client: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsOptions {
    fn is_set(&self) -> bool {
        self.root_certificates.is_some() || self.client.is_some()
    }
}

impl fmt::Debug for TlsOptions {
    /// Says what is set; never shows a key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("root_certificates", &self.root_certificates.is_some())
            .field("client_certificate", &self.client.is_some())
            .finish()
    }
}

/// The client for `url`; the inner error says what to change.
pub(crate) fn client(
    url: &str,
    options: &TlsOptions,
) -> redis::RedisResult<Result<redis::Client, String>> {
    if !crate::is_tls(url) {
        if options.is_set() {
            return Ok(Err(
                "TLS certificates were given for a `redis://` URL, which is plaintext: \
                 use `rediss://` to connect over TLS"
                    .to_owned(),
            ));
        }
        return redis::Client::open(url).map(Ok);
    }
    // rustls needs a process-wide crypto provider; one installed already
    // (by the application, or by another library) is kept.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certificates = TlsCertificates {
        client_tls: options
            .client
            .clone()
            .map(|(client_cert, client_key)| ClientTlsConfig {
                client_cert,
                client_key,
            }),
        root_cert: options.root_certificates.clone(),
    };
    redis::Client::build_with_tls(url, certificates).map(Ok)
}
