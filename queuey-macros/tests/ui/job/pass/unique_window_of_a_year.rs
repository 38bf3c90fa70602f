// A unique window of exactly 365 days is the longest accepted.
#[derive(queuey_core::Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Emails,
}

#[derive(queuey_core::Job, serde::Serialize, serde::Deserialize)]
#[job(queue = AppQueues::Emails, unique(window = "365d"))]
struct SendEmail;

fn main() {
    use queuey_core::Job;
    let unique = SendEmail.unique().expect("a unique job");
    assert_eq!(unique.window().as_secs(), 365 * 86_400);
}
