//! The dashboard's pages and actions, one module each, and what they share
//! here: the error page, the allow-list, the CSRF check, exact counts.

mod actions;
mod control;
mod index;
mod job;
mod metrics;
mod queue;
mod schedules;
mod workers;

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::{Markup, html};

use super::App;
use super::html::{page, shown};
use super::session::Session;
use crate::amqp::QueueCounts;
use crate::dead::DeadQueues;
use crate::error::OpsError;
use crate::shards::{self, Member, Shards};

/// The dashboard's pages and actions.
pub(super) fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/", get(index::index))
        .route("/schedules", get(schedules::schedules))
        .route("/workers", get(workers::workers))
        .route("/metrics", get(metrics::metrics))
        .route("/job", get(job::job))
        .route("/job/cancel", post(control::cancel))
        .route("/queue/{queue}/pause", post(control::switch))
        .route("/queue/{queue}/resume", post(control::switch))
        .route("/queue/{queue}", get(queue::queue))
        .route("/queue/{queue}/dead/{id}", get(queue::show))
        .route("/queue/{queue}/redrive", post(actions::redrive))
        .route("/queue/{queue}/purge", post(actions::purge))
}

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
    /// The dead-letter queues of `queue` and of its shards.
    async fn dead_queues(&self, queue: &str) -> Result<(Shards, DeadQueues), OpsError> {
        let shards = shards::discover(&self.amqp, queue).await?;
        let queues = DeadQueues::of(&shards, &self.config.dead_suffix)?;
        Ok((shards, queues))
    }

    /// The queues the dashboard may show among `infos`: `--queue`'s, else
    /// every work queue (shards under theirs).
    fn queues_of(&self, infos: &[crate::mgmt::QueueInfo]) -> Vec<String> {
        if !self.config.queues.is_empty() {
            return self.config.queues.clone();
        }
        crate::queues::work_queues(infos, &self.config.dead_suffix)
    }

    /// The exact counts of `shards`' members and their dead-letter queues.
    async fn member_counts(
        &self,
        shards: &Shards,
    ) -> Result<Vec<(Member, Option<QueueCounts>, Option<u32>)>, OpsError> {
        let mut out = Vec::new();
        for member in shards.members() {
            let work = self.amqp.counts(&member.queue).await?;
            let dead_queue = crate::dead_queue_of(&member.queue, &self.config.dead_suffix)?;
            let dead = self.amqp.counts(&dead_queue).await?;
            out.push((member, work, dead.map(|c| c.messages)));
        }
        Ok(out)
    }

    /// Whether `queue` is one of the dashboard's; others are answered as if
    /// they did not exist.
    async fn admit(&self, queue: &str) -> Result<(), PageError> {
        let listed = &self.config.queues;
        let dq = crate::dead_queue_of(queue, &self.config.dead_suffix)?;
        let (work, dead) = if listed.is_empty() && dq != queue {
            (
                self.amqp.counts(queue).await?.is_some(),
                self.amqp.counts(&dq).await?.is_some(),
            )
        } else {
            (false, false)
        };
        let exists = |name: &str| (name == queue && work) || (name == dq && dead);
        if on_dashboard(listed, queue, &dq, exists) {
            return Ok(());
        }
        let shows = if listed.is_empty() {
            "the queues that have a dead-letter queue"
        } else {
            "only the queues it was started with (--queue)"
        };
        Err(PageError(
            StatusCode::NOT_FOUND,
            format!("queue `{queue}` is not on this dashboard: it shows {shows}"),
        ))
    }

    /// Whether `queue`'s jobs and schedules are within reach (with
    /// `--queue`, only those queues' and their shards').
    fn in_scope(&self, queue: &str) -> bool {
        self.config.queues.is_empty() || on_dashboard(&self.config.queues, queue, "", |_| false)
    }

    fn check_csrf(&self, session: &Session, given: &str) -> Result<(), PageError> {
        let stale = "the form's CSRF token is missing or stale: reload the page and try again";
        let ok = self.sessions.verify(session, given);
        ok.then_some(())
            .ok_or_else(|| PageError(StatusCode::FORBIDDEN, stale.into()))
    }
}

/// Whether `queue` is one of `listed` or a shard of one, or with none
/// listed, a work queue that `exists` with its `dead_queue`.
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
