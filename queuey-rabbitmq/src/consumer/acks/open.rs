//! The deliveries a channel received and did not settle yet, and the
//! acknowledgements a round of the writer sends for them.

use std::collections::VecDeque;

/// Where one delivery tag stands.
#[derive(Clone, Copy, PartialEq)]
enum Slot {
    /// Received, its job not done yet: no acknowledgement may cover it.
    Working,
    /// Its job asked for its acknowledgement.
    Asked,
    /// Settled (or never received on this channel): a multiple
    /// acknowledgement may pass over it.
    Closed,
}

/// The deliveries a channel received and did not settle yet.
///
/// A channel's delivery tags count up from 1, so the deliveries are kept in
/// tag order, as a run of slots from the lowest open tag: recording one,
/// finding one and taking a run from the front cost no search.
#[derive(Default)]
pub(super) struct Open {
    /// The tag of `slots[0]`.
    first: u64,
    slots: VecDeque<Slot>,
    /// How many slots are not [`Slot::Closed`].
    open: usize,
    /// How many slots are [`Slot::Asked`].
    asked: usize,
    /// Acknowledgements of deliveries the writer did not know (none, unless
    /// a delivery was recorded on another writer): sent on their own.
    strays: Vec<u64>,
}

impl Open {
    pub(super) fn delivered(&mut self, tag: u64) {
        if self.open == 0 {
            // Nothing open: the slots left, all closed, keep no place.
            self.slots.clear();
            self.first = tag;
        }
        // Tags come in order; a gap or an earlier tag (which the broker
        // never sends) is filled with closed slots, so that every tag
        // keeps its place.
        while tag < self.first {
            self.slots.push_front(Slot::Closed);
            self.first -= 1;
        }
        let index = self.index(tag);
        while self.slots.len() <= index {
            self.slots.push_back(Slot::Closed);
        }
        if self.slots[index] == Slot::Closed {
            self.open += 1;
        }
        if self.slots[index] == Slot::Asked {
            self.asked -= 1;
        }
        self.slots[index] = Slot::Working;
    }

    /// How many deliveries are still being worked on (not settled).
    pub(super) fn working(&self) -> usize {
        self.open - self.asked
    }

    /// Whether `tag` is the one open delivery, and nothing was asked.
    pub(super) fn is_only(&self, tag: u64) -> bool {
        self.asked == 0 && self.open == 1 && self.slot(tag) == Some(Slot::Working)
    }

    pub(super) fn settled(&mut self, tag: u64) {
        if let Some(slot) = self.slot_mut(tag) {
            match std::mem::replace(slot, Slot::Closed) {
                Slot::Working => self.open -= 1,
                // Cannot happen (a delivery is settled once); keep the
                // counts right if it does.
                Slot::Asked => {
                    self.open -= 1;
                    self.asked -= 1;
                }
                Slot::Closed => {}
            }
            self.trim();
        }
    }

    pub(super) fn ask(&mut self, tag: u64) {
        match self.slot_mut(tag) {
            Some(slot @ Slot::Working) => {
                *slot = Slot::Asked;
                self.asked += 1;
            }
            Some(Slot::Asked) => {}
            Some(Slot::Closed) | None => self.strays.push(tag),
        }
    }

    /// Takes what can be acknowledged now, as the sends of one round.
    pub(super) fn round(&mut self) -> Vec<Frame> {
        let mut round = Vec::new();
        // The run from the lowest open delivery, over the settled ones.
        let mut run = 0;
        let mut last = 0;
        while let Some(&slot) = self.slots.front() {
            match slot {
                Slot::Asked => {
                    run += 1;
                    last = self.first;
                }
                Slot::Closed => {}
                Slot::Working => break,
            }
            self.slots.pop_front();
            self.first += 1;
        }
        self.asked -= run;
        self.open -= run;
        if run > 0 {
            round.push(Frame {
                tag: last,
                multiple: run > 1,
                jobs: run,
            });
        }
        // Everything else that asked, behind a delivery still at work.
        if self.asked > 0 {
            for (tag, slot) in (self.first..).zip(self.slots.iter_mut()) {
                if *slot == Slot::Asked {
                    *slot = Slot::Closed;
                    round.push(Frame::one(tag));
                }
            }
            self.open -= self.asked;
            self.asked = 0;
        }
        round.extend(self.strays.drain(..).map(Frame::one));
        round
    }

    /// Where `tag` is in `slots`, if at or after the first.
    fn index(&self, tag: u64) -> usize {
        usize::try_from(tag - self.first).unwrap_or(usize::MAX)
    }

    fn slot(&self, tag: u64) -> Option<Slot> {
        if tag < self.first {
            return None;
        }
        self.slots.get(self.index(tag)).copied()
    }

    fn slot_mut(&mut self, tag: u64) -> Option<&mut Slot> {
        if tag < self.first {
            return None;
        }
        let index = self.index(tag);
        self.slots.get_mut(index)
    }

    /// Drops the closed slots at the front.
    fn trim(&mut self) {
        while let Some(Slot::Closed) = self.slots.front() {
            self.slots.pop_front();
            self.first += 1;
        }
    }
}

/// One `basic.ack`, and how many jobs it acknowledges.
pub(super) struct Frame {
    pub(super) tag: u64,
    pub(super) multiple: bool,
    pub(super) jobs: usize,
}

impl Frame {
    fn one(tag: u64) -> Self {
        Frame {
            tag,
            multiple: false,
            jobs: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Open {
        /// The tags not settled yet.
        fn open_tags(&self) -> Vec<u64> {
            (self.first..)
                .zip(&self.slots)
                .filter(|(_, slot)| !matches!(slot, Slot::Closed))
                .map(|(tag, _)| tag)
                .collect()
        }
    }

    /// Open deliveries.
    fn open(tags: impl IntoIterator<Item = u64>) -> Open {
        let mut open = Open::default();
        for tag in tags {
            open.delivered(tag);
        }
        open
    }

    fn ask(open: &mut Open, tag: u64) {
        open.ask(tag);
    }

    /// A round as (tag acknowledged, multiple, jobs answered).
    fn round(open: &mut Open) -> Vec<(u64, bool, usize)> {
        open.round()
            .into_iter()
            .map(|send| (send.tag, send.multiple, send.jobs))
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
        assert_eq!(open.open_tags(), [2, 5]);
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
        assert_eq!(open.open_tags(), [1]);
    }

    /// What a channel does to its deliveries, in any order.
    #[derive(Debug, Clone)]
    enum Step {
        /// The next delivery arrives.
        Deliver,
        /// The job of the n-th open delivery (modulo) asks for its ack.
        Ask(usize),
        /// The n-th open delivery is settled another way (nack, reject).
        SettleElsewhere(usize),
        /// The writer takes a round.
        Round,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            3 => Just(Step::Deliver),
            3 => any::<usize>().prop_map(Step::Ask),
            1 => any::<usize>().prop_map(Step::SettleElsewhere),
            2 => Just(Step::Round),
        ]
    }

    proptest::proptest! {
        /// Whatever happens, a multiple acknowledgement never covers a
        /// delivery still at work or settled another way, and every
        /// delivery whose job asked is acknowledged once.
        #[test]
        fn no_ack_covers_a_delivery_it_must_not(steps in proptest::collection::vec(step(), 0..200)) {
            use std::collections::BTreeMap;
            #[derive(Clone, Copy, PartialEq, Debug)]
            enum State { Working, Asked, Elsewhere, Acked }
            let mut open = Open::default();
            let mut model: BTreeMap<u64, State> = BTreeMap::new();
            let mut next = 1;
            let check = |open: &mut Open, model: &mut BTreeMap<u64, State>| {
                for frame in open.round() {
                    let covered: Vec<u64> = if frame.multiple {
                        model.range(..=frame.tag).filter(|(_, s)| **s != State::Acked && **s != State::Elsewhere).map(|(t, _)| *t).collect()
                    } else {
                        vec![frame.tag]
                    };
                    for tag in covered {
                        let state = model.get_mut(&tag).unwrap();
                        proptest::prop_assert_eq!(*state, State::Asked, "tag {} covered by {:?}", tag, (frame.tag, frame.multiple));
                        *state = State::Acked;
                    }
                    if frame.multiple {
                        let crossed = model.range(..=frame.tag).any(|(_, s)| *s == State::Working);
                        proptest::prop_assert!(!crossed, "a multiple ack of {} crossed a delivery at work", frame.tag);
                    }
                }
                Ok(())
            };
            for step in steps {
                let live: Vec<u64> = model.iter().filter(|(_, s)| **s == State::Working).map(|(t, _)| *t).collect();
                match step {
                    Step::Deliver => {
                        open.delivered(next);
                        model.insert(next, State::Working);
                        next += 1;
                    }
                    Step::Ask(n) if !live.is_empty() => {
                        let tag = live[n % live.len()];
                        open.ask(tag);
                        model.insert(tag, State::Asked);
                    }
                    Step::SettleElsewhere(n) if !live.is_empty() => {
                        let tag = live[n % live.len()];
                        open.settled(tag);
                        model.insert(tag, State::Elsewhere);
                    }
                    Step::Round => check(&mut open, &mut model)?,
                    _ => {}
                }
                proptest::prop_assert_eq!(open.open, model.values().filter(|s| matches!(s, State::Working | State::Asked)).count());
            }
            check(&mut open, &mut model)?;
            let left: Vec<_> = model.iter().filter(|(_, s)| **s == State::Asked).collect();
            proptest::prop_assert!(left.is_empty(), "asked but never acknowledged: {:?}", left);
        }
    }
}
