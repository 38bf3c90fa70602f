//! `rediss://` against a private `redis-server` serving TLS only, with
//! certificates made here: the store works over TLS, checks the server's
//! certificate, and never falls back to plaintext.
//!
//! Built with the `rustls` feature only:
//! `cargo test -p queuey-redis --features rustls --test tls`.

use std::time::Duration;

use private_redis::PrivateRedis;
use queuey_core::store::{Inserted, Store};

#[path = "support/private_redis.rs"]
mod private_redis;
use queuey_redis::{RedisStore, RedisStoreError};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

const MINUTE: Duration = Duration::from_secs(60);

/// A certificate authority: its PEM and what signs with it.
fn authority(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().expect("a CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&key).expect("a self-signed CA");
    (cert.pem(), Issuer::new(params, key))
}

/// A server certificate for `127.0.0.1`, and its key.
fn server(issuer: &Issuer<'_, KeyPair>) -> (String, String) {
    let key = KeyPair::generate().expect("a key");
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("server parameters");
    params.distinguished_name.push(DnType::CommonName, "redis");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let cert = params
        .signed_by(&key, issuer)
        .expect("a signed certificate");
    (cert.pem(), key.serialize_pem())
}

fn key() -> String {
    format!("test:tls:{}", uuid::Uuid::new_v4().simple())
}

#[tokio::test]
async fn a_store_works_over_tls_with_a_private_authority() {
    let (ca, issuer) = authority("queuey test CA");
    let (cert, private_key) = server(&issuer);
    let redis = PrivateRedis::start_tls(&cert, &private_key, &ca);
    assert!(redis.url().starts_with("rediss://"));
    let store = RedisStore::builder(redis.url())
        .tls_root_certificates(ca.as_bytes())
        .connect()
        .await
        .expect("a TLS connection to the private Redis");
    let k = key();
    assert_eq!(store.insert(&k, "a", MINUTE).await.unwrap(), Inserted::New);
    assert_eq!(store.get(&k).await.unwrap().as_deref(), Some("a"));
    assert!(store.remove(&k, "a").await.unwrap());
}

#[tokio::test]
async fn a_server_signed_by_an_authority_not_trusted_is_refused() {
    let (ca, issuer) = authority("queuey test CA");
    let (cert, private_key) = server(&issuer);
    let redis = PrivateRedis::start_tls(&cert, &private_key, &ca);
    let (other_ca, _) = authority("another CA");
    let refused = RedisStore::builder(redis.url())
        .tls_root_certificates(other_ca.as_bytes())
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await;
    assert!(
        matches!(refused, Err(RedisStoreError::Connect { .. })),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_tls_server_is_not_spoken_to_in_plaintext() {
    let (ca, issuer) = authority("queuey test CA");
    let (cert, private_key) = server(&issuer);
    let redis = PrivateRedis::start_tls(&cert, &private_key, &ca);
    let plain = format!("redis://127.0.0.1:{}", redis.port());
    // TLS settings with a plaintext URL are refused, not ignored.
    let mixed = RedisStore::builder(plain.as_str())
        .tls_root_certificates(ca.as_bytes())
        .open();
    assert!(
        matches!(&mixed, Err(RedisStoreError::InvalidUrl { reason, .. }) if reason.contains("rediss://")),
        "{mixed:?}"
    );
    // A plaintext client gets no answer from the TLS port.
    let spoken = RedisStore::builder(plain.as_str())
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .connect()
        .await;
    assert!(spoken.is_err(), "{spoken:?}");
}
