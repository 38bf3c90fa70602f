//! A broker killed under a backlog, on a private node: the worker runs the
//! recovered backlog at full pace again within seconds, and the poison
//! guard sends none of it through the suspect queue, although a classic
//! queue marks every job it recovers redelivered.

use crate::fault::backlog;
use crate::fault::scenario::fault_queue;
use crate::support::guard_notices_mentioning;

fault_queue!(BacklogQueues, BacklogJob, "restart-backlog", |c| c);

/// The backlog, queued before the worker starts.
const JOBS: u32 = 20_000;
/// The worker's concurrency, as large as the queue's default prefetch.
const CONCURRENCY: usize = 16;

/// A classic work queue with 20,000 jobs queued and a worker running them
/// (16 at a time, 10 ms each); the node is killed (`kill -9`) after 3 s
/// and started again. Nothing is lost, and the poison guard moves no job to
/// the suspect queue: the broker returns its whole recovered backlog marked
/// redelivered, and each job goes back to the work queue once. The report
/// says how soon after the node answered again a whole second ran at 80 %
/// of the pace before the kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_killed_under_a_backlog_runs_it_at_full_pace_again_and_suspects_no_job() {
    crate::support::install_log_capture();
    let mut node = private_node!(
        "a_broker_killed_under_a_backlog_runs_it_at_full_pace_again_and_suspects_no_job"
    );
    let run = backlog::run::<BacklogJob>(&mut node, JOBS, CONCURRENCY).await;
    let moves = guard_notices_mentioning(&run.queue);
    let count = |what: &str| moves.iter().filter(|l| l.contains(what)).count();
    let suspects = count("moved to the suspect queue");
    let first_returns = count("again to its work queue");
    let report = format!(
        "{run}; the poison guard sent {first_returns} jobs back to the work queue and \
         {suspects} to the suspect queue"
    );
    eprintln!("{report}");

    assert!(run.drained, "the backlog did not drain: {report}");
    assert!(run.check.lost.is_empty(), "jobs were lost: {report}");
    assert!(run.check.unexpected.is_empty(), "{report}");
    assert_eq!(run.worker_result, "Ok", "{report}");
    assert_eq!(run.left, Some((0, 0)), "{report}");
    assert!(first_returns > 0, "the broker returned nothing: {report}");
    assert_eq!(
        suspects, 0,
        "a job that came back once went to the suspect queue: {report}"
    );
    assert!(matches!(run.suspect_queue, None | Some((0, 0))), "{report}");
}
