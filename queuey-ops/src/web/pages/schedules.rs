//! `/schedules`: the schedules of periodic jobs, their leaders and ticks.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Html;

use super::PageResult;
use crate::schedules;
use crate::time::{format_duration_ms, format_ms, now_ms};
use crate::web::App;
use crate::web::html::{esc, page};

/// `/schedules`: every schedule queue with its leader, the processes in
/// line, and the last and next tick; on a dashboard started with
/// `--queue`, only the schedules whose jobs go to those queues.
pub(crate) async fn schedules(State(app): State<Arc<App>>) -> PageResult {
    let mut listed = schedules::list(&app.mgmt, &app.amqp, &app.fleet).await?;
    listed.retain(|s| app.in_scope(&s.job_queue));
    let now = now_ms();
    let when = |ms: Option<i64>| match ms {
        Some(ms) if ms >= now => format!("{} (in {})", format_ms(ms), format_duration_ms(ms - now)),
        Some(ms) => format!("{} ({} ago)", format_ms(ms), format_duration_ms(now - ms)),
        None => "-".to_owned(),
    };
    let mut body = String::from(
        "<table id=\"schedules\"><tr><th>queue</th><th>schedule</th><th>every</th>\
         <th>leader</th><th>waiting</th><th>last tick</th><th>next tick</th></tr>",
    );
    for s in &listed {
        let leader = match &s.leader {
            Some(m) => esc(&m.label()),
            None => "<span class=bad>none: its ticks are not fired</span>".to_owned(),
        };
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{leader}</td><td class=n>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            esc(&s.job_queue),
            esc(&s.name),
            match &s.untrusted_status_from {
                Some(from) => format!(
                    "<span class=bad>status from untrusted user <code>{}</code>, not shown</span>",
                    esc(from)
                ),
                None => esc(s.schedule.as_deref().unwrap_or("-")),
            },
            s.waiting.len(),
            if s.last_tick_in_future {
                format!(
                    "{} <span class=bad>in the future</span>",
                    esc(&when(s.last_tick_ms))
                )
            } else {
                esc(&when(s.last_tick_ms))
            },
            esc(&when(s.next_tick_ms)),
        );
    }
    body.push_str("</table>");
    if listed.is_empty() {
        body.push_str(
            "<p class=note>No schedule queue (<code>{queue}.periodic.{name}</code>) in this \
             vhost.</p>",
        );
    }
    body.push_str(
        "<p class=note>Each schedule is a single-active-consumer queue: its leader is the \
         consumer the broker delivers to, the others wait to take over. The ticks are what the \
         leader last wrote, at least once a minute.</p>",
    );
    Ok(Html(page(
        &format!("Schedules on vhost {}", app.mgmt.vhost()),
        &body,
    )))
}
