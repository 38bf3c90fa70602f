//! The deliveries a channel received and did not settle yet, and the
//! acknowledgements a round of the writer sends for them.

use std::collections::BTreeMap;

use tokio::sync::oneshot;

use super::Answer;

/// A job's request for its acknowledgement.
pub(super) struct Asked {
    pub(super) tag: u64,
    /// Where the answer goes; taken once the job stopped waiting (see
    /// [`Open::time_out_waiting`]), while its acknowledgement still goes out.
    pub(super) reply: Option<oneshot::Sender<Answer>>,
}

/// The deliveries a channel received and did not settle yet.
#[derive(Default)]
pub(super) struct Open {
    /// By tag: `Some` once the job asked for its acknowledgement.
    deliveries: BTreeMap<u64, Option<Asked>>,
    /// How many of `deliveries` asked.
    asked: usize,
    /// Acknowledgements of deliveries the writer did not know (none, unless
    /// a delivery was recorded on another writer): sent on their own.
    strays: Vec<Asked>,
}

impl Open {
    pub(super) fn delivered(&mut self, tag: u64) {
        self.deliveries.insert(tag, None);
    }

    /// Whether `tag` is the one open delivery, and nothing was asked.
    pub(super) fn is_only(&self, tag: u64) -> bool {
        self.asked == 0 && self.deliveries.len() == 1 && self.deliveries.contains_key(&tag)
    }

    pub(super) fn settled(&mut self, tag: u64) {
        if let Some(Some(_)) = self.deliveries.remove(&tag) {
            // Cannot happen (a delivery is settled once); keep the count
            // right if it does.
            self.asked -= 1;
        }
    }

    pub(super) fn ask(&mut self, asked: Asked) {
        let tag = asked.tag;
        match self.deliveries.get_mut(&tag) {
            Some(slot) => {
                if slot.replace(asked).is_none() {
                    self.asked += 1;
                }
            }
            None => self.strays.push(asked),
        }
    }

    /// Takes what can be acknowledged now, as the sends of one round.
    pub(super) fn round(&mut self) -> Vec<Frame> {
        let mut round = Vec::new();
        // The run from the lowest open delivery.
        let mut run = Vec::new();
        while let Some(entry) = self.deliveries.first_entry() {
            if entry.get().is_none() {
                break;
            }
            if let Some(asked) = entry.remove() {
                run.push(asked);
            }
        }
        self.asked -= run.len();
        if let Some(last) = run.pop() {
            let multiple = !run.is_empty();
            let mut replies: Vec<_> = run.into_iter().filter_map(|asked| asked.reply).collect();
            replies.extend(last.reply);
            round.push(Frame {
                tag: last.tag,
                multiple,
                replies,
            });
        }
        // Everything else that asked, behind a delivery still at work.
        if self.asked > 0 {
            self.deliveries.retain(|_, slot| match slot.take() {
                Some(asked) => {
                    round.push(Frame::one(asked));
                    false
                }
                None => true,
            });
            self.asked = 0;
        }
        round.extend(self.strays.drain(..).map(Frame::one));
        round
    }

    /// Answers every job still waiting for a round with `TimedOut`: the
    /// round under way outlived the bound, and theirs would only start
    /// after it. Their acknowledgements stay asked for, and go out with
    /// the next round.
    pub(super) fn time_out_waiting(&mut self) {
        let waiting = self.deliveries.values_mut().filter_map(Option::as_mut);
        for asked in waiting.chain(self.strays.iter_mut()) {
            if let Some(reply) = asked.reply.take() {
                // The job may have gone.
                let _ = reply.send(Answer::TimedOut);
            }
        }
    }
}

/// One `basic.ack`, and the jobs it answers.
pub(super) struct Frame {
    pub(super) tag: u64,
    pub(super) multiple: bool,
    pub(super) replies: Vec<oneshot::Sender<Answer>>,
}

impl Frame {
    fn one(asked: Asked) -> Self {
        Frame {
            tag: asked.tag,
            multiple: false,
            replies: asked.reply.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Open deliveries.
    fn open(tags: impl IntoIterator<Item = u64>) -> Open {
        let mut open = Open::default();
        for tag in tags {
            open.delivered(tag);
        }
        open
    }

    fn ask(open: &mut Open, tag: u64) -> oneshot::Receiver<Answer> {
        let (reply, answer) = oneshot::channel();
        open.ask(Asked {
            tag,
            reply: Some(reply),
        });
        answer
    }

    /// A round as (tag acknowledged, multiple, jobs answered).
    fn round(open: &mut Open) -> Vec<(u64, bool, usize)> {
        open.round()
            .into_iter()
            .map(|send| (send.tag, send.multiple, send.replies.len()))
            .collect()
    }

    #[test]
    fn a_run_from_the_lowest_open_delivery_is_one_multiple_ack() {
        let mut open = open(1..=5);
        for tag in [3, 1, 2] {
            ask(&mut open, tag);
        }
        assert_eq!(round(&mut open), [(3, true, 3)]);
        // 4 and 5 are still open; a run of one is a plain ack.
        ask(&mut open, 4);
        assert_eq!(round(&mut open), [(4, false, 1)]);
        assert!(round(&mut open).is_empty());
    }

    #[test]
    fn a_delivery_at_work_is_never_covered() {
        let mut open = open(1..=6);
        // 2 is still at work: 1 goes alone, 4 and 6 on their own.
        for tag in [1, 3, 4, 6] {
            ask(&mut open, tag);
        }
        assert_eq!(
            round(&mut open),
            [(1, false, 1), (3, false, 1), (4, false, 1), (6, false, 1)]
        );
        assert_eq!(open.deliveries.keys().copied().collect::<Vec<_>>(), [2, 5]);
    }

    #[test]
    fn a_delivery_settled_elsewhere_ends_a_run_until_it_is_reported() {
        let mut open = open(1..=4);
        for tag in [1, 3, 4] {
            ask(&mut open, tag);
        }
        // 2 is being requeued by its own acker: 3 and 4 wait behind it
        // only in the sense that they are acknowledged one by one.
        assert_eq!(
            round(&mut open),
            [(1, false, 1), (3, false, 1), (4, false, 1)]
        );
        let mut open = self::open(1..=4);
        open.settled(2);
        for tag in [1, 3, 4] {
            ask(&mut open, tag);
        }
        assert_eq!(round(&mut open), [(4, true, 3)]);
    }

    #[test]
    fn only_a_lone_open_delivery_with_nothing_asked_may_skip_the_writer() {
        let mut open = open([7]);
        assert!(open.is_only(7));
        assert!(!open.is_only(8));
        open.delivered(8);
        assert!(!open.is_only(7), "another delivery could share its ack");
        open.settled(8);
        ask(&mut open, 7);
        assert!(!open.is_only(7), "already asked");
    }

    #[test]
    fn an_unknown_delivery_is_acknowledged_on_its_own() {
        let mut open = open([1]);
        ask(&mut open, 9);
        assert_eq!(round(&mut open), [(9, false, 1)]);
        assert_eq!(open.deliveries.len(), 1);
    }

    #[tokio::test]
    async fn every_job_of_a_run_gets_the_answer_of_its_ack() {
        let mut open = open(1..=3);
        let answers: Vec<_> = (1..=3).map(|tag| ask(&mut open, tag)).collect();
        for send in open.round() {
            for reply in send.replies {
                reply.send(Answer::Acked(Ok(true))).unwrap();
            }
        }
        for answer in answers {
            assert!(matches!(answer.await.unwrap(), Answer::Acked(Ok(true))));
        }
    }

    #[tokio::test]
    async fn jobs_waiting_for_a_round_are_timed_out_and_their_acks_still_go() {
        let mut open = open(1..=3);
        let first = ask(&mut open, 1);
        // The round under way takes 1; 2 and 3 ask while it is stuck.
        let under_way = open.round();
        let waiting: Vec<_> = [2, 3].map(|tag| ask(&mut open, tag)).into();
        open.time_out_waiting();
        for answer in waiting {
            assert!(matches!(answer.await.unwrap(), Answer::TimedOut));
        }
        // Still asked for: the next round acknowledges them, answering
        // nobody.
        assert_eq!(round(&mut open), [(3, true, 0)]);
        drop(under_way);
        assert!(first.await.is_err(), "dropped unanswered with its round");
    }
}
