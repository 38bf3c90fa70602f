// Per-key limits: the key a method or a field gives, concurrency, a rate
// with a burst, failing open; a job type without `limit` limits nothing.
use std::time::Duration;

use queuey_core::{Job, Queues};
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Calls,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Calls, limit(key = Self::host, concurrency = 3, rate = "10/s", burst = 5))]
struct CallApi {
    url: String,
}

impl CallApi {
    fn host(&self) -> &str {
        self.url.split('/').nth(2).unwrap_or("")
    }
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Calls, limit(key = tenant, rate = "5/1500ms"))]
struct Export {
    tenant: u64,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Calls, limit(concurrency = 1, key = Self::tenant, fail_open = true))]
struct Sync {
    tenant: String,
}

impl Sync {
    fn tenant(&self) -> String {
        self.tenant.to_uppercase()
    }
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Calls)]
struct Free;

fn main() {
    let call = CallApi { url: "https://api.example/v1".into() };
    assert_eq!(call.limit_key().as_deref(), Some("api.example"));
    let limits = CallApi::limits().unwrap();
    assert_eq!(limits.concurrency().map(|n| n.get()), Some(3));
    let rate = limits.rate().unwrap();
    assert_eq!((rate.count(), rate.per(), rate.burst()), (10, Duration::from_secs(1), 5));

    assert_eq!(Export { tenant: 7 }.limit_key().as_deref(), Some("7"));
    let rate = Export::limits().unwrap().rate().unwrap();
    assert_eq!((rate.count(), rate.per(), rate.burst()), (5, Duration::from_millis(1500), 1));
    assert_eq!(Export::limits().unwrap().concurrency(), None);

    assert_eq!(Sync { tenant: "acme".into() }.limit_key().as_deref(), Some("ACME"));
    assert_eq!(Sync::limits().unwrap().rate(), None);
    assert!(Sync::limits().unwrap().fails_open());
    assert!(!CallApi::limits().unwrap().fails_open());

    assert_eq!(Free.limit_key(), None);
    assert_eq!(Free::limits(), None);
}
