//! `queuey workers`.

use crate::out::{out, outln};
use std::time::Duration;

use crate::Result;
use crate::fleet;
use crate::time::format_duration_ms;
use clap::Args;

use super::Global;
use super::table::Table;

#[derive(Debug, Args)]
pub(crate) struct WorkersArgs {
    /// Mark jobs running longer than this (`90s`, `5m`, `1h`).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = humantime::parse_duration)]
    long: Duration,
    /// Only workers that consume this queue.
    #[arg(long, value_name = "QUEUE")]
    queue: Option<String>,
}

pub(crate) async fn run(global: &Global, args: WorkersArgs) -> Result<bool> {
    let mut workers = global
        .with_fleet("workers", async |f| f.workers().await)
        .await?;
    if let Some(queue) = &args.queue {
        workers.retain(|w| w.queues.iter().any(|q| q == queue));
    }
    global.print(&workers, || {
        if workers.is_empty() {
            outln!("no worker has sent a heartbeat in the last few intervals");
            return;
        }
        let mut table = Table::new([
            "WORKER",
            "VERSION",
            "QUEUES",
            "PAUSED",
            "CONNECTION",
            "BUSY",
            "UP",
        ]);
        for w in &workers {
            table.row(vec![
                fleet::label(w),
                w.version.clone(),
                w.queues.join(","),
                if w.paused.is_empty() {
                    "-".to_owned()
                } else {
                    w.paused.join(",")
                },
                w.connection.clone(),
                format!("{}/{}", w.running.len(), w.concurrency),
                format_duration_ms(w.at_ms.saturating_sub(w.started_at_ms)),
            ]);
        }
        out!("{}", table.render());
        let mut jobs = Table::new([
            "",
            "JOB",
            "TYPE",
            "QUEUE",
            "TENANT",
            "ATTEMPT",
            "WORKER",
            "RUNNING FOR",
            "PROGRESS",
        ]);
        let busy: Vec<_> = fleet::running_where(&workers, |_| true).collect();
        for &(worker, job) in &busy {
            let running = fleet::running_for(worker, job);
            jobs.row(vec![
                if running > args.long { "LONG" } else { "" }.to_owned(),
                job.job_id.to_string(),
                job.job_type.clone(),
                job.queue.clone(),
                job.tenant.clone().unwrap_or_else(|| "-".to_owned()),
                job.attempt.to_string(),
                fleet::label(worker),
                format_duration_ms(running.as_millis()),
                job.progress
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), ToString::to_string),
            ]);
        }
        if !busy.is_empty() {
            outln!();
            out!("{}", jobs.render());
        }
        let tenants = fleet::running_by_tenant(&workers, |_| true);
        if !tenants.is_empty() {
            let mut table = Table::new(["TENANT", "QUEUE", "RUNNING"]);
            for (tenant, queue, running) in tenants {
                table.row([tenant.to_owned(), queue.to_owned(), running.to_string()]);
            }
            outln!();
            out!("{}", table.render());
        }
        let limits = fleet::limits_by_key(&workers);
        if !limits.is_empty() {
            let mut table = Table::new(["LIMIT", "KEY", "RUNNING", "WAITING", "WAITS", "RATE"]);
            for seen in limits {
                let running = match seen.concurrency {
                    Some(limit) => format!("{}/{limit}", seen.running),
                    None => seen.running.to_string(),
                };
                table.row([
                    seen.name,
                    seen.key,
                    running,
                    seen.waiting.to_string(),
                    seen.waits.to_string(),
                    seen.rate.unwrap_or_else(|| "-".to_owned()),
                ]);
            }
            outln!();
            out!("{}", table.render());
        }
    });
    Ok(false)
}
