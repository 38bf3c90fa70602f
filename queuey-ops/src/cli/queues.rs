//! `queuey queues`.

use crate::Result;
use crate::out::{out, outln};
use crate::queues::{self, QueueLine, Rule};
use clap::Args;

use super::Global;
use super::table::Table;

#[derive(Debug, Args)]
pub(crate) struct QueuesArgs {
    /// Work queues to show (a sharded queue's name covers its lane and
    /// every shard) [default: the fleet's, as the dashboard's overview
    /// lists them].
    #[arg(value_name = "QUEUE", conflicts_with = "all")]
    queues: Vec<String>,
    /// Every queue with a dead-letter queue, not only those the fleet's
    /// workers consume.
    #[arg(long)]
    all: bool,
}

pub(crate) async fn run(global: &Global, args: QueuesArgs) -> Result<bool> {
    let infos = global.management()?.queues(None).await?;
    let (state, workers) = global
        .with_fleet("queues", async |f| {
            Ok((f.state().await?, f.workers().await?))
        })
        .await?;
    let named = !args.queues.is_empty();
    let every = if named {
        args.queues
    } else {
        queues::work_queues(&infos, &global.dead_suffix)
    };
    let (chosen, rule) = queues::choose(named, every, &workers, args.all);
    let lines = queues::lines(&infos, &chosen, &global.dead_suffix, &state)?;
    global.print(&lines, || {
        out!("{}", render(&lines));
        outln!("{}", chosen_by(&rule));
    });
    Ok(false)
}

/// The sentence under the table that says which queues it lists.
fn chosen_by(rule: &Rule) -> String {
    match rule {
        Rule::AllowList => "the queues named".to_owned(),
        Rule::Fleet { workers, unlisted } => {
            let mut text = format!(
                "the queues the fleet's {workers} worker(s) consume (--all lists every queue \
                 with a dead-letter queue)"
            );
            if !unlisted.is_empty() {
                let names: Vec<_> = unlisted.iter().map(|q| crate::escape::line(q)).collect();
                text.push_str(&format!(
                    "; consumed but without a dead-letter queue: {}",
                    names.join(", ")
                ));
            }
            text
        }
        Rule::NoWorkerHeard => "no worker heard from: every queue with a dead-letter queue \
                                (the workers' heartbeats name the fleet's queues)"
            .to_owned(),
        Rule::Everything => "every queue with a dead-letter queue".to_owned(),
    }
}

/// The table of `lines`, or a sentence when there is none.
fn render(lines: &[QueueLine]) -> String {
    if lines.is_empty() {
        return "no work queue with a dead-letter queue in this vhost\n".to_owned();
    }
    let count = |n: Option<u64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    let mut table = Table::new([
        "QUEUE",
        "SHARDS",
        "READY",
        "UNACKED",
        "CONSUMERS",
        "PAUSED",
        "DEAD",
    ]);
    for line in lines {
        table.row(vec![
            line.queue.clone(),
            if line.shards == 0 {
                "-".to_owned()
            } else {
                line.shards.to_string()
            },
            count(line.ready),
            count(line.unacked),
            count(line.consumers),
            if line.paused { "yes" } else { "no" }.to_owned(),
            count(line.dead),
        ]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_queue_is_one_row_and_a_missing_count_a_dash() {
        let line = QueueLine {
            queue: "emails\u{1b}[2J".into(),
            shards: 4,
            ready: Some(12),
            unacked: None,
            consumers: Some(2),
            paused: true,
            dead: Some(1),
        };
        let text = render(&[line]);
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            [
                vec![
                    "QUEUE",
                    "SHARDS",
                    "READY",
                    "UNACKED",
                    "CONSUMERS",
                    "PAUSED",
                    "DEAD"
                ],
                vec![r"emails\e[2J", "4", "12", "-", "2", "yes", "1"],
            ]
        );
        assert!(render(&[]).starts_with("no work queue"));
        let rule = Rule::Fleet {
            workers: 2,
            unlisted: vec!["theirs\u{7}".into()],
        };
        let said = chosen_by(&rule);
        assert!(
            said.starts_with("the queues the fleet's 2 worker(s)"),
            "{said}"
        );
        assert!(
            said.ends_with(r"without a dead-letter queue: theirs\x07"),
            "{said}"
        );
    }
}
