//! The Redis store against a private `redis-server`: every operation, the
//! expiry of keys, the prefix, and a Redis killed and started again.

use std::sync::Arc;
use std::time::Duration;

use private_redis::PrivateRedis;
use queuey_core::store::{Inserted, Store, StoreError, bounded};

#[path = "support/private_redis.rs"]
mod private_redis;
use queuey_redis::{RedisStore, RedisStoreError};

const MINUTE: Duration = Duration::from_secs(60);

fn key() -> String {
    format!("test:{}", uuid::Uuid::new_v4().simple())
}

#[tokio::test]
async fn every_operation_is_atomic_on_its_key() {
    let redis = PrivateRedis::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let k = key();
    assert_eq!(store.insert(&k, "a", MINUTE).await.unwrap(), Inserted::New);
    assert_eq!(
        store.insert(&k, "b", MINUTE).await.unwrap(),
        Inserted::Exists("a".into())
    );
    assert_eq!(store.get(&k).await.unwrap().as_deref(), Some("a"));
    assert!(!store.extend(&k, "b", MINUTE).await.unwrap());
    assert!(store.extend(&k, "a", MINUTE).await.unwrap());
    assert!(!store.remove(&k, "b").await.unwrap());
    assert!(store.remove(&k, "a").await.unwrap());
    assert_eq!(store.get(&k).await.unwrap(), None);
    store.set(&k, "done", MINUTE).await.unwrap();
    store.set(&k, "again", MINUTE).await.unwrap();
    assert_eq!(store.get(&k).await.unwrap().as_deref(), Some("again"));
    assert!(!store.extend(&key(), "x", MINUTE).await.unwrap());
    assert!(!store.remove(&key(), "x").await.unwrap());
}

#[tokio::test]
async fn sixteen_claims_at_once_have_one_winner() {
    let redis = PrivateRedis::start();
    let store = Arc::new(RedisStore::connect(&redis.url()).await.unwrap());
    let k = key();
    let claims = (0..16).map(|i| {
        let store = Arc::clone(&store);
        let k = k.clone();
        tokio::spawn(async move { store.insert(&k, &format!("v{i}"), MINUTE).await.unwrap() })
    });
    let answers = futures::future::join_all(claims).await;
    let won = answers
        .iter()
        .filter(|a| matches!(a, Ok(Inserted::New)))
        .count();
    assert_eq!(won, 1, "{answers:?}");
    let held = store.get(&k).await.unwrap().unwrap();
    for answer in answers {
        if let Ok(Inserted::Exists(value)) = answer {
            assert_eq!(value, held);
        }
    }
}

#[tokio::test]
async fn keys_expire_after_their_ttl() {
    let redis = PrivateRedis::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let k = key();
    store
        .insert(&k, "a", Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(store.get(&k).await.unwrap().as_deref(), Some("a"));
    // Redis expires on its own clock; wait until it has, within a bound.
    let gone = tokio::time::timeout(Duration::from_secs(10), async {
        while store.get(&k).await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "the key outlived its ttl by seconds");
    assert_eq!(store.insert(&k, "b", MINUTE).await.unwrap(), Inserted::New);
}

#[tokio::test]
async fn a_prefix_keeps_stores_apart() {
    let redis = PrivateRedis::start();
    let one = RedisStore::builder(redis.url())
        .prefix("one:")
        .connect()
        .await
        .unwrap();
    let two = RedisStore::builder(redis.url())
        .prefix("two:")
        .connect()
        .await
        .unwrap();
    let k = key();
    assert_eq!(one.insert(&k, "a", MINUTE).await.unwrap(), Inserted::New);
    assert_eq!(two.insert(&k, "b", MINUTE).await.unwrap(), Inserted::New);
    assert_eq!(one.get(&k).await.unwrap().as_deref(), Some("a"));
    assert_eq!(two.get(&k).await.unwrap().as_deref(), Some("b"));
}

#[tokio::test]
async fn a_killed_redis_fails_fast_and_the_store_comes_back_with_it() {
    let mut redis = PrivateRedis::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let k = key();
    store.insert(&k, "a", MINUTE).await.unwrap();
    redis.kill();
    let limit = Duration::from_secs(3);
    let down = bounded(limit, store.get(&k)).await;
    assert!(
        matches!(
            down,
            Err(StoreError::Unavailable(_) | StoreError::TimedOut(_))
        ),
        "{down:?}"
    );
    redis.restart();
    // The connection is made again in the background; the restarted
    // server kept nothing.
    let back = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match store.insert(&k, "b", MINUTE).await {
                Ok(answer) => return answer,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    })
    .await
    .expect("the store reconnects to the restarted server");
    assert_eq!(back, Inserted::New);
}

#[tokio::test]
async fn a_store_can_open_while_redis_is_down() {
    let mut redis = PrivateRedis::start();
    let url = redis.url();
    redis.kill();
    let store = RedisStore::builder(url.as_str()).open().unwrap();
    assert!(
        bounded(Duration::from_secs(3), store.get("k"))
            .await
            .is_err()
    );
    redis.restart();
    let answer = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Ok(answer) = store.insert("k", "a", MINUTE).await {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the store connects once Redis is up");
    assert_eq!(answer, Inserted::New);
}

#[tokio::test]
async fn no_password_shows_in_errors_or_debug() {
    let error = RedisStore::connect("redis://:hunter2@127.0.0.1:1/0")
        .await
        .unwrap_err();
    assert!(matches!(error, RedisStoreError::Connect { .. }), "{error}");
    assert!(!error.to_string().contains("hunter2"), "{error}");
    assert!(!format!("{error:?}").contains("hunter2"));
    let bad = RedisStore::builder("http://:hunter2@host/")
        .open()
        .unwrap_err();
    assert!(matches!(bad, RedisStoreError::InvalidUrl { .. }), "{bad}");
    assert!(!bad.to_string().contains("hunter2"), "{bad}");
    let builder = RedisStore::builder("redis://:hunter2@127.0.0.1:1/0");
    assert!(!format!("{builder:?}").contains("hunter2"));
    let store = builder.open().unwrap();
    assert!(!format!("{store:?}").contains("hunter2"), "{store:?}");
}

#[tokio::test]
async fn a_ttl_redis_refuses_is_a_refusal_not_an_unavailable_store() {
    let redis = PrivateRedis::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let k = key();
    let insert = store.insert(&k, "a", Duration::MAX).await;
    assert!(matches!(insert, Err(StoreError::Refused(_))), "{insert:?}");
    let set = store.set(&k, "a", Duration::MAX).await;
    assert!(matches!(set, Err(StoreError::Refused(_))), "{set:?}");
    assert!(!set.unwrap_err().to_string().contains("unavailable"));
    // The store itself is fine.
    assert_eq!(store.insert(&k, "a", MINUTE).await.unwrap(), Inserted::New);
}

#[cfg(not(feature = "rustls"))]
#[tokio::test]
async fn rediss_without_the_rustls_feature_names_the_feature() {
    let error = RedisStore::builder("rediss://:hunter2@127.0.0.1:1/0")
        .open()
        .unwrap_err();
    assert!(
        matches!(&error, RedisStoreError::InvalidUrl { reason, .. } if reason.contains("`rustls` feature")),
        "{error}"
    );
    assert!(!error.to_string().contains("hunter2"), "{error}");
}
