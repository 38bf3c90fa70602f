//! The run's tenants, each named so that it has a shard of its own: a
//! tenant's shard is a hash of its name, so two names may share one, and
//! tenants sharing a shard share its order (which is not what this
//! benchmark measures).

use crate::BenchResult;
use crate::queue::shard_of;

/// The weight of the heavy tenant; every other tenant weighs 1.
pub(crate) const HEAVY_WEIGHT: u32 = 3;

/// Every tenant of the run.
#[derive(Debug, Clone)]
pub(crate) struct Tenants {
    /// Enqueues the flood.
    pub(crate) flood: String,
    /// Enqueues one timed job per trial while the flood waits.
    pub(crate) probe: String,
    /// Weight [`HEAVY_WEIGHT`] in the shares phase.
    pub(crate) heavy: String,
    /// Weight 1 in the shares phase.
    pub(crate) light: [String; 2],
}

impl Tenants {
    /// Names on distinct shards (the queue must be set up first).
    pub(crate) fn pick() -> BenchResult<Tenants> {
        let mut taken = Vec::new();
        let mut next = |role: &str| -> BenchResult<String> {
            let name = (0..10_000)
                .map(|i| format!("{role}-{i}"))
                .find(|name| !taken.contains(&shard_of(name)))
                .ok_or_else(|| format!("no shard left for a `{role}` tenant: give more shards"))?;
            taken.push(shard_of(&name));
            Ok(name)
        };
        Ok(Tenants {
            flood: next("flood")?,
            probe: next("probe")?,
            heavy: next("heavy")?,
            light: [next("light")?, next("light")?],
        })
    }

    /// Their weights as the workers read them: `tenant=weight,...`.
    pub(crate) fn weights(&self) -> String {
        let mut pairs = vec![
            format!("{}={HEAVY_WEIGHT}", self.heavy),
            format!("{}=1", self.flood),
            format!("{}=1", self.probe),
        ];
        pairs.extend(self.light.iter().map(|t| format!("{t}=1")));
        pairs.join(",")
    }

    /// The tenants of the shares phase with their weights.
    pub(crate) fn weighted(&self) -> Vec<(&str, u32)> {
        let mut all = vec![(self.heavy.as_str(), HEAVY_WEIGHT)];
        all.extend(self.light.iter().map(|t| (t.as_str(), 1)));
        all
    }
}
