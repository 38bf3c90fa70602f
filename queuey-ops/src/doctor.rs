//! `doctor`: can the tools and the workers reach the broker, and is it
//! healthy? Connectivity and credentials (the password is never shown),
//! heartbeat, broker version and what it implies, plugins, alarms.

use queuey_rabbitmq::HoldQueues;
use serde::Serialize;
use serde_json::Value;

use crate::amqp::Amqp;
use crate::holds::{Stall, effective, hold_mismatch, quorum_hold_of};
use crate::mgmt::{Management, QueueInfo};
use crate::time::format_duration_ms;
use crate::tls::TlsFiles;
use crate::topology::{
    AtRisk, BROKER_DEFAULT_LIMIT, LimitPolicy, broker_has_default_limit, control_stream_policies,
    limit_policies, version_numbers,
};

/// Whether the open connection to `url` is encrypted (an open `amqps://`
/// one was verified).
fn transport_check(url: &str) -> Check {
    if url.starts_with("amqps://") {
        ok("tls", "encrypted; the broker's certificate was verified")
    } else if names_this_machine(url) {
        ok(
            "tls",
            "plaintext to this machine (use amqps:// for a broker elsewhere)",
        )
    } else {
        warn(
            "tls",
            "plaintext: the password and every job cross the network in clear; use amqps:// \
             (RabbitMQ's TLS listener, port 5671 by default)",
        )
    }
}

/// Whether a URL's host is this machine (localhost or a loopback address).
fn names_this_machine(url: &str) -> bool {
    let Some(rest) = url.split_once("://").map(|(_, rest)| rest) else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        host_port.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// How a check came out: fine, works but read the detail, or broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    Ok,
    Warn,
    Fail,
}

/// One check of the report: what was found, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) status: Status,
    pub(crate) detail: String,
}

fn check(name: &'static str, status: Status, detail: impl Into<String>) -> Check {
    Check {
        name,
        status,
        detail: detail.into(),
    }
}

fn ok(name: &'static str, detail: impl Into<String>) -> Check {
    check(name, Status::Ok, detail)
}

fn warn(name: &'static str, detail: impl Into<String>) -> Check {
    check(name, Status::Warn, detail)
}

fn fail(name: &'static str, detail: impl Into<String>) -> Check {
    check(name, Status::Fail, detail)
}

/// Runs every check against the broker at `url` and its management API
/// (`mgmt_base`, else found from `url`).
pub(crate) async fn doctor(
    url: &str,
    mgmt_base: Option<&str>,
    tls: &TlsFiles,
    dead_suffix: &str,
    deferred_suffix: &str,
) -> Vec<Check> {
    let mut out = Vec::new();
    let name = format!("queuey-doctor-{}", std::process::id());
    // Only this connection has it: if the management API sees it, both
    // speak for the same broker and vhost.
    let probe = format!("queuey-doctor-probe-{}", uuid::Uuid::new_v4().simple());
    let mut opened = None;
    match Amqp::connect_tls(url, &name, tls).await {
        Ok(amqp) => {
            let status = amqp.connection().status();
            out.push(ok(
                "amqp",
                format!(
                    "connected to {} as `{}` (vhost `{}`)",
                    amqp.url(),
                    status.username(),
                    status.vhost()
                ),
            ));
            out.push(transport_check(url));
            let heartbeat = amqp.connection().configuration().heartbeat();
            out.push(if heartbeat == 0 {
                warn(
                    "heartbeat",
                    "heartbeats are off: a dead peer goes unnoticed until TCP gives up",
                )
            } else {
                ok("heartbeat", format!("{heartbeat}s negotiated"))
            });
            if status.blocked() {
                out.push(fail(
                    "publishing",
                    "the broker blocks publishers (a memory or disk alarm)",
                ));
            }
            let declared = amqp.declare_exclusive(&probe).await.is_ok();
            opened = Some((amqp, declared));
        }
        Err(e) => out.push(fail(
            "amqp",
            format!("{e}; check the host, port, vhost and credentials"),
        )),
    }
    let suffixes = (dead_suffix, deferred_suffix);
    out.extend(management_checks(url, mgmt_base, tls, suffixes, &probe, &opened).await);
    if let Some((amqp, _)) = opened {
        amqp.close().await;
    }
    out
}

/// The checks through the management API; `opened`: the AMQP connection,
/// and whether it declared `probe`.
async fn management_checks(
    url: &str,
    mgmt_base: Option<&str>,
    tls: &TlsFiles,
    (dead_suffix, deferred_suffix): (&str, &str),
    probe: &str,
    opened: &Option<(Amqp, bool)>,
) -> Vec<Check> {
    let mgmt = match Management::for_amqp_url_tls(url, mgmt_base, tls) {
        Ok(m) => m,
        Err(e) => return vec![fail("management", e.to_string())],
    };
    let overview = match mgmt.overview().await {
        Ok(v) => v,
        Err(e) => {
            let needed = "needed by `holds`, `topology` and the dashboard";
            return vec![fail("management", format!("{e} ({needed})"))];
        }
    };
    let mut out = Vec::new();
    let version = overview["rabbitmq_version"]
        .as_str()
        .unwrap_or("?")
        .to_owned();
    out.push(ok(
        "management",
        format!(
            "{} answers: RabbitMQ {version}, Erlang {}, cluster `{}`",
            mgmt.base(),
            overview["erlang_version"].as_str().unwrap_or("?"),
            overview["cluster_name"].as_str().unwrap_or("?")
        ),
    ));
    if let Some((_, true)) = opened {
        out.push(same_broker_check(mgmt.base(), mgmt.queue(probe).await));
    }
    if !mgmt.base().starts_with("https://") && !names_this_machine(mgmt.base()) {
        out.push(warn(
            "management tls",
            format!(
                "{} is plain http: the credentials cross the network in clear; serve the \
                 management API over https (management.ssl.*) and give --mgmt-url https://…",
                mgmt.base()
            ),
        ));
    }
    out.push(version_check(&version));
    out.push(match mgmt.deprecated_features().await {
        Ok(features) => deprecated_features_check(&version, features.as_deref()),
        Err(e) => warn("deprecated features", format!("could not read them: {e}")),
    });
    out.push(quorum_holds_check(&version));
    match mgmt.queues(None).await {
        Ok(queues) => {
            let own = queue_consumer_timeouts(&queues);
            out.push(consumer_timeout_check(&version, Some(&own)));
            out.push(delivery_limit_check(
                &version,
                &limit_policies(&queues, dead_suffix),
            ));
            out.push(control_stream_bound_check(&control_stream_policies(
                &queues,
            )));
            out.push(stalled_holds_check(&mgmt, &quorum_holds(&queues, deferred_suffix)).await);
        }
        Err(e) => {
            out.push(consumer_timeout_check(&version, None));
            out.push(warn(
                "delivery limits",
                format!("could not list the queues: {e}"),
            ));
        }
    }
    if let Ok(nodes) = mgmt.nodes().await {
        out.push(plugins_check(&nodes));
        out.extend(alarm_checks(&nodes));
    }
    if let Ok(Some(vhost)) = mgmt.vhost_info().await {
        let dqt = vhost["default_queue_type"].as_str().unwrap_or("undefined");
        out.push(if dqt == "quorum" || dqt == "stream" {
            warn(
                "default queue type",
                format!(
                    "vhost `{}` defaults to {dqt} queues; queuey declares classic explicitly, \
                     but queues declared by other tools without a type become {dqt}",
                    mgmt.vhost()
                ),
            )
        } else {
            ok("default queue type", format!("{dqt} (classic)"))
        });
    }
    out
}

/// Whether the management API at `base` speaks for the AMQP connection's
/// broker: `found` is its answer for the queue only that one declared.
pub(crate) fn same_broker_check(
    base: &str,
    found: crate::Result<Option<crate::mgmt::QueueInfo>>,
) -> Check {
    let name = "same broker";
    match found {
        Ok(Some(_)) => ok(
            name,
            "the management API sees the queue this AMQP connection declared: both are the same \
             broker and virtual host",
        ),
        Ok(None) => fail(
            name,
            format!(
                "the management API at {base} does not know the queue this AMQP connection just \
                 declared: it belongs to another broker (or the URL names another virtual host), \
                 so every figure it gives is someone else's; give this broker's management API \
                 with --mgmt-url"
            ),
        ),
        Err(e) => warn(
            name,
            format!("could not ask the management API for this connection's queue: {e}"),
        ),
    }
}

/// What the broker version means for queuey.
pub(crate) fn version_check(version: &str) -> Check {
    let (status, says) = match version_numbers(version) {
        (0..=2, _, _) => return fail("version", format!("RabbitMQ {version} is too old")),
        (3, m, _) if m < 13 => (
            Status::Warn,
            "out of support; an upgrade to 4.x goes through 3.13 with every feature flag \
             enabled. Max message 128 MiB",
        ),
        (3, _, _) => (
            Status::Warn,
            "the last 3.x; enable all feature flags, then upgrade to 4.x",
        ),
        (4, m, _) if m < 3 => (
            Status::Ok,
            "client x-death is not interpreted; max message 16 MiB; classic mirroring is gone",
        ),
        _ => (
            Status::Ok,
            "max message 16 MiB; classic queues have no consumer timeout",
        ),
    };
    check("version", status, format!("RabbitMQ {version}: {says}"))
}

/// What the broker's deprecated features (`None` before 3.13) mean for
/// queuey: transient queues refused, statistics not collected.
pub(crate) fn deprecated_features_check(
    version: &str,
    features: Option<&[crate::mgmt::DeprecatedFeature]>,
) -> Check {
    let name = "deprecated features";
    let Some(features) = features else {
        return ok(
            name,
            format!("RabbitMQ {version} reports none (3.13 and later do); nothing is refused"),
        );
    };
    let state = |feature: &str| features.iter().find(|f| f.name == feature);
    let mut status = Status::Ok;
    let mut said = Vec::new();
    match state("transient_nonexcl_queues") {
        Some(f) if f.is_denied() => said.push(
            "transient non-exclusive queues are refused: a queue of `QueueConfig::durable(false)` \
             cannot be declared (queuey's own queues are durable)"
                .to_owned(),
        ),
        Some(_) => said.push(
            "transient non-exclusive queues are still permitted here, as some distributions' \
             packages do; upstream RabbitMQ 4.3 refuses them, so keep `QueueConfig::durable(false)` \
             out of queue sets that may move to another broker"
                .to_owned(),
        ),
        None => {}
    }
    if state("management_metrics_collection").is_some_and(|f| f.is_denied()) {
        status = Status::Warn;
        said.push(
            "the management API collects no statistics: the message counts of `queuey queues`, \
             `stats`, `holds` and the dashboard are missing or zero; permit \
             `management_metrics_collection` or read counts with `queuey queue` (an AMQP passive \
             declare)"
                .to_owned(),
        );
    }
    let denied: Vec<&str> = features
        .iter()
        .filter(|f| f.is_denied())
        .map(|f| f.name.as_str())
        .collect();
    said.push(if denied.is_empty() {
        "none is denied".to_owned()
    } else {
        format!("denied: {}", denied.join(", "))
    });
    check(name, status, said.join("; "))
}

/// The queues with a consumer timeout of their own (argument or policy),
/// in milliseconds, lowest first.
pub(crate) fn queue_consumer_timeouts(queues: &[QueueInfo]) -> Vec<(String, i64)> {
    let mut own: Vec<(String, i64)> = queues
        .iter()
        .filter_map(|q| {
            let ms = effective(q, "x-consumer-timeout", "consumer-timeout")?;
            Some((q.name.clone(), ms))
        })
        .collect();
    own.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    own
}

/// What the broker's consumer timeout means at this version, with the
/// queues' own (`None`: not read; below the backend's 30 min: a warning),
/// and how `RabbitMqOptions::consumer_timeout` should follow it.
pub(crate) fn consumer_timeout_check(version: &str, own: Option<&[(String, i64)]>) -> Check {
    let (major, minor, _) = version_numbers(version);
    let name = "consumer timeout";
    let option = "workers refuse a job timeout that does not fit under \
                  `RabbitMqOptions::consumer_timeout` (30 min by default): set it to the broker's \
                  `consumer_timeout` (rabbitmq.conf) if that was changed";
    let mut detail = match (major, minor) {
        (0..=2, _) | (3, 0..=11) => format!(
            "RabbitMQ {version}: every queue's deliveries are taken back after `consumer_timeout` \
             unacknowledged (30 min unless set; the channel closes and all its deliveries come \
             again); {option}"
        ),
        (3, _) | (4, 0..=2) => format!(
            "RabbitMQ {version}: every queue's deliveries are taken back after `consumer_timeout` \
             unacknowledged (30 min unless set), or a queue's own (`consumer-timeout` policy, \
             `x-consumer-timeout`); {option}, or to the lowest per-queue value"
        ),
        _ => format!(
            "RabbitMQ {version}: only quorum queues have a consumer timeout; classic queues \
             (queuey's default) never take a delivery back, so the worker's job timeout is what \
             ends a hung job (keep it on). A backend whose workers consume only classic queues \
             can set `RabbitMqOptions::consumer_timeout(None)`; otherwise {option}"
        ),
    };
    detail.push_str(
        ". The broker-wide value is not shown by the management API: `rabbitmqctl eval \
         'application:get_env(rabbit, consumer_timeout).'` prints it",
    );
    let default_ms = 30 * 60 * 1000;
    let per_queue = (major, minor) >= (3, 12);
    let status = match own {
        // Arguments and policy keys this version does not know do nothing.
        _ if !per_queue => {
            detail.push_str("; this version has no per-queue consumer timeout");
            Status::Ok
        }
        None => {
            detail.push_str("; the queues' own timeouts could not be read");
            Status::Warn
        }
        Some([]) => {
            detail.push_str("; no queue has a timeout of its own");
            Status::Ok
        }
        Some(own) => {
            let named: Vec<String> = own
                .iter()
                .take(5)
                .map(|(queue, ms)| format!("`{queue}` {}", format_duration_ms(*ms)))
                .collect();
            let more = own.len().saturating_sub(named.len());
            detail.push_str(&format!(
                "; queues with a timeout of their own, lowest first: {}{}",
                named.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ));
            if own[0].1 < default_ms {
                detail.push_str(&format!(
                    "; a worker consuming `{}` needs `RabbitMqOptions::consumer_timeout` of at \
                     most {}, or the broker takes back jobs still running",
                    own[0].0,
                    format_duration_ms(own[0].1)
                ));
                Status::Warn
            } else {
                Status::Ok
            }
        }
    };
    check(name, status, detail)
}

/// Whether every control stream is bounded in bytes (`unbounded`: those not).
pub(crate) fn control_stream_bound_check(unbounded: &[LimitPolicy]) -> Check {
    let name = "control streams";
    if unbounded.is_empty() {
        return ok(
            name,
            "every control stream has a bound in bytes (or none exists yet)",
        );
    }
    let details: Vec<String> = unbounded
        .iter()
        .map(|p| format!("`{}`: {}", p.queue, p.advice()))
        .collect();
    warn(
        name,
        format!(
            "{} control stream(s) without a bound in bytes, where {}: {}",
            unbounded.len(),
            AtRisk::UnboundedControlStream.risk(),
            details.join("; ")
        ),
    )
}

/// What the broker's default delivery limit (20 from 4.0, none before)
/// means for queuey's quorum queues without one of their own (`at_risk`).
pub(crate) fn delivery_limit_check(version: &str, at_risk: &[LimitPolicy]) -> Check {
    let name = "delivery limits";
    if at_risk.is_empty() {
        return ok(
            name,
            "every dead-letter and schedule queue of queuey's that is a quorum queue has a \
             delivery limit of its own",
        );
    }
    let (mut found, mut risks) = (Vec::new(), Vec::new());
    for (kind, label) in [
        (AtRisk::DeadLetterQueue, "dead-letter queues"),
        (AtRisk::ScheduleQueue, "schedule queues"),
    ] {
        let names: Vec<&str> = at_risk
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| p.queue.as_str())
            .collect();
        if !names.is_empty() {
            let more = if names.len() > 5 { ", …" } else { "" };
            let shown = names[..names.len().min(5)].join(", ");
            found.push(format!("{label}: {} ({shown}{more})", names.len()));
            risks.push(kind.risk());
        }
    }
    let found = found.join("; ");
    let fix = "`queuey topology apply --yes` (with the queue set) gives each a `delivery-limit` \
               policy of 1000000 without touching a message";
    if broker_has_default_limit(version) {
        warn(
            name,
            format!(
                "quorum queues on RabbitMQ {version}'s default delivery limit \
                 ({BROKER_DEFAULT_LIMIT}): {found}. On such a queue {}; {fix}",
                risks.join("; and ")
            ),
        )
    } else {
        ok(
            name,
            format!(
                "quorum queues with no delivery limit of their own: {found}. RabbitMQ {version} \
                 has no default limit, but 4.0 and later give them {BROKER_DEFAULT_LIMIT} and \
                 drop what passes it: before upgrading, {fix}"
            ),
        )
    }
}

/// Whether the broker releases jobs from quorum holds reliably: they need
/// 3.10, and before 3.10.20 and 3.11.12 the at-least-once dead-letter
/// worker could stop for good, keeping held jobs unreleased.
pub(crate) fn quorum_holds_check(version: &str) -> Check {
    let (major, minor, patch) = version_numbers(version);
    let name = "quorum holds";
    match (major, minor, patch) {
        (0..=2, _, _) | (3, 0..=9, _) => warn(
            name,
            format!(
                "RabbitMQ {version} cannot expire messages in quorum queues: quorum hold queues \
                 (the default) need 3.10 or later; use `HoldQueues::Classic` until the upgrade"
            ),
        ),
        (3, 10, p) if p < 20 => stalling(version, "3.10.20"),
        (3, 11, p) if p < 12 => stalling(version, "3.11.12"),
        _ => ok(
            name,
            format!(
                "RabbitMQ {version} releases held jobs from quorum hold queues with at-least-once \
                 dead-lettering"
            ),
        ),
    }
}

/// The quorum holds queuey declared among `queues`, each with its work queue.
pub(crate) fn quorum_holds(queues: &[QueueInfo], deferred_suffix: &str) -> Vec<(String, String)> {
    queues
        .iter()
        .filter_map(|info| {
            let (work_queue, delay_ms) = quorum_hold_of(&info.name, deferred_suffix)?;
            hold_mismatch(info, work_queue, HoldQueues::Quorum, delay_ms)
                .is_none()
                .then(|| (info.name.clone(), work_queue.to_owned()))
        })
        .collect()
}

/// Whether a quorum hold of `holds` stopped releasing.
async fn stalled_holds_check(mgmt: &Management, holds: &[(String, String)]) -> Check {
    let name = "stalled holds";
    match crate::holds::stalled(mgmt, holds).await {
        Ok(stalls) if stalls.is_empty() => ok(
            name,
            format!(
                "none of the {} quorum hold queue(s) keeps jobs past their delay without \
                 releasing them",
                holds.len()
            ),
        ),
        Ok(stalls) => fail(
            name,
            stalls
                .iter()
                .map(Stall::describe)
                .collect::<Vec<_>>()
                .join("; "),
        ),
        Err(e) => warn(name, format!("could not read the quorum holds again: {e}")),
    }
}

fn stalling(version: &str, fixed_in: &str) -> Check {
    warn(
        "quorum holds",
        format!(
            "RabbitMQ {version}: a quorum hold queue's at-least-once dead-letter worker can stop \
             for good (fixed in {fixed_in}), and the jobs in that hold are then kept but never \
             released; upgrade, or use `HoldQueues::Classic`. The \"stalled holds\" check below \
             and `queuey holds` report a hold that stopped releasing, and what to do"
        ),
    )
}

fn plugins_check(nodes: &[Value]) -> Check {
    let has = |plugin: &str| {
        nodes.iter().any(|n| {
            n["applications"]
                .as_array()
                .is_some_and(|apps| apps.iter().any(|a| a["name"] == plugin))
        })
    };
    ok(
        "plugins",
        if has("rabbitmq_prometheus") {
            "rabbitmq_management, rabbitmq_prometheus"
        } else {
            "rabbitmq_management (rabbitmq_prometheus is off: optional, for broker metrics)"
        },
    )
}

fn alarm_checks(nodes: &[Value]) -> Vec<Check> {
    nodes
        .iter()
        .map(|n| {
            let name = n["name"].as_str().unwrap_or("?");
            let mem = n["mem_alarm"].as_bool().unwrap_or(false);
            let disk = n["disk_free_alarm"].as_bool().unwrap_or(false);
            let gib = |v: &Value| v.as_f64().unwrap_or(0.0) / (1u64 << 30) as f64;
            let detail = format!(
                "node {name}: memory {:.2} of {:.2} GiB, disk free {:.1} GiB (limit {:.2} GiB)",
                gib(&n["mem_used"]),
                gib(&n["mem_limit"]),
                gib(&n["disk_free"]),
                gib(&n["disk_free_limit"])
            );
            match (mem, disk) {
                (false, false) => ok("alarms", format!("none; {detail}")),
                _ => fail(
                    "alarms",
                    format!(
                        "{}{}: publishers are blocked; {detail}",
                        if mem { "MEMORY ALARM " } else { "" },
                        if disk { "DISK ALARM" } else { "" }
                    ),
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_beyond_this_machine_is_a_warning() {
        assert_eq!(transport_check("amqps://u:p@rabbit/%2f").status, Status::Ok);
        assert_eq!(
            transport_check("amqp://u:p@127.0.0.1:5672/%2f").status,
            Status::Ok
        );
        assert_eq!(
            transport_check("amqp://u:p@[::1]:5672/%2f").status,
            Status::Ok
        );
        assert_eq!(transport_check("amqp://localhost/%2f").status, Status::Ok);
        assert_eq!(
            transport_check("amqp://u:p@rabbit.prod:5672/%2f").status,
            Status::Warn
        );
        assert!(!names_this_machine(
            "http://localhost.attacker.example:15672"
        ));
    }

    #[test]
    fn versions_say_what_they_imply() {
        assert_eq!(version_check("3.10.8").status, Status::Warn);
        assert!(version_check("3.10.8").detail.contains("3.13"));
        assert_eq!(version_check("4.1.0").status, Status::Ok);
    }

    #[test]
    fn deprecated_features_are_read_not_guessed() {
        let features = |json: serde_json::Value| -> Vec<crate::mgmt::DeprecatedFeature> {
            serde_json::from_value(json).expect("features")
        };
        let none = deprecated_features_check("3.10.8", None);
        assert_eq!(none.status, Status::Ok);
        assert!(none.detail.contains("reports none"), "{}", none.detail);

        let upstream = features(serde_json::json!([
            {"name": "transient_nonexcl_queues", "state": "denied", "desc": ""},
            {"name": "global_qos", "state": "denied"},
            {"name": "management_metrics_collection", "state": "permitted"},
        ]));
        let c = deprecated_features_check("4.3.6", Some(&upstream));
        assert_eq!(c.status, Status::Ok);
        assert!(c.detail.contains("are refused"), "{}", c.detail);
        assert!(
            c.detail
                .contains("denied: transient_nonexcl_queues, global_qos"),
            "{}",
            c.detail
        );

        let patched = features(serde_json::json!([
            {"name": "transient_nonexcl_queues", "state": "permitted"},
            {"name": "management_metrics_collection", "state": "denied"},
        ]));
        let c = deprecated_features_check("4.3.6", Some(&patched));
        assert_eq!(c.status, Status::Warn, "no statistics for the counts");
        assert!(c.detail.contains("still permitted here"), "{}", c.detail);
        assert!(c.detail.contains("collects no statistics"), "{}", c.detail);
    }

    #[test]
    fn the_consumer_timeout_check_agrees_with_the_backend_option() {
        for (version, says) in [
            ("3.10.8", "every queue's deliveries"),
            ("3.13.7", "`x-consumer-timeout`"),
            ("4.2.1", "`consumer-timeout` policy"),
            ("4.3.5", "only quorum queues"),
        ] {
            let c = consumer_timeout_check(version, Some(&[]));
            assert_eq!(c.name, "consumer timeout");
            assert_eq!(c.status, Status::Ok);
            assert!(c.detail.contains(says), "{version}: {}", c.detail);
            assert!(
                c.detail.contains("`RabbitMqOptions::consumer_timeout"),
                "{version}: {}",
                c.detail
            );
            if version != "3.10.8" {
                assert!(c.detail.contains("no queue has a timeout of its own"));
            }
            assert!(
                c.detail
                    .contains("application:get_env(rabbit, consumer_timeout)")
            );
        }
        assert!(
            consumer_timeout_check("4.3.5", Some(&[]))
                .detail
                .contains("(None)")
        );
        assert!(
            consumer_timeout_check("3.10.8", Some(&[]))
                .detail
                .contains("30 min")
        );
        assert_eq!(consumer_timeout_check("4.3.5", None).status, Status::Warn);
    }

    #[test]
    fn a_queue_timeout_below_the_backend_default_is_a_warning_naming_the_lowest() {
        let info = |name: &str, arg: Option<i64>, policy: Option<i64>| {
            let mut q: QueueInfo = serde_json::from_value(serde_json::json!({
                "name": name,
                "type": "quorum",
            }))
            .unwrap();
            if let Some(ms) = arg {
                q.arguments
                    .insert("x-consumer-timeout".into(), serde_json::json!(ms));
            }
            if let Some(ms) = policy {
                q.effective_policy_definition = Some(serde_json::json!({ "consumer-timeout": ms }));
            }
            q
        };
        let queues = [
            info("plain", None, None),
            info("long", Some(3_600_000), None),
            info("both", Some(900_000), Some(600_000)),
            info("short", None, Some(90_000)),
        ];
        let own = queue_consumer_timeouts(&queues);
        assert_eq!(
            own,
            vec![
                ("short".to_owned(), 90_000),
                ("both".to_owned(), 600_000),
                ("long".to_owned(), 3_600_000)
            ]
        );
        let c = consumer_timeout_check("4.3.6", Some(&own));
        assert_eq!(c.status, Status::Warn);
        assert!(
            c.detail
                .contains("`short` 1m30s, `both` 10m00s, `long` 1h00m"),
            "{}",
            c.detail
        );
        assert!(c.detail.contains("consuming `short` needs"), "{}", c.detail);
        // Before 3.12 the broker knows no such setting.
        let old = consumer_timeout_check("3.10.8", Some(&own));
        assert_eq!(old.status, Status::Ok);
        assert!(!old.detail.contains("`short`"), "{}", old.detail);
        let long_only = &own[2..];
        assert_eq!(
            consumer_timeout_check("4.3.6", Some(long_only)).status,
            Status::Ok
        );
    }

    #[test]
    fn quorum_holds_are_judged_by_the_dead_letter_worker_fixes() {
        for (version, status, says) in [
            ("3.9.29", Status::Warn, "3.10 or later"),
            ("3.10.8", Status::Warn, "fixed in 3.10.20"),
            ("3.10.19", Status::Warn, "fixed in 3.10.20"),
            ("3.10.20", Status::Ok, "releases held jobs"),
            ("3.11.11", Status::Warn, "fixed in 3.11.12"),
            ("3.11.12", Status::Ok, "releases held jobs"),
            ("3.13.7", Status::Ok, "releases held jobs"),
            ("4.1.0", Status::Ok, "releases held jobs"),
        ] {
            let c = quorum_holds_check(version);
            assert_eq!(c.name, "quorum holds");
            assert_eq!(c.status, status, "{version}");
            assert!(c.detail.contains(says), "{version}: {}", c.detail);
        }
    }

    #[test]
    fn the_default_delivery_limit_warns_only_where_the_broker_has_one() {
        let dead: crate::mgmt::QueueInfo = serde_json::from_value(serde_json::json!({
            "name": "q.dead", "type": "quorum", "arguments": {"x-queue-type": "quorum"}
        }))
        .unwrap();
        let at_risk = limit_policies(&[dead], ".dead");
        assert_eq!(at_risk.len(), 1);
        let on_4 = delivery_limit_check("4.3.6", &at_risk);
        assert_eq!(on_4.status, Status::Warn);
        assert!(on_4.detail.contains("q.dead"), "{}", on_4.detail);
        assert!(on_4.detail.contains("read 20 times"), "{}", on_4.detail);
        assert!(on_4.detail.contains("topology apply"), "{}", on_4.detail);
        let on_3 = delivery_limit_check("3.10.8", &at_risk);
        assert_eq!(on_3.status, Status::Ok);
        assert!(on_3.detail.contains("before upgrading"), "{}", on_3.detail);
        assert_eq!(delivery_limit_check("4.3.6", &[]).status, Status::Ok);
    }

    #[test]
    fn alarms_fail_the_check() {
        let nodes =
            vec![serde_json::json!({"name": "n", "mem_alarm": true, "disk_free_alarm": false})];
        let checks = alarm_checks(&nodes);
        assert_eq!(checks[0].status, Status::Fail);
        assert!(checks[0].detail.contains("MEMORY ALARM"));
    }
}
