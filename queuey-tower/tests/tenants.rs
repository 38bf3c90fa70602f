//! Tenants sharing a sharded queue, on the memory backend and tokio's
//! paused clock: each tenant's jobs go to its own shard, and the worker
//! shares its turns between shards by the tenants' weights.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuey_core::memory::MemoryBackend;
use queuey_core::shard::{shard_for_key, shard_name};
use queuey_core::{EnqueueOptions, Job, JobContext, JobError, JobHandler, Producer, Queues};
use queuey_tower::Worker;
use queuey_tower::testing::TestRun;
use serde::{Deserialize, Serialize};

const SHARDS: u16 = 8;

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "fair")]
enum FairQueues {
    #[queue(shards = 8, prefetch = 4)]
    Reports,
}

#[derive(Job, Debug, Clone, Serialize, Deserialize)]
#[job(queue = FairQueues::Reports, name = "report", tenant = customer)]
struct Report {
    customer: String,
    n: u32,
}

/// `count` tenant names whose jobs land on different shards.
fn tenants(count: usize) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut shards = Vec::new();
    for i in 0.. {
        let name = format!("tenant-{i}");
        let shard = shard_for_key(&name, SHARDS);
        if !shards.contains(&shard) {
            shards.push(shard);
            names.push(name);
        }
        if names.len() == count {
            break;
        }
    }
    names
}

/// Records each start's tenant; runs each job for 10 ms.
/// The `flood_at`-th start enqueues one job of `newcomer`.
#[derive(Clone, Default)]
struct Record {
    starts: Arc<Mutex<Vec<String>>>,
    newcomer: Option<(usize, String, Producer<FairQueues, Arc<MemoryBackend>>)>,
}

impl JobHandler for Record {
    type Job = Report;

    async fn handle(&self, job: Report, _: JobContext) -> Result<(), JobError> {
        let started = {
            let mut starts = self.starts.lock().unwrap();
            starts.push(job.customer);
            starts.len()
        };
        if let Some((at, newcomer, producer)) = &self.newcomer
            && started == *at
        {
            let job = Report {
                customer: newcomer.clone(),
                n: 0,
            };
            producer.enqueue(&job).await.map_err(JobError::retryable)?;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        Ok(())
    }
}

async fn producer(backend: &Arc<MemoryBackend>) -> Producer<FairQueues, Arc<MemoryBackend>> {
    Producer::<FairQueues, _>::builder(Arc::clone(backend))
        .build()
        .await
        .unwrap()
}

async fn enqueue(producer: &Producer<FairQueues, Arc<MemoryBackend>>, tenant: &str, jobs: u32) {
    for n in 0..jobs {
        let job = Report {
            customer: tenant.to_owned(),
            n,
        };
        producer.enqueue(&job).await.unwrap();
    }
}

fn counts<'a>(starts: impl Iterator<Item = &'a String>) -> HashMap<&'a str, usize> {
    let mut counts = HashMap::new();
    for tenant in starts {
        *counts.entry(tenant.as_str()).or_default() += 1;
    }
    counts
}

#[tokio::test(start_paused = true)]
async fn busy_tenants_share_starts_by_weight_and_a_lone_one_gets_them_all() {
    let names = tenants(3);
    let [heavy, b, c] = [&names[0], &names[1], &names[2]];
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(&backend).await;
    enqueue(&producer, heavy, 400).await;
    enqueue(&producer, b, 50).await;
    enqueue(&producer, c, 50).await;
    // Each tenant's jobs wait in its own shard.
    for (tenant, jobs) in [(heavy, 400), (b, 50), (c, 50)] {
        let shard = shard_name("fair.reports", shard_for_key(tenant, SHARDS));
        assert_eq!(backend.ready_count(&shard), jobs);
    }
    let record = Record::default();
    let weighted = heavy.clone();
    let worker = Worker::<FairQueues, _>::builder(Arc::clone(&backend))
        .concurrency(1)
        .tenant_weights(move |tenant| if tenant == weighted { 3 } else { 1 })
        .handler(record.clone())
        .build()
        .await
        .unwrap();
    TestRun::new(worker)
        .until_finished(500)
        .run()
        .await
        .unwrap();

    let starts = record.starts.lock().unwrap();
    assert_eq!(starts.len(), 500);
    // While all three have work: 3 : 1 : 1 of the starts.
    let shared = counts(starts[..250].iter());
    for (tenant, share) in [(heavy, 150), (b, 50), (c, 50)] {
        let got = shared[tenant.as_str()];
        assert!(
            got.abs_diff(share) <= 2,
            "{tenant}: {got} of the first 250 starts, expected {share}: {shared:?}"
        );
    }
    // Then the heavy tenant alone: every start is its own.
    assert!(starts[252..].iter().all(|tenant| tenant == heavy));
}

#[tokio::test(start_paused = true)]
async fn a_newcomer_starts_next_however_long_the_backlog_ahead_of_it() {
    let names = tenants(2);
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(&backend).await;
    enqueue(&producer, &names[0], 1_000).await;
    let record = Record {
        newcomer: Some((100, names[1].clone(), producer.clone())),
        ..Record::default()
    };
    let worker = Worker::<FairQueues, _>::builder(Arc::clone(&backend))
        .concurrency(2)
        .handler(record.clone())
        .build()
        .await
        .unwrap();
    TestRun::new(worker)
        .until_finished(1_001)
        .run()
        .await
        .unwrap();

    let starts = record.starts.lock().unwrap();
    let at = starts
        .iter()
        .position(|tenant| *tenant == names[1])
        .expect("the newcomer's job ran");
    // Enqueued by the 100th start, it waits for one slot to free, not for
    // the 900 jobs queued before it.
    assert!(
        (100..=103).contains(&at),
        "the newcomer's job was start {at}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_enqueue_option_wins_over_the_declared_tenant() {
    let backend = Arc::new(MemoryBackend::new());
    let producer = producer(&backend).await;
    let names = tenants(2);
    let job = Report {
        customer: names[0].clone(),
        n: 0,
    };
    producer
        .enqueue_with(&job, EnqueueOptions::default().tenant(names[1].clone()))
        .await
        .unwrap();
    let shard = shard_name("fair.reports", shard_for_key(&names[1], SHARDS));
    assert_eq!(backend.ready_count(&shard), 1);
}
