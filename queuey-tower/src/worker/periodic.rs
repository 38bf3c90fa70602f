//! Periodic jobs a worker fires beside its handlers.

use futures::future::BoxFuture;
use queuey_core::backend::Backend;
use queuey_core::periodic::Leadership;
use queuey_core::{Error, Job, Namespace, Producer, Queues};
use tokio::sync::watch;

use crate::periodic::{Entry, Periodic, check_unique};

/// Starts one schedule's loop in the worker's namespace; it runs until the
/// stop signal.
type Start = Box<dyn FnOnce(Namespace, watch::Receiver<bool>) -> BoxFuture<'static, ()> + Send>;

/// A periodic job given to the builder, with its job type and backend
/// erased.
pub(crate) struct PeriodicStart {
    pub(crate) name: String,
    /// Why the declaration is unusable, if it is.
    pub(crate) refused: Option<String>,
    pub(crate) start: Start,
}

impl PeriodicStart {
    pub(crate) fn new<Q, B, J>(backend: B, periodic: Periodic<J>) -> Self
    where
        Q: Queues,
        B: Backend + Leadership + Clone,
        J: Job<Queues = Q>,
    {
        let name = periodic.name().to_owned();
        let refused = Entry::<Q, B>::check(&periodic).err().map(|e| match e {
            Error::InvalidConfig(message) => message,
            other => other.to_string(),
        });
        let start: Start = Box::new(move |namespace, stop| {
            let producer = Producer::<Q, B>::builder(backend)
                .namespace(namespace)
                .build_undeclared();
            Box::pin(crate::periodic::run::run(
                producer,
                std::sync::Arc::new(periodic),
                stop,
            ))
        });
        PeriodicStart {
            name,
            refused,
            start,
        }
    }
}

/// Checks every periodic job, and that no two share a name.
pub(crate) fn check_all(periodic: &[PeriodicStart]) -> Result<(), Error> {
    for (i, p) in periodic.iter().enumerate() {
        if let Some(refused) = &p.refused {
            return Err(Error::invalid_config(refused.clone()));
        }
        check_unique(&p.name, periodic[..i].iter().map(|q| q.name.as_str()))?;
    }
    Ok(())
}
