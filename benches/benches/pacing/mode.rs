//! One mode: its fresh queue, its workers, its producer (booking turns or
//! not), the offered load, what was measured over the window, and the
//! deletion of what it made.

use std::sync::Arc;
use std::time::Instant;

use queuey::Producer;
use queuey::rabbitmq::{RabbitMqBackend, RabbitMqOptions};
use queuey::store::RedisStore;

use crate::admin::{self, Admin};
use crate::cleanup;
use crate::figures::thousands;
use crate::fleet::{Fleet, Shared};
use crate::management;
use crate::offer::{Offered, offer};
use crate::partner::Partner;
use crate::queue::{self, PacingQueues};
use crate::report::{self, Row, Window};
use crate::settings::{Mode, Settings};
use crate::tally::Tally;
use crate::{BenchResult, Run, load_now};

/// What a mode has running: put here as soon as it starts, so that the
/// caller stops it whatever happens.
#[derive(Default)]
pub(crate) struct Rig {
    fleet: Fleet,
    producer: Option<Arc<RabbitMqBackend>>,
}

impl Rig {
    /// Stops the workers and closes every connection of the mode; what went
    /// wrong, if anything. Safe to call again.
    pub(crate) async fn stop(&mut self) -> Vec<String> {
        let mut problems = self.fleet.stop().await;
        if let Some(producer) = self.producer.take()
            && let Err(e) = producer.close().await
        {
            problems.push(format!("the producer: closing its connection: {e}"));
        }
        problems
    }
}

/// The names of one mode's queue and Redis keys.
pub(crate) struct Names {
    pub(crate) queue: String,
    pub(crate) prefix: String,
}

impl Names {
    pub(crate) fn new(run: &Run, mode: Mode) -> Names {
        Names {
            queue: format!("{}.{mode}", run.name),
            prefix: format!("{}{mode}:", run.redis_prefix),
        }
    }

    /// The queues `declare` made: the work queue, its dead-letter and
    /// suspect queues (hold queues are found by listing).
    fn declared(&self) -> Vec<String> {
        ["", ".dead", ".suspect"]
            .iter()
            .map(|suffix| format!("{}{suffix}", self.queue))
            .collect()
    }
}

/// Runs `mode` and returns its row; `rig` holds what runs meanwhile.
pub(crate) async fn measure(
    settings: &Settings,
    run: &Run,
    mode: Mode,
    admin: &Admin,
    rig: &mut Rig,
) -> BenchResult<Row> {
    let names = Names::new(run, mode);
    queue::use_queue(&names.queue, settings.prefetch());
    println!("## Mode `{mode}`: queue `{}`\n", names.queue);
    let load_start = load_now();
    let partner = Arc::new(Partner::new(settings.keys));
    let tally = Arc::new(Tally::new(settings.keys));
    let options = |name: String| {
        RabbitMqOptions::default()
            .connection_name(name)
            .control_stream(run.control_stream())
    };
    let shared = Shared {
        url: &settings.url,
        redis_url: &settings.redis_url,
        prefix: &names.prefix,
        options: &options,
        slots: settings.slots,
        partner: Arc::clone(&partner),
        tally: Arc::clone(&tally),
    };
    for index in 0..settings.workers {
        rig.fleet.start_one(&shared, index).await?;
    }
    let backend = Arc::new(
        RabbitMqBackend::with_options(
            settings.url.as_str(),
            options(format!("{}-producer", names.queue)),
        )
        .await?,
    );
    rig.producer = Some(Arc::clone(&backend));
    let builder = Producer::<PacingQueues, _>::builder(backend);
    let producer = match mode {
        Mode::Booked => {
            let store = RedisStore::builder(settings.redis_url.as_str())
                .prefix(names.prefix.as_str())
                .connect()
                .await
                .map_err(|e| format!("the producer: connecting to Redis: {e}"))?;
            builder.limit_store(store).build().await?
        }
        Mode::Unbooked => builder.build().await?,
    };
    // The workers' consumers are up before the first job.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;

    let mut offered = Offered::default();
    let pending = offer(settings, &producer, &mut offered).await;
    // The window ends: what it counted.
    let end = Instant::now();
    let counts = tally.counts();
    let load_end = load_now();
    offered.finish(pending).await;
    let window = Window {
        start: offered.started.unwrap_or(end),
        end,
    };
    let starts = tally.starts();
    let mut row = Row::new(
        mode,
        window,
        offered.jobs,
        counts,
        &partner.admitted(),
        &starts,
        settings.keys,
        (load_start, load_end),
    );

    for problem in rig.stop().await {
        eprintln!("pacing: {mode}: {problem}");
    }
    let lifetime = tally.counts();
    let taken = rig.fleet.jobs_started();
    tokio::time::sleep(management::STATS_LAG).await;
    let broker = management::deliveries(&settings.url, &names.queue).await;
    row.dead = admin.backlog(&format!("{}.dead", names.queue)).await.ok();
    let waiting = waiting(admin, &run.vhost, &names.queue).await;

    let (mean_wait, longest_wait) = report::waits(&starts, window);
    println!(
        "- window: {:.1} s from the first enqueue; {} jobs offered, {} enqueues failed{}",
        window.end.duration_since(window.start).as_secs_f64(),
        thousands(offered.jobs as f64),
        offered.failed,
        offered
            .first_error
            .as_deref()
            .map_or(String::new(), |e| format!(" (first: {e})")),
    );
    println!(
        "- in the window: {} deliveries, {} finished: {:.2} deliveries per finished job; {} \
         `429`s; starts waited {:.1} s after their enqueue on average, {:.1} s at most",
        thousands(counts.deliveries as f64),
        thousands(counts.finished as f64),
        row.per_finished(),
        thousands(counts.refused as f64),
        mean_wait,
        longest_wait,
    );
    if let Some(minutes) = report::refusals_by_minute(&tally.refusals(), window) {
        let minutes: Vec<String> = minutes.iter().map(u64::to_string).collect();
        println!("- `429`s by minute of the window: {}", minutes.join(", "));
    }
    println!(
        "- deliveries over the queue's life (the window and the workers' stop): counted by the \
         layer {}, taken by the workers {}, made by the broker {}",
        thousands(lifetime.deliveries as f64),
        thousands(taken as f64),
        broker.map_or("n/a (management API not reachable)".to_owned(), |n| {
            thousands(n as f64)
        }),
    );
    println!(
        "- jobs finished by the stop {}; waiting on the broker then (work and hold queues) {}; \
         dead-lettered {}",
        thousands(lifetime.finished as f64),
        waiting.map_or("n/a".to_owned(), |n| thousands(n as f64)),
        row.dead.map_or("n/a".to_owned(), |n| n.to_string()),
    );
    println!(
        "- most calls admitted for one host in any second {}, most starts {}; {:.2} starts/s per \
         host",
        row.most_admitted, row.most_starts, row.start_rate
    );
    println!();
    Ok(row)
}

/// Jobs waiting in the mode's work queue and hold queues (not the dead
/// letters), or `None` if they could not be counted.
async fn waiting(admin: &Admin, vhost: &str, queue: &str) -> Option<u64> {
    let dead = format!("{queue}.dead");
    let mut total = 0;
    for name in admin::left_behind(vhost, queue).await? {
        if name != dead {
            total += u64::from(admin.backlog(&name).await.ok()?);
        }
    }
    Some(total)
}

/// Deletes the mode's queues and Redis keys; the rig must be stopped.
pub(crate) async fn clean_up(
    settings: &Settings,
    run: &Run,
    mode: Mode,
    admin: &Admin,
) -> BenchResult<()> {
    let names = Names::new(run, mode);
    let declared = names.declared();
    let queues = cleanup::delete_queues(admin, &run.vhost, &names.queue, &declared);
    let keys = cleanup::delete_keys(&settings.redis_url, &names.prefix);
    let (queues, keys) = tokio::join!(queues, keys);
    let holds = queues?.map_or(0, |listed| {
        listed
            .iter()
            .filter(|name| name.contains(".deferred."))
            .count()
    });
    println!(
        "- deleted: {} hold queues with the work queue, {} Redis keys\n",
        holds, keys?
    );
    Ok(())
}
