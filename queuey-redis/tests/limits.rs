//! Per-key limits on the shared Redis (`REDIS_URL`, by default
//! `redis://127.0.0.1:6379`): slots, leases, the waiting set, the typical
//! hold, turns under a rate, the keys' time-to-live, and one scenario run
//! against both this store and the memory store to show they agree.
//!
//! Every test uses a prefix of its own and deletes its keys at the end
//! (keys a failed test leaves expire by themselves).

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuey_core::store::limit::{HOLD_MEMORY, TURN_GRACE};
use queuey_core::store::{LimitStore, LimitUsage, MemoryStore, Rate, Slot, Turn};
use queuey_redis::RedisStore;
use redis::AsyncCommands;

const LEASE: Duration = Duration::from_secs(30);

fn url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A store with a prefix no other test uses, and a way to clean it up.
struct Fixture {
    store: RedisStore,
    prefix: String,
    raw: redis::aio::MultiplexedConnection,
}

impl Fixture {
    async fn new() -> Fixture {
        let prefix = format!("queuey-test:{}:", uuid::Uuid::new_v4().simple());
        let store = RedisStore::builder(url())
            .prefix(prefix.as_str())
            .connect()
            .await
            .expect("Redis answers at REDIS_URL (or 127.0.0.1:6379)");
        let raw = redis::Client::open(url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        Fixture { store, prefix, raw }
    }

    /// The keys this test's store made, with their time-to-live in ms.
    async fn keys(&mut self) -> Vec<(String, i64)> {
        let mut names: Vec<String> = self.raw.keys(format!("{}*", self.prefix)).await.unwrap();
        names.sort();
        let mut keys = Vec::new();
        for name in names {
            let ttl: i64 = self.raw.pttl(&name).await.unwrap();
            keys.push((name[self.prefix.len()..].to_owned(), ttl));
        }
        keys
    }

    async fn clean(mut self) {
        let names: Vec<String> = self.raw.keys(format!("{}*", self.prefix)).await.unwrap();
        if !names.is_empty() {
            let _: () = self.raw.del(names).await.unwrap();
        }
    }
}

fn rate(text: &str) -> Rate {
    text.parse().unwrap()
}

/// Within `slack` of `expected`.
fn near(actual: Duration, expected: Duration, slack: Duration) -> bool {
    actual.abs_diff(expected) <= slack
}

#[tokio::test]
async fn a_holder_takes_one_slot_at_most_and_refusals_are_counted() {
    let fixture = Fixture::new().await;
    let store = &fixture.store;
    let full = |running, waiting| Slot::Full {
        running,
        waiting,
        typical_hold: None,
    };
    assert_eq!(
        store.take_slot("k", "a", 2, LEASE).await.unwrap(),
        Slot::Taken
    );
    assert_eq!(
        store.take_slot("k", "b", 2, LEASE).await.unwrap(),
        Slot::Taken
    );
    // Another run of a: refused, its lease left as it was.
    assert!(matches!(
        store.take_slot("k", "a", 2, LEASE).await.unwrap(),
        Slot::AlreadyHeld { lease_left } if lease_left <= LEASE && lease_left > LEASE / 2
    ));
    assert_eq!(
        store.take_slot("k", "c", 2, LEASE).await.unwrap(),
        full(2, 1)
    );
    assert_eq!(
        store.take_slot("k", "d", 2, LEASE).await.unwrap(),
        full(2, 2)
    );
    assert_eq!(
        store.take_slot("k", "c", 2, LEASE).await.unwrap(),
        full(2, 2)
    );
    assert!(store.renew_slot("k", "b", LEASE).await.unwrap());
    assert!(!store.renew_slot("k", "c", LEASE).await.unwrap());
    assert!(store.free_slot("k", "a").await.unwrap());
    assert!(!store.free_slot("k", "a").await.unwrap());
    assert_eq!(
        store.take_slot("k", "c", 2, LEASE).await.unwrap(),
        Slot::Taken
    );
    let usage = store.limit_usage("k").await.unwrap();
    assert_eq!((usage.running, usage.waiting), (2, 1));
    assert!(usage.typical_hold.is_some());
    assert_eq!(usage.next_turn_in, None);
    assert_eq!(
        store.limit_usage("unknown").await.unwrap(),
        LimitUsage::default()
    );
    fixture.clean().await;
}

#[tokio::test]
async fn a_lease_that_ends_gives_the_slot_back() {
    let fixture = Fixture::new().await;
    let store = &fixture.store;
    let lease = Duration::from_millis(300);
    let taken = Instant::now();
    assert_eq!(
        store.take_slot("k", "a", 1, lease).await.unwrap(),
        Slot::Taken
    );
    assert!(matches!(
        store.take_slot("k", "b", 1, lease).await.unwrap(),
        Slot::Full { running: 1, .. }
    ));
    // Redis ends the lease on its own clock; ask until it has, within a bound.
    let back = tokio::time::timeout(Duration::from_secs(10), async {
        while store.take_slot("k", "b", 1, lease).await.unwrap() != Slot::Taken {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(back.is_ok(), "the slot outlived its lease by seconds");
    assert!(taken.elapsed() >= lease, "the lease ended early");
    assert!(!store.free_slot("k", "a").await.unwrap());
    assert!(!store.renew_slot("k", "a", lease).await.unwrap());
    assert_eq!(store.limit_usage("k").await.unwrap().running, 1);
    fixture.clean().await;
}

#[tokio::test]
async fn the_typical_hold_averages_the_freed_slots() {
    let fixture = Fixture::new().await;
    let store = &fixture.store;
    store.take_slot("k", "a", 1, LEASE).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    store.free_slot("k", "a").await.unwrap();
    let first = store.limit_usage("k").await.unwrap().typical_hold.unwrap();
    assert!(
        near(first, Duration::from_millis(100), Duration::from_millis(80)),
        "{first:?}"
    );
    store.take_slot("k", "b", 1, LEASE).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    store.free_slot("k", "b").await.unwrap();
    let second = store.limit_usage("k").await.unwrap().typical_hold.unwrap();
    // first + 0.2 * (about 600 ms - first)
    let expected = first + (Duration::from_millis(600) - first) / 5;
    assert!(
        near(second, expected, Duration::from_millis(40)),
        "{second:?} vs {expected:?}"
    );
    store.take_slot("k", "c", 1, LEASE).await.unwrap();
    assert!(matches!(
        store.take_slot("k", "d", 1, LEASE).await.unwrap(),
        Slot::Full { typical_hold: Some(hold), .. } if hold == second
    ));
    fixture.clean().await;
}

#[tokio::test]
async fn turns_come_in_a_burst_then_spaced_and_a_reservation_is_answered_again() {
    let fixture = Fixture::new().await;
    let store = &fixture.store;
    let rate = rate("10/s burst 3");
    let slack = Duration::from_millis(30);
    for holder in ["a", "b", "c"] {
        assert_eq!(
            store.reserve_turn("k", holder, rate).await.unwrap(),
            Turn::Now
        );
    }
    let asked = Instant::now();
    let Turn::Wait(d) = store.reserve_turn("k", "d", rate).await.unwrap() else {
        panic!("the burst is spent")
    };
    let Turn::Wait(e) = store.reserve_turn("k", "e", rate).await.unwrap() else {
        panic!("the burst is spent")
    };
    assert!(near(d, Duration::from_millis(100), slack), "{d:?}");
    assert!(
        near(e - d, Duration::from_millis(100), slack),
        "{d:?} then {e:?}"
    );
    // d asks again: the same reservation, no second turn.
    let Turn::Wait(again) = store.reserve_turn("k", "d", rate).await.unwrap() else {
        panic!("d's turn is not due yet")
    };
    assert!(again <= d);
    let Turn::Wait(f) = store.reserve_turn("k", "f", rate).await.unwrap() else {
        panic!("the burst is spent")
    };
    assert!(
        near(f - e, Duration::from_millis(100), slack),
        "{e:?} then {f:?}"
    );
    let usage = store.limit_usage("k").await.unwrap();
    assert!(usage.next_turn_in.is_some_and(|next| next > f), "{usage:?}");
    // Back when told, d starts; never before its turn.
    tokio::time::sleep(again).await;
    assert_eq!(store.reserve_turn("k", "d", rate).await.unwrap(), Turn::Now);
    assert!(asked.elapsed() >= d);
    // Consumed: asking once more is a new start, after f.
    assert!(matches!(
        store.reserve_turn("k", "d", rate).await.unwrap(),
        Turn::Wait(next) if next + asked.elapsed() > f
    ));
    fixture.clean().await;
}

#[tokio::test]
async fn a_booked_turn_is_kept_even_when_due_now_and_started_once_by_its_holder() {
    let fixture = Fixture::new().await;
    let store = &fixture.store;
    let rate = rate("2/s");
    let slack = Duration::from_millis(30);
    // Due at once, yet kept for a; b is a turn later, and asking again
    // answers the same reservation.
    assert_eq!(
        store.book_turn("k", "a", rate).await.unwrap(),
        Duration::ZERO
    );
    let asked = Instant::now();
    let b = store.book_turn("k", "b", rate).await.unwrap();
    assert!(near(b, Duration::from_millis(500), slack), "{b:?}");
    assert!(store.book_turn("k", "b", rate).await.unwrap() <= b);
    // A job that was not booked waits behind both.
    let Turn::Wait(c) = store.reserve_turn("k", "c", rate).await.unwrap() else {
        panic!("two turns are booked ahead of c")
    };
    assert!(near(c, Duration::from_secs(1), slack), "{c:?}");
    // a starts on its booked turn, once: asking again is a new turn.
    assert_eq!(store.reserve_turn("k", "a", rate).await.unwrap(), Turn::Now);
    assert!(matches!(
        store.reserve_turn("k", "a", rate).await.unwrap(),
        Turn::Wait(next) if next > c
    ));
    // b, back when told, starts; never before its turn. a started a moment
    // after its own turn, which counts as its turn: b is not held back.
    tokio::time::sleep(b.saturating_sub(asked.elapsed())).await;
    assert_eq!(store.reserve_turn("k", "b", rate).await.unwrap(), Turn::Now);
    assert!(asked.elapsed() >= b);
    fixture.clean().await;
}

#[tokio::test]
async fn holders_asking_at_once_share_the_slots_and_the_turns_exactly() {
    let fixture = Fixture::new().await;
    let store = Arc::new(fixture.store.clone());
    let takes = (0..16).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            store
                .take_slot("k", &format!("h{i}"), 3, LEASE)
                .await
                .unwrap()
        })
    });
    let answers = futures::future::join_all(takes).await;
    let taken = answers
        .iter()
        .filter(|a| matches!(a, Ok(Slot::Taken)))
        .count();
    assert_eq!(taken, 3, "{answers:?}");
    assert_eq!(store.limit_usage("k").await.unwrap().waiting, 13);

    let rate = rate("1/s burst 4");
    let turns = (0..16).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            store
                .reserve_turn("k", &format!("h{i}"), rate)
                .await
                .unwrap()
        })
    });
    let mut waits = Vec::new();
    for turn in futures::future::join_all(turns).await {
        match turn.unwrap() {
            Turn::Now => waits.push(Duration::ZERO),
            Turn::Wait(wait) => waits.push(wait),
        }
    }
    waits.sort();
    assert_eq!(waits.iter().filter(|w| w.is_zero()).count(), 4, "{waits:?}");
    for pair in waits[4..].windows(2) {
        assert!(
            near(
                pair[1] - pair[0],
                Duration::from_secs(1),
                Duration::from_millis(50)
            ),
            "turns not one interval apart: {waits:?}"
        );
    }
    fixture.clean().await;
}

#[tokio::test]
async fn every_key_expires_by_itself_once_idle() {
    let mut fixture = Fixture::new().await;
    let store = fixture.store.clone();
    let lease = Duration::from_secs(5);
    store.take_slot("k", "a", 1, lease).await.unwrap();
    store.take_slot("k", "b", 1, lease).await.unwrap();
    store.take_slot("k", "c", 1, lease).await.unwrap();
    store.free_slot("k", "a").await.unwrap();
    store.take_slot("k", "b", 1, lease).await.unwrap();
    let rate = rate("1/m");
    store.reserve_turn("k", "x", rate).await.unwrap();
    store.reserve_turn("k", "y", rate).await.unwrap();
    let keys = fixture.keys().await;
    let names: Vec<&str> = keys.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "k:hold",
            "k:rate",
            "k:slots",
            "k:started",
            "k:turns",
            "k:waiting"
        ]
    );
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap();
    for (name, ttl) in keys {
        let most = match name.as_str() {
            "k:slots" | "k:started" | "k:waiting" => ms(lease),
            "k:hold" => ms(HOLD_MEMORY),
            // x's start and y's turn, then one interval more.
            "k:rate" => ms(Duration::from_secs(180)),
            "k:turns" => ms(Duration::from_secs(60) + TURN_GRACE),
            other => panic!("unexpected key {other}"),
        };
        assert!(
            ttl > 0 && ttl <= most + 2,
            "{name} lives {ttl} ms, at most {most}"
        );
    }
    // The slots and the waiting set go with their last lease.
    store.free_slot("k", "b").await.unwrap();
    let short = Duration::from_millis(200);
    store.take_slot("k", "d", 1, short).await.unwrap();
    store.take_slot("k", "e", 1, short).await.unwrap();
    let gone = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let keys = fixture.keys().await;
            if !keys
                .iter()
                .any(|(name, _)| name != "k:hold" && name != "k:rate" && name != "k:turns")
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "slot keys outlived their leases: {:?}",
        fixture.keys().await
    );
    fixture.clean().await;
}

/// One step of a scenario, and what a store answered to it.
#[derive(Debug, Clone, Copy)]
enum Step {
    Take(&'static str, u32, Duration),
    Renew(&'static str, Duration),
    Free(&'static str),
    Reserve(&'static str, &'static str),
    Usage,
    Pass(Duration),
}

#[derive(Debug, PartialEq)]
enum Answer {
    Slot(Slot),
    Done(bool),
    Turn(Turn),
    Usage(LimitUsage),
    Passed,
}

/// A duration to the nearest 100 ms, so a store measured on a running
/// clock and one on a paused clock compare (the scenario's exact answers
/// are whole tenths of a second, so up to 50 ms of scheduling delay is
/// allowed).
fn coarse(d: Duration) -> Duration {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(ms.saturating_add(50) / 100 * 100)
}

fn coarse_answer(answer: Answer) -> Answer {
    let coarse_option = |d: Option<Duration>| d.map(coarse);
    match answer {
        Answer::Slot(Slot::Full {
            running,
            waiting,
            typical_hold,
        }) => Answer::Slot(Slot::Full {
            running,
            waiting,
            typical_hold: coarse_option(typical_hold),
        }),
        Answer::Slot(Slot::AlreadyHeld { lease_left }) => Answer::Slot(Slot::AlreadyHeld {
            lease_left: coarse(lease_left),
        }),
        Answer::Turn(Turn::Wait(d)) => Answer::Turn(Turn::Wait(coarse(d))),
        Answer::Usage(usage) => Answer::Usage(LimitUsage {
            next_turn_in: coarse_option(usage.next_turn_in),
            typical_hold: coarse_option(usage.typical_hold),
            ..usage
        }),
        other => other,
    }
}

async fn play<S: LimitStore>(store: &S, steps: &[Step], paused: bool) -> Vec<Answer> {
    let mut answers = Vec::new();
    for step in steps {
        let answer = match *step {
            Step::Take(holder, limit, lease) => {
                Answer::Slot(store.take_slot("k", holder, limit, lease).await.unwrap())
            }
            Step::Renew(holder, lease) => {
                Answer::Done(store.renew_slot("k", holder, lease).await.unwrap())
            }
            Step::Free(holder) => Answer::Done(store.free_slot("k", holder).await.unwrap()),
            Step::Reserve(holder, text) => {
                Answer::Turn(store.reserve_turn("k", holder, rate(text)).await.unwrap())
            }
            Step::Usage => Answer::Usage(store.limit_usage("k").await.unwrap()),
            Step::Pass(by) if paused => {
                tokio::time::advance(by).await;
                Answer::Passed
            }
            Step::Pass(by) => {
                tokio::time::sleep(by).await;
                Answer::Passed
            }
        };
        answers.push(coarse_answer(answer));
    }
    answers
}

#[tokio::test]
async fn the_memory_store_and_redis_agree_on_a_scenario() {
    use Step::*;
    let second = Duration::from_secs(1);
    let ms = Duration::from_millis;
    let steps = [
        Take("a", 2, second),
        Take("b", 2, second),
        Take("a", 2, second),
        Take("c", 2, second),
        Take("d", 2, second),
        Usage,
        Pass(ms(300)),
        Take("b", 2, second),
        Free("a"),
        Free("a"),
        Take("c", 2, second),
        Take("d", 2, second),
        Renew("b", ms(300)),
        Renew("a", second),
        Usage,
        // b's renewed lease ends; d's refusal counts a while longer.
        Pass(ms(300)),
        Take("d", 2, second),
        Usage,
        Free("c"),
        Usage,
        Reserve("r1", "5/s burst 2"),
        Reserve("r2", "5/s burst 2"),
        Reserve("r3", "5/s burst 2"),
        Reserve("r4", "5/s burst 2"),
        Reserve("r3", "5/s burst 2"),
        Usage,
        Pass(ms(300)),
        Reserve("r3", "5/s burst 2"),
        Reserve("r4", "5/s burst 2"),
        Reserve("r5", "5/s burst 2"),
        Usage,
        // Idle again. s2 and s3 come back late, together: one starts, the
        // other is promised the next start, and a new holder comes after.
        Pass(ms(1_500)),
        Reserve("s1", "5/s"),
        Reserve("s2", "5/s"),
        Reserve("s3", "5/s"),
        Pass(ms(700)),
        Reserve("s3", "5/s"),
        Reserve("s2", "5/s"),
        Reserve("s4", "5/s"),
        Usage,
        Pass(ms(200)),
        Reserve("s2", "5/s"),
        Reserve("s4", "5/s"),
    ];
    let redis = Fixture::new().await;
    let on_redis = play(&redis.store, &steps, false).await;
    redis.clean().await;
    let on_memory = tokio::task::spawn_blocking(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(async { play(&MemoryStore::new(), &steps, true).await })
    })
    .await
    .unwrap();
    for (i, (memory, redis)) in on_memory.iter().zip(&on_redis).enumerate() {
        assert_eq!(memory, redis, "step {i}: {:?}", steps[i]);
    }
    assert_eq!(on_memory.len(), on_redis.len());
}
