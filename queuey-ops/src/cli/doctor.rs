//! `queuey doctor`.

use std::process::ExitCode;

use crate::Result;
use crate::doctor::{self, Status};

use super::{EXIT_PROBLEM, Global, print_json};

pub(crate) async fn run(global: &Global) -> Result<ExitCode> {
    let checks = doctor::doctor(
        &global.url,
        global.mgmt_url.as_deref(),
        &global.tls(),
        &global.dead_suffix,
        &global.deferred_suffix,
    )
    .await;
    if global.json {
        let checks: Vec<_> = checks
            .iter()
            .cloned()
            .map(|mut c| {
                c.detail = global.scrub(&c.detail);
                c
            })
            .collect();
        print_json(&checks);
    } else {
        for c in &checks {
            let mark = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            let detail = global.scrub(&c.detail);
            println!("{mark}  {:<19} {}", c.name, crate::escape::line(&detail));
        }
    }
    Ok(if checks.iter().any(|c| c.status == Status::Fail) {
        ExitCode::from(EXIT_PROBLEM)
    } else {
        ExitCode::SUCCESS
    })
}
