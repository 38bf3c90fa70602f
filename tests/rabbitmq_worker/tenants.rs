//! Tenants sharing a sharded queue on the real broker: each tenant's jobs
//! wait in its own shard, busy tenants get starts by weight, and a
//! newcomer's job does not wait behind another tenant's backlog.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use queuey::prelude::*;
use queuey::queue::QueueConfig;
use queuey::shard::shard_for_key;
use serde::{Deserialize, Serialize};

use crate::scenario::{backend, unique_name, wait_for};

const SHARDS: u16 = 4;

fn fair_name() -> &'static str {
    static NAME: OnceLock<&'static str> = OnceLock::new();
    NAME.get_or_init(|| unique_name("tenants"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FairQueues {
    Reports,
}

impl Queues for FairQueues {
    const ALL: &'static [Self] = &[FairQueues::Reports];

    fn name(&self) -> &'static str {
        fair_name()
    }

    fn config(&self) -> QueueConfig {
        QueueConfig::new(self.name()).prefetch(32).shards(SHARDS)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Report {
    customer: String,
}

impl Job for Report {
    type Queues = FairQueues;
    type Output = ();
    const QUEUE: FairQueues = FairQueues::Reports;
    const NAME: &'static str = "report";

    fn tenant(&self) -> Option<String> {
        Some(self.customer.clone())
    }
}

/// `count` tenant names whose jobs land on different shards.
fn tenants(count: usize) -> Vec<String> {
    let mut names = Vec::new();
    let mut shards = Vec::new();
    for i in 0.. {
        let name = format!("tenant-{i}");
        let shard = shard_for_key(&name, SHARDS);
        if !shards.contains(&shard) {
            shards.push(shard);
            names.push(name);
        }
        if names.len() == count {
            return names;
        }
    }
    unreachable!("the loop returns once it has `count` names")
}

async fn enqueue(producer: &Producer<FairQueues, Arc<RabbitMqBackend>>, tenant: &str, jobs: u32) {
    let batch: Vec<Report> = (0..jobs)
        .map(|_| Report {
            customer: tenant.to_owned(),
        })
        .collect();
    for outcome in producer.enqueue_batch(&batch).await {
        outcome.expect("each job enqueued");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_share_a_sharded_queue_by_weight_and_a_newcomer_goes_ahead_of_a_backlog() {
    let broker = broker!("tenants_share_a_sharded_queue_by_weight");
    broker.track(fair_name());
    let backend = backend(&broker, "tenants", RabbitMqOptions::default()).await;
    let producer = Producer::<FairQueues, _>::new(backend.clone())
        .await
        .expect("declared");
    let names = tenants(4);
    let [heavy, b, c, newcomer] = [&names[0], &names[1], &names[2], &names[3]];
    enqueue(&producer, heavy, 600).await;
    enqueue(&producer, b, 100).await;
    enqueue(&producer, c, 100).await;

    // One job at a time, so the order of starts is the order of turns; the
    // 300th start enqueues the newcomer's one job. Each job takes 2 ms, and
    // the prefetch keeps every busy shard's next job at hand meanwhile.
    let starts: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = Arc::clone(&starts);
    let late = producer.clone();
    let arrival = newcomer.clone();
    let weighted = heavy.clone();
    let worker = Worker::<FairQueues, _>::builder(backend.clone())
        .concurrency(1)
        .tenant_weights(move |tenant| if tenant == weighted { 3 } else { 1 })
        .handler(handler_fn(move |job: Report, _: JobContext| {
            let started = {
                let mut log = log.lock().unwrap();
                log.push(job.customer);
                log.len()
            };
            let late = late.clone();
            let arrival = arrival.clone();
            async move {
                if started == 300 {
                    let job = Report { customer: arrival };
                    late.enqueue(&job).await.map_err(JobError::retryable)?;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
                Ok::<_, JobError>(())
            }
        }))
        .build()
        .await
        .expect("built");
    let handle = worker.handle();
    let running = tokio::spawn(worker.run());
    wait_for("every job", || handle.jobs_settled() == 801).await;
    handle.shutdown();
    running.await.unwrap().unwrap();

    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 801, "each job once");
    // While the three have backlogs: 3 : 1 : 1, within 5 points.
    let mut shares: HashMap<&str, usize> = HashMap::new();
    for tenant in &starts[..250] {
        *shares.entry(tenant.as_str()).or_default() += 1;
    }
    for (tenant, share) in [(heavy, 150), (b, 50), (c, 50)] {
        let got = shares.get(tenant.as_str()).copied().unwrap_or(0);
        assert!(
            got.abs_diff(share) <= 12,
            "{tenant}: {got} of the first 250 starts, expected {share}: {shares:?}"
        );
    }
    // The newcomer's job, enqueued at start 300 with about 400 of the
    // heavy tenant's jobs still queued, starts within a few turns.
    let at = starts
        .iter()
        .position(|tenant| tenant == newcomer)
        .expect("the newcomer's job ran");
    let heavy_after = starts[at..].iter().filter(|t| *t == heavy).count();
    assert!(
        (300..330).contains(&at) && heavy_after > 300,
        "the newcomer's job was start {at}, with {heavy_after} of the backlog after it"
    );
}
