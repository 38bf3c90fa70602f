//! `dead ls`: one page of dead letters, read without keeping the rest.
//!
//! The read stops at the page's last letter; newest first with a filter,
//! a first pass counts the matching letters. Only the page is kept.

use std::ops::ControlFlow;

use serde::Serialize;

use crate::amqp::Amqp;
use crate::dead::{DeadLetter, DeadQueues, Filter, QueueCount, Summary};
use crate::error::Result;

/// Which end of the queue a listing starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Order {
    #[default]
    OldestFirst,
    NewestFirst,
}

/// One page of dead letters.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Listing {
    /// Dead letters when the read began (in all, and per queue).
    pub(crate) total: usize,
    /// Matching dead letters: a lower bound unless `matching_exact`.
    pub(crate) matching: usize,
    pub(crate) matching_exact: bool,
    pub(crate) offset: usize,
    pub(crate) read: usize,
    pub(crate) queues: Vec<QueueCount>,
    pub(crate) items: Vec<Summary>,
}

impl Listing {
    /// Whether matching dead letters may follow the page.
    pub(crate) fn more(&self) -> bool {
        !self.matching_exact || self.offset + self.items.len() < self.matching
    }
}

/// Collects the matching letters whose index (0-based, oldest first, among
/// matching letters) falls in `start..end`.
#[derive(Debug)]
struct Window<'a> {
    filter: &'a Filter,
    start: usize,
    end: usize,
    seen: usize,
    items: Vec<Summary>,
}

impl Window<'_> {
    fn offer(&mut self, letter: &DeadLetter) -> ControlFlow<()> {
        if self.seen >= self.end {
            return ControlFlow::Break(());
        }
        if !self.filter.matches(letter) {
            return ControlFlow::Continue(());
        }
        if self.seen >= self.start {
            self.items.push(letter.summary());
        }
        self.seen += 1;
        if self.seen >= self.end {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

impl DeadQueues {
    /// One page of the dead letters that pass `filter`, queue after queue
    /// (the lane's first, oldest first; `NewestFirst` reverses it).
    pub(crate) async fn list(
        &self,
        amqp: &Amqp,
        filter: &Filter,
        order: Order,
        offset: usize,
        limit: usize,
    ) -> Result<Listing> {
        self.check_ids(&filter.ids)?;
        let queues = self.counts(amqp).await?;
        let total = queues.iter().map(|q| q.count).sum();
        let mut read = 0;
        // The page's place among the matching letters, oldest first.
        let (start, end, known) = match order {
            Order::OldestFirst => (
                offset,
                offset.saturating_add(limit),
                filter.is_all().then_some(total),
            ),
            Order::NewestFirst => {
                let matching = if filter.is_all() {
                    total
                } else {
                    let mut n = 0;
                    let pass = self
                        .scan(amqp, None, |l| {
                            n += usize::from(filter.matches(&l));
                            ControlFlow::Continue(())
                        })
                        .await?;
                    read += pass.read;
                    n
                };
                let end = matching.saturating_sub(offset);
                (end.saturating_sub(limit), end, Some(matching))
            }
        };
        let mut window = Window {
            filter,
            start,
            end,
            seen: 0,
            items: Vec::new(),
        };
        let mut complete = false;
        if start < end {
            let pass = self.scan(amqp, None, |l| window.offer(&l)).await?;
            read += pass.read;
            complete = pass.complete;
        }
        let mut items = window.items;
        if order == Order::NewestFirst {
            items.reverse();
        }
        Ok(Listing {
            total,
            matching: known.unwrap_or(window.seen),
            matching_exact: known.is_some() || complete,
            offset,
            read,
            queues,
            items,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dead::tests::letters;

    fn positions(filter: &Filter, start: usize, end: usize) -> (Vec<usize>, usize) {
        let mut window = Window {
            filter,
            start,
            end,
            seen: 0,
            items: Vec::new(),
        };
        let mut offered = 0;
        for letter in letters() {
            offered += 1;
            if window.offer(&letter).is_break() {
                break;
            }
        }
        (window.items.iter().map(|s| s.position).collect(), offered)
    }

    #[test]
    fn a_window_stops_at_its_last_letter() {
        assert_eq!(positions(&Filter::all(), 0, 1), (vec![1], 1));
        assert_eq!(positions(&Filter::all(), 1, 3), (vec![2, 3], 3));
        assert_eq!(positions(&Filter::all(), 2, 100), (vec![3, 4], 4));
        let emails = Filter {
            job_type: Some("email".into()),
            ..Filter::all()
        };
        assert_eq!(positions(&emails, 1, 2), (vec![3], 3));
        assert_eq!(positions(&emails, 0, 0), (vec![], 1));
    }
}
