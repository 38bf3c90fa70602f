//! What a leader does with ticks nobody fired in time.

use std::time::{Duration, SystemTime};

use queuey_core::periodic::Schedule;

/// What to do with ticks that passed while no process could fire them (the
/// whole fleet was down, a leader was lost and the next took over late).
///
/// A tick is *missed* when it is more than the periodic job's
/// [grace](super::Periodic::grace) in the past by the time a leader looks
/// at it; ticks within the grace fire as usual whatever the policy.
///
/// ```
/// use queuey_tower::periodic::Missed;
///
/// assert_eq!(Missed::default(), Missed::FireOnce);
/// let each = Missed::FireEach { max: 10 };
/// # let _ = each;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Missed {
    /// Fire none of them: the next tick fires as usual.
    Skip,
    /// Fire once, for the latest missed tick (the default): a nightly job
    /// whose night was missed runs once as soon as a leader is back.
    #[default]
    FireOnce,
    /// Fire each missed tick, oldest first, but at most the latest `max`
    /// of them; older ones are skipped.
    FireEach {
        /// The most missed ticks fired at once.
        max: u32,
    },
}

/// What a leader fires for the ticks in `(after, now]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Plan {
    /// The ticks to enqueue, oldest first.
    pub(crate) fire: Vec<SystemTime>,
    /// Missed ticks not fired.
    pub(crate) skipped: u64,
    /// The latest tick in `(after, now]`, fired or skipped: what to record.
    pub(crate) through: Option<SystemTime>,
}

/// The most ticks counted one by one when skipping (a cron expression has
/// no arithmetic for it); past it, the count says "at least".
const COUNT_CAP: u64 = 100_000;

/// Plans the ticks in `(after, now]`: those more than `grace` old are
/// missed, and `missed` decides which of them fire; the others fire.
pub(crate) fn plan(
    schedule: &Schedule,
    missed: Missed,
    grace: Duration,
    after: SystemTime,
    now: SystemTime,
) -> Plan {
    let Some(through) = schedule.latest_at_or_before(now).filter(|t| *t > after) else {
        return Plan::default();
    };
    let cutoff = now.checked_sub(grace).unwrap_or(after).max(after);
    let latest_missed = schedule.latest_at_or_before(cutoff).filter(|t| *t > after);
    let mut fire = Vec::new();
    let mut skipped = 0;
    if let Some(latest) = latest_missed {
        let count = count(schedule, after, latest);
        let keep = match missed {
            Missed::Skip => 0,
            Missed::FireOnce => 1,
            Missed::FireEach { max } => u64::from(max),
        }
        .min(count);
        skipped = count - keep;
        let mut tick = Some(latest);
        for _ in 0..keep {
            let Some(t) = tick else { break };
            fire.push(t);
            tick = t
                .checked_sub(Duration::from_millis(1))
                .and_then(|before| schedule.latest_at_or_before(before))
                .filter(|p| *p > after);
        }
        fire.reverse();
    }
    fire.extend(schedule.ticks_between(cutoff, now));
    Plan {
        fire,
        skipped,
        through: Some(through),
    }
}

/// How many ticks fall in `(after, until]`.
fn count(schedule: &Schedule, after: SystemTime, until: SystemTime) -> u64 {
    if let Some(period) = schedule.period() {
        let ms = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis())
        };
        let p = period.as_millis();
        return u64::try_from(ms(until) / p - ms(after) / p).unwrap_or(u64::MAX);
    }
    schedule
        .ticks_between(after, until)
        .take(COUNT_CAP as usize)
        .count() as u64
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn s(n: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(n)
    }

    fn every_second() -> Schedule {
        Schedule::every(Duration::from_secs(1)).unwrap()
    }

    const GRACE: Duration = Duration::from_millis(1500);

    #[test]
    fn a_tick_on_time_fires_whatever_the_policy() {
        for missed in [Missed::Skip, Missed::FireOnce, Missed::FireEach { max: 3 }] {
            let plan = plan(&every_second(), missed, GRACE, s(100), s(101));
            assert_eq!(plan.fire, vec![s(101)], "{missed:?}");
            assert_eq!(plan.skipped, 0);
            assert_eq!(plan.through, Some(s(101)));
        }
    }

    #[test]
    fn nothing_due_plans_nothing() {
        let plan = plan(&every_second(), Missed::FireOnce, GRACE, s(100), s(100));
        assert_eq!(plan, Plan::default());
    }

    #[test]
    fn skip_fires_only_what_is_within_the_grace() {
        // Ticks 101..=110 are due at 110.2; 109 and 110 are within 1.5 s.
        let now = s(110) + Duration::from_millis(200);
        let plan = plan(&every_second(), Missed::Skip, GRACE, s(100), now);
        assert_eq!(plan.fire, vec![s(109), s(110)]);
        assert_eq!(plan.skipped, 8);
        assert_eq!(plan.through, Some(s(110)));
    }

    #[test]
    fn fire_once_fires_the_latest_missed() {
        let now = s(110) + Duration::from_millis(200);
        let plan = plan(&every_second(), Missed::FireOnce, GRACE, s(100), now);
        assert_eq!(plan.fire, vec![s(108), s(109), s(110)]);
        assert_eq!(plan.skipped, 7);
    }

    #[test]
    fn fire_each_fires_the_latest_max_oldest_first() {
        let now = s(110) + Duration::from_millis(200);
        let plan = plan(
            &every_second(),
            Missed::FireEach { max: 3 },
            GRACE,
            s(100),
            now,
        );
        assert_eq!(plan.fire, vec![s(106), s(107), s(108), s(109), s(110)]);
        assert_eq!(plan.skipped, 5);
        let all = super::plan(
            &every_second(),
            Missed::FireEach { max: 100 },
            GRACE,
            s(100),
            now,
        );
        assert_eq!(all.fire.len(), 10);
        assert_eq!(all.skipped, 0);
    }

    #[test]
    fn a_daily_tick_missed_by_hours_fires_once_or_not_at_all() {
        let daily = Schedule::every(Duration::from_secs(86_400)).unwrap();
        let now = s(86_400 * 3 + 7_200);
        let once = plan(&daily, Missed::FireOnce, GRACE, s(86_400), now);
        assert_eq!(once.fire, vec![s(86_400 * 3)]);
        assert_eq!(once.skipped, 1);
        let skip = plan(&daily, Missed::Skip, GRACE, s(86_400), now);
        assert!(skip.fire.is_empty());
        assert_eq!(skip.skipped, 2);
        assert_eq!(skip.through, Some(s(86_400 * 3)));
    }

    #[test]
    fn a_huge_gap_is_counted_not_walked() {
        let ms = Schedule::every(Duration::from_millis(1)).unwrap();
        let plan = plan(&ms, Missed::Skip, GRACE, s(0), s(1_000_000));
        assert_eq!(plan.skipped, 1_000_000_000 - 1_500);
        assert_eq!(plan.fire.len(), 1_500);
        assert_eq!(plan.fire.last(), Some(&s(1_000_000)));
    }
}
