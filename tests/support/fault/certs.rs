//! Throwaway certificates for a private TLS node, made in the test: a CA,
//! the broker's certificate signed by it (for `localhost` and
//! `broker.test`, deliberately not for `127.0.0.1`), a client certificate
//! for RabbitMQ's `EXTERNAL` mechanism, and a second CA nobody trusts.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, date_time_ymd,
};

/// The name the client certificate carries, which the node maps to a user.
pub(crate) const CLIENT_USER: &str = "queuey-tls-client";

/// A name the broker's certificate holds that no DNS resolves: reached
/// through `127.0.0.1` with [`TlsOptions::server_name`](queuey::rabbitmq::TlsOptions::server_name).
pub(crate) const OTHER_NAME: &str = "broker.test";

/// The files of one set of certificates, all PEM.
pub(crate) struct Certs {
    pub(crate) ca: PathBuf,
    pub(crate) server_cert: PathBuf,
    pub(crate) server_key: PathBuf,
    pub(crate) client_cert: PathBuf,
    pub(crate) client_key: PathBuf,
    /// A certificate signed by a CA nobody here trusts, with its key.
    pub(crate) rogue_client_cert: PathBuf,
    pub(crate) rogue_client_key: PathBuf,
    /// The untrusted CA itself.
    pub(crate) rogue_ca: PathBuf,
}

fn params(common_name: &str, names: &[&str]) -> CertificateParams {
    let mut params =
        CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
            .expect("certificate names");
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.not_before = date_time_ymd(2025, 1, 1);
    params.not_after = date_time_ymd(2045, 1, 1);
    params
}

fn authority(common_name: &str) -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().expect("a CA key");
    let mut params = params(common_name, &[]);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&key).expect("a self-signed CA");
    (cert.pem(), Issuer::new(params, key))
}

fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    common_name: &str,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let key = KeyPair::generate().expect("a key");
    let mut params = params(common_name, names);
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let cert = params
        .signed_by(&key, issuer)
        .expect("a signed certificate");
    (cert.pem(), key.serialize_pem())
}

impl Certs {
    /// Makes every certificate and writes it into `dir`.
    pub(crate) fn generate(dir: &Path) -> Certs {
        std::fs::create_dir_all(dir).expect("the certificates' directory");
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("a certificate file");
            path
        };
        let (ca_pem, ca) = authority("queuey test CA");
        let (rogue_pem, rogue) = authority("an untrusted CA");
        let (server_cert, server_key) = leaf(
            &ca,
            "localhost",
            &["localhost", OTHER_NAME],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert, client_key) =
            leaf(&ca, CLIENT_USER, &[], ExtendedKeyUsagePurpose::ClientAuth);
        let (rogue_cert, rogue_key) = leaf(
            &rogue,
            CLIENT_USER,
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        Certs {
            ca: write("ca.pem", &ca_pem),
            server_cert: write("server.pem", &server_cert),
            server_key: write("server.key", &server_key),
            client_cert: write("client.pem", &client_cert),
            client_key: write("client.key", &client_key),
            rogue_client_cert: write("rogue-client.pem", &rogue_cert),
            rogue_client_key: write("rogue-client.key", &rogue_key),
            rogue_ca: write("rogue-ca.pem", &rogue_pem),
        }
    }
}
