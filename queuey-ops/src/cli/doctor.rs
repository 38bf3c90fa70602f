//! `queuey doctor`.

use crate::Result;
use crate::doctor::{self, Status};
use crate::out::outln;

use super::Global;

pub(crate) async fn run(global: &Global) -> Result<bool> {
    let scrub = global.scrubber();
    let checks: Vec<_> = doctor::doctor(
        &global.url,
        global.mgmt_url.as_deref(),
        &global.tls(),
        &global.dead_suffix,
        &global.deferred_suffix,
    )
    .await
    .into_iter()
    .map(|mut c| {
        c.detail = scrub(&c.detail);
        c
    })
    .collect();
    global.print(&checks, || {
        for c in &checks {
            let mark = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            outln!("{mark}  {:<19} {}", c.name, crate::escape::line(&c.detail));
        }
    });
    Ok(checks.iter().any(|c| c.status == Status::Fail))
}
