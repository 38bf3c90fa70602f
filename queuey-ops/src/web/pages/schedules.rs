//! `/schedules`: the schedules of periodic jobs, their leaders and ticks.

use std::sync::Arc;

use axum::extract::State;
use maud::html;

use super::PageResult;
use crate::schedules;
use crate::time::{self, now_ms};
use crate::web::App;
use crate::web::html::{heads, nav, page, shown};

/// `/schedules`: every schedule queue with its leader, the processes in
/// line, and the last and next tick; on a dashboard started with
/// `--queue`, only the schedules whose jobs go to those queues.
pub(crate) async fn schedules(State(app): State<Arc<App>>) -> PageResult {
    let mut listed = schedules::list(&app.mgmt, &app.amqp, &app.fleet).await?;
    listed.retain(|s| app.in_scope(&s.job_queue));
    let now = now_ms();
    let when = |ms: Option<i64>| ms.map_or_else(|| "-".to_owned(), |ms| time::when(ms, now));
    let body = html! {
        (nav(None))
        table #schedules {
            (heads(&[
                "queue", "schedule", "every", "leader", "waiting", "last tick", "next tick",
            ]))
            @for s in &listed {
                tr {
                    td { (shown(&s.job_queue)) }
                    td { (shown(&s.name)) }
                    td {
                        @match &s.untrusted_status_from {
                            Some(from) => span.bad {
                                "status from untrusted user " code { (shown(from)) } ", not shown"
                            },
                            None => (shown(s.schedule.as_deref().unwrap_or("-"))),
                        }
                    }
                    td {
                        @match &s.leader {
                            Some(m) => (shown(&m.label())),
                            None => span.bad { "none: its ticks are not fired" },
                        }
                    }
                    td.n { (s.waiting.len()) }
                    td {
                        (when(s.last_tick_ms))
                        @if s.last_tick_in_future { " " span.bad { "in the future" } }
                    }
                    td { (when(s.next_tick_ms)) }
                }
            }
        }
        @if listed.is_empty() {
            p.note {
                "No schedule queue (" code { "{queue}.periodic.{name}" } ") in this vhost."
            }
        }
        p.note {
            "Each schedule is a single-active-consumer queue: its leader is the consumer the \
             broker delivers to, the others wait to take over. The ticks are what the leader \
             last wrote, at least once a minute."
        }
    };
    Ok(page(
        &format!("Schedules on vhost {}", app.mgmt.vhost()),
        body,
    ))
}
