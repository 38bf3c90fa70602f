//! Control commands over the control stream: sent by one backend, followed
//! by another; a backend started later catches up before `follow_control`
//! returns; the follower survives its connection being closed and applies
//! nothing twice; old pauses are renewed; a backend that starts goes on
//! from the latest snapshot of the state; a stream declared otherwise is
//! refused with what to do. Each test uses a control stream of its own,
//! deleted at the end: the shared broker's `queuey.control` is never
//! touched.

use std::time::{Duration, Instant};

use futures::StreamExt;
use queuey_core::backend::ControlChannel;
use queuey_core::control::{CancelFilter, Command, ControlRecord, ControlView};
use queuey_core::{BackendErrorKind, Uuid};
use queuey_rabbitmq::RabbitMqOptions;

use crate::support::{WAIT, control_notices_mentioning, kind, table, text, within};

fn on(stream: &str) -> RabbitMqOptions {
    RabbitMqOptions::default().control_stream(stream)
}

fn pause(queue: &str) -> ControlRecord {
    ControlRecord::new(Command::Pause {
        queue: queue.to_owned(),
    })
}

fn resume(queue: &str) -> ControlRecord {
    ControlRecord::new(Command::Resume {
        queue: queue.to_owned(),
    })
}

/// How long a start may take: finding the stream's end and reading up to
/// a snapshot's worth of records, each step bound by the backend's call
/// timeout (30 s), on a loaded machine. A start that never ends still
/// fails the test.
const FOLLOW_BOUND: Duration = Duration::from_secs(90);

async fn follow(backend: &impl ControlChannel) -> ControlView {
    tokio::time::timeout(FOLLOW_BOUND, backend.follow_control())
        .await
        .expect("follow_control returns within its own bounds")
        .expect("follows")
}

/// Waits until `done` holds for `view`, bounded by `bound`; the time it took.
async fn until(
    view: &ControlView,
    bound: Duration,
    done: impl Fn(&ControlView) -> bool,
) -> Duration {
    let started = Instant::now();
    let mut changes = view.changes();
    tokio::time::timeout(bound, async {
        while !done(view) {
            changes.changed().await.expect("the view lives");
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the view did not change as expected within {bound:?}"));
    started.elapsed()
}

/// The process's resident memory, in KiB (Linux).
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_sent_by_one_backend_reaches_another_within_two_seconds() {
    let broker = broker!("a_command_sent_by_one_backend_reaches_another_within_two_seconds");
    let stream = broker.stream("control-latency");
    let sender = broker.backend_named("sender", on(&stream)).await;
    let follower = broker.backend_named("follower", on(&stream)).await;
    let view = follow(&follower).await;
    let q = format!("queue-{}", Uuid::new_v4().simple());

    const ROUNDS: usize = 60;
    let mut seen = Vec::with_capacity(ROUNDS);
    let mut confirmed = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let paused = round % 2 == 0;
        let record = if paused { pause(&q) } else { resume(&q) };
        let started = Instant::now();
        let sending = async {
            sender.send_control(&record).await.expect("sent");
            started.elapsed()
        };
        let arriving = until(&view, Duration::from_secs(2), |v| v.is_paused(&q) == paused);
        let (confirm, arrival) = tokio::join!(sending, arriving);
        confirmed.push(confirm);
        seen.push(arrival);
    }
    seen.sort();
    confirmed.sort();
    eprintln!(
        "control command latency over {ROUNDS} commands, send to seen by the other backend: \
         p50 {:?}, p99 {:?}, max {:?}; send to confirm: p50 {:?}, p99 {:?}",
        percentile(&seen, 0.5),
        percentile(&seen, 0.99),
        seen[ROUNDS - 1],
        percentile(&confirmed, 0.5),
        percentile(&confirmed, 0.99),
    );
    sender.close().await.unwrap();
    follower.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_started_after_the_commands_has_them_all_when_follow_control_returns() {
    let broker =
        broker!("a_backend_started_after_the_commands_has_them_all_when_follow_control_returns");
    let stream = broker.stream("control-catch-up");
    let sender = broker.backend_named("sender", on(&stream)).await;
    let q = format!("queue-{}", Uuid::new_v4().simple());
    let other = format!("other-{}", Uuid::new_v4().simple());
    let job = Uuid::new_v4();
    for record in [
        pause(&q),
        resume(&q),
        pause(&q),
        pause(&other),
        resume(&other),
        ControlRecord::new(Command::Cancel { job_id: job }),
        ControlRecord::new(
            CancelFilter::new()
                .job_type("newsletter")
                .into_command()
                .unwrap(),
        ),
    ] {
        within("send", sender.send_control(&record)).await.unwrap();
    }

    let later = broker.backend_named("later", on(&stream)).await;
    let view = follow(&later).await;
    assert!(view.is_paused(&q));
    assert!(!view.is_paused(&other));
    let state = view.snapshot();
    assert!(state.is_cancelled_id(job));
    assert_eq!(state.cancellations(), (1, 1));
    assert_eq!(state.paused().count(), 1);

    // Every call returns the same view, caught up again.
    within("send", sender.send_control(&resume(&q)))
        .await
        .unwrap();
    let again = follow(&later).await;
    assert!(!again.is_paused(&q));
    assert!(!view.is_paused(&q), "one view, shared");
    sender.close().await.unwrap();
    later.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_follower_resumes_after_its_connection_is_closed_and_applies_nothing_twice() {
    let broker =
        broker!("the_follower_resumes_after_its_connection_is_closed_and_applies_nothing_twice");
    let stream = broker.stream("control-resume");
    let sender = broker.backend_named("sender", on(&stream)).await;
    let follower = broker.backend_named("follower", on(&stream)).await;
    let q = format!("queue-{}", Uuid::new_v4().simple());
    let r = format!("queue-{}", Uuid::new_v4().simple());
    for record in [pause(&q), resume(&q), pause(&q)] {
        within("send", sender.send_control(&record)).await.unwrap();
    }
    let view = follow(&follower).await;
    assert!(view.is_paused(&q));
    let changes = view.changes();
    let before = *changes.borrow();

    // The follower consumes on the backend's fleet connection.
    broker
        .close_connection(&format!("{} (fleet)", broker.connection_name("follower")))
        .await;
    // Sent while the follower's connection is down.
    within("send", sender.send_control(&resume(&q)))
        .await
        .unwrap();
    within("send", sender.send_control(&pause(&r)))
        .await
        .unwrap();
    until(&view, WAIT, |v| !v.is_paused(&q) && v.is_paused(&r)).await;
    // Two changes, no more: nothing read before the loss was applied
    // again (the three earlier records would have made three more).
    assert_eq!(*changes.borrow(), before + 2);
    // And it keeps following on the new connection.
    within("send", sender.send_control(&resume(&r)))
        .await
        .unwrap();
    until(&view, WAIT, |v| !v.is_paused(&r)).await;
    assert_eq!(*changes.borrow(), before + 3);
    assert!(follower.is_connected());
    sender.close().await.unwrap();
    follower.close().await.unwrap();
}

/// 10,000 cancellations sent, then a new backend catches up: how long its
/// `follow_control` takes and the memory it costs (printed, not asserted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_cancellations_are_caught_up_with() {
    const CANCELLATIONS: usize = 10_000;
    let broker = broker!("ten_thousand_cancellations_are_caught_up_with");
    let stream = broker.stream("control-many");
    let sender = broker.backend_named("sender", on(&stream)).await;
    within("declare the stream", sender.send_control(&resume("none")))
        .await
        .unwrap();
    let started = Instant::now();
    let records: Vec<ControlRecord> = (0..CANCELLATIONS)
        .map(|_| {
            ControlRecord::new(Command::Cancel {
                job_id: Uuid::new_v4(),
            })
        })
        .collect();
    let sent: Vec<_> = futures::stream::iter(records.iter().map(|r| sender.send_control(r)))
        .buffer_unordered(256)
        .collect()
        .await;
    assert!(sent.iter().all(Result::is_ok));
    let sending = started.elapsed();

    // What a backend following an empty stream costs, to tell the
    // commands' share from the connection's.
    let empty = broker.stream("control-empty");
    let rss_before = rss_kib().unwrap_or(0);
    let baseline = broker.backend_named("baseline", on(&empty)).await;
    let started = Instant::now();
    follow(&baseline).await;
    let empty_caught_up = started.elapsed();
    let rss_baseline = rss_kib().unwrap_or(0);

    let started = Instant::now();
    let later = broker.backend_named("later", on(&stream)).await;
    let view = follow(&later).await;
    let caught_up = started.elapsed();
    let rss_after = rss_kib().unwrap_or(0);
    let state = view.snapshot();
    assert_eq!(state.cancellations(), (CANCELLATIONS, 0));
    assert!(records.iter().all(|r| match r.command {
        Command::Cancel { job_id } => state.is_cancelled_id(job_id),
        _ => false,
    }));
    // A hash map entry: the id, the time, and a control byte.
    let state_bytes =
        CANCELLATIONS * (std::mem::size_of::<Uuid>() + std::mem::size_of::<u64>() + 1);
    eprintln!(
        "{CANCELLATIONS} cancellations: sent (256 in flight) in {sending:?}; a new backend \
         connected and caught up in {caught_up:?} (one following an empty stream: \
         {empty_caught_up:?}); process RSS +{} KiB for it (+{} KiB for the one following the \
         empty stream; the state's own entries are about {} KiB)",
        rss_after.saturating_sub(rss_baseline),
        rss_baseline.saturating_sub(rss_before),
        state_bytes / 1024,
    );
    baseline.close().await.unwrap();
    sender.close().await.unwrap();
    later.close().await.unwrap();
}

/// A pause older than a week is published again by a follower once it
/// has caught up, so the stream keeps it past its maximum age; a resume
/// sent afterwards still wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_a_week_old_is_renewed_and_a_resume_still_wins() {
    let broker = broker!("a_pause_a_week_old_is_renewed_and_a_resume_still_wins");
    let stream = broker.stream("control-renew");
    let sender = broker.backend_named("sender", on(&stream)).await;
    let q = format!("queue-{}", Uuid::new_v4().simple());
    let eight_days_ms = 8 * 24 * 3_600_000;
    let mut old = pause(&q).by("ops");
    old.at_ms -= eight_days_ms;
    within("send", sender.send_control(&old)).await.unwrap();

    let follower = broker.backend_named("follower", on(&stream)).await;
    let view = follow(&follower).await;
    assert!(view.is_paused(&q));
    let recent = |v: &ControlView| {
        v.snapshot()
            .paused()
            .any(|(queue, at)| queue == q && at > old.at_ms + eight_days_ms / 2)
    };
    // A renewal changes the pause's time only, which the view does not
    // announce: look again and again.
    within("the renewal", async {
        while !recent(&view) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    // A backend started now reads the renewal too.
    let later = broker.backend_named("later", on(&stream)).await;
    assert!(recent(&follow(&later).await));

    within("send", sender.send_control(&resume(&q)))
        .await
        .unwrap();
    until(&view, WAIT, |v| !v.is_paused(&q)).await;
    assert!(!follow(&later).await.is_paused(&q));
    for backend in [sender, follower, later] {
        backend.close().await.unwrap();
    }
}

/// A queue of the stream's name that is not the stream queuey declares is
/// refused before anything is sent or followed, saying what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_stream_declared_otherwise_is_refused_with_what_to_do() {
    let broker = broker!("a_control_stream_declared_otherwise_is_refused_with_what_to_do");
    let stream = broker.stream("control-foreign");
    broker
        .declare_raw(&stream, true, table(&[("x-queue-type", text("classic"))]))
        .await
        .unwrap();
    let backend = broker.backend(on(&stream)).await;
    let e = within("follow_control", backend.follow_control())
        .await
        .unwrap_err();
    assert_eq!(kind(&e), BackendErrorKind::Refused, "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("declaring the control stream `{stream}`")),
        "{text}"
    );
    assert!(text.contains("PRECONDITION_FAILED"), "{text}");
    assert!(text.contains("control_stream"), "{text}");
    let e = within("send_control", backend.send_control(&pause("q")))
        .await
        .unwrap_err();
    assert_eq!(kind(&e), BackendErrorKind::Refused, "{e}");
    assert_eq!(broker.ready(&stream).await, 0, "nothing was published");
    backend.close().await.unwrap();
}

/// A stream deleted while a backend follows it, and one deleted and
/// declared again while the backend was away: either way the backend
/// forgets what it read from the old stream and follows the new one from
/// its start, so it agrees with a process started now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_or_replaced_stream_is_followed_anew() {
    let broker = broker!("a_deleted_or_replaced_stream_is_followed_anew");
    let stream = broker.stream("control-replaced");
    let old = format!("old-{}", Uuid::new_v4().simple());
    let new = format!("new-{}", Uuid::new_v4().simple());
    // The follower stays away for seconds when its connection drops, so
    // the stream can be replaced meanwhile.
    let follower = broker
        .backend_named(
            "follower",
            on(&stream).reconnect_delay(Duration::from_secs(3), Duration::from_secs(3)),
        )
        .await;
    let sender = broker.backend_named("sender", on(&stream)).await;
    for record in [pause(&old), pause("a"), pause("b"), pause("c")] {
        within("send", sender.send_control(&record)).await.unwrap();
    }
    let view = follow(&follower).await;
    assert!(view.is_paused(&old));

    // Deleted while followed: the broker cancels the consumer.
    broker.delete_raw(&stream).await;
    until(&view, WAIT, |v| !v.is_paused(&old)).await;

    // Replaced while the follower is away: it comes back to a stream whose
    // offsets start again from 0.
    let second = broker.backend_named("second", on(&stream)).await;
    for record in [pause(&old), pause("a"), pause("b"), pause("c"), pause("d")] {
        within("send", second.send_control(&record)).await.unwrap();
    }
    until(&view, WAIT, |v| v.is_paused(&old) && v.is_paused("d")).await;
    broker
        .close_connection(&format!("{} (fleet)", broker.connection_name("follower")))
        .await;
    broker.delete_raw(&stream).await;
    let third = broker.backend_named("third", on(&stream)).await;
    within("send", third.send_control(&pause(&new)))
        .await
        .unwrap();
    // Back on a fresh connection, the follower starts anew: a start's bound.
    until(&view, FOLLOW_BOUND, |v| {
        v.is_paused(&new) && !v.is_paused(&old)
    })
    .await;
    assert_eq!(
        view.snapshot().paused().count(),
        1,
        "only the new stream's pause"
    );
    for backend in [follower, sender, second, third] {
        backend.close().await.unwrap();
    }
}

/// A backend whose follower cannot read the whole stream within the call
/// bound still gets its view, marked as not caught up; the mark is lifted
/// once the follower has read everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_cannot_catch_up_in_time_starts_degraded_and_catches_up() {
    const CANCELLATIONS: usize = 20_000;
    let broker = broker!("a_follower_that_cannot_catch_up_in_time_starts_degraded_and_catches_up");
    let stream = broker.stream("control-degraded");
    let sender = broker.backend_named("sender", on(&stream)).await;
    within("declare the stream", sender.send_control(&resume("none")))
        .await
        .unwrap();
    let sender = &sender;
    let sent: Vec<_> = futures::stream::iter((0..CANCELLATIONS).map(|_| {
        let record = ControlRecord::new(Command::Cancel {
            job_id: Uuid::new_v4(),
        });
        async move { sender.send_control(&record).await }
    }))
    .buffer_unordered(256)
    .collect()
    .await;
    assert!(sent.iter().all(Result::is_ok));

    let hurried = broker
        .backend_named("hurried", on(&stream).call_timeout(Duration::from_secs(1)))
        .await;
    let view = follow(&hurried).await;
    if view.is_caught_up() {
        eprintln!("the follower read {CANCELLATIONS} records within 1 s; nothing to check");
    } else {
        until(&view, Duration::from_secs(60), ControlView::is_caught_up).await;
    }
    assert_eq!(view.snapshot().cancellations(), (CANCELLATIONS, 0));
    hurried.close().await.unwrap();
    sender.close().await.unwrap();
}

/// Commands that break the rules are refused by every follower even when
/// a trusted user sent them by hand: a filter that would cancel every job
/// for ever, a pause stamped far in the future, a record too large to read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_senders_invalid_commands_are_refused_by_the_follower() {
    let broker = broker!("a_trusted_senders_invalid_commands_are_refused_by_the_follower");
    let stream = broker.stream("control-invalid");
    let sender = broker.backend_named("sender", on(&stream)).await;
    within("declare the stream", sender.send_control(&resume("none")))
        .await
        .unwrap();
    let q = format!("queue-{}", Uuid::new_v4().simple());
    let signed = lapin::BasicProperties::default()
        .with_delivery_mode(2)
        .with_user_id("guest".into());
    let everything = serde_json::json!({
        "id": Uuid::new_v4(), "at_ms": 1u64, "command": "cancel_matching", "filter": {}
    });
    let mut future = pause(&q);
    future.at_ms = u64::MAX;
    let mut huge = pause(&q);
    huge.by = Some("x".repeat(queuey_core::control::MAX_RECORD_BYTES));
    for body in [
        everything.to_string().into_bytes(),
        future.encode(),
        huge.encode(),
    ] {
        broker.publish_raw(&stream, &body, signed.clone()).await;
    }
    let follower = broker.backend_named("follower", on(&stream)).await;
    let state = follow(&follower).await.snapshot();
    assert!(!state.is_paused(&q));
    assert_eq!(state.cancellations(), (0, 0));
    follower.close().await.unwrap();
    sender.close().await.unwrap();
}

/// A follower that holds the whole state writes a snapshot of it once an
/// interval passed without one; a backend that starts later reads the
/// stream's last intervals, finds the snapshot and goes on from there,
/// with the same state as one that read everything: pauses, cancellations
/// by id and by filter (still revocable), and what was sent after the
/// snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_starts_goes_on_from_the_latest_snapshot() {
    let broker = broker!("a_backend_that_starts_goes_on_from_the_latest_snapshot");
    let stream = broker.stream("control-snapshot");
    let every = Duration::from_secs(1);
    let sender = broker.backend_named("sender", on(&stream)).await;
    let (paused, resumed, later_paused) = (
        format!("paused-{}", Uuid::new_v4().simple()),
        format!("resumed-{}", Uuid::new_v4().simple()),
        format!("later-{}", Uuid::new_v4().simple()),
    );
    let job = Uuid::new_v4();
    let filter = CancelFilter::new()
        .queue(&paused)
        .enqueued_before(queuey_core::__private::now_ms());
    let by_filter = ControlRecord::new(Command::CancelMatching { filter });
    for record in [
        pause(&paused),
        ControlRecord::new(Command::Cancel { job_id: job }),
        by_filter.clone(),
        pause(&resumed),
        resume(&resumed),
    ] {
        within("send", sender.send_control(&record)).await.unwrap();
    }
    for _ in 0..200 {
        within("send", sender.send_control(&pause(&resumed)))
            .await
            .unwrap();
        within("send", sender.send_control(&resume(&resumed)))
            .await
            .unwrap();
    }
    // A fleet member that reads the stream from its start (no snapshot
    // yet) and writes snapshots from now on.
    let writer = broker
        .backend_named("writer", on(&stream).control_snapshot_interval(every))
        .await;
    follow(&writer).await;
    within("the writer's first snapshot", async {
        while !control_notices_mentioning(&stream)
            .iter()
            .any(|line| line.contains("wrote a snapshot"))
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    // More records than a starting backend reads before the end (refused
    // ones: unsigned), so that reading them all is not what the later
    // backend does.
    flood(&broker, &stream, 41_000).await;
    within("send", sender.send_control(&pause(&later_paused)))
        .await
        .unwrap();

    let later = broker
        .backend_named("later", on(&stream).control_snapshot_interval(every))
        .await;
    let view = follow(&later).await;
    // On a busy machine a follower may hand its view out before it read to
    // the stream's end; it says so once it has.
    until(&view, FOLLOW_BOUND, ControlView::is_caught_up).await;
    let from_snapshot = control_notices_mentioning(&stream)
        .into_iter()
        .filter(|line| line.contains("from a snapshot"))
        .count();
    assert!(
        from_snapshot >= 1,
        "the later backend went on from a snapshot"
    );
    let state = view.snapshot();
    assert!(state.is_paused(&paused) && state.is_paused(&later_paused));
    assert!(!state.is_paused(&resumed));
    assert!(state.is_cancelled_id(job));
    assert_eq!(state.cancellations(), (1, 1));
    // The state agrees with the writer's, which read the stream from its
    // start (no snapshot was there yet) and followed it since.
    let writers = follow(&writer).await;
    assert_eq!(
        writers.snapshot().records(),
        state.records(),
        "the same state as from the start"
    );

    within(
        "send",
        sender.send_control(&ControlRecord::new(Command::Revoke {
            record: by_filter.id,
        })),
    )
    .await
    .unwrap();
    within("send", sender.send_control(&resume(&paused)))
        .await
        .unwrap();
    until(&view, WAIT, |v| {
        let s = v.snapshot();
        !s.is_paused(&paused) && s.cancellations() == (1, 0)
    })
    .await;
    for backend in [sender, writer, later] {
        backend.close().await.unwrap();
    }
}

/// Publishes `count` unsigned records (resumes of a queue no test pauses)
/// to `stream`, as a producer's credential could: every follower refuses
/// them.
async fn flood(broker: &crate::support::Broker, stream: &str, count: usize) {
    let channel = broker.channel().await;
    channel
        .confirm_select(lapin::options::ConfirmSelectOptions::default())
        .await
        .expect("confirm mode");
    let forged = resume("flooded").encode();
    for window in (0..count).collect::<Vec<_>>().chunks(1_000) {
        let mut confirms = Vec::with_capacity(window.len());
        for _ in window {
            confirms.push(
                channel
                    .basic_publish(
                        "".into(),
                        stream.into(),
                        lapin::options::BasicPublishOptions::default(),
                        &forged,
                        lapin::BasicProperties::default(),
                    )
                    .await
                    .expect("publish"),
            );
        }
        for confirm in confirms {
            assert!(confirm.await.expect("confirm").is_ack());
        }
    }
    let _ = channel.close(200, "flooded".into()).await;
}

/// A control stream an earlier version created has no bound in bytes,
/// which RabbitMQ cannot add in place: it is declared as it is (with a
/// warning naming the policy that bounds it) and works as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_stream_created_without_a_bound_in_bytes_still_works() {
    let broker = broker!("a_control_stream_created_without_a_bound_in_bytes_still_works");
    let stream = broker.stream("control-unbounded");
    let field_table = queuey_rabbitmq::__private::field_table;
    let current = queuey_rabbitmq::topology::control_stream_arguments();
    let mut older = current.clone();
    assert!(older.remove("x-max-length-bytes").is_some());
    broker
        .declare_raw(&stream, true, field_table(&older))
        .await
        .unwrap();
    // Whether this RabbitMQ refuses to declare the stream with the bound
    // now (RabbitMQ 3.10 does): only then is there anything to warn about.
    let refuses = broker
        .declare_raw(&stream, true, field_table(&current))
        .await
        .is_err();
    let q = format!("queue-{}", Uuid::new_v4().simple());
    let sender = broker.backend_named("sender", on(&stream)).await;
    within("send", sender.send_control(&pause(&q)))
        .await
        .unwrap();
    let follower = broker.backend_named("follower", on(&stream)).await;
    assert!(follow(&follower).await.is_paused(&q));
    let warned = crate::support::warnings_mentioning(&stream)
        .iter()
        .any(|line| line.contains("without a bound in bytes") && line.contains("topology apply"));
    assert_eq!(warned, refuses, "a warning exactly when the broker refused");
    for backend in [sender, follower] {
        backend.close().await.unwrap();
    }
}

/// A flood of records from a user the follower does not trust (unsigned
/// here) makes a follower that reads it write a snapshot without waiting
/// for its interval, so the flood cannot push every snapshot out of the
/// stream; a backend started afterwards goes on from that snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_refused_records_makes_the_follower_write_a_snapshot() {
    // Past any follower's share of a flood, and more than a starting
    // backend reads before the end.
    const FORGED: usize = 45_000;
    let broker = broker!("a_flood_of_refused_records_makes_the_follower_write_a_snapshot");
    let stream = broker.stream("control-flood");
    let q = format!("queue-{}", Uuid::new_v4().simple());
    let follower = broker.backend_named("follower", on(&stream)).await;
    within("send", follower.send_control(&pause(&q)))
        .await
        .unwrap();
    let view = follow(&follower).await;
    assert!(view.is_paused(&q));

    flood(&broker, &stream, FORGED).await;
    within("the follower's snapshot", async {
        while !control_notices_mentioning(&stream)
            .iter()
            .any(|line| line.contains("wrote a snapshot"))
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(view.is_paused(&q), "the flood changed nothing");

    let later = broker.backend_named("later", on(&stream)).await;
    assert!(follow(&later).await.is_paused(&q));
    assert!(
        control_notices_mentioning(&stream)
            .iter()
            .any(|line| line.contains("from a snapshot")),
        "the later backend went on from the snapshot"
    );
    for backend in [follower, later] {
        backend.close().await.unwrap();
    }
}

/// The follower consumes the stream on a connection of its own: the broker
/// closing either connection leaves the other as it was, so a control-plane
/// read the broker answers by closing its connection (RabbitMQ 4.3 does for
/// a stream still starting) never interrupts the job path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_follower_and_the_job_path_have_connections_of_their_own() {
    let broker = broker!("the_follower_and_the_job_path_have_connections_of_their_own");
    let stream = broker.stream("control-own-connection");
    let sender = broker.backend_named("sender", on(&stream)).await;
    let backend = broker.backend_named("both", on(&stream)).await;
    let jobs = broker.connection_name("both");
    let fleet = format!("{jobs} (fleet)");
    assert!(
        broker.connection_pid(&fleet).await.is_none(),
        "no fleet connection before anything follows"
    );
    let view = follow(&backend).await;
    let jobs_pid = broker.connection_pid(&jobs).await.expect("the job path's");
    let fleet_pid = broker.connection_pid(&fleet).await.expect("the fleet's");
    assert_ne!(jobs_pid, fleet_pid);

    broker.close_connection(&fleet).await;
    let q = format!("queue-{}", Uuid::new_v4().simple());
    within("send", sender.send_control(&pause(&q)))
        .await
        .unwrap();
    until(&view, WAIT, |v| v.is_paused(&q)).await;
    assert_eq!(
        broker.connection_pid(&jobs).await.as_deref(),
        Some(jobs_pid.as_str()),
        "the job path's connection was not touched"
    );
    let fleet_pid = broker
        .connection_pid(&fleet)
        .await
        .expect("a new fleet connection");

    broker.close_connection(&jobs).await;
    within("send", sender.send_control(&resume(&q)))
        .await
        .unwrap();
    until(&view, WAIT, |v| !v.is_paused(&q)).await;
    assert_eq!(
        broker.connection_pid(&fleet).await.as_deref(),
        Some(fleet_pid.as_str()),
        "the follower's connection was not touched"
    );
    backend.close().await.unwrap();
    assert!(
        broker.connection_pid(&fleet).await.is_none(),
        "closing the backend closes its fleet connection"
    );
    sender.close().await.unwrap();
}
