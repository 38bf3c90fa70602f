//! The checks made before anything is declared.

use queuey_core::{Error, QueueConfig};

use crate::RabbitMqOptions;
use crate::topology::{self, HoldQueues};

/// Refuses a queue this backend cannot declare, before anything reaches
/// the broker: an invalid config, a name that leaves no room for its hold,
/// dead-letter and suspect queues, or a quorum queue with classic hold
/// queues.
pub(crate) fn check(config: &QueueConfig, options: &RabbitMqOptions) -> Result<(), Error> {
    config.validate()?;
    topology::check_room(
        config.name(),
        options.settings().deferred_suffix(),
        options.dead_suffix_in_use(),
        options.suspect_suffix_in_use(),
        options.hold_queues,
    )?;
    if config.is_quorum() && options.hold_queues == HoldQueues::Classic {
        return Err(Error::invalid_config(format!(
            "queue `{}` is a quorum queue, but this backend uses classic hold queues, \
             which lose the jobs they release into a quorum queue whenever the \
             broker restarts; use `RabbitMqOptions::hold_queues(HoldQueues::Quorum)` \
             (the default) or a classic work queue",
            config.name()
        )));
    }
    Ok(())
}
