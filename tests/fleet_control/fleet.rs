//! The parent's side: worker processes, what they print, and the producer
//! that drives them.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuey::prelude::*;
use queuey::queue::Namespace;
use queuey::rabbitmq::RabbitMqBackend;

use crate::child::{CHILD_ENV, FleetQueues, STREAM_ENV, options};
use crate::support::{Broker, within};

/// One line a process printed, with when the parent read it.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    pub(crate) pid: u32,
    pub(crate) at: Instant,
    pub(crate) words: Vec<String>,
}

/// Processes of one namespace; any still running are killed on drop.
pub(crate) struct Fleet {
    pub(crate) namespace: Namespace,
    pub(crate) stream: String,
    pub(crate) children: Vec<Child>,
    pub(crate) lines: Arc<Mutex<Vec<Line>>>,
    pub(crate) producer: Producer<FleetQueues, RabbitMqBackend>,
}

impl Fleet {
    /// A namespace and control stream of its own on `broker`, both tracked
    /// for deletion, and a producer on them.
    pub(crate) async fn new(broker: &Broker, label: &str) -> Fleet {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let namespace = Namespace::new(format!("queuey-test-{label}-{id}")).unwrap();
        for q in ["fctl.a", "fctl.b"] {
            let name = format!("{}.{q}", namespace.as_str());
            broker.track(&name);
            broker.track(&format!("{name}.dead"));
        }
        let stream = format!("queuey-test-control-{id}");
        broker.track(&stream);
        broker.track(&format!("{stream}.workers"));
        let backend = within(
            "the producer's backend connects",
            RabbitMqBackend::with_options(
                broker.url.as_str(),
                options(broker.connection_name(&format!("{label}-producer")))
                    .control_stream(stream.clone()),
            ),
        )
        .await
        .expect("connects");
        let producer = Producer::<FleetQueues, _>::builder(backend)
            .namespace(namespace.clone())
            .build()
            .await
            .expect("declares");
        Fleet {
            namespace,
            stream,
            children: Vec::new(),
            lines: Arc::default(),
            producer,
        }
    }

    /// The name of `queue` on the broker.
    pub(crate) fn name(&self, queue: FleetQueues) -> String {
        self.namespace.queue_name(&queue)
    }

    /// Starts a worker process; returns its pid once it is ready.
    pub(crate) async fn spawn(&mut self) -> u32 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "child::child_process",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD_ENV, self.namespace.as_str())
            .env(STREAM_ENV, &self.stream)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("a worker process starts");
        let pid = child.id();
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::clone(&self.lines);
        std::thread::spawn(move || {
            for text in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The test harness may have started the line already.
                let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
                let start = words
                    .iter()
                    .position(|w| {
                        matches!(
                            w.as_str(),
                            "STARTED" | "HANDLED" | "SIGNALLED" | "PAUSED" | "RESUMED" | "READY"
                        )
                    })
                    .unwrap_or(words.len());
                if start < words.len() {
                    lines.lock().unwrap().push(Line {
                        pid,
                        at: Instant::now(),
                        words: words[start..].to_vec(),
                    });
                }
            }
        });
        self.children.push(child);
        within("a worker process is ready", async {
            while !self.any(|l| l.pid == pid && l.words[0] == "READY") {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        pid
    }

    /// Whether any line so far matches.
    pub(crate) fn any(&self, f: impl Fn(&Line) -> bool) -> bool {
        self.lines.lock().unwrap().iter().any(f)
    }

    /// The lines so far that match.
    pub(crate) fn matching(&self, f: impl Fn(&Line) -> bool) -> Vec<Line> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| f(l))
            .cloned()
            .collect()
    }

    /// The pids of the processes still running.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Waits until every running process printed `word queue` after
    /// `since`; returns the latest of those times.
    pub(crate) async fn all_say(&self, word: &str, queue: &str, since: Instant) -> Instant {
        let pids = self.pids();
        within(&format!("every process says {word} {queue}"), async {
            loop {
                let said = self.matching(|l| {
                    l.at >= since
                        && l.words[0] == word
                        && l.words.get(1).map(String::as_str) == Some(queue)
                });
                if pids.iter().all(|p| said.iter().any(|l| l.pid == *p)) {
                    return said.iter().map(|l| l.at).max().unwrap();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    }

    /// Stops every process cleanly (closes their standard input) and waits
    /// for them to exit.
    pub(crate) async fn stop(&mut self) {
        for child in &mut self.children {
            drop(child.stdin.take());
        }
        within("the worker processes exit", async {
            for child in &mut self.children {
                while child.try_wait().unwrap().is_none() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        })
        .await;
        self.children.clear();
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
