//! The job types of one queue, found by name once per delivery.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use super::fnv::Fnv1a;
use super::route::Route;

/// Above this many job types a queue's routes are found through a hash
/// map; at or below it, by comparing names in turn, which costs less than
/// hashing one name.
const SCAN_UP_TO: usize = 8;

/// The routes of one queue, each at a fixed index for the queue's life.
pub(crate) struct Routes {
    routes: Vec<Box<dyn Route>>,
    /// Each job type's index, once there are more than [`SCAN_UP_TO`].
    index: Option<HashMap<&'static str, usize, BuildHasherDefault<Fnv1a>>>,
}

impl Routes {
    pub(crate) fn new() -> Self {
        Routes {
            routes: Vec::new(),
            index: None,
        }
    }

    /// Adds a job type's route; `false` (and nothing added) when the job
    /// type has one already.
    pub(crate) fn insert(&mut self, route: Box<dyn Route>) -> bool {
        let job_type = route.job_type();
        if self.find(job_type).is_some() {
            return false;
        }
        self.routes.push(route);
        if self.routes.len() > SCAN_UP_TO {
            let index = self.index.get_or_insert_with(|| {
                let mut index = HashMap::default();
                index.reserve(self.routes.len());
                index
            });
            for (i, route) in self.routes.iter().enumerate() {
                index.insert(route.job_type(), i);
            }
        }
        true
    }

    /// The index of `job_type`'s route, if the queue has one.
    pub(crate) fn find(&self, job_type: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(job_type).copied(),
            None => self.routes.iter().position(|r| r.job_type() == job_type),
        }
    }

    /// The route at `index` (from [`find`](Self::find)).
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut (dyn Route + 'static)> {
        self.routes.get_mut(index).map(|route| &mut **route)
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll};

    use queuey_core::BoxError;

    use super::*;
    use crate::worker::route::{Delivered, JobFuture};

    struct Named(&'static str);

    impl Route for Named {
        fn job_type(&self) -> &'static str {
            self.0
        }
        fn queue(&self) -> &'static str {
            "q"
        }
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }
        fn declared_unique(&self) -> crate::worker::wing::unique::Declared {
            |_| None
        }
        fn call(&mut self, _: Delivered<'_>) -> Result<JobFuture, String> {
            Err("not called here".to_owned())
        }
    }

    const NAMES: [&str; 12] = [
        "a",
        "b",
        "send_email",
        "resize",
        "e",
        "f",
        "g",
        "h",
        "i",
        "j",
        "k",
        "l",
    ];

    #[test]
    fn every_job_type_is_found_by_scanning_and_through_the_index() {
        for count in [1, SCAN_UP_TO, SCAN_UP_TO + 1, NAMES.len()] {
            let mut routes = Routes::new();
            for name in &NAMES[..count] {
                assert!(routes.insert(Box::new(Named(name))));
            }
            assert_eq!(routes.index.is_some(), count > SCAN_UP_TO);
            for (i, name) in NAMES[..count].iter().enumerate() {
                let found = routes.find(name).unwrap();
                assert_eq!(found, i);
                assert_eq!(routes.get_mut(found).unwrap().job_type(), *name);
            }
            assert_eq!(routes.find("unknown"), None);
            assert_eq!(routes.routes.len(), count);
        }
    }

    #[test]
    fn a_job_type_given_twice_is_refused() {
        let mut routes = Routes::new();
        for name in NAMES {
            assert!(routes.insert(Box::new(Named(name))));
        }
        assert!(!routes.insert(Box::new(Named("resize"))));
        assert!(!routes.insert(Box::new(Named("a"))));
        assert_eq!(routes.routes.len(), NAMES.len());
    }
}
