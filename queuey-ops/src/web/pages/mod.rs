//! The dashboard's pages and actions: the index (`index`), a queue's page
//! and one dead letter (`queue`), the schedules of periodic jobs
//! (`schedules`), redrive and purge (`actions`), and what
//! they share here: the error page, the allow-list, the CSRF check.

mod actions;
mod control;
mod index;
mod metrics;
mod queue;
mod schedules;
mod workers;

use std::collections::HashSet;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::App;
use super::html::{page, shown};
use super::session::Session;
use crate::dead::DeadQueues;
use crate::error::OpsError;
use crate::shards::{self, Shards};
use crate::topology::{QueueSpec, TopologySpec};

pub(crate) use actions::{purge, redrive};
pub(crate) use control::{cancel, pause, resume};
pub(crate) use index::index;
pub(crate) use metrics::metrics;
pub(crate) use queue::{queue, show};
pub(crate) use schedules::schedules;
pub(crate) use workers::workers;

/// Dead letters read for one page view at most.
const READ_CAP: usize = 10_000;
/// Dead letters listed one by one.
const LISTED: usize = 100;

/// An error shown as a page.
pub(crate) struct PageError(pub(crate) StatusCode, pub(crate) String);

impl From<OpsError> for PageError {
    fn from(e: OpsError) -> Self {
        let status = match e {
            OpsError::UnknownQueue(_) | OpsError::NotFound { .. } => StatusCode::NOT_FOUND,
            OpsError::Invalid(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        PageError(status, e.to_string())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let body = html! {
            p.bad #error { (shown(&self.1)) }
            p { a href="/" { "back" } }
        };
        (self.0, page("Error", body)).into_response()
    }
}

type PageResult = Result<Markup, PageError>;

impl App {
    fn dead_queue(&self, queue: &str) -> Result<String, OpsError> {
        crate::dead_queue_of(queue, &self.config.dead_suffix)
    }

    /// The dead-letter queues of `queue` and of its shards, found over
    /// AMQP ([`shards::discover`]).
    async fn dead_queues(&self, queue: &str) -> Result<(Shards, DeadQueues), OpsError> {
        let shards = shards::discover(&self.amqp, queue).await?;
        let queues = DeadQueues::of(&shards, &self.config.dead_suffix)?;
        Ok((shards, queues))
    }

    /// The queues the dashboard shows, among `infos` (the broker's
    /// queues): those of `--queue` when given, else every work queue that
    /// has its dead-letter queue and is not a shard of another one shown
    /// (a sharded queue's shards are shown under it).
    fn queues_of(&self, infos: &[crate::mgmt::QueueInfo]) -> Vec<String> {
        if !self.config.queues.is_empty() {
            return self.config.queues.clone();
        }
        let suffix = &self.config.dead_suffix;
        let names: HashSet<&str> = infos.iter().map(|i| i.name.as_str()).collect();
        let exists = |n: &str| names.contains(n);
        infos
            .iter()
            .filter_map(|i| i.name.strip_suffix(suffix.as_str()))
            .filter(|q| {
                self.dead_queue(q)
                    .is_ok_and(|dq| on_dashboard(&[], q, &dq, exists))
                    && !shards::is_listed_shard(q, exists)
            })
            .map(str::to_owned)
            .collect()
    }

    /// The queues the dashboard shows, read from the management API.
    async fn shown_queues(&self) -> Result<Vec<String>, OpsError> {
        let infos = self.mgmt.queues(None).await?;
        Ok(self.queues_of(&infos))
    }

    /// The queue set the topology section checks `queue` against: the
    /// configured one, else queuey's defaults with the `shards` found.
    fn spec_for(&self, queue: &str, shards: u16) -> (TopologySpec, bool) {
        let configured = self
            .config
            .topology
            .as_ref()
            .and_then(|t| t.queues.iter().find(|q| q.name == queue).map(|q| (t, q)));
        match configured {
            Some((t, q)) => (
                TopologySpec {
                    dead_suffix: t.dead_suffix.clone(),
                    deferred_suffix: t.deferred_suffix.clone(),
                    suspect_suffix: t.suspect_suffix.clone(),
                    queues: vec![q.clone()],
                },
                true,
            ),
            None => (
                TopologySpec {
                    dead_suffix: self.config.dead_suffix.clone(),
                    deferred_suffix: self.config.deferred_suffix.clone(),
                    suspect_suffix: crate::DEFAULT_SUSPECT_SUFFIX.to_owned(),
                    queues: vec![QueueSpec {
                        shards: shards.max(1),
                        ..QueueSpec::new(queue)
                    }],
                },
                false,
            ),
        }
    }

    /// Whether `queue` is one of the dashboard's: one of `--queue` or a
    /// shard of one when given, else a work queue that exists with its
    /// dead-letter queue (what the index lists, and the shards it lists
    /// under their queue). Others are answered as if they did not exist.
    async fn admit(&self, queue: &str) -> Result<(), PageError> {
        let refused = || {
            PageError(
                StatusCode::NOT_FOUND,
                format!(
                    "queue `{queue}` is not on this dashboard: it shows {}",
                    if self.config.queues.is_empty() {
                        "the queues that have a dead-letter queue"
                    } else {
                        "only the queues it was started with (--queue)"
                    }
                ),
            )
        };
        let dq = self.dead_queue(queue)?;
        let (work, dead) = if self.config.queues.is_empty() && dq != queue {
            (
                self.amqp.counts(queue).await?.is_some(),
                self.amqp.counts(&dq).await?.is_some(),
            )
        } else {
            (false, false)
        };
        let exists = |name: &str| (name == queue && work) || (name == dq && dead);
        if on_dashboard(&self.config.queues, queue, &dq, exists) {
            Ok(())
        } else {
            Err(refused())
        }
    }

    /// Whether the jobs and schedules of `queue` are within the
    /// dashboard's reach: with `--queue`, those of the queues given and
    /// their shards only; without, every queue's.
    fn in_scope(&self, queue: &str) -> bool {
        self.config.queues.is_empty() || on_dashboard(&self.config.queues, queue, "", |_| false)
    }

    fn check_csrf(&self, session: &Session, given: &str) -> Result<(), PageError> {
        if self.sessions.verify(session, given) {
            Ok(())
        } else {
            Err(PageError(
                StatusCode::FORBIDDEN,
                "the form's CSRF token is missing or stale: reload the page and try again".into(),
            ))
        }
    }
}

/// Whether `queue` (whose dead-letter queue is `dead_queue`) is one of the
/// dashboard's: one of `listed` or a shard of one (`NAME.s{i}`), or with
/// none listed, a work queue that `exists` with its dead-letter queue.
fn on_dashboard(
    listed: &[String],
    queue: &str,
    dead_queue: &str,
    exists: impl Fn(&str) -> bool,
) -> bool {
    if listed.is_empty() {
        dead_queue != queue && exists(queue) && exists(dead_queue)
    } else {
        let lane = shards::parse_shard_name(queue).map(|(lane, _)| lane);
        listed
            .iter()
            .any(|q| q == queue || lane == Some(q.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listed_queues_are_the_dashboards_and_no_other() {
        let listed = vec!["a".to_owned()];
        let everything = |_: &str| true;
        assert!(on_dashboard(&listed, "a", "a.dead", everything));
        for other in ["b", "a.dead", "A", "a ", "b.s0", "a.s01", "a.dead.s0"] {
            assert!(
                !on_dashboard(&listed, other, "x.dead", everything),
                "{other}"
            );
        }
        // A listed queue's shards are on the dashboard with it.
        assert!(on_dashboard(&listed, "a.s3", "a.s3.dead", everything));
    }

    #[test]
    fn with_none_listed_every_queue_with_a_dead_letter_queue_is() {
        let existing = ["a", "a.dead", "b", "c.dead"];
        let exists = |n: &str| existing.contains(&n);
        assert!(on_dashboard(&[], "a", "a.dead", exists));
        assert!(
            !on_dashboard(&[], "b", "b.dead", exists),
            "no dead-letter queue"
        );
        assert!(!on_dashboard(&[], "c", "c.dead", exists), "no work queue");
        assert!(
            !on_dashboard(&[], "a.dead", "a.dead", exists),
            "a dead-letter queue is not a work queue"
        );
    }
}
