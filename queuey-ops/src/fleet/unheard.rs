//! Consumers nobody hears: RabbitMQ counts consumers on a queue, but no
//! worker whose heartbeats this tool reads consumes it. Its workers follow
//! another control stream, log in as a user the tool does not trust, or
//! run without the control plane; either way a pause or resume sent to
//! this tool's stream would reach none of them.

use std::fmt;

use crate::mgmt::Management;

/// A queue RabbitMQ shows consumed by workers this tool does not hear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unheard {
    queue: String,
    consumers: u32,
    control_stream: String,
    others: Vec<String>,
}

impl Unheard {
    /// `Some` when RabbitMQ counts `consumers` on `queue` but none of the
    /// workers heard on `control_stream` (`consuming`) consumes it.
    pub(crate) fn of(
        queue: &str,
        consumers: u32,
        consuming: &[String],
        control_stream: &str,
    ) -> Option<Unheard> {
        (consumers > 0 && consuming.is_empty()).then(|| Unheard {
            queue: queue.to_owned(),
            consumers,
            control_stream: control_stream.to_owned(),
            others: Vec::new(),
        })
    }

    /// Adds the other control streams on the broker (by their heartbeat
    /// streams; none when the listing fails): the unheard may follow one.
    pub(crate) async fn look_elsewhere(mut self, mgmt: &Management) -> Self {
        let suffix = queuey_rabbitmq::topology::HEARTBEAT_STREAM_SUFFIX;
        let Ok(queues) = mgmt.queues(None).await else {
            return self;
        };
        self.others = queues
            .iter()
            .filter(|q| q.queue_type.as_deref() == Some("stream"))
            .filter_map(|q| q.name.strip_suffix(suffix))
            .filter(|stream| *stream != self.control_stream)
            .map(str::to_owned)
            .collect();
        self
    }
}

/// Why the broker and the heartbeats disagree, and what to do; unescaped.
impl fmt::Display for Unheard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let heartbeats = queuey_rabbitmq::topology::heartbeat_stream_name(&self.control_stream);
        write!(
            f,
            "RabbitMQ shows {} consumer(s) of `{}`, but no worker whose heartbeats this tool \
             reads on `{heartbeats}` consumes it: its workers may follow another control stream",
            self.consumers, self.queue
        )?;
        if !self.others.is_empty() {
            let others: Vec<String> = self.others.iter().map(|s| format!("`{s}`")).collect();
            write!(
                f,
                " (this broker has other control streams: {})",
                others.join(", ")
            )?;
        }
        write!(
            f,
            " (give it with --control-stream), or log in as a RabbitMQ user this tool does not \
             trust (give it with --worker-user), or run without the control plane"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_consumers_nobody_hears_are_reported() {
        assert_eq!(Unheard::of("q", 0, &[], "queuey.control"), None);
        assert_eq!(
            Unheard::of("q", 2, &["host:1".to_owned()], "queuey.control"),
            None
        );
        let unheard = Unheard::of("q", 2, &[], "queuey.control").expect("unheard");
        let text = unheard.to_string();
        assert!(text.contains("2 consumer(s) of `q`"), "{text}");
        assert!(text.contains("`queuey.control.workers`"), "{text}");
        assert!(text.contains("--worker-user"), "{text}");
        assert!(!text.contains("other control streams"), "{text}");
    }

    #[test]
    fn other_control_streams_are_named() {
        let mut unheard = Unheard::of("q", 1, &[], "queuey.control").expect("unheard");
        unheard.others = vec!["billing.control".to_owned()];
        let text = unheard.to_string();
        assert!(
            text.contains("this broker has other control streams: `billing.control`"),
            "{text}"
        );
    }
}
