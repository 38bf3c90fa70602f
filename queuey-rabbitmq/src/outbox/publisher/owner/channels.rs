//! The lane's channels: opening one in confirm mode, retiring one the
//! broker refused, and dropping one that failed, answering what was in
//! flight on it.

use lapin::Channel;
use queuey_core::Error;
use tokio::time::Instant;

use super::{Open, Owner};
use crate::channel;
use crate::error::Failure;
use crate::outbox::publisher::confirms::{InFlight, uncertain};

impl Owner {
    /// The lane's channel and its number, opened (in confirm mode) on the
    /// current connection if there is none or it closed; waits for a
    /// reconnection until `deadline`.
    pub(super) async fn channel(
        &mut self,
        deadline: Instant,
        queue: &str,
    ) -> Result<(u64, Channel), Error> {
        self.abandon_closed_refused();
        if let Some(open) = &self.channel {
            if open.channel.status().connected() {
                return Ok((open.id, open.channel.clone()));
            }
            // Closed under us: whatever is in flight on it is unknown.
            let id = open.id;
            self.abandon(id, "the publishing channel closed");
        }
        self.link.ensure_open()?;
        let what = format!("publishing to `{queue}`");
        let current = self.link.connection_until(deadline, &what).await?;
        let opening = format!("opening a publishing channel for `{queue}`");
        let open = channel::open_confirmed(&current.connection, &opening);
        let opened = match tokio::time::timeout_at(deadline, open).await {
            Ok(opened) => opened,
            Err(_) => Err(crate::bound::timed_out(
                &opening,
                deadline.saturating_duration_since(Instant::now()),
            )),
        };
        match opened {
            Ok(channel) => {
                self.opened += 1;
                let id = self.opened;
                self.channel = Some(Open {
                    id,
                    channel: channel.clone(),
                    current,
                });
                Ok((id, channel))
            }
            Err(e) => {
                if e.is_connection_lost() {
                    self.link.suspect(current.generation);
                }
                Err(e)
            }
        }
    }

    /// Stops sending on the current channel, which the broker refused a
    /// publish on (see the module docs of `publisher`): the next request
    /// opens a fresh one; this one is closed once its publishes in flight
    /// are decided.
    pub(super) fn retire(&mut self) {
        if let Some(open) = self.channel.take() {
            tracing::debug!(
                channel = open.channel.id(),
                "the broker refused a publish; later publishes go on a fresh channel"
            );
            self.refused.push(open);
        }
    }

    /// Closes the refused channels with nothing left in flight.
    pub(super) fn close_drained(&mut self) {
        let in_flight = &self.in_flight;
        self.refused.retain(|open| {
            let busy = in_flight.iter().any(|entry| entry.channel == open.id);
            if !busy {
                channel::close_later(&open.channel);
            }
            busy
        });
    }

    /// Answers the publishes in flight on refused channels that closed
    /// under them (the connection died while they drained).
    pub(super) fn abandon_closed_refused(&mut self) {
        let closed: Vec<u64> = self
            .refused
            .iter()
            .filter(|open| !open.channel.status().connected())
            .map(|open| open.id)
            .collect();
        for id in closed {
            self.abandon(id, "the publishing channel closed");
        }
    }

    /// A confirmation failed: channel `id` (or its connection) is gone. The
    /// publishes still in flight on it are answered and the channel
    /// dropped, together with every return lapin may still hold for it.
    ///
    /// When the broker closed only the channel (a refused publish), the
    /// oldest publish in flight, the first it can have refused, gets the
    /// broker's reason; every other one is
    /// [`BackendErrorKind::Uncertain`](queuey_core::BackendErrorKind::Uncertain)
    /// and is published again by its caller.
    pub(super) fn channel_failed(&mut self, id: u64, failed: Vec<(InFlight, lapin::Error)>) {
        let connection_alive = self
            .open(id)
            .is_some_and(|open| open.current.connection.status().connected());
        let mut failed = failed.into_iter();
        let Some((first, error)) = failed.next() else {
            return;
        };
        let failure = Failure::of(&error, connection_alive);
        let mut victims: Vec<InFlight> = std::iter::once(first)
            .chain(failed.map(|(entry, _)| entry))
            .chain(self.take_in_flight(id))
            .collect();
        victims.sort_by_key(|entry| entry.sequence);
        let mut victims = victims.into_iter();
        if failure.reply_code.is_some()
            && !failure.connection_lost
            && let Some(oldest) = victims.next()
        {
            let what = format!("publishing to `{}`", oldest.queue);
            self.answer(oldest.reply, Err(failure.clone().into_error(&what)));
        }
        for entry in victims {
            let what = format!("publishing to `{}`", entry.queue);
            self.answer(entry.reply, Err(uncertain(&what, &failure.text)));
        }
        self.drop_channel(id, failure.connection_lost);
    }

    /// Fails every publish in flight on channel `id` as
    /// [`BackendErrorKind::Uncertain`](queuey_core::BackendErrorKind::Uncertain)
    /// and drops the channel.
    pub(super) fn abandon(&mut self, id: u64, why: &str) {
        for entry in self.take_in_flight(id) {
            let what = format!("publishing to `{}`", entry.queue);
            self.answer(entry.reply, Err(uncertain(&what, why)));
        }
        self.drop_channel(id, true);
    }

    /// Removes the publishes in flight on channel `id`, and the returns
    /// recorded for them.
    fn take_in_flight(&mut self, id: u64) -> Vec<InFlight> {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.in_flight)
            .into_iter()
            .partition(|entry| entry.channel == id);
        self.in_flight = rest;
        for entry in &mine {
            self.returned.remove(&entry.message_id);
        }
        mine
    }

    /// The lane's channel numbered `id`, current or refused.
    fn open(&self, id: u64) -> Option<&Open> {
        self.channel
            .iter()
            .chain(&self.refused)
            .find(|open| open.id == id)
    }

    /// Forgets channel `id`; reports its connection to the supervisor when
    /// it looks lost.
    fn drop_channel(&mut self, id: u64, connection_suspect: bool) {
        let open = if self.channel.as_ref().is_some_and(|open| open.id == id) {
            self.channel.take()
        } else {
            let at = self.refused.iter().position(|open| open.id == id);
            at.map(|at| self.refused.swap_remove(at))
        };
        if let Some(open) = open {
            if connection_suspect {
                self.link.suspect(open.current.generation);
            }
            channel::close_later(&open.channel);
        }
    }
}
