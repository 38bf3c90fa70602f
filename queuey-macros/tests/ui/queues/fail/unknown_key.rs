// An unknown key names the keys that exist.
#[derive(queuey_core::Queues)]
enum AppQueues {
    #[queue(prefech = 32)]
    Emails,
    Other,
}

fn main() {}
