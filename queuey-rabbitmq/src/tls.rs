//! TLS for `amqps://` connections: which roots to trust, the client
//! certificate to present, the server name to verify.
//!
//! [`TlsOptions`] is plain configuration: paths and PEM text. The files are
//! read each time a connection is opened (so a renewed certificate is picked
//! up at the next reconnection) and checked when the backend first connects,
//! which refuses a missing or malformed file with
//! [`Error::InvalidConfig`](queuey_core::Error::InvalidConfig).
//!
//! A connection never falls back to plaintext: an `amqps://` address is
//! either encrypted and verified, or it fails before any AMQP byte (and so
//! any credential) is sent. A build without a TLS backend refuses
//! `amqps://` with an error that names the feature to enable.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lapin::tcp::{OwnedIdentity, OwnedTLSConfig};
use queuey_core::Error;

/// The TLS backend this build of the crate was compiled with, if any.
pub(crate) const BACKEND: Option<&str> = if cfg!(feature = "rustls-aws-lc") {
    Some("rustls (aws-lc-rs)")
} else if cfg!(feature = "rustls") {
    Some("rustls (ring)")
} else if cfg!(feature = "native-tls") {
    Some("native-tls")
} else {
    None
};

/// How `amqps://` connections trust the broker and identify themselves.
///
/// The default trusts the platform's root certificates (and `SSL_CERT_FILE`
/// where the platform honours it), presents no client certificate, and
/// verifies the host name of the URI. Options only ever add to what is
/// checked; nothing here turns verification off.
///
/// ```no_run
/// # async fn run() -> Result<(), queuey_core::Error> {
/// use queuey_rabbitmq::{RabbitMqBackend, RabbitMqOptions, TlsOptions};
///
/// // A broker with a certificate from a private CA, reached by client
/// // certificate alone (RabbitMQ's EXTERNAL mechanism): no password in the URI.
/// let backend = RabbitMqBackend::with_options(
///     "amqps://broker.internal:5671/%2f",
///     RabbitMqOptions::default().tls(
///         TlsOptions::default()
///             .ca_file("/etc/queuey/ca.pem")
///             .client_cert_files("/etc/queuey/client.pem", "/etc/queuey/client.key"),
///     ),
/// )
/// .await?;
/// # Ok(()) }
/// ```
///
/// Set on a plain `amqp://` address, these options have no effect. Its
/// `Debug` output shows paths and the server name, never key material or a
/// password.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    roots: Vec<Pem>,
    identity: Option<Identity>,
    server_name: Option<String>,
}

/// PEM text, given inline or as a file read at connect time.
#[derive(Clone, PartialEq, Eq)]
enum Pem {
    File(PathBuf),
    Text(Arc<str>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Identity {
    /// A certificate chain and its private key, both PEM.
    Pem { cert: Pem, key: Pem },
    /// A PKCS #12 archive and its password.
    Pkcs12 { file: PathBuf, password: Masked },
}

/// A password, which `Debug` shows as `***`.
#[derive(Clone, PartialEq, Eq)]
struct Masked(String);

impl fmt::Debug for Masked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt("***", f)
    }
}

impl TlsOptions {
    /// Also trusts the certificates in the PEM file at `path` (a private
    /// CA, or a bundle of several): they are added to the platform's roots.
    /// Repeatable.
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.roots.push(Pem::File(path.into()));
        self
    }

    /// Like [`ca_file`](Self::ca_file), with the PEM text itself.
    pub fn ca_pem(mut self, pem: impl Into<String>) -> Self {
        self.roots.push(Pem::Text(pem.into().into()));
        self
    }

    /// Presents the client certificate chain in the PEM file `cert`, with
    /// the private key (PKCS #8, PKCS #1 or SEC1 PEM) in `key`: mutual TLS.
    ///
    /// When the URI then carries no password, the connection
    /// authenticates with the certificate alone: RabbitMQ's `EXTERNAL`
    /// mechanism (the `rabbitmq_auth_mechanism_ssl` plugin), unless the URI
    /// names an `auth_mechanism` itself.
    pub fn client_cert_files(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.identity = Some(Identity::Pem {
            cert: Pem::File(cert.into()),
            key: Pem::File(key.into()),
        });
        self
    }

    /// Like [`client_cert_files`](Self::client_cert_files), with the PEM
    /// text of the certificate chain and of the key.
    pub fn client_cert_pem(mut self, cert: impl Into<String>, key: impl Into<String>) -> Self {
        self.identity = Some(Identity::Pem {
            cert: Pem::Text(cert.into().into()),
            key: Pem::Text(key.into().into()),
        });
        self
    }

    /// Presents the client certificate and key in the PKCS #12 archive at
    /// `path` (a `.p12` / `.pfx` file), opened with `password`.
    pub fn client_pkcs12_file(
        mut self,
        path: impl Into<PathBuf>,
        password: impl Into<String>,
    ) -> Self {
        self.identity = Some(Identity::Pkcs12 {
            file: path.into(),
            password: Masked(password.into()),
        });
        self
    }

    /// Verifies the broker's certificate against `name` instead of the
    /// URI's host: for a broker reached by an address its certificate does
    /// not name (an IP, a tunnel, a load balancer). The name is also sent
    /// as the server name indication.
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// Whether a client certificate is configured.
    pub(crate) fn identity_given(&self) -> bool {
        self.identity.is_some()
    }

    /// Reads the files and checks their contents, for one connection.
    pub(crate) fn load(&self) -> Result<Loaded, Error> {
        let mut chain = String::new();
        for pem in &self.roots {
            chain.push_str(&pem.read_block("CERTIFICATE", "CA certificate")?);
            if !chain.ends_with('\n') {
                chain.push('\n');
            }
        }
        let identity = match &self.identity {
            None => None,
            Some(Identity::Pem { cert, key }) => {
                let cert = cert.read_block("CERTIFICATE", "client certificate")?;
                let key = key.read_block("PRIVATE KEY", "client key")?;
                Some(OwnedIdentity::PKCS8 {
                    pem: cert.into_bytes(),
                    key: key.into_bytes(),
                })
            }
            Some(Identity::Pkcs12 { file, password }) => {
                let der =
                    std::fs::read(file).map_err(|e| unreadable("PKCS #12 archive", file, &e))?;
                Some(OwnedIdentity::PKCS12 {
                    der,
                    password: password.0.clone(),
                })
            }
        };
        Ok(Loaded {
            config: OwnedTLSConfig {
                cert_chain: (!chain.is_empty()).then_some(chain),
                identity,
            },
            server_name: self.server_name.clone(),
        })
    }
}

/// What one connection attempt uses: the material read from the files.
pub(crate) struct Loaded {
    pub(crate) config: OwnedTLSConfig,
    pub(crate) server_name: Option<String>,
}

impl Pem {
    /// The text, refused when it holds no PEM block of the `label` kind
    /// (`CERTIFICATE`, or any `… PRIVATE KEY`); an error names the source
    /// but never its contents.
    fn read_block(&self, label: &str, what: &str) -> Result<String, Error> {
        let (text, source) = match self {
            Pem::Text(text) => (text.to_string(), "the PEM text given".to_owned()),
            Pem::File(path) => (
                std::fs::read_to_string(path).map_err(|e| unreadable(what, path, &e))?,
                format!("`{}`", path.display()),
            ),
        };
        let found = text.lines().any(|line| {
            line.starts_with("-----BEGIN ") && line.trim_end().ends_with(&format!("{label}-----"))
        });
        if !found {
            return Err(Error::invalid_config(format!(
                "the TLS {what} in {source} holds no PEM `{label}` block"
            )));
        }
        Ok(text)
    }
}

fn unreadable(what: &str, path: &Path, e: &std::io::Error) -> Error {
    Error::invalid_config(format!(
        "cannot read the TLS {what} file `{}`: {e}",
        path.display()
    ))
}

impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pem::File(path) => write!(f, "{}", path.display()),
            Pem::Text(_) => f.write_str("<PEM text>"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nSECRETKEYBYTES\n-----END PRIVATE KEY-----\n";

    #[test]
    fn debug_shows_paths_but_no_key_or_password() {
        let options = TlsOptions::default()
            .ca_file("/etc/ca.pem")
            .client_cert_pem(CERT, KEY)
            .server_name("broker.internal");
        let shown = format!("{options:?}");
        assert!(shown.contains("/etc/ca.pem"), "{shown}");
        assert!(shown.contains("broker.internal"), "{shown}");
        assert!(!shown.contains("SECRETKEYBYTES"), "{shown}");
        let p12 = TlsOptions::default().client_pkcs12_file("/c.p12", "hunter22");
        assert!(!format!("{p12:?}").contains("hunter22"));
    }

    #[test]
    fn pem_text_is_loaded_into_one_chain() {
        let loaded = TlsOptions::default()
            .ca_pem(CERT.trim_end())
            .ca_pem(CERT)
            .client_cert_pem(CERT, KEY)
            .load()
            .unwrap();
        let chain = loaded.config.cert_chain.unwrap();
        assert_eq!(chain.matches("BEGIN CERTIFICATE").count(), 2);
        assert!(matches!(
            loaded.config.identity,
            Some(OwnedIdentity::PKCS8 { .. })
        ));
        assert!(
            TlsOptions::default()
                .load()
                .unwrap()
                .config
                .cert_chain
                .is_none()
        );
    }

    #[test]
    fn a_missing_file_names_its_path() {
        let error = TlsOptions::default()
            .ca_file("/nonexistent/queuey-ca.pem")
            .load()
            .err()
            .unwrap();
        let text = error.to_string();
        assert!(text.contains("/nonexistent/queuey-ca.pem"), "{text}");
        assert!(text.contains("CA certificate"), "{text}");
    }

    #[test]
    fn text_that_is_not_the_right_pem_is_refused_without_echoing_it() {
        let error = TlsOptions::default()
            .client_cert_pem(CERT, "not a key but SECRET")
            .load()
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("client key"), "{error}");
        assert!(!error.contains("SECRET"), "{error}");
        let error = TlsOptions::default()
            .ca_pem(KEY)
            .load()
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("CERTIFICATE"), "{error}");
        assert!(!error.contains("SECRETKEYBYTES"), "{error}");
    }
}
