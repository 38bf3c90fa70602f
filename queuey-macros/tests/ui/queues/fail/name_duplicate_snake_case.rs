// An explicit name that equals another variant's default name.
#[derive(queuey_core::Queues)]
#[queues(prefix = "app")]
enum AppQueues {
    #[queue(name = "webhook_calls")]
    Hooks,
    WebhookCalls,
}

fn main() {}
