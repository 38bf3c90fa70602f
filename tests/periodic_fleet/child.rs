//! One process of the fleet: a scheduler of the `beat` schedule, until its
//! standard input closes.

use std::io::BufRead;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queuey::periodic::{Missed, Periodic, Schedule, Scheduler};
use queuey::prelude::*;
use queuey::queue::Namespace;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use serde::{Deserialize, Serialize};

/// The variable that makes this binary a fleet process: the namespace.
pub(crate) const CHILD_ENV: &str = "QUEUEY_PERIODIC_CHILD";
/// The variable that sets a fleet process's heartbeat, in ms.
pub(crate) const HEARTBEAT_ENV: &str = "QUEUEY_PERIODIC_HEARTBEAT_MS";
/// The line a process prints when it starts leading (then its pid).
pub(crate) const LEADING: &str = "LEADING";

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "pfleet")]
pub(crate) enum FleetQueues {
    #[queue(prefetch = 100)]
    Ledger,
}

#[derive(Job, Debug, Clone, Serialize, Deserialize)]
#[job(queue = FleetQueues::Ledger, name = "beat")]
pub(crate) struct Beat {
    pub(crate) tick_ms: u64,
    pub(crate) pid: u32,
}

pub(crate) fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

pub(crate) fn schedule() -> Schedule {
    Schedule::every(Duration::from_secs(1)).unwrap()
}

/// Prints `LEADING {pid}` on stdout whenever the scheduler starts leading.
struct Announce;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Announce {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                use std::fmt::Write;
                let _ = write!(self.0, " {}={value:?}", field.name());
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        let pid = std::process::id();
        if message.0.contains("message=leading the schedule") {
            println!("{LEADING} {pid}");
        }
        // Warnings go to the test's output, to explain a failure.
        if *event.metadata().level() <= tracing::Level::WARN {
            eprintln!("fleet process {pid}:{}", message.0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_process() {
    let Ok(namespace) = std::env::var(CHILD_ENV) else {
        return;
    };
    use tracing_subscriber::layer::SubscriberExt;
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Announce));
    let url = std::env::var("AMQP_URL").expect("AMQP_URL");
    let pid = std::process::id();
    let mut options = RabbitMqOptions::default()
        .connection_name(format!("queuey-test-periodic-{namespace}-{pid}"));
    if let Some(ms) = std::env::var(HEARTBEAT_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
    {
        options = options.heartbeat(Duration::from_millis(ms));
    }
    let backend = RabbitMqBackend::with_options(url.as_str(), options)
        .await
        .expect("connects");
    let producer = Producer::<FleetQueues, _>::builder(backend.clone())
        .namespace(Namespace::new(namespace).unwrap())
        .build_undeclared();
    let scheduler = Scheduler::new(producer).periodic(
        Periodic::for_tick("beat", schedule(), move |tick| Beat {
            tick_ms: ms(tick),
            pid,
        })
        .missed(Missed::FireOnce),
    );
    let handle = scheduler.handle();
    std::thread::spawn(move || {
        // Stop when the parent closes our standard input.
        let mut line = String::new();
        while std::io::stdin().lock().read_line(&mut line).unwrap_or(0) > 0 {
            line.clear();
        }
        handle.shutdown();
    });
    scheduler.run().await.expect("the scheduler runs");
    let _ = backend.close().await;
    // Leave at once: nothing of the process is needed any more, and the
    // parent waits for it to exit.
    std::process::exit(0);
}
