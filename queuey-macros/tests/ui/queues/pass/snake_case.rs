// Default names are the variants in snake_case, with the prefix in front.
use queuey_core::Queues;

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
#[queues(prefix = "svc.v2")]
enum Names {
    WebhookCalls,
    HTTPRequests,
    SendSMS,
    Emails2,
    V2Api,
    r#Match,
    #[queue(name = "Custom.Name-1")]
    Renamed,
}

fn main() {
    let names: Vec<&str> = Names::ALL.iter().map(Queues::name).collect();
    assert_eq!(
        names,
        [
            "svc.v2.webhook_calls",
            "svc.v2.http_requests",
            "svc.v2.send_sms",
            "svc.v2.emails2",
            "svc.v2.v2_api",
            "svc.v2.match",
            "svc.v2.Custom.Name-1",
        ]
    );
}
